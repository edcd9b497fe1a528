/* What the driver does that no query says, measured once a context by
 * small kernels: whether f16 subnormals are kept, the order of a subgroup's
 * adds. Above the buffers, programs and queue it runs them with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_internal.h"

/* One dispatch of a probe's program over buf (binding 0), waited for, on a
 * queue of its own */
static glesllm_status run_probe(gpu_context *ctx, gpu_program *prog, gpu_buffer *buf,
                                uint32_t groups)
{
    gpu_queue *q = NULL;
    glesllm_status st = gpu_queue_create(ctx, &q);
    if (st != GLESLLM_OK)
        return st;
    gpu_dispatch d = { .prog = prog, .n_bindings = 1, .groups = { groups, 1, 1 } };
    d.bindings[0] = (gpu_binding){ .slot = 0, .buf = buf, .access = GPU_READ_WRITE };
    st = gpu_queue_dispatch(q, &d);
    if (st == GLESLLM_OK)
        st = gpu_queue_submit(q);
    if (st == GLESLLM_OK)
        st = gpu_queue_wait(q, 0);
    gpu_queue_destroy(q);
    return st;
}

/* f16_probe.comp's dispatch: true when its four results are what IEEE
 * half arithmetic with subnormals gives (the multiply-add's first may round
 * either way: 4, 4.5 or 5 x 2^-24). */
static glesllm_status probe_f16_subnormals(gpu_context *ctx, bool *kept)
{
    const float u = 0x1p-24f; /* the f16 subnormal step */
    uint32_t v[6] = { 0x00300003u, gpu_f2u(16384.0f), 0, 0, 0, 0 }; /* levels 3, 48 */
    gpu_program prog;
    glesllm_status st = gpu_program_build(ctx, "f16_probe.comp",
                                          ctx->caps.f16_types ? "F16 1" : NULL, &prog);
    if (st != GLESLLM_OK)
        return st;
    gpu_buffer buf;
    st = gpu_buffer_create(ctx, sizeof v, v, 0, "f16 probe", &buf);
    if (st != GLESLLM_OK) {
        gpu_program_destroy(&prog);
        return st;
    }
    st = run_probe(ctx, &prog, &buf, 1);
    if (st == GLESLLM_OK)
        st = gpu_buffer_read(ctx, &buf, 0, v, sizeof v);
    gpu_buffer_destroy(&buf);
    gpu_program_destroy(&prog);
    if (st != GLESLLM_OK)
        return st;
    float r[4];
    memcpy(r, v + 2, sizeof r);
    *kept = r[0] == 3 * 0x1p-10f && r[1] == 48 * 0x1p-10f && r[2] >= 4 * u && r[2] <= 5 * u &&
            r[3] == 72 * u;
    return GLESLLM_OK;
}

/* A subgroup's sum of v[0..n) as lane 0 holds it after a butterfly: the
 * halves folded (lane i + n/2 onto lane i, then n/4...), or neighbours first
 * (i + 1 onto i, then i + 2...) */
static float tree_sum(const float *v, uint32_t n, int order)
{
    float t[128];
    memcpy(t, v, n * sizeof *t);
    if (order == GPU_SG_HALVES) {
        for (uint32_t h = n / 2; h; h /= 2)
            for (uint32_t i = 0; i < h; i++)
                t[i] = t[i] + t[i + h];
    } else {
        for (uint32_t h = 1; h < n; h *= 2)
            for (uint32_t i = 0; i + h < n; i += 2 * h)
                t[i] = t[i] + t[i + h];
    }
    return t[0];
}

/* sg_order.comp over random values of spread magnitudes (so that other
 * orders round otherwise), against tree_sum's two orders */
static glesllm_status probe_subgroup_order(gpu_context *ctx, int *order)
{
    enum { TRIALS = 32 };
    uint32_t n = ctx->caps.subgroup_size, count = TRIALS * n;
    *order = 0;
    if (!ctx->caps.subgroup || n < 2 || n > 128 || (n & (n - 1)))
        return GLESLLM_OK;
    float *v = malloc((count + TRIALS) * sizeof *v);
    if (!v)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    uint32_t r = 12345;
    for (uint32_t i = 0; i < count; i++) {
        r = r * 1664525u + 1013904223u;
        float m = 1.0f + (float)(r >> 9) * 0x1p-23f;
        v[i] = ldexpf((r & 1) ? -m : m, (int)((r >> 1) % 25) - 12);
    }
    gpu_program prog = { 0 };
    char defs[32];
    snprintf(defs, sizeof defs, "WG_SIZE %u", n);
    glesllm_status st = gpu_program_build(ctx, "sg_order.comp", defs, &prog);
    gpu_buffer buf = { 0 };
    if (st == GLESLLM_OK)
        st = gpu_buffer_create(ctx, (count + TRIALS) * sizeof *v, v, 0,
                               "subgroup order probe", &buf);
    if (st == GLESLLM_OK)
        st = run_probe(ctx, &prog, &buf, TRIALS);
    float got[TRIALS];
    if (st == GLESLLM_OK)
        st = gpu_buffer_read(ctx, &buf, count * sizeof *v, got, sizeof got);
    for (int o = GPU_SG_HALVES; st == GLESLLM_OK && o <= GPU_SG_NEIGHBOURS && !*order; o++) {
        bool all = true;
        for (uint32_t k = 0; k < TRIALS && all; k++)
            all = got[k] == tree_sum(v + k * n, n, o);
        if (all)
            *order = o;
    }
    if (buf.id)
        gpu_buffer_destroy(&buf);
    if (prog.id)
        gpu_program_destroy(&prog);
    free(v);
    return st;
}

glesllm_status gpu_context_subgroup_order(gpu_context *ctx, int *out)
{
    if (ctx->subgroup_order < 0) {
        int o = 0;
        glesllm_status st = probe_subgroup_order(ctx, &o);
        if (st != GLESLLM_OK)
            return st;
        ctx->subgroup_order = o;
    }
    *out = ctx->subgroup_order;
    return GLESLLM_OK;
}

glesllm_status gpu_context_f16_subnormals(gpu_context *ctx, bool *out)
{
    if (ctx->f16_subnormals < 0) {
        bool kept = false;
        glesllm_status st = probe_f16_subnormals(ctx, &kept);
        if (st != GLESLLM_OK)
            return st;
        ctx->f16_subnormals = kept;
    }
    *out = ctx->f16_subnormals > 0;
    return GLESLLM_OK;
}
