/* Choosing the next token from the candidates the GPU reduced the logits
 * to (model/gpu_model.h, GPU_STEP_CANDIDATES), in llama.cpp's order: repetition
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

/* The distribution a pick draws from: the kept candidates and their
 * probabilities (summing to 1). Greedy: the first candidate, probability 1. */
typedef struct sampler_dist {
    uint32_t n;
    int32_t ids[SAMPLER_MAX_CANDIDATES];
    double p[SAMPLER_MAX_CANDIDATES];
} sampler_dist;

/* sampler_pick's distribution for these candidates. Returns d->n. */
uint32_t sampler_dist_make(const sampler_params *p, const float *vals, const int32_t *ids,
                           uint32_t n, float gmax, float gsum_exp, sampler_dist *d);
/* The probability of id in d (0 when it is not kept). */
double sampler_dist_prob(const sampler_dist *d, int32_t id);
/* One draw from d (-1 when it is empty). */
int32_t sampler_draw(sampler *s, const sampler_dist *d);

/* Speculative sampling: `drafted` was drawn from the draft's distribution;
 * it is accepted with probability min(1, p(drafted) / q(drafted)), else
 * *out is drawn from the residual max(0, p - q) normalised, so *out follows
 * the target's distribution whatever the draft's. Returns whether it was
 * accepted (*out == drafted then). */
bool sampler_speculative(sampler *s, const sampler_dist *target, const sampler_dist *draft,
                         int32_t drafted, int32_t *out);

/* What GPU_STEP_CANDIDATES does, on the CPU for a row of logits: the
 * repetition penalty of the ids in window[0..n) (each distinct id once) ... */
void sampler_penalize(float *logits, uint32_t n_vocab, const int32_t *window, uint32_t n,
                      float penalty);
/* ... and the k largest logits in falling order (vals, ids), the largest
 * logit and the sum of exp(l - max) over the row. Returns how many (k, or
 * n_vocab when smaller). */
uint32_t sampler_top(const float *logits, uint32_t n_vocab, uint32_t k, float *vals, int32_t *ids,
                     float *gmax, float *gsum_exp);

#endif
