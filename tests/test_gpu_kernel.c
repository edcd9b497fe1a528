/* Kernels against the CPU reference on random data: rms_norm over shapes
 * that are not multiples of the work group, for every work-group size the
 * limits allow and for both reduction paths (subgroup where offered, shared
 * memory always); the Q/K norm with RoPE (ops/norm.h) over the width and a
 * head at a time, for several tokens and for one; Mamba's convolution and
 * scan (ops/ssm.h) from a given state and from none, over one token, a few
 * (one sub-chunk) and many (sub-chunks and their carries), with and without
 * the norms of dt, B and C; Mamba-2's with its grouped norm; RWKV-7's
 * LayerNorm with its token shifts and its time mix between the projections
 * (ops/rwkv.h), a pass of many tokens and the same tokens a pass each. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm.h"
#include "ops/rwkv.h"
#include "ops/ssm.h"
#include "ops/ref_ops.h"
#include "quant/quant.h"
#include "test_gpu.h"

static gpu_context *ctx;
static gpu_queue *queue;

void setUp(void) {}
void tearDown(void) {}

/* f32 sums of up to 4099 squares in a different order than the double
 * reference: the relative error stays near sqrt(n) * 2^-24; 2e-6 bounds it. */
#define RMS_REL_TOL 2e-6

static void run_case(unsigned wg, int subgroup, uint32_t rows, uint32_t n, uint64_t seed)
{
    test_rng rng = { seed };
    size_t count = (size_t)rows * n;
    float *x = malloc(count * 4), *w = malloc((size_t)n * 4), *y = malloc(count * 4),
          *ref = malloc(count * 4);
    TEST_ASSERT_TRUE(x && w && y && ref);
    rng_fill(&rng, x, count, -2.0f, 2.0f);
    rng_fill(&rng, w, n, 0.5f, 1.5f);
    const float eps = 1e-5f;
    ref_rms_norm(ref, x, w, rows, n, eps);

    char defines[64];
    test_wg_defines(defines, sizeof defines, wg, subgroup);
    gpu_program p;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_program_build(ctx, "rms_norm.comp", defines, &p),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT32(wg, p.local_size[0]);
    gpu_buffer bx, bw, by;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, count * 4, x, 0, "x", &bx));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, (size_t)n * 4, w, 0, "w", &bw));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, count * 4, NULL, 0, "y", &by));
    gpu_dispatch d = test_rms_dispatch(&p, &bx, &bw, &by, rows, n, eps);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_queue_dispatch(queue, &d), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &by, 0, y, count * 4));
    double err = max_rel_error(y, ref, count, 1e-3);
    char msg[160];
    snprintf(msg, sizeof msg, "wg %u subgroup %d rows %u n %u: max rel error %.3g", wg, subgroup,
             rows, n, err);
    TEST_ASSERT_TRUE_MESSAGE(err < RMS_REL_TOL, msg);
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&bw);
    gpu_buffer_destroy(&by);
    gpu_program_destroy(&p);
    free(x);
    free(w);
    free(y);
    free(ref);
}

static const uint32_t shapes[][2] = { { 1, 1 }, { 3, 7 }, { 5, 64 }, { 2, 127 }, { 7, 576 },
                                      { 4, 1000 }, { 2, 4099 } };

static void run_all_shapes(int subgroup)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    for (unsigned wg = 32; wg <= 512 && wg <= L->max_invocations; wg *= 2)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            run_case(wg, subgroup, shapes[i][0], shapes[i][1], 1000 + i);
}

static void test_rms_norm_shared_memory_path(void) { run_all_shapes(0); }

static void test_rms_norm_subgroup_path(void)
{
    if (!gpu_context_caps(ctx)->subgroup)
        TEST_IGNORE_MESSAGE("no GL_KHR_shader_subgroup here (or GLESLLM_LIMITS=min)");
    run_all_shapes(1);
}

/* One Q/K norm case: n tokens of n_head / n_head_kv heads of hd values,
 * normalised over the width or a head (by_head), into act (q_to_cache
 * false) or, one token, Q into the cache. */
