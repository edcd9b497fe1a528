/* Weight kernels against the CPU reference on random data, for every GPU
 * format: matvec (plain, residual add, offsets into larger buffers; every
 * work split, shared-memory and subgroup reductions), the batched matmul of
 * prefill (every tiling, the mediump tiles) and get_rows, over
 * shapes whose rows are not a multiple of a work group's rows and whose
 * columns are the smallest legal multiple of the block; tensors split over
 * several buffers, forced small and, under GLESLLM_LIMITS=min, by the
 * 128 MiB storage-block limit itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "ops/get_rows.h"
#include "ops/matmul.h"
#include "quant/quant.h"
#include "random_weights.h"
#include "test_gpu.h"

static gpu_context *ctx;
static gpu_queue *queue;
/* the tuning every kernel here is configured and built with: the engine's
 * choices unless a test forces one */
static tuning T;

void setUp(void) { T = TUNING_DEFAULT; }
/* a failed test leaves no path forced for the next */
void tearDown(void) { T = TUNING_DEFAULT; }

/* f32 accumulation in a different order than the double reference: the
 * error of a row is bounded by n * 2^-24 * sum |w x| and is near
 * sqrt(n) * 2^-24 * sum |w x| in practice (n <= 4096 here: ~4e-6). The
 * tolerance is relative to sum |w x| of the row. */
#define MATVEC_REL_TOL 1e-5
/* F16_DOT (matvec.c f16_dot_choice: the quantized formats, where the driver
 * has f16 types): each value of x, scaled to at most 1, rounded to f16
 * (2^-12 of it), each product of it and a level rounded (2^-12), and the 8
 * products of a half unit a lane added in f16 (7 roundings, each at most
 * 2^-12 of a partial sum, itself at most the sum of |terms|; one more where
 * the two halves' sums add in f16, matvec.comp H_MERGE and XM, whose high
 * half's x / 16 goes subnormal below 2^-10 of the unit's largest value, an
 * absolute error of at most 2^-25 of it), and the
 * K-quants' scales times d (and mins times dmin) rounded to f16 (2^-12 of
 * each; weights.glsl k4_map_h, k23_map, q6k_map): at most about
 * 10 * 2^-12 = 2.4e-3 of sum |w x| for signed levels (Q4_0, Q8_0, and Q5_0,
 * Q3_K, Q6_K less their offset), more in theory for unsigned ones with a
 * min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) and for the signed ones whose offset
 * stays in the sums (levels as f16 subnormals, matvec.c f16_subn_choice);
 * 2.4e-4 the worst seen on an H200. */
#define F16_DOT_REL_TOL 3e-3
/* get_rows dequantizes each value once: a few ulp of the value */
#define ROWS_REL_TOL 1e-6

static const uint32_t formats[] = { GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q4_0,
                                    GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
                                    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                                    GGML_TYPE_Q6_K };
#define N_FORMATS (sizeof formats / sizeof formats[0])

static int is_float(uint32_t t)
{
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

static void *random_tensor(test_rng *rng, uint32_t type, uint64_t rows, uint64_t cols, size_t *bytes)
{
    void *p = random_weights(&rng->s, type, rows, cols, bytes);
    TEST_ASSERT_NOT_NULL(p);
    return p;
}

static float *dequantized(uint32_t type, const void *data, uint64_t rows, uint64_t cols)
{
    float *w = malloc((size_t)(rows * cols) * 4);
    TEST_ASSERT_NOT_NULL(w);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_dequantize(type, data, w, (size_t)(rows * cols)),
                                  glesllm_last_error());
    return w;
}

typedef struct mv_case {
    uint32_t type;
    uint64_t rows, cols;
    uint64_t max_part_bytes;
} mv_case;

/* ref[r] = W[r] . x in double, and mag[r] = sum |W[r][k] x[k]| (at least
 * 1e-30): the scale the tolerances are relative to. */
static void reference_rows(const float *w, const float *x, uint64_t rows, uint64_t cols,
                           double *ref, double *mag)
{
    for (uint64_t r = 0; r < rows; r++) {
        double s = 0, m = 0;
        for (uint64_t k = 0; k < cols; k++) {
            double p = (double)w[r * cols + k] * x[k];
            s += p;
            m += fabs(p);
        }
        ref[r] = s;
        mag[r] = m > 1e-30 ? m : 1e-30;
    }
}

/* Runs y = W x (and y += W x at an offset) with kernel config cfg. */
static void check_matvec(const mv_case *c, const matvec_config *cfg, uint64_t seed)
{
    test_rng rng = { seed };
    size_t wbytes;
    void *wdata = random_tensor(&rng, c->type, c->rows, c->cols, &wbytes);
    float *w = dequantized(c->type, wdata, c->rows, c->cols);
    uint64_t stride = act_stride(c->cols), x_off = 8, y_off = 5;
    size_t xn = (size_t)(x_off + stride);
    float *x = malloc(xn * 4), *y0 = malloc((size_t)(c->rows + 2 * y_off) * 4),
          *got = malloc((size_t)(c->rows + 2 * y_off) * 4);
    double *ref = malloc((size_t)c->rows * sizeof *ref), *mag = malloc((size_t)c->rows * sizeof *mag);
    TEST_ASSERT_TRUE(x && y0 && ref && mag && got);
    rng_fill(&rng, x, xn, -1.0f, 1.0f);
    for (size_t i = x_off + c->cols; i < xn; i++) /* the padding may hold anything */
        x[i] = NAN;
    rng_fill(&rng, y0, (size_t)(c->rows + 2 * y_off), -1.0f, 1.0f);
    reference_rows(w, x + x_off, c->rows, c->cols, ref, mag);

    gpu_weight gw;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  gpu_weight_upload(ctx, "w", c->type, c->rows, c->cols, wdata,
                                                    c->max_part_bytes, &gw),
                                  glesllm_last_error());
    gpu_buffer bx, by;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, xn * 4, x, 0, "x", &bx));
    size_t yn = (size_t)(c->rows + 2 * y_off);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                          gpu_buffer_create(ctx, yn * 4, y0, GPU_BUFFER_DYNAMIC, "y", &by));
    char msg[200];
    for (int add = 0; add < 2; add++) {
        matvec_kernel k;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matvec_build(ctx, &T, c->type, cfg, &(matvec_variant){ add ? MATVEC_ADD : MATVEC_STORE }, &k),
                                      glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_write(&by, 0, y0, yn * 4));
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matvec_record(queue, &k, &gw, &bx, x_off, &by, y_off),
                                      glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &by, 0, got, yn * 4));
        double worst = 0;
        for (uint64_t r = 0; r < c->rows; r++) {
            double want = ref[r] + (add ? y0[y_off + r] : 0.0);
            double e = fabs(got[y_off + r] - want) / (mag[r] + (add ? fabs(y0[y_off + r]) : 0));
            if (!(e <= worst))
                worst = e;
        }
        /* the values around the written range are untouched */
        for (uint64_t i = 0; i < y_off; i++) {
            TEST_ASSERT_FLOAT_WITHIN(0.0, y0[i], got[i]);
            TEST_ASSERT_FLOAT_WITHIN(0.0, y0[y_off + c->rows + i], got[y_off + c->rows + i]);
        }
        snprintf(msg, sizeof msg,
                 "%s %llux%llu parts %u wg %u tpr %u nr %u subgroup %d add %d%s%s: error %.3g of "
                 "sum|wx|",
                 ggml_type_name(c->type), (unsigned long long)c->rows, (unsigned long long)c->cols,
                 gw.n_parts, cfg->wg, cfg->tpr, cfg->nr, cfg->subgroup, add,
                 k.f16_products ? " f16 products" : "",
                 k.f16_subnormals ? " subnormal levels" : "", worst);
        TEST_ASSERT_TRUE_MESSAGE(worst < (k.f16_products ? F16_DOT_REL_TOL : MATVEC_REL_TOL), msg);
        matvec_destroy(&k);
    }
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&by);
    gpu_weight_destroy(&gw);
    free(wdata);
    free(w);
    free(x);
    free(y0);
    free(ref);
    free(mag);
    free(got);
}

