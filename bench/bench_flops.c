/* bench_flops: the multiply-add rate a GLES compute shader reaches on this
 * GPU, the ceiling for the prefill matmul (glsl/matmul.comp). Each invocation
 * runs independent chains of multiply-adds held in registers, no memory in
 * the loop:
 *   f32          float chains, a = a a + c (squares: no two steps of a chain
 *                fold into one, as a m + c with a fixed m could)
 *   f16x2        f16vec2 chains (GL_NV_gpu_shader5), a packed multiply-add
 *                each
 *   f16x2+cvt    the same, and after every 32 multiply-adds each chain's two
 *                halves added into f32 sums, as the matmul adds each unit's
 *                f16 sums into its f32 accumulators
 *   f16x2 bcast  a = b.x a + c with b the next chain: one half times a pair,
 *                as the matmul multiplies a weight by a pair of tokens
 *   f16x2 b.xx   a = b.xx a + c: the half as a swizzled pair, to see whether
 *                the compiler then gives the packed multiply-add one
 *                operand's half in both lanes (no copy). At the packed rate
 *                the matmul's tile would not need each weight stored twice
 *                (matmul.comp DUP_W)
 *   i32          uint chains, a = a a + c: the integer multiply-add that int8
 *                activations would run on where the driver has no
 *                integer-dot extension (a 32-bit multiply-add holds at most
 *                two 4-bit x 8-bit products in 16-bit fields: twice its rate
 *                in such products)
 *   outer RxC    an invocation's R x C block of f16vec2 sums, each step
 *                h[i][j] += A[i] B[j] (a pair times a pair from three
 *                registers, as in the prefill tiles' loop), A and B rotated
 *                from step to step so that no steps fold; "shm": the same
 *                with that much shared memory declared, which leaves fewer
 *                groups a multiprocessor (NVIDIA's compiler then gives an
 *                invocation more registers: bench/RESULTS.md "Prefill
 *                tiles")
 * and prints TFLOP/s (2 a multiply-add and component; TOP/s for i32).
 *
 *   bench_flops [--wg 128] [--chains 16] [--iters 512] [--groups 4096]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "gpu/gpu.h"

#define BENCH_NAME "bench_flops"
#include "bench_util.h"

/* CH chains of type T, ITERS (a parameter: the loop stays a loop) rounds of
 * 32 multiply-adds a chain; CVT: after each round the chain is also added
 * into f32 sums. The starting values differ by chain (from a buffer), so
 * the compiler cannot merge chains. */
