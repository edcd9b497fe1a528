// RWKV-7's time and channel mixes around their matrix products (ops/rwkv.h).
// A token's rows are at a block's offset + t x its stride (floats of act);
// channel c of head h is c = h x HEAD + j.
//   PHASE 0  LayerNorm of x rows, times the weight plus the bias (NMIX 0);
//            with NMIX 1 or 6 the token-shift mixes instead: xn(t) + (xn(t-1)
//            - xn(t)) lerp[m] for each mix m, xn(-1) the state's (zeros for
//            none), the last token's xn kept as the next state. Work groups
//            a (slice of WG_SIZE channels, token), each making its token's
//            row statistics (and its previous token's: no second pass); the
//            plain norm a work group a row
//   PHASE 1  elementwise, in place: up to two ranges of rows, each tanh (1),
//            sigmoid (2) or relu squared (3)
//   PHASE 2  the update's inputs, a work group a (head, token): decay
//            w = exp(-0.606531 sigmoid(w0 + w)), a = sigmoid(a0 + a), v toward
//            the first layer's (FIRST: v kept as the first layer's), kk =
//            k k_k normalised a head, k = k + (a k k_a - k k_a); written in
//            place: w, k, v, and -kk into a's rows, kk a into the value
//            residual's
//   PHASE 3  the state update, a work group a head, HEAD invocations (one a
//            state row, its HEAD values in registers) through the tokens in
//            order: S = S diag(w) + v k^T + (S a) b^T, y = S r
//   PHASE 4  after it, a work group a (head, token): y's LayerNorm over the
//            head (epsilon 64e-5), times ln_w plus ln_b, plus v (k . r r_k),
//            times the gate g
//   PHASE 5  PHASES 2 to 4 in one dispatch for a few tokens (a decode step)
//   PHASE 6, 7  in place of PHASE 3 for many tokens: the chunked form of the
//            update (a chunk's tokens together through C x C matrices; the
//            state carried from chunk to chunk), below
// Bindings: 0 the parameters (a layer's buffer, or act for the output norm),
//   1 act, 2 the layer's state.
// Defines: PHASE, WG_SIZE (a power of two); PHASE 0: N_EMBD, NMIX; PHASE 2 to
//   7: HEAD (WG_SIZE >= HEAD); PHASE 6, 7: CHUNK, RWKV_CHUNK_FLOATS (a
//   chunk's data: 4 CHUNK HEAD + HEAD + 4 CHUNK^2); PHASE 7: QT.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer P { float p[]; };
layout(std430, binding = 1) restrict buffer A { float a[]; };
layout(std430, binding = 2) restrict buffer S { float st[]; };

#include "reduce.glsl"

float sigm(float v) { return 1.0 / (1.0 + exp(-v)); }

#if PHASE == 0
// Params: 0 tokens n, 1 / 2 x's offset and stride, 3 the output's offset
//   (mix 0), 4 floats between mixes, 5 the output's stride, 6 / 7 the
//   source's and destination's float offsets in the state, 8 not 0: no
//   source (zeros), 9 / 10 / 11 the weight's, bias's and lerps' offsets in
//   P, 12 epsilon.
// The mean and 1 / deviation of x's row t (each invocation summing its
// channels lid + k WG_SIZE), and its channel c normed, times the weight
// plus the bias
vec2 row_stats(uint t)
{
    uint lid = gl_LocalInvocationIndex, x = PARAM_U(1) + t * PARAM_U(2);
    float s = 0.0;
    for (uint c = lid; c < uint(N_EMBD); c += uint(WG_SIZE))
        s += a[x + c];
    float mean = wg_reduce_sum(s) / float(N_EMBD);
    float q = 0.0;
    for (uint c = lid; c < uint(N_EMBD); c += uint(WG_SIZE))
        q += (a[x + c] - mean) * (a[x + c] - mean);
    return vec2(mean, inversesqrt(wg_reduce_sum(q) / float(N_EMBD) + PARAM_F(12)));
}

float normed(uint t, vec2 ms, uint c)
{
    float v = a[PARAM_U(1) + t * PARAM_U(2) + c];
    return (v - ms.x) * ms.y * p[PARAM_U(9) + c] + p[PARAM_U(10) + c];
}