static void check_get_rows(const mv_case *c, uint64_t seed)
{
    test_rng rng = { seed };
    size_t wbytes;
    void *wdata = random_tensor(&rng, c->type, c->rows, c->cols, &wbytes);
    float *w = dequantized(c->type, wdata, c->rows, c->cols);
    enum { N_IDS = 6 };
    uint32_t ids[N_IDS + 1] = { 999 }; /* ids[0] is not looked up (id offset 1) */
    for (int i = 1; i <= N_IDS; i++)
        ids[i] = (uint32_t)(rng_next(&rng) % c->rows);
    ids[N_IDS] = (uint32_t)c->rows - 1;
    uint64_t stride = c->cols + 3, y_off = 2;
    size_t yn = (size_t)(y_off + N_IDS * stride);
    float *got = malloc(yn * 4);
    TEST_ASSERT_NOT_NULL(got);
    gpu_weight gw;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  gpu_weight_upload(ctx, "emb", c->type, c->rows, c->cols, wdata,
                                                    c->max_part_bytes, &gw),
                                  glesllm_last_error());
    get_rows_kernel k;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, get_rows_build(ctx, c->type, &k), glesllm_last_error());
    gpu_buffer bids, by;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof ids, ids, 0, "ids", &bids));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, yn * 4, NULL, 0, "y", &by));
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  get_rows_record(queue, &k, &gw, &bids, 1, N_IDS, &by, y_off, stride),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &by, 0, got, yn * 4));
    double worst = 0;
    for (int i = 0; i < N_IDS; i++) {
        const float *want = w + (uint64_t)ids[1 + i] * c->cols;
        double scale = 1e-30;
        for (uint64_t k2 = 0; k2 < c->cols; k2++)
            scale = fmax(scale, fabs(want[k2]));
        for (uint64_t k2 = 0; k2 < c->cols; k2++) {
            double e = fabs(got[y_off + i * stride + k2] - want[k2]) / scale;
            if (!(e <= worst))
                worst = e;
        }
    }
    char msg[160];
    snprintf(msg, sizeof msg, "get_rows %s %llux%llu parts %u: error %.3g of the row's max",
             ggml_type_name(c->type), (unsigned long long)c->rows, (unsigned long long)c->cols,
             gw.n_parts, worst);
    TEST_ASSERT_TRUE_MESSAGE(worst < ROWS_REL_TOL, msg);
    gpu_buffer_destroy(&bids);
    gpu_buffer_destroy(&by);
    get_rows_destroy(&k);
    gpu_weight_destroy(&gw);
    free(wdata);
    free(w);
    free(got);
}

/* The batched product (prefill): Y[t] = W x[t] for n_tok tokens whose x rows
 * sit act_stride(cols) apart after x_off, y rows y_stride apart after y_off;
 * stored and added. */
/* The same through the multi-token matvec when mv is given (kernel of nt
 * tokens, n_tok <= nt). */
static void check_batched(const mv_case *c, const matmul_config *cfg, const matvec_config *mv,
                          uint32_t nt, bool norm, uint32_t n_tok, double tol, uint64_t seed)
{
    test_rng rng = { seed };
    size_t wbytes;
    void *wdata = random_tensor(&rng, c->type, c->rows, c->cols, &wbytes);
    float *w = dequantized(c->type, wdata, c->rows, c->cols);
    uint64_t xs = act_stride(c->cols), x_off = 8, y_off = 3, ys = c->rows + 5;
    /* norm: the norm weight after the token rows, and eps */
    uint64_t norm_off = x_off + n_tok * xs;
    const float eps = 1e-5f;
    /* then room for the units of x of a kernel with xg */
    uint64_t xp_off = (norm_off + (norm ? xs : 0) + 3) / 4 * 4;
    size_t xn = (size_t)(xp_off + matvec_xg_room(c->cols, n_tok)),
           yn = (size_t)(y_off + n_tok * ys);
    float *x = malloc(xn * 4), *y0 = malloc(yn * 4), *got = malloc(yn * 4);
    double *ref = malloc((size_t)(c->rows * n_tok) * sizeof *ref),
           *mag = malloc((size_t)(c->rows * n_tok) * sizeof *mag);
    TEST_ASSERT_TRUE(x && y0 && got && ref && mag);
    rng_fill(&rng, x, xn, -1.0f, 1.0f);
    for (uint32_t t = 0; t < n_tok; t++) /* the padding may hold anything */
        for (uint64_t i = c->cols; i < xs; i++)
            x[x_off + t * xs + i] = NAN;
    rng_fill(&rng, y0, yn, -1.0f, 1.0f);
    float *xw = malloc((size_t)c->cols * 4);
    TEST_ASSERT_NOT_NULL(xw);
    for (uint32_t t = 0; t < n_tok; t++) {
        const float *xt = x + x_off + t * xs;
        double ss = 0, scale = 1;
        for (uint64_t i = 0; i < c->cols; i++) {
            xw[i] = norm ? xt[i] * x[norm_off + i] : xt[i];
            ss += (double)xt[i] * xt[i];
        }
        reference_rows(w, xw, c->rows, c->cols, ref + t * c->rows, mag + t * c->rows);
        if (norm)
            scale = 1.0 / sqrt(ss / c->cols + eps);
        for (uint64_t r = 0; r < c->rows; r++) {
            ref[t * c->rows + r] *= scale;
            mag[t * c->rows + r] *= scale;
        }
    }
    free(xw);
    gpu_weight gw;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  gpu_weight_upload(ctx, "w", c->type, c->rows, c->cols, wdata,
                                                    c->max_part_bytes, &gw),
                                  glesllm_last_error());
    gpu_buffer bx, by;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, xn * 4, x, 0, "x", &bx));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, yn * 4, y0, GPU_BUFFER_DYNAMIC, "y", &by));
    /* f16 tiles: the buffer of the tokens' tiles (x_tiles.comp) */
    gpu_buffer bt = { 0 };
    uint64_t xt_bytes = mv ? 0 : matmul_xt_bytes(cfg, n_tok, c->cols);
    if (xt_bytes)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, (size_t)xt_bytes, NULL, 0,
                                                            "x tiles", &bt));
    char msg[200];
    for (int add = 0; add < 2; add++) {
        matmul_kernel k;
        matvec_kernel mk;
        matvec_variant var = { add ? MATVEC_ADD : MATVEC_STORE, norm };
        var.nt = nt;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                      mv ? matvec_build(ctx, &T, c->type, mv, &var, &mk)
                                         : matmul_build(ctx, c->type, cfg, &var, &k),
                                      glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_write(&by, 0, y0, yn * 4));
        matmul_args a = { n_tok, x_off, y_off, ys };
        a.xt = xt_bytes ? &bt : NULL;
        matvec_args va = { norm_off, eps };
        va.n_tok = n_tok;
        va.y_stride = ys;
        va.xp_off = xp_off;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                      mv ? matvec_record_args(queue, &mk, &gw, &bx, x_off, &by,
                                                              y_off, &va)
                                         : matmul_record(queue, &k, &gw, &bx, &by, &a),
                                      glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &by, 0, got, yn * 4));
        double worst = 0;
        for (uint32_t t = 0; t < n_tok; t++) {
            for (uint64_t r = 0; r < c->rows; r++) {
                size_t o = (size_t)(y_off + t * ys + r);
                double want = ref[t * c->rows + r] + (add ? y0[o] : 0.0);
                double e = fabs(got[o] - want) / (mag[t * c->rows + r] + (add ? fabs(y0[o]) : 0));
                if (!(e <= worst))
                    worst = e;
            }
            for (uint64_t r = c->rows; r < ys; r++) /* the gaps between rows are untouched */
                TEST_ASSERT_TRUE(got[y_off + t * ys + r] == y0[y_off + t * ys + r]);
        }
        if (mv)
            snprintf(msg, sizeof msg,
                     "matvec of %u tokens%s %s %llux%llu x %u tokens, parts %u, wg %u tpr %u "
                     "nr %u xb %u xsh %d xg %d add %d%s: error %.3g of sum|wx|",
                     nt, norm ? " (norm)" : "", ggml_type_name(c->type), (unsigned long long)c->rows,
                     (unsigned long long)c->cols, n_tok, gw.n_parts, mv->wg, mv->tpr, mv->nr,
                     mv->xb, mv->xsh, mk.xg, add, mk.f16_subnormals ? " subnormal levels" : "",
                     worst);
        else
            snprintf(msg, sizeof msg,
                     "matmul %s %llux%llu x %u tokens, parts %u, wg %u tm %u tn %u half %d add %d: "
                     "error %.3g of sum|wx|",
                     ggml_type_name(c->type), (unsigned long long)c->rows,
                     (unsigned long long)c->cols, n_tok, gw.n_parts, cfg->wg, cfg->tm, cfg->tn,
                     cfg->half, add, worst);
        TEST_ASSERT_TRUE_MESSAGE(worst < (mv && mk.f16_products ? F16_DOT_REL_TOL : tol), msg);
        if (mv)
            matvec_destroy(&mk);
        else
            matmul_destroy(&k);
    }
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&by);
    gpu_buffer_destroy(&bt);
    gpu_weight_destroy(&gw);
    free(wdata);
    free(w);
    free(x);
    free(y0);
    free(got);
    free(ref);
    free(mag);
}

