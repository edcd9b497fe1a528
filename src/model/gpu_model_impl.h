/* Inside the GPU model (model/ only): the uploaded weights, their kernels,
 * the activation buffer's layout, and the pass that records a layer's ops
 * for one token, a small batch or a prefill chunk. */
#ifndef GLESLLM_MODEL_GPU_MODEL_IMPL_H
#define GLESLLM_MODEL_GPU_MODEL_IMPL_H

#include "model/gpu_model.h"
#include "ops/attention.h"
#include "ops/get_rows.h"
#include "ops/matmul.h"
#include "ops/matvec.h"
#include "ops/moe.h"
#include "ops/norm.h"
#include "ops/prefetch.h"
#include "ops/rwkv.h"
#include "ops/sample.h"
#include "ops/ssm.h"

#define MAX_KERNELS 96
#define MAX_SEGMENTS 3
/* Slots of a layer's recurrent state: the states before and after the
 * last pass, and the one a rollback is expected to go back to (the anchor:
 * the state the first pass after a truncation started from, such as a
 * drafting round's start) */
#define SSM_SLOTS 3
#define ATTN_FEW_N 16 /* batches of at most this many tokens (or n_small) take attention's `few` */

/* Several-token kernels come in sets by how many tokens they take: a run of
 * n tokens takes the set of the fewest tokens >= n, so that a short pass
 * (verifying 1 or 2 drafted tokens) runs kernels whose registers and split
 * suit it (bench/RESULTS.md "Verifying drafted tokens"). The largest set is
 * built with the model, the others on first use. */
#define MULTI_SETS 4
typedef const matvec_kernel *multi_kernels[MULTI_SETS];

/* A weight and the kernels that read it: one token (k), prefill (mk), and the
 * several-token sets (vk). */
typedef struct gpu_linear {
    gpu_weight w;
    const matvec_kernel *k;
    const matmul_kernel *mk;
    multi_kernels vk;
} gpu_linear;

/* A run of rows of the fused Q|K|V matrix of one type (Q4_K_M's V is Q6_K). */
typedef struct segment {
    gpu_linear l;
    uint64_t row_base; /* its first row in the fused matrix */
} segment;

typedef struct gpu_layer {
    segment qkv[MAX_SEGMENTS];
    uint32_t n_qkv;
    gpu_linear wo, glu, down; /* glu: gate and up rows interleaved */
    /* mixture of experts (model_hparams.n_expert; glu and down unused): the
     * router, the experts' gate/up (each expert's rows interleaved as glu's)
     * and down, the shared expert's and its gate; one-token expert kernels
     * (matvec_variant.expert) in .k only */
    gpu_linear router, eglu, edown, sglu, sdown, sgate;
    gpu_buffer cache;         /* Q scratch | K | V */
    uint64_t attn_norm, ffn_norm, bias; /* float offsets in act */
    uint64_t q_norm, k_norm;  /* model_hparams.qk_norm: the weights' float offsets in act */
    uint64_t attn_post, ffn_post; /* model_hparams.post_norms: their weights' float offsets */
    uint32_t window;          /* model_layer_window: the positions a query sees, 0: all */
    bool ring;                /* its K/V in the window layers' pool (gpu_model.kv_ring) */
    uint64_t v_base;          /* V's uint offset in its cache (K's: gpu_model.k_base) */
    uint64_t rope;            /* float offset in act of its RoPE table (gm->rope, or
                                 gm->no_rope for a layer without RoPE) */
    /* a Mamba block (model_hparams.ssm): in (x | z), x (dt | B | C), out;
     * its small parameters (ops/ssm.h ssm_params) and its recurrent state's
     * slots (gm->slot apart) */
    gpu_linear ssm_in, ssm_x, ssm_out;
    gpu_buffer ssm_par, ssm_state;
    /* an RWKV-7 layer: the time mix's receptance, key, value and its
     * low-rank paths (decay, learning rate, value residual, gate: first and
     * second matrices), the channel mix's key; wo and down are the outputs;
     * its small parameters (ops/rwkv.h rwkv_params) in ssm_par, its state's
     * slots in ssm_state */
    gpu_linear rw_r, rw_k, rw_v, rw_w1, rw_w2, rw_a1, rw_a2, rw_v1, rw_v2, rw_g1, rw_g2, rw_ck;
    bool recurrent; /* a Mamba block or an RWKV time mix in place of attention
                       (model_layer.recurrent) */
    bool moe;       /* experts in place of the FFN (the layer has a router) */
} gpu_layer;

