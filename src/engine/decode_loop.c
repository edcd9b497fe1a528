/* What the generate loops share. See decode_loop.h. */
#include "engine/decode_loop.h"

#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/util.h"

/* whether the caller wants more than n_gen tokens (n_predict) */
static bool wants_more(const gen_options *o, uint32_t n_gen)
{
    return o->n_predict < 0 || n_gen < (uint32_t)o->n_predict;
}

glesllm_status engine_prefill(gpu_model *gm, const gen_options *o, uint32_t first, uint32_t end,
                              unsigned flags, bool *stopped)
{
    *stopped = false;
    uint32_t nb = gpu_model_n_batch(gm);
    if (end - first <= nb) /* one pass: nothing to look at in between */
        return gpu_model_prefill(gm, first, end - first, flags);
    glesllm_status st = GLESLLM_OK;
    for (uint32_t at = first; at < end;) {
        uint32_t c = end - at < nb ? end - at : nb;
        bool last = at + c == end;
        st = gpu_model_prefill(gm, at, c,
                               GPU_STEP_CHUNK | (last ? flags : flags & GPU_STEP_PLAIN));
        bool first_pass = at == first;
        at += c;
        if (st || last)
            break;
        if (!first_pass && (st = gpu_model_wait_prior(gm)))
            break;
        if (engine_stop_requested(o)) {
            *stopped = true;
            break;
        }
    }
    return st;
}

bool engine_emit(const gen_options *o, gen_stats *stats, int32_t tok)
{
    stats->n_gen++;
    bool eog = !o->ignore_eos && o->vocab && vocab_is_eog(o->vocab, tok);
    if (o->on_token && !o->on_token(o->ud, tok)) {
        stats->stop = GEN_STOP_REQUESTED;
        return false;
    }
    if (eog) {
        stats->stop = GEN_STOP_EOS;
        return false;
    }
    return wants_more(o, stats->n_gen);
}

glesllm_status engine_argmax_token(gpu_model *gm, uint32_t pos, int32_t *tok)
{
    *tok = gpu_model_get_token(gm, pos);
    if (*tok < 0 || (uint32_t)*tok >= gpu_model_n_vocab(gm))
        return err_set(GLESLLM_ERR_GL, "the GPU produced no valid token (NaN logits?)");
    return GLESLLM_OK;
}

glesllm_status engine_greedy_steps(gpu_model *gm, const gen_options *o, gen_stats *stats,
                                   uint32_t *pos_io, uint32_t n, int32_t *hist, bool *go,
                                   double *step_s)
{
    /* The step at pos + 1 takes its token from the slot the step at pos
     * writes on the GPU, so it is submitted before the host waits for the
     * step at pos and reads that slot. `ahead`: the step at pos went out that
     * way already. A step past the end (the token at pos + 1 stops
     * generation) is computed for nothing and its position dropped from the
     * cache afterwards, as if never run. */
    uint32_t pos = *pos_io, n_ctx = gpu_model_n_ctx(gm), emitted = 0;
    double t0 = now_seconds(), t1 = t0;
    bool ahead = false;
    glesllm_status st = GLESLLM_OK;
    while (emitted < n) {
        double r0 = now_seconds();
        if (!ahead)
            st = gpu_model_step(gm, pos, GPU_STEP_ARGMAX);
        /* the step at pos + 1 is needed unless the token at pos + 1 ends it */
        ahead = !st && emitted + 1 < n && pos + 1 < n_ctx && wants_more(o, stats->n_gen + 1);
        if (ahead)
            st = gpu_model_step(gm, pos + 1, GPU_STEP_ARGMAX);
        stats->record_s += now_seconds() - r0;
        if (st || (st = ahead ? gpu_model_wait_prior(gm) : gpu_model_wait(gm)))
            break;
        pos++;
        if (engine_stop_requested(o)) {
            stats->stop = GEN_STOP_REQUESTED;
            *go = false;
            break;
        }
        int32_t tok;
        if ((st = engine_argmax_token(gm, pos, &tok)))
            break;
        if (hist)
            hist[pos] = tok;
        if (!emitted++)
            t1 = now_seconds();
        if (!engine_emit(o, stats, tok)) {
            *go = false;
            break;
        }
    }
    if (ahead) { /* the step at pos ran ahead; generation ended before it */
        glesllm_status st2 = gpu_model_wait(gm);
        if (!st)
            st = st2 ? st2 : gpu_model_truncate(gm, pos);
    }
    *pos_io = pos;
    if (step_s)
        *step_s = emitted > 1 ? (now_seconds() - t1) / (emitted - 1) : now_seconds() - t0;
    return st;
}