static void check_batched_mm(const mv_case *c, const matmul_config *cfg, uint32_t n_tok, double tol,
                             uint64_t seed)
{
    check_batched(c, cfg, NULL, 0, false, n_tok, tol, seed);
}

static uint64_t min_cols(uint32_t t) { return is_float(t) ? 1 : ggml_block_size(t); }

static void shapes_for(uint32_t t, mv_case *out, int *n)
{
    uint64_t b = min_cols(t);
    int i = 0;
    out[i++] = (mv_case){ t, 1, b, 0 };
    out[i++] = (mv_case){ t, 7, b, 0 };
    if (is_float(t)) {
        out[i++] = (mv_case){ t, 37, 33, 0 };
        out[i++] = (mv_case){ t, 5, 100, 0 };
    }
    out[i++] = (mv_case){ t, 37, 3 * (b < 32 ? 32 : b), 0 };
    out[i++] = (mv_case){ t, 130, 4096, 0 };
    *n = i;
}

/* every format x every shape of shapes_for, with the default split and
 * `subgroup` reduction (tpr widened to `subgroup` lanes, 1 or 2 subgroups) */
static void default_split_all(int subgroup)
{
    uint32_t sg = gpu_context_caps(ctx)->subgroup_size;
    for (size_t f = 0; f < N_FORMATS; f++) {
        mv_case cs[8];
        int n;
        shapes_for(formats[f], cs, &n);
        for (int i = 0; i < n; i++) {
            matvec_config cfg = matvec_default_config(ctx, &T, cs[i].type, cs[i].rows, cs[i].cols);
            cfg.subgroup = subgroup > 0;
            if (subgroup && cfg.tpr < subgroup * sg)
                cfg.tpr = subgroup * sg <= cfg.wg ? subgroup * sg : cfg.tpr;
            check_matvec(&cs[i], &cfg, 100 * f + i + 1000 * subgroup);
        }
    }
}

static void test_matvec_every_format_default_split(void) { default_split_all(0); }

/* Each group of a thread's rows loaded before the group before is summed
 * (GLESLLM_FETCH_AHEAD; by default Q4_K's 8-row kernels only): every
 * quantized format with 1, 2 and 4 rows a group, 2 units a lane (so the
 * look-ahead crosses from a unit's last group to the next unit's first), rows
 * left over in the last thread; with the norm folded in too. Tolerance: the
 * one of the default products (f16 or f32, check_matvec). */
static void test_fetch_ahead(void)
{
    static const int ahead[] = { 1, 2, 4 };
    for (size_t a = 0; a < sizeof ahead / sizeof ahead[0]; a++) {
        T.fetch_ahead = ahead[a];
        for (size_t f = 0; f < N_FORMATS; f++) {
            if (is_float(formats[f]))
                continue;
            matvec_config eight = { 64, 16, 8, false };
            mv_case mc = { formats[f], 45, 2 * 16 * 32, 0 };
            check_matvec(&mc, &eight, 7700 + 20 * a + f);
            if (a == 1)
                check_batched(&mc, NULL, &eight, 1, true, 1, MATVEC_REL_TOL, 7800 + f);
        }
    }
    T.fetch_ahead = TUNE_AUTO;
}

/* other work splits: one lane per row, many rows per thread, the widest */
static void test_matvec_work_splits(void)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    const matvec_config cfgs[] = { { 128, 8, 1, false }, { 128, 32, 3, false }, { 64, 64, 4, false },
                                   { L->max_invocations >= 256 ? 256 : 128,
                                     L->max_invocations >= 256 ? 256 : 128, 1, false } };
    const uint32_t some[] = { GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
                              GGML_TYPE_Q6_K };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t f = 0; f < sizeof some / sizeof some[0]; f++) {
            mv_case mc = { some[f], 45, 2 * ggml_block_size(some[f]) * 8, 0 };
            check_matvec(&mc, &cfgs[c], 7000 + 10 * c + f);
        }
}

static void test_matvec_subgroup_path(void)
{
    if (!gpu_context_caps(ctx)->subgroup)
        TEST_IGNORE_MESSAGE("no GL_KHR_shader_subgroup here (or GLESLLM_LIMITS=min)");
    default_split_all(1);
    default_split_all(2); /* two subgroups per row */
}

/* every format x shape, token counts below, at and past a work group's
 * tokens, with the default tiles */
/* check(case, t, seed) for every format x shape of shapes_for and t = 0, 1,
 * 2 (the 4096-column shapes with t = 1 only: slow on llvmpipe) */
static void every_format_three_ways(void (*check)(const mv_case *c, size_t t, uint64_t seed),
                                    uint64_t seed)
{
    for (size_t f = 0; f < N_FORMATS; f++) {
        mv_case cs[8];
        int n;
        shapes_for(formats[f], cs, &n);
        for (int i = 0; i < n; i++)
            for (size_t t = 0; t < 3; t++)
                if (cs[i].cols < 4096 || t == 1)
                    check(&cs[i], t, seed + 100 * f + 10 * i + t);
    }
}

static void matmul_default_tiles(const mv_case *c, size_t t, uint64_t seed)
{
    const uint32_t n_toks[] = { 1, 5, 70 };
    matmul_config cfg = matmul_default_config(ctx, &T);
    cfg.f16 = false; /* f32 tiles (the default's f16 ones: test_matmul_f16_tiles) */
    check_batched_mm(c, &cfg, n_toks[t], MATVEC_REL_TOL, seed);
}

