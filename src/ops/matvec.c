/* Matrix-vector kernels: their work splits, variants and recording. See
 * matvec.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "ops/matvec.h"


#define MATVEC_SPLIT_USE "wg,tpr,nr (work-group size, lanes a row, rows a thread)"
#define MULTI_SPLIT_USE                                                                       \
    "wg,tpr,nr[,xb] (work-group size, lanes a row, rows a thread, and invocations on one unit " \
    "of x: a power of two up to 64)"
#define MATMUL_TILES_USE "wg,tm,tn[,0|1|2|3] (work-group size, rows and tokens a thread, tiles)"
#define FETCH_AHEAD_USE "0 (off), 1, 2, 4 or 8 (rows a group, loaded a group ahead)"
#define MULTI_XSH_USE "0 (every token's x from memory) or 1 (staged in shared memory)"
#define MULTI_XG_USE                                                                      \
    "0 (x staged by the several-token kernels) or 1 (made ready once a dispatch, where " \
    "they take f16 products: the default)"
#define XG_VL_USE                                                                         \
    "0 (a several-token lane for each of the one-token kernel's) or 1 (a subgroup's lanes " \
    "a row, each for several: the default)"
#define X_ONCE_USE                                                                      \
    "0 (each slot's lanes make x's f16 pairs) or 1 (once a work group, every quantized " \
    "format: the default)"
/* X_ONCE: the most units a row (4096 columns) whose x a work group stages,
 * and the bytes of that row in shared memory (matvec.comp XO_V uvec4 a unit:
 * 5 in f16 pairs, 9 in f32 pairs under F16_DOT_F32); longer rows keep each
 * slot's own pairs */
#define X_ONCE_UNITS 128u
#define X_ONCE_BYTES(f32_pairs) (X_ONCE_UNITS * ((f32_pairs) ? 9u : 5u) * 16u)

typedef enum { F16_DOT_OFF, F16_DOT_ON, F16_DOT_PAIRS_F32 } f16_dot_mode;
static glesllm_status f16_dot_choice(gpu_context *ctx, uint32_t type, const matvec_config *cfg,
                                     const matvec_variant *v, f16_dot_mode *out);

glesllm_status weights_env_check(void)
{
    unsigned v[4];
    if (env_uints("GLESLLM_MATVEC", v, 3, 3) < 0)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "GLESLLM_MATVEC=%s is not known; use " MATVEC_SPLIT_USE,
                       getenv("GLESLLM_MATVEC"));
    int n = env_uints("GLESLLM_MULTI", v, 3, 4);
    if (n < 0 || (n == 4 && (!v[3] || v[3] > 64 || (v[3] & (v[3] - 1)))))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "GLESLLM_MULTI=%s is not known; use " MULTI_SPLIT_USE,
                       getenv("GLESLLM_MULTI"));
    n = env_uints("GLESLLM_MATMUL", v, 3, 4);
    if (n < 0 || (n == 4 && v[3] > 3))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "GLESLLM_MATMUL=%s is not known; use " MATMUL_TILES_USE,
                       getenv("GLESLLM_MATMUL"));
    n = env_uints("GLESLLM_FETCH_AHEAD", v, 1, 1);
    if (n < 0 || (n == 1 && (v[0] > 8 || (v[0] & (v[0] - 1)))))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "GLESLLM_FETCH_AHEAD=%s is not known; use " FETCH_AHEAD_USE,
                       getenv("GLESLLM_FETCH_AHEAD"));
    int flag;
    glesllm_status st = env_flag("GLESLLM_MULTI_XSH", MULTI_XSH_USE, &flag);
    if (st == GLESLLM_OK)
        st = env_flag("GLESLLM_MULTI_XG", MULTI_XG_USE, &flag);
    if (st == GLESLLM_OK)
        st = env_flag("GLESLLM_XG_VL", XG_VL_USE, &flag);
    if (st != GLESLLM_OK)
        return st;
    return env_flag("GLESLLM_X_ONCE", X_ONCE_USE, &flag);
}

/* GLESLLM_MATVEC=wg,tpr,nr / GLESLLM_MULTI=wg,tpr,nr[,xb]: a split forced for
 * benchmarks, xb 1 unless given (anything else: weights_env_check's error) */
static bool split_from_env(const char *name, unsigned most, matvec_config *c)
{
    unsigned v[4] = { 0, 0, 0, 1 };
    if (env_uints(name, v, 3, most) < 3)
        return false;
    c->wg = v[0];
    c->tpr = v[1];
    c->nr = v[2];
    c->xb = v[3];
    return true;
}

/* the subgroup reduction where a row's lanes are whole subgroups */
static bool subgroup_fits(gpu_context *ctx, uint32_t tpr)
{
    const gpu_caps *C = gpu_context_caps(ctx);
    return C->subgroup && C->subgroup_size && tpr % C->subgroup_size == 0;
}

/* Whether a one-token kernel of `type` makes x's f16 pairs once a work group
 * (matvec.comp X_ONCE): where it takes f16 products (f16_dot_choice, whose
 * errors for a bad GLESLLM_F16_DOT it leaves to matvec_build), every
 * quantized format unless GLESLLM_X_ONCE=0. Each slot's lanes made their
 * units' pairs themselves before: with 2 slots a work group and 8 rows a
 * thread about a quarter of the kernel's instructions. With the split of
 * x_once_split, measured on an H100 in the decode step (bench/RESULTS.md
 * session 41, tg128 tokens/s): see x_once_split. (Session 40 took it for Q4_0
 * only: with the splits it had then, Q4_K_M and Q8_0 steps were slower.) */
static bool x_once_default(gpu_context *ctx, uint32_t type)
{
    int once;
    if (env_flag("GLESLLM_X_ONCE", X_ONCE_USE, &once) != GLESLLM_OK || once == 0)
        return false;
    const matvec_config one = { 0 };
    const matvec_variant store = { MATVEC_STORE };
    f16_dot_mode dot;
    return f16_dot_choice(ctx, type, &one, &store, &dot) == GLESLLM_OK && dot != F16_DOT_OFF;
}

/* X_ONCE's split, from the split above (the lanes a row kept): 4 slots of
 * lanes a work group (256 invocations at least) share each staged unit, and
 * 8192 rows or more (an FFN's gate/up, the output) take 2 rows a thread, 4
 * for Q4_0, Q4_K, Q2_K and Q3_K, and Q4_0's and Q4_K's lanes take 4 units of
 * a row instead of 2 (32 lanes for 4096 columns; with a row loaded ahead,
 * fetch_ahead_rows). Measured on an H100 (bench/RESULTS.md session 41),
 * the split above -> session 40's X_ONCE split (8 slots; for many rows 256
 * invocations of 32 lanes, 8 rows) -> this one:
 * - in the decode step (bench_decode --profile, Mistral-7B shapes, us a
 *   kernel), where a kernel is bound by its loads in flight more than alone:
 *   gate/up 28672x4096 Q4_K 56.8 -> 63.1 -> 50.5 (52.5 with 4 rows), Q8_0
 *   83.9 -> 91.6 -> 69.0 (73.5), Q4_0 54 -> 53 -> 46 (48 with 2); output
 *   32000x4096 Q6_K 97.2 -> 97.4 -> 60-69 (72.7); Q/K/V 6144x4096 Q8_0 30.5
 *   -> 29.4 -> 27.4; O 4096x4096 Q4_K 20.4 -> 20.9 -> 17.9, Q8_0 24.8 ->
 *   25.1 -> 22.3. Decode tg128: Q4_0 238 -> 258 tok/s, Q4_K_M 216 -> 232,
 *   Q8_0 165 -> 180 (from each slot's own pairs);
 * - Q2_K and Q3_K (no such model to run) by bench_matvec, 2 / 4 / 8 rows a
 *   thread: 14336x4096 back to back, % of copy, Q2_K 45 / 63 / 65, Q3_K 52
 *   / 68 / 62; gate/up chained with the norm, us, Q2_K 40.5 / 31.8 / 35.0,
 *   Q3_K 45.8 / 38.9 / 55.9.
 * Then (session 42, H200 / H100), Q4_K's 64 lanes and 2 rows a thread ->
 * 32 lanes, 4 rows and a row ahead: Mistral-7B Q4_K_M tg48 246-249 -> 261-264
 * / 231-232 -> 242 tok/s (gate/up 48.2 -> 45.5 / 50.6 -> 49.5 us in the
 * step), 14336x4096 back to back 59% -> 90-92% / 71% -> 90% of the copy
 * kernel; Q4_0's 64 lanes -> 32 (4 rows, a row ahead): tg48 290.1 -> 294.4 /
 * 261.3 -> 264.7, 14336x4096 87% -> 99% / 91% -> 96% (64 lanes and a row
 * ahead: tg48 292.9 / 264.7). The same for Q8_0 (tg48 202.3 -> 194.4 on the
 * H200, 203.6 with 2 rows ahead) and the Q6_K output matrix (290.1 -> 288.9
 * for Mistral-7B Q4_0) gained nothing in the step: they keep 64 lanes and 2
 * rows.
 * Rows of more than X_ONCE_UNITS units (an FFN's down, 4096x14336, 256 lanes
 * a row) keep each slot's pairs: staged in chunks of 128 units with at most
 * 128 lanes a row it was slower (session 40, H200, chained, Q4_0 / Q4_K /
 * Q6_K / Q8_0, 19.9 / 20.6 / 28.4 / 26.7 -> at best 20.6 / 21.4 / 33.1 /
 * 31.1 us); matvec_default_config leaves them out. */
