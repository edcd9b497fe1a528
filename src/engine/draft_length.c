/* How many tokens to draft a round. See draft_length.h. */
#include "engine/draft_length.h"

#include <string.h>

/* weight of the newest measurement in a running average, and how much a
 * round's acceptance counts falls off each round after it */
#define NEW_WEIGHT 0.3
#define ROUND_DECAY 0.95

void draft_costs_init(draft_costs *c) { memset(c, 0, sizeof *c); }

static void average_in(double *avg, double v)
{
    *avg = *avg > 0.0 ? (1.0 - NEW_WEIGHT) * *avg + NEW_WEIGHT * v : v;
}

void draft_costs_drafted(draft_costs *c, uint32_t k, double seconds)
{
    if (k && k <= GEN_DRAFT_MAX_LIMIT && seconds > 0.0)
        average_in(&c->draft_s, seconds / k);
}

void draft_costs_pass(draft_costs *c, uint32_t k, double seconds)
{
    if (k <= GEN_DRAFT_MAX_LIMIT && seconds > 0.0)
        average_in(&c->pass_s[k], seconds);
}

void draft_costs_catch_up(draft_costs *c, uint32_t n, double seconds)
{
    if (n)
        average_in(&c->catch_up_s, (seconds > 0.0 ? seconds : 1e-9) / n);
}

bool draft_costs_probe(const draft_costs *c)
{
    return !(c->catch_up_s > 0.0) || !(c->pass_s[0] > 0.0) ||
           c->catch_up_s <= DRAFT_PROBE_SHARE * c->pass_s[0];
}

void draft_costs_round(draft_costs *c, uint32_t k, uint32_t kept)
{
    if (!k)
        return;
    c->kept = ROUND_DECAY * c->kept + (kept < k ? kept : k);
    c->missed = ROUND_DECAY * c->missed + (kept < k ? 1.0 : 0.0);
}

/* the pass over k drafted tokens: measured, else from the measured passes
 * (see the header); 0 when none is measured */
static double pass_estimate(const draft_costs *c, uint32_t k)
{
    if (c->pass_s[k] > 0.0)
        return c->pass_s[k];
    int lo = -1, hi = -1;
    for (int i = (int)k - 1; i >= 0 && lo < 0; i--)
        if (c->pass_s[i] > 0.0)
            lo = i;
    for (int i = (int)k + 1; i <= GEN_DRAFT_MAX_LIMIT && hi < 0; i++)
        if (c->pass_s[i] > 0.0)
            hi = i;
    if (lo >= 0 && hi >= 0)
        return c->pass_s[lo] + (c->pass_s[hi] - c->pass_s[lo]) * (k - lo) / (hi - lo);
    int m = lo >= 0 ? lo : hi;
    return m < 0 ? 0.0 : c->pass_s[m] * (k + 1) / (m + 1);
}

uint32_t draft_length_pick(const draft_costs *c, uint32_t kmin, uint32_t kmax, double *rate)
{
    if (kmax > GEN_DRAFT_MAX_LIMIT)
        kmax = GEN_DRAFT_MAX_LIMIT;
    if (kmin > kmax)
        kmin = kmax;
    if (rate)
        *rate = 0.0;
    if (!(c->draft_s > 0.0) || !(pass_estimate(c, kmax) > 0.0))
        return kmax;
    /* p with one kept and one rejected token as a prior: no certainty either
     * way from a few rounds */
    double p = (c->kept + 1.0) / (c->kept + c->missed + 2.0);
    uint32_t best = kmax;
    double best_rate = -1.0, tokens = 0.0, pk = 1.0;
    for (uint32_t k = 0; k <= kmax; k++, pk *= p) {
        tokens += pk; /* 1 + p + ... + p^k */
        if (k < kmin)
            continue;
        double r = tokens / (k * c->draft_s + pass_estimate(c, k));
        if (r > best_rate) {
            best_rate = r;
            best = k;
        }
    }
    if (rate)
        *rate = best_rate;
    return best;
}
