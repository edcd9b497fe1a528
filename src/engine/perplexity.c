/* Perplexity over windows. See perplexity.h. */
#include "engine/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* log softmax(logits)[tok] in double */
static double log_prob(const float *logits, uint32_t n, int32_t tok)
{
    float mx = logits[0];
    for (uint32_t i = 1; i < n; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    return (double)logits[tok] - mx - log(sum);
}

glesllm_status engine_perplexity(gpu_model *gm, const int32_t *tokens, uint32_t n_tokens,
                                 const ppl_options *o, ppl_result *out)
{
    memset(out, 0, sizeof *out);
    uint32_t n_ctx = o->n_ctx, n_batch = gpu_model_n_batch(gm);
    if (n_ctx < 2 || n_ctx > gpu_model_n_ctx(gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "perplexity: a window of %u tokens (the model's context is %u; at least 2)",
                       n_ctx, gpu_model_n_ctx(gm));
    if (n_tokens / 2 < n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the text has %u tokens; perplexity with a context of %u needs at least "
                       "%u: give a longer text or a smaller -c",
                       n_tokens, n_ctx, 2 * n_ctx);
    uint32_t n_chunks = n_tokens / n_ctx;
    if (o->max_chunks && o->max_chunks < n_chunks)
        n_chunks = o->max_chunks;
    uint32_t first = n_ctx / 2;
    float *logits = NULL;
    uint32_t nv = 0;
    double nll = 0.0, nll2 = 0.0;
    uint32_t count = 0;
    glesllm_status st = GLESLLM_OK;
    bool stopped = false;
    for (uint32_t c = 0; st == GLESLLM_OK && c < n_chunks && !stopped; c++) {
        const int32_t *w = tokens + (size_t)c * n_ctx;
        for (uint32_t j = 0; st == GLESLLM_OK && j < n_ctx; j++)
            st = gpu_model_set_token(gm, j, j == 0 && o->bos >= 0 ? o->bos : w[j]);
        /* the window's sums join the totals once it is whole: a stop
         * between its passes leaves the figures of the windows before */
        double wnll = 0.0, wnll2 = 0.0;
        uint32_t wcount = 0;
        for (uint32_t b0 = 0; st == GLESLLM_OK && b0 < n_ctx; b0 += n_batch) {
            if ((c || b0) && o->stop && *o->stop) { /* (before every pass but the first) */
                stopped = true;
                break;
            }
            uint32_t cnt = n_ctx - b0 < n_batch ? n_ctx - b0 : n_batch;
            /* scored positions in this batch: [max(first, b0), min(b0 + cnt, n_ctx - 1)) */
            uint32_t lo = first > b0 ? first : b0;
            uint32_t hi = b0 + cnt < n_ctx - 1 ? b0 + cnt : n_ctx - 1;
            st = gpu_model_prefill(gm, b0, cnt, lo < hi ? GPU_STEP_ALL_LOGITS : 0);
            if (st || lo >= hi)
                continue;
            if (!logits) {
                nv = gpu_model_n_vocab(gm);
                logits = malloc(sizeof(float) * nv * n_batch);
                if (!logits) {
                    st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the logits");
                    break;
                }
            }
            if ((st = gpu_model_read_logits_all(gm, lo - b0, hi - lo, logits)))
                break;
            for (uint32_t j = lo; j < hi; j++) {
                double lp = log_prob(logits + (size_t)(j - lo) * nv, nv, w[j + 1]);
                if (!isfinite(lp)) { /* a result of NaN means nothing */
                    st = err_set(GLESLLM_ERR_FORMAT,
                                 "the logits at position %u of window %u are not finite (NaN or "
                                 "infinite): the model's weights or hyperparameters (RoPE base, "
                                 "norm epsilon) are broken", j, c + 1);
                    break;
                }
                if (o->logits &&
                    o->logits(o->ud, count + wcount, logits + (size_t)(j - lo) * nv, nv, w[j + 1])) {
                    st = err_set(GLESLLM_ERR_CANCELLED, "perplexity: stopped by the logits "
                                                        "callback at scored position %u",
                                 count + wcount);
                    break;
                }
                wnll -= lp;
                wnll2 += lp * lp;
                wcount++;
            }
        }
        if (st || stopped)
            break;
        nll += wnll;
        nll2 += wnll2;
        count += wcount;
        out->n_chunks = c + 1;
        if (o->progress)
            o->progress(o->ud, c + 1, n_chunks, exp(nll / count));
    }
    free(logits);
    if (st)
        return st;
    out->n_scored = count;
    if (!count) /* (stopped inside the first window) */
        return GLESLLM_OK;
    out->nll = nll / count;
    out->ppl = exp(out->nll);
    double var = nll2 / count - out->nll * out->nll;
    out->ppl_err = count > 1 && var > 0 ? sqrt(var / (count - 1)) * out->ppl : 0.0;
    return GLESLLM_OK;
}
