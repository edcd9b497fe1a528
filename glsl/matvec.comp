// y = W x for one token: one weight tensor (or one row range of it), f32
// activations, f32 accumulation (F16_DOT: f16 products and sums within a
// half unit). The decode step's matrix-vector products; matvec_multi.comp
// is the same for several tokens. Shared with it: matvec_head.glsl (the
// arithmetic's extensions and defines), matvec_dot.glsl (a unit's products),
// matvec_out.glsl (the epilogues).
// Bindings: 0 weights (weights.glsl), 1 x (vec4[], read), 2 y (float[]).
// Params: 0 rows in this dispatch, 1 index in y of its first row (the
//         epilogues below: the global row of its first row), 2 offset of x
//         in vec4 units; 8..13 the weight planes (weights.glsl).
// Defines: WG_SIZE; TPR threads per row (a power of two dividing WG_SIZE; a
// multiple of the subgroup size with USE_SUBGROUP, SG_SIZE the size the host
// reported); NR rows per thread; NT 1; FETCH_ROWS (the quantized formats; NR
// unless given, a divisor of NR): rows whose units are loaded at once before
// any is decoded (ops/matvec.c fetch_rows); FETCH_AHEAD (with FETCH_ROWS):
// each such group loaded before the group before is summed (ops/matvec.c
// fetch_ahead_rows); NO_UNROLL: no unrolling hint (NVIDIA's compiler then
// picks, ops/matvec.c matvec_unrolled); WTYPE_<type>; F16_LEVELS
// (weights.glsl nib_levels); F16_DOT (the quantized formats: f16 products of
// the levels and x scaled per unit or half unit, x_half; ops/matvec.c
// f16_dot_choice) or F16_DOT_F32 (the same code in f32); F16_SUBN (with
// F16_DOT: the levels as f16 subnormals, SUBN_X in matvec_head.glsl);
// H_MERGE_OK (with F16_DOT: a unit's two halves summed in f16 where the
// format allows, H_MERGE below); X_ONCE (F16_DOT; rows of at most
// X_ONCE_UNITS units): x made into f16 pairs once a work group, in shared
// memory (stage_once below), instead of by each slot's lane for its unit;
// and at most one epilogue (matvec_out.glsl; without one, y = W x, or
// y += W x where param 20 says so: Y_ADD, common.glsl):
//   GLU    rows interleave gate and up (row 2i gate i, 2i+1 up i):
//          y[row / 2] = silu(gate) * up, row counted from param 1.
//   QKV    rows are Q, K, V of one layer (Q_DIM, KV_DIM, HEAD_DIM defines;
//          Q and K rows of a head ordered so RoPE pairs are adjacent rows):
//          RoPE with the cos/sin at x's buffer float offset param 5 (this
//          position's row of the table), QKV_BIAS: + bias at float offset
//          param 7 (indexed by global row); Q to y[0..Q_DIM) as f32 bits,
//          K and V as packed halves at y uint offsets params 14 and 15.
//   GLU and QKV need NR even (pairs of rows stay in one thread).
// NORM: x is RMS-normalised first (the norm folded into this kernel): x is
// multiplied by the norm weight at x's buffer vec4 offset param 3 and the
// sum by 1/sqrt(mean(x^2) + eps), eps the float bits of param 4; sum(x^2)
// comes from the units the lanes load anyway.
// NORM_SCALE: the norm split between the kernel that writes x and this one:
// x arrives already multiplied by the norm weight, and the sum of its
// squares as PARAM_U(19) partial sums at x's buffer float offset PARAM_U(17)
// (NORM_OUT's, or rms_norm.comp PREP's); this kernel only scales each sum by
// 1/sqrt(mean(x^2) + eps) (eps the float bits of param 4). The work group
// shares out the loads of the partial sums; SQ_AHEAD: how many vec4 of them
// an invocation loads before the units (ops/matvec.c).
// NORM_OUT (with the residual add): the other half: besides y += W x, the
// new y times the next norm's weight (at x's buffer float offset param 18,
// counted from this dispatch's first row) goes to y's buffer at float offset
// param 16 (likewise), and each slot's sum of the squares of its rows' new y
// to float offset param 17 + the slot's index in this dispatch.
// EXPERT (one token a work-group layer, no norm): layer z =
// gl_WorkGroupID.z of the dispatch is one (token, expert slot) of a
// mixture-of-experts FFN, or one token of a dense weight beside it (the
// router, the shared expert). Its x is at vec4 offset param 2 + (z / param
// 23) x param 22 (the tokens' x shared by their slots), its y param 6 floats
// further per z (GLU: output floats). Param 25 bit 0: the rows are those of
// expert float(x_at(param 21 + 2 z)) (the route, ops/moe.c) of the experts
// stacked in this weight, param 0 rows each: the experts in this buffer are
// its rows [param 26, param 26 + param 27), a layer whose expert is in
// another part does nothing; bit 1: the results times the expert's weight,
// x_at(param 21 + 2 z + 1).
// A work group computes (WG_SIZE / TPR) * NR rows; its threads are slots of
// TPR lanes, each lane strides the row's 32-value units, then the lanes of a
// slot sum their partials (subgroup adds or a shared-memory tree).
#include "matvec_head.glsl"

