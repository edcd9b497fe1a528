/* The kernels of several tokens against the CPU reference on random data,
 * for every GPU format (weight_check.h): the multi-token matvec of small
 * batches and the tiled matmul of prefill (every tiling, the mediump and f16
 * tiles), get_rows, and tensors split over several buffers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "ops/get_rows.h"
#include "ops/moe.h"
#include "quant/quant.h"
#include "random_weights.h"
#include "test_gpu.h"
#include "weight_check.h"

void setUp(void) { T = kernel_tuning(); }
/* a failed test leaves no path forced for the next */
void tearDown(void) { T = kernel_tuning(); }

static void matmul_default_tiles(const mv_case *c, size_t t, uint64_t seed)
{
    const uint32_t n_toks[] = { 1, 5, 70 };
    matmul_config cfg = matmul_default_config(ctx, &T);
    cfg.f16 = false; /* f32 tiles (the default's f16 ones: test_matmul_f16_tiles) */
    check_batched_mm(c, &cfg, n_toks[t], MATVEC_REL_TOL, seed);
}

static void test_matmul_every_format(void) { every_format_three_ways(matmul_default_tiles, 5000); }

/* The tolerance of a product of cols columns in the tiling cfg, relative
 * to sum |wx|: f32 sums MATVEC_REL_TOL; f16 tiles 8e-3, and with whole-row
 * f16 sums cols 2^-12 where that is more (test_matmul_f16_tiles says why) */
static double tiles_tol(const matmul_config *cfg, uint64_t cols)
{
    if (!cfg->f16)
        return MATVEC_REL_TOL;
    return cfg->row_sums && cols / 4096.0 > 8e-3 ? cols / 4096.0 : 8e-3;
}

/* Products in slices of their columns with a last slice shorter than the
 * others (27 units: 6 slices of 5, the last 2) over one token tile and two
 * (check_batched_mm runs each product whole and sliced), in the default
 * tiles (f16 where the driver has them) and f32 */
static void test_matmul_uneven_slices(void)
{
    const uint32_t types[] = { GGML_TYPE_Q4_0, GGML_TYPE_F32 };
    for (size_t f = 0; f < 2; f++)
        for (int f32 = 0; f32 < 2; f32++) {
            matmul_config cfg = f32 ? matmul_f32_config(ctx, &T) : matmul_default_config(ctx, &T);
            mv_case mc = { types[f], 40, 27 * 32, 0 };
            check_batched_mm(&mc, &cfg, 3, tiles_tol(&cfg, mc.cols), 7700 + 10 * f + f32);
            check_batched_mm(&mc, &cfg, 70, tiles_tol(&cfg, mc.cols), 7720 + 10 * f + f32);
        }
}

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
 * case where all of them round the same way. With each row's products summed
 * in f16 over the whole row (row_sums, the default), a row of n values
 * takes n such roundings: n 2^-12 of sum |wx| (at least 8e-3) */
static void test_matmul_f16_tiles(void)
{
    /* each value once in the weights' tile (GLESLLM_MATMUL's 2): 8 or 4 rows
     * x 8 tokens a thread (token tiles of 64, two uvec4 of x_tiles.comp's
     * layout an invocation), then 4 tokens a thread (the pairs loaded as
     * uvec2) in work groups of 64 (subgroups of 8 row x 4 token slots) and
     * of 32 (the plain order); then each value twice (dup): 8 and 4 rows x
     * 8 tokens, and 4 x 4; then each unit in two halves (split 2, the
     * engine's above 4224 rows) with the values twice, and once with 4
     * tokens a thread; then the values twice with whole-row sums (row_sums:
     * the engine's), whole units and split 2. With the values twice and
     * whole units, Q4_0 and Q4_K fetch the next unit's words during a
     * unit's products (matmul.comp UNIT_AHEAD); 4 blocks a row here */
    const matmul_config cfgs[] = { { 128, 8, 8, false, true },
                                   { 128, 4, 8, false, true },
                                   { 64, 4, 4, false, true },
                                   { 32, 4, 4, false, true },
                                   { 128, 8, 8, false, true, false, true },
                                   { 128, 4, 8, false, true, false, true },
                                   { 64, 4, 4, false, true, false, true },
                                   { 128, 8, 8, false, true, false, true, 2 },
                                   { 64, 4, 4, false, true, false, false, 2 },
                                   { 128, 8, 8, false, true, false, true, 0, true },
                                   { 128, 8, 8, false, true, false, true, 2, true } };
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
            check_batched_mm(&mc, &cfgs[i], 41, tiles_tol(&cfgs[i], mc.cols), 8500 + 10 * i + f);
        }
    }
}

