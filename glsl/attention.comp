// Attention of one new token over the KV cache, per head (GQA: GROUP query
// heads share a KV head): softmax(q . k_p / sqrt(HEAD_DIM)) . v_p over the
// positions p it sees: all p < kv length, or with a window W the last W of
// them. The positions are cut into chunks, one work group
// per (head, chunk), so a long context spreads over the GPU; with one chunk
// the result is written directly, else each chunk writes its max score, its
// sum of exp and its unnormalised output, and the last of a head's chunks to
// finish (counted with an atomic) merges them into the head's output:
// o = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c, M the largest m_c.
// Bindings: 0 the layer's buffer (uint[]: Q as f32 bits at 0, K and V as
//           packed halves, [cache row][kv head][HEAD_DIM], a position's row
//           through the page table: common.glsl KV_ROW),
//           1 activations (float[]: the page table, the output and the
//           partials),
//           2 a counter per head (uint[], 0 between dispatches: the merging
//           work group puts it back).
// Params: 0 kv length, 1 positions per chunk (<= CHUNK_MAX), 2 chunks (of
//         the positions seen), 3 output float offset (one chunk), 4 partials
//         float offset ([head][chunk][max, sum, HEAD_DIM values]), 5 K uint
//         offset, 6 V uint offset, 7 the window (0: none), 8 the sequence.
// Defines: WG_SIZE (>= HEAD_DIM / 2), HEAD_DIM (even; a multiple of 8 reads K and V
// as uvec4), GROUP, KV_DIM, CHUNK_MAX; SCORE_SCALE in place of 1 / sqrt(HEAD_DIM)
// and SOFTCAP (a score s becomes SOFTCAP tanh(s / SOFTCAP)) where given (Gemma 2).
// MULTI: the same for a few new tokens (a verification pass, a short prompt),
// whose K and V are in the cache already: work group (h, c, i) is query i's
// head h and chunk c; query i is at position pos0 + i and sees pos0 + i + 1
// positions, so it has its own number of chunks (groups past it return).
// Its Q comes from the activations, and each (query, head) has its own
// counter and its own param 2 slots of partials.
// Params then: 0 kv length of query 0 (pos0 + 1), 1 chunks a head wanted
//         past ONE_CHUNK positions (each CHUNK_MIN..CHUNK_MAX positions),
//         2 chunk slots a (query, head) in the partials, 3 output float
//         offset of query 0, 4 partials float offset, 5 K and 6 V uint
//         offsets, 7 Q float offset of query 0 (in the activations), 8 floats
//         per query (Q and output), 9 the window (0: none); 10 0: 11 the
//         sequence; 10 nonzero: the queries are of different sequences (a
//         batch over them), query q's entry (seq << 24) | position at 11 + q,
//         and param 0 unused.
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly buffer L { uint lb[]; };
// the same buffer as 8 halves per load (K/V rows are 16-byte aligned where
// HEAD_DIM % 8 == 0: VEC below)
layout(std430, binding = 0) readonly buffer L4 { uvec4 lb4[]; };
// coherent: the merging work group reads the other groups' partials
layout(std430, binding = 1) coherent restrict buffer A { float act[]; };
layout(std430, binding = 2) coherent restrict buffer C { uint counter[]; };

#define ACT_AT(i) act[i]

#if HEAD_DIM % 8 == 0
#define VEC 8u  // halves a load of K and V (their rows 16-byte aligned)
#else
#define VEC 2u
#endif
#define LANES (uint(HEAD_DIM) / VEC)  // invocations per position in the V pass
#define GROUPS (uint(WG_SIZE) / LANES)  // positions at a time in the V pass

// q, the scores, the V pass's partials, the pages of this group's
// positions (read once from the table: a position's row is then a
// shared-memory read away) and the merge's maxima and sums
#define PG_MAX (uint(CHUNK_MAX) / uint(KV_PAGE) + 2u)
shared float qs[HEAD_DIM];
shared float sc[CHUNK_MAX];
shared vec4 part[WG_SIZE * 2];
shared uint pgs[PG_MAX];
shared float cm[WG_SIZE], cl[WG_SIZE];
shared bool merge_here;

#define STRIDE uint(HEAD_DIM + 2)
#define V_AHEAD 8u  // rows (V pass) and chunks (merge) loaded at once

// The first position a query that sees len positions attends to, with a
// window of w (0: none).
uint first_seen(uint len, uint w) { return w != 0u && len > w ? len - w : 0u; }

