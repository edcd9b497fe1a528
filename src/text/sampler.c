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

uint32_t sampler_dist_make(const sampler_params *p, const float *vals, const int32_t *ids,
                           uint32_t n, float gmax, float gsum_exp, sampler_dist *d)
{
    d->n = 0;
    if (n == 0)
        return 0;
    if (n > SAMPLER_MAX_CANDIDATES)
        n = SAMPLER_MAX_CANDIDATES;
    if (p->temp <= 0.0f || n == 1) {
        d->ids[0] = ids[0];
        d->p[0] = 1.0;
        return d->n = 1;
    }
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
    double total = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        d->ids[i] = ids[i];
        d->p[i] = exp(((double)vals[i] - vals[0]) / p->temp);
        total += d->p[i];
    }
    for (uint32_t i = 0; i < n; i++)
        d->p[i] /= total;
    return d->n = n;
}

double sampler_dist_prob(const sampler_dist *d, int32_t id)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (d->ids[i] == id)
            return d->p[i];
    return 0.0;
}

int32_t sampler_draw(sampler *s, const sampler_dist *d)
{
    if (d->n == 0)
        return -1;
    double r = uniform01(s), total = 0.0;
    for (uint32_t i = 0; i < d->n; i++)
        total += d->p[i];
    r *= total;
    for (uint32_t i = 0; i < d->n; i++) {
        r -= d->p[i];
        if (r < 0.0)
            return d->ids[i];
    }
    return d->ids[d->n - 1];
}

int32_t sampler_pick(sampler *s, const float *vals, const int32_t *ids, uint32_t n, float gmax,
                     float gsum_exp)
{
    if (n == 0)
        return -1;
    if (s->p.temp <= 0.0f || n == 1)
        return ids[0];
    sampler_dist d;
    sampler_dist_make(&s->p, vals, ids, n, gmax, gsum_exp, &d);
    return sampler_draw(s, &d);
}

bool sampler_speculative(sampler *s, const sampler_dist *target, const sampler_dist *draft,
                         int32_t drafted, int32_t *out)
{
    double p = sampler_dist_prob(target, drafted), q = sampler_dist_prob(draft, drafted);
    /* accept with probability min(1, p / q) */
    if (q > 0.0 && (p >= q || uniform01(s) * q < p)) {
        *out = drafted;
        return true;
    }
    /* rejected: draw from max(0, p - q), normalised */
    sampler_dist r;
    r.n = 0;
    for (uint32_t i = 0; i < target->n; i++) {
        double w = target->p[i] - sampler_dist_prob(draft, target->ids[i]);
        if (w > 0.0) {
            r.ids[r.n] = target->ids[i];
            r.p[r.n++] = w;
        }
    }
    /* p == q up to rounding: the residual is empty, p itself is the answer */
    *out = sampler_draw(s, r.n ? &r : target);
    return false;
}

void sampler_penalize(float *logits, uint32_t n_vocab, const int32_t *window, uint32_t n,
                      float penalty)
{
    if (penalty == 1.0f)
        return;
    for (uint32_t i = 0; i < n; i++) {
        int32_t id = window[i];
        bool later = false; /* each distinct id once */
        for (uint32_t j = i + 1; j < n && !later; j++)
            later = window[j] == id;
        if (later || id < 0 || (uint32_t)id >= n_vocab)
            continue;
        float l = logits[id];
        logits[id] = l > 0.0f ? l / penalty : l * penalty;
    }
}

uint32_t sampler_top(const float *logits, uint32_t n_vocab, uint32_t k, float *vals, int32_t *ids,
                     float *gmax, float *gsum_exp)
{
    if (k > n_vocab)
        k = n_vocab;
    if (k == 0)
        return 0;
    float mx = -INFINITY;
    for (uint32_t i = 0; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        float l = logits[i];
        sum += exp((double)l - mx);
        if (n == k && !(l > vals[k - 1]))
            continue;
        /* insertion into the falling list; equal values keep the lower id first */
        uint32_t j = n < k ? n++ : k - 1;
        while (j > 0 && vals[j - 1] < l) {
            vals[j] = vals[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        vals[j] = l;
        ids[j] = (int32_t)i;
    }
    *gmax = mx;
    *gsum_exp = (float)sum;
    return n;
}
