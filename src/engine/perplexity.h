/* engine/: perplexity of a token sequence, as llama.cpp's `perplexity`
 * computes it: the tokens are cut into non-overlapping windows of n_ctx; each
 * window starts from an empty cache with its first token replaced by BOS
 * (when the model has one to add), runs as a batched prefill keeping every
 * position's logits, and the second half of the window is scored: for
 * positions j in [n_ctx / 2, n_ctx - 1), -log softmax(logits_j)[token j + 1].
 * PPL = exp(mean), and its error from the spread of the per-token values. */
#ifndef GLESLLM_ENGINE_PERPLEXITY_H
#define GLESLLM_ENGINE_PERPLEXITY_H

#include <signal.h>
#include <stdint.h>

#include "model/gpu_model.h"

typedef struct ppl_options {
    uint32_t n_ctx;      /* window; at most the model's context */
    int32_t bos;         /* replaces each window's first token; < 0: none */
    uint32_t max_chunks; /* 0: every whole window */
    /* looked at between passes; a window it stops counts for nothing. May be NULL */
    volatile sig_atomic_t *stop;
    /* after each window: its number (from 1), the count, PPL so far */
    void (*progress)(void *ud, uint32_t chunk, uint32_t n_chunks, double ppl);
    void *ud;
    /* each scored position's logits (nv floats) in order, index from 0, and
     * the token after it; nonzero stops the run with GLESLLM_ERR_CANCELLED.
     * May be NULL */
    int (*logits)(void *ud, uint32_t index, const float *logits, uint32_t nv, int32_t next);
} ppl_options;

typedef struct ppl_result {
    double ppl, ppl_err; /* ppl_err: 0 when fewer than two tokens were scored */
    double nll;          /* mean negative log-likelihood */
    uint32_t n_chunks, n_scored;
} ppl_result;

/* Needs at least 2 * n_ctx tokens (as llama.cpp). */
glesllm_status engine_perplexity(gpu_model *gm, const int32_t *tokens, uint32_t n_tokens,
                                 const ppl_options *o, ppl_result *out);

#endif
