/* The context handle: a GPU model of the model's weights with its own KV
 * cache; decoding, picking the next token, and the state in files and
 * memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "engine/generate.h"
#include "model/session.h"

glesllm_status api_check_context(const glesllm_context *c)
{
    if (!c)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the context is NULL");
    if (c->tag != TAG_CONTEXT)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the handle given as a context is not one (or was freed)");
    if (c->m->closed)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the context's model was closed; free the context");
    return GLESLLM_OK;
}

sampler_params api_sampler_params(const glesllm_sampling *s)
{
    sampler_params p = { s->temp, s->top_k, s->top_p, s->min_p, s->repeat_penalty,
                         s->repeat_last_n, s->seed };
    return p;
}

glesllm_sampling glesllm_sampling_default(void)
{
    sampler_params p = sampler_defaults();
    glesllm_sampling s = { p.temp, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n,
                           p.seed };
    return s;
}

glesllm_sampling glesllm_sampling_greedy(void)
{
    glesllm_sampling s = glesllm_sampling_default();
    s.temp = 0.0f;
    return s;
}

glesllm_status api_enter_context(glesllm_context *c, api_call *call)
{
    glesllm_status st = api_check_context(c);
    if (st || (st = api_enter(c->m->b, false, call)))
        return st;
    if ((st = gpu_model_select_seq(c->gm, c->seq)))
        api_leave(call);
    return st;
}

void api_context_ran(glesllm_context *c)
{
    c->batch_row = -1;
    if (c->group)
        c->pass_id = ++c->group->passes;
}

/* The context's call: its checks, then the backend entered. */
static glesllm_status enter(glesllm_context *c, api_call *call) { return api_enter_context(c, call); }

/* Positions c's sequence holds (its cache's, without sequences). */
static uint32_t ctx_past(const glesllm_context *c) { return gpu_model_seq_past(c->gm, c->seq); }

/* A context whose cache holds n_seq sequences (1: an ordinary one). */
static glesllm_status create_ctx(glesllm_model *m, const glesllm_context_params *params,
                                 uint32_t n_seq, glesllm_context **out)
{
    if (!out)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    glesllm_status st = api_check_model(m);
    if (st)
        return st;
    if (!m->b)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the model was opened without a backend: it has no GPU to run on");
    if (m->params.vocab_only)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the model was opened for its vocabulary only (vocab_only)");
    glesllm_context_params p = { 0, 0, 0, 0 };
    if (params)
        p = *params;
    const model_hparams *hp = &m->m.hp;
    uint32_t n_ctx = p.n_ctx;
    if (!n_ctx)
        n_ctx = hp->n_ctx_train && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    _Static_assert(GLESLLM_DRAFT_MAX == GEN_DRAFT_MAX_LIMIT, "draft limits");
    if (p.draft_max > GEN_DRAFT_MAX_LIMIT)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "draft_max %u is over the limit of %d",
                       p.draft_max, GEN_DRAFT_MAX_LIMIT);
    if (p.kv_size > (uint64_t)n_seq * n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "a KV pool of %llu positions for %u sequences of %u: more than they can "
                       "hold", (unsigned long long)p.kv_size, n_seq, n_ctx);
    glesllm_context *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    api_call call;
    if ((st = api_enter(m->b, false, &call))) {
        free(c);
        return st;
    }
    /* a verifying pass checks up to n_small - 1 drafted tokens; a cache of
     * sequences takes a prompt's chunk beside its generating ones in a pass
     * (unless the tuning sets the small batch) */
    int32_t n_small = p.draft_max + 1 > GPU_SMALL_BATCH ? (int32_t)p.draft_max + 1 : 0;
    if (n_seq > 1 && !n_small && m->b->tune.small_batch == TUNE_SMALL_AUTO)
        n_small = GPU_SEQS_BATCH;
    gpu_model_options mo = { n_ctx, KV_AUTO, m->params.progress, m->params.progress_ud,
                             p.n_batch, n_small };
    mo.tuning = &m->b->tune;
    mo.share = m->weights;
    mo.n_seq = n_seq;
    mo.kv_size = p.kv_size;
    if (m->weights) /* (the weights are uploaded once) */
        mo.progress = NULL;
    st = gpu_model_create(m->b->gpu, &m->m, &mo, &c->gm);
    api_leave(&call);
    if (st) {
        free(c);
        return st;
    }
    if (hp->n_ctx_train && n_ctx > hp->n_ctx_train)
        MODEL_LOG(m, GLESLLM_LOG_WARN,
                  "a context of %u tokens is longer than the %u the model was trained on: text "
                  "past %u tokens is likely to degrade",
                  n_ctx, hp->n_ctx_train, hp->n_ctx_train);
    if (!m->weights)
        m->weights = c->gm;
    c->tag = TAG_CONTEXT;
    c->m = m;
    m->refs++;
    m->n_contexts++;
    c->sampling = glesllm_sampling_greedy();
    sampler_params sp = api_sampler_params(&c->sampling);
    sampler_init(&c->smp, &sp);
    c->batch_row = -1;
    *out = c;
    return GLESLLM_OK;
}

