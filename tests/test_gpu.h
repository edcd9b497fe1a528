/* GPU helpers for tests: open the context the way the CLI does (so
 * GLESLLM_LIMITS=min and GLESLLM_PLATFORM apply), and run the rms_norm kernel
 * that several tests use as their known-good workload. */
#ifndef GLESLLM_TEST_GPU_H
#define GLESLLM_TEST_GPU_H

#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"
#include "test_support.h"

static inline gpu_context *test_open_gpu(void)
{
    gpu_options opt;
    gpu_context *ctx = NULL;
    if (gpu_options_from_env(&opt) != GLESLLM_OK || gpu_context_create(&opt, &ctx) != GLESLLM_OK) {
        printf("cannot open the GPU: %s\n", glesllm_last_error());
        return NULL;
    }
    return ctx;
}

/* "WG_SIZE n[\nUSE_SUBGROUP 1]" */
static inline void test_wg_defines(char *buf, size_t n, unsigned wg, int subgroup)
{
    snprintf(buf, n, "WG_SIZE %u%s", wg, subgroup ? "\nUSE_SUBGROUP 1" : "");
}

static inline gpu_dispatch test_rms_dispatch(const gpu_program *p, const gpu_buffer *x,
                                             const gpu_buffer *w, const gpu_buffer *y,
                                             uint32_t rows, uint32_t n, float eps)
{
    gpu_dispatch d;
    memset(&d, 0, sizeof d);
    d.prog = p;
    d.bindings[0] = (gpu_binding){ 0, x, 0, (size_t)rows * n * 4, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, w, 0, (size_t)n * 4, GPU_READ };
    d.bindings[2] = (gpu_binding){ 2, y, 0, (size_t)rows * n * 4, GPU_WRITE };
    d.n_bindings = 3;
    d.params[0] = n;
    d.params[1] = gpu_f2u(eps);
    d.n_params = 2;
    d.groups[0] = rows;
    d.groups[1] = d.groups[2] = 1;
    return d;
}

#endif
