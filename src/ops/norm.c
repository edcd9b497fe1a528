/* RMSNorm. See norm.h. */
#include "ops/norm.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

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
    if ((st = gpu_program_build(ctx, "rms_norm.comp", defs, &out->prep))) {
        norm_destroy(out);
        return st;
    }
    snprintf(defs, sizeof defs, "WG_SIZE %u\nADD 1%s", NORM_WG,
             gpu_context_caps(ctx)->subgroup ? "\nUSE_SUBGROUP 1" : "");
    if ((st = gpu_program_build(ctx, "rms_norm.comp", defs, &out->add)))
        norm_destroy(out);
    return st;
}

void norm_destroy(norm_kernels *k)
{
    gpu_program_destroy(&k->rms);
    gpu_program_destroy(&k->prep);
    gpu_program_destroy(&k->add);
}

static glesllm_status record_rms(gpu_queue *q, const gpu_program *prog, const gpu_buffer *act,
                                 uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                                 uint64_t x_off, uint64_t y_off, uint32_t rows, gpu_access y_acc)
{
    uint64_t span = (uint64_t)(rows - 1) * stride + n;
    gpu_dispatch d = { 0 };
    d.prog = prog;
    /* ranges for the barrier tracking; the rows are found by params 3, 4 */
    d.bindings[0] = (gpu_binding){ 0, act, 0, (x_off + span) * 4, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, act, w_off * 4, n * 4, GPU_READ };
    d.bindings[2] = (gpu_binding){ 2, act, 0, (y_off + span) * 4, y_acc };
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

glesllm_status norm_record_rms(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                               uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                               uint64_t x_off, uint64_t y_off, uint32_t rows)
{
    return record_rms(q, &k->rms, act, n, eps, stride, w_off, x_off, y_off, rows, GPU_WRITE);
}

glesllm_status norm_record_rms_add(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                                   uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                                   uint64_t x_off, uint64_t y_off, uint32_t rows)
{
    return record_rms(q, &k->add, act, n, eps, stride, w_off, x_off, y_off, rows,
                      GPU_READ_WRITE);
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

glesllm_status norm_build_qk(gpu_context *ctx, const qk_norm_shape *shape, qk_norm_kernel *out)
{
    memset(out, 0, sizeof *out);
    const qk_norm_shape *s = shape;
    if (!s->q_span || !s->k_span || s->q_dim % s->q_span || s->kv_dim % s->k_span ||
        s->q_span % s->head_dim || s->k_span % s->head_dim || s->head_dim % 2)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "Q/K norm: spans of %u and %u values do not divide Q of %u and K of %u "
                       "into whole heads of %u", s->q_span, s->k_span, s->q_dim, s->kv_dim,
                       s->head_dim);
    out->shape = *s;
    /* (128: the invocations every GLES 3.1 device has; a head of 128 values
     * is 64 pairs) */
    uint32_t wg = s->q_span >= 256 ? 128 : 64;
    char defs[224], kv[64];
    kv_layout_defines(&s->kv, kv, sizeof kv);
    snprintf(defs, sizeof defs,
             "WG_SIZE %u\nQ_DIM %u\nKV_DIM %u\nHEAD_DIM %u\nQ_SPAN %u\nK_SPAN %u%s", wg,
             s->q_dim, s->kv_dim, s->head_dim, s->q_span, s->k_span, kv);
    return gpu_program_build(ctx, "qk_norm.comp", defs, &out->prog);
}

void norm_destroy_qk(qk_norm_kernel *k) { gpu_program_destroy(&k->prog); }

glesllm_status norm_record_qk(gpu_queue *q, const qk_norm_kernel *k, const gpu_buffer *act,
                              const gpu_buffer *cache, const qk_norm_args *a)
{
    const qk_norm_shape *s = &k->shape;
    uint64_t raw_end = a->raw_off + (a->n_tok - 1) * a->raw_stride + s->q_dim + 2ull * s->kv_dim;
    uint64_t q_end = a->q_to_cache ? s->q_dim : a->q_off + (a->n_tok - 1) * a->q_stride + s->q_dim;
    uint64_t kv = (uint64_t)a->n_tok * s->kv_dim / 2;
    uint64_t cache_end = (a->k_off > a->v_off ? a->k_off : a->v_off) + kv;
    if ((a->seq_tab || a->kv_run) && !s->kv.page)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "Q/K norm: cache rows by entry without pages");
    if (a->q_to_cache && a->n_tok != 1)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "Q/K norm: Q to the cache for one token only");
    if (!a->n_tok || raw_end * 4 > act->size || (!a->q_to_cache && q_end * 4 > act->size) ||
        cache_end * 4 > cache->size || raw_end >= (1ull << 32) || q_end >= (1ull << 32))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "Q/K norm of %u tokens: past the end of the activations or the cache",
                       a->n_tok);
    /* (a batch over sequences: dispatches of as many tokens as the params hold) */
    enum { MOST = GPU_MAX_PARAMS - 12 };
    for (uint32_t t0 = 0; t0 < a->n_tok; t0 += a->seq_tab ? MOST : a->n_tok) {
        uint32_t n = a->seq_tab && a->n_tok - t0 > MOST ? MOST : a->n_tok - t0;
        gpu_dispatch d = { 0 };
        d.prog = &k->prog;
        d.bindings[0] = (gpu_binding){ 0, act, 0, 0, a->q_to_cache ? GPU_READ : GPU_READ_WRITE };
        d.bindings[1] = (gpu_binding){ 1, cache, 0, 0, GPU_WRITE };
        d.n_bindings = 2;
        uint32_t p[] = { (uint32_t)(a->raw_off + t0 * a->raw_stride), (uint32_t)a->raw_stride,
                         (uint32_t)a->q_weight, (uint32_t)a->k_weight, (uint32_t)a->rope_off,
                         gpu_f2u(a->eps), (uint32_t)(a->q_off + t0 * a->q_stride),
                         (uint32_t)a->q_stride, a->q_to_cache ? 1u : 0u, (uint32_t)a->k_off,
                         (uint32_t)a->v_off, a->seq_tab ? 1u : a->kv_run ? 2u : 0u, a->kv_first };
        memcpy(d.params, p, sizeof p);
        d.n_params = sizeof p / sizeof p[0] - (a->seq_tab ? 1 : 0);
        for (uint32_t t = 0; a->seq_tab && t < n; t++)
            d.params[d.n_params++] = a->seq_tab[t0 + t];
        d.groups[0] = s->q_dim / s->q_span + 2 * (s->kv_dim / s->k_span);
        d.groups[1] = n;
        d.groups[2] = 1;
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st)
            return st;
    }
    return GLESLLM_OK;
}
