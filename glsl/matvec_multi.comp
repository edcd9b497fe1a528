// y = W x for up to NT tokens at once, the weights read once for all: a
// small batch (a short prompt, a verifying pass of drafted tokens).
// matvec.comp is the one-token kernel: its header says what the bindings,
// the common defines (WG_SIZE, TPR, NR, WTYPE_<type>, F16_DOT, F16_DOT_F32,
// F16_SUBN, H_MERGE_OK, F16_LEVELS) and the epilogues (Y_ADD, GLU, QKV:
// matvec_out.glsl) mean; shared with it: matvec_head.glsl, matvec_dot.glsl,
// matvec_out.glsl. Here:
// Params: 0 holds the rows in its low 24 bits and the token count (1..NT)
// in its high 8; token t's x is at x offset + t * (W_UNITS * 8) vec4 (rows
// of act_stride(columns) floats); its y row at + t * param 6 floats; QKV: Q
// goes to X's buffer at float offset param 6 + t * act_stride(Q_DIM), RoPE
// from the table row + t * HEAD_DIM, K/V at + t * KV_DIM / 2 uints.
// NORM: x is RMS-normalised first: multiplied by the norm weight at x's
// buffer vec4 offset param 3 and each token's sums by 1/sqrt(mean(x^2) +
// eps), eps the float bits of param 4; sum(x^2) from the x the work group
// stages (XSH) or else from a pass of every work group over the tokens' x
// first.
// XSH: the work group stages the tokens' x of TPR units at a time in shared
// memory (norm weight applied), read once from memory instead of once per
// slot of lanes; each lane's weight units of a block are loaded before the
// block is staged, so their loads overlap the staging; XPF (the quantized
// formats): a block's units are loaded as words (w_fetch) during the block
// before, so their loads also overlap its sums. XM (with H_MERGE_OK, the
// formats of W_H_SAME, without NORM): x staged with one scale a unit.
// XG (F16_DOT; instead of XSH and NORM): x comes made ready by x_prep.comp
// (ops/matvec.c records it before this kernel, the norm folded in there):
// param 2 is the uvec4 offset in x's buffer of token 0's units, each XO_V
// uvec4 (unit_x), a token's W_UNITS of them after the token before's. Each
// lane reads its own units from memory, the rows' words of its next unit
// loaded before this one's are decoded: no staging, no barriers in the loop.
// XG_MERGE (the formats of W_H_SAME): the halves' f16 sums add in f16.
// XG_AHEAD: instead, each token's units loaded during the token before's
// sums (the first token's before the unit's), and the rows' words of a unit
// where it is decoded.
// XG_TG: the tokens' units of x loaded XG_TG tokens at a time (ops/matvec.c
// xg_token_group), the loads of a group in flight together, then its sums.
// XG_VL (with XG_SGC = TPR): each lane stands in for XG_VL lanes of the
// one-token kernel (TPR * XG_VL lanes a row, whose subgroups are runs of
// TPR): lanes lane + c * TPR for c = 0..XG_VL-1 one after another, each
// one's sums added into its run's tree as it ends (XG_VL_FLUSH), so a
// row's lanes walk as many units as with TPR lanes, not one or two.
// XB: XB consecutive invocations are the same lane of XB slots (instead of
// a slot's TPR lanes being consecutive), so a subgroup of XB invocations
// reads one address of the staged x at a time (one broadcast instead of XB
// different words); WG_SIZE a multiple of XB * TPR.
#include "matvec_head.glsl"

#if defined(XG) && defined(F16_DOT) && defined(H_MERGE_OK) && defined(W_H_SAME)
#define XG_MERGE 1  // x_prep.comp's XP_HI is W_H_SAME: the halves' sums add in f16
#endif
// the row and token loops have constant bounds: unrolled, the per-row and
// per-token sums stay in registers (a dynamically indexed array goes to local memory)
#pragma optionNV(unroll all)
#if defined(XG)
// (XG: x's buffer also read as xgu below, so not restrict)
#if defined(QKV)
layout(std430, binding = 1) buffer X { vec4 xv[]; };  // Q is written here
#else
layout(std430, binding = 1) readonly buffer X { vec4 xv[]; };
#endif
layout(std430, binding = 1) readonly buffer XGU { uvec4 xgu[]; };
#elif defined(QKV)
layout(std430, binding = 1) restrict buffer X { vec4 xv[]; };  // Q is written here
#else
layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
#endif
#ifdef QKV
layout(std430, binding = 2) writeonly restrict buffer Y { uint yu[]; };
#else
layout(std430, binding = 2) restrict buffer Y { float y[]; };
#endif

// A float of x's buffer by index (constants: norm weights, RoPE table, biases).
float x_at(uint i) { return xv[i >> 2][i & 3u]; }

#define SLOTS (WG_SIZE / TPR)
#define ROWS_WG (SLOTS * NR)