void main()
{
    uint t = gl_WorkGroupID.y, n = PARAM_U(0);
    vec2 cur = row_stats(t);
#if NMIX == 0
    // (one work group a row: it may be normed in place)
    for (uint c = gl_LocalInvocationIndex; c < uint(N_EMBD); c += uint(WG_SIZE))
        a[PARAM_U(3) + t * PARAM_U(5) + c] = normed(t, cur, c);
#else
    // (each work group makes the rows' statistics and writes its slice)
    uint c = gl_WorkGroupID.x * uint(WG_SIZE) + gl_LocalInvocationIndex;
    vec2 prev = vec2(0.0);
    if (t > 0u) // (uniform in the work group: its barriers are reached by all)
        prev = row_stats(t - 1u);
    if (c < uint(N_EMBD)) {
        float xc = normed(t, cur, c);
        float xp = t > 0u ? normed(t - 1u, prev, c) : PARAM_U(8) != 0u ? 0.0 : st[PARAM_U(6) + c];
        for (uint m = 0u; m < uint(NMIX); m++)
            a[PARAM_U(3) + m * PARAM_U(4) + t * PARAM_U(5) + c] =
                xc + (xp - xc) * p[PARAM_U(11) + m * uint(N_EMBD) + c];
        if (t + 1u == n)
            st[PARAM_U(7) + c] = xc;
    }
#endif
}

#elif PHASE == 1
// Params: 0 tokens n; range r (r = 0, 1) at 1 + 4 r: its offset, stride,
//   columns and function (0: none).
// Work groups: x: columns / WG_SIZE, y: tokens, z: the range.
void main()
{
    uint r = 1u + 4u * gl_WorkGroupID.z, c = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    uint f = PARAM_U(r + 3u);
    if (c >= PARAM_U(r + 2u) || f == 0u)
        return;
    uint i = PARAM_U(r) + t * PARAM_U(r + 1u) + c;
    float v = a[i];
    a[i] = f == 1u ? tanh(v) : f == 2u ? sigm(v) : (v > 0.0 ? v * v : 0.0);
}

#elif PHASE == 2
// Params: 0 tokens n, 1 the rows' stride, 2 / 3 / 4 k's, v's and the first
//   layer's v's offsets, 5 / 6 / 7 the decay's, a's and the value
//   residual's low-rank outputs' offsets, 8 / 9 / 10 / 11 / 12 w0's, a0's,
//   v0's, k_k's and k_a's offsets in P, 13 not 0: the first layer.
// Work groups: x: heads, y: tokens.
void main()
{
    uint j = gl_LocalInvocationIndex, t = gl_WorkGroupID.y;
    bool on = j < uint(HEAD);
    uint c = gl_WorkGroupID.x * uint(HEAD) + (on ? j : 0u), row = t * PARAM_U(1) + c;
    float w = on ? a[PARAM_U(5) + row] : 0.0, ga = on ? a[PARAM_U(6) + row] : 0.0;
    float k = on ? a[PARAM_U(2) + row] : 0.0, v = on ? a[PARAM_U(3) + row] : 0.0;
    float kk = k * p[PARAM_U(11) + c];
    float len = sqrt(wg_reduce_sum(on ? kk * kk : 0.0));
    if (!on)
        return;
    kk /= max(len, 1e-12);
    ga = sigm(p[PARAM_U(9) + c] + ga);
    if (PARAM_U(13) != 0u) {
        a[PARAM_U(4) + row] = v;
    } else {
        float mixv = sigm(p[PARAM_U(10) + c] + a[PARAM_U(7) + row]);
        a[PARAM_U(3) + row] = v + (a[PARAM_U(4) + row] - v) * mixv;
    }
    float ka = k * p[PARAM_U(12) + c];
    a[PARAM_U(2) + row] = k + (ga * ka - ka);
    a[PARAM_U(5) + row] = exp(-0.606531 * sigm(p[PARAM_U(8) + c] + w));
    a[PARAM_U(6) + row] = -kk;
    a[PARAM_U(7) + row] = kk * ga;
}

