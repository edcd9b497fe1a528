/* The server's GPU side: one thread, the only one that calls the backend,
 * going round the busy slots: one token of every generating slot and the
 * prompts of new requests in one pass (glesllm_decode_batch_tokens: the
 * slots are sequences of one cache; a prompt longer than a pass runs its
 * own passes first). Where the model's sequences cannot share a pass
 * (recurrent layers: Mamba, Jamba, RWKV) or a draft model drafts, each
 * generating slot takes a round of a few tokens instead
 * (glesllm_generate_tokens: its steps pipelined, or one drafting round).
 *
 * The KV pool: a request is admitted with the pages its prompt and
 * max_tokens need kept for it (so that it never finds the pool full), a
 * request without max_tokens with its prompt's; a finished request's slot
 * keeps its cache for a later prompt that starts the same, until its pages
 * are wanted; a cancelled one gives them back at once. A pass that finds
 * the pool full anyway (requests without max_tokens grew into it) first
 * takes back idle slots' caches, then ends the longest such request
 * ("length"), and runs again in the next round. See serve.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

enum { PASS_MOST = 64 }; /* the most tokens of a shared pass the worker makes */

typedef struct slot {
    glesllm_context *c, *draft; /* draft: NULL without --draft */
    serve_req *req; /* NULL: free */
    uint32_t pos;   /* prompt tokens in the cache (the prompt pass's progress) */
    bool generating;
    /* the prompt, then the tokens generated (n_ctx + 1 of room): the cache
     * holds all but the last, which the slot's next pass runs */
    int32_t *ids;
    uint32_t n_ids;
    /* a round's end: a stop string's start in gen (stop_at), or the request
     * cancelled */
    bool stopped, cancelled;
    size_t stop_at;
    char *gen; /* the reply's bytes, a stop string's included */
    size_t n_gen, cap_gen, emitted;
    double t0, t_gen;
    uint32_t kept; /* KV pages kept for its request (the admission's count) */
} slot;