static const char *src =
    "#ifdef F16\n"
    "#extension GL_NV_gpu_shader5 : require\n"
    "#define T f16vec2\n"
    "#define INIT(v) T(v.xy)\n"
    "#define OUT(v) vec2(v)\n"
    "#elif defined(I32)\n"
    "#define T uint\n"
    "#define INIT(v) (floatBitsToUint(v.x) | 1u)\n"
    "#define OUT(v) vec2(float(v))\n"
    "#else\n"
    "#define INIT(v) T(v.x)\n"
    "#define OUT(v) vec2(v)\n"
    "#define T float\n"
    "#endif\n"
    "#ifndef BCAST\n"
    "#define BCAST 0\n"
    "#endif\n"
    "#if BCAST == 1\n"
    "#define STEP(i) a[i] = a[(i + 1) % CH].x * a[i] + c\n"
    "#elif BCAST == 2\n"
    "#define STEP(i) a[i] = a[(i + 1) % CH].xx * a[i] + c\n"
    "#else\n"
    "#define STEP(i) a[i] = a[i] * a[i] + c\n"
    "#endif\n"
    "layout(local_size_x = WG) in;\n"
    "layout(std430, binding = 0) readonly buffer P { vec4 p[]; };\n"
    "layout(std430, binding = 1) writeonly buffer O { vec4 o[]; };\n"
    "uniform uint u_params[20];\n"
    "#ifdef SHM\n"
    "shared uint pad[SHM];\n"
    "#endif\n"
    "void main() {\n"
    "#ifdef OUTER\n"
    "#ifdef SHM\n"
    "  pad[gl_LocalInvocationIndex] = floatBitsToUint(p[0].x);\n"
    "  barrier();\n"
    "#endif\n"
    "  T A[OM], B[ON], h[OM * ON];\n"
    "  for (int i = 0; i < OM; i++) A[i] = INIT(p[1 + i].xy);\n"
    "  for (int j = 0; j < ON; j++) B[j] = INIT(p[1 + OM + j].xy);\n"
    "  for (int i = 0; i < OM * ON; i++) h[i] = T(0.0);\n"
    "  for (uint it = 0u; it < u_params[0]; it++) {\n"
    "#pragma optionNV(unroll all)\n"
    "    for (int k = 0; k < 32; k++)\n"
    "#pragma optionNV(unroll all)\n"
    "      for (int i = 0; i < OM; i++)\n"
    "#pragma optionNV(unroll all)\n"
    "        for (int j = 0; j < ON; j++)\n"
    "          h[i * ON + j] += A[(i + k) % OM] * B[(j + k / OM) % ON];\n"
    "  }\n"
    "  vec4 r = vec4(0.0);\n"
    "  for (int i = 0; i < OM * ON; i++) r.xy += OUT(h[i]);\n"
    "#ifdef SHM\n"
    "  r.z += uintBitsToFloat(pad[(gl_LocalInvocationIndex + 1u) % uint(WG)]);\n"
    "#endif\n"
    "  if (r.x == 12345.0) o[gl_GlobalInvocationID.x] = r;\n"
    "#else\n"
    "  T c = INIT(p[0].zw);\n"
    "  T a[CH];\n"
    "  vec2 s[CH];\n"
    "  for (int i = 0; i < CH; i++) { a[i] = INIT(p[1 + i].xy); s[i] = vec2(0.0); }\n"
    "  for (uint it = 0u; it < u_params[0]; it++) {\n"
    "#pragma optionNV(unroll all)\n"
    "    for (int k = 0; k < 32; k++)\n"
    "#pragma optionNV(unroll all)\n"
    "      for (int i = 0; i < CH; i++) STEP(i);\n"
    "#ifdef CVT\n"
    "#pragma optionNV(unroll all)\n"
    "    for (int i = 0; i < CH; i++) s[i] += OUT(a[i]);\n"
    "#endif\n"
    "  }\n"
    "  vec4 r = vec4(0.0);\n"
    "  for (int i = 0; i < CH; i++) r += vec4(OUT(a[i]), s[i]);\n"
    "  if (r.x == 12345.0) o[gl_GlobalInvocationID.x] = r;\n"
    "#endif\n"
    "}\n";