glesllm_status glesllm_context_create(glesllm_model *m, const glesllm_context_params *params,
                                      glesllm_context **out)
{
    return create_ctx(m, params, 1, out);
}

glesllm_status glesllm_context_create_seqs(glesllm_model *m, const glesllm_context_params *params,
                                           uint32_t n, glesllm_context **out)
{
    if (!out || !n || n > 256)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "sequences: %u asked for (1 to 256), out %s", n, out ? "given" : "NULL");
    memset(out, 0, sizeof *out * n);
    api_seq_group *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    glesllm_status st = create_ctx(m, params, n, &out[0]);
    if (st) {
        free(g);
        return st;
    }
    out[0]->group = g;
    g->refs = 1;
    for (uint32_t i = 1; i < n; i++) {
        glesllm_context *c = calloc(1, sizeof *c);
        if (!c) {
            for (uint32_t j = 0; j < i; j++)
                glesllm_context_free(out[j]);
            memset(out, 0, sizeof *out * n);
            return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
        }
        *c = *out[0]; /* (the model, its cache, default sampling) */
        c->seq = i;
        c->draft = NULL;
        m->refs++;
        m->n_contexts++;
        g->refs++;
        out[i] = c;
    }
    /* the batch passes' kernels built now, not in a server's first pass of
     * that many sequences */
    api_call call;
    if (n > 1 && gpu_model_batch_ok(out[0]->gm) && !(st = api_enter(m->b, false, &call))) {
        st = gpu_model_prepare_small(out[0]->gm);
        api_leave(&call);
    }
    if (st) {
        for (uint32_t j = 0; j < n; j++)
            glesllm_context_free(out[j]);
        memset(out, 0, sizeof *out * n);
    }
    return st;
}

void glesllm_context_free(glesllm_context *c)
{
    if (!c || c->tag != TAG_CONTEXT)
        return;
    glesllm_model *m = c->m;
    c->tag = 0;
    api_call call;
    api_enter(m->b, true, &call); /* (waits: a free cannot fail) */
    /* the weights' GPU model goes with the last context: others may read
     * them; a shared cache with the last of its group */
    bool last_of_group = !c->group || --c->group->refs == 0;
    if (c->group && last_of_group)
        free(c->group);
    if (last_of_group && c->gm != m->weights)
        gpu_model_destroy(c->gm);
    if (--m->n_contexts == 0) {
        gpu_model_destroy(m->weights);
        m->weights = NULL;
    }
    api_leave(&call);
    free(c);
    api_model_release(m);
}

uint32_t glesllm_context_n_ctx(const glesllm_context *c)
{
    return api_check_context(c) ? 0 : gpu_model_n_ctx(c->gm);
}

uint32_t glesllm_context_n_past(const glesllm_context *c)
{
    return api_check_context(c) ? 0 : ctx_past(c);
}

int32_t glesllm_context_token(const glesllm_context *c, uint32_t pos)
{
    if (api_check_context(c) || pos >= ctx_past(c))
        return -1;
    return gpu_model_seq_token(c->gm, c->seq, pos);
}

glesllm_model *glesllm_context_model(const glesllm_context *c)
{
    return c && c->tag == TAG_CONTEXT ? c->m : NULL;
}