static void x_once_split(const gpu_limits *L, uint32_t type, uint64_t rows, matvec_config *c)
{
    bool q4 = type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_K;
    bool four = q4 || type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K;
    if (rows >= 8192 && c->tpr >= 32) {
        c->nr = four ? 4 : 2;
        if (q4 && c->tpr >= 64)
            c->tpr /= 2;
    }
    c->wg = c->tpr * 4 > 256 ? c->tpr * 4 : 256;
    while (c->wg > L->max_invocations && c->wg > c->tpr)
        c->wg /= 2;
}

matvec_config matvec_default_config(gpu_context *ctx, uint32_t type, uint64_t rows, uint64_t cols)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    matvec_config c;
    /* Measured on an H100 with every matvec waiting for the one before, as
     * in a decode step (bench_matvec --chain, bench/RESULTS.md session 8): a
     * kernel running alone is bound by how many loads are in flight, so a
     * lane takes at most 2 units of a row (tpr the power of two >= units / 2,
     * up to 256: 64 for 4096 columns, 256 for 14336), or 1 where that still
     * makes at most 128Ki lanes (small models), and a thread takes up to 8
     * rows while the dispatch keeps >= 64Ki lanes; two rows' lanes a work
     * group, 128 invocations at least. (Split for throughput instead, back to
     * back: 32 lanes, 8 rows; 14336x4096 Q4_0 at 65% of copy speed, but each
     * matvec of a step ran 1.5-3x longer than with the split here.) */
    uint32_t units = weight_units_per_row(type, cols), most = L->max_invocations / 2;
    c.tpr = 16;
    while (c.tpr < (units + 1) / 2 && c.tpr < 256 && c.tpr < most)
        c.tpr *= 2;
    if (c.tpr < units && c.tpr < 256 && c.tpr < most && rows * c.tpr * 2 <= 131072)
        c.tpr *= 2;
    c.nr = 8;
    while (c.nr > 1 && rows / c.nr * c.tpr < 65536)
        c.nr /= 2;
    c.wg = c.tpr * 2 > 128 ? c.tpr * 2 : 128;
    c.x_once = units <= X_ONCE_UNITS && x_once_default(ctx, type);
    if (c.x_once)
        x_once_split(L, type, rows, &c);
    split_from_env("GLESLLM_MATVEC", 3, &c);
    c.subgroup = subgroup_fits(ctx, c.tpr);
    c.xsh = false;
    c.xg = false;
    c.xb = 1;
    c.prep_wg = 0;
    c.vl = 1;
    return c;
}

/* Whether a several-token kernel pads its partial sums (matvec.comp
 * PART_PAD): the XG kernels of 9 tokens or more. On an H200 (bench/RESULTS.md
 * session 44; Q4_0, bench_matvec --chain, us, plain -> padded), 9 tokens:
 * gate/up 28672x4096 112.3 -> 103.4, down 4096x14336 61.0 -> 58.3, Q/K/V
 * 6144x4096 34.9 -> 31.7, O 4096x4096 25.4 -> 23.8; 3 tokens 52.0 -> 49.0
 * (gate/up); but 2 tokens lost (down 25.8 -> 30.9) and 5 lost badly (gate/up
 * 79 -> 132, down 44 -> 118), with the pad or the new order alone as well:
 * not understood, the driver's code for those kernels is not visible. */
static bool part_padded(const matvec_config *c, uint32_t nt)
{
    return c->xg && nt >= 9;
}

/* Whether a several-token XG kernel loads its weights as coherent
 * (weights.glsl W_COHERENT): with 4 tokens or more (the sets of 5 and of
 * 9). On an H200 (bench/RESULTS.md session 48; Q4_0, bench_matvec --chain,
 * us, plain -> coherent), 9 tokens: gate/up 28672x4096 107.4 -> 101.4
 * (twice), Q/K/V 6144x4096 33.0 -> 32.9, down 4096x14336 60.7 -> 60.9, O
 * 4096x4096 25.0 -> 25.3; verifying 8 drafted tokens of Mistral-7B Q4_0 8.69
 * -> 8.52 ms. 5 tokens level (gate/up 81.0 -> 81.2), and so were 2 and 3
 * (not taken there). With x's units and the weights both small enough to
 * stay in L1 (a test hook), the 9-token gate/up took 85 us: the rest is the
 * loop's own. */
static bool xg_w_coherent(const matvec_config *c, uint32_t nt)
{
    return c->xg && nt >= 4;
}

/* Whether a several-token XG kernel loads each token's units of x during the
 * token before's sums, and the rows' words of a unit where it decodes them
 * (matvec.comp XG_AHEAD): those of 3 tokens without the norm (down, O). On
 * an H200 (bench/RESULTS.md session 48; Q4_0, chained, us, coherent weights
 * both), 3 tokens: down 38.9 -> 31.0, O 17.3 -> 16.3, but gate/up 53.7 ->
 * 60.2 and Q/K/V 21.6 -> 21.9 (with the norm). 9 tokens: gate/up 101.4 ->
 * 106.3, Q/K/V 32.9 -> 34.0; 2 tokens: gate/up 44.0 -> 47.6, the others
 * level. It had the set of 5 too (gate/up 81.2 -> 74.9) until session 53's
 * token groups beat it there (xg_token_group). */
static bool xg_x_ahead(const matvec_config *c, const matvec_variant *v)
{
    return c->xg && v->nt == 3 && !v->norm;
}

/* How many tokens' units of x an XG kernel loads at once before their sums
 * (matvec.comp XG_TG; one test and one wait for loads a group instead of a
 * token): 4 in the kernels of 9 tokens or more, all of them in those of 4 to
 * 8 (the set of 5), 2 in those of 2 with the norm (Q/K/V, gate/up), else 1.
 * On an H200 (bench/RESULTS.md session 53; Q4_0, bench_matvec --chain, us):
 * - 9 tokens, 1 -> 4: gate/up 28672x4096 96.2 -> 93.3, Q/K/V 6144x4096 33.3
 *   -> 31.9, down 4096x14336 88.7 -> 85.6, O 4096x4096 24.2 -> 24.0;
 *   verifying 8 drafted tokens of Mistral-7B Q4_0 9.60 -> 9.27 ms. Groups of
 *   2, 3 and 5 gained less; all 9 at once lost (gate/up 125).
 * - 5 tokens, a token ahead (XG_AHEAD) -> 5: gate/up 80.2 -> 70.6, Q/K/V
 *   31.0 -> 26.8, down 49.3 -> 44.6, O 20.6 -> 19.6; verifying 4 drafted
 *   7.28 -> 6.58-6.65 ms. Groups of 1-3 took gate/up 136-138.
 * - 2 tokens, 1 -> 2: Q/K/V 24.0 -> 20.6, gate/up 45.0 -> 45.4; down 29.9
 *   -> 30.5 and O 17.1 -> 18.0 without the norm, so not there.
 * - 3 tokens: groups of 3 and of 2 lost (gate/up 53.1 -> 54.8 / 67.8, down
 *   35.7 -> 42.4 / 36.5). */
