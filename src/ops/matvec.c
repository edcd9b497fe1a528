/* Matrix-vector kernels: their work splits, variants and recording. See
 * matvec.h. The figures behind each choice are in bench/RESULTS.md under the
 * topic each comment names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "ops/matvec.h"

/* X_ONCE: the most units a row (4096 columns) whose x a work group stages,
 * and the bytes of that row in shared memory (matvec.comp XO_V uvec4 a unit:
 * 5 in f16 pairs, 9 in f32 pairs under F16_DOT_F32); longer rows keep each
 * slot's own pairs */
#define X_ONCE_BYTES(f32_pairs) (X_ONCE_UNITS * ((f32_pairs) ? 9u : 5u) * 16u)

/* ---- how a kernel multiplies ------------------------------------------------ */

typedef enum { F16_DOT_OFF, F16_DOT_ON, F16_DOT_PAIRS_F32 } f16_dot_mode;

/* How a matvec multiplies (matvec.comp F16_DOT): for the quantized formats,
 * in f16 with one token, and with several where x is staged (XSH) or made
 * ready (XG); in f32 pairs (the same code) on a driver without f16 types. On
 * by default everywhere, because only this kernel's several-token form (XG)
 * sums as its one-token form does, to the bit, so that a verifying pass gives
 * the ids of plain decoding (bench/RESULTS.md "f16 products"). */
static f16_dot_mode f16_dot_choice(gpu_context *ctx, const tuning *t, uint32_t type,
                                   const matvec_config *cfg, const matvec_variant *v)
{
    bool f16 = gpu_context_caps(ctx)->f16_types;
    if (!quant_gpu_is_float(type) && (v->nt <= 1 || cfg->xsh || cfg->xg) && t->f16_dot != TUNE_OFF)
        return f16 ? F16_DOT_ON : F16_DOT_PAIRS_F32;
    return F16_DOT_OFF;
}

/* Whether a kernel with f16 products takes its levels as f16 subnormals
 * (matvec.comp F16_SUBN): a field masked in place and read as a half is the
 * level times 2^-24, which saves the subtraction that makes it an integer.
 * Needs a driver that keeps f16 subnormals. By default for the formats where
 * it measured faster: every quantized format but Q5_K, Q5_0 and Q8_0, and
 * Q4_K's one-token kernels but its gate/up (bench/RESULTS.md "f16 products"). */
static glesllm_status f16_subn_choice(gpu_context *ctx, const tuning *t, uint32_t type,
                                      const matvec_variant *v, f16_dot_mode dot, bool *out)
{
    *out = false;
    bool by_default = type == GGML_TYPE_Q4_K
                          ? v->nt <= 1 && v->epilogue != MATVEC_GLU
                          : type != GGML_TYPE_Q5_K && type != GGML_TYPE_Q5_0 &&
                                type != GGML_TYPE_Q8_0;
    if (dot == F16_DOT_OFF || t->f16_subn == TUNE_OFF || (t->f16_subn == TUNE_AUTO && !by_default))
        return GLESLLM_OK;
    bool kept = false;
    glesllm_status st = gpu_context_f16_subnormals(ctx, &kept);
    if (st != GLESLLM_OK)
        return st;
    if (!kept && t->f16_subn == TUNE_ON)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "GLESLLM_F16_SUBN=1: this driver flushes f16 subnormals to zero; unset "
                       "it (the kernels then take their levels as integers)");
    *out = kept;
    return GLESLLM_OK;
}

/* Whether a kernel with f16 products may add the f16 sums of a unit's two
 * halves in f16 before they go to f32 (matvec.comp H_MERGE, for the formats
 * whose halves share one map): two conversions and two f32 operations less a
 * row's unit. Not for Q4_K's one-token gate/up, nor several-token kernels
 * with the norm folded in, which ran slower so (bench/RESULTS.md "f16
 * products"). */
static bool halves_merged(uint32_t type, const matvec_variant *v)
{
    return v->nt > 1 ? !v->norm : !(type == GGML_TYPE_Q4_K && v->epilogue == MATVEC_GLU);
}

/* the formats whose high half comes as 16 x the level (weights.glsl W_H_SAME 1/16) */
static bool high_times_16(uint32_t type)
{
    return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q4_K;
}

/* The K-quants: the formats of 256-value blocks (quant_gpu.h) */
static bool is_kquant(uint32_t type)
{
    const quant_gpu_layout *L = quant_gpu_layout_of(type);
    return L && L->block == 256;
}

