/* RWKV-7's mixes. See rwkv.h. */
#include "ops/rwkv.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

#define RWKV_NORM_WG 256u /* the norm and mixes: a work group a token, a row's channels */
#define RWKV_ACT_WG 64u
/* a time mix of at most this many tokens goes as one dispatch (PHASE 5): a
 * decode step, drafted tokens, a small batch; so that these, and the tokens
 * a rollback runs again, take a step's sums to the bit */
#define RWKV_FEW 16u

static uint64_t align16(uint64_t n) { return (n + 15) / 16 * 16; }

/* the chunked form's tokens a chunk: with 16, llvmpipe took 35 s to compile
 * its fully unrolled update (8: 5 s) */
#define RWKV_CHUNK 8u

/* a chunk's data (glsl/rwkv.comp PHASE 6): ǎ, ř, b̃, k̃, the decay, Km, Br, Kr, T */
static uint32_t chunk_floats(uint32_t c, uint32_t head) { return 4 * c * head + head + 4 * c * c; }

/* the invocations a state row in the chunked update (PHASE 7's QT): 4, 2
 * for heads of more than 64 (a work group of at most 256) */
static uint32_t chunk_qt(uint32_t head) { return head > 64 ? 2 : 4; }

/* the shared memory of PHASE 6 and 7 for chunks of c tokens (rows padded
 * by a float; and reduce.glsl's partials) */
static uint32_t chunk_shared(uint32_t c, uint32_t head, uint32_t wg6)
{
    uint32_t p = head + 1, qt = chunk_qt(head);
    uint32_t p6 = (4 * c * p + 5 * c * c) * 4 + 4 * wg6;
    uint32_t p7 = (5 * c * p + head + 4 * c * c + head * qt * (c + 1)) * 4 + 4 * head * qt;
    return p6 > p7 ? p6 : p7;
}

/* a head's work group: its HEAD invocations, rounded up to a power of two */
static uint32_t head_wg(const rwkv_shape *s)
{
    uint32_t w = 1;
    while (w < s->head)
        w *= 2;
    return w;
}

glesllm_status rwkv_build(gpu_context *ctx, const rwkv_shape *s, const tuning *t,
                          rwkv_kernels *out)
{
    memset(out, 0, sizeof *out);
    if (!s->head || s->head % 4 || s->n_embd % s->head ||
        head_wg(s) > gpu_context_limits(ctx)->max_invocations)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "RWKV heads of %u values (a multiple of 4) of %u channels on a GPU of %u "
                       "invocations a work group", s->head, s->n_embd, gpu_context_limits(ctx)->max_invocations);
    out->shape = *s;
    /* the chunk, where the shared memory holds it (not GLESLLM_LIMITS=min's
     * 16 KiB for heads of 64) */
    uint32_t shared = gpu_context_limits(ctx)->max_shared_bytes, hw = head_wg(s);
    bool fits_wg = s->head * chunk_qt(s->head) <= gpu_context_limits(ctx)->max_invocations;
    out->chunk = tuning_or_default(t)->rwkv_chunk == TUNE_ON && fits_wg &&
                         chunk_shared(RWKV_CHUNK, s->head, hw) <= shared
                     ? RWKV_CHUNK
                     : 0;
    char defs[200];
    struct {
        gpu_program *prog;
        int phase, nmix;
    } ph[] = { { &out->norm, 0, 0 },  { &out->shift6, 0, 6 }, { &out->shift1, 0, 1 },
               { &out->act, 1, 0 },   { &out->prep, 2, 0 },   { &out->scan, 3, 0 },
               { &out->post, 4, 0 },  { &out->few, 5, 0 },    { &out->cprep, 6, 0 },
               { &out->cscan, 7, 0 } };
    glesllm_status st = GLESLLM_OK;
    for (size_t i = 0; st == GLESLLM_OK && i < sizeof ph / sizeof ph[0]; i++) {
        uint32_t wg = ph[i].phase == 0   ? RWKV_NORM_WG
                      : ph[i].phase == 1 ? RWKV_ACT_WG
                      : ph[i].phase == 7 ? s->head * chunk_qt(s->head)
                                         : head_wg(s);
        if (ph[i].phase >= 6 && !out->chunk)
            continue;
        snprintf(defs, sizeof defs,
                 "WG_SIZE %u\nPHASE %d\nN_EMBD %u\nNMIX %d\nHEAD %u\nCHUNK %u\n"
                 "RWKV_CHUNK_FLOATS %u\nQT %u",
                 wg, ph[i].phase, s->n_embd, ph[i].nmix, s->head, out->chunk ? out->chunk : 1,
                 chunk_floats(out->chunk, s->head), chunk_qt(s->head));
        st = gpu_program_build(ctx, "rwkv.comp", defs, ph[i].prog);
    }
    if (st)
        rwkv_destroy(out);
    return st;
}

