// One unit (32 values) of x as f16 pairs for the matvec's f16 products, in
// XO_V uvec4: the one-token X_ONCE stages units so in shared memory
// (matvec.comp stage_once) and x_prep.comp writes them so for the
// several-token kernels (matvec.comp XG). xl[2j], xl[2j + 1]: values (4j,
// 4j + 2) and (4j + 1, 4j + 3) of the low half (weights.glsl NIB_WORD's
// order), xh the same of the high half, all divided by the unit's scale m;
// sl, sh: the sums of the low and the high half.
// XO_V 5: words 0, 1 the low half's 8 pairs as packFloat2x16, 2, 3 the high
// half's, 4 (m, sl, sh, 0) as float bits. X_UNIT_F32 (the includer's pairs
// are vec2, no f16 types): XO_V 9, the pairs as f32 (words 0-3 low, 4-7
// high), then the same.
#ifdef X_UNIT_F32
#define XO_V 9
#else
#define XO_V 5
#endif

void unit_pack(f16vec2 xl[8], f16vec2 xh[8], float m, float sl, float sh, out uvec4 p[XO_V])
{
#ifdef X_UNIT_F32
    for (int j = 0; j < 4; j++) {
        p[j] = floatBitsToUint(vec4(xl[2 * j], xl[2 * j + 1]));
        p[4 + j] = floatBitsToUint(vec4(xh[2 * j], xh[2 * j + 1]));
    }
#else
    for (int j = 0; j < 2; j++) {
        p[j] = uvec4(packFloat2x16(xl[4 * j]), packFloat2x16(xl[4 * j + 1]),
                     packFloat2x16(xl[4 * j + 2]), packFloat2x16(xl[4 * j + 3]));
        p[2 + j] = uvec4(packFloat2x16(xh[4 * j]), packFloat2x16(xh[4 * j + 1]),
                         packFloat2x16(xh[4 * j + 2]), packFloat2x16(xh[4 * j + 3]));
    }
#endif
    p[XO_V - 1] = uvec4(floatBitsToUint(m), floatBitsToUint(sl), floatBitsToUint(sh), 0u);
}

void unit_x(uvec4 p[XO_V], out f16vec2 xl[8], out f16vec2 xh[8], out float m, out float sl,
            out float sh)
{
#ifdef X_UNIT_F32
    for (int j = 0; j < 4; j++) {
        vec4 a = uintBitsToFloat(p[j]), b = uintBitsToFloat(p[4 + j]);
        xl[2 * j] = a.xy;
        xl[2 * j + 1] = a.zw;
        xh[2 * j] = b.xy;
        xh[2 * j + 1] = b.zw;
    }
#else
    for (int j = 0; j < 8; j++) {
        xl[j] = unpackFloat2x16(p[j >> 2][j & 3]);
        xh[j] = unpackFloat2x16(p[2 + (j >> 2)][j & 3]);
    }
#endif
    m = uintBitsToFloat(p[XO_V - 1].x);
    sl = uintBitsToFloat(p[XO_V - 1].y);
    sh = uintBitsToFloat(p[XO_V - 1].z);
}
