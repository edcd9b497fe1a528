// Mixture of experts, the two kernels beside the expert matvecs
// (matvec.comp EXPERT). Binding 0: the activation buffer (float[]).
//
// ROUTE: a token's experts from its router logits, one work group a token
// (gl_WorkGroupID.x): the softmax over param 0 experts (at most MAX_E), the
// param 1 largest probabilities in the order of ops/ref_ops.c ref_moe_route
// (slot j takes the first largest of entries j.. of an order where each
// slot's pick swapped places with the entry it displaced: llama.cpp's ties),
// renormalised to sum 1 where param 5 is 1, times the float bits of param 6.
// Token t's logits at float param 2 + t * param 3; its route (expert id as a
// float, weight) for slot j at param 4 + 2 (t * param 1 + j).
//
// COMBINE: the residual add of the experts' outputs, one work group of
// WG_SIZE columns a (column block, token): x[t][i] += sum over slots j <
// param 1 of out[t * param 1 + j][i] (the expert matvecs scaled them by
// their weights), plus, where param 7 is 1, sigmoid(g[t]) * out_shared[t][i].
// Params: 0 n_embd, 1 slots a token, 2 float offset of token 0's x, 3 x's
// floats a token, 4 float offset of the outputs (row z = t * param 1 + j),
// 5 floats an output row, 6 float offset of the shared expert's outputs
// (param 5 floats a token), 7 shared expert on, 8 float offset of the
// shared expert's gate logit of token 0 (one float a token).
//
// GROUP: a prefill chunk's entries (token, slot) grouped by expert, for the
// expert matmuls (matmul.comp EXPERT), in one work group: the count of each
// expert's entries, their exclusive prefix sum, and each entry's index in
// its expert's run of the list (the order within a run is the atomics',
// which moves no sum: each entry's row is computed on its own), and for
// the f16 tiles (x_tiles.comp EXPERT) each expert's first tile of param 5
// entries and each tile's expert. Params: 0 experts (at most MAX_E), 1
// entries, 2 float offset of the route (entry i's expert at param 2 + 2 i),
// 3 float offset of the counts (param 0 floats; then the first entries,
// the first tiles, param 0 floats each, then the count of tiles), 4 float
// offset of the list (param 1 floats: entry indices, as floats; then each
// tile's expert), 5 entries a tile.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer A { float a[]; };

#define MAX_E 256

#ifdef ROUTE
shared float p[MAX_E];
shared uint ord[MAX_E];

void main()
{
    uint n = PARAM_U(0), k = PARAM_U(1), t = gl_WorkGroupID.x;
    uint lg = PARAM_U(2) + t * PARAM_U(3);
    for (uint e = gl_LocalInvocationIndex; e < n; e += uint(WG_SIZE)) {
        p[e] = a[lg + e];
        ord[e] = e;
    }
    barrier();
    if (gl_LocalInvocationIndex != 0u)
        return;
    float mx = p[0];
    for (uint e = 1u; e < n; e++)
        mx = max(mx, p[e]);
    float sum = 0.0;
    for (uint e = 0u; e < n; e++) {
        p[e] = exp(p[e] - mx);
        sum += p[e];
    }
    for (uint e = 0u; e < n; e++)
        p[e] /= sum;
    float wsum = 0.0;
    for (uint j = 0u; j < k; j++) {
        for (uint i = j + 1u; i < n; i++) {
            if (p[ord[j]] < p[ord[i]]) {
                uint s = ord[j];
                ord[j] = ord[i];
                ord[i] = s;
            }
        }
        wsum += p[ord[j]];
    }
    uint o = PARAM_U(4) + 2u * t * k;
    for (uint j = 0u; j < k; j++) {
        float w = p[ord[j]];
        if (PARAM_U(5) != 0u)
            w /= wsum;
        a[o + 2u * j] = float(ord[j]);
        a[o + 2u * j + 1u] = w * PARAM_F(6);
    }
}
#endif

#ifdef COMBINE
void main()
{
    uint i = gl_WorkGroupID.x * uint(WG_SIZE) + gl_LocalInvocationIndex, t = gl_WorkGroupID.y;
    if (i >= PARAM_U(0))
        return;
    uint k = PARAM_U(1);
    float s = 0.0;
    for (uint j = 0u; j < k; j++)
        s += a[PARAM_U(4) + (t * k + j) * PARAM_U(5) + i];
    if (PARAM_U(7) != 0u) {
        float g = a[PARAM_U(8) + t];
        s += a[PARAM_U(6) + t * PARAM_U(5) + i] / (1.0 + exp(-g));
    }
    a[PARAM_U(2) + t * PARAM_U(3) + i] += s;
}
#endif

#ifdef GROUP
shared uint cnt[MAX_E], pos[MAX_E], tile0[MAX_E];

void main()
{
    uint n = PARAM_U(0), ne = PARAM_U(1), t = gl_LocalInvocationIndex;
    for (uint e = t; e < n; e += uint(WG_SIZE))
        cnt[e] = 0u;
    barrier();
    for (uint i = t; i < ne; i += uint(WG_SIZE))
        atomicAdd(cnt[min(uint(a[PARAM_U(2) + 2u * i]), n - 1u)], 1u);
    barrier();
    uint bn = PARAM_U(5);
    if (t == 0u) {
        uint s = 0u, ts = 0u;
        for (uint e = 0u; e < n; e++) {
            pos[e] = s;
            s += cnt[e];
            tile0[e] = ts;
            ts += (cnt[e] + bn - 1u) / bn;
        }
        a[PARAM_U(3) + 3u * n] = float(ts);
    }
    barrier();
    for (uint e = t; e < n; e += uint(WG_SIZE)) {
        a[PARAM_U(3) + e] = float(cnt[e]);
        a[PARAM_U(3) + n + e] = float(pos[e]);
        a[PARAM_U(3) + 2u * n + e] = float(tile0[e]);
        for (uint j = 0u; j < (cnt[e] + bn - 1u) / bn; j++)
            a[PARAM_U(4) + ne + tile0[e] + j] = float(e);
    }
    barrier();
    for (uint i = t; i < ne; i += uint(WG_SIZE)) {
        uint e = min(uint(a[PARAM_U(2) + 2u * i]), n - 1u);
        a[PARAM_U(4) + atomicAdd(pos[e], 1u)] = float(i);
    }
}
#endif
