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
 *   bench_barrier [-n 2000] [--extensions] [--switch] [--icache]
 *
 * --extensions: also list the context's GL extensions (what a kernel could use).
 * --switch: also what a dependent dispatch costs when, as in a decode step,
 *   consecutive dispatches differ: in program, in shared memory, in the
 *   number of bindings and parameters (wall time per dispatch, 1 and 132 groups).
 * --icache: what a one-group kernel of S straight-line instructions costs
 *   right after a kernel that streams 64 MiB (as a matvec streams weights
 *   that push everything else out of L2), against the same kernel in a chain
 *   of its own (its code and data hot).
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

/* --switch's kernels: ID makes programs of the same text distinct; SHARED
 * words of shared memory; NB bindings (the first written, the rest read). */
static const char *switch_src =
    "#version 310 es\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) restrict buffer B { uint v[]; };\n"
    "#if NB > 1\n"
    "layout(std430, binding = 1) restrict readonly buffer C1 { uint c1[]; };\n"
    "#endif\n"
    "#if NB > 2\n"
    "layout(std430, binding = 2) restrict readonly buffer C2 { uint c2[]; };\n"
    "layout(std430, binding = 3) restrict readonly buffer C3 { uint c3[]; };\n"
    "layout(std430, binding = 4) restrict readonly buffer C4 { uint c4[]; };\n"
    "layout(std430, binding = 5) restrict readonly buffer C5 { uint c5[]; };\n"
    "#endif\n"
    "uniform uint u_params[16];\n"
    "#if SHARED > 0\n"
    "shared uint s[SHARED];\n"
    "#endif\n"
    "void main() {\n"
    "  uint i = gl_GlobalInvocationID.x, l = gl_LocalInvocationID.x;\n"
    "  uint a = v[i] + uint(ID) + u_params[l & 15u];\n"
    "#if NB > 1\n"
    "  a += c1[l];\n"
    "#endif\n"
    "#if NB > 2\n"
    "  a += c2[l] + c3[l] + c4[l] + c5[l];\n"
    "#endif\n"
    "#if SHARED > 0\n"
    "  s[l * uint(SHARED / 128)] = a;\n"
    "  barrier();\n"
    "  a += s[((l + 1u) & 127u) * uint(SHARED / 128)];\n"
    "#endif\n"
    "  v[i] = a;\n"
    "}\n";

/* --icache's streaming kernel: reads 4 uvec4 an invocation (16 KiB a work
 * group) from binding 0, writes v[0] only if they XOR to a constant (never),
 * so that the reads stay */
static const char *stream_src =
    "#version 310 es\n"
    "layout(local_size_x = 256) in;\n"
    "layout(std430, binding = 0) readonly restrict buffer S { uvec4 src[]; };\n"
    "layout(std430, binding = 1) restrict buffer B { uint v[]; };\n"
    "void main() {\n"
    "  uint i = gl_WorkGroupID.x * 1024u + gl_LocalInvocationID.x;\n"
    "  uvec4 a = src[i] ^ src[i + 256u] ^ src[i + 512u] ^ src[i + 768u];\n"
    "  if (all(equal(a, uvec4(0x9E3779B9u, 0x7F4A7C15u, 0xF39CC060u, 0x5CEDC834u)))) v[0] = a.x;\n"
    "}\n";

/* A one-group kernel of n interlinked multiply-adds in 4 chains (no two
 * foldable), as source text. Caller frees. */
static char *long_kernel(int n)
{
    size_t cap = 512 + (size_t)n * 64;
    char *src = malloc(cap);
    if (!src)
        die("memory");
    size_t at = (size_t)snprintf(src, cap,
                                 "#version 310 es\n"
                                 "layout(local_size_x = 128) in;\n"
                                 "layout(std430, binding = 0) restrict buffer B { uint v[]; };\n"
                                 "void main() {\n"
                                 "  uint l = gl_LocalInvocationID.x;\n"
                                 "  float a = uintBitsToFloat(v[l]), b = a + 1.0;\n"
                                 "  float c = a + 2.0, d = a + 3.0;\n");
    static const char *chain[4] = { "a = a * b + %.7f;\n", "b = b * c + %.7f;\n",
                                    "c = c * d + %.7f;\n", "d = d * a + %.7f;\n" };
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(src + at, cap - at, chain[i % 4], 1.0 + 1e-6 * i);
    snprintf(src + at, cap - at, "  v[l] = floatBitsToUint(a + b + c + d);\n}\n");
    return src;
}

