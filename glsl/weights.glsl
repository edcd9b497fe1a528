// Weight tensors in the GPU layouts of src/quant/quant_gpu.h (the C twin:
// the plane table and the unit encodings NIB, BYTE, BIT, TWO are described
// there; change both together).
//
// The including kernel defines exactly one WTYPE_<type> (WTYPE_Q4_0, ...)
// and gets
//   w_unit(row, u, q, ab)    unit u (values 32u..32u+31) of a row as levels
//                            and two affine maps (below)
//   w_unit_values(row, u, v) the same dequantized to f32: v[k] = values
//                            4k..4k+3 and v[4+k] = values 16+4k..19+4k
//   w_fetch(bi, ub)          the quantized formats: unit ub of block bi's
//                            words, loaded, not decoded (w_raw); w_unit_r
//                            (and F16_DOT's w_unit_h_r) decode them
//   W_UNITS            units per row (params 12 * W_UPB)
// Binding 0 is the weight buffer. Params 8..11: byte offsets of planes 0..3
// in it; param 12: blocks per row; param 13: columns.
//
// The file reads in four parts: what each format is (its units a block and
// the field helpers it uses), the helpers, one section per format (its
// words, its maps, its decoding), and the decoding that several formats
// share (levels from nibble words, levels from byte words).

// ---- What each format is ---------------------------------------------------
// W_UPB: units (32 values) per block. W_IS_FLOAT: the float formats.
// W_NIB_LEVELS: the formats decoded from NIB words through nib_levels
// (q4_unit gives the words and maps). W_BYTE_LEVELS: the formats decoded from
// level words, a level a byte (w_unit_bytes), W_BYTE_OFF where their maps
// take a fixed offset off the level (ab.y = -OFF ab.x). W_H_SAME (F16_DOT):
// the formats whose two half units share one map (ab.z = ab.x * W_H_SAME,
// ab.w = ab.y; 1/16 where the high nibbles come as 16 x the level), so that
// one sum of products can take both halves (matvec.comp H_MERGE).
// The field helpers a format uses (W_LVL8, W_NIB_LOHI, W_TWO, W_BIT): each
// helper is compiled only for the formats that use it (unused functions
// changed the code NVIDIA's compiler made for the others: Q8_0's matvec ran
// 20% slower beside the byte-lane helpers, bench/RESULTS.md).
#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
#define W_IS_FLOAT 1
#define W_UPB 1u
#elif defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1)
#define W_UPB 1u
#define W_NIB_LEVELS 1
#define W_H_SAME_VALUE 0.0625
#elif defined(WTYPE_Q4_K)
#define W_UPB 8u
#define W_NIB_LEVELS 1
#define W_H_SAME_VALUE 0.0625
#elif defined(WTYPE_Q5_0)
#define W_UPB 1u
#define W_BYTE_LEVELS 1
#define W_BYTE_OFF 16.0
#define W_H_SAME_VALUE 1.0
#define W_LVL8 1
#define W_NIB_LOHI 1
#define W_BIT 1
#elif defined(WTYPE_Q5_1)
#define W_UPB 1u
#define W_BYTE_LEVELS 1
#define W_H_SAME_VALUE 1.0
#define W_LVL8 1
#define W_NIB_LOHI 1
#define W_BIT 1
#elif defined(WTYPE_Q5_K)
#define W_UPB 8u
#define W_BYTE_LEVELS 1
#define W_H_SAME_VALUE 1.0
#define W_LVL8 1
#define W_NIB_LOHI 1
#define W_BIT 1
#elif defined(WTYPE_Q8_0)
#define W_UPB 1u
#define W_H_SAME_VALUE 1.0
#elif defined(WTYPE_Q2_K)
#define W_UPB 8u
#define W_BYTE_LEVELS 1
#define W_LVL8 1
#define W_TWO 1
#elif defined(WTYPE_Q3_K)
#define W_UPB 8u
#define W_BYTE_LEVELS 1
#define W_BYTE_OFF 4.0
#define W_LVL8 1
#define W_TWO 1
#define W_BIT 1
#elif defined(WTYPE_Q6_K)
#define W_UPB 8u
#define W_BYTE_LEVELS 1
#define W_BYTE_OFF 32.0
#define W_LVL8 1
#define W_NIB_LOHI 1
#define W_TWO 1
#else
#error "define one WTYPE_<type>"
#endif
#if defined(F16_DOT) && defined(W_H_SAME_VALUE)
#define W_H_SAME W_H_SAME_VALUE
#endif
#define W_UNITS (W_NB * W_UPB)

// ---- The buffer and the helpers ----------------------------------------------

// The same buffer as 16-byte and as 4-byte words (two aliased blocks: a
// dynamically indexed component of a loaded uvec4 can cost a trip through
// local memory on some compilers; Q2_K and Q3_K add 8-byte words, w_u64).
// W_COHERENT: the blocks declared coherent. Coherent loads cannot be served
// from an SM's own cache, so (as measured on NVIDIA: ops/matvec.c
// xg_w_coherent) the weights streaming through no longer evict from it what
// the kernel reads again (matvec.comp XG: x's units).
#ifdef W_COHERENT
#define W_QUAL coherent
#else
#define W_QUAL
#endif
layout(std430, binding = 0) W_QUAL readonly buffer Weights { uvec4 wq[]; };
layout(std430, binding = 0) W_QUAL readonly buffer WeightWords { uint wu[]; };

#define W_PLANE(p) PARAM_U(8 + (p))
#define W_NB PARAM_U(12)
#define W_COLS PARAM_U(13)

#ifdef W_IS_FLOAT
// x's vec4 j (values 4j..4j+3) of unit u, with the values past the row's
// W_COLS zeroed: a float row's tail is zero-padded to a whole unit, and x
// past the row need not be (matvec.comp, matmul.comp)
vec4 w_x_in_row(uint u, uint j, vec4 v)
{
    uvec4 idx = u * 32u + j * 4u + uvec4(0u, 1u, 2u, 3u);
    return mix(vec4(0.0), v, lessThan(idx, uvec4(W_COLS)));
}
#endif

