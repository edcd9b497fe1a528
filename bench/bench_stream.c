/* bench_stream: how the GB/s of a plain streaming read depends on how many
 * bytes the reads cycle through (the working set), for weights held in
 * storage buffers (what the engine uses) and in 2D integer textures.
 *
 * A decode step reads every weight once per token, one matrix after another,
 * and each matvec waits for the one before. On NVIDIA's driver a matvec runs
 * slower when the matrices cycled through add up to gigabytes than when they
 * add up to a few hundred megabytes (bench/RESULTS.md, session 18): this
 * measures that effect without the matvec's arithmetic.
 *
 * For each working set it makes that many MiB of 64 MiB resources (random
 * bytes), then times rounds of one dispatch per resource, a storage barrier
 * between dispatches (each waits for the one before, as in a step); then the
 * same bytes as 64 MiB ranges of one buffer of the whole working set. Each
 * work group reads one 32 KiB run of 16-byte words, as a matvec work group
 * reads its rows.
 *
 *   bench_stream [--ws 256,1024,4096] [--rounds 4]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "gpu/gpu.h"

#define BENCH_NAME "bench_stream"
#include "bench_util.h"

#include <GLES3/gl31.h>

#define RES_BYTES (64u << 20)
#define RES_WORDS (RES_BYTES / 16u) /* uvec4 */
#define TEX_W 16384u
#define WG 256u
#define PER 8u /* uvec4 an invocation: 32 KiB a work group */

static const char *ssbo_src =
    "#version 310 es\n"
    "layout(local_size_x = 256) in;\n"
    "layout(std430, binding = 0) readonly restrict buffer S { uvec4 s[]; };\n"
    "layout(std430, binding = 1) writeonly restrict buffer K { uint sink[]; };\n"
    "void main() {\n"
    "  uint base = gl_WorkGroupID.x * 2048u + gl_LocalInvocationID.x;\n"
    "  uvec4 a = uvec4(0u);\n"
    "  for (uint k = 0u; k < 8u; k++) a ^= s[base + k * 256u];\n"
    "  if (all(equal(a, uvec4(0x9E3779B9u, 0x7F4A7C15u, 0xF39CC060u, 0x5CEDC834u))))\n"
    "    sink[0] = a.x;\n"
    "}\n";

static const char *tex_src =
    "#version 310 es\n"
    "precision highp usampler2D;\n"
    "layout(local_size_x = 256) in;\n"
    "uniform usampler2D t;\n"
    "layout(std430, binding = 1) writeonly restrict buffer K { uint sink[]; };\n"
    "void main() {\n"
    "  uint base = gl_WorkGroupID.x * 2048u + gl_LocalInvocationID.x;\n"
    "  uvec4 a = uvec4(0u);\n"
    "  for (uint k = 0u; k < 8u; k++) {\n"
    "    uint i = base + k * 256u;\n"
    "    a ^= texelFetch(t, ivec2(int(i & 16383u), int(i >> 14)), 0);\n"
    "  }\n"
    "  if (all(equal(a, uvec4(0x9E3779B9u, 0x7F4A7C15u, 0xF39CC060u, 0x5CEDC834u))))\n"
    "    sink[0] = a.x;\n"
    "}\n";

/* Microseconds per dispatch over `rounds` rounds of n resources (arena: the
 * n resources are 64 MiB ranges of that one buffer). */
static double run(const gpu_program *prog, bool tex, const gpu_buffer *bufs, const GLuint *texs,
                  uint32_t n, int rounds, const gpu_buffer *sink, const gpu_buffer *arena)
{
    glUseProgram(prog->id);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, sink->id);
    glFinish();
    double t0 = now_seconds();
    for (int r = 0; r < rounds; r++)
        for (uint32_t i = 0; i < n; i++) {
            if (tex)
                glBindTexture(GL_TEXTURE_2D, texs[i]);
            else if (arena)
                glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 0, arena->id,
                                  (GLintptr)i * RES_BYTES, RES_BYTES);
            else
                glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, bufs[i].id);
            glDispatchCompute(RES_WORDS / (WG * PER), 1, 1);
            glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
        }
    glFinish();
    check_gl("the dispatches");
    return (now_seconds() - t0) * 1e6 / ((double)rounds * n);
}

