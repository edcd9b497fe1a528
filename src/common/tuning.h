/* The engine's tuning: work splits, kernel variants and placements that it
 * otherwise chooses itself from the GPU's limits and each tensor's shape
 * (docs/tuning.md says what each does). Read from the environment once, at
 * the edge (the CLI and the bench programs: tuning_from_env), and passed down
 * (gpu_model_options.tuning, the ops' config and build functions); nothing
 * under engine/, model/ or ops/ reads the environment. A NULL tuning, or
 * TUNING_DEFAULT, leaves every choice to the engine. */
#ifndef GLESLLM_COMMON_TUNING_H
#define GLESLLM_COMMON_TUNING_H

#include <stdint.h>

#include "common/error.h"

/* A choice the engine makes unless it is set. */
enum { TUNE_AUTO = -1, TUNE_OFF = 0, TUNE_ON = 1 };

typedef struct tuning {
    /* forced work splits (n values given; 0: the engine's) */
    uint32_t matvec[3];    /* one-token matvecs: wg, tpr, nr        GLESLLM_MATVEC */
    uint32_t n_matvec;
    uint32_t multi[4];     /* several-token matvecs: wg, tpr, nr, xb GLESLLM_MULTI */
    uint32_t n_multi;
    uint32_t matmul[4];    /* prefill tiles: wg, tm, tn, kind       GLESLLM_MATMUL */
    uint32_t n_matmul;
    int fetch_ahead;       /* rows a group loaded ahead (0, 1, 2, 4, 8) GLESLLM_FETCH_AHEAD */
    /* TUNE_AUTO, TUNE_OFF or TUNE_ON */
    int cpu_splits;        /* one-token splits for a CPU rasteriser  GLESLLM_CPU_SPLITS */
    int f16_dot;           /* f16 products                          GLESLLM_F16_DOT */
    int f16_subn;          /* levels as f16 subnormals              GLESLLM_F16_SUBN */
    int x_once;            /* x's f16 pairs once a work group       GLESLLM_X_ONCE */
    int unroll;            /* one-token row loops unrolled          GLESLLM_UNROLL */
    int multi_xsh;         /* several tokens: x staged              GLESLLM_MULTI_XSH */
    int multi_xg;          /* several tokens: x made ready once     GLESLLM_MULTI_XG */
    int xg_vl;             /* several tokens: stand-in lanes        GLESLLM_XG_VL */
    int fuse_norm;         /* a step's norms split across matvecs   GLESLLM_FUSE_NORM */
    int prefetch;          /* FFN down matrix read into L2          GLESLLM_PREFETCH */
    int rwkv_chunk;        /* RWKV-7's prompts in the chunked form  GLESLLM_RWKV_CHUNK */
    int attn_group;        /* prefill attention a KV head's group a work group GLESLLM_ATTN_GROUP */
    int kv;                /* KV cache: TUNE_AUTO, TUNE_KV_DEVICE, TUNE_KV_MAPPED GLESLLM_KV */
    /* small batches: prefills of at most this many tokens take several-token
     * matvecs (<= 0: none; TUNE_SMALL_AUTO: the engine's)   GLESLLM_SMALL_BATCH */
    long small_batch;
    uint32_t multi_nt;     /* tokens a several-token dispatch (0: the engine's) GLESLLM_MULTI_NT */
    uint32_t kv_page;      /* positions a page of the KV cache (0: the engine's) GLESLLM_KV_PAGE */
    uint32_t prefetch_mib; /* MiB of a down matrix prefetched (0: the engine's) GLESLLM_PREFETCH_MIB */
    /* MiB of the next layer's Q/K/V matrix prefetched beside down (0: none;
     * TUNE_AUTO: the engine's)                             GLESLLM_PREFETCH_QKV_MIB */
    int prefetch_qkv_mib;
    /* prefill products of fewer work groups than this sliced over their
     * columns (0: never; TUNE_AUTO: the engine's)          GLESLLM_MATMUL_SLICES */
    int matmul_slices;
} tuning;

enum { TUNE_KV_DEVICE = 1, TUNE_KV_MAPPED = 2 };
#define TUNE_SMALL_AUTO (-2147483647L - 1)

/* the defaults: TUNING_DEFAULT_INIT initialises a tuning (static ones too),
 * TUNING_DEFAULT is its value */
#define TUNING_DEFAULT_INIT                                                                   \
    { .fetch_ahead = TUNE_AUTO, .cpu_splits = TUNE_AUTO, .f16_dot = TUNE_AUTO,                 \
      .f16_subn = TUNE_AUTO, .x_once = TUNE_AUTO, .unroll = TUNE_AUTO, .multi_xsh = TUNE_AUTO,  \
      .multi_xg = TUNE_AUTO, .xg_vl = TUNE_AUTO, .fuse_norm = TUNE_AUTO,                       \
      .prefetch = TUNE_AUTO, .rwkv_chunk = TUNE_AUTO, .attn_group = TUNE_AUTO, .kv = TUNE_AUTO, \
      .small_batch = TUNE_SMALL_AUTO, .matmul_slices = TUNE_AUTO, .prefetch_qkv_mib = TUNE_AUTO }
#define TUNING_DEFAULT ((tuning)TUNING_DEFAULT_INIT)

/* t, or the defaults when t is NULL */
const tuning *tuning_or_default(const tuning *t);

/* Fills *t from the GLESLLM_* variables above (unset or empty: the
 * engine's choice). A value a variable does not take is an error naming the
 * variable, the value and what it takes; *t is then the defaults. */
glesllm_status tuning_from_env(tuning *t);

#endif