static void qk_case(uint32_t n_head, uint32_t n_head_kv, uint32_t hd, bool by_head, uint32_t n,
                    bool q_to_cache, uint64_t seed)
{
    test_rng rng = { seed };
    uint32_t qd = n_head * hd, kd = n_head_kv * hd, qs = by_head ? hd : qd, ks = by_head ? hd : kd;
    uint32_t stride = qd + 2 * kd + 4; /* (rows apart, as act's are) */
    /* act: raw rows | q weight | k weight | RoPE rows | Q out */
    uint32_t qw = n * stride, kw = qw + qs, rope = kw + ks, qo = rope + n * hd;
    uint32_t total = qo + n * qd;
    float *act = calloc(total, 4), *ref = malloc((size_t)n * (qd + 2 * kd) * 4);
    TEST_ASSERT_TRUE(act && ref);
    rng_fill(&rng, act, n * stride, -2.0f, 2.0f);
    rng_fill(&rng, act + qw, qs + ks, 0.5f, 1.5f);
    for (uint32_t i = 0; i < n * hd / 2; i++) {
        float t = rng_float(&rng, -3.0f, 3.0f);
        act[rope + 2 * i] = cosf(t);
        act[rope + 2 * i + 1] = sinf(t);
    }
    /* the reference: norm, then RoPE on adjacent pairs (the kernel's rows) */
    for (uint32_t t = 0; t < n; t++) {
        float *r = ref + (size_t)t * (qd + 2 * kd);
        memcpy(r, act + (size_t)t * stride, (qd + 2 * kd) * 4);
        ref_rms_norm(r, r, act + qw, qd / qs, qs, 1e-6f);
        ref_rms_norm(r + qd, r + qd, act + kw, kd / ks, ks, 1e-6f);
        ref_rope(r, act + rope + t * hd, n_head, hd, false);
        ref_rope(r + qd, act + rope + t * hd, n_head_kv, hd, false);
    }
    uint32_t k_off = qd + 8, v_off = k_off + n * kd / 2 + 4, cache_n = v_off + n * kd / 2;
    qk_norm_shape sh = { qd, kd, hd, qs, ks };
    qk_norm_kernel k;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, norm_build_qk(ctx, &sh, &k), glesllm_last_error());
    gpu_buffer ba, bc;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, total * 4ull, act, 0, "act", &ba));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, cache_n * 4ull, NULL, 0, "cache", &bc));
    qk_norm_args a = { n, 1e-6f, 0, stride, qw, kw, rope, qo, qd, q_to_cache, k_off, v_off };
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, norm_record_qk(queue, &k, &ba, &bc, &a),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    float *qg = malloc((size_t)n * qd * 4);
    uint16_t *kv = malloc(cache_n * 4ull);
    TEST_ASSERT_TRUE(qg && kv);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &bc, 0, kv, cache_n * 4ull));
    if (q_to_cache)
        memcpy(qg, kv, qd * 4ull);
    else
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &ba, qo * 4ull, qg, n * qd * 4ull));
    char msg[160];
    for (uint32_t t = 0; t < n; t++) {
        const float *r = ref + (size_t)t * (qd + 2 * kd);
        for (uint32_t i = 0; i < qd; i++) {
            snprintf(msg, sizeof msg, "heads %u/%u of %u, by head %d, token %u of %u: Q[%u]",
                     n_head, n_head_kv, hd, by_head, t, n, i);
            /* f32 sums of squares in another order, and the rotation's two
             * products: a few ulps of values below 4 */
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(1e-5f, r[i], qg[(size_t)t * qd + i], msg);
        }
        for (uint32_t i = 0; i < 2 * kd; i++) {
            uint32_t at = (i < kd ? k_off : v_off) * 2 + t * kd + i % kd;
            float got = quant_half_to_float(kv[at]), want = r[qd + i];
            snprintf(msg, sizeof msg, "heads %u/%u of %u, by head %d, token %u of %u: %c[%u]",
                     n_head, n_head_kv, hd, by_head, t, n, i < kd ? 'K' : 'V', i % kd);
            /* stored as f16: one half's step of the value, 2^-10 of it */
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(fabsf(want) / 1024.0f + 1e-6f, want, got, msg);
        }
    }
    gpu_buffer_destroy(&ba);
    gpu_buffer_destroy(&bc);
    norm_destroy_qk(&k);
    free(act);
    free(ref);
    free(qg);
    free(kv);
}

