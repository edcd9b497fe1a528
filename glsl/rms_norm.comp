// RMSNorm of each row: y = x * w / sqrt(mean(x^2) + eps).
// Bindings: 0 x[rows][n] (read), 1 w[n] (read), 2 y[rows][n] (write).
// Params: 0 n (columns), 1 eps (float bits), 2 floats from one row of x / y to
//         the next (0: n), 3 / 4 float offsets of row 0 in x / y.
// Work groups: one per row, WG_SIZE invocations striding the columns.
// ADD: y += the norm (Gemma 2's norms after attention and the FFN).
// PREP (one row, its columns shared out over the work groups): the norm's
// first half for a matvec built with NORM_SCALE (matvec.comp): y = x * w,
// not scaled, and each invocation's sum of the squares of its x to y's
// float offset param 5 + its index in the dispatch (WG_SIZE sums a group).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
#ifdef ADD
layout(std430, binding = 2) buffer Y { float y[]; };
#else
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
#endif

void main()
{
    uint n = PARAM_U(0);
    float eps = PARAM_F(1);
    float ss = 0.0;
#ifdef PREP
    uint xb = PARAM_U(3), yb = PARAM_U(4), id = gl_GlobalInvocationID.x;
    for (uint i = id; i < n; i += gl_NumWorkGroups.x * uint(WG_SIZE)) {
        float v = x[xb + i];
        ss += v * v;
        y[yb + i] = v * w[i];
    }
    y[PARAM_U(5) + id] = ss;
#else
    uint row = gl_WorkGroupID.x * (PARAM_U(2) != 0u ? PARAM_U(2) : n);
    uint xb = PARAM_U(3) + row, yb = PARAM_U(4) + row;
    for (uint i = gl_LocalInvocationIndex; i < n; i += uint(WG_SIZE))
        ss += x[xb + i] * x[xb + i];
    float scale = inversesqrt(wg_reduce_sum(ss) / float(n) + eps);
    for (uint i = gl_LocalInvocationIndex; i < n; i += uint(WG_SIZE)) {
#ifdef ADD
        y[yb + i] += x[xb + i] * scale * w[i];
#else
        y[yb + i] = x[xb + i] * scale * w[i];
#endif
    }
#endif
}
