/* ops/: the matrix-vector kernels (glsl/matvec.comp, glsl/matvec_multi.comp): y[y_off + r] (+)=
 * sum_c W[r][c] x[x_off + c] for one token (a decode step) or a few tokens a
 * dispatch (small batches, verifying drafted tokens), with the epilogues a
 * transformer layer needs (residual add, SiLU gate, Q/K/V with bias, RoPE and
 * the KV-cache write) and the RMSNorm folded into the input. */
#ifndef GLESLLM_OPS_MATVEC_H
#define GLESLLM_OPS_MATVEC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/tuning.h"
#include "gpu/gpu.h"
#include "ops/kv_layout.h"
#include "ops/weight.h"

/* How a matvec program divides its work (glsl/matvec.comp, glsl/matvec_multi.comp). */
typedef struct matvec_config {
    uint32_t wg;      /* invocations per work group */
    uint32_t tpr;     /* threads per row: a power of two dividing wg */
    uint32_t nr;      /* rows per thread */
    bool subgroup;    /* GL_KHR_shader_subgroup reduction (tpr a multiple of its size) */
    bool xsh;         /* several tokens: their x staged in shared memory, tpr units at a
                         time (matvec_multi_config: where it fits; GLESLLM_MULTI_XSH=0 off) */
    bool x_once;      /* one token, f16 products, rows of at most 4096 columns: x made into
                         f16 pairs once a work group in shared memory (matvec.comp X_ONCE;
                         by default every quantized format's, GLESLLM_X_ONCE=0 none) */
    uint32_t xb;      /* several tokens: consecutive invocations on one unit of x, each
                         on its own rows (so a warp's reads of x are one address; 0 or 1:
                         a row's lanes consecutive); a power of two, wg a multiple of
                         xb * tpr */
    bool xg;          /* several tokens, f16 products: x made ready once a dispatch
                         (glsl/x_prep.comp, the norm folded in) and read by every lane
                         from memory, instead of staged (xsh) */
    uint32_t prep_wg; /* xg: x_prep.comp's work group (the one-token kernel's, whose
                         sum of squares it repeats: matvec_multi_config) */
    uint32_t vl;      /* xg: the one-token kernel's lanes each lane stands in for (its
                         tpr / this tpr, matvec_multi_config; matvec_multi.comp XG_VL), or 1;
                         with subgroup, tpr is the subgroup's size (else, as only tests
                         ask, the sums are not the one-token kernel's to the bit) */
} matvec_config;

/* The configuration used for a rows x cols tensor under the context's limits,
 * and the one for kernels of nt > 1 tokens a dispatch (matvec_variant.nt). */
matvec_config matvec_default_config(gpu_context *ctx, const tuning *t, uint32_t type,
                                    uint64_t rows, uint64_t cols);
matvec_config matvec_multi_config(gpu_context *ctx, const tuning *t, uint32_t type, uint32_t nt,
                                  uint64_t rows, uint64_t cols);
/* Halves cfg->xb until wg is a multiple of xb * tpr (a split changed after
 * matvec_multi_config chose xb). */
void matvec_fit_xb(matvec_config *c);
/* Shared memory a matvec of nt tokens needs with this configuration. */
uint32_t matvec_shared_bytes(const matvec_config *c, uint32_t nt, bool xsh);

/* The most tokens one multi-token matvec dispatch takes (matvec_variant.nt),
 * and the most the model's small batches use by default: on an H100, kernels
 * of 10 tokens ran level with 9 and larger ones slower for every batch
 * (their registers; bench/RESULTS.md "Verifying drafted tokens").
 * GLESLLM_MULTI_NT reaches up to MATVEC_MAX_NT. */
#define MATVEC_MAX_NT 16
#define MATVEC_MULTI_NT 9

/* The most units (32 values) a row may have for x to be staged once a work
 * group (matvec_config.x_once). */
#define X_ONCE_UNITS 128u

