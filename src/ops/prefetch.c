/* Prefetching a weight into L2. See prefetch.h. */
#include "ops/prefetch.h"

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

#define PREFETCH_WG 256u /* 128 where the GPU allows no more */
#define PREFETCH_PER 4u  /* uvec4 an invocation */

void prefetch_choose(gpu_context *ctx, int set, uint64_t bytes, bool *out, const char **why)
{
    *out = false;
    if (set) {
        *out = set > 0;
        *why = "set by GLESLLM_PREFETCH";
    } else if (!gpu_context_caps(ctx)->memory_total) {
        *why = "no dedicated GPU memory reported: a GPU sharing the CPU's memory, "
               "with small caches";
    } else if (bytes < PREFETCH_MIN) {
        *why = "FFN down matrices under 8 MiB";
    } else {
        *out = true;
        *why = "a discrete GPU (large caches), for FFN down matrices of 8 MiB or more "
               "(their first 20-32 MiB by format)";
    }
}

glesllm_status prefetch_build(gpu_context *ctx, prefetch_kernel *out)
{
    memset(out, 0, sizeof *out);
    uint32_t most = gpu_context_limits(ctx)->max_invocations;
    out->wg = most >= PREFETCH_WG ? PREFETCH_WG : 128;
    char defs[64];
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPER %u", out->wg, PREFETCH_PER);
    glesllm_status st = gpu_program_build(ctx, "prefetch.comp", defs, &out->prog);
    if (!st)
        st = gpu_buffer_create(ctx, 16, NULL, GPU_BUFFER_DEVICE, "prefetch sink", &out->sink);
    if (st)
        prefetch_destroy(out);
    return st;
}

void prefetch_destroy(prefetch_kernel *k)
{
    gpu_program_destroy(&k->prog);
    gpu_buffer_destroy(&k->sink);
}

uint64_t prefetch_bytes(uint32_t gate_type, uint32_t mib)
{
    if (mib)
        return (uint64_t)mib << 20;
    return (gate_type == GGML_TYPE_Q4_0 ? 20ull : 32ull) << 20;
}

uint64_t prefetch_qkv_bytes(uint32_t gate_type, uint64_t qkv_bytes, int mib)
{
    if (mib >= 0)
        return (uint64_t)mib << 20;
    return gate_type == GGML_TYPE_Q4_0 && qkv_bytes >= PREFETCH_MIN ? 8ull << 20 : 0;
}

glesllm_status prefetch_record(gpu_queue *q, const prefetch_kernel *k, const gpu_weight *w,
                               uint64_t bytes)
{
    glesllm_status st = GLESLLM_OK;
    uint64_t left = bytes;
    for (uint32_t i = 0; st == GLESLLM_OK && i < w->n_parts && left; i++) {
        const gpu_weight_part *p = &w->parts[i];
        uint64_t n = (p->buf.size < left ? p->buf.size : left) / 16; /* uvec4 */
        left -= n * 16;
        uint64_t per_group = k->wg * PREFETCH_PER;
        gpu_dispatch d = { &k->prog,
                           { { 0, &p->buf, 0, (size_t)(n * 16), GPU_READ },
                             { 1, &k->sink, 0, 0, GPU_READ } },
                           2, { (uint32_t)n }, 1,
                           { (uint32_t)((n + per_group - 1) / per_group), 1, 1 } };
        if (n)
            st = gpu_queue_dispatch(q, &d);
    }
    return st;
}
