// The outer-product loop of bench_flops ("outer RxC") for SPIR-V through
// GL_ARB_gl_spirv (bench/probe_gl --spirv): an invocation's OM x ON block of
// f16vec2 sums, each step h[i][j] += A[i] B[j]. Every loop but the
// iterations' is unrolled by spirv-opt, so that the arrays become values
// (NVIDIA's GL driver does not unroll SPIR-V loops: arrays left indexed
// stay in memory). To make one:
//   glslangValidator -G --target-env opengl -DOM=8 -DON=4 -o o.spv bench/probe_spirv_outer.comp
//   spirv-opt --loop-unroll -O --loop-unroll -O o.spv -o o_8x4.spv
// (probe_gl reads the block's shape from the file name: o_RxC).
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer P { vec4 p[]; };
layout(std430, binding = 1) writeonly buffer O { vec4 o[]; };
layout(location = 0) uniform uint iters;
void main()
{
    f16vec2 A[OM], B[ON], h[OM * ON];
    [[unroll]] for (int i = 0; i < OM; i++)
        A[i] = f16vec2(p[1 + i].xy);
    [[unroll]] for (int j = 0; j < ON; j++)
        B[j] = f16vec2(p[1 + OM + j].xy);
    [[unroll]] for (int i = 0; i < OM * ON; i++)
        h[i] = f16vec2(0.0);
    for (uint it = 0u; it < iters; it++) {
        [[unroll]] for (int k = 0; k < 32; k++)
            [[unroll]] for (int i = 0; i < OM; i++)
                [[unroll]] for (int j = 0; j < ON; j++)
                    h[i * ON + j] += A[(i + k) % OM] * B[(j + k / OM) % ON];
    }
    vec4 r = vec4(0.0);
    [[unroll]] for (int i = 0; i < OM * ON; i++)
        r.xy += vec2(h[i]);
    if (r.x == 12345.0)
        o[gl_GlobalInvocationID.x] = r;
}
