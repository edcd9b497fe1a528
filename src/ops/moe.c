/* Mixture of experts. See moe.h. */
#include "ops/moe.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

/* a dispatch of one of moe.comp's kernels over the activation buffer */
static gpu_dispatch act_dispatch(const gpu_program *prog, const gpu_buffer *act)
{
    gpu_dispatch d = { 0 };
    d.prog = prog;
    d.bindings[0] = (gpu_binding){ 0, act, 0, 0, GPU_READ_WRITE };
    d.n_bindings = 1;
    return d;
}

glesllm_status moe_build(gpu_context *ctx, moe_kernels *out)
{
    memset(out, 0, sizeof *out);
    char defs[64];
    snprintf(defs, sizeof defs, "WG_SIZE %u\nROUTE 1", MOE_WG);
    glesllm_status st = gpu_program_build(ctx, "moe.comp", defs, &out->route);
    if (st)
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nCOMBINE 1", MOE_WG);
    if (!(st = gpu_program_build(ctx, "moe.comp", defs, &out->combine))) {
        snprintf(defs, sizeof defs, "WG_SIZE %u\nGROUP 1", MOE_WG);
        st = gpu_program_build(ctx, "moe.comp", defs, &out->group);
    }
    if (st)
        moe_destroy(out);
    return st;
}

void moe_destroy(moe_kernels *k)
{
    gpu_program_destroy(&k->route);
    gpu_program_destroy(&k->combine);
    gpu_program_destroy(&k->group);
}

glesllm_status moe_record_route(gpu_queue *q, const moe_kernels *k, const gpu_buffer *act,
                                const moe_route_args *a)
{
    uint64_t end = a->route_off + 2ull * a->k * a->n_tok,
             lend = a->logits_off + (uint64_t)(a->n_tok - 1) * a->logits_stride + a->n_expert;
    if (!a->n_tok || !a->k || a->k > a->n_expert || a->n_expert > 256 || end * 4 > act->size ||
        lend * 4 > act->size)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "moe route: %u tokens of %u experts (top %u) outside the buffer or the "
                       "kernel's 256 experts", a->n_tok, a->n_expert, a->k);
    gpu_dispatch d = act_dispatch(&k->route, act);
    d.params[0] = a->n_expert;
    d.params[1] = a->k;
    d.params[2] = (uint32_t)a->logits_off;
    d.params[3] = (uint32_t)a->logits_stride;
    d.params[4] = (uint32_t)a->route_off;
    d.params[5] = a->norm;
    d.params[6] = gpu_f2u(a->scale);
    d.n_params = 7;
    d.groups[0] = a->n_tok;
    d.groups[1] = d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}

/* whether each part of w holds whole experts of `rows` rows (an expert's
 * dispatch reads its rows from one part) */
static glesllm_status whole_experts(const gpu_weight *w, uint64_t rows, const char *what)
{
    for (uint32_t i = 0; i < w->n_parts; i++)
        if (w->parts[i].row0 % rows || w->parts[i].rows % rows)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "%s %s: part %u does not hold whole experts",
                           what, w->name, i);
    return GLESLLM_OK;
}

/* matvec.comp EXPERT's params */
enum { P_ROUTE = 21, P_XSTRIDE = 22, P_XDIV = 23, P_FLAGS = 25, P_PART0 = 26, P_PARTN = 27 };

glesllm_status moe_record_matvec(gpu_queue *q, const matvec_kernel *k, const gpu_weight *w,
                                 const gpu_buffer *x, uint64_t x_off, const gpu_buffer *y,
                                 uint64_t y_off, const moe_matvec_args *a)
{
    matvec_epilogue e = k->var.epilogue;
    uint64_t rows = a->select ? a->expert_rows : w->rows;
    uint64_t out_rows = e == MATVEC_GLU ? rows / 2 : rows;
    uint64_t y_first = e == MATVEC_GLU ? y_off / 2 : y_off;
    uint64_t y_end = y_first + (uint64_t)(a->n_z - 1) * a->y_stride + out_rows;
    uint64_t x_end = x_off + (uint64_t)((a->n_z - 1) / (a->x_div ? a->x_div : 1)) * a->x_stride +
                     act_stride(w->cols);
    if (k->type != w->type || !k->var.expert || !a->n_z || !a->x_div || x_off % 4 ||
        a->x_stride % 4 || x_end * 4 > x->size || y_end * 4 > y->size || y_end >= (1ull << 32) ||
        (a->select && (!rows || w->rows % rows)) || (a->select && (a->route_off + 2ull * a->n_z) * 4 > x->size))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "expert matvec %s over %u layers: the kernel (%s) or the buffers do not "
                       "fit", w->name, a->n_z, weight_type_label(k->type));
    if (k->x_once && weight_units_per_row(w->type, w->cols) > X_ONCE_UNITS)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "matvec kernel staging x once given %s of %llu columns", w->name,
                       (unsigned long long)w->cols);
    glesllm_status st;
    if (a->select && (st = whole_experts(w, rows, "expert matvec")))
        return st;
    uint64_t rows_wg = (uint64_t)(k->cfg.wg / k->cfg.tpr) * k->cfg.nr;
    for (uint32_t i = 0; i < w->n_parts; i++) {
        const gpu_weight_part *p = &w->parts[i];
        uint64_t n = a->select ? rows : p->rows;
        gpu_dispatch d;
        weight_part_dispatch(&d, &k->prog, w, p, x, y, GPU_WRITE);
        d.params[0] = (uint32_t)n;
        d.params[1] = (uint32_t)(a->select ? y_off : y_off + p->row0);
        d.params[2] = (uint32_t)(x_off / 4);
        d.params[6] = (uint32_t)a->y_stride;
        matvec_epilogue_params(e, &d);
        d.params[P_ROUTE] = (uint32_t)a->route_off;
        d.params[P_XSTRIDE] = (uint32_t)(a->x_stride / 4);
        d.params[P_XDIV] = a->x_div;
        d.params[P_FLAGS] = (a->select ? 1u : 0u) | (a->scale ? 2u : 0u);
        d.params[P_PART0] = (uint32_t)p->row0;
        d.params[P_PARTN] = (uint32_t)p->rows;
        d.n_params = P_PARTN + 1;
        weight_grid(&d, (n + rows_wg - 1) / rows_wg);
        d.groups[2] = a->n_z;
        st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}

