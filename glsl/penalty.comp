// The repetition penalty of llama.cpp on the logits of the tokens in the
// last N positions, each distinct id once: l / p when l > 0, else l * p.
// Bindings: 0 activations (float[]: logits), 1 token ids (uint[], read).
// Params: 0 first slot of the window, 1 slots in it, 2 logits float offset,
//         3 penalty (float bits), 4 vocabulary size.
// Defines: WG_SIZE. One work group.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer A { float act[]; };
layout(std430, binding = 1) readonly restrict buffer T { uint tokens[]; };

void main()
{
    uint first = PARAM_U(0), n = PARAM_U(1);
    float p = PARAM_F(3);
    for (uint i = gl_LocalInvocationIndex; i < n; i += uint(WG_SIZE)) {
        uint id = tokens[first + i];
        bool later = false;  // the last occurrence applies it
        for (uint j = i + 1u; j < n && !later; j++)
            later = tokens[first + j] == id;
        if (later || id >= PARAM_U(4))
            continue;
        uint o = PARAM_U(2) + id;
        float l = act[o];
        act[o] = l > 0.0 ? l / p : l * p;
    }
}
