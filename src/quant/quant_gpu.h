/* quant/: the GPU weight layouts, and the repacking of GGUF rows into them.
 * No GL here: this produces bytes; ops/weight.c uploads them.
 *
 * GLSL twin: glsl/weights.glsl declares the same planes, sizes and value
 * order per format. Change one, change the other (tests/test_matvec.c checks
 * every format against the CPU reference).
 *
 * A tensor of `rows` rows of `cols` values becomes up to four planes stored
 * one after another in one buffer, each starting on a 16-byte boundary. A
 * plane holds, for every block in row-major order (block index row * nb + b,
 * nb blocks per row), plane_bytes[p] bytes. Blocks are the GGUF blocks (32 or
 * 256 values); float types use blocks of 32 with the last one of each row
 * zero-padded, so any column count works.
 *
 * Kernels work on units of 32 consecutive values v[0..31] of a row, with
 * these encodings of the unit's integer levels q[0..31]:
 *   NIB  16 bytes: byte j = q[j] & 15 | (q[j+16] & 15) << 4   (one uvec4)
 *   BYTE 32 bytes: byte j = q[j] (two's complement for Q8_0) (two uvec4)
 *   BIT   4 bytes: bit 8b + k of a little-endian uint = one bit of q[4k+b],
 *                  bit 8b + 4 + k one of q[16+4k+b] (k, b = 0..3)
 *   TWO   8 bytes: uint m (0, 1) holds k = 2m and 2m+1; bits 8b + 4(k&1) hold
 *                  two bits of q[4k+b], bits 8b + 4(k&1) + 2 of q[16+4k+b]
 * so every encoding gives, for k = 0..3, the values 4k..4k+3 and 16+4k..19+4k
 * from one word, value 4k+b (16+4k+b) in byte b: a shift and a mask give the
 * bits of four values at once, one a byte, and the kernels turn the bytes into
 * floats (one byte permute and one add each on NVIDIA; NIB alone, in Q4_0,
 * Q4_1 and Q4_K, goes through f16 mantissas instead: glsl/weights.glsl
 * nib_levels). The kernels consume a unit as eight vec4.
 *
 *   type  block planes (bytes per block)                          GGUF bytes
 *   F32    32   values as f32 (128)                                 128
 *   F16    32   values as packed halves (64)                         64
 *   BF16   32   values as packed bf16 (64)                           64
 *   Q4_0   32   NIB q (16) | d half (2)                              18
 *   Q4_1   32   NIB q (16) | d, m halves (4)                         20
 *   Q5_0   32   NIB q (16) | BIT q>>4 (4) | d (2)                    22
 *   Q5_1   32   NIB q (16) | BIT q>>4 (4) | d, m (4)                 24
 *   Q8_0   32   BYTE q (32) | d (2)                                  34
 *   Q2_K  256   TWO q x8 (64) | K2 scales (16) | d, dmin (4)           84
 *   Q3_K  256   TWO q x8 (64) | BIT hmask x8 (32) | K3 scales (16)   110 (112 here)
 *   Q4_K  256   NIB q x8 (128) | K4 scales (16)                      144
 *   Q5_K  256   NIB q x8 (128) | BIT q>>4 x8 (32) | K4 scales (16)   176
 *   Q6_K  256   NIB q&15 x8 (128) | TWO q>>4 x8 (64) | 16 int8 scales (16) | d (2)  210
 * ("x8": the block's eight units one after another.)
 * K4 scales: u32 words: d | dmin << 16 (halves); low nibbles of the eight
 *   6-bit scales (nibble j = unit j); low nibbles of the eight mins; the high
 *   two bits of scale j at bit 2j and of min j at bit 16 + 2j.
 * K2 scales: u32 words, four 16-value sub-blocks each: word w holds the
 *   4-bit scale of sub-block 4w + i at bit 4i, its min at bit 16 + 4i.
 * K3 scales: u32 words: low nibbles of the 6-bit scales 0..7 (of 16-value
 *   sub-blocks), of scales 8..15, their high two bits at bit 2i, then d (low
 *   half). Scales are stored biased by 32, as in GGUF. Levels q are GGUF's
 * (unsigned, before the format's offset); K formats keep their values in
 * natural order, unlike GGUF's interleaved chunks. */
#ifndef GLESLLM_QUANT_GPU_H
#define GLESLLM_QUANT_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glesllm.h"

#define QGPU_MAX_PLANES 4
#define QGPU_UNIT 32

typedef struct quant_gpu_layout {
    uint32_t type;   /* ggml_type */
    uint32_t block;  /* values per block */
    uint32_t n_planes;
    uint32_t plane_bytes[QGPU_MAX_PLANES];
} quant_gpu_layout;

/* The layout of a ggml type, or NULL when the GPU cannot use it. */
const quant_gpu_layout *quant_gpu_layout_of(uint32_t type);
/* F32, F16 and BF16: rows of plain values, no blocks or scales. */
bool quant_gpu_is_float(uint32_t type);

/* Where the planes of `rows` x `cols` values go in one buffer. */
typedef struct quant_gpu_plan {
    uint32_t type;
    uint64_t rows, cols;
    uint64_t blocks_per_row;
    uint64_t plane_offset[QGPU_MAX_PLANES]; /* bytes, multiples of 16 */
    uint64_t bytes;                          /* total, a multiple of 16 */
} quant_gpu_plan;

glesllm_status quant_gpu_plan_make(uint32_t type, uint64_t rows, uint64_t cols,
                                   quant_gpu_plan *out);

/* Repacks `plan->rows` rows given as GGUF stores them (row after row) into
 * dst (plan->bytes, zeroed padding included). */
glesllm_status quant_gpu_repack(const quant_gpu_plan *plan, const void *src, void *dst);

/* Rows of `cols` values that fit in max_bytes once repacked (at least 1 when
 * a single row fits, else 0). */
uint64_t quant_gpu_rows_within(uint32_t type, uint64_t cols, uint64_t max_bytes);

#endif