shared float red[WG_SIZE];
// The per-lane sums of every (row, token) i = r * NT + k (several tokens):
// slot s's TPR lanes' at PART_AT(i, s, 0). PART_PAD (ops/matvec.c part_padded):
// a row of TPR + 1 floats for each (i, s), and the invocations that add them
// up (main's end) take consecutive (i, s), whose rows start in consecutive
// banks (TPR + 1 is 1 modulo 32), so a warp's 32 reads of a step hit 32
// banks; else at (i * WG_SIZE + s * TPR + l), every row starting in the same
// bank, read by consecutive (token, row) of a slot (the code as it was
// before PART_PAD: kernels of 2 and 5 tokens ran much slower on NVIDIA with
// the same arithmetic merely written another way, ops/matvec.c part_padded).
#ifdef PART_PAD
#if !defined(XG) || defined(XSH)
#error "PART_PAD is for the XG kernels (their partial sums in a float array)"
#endif
#define PART_N (NR * NT * SLOTS * (TPR + 1))
#define PART_AT(i, s, l) (((i) * uint(SLOTS) + (s)) * uint(TPR + 1) + (l))
#else
#define PART_N (NR * NT * WG_SIZE)
#endif
#ifdef XSH
#define XSH_N (NT * 8 * TPR)        // vec4 of staged x a block
// token k's vec4 j of lane l's unit at (k * 8 + j) * TPR + l: the lanes of a
// warp read consecutive vec4 (no bank conflicts). The partial sums, written
// after the last block, take the same memory (float i at smem[i / 4][i % 4]).
// F16_DOT: the unit's half h divided by its largest magnitude (times SUBN_X)
// as 8 f16 pairs (x_half's order) in uvec4 2h and 2h + 1, that magnitude's
// (times SUBN_M) float bits in uvec4 4 + h (.x).
#ifdef F16_DOT
shared uvec4 smem[XSH_N > PART_N / 4 ? XSH_N : PART_N / 4];
#define PART(i) uintBitsToFloat(smem[(i) >> 2][(i) & 3u])
#define PART_SET(i, v) smem[(i) >> 2][(i) & 3u] = floatBitsToUint(v)
#else
shared vec4 smem[XSH_N > PART_N / 4 ? XSH_N : PART_N / 4];
#define PART(i) smem[(i) >> 2][(i) & 3u]
#define PART_SET(i, v) PART(i) = (v)
#endif
#define xsh smem
#else
#ifdef XG_VL
shared float part[2 * PART_N];  // (XG_VL_FLUSH: two halves)
#else
shared float part[PART_N];
#endif
#define PART(i) part[i]
#define PART_SET(i, v) part[i] = (v)
#endif
#ifdef XSH
// XM (several tokens, H_MERGE_OK: ops/matvec.c halves_merged, the kernels
// without NORM; the formats of W_H_SAME): a staged unit of
// x has one scale for its two halves (as x_half's with H_MERGE), so that a
// row's f16 sums of both halves add up in f16 and each (row, token) takes
// one affine map instead of two.
#if defined(F16_DOT) && defined(H_MERGE_OK) && defined(W_H_SAME)
#define XM 1
#define XSH_IPT TPR        // items a token: whole units
#define XSH_V 8            // vec4 an item
#else
#define XSH_IPT (2 * TPR)  // half units
#define XSH_V 4
#endif
// The staging works in half units (4 vec4, 16 values) of one token's x
// (XM: whole units): XSH_ITEMS a block, XSH_PER of them an invocation; item
// i is token i / XSH_IPT, half (i / TPR) % 2 (XM: both) of lane i % TPR's
// unit. Each item's sum (for the affine maps' offsets) is taken once here,
// into xsum[i], instead of by every slot's lane for every token.
#define XSH_ITEMS (NT * XSH_IPT)
#define XSH_PER ((XSH_ITEMS + WG_SIZE - 1) / WG_SIZE)
shared float xsum[XSH_ITEMS];
// Units ub .. ub + TPR - 1 of the ntok tokens' x into xsh (zeros past the
// row); every invocation of the work group calls it. The items an
// invocation stages sit at the same places of every block (i = t + m *
// WG_SIZE): NORM adds their squares (before the norm weight) to ss[m].
void stage_x(uint xo, uint xs, uint ntok, uint ub, inout float ss[XSH_PER])
{
    barrier();  // the last block's reads are done
    for (int m = 0; m < XSH_PER; m++) {
        uint i = gl_LocalInvocationIndex + uint(m * WG_SIZE);
        if (i >= ntok * uint(XSH_IPT))
            break;  // (the tokens past ntok are never read)
        uint k = i / uint(XSH_IPT), l = i % uint(TPR);
#ifdef XM
        const uint h = 0u;
#else
        uint h = (i / uint(TPR)) % 2u;
#endif
        uint u = ub + l;
        vec4 v[XSH_V];
        for (int jj = 0; jj < XSH_V; jj++)
            v[jj] = vec4(0.0);
        if (u < uint(W_UNITS)) {
            for (int jj = 0; jj < XSH_V; jj++) {
                uint j = h * 4u + uint(jj);
                v[jj] = xv[xo + k * xs + u * 8u + j];
#ifdef W_IS_FLOAT
                if ((u + 1u) * 32u > W_COLS)  // the zero-padded tail of a float row
                    v[jj] = w_x_in_row(u, j, v[jj]);
#endif
#ifdef NORM
                ss[m] += dot(v[jj], v[jj]);
                v[jj] *= xv[PARAM_U(3) + u * 8u + j];
#endif
            }
        }
#ifdef F16_DOT
        vec4 m4 = abs(v[0]);
        for (int jj = 1; jj < XSH_V; jj++)
            m4 = max(m4, abs(v[jj]));
        float mx = max(max(m4.x, m4.y), max(m4.z, m4.w));
        float inv = mx > 0.0 ? SUBN_X / mx : 0.0;
        uvec4 pk[XSH_V / 2];
        for (int jj = 0; jj < XSH_V; jj++) {
#ifdef XM
            float f = jj < 4 ? inv : inv * W_H_SAME;  // H_MERGE's scale of the high half
#else
            float f = inv;
#endif
            pk[jj >> 1][2 * (jj & 1)] = packFloat2x16(f16vec2(v[jj].xz * f));
            pk[jj >> 1][2 * (jj & 1) + 1] = packFloat2x16(f16vec2(v[jj].yw * f));
        }
        for (int jj = 0; jj < XSH_V / 2; jj++)
            xsh[(k * 8u + h * 2u + uint(jj)) * uint(TPR) + l] = pk[jj];
        xsh[(k * 8u + 4u + h) * uint(TPR) + l].x = floatBitsToUint(mx * SUBN_M);
#else
        for (int jj = 0; jj < 4; jj++)
            xsh[(k * 8u + h * 4u + uint(jj)) * uint(TPR) + l] = v[jj];
#endif
        vec4 vs = v[0];
        for (int jj = 1; jj < XSH_V; jj++)
            vs += v[jj];
        xsum[i] = dot(vs, vec4(1.0));
    }
    barrier();
}

