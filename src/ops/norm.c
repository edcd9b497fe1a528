/* RMSNorm. See norm.h. */
#include "ops/norm.h"

#include <stdio.h>
#include <string.h>

glesllm_status norm_build(gpu_context *ctx, norm_kernels *out)
{
    memset(out, 0, sizeof *out);
    char defs[64];
    snprintf(defs, sizeof defs, "WG_SIZE %u%s", NORM_WG,
             gpu_context_caps(ctx)->subgroup ? "\nUSE_SUBGROUP 1" : "");
    glesllm_status st = gpu_program_build(ctx, "rms_norm.comp", defs, &out->rms);
    if (st)
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPREP 1", NORM_WG);
    if ((st = gpu_program_build(ctx, "rms_norm.comp", defs, &out->prep)))
        norm_destroy(out);
    return st;
}

void norm_destroy(norm_kernels *k)
{
    gpu_program_destroy(&k->rms);
    gpu_program_destroy(&k->prep);
}

glesllm_status norm_record_rms(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                               uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                               uint64_t x_off, uint64_t y_off, uint32_t rows)
{
    uint64_t span = (uint64_t)(rows - 1) * stride + n;
    gpu_dispatch d = { 0 };
    d.prog = &k->rms;
    /* ranges for the barrier tracking; the rows are found by params 3, 4 */
    d.bindings[0] = (gpu_binding){ 0, act, 0, (x_off + span) * 4, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, act, w_off * 4, n * 4, GPU_READ };
    d.bindings[2] = (gpu_binding){ 2, act, 0, (y_off + span) * 4, GPU_WRITE };
    d.n_bindings = 3;
    d.params[0] = n;
    d.params[1] = gpu_f2u(eps);
    d.params[2] = stride;
    d.params[3] = (uint32_t)x_off;
    d.params[4] = (uint32_t)y_off;
    d.n_params = 5;
    d.groups[0] = rows;
    d.groups[1] = d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}

uint32_t norm_prep_groups(uint32_t n)
{
    return (n + 4 * NORM_WG - 1) / (4 * NORM_WG);
}

glesllm_status norm_record_prep(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                                uint32_t n, uint64_t w_off, uint64_t x_off, uint64_t y_off,
                                uint64_t sq_off)
{
    uint32_t groups = norm_prep_groups(n);
    gpu_dispatch d = { 0 };
    d.prog = &k->prep;
    d.bindings[0] = (gpu_binding){ 0, act, 0, (x_off + n) * 4, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, act, w_off * 4, n * 4, GPU_READ };
    d.bindings[2] = (gpu_binding){ 2, act, 0, (sq_off + groups * NORM_WG) * 4, GPU_WRITE };
    d.n_bindings = 3;
    uint32_t p[] = { n, 0, 0, (uint32_t)x_off, (uint32_t)y_off, (uint32_t)sq_off };
    memcpy(d.params, p, sizeof p);
    d.n_params = 6;
    d.groups[0] = groups;
    d.groups[1] = d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}
