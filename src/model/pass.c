/* The ops of a layer as each kind of pass records them, and the passes
 * themselves: gpu_model_step (one token), gpu_model_prefill (small batches
 * and chunks). An architecture's graph (model/arch/) calls the ops in its
 * model's order; what differs between one token, a few and many is here.
 *
 *   op         PASS_STEP               PASS_SMALL              PASS_CHUNK
 *   norm       split across the        folded into the next    its own dispatch
 *              matvecs (or its own)    several-token matvec    over the rows
 *   linear     one-token matvec        several-token matvecs   tiled matmul
 *   attention  attention `step`        attention `few`         `few` or `tiles` */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/gpu_model_impl.h"

static const model_hparams *hparams(const gpu_pass *p) { return &p->gm->m->hp; }

static uint64_t kv_half(const model_hparams *hp) { return (uint64_t)hp->n_head_kv * hp->head_dim / 2; }

/* The row of the page table of the selected sequence's K/V in a layer (its
 * ring's for a window layer where there is one), and a batch's entries for
 * the layer (each token's (row << 24) | position). */
static uint32_t layer_row(const gpu_pass *p, const gpu_layer *l)
{
    return p->gm->seq + (l->ring ? p->gm->n_seq : 0);
}

static const uint32_t *layer_tab(const gpu_pass *p, const gpu_layer *l)
{
    return l->ring ? p->seq_tab_w : p->seq_tab;
}

/* The layer's cache, the selected sequence's positions (a batch over
 * sequences: each token's entry names its sequence). */
static attn_io attention_io(const gpu_pass *p, const gpu_layer *l)
{
    const gpu_model *gm = p->gm;
    attn_io io = { .cache = &l->cache, .act = &gm->act, .count = &gm->attn_count,
                   .k_base = gm->k_base, .v_base = l->v_base, .seq = layer_row(p, l),
                   .partials = gm->partials };
    return io;
}

/* RWKV's LayerNorm of n rows at x into y, its weight at `weight` of act and
 * its bias a row of n_embd after it */
static glesllm_status layer_norm_rows(gpu_pass *p, uint64_t weight, uint64_t x, uint64_t y,
                                      uint32_t n)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint64_t emb = act_stride(hp->n_embd);
    return rwkv_record_norm(gm->q, &gm->rwkv, &gm->act, &gm->act, weight,
                            weight + (hp->n_embd + 63) / 64 * 64, hp->eps, x, y, emb, n);
}

/* ---- the norm's partial sums (the decode step splits the norm) --------------- */

/* the partial sums of squares rms_prep writes for a row */
static uint32_t prep_sums(const model_hparams *hp) { return norm_prep_groups(hp->n_embd) * NORM_WG; }

/* With the norm split, how many partial sums of squares of x lie at gm->sq:
 * those the norm_out kernel that wrote x left, or rms_prep's (x from the
 * embedding); none without the split. */
static uint32_t step_sq_count(const gpu_pass *p)
{
    const gpu_linear *wx = p->wrote_x;
    if (!p->gm->fuse_norm)
        return 0;
    return wx ? matvec_norm_parts(wx->k, &wx->w) : prep_sums(hparams(p));
}

/* Where a one-token matvec built with norm_scale finds the norm's weight and
 * its partial sums. */
static matvec_args step_norm_args(const gpu_pass *p)
{
    const gpu_model *gm = p->gm;
    matvec_args a = { .norm_off = p->norm, .eps = hparams(p)->eps };
    if (gm->fuse_norm)
        a.sq_off = gm->sq;
    a.sq_count = step_sq_count(p);
    return a;
}

/* A decode step's norm of the row at x_off into xn: with the split, its
 * first half (x times the weight and the partial sums: rms_prep), else all
 * of it. */
static glesllm_status step_norm_row(gpu_pass *p, uint64_t weight, uint64_t x_off)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    if (hp->rwkv) /* (a LayerNorm, its bias after its weight) */
        return layer_norm_rows(p, weight, x_off, gm->xn, 1);
    if (gm->fuse_norm)
        return norm_record_prep(gm->q, &gm->norm, &gm->act, hp->n_embd, weight, x_off, gm->xn,
                                gm->sq);
    return norm_record_rms(gm->q, &gm->norm, &gm->act, hp->n_embd, hp->eps,
                           (uint32_t)act_stride(hp->n_embd), weight, x_off, gm->xn, 1);
}

/* How a decode step splits the sum of squares before the one-token matvec
 * that reads x next (step_sq_count's sums), for x_prep.comp of the
 * several-token twin, which adds them up as that matvec does, so that its
 * sums are the step's to the bit; left unset (any split) where the parts of
 * the weight would number the sums otherwise than one after the other, or
 * without fuse_norm. */
static void step_norm_split(const gpu_pass *p, matvec_args *a)
{
    const gpu_linear *wx = p->wrote_x;
    a->sq_rows = 0;
    a->sq_count = 0;
    if (!p->gm->fuse_norm)
        return;
    if (wx) {
        for (uint32_t i = 0; i + 1 < wx->w.n_parts; i++)
            if (wx->w.parts[i].rows % wx->k->cfg.nr)
                return;
        a->sq_rows = wx->k->cfg.nr;
    }
    a->sq_count = step_sq_count(p);
}

/* ---- several tokens a dispatch ------------------------------------------------ */

/* the tokens of the run at t0 of a small batch of n: runs of multi_nt */
static uint32_t multi_run(const gpu_model *gm, uint32_t n, uint32_t t0)
{
    return n - t0 < gm->multi_nt ? n - t0 : gm->multi_nt;
}

/* A several-token matvec over the pass's tokens in runs of multi_nt, each by
 * the set that fits it: token t's x at x_off + t * act_stride(cols), its y
 * row y_stride further each (GLU: y_off counts twice), QKV as the args say. */
static glesllm_status record_multi(gpu_pass *p, const gpu_linear *l, const gpu_buffer *y,
                                   uint64_t x_off, uint64_t y_off, uint64_t y_stride,
                                   const matvec_args *base)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint64_t q_stride = act_stride((uint64_t)hp->n_head * hp->head_dim);
    const matvec_kernel *big = l->vk[gm->n_sets - 1];
    bool glu = big->var.epilogue == MATVEC_GLU, qkv = big->var.epilogue == MATVEC_QKV;
    glesllm_status st = GLESLLM_OK;
    for (uint32_t t0 = 0; st == GLESLLM_OK && t0 < p->n; t0 += gm->multi_nt) {
        matvec_args a = *base;
        a.n_tok = multi_run(gm, p->n, t0);
        const matvec_kernel *k = l->vk[gm_multi_set(gm, a.n_tok)];
        a.y_stride = y_stride;
        a.xp_off = gm->bxp;
        if (qkv && base->seq_tab) { /* (the entries give each token's row and slot) */
            a.seq_tab = base->seq_tab + t0;
            a.q_off += t0 * q_stride;
        } else if (qkv) { /* (a run of positions: base.kv_run) */
            a.rope_off += (uint64_t)t0 * hp->head_dim;
            a.kv_first += t0;
            a.q_off += t0 * q_stride;
        }
        uint64_t yo = qkv ? y_off : y_off + (glu ? 2 : 1) * t0 * y_stride;
        st = matvec_record_args(gm->q, k, &l->w, &gm->act, x_off + t0 * act_stride(l->w.cols), y,
                                yo, &a);
    }
    return st;
}

