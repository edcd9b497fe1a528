/* bench_barrier: what a dependent dispatch costs on this driver, apart from
 * the work it does. A decode step is a chain of ~200 dispatches, each reading
 * what the one before wrote, so the queue places a storage barrier between
 * them (gpu_queue.c); this measures that chain on a trivial kernel.
 *
 * For several work-group counts it records N dispatches of a kernel that adds
 * 1 to one uint per invocation, in one submission, and prints the wall time per
 * dispatch for:
 *   dependent    every dispatch on the same range (a barrier before each),
 *   independent  every dispatch on its own range (no barriers),
 * and, with GL_EXT_disjoint_timer_query, the GPU time per dependent dispatch
 * from timestamps (gpu_queue_profile_*).
 *
 *   bench_barrier [-n 2000] [--extensions]
 *
 * --extensions: also list the context's GL extensions (what a kernel could use).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "gpu/gpu.h"

#define BENCH_NAME "bench_barrier"
#include "bench_util.h"

#include <GLES3/gl31.h>

static const char *kernel_src =
    "#version 310 es\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) restrict buffer B { uint v[]; };\n"
    "void main() { uint i = gl_GlobalInvocationID.x; v[i] = v[i] + 1u; }\n";

static gpu_context *ctx;
static gpu_queue *queue, *timed; /* timed: a second queue with timestamps */

/* Seconds for n dispatches of `groups` groups; dependent: all on range 0. */
static double run_chain(gpu_queue *q, const gpu_program *prog, const gpu_buffer *buf, uint32_t groups, int n,
                        bool dependent, size_t align)
{
    size_t range = (size_t)groups * 128 * 4;
    size_t stride = (range + align - 1) / align * align;
    double t0 = now_seconds();
    for (int i = 0; i < n; i++) {
        gpu_dispatch d = { 0 };
        d.prog = prog;
        size_t off = dependent ? 0 : (size_t)(i % 64) * stride;
        d.bindings[0] = (gpu_binding){ 0, buf, off, range, GPU_READ_WRITE };
        d.n_bindings = 1;
        d.groups[0] = groups;
        d.groups[1] = d.groups[2] = 1;
        if (gpu_queue_dispatch(q, &d)) /* independent: a barrier every 64 */
            die("dispatch");
    }
    if (gpu_queue_submit(q) || gpu_queue_wait(q, 0))
        die("wait");
    return now_seconds() - t0;
}

int main(int argc, char **argv)
{
    int n = 2000;
    bool list = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--extensions"))
            list = true;
        else
            n = 0;
    if (n < 64) {
        fprintf(stderr, "usage: bench_barrier [-n 2000 (at least 64)] [--extensions]\n");
        return 2;
    }
    gpu_options go;
    if (gpu_options_from_env(&go) || gpu_context_create(&go, &ctx) ||
        gpu_queue_create(ctx, &queue) || gpu_queue_create(ctx, &timed))
        die("context");
    static const uint32_t group_counts[] = { 1, 132, 528, 2112, 8448 };
    size_t align = gpu_context_limits(ctx)->storage_offset_alignment;
    size_t max_range = (size_t)8448 * 128 * 4;
    gpu_buffer buf;
    if (gpu_buffer_create(ctx, 64 * (max_range + align), NULL, GPU_BUFFER_DEVICE, "chain", &buf))
        die("buffer");
    gpu_program prog;
    if (gpu_program_build_source(ctx, "add_one", kernel_src, NULL, &prog))
        die("program");
    bool timestamps = gpu_queue_profile_enable(timed, GPU_PROFILE_DISPATCHES);
    if (n > 2000 && timestamps)
        n = 2000; /* the profiler's timestamps between two waits */
    printf("%s: %d dispatches a run, wall time per dispatch (us)\n",
           gpu_context_string(ctx, 0x1F01), n);
    printf("%8s %12s %12s %14s\n", "groups", "dependent", "independent", "GPU dependent");
    for (size_t g = 0; g < sizeof group_counts / sizeof *group_counts; g++) {
        uint32_t groups = group_counts[g];
        run_chain(queue, &prog, &buf, groups, 64, true, align); /* warm-up */
        run_chain(queue, &prog, &buf, groups, 64, false, align);
        double dep = run_chain(queue, &prog, &buf, groups, n, true, align);
        double ind = run_chain(queue, &prog, &buf, groups, n, false, align);
        double gpu_us = -1.0;
        gpu_profile_entry e[8];
        size_t ne = 0;
        if (timestamps) {
            gpu_queue_profile_reset(timed);
            run_chain(timed, &prog, &buf, groups, n, true, align);
            ne = gpu_queue_profile_get(timed, e, 8);
        }
        for (size_t i = 0; i < ne && i < 8; i++)
            if (e[i].barrier && e[i].count)
                gpu_us = e[i].total_ns / 1e3 / (double)e[i].count;
        printf("%8u %12.2f %12.2f ", groups, 1e6 * dep / n, 1e6 * ind / n);
        if (timestamps && gpu_us >= 0)
            printf("%14.2f\n", gpu_us);
        else
            printf("%14s\n", "n/a");
    }
    if (list) {
        GLint ne = 0;
        glGetIntegerv(GL_NUM_EXTENSIONS, &ne);
        printf("GL extensions (%d):", ne);
        for (GLint i = 0; i < ne; i++)
            printf(" %s", (const char *)glGetStringi(GL_EXTENSIONS, (GLuint)i));
        printf("\n");
    }
    gpu_program_destroy(&prog);
    gpu_buffer_destroy(&buf);
    gpu_queue_destroy(queue);
    gpu_queue_destroy(timed);
    gpu_context_destroy(ctx);
    return 0;
}