struct serve {
    glesllm_model *m;
    serve_params p;
    slot *slots;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_req *head, *tail; /* waiting for a slot */
    bool started, stopping;
    uint32_t batch_max; /* tokens a shared pass (0: rounds a slot), at most PASS_MOST */
    bool shared;        /* the slots are sequences of one cache (glesllm_copy_seq) */
    serve_metrics met; /* counters (the gauges are computed when read) */
    uint32_t kv_page, kv_pages, kv_kept; /* shared: the pool's page, pages, pages kept */
    /* pages held by running requests, and by idle slots alone (kept starts,
     * taken back on demand), as of the worker's last look (the metrics') */
    uint32_t kv_used, kv_idle;
    uint64_t kv_tokens; /* positions running requests hold, as of that look */
    bool kv_wait; /* the queue's first request waits for pages */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint32_t serve_n_ctx(const serve *s) { return s->p.n_ctx; }

serve_req *serve_req_new(void)
{
    serve_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->n_predict = -1;
    r->sampling = glesllm_sampling_default();
    return r;
}

static void req_free(serve_req *r)
{
    free(r->prompt);
    free(r->text);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

void serve_req_release(serve *s, serve_req *r)
{
    pthread_mutex_lock(&s->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last)
        req_free(r);
}

static void refuse_locked(serve_req *r)
{
    pthread_mutex_lock(&r->mu);
    r->finish = "stop";
    r->err_status = 503;
    snprintf(r->err, sizeof r->err, "the server is shutting down");
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void serve_submit(serve *s, serve_req *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        refuse_locked(r);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    r->refs++;
    r->next = NULL;
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    s->met.requests++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void serve_cancel(serve *s, serve_req *r)
{
    pthread_mutex_lock(&r->mu);
    r->cancel = true;
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- a request's end --------------------------------------------------------- */

static void append_locked(serve_req *r, const char *p, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        size_t cap = (r->len + n + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) {
            r->err_status = 500;
            snprintf(r->err, sizeof r->err, "the server ran out of memory");
            return;
        }
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, p, n);
    r->len += n;
    r->text[r->len] = '\0';
}

/* Under s->mu, on the worker: the positions and pages held, for the
 * metrics (which the HTTP threads read without calling the backend). */
static void note_pages(serve *s)
{
    const glesllm_context *run[256];
    uint32_t n = 0, all = 0;
    s->kv_tokens = 0;
    for (unsigned i = 0; i < s->p.n_slots; i++)
        if (s->slots[i].req) {
            run[n++] = s->slots[i].c;
            s->kv_tokens += glesllm_context_n_past(s->slots[i].c);
        }
    if (!s->shared)
        return;
    glesllm_kv_pages(s->slots[0].c, NULL, &all, NULL);
    s->kv_used = n ? glesllm_kv_pages_held(run, n) : 0;
    s->kv_idle = all - s->kv_used;
}

/* The slot's request ends: its text up to `upto` bytes of the reply is
 * given, the rest dropped; the slot is free again (its cache kept for a
 * later prompt that starts the same). */
static void finish(serve *s, slot *sl, const char *why, size_t upto, int status, const char *err)
{
    serve_req *r = sl->req;
    pthread_mutex_lock(&r->mu);
    bool cancelled = r->cancel;
    pthread_mutex_unlock(&r->mu);
    /* a cancelled request's pages back at once (a finished one's cache kept) */
    if (cancelled && s->shared)
        glesllm_truncate(sl->c, 0);
    /* the slot free before the client hears of its end: /metrics never
     * counts a request answered as still processing */
    pthread_mutex_lock(&s->mu);
    s->met.predicted_s += sl->generating ? now() - sl->t_gen : 0.0;
    sl->req = NULL;
    s->kv_kept -= sl->kept;
    sl->kept = 0;
    note_pages(s);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&r->mu);
    if (upto > sl->emitted)
        append_locked(r, sl->gen + sl->emitted, upto - sl->emitted);
    r->finish = why;
    if (status && !r->err_status) {
        r->err_status = status;
        snprintf(r->err, sizeof r->err, "%s", err);
    }
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last)
        req_free(r);
}

/* ---- the reply's text: stop strings and split characters --------------------- */

/* Where gen[0..n) ends in the middle of a UTF-8 character, the length
 * before that character. */
static size_t utf8_complete(const char *g, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)g[i - 1] & 0xC0) == 0x80)
        i--, back++;
    if (i == 0)
        return n;
    unsigned char lead = (unsigned char)g[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return back + 1 >= need ? n : i - 1;
}

/* After a new piece: 1 when a stop string is in the reply (*at its start),
 * else 0 with as much of the reply given to the client as cannot be the
 * start of one. */
static int emit(slot *sl, size_t *at)
{
    serve_req *r = sl->req;
    size_t n = utf8_complete(sl->gen, sl->n_gen);
    for (int i = 0; i < r->n_stop; i++) {
        size_t k = strlen(r->stop[i]);
        size_t from = sl->emitted;
        for (size_t p = from; k && p + k <= sl->n_gen; p++)
            if (!memcmp(sl->gen + p, r->stop[i], k)) {
                *at = p;
                return 1;
            }
    }
    size_t hold = 0; /* the longest tail that a stop string starts with */
    for (int i = 0; i < r->n_stop; i++) {
        size_t k = strlen(r->stop[i]);
        for (size_t h = k > 0 ? k - 1 : 0; h > hold; h--)
            if (h <= n && !memcmp(sl->gen + n - h, r->stop[i], h)) {
                hold = h;
                break;
            }
    }
    if (n - hold > sl->emitted) {
        pthread_mutex_lock(&r->mu);
        append_locked(r, sl->gen + sl->emitted, n - hold - sl->emitted);
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        sl->emitted = n - hold;
    }
    return 0;
}