/* A pool of the KV cache's pages: each page's sequences (more than one: a
 * shared start), and the pages no sequence has (n_free of them). */
typedef struct kv_pool {
    uint32_t pages, n_free;
    uint32_t *ref, *free;
} kv_pool;

struct gpu_pass;
/* An architecture's graph: records every layer and the output head of a pass. */
typedef glesllm_status (*arch_graph)(struct gpu_pass *p);

struct gpu_model {
    gpu_context *ctx;
    gpu_queue *q;
    const model *m;
    const gpu_model *share; /* the weights are this one's (gpu_model_options.share) */
    arch_graph graph;
    tuning tune;
    uint32_t n_ctx;
    uint64_t max_part_bytes; /* gpu_model_options.max_part_bytes */
    kv_placement kv;
    gpu_weight tok_embd;
    gpu_linear out;  /* the output head (lm_head); tied: out.w is tok_embd, not owned */
    const gpu_weight *output; /* &out.w */
    get_rows_kernel embed;
    matvec_kernel kernels[MAX_KERNELS];
    uint32_t n_kernels;
    matmul_kernel mkernels[MAX_KERNELS];
    uint32_t n_mkernels;
    matmul_config mcfg, mcfg32; /* the prefill tiling; f32 tiles (F32 weights) */
    attn_kernels attn;
    norm_kernels norm;
    sample_kernels sample;
    prefetch_kernel prefetch;
    moe_kernels moe;
    qk_norm_kernel qk; /* model_hparams.qk_norm */
    /* experts: float offsets in act of n_batch tokens' router logits, routes
     * (k pairs a token), shared-expert gate logits, the experts' hidden rows
     * and outputs (a row a (token, slot), then the shared expert's a token),
     * the shared expert's hidden rows */
    uint64_t moe_logits, moe_route, moe_sgate, moe_hid, moe_out, moe_shared, moe_shid;
    uint64_t moe_group, moe_list; /* prefill: the entries grouped by expert (ops/moe.h) */
    bool prefetch_down; /* the down matrix into L2 beside gate/up (prefetch_choose) */
    uint64_t prefetch_bytes; /* its first bytes read (prefetch_bytes) */
    uint64_t prefetch_qkv;   /* with it, the next layer's Q/K/V first bytes beside down
                                (prefetch_qkv_bytes; 0 none) */
    /* prefills of at most n_small tokens: several-token matvecs (multi_nt
     * tokens a dispatch, in sets), the norm folded in, logits of every
     * position at vlog in act (n_small rows of act_stride(n_vocab)) */
    uint32_t n_small, multi_nt;
    uint32_t n_small_plain;     /* the default's n_small (GPU_STEP_PLAIN: small_limit) */
    uint32_t set_nt[MULTI_SETS], n_sets; /* the sets' tokens, ascending (multi_nt last) */
    bool set_built[MULTI_SETS];
    uint64_t vlog;
    uint64_t bxp; /* the units of x of a several-token matvec with matvec_config.xg */
    bool last_small; /* the last prefill took that path */
    /* RMSNorm split between the kernel that writes x and the matvec that
     * reads it (matvec_variant norm_out / norm_scale), else its own dispatch */
    bool fuse_norm;
    gpu_layer *layers;
    gpu_buffer act, tokens, cand;
    gpu_buffer xt; /* the f16-tile matmuls' token tiles (made on the first prefill chunk) */
    /* products of few row blocks in slices of their columns (ops/matmul.h;
     * made on the first prefill chunk where the GPU slices them) */
    matmul_slices slices;
    gpu_buffer slices_part;
    gpu_buffer attn_count; /* attention's chunk counters, a uint a (query, head) */
    uint32_t cand_k, pen_last_n;
    float pen;
    /* float offsets in act */
    uint64_t out_norm, rope, no_rope, x, xn, attn_out, hidden, logits, partials, argmax_part, lists;
    uint64_t sq; /* fuse_norm: the partial sums of squares of x (x times the weight at xn) */
    uint64_t k_base; /* K's uint offset in a layer's cache (V's: gpu_layer.v_base) */
    /* the cache's pages (kv_pages.c): kvl as the kernels see it; the page
     * table (kv_rows rows of kvl.pps entries, KV_NO_PAGE where none; the
     * one at the start of act is its copy): n_seq rows of pool 0, then with
     * kv_ring n_seq rows of pool 1, the window layers' ring (ops/kv_layout.h
     * kv_ring_pages a sequence, holding kv_hold positions before a pass of
     * at most kv_pass; kv_window the widest window) */
    kv_layout kvl;
    kv_pool kvp[2];
    uint32_t *kv_tab;
    uint32_t kv_rows;
    bool kv_ring;
    uint32_t kv_window, kv_hold, kv_pass;
    /* prefill: n_batch rows each (float offsets in act) */
    uint32_t n_batch;
    uint64_t bx, bxn, bq, battn, bhid;
    /* model_hparams.qk_norm: the projected q|k|v rows before the Q/K norm
     * (n_batch rows of act_stride(q_dim + 2 kv_dim); a step uses the first) */
    uint64_t bqkv;
    uint32_t few_n; /* batches of at most few_n tokens take attention's `few` */
    /* logits of every position (GPU_STEP_ALL_LOGITS): n_batch rows of
     * act_stride(n_vocab) in buffers of logits_rows rows, made on first use */
    gpu_buffer *logits_all;
    uint32_t n_logits_all, logits_rows;
    uint64_t weight_bytes;
    uint32_t last_dispatches;
    uint32_t n_past; /* positions [0, n_past) of the cache are valid */
    /* sequences (gpu_model_options.n_seq): the token slots hold n_seq runs
     * of n_ctx + 1, the cache their pages (kv_tab); seq is the
     * one the single-sequence calls use, and n_past is its while selected
     * (seq_past holds the others'); tok_scratch: a batch's token ids in, then
     * its picks out (n_small slots each) */
    uint32_t n_seq, seq;
    uint32_t *seq_past;
    uint32_t tok_scratch;
    /* Mamba blocks: their kernels; each layer's state buffer holds
     * SSM_SLOTS slots of the recurrent state, slot i the state after
     * slot_pos[i] tokens (slot_ok[i]: it holds one); float offsets in act of
     * n_batch rows each of x|z, the convolved x, dt|B|C, the output and the
     * steps' sums, and of the scan's carries */
    ssm_kernels ssm;
    ssm_slot slot;
    uint32_t slot_pos[SSM_SLOTS];
    bool slot_ok[SSM_SLOTS];
    int anchor;       /* the slot kept from being written over (-1: none) */
    bool anchor_next; /* a truncation: the next pass's source becomes the anchor */
    uint64_t replayed; /* tokens run again to make a state no slot held */
    uint64_t ssm_xz, ssm_xc, ssm_dbc, ssm_y, ssm_cum, ssm_carry, ssm_gram;
    /* RWKV-7: its kernels; float offsets in act of the embeddings' norm
     * (weight, bias; the output norm's bias follows its weight too) and of
     * n_batch rows each of the six mixes (rw_block apart), r, k, v, the
     * first layer's v, y, g, the low-rank paths' middles (their rank wide)
     * and outputs, and the channel mix's hidden rows */
    rwkv_kernels rwkv;
    uint64_t rw_tok_norm, rw_mix, rw_block, rw_r, rw_k, rw_v, rw_first, rw_y, rw_g;
    uint64_t rw_mw, rw_ma, rw_mv, rw_mg, rw_lw, rw_la, rw_lv, rw_hid;
    uint64_t rw_chunks; /* the chunked update's data (ops/rwkv.h rwkv_chunk_floats) */
    uint64_t post; /* model_hparams.post_norms: n_batch rows of O's or down's output */
};

