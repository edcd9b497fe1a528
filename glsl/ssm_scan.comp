// A Mamba block's selective scan over a pass's tokens (ops/ssm.h), channel c
// with state h[c][0 .. D_STATE):
//   step = softplus(dt_w[c] . dt_in(t) + dt_b[c])   (the step's projection)
//   h = h * exp(step A[c]) + B(t) x[t][c] step,  y = h . C(t)
//   out[t][c] = (y + D[c] x[t][c]) silu(z[t][c])
// dt_in, B and C are token t's dt|B|C row (RMS-normalised each, times their
// weights, with BC_NORM). MAMBA2: the channels in heads of HEAD_DIM, whose
// step is softplus(dt(t)[head] + dt_b[head]) from the in projection, with a
// scalar A, D and dt_b a head; B and C after x in the convolved row, N_GROUP
// groups (head h takes group h % N_GROUP). The tokens go in sub-chunks of T
// (param 1); one sub-chunk (a decode step, a small batch):
//   PHASE 0  LANES invocations a channel, one a state value (the step's dot
//            product split among them), scan the tokens from the state to
//            out and the next state
// several (a prefill chunk):
//   PHASE 3  a thread a (channel, DT_TOK tokens) makes the tokens' steps
//   PHASE 4  a thread a (channel, sub-chunk) scans its tokens from zero,
//            leaving y, the running sum of the steps (in place of the steps)
//            and the sub-chunk's final h (its carry slot)
//   PHASE 1  a thread a (channel, state value) walks the sub-chunks: each
//            carry slot gets the h the sub-chunk starts from, the last the
//            next state
//   PHASE 2  a thread a (channel, token) adds what the start h contributes,
//            C(t) . (h0 exp(A[c] cum(t))), and writes out
// Mamba-2 takes its SSD form for the sub-chunks instead of PHASE 4: PHASE 3
// (its steps), 6 (C(t) . B(u) of a sub-chunk's tokens), 7 (y within the
// sub-chunk), 8 (the sub-chunk's end state), 9 (the steps' running sums),
// then 1 and 2 as Mamba's.
// And Mamba-2's grouped norm of out, after either:
//   PHASE 5  a work group a (group, token): out's D_INNER / N_GROUP values of
//            the group RMS-normalised, times their weights, in place
// Bindings: 0 the layer's parameters (read), 1 act (read: x, dt|B|C and z
//   rows; written: out, the steps' sums, carries), 2 the layer's state
//   (read: the source slot; written: the destination slot).
// Defines: D_INNER, D_STATE, DT_RANK (MAMBA2: the heads), WG_SIZE, PHASE,
//   BC_NORM, MAMBA2, HEAD_DIM, N_GROUP; LANES: a power of two of at least
//   D_STATE, dividing WG_SIZE; DT_TOK: PHASE 3's tokens a work group (DT_TOK x
//   DT_RANK floats of shared memory).
// Params: 0 tokens n, 1 T, 2 / 3 float offset in act of token 0's x and
//   floats a token, 4 / 5 the same of dt|B|C (MAMBA2: of the raw steps), 6 /
//   7 of z, 8 / 9 of out, 10 of the steps' running sums (9's stride), 11 of
//   the carries (D_INNER x D_STATE a sub-chunk), 12 / 13 float offsets in the
//   state buffer of the source's and the destination's h (D_STATE a
//   channel), 14 not 0: the source is zeros, 15 dt_w (DT_RANK a channel), 16
//   dt_b, 17 A (D_STATE a channel), 18 D, 19 the norms' weights (DT_RANK,
//   D_STATE, D_STATE; MAMBA2: the grouped norm's, D_INNER) in the parameters,
//   20 eps (float bits), 21 float offset in act of the sub-chunks' G (T x T
//   a sub-chunk and group).
// Work groups: PHASE 0: x channels (WG_SIZE / LANES a group); PHASE 3: x
//   channels, y DT_TOK tokens; PHASE 2: x channels, y tokens; PHASE 4: x
//   channels, y sub-chunks; PHASE 1: x channels x D_STATE; PHASE 5: x groups,
//   y tokens; PHASE 6: x sub-chunks, y groups; PHASE 7: x channels, y tokens;
//   PHASE 8: x channels x D_STATE, y sub-chunks; PHASE 9: x channels, y
//   sub-chunks.
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

float softplus(float v) { return v <= 20.0 ? log(1.0 + exp(v)) : v; }

