/* The dispatch queue: kernels describe work (program, buffer ranges, groups,
 * parameters); the queue binds, dispatches, and owns the memory barriers.
 * A barrier is placed only before a dispatch that touches a range written
 * since the last barrier, so independent dispatches run back to back. A step
 * ends with one fence; two submissions may be in flight at once
 * (gpu_queue_wait_prior). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_internal.h"

#define MAX_PENDING 64
#define PROF_QUERIES 2048 /* timestamps between two waits; later dispatches go unmeasured */
#define PROF_ENTRIES 512

#ifndef GL_TIMESTAMP_EXT
#define GL_TIMESTAMP_EXT 0x8E28
#endif
#ifndef GL_QUERY_RESULT_EXT
#define GL_QUERY_RESULT_EXT 0x8866
#endif
typedef void (*pfn_query_counter)(GLuint id, GLenum target);
typedef void (*pfn_query_u64)(GLuint id, GLenum pname, GLuint64 *params);

typedef struct profiler {
    pfn_query_counter counter;
    pfn_query_u64 result;
    GLuint ids[PROF_QUERIES + 1]; /* [0]: the start */
    gpu_profile_entry label[PROF_QUERIES + 1];
    size_t n;                     /* timestamps placed since the last wait, the start included */
    gpu_profile_mode mode;
    uint32_t since_submit;        /* dispatches since the last timestamped submit */
    gpu_profile_entry entries[PROF_ENTRIES];
    size_t n_entries;
} profiler;

typedef struct pending_write {
    unsigned buffer;
    size_t begin, end;
    bool mapped;
} pending_write;

struct gpu_queue {
    gpu_context *ctx;
    pending_write pending[MAX_PENDING];
    size_t n_pending;
    bool mapped_written; /* since the last submit */
    GLsync fence;        /* the last submission's */
    GLsync prior;        /* the one before, while not waited for; NULL: none */
    gpu_queue_stats stats;
    profiler *prof; /* NULL unless profiling */
};

glesllm_status gpu_queue_create(gpu_context *ctx, gpu_queue **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory creating the dispatch queue");
    (*out)->ctx = ctx;
    return GLESLLM_OK;
}

void gpu_queue_destroy(gpu_queue *q)
{
    if (!q)
        return;
    if (q->fence)
        glDeleteSync(q->fence);
    if (q->prior)
        glDeleteSync(q->prior);
    if (q->prof) {
        glDeleteQueries(PROF_QUERIES + 1, q->prof->ids);
        free(q->prof);
    }
    free(q);
}

bool gpu_queue_profile_enable(gpu_queue *q, gpu_profile_mode mode)
{
    if (q->prof) {
        q->prof->mode = mode;
        return true;
    }
    if (!gpu_has_gl_extension("GL_EXT_disjoint_timer_query")) {
        err_set(GLESLLM_ERR_UNSUPPORTED, "the driver has no GL_EXT_disjoint_timer_query");
        return false;
    }
    profiler *p = calloc(1, sizeof *p);
    if (!p) {
        err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the profiler");
        return false;
    }
    p->counter = (pfn_query_counter)eglGetProcAddress("glQueryCounterEXT");
    p->result = (pfn_query_u64)eglGetProcAddress("glGetQueryObjectui64vEXT");
    if (!p->counter || !p->result) {
        free(p);
        err_set(GLESLLM_ERR_UNSUPPORTED, "the driver lists timer queries but not their functions");
        return false;
    }
    glGenQueries(PROF_QUERIES + 1, p->ids);
    p->mode = mode;
    q->prof = p;
    return true;
}

void gpu_queue_profile_reset(gpu_queue *q)
{
    if (q->prof)
        q->prof->n_entries = 0;
}

