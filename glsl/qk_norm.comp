// Q and K of attention normalised (RMSNorm) and rotated (RoPE) after the
// Q|K|V projections, and Q, K and V put where the attention reads them: the
// QKV epilogue's work (matvec_out.glsl) for models whose Q and K norm needs
// a whole row (OLMoE: the width; Qwen3: a head) before the rotation.
// Bindings: 0 act (read: the projected q|k|v rows, the norm weights, the
//   RoPE table; written: Q of several tokens), 1 the layer's cache (written:
//   K and V as packed halves; Q of one token as f32 bits from uint 0).
// Defines: Q_DIM, KV_DIM, HEAD_DIM; Q_SPAN, K_SPAN: the values one norm
//   covers (the width, or a head), each weight that many values; WG_SIZE.
// Params: 0 float offset of token 0's q|k|v row, 1 floats from one token's
//   row to the next, 2 / 3 float offsets of the Q / K norm weights,
//   4 float offset of token 0's row of the RoPE table (HEAD_DIM floats a
//   position: cos, sin a pair), 5 eps (float bits), 6 float offset of token
//   0's Q in act and 7 floats a token (param 8 not 0: Q to the cache from
//   uint 0 instead, one token), 9 / 10 uint offsets in the cache of token
//   0's K and V (KV_DIM / 2 uints a token); with KV_PAGE (common.glsl
//   KV_ROW) param 11 1: the tokens are of different sequences (a batch over
//   them), token t's entry (seq << 24) | position at 12 + t gives its RoPE
//   row and its cache row (params 4, 9 and 10 then the table's and the
//   cache's start); 2: a run of one sequence's positions, token t's cache
//   row that of entry param 12 + t (9 and 10 the cache's start).
// Rows of Q and K come with the pairs RoPE rotates adjacent (NeoX models'
// rows and norm weights reordered at upload, gpu_model.c source_row).
// Work groups: x: Q's spans, then K's, then V in K_SPAN pieces; y: token.
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer A { float a[]; };
layout(std430, binding = 1) writeonly restrict buffer C { uint c[]; };

#define ACT_AT(i) a[i]

#define NQ (uint(Q_DIM) / uint(Q_SPAN))
#define NK (uint(KV_DIM) / uint(K_SPAN))

void main()
{
    uint s = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    // (uniform in the work group: the reduction's barriers are reached by all)
    bool is_q = s < NQ, is_k = !is_q && s < NQ + NK, is_v = !is_q && !is_k;
    uint span = is_q ? uint(Q_SPAN) : uint(K_SPAN);
    uint first = is_q ? s * uint(Q_SPAN) : is_k ? (s - NQ) * uint(K_SPAN)
                                                : (s - NQ - NK) * uint(K_SPAN);
    uint src = PARAM_U(0) + t * PARAM_U(1) + first +
               (is_q ? 0u : is_k ? uint(Q_DIM) : uint(Q_DIM + KV_DIM));
    float scale = 1.0;
    if (!is_v) {
        float ss = 0.0;
        for (uint i = gl_LocalInvocationIndex; i < span; i += uint(WG_SIZE))
            ss += a[src + i] * a[src + i];
        scale = inversesqrt(wg_reduce_sum(ss) / float(span) + PARAM_F(5));
    }
    uint w = is_q ? PARAM_U(2) : PARAM_U(3);
    uint prow = t, kslot = t;
#ifdef KV_PAGE
    if (PARAM_U(11) != 0u) {
        uint e = PARAM_U(11) == 1u ? PARAM_U(12u + t) : PARAM_U(12) + t;
        if (PARAM_U(11) == 1u)
            prow = e & 0xffffffu;
        kslot = KV_ROW(e >> 24, e & 0xffffffu);
    }
#endif
    uint kv = kslot * uint(KV_DIM / 2);
    for (uint p = gl_LocalInvocationIndex; p < span / 2u; p += uint(WG_SIZE)) {
        uint i = first + 2u * p;  // in Q, K or V
        float x0 = a[src + 2u * p], x1 = a[src + 2u * p + 1u];
        if (is_v) {
            c[PARAM_U(10) + kv + i / 2u] = packHalf2x16(vec2(x0, x1));
            continue;
        }
        x0 = x0 * scale * a[w + 2u * p];
        x1 = x1 * scale * a[w + 2u * p + 1u];
        uint cs = PARAM_U(4) + prow * uint(HEAD_DIM) + (i % uint(HEAD_DIM));  // pair j at 2j
        float co = a[cs], si = a[cs + 1u];
        float r0 = x0 * co - x1 * si, r1 = x0 * si + x1 * co;
        if (is_k) {
            c[PARAM_U(9) + kv + i / 2u] = packHalf2x16(vec2(r0, r1));
        } else if (PARAM_U(8) != 0u) {
            c[i] = floatBitsToUint(r0);
            c[i + 1u] = floatBitsToUint(r1);
        } else {
            a[PARAM_U(6) + t * PARAM_U(7) + i] = r0;
            a[PARAM_U(6) + t * PARAM_U(7) + i + 1u] = r1;
        }
    }
}