static bool add_piece(slot *sl, const glesllm_model *m, int32_t tok)
{
    char piece[256];
    size_t k = glesllm_token_piece(m, tok, 0, piece, sizeof piece);
    if (k > sizeof piece)
        k = sizeof piece;
    if (sl->n_gen + k > sl->cap_gen) {
        size_t cap = (sl->n_gen + k) * 2 + 256;
        char *g = realloc(sl->gen, cap);
        if (!g)
            return false;
        sl->gen = g;
        sl->cap_gen = cap;
    }
    memcpy(sl->gen + sl->n_gen, piece, k);
    sl->n_gen += k;
    return true;
}

/* ---- the worker --------------------------------------------------------------- */

static uint32_t common_prefix(const glesllm_context *c, const int32_t *ids, uint32_t n)
{
    uint32_t k = 0, past = glesllm_context_n_past(c);
    while (k < n && k < past && glesllm_context_token(c, k) == ids[k])
        k++;
    return k;
}

/* The KV pages to keep for r: its prompt's and max_tokens' positions (a
 * slot's at most; without max_tokens its prompt's). */
static uint32_t pages_for(const serve *s, const serve_req *r)
{
    uint64_t n = r->n_prompt + (r->n_predict >= 0 ? (uint64_t)r->n_predict : 0);
    if (n > s->p.n_ctx)
        n = s->p.n_ctx;
    uint64_t pages = (n + s->kv_page - 1) / s->kv_page;
    return pages < s->kv_pages ? (uint32_t)pages : s->kv_pages;
}

/* Under s->mu: the waiting requests into free slots, each into the one
 * whose cache holds the longest start of its prompt, while the pool has
 * pages to keep for them (first come, first served). */
static void admit(serve *s)
{
    s->kv_wait = false;
    while (s->head) {
        serve_req *r = s->head;
        uint32_t need = s->shared ? pages_for(s, r) : 0;
        if (s->shared && s->kv_kept + need > s->kv_pages) {
            s->kv_wait = true;
            return;
        }
        slot *best = NULL;
        uint32_t best_k = 0;
        for (unsigned i = 0; i < s->p.n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->req)
                continue;
            uint32_t k = common_prefix(sl->c, r->prompt, r->n_prompt);
            if (sl->draft) { /* (both caches hold what the prompt passes skip) */
                uint32_t d = common_prefix(sl->draft, r->prompt, r->n_prompt);
                k = d < k ? d : k;
            }
            if (!best || k > best_k)
                best = sl, best_k = k;
        }
        if (!best)
            return;
        /* a longer start of the prompt in another slot's cache (a shared
         * system prompt): copied, not run again */
        slot *from = NULL;
        uint32_t from_k = best_k;
        for (unsigned i = 0; s->shared && i < s->p.n_slots; i++) {
            slot *sl = &s->slots[i];
            uint32_t k = sl == best ? 0 : common_prefix(sl->c, r->prompt, r->n_prompt);
            if (k > from_k)
                from = sl, from_k = k;
        }
        if (from && from_k >= best_k + 16 &&
            glesllm_copy_seq(best->c, from->c, from_k) == GLESLLM_OK) {
            s->met.shared += from_k - best_k;
            best_k = from_k;
        }
        s->head = r->next;
        if (!s->head)
            s->tail = NULL;
        best->req = r;
        best->kept = need;
        s->kv_kept += need;
        /* the prompt passes run all but its last token, which the first
         * round runs (its logits pick the first token) */
        best->pos = best_k < r->n_prompt - 1 ? best_k : r->n_prompt - 1;
        memcpy(best->ids, r->prompt, sizeof *r->prompt * r->n_prompt);
        best->n_ids = r->n_prompt;
        best->generating = false;
        best->n_gen = best->emitted = 0;
        best->t0 = now();
    }
}

/* The pool is full: an idle slot's cache (the longest) given back, else
 * the generating request without max_tokens that holds the most positions
 * ends ("length"; its cache goes the same way next). false: nothing to
 * take back. */