uint w_u32(uint byte_off) { return wu[byte_off >> 2u]; }

// the index of the block that holds unit u of a row (u % W_UPB: the unit
// within it). EXPERT (matvec.comp): rows count from the chosen expert's
// first row in this buffer, w_row_base, set before any weight is read.
#ifdef EXPERT
uint w_row_base;
uint w_block(uint row, uint u) { return (row + w_row_base) * W_NB + u / W_UPB; }
#else
uint w_block(uint row, uint u) { return row * W_NB + u / W_UPB; }
#endif

// The 8 bytes at a multiple of 8 (TWO words). Q2_K and Q3_K load them alone
// (the buffer as 8-byte words too), faster for them; Q6_K loads the 16 bytes
// that hold them and picks a half, as 8 bytes alone were slower for it
// (bench/RESULTS.md "One-token matvec splits").
#if defined(WTYPE_Q2_K) || defined(WTYPE_Q3_K)
layout(std430, binding = 0) W_QUAL readonly buffer WeightPairs { uvec2 wd[]; };
uvec2 w_u64(uint byte_off) { return wd[byte_off >> 3u]; }
#else
uvec2 w_u64(uint byte_off)
{
    uvec4 t = wq[byte_off >> 4u];
    return (byte_off & 8u) != 0u ? t.zw : t.xy;
}
#endif

// the f16 at an even byte offset in the word that holds it (both halves of
// the word unpacked, one picked: measured faster on NVIDIA than a variable
// shift, bench/RESULTS.md)
float half_of(uint word, uint byte_off)
{
    vec2 h = unpackHalf2x16(word);
    return (byte_off & 2u) != 0u ? h.y : h.x;
}


// Levels become floats without integer-to-float conversions (a quarter- or
// eighth-rate instruction on many GPUs): a level q < 2^23 in the mantissa of
// 2^23 reads as 2^23 + q, exactly.
vec4 lvl(uvec4 bits) { return uintBitsToFloat(bits | 0x4B000000u) - 8388608.0; }
// (the scales too: NVIDIA's integer-to-float conversion runs at 1/8 the rate of an add)
vec2 lvl2(uvec2 bits) { return uintBitsToFloat(bits | 0x4B000000u) - 8388608.0; }

#ifdef W_LVL8
// The four bytes of a word as levels (value 4k+b of an encoding's word k
// sits in byte b, quant_gpu.h): NVIDIA compiles each to a byte permute into
// 2^23's mantissa and one add.
vec4 lvl8(uint w) { return lvl((uvec4(w) >> uvec4(0u, 8u, 16u, 24u)) & 255u); }
#endif
#ifdef W_NIB_LOHI
// NIB word: the low nibbles (values 4k..4k+3), the high ones (16+4k..)
uint nib_lo(uint w) { return w & 0x0F0F0F0Fu; }
uint nib_hi(uint w) { return (w >> 4u) & 0x0F0F0F0Fu; }
#endif
// Two fields below 2^10 (bits: masked to the low bits of each half) in the
// mantissas of two f16 whose exponent makes 1024, less off, in f16: exact
// (integers below 2^11). For the nibbles below (nib_levels) and F16_DOT's
// K-quant scales (k4_map_h).
#if defined(F16_LEVELS) || defined(F16_DOT)
#define NIB_PAIR_H(bits, off) (unpackFloat2x16((bits) | 0x64006400u) - f16vec2(off))
#endif
#ifdef W_NIB_LEVELS
// A NIB word as levels with few integer instructions (Q4_0, Q4_1, Q4_K;
// faster in the decode step than shifting each nibble out, bench/RESULTS.md
// "f16 products"): a nibble
// masked into the low mantissa bits of an f16 whose exponent makes 1024
// (0x6400) reads as 1024 + level, exactly, two f16 a word at once, and the
// f32 subtraction is exact. The high nibbles are masked in place (bits 4..7
// of each byte), so they come out as 16 * level: the caller's map scales
// them back (an exact power of two).
// F16_LEVELS (GL_NV_gpu_shader5, Q4_0/Q4_1; ops/matvec.c says when):
// the offsets are taken off in f16 arithmetic instead, two values an
// instruction, each result exact (an integer below 2^11). Q4_0's levels then
// come out as level - 8 (16 x that for the high nibbles), its map without an
// offset. NIB_PAIR: the two f16 of a masked word, less off, as f32.
#if defined(F16_LEVELS) && defined(WTYPE_Q4_0)
#define NIB_OFF_LO 1032.0
#define NIB_OFF_HI 1152.0
#else
#define NIB_OFF_LO 1024.0
#define NIB_OFF_HI 1024.0
#endif
// NIB_PAIR_H (above): the same left in f16 (F16_DOT).
#if defined(F16_LEVELS)
#define NIB_PAIR(bits, off) vec2(NIB_PAIR_H(bits, off))
#else
#define NIB_PAIR(bits, off) (unpackHalf2x16((bits) | 0x64006400u) - (off))
#endif
// A NIB word's four pairs through P (NIB_PAIR or NIB_PAIR_H): values (0, 2)
// and (1, 3) of its low nibbles, then of its high ones.
#define NIB_WORD(w, P, l02, l13, h02, h13) \
    l02 = P((w) & 0x000F000Fu, NIB_OFF_LO); \
    l13 = P(((w) >> 8u) & 0x000F000Fu, NIB_OFF_LO); \
    h02 = P((w) & 0x00F000F0u, NIB_OFF_HI); \
    h13 = P(((w) >> 8u) & 0x00F000F0u, NIB_OFF_HI)