/* Prefill's experts (ops/moe.h): n_tok tokens' routes (k distinct experts
 * each, random weights) grouped by expert on the GPU, then each expert's
 * entries through the expert matmul, against the CPU: y[i] = W_e x[i / x_div]
 * times the entry's weight (down: x a row an entry, scaled) or the GLU of
 * the interleaved gate/up rows (gate/up: x a row a token). Experts given
 * more tokens than a tile holds, none, or all of them; parts of whole
 * experts. Tolerance: the tiling's (f32 sums; f16 tiles as
 * test_matmul_f16_tiles says; GLU: the error of the gate's and up's sums
 * through silu(a) b, at most |b| + |a| times theirs). */
static void check_expert_matmul(uint32_t type, uint32_t n_exp, uint32_t k, uint64_t rows,
                                uint64_t cols, uint32_t n_tok, const matmul_config *cfg,
                                matvec_epilogue e, uint64_t part_bytes, uint64_t seed)
{
    test_rng rng = { seed };
    size_t wbytes;
    void *wdata = random_tensor(&rng, type, rows * n_exp, cols, &wbytes);
    float *w = dequantized(type, wdata, rows * n_exp, cols);
    uint32_t ne = n_tok * k, x_div = e == MATVEC_GLU ? k : 1, n_x = (ne + x_div - 1) / x_div;
    uint64_t xs = act_stride(cols), out_rows = e == MATVEC_GLU ? rows / 2 : rows;
    uint64_t ys = out_rows + 3;
    uint64_t x_off = 4, route = x_off + n_x * xs, group = route + 2 * ne,
             list = group + moe_group_floats(n_exp), y_off = list + moe_list_floats(ne) + 1;
    size_t n_act = (size_t)(y_off + ne * ys);
    float *act = malloc(n_act * 4), *got = malloc(n_act * 4);
    TEST_ASSERT_TRUE(act && got);
    rng_fill(&rng, act, n_act, -1.0f, 1.0f);
    for (uint32_t t = 0; t < n_x; t++)
        for (uint64_t i = cols; i < xs; i++)
            act[x_off + t * xs + i] = NAN; /* the padding may hold anything */
    /* routes: token t's slot 0 is expert 1 (more tokens than a tile), the
     * rest distinct random experts other than the last (none) */
    uint32_t *count = calloc(n_exp, sizeof *count);
    TEST_ASSERT_NOT_NULL(count);
    for (uint32_t t = 0; t < n_tok; t++)
        for (uint32_t j = 0; j < k; j++) {
            uint32_t id;
            bool dup;
            do {
                id = j == 0 ? 1 : (uint32_t)(rng_next(&rng) % (n_exp - 1));
                dup = false;
                for (uint32_t i = 0; i < j; i++)
                    dup = dup || (uint32_t)act[route + 2 * (t * k + i)] == id;
            } while (dup);
            act[route + 2 * (t * k + j)] = (float)id;
            act[route + 2 * (t * k + j) + 1] = rng_float(&rng, 0.1f, 1.0f);
            count[id]++;
        }
    gpu_weight gw;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                  gpu_weight_upload_groups(ctx, "experts", type, rows * n_exp, cols,
                                                           wdata, part_bytes, rows, &gw),
                                  glesllm_last_error());
    gpu_buffer ba;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, n_act * 4, act, GPU_BUFFER_DYNAMIC,
                                                        "act", &ba));
    moe_kernels mk;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, moe_build(ctx, &mk), glesllm_last_error());
    matmul_kernel kk;
    matvec_variant var = { e };
    var.expert = true;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matmul_build(ctx, type, cfg, &var, &kk),
                                  glesllm_last_error());
    /* f16 tiles: the buffer of the entries' tiles (x_tiles.comp EXPERT) */
    gpu_buffer bt = { 0 };
    uint64_t xt_bytes = moe_xt_bytes(cfg, n_exp, ne, cols);
    if (xt_bytes)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, (size_t)xt_bytes, NULL, 0,
                                                            "x tiles", &bt));
    uint32_t tile = matmul_tile_tokens(cfg);
    moe_group_args ga = { n_exp, k, n_tok, tile, route, group, list };
    moe_matmul_args ma = { .n_expert = n_exp, .n_tok = n_tok, .k = k, .x_div = x_div,
                           .x_off = x_off, .y_off = y_off, .y_stride = ys, .expert_rows = rows,
                           .route_off = route, .group_off = group, .list_off = list,
                           .tile = tile, .scale = e != MATVEC_GLU, .xt = xt_bytes ? &bt : NULL };
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, moe_record_group(queue, &mk, &ba, &ga),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, moe_record_matmul(queue, &kk, &gw, &ba, &ma),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &ba, 0, got, n_act * 4));
    /* the grouping: each expert's count, runs in expert order, each entry
     * once in its expert's run; its tiles in expert order */
    uint32_t first = 0, tiles = 0;
    bool *seen = calloc(ne, 1);
    TEST_ASSERT_NOT_NULL(seen);
    for (uint32_t x = 0; x < n_exp; x++) {
        TEST_ASSERT_EQUAL_UINT32(count[x], (uint32_t)got[group + x]);
        TEST_ASSERT_EQUAL_UINT32(first, (uint32_t)got[group + n_exp + x]);
        TEST_ASSERT_EQUAL_UINT32(tiles, (uint32_t)got[group + 2 * n_exp + x]);
        for (uint32_t j = 0; j < (count[x] + tile - 1) / tile; j++)
            TEST_ASSERT_EQUAL_UINT32(x, (uint32_t)got[list + ne + tiles++]);
        for (uint32_t i = first; i < first + count[x]; i++) {
            uint32_t ent = (uint32_t)got[list + i];
            TEST_ASSERT_TRUE(ent < ne && !seen[ent]);
            TEST_ASSERT_EQUAL_UINT32(x, (uint32_t)act[route + 2 * ent]);
            seen[ent] = true;
        }
        first += count[x];
    }
    TEST_ASSERT_EQUAL_UINT32(tiles, (uint32_t)got[group + 3 * n_exp]);
    double *ref = malloc(rows * sizeof *ref), *mag = malloc(rows * sizeof *mag);
    float *xw = malloc(cols * 4);
    TEST_ASSERT_TRUE(ref && mag && xw);
    double tol = tiles_tol(cfg, cols), worst = 0;
    for (uint32_t i = 0; i < ne; i++) {
        uint32_t ex = (uint32_t)act[route + 2 * i];
        float sc = e == MATVEC_GLU ? 1.0f : act[route + 2 * i + 1];
        memcpy(xw, act + x_off + (i / x_div) * xs, cols * 4);
        reference_rows(w + (size_t)(ex * rows * cols), xw, rows, cols, ref, mag);
        for (uint64_t r = 0; r < out_rows; r++) {
            double v = got[y_off + i * ys + r], want, m;
            if (e == MATVEC_GLU) {
                double a = ref[2 * r], b = ref[2 * r + 1];
                want = a / (1.0 + exp(-a)) * b;
                m = mag[2 * r] * (fabs(b) + 1.0) + mag[2 * r + 1] * (fabs(a) + 1.0);
            } else {
                want = ref[r] * sc;
                m = mag[r] * sc;
            }
            double err = fabs(v - want) / m;
            if (!(err <= worst))
                worst = err;
        }
        for (uint64_t r = out_rows; r < ys; r++) /* the gaps between rows are untouched */
            TEST_ASSERT_TRUE(got[y_off + i * ys + r] == act[y_off + i * ys + r]);
    }
    char msg[200];
    snprintf(msg, sizeof msg,
             "expert matmul %s%s: %u experts of %llux%llu, %u tokens x %u, parts %u, wg %u tm %u "
             "tn %u f16 %d dup %d split %u: error %.3g of sum|wx|",
             ggml_type_name(type), e == MATVEC_GLU ? " GLU" : "", n_exp, (unsigned long long)rows,
             (unsigned long long)cols, n_tok, k, gw.n_parts, cfg->wg, cfg->tm, cfg->tn, cfg->f16,
             cfg->dup, matmul_split(cfg), worst);
    TEST_ASSERT_TRUE_MESSAGE(worst < tol, msg);
    free(ref);
    free(mag);
    free(xw);
    free(seen);
    free(count);
    matmul_destroy(&kk);
    moe_destroy(&mk);
    if (xt_bytes)
        gpu_buffer_destroy(&bt);
    gpu_buffer_destroy(&ba);
    gpu_weight_destroy(&gw);
    free(act);
    free(got);
    free(w);
    free(wdata);
}