/* A prefill matmul with the model's buffer for the f16 tiles' token tiles. */
static glesllm_status chunk_matmul(gpu_model *gm, const gpu_linear *l, const gpu_buffer *y,
                                   matmul_args a)
{
    a.xt = &gm->xt;
    a.slices = gm->slices.part ? &gm->slices : NULL;
    return matmul_record(gm->q, l->mk, &l->w, &gm->act, y, &a);
}

/* Products of few row blocks in slices (ops/matmul.h matmul_slices), where
 * the GPU takes them: room for 2 slices of a whole chunk of the model's
 * width (a short prompt's the most, 8), made once. */
static glesllm_status make_slices(gpu_model *gm)
{
    uint32_t groups = matmul_slices_groups(gm->ctx, &gm->tune);
    if (gm->slices.part || !groups)
        return GLESLLM_OK;
    uint64_t bytes = 2ull * gm->n_batch * gm->m->hp.n_embd * 4;
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    glesllm_status st = matmul_slices_build(gm->ctx, &gm->slices);
    if (!st)
        st = gpu_buffer_create(gm->ctx, (size_t)(bytes < limit ? bytes : limit), NULL,
                               GPU_BUFFER_DEVICE, "matmul slices", &gm->slices_part);
    if (st) {
        matmul_slices_destroy(&gm->slices);
        return st;
    }
    gm->slices.part = &gm->slices_part;
    gm->slices.groups = groups;
    return GLESLLM_OK;
}

/* The buffer of the tokens' tiles the f16-tile matmuls read: a chunk's x for
 * the widest input (n_embd, n_head x head_dim, n_ff or the shared expert's),
 * made once. */
static glesllm_status make_xt(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t cols = hp->n_embd > hp->ssm_d_inner ? hp->n_embd : hp->ssm_d_inner;
    if ((uint64_t)hp->n_head * hp->head_dim > cols)
        cols = (uint64_t)hp->n_head * hp->head_dim;
    if (hp->n_ff > cols)
        cols = hp->n_ff;
    if (hp->n_ff_shexp > cols)
        cols = hp->n_ff_shexp;
    uint64_t bytes = matmul_xt_bytes(&gm->mcfg, gm->n_batch, cols);
    /* the experts' tiles: each expert's entries in whole tiles */
    uint64_t ecols = hp->n_ff_exp > hp->n_embd ? hp->n_ff_exp : hp->n_embd;
    uint64_t eb = hp->n_expert ? moe_xt_bytes(&gm->mcfg, hp->n_expert,
                                              (uint64_t)gm->n_batch * hp->n_expert_used, ecols)
                               : 0;
    if (eb > bytes)
        bytes = eb;
    glesllm_status st = make_slices(gm);
    if (st || gm->xt.id || !bytes)
        return st;
    if (bytes > gpu_context_limits(gm->ctx)->max_storage_block_bytes)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "prefill: the matmul's token tiles for a batch of %u tokens (%llu bytes) "
                       "exceed the GPU's storage-block limit (%llu bytes); use a smaller batch",
                       gm->n_batch, (unsigned long long)bytes,
                       (unsigned long long)gpu_context_limits(gm->ctx)->max_storage_block_bytes);
    return gpu_buffer_create(gm->ctx, (size_t)bytes, NULL, GPU_BUFFER_DEVICE, "matmul token tiles",
                             &gm->xt);
}

/* ---- the ops ---------------------------------------------------------------------- */

/* The sets of the runs of a small batch of n tokens, each built on its
 * first use. */
static glesllm_status build_run_sets(gpu_model *gm, uint32_t n)
{
    glesllm_status st = GLESLLM_OK;
    for (uint32_t t0 = 0; st == GLESLLM_OK && t0 < n; t0 += gm->multi_nt)
        st = gm_build_multi_set(gm, gm_multi_set(gm, multi_run(gm, n, t0)));
    return st;
}

glesllm_status pass_embed(gpu_pass *p)
{
    gpu_model *gm = p->gm;
    uint64_t emb = act_stride(hparams(p)->n_embd);
    glesllm_status st = GLESLLM_OK;
    if (p->kind == PASS_SMALL) { /* each run's set, built on its first use (the logits' too) */
        st = build_run_sets(gm, p->n);
        if (!st && p->seq_tab)
            st = build_run_sets(gm, p->n_logits);
    } else if (p->kind == PASS_CHUNK)
        st = make_xt(gm);
    if (st)
        return st;
    p->wrote_x = NULL;
    uint32_t slot = p->seq_tab ? gm->tok_scratch : gm_tok_base(gm) + p->pos0;
    return get_rows_record(gm->q, &gm->embed, &gm->tok_embd, &gm->tokens, slot, p->n, &gm->act,
                           p->kind == PASS_STEP ? gm->x : gm->bx, emb, hparams(p)->embd_scale);
}

glesllm_status pass_norm(gpu_pass *p, uint64_t weight)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint32_t stride = (uint32_t)act_stride(hp->n_embd);
    p->norm = weight;
    if (hp->rwkv) /* (no matvec folds a LayerNorm in) */
        return p->kind == PASS_STEP ? step_norm_row(p, weight, gm->x)
                                    : layer_norm_rows(p, weight, gm->bx, gm->bxn, p->n);
    switch (p->kind) {
    case PASS_STEP:
        if (gm->fuse_norm && p->wrote_x) /* it wrote xn and the partial sums too (norm_out) */
            return GLESLLM_OK;
        return step_norm_row(p, weight, gm->x);
    case PASS_SMALL: /* the next matvec folds it in */
        return GLESLLM_OK;
    case PASS_CHUNK:
        return norm_record_rms(gm->q, &gm->norm, &gm->act, hp->n_embd, hp->eps, stride, weight,
                               gm->bx, gm->bxn, p->n);
    }
    return GLESLLM_OK;
}

/* The uint of a layer's cache that row g of the fused Q/K/V matrix writes in
 * a decode step (matvec.comp put_pair: Q to the scratch at 0, K and V to this
 * position's rows at a's k_off and v_off), and a segment's rows [r0, r1) as
 * one span in a's y_lo, y_hi: segments of other types (Q4_K_M's Q6_K V)
 * write apart, so the queue puts no barrier between them. */
static uint64_t qkv_uint(const model_hparams *hp, const matvec_args *a, uint64_t g)
{
    uint64_t q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    return g < q ? g : g < q + kv ? a->k_off + (g - q) / 2 : a->v_off + (g - q - kv) / 2;
}

/* Whether segment i of Q|K|V reads the token tiles segment 0 made (the
 * segments share x: its tiles made once where their kernels tile alike). */
static bool tiles_made(const gpu_layer *l, uint32_t i)
{
    const matmul_config *c0 = &l->qkv[0].l.mk->cfg, *ci = &l->qkv[i].l.mk->cfg;
    return i > 0 && c0->f16 && ci->f16 && c0->wg == ci->wg && c0->tn == ci->tn;
}

/* Q, K and V of a model with a Q/K norm: the projections' rows stored (the
 * input's norm taken as each pass kind takes it), then the Q/K norm with
 * RoPE puts them where the attention reads them. */
