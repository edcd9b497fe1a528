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
    float *rope_local; /* the same of Gemma 3's window layers (NULL: none) */
    float *x, *xn, *q, *kn, *vn, *att, *gate, *up, *scores, *row;
    float *moe, *eout; /* experts: their weighted sum, one expert's output */
    /* Mamba blocks: each layer's convolution inputs ((d_conv - 1) x d_inner)
     * and scan state (d_inner x d_state), the position they are at; a
     * token's x|z, convolved x, dt|B|C, dt and y */
    float *conv_st, *ssm_st, *xz, *xc, *dbc, *dt, *y;
    uint32_t ssm_pos;
    /* RWKV-7: each layer's two token shifts (n_embd each) and WKV state
     * (n_head x head^2); a token's six mixed inputs, r, w, k, v, a, g, the
     * first layer's v, the time mix's output and a low-rank path's middle */
    float *rw_shift, *rw_state, *rw;
    /* the matrices' dequantized copies (matrix_values), REF_COPY_BYTES at most */
    struct ref_copy {
        const model_tensor *t;
        float *f;
    } *copies;
    size_t n_copies;
    uint64_t copy_bytes;
};

/* The tests run a model here a token at a time, so each matrix of a
 * forward pass is read once a token; dequantizing it every time was most
 * of their CPU time under the sanitizers (bench/RESULTS.md "CI time"), so
 * each matrix is dequantized once, at its first use, up to this many bytes
 * of copies a model (a small model's whole), and a row at a time past it. */
#define REF_COPY_BYTES (512ull << 20)

void ref_model_destroy(ref_model *r)
{
    if (!r)
        return;
    free(r->rope_local);
    float *bufs[] = { r->k,      r->v,      r->rope, r->x,      r->xn,     r->q,
                      r->kn,     r->vn,     r->att,  r->gate,   r->up,     r->scores,
                      r->row,    r->moe,    r->eout, r->conv_st, r->ssm_st, r->xz,
                      r->xc,     r->dbc,    r->dt,   r->y,      r->rw_shift, r->rw_state,
                      r->rw };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    for (size_t i = 0; i < r->n_copies; i++)
        free(r->copies[i].f);
    free(r->copies);
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
    if (widest < hp->ssm_d_inner) /* (the rows of a Mamba block's x and out projections) */
        widest = hp->ssm_d_inner;
    r->k = malloc(sizeof(float) * (hp->n_layer * n_ctx * kv_dim + 1));
    r->v = malloc(sizeof(float) * (hp->n_layer * n_ctx * kv_dim + 1));
    r->rope = malloc(sizeof(float) * (n_ctx * hp->head_dim + 1));
    r->x = malloc(sizeof(float) * hp->n_embd);
    r->xn = malloc(sizeof(float) * hp->n_embd);
    r->q = malloc(sizeof(float) * (q_dim + 1));
    r->kn = malloc(sizeof(float) * (kv_dim + 1));
    r->vn = malloc(sizeof(float) * (kv_dim + 1));
    r->att = malloc(sizeof(float) * (q_dim + 1));
    r->gate = malloc(sizeof(float) * (ff + 1));
    r->up = malloc(sizeof(float) * (ff + 1));
    r->moe = malloc(sizeof(float) * hp->n_embd);
    r->eout = malloc(sizeof(float) * hp->n_embd);
    r->scores = malloc(sizeof(float) * n_ctx);
    r->row = malloc(sizeof(float) * (widest + 32));
    if (!r->k || !r->v || !r->rope || !r->x || !r->xn || !r->q || !r->kn || !r->vn || !r->att ||
        !r->gate || !r->up || !r->scores || !r->row || !r->moe || !r->eout) {
        ref_model_destroy(r);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the CPU reference model");
    }
    if (hp->ssm) {
        size_t di = hp->ssm_d_inner, L = hp->n_layer, conv = ssm_conv_channels(hp);
        r->conv_st = calloc(L * (hp->ssm_d_conv - 1) * conv, sizeof(float));
        r->ssm_st = calloc(L * di * hp->ssm_d_state, sizeof(float));
        /* (Mamba-2's in projection: z | x B C | dt) */
        r->xz = malloc(sizeof(float) * (di + conv + hp->ssm_dt_rank));
        r->xc = malloc(sizeof(float) * conv);
        r->dbc = malloc(sizeof(float) * (hp->ssm_dt_rank + 2 * hp->ssm_d_state));
        r->dt = malloc(sizeof(float) * di);
        r->y = malloc(sizeof(float) * di);
        if (!r->conv_st || !r->ssm_st || !r->xz || !r->xc || !r->dbc || !r->dt || !r->y) {
            ref_model_destroy(r);
            return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the CPU reference model");
        }
    }
    if (hp->rwkv) {
        size_t d = hp->n_embd, L = hp->n_layer;
        uint32_t lora = hp->rwkv_lora_w;
        uint32_t ranks[] = { hp->rwkv_lora_a, hp->rwkv_lora_v, hp->rwkv_lora_g };
        for (size_t i = 0; i < 3; i++)
            lora = ranks[i] > lora ? ranks[i] : lora;
        r->rw_shift = calloc(L * 2 * d, sizeof(float));
        r->rw_state = calloc(L * d * hp->rwkv_head, sizeof(float));
        r->rw = malloc(sizeof(float) * (14 * d + lora));
        if (!r->rw_shift || !r->rw_state || !r->rw) {
            ref_model_destroy(r);
            return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the CPU reference model");
        }
    }
    model_rope_table(hp, n_ctx, r->rope);
    for (uint32_t il = 0; hp->rope_base_swa > 0.0f && il < hp->n_layer; il++)
        if (model_layer_window(hp, il)) {
            model_hparams l = model_layer_rope_hp(hp, il);
            if (!(r->rope_local = malloc(sizeof(float) * (n_ctx * hp->head_dim + 1)))) {
                ref_model_destroy(r);
                return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the CPU reference model");
            }
            model_rope_table(&l, n_ctx, r->rope_local);
            break;
        }
    *out = r;
    return GLESLLM_OK;
}

