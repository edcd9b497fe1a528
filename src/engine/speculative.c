/* Speculative decoding: the draft proposes k tokens one step at a time; the
 * target runs the last accepted token and the k drafted ones as one small
 * batch (the weights read once for all of them) and keeps the longest prefix
 * it agrees with, plus one token of its own. Both caches are then rolled back
 * past the rejected positions (gpu_model_truncate: no copy).
 *
 * State between rounds: hist[0..pos] are the prompt and the tokens generated
 * so far; the target's cache holds positions [0, pos) (hist[pos] is not run
 * yet), the draft's [0, dpast) with dpast <= pos.
 *
 * Greedy, the length of each round is draft_length_pick's: the one with the
 * most tokens a second by what the rounds so far cost and kept, down to 0
 * (when --draft-min allows it) where drafting does not pay. Then the target
 * runs plain steps (pipelined as engine_generate's) for a stretch that
 * doubles each time, up to PLAIN_MAX tokens, each stretch followed by one
 * round of drafting, so that a draft that starts to pay is seen, as long as
 * the draft's catching up on the stretch costs little (draft_costs_probe).
 * Sampling keeps a length that follows acceptance only (not timings), so
 * that a seed gives the same text every run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "engine/draft_length.h"
#include "engine/speculative.h"

typedef struct spec {
    gpu_model *gm, *dm;
    const gen_options *o;
    gen_stats *stats;
    bool greedy;
    sampler smp;
    uint32_t n_ctx, n_vocab, last_n, n_cand;
    float penalty;
    int32_t *hist;       /* n_ctx + 1 */
    uint32_t dpast;
    sampler_dist *q;     /* the draft's distribution of each drafted token */
    sampler_dist p;
    float *logits;       /* (draft_max + 1) rows of the target's logits */
} spec;

static glesllm_status put_tokens(gpu_model *m, const int32_t *hist, uint32_t from, uint32_t to)
{
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = from; st == GLESLLM_OK && i <= to; i++)
        st = gpu_model_set_token(m, i, hist[i]);
    return st;
}

/* The draft runs hist[dpast..pos] and then proposes k tokens, into
 * hist[pos + 1 .. pos + k] (greedy: its argmax; sampling: a draw from its
 * distribution, kept in s->q). */
static glesllm_status draft(spec *s, uint32_t pos, uint32_t k)
{
    gpu_model *dm = s->dm;
    unsigned pick = s->greedy ? GPU_STEP_ARGMAX : GPU_STEP_CANDIDATES;
    glesllm_status st = put_tokens(dm, s->hist, s->dpast, pos);
    if (!st)
        st = pos > s->dpast ? gpu_model_prefill(dm, s->dpast, pos - s->dpast + 1, pick)
                            : gpu_model_step(dm, pos, pick);
    float vals[GPU_MAX_CANDIDATES], gmax, gsum;
    int32_t ids[GPU_MAX_CANDIDATES];
    for (uint32_t i = 1; st == GLESLLM_OK && i <= k; i++) {
        if (!s->greedy) {
            /* each draw needs the last: wait for every step */
            if ((st = gpu_model_wait(dm)))
                break;
            uint32_t n = gpu_model_candidates(dm, vals, ids, &gmax, &gsum);
            sampler_dist_make(&s->o->sampling, vals, ids, n, gmax, gsum, &s->q[i - 1]);
            s->hist[pos + i] = sampler_draw(&s->smp, &s->q[i - 1]);
            if (s->hist[pos + i] < 0 || (st = gpu_model_set_token(dm, pos + i, s->hist[pos + i])))
                break;
        }
        /* greedy: the argmax went into slot pos + i on the GPU, where this
         * step reads it; the steps queue up without a wait */
        if (i < k)
            st = gpu_model_step(dm, pos + i, pick);
    }
    if (!st)
        st = gpu_model_wait(dm);
    for (uint32_t i = 1; st == GLESLLM_OK && s->greedy && i <= k; i++)
        s->hist[pos + i] = gpu_model_get_token(dm, pos + i);
    for (uint32_t i = 1; st == GLESLLM_OK && i <= k; i++)
        if (s->hist[pos + i] < 0 || (uint32_t)s->hist[pos + i] >= s->n_vocab)
            st = err_set(GLESLLM_ERR_GL, "the draft model produced no valid token (NaN logits?)");
    s->dpast = pos + k;
    return st;
}

