// Y = X W^T for a batch of tokens (prefill): for every token t < N and
// every row r of the weight, y[t][r] = sum_c W[r][c] x[t][c], f32
// accumulation.
// Bindings: 0 weights (weights.glsl), 1 x (vec4[]: the activation buffer;
//           written too by QKV), 2 y (float[]; QKV: the layer's KV cache as
//           uint[]), 3 (X_TILES) the tokens' tiles (x_tiles.comp).
// Params: 0 rows in this dispatch (one weight part), 1 global row of its
//         first row, 2 vec4 offset of token 0's x (token t at + t * W_UNITS * 8:
//         activation rows are padded to 32 values), 4 N tokens,
//         5 float offset in y of token 0 (QKV: of Q in x's buffer),
//         6 y floats per token (QKV: Q floats per token), 8..13 the weight
//         planes (weights.glsl). QKV only: 3 float offset of token 0's row of
//         the RoPE table (HEAD_DIM floats per token), 7 float offset of the
//         Q|K|V biases, 14 / 15 uint offsets of token 0's K / V in the cache
//         (KV_DIM / 2 uints per token).
// Epilogues (as matvec.comp): none: y = result; ADD_Y: y += result; GLU: rows
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
// dequantized in f16 arithmetic (w_unit_f16), the tokens' tile is held by
// value instead (value k of tokens 2 p and 2 p + 1 an f16vec2, at the
// swizzled x_idx(k, p)), the token slots of thread (tx, ty) are the pairs
// ty + TY j (j < TN / 2), and each product is a weight times a pair of
// tokens (a packed f16 multiply-add).
// With PAIRS (GLU, QKV) slot s < BM / 2 holds row 2 s of the tile and slot
// s + BM / 2 row 2 s + 1, so a thread's slots i and i + TM / 2 are a pair of
// rows.
// Defines: WG_SIZE (= TX * TY), TM, TN (4 or 8), WTYPE_<type>; HALF_TILES:
// the tiles and products in mediump (f16 where the driver has it), the sums
// in highp; F16_TILES (GL_NV_gpu_shader5): the tiles in f16 and each unit's
// 32 products of a row and a token added up in f16, then into the f32 sums;
// F16_TILES_F32: the same kernel in f32 (below); X_TILES (with F16_TILES):
// the tokens' tile comes ready-made from binding 3 (x_tiles.comp's layout,
// made once for the product), copied into shared memory as it is, instead of
// converted from x by every row block.
#pragma optionNV(unroll all)
#if defined(F16_TILES_F32)
// F16_TILES's code with f32 types and arithmetic, for a driver without f16
// types: the tests check its indexing on llvmpipe (weights.c matmul_build)
#define F16_TILES 1
#define float16_t float
#define f16vec2 vec2
#define f16vec4 vec4
#define unpackFloat2x16 unpackHalf2x16
#define packFloat2x16 packHalf2x16
#elif defined(F16_TILES)
#extension GL_NV_gpu_shader5 : require
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
#ifdef X_TILES
// x_tiles.comp's tiles: NQ uvec4 a tile (BN tokens of one unit), tile (b, u)
// at (b W_UNITS + u) NQ
layout(std430, binding = 3) readonly restrict buffer XT { uvec4 xt[]; };
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

shared TVEC ws[BM * RS];
#ifdef F16_TILES
// the tokens' tile by value: xp[x_idx(k, p)] holds value k of tokens 2 p
// and 2 p + 1
shared f16vec2 xp[32u * (BN / 2u)];

