// Y = X W^T for a batch of tokens (prefill): for every token t < N and
// every row r of the weight, y[t][r] = sum_c W[r][c] x[t][c], f32
// accumulation.
// Bindings: 0 weights (weights.glsl), 1 x (vec4[]: the activation buffer;
//           written too by QKV), 2 y (float[]; QKV: the layer's KV cache as
//           uint[]), 3 (F16_TILES) the tokens' tiles (x_tiles.comp).
// Params: 0 rows in this dispatch (one weight part), 1 global row of its
//         first row, 2 vec4 offset of token 0's x (token t at + t * W_UNITS * 8:
//         activation rows are padded to 32 values), 4 N tokens,
//         5 float offset in y of token 0 (QKV: of Q in x's buffer),
//         6 y floats per token (QKV: Q floats per token), 8..13 the weight
//         planes (weights.glsl). QKV only: 3 float offset of token 0's row of
//         the RoPE table (HEAD_DIM floats per token), 7 float offset of the
//         Q|K|V biases, 14 / 15 uint offsets of token 0's K / V in the cache
//         (KV_DIM / 2 uints per token; with KV_PAGE the cache's K and V, and
//         23 token 0's entry: kv_row).
// Epilogues (as matvec.comp): none: y = result, or y += result (param 20,
// Y_ADD in common.glsl); GLU: rows
// interleave gate and up, y[t][g / 2] = silu(gate) * up for the global row
// g; QKV: bias (QKV_BIAS), RoPE, Q to x's buffer as f32, K and V into the
// cache as packed halves.
// Tiling: a work group computes BM rows x BN tokens. Per step of one 32-value
// unit, its threads dequantize BM rows' units into shared memory (one unit
// per thread, stored as the row's 8 vec4) and copy the BN tokens' 8 vec4
// beside them, then each thread accumulates TM rows x TN tokens as dot
// products of vec4. Threads are a TX x TY grid (TX = 16); thread (tx, ty)
// holds the row slots tx + TX i (i < TM) and the token slots ty + TY j
// (j < TN): eight neighbouring threads read eight neighbouring slots, whose
// 36-float rows fall on distinct banks. F16_TILES: the weights are
// dequantized in f16 arithmetic (w_unit_f16) into rows of 4 uvec4 (8 f16
// values each), the tokens' tile comes ready-made (x_tiles.comp) and is
// held by value (value k of tokens 2 p and 2 p + 1 an f16 pair), thread
// (tx, ty) holds the TN tokens TN ty .. TN ty + TN - 1 (TN / 2 pairs, one
// load a value), and each product is a weight times a pair of tokens (a
// packed f16 multiply-add).
// With PAIRS (GLU, QKV) slot s < BM / 2 holds row 2 s of the tile and slot
// s + BM / 2 row 2 s + 1, so a thread's slots i and i + TM / 2 are a pair of
// rows.
// EXPERT (mixture of experts, ops/moe.c): the weight is experts of param 0
// rows stacked, and work-group layer z = gl_WorkGroupID.z takes expert
// param 23 + z (its rows from row z param 0 of this part) over the tokens
// grouped to it (moe.comp GROUP): its count at float param 16 + e of x's
// buffer, its first entry in the list at param 16 + param 19 + e, the list
// at param 17 (entries, each a (token, slot) row: y's row, and x's row
// entry / param 21); F16_TILES: the tiles x_tiles.comp EXPERT made, the
// expert's first at the tile slot at float param 16 + 2 param 19 + e. Param
// 22 bit 1: the results times the entry's weight
// (the route at param 18: entry i's weight at param 18 + 2 i + 1). Param 1
// is 0 (rows count within the expert); param 4 unused.
// SLICES (a product of few row blocks, not EXPERT: ops/matmul.h
// matmul_slices): param 24 units a slice of each row, work-group layer z
// the slice, its sums to y (the slices' buffer) param 25 floats further a
// slice, each row's as it is (GLU's gate and up, QKV's Q, K and V rows
// too). glsl/matmul_sum.comp adds the slices up with a plain, residual or
// GLU epilogue; QKV's are added up by this kernel built with SLICES_SUM
// (their sums at binding 3), which then runs the QKV epilogue.
// Defines: WG_SIZE (= TX * TY), TM, TN (4 or 8), WTYPE_<type>; HALF_TILES:
// the tiles and products in mediump (f16 where the driver has it), the sums
// in highp; F16_TILES (GL_NV_gpu_shader5): the tiles in f16 and each unit's
// 32 products of a row and a token added up in f16, then into the f32 sums;
// ROW_SUMS (with F16_TILES): each row's products with a token summed in f16
// over the whole row instead, as llama.cpp's Vulkan tiles do without matrix
// cores: no conversion and f32 add each unit, the faster on an H200
// (bench/RESULTS.md "Prefill tiles"; its KL-divergence from the exact path
// in "Decode beside llama.cpp");
// F16_TILES_F32: the same kernel in f32 (below); DUP_W (with F16_TILES): the
// weights' tile holds (w, w) pairs (below, at RS4); WSPLIT (with F16_TILES,
// 1 or 2): a unit staged in that many parts (below, at WSPLIT); UNIT_AHEAD
// (with F16_TILES, Q4_0 and Q4_K): the next unit's words loaded during a
// unit's products (below, at fetch_unit).
#pragma optionNV(unroll all)
#if defined(F16_TILES_F32)
// F16_TILES's code with f32 types and arithmetic, for a driver without f16
// types: the tests check its indexing on llvmpipe (ops/matmul.c matmul_build)
#define F16_TILES 1
#define float16_t float
#define f16vec2 vec2
#define f16vec4 vec4
#define unpackFloat2x16 unpackHalf2x16
#define packFloat2x16 packHalf2x16
#elif defined(F16_TILES)
#extension GL_NV_gpu_shader5 : require
#endif
#if defined(UNIT_AHEAD) && !(defined(F16_TILES) && (defined(WTYPE_Q4_0) || defined(WTYPE_Q4_K)))
#undef UNIT_AHEAD  // (the formats with w_unit_f16_r)
#endif
#include "common.glsl"
#include "weights.glsl"