void rwkv_destroy(rwkv_kernels *k)
{
    gpu_program *p[] = { &k->norm, &k->shift6, &k->shift1, &k->act,   &k->prep,
                         &k->scan, &k->post,   &k->few,    &k->cprep, &k->cscan };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        gpu_program_destroy(p[i]);
}

rwkv_params rwkv_params_layout(const rwkv_shape *s)
{
    uint64_t d = align16(s->n_embd), at = 0;
    rwkv_params p;
    uint64_t *v[] = { &p.att_w, &p.att_b, &p.ffn_w, &p.ffn_b, &p.lerp };
    for (size_t i = 0; i < 5; i++) {
        *v[i] = at;
        at += d;
    }
    at += 5 * d; /* (the lerps: six rows of n_embd, one after the other) */
    uint64_t *w[] = { &p.cm_lerp, &p.w0, &p.a0, &p.v0, &p.k_k, &p.k_a, &p.r_k, &p.ln_w, &p.ln_b };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        *w[i] = at;
        at += d;
    }
    p.floats = at;
    return p;
}

rwkv_slot rwkv_slot_layout(const rwkv_shape *s)
{
    rwkv_slot l;
    l.att = 0;
    l.ffn = align16(s->n_embd);
    l.wkv = 2 * align16(s->n_embd);
    l.floats = l.wkv + align16((uint64_t)s->n_embd * s->head);
    return l;
}

static bool fits(uint64_t v) { return v < (1ull << 32); }

uint64_t rwkv_chunk_floats(const rwkv_kernels *k, uint32_t n)
{
    if (!k->chunk)
        return 0;
    uint64_t chunks = (n + k->chunk - 1) / k->chunk;
    return chunks * (k->shape.n_embd / k->shape.head) * chunk_floats(k->chunk, k->shape.head);
}

static void bind(gpu_dispatch *d, const gpu_buffer *par, const gpu_buffer *act,
                 const gpu_buffer *state)
{
    d->bindings[0] = (gpu_binding){ 0, par, 0, 0, GPU_READ };
    d->bindings[1] = (gpu_binding){ 1, act, 0, 0, GPU_READ_WRITE };
    /* (the norm binds act again: it reads no state) */
    d->bindings[2] = (gpu_binding){ 2, state, 0, 0, GPU_READ_WRITE };
    d->n_bindings = 3;
}

/* d runs prog with params p[0..n) */
static void set_program(gpu_dispatch *d, const gpu_program *prog, const uint32_t *p, uint32_t n)
{
    d->prog = prog;
    memcpy(d->params, p, n * sizeof *p);
    d->n_params = n;
}

static glesllm_status norm_shift(gpu_queue *q, const gpu_program *prog, const gpu_buffer *par,
                                 const gpu_buffer *act, const gpu_buffer *state, const uint32_t *p,
                                 uint32_t slices, uint32_t n)
{
    gpu_dispatch d = { 0 };
    set_program(&d, prog, p, 13);
    bind(&d, par, act, state);
    d.groups[0] = slices;
    d.groups[1] = n;
    d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status rwkv_record_norm(gpu_queue *q, const rwkv_kernels *k, const gpu_buffer *par,
                                const gpu_buffer *act, uint64_t w, uint64_t b, float eps,
                                uint64_t x, uint64_t y, uint64_t stride, uint32_t n)
{
    if (!n || n > 65535 || !fits(x + (uint64_t)n * stride) || !fits(y + (uint64_t)n * stride))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "LayerNorm of %u rows: out of range", n);
    uint32_t p[13] = { n, (uint32_t)x, (uint32_t)stride, (uint32_t)y, 0, (uint32_t)stride, 0, 0, 1,
                       (uint32_t)w, (uint32_t)b, 0, gpu_f2u(eps) };
    return norm_shift(q, &k->norm, par, act, act, p, 1, n);
}

