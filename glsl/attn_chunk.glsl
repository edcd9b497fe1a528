// One chunk of one head's attention for one query (attention.comp's work
// group): softmax(q . k_p scale) . v_p over positions [lo + c chunk,
// lo + (c + 1) chunk) of the len the query sees, q in QS (set by the caller
// before attend_chunk). One chunk (n_chunks 1): the output to out_; else the
// chunk's partials, and the last chunk of a slot (a (query, head)) to finish
// merges them (see attention.comp). The arithmetic is that of AW
// invocations (WG_SIZE >= AW: the others take part in the barriers and
// reductions with nothing).
// Needs: reduce.glsl; HEAD_DIM, GROUP, KV_DIM, CHUNK_MAX, KV_PAGE, KV_PPS,
// AW; LB(i) / LB4(i) the layer's buffer as uint / uvec4 (K and V as packed
// halves), ACT_AT(i) / ACT_SET(i, v) the activations (the page table, the
// output, the partials), ATT_COUNTER the counters a slot.
#if HEAD_DIM % 8 == 0
#define VEC 8u  // halves a load of K and V (their rows 16-byte aligned)
#else
#define VEC 2u
#endif
#define LANES (uint(HEAD_DIM) / VEC)  // invocations per position in the V pass
#define GROUPS (uint(AW) / LANES)     // positions at a time in the V pass

// The shared arrays: q (QS), the scores (SC), the V pass's partials (PART),
// the pages of this group's positions (PGS: read once from the table, a
// position's row is then a shared-memory read away) and the merge's maxima
// and sums (CM, CL).
#define PG_MAX (uint(CHUNK_MAX) / uint(KV_PAGE) + 2u)
shared float qs[HEAD_DIM];
shared float sc[CHUNK_MAX];
shared vec4 part[AW * 2];
shared uint pgs[PG_MAX];
shared float cm[AW], cl[AW];
#define QS(i) qs[i]
#define QS_SET(i, v) qs[i] = (v)
#define SC(i) sc[i]
#define SC_SET(i, v) sc[i] = (v)
#define PART(i) part[i]
#define PART_SET(i, v) part[i] = (v)
#define PGS(i) pgs[i]
#define PGS_SET(i, v) pgs[i] = (v)
#define CM(i) cm[i]
#define CM_SET(i, v) cm[i] = (v)
#define CL(i) cl[i]
#define CL_SET(i, v) cl[i] = (v)
shared bool merge_here;

#define STRIDE uint(HEAD_DIM + 2)
#ifndef V_AHEAD
#define V_AHEAD 8u  // rows (V pass) and chunks (merge) loaded at once
#endif

// The first position a query that sees len positions attends to, with a
// window of w (0: none).
uint first_seen(uint len, uint w) { return w != 0u && len > w ? len - w : 0u; }

// The last chunk of a head to finish: every chunk's partials (n at base) into
// its output at out. Up to AW chunks, their maxima and sums are loaded once,
// a chunk an invocation (into cm, cl); each output's values are loaded
// V_AHEAD chunks at a time, so that the loads are in flight together. The
// sums are in chunk order all the same.
void merge_chunks(uint base, uint n, uint out_)
{
    uint t = gl_LocalInvocationIndex;
    bool staged = n <= uint(AW);  // (the same in the whole group)
    if (staged && t < n) {
        CM_SET(t, ACT_AT(base + t * STRIDE));
        CL_SET(t, ACT_AT(base + t * STRIDE + 1u));
    }
    memoryBarrierShared();
    barrier();
#define M_AT(c) (staged ? CM(c) : ACT_AT(base + (c) * STRIDE))
#define L_AT(c) (staged ? CL(c) : ACT_AT(base + (c) * STRIDE + 1u))
    float m = -3.0e38;
    for (uint c = 0u; c < n; c++)
        m = max(m, M_AT(c));
    float l = 0.0;
    for (uint c = 0u; c < n; c++)
        l += L_AT(c) * exp(M_AT(c) - m);
    for (uint d = t; d < uint(HEAD_DIM); d += uint(AW)) {
        float o = 0.0;
        for (uint c = 0u; c < n; c += V_AHEAD) {
            float v[V_AHEAD];
            for (uint i = 0u; i < V_AHEAD; i++)
                v[i] = ACT_AT(base + min(c + i, n - 1u) * STRIDE + 2u + d);
            for (uint i = 0u; i < V_AHEAD; i++)
                if (c + i < n)
                    o += v[i] * exp(M_AT(c + i) - m);
        }
        ACT_SET(out_ + d, o / l);
    }
}

