/* A model on the GPU: its weights uploaded, its KV cache, and its forward
 * pass (the architecture's graph, model/arch/) recorded as a list of
 * dispatches ending in one fence, for one token (a decode step, about five
 * dispatches a layer), a few (a small batch) or a prefill chunk.
 *
 * Per step:  embedding lookup of the token id in the token buffer
 *            per layer: [RMSNorm + Q/K/V + bias + RoPE + K/V cache write]
 *                       [attention (+ a merge of its chunks on long contexts)]
 *                       [O projection + residual] [RMSNorm + gate/up + SiLU*up]
 *                       [down projection + residual]
 *            [final RMSNorm + lm_head] [argmax partials] [argmax -> token buffer]
 * The token buffer is persistently mapped: the host writes prompt ids into
 * it, the argmax writes each next id into the following slot (so a greedy
 * step reads 4 bytes back, and the next step can read its token on the GPU). */
#ifndef GLESLLM_MODEL_GPU_MODEL_H
#define GLESLLM_MODEL_GPU_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/tuning.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "ops/sample.h"

typedef enum kv_placement { KV_AUTO = 0, KV_DEVICE, KV_MAPPED } kv_placement;

/* Where the KV cache goes on this GPU and why (for `glesllm info --gpu`):
 * the tuning's kv (GLESLLM_KV=device|mapped) where set; else mapped storage
 * where the GPU shares memory with the CPU, device buffers where the driver
 * reports dedicated memory (a discrete GPU reads mapped storage over the
 * bus). t may be NULL. */
glesllm_status kv_placement_choose(gpu_context *ctx, const tuning *t, kv_placement *out,
                                   const char **why);
const char *kv_placement_name(kv_placement p);

/* Whether a decode step reads each layer's FFN down matrix into the GPU's
 * cache while the gate/up matvec before it runs (ops/prefetch.h), and why:
 * the tuning's prefetch (GLESLLM_PREFETCH=0|1) where set; else
 * prefetch_choose's rule. t may be NULL. */
void gpu_model_prefetch_choose(gpu_context *ctx, const tuning *t, uint64_t down_bytes, bool *out,
                               const char **why);

typedef struct gpu_model gpu_model;

typedef struct gpu_model_options {
    uint32_t n_ctx;         /* context length (KV cache positions) */
    kv_placement kv;        /* KV_AUTO: kv_placement_choose */
    /* called after each tensor upload; may be NULL */
    void (*progress)(void *ud, uint64_t done_bytes, uint64_t total_bytes);
    void *progress_ud;
    uint32_t n_batch;       /* prefill chunk (0: GPU_N_BATCH; at most n_ctx, less when
                               the GPU's storage-block limit says so) */
    int32_t n_small;        /* prefills of at most this many tokens read each weight
                               once for up to 8 tokens (multi-token matvecs) instead
                               of the tiled matmul (0: GPU_SMALL_BATCH; < 0: never) */
    bool f32_tiles;         /* prefill tiles in f32 even where the default is f16
                               (matmul_default_config): prefill logits then equal
                               decode's to f32 rounding */
    int32_t prefetch;       /* the FFN down matrix into the cache beside gate/up:
                               0 prefetch_choose, > 0 on, < 0 off */
    const tuning *tuning;   /* NULL: the engine's choices (TUNING_DEFAULT) */
    /* another gpu_model of the same model and GPU context whose weights this
     * one reads instead of uploading its own (the cache, activations and
     * kernels are its own): it must outlive this one. NULL: none */
    const gpu_model *share;
    /* weights in buffers of at most this many bytes (0: the storage-block
     * limit): tests split small weights so, experts whole */
    uint64_t max_part_bytes;
    /* sequences the cache holds, each n_ctx positions at most (0: 1); more
     * than one needs a model of attention layers only */
    uint32_t n_seq;
    /* positions the cache's pool of pages holds for every sequence
     * together (0: room for each sequence's n_ctx) */
    uint64_t kv_size;
} gpu_model_options;

