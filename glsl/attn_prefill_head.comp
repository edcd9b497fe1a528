// Causal attention of a batch of new tokens (prefill) over the KV cache,
// which already holds their K and V and every earlier position's, without
// an N x N score matrix: one work group per (head, block of BQ queries)
// walks the positions in tiles of BKV, keeping a running max and sum per
// query (online softmax) and the unnormalised output in registers. The
// kernel of models whose KV heads' groups (attn_prefill.comp) would make
// too few work groups or too little work a tile (ops/attention.c).
// Query i of the batch is at position pos0 + i and sees positions <= pos0 + i
// (with a window W, the last W of them).
// Bindings: 0 the layer's cache (uint[]: K and V as packed halves,
//           [cache row][kv head][HEAD_DIM], a position's row through the
//           page table: common.glsl KV_ROW), 1 activations (float[]: the
//           page table and Q in, the output out).
// Params: 0 N queries, 1 pos0, 2 float offset of query 0's Q (heads one
//         after another, HEAD_DIM each), 3 float offset of query 0's output,
//         4 floats per query in both, 5 K uint offset, 6 V uint offset,
//         7 the window (0: none), 8 the sequence.
// Defines: WG_SIZE, HEAD_DIM (even), GROUP (query heads per KV head),
// KV_DIM, BQ, BKV (powers of two, BKV <= 2 WG_SIZE), LPQ (lanes per query:
// BQ * LPQ <= WG_SIZE, LPQ divides HEAD_DIM / 2; lane l of a query owns
// output dimensions DPT l .. DPT l + DPT - 1); SCORE_SCALE and SOFTCAP as
// attention.comp's.
// A tile's scores: thread (qq, jj) of a QT x JT grid takes SQ queries
// (qq + QT a) x SJ positions (jj + JT b), its SQ SJ dot products sharing
// each load of a pair of K values and of Q (SJ 2 where a tile has at least
// 2 WG_SIZE scores, else 1). Then every lane of a query reads the query's
// BKV scores and keeps the running max and sum itself (the same values in
// each lane): no serial pass and no barrier between the softmax and the
// output (bench/RESULTS.md "Prefill attention").
#pragma optionNV(unroll all)
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer L { uint lb[]; };
layout(std430, binding = 1) restrict buffer A { float act[]; };

#define ACT_AT(i) act[i]

#define H2I (HEAD_DIM / 2)
#define KSI (H2I + 1)              // padded row of a K/V tile, uints
#define DPTI (HEAD_DIM / LPQ)      // output dimensions per lane
#define H2 uint(H2I)
#define KS uint(KSI)
#define DPT uint(DPTI)

shared float qs[BQ * HEAD_DIM];
shared uint ks[BKV * KSI];
shared uint vs[BKV * KSI];
shared float ps[BQ * BKV];

#if BQ * BKV >= 2 * WG_SIZE
#define SJ 2
#else
#define SJ 1
#endif
#define JT (BKV / SJ)                                   // position slots
#define QT (BQ < WG_SIZE / JT ? BQ : WG_SIZE / JT)      // query slots
#define SQ (BQ / QT)                                    // queries a thread

