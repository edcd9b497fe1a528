/* Mamba's convolution and scan. See ssm.h. */
#include "ops/ssm.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

#define SSM_WG 64u
#define SSM_NORM_WG 128u /* the grouped norm: a work group a (group, token) of thousands */
/* a scan of more tokens than this goes in sub-chunks of this many: with a
 * chunk of 512, 32 sub-chunks of work a channel */
#define SSM_SUB 16u

static uint64_t align16(uint64_t n) { return (n + 15) / 16 * 16; }

/* The scan's invocations a channel: one a state value, a power of two (at
 * most SSM_WG: MODEL_SSM_MAX_STATE) */
static uint32_t ssm_lanes(const ssm_shape *s)
{
    uint32_t l = 1;
    while (l < s->d_state)
        l *= 2;
    return l;
}

uint32_t ssm_conv_width(const ssm_shape *s)
{
    return s->d_inner + (s->mamba2 ? 2 * s->n_group * s->d_state : 0);
}

/* The scan's work group: SSM_WG, or a channel's lanes where more */
static uint32_t scan_wg(const ssm_shape *s)
{
    uint32_t l = ssm_lanes(s);
    return l > SSM_WG ? l : SSM_WG;
}

glesllm_status ssm_build(gpu_context *ctx, const ssm_shape *s, ssm_kernels *out)
{
    memset(out, 0, sizeof *out);
    if (!s->d_state || scan_wg(s) > gpu_context_limits(ctx)->max_invocations ||
        (s->mamba2 && (!s->dt_rank || !s->n_group || s->d_inner % s->dt_rank)))
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "a scan of %u state values a channel (at most the GPU's %u invocations a "
                       "work group), %u heads and %u groups of %u channels", s->d_state,
                       gpu_context_limits(ctx)->max_invocations, s->dt_rank, s->n_group,
                       s->d_inner);
    /* the steps' tokens a work group: their dt inputs in shared memory */
    uint32_t shared = gpu_context_limits(ctx)->max_shared_bytes;
    out->dt_tok = 8;
    while (out->dt_tok > 1 && out->dt_tok * s->dt_rank * 4 > shared)
        out->dt_tok /= 2;
    if (!s->mamba2 && s->dt_rank * 4 > shared)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "a step projection of rank %u needs %u bytes of shared memory; the GPU "
                       "has %u", s->dt_rank, s->dt_rank * 4, shared);
    out->shape = *s;
    char defs[320];
    snprintf(defs, sizeof defs, "WG_SIZE %u\nD_INNER %u\nD_CONV %u", SSM_WG, ssm_conv_width(s),
             s->d_conv);
    glesllm_status st = gpu_program_build(ctx, "ssm_conv.comp", defs, &out->conv);
    /* (the programs of PHASE 0 to 9: ssm_scan.comp; Mamba-2 takes 6 to 9
     * for the sub-chunks, Mamba 4) */
    gpu_program *ph[10] = { &out->scan, &out->carry,  &out->fixup, &out->steps,
                            &out->local, &out->norm,  &out->gram,  &out->intra,
                            &out->ends,  &out->cumsum };
    for (int i = 0; st == GLESLLM_OK && i < 10; i++) {
        if (s->mamba2 ? i == 4 : i >= 5)
            continue;
        snprintf(defs, sizeof defs,
                 "WG_SIZE %u\nD_INNER %u\nD_STATE %u\nDT_RANK %u\nPHASE %d\nBC_NORM %d\n"
                 "LANES %u\nDT_TOK %u\nMAMBA2 %d\nHEAD_DIM %u\nN_GROUP %u",
                 i == 0 ? scan_wg(s) : i == 5 ? SSM_NORM_WG : SSM_WG, s->d_inner, s->d_state,
                 s->dt_rank, i,
                 s->bc_norm ? 1 : 0, ssm_lanes(s), out->dt_tok, s->mamba2 ? 1 : 0,
                 s->mamba2 ? s->d_inner / s->dt_rank : 1, s->mamba2 ? s->n_group : 1);
        st = gpu_program_build(ctx, "ssm_scan.comp", defs, ph[i]);
    }
    if (st)
        ssm_destroy(out);
    return st;
}

