// Causal attention of a batch of new tokens (prefill) over the KV cache,
// which already holds their K and V and every earlier position's, without
// an N x N score matrix: one work group per (head, block of BQ queries)
// walks the positions in tiles of BKV, keeping a running max and sum per
// query (online softmax) and the unnormalised output in registers.
// Query i of the batch is at position pos0 + i and sees positions <= pos0 + i.
// Bindings: 0 the layer's cache (uint[]: K and V as packed halves,
//           [position][kv head][HEAD_DIM]), 1 activations (float[]: Q in,
//           the output out).
// Params: 0 N queries, 1 pos0, 2 float offset of query 0's Q (heads one
//         after another, HEAD_DIM each), 3 float offset of query 0's output,
//         4 floats per query in both, 5 K uint offset, 6 V uint offset.
// Defines: WG_SIZE, HEAD_DIM (even), GROUP (query heads per KV head),
// KV_DIM, BQ, BKV, LPQ (lanes per query: BQ * LPQ <= WG_SIZE, LPQ divides
// HEAD_DIM / 2; lane l of a query owns output dimensions DPT l .. DPT l + DPT - 1).
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer L { uint lb[]; };
layout(std430, binding = 1) restrict buffer A { float act[]; };

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
shared float alpha_s[BQ];

void main()
{
    uint h = gl_WorkGroupID.x, qb = gl_WorkGroupID.y * uint(BQ);
    uint t = gl_LocalInvocationIndex;
    uint n = PARAM_U(0), pos0 = PARAM_U(1), stride = PARAM_U(4);
    uint kvo = (h / uint(GROUP)) * H2;  // the KV head within a cache row, uints
    float scale = inversesqrt(float(HEAD_DIM));
    for (uint i = t; i < uint(BQ * HEAD_DIM); i += uint(WG_SIZE)) {
        uint q = i / uint(HEAD_DIM), d = i % uint(HEAD_DIM);
        qs[i] = qb + q < n ? act[PARAM_U(2) + (qb + q) * stride + h * uint(HEAD_DIM) + d] * scale
                           : 0.0;
    }
    uint kv_end = pos0 + min(qb + uint(BQ), n);  // positions this block's queries see

    // this lane's query and output dimensions (lanes past BQ * LPQ only help load)
    uint mq = t / uint(LPQ), d0 = (t % uint(LPQ)) * DPT;
    bool owner = mq < uint(BQ);
    float o[DPTI];
    for (uint d = 0u; d < DPT; d++)
        o[d] = 0.0;
    float m = -1.0e30, l = 0.0;  // running max and sum (kept by the query's lanes)

    for (uint p0 = 0u; p0 < kv_end; p0 += uint(BKV)) {
        barrier();  // the previous tile is consumed
        for (uint i = t; i < uint(BKV) * H2; i += uint(WG_SIZE)) {
            uint j = i / H2, d2 = i % H2, p = p0 + j;
            uint kk = 0u, vv = 0u;
            if (p < kv_end) {
                uint off = p * uint(KV_DIM / 2) + kvo + d2;
                kk = lb[PARAM_U(5) + off];
                vv = lb[PARAM_U(6) + off];
            }
            ks[j * KS + d2] = kk;
            vs[j * KS + d2] = vv;
        }
        barrier();
        for (uint e = t; e < uint(BQ * BKV); e += uint(WG_SIZE)) {
            uint q = e / uint(BKV), j = e % uint(BKV);
            float s = -1.0e30;
            if (p0 + j <= pos0 + qb + q) {  // causal (also keeps p0 + j < kv_end)
                s = 0.0;
                for (uint d2 = 0u; d2 < H2; d2++) {
                    vec2 k = unpackHalf2x16(ks[j * KS + d2]);
                    s += qs[q * uint(HEAD_DIM) + 2u * d2] * k.x +
                         qs[q * uint(HEAD_DIM) + 2u * d2 + 1u] * k.y;
                }
            }
            ps[e] = s;
        }
        barrier();
        // softmax bookkeeping: one lane per query
        if (t < uint(BQ)) {
            float mx = m;
            for (uint j = 0u; j < uint(BKV); j++)
                mx = max(mx, ps[t * uint(BKV) + j]);
            float sum = 0.0;
            for (uint j = 0u; j < uint(BKV); j++) {
                float s = ps[t * uint(BKV) + j];
                float e = s > -1.0e29 ? exp(s - mx) : 0.0;
                ps[t * uint(BKV) + j] = e;
                sum += e;
            }
            float a = exp(m - mx);
            alpha_s[t] = a;
            m = mx;
            l = l * a + sum;
        }
        barrier();
        if (owner) {
            float a = alpha_s[mq];
            for (uint d = 0u; d < DPT; d++)
                o[d] *= a;
            for (uint j = 0u; j < uint(BKV); j++) {
                float pj = ps[mq * uint(BKV) + j];
                for (uint d = 0u; d < DPT; d += 2u) {
                    vec2 v = unpackHalf2x16(vs[j * KS + (d0 + d) / 2u]);
                    o[d] += pj * v.x;
                    o[d + 1u] += pj * v.y;
                }
            }
        }
    }
    // the sums live with lanes t < BQ: pass them on through shared memory
    barrier();
    if (t < uint(BQ))
        alpha_s[t] = l;
    barrier();
    if (owner && qb + mq < n) {
        float inv = 1.0 / alpha_s[mq];
        uint base = PARAM_U(3) + (qb + mq) * stride + h * uint(HEAD_DIM) + d0;
        for (uint d = 0u; d < DPT; d++)
            act[base + d] = o[d] * inv;
    }
}