glesllm_status glesllm_context_get_info(const glesllm_context *c, glesllm_context_info *out)
{
    glesllm_status st = api_check_context(c);
    if (st || !out)
        return st ? st : err_set(GLESLLM_ERR_INVALID_ARGUMENT, "out is NULL");
    out->n_ctx = gpu_model_n_ctx(c->gm);
    out->n_batch = gpu_model_n_batch(c->gm);
    out->weight_bytes = gpu_model_weight_bytes(c->gm);
    out->kv_placement = kv_placement_name(gpu_model_kv(c->gm));
    out->dispatches = gpu_model_last_dispatches(c->gm);
    out->state_bytes = gpu_model_state_gpu_bytes(c->gm);
    out->kv_bytes = gpu_model_kv_gpu_bytes(c->gm);
    return GLESLLM_OK;
}

uint64_t glesllm_context_step_bytes(const glesllm_context *c)
{
    return api_check_context(c) ? 0 : gpu_model_step_bytes(c->gm);
}

glesllm_status glesllm_set_sampling(glesllm_context *c, const glesllm_sampling *s)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    glesllm_sampling g = s ? *s : glesllm_sampling_greedy();
    if (g.temp > 0.0f && (g.top_p < 0.0f || g.min_p > 1.0f || !(g.repeat_penalty > 0.0f) ||
                          g.repeat_last_n < -1))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "sampling: top_p %g, min_p %g, repeat_penalty %g or repeat_last_n %d out "
                       "of range", g.top_p, g.min_p, g.repeat_penalty, g.repeat_last_n);
    c->sampling = g;
    sampler_params sp = api_sampler_params(&g);
    sampler_init(&c->smp, &sp);
    return GLESLLM_OK;
}

/* What the GPU reduces the logits to for the context's sampling. */
static unsigned pick_mode(glesllm_context *c, glesllm_status *st)
{
    if (c->sampling.temp <= 0.0f)
        return GPU_STEP_ARGMAX;
    sampler_params sp = api_sampler_params(&c->sampling);
    uint32_t n_ctx = gpu_model_n_ctx(c->gm);
    uint32_t last_n = sp.repeat_last_n < 0 ? n_ctx : (uint32_t)sp.repeat_last_n;
    *st = gpu_model_set_sampling(c->gm, sampler_candidates(&sp), sp.repeat_penalty, last_n);
    return GPU_STEP_CANDIDATES;
}

glesllm_status glesllm_decode(glesllm_context *c, const int32_t *ids, uint32_t n, uint32_t pos,
                              unsigned flags)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    gpu_model *gm = c->gm;
    uint32_t n_ctx = gpu_model_n_ctx(gm), n_vocab = gpu_model_n_vocab(gm);
    if (!ids || !n)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "decode: no tokens");
    if (pos > ctx_past(c))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "decode at position %u, but the cache holds only %u (positions go in "
                       "order)", pos, ctx_past(c));
    if (n > n_ctx || pos > n_ctx - n)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "decode of %u tokens at position %u runs past the context of %u", n, pos,
                       n_ctx);
    if ((flags & GLESLLM_DECODE_ALL_LOGITS) && n > gpu_model_n_batch(gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "every logit of %u tokens asked for, but a batch holds %u (n_batch)", n,
                       gpu_model_n_batch(gm));
    if (flags & ~(unsigned)GLESLLM_DECODE_ALL_LOGITS)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "decode: unknown flags 0x%x", flags);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "token %d (at %u) is outside the vocabulary of %u", ids[i], i, n_vocab);
    api_call call;
    if ((st = api_enter_context(c, &call)))
        return st;
    c->last_pick = 0;
    api_context_ran(c);
    unsigned pick = pick_mode(c, &st);
    for (uint32_t i = 0; !st && i < n; i++)
        st = gpu_model_set_token(gm, pos + i, ids[i]);
    bool all = flags & GLESLLM_DECODE_ALL_LOGITS, stopped = false;
    if (!st && n == 1 && !all)
        st = gpu_model_step(gm, pos, pick);
    else if (!st && all)
        st = gpu_model_prefill(gm, pos, n, pick | GPU_STEP_ALL_LOGITS);
    else if (!st) { /* in passes of the batch size, glesllm_cancel looked at between them */
        gen_options o;
        memset(&o, 0, sizeof o);
        o.stop = &c->cancel;
        st = engine_prefill(gm, &o, pos, pos + n, pick, &stopped);
    }
    if (!st)
        st = gpu_model_wait(gm);
    if (!st && stopped) {
        c->cancel = 0; /* (taken) */
        st = err_set(GLESLLM_ERR_CANCELLED,
                     "decode cancelled after %u of %u tokens: the cache holds %u positions",
                     gpu_model_n_past(gm) - pos, n, gpu_model_n_past(gm));
    } else if (!st) {
        c->last_pos = pos + n - 1;
        c->last_n = n;
        c->last_all = all;
        c->last_pick = pick;
    }
    api_leave(&call);
    return st;
}