static void test_qk_norm_matches_cpu(void)
{
    /* heads (Q, KV), head dimension, by head */
    static const uint32_t cases[][4] = { { 4, 2, 16, 0 }, { 4, 2, 16, 1 }, { 8, 8, 64, 0 },
                                         { 4, 1, 128, 1 }, { 3, 3, 10, 0 }, { 6, 2, 10, 1 },
                                         { 16, 4, 128, 0 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint32_t *c = cases[i];
        qk_case(c[0], c[1], c[2], c[3] != 0, 5, false, 40 + i);
        qk_case(c[0], c[1], c[2], c[3] != 0, 1, true, 60 + i);
    }
}

/* RMSNorm of n values in place, times w (ssm_case's dt, B and C) */
static void norm_in_place(float *v, const float *w, uint32_t n)
{
    float tmp[64];
    ref_rms_norm(tmp, v, w, 1, n, 1e-5f);
    memcpy(v, tmp, n * sizeof(float));
}

/* The convolution, the scan and (Mamba-2) the grouped norm of n tokens on
 * the GPU: the parameters, act and the state (two slots) uploaded, io's
 * offsets into them, act and the state read back into got and st. */
static void ssm_run(const ssm_shape *sh, const float *par, uint64_t par_n, const float *act,
                    uint64_t act_n, const float *state, uint64_t state_n, ssm_io io, uint32_t n,
                    float *got, float *st)
{
    ssm_kernels k;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, ssm_build(ctx, sh, &k), glesllm_last_error());
    gpu_buffer bp, ba, bs;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, par_n * 4, par, 0, "par", &bp));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, act_n * 4, act, 0, "act", &ba));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, state_n * 4, state, 0, "state", &bs));
    io.par = &bp;
    io.act = &ba;
    io.state = &bs;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, ssm_record_conv(queue, &k, &io, n));
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, ssm_record_scan(queue, &k, &io, n), glesllm_last_error());
    if (sh->mamba2)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, ssm_record_norm(queue, &k, &io, n));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &ba, 0, got, act_n * 4));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &bs, 0, st, state_n * 4));
    gpu_buffer_destroy(&bp);
    gpu_buffer_destroy(&ba);
    gpu_buffer_destroy(&bs);
    ssm_destroy(&k);
}

/* n tokens through the convolution and scan from a random state (zero: from
 * none), against ref_ssm_conv and ref_ssm_scan token by token: the outputs
 * and the next state. */
