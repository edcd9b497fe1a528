/* Buffers and the dispatch queue: persistent-mapping round trip, device and
 * dynamic buffers, range checks, out-of-memory, barrier placement, and the
 * queue's GPU-timestamp profiler. */
#include <stdlib.h>
#include <string.h>

#include "ops/ref_ops.h"
#include "test_gpu.h"

static gpu_context *ctx;
static gpu_queue *queue;
static gpu_program rms;

#define N 300  /* columns: not a multiple of any work-group size */
#define ROWS 3
/* same bound as test_gpu_kernel: f32 vs double sum of 300 squares */
#define RMS_REL_TOL 2e-6

void setUp(void) {}
void tearDown(void) {}

static void test_persistent_mapping_round_trip(void)
{
    if (!gpu_context_caps(ctx)->buffer_storage)
        TEST_IGNORE_MESSAGE("no GL_EXT_buffer_storage: persistent mapping is unavailable");
    test_rng rng = { 42 };
    float w[N], ref[ROWS * N];
    rng_fill(&rng, w, N, 0.5f, 1.5f);
    gpu_buffer bx, bw, by;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof ref, NULL, GPU_BUFFER_MAPPED, "x", &bx));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof w, w, 0, "w", &bw));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof ref, NULL, GPU_BUFFER_MAPPED, "y", &by));
    TEST_ASSERT_NOT_NULL(bx.mapped);
    TEST_ASSERT_NOT_NULL(by.mapped);
    /* Twice through the same mapping: CPU writes reach the GPU and GPU
     * writes reach the CPU without unmapping, in both directions. */
    for (int round = 0; round < 2; round++) {
        float *x = bx.mapped;
        rng_fill(&rng, x, ROWS * N, -3.0f, 3.0f);
        ref_rms_norm(ref, x, w, ROWS, N, 1e-6f);
        gpu_dispatch d = test_rms_dispatch(&rms, &bx, &bw, &by, ROWS, N, 1e-6f);
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_queue_dispatch(queue, &d), glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
        double err = max_rel_error(by.mapped, ref, ROWS * N, 1e-3);
        TEST_ASSERT_TRUE_MESSAGE(err < RMS_REL_TOL, "mapped output differs from the CPU reference");
    }
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&bw);
    gpu_buffer_destroy(&by);
}

static void test_device_and_dynamic_buffers_read_back(void)
{
    test_rng rng = { 7 };
    float a[1000], b[1000], out[1000];
    rng_fill(&rng, a, 1000, -100.0f, 100.0f);
    rng_fill(&rng, b, 1000, -100.0f, 100.0f);
    gpu_buffer dev, dyn;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof a, a, 0, "dev", &dev));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &dev, 0, out, sizeof out));
    TEST_ASSERT_EQUAL_MEMORY(a, out, sizeof a);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &dev, 400, out, 800));
    TEST_ASSERT_EQUAL_MEMORY(a + 100, out, 800);
    /* immutable storage refuses updates with a message saying why */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_buffer_write(&dev, 0, b, 4));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "GPU_BUFFER_DYNAMIC"));

    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof a, a, GPU_BUFFER_DYNAMIC, "dyn", &dyn));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_write(&dyn, 40, b, 400));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &dyn, 0, out, sizeof out));
    TEST_ASSERT_EQUAL_MEMORY(a, out, 40);
    TEST_ASSERT_EQUAL_MEMORY(b, out + 10, 400);
    TEST_ASSERT_EQUAL_MEMORY(a + 110, out + 110, sizeof a - 440);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_buffer_write(&dyn, 3990, b, 16));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_buffer_read(ctx, &dyn, 3990, out, 16));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_buffer_create(ctx, 0, NULL, 0, "empty", &dyn));
    gpu_buffer_destroy(&dev);
    gpu_buffer_destroy(&dyn);
}

