// Causal attention of a batch of new tokens (prefill) over the KV cache,
// which already holds their K and V and every earlier position's, without
// an N x N score matrix: one work group per (KV head, block of BQ queries)
// takes the GROUP query heads that share the KV head, so that its rows are
// R = BQ GROUP (query, head) pairs and each K/V tile it loads serves all of
// them. It walks the positions in tiles of BKV, keeping a running max and
// sum per row (online softmax) and the unnormalised output in registers.
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
// KV_DIM, BQ, BKV (divides WG_SIZE), SQ (rows a thread's scores: at least
// R BKV / WG_SIZE), LPR (lanes per row: R LPR <= WG_SIZE); SCORE_SCALE and
// SOFTCAP as attention.comp's.
// Row r is query r / GROUP of the block and head GROUP x + r % GROUP.
// Each tile goes through two phases, a barrier apart:
// - scores: thread (qq, jj) of a QT x BKV grid takes SQ rows (qq + QT a)
//   at position jj, each load of a pair of K values serving SQ
//   multiply-adds;
// - output: the LPR lanes of a row each keep the row's running max and sum
//   (the same values in each) and own HEAD_DIM / (2 LPR) pairs of output
//   dimensions (lane l pairs l, l + LPR, ...: neighbouring lanes read
//   neighbouring V pairs). With many rows LPR is small (2 at 64 rows), so
//   the exps each lane repeats cost less than a phase of their own did.
// K and V are staged as f32 pairs, converted once a tile rather than once a
// row (bench/RESULTS.md "Prefill attention").
#pragma optionNV(unroll all)
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer L { uint lb[]; };
layout(std430, binding = 1) restrict buffer A { float act[]; };

#define ACT_AT(i) act[i]

#define R (BQ * GROUP)             // rows: (query, head) pairs
#define H2I (HEAD_DIM / 2)
#define KSI (H2I + 1)              // padded row of a K/V tile, pairs
#define PSI (BKV + 1)              // padded row of the scores
#define PPLI (H2I / LPR)           // output pairs per lane
#define H2 uint(H2I)
#define KS uint(KSI)
#define PS uint(PSI)

shared vec2 qs[R * H2I];
shared vec2 ks[BKV * KSI];
shared vec2 vs[BKV * KSI];
shared float ps[R * PSI];

#define QT (WG_SIZE / BKV)         // row slots

// A tile's K and V words, NLD an invocation: loaded a tile ahead into
// registers, stored into the tiles after the barrier
#define NLD ((BKV * H2I + WG_SIZE - 1) / WG_SIZE)
uint kr[NLD], vr[NLD];
void fetch_tile(uint p0, uint kv_end)
{
    uint t = gl_LocalInvocationIndex, kvo = gl_WorkGroupID.x * H2;
#if KV_PAGE % BKV == 0
    // (tiles start at multiples of BKV: a tile lies in one page)
    uint tile_row = KV_ROW(PARAM_U(8), p0);
#endif
    for (int m = 0; m < NLD; m++) {
        uint i = t + uint(m * WG_SIZE), j = i / H2, d2 = i % H2, p = p0 + j;
        kr[m] = 0u;
        vr[m] = 0u;
        if (p < kv_end && i < uint(BKV) * H2) {
#if KV_PAGE % BKV == 0
            uint off = (tile_row + j) * uint(KV_DIM / 2) + kvo + d2;
#else
            uint off = KV_ROW(PARAM_U(8), p) * uint(KV_DIM / 2) + kvo + d2;
#endif
            kr[m] = lb[PARAM_U(5) + off];
            vr[m] = lb[PARAM_U(6) + off];
        }
    }
}

