/* engine/: what the generate loops share (generate.c, speculative.c): their
 * options and statistics, handing a token to the caller, and runs of greedy
 * steps pipelined on the GPU. */
#ifndef GLESLLM_ENGINE_DECODE_LOOP_H
#define GLESLLM_ENGINE_DECODE_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "model/gpu_model.h"
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
    uint32_t n_cached;         /* prompt tokens whose K/V the cache holds already (a
                                  session file; at most gpu_model_n_past) */
    /* speculative decoding: a draft model of the same vocabulary proposes
     * tokens (draft_min .. draft_max a round) that the target checks in one
     * batched pass; NULL: off. Greedy, each round's length is the one with
     * the most tokens a second by the rounds' measured costs and acceptance
     * (draft_length.h), 0 (plain steps) where drafting does not pay and
     * draft_min is 0; sampling, it follows acceptance only. */
    gpu_model *draft;
    uint32_t draft_max, draft_min;
} gen_options;

typedef struct gen_stats {
    uint32_t n_prompt, n_gen;
    double prompt_s, gen_s;      /* wall time of prompt and generation */
    double record_s;             /* CPU time recording generation steps */
    uint32_t dispatches_per_token;
    gen_stop stop;
    /* speculative decoding: verification passes, tokens drafted, drafted tokens
     * the target accepted, tokens from plain steps (greedy, where drafting
     * did not pay: draft_length.h). A pass makes its kept drafted tokens and
     * the target's own after them (n_accepted + n_rounds in all); greedy,
     * the prompt's pass makes one more, its argmax. */
    uint32_t n_rounds, n_drafted, n_accepted, n_plain;
    double draft_s, verify_s; /* wall time drafting, and verifying or plain steps */
} gen_stats;

/* Tokens drafted a round by default and at most (the target checks at most
 * gpu_model_n_small - 1 drafted tokens a pass: load it with n_small above the
 * draft length). */
#define GEN_DRAFT_MAX_DEFAULT 8
#define GEN_DRAFT_MAX_LIMIT 32

/* whether the caller asked to stop (gen_options.stop) */
static inline bool engine_stop_requested(const gen_options *o) { return o->stop && *o->stop; }

/* The prompt's slots [first, end) into gm's cache, the last token with
 * flags (its argmax or candidates), as one gpu_model_prefill would, in
 * passes of the model's batch size with a stop request looked at between
 * them (a long prompt on a slow GPU is minutes). Each pass is submitted
 * before the one before is waited for. Does not wait for the last; after a
 * stop (*stopped) the cache holds [0, gpu_model_n_past) of the prompt. */
glesllm_status engine_prefill(gpu_model *gm, const gen_options *o, uint32_t first, uint32_t end,
                              unsigned flags, bool *stopped);

/* hands one generated token to the caller;
 * false when generation stops after it (stats->stop says why). */
bool engine_emit(const gen_options *o, gen_stats *stats, int32_t tok);

/* the argmax token the GPU left in slot pos,
 * an error where it is none of the vocabulary's (NaN logits). */
glesllm_status engine_argmax_token(gpu_model *gm, uint32_t pos, int32_t *tok);

/* greedy steps of gm from *pos (its token in
 * slot *pos, the cache holding [0, *pos)), each step submitted before the
 * host waits for the one before, until n tokens are emitted (n <= n_ctx -
 * *pos) or generation stops (*go false: engine_emit's reasons, or a stop
 * request). *pos ends at the slot of the last token emitted, whose step is
 * not run; hist (may be NULL) gets each token at its position. *step_s (may
 * be NULL): seconds a token once the pipeline runs (from the first token's
 * arrival on; the whole time when only one came). */
glesllm_status engine_greedy_steps(gpu_model *gm, const gen_options *o, gen_stats *stats,
                                   uint32_t *pos, uint32_t n, int32_t *hist, bool *go,
                                   double *step_s);

#endif