#if defined(NORM) || defined(NORM_SCALE)
#define NORM_ANY 1  // the sums are scaled by 1/rms at the end
#endif
#if defined(NORM_SCALE) || (defined(NORM) && defined(X_ONCE))
// one token: the work group's invocations together took sum(x^2) (the
// partial sums shared out; X_ONCE: the units each staged), not a slot's lanes
#define NORM_GROUP 1
#endif
#if (defined(NORM_SCALE) || defined(NORM_OUT)) && defined(NORM)
#error "NORM_SCALE and NORM_OUT are one-token variants, without NORM"
#endif
#if !defined(FETCH_ROWS) || defined(W_IS_FLOAT)
#undef FETCH_ROWS
#define FETCH_ROWS NR
#endif
#ifndef NO_UNROLL
// the row and token loops have constant bounds: unrolled, the per-row and
// per-token sums stay in registers (a dynamically indexed array goes to local memory)
#pragma optionNV(unroll all)
#endif
layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
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
#if defined(USE_SUBGROUP) && defined(SG_SIZE)
#if TPR > SG_SIZE
// one token, several subgroups a slot (SG_SIZE: the subgroup size the host
// reported): the per-subgroup sums of every row, and of the norm's squares
#define SG_SUMS 1
#define SG_N (WG_SIZE / SG_SIZE)
shared float sg_sums[(NR + 1) * SG_N];
#endif
#endif

#include "group_sum.glsl"

// The sum over the TPR lanes of this invocation's slot; valid in lane 0.
float slot_sum(float v) { return group_sum(v, uint(TPR)); }

#ifdef NORM_SCALE
// vec4 j of the partial sums of squares (PARAM_U(19) floats at the float
// offset PARAM_U(17), a multiple of 4), zeros past them
#ifndef SQ_AHEAD
#define SQ_AHEAD 0  // ops/matvec.c picks it by format
#endif
vec4 sq_vec4(uint j)
{
    uint n = PARAM_U(19);
    vec4 v = j < (n + 3u) / 4u ? xv[(PARAM_U(17) >> 2) + j] : vec4(0.0);
    return mix(vec4(0.0), v, lessThan(uvec4(j * 4u) + uvec4(0u, 1u, 2u, 3u), uvec4(n)));
}
#endif