static glesllm_status qkv_normed(gpu_pass *p, const gpu_layer *l, uint64_t rope, uint64_t k_off,
                                 uint64_t v_off, uint32_t kv_first)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint32_t q_dim = hp->n_head * hp->head_dim;
    uint64_t row = act_stride(q_dim + 2ull * hp->n_head_kv * hp->head_dim);
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; st == GLESLLM_OK && i < l->n_qkv; i++) {
        const segment *s = &l->qkv[i];
        uint64_t y = gm->bqkv + s->row_base;
        if (p->kind == PASS_STEP) {
            matvec_args a = step_norm_args(p);
            st = matvec_record_args(gm->q, s->l.k, &s->l.w, &gm->act, gm->xn, &gm->act, y, &a);
        } else if (p->kind == PASS_SMALL) {
            matvec_args a = { .norm_off = p->norm, .eps = hp->eps };
            step_norm_split(p, &a);
            st = record_multi(p, &s->l, &gm->act, gm->bx, y, row, &a);
        } else {
            matmul_args a = { .n_tok = p->n, .x_off = gm->bxn, .y_off = y, .y_stride = row,
                              .xt_made = tiles_made(l, i) };
            st = chunk_matmul(gm, &s->l, &gm->act, a);
        }
    }
    qk_norm_args a = { .n_tok = p->n, .eps = hp->eps, .raw_off = gm->bqkv, .raw_stride = row,
                       .q_weight = l->q_norm, .k_weight = l->k_norm, .rope_off = rope,
                       .q_off = gm->bq, .q_stride = act_stride(q_dim),
                       .q_to_cache = p->kind == PASS_STEP, .k_off = k_off, .v_off = v_off,
                       .seq_tab = layer_tab(p, l),
                       .kv_run = p->kind != PASS_STEP && !p->seq_tab, .kv_first = kv_first };
    return st ? st : norm_record_qk(gm->q, &gm->qk, &gm->act, &l->cache, &a);
}

glesllm_status pass_qkv(gpu_pass *p, const gpu_layer *l)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    /* (a batch over sequences: the RoPE table from its start, each token's
     * entry giving its row and its cache row) */
    uint64_t rope = l->rope + (p->seq_tab ? 0 : p->pos0) * hp->head_dim;
    /* K and V: a step's row found here; else, with the cache's start, the
     * rows through the page table, by each token's entry or from the run's
     * first (ops/kv_layout.h) */
    uint64_t k_off = gm->k_base, v_off = l->v_base;
    uint32_t row = layer_row(p, l);
    if (p->kind == PASS_STEP) {
        uint64_t r = gm_kv_row(gm, row, p->pos0) * kv_half(hp);
        k_off += r;
        v_off += r;
    }
    uint32_t first = row << 24 | p->pos0;
    glesllm_status st = GLESLLM_OK;
    if (hp->qk_norm != MODEL_QK_NONE)
        return qkv_normed(p, l, rope, k_off, v_off, first);
    if (p->kind == PASS_STEP) {
        matvec_args a = step_norm_args(p);
        a.rope_off = rope;
        a.bias_off = l->bias;
        a.k_off = k_off;
        a.v_off = v_off;
        for (uint32_t i = 0; st == GLESLLM_OK && i < l->n_qkv; i++) {
            const segment *s = &l->qkv[i];
            a.y_lo = qkv_uint(hp, &a, s->row_base);
            a.y_hi = qkv_uint(hp, &a, s->row_base + s->l.w.rows - 1) + 1;
            st = matvec_record_args(gm->q, s->l.k, &s->l.w, &gm->act, gm->xn, &l->cache,
                                    s->row_base, &a);
        }
    } else if (p->kind == PASS_SMALL) {
        matvec_args a = { .norm_off = p->norm, .eps = hp->eps, .rope_off = rope,
                           .bias_off = l->bias, .k_off = k_off, .v_off = v_off, .q_off = gm->bq,
                           .seq_tab = layer_tab(p, l), .kv_run = !p->seq_tab,
                           .kv_first = first };
        step_norm_split(p, &a);
        for (uint32_t i = 0; st == GLESLLM_OK && i < l->n_qkv; i++)
            st = record_multi(p, &l->qkv[i].l, &l->cache, gm->bx, l->qkv[i].row_base, 0, &a);
    } else {
        uint32_t q_dim = hp->n_head * hp->head_dim;
        for (uint32_t i = 0; st == GLESLLM_OK && i < l->n_qkv; i++) {
            matmul_args a = { .n_tok = p->n, .x_off = gm->bxn, .y_off = gm->bq,
                              .y_stride = act_stride(q_dim), .row_base = l->qkv[i].row_base,
                              .rope_off = rope, .bias_off = l->bias, .k_off = k_off,
                              .v_off = v_off, .kv_first = first, .xt_made = tiles_made(l, i) };
            st = chunk_matmul(gm, &l->qkv[i].l, &l->cache, a);
        }
    }
    return st;
}

glesllm_status pass_attention(gpu_pass *p, const gpu_layer *l)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    attn_io io = attention_io(p, l);
    if (p->kind == PASS_STEP)
        return attn_record_step(gm->q, &gm->attn, &io, p->pos0 + 1, l->window, gm->attn_out);
    uint32_t q_stride = (uint32_t)act_stride((uint64_t)hp->n_head * hp->head_dim);
    if (p->seq_tab)
        return attn_record_seqs(gm->q, &gm->attn, &io, layer_tab(p, l), p->n, l->window,
                                gm->bq, gm->battn, q_stride);
    return attn_record_batch(gm->q, &gm->attn, &io, p->pos0, p->n, l->window,
                             p->n <= gm_few_limit(gm, p->flags), gm->bq, gm->battn, q_stride);
}

/* A linear (y = W x) over the pass's tokens, as each kind of pass runs it:
 * rows of act at x_off (act_stride(cols) apart) to rows at y_off, y_stride
 * apart; normed: x is the residual stream, the pending norm taken as each
 * kind takes it. */
static glesllm_status pass_linear(gpu_pass *p, const gpu_linear *l, bool normed, uint64_t x_off,
                                  uint64_t y_off, uint64_t y_stride)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    /* (not normed: x's and y's rows only, so that such linears of one input
     * each, RWKV's, run without barriers between them; what follows them in
     * every graph binds the rows they read whole, and waits) */
    if (p->kind == PASS_STEP) {
        matvec_args a = { .narrow = true };
        if (normed)
            a = step_norm_args(p);
        return matvec_record_args(gm->q, l->k, &l->w, &gm->act, normed ? gm->xn : x_off, &gm->act,
                                  y_off, &a);
    }
    if (p->kind == PASS_SMALL) {
        matvec_args a = { .narrow = true };
        if (normed) {
            a.norm_off = p->norm;
            a.eps = hp->eps;
            step_norm_split(p, &a);
        }
        return record_multi(p, l, &gm->act, normed ? gm->bx : x_off, y_off, y_stride, &a);
    }
    matmul_args a = { .n_tok = p->n, .x_off = normed ? gm->bxn : x_off, .y_off = y_off,
                      .y_stride = y_stride };
    return chunk_matmul(gm, l, &gm->act, a);
}

/* The rows an input of pass_residual lies in for the pass's kind. */
static uint64_t input_rows(const gpu_pass *p, pass_input in)
{
    const gpu_model *gm = p->gm;
    bool step = p->kind == PASS_STEP;
    return in == PASS_SSM_OUT    ? gm->ssm_y
           : in == PASS_RWKV_Y   ? gm->rw_y
           : in == PASS_RWKV_HID ? gm->rw_hid
           : in == PASS_ATTN_OUT ? (step ? gm->attn_out : gm->battn)
                                 : (step ? gm->hidden : gm->bhid);
}