static glesllm_status logits_of(glesllm_context *c, int32_t i, float *out)
{
    if (c->batch_row >= 0) /* (its row of the batch's) */
        return gpu_model_read_logits_all(c->gm, (uint32_t)c->batch_row, 1, out);
    if (c->last_all)
        return gpu_model_read_logits_all(c->gm, i < 0 ? c->last_n - 1 : (uint32_t)i, 1, out);
    return gpu_model_read_logits(c->gm, out);
}

static glesllm_status check_logits(const glesllm_context *c, int32_t i)
{
    if (!c->last_pick)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "no logits: run glesllm_decode first (generate and state loads leave "
                       "none)");
    if (c->group && c->pass_id != c->group->passes)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "no logits: another sequence of this context's cache ran since its last "
                       "decode (read them, or pick, before that)");
    if (i >= (int32_t)c->last_n || i < -1 || (i >= 0 && i != (int32_t)c->last_n - 1 && !c->last_all))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "logits of token %d of a batch of %u asked for%s", i, c->last_n,
                       c->last_all ? "" : " (only the last's are kept without "
                                          "GLESLLM_DECODE_ALL_LOGITS)");
    return GLESLLM_OK;
}

/* A call that reads what the last decode left of token i: the checks, then
 * the backend entered. */
static glesllm_status enter_logits(glesllm_context *c, int32_t i, const void *out, api_call *call)
{
    glesllm_status st = api_check_context(c);
    if (st || (st = check_logits(c, i)))
        return st;
    if (!out)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "out is NULL");
    return enter(c, call);
}

glesllm_status glesllm_get_logits(glesllm_context *c, int32_t i, float *out)
{
    api_call call;
    glesllm_status st = enter_logits(c, i, out, &call);
    if (st)
        return st;
    st = logits_of(c, i, out);
    api_leave(&call);
    return st;
}

/* The pick on the CPU from the logits, where the last decode reduced them
 * for another sampling than the context's now. */
static glesllm_status pick_on_cpu(glesllm_context *c, int32_t *token)
{
    gpu_model *gm = c->gm;
    uint32_t nv = gpu_model_n_vocab(gm);
    float *l = malloc(sizeof(float) * nv);
    if (!l)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    glesllm_status st = logits_of(c, -1, l);
    sampler_params sp = api_sampler_params(&c->sampling);
    if (!st && sp.temp > 0.0f && sp.repeat_penalty != 1.0f) {
        uint32_t end = c->last_pos + 1, last_n = sp.repeat_last_n < 0 ? end : (uint32_t)sp.repeat_last_n;
        uint32_t from = end > last_n ? end - last_n : 0;
        int32_t *win = malloc(sizeof(int32_t) * (end - from + 1));
        if (!win) {
            free(l);
            return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
        }
        for (uint32_t p = from; p < end; p++)
            win[p - from] = gpu_model_get_token(gm, p);
        sampler_penalize(l, nv, win, end - from, sp.repeat_penalty);
        free(win);
    }
    float vals[SAMPLER_MAX_CANDIDATES], gmax, gsum;
    int32_t ids[SAMPLER_MAX_CANDIDATES];
    if (!st) {
        uint32_t k = sp.temp > 0.0f ? sampler_candidates(&sp) : 1;
        uint32_t n = sampler_top(l, nv, k, vals, ids, &gmax, &gsum);
        *token = sp.temp > 0.0f ? sampler_pick(&c->smp, vals, ids, n, gmax, gsum) : ids[0];
    }
    free(l);
    return st;
}