static void test_binding_ranges_are_checked(void)
{
    float w[N];
    test_rng rng = { 3 };
    rng_fill(&rng, w, N, 0.5f, 1.5f);
    gpu_buffer b;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof w, w, 0, "b", &b));
    gpu_dispatch d = test_rms_dispatch(&rms, &b, &b, &b, 1, N, 1e-5f);
    d.bindings[2].access = GPU_READ; /* keep the test free of aliasing writes */
    d.bindings[0].offset = 4;        /* below any storage offset alignment > 4 */
    d.bindings[0].size = 16;
    uint32_t align = gpu_context_limits(ctx)->storage_offset_alignment;
    if (align > 4) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_queue_dispatch(queue, &d));
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), "alignment"), glesllm_last_error());
    }
    d.bindings[0].offset = 0;
    d.bindings[0].size = sizeof w + 4;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_queue_dispatch(queue, &d));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), "runs past"), glesllm_last_error());
    d.bindings[0].size = 0;
    d.groups[0] = 0;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_queue_dispatch(queue, &d));
    gpu_buffer_destroy(&b);
}

static void test_out_of_memory_is_an_error(void)
{
    gpu_buffer b;
    /* 16 TiB: more than any GPU or host here has */
    glesllm_status st = gpu_buffer_create(ctx, (size_t)1 << 44, NULL, 0, "the huge test buffer", &b);
    char msg[256];
    snprintf(msg, sizeof msg, "a 16 TiB buffer was %s", st == GLESLLM_OK ? "accepted" : glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_ERR_GPU_OUT_OF_MEMORY, st, msg);
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "the huge test buffer"));
    TEST_ASSERT_EQUAL_UINT(0, b.id);
    /* the context still works afterwards */
    float v[4] = { 1, 2, 3, 4 }, out[4];
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof v, v, 0, "small", &b));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &b, 0, out, sizeof out));
    TEST_ASSERT_EQUAL_MEMORY(v, out, sizeof v);
    gpu_buffer_destroy(&b);
}

/* Random x (ROWS x N) and norm weights w, their buffers, and three outputs
 * of x's size: the chains of the queue tests below. */
static void chain_buffers(uint64_t seed, float *x, float *w, gpu_buffer *bx, gpu_buffer *bw,
                          gpu_buffer y[3])
{
    test_rng rng = { seed };
    size_t xb = sizeof(float) * ROWS * N;
    rng_fill(&rng, x, ROWS * N, -2.0f, 2.0f);
    rng_fill(&rng, w, N, 0.5f, 1.5f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, xb, x, 0, "x", bx));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof(float) * N, w, 0, "w", bw));
    for (int i = 0; i < 3; i++)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, xb, NULL, 0, "y", &y[i]));
}

static void free_chain_buffers(gpu_buffer *bx, gpu_buffer *bw, gpu_buffer y[3])
{
    gpu_buffer_destroy(bx);
    gpu_buffer_destroy(bw);
    for (int i = 0; i < 3; i++)
        gpu_buffer_destroy(&y[i]);
}

/* A chain x -> y1 -> y2 -> y3 needs a barrier before each dependent
 * dispatch; three dispatches into separate outputs need none. */