// Where the two kinds of block differ: B and C of token t for channel c
// (times bscale(t) and cscale(t)), A, D
#if MAMBA2
uint head(uint c) { return c / uint(HEAD_DIM); }
uint bc_at(uint t, uint c)
{
    return row(2u, 3u, t) + uint(D_INNER) + (head(c) % uint(N_GROUP)) * uint(D_STATE);
}
float b_at(uint t, uint c, uint s) { return a[bc_at(t, c) + s]; }
float c_at(uint t, uint c, uint s) { return a[bc_at(t, c) + uint(N_GROUP * D_STATE) + s]; }
float bscale(uint t) { return 1.0; }
float cscale(uint t) { return 1.0; }
float a_at(uint c, uint s) { return p[PARAM_U(17) + head(c)]; }
float d_at(uint c) { return p[PARAM_U(18) + head(c)]; }
float step_of(uint t, uint c) { return softplus(a[row(4u, 5u, t) + head(c)] + p[PARAM_U(16) + head(c)]); }
#else
float b_at(uint t, uint c, uint s)
{
    return a[row(4u, 5u, t) + uint(DT_RANK) + s] * norm_w(uint(DT_RANK) + s);
}
float c_at(uint t, uint c, uint s)
{
    return a[row(4u, 5u, t) + uint(DT_RANK + D_STATE) + s] * norm_w(uint(DT_RANK + D_STATE) + s);
}
float bscale(uint t) { return inv_rms(row(4u, 5u, t) + uint(DT_RANK), uint(D_STATE)); }
float cscale(uint t) { return inv_rms(row(4u, 5u, t) + uint(DT_RANK + D_STATE), uint(D_STATE)); }
float a_at(uint c, uint s) { return p[PARAM_U(17) + c * uint(D_STATE) + s]; }
float d_at(uint c) { return p[PARAM_U(18) + c]; }
#endif

#if PHASE == 0
shared float red[WG_SIZE];

// the sum of v over the LANES lanes of this invocation's channel, in lane
// order up to 32 lanes (reached by every invocation of the work group)
float lane_sum(float v)
{
    uint li = gl_LocalInvocationIndex, base = li - li % uint(LANES);
    red[li] = v;
    memoryBarrierShared();
    barrier();
#if LANES > 32
    // (a tree over many lanes: each reads two values a round, not all)
    for (uint w = uint(LANES) / 2u; w > 0u; w /= 2u) {
        if (li - base < w)
            red[li] += red[li + w];
        memoryBarrierShared();
        barrier();
    }
    float s = red[base];
#else
    float s = 0.0;
    for (uint k = 0u; k < uint(LANES); k++)
        s += red[base + k];
#endif
    barrier();
    return s;
}

void main()
{
    uint li = gl_LocalInvocationIndex, lane = li % uint(LANES);
    uint c = gl_WorkGroupID.x * uint(WG_SIZE / LANES) + li / uint(LANES);
    // (every invocation stays to the end: lane_sum's barriers)
    bool on = c < uint(D_INNER), mine = on && lane < uint(D_STATE);
    uint cc = on ? c : 0u, hs = cc * uint(D_STATE) + lane;
    float h = 0.0, av = 0.0;
    if (mine) {
        h = PARAM_U(14) == 0u ? st[PARAM_U(12) + hs] : 0.0;
        av = a_at(cc, lane);
    }
    float dvc = d_at(cc);
    for (uint t = 0u; t < N_TOK; t++) {
#if MAMBA2
        float step = step_of(t, cc);
#else
        // step = softplus(dt_w[c] . dt_in + dt_b), the dot split over the lanes
        uint r = row(4u, 5u, t);
        float sd = inv_rms(r, uint(DT_RANK)), part = 0.0;
        for (uint k = lane; k < uint(DT_RANK); k += uint(LANES))
            part += p[PARAM_U(15) + cc * uint(DT_RANK) + k] * (a[r + k] * sd * norm_w(k));
        float step = softplus(lane_sum(part) + p[PARAM_U(16) + cc]);
#endif
        float x = a[row(2u, 3u, t) + cc], yp = 0.0;
        if (mine) {
            h = h * exp(step * av) + b_at(t, cc, lane) * bscale(t) * (x * step);
            yp = h * c_at(t, cc, lane) * cscale(t);
        }
        float y = lane_sum(yp);
        if (on && lane == 0u)
            a[row(8u, 9u, t) + c] = (y + dvc * x) * silu(a[row(6u, 7u, t) + c]);
    }
    if (mine)
        st[PARAM_U(13) + hs] = h;
}
#elif PHASE == 3
#if MAMBA2
void main()
{
    uint c = gl_GlobalInvocationID.x, t0 = gl_WorkGroupID.y * uint(DT_TOK);
    for (uint t = t0; c < uint(D_INNER) && t < min(N_TOK, t0 + uint(DT_TOK)); t++)
        a[PARAM_U(10) + t * PARAM_U(9) + c] = step_of(t, c);
}
#else
// DT_TOK tokens' dt inputs (normalised, times their weights) staged for the
// work group's channels
shared float xin[DT_TOK * DT_RANK];

