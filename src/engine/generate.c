/* The generate loop. See generate.h. */
#include "engine/generate.h"

#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/util.h"
#include "engine/speculative.h"

_Static_assert(SAMPLER_MAX_CANDIDATES == GPU_MAX_CANDIDATES, "sampler and GPU candidate counts");

glesllm_status engine_generate(gpu_model *gm, const gen_options *o, gen_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    uint32_t n_ctx = gpu_model_n_ctx(gm);
    if (!o->n_prompt)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the prompt is empty");
    if (o->n_prompt > n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the prompt has %u tokens, more than the context of %u; use a larger -c",
                       o->n_prompt, n_ctx);
    if (o->n_cached > gpu_model_n_past(gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "%u prompt tokens said to be cached, but the cache holds %u", o->n_cached,
                       gpu_model_n_past(gm));
    if (o->draft)
        return engine_speculative(gm, o, stats);
    bool greedy = o->sampling.temp <= 0.0f;
    sampler smp;
    sampler_init(&smp, &o->sampling);
    uint32_t last_n = o->sampling.repeat_last_n < 0 ? n_ctx : (uint32_t)o->sampling.repeat_last_n;
    float penalty = o->sampling.repeat_penalty > 0.0f ? o->sampling.repeat_penalty : 1.0f;
    glesllm_status st = GLESLLM_OK;
    if (!greedy)
        st = gpu_model_set_sampling(gm, sampler_candidates(&o->sampling), penalty, last_n);
    unsigned pick = greedy ? GPU_STEP_ARGMAX : GPU_STEP_CANDIDATES;
    double t0 = now_seconds();
    /* the prompt: batched passes (chunks of the model's batch size) of what
     * the cache lacks; at least the last token, for its logits */
    uint32_t first = o->n_cached < o->n_prompt ? o->n_cached : o->n_prompt - 1;
    bool stopped = false;
    for (uint32_t i = 0; st == GLESLLM_OK && i < o->n_prompt; i++)
        st = gpu_model_set_token(gm, i, o->prompt[i]);
    if (!st)
        st = engine_prefill(gm, o, first, o->n_prompt, pick, &stopped);
    if (!st)
        st = gpu_model_wait(gm);
    stats->n_prompt = stopped ? gpu_model_n_past(gm) : o->n_prompt; /* (what was run) */
    stats->prompt_s = now_seconds() - t0;
    stats->stop = stopped ? GEN_STOP_REQUESTED : GEN_STOP_N_PREDICT;
    if (st || stopped)
        return st;
    double t1 = now_seconds();
    uint32_t pos = o->n_prompt; /* the slot of the next token */
    if (greedy) {
        /* the prompt's argmax, then the pipelined steps to the context's end */
        bool go = o->n_predict != 0;
        if (go && engine_stop_requested(o)) {
            stats->stop = GEN_STOP_REQUESTED;
            go = false;
        }
        int32_t tok;
        if (go && !(st = engine_argmax_token(gm, pos, &tok)))
            go = engine_emit(o, stats, tok);
        while (go && st == GLESLLM_OK) {
            if (pos >= n_ctx) {
                stats->stop = GEN_STOP_CONTEXT;
                break;
            }
            st = engine_greedy_steps(gm, o, stats, &pos, n_ctx - pos, NULL, &go, NULL);
        }
    }
    float vals[GPU_MAX_CANDIDATES], gmax, gsum;
    int32_t ids[GPU_MAX_CANDIDATES];
    while (!greedy) {
        if (o->n_predict == 0)
            break;
        if (engine_stop_requested(o)) {
            stats->stop = GEN_STOP_REQUESTED;
            break;
        }
        uint32_t n = gpu_model_candidates(gm, vals, ids, &gmax, &gsum);
        int32_t tok = sampler_pick(&smp, vals, ids, n, gmax, gsum);
        if (tok >= 0 && (st = gpu_model_set_token(gm, pos, tok)))
            break;
        if (tok < 0) {
            st = err_set(GLESLLM_ERR_GL, "the GPU produced no valid token (NaN logits?)");
            break;
        }
        if (!engine_emit(o, stats, tok))
            break;
        if (pos >= n_ctx) {
            stats->stop = GEN_STOP_CONTEXT;
            break;
        }
        double r0 = now_seconds();
        st = gpu_model_step(gm, pos, pick);
        stats->record_s += now_seconds() - r0;
        if (st || (st = gpu_model_wait(gm)))
            break;
        pos++;
    }
    stats->gen_s = now_seconds() - t1;
    stats->dispatches_per_token = gpu_model_last_dispatches(gm);
    return st;
}