glesllm_status pass_residual(gpu_pass *p, const gpu_linear *w, pass_input in, uint64_t next_norm)
{
    gpu_model *gm = p->gm;
    uint64_t emb = act_stride(hparams(p)->n_embd);
    glesllm_status st;
    uint64_t x_in = input_rows(p, in);
    if (p->kind == PASS_STEP) {
        /* with the split norm it also writes xn = x * next_norm and the
         * partial sums of squares of x (norm_out) */
        matvec_args o = { .norm_off = next_norm };
        o.xg_off = gm->xn;
        o.sq_off = gm->sq;
        st = matvec_record_args(gm->q, w->k, &w->w, &gm->act, x_in, &gm->act, gm->x, &o);
    } else if (p->kind == PASS_SMALL) {
        matvec_args none = { 0 };
        st = record_multi(p, w, &gm->act, x_in, gm->bx, emb, &none);
    } else {
        matmul_args a = { .n_tok = p->n, .x_off = x_in, .y_off = gm->bx, .y_stride = emb };
        st = chunk_matmul(gm, w, &gm->act, a);
    }
    p->wrote_x = w;
    return st;
}

glesllm_status pass_residual_normed(gpu_pass *p, const gpu_linear *w, pass_input in, uint64_t post)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint64_t emb = act_stride(hp->n_embd);
    bool step = p->kind == PASS_STEP;
    glesllm_status st = pass_linear(p, w, false, input_rows(p, in), gm->post, emb);
    p->wrote_x = NULL; /* (the next norm from x alone: no split) */
    return st ? st
              : norm_record_rms_add(gm->q, &gm->norm, &gm->act, hp->n_embd, hp->eps, (uint32_t)emb,
                                    post, gm->post, step ? gm->x : gm->bx, step ? 1 : p->n);
}

glesllm_status pass_glu(gpu_pass *p, const gpu_linear *w)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    if (p->kind == PASS_STEP) {
        matvec_args a = step_norm_args(p);
        return matvec_record_args(gm->q, w->k, &w->w, &gm->act, gm->xn, &gm->act, 2 * gm->hidden,
                                  &a);
    }
    if (p->kind == PASS_SMALL) {
        matvec_args a = { .norm_off = p->norm, .eps = hp->eps };
        step_norm_split(p, &a);
        return record_multi(p, w, &gm->act, gm->bx, 2 * gm->bhid, act_stride(hp->n_ff), &a);
    }
    matmul_args a = { .n_tok = p->n, .x_off = gm->bxn, .y_off = gm->bhid,
                       .y_stride = act_stride(hp->n_ff) };
    return chunk_matmul(gm, w, &gm->act, a);
}

glesllm_status pass_prefetch(gpu_pass *p, const gpu_linear *w)
{
    gpu_model *gm = p->gm;
    if (p->kind != PASS_STEP || !gm->prefetch_down)
        return GLESLLM_OK;
    return prefetch_record(gm->q, &gm->prefetch, &w->w, gm->prefetch_bytes);
}

glesllm_status pass_prefetch_qkv(gpu_pass *p, const gpu_layer *l, const gpu_layer *next)
{
    gpu_model *gm = p->gm;
    if (p->kind != PASS_STEP || !gm->prefetch_down || !gm->prefetch_qkv || l->moe)
        return GLESLLM_OK;
    return prefetch_record(gm->q, &gm->prefetch, &next->qkv[0].l.w, gm->prefetch_qkv);
}

/* A prefill chunk's experts once routed: the entries grouped by expert,
 * each expert's tokens through its matmul once (ops/moe.h), the shared
 * expert as any chunk's FFN. */
static glesllm_status chunk_experts(gpu_pass *p, const gpu_layer *l)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint32_t n = p->n, k = hp->n_expert_used;
    const gpu_buffer *act = &gm->act;
    uint32_t tile = matmul_tile_tokens(&l->eglu.mk->cfg);
    moe_group_args ga = { hp->n_expert, k, n, tile, gm->moe_route, gm->moe_group, gm->moe_list };
    glesllm_status st = moe_record_group(gm->q, &gm->moe, act, &ga);
    moe_matmul_args g = { .n_expert = hp->n_expert, .n_tok = n, .k = k, .x_div = k,
                          .x_off = gm->bxn, .y_off = gm->moe_hid,
                          .y_stride = act_stride(hp->n_ff_exp), .expert_rows = 2ull * hp->n_ff_exp,
                          .route_off = gm->moe_route, .group_off = gm->moe_group,
                          .list_off = gm->moe_list, .tile = tile, .xt = &gm->xt };
    moe_matmul_args d = g;
    d.x_div = 1;
    d.x_off = gm->moe_hid;
    d.y_off = gm->moe_out;
    d.y_stride = act_stride(hp->n_embd);
    d.expert_rows = hp->n_embd;
    d.scale = true;
    if (!st)
        st = moe_record_matmul(gm->q, l->eglu.mk, &l->eglu.w, act, &g);
    if (!st)
        st = moe_record_matmul(gm->q, l->edown.mk, &l->edown.w, act, &d);
    if (!st && hp->n_ff_shexp) {
        matmul_args sg = { .n_tok = n, .x_off = gm->bxn, .y_off = gm->moe_shid,
                           .y_stride = act_stride(hp->n_ff_shexp) };
        matmul_args sd = { .n_tok = n, .x_off = gm->moe_shid, .y_off = gm->moe_shared,
                           .y_stride = act_stride(hp->n_embd) };
        st = chunk_matmul(gm, &l->sglu, act, sg);
        if (!st)
            st = chunk_matmul(gm, &l->sdown, act, sd);
    }
    return st;
}

/* A step's or a small batch's experts once routed: a matvec layer a (token,
 * slot), each reading only its expert's rows; the shared expert a matvec a
 * token. */
static glesllm_status token_experts(gpu_pass *p, const gpu_layer *l, uint32_t n, uint64_t xn)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint32_t k = hp->n_expert_used;
    uint64_t emb = act_stride(hp->n_embd);
    gpu_queue *q = gm->q;
    const gpu_buffer *act = &gm->act;
    /* hidden = silu(gate xn) * (up xn) a (token, slot), then its down times
     * the expert's weight */
    moe_matvec_args g = { .n_z = n * k, .x_div = k, .x_stride = emb,
                          .y_stride = act_stride(hp->n_ff_exp), .select = true,
                          .expert_rows = 2ull * hp->n_ff_exp, .route_off = gm->moe_route };
    glesllm_status st =
        moe_record_matvec(q, l->eglu.k, &l->eglu.w, act, xn, act, 2 * gm->moe_hid, &g);
    moe_matvec_args d = { .n_z = n * k, .x_div = 1, .x_stride = act_stride(hp->n_ff_exp),
                          .y_stride = emb, .select = true, .scale = true,
                          .expert_rows = hp->n_embd, .route_off = gm->moe_route };
    if (!st)
        st = moe_record_matvec(q, l->edown.k, &l->edown.w, act, gm->moe_hid, act, gm->moe_out, &d);
    if (!st && hp->n_ff_shexp) {
        moe_matvec_args sg = { .n_z = n, .x_div = 1, .x_stride = emb,
                               .y_stride = act_stride(hp->n_ff_shexp) };
        moe_matvec_args sd = { .n_z = n, .x_div = 1, .x_stride = act_stride(hp->n_ff_shexp),
                               .y_stride = emb };
        st = moe_record_matvec(q, l->sglu.k, &l->sglu.w, act, xn, act, 2 * gm->moe_shid, &sg);
        if (!st)
            st = moe_record_matvec(q, l->sdown.k, &l->sdown.w, act, gm->moe_shid, act,
                                   gm->moe_shared, &sd);
    }
    return st;
}

