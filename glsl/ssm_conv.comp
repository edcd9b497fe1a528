// A Mamba block's causal convolution over a pass's tokens (ops/ssm.h):
// xc[t][c] = silu(taps[c] . (inputs t - D_CONV + 1 .. t of channel c) +
// bias[c]), the inputs before the pass's first token from the recurrent
// state, and the last D_CONV - 1 inputs written as the next state.
// Bindings: 0 the layer's parameters (read), 1 act (read: x rows; written:
//   the convolved rows), 2 the layer's state (read: the source slot;
//   written: the destination slot).
// Defines: D_INNER, D_CONV, WG_SIZE.
// Params: 0 tokens n, 1 / 2 float offset of token 0's x in act and floats a
//   token, 3 / 4 the same of the output, 5 / 6 float offsets in the state
//   buffer of the source's and the destination's inputs ((D_CONV - 1) rows
//   of D_INNER, the oldest first), 7 not 0: no inputs before (zeros), 8 / 9
//   float offsets of the taps (D_CONV a channel, the oldest input's first)
//   and the bias in the parameters.
// Work groups: x: channels; y: n + D_CONV - 1 (a token's output, then the
//   next state's rows).
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer P { float p[]; };
layout(std430, binding = 1) restrict buffer A { float a[]; };
layout(std430, binding = 2) restrict buffer S { float st[]; };

// input i of channel c, i counted from the pass's first token (negative:
// the state's)
float input_at(int i, uint c)
{
    if (i >= 0)
        return a[PARAM_U(1) + uint(i) * PARAM_U(2) + c];
    if (PARAM_U(7) != 0u)
        return 0.0;
    return st[PARAM_U(5) + uint(i + D_CONV - 1) * uint(D_INNER) + c];
}

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= uint(D_INNER))
        return;
    int n = PARAM_I(0), t = int(gl_WorkGroupID.y);
    if (t >= n) { // row k of the next state: the input k - (D_CONV - 1) from the end
        int k = t - n;
        st[PARAM_U(6) + uint(k) * uint(D_INNER) + c] = input_at(n - (D_CONV - 1) + k, c);
        return;
    }
    uint w = PARAM_U(8) + c * uint(D_CONV);
    float s = 0.0;
    for (int k = 0; k < D_CONV; k++)
        s += p[w + uint(k)] * input_at(t - (D_CONV - 1) + k, c);
    s += p[PARAM_U(9) + c];
    a[PARAM_U(3) + uint(t) * PARAM_U(4) + c] = s / (1.0 + exp(-s));
}
