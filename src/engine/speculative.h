/* engine/: speculative decoding, a draft model proposing tokens that the
 * target checks in one batched pass. */
#ifndef GLESLLM_ENGINE_SPECULATIVE_H
#define GLESLLM_ENGINE_SPECULATIVE_H

#include "engine/decode_loop.h"

/* engine_generate with o->draft set (speculative.c). Greedy: the same ids as
 * without the draft. Sampling: each drafted token is kept with probability
 * min(1, p/q) (p, q: the target's and the draft's distributions after the
 * sampler's cuts), else replaced by a draw from max(0, p - q): the text
 * follows the target's distribution. */
glesllm_status engine_speculative(gpu_model *gm, const gen_options *o, gen_stats *stats);

#endif
