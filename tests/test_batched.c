/* The kernels of several tokens against the CPU reference on random data,
 * for every GPU format (weight_check.h): the multi-token matvec of small
 * batches and the tiled matmul of prefill (every tiling, the mediump and f16
 * tiles), get_rows, and tensors split over several buffers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "ops/get_rows.h"
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
    RUN_TEST(test_matmul_tilings_and_half);
    RUN_TEST(test_matmul_f16_tiles);
    RUN_TEST(test_matmul_rows_rule);
    RUN_TEST(test_matvec_multi_token_every_format);
    RUN_TEST(test_get_rows_every_format);
    RUN_TEST(test_split_tensors);
    RUN_TEST(test_forced_multi_split_shrinks_whole);
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return test_exit_code(UNITY_END());
}
