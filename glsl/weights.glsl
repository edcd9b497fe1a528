// Weight tensors in the GPU layouts of src/quant/quant_gpu.h (the C twin:
// the plane table and the unit encodings NIB, BYTE, BIT, TWO are described
// there; change both together).
//
// The including kernel defines exactly one WTYPE_<type> (WTYPE_Q4_0, ...)
// and gets
//   w_unit(row, u, v)  the 32 values of unit u (values 32u..32u+31) of a
//                      row, dequantized to f32: v[k] = values 4k..4k+3 and
//                      v[4+k] = values 16+4k..19+4k, k = 0..3
//   W_UNITS            units per row (params 12 * W_UPB)
// Binding 0 is the weight buffer. Params 8..11: byte offsets of planes 0..3
// in it; param 12: blocks per row; param 13: columns.

layout(std430, binding = 0) readonly restrict buffer Weights { uvec4 wq[]; };

#define W_PLANE(p) PARAM_U(8 + (p))
#define W_NB PARAM_U(12)
#define W_COLS PARAM_U(13)

#if defined(WTYPE_Q2_K) || defined(WTYPE_Q3_K) || defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K)
#define W_UPB 8u   // units per 256-value block
#else
#define W_UPB 1u
#endif
#define W_UNITS (W_NB * W_UPB)

#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
#define W_IS_FLOAT 1
#endif

uint w_u32(uint byte_off) { return wq[byte_off >> 4u][(byte_off >> 2u) & 3u]; }

uvec2 w_u64(uint byte_off)
{
    uvec4 t = wq[byte_off >> 4u];
    return (byte_off & 8u) != 0u ? t.zw : t.xy;
}

// the f16 at an even byte offset
float w_half(uint byte_off)
{
    return unpackHalf2x16(w_u32(byte_off & ~3u) >> ((byte_off & 2u) * 8u)).x;
}

uint t_byte(uvec4 t, uint n) { return (t[n >> 2u] >> ((n & 3u) * 8u)) & 255u; }

// NIB word k: the low nibbles are values 4k.., the high ones 16+4k..
vec4 nib_lo(uint w) { return vec4((uvec4(w) >> uvec4(0u, 8u, 16u, 24u)) & 15u); }
vec4 nib_hi(uint w) { return vec4((uvec4(w) >> uvec4(4u, 12u, 20u, 28u)) & 15u); }
// TWO: h = word (k >> 1) shifted right by 16 * (k & 1)
vec4 two_lo(uint h) { return vec4((uvec4(h) >> uvec4(0u, 2u, 4u, 6u)) & 3u); }
vec4 two_hi(uint h) { return vec4((uvec4(h) >> uvec4(8u, 10u, 12u, 14u)) & 3u); }
// BIT: bits 4k.. and 16+4k..
vec4 bit_lo(uint b, uint k) { return vec4((uvec4(b) >> (uvec4(0u, 1u, 2u, 3u) + 4u * k)) & 1u); }
vec4 bit_hi(uint b, uint k) { return vec4((uvec4(b) >> (uvec4(16u, 17u, 18u, 19u) + 4u * k)) & 1u); }
// BYTE word as four signed bytes
vec4 i8x4(uint w) { return vec4(ivec4(uvec4(w) << uvec4(24u, 16u, 8u, 0u)) >> 24); }

// levels (0..15) of a NIB unit into v, to be scaled by the caller
void nib_unit(uint byte_off, out vec4 v[8])
{
    uvec4 q = wq[byte_off >> 4u];
    for (int k = 0; k < 4; k++) {
        v[k] = nib_lo(q[k]);
        v[4 + k] = nib_hi(q[k]);
    }
}

// lo (values 0..15) = v * a_lo + b_lo, hi = v * a_hi + b_hi
void scale_unit(inout vec4 v[8], float a_lo, float b_lo, float a_hi, float b_hi)
{
    for (int k = 0; k < 4; k++) {
        v[k] = v[k] * a_lo + b_lo;
        v[4 + k] = v[4 + k] * a_hi + b_hi;
    }
}

// 6-bit scale and min j (0..7) of Q4_K/Q5_K; t = the plane's 16 bytes
// (d, dmin, then the 12 GGUF scale bytes at bytes 4..15)
vec2 k4_scale_min(uvec4 t, uint j)
{
    uint s, m;
    if (j < 4u) {
        s = t_byte(t, 4u + j) & 63u;
        m = t_byte(t, 8u + j) & 63u;
    } else {
        s = (t_byte(t, 8u + j) & 15u) | ((t_byte(t, j) >> 6u) << 4u);
        m = (t_byte(t, 8u + j) >> 4u) | ((t_byte(t, 4u + j) >> 6u) << 4u);
    }
    return vec2(float(s), float(m));
}