static void test_matmul_every_format(void) { every_format_three_ways(matmul_default_tiles, 5000); }

/* The multi-token matvec (small batches: speculative verification, short
 * prompts): every format x shape, with kernels of 2, 8 and MATVEC_MULTI_NT
 * tokens (the model's most by default) given as many, fewer and as many
 * tokens; the reference and tolerance are the matvec's (f32 sums of the same
 * products, MATVEC_REL_TOL of sum |wx|). */
/* kernels of 2, 8, MATVEC_MULTI_NT tokens given 2, 5 and MATVEC_MULTI_NT,
 * the last with the norm; each with x from memory and staged, the last
 * with the splits of the FFN's shapes too (xb: the lanes of a warp on one
 * unit of x), and the first with the split of many rows for 2 tokens */
static void multi_token(const mv_case *c, size_t t, uint64_t seed)
{
    const uint32_t nts[] = { 2, 8, MATVEC_MULTI_NT }, n_toks[] = { 2, 5, MATVEC_MULTI_NT };
    matvec_config mv = matvec_multi_config(ctx, &T, c->type, nts[t], c->rows, c->cols);
    /* x from memory, then staged in shared memory (fewer lanes a row where
     * the limits leave no room for TPR units of every token) */
    uint32_t room = gpu_context_limits(ctx)->max_shared_bytes;
    mv.xsh = mv.xg = false; /* (x made ready: test_f16_dot_path) */
    while (mv.wg > mv.tpr && matvec_shared_bytes(&mv, nts[t], false) > room)
        mv.wg /= 2;
    check_batched(c, NULL, &mv, nts[t], t == 2, n_toks[t], MATVEC_REL_TOL, seed);
    mv = matvec_multi_config(ctx, &T, c->type, nts[t], c->rows, c->cols);
    mv.xsh = true;
    mv.xg = false;
    while (mv.tpr > 1 && matvec_shared_bytes(&mv, nts[t], true) > room)
        mv.tpr /= 2;
    mv.subgroup = mv.subgroup && matvec_default_config(ctx, &T, c->type, c->rows, c->cols).tpr == mv.tpr;
    if (matvec_shared_bytes(&mv, nts[t], true) <= room)
        check_batched(c, NULL, &mv, nts[t], t == 2, n_toks[t], MATVEC_REL_TOL, seed);
    /* many rows (gate/up), long rows (down): their splits on this tensor, with
     * the most tokens (the same lane mapping for every count; once keeps the
     * sanitizer run short), and many rows' own split for 2 tokens */
    static const uint64_t ffn[2][2] = { { 28672, 4096 }, { 4096, 14336 } };
    for (int f = 0; f < 2 && (nts[t] == MATVEC_MULTI_NT || (nts[t] == 2 && f == 0)); f++) {
        mv = matvec_multi_config(ctx, &T, c->type, nts[t], ffn[f][0], ffn[f][1]);
        TEST_ASSERT_TRUE(mv.xb <= 1 || mv.wg % (mv.xb * mv.tpr) == 0);
        if (mv.xb > 1) /* (with the norm, as gate/up and lm_head have it) */
            check_batched(c, NULL, &mv, nts[t], true, n_toks[t], MATVEC_REL_TOL, seed + 1 + f);
    }
}

static void test_matvec_multi_token_every_format(void)
{
    every_format_three_ways(multi_token, 9000);
    /* a split tensor, and the reduction without subgroups */
    quant_gpu_plan twenty;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_gpu_plan_make(GGML_TYPE_Q4_0, 20, 256, &twenty));
    mv_case split = { GGML_TYPE_Q4_0, 70, 256, twenty.bytes + 15 };
    matvec_config mv = matvec_multi_config(ctx, &T, split.type, 4, split.rows, split.cols);
    mv.subgroup = false;
    check_batched(&split, NULL, &mv, 4, true, 3, MATVEC_REL_TOL, 9999);
    /* the norm with one token, as a decode step has it */
    mv_case one = { GGML_TYPE_Q8_0, 40, 512, 0 };
    mv = matvec_multi_config(ctx, &T, one.type, MATVEC_MULTI_NT, one.rows, one.cols);
    check_batched(&one, NULL, &mv, MATVEC_MULTI_NT, true, 1, MATVEC_REL_TOL, 9998);
    mv = matvec_default_config(ctx, &T, one.type, one.rows, one.cols);
    check_batched(&one, NULL, &mv, 1, true, 1, MATVEC_REL_TOL, 9997);
}

/* whether a tiling's tiles fit the context's shared memory */
static bool tiles_fit(const matmul_config *c)
{
    return matmul_shared_bytes(c) <= gpu_context_limits(ctx)->max_shared_bytes;
}

/* the other tilings, and the mediump tiles (f16 products where the driver
 * has them: 11 mantissa bits, so each product is within 2^-11 of its
 * magnitude; 2e-3 of sum |wx| leaves room for the rounding of both factors) */
static void test_matmul_tilings_and_half(void)
{
    const matmul_config cfgs[] = { { 128, 4, 4, false }, { 128, 8, 4, false }, { 64, 4, 8, false },
                                   { 128, 4, 4, true } };
    const uint32_t some[] = { GGML_TYPE_F32, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
                              GGML_TYPE_Q6_K };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t f = 0; f < sizeof some / sizeof some[0]; f++) {
            if (!tiles_fit(&cfgs[c]))
                continue; /* the tiles do not fit (GLESLLM_LIMITS=min) */
            mv_case mc = { some[f], 45, 2 * ggml_block_size(some[f]), 0 };
            check_batched_mm(&mc, &cfgs[c], 41, cfgs[c].half ? 2e-3 : MATVEC_REL_TOL, 8000 + 10 * c + f);
        }
    if (!gpu_context_caps(ctx)->mediump_is_fp16)
        printf("note: mediump is 32-bit on this driver: the half tiles ran at full precision\n");
}

/* f16 tiles (GL_NV_gpu_shader5; Q4_0, Q8_0 and Q4_K dequantized in f16
 * arithmetic by w_unit_f16, the others rounded from f32): each factor
 * rounded to 11 bits and each unit's 32 products of a row and a token added
 * in one f16 sum, whose 32 roundings (each within 2^-12 of the running sum,
 * at most the unit's sum |wx|) mostly cancel; 8e-3 of sum |wx| is about the
 * case where all of them round the same way */
static void test_matmul_f16_tiles(void)
{
    /* each value once in the weights' tile (GLESLLM_MATMUL's 2): 8 or 4 rows
     * x 8 tokens a thread (token tiles of 64, two uvec4 of x_tiles.comp's
     * layout an invocation), then 4 tokens a thread (the pairs loaded as
     * uvec2) in work groups of 64 (subgroups of 8 row x 4 token slots) and
     * of 32 (the plain order); then each value twice (dup, the default):
     * the engine's 8 and 4 rows x 8 tokens, and 4 x 4; then each unit in
     * two halves (split 2, the engine's above 4224 rows) with the
     * values twice, and once with 4 tokens a thread */
    const matmul_config cfgs[] = { { 128, 8, 8, false, true },
                                   { 128, 4, 8, false, true },
                                   { 64, 4, 4, false, true },
                                   { 32, 4, 4, false, true },
                                   { 128, 8, 8, false, true, false, true },
                                   { 128, 4, 8, false, true, false, true },
                                   { 64, 4, 4, false, true, false, true },
                                   { 128, 8, 8, false, true, false, true, 2 },
                                   { 64, 4, 4, false, true, false, false, 2 } };
    if (!tiles_fit(&cfgs[0]))
        TEST_IGNORE_MESSAGE("the tiles do not fit (GLESLLM_LIMITS=min)");
    if (!gpu_context_caps(ctx)->f16_types)
        printf("note: no f16 types here: the f16 tiles' kernel ran in f32 (F16_TILES_F32)\n");
    const uint32_t some[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,
                              GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        if (!tiles_fit(&cfgs[i]))
            continue;
        for (size_t f = 0; f < sizeof some / sizeof some[0]; f++) {
            mv_case mc = { some[f], 45, 4 * ggml_block_size(some[f]), 0 };
            /* 41 tokens: the last token tile part empty */
            check_batched_mm(&mc, &cfgs[i], 41, 8e-3, 8500 + 10 * i + f);
        }
    }
}