static void ssm_case(const ssm_shape *sh, uint32_t n, bool zero, uint64_t seed)
{
    test_rng rng = { seed };
    uint32_t di = sh->d_inner, K = sh->d_conv, S = sh->d_state, R = sh->dt_rank;
    uint32_t nb = R + 2 * S, xs = 2 * di + 3, bs = nb + 1; /* (rows apart, as act's are) */
    ssm_params pl = ssm_params_layout(sh);
    ssm_slot sl = ssm_slot_layout(sh);
    float *par = calloc(pl.floats, 4), *state = calloc(2 * sl.floats, 4);
    /* act: x|z rows | dt|B|C rows | xc rows | out rows | cums | carries */
    uint64_t x0 = 0, b0 = (uint64_t)n * xs, xc0 = b0 + (uint64_t)n * bs, o0 = xc0 + (uint64_t)n * di;
    uint64_t c0 = o0 + (uint64_t)n * di, k0 = c0 + (uint64_t)n * di;
    uint64_t total = k0 + ssm_carry_floats(sh, n);
    float *act = calloc(total, 4);
    TEST_ASSERT_TRUE(par && state && act);
    rng_fill(&rng, par + pl.taps, (size_t)di * K, -0.5f, 0.5f);
    rng_fill(&rng, par + pl.conv_b, di, -0.2f, 0.2f);
    rng_fill(&rng, par + pl.dt_w, (size_t)di * R, -0.5f, 0.5f);
    rng_fill(&rng, par + pl.dt_b, di, -4.0f, 0.0f);
    rng_fill(&rng, par + pl.a, (size_t)di * S, -8.0f, -0.5f);
    rng_fill(&rng, par + pl.d, di, 0.5f, 1.5f);
    rng_fill(&rng, par + pl.norm_w, nb, 0.5f, 1.5f);
    rng_fill(&rng, state + sl.floats, sl.floats, -1.0f, 1.0f); /* slot 1: the source */
    rng_fill(&rng, act, (size_t)n * xs, -2.0f, 2.0f);
    rng_fill(&rng, act + b0, (size_t)n * bs, -1.0f, 1.0f);
    /* the reference, token by token */
    float *conv = calloc((size_t)(K - 1) * di, 4), *h = calloc((size_t)di * S, 4);
    float *taps = malloc((size_t)di * K * 4), *a = malloc((size_t)di * S * 4);
    float *xc = malloc((size_t)n * di * 4), *y = malloc((size_t)n * di * 4), *dt = malloc(di * 4);
    TEST_ASSERT_TRUE(conv && h && taps && a && xc && y && dt);
    if (!zero) {
        memcpy(conv, state + sl.floats + sl.conv, (size_t)(K - 1) * di * 4);
        memcpy(h, state + sl.floats + sl.ssm, (size_t)di * S * 4);
    }
    memcpy(taps, par + pl.taps, (size_t)di * K * 4);
    memcpy(a, par + pl.a, (size_t)di * S * 4);
    for (uint32_t t = 0; t < n; t++) {
        const float *x = act + (size_t)t * xs;
        float bc[64 + 64 + 8];
        memcpy(bc, act + b0 + (size_t)t * bs, nb * 4);
        if (sh->bc_norm) {
            norm_in_place(bc, par + pl.norm_w, R);
            norm_in_place(bc + R, par + pl.norm_w + R, S);
            norm_in_place(bc + R + S, par + pl.norm_w + R + S, S);
        }
        ref_ssm_conv(xc + (size_t)t * di, conv, x, taps, par + pl.conv_b, di, K);
        for (uint32_t c = 0; c < di; c++) {
            float acc = 0.0f;
            for (uint32_t k = 0; k < R; k++)
                acc += par[pl.dt_w + (size_t)c * R + k] * bc[k];
            dt[c] = acc + par[pl.dt_b + c];
        }
        ref_ssm_scan(y + (size_t)t * di, h, xc + (size_t)t * di, dt, a, bc + R, par + pl.d, x + di,
                     di, S);
    }
    ssm_io io = { NULL, NULL, NULL, x0, xs, xc0, di, b0, bs, x0 + di, xs, o0, di, c0, k0,
                  sl.floats, 0, zero, 1e-5f };
    float *got = malloc(total * 4), *st = malloc(2 * sl.floats * 4);
    TEST_ASSERT_TRUE(got && st);
    ssm_run(sh, par, pl.floats, act, total, state, 2 * sl.floats, io, n, got, st);
    char msg[160];
    /* f32 on both sides, exp and log in another library, the sub-chunks'
     * decays as one exp of the summed steps: within 2e-5 of values near 1 */
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t c = 0; c < di; c++) {
            snprintf(msg, sizeof msg, "%u channels, %u state, rank %u, norms %d: %u tokens%s, "
                     "token %u channel %u", di, S, R, sh->bc_norm, n, zero ? " from none" : "", t, c);
            float w = y[(size_t)t * di + c];
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-5f * (1.0f + fabsf(w)), w,
                                             got[o0 + (size_t)t * di + c], msg);
            w = xc[(size_t)t * di + c];
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-5f * (1.0f + fabsf(w)), w,
                                             got[xc0 + (size_t)t * di + c], msg);
        }
    for (uint32_t i = 0; i < (K - 1) * di; i++) /* (the inputs themselves) */
        TEST_ASSERT_FLOAT_WITHIN_MESSAGE(0.0f, conv[i], st[sl.conv + i], "the next convolution state");
    for (uint32_t i = 0; i < di * S; i++)
        TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-5f * (1.0f + fabsf(h[i])), h[i], st[sl.ssm + i],
                                         "the next scan state");
    free(par); free(state); free(act); free(conv); free(h); free(taps); free(a);
    free(xc); free(y); free(dt); free(got); free(st);
}

/* Mamba-2's: x B C convolved, the scan of heads (one decay each, B and C
 * in groups) and the grouped norm, n tokens from a random state, against
 * ref_ssm_conv, ref_ssm_scan2 and ref_rms_norm token by token. */