glesllm_status pass_moe(gpu_pass *p, const gpu_layer *l)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    bool step = p->kind == PASS_STEP;
    uint32_t n = step ? 1 : p->n, k = hp->n_expert_used;
    uint64_t emb = act_stride(hp->n_embd), x = step ? gm->x : gm->bx, xn = step ? gm->xn : gm->bxn;
    gpu_queue *q = gm->q;
    const gpu_buffer *act = &gm->act;
    p->wrote_x = NULL; /* (the next norm from x alone: no partial sums of it) */
    glesllm_status st = norm_record_rms(q, &gm->norm, act, hp->n_embd, hp->eps, (uint32_t)emb,
                                        l->ffn_norm, x, xn, n);
    /* the router's logits, and each token's experts and weights; the router
     * and the shared expert's gate (a few rows, where a matmul's row tiles
     * would stay nearly empty) a matvec a token in every pass */
    moe_matvec_args r = { .n_z = n, .x_div = 1, .x_stride = emb,
                          .y_stride = act_stride(hp->n_expert) };
    if (!st)
        st = moe_record_matvec(q, l->router.k, &l->router.w, act, xn, act, gm->moe_logits, &r);
    moe_route_args ra = { hp->n_expert, k, n, hp->expert_norm, hp->expert_scale, gm->moe_logits,
                          act_stride(hp->n_expert), gm->moe_route };
    if (!st)
        st = moe_record_route(q, &gm->moe, act, &ra);
    if (!st)
        st = p->kind == PASS_CHUNK ? chunk_experts(p, l) : token_experts(p, l, n, xn);
    bool shared = hp->n_ff_shexp > 0;
    moe_matvec_args gt = { .n_z = n, .x_div = 1, .x_stride = emb, .y_stride = 1 };
    if (!st && shared)
        st = moe_record_matvec(q, l->sgate.k, &l->sgate.w, act, xn, act, gm->moe_sgate, &gt);
    moe_combine_args c = { hp->n_embd, k, n, x, emb, gm->moe_out, emb, shared, gm->moe_shared,
                           gm->moe_sgate };
    return st ? st : moe_record_combine(q, &gm->moe, act, &c);
}

glesllm_status pass_ssm(gpu_pass *p, const gpu_layer *l)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint32_t di = hp->ssm_d_inner, n = p->n;
    uint64_t xz = act_stride(ssm_in_width(hp)), row = act_stride(di);
    uint64_t dbc = act_stride(hp->ssm_dt_rank + 2ull * hp->ssm_d_state);
    /* x | z = Win RMSNorm(x) * attn_norm */
    glesllm_status st = pass_linear(p, &l->ssm_in, true, 0, gm->ssm_xz, xz);
    ssm_io io = { &l->ssm_par, &gm->act, &l->ssm_state, gm->ssm_xz, xz, gm->ssm_xc, row,
                  gm->ssm_dbc, dbc, gm->ssm_xz + di, xz, gm->ssm_y, row, gm->ssm_cum,
                  gm->ssm_carry, p->src * gm->slot.floats, p->dst * gm->slot.floats, p->zero,
                  hp->eps, gm->ssm_gram };
    if (hp->ssm_mamba2) {
        /* Mamba-2: z | x B C | steps = Win xn; x B C convolved; the scan
         * (its steps from in); the grouped norm of the gated output */
        uint64_t cw = ssm_conv_channels(hp);
        io.x = gm->ssm_xz + di;
        io.xc_stride = act_stride(cw);
        io.dbc = gm->ssm_xz + di + cw;
        io.dbc_stride = xz;
        io.z = gm->ssm_xz;
        if (!st)
            st = ssm_record_conv(gm->q, &gm->ssm, &io, n);
        if (!st)
            st = ssm_record_scan(gm->q, &gm->ssm, &io, n);
        return st ? st : ssm_record_norm(gm->q, &gm->ssm, &io, n);
    }
    /* xc = silu(conv(x) + b), the last inputs kept */
    if (!st)
        st = ssm_record_conv(gm->q, &gm->ssm, &io, n);
    /* dt | B | C = Wx xc */
    if (!st)
        st = pass_linear(p, &l->ssm_x, false, gm->ssm_xc, gm->ssm_dbc, dbc);
    /* y = (scan(xc; dt, A, B, C) + D xc) * silu(z), the state kept */
    return st ? st : ssm_record_scan(gm->q, &gm->ssm, &io, n);
}

glesllm_status pass_ffn(gpu_pass *p, const gpu_layer *l, uint64_t next_norm)
{
    glesllm_status st;
    if (l->moe)
        return pass_moe(p, l);
    /* xn = RMSNorm(x) * ffn_norm; hidden = silu(Wgate xn) * (Wup xn) */
    if ((st = pass_norm(p, l->ffn_norm)) || (st = pass_glu(p, &l->glu)))
        return st;
    /* (Wdown read into the GPU's cache beside the matvec before, where that pays) */
    if ((st = pass_prefetch(p, &l->down)))
        return st;
    /* x += Wdown hidden */
    return pass_residual(p, &l->down, PASS_HIDDEN, next_norm);
}

/* ---- RWKV-7 ------------------------------------------------------------------------- */

/* Where an RWKV pass's rows lie (ops/rwkv.h) */
static rwkv_io rwkv_io_of(const gpu_pass *p, const gpu_layer *l)
{
    const gpu_model *gm = p->gm;
    rwkv_io io = { &l->ssm_par, &gm->act, &l->ssm_state, act_stride(hparams(p)->n_embd),
                   p->kind == PASS_STEP ? gm->x : gm->bx,
                   gm->rw_mix, gm->rw_block, gm->rw_r, gm->rw_k, gm->rw_v, gm->rw_first, gm->rw_y,
                   gm->rw_g, gm->rw_lw, gm->rw_la, gm->rw_lv, gm->rw_chunks,
                   p->src * gm->slot.floats, p->dst * gm->slot.floats, p->zero,
                   hparams(p)->eps };
    return io;
}

glesllm_status pass_rwkv_embed_norm(gpu_pass *p)
{
    gpu_model *gm = p->gm;
    uint64_t x = p->kind == PASS_STEP ? gm->x : gm->bx;
    return layer_norm_rows(p, gm->rw_tok_norm, x, x, p->n);
}