void w_unit(uint row, uint u, out vec4 v[8])
{
    uint bi = row * W_NB + u / W_UPB;  // block index
    uint ub = u % W_UPB;               // unit within the block
#if defined(WTYPE_F32)
    uint o = (W_PLANE(0) >> 4u) + bi * 8u;
    for (int k = 0; k < 8; k++)
        v[k] = uintBitsToFloat(wq[o + uint(k)]);
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
    uint o = (W_PLANE(0) >> 4u) + bi * 4u;
    for (int k = 0; k < 4; k++) {
        uvec4 a = wq[o + uint(k >> 1)], b = wq[o + 2u + uint(k >> 1)];
        uvec2 pa = (k & 1) != 0 ? a.zw : a.xy, pb = (k & 1) != 0 ? b.zw : b.xy;
#if defined(WTYPE_F16)
        v[k] = vec4(unpackHalf2x16(pa.x), unpackHalf2x16(pa.y));
        v[4 + k] = vec4(unpackHalf2x16(pb.x), unpackHalf2x16(pb.y));
#else
        v[k] = uintBitsToFloat(uvec4(pa.x << 16u, pa.x & 0xffff0000u, pa.y << 16u, pa.y & 0xffff0000u));
        v[4 + k] = uintBitsToFloat(uvec4(pb.x << 16u, pb.x & 0xffff0000u, pb.y << 16u, pb.y & 0xffff0000u));
#endif
    }
#elif defined(WTYPE_Q4_0)
    nib_unit(W_PLANE(0) + bi * 16u, v);
    float d = w_half(W_PLANE(1) + bi * 2u);
    scale_unit(v, d, -8.0 * d, d, -8.0 * d);
#elif defined(WTYPE_Q4_1)
    nib_unit(W_PLANE(0) + bi * 16u, v);
    vec2 dm = unpackHalf2x16(w_u32(W_PLANE(1) + bi * 4u));
    scale_unit(v, dm.x, dm.y, dm.x, dm.y);
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
    nib_unit(W_PLANE(0) + bi * 16u, v);
    uint h = w_u32(W_PLANE(1) + bi * 4u);
    for (int k = 0; k < 4; k++) {
        v[k] += 16.0 * bit_lo(h, uint(k));
        v[4 + k] += 16.0 * bit_hi(h, uint(k));
    }
#if defined(WTYPE_Q5_0)
    float d = w_half(W_PLANE(2) + bi * 2u);
    scale_unit(v, d, -16.0 * d, d, -16.0 * d);
#else
    vec2 dm = unpackHalf2x16(w_u32(W_PLANE(2) + bi * 4u));
    scale_unit(v, dm.x, dm.y, dm.x, dm.y);
#endif
#elif defined(WTYPE_Q8_0)
    uint o = (W_PLANE(0) >> 4u) + bi * 2u;
    uvec4 a = wq[o], b = wq[o + 1u];
    float d = w_half(W_PLANE(1) + bi * 2u);
    for (int k = 0; k < 4; k++) {
        v[k] = i8x4(a[k]) * d;
        v[4 + k] = i8x4(b[k]) * d;
    }
#elif defined(WTYPE_Q2_K) || defined(WTYPE_Q3_K)
    uvec2 q = w_u64(W_PLANE(0) + bi * 64u + ub * 8u);
    for (int k = 0; k < 4; k++) {
        uint h = q[k >> 1] >> (16u * uint(k & 1));
        v[k] = two_lo(h);
        v[4 + k] = two_hi(h);
    }
#if defined(WTYPE_Q2_K)
    uint sc = w_u32(W_PLANE(1) + bi * 16u + ub * 2u) >> (((ub * 2u) & 3u) * 8u);
    vec2 dm = unpackHalf2x16(w_u32(W_PLANE(2) + bi * 4u));
    scale_unit(v, dm.x * float(sc & 15u), -dm.y * float((sc >> 4u) & 15u),
               dm.x * float((sc >> 8u) & 15u), -dm.y * float((sc >> 12u) & 15u));
#else
    uint hb = w_u32(W_PLANE(1) + bi * 32u + ub * 4u);
    for (int k = 0; k < 4; k++) {
        v[k] += 4.0 * bit_lo(hb, uint(k));
        v[4 + k] += 4.0 * bit_hi(hb, uint(k));
    }
    uvec4 t = wq[(W_PLANE(2) >> 4u) + bi];
    float d = unpackHalf2x16(t.w).x;
    float s[2];
    for (uint i = 0u; i < 2u; i++) {
        uint j = 2u * ub + i;  // sub-block of 16
        uint lo = j < 8u ? (t_byte(t, j) & 15u) : (t_byte(t, j - 8u) >> 4u);
        uint hi = (t_byte(t, 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u;
        s[i] = d * float(int(lo | (hi << 4u)) - 32);
    }
    scale_unit(v, s[0], -4.0 * s[0], s[1], -4.0 * s[1]);
#endif
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
    nib_unit(W_PLANE(0) + bi * 128u + ub * 16u, v);
#if defined(WTYPE_Q5_K)
    uint h = w_u32(W_PLANE(1) + bi * 32u + ub * 4u);
    for (int k = 0; k < 4; k++) {
        v[k] += 16.0 * bit_lo(h, uint(k));
        v[4 + k] += 16.0 * bit_hi(h, uint(k));
    }
    uvec4 t = wq[(W_PLANE(2) >> 4u) + bi];
#else
    uvec4 t = wq[(W_PLANE(1) >> 4u) + bi];
#endif
    vec2 dm = unpackHalf2x16(t.x);
    vec2 sm = k4_scale_min(t, ub);
    float a = dm.x * sm.x, b = -dm.y * sm.y;
    scale_unit(v, a, b, a, b);
#elif defined(WTYPE_Q6_K)
    nib_unit(W_PLANE(0) + bi * 128u + ub * 16u, v);
    uvec2 q = w_u64(W_PLANE(1) + bi * 64u + ub * 8u);
    for (int k = 0; k < 4; k++) {
        uint h = q[k >> 1] >> (16u * uint(k & 1));
        v[k] += 16.0 * two_lo(h);
        v[4 + k] += 16.0 * two_hi(h);
    }
    uint sc = w_u32(W_PLANE(2) + bi * 16u + ub * 2u) >> (((ub * 2u) & 3u) * 8u);
    float d = w_half(W_PLANE(3) + bi * 2u);
    float s0 = d * float(int(sc << 24u) >> 24), s1 = d * float(int(sc << 16u) >> 24);
    scale_unit(v, s0, -32.0 * s0, s1, -32.0 * s1);
#else
#error "define one WTYPE_<type>"
#endif
}