#elif PHASE == 3
// Params: 0 tokens n, 1 the rows' stride, 2 / 3 / 4 / 5 / 6 / 7 r's, w's,
//   k's, v's, a's and b's offsets, 8 y's offset, 9 / 10 the source's and
//   destination's float offsets in the state (a head's HEAD rows of HEAD
//   values one after the other), 11 not 0: no source (zeros).
// Work groups: x: heads. A token's r w k a b go through shared memory in two
// buffers: each invocation loads its values of the next token while the
// step of this one runs, and one barrier a token separates the two.
shared float sh[2][5][HEAD];

void main()
{
    uint i = gl_LocalInvocationIndex, h = gl_WorkGroupID.x, n = PARAM_U(0);
    bool on = i < uint(HEAD);
    uint c = h * uint(HEAD) + (on ? i : 0u), srow = c * uint(HEAD);
    float s[HEAD];
    for (int j = 0; j < HEAD; j++)
        s[j] = PARAM_U(11) != 0u ? 0.0 : st[PARAM_U(9) + srow + uint(j)];
    float nv[5], v = 0.0, v_next = 0.0;
    if (on) {
        sh[0][0][i] = a[PARAM_U(2) + c];
        sh[0][1][i] = a[PARAM_U(3) + c];
        sh[0][2][i] = a[PARAM_U(4) + c];
        sh[0][3][i] = a[PARAM_U(6) + c];
        sh[0][4][i] = a[PARAM_U(7) + c];
        v = a[PARAM_U(5) + c];
    }
    memoryBarrierShared();
    barrier();
    for (uint t = 0u; t < n; t++) {
        uint cur = t & 1u;
        bool more = on && t + 1u < n;
        if (more) { // the next token's values, loaded while this one's step runs
            uint row = (t + 1u) * PARAM_U(1) + c;
            nv[0] = a[PARAM_U(2) + row];
            nv[1] = a[PARAM_U(3) + row];
            nv[2] = a[PARAM_U(4) + row];
            nv[3] = a[PARAM_U(6) + row];
            nv[4] = a[PARAM_U(7) + row];
            v_next = a[PARAM_U(5) + row];
        }
        // (four sums a dot product: chains a quarter as long)
        vec4 q = vec4(0.0);
        for (int j = 0; j < HEAD; j += 4)
            q += vec4(s[j], s[j + 1], s[j + 2], s[j + 3]) *
                 vec4(sh[cur][3][j], sh[cur][3][j + 1], sh[cur][3][j + 2], sh[cur][3][j + 3]);
        float sa = (q.x + q.y) + (q.z + q.w);
        q = vec4(0.0);
        for (int j = 0; j < HEAD; j += 4) {
            for (int u = 0; u < 4; u++)
                s[j + u] = s[j + u] * sh[cur][1][j + u] + v * sh[cur][2][j + u] +
                           sa * sh[cur][4][j + u];
            q += vec4(s[j], s[j + 1], s[j + 2], s[j + 3]) *
                 vec4(sh[cur][0][j], sh[cur][0][j + 1], sh[cur][0][j + 2], sh[cur][0][j + 3]);
        }
        float y = (q.x + q.y) + (q.z + q.w);
        if (on)
            a[PARAM_U(8) + t * PARAM_U(1) + c] = y;
        if (more)
            for (uint q = 0u; q < 5u; q++)
                sh[cur ^ 1u][q][i] = nv[q];
        v = v_next;
        memoryBarrierShared();
        barrier();
    }
    if (on)
        for (int j = 0; j < HEAD; j++)
            st[PARAM_U(10) + srow + uint(j)] = s[j];
}