/* Positions a page of the KV cache (the tuning's kv_page stands in for it;
 * bench/RESULTS.md "The paged KV cache") */
#define GPU_KV_PAGE 32

/* Tokens a prefill chunk (gpu_model_options.n_batch) */
#define GPU_N_BATCH 512

#define GPU_SMALL_BATCH 8
/* the most tokens of a small batch (gpu_model_options.n_small, the tuning) */
#define GPU_SMALL_BATCH_MAX 64
/* the small batch of a cache of several sequences: room for a prompt's
 * chunk beside a server's generating sequences in one pass (bench/RESULTS.md
 * "The server") */
#define GPU_SEQS_BATCH 64

/* Uploads every tensor (repacked) and creates the cache. Checks the memory
 * it needs against what the driver says is free first. */
glesllm_status gpu_model_create(gpu_context *ctx, const model *m, const gpu_model_options *opt,
                                gpu_model **out);
void gpu_model_destroy(gpu_model *gm);

uint32_t gpu_model_n_ctx(const gpu_model *gm);
uint32_t gpu_model_n_vocab(const gpu_model *gm);
kv_placement gpu_model_kv(const gpu_model *gm);
uint64_t gpu_model_weight_bytes(const gpu_model *gm);
/* glesllm_context_step_bytes: the weight bytes a decode step reads */
uint64_t gpu_model_step_bytes(const gpu_model *gm);

/* Puts token id `token` in slot `pos` of the token buffer. A step with
 * GPU_STEP_ARGMAX at pos - 1 writes that slot too: wait for it first. */
glesllm_status gpu_model_set_token(gpu_model *gm, uint32_t pos, int32_t token);
/* The id in slot `pos` (after gpu_model_wait). */
int32_t gpu_model_get_token(const gpu_model *gm, uint32_t pos);

typedef enum gpu_step_flags {
    GPU_STEP_LOGITS = 1,     /* compute the logits */
    GPU_STEP_ARGMAX = 2,     /* and write their argmax into slot pos + 1 */
    GPU_STEP_CANDIDATES = 4, /* or apply the penalty and reduce them to the top K */
    GPU_STEP_ALL_LOGITS = 8, /* prefill: the logits of every position too */
    GPU_STEP_ARGMAX_ALL = 16, /* prefill of at most gpu_model_n_small tokens: the argmax
                                 of every position p's logits into slot p + 1 (the
                                 greedy check of drafted tokens) */
    GPU_STEP_PLAIN = 32, /* prefill: the kernels a model loaded with the default small
                           batch (GPU_SMALL_BATCH, or the tuning's small_batch) would take,
                           not the small batches of a gpu_model_options.n_small above
                           it: speculative decoding's prompt, so that the target's
                           K/V of it are plain decoding's (the small batches' and the
                           tiled prefill's sums round differently) */
    GPU_STEP_CHUNK = 64 /* prefill: one chunk of a longer prompt, through the tiled
                           passes whatever its length, as one prefill of the whole
                           prompt would run it */
} gpu_step_flags;

#define GPU_MAX_CANDIDATES SAMPLE_MAX_K

/* What GPU_STEP_CANDIDATES does: the repetition penalty (1: none) over the
 * token slots [pos + 1 - last_n, pos], then the k (<= GPU_MAX_CANDIDATES)
 * largest logits. */
glesllm_status gpu_model_set_sampling(gpu_model *gm, uint32_t k, float penalty, uint32_t last_n);

/* After a GPU_STEP_CANDIDATES step and gpu_model_wait: the k candidates in
 * falling order (fewer when the vocabulary is smaller), the largest logit
 * and the sum of exp(logit - max) over the whole vocabulary (after the
 * penalty). Returns how many candidates. */
uint32_t gpu_model_candidates(const gpu_model *gm, float *vals, int32_t *ids, float *max,
                              float *sum_exp);

/* Records and submits the step for the token in slot `pos` at position
 * `pos` (every earlier position is in the cache). Does not wait. */