/* matmul_config_for's rule by rows (ops/matmul.c says why, bench/RESULTS.md "Prefill tiles" has the measurements behind
 * it) and the shared memory of the tilings it picks; matmul_build refuses a
 * split it has no kernel for */
static void test_matmul_rows_rule(void)
{
    const matmul_config def = { 128, 8, 8, false, true, true, true };
    const struct { uint64_t rows; uint32_t tm, split; } want[] = {
        { 576, 4, 1 },  { 3072, 4, 1 },  { 4096, 8, 1 },  { 4224, 8, 1 },
        { 4352, 8, 2 }, { 6144, 8, 2 }, { 14336, 8, 2 }, { 28672, 8, 2 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        matmul_config r = matmul_config_for(&def, want[i].rows);
        char msg[64];
        snprintf(msg, sizeof msg, "%llu rows", (unsigned long long)want[i].rows);
        TEST_ASSERT_EQUAL_UINT32_MESSAGE(want[i].tm, r.tm, msg);
        TEST_ASSERT_EQUAL_UINT32_MESSAGE(want[i].split, matmul_split(&r), msg);
        TEST_ASSERT_EQUAL_UINT32_MESSAGE(8, r.tn, msg);
    }
    /* without by_rows (GLESLLM_MATMUL set) the tiling stays as given */
    matmul_config fixed = def;
    fixed.by_rows = false;
    matmul_config r = matmul_config_for(&fixed, 28672);
    TEST_ASSERT_EQUAL_UINT32(8, r.tm);
    TEST_ASSERT_EQUAL_UINT32(1, matmul_split(&r));
    /* bytes: weights' tile 128 rows x (values / 4 + 1) uvec4 (dup), tokens'
     * 64 x values x 2 */
    matmul_config c = def;
    TEST_ASSERT_EQUAL_UINT32(128 * 9 * 16 + 64 * 32 * 2, matmul_shared_bytes(&c));
    c.split = 2;
    TEST_ASSERT_EQUAL_UINT32(128 * 5 * 16 + 64 * 16 * 2, matmul_shared_bytes(&c));
    c.dup = false;
    TEST_ASSERT_EQUAL_UINT32(128 * 3 * 16 + 64 * 16 * 2, matmul_shared_bytes(&c));
    c.f16 = false; /* f32 tiles: split means nothing there */
    TEST_ASSERT_EQUAL_UINT32(1, matmul_split(&c));
    matmul_kernel k;
    c = def;
    c.split = 3;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          matmul_build(ctx, GGML_TYPE_Q4_0, &c, NULL, &k));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "split 3"));
    c.split = 2;
    c.f16 = c.dup = false;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          matmul_build(ctx, GGML_TYPE_Q4_0, &c, NULL, &k));
}

static void test_get_rows_every_format(void)
{
    for (size_t f = 0; f < N_FORMATS; f++) {
        mv_case cs[8];
        int n;
        shapes_for(formats[f], cs, &n);
        for (int i = 0; i < n; i++)
            check_get_rows(&cs[i], 900 * f + i);
    }
}

/* parts of a few rows each: every row lands in some part, ids cross parts */
static void test_split_tensors(void)
{
    for (size_t f = 0; f < N_FORMATS; f++) {
        uint64_t cols = 2 * (is_float(formats[f]) ? 64 : ggml_block_size(formats[f]));
        quant_gpu_plan five;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_gpu_plan_make(formats[f], 5, cols, &five));
        uint64_t part = five.bytes + 15;
        TEST_ASSERT_EQUAL_UINT64(5, quant_gpu_rows_within(formats[f], cols, part));
        mv_case mc = { formats[f], 23, cols, part };
        matvec_config cfg = matvec_default_config(ctx, &T, mc.type, mc.rows, mc.cols);
        cfg.subgroup = false;
        check_matvec(&mc, &cfg, 4000 + f);
        check_get_rows(&mc, 4100 + f);
        matmul_config mcfg = matmul_default_config(ctx, &T);
        mcfg.f16 = false;
        check_batched_mm(&mc, &mcfg, 9, MATVEC_REL_TOL, 4200 + f);
    }
}

/* Over 128 MiB: split by the storage-block limit itself under
 * GLESLLM_LIMITS=min (and on drivers with that limit, like llvmpipe). */
static void test_split_by_storage_block_limit(void)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    mv_case mc = { GGML_TYPE_F32, 9000, 4096, 0 }; /* 147 MB */
    matvec_config cfg = matvec_default_config(ctx, &T, mc.type, mc.rows, mc.cols);
    cfg.subgroup = false;
    check_matvec(&mc, &cfg, 77);
    if (L->max_storage_block_bytes <= ((uint64_t)128 << 20)) {
        gpu_weight gw;
        float *dummy = calloc(9000 * 4096, 4);
        TEST_ASSERT_NOT_NULL(dummy);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                              gpu_weight_upload(ctx, "big", mc.type, mc.rows, mc.cols, dummy, 0, &gw));
        TEST_ASSERT_TRUE(gw.n_parts >= 2);
        for (uint32_t i = 0; i < gw.n_parts; i++)
            TEST_ASSERT_TRUE(gw.parts[i].plan.bytes <= L->max_storage_block_bytes);
        gpu_weight_destroy(&gw);
        free(dummy);
    }
}

/* GLESLLM_MULTI forces a split; where the limits leave too little shared
 * memory for it (GLESLLM_LIMITS=min with 16 tokens), the work group shrinks,
 * and the forced xb is fitted to the smaller group instead of making the
 * kernel fail to build */
static void test_forced_multi_split_shrinks_whole(void)
{
    T.n_multi = 4;
    memcpy(T.multi, (uint32_t[]){ 128, 16, 2, 8 }, sizeof T.multi);
    matvec_config mv = matvec_multi_config(ctx, &T, GGML_TYPE_Q4_0, MATVEC_MAX_NT, 4096, 4096);
    T = TUNING_DEFAULT;
    TEST_ASSERT_EQUAL_UINT32(16, mv.tpr);
    TEST_ASSERT_TRUE(mv.xb <= 1 || mv.wg % (mv.xb * mv.tpr) == 0);
    matvec_kernel k;
    matvec_variant var = { MATVEC_STORE };
    var.nt = MATVEC_MAX_NT;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &mv, &var, &k),
                                  glesllm_last_error());
    matvec_destroy(&k);
}

static void test_bad_shapes_are_errors(void)
{
    gpu_weight gw;
    uint8_t blk[144] = { 0 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT,
                          gpu_weight_upload(ctx, "odd", GGML_TYPE_Q4_K, 1, 128, blk, 0, &gw));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "odd"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED,
                          gpu_weight_upload(ctx, "iq", GGML_TYPE_IQ2_XXS, 1, 256, blk, 0, &gw));
    matvec_kernel k;
    matvec_config bad = { 128, 48, 1, false };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &bad, NULL, &k));
}