static uint32_t xg_token_group(const matvec_config *c, const matvec_variant *v)
{
    if (!c->xg || xg_x_ahead(c, v))
        return 1;
    if (v->nt >= 9)
        return 4;
    if (v->nt >= 4)
        return v->nt;
    return v->nt == 2 && v->norm ? 2 : 1;
}

uint32_t matvec_shared_bytes(const matvec_config *c, uint32_t nt, bool xsh)
{
    if (nt <= 1) /* (the reductions' few words; X_ONCE's staged row, in f16 pairs) */
        return c->x_once ? X_ONCE_BYTES(false) + c->wg * 4 : 0;
    /* the reduction's words; with the staged x the partial sums in its memory,
     * the staged halves' sums and the norm's sums, else the partial sums and
     * the norm's partial sums */
    uint32_t part = part_padded(c, nt) ? c->nr * nt * (c->wg / c->tpr) * (c->tpr + 1) * 4
                                       : c->nr * nt * c->wg * 4,
             staged = nt * 8 * c->tpr * 16;
    if (c->xg) /* the reduction's words and the partial sums (vl: two sets) */
        return c->wg * 4 + (c->vl > 1 ? 2 * part : part);
    if (xsh)
        return c->wg * 4 + (part > staged ? part : staged) + nt * 2 * c->tpr * 4 + nt * 4;
    return c->wg * 4 + part + nt * c->wg * 4;
}

/* whether the invocations sharing a unit of x (xb) tile the work group */
static bool xb_fits(const matvec_config *c)
{
    return c->xb <= 1 || c->wg % (c->xb * c->tpr) == 0;
}

void matvec_fit_xb(matvec_config *c)
{
    while (!xb_fits(c))
        c->xb /= 2;
}

/* Whether the several-token kernels of `type` read x ready-made (matvec.comp
 * XG): where they take f16 products (f16_dot_choice), unless
 * GLESLLM_MULTI_XG=0. */
static bool xg_default(gpu_context *ctx, uint32_t type)
{
    int set;
    (void)env_flag("GLESLLM_MULTI_XG", MULTI_XG_USE, &set); /* (weights_env_check) */
    if (set == 0)
        return false;
    matvec_config c = { 0 };
    c.xg = true;
    matvec_variant v = { MATVEC_STORE };
    v.nt = 2;
    f16_dot_mode dot;
    return f16_dot_choice(ctx, type, &c, &v, &dot) == GLESLLM_OK && dot != F16_DOT_OFF;
}

/* How many of the one-token kernel `one`'s lanes an XG lane of an nt-token
 * kernel stands in for (matvec.comp XG_VL): where that kernel's lanes a row
 * are several subgroups whose adds the probe knows the order of (XG then
 * adds their runs in it), the XG kernel takes a subgroup's count of lanes a
 * row, each walking the units of tpr / subgroup of the one-token kernel's
 * lanes one after another. That pays where the one-token kernel has 128
 * lanes a row or more (an FFN's down: 256, one or two units a lane, far
 * fewer than the XG loop needs to keep its loads in flight) in the kernels
 * of 4 to 8 tokens (the set of 5). On an H200 (bench/RESULTS.md session
 * 51, run 199; Q4_0, chained, us) down 4096x14336 of 5 tokens 89.8 ->
 * 49.3; verifying 4 drafted tokens of Mistral-7B Q4_0 8.62 -> 7.21 ms. Not
 * with 9 tokens or more (down 89 -> 110-115: each stand-in's end is a
 * barrier and its runs' trees; with the stand-ins' units in one loop the
 * same), nor with 3 (verifying 2 drafted 5.36 -> 5.55 ms) or 2.
 * GLESLLM_XG_VL=0: 1 always. */
static uint32_t xg_stand_ins(gpu_context *ctx, const matvec_config *one, uint32_t nt)
{
    int set, order = 0;
    (void)env_flag("GLESLLM_XG_VL", XG_VL_USE, &set); /* (weights_env_check) */
    uint32_t sg = gpu_context_caps(ctx)->subgroup_size;
    if (set == 0 || nt < 4 || nt >= 9 || !one->subgroup || !sg || one->tpr < 128 ||
        gpu_context_subgroup_order(ctx, &order) != GLESLLM_OK || !order)
        return 1;
    return one->tpr / sg;
}

matvec_config matvec_multi_config(gpu_context *ctx, uint32_t type, uint32_t nt, uint64_t rows,
                                  uint64_t cols)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    matvec_config c;
    /* Measured on an H100 in the model (bench_verify, glesllm bench -p 8;
     * bench/RESULTS.md session 8): 256 invocations of 16 lanes a row, each
     * on 2 rows whose units stay in registers while every token's x passes
     * by from shared memory: verifying 8 drafted tokens 36.0 -> 25.6 ms
     * against session 7's 128 x 8 lanes x 4 rows (tuned back to back, where
     * kernels overlap; in a pass each waits for the one before); 25.6 -> 20.6
     * ms in session 9 with the partial sums in the staged x's memory (more
     * groups resident). Where the limits leave less room: 128 invocations, x
     * from memory, one row a thread, then fewer invocations.
     * By shape (session 15, bench_matvec --chain, each kernel after the one
     * before, Q4_0, 9 tokens / 2): many rows (an FFN's gate/up, 28672x4096)
     * take 128 invocations of 4 lanes a row, the 32 invocations of a warp on
     * one unit of 32 rows (xb 32: each read of the staged x one address for
     * the warp), 195 -> 137 / 72.7 -> 71.0 us; long rows (an FFN's down,
     * 4096x14336) 512 of 32 lanes a row, xb 8, 110 -> 96 / 56.4 -> 44.3 us.
     * Other shapes gained little (<= 7%, Q8_0 lost): unchanged.
     * Kernels of 2 or 3 tokens with many rows (gate/up, lm_head) take 8
     * lanes a row, 4 rows a thread, xb 16 (session 39, H200, chained, 2 / 3
     * tokens, us): gate/up 28672x4096 Q4_0 70.1 -> 54.7 / 78.7 -> 61.5, Q6_K
     * 97.9 -> 82.6 / 107.7 -> 93.6; 32000x4096 with the norm Q4_0 71.3 ->
     * 55.7 / 80.9 -> 62.6. With 5 tokens or more that split is slower (Q4_0
     * gate/up 91.9 -> 131.5 at 5); the down and Q/K/V shapes gained little or
     * lost with it. */
    /* GLESLLM_MULTI_XSH=0: x from memory (an invalid value, which
     * weights_env_check rejects, counts as unset here) */
    int xsh;
    (void)env_flag("GLESLLM_MULTI_XSH", MULTI_XSH_USE, &xsh); /* -1 unless 0 or 1 */
    /* XG (x_prep.comp makes each token's units of x once a dispatch, every
     * lane reads its own from memory: no staging, no barriers in the loop):
     * 256 invocations, 2 rows a thread, 64 lanes a row of at most 4096
     * columns where there are at most 8192 rows, else 32. On an H200
     * (bench/RESULTS.md session 43; chained, us, staged -> XG, the prep
     * included), 9 / 2 tokens, Q4_0: gate/up 28672x4096 114.6 -> 104.1 /
     * 54.4 -> 38.8, Q/K/V 6144x4096 51.2 -> 28.6 / 22.5 -> 15.5, O 4096x4096
     * 30.6 -> 21.4 / 15.0 -> 11.0, down 4096x14336 75.7 -> 58.0 / 35.9 ->
     * 23.5; Q6_K 32000x4096 (lm_head) 147.4 -> 131.9 / 80.5 -> 56.3. Verifying
     * 8 drafted tokens of Mistral-7B Q4_0 10.89 -> 9.39 ms, Q4_K_M 12.45 ->
     * 10.17, the same greedy ids. Splits with 4-16 lanes a row or 4 rows a
     * thread were slower (gate/up 115-150 us).
     * Since session 50 XG takes the one-token kernel's lanes a row instead
     * (below), for sums that are a decode step's to the bit: on an H200
     * (chained, 9 tokens, us, Q4_0) gate/up 95 -> 112, down 70 -> 107 (256
     * lanes a row, the one-token kernel's), Q/K/V 32 -> 38, O 24 -> 28;
     * verifying 8 drafted tokens of Mistral-7B Q4_0 9.19 -> 11.71 ms of GPU
     * time (timestamps after each dispatch). */
    c.xg = xg_default(ctx, type);
    c.wg = L->max_invocations >= 256 ? 256 : 128;
    c.tpr = 16;
    c.nr = 2;
    c.xb = 1;
    c.prep_wg = 0;
    c.vl = 1;
    if (c.xg) {
        /* A token's sums are a decode step's to the bit (a verifying pass
         * keeps the tokens greedy decoding would make): each lane takes the
         * units the one-token kernel's lane takes, and xg_lane_sums adds the
         * lanes as it does (its subgroups or its tree); x_prep.comp repeats
         * its sum of squares in a group of its size. */
        matvec_config one = matvec_default_config(ctx, type, rows, cols);
        c.wg = L->max_invocations >= 256 ? 256 : L->max_invocations;
        c.tpr = one.tpr;
        c.vl = xg_stand_ins(ctx, &one, nt);
        c.tpr /= c.vl;
        if (c.vl > 1 && matvec_shared_bytes(&c, nt, false) > L->max_shared_bytes) {
            c.tpr = one.tpr; /* (its two sets of partial sums do not fit) */
            c.vl = 1;
        }
        if (c.wg < c.tpr)
            c.wg = c.tpr;
        c.prep_wg = one.wg;
    } else if (cols >= 8192 && L->max_invocations >= 512) {
        c.wg = 512;
        c.tpr = 32;
        c.xb = 8;
    } else if (rows >= 16384 && nt <= 3) {
        c.wg = 128;
        c.tpr = 8;
        c.nr = 4;
        c.xb = 16;
    } else if (rows >= 16384) {
        c.wg = 128;
        c.tpr = 4;
        c.xb = 32;
    }
    bool forced = split_from_env("GLESLLM_MULTI", 4, &c);
    if (forced)
        c.vl = 1;
    /* (xg: the partial sums through shared memory first; subgroup adds of
     * every (row, token) in registers ran gate/up 104 -> 208 us, down 58 ->
     * 139) */
    c.subgroup = subgroup_fits(ctx, c.tpr); /* (xg: the one-token kernel's choice) */
    c.xsh = xsh != 0 && !c.xg;
    c.x_once = false;
    uint32_t wg = c.wg;
    if (matvec_shared_bytes(&c, nt, c.xsh) > L->max_shared_bytes)
        c.xsh = false;
    if (matvec_shared_bytes(&c, nt, c.xsh) > L->max_shared_bytes)
        c.nr = 1;
    while (matvec_shared_bytes(&c, nt, c.xsh) > L->max_shared_bytes && c.wg > c.tpr)
        c.wg /= 2;
    /* a forced xb that does not tile the forced wg is matvec_build's error;
     * one that no longer tiles the wg the limits left here is fitted */
    if (!forced || c.wg != wg)
        matvec_fit_xb(&c);
    return c;
}