void nib_levels(uint w, out vec4 lo, out vec4 hi16)
{
    vec2 l02, l13, h02, h13;
    NIB_WORD(w, NIB_PAIR, l02, l13, h02, h13);
    lo = vec4(l02.x, l13.x, l02.y, l13.y);
    hi16 = vec4(h02.x, h13.x, h02.y, h13.y);
}
#endif
#if defined(WTYPE_Q8_0)
// BYTE word: the four bytes, offset by 128 (two's complement -128..127 -> 0..255)
uvec4 u8x4(uint w) { return (uvec4(w ^ 0x80808080u) >> uvec4(0u, 8u, 16u, 24u)) & 255u; }
#endif
#ifdef W_TWO
// TWO words t: the two bits of values 4k.. / 16+4k.., at bits 0..1 of each byte
// (W_LO_SHIFT(k): the bit of each byte where value 4k + b's field starts)
#define W_LO_SHIFT(k) (4 * ((k) & 1))
uint two_lo(uvec2 t, int k) { return (t[k >> 1] >> uint(W_LO_SHIFT(k))) & 0x03030303u; }
uint two_hi(uvec2 t, int k) { return (t[k >> 1] >> uint(W_LO_SHIFT(k) + 2)) & 0x03030303u; }
#endif
#ifdef W_BIT
// BIT word b: the bit of values 4k.. / 16+4k.., at bit 0 of each byte
uint bit_lo(uint b, int k) { return (b >> uint(k)) & 0x01010101u; }
uint bit_hi(uint b, int k) { return (b >> uint(4 + k)) & 0x01010101u; }
#endif

#ifdef F16_DOT
// bytes 0 and 2 of a word of levels (Q8_0's + 128) as two f16 levels less
// off: exact (integers below 2^11). F16_SUBN (matvec.comp; ops/matvec.c
// f16_subn_choice): the masked bits read as they are, level x 2^-24 (a
// subnormal), no offset taken off (the maps keep it); NIB_PAIR_D the same
// for a NIB word's masked nibbles (16 x that for the high ones).
#ifdef F16_SUBN
#define BYTE_PAIR_H(w, off) unpackFloat2x16((w) & 0x00FF00FFu)
#define NIB_PAIR_D(bits, off) unpackFloat2x16(bits)
#else
#define BYTE_PAIR_H(w, off) (unpackFloat2x16(((w) & 0x00FF00FFu) | 0x64006400u) - f16vec2(off))
#define NIB_PAIR_D(bits, off) NIB_PAIR_H(bits, off)
#endif
// One token, F16_SUBN (the kernels with several tokens measured level or
// slower so), Q2_K, Q3_K and Q6_K: w_unit_h_r masks each pair's fields where
// they lie in the unit's words instead of shifting every field down to bit 0
// first (a pair is one to three instructions instead of four or five;
// bench/RESULTS.md "f16 products").
//   W_TWO_IN_PLACE (Q2_K, Q3_K): a level then reads as level x
//     2^W_LO_SHIFT(k) (the low half's values 4k..) or x 2^(W_LO_SHIFT(k) + 2)
//     (the high half's), and x's pairs come times W_XL(k) and W_XH(k) to
//     match (x_half). The largest field ends at bit 8 (Q3_K's high half, k
//     odd): still a subnormal, exact.
//   W_Q6_IN_PLACE (Q6_K): the high half's levels x 16, its map / 16.
// a left shift by n, a right one by -n where n < 0
#define SHL(w, n) ((n) >= 0 ? (w) << uint(n) : (w) >> uint(-(n)))
// W_AS_ONE (the XG kernels, ops/matvec.c): the levels read as the one-token
// kernels read them, so that their products are the same f16 values.
#if defined(F16_SUBN) && defined(NT)
#if (NT == 1 || defined(W_AS_ONE)) && defined(WTYPE_Q6_K)
#define W_Q6_IN_PLACE 1
#elif (NT == 1 || defined(W_AS_ONE)) && (defined(WTYPE_Q2_K) || defined(WTYPE_Q3_K))
#define W_TWO_IN_PLACE 1
#define W_XL(k) TWO_XL(k)
#define W_XH(k) TWO_XH(k)
#endif
#endif
#ifndef W_XL
#define W_XL(k) 1.0
#define W_XH(k) 1.0
#endif
#endif

#ifndef W_IS_FLOAT
// A unit's words as loaded from memory, not yet decoded (w_fetch), so that a
// kernel can issue the loads of several rows before it decodes any of them
// (more loads in flight: bench/RESULTS.md "One-token matvec splits"). q
// holds the quant words, s and e the rest, by format (each format's w_fetch
// below says which).
struct w_raw {
    uvec4 q;
    uvec4 s;
    uvec2 e;
};
#endif

// ---- The formats, one section each -------------------------------------------
// Each quantized format gives w_fetch, then either q4_unit (W_NIB_LEVELS),
// w_unit_bytes (W_BYTE_LEVELS) or its own w_unit_r and w_unit_h_r (Q8_0);
// Q2_K, Q3_K and Q6_K their own w_unit_h_r where F16_DOT reads the levels in
// place; Q4_0, Q8_0 and Q4_K their own w_unit_f16 (F16_TILES). The float
// formats give w_unit itself.