/* What a matvec does besides y = W x (glsl/matvec.comp says how). */
typedef enum matvec_epilogue {
    MATVEC_STORE, /* y = W x */
    MATVEC_ADD,   /* y += W x: the residual add */
    MATVEC_GLU,   /* rows interleave gate and up: y[i] = silu(gate_i) * up_i */
    MATVEC_QKV    /* rows are one layer's Q, K, V: bias, RoPE, Q out, K/V into the F16 cache */
} matvec_epilogue;

typedef struct matvec_variant {
    matvec_epilogue epilogue;
    bool norm;                         /* RMSNorm of x folded in */
    uint32_t q_dim, kv_dim, head_dim;  /* MATVEC_QKV */
    bool bias;                         /* MATVEC_QKV: add biases */
    kv_layout kv;                      /* MATVEC_QKV: the cache's pages (page 0: none) */
    uint32_t nt;                       /* matvec only: up to nt tokens a dispatch (0, 1: one) */
    /* One token, the RMSNorm split across two kernels (matvec.comp's
     * NORM_SCALE and NORM_OUT; not with norm): norm_scale: x comes already
     * times the norm weight, with partial sums of its squares
     * (matvec_args.sq_*), and the kernel only scales its sums; norm_out (with
     * MATVEC_ADD): the kernel also writes the new y times the next norm's
     * weight (norm_off) to xg_off and its partial sums of squares to sq_off,
     * matvec_norm_parts of them. */
    bool norm_scale, norm_out;
    /* One token a work-group layer, for mixture-of-experts FFNs (ops/moe.h
     * moe_record_matvec; matvec.comp EXPERT): STORE or GLU, no norm. */
    bool expert;
    bool gelu; /* MATVEC_GLU: the gate through GELU's tanh form, not SiLU (Gemma) */
} matvec_variant;

typedef struct matvec_kernel {
    gpu_program prog;
    uint32_t type;
    matvec_config cfg;
    matvec_variant var;
    bool f16_products; /* products (or, F16_DOT_F32 with several tokens, the staged x)
                          in f16: matvec.c f16_dot_choice */
    bool f16_subnormals; /* levels as f16 subnormals: matvec.c f16_subn_choice */
    bool x_once;         /* x's f16 pairs made once a work group (matvec_config.x_once,
                            where it applies: matvec_build) */
    bool xg;             /* matvec_config.xg where it applies: each dispatch first runs
                            prep (x_prep.comp) into matvec_args.xp_off */
    uint32_t xg_words;   /* xg: uvec4 a unit of x (5 in f16 pairs, 9 in f32 pairs) */
    uint32_t prep_wg;    /* xg: prep's work group */
    gpu_program prep;
} matvec_kernel;

/* Whose matvec levels are f16 subnormals by default (matvec.c
 * f16_subn_choice; named in its env-flag message and by `glesllm info --gpu`) */
#define MATVEC_SUBN_DEFAULT \
    "the quantized formats but Q5_K, Q5_0 and Q8_0 (Q4_K: its one-token kernels but gate/up)"

/* var NULL: MATVEC_STORE. GLU and QKV need cfg->nr even. */
glesllm_status matvec_build(gpu_context *ctx, const tuning *t, uint32_t type,
                            const matvec_config *cfg, const matvec_variant *var, matvec_kernel *out);
void matvec_destroy(matvec_kernel *k);

/* Records y[y_off + r] (+)= W[r] . x[x_off ..] for every row r (one dispatch
 * per part). x_off must be a multiple of 4. */
glesllm_status matvec_record(gpu_queue *q, const matvec_kernel *k, const gpu_weight *w,
                             const gpu_buffer *x, uint64_t x_off, const gpu_buffer *y,
                             uint64_t y_off);

/* The per-dispatch values of the norm and QKV variants. Offsets in x's
 * buffer count floats (norm_off a multiple of 4), offsets in y's count uints. */