/* Whether a kernel's row loop is unrolled (matvec.comp's NO_UNROLL off):
 * with several tokens always (the per-token sums stay in registers); with
 * one, for the K-quants but Q4_K, whose rows NVIDIA's compiler otherwise
 * kept in local memory, while the other formats ran slower unrolled (more
 * registers) (bench/RESULTS.md "One-token matvec splits"). */
static bool matvec_unrolled(const tuning *t, uint32_t type, const matvec_variant *v)
{
    if (v->nt > 1)
        return true;
    if (t->unroll != TUNE_AUTO)
        return t->unroll == TUNE_ON;
    return is_kquant(type) && type != GGML_TYPE_Q4_K;
}

/* Rows whose units a one-token kernel loads at once, before it decodes and
 * sums them (matvec.comp's FETCH_ROWS; a divisor of nr): all of a thread's
 * rows, but 2 for Q8_0, whose 36 bytes a unit held for 8 rows left fewer
 * groups resident (bench/RESULTS.md "One-token matvec splits"). */
static uint32_t fetch_rows(uint32_t type, uint32_t nr)
{
    uint32_t n = type == GGML_TYPE_Q8_0 ? 2 : nr;
    return n && n <= nr && nr % n == 0 ? n : nr;
}

/* One-token kernels of the quantized formats: how many rows a group holds
 * when each group's words are loaded before the group before is summed
 * (matvec.comp FETCH_AHEAD; 0: not ahead). By default only where it was
 * faster in the decode step, not just alone: Q4_K's kernels of 8 rows a
 * thread (1 row a group, 2 for gate/up) and the X_ONCE kernels of 4 rows of
 * Q4_0 and Q4_K (bench/RESULTS.md "One-token matvec splits"). */
