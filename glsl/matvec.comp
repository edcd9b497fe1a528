// y = W x for one weight tensor (or one row range of it): f32 activations,
// f32 accumulation.
// Bindings: 0 weights (weights.glsl), 1 x (vec4[], read), 2 y (float[]).
// Params: 0 rows in this dispatch, 1 index in y of its first row (the
//         epilogues below: the global row of its first row), 2 offset of x
//         in vec4 units; 8..13 the weight planes (weights.glsl).
// Defines: WG_SIZE; TPR threads per row (a power of two dividing WG_SIZE; a
// multiple of the subgroup size with USE_SUBGROUP); NR rows per thread;
// WTYPE_<type>; and at most one epilogue:
//   ADD_Y  y += W x (the residual add) instead of y = W x.
//   GLU    rows interleave gate and up (row 2i gate i, 2i+1 up i):
//          y[row / 2] = silu(gate) * up, row counted from param 1.
//   QKV    rows are Q, K, V of one layer (Q_DIM, KV_DIM, HEAD_DIM defines;
//          Q and K rows of a head ordered so RoPE pairs are adjacent rows):
//          RoPE with the cos/sin at x's buffer float offset param 5 (this
//          position's row of the table), QKV_BIAS: + bias at float offset
//          param 7 (indexed by global row); Q to y[0..Q_DIM) as f32 bits,
//          K and V as packed halves at y uint offsets params 14 and 15.
//   GLU and QKV need NR even (pairs of rows stay in one thread).
// NORM: x is RMS-normalised first (the norm folded into this kernel): every
// work group sums x^2 over the row, x is multiplied by the norm weight at
// x's buffer vec4 offset param 3 and the sum by 1/sqrt(mean + eps), eps the
// float bits of param 4.
// A work group computes (WG_SIZE / TPR) * NR rows; its threads are slots of
// TPR lanes, each lane strides the row's 32-value units, then the lanes of a
// slot sum their partials (subgroup adds or a shared-memory tree).
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "weights.glsl"
#ifdef NORM
#include "reduce.glsl"
#endif

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
#ifdef QKV
layout(std430, binding = 2) writeonly restrict buffer Y { uint yu[]; };
#else
layout(std430, binding = 2) restrict buffer Y { float y[]; };
#endif

// A float of x's buffer by index (constants: norm weights, RoPE table, biases).
float x_at(uint i) { return xv[i >> 2][i & 3u]; }

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
#ifdef NORM
    // sum of x^2 over the row (every work group: one read of x from cache)
    float ss = 0.0;
    for (uint i = t; i < (W_COLS + 3u) / 4u; i += uint(WG_SIZE)) {
        vec4 v = xv[xo + i];
        v = mix(vec4(0.0), v, lessThan(i * 4u + uvec4(0u, 1u, 2u, 3u), uvec4(W_COLS)));
        ss += dot(v, v);
    }
    float norm_scale = inversesqrt(wg_reduce_sum(ss) / float(W_COLS) + PARAM_F(4));
    uint no = PARAM_U(3);
#endif
    for (uint u = lane; u < W_UNITS; u += uint(TPR)) {
        vec4 x[8];
        for (int k = 0; k < 8; k++)
            x[k] = xv[xo + u * 8u + uint(k)];
#ifdef NORM
        for (int k = 0; k < 8; k++)
            x[k] *= xv[no + u * 8u + uint(k)];
#endif
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
    float tot[NR];
    for (int r = 0; r < NR; r++)
        tot[r] = slot_sum(acc[r]);  // every lane calls it: it holds barriers
    if (lane != 0u)
        return;
#ifdef NORM
    for (int r = 0; r < NR; r++)
        tot[r] *= norm_scale;
#endif
#if defined(GLU) || defined(QKV)
    for (int r = 0; r < NR; r += 2) {
        uint row = first + uint(r);
        if (row >= rows)
            break;
        uint g = PARAM_U(1) + row;
        float a = tot[r], b = tot[r + 1];
#ifdef GLU
        y[g / 2u] = a / (1.0 + exp(-a)) * b;
#else
#ifdef QKV_BIAS
        a += x_at(PARAM_U(7) + g);
        b += x_at(PARAM_U(7) + g + 1u);
#endif
        if (g < uint(Q_DIM + KV_DIM)) {
            uint cs = PARAM_U(5) + (g % uint(HEAD_DIM));  // pair j at 2j: cos, sin
            float c = x_at(cs), s = x_at(cs + 1u);
            float a2 = a * c - b * s;
            b = a * s + b * c;
            a = a2;
        }
        if (g < uint(Q_DIM)) {
            yu[g] = floatBitsToUint(a);
            yu[g + 1u] = floatBitsToUint(b);
        } else if (g < uint(Q_DIM + KV_DIM)) {
            yu[PARAM_U(14) + (g - uint(Q_DIM)) / 2u] = packHalf2x16(vec2(a, b));
        } else {
            yu[PARAM_U(15) + (g - uint(Q_DIM + KV_DIM)) / 2u] = packHalf2x16(vec2(a, b));
        }
#endif
    }
#else
    for (int r = 0; r < NR; r++) {
        uint row = first + uint(r);
        if (row < rows) {
            uint o = PARAM_U(1) + row;
#ifdef ADD_Y
            y[o] += tot[r];
#else
            y[o] = tot[r];
#endif
        }
    }
#endif
}
