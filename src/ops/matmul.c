/* Matrix-matrix kernels of prefill: tiling and recording. See matmul.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "ops/matmul.h"

/* x_tiles.comp's work group (one invocation a uvec4 of the tiles) */
#define XT_WG 128u

uint32_t matmul_tile_tokens(const matmul_config *c) { return c->wg / 16 * c->tn; }

uint64_t matmul_xt_bytes(const matmul_config *c, uint32_t n_tok, uint64_t cols)
{
    if (!c->f16)
        return 0;
    uint64_t bn = matmul_tile_tokens(c);
    /* a tile: bn tokens x 32 values (a unit of the activation row) as f16 */
    return (n_tok + bn - 1) / bn * bn * act_stride(cols) * 2;
}

uint32_t matmul_split(const matmul_config *c)
{
    return c->f16 && c->split > 1 ? c->split : 1;
}

uint32_t matmul_shared_bytes(const matmul_config *c)
{
    /* f16: a row's values of a part (32 / split) in uvec4 of 8 values (dup:
     * 4) and one of padding, a token's values of a part in f16 */
    uint32_t vals = 32u / matmul_split(c);
    if (c->f16)
        return 16u * c->tm * (vals / (c->dup ? 4u : 8u) + 1u) * 16u +
               matmul_tile_tokens(c) * vals * 2u;
    return 36u * (16u * c->tm + matmul_tile_tokens(c)) * 4u; /* 9 vec4 per tile row */
}

static matmul_config default_tiles(gpu_context *ctx, const tuning *tune, bool f16)
{
    const tuning *t = tuning_or_default(tune);
    const gpu_limits *L = gpu_context_limits(ctx);
    /* 128 invocations of 8 rows x 4 tokens (f32 tiles) or 8 x 8 (f16 tiles,
     * where the driver has the types, each product a pair of weights times a
     * pair of tokens), the largest that did not run out of registers; f16
     * tiles move prefill logits from decode's (their KL-divergence from the
     * exact path: bench/RESULTS.md "Decode beside llama.cpp"). */
    matmul_config c = { 128, 8, f16 ? 8 : 4, false, f16, f16, f16, 0, f16 };
    /* forced: wg, tm, tn[, kind]: kind 0 f32 tiles, 1 mediump tiles (f16
     * arithmetic where the driver has it), 2 f16 tiles with each product a
     * weight times a pair of tokens, 3 the same with the weights' values
     * doubled (matmul_config.dup), 4 the same with each row's products
     * summed in f16 over the whole row (matmul_config.row_sums: the default
     * with f16 tiles) */
    if (t->n_matmul >= 3) {
        uint32_t kind = t->n_matmul > 3 ? t->matmul[3] : 0;
        c.wg = t->matmul[0];
        c.tm = t->matmul[1];
        c.tn = t->matmul[2];
        c.half = kind == 1;
        c.f16 = kind == 2 || kind == 3 || kind == 4;
        c.dup = kind == 3 || kind == 4;
        c.row_sums = kind == 4;
        c.by_rows = false;
    }
    if (c.wg > L->max_invocations)
        c.wg = 128;
    while (matmul_shared_bytes(&c) > L->max_shared_bytes * 3 / 4 && (c.tm > 4 || c.tn > 4)) {
        if (c.tm > 4)
            c.tm = 4;
        else
            c.tn = 4;
    }
    return c;
}

matmul_config matmul_default_config(gpu_context *ctx, const tuning *t)
{
    return default_tiles(ctx, t, gpu_context_caps(ctx)->f16_types);
}

matmul_config matmul_f32_config(gpu_context *ctx, const tuning *t)
{
    matmul_config c = default_tiles(ctx, t, false);
    c.f16 = false; /* (a forced kind 2, 3 or 4 too) */
    c.dup = c.row_sums = false;
    return c;
}

matmul_config matmul_config_for(const matmul_config *c, uint64_t rows)
{
    /* 8 rows a thread make 128-row blocks, and NVIDIA's driver gives a
     * multiprocessor about 48 KiB of shared memory for its groups: with dup
     * a multiprocessor holds 2 groups, with each unit in two halves (split
     * 2) 3. So fewer than 4096 rows take 4 rows a thread (twice the groups),
     * 4096-4224 rows (one wave of 2 a multiprocessor) 8 rows one unit at a
     * time, more 8 rows and split 2 (bench/RESULTS.md "Prefill tiles"). */
    matmul_config r = *c;
    /* f32 tiles of 128 rows by 32 tokens left a 128-row product of a
     * 512-token chunk 16 groups; 64 by 16 give it 64 (bench/RESULTS.md
     * "RWKV-7") */
    if (!c->f16 && !c->half && rows <= 512 && c->wg == 128 && c->tm == 8) {
        r.wg = 64;
        r.tm = 4;
    }
    if (!c->by_rows)
        return r;
    if (rows < 4096)
        r.tm = 4;
    else if (rows > 4224 && c->dup)
        r.split = 2;
    return r;
}

