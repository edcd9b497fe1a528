// Y = X W^T for a batch of tokens (prefill): for every token t < N and
// every row r of the weight, y[t][r] = sum_c W[r][c] x[t][c], f32
// accumulation.
// Bindings: 0 weights (weights.glsl), 1 x (vec4[]: the activation buffer;
//           written too by QKV), 2 y (float[]; QKV: the layer's KV cache as
//           uint[]).
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
// per thread) and copy the BN tokens' 32 values beside them, then each
// thread accumulates TM rows x TN tokens as vec4 outer products. Threads are
// a TX x TY grid (TX = 16); thread (tx, ty) holds rows 4 tx + 4 TX i + 0..3
// (i < TM / 4) and tokens 4 ty + 4 TY j + 0..3 (j < TN / 4), so GLU/QKV row
// pairs stay in one thread.
// Defines: WG_SIZE (= TX * TY), TM, TN (4 or 8), WTYPE_<type>; HALF_TILES:
// the tiles and products in mediump (f16 where the driver has it), the sums
// in highp.
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

#define TX 16u
#define TY (uint(WG_SIZE) / TX)
#define BM (TX * uint(TM))
#define BN (TY * uint(TN))
#define MI (TM / 4)
#define NJ (TN / 4)

#ifdef HALF_TILES
#define TVEC mediump vec4
#define TFLOAT mediump float
#else
#define TVEC vec4
#define TFLOAT float
#endif

// [k][row] and [k][token], k the value within the unit, four rows / tokens a vec4
shared TVEC ws[32u * BM / 4u];
shared TVEC xs[32u * BN / 4u];

float x_at(uint i) { return xv[i >> 2][i & 3u]; }

void main()
{
    uint rows = PARAM_U(0), n_tok = PARAM_U(4);
    uint row0 = gl_WorkGroupID.x * BM, tok0 = gl_WorkGroupID.y * BN;
    uint t = gl_LocalInvocationIndex, tx = t % TX, ty = t / TX;
    uint xstride = W_UNITS * 8u, xo = PARAM_U(2);

    vec4 acc[TM][NJ];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < NJ; j++)
            acc[i][j] = vec4(0.0);

    for (uint u = 0u; u < W_UNITS; u++) {
        // the weight tile: one row's unit per thread
        for (uint r = t; r < BM; r += uint(WG_SIZE)) {
            vec4 v[8];
            w_unit_values(min(row0 + r, rows - 1u), u, v);
            for (int k = 0; k < 8; k++) {
                uint c = uint((k & 3) * 4 + (k >> 2) * 16);
                for (int j = 0; j < 4; j++) {
                    uint s = (c + uint(j)) * BM + r;
                    ws[s >> 2][s & 3u] = v[k][j];
                }
            }
        }
        // the tokens' tile: consecutive threads take consecutive tokens
        for (uint i = t; i < BN * 8u; i += uint(WG_SIZE)) {
            uint tok = i % BN, k4 = i / BN;
            vec4 v = vec4(0.0);
            if (tok0 + tok < n_tok) {
                v = xv[xo + (tok0 + tok) * xstride + u * 8u + k4];
#ifdef W_IS_FLOAT
                uvec4 idx = u * 32u + k4 * 4u + uvec4(0u, 1u, 2u, 3u);
                v = mix(vec4(0.0), v, lessThan(idx, uvec4(W_COLS)));
#endif
            }
            for (int j = 0; j < 4; j++) {
                uint s = (k4 * 4u + uint(j)) * BN + tok;
                xs[s >> 2][s & 3u] = v[j];
            }
        }
        barrier();
        for (uint k = 0u; k < 32u; k++) {
            TVEC a[MI], b[NJ];
            for (int i = 0; i < MI; i++)
                a[i] = ws[k * (BM / 4u) + tx + TX * uint(i)];
            for (int j = 0; j < NJ; j++)
                b[j] = xs[k * (BN / 4u) + ty + TY * uint(j)];
            for (int i = 0; i < MI; i++)
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < NJ; j++)
                        acc[i * 4 + r][j] += vec4(a[i][r] * b[j]);
        }
        barrier();
    }

    for (int i = 0; i < MI; i++) {
        uint rbase = row0 + 4u * tx + 4u * TX * uint(i);
        for (int j = 0; j < NJ; j++) {
            for (int c = 0; c < 4; c++) {
                uint tok = tok0 + 4u * ty + 4u * TY * uint(j) + uint(c);
                if (tok >= n_tok)
                    continue;
#if defined(GLU) || defined(QKV)
                for (int r = 0; r < 4; r += 2) {
                    uint row = rbase + uint(r);
                    if (row >= rows)
                        continue;
                    uint g = PARAM_U(1) + row;
                    float a = acc[i * 4 + r][j][c], b = acc[i * 4 + r + 1][j][c];
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
                for (int r = 0; r < 4; r++) {
                    uint row = rbase + uint(r);
                    if (row >= rows)
                        continue;
                    uint o = PARAM_U(5) + tok * PARAM_U(6) + PARAM_U(1) + row;
#ifdef ADD_Y
                    y[o] += acc[i * 4 + r][j][c];
#else
                    y[o] = acc[i * 4 + r][j][c];
#endif
                }
#endif
            }
        }
    }
}