int main(int argc, char **argv)
{
    int wg = 128, chains = 16, iters = 512, groups = 4096;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--wg"))
            wg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chains"))
            chains = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--groups"))
            groups = atoi(argv[i + 1]);
        else
            wg = 0, i = argc;
    }
    if (wg < 32 || wg > 1024 || chains < 1 || chains > 64 || iters < 1 || groups < 1 ||
        argc % 2 == 0) {
        fprintf(stderr, "usage: bench_flops [--wg 32..1024] [--chains 1..64] [--iters N] "
                        "[--groups N]\n");
        return 2;
    }
    gpu_context *ctx = NULL;
    gpu_options go;
    if (gpu_options_from_env(&go) || gpu_context_create(&go, &ctx))
        die("context");
    float pv[4 * 65];
    pv[0] = pv[1] = 0.0f;
    pv[2] = pv[3] = 0.0009765625f; /* c: a = a a + c stays in (0, 1) */
    for (int i = 4; i < 4 * 65; i++)
        pv[i] = 0.25f + (float)i / 1024.0f; /* distinct in f16 */
    gpu_buffer pb, ob;
    if (gpu_buffer_create(ctx, sizeof pv, pv, GPU_BUFFER_DEVICE, "params", &pb) ||
        gpu_buffer_create(ctx, 16, NULL, GPU_BUFFER_DEVICE, "out", &ob))
        die("buffers");
    printf("%s: %d groups of %d, %d chains, %d x 32 multiply-adds a chain\n",
           gpu_context_string(ctx, 0x1F01), groups, wg, chains, iters);
    static const struct {
        const char *name, *defs;
        int comps; /* components a chain: flops = 2 comps a multiply-add */
        int sums;  /* outer products: the sums an invocation (else --chains) */
    } v[] = { { "f32", "", 1 },
              { "f16x2", "F16 1\n", 2 },
              { "f16x2+cvt", "F16 1\nCVT 1\n", 2 },
              { "f16x2 bcast", "F16 1\nBCAST 1\n", 2 },
              { "f16x2 b.xx", "F16 1\nBCAST 2\n", 2 },
              { "i32", "I32 1\n", 1 },
              { "outer 4x4", "F16 1\nOUTER 1\nOM 4\nON 4\n", 2, 16 },
              { "outer 8x4", "F16 1\nOUTER 1\nOM 8\nON 4\n", 2, 32 },
              { "outer 4x8", "F16 1\nOUTER 1\nOM 4\nON 8\n", 2, 32 },
              { "outer 8x5", "F16 1\nOUTER 1\nOM 8\nON 5\n", 2, 40 },
              { "outer 8x6", "F16 1\nOUTER 1\nOM 8\nON 6\n", 2, 48 },
              { "outer 8x8", "F16 1\nOUTER 1\nOM 8\nON 8\n", 2, 64 },
              { "outer 16x4", "F16 1\nOUTER 1\nOM 16\nON 4\n", 2, 64 },
              { "8x8 24K shm", "F16 1\nOUTER 1\nOM 8\nON 8\nSHM 6144\n", 2, 64 },
              { "8x4 40K shm", "F16 1\nOUTER 1\nOM 8\nON 4\nSHM 10240\n", 2, 32 } };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        if (v[k].comps == 2 && !gpu_context_caps(ctx)->f16_types) {
            printf("  %-12s (no f16 types on this driver: GL_NV_gpu_shader5)\n", v[k].name);
            continue;
        }
        char defs[128];
        snprintf(defs, sizeof defs, "%sWG %d\nCH %d", v[k].defs, wg, chains);
        gpu_program p;
        char full[4096];
        snprintf(full, sizeof full, "#version 310 es\n%s", src);
        if (gpu_program_build_source(ctx, v[k].name, full, defs, &p)) {
            fprintf(stderr, "bench_flops: %s: %s\n", v[k].name, glesllm_last_error());
            continue;
        }
        glUseProgram(p.id);
        GLuint pr[20] = { (GLuint)iters };
        glUniform1uiv(p.params_location, 20, pr);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, pb.id);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, ob.id);
        double best = 1e30;
        for (int r = 0; r < 4; r++) { /* the first is a warm-up */
            glFinish();
            double t0 = now_seconds();
            glDispatchCompute((GLuint)groups, 1, 1);
            glFinish();
            double t = now_seconds() - t0;
            if (r && t < best)
                best = t;
        }
        check_gl("the dispatches");
        double flops =
            2.0 * v[k].comps * (v[k].sums ? v[k].sums : chains) * 32.0 * iters * (double)wg * groups;
        printf("  %-12s %9.3f ms  %7.1f T%s/s\n", v[k].name, best * 1e3, flops / best / 1e12,
               strcmp(v[k].name, "i32") ? "FLOP" : "OP");
        gpu_program_destroy(&p);
    }
    gpu_buffer_destroy(&pb);
    gpu_buffer_destroy(&ob);
    gpu_context_destroy(ctx);
    return 0;
}
