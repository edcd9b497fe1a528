/* CPU reference operations in f32: the oracle GPU kernels are tested against.
 * Plain loops, written for clarity, not speed. */
#ifndef GLESLLM_MODEL_REF_OPS_H
#define GLESLLM_MODEL_REF_OPS_H

#include <stddef.h>

/* y[r][i] = x[r][i] * w[i] / sqrt(mean_i(x[r][i]^2) + eps), for rows r. */
void ref_rms_norm(float *y, const float *x, const float *w, size_t rows, size_t n, float eps);

#endif