#ifdef NORM
// After the last block: token k's sum(x^2) from the invocations' ss, left in
// nsum[k] (a tree over each token's XSH_IPT items, in xsum).
shared float nsum[NT];
void stage_norm_sums(float ss[XSH_PER])
{
    barrier();  // the last block's reads are done
    for (int m = 0; m < XSH_PER; m++) {
        uint i = gl_LocalInvocationIndex + uint(m * WG_SIZE);
        if (i < uint(XSH_ITEMS))
            xsum[i] = ss[m];
    }
    barrier();
    for (uint s = uint(XSH_IPT / 2); s > 0u; s >>= 1u) {
        for (uint i = gl_LocalInvocationIndex; i < uint(NT) * s; i += uint(WG_SIZE)) {
            uint at = (i / s) * uint(XSH_IPT) + i % s;
            xsum[at] += xsum[at + s];
        }
        barrier();
    }
    if (gl_LocalInvocationIndex < uint(NT))
        nsum[gl_LocalInvocationIndex] = xsum[gl_LocalInvocationIndex * uint(XSH_IPT)];
}
#endif

#ifdef F16_DOT
// x_half's pairs from the staged block, with each half's scale (ml, mh)
void staged_x_h(uint k, uint lane, out f16vec2 xl[8], out f16vec2 xh[8], out float ml,
                out float mh)
{
    for (int j = 0; j < 4; j++) {
        uvec4 p = xsh[(k * 8u + uint(j)) * uint(TPR) + lane];
        for (int c = 0; c < 4; c++) {
            if (j < 2)
                xl[j * 4 + c] = unpackFloat2x16(p[c]);
            else
                xh[(j - 2) * 4 + c] = unpackFloat2x16(p[c]);
        }
    }
    ml = uintBitsToFloat(xsh[(k * 8u + 4u) * uint(TPR) + lane].x);
    mh = uintBitsToFloat(xsh[(k * 8u + 5u) * uint(TPR) + lane].x);
}
#else
// load_x from the staged block: token k, this lane's unit
void staged_x(uint k, uint lane, out vec4 x[8])
{
    for (int j = 0; j < 8; j++)
        x[j] = xsh[(k * 8u + uint(j)) * uint(TPR) + lane];
}
#endif
#ifdef XM
// the sum of its unit (stage_x's)
float staged_sum(uint k, uint lane) { return xsum[k * uint(TPR) + lane]; }
#else
// the sums of its halves (stage_x's)
void staged_sums(uint k, uint lane, out float sx_lo, out float sx_hi)
{
    sx_lo = xsum[k * uint(2 * TPR) + lane];
    sx_hi = xsum[k * uint(2 * TPR) + uint(TPR) + lane];
}
#endif
#endif

#include "group_sum.glsl"

// The sum over the TPR lanes of this invocation's slot; valid in lane 0.
float slot_sum(float v) { return group_sum(v, uint(TPR)); }

#include "matvec_dot.glsl"
#ifdef XG
#if !defined(F16_DOT) || defined(W_IS_FLOAT) || defined(XSH) || defined(NORM)
#error "XG is for several tokens with f16 products, x made ready by x_prep.comp"
#endif
#ifndef XG_TG
#define XG_TG 1
#endif
#if defined(XG_AHEAD) && XG_TG != 1
#error "XG_AHEAD loads one token ahead (XG_TG 1)"
#endif
// token k's unit (x's pairs xl, xh, scale m, halves' sums sl, sh) against
// the NR rows' levels (lq, hq) and maps (ab), into acc
#ifdef XG_MERGE
#define XG_UNIT_ADD(a, m, ab, lr, hr, xl, xh, sl, sh) \
    unit_add1(a, m, ab, dot_h1(lr, hr, xl, xh), (sl) + (sh))