void ssm_destroy(ssm_kernels *k)
{
    gpu_program_destroy(&k->conv);
    gpu_program_destroy(&k->scan);
    gpu_program_destroy(&k->carry);
    gpu_program_destroy(&k->fixup);
    gpu_program_destroy(&k->steps);
    gpu_program_destroy(&k->local);
    gpu_program_destroy(&k->norm);
    gpu_program_destroy(&k->gram);
    gpu_program_destroy(&k->intra);
    gpu_program_destroy(&k->ends);
    gpu_program_destroy(&k->cumsum);
}

ssm_params ssm_params_layout(const ssm_shape *s)
{
    ssm_params p;
    bool m2 = s->mamba2;
    uint64_t at = 0, di = s->d_inner, cw = ssm_conv_width(s);
    uint64_t per = m2 ? s->dt_rank : di; /* a head's, or a channel's */
    p.taps = at;
    at += align16(cw * s->d_conv);
    p.conv_b = at;
    at += align16(cw);
    p.dt_w = at;
    at += m2 ? 0 : align16(di * s->dt_rank);
    p.dt_b = at;
    at += align16(per);
    p.a = at;
    at += align16(m2 ? per : di * s->d_state);
    p.d = at;
    at += align16(per);
    p.norm_w = at;
    at += align16(m2 ? di : s->dt_rank + 2ull * s->d_state);
    p.floats = at;
    return p;
}

ssm_slot ssm_slot_layout(const ssm_shape *s)
{
    ssm_slot l;
    l.conv = 0;
    l.ssm = align16((uint64_t)(s->d_conv - 1) * ssm_conv_width(s));
    l.floats = l.ssm + align16((uint64_t)s->d_inner * s->d_state);
    return l;
}

uint32_t ssm_sub_tokens(uint32_t n) { return n <= SSM_SUB ? n : SSM_SUB; }

uint64_t ssm_gram_floats(const ssm_shape *s, uint32_t n)
{
    uint32_t t = ssm_sub_tokens(n);
    return s->mamba2 ? (uint64_t)((n + t - 1) / t) * s->n_group * t * t : 0;
}

uint64_t ssm_carry_floats(const ssm_shape *s, uint32_t n)
{
    uint32_t t = ssm_sub_tokens(n);
    return (uint64_t)((n + t - 1) / t) * s->d_inner * s->d_state;
}

static void bind(gpu_dispatch *d, const ssm_io *io)
{
    d->bindings[0] = (gpu_binding){ 0, io->par, 0, 0, GPU_READ };
    d->bindings[1] = (gpu_binding){ 1, io->act, 0, 0, GPU_READ_WRITE };
    d->bindings[2] = (gpu_binding){ 2, io->state, 0, 0, GPU_READ_WRITE };
    d->n_bindings = 3;
}

static bool fits(uint64_t v) { return v < (1ull << 32); }