static void ssm2_case(const ssm_shape *sh, uint32_t n, uint64_t seed)
{
    test_rng rng = { seed };
    uint32_t di = sh->d_inner, K = sh->d_conv, S = sh->d_state, nh = sh->dt_rank;
    uint32_t ng = sh->n_group, cw = ssm_conv_width(sh), gn = di / ng;
    uint32_t xs = di + cw + nh + 3; /* a z | x B C | steps row (rows apart, as act's are) */
    ssm_params pl = ssm_params_layout(sh);
    ssm_slot sl = ssm_slot_layout(sh);
    float *par = calloc(pl.floats, 4), *state = calloc(2 * sl.floats, 4);
    uint64_t xc0 = (uint64_t)n * xs, o0 = xc0 + (uint64_t)n * cw, c0 = o0 + (uint64_t)n * di;
    uint64_t k0 = c0 + (uint64_t)n * di, g0 = k0 + ssm_carry_floats(sh, n);
    uint64_t total = g0 + ssm_gram_floats(sh, n);
    float *act = calloc(total, 4);
    TEST_ASSERT_TRUE(par && state && act);
    rng_fill(&rng, par + pl.taps, (size_t)cw * K, -0.5f, 0.5f);
    rng_fill(&rng, par + pl.conv_b, cw, -0.2f, 0.2f);
    rng_fill(&rng, par + pl.dt_b, nh, -4.0f, 0.0f);
    rng_fill(&rng, par + pl.a, nh, -8.0f, -0.5f);
    rng_fill(&rng, par + pl.d, nh, 0.5f, 1.5f);
    rng_fill(&rng, par + pl.norm_w, di, 0.5f, 1.5f);
    rng_fill(&rng, state + sl.floats, sl.floats, -1.0f, 1.0f);
    rng_fill(&rng, act, (size_t)n * xs, -2.0f, 2.0f);
    float *conv = malloc((size_t)(K - 1) * cw * 4), *h = malloc((size_t)di * S * 4);
    float *xc = malloc((size_t)cw * 4), *y = malloc((size_t)n * di * 4), *dt = malloc(nh * 4);
    TEST_ASSERT_TRUE(conv && h && xc && y && dt);
    memcpy(conv, state + sl.floats + sl.conv, (size_t)(K - 1) * cw * 4);
    memcpy(h, state + sl.floats + sl.ssm, (size_t)di * S * 4);
    for (uint32_t t = 0; t < n; t++) {
        const float *r = act + (size_t)t * xs;
        ref_ssm_conv(xc, conv, r + di, par + pl.taps, par + pl.conv_b, cw, K);
        for (uint32_t k = 0; k < nh; k++)
            dt[k] = r[di + cw + k] + par[pl.dt_b + k];
        float *yt = y + (size_t)t * di;
        ref_ssm_scan2(yt, h, xc, dt, par + pl.a, xc + di, par + pl.d, r, di, S, nh, ng);
        for (uint32_t g = 0; g < ng; g++)
            ref_rms_norm(yt + g * gn, yt + g * gn, par + pl.norm_w + g * gn, 1, gn, 1e-5f);
    }
    ssm_io io = { NULL, NULL, NULL, di, xs, xc0, cw, di + cw, xs, 0, xs, o0, di, c0, k0,
                  sl.floats, 0, false, 1e-5f, g0 };
    float *got = malloc(total * 4), *st = malloc(2 * sl.floats * 4);
    TEST_ASSERT_TRUE(got && st);
    ssm_run(sh, par, pl.floats, act, total, state, 2 * sl.floats, io, n, got, st);
    char msg[160];
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t c = 0; c < di; c++) {
            snprintf(msg, sizeof msg, "Mamba-2, %u heads, %u groups, %u state: %u tokens, token "
                     "%u channel %u", nh, ng, S, n, t, c);
            float w = y[(size_t)t * di + c];
            /* (as ssm_case's, through a norm of values near 1) */
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(5e-5f * (1.0f + fabsf(w)), w,
                                             got[o0 + (size_t)t * di + c], msg);
        }
    for (uint32_t i = 0; i < (K - 1) * cw; i++)
        TEST_ASSERT_FLOAT_WITHIN_MESSAGE(0.0f, conv[i], st[sl.conv + i], "the next convolution state");
    for (uint32_t i = 0; i < di * S; i++)
        TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-5f * (1.0f + fabsf(h[i])), h[i], st[sl.ssm + i],
                                         "the next scan state");
    free(par); free(state); free(act); free(conv); free(h); free(xc); free(y); free(dt);
    free(got); free(st);
}

static void test_ssm_matches_cpu(void)
{
    const ssm_shape cases[] = { { 100, 4, 16, 6, false }, { 70, 3, 7, 5, true },
                                 { 128, 4, 16, 8, true } };
    const uint32_t tokens[] = { 1, 2, 16, 17, 40 };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++)
            ssm_case(&cases[i], tokens[j], (i + j) % 2 == 1, 80 + 7 * i + j);
    /* Mamba-2: 96 channels in 6 heads, 2 and 3 groups, 32 and 128 state values */
    const ssm_shape m2[] = { { 96, 4, 32, 6, false, true, 2 }, { 96, 4, 128, 6, false, true, 3 } };
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++)
            ssm2_case(&m2[i], tokens[j], 120 + 7 * i + j);
}

/* A parameter buffer, act and a state buffer of two slots for ops/rwkv.h */
typedef struct rwkv_bufs {
    gpu_buffer par, act, state;
} rwkv_bufs;

/* the three buffers made from the host's arrays, io's buffers set to them */
static void rwkv_upload(rwkv_bufs *b, const float *par, uint64_t par_n, const float *act,
                        uint64_t act_n, const float *state, uint64_t state_n, rwkv_io *io)
{
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, par_n * 4, par, 0, "par", &b->par));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, act_n * 4, act, 0, "act", &b->act));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                          gpu_buffer_create(ctx, state_n * 4, state, 0, "state", &b->state));
    io->par = &b->par;
    io->act = &b->act;
    io->state = &b->state;
}