void main()
{
    uint c = gl_GlobalInvocationID.x, t0 = gl_WorkGroupID.y * uint(DT_TOK);
    uint nt = min(uint(DT_TOK), N_TOK - t0);
    for (uint i = gl_LocalInvocationIndex; i < nt * uint(DT_RANK); i += uint(WG_SIZE)) {
        uint tt = i / uint(DT_RANK), k = i % uint(DT_RANK), r = row(4u, 5u, t0 + tt);
        xin[i] = a[r + k] * inv_rms(r, uint(DT_RANK)) * norm_w(k);
    }
    memoryBarrierShared();
    barrier();
    if (c >= uint(D_INNER))
        return;
    float acc[DT_TOK];
    for (uint tt = 0u; tt < uint(DT_TOK); tt++)
        acc[tt] = 0.0;
    // (a channel's row of dt_w read once for DT_TOK tokens)
    for (uint k = 0u; k < uint(DT_RANK); k++) {
        float w = p[PARAM_U(15) + c * uint(DT_RANK) + k];
        for (uint tt = 0u; tt < uint(DT_TOK); tt++)
            acc[tt] += w * xin[min(tt, nt - 1u) * uint(DT_RANK) + k];
    }
    float b = p[PARAM_U(16) + c];
    for (uint tt = 0u; tt < nt; tt++)
        a[PARAM_U(10) + (t0 + tt) * PARAM_U(9) + c] = softplus(acc[tt] + b);
}
#endif
#elif PHASE == 4
void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= uint(D_INNER))
        return;
    uint j = gl_WorkGroupID.y, t0 = j * T_SUB, t1 = min(N_TOK, t0 + T_SUB);
    float h[D_STATE], av[D_STATE];
    for (uint s = 0u; s < uint(D_STATE); s++) {
        h[s] = 0.0;
        av[s] = a_at(c, s);
    }
    float cum = 0.0;
    for (uint t = t0; t < t1; t++) {
        uint ci = PARAM_U(10) + t * PARAM_U(9) + c;
        float sb = bscale(t), sc = cscale(t);
        float step = a[ci], xs = a[row(2u, 3u, t) + c] * step, y = 0.0;
        for (uint s = 0u; s < uint(D_STATE); s++) {
            h[s] = h[s] * exp(step * av[s]) + b_at(t, c, s) * sb * xs;
            y += h[s] * c_at(t, c, s) * sc;
        }
        cum += step;
        a[row(8u, 9u, t) + c] = y;
        a[ci] = cum;
    }
    uint dst = PARAM_U(11) + (j * uint(D_INNER) + c) * uint(D_STATE);
    for (uint s = 0u; s < uint(D_STATE); s++)
        a[dst + s] = h[s];
}
#elif PHASE == 6
// G[t][u] = C(t) . B(u) of a sub-chunk's tokens u <= t, a (sub-chunk, group)
// a work group (Mamba-2's SSD: shared by the group's heads)
void main()
{
    uint j = gl_WorkGroupID.x, g = gl_WorkGroupID.y, t0 = j * T_SUB;
    uint nt = min(T_SUB, N_TOK - t0), base = PARAM_U(21) + (j * uint(N_GROUP) + g) * T_SUB * T_SUB;
    for (uint e = gl_LocalInvocationIndex; e < nt * nt; e += uint(WG_SIZE)) {
        uint t = e / nt, u = e % nt;
        if (u > t)
            continue;
        uint bt = row(2u, 3u, t0 + t) + uint(D_INNER) + g * uint(D_STATE);
        uint bu = row(2u, 3u, t0 + u) + uint(D_INNER) + g * uint(D_STATE);
        float s = 0.0;
        for (uint k = 0u; k < uint(D_STATE); k++)
            s += a[bt + uint(N_GROUP * D_STATE) + k] * a[bu + k];
        a[base + t * T_SUB + u] = s;
    }
}
#elif PHASE == 7
// Mamba-2's SSD within a sub-chunk, a thread a (channel, token t): y(t) =
// sum over its sub-chunk's u <= t of G[t][u] exp(A (cum(t) - cum(u))) step(u)
// x(u) (the state from before the sub-chunk added by PHASE 2)
void main()
{
    uint c = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    if (c >= uint(D_INNER))
        return;
    uint j = t / T_SUB, t0 = j * T_SUB, g = head(c) % uint(N_GROUP);
    uint base = PARAM_U(21) + (j * uint(N_GROUP) + g) * T_SUB * T_SUB + (t - t0) * T_SUB;
    float av = a_at(c, 0u), suf = 0.0, y = 0.0;
    for (uint u = t + 1u; u-- > t0;) {
        float step = a[PARAM_U(10) + u * PARAM_U(9) + c];
        y += a[base + (u - t0)] * exp(av * suf) * step * a[row(2u, 3u, u) + c];
        suf += step;
    }
    a[row(8u, 9u, t) + c] = y;
}
#elif PHASE == 8
// Mamba-2's state at a sub-chunk's end from zero, a thread a (channel, state
// value, sub-chunk): sum over its tokens u of exp(A (cum(end) - cum(u)))
// step(u) x(u) B(u), into the sub-chunk's carry slot
void main()
{
    uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
    if (i >= uint(D_INNER * D_STATE))
        return;
    uint c = i / uint(D_STATE), s = i % uint(D_STATE), t0 = j * T_SUB;
    uint t1 = min(N_TOK, t0 + T_SUB);
    float av = a_at(c, s), suf = 0.0, h = 0.0;
    for (uint u = t1; u-- > t0;) {
        float step = a[PARAM_U(10) + u * PARAM_U(9) + c];
        h += exp(av * suf) * step * a[row(2u, 3u, u) + c] * b_at(u, c, s);
        suf += step;
    }
    a[PARAM_U(11) + j * uint(D_INNER * D_STATE) + i] = h;
}
#elif PHASE == 9
// the steps of a (channel, sub-chunk) made their running sums, in place
void main()
{
    uint c = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y, t0 = j * T_SUB;
    if (c >= uint(D_INNER))
        return;
    float cum = 0.0;
    for (uint t = t0; t < min(N_TOK, t0 + T_SUB); t++) {
        uint ci = PARAM_U(10) + t * PARAM_U(9) + c;
        cum += a[ci];
        a[ci] = cum;
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
    float av = a_at(c, i % uint(D_STATE));
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
#elif PHASE == 2
void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= uint(D_INNER))
        return;
    uint t = gl_WorkGroupID.y, j = t / T_SUB, o = row(8u, 9u, t) + c;
    float sc = cscale(t), cum = a[PARAM_U(10) + t * PARAM_U(9) + c], y = a[o];
    uint h0 = PARAM_U(11) + (j * uint(D_INNER) + c) * uint(D_STATE);
#if MAMBA2
    // (one decay for the head: C(t) . h0 first)
    float dot = 0.0;
    for (uint s = 0u; s < uint(D_STATE); s++)
        dot += c_at(t, c, s) * a[h0 + s];
    y += dot * exp(a_at(c, 0u) * cum);
#else
    for (uint s = 0u; s < uint(D_STATE); s++)
        y += c_at(t, c, s) * sc * a[h0 + s] * exp(a_at(c, s) * cum);
#endif
    float x = a[row(2u, 3u, t) + c];
    a[o] = (y + d_at(c) * x) * silu(a[row(6u, 7u, t) + c]);
}
#else
shared float red[WG_SIZE];

void main()
{
    uint g = gl_WorkGroupID.x, t = gl_WorkGroupID.y, li = gl_LocalInvocationIndex;
    uint n = uint(D_INNER / N_GROUP), base = row(8u, 9u, t) + g * n;
    float ss = 0.0;
    for (uint i = li; i < n; i += uint(WG_SIZE))
        ss += a[base + i] * a[base + i];
    red[li] = ss;
    memoryBarrierShared();
    barrier();
    for (uint w = uint(WG_SIZE) / 2u; w > 0u; w /= 2u) {
        if (li < w)
            red[li] += red[li + w];
        memoryBarrierShared();
        barrier();
    }
    float scale = inversesqrt(red[0] / float(n) + PARAM_F(20));
    for (uint i = li; i < n; i += uint(WG_SIZE))
        a[base + i] *= scale * p[PARAM_U(19) + g * n + i];
}
#endif
