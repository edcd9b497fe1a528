/* The weight kernels' checks that test_matvec and test_batched share: random
 * weights of every GPU format uploaded, run through a kernel and compared
 * with the CPU reference in double, relative to sum |w x| of each row. */
#ifndef GLESLLM_TEST_WEIGHT_CHECK_H
#define GLESLLM_TEST_WEIGHT_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "common/tuning.h"
#include "gpu/gpu.h"
#include "ops/matmul.h"
#include "ops/matvec.h"
#include "test_support.h"

/* the test's context and queue, and the tuning every kernel is configured
 * and built with: the engine's choices unless a test forces one (each
 * test's setUp and tearDown reset it to kernel_tuning()) */
extern gpu_context *ctx;
extern gpu_queue *queue;
extern tuning T;
/* The engine's choices, with a GPU's one-token splits on every device:
 * llvmpipe too, where the engine takes a CPU rasteriser's (test_matvec
 * checks those in a test of their own). */
tuning kernel_tuning(void);

/* f32 accumulation in a different order than the double reference: the
 * error of a row is bounded by n * 2^-24 * sum |w x| and is near
 * sqrt(n) * 2^-24 * sum |w x| in practice (n <= 4096 here: ~4e-6). The
 * tolerance is relative to sum |w x| of the row. */
#define MATVEC_REL_TOL 1e-5
/* F16_DOT (matvec.c f16_dot_choice: the quantized formats, where the driver
 * has f16 types): each value of x, scaled to at most 1, rounded to f16
 * (2^-12 of it), each product of it and a level rounded (2^-12), and the 8
 * products of a half unit a lane added in f16 (7 roundings, each at most
 * 2^-12 of a partial sum, itself at most the sum of |terms|; one more where
 * the two halves' sums add in f16, matvec.comp H_MERGE and XM, whose high
 * half's x / 16 goes subnormal below 2^-10 of the unit's largest value, an
 * absolute error of at most 2^-25 of it), and the
 * K-quants' scales times d (and mins times dmin) rounded to f16 (2^-12 of
 * each; weights.glsl k4_map_h, k23_map, q6k_map): at most about
 * 10 * 2^-12 = 2.4e-3 of sum |w x| for signed levels (Q4_0, Q8_0, and Q5_0,
 * Q3_K, Q6_K less their offset), more in theory for unsigned ones with a
 * min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) and for the signed ones whose offset
 * stays in the sums (levels as f16 subnormals, matvec.c f16_subn_choice);
 * 2.4e-4 the worst seen on an H200. */
#define F16_DOT_REL_TOL 3e-3
/* get_rows dequantizes each value once: a few ulp of the value */
#define ROWS_REL_TOL 1e-6

/* every format the GPU reads */
#define N_FORMATS 13
extern const uint32_t formats[N_FORMATS];

typedef struct mv_case {
    uint32_t type;
    uint64_t rows, cols;
    uint64_t max_part_bytes;
} mv_case;

int is_float(uint32_t t);

void *random_tensor(test_rng *rng, uint32_t type, uint64_t rows, uint64_t cols, size_t *bytes);

float *dequantized(uint32_t type, const void *data, uint64_t rows, uint64_t cols);

/* ref[r] = W[r] . x in double, and mag[r] = sum |W[r][k] x[k]| (at least
 * 1e-30): the scale the tolerances are relative to. */
void reference_rows(const float *w, const float *x, uint64_t rows, uint64_t cols,
                    double *ref, double *mag);

/* Runs y = W x (and y += W x at an offset) with kernel config cfg. */
void check_matvec(const mv_case *c, const matvec_config *cfg, uint64_t seed);

void check_get_rows(const mv_case *c, uint64_t seed);

/* The batched product (prefill): Y[t] = W x[t] for n_tok tokens whose x rows
 * sit act_stride(cols) apart after x_off, y rows y_stride apart after y_off;
 * stored and added. The same through the multi-token matvec when mv is
 * given (kernel of nt tokens, n_tok <= nt), with the norm folded in where
 * norm is set. */
void check_batched(const mv_case *c, const matmul_config *cfg, const matvec_config *mv,
                   uint32_t nt, bool norm, uint32_t n_tok, double tol, uint64_t seed);
/* check_batched through the matmul */
void check_batched_mm(const mv_case *c, const matmul_config *cfg, uint32_t n_tok, double tol,
                      uint64_t seed);

uint64_t min_cols(uint32_t t);

void shapes_for(uint32_t t, mv_case *out, int *n);

/* check(case, t, seed) for every format x shape of shapes_for and t = 0, 1,
 * 2 (the 4096-column shapes with t = 1 only: slow on llvmpipe) */
void every_format_three_ways(void (*check)(const mv_case *c, size_t t, uint64_t seed),
                             uint64_t seed);

#endif