glesllm_status pass_rwkv_time(gpu_pass *p, const gpu_layer *l, bool first)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    rwkv_io io = rwkv_io_of(p, l);
    uint64_t emb = io.stride, mix = io.mix, blk = io.block;
    /* the norm and the six token-shift mixes r w k v a g */
    glesllm_status st = rwkv_record_shift(gm->q, &gm->rwkv, &io, false, p->n);
    /* r, k, v and the low-rank paths' first matrices, each from its mix */
    const struct {
        const gpu_linear *l;
        uint64_t x, y, stride;
    } first_ops[] = {
        { &l->rw_r, mix, io.r, emb },
        { &l->rw_k, mix + 2 * blk, io.k, emb },
        { &l->rw_v, mix + 3 * blk, io.v, emb },
        { &l->rw_w1, mix + blk, gm->rw_mw, act_stride(hp->rwkv_lora_w) },
        { &l->rw_a1, mix + 4 * blk, gm->rw_ma, act_stride(hp->rwkv_lora_a) },
        { first ? NULL : &l->rw_v1, mix + 3 * blk, gm->rw_mv, act_stride(hp->rwkv_lora_v) },
        { &l->rw_g1, mix + 5 * blk, gm->rw_mg, act_stride(hp->rwkv_lora_g) },
    };
    for (size_t i = 0; !st && i < sizeof first_ops / sizeof first_ops[0]; i++)
        if (first_ops[i].l)
            st = pass_linear(p, first_ops[i].l, false, first_ops[i].x, first_ops[i].y,
                             first_ops[i].stride);
    /* tanh of the decay's middle, sigmoid of the gate's; the second matrices */
    rwkv_act_range tw = { gm->rw_mw, act_stride(hp->rwkv_lora_w), hp->rwkv_lora_w, 1 };
    rwkv_act_range sg = { gm->rw_mg, act_stride(hp->rwkv_lora_g), hp->rwkv_lora_g, 2 };
    if (!st)
        st = rwkv_record_act(gm->q, &gm->rwkv, &gm->act, &tw, &sg, p->n);
    const struct {
        const gpu_linear *l;
        uint64_t x;
        uint64_t y;
    } second_ops[] = { { &l->rw_w2, gm->rw_mw, io.lw },
                       { &l->rw_a2, gm->rw_ma, io.la },
                       { first ? NULL : &l->rw_v2, gm->rw_mv, io.lv },
                       { &l->rw_g2, gm->rw_mg, io.g } };
    for (size_t i = 0; !st && i < sizeof second_ops / sizeof second_ops[0]; i++)
        if (second_ops[i].l)
            st = pass_linear(p, second_ops[i].l, false, second_ops[i].x, second_ops[i].y, emb);
    /* the update's inputs, the state through the tokens, the head norm,
     * bonus and gate; x += Wo y */
    if (!st)
        st = rwkv_record_mix(gm->q, &gm->rwkv, &io, first, p->n);
    return st ? st : pass_residual(p, &l->wo, PASS_RWKV_Y, 0);
}

glesllm_status pass_rwkv_channel(gpu_pass *p, const gpu_layer *l)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    rwkv_io io = rwkv_io_of(p, l);
    /* the norm and its token-shift mix; x += Wvalue relu(Wkey mix)^2 */
    glesllm_status st = rwkv_record_shift(gm->q, &gm->rwkv, &io, true, p->n);
    rwkv_act_range sq = { gm->rw_hid, act_stride(hp->n_ff), hp->n_ff, 3 };
    if (!st)
        st = pass_linear(p, &l->rw_ck, false, io.mix, gm->rw_hid, act_stride(hp->n_ff));
    if (!st)
        st = rwkv_record_act(gm->q, &gm->rwkv, &gm->act, &sq, NULL, p->n);
    return st ? st : pass_residual(p, &l->down, PASS_RWKV_HID, 0);
}

/* ---- the output head ----------------------------------------------------------------- */

static glesllm_status record_argmax_rows(gpu_model *gm, uint64_t logits, uint32_t rows,
                                         uint32_t slot)
{
    uint32_t nv = gm->m->hp.n_vocab;
    return sample_record_argmax(gm->q, &gm->sample, &gm->act, &gm->tokens, nv, logits,
                                (uint32_t)act_stride(nv), rows, gm->argmax_part, slot);
}

static glesllm_status record_candidates(gpu_model *gm, uint32_t pos)
{
    uint32_t nv = gm->m->hp.n_vocab;
    uint32_t window = gm->pen_last_n < pos + 1 ? gm->pen_last_n : pos + 1;
    glesllm_status st = GLESLLM_OK;
    if (gm->pen != 1.0f && window)
        st = sample_record_penalty(gm->q, &gm->sample, &gm->act, &gm->tokens, nv, gm->logits,
                                   gm_tok_base(gm) + pos + 1 - window, window, gm->pen);
    if (!st)
        st = sample_record_topk(gm->q, &gm->sample, &gm->act, &gm->cand, nv, gm->logits,
                                gm->lists, gm->cand_k);
    return st;
}

/* The argmax of the logits (into slot `slot`) or the candidates of the token
 * at `pos`, as the flags ask. */
static glesllm_status record_pick(gpu_model *gm, unsigned flags, uint32_t pos)
{
    if (flags & GPU_STEP_ARGMAX)
        return record_argmax_rows(gm, gm->logits, 1, gm_tok_base(gm) + pos + 1);
    if (flags & GPU_STEP_CANDIDATES)
        return record_candidates(gm, pos);
    return GLESLLM_OK;
}

/* rows of logits at off of buf soft-capped where the model caps them
 * (Gemma 2's final cap), before anything reads them */
static glesllm_status cap_logits(gpu_model *gm, const gpu_buffer *buf, uint64_t off,
                                 uint32_t rows)
{
    const model_hparams *hp = &gm->m->hp;
    if (!(hp->final_softcap > 0.0f))
        return GLESLLM_OK;
    return sample_record_softcap(gm->q, &gm->sample, buf, hp->n_vocab, off,
                                 act_stride(hp->n_vocab), rows, hp->final_softcap);
}

/* What `flags` asks for the last of a batch's tokens: its logits as a decode
 * step makes them (so that they are the step's to the bit), and their argmax
 * or candidates. */
static glesllm_status record_last_logits(gpu_pass *p, uint64_t out_norm)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    if (!(p->flags & (GPU_STEP_LOGITS | GPU_STEP_ARGMAX | GPU_STEP_CANDIDATES)))
        return GLESLLM_OK;
    uint64_t row = gm->bx + (uint64_t)(p->n - 1) * act_stride(hp->n_embd);
    matvec_args a = { .norm_off = out_norm, .eps = hp->eps };
    if (gm->fuse_norm) { /* rms_prep's sums, from the row below */
        a.sq_off = gm->sq;
        a.sq_count = prep_sums(hp);
    }
    glesllm_status st = step_norm_row(p, out_norm, row);
    if (!st)
        st = matvec_record_args(gm->q, gm->out.k, gm->output, &gm->act, gm->xn, &gm->act,
                                gm->logits, &a);
    if (!st)
        st = cap_logits(gm, &gm->act, gm->logits, 1);
    return st ? st : record_pick(gm, p->flags, p->pos0 + p->n - 1);
}

