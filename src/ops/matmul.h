/* ops/: the matrix-matrix kernels of prefill (glsl/matmul.comp): y[t][r]
 * (+)= sum_c W[r][c] x[t][c] for a batch of tokens, with matvec's epilogues. */
#ifndef GLESLLM_OPS_MATMUL_H
#define GLESLLM_OPS_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/matvec.h"

/* How a matmul program tiles its work (glsl/matmul.comp): work groups of
 * wg invocations (16 x wg/16 threads), each thread tm rows x tn tokens, so a
 * work group covers 16 tm rows x (wg / 16) tn tokens. */
typedef struct matmul_config {
    uint32_t wg, tm, tn;  /* wg a multiple of 16; tm, tn 4 or 8 */
    bool half;            /* tiles and products in mediump (f16 where the driver has it) */
    bool f16;             /* tiles in f16, each product a weight times a pair of
                             tokens, each unit's products added in f16
                             (GL_NV_gpu_shader5: gpu_caps.f16_types; the default
                             there, except for F32 weights in a model; without
                             the types, the same kernel in f32 arithmetic) */
    bool by_rows;         /* tm and split picked for each product's rows (matmul_config_for) */
    bool dup;             /* f16: the weights' tile holds each value twice, so that each
                             product is a pair of weights times a pair of tokens (a
                             packed multiply-add without a broadcast operand) */
    uint32_t split;       /* f16: a unit's 32 values go through the tiles in `split`
                             parts (1 or 2; 0 reads as 1): smaller tiles, more
                             groups a multiprocessor, twice the barriers */
    bool row_sums;        /* f16: each row's products with a token summed in f16
                             over the whole row (else a unit's 32 in f16, then
                             into f32 sums) */
} matmul_config;

/* The parts a unit is staged in (matmul_config.split: 1 unless f16 tiles). */
uint32_t matmul_split(const matmul_config *c);

/* The shared memory a tiling's work group uses (bytes), for matmul_build's
 * check against the context's limit. */
uint32_t matmul_shared_bytes(const matmul_config *c);

/* The largest tiles the context's limits allow (shared memory, invocations). */
matmul_config matmul_default_config(gpu_context *ctx, const tuning *t);
/* The same with f32 tiles (F32 weights, or f16 tiles turned off). */
matmul_config matmul_f32_config(gpu_context *ctx, const tuning *t);

/* The tiling for a product of `rows` rows: c itself, or with by_rows 4 rows
 * a thread below 4096 rows and the unit in two halves (split 2) above 4224;
 * f32 tiles over at most 512 rows (RWKV's low-rank paths) 64 rows by 16
 * tokens (matmul.c says why). */
matmul_config matmul_config_for(const matmul_config *c, uint64_t rows);

typedef struct matmul_kernel {
    gpu_program prog;
    gpu_program sum; /* QKV: its sliced products' sum and epilogue (matmul_build_slices_sum) */
    gpu_program prep; /* f16 tiles: glsl/x_tiles.comp, the tokens' tiles made once */
    uint32_t type;
    matmul_config cfg;
    matvec_variant var; /* the epilogue; norm must be false */
} matmul_kernel;

glesllm_status matmul_build(gpu_context *ctx, uint32_t type, const matmul_config *cfg,
                            const matvec_variant *var, matmul_kernel *out);
void matmul_destroy(matmul_kernel *k);

/* A product of too few row blocks to fill the GPU (a short prompt's, where
 * a work group's tile of tokens holds them all) in slices of its columns:
 * work-group layer z sums slice z of each row's units into slice z of part
 * (matmul.comp SLICES), and glsl/matmul_sum.comp adds the slices into y with
 * the epilogue (store, residual add or GLU; a QKV kernel's twin adds up
 * its own, matmul_build_slices_sum; experts are never sliced).
 * bench/RESULTS.md "Prefill tiles" has the figures. */
#define MATMUL_SLICES_MOST 8
/* the default of matmul_slices.groups on a GPU */
#define MATMUL_SLICES_GROUPS 256
typedef struct matmul_slices {
    gpu_program sum, sum_gelu; /* (GLU's activation: SiLU, GELU) */
    const gpu_buffer *part; /* the slices' partial sums (floats) */
    uint32_t groups;        /* slice a product of fewer work groups than this (0: none) */
} matmul_slices;

/* The work groups below which a product is sliced (the tuning's
 * matmul_slices where set; 0 on a CPU rasteriser, whose few cores the row
 * blocks fill). */
uint32_t matmul_slices_groups(gpu_context *ctx, const tuning *t);
glesllm_status matmul_slices_build(gpu_context *ctx, matmul_slices *out);
/* A QKV kernel's twin that adds its slices up and runs its epilogue
 * (matmul.comp SLICES_SUM): without it a QKV product is never sliced.
 * Nothing for other epilogues (matmul_slices.sum adds theirs up). */
glesllm_status matmul_build_slices_sum(gpu_context *ctx, matmul_kernel *k);
void matmul_slices_destroy(matmul_slices *s);

/* The per-dispatch values of a matmul over n_tok tokens. Offsets count
 * floats; token t's x is at x_off + t * act_stride(cols) in x's buffer. */
typedef struct matmul_args {
    uint32_t n_tok;
    uint64_t x_off;
    uint64_t y_off, y_stride; /* y row of token t at y_off + t * y_stride (QKV: Q, in x's buffer) */
    uint64_t row_base;        /* global row of the weight's first row (GLU, QKV) */
    uint64_t rope_off;        /* QKV: token 0's row of the RoPE table */
    uint64_t bias_off;        /* QKV: Q|K|V biases */
    uint64_t k_off, v_off;    /* QKV: uint offsets of token 0's K and V in the cache
                                 (with pages, matvec_variant.kv: the cache's K and V) */
    uint32_t kv_first;        /* QKV with pages: token 0's entry (seq << 24) | position */
    /* f16 tiles: a buffer of at least matmul_xt_bytes for the tokens' tiles
     * (x_tiles.comp), and whether an earlier matmul_record left this x's tiles
     * there (same x, x_off, n_tok and columns, nothing written to it since) */
    const gpu_buffer *xt;
    bool xt_made;
    const matmul_slices *slices; /* NULL: never sliced */
} matmul_args;

/* The tokens a work group of a tiling takes (its token tiles' size) */
uint32_t matmul_tile_tokens(const matmul_config *c);

/* matmul_kernel.prep (x_tiles.comp) over n_tiles tiles of `units` units
 * from x into xt, with its params (x_tiles.comp's). */
glesllm_status matmul_record_tiles(gpu_queue *q, const matmul_kernel *k, const gpu_buffer *x,
                                   const gpu_buffer *xt, const uint32_t *params, uint32_t n_params,
                                   uint64_t n_tiles, uint64_t units);

/* The bytes of the tokens' tiles a matmul with f16 tiles needs (matmul_args.xt)
 * for n_tok tokens of `cols` columns; 0 for the other tilings. */
uint64_t matmul_xt_bytes(const matmul_config *c, uint32_t n_tok, uint64_t cols);

/* Records the product over every part of w. y is the output buffer (QKV:
 * the cache). */
glesllm_status matmul_record(gpu_queue *q, const matmul_kernel *k, const gpu_weight *w,
                             const gpu_buffer *x, const gpu_buffer *y, const matmul_args *a);

#endif
