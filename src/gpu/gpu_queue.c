/* The dispatch queue: kernels describe work (program, buffer ranges, groups,
 * parameters); the queue binds, dispatches, and owns the memory barriers.
 * A barrier is placed only before a dispatch that touches a range written
 * since the last barrier, so independent dispatches run back to back. A step
 * ends with one fence. */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_internal.h"

#define MAX_PENDING 64

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
    GLsync fence;
    gpu_queue_stats stats;
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
    free(q);
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
        if (overlaps_pending(q, b->buf->id, b->offset, b->offset + sizes[i]))
            need_barrier = true;
    }
    gpu_gl_clear_errors();
    if (need_barrier) {
        GL_CHECK(glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT));
        q->n_pending = 0;
        q->stats.barriers++;
    }
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
        q->pending[q->n_pending++] =
            (pending_write){ b->buf->id, b->offset, b->offset + sizes[i], b->buf->mapped != NULL };
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
    if (q->fence)
        glDeleteSync(q->fence);
    q->fence = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
    if (!q->fence)
        return err_set(GLESLLM_ERR_GL, "glFenceSync failed with %s", gpu_gl_error_name(glGetError()));
    GL_CHECK(glFlush());
    q->stats.submits++;
    return GLESLLM_OK;
}

glesllm_status gpu_queue_wait(gpu_queue *q, uint32_t timeout_ms)
{
    if (!q->fence)
        return GLESLLM_OK;
    uint64_t ns = (uint64_t)(timeout_ms ? timeout_ms : 120000) * 1000000ull;
    GLenum r = glClientWaitSync(q->fence, GL_SYNC_FLUSH_COMMANDS_BIT, ns);
    if (r == GL_TIMEOUT_EXPIRED)
        return err_set(GLESLLM_ERR_TIMEOUT, "the GPU did not finish a step within %llu ms",
                       (unsigned long long)(ns / 1000000ull));
    if (r == GL_WAIT_FAILED)
        return err_set(GLESLLM_ERR_GL, "glClientWaitSync failed with %s",
                       gpu_gl_error_name(glGetError()));
    glDeleteSync(q->fence);
    q->fence = NULL;
    return GLESLLM_OK;
}

gpu_queue_stats gpu_queue_get_stats(const gpu_queue *q) { return q->stats; }
