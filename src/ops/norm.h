/* ops/: RMSNorm (glsl/rms_norm.comp), y = x * w / sqrt(mean(x^2) + eps).
 *
 *   rms    whole rows, a work group a row (prefill, and a decode step whose
 *          norm is not split)
 *   prep   the first half of a norm split across two kernels, for one row:
 *          y = x * w, not scaled, and partial sums of the squares of x
 *          (NORM_WG a work group) that the next matvec (built with
 *          norm_scale) adds up before it scales its sums */
#ifndef GLESLLM_OPS_NORM_H
#define GLESLLM_OPS_NORM_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/kv_layout.h"

#define NORM_WG 128u

typedef struct norm_kernels {
    gpu_program rms, prep, add;
} norm_kernels;

glesllm_status norm_build(gpu_context *ctx, norm_kernels *out);
void norm_destroy(norm_kernels *k);

/* rows of n values at float offsets x_off, y_off of act, stride floats
 * apart; the weight's n values at w_off. */
glesllm_status norm_record_rms(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                               uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                               uint64_t x_off, uint64_t y_off, uint32_t rows);

/* The same, added to y's rows: y += RMSNorm(x) * w. */
glesllm_status norm_record_rms_add(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                                   uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                                   uint64_t x_off, uint64_t y_off, uint32_t rows);

/* prep's work groups for a row of n (a group for each 4 NORM_WG columns),
 * each writing NORM_WG partial sums. */
uint32_t norm_prep_groups(uint32_t n);

/* prep of the row at x_off into y_off, its partial sums at sq_off
 * (norm_prep_groups(n) * NORM_WG of them). */
glesllm_status norm_record_prep(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                                uint32_t n, uint64_t w_off, uint64_t x_off, uint64_t y_off,
                                uint64_t sq_off);

/* The norm of attention's Q and K (glsl/qk_norm.comp), for models whose Q
 * and K are normalised before RoPE: over the width (OLMoE) or a head at a
 * time (Qwen3). It takes the projected q|k|v rows (f32), normalises Q and
 * K, rotates them, and puts Q, K and V where the attention reads them, as
 * the projections' QKV epilogue does for other models. */
typedef struct qk_norm_shape {
    uint32_t q_dim, kv_dim, head_dim;
    uint32_t q_span, k_span; /* the values one norm covers: q_dim / kv_dim, or head_dim */
    kv_layout kv;            /* the cache's pages (kv.page 0: rows one after another) */
} qk_norm_shape;

typedef struct qk_norm_kernel {
    gpu_program prog;
    qk_norm_shape shape;
} qk_norm_kernel;

glesllm_status norm_build_qk(gpu_context *ctx, const qk_norm_shape *shape, qk_norm_kernel *out);
void norm_destroy_qk(qk_norm_kernel *k);

/* Float offsets in act unless said: n_tok tokens' q|k|v rows from raw_off,
 * raw_stride apart; the weights (q_span, k_span values); token 0's row of
 * the RoPE table; Q to q_off, q_stride a token (q_to_cache: to the cache
 * from uint 0 instead, one token); K and V to the cache's uint offsets
 * k_off, v_off (kv_dim / 2 uints a token). */
typedef struct qk_norm_args {
    uint32_t n_tok;
    float eps;
    uint64_t raw_off, raw_stride, q_weight, k_weight, rope_off, q_off, q_stride;
    bool q_to_cache;
    uint64_t k_off, v_off;
    /* With pages (qk_norm_shape.kv): a batch over sequences, token t's
     * entry (seq << 24) | position giving its RoPE row and its cache row
     * (rope_off, k_off and v_off then the table's and the cache's start);
     * or kv_run: token t's cache row that of entry kv_first + t (a run of
     * one sequence's positions; k_off and v_off the cache's start). Neither:
     * the rows follow each other from k_off and v_off. */
    const uint32_t *seq_tab;
    bool kv_run;
    uint32_t kv_first;
} qk_norm_args;

glesllm_status norm_record_qk(gpu_queue *q, const qk_norm_kernel *k, const gpu_buffer *act,
                              const gpu_buffer *cache, const qk_norm_args *a);

#endif