#else
#define XG_UNIT_ADD(a, m, ab, lr, hr, xl, xh, sl, sh) \
    unit_add2(a, m, ab, dot_h(lr, hr, xl, xh), sl, sh)
#endif
#define XG_ROW_SUMS(k, xl, xh, m, sl, sh)                                                   \
    for (int r = 0; r < NR; r++) {                                                          \
        f16vec2 lr[8], hr[8];                                                               \
        for (int i = 0; i < 8; i++) {                                                       \
            lr[i] = lq[r * 8 + i];                                                          \
            hr[i] = hq[r * 8 + i];                                                          \
        }                                                                                   \
        acc[r * NT + (k)] = XG_UNIT_ADD(acc[r * NT + (k)], m, ab[r], lr, hr, xl, xh, sl, sh); \
    }
// the words of unit u of token k of the units x_prep.comp made (from uvec4
// xo, xs apart)
void xg_words(uint xo, uint xs, uint k, uint u, out uvec4 p[XO_V])
{
    for (int j = 0; j < XO_V; j++)
        p[j] = xgu[xo + k * xs + u * uint(XO_V) + uint(j)];
}

// that unit (unit_x)
void xg_x(uint xo, uint xs, uint k, uint u, out f16vec2 xl[8], out f16vec2 xh[8], out float m,
          out float sl, out float sh)
{
    uvec4 p[XO_V];
    xg_words(xo, xs, k, u, p);
    unit_x(p, xl, xh, m, sl, sh);
}
#endif

#if defined(F16_DOT) && !defined(XSH) && !defined(XG)
#error "F16_DOT with several tokens needs XSH (the x pairs are made while staging)"
#endif

#if defined(NORM) && !defined(XSH)
// The sums of x^2 of the ntok tokens' x (rows xs vec4 apart from vec4 offset
// xo; every work group reads x from cache), left in nred[k * WG_SIZE]. (One
// token: the lanes of a slot add up the squares of the units they load.)
shared float nred[NT * WG_SIZE];
void norm_sums(uint xo, uint xs, uint ntok)
{
    float ss[NT];
    for (int k = 0; k < NT; k++)
        ss[k] = 0.0;
    for (uint i = gl_LocalInvocationIndex; i < (W_COLS + 3u) / 4u; i += uint(WG_SIZE)) {
        bvec4 in_row = lessThan(i * 4u + uvec4(0u, 1u, 2u, 3u), uvec4(W_COLS));
        for (int k = 0; k < NT; k++) {
            if (uint(k) < ntok) {
                vec4 v = mix(vec4(0.0), xv[xo + uint(k) * xs + i], in_row);
                ss[k] += dot(v, v);
            }
        }
    }
    // the NT sums in one shared-memory tree
    uint t = gl_LocalInvocationIndex;
    for (int k = 0; k < NT; k++)
        nred[k * WG_SIZE + int(t)] = ss[k];
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            for (int k = 0; k < NT; k++)
                nred[k * WG_SIZE + int(t)] += nred[k * WG_SIZE + int(t + s)];
        barrier();
    }
}
#endif

#ifdef XG
#ifdef PART_PAD
#define XG_PIDX(i, s, l) PART_AT(i, s, l)
#else
#define XG_PIDX(i, s, l) ((i) * uint(WG_SIZE) + (s) * uint(TPR) + (l))
#endif
// XG: each (row, token)'s TPR lane sums (in PART, i = row * NT + token)
// added up as the one-token kernel of the same rows and lanes adds its
// slot's (slot_sum: group_sum's order), the total left in lane 0's place.
// So a pass's sums are a decode step's to the bit (ops/matvec.c
// matvec_multi_config gives XG the one-token kernel's lanes a row).
// XG_SGC: without subgroup operations, which slow these kernels down (NVIDIA):
// each run of XG_SGC lanes (a subgroup's, or the whole TPR where the
// one-token kernel has no subgroups) summed in the tree its subgroupAdd
// makes (XG_ORDER: gpu.h GPU_SG_HALVES 1, GPU_SG_NEIGHBOURS 2, as probed;
// group_sum's shared-memory tree is 1), then the runs in order from 0.
// Else (USE_SUBGROUP, the order not known) its subgroupAdd itself.
#ifdef XG_SGC
// the sum of the run of XG_SGC lanes' partial sums from PART index b, in
// the tree of the one-token kernel's subgroupAdd: up to 64 lanes level by
// level in registers (each level's loop of a constant count, which the
// compiler unrolls: from the nested loops of before, in an XG_VL kernel,
// NVIDIA's compiler kept the values in local memory); else in place in
// shared memory, slower
#if XG_ORDER == 1
#define XG_PAIR(s, l, n) (s[l] + s[(l) + (n)])
#else
#define XG_PAIR(s, l, n) (s[2 * (l)] + s[2 * (l) + 1])
#endif
#define XG_LOAD(d, n)                     \
    float d[n];                           \
    for (int l = 0; l < n; l++)           \
        d[l] = PART(b + uint(l));
