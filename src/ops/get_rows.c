/* Row lookup (embeddings). See get_rows.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "ops/get_rows.h"

glesllm_status get_rows_build(gpu_context *ctx, uint32_t type, get_rows_kernel *out)
{
    memset(out, 0, sizeof *out);
    if (!quant_gpu_layout_of(type))
        return err_set(GLESLLM_ERR_UNSUPPORTED, "no GPU row lookup for tensor type %s",
                       ggml_type_name(type) ? ggml_type_name(type) : "(unknown)");
    char tdef[32], defines[96];
    weight_type_define(type, tdef, sizeof tdef);
    snprintf(defines, sizeof defines, "%s\nWG_SIZE %u", tdef,
             gpu_context_limits(ctx)->max_invocations >= 256 ? 256u : 128u);
    glesllm_status st = gpu_program_build(ctx, "get_rows.comp", defines, &out->prog);
    if (st == GLESLLM_OK)
        out->type = type;
    return st;
}

void get_rows_destroy(get_rows_kernel *k)
{
    gpu_program_destroy(&k->prog);
    memset(k, 0, sizeof *k);
}

glesllm_status get_rows_record(gpu_queue *q, const get_rows_kernel *k, const gpu_weight *w,
                               const gpu_buffer *ids, uint32_t id_off, uint32_t n_ids,
                               const gpu_buffer *y, uint64_t y_off, uint64_t y_stride,
                               float scale)
{
    if (k->type != w->type)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "row lookup kernel for %s given tensor %s (%s)",
                       ggml_type_name(k->type), w->name, ggml_type_name(w->type));
    if (!n_ids)
        return GLESLLM_OK;
    if ((uint64_t)(id_off + n_ids) * 4 > ids->size ||
        (y_off + (uint64_t)(n_ids - 1) * y_stride + w->cols) * 4 > y->size || y_stride < w->cols)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "row lookup %s: ids or output too small",
                       w->name);
    for (uint32_t i = 0; i < w->n_parts; i++) {
        const gpu_weight_part *p = &w->parts[i];
        gpu_dispatch d;
        weight_part_dispatch(&d, &k->prog, w, p, ids, y, GPU_WRITE);
        d.params[0] = n_ids;
        d.params[1] = id_off;
        d.params[2] = (uint32_t)y_off;
        d.params[3] = (uint32_t)y_stride;
        d.params[4] = (uint32_t)p->row0;
        d.params[5] = (uint32_t)p->rows;
        d.params[6] = i + 1 == w->n_parts;
        d.params[7] = scale != 0.0f ? gpu_f2u(scale) : 0u;
        weight_grid(&d, n_ids);
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}