static bool make_room(serve *s)
{
    slot *idle = NULL, *open = NULL;
    uint32_t most_idle = 0, most_open = 0;
    for (unsigned i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        uint32_t n = glesllm_context_n_past(sl->c);
        if (!sl->req && n > most_idle)
            idle = sl, most_idle = n;
        else if (sl->req && sl->generating && sl->req->n_predict < 0 && n > most_open)
            open = sl, most_open = n;
    }
    if (idle) {
        glesllm_truncate(idle->c, 0);
        return true;
    }
    if (open) {
        finish(s, open, "length", utf8_complete(open->gen, open->n_gen), 0, "");
        return true;
    }
    return false;
}

static void fail_decode(serve *s, slot *sl, glesllm_status st)
{
    char msg[256];
    snprintf(msg, sizeof msg, "the GPU step failed: %s", glesllm_last_error());
    finish(s, sl, "stop", sl->emitted, st == GLESLLM_ERR_CANCELLED ? 0 : 500, msg);
}

/* A generated token: its text into the reply; nonzero ends the slot's run
 * (a stop string: sl->stopped, or a cancelled request or a full context:
 * sl->cancelled). */
static int take_token(serve *s, slot *sl, int32_t tok)
{
    serve_req *r = sl->req;
    if (sl->n_ids > s->p.n_ctx) /* (the context is full: the round ends there) */
        return sl->cancelled = true, 1;
    sl->ids[sl->n_ids++] = tok;
    pthread_mutex_lock(&r->mu);
    r->n_gen++;
    bool cancel = r->cancel;
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    s->met.predicted_tokens++;
    pthread_mutex_unlock(&s->mu);
    if (!add_piece(sl, s->m, tok))
        return sl->cancelled = true, 1;
    if (emit(sl, &sl->stop_at))
        return sl->stopped = true, 1;
    if (cancel)
        return sl->cancelled = true, 1;
    return 0;
}

/* take_token for glesllm_generate_tokens */
static int on_token(void *ud, int32_t tok, const char *text, size_t len)
{
    (void)text, (void)len; /* (the slot joins split characters itself: add_piece) */
    void **a = ud;
    return tok < 0 ? 0 : take_token(a[0], a[1], tok);
}

/* A slot still in its prompt: a cache that holds more than the start of
 * the prompt it shares gives the rest back. false: that failed, and the
 * request ended. */
static bool keep_start(serve *s, slot *sl)
{
    glesllm_status st;
    if (glesllm_context_n_past(sl->c) > sl->pos && (st = glesllm_truncate(sl->c, sl->pos))) {
        fail_decode(s, sl, st);
        return false;
    }
    return true;
}

/* Whether r was cancelled; its tokens so far into *n_gen. */
static bool req_cancelled(serve_req *r, uint32_t *n_gen)
{
    pthread_mutex_lock(&r->mu);
    bool cancel = r->cancel;
    *n_gen = r->n_gen;
    pthread_mutex_unlock(&r->mu);
    return cancel;
}

/* One round's work of a busy slot: a prompt pass, or a few tokens (unless
 * batch_step runs it). */