void main()
{
    uint h = gl_WorkGroupID.x, qb = gl_WorkGroupID.y * uint(BQ);
    uint t = gl_LocalInvocationIndex;
    uint n = PARAM_U(0), pos0 = PARAM_U(1), stride = PARAM_U(4);
    uint kvo = (h / uint(GROUP)) * H2;  // the KV head within a cache row, uints
#ifdef SCORE_SCALE
    float scale = SCORE_SCALE;
#else
    float scale = inversesqrt(float(HEAD_DIM));
#endif
    for (uint i = t; i < uint(BQ * HEAD_DIM); i += uint(WG_SIZE)) {
        uint q = i / uint(HEAD_DIM), d = i % uint(HEAD_DIM);
        qs[i] = qb + q < n ? act[PARAM_U(2) + (qb + q) * stride + h * uint(HEAD_DIM) + d] * scale
                           : 0.0;
    }
    uint kv_end = pos0 + min(qb + uint(BQ), n);  // positions this block's queries see
    uint w = PARAM_U(7), pos_b = pos0 + qb;  // (the block's first query: the lowest window)
    uint kv_lo = w != 0u && pos_b + 1u > w ? (pos_b + 1u - w) / uint(BKV) * uint(BKV) : 0u;

    // this lane's query and output dimensions (lanes past BQ * LPQ only help load)
    uint mq = t / uint(LPQ), d0 = (t % uint(LPQ)) * DPT;
    bool owner = mq < uint(BQ);
    float o[DPTI];
    for (uint d = 0u; d < DPT; d++)
        o[d] = 0.0;
    float m = -1.0e30, l = 0.0;  // running max and sum (each lane of the query keeps them)

    for (uint p0 = kv_lo; p0 < kv_end; p0 += uint(BKV)) {
        barrier();  // the previous tile is consumed
#if KV_PAGE % BKV == 0
        // (tiles start at multiples of BKV: a tile lies in one page)
        uint tile_row = KV_ROW(PARAM_U(8), p0);
#endif
        for (uint i = t; i < uint(BKV) * H2; i += uint(WG_SIZE)) {
            uint j = i / H2, d2 = i % H2, p = p0 + j;
            uint kk = 0u, vv = 0u;
            if (p < kv_end) {
#if KV_PAGE % BKV == 0
                uint off = (tile_row + j) * uint(KV_DIM / 2) + kvo + d2;
#else
                uint off = KV_ROW(PARAM_U(8), p) * uint(KV_DIM / 2) + kvo + d2;
#endif
                kk = lb[PARAM_U(5) + off];
                vv = lb[PARAM_U(6) + off];
            }
            ks[j * KS + d2] = kk;
            vs[j * KS + d2] = vv;
        }
        barrier();
        if (t < uint(QT * JT)) {
            uint qq = t / uint(JT), jj = t % uint(JT);
            float s[SQ][SJ];
            for (int a = 0; a < SQ; a++)
                for (int b = 0; b < SJ; b++)
                    s[a][b] = 0.0;
            for (uint d2 = 0u; d2 < H2; d2++) {
                vec2 k[SJ];
                for (int b = 0; b < SJ; b++)
                    k[b] = unpackHalf2x16(ks[(jj + uint(JT * b)) * KS + d2]);
                for (int a = 0; a < SQ; a++) {
                    uint qi = (qq + uint(QT * a)) * uint(HEAD_DIM) + 2u * d2;
                    vec2 qv = vec2(qs[qi], qs[qi + 1u]);
                    for (int b = 0; b < SJ; b++)
                        s[a][b] += dot(qv, k[b]);
                }
            }
            for (int a = 0; a < SQ; a++)
                for (int b = 0; b < SJ; b++) {
                    uint q = qq + uint(QT * a), j = jj + uint(JT * b), pq = pos_b + q;
                    // causal (also keeps p0 + j < kv_end), and within the window
                    bool seen = p0 + j <= pq && (w == 0u || p0 + j + w > pq);
#ifdef SOFTCAP
                    s[a][b] = SOFTCAP * tanh(s[a][b] / SOFTCAP);
#endif
                    ps[q * uint(BKV) + j] = seen ? s[a][b] : -1.0e30;
                }
        }
        barrier();
        if (owner) {
            // the running max and sum, in every lane of the query
            float mx = m;
            for (uint j = 0u; j < uint(BKV); j++)
                mx = max(mx, ps[mq * uint(BKV) + j]);
            float a = exp(m - mx);
            m = mx;
            l *= a;
            for (uint d = 0u; d < DPT; d++)
                o[d] *= a;
            for (uint j = 0u; j < uint(BKV); j++) {
                float sj = ps[mq * uint(BKV) + j];
                float pj = sj > -1.0e29 ? exp(sj - mx) : 0.0;
                l += pj;
                for (uint d = 0u; d < DPT; d += 2u) {
                    vec2 v = unpackHalf2x16(vs[j * KS + (d0 + d) / 2u]);
                    o[d] += pj * v.x;
                    o[d + 1u] += pj * v.y;
                }
            }
        }
    }
    if (owner && qb + mq < n) {
        float inv = 1.0 / l;
        uint base = PARAM_U(3) + (qb + mq) * stride + h * uint(HEAD_DIM) + d0;
        for (uint d = 0u; d < DPT; d++)
            act[base + d] = o[d] * inv;
    }
}
