// A unit of x and its products with the weights' levels: the matvecs' inner
// arithmetic, shared by matvec.comp and matvec_multi.comp.

// x's unit u of the token at vec4 offset xo (the norm weight applied, and
// the zero padding of a float row's tail), with the sums of its two halves
// and the sum of squares of the unit before the norm weight (ss).
void load_x(uint xo, uint u, out vec4 x[8], out float sx_lo, out float sx_hi, out float ss)
{
    for (int k = 0; k < 8; k++)
        x[k] = xv[xo + u * 8u + uint(k)];
#ifdef W_IS_FLOAT
    if ((u + 1u) * 32u > W_COLS) {  // the zero-padded tail of a float row
        for (int k = 0; k < 8; k++)
            x[k] = w_x_in_row(u, uint(k), x[k]);
    }
#endif
    ss = 0.0;
#ifdef NORM
    for (int k = 0; k < 8; k++)
        ss += dot(x[k], x[k]);
    uint no = PARAM_U(3);
    for (int k = 0; k < 8; k++)
        x[k] *= xv[no + u * 8u + uint(k)];
#endif
    // sums of the unit's two halves of x, for the affine maps' offsets
    sx_lo = dot(x[0] + x[1] + x[2] + x[3], vec4(1.0));
    sx_hi = dot(x[4] + x[5] + x[6] + x[7], vec4(1.0));
}

#ifdef F16_DOT
// A unit of x (load_x's) in f16 pairs for w_unit_h's levels, divided by its
// largest magnitude, which is returned: every product of a level (at most
// 240 in magnitude: 16 x 15 for a nibble's high half, 128 for Q8_0) and a
// value of magnitude <= 1, and their sums over a half unit, stay far from
// f16's limit whatever x holds.
float x_half(vec4 x[8], out f16vec2 xl[8], out f16vec2 xh[8])
{
    vec4 m4 = abs(x[0]);
    for (int k = 1; k < 8; k++)
        m4 = max(m4, abs(x[k]));
    float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
    float inv = m > 0.0 ? SUBN_X / m : 0.0;
#ifdef H_MERGE
    float inv_hi = inv * W_H_SAME;
#else
    float inv_hi = inv;
#endif
    for (int k = 0; k < 4; k++) {
        xl[2 * k] = f16vec2(x[k].xz * (inv * W_XL(k)));
        xl[2 * k + 1] = f16vec2(x[k].yw * (inv * W_XL(k)));
        xh[2 * k] = f16vec2(x[4 + k].xz * (inv_hi * W_XH(k)));
        xh[2 * k + 1] = f16vec2(x[4 + k].yw * (inv_hi * W_XH(k)));
    }
    return m * SUBN_M;
}

// A unit's levels (w_unit_h's) times x_half's pairs: the f16 sums of the
// low half's 16 products (sl) and of the high half's (sh), each pair of
// lanes a chain of 8.
void dot_h_sums(f16vec2 lq[8], f16vec2 hq[8], f16vec2 xl[8], f16vec2 xh[8], out f16vec2 sl,
                out f16vec2 sh)
{
    sl = lq[0] * xl[0];
    sh = hq[0] * xh[0];
    for (int j = 1; j < 8; j++) {
        sl += lq[j] * xl[j];
        sh += hq[j] * xh[j];
    }
}

#if defined(H_MERGE) || defined(XM) || defined(XG_MERGE)
// dot_h_sums' two sums as one, added in f16 (x_half's high half on the low
// half's scale). The halves stay two chains of 8 until then: one chain of
// 16 ran decode slower (bench/RESULTS.md "f16 products").
float dot_h1(f16vec2 lq[8], f16vec2 hq[8], f16vec2 xl[8], f16vec2 xh[8])
{
    f16vec2 sl, sh;
    dot_h_sums(lq, hq, xl, xh, sl, sh);
    vec2 f = vec2(sl + sh);
    return f.x + f.y;
}
#endif

// A unit's share of a row's sum, with one token (its x's scale m, its
// halves' sums sx or sl and sh) and with several (XG) alike, one expression
// for both kind of kernel: the halves merged (dot_h1's sum d), or apart
// (dot_h's). W_NO_OFFSET (the maps' offsets are 0: Q8_0's, and the
// fixed-offset formats', without F16_SUBN): no offset terms, which the
// compiler dropped in the one-token kernels only (their 0 known there) and
// so fused their sums otherwise (NVIDIA, bench/RESULTS.md "Verifying
// drafted tokens"). Each
// term added by itself instead, or the whole in `precise`, the kernels
// agreed for other formats no more, or ran 2.2x slower.
#if (defined(WTYPE_Q8_0) || defined(W_BYTE_OFF)) && !defined(F16_SUBN)
#define W_NO_OFFSET 1
#endif
float unit_add1(float acc, float m, vec4 ab, float d, float sx)
{
#ifdef W_NO_OFFSET
    return acc + m * ab.x * d;
#else
    return acc + (m * ab.x * d + ab.y * sx);
#endif
}
float unit_add2(float acc, float m, vec4 ab, vec2 d, float sl, float sh)
{
#ifdef W_NO_OFFSET
    return acc + m * (ab.x * d.x + ab.z * d.y);
#else
    return acc + (m * (ab.x * d.x + ab.z * d.y) + ab.y * sl + ab.w * sh);
#endif
}

// the low half's sum and the high half's (dot_h_sums'), each in f32
vec2 dot_h(f16vec2 lq[8], f16vec2 hq[8], f16vec2 xl[8], f16vec2 xh[8])
{
    f16vec2 sl, sh;
    dot_h_sums(lq, hq, xl, xh, sl, sh);
    vec2 l2 = vec2(sl), h2 = vec2(sh);
    return vec2(l2.x + l2.y, h2.x + h2.y);
}
#endif
#if defined(X_ONCE) || defined(XG)
#ifdef F16_DOT_F32
#define X_UNIT_F32 1
#endif
#include "x_unit.glsl"
#endif
