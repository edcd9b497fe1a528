/* ops/: reductions over the logits that keep sampling on the GPU, so that a
 * step reads back a token id or a short list instead of the vocabulary.
 *
 *   argmax    the largest logit's id of each of several rows into the token
 *             buffer (glsl/argmax.comp, one dispatch: slices, the last to
 *             finish reducing them)
 *   topk      the k largest logits with their ids, the largest logit and the
 *             softmax normaliser over the whole vocabulary (glsl/topk.comp)
 *   penalty   llama.cpp's repetition penalty on the logits of the tokens in a
 *             window of the token buffer (glsl/penalty.comp) */
#ifndef GLESLLM_OPS_SAMPLE_H
#define GLESLLM_OPS_SAMPLE_H

#include <stdint.h>

#include "gpu/gpu.h"

#define SAMPLE_MAX_K 256
#define SAMPLE_SLICE 2048u /* logits a work group of argmax and topk */

typedef struct sample_kernels {
    gpu_program argmax, topk1, topk2, penalty, softcap;
    gpu_buffer argmax_count; /* a counter a row of argmax (0 between dispatches) */
    uint32_t max_rows;       /* rows argmax takes at once */
} sample_kernels;

/* The kernels, for an argmax of up to max_rows rows at once */
glesllm_status sample_build(gpu_context *ctx, uint32_t max_rows, sample_kernels *out);
void sample_destroy(sample_kernels *k);

/* rows of n logits at float offset off of buf, stride apart, soft-capped in
 * place (glsl/softcap.comp: cap tanh(v / cap), Gemma 2's final cap) */
glesllm_status sample_record_softcap(gpu_queue *q, const sample_kernels *k, const gpu_buffer *buf,
                                     uint32_t n, uint64_t off, uint64_t stride, uint32_t rows,
                                     float cap);

/* The work groups (slices) over n_vocab logits; the partials' floats argmax
 * needs a row (2 a group) and topk's lists (2 * SAMPLE_MAX_K + 2 a group). */
uint32_t sample_groups(uint32_t n_vocab);
uint64_t sample_argmax_floats(uint32_t n_vocab);
uint64_t sample_topk_floats(uint32_t n_vocab);

/* The argmax of `rows` rows (at most max_rows) of n_vocab logits
 * (row_stride floats apart from float offset logits in act) into token slots
 * slot, slot + 1, ...; partials at part_off, sample_argmax_floats a row. */
glesllm_status sample_record_argmax(gpu_queue *q, const sample_kernels *k, const gpu_buffer *act,
                                    const gpu_buffer *tokens, uint32_t n_vocab, uint64_t logits,
                                    uint32_t row_stride, uint32_t rows, uint64_t part_off,
                                    uint32_t slot);

/* The k largest of the row at logits into out: max, sum of exp(l - max), then
 * k (value, id) pairs in falling order; the lists at lists_off. */
glesllm_status sample_record_topk(gpu_queue *q, const sample_kernels *k, const gpu_buffer *act,
                                  const gpu_buffer *out, uint32_t n_vocab, uint64_t logits,
                                  uint64_t lists_off, uint32_t top_k);

/* The penalty (> 0, 1: none) on the logits of the ids in token slots
 * [first, first + window). */
glesllm_status sample_record_penalty(gpu_queue *q, const sample_kernels *k, const gpu_buffer *act,
                                     const gpu_buffer *tokens, uint32_t n_vocab, uint64_t logits,
                                     uint32_t first, uint32_t window, float penalty);

#endif