/* The target's distribution at position `at` from its logits row (what
 * GPU_STEP_CANDIDATES and the sampler make of it in a plain step). */
static void target_dist(spec *s, float *row, uint32_t at)
{
    uint32_t lo = at + 1 > s->last_n ? at + 1 - s->last_n : 0;
    sampler_penalize(row, s->n_vocab, s->hist + lo, at + 1 - lo, s->penalty);
    float vals[SAMPLER_MAX_CANDIDATES], gmax, gsum;
    int32_t ids[SAMPLER_MAX_CANDIDATES];
    uint32_t n = sampler_top(row, s->n_vocab, s->n_cand, vals, ids, &gmax, &gsum);
    sampler_dist_make(&s->o->sampling, vals, ids, n, gmax, gsum, &s->p);
}

/* One round at pos with k drafted tokens: the target checks them, the kept
 * ones and the target's own token are emitted. *go: whether to continue;
 * *accepted: drafted tokens kept. */
static glesllm_status verify(spec *s, uint32_t pos, uint32_t k, uint32_t *accepted, bool *go)
{
    gpu_model *gm = s->gm;
    glesllm_status st = put_tokens(gm, s->hist, pos, pos + k);
    if (!st)
        st = gpu_model_prefill(gm, pos, k + 1,
                               s->greedy ? GPU_STEP_ARGMAX_ALL : GPU_STEP_ALL_LOGITS);
    if (!st && !s->greedy)
        st = gpu_model_read_logits_all(gm, 0, k + 1, s->logits);
    if (!st)
        st = gpu_model_wait(gm);
    if (st)
        return st;
    uint32_t a = 0;
    int32_t tok = -1;
    for (;; a++) {
        if (s->greedy) {
            tok = gpu_model_get_token(gm, pos + a + 1); /* the target's argmax after pos + a */
        } else {
            target_dist(s, s->logits + (size_t)a * s->n_vocab, pos + a);
            if (a == k)
                tok = sampler_draw(&s->smp, &s->p);
            else if (sampler_speculative(&s->smp, &s->p, &s->q[a], s->hist[pos + a + 1], &tok))
                tok = s->hist[pos + a + 1];
        }
        if (tok < 0 || (uint32_t)tok >= s->n_vocab)
            return err_set(GLESLLM_ERR_GL, "the GPU produced no valid token (NaN logits?)");
        bool keep = a < k && tok == s->hist[pos + a + 1];
        s->hist[pos + a + 1] = tok;
        if (!engine_emit(s->o, s->stats, tok)) {
            *go = false;
            break;
        }
        if (!keep)
            break;
    }
    *accepted = a;
    /* the target ran hist[pos .. pos + k]; positions up to pos + a had the
     * tokens that stay. The draft ran hist[dpast_old .. pos + k - 1]. */
    st = gpu_model_truncate(gm, pos + a + 1);
    uint32_t dkeep = pos + a + 1 < s->dpast ? pos + a + 1 : s->dpast;
    if (!st)
        st = gpu_model_truncate(s->dm, dkeep);
    s->dpast = dkeep;
    return st;
}

/* Plain greedy steps of the target from pos (hist[pos] not run yet): see
 * engine_greedy_steps. */
static glesllm_status plain_steps(spec *s, uint32_t *pos, uint32_t n, bool *go, double *step_s)
{
    glesllm_status st = gpu_model_set_token(s->gm, *pos, s->hist[*pos]);
    if (st)
        return st;
    return engine_greedy_steps(s->gm, s->o, s->stats, pos, n, s->hist, go, step_s);
}