/* The defines of an epilogue (matvec.comp and matmul.comp share them). */
void matvec_epilogue_defines(const matvec_variant *v, char *buf, size_t n)
{
    buf[0] = 0;
    if (v->epilogue == MATVEC_ADD)
        snprintf(buf, n, "\nADD_Y 1");
    else if (v->epilogue == MATVEC_GLU)
        snprintf(buf, n, "\nGLU 1");
    else if (v->epilogue == MATVEC_QKV)
        snprintf(buf, n, "\nQKV 1\nQ_DIM %u\nKV_DIM %u\nHEAD_DIM %u%s", v->q_dim, v->kv_dim,
                 v->head_dim, v->bias ? "\nQKV_BIAS 1" : "");
}

/* Whether a kernel's row loop is unrolled (matvec.comp's NO_UNROLL off). With
 * several tokens always (the per-token sums stay in registers). With one,
 * for the K-quants but Q4_K: NVIDIA's compiler left the loop over a thread's
 * rows rolled for the sub-byte formats, their sums in local memory; unrolled,
 * on an H100 (bench/RESULTS.md session 13) Q6_K went from 59% to 71% of the
 * copy kernel (14336x4096), Q2_K 30 -> 37%, while Q4_0's and Q8_0's FFN
 * gate/up in the step ran 7% and 16% slower (more registers, fewer groups
 * resident). Q4_K gained from it then (48 -> 57%, a Q4_K_M step 156 -> 160
 * tok/s), but once the rows' loads went ahead of their sums (w_fetch,
 * fetch_rows) rolled was faster in the step: on an H200 a Q4_K_M step 177.5
 * -> 188.4 tok/s, though alone Q4_K reads at 53% of the copy kernel rolled
 * and 56% unrolled (session 20). GLESLLM_UNROLL=0|1 forces it off or on for
 * every one-token kernel. */
/* The K-quants: the formats of 256-value blocks (quant_gpu.h) */
static bool is_kquant(uint32_t type)
{
    const quant_gpu_layout *L = quant_gpu_layout_of(type);
    return L && L->block == 256;
}

static glesllm_status matvec_unrolled(uint32_t type, const matvec_variant *v, bool *unroll)
{
    int set;
    glesllm_status st = env_flag("GLESLLM_UNROLL",
                                 "0 (no one-token kernel unrolled), 1 (every one) or leave it "
                                 "unset (the K-quants')",
                                 &set);
    if (st != GLESLLM_OK)
        return st;
    *unroll = v->nt > 1 || (set >= 0 ? set == 1 : is_kquant(type) && type != GGML_TYPE_Q4_K);
    return GLESLLM_OK;
}

/* Rows whose units a one-token kernel loads at once, before it decodes and
 * sums them (matvec.comp's FETCH_ROWS; a divisor of nr): all of a thread's
 * rows, but 2 for Q8_0, whose 36 bytes a unit held for 8 rows ran slower
 * (fewer groups resident). On an H200 (bench/RESULTS.md session 20), against
 * each row loaded after the one before was summed: 14336x4096 at 60 -> 70% of
 * the copy kernel for Q4_0, 64 -> 70% Q5_0, 51 -> 56% Q4_K, 93 -> 96% Q8_0
 * (fetch 8 rows: 91%); decode 202 -> 223 tok/s for Mistral-7B Q4_0, 159 ->
 * 166 Q8_0 (and Q4_K_M 178 -> 183 with its rows rolled, matvec_unrolled). */
static uint32_t fetch_rows(uint32_t type, uint32_t nr)
{
    uint32_t n = type == GGML_TYPE_Q8_0 ? 2 : nr;
    return n && n <= nr && nr % n == 0 ? n : nr;
}

/* One-token kernels, the quantized formats: whether each group of a
 * thread's rows has its words loaded before the group before is decoded and
 * summed (matvec.comp FETCH_AHEAD), and how many rows a group holds then (a
 * divisor of nr, replacing fetch_rows'; 0: not ahead). By default only Q4_K's
 * kernels of 8 rows a thread (the large matrices), 1 row a group, 2 for its
 * gate/up (GLU). On an H200 (bench/RESULTS.md session 36), back to back /
 * each waiting for the one before, us: Q4_K 14336x4096 15.46 / 20.63 -> 14.82
 * / 20.18 (65% -> 68% of the copy kernel), 32000x4096 34.0 / 46.5 -> 32.3 /
 * 44.8, gate/up 28672x4096 chained 46.7 -> 39.8 (2 rows a group); Mistral-7B
 * Q4_K_M tg128 220.4 -> 220.8 and 226.0-226.6 -> 227.1-227.3 on two machines,
 * the same greedy ids; on an H100 Q4_K 74% -> 78% and tg128 207.0 -> 210.9.
 * Every other format measured slower in the decode step although faster
 * alone: Q4_0 (2 rows) 14336x4096 72% -> 76% and its gate/up
 * 38.7 -> 34.3 us chained, yet Mistral-7B Q4_0 tg128 260.2 -> 256.5 (its down
 * matrix slower in the step, 22.8 -> 23.3 us); Q8_0 98% -> 103% alone,
 * tg128 183.2 -> 171.1. With 4 rows a thread (4096x4096) every format was
 * slower. Q2_K, Q3_K, Q5_K and Q6_K: slower chained, or unmeasured in a
 * step. And Q4_0's and Q4_K's kernels of 4 rows a thread with x made once a
 * work group (X_ONCE, x_once_split; the large matrices, and Q/K/V and O of
 * 4096 columns), 1 row a group: measured with x_once_split's new split for
 * the large ones (session 42, the figures there; Q/K/V and O were within
 * 0.5 us either way in the Q4_K_M step on an H200). GLESLLM_FETCH_AHEAD=0
 * turns it off, =N (1, 2, 4 or 8) takes N rows a group ahead for every
 * quantized format (for benchmarks). */