typedef struct switch_kind {
    int id, shared, nb;
} switch_kind;

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

/* Seconds for n dependent dispatches cycling through progs[0..np) */
static double run_switch(gpu_queue *q, const gpu_program *progs, const switch_kind *kinds, int np,
                         const gpu_buffer *buf, const gpu_buffer *side, uint32_t groups, int n)
{
    size_t range = (size_t)groups * 128 * 4;
    double t0 = now_seconds();
    for (int i = 0; i < n; i++) {
        int k = i % np;
        gpu_dispatch d = { 0 };
        d.prog = &progs[k];
        d.bindings[0] = (gpu_binding){ 0, buf, 0, range, GPU_READ_WRITE };
        for (int b = 1; b < kinds[k].nb; b++)
            d.bindings[b] = (gpu_binding){ (uint32_t)b, side, 0, 4096, GPU_READ };
        d.n_bindings = (uint32_t)kinds[k].nb;
        d.n_params = 16;
        for (int p = 0; p < 16; p++)
            d.params[p] = (uint32_t)(i + p);
        d.groups[0] = groups;
        d.groups[1] = d.groups[2] = 1;
        if (gpu_queue_dispatch(q, &d))
            die("dispatch");
    }
    if (gpu_queue_submit(q) || gpu_queue_wait(q, 0))
        die("wait");
    return now_seconds() - t0;
}

static void switch_table(const gpu_buffer *buf, int n)
{
    /* each row: the programs a chain cycles through */
    static const struct {
        const char *what;
        int np;
        switch_kind k[5];
    } rows[] = {
        { "one program, 1 binding", 1, { { 0, 0, 1 } } },
        { "one program, 6 bindings", 1, { { 0, 0, 6 } } },
        { "one program, 32 KiB shared", 1, { { 0, 8192, 1 } } },
        { "2 programs, same shape", 2, { { 0, 0, 1 }, { 1, 0, 1 } } },
        { "5 programs, same shape", 5,
          { { 0, 0, 1 }, { 1, 0, 1 }, { 2, 0, 1 }, { 3, 0, 1 }, { 4, 0, 1 } } },
        { "2 programs, 0 / 32 KiB shared", 2, { { 0, 0, 1 }, { 1, 8192, 1 } } },
        { "2 programs, 16 / 32 KiB shared", 2, { { 0, 4096, 1 }, { 1, 8192, 1 } } },
        { "2 programs, 32 / 44 KiB shared", 2, { { 0, 8192, 1 }, { 1, 11264, 1 } } },
        { "5 programs, mixed (a step's layer)", 5,
          { { 0, 8192, 6 }, { 1, 2048, 6 }, { 2, 8192, 3 }, { 3, 11264, 6 }, { 4, 8192, 3 } } },
    };
    gpu_buffer side;
    uint32_t zeros[1024] = { 0 };
    if (gpu_buffer_create(ctx, sizeof zeros, zeros, GPU_BUFFER_DEVICE, "side", &side))
        die("buffer");
    printf("\nconsecutive dependent dispatches that differ, wall time per dispatch (us)\n");
    printf("%-40s %10s %10s\n", "chain", "1 group", "132 groups");
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        gpu_program progs[5];
        bool fits = true;
        for (int k = 0; k < rows[r].np; k++)
            fits &= (uint32_t)rows[r].k[k].shared * 4 <= gpu_context_limits(ctx)->max_shared_bytes;
        if (!fits) {
            printf("%-40s %21s\n", rows[r].what, "(shared memory limit)");
            continue;
        }
        for (int k = 0; k < rows[r].np; k++) {
            char defs[128];
            snprintf(defs, sizeof defs, "ID %d\nSHARED %d\nNB %d", rows[r].k[k].id,
                     rows[r].k[k].shared, rows[r].k[k].nb);
            if (gpu_program_build_source(ctx, "switch", switch_src, defs, &progs[k]))
                die("program");
        }
        double t[2];
        static const uint32_t g[2] = { 1, 132 };
        for (int j = 0; j < 2; j++) {
            run_switch(queue, progs, rows[r].k, rows[r].np, buf, &side, g[j], 100);
            t[j] = run_switch(queue, progs, rows[r].k, rows[r].np, buf, &side, g[j], n);
        }
        printf("%-40s %10.2f %10.2f\n", rows[r].what, 1e6 * t[0] / n, 1e6 * t[1] / n);
        for (int k = 0; k < rows[r].np; k++)
            gpu_program_destroy(&progs[k]);
    }
    gpu_buffer_destroy(&side);
}