/* GLESLLM_F16_DOT=1: every quantized format's matvecs through F16_DOT's
 * code, in f16 where the driver has the types, else with f32 pairs (llvmpipe: the same
 * indexing, checked at the f32 tolerance with one token; several tokens
 * stage x in f16 even then: F16_DOT_REL_TOL); =0: the f32 products; any
 * other value: an error naming the variable. Each with the levels as
 * integers and as f16 subnormals (GLESLLM_F16_SUBN, ops/matvec.c
 * f16_subn_choice; llvmpipe keeps them through unpackHalf2x16). */
static void test_f16_dot_path(void)
{
    static const mv_case cases[] = { { GGML_TYPE_Q4_0, 70, 512, 0 },
                                     { GGML_TYPE_Q4_1, 33, 4096, 0 },
                                     { GGML_TYPE_Q4_0, 9, 14336, 0 },
                                     { GGML_TYPE_Q4_K, 20, 512, 0 },
                                     { GGML_TYPE_Q8_0, 33, 1024, 0 },
                                     { GGML_TYPE_Q5_0, 18, 96, 0 },
                                     { GGML_TYPE_Q5_1, 7, 4096, 0 },
                                     { GGML_TYPE_Q2_K, 12, 768, 0 },
                                     { GGML_TYPE_Q3_K, 30, 256, 0 },
                                     { GGML_TYPE_Q5_K, 9, 1024, 0 },
                                     { GGML_TYPE_Q6_K, 22, 2304, 0 } };
    bool f16 = gpu_context_caps(ctx)->f16_types, subn = false;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_context_f16_subnormals(ctx, &subn),
                                  glesllm_last_error());
    T.f16_dot = TUNE_ON;
    /* the levels as integers (GLESLLM_F16_SUBN=0) and as f16 subnormals for
     * every format (=1, where the driver keeps them); the default takes one
     * of the two per format, and =1 is an error where they are not kept: both
     * checked below */
    const size_t n_cases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < (subn ? 2 : 1) * n_cases; i++) {
        const mv_case *c = &cases[i % n_cases];
        T.f16_subn = i < n_cases ? TUNE_OFF : TUNE_ON;
        matvec_config cfg = matvec_default_config(ctx, &T, c->type, c->rows, c->cols);
        check_matvec(c, &cfg, 7100 + i);
        check_batched(c, NULL, &cfg, 1, true, 1, MATVEC_REL_TOL, 7200 + i); /* with the norm */
        matvec_config odd = { 64, 16, 3, false }; /* rows left over in the last thread */
        check_matvec(c, &odd, 7300 + i);
        /* 8 rows a thread (the large matrices' split) */
        matvec_config eight = { 64, 16, 8, false };
        check_matvec(c, &eight, 7600 + i);
        /* x's pairs made once a work group (X_ONCE; the default's choice
         * where f16 products apply, rows of at most 4096 columns), with rows
         * left over and 8 rows a thread */
        if (c->cols <= 4096) {
            odd.x_once = eight.x_once = true;
            check_matvec(c, &odd, 7700 + i);
            check_matvec(c, &eight, 7800 + i);
            check_batched(c, NULL, &odd, 1, true, 1, MATVEC_REL_TOL, 7900 + i); /* the norm */
        }
        /* several tokens, as many and fewer: x made ready once a dispatch
         * (x_prep.comp, the default with f16 products: ops/matvec.c
         * xg_default), then staged (GLESLLM_MULTI_XG=0) */
        for (int xg = 1; xg >= 0; xg--) {
            if (!xg)
                T.multi_xg = TUNE_OFF;
            matvec_config mv =
                matvec_multi_config(ctx, &T, c->type, MATVEC_MULTI_NT, c->rows, c->cols);
            T.multi_xg = TUNE_AUTO;
            TEST_ASSERT_EQUAL_INT(xg, mv.xg);
            if (mv.xsh || mv.xg) {
                check_batched(c, NULL, &mv, MATVEC_MULTI_NT, true, MATVEC_MULTI_NT,
                              MATVEC_REL_TOL, 7400 + i);
                check_batched(c, NULL, &mv, MATVEC_MULTI_NT, false, 2, MATVEC_REL_TOL, 7500 + i);
            }
            if (mv.xg) {
                /* the set of 5 tokens (matvec.c xg_token_group: the five
                 * tokens' units loaded at once) and of 3 without the norm
                 * (xg_x_ahead: each token's units loaded during the sums of
                 * the one before), as many and fewer */
                matvec_config m5 = matvec_multi_config(ctx, &T, c->type, 5, c->rows, c->cols);
                matvec_config m3 = matvec_multi_config(ctx, &T, c->type, 3, c->rows, c->cols);
                TEST_ASSERT_TRUE(m5.xg && m3.xg);
                check_batched(c, NULL, &m5, 5, true, 5, MATVEC_REL_TOL, 7450 + i);
                check_batched(c, NULL, &m5, 5, false, 4, MATVEC_REL_TOL, 7550 + i);
                check_batched(c, NULL, &m3, 3, false, 3, MATVEC_REL_TOL, 7650 + i);
                check_batched(c, NULL, &m3, 3, false, 2, MATVEC_REL_TOL, 7750 + i);
                /* 32 lanes a row, each standing in for several of the
                 * one-token kernel's one after another (matvec.comp XG_VL:
                 * by default with subgroups of a known order, here without
                 * them), with and without the norm, as many tokens and
                 * fewer */
                matvec_config one = matvec_default_config(ctx, &T, c->type, c->rows, c->cols);
                if (one.tpr >= 64) {
                    matvec_config v5 = m5, v9 = mv;
                    v5.tpr = v9.tpr = 32;
                    v5.vl = v9.vl = one.tpr / 32;
                    v5.subgroup = v9.subgroup = false;
                    /* (both halves of the partial sums in the GPU's shared memory) */
                    const gpu_limits *L = gpu_context_limits(ctx);
                    while (matvec_shared_bytes(&v5, 5, false) > L->max_shared_bytes)
                        v5.wg /= 2;
                    while (matvec_shared_bytes(&v9, MATVEC_MULTI_NT, false) > L->max_shared_bytes)
                        v9.wg /= 2;
                    check_batched(c, NULL, &v5, 5, false, 5, MATVEC_REL_TOL, 7460 + i);
                    check_batched(c, NULL, &v5, 5, true, 3, MATVEC_REL_TOL, 7560 + i);
                    check_batched(c, NULL, &v9, MATVEC_MULTI_NT, true, MATVEC_MULTI_NT,
                                  MATVEC_REL_TOL, 7660 + i);
                    check_batched(c, NULL, &v9, MATVEC_MULTI_NT, false, 7, MATVEC_REL_TOL,
                                  7760 + i);
                }
            }
        }
    }
    T.f16_subn = TUNE_AUTO; /* the default */
    /* many rows with x made once a work group (matvec.c x_once_split: 2
     * rows a thread, 4 for Q4_0, Q4_K, Q2_K and Q3_K; Q4_0 and Q4_K with 32
     * lanes a row of 4096 columns and a row loaded ahead, fetch_ahead_rows),
     * rows left over in the last work group, with and without the norm */
    static const mv_case many[] = { { GGML_TYPE_Q4_K, 8195, 4096, 0 },
                                    { GGML_TYPE_Q4_0, 8195, 4096, 0 },
                                    { GGML_TYPE_Q8_0, 8195, 2048, 0 },
                                    { GGML_TYPE_Q2_K, 8195, 2048, 0 } };
    static const uint32_t many_nr[] = { 4, 4, 2, 4 };
    for (int i = 0; i < 4; i++) {
        matvec_config cfg = matvec_default_config(ctx, &T, many[i].type, many[i].rows, many[i].cols);
        if (f16 || gpu_context_limits(ctx)->max_shared_bytes > 16384) {
            TEST_ASSERT_TRUE(cfg.x_once);
            TEST_ASSERT_EQUAL_UINT32(many_nr[i], cfg.nr);
            TEST_ASSERT_EQUAL_UINT32(32, cfg.tpr); /* 4096 columns halved; 2048 as they were */
        }
        check_matvec(&many[i], &cfg, 8000 + (uint64_t)i);
        check_batched(&many[i], NULL, &cfg, 1, true, 1, MATVEC_REL_TOL, 8100 + (uint64_t)i);
    }
    matvec_kernel k;
    matvec_config cfg = matvec_default_config(ctx, &T, GGML_TYPE_Q4_0, 64, 256);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &cfg, NULL, &k));
    TEST_ASSERT_EQUAL_INT(f16, k.f16_products);
    TEST_ASSERT_EQUAL_INT(subn, k.f16_subnormals); /* by default where kept */
    /* with f16 products (here GLESLLM_F16_DOT=1); f32 pairs' staged row takes more
     * shared memory than the 16 KiB of GLESLLM_LIMITS=min */
    if (f16 || gpu_context_limits(ctx)->max_shared_bytes > 16384)
        TEST_ASSERT_TRUE(k.x_once);
    if (k.x_once) { /* such a kernel given a row of more than 4096 columns: an error */
        static uint8_t blocks[2 * 136 * 18];
        gpu_weight gw;
        gpu_buffer bx, by;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_weight_upload(ctx, "long", GGML_TYPE_Q4_0, 2,
                                                            136 * 32, blocks, 0, &gw));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, act_stride(136 * 32) * 4, NULL,
                                                            0, "x", &bx));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, 64, NULL, 0, "y", &by));
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                              matvec_record(queue, &k, &gw, &bx, 0, &by, 0));
        TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "4352 columns"));
        gpu_buffer_destroy(&bx);
        gpu_buffer_destroy(&by);
        gpu_weight_destroy(&gw);
    }
    matvec_destroy(&k);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q2_K, &cfg, NULL, &k));
    TEST_ASSERT_EQUAL_INT(subn, k.f16_subnormals);
    matvec_destroy(&k);
    cfg = matvec_default_config(ctx, &T, GGML_TYPE_Q4_K, 64, 256);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q4_K, &cfg, NULL, &k));
    TEST_ASSERT_EQUAL_INT(subn, k.f16_subnormals);
    matvec_destroy(&k);
    matvec_config pairs = { 64, 16, 2, false };
    matvec_variant glu = { MATVEC_GLU };
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q4_K, &pairs, &glu, &k));
    TEST_ASSERT_FALSE(k.f16_subnormals); /* Q4_K's gate/up: not by default */
    matvec_destroy(&k);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q5_K, &cfg, NULL, &k));
    TEST_ASSERT_EQUAL_INT(f16, k.f16_products);
    TEST_ASSERT_FALSE(k.f16_subnormals); /* Q5_K: not by default (matvec.c f16_subn_choice) */
    matvec_destroy(&k);
    T.f16_subn = TUNE_ON;
    glesllm_status st = matvec_build(ctx, &T, GGML_TYPE_Q5_K, &cfg, NULL, &k); /* not by default */
    if (subn) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, st);
        TEST_ASSERT_TRUE(k.f16_subnormals);
        matvec_destroy(&k);
    } else {
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, st);
        TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "GLESLLM_F16_SUBN"));
    }
    T.f16_subn = TUNE_AUTO;
    T.x_once = TUNE_OFF; /* each slot makes its pairs */
    TEST_ASSERT_FALSE(matvec_default_config(ctx, &T, GGML_TYPE_Q4_0, 64, 256).x_once);
    T.x_once = TUNE_AUTO;
    T.f16_dot = TUNE_OFF;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &cfg, NULL, &k));
    TEST_ASSERT_FALSE(k.f16_products);
    TEST_ASSERT_FALSE(k.x_once); /* (cfg asks for it: f32 products have no pairs) */
    matvec_destroy(&k);
    T.f16_dot = TUNE_AUTO;
}