static uint32_t fetch_ahead_rows(uint32_t type, const matvec_config *c, const matvec_variant *v)
{
    uint32_t nr = c->nr;
    unsigned e[1];
    uint32_t want = 0;
    if (env_uints("GLESLLM_FETCH_AHEAD", e, 1, 1) == 1) /* else weights_env_check's error */
        want = e[0];
    else if (nr == 8 && type == GGML_TYPE_Q4_K)
        want = v->epilogue == MATVEC_GLU ? 2 : 1;
    else if (nr == 4 && c->x_once && (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_K))
        want = 1;
    if (quant_gpu_is_float(type))
        return 0;
    while (want > 1 && nr % want)
        want /= 2;
    return want;
}

/* How a matvec multiplies (matvec.comp F16_DOT): in f16 for every quantized
 * format, with one token and, where x is staged (XSH) or made ready (XG),
 * with several; F16_DOT_PAIRS_F32 is the same kernel with f32 pairs, on a
 * driver without f16 types (GL_NV_gpu_shader5). On by default: in f16 where
 * the driver has the types, else in f32 pairs, because only this kernel's
 * several-token form (XG) sums as its one-token form does, to the bit, so
 * that a verifying pass (--draft) gives the ids of plain decoding, near-ties
 * too (the f32 products' several-token kernels stage x and sum in another
 * order: about 1e-5 of the largest logit apart on llvmpipe). On llvmpipe
 * (bench/RESULTS.md session 51) the f32 pairs cost tiny-spm-q4_0 decode about
 * 2% (43.8/42.7 -> 42.5/42.0 tokens/s). Measured on
 * an H200 (bench/RESULTS.md sessions 17-19): one token, Q4_0 14336x4096 17.9
 * -> 16.9 us, Mistral-7B Q4_0 tg128 197.6 -> 203.6 tok/s with the same greedy
 * ids; Q8_0 chained 4096x14336 32.9 -> 28.0 us, Mistral-7B Q8_0 tg128 150.5
 * -> 157.2; the byte-level formats (Q5_0, Q5_1, Q5_K, Q2_K, Q3_K, Q6_K) at
 * 14336x4096 48/51/47/30/30/62% of the copy kernel -> 64/69/55/36/43/71%,
 * Q6_K chained 28672x4096 60.6 -> 54.8 us; Mistral-7B Q4_K_M tg128 172.4 ->
 * 177.1 with the byte formats, 180.4 with Q4_K's smaller matrices too (same
 * ids). Run alone, Q4_K, Q5_K, Q5_1 and Q2_K at 4096x4096 (4 rows a thread)
 * take 3-10% longer in f16; in the Q4_K_M step Q4_K's Q/K/V and O gained.
 * 9 tokens, gate/up 28672x4096 Q4_0 135.7 -> 116.0 us, Q8_0 564.8 -> 129.6,
 * Q6_K 173.5 -> 138.7; verifying 8 drafted tokens 12.97 -> 11.57 ms (Q4_0),
 * 15.09 -> 13.55 (Q8_0). Errors: up to 2.4e-4 of sum |w x| seen for Q4_0;
 * every format within tests/test_matvec.c's F16_DOT_REL_TOL there. */
static glesllm_status f16_dot_choice(gpu_context *ctx, uint32_t type, const matvec_config *cfg,
                                     const matvec_variant *v, f16_dot_mode *out)
{
    int set;
    glesllm_status st = env_flag("GLESLLM_F16_DOT",
                                 "0 (f32 products), 1 (f16 products for the quantized formats, "
                                 "f32 pairs where the driver has no f16 types) or leave it unset "
                                 "(1)",
                                 &set);
    if (st != GLESLLM_OK)
        return st;
    bool f16 = gpu_context_caps(ctx)->f16_types;
    *out = F16_DOT_OFF;
    if (!quant_gpu_is_float(type) && (v->nt <= 1 || cfg->xsh || cfg->xg) && set != 0)
        *out = f16 ? F16_DOT_ON : F16_DOT_PAIRS_F32;
    return GLESLLM_OK;
}

/* Whether a kernel with f16 products (f16_dot_choice) takes its levels as f16
 * subnormals (matvec.comp F16_SUBN): a field masked in place and read as a
 * half is level x 2^-24 (x 2^-20 for a high nibble), so the subtraction of
 * 1024 that makes it an integer goes, about one instruction in five of a
 * unit (x is scaled by 2^15 instead of 1 to match, and the format's fixed
 * offset, where it has one, goes to the f32 map as for the unsigned
 * formats). It needs a driver that keeps f16 subnormals
 * (gpu_context_f16_subnormals). By default for every quantized format but
 * Q5_K, Q5_0 and Q8_0, and for Q4_K's one-token kernels but its gate/up.
 * On one H200 (bench/RESULTS.md session 26, 14336x4096, % of the copy
 * kernel, without -> with): Q4_1 74 -> 78, Q5_1 68 -> 72, Q2_K 36-37 -> 40,
 * Q4_0 71 -> 72 (Mistral-7B Q4_0 tg128 248.3 -> 256.2 tok/s), Q6_K 67 ->
 * 69-71, Q3_K 44 -> 46-47. The signed formats' offset then rides in the f16
 * sums (levels 0..15 instead of -8..7 for Q4_0): about twice the rounding
 * error of those sums, still far below the 8-bit rounding of x in llama.cpp's
 * own quantized dot products, and the shared models of llama.cpp's
 * references agree as closely with every format so (session 27,
 * tests/test_model.c on an H200: worst top-5 logit difference 0.037 -> 0.034
 * Q4_0, 0.030 -> 0.027 Q6_K, 0.040 -> 0.041 Q4_K_M, every teacher-forced
 * position matched; that run read Q6_K at 66 -> 69-70%). Q4_K: its gate/up
 * (GLU) kernel ran slower so in the Mistral-7B Q4_K_M step (57.3 -> 61.3 us
 * on one machine; tg128 216.8 -> 211.5 with it, session 27), its down matrix
 * (4096x14336) faster (25.9 -> 23.8 us), its 4096-column ones level: tg128
 * 216.8 -> 218.7 (three rounds each) with every one-token Q4_K kernel but
 * gate/up (its several-token kernels unmeasured, left out). The other
 * formats' several-token kernels take it too: verifying 8 drafted tokens of
 * Mistral-7B Q4_0 11.48 -> 11.21 ms. Left out: Q5_K (1-3% faster alone, its
 * step unmeasured), Q5_0 and Q8_0 (slower: 68 -> 66, 91-95 -> 90).
 * GLESLLM_F16_SUBN=1 takes every quantized format's levels so (where the
 * driver keeps subnormals), 0 none. */
static glesllm_status f16_subn_choice(gpu_context *ctx, uint32_t type, const matvec_variant *v,
                                      f16_dot_mode dot, bool *out)
{
    int set;
    glesllm_status st = env_flag("GLESLLM_F16_SUBN",
                                 "0 (no levels as f16 subnormals), 1 (every quantized "
                                 "format's, with f16 products) or leave it unset (those of "
                                 MATVEC_SUBN_DEFAULT ", where the driver keeps subnormals)",
                                 &set);
    if (st != GLESLLM_OK)
        return st;
    *out = false;
    /* (Q4_K: its one-token kernels but gate/up) */
    bool by_default = type == GGML_TYPE_Q4_K
                          ? v->nt <= 1 && v->epilogue != MATVEC_GLU
                          : type != GGML_TYPE_Q5_K && type != GGML_TYPE_Q5_0 &&
                                type != GGML_TYPE_Q8_0;
    if (dot == F16_DOT_OFF || set == 0 || (set < 0 && !by_default))
        return GLESLLM_OK;
    bool kept = false;
    st = gpu_context_f16_subnormals(ctx, &kept);
    if (st != GLESLLM_OK)
        return st;
    if (!kept && set == 1)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "GLESLLM_F16_SUBN=1: this driver flushes f16 subnormals to zero; unset "
                       "it (the kernels then take their levels as integers)");
    *out = kept;
    return GLESLLM_OK;
}