// The last chunk of a head to finish: every chunk's partials (n at base) into
// its output at out. Up to WG_SIZE chunks, their maxima and sums are loaded
// once, a chunk an invocation (into cm, cl); each output's values are loaded
// V_AHEAD chunks at a time, so that the loads are in flight together. The
// sums are in chunk order all the same.
void merge_chunks(uint base, uint n, uint out_)
{
    uint t = gl_LocalInvocationIndex;
    bool staged = n <= uint(WG_SIZE);  // (the same in the whole group)
    if (staged && t < n) {
        cm[t] = act[base + t * STRIDE];
        cl[t] = act[base + t * STRIDE + 1u];
    }
    memoryBarrierShared();
    barrier();
#define M_AT(c) (staged ? cm[c] : act[base + (c) * STRIDE])
#define L_AT(c) (staged ? cl[c] : act[base + (c) * STRIDE + 1u])
    float m = -3.0e38;
    for (uint c = 0u; c < n; c++)
        m = max(m, M_AT(c));
    float l = 0.0;
    for (uint c = 0u; c < n; c++)
        l += L_AT(c) * exp(M_AT(c) - m);
    for (uint d = t; d < uint(HEAD_DIM); d += uint(WG_SIZE)) {
        float o = 0.0;
        for (uint c = 0u; c < n; c += V_AHEAD) {
            float v[V_AHEAD];
            for (uint i = 0u; i < V_AHEAD; i++)
                v[i] = act[base + min(c + i, n - 1u) * STRIDE + 2u + d];
            for (uint i = 0u; i < V_AHEAD; i++)
                if (c + i < n)
                    o += v[i] * exp(M_AT(c + i) - m);
        }
        act[out_ + d] = o / l;
    }
}

// Work group (head h, chunk c) for one query, q in qs: the positions [lo + c
// chunk, lo + (c + 1) chunk) of the len it sees; one chunk: the output to
// out_, else the chunk's partials, and the last of the slot's (a (query,
// head)) chunks to finish merges them. k_base, v_base: uint offsets of the
// cache's K and V (cache row 0); partials: float offset of the partials,
// slots a slot's chunk slots.
void attend_chunk(uint h, uint c, uint len, uint lo, uint chunk, uint n_chunks, uint seq,
                  uint slot, uint out_, uint k_base, uint v_base, uint partials, uint slots)
{
    uint t = gl_LocalInvocationIndex;
    uint p0 = lo + c * chunk, p1 = min(p0 + chunk, len);
    uint kvo = (h / uint(GROUP)) * uint(HEAD_DIM) / 2u;  // the KV head in a row, uints
    uint pg0 = p0 / uint(KV_PAGE), tab = seq * uint(KV_PPS) + pg0;
    uint n_pg = p1 > p0 ? (p1 - 1u) / uint(KV_PAGE) - pg0 + 1u : 0u;
    for (uint i = t; i < n_pg; i += uint(WG_SIZE))
        pgs[i] = floatBitsToUint(act[tab + i]);
#define ROW(p) (pgs[(p) / uint(KV_PAGE) - pg0] * uint(KV_PAGE) + (p) % uint(KV_PAGE))
    barrier();

#ifdef SCORE_SCALE
    float scale = SCORE_SCALE, mx = -3.0e38;
#else
    float scale = inversesqrt(float(HEAD_DIM)), mx = -3.0e38;
#endif
    for (uint p = p0 + t; p < p1; p += uint(WG_SIZE)) {
        uint kb = k_base + ROW(p) * uint(KV_DIM / 2) + kvo;
        float s = 0.0;
#if VEC == 8u
        for (uint j = 0u; j < uint(HEAD_DIM) / 8u; j++) {
            uvec4 k = lb4[kb / 4u + j];
            uint b = 8u * j;
            vec2 k0 = unpackHalf2x16(k.x), k1 = unpackHalf2x16(k.y);
            vec2 k2 = unpackHalf2x16(k.z), k3 = unpackHalf2x16(k.w);
            s += dot(vec4(qs[b], qs[b + 1u], qs[b + 2u], qs[b + 3u]), vec4(k0, k1)) +
                 dot(vec4(qs[b + 4u], qs[b + 5u], qs[b + 6u], qs[b + 7u]), vec4(k2, k3));
        }
#else
        for (uint j = 0u; j < uint(HEAD_DIM) / 2u; j++) {
            vec2 k = unpackHalf2x16(lb[kb + j]);
            s += qs[2u * j] * k.x + qs[2u * j + 1u] * k.y;
        }
#endif
        s *= scale;
#ifdef SOFTCAP
        s = SOFTCAP * tanh(s / SOFTCAP);
#endif
        sc[p - p0] = s;
        mx = max(mx, s);
    }
    mx = wg_reduce_max(mx);
    float sum = 0.0;
    for (uint p = p0 + t; p < p1; p += uint(WG_SIZE)) {
        float e = exp(sc[p - p0] - mx);
        sc[p - p0] = e;
        sum += e;
    }
    sum = wg_reduce_sum(sum);  // its barriers also publish the scores

    // V pass: LANES invocations per position, each on VEC dimensions, V_AHEAD
    // positions' rows loaded before any is summed (a short context's pass
    // is a chain of load latencies otherwise: bench/RESULTS.md "Decode
    // attention"); each invocation's sums in position order all the same
    uint d = t % LANES, g = t / LANES;
    vec4 o0 = vec4(0.0), o1 = vec4(0.0);
    if (g < GROUPS)
        for (uint p = p0 + g; p < p1; p += V_AHEAD * GROUPS) {
#if VEC == 8u
            uvec4 v[V_AHEAD];
#else
            uint v[V_AHEAD];
#endif
            for (uint i = 0u; i < V_AHEAD; i++) {
                uint pi = p + i * GROUPS;
                uint vb = v_base + ROW(pi < p1 ? pi : p) * uint(KV_DIM / 2) + kvo;
#if VEC == 8u
                v[i] = lb4[vb / 4u + d];
#else
                v[i] = lb[vb + d];
#endif
            }
            for (uint i = 0u; i < V_AHEAD; i++) {
                uint pi = p + i * GROUPS;
                if (pi < p1) {
                    float w = sc[pi - p0];
#if VEC == 8u
                    o0 += w * vec4(unpackHalf2x16(v[i].x), unpackHalf2x16(v[i].y));
                    o1 += w * vec4(unpackHalf2x16(v[i].z), unpackHalf2x16(v[i].w));
#else
                    o0.xy += w * unpackHalf2x16(v[i]);
#endif
                }
            }
        }
    part[2u * t] = o0;
    part[2u * t + 1u] = o1;
    barrier();
    if (t < LANES) {
        vec4 s0 = vec4(0.0), s1 = vec4(0.0);
        for (uint i = 0u; i < GROUPS; i++) {
            s0 += part[2u * (i * LANES + t)];
            s1 += part[2u * (i * LANES + t) + 1u];
        }
        float r[8] = float[8](s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w);
        if (n_chunks == 1u) {
            for (uint i = 0u; i < VEC; i++)
                act[out_ + VEC * t + i] = r[i] / sum;
        } else {
            uint base = partials + (slot * slots + c) * STRIDE;
            for (uint i = 0u; i < VEC; i++)
                act[base + 2u + VEC * t + i] = r[i];
            if (t == 0u) {
                act[base] = mx;
                act[base + 1u] = sum;
            }
        }
    }
    if (n_chunks == 1u)
        return;
    // the partials out before this group counts itself in; the last one merges
    memoryBarrierBuffer();
    barrier();
    if (t == 0u)
        merge_here = atomicAdd(counter[slot], 1u) == n_chunks - 1u;
    barrier();
    if (!merge_here)
        return;
    memoryBarrierBuffer();
    merge_chunks(partials + slot * slots * STRIDE, n_chunks, out_);
    if (t == 0u)
        counter[slot] = 0u;
}