glesllm_status rwkv_record_shift(gpu_queue *q, const rwkv_kernels *k, const rwkv_io *io,
                                 bool channel, uint32_t n)
{
    if (!n || n > 65535 || !fits(io->mix + 6 * io->block) ||
        !fits(io->x + (uint64_t)n * io->stride))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "token shift of %u tokens: out of range", n);
    rwkv_params pl = rwkv_params_layout(&k->shape);
    rwkv_slot sl = rwkv_slot_layout(&k->shape);
    uint64_t off = channel ? sl.ffn : sl.att;
    uint32_t p[13] = { n,
                       (uint32_t)io->x,
                       (uint32_t)io->stride,
                       (uint32_t)io->mix,
                       (uint32_t)io->block,
                       (uint32_t)io->stride,
                       (uint32_t)(io->src + off),
                       (uint32_t)(io->dst + off),
                       io->zero ? 1u : 0u,
                       (uint32_t)(channel ? pl.ffn_w : pl.att_w),
                       (uint32_t)(channel ? pl.ffn_b : pl.att_b),
                       (uint32_t)(channel ? pl.cm_lerp : pl.lerp),
                       gpu_f2u(io->eps) };
    return norm_shift(q, channel ? &k->shift1 : &k->shift6, io->par, io->act, io->state, p,
                      (k->shape.n_embd + RWKV_NORM_WG - 1) / RWKV_NORM_WG, n);
}

