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
 * so the chosen experts never leave the GPU: no read-back in a step. */
#ifndef GLESLLM_OPS_MOE_H
#define GLESLLM_OPS_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/matvec.h"

#define MOE_WG 64u

typedef struct moe_kernels {
    gpu_program route, combine;
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
