// A Mamba block's selective scan over a pass's tokens (ops/ssm.h), channel c
// with state h[c][0 .. D_STATE):
//   step = softplus(dt_w[c] . dt_in(t) + dt_b[c])   (the step's projection)
//   h = h * exp(step A[c]) + B(t) x[t][c] step,  y = h . C(t)
//   out[t][c] = (y + D[c] x[t][c]) silu(z[t][c])
// dt_in, B and C are token t's dt|B|C row (RMS-normalised each, times their
// weights, with BC_NORM). The tokens go in sub-chunks of T (param 1):
//   PHASE 0  a thread a (channel, sub-chunk) scans its tokens: with one
//            sub-chunk from the state and to the end (out and the next
//            state); with several from zero, leaving y, the running sum of
//            the steps and the sub-chunk's final h (its carry slot)
//   PHASE 1  a thread a (channel, state value) walks the sub-chunks: each
//            carry slot gets the h the sub-chunk starts from, the last the
//            next state
//   PHASE 2  a thread a (channel, token) adds what the start h contributes,
//            C(t) . (h0 exp(A[c] cum(t))), and writes out
// Bindings: 0 the layer's parameters (read), 1 act (read: x, dt|B|C and z
//   rows; written: out, the steps' sums, carries), 2 the layer's state
//   (read: the source slot; written: the destination slot).
// Defines: D_INNER, D_STATE, DT_RANK, WG_SIZE, PHASE, BC_NORM.
// Params: 0 tokens n, 1 T, 2 / 3 float offset in act of token 0's x and
//   floats a token, 4 / 5 the same of dt|B|C, 6 / 7 of z, 8 / 9 of out, 10 of
//   the steps' running sums (9's stride), 11 of the carries (D_INNER x
//   D_STATE a sub-chunk), 12 / 13 float offsets in the state buffer of the
//   source's and the destination's h (D_STATE a channel), 14 not 0: the
//   source is zeros, 15 dt_w (DT_RANK rows of D_INNER), 16 dt_b, 17 A
//   (D_STATE a channel), 18 D, 19 the norms' weights (DT_RANK, D_STATE,
//   D_STATE) in the parameters, 20 eps (float bits).
// Work groups: PHASE 0: x channels, y sub-chunks; PHASE 1: x channels x
//   D_STATE; PHASE 2: x channels, y tokens.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer P { float p[]; };
layout(std430, binding = 1) restrict buffer A { float a[]; };
layout(std430, binding = 2) restrict buffer S { float st[]; };

#define N_TOK PARAM_U(0)
#define T_SUB PARAM_U(1)

uint row(uint off, uint stride, uint t) { return PARAM_U(off) + t * PARAM_U(stride); }

// 1 / rms of n values from index i of a (1 without BC_NORM)
float inv_rms(uint i, uint n)
{
#if BC_NORM
    float ss = 0.0;
    for (uint k = 0u; k < n; k++)
        ss += a[i + k] * a[i + k];
    return inversesqrt(ss / float(n) + PARAM_F(20));
#else
    return 1.0;
#endif
}

float norm_w(uint k)
{
#if BC_NORM
    return p[PARAM_U(19) + k];
#else
    return 1.0;
#endif
}

float silu(float v) { return v / (1.0 + exp(-v)); }

#if PHASE == 0
void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= uint(D_INNER))
        return;
    uint j = gl_WorkGroupID.y, t0 = j * T_SUB, t1 = min(N_TOK, t0 + T_SUB);
    bool whole = T_SUB >= N_TOK;
    float h[D_STATE], av[D_STATE];
    for (uint s = 0u; s < uint(D_STATE); s++) {
        h[s] = whole && PARAM_U(14) == 0u ? st[PARAM_U(12) + c * uint(D_STATE) + s] : 0.0;
        av[s] = p[PARAM_U(17) + c * uint(D_STATE) + s];
    }
    float cum = 0.0, dvc = p[PARAM_U(18) + c], dtb = p[PARAM_U(16) + c];
    for (uint t = t0; t < t1; t++) {
        uint r = row(4u, 5u, t);
        float sd = inv_rms(r, uint(DT_RANK));
        float sb = inv_rms(r + uint(DT_RANK), uint(D_STATE));
        float sc = inv_rms(r + uint(DT_RANK + D_STATE), uint(D_STATE));
        float acc = 0.0;
        for (uint k = 0u; k < uint(DT_RANK); k++)
            acc += p[PARAM_U(15) + k * uint(D_INNER) + c] * (a[r + k] * sd * norm_w(k));
        acc += dtb;
        float step = acc <= 20.0 ? log(1.0 + exp(acc)) : acc;
        float x = a[row(2u, 3u, t) + c], xs = x * step, y = 0.0;
        for (uint s = 0u; s < uint(D_STATE); s++) {
            float b = a[r + uint(DT_RANK) + s] * sb * norm_w(uint(DT_RANK) + s);
            float cv = a[r + uint(DT_RANK + D_STATE) + s] * sc * norm_w(uint(DT_RANK + D_STATE) + s);
            h[s] = h[s] * exp(step * av[s]) + b * xs;
            y += h[s] * cv;
        }
        uint o = row(8u, 9u, t) + c;
        if (whole) {
            a[o] = (y + dvc * x) * silu(a[row(6u, 7u, t) + c]);
        } else {
            cum += step;
            a[o] = y;
            a[PARAM_U(10) + t * PARAM_U(9) + c] = cum;
        }
    }
    uint dst = whole ? PARAM_U(13) + c * uint(D_STATE)
                     : PARAM_U(11) + (j * uint(D_INNER) + c) * uint(D_STATE);
    for (uint s = 0u; s < uint(D_STATE); s++) {
        if (whole)
            st[dst + s] = h[s];
        else
            a[dst + s] = h[s];
    }
}
#elif PHASE == 1
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= uint(D_INNER * D_STATE))
        return;
    uint c = i / uint(D_STATE);
    float carry = PARAM_U(14) == 0u ? st[PARAM_U(12) + i] : 0.0;
    float av = p[PARAM_U(17) + i];
    uint n_sub = (N_TOK + T_SUB - 1u) / T_SUB;
    for (uint j = 0u; j < n_sub; j++) {
        uint k = PARAM_U(11) + j * uint(D_INNER * D_STATE) + i;
        float hl = a[k];
        a[k] = carry;
        uint last = min(N_TOK, (j + 1u) * T_SUB) - 1u;
        carry = carry * exp(av * a[PARAM_U(10) + last * PARAM_U(9) + c]) + hl;
    }
    st[PARAM_U(13) + i] = carry;
}
#else
void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= uint(D_INNER))
        return;
    uint t = gl_WorkGroupID.y, j = t / T_SUB;
    uint r = row(4u, 5u, t), o = row(8u, 9u, t) + c;
    float sc = inv_rms(r + uint(DT_RANK + D_STATE), uint(D_STATE));
    float cum = a[PARAM_U(10) + t * PARAM_U(9) + c], y = a[o];
    uint h0 = PARAM_U(11) + (j * uint(D_INNER) + c) * uint(D_STATE);
    for (uint s = 0u; s < uint(D_STATE); s++) {
        float cv = a[r + uint(DT_RANK + D_STATE) + s] * sc * norm_w(uint(DT_RANK + D_STATE) + s);
        y += cv * a[h0 + s] * exp(p[PARAM_U(17) + c * uint(D_STATE) + s] * cum);
    }
    float x = a[row(2u, 3u, t) + c];
    a[o] = (y + p[PARAM_U(18) + c] * x) * silu(a[row(6u, 7u, t) + c]);
}
#endif
