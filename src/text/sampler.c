/* Token sampling over the GPU's candidates. See sampler.h. */
#include "text/sampler.h"

#include <math.h>

#include "common/util.h"


sampler_params sampler_defaults(void)
{
    sampler_params p = { 0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0 };
    return p;
}

uint32_t sampler_candidates(const sampler_params *p)
{
    if (p->temp <= 0.0f)
        return 1;
    if (p->top_k > 0 && p->top_k < SAMPLER_MAX_CANDIDATES)
        return (uint32_t)p->top_k;
    return SAMPLER_MAX_CANDIDATES;
}

void sampler_init(sampler *s, const sampler_params *p)
{
    s->p = *p;
    s->state = p->seed;
}

static double uniform01(sampler *s) /* [0, 1) */
{
    return (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0);
}

int32_t sampler_pick(sampler *s, const float *vals, const int32_t *ids, uint32_t n, float gmax,
                     float gsum_exp)
{
    const sampler_params *p = &s->p;
    if (n == 0)
        return -1;
    if (p->temp <= 0.0f || n == 1)
        return ids[0];
    /* top-k: the candidates are the k largest already */
    if (p->top_k > 0 && (uint32_t)p->top_k < n)
        n = (uint32_t)p->top_k;
    /* top-p and min-p on the untempered probabilities (llama.cpp applies the
     * temperature last): over the candidates when top-k is on, else over the
     * vocabulary */
    double norm = 0.0;
    if (p->top_k > 0) {
        for (uint32_t i = 0; i < n; i++)
            norm += exp((double)vals[i] - vals[0]);
    } else {
        norm = gsum_exp * exp((double)gmax - vals[0]);
    }
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        for (uint32_t i = 0; i < n; i++) {
            cum += exp((double)vals[i] - vals[0]) / norm;
            if (cum >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  l_i >= l_max + log(min_p) */
        double cut = vals[0] + log((double)p->min_p);
        uint32_t keep = 1;
        while (keep < n && vals[keep] >= cut)
            keep++;
        n = keep;
    }
    double w[SAMPLER_MAX_CANDIDATES], total = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        w[i] = exp(((double)vals[i] - vals[0]) / p->temp);
        total += w[i];
    }
    double r = uniform01(s) * total;
    for (uint32_t i = 0; i < n; i++) {
        r -= w[i];
        if (r < 0.0)
            return ids[i];
    }
    return ids[n - 1];
}