static void rwkv_download(rwkv_bufs *b, float *act, uint64_t act_n, float *state, uint64_t state_n)
{
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &b->act, 0, act, act_n * 4));
    if (state)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &b->state, 0, state, state_n * 4));
    gpu_buffer_destroy(&b->par);
    gpu_buffer_destroy(&b->act);
    gpu_buffer_destroy(&b->state);
}

/* RWKV-7's LayerNorm with its token shifts over n rows of D channels (rows
 * D + 3 apart) from a random state (zero: none), against ref_layer_norm:
 * the time mix's six mixes, the channel mix's one, the rows each keeps as
 * the next state; and the plain norm in place. */
static void rwkv_shift_case(uint32_t D, uint32_t n, bool zero, uint64_t seed)
{
    test_rng rng = { seed };
    rwkv_shape sh = { D, 12 }; /* (the heads play no part here) */
    rwkv_kernels k;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, rwkv_build(ctx, &sh, NULL, &k), glesllm_last_error());
    rwkv_params pl = rwkv_params_layout(&sh);
    rwkv_slot sl = rwkv_slot_layout(&sh);
    uint64_t stride = D + 3, block = (uint64_t)n * stride, mix0 = block, total = 8 * block;
    float *par = calloc(pl.floats, 4), *state = calloc(2 * sl.floats, 4), *act = calloc(total, 4);
    float *got = malloc(total * 4), *st = malloc(2 * sl.floats * 4), *xn = malloc(n * D * 4);
    TEST_ASSERT_TRUE(par && state && act && got && st && xn);
    rng_fill(&rng, par, pl.floats, 0.0f, 1.0f); /* (lerps in [0, 1]) */
    rng_fill(&rng, par + pl.att_w, D, 0.5f, 1.5f);
    rng_fill(&rng, par + pl.att_b, D, -0.2f, 0.2f);
    rng_fill(&rng, par + pl.ffn_w, D, 0.5f, 1.5f);
    rng_fill(&rng, par + pl.ffn_b, D, -0.2f, 0.2f);
    rng_fill(&rng, state + sl.floats, sl.floats, -1.0f, 1.0f); /* slot 1: the source */
    for (uint32_t t = 0; t < n; t++)
        rng_fill(&rng, act + t * stride, D, -2.0f, 2.0f);
    rwkv_io io = { 0 };
    io.stride = stride;
    io.mix = mix0;
    io.block = block;
    io.src = sl.floats;
    io.zero = zero;
    io.eps = 1e-5f;
    char msg[160];
    for (int channel = 0; channel < 2; channel++) {
        rwkv_bufs b;
        rwkv_upload(&b, par, pl.floats, act, total, state, 2 * sl.floats, &io);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, rwkv_record_shift(queue, &k, &io, channel, n));
        /* the embeddings' norm, in place, with the channel mix's weights */
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, rwkv_record_norm(queue, &k, &b.par, &b.act, pl.ffn_w,
                                                           pl.ffn_b, 1e-5f, 0, 0, stride, n));
        rwkv_download(&b, got, total, st, 2 * sl.floats);
        const float *w = par + (channel ? pl.ffn_w : pl.att_w), *bb = par + (channel ? pl.ffn_b : pl.att_b);
        const float *lerp = par + (channel ? pl.cm_lerp : pl.lerp);
        const float *prev0 = state + sl.floats + (channel ? sl.ffn : sl.att);
        for (uint32_t t = 0; t < n; t++)
            ref_layer_norm(xn + t * D, act + t * stride, w, bb, 1, D, 1e-5f);
        /* f32 sums of up to 300 values against double ones, through a
         * deviation near 1: within 2e-6 of values of a few units */
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t m = 0; m < (channel ? 1u : 6u); m++)
                for (uint32_t c = 0; c < D; c++) {
                    float cur = xn[t * D + c];
                    float prev = t ? xn[(t - 1) * D + c] : zero ? 0.0f : prev0[c];
                    float want = cur + (prev - cur) * lerp[m * D + c];
                    snprintf(msg, sizeof msg, "%u channels, %u tokens%s, %s mix %u token %u "
                             "channel %u", D, n, zero ? " from none" : "", channel ? "channel" : "time",
                             m, t, c);
                    TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-6f * (1.0f + fabsf(want)), want,
                                                     got[mix0 + m * block + t * stride + c], msg);
                }
        for (uint32_t c = 0; c < D; c++)
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-6f * (1.0f + fabsf(xn[(n - 1) * D + c])),
                                             xn[(n - 1) * D + c], st[(channel ? sl.ffn : sl.att) + c],
                                             "the kept row");
        for (uint32_t t = 0; t < n; t++) { /* (the in-place norm: the channel mix's weights) */
            ref_layer_norm(xn, act + t * stride, par + pl.ffn_w, par + pl.ffn_b, 1, D, 1e-5f);
            for (uint32_t c = 0; c < D; c++)
                TEST_ASSERT_FLOAT_WITHIN_MESSAGE(2e-6f * (1.0f + fabsf(xn[c])), xn[c],
                                                 got[t * stride + c], "the norm in place");
        }
    }
    free(par); free(state); free(act); free(got); free(st); free(xn);
    rwkv_destroy(&k);
}