/* kernels.c: the model's kernels, each variant built once (a kernel set).
 *   gm_linear_kernels   l's one-token, prefill and several-token kernels for
 *                       the variant `one` (the several-token ones from
 *                       `multi` where given: the output head's norm)
 *   gm_multi_tokens     the tokens of a several-token dispatch for small
 *                       batches of n_small; gm_multi_sets the set sizes
 *   gm_multi_set        the set for a run of n tokens; gm_build_multi_set
 *                       builds set si's kernels for every weight (first use) */
glesllm_status gm_linear_kernels(gpu_model *gm, gpu_linear *l, const matvec_variant *one,
                                 const matvec_variant *multi);
uint32_t gm_multi_tokens(uint32_t n_small);
/* l's one-token expert kernel (matvec_variant.expert) for rows `rows` a
 * dispatch (an expert's, or the whole weight's) */
glesllm_status gm_expert_kernel(gpu_model *gm, gpu_linear *l, uint64_t rows, matvec_epilogue e,
                                bool stacked);
/* the matmul of a dense weight beside the experts (the shared expert's) */
glesllm_status gm_plain_matmul(gpu_model *gm, gpu_linear *l, matvec_epilogue e);
void gm_multi_sets(gpu_model *gm);
uint32_t gm_multi_set(const gpu_model *gm, uint32_t n);
glesllm_status gm_build_multi_set(gpu_model *gm, uint32_t si);
void gm_kernels_destroy(gpu_model *gm);