#elif PHASE == 4
// Params: 0 tokens n, 1 the rows' stride, 2 / 3 / 4 / 5 / 6 y's, k's, r's,
//   v's and g's offsets, 7 / 8 / 9 ln_w's, ln_b's and r_k's offsets in P.
// Work groups: x: heads, y: tokens.
void main()
{
    uint j = gl_LocalInvocationIndex, t = gl_WorkGroupID.y;
    bool on = j < uint(HEAD);
    uint c = gl_WorkGroupID.x * uint(HEAD) + (on ? j : 0u), row = t * PARAM_U(1) + c;
    float y = on ? a[PARAM_U(2) + row] : 0.0;
    float kr = on ? a[PARAM_U(3) + row] * a[PARAM_U(4) + row] * p[PARAM_U(9) + c] : 0.0;
    float mean = wg_reduce_sum(y) / float(HEAD);
    float d = on ? y - mean : 0.0;
    float scale = inversesqrt(wg_reduce_sum(d * d) / float(HEAD) + 64e-5);
    float bonus = wg_reduce_sum(kr);
    if (!on)
        return;
    float o = d * scale * p[PARAM_U(7) + c] + p[PARAM_U(8) + c] + a[PARAM_U(5) + row] * bonus;
    a[PARAM_U(2) + row] = o * a[PARAM_U(6) + row];
}

#elif PHASE == 5
// PHASES 2, 3 and 4 in one work group a head, token by token (a decode
// step, a few tokens): the same sums in the same order.
// Params: 0 tokens n, 1 the rows' stride, 2 / 3 / 4 / 5 / 6 / 7 r's, k's, v's,
//   the first layer's v's, y's and g's offsets, 8 / 9 / 10 the decay's, a's
//   and the value residual's low-rank outputs' offsets, 11 / 12 the source's
//   and destination's float offsets in the state, 13 not 0: no source, 14
//   not 0: the first layer, 15 / 16 / 17 / 18 / 19 / 20 / 21 / 22 w0's, a0's,
//   v0's, k_k's, k_a's, r_k's, ln_w's and ln_b's offsets in P.
// Work groups: x: heads.
shared float sh_r[HEAD], sh_w[HEAD], sh_k[HEAD], sh_a[HEAD], sh_b[HEAD];

void main()
{
    uint i = gl_LocalInvocationIndex, h = gl_WorkGroupID.x, n = PARAM_U(0);
    bool on = i < uint(HEAD);
    uint c = h * uint(HEAD) + (on ? i : 0u), srow = c * uint(HEAD);
    float s[HEAD];
    for (int j = 0; j < HEAD; j++)
        s[j] = PARAM_U(13) != 0u ? 0.0 : st[PARAM_U(11) + srow + uint(j)];
    for (uint t = 0u; t < n; t++) {
        uint row = t * PARAM_U(1) + c;
        // the update's inputs (PHASE 2)
        float w = on ? a[PARAM_U(8) + row] : 0.0, ga = on ? a[PARAM_U(9) + row] : 0.0;
        float k = on ? a[PARAM_U(3) + row] : 0.0, v = on ? a[PARAM_U(4) + row] : 0.0;
        float r = on ? a[PARAM_U(2) + row] : 0.0;
        float kk = k * p[PARAM_U(18) + c];
        float len = sqrt(wg_reduce_sum(on ? kk * kk : 0.0));
        kk /= max(len, 1e-12);
        ga = sigm(p[PARAM_U(16) + c] + ga);
        if (on) {
            if (PARAM_U(14) != 0u) {
                a[PARAM_U(5) + row] = v;
            } else {
                float mixv = sigm(p[PARAM_U(17) + c] + a[PARAM_U(10) + row]);
                v = v + (a[PARAM_U(5) + row] - v) * mixv;
            }
            float ka = k * p[PARAM_U(19) + c];
            k = k + (ga * ka - ka);
            sh_r[i] = r;
            sh_w[i] = exp(-0.606531 * sigm(p[PARAM_U(15) + c] + w));
            sh_k[i] = k;
            sh_a[i] = -kk;
            sh_b[i] = kk * ga;
        }
        memoryBarrierShared();
        barrier();
        // the state row of value i (PHASE 3)
        // (as PHASE 3's: four sums a dot product)
        vec4 q = vec4(0.0);
        for (int j = 0; j < HEAD; j += 4)
            q += vec4(s[j], s[j + 1], s[j + 2], s[j + 3]) *
                 vec4(sh_a[j], sh_a[j + 1], sh_a[j + 2], sh_a[j + 3]);
        float sa = (q.x + q.y) + (q.z + q.w);
        q = vec4(0.0);
        for (int j = 0; j < HEAD; j += 4) {
            for (int u = 0; u < 4; u++)
                s[j + u] = s[j + u] * sh_w[j + u] + v * sh_k[j + u] + sa * sh_b[j + u];
            q += vec4(s[j], s[j + 1], s[j + 2], s[j + 3]) *
                 vec4(sh_r[j], sh_r[j + 1], sh_r[j + 2], sh_r[j + 3]);
        }
        float y = (q.x + q.y) + (q.z + q.w);
        // the head norm, bonus and gate (PHASE 4; its reductions' barriers
        // also keep the next token's inputs from the shared values above)
        float kr = on ? k * r * p[PARAM_U(20) + c] : 0.0;
        float mean = wg_reduce_sum(on ? y : 0.0) / float(HEAD);
        float d = on ? y - mean : 0.0;
        float scale = inversesqrt(wg_reduce_sum(d * d) / float(HEAD) + 64e-5);
        float bonus = wg_reduce_sum(kr);
        if (on) {
            float o = d * scale * p[PARAM_U(21) + c] + p[PARAM_U(22) + c] + v * bonus;
            a[PARAM_U(6) + row] = o * a[PARAM_U(7) + row];
        }
    }
    if (on)
        for (int j = 0; j < HEAD; j++)
            st[PARAM_U(12) + srow + uint(j)] = s[j];
}