void main()
{
    uint h = gl_WorkGroupID.x, c = gl_WorkGroupID.y, t = gl_LocalInvocationIndex;
#ifdef MULTI
    uint q = gl_WorkGroupID.z;
    // its chunks as a decode step's at this length (ops/attention.c
    // chunks, param 1 its chunks a head wanted), so that its
    // output is the step's to the bit
    uint len = PARAM_U(0) + q, seq = PARAM_U(11);
    if (PARAM_U(10) != 0u) {
        uint e = PARAM_U(11u + q);
        len = (e & 0xffffffu) + 1u;
        seq = e >> 24;
    }
    uint lo = first_seen(len, PARAM_U(9));
    uint seen = len - lo, chunk = seen;
    if (seen > uint(ONE_CHUNK))
        chunk = clamp((seen + PARAM_U(1) - 1u) / PARAM_U(1), uint(CHUNK_MIN), uint(CHUNK_MAX));
    uint n_chunks = (seen + chunk - 1u) / chunk;
    if (c >= n_chunks)
        return;  // the whole group: past this query's positions
    uint slot = q * gl_NumWorkGroups.x + h;  // the (query, head): its counter and partials
    uint out_ = PARAM_U(3) + q * PARAM_U(8) + h * uint(HEAD_DIM);
    for (uint i = t; i < uint(HEAD_DIM); i += uint(WG_SIZE))
        qs[i] = act[PARAM_U(7) + q * PARAM_U(8) + h * uint(HEAD_DIM) + i];
#else
    uint len = PARAM_U(0), chunk = PARAM_U(1), n_chunks = PARAM_U(2), seq = PARAM_U(8);
    uint lo = first_seen(len, PARAM_U(7));
    uint slot = h, out_ = PARAM_U(3) + h * uint(HEAD_DIM);
    for (uint i = t; i < uint(HEAD_DIM); i += uint(WG_SIZE))
        qs[i] = uintBitsToFloat(lb[h * uint(HEAD_DIM) + i]);
#endif
    attend_chunk(h, c, len, lo, chunk, n_chunks, seq, slot, out_, PARAM_U(5), PARAM_U(6),
                 PARAM_U(4), PARAM_U(2));
}