uint64_t moe_group_floats(uint32_t n_expert) { return 3ull * n_expert + 1; }

/* the entries, then each tile's expert: a tile holds an entry at least */
uint64_t moe_list_floats(uint64_t entries) { return 2 * entries; }

/* an expert's last tile part full at most, and no tile empty */
static uint64_t max_tiles(uint32_t tile, uint32_t n_expert, uint64_t entries)
{
    uint64_t t = (entries + tile - 1) / tile + n_expert;
    return t < entries ? t : entries;
}

uint64_t moe_xt_bytes(const matmul_config *c, uint32_t n_expert, uint64_t entries, uint64_t cols)
{
    uint32_t bn = matmul_tile_tokens(c);
    return c->f16 ? max_tiles(bn, n_expert, entries) * bn * act_stride(cols) * 2 : 0;
}

glesllm_status moe_record_group(gpu_queue *q, const moe_kernels *k, const gpu_buffer *act,
                                const moe_group_args *a)
{
    uint64_t ne = (uint64_t)a->n_tok * a->k;
    if (!ne || !a->tile || a->n_expert > 256 || ne >= (1u << 24) ||
        (a->route_off + 2 * ne) * 4 > act->size ||
        (a->group_off + moe_group_floats(a->n_expert)) * 4 > act->size ||
        (a->list_off + moe_list_floats(ne)) * 4 > act->size)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "moe group: %u tokens of %u experts (top %u) outside the buffer or the "
                       "kernel's 256 experts", a->n_tok, a->n_expert, a->k);
    gpu_dispatch d = act_dispatch(&k->group, act);
    uint32_t p[] = { a->n_expert, (uint32_t)ne, (uint32_t)a->route_off, (uint32_t)a->group_off,
                     (uint32_t)a->list_off, a->tile };
    memcpy(d.params, p, sizeof p);
    d.n_params = 6;
    d.groups[0] = d.groups[1] = d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}

/* matmul.comp EXPERT's params */
enum { M_GROUP = 16, M_LIST = 17, M_ROUTE = 18, M_NEXP = 19, M_XDIV = 21, M_FLAGS = 22,
       M_FIRST = 23 };

