/* engine/: how many tokens to draft a round in greedy speculative decoding,
 * from what the rounds so far cost and how many of their drafted tokens the
 * target kept.
 *
 * A round of k drafted tokens costs k draft steps and one pass of the target
 * over k + 1 tokens, and yields 1 + p + p^2 + ... + p^k tokens on average
 * when each drafted token is kept with probability p. k = 0 is plain
 * decoding: one target step a token. The length picked is the one with the
 * most tokens a second by the measured costs, so a draft that costs more than
 * it saves (its step close to the target's, or few of its tokens kept) ends
 * up not drafting at all, and a cheap one drafts as far as pays. A pass that
 * was never measured is estimated from the measured ones: linearly between
 * two of them, and beyond them in proportion to its tokens (which, for a
 * pass that reads the weights once for all of its tokens, overrates a longer
 * pass and underrates a shorter one: shorter lengths get tried, and then
 * measured).
 *
 * Leaving plain steps for drafting costs the draft's running of every token
 * the plain steps emitted (its cache must hold them): draft_costs_probe
 * says whether that is cheap enough to try a round of drafting now and then. */
#ifndef GLESLLM_ENGINE_DRAFT_LENGTH_H
#define GLESLLM_ENGINE_DRAFT_LENGTH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/decode_loop.h"

typedef struct draft_costs {
    double draft_s;                        /* seconds a drafted token; 0: not measured */
    double pass_s[GEN_DRAFT_MAX_LIMIT + 1]; /* seconds a round's target pass with k drafted
                                               (k 0: a plain step); 0: not measured */
    double kept, missed; /* decayed counts of drafted tokens kept and of rejections */
    double catch_up_s;   /* seconds a token the draft runs to catch up after plain
                            steps; 0: not measured */
} draft_costs;

void draft_costs_init(draft_costs *c);

/* A measurement: `seconds` for the drafting of k tokens, or for the target's
 * pass over k drafted (k 0: a plain step, per token). Running averages;
 * measurements of k past GEN_DRAFT_MAX_LIMIT, of no tokens, or not positive
 * are ignored. */
void draft_costs_drafted(draft_costs *c, uint32_t k, double seconds);
void draft_costs_pass(draft_costs *c, uint32_t k, double seconds);

/* The draft's catching up on n tokens that plain steps emitted, in
 * `seconds` (what its drafting took beyond its steps). */
void draft_costs_catch_up(draft_costs *c, uint32_t n, double seconds);

/* Whether to draft again after a stretch of plain steps: the draft must then
 * run every token of the stretch first, which pays only if it costs little
 * beside the plain steps (at most PROBE_SHARE of a plain step a token), or is
 * not known yet. */
#define DRAFT_PROBE_SHARE 0.05
bool draft_costs_probe(const draft_costs *c);

/* A round of k drafted tokens of which the target kept `kept` (each kept
 * token one success, a rejection one failure; older rounds count less). */
void draft_costs_round(draft_costs *c, uint32_t k, uint32_t kept);

/* The length in [kmin, kmax] (kmax at most GEN_DRAFT_MAX_LIMIT) with the
 * most expected tokens a second; kmax while the drafting or every pass is
 * unmeasured. *rate (may be NULL): that length's expected tokens a second,
 * 0 when unknown. */
uint32_t draft_length_pick(const draft_costs *c, uint32_t kmin, uint32_t kmax, double *rate);

#endif
