/* ops/: a Mamba block's causal convolution (glsl/ssm_conv.comp) and
 * selective scan (glsl/ssm_scan.comp), over a pass's tokens, with the
 * recurrent state read from one slot of the layer's state buffer and the
 * next state written to another (so that the state before the pass stays,
 * for a rollback).
 *
 * The scan of a few tokens is one dispatch, a channel's invocations (one a
 * state value) going through them in order. A longer pass makes every
 * token's step first, is then cut into sub-chunks scanned in parallel from
 * zero, their carries combined in order a (channel, state value) at a time,
 * and each token's output fixed up with what its sub-chunk's start
 * contributes: four dispatches whose work grows linearly with the tokens.
 * Mamba-2's sub-chunks take its SSD form instead of a scan: the products
 * C(t) . B(u) of their tokens (shared by a group's heads), each output a sum
 * over the sub-chunk's tokens before it, the end states as sums too.
 * The CPU references are ops/ref_ops.h's ref_ssm_conv and ref_ssm_scan. */
#ifndef GLESLLM_OPS_SSM_H
#define GLESLLM_OPS_SSM_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"

typedef struct ssm_shape {
    uint32_t d_inner, d_conv, d_state, dt_rank;
    bool bc_norm; /* dt's input, B and C RMS-normalised, times their weights */
    /* Mamba-2: dt_rank heads of d_inner / dt_rank channels, each with a
     * scalar decay, D and step bias, its raw step from the in projection;
     * B and C in n_group groups after x in the convolved rows (head h takes
     * group h % n_group); a grouped norm of the gated output */
    bool mamba2;
    uint32_t n_group;
} ssm_shape;

/* The convolution's channels: d_inner (Mamba-2: x, B and C). */
uint32_t ssm_conv_width(const ssm_shape *s);

typedef struct ssm_kernels {
    gpu_program conv, scan, carry, fixup, steps, local, norm, gram, intra, ends, cumsum;
    ssm_shape shape;
    uint32_t dt_tok; /* the steps' tokens a work group (shared memory allowing) */
} ssm_kernels;

glesllm_status ssm_build(gpu_context *ctx, const ssm_shape *shape, ssm_kernels *out);
void ssm_destroy(ssm_kernels *k);

/* The parameters of one layer, float offsets in its parameter buffer (the
 * same in every layer): conv taps (d_conv a channel, the oldest input's
 * first) and bias; dt's projection (dt_rank a channel) and bias; A (d_state
 * a channel); D; the norms' weights (dt_rank, d_state, d_state; ones where a
 * model's norms have none). Mamba-2: no projection, the bias, A and D a
 * head, the grouped norm's weights (d_inner). */
typedef struct ssm_params {
    uint64_t taps, conv_b, dt_w, dt_b, a, d, norm_w, floats;
} ssm_params;
ssm_params ssm_params_layout(const ssm_shape *s);

/* A slot of the state buffer: the convolution's last d_conv - 1 inputs
 * (rows of d_inner) at float offset conv, then h (d_state a channel) at ssm;
 * `floats` the slot's size. */
typedef struct ssm_slot {
    uint64_t conv, ssm, floats;
} ssm_slot;
ssm_slot ssm_slot_layout(const ssm_shape *s);

/* Where a pass's rows lie (float offsets in act, floats a token): x (the
 * convolution's input), xc (its output: the scan's x; Mamba-2's x|B|C), dbc
 * (dt|B|C; Mamba-2: the raw steps, a head each), z, out; cum: the steps'
 * running sums (out's stride); carry: room for ssm_carry_floats. src, dst: float offsets of the source and destination
 * slots in the state buffer; zero: no source, an empty state. */
typedef struct ssm_io {
    const gpu_buffer *par, *act, *state;
    uint64_t x, x_stride, xc, xc_stride, dbc, dbc_stride, z, z_stride, out, out_stride;
    uint64_t cum, carry;
    uint64_t src, dst;
    bool zero;
    float eps;
    uint64_t gram; /* Mamba-2: room for ssm_gram_floats */
} ssm_io;

/* The tokens a sub-chunk of a scan of n tokens takes (n or more: one). */
uint32_t ssm_sub_tokens(uint32_t n);
/* Floats of act the carries of a scan of n tokens take, and Mamba-2's
 * products C(t) . B(u) of its sub-chunks' tokens. */
uint64_t ssm_carry_floats(const ssm_shape *s, uint32_t n);
uint64_t ssm_gram_floats(const ssm_shape *s, uint32_t n);

glesllm_status ssm_record_conv(gpu_queue *q, const ssm_kernels *k, const ssm_io *io, uint32_t n);
glesllm_status ssm_record_scan(gpu_queue *q, const ssm_kernels *k, const ssm_io *io, uint32_t n);
/* Mamba-2's grouped RMSNorm of the output rows, in place. */
glesllm_status ssm_record_norm(gpu_queue *q, const ssm_kernels *k, const ssm_io *io, uint32_t n);

#endif