static void step(serve *s, slot *sl, bool batched)
{
    serve_req *r = sl->req;
    uint32_t n_gen;
    if (req_cancelled(r, &n_gen)) {
        finish(s, sl, "stop", sl->emitted, 0, "");
        return;
    }
    glesllm_status st;
    if (!sl->generating) {
        /* (a prompt that fits a shared pass goes into it: batch_step) */
        if ((batched && r->n_prompt - sl->pos <= s->batch_max) || !keep_start(s, sl))
            return;
        uint32_t n = r->n_prompt - 1 - sl->pos;
        if (n > s->p.n_batch)
            n = s->p.n_batch;
        if (n && ((st = glesllm_decode(sl->c, r->prompt + sl->pos, n, sl->pos, 0)) ||
                  (sl->draft && (st = glesllm_decode(sl->draft, r->prompt + sl->pos, n, sl->pos, 0))))) {
            if (st != GLESLLM_ERR_KV_FULL || !make_room(s)) /* (else again next round) */
                fail_decode(s, sl, st);
            return;
        }
        sl->pos += n;
        pthread_mutex_lock(&s->mu);
        s->met.prompt_tokens += n + (sl->pos == r->n_prompt - 1); /* (the last: the first round's) */
        if (sl->pos == r->n_prompt - 1) {
            s->met.prompt_s += now() - sl->t0;
            sl->generating = true;
            sl->t_gen = now();
        }
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (batched)
        return;
    uint32_t round = s->p.round;
    if (r->n_predict >= 0 && (uint32_t)r->n_predict - n_gen < round)
        round = (uint32_t)r->n_predict - n_gen;
    if (!round) {
        finish(s, sl, "length", utf8_complete(sl->gen, sl->n_gen), 0, "");
        return;
    }
    /* a seed a round: glesllm_generate_tokens starts the sampling's random
     * sequence from the seed each call */
    glesllm_sampling sp = r->sampling;
    sp.seed += (uint64_t)n_gen * 0x9e3779b97f4a7c15ull;
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = (int32_t)round;
    gp.ignore_eos = r->ignore_eos;
    glesllm_generate_result res;
    void *ud[2] = { s, sl };
    sl->stopped = sl->cancelled = false;
    if ((st = glesllm_set_sampling(sl->c, &sp)) ||
        (st = glesllm_generate_tokens(sl->c, sl->ids, sl->n_ids, &gp, on_token, ud, &res))) {
        /* (the pool full: the round's tokens so far are the reply's, the
         * rest again next round) */
        if (st != GLESLLM_ERR_KV_FULL || !make_room(s))
            fail_decode(s, sl, st);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->met.drafted += res.n_drafted;
    s->met.accepted += res.n_accepted;
    pthread_mutex_unlock(&s->mu);
    if (sl->stopped)
        finish(s, sl, "stop", sl->stop_at, 0, "");
    else if (sl->cancelled || res.stop == GLESLLM_STOP_EOG)
        finish(s, sl, "stop", utf8_complete(sl->gen, sl->n_gen), 0, "");
    else if (res.stop == GLESLLM_STOP_CONTEXT || sl->n_ids >= s->p.n_ctx ||
             (r->n_predict >= 0 && n_gen + res.n_gen >= (uint32_t)r->n_predict))
        finish(s, sl, "length", utf8_complete(sl->gen, sl->n_gen), 0, "");
}

/* A slot's tokens in a shared pass: a generating slot's last token, or what
 * is left of a prompt (all of it, its last token's logits picking the
 * first token). */
typedef struct pass_entry {
    slot *sl;
    const int32_t *toks;
    uint32_t n;
    bool prompt;
} pass_entry;

/* The slot's first token after its prompt's pass, or its next: into the
 * reply, or the end. */
static void after_pass(serve *s, slot *sl, glesllm_status st)
{
    serve_req *r = sl->req;
    int32_t tok = -1;
    if (st || (st = glesllm_next_token(sl->c, &tok))) {
        fail_decode(s, sl, st);
        return;
    }
    sl->stopped = sl->cancelled = false;
    if (glesllm_token_is_eog(s->m, tok) && !r->ignore_eos)
        finish(s, sl, "stop", utf8_complete(sl->gen, sl->n_gen), 0, "");
    else if (take_token(s, sl, tok))
        finish(s, sl, "stop", sl->stopped ? sl->stop_at : utf8_complete(sl->gen, sl->n_gen), 0,
               "");
}

/* One token of every generating slot and the prompts that fit (whole:
 * those longer ran their own passes in step), in passes of at most
 * batch_max tokens: a new request's prompt goes into the generating
 * slots' pass instead of a pass of its own. */
static void batch_step(serve *s)
{
    pass_entry e[256];
    uint32_t n = 0;
    for (unsigned i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        serve_req *r = sl->req;
        if (!r)
            continue;
        if (!sl->generating) {
            uint32_t left = r->n_prompt - sl->pos;
            if (left > s->batch_max)
                continue;
            if (keep_start(s, sl))
                e[n++] = (pass_entry){ sl, r->prompt + sl->pos, left, true };
            continue;
        }
        uint32_t n_gen;
        if (req_cancelled(r, &n_gen)) {
            finish(s, sl, "stop", sl->emitted, 0, "");
        } else if ((r->n_predict >= 0 && n_gen >= (uint32_t)r->n_predict) ||
                   glesllm_context_n_past(sl->c) + 1 > s->p.n_ctx) {
            finish(s, sl, "length", utf8_complete(sl->gen, sl->n_gen), 0, "");
        } else {
            e[n++] = (pass_entry){ sl, &sl->ids[sl->n_ids - 1], 1, false };
        }
    }
    for (uint32_t b0 = 0, cnt; b0 < n; b0 += cnt) {
        glesllm_context *seqs[PASS_MOST];
        int32_t toks[PASS_MOST];
        uint32_t counts[PASS_MOST], total = 0;
        for (cnt = 0; b0 + cnt < n && total + e[b0 + cnt].n <= s->batch_max; cnt++) {
            seqs[cnt] = e[b0 + cnt].sl->c;
            counts[cnt] = e[b0 + cnt].n;
            memcpy(toks + total, e[b0 + cnt].toks, sizeof *toks * counts[cnt]);
            total += counts[cnt];
        }
        glesllm_status st = glesllm_decode_batch_tokens(seqs, cnt, toks, counts);
        if (st == GLESLLM_ERR_KV_FULL && make_room(s))
            return; /* (these again next round) */
        pthread_mutex_lock(&s->mu);
        if (!st && cnt > 1)
            s->met.batched += cnt;
        for (uint32_t i = b0; i < b0 + cnt; i++)
            if (!st && e[i].prompt) { /* (its prompt in the cache: it generates) */
                slot *sl = e[i].sl;
                s->met.prompt_tokens += e[i].n;
                s->met.prompt_batched += cnt > 1 ? e[i].n : 0;
                s->met.prompt_s += now() - sl->t0;
                sl->pos = sl->req->n_prompt - 1;
                sl->generating = true;
                sl->t_gen = now();
            }
        pthread_mutex_unlock(&s->mu);
        for (uint32_t i = b0; i < b0 + cnt; i++)
            after_pass(s, e[i].sl, st);
    }
}

static void *worker(void *arg)
{
    serve *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        admit(s);
        unsigned busy = 0;
        for (unsigned i = 0; i < s->p.n_slots; i++)
            busy += s->slots[i].req != NULL;
        if (!busy) {
            if (s->stopping)
                break;
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        /* two or more busy slots share a pass (a new prompt beside the
         * generating ones); one generating alone takes a round of
         * pipelined steps, which is faster for one */
        unsigned busy_now = 0;
        for (unsigned i = 0; i < s->p.n_slots; i++)
            busy_now += s->slots[i].req != NULL;
        bool batched = s->batch_max && busy_now >= 2;
        for (unsigned i = 0; i < s->p.n_slots; i++)
            if (s->slots[i].req)
                step(s, &s->slots[i], batched);
        if (batched)
            batch_step(s);
        pthread_mutex_lock(&s->mu);
        note_pages(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_start(glesllm_model *m, const serve_params *p, serve **out)
{
    serve *s = calloc(1, sizeof *s);
    if (!s || !(s->slots = calloc(p->n_slots, sizeof *s->slots))) {
        free(s);
        fprintf(stderr, "glesllm: serve: out of memory\n");
        return 1;
    }
    s->m = m;
    s->p = *p;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    glesllm_context_params cp = { p->n_ctx, p->n_batch, p->draft ? p->draft_max : 0, p->kv_size };
    /* the slots as sequences of one cache, stepped together, where the model
     * lets them and no draft model drafts (else contexts of their own, each
     * its share of the positions) */
    glesllm_context *seqs[256];
    if (!p->draft && p->n_slots <= 256 &&
        glesllm_context_create_seqs(m, &cp, p->n_slots, seqs) == GLESLLM_OK) {
        for (unsigned i = 0; i < p->n_slots; i++)
            s->slots[i].c = seqs[i];
        s->batch_max = glesllm_decode_batch_max(seqs[0]);
        s->batch_max = s->batch_max < PASS_MOST ? s->batch_max : PASS_MOST;
        s->shared = true;
        glesllm_kv_pages(seqs[0], &s->kv_page, NULL, &s->kv_pages);
    } else {
        uint64_t share = p->kv_size / p->n_slots;
        cp.n_ctx = share < p->n_ctx ? (uint32_t)share : p->n_ctx;
        cp.kv_size = 0;
    }
    for (unsigned i = 0; i < p->n_slots; i++) {
        slot *sl = &s->slots[i];
        glesllm_status st = sl->c ? GLESLLM_OK : glesllm_context_create(m, &cp, &sl->c);
        if (!st && p->draft && !(st = glesllm_context_create(p->draft, &cp, &sl->draft)))
            st = glesllm_set_draft(sl->c, sl->draft, p->draft_max, p->draft_min);
        if (!st && !(sl->ids = malloc(sizeof *sl->ids * (glesllm_context_n_ctx(sl->c) + 1))))
            st = GLESLLM_ERR_NO_MEMORY;
        if (st) {
            fprintf(stderr, "glesllm: serve: slot %u of %u (%u positions each%s): %s\n", i + 1,
                    p->n_slots, cp.n_ctx, p->draft ? ", and its draft's" : "",
                    glesllm_last_error());
            serve_free(s);
            return 1;
        }
    }
    s->p.n_ctx = glesllm_context_n_ctx(s->slots[0].c);
    /* a round: a drafting round's most tokens, else a few pipelined steps */
    s->p.round = p->draft ? p->draft_max + 1 : 4;
    if (pthread_create(&s->thread, NULL, worker, s)) {
        fprintf(stderr, "glesllm: serve: cannot start the worker thread\n");
        serve_free(s);
        return 1;
    }
    s->started = true;
    *out = s;
    return 0;
}

void serve_stop(serve *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    bool running = s->started && !s->stopping;
    s->stopping = true;
    /* waiting requests end at once; running ones after their current token */
    while (s->head) {
        serve_req *r = s->head;
        s->head = r->next;
        refuse_locked(r);
        if (--r->refs == 0)
            req_free(r);
    }
    s->tail = NULL;
    for (unsigned i = 0; i < s->p.n_slots; i++)
        if (s->slots[i].req) {
            pthread_mutex_lock(&s->slots[i].req->mu);
            s->slots[i].req->cancel = true;
            pthread_mutex_unlock(&s->slots[i].req->mu);
        }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (running)
        pthread_join(s->thread, NULL);
    for (unsigned i = 0; i < s->p.n_slots; i++) {
        glesllm_context_free(s->slots[i].c);
        glesllm_context_free(s->slots[i].draft);
        s->slots[i].c = s->slots[i].draft = NULL;
    }
}

void serve_free(serve *s)
{
    if (!s)
        return;
    serve_stop(s);
    for (unsigned i = 0; i < s->p.n_slots; i++) {
        free(s->slots[i].gen);
        free(s->slots[i].ids);
    }
    free(s->slots);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

void serve_get_metrics(serve *s, serve_metrics *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->met;
    out->slots = s->p.n_slots;
    out->kv_size = s->shared ? s->p.kv_size : (uint64_t)s->p.n_slots * s->p.n_ctx;
    for (serve_req *r = s->head; r; r = r->next)
        out->deferred++;
    out->deferred_kv = s->kv_wait ? out->deferred : 0;
    out->kv_page = s->kv_page;
    out->kv_pages = s->kv_pages;
    out->kv_pages_used = s->kv_used;
    out->kv_pages_kept = s->kv_idle;
    out->kv_used = s->kv_tokens;
    for (unsigned i = 0; i < s->p.n_slots; i++)
        out->slots_busy += s->slots[i].req != NULL;
    out->processing = out->slots_busy;
    pthread_mutex_unlock(&s->mu);
}