/* Whether a kernel with f16 products (f16_dot_choice) may add the
 * f16 sums of a unit's two halves in f16 before they go to f32 (matvec.comp
 * H_MERGE, which the formats whose two halves share one map take up:
 * weights.glsl W_H_SAME), which saves each row's unit two conversions and
 * two f32 operations. On an H200 (bench/RESULTS.md session 22), 14336x4096 alone
 * went from 54% to 65% of the copy kernel for Q4_K, 66 -> 77% Q4_1, 58 ->
 * 60% Q5_K, Q4_0 and Q8_0 level; decode Mistral-7B Q4_0 242.5 -> 244.1
 * tok/s, Q8_0 178.2 -> 181.6, with the same greedy ids. Q4_K's gate/up
 * (GLU) kernel ran slower in the step (57.4 -> 59.2 us) while its other
 * kernels gained: Q4_K_M 211.0 -> 215.0 with it apart, 209.2 with it merged
 * too (one machine). Several tokens (matvec.comp XM: x staged with one
 * scale a unit): only the kernels without NORM. On an H100 (bench/RESULTS.md
 * session 38, bench_matvec --chain, 9 tokens) 4096x14336 Q4_0 86.2 -> 77.9
 * us, Q8_0 96.9 -> 89.1, 4096x4096 Q4_0 32.4 -> 30.9; 2 tokens level;
 * verifying 8 drafted tokens of Mistral-7B Q4_0 11.29 -> 10.97 ms, the same
 * greedy ids. With NORM (gate/up, Q/K/V: whole units staged, half as many
 * items a block) the H200's 28672x4096 gate/up of 9 tokens went 114 -> 125
 * us and the pass did not gain. */
static bool halves_merged(uint32_t type, const matvec_variant *v)
{
    return v->nt > 1 ? !v->norm : !(type == GGML_TYPE_Q4_K && v->epilogue == MATVEC_GLU);
}

/* the formats whose high half comes as 16 x the level (weights.glsl W_H_SAME 1/16) */
static bool high_times_16(uint32_t type)
{
    return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q4_K;
}

/* uvec4 a unit of x with xg (x_unit.glsl XO_V): in f16 pairs, in f32 pairs
 * (the most) */
#define XG_WORDS_F16 5u
#define XG_WORDS_F32 9u

uint64_t matvec_xg_room(uint64_t cols, uint32_t n)
{
    return (uint64_t)n * ((cols + 31) / 32) * XG_WORDS_F32 * 4;
}

uint64_t matvec_xg_floats(const matvec_kernel *k, uint64_t cols, uint32_t n)
{
    return (uint64_t)n * weight_units_per_row(k->type, cols) * k->xg_words * 4;
}

#define XP_WG 128u /* x_prep.comp's work group */

