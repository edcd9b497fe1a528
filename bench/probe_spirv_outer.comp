// The outer-product loop of bench_flops ("outer RxC"): an invocation's
// OM x ON block of f16vec2 sums, each step h[i][j] += A[i] B[j]. probe_gl
// --spirv times it as SPIR-V (GL_ARB_gl_spirv) and, from this same file, as
// GLSL through the driver's compiler. As SPIR-V every loop but the
// iterations' is unrolled by spirv-opt, so that the arrays become values
// (NVIDIA's GL driver does not unroll SPIR-V loops: arrays left indexed
// stay in memory). To make one:
//   glslangValidator -G --target-env opengl -DOM=8 -DON=4 -o o.spv bench/probe_spirv_outer.comp
//   spirv-opt --loop-unroll -O --loop-unroll -O o.spv -o o_8x4.spv
// (probe_gl reads the block's shape from the file name: o_RxC, or o_RxC_sW
// made with -DSHM=W, 128 to 12288: W words of shared memory declared, so
// that fewer groups fit a multiprocessor and the compiler may give each
// invocation more registers).
#version 450
#ifdef GL_SPIRV
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#define UNROLL [[unroll]]
#else
// (the driver's GLSL: f16vec2 through GL_NV_gpu_shader5, every loop
// unrolled by its pragma; probe_gl defines OM and ON)
#extension GL_NV_gpu_shader5 : require
#pragma optionNV(unroll all)
#define UNROLL
#endif
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer P { vec4 p[]; };
layout(std430, binding = 1) writeonly buffer O { vec4 o[]; };
layout(location = 0) uniform uint iters;
#ifdef SHM
shared uint pad[SHM];
#endif
void main()
{
#ifdef SHM
    pad[gl_LocalInvocationIndex] = floatBitsToUint(p[0].x);
    barrier();
#endif
    f16vec2 A[OM], B[ON], h[OM * ON];
    UNROLL for (int i = 0; i < OM; i++)
        A[i] = f16vec2(p[1 + i].xy);
    UNROLL for (int j = 0; j < ON; j++)
        B[j] = f16vec2(p[1 + OM + j].xy);
    UNROLL for (int i = 0; i < OM * ON; i++)
        h[i] = f16vec2(0.0);
    for (uint it = 0u; it < iters; it++) {
        UNROLL for (int k = 0; k < 32; k++)
            UNROLL for (int i = 0; i < OM; i++)
                UNROLL for (int j = 0; j < ON; j++)
                    h[i * ON + j] += A[(i + k) % OM] * B[(j + k / OM) % ON];
    }
    vec4 r = vec4(0.0);
    UNROLL for (int i = 0; i < OM * ON; i++)
        r.xy += vec2(h[i]);
#ifdef SHM
    r.z += uintBitsToFloat(pad[(gl_LocalInvocationIndex + 1u) % 128u]);
#endif
    if (r.x == 12345.0)
        o[gl_GlobalInvocationID.x] = r;
}