static int by_total(const void *a, const void *b)
{
    const gpu_profile_entry *x = a, *y = b;
    return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

size_t gpu_queue_profile_get(const gpu_queue *q, gpu_profile_entry *out, size_t max)
{
    if (!q->prof)
        return 0;
    size_t n = q->prof->n_entries < max ? q->prof->n_entries : max;
    memcpy(out, q->prof->entries, n * sizeof *out);
    qsort(out, n, sizeof *out, by_total);
    return q->prof->n_entries;
}

/* A timestamp before the first dispatch after a wait (profile_start), one
 * after each dispatch recorded (profile_mark) in GPU_PROFILE_DISPATCHES mode. */
static void profile_start(profiler *p)
{
    if (p->n == 0)
        p->counter(p->ids[p->n++], GL_TIMESTAMP_EXT);
}

static void profile_mark(profiler *p, const gpu_dispatch *d, bool barrier)
{
    p->since_submit++;
    if (p->n > PROF_QUERIES || p->mode == GPU_PROFILE_SUBMITS)
        return;
    gpu_profile_entry *l = &p->label[p->n];
    snprintf(l->name, sizeof l->name, "%s", d->prog->name);
    l->groups = d->groups[0] * d->groups[1] * d->groups[2];
    l->binary_bytes = d->prog->binary_bytes;
    l->barrier = barrier;
    l->seq = p->mode == GPU_PROFILE_SEQUENCE ? p->since_submit - 1 : 0;
    p->counter(p->ids[p->n++], GL_TIMESTAMP_EXT);
}

/* GPU_PROFILE_SUBMITS: a timestamp at the end of a submission */
static void profile_submit(profiler *p)
{
    uint32_t n = p->since_submit;
    p->since_submit = 0; /* (SEQUENCE counts from each submission) */
    if (p->mode != GPU_PROFILE_SUBMITS || p->n == 0 || p->n > PROF_QUERIES || !n)
        return;
    gpu_profile_entry *l = &p->label[p->n];
    snprintf(l->name, sizeof l->name, "submit");
    l->groups = n;
    l->barrier = false;
    l->seq = 0;
    p->counter(p->ids[p->n++], GL_TIMESTAMP_EXT);
}

/* After a wait: every timestamp is written; add the differences to the entries. */
static void profile_collect(profiler *p)
{
    GLuint64 prev = 0;
    for (size_t i = 0; i < p->n; i++) {
        GLuint64 t = 0;
        p->result(p->ids[i], GL_QUERY_RESULT_EXT, &t);
        if (i == 0) {
            prev = t;
            continue;
        }
        const gpu_profile_entry *l = &p->label[i];
        size_t e = 0;
        while (e < p->n_entries && !(strcmp(p->entries[e].name, l->name) == 0 &&
                                     p->entries[e].groups == l->groups &&
                                     p->entries[e].seq == l->seq &&
                                     p->entries[e].barrier == l->barrier))
            e++;
        if (e == p->n_entries) {
            if (e == PROF_ENTRIES) { /* table full: this one goes unrecorded */
                prev = t;
                continue;
            }
            p->entries[p->n_entries] = *l;
            p->entries[p->n_entries].count = 0;
            p->entries[p->n_entries++].total_ns = 0;
        }
        p->entries[e].count++;
        p->entries[e].total_ns += t > prev ? t - prev : 0;
        prev = t;
    }
    p->n = 0;
}

static bool overlaps_pending(const gpu_queue *q, unsigned buffer, size_t begin, size_t end)
{
    for (size_t i = 0; i < q->n_pending; i++) {
        const pending_write *w = &q->pending[i];
        if (w->buffer == buffer && begin < w->end && w->begin < end)
            return true;
    }
    return false;
}

/* A binding's used bytes, where it names them within its range */
static void used_range(const gpu_binding *b, size_t *begin, size_t *end)
{
    if (b->used_end > b->used_begin && b->used_begin >= *begin && b->used_end <= *end) {
        *begin = b->used_begin;
        *end = b->used_end;
    }
}

static glesllm_status check_binding(const gpu_context *ctx, const gpu_dispatch *d,
                                    const gpu_binding *b, size_t *size)
{
    const char *name = d->prog->name;
    if (!b->buf || !b->buf->id)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "kernel %s: binding %u has no buffer", name,
                       b->slot);
    *size = b->size ? b->size : b->buf->size - b->offset;
    if (b->offset > b->buf->size || *size > b->buf->size - b->offset)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "kernel %s: binding %u range [%zu, +%zu) runs past its %zu-byte buffer", name,
                       b->slot, b->offset, *size, b->buf->size);
    if (b->offset % ctx->limits.storage_offset_alignment)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "kernel %s: binding %u offset %zu is not a multiple of the storage offset "
                       "alignment %u",
                       name, b->slot, b->offset, ctx->limits.storage_offset_alignment);
    if ((uint64_t)*size > ctx->limits.max_storage_block_bytes)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "kernel %s: binding %u range of %zu bytes exceeds the %llu-byte storage "
                       "block limit; split the tensor by rows",
                       name, b->slot, *size, (unsigned long long)ctx->limits.max_storage_block_bytes);
    if (b->slot >= ctx->limits.max_storage_bindings)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "kernel %s: binding %u is beyond the driver's %u",
                       name, b->slot, ctx->limits.max_storage_bindings);
    return GLESLLM_OK;
}