#define XG_LEVEL(d, s, n)                 \
    float d[n];                           \
    for (int l = 0; l < n; l++)           \
        d[l] = XG_PAIR(s, l, n);
float xg_run_sum(uint b)
{
#if XG_SGC == 64
    XG_LOAD(s64, 64)
    XG_LEVEL(s32, s64, 32)
#elif XG_SGC == 32
    XG_LOAD(s32, 32)
#endif
#if XG_SGC >= 32 && XG_SGC <= 64
    XG_LEVEL(s16, s32, 16)
#elif XG_SGC == 16
    XG_LOAD(s16, 16)
#endif
#if XG_SGC >= 16 && XG_SGC <= 64
    XG_LEVEL(s8, s16, 8)
#elif XG_SGC == 8
    XG_LOAD(s8, 8)
#endif
#if XG_SGC >= 8 && XG_SGC <= 64
    XG_LEVEL(s4, s8, 4)
#elif XG_SGC == 4
    XG_LOAD(s4, 4)
#endif
#if XG_SGC >= 4 && XG_SGC <= 64
    XG_LEVEL(s2, s4, 2)
    return s2[0] + s2[1];
#else
#if XG_ORDER == 1
    for (int h = XG_SGC / 2; h > 0; h >>= 1)
        for (int l = 0; l < h; l++)
            PART_SET(b + uint(l), PART(b + uint(l)) + PART(b + uint(l + h)));
#else
    for (int h = 1; h < XG_SGC; h <<= 1)
        for (int l = 0; l + h < XG_SGC; l += 2 * h)
            PART_SET(b + uint(l), PART(b + uint(l)) + PART(b + uint(l + h)));
#endif
    return PART(b);
#endif
}
#endif
#ifdef XG_VL
#if XG_SGC != TPR
#error "XG_VL: a row's lanes are one run (XG_SGC == TPR)"
#endif
#define VT_N ((NR * NT + TPR - 1) / TPR)
// The end of the lanes' current stand-in (run c of the one-token kernel's
// lanes): each (row, token)'s partial sums of the slot's lanes to shared
// memory (acc, then zeroed), then lane i of the slot adds the run of (row
// and token) i (+ TPR...) into vt: the runs in order from 0, as
// xg_lane_sums adds them. Runs c and c + 1 take PART's two halves, so one
// barrier a run keeps the next run's stores off the sums still read.
#define XG_VL_FLUSH(c)                                                      \
    {                                                                      \
        uint pb = ((c) & 1u) * uint(PART_N);                               \
        for (int i = 0; i < NR * NT; i++) {                                \
            PART_SET(pb + XG_PIDX(uint(i), slot, lane), acc[i]);           \
            acc[i] = 0.0;                                                  \
        }                                                                  \
        barrier();                                                         \
        for (int j = 0; j < VT_N; j++) {                                   \
            uint i = lane + uint(j * TPR);                                 \
            if (i < uint(NR * NT) && i % uint(NT) < ntok)                  \
                vt[j] += xg_run_sum(pb + XG_PIDX(i, slot, 0u));            \
        }                                                                  \
    }
#endif

void xg_lane_sums(uint ntok)
{
    uint n = uint(NR * NT * SLOTS);
#ifdef XG_SGC
    // one invocation a (row and token, slot, run of XG_SGC lanes), each run
    // by xg_run_sum; then with several runs one a (row and token, slot) adds
    // them
    uint runs = uint(TPR / XG_SGC);
    for (uint o = gl_LocalInvocationIndex; o < n * runs; o += uint(WG_SIZE)) {
        uint c = o % runs, is = o / runs, i = is / uint(SLOTS), s = is % uint(SLOTS);
        if (i % uint(NT) >= ntok)
            continue;
        uint b = XG_PIDX(i, s, c * uint(XG_SGC));
        PART_SET(b, xg_run_sum(b));
    }
    barrier();
    if (runs > 1u) {
        for (uint o = gl_LocalInvocationIndex; o < n; o += uint(WG_SIZE)) {
            uint i = o / uint(SLOTS), s = o % uint(SLOTS);
            if (i % uint(NT) < ntok) {
                float tot = 0.0;
                for (uint c = 0u; c < runs; c++)
                    tot += PART(XG_PIDX(i, s, c * uint(XG_SGC)));
                PART_SET(XG_PIDX(i, s, 0u), tot);
            }
        }
        barrier();
    }
#elif defined(USE_SUBGROUP)
    // a subgroup a (row, token, slot) at a time: subgroupAdd over the lanes
    // that hold them in the one-token kernel, then those sums in order from 0
    uint sgs = gl_SubgroupSize, l = gl_SubgroupInvocationID;
    for (uint o = gl_SubgroupID; o < n; o += gl_NumSubgroups) {
        uint i = o / uint(SLOTS), s = o % uint(SLOTS);
        if (i % uint(NT) >= ntok)
            continue;  // (the same for the whole subgroup)
        float tot;
        if (uint(TPR) == sgs) {
            tot = subgroupAdd(PART(XG_PIDX(i, s, l)));
        } else {
            tot = 0.0;
            for (uint j = 0u; j < uint(TPR); j += sgs)
                tot += subgroupAdd(PART(XG_PIDX(i, s, j + l)));
        }
        if (l == 0u)
            PART_SET(XG_PIDX(i, s, 0u), tot);
    }
    barrier();
#else
#error "XG: XG_SGC (the order of the one-token kernel's sums) or USE_SUBGROUP"
#endif
}
#ifdef XG_NSCALE
// the tokens' 1/rms of the norm, which x_prep.comp made as the one-token
// kernel's NORM_SCALE makes it (in the .w of its units' last word), loaded
// at the start (read after the barriers of the end)
shared float xg_ns[NT];
void xg_nscale_load(uint xo, uint xs, uint ntok)
{
    uint k = gl_LocalInvocationIndex;
    if (k < ntok)
        xg_ns[k] = uintBitsToFloat(xgu[xo + k * xs + uint(XO_V - 1)].w);
}
#endif
#endif