// k_base, v_base: uint offsets of the cache's K and V (cache row 0);
// partials: float offset of the partials, slots a slot's chunk slots.
void attend_chunk(uint h, uint c, uint len, uint lo, uint chunk, uint n_chunks, uint seq,
                  uint slot, uint out_, uint k_base, uint v_base, uint partials, uint slots)
{
    uint t = gl_LocalInvocationIndex;
    uint p0 = lo + c * chunk, p1 = min(p0 + chunk, len);
    uint kvo = (h / uint(GROUP)) * uint(HEAD_DIM) / 2u;  // the KV head in a row, uints
    uint pg0 = p0 / uint(KV_PAGE), tab = seq * uint(KV_PPS) + pg0;
    uint n_pg = p1 > p0 ? (p1 - 1u) / uint(KV_PAGE) - pg0 + 1u : 0u;
    for (uint i = t; i < n_pg; i += uint(WG_SIZE))
        PGS_SET(i, floatBitsToUint(ACT_AT(tab + i)));
#define ROW(p) (PGS((p) / uint(KV_PAGE) - pg0) * uint(KV_PAGE) + (p) % uint(KV_PAGE))
    barrier();

#ifdef SCORE_SCALE
    float scale = SCORE_SCALE, mx = -3.0e38;
#else
    float scale = inversesqrt(float(HEAD_DIM)), mx = -3.0e38;
#endif
    for (uint p = p0 + t; t < uint(AW) && p < p1; p += uint(AW)) {
        uint kb = k_base + ROW(p) * uint(KV_DIM / 2) + kvo;
        float s = 0.0;
#if VEC == 8u
        for (uint j = 0u; j < uint(HEAD_DIM) / 8u; j++) {
            uvec4 k = LB4(kb / 4u + j);
            uint b = 8u * j;
            vec2 k0 = unpackHalf2x16(k.x), k1 = unpackHalf2x16(k.y);
            vec2 k2 = unpackHalf2x16(k.z), k3 = unpackHalf2x16(k.w);
            s += dot(vec4(QS(b), QS(b + 1u), QS(b + 2u), QS(b + 3u)), vec4(k0, k1)) +
                 dot(vec4(QS(b + 4u), QS(b + 5u), QS(b + 6u), QS(b + 7u)), vec4(k2, k3));
        }
#else
        for (uint j = 0u; j < uint(HEAD_DIM) / 2u; j++) {
            vec2 k = unpackHalf2x16(LB(kb + j));
            s += QS(2u * j) * k.x + QS(2u * j + 1u) * k.y;
        }
#endif
        s *= scale;
#ifdef SOFTCAP
        s = SOFTCAP * tanh(s / SOFTCAP);
#endif
        SC_SET(p - p0, s);
        mx = max(mx, s);
    }
    mx = wg_reduce_max(mx);
    float sum = 0.0;
    for (uint p = p0 + t; t < uint(AW) && p < p1; p += uint(AW)) {
        float e = exp(SC(p - p0) - mx);
        SC_SET(p - p0, e);
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
                v[i] = LB4(vb / 4u + d);
#else
                v[i] = LB(vb + d);
#endif
            }
            for (uint i = 0u; i < V_AHEAD; i++) {
                uint pi = p + i * GROUPS;
                if (pi < p1) {
                    float w = SC(pi - p0);
#if VEC == 8u
                    o0 += w * vec4(unpackHalf2x16(v[i].x), unpackHalf2x16(v[i].y));
                    o1 += w * vec4(unpackHalf2x16(v[i].z), unpackHalf2x16(v[i].w));
#else
                    o0.xy += w * unpackHalf2x16(v[i]);
#endif
                }
            }
        }
    if (t < uint(AW)) {
        PART_SET(2u * t, o0);
        PART_SET(2u * t + 1u, o1);
    }
    barrier();
    if (t < LANES) {
        vec4 s0 = vec4(0.0), s1 = vec4(0.0);
        for (uint i = 0u; i < GROUPS; i++) {
            s0 += PART(2u * (i * LANES + t));
            s1 += PART(2u * (i * LANES + t) + 1u);
        }
        float r[8] = float[8](s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w);
        if (n_chunks == 1u) {
            for (uint i = 0u; i < VEC; i++)
                ACT_SET(out_ + VEC * t + i, r[i] / sum);
        } else {
            uint base = partials + (slot * slots + c) * STRIDE;
            for (uint i = 0u; i < VEC; i++)
                ACT_SET(base + 2u + VEC * t + i, r[i]);
            if (t == 0u) {
                ACT_SET(base, mx);
                ACT_SET(base + 1u, sum);
            }
        }
    }
    if (n_chunks == 1u)
        return;
    // the partials out before this group counts itself in; the last one merges
    memoryBarrierBuffer();
    barrier();
    if (t == 0u)
        merge_here = atomicAdd(ATT_COUNTER[slot], 1u) == n_chunks - 1u;
    barrier();
    if (!merge_here)
        return;
    memoryBarrierBuffer();
    merge_chunks(partials + slot * slots * STRIDE, n_chunks, out_);
    if (t == 0u)
        ATT_COUNTER[slot] = 0u;
}
