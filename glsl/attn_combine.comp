// Merges the per-chunk partials of attention.comp into each head's output:
// o = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c, M the largest m_c.
// Bindings: 0 activations (float[], read and write).
// Params: 0 chunks, 1 output float offset, 2 partials float offset.
// Defines: WG_SIZE, HEAD_DIM. Work groups: one per head.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer A { float act[]; };

#define STRIDE uint(HEAD_DIM + 2)

void main()
{
    uint h = gl_WorkGroupID.x, n = PARAM_U(0);
    uint base = PARAM_U(2) + h * n * STRIDE;
    float m = -3.0e38;
    for (uint c = 0u; c < n; c++)
        m = max(m, act[base + c * STRIDE]);
    float l = 0.0;
    for (uint c = 0u; c < n; c++)
        l += act[base + c * STRIDE + 1u] * exp(act[base + c * STRIDE] - m);
    for (uint d = gl_LocalInvocationIndex; d < uint(HEAD_DIM); d += uint(WG_SIZE)) {
        float o = 0.0;
        for (uint c = 0u; c < n; c++)
            o += act[base + c * STRIDE + 2u + d] * exp(act[base + c * STRIDE] - m);
        act[PARAM_U(1) + h * uint(HEAD_DIM) + d] = o / l;
    }
}