static void test_queue_places_barriers_only_where_needed(void)
{
    float x[ROWS * N], w[N], ref[ROWS * N], tmp[ROWS * N], out[ROWS * N];
    gpu_buffer bx, bw, y[3];
    chain_buffers(11, x, w, &bx, &bw, y);

    gpu_queue_stats s0 = gpu_queue_get_stats(queue);
    for (int i = 0; i < 3; i++) {
        gpu_dispatch d = test_rms_dispatch(&rms, i ? &y[i - 1] : &bx, &bw, &y[i], ROWS, N, 1e-5f);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(queue, &d));
    }
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    gpu_queue_stats s1 = gpu_queue_get_stats(queue);
    TEST_ASSERT_EQUAL_UINT64(3, s1.dispatches - s0.dispatches);
    TEST_ASSERT_EQUAL_UINT64(2, s1.barriers - s0.barriers);
    TEST_ASSERT_EQUAL_UINT64(1, s1.submits - s0.submits);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    memcpy(tmp, x, sizeof x);
    for (int i = 0; i < 3; i++) {
        ref_rms_norm(ref, tmp, w, ROWS, N, 1e-5f);
        memcpy(tmp, ref, sizeof ref);
    }
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &y[2], 0, out, sizeof out));
    /* three chained norms, each within RMS_REL_TOL of its input */
    TEST_ASSERT_TRUE(max_rel_error(out, ref, ROWS * N, 1e-3) < 3 * RMS_REL_TOL);

    /* independent: every dispatch reads x and writes its own y; the reads
     * of x come after the chain's barriers, so nothing is pending on x */
    gpu_queue_stats s2 = gpu_queue_get_stats(queue);
    for (int i = 0; i < 3; i++) {
        gpu_dispatch d = test_rms_dispatch(&rms, &bx, &bw, &y[i], ROWS, N, 1e-5f);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(queue, &d));
    }
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    gpu_queue_stats s3 = gpu_queue_get_stats(queue);
    /* the first dispatch writes y[0], which the chain wrote before: one
     * barrier for that hazard, none between the independent three */
    TEST_ASSERT_LESS_OR_EQUAL_INT(1, s3.barriers - s2.barriers);
    ref_rms_norm(ref, x, w, ROWS, N, 1e-5f);
    for (int i = 0; i < 3; i++) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &y[i], 0, out, sizeof out));
        TEST_ASSERT_TRUE(max_rel_error(out, ref, ROWS * N, 1e-3) < RMS_REL_TOL);
    }
    free_chain_buffers(&bx, &bw, y);
}

/* Dispatches writing apart in one buffer (gpu_binding.used_begin/end, as
 * a layer's Q/K and V segments do) need no barrier between them; one that
 * writes what another wrote does, and a binding that names no written range
 * counts as writing all of it. */
static void test_queue_written_ranges(void)
{
    float x[ROWS * N], w[N], ref[ROWS * N], out[ROWS * N];
    gpu_buffer bx, bw, y[3];
    chain_buffers(12, x, w, &bx, &bw, y);
    const size_t row = (size_t)N * 4;
    gpu_queue_stats s0 = gpu_queue_get_stats(queue);
    for (uint32_t r = 0; r < 3; r++) { /* row r of x into row r of y[0], the last one twice */
        gpu_dispatch d = test_rms_dispatch(&rms, &bx, &bw, &y[0], ROWS, N, 1e-5f);
        uint32_t at = r < 2 ? r : 1;
        d.params[3] = d.params[4] = at * N; /* the rows of x and y the group starts at */
        d.n_params = 5;
        d.groups[0] = 1;
        d.bindings[2].used_begin = at * row;
        d.bindings[2].used_end = (at + 1) * row;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(queue, &d));
    }
    gpu_queue_stats s1 = gpu_queue_get_stats(queue);
    /* rows 0 and 1 apart: no barrier; row 1 again: one */
    TEST_ASSERT_EQUAL_UINT64(1, s1.barriers - s0.barriers);
    /* the whole range (no written range named) after them: one more */
    gpu_dispatch d = test_rms_dispatch(&rms, &bx, &bw, &y[0], ROWS, N, 1e-5f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(queue, &d));
    TEST_ASSERT_EQUAL_UINT64(2, gpu_queue_get_stats(queue).barriers - s0.barriers);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(queue));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(queue, 0));
    ref_rms_norm(ref, x, w, ROWS, N, 1e-5f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &y[0], 0, out, sizeof out));
    TEST_ASSERT_TRUE(max_rel_error(out, ref, ROWS * N, 1e-3) < RMS_REL_TOL);
    free_chain_buffers(&bx, &bw, y);
}

