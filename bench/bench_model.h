/* What the benchmark programs that run a whole model share: opening a GGUF
 * model on the GPU (exiting with a clear error when that fails) and closing
 * it again. */
#ifndef GLESLLM_BENCH_MODEL_H
#define GLESLLM_BENCH_MODEL_H

#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/gpu_model.h"
#include "model/model.h"

typedef struct bench_model {
    gguf_file *f;
    model m;
    gpu_context *ctx;
    gpu_model *gm;
} bench_model;

/* Opens `path` with the GPU options and the engine's tuning from the
 * environment and a cache of `mo` (mo.n_ctx positions; its tuning, where
 * NULL, the environment's); on failure prints "prog: what: error" to stderr
 * and exits with status 1. */
static inline void bench_model_open(const char *prog, const char *path, const gpu_model_options *mo,
                                    bench_model *b)
{
    gpu_options go;
    static tuning tune;
    gpu_model_options o = *mo;
    const char *what = "the environment";
    glesllm_status st = tuning_from_env(&tune);
    if (!o.tuning)
        o.tuning = &tune;
    if (!st)
        what = "the model";
    if (!st)
        st = gguf_open(path, &b->f);
    if (!st && (st = model_open(b->f, &b->m)) == GLESLLM_OK) {
        what = "the GPU";
        if (!(st = gpu_options_from_env(&go)) && !(st = gpu_context_create(&go, &b->ctx))) {
            what = "loading the model";
            st = gpu_model_create(b->ctx, &b->m, &o, &b->gm);
        }
    }
    if (st) {
        fprintf(stderr, "%s: %s: %s\n", prog, what, glesllm_last_error());
        exit(1);
    }
}

static inline void bench_model_close(bench_model *b)
{
    gpu_model_destroy(b->gm);
    gpu_context_destroy(b->ctx);
    model_close(&b->m);
    gguf_close(b->f);
}

#endif