#elif PHASE == 6
// The chunked form's parts of a chunk of CHUNK tokens that do not depend on
// the state it starts from, a work group a (head, chunk). With L_t the
// chunk's cumulative log decay through token t (L_-1 = 0) and e its last
// token: ǎ_t = a_t exp(L_(t-1)), ř_t = r_t exp(L_t), b̃_m = b_m exp(L_e -
// L_m), k̃_m = k_m exp(L_e - L_m), the decay through the chunk exp(L_e), and
// the C x C matrices Bm[t][m] = b_m . a_t exp(L_(t-1) - L_m) and Km (k_m in
// b_m's place) for m < t, Br[t][m] = b_m . r_t exp(L_t - L_m) and Kr for m
// <= t, T = (I - Bm)^-1. The vectors are scaled first (b_m exp(-L_m): a
// chunk of 16 decays of at least exp(-0.606531) each keeps it below 2e4),
// every product of them a ratio of at most 1.
// Params: 0 tokens n, 1 the rows' stride, 2 / 3 / 4 / 5 / 6 r's, w's
//   (decays), k's, a's and b's offsets, 7 the chunks' data's offset.
// Work groups: x: heads, y: chunks.
#define CP (HEAD + 1) // (rows one float apart in banks)
shared float cv[4][CHUNK][CP]; // ř, ǎ, b^ = b exp(-L), k^ = k exp(-L)
shared float cm[5][CHUNK][CHUNK]; // Bm, Km, Br, Kr, T