layout(local_size_x = WG_SIZE) in;

#ifdef QKV
layout(std430, binding = 1) restrict buffer X { vec4 xv[]; };
layout(std430, binding = 2) writeonly restrict buffer Y { uint yu[]; };
#else
layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
layout(std430, binding = 2) restrict buffer Y { float y[]; };
#endif

#if defined(GLU) || defined(QKV)
#define PAIRS 1
#endif
#if defined(EXPERT) && defined(QKV)
#error "EXPERT writes y or GLU"
#endif
#ifdef F16_TILES
// x_tiles.comp's tiles: NQ uvec4 a tile (BN tokens of one unit), tile (b, u)
// at (b W_UNITS + u) NQ
layout(std430, binding = 3) readonly restrict buffer XT { uvec4 xt[]; };
#define NQ (4u * BN)  // = WG_SIZE TN / 4
#endif

#ifdef SLICES_SUM
// the slices' sums at binding 3 (a kernel may have only 4 blocks; with
// F16_TILES read through the tokens' tiles' block, unused here)
#ifdef F16_TILES
#define PART_AT(i) uintBitsToFloat(xt[(i) >> 2u][(i) & 3u])
#else
layout(std430, binding = 3) readonly restrict buffer PS { float part[]; };
#define PART_AT(i) part[i]
#endif
#define SLICED false
#elif defined(EXPERT)
#define SLICED false
#else
// a sliced product's dispatch: its slice's sums stored as they are
#define SLICED (PARAM_U(24) != 0u)
#endif

#define TX 16u
#define TY (uint(WG_SIZE) / TX)
#define BM (TX * uint(TM))
#define BN (TY * uint(TN))
#define RS 9u  // vec4 per tile row: 8 and one of padding

#if defined(F16_TILES)
#define TVEC f16vec4
#define TSTORE(v) f16vec4(v)
#elif defined(HALF_TILES)
#define TVEC mediump vec4
#define TSTORE(v) (v)
#else
#define TVEC vec4
#define TSTORE(v) (v)
#endif

