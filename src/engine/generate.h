/* engine/: the generate loop. A prompt (token ids) goes through the batched
 * prefill, then tokens are picked (greedy on the GPU,
 * or sampled from the GPU's candidates) until n_predict, an end-of-generation
 * token, the end of the context, or a stop request. */
#ifndef GLESLLM_ENGINE_GENERATE_H
#define GLESLLM_ENGINE_GENERATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "model/forward.h"
#include "text/sampler.h"
#include "text/vocab.h"

typedef enum gen_stop {
    GEN_STOP_N_PREDICT,
    GEN_STOP_EOS,
    GEN_STOP_CONTEXT,   /* the context is full */
    GEN_STOP_REQUESTED, /* *stop was set (Ctrl-C) or the callback said so */
} gen_stop;

typedef struct gen_options {
    const int32_t *prompt;
    uint32_t n_prompt;
    int32_t n_predict;         /* < 0: until a stop */
    sampler_params sampling;   /* temp <= 0: greedy */
    bool ignore_eos;
    const vocab *vocab;        /* its end-of-generation tokens stop; NULL: none do */
    volatile sig_atomic_t *stop; /* may be NULL */
    /* each generated token; returning false stops */
    bool (*on_token)(void *ud, int32_t id);
    void *ud;
} gen_options;

typedef struct gen_stats {
    uint32_t n_prompt, n_gen;
    double prompt_s, gen_s;      /* wall time of prompt and generation */
    double record_s;             /* CPU time recording generation steps */
    uint32_t dispatches_per_token;
    gen_stop stop;
} gen_stats;

glesllm_status engine_generate(gpu_model *gm, const gen_options *o, gen_stats *stats);

#endif