void main()
{
    uint j = gl_LocalInvocationIndex, h = gl_WorkGroupID.x, ch = gl_WorkGroupID.y;
    uint n = PARAM_U(0), t0 = ch * uint(CHUNK);
    uint cn = min(uint(CHUNK), n - t0);
    bool on = j < uint(HEAD);
    uint c = h * uint(HEAD) + (on ? j : 0u);
    float L = 0.0;
    for (int t = 0; t < CHUNK; t++) {
        bool in_chunk = on && uint(t) < cn;
        uint row = (t0 + (in_chunk ? uint(t) : 0u)) * PARAM_U(1) + c;
        float lp = L;
        if (in_chunk)
            L += log(a[PARAM_U(3) + row]);
        if (on) {
            cv[0][t][j] = in_chunk ? a[PARAM_U(2) + row] * exp(L) : 0.0;
            cv[1][t][j] = in_chunk ? a[PARAM_U(5) + row] * exp(lp) : 0.0;
            cv[2][t][j] = in_chunk ? a[PARAM_U(6) + row] * exp(-L) : 0.0;
            cv[3][t][j] = in_chunk ? a[PARAM_U(4) + row] * exp(-L) : 0.0;
        }
    }
    memoryBarrierShared();
    barrier();
    // the matrices: entry e of 4 C^2, a (t, m) of one of them each
    for (uint e = j; e < 4u * uint(CHUNK * CHUNK); e += uint(WG_SIZE)) {
        uint q = e / uint(CHUNK * CHUNK), t = (e / uint(CHUNK)) % uint(CHUNK), m = e % uint(CHUNK);
        bool rq = q >= 2u; // Br, Kr: against ř_t, m <= t
        uint vm = q % 2u == 0u ? 2u : 3u, vt = rq ? 0u : 1u; // b^ or k^; ř or ǎ
        float sum = 0.0;
        if (rq ? m <= t : m < t)
            for (int i = 0; i < HEAD; i++)
                sum += cv[vm][m][i] * cv[vt][t][i];
        cm[q][t][m] = sum;
    }
    memoryBarrierShared();
    barrier();
    // T = (I - Bm)^-1, row by row: T[t][m] = [t == m] + sum_(m <= l < t) Bm[t][l] T[l][m]
    for (uint t = 0u; t < uint(CHUNK); t++) {
        if (j < uint(CHUNK)) {
            float v = t == j ? 1.0 : 0.0;
            for (uint l = j; l < t; l++)
                v += cm[0][t][l] * cm[4][l][j];
            cm[4][t][j] = j <= t ? v : 0.0;
        }
        memoryBarrierShared();
        barrier();
    }
    // the chunk's data: ǎ, ř, b~ = b^ exp(L_e), k~ (CHUNK rows of HEAD),
    // exp(L_e), then Km, Br, Kr, T (CHUNK x CHUNK each)
    uint o = PARAM_U(7) + (ch * gl_NumWorkGroups.x + h) * uint(RWKV_CHUNK_FLOATS);
    if (on) {
        float de = exp(L);
        for (int t = 0; t < CHUNK; t++) {
            a[o + (0u * uint(CHUNK) + uint(t)) * uint(HEAD) + j] = cv[1][t][j];
            a[o + (1u * uint(CHUNK) + uint(t)) * uint(HEAD) + j] = cv[0][t][j];
            a[o + (2u * uint(CHUNK) + uint(t)) * uint(HEAD) + j] = cv[2][t][j] * de;
            a[o + (3u * uint(CHUNK) + uint(t)) * uint(HEAD) + j] = cv[3][t][j] * de;
        }
        a[o + 4u * uint(CHUNK * HEAD) + j] = de;
    }
    uint mo = o + 4u * uint(CHUNK * HEAD) + uint(HEAD);
    for (uint e = j; e < 4u * uint(CHUNK * CHUNK); e += uint(WG_SIZE)) {
        uint q = 1u + e / uint(CHUNK * CHUNK), r = e % uint(CHUNK * CHUNK);
        a[mo + e] = cm[q][r / uint(CHUNK)][r % uint(CHUNK)];
    }
}

#elif PHASE == 7
// The chunked form's update, a work group a head going through its chunks
// in order: QT invocations a state row i, each holding its columns q, q +
// QT, ... of the row; from the chunk's data (PHASE 6) and its tokens' v,
//   w_t = s . ǎ_t + sum_(l < t) Km[t][l] v_l, u = T w     (u_t = S_(t-1) a_t)
//   y_t = s . ř_t + sum_(m <= t) (Br[t][m] u_m + Kr[t][m] v_m)
//   s   = s exp(L_e) + sum_m (u_m b̃_m + v_m k̃_m)
// the dot products of s summed across the row's invocations in shared
// memory. Params: 0 tokens n, 1 the rows' stride, 2 v's offset, 3 y's
// offset, 4 the chunks' data's offset, 5 / 6 the source's and destination's
// float offsets in the state, 7 not 0: no source (zeros).
// Defines: QT (WG_SIZE = HEAD QT).
// Work groups: x: heads.
#define DP (HEAD + 1)
#define COLS (HEAD / QT)
shared float dv[4][CHUNK][DP]; // ǎ, ř, b̃, k̃
shared float dl[HEAD];
shared float dm[4][CHUNK][CHUNK]; // Km, Br, Kr, T
shared float vs[CHUNK][DP];       // the chunk's v, [token][row]
shared float red[HEAD][QT][CHUNK + 1];

