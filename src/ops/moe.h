/* ops/: mixture of experts (glsl/moe.comp, glsl/matvec.comp EXPERT). A
 * token's FFN is recorded as
 *   the router's logits   an expert matvec over the tokens (one z each)
 *   route                 softmax, top-k and weights, into the route
 *   the experts           expert matvecs over (token, slot) pairs, each
 *                         reading only its expert's rows of the stacked
 *                         weight: gate/up (GLU), then down scaled by the
 *                         expert's weight
 *   combine               x += the slots' outputs (+ the shared expert's
 *                         times its sigmoid gate)
 * so the chosen experts never leave the GPU: no read-back in a step. A
 * prefill chunk groups its (token, slot) entries by expert after the route
 * (moe_record_group: counts, prefix sum, scatter) and runs each expert's
 * tokens through the tiled matmul once (moe_record_matmul) instead. */
#ifndef GLESLLM_OPS_MOE_H
#define GLESLLM_OPS_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/matmul.h"
#include "ops/matvec.h"

#define MOE_WG 64u

typedef struct moe_kernels {
    gpu_program route, combine, group;
} moe_kernels;

glesllm_status moe_build(gpu_context *ctx, moe_kernels *out);
void moe_destroy(moe_kernels *k);

/* Route of n_tok tokens: logits of token t at float logits_off + t *
 * logits_stride of act; (expert id as a float, weight) of slot j at
 * route_off + 2 (t k + j). n_expert at most 256. */
typedef struct moe_route_args {
    uint32_t n_expert, k, n_tok;
    bool norm;   /* the k weights renormalised to sum 1 */
    float scale; /* and multiplied by this */
    uint64_t logits_off, logits_stride, route_off;
} moe_route_args;
glesllm_status moe_record_route(gpu_queue *q, const moe_kernels *k, const gpu_buffer *act,
                                const moe_route_args *a);

/* An expert matvec (a kernel built with matvec_variant.expert) over n_z
 * layers z: x at x_off + (z / x_div) * x_stride floats, y row at y_off + z *
 * y_stride (GLU: y_off counts twice, y_stride output floats). select: the
 * weight is experts of `expert_rows` rows stacked, layer z takes expert
 * route[2z] (float offset route_off in x's buffer), whose parts hold whole
 * experts; scale: its results times route[2z + 1]. Without select, the
 * whole weight (expert_rows unused). */
typedef struct moe_matvec_args {
    uint32_t n_z, x_div;
    uint64_t x_stride, y_stride;
    bool select, scale;
    uint64_t expert_rows, route_off;
} moe_matvec_args;
glesllm_status moe_record_matvec(gpu_queue *q, const matvec_kernel *k, const gpu_weight *w,
                                 const gpu_buffer *x, uint64_t x_off, const gpu_buffer *y,
                                 uint64_t y_off, const moe_matvec_args *a);

/* The entries (token t, slot j: entry t k + j) of n_tok tokens' routes
 * grouped by expert: the count of expert e's entries at float group_off +
 * e, the first of them in the list at group_off + n_expert + e, the list
 * (n_tok k entry indices as floats) at list_off; and in tiles of `tile`
 * entries (the expert matmuls' f16 token tiles, matmul_tile_tokens), each
 * expert's first tile at group_off + 2 n_expert + e, the count of tiles at
 * group_off + 3 n_expert, each tile's expert after the list. The group
 * takes moe_group_floats floats, the list moe_list_floats. */
typedef struct moe_group_args {
    uint32_t n_expert, k, n_tok, tile;
    uint64_t route_off, group_off, list_off;
} moe_group_args;
uint64_t moe_group_floats(uint32_t n_expert);
uint64_t moe_list_floats(uint64_t entries);
/* the f16 token tiles' bytes (matmul_args.xt) of an expert matmul of
 * `entries` entries of `cols` columns over n_expert experts */
uint64_t moe_xt_bytes(const matmul_config *c, uint32_t n_expert, uint64_t entries, uint64_t cols);
glesllm_status moe_record_group(gpu_queue *q, const moe_kernels *k, const gpu_buffer *act,
                                const moe_group_args *a);

/* An expert matmul (a kernel built with matvec_variant.expert) over the
 * grouped entries of at most n_tok tokens: expert e's rows of the stacked
 * weight (experts of expert_rows rows) times the x of each of its entries i
 * (row i / x_div at x_off, act_stride(cols) floats a row), into y row i at
 * y_off + i y_stride (GLU: the outputs, rows / 2 a row);
 * scale: times the entry's weight (route). x and y are act. */
typedef struct moe_matmul_args {
    uint32_t n_expert, n_tok, k, x_div; /* k: slots a token (entries n_tok k) */
    uint64_t x_off, y_off, y_stride, expert_rows;
    uint64_t route_off, group_off, list_off; /* the grouping (moe_group_args') */
    uint32_t tile;                           /* its entries a tile */
    bool scale;
    const gpu_buffer *xt; /* f16 tiles: a buffer of moe_xt_bytes for the tiles */
} moe_matmul_args;
glesllm_status moe_record_matmul(gpu_queue *q, const matmul_kernel *k, const gpu_weight *w,
                                 const gpu_buffer *act, const moe_matmul_args *a);

/* x[t] += the k outputs of token t (rows t k + j at out_off, out_stride
 * floats apart), + sigmoid(gate[t]) * the shared expert's output (row t at
 * shared_off) where shared; for n_tok tokens of n_embd, x_stride apart. */
typedef struct moe_combine_args {
    uint32_t n_embd, k, n_tok;
    uint64_t x_off, x_stride, out_off, out_stride;
    bool shared;
    uint64_t shared_off, gate_off;
} moe_combine_args;
glesllm_status moe_record_combine(gpu_queue *q, const moe_kernels *k, const gpu_buffer *act,
                                  const moe_combine_args *a);

#endif