glesllm_status moe_record_matmul(gpu_queue *q, const matmul_kernel *k, const gpu_weight *w,
                                 const gpu_buffer *act, const moe_matmul_args *a)
{
    matvec_epilogue e = k->var.epilogue;
    uint64_t rows = a->expert_rows, n = a->n_tok, ne = n * a->k;
    uint64_t out_rows = e == MATVEC_GLU ? rows / 2 : rows;
    uint64_t y_end = a->y_off + (ne - 1) * a->y_stride + out_rows;
    uint64_t x_div = a->x_div ? a->x_div : 1;
    uint64_t x_end = a->x_off + (ne + x_div - 1) / x_div * act_stride(w->cols);
    uint32_t bm = 16 * k->cfg.tm, bn = matmul_tile_tokens(&k->cfg);
    if (k->type != w->type || !k->var.expert || (e != MATVEC_GLU && e != MATVEC_STORE) || !ne ||
        !a->x_div || !rows || w->rows % rows || w->rows / rows != a->n_expert ||
        a->n_expert > 256 || a->x_off % 4 || x_end * 4 > act->size || y_end * 4 > act->size ||
        y_end >= (1ull << 32) || (a->list_off + moe_list_floats(ne)) * 4 > act->size ||
        (a->route_off + 2 * ne) * 4 > act->size ||
        (a->group_off + moe_group_floats(a->n_expert)) * 4 > act->size)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "expert matmul %s over %llu tokens: the kernel (%s) or the buffers do not "
                       "fit", w->name, (unsigned long long)n, weight_type_label(k->type));
    glesllm_status st = whole_experts(w, rows, "expert matmul");
    if (st)
        return st;
    uint64_t xt_need = moe_xt_bytes(&k->cfg, a->n_expert, ne, w->cols);
    if (a->tile != bn || (xt_need && (!a->xt || a->xt->size < xt_need)))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "expert matmul %s: tiles of %u entries grouped for a kernel of %u, or no "
                       "buffer of %llu bytes for its token tiles", w->name, a->tile, bn,
                       (unsigned long long)xt_need);
    if (xt_need) { /* the tiles of each expert's entries (x_tiles.comp EXPERT) */
        uint64_t units = weight_units_per_row(w->type, w->cols);
        uint32_t p[] = { (uint32_t)units, (uint32_t)w->cols, (uint32_t)(a->x_off / 4), 0, 0,
                         (uint32_t)a->group_off, (uint32_t)a->list_off, a->n_expert, (uint32_t)ne,
                         a->x_div };
        st = matmul_record_tiles(q, k, act, a->xt, p, 10, max_tiles(bn, a->n_expert, ne), units);
        if (st != GLESLLM_OK)
            return st;
    }
    for (uint32_t i = 0; i < w->n_parts; i++) {
        const gpu_weight_part *p = &w->parts[i];
        gpu_dispatch d;
        weight_part_dispatch(&d, &k->prog, w, p, act, act, GPU_WRITE);
        d.params[0] = (uint32_t)rows;
        d.params[2] = (uint32_t)(a->x_off / 4);
        d.params[5] = (uint32_t)a->y_off;
        d.params[6] = (uint32_t)a->y_stride;
        matvec_epilogue_params(e, &d);
        d.params[M_GROUP] = (uint32_t)a->group_off;
        d.params[M_LIST] = (uint32_t)a->list_off;
        d.params[M_ROUTE] = (uint32_t)a->route_off;
        d.params[M_NEXP] = a->n_expert;
        d.params[M_XDIV] = a->x_div;
        d.params[M_FLAGS] = a->scale ? 2u : 0u;
        d.params[M_FIRST] = (uint32_t)(p->row0 / rows);
        d.n_params = M_FIRST + 1;
        /* read; the last part counts as writing them (matmul_record says why) */
        if (xt_need)
            d.bindings[d.n_bindings++] = (gpu_binding){
                3, a->xt, 0, 0, i + 1 == w->n_parts ? GPU_READ_WRITE : GPU_READ
            };
        /* an expert gets at most one entry a token: n tokens' tiles a layer,
         * the groups past its count return at once */
        d.groups[0] = (uint32_t)((rows + bm - 1) / bm);
        d.groups[1] = (uint32_t)((n + bn - 1) / bn);
        d.groups[2] = (uint32_t)(p->rows / rows);
        if (d.groups[0] > 65535 || d.groups[1] > 65535 || d.groups[2] > 65535)
            return err_set(GLESLLM_ERR_UNSUPPORTED, "expert matmul %s: %u x %u x %u work groups",
                           w->name, d.groups[0], d.groups[1], d.groups[2]);
        st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}

glesllm_status moe_record_combine(gpu_queue *q, const moe_kernels *k, const gpu_buffer *act,
                                  const moe_combine_args *a)
{
    uint64_t xe = a->x_off + (uint64_t)(a->n_tok - 1) * a->x_stride + a->n_embd;
    uint64_t oe = a->out_off + ((uint64_t)a->n_tok * a->k - 1) * a->out_stride + a->n_embd;
    if (!a->n_tok || xe * 4 > act->size || oe * 4 > act->size ||
        (a->shared && ((a->shared_off + (uint64_t)a->n_tok * a->out_stride) * 4 > act->size ||
                       (a->gate_off + a->n_tok) * 4 > act->size)))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "moe combine: %u tokens of %u outside the activations", a->n_tok, a->n_embd);
    gpu_dispatch d = act_dispatch(&k->combine, act);
    uint32_t p[] = { a->n_embd,
                     a->k,
                     (uint32_t)a->x_off,
                     (uint32_t)a->x_stride,
                     (uint32_t)a->out_off,
                     (uint32_t)a->out_stride,
                     (uint32_t)a->shared_off,
                     a->shared,
                     (uint32_t)a->gate_off };
    memcpy(d.params, p, sizeof p);
    d.n_params = 9;
    d.groups[0] = (a->n_embd + MOE_WG - 1) / MOE_WG;
    d.groups[1] = a->n_tok;
    d.groups[2] = 1;
    return gpu_queue_dispatch(q, &d);
}
