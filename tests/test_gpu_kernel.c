/* A kernel against the CPU reference on random data: rms_norm over shapes
 * that are not multiples of the work group, for every work-group size the
 * limits allow and for both reduction paths (subgroup where offered, shared
 * memory always). */
#include <math.h>
#include <stdlib.h>

#include "ops/ref_ops.h"
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

int main(void)
{
    ctx = test_open_gpu();
    if (!ctx || gpu_queue_create(ctx, &queue) != GLESLLM_OK)
        return 1;
    UNITY_BEGIN();
    RUN_TEST(test_rms_norm_shared_memory_path);
    RUN_TEST(test_rms_norm_subgroup_path);
    int r = test_exit_code(UNITY_END());
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return r;
}