#ifdef F16_TILES
// The weights' tile: row slot i's 32 values at uvec4 i RS4 + m (values
// 8 m .. 8 m + 7 as f16 pairs), padded by one uvec4 so that 8 consecutive
// rows' uvec4 m fall on 32 banks. The tokens' tile: the words of value k of
// the token pairs (k BN / 2 + p, x_tiles.comp's order) as BVEC, TN / 2 pairs
// each: thread (tx, ty)'s pairs of value k are xq[k TY + ty].
// A subgroup of 32 (below, main) holds 8 row slots x 4 token slots: per 8
// values, one 16-byte load a row slot (8 rows: 128 bytes, one pass of the
// banks), per value one load of the thread's pairs (4 addresses). Before,
// each value took TN / 2 loads of 4 bytes and the row slots 2 of 8, twice
// the shared-memory traffic per multiply-add (bench/RESULTS.md "Prefill
// tiles").
//
// DUP_W: the weights' tile holds each value twice, (w, w) in a word (rows
// of 8 + 1 uvec4: values 4 m .. 4 m + 3 in uvec4 m), so that each product
// is a pair times a pair. NVIDIA's compiler runs a half times a pair (the
// layout above) at half the rate of a pair times a pair (bench_flops,
// bench/RESULTS.md "Prefill tiles"). The tile is nearly twice the size
// (22.5 KiB a group with the tokens' tile, against 14); the default with
// f16 tiles (ops/matmul.c default_tiles; bench/RESULTS.md "Prefill tiles").
// Same products, same order: same sums.
// VPQ: values a uvec4 of the tile holds; W_AT(a, c): value c of uvec4 a
// as the operand of its products (of type WVAL): (w, w) with DUP_W, else w.
// WSPLIT 2: a unit's values go through the tiles in two halves of PVALS 16,
// rows of 4 + 1 uvec4 with DUP_W (12 KiB a group of 128 x 64 against 22.5):
// three groups a multiprocessor instead of two (NVIDIA's GL driver gives
// a multiprocessor's groups about 48 KiB of shared memory together,
// bench/RESULTS.md "Prefill tiles"), at two more barriers a unit. The products
// and their order are the same: same sums.
#ifndef WSPLIT
#define WSPLIT 1
#endif
#define PVALS (32 / WSPLIT)  // values of a unit in the tiles at once
#ifdef DUP_W
#define VPQ 4u
#define WVAL f16vec2
#define W_AT(a, c) unpackFloat2x16((a)[c])
#else
#define VPQ 8u
#define WVAL float16_t
#define W_AT(a, c) unpackFloat2x16((a)[(c) >> 1])[(c) & 1]
#endif
#define RS4 (uint(PVALS) / VPQ + 1u)
shared uvec4 wsq[BM * RS4];
#if TN == 8
#define BVEC uvec4
#else
#define BVEC uvec2
#endif
shared BVEC xq[uint(PVALS) * TY];
#else
shared TVEC ws[BM * RS];
shared TVEC xs[BN * RS];
#endif

float x_at(uint i) { return xv[i >> 2][i & 3u]; }
#ifdef QKV
#define ACT_AT(i) x_at(i)
// token tok's cache row: with pages, that of the entry (seq << 24 | position)
// param 23 + tok (the chunk's positions are one sequence's, one after
// another), else tok (params 14 and 15 token 0's K and V)
uint kv_row(uint tok)
{
#ifdef KV_PAGE
    uint e = PARAM_U(23) + tok;
    return KV_ROW(e >> 24, e & 0xffffffu);
#else
    return tok;
#endif
}
#endif

#ifdef EXPERT
// the tile's tokens: vec4 offset of each one's x, and its entry (y's row)
shared uint s_xrow[BN], s_ent[BN];
#endif

// the tile slot of the tokens' tiles the work group reads (F16_TILES)
uint x_tile;

