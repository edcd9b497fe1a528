/* Random weight tensors in GGUF layout, for tests and benchmarks: random
 * floats for float types; random bytes for quantized ones (every level and
 * scale bit pattern), with the f16 scales of each block set to finite values
 * of either sign. No test framework here. */
#ifndef GLESLLM_RANDOM_WEIGHTS_H
#define GLESLLM_RANDOM_WEIGHTS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

/* byte offsets of the f16 scale fields of a block (then -1) */
static inline const int *rw_half_fields(uint32_t t)
{
    static const int d0[] = { 0, -1 }, dm[] = { 0, 2, -1 }, q2k[] = { 80, 82, -1 },
                     q3k[] = { 108, -1 }, q6k[] = { 208, -1 };
    switch (t) {
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: return dm;
    case GGML_TYPE_Q2_K: return q2k;
    case GGML_TYPE_Q3_K: return q3k;
    case GGML_TYPE_Q6_K: return q6k;
    default: return d0;
    }
}

static inline uint64_t rw_next(uint64_t *s) { return splitmix64(s); }

static inline float rw_float(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rw_next(s) >> 11) * (1.0 / 9007199254740992.0));
}

/* malloc'd rows x cols tensor of `type`, its size in *bytes; NULL on failure */
static inline void *random_weights(uint64_t *seed, uint32_t type, uint64_t rows, uint64_t cols,
                                   size_t *bytes)
{
    uint64_t ne[2] = { cols, rows }, n;
    if (ggml_tensor_bytes(type, 2, ne, &n) != GLESLLM_OK)
        return NULL;
    uint8_t *p = malloc((size_t)n);
    if (!p)
        return NULL;
    *bytes = (size_t)n;
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
        enum { CHUNK = 4096 };
        float f[CHUNK];
        uint32_t es = ggml_type_size(type);
        for (uint64_t i = 0; i < rows * cols; i += CHUNK) {
            size_t m = rows * cols - i < CHUNK ? (size_t)(rows * cols - i) : CHUNK;
            for (size_t j = 0; j < m; j++)
                f[j] = rw_float(seed, -1.0f, 1.0f);
            quant_quantize(type, f, p + i * es, m);
        }
        return p;
    }
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v = rw_next(seed);
        memcpy(p + i, &v, 8);
    }
    for (size_t i = n / 8 * 8; i < n; i++)
        p[i] = (uint8_t)rw_next(seed);
    uint32_t ts = ggml_type_size(type);
    for (size_t b = 0; b < n / ts; b++)
        for (const int *h = rw_half_fields(type); *h >= 0; h++) {
            ggml_half v = quant_float_to_half(rw_float(seed, -0.05f, 0.05f));
            memcpy(p + b * ts + *h, &v, 2);
        }
    return p;
}

#endif