#include "matvec_out.glsl"

void main()
{
    uint rows = PARAM_U(0) & 0xFFFFFFu;
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint row0 = wg * uint(ROWS_WG);
    if (row0 >= rows)
        return;  // the whole work group
    uint t = gl_LocalInvocationIndex;
#ifdef XB
    uint lane = (t / uint(XB)) % uint(TPR), slot = (t / uint(XB * TPR)) * uint(XB) + t % uint(XB);
#else
    uint lane = t % uint(TPR), slot = t / uint(TPR);
#endif
    uint pidx = slot * uint(TPR) + lane;  // where the partial sums go
    uint first = row0 + slot * uint(NR);
#ifndef W_IS_FLOAT
    // the block of unit uu of this thread's row r (past the last row, the last row's)
#define UNIT_BI(r, uu) w_block(min(first + uint(r), rows - 1u), uu)
#endif
    uint xo = PARAM_U(2);
#if defined(XG)
    // (x_prep.comp's units: uvec4 offset param 2, one token's XO_V a unit)
    uint ntok = PARAM_U(0) >> 24, xs = W_UNITS * uint(XO_V);
#else
    uint ntok = PARAM_U(0) >> 24, xs = W_UNITS * 8u;
#endif

    float acc[NR * NT];
    for (int i = 0; i < NR * NT; i++)
        acc[i] = 0.0;
#if defined(NORM) && !defined(XSH)
    norm_sums(xo, xs, ntok);
#endif
#ifdef XSH
    float xss[XSH_PER];  // NORM: sums of squares of the staged x (stage_x)
    for (int m = 0; m < XSH_PER; m++)
        xss[m] = 0.0;
    // every invocation runs every block (the barriers of stage_x)
    // (a bound the compiler cannot see: this loop stays a loop, not
    // W_UNITS / TPR copies of its body)
    uint n_units = uint(W_UNITS) + (PARAM_U(0) >> 31);
#if defined(XPF) && !defined(W_IS_FLOAT)
#define XPF_ON 1
    // the rows' words of unit un, loaded a block ahead of their sums
    uint un = min(lane, n_units - 1u);
    w_raw wn[NR];
    for (int r = 0; r < NR; r++)
        wn[r] = w_fetch(UNIT_BI(r, un), un % W_UPB);
#endif
    for (uint ub = 0u; ub < n_units; ub += uint(TPR)) {
        uint u = ub + lane;
        // the rows' unit first: its loads are in flight while x is staged
        vec4 ab[NR];
#ifdef F16_DOT
        f16vec2 lq[NR * 8], hq[NR * 8];
        for (int r = 0; r < NR; r++) {
            f16vec2 lr[8], hr[8];
#ifdef XPF_ON
            w_unit_h_r(wn[r], UNIT_BI(r, un), un % W_UPB, lr, hr, ab[r]);
#else
            w_unit_h(min(first + uint(r), rows - 1u), min(u, n_units - 1u), lr, hr, ab[r]);
#endif
            for (int k = 0; k < 8; k++) {
                lq[r * 8 + k] = lr[k];
                hq[r * 8 + k] = hr[k];
            }
        }
#else
        vec4 q[NR * 8];
        for (int r = 0; r < NR; r++) {
            vec4 qr[8];
#ifdef XPF_ON
            w_unit_r(wn[r], UNIT_BI(r, un), un % W_UPB, qr, ab[r]);
#else
            w_unit(min(first + uint(r), rows - 1u), min(u, n_units - 1u), qr, ab[r]);
#endif
            for (int k = 0; k < 8; k++)
                q[r * 8 + k] = qr[k];
        }
#endif
#ifdef XPF_ON
        un = min(u + uint(TPR), n_units - 1u);
        for (int r = 0; r < NR; r++)
            wn[r] = w_fetch(UNIT_BI(r, un), un % W_UPB);
#endif
        stage_x(xo, xs, ntok, ub, xss);
        if (u >= n_units)
            continue;
#else
#ifdef XG
#ifdef XG_NSCALE
    xg_nscale_load(xo, xs, ntok);
#endif
    // XG: each lane walks its units alone (x ready in memory: no staging,
    // no barriers), the rows' words of its next unit loaded before this
    // one's are decoded (XG_AHEAD: each unit's where it is decoded)
    w_raw wr[NR];
#ifndef XG_AHEAD
    {
        uint u0 = min(lane, uint(W_UNITS) - 1u);
        for (int r = 0; r < NR; r++)
            wr[r] = w_fetch(UNIT_BI(r, u0), u0 % W_UPB);
    }
#endif
#endif
#ifdef XG_VL
    float vt[VT_N];  // (row and token) lane, lane + TPR...: the runs' sums so far
    for (int j = 0; j < VT_N; j++)
        vt[j] = 0.0;
    // stand-in c: lane lane + c * TPR of the one-token kernel (a bound the
    // compiler cannot see, param 0's top bit being 0: not XG_VL copies of
    // the unit loop)
    for (uint c = 0u; c < uint(XG_VL) + (PARAM_U(0) >> 31); c++) {
    for (uint u = lane + c * uint(TPR); u < W_UNITS; u += uint(TPR * XG_VL)) {
#else
    for (uint u = lane; u < W_UNITS; u += uint(TPR)) {
#endif
#endif
#if   defined(XG)
        f16vec2 lq[NR * 8], hq[NR * 8];
        vec4 ab[NR];
        {
#ifdef XG_AHEAD
            for (int r = 0; r < NR; r++)
                wr[r] = w_fetch(UNIT_BI(r, u), u % W_UPB);
#else
#ifdef XG_VL
            // the stand-in's next unit, else the next stand-in's first
            uint un = u + uint(TPR * XG_VL);
            if (un >= W_UNITS)
                un = u % uint(TPR * XG_VL) + uint(TPR);
            un = min(un, uint(W_UNITS) - 1u);
#else
            uint un = min(u + uint(TPR), uint(W_UNITS) - 1u);
#endif
            w_raw wn[NR];
            for (int r = 0; r < NR; r++)
                wn[r] = w_fetch(UNIT_BI(r, un), un % W_UPB);
#endif
            for (int r = 0; r < NR; r++) {
                f16vec2 lr[8], hr[8];
                w_unit_h_r(wr[r], UNIT_BI(r, u), u % W_UPB, lr, hr, ab[r]);
                for (int j = 0; j < 8; j++) {
                    lq[r * 8 + j] = lr[j];
                    hq[r * 8 + j] = hr[j];
                }
#ifndef XG_AHEAD
                wr[r] = wn[r];
#endif
            }
        }
#ifdef XG_AHEAD
        uvec4 pn[XO_V];  // the next token's unit
        xg_words(xo, xs, 0u, u, pn);
#endif
#if XG_TG == 1
        for (int k = 0; k < NT; k++) {
            // (not break: the loop unrolls, acc stays in registers; the test
            // also paces it: without it, NVIDIA's 9-token gate/up ran slower)
            if (uint(k) >= ntok)
                continue;
            f16vec2 xl[8], xh[8];
            float m, sl, sh;
#ifdef XG_AHEAD
            unit_x(pn, xl, xh, m, sl, sh);
            if (uint(k) + 1u < ntok)
                xg_words(xo, xs, uint(k + 1), u, pn);
#else
            xg_x(xo, xs, uint(k), u, xl, xh, m, sl, sh);
#endif
            XG_ROW_SUMS(k, xl, xh, m, sl, sh)
        }
#else
        // the tokens XG_TG at a time: a group's units of x loaded together
        // (past ntok: the last token's again, whose sums are never written),
        // then summed (the loop as above, its test now a group's)
        for (int k0 = 0; k0 < NT; k0 += XG_TG) {
            if (uint(k0) >= ntok)
                continue;
            f16vec2 xl[XG_TG][8], xh[XG_TG][8];
            float m[XG_TG], sl[XG_TG], sh[XG_TG];
            for (int j = 0; j < XG_TG && k0 + j < NT; j++)
                xg_x(xo, xs, min(uint(k0 + j), ntok - 1u), u, xl[j], xh[j], m[j], sl[j], sh[j]);
            for (int j = 0; j < XG_TG && k0 + j < NT; j++)
                XG_ROW_SUMS(k0 + j, xl[j], xh[j], m[j], sl[j], sh[j])
        }
#endif
#else
#ifndef XSH
        // the NR rows' unit once, then every token's x against it
        vec4 q[NR * 8], ab[NR];
        for (int r = 0; r < NR; r++) {
            vec4 qr[8];
            w_unit(min(first + uint(r), rows - 1u), u, qr, ab[r]);
            for (int k = 0; k < 8; k++)
                q[r * 8 + k] = qr[k];
        }
#endif
        for (int k = 0; k < NT; k++) {
            if (uint(k) >= ntok)
                continue;  // (not break: the loop unrolls, acc stays in registers)
#ifdef F16_DOT
            f16vec2 xl[8], xh[8];
            float ml, mh;  // (XM: ml the unit's scale, mh unused)
            staged_x_h(uint(k), lane, xl, xh, ml, mh);
#ifdef XM
            float sx = staged_sum(uint(k), lane);
#else
            float sx_lo, sx_hi;
            staged_sums(uint(k), lane, sx_lo, sx_hi);
#endif
            for (int r = 0; r < NR; r++) {
                f16vec2 lr[8], hr[8];
                for (int j = 0; j < 8; j++) {
                    lr[j] = lq[r * 8 + j];
                    hr[j] = hq[r * 8 + j];
                }
#ifdef XM
                acc[r * NT + k] += ab[r].x * ml * dot_h1(lr, hr, xl, xh) + ab[r].y * sx;
#else
                vec2 d = dot_h(lr, hr, xl, xh);
                acc[r * NT + k] += ab[r].x * ml * d.x + ab[r].z * mh * d.y + ab[r].y * sx_lo +
                                   ab[r].w * sx_hi;
#endif
            }
#else
            vec4 x[8];
            float sx_lo, sx_hi, ss;
#ifdef XSH
            staged_x(uint(k), lane, x);
            staged_sums(uint(k), lane, sx_lo, sx_hi);
#else
            load_x(xo + uint(k) * xs, u, x, sx_lo, sx_hi, ss);
#endif
            for (int r = 0; r < NR; r++) {
                float lo = dot(q[r * 8], x[0]) + dot(q[r * 8 + 1], x[1]) +
                           dot(q[r * 8 + 2], x[2]) + dot(q[r * 8 + 3], x[3]);
                float hi = dot(q[r * 8 + 4], x[4]) + dot(q[r * 8 + 5], x[5]) +
                           dot(q[r * 8 + 6], x[6]) + dot(q[r * 8 + 7], x[7]);
                acc[r * NT + k] += ab[r].x * lo + ab[r].y * sx_lo + ab[r].z * hi + ab[r].w * sx_hi;
            }
#endif
        }
#endif
    }
#ifdef XG_VL
    XG_VL_FLUSH(c);
    }
#endif
    // Several tokens: the partial sums go through shared memory (a loop of
    // per-value reductions would index acc dynamically and spill it), then
    // each invocation adds up the TPR lanes of some (rows, token) outputs.
#if defined(NORM) && defined(XSH)
    stage_norm_sums(xss);
#endif
#ifdef XSH
    barrier();  // the staged x (the same memory) is no longer read
#endif
#ifdef XG_VL
    // (row and token) i's sum to its lane 0's place, as xg_lane_sums leaves it
    for (int j = 0; j < VT_N; j++) {
        uint i = lane + uint(j * TPR);
        if (i < uint(NR * NT))
            PART_SET(XG_PIDX(i, slot, 0u), vt[j]);
    }
    barrier();
#else
    for (int i = 0; i < NR * NT; i++)
#ifdef PART_PAD
        PART_SET(PART_AT(uint(i), slot, lane), acc[i]);
#else
        PART_SET(uint(i * WG_SIZE) + pidx, acc[i]);
#endif
    barrier();
#ifdef XG
    xg_lane_sums(ntok);
#endif
#endif
#if defined(GLU) || defined(QKV)
#define PER_OUT 2
#else
#define PER_OUT 1
#endif
    // invocation o: PART_PAD slot o % SLOTS, then token, then row (pair):
    // consecutive invocations read consecutive rows of PART (PART_AT); else
    // token, row (pair), then slot
    for (uint o = t; o < uint(SLOTS * (NR / PER_OUT) * NT); o += uint(WG_SIZE)) {
#ifdef PART_PAD
        uint s = o % uint(SLOTS), rest = o / uint(SLOTS);
#else
        uint s = o / uint((NR / PER_OUT) * NT), rest = o % uint((NR / PER_OUT) * NT);
#endif
        uint k = rest % uint(NT), r = (rest / uint(NT)) * uint(PER_OUT);
        uint row = row0 + s * uint(NR) + r;
        if (k >= ntok || row >= rows)
            continue;
        float v[PER_OUT];
        for (int j = 0; j < PER_OUT; j++) {
#ifdef PART_PAD
            uint base = PART_AT((r + uint(j)) * uint(NT) + k, s, 0u);
#else
            uint base = ((r + uint(j)) * uint(NT) + k) * uint(WG_SIZE) + s * uint(TPR);
#endif
#ifdef XG
            float sum = PART(base);  // (xg_lane_sums)
#ifdef XG_NSCALE
            sum *= xg_ns[k];
#endif
#else
            float sum = 0.0;
            for (uint l = 0u; l < uint(TPR); l++)
                sum += PART(base + l);
#endif
#if defined(NORM) && defined(XSH)
            sum *= inversesqrt(nsum[k] / float(W_COLS) + PARAM_F(4));
#elif defined(NORM)
            sum *= inversesqrt(nred[k * uint(WG_SIZE)] / float(W_COLS) + PARAM_F(4));
#endif
            v[j] = sum;
        }
#if defined(GLU) || defined(QKV)
        put_pair(row, k, v[0], v[1]);
#else
        put_one(row, k, v[0]);
#endif
    }
}
