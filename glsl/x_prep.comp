// The several-token matvecs' x made ready once a dispatch (matvec_multi.comp XG):
// each unit (32 values) of each token's x, RMS-normalised first with NORM,
// as matvec.comp's x_half makes it for one token: the unit divided by its
// largest magnitude m in f16 pairs (the high half also times XP_HI:
// W_H_SAME where the format merges its halves), then m and the sums of the
// low and high halves. So the matvec's lanes read each unit as it is,
// without staging it in shared memory.
// Bindings: 0 x's buffer (read: the tokens' x and the norm weight; written:
// the units).
// Params: 0 units a row (U), 1 vec4 offset of token 0's x, 2 vec4 from one
//         token's x to the next, 3 (NORM) vec4 offset of the norm weight,
//         4 (NORM) eps as float bits, 5 uvec4 offset of token 0's units,
//         6 uvec4 from one token's units to the next, 7 and 8 (NORM): how a
//         decode step's kernel before the one-token matvec split the sum of
//         squares (matvec.comp NORM_OUT, rms_norm.comp PREP): 7 the rows a
//         partial sum (0: the columns g, g + param 8, ... as PREP's), 8 how
//         many partial sums.
// Grid: (units / WG_SIZE rounded up, tokens).
// Unit u of token k is XO_V uvec4 (x_unit.glsl) at param 5 + k param 6 +
// u XO_V.
// NORM: x times the norm weight as the step's x arrives at its one-token
// kernel (NORM_SCALE), and 1/rms (x^2's mean over the row, plus eps) in the
// .w of each unit's last word, for the matvec to scale its sums by at the
// end (matvec_multi.comp XG_NSCALE). The sum of squares is the step's to the bit:
// the same partial sums, shared out over the invocations as that kernel
// shares them (WG_SIZE its work group), added in its order (group_sum.glsl;
// USE_SUBGROUP where it has it).
// XP_X, XP_M: the pairs scaled to at most XP_X instead of 1, m times XP_M
// (matvec_head.glsl's SUBN_X and SUBN_M under F16_SUBN). XP_TWO: the pairs also
// times matvec_dot.glsl x_half's W_XL and W_XH (weights.glsl W_TWO_IN_PLACE).
#ifndef XP_F32
#extension GL_NV_gpu_shader5 : require
#else
#define X_UNIT_F32 1
#define f16vec2 vec2
#endif
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "x_unit.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) buffer X { vec4 xv[]; };
layout(std430, binding = 0) buffer XU { uvec4 xu[]; };
layout(std430, binding = 0) buffer XF { float xf[]; };

#ifdef XP_TWO
#define XP_XL(k) TWO_XL(k)
#define XP_XH(k) TWO_XH(k)
#else
#define XP_XL(k) 1.0
#define XP_XH(k) 1.0
#endif

#ifdef NORM
shared float red[WG_SIZE];
#include "group_sum.glsl"

// Partial sum g of the squares of the n floats at xo as the step's kernel
// before wrote it: per rows from g per in order (NORM_OUT), or per 0 the
// columns g, g + count, ... (PREP). Eight loads at a time, then their
// squares added in order (one by one, the loads waited for each other).
float part_sum(uint xo, uint n, uint g, uint per, uint count)
{
    uint first = per == 0u ? g : g * per, step = per == 0u ? count : 1u;
    uint last = per == 0u ? n : min(n, g * per + per);  // (past the last index)
    float ss = 0.0;
    for (uint i = first; i < last; i += 8u * step) {
        float v[8];
        for (int j = 0; j < 8; j++) {
            uint at = i + uint(j) * step;
            v[j] = at < last ? xf[xo + at] : 0.0;
        }
        for (int j = 0; j < 8; j++)
            if (i + uint(j) * step < last)
                ss += v[j] * v[j];
    }
    return ss;
}
#endif

void main()
{
    uint U = PARAM_U(0), k = gl_WorkGroupID.y, t = gl_LocalInvocationIndex;
    uint xo = PARAM_U(1) + k * PARAM_U(2);
    float rs = 1.0;
#ifdef NORM
    // matvec.comp NORM_SCALE's sum: invocation t the vec4 t, t + WG_SIZE, ...
    // of the partial sums (zeros past them), then group_sum
    uint n = U * 32u, per = PARAM_U(7), count = PARAM_U(8);
    float ssum = 0.0;
    for (uint j = t; j < (count + 3u) / 4u; j += uint(WG_SIZE)) {
        vec4 v;
        for (int c = 0; c < 4; c++) {
            uint g = j * 4u + uint(c);
            v[c] = g < count ? part_sum(xo * 4u, n, g, per, count) : 0.0;
        }
        ssum += dot(v, vec4(1.0));
    }
    rs = inversesqrt(group_sum(ssum, uint(WG_SIZE)) / float(n) + PARAM_F(4));
#endif
    uint u = gl_WorkGroupID.x * uint(WG_SIZE) + t;
    if (u >= U)
        return;
    vec4 x[8];
    for (int j = 0; j < 8; j++) {
        x[j] = xv[xo + u * 8u + uint(j)];
#ifdef NORM
        x[j] *= xv[PARAM_U(3) + u * 8u + uint(j)];
#endif
    }
    float sl = dot(x[0] + x[1] + x[2] + x[3], vec4(1.0));
    float sh = dot(x[4] + x[5] + x[6] + x[7], vec4(1.0));
    vec4 m4 = abs(x[0]);
    for (int j = 1; j < 8; j++)
        m4 = max(m4, abs(x[j]));
    float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
    float inv = m > 0.0 ? XP_X / m : 0.0;
    float inv_hi = inv * XP_HI;
    f16vec2 xl[8], xh[8];
    for (int j = 0; j < 4; j++) {
        xl[2 * j] = f16vec2(x[j].xz * (inv * XP_XL(j)));
        xl[2 * j + 1] = f16vec2(x[j].yw * (inv * XP_XL(j)));
        xh[2 * j] = f16vec2(x[4 + j].xz * (inv_hi * XP_XH(j)));
        xh[2 * j + 1] = f16vec2(x[4 + j].yw * (inv_hi * XP_XH(j)));
    }
    uvec4 p[XO_V];
    unit_pack(xl, xh, m * XP_M, sl, sh, p);
    p[XO_V - 1].w = floatBitsToUint(rs);
    uint at = PARAM_U(5) + k * PARAM_U(6) + u * uint(XO_V);
    for (int j = 0; j < XO_V; j++)
        xu[at + uint(j)] = p[j];
}