static void test_expert_matmul_grouped(void)
{
    const matmul_config cfgs[] = { { 128, 8, 4, false },
                                   { 64, 4, 4, false, true },
                                   { 128, 8, 8, false, true, false, true },
                                   { 128, 8, 8, false, true, false, true, 2 } };
    const uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        if (!tiles_fit(&cfgs[c]))
            continue; /* the tiles do not fit (GLESLLM_LIMITS=min) */
        for (size_t f = 0; f < sizeof types / sizeof types[0]; f++) {
            uint64_t cols = ggml_block_size(types[f]) == 256 ? 256 : 96;
            /* 70 tokens: expert 1 gets a tile and a bit; 6 experts, 2 a
             * token (down); 8, 3 a token (gate/up) */
            check_expert_matmul(types[f], 6, 2, 40, cols, 70, &cfgs[c], MATVEC_STORE, 0,
                                7000 + 10 * c + f);
            check_expert_matmul(types[f], 8, 3, 36, cols, 70, &cfgs[c], MATVEC_GLU, 0,
                                7500 + 10 * c + f);
        }
    }
    /* parts of two experts each, and one token (the engine's f32 tiling,
     * which fits the limits) */
    uint64_t two = 2 * 40 * 128 * 4;
    matmul_config f32 = matmul_f32_config(ctx, &T);
    check_expert_matmul(GGML_TYPE_F32, 6, 2, 40, 128, 70, &f32, MATVEC_STORE, two, 7900);
    check_expert_matmul(GGML_TYPE_Q8_0, 4, 2, 40, 64, 1, &f32, MATVEC_GLU, 0, 7901);
}