#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
// F32, F16, BF16: 32 values a unit, stored as they are
void w_unit(uint row, uint u, out vec4 q[8], out vec4 ab)
{
    uint bi = w_block(row, u);
    uint ub = u % W_UPB;               // unit within the block
#if defined(WTYPE_F32)
    uint o = (W_PLANE(0) >> 4u) + bi * 8u;
    for (int k = 0; k < 8; k++)
        q[k] = uintBitsToFloat(wq[o + uint(k)]);
    ab = vec4(1.0, 0.0, 1.0, 0.0);
#else
    uint o = (W_PLANE(0) >> 4u) + bi * 4u;
    for (int k = 0; k < 4; k++) {
        uvec4 a = wq[o + uint(k >> 1)], b = wq[o + 2u + uint(k >> 1)];
        uvec2 pa = (k & 1) != 0 ? a.zw : a.xy, pb = (k & 1) != 0 ? b.zw : b.xy;
#if defined(WTYPE_F16)
        q[k] = vec4(unpackHalf2x16(pa.x), unpackHalf2x16(pa.y));
        q[4 + k] = vec4(unpackHalf2x16(pb.x), unpackHalf2x16(pb.y));
#else
        q[k] = uintBitsToFloat(uvec4(pa.x << 16u, pa.x & 0xffff0000u, pa.y << 16u, pa.y & 0xffff0000u));
        q[4 + k] = uintBitsToFloat(uvec4(pb.x << 16u, pb.x & 0xffff0000u, pb.y << 16u, pb.y & 0xffff0000u));
#endif
    }
    ab = vec4(1.0, 0.0, 1.0, 0.0);
#endif
}
#endif

#if defined(WTYPE_Q4_0)
// Q4_0: q the NIB words, s.x the scale word (its two halves hold two blocks'
// scales)
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi];
    r.s.x = w_u32(W_PLANE(1) + bi * 2u);
    return r;
}
// The nibble words of unit ub of block bi (its words r) and its maps (w_unit's ab).
uvec4 q4_unit(w_raw r, uint bi, uint ub, out vec4 ab)
{
    float d = half_of(r.s.x, W_PLANE(1) + bi * 2u);
#if defined(F16_LEVELS)
    ab = vec4(d, 0.0, d * 0.0625, 0.0);  // the levels are already less 8
#else
    ab = vec4(d, -8.0 * d, d * 0.0625, -8.0 * d);
#endif
    return r.q;
}
#endif

#if defined(WTYPE_Q4_1)
// Q4_1: q the NIB words, s.x the scale word (d and m)
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi];
    r.s.x = w_u32(W_PLANE(1) + bi * 4u);
    return r;
}
// The nibble words of unit ub of block bi (its words r) and its maps (w_unit's ab).
uvec4 q4_unit(w_raw r, uint bi, uint ub, out vec4 ab)
{
    vec2 dm = unpackHalf2x16(r.s.x);
    ab = vec4(dm.x, dm.y, dm.x * 0.0625, dm.y);
    return r.q;
}
#endif

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// Q4_K and Q5_K: scale and min of unit j (0..7) from the K4 scale words
// (quant_gpu.h): t.y low nibbles of the scales, t.z of the mins, t.w the
// high two bits of both.
vec2 k4_scale_min(uvec4 t, uint j)
{
    uint s = ((t.y >> (4u * j)) & 15u) | (((t.w >> (2u * j)) & 3u) << 4u);
    uint m = ((t.z >> (4u * j)) & 15u) | (((t.w >> (16u + 2u * j)) & 3u) << 4u);
    return lvl2(uvec2(s, m));
}
#ifdef F16_DOT
// Unit j's (d x scale, -dmin x min) from the K4 scale words t. F16_DOT's
// K-quant maps (here, k23_map, q6k_map) put a sub-block's scale and min, or
// two scales, together as one f16 pair (NIB_PAIR_H) and multiply it by d
// (and -dmin) in one f16 multiply: fewer instructions than in f32, each
// product rounded to f16 (a relative 2^-12 at most).
vec2 k4_map_h(uvec4 t, uint j)
{
    uint lo = ((t.y >> (4u * j)) & 15u) | (((t.z >> (4u * j)) & 15u) << 16u);
    uint hi = ((t.w >> (2u * j)) & 0x00030003u) << 4u;
    f16vec2 sm = NIB_PAIR_H(lo | hi, 1024.0);
    return vec2(sm * (unpackFloat2x16(t.x) * f16vec2(1.0, -1.0)));
}
#endif
#endif

#if defined(WTYPE_Q4_K)
// Q4_K: q the NIB words, s the block's K4 scale words
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi * 8u + ub];
    r.s = wq[(W_PLANE(1) >> 4u) + bi];
    return r;
}
// The nibble words of unit ub of block bi (its words r) and its maps (w_unit's ab).
uvec4 q4_unit(w_raw r, uint bi, uint ub, out vec4 ab)
{
#if defined(F16_DOT)
    ab = k4_map_h(r.s, ub).xyxy * vec4(1.0, 1.0, 0.0625, 1.0);
#else
    vec2 dm = unpackHalf2x16(r.s.x), sm = k4_scale_min(r.s, ub);
    float sc = dm.x * sm.x;
    ab = vec4(sc, -dm.y * sm.y, sc * 0.0625, -dm.y * sm.y);
#endif
    return r.q;
}
#endif

#if defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1) || defined(WTYPE_Q5_K)
// Q5_0, Q5_1, Q5_K: a unit's level words from its NIB words and BIT word
// (w_unit_bytes' lo and hi; a statement of its own, no semicolon after it)
#define Q5_LEVEL_WORDS(r, lo, hi) \
    for (int k = 0; k < 4; k++) { \
        lo[k] = nib_lo(r.q[k]) | (bit_lo(r.e.x, k) << 4u); \
        hi[k] = nib_hi(r.q[k]) | (bit_hi(r.e.x, k) << 4u); \
    }
#endif

#if defined(WTYPE_Q5_0)
// Q5_0: q the NIB words, e.x the BIT word, s.x the scale word (its two
// halves hold two blocks' scales)
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi];
    r.e.x = w_u32(W_PLANE(1) + bi * 4u);
    r.s.x = w_u32(W_PLANE(2) + bi * 2u);
    return r;
}
// Unit ub of block bi (its words r) as level words, byte b of lo[k] the
// level of value 4k + b and of hi[k] that of 16 + 4k + b, and w_unit's maps.
void w_unit_bytes(w_raw r, uint bi, uint ub, out uint lo[4], out uint hi[4], out vec4 ab)
{
    Q5_LEVEL_WORDS(r, lo, hi)
    float d = half_of(r.s.x, W_PLANE(2) + bi * 2u);
    ab = vec4(d, -16.0 * d, d, -16.0 * d);
}
#endif

