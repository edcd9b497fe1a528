/* The CPU reference forward pass: the same math as the GPU decode step in
 * plain f32 loops (weights dequantized row by row, the KV cache rounded to
 * F16 as the GPU stores it). Slow on purpose: it is the oracle tests compare
 * the GPU against, not a backend. */
#ifndef GLESLLM_MODEL_REF_MODEL_H
#define GLESLLM_MODEL_REF_MODEL_H

#include "model/model.h"

typedef struct ref_model ref_model;

glesllm_status ref_model_create(const model *m, uint32_t n_ctx, ref_model **out);
void ref_model_destroy(ref_model *r);

/* Runs `token` at position `pos` (0 <= pos < n_ctx, the cache holds every
 * earlier position) and writes n_vocab logits (logits may be NULL). */
glesllm_status ref_model_forward(ref_model *r, int32_t token, uint32_t pos, float *logits);

#endif