typedef struct matvec_args {
    uint64_t norm_off; /* the norm weight */
    float eps;
    uint64_t rope_off; /* this position's row of the RoPE table (head_dim floats) */
    uint64_t bias_off; /* Q|K|V biases */
    uint64_t k_off, v_off; /* where this position's K and V go */
    /* Several tokens (kernels built with nt >= n_tok; 0 means 1): token t's x
     * at x_off + t * act_stride(cols), its y row at y_off + t * y_stride;
     * QKV: Q of token t at float q_off + t * act_stride(q_dim) in x's buffer,
     * RoPE row, K and V one position further per token. */
    uint32_t n_tok;
    uint64_t y_stride;
    uint64_t q_off;
    /* norm_scale: sq_count partial sums of squares at float sq_off in x's
     * buffer; norm_out: where they go (float sq_off in y's buffer, the
     * product y * norm weight at float xg_off) */
    uint64_t xg_off, sq_off;
    uint32_t sq_count;
    /* An xg kernel with the norm (variant.norm): how the decode step splits
     * the sum of squares before the one-token kernel of the same weight
     * (norm_scale), for x_prep.comp to add it up as that kernel does:
     * sq_count partial sums of sq_rows rows each (a norm_out matvec's:
     * matvec_norm_parts and its nr), or sq_rows 0: of the columns g, g +
     * sq_count, ... (model/pass.c: rms_prep's). sq_count 0: any split
     * (the norm right, not the step's bits). */
    uint32_t sq_rows;
    /* y_hi > 0: only uints [y_lo, y_hi) of y's buffer are written (the
     * barrier tracking: a QKV segment's, gpu_binding.used_begin) */
    uint64_t y_lo, y_hi;
    /* a plain kernel (STORE or ADD, no norm): it uses x's and y's rows only,
     * for the barrier tracking (gpu_binding.used_begin), so that dispatches
     * of disjoint rows run without barriers between them; the caller makes
     * sure no dispatch before the next barrier writes the x rows read */
    bool narrow;
    /* matvec_kernel.xg: room in x's buffer (float offset, 16-byte aligned) for
     * the tokens' units, matvec_xg_floats of them */
    uint64_t xp_off;
    /* QKV with pages (matvec_variant.kv): several tokens of different
     * sequences (a batch over them), token t's entry (seq << 24) | position
     * giving its RoPE row (rope_off then the table's start) and its cache
     * row (k_off, v_off then the cache's start); or kv_run: token t's cache
     * row that of entry kv_first + t (a run of one sequence's positions;
     * k_off and v_off the cache's start). Neither: the rows follow each
     * other from rope_off, k_off and v_off. */
    const uint32_t *seq_tab;
    bool kv_run;
    uint32_t kv_first;
} matvec_args;

/* Floats of x's buffer to leave for the units of x of n tokens of rows of
 * `cols` columns, enough for any matvec_kernel.xg kernel (room sized before
 * the kernels are built); and those a built kernel's units take. */
uint64_t matvec_xg_room(uint64_t cols, uint32_t n);
uint64_t matvec_xg_floats(const matvec_kernel *k, uint64_t cols, uint32_t n);

/* How many partial sums of squares a norm_out kernel writes for w. */
uint32_t matvec_norm_parts(const matvec_kernel *k, const gpu_weight *w);

/* matvec_record with the norm/QKV values. For GLU and QKV, y_off is the
 * global row of the weight's first row (GLU: twice the output offset). */
glesllm_status matvec_record_args(gpu_queue *q, const matvec_kernel *k, const gpu_weight *w,
                                  const gpu_buffer *x, uint64_t x_off, const gpu_buffer *y,
                                  uint64_t y_off, const matvec_args *a);

/* The defines of an epilogue, and its params in a dispatch whose other
 * params are set (matvec.comp and matmul.comp share them): y = W x and
 * y += W x are one program, told apart by a param (Y_ADD, common.glsl). */
void matvec_epilogue_defines(const matvec_variant *v, char *buf, size_t n);
void matvec_epilogue_params(matvec_epilogue e, gpu_dispatch *d);

#endif