#if defined(WTYPE_Q5_1)
// Q5_1: q the NIB words, e.x the BIT word, s.x the scale word (d and m)
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi];
    r.e.x = w_u32(W_PLANE(1) + bi * 4u);
    r.s.x = w_u32(W_PLANE(2) + bi * 4u);
    return r;
}
// Unit ub of block bi (its words r) as level words, byte b of lo[k] the
// level of value 4k + b and of hi[k] that of 16 + 4k + b, and w_unit's maps.
void w_unit_bytes(w_raw r, uint bi, uint ub, out uint lo[4], out uint hi[4], out vec4 ab)
{
    Q5_LEVEL_WORDS(r, lo, hi)
    ab = unpackHalf2x16(r.s.x).xyxy;
}
#endif

#if defined(WTYPE_Q5_K)
// Q5_K: q the NIB words, e.x the BIT word, s the K4 scale words
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi * 8u + ub];
    r.e.x = w_u32(W_PLANE(1) + bi * 32u + ub * 4u);
    r.s = wq[(W_PLANE(2) >> 4u) + bi];
    return r;
}
// Unit ub of block bi (its words r) as level words, byte b of lo[k] the
// level of value 4k + b and of hi[k] that of 16 + 4k + b, and w_unit's maps.
void w_unit_bytes(w_raw r, uint bi, uint ub, out uint lo[4], out uint hi[4], out vec4 ab)
{
    Q5_LEVEL_WORDS(r, lo, hi)
#if defined(F16_DOT)
    ab = k4_map_h(r.s, ub).xyxy;
#else
    vec2 dm = unpackHalf2x16(r.s.x), sm = k4_scale_min(r.s, ub);
    ab = vec2(dm.x * sm.x, -dm.y * sm.y).xyxy;
#endif
}
#endif

#if defined(WTYPE_Q8_0)
// Q8_0: q and s the BYTE words, e.x the scale word
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    uint o = (W_PLANE(0) >> 4u) + bi * 2u;
    r.q = wq[o];
    r.s = wq[o + 1u];
    r.e.x = w_u32(W_PLANE(1) + bi * 2u);
    return r;
}
// w_unit's levels and maps from the unit's words
void w_unit_r(w_raw r, uint bi, uint ub, out vec4 q[8], out vec4 ab)
{
    for (int k = 0; k < 4; k++) {
        q[k] = lvl(u8x4(r.q[k]));
        q[4 + k] = lvl(u8x4(r.s[k]));
    }
    float d = half_of(r.e.x, W_PLANE(1) + bi * 2u);
    ab = vec4(d, -128.0 * d, d, -128.0 * d);
}
#ifdef F16_DOT
// w_unit_h_r (the shared one, below, says what it gives): the levels signed
// (less 128) where F16_SUBN is off, their map then without the offset
#define W_OWN_UNIT_H 1
void w_unit_h_r(w_raw r, uint bi, uint ub, out f16vec2 lq[8], out f16vec2 hq[8], out vec4 ab)
{
    uvec4 a = r.q ^ 0x80808080u, b = r.s ^ 0x80808080u;
    for (int k = 0; k < 4; k++) {
        lq[2 * k] = BYTE_PAIR_H(a[k], 1152.0);
        lq[2 * k + 1] = BYTE_PAIR_H(a[k] >> 8u, 1152.0);
        hq[2 * k] = BYTE_PAIR_H(b[k], 1152.0);
        hq[2 * k + 1] = BYTE_PAIR_H(b[k] >> 8u, 1152.0);
    }
    float d = half_of(r.e.x, W_PLANE(1) + bi * 2u);
#ifdef F16_SUBN
    ab = vec4(d, -128.0 * d, d, -128.0 * d);  // the levels are unsigned (+ 128)
#else
    ab = vec4(d, 0.0, d, 0.0);  // the levels are signed already
#endif
}
#endif
#endif

#if defined(WTYPE_Q2_K)
// Q2_K: q.xy the TWO words, s.x the unit's K2 scale word, s.y the block's d
// and dmin
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q.xy = w_u64(W_PLANE(0) + bi * 64u + ub * 8u);
    r.q.zw = uvec2(0u);
    r.s.x = w_u32(W_PLANE(1) + bi * 16u + ub * 2u);
    r.s.y = w_u32(W_PLANE(2) + bi * 4u);
    return r;
}
// the maps of unit ub (w_unit's ab) from its words r
vec4 k23_map(w_raw r, uint ub)
{
    // K2 scale word (quant_gpu.h): sub-block 2ub's scale and min at bits 0
    // and 16 of s, 2ub + 1's at bits 4 and 20
    uint s = r.s.x >> (8u * (ub & 1u));
#if defined(F16_DOT)
    // (the f16 maps: k4_map_h)
    f16vec2 dm = unpackFloat2x16(r.s.y) * f16vec2(1.0, -1.0);
    f16vec2 a0 = NIB_PAIR_H(s & 0x000F000Fu, 1024.0) * dm;
    f16vec2 a1 = NIB_PAIR_H((s >> 4u) & 0x000F000Fu, 1024.0) * dm;
    return vec4(vec2(a0), vec2(a1));
#else
    vec2 dm = unpackHalf2x16(r.s.y);
    return vec4(dm.x, -dm.y, dm.x, -dm.y) * lvl((uvec4(s) >> uvec4(0u, 16u, 4u, 20u)) & 15u);
#endif
}
// Unit ub of block bi (its words r) as level words, byte b of lo[k] the
// level of value 4k + b and of hi[k] that of 16 + 4k + b, and w_unit's maps.
void w_unit_bytes(w_raw r, uint bi, uint ub, out uint lo[4], out uint hi[4], out vec4 ab)
{
    for (int k = 0; k < 4; k++) {
        lo[k] = two_lo(r.q.xy, k);
        hi[k] = two_hi(r.q.xy, k);
    }
    ab = k23_map(r, ub);
}
#endif

