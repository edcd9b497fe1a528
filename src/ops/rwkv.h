/* ops/: RWKV-7's time and channel mixes around their matrix products
 * (glsl/rwkv.comp), over a pass's tokens, the recurrent state read from one
 * slot of the layer's state buffer and the next written to another, as for
 * Mamba (ops/ssm.h).
 *
 * A layer: the norm and token-shift mixes (one dispatch), the receptance,
 * key, value and the low-rank paths' first matrices (matvecs or matmuls,
 * model/pass.c), their tanh and sigmoid, the paths' second matrices, the
 * update's inputs, the state update through the tokens (a work group a
 * head, its invocations a state row each), the head norm with the bonus and
 * gate, then the output projection; the channel mix is the norm and one
 * mix, the key, relu squared and the value. The update goes token by token
 * within the pass (each invocation holding a state row in registers,
 * loading the next token's inputs while the step of this one runs): its work
 * is linear in the tokens, each step a head's HEAD x HEAD values. With
 * tuning.rwkv_chunk on, more than a few tokens go in the chunked form of the
 * delta rule instead (slower on the H200 of bench/RESULTS.md "RWKV-7"): each chunk's
 * parts that do not depend on its starting state (C x C matrices of its
 * tokens' products, with the decays in them, and the inverse of the
 * triangular one) for all chunks at once, then the chunks in order, each
 * its tokens together: the state carried from chunk to chunk. A few tokens
 * (a decode step) take the update's inputs, the update and the head norm as
 * one dispatch. The CPU references are ref_layer_norm, ref_wkv7 and
 * ref_rwkv7_mix (ops/ref_ops.h). */
#ifndef GLESLLM_OPS_RWKV_H
#define GLESLLM_OPS_RWKV_H

#include <stdbool.h>
#include <stdint.h>

#include "common/tuning.h"
#include "gpu/gpu.h"

typedef struct rwkv_shape {
    uint32_t n_embd, head; /* n_embd / head heads */
} rwkv_shape;

typedef struct rwkv_kernels {
    gpu_program norm, shift6, shift1, act, prep, scan, post, few, cprep, cscan;
    rwkv_shape shape;
    uint32_t chunk; /* the chunked form's tokens a chunk (0: off, or the GPU's shared
                       memory holds none; the update goes token by token) */
} rwkv_kernels;

/* The chunked form where the tuning turns it on (tuning.rwkv_chunk) and the
 * GPU's shared memory holds a chunk. */
glesllm_status rwkv_build(gpu_context *ctx, const rwkv_shape *shape, const tuning *t,
                          rwkv_kernels *out);
void rwkv_destroy(rwkv_kernels *k);

/* A layer's parameters, float offsets in its parameter buffer: the time
 * mix's and the channel mix's norms (weight, bias), the six time-mix lerps
 * (r w k v a g) and the channel mix's, w0, a0, v0, k_k, k_a, r_k, the head
 * norm's weight and bias: n_embd values each. */
typedef struct rwkv_params {
    uint64_t att_w, att_b, ffn_w, ffn_b, lerp, cm_lerp, w0, a0, v0, k_k, k_a, r_k, ln_w, ln_b;
    uint64_t floats;
} rwkv_params;
rwkv_params rwkv_params_layout(const rwkv_shape *s);

/* A slot of the state buffer: the time and channel mixes' last normed x,
 * then the heads' states (HEAD rows of HEAD values a head). */
typedef struct rwkv_slot {
    uint64_t att, ffn, wkv, floats;
} rwkv_slot;
rwkv_slot rwkv_slot_layout(const rwkv_shape *s);

/* The LayerNorm of n rows of x into y (floats of act, stride `stride`
 * both), its weight and bias at w, b of par (act itself for the output
 * norm). In place is allowed. */
glesllm_status rwkv_record_norm(gpu_queue *q, const rwkv_kernels *k, const gpu_buffer *par,
                                const gpu_buffer *act, uint64_t w, uint64_t b, float eps,
                                uint64_t x, uint64_t y, uint64_t stride, uint32_t n);

/* Where a pass's rows lie (float offsets in act, `stride` floats a token for
 * every n_embd-wide row): x; the mixes (block apart, mix m's rows at mix +
 * m block; the channel mix's is mix 0); r, k, v, the first layer's v, y and
 * g; the low-rank outputs of the decay, learning rate and value residual.
 * src, dst: the slots' float offsets in the state; zero: no source. */
typedef struct rwkv_io {
    const gpu_buffer *par, *act, *state;
    uint64_t stride, x, mix, block, r, k, v, first, y, g, lw, la, lv;
    uint64_t chunks; /* room for rwkv_chunk_floats of the pass's tokens */
    uint64_t src, dst;
    bool zero;
    float eps;
} rwkv_io;

/* Floats of act the chunked form takes for n tokens (0 without it). */
uint64_t rwkv_chunk_floats(const rwkv_kernels *k, uint32_t n);

/* The norm and token-shift mixes of the time mix (channel: the channel
 * mix's), n tokens. */
glesllm_status rwkv_record_shift(gpu_queue *q, const rwkv_kernels *k, const rwkv_io *io,
                                 bool channel, uint32_t n);
/* f (1 tanh, 2 sigmoid, 3 relu squared) over n rows of `cols` at off
 * (stride floats a row), and f2 over rows at off2 likewise (f2 0: none). */
typedef struct rwkv_act_range {
    uint64_t off, stride;
    uint32_t cols, f;
} rwkv_act_range;
glesllm_status rwkv_record_act(gpu_queue *q, const rwkv_kernels *k, const gpu_buffer *act,
                               const rwkv_act_range *r0, const rwkv_act_range *r1, uint32_t n);
/* The update's inputs (first: layer 0, whose v becomes the first layer's),
 * the update through the n tokens, and the head norm, bonus and gate: y. */
glesllm_status rwkv_record_mix(gpu_queue *q, const rwkv_kernels *k, const rwkv_io *io, bool first,
                               uint32_t n);

#endif
