/* ops/: attention over a layer's KV cache, per head, with grouped-query heads
 * (n_head / n_head_kv query heads share a K/V head).
 *
 *   step    one query (the decode step): glsl/attention.comp, the positions
 *           cut into chunks so that a long context spreads over the GPU, the
 *           chunks' partial results merged by the last to finish; up to
 *           ATTN_ONE_CHUNK positions one chunk
 *   few     a few queries (a verifying pass, a short prompt): the same kernel,
 *           each query cut into the chunks a step at its length would take,
 *           so that its output is that step's to the bit
 *   tiles   many queries (prefill): glsl/attn_prefill.comp, K and V shared
 *           through shared-memory tiles by a work group's queries and every
 *           query head of their KV head; where that makes too few work
 *           groups or too little work a tile, glsl/attn_prefill_head.comp,
 *           a work group a head
 *
 * The cache is one buffer a layer: Q scratch at 0, K at uint k_base and V at
 * uint v_base, as packed halves [row][kv head][head_dim], a pool of pages of
 * rows (ops/kv_layout.h): a sequence's position is found through the page
 * table at the start of the activations. */
#ifndef GLESLLM_OPS_ATTENTION_H
#define GLESLLM_OPS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/kv_layout.h"

/* attention.comp: a query's positions up to ATTN_ONE_CHUNK are one chunk (a
 * work group a head), past them chunks of ATTN_CHUNK_MIN to ATTN_CHUNK_MAX
 * positions (bench/RESULTS.md "Decode attention") */
#define ATTN_ONE_CHUNK 128u
#define ATTN_CHUNK_MIN 16u
#define ATTN_CHUNK_MAX 256u

typedef struct attn_shape {
    uint32_t n_head, n_head_kv, head_dim;
    uint32_t n_ctx; /* positions a query may see at most */
    uint32_t n_batch; /* queries a prefill at most (the tiles' grid is sized by it) */
    float scale;    /* a score is q . k times this (0: 1 / sqrt(head_dim)) */
    float softcap;  /* > 0: then softcap tanh(score / softcap) (Gemma 2) */
    kv_layout kv;   /* the cache's pages (kv.page > 0) */
    /* prefill: a KV head's query heads a work group (TUNE_ON), a head
     * (TUNE_OFF), or as the engine chooses by the shape (TUNE_AUTO) */
    int grouped;
} attn_shape;

typedef struct attn_kernels {
    attn_shape s;
    gpu_program step, few, tiles;
    uint32_t tile_q;     /* queries a work group of `tiles` */
    bool tiles_grouped;  /* `tiles` takes a KV head's query heads (else a head) */
    uint32_t max_chunks; /* chunks a (query, head) at most: the partials' room */
} attn_kernels;

/* Where a dispatch reads and writes. Offsets in act count floats. */
typedef struct attn_io {
    const gpu_buffer *cache;  /* binding 0 */
    const gpu_buffer *act;    /* binding 1: Q of a batch, the output, the partials */
    const gpu_buffer *count;  /* binding 2: a uint a (query, head), 0 between dispatches */
    uint64_t k_base, v_base;  /* uint offsets in the cache */
    uint32_t seq;             /* the sequence whose positions these are (its pages) */
    uint64_t partials;        /* attn_partials_floats of room */
} attn_io;

glesllm_status attn_build(gpu_context *ctx, const attn_shape *s, attn_kernels *out);
void attn_destroy(attn_kernels *k);

/* The floats of partial results n queries at once need (step: 1), and the
 * counters (uints) they need. */
uint64_t attn_partials_floats(const attn_kernels *k, uint32_t n_queries);
uint32_t attn_counters(const attn_kernels *k, uint32_t n_queries);

/* A window of w positions (sliding-window layers): a query at position p
 * sees p and the w - 1 positions before it; 0: every position up to p. */

/* One query over positions [0, len) (the last `window` of them), output at
 * float out_off. */
glesllm_status attn_record_step(gpu_queue *q, const attn_kernels *k, const attn_io *io,
                                uint32_t len, uint32_t window, uint64_t out_off);

/* n queries at positions pos0 .. pos0 + n - 1 (their K and V in the cache),
 * query t's Q at q_off + t * q_stride and its output at out_off + t * q_stride
 * (floats in act); few: each as a step would (at most the queries
 * attn_partials_floats was sized for), else in tiles. */
glesllm_status attn_record_batch(gpu_queue *q, const attn_kernels *k, const attn_io *io,
                                 uint32_t pos0, uint32_t n, uint32_t window, bool few,
                                 uint64_t q_off, uint64_t out_off, uint32_t q_stride);

/* n queries of different sequences (a batch over them): query t's entry
 * tab[t] = (seq << 24) | position, it sees position + 1 of its sequence's
 * positions; Q and output as for attn_record_batch. Each as a step would. */
glesllm_status attn_record_seqs(gpu_queue *q, const attn_kernels *k, const attn_io *io,
                                const uint32_t *tab, uint32_t n, uint32_t window, uint64_t q_off,
                                uint64_t out_off, uint32_t q_stride);

#endif
