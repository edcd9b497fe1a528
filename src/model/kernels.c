/* The GPU model's kernels: each variant (type, split, epilogue) built once
 * and shared by every weight that takes it, and the several-token sets. */
#include <string.h>

#include "common/error.h"
#include "model/gpu_model_impl.h"

/* The set sizes below the largest (gm->multi_nt tokens). */
static const uint32_t multi_small_sets[MULTI_SETS - 1] = { 2, 3, 5 };

/* field by field: the structs have padding that memcmp would compare */
static bool same_kernel(const matvec_kernel *k, uint32_t type, const matvec_config *c,
                        const matvec_variant *v)
{
    return k->type == type && k->cfg.wg == c->wg && k->cfg.tpr == c->tpr && k->cfg.nr == c->nr &&
           k->cfg.subgroup == c->subgroup && k->cfg.xsh == c->xsh && k->cfg.xb == c->xb &&
           k->cfg.x_once == c->x_once && k->cfg.xg == c->xg &&
           k->var.epilogue == v->epilogue && k->var.norm == v->norm && k->var.q_dim == v->q_dim &&
           k->var.kv_dim == v->kv_dim && k->var.head_dim == v->head_dim &&
           k->var.bias == v->bias && k->var.nt == v->nt && k->var.norm_scale == v->norm_scale &&
           k->var.norm_out == v->norm_out && k->var.expert == v->expert && k->var.gelu == v->gelu;
}

static glesllm_status get_matvec(gpu_model *gm, uint32_t type, uint64_t rows, uint64_t cols,
                                 const matvec_variant *var, const matvec_kernel **out)
{
    matvec_config cfg = var->nt > 1 ? matvec_multi_config(gm->ctx, &gm->tune, type, var->nt, rows, cols)
                                    : matvec_default_config(gm->ctx, &gm->tune, type, rows, cols);
    if ((var->epilogue == MATVEC_GLU || var->epilogue == MATVEC_QKV) && cfg.nr % 2)
        cfg.nr = 2;
    for (uint32_t i = 0; i < gm->n_kernels; i++) {
        const matvec_kernel *k = &gm->kernels[i];
        if (same_kernel(k, type, &cfg, var)) {
            *out = k;
            return GLESLLM_OK;
        }
    }
    if (gm->n_kernels == MAX_KERNELS)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "the model needs more than %d matvec variants",
                       MAX_KERNELS);
    glesllm_status st = matvec_build(gm->ctx, &gm->tune, type, &cfg, var, &gm->kernels[gm->n_kernels]);
    if (st != GLESLLM_OK)
        return st;
    *out = &gm->kernels[gm->n_kernels++];
    return GLESLLM_OK;
}

static bool same_matmul(const matmul_kernel *k, uint32_t type, const matvec_variant *v,
                        const matmul_config *c)
{
    return k->type == type && k->cfg.wg == c->wg && k->cfg.tm == c->tm && k->cfg.tn == c->tn &&
           k->cfg.f16 == c->f16 && k->cfg.dup == c->dup && k->cfg.row_sums == c->row_sums &&
           k->cfg.split == c->split && k->var.epilogue == v->epilogue &&
           k->var.q_dim == v->q_dim && k->var.kv_dim == v->kv_dim &&
           k->var.head_dim == v->head_dim && k->var.bias == v->bias && k->var.expert == v->expert &&
           k->var.gelu == v->gelu;
}

static glesllm_status get_matmul(gpu_model *gm, uint32_t type, uint64_t rows,
                                 const matvec_variant *var, const matmul_kernel **out)
{
    matvec_variant v = *var;
    v.norm = v.norm_scale = v.norm_out = false; /* prefill normalises in its own dispatch */
    /* f16 tiles for the quantized and 16-bit types; F32 weights stay f32 */
    matmul_config cfg = matmul_config_for(type == GGML_TYPE_F32 ? &gm->mcfg32 : &gm->mcfg, rows);
    for (uint32_t i = 0; i < gm->n_mkernels; i++)
        if (same_matmul(&gm->mkernels[i], type, &v, &cfg)) {
            *out = &gm->mkernels[i];
            return GLESLLM_OK;
        }
    if (gm->n_mkernels == MAX_KERNELS)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "the model needs more than %d matmul variants",
                       MAX_KERNELS);
    glesllm_status st = matmul_build(gm->ctx, type, &cfg, &v, &gm->mkernels[gm->n_mkernels]);
    /* (where short prompts' products are sliced, QKV's twin that adds its
     * slices up) */
    if (st == GLESLLM_OK && matmul_slices_groups(gm->ctx, &gm->tune) &&
        (st = matmul_build_slices_sum(gm->ctx, &gm->mkernels[gm->n_mkernels])))
        matmul_destroy(&gm->mkernels[gm->n_mkernels]);
    if (st != GLESLLM_OK)
        return st;
    *out = &gm->mkernels[gm->n_mkernels++];
    return GLESLLM_OK;
}

/* The several-token twin of a variant (the norm folded in wherever the
 * one-token kernel reads a normalised x), when small batches are on. */
static glesllm_status get_multi(gpu_model *gm, const gpu_weight *w, const matvec_variant *var,
                                multi_kernels ks)
{
    memset(ks, 0, sizeof(multi_kernels));
    if (!gm->n_small)
        return GLESLLM_OK;
    matvec_variant v = *var;
    v.nt = gm->multi_nt;
    v.norm = v.epilogue == MATVEC_QKV || v.epilogue == MATVEC_GLU || var->norm || var->norm_scale;
    v.norm_scale = v.norm_out = false;
    return get_matvec(gm, w->type, w->rows, w->cols, &v, &ks[gm->n_sets - 1]);
}