glesllm_status matvec_build(gpu_context *ctx, uint32_t type, const matvec_config *cfg,
                            const matvec_variant *var, matvec_kernel *out)
{
    memset(out, 0, sizeof *out);
    matvec_variant v = var ? *var : (matvec_variant){ MATVEC_STORE };
    bool pairs = v.epilogue == MATVEC_GLU || v.epilogue == MATVEC_QKV;
    if (pairs && cfg->nr % 2)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec: the GLU and QKV epilogues need an even number of rows per thread");
    if ((v.norm_scale || v.norm_out) && (v.nt > 1 || v.norm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec: the split norm (norm_scale, norm_out) is for one token, "
                       "without the folded norm");
    if (v.norm_out && v.epilogue != MATVEC_ADD)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec: norm_out goes with the residual add (MATVEC_ADD)");
    if (!quant_gpu_layout_of(type))
        return err_set(GLESLLM_ERR_UNSUPPORTED, "no GPU matvec for tensor type %s",
                       ggml_type_name(type) ? ggml_type_name(type) : "(unknown)");
    const gpu_limits *L = gpu_context_limits(ctx);
    if (!cfg->wg || cfg->wg > L->max_invocations || !cfg->tpr || cfg->wg % cfg->tpr ||
        (cfg->tpr & (cfg->tpr - 1)) || !cfg->nr || cfg->nr > 8 || v.nt > MATVEC_MAX_NT ||
        (cfg->xb & (cfg->xb - 1)) || !xb_fits(cfg))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec: invalid work split (wg %u, tpr %u, nr %u, xb %u, %u tokens; "
                       "limit %u invocations, %d tokens; wg a multiple of xb * tpr)",
                       cfg->wg, cfg->tpr, cfg->nr, cfg->xb, v.nt, L->max_invocations,
                       MATVEC_MAX_NT);
    if (cfg->subgroup) {
        const gpu_caps *C = gpu_context_caps(ctx);
        if (!C->subgroup || !C->subgroup_size || cfg->tpr % C->subgroup_size)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "matvec: the subgroup reduction needs GL_KHR_shader_subgroup and tpr "
                           "a multiple of the subgroup size");
    }
    f16_dot_mode f16_dot;
    glesllm_status st = f16_dot_choice(ctx, type, cfg, &v, &f16_dot);
    if (st != GLESLLM_OK)
        return st;
    /* X_ONCE where it applies (one token, f16 products, at most X_ONCE_UNITS
     * lanes a row); the kernel keeps cfg as asked (get_matvec finds it by
     * that) */
    matvec_config eff = *cfg;
    eff.x_once = cfg->x_once && v.nt <= 1 && f16_dot != F16_DOT_OFF && cfg->tpr <= X_ONCE_UNITS;
    eff.xg = cfg->xg && v.nt > 1 && f16_dot != F16_DOT_OFF;
    if (eff.xg)
        eff.xsh = false;
    /* (rows of more than X_ONCE_UNITS units: matvec_record_args refuses them) */
    /* (f32 pairs take more: where they leave too little shared memory, as
     * under GLESLLM_LIMITS=min, each slot makes its own) */
    if (eff.x_once && f16_dot == F16_DOT_PAIRS_F32 &&
        X_ONCE_BYTES(true) + eff.wg * 4 > L->max_shared_bytes)
        eff.x_once = false;
    /* several tokens: the partial sums (and the norm's) in shared memory;
     * X_ONCE: the staged row of x */
    uint32_t shared_bytes = matvec_shared_bytes(&eff, v.nt, eff.xsh);
    if (shared_bytes > L->max_shared_bytes)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "matvec of %u tokens: %u bytes of shared memory, the GPU has %u", v.nt,
                       shared_bytes, L->max_shared_bytes);
    bool unroll = true;
    st = matvec_unrolled(type, &v, &unroll);
    if (st != GLESLLM_OK)
        return st;
    /* Q4_0 and Q4_1 nibbles minus their offset in f16 arithmetic, two a
     * instruction (GL_NV_gpu_shader5; weights.glsl nib_levels). On an H100
     * (bench/RESULTS.md session 16) Q4_0 14336x4096 went from 63% to 66-67% of
     * the copy kernel and its FFN matvecs each waiting for the one before 5%
     * faster; Q4_1 level. Q4_K was slower with it (its unrolled rows: 4096x14336
     * 50% -> 32%), and so were unrolled Q4_0 rows. Not with the levels as
     * f16 subnormals (f16_subn_choice), which take no offset off at all. */
    /* XG: the levels read, and a unit's halves summed, as the one-token
     * kernel of the same weight does (so its products and their f16 sums are
     * that kernel's, matvec_multi_config) */
    matvec_variant lv = v;
    if (eff.xg) {
        lv.nt = 1;
        lv.norm_scale = v.norm;
        lv.norm = false;
    }
    bool f16_subn = false;
    st = f16_subn_choice(ctx, type, &lv, f16_dot, &f16_subn);
    if (st != GLESLLM_OK)
        return st;
    bool f16_levels = gpu_context_caps(ctx)->f16_types && !f16_subn &&
                      (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1);
    char tdef[32], epi[128], sg[64] = "", xb[16] = "", defines[512];
    weight_type_define(type, tdef, sizeof tdef);
    matvec_epilogue_defines(&v, epi, sizeof epi);
    /* XG: its lanes' sums added in the order of the one-token kernel's
     * (matvec.comp xg_lane_sums): its subgroups' order without subgroup
     * operations where the probe knows it, else their subgroupAdd; its
     * shared-memory tree (halves) without subgroups */
    int sg_order = 0;
    if (eff.xg && cfg->subgroup) {
        st = gpu_context_subgroup_order(ctx, &sg_order);
        if (st != GLESLLM_OK)
            return st;
    }
    /* (vl > 1: XG_SGC is the row's lanes; without subgroups, a config no
     * default makes, its runs in group_sum's order: tests) */
    if (eff.xg && cfg->vl > 1 && cfg->subgroup &&
        (!sg_order || gpu_context_caps(ctx)->subgroup_size != cfg->tpr))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec: an XG lane for %u one-token lanes needs a subgroup's lanes a row "
                       "and the order of its adds",
                       cfg->vl);
    if (eff.xg && (!cfg->subgroup || sg_order)) {
        int n = snprintf(sg, sizeof sg, "\nXG_SGC %u\nXG_ORDER %d",
                         cfg->subgroup ? gpu_context_caps(ctx)->subgroup_size : cfg->tpr,
                         cfg->subgroup ? sg_order : GPU_SG_HALVES);
        if (cfg->vl > 1)
            snprintf(sg + n, sizeof sg - (size_t)n, "\nXG_VL %u", cfg->vl);
    } else if (cfg->subgroup)
        snprintf(sg, sizeof sg, "\nUSE_SUBGROUP 1\nSG_SIZE %u",
                 gpu_context_caps(ctx)->subgroup_size);
    if (v.nt > 1 && cfg->xb > 1)
        snprintf(xb, sizeof xb, "\nXB %u", cfg->xb);
    snprintf(defines, sizeof defines, "%s\nWG_SIZE %u\nTPR %u\nNR %u\nNT %u%s%s%s%s%s%s%s%s",
             tdef, cfg->wg, cfg->tpr, cfg->nr, v.nt > 1 ? v.nt : 1, sg, epi,
             v.norm && !eff.xg ? "\nNORM 1" : "", v.norm_scale ? "\nNORM_SCALE 1" : "",
             v.norm_out ? "\nNORM_OUT 1" : "", eff.xsh && v.nt > 1 ? "\nXSH 1" : "", xb,
             unroll ? "" : "\nNO_UNROLL 1");
    if (eff.xg)
        strncat(defines, "\nXG 1", sizeof defines - strlen(defines) - 1);
    if (part_padded(&eff, v.nt))
        strncat(defines, "\nPART_PAD 1", sizeof defines - strlen(defines) - 1);
    if (xg_w_coherent(&eff, v.nt))
        strncat(defines, "\nW_COHERENT 1", sizeof defines - strlen(defines) - 1);
    if (xg_x_ahead(&eff, &v))
        strncat(defines, "\nXG_AHEAD 1", sizeof defines - strlen(defines) - 1);
    uint32_t tg = xg_token_group(&eff, &v);
    if (tg > 1) {
        char tgd[16];
        snprintf(tgd, sizeof tgd, "\nXG_TG %u", tg);
        strncat(defines, tgd, sizeof defines - strlen(defines) - 1);
    }
    /* Several tokens with x staged, the quantized formats: each block's
     * units loaded during the block before (matvec.comp XPF). On an H200
     * (bench/RESULTS.md session 24; Q4_0, bench_matvec --chain, us) 2 tokens:
     * 4096x14336 40.7 -> 36.4, 4096x4096 16.5 -> 15.8; 9 tokens level (83.2
     * -> 83.4, 34.2 -> 32.8). Verifying 1-2 drafted tokens (bench_verify) 1-1.5%
     * faster, 4-16 unchanged. Not with NORM: there the 28672x4096 gate/up of
     * 9 tokens went 123 -> 131 us and Q6_K's 32000x4096 147 -> 227. */
    if (v.nt > 1 && eff.xsh && !v.norm && !quant_gpu_is_float(type))
        strncat(defines, "\nXPF 1", sizeof defines - strlen(defines) - 1);
    if (f16_levels)
        strncat(defines, "\nF16_LEVELS 1", sizeof defines - strlen(defines) - 1);
    if (f16_dot != F16_DOT_OFF)
        strncat(defines, f16_dot == F16_DOT_ON ? "\nF16_DOT 1" : "\nF16_DOT_F32 1",
                sizeof defines - strlen(defines) - 1);
    if (f16_subn)
        strncat(defines, "\nF16_SUBN 1", sizeof defines - strlen(defines) - 1);
    if (eff.x_once) {
        char xo[32];
        snprintf(xo, sizeof xo, "\nX_ONCE 1\nX_ONCE_UNITS %u", X_ONCE_UNITS);
        strncat(defines, xo, sizeof defines - strlen(defines) - 1);
    }
    bool merged = f16_dot != F16_DOT_OFF && halves_merged(type, &lv);
    if (merged)
        strncat(defines, "\nH_MERGE_OK 1", sizeof defines - strlen(defines) - 1);
    if (eff.xg)
        strncat(defines, v.norm ? "\nW_AS_ONE 1\nXG_NSCALE 1" : "\nW_AS_ONE 1",
                sizeof defines - strlen(defines) - 1);
    if (v.norm_scale) {
        /* The partial sums of squares: an invocation's first vec4 of them
         * loaded before the units and added after (registers held through
         * the unit loop), or all loaded at the end. On an H200 (bench/RESULTS.md
         * session 21) Mistral-7B Q4_0 tg128 ran 236 tok/s loading 2 ahead and
         * 242 loading none; Q4_K_M 201-204 and 197-198; Q8_0 175 and 173. */
        strncat(defines, is_kquant(type) ? "\nSQ_AHEAD 2" : "\nSQ_AHEAD 0",
                sizeof defines - strlen(defines) - 1);
    }
    uint32_t fetch = fetch_rows(type, cfg->nr);
    uint32_t ahead = v.nt <= 1 ? fetch_ahead_rows(type, &eff, &v) : 0;
    if (ahead) {
        fetch = ahead;
        strncat(defines, "\nFETCH_AHEAD 1", sizeof defines - strlen(defines) - 1);
    }
    if (v.nt <= 1 && fetch != cfg->nr) {
        char fr[24];
        snprintf(fr, sizeof fr, "\nFETCH_ROWS %u", fetch);
        strncat(defines, fr, sizeof defines - strlen(defines) - 1);
    }
    st = gpu_program_build(ctx, "matvec.comp", defines, &out->prog);
    if (st != GLESLLM_OK)
        return st;
    out->prep_wg = v.norm && cfg->prep_wg ? cfg->prep_wg : XP_WG;
    if (eff.xg) {
        /* x_prep.comp: the pairs as the one-token kernel's x_half makes them
         * (the high half on the low half's scale where the halves merge,
         * F16_SUBN: SUBN_X and SUBN_M, W_TWO_IN_PLACE: W_XL and W_XH), the
         * norm's sum of squares as its NORM_SCALE adds it up */
        bool two = f16_subn && (type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K);
        char pd[200];
        snprintf(pd, sizeof pd, "WG_SIZE %u\nXP_HI %s\nXP_X %s\nXP_M %s%s%s%s%s", out->prep_wg,
                 merged && high_times_16(type) ? "0.0625" : "1.0", f16_subn ? "32768.0" : "1.0",
                 f16_subn ? "512.0" : "1.0", v.norm ? "\nNORM 1" : "",
                 f16_dot == F16_DOT_ON ? "" : "\nXP_F32 1", two ? "\nXP_TWO 1" : "",
                 v.norm && cfg->subgroup ? "\nUSE_SUBGROUP 1" : "");
        st = gpu_program_build(ctx, "x_prep.comp", pd, &out->prep);
        if (st != GLESLLM_OK) {
            gpu_program_destroy(&out->prog);
            return st;
        }
    }
    /* named by type and tokens in errors and profiles */
    static const char *const epi_names[] = { "", " +y", " glu", " qkv" };
    snprintf(out->prog.name, sizeof out->prog.name, "matvec %s x%u%s%s", weight_type_label(type),
             v.nt > 1 ? v.nt : 1, v.epilogue < 4 ? epi_names[v.epilogue] : "",
             v.norm ? " norm" : v.norm_scale ? " norm-scale" : v.norm_out ? " norm-out" : "");
    out->type = type;
    out->cfg = *cfg;
    out->var = v;
    /* (with several tokens the staged x is f16 even in f32 pairs) */
    out->f16_products = f16_dot == F16_DOT_ON || (f16_dot == F16_DOT_PAIRS_F32 && v.nt > 1);
    out->f16_subnormals = f16_subn;
    out->x_once = eff.x_once;
    out->xg = eff.xg;
    out->xg_words = eff.xg ? (f16_dot == F16_DOT_ON ? XG_WORDS_F16 : XG_WORDS_F32) : 0;
    return GLESLLM_OK;
}