/* The tuning is read from the environment at the edge (the CLI, bench):
 * each variable's values, and a value it does not take is an error naming
 * it, with the defaults left in the struct */
static void test_tuning_from_env(void)
{
    static const char *const names[] = { "GLESLLM_F16_DOT", "GLESLLM_F16_SUBN", "GLESLLM_X_ONCE",
                                         "GLESLLM_MULTI", "GLESLLM_FETCH_AHEAD" };
    tuning t;
    setenv("GLESLLM_F16_DOT", "0", 1);
    setenv("GLESLLM_F16_SUBN", "1", 1);
    setenv("GLESLLM_MULTI", "128,16,2,8", 1);
    setenv("GLESLLM_FETCH_AHEAD", "2", 1);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, tuning_from_env(&t), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(TUNE_OFF, t.f16_dot);
    TEST_ASSERT_EQUAL_INT(TUNE_ON, t.f16_subn);
    TEST_ASSERT_EQUAL_INT(TUNE_AUTO, t.x_once);
    TEST_ASSERT_EQUAL_UINT32(4, t.n_multi);
    TEST_ASSERT_EQUAL_UINT32(8, t.multi[3]);
    TEST_ASSERT_EQUAL_INT(2, t.fetch_ahead);
    static const char *const bad[][2] = { { "GLESLLM_F16_DOT", "yes" },
                                          { "GLESLLM_F16_SUBN", "on" },
                                          { "GLESLLM_X_ONCE", "2" },
                                          { "GLESLLM_MULTI", "128,16,2,3" },
                                          { "GLESLLM_FETCH_AHEAD", "3" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t j = 0; j < sizeof names / sizeof names[0]; j++)
            unsetenv(names[j]);
        setenv(bad[i][0], bad[i][1], 1);
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, tuning_from_env(&t));
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), bad[i][0]), glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(TUNE_AUTO, t.f16_dot);
    }
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++)
        unsetenv(names[j]);
}

/* The RMSNorm split across two kernels, as in a decode step: a +y matvec
 * (ADD, norm_out: the producer, P of n rows) writes y = r + P h, y times the
 * norm weight g and its partial sums of squares; a norm_scale matvec (the
 * consumer, C of n columns) reads those and computes C (y * g) / rms(y).
 * The producer's rows are split into parts (part_bytes) and its slots'
 * rows (nr) need not divide a part's. */
