// y = W x for one weight tensor (or one row range of it): f32 activations,
// f32 accumulation.
// Bindings: 0 weights (weights.glsl), 1 x (vec4[], read), 2 y (float[]).
// Params: 0 rows in this dispatch, 1 index in y of its first row,
//         2 offset of x in vec4 units; 8..13 the weight planes (weights.glsl).
// Defines: WG_SIZE; TPR threads per row (a power of two dividing WG_SIZE; a
// multiple of the subgroup size with USE_SUBGROUP); NR rows per thread;
// WTYPE_<type>; ADD_Y: y += W x (the residual add) instead of y = W x.
// A work group computes (WG_SIZE / TPR) * NR rows; its threads are slots of
// TPR lanes, each lane strides the row's 32-value units, then the lanes of a
// slot sum their partials (subgroup adds or a shared-memory tree).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "weights.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
layout(std430, binding = 2) restrict buffer Y { float y[]; };

#define SLOTS (WG_SIZE / TPR)
#define ROWS_WG (SLOTS * NR)

shared float red[WG_SIZE];

// The sum over the TPR lanes of this invocation's slot; valid in lane 0.
float slot_sum(float v)
{
    uint t = gl_LocalInvocationIndex;
#ifdef USE_SUBGROUP
    float s = subgroupAdd(v);
    if (uint(TPR) == gl_SubgroupSize)
        return s;
    if (subgroupElect())
        red[gl_SubgroupID] = s;
    barrier();
    uint per = uint(TPR) / gl_SubgroupSize, first = (t / uint(TPR)) * per;
    float total = 0.0;
    for (uint i = 0u; i < per; i++)
        total += red[first + i];
    barrier();
    return total;
#else
    uint lane = t % uint(TPR);
    red[t] = v;
    barrier();
    for (uint s = uint(TPR) / 2u; s > 0u; s >>= 1u) {
        if (lane < s)
            red[t] += red[t + s];
        barrier();
    }
    float total = red[t];
    barrier();
    return total;
#endif
}

void main()
{
    uint rows = PARAM_U(0);
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint row0 = wg * uint(ROWS_WG);
    if (row0 >= rows)
        return;  // the whole work group
    uint t = gl_LocalInvocationIndex, lane = t % uint(TPR), slot = t / uint(TPR);
    uint first = row0 + slot * uint(NR);
    uint xo = PARAM_U(2);

    float acc[NR];
    for (int r = 0; r < NR; r++)
        acc[r] = 0.0;
    for (uint u = lane; u < W_UNITS; u += uint(TPR)) {
        vec4 x[8];
        for (int k = 0; k < 8; k++)
            x[k] = xv[xo + u * 8u + uint(k)];
#ifdef W_IS_FLOAT
        if ((u + 1u) * 32u > W_COLS) {  // the zero-padded tail of a float row
            for (int k = 0; k < 8; k++) {
                uvec4 idx = u * 32u + uint((k & 3) * 4 + (k >> 2) * 16) + uvec4(0u, 1u, 2u, 3u);
                x[k] = mix(vec4(0.0), x[k], lessThan(idx, uvec4(W_COLS)));
            }
        }
#endif
        // sums of the unit's two halves of x, for the affine maps' offsets
        float sx_lo = dot(x[0] + x[1] + x[2] + x[3], vec4(1.0));
        float sx_hi = dot(x[4] + x[5] + x[6] + x[7], vec4(1.0));
        for (int r = 0; r < NR; r++) {
            vec4 q[8], ab;
            w_unit(min(first + uint(r), rows - 1u), u, q, ab);
            float lo = dot(q[0], x[0]) + dot(q[1], x[1]) + dot(q[2], x[2]) + dot(q[3], x[3]);
            float hi = dot(q[4], x[4]) + dot(q[5], x[5]) + dot(q[6], x[6]) + dot(q[7], x[7]);
            acc[r] += ab.x * lo + ab.y * sx_lo + ab.z * hi + ab.w * sx_hi;
        }
    }
    for (int r = 0; r < NR; r++) {
        float total = slot_sum(acc[r]);
        uint row = first + uint(r);
        if (lane == 0u && row < rows) {
            uint o = PARAM_U(1) + row;
#ifdef ADD_Y
            y[o] += total;
#else
            y[o] = total;
#endif
        }
    }
}