// H_MERGE (H_MERGE_OK, one token, the formats of W_H_SAME; ops/matvec.c
// halves_merged): the high half's x also times W_H_SAME, so that its
// products with the levels are on the low half's scale and the two halves'
// f16 sums add up in f16 (dot_h1). (x / 16 goes subnormal in f16 below
// 2^-10 of the unit's largest value: an absolute error of at most 2^-25 of
// it a value.)
#if defined(H_MERGE_OK) && defined(W_H_SAME)
#define H_MERGE 1
#endif
#include "matvec_dot.glsl"
#ifdef X_ONCE
#if !defined(F16_DOT) || defined(W_IS_FLOAT)
#error "X_ONCE is for one token with f16 products (F16_DOT)"
#endif
// X_ONCE: x's units (at most X_ONCE_UNITS: the host's check) as x_half makes
// them, each made once by one invocation of the work group instead of once by
// a lane of every slot (a slot's rows are one thread's NR, a work group holds
// WG_SIZE / TPR slots). Unit i is XO_V = 5 uvec4 at 5 i (an odd
// stride: the 8 lanes of a quarter warp read 16 bytes each from distinct
// banks): the low half's 8 pairs, the high half's, then (x_half's scale,
// sum of the low half, of the high half) as float bits (F16_DOT_F32: 9
// uvec4, the pairs' f32 words, so that its results stay f32's). Every invocation
// calls it (it holds a barrier); NORM adds the squares of the units this
// invocation made to ss (the work group's together are the row's).
shared uvec4 xonce[X_ONCE_UNITS * XO_V];
void stage_once(uint xo, inout float ss)
{
    for (uint i = gl_LocalInvocationIndex; i < W_UNITS; i += uint(WG_SIZE)) {
        vec4 x[8];
        float sl, sh, s2;
        load_x(xo, i, x, sl, sh, s2);
        ss += s2;
        f16vec2 xl[8], xh[8];
        float m = x_half(x, xl, xh);
        uvec4 p[XO_V];
        unit_pack(xl, xh, m, sl, sh, p);
        for (int j = 0; j < XO_V; j++)
            xonce[i * uint(XO_V) + uint(j)] = p[j];
    }
    barrier();
}

// staged unit i: x_half's pairs and scale, the halves' sums
void once_x(uint i, out f16vec2 xl[8], out f16vec2 xh[8], out float m, out float sl, out float sh)
{
    uvec4 p[XO_V];
    for (int j = 0; j < XO_V; j++)
        p[j] = xonce[i * uint(XO_V) + uint(j)];
    unit_x(p, xl, xh, m, sl, sh);
}
#endif




#include "matvec_out.glsl"

