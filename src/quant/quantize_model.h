/* quant/: quantizing a whole GGUF model (`glesllm quantize`). No GL.
 *
 * Which tensors change and to what follows llama.cpp's llama-quantize, so a
 * file made here has the same tensor types as one made there:
 *   - only 2-D tensors whose name ends in "weight" are quantized (norms and
 *     other 1-D tensors are copied as they are);
 *   - the output matrix (output.weight, or token_embd.weight when the
 *     embeddings are tied) becomes Q6_K, except under Q8_0 (stays Q8_0);
 *   - Q4_K_M: attn_v.weight and ffn_down.weight of the first eighth, the
 *     last eighth and every third layer in between become Q6_K, the rest
 *     Q4_K; Q4_K: every weight Q4_K;
 *   - a row length that is not a whole number of the type's blocks falls
 *     back: Q4_K -> Q5_0, Q6_K -> Q8_0, and to F16 when not even 32 divides
 *     it (reported through the note callback).
 * general.file_type is set to llama.cpp's ftype number and
 * general.quantization_version to 2. */
#ifndef GLESLLM_QUANTIZE_MODEL_H
#define GLESLLM_QUANTIZE_MODEL_H

#include <signal.h>
#include <stdint.h>

#include "glesllm.h"

typedef enum quant_ftype {
    QUANT_FTYPE_Q4_0,
    QUANT_FTYPE_Q8_0,
    QUANT_FTYPE_Q4_K,
    QUANT_FTYPE_Q6_K,
    QUANT_FTYPE_Q4_K_M,
} quant_ftype;

/* "Q4_0", "Q8_0", "Q4_K", "Q6_K", "Q4_K_M" (any case); -1 if unknown. */
int quant_ftype_from_name(const char *name);
const char *quant_ftype_name(quant_ftype f);
/* llama.cpp's LLAMA_FTYPE_MOSTLY_* number written as general.file_type */
uint32_t quant_ftype_gguf_id(quant_ftype f);

/* Progress and notes, both optional. done/total count tensor bytes read. */
typedef struct quant_model_callbacks {
    void (*tensor)(void *ctx, uint64_t index, uint64_t count, const char *name, uint32_t from,
                   uint32_t to, uint64_t done, uint64_t total);
    void (*note)(void *ctx, const char *msg);
    void *ctx;
    /* set (e.g. by a signal handler) to stop; the output is then not written */
    volatile sig_atomic_t *cancel;
    unsigned threads; /* 0: the machine's CPU count */
} quant_model_callbacks;

/* Reads in_path, writes out_path through a temporary file renamed at the
 * end (nothing is left behind on failure or cancel). */
glesllm_status quant_model(const char *in_path, const char *out_path, quant_ftype ftype,
                           const quant_model_callbacks *cb);

#endif
