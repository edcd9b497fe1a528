/* Weight tensors on the GPU: repacked, split by rows. See weight.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "ops/weight.h"

/* byte offsets in the kernels are 32-bit */
#define MAX_PART_BYTES ((uint64_t)1 << 31)

void gpu_weight_destroy(gpu_weight *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->n_parts; i++)
        gpu_buffer_destroy(&w->parts[i].buf);
    free(w->parts);
    memset(w, 0, sizeof *w);
}

glesllm_status gpu_weight_upload(gpu_context *ctx, const char *name, uint32_t type, uint64_t rows,
                                 uint64_t cols, const void *data, uint64_t max_part_bytes,
                                 gpu_weight *out)
{
    return gpu_weight_upload_groups(ctx, name, type, rows, cols, data, max_part_bytes, 0, out);
}

glesllm_status gpu_weight_upload_groups(gpu_context *ctx, const char *name, uint32_t type,
                                        uint64_t rows, uint64_t cols, const void *data,
                                        uint64_t max_part_bytes, uint64_t group, gpu_weight *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->type = type;
    out->rows = rows;
    out->cols = cols;
    uint64_t limit = gpu_context_limits(ctx)->max_storage_block_bytes;
    if (max_part_bytes && max_part_bytes < limit)
        limit = max_part_bytes;
    if (limit > MAX_PART_BYTES)
        limit = MAX_PART_BYTES;
    quant_gpu_plan whole;
    glesllm_status st = quant_gpu_plan_make(type, rows, cols, &whole);
    if (st != GLESLLM_OK)
        return err_prefix(st, "tensor %s: ", name);
    uint64_t per_part = whole.bytes <= limit ? rows : quant_gpu_rows_within(type, cols, limit);
    if (per_part < rows && per_part > 1)
        per_part &= ~(uint64_t)1; /* parts keep pairs of rows together (GLU, RoPE) */
    if (group > 1 && per_part < rows) { /* and groups (experts) whole */
        if (per_part < group)
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "tensor %s: one expert (%llu rows of %llu %s values) exceeds the "
                           "GPU's storage-block limit of %llu bytes",
                           name, (unsigned long long)group, (unsigned long long)cols,
                           ggml_type_name(type), (unsigned long long)limit);
        per_part = per_part / group * group;
    }
    if (!per_part)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "tensor %s: one row of %llu %s values exceeds the GPU's storage-block "
                       "limit of %llu bytes",
                       name, (unsigned long long)cols, ggml_type_name(type),
                       (unsigned long long)limit);
    uint64_t n_parts = (rows + per_part - 1) / per_part;
    out->parts = calloc((size_t)n_parts, sizeof *out->parts);
    if (!out->parts)
        return err_set(GLESLLM_ERR_NO_MEMORY, "tensor %s: out of memory", name);
    uint64_t row_bytes;
    uint64_t one_row[1] = { cols };
    if (quant_gpu_is_float(type))
        row_bytes = cols * ggml_type_size(type);
    else if ((st = ggml_tensor_bytes(type, 1, one_row, &row_bytes)) != GLESLLM_OK)
        return err_prefix(st, "tensor %s: ", name);
    for (uint64_t p = 0; p < n_parts; p++) {
        gpu_weight_part *part = &out->parts[p];
        part->row0 = p * per_part;
        part->rows = rows - part->row0 < per_part ? rows - part->row0 : per_part;
        if ((st = quant_gpu_plan_make(type, part->rows, cols, &part->plan)) != GLESLLM_OK)
            break;
        void *host = malloc((size_t)part->plan.bytes);
        if (!host) {
            st = err_set(GLESLLM_ERR_NO_MEMORY, "out of host memory repacking %.1f MiB",
                         (double)part->plan.bytes / (1 << 20));
            break;
        }
        st = quant_gpu_repack(&part->plan, (const uint8_t *)data + part->row0 * row_bytes, host);
        if (st == GLESLLM_OK)
            st = gpu_buffer_create(ctx, (size_t)part->plan.bytes, host, GPU_BUFFER_DEVICE,
                                   out->name, &part->buf);
        free(host);
        if (st != GLESLLM_OK)
            break;
        out->n_parts++;
        out->bytes += part->plan.bytes;
    }
    if (st != GLESLLM_OK) {
        gpu_weight_destroy(out);
        return err_prefix(st, "uploading tensor %s: ", name);
    }
    return GLESLLM_OK;
}

/* ---- for the weight kernels ------------------------------------------------ */

uint32_t weight_units_per_row(uint32_t type, uint64_t cols)
{
    const quant_gpu_layout *L = quant_gpu_layout_of(type);
    uint32_t block = L ? L->block : 32;
    return (uint32_t)((cols + block - 1) / block * (block / QGPU_UNIT));
}

const char *weight_type_label(uint32_t type)
{
    return ggml_type_name(type) ? ggml_type_name(type) : "UNKNOWN";
}

void weight_type_define(uint32_t type, char *buf, size_t n)
{
    snprintf(buf, n, "WTYPE_%s 1", weight_type_label(type));
}

/* weight params 8..13 of one part (weights.glsl) */
static void weight_params(const gpu_weight *w, const gpu_weight_part *p, gpu_dispatch *d)
{
    for (int i = 0; i < QGPU_MAX_PLANES; i++)
        d->params[8 + i] = (uint32_t)p->plan.plane_offset[i];
    d->params[12] = (uint32_t)p->plan.blocks_per_row;
    d->params[13] = (uint32_t)w->cols;
    d->n_params = 14;
}

/* A dispatch over one part: 0 its weights, 1 `in`, 2 `y`, and the weight params. */
void weight_part_dispatch(gpu_dispatch *d, const gpu_program *prog, const gpu_weight *w,
                          const gpu_weight_part *p, const gpu_buffer *in, const gpu_buffer *y,
                          gpu_access y_access)
{
    memset(d, 0, sizeof *d);
    d->prog = prog;
    d->bindings[0] = (gpu_binding){ 0, &p->buf, 0, 0, GPU_READ };
    d->bindings[1] = (gpu_binding){ 1, in, 0, 0, GPU_READ };
    d->bindings[2] = (gpu_binding){ 2, y, 0, 0, y_access };
    d->n_bindings = 3;
    weight_params(w, p, d);
}

/* n work groups as a 2D grid within 65535 per dimension (the GLES minimum) */
void weight_grid(gpu_dispatch *d, uint64_t n)
{
    uint32_t x = n < 65535 ? (uint32_t)n : 65535;
    d->groups[0] = x ? x : 1;
    d->groups[1] = (uint32_t)((n + d->groups[0] - 1) / d->groups[0]);
    d->groups[2] = 1;
}