/* matmul.comp's defines for a kernel, then `extra` */
static void kernel_defines(gpu_context *ctx, uint32_t type, const matmul_config *cfg,
                           const matvec_variant *v, const char *extra, char *out, size_t n)
{
    /* f16 tiles without the f16 types: the same kernel in f32 (the tests
     * check its indexing on llvmpipe) */
    bool f16_f32 = cfg->f16 && !gpu_context_caps(ctx)->f16_types;
    char tdef[32], epi[128];
    weight_type_define(type, tdef, sizeof tdef);
    matvec_epilogue_defines(v, epi, sizeof epi);
    snprintf(out, n, "%s\nWG_SIZE %u\nTM %u\nTN %u\nWSPLIT %u%s%s%s%s%s%s", tdef, cfg->wg, cfg->tm,
             cfg->tn, matmul_split(cfg), cfg->f16 && cfg->row_sums ? "\nROW_SUMS 1" : "",
             f16_f32     ? "\nF16_TILES_F32 1"
             : cfg->f16  ? "\nF16_TILES 1"
             : cfg->half ? "\nHALF_TILES 1"
                         : "",
             /* the next unit's words fetched during this one's products
              * where a unit is staged whole: 6-8% off a 4096-row product on
              * an H200, nothing or a loss with split 2 (bench/RESULTS.md
              * "Prefill tiles") */
             cfg->f16 && cfg->dup && matmul_split(cfg) == 1 ? "\nDUP_W 1\nUNIT_AHEAD 1"
             : cfg->f16 && cfg->dup                         ? "\nDUP_W 1"
                                                            : "",
             epi, v->expert ? "\nEXPERT 1" : "", extra);
}

glesllm_status matmul_build_slices_sum(gpu_context *ctx, matmul_kernel *k)
{
    if (k->var.epilogue != MATVEC_QKV || k->sum.id)
        return GLESLLM_OK;
    char defines[400];
    kernel_defines(ctx, k->type, &k->cfg, &k->var, "\nSLICES_SUM 1", defines, sizeof defines);
    glesllm_status st = gpu_program_build(ctx, "matmul.comp", defines, &k->sum);
    if (st == GLESLLM_OK)
        snprintf(k->sum.name, sizeof k->sum.name, "matmul slices' sum (QKV)");
    return st;
}

glesllm_status matmul_build(gpu_context *ctx, uint32_t type, const matmul_config *cfg,
                            const matvec_variant *var, matmul_kernel *out)
{
    memset(out, 0, sizeof *out);
    matvec_variant v = var ? *var : (matvec_variant){ MATVEC_STORE };
    if (!quant_gpu_layout_of(type))
        return err_set(GLESLLM_ERR_UNSUPPORTED, "no GPU matmul for tensor type %s",
                       ggml_type_name(type) ? ggml_type_name(type) : "(unknown)");
    const gpu_limits *L = gpu_context_limits(ctx);
    if (v.norm || (v.expert && v.epilogue != MATVEC_GLU && v.epilogue != MATVEC_STORE) ||
        !cfg->wg || cfg->wg % 16 || cfg->wg > L->max_invocations ||
        (cfg->tm != 4 && cfg->tm != 8) || (cfg->tn != 4 && cfg->tn != 8) || cfg->split > 2 ||
        (cfg->split == 2 && !cfg->f16) || matmul_shared_bytes(cfg) > L->max_shared_bytes)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matmul: invalid tiling (wg %u, tm %u, tn %u, split %u: 1, or 2 with f16 "
                       "tiles; %u bytes of shared memory of %u; no folded norm)",
                       cfg->wg, cfg->tm, cfg->tn, cfg->split > 1 ? cfg->split : 1u,
                       matmul_shared_bytes(cfg),
                       L->max_shared_bytes);
    char defines[384];
    kernel_defines(ctx, type, cfg, &v, "", defines, sizeof defines);
    /* f16 tiles: the tokens' tiles made once a product (x_tiles.comp) and
     * copied as they are by every row block, instead of each row block
     * loading x as f32 and converting it: half the bytes, no conversions,
     * the same sums (bench/RESULTS.md "Prefill tiles"). An expert's tiles
     * gather its tokens, grouped by the route (ops/moe.c). */
    glesllm_status st = gpu_program_build(ctx, "matmul.comp", defines, &out->prog);
    if (st == GLESLLM_OK && cfg->f16) {
        char pdef[48];
        snprintf(pdef, sizeof pdef, "BN %u\nWG_SIZE %u%s", matmul_tile_tokens(cfg), XT_WG,
                 v.expert ? "\nEXPERT 1" : "");
        st = gpu_program_build(ctx, "x_tiles.comp", pdef, &out->prep);
        if (st != GLESLLM_OK)
            gpu_program_destroy(&out->prog);
    }
    if (st != GLESLLM_OK)
        return st;
    snprintf(out->prog.name, sizeof out->prog.name, "matmul %s%s", weight_type_label(type),
             v.expert ? " expert" : "");
    if (out->prep.id)
        snprintf(out->prep.name, sizeof out->prep.name, "x tiles");
    out->type = type;
    out->cfg = *cfg;
    out->var = v;
    return GLESLLM_OK;
}