// vec4 offset of the x row of token tl of the work group's tile
uint x_row(uint tl)
{
#ifdef EXPERT
    return s_xrow[tl];
#else
    return PARAM_U(2) + (gl_WorkGroupID.y * BN + tl) * (W_UNITS * 8u);
#endif
}

// the tile row held by row slot s
uint slot_row(uint s)
{
#ifdef PAIRS
    return s < BM / 2u ? 2u * s : 2u * (s - BM / 2u) + 1u;
#else
    return s;
#endif
}

// the token (of the tile) of a thread's token slot j
uint slot_tok(uint ty, int j)
{
#ifdef F16_TILES
    return uint(TN) * ty + uint(j);
#else
    return ty + TY * uint(j);
#endif
}

// What an invocation stages of a unit: WPER weight units (a row slot's
// each) and XPER items of the tokens' x (a vec4 of a token; the f16 tiles
// copy TN / 4 uvec4 of the ready-made tile instead).
#define WPER ((16 * TM + WG_SIZE - 1) / WG_SIZE)
#define XPER (((WG_SIZE / 16) * TN * 8 + WG_SIZE - 1) / WG_SIZE)

// x vec4 k4 of token tl of the tile for unit u (zeros past its nt tokens)
vec4 x_vec(uint tl, uint u, uint k4, uint nt)
{
    vec4 v = vec4(0.0);
    if (tl < nt) {
        v = xv[x_row(tl) + u * 8u + k4];
#ifdef W_IS_FLOAT
        v = w_x_in_row(u, k4, v);
#endif
    }
    return v;
}

// Unit u's tiles: load_unit from memory into registers, store_part (after
// a barrier) part p of them into shared memory. UNIT_AHEAD: fetch_unit
// loads unit u's words and its tokens' tile into registers as they are,
// before the unit before it goes through the products, so that the loads
// are in flight during them; decode_unit then makes the values, where
// load_unit would have loaded them.
TVEC sw[WPER * 8];
#ifdef F16_TILES
uvec4 xw[TN / 4];
// unit u's tokens' tile (NQ uvec4): TN / 4 an invocation into xw
void load_x_tile(uint u)
{
    for (int m = 0; m < TN / 4; m++)
        xw[m] = xt[(x_tile * W_UNITS + u) * NQ + gl_LocalInvocationIndex + uint(m * WG_SIZE)];
}
#else
TVEC sx[XPER];
#endif
#ifdef UNIT_AHEAD
w_raw rw[WPER];
uint rbi[WPER];  // their blocks
void fetch_unit(uint u, uint row0, uint rows)
{
    uint t = gl_LocalInvocationIndex;
    for (int m = 0; m < WPER; m++) {
        uint sl = (t + uint(m * WG_SIZE)) % BM;
        rbi[m] = w_block(min(row0 + slot_row(sl), rows - 1u), u);
        rw[m] = w_fetch(rbi[m], u % W_UPB);
    }
    load_x_tile(u);
}
void decode_unit(uint u)
{
    for (int m = 0; m < WPER; m++) {
        f16vec4 v[8];
        w_unit_f16_r(rw[m], rbi[m], u % W_UPB, v);
        for (int k = 0; k < 8; k++)
            sw[m * 8 + k] = v[k];
    }
}
#endif
void load_unit(uint u, uint row0, uint rows, uint nt)
{
    uint t = gl_LocalInvocationIndex;
    // load everything first, then store: the loads are in flight together
    for (int m = 0; m < WPER; m++) {
        uint sl = (t + uint(m * WG_SIZE)) % BM;
#ifdef F16_TILES
        f16vec4 v[8];
        w_unit_f16(min(row0 + slot_row(sl), rows - 1u), u, v);
        for (int k = 0; k < 8; k++)
            sw[m * 8 + k] = v[k];
#else
        vec4 v[8];
        w_unit_values(min(row0 + slot_row(sl), rows - 1u), u, v);
        for (int k = 0; k < 8; k++)
            sw[m * 8 + k] = TSTORE(v[k]);
#endif
    }
#ifdef F16_TILES
    load_x_tile(u);  // (stored after the weights)
#else
    for (int m = 0; m < XPER; m++) {
        uint i = t + uint(m * WG_SIZE);
        sx[m] = TSTORE(x_vec(i / 8u, u, i % 8u, i < BN * 8u ? nt : 0u));
    }
#endif
}

