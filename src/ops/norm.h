/* ops/: RMSNorm (glsl/rms_norm.comp), y = x * w / sqrt(mean(x^2) + eps).
 *
 *   rms    whole rows, a work group a row (prefill, and a decode step whose
 *          norm is not split)
 *   prep   the first half of a norm split across two kernels, for one row:
 *          y = x * w, not scaled, and partial sums of the squares of x
 *          (NORM_WG a work group) that the next matvec (built with
 *          norm_scale) adds up before it scales its sums */
#ifndef GLESLLM_OPS_NORM_H
#define GLESLLM_OPS_NORM_H

#include <stdint.h>

#include "gpu/gpu.h"

#define NORM_WG 128u

typedef struct norm_kernels {
    gpu_program rms, prep;
} norm_kernels;

glesllm_status norm_build(gpu_context *ctx, norm_kernels *out);
void norm_destroy(norm_kernels *k);

/* rows of n values at float offsets x_off, y_off of act, stride floats
 * apart; the weight's n values at w_off. */
glesllm_status norm_record_rms(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                               uint32_t n, float eps, uint32_t stride, uint64_t w_off,
                               uint64_t x_off, uint64_t y_off, uint32_t rows);

/* prep's work groups for a row of n (a group for each 4 NORM_WG columns),
 * each writing NORM_WG partial sums. */
uint32_t norm_prep_groups(uint32_t n);

/* prep of the row at x_off into y_off, its partial sums at sq_off
 * (norm_prep_groups(n) * NORM_WG of them). */
glesllm_status norm_record_prep(gpu_queue *q, const norm_kernels *k, const gpu_buffer *act,
                                uint32_t n, uint64_t w_off, uint64_t x_off, uint64_t y_off,
                                uint64_t sq_off);

#endif
