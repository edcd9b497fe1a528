// Cooperative-matrix products (GL_NV_cooperative_matrix as SPIR-V) in the
// desktop context, timed by probe_gl --spirv like the outer-product loop:
// each subgroup adds CN independent 16x8 f32 sums of a 16x16 by 16x8 f16
// product, 32 times an iteration. NVIDIA's GLSL compilers refuse the
// extension, so only SPIR-V can carry it; glslang marks such modules with
// the Vulkan memory model, which OpenGL does not take, so the module is
// rewritten to the GLSL450 model and OpenGL's buffer classes (no operand
// here needs the Vulkan model's visibility rules: one barrier, one store):
//   glslangValidator -G --target-env opengl -DCN=4 -o c.spv bench/probe_spirv_coop.comp
//   spirv-opt --loop-unroll -O c.spv -o c.spv; spirv-dis c.spv | sed -f bench/probe_spirv_gl.sed | spirv-as --target-env spv1.0 -o m_4.spv
// (probe_gl reads CN from the name m_N; N products an iteration step).
// NVIDIA's driver (580.159.04) and Mesa's crash in glSpecializeShader on
// the result: run it in a process of its own.
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer P { float p[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };
layout(location = 0) uniform uint iters;
shared float16_t s[384];
shared float so[4 * 128];
void main()
{
    uint t = gl_LocalInvocationID.x, sg = t / 32u;
    for (uint i = t; i < 384u; i += 128u)
        s[i] = float16_t(p[i % 260u]);
    barrier();
    // (subgroup scope is 3 in SPIR-V)
    fcoopmatNV<16, 3, 16, 16> x;
    fcoopmatNV<16, 3, 16, 8> y;
    coopMatLoadNV(x, s, 0, 16, false);
    coopMatLoadNV(y, s, 256, 8, false);
    fcoopmatNV<32, 3, 16, 8> acc[CN];
    [[unroll]] for (int j = 0; j < CN; j++)
        acc[j] = fcoopmatNV<32, 3, 16, 8>(0.0);
    for (uint it = 0u; it < iters; it++) {
        [[unroll]] for (int k = 0; k < 32; k++)
            [[unroll]] for (int j = 0; j < CN; j++)
                acc[j] = coopMatMulAddNV(x, y, acc[j]);
    }
    [[unroll]] for (int j = 1; j < CN; j++)
        for (int e = 0; e < acc[0].length(); e++)
            acc[0][e] += acc[j][e];
    coopMatStoreNV(acc[0], so, sg * 128u, 8, false);
    barrier();
    if (so[t] == 12345.0)
        o[gl_GlobalInvocationID.x] = so[t];
}