static glesllm_status check_pair(const gpu_model *gm, const gpu_model *dm)
{
    if (gpu_model_n_vocab(gm) != gpu_model_n_vocab(dm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the draft model's vocabulary has %u tokens, the target's %u: a draft "
                       "must share the target's vocabulary", gpu_model_n_vocab(dm),
                       gpu_model_n_vocab(gm));
    if (gpu_model_n_ctx(dm) < gpu_model_n_ctx(gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the draft model's context (%u) is smaller than the target's (%u)",
                       gpu_model_n_ctx(dm), gpu_model_n_ctx(gm));
    if (gpu_model_n_small(gm) < 2)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "speculative decoding needs the target's small batches (n_small >= 2)");
    return GLESLLM_OK;
}

/* a plain stretch's longest (tokens); its first is as long as the draft
 * catches up on in one small batch (gpu_model_n_small: the several-token
 * kernels, not the tiled prefill, which costs the draft about a step a token
 * there; bench/RESULTS.md "Verifying drafted tokens") */
#define PLAIN_MAX 256

static glesllm_status run(spec *s)
{
    const gen_options *o = s->o;
    gen_stats *stats = s->stats;
    uint32_t kmax = o->draft_max ? o->draft_max : GEN_DRAFT_MAX_DEFAULT;
    if (kmax > gpu_model_n_small(s->gm) - 1)
        kmax = gpu_model_n_small(s->gm) - 1;
    uint32_t kmin = o->draft_min < kmax ? o->draft_min : kmax, k = kmax;
    glesllm_status st = GLESLLM_OK;
    if (!s->greedy) {
        s->n_cand = sampler_candidates(&o->sampling);
        st = gpu_model_set_sampling(s->dm, s->n_cand, s->penalty, s->last_n);
    }
    /* The prompt but its last token in the draft; in the target (from what
     * its cache lacks) the prompt but its last token too with sampling (the
     * first round checks the first drafted token against the last prompt
     * token's logits), and greedy the whole prompt, as engine_generate runs
     * it, whose argmax is the first token: the cache's entries of the prompt
     * and that token are then the ones plain decoding makes (GPU_STEP_PLAIN:
     * through the kernels of the target without the small batches raised for
     * the verifying passes, as engine_generate's run has them). */
    double t0 = now_seconds();
    uint32_t n = o->n_prompt, pos = n - 1, end = s->greedy ? n : pos;
    uint32_t first = o->n_cached < pos ? o->n_cached : pos;
    memcpy(s->hist, o->prompt, n * sizeof *s->hist);
    bool stopped = false;
    if (!st && first < end && !(st = put_tokens(s->gm, s->hist, first, end - 1)))
        st = engine_prefill(s->gm, o, first, end,
                            GPU_STEP_PLAIN | (s->greedy ? GPU_STEP_ARGMAX : 0), &stopped);
    if (!st && !stopped && pos && !(st = put_tokens(s->dm, s->hist, 0, pos - 1)))
        st = engine_prefill(s->dm, o, 0, pos, 0, &stopped);
    if (!st && first == end)
        st = gpu_model_truncate(s->gm, end);
    s->dpast = pos;
    if (!st && !(st = gpu_model_wait(s->gm)))
        st = gpu_model_wait(s->dm);
    stats->n_prompt = stopped ? gpu_model_n_past(s->gm) : n; /* (what was run) */
    stats->prompt_s = now_seconds() - t0;
    stats->stop = stopped ? GEN_STOP_REQUESTED : GEN_STOP_N_PREDICT;
    if (st || stopped)
        return st;
    double t1 = now_seconds();
    draft_costs costs;
    draft_costs_init(&costs);
    uint32_t small = gpu_model_n_small(s->dm);
    uint32_t stretch = small > 3 ? small - 2 : 1; /* + the lag a round leaves and hist[pos] */
    bool probe = false; /* a round of drafting after a plain stretch */
    bool go = o->n_predict != 0;
    if (go && s->greedy) { /* the prompt's argmax */
        int32_t tok;
        if ((st = engine_argmax_token(s->gm, n, &tok)))
            return st;
        s->hist[++pos] = tok;
        go = engine_emit(o, stats, tok);
    }
    while (go && st == GLESLLM_OK) {
        if (o->stop && *o->stop) {
            stats->stop = GEN_STOP_REQUESTED;
            break;
        }
        if (pos >= s->n_ctx) {
            stats->stop = GEN_STOP_CONTEXT;
            break;
        }
        /* greedy, without --draft-min: two plain steps first (what drafting
         * must beat: the second's time, the first's overhead of starting the
         * pipeline left out), then the length that pays */
        bool opening = s->greedy && !kmin && !stats->n_rounds && !(costs.pass_s[0] > 0.0);
        if (s->greedy)
            k = opening ? 0 : draft_length_pick(&costs, probe && !kmin ? 1 : kmin, kmax, NULL);
        probe = false;
        if (k == 0 && s->greedy) {
            /* plain steps: no more than are still wanted, the last at n_ctx - 1 */
            uint32_t np = opening ? 2 : stretch; /* (2: a step once pipelined) */
            np = np < s->n_ctx - pos ? np : s->n_ctx - pos;
            if (o->n_predict >= 0 && np > (uint32_t)o->n_predict - stats->n_gen)
                np = (uint32_t)o->n_predict - stats->n_gen;
            uint32_t gen0 = stats->n_gen;
            double r0 = now_seconds();
            double step_s;
            st = plain_steps(s, &pos, np, &go, &step_s);
            stats->verify_s += now_seconds() - r0;
            stats->n_plain += stats->n_gen - gen0;
            if (stats->n_gen > gen0)
                draft_costs_pass(&costs, 0, step_s);
            if (!opening) {
                stretch = 2 * stretch < PLAIN_MAX ? 2 * stretch : PLAIN_MAX;
                probe = draft_costs_probe(&costs);
            }
            continue;
        }
        /* positions pos .. pos + kk must fit the context; no more drafted
         * tokens than are still wanted */
        uint32_t kk = k < s->n_ctx - 1 - pos ? k : s->n_ctx - 1 - pos;
        if (o->n_predict >= 0 && kk + 1 > (uint32_t)o->n_predict - stats->n_gen)
            kk = (uint32_t)o->n_predict - stats->n_gen - 1;
        /* tokens the draft has not run but hist[pos]: one after a round
         * that kept every drafted token, three at the start (greedy: the
         * prompt's last token and the opening steps'), more after plain
         * steps (then its drafting is mostly catching up) */
        uint32_t lag = pos - s->dpast;
        double r0 = now_seconds();
        if (kk && (st = draft(s, pos, kk)))
            break;
        double r1 = now_seconds();
        uint32_t a = 0;
        st = verify(s, pos, kk, &a, &go);
        double r2 = now_seconds();
        stats->draft_s += r1 - r0;
        stats->verify_s += r2 - r1;
        if (st)
            break;
        stats->n_rounds++;
        stats->n_drafted += kk;
        stats->n_accepted += a;
        pos += a + 1;
        if (kk && lag <= 3)
            draft_costs_drafted(&costs, kk, r1 - r0);
        else if (kk && costs.draft_s > 0.0)
            draft_costs_catch_up(&costs, lag, r1 - r0 - kk * costs.draft_s);
        if (kk) /* (0 drafted is the last token's pass, not a plain step) */
            draft_costs_pass(&costs, kk, r2 - r1);
        draft_costs_round(&costs, kk, a);
        /* sampling: grow while everything is kept, else a little past what
         * was kept */
        if (a == kk && kk == k)
            k = k + 2 < kmax ? k + 2 : kmax;
        else if (a < kk)
            k = a + 1 > kmin ? a + 1 : kmin;
    }
    stats->gen_s = now_seconds() - t1;
    stats->dispatches_per_token = gpu_model_last_dispatches(s->gm);
    return st;
}

glesllm_status engine_speculative(gpu_model *gm, const gen_options *o, gen_stats *stats)
{
    glesllm_status st = check_pair(gm, o->draft);
    /* the kernels of the verification passes (and of the draft's catching up
     * after a rejection), before the clock starts */
    if (st == GLESLLM_OK)
        st = gpu_model_prepare_small(gm);
    if (st == GLESLLM_OK)
        st = gpu_model_prepare_small(o->draft);
    if (st)
        return st;
    spec s;
    memset(&s, 0, sizeof s);
    s.gm = gm;
    s.dm = o->draft;
    s.o = o;
    s.stats = stats;
    s.greedy = o->sampling.temp <= 0.0f;
    sampler_init(&s.smp, &o->sampling);
    s.n_ctx = gpu_model_n_ctx(gm);
    s.n_vocab = gpu_model_n_vocab(gm);
    s.last_n = o->sampling.repeat_last_n < 0 ? s.n_ctx : (uint32_t)o->sampling.repeat_last_n;
    s.penalty = o->sampling.repeat_penalty > 0.0f ? o->sampling.repeat_penalty : 1.0f;
    uint32_t rows = gpu_model_n_small(gm);
    s.hist = malloc((s.n_ctx + 1) * sizeof *s.hist);
    if (!s.greedy) {
        s.q = malloc(rows * sizeof *s.q);
        s.logits = malloc((size_t)rows * s.n_vocab * sizeof *s.logits);
    }
    if (!s.hist || (!s.greedy && (!s.q || !s.logits)))
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for speculative decoding");
    else
        st = run(&s);
    free(s.hist);
    free(s.q);
    free(s.logits);
    return st;
}