void matmul_destroy(matmul_kernel *k)
{
    gpu_program_destroy(&k->sum);
    gpu_program_destroy(&k->prog);
    gpu_program_destroy(&k->prep);
    memset(k, 0, sizeof *k);
}

glesllm_status matmul_record_tiles(gpu_queue *q, const matmul_kernel *k, const gpu_buffer *x,
                                   const gpu_buffer *xt, const uint32_t *params, uint32_t n_params,
                                   uint64_t n_tiles, uint64_t units)
{
    gpu_dispatch d;
    memset(&d, 0, sizeof d);
    d.prog = &k->prep;
    d.bindings[0] = (gpu_binding){ 1, x, 0, 0, GPU_READ };
    d.bindings[1] = (gpu_binding){ 3, xt, 0, 0, GPU_WRITE };
    d.n_bindings = 2;
    memcpy(d.params, params, n_params * sizeof *params);
    d.n_params = n_params;
    weight_grid(&d, (n_tiles * units * 4 * matmul_tile_tokens(&k->cfg) + XT_WG - 1) / XT_WG);
    return gpu_queue_dispatch(q, &d);
}

uint32_t matmul_slices_groups(gpu_context *ctx, const tuning *t)
{
    t = tuning_or_default(t);
    if (t->matmul_slices >= 0)
        return (uint32_t)t->matmul_slices;
    /* a GPU's multiprocessors hold 2 of the 8-row f16 groups each (an
     * H200's 132: 264) and GL does not say how many there are */
    return gpu_context_caps(ctx)->cpu ? 0 : MATMUL_SLICES_GROUPS;
}

glesllm_status matmul_slices_build(gpu_context *ctx, matmul_slices *out)
{
    memset(out, 0, sizeof *out);
    glesllm_status st = gpu_program_build(ctx, "matmul_sum.comp", "WG_SIZE 256", &out->sum);
    if (st == GLESLLM_OK)
        st = gpu_program_build(ctx, "matmul_sum.comp", "WG_SIZE 256\nGLU_GELU 1", &out->sum_gelu);
    if (st != GLESLLM_OK) {
        matmul_slices_destroy(out);
        return st;
    }
    snprintf(out->sum.name, sizeof out->sum.name, "matmul slices' sum");
    snprintf(out->sum_gelu.name, sizeof out->sum_gelu.name, "matmul slices' sum");
    return GLESLLM_OK;
}

void matmul_slices_destroy(matmul_slices *s)
{
    gpu_program_destroy(&s->sum);
    gpu_program_destroy(&s->sum_gelu);
    memset(s, 0, sizeof *s);
}

/* The slices of a product of `groups` work groups over n tokens of w (1:
 * whole), and the units of each but the last. */
static uint32_t slices_of(const matmul_args *a, const matmul_kernel *k, uint64_t n,
                          uint64_t width, uint64_t groups, uint64_t units, uint32_t *per)
{
    const matmul_slices *sl = a->slices;
    *per = 0;
    if (!sl || !sl->part || !sl->groups || groups >= sl->groups ||
        (k->var.epilogue == MATVEC_QKV && !k->sum.id))
        return 1;
    uint64_t s = (sl->groups + groups - 1) / groups, room = sl->part->size / 4 / (n * width);
    s = s < MATMUL_SLICES_MOST ? s : MATMUL_SLICES_MOST;
    s = s < room ? s : room;
    s = s < units / 4 ? s : units / 4; /* (at least 4 units a slice) */
    if (s < 2)
        return 1;
    *per = (uint32_t)((units + s - 1) / s);
    return (uint32_t)((units + *per - 1) / *per);
}

