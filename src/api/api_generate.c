/* glesllm_generate: the engine's generate loop with the prompt the context
 * already holds reused, each token's text streamed as whole UTF-8
 * characters; and perplexity. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

glesllm_generate_params glesllm_generate_default(void)
{
    glesllm_generate_params p = { 128, 0, 0 };
    return p;
}

typedef struct streamer {
    const glesllm_context *c;
    glesllm_piece_fn fn;
    void *ud;
    bool special, stopped;
    utf8_stream u;
} streamer;

static bool stream_token(void *ud, int32_t id)
{
    streamer *s = ud;
    if (!s->fn)
        return true;
    const vocab *v = s->c->m->voc;
    char piece[256], out[3 * sizeof piece + 3];
    char *src = piece, *text = out;
    size_t n = v ? vocab_piece(v, id, s->special, piece, sizeof piece) : 0;
    if (n > sizeof piece) { /* a long piece (a user-defined token) */
        src = malloc(n);
        text = malloc(3 * n + 3);
        if (src && text) {
            vocab_piece(v, id, s->special, src, n);
        } else {
            free(src);
            free(text);
            src = piece;
            text = out;
            n = sizeof piece;
        }
    }
    size_t len = utf8_stream_push(&s->u, src, n, text);
    int stop = s->fn(s->ud, id, text, len);
    if (src != piece) {
        free(src);
        free(text);
    }
    if (stop)
        s->stopped = true;
    return !stop;
}

/* how many of prompt[0..n) c's cache holds, as its first positions */
static uint32_t common_prefix(const glesllm_context *c, const int32_t *prompt, uint32_t n)
{
    uint32_t past = gpu_model_n_past(c->gm), k = 0;
    while (k < n && k < past && gpu_model_get_token(c->gm, k) == prompt[k])
        k++;
    return k;
}

static glesllm_status generate(glesllm_context *c, const int32_t *prompt, uint32_t n_prompt,
                               const glesllm_generate_params *gp, glesllm_piece_fn fn, void *ud,
                               glesllm_generate_result *res)
{
    uint32_t n_vocab = gpu_model_n_vocab(c->gm);
    for (uint32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || (uint32_t)prompt[i] >= n_vocab)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "prompt token %d (at %u) is outside the vocabulary of %u", prompt[i],
                           i, n_vocab);
    streamer s = { c, fn, ud, gp->special != 0, false, { { 0 }, 0 } };
    uint32_t reuse = common_prefix(c, prompt, n_prompt);
    if (c->draft) {
        uint32_t d = common_prefix(c->draft, prompt, n_prompt);
        reuse = d < reuse ? d : reuse;
    }
    gen_options o = { prompt, n_prompt, gp->n_predict, api_sampler_params(&c->sampling),
                      gp->ignore_eos != 0, c->m->voc, &c->cancel, stream_token, &s, reuse,
                      c->draft ? c->draft->gm : NULL, c->draft_max, c->draft_min };
    gen_stats gs;
    c->last_pick = 0;
    glesllm_status st = engine_generate(c->gm, &o, &gs);
    if (fn) { /* what is left of an incomplete character */
        char tail[16];
        size_t n = utf8_stream_flush(&s.u, tail);
        if (n || !st)
            fn(ud, -1, tail, n);
    }
    if (res) {
        glesllm_generate_result r = { gs.n_prompt, reuse < n_prompt ? reuse : n_prompt - 1,
                                      gs.n_gen, gs.prompt_s, gs.gen_s, GLESLLM_STOP_N_PREDICT,
                                      gs.dispatches_per_token, gs.n_rounds, gs.n_drafted,
                                      gs.n_accepted, gs.n_plain, gs.draft_s, gs.verify_s };
        switch (gs.stop) {
        case GEN_STOP_EOS: r.stop = GLESLLM_STOP_EOG; break;
        case GEN_STOP_CONTEXT: r.stop = GLESLLM_STOP_CONTEXT; break;
        case GEN_STOP_REQUESTED:
            r.stop = s.stopped ? GLESLLM_STOP_CALLBACK : GLESLLM_STOP_CANCELLED;
            break;
        default: break;
        }
        *res = r;
    }
    if (gs.stop == GEN_STOP_REQUESTED && !s.stopped)
        c->cancel = 0; /* (taken) */
    return st;
}