/* The small batches of a prefill with these flags (GPU_STEP_PLAIN: the
 * default's), and the batches that take attention's `few`. */
uint32_t gm_small_limit(const gpu_model *gm, unsigned flags);
uint32_t gm_few_limit(const gpu_model *gm, unsigned flags);

/* pass.c: an error unless every position before pos is in the cache. */
glesllm_status gm_check_past(const gpu_model *gm, uint32_t pos);
/* The slot holding the recurrent state after pos > 0 tokens, made where no
 * slot holds it by running the tokens from the latest earlier state (else
 * the start) again: the token buffer still holds them. */
glesllm_status gm_ssm_slot_at(gpu_model *gm, uint32_t pos, uint32_t *slot);
/* Forgets the recurrent states past position pos (their tokens are no
 * longer the sequence's), and the anchor with its slot. */
void gm_drop_slots_after(gpu_model *gm, uint32_t pos);

/* ---- a pass ------------------------------------------------------------------ */

typedef enum pass_kind {
    PASS_STEP,  /* one token: one-token matvecs, the norm split across them */
    PASS_SMALL, /* up to n_small tokens: several-token matvecs, the norm folded in */
    PASS_CHUNK  /* a prefill chunk: tiled matmuls, the norm its own dispatch */
} pass_kind;

/* The tokens pos0 .. pos0 + n - 1 going through the layers, and what the ops
 * of the last layer left for the next (the norm's pending weight, where its
 * partial sums of squares are). pass.c records each op as its kind needs;
 * the architecture's graph (model/arch/) calls them in the model's order. */
typedef struct gpu_pass {
    gpu_model *gm;
    pass_kind kind;
    uint32_t pos0, n;
    unsigned flags;
    bool last;      /* PASS_CHUNK: the prefill's final chunk */
    uint64_t norm;  /* the weight (float offset in act) of the norm the next op reads */
    /* the weight and kernels that last wrote x (NULL: the embedding, before
     * any): with the norm split, where its partial sums of squares come from */
    const gpu_linear *wrote_x;
    /* a batch over sequences (gpu_model_step_batch): token t's (seq << 24) |
     * position; NULL: the tokens are positions pos0.. of the selected one */
    const uint32_t *seq_tab;
    const uint32_t *seq_tab_w; /* the same with the rows of the ring (gpu_model.kv_ring) */
    uint32_t n_logits; /* its rows with logits: the first n_logits */
    /* Mamba blocks: the state slot the pass starts from (none: an empty
     * state) and the one it leaves its state in */
    uint32_t src, dst;
    bool zero;
} gpu_pass;

/* The selected sequence's first token slot. */
static inline uint32_t gm_tok_base(const gpu_model *gm) { return gm->seq * (gm->n_ctx + 1); }

/* kv_pages.c: the pages of the cache.
 *   gm_kv_init     a pool of `positions` positions (rounded up to whole
 *                  pages of `page`; 0: every sequence's n_ctx), every
 *                  sequence without pages
 *   gm_kv_row      the cache row of a position of a row of the table (the
 *                  sequence's, or n_seq + its in the ring; it has its page)
 *   gm_kv_take     pages for positions pos .. pos + n - 1 of seq, its own
 *                  (a shared page copied first), before a pass writes
 *                  them; its pages past them given back. Fails, taking
 *                  nothing, when the pool has too few free.
 *   gm_kv_drop     seq's pages past its first `keep` positions given back
 *   gm_kv_share    dst's pages become src's first n positions' (shared)
 *   gm_kv_window_held  whether seq's ring holds what a pass at pos reads
 *                  (always without a ring)
 *   gm_kv_layer_ring   whether a layer's K/V are in the ring */
