/* bench_barrier_order: does a storage barrier order every dispatch before it
 * with the ones after it, or only the last? The decode step relies on the
 * first: the FFN prefetch (ops/prefetch.c prefetch_record) is dispatched without a
 * barrier after the gate/up matvec, and the barrier before the down matvec
 * must still wait for gate/up.
 *
 * A (slow: each invocation spins, then writes v[i] = a stamp), then B (one
 * group, its own buffer) with no barrier between them, then
 * glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT), then C counts the v[i]
 * that do not hold the stamp. Also A alone, B before A, and B between the
 * barrier and C (does the barrier hold back more than the next dispatch?).
 * Any stale read means the barrier did not cover A. Last, A then C with no barrier: stale
 * reads there show that the check can see them (where the GPU overlaps
 * dispatches; llvmpipe runs one after the other). (A adds the spin's result being one
 * value in 2^32 to the stamp, so that the compiler keeps the spin; C takes
 * the stamp and the stamp + 1. Stamps grow by 1 a round, so a stale value
 * reads as the stamp only where the round before hit that 1 in 2^32.)
 *
 *   bench_barrier_order [SPIN (default 20000)]
 *
 * On an H200 (bench/RESULTS.md session 18): no stale read with a barrier, in
 * any order, for A lasting 30 us to 2.2 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/error.h"
#include "common/util.h"
#include "gpu/gpu.h"

#define BENCH_NAME "bench_barrier_order"
#include "bench_util.h"
#include <GLES3/gl31.h>

static const char *a_src =
    "#version 310 es\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) restrict buffer V { uint v[]; };\n"
    "uniform uint u_params[16];\n"
    "void main() {\n"
    "  uint i = gl_GlobalInvocationID.x; uint h = i;\n"
    "  for (uint k = 0u; k < u_params[1]; k++) h = h * 1664525u + 1013904223u;\n"
    "  v[i] = u_params[0] + (h == 0xFFFFFFFFu ? 1u : 0u);\n"
    "}\n";
static const char *b_src =
    "#version 310 es\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 1) restrict buffer W { uint w[]; };\n"
    "void main() { w[gl_GlobalInvocationID.x] += 1u; }\n";
static const char *c_src =
    "#version 310 es\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) readonly restrict buffer V { uint v[]; };\n"
    "layout(std430, binding = 2) restrict buffer R { uint bad[]; };\n"
    "uniform uint u_params[16];\n"
    "void main() {\n"
    "  uint d = v[gl_GlobalInvocationID.x] - u_params[0];\n"
    "  if (d > 1u) atomicAdd(bad[0], 1u);\n"
    "}\n";

static void dispatch(const gpu_program *prog, const uint32_t *params, int n_params,
                     uint32_t groups)
{
    glUseProgram(prog->id);
    if (n_params)
        glUniform1uiv(prog->params_location, n_params, params);
    glDispatchCompute(groups, 1, 1);
}

int main(int argc, char **argv)
{
    uint32_t spin = argc > 1 ? (uint32_t)atoi(argv[1]) : 20000, groups = 1024, rounds = 200;
    if (argc > 2 || (argc > 1 && !spin)) {
        fprintf(stderr, "usage: bench_barrier_order [SPIN (a positive count)]\n");
        return 2;
    }
    gpu_context *ctx = NULL;
    gpu_options go;
    if (gpu_options_from_env(&go) || gpu_context_create(&go, &ctx))
        die("context");
    gpu_program pa, pb, pc;
    if (gpu_program_build_source(ctx, "a", a_src, NULL, &pa) ||
        gpu_program_build_source(ctx, "b", b_src, NULL, &pb) ||
        gpu_program_build_source(ctx, "c", c_src, NULL, &pc))
        die("programs");
    size_t nv = (size_t)groups * 128;
    uint32_t *zero = calloc(nv, 4);
    gpu_buffer v, w, r;
    if (!zero || gpu_buffer_create(ctx, nv * 4, zero, 0, "v", &v) ||
        gpu_buffer_create(ctx, 128 * 4, zero, 0, "w", &w) ||
        gpu_buffer_create(ctx, 16, zero, GPU_BUFFER_DYNAMIC, "r", &r))
        die("buffers");
    static const char *const orders[] = { "A, barrier, C", "A, B, barrier, C",
                                          "B, A, barrier, C", "A, barrier, B, C",
                                          "A, C (no barrier)" };
    for (int mode = 0; mode < 5; mode++) {
        if (gpu_buffer_write(&r, 0, zero, 16))
            die("reset");
        double t0 = now_seconds();
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, v.id);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, w.id);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 2, r.id);
        for (uint32_t it = 1; it <= rounds; it++) {
            uint32_t p[2] = { it + 1000u * (uint32_t)mode, spin };
            if (mode == 2)
                dispatch(&pb, NULL, 0, 1);
            dispatch(&pa, p, 2, groups);
            if (mode == 1)
                dispatch(&pb, NULL, 0, 1);
            if (mode != 4)
                glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
            if (mode == 3) /* C only after B: does the barrier hold back more than the next? */
                dispatch(&pb, NULL, 0, 1);
            dispatch(&pc, p, 1, groups);
            glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
        }
        glFinish();
        check_gl("the dispatches");
        uint32_t stale = 0;
        if (gpu_buffer_read(ctx, &r, 0, &stale, 4))
            die("readback");
        printf("%-18s %u stale reads in %u rounds of %zu values, %.1f us a round\n", orders[mode],
               stale, rounds, nv, (now_seconds() - t0) * 1e6 / rounds);
    }
    free(zero);
    gpu_buffer_destroy(&v);
    gpu_buffer_destroy(&w);
    gpu_buffer_destroy(&r);
    gpu_program_destroy(&pa);
    gpu_program_destroy(&pb);
    gpu_program_destroy(&pc);
    gpu_context_destroy(ctx);
    return 0;
}