/* Seconds for n rounds of: (stream: a streaming kernel over the next 64 MiB
 * range of big, cycling) then (probe: the probe kernel, one group), each
 * after a barrier; either may be left out. */
static double run_icache(const gpu_program *stream, const gpu_program *probe, const gpu_buffer *big,
                         size_t range, int copies, const gpu_buffer *v, int n)
{
    double t0 = now_seconds();
    for (int i = 0; i < n; i++) {
        if (stream) {
            gpu_dispatch d = { 0 };
            d.prog = stream;
            d.bindings[0] = (gpu_binding){ 0, big, (size_t)(i % copies) * range, range, GPU_READ };
            d.bindings[1] = (gpu_binding){ 1, v, 0, 512, GPU_READ_WRITE };
            d.n_bindings = 2;
            d.groups[0] = (uint32_t)(range / (16 * 1024));
            d.groups[1] = d.groups[2] = 1;
            if (gpu_queue_dispatch(queue, &d))
                die("dispatch");
        }
        if (probe) {
            gpu_dispatch d = { 0 };
            d.prog = probe;
            d.bindings[0] = (gpu_binding){ 0, v, 0, 512, GPU_READ_WRITE };
            d.n_bindings = 1;
            d.groups[0] = d.groups[1] = d.groups[2] = 1;
            if (gpu_queue_dispatch(queue, &d))
                die("dispatch");
        }
    }
    if (gpu_queue_submit(queue) || gpu_queue_wait(queue, 0))
        die("wait");
    return now_seconds() - t0;
}

static void icache_table(int n)
{
    size_t range = (size_t)64 << 20;
    uint64_t limit = gpu_context_limits(ctx)->max_storage_block_bytes;
    while (range > limit)
        range /= 2;
    int copies = 16;
    gpu_buffer big, v;
    if (gpu_buffer_create(ctx, range * (size_t)copies, NULL, GPU_BUFFER_DEVICE, "stream", &big) ||
        gpu_buffer_create(ctx, 512, NULL, GPU_BUFFER_DEVICE, "v", &v))
        die("buffer");
    gpu_program stream;
    if (gpu_program_build_source(ctx, "stream", stream_src, NULL, &stream))
        die("program");
    if (n > 500)
        n = 500;
    run_icache(&stream, NULL, &big, range, copies, &v, 32);
    double base = run_icache(&stream, NULL, &big, range, copies, &v, n);
    printf("\na one-group kernel after a %zu MiB stream (each after a barrier), us per dispatch\n",
           range >> 20);
    printf("stream alone: %.2f us\n", 1e6 * base / n);
    printf("%14s %16s %16s\n", "instructions", "after a stream", "chained, hot");
    static const int sizes[] = { 0, 500, 2000, 8000 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        char *src = long_kernel(sizes[k]);
        gpu_program probe;
        if (gpu_program_build_source(ctx, "long", src, NULL, &probe))
            die("program");
        free(src);
        run_icache(&stream, &probe, &big, range, copies, &v, 32);
        double after = run_icache(&stream, &probe, &big, range, copies, &v, n);
        run_icache(NULL, &probe, &big, range, copies, &v, 32);
        double hot = run_icache(NULL, &probe, &big, range, copies, &v, n);
        printf("%14d %16.2f %16.2f\n", sizes[k], 1e6 * (after - base) / n, 1e6 * hot / n);
        gpu_program_destroy(&probe);
    }
    gpu_program_destroy(&stream);
    gpu_buffer_destroy(&big);
    gpu_buffer_destroy(&v);
}

int main(int argc, char **argv)
{
    int n = 2000;
    bool list = false, sw = false, ic = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--extensions"))
            list = true;
        else if (!strcmp(argv[i], "--switch"))
            sw = true;
        else if (!strcmp(argv[i], "--icache"))
            ic = true;
        else
            n = 0;
    if (n < 64) {
        fprintf(stderr, "usage: bench_barrier [-n 2000 (at least 64)] [--extensions] [--switch] "
                        "[--icache]\n");
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
    if (sw)
        switch_table(&buf, n);
    if (ic)
        icache_table(n);
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
