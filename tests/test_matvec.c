/* The one-token matvec of a decode step against the CPU reference on random
 * data, for every GPU format (weight_check.h): plain, residual add, offsets
 * into larger buffers; every work split, shared-memory and subgroup
 * reductions, the f16 products, the rows loaded ahead, the norm split across
 * two kernels; shapes whose rows are not a multiple of a work group's rows
 * and whose columns are the smallest legal multiple of the block; tensors
 * over 128 MiB split by the storage-block limit under GLESLLM_LIMITS=min. */
#include <GLES3/gl31.h>
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

/* A CPU rasteriser's split (whole rows a lane, ops/matvec.c
 * matvec_default_config; the engine's on llvmpipe, GLESLLM_CPU_SPLITS=1
 * elsewhere): every format and shape; with the norm folded in, and the
 * several-token kernels that take its lanes, the formats that cover the
 * ways a format is read (as test_f16_dot_path's other splits) and F32 */
static void test_matvec_cpu_split(void)
{
    static const uint32_t cover[] = { GGML_TYPE_F32, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,
                                       GGML_TYPE_Q4_K, GGML_TYPE_Q3_K, GGML_TYPE_Q6_K };
    /* the engine's choice on llvmpipe */
    const char *renderer = gpu_context_string(ctx, GL_RENDERER);
    TEST_ASSERT_EQUAL_MESSAGE(strncmp(renderer, "llvmpipe", 8) == 0, gpu_context_caps(ctx)->cpu,
                              renderer);
    tuning engine = TUNING_DEFAULT;
    uint32_t tpr = matvec_default_config(ctx, &engine, GGML_TYPE_Q8_0, 4096, 4096).tpr;
    TEST_ASSERT_EQUAL_MESSAGE(gpu_context_caps(ctx)->cpu, tpr == 1,
                              "whole rows a lane by default on a CPU rasteriser only");
    T.cpu_splits = TUNE_ON;
    default_split_all(0);
    for (size_t f = 0; f < sizeof cover / sizeof cover[0]; f++) {
        mv_case c = { cover[f], 45, 2 * 16 * 32, 0 };
        matvec_config one = matvec_default_config(ctx, &T, c.type, c.rows, c.cols);
        TEST_ASSERT_EQUAL_UINT32(1, one.tpr);
        check_batched(&c, NULL, &one, 1, true, 1, MATVEC_REL_TOL, 8100 + f);
        matvec_config mv = matvec_multi_config(ctx, &T, c.type, MATVEC_MULTI_NT, c.rows, c.cols);
        check_batched(&c, NULL, &mv, MATVEC_MULTI_NT, true, MATVEC_MULTI_NT, MATVEC_REL_TOL,
                      8200 + f);
    }
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

static void test_matvec_subgroup_path(void)
{
    if (!gpu_context_caps(ctx)->subgroup)
        TEST_IGNORE_MESSAGE("no GL_KHR_shader_subgroup here (or GLESLLM_LIMITS=min)");
    default_split_all(1);
    default_split_all(2); /* two subgroups per row */
}

/* GLESLLM_F16_DOT=1: every quantized format's matvecs through F16_DOT's
 * code, in f16 where the driver has the types, else with f32 pairs (llvmpipe: the same
 * indexing, checked at the f32 tolerance with one token; several tokens
 * stage x in f16 even then: F16_DOT_REL_TOL); =0: the f32 products; any
 * other value: an error naming the variable. Each with the levels as
 * integers and as f16 subnormals (GLESLLM_F16_SUBN, ops/matvec.c
 * f16_subn_choice; llvmpipe keeps them through unpackHalf2x16).
 * Every format in its default one-token split and its default several-token
 * split (x made ready once a dispatch), each with and without the norm. The
 * other splits (rows left over in the last thread, 8 rows a thread, x made
 * once a work group, x staged, the sets of 5 and 3 tokens, 32 lanes standing
 * in for several) read every format through the same w_fetch / w_unit_h_r
 * and differ by format only in the units a block (1 or 8), whether the two
 * halves share a map (W_H_SAME 1/16, 1 or none) and the levels read in place
 * (Q3_K, Q6_K): they are checked on formats that cover those (Q4_0, Q8_0,
 * Q4_K, Q3_K, Q6_K), with the levels as integers: a fraction of the programs
 * on llvmpipe (bench/RESULTS.md "CI time"). */
static void test_f16_dot_path(void)
{
    static const struct {
        mv_case c;
        bool every_split;
    } cases[] = { { { GGML_TYPE_Q4_0, 70, 512, 0 }, true },
                  { { GGML_TYPE_Q4_1, 33, 4096, 0 }, false },
                  { { GGML_TYPE_Q4_0, 9, 14336, 0 }, false },
                  { { GGML_TYPE_Q4_K, 20, 512, 0 }, true },
                  { { GGML_TYPE_Q8_0, 33, 1024, 0 }, true },
                  { { GGML_TYPE_Q5_0, 18, 96, 0 }, false },
                  { { GGML_TYPE_Q5_1, 7, 4096, 0 }, false },
                  { { GGML_TYPE_Q2_K, 12, 768, 0 }, false },
                  { { GGML_TYPE_Q3_K, 30, 256, 0 }, true },
                  { { GGML_TYPE_Q5_K, 9, 1024, 0 }, false },
                  { { GGML_TYPE_Q6_K, 22, 2304, 0 }, true } };
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
        const mv_case *c = &cases[i % n_cases].c;
        bool every_split = cases[i % n_cases].every_split;
        T.f16_subn = i < n_cases ? TUNE_OFF : TUNE_ON;
        matvec_config cfg = matvec_default_config(ctx, &T, c->type, c->rows, c->cols);
        check_matvec(c, &cfg, 7100 + i);
        check_batched(c, NULL, &cfg, 1, true, 1, MATVEC_REL_TOL, 7200 + i); /* with the norm */
        /* several tokens, as many and fewer: x made ready once a dispatch
         * (x_prep.comp, the default with f16 products: ops/matvec.c
         * xg_default) */
        matvec_config mv = matvec_multi_config(ctx, &T, c->type, MATVEC_MULTI_NT, c->rows, c->cols);
        TEST_ASSERT_EQUAL_INT(1, mv.xg);
        check_batched(c, NULL, &mv, MATVEC_MULTI_NT, true, MATVEC_MULTI_NT, MATVEC_REL_TOL, 7400 + i);
        check_batched(c, NULL, &mv, MATVEC_MULTI_NT, false, 2, MATVEC_REL_TOL, 7500 + i);
        /* (the levels as f16 subnormals are read the same in every split:
         * the other splits with the levels as integers) */
        if (!every_split || i >= n_cases)
            continue;
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
        /* several tokens with x staged (GLESLLM_MULTI_XG=0) */
        T.multi_xg = TUNE_OFF;
        matvec_config staged = matvec_multi_config(ctx, &T, c->type, MATVEC_MULTI_NT, c->rows, c->cols);
        T.multi_xg = TUNE_AUTO;
        TEST_ASSERT_EQUAL_INT(0, staged.xg);
        if (staged.xsh) {
            check_batched(c, NULL, &staged, MATVEC_MULTI_NT, true, MATVEC_MULTI_NT,
                          MATVEC_REL_TOL, 7410 + i);
            check_batched(c, NULL, &staged, MATVEC_MULTI_NT, false, 2, MATVEC_REL_TOL, 7510 + i);
        }
        /* the set of 5 tokens (matvec.c xg_token_group: the five tokens'
         * units loaded at once) and of 3 without the norm (xg_x_ahead: each
         * token's units loaded during the sums of the one before), as many
         * and fewer */
        matvec_config m5 = matvec_multi_config(ctx, &T, c->type, 5, c->rows, c->cols);
        matvec_config m3 = matvec_multi_config(ctx, &T, c->type, 3, c->rows, c->cols);
        TEST_ASSERT_TRUE(m5.xg && m3.xg);
        check_batched(c, NULL, &m5, 5, true, 5, MATVEC_REL_TOL, 7450 + i);
        check_batched(c, NULL, &m5, 5, false, 4, MATVEC_REL_TOL, 7550 + i);
        check_batched(c, NULL, &m3, 3, false, 3, MATVEC_REL_TOL, 7650 + i);
        check_batched(c, NULL, &m3, 3, false, 2, MATVEC_REL_TOL, 7750 + i);
        /* 32 lanes a row, each standing in for several of the one-token
         * kernel's one after another (matvec.comp XG_VL: by default with
         * subgroups of a known order, here without them), with and without
         * the norm, as many tokens and fewer */
        if (cfg.tpr >= 64) {
            matvec_config v5 = m5, v9 = mv;
            v5.tpr = v9.tpr = 32;
            v5.vl = v9.vl = cfg.tpr / 32;
            v5.subgroup = v9.subgroup = false;
            /* (both halves of the partial sums in the GPU's shared memory) */
            const gpu_limits *L = gpu_context_limits(ctx);
            while (matvec_shared_bytes(&v5, 5, false) > L->max_shared_bytes)
                v5.wg /= 2;
            while (matvec_shared_bytes(&v9, MATVEC_MULTI_NT, false) > L->max_shared_bytes)
                v9.wg /= 2;
            check_batched(c, NULL, &v5, 5, false, 5, MATVEC_REL_TOL, 7460 + i);
            check_batched(c, NULL, &v5, 5, true, 3, MATVEC_REL_TOL, 7560 + i);
            check_batched(c, NULL, &v9, MATVEC_MULTI_NT, true, MATVEC_MULTI_NT, MATVEC_REL_TOL,
                          7660 + i);
            check_batched(c, NULL, &v9, MATVEC_MULTI_NT, false, 7, MATVEC_REL_TOL, 7760 + i);
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
                                         "GLESLLM_MULTI", "GLESLLM_FETCH_AHEAD",
                                         "GLESLLM_CPU_SPLITS" };
    tuning t;
    setenv("GLESLLM_CPU_SPLITS", "0", 1);
    setenv("GLESLLM_F16_DOT", "0", 1);
    setenv("GLESLLM_F16_SUBN", "1", 1);
    setenv("GLESLLM_MULTI", "128,16,2,8", 1);
    setenv("GLESLLM_FETCH_AHEAD", "2", 1);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, tuning_from_env(&t), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(TUNE_OFF, t.cpu_splits);
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
                                          { "GLESLLM_FETCH_AHEAD", "3" },
                                          { "GLESLLM_CPU_SPLITS", "cpu" } };
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
    RUN_TEST(test_matvec_cpu_split);
    RUN_TEST(test_matvec_work_splits);
    RUN_TEST(test_fetch_ahead);
    RUN_TEST(test_matvec_subgroup_path);
    RUN_TEST(test_f16_dot_path);
    RUN_TEST(test_tuning_from_env);
    RUN_TEST(test_split_by_storage_block_limit);
    RUN_TEST(test_bad_shapes_are_errors);
    RUN_TEST(test_split_norm);
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return test_exit_code(UNITY_END());
}