glesllm_status gm_linear_kernels(gpu_model *gm, gpu_linear *l, const matvec_variant *one,
                                 const matvec_variant *multi)
{
    const gpu_weight *w = &l->w;
    glesllm_status st = get_matvec(gm, w->type, w->rows, w->cols, one, &l->k);
    if (!st)
        st = get_matmul(gm, w->type, w->rows, one, &l->mk);
    if (!st)
        st = get_multi(gm, w, multi ? multi : one, l->vk);
    return st;
}

glesllm_status gm_expert_kernel(gpu_model *gm, gpu_linear *l, uint64_t rows, matvec_epilogue e,
                                bool stacked)
{
    matvec_variant v = { e };
    v.expert = true;
    glesllm_status st = get_matvec(gm, l->w.type, rows, l->w.cols, &v, &l->k);
    /* prefill: the stacked experts' matmul over the tokens grouped by expert */
    return st || !stacked ? st : get_matmul(gm, l->w.type, rows, &v, &l->mk);
}

glesllm_status gm_plain_matmul(gpu_model *gm, gpu_linear *l, matvec_epilogue e)
{
    matvec_variant v = { e };
    return get_matmul(gm, l->w.type, l->w.rows, &v, &l->mk);
}

uint32_t gm_multi_tokens(uint32_t n_small)
{
    /* the fewest runs of at most MATVEC_MULTI_NT tokens, split evenly (a pass
     * of 9 tokens is one run of 9, not 8 + 1: a second run reads every
     * weight again) */
    if (n_small < 2)
        return 2;
    uint32_t runs = (n_small + MATVEC_MULTI_NT - 1) / MATVEC_MULTI_NT;
    return (n_small + runs - 1) / runs;
}

void gm_multi_sets(gpu_model *gm)
{
    for (uint32_t i = 0; i < MULTI_SETS - 1; i++)
        if (multi_small_sets[i] < gm->multi_nt)
            gm->set_nt[gm->n_sets++] = multi_small_sets[i];
    gm->set_nt[gm->n_sets] = gm->multi_nt;
    gm->set_built[gm->n_sets++] = true; /* with the weights */
}

uint32_t gm_multi_set(const gpu_model *gm, uint32_t n)
{
    uint32_t s = 0;
    while (s + 1 < gm->n_sets && gm->set_nt[s] < n)
        s++;
    return s;
}

/* the kernel of set si twin to the largest set's in l (fewer tokens) */
static glesllm_status multi_twin(gpu_model *gm, gpu_linear *l, uint32_t si)
{
    const matvec_kernel *big = l->vk[gm->n_sets - 1];
    matvec_variant v = big->var;
    v.nt = gm->set_nt[si];
    return get_matvec(gm, big->type, l->w.rows, l->w.cols, &v, &l->vk[si]);
}

glesllm_status gm_build_multi_set(gpu_model *gm, uint32_t si)
{
    if (gm->set_built[si])
        return GLESLLM_OK;
    glesllm_status st = multi_twin(gm, &gm->out, si);
    for (uint32_t li = 0; st == GLESLLM_OK && li < gm->m->hp.n_layer; li++) {
        gpu_layer *g = &gm->layers[li];
        gpu_linear *ls[MAX_SEGMENTS + 18] = { &g->wo,    &g->glu,   &g->down,  &g->ssm_in,
                                              &g->ssm_x, &g->ssm_out, &g->rw_r, &g->rw_k,
                                              &g->rw_v,  &g->rw_w1, &g->rw_w2, &g->rw_a1,
                                              &g->rw_a2, &g->rw_v1, &g->rw_v2, &g->rw_g1,
                                              &g->rw_g2, &g->rw_ck };
        uint32_t n = 18;
        for (uint32_t i = 0; i < g->n_qkv; i++)
            ls[n++] = &g->qkv[i].l;
        /* (those a layer has; experts: one-token kernels only) */
        for (uint32_t i = 0; st == GLESLLM_OK && i < n; i++)
            if (ls[i]->vk[gm->n_sets - 1])
                st = multi_twin(gm, ls[i], si);
    }
    gm->set_built[si] = st == GLESLLM_OK;
    return st;
}

glesllm_status gpu_model_prepare_small(gpu_model *gm)
{
    glesllm_status st = GLESLLM_OK;
    for (uint32_t si = 0; gm->n_small && st == GLESLLM_OK && si < gm->n_sets; si++)
        st = gm_build_multi_set(gm, si);
    return st;
}

void gm_kernels_destroy(gpu_model *gm)
{
    for (uint32_t i = 0; i < gm->n_kernels; i++)
        matvec_destroy(&gm->kernels[i]);
    for (uint32_t i = 0; i < gm->n_mkernels; i++)
        matmul_destroy(&gm->mkernels[i]);
}

uint32_t gm_small_limit(const gpu_model *gm, unsigned flags)
{
    /* (n_small may shrink with the batch after n_small_plain is set) */
    return flags & GPU_STEP_PLAIN && gm->n_small_plain < gm->n_small ? gm->n_small_plain
                                                                       : gm->n_small;
}

uint32_t gm_few_limit(const gpu_model *gm, unsigned flags)
{
    uint32_t n = gm_small_limit(gm, flags);
    return n > ATTN_FEW_N ? n : ATTN_FEW_N; /* (few_n: the largest) */
}