glesllm_status glesllm_next_token(glesllm_context *c, int32_t *token)
{
    api_call call;
    glesllm_status st = enter_logits(c, -1, token, &call);
    if (st)
        return st;
    bool greedy = c->sampling.temp <= 0.0f;
    if (c->last_all || (greedy ? c->last_pick != GPU_STEP_ARGMAX : c->last_pick != GPU_STEP_CANDIDATES)) {
        st = pick_on_cpu(c, token);
    } else if (greedy) {
        st = engine_argmax_token(c->gm, c->last_pos + 1, token);
    } else {
        float vals[GPU_MAX_CANDIDATES], gmax, gsum;
        int32_t ids[GPU_MAX_CANDIDATES];
        uint32_t n = gpu_model_candidates(c->gm, vals, ids, &gmax, &gsum);
        *token = sampler_pick(&c->smp, vals, ids, n, gmax, gsum);
    }
    if (!st && (*token < 0 || (uint32_t)*token >= gpu_model_n_vocab(c->gm)))
        st = err_set(GLESLLM_ERR_GL, "the GPU produced no valid token (NaN logits?)");
    api_leave(&call);
    return st;
}

glesllm_status glesllm_truncate(glesllm_context *c, uint32_t n_past)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (n_past > ctx_past(c))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "truncate to %u positions, but the cache holds %u", n_past, ctx_past(c));
    c->last_pick = 0;
    if (!c->group)
        return gpu_model_truncate(c->gm, n_past);
    api_call call; /* (a shared cache: its sequence selected) */
    if ((st = enter(c, &call)))
        return st;
    st = gpu_model_truncate(c->gm, n_past);
    api_leave(&call);
    return st;
}

glesllm_status glesllm_copy_seq(glesllm_context *dst, const glesllm_context *src, uint32_t n)
{
    glesllm_status st = api_check_context(dst);
    if (st || (st = api_check_context(src)))
        return st;
    if (!dst->group || dst->group != src->group || dst == src)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "copy_seq: the two must be distinct sequences of one cache "
                       "(glesllm_context_create_seqs)");
    if (n > ctx_past(src))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "copy_seq of %u positions: the source holds %u", n, ctx_past(src));
    api_call call;
    if ((st = api_enter(dst->m->b, false, &call)))
        return st;
    st = gpu_model_seq_copy(dst->gm, src->seq, dst->seq, n);
    dst->last_pick = 0;
    dst->batch_row = -1;
    api_leave(&call);
    return st;
}

glesllm_status glesllm_kv_pages(const glesllm_context *c, uint32_t *page, uint32_t *used,
                                uint32_t *total)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    uint32_t p, u, t;
    gpu_model_kv_pages(c->gm, &p, &u, &t);
    if (page)
        *page = p;
    if (used)
        *used = u;
    if (total)
        *total = t;
    return GLESLLM_OK;
}

uint32_t glesllm_kv_pages_held(const glesllm_context *const *seqs, uint32_t n)
{
    uint32_t ids[256];
    if (!seqs || !n || n > 256)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        if (api_check_context(seqs[i]) || seqs[i]->gm != seqs[0]->gm)
            return 0;
        ids[i] = seqs[i]->seq;
    }
    return gpu_model_kv_pages_of(seqs[0]->gm, ids, n);
}

uint32_t glesllm_decode_batch_max(const glesllm_context *c)
{
    if (api_check_context(c) || !c->group || !gpu_model_batch_ok(c->gm))
        return 0;
    uint32_t n = gpu_model_n_small(c->gm);
    return n < GPU_SMALL_BATCH_MAX ? n : GPU_SMALL_BATCH_MAX;
}

