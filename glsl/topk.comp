// The K largest logits with their ids, so a sampling step reads back a few
// hundred values instead of the vocabulary. Two dispatches:
//   first: every work group takes a slice of WG_SIZE * PER_THREAD logits and
//          writes its K largest in falling order (value, float(id)), then
//          its largest value m and sum of exp(l - m) over the slice;
//   FINAL: one work group merges the sorted lists (one head per list) into
//          the global K largest and the softmax normaliser over all logits.
// Ids travel as floats (exact below 2^24). Slots past the end hold -3.4e38.
// Bindings: 0 activations (float[]: logits, lists),
//           1 FINAL: the result (float[]: max, sum of exp, K (value, id) pairs).
// Params: 0 logits, 1 logits float offset, 2 lists float offset, 3 K,
//         4 FINAL: lists to merge.
// Defines: WG_SIZE (power of two), PER_THREAD, FINAL.
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer A { float act[]; };
#ifdef FINAL
layout(std430, binding = 1) writeonly restrict buffer R { float res[]; };
#endif

#define NONE -3.4e38
shared float sv[WG_SIZE];
shared uint si[WG_SIZE];

// The largest (value, id) over the work group, lowest id on ties; in every invocation.
void wg_best(inout float v, inout uint id)
{
    uint t = gl_LocalInvocationIndex;
    sv[t] = v;
    si[t] = id;
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s && (sv[t + s] > sv[t] || (sv[t + s] == sv[t] && si[t + s] < si[t]))) {
            sv[t] = sv[t + s];
            si[t] = si[t + s];
        }
        barrier();
    }
    v = sv[0];
    id = si[0];
    barrier();
}

void main()
{
    uint t = gl_LocalInvocationIndex, K = PARAM_U(3);
#ifndef FINAL
    uint w = gl_WorkGroupID.x, i0 = w * uint(WG_SIZE * PER_THREAD), n = PARAM_U(0);
    uint list = PARAM_U(2) + w * (2u * K + 2u);
    float v[PER_THREAD];
    float m = NONE;
    for (int j = 0; j < PER_THREAD; j++) {
        uint i = i0 + t + uint(j * WG_SIZE);
        v[j] = i < n ? act[PARAM_U(1) + i] : NONE;
        m = max(m, v[j]);
    }
    m = wg_reduce_max(m);
    float s = 0.0;
    for (int j = 0; j < PER_THREAD; j++)
        s += v[j] > NONE ? exp(v[j] - m) : 0.0;
    s = wg_reduce_sum(s);
    for (uint k = 0u; k < K; k++) {
        float bv = NONE;
        int bj = 0;
        for (int j = 0; j < PER_THREAD; j++)
            if (v[j] > bv) {
                bv = v[j];
                bj = j;
            }
        uint bid = bv > NONE ? i0 + t + uint(bj * WG_SIZE) : 0xffffffffu;
        wg_best(bv, bid);
        if (bv > NONE && bid >= i0 && (bid - i0) % uint(WG_SIZE) == t)
            v[(bid - i0) / uint(WG_SIZE)] = NONE;  // taken: the owner drops it
        if (t == 0u) {
            act[list + 2u * k] = bv;
            act[list + 2u * k + 1u] = bv > NONE ? float(bid) : 0.0;
        }
    }
    if (t == 0u) {
        act[list + 2u * K] = m;
        act[list + 2u * K + 1u] = s;
    }
#else
    uint lists = PARAM_U(4), stride = 2u * K + 2u, base = PARAM_U(2);
    // the softmax normaliser over every slice
    float m = NONE;
    for (uint l = t; l < lists; l += uint(WG_SIZE))
        m = max(m, act[base + l * stride + 2u * K]);
    m = wg_reduce_max(m);
    float s = 0.0;
    for (uint l = t; l < lists; l += uint(WG_SIZE))
        s += act[base + l * stride + 2u * K + 1u] * exp(act[base + l * stride + 2u * K] - m);
    s = wg_reduce_sum(s);
    if (t == 0u) {
        res[0] = m;
        res[1] = s;
    }
    // K-way merge; invocation t owns lists t, t + WG_SIZE, ... and their heads
    uint head[8];
    for (int j = 0; j < 8; j++)
        head[j] = 0u;
    for (uint k = 0u; k < K; k++) {
        float bv = NONE;
        uint bl = 0xffffffffu;
        for (int j = 0; j < 8; j++) {
            uint l = t + uint(j * WG_SIZE);
            if (l < lists && head[j] < K) {
                float hv = act[base + l * stride + 2u * head[j]];
                if (hv > bv) {
                    bv = hv;
                    bl = l;
                }
            }
        }
        // ties across lists: the lower list holds the lower ids
        wg_best(bv, bl);
        if (bv > NONE && bl % uint(WG_SIZE) == t) {
            uint j = bl / uint(WG_SIZE);
            res[2u + 2u * k] = bv;
            res[3u + 2u * k] = act[base + bl * stride + 2u * head[j] + 1u];
            head[j]++;
        } else if (bv <= NONE && t == 0u) {
            res[2u + 2u * k] = NONE;
            res[3u + 2u * k] = 0.0;
        }
    }
#endif
}