glesllm_status rwkv_record_act(gpu_queue *q, const rwkv_kernels *k, const gpu_buffer *act,
                               const rwkv_act_range *r0, const rwkv_act_range *r1, uint32_t n)
{
    if (!n || n > 65535)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "activation of %u rows: out of range", n);
    gpu_dispatch d = { 0 };
    d.prog = &k->act;
    d.bindings[0] = (gpu_binding){ 0, act, 0, 0, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, act, 0, 0, GPU_READ_WRITE };
    d.bindings[2] = (gpu_binding){ 2, act, 0, 0, GPU_READ };
    d.n_bindings = 3;
    const rwkv_act_range *r[2] = { r0, r1 };
    uint32_t cols = 0;
    d.params[0] = n;
    for (int i = 0; i < 2; i++) {
        if (!r[i] || !r[i]->f)
            continue;
        if (!fits(r[i]->off + (uint64_t)n * r[i]->stride))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "activation of %u rows: out of range", n);
        d.params[1 + 4 * i] = (uint32_t)r[i]->off;
        d.params[2 + 4 * i] = (uint32_t)r[i]->stride;
        d.params[3 + 4 * i] = r[i]->cols;
        d.params[4 + 4 * i] = r[i]->f;
        cols = r[i]->cols > cols ? r[i]->cols : cols;
    }
    d.n_params = 9;
    d.groups[0] = (cols + RWKV_ACT_WG - 1) / RWKV_ACT_WG;
    d.groups[1] = n;
    d.groups[2] = r1 && r1->f ? 2 : 1;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status rwkv_record_mix(gpu_queue *q, const rwkv_kernels *k, const rwkv_io *io, bool first,
                               uint32_t n)
{
    const rwkv_shape *s = &k->shape;
    uint64_t end = (uint64_t)n * io->stride;
    uint64_t rows[] = { io->r, io->k, io->v, io->first, io->y, io->g, io->lw, io->la, io->lv };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!fits(rows[i] + end))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "time mix of %u tokens: out of range", n);
    if (!n || n > 65535)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "time mix of %u tokens: out of range", n);
    rwkv_params pl = rwkv_params_layout(s);
    rwkv_slot sl = rwkv_slot_layout(s);
    uint32_t heads = s->n_embd / s->head, stride = (uint32_t)io->stride;
    gpu_dispatch d = { 0 };
    bind(&d, io->par, io->act, io->state);
    d.groups[0] = heads;
    d.groups[1] = 1;
    d.groups[2] = 1;
    if (n <= RWKV_FEW) { /* all three in one dispatch */
        uint32_t few[] = { n,
                           stride,
                           (uint32_t)io->r,
                           (uint32_t)io->k,
                           (uint32_t)io->v,
                           (uint32_t)io->first,
                           (uint32_t)io->y,
                           (uint32_t)io->g,
                           (uint32_t)io->lw,
                           (uint32_t)io->la,
                           (uint32_t)io->lv,
                           (uint32_t)(io->src + sl.wkv),
                           (uint32_t)(io->dst + sl.wkv),
                           io->zero ? 1u : 0u,
                           first ? 1u : 0u,
                           (uint32_t)pl.w0,
                           (uint32_t)pl.a0,
                           (uint32_t)pl.v0,
                           (uint32_t)pl.k_k,
                           (uint32_t)pl.k_a,
                           (uint32_t)pl.r_k,
                           (uint32_t)pl.ln_w,
                           (uint32_t)pl.ln_b };
        set_program(&d, &k->few, few, sizeof few / sizeof few[0]);
        return gpu_queue_dispatch(q, &d);
    }
    /* the update's inputs */
    uint32_t prep[] = { n,
                        stride,
                        (uint32_t)io->k,
                        (uint32_t)io->v,
                        (uint32_t)io->first,
                        (uint32_t)io->lw,
                        (uint32_t)io->la,
                        (uint32_t)io->lv,
                        (uint32_t)pl.w0,
                        (uint32_t)pl.a0,
                        (uint32_t)pl.v0,
                        (uint32_t)pl.k_k,
                        (uint32_t)pl.k_a,
                        first ? 1u : 0u };
    set_program(&d, &k->prep, prep, sizeof prep / sizeof prep[0]);
    d.groups[1] = n;
    glesllm_status st = gpu_queue_dispatch(q, &d);
    if (st)
        return st;
    if (k->chunk) { /* the chunked form: every chunk's parts, then the chunks in order */
        if (!fits(io->chunks + rwkv_chunk_floats(k, n)))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "time mix of %u tokens: out of range", n);
        uint32_t cp[] = { n,
                          stride,
                          (uint32_t)io->r,
                          (uint32_t)io->lw,
                          (uint32_t)io->k,
                          (uint32_t)io->la,
                          (uint32_t)io->lv,
                          (uint32_t)io->chunks };
        set_program(&d, &k->cprep, cp, sizeof cp / sizeof cp[0]);
        d.groups[1] = (n + k->chunk - 1) / k->chunk;
        if ((st = gpu_queue_dispatch(q, &d)))
            return st;
        uint32_t cs[] = { n,
                          stride,
                          (uint32_t)io->v,
                          (uint32_t)io->y,
                          (uint32_t)io->chunks,
                          (uint32_t)(io->src + sl.wkv),
                          (uint32_t)(io->dst + sl.wkv),
                          io->zero ? 1u : 0u };
        set_program(&d, &k->cscan, cs, sizeof cs / sizeof cs[0]);
        d.groups[1] = 1;
    } else { /* the update, token by token */
        uint32_t scan[] = { n,
                            stride,
                            (uint32_t)io->r,
                            (uint32_t)io->lw,
                            (uint32_t)io->k,
                            (uint32_t)io->v,
                            (uint32_t)io->la,
                            (uint32_t)io->lv,
                            (uint32_t)io->y,
                            (uint32_t)(io->src + sl.wkv),
                            (uint32_t)(io->dst + sl.wkv),
                            io->zero ? 1u : 0u };
        set_program(&d, &k->scan, scan, sizeof scan / sizeof scan[0]);
        d.groups[1] = 1;
    }
    if ((st = gpu_queue_dispatch(q, &d)))
        return st;
    /* the head norm, bonus and gate */
    uint32_t post[] = { n,
                        stride,
                        (uint32_t)io->y,
                        (uint32_t)io->k,
                        (uint32_t)io->r,
                        (uint32_t)io->v,
                        (uint32_t)io->g,
                        (uint32_t)pl.ln_w,
                        (uint32_t)pl.ln_b,
                        (uint32_t)pl.r_k };
    set_program(&d, &k->post, post, sizeof post / sizeof post[0]);
    d.groups[1] = n;
    return gpu_queue_dispatch(q, &d);
}