void main()
{
    uint rows = PARAM_U(0) & 0xFFFFFFu;
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint row0 = wg * uint(ROWS_WG);
    if (row0 >= rows)
        return;  // the whole work group
#ifdef EXPERT
#if defined(NORM_ANY) || defined(NORM_OUT) || defined(QKV)
#error "EXPERT takes x as it is, and writes y or GLU"
#endif
    uint z = gl_WorkGroupID.z;
    w_row_base = 0u;
    if ((PARAM_U(25) & 1u) != 0u) {
        uint e0 = uint(x_at(PARAM_U(21) + 2u * z)) * rows;  // the expert's first row
        if (e0 < PARAM_U(26) || e0 >= PARAM_U(26) + PARAM_U(27))
            return;  // in another part: the whole work group
        w_row_base = e0 - PARAM_U(26);
    }
    uint xo = PARAM_U(2) + (z / PARAM_U(23)) * PARAM_U(22);
#else
    const uint z = 0u;
    uint xo = PARAM_U(2);
#endif
    uint t = gl_LocalInvocationIndex;
    uint lane = t % uint(TPR), slot = t / uint(TPR);
    uint first = row0 + slot * uint(NR);
#ifndef W_IS_FLOAT
    // the block of unit uu of this thread's row r (past the last row, the last row's)
#define UNIT_BI(r, uu) w_block(min(first + uint(r), rows - 1u), uu)
#endif
    const uint ntok = 1u, xs = 0u;

    float acc[NR * NT];
    for (int i = 0; i < NR * NT; i++)
        acc[i] = 0.0;
    float ssum = 0.0;  // NORM, one token: this lane's share of sum(x^2)
#ifdef NORM_SCALE
    // The partial sums of squares, shared out over the work group (each
    // slot's total is the group's): the first SQ_AHEAD vec4 an invocation are
    // loaded now and added after the units, any more then.
#if SQ_AHEAD > 0
    vec4 sqv[SQ_AHEAD];
    for (int k = 0; k < SQ_AHEAD; k++)
        sqv[k] = sq_vec4(t + uint(k * WG_SIZE));
#endif
#endif
#if defined(FETCH_AHEAD) && !defined(W_IS_FLOAT)
#define AHEAD_ON 1
    // FETCH_AHEAD: each group's words are loaded before the group before is
    // decoded and summed (the next FETCH_ROWS rows of this unit, or the first
    // of the lane's next unit), so that a lane always has loads in flight
    w_raw wr[FETCH_ROWS];
    {
        uint u0 = min(lane, uint(W_UNITS) - 1u);
        for (int j = 0; j < FETCH_ROWS; j++)
            wr[j] = w_fetch(UNIT_BI(j, u0), u0 % W_UPB);
    }
#endif
#ifdef X_ONCE
    // (AHEAD_ON: the first group's words are in flight during the staging)
    stage_once(xo, ssum);
#endif
    for (uint u = lane; u < W_UNITS; u += uint(TPR)) {
#ifndef W_IS_FLOAT
        // the words of FETCH_ROWS rows' units at a time (w_fetch), the first
        // group's before x is loaded: their loads are in flight together,
        // not each row's after the row before is summed
        uint ub = u % W_UPB;
#define ROW_BI(r) UNIT_BI(r, u)
#ifndef AHEAD_ON
        w_raw wr[FETCH_ROWS];
        for (int j = 0; j < FETCH_ROWS; j++)
            wr[j] = w_fetch(ROW_BI(j), ub);
#endif
#endif
#ifdef X_ONCE
        f16vec2 xl[8], xh[8];
        float xm, sx_lo, sx_hi;
        once_x(u, xl, xh, xm, sx_lo, sx_hi);
#else
        vec4 x[8];
        float sx_lo, sx_hi, ss;
        load_x(xo, u, x, sx_lo, sx_hi, ss);
        ssum += ss;
#ifdef F16_DOT
        f16vec2 xl[8], xh[8];
        float xm = x_half(x, xl, xh);
#endif
#endif
#ifdef F16_DOT
#ifdef H_MERGE
        float sx = sx_lo + sx_hi;
#endif
#endif
        for (int g = 0; g < NR; g += FETCH_ROWS) {
#ifdef AHEAD_ON
            w_raw wn[FETCH_ROWS];
            {
                // (past the lane's last unit: the row's last unit again, from cache)
                uint un = g + FETCH_ROWS < NR ? u : min(u + uint(TPR), uint(W_UNITS) - 1u);
                int gn = (g + FETCH_ROWS) % NR;
                for (int j = 0; j < FETCH_ROWS; j++)
                    wn[j] = w_fetch(UNIT_BI(gn + j, un), un % W_UPB);
            }
#elif !defined(W_IS_FLOAT)
            if (g > 0) {
                for (int j = 0; j < FETCH_ROWS; j++)
                    wr[j] = w_fetch(ROW_BI(g + j), ub);
            }
#endif
            for (int j = 0; j < FETCH_ROWS; j++) {
                int r = g + j;
#ifdef F16_DOT
                f16vec2 lq[8], hq[8];
                vec4 ab;
                w_unit_h_r(wr[j], ROW_BI(r), ub, lq, hq, ab);
#ifdef H_MERGE
                acc[r] = unit_add1(acc[r], xm, ab, dot_h1(lq, hq, xl, xh), sx);
#else
                acc[r] = unit_add2(acc[r], xm, ab, dot_h(lq, hq, xl, xh), sx_lo, sx_hi);
#endif
#else
                vec4 q[8], ab;
#ifdef W_IS_FLOAT
                w_unit(min(first + uint(r), rows - 1u), u, q, ab);
#else
                w_unit_r(wr[j], ROW_BI(r), ub, q, ab);
#endif
                float lo = dot(q[0], x[0]) + dot(q[1], x[1]) + dot(q[2], x[2]) + dot(q[3], x[3]);
                float hi = dot(q[4], x[4]) + dot(q[5], x[5]) + dot(q[6], x[6]) + dot(q[7], x[7]);
                acc[r] += ab.x * lo + ab.y * sx_lo + ab.z * hi + ab.w * sx_hi;
#endif
            }
#ifdef AHEAD_ON
            for (int j = 0; j < FETCH_ROWS; j++)
                wr[j] = wn[j];
#endif
        }
    }
#ifdef NORM_SCALE
#if SQ_AHEAD > 0
    for (int k = 0; k < SQ_AHEAD; k++)
        ssum += dot(sqv[k], vec4(1.0));
#endif
    for (uint j = t + uint(SQ_AHEAD * WG_SIZE); j < (PARAM_U(19) + 3u) / 4u; j += uint(WG_SIZE))
        ssum += dot(sq_vec4(j), vec4(1.0));
#endif
#ifdef NORM_OUT
    // the rows' residual and next norm weight, loaded during the reduction
    float yres[NR], gw[NR];
    for (int r = 0; r < NR; r++) {
        uint row = min(first + uint(r), rows - 1u);
        yres[r] = y[PARAM_U(1) + row];
        gw[r] = x_at(PARAM_U(18) + row);
    }
#endif
    float tot[NR];
#ifdef SG_SUMS
    // A slot's lanes are several subgroups: every row's subgroup sums (and
    // the norm's) go through shared memory at once, one barrier for all.
    // (Like slot_sum, this takes the subgroups to be the SG_SIZE the host
    // reported; a run-time check with slot_sum as the other branch was
    // slower on NVIDIA.)
    for (int r = 0; r < NR; r++)
        tot[r] = subgroupAdd(acc[r]);
#ifdef NORM_ANY
    float nsum = subgroupAdd(ssum);
#endif
    if (subgroupElect()) {
        for (int r = 0; r < NR; r++)
            sg_sums[uint(r * SG_N) + gl_SubgroupID] = tot[r];
#ifdef NORM_ANY
        sg_sums[uint(NR * SG_N) + gl_SubgroupID] = nsum;
#endif
    }
    barrier();
    if (lane != 0u)
        return;
    uint sg0 = slot * uint(TPR / SG_SIZE);
    for (int r = 0; r < NR; r++) {
        tot[r] = 0.0;
        for (uint i = 0u; i < uint(TPR / SG_SIZE); i++)
            tot[r] += sg_sums[uint(r * SG_N) + sg0 + i];
    }
#ifdef NORM_ANY
    nsum = 0.0;
#ifdef NORM_GROUP
    for (uint i = 0u; i < uint(SG_N); i++)  // every subgroup of the group (NORM_GROUP)
        nsum += sg_sums[uint(NR * SG_N) + i];
#else
    for (uint i = 0u; i < uint(TPR / SG_SIZE); i++)
        nsum += sg_sums[uint(NR * SG_N) + sg0 + i];
#endif
    float nscale = inversesqrt(nsum / float(W_COLS) + PARAM_F(4));
#endif
#else
    for (int r = 0; r < NR; r++)
        tot[r] = slot_sum(acc[r]);  // every lane calls it: it holds barriers
#ifdef NORM_GROUP
    float nscale = inversesqrt(group_sum(ssum, uint(WG_SIZE)) / float(W_COLS) + PARAM_F(4));
#elif defined(NORM)
    // the slot's lanes loaded every unit of x once: their squares add up to sum(x^2)
    float nscale = inversesqrt(slot_sum(ssum) / float(W_COLS) + PARAM_F(4));
#endif
    if (lane != 0u)
        return;
#endif
#ifdef NORM_ANY
    for (int r = 0; r < NR; r++)
        tot[r] *= nscale;
#endif
#ifdef EXPERT
    if ((PARAM_U(25) & 2u) != 0u) {
        float ew = x_at(PARAM_U(21) + 2u * z + 1u);
        for (int r = 0; r < NR; r++)
            tot[r] *= ew;
    }
#endif
#if defined(GLU) || defined(QKV)
    for (int r = 0; r < NR; r += 2)
        if (first + uint(r) < rows)
            put_pair(first + uint(r), z, tot[r], tot[r + 1]);
#elif defined(NORM_OUT)
    float ss = 0.0;  // the squares of this slot's new y
    for (int r = 0; r < NR; r++) {
        uint row = first + uint(r);
        if (row < rows) {
            float v = yres[r] + tot[r];
            y[PARAM_U(1) + row] = v;
            y[PARAM_U(16) + row] = v * gw[r];
            ss += v * v;
        }
    }
    if (first < rows)  // (count: the dispatch's rows / NR, rounded up)
        y[PARAM_U(17) + first / uint(NR)] = ss;
#else
    for (int r = 0; r < NR; r++)
        if (first + uint(r) < rows)
            put_one(first + uint(r), z, tot[r]);
#endif
}
