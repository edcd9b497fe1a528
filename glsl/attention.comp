// Attention of one new token over the KV cache, per head (GQA: GROUP query
// heads share a KV head): softmax(q . k_p / sqrt(HEAD_DIM)) . v_p over the
// positions p it sees: all p < kv length, or with a window W the last W of
// them. The positions are cut into chunks, one work group
// per (head, chunk), so a long context spreads over the GPU; with one chunk
// the result is written directly, else each chunk writes its max score, its
// sum of exp and its unnormalised output, and the last of a head's chunks to
// finish (counted with an atomic) merges them into the head's output:
// o = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c, M the largest m_c.
// A (head, chunk)'s work is attn_chunk.glsl's.
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
// HEAD_DIM % 8 == 0: attn_chunk.glsl VEC)
layout(std430, binding = 0) readonly buffer L4 { uvec4 lb4[]; };
// coherent: the merging work group reads the other groups' partials
layout(std430, binding = 1) coherent restrict buffer A { float act[]; };
layout(std430, binding = 2) coherent restrict buffer C { uint counter[]; };

#define ACT_AT(i) act[i]
#define ACT_SET(i, v) act[i] = (v)
#define LB(i) lb[i]
#define LB4(i) lb4[i]
#define ATT_COUNTER counter
#define AW WG_SIZE
#include "attn_chunk.glsl"

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
        QS_SET(i, act[PARAM_U(7) + q * PARAM_U(8) + h * uint(HEAD_DIM) + i]);
#else
    uint len = PARAM_U(0), chunk = PARAM_U(1), n_chunks = PARAM_U(2), seq = PARAM_U(8);
    uint lo = first_seen(len, PARAM_U(7));
    uint slot = h, out_ = PARAM_U(3) + h * uint(HEAD_DIM);
    for (uint i = t; i < uint(HEAD_DIM); i += uint(WG_SIZE))
        QS_SET(i, uintBitsToFloat(lb[h * uint(HEAD_DIM) + i]));
#endif
    attend_chunk(h, c, len, lo, chunk, n_chunks, seq, slot, out_, PARAM_U(5), PARAM_U(6),
                 PARAM_U(4), PARAM_U(2));
}
