// Attention of one new token over the KV cache, per head (GQA: GROUP query
// heads share a KV head): softmax(q . k_p / sqrt(HEAD_DIM)) . v_p over the
// positions p < kv length. The positions are cut into chunks, one work group
// per (head, chunk), so a long context spreads over the GPU; with one chunk
// the result is written directly, else each chunk writes its max score, its
// sum of exp and its unnormalised output and attn_combine.comp merges them.
// Bindings: 0 the layer's buffer (uint[]: Q as f32 bits at 0, K and V as
//           packed halves, [position][kv head][HEAD_DIM]),
//           1 activations (float[]: the output or the partials).
// Params: 0 kv length, 1 positions per chunk (<= CHUNK_MAX), 2 chunks,
//         3 output float offset (one chunk), 4 partials float offset
//         ([head][chunk][max, sum, HEAD_DIM values]), 5 K uint offset,
//         6 V uint offset.
// Defines: WG_SIZE (>= HEAD_DIM / 2), HEAD_DIM (even), GROUP, KV_DIM, CHUNK_MAX.
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer L { uint lb[]; };
layout(std430, binding = 1) restrict buffer A { float act[]; };

#define HALF (uint(HEAD_DIM) / 2u)
#define GROUPS (uint(WG_SIZE) / HALF)  // position groups in the V pass

shared float qs[HEAD_DIM];
shared float sc[CHUNK_MAX];
shared vec2 part[WG_SIZE];

void main()
{
    uint h = gl_WorkGroupID.x, c = gl_WorkGroupID.y, t = gl_LocalInvocationIndex;
    uint len = PARAM_U(0), chunk = PARAM_U(1);
    uint p0 = c * chunk, p1 = min(p0 + chunk, len);
    uint kvo = (h / uint(GROUP)) * uint(HEAD_DIM) / 2u;  // the KV head in a row, uints
    for (uint i = t; i < uint(HEAD_DIM); i += uint(WG_SIZE))
        qs[i] = uintBitsToFloat(lb[h * uint(HEAD_DIM) + i]);
    barrier();

    float scale = inversesqrt(float(HEAD_DIM)), mx = -3.0e38;
    for (uint p = p0 + t; p < p1; p += uint(WG_SIZE)) {
        uint kb = PARAM_U(5) + p * uint(KV_DIM / 2) + kvo;
        float s = 0.0;
        for (uint j = 0u; j < HALF; j++) {
            vec2 k = unpackHalf2x16(lb[kb + j]);
            s += qs[2u * j] * k.x + qs[2u * j + 1u] * k.y;
        }
        s *= scale;
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
    sum = wg_reduce_sum(sum);  // its barriers also publish sc[]

    uint d = t % HALF, g = t / HALF;
    vec2 o = vec2(0.0);
    if (g < GROUPS)
        for (uint p = p0 + g; p < p1; p += GROUPS)
            o += sc[p - p0] * unpackHalf2x16(lb[PARAM_U(6) + p * uint(KV_DIM / 2) + kvo + d]);
    part[t] = o;
    barrier();
    if (t < HALF) {
        vec2 s = vec2(0.0);
        for (uint i = 0u; i < GROUPS; i++)
            s += part[i * HALF + t];
        if (PARAM_U(2) == 1u) {
            uint out_ = PARAM_U(3) + h * uint(HEAD_DIM) + 2u * t;
            act[out_] = s.x / sum;
            act[out_ + 1u] = s.y / sum;
        } else {
            uint base = PARAM_U(4) + (h * PARAM_U(2) + c) * uint(HEAD_DIM + 2);
            act[base + 2u + 2u * t] = s.x;
            act[base + 3u + 2u * t] = s.y;
            if (t == 0u) {
                act[base] = mx;
                act[base + 1u] = sum;
            }
        }
    }
}