glesllm_status glesllm_generate_tokens(glesllm_context *c, const int32_t *prompt,
                                       uint32_t n_prompt, const glesllm_generate_params *params,
                                       glesllm_piece_fn on_piece, void *ud,
                                       glesllm_generate_result *result)
{
    if (result)
        memset(result, 0, sizeof *result);
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!prompt || !n_prompt)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the prompt is empty");
    if (c->draft && (st = api_check_context(c->draft)))
        return err_prefix(st, "the draft: ");
    glesllm_generate_params gp = params ? *params : glesllm_generate_default();
    api_call call;
    if ((st = api_enter_context(c, &call)))
        return st;
    api_context_ran(c);
    st = generate(c, prompt, n_prompt, &gp, on_piece, ud, result);
    api_leave(&call);
    return st;
}

/* text to ids (BOS as the vocabulary asks); *ids malloc'd */
static glesllm_status tokenize_all(const glesllm_model *m, const char *text, size_t len,
                                   bool special, int32_t **ids, size_t *n)
{
    const vocab *v = NULL;
    glesllm_status st = api_vocab(m, &v);
    if (st)
        return st;
    tok_ids t = { 0 };
    st = tok_encode(v, text, len, TOK_ADD_SPECIAL | (special ? TOK_PARSE_SPECIAL : 0), &t);
    if (st) {
        tok_ids_free(&t);
        return st;
    }
    *ids = t.ids;
    *n = t.n;
    return GLESLLM_OK;
}

glesllm_status glesllm_generate(glesllm_context *c, const char *prompt,
                                const glesllm_generate_params *params, glesllm_piece_fn on_piece,
                                void *ud, glesllm_generate_result *result)
{
    if (result)
        memset(result, 0, sizeof *result);
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!prompt)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the prompt is NULL");
    int32_t *ids = NULL;
    size_t n = 0;
    if ((st = tokenize_all(c->m, prompt, strlen(prompt), params && params->special, &ids, &n)))
        return st;
    if (!n)
        st = err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                     "the prompt is empty (no tokens, and the vocabulary adds no BOS)");
    else if (n > gpu_model_n_ctx(c->gm))
        st = err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                     "the prompt has %zu tokens, more than the context of %u", n,
                     gpu_model_n_ctx(c->gm));
    else
        st = glesllm_generate_tokens(c, ids, (uint32_t)n, params, on_piece, ud, result);
    free(ids);
    return st;
}

glesllm_status glesllm_perplexity(glesllm_context *c, const int32_t *ids, size_t n,
                                  uint32_t max_chunks, glesllm_chunk_fn on_chunk, void *ud,
                                  glesllm_perplexity_result *result)
{
    return glesllm_perplexity_logits(c, ids, n, max_chunks, on_chunk, NULL, ud, result);
}

glesllm_status glesllm_perplexity_logits(glesllm_context *c, const int32_t *ids, size_t n,
                                         uint32_t max_chunks, glesllm_chunk_fn on_chunk,
                                         glesllm_logits_fn on_logits, void *ud,
                                         glesllm_perplexity_result *result)
{
    glesllm_status st = api_check_context(c);
    if (st)
        return st;
    if (!ids || !result)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "perplexity: NULL ids or result");
    memset(result, 0, sizeof *result);
    uint32_t n_ctx = gpu_model_n_ctx(c->gm), n_vocab = gpu_model_n_vocab(c->gm);
    if (n < 2 * (size_t)n_ctx || n > UINT32_MAX)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "%zu tokens; a context of %u needs at least %u: give a longer text or a "
                       "smaller context", n, n_ctx, 2 * n_ctx);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "token %d (at %zu) is outside the vocabulary of %u", ids[i], i,
                           n_vocab);
    const vocab *v = c->m->voc;
    ppl_options po = { n_ctx, v && vocab_adds_bos(v) ? vocab_bos(v) : -1, max_chunks, &c->cancel,
                       on_chunk, ud, on_logits };
    ppl_result r;
    api_call call;
    if ((st = api_enter_context(c, &call)))
        return st;
    c->last_pick = 0;
    api_context_ran(c);
    st = engine_perplexity(c->gm, ids, (uint32_t)n, &po, &r);
    api_leave(&call);
    if (!st) {
        result->ppl = r.ppl;
        result->ppl_err = r.ppl_err;
        result->nll = r.nll;
        result->n_chunks = r.n_chunks;
        result->n_scored = r.n_scored;
        result->cancelled = c->cancel != 0;
    }
    c->cancel = 0;
    return st;
}