int main(int argc, char **argv)
{
    unsigned ws[8] = { 256, 1024, 4096 };
    int n_ws = 3, rounds = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ws") && i + 1 < argc) {
            n_ws = 0;
            for (char *p = argv[++i]; *p && n_ws < 8; p++) {
                ws[n_ws++] = (unsigned)strtoul(p, &p, 10);
                if (*p != ',')
                    break;
            }
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_stream [--ws MiB,MiB,...] [--rounds N]\n");
            return 2;
        }
    }
    for (int i = 0; i < n_ws; i++)
        if (ws[i] < 64 || rounds < 1) {
            fprintf(stderr, "bench_stream: working sets of at least 64 MiB, rounds >= 1\n");
            return 2;
        }
    gpu_context *ctx = NULL;
    gpu_options go;
    if (gpu_options_from_env(&go) || gpu_context_create(&go, &ctx))
        die("context");
    gpu_program ps, pt;
    if (gpu_program_build_source(ctx, "stream_ssbo", ssbo_src, NULL, &ps) ||
        gpu_program_build_source(ctx, "stream_tex", tex_src, NULL, &pt))
        die("programs");
    uint32_t *host = malloc(RES_BYTES);
    if (!host)
        return 1;
    uint32_t seed = 12345;
    for (size_t i = 0; i < RES_BYTES / 4; i++)
        host[i] = seed = seed * 1664525u + 1013904223u;
    gpu_buffer sink;
    if (gpu_buffer_create(ctx, 16, NULL, GPU_BUFFER_DEVICE, "sink", &sink))
        die("sink");
    printf("%s: one 64 MiB read a dispatch, a barrier between dispatches\n",
           gpu_context_string(ctx, 0x1F01));
    printf("%10s %14s %10s %14s %10s %14s %10s\n", "ws MiB", "buffer us", "GB/s", "texture us",
           "GB/s", "one buffer us", "GB/s");
    for (int w = 0; w < n_ws; w++) {
        uint32_t n = ws[w] / 64;
        gpu_buffer *bufs = calloc(n, sizeof *bufs);
        GLuint *texs = calloc(n, sizeof *texs);
        if (!bufs || !texs)
            return 1;
        for (uint32_t i = 0; i < n; i++)
            if (gpu_buffer_create(ctx, RES_BYTES, host, GPU_BUFFER_DEVICE, "stream", &bufs[i]))
                die("buffer");
        glGenTextures((GLsizei)n, texs);
        for (uint32_t i = 0; i < n; i++) {
            glBindTexture(GL_TEXTURE_2D, texs[i]);
            glTexStorage2D(GL_TEXTURE_2D, 1, GL_RGBA32UI, TEX_W, RES_WORDS / TEX_W);
            glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
            glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
            glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, TEX_W, RES_WORDS / TEX_W, GL_RGBA_INTEGER,
                            GL_UNSIGNED_INT, host);
        }
        check_gl("the textures");
        /* the same bytes in one buffer of n * 64 MiB (copied on the GPU: the
         * arena is immutable storage, as the weights are) */
        gpu_buffer arena;
        bool have_arena = gpu_buffer_create(ctx, (size_t)n * RES_BYTES, NULL, GPU_BUFFER_DEVICE,
                                            "arena", &arena) == GLESLLM_OK;
        for (uint32_t i = 0; have_arena && i < n; i++) {
            glBindBuffer(GL_COPY_READ_BUFFER, bufs[i].id);
            glBindBuffer(GL_COPY_WRITE_BUFFER, arena.id);
            glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0,
                                (GLintptr)i * RES_BYTES, RES_BYTES);
        }
        check_gl("the arena");
        run(&ps, false, bufs, texs, n, 1, &sink, NULL); /* warm-up */
        run(&pt, true, bufs, texs, n, 1, &sink, NULL);
        if (have_arena)
            run(&ps, false, bufs, texs, n, 1, &sink, &arena);
        double us_b = run(&ps, false, bufs, texs, n, rounds, &sink, NULL);
        double us_t = run(&pt, true, bufs, texs, n, rounds, &sink, NULL);
        double us_a = have_arena ? run(&ps, false, bufs, texs, n, rounds, &sink, &arena) : 0;
        printf("%10u %14.2f %10.0f %14.2f %10.0f", ws[w], us_b, RES_BYTES / us_b / 1e3, us_t,
               RES_BYTES / us_t / 1e3);
        if (have_arena) {
            printf(" %14.2f %10.0f\n", us_a, RES_BYTES / us_a / 1e3);
            gpu_buffer_destroy(&arena);
        } else {
            printf(" %14s %10s\n", "(no alloc)", "");
        }
        for (uint32_t i = 0; i < n; i++)
            gpu_buffer_destroy(&bufs[i]);
        glDeleteTextures((GLsizei)n, texs);
        free(bufs);
        free(texs);
    }
    free(host);
    gpu_buffer_destroy(&sink);
    gpu_program_destroy(&ps);
    gpu_program_destroy(&pt);
    gpu_context_destroy(ctx);
    return 0;
}