glesllm_status gpu_queue_dispatch(gpu_queue *q, const gpu_dispatch *d)
{
    const gpu_limits *L = &q->ctx->limits;
    if (!d->prog || !d->prog->id)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "dispatch without a program");
    if (d->n_bindings > GPU_MAX_BINDINGS || d->n_params > GPU_MAX_PARAMS)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "kernel %s: too many bindings or parameters",
                       d->prog->name);
    for (int i = 0; i < 3; i++)
        if (d->groups[i] == 0 || d->groups[i] > L->max_group_count[i])
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "kernel %s: %u work groups in dimension %d (limit %u)", d->prog->name,
                           d->groups[i], i, L->max_group_count[i]);
    size_t sizes[GPU_MAX_BINDINGS];
    bool need_barrier = false;
    for (uint32_t i = 0; i < d->n_bindings; i++) {
        const gpu_binding *b = &d->bindings[i];
        glesllm_status st = check_binding(q->ctx, d, b, &sizes[i]);
        if (st != GLESLLM_OK)
            return st;
        size_t begin = b->offset, end = b->offset + sizes[i];
        used_range(b, &begin, &end);
        if (overlaps_pending(q, b->buf->id, begin, end))
            need_barrier = true;
    }
    gpu_gl_clear_errors();
    if (need_barrier) {
        GL_CHECK(glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT));
        q->n_pending = 0;
        q->stats.barriers++;
    }
    if (q->prof)
        profile_start(q->prof);
    glUseProgram(d->prog->id);
    for (uint32_t i = 0; i < d->n_bindings; i++) {
        const gpu_binding *b = &d->bindings[i];
        glBindBufferRange(GL_SHADER_STORAGE_BUFFER, b->slot, b->buf->id, (GLintptr)b->offset,
                          (GLsizeiptr)sizes[i]);
    }
    if (d->n_params && d->prog->params_location >= 0)
        glUniform1uiv(d->prog->params_location, (GLsizei)d->n_params, d->params);
    GL_CHECK(glDispatchCompute(d->groups[0], d->groups[1], d->groups[2]));
    q->stats.dispatches++;
    if (q->prof)
        profile_mark(q->prof, d, need_barrier);

    for (uint32_t i = 0; i < d->n_bindings; i++) {
        const gpu_binding *b = &d->bindings[i];
        if (!(b->access & GPU_WRITE))
            continue;
        if (b->buf->mapped)
            q->mapped_written = true;
        if (q->n_pending == MAX_PENDING) {
            /* too many distinct writes to track: fence them all off now */
            GL_CHECK(glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT));
            q->n_pending = 0;
            q->stats.barriers++;
        }
        size_t begin = b->offset, end = b->offset + sizes[i];
        used_range(b, &begin, &end);
        q->pending[q->n_pending++] = (pending_write){ b->buf->id, begin, end, b->buf->mapped != NULL };
    }
    return GLESLLM_OK;
}

glesllm_status gpu_queue_submit(gpu_queue *q)
{
    gpu_gl_clear_errors();
    if (q->mapped_written) {
        /* shader writes become visible to the persistent pointer */
        GL_CHECK(glMemoryBarrier(GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT_EXT));
        q->mapped_written = false;
    }
    if (q->prof)
        profile_submit(q->prof);
    /* the GPU runs submissions in order: the last fence stands for every
     * earlier one, so at most the one before it is kept (wait_prior) */
    if (q->prior)
        glDeleteSync(q->prior);
    q->prior = q->fence;
    q->fence = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
    if (!q->fence)
        return err_set(GLESLLM_ERR_GL, "glFenceSync failed with %s", gpu_gl_error_name(glGetError()));
    GL_CHECK(glFlush());
    q->stats.submits++;
    return GLESLLM_OK;
}

/* Waits for *f (none: returns at once), then deletes it. */
static glesllm_status wait_fence(GLsync *f, uint32_t timeout_ms)
{
    if (!*f)
        return GLESLLM_OK;
    uint64_t ns = (uint64_t)(timeout_ms ? timeout_ms : 120000) * 1000000ull;
    GLenum r = glClientWaitSync(*f, GL_SYNC_FLUSH_COMMANDS_BIT, ns);
    if (r == GL_TIMEOUT_EXPIRED)
        return err_set(GLESLLM_ERR_TIMEOUT, "the GPU did not finish a step within %llu ms",
                       (unsigned long long)(ns / 1000000ull));
    if (r == GL_WAIT_FAILED)
        return err_set(GLESLLM_ERR_GL, "glClientWaitSync failed with %s",
                       gpu_gl_error_name(glGetError()));
    glDeleteSync(*f);
    *f = NULL;
    return GLESLLM_OK;
}

glesllm_status gpu_queue_wait(gpu_queue *q, uint32_t timeout_ms)
{
    if (!q->fence && !q->prior)
        return GLESLLM_OK;
    /* the last fence first: the one before is signalled by then (the GPU
     * runs submissions in order), unless the last one was never placed */
    glesllm_status st = wait_fence(&q->fence, timeout_ms);
    if (!st)
        st = wait_fence(&q->prior, timeout_ms);
    if (!st && q->prof)
        profile_collect(q->prof);
    return st;
}

glesllm_status gpu_queue_wait_prior(gpu_queue *q, uint32_t timeout_ms)
{
    if (q->prof) /* the timestamps are read back only once all are written */
        return gpu_queue_wait(q, timeout_ms);
    return wait_fence(&q->prior, timeout_ms);
}

gpu_queue_stats gpu_queue_get_stats(const gpu_queue *q) { return q->stats; }
