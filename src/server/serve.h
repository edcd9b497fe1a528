/* glesllm serve: an OpenAI-compatible HTTP server on the public interface.
 *
 * HTTP threads (libmicrohttpd, a thread a connection) parse requests and
 * tokenize; one worker thread owns the GPU and advances every admitted
 * request a few tokens a round (a drafting round with --draft), each in a
 * slot. The slots are sequences of one KV cache, a pool of pages that each
 * takes as it grows (else, with a draft model or recurrent layers,
 * contexts of their own that split the -c positions). A request that finds
 * every slot busy, or too few pages free for its prompt and max_tokens,
 * waits in a queue (the metrics' deferred requests). The two sides meet in
 * a serve_req under its lock. */
#ifndef GLESLLM_SERVE_H
#define GLESLLM_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glesllm.h"

#define SERVE_MAX_STOP 4

typedef struct serve_req {
    /* what to do: set by the HTTP side before serve_submit, then read-only */
    int32_t *prompt;
    uint32_t n_prompt;
    int32_t n_predict; /* < 0: until an end-of-generation token or a full context */
    bool ignore_eos;   /* end-of-generation tokens do not stop it (llama-server's) */
    glesllm_sampling sampling;
    char *stop[SERVE_MAX_STOP];
    int n_stop;

    /* what came of it: under mu; cv signalled at each change */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text; /* the reply so far: complete UTF-8, never a stop string's start */
    size_t len, cap;
    bool done;
    const char *finish; /* "stop" (end of generation, a stop string) or "length" */
    uint32_t n_gen; /* tokens generated */
    int err_status;           /* nonzero: an HTTP status, err the message */
    char err[256];
    bool cancel; /* the client went away, or the server stops */

    int refs; /* the HTTP side's and the worker's (under the server's lock) */
    struct serve_req *next;
} serve_req;

typedef struct serve serve;

typedef struct serve_params {
    unsigned n_slots;
    uint32_t n_ctx;   /* positions a slot at most */
    uint64_t kv_size; /* positions of all slots together (the pool of pages) */
    uint32_t n_batch; /* prompt tokens a pass */
    glesllm_model *draft; /* speculative decoding's draft model (NULL: none) */
    uint32_t draft_max;   /* its most tokens drafted a round */
    uint32_t draft_min;   /* its fewest (0: plain steps where drafting does not pay) */
    uint32_t round;       /* (set by serve_start) tokens a slot's turn at most */
} serve_params;

/* Makes n_slots contexts of m and starts the worker. 0, or 1 after saying why. */
int serve_start(glesllm_model *m, const serve_params *p, serve **out);
/* Cancels what runs and waits for it, stops the worker, frees the
 * contexts; a request submitted later is answered 503. */
void serve_stop(serve *s);
/* serve_stop, then the rest (once no HTTP thread uses s). */
void serve_free(serve *s);

uint32_t serve_n_ctx(const serve *s);

/* A request with refs 1 (the caller's); NULL when out of memory. */
serve_req *serve_req_new(void);
/* Hands r to the worker (it takes a reference). */
void serve_submit(serve *s, serve_req *r);
/* Asks the worker to stop r after its current token. */
void serve_cancel(serve *s, serve_req *r);
/* Drops the caller's reference. */
void serve_req_release(serve *s, serve_req *r);

typedef struct serve_metrics {
    uint64_t prompt_tokens, predicted_tokens, requests, drafted, accepted;
    uint64_t batched; /* tokens generated in passes shared with other slots */
    uint64_t prompt_batched; /* prompt tokens run in passes shared with other slots */
    uint64_t shared;  /* prompt tokens copied from another slot's cache, not run */
    double prompt_s, predicted_s;
    unsigned processing, deferred, slots, slots_busy;
    unsigned deferred_kv; /* of the deferred, those waiting for KV pages */
    uint64_t kv_used, kv_size; /* positions held by busy slots, and in all */
    /* the pool: a page's positions, pages held by running requests, pages
     * only idle slots hold (their kept starts, taken back on demand), pages */
    uint32_t kv_page, kv_pages_used, kv_pages_kept, kv_pages;
} serve_metrics;
void serve_get_metrics(serve *s, serve_metrics *out);

#endif
