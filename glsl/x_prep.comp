// The several-token matvecs' x made ready once a dispatch (matvec.comp XG):
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
//         6 uvec4 from one token's units to the next.
// Grid: (units / WG_SIZE rounded up, tokens).
// Unit u of token k is XO_V uvec4 (x_unit.glsl) at param 5 + k param 6 +
// u XO_V.
// NORM: m and the sums come times 1/rms (x^2's mean over the row, plus eps).
// XP_X, XP_M: the pairs scaled to at most XP_X instead of 1, m times XP_M
// (matvec.comp's SUBN_X and SUBN_M under F16_SUBN).
#ifndef XP_F32
#extension GL_NV_gpu_shader5 : require
#else
#define X_UNIT_F32 1
#define f16vec2 vec2
#endif
#include "common.glsl"
#include "x_unit.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) buffer X { vec4 xv[]; };
layout(std430, binding = 0) buffer XU { uvec4 xu[]; };

#ifdef NORM
shared float red[WG_SIZE];
#endif

void main()
{
    uint U = PARAM_U(0), k = gl_WorkGroupID.y, t = gl_LocalInvocationIndex;
    uint xo = PARAM_U(1) + k * PARAM_U(2);
    float rs = 1.0;
#ifdef NORM
    // the token's sum of squares, by every work group of its row
    // (four loads in flight a round: the loop's bound is not a constant)
    float s = 0.0;
    for (uint i = t; i < U * 8u; i += 4u * uint(WG_SIZE)) {
        vec4 v[4];
        for (int j = 0; j < 4; j++) {
            uint at = i + uint(j * WG_SIZE);
            v[j] = at < U * 8u ? xv[xo + at] : vec4(0.0);
        }
        for (int j = 0; j < 4; j++)
            s += dot(v[j], v[j]);
    }
    red[t] = s;
    barrier();
    for (uint h = uint(WG_SIZE) / 2u; h > 0u; h >>= 1u) {
        if (t < h)
            red[t] += red[t + h];
        barrier();
    }
    rs = inversesqrt(red[0] / float(U * 32u) + PARAM_F(4));
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
    f16vec2 xl[8], xh[8];
    for (int j = 0; j < 4; j++) {
        xl[2 * j] = f16vec2(x[j].xz * inv);
        xl[2 * j + 1] = f16vec2(x[j].yw * inv);
        xh[2 * j] = f16vec2(x[4 + j].xz * (inv * XP_HI));
        xh[2 * j + 1] = f16vec2(x[4 + j].yw * (inv * XP_HI));
    }
    uvec4 p[XO_V];
    unit_pack(xl, xh, m * XP_M * rs, sl * rs, sh * rs, p);
    uint at = PARAM_U(5) + k * PARAM_U(6) + u * uint(XO_V);
    for (int j = 0; j < XO_V; j++)
        xu[at + uint(j)] = p[j];
}
