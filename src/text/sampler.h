/* Choosing the next token from the candidates the GPU reduced the logits
 * to (model/forward.h, GPU_STEP_CANDIDATES), in llama.cpp's order: repetition
 * penalty (on the GPU), top-k, top-p, min-p, temperature, then a draw from
 * a seeded generator, so a seed always gives the same text.
 *
 * top-p over more tokens than the candidate set (SAMPLER_MAX_CANDIDATES) is cut
 * at that set: with top-k off, the probabilities are still normalised over
 * the whole vocabulary, so the nucleus is exact until it needs more. */
#ifndef GLESLLM_TEXT_SAMPLER_H
#define GLESLLM_TEXT_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

/* The most candidates a pick considers (the GPU's GPU_MAX_CANDIDATES). */
#define SAMPLER_MAX_CANDIDATES 256

typedef struct sampler_params {
    float temp;           /* <= 0: greedy */
    int32_t top_k;        /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    int32_t repeat_last_n;/* 0: off, -1: the whole context */
    uint64_t seed;
} sampler_params;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * repeat penalty 1 over the last 64, seed 0 (the caller picks one). */
sampler_params sampler_defaults(void);

/* Candidates the GPU must keep for these parameters. */
uint32_t sampler_candidates(const sampler_params *p);

typedef struct sampler {
    sampler_params p;
    uint64_t state;
} sampler;

void sampler_init(sampler *s, const sampler_params *p);

/* Picks one of n candidates (vals falling, ids); gmax/gsum_exp: the largest
 * logit and sum of exp(l - gmax) over the vocabulary. */
int32_t sampler_pick(sampler *s, const float *vals, const int32_t *ids, uint32_t n, float gmax,
                     float gsum_exp);

#endif