#if defined(WTYPE_Q3_K)
// Q3_K: q.xy the TWO words, e.x the BIT word, s the K3 scale words
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q.xy = w_u64(W_PLANE(0) + bi * 64u + ub * 8u);
    r.q.zw = uvec2(0u);
    r.e.x = w_u32(W_PLANE(1) + bi * 32u + ub * 4u);
    r.s = wq[(W_PLANE(2) >> 4u) + bi];
    return r;
}
// the maps of unit ub (w_unit's ab) from its words r
vec4 k23_map(w_raw r, uint ub)
{
    // K3 scale words (quant_gpu.h): sub-blocks 2ub and 2ub + 1
    uvec4 t = r.s;
    uint lb = ((ub < 4u ? t.x : t.y) >> (8u * (ub & 3u))) & 255u;
    uint hb2 = (t.z >> (4u * ub)) & 15u;
#if defined(F16_DOT)
    // (the f16 maps: k4_map_h; the 6-bit scales less 32)
    uint lo = (lb & 15u) | ((lb << 12u) & 0x000F0000u);
    uint hi = ((hb2 & 3u) << 4u) | ((hb2 << 18u) & 0x00300000u);
    f16vec2 dh = unpackFloat2x16(t.w).xx;
    vec2 s01 = vec2(NIB_PAIR_H(lo | hi, 1056.0) * dh);
    return vec4(s01.x, -4.0 * s01.x, s01.y, -4.0 * s01.y);
#else
    // (6-bit scales less 32)
    float d = unpackHalf2x16(t.w).x;
    vec2 s = lvl2(uvec2((lb & 15u) | ((hb2 & 3u) << 4u), (lb >> 4u) | ((hb2 >> 2u) << 4u)));
    float s0 = d * (s.x - 32.0), s1 = d * (s.y - 32.0);
    return vec4(s0, -4.0 * s0, s1, -4.0 * s1);
#endif
}
// Unit ub of block bi (its words r) as level words, byte b of lo[k] the
// level of value 4k + b and of hi[k] that of 16 + 4k + b, and w_unit's maps.
void w_unit_bytes(w_raw r, uint bi, uint ub, out uint lo[4], out uint hi[4], out vec4 ab)
{
    for (int k = 0; k < 4; k++) {
        lo[k] = two_lo(r.q.xy, k) | (bit_lo(r.e.x, k) << 2u);
        hi[k] = two_hi(r.q.xy, k) | (bit_hi(r.e.x, k) << 2u);
    }
    ab = k23_map(r, ub);
}
#endif

#if defined(F16_DOT) && defined(W_TWO_IN_PLACE)
// Q2_K and Q3_K's w_unit_h_r with the levels read in place: each pair's
// fields masked where they lie in the TWO words (value 4k + b at bit
// W_LO_SHIFT(k) of byte b, 16 + 4k + b two bits above; bytes 1 and 3 from
// the words shifted down a byte): level x 2^(that bit), which x_half takes
// off x (W_XL, W_XH)
#define W_OWN_UNIT_H 1
void w_unit_h_r(w_raw r, uint bi, uint ub, out f16vec2 lq[8], out f16vec2 hq[8], out vec4 ab)
{
    uvec2 t = r.q.xy, t8 = t >> 8u;
#if defined(WTYPE_Q3_K)
    // the BIT word shifted a byte down: value 4k + b's third bit at bit k of
    // byte b, 16 + 4k + b's at bit 4 + k
    uint b8 = r.e.x >> 8u;
#endif
    for (int k = 0; k < 4; k++) {
        uint ml = 0x00030003u << W_LO_SHIFT(k), mh = ml << 2u;
        uint lo0 = t[k >> 1] & ml, lo1 = t8[k >> 1] & ml;
        uint hi0 = t[k >> 1] & mh, hi1 = t8[k >> 1] & mh;
#if defined(WTYPE_Q3_K)
        // the third bit two above the field: shift (field + 2) - bit
        int sl = W_LO_SHIFT(k) + 2 - k, sh = W_LO_SHIFT(k) + 2 - (4 + k) + 2;
        uint bl = 0x00040004u << W_LO_SHIFT(k), bh = bl << 2u;
        lo0 |= SHL(r.e.x, sl) & bl;
        lo1 |= SHL(b8, sl) & bl;
        hi0 |= SHL(r.e.x, sh) & bh;
        hi1 |= SHL(b8, sh) & bh;
#endif
        lq[2 * k] = unpackFloat2x16(lo0);
        lq[2 * k + 1] = unpackFloat2x16(lo1);
        hq[2 * k] = unpackFloat2x16(hi0);
        hq[2 * k + 1] = unpackFloat2x16(hi1);
    }
    ab = k23_map(r, ub);
}
#endif

