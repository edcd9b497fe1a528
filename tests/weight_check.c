/* The weight kernels' checks that test_matvec and test_batched share
 * (weight_check.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "ops/get_rows.h"
#include "quant/quant.h"
#include "random_weights.h"
#include "test_support.h"
#include "weight_check.h"

gpu_context *ctx;
gpu_queue *queue;
tuning T;

tuning kernel_tuning(void)
{
    tuning t = TUNING_DEFAULT;
    t.cpu_splits = TUNE_OFF;
    return t;
}

const uint32_t formats[N_FORMATS] = { GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16,
                                      GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                      GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q2_K,
                                      GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                                      GGML_TYPE_Q6_K };

int is_float(uint32_t t)
{
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

void *random_tensor(test_rng *rng, uint32_t type, uint64_t rows, uint64_t cols, size_t *bytes)
{
    void *p = random_weights(&rng->s, type, rows, cols, bytes);
    TEST_ASSERT_NOT_NULL(p);
    return p;
}

float *dequantized(uint32_t type, const void *data, uint64_t rows, uint64_t cols)
{
    float *w = malloc((size_t)(rows * cols) * 4);
    TEST_ASSERT_NOT_NULL(w);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_dequantize(type, data, w, (size_t)(rows * cols)),
                                  glesllm_last_error());
    return w;
}

void reference_rows(const float *w, const float *x, uint64_t rows, uint64_t cols,
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

void check_matvec(const mv_case *c, const matvec_config *cfg, uint64_t seed)
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

void check_get_rows(const mv_case *c, uint64_t seed)
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
                                  get_rows_record(queue, &k, &gw, &bids, 1, N_IDS, &by, y_off, stride, 0.0f),
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

void check_batched(const mv_case *c, const matmul_config *cfg, const matvec_config *mv,
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
    /* matmul: each product also in slices of its columns (as a GPU takes
     * a short prompt's: every product sliced here, 2 to 8 slices by its
     * units) */
    matmul_slices sl = { 0 };
    gpu_buffer bpart = { 0 };
    if (!mv) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, matmul_slices_build(ctx, &sl));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, (size_t)(MATMUL_SLICES_MOST * n_tok * c->rows * 4),
                                                            NULL, 0, "slices", &bpart));
        sl.part = &bpart;
        sl.groups = 65535;
    }
    char msg[200];
    for (int run = 0; run < (mv ? 2 : 4); run++) {
        int add = run & 1, sliced = run >> 1;
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
        a.slices = sliced ? &sl : NULL;
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
                     "matmul %s %llux%llu x %u tokens, parts %u, wg %u tm %u tn %u half %d add %d%s: "
                     "error %.3g of sum|wx|",
                     ggml_type_name(c->type), (unsigned long long)c->rows,
                     (unsigned long long)c->cols, n_tok, gw.n_parts, cfg->wg, cfg->tm, cfg->tn,
                     cfg->half, add, sliced ? " sliced" : "", worst);
        TEST_ASSERT_TRUE_MESSAGE(worst < (mv && mk.f16_products ? F16_DOT_REL_TOL : tol), msg);
        if (mv)
            matvec_destroy(&mk);
        else
            matmul_destroy(&k);
    }
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&by);
    gpu_buffer_destroy(&bt);
    gpu_buffer_destroy(&bpart);
    matmul_slices_destroy(&sl);
    gpu_weight_destroy(&gw);
    free(wdata);
    free(w);
    free(x);
    free(y0);
    free(got);
    free(ref);
    free(mag);
}

void check_batched_mm(const mv_case *c, const matmul_config *cfg, uint32_t n_tok, double tol,
                      uint64_t seed)
{
    check_batched(c, cfg, NULL, 0, false, n_tok, tol, seed);
}

uint64_t min_cols(uint32_t t) { return is_float(t) ? 1 : ggml_block_size(t); }

void shapes_for(uint32_t t, mv_case *out, int *n)
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

void every_format_three_ways(void (*check)(const mv_case *c, size_t t, uint64_t seed),
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