enum { PARTS_WHOLE, PARTS_SLICED, PARTS_QKV_SUM };

/* A product's dispatches, one a weight part: whole; sliced (`slices` of
 * `per` units, each slice's sums into the slices' buffer, `width` floats a
 * token); or a QKV kernel's twin adding them up with the epilogue. */
static glesllm_status record_parts(gpu_queue *q, const matmul_kernel *k, const gpu_weight *w,
                                   const gpu_buffer *x, const gpu_buffer *y, const matmul_args *a,
                                   int mode, uint32_t slices, uint32_t per, uint64_t width)
{
    matvec_epilogue e = k->var.epilogue;
    uint64_t n = a->n_tok;
    uint32_t bm = 16 * k->cfg.tm, bn = matmul_tile_tokens(&k->cfg);
    bool sliced = mode == PARTS_SLICED;
    for (uint32_t i = 0; i < w->n_parts; i++) {
        const gpu_weight_part *p = &w->parts[i];
        gpu_dispatch d;
        /* (sliced: plain stores of each slice's sums into the slices' buffer) */
        weight_part_dispatch(&d, mode == PARTS_QKV_SUM ? &k->sum : &k->prog, w, p, x,
                             sliced ? a->slices->part : y,
                             e == MATVEC_ADD && !sliced ? GPU_READ_WRITE : GPU_WRITE);
        if (e == MATVEC_QKV)
            d.bindings[1].access = GPU_READ_WRITE;
        d.params[0] = (uint32_t)p->rows;
        d.params[1] = (uint32_t)((e == MATVEC_GLU || e == MATVEC_QKV ? a->row_base : 0) + p->row0);
        d.params[2] = (uint32_t)(a->x_off / 4);
        d.params[3] = (uint32_t)a->rope_off;
        d.params[4] = (uint32_t)n;
        d.params[5] = sliced ? 0 : (uint32_t)a->y_off;
        d.params[6] = sliced ? (uint32_t)width : (uint32_t)a->y_stride;
        d.params[7] = (uint32_t)a->bias_off;
        d.params[14] = (uint32_t)a->k_off;
        d.params[15] = (uint32_t)a->v_off;
        matvec_epilogue_params(sliced ? MATVEC_STORE : e, &d);
        if (e == MATVEC_QKV) /* (matmul.comp kv_row) */
            d.params[23] = a->kv_first;
        /* (the slices' params set, 0 unless sliced: a program keeps its
         * uniforms from one dispatch to the next) */
        d.params[24] = sliced ? per : mode == PARTS_QKV_SUM ? slices : 0;
        d.params[25] = mode != PARTS_WHOLE ? (uint32_t)(n * width) : 0;
        d.params[26] = mode == PARTS_QKV_SUM ? (uint32_t)width : 0;
        d.n_params = 27;
        if (mode == PARTS_QKV_SUM) /* (the slices' buffer as written: the next product waits) */
            d.bindings[d.n_bindings++] = (gpu_binding){ 3, a->slices->part, 0, 0, GPU_READ_WRITE };
        /* the tiles are read, but the last part counts as writing them, so
         * that the queue places a barrier before whatever writes them next
         * (the next product's x_tiles) */
        else if (k->cfg.f16)
            d.bindings[d.n_bindings++] = (gpu_binding){
                3, a->xt, 0, 0, i + 1 == w->n_parts ? GPU_READ_WRITE : GPU_READ
            };
        d.groups[0] = (uint32_t)((p->rows + bm - 1) / bm);
        d.groups[1] = (uint32_t)((n + bn - 1) / bn);
        d.groups[2] = sliced ? slices : 1;
        if (d.groups[0] > 65535 || d.groups[1] > 65535)
            return err_set(GLESLLM_ERR_UNSUPPORTED, "matmul %s: %u x %u work groups", w->name,
                           d.groups[0], d.groups[1]);
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}

glesllm_status matmul_record(gpu_queue *q, const matmul_kernel *k, const gpu_weight *w,
                             const gpu_buffer *x, const gpu_buffer *y, const matmul_args *a)
{
    if (k->type != w->type || k->var.expert)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "matmul kernel for %s%s given tensor %s (%s)",
                       ggml_type_name(k->type), k->var.expert ? " experts" : "", w->name,
                       ggml_type_name(w->type));
    matvec_epilogue e = k->var.epilogue;
    uint64_t xs = act_stride(w->cols), n = a->n_tok;
    uint64_t y_row = e == MATVEC_GLU ? (a->row_base + w->rows) / 2 : e == MATVEC_QKV ? 0 : w->rows;
    uint64_t y_end = n ? a->y_off + (n - 1) * a->y_stride + y_row : 0;
    uint64_t x_end = n ? a->x_off + n * xs : 0;
    if (!n || a->x_off % 4 || x_end * 4 > x->size ||
        (e == MATVEC_QKV ? (a->y_off + n * a->y_stride) * 4 > x->size : y_end * 4 > y->size) ||
        x_end >= (1ull << 32) || y_end >= (1ull << 32))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matmul %s over %llu tokens: x (offset %llu, %zu bytes) or y (offset %llu, "
                       "%zu bytes) out of range",
                       w->name, (unsigned long long)n, (unsigned long long)a->x_off, x->size,
                       (unsigned long long)a->y_off, y->size);
    uint32_t bm = 16 * k->cfg.tm, bn = matmul_tile_tokens(&k->cfg);
    uint64_t units = weight_units_per_row(w->type, w->cols);
    if (k->cfg.f16) {
        uint64_t need = matmul_xt_bytes(&k->cfg, (uint32_t)n, w->cols);
        if (!a->xt || a->xt->size < need)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "matmul %s over %llu tokens: the f16 tiles need a buffer of %llu bytes "
                           "for the tokens' tiles (matmul_args.xt)",
                           w->name, (unsigned long long)n, (unsigned long long)need);
        if (!a->xt_made) {
            uint32_t p[] = { (uint32_t)units, (uint32_t)w->cols, (uint32_t)(a->x_off / 4), 0,
                             (uint32_t)n };
            glesllm_status st = matmul_record_tiles(q, k, x, a->xt, p, 5, (n + bn - 1) / bn, units);
            if (st != GLESLLM_OK)
                return st;
        }
    }
    uint64_t groups = 0;
    for (uint32_t i = 0; i < w->n_parts; i++)
        groups += (w->parts[i].rows + bm - 1) / bm * ((n + bn - 1) / bn);
    /* (sliced, a token's sums: GLU's and QKV's at their global rows) */
    uint64_t width = (e == MATVEC_GLU || e == MATVEC_QKV ? a->row_base : 0) + w->rows;
    uint32_t per, slices = slices_of(a, k, n, width, groups, units, &per);
    glesllm_status st = record_parts(q, k, w, x, y, a, slices > 1 ? PARTS_SLICED : PARTS_WHOLE,
                                     slices, per, width);
    if (st != GLESLLM_OK || slices == 1)
        return st;
    if (e == MATVEC_QKV) /* (its twin adds the slices up and runs the epilogue) */
        return record_parts(q, k, w, x, y, a, PARTS_QKV_SUM, slices, per, width);
    /* the slices added up into y; the slices' buffer counts as written, so
     * that the next sliced product waits for this sum */
    bool glu = e == MATVEC_GLU;
    uint64_t outs = glu ? w->rows / 2 : w->rows;
    gpu_dispatch d;
    memset(&d, 0, sizeof d);
    d.prog = glu && k->var.gelu ? &a->slices->sum_gelu : &a->slices->sum;
    d.bindings[0] = (gpu_binding){ 0, a->slices->part, 0, 0, GPU_READ_WRITE };
    d.bindings[1] = (gpu_binding){ 1, y, 0, 0, e == MATVEC_ADD ? GPU_READ_WRITE : GPU_WRITE };
    d.n_bindings = 2;
    uint32_t p[] = { (uint32_t)outs, slices, (uint32_t)(n * width),
                     (uint32_t)(a->y_off + (glu ? a->row_base / 2 : 0)), (uint32_t)a->y_stride,
                     glu ? 2u : e == MATVEC_ADD, (uint32_t)width,
                     (uint32_t)(glu ? a->row_base : 0) };
    memcpy(d.params, p, sizeof p);
    d.n_params = sizeof p / sizeof p[0];
    d.groups[0] = (uint32_t)((outs + 255) / 256);
    d.groups[1] = (uint32_t)n;
    d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}