static void check_split_norm(uint32_t ptype, uint32_t ctype, const matvec_config *pcfg,
                             uint64_t part_bytes, uint64_t seed)
{
    test_rng rng = { seed };
    const uint64_t n = 512, m = 256, rows = 77; /* y's length, h's, C's rows */
    const float eps = 1e-5f;
    size_t pb, cb;
    void *pdata = random_tensor(&rng, ptype, n, m, &pb), *cdata = random_tensor(&rng, ctype, rows, n, &cb);
    float *pw = dequantized(ptype, pdata, n, m), *cw = dequantized(ctype, cdata, rows, n);
    /* x's buffer: h at 4, g at 300 (any float offset); y's: r at 3, y * g at
     * 1000 (a multiple of 4: the consumer reads it as vec4), sums at 1700 */
    const uint64_t h_off = 4, g_off = 4 + m + 40, r_off = 3, xg_off = 1000, sq_off = 1700;
    size_t xn = (size_t)(g_off + n + 8), yn = (size_t)(sq_off + n + 8);
    float *x = malloc(xn * 4), *y0 = malloc(yn * 4), *got = malloc(yn * 4), *out = malloc(rows * 4);
    double *ref = malloc(n * sizeof *ref), *mag = malloc(n * sizeof *mag);
    TEST_ASSERT_TRUE(x && y0 && got && out && ref && mag);
    rng_fill(&rng, x, xn, -1.0f, 1.0f);
    rng_fill(&rng, y0, yn, -1.0f, 1.0f);
    reference_rows(pw, x + h_off, n, m, ref, mag);

    gpu_weight gp, gc;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  gpu_weight_upload(ctx, "p", ptype, n, m, pdata, part_bytes, &gp),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  gpu_weight_upload(ctx, "c", ctype, rows, n, cdata, 0, &gc),
                                  glesllm_last_error());
    gpu_buffer bx, by, bo;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, xn * 4, x, 0, "x", &bx));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, yn * 4, y0, 0, "y", &by));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, rows * 4, NULL, 0, "out", &bo));
    matvec_kernel kp, kc;
    matvec_variant pv = { MATVEC_ADD }, cv = { MATVEC_STORE };
    pv.norm_out = cv.norm_scale = true;
    matvec_config ccfg = matvec_default_config(ctx, &T, ctype, rows, n);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matvec_build(ctx, &T, ptype, pcfg, &pv, &kp),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matvec_build(ctx, &T, ctype, &ccfg, &cv, &kc),
                                  glesllm_last_error());
    matvec_args pa = { g_off };
    pa.xg_off = xg_off;
    pa.sq_off = sq_off;
    uint32_t parts = matvec_norm_parts(&kp, &gp);
    TEST_ASSERT_TRUE(parts >= (n + pcfg->nr - 1) / pcfg->nr && parts <= n);
    matvec_args ca = { 0, eps };
    ca.sq_off = sq_off;
    ca.sq_count = parts;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  matvec_record_args(queue, &kp, &gp, &bx, h_off, &by, r_off, &pa),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  matvec_record_args(queue, &kc, &gc, &by, xg_off, &bo, 0, &ca),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &by, 0, got, yn * 4));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &bo, 0, out, rows * 4));

    char msg[200];
    snprintf(msg, sizeof msg, "split norm: %s %llux%llu (%u parts, nr %u) -> %s %llux%llu",
             ggml_type_name(ptype), (unsigned long long)n, (unsigned long long)m, gp.n_parts,
             pcfg->nr, ggml_type_name(ctype), (unsigned long long)rows, (unsigned long long)n);
    /* y, as check_matvec's add: MATVEC_REL_TOL of sum |w x| + |r| */
    double worst = 0, ss = 0, sq = 0;
    for (uint64_t i = 0; i < n; i++) {
        double want = ref[i] + y0[r_off + i], v = got[r_off + i];
        double e = fabs(v - want) / (mag[i] + fabs(y0[r_off + i]));
        if (!(e <= worst))
            worst = e;
        /* y * g is the one f32 product of the y written and g */
        TEST_ASSERT_TRUE_MESSAGE(got[xg_off + i] == (float)(got[r_off + i] * x[g_off + i]), msg);
        ss += v * v;
    }
    TEST_ASSERT_TRUE_MESSAGE(kp.f16_products ? worst < F16_DOT_REL_TOL : worst < MATVEC_REL_TOL,
                             msg);
    /* the partial sums add up to sum(y^2): f32 sums of positive terms, each
     * within n * 2^-24 of the total */
    for (uint32_t i = 0; i < parts; i++)
        sq += got[sq_off + i];
    TEST_ASSERT_TRUE_MESSAGE(fabs(sq - ss) <= 1e-4 * ss, msg);
    for (uint64_t i = sq_off + parts; i < yn; i++) /* nothing written past them */
        TEST_ASSERT_TRUE_MESSAGE(got[i] == y0[i], msg);
    /* the consumer: C (y * g) / rms(y) from the y written, relative to sum |C (y * g)| / rms */
    double scale = 1.0 / sqrt(ss / n + eps);
    double *cref = malloc(rows * sizeof *cref), *cmag = malloc(rows * sizeof *cmag);
    float *yg = malloc(n * 4);
    TEST_ASSERT_TRUE(cref && cmag && yg);
    for (uint64_t i = 0; i < n; i++)
        yg[i] = got[xg_off + i];
    reference_rows(cw, yg, rows, n, cref, cmag);
    worst = 0;
    for (uint64_t r = 0; r < rows; r++) {
        double e = fabs(out[r] - cref[r] * scale) / (cmag[r] * scale);
        if (!(e <= worst))
            worst = e;
    }
    snprintf(msg + strlen(msg), sizeof msg - strlen(msg), ": consumer error %.3g of sum|wx|",
             worst);
    TEST_ASSERT_TRUE_MESSAGE(worst < (kc.f16_products ? F16_DOT_REL_TOL : MATVEC_REL_TOL), msg);
    matvec_destroy(&kp);
    matvec_destroy(&kc);
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&by);
    gpu_buffer_destroy(&bo);
    gpu_weight_destroy(&gp);
    gpu_weight_destroy(&gc);
    free(pdata);
    free(cdata);
    free(pw);
    free(cw);
    free(x);
    free(y0);
    free(got);
    free(out);
    free(ref);
    free(mag);
    free(cref);
    free(cmag);
    free(yg);
}

static void test_split_norm(void)
{
    const uint32_t some[] = { GGML_TYPE_F32, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
                              GGML_TYPE_Q6_K };
    for (size_t f = 0; f < sizeof some / sizeof some[0]; f++) {
        uint32_t t = some[f];
        matvec_config def = matvec_default_config(ctx, &T, t, 512, 256);
        check_split_norm(t, t, &def, 0, 8000 + f);
        /* 3 rows a slot over parts of 70 rows: slots cross no part, and
         * the last slot of each part is short */
        quant_gpu_plan seventy;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_gpu_plan_make(t, 70, 256, &seventy));
        matvec_config odd = { 64, 16, 3, false };
        check_split_norm(t, some[(f + 1) % 5], &odd, seventy.bytes + 15, 8100 + f);
    }
    /* the variants' rules */
    matvec_kernel k;
    matvec_config cfg = matvec_default_config(ctx, &T, GGML_TYPE_Q4_0, 64, 256);
    matvec_variant bad = { MATVEC_STORE };
    bad.norm_out = true; /* not a +y kernel */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &cfg, &bad, &k));
    matvec_variant both = { MATVEC_STORE, true };
    both.norm_scale = true;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &cfg, &both, &k));
}

int main(void)
{
    UNITY_BEGIN();
    ctx = test_open_gpu();
    if (!ctx || gpu_queue_create(ctx, &queue) != GLESLLM_OK)
        return 1;
    RUN_TEST(test_matvec_every_format_default_split);
    RUN_TEST(test_matvec_work_splits);
    RUN_TEST(test_fetch_ahead);
    RUN_TEST(test_matvec_subgroup_path);
    RUN_TEST(test_f16_dot_path);
    RUN_TEST(test_tuning_from_env);
    RUN_TEST(test_matmul_every_format);
    RUN_TEST(test_matmul_tilings_and_half);
    RUN_TEST(test_matmul_f16_tiles);
    RUN_TEST(test_matmul_rows_rule);
    RUN_TEST(test_matvec_multi_token_every_format);
    RUN_TEST(test_get_rows_every_format);
    RUN_TEST(test_split_tensors);
    RUN_TEST(test_split_by_storage_block_limit);
    RUN_TEST(test_forced_multi_split_shrinks_whole);
    RUN_TEST(test_bad_shapes_are_errors);
    RUN_TEST(test_split_norm);
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return test_exit_code(UNITY_END());
}