void main()
{
    uint kvh = gl_WorkGroupID.x, qb = gl_WorkGroupID.y * uint(BQ);
    uint t = gl_LocalInvocationIndex;
    uint n = PARAM_U(0), pos0 = PARAM_U(1), stride = PARAM_U(4);
#ifdef SCORE_SCALE
    float scale = SCORE_SCALE;
#else
    float scale = inversesqrt(float(HEAD_DIM));
#endif
    // row r's Q: query qb + r / GROUP, head kvh GROUP + r % GROUP
    for (uint i = t; i < uint(R) * H2; i += uint(WG_SIZE)) {
        uint r = i / H2, d2 = i % H2, q = qb + r / uint(GROUP);
        uint at = PARAM_U(2) + q * stride + (kvh * uint(GROUP) + r % uint(GROUP)) * uint(HEAD_DIM) +
                  2u * d2;
        qs[i] = q < n ? vec2(act[at], act[at + 1u]) * scale : vec2(0.0);
    }
    uint kv_end = pos0 + min(qb + uint(BQ), n);  // positions this block's queries see
    uint w = PARAM_U(7), pos_b = pos0 + qb;  // (the block's first query: the lowest window)
    uint kv_lo = w != 0u && pos_b + 1u > w ? (pos_b + 1u - w) / uint(BKV) * uint(BKV) : 0u;

    float m = -1.0e30, l = 0.0;  // the output row's running max and sum
    // the output phase's row and lane (lanes past R LPR only help)
    uint mr = t / uint(LPR), ln = t % uint(LPR);
    bool owner = mr < uint(R);
    vec2 o[PPLI];
    for (int i = 0; i < PPLI; i++)
        o[i] = vec2(0.0);

    fetch_tile(kv_lo, kv_end);
    for (uint p0 = kv_lo; p0 < kv_end; p0 += uint(BKV)) {
        barrier();  // the previous tile is consumed
        for (int e = 0; e < NLD; e++) {
            uint i = t + uint(e * WG_SIZE);
            if (NLD * WG_SIZE == BKV * H2I || i < uint(BKV) * H2) {
                uint at = (i / H2) * KS + i % H2;
                ks[at] = unpackHalf2x16(kr[e]);
                vs[at] = unpackHalf2x16(vr[e]);
            }
        }
        // the next tile's loads in flight through this one's arithmetic
        if (p0 + uint(BKV) < kv_end)
            fetch_tile(p0 + uint(BKV), kv_end);
        barrier();
        if (t < uint(QT * BKV)) {
            uint qq = t / uint(BKV), j = t % uint(BKV);
            float s[SQ];
            for (int a = 0; a < SQ; a++)
                s[a] = 0.0;
            for (uint d2 = 0u; d2 < H2; d2++) {
                vec2 k = ks[j * KS + d2];
                for (int a = 0; a < SQ; a++)  // (rows past R, where QT SQ > R, read row R - 1)
                    s[a] += dot(qs[min(qq + uint(QT * a), uint(R) - 1u) * H2 + d2], k);
            }
            for (int a = 0; a < SQ; a++) {
                uint r = qq + uint(QT * a), pq = pos_b + r / uint(GROUP);
                if (r >= uint(R))
                    continue;
                // causal (also keeps p0 + j < kv_end), and within the window
                bool seen = p0 + j <= pq && (w == 0u || p0 + j + w > pq);
#ifdef SOFTCAP
                s[a] = SOFTCAP * tanh(s[a] / SOFTCAP);
#endif
                ps[r * PS + j] = seen ? s[a] : -1.0e30;
            }
        }
        barrier();
        if (owner) {
            // the row's running max and sum, in each of its lanes
            float mx = m;
            for (uint j = 0u; j < uint(BKV); j++)
                mx = max(mx, ps[mr * PS + j]);
            float a = exp(m - mx);
            m = mx;
            l *= a;
            for (int i = 0; i < PPLI; i++)
                o[i] *= a;
            for (uint j = 0u; j < uint(BKV); j++) {
                float sj = ps[mr * PS + j];
                float pj = sj > -1.0e29 ? exp(sj - mx) : 0.0;  // (none seen yet: mx is -1e30 too)
                l += pj;
                for (int i = 0; i < PPLI; i++)
                    o[i] += pj * vs[j * KS + ln + uint(LPR * i)];
            }
        }
    }
    uint q = qb + mr / uint(GROUP);
    if (owner && q < n) {
        float inv = 1.0 / l;  // (every row sees its own position: l > 0)
        uint base = PARAM_U(3) + q * stride + (kvh * uint(GROUP) + mr % uint(GROUP)) * uint(HEAD_DIM);
        for (int i = 0; i < PPLI; i++) {
            uint d = 2u * (ln + uint(LPR * i));
            act[base + d] = o[i].x * inv;
            act[base + d + 1u] = o[i].y * inv;
        }
    }
}