glesllm_status ssm_record_conv(gpu_queue *q, const ssm_kernels *k, const ssm_io *io, uint32_t n)
{
    const ssm_shape *s = &k->shape;
    if (!n || !fits(io->x + (uint64_t)n * io->x_stride) || !fits(io->xc + (uint64_t)n * io->xc_stride))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "convolution of %u tokens: out of range", n);
    ssm_params pl = ssm_params_layout(s);
    ssm_slot sl = ssm_slot_layout(s);
    gpu_dispatch d = { 0 };
    d.prog = &k->conv;
    bind(&d, io);
    uint32_t p[] = { n,
                     (uint32_t)io->x,
                     (uint32_t)io->x_stride,
                     (uint32_t)io->xc,
                     (uint32_t)io->xc_stride,
                     (uint32_t)(io->src + sl.conv),
                     (uint32_t)(io->dst + sl.conv),
                     io->zero ? 1u : 0u,
                     (uint32_t)pl.taps,
                     (uint32_t)pl.conv_b };
    memcpy(d.params, p, sizeof p);
    d.n_params = sizeof p / sizeof p[0];
    d.groups[0] = (ssm_conv_width(s) + SSM_WG - 1) / SSM_WG;
    d.groups[1] = n + s->d_conv - 1;
    d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status ssm_record_scan(gpu_queue *q, const ssm_kernels *k, const ssm_io *io, uint32_t n)
{
    const ssm_shape *s = &k->shape;
    if (!n || n > 65535 || !fits(io->out + (uint64_t)n * io->out_stride) ||
        !fits(io->gram + ssm_gram_floats(s, n)) ||
        !fits(io->cum + (uint64_t)n * io->out_stride) || !fits(io->carry + ssm_carry_floats(s, n)))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "scan of %u tokens: out of range", n);
    ssm_params pl = ssm_params_layout(s);
    ssm_slot sl = ssm_slot_layout(s);
    uint32_t t = ssm_sub_tokens(n), n_sub = (n + t - 1) / t;
    gpu_dispatch d = { 0 };
    bind(&d, io);
    uint32_t p[] = { n,
                     t,
                     (uint32_t)io->xc,
                     (uint32_t)io->xc_stride,
                     (uint32_t)io->dbc,
                     (uint32_t)io->dbc_stride,
                     (uint32_t)io->z,
                     (uint32_t)io->z_stride,
                     (uint32_t)io->out,
                     (uint32_t)io->out_stride,
                     (uint32_t)io->cum,
                     (uint32_t)io->carry,
                     (uint32_t)(io->src + sl.ssm),
                     (uint32_t)(io->dst + sl.ssm),
                     io->zero ? 1u : 0u,
                     (uint32_t)pl.dt_w,
                     (uint32_t)pl.dt_b,
                     (uint32_t)pl.a,
                     (uint32_t)pl.d,
                     (uint32_t)pl.norm_w,
                     gpu_f2u(io->eps),
                     (uint32_t)io->gram };
    memcpy(d.params, p, sizeof p);
    d.n_params = sizeof p / sizeof p[0];
    uint32_t cg = (s->d_inner + SSM_WG - 1) / SSM_WG, per = scan_wg(s) / ssm_lanes(s);
    d.groups[2] = 1;
    if (n_sub == 1) {
        d.prog = &k->scan;
        d.groups[0] = (s->d_inner + per - 1) / per;
        d.groups[1] = 1;
        return gpu_queue_dispatch(q, &d);
    }
    d.prog = &k->steps;
    d.groups[0] = cg;
    d.groups[1] = (n + k->dt_tok - 1) / k->dt_tok;
    glesllm_status st = gpu_queue_dispatch(q, &d);
    if (st)
        return st;
    if (s->mamba2) { /* the SSD form: C . B of the sub-chunks' tokens, y within them, their
                        end states, the steps' sums */
        struct {
            const gpu_program *prog;
            uint32_t x, y;
        } ssd[4] = { { &k->gram, n_sub, s->n_group },
                     { &k->intra, cg, n },
                     { &k->ends, (s->d_inner * s->d_state + SSM_WG - 1) / SSM_WG, n_sub },
                     { &k->cumsum, cg, n_sub } };
        for (int i = 0; !st && i < 4; i++) {
            d.prog = ssd[i].prog;
            d.groups[0] = ssd[i].x;
            d.groups[1] = ssd[i].y;
            st = gpu_queue_dispatch(q, &d);
        }
    } else {
        d.prog = &k->local;
        d.groups[1] = n_sub;
        st = gpu_queue_dispatch(q, &d);
    }
    if (st)
        return st;
    d.prog = &k->carry;
    d.groups[0] = (s->d_inner * s->d_state + SSM_WG - 1) / SSM_WG;
    d.groups[1] = 1;
    if ((st = gpu_queue_dispatch(q, &d)))
        return st;
    d.prog = &k->fixup;
    d.groups[0] = cg;
    d.groups[1] = n;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status ssm_record_norm(gpu_queue *q, const ssm_kernels *k, const ssm_io *io, uint32_t n)
{
    const ssm_shape *s = &k->shape;
    if (!s->mamba2 || !n || n > 65535 || !fits(io->out + (uint64_t)n * io->out_stride))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "grouped norm of %u tokens: out of range", n);
    ssm_params pl = ssm_params_layout(s);
    gpu_dispatch d = { 0 };
    bind(&d, io);
    d.prog = &k->norm;
    d.params[8] = (uint32_t)io->out;
    d.params[9] = (uint32_t)io->out_stride;
    d.params[19] = (uint32_t)pl.norm_w;
    d.params[20] = gpu_f2u(io->eps);
    d.n_params = 21;
    d.groups[0] = s->n_group;
    d.groups[1] = n;
    d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}