// Where value k (of the unit) of token pair p sits in xp. Staging, the 32
// invocations of a subgroup write values 4 (i % 8) + c of pairs i / 8 (c
// fixed): unswizzled, a row of BN / 2 = 16 words, the eight values fell on
// one bank (8-way conflicts). Flipping the lowest bit of k for k >= 16 and
// XOR-ing p with 4 ((k / 4) % 4) puts them on 32 banks; the compute loop's
// k is a constant there, so reading costs nothing more. On an H100 the
// matmul (14336x4096 Q4_0, 512 tokens) went 1420 -> 1354 us
// (bench/RESULTS.md, session 14).
uint x_idx(uint k, uint p)
{
#ifdef X_TILES
    // copied as x_tiles.comp lays it out (a subgroup's stores are 32
    // consecutive words): value k of pair p at k BN / 2 + p. The compute
    // loop's reads at one k are two addresses a subgroup, a broadcast
    // whatever the layout.
    return k * (BN / 2u) + p;
#endif
    return (k ^ ((k >> 4u) & 1u)) * (BN / 2u) + (p ^ ((((k >> 2u) & 3u) << 2u) & (BN / 2u - 1u)));
}
#else
shared TVEC xs[BN * RS];
#endif

float x_at(uint i) { return xv[i >> 2][i & 3u]; }

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
    return 2u * (ty + TY * uint(j / 2)) + uint(j & 1);
#else
    return ty + TY * uint(j);
#endif
}

// What an invocation stages of a unit: WPER weight units (a row slot's
// each) and XPER items of the tokens' x (a vec4 of a token; f16: of two).
#define WPER ((16 * TM + WG_SIZE - 1) / WG_SIZE)
#ifdef F16_TILES
#define XPER (((WG_SIZE / 16) * TN * 4 + WG_SIZE - 1) / WG_SIZE)
#else
#define XPER (((WG_SIZE / 16) * TN * 8 + WG_SIZE - 1) / WG_SIZE)
#endif

// x vec4 k4 of token tok of the tile for unit u (zeros past the tokens)
vec4 x_vec(uint tok, uint u, uint k4, uint n_tok)
{
    vec4 v = vec4(0.0);
    if (tok < n_tok) {
        v = xv[PARAM_U(2) + tok * (W_UNITS * 8u) + u * 8u + k4];
#ifdef W_IS_FLOAT
        v = w_x_in_row(u, k4, v);
#endif
    }
    return v;
}

// Unit u's tiles, from memory into shared memory (after a barrier)
void stage_unit(uint u, uint row0, uint rows, uint tok0, uint n_tok)
{
    uint t = gl_LocalInvocationIndex;
    // load everything first, then store: the loads are in flight together
    TVEC sw[WPER * 8];
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
#if defined(X_TILES)
    // NQ = WG_SIZE TN / 4 uvec4 a tile: TN / 4 an invocation, loaded now and
    // stored after the weights
#define NQ (4u * BN)
    uvec4 xw[TN / 4];
    for (int m = 0; m < TN / 4; m++)
        xw[m] = xt[(gl_WorkGroupID.y * W_UNITS + u) * NQ + t + uint(m * WG_SIZE)];
#elif defined(F16_TILES)
    vec4 x2[XPER][2];
    for (int m = 0; m < XPER; m++) {
        uint i = t + uint(m * WG_SIZE), p = i / 8u, k4 = i % 8u;
        for (int e = 0; e < 2; e++)
            x2[m][e] = x_vec(tok0 + 2u * p + uint(e), u, k4, p < BN / 2u ? n_tok : 0u);
    }
#else
    TVEC sx[XPER];
    for (int m = 0; m < XPER; m++) {
        uint i = t + uint(m * WG_SIZE);
        sx[m] = TSTORE(x_vec(tok0 + i / 8u, u, i % 8u, i < BN * 8u ? n_tok : 0u));
    }
#endif
    for (int m = 0; m < WPER; m++) {
        uint i = t + uint(m * WG_SIZE);
        // (a test the compiler drops where the invocations cover the rows
        // exactly, the default tiling: pp512 of Mistral-7B Q4_0 2837.6 ->
        // 2845.5 tok/s on an H200, bench/RESULTS.md session 30)
        if (WPER * WG_SIZE == 16 * TM || i < BM)
            for (int k = 0; k < 8; k++)
                ws[i * RS + uint(k)] = sw[m * 8 + k];
    }
#ifdef X_TILES
    for (int m = 0; m < TN / 4; m++)
        for (int c = 0; c < 4; c++)
            xp[uint(c) * NQ + t + uint(m * WG_SIZE)] = unpackFloat2x16(xw[m][c]);
#else
    for (int m = 0; m < XPER; m++) {
        uint i = t + uint(m * WG_SIZE);
#ifdef F16_TILES
        uint p = i / 8u, k = (i % 8u) * 4u;  // vec4 k4 holds values 4 k4 .. 4 k4 + 3
        if (p < BN / 2u)
            for (int c = 0; c < 4; c++)
                xp[x_idx(k + uint(c), p)] = f16vec2(x2[m][0][c], x2[m][1][c]);
#else
        if (i < BN * 8u)
            xs[(i / 8u) * RS + i % 8u] = sx[m];
#endif
    }
#endif
}