void store_part(int p)
{
    uint t = gl_LocalInvocationIndex;
    for (int m = 0; m < WPER; m++) {
        uint i = t + uint(m * WG_SIZE);
        // (a test the compiler drops where the invocations cover the rows
        // exactly, the default tiling)
        if (WPER * WG_SIZE == 16 * TM || i < BM) {
#if defined(F16_TILES) && defined(DUP_W)
            for (int k = 0; k < PVALS / 4; k++) {
                f16vec4 a = sw[m * 8 + p * (PVALS / 4) + k];
                wsq[i * RS4 + uint(k)] = uvec4(packFloat2x16(a.xx), packFloat2x16(a.yy),
                                               packFloat2x16(a.zz), packFloat2x16(a.ww));
            }
#elif defined(F16_TILES)
            for (int k = 0; k < PVALS / 8; k++) {
                f16vec4 a = sw[m * 8 + p * (PVALS / 4) + 2 * k],
                        b = sw[m * 8 + p * (PVALS / 4) + 2 * k + 1];
                wsq[i * RS4 + uint(k)] = uvec4(packFloat2x16(a.xy), packFloat2x16(a.zw),
                                               packFloat2x16(b.xy), packFloat2x16(b.zw));
            }
#else
            for (int k = 0; k < 8; k++)
                ws[i * RS + uint(k)] = sw[m * 8 + k];
#endif
        }
    }
#ifdef F16_TILES
    // xq entry e (value e / TY) of part p at e - p PVALS TY
    uint pb = uint(p * PVALS) * TY, pe = pb + uint(PVALS) * TY;
    for (int m = 0; m < TN / 4; m++) {
        uint i = t + uint(m * WG_SIZE);
#if TN == 8
        if (WSPLIT == 1 || (i >= pb && i < pe))
            xq[i - pb] = xw[m];
#else
        if (WSPLIT == 1 || (2u * i >= pb && 2u * i < pe)) {
            xq[2u * i - pb] = xw[m].xy;
            xq[2u * i + 1u - pb] = xw[m].zw;
        }
#endif
    }
#else
    for (int m = 0; m < XPER; m++) {
        uint i = t + uint(m * WG_SIZE);
        if (i < BN * 8u)
            xs[(i / 8u) * RS + i % 8u] = sx[m];
    }
#endif
}

