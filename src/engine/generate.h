/* engine/: the generate loop. A prompt (token ids) goes through the batched
 * prefill, then tokens are picked (greedy on the GPU, or sampled from the
 * GPU's candidates) until n_predict, an end-of-generation token, the end of
 * the context, or a stop request; with a draft model, speculative decoding
 * (speculative.h). */
#ifndef GLESLLM_ENGINE_GENERATE_H
#define GLESLLM_ENGINE_GENERATE_H

#include "engine/decode_loop.h"

glesllm_status engine_generate(gpu_model *gm, const gen_options *o, gen_stats *stats);

#endif
