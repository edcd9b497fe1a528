/* ops/: y[i] = W[ids[i]] dequantized (glsl/get_rows.comp): the embedding
 * lookup, reading the token ids from a GPU buffer. */
#ifndef GLESLLM_OPS_GET_ROWS_H
#define GLESLLM_OPS_GET_ROWS_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/weight.h"

typedef struct get_rows_kernel {
    gpu_program prog;
    uint32_t type;
} get_rows_kernel;

glesllm_status get_rows_build(gpu_context *ctx, uint32_t type, get_rows_kernel *out);
void get_rows_destroy(get_rows_kernel *k);

/* Records y[y_off + i * y_stride ..] = W[ids[id_off + i]] (times scale,
 * where not 0: Gemma's embeddings) for i < n_ids. */
glesllm_status get_rows_record(gpu_queue *q, const get_rows_kernel *k, const gpu_weight *w,
                               const gpu_buffer *ids, uint32_t id_off, uint32_t n_ids,
                               const gpu_buffer *y, uint64_t y_off, uint64_t y_stride,
                               float scale);

#endif
