/* CPU reference forward pass. See ref_model.h. */
#include "model/ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "ops/ref_ops.h"
#include "quant/quant.h"

struct ref_model {
    const model *m;
    uint32_t n_ctx;
    float *k, *v;  /* [layer][pos][kv_dim] */
    float *rope;   /* [pos][head_dim/2][cos, sin] */
    float *x, *xn, *q, *kn, *vn, *att, *gate, *up, *scores, *row;
    float *moe, *eout; /* experts: their weighted sum, one expert's output */
};

void ref_model_destroy(ref_model *r)
{
    if (!r)
        return;
    float *bufs[] = { r->k, r->v, r->rope, r->x, r->xn, r->q, r->kn, r->vn, r->att,
                      r->gate, r->up, r->scores, r->row, r->moe, r->eout };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(r);
}

glesllm_status ref_model_create(const model *m, uint32_t n_ctx, ref_model **out)
{
    const model_hparams *hp = &m->hp;
    ref_model *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    r->m = m;
    r->n_ctx = n_ctx;
    size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim, q_dim = (size_t)hp->n_head * hp->head_dim;
    size_t ff = hp->n_ff;
    if (hp->n_ff_exp > ff)
        ff = hp->n_ff_exp;
    if (hp->n_ff_shexp > ff)
        ff = hp->n_ff_shexp;
    if (hp->n_expert > ff)
        ff = hp->n_expert;
    size_t widest = hp->n_vocab > ff ? hp->n_vocab : ff;
    if (widest < hp->n_embd)
        widest = hp->n_embd;
    r->k = malloc(sizeof(float) * hp->n_layer * n_ctx * kv_dim);
    r->v = malloc(sizeof(float) * hp->n_layer * n_ctx * kv_dim);
    r->rope = malloc(sizeof(float) * n_ctx * hp->head_dim);
    r->x = malloc(sizeof(float) * hp->n_embd);
    r->xn = malloc(sizeof(float) * hp->n_embd);
    r->q = malloc(sizeof(float) * q_dim);
    r->kn = malloc(sizeof(float) * kv_dim);
    r->vn = malloc(sizeof(float) * kv_dim);
    r->att = malloc(sizeof(float) * q_dim);
    r->gate = malloc(sizeof(float) * ff);
    r->up = malloc(sizeof(float) * ff);
    r->moe = malloc(sizeof(float) * hp->n_embd);
    r->eout = malloc(sizeof(float) * hp->n_embd);
    r->scores = malloc(sizeof(float) * n_ctx);
    r->row = malloc(sizeof(float) * (widest + 32));
    if (!r->k || !r->v || !r->rope || !r->x || !r->xn || !r->q || !r->kn || !r->vn || !r->att ||
        !r->gate || !r->up || !r->scores || !r->row || !r->moe || !r->eout) {
        ref_model_destroy(r);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the CPU reference model");
    }
    model_rope_table(hp, n_ctx, r->rope);
    *out = r;
    return GLESLLM_OK;
}

/* One dequantized row of t into r->row. */
static const float *get_row(ref_model *r, const model_tensor *t, uint64_t i)
{
    quant_dequantize(t->type, (const uint8_t *)t->data + i * model_tensor_row_bytes(t), r->row, t->cols);
    return r->row;
}

/* y = W[row0 .. row0 + rows) x (+ y when add) */
static void matvec_rows(ref_model *r, const model_tensor *w, uint64_t row0, uint64_t rows,
                        const float *x, float *y, int add)
{
    for (uint64_t i = 0; i < rows; i++) {
        double s = ref_dot(get_row(r, w, row0 + i), x, (size_t)w->cols);
        y[i] = add ? y[i] + (float)s : (float)s;
    }
}

/* y = W x (+ y when add) */
static void matvec(ref_model *r, const model_tensor *w, const float *x, float *y, int add)
{
    matvec_rows(r, w, 0, w->rows, x, y, add);
}

/* out = Wdown (silu(Wgate xn) * (Wup xn)) with matrix e of stacked experts
 * (e 0 and single matrices: a dense FFN of n_ff rows) */
static void ffn(ref_model *r, const model_tensor *gate, const model_tensor *up,
                const model_tensor *down, uint32_t e, uint32_t n_ff, float *out, int add)
{
    uint32_t n_embd = r->m->hp.n_embd;
    matvec_rows(r, gate, (uint64_t)e * n_ff, n_ff, r->xn, r->gate, 0);
    matvec_rows(r, up, (uint64_t)e * n_ff, n_ff, r->xn, r->up, 0);
    ref_silu_mul(r->gate, r->up, n_ff);
    matvec_rows(r, down, (uint64_t)e * n_embd, n_embd, r->gate, out, add);
}

/* x += the experts' FFN of xn: the router's choice, weighted, plus the
 * shared expert times its sigmoid gate */