void matvec_destroy(matvec_kernel *k)
{
    gpu_program_destroy(&k->prog);
    gpu_program_destroy(&k->prep);
    memset(k, 0, sizeof *k);
}




glesllm_status matvec_record(gpu_queue *q, const matvec_kernel *k, const gpu_weight *w,
                             const gpu_buffer *x, uint64_t x_off, const gpu_buffer *y,
                             uint64_t y_off)
{
    matvec_args none = { 0 };
    return matvec_record_args(q, k, w, x, x_off, y, y_off, &none);
}

/* The slots (threads' runs of nr rows) over one part: a norm_out kernel
 * writes a partial sum for each, the parts' one after another */
static uint64_t part_slots(const matvec_kernel *k, const gpu_weight_part *p)
{
    return (p->rows + k->cfg.nr - 1) / k->cfg.nr;
}

uint32_t matvec_norm_parts(const matvec_kernel *k, const gpu_weight *w)
{
    uint64_t n = 0;
    for (uint32_t i = 0; k->var.norm_out && i < w->n_parts; i++)
        n += part_slots(k, &w->parts[i]);
    return (uint32_t)n;
}

glesllm_status matvec_record_args(gpu_queue *q, const matvec_kernel *k, const gpu_weight *w,
                                  const gpu_buffer *x, uint64_t x_off, const gpu_buffer *y,
                                  uint64_t y_off, const matvec_args *a)
{
    if (k->type != w->type)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "matvec kernel for %s given tensor %s (%s)",
                       ggml_type_name(k->type), w->name, ggml_type_name(w->type));
    if (k->x_once && weight_units_per_row(w->type, w->cols) > X_ONCE_UNITS)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec kernel staging x once (at most %u units a row) given %s of %llu "
                       "columns",
                       X_ONCE_UNITS, w->name, (unsigned long long)w->cols);
    matvec_epilogue e = k->var.epilogue;
    uint32_t nt = k->var.nt > 1 ? k->var.nt : 1, n = a->n_tok ? a->n_tok : 1;
    uint64_t xs = act_stride(w->cols);
    uint64_t y_end = e == MATVEC_QKV ? 0 : e == MATVEC_GLU ? (y_off + w->rows) / 2 : y_off + w->rows;
    if (n > 1)
        y_end = e == MATVEC_QKV ? a->q_off + (uint64_t)n * act_stride(k->var.q_dim)
                                : y_end + (n - 1) * a->y_stride;
    if (n > nt || x_off % 4 || (x_off + n * xs) * 4 > x->size ||
        y_end * 4 > (e == MATVEC_QKV ? x->size : y->size) || y_end >= (1ull << 32) ||
        (k->var.norm && (a->norm_off % 4 || (a->norm_off + xs) * 4 > x->size)) ||
        (k->var.norm_scale && (a->sq_off % 4 || (a->sq_off + a->sq_count) * 4 > x->size)) ||
        (k->var.norm_out && ((a->xg_off + w->rows) * 4 > y->size ||
                             (a->sq_off + matvec_norm_parts(k, w)) * 4 > y->size ||
                             (a->norm_off + w->rows) * 4 > x->size)))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec %s over %u tokens (kernel: %u): x (offset %llu, %zu bytes) or y "
                       "(offset %llu, %zu bytes) too small for %llu x %llu",
                       w->name, n, nt, (unsigned long long)x_off, x->size,
                       (unsigned long long)y_off, y->size, (unsigned long long)w->rows,
                       (unsigned long long)w->cols);
    uint64_t xp_floats = k->xg ? matvec_xg_floats(k, w->cols, n) : 0;
    /* (not over the tokens' x or the norm weight) */
    bool xp_over = k->xg && ((a->xp_off < x_off + n * xs && x_off < a->xp_off + xp_floats) ||
                             (k->var.norm && a->xp_off < a->norm_off + xs &&
                              a->norm_off < a->xp_off + xp_floats));
    if (k->xg && (a->xp_off % 4 || (a->xp_off + xp_floats) * 4 > x->size || xp_over))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec %s over %u tokens: no room for x's units at float %llu of x's "
                       "buffer (%zu bytes; not over x or the norm weight)",
                       w->name, n, (unsigned long long)a->xp_off, x->size);
    if (k->xg) {
        /* x's units first (x_prep.comp) */
        uint32_t units = weight_units_per_row(w->type, w->cols), words = k->xg_words;
        gpu_dispatch d;
        memset(&d, 0, sizeof d);
        d.prog = &k->prep;
        d.bindings[0] = (gpu_binding){ 0, x, 0, 0, GPU_READ_WRITE };
        d.n_bindings = 1;
        d.params[0] = units;
        d.params[1] = (uint32_t)(x_off / 4);
        d.params[2] = (uint32_t)(xs / 4);
        d.params[3] = (uint32_t)(a->norm_off / 4);
        d.params[4] = gpu_f2u(a->eps);
        d.params[5] = (uint32_t)(a->xp_off / 4);
        d.params[6] = units * words;
        /* (no split given: any, for a norm that is right but not the step's bits) */
        d.params[7] = a->sq_count ? a->sq_rows : 0;
        d.params[8] = a->sq_count ? a->sq_count : k->prep_wg;
        d.n_params = 9;
        d.groups[0] = (units + k->prep_wg - 1) / k->prep_wg;
        d.groups[1] = n;
        d.groups[2] = 1;
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    uint64_t rows_wg = (uint64_t)(k->cfg.wg / k->cfg.tpr) * k->cfg.nr, slots = 0;
    for (uint32_t i = 0; i < w->n_parts; i++) {
        const gpu_weight_part *p = &w->parts[i];
        gpu_dispatch d;
        weight_part_dispatch(&d, &k->prog, w, p, x, y, e == MATVEC_ADD ? GPU_READ_WRITE : GPU_WRITE);
        if (e == MATVEC_QKV && nt > 1)
            d.bindings[1].access = GPU_READ_WRITE; /* Q goes to x's buffer */
        if (k->xg) /* (as if it wrote x's buffer: a next prep, which overwrites the
                    * units this reads, waits for it; the queue tracks writes only) */
            d.bindings[1].access = GPU_READ_WRITE;
        if (a->y_hi > a->y_lo && d.bindings[2].access == GPU_WRITE) {
            d.bindings[2].written_begin = (size_t)(a->y_lo * 4);
            d.bindings[2].written_end = (size_t)(a->y_hi * 4);
        }
        d.params[0] = (uint32_t)p->rows | (nt > 1 ? n << 24 : 0);
        d.params[6] = (uint32_t)(e == MATVEC_QKV ? a->q_off : a->y_stride);
        d.params[1] = (uint32_t)(y_off + p->row0);
        d.params[2] = (uint32_t)((k->xg ? a->xp_off : x_off) / 4);
        d.params[3] = (uint32_t)(a->norm_off / 4);
        d.params[4] = gpu_f2u(a->eps);
        d.params[5] = (uint32_t)a->rope_off;
        d.params[7] = (uint32_t)a->bias_off;
        d.params[14] = (uint32_t)a->k_off;
        d.params[15] = (uint32_t)a->v_off;
        d.n_params = 16;
        if (k->var.norm_scale) {
            d.params[17] = (uint32_t)a->sq_off;
            d.params[19] = a->sq_count;
            d.n_params = 20;
        } else if (k->var.norm_out) { /* offsets from this part's first row and slot */
            d.params[16] = (uint32_t)(a->xg_off + p->row0);
            d.params[17] = (uint32_t)(a->sq_off + slots);
            d.params[18] = (uint32_t)(a->norm_off + p->row0);
            d.n_params = 19;
            slots += part_slots(k, p);
        }
        weight_grid(&d, (p->rows + rows_wg - 1) / rows_wg);
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}
