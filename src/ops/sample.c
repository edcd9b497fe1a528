/* Reductions over the logits. See sample.h. */
#include "ops/sample.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

#define SAMPLE_WG 128u

glesllm_status sample_build(gpu_context *ctx, uint32_t max_rows, sample_kernels *out)
{
    memset(out, 0, sizeof *out);
    char defs[96];
    glesllm_status st;
    out->max_rows = max_rows ? max_rows : 1;
    if ((st = gpu_buffer_create_zeroed(ctx, (size_t)out->max_rows * 4, GPU_BUFFER_DEVICE,
                                       "argmax counters", &out->argmax_count)))
        goto fail;
    snprintf(defs, sizeof defs, "WG_SIZE %u", SAMPLE_WG);
    if ((st = gpu_program_build(ctx, "argmax.comp", defs, &out->argmax)))
        goto fail;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPER_THREAD %u", SAMPLE_WG, SAMPLE_SLICE / SAMPLE_WG);
    if ((st = gpu_program_build(ctx, "topk.comp", defs, &out->topk1)))
        goto fail;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPER_THREAD %u\nFINAL 1", SAMPLE_WG,
             SAMPLE_SLICE / SAMPLE_WG);
    if ((st = gpu_program_build(ctx, "topk.comp", defs, &out->topk2)))
        goto fail;
    snprintf(defs, sizeof defs, "WG_SIZE %u", SAMPLE_WG);
    if ((st = gpu_program_build(ctx, "penalty.comp", defs, &out->penalty)) ||
        (st = gpu_program_build(ctx, "softcap.comp", defs, &out->softcap)))
        goto fail;
    return GLESLLM_OK;
fail:
    sample_destroy(out);
    return st;
}

void sample_destroy(sample_kernels *k)
{
    gpu_program_destroy(&k->argmax);
    gpu_buffer_destroy(&k->argmax_count);
    gpu_program_destroy(&k->topk1);
    gpu_program_destroy(&k->topk2);
    gpu_program_destroy(&k->penalty);
    gpu_program_destroy(&k->softcap);
}

glesllm_status sample_record_softcap(gpu_queue *q, const sample_kernels *k, const gpu_buffer *buf,
                                     uint32_t n, uint64_t off, uint64_t stride, uint32_t rows,
                                     float cap)
{
    if (!n || !rows || (off + (rows - 1) * stride + n) * 4 > buf->size ||
        off + (rows - 1) * stride + n >= (1ull << 32))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "soft cap of %u rows: out of range", rows);
    gpu_dispatch d = { 0 };
    d.prog = &k->softcap;
    d.bindings[0] = (gpu_binding){ 0, buf, 0, 0, GPU_READ_WRITE };
    d.n_bindings = 1;
    uint32_t p[] = { n, (uint32_t)stride, (uint32_t)off, gpu_f2u(cap) };
    memcpy(d.params, p, sizeof p);
    d.n_params = 4;
    d.groups[0] = (n + SAMPLE_WG - 1) / SAMPLE_WG;
    d.groups[1] = rows;
    d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}

uint32_t sample_groups(uint32_t n_vocab) { return (n_vocab + SAMPLE_SLICE - 1) / SAMPLE_SLICE; }

uint64_t sample_argmax_floats(uint32_t n_vocab) { return 2ull * sample_groups(n_vocab); }

uint64_t sample_topk_floats(uint32_t n_vocab)
{
    return sample_groups(n_vocab) * (2ull * SAMPLE_MAX_K + 2);
}

/* a dispatch whose binding 0 is the activations */
static gpu_dispatch act_dispatch(const gpu_program *prog, const gpu_buffer *act, uint32_t groups,
                                 const uint32_t *params, uint32_t n_params)
{
    gpu_dispatch d = { 0 };
    d.prog = prog;
    d.bindings[0] = (gpu_binding){ 0, act, 0, 0, GPU_READ_WRITE };
    d.n_bindings = 1;
    memcpy(d.params, params, n_params * sizeof *params);
    d.n_params = n_params;
    d.groups[0] = groups;
    d.groups[1] = d.groups[2] = 1;
    return d;
}

glesllm_status sample_record_argmax(gpu_queue *q, const sample_kernels *k, const gpu_buffer *act,
                                    const gpu_buffer *tokens, uint32_t n_vocab, uint64_t logits,
                                    uint32_t row_stride, uint32_t rows, uint64_t part_off,
                                    uint32_t slot)
{
    if (!rows || rows > k->max_rows)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "argmax of %u rows: at most %u at once",
                       rows, k->max_rows);
    uint32_t groups = sample_groups(n_vocab);
    uint32_t p[] = { n_vocab, (uint32_t)logits, (uint32_t)part_off, SAMPLE_SLICE, slot, row_stride };
    gpu_dispatch d = act_dispatch(&k->argmax, act, groups, p, 6);
    d.bindings[1] = (gpu_binding){ 1, tokens, 0, 0, GPU_WRITE };
    d.bindings[2] = (gpu_binding){ 2, &k->argmax_count, 0, 0, GPU_READ_WRITE };
    d.n_bindings = 3;
    d.groups[1] = rows;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status sample_record_topk(gpu_queue *q, const sample_kernels *k, const gpu_buffer *act,
                                  const gpu_buffer *out, uint32_t n_vocab, uint64_t logits,
                                  uint64_t lists_off, uint32_t top_k)
{
    uint32_t groups = sample_groups(n_vocab);
    uint32_t p[] = { n_vocab, (uint32_t)logits, (uint32_t)lists_off, top_k, groups };
    gpu_dispatch d = act_dispatch(&k->topk1, act, groups, p, 5);
    glesllm_status st = gpu_queue_dispatch(q, &d);
    if (st)
        return st;
    d.prog = &k->topk2;
    d.bindings[1] = (gpu_binding){ 1, out, 0, 0, GPU_WRITE };
    d.n_bindings = 2;
    d.groups[0] = 1;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status sample_record_penalty(gpu_queue *q, const sample_kernels *k, const gpu_buffer *act,
                                     const gpu_buffer *tokens, uint32_t n_vocab, uint64_t logits,
                                     uint32_t first, uint32_t window, float penalty)
{
    uint32_t p[] = { first, window, (uint32_t)logits, gpu_f2u(penalty), n_vocab };
    gpu_dispatch d = act_dispatch(&k->penalty, act, 1, p, 5);
    d.bindings[1] = (gpu_binding){ 1, tokens, 0, 0, GPU_READ };
    d.n_bindings = 2;
    return gpu_queue_dispatch(q, &d);
}