static void moe_ffn(ref_model *r, const model_layer *l)
{
    const model_hparams *hp = &r->m->hp;
    uint32_t n_embd = hp->n_embd, ids[MODEL_MAX_EXPERTS_USED];
    float w[MODEL_MAX_EXPERTS_USED], logits[MODEL_MAX_EXPERTS];
    matvec(r, &l->router, r->xn, logits, 0);
    ref_moe_route(logits, hp->n_expert, hp->n_expert_used, hp->expert_norm, hp->expert_scale, ids,
                  w);
    memset(r->moe, 0, sizeof(float) * n_embd);
    for (uint32_t j = 0; j < hp->n_expert_used; j++) {
        ffn(r, &l->gate_exps, &l->up_exps, &l->down_exps, ids[j], hp->n_ff_exp, r->eout, 0);
        for (uint32_t i = 0; i < n_embd; i++)
            r->moe[i] += w[j] * r->eout[i];
    }
    if (l->shexp_gate.data) {
        float g;
        matvec(r, &l->shexp_gate, r->xn, &g, 0);
        g = 1.0f / (1.0f + expf(-g));
        ffn(r, &l->gate_shexp, &l->up_shexp, &l->down_shexp, 0, hp->n_ff_shexp, r->eout, 0);
        for (uint32_t i = 0; i < n_embd; i++)
            r->moe[i] += g * r->eout[i];
    }
    for (uint32_t i = 0; i < n_embd; i++)
        r->x[i] += r->moe[i];
}

static void add_bias(ref_model *r, const model_tensor *b, float *y)
{
    if (!b->data)
        return;
    const float *v = get_row(r, b, 0);
    for (uint64_t i = 0; i < b->cols; i++)
        y[i] += v[i];
}

static float to_f16(float f) { return quant_half_to_float(quant_float_to_half(f)); }

glesllm_status ref_model_forward(ref_model *r, int32_t token, uint32_t pos, float *logits)
{
    const model *m = r->m;
    const model_hparams *hp = &m->hp;
    if (token < 0 || (uint32_t)token >= hp->n_vocab)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %u",
                       token, hp->n_vocab);
    if (pos >= r->n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "position %u is past the context of %u", pos,
                       r->n_ctx);
    uint32_t n_embd = hp->n_embd, hd = hp->head_dim;
    size_t kv_dim = (size_t)hp->n_head_kv * hd;
    memcpy(r->x, get_row(r, &m->tok_embd, (uint64_t)token), sizeof(float) * n_embd);
    const float *cs = r->rope + (size_t)pos * hd;
    for (uint32_t li = 0; li < hp->n_layer; li++) {
        const model_layer *l = &m->layers[li];
        ref_rms_norm(r->xn, r->x, get_row(r, &l->attn_norm, 0), 1, n_embd, hp->eps);
        matvec(r, &l->wq, r->xn, r->q, 0);
        matvec(r, &l->wk, r->xn, r->kn, 0);
        matvec(r, &l->wv, r->xn, r->vn, 0);
        add_bias(r, &l->bq, r->q);
        add_bias(r, &l->bk, r->kn);
        add_bias(r, &l->bv, r->vn);
        if (hp->qk_norm != MODEL_QK_NONE) { /* (OLMoE: the width; Qwen3: each head) */
            uint32_t qs, ks;
            model_qk_spans(hp, &qs, &ks);
            ref_rms_norm(r->q, r->q, get_row(r, &l->q_norm, 0), hp->n_head * hd / qs, qs, hp->eps);
            ref_rms_norm(r->kn, r->kn, get_row(r, &l->k_norm, 0), kv_dim / ks, ks, hp->eps);
        }
        if (model_layer_rope(hp, li)) {
            ref_rope(r->q, cs, hp->n_head, hd, hp->rope_neox);
            ref_rope(r->kn, cs, hp->n_head_kv, hd, hp->rope_neox);
        }
        float *kc = r->k + ((size_t)li * r->n_ctx) * kv_dim;
        float *vc = r->v + ((size_t)li * r->n_ctx) * kv_dim;
        for (size_t i = 0; i < kv_dim; i++) {
            kc[pos * kv_dim + i] = to_f16(r->kn[i]);
            vc[pos * kv_dim + i] = to_f16(r->vn[i]);
        }
        ref_attention(r->att, r->q, kc, vc, pos + 1, model_layer_window(hp, li), hp->n_head,
                      hp->n_head_kv, hd, r->scores);
        matvec(r, &l->wo, r->att, r->x, 1);
        ref_rms_norm(r->xn, r->x, get_row(r, &l->ffn_norm, 0), 1, n_embd, hp->eps);
        if (hp->n_expert)
            moe_ffn(r, l);
        else
            ffn(r, &l->gate, &l->up, &l->down, 0, hp->n_ff, r->x, 1);
    }
    if (!logits)
        return GLESLLM_OK;
    ref_rms_norm(r->xn, r->x, get_row(r, &m->out_norm, 0), 1, n_embd, hp->eps);
    matvec(r, &m->output, r->xn, logits, 0);
    return GLESLLM_OK;
}