static uint32_t fetch_ahead_rows(const tuning *t, uint32_t type, const matvec_config *c,
                                 const matvec_variant *v)
{
    uint32_t nr = c->nr, want = 0;
    if (t->fetch_ahead != TUNE_AUTO)
        want = (uint32_t)t->fetch_ahead;
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

/* ---- one token: the decode step's split -------------------------------------- */

/* A split forced by the tuning (wg, tpr, nr[, xb]; xb 1 unless given) */
static bool split_forced(const uint32_t *v, uint32_t n, matvec_config *c)
{
    if (n < 3)
        return false;
    c->wg = v[0];
    c->tpr = v[1];
    c->nr = v[2];
    c->xb = n > 3 ? v[3] : 1;
    return true;
}

/* the subgroup reduction where a row's lanes are whole subgroups */
static bool subgroup_fits(gpu_context *ctx, uint32_t tpr)
{
    const gpu_caps *C = gpu_context_caps(ctx);
    return C->subgroup && C->subgroup_size && tpr % C->subgroup_size == 0;
}

/* Whether a one-token kernel of `type` makes x's f16 pairs once a work group
 * (matvec.comp X_ONCE) instead of each slot of lanes making its own: where it
 * takes f16 products, every quantized format (bench/RESULTS.md "One-token
 * matvec splits"). */
static bool x_once_default(gpu_context *ctx, const tuning *t, uint32_t type)
{
    const matvec_config one = { 0 };
    const matvec_variant store = { MATVEC_STORE };
    return t->x_once != TUNE_OFF && f16_dot_choice(ctx, t, type, &one, &store) != F16_DOT_OFF;
}

/* X_ONCE's split: 4 slots of lanes a work group (256 invocations at least)
 * share each staged unit; 8192 rows or more (an FFN's gate/up, the output)
 * take 2 rows a thread, 4 for Q4_0, Q4_K, Q2_K and Q3_K, and Q4_0's and
 * Q4_K's lanes take 4 units of a row instead of 2. Rows of more than
 * X_ONCE_UNITS units (an FFN's down) keep each slot's pairs: staged in chunks
 * they were slower (bench/RESULTS.md "One-token matvec splits"). */
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

/* Whether a one-token kernel takes a CPU rasteriser's split. */
static bool cpu_splits(gpu_context *ctx, const tuning *t)
{
    return t->cpu_splits == TUNE_AUTO ? gpu_context_caps(ctx)->cpu : t->cpu_splits == TUNE_ON;
}

/* A GPU's one-token split for rows of `units` units. In a decode step each
 * matvec waits for the one before, so a kernel is bound by how many loads it
 * has in flight: a lane takes at most 2 units of a row (tpr the power of two
 * >= units / 2, up to 256), or 1 where that still makes at most 128Ki lanes
 * (small models), and a thread up to 8 rows while the dispatch keeps >= 64Ki
 * lanes; two rows' lanes a work group, 128 invocations at least
 * (bench/RESULTS.md "One-token matvec splits"). */
static void gpu_split(const gpu_limits *L, uint32_t type, uint64_t rows, uint32_t units,
                      matvec_config *c)
{
    uint32_t most = L->max_invocations / 2;
    c->tpr = 16;
    while (c->tpr < (units + 1) / 2 && c->tpr < 256 && c->tpr < most)
        c->tpr *= 2;
    if (c->tpr < units && c->tpr < 256 && c->tpr < most && rows * c->tpr * 2 <= 131072)
        c->tpr *= 2;
    c->nr = 8;
    while (c->nr > 1 && rows / c->nr * c->tpr < 65536)
        c->nr /= 2;
    c->wg = c->tpr * 2 > 128 ? c->tpr * 2 : 128;
    if (c->x_once)
        x_once_split(L, type, rows, c);
}

matvec_config matvec_default_config(gpu_context *ctx, const tuning *tune, uint32_t type,
                                    uint64_t rows, uint64_t cols)
{
    const tuning *t = tuning_or_default(tune);
    uint32_t units = weight_units_per_row(type, cols);
    matvec_config c;
    c.x_once = units <= X_ONCE_UNITS && x_once_default(ctx, t, type);
    if (cpu_splits(ctx, t)) {
        /* A CPU rasteriser runs a work group's lanes as a few SIMD vectors
         * that it switches between at every barrier, so sums across lanes
         * cost more than they save: a lane takes whole rows, 8 of them, 16
         * lanes a group (bench/RESULTS.md "CPU rasterisers"). */
        c.tpr = 1;
        c.nr = 8;
        c.wg = 16;
    } else
        gpu_split(gpu_context_limits(ctx), type, rows, units, &c);
    split_forced(t->matvec, t->n_matvec, &c);
    c.subgroup = subgroup_fits(ctx, c.tpr);
    c.xsh = false;
    c.xg = false;
    c.xb = 1;
    c.prep_wg = 0;
    c.vl = 1;
    return c;
}

/* ---- several tokens: verifying drafted tokens, short prompts ------------------- */

/* The several-token XG kernels' variants below were each measured kernel by
 * kernel and in the verifying pass (bench/RESULTS.md "Verifying drafted
 * tokens"); where a variant lost for some token counts it is left out there.
 * Partial sums padded (matvec_multi.comp PART_PAD): the kernels of 9 tokens or more. */
static bool part_padded(const matvec_config *c, uint32_t nt)
{
    return c->xg && nt >= 9;
}

/* weights loaded as coherent (weights.glsl W_COHERENT): 4 tokens or more */
static bool xg_w_coherent(const matvec_config *c, uint32_t nt)
{
    return c->xg && nt >= 4;
}

/* each token's units of x loaded during the sums of the token before
 * (matvec_multi.comp XG_AHEAD): the kernels of 3 tokens without the norm (down, O) */
static bool xg_x_ahead(const matvec_config *c, const matvec_variant *v)
{
    return c->xg && v->nt == 3 && !v->norm;
}

/* how many tokens' units of x are loaded at once before their sums
 * (matvec_multi.comp XG_TG): 4 from 9 tokens, all of them from 4 to 8, 2 in the
 * kernels of 2 with the norm, else 1 */
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

/* Whether the several-token kernels of `type` read x made ready once a
 * dispatch (matvec_multi.comp XG, x_prep.comp): where they take f16 products. */
static bool xg_default(gpu_context *ctx, const tuning *t, uint32_t type)
{
    if (t->multi_xg == TUNE_OFF)
        return false;
    matvec_config c = { 0 };
    c.xg = true;
    matvec_variant v = { MATVEC_STORE };
    v.nt = 2;
    return f16_dot_choice(ctx, t, type, &c, &v) != F16_DOT_OFF;
}

/* How many of the one-token kernel `one`'s lanes an XG lane of an nt-token
 * kernel stands in for (matvec_multi.comp XG_VL): a subgroup's lanes a row, each
 * walking the units of several of the one-token kernel's lanes and adding
 * their runs in its subgroup add's order (known from the probe). It pays
 * where that kernel has 128 lanes a row or more (an FFN's down) in the
 * kernels of 4 to 8 tokens (bench/RESULTS.md "Verifying drafted tokens"). */
static uint32_t xg_stand_ins(gpu_context *ctx, const tuning *t, const matvec_config *one,
                             uint32_t nt)
{
    int order = 0;
    uint32_t sg = gpu_context_caps(ctx)->subgroup_size;
    if (t->xg_vl == TUNE_OFF || nt < 4 || nt >= 9 || !one->subgroup || !sg || one->tpr < 128 ||
        gpu_context_subgroup_order(ctx, &order) != GLESLLM_OK || !order)
        return 1;
    return one->tpr / sg;
}

matvec_config matvec_multi_config(gpu_context *ctx, const tuning *tune, uint32_t type, uint32_t nt,
                                  uint64_t rows, uint64_t cols)
{
    const tuning *t = tuning_or_default(tune);
    const gpu_limits *L = gpu_context_limits(ctx);
    matvec_config c;
    /* Staged x (XSH), for the f32 products: 256 invocations of 16 lanes a
     * row, 2 rows a thread whose units stay in registers while every
     * token's x passes by from shared memory; many rows (gate/up) take 4
     * lanes a row with a warp on one unit of 32 rows (xb), long rows (down)
     * 32 lanes and xb 8, and kernels of 2 or 3 tokens with many rows 8
     * lanes, 4 rows, xb 16. XG (f16 products, the default): the one-token
     * kernel's lanes a row, so that a token's sums are a decode step's to
     * the bit (bench/RESULTS.md "Verifying drafted tokens"). */
    c.xg = xg_default(ctx, t, type);
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
        matvec_config one = matvec_default_config(ctx, t, type, rows, cols);
        /* (a CPU rasteriser's: its groups of lanes with whole rows) */
        c.wg = cpu_splits(ctx, t) ? one.wg : L->max_invocations >= 256 ? 256 : L->max_invocations;
        c.tpr = one.tpr;
        c.vl = xg_stand_ins(ctx, t, &one, nt);
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
    bool forced = split_forced(t->multi, t->n_multi, &c);
    if (forced)
        c.vl = 1;
    /* (xg: the partial sums go through shared memory first; subgroup adds of
     * every (row, token) in registers ran twice as long) */
    c.subgroup = subgroup_fits(ctx, c.tpr); /* (xg: the one-token kernel's choice) */
    c.xsh = t->multi_xsh != TUNE_OFF && !c.xg;
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
    if (v->epilogue == MATVEC_GLU)
        snprintf(buf, n, "\nGLU 1%s", v->gelu ? "\nGLU_GELU 1" : "");
    else if (v->epilogue == MATVEC_QKV) {
        char kv[64];
        kv_layout_defines(&v->kv, kv, sizeof kv);
        snprintf(buf, n, "\nQKV 1\nQ_DIM %u\nKV_DIM %u\nHEAD_DIM %u%s%s", v->q_dim, v->kv_dim,
                 v->head_dim, v->bias ? "\nQKV_BIAS 1" : "", kv);
    }
}

#define Y_ADD_PARAM 20u /* common.glsl Y_ADD */

void matvec_epilogue_params(matvec_epilogue e, gpu_dispatch *d)
{
    d->params[Y_ADD_PARAM] = e == MATVEC_ADD;
    d->n_params = Y_ADD_PARAM + 1;
}

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

glesllm_status matvec_build(gpu_context *ctx, const tuning *tune, uint32_t type,
                            const matvec_config *cfg, const matvec_variant *var, matvec_kernel *out)
{
    const tuning *t = tuning_or_default(tune);
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
    if (v.expert && (v.nt > 1 || v.norm || v.norm_scale || v.norm_out ||
                     (v.epilogue != MATVEC_STORE && v.epilogue != MATVEC_GLU)))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec: an expert kernel is one token, y = W x or GLU, without the norm");
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
    f16_dot_mode f16_dot = f16_dot_choice(ctx, t, type, cfg, &v);
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
    bool unroll = matvec_unrolled(t, type, &v);
    /* Q4_0 and Q4_1 nibbles minus their offset in f16 arithmetic, two an
     * instruction (GL_NV_gpu_shader5; weights.glsl nib_levels): faster for
     * Q4_0, level for Q4_1, slower for Q4_K and unrolled rows; not with the
     * levels as f16 subnormals, which take no offset off (bench/RESULTS.md
     * "f16 products"). */
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
    glesllm_status st = f16_subn_choice(ctx, t, type, &lv, f16_dot, &f16_subn);
    if (st != GLESLLM_OK)
        return st;
    bool f16_levels = gpu_context_caps(ctx)->f16_types && !f16_subn &&
                      (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1);
    char tdef[32], epi[128], sg[64] = "", xb[16] = "", defines[512];
    weight_type_define(type, tdef, sizeof tdef);
    matvec_epilogue_defines(&v, epi, sizeof epi);
    /* XG: its lanes' sums added in the order of the one-token kernel's
     * (matvec_multi.comp xg_lane_sums): its subgroups' order without subgroup
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
    if (v.expert)
        strncat(defines, "\nEXPERT 1", sizeof defines - strlen(defines) - 1);
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
     * units loaded during the block before (matvec_multi.comp XPF); not with the
     * norm folded in, which ran slower so (bench/RESULTS.md "Verifying
     * drafted tokens"). */
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
        /* The partial sums of squares: the K-quants load an invocation's
         * first vec4 of them before the unit loop, the others all at the end
         * (bench/RESULTS.md "The norm split across the matvecs"). */
        strncat(defines, is_kquant(type) ? "\nSQ_AHEAD 2" : "\nSQ_AHEAD 0",
                sizeof defines - strlen(defines) - 1);
    }
    uint32_t fetch = fetch_rows(type, cfg->nr);
    uint32_t ahead = v.nt <= 1 ? fetch_ahead_rows(t, type, &eff, &v) : 0;
    if (ahead) {
        fetch = ahead;
        strncat(defines, "\nFETCH_AHEAD 1", sizeof defines - strlen(defines) - 1);
    }
    if (v.nt <= 1 && fetch != cfg->nr) {
        char fr[24];
        snprintf(fr, sizeof fr, "\nFETCH_ROWS %u", fetch);
        strncat(defines, fr, sizeof defines - strlen(defines) - 1);
    }
    st = gpu_program_build(ctx, v.nt > 1 ? "matvec_multi.comp" : "matvec.comp", defines,
                           &out->prog);
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
             v.norm ? " norm" : v.norm_scale ? " norm-scale" : v.norm_out ? " norm-out"
             : v.expert ? " expert" : "");
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
    /* (a kernel that reads x's rows and writes y's, nothing else of them) */
    bool plain = (e == MATVEC_STORE || e == MATVEC_ADD) && !k->xg && !k->var.norm &&
                 !k->var.norm_scale && !k->var.norm_out;
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
            d.bindings[2].used_begin = (size_t)(a->y_lo * 4);
            d.bindings[2].used_end = (size_t)(a->y_hi * 4);
        }
        if (a->narrow && plain) { /* x's rows read, y's rows written (added to) */
            d.bindings[1].used_begin = (size_t)(x_off * 4);
            d.bindings[1].used_end = (size_t)((x_off + n * xs) * 4);
            d.bindings[2].used_begin = (size_t)((y_off + p->row0) * 4);
            d.bindings[2].used_end = (size_t)(y_end * 4);
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
        if (k->var.norm_scale) {
            d.params[17] = (uint32_t)a->sq_off;
            d.params[19] = a->sq_count;
        } else if (k->var.norm_out) { /* offsets from this part's first row and slot */
            d.params[16] = (uint32_t)(a->xg_off + p->row0);
            d.params[17] = (uint32_t)(a->sq_off + slots);
            d.params[18] = (uint32_t)(a->norm_off + p->row0);
            slots += part_slots(k, p);
        }
        matvec_epilogue_params(e, &d); /* (and n_params) */
        if (e == MATVEC_QKV) { /* matvec_out.glsl: param 21 the mode, 22.. entries */
            d.params[21] = a->seq_tab ? 1 : a->kv_run ? 2 : 0;
            for (uint32_t t = 0; a->seq_tab && t < n; t++)
                d.params[22 + t] = a->seq_tab[t];
            d.params[22] = a->seq_tab ? d.params[22] : a->kv_first;
            d.n_params = 22 + (a->seq_tab ? n : 1);
        }
        weight_grid(&d, (p->rows + rows_wg - 1) / rows_wg);
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}