void main()
{
    uint rows = PARAM_U(0);
    uint row0 = gl_WorkGroupID.x * BM, tok0 = gl_WorkGroupID.y * BN;
    uint t = gl_LocalInvocationIndex, tx = t % TX, ty = t / TX;
#ifdef EXPERT
    // this layer's expert, its tokens of this tile (nt), their rows
    uint e = PARAM_U(23) + gl_WorkGroupID.z;
    uint cnt = uint(x_at(PARAM_U(16) + e));
    if (tok0 >= cnt)
        return;  // the whole work group
    uint nt = min(cnt - tok0, BN);
    w_row_base = gl_WorkGroupID.z * rows;
    x_tile = uint(x_at(PARAM_U(16) + 2u * PARAM_U(19) + e)) + gl_WorkGroupID.y;
    if (t < nt) {
        uint ent = uint(x_at(PARAM_U(17) + uint(x_at(PARAM_U(16) + PARAM_U(19) + e)) + tok0 + t));
        s_ent[t] = ent;
        s_xrow[t] = PARAM_U(2) + (ent / PARAM_U(21)) * (W_UNITS * 8u);
    }
    barrier();
#else
    uint nt = min(PARAM_U(4) - tok0, BN);
    x_tile = gl_WorkGroupID.y;
#endif
#if defined(F16_TILES) && WG_SIZE % 64 == 0
    // a subgroup of 32 holds 8 row slots x 4 token slots (bits 0-2 and 5 of
    // t give the row slot, bits 3-4 and 6.. the token slot)
    tx = (t & 7u) | ((t >> 2u) & 8u);
    ty = ((t >> 3u) & 3u) | ((t >> 6u) << 2u);
#endif

    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.0;
#ifdef F16_TILES
    // a row's products with a pair of tokens summed in one f16vec2, over a
    // unit or (ROW_SUMS) the whole row, then added into acc
    f16vec2 h[TM][TN / 2];
#define H_CLEAR()                                                              \
    for (int i = 0; i < TM; i++)                                               \
        for (int j = 0; j < TN / 2; j++)                                       \
            h[i][j] = f16vec2(0.0)
#define H_INTO_ACC()                                                           \
    for (int i = 0; i < TM; i++)                                               \
        for (int j = 0; j < TN / 2; j++) {                                     \
            acc[i][2 * j] += float(h[i][j].x);                                 \
            acc[i][2 * j + 1] += float(h[i][j].y);                             \
        }
    H_CLEAR();
#endif

#ifdef SLICES_SUM
    // the slices' sums at this thread's slots (param 24 slices, param 25
    // floats apart; token t's sum of global row g at t param 26 + g), then
    // the product's epilogue below
    const uint y_slice = 0u;
    for (int j = 0; j < TN; j++) {
        uint tl = slot_tok(ty, j);
        if (tl >= nt)
            continue;
        uint at = (tok0 + tl) * PARAM_U(26) + PARAM_U(1) + row0;
        for (int i = 0; i < TM; i++) {
            uint row = slot_row(tx + TX * uint(i));
            if (row0 + row >= rows)
                continue;
            for (uint s = 0u; s < PARAM_U(24); s++)
                acc[i][j] += PART_AT(s * PARAM_U(25) + at + row);
        }
    }
#else
#ifndef EXPERT
    // SLICES: work-group layer z sums units [z s, z s + s) of each row
    // (s = param 24; 0: all of them) into slice z of y, param 25 floats on
    uint u0 = gl_WorkGroupID.z * PARAM_U(24);
    uint u1 = PARAM_U(24) != 0u ? min(u0 + PARAM_U(24), W_UNITS) : W_UNITS;
    uint y_slice = gl_WorkGroupID.z * PARAM_U(25);
#else
    const uint u0 = 0u, y_slice = 0u;
    uint u1 = W_UNITS;
#endif
#ifdef UNIT_AHEAD
    if (u0 < u1)
        fetch_unit(u0, row0, rows);
#endif
    for (uint u = u0; u < u1; u++) {
#ifdef UNIT_AHEAD
        decode_unit(u);
#else
        load_unit(u, row0, rows, nt);
#endif
#ifdef F16_TILES
        for (int p = 0; p < WSPLIT; p++) {  // the unit's values in the tiles at once
            if (p > 0)
                barrier();
            store_part(p);
            barrier();
#ifdef UNIT_AHEAD
            if (p == WSPLIT - 1 && u + 1u < u1)
                fetch_unit(u + 1u, row0, rows);
#endif
            for (uint q = 0u; q < uint(PVALS) / VPQ; q++) {  // the tile's uvec4 q of each row
                // the tokens' pairs of the uvec4's VPQ values, then row slot
                // by row slot its uvec4 times them (each sum still in value
                // order)
                f16vec2 b[VPQ][TN / 2];
                for (int c = 0; c < int(VPQ); c++) {  // value VPQ q + c
                    BVEC bv = xq[(q * VPQ + uint(c)) * TY + ty];
                    for (int j = 0; j < TN / 2; j++)
                        b[c][j] = unpackFloat2x16(bv[j]);
                }
                for (int i = 0; i < TM; i++) {
                    uvec4 a = wsq[(tx + TX * uint(i)) * RS4 + q];
                    for (int c = 0; c < int(VPQ); c++) {
                        WVAL av = W_AT(a, c);
                        for (int j = 0; j < TN / 2; j++)
                            h[i][j] += av * b[c][j];
                    }
                }
            }
        }
#ifndef ROW_SUMS
        H_INTO_ACC();  // (a unit's 32 products at a time)
        H_CLEAR();
#endif
#else
        store_part(0);
        barrier();
        for (uint k4 = 0u; k4 < 8u; k4++) {
            TVEC a[TM], b[TN];
            for (int i = 0; i < TM; i++)
                a[i] = ws[(tx + TX * uint(i)) * RS + k4];
            for (int j = 0; j < TN; j++)
                b[j] = xs[(ty + TY * uint(j)) * RS + k4];
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++)
                    acc[i][j] += float(dot(a[i], b[j]));
        }
#endif
        barrier();
    }