void main()
{
    uint rows = PARAM_U(0), n_tok = PARAM_U(4);
    uint row0 = gl_WorkGroupID.x * BM, tok0 = gl_WorkGroupID.y * BN;
    uint t = gl_LocalInvocationIndex, tx = t % TX, ty = t / TX;

    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.0;

    for (uint u = 0u; u < W_UNITS; u++) {
        stage_unit(u, row0, rows, tok0, n_tok);
        barrier();
#ifdef F16_TILES
        // a row's products with a pair of tokens over the unit in one
        // f16vec2 (an f16 sum of 32 products), then into the f32 sums
        f16vec2 h[TM][TN / 2];
        for (int i = 0; i < TM; i++)
            for (int j = 0; j < TN / 2; j++)
                h[i][j] = f16vec2(0.0);
        for (uint k4 = 0u; k4 < 8u; k4++) {
            f16vec4 a[TM];
            for (int i = 0; i < TM; i++)
                a[i] = ws[(tx + TX * uint(i)) * RS + k4];
            for (int c = 0; c < 4; c++) {  // value 4 k4 + c
                f16vec2 b[TN / 2];
                for (int j = 0; j < TN / 2; j++)
                    b[j] = xp[x_idx(k4 * 4u + uint(c), ty + TY * uint(j))];
                for (int i = 0; i < TM; i++)
                    for (int j = 0; j < TN / 2; j++)
                        h[i][j] += a[i][c] * b[j];
            }
        }
        for (int i = 0; i < TM; i++)
            for (int j = 0; j < TN / 2; j++) {
                acc[i][2 * j] += float(h[i][j].x);
                acc[i][2 * j + 1] += float(h[i][j].y);
            }
#else
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

    for (int j = 0; j < TN; j++) {
        uint tok = tok0 + slot_tok(ty, j);
        if (tok >= n_tok)
            continue;
#ifdef PAIRS
        for (int i = 0; i < TM / 2; i++) {
            uint row = row0 + slot_row(tx + TX * uint(i));  // even; its pair is slot i + TM / 2
            if (row >= rows)
                continue;
            uint g = PARAM_U(1) + row;
            float a = acc[i][j], b = acc[i + TM / 2][j];
#ifdef GLU
            y[PARAM_U(5) + tok * PARAM_U(6) + g / 2u] = a / (1.0 + exp(-a)) * b;
#else
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
                yu[PARAM_U(14) + tok * uint(KV_DIM / 2) + (g - uint(Q_DIM)) / 2u] =
                    packHalf2x16(vec2(a, b));
            } else {
                yu[PARAM_U(15) + tok * uint(KV_DIM / 2) + (g - uint(Q_DIM + KV_DIM)) / 2u] =
                    packHalf2x16(vec2(a, b));
            }
#endif
        }
#else
        for (int i = 0; i < TM; i++) {
            uint row = row0 + tx + TX * uint(i);
            if (row >= rows)
                continue;
            uint o = PARAM_U(5) + tok * PARAM_U(6) + PARAM_U(1) + row;
#ifdef ADD_Y
            y[o] += acc[i][j];
#else
            y[o] = acc[i][j];
#endif
        }
#endif
    }
}