/* One dequantized row of t into r->row. */
static const float *get_row(ref_model *r, const model_tensor *t, uint64_t i)
{
    quant_dequantize(t->type, (const uint8_t *)t->data + i * model_tensor_row_bytes(t), r->row, t->cols);
    return r->row;
}

/* All of t's values (its dequantized copy), or NULL where the copies would
 * pass REF_COPY_BYTES or memory runs out. */
static const float *matrix_values(ref_model *r, const model_tensor *t)
{
    for (size_t i = 0; i < r->n_copies; i++)
        if (r->copies[i].t == t)
            return r->copies[i].f;
    uint64_t bytes = t->rows * t->cols * sizeof(float);
    if (r->copy_bytes + bytes > REF_COPY_BYTES)
        return NULL;
    struct ref_copy *c = realloc(r->copies, (r->n_copies + 1) * sizeof *c);
    if (!c)
        return NULL;
    r->copies = c;
    float *f = malloc(bytes);
    if (!f)
        return NULL;
    quant_dequantize(t->type, t->data, f, (size_t)(t->rows * t->cols)); /* (rows unpadded) */
    c[r->n_copies++] = (struct ref_copy){ t, f };
    r->copy_bytes += bytes;
    return f;
}

/* y = W[row0 .. row0 + rows) x (+ y when add) */
static void matvec_rows(ref_model *r, const model_tensor *w, uint64_t row0, uint64_t rows,
                        const float *x, float *y, int add)
{
    const float *all = matrix_values(r, w);
    for (uint64_t i = 0; i < rows; i++) {
        const float *row = all ? all + (row0 + i) * w->cols : get_row(r, w, row0 + i);
        double s = ref_dot(row, x, (size_t)w->cols);
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
    if (r->m->hp.gelu)
        ref_gelu_mul(r->gate, r->up, n_ff);
    else
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

/* x += RMSNorm(v) * w (v: n_embd values, changed) */
static void add_normed(ref_model *r, float *v, const model_tensor *w)
{
    const model_hparams *hp = &r->m->hp;
    ref_rms_norm(v, v, get_row(r, w, 0), 1, hp->n_embd, hp->eps);
    for (uint32_t i = 0; i < hp->n_embd; i++)
        r->x[i] += v[i];
}

/* x += the layer's FFN (experts where it has a router) of RMSNorm(x) * ffn_norm */
static void layer_ffn(ref_model *r, const model_layer *l)
{
    const model_hparams *hp = &r->m->hp;
    ref_rms_norm(r->xn, r->x, get_row(r, &l->ffn_norm, 0), 1, hp->n_embd, hp->eps);
    if (l->router.data) {
        moe_ffn(r, l);
    } else if (l->ffn_post_norm.data) { /* (Gemma 2: x += RMSNorm(ffn) * post weight) */
        ffn(r, &l->gate, &l->up, &l->down, 0, hp->n_ff, r->eout, 0);
        add_normed(r, r->eout, &l->ffn_post_norm);
    } else {
        ffn(r, &l->gate, &l->up, &l->down, 0, hp->n_ff, r->x, 1);
    }
}

static void add_bias(ref_model *r, const model_tensor *b, float *y)
{
    if (!b->data)
        return;
    const float *v = get_row(r, b, 0);
    for (uint64_t i = 0; i < b->cols; i++)
        y[i] += v[i];
}

/* RMSNorm in place, times the weight w where it has one (FalconMamba's dt,
 * B and C have none, Jamba's have) */
static void rms_plain(ref_model *r, float *v, uint32_t n, const model_tensor *w)
{
    double ss = 0.0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)v[i] * v[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + r->m->hp.eps);
    const float *wv = w->data ? get_row(r, w, 0) : NULL;
    for (uint32_t i = 0; i < n; i++)
        v[i] *= scale * (wv ? wv[i] : 1.0f);
}

/* x += the Mamba-2 block of layer li on RMSNorm(x) * attn_norm, its state
 * one token further */
static void mamba2_block(ref_model *r, uint32_t li)
{
    const model_hparams *hp = &r->m->hp;
    const model_layer *l = &r->m->layers[li];
    uint32_t di = hp->ssm_d_inner, ds = hp->ssm_d_state, nh = hp->ssm_dt_rank;
    uint32_t ng = hp->ssm_n_group, K = hp->ssm_d_conv, conv = ssm_conv_channels(hp);
    ref_rms_norm(r->xn, r->x, get_row(r, &l->attn_norm, 0), 1, hp->n_embd, hp->eps);
    matvec(r, &l->ssm_in, r->xn, r->xz, 0);
    float *taps = malloc(sizeof(float) * (size_t)conv * K), *bias = malloc(sizeof(float) * conv);
    float *dt = malloc(sizeof(float) * nh), *a = malloc(sizeof(float) * nh);
    float *d = malloc(sizeof(float) * nh);
    if (!taps || !bias || !dt || !a || !d)
        abort(); /* (a test oracle: a few KiB) */
    for (uint32_t c = 0; c < conv; c++)
        memcpy(taps + (size_t)c * K, get_row(r, &l->ssm_conv, c), sizeof(float) * K);
    memcpy(bias, get_row(r, &l->ssm_conv_b, 0), sizeof(float) * conv);
    ref_ssm_conv(r->xc, r->conv_st + (size_t)li * (K - 1) * conv, r->xz + di, taps, bias, conv, K);
    memcpy(dt, get_row(r, &l->ssm_dt_b, 0), sizeof(float) * nh);
    for (uint32_t h = 0; h < nh; h++) {
        dt[h] += r->xz[di + conv + h];
        a[h] = get_row(r, &l->ssm_a, h)[0];
        d[h] = get_row(r, &l->ssm_d, h)[0];
    }
    ref_ssm_scan2(r->y, r->ssm_st + (size_t)li * di * ds, r->xc, dt, a, r->xc + di, d, r->xz, di,
                  ds, nh, ng);
    /* the grouped norm */
    for (uint32_t g = 0; g < ng; g++)
        ref_rms_norm(r->y + (size_t)g * (di / ng), r->y + (size_t)g * (di / ng),
                     get_row(r, &l->ssm_norm, g), 1, di / ng, hp->eps);
    free(taps);
    free(bias);
    free(dt);
    free(a);
    free(d);
    matvec(r, &l->ssm_out, r->y, r->x, 1);
}

/* x += the Mamba block of layer li on RMSNorm(x) * attn_norm, its state one
 * token further */
static void mamba_block(ref_model *r, uint32_t li)
{
    if (r->m->hp.ssm_mamba2) {
        mamba2_block(r, li);
        return;
    }
    const model_hparams *hp = &r->m->hp;
    const model_layer *l = &r->m->layers[li];
    uint32_t di = hp->ssm_d_inner, ds = hp->ssm_d_state, R = hp->ssm_dt_rank, K = hp->ssm_d_conv;
    ref_rms_norm(r->xn, r->x, get_row(r, &l->attn_norm, 0), 1, hp->n_embd, hp->eps);
    matvec(r, &l->ssm_in, r->xn, r->xz, 0);
    /* the convolution's taps and bias, channel by channel, into y (free until the scan) */
    float *taps = malloc(sizeof(float) * (size_t)di * K), *bias = r->dt;
    if (!taps)
        abort(); /* (a test oracle: a few KiB) */
    for (uint32_t c = 0; c < di; c++)
        memcpy(taps + (size_t)c * K, get_row(r, &l->ssm_conv, c), sizeof(float) * K);
    memcpy(bias, get_row(r, &l->ssm_conv_b, 0), sizeof(float) * di);
    ref_ssm_conv(r->xc, r->conv_st + (size_t)li * (K - 1) * di, r->xz, taps, bias, di, K);
    free(taps);
    matvec(r, &l->ssm_x, r->xc, r->dbc, 0);
    if (hp->ssm_dt_b_c_rms) {
        rms_plain(r, r->dbc, R, &l->ssm_dt_norm);
        rms_plain(r, r->dbc + R, ds, &l->ssm_b_norm);
        rms_plain(r, r->dbc + R + ds, ds, &l->ssm_c_norm);
    }
    matvec(r, &l->ssm_dt, r->dbc, r->dt, 0);
    add_bias(r, &l->ssm_dt_b, r->dt);
    float *a = malloc(sizeof(float) * (size_t)di * ds), *d = malloc(sizeof(float) * di);
    if (!a || !d)
        abort();
    for (uint32_t c = 0; c < di; c++)
        memcpy(a + (size_t)c * ds, get_row(r, &l->ssm_a, c), sizeof(float) * ds);
    memcpy(d, get_row(r, &l->ssm_d, 0), sizeof(float) * di);
    ref_ssm_scan(r->y, r->ssm_st + (size_t)li * di * ds, r->xc, r->dt, a, r->dbc + R, d,
                 r->xz + di, di, ds);
    free(a);
    free(d);
    matvec(r, &l->ssm_out, r->y, r->x, 1);
}

/* y = W2 act(W1 x), a low-rank path of an RWKV-7 time mix; act: 0 none, 1
 * tanh, 2 sigmoid */
static void lora(ref_model *r, const model_tensor *w1, const model_tensor *w2, int act,
                 const float *x, float *mid, float *y)
{
    matvec(r, w1, x, mid, 0);
    for (uint64_t i = 0; i < w1->rows; i++)
        mid[i] = act == 1 ? tanhf(mid[i]) : act == 2 ? 1.0f / (1.0f + expf(-mid[i])) : mid[i];
    matvec(r, w2, mid, y, 0);
}

/* LayerNorm of x into y with the weight w and bias b */
static void layer_norm(ref_model *r, float *y, const float *x, const model_tensor *w,
                       const model_tensor *b)
{
    const model_hparams *hp = &r->m->hp;
    float *wb = malloc(sizeof(float) * 2 * hp->n_embd);
    if (!wb)
        abort(); /* (a test oracle: a few KiB) */
    memcpy(wb, get_row(r, w, 0), sizeof(float) * hp->n_embd);
    memcpy(wb + hp->n_embd, get_row(r, b, 0), sizeof(float) * hp->n_embd);
    ref_layer_norm(y, x, wb, wb + hp->n_embd, 1, hp->n_embd, hp->eps);
    free(wb);
}

/* The time and channel mixes of RWKV-7 layer li on x, their states one
 * token further (model_layer says what each tensor is) */
static void rwkv_layer(ref_model *r, uint32_t li)
{
    const model_hparams *hp = &r->m->hp;
    const model_layer *l = &r->m->layers[li];
    uint32_t d = hp->n_embd, hs = hp->rwkv_head;
    float *shift = r->rw_shift + (size_t)li * 2 * d, *st = r->rw_state + (size_t)li * d * hs;
    float *mix = r->rw, *rr = mix + 6 * d, *w = rr + d, *k = w + d, *v = k + d, *a = v + d;
    float *g = a + d, *first = g + d, *out = first + d, *mid = out + d;
    float *xa = r->xn, *t = r->eout;
    /* the time mix: the token-shift mixes r w k v a g of the normed x and the previous one */
    layer_norm(r, xa, r->x, &l->attn_norm, &l->attn_norm_b);
    for (uint32_t c = 0; c < 6; c++) {
        const float *lerp = get_row(r, &l->tm_lerp, c);
        for (uint32_t i = 0; i < d; i++)
            mix[c * d + i] = xa[i] + (shift[i] - xa[i]) * lerp[i];
    }
    memcpy(shift, xa, sizeof(float) * d);
    matvec(r, &l->wq, mix, rr, 0);
    matvec(r, &l->wk, mix + 2 * d, k, 0);
    matvec(r, &l->wv, mix + 3 * d, v, 0);
    /* the low-rank paths (their vectors added by ref_rwkv7_mix; layer 0's
     * value residual is never read) */
    lora(r, &l->tm_w1, &l->tm_w2, 1, mix + d, mid, w);
    if (li)
        lora(r, &l->tm_v1, &l->tm_v2, 0, mix + 3 * d, mid, t);
    lora(r, &l->tm_a1, &l->tm_a2, 0, mix + 4 * d, mid, a);
    lora(r, &l->tm_g1, &l->tm_g2, 2, mix + 5 * d, mid, g);
    /* the vectors, and the update's scratch (in the mixes, all read) */
    const model_tensor *vec[8] = { &l->tm_w0,  &l->tm_a0,  &l->tm_v0, &l->tm_k_k,
                                   &l->tm_k_a, &l->tm_r_k, &l->tm_ln, &l->tm_ln_b };
    float *par = malloc(sizeof(float) * 8 * d);
    if (!par)
        abort(); /* (a test oracle: a few KiB) */
    for (uint32_t i = 0; i < 8; i++)
        memcpy(par + i * d, get_row(r, vec[i], 0), sizeof(float) * d);
    ref_rwkv7_par rp = { par, par + d, par + 2 * d, par + 3 * d,
                         par + 4 * d, par + 5 * d, par + 6 * d, par + 7 * d };
    ref_rwkv7_mix(out, st, rr, w, k, v, a, t, g, first, li == 0, &rp, d, hs, mix);
    free(par);
    matvec(r, &l->wo, out, r->x, 1);
    /* the channel mix: relu(Wkey mix)^2 through Wvalue */
    layer_norm(r, xa, r->x, &l->ffn_norm, &l->ffn_norm_b);
    const float *cl = get_row(r, &l->cm_lerp, 0);
    for (uint32_t i = 0; i < d; i++)
        mix[i] = xa[i] + (shift[d + i] - xa[i]) * cl[i];
    memcpy(shift + d, xa, sizeof(float) * d);
    matvec(r, &l->up, mix, r->gate, 0);
    for (uint32_t i = 0; i < hp->n_ff; i++)
        r->gate[i] = r->gate[i] > 0.0f ? r->gate[i] * r->gate[i] : 0.0f;
    matvec(r, &l->down, r->gate, r->x, 1);
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
    if (model_hp_recurrent(hp) && pos != r->ssm_pos) {
        if (pos)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "position %u: the reference's recurrent state is at position %u; it "
                           "runs a sequence forward from 0", pos, r->ssm_pos);
        /* back to the start: an empty state */
        if (hp->rwkv) {
            memset(r->rw_shift, 0, sizeof(float) * hp->n_layer * 2 * hp->n_embd);
            memset(r->rw_state, 0, sizeof(float) * hp->n_layer * hp->n_embd * hp->rwkv_head);
        } else {
            memset(r->conv_st, 0,
                   sizeof(float) * hp->n_layer * (hp->ssm_d_conv - 1) * ssm_conv_channels(hp));
            memset(r->ssm_st, 0,
                   sizeof(float) * hp->n_layer * hp->ssm_d_inner * hp->ssm_d_state);
        }
    }
    memcpy(r->x, get_row(r, &m->tok_embd, (uint64_t)token), sizeof(float) * n_embd);
    for (uint32_t i = 0; hp->embd_scale > 0.0f && i < n_embd; i++)
        r->x[i] *= hp->embd_scale;
    r->ssm_pos = pos + 1;
    if (hp->rwkv) {
        layer_norm(r, r->x, r->x, &m->tok_norm, &m->tok_norm_b);
        for (uint32_t li = 0; li < hp->n_layer; li++)
            rwkv_layer(r, li);
    }
    const float *cs = r->rope + (size_t)pos * hd;
    for (uint32_t li = 0; li < hp->n_layer && !hp->rwkv; li++) {
        const model_layer *l = &m->layers[li];
        if (l->recurrent) {
            mamba_block(r, li);
            if (l->ffn_norm.data) /* (Jamba's FFN after it; Mamba-1 has none) */
                layer_ffn(r, l);
            continue;
        }
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
            const float *t = r->rope_local && model_layer_window(hp, li)
                                 ? r->rope_local + (size_t)pos * hd
                                 : cs;
            ref_rope(r->q, t, hp->n_head, hd, hp->rope_neox);
            ref_rope(r->kn, t, hp->n_head_kv, hd, hp->rope_neox);
        }
        float *kc = r->k + ((size_t)li * r->n_ctx) * kv_dim;
        float *vc = r->v + ((size_t)li * r->n_ctx) * kv_dim;
        for (size_t i = 0; i < kv_dim; i++) {
            kc[pos * kv_dim + i] = to_f16(r->kn[i]);
            vc[pos * kv_dim + i] = to_f16(r->vn[i]);
        }
        ref_attention(r->att, r->q, kc, vc, pos + 1, model_layer_window(hp, li), hp->n_head,
                      hp->n_head_kv, hd, hp->attn_scale, hp->attn_softcap, r->scores);
        if (l->attn_post_norm.data) { /* (Gemma 2) */
            matvec(r, &l->wo, r->att, r->eout, 0);
            add_normed(r, r->eout, &l->attn_post_norm);
        } else {
            matvec(r, &l->wo, r->att, r->x, 1);
        }
        layer_ffn(r, l);
    }
    if (!logits)
        return GLESLLM_OK;
    if (hp->rwkv)
        layer_norm(r, r->xn, r->x, &m->out_norm, &m->out_norm_b);
    else
        ref_rms_norm(r->xn, r->x, get_row(r, &m->out_norm, 0), 1, n_embd, hp->eps);
    matvec(r, &m->output, r->xn, logits, 0);
    for (uint32_t i = 0; hp->final_softcap > 0.0f && i < hp->n_vocab; i++)
        logits[i] = hp->final_softcap * tanhf(logits[i] / hp->final_softcap);
    return GLESLLM_OK;
}
