/* quant/: GGUF block layouts and the CPU reference dequantizers (no GL).
 *
 * Each block is declared here exactly as GGUF stores it (packed bytes, little
 * endian, `ggml_half` = IEEE binary16 bits), pinned by _Static_assert to the
 * byte size of gguf_types.c. The GPU layouts (repacked, structure of arrays)
 * will be declared next to their GLSL twins; these are the file's.
 *
 * A "row" is ne[0] values, a whole number of blocks. */
#ifndef GLESLLM_QUANT_H
#define GLESLLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "glesllm.h"

typedef uint16_t ggml_half;

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* Q4_0: x = (q - 8) * d; q[j] in the low nibbles of qs (j < 16), q[j+16] high */
typedef struct block_q4_0 { ggml_half d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
/* Q4_1: x = q * d + m */
typedef struct block_q4_1 { ggml_half d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
/* Q5_0: x = (q - 16) * d; bit 4 of q[j] is bit j of qh (little-endian u32) */
typedef struct block_q5_0 { ggml_half d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
/* Q5_1: x = q * d + m */
typedef struct block_q5_1 { ggml_half d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
/* Q8_0: x = q * d */
typedef struct block_q8_0 { ggml_half d; int8_t qs[QK8_0]; } block_q8_0;
/* Q2_K: 16 sub-blocks of 16; 4-bit scale and 4-bit min per sub-block; 2-bit q */
typedef struct block_q2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; ggml_half d, dmin; } block_q2_K;
/* Q3_K: 16 sub-blocks of 16; 6-bit signed scales packed in 12 bytes; 2 low
 * bits in qs, the third (inverted: set means +0, clear means -4) in hmask */
typedef struct block_q3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; ggml_half d; } block_q3_K;
/* Q4_K: 8 sub-blocks of 32; 6-bit scale and min each, packed in 12 bytes */
typedef struct block_q4_K { ggml_half d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
/* Q5_K: as Q4_K plus a fifth bit per value in qh */
typedef struct block_q5_K { ggml_half d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
/* Q6_K: 16 sub-blocks of 16 with int8 scales; 4 low bits in ql, 2 high in qh; q - 32 */
typedef struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; ggml_half d; } block_q6_K;

_Static_assert(sizeof(block_q4_0) == 18, "Q4_0 block is 18 bytes in GGUF");
_Static_assert(sizeof(block_q4_1) == 20, "Q4_1 block is 20 bytes in GGUF");
_Static_assert(sizeof(block_q5_0) == 22, "Q5_0 block is 22 bytes in GGUF");
_Static_assert(sizeof(block_q5_1) == 24, "Q5_1 block is 24 bytes in GGUF");
_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes in GGUF");
_Static_assert(sizeof(block_q2_K) == 84, "Q2_K block is 84 bytes in GGUF");
_Static_assert(sizeof(block_q3_K) == 110, "Q3_K block is 110 bytes in GGUF");
_Static_assert(sizeof(block_q4_K) == 144, "Q4_K block is 144 bytes in GGUF");
_Static_assert(sizeof(block_q5_K) == 176, "Q5_K block is 176 bytes in GGUF");
_Static_assert(sizeof(block_q6_K) == 210, "Q6_K block is 210 bytes in GGUF");

float quant_half_to_float(ggml_half h);
ggml_half quant_float_to_half(float f); /* round to nearest even */

/* Whether the CPU reference can dequantize this ggml type. */
int quant_supported(uint32_t type);

/* Dequantizes n values (a multiple of the type's block) from `src`, laid out
 * as GGUF stores them, into y. */
glesllm_status quant_dequantize(uint32_t type, const void *src, float *y, size_t n);

/* Whether quant_quantize can produce this type (quant_cpu.c). */
int quant_can_quantize(uint32_t type);

/* Quantizes n values (a multiple of the type's block) into GGUF blocks. */
glesllm_status quant_quantize(uint32_t type, const float *x, void *dst, size_t n);

#endif