/* matmul_config_for's rule by rows (ops/matmul.c says why, bench/RESULTS.md "Prefill tiles" has the measurements behind
 * it) and the shared memory of the tilings it picks; matmul_build refuses a
 * split it has no kernel for */
static void test_matmul_rows_rule(void)
{
    const matmul_config def = { 128, 8, 8, false, true, true, true, 0, true };
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
    /* GLESLLM_MATMUL's kinds 3 and 4: the weights doubled, with sums of 32
     * then f32, or whole-row f16 sums */
    for (uint32_t kind = 3; kind <= 4; kind++) {
        tuning tk = TUNING_DEFAULT;
        tk.matmul[0] = 128;
        tk.matmul[1] = tk.matmul[2] = 8;
        tk.matmul[3] = kind;
        tk.n_matmul = 4;
        matmul_config ck = matmul_default_config(ctx, &tk);
        TEST_ASSERT_TRUE(ck.f16 && ck.dup && !ck.by_rows);
        TEST_ASSERT_EQUAL(kind == 4, ck.row_sums);
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

/* GLESLLM_MULTI forces a split; where the limits leave too little shared
 * memory for it (GLESLLM_LIMITS=min with 16 tokens), the work group shrinks,
 * and the forced xb is fitted to the smaller group instead of making the
 * kernel fail to build */
static void test_forced_multi_split_shrinks_whole(void)
{
    T.n_multi = 4;
    memcpy(T.multi, (uint32_t[]){ 128, 16, 2, 8 }, sizeof T.multi);
    matvec_config mv = matvec_multi_config(ctx, &T, GGML_TYPE_Q4_0, MATVEC_MAX_NT, 4096, 4096);
    T = kernel_tuning();
    TEST_ASSERT_EQUAL_UINT32(16, mv.tpr);
    TEST_ASSERT_TRUE(mv.xb <= 1 || mv.wg % (mv.xb * mv.tpr) == 0);
    matvec_kernel k;
    matvec_variant var = { MATVEC_STORE };
    var.nt = MATVEC_MAX_NT;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, matvec_build(ctx, &T, GGML_TYPE_Q4_0, &mv, &var, &k),
                                  glesllm_last_error());
    matvec_destroy(&k);
}

int main(void)
{
    UNITY_BEGIN();
    ctx = test_open_gpu();
    if (!ctx || gpu_queue_create(ctx, &queue) != GLESLLM_OK)
        return 1;
    RUN_TEST(test_matmul_every_format);
    RUN_TEST(test_matmul_uneven_slices);
    RUN_TEST(test_matmul_tilings_and_half);
    RUN_TEST(test_matmul_f16_tiles);
    RUN_TEST(test_matmul_rows_rule);
    RUN_TEST(test_expert_matmul_grouped);
    RUN_TEST(test_matvec_multi_token_every_format);
    RUN_TEST(test_get_rows_every_format);
    RUN_TEST(test_split_tensors);
    RUN_TEST(test_forced_multi_split_shrinks_whole);
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return test_exit_code(UNITY_END());
}