glesllm_status pass_logits(gpu_pass *p, uint64_t out_norm)
{
    gpu_model *gm = p->gm;
    const model_hparams *hp = hparams(p);
    uint64_t vs = act_stride(hp->n_vocab);
    glesllm_status st = GLESLLM_OK;
    switch (p->kind) {
    case PASS_STEP:
        if (p->flags) {
            st = pass_norm(p, out_norm);
            matvec_args a = step_norm_args(p);
            if (!st)
                st = matvec_record_args(gm->q, gm->out.k, gm->output, &gm->act, gm->xn, &gm->act,
                                        gm->logits, &a);
            if (!st)
                st = cap_logits(gm, &gm->act, gm->logits, 1);
        }
        return st ? st : record_pick(gm, p->flags, p->pos0);
    case PASS_SMALL:
        if (p->flags & (GPU_STEP_ALL_LOGITS | GPU_STEP_ARGMAX_ALL)) {
            /* (a batch over sequences: the first n_logits rows, each
             * sequence's last token) */
            gpu_pass lp = *p;
            lp.n = p->seq_tab ? p->n_logits : p->n;
            matvec_args a = { .norm_off = out_norm, .eps = hp->eps };
            step_norm_split(&lp, &a);
            if (hp->rwkv) { /* (the norm its own dispatch) */
                st = pass_norm(&lp, out_norm);
                if (!st)
                    st = record_multi(&lp, &gm->out, &gm->act, gm->bxn, gm->vlog, vs,
                                      &(matvec_args){ 0 });
            } else {
                st = record_multi(&lp, &gm->out, &gm->act, gm->bx, gm->vlog, vs, &a);
            }
            if (!st)
                st = cap_logits(gm, &gm->act, gm->vlog, lp.n);
            if (!st && (p->flags & GPU_STEP_ARGMAX_ALL))
                st = record_argmax_rows(gm, gm->vlog, lp.n,
                                        p->seq_tab ? gm->tok_scratch + gm->n_small
                                                   : gm_tok_base(gm) + p->pos0 + 1);
        }
        /* (a batch over sequences: its rows' logits and picks only) */
        return st || p->seq_tab ? st : record_last_logits(p, out_norm);
    case PASS_CHUNK:
        if (p->flags & GPU_STEP_ALL_LOGITS) {
            uint64_t emb = act_stride(hp->n_embd);
            st = pass_norm(p, out_norm);
            for (uint32_t t0 = 0, b = 0; !st && t0 < p->n; t0 += gm->logits_rows, b++) {
                uint32_t cnt = p->n - t0 < gm->logits_rows ? p->n - t0 : gm->logits_rows;
                matmul_args a = { .n_tok = cnt, .x_off = gm->bxn + t0 * emb, .y_stride = vs };
                st = chunk_matmul(gm, &gm->out, &gm->logits_all[b], a);
                if (!st)
                    st = cap_logits(gm, &gm->logits_all[b], 0, cnt);
            }
        }
        return st || !p->last ? st : record_last_logits(p, out_norm);
    }
    return st;
}

/* ---- the passes ----------------------------------------------------------------------- */

glesllm_status gm_check_past(const gpu_model *gm, uint32_t pos)
{
    if (pos > gm->n_past)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "position %u: the cache holds only positions 0..%d; process the ones "
                       "between first", pos, (int)gm->n_past - 1);
    return GLESLLM_OK;
}

static glesllm_status record_prefill(gpu_model *gm, uint32_t pos, uint32_t n, unsigned flags);

glesllm_status gm_kv_window_ready(gpu_model *gm, uint32_t pos)
{
    if (gm_kv_window_held(gm, gm->seq, pos))
        return GLESLLM_OK;
    /* (every layer's K/V at a position depends on the window layers' before
     * it, back to the start: the whole prefix runs again) */
    gm->replayed += pos;
    glesllm_status st = record_prefill(gm, 0, pos, 0);
    return st ? err_prefix(st, "running positions 0..%u again for the sliding-window layers: ",
                           pos - 1)
              : GLESLLM_OK;
}

void gm_drop_slots_after(gpu_model *gm, uint32_t pos)
{
    for (uint32_t i = 0; i < SSM_SLOTS; i++)
        if (gm->slot_ok[i] && gm->slot_pos[i] > pos) {
            gm->slot_ok[i] = false;
            if (gm->anchor == (int)i)
                gm->anchor = -1;
        }
}

glesllm_status gm_ssm_slot_at(gpu_model *gm, uint32_t pos, uint32_t *slot)
{
    for (int tries = 0; tries < 2; tries++) {
        for (uint32_t i = 0; i < SSM_SLOTS; i++)
            if (gm->slot_ok[i] && gm->slot_pos[i] == pos) {
                *slot = i;
                return GLESLLM_OK;
            }
        /* from the latest state before pos, else from the start */
        uint32_t from = 0;
        for (uint32_t i = 0; i < SSM_SLOTS; i++)
            if (gm->slot_ok[i] && gm->slot_pos[i] < pos && gm->slot_pos[i] > from)
                from = gm->slot_pos[i];
        gm->replayed += pos - from;
        glesllm_status st = record_prefill(gm, from, pos - from, 0);
        if (st)
            return err_prefix(st, "running positions %u..%u again for the recurrent state: ",
                              from, pos - 1);
    }
    return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                   "the recurrent state after position %u could not be made", pos);
}

/* The slot a pass from slot src (-1: none) writes: one that holds nothing,
 * else the oldest state, never src or the anchor. */
static uint32_t pick_dst(const gpu_model *gm, int src)
{
    int best = -1;
    for (int i = 0; i < SSM_SLOTS; i++) {
        if (i == src || (i == gm->anchor && gm->slot_ok[i]))
            continue;
        if (!gm->slot_ok[i])
            return (uint32_t)i;
        if (best < 0 || gm->slot_pos[i] < gm->slot_pos[best])
            best = i;
    }
    return (uint32_t)best;
}

/* A pass's slots: it starts from the state after pos0 tokens (none at 0:
 * an empty state) and writes another slot; after a truncation its source
 * becomes the anchor. */
static glesllm_status ssm_slots(gpu_model *gm, gpu_pass *p)
{
    /* (going back without a truncation is one; the passes that make the
     * source again, if any, are not this pass) */
    bool back = gm->anchor_next || p->pos0 < gm->n_past;
    gm->anchor_next = false;
    gm_drop_slots_after(gm, p->pos0);
    p->zero = p->pos0 == 0;
    p->src = 0;
    glesllm_status st = p->zero ? GLESLLM_OK : gm_ssm_slot_at(gm, p->pos0, &p->src);
    if (st)
        return st;
    if (back)
        gm->anchor = p->zero ? -1 : (int)p->src;
    p->dst = pick_dst(gm, p->zero ? -1 : (int)p->src);
    return GLESLLM_OK;
}

/* One pass through the architecture's graph, submitted. */
static glesllm_status run_pass(gpu_model *gm, pass_kind kind, uint32_t pos0, uint32_t n,
                               unsigned flags, bool last)
{
    gpu_pass p = { gm, kind, pos0, n, flags, last };
    bool recurrent = model_hp_recurrent(&gm->m->hp);
    glesllm_status st = recurrent ? ssm_slots(gm, &p) : gm_kv_window_ready(gm, pos0);
    if (!st) /* (the pages its K and V go to) */
        st = gm_kv_take(gm, gm->seq, pos0, n);
    if (!st)
        st = gm->graph(&p);
    if (!st)
        st = gpu_queue_submit(gm->q);
    if (recurrent) { /* (a failed pass leaves its slot unknown) */
        gm->slot_ok[p.dst] = st == GLESLLM_OK;
        gm->slot_pos[p.dst] = pos0 + n;
    }
    return st;
}

glesllm_status gpu_model_step(gpu_model *gm, uint32_t pos, unsigned flags)
{
    if (pos >= gm->n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "position %u is past the context of %u", pos,
                       gm->n_ctx);
    glesllm_status st = gm_check_past(gm, pos);
    if (st)
        return st;
    uint64_t before = gpu_queue_get_stats(gm->q).dispatches;
    st = run_pass(gm, PASS_STEP, pos, 1, flags, true);
    gm->last_dispatches = (uint32_t)(gpu_queue_get_stats(gm->q).dispatches - before);
    if (!st) /* later positions were computed from another token at pos */
        gm->n_past = pos + 1;
    return st;
}