glesllm_status gpu_model_step(gpu_model *gm, uint32_t pos, unsigned flags);
glesllm_status gpu_model_wait(gpu_model *gm);
/* Waits for the submission before the last (gpu_queue_wait_prior): a
 * GPU_STEP_ARGMAX step at pos + 1 reads the token the step at pos writes on
 * the GPU, so it can be submitted before that one is waited for, and the
 * host reads slot pos + 1 after this while the step at pos + 1 runs. */
glesllm_status gpu_model_wait_prior(gpu_model *gm);

/* Prefill: the tokens in slots pos .. pos + n - 1 at those positions (every
 * earlier position is in the cache) as batched passes of at most n_batch
 * tokens (matrix-matrix products, the weights read once per chunk), one
 * submission each; K and V of every position go into the cache. `flags`
 * as for gpu_model_step, for the last token (its argmax into slot pos + n);
 * GPU_STEP_ALL_LOGITS also keeps the logits of every position (n <= n_batch),
 * read with gpu_model_read_logits_all. Does not wait. */
glesllm_status gpu_model_prefill(gpu_model *gm, uint32_t pos, uint32_t n, unsigned flags);
uint32_t gpu_model_n_batch(const gpu_model *gm);
uint32_t gpu_model_n_small(const gpu_model *gm);
/* Builds the multi-token kernels of every size now (each size's are
 * otherwise built by its first prefill of at most n_small tokens): for a
 * caller about to run passes of many sizes (speculative decoding), so that
 * no pass waits for the compiler. */
glesllm_status gpu_model_prepare_small(gpu_model *gm);

/* The cache holds positions [0, n_past): steps and prefills start at most at
 * n_past, and set it to the end of what they computed (a step at an earlier
 * position drops the later ones: they were computed after another token). */
uint32_t gpu_model_n_past(const gpu_model *gm);

/* Sequences (gpu_model_options.n_seq): every call on positions, tokens and
 * the cache is on the selected one (0 at first). Switching between
 * sequences between calls is free. */
uint32_t gpu_model_n_seq(const gpu_model *gm);
glesllm_status gpu_model_select_seq(gpu_model *gm, uint32_t seq);
uint32_t gpu_model_seq_past(const gpu_model *gm, uint32_t seq);
int32_t gpu_model_seq_token(const gpu_model *gm, uint32_t seq, uint32_t pos);
/* Sequence dst's cache becomes the first n positions of src's (copied on
 * the GPU): a prompt start that another sequence ran, not run again. */
glesllm_status gpu_model_seq_copy(gpu_model *gm, uint32_t src, uint32_t dst, uint32_t n);
/* The cache's pages: positions a page, the pages sequences hold (a shared
 * page counted once) and the pool's. */
void gpu_model_kv_pages(const gpu_model *gm, uint32_t *page, uint32_t *used, uint32_t *total);
/* The sliding-window layers' own pool (the ring: 0 pages where they share
 * the full layers'), and the pages sequences hold there. */
void gpu_model_kv_ring(const gpu_model *gm, uint32_t *pages, uint32_t *used);
/* The ring of the selected sequence, for session files:
 *   gpu_model_ring_held    the first position it holds (0 without a ring),
 *                          after making it hold what its next pass reads
 *                          (running its positions again where a rollback
 *                          lost them)
 *   gpu_model_ring_reads   the first position a pass at n reads from it (0
 *                          without a ring: every position)
 *   gpu_model_ring_forget  its pages of positions before `from` given back
 *                          (not in a session file written to the cache) */
glesllm_status gpu_model_ring_held(gpu_model *gm, uint32_t *from);
uint32_t gpu_model_ring_reads(const gpu_model *gm, uint32_t n);
void gpu_model_ring_forget(gpu_model *gm, uint32_t from);
/* The pages sequences seqs[0..n) hold, each counted once. */
uint32_t gpu_model_kv_pages_of(const gpu_model *gm, const uint32_t *seqs, uint32_t n);
/* Whether this model can step several sequences in one batch. */
bool gpu_model_batch_ok(const gpu_model *gm);
/* counts[i] tokens (NULL: one each) of each of n distinct sequences
 * seqs[0..n) in one pass, the weights read once for all (at most
 * gpu_model_n_small tokens in all): each sequence's tokens in its slots
 * n_past on, as for gpu_model_prefill; afterwards each n_past is counts[i]
 * more, the argmax of its last token's logits in its next slot and in
 * picks[i] (may be NULL), and those logits readable as row i of
 * gpu_model_read_logits_all. Waits for the GPU. */