#if defined(F16_TILES) && defined(ROW_SUMS)
    H_INTO_ACC();
#endif
#endif

    for (int j = 0; j < TN; j++) {
        uint tl = slot_tok(ty, j);
        if (tl >= nt)
            continue;
#ifdef EXPERT
        uint tok = s_ent[tl];
        float sc = (PARAM_U(22) & 2u) != 0u ? x_at(PARAM_U(18) + 2u * tok + 1u) : 1.0;
#else
        uint tok = tok0 + tl;
        const float sc = 1.0;
#endif
#ifdef QKV
        uint kvr = kv_row(tok);  // (once a token: the table read outside the row loop)
#endif
#ifdef PAIRS
        for (int i = 0; i < TM / 2; i++) {
            uint row = row0 + slot_row(tx + TX * uint(i));  // even; its pair is slot i + TM / 2
            if (row >= rows)
                continue;
            uint g = PARAM_U(1) + row;
            float a = acc[i][j], b = acc[i + TM / 2][j];
#ifdef GLU
            if (SLICED) {  // (the gate's and up's sums as they are)
                y[PARAM_U(5) + y_slice + tok * PARAM_U(6) + g] = a;
                y[PARAM_U(5) + y_slice + tok * PARAM_U(6) + g + 1u] = b;
            } else {
                y[PARAM_U(5) + tok * PARAM_U(6) + g / 2u] = GLU_ACT(a) * b;
            }
#else
            if (SLICED) {  // (Q's, K's and V's sums as they are)
                yu[y_slice + tok * PARAM_U(6) + g] = floatBitsToUint(a);
                yu[y_slice + tok * PARAM_U(6) + g + 1u] = floatBitsToUint(b);
                continue;
            }
#ifdef QKV_BIAS
            a += x_at(PARAM_U(7) + g);
            b += x_at(PARAM_U(7) + g + 1u);
#endif
            if (g < uint(Q_DIM + KV_DIM)) {
                uint cs = PARAM_U(3) + tok * uint(HEAD_DIM) + (g % uint(HEAD_DIM));
                float co = x_at(cs), si = x_at(cs + 1u);
                float a2 = a * co - b * si;
                b = a * si + b * co;
                a = a2;
            }
            if (g < uint(Q_DIM)) {
                uint f = PARAM_U(5) + tok * PARAM_U(6) + g;  // even: one half of a vec4
                if ((f & 2u) == 0u)
                    xv[f >> 2].xy = vec2(a, b);
                else
                    xv[f >> 2].zw = vec2(a, b);
            } else if (g < uint(Q_DIM + KV_DIM)) {
                yu[PARAM_U(14) + kvr * uint(KV_DIM / 2) + (g - uint(Q_DIM)) / 2u] =
                    packHalf2x16(vec2(a, b));
            } else {
                yu[PARAM_U(15) + kvr * uint(KV_DIM / 2) + (g - uint(Q_DIM + KV_DIM)) / 2u] =
                    packHalf2x16(vec2(a, b));
            }
#endif
        }
#else
        for (int i = 0; i < TM; i++) {
            uint row = row0 + tx + TX * uint(i);
            if (row >= rows)
                continue;
            uint o = PARAM_U(5) + y_slice + tok * PARAM_U(6) + PARAM_U(1) + row;
            if (Y_ADD)
                y[o] += acc[i][j] * sc;
            else
                y[o] = acc[i][j] * sc;
        }
#endif
    }
}