#if defined(WTYPE_Q6_K)
// Q6_K: q the NIB words, e the TWO words, s.x the word of the unit's scale
// bytes, s.y the word of the block's d
w_raw w_fetch(uint bi, uint ub)
{
    w_raw r;
    r.s = uvec4(0u);
    r.e = uvec2(0u);
    r.q = wq[(W_PLANE(0) >> 4u) + bi * 8u + ub];
    r.e = w_u64(W_PLANE(1) + bi * 64u + ub * 8u);
    r.s.x = w_u32(W_PLANE(2) + bi * 16u + ub * 2u);
    r.s.y = w_u32(W_PLANE(3) + bi * 2u);
    return r;
}
// the maps of unit ub of block bi (w_unit's ab) from its words r
vec4 q6k_map(w_raw r, uint bi, uint ub)
{
    uint sc = r.s.x >> (((ub * 2u) & 3u) * 8u);
#if defined(F16_DOT)
    // (the f16 maps: k4_map_h; the two signed bytes + 128, less 1152)
    uint b = sc ^ 0x8080u;
    f16vec2 dh = unpackFloat2x16(r.s.y);
    dh = ((W_PLANE(3) + bi * 2u) & 2u) != 0u ? dh.yy : dh.xx;
    vec2 s01 = vec2(NIB_PAIR_H((b & 0xFFu) | ((b << 8u) & 0x00FF0000u), 1152.0) * dh);
    return vec4(s01.x, -32.0 * s01.x, s01.y, -32.0 * s01.y);
#else
    float d = half_of(r.s.y, W_PLANE(3) + bi * 2u);
    // the two signed bytes (two's complement + 128: 0..255)
    vec2 s = lvl2((uvec2(sc ^ 0x8080u) >> uvec2(0u, 8u)) & 255u) - 128.0;
    float s0 = d * s.x, s1 = d * s.y;
    return vec4(s0, -32.0 * s0, s1, -32.0 * s1);
#endif
}
// Unit ub of block bi (its words r) as level words, byte b of lo[k] the
// level of value 4k + b and of hi[k] that of 16 + 4k + b, and w_unit's maps.
void w_unit_bytes(w_raw r, uint bi, uint ub, out uint lo[4], out uint hi[4], out vec4 ab)
{
    for (int k = 0; k < 4; k++) {
        lo[k] = nib_lo(r.q[k]) | (two_lo(r.e, k) << 4u);
        hi[k] = nib_hi(r.q[k]) | (two_hi(r.e, k) << 4u);
    }
    ab = q6k_map(r, bi, ub);
}
#if defined(F16_DOT) && defined(W_Q6_IN_PLACE)
// w_unit_h_r with the levels read in place: each pair's nibbles masked where
// they lie in the NIB word, their top two bits from the TWO word shifted to
// just above them: the low half's levels as they are, the high half's x 16
// (its map / 16)
#define W_OWN_UNIT_H 1
void w_unit_h_r(w_raw r, uint bi, uint ub, out f16vec2 lq[8], out f16vec2 hq[8], out vec4 ab)
{
    for (int k = 0; k < 4; k++) {
        uint q0 = r.q[k], q8 = q0 >> 8u, e0 = r.e[k >> 1], e8 = e0 >> 8u;
        int sl = 4 - W_LO_SHIFT(k), sh = 8 - (W_LO_SHIFT(k) + 2);
        lq[2 * k] = unpackFloat2x16((q0 & 0x000F000Fu) | (SHL(e0, sl) & 0x00300030u));
        lq[2 * k + 1] = unpackFloat2x16((q8 & 0x000F000Fu) | (SHL(e8, sl) & 0x00300030u));
        hq[2 * k] = unpackFloat2x16((q0 & 0x00F000F0u) | (SHL(e0, sh) & 0x03000300u));
        hq[2 * k + 1] = unpackFloat2x16((q8 & 0x00F000F0u) | (SHL(e8, sh) & 0x03000300u));
    }
    ab = q6k_map(r, bi, ub);
    ab.z *= 0.0625;
}
#endif
#endif

// ---- Decoding shared by formats ------------------------------------------------

// Unit u (values 32u..32u+31) of a row as levels q and affine maps: value =
// q * ab.x + ab.y for q[0..3] (values 0..15 of the unit), q * ab.z + ab.w for
// q[4..7] (values 16..31); q[k] = values 4k..4k+3, q[4+k] = 16+4k..19+4k.
// Kernels take dot products with the levels and apply the map once per 16.
// (Q4_0/Q4_1/Q4_K give q[4..7] as 16 x the level and ab.z / 16: the same
// values, one instruction fewer per nibble; see nib_levels.)
// w_unit_r: the same from the unit's words (w_fetch(bi, ub), the quantized
// formats).
#if defined(W_NIB_LEVELS) || defined(W_BYTE_LEVELS)
void w_unit_r(w_raw r, uint bi, uint ub, out vec4 q[8], out vec4 ab)
{
#if defined(W_NIB_LEVELS)
    uvec4 w = q4_unit(r, bi, ub, ab);
    for (int k = 0; k < 4; k++)
        nib_levels(w[k], q[k], q[4 + k]);  // q[4 + k]: 16 * level
#else
    uint lo[4], hi[4];
    w_unit_bytes(r, bi, ub, lo, hi, ab);
    for (int k = 0; k < 4; k++) {
        q[k] = lvl8(lo[k]);
        q[4 + k] = lvl8(hi[k]);
    }
#endif
}
#endif

#ifndef W_IS_FLOAT
void w_unit(uint row, uint u, out vec4 q[8], out vec4 ab)
{
    uint bi = w_block(row, u);
    uint ub = u % W_UPB;               // unit within the block
    w_unit_r(w_fetch(bi, ub), bi, ub, q, ab);
}
#endif