glesllm_status gm_kv_init(gpu_model *gm, uint32_t page, uint64_t positions);
void gm_kv_destroy(gpu_model *gm);
uint32_t gm_kv_row(const gpu_model *gm, uint32_t seq, uint32_t pos);
glesllm_status gm_kv_take(gpu_model *gm, uint32_t seq, uint32_t pos, uint32_t n);
void gm_kv_drop(gpu_model *gm, uint32_t seq, uint32_t keep);
glesllm_status gm_kv_share(gpu_model *gm, uint32_t src, uint32_t dst, uint32_t n);
bool gm_kv_window_held(const gpu_model *gm, uint32_t seq, uint32_t pos);
bool gm_kv_layer_ring(const gpu_model *gm, uint32_t layer);
/* pass.c: the selected sequence's ring made to hold what a pass at pos
 * reads, by running positions 0 .. pos - 1 again where it does not. */
glesllm_status gm_kv_window_ready(gpu_model *gm, uint32_t pos);

/* The ops of a transformer layer (pass.c). Each records what its pass kind
 * needs and leaves x (the residual stream) or the named output in act. */
glesllm_status pass_embed(gpu_pass *p);
glesllm_status pass_norm(gpu_pass *p, uint64_t weight);
glesllm_status pass_qkv(gpu_pass *p, const gpu_layer *l);
glesllm_status pass_attention(gpu_pass *p, const gpu_layer *l);
typedef enum pass_input { PASS_ATTN_OUT, PASS_HIDDEN, PASS_SSM_OUT, PASS_RWKV_Y, PASS_RWKV_HID } pass_input;
glesllm_status pass_residual(gpu_pass *p, const gpu_linear *w, pass_input in, uint64_t next_norm);
/* x += RMSNorm(W in) * post (Gemma 2's norms after attention and the FFN) */
glesllm_status pass_residual_normed(gpu_pass *p, const gpu_linear *w, pass_input in, uint64_t post);
glesllm_status pass_glu(gpu_pass *p, const gpu_linear *w);
/* A step's FFN down matrix w, its first gm->prefetch_bytes, read into the
 * GPU's cache beside the gate/up dispatch before it (ops/prefetch.h), where
 * gm->prefetch_down */
glesllm_status pass_prefetch(gpu_pass *p, const gpu_linear *w);
/* A step's next layer's Q/K/V matrix, its first gm->prefetch_qkv bytes,
 * read into the cache beside the down dispatch before it; recorded right
 * after layer l, whose FFN it follows (not after experts) */
glesllm_status pass_prefetch_qkv(gpu_pass *p, const gpu_layer *l, const gpu_layer *next);
/* x += the mixture of experts' FFN of RMSNorm(x) * ffn_norm (the norm its
 * own dispatch in every kind of pass) */
glesllm_status pass_moe(gpu_pass *p, const gpu_layer *l);
glesllm_status pass_logits(gpu_pass *p, uint64_t out_norm);
/* x += the layer's FFN (experts where it has them) of RMSNorm(x) * ffn_norm;
 * next_norm: the weight of the norm that reads x next */
glesllm_status pass_ffn(gpu_pass *p, const gpu_layer *l, uint64_t next_norm);
/* a Mamba block on RMSNorm(x) * attn_norm up to its output rows (x
 * unchanged; the out projection is pass_residual's PASS_SSM_OUT) */
glesllm_status pass_ssm(gpu_pass *p, const gpu_layer *l);

/* RWKV-7: the embeddings' LayerNorm (x in place); x += a layer's time mix
 * (first: layer 0, whose value the others mix toward); x += its channel
 * mix (ops/rwkv.h) */
glesllm_status pass_rwkv_embed_norm(gpu_pass *p);
glesllm_status pass_rwkv_time(gpu_pass *p, const gpu_layer *l, bool first);
glesllm_status pass_rwkv_channel(gpu_pass *p, const gpu_layer *l);

/* model/arch/: the graphs. */
glesllm_status llama_graph(gpu_pass *p);
glesllm_status mamba_graph(gpu_pass *p);
glesllm_status jamba_graph(gpu_pass *p);
glesllm_status gemma2_graph(gpu_pass *p);
glesllm_status rwkv7_graph(gpu_pass *p);

#endif
