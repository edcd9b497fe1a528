/* api/: the public interface (glesllm.h) over the engine's layers. The
 * handles, their checks, and entering a backend: its lock, and its GL
 * context made current for the call. */
#ifndef GLESLLM_API_API_H
#define GLESLLM_API_API_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "common/error.h"
#include "common/tuning.h"
#include "engine/decode_loop.h"
#include "gguf/gguf.h"
#include "glesllm.h"
#include "gpu/gpu.h"
#include "model/gpu_model.h"
#include "model/model.h"
#include "text/sampler.h"
#include "text/vocab.h"

/* Each handle starts with its kind's tag, so that a handle of another kind
 * (or a freed one whose memory was not reused) is refused. */
enum { TAG_BACKEND = 0x474c4231, TAG_MODEL = 0x474c4d31, TAG_CONTEXT = 0x474c4331 };

struct glesllm_backend {
    uint32_t tag;
    gpu_context *gpu;
    tuning tune;
    glesllm_log_fn log;
    void *log_ud;
    pthread_mutex_t lock; /* held by the thread inside a call that uses the GPU */
    uint32_t n_models;    /* models of it not yet freed */
};

struct glesllm_model {
    uint32_t tag;
    glesllm_backend *b; /* NULL: no GPU (queries and text only) */
    uint8_t *demo;      /* the demo model's file in memory */
    gguf_file *f;
    model m;
    vocab *voc;         /* NULL when the file's vocabulary could not be read: */
    char vocab_err[512];/* why */
    char *chat_template;/* tokenizer.chat_template, NULL when absent */
    glesllm_model_params params;
    uint32_t refs;      /* the caller's (until closed) and one a context */
    bool closed;
    /* the weights on the GPU: those of the first context made, which later
     * contexts share; a context freed while others still read its weights
     * leaves its GPU model here until the last goes */
    gpu_model *weights;
    uint32_t n_contexts;
};

struct glesllm_context {
    uint32_t tag;
    glesllm_model *m;
    gpu_model *gm;
    glesllm_sampling sampling;
    sampler smp;
    volatile sig_atomic_t cancel;
    glesllm_context *draft;
    uint32_t draft_max, draft_min;
    /* the last glesllm_decode: its last position, batch, whether it kept
     * every logit, and what it left for glesllm_next_token (GPU_STEP_ARGMAX
     * or GPU_STEP_CANDIDATES; 0: nothing to read) */
    uint32_t last_pos, last_n;
    bool last_all;
    unsigned last_pick;
    /* glesllm_context_create_seqs: its sequence of the shared cache, the
     * group's count of passes (each context's logits are its last pass's
     * until another of the group runs one: pass_id), and the row of its
     * logits in a glesllm_decode_batch (-1: none) */
    uint32_t seq;
    struct api_seq_group *group;
    uint64_t pass_id;
    int32_t batch_row;
};

/* The contexts sharing one cache (glesllm_context_create_seqs). */
typedef struct api_seq_group {
    uint32_t refs;
    uint64_t passes;
} api_seq_group;

/* The backend's lock (GLESLLM_ERR_BUSY when another thread holds it, or
 * waiting for it when wait) and its context made current; api_leave
 * undoes both. */
typedef struct api_call {
    glesllm_backend *b;
    gpu_current cur;
} api_call;
glesllm_status api_enter(glesllm_backend *b, bool wait, api_call *call);
/* api_enter for a call on c: its checks, then the backend entered and c's
 * sequence of a shared cache selected. */
glesllm_status api_enter_context(glesllm_context *c, api_call *call);
/* A pass on c's cache: the group's others' logits are gone. */
void api_context_ran(glesllm_context *c);
void api_leave(api_call *call);

/* A message to a log callback (fn NULL: dropped). */
void api_log(glesllm_log_fn fn, void *ud, glesllm_log_level level, const char *fmt, ...)
    GLESLLM_PRINTF(4, 5);
/* the model's log, else the backend's */
#define MODEL_LOG(m, level, ...)                                                                   \
    api_log((m)->params.log ? (m)->params.log : (m)->b ? (m)->b->log : NULL,                       \
            (m)->params.log ? (m)->params.log_ud : (m)->b ? (m)->b->log_ud : NULL, level,          \
            __VA_ARGS__)

/* The handle checks: an error naming what is wrong with the handle. */
glesllm_status api_check_backend(const glesllm_backend *b);
glesllm_status api_check_model(const glesllm_model *m);
/* ... and for a context, that its model is still open */
glesllm_status api_check_context(const glesllm_context *c);
/* the model's vocabulary, or the error that it has none */
glesllm_status api_vocab(const glesllm_model *m, const vocab **out);

/* Drops one reference of m (a context freed, or the caller's close); frees
 * it with the last. Needs the GPU current where it holds weights. */
void api_model_release(glesllm_model *m);

/* The context's sampling as the engine takes it. */
sampler_params api_sampler_params(const glesllm_sampling *s);

#endif