/* RWKV-7's time mix between its projections (the update's inputs, the state
 * update, the head norm with bonus and gate) over n tokens from a random
 * state, as the first layer or another, against ref_rwkv7_mix token by
 * token: y and the next state, of one pass (the chunked form of the update,
 * past a few tokens), of one pass token by token (the chunked form off) and
 * of a pass a token; the last two the same to the bit (one update, a token
 * at a time, in both). */
static void rwkv_mix_case(uint32_t D, uint32_t hs, uint32_t n, bool first, uint64_t seed)
{
    test_rng rng = { seed };
    rwkv_shape sh = { D, hs };
    rwkv_kernels k;
    tuning chunked = TUNING_DEFAULT; /* (the chunked form: GLESLLM_RWKV_CHUNK=1) */
    chunked.rwkv_chunk = TUNE_ON;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, rwkv_build(ctx, &sh, &chunked, &k),
                                  glesllm_last_error());
    rwkv_params pl = rwkv_params_layout(&sh);
    rwkv_slot sl = rwkv_slot_layout(&sh);
    uint64_t stride = D + 1, block = (uint64_t)n * stride;
    uint64_t total = 9 * block + rwkv_chunk_floats(&k, n); /* (the chunks' data last) */
    float *par = calloc(pl.floats, 4), *state = calloc(2 * sl.floats, 4), *act = calloc(total, 4);
    float *got[3], *st[3];
    for (int w = 0; w < 3; w++) {
        got[w] = malloc(total * 4);
        st[w] = malloc(2 * sl.floats * 4);
        TEST_ASSERT_TRUE(got[w] && st[w]);
    }
    float *ref = malloc(total * 4), *tmp = malloc(4 * D * 4);
    TEST_ASSERT_TRUE(par && state && act && ref && tmp);
    /* the blocks: r k v first y g w a vr */
    uint64_t r0 = 0, k0 = block, v0 = 2 * block, f0 = 3 * block, y0 = 4 * block, g0 = 5 * block;
    uint64_t lw0 = 6 * block, la0 = 7 * block, lv0 = 8 * block;
    rng_fill(&rng, act, 9 * block, -1.0f, 1.0f);
    rng_fill(&rng, act + lw0, 3 * block, -2.0f, 2.0f);
    const struct {
        uint64_t at;
        float lo, hi;
    } vecs[] = { { pl.w0, -2.0f, 1.0f },  { pl.a0, -1.0f, 1.0f },   { pl.v0, -1.0f, 1.0f },
                 { pl.k_k, 0.5f, 1.5f },  { pl.k_a, 0.5f, 1.5f },   { pl.r_k, -0.5f, 0.5f },
                 { pl.ln_w, 0.5f, 1.5f }, { pl.ln_b, -0.1f, 0.1f } };
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++)
        rng_fill(&rng, par + vecs[i].at, D, vecs[i].lo, vecs[i].hi);
    rng_fill(&rng, state + sl.floats, sl.floats, -0.5f, 0.5f);
    /* the reference, token by token */
    ref_rwkv7_par rp = { par + pl.w0,  par + pl.a0,  par + pl.v0,   par + pl.k_k,
                         par + pl.k_a, par + pl.r_k, par + pl.ln_w, par + pl.ln_b };
    memcpy(ref, act, total * 4);
    float *h = malloc((size_t)D * hs * 4);
    TEST_ASSERT_NOT_NULL(h);
    memcpy(h, state + sl.floats + sl.wkv, (size_t)D * hs * 4);
    for (uint32_t t = 0; t < n; t++) {
        float *row = ref + t * stride;
        ref_rwkv7_mix(row + y0, h, row + r0, row + lw0, row + k0, row + v0, row + la0, row + lv0,
                      row + g0, row + f0, first, &rp, D, hs, tmp);
    }
    rwkv_io io = { 0 };
    io.stride = stride;
    io.r = r0, io.k = k0, io.v = v0, io.first = f0, io.y = y0, io.g = g0;
    io.lw = lw0, io.la = la0, io.lv = lv0, io.chunks = 9 * block;
    uint32_t chunk = k.chunk;
    for (int way = 0; way < 3; way++) {
        rwkv_bufs b;
        rwkv_upload(&b, par, pl.floats, act, total, state, 2 * sl.floats, &io);
        k.chunk = way == 0 ? chunk : 0;
        for (uint32_t t = 0; t < (way == 2 ? n : 1); t++) {
            rwkv_io o = io; /* one token: its rows, the slots taking turns */
            uint64_t at = way == 2 ? t * stride : 0;
            o.r += at, o.k += at, o.v += at, o.first += at, o.y += at, o.g += at;
            o.lw += at, o.la += at, o.lv += at;
            o.src = (t % 2 ? 0 : 1) * sl.floats;
            o.dst = (t % 2 ? 1 : 0) * sl.floats;
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                                  rwkv_record_mix(queue, &k, &o, first, way == 2 ? 1 : n));
        }
        rwkv_download(&b, got[way], total, st[way], 2 * sl.floats);
    }
    k.chunk = chunk;
    char msg[200];
    /* f32 on both sides (the reference sums in double): the state's values
     * of a few units after a token each; the head norm scales y's errors by
     * its deviation's inverse; the chunked form's products through the
     * decays and the triangular inverse, of 16 tokens: within 1e-4 */
    const float *last2 = st[2] + ((n - 1) % 2 ? sl.floats : 0) + sl.wkv;
    for (int way = 0; way < 3; way++) {
        const float *last = way == 2 ? last2 : st[way] + sl.wkv;
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t c = 0; c < D; c++) {
                snprintf(msg, sizeof msg, "%u channels, heads of %u, %u tokens%s, %s: token %u "
                         "channel %u", D, hs, n, first ? " (first layer)" : "",
                         way == 0 ? (chunk && n > 16 ? "chunked" : "one pass")
                         : way == 1 ? "token by token" : "a pass a token", t, c);
                float w = ref[y0 + t * stride + c];
                TEST_ASSERT_FLOAT_WITHIN_MESSAGE(1e-4f * (1.0f + fabsf(w)), w,
                                                 got[way][y0 + t * stride + c], msg);
                if (way == 2)
                    TEST_ASSERT_TRUE_MESSAGE(memcmp(got[1] + y0 + t * stride + c,
                                                    got[2] + y0 + t * stride + c, 4) == 0, msg);
            }
        for (uint64_t i = 0; i < (uint64_t)D * hs; i++) {
            TEST_ASSERT_FLOAT_WITHIN_MESSAGE(1e-4f * (1.0f + fabsf(h[i])), h[i], last[i],
                                             "the next state");
            if (way == 2)
                TEST_ASSERT_TRUE_MESSAGE(memcmp(st[1] + sl.wkv + i, last2 + i, 4) == 0,
                                         "the next state, a pass a token");
        }
    }
    for (int w = 0; w < 3; w++) {
        free(got[w]);
        free(st[w]);
    }
    free(par); free(state); free(act); free(ref); free(tmp); free(h);
    rwkv_destroy(&k);
}

static void test_rwkv_matches_cpu(void)
{
    const uint32_t widths[] = { 96, 300 }, tokens[] = { 1, 3, 17 };
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            rwkv_shift_case(widths[i], tokens[j], (i + j) % 2 == 1, 200 + 7 * i + j);
    /* heads of 32 (3 of them) and of 64 (2), the first layer and another */
    rwkv_mix_case(96, 32, 1, false, 230);
    rwkv_mix_case(96, 32, 20, true, 231);
    rwkv_mix_case(128, 64, 9, false, 232);
    /* the chunked form over whole chunks and a part, from the first layer */
    rwkv_mix_case(128, 64, 40, true, 233);
}

int main(void)
{
    ctx = test_open_gpu();
    if (!ctx || gpu_queue_create(ctx, &queue) != GLESLLM_OK)
        return 1;
    UNITY_BEGIN();
    RUN_TEST(test_rms_norm_shared_memory_path);
    RUN_TEST(test_rms_norm_subgroup_path);
    RUN_TEST(test_qk_norm_matches_cpu);
    RUN_TEST(test_ssm_matches_cpu);
    RUN_TEST(test_rwkv_matches_cpu);
    int r = test_exit_code(UNITY_END());
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return r;
}