void main()
{
    uint tid = gl_LocalInvocationIndex, h = gl_WorkGroupID.x, n = PARAM_U(0);
    uint i = tid / uint(QT), q = tid % uint(QT);
    uint srow = (h * uint(HEAD) + i) * uint(HEAD);
    float s[COLS];
    for (int jj = 0; jj < COLS; jj++)
        s[jj] = PARAM_U(7) != 0u ? 0.0 : st[PARAM_U(5) + srow + q + uint(QT * jj)];
    uint n_chunks = (n + uint(CHUNK) - 1u) / uint(CHUNK);
    for (uint ch = 0u; ch < n_chunks; ch++) {
        uint t0 = ch * uint(CHUNK), cn = min(uint(CHUNK), n - t0);
        uint o = PARAM_U(4) + (ch * gl_NumWorkGroups.x + h) * uint(RWKV_CHUNK_FLOATS);
        for (uint e = tid; e < 4u * uint(CHUNK * HEAD); e += uint(WG_SIZE))
            dv[e / uint(CHUNK * HEAD)][(e / uint(HEAD)) % uint(CHUNK)][e % uint(HEAD)] = a[o + e];
        for (uint e = tid; e < uint(HEAD); e += uint(WG_SIZE))
            dl[e] = a[o + 4u * uint(CHUNK * HEAD) + e];
        uint mo = o + 4u * uint(CHUNK * HEAD) + uint(HEAD);
        for (uint e = tid; e < 4u * uint(CHUNK * CHUNK); e += uint(WG_SIZE))
            dm[e / uint(CHUNK * CHUNK)][(e / uint(CHUNK)) % uint(CHUNK)][e % uint(CHUNK)] = a[mo + e];
        for (uint e = tid; e < uint(CHUNK * HEAD); e += uint(WG_SIZE)) {
            uint t = e / uint(HEAD), r = e % uint(HEAD);
            vs[t][r] = t < cn ? a[PARAM_U(2) + (t0 + t) * PARAM_U(1) + h * uint(HEAD) + r] : 0.0;
        }
        memoryBarrierShared();
        barrier();
        // s . ǎ_t, then s . ř_t, each a sum over the row's invocations
        float w[CHUNK], r0[CHUNK], u[CHUNK];
        for (int pass = 0; pass < 2; pass++) {
            for (int t = 0; t < CHUNK; t++) {
                float x = 0.0;
                for (int jj = 0; jj < COLS; jj++)
                    x += s[jj] * dv[pass][t][q + uint(QT * jj)];
                red[i][q][t] = x;
            }
            memoryBarrierShared();
            barrier();
            for (int t = 0; t < CHUNK; t++) {
                float x = 0.0;
                for (int qq = 0; qq < QT; qq++)
                    x += red[i][qq][t];
                if (pass == 0)
                    w[t] = x;
                else
                    r0[t] = x;
            }
            memoryBarrierShared();
            barrier();
        }
        // (every invocation of the row makes w, u and y; the first writes y)
        for (int t = 0; t < CHUNK; t++)
            for (int l = 0; l < CHUNK; l++)
                w[t] += dm[0][t][l] * vs[l][i];
        for (int t = 0; t < CHUNK; t++) {
            float x = 0.0;
            for (int m = 0; m < CHUNK; m++)
                x += dm[3][t][m] * w[m];
            u[t] = x;
        }
        if (q == 0u)
            for (int t = 0; t < CHUNK; t++) {
                float y = r0[t];
                for (int m = 0; m < CHUNK; m++)
                    y += dm[1][t][m] * u[m] + dm[2][t][m] * vs[m][i];
                if (uint(t) < cn)
                    a[PARAM_U(3) + (t0 + uint(t)) * PARAM_U(1) + h * uint(HEAD) + i] = y;
            }
        for (int jj = 0; jj < COLS; jj++) {
            uint j = q + uint(QT * jj);
            float x = s[jj] * dl[j];
            for (int m = 0; m < CHUNK; m++)
                x += u[m] * dv[2][m][j] + vs[m][i] * dv[3][m][j];
            s[jj] = x;
        }
        memoryBarrierShared();
        barrier();
    }
    for (int jj = 0; jj < COLS; jj++)
        st[PARAM_U(6) + srow + q + uint(QT * jj)] = s[jj];
}
#endif
