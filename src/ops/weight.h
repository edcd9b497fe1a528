/* ops/: weight tensors on the GPU. A tensor is repacked into its GPU layout
 * (quant/quant_gpu.h) and uploaded, split by whole rows into several buffers
 * when it is larger than the storage-block limit; the weight kernels (matvec,
 * matmul, get_rows) dispatch once per part.
 *
 * Activations given to these kernels are f32 buffers whose rows are padded
 * to a multiple of 32 values (the padding is never used, its content does
 * not matter). */
#ifndef GLESLLM_OPS_WEIGHT_H
#define GLESLLM_OPS_WEIGHT_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "quant/quant_gpu.h"

#include "gpu/gpu.h"
#include "quant/quant_gpu.h"

typedef struct gpu_weight_part {
    gpu_buffer buf;
    uint64_t row0, rows;
    quant_gpu_plan plan;
} gpu_weight_part;

typedef struct gpu_weight {
    char name[64];
    uint32_t type;
    uint64_t rows, cols;
    uint32_t n_parts;
    gpu_weight_part *parts;
    uint64_t bytes; /* GPU bytes over all parts */
} gpu_weight;

/* Padded length of an activation row of n values. */
static inline uint64_t act_stride(uint64_t n) { return (n + 31) / 32 * 32; }

/* Repacks rows x cols values of `type` (GGUF layout, row after row) and
 * uploads them. Parts hold at most max_part_bytes each (0: the context's
 * storage-block limit). */
glesllm_status gpu_weight_upload(gpu_context *ctx, const char *name, uint32_t type, uint64_t rows,
                                 uint64_t cols, const void *data, uint64_t max_part_bytes,
                                 gpu_weight *out);
/* The same, each part holding whole groups of `group` rows (experts). */
glesllm_status gpu_weight_upload_groups(gpu_context *ctx, const char *name, uint32_t type,
                                        uint64_t rows, uint64_t cols, const void *data,
                                        uint64_t max_part_bytes, uint64_t group, gpu_weight *out);
void gpu_weight_destroy(gpu_weight *w);

/* For the weight kernels (ops/): the units (QGPU_UNIT values) of a row of
 * `cols` values; the WTYPE_<name> define of a type; a dispatch over one part
 * of w (binding 0 its weights, 1 `in`, 2 `y`, params 8..13 the part's
 * layout); n work groups as a 2D grid within 65535 a dimension. */
uint32_t weight_units_per_row(uint32_t type, uint64_t cols);
const char *weight_type_label(uint32_t type);
void weight_type_define(uint32_t type, char *buf, size_t n);
void weight_part_dispatch(gpu_dispatch *d, const gpu_program *prog, const gpu_weight *w,
                          const gpu_weight_part *p, const gpu_buffer *in, const gpu_buffer *y,
                          gpu_access y_access);
void weight_grid(gpu_dispatch *d, uint64_t n);

#endif