#ifdef F16_DOT
// Unit ub of block bi (its words r) as f16 pairs for matvec.comp's f16 dot
// products (the quantized formats; GL_NV_gpu_shader5): lq[2k] holds the
// levels of values 4k and 4k + 2, lq[2k + 1] those of 4k + 1 and 4k + 3, hq
// the same of values 16.. (16 x the level for the nibbles: NIB_WORD's
// pairs); ab as w_unit's, except that Q8_0's levels and those of the formats
// with a fixed offset (W_BYTE_OFF) come signed, their maps without it.
#ifndef W_OWN_UNIT_H
void w_unit_h_r(w_raw r, uint bi, uint ub, out f16vec2 lq[8], out f16vec2 hq[8], out vec4 ab)
{
#if defined(W_BYTE_LEVELS)
    uint lo[4], hi[4];
    w_unit_bytes(r, bi, ub, lo, hi, ab);
#if defined(W_BYTE_OFF) && !defined(F16_SUBN)
#define W_PAIR_OFF (1024.0 + W_BYTE_OFF)
    ab.yw = vec2(0.0);  // the offset is taken off in f16
#else
#define W_PAIR_OFF 1024.0
#endif
    for (int k = 0; k < 4; k++) {
        lq[2 * k] = BYTE_PAIR_H(lo[k], W_PAIR_OFF);
        lq[2 * k + 1] = BYTE_PAIR_H(lo[k] >> 8u, W_PAIR_OFF);
        hq[2 * k] = BYTE_PAIR_H(hi[k], W_PAIR_OFF);
        hq[2 * k + 1] = BYTE_PAIR_H(hi[k] >> 8u, W_PAIR_OFF);
    }
#else
    uvec4 w = q4_unit(r, bi, ub, ab);
    for (int k = 0; k < 4; k++) {
        NIB_WORD(w[k], NIB_PAIR_D, lq[2 * k], lq[2 * k + 1], hq[2 * k], hq[2 * k + 1]);
    }
#endif
}
#endif
// the same for unit u of a row
void w_unit_h(uint row, uint u, out f16vec2 lq[8], out f16vec2 hq[8], out vec4 ab)
{
    uint bi = w_block(row, u), ub = u % W_UPB;
    w_unit_h_r(w_fetch(bi, ub), bi, ub, lq, hq, ab);
}
#endif

// The 32 values of unit u of a row, dequantized (v[k] as q[k] above).
void w_unit_values(uint row, uint u, out vec4 v[8])
{
    vec4 ab;
    w_unit(row, u, v, ab);
    for (int k = 0; k < 4; k++) {
        v[k] = v[k] * ab.x + ab.y;
        v[4 + k] = v[4 + k] * ab.z + ab.w;
    }
}

#ifdef F16_TILES
// Unit u of a row as f16 (v[k] as in w_unit_values), for matmul.comp's f16
// tiles (GL_NV_gpu_shader5). Q4_0, Q8_0 and Q4_K are dequantized in f16
// arithmetic: levels sit in the mantissa of 1024 as in nib_levels, two a
// word (lvl_f16), and never pass through f32. Q4_0 and Q8_0 give the same
// f16 as rounding the f32 value (level - offset is exact, times the f16
// scale is one rounding); Q4_K rounds its scale and min to f16 first (one
// more rounding of ~5e-4), a little faster in the prefill tiles
// (bench/RESULTS.md "Prefill tiles"). Every other format rounds
// w_unit_values.
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q8_0)
// half_of as a float16_t
float16_t half_of_f16(uint word, uint byte_off)
{
    f16vec2 h = unpackFloat2x16(word);
    return (byte_off & 2u) != 0u ? h.y : h.x;
}
#endif
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q8_0) || defined(WTYPE_Q4_K)
// the four levels (< 256) in the bytes of `bytes`, minus off, in f16: exact
f16vec4 lvl_f16(uint bytes, float16_t off)
{
    const float16_t base = float16_t(1024.0);
    f16vec2 e = unpackFloat2x16((bytes & 0x00FF00FFu) | 0x64006400u) - (base + off);
    f16vec2 o = unpackFloat2x16(((bytes >> 8u) & 0x00FF00FFu) | 0x64006400u) - (base + off);
    return f16vec4(e.x, o.x, e.y, o.y);
}
#endif

#if defined(WTYPE_Q4_0) || defined(WTYPE_Q4_K)
// Q4_0's and Q4_K's w_unit_f16 from the unit's words (w_fetch's): matmul.comp
// UNIT_AHEAD fetches the next unit's words during a unit's products
void w_unit_f16_r(w_raw r, uint bi, uint ub, out f16vec4 v[8])
{
#if defined(WTYPE_Q4_0)
    float16_t d = half_of_f16(r.s.x, W_PLANE(1) + bi * 2u);
    for (int k = 0; k < 4; k++) {
        v[k] = lvl_f16(r.q[k] & 0x0F0F0F0Fu, float16_t(8.0)) * d;
        v[4 + k] = lvl_f16((r.q[k] >> 4u) & 0x0F0F0F0Fu, float16_t(8.0)) * d;
    }
#else
    vec2 dm = unpackHalf2x16(r.s.x), sm = k4_scale_min(r.s, ub);
    float16_t sc = float16_t(dm.x * sm.x), mn = float16_t(-dm.y * sm.y);
    for (int k = 0; k < 4; k++) {
        v[k] = lvl_f16(r.q[k] & 0x0F0F0F0Fu, float16_t(0.0)) * sc + mn;
        v[4 + k] = lvl_f16((r.q[k] >> 4u) & 0x0F0F0F0Fu, float16_t(0.0)) * sc + mn;
    }
#endif
}
#endif

void w_unit_f16(uint row, uint u, out f16vec4 v[8])
{
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q4_K)
    uint bi = w_block(row, u), ub = u % W_UPB;
    w_unit_f16_r(w_fetch(bi, ub), bi, ub, v);
#elif defined(WTYPE_Q8_0)
    uint bi = w_block(row, u);
    uint o = (W_PLANE(0) >> 4u) + bi * 2u;
    uvec4 a = wq[o], b = wq[o + 1u];
    float16_t d = half_of_f16(w_u32(W_PLANE(1) + bi * 2u), W_PLANE(1) + bi * 2u);
    for (int k = 0; k < 4; k++) {
        v[k] = lvl_f16(a[k] ^ 0x80808080u, float16_t(128.0)) * d;
        v[4 + k] = lvl_f16(b[k] ^ 0x80808080u, float16_t(128.0)) * d;
    }
#else
    vec4 f[8];
    w_unit_values(row, u, f);
    for (int k = 0; k < 8; k++)
        v[k] = f16vec4(f[k]);
#endif
}
#endif