bool gpu_model_batch_ok(const gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    return !model_hp_recurrent(hp) && gm->n_small >= 1;
}

glesllm_status gpu_model_step_batch(gpu_model *gm, uint32_t n, const uint32_t *seqs,
                                    const uint32_t *counts, int32_t *picks)
{
    if (!gpu_model_batch_ok(gm))
        return err_set(GLESLLM_ERR_UNSUPPORTED, "a batch over sequences: not for this model's "
                                                "architecture (recurrent layers)");
    uint64_t total = 0;
    for (uint32_t i = 0; i < n && total <= gm->n_small; i++)
        total += counts ? counts[i] : 1;
    /* (n bounded too: sequences without tokens add none to the total) */
    if (!n || n > GPU_SMALL_BATCH_MAX || total > gm->n_small || total > GPU_SMALL_BATCH_MAX)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "a batch over %u sequences of %llu tokens: 1 to %u tokens", n,
                       (unsigned long long)total, gm->n_small);
    /* rows 0 .. n - 1: each sequence's last token (the rows with logits);
     * then the others of sequences with several */
    uint32_t tab[GPU_SMALL_BATCH_MAX], tab_w[GPU_SMALL_BATCH_MAX], past[GPU_SMALL_BATCH_MAX];
    uint32_t *tok = gm->tokens.mapped;
    for (uint32_t i = 0, row = n; i < n; i++) {
        uint32_t s = seqs[i], c = counts ? counts[i] : 1;
        if (s >= gm->n_seq)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "sequence %u of %u", s, gm->n_seq);
        if (!c)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "sequence %u with no tokens", s);
        for (uint32_t j = 0; j < i; j++)
            if (seqs[j] == s)
                return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                               "sequence %u twice in one batch", s);
        uint32_t pos = s == gm->seq ? gm->n_past : gm->seq_past[s];
        if (c > gm->n_ctx - pos)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "sequence %u: %u tokens at position %u, past its context of %u", s, c,
                           pos, gm->n_ctx);
        past[i] = pos;
        for (uint32_t j = 0; j < c; j++) {
            uint32_t r = j + 1 == c ? i : row++;
            tab[r] = s << 24 | (pos + j);
            tab_w[r] = gm->kv_ring ? (gm->n_seq + s) << 24 | (pos + j) : tab[r];
            tok[gm->tok_scratch + r] = tok[s * (gm->n_ctx + 1) + pos + j];
        }
    }
    /* (a sequence whose ring lost what this pass reads runs its start again) */
    uint32_t selected = gm->seq;
    for (uint32_t i = 0; i < n; i++)
        if (!gm_kv_window_held(gm, seqs[i], past[i])) {
            glesllm_status st = gpu_model_select_seq(gm, seqs[i]);
            if (!st)
                st = gm_kv_window_ready(gm, past[i]);
            gpu_model_select_seq(gm, selected);
            if (st)
                return st;
        }
    for (uint32_t i = 0; i < n; i++) {
        glesllm_status st = gm_kv_take(gm, seqs[i], past[i], counts ? counts[i] : 1);
        if (st)
            return st;
    }
    uint64_t before = gpu_queue_get_stats(gm->q).dispatches;
    gpu_pass p = { gm, PASS_SMALL, 0, (uint32_t)total, GPU_STEP_ARGMAX_ALL, true };
    p.seq_tab = tab;
    p.seq_tab_w = tab_w;
    p.n_logits = n;
    glesllm_status st = gm->graph(&p);
    if (!st)
        st = gpu_queue_submit(gm->q);
    if (!st)
        st = gpu_model_wait(gm);
    gm->last_dispatches = (uint32_t)(gpu_queue_get_stats(gm->q).dispatches - before);
    gm->last_small = true;
    if (st)
        return st;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = seqs[i], end = past[i] + (counts ? counts[i] : 1);
        uint32_t pick = tok[gm->tok_scratch + gm->n_small + i];
        /* the pick where a step's argmax goes: the sequence's next slot */
        tok[s * (gm->n_ctx + 1) + end] = pick;
        if (picks)
            picks[i] = (int32_t)pick;
        if (s == gm->seq)
            gm->n_past = end;
        else
            gm->seq_past[s] = end;
    }
    return GLESLLM_OK;
}

static glesllm_status make_logits_all(gpu_model *gm)
{
    if (gm->logits_all)
        return GLESLLM_OK;
    uint64_t row = act_stride(gm->m->hp.n_vocab) * 4;
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    uint64_t per = limit / row;
    if (!per)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "one row of logits exceeds the storage-block limit");
    if (per > gm->n_batch)
        per = gm->n_batch;
    gm->logits_rows = (uint32_t)per;
    uint32_t n = (gm->n_batch + gm->logits_rows - 1) / gm->logits_rows;
    gm->logits_all = calloc(n, sizeof *gm->logits_all);
    if (!gm->logits_all)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    for (; gm->n_logits_all < n; gm->n_logits_all++) {
        glesllm_status st = gpu_buffer_create(gm->ctx, (size_t)(per * row), NULL, GPU_BUFFER_DEVICE,
                                              "logits of every position",
                                              &gm->logits_all[gm->n_logits_all]);
        if (st)
            return st;
    }
    return GLESLLM_OK;
}

static glesllm_status record_prefill(gpu_model *gm, uint32_t pos, uint32_t n, unsigned flags)
{
    if (!n)
        return GLESLLM_OK;
    if (!(flags & GPU_STEP_CHUNK) && n <= gm_small_limit(gm, flags)) {
        gm->last_small = true;
        return run_pass(gm, PASS_SMALL, pos, n, flags, true);
    }
    if (flags & GPU_STEP_ARGMAX_ALL)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the argmax of every position: %u tokens, more than the %u of a small "
                       "batch", n, gm->n_small);
    gm->last_small = false;
    if (flags & GPU_STEP_ALL_LOGITS) {
        if (n > gm->n_batch)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "logits of every position: %u tokens, more than the batch of %u", n,
                           gm->n_batch);
        glesllm_status st = make_logits_all(gm);
        if (st)
            return st;
    }
    glesllm_status st = GLESLLM_OK;
    for (uint32_t done = 0; st == GLESLLM_OK && done < n;) {
        uint32_t c = n - done < gm->n_batch ? n - done : gm->n_batch;
        st = run_pass(gm, PASS_CHUNK, pos + done, c, flags, done + c == n);
        done += c;
    }
    return st;
}

glesllm_status gpu_model_prefill(gpu_model *gm, uint32_t pos, uint32_t n, unsigned flags)
{
    if (!n || pos >= gm->n_ctx || n > gm->n_ctx - pos)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "prefill of %u tokens at position %u: past the context of %u", n, pos,
                       gm->n_ctx);
    glesllm_status st = gm_check_past(gm, pos);
    if (st)
        return st;
    uint64_t before = gpu_queue_get_stats(gm->q).dispatches;
    st = record_prefill(gm, pos, n, flags);
    gm->last_dispatches = (uint32_t)(gpu_queue_get_stats(gm->q).dispatches - before);
    if (!st)
        gm->n_past = pos + n;
    return st;
}