/* The profiler: a chain of three dispatches, then two independent ones, per
 * dispatch (one entry a kind: name, work groups, barrier or not) and per
 * submission (one "submit" entry); with another queue that never profiled,
 * nothing. */
static void test_queue_profiler(void)
{
    gpu_queue *q;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_create(ctx, &q));
    if (!gpu_queue_profile_enable(q, GPU_PROFILE_DISPATCHES)) {
        gpu_queue_destroy(q);
        TEST_IGNORE_MESSAGE("no GL_EXT_disjoint_timer_query here");
    }
    float x[ROWS * N], w[N];
    gpu_buffer bx, bw, y[3];
    chain_buffers(12, x, w, &bx, &bw, y);
    for (int round = 0; round < 2; round++) { /* entries add up over waits */
        for (int i = 0; i < 3; i++) {
            gpu_dispatch d = test_rms_dispatch(&rms, i ? &y[i - 1] : &bx, &bw, &y[i], ROWS, N, 1e-5f);
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(q, &d));
        }
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(q));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(q, 0));
    }
    gpu_profile_entry e[8];
    size_t n = gpu_queue_profile_get(q, e, 8);
    /* a barrier before the second and third of each chain; the first of a
     * round touches nothing written since the last barrier (y[2]) */
    TEST_ASSERT_EQUAL_size_t(2, n);
    uint64_t count = 0, with_barrier = 0;
    for (size_t i = 0; i < n; i++) {
        TEST_ASSERT_EQUAL_STRING(rms.name, e[i].name);
        TEST_ASSERT_EQUAL_UINT32(ROWS, e[i].groups);
        TEST_ASSERT_TRUE(e[i].total_ns > 0);
        count += e[i].count;
        with_barrier += e[i].barrier ? e[i].count : 0;
    }
    TEST_ASSERT_EQUAL_UINT64(6, count);
    TEST_ASSERT_EQUAL_UINT64(4, with_barrier);

    gpu_queue_profile_reset(q);
    TEST_ASSERT_TRUE(gpu_queue_profile_enable(q, GPU_PROFILE_SUBMITS));
    for (int i = 0; i < 3; i++) {
        gpu_dispatch d = test_rms_dispatch(&rms, &bx, &bw, &y[i], ROWS, N, 1e-5f);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(q, &d));
    }
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(q));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(q, 0));
    n = gpu_queue_profile_get(q, e, 8);
    TEST_ASSERT_EQUAL_size_t(1, n);
    TEST_ASSERT_EQUAL_STRING("submit", e[0].name);
    TEST_ASSERT_EQUAL_UINT32(3, e[0].groups); /* dispatches in it */
    TEST_ASSERT_EQUAL_UINT64(1, e[0].count);
    TEST_ASSERT_EQUAL_size_t(0, gpu_queue_profile_get(queue, e, 8));
    gpu_queue_destroy(q);
    free_chain_buffers(&bx, &bw, y);
}

int main(void)
{
    ctx = test_open_gpu();
    if (!ctx || gpu_queue_create(ctx, &queue) != GLESLLM_OK)
        return 1;
    char defines[64];
    test_wg_defines(defines, sizeof defines, 128, 0);
    if (gpu_program_build(ctx, "rms_norm.comp", defines, &rms) != GLESLLM_OK) {
        printf("%s\n", glesllm_last_error());
        return 1;
    }
    UNITY_BEGIN();
    RUN_TEST(test_persistent_mapping_round_trip);
    RUN_TEST(test_device_and_dynamic_buffers_read_back);
    RUN_TEST(test_binding_ranges_are_checked);
    RUN_TEST(test_out_of_memory_is_an_error);
    RUN_TEST(test_queue_places_barriers_only_where_needed);
    RUN_TEST(test_queue_written_ranges);
    RUN_TEST(test_queue_profiler);
    int r = test_exit_code(UNITY_END());
    gpu_program_destroy(&rms);
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return r;
}