/* glesllm_decode_batch(_tokens): counts NULL, one token each */
static glesllm_status decode_batch(glesllm_context *const *seqs, uint32_t n,
                                   const int32_t *tokens, const uint32_t *counts)
{
    if (!seqs || !tokens || !n)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "decode_batch: no sequences or tokens");
    glesllm_status st = api_check_context(seqs[0]);
    if (st)
        return st;
    uint32_t most = glesllm_decode_batch_max(seqs[0]);
    if (!most)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "decode_batch: %s", !seqs[0]->group
                           ? "the context is no sequence of a shared cache "
                             "(glesllm_context_create_seqs)"
                           : "this model's architecture steps its sequences one at a time: "
                             "glesllm_decode each");
    uint64_t total = 0;
    for (uint32_t i = 0; i < n && total <= most; i++)
        total += counts ? counts[i] : 1;
    if (n > most || total > most)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "decode_batch of %u sequences, %llu tokens: at most %u tokens a call "
                       "(glesllm_decode_batch_max)", n, (unsigned long long)total, most);
    gpu_model *gm = seqs[0]->gm;
    uint32_t ids[GPU_SMALL_BATCH_MAX];
    for (uint32_t i = 0, t = 0; i < n; t += counts ? counts[i] : 1, i++) {
        if ((st = api_check_context(seqs[i])))
            return st;
        if (seqs[i]->group != seqs[0]->group)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "decode_batch: sequence %u is of another cache", i);
        uint32_t c = counts ? counts[i] : 1;
        if (!c)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "decode_batch: sequence %u has no tokens",
                           i);
        for (uint32_t j = t; j < t + c; j++)
            if (tokens[j] < 0 || (uint32_t)tokens[j] >= gpu_model_n_vocab(gm))
                return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                               "token %d (of sequence %u) is outside the vocabulary of %u",
                               tokens[j], i, gpu_model_n_vocab(gm));
        if (c > gpu_model_n_ctx(gm) - ctx_past(seqs[i]))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "decode_batch: %u tokens of sequence %u at position %u: past its "
                           "context of %u", c, i, ctx_past(seqs[i]), gpu_model_n_ctx(gm));
        ids[i] = seqs[i]->seq;
    }
    api_call call;
    if ((st = api_enter(seqs[0]->m->b, false, &call)))
        return st;
    uint32_t past[GPU_SMALL_BATCH_MAX];
    for (uint32_t i = 0, t = 0; !st && i < n; i++) {
        past[i] = ctx_past(seqs[i]);
        st = gpu_model_select_seq(gm, seqs[i]->seq);
        for (uint32_t j = 0; !st && j < (counts ? counts[i] : 1); j++, t++)
            st = gpu_model_set_token(gm, past[i] + j, tokens[t]);
    }
    if (!st)
        st = gpu_model_step_batch(gm, n, ids, counts, NULL);
    /* (its pass leaves each one's argmax in its next token slot, and its
     * last token's logits in its row) */
    seqs[0]->group->passes++;
    for (uint32_t i = 0; i < n; i++) {
        glesllm_context *c = seqs[i];
        uint32_t cnt = counts ? counts[i] : 1;
        c->last_pick = st ? 0 : GPU_STEP_ARGMAX;
        c->last_pos = past[i] + cnt - 1;
        c->last_n = cnt;
        c->last_all = false;
        c->pass_id = c->group->passes;
        c->batch_row = st ? -1 : (int32_t)i;
    }
    api_leave(&call);
    return st;
}

glesllm_status glesllm_decode_batch(glesllm_context *const *seqs, uint32_t n,
                                    const int32_t *tokens)
{
    return decode_batch(seqs, n, tokens, NULL);
}

glesllm_status glesllm_decode_batch_tokens(glesllm_context *const *seqs, uint32_t n,
                                           const int32_t *tokens, const uint32_t *n_tokens)
{
    if (!n_tokens)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "decode_batch_tokens: n_tokens is NULL");
    return decode_batch(seqs, n, tokens, n_tokens);
}

void glesllm_cancel(glesllm_context *c)
{
    if (c && c->tag == TAG_CONTEXT)
        c->cancel = 1;
}

glesllm_status glesllm_set_draft(glesllm_context *c, glesllm_context *draft, uint32_t draft_max,
                                 uint32_t draft_min)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!draft) {
        c->draft = NULL;
        return GLESLLM_OK;
    }
    if ((st = api_check_context(draft)))
        return err_prefix(st, "the draft: ");
    if (draft == c || draft->m->b != c->m->b)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       draft == c ? "a context cannot draft for itself"
                                  : "the draft context is on another backend; make it on the "
                                    "target's");
    if (!draft_max || draft_max > gpu_model_n_small(c->gm) - 1 || draft_min > draft_max)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "draft_max %u, draft_min %u: this context checks 1 to %u drafted tokens a "
                       "pass (glesllm_context_params.draft_max sets more) and draft_min must be "
                       "at most draft_max", draft_max, draft_min, gpu_model_n_small(c->gm) - 1);
    const vocab *vt = c->m->voc, *vd = draft->m->voc;
    int64_t d = vt && vd ? vocab_difference(vt, vd) : -1;
    if (gpu_model_n_vocab(c->gm) != gpu_model_n_vocab(draft->gm) || d != -1 || (!vt != !vd)) {
        if (d >= 0 && gpu_model_n_vocab(c->gm) == gpu_model_n_vocab(draft->gm))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "the draft's vocabulary differs from the model's at token %lld; a "
                           "draft must share the model's vocabulary", (long long)d);
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the draft's vocabulary (%u tokens) is not the model's (%u tokens%s); a "
                       "draft must share the model's vocabulary", gpu_model_n_vocab(draft->gm),
                       gpu_model_n_vocab(c->gm), d == -2 ? ", other BOS/EOS or tokenizer" : "");
    }
    if (gpu_model_n_ctx(draft->gm) < gpu_model_n_ctx(c->gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the draft's context (%u) is smaller than the model's (%u)",
                       gpu_model_n_ctx(draft->gm), gpu_model_n_ctx(c->gm));
    c->draft = draft;
    c->draft_max = draft_max;
    c->draft_min = draft_min;
    return GLESLLM_OK;
}