glesllm_status gpu_model_step_batch(gpu_model *gm, uint32_t n, const uint32_t *seqs,
                                    const uint32_t *counts, int32_t *picks);
/* Rolls the cache back to its first n_past positions (n_past <= the current
 * one): no copy, the later entries are overwritten by the next steps. */
glesllm_status gpu_model_truncate(gpu_model *gm, uint32_t n_past);

/* Tokens run again to make a state the model no longer held: a recurrent
 * model's (a rollback past the state before the last pass and the anchor:
 * gpu_model_impl.h SSM_SLOTS), or the K/V of the window layers' ring (a
 * rollback further back than a pass). */
uint64_t gpu_model_replayed(const gpu_model *gm);
/* The GPU memory of the KV cache (every attention layer's buffer). */
uint64_t gpu_model_kv_gpu_bytes(const gpu_model *gm);
/* The GPU memory of a recurrent model's states (every slot of every layer
 * with a Mamba block). */
uint64_t gpu_model_state_gpu_bytes(const gpu_model *gm);

/* A recurrent model's (Mamba's) states of one layer after its first n - 1
 * and n tokens (both, so that the last token can be run again, as a prompt
 * whose every token is cached is), gpu_model_state_bytes of them (F32: the
 * convolution's last inputs, then the scan's state, each; 0 bytes for a
 * transformer): read (n <= n_past; a state no longer held is made by running
 * tokens again), or written (the token slots 0 .. n - 1 set; n_past becomes
 * n: write every layer's before the next step). Waits for the GPU. Session
 * files (session.h) use it. */
uint64_t gpu_model_state_bytes(const gpu_model *gm);
glesllm_status gpu_model_state_io(gpu_model *gm, uint32_t layer, uint32_t n, void *data,
                                  bool write);

/* K and V (F16, n_head_kv * head_dim values a position) of positions
 * pos .. pos + n - 1 of one layer: read into k and v, or written from them.
 * A write needs pos <= n_past and makes n_past = pos + n: write every layer's
 * before the next step. Waits for the GPU. Session files (session.h) use it. */
glesllm_status gpu_model_kv_io(gpu_model *gm, uint32_t layer, uint32_t pos, uint32_t n, void *k,
                               void *v, bool write);
const model *gpu_model_model(const gpu_model *gm);
/* The dispatch queue the model records into (profiling, counters). */
gpu_queue *gpu_model_queue(gpu_model *gm);

/* Rows first .. first + count - 1 (n_vocab floats each) of the last
 * GPU_STEP_ALL_LOGITS prefill (slow: waits and copies). */
glesllm_status gpu_model_read_logits_all(gpu_model *gm, uint32_t first, uint32_t count, float *out);

/* The last step's logits (slow: waits and copies; tests and tools). */
glesllm_status gpu_model_read_logits(gpu_model *gm, float *out);

/* What the last layer left of the last step (row 0) or of a small prefill's
 * token `row` (gpu_model_n_small tokens or fewer), for tools that set the two
 * side by side (bench/bench_logits): the attention's output (heads x head_dim
 * floats), the FFN's hidden values (n_ff) or the residual after the layer
 * (n_embd); their count in *n. Waits; slow. */
typedef enum gpu_act_kind { GPU_ACT_ATTN, GPU_ACT_HIDDEN, GPU_ACT_X } gpu_act_kind;
glesllm_status gpu_model_read_act(gpu_model *gm, gpu_act_kind kind, bool small, uint32_t row,
                                  float *out, uint32_t *n);

/* Dispatches recorded by the last step. */
uint32_t gpu_model_last_dispatches(const gpu_model *gm);

#endif