/* ---- state ------------------------------------------------------------------ */

/* the cached positions' tokens (malloc'd; *n of them) */
static glesllm_status cached_tokens(glesllm_context *c, int32_t **out, uint32_t *n)
{
    *n = gpu_model_n_past(c->gm);
    *out = malloc(sizeof(int32_t) * (*n + 1));
    if (!*out)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    for (uint32_t i = 0; i < *n; i++)
        (*out)[i] = gpu_model_get_token(c->gm, i);
    return GLESLLM_OK;
}

/* The cached positions and their tokens to the file at path, or to f. */
static glesllm_status save_state(glesllm_context *c, const char *path, FILE *f)
{
    api_call call;
    glesllm_status st = enter(c, &call);
    if (st)
        return st;
    int32_t *toks;
    uint32_t n;
    if (!(st = cached_tokens(c, &toks, &n))) {
        st = path ? session_save(c->gm, path, toks, n) : session_write(c->gm, f, toks, n);
        free(toks);
    }
    api_leave(&call);
    return st;
}

glesllm_status glesllm_state_save_file(glesllm_context *c, const char *path)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!path)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the path is NULL");
    return save_state(c, path, NULL);
}

glesllm_status glesllm_state_load_file(glesllm_context *c, const char *path,
                                       const int32_t *prefix, uint32_t n_prefix,
                                       uint32_t *n_loaded)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!path || (!prefix && n_prefix))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "state load: NULL path or prefix");
    api_call call;
    if ((st = enter(c, &call)))
        return st;
    c->last_pick = 0;
    uint32_t n = 0;
    st = session_load(c->gm, path, prefix, n_prefix, &n);
    if (st) /* (nothing of a refused state stays) */
        gpu_model_truncate(c->gm, 0);
    api_leave(&call);
    if (n_loaded)
        *n_loaded = n;
    return st;
}

glesllm_status glesllm_state_save(glesllm_context *c, void *buf, size_t cap, size_t *size)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!size)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "size is NULL");
    uint64_t need = session_bytes(c->gm, gpu_model_n_past(c->gm));
    *size = (size_t)need;
    if (!buf || cap < need)
        return buf ? err_set(GLESLLM_ERR_SMALL_BUFFER, "the state takes %llu bytes, room was "
                             "given for %zu", (unsigned long long)need, cap)
                   : GLESLLM_OK;
    /* (through a buffer of one byte more: a write stream of fmemopen puts a
     * NUL after what was written, and on the last byte where no room is left) */
    char *tmp = malloc((size_t)need + 1);
    FILE *f = tmp ? fmemopen(tmp, (size_t)need + 1, "wb") : NULL;
    if (!f) {
        free(tmp);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    }
    st = save_state(c, NULL, f);
    if (fclose(f) != 0 && !st)
        st = err_set(GLESLLM_ERR_IO, "writing the state into memory failed");
    if (!st)
        memcpy(buf, tmp, (size_t)need);
    free(tmp);
    return st;
}

glesllm_status glesllm_state_load(glesllm_context *c, const void *buf, size_t size)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!buf || !size)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "state load: no bytes given");
    api_call call;
    if ((st = enter(c, &call)))
        return st;
    c->last_pick = 0;
    FILE *f = fmemopen((void *)buf, size, "rb");
    uint32_t n;
    if (!f)
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    else {
        st = session_read(c->gm, f, "the state", NULL, 0, &n);
        fclose(f);
    }
    if (st)
        gpu_model_truncate(c->gm, 0);
    api_leave(&call);
    return st;
}
