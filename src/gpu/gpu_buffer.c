/* Storage buffers: immutable device storage (weights), dynamic buffers
 * (activations the CPU updates), and persistently mapped coherent buffers
 * (the token readback, and the KV cache on unified-memory boards). */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_internal.h"

static glesllm_status check_alloc(gpu_context *ctx, size_t size, const char *what)
{
    GLenum e = glGetError();
    if (e == GL_NO_ERROR)
        return GLESLLM_OK;
    gpu_gl_clear_errors();
    if (e == GL_OUT_OF_MEMORY)
        return err_set(GLESLLM_ERR_GPU_OUT_OF_MEMORY,
                       "GPU out of memory allocating %.1f MiB for %s (%.1f MiB already allocated); "
                       "use a smaller model or context size",
                       (double)size / (1 << 20), what, (double)ctx->allocated / (1 << 20));
    return err_set(GLESLLM_ERR_GL, "allocating %zu bytes for %s failed with %s", size, what,
                   gpu_gl_error_name(e));
}

glesllm_status gpu_buffer_create(gpu_context *ctx, size_t size, const void *data, unsigned flags,
                                 const char *what, gpu_buffer *out)
{
    memset(out, 0, sizeof *out);
    if (size == 0 || size > (size_t)PTRDIFF_MAX)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "buffer %s: invalid size %zu", what, size);
    if ((flags & GPU_BUFFER_MAPPED) && !ctx->caps.buffer_storage)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "buffer %s needs a persistently mapped buffer, but the driver lacks "
                       "GL_EXT_buffer_storage",
                       what);
    uint64_t avail = gpu_context_memory_available(ctx);
    if (avail && size > avail)
        return err_set(GLESLLM_ERR_GPU_OUT_OF_MEMORY,
                       "GPU out of memory: %s needs %.1f MiB but the driver reports %.1f MiB free "
                       "(%.1f MiB already allocated here); use a smaller model or context size",
                       what, (double)size / (1 << 20), (double)avail / (1 << 20),
                       (double)ctx->allocated / (1 << 20));
    gpu_gl_clear_errors();
    GLuint id = 0;
    glGenBuffers(1, &id);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, id);
    if (ctx->caps.buffer_storage) {
        GLbitfield bits = 0;
        if (flags & GPU_BUFFER_DYNAMIC)
            bits |= GL_DYNAMIC_STORAGE_BIT_EXT;
        if (flags & GPU_BUFFER_MAPPED)
            bits |= GL_MAP_READ_BIT | GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT_EXT |
                    GL_MAP_COHERENT_BIT_EXT;
        ctx->buffer_storage(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)size, data, bits);
    } else {
        glBufferData(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)size, data,
                     (flags & GPU_BUFFER_DYNAMIC) ? GL_DYNAMIC_DRAW : GL_STATIC_DRAW);
    }
    glesllm_status st = check_alloc(ctx, size, what);
    if (st == GLESLLM_OK && (flags & GPU_BUFFER_MAPPED)) {
        out->mapped = glMapBufferRange(GL_SHADER_STORAGE_BUFFER, 0, (GLsizeiptr)size,
                                       GL_MAP_READ_BIT | GL_MAP_WRITE_BIT |
                                           GL_MAP_PERSISTENT_BIT_EXT | GL_MAP_COHERENT_BIT_EXT);
        if (!out->mapped) {
            GLenum e = glGetError();
            st = err_set(GLESLLM_ERR_GL, "persistent map of buffer %s (%zu bytes) failed with %s",
                         what, size, gpu_gl_error_name(e));
        }
    }
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    if (st != GLESLLM_OK) {
        glDeleteBuffers(1, &id);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->id = id;
    out->size = size;
    out->flags = flags;
    ctx->allocated += size;
    return GLESLLM_OK;
}

glesllm_status gpu_buffer_create_zeroed(gpu_context *ctx, size_t size, unsigned flags,
                                        const char *what, gpu_buffer *out)
{
    memset(out, 0, sizeof *out);
    void *zeros = calloc(size ? size : 1, 1);
    if (!zeros)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the %s", what);
    glesllm_status st = gpu_buffer_create(ctx, size, zeros, flags, what, out);
    free(zeros);
    return st;
}

void gpu_buffer_destroy(gpu_buffer *buf)
{
    if (!buf || !buf->id)
        return;
    if (buf->mapped) {
        glBindBuffer(GL_SHADER_STORAGE_BUFFER, buf->id);
        glUnmapBuffer(GL_SHADER_STORAGE_BUFFER);
        glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    }
    glDeleteBuffers(1, &buf->id);
    memset(buf, 0, sizeof *buf);
}

glesllm_status gpu_buffer_write(gpu_buffer *buf, size_t offset, const void *data, size_t size)
{
    if (offset > buf->size || size > buf->size - offset)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "write of %zu bytes at %zu runs past the end of a %zu-byte buffer", size,
                       offset, buf->size);
    if (buf->mapped) {
        memcpy((char *)buf->mapped + offset, data, size);
        return GLESLLM_OK;
    }
    if (!(buf->flags & GPU_BUFFER_DYNAMIC))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "buffer %u is immutable device storage; create it with GPU_BUFFER_DYNAMIC",
                       buf->id);
    gpu_gl_clear_errors();
    GL_CHECK(glBindBuffer(GL_SHADER_STORAGE_BUFFER, buf->id));
    GL_CHECK(glBufferSubData(GL_SHADER_STORAGE_BUFFER, (GLintptr)offset, (GLsizeiptr)size, data));
    GL_CHECK(glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0));
    return GLESLLM_OK;
}

glesllm_status gpu_buffer_read(gpu_context *ctx, const gpu_buffer *buf, size_t offset, void *out,
                               size_t size)
{
    if (offset > buf->size || size > buf->size - offset)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "read of %zu bytes at %zu runs past the end of a %zu-byte buffer", size,
                       offset, buf->size);
    gpu_gl_clear_errors();
    GL_CHECK(glMemoryBarrier(GL_ALL_BARRIER_BITS));
    if (buf->mapped) {
        GL_CHECK(glFinish());
        memcpy(out, (const char *)buf->mapped + offset, size);
        return GLESLLM_OK;
    }
    /* Immutable storage cannot be mapped: copy into a mutable staging
     * buffer, kept for the next read. */
    if (ctx->staging_size < size) {
        if (ctx->staging_id)
            glDeleteBuffers(1, &ctx->staging_id);
        ctx->staging_id = 0;
        ctx->staging_size = 0;
        glGenBuffers(1, &ctx->staging_id);
        glBindBuffer(GL_COPY_WRITE_BUFFER, ctx->staging_id);
        glBufferData(GL_COPY_WRITE_BUFFER, (GLsizeiptr)size, NULL, GL_STREAM_READ);
        glesllm_status st = check_alloc(ctx, size, "the readback staging buffer");
        if (st != GLESLLM_OK)
            return st;
        ctx->staging_size = size;
    }
    GL_CHECK(glBindBuffer(GL_COPY_READ_BUFFER, buf->id));
    GL_CHECK(glBindBuffer(GL_COPY_WRITE_BUFFER, ctx->staging_id));
    GL_CHECK(glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, (GLintptr)offset, 0,
                                 (GLsizeiptr)size));
    void *p = glMapBufferRange(GL_COPY_WRITE_BUFFER, 0, (GLsizeiptr)size, GL_MAP_READ_BIT);
    if (!p) {
        GLenum e = glGetError();
        return err_set(GLESLLM_ERR_GL, "mapping the readback staging buffer failed with %s",
                       gpu_gl_error_name(e));
    }
    memcpy(out, p, size);
    GL_CHECK(glUnmapBuffer(GL_COPY_WRITE_BUFFER));
    GL_CHECK(glBindBuffer(GL_COPY_READ_BUFFER, 0));
    GL_CHECK(glBindBuffer(GL_COPY_WRITE_BUFFER, 0));
    return GLESLLM_OK;
}

glesllm_status gpu_buffer_copy_within(gpu_buffer *buf, size_t src, size_t dst, size_t size)
{
    if (src > buf->size || size > buf->size - src || dst > buf->size || size > buf->size - dst ||
        (src < dst + size && dst < src + size))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "copy of %zu bytes from %zu to %zu within a %zu-byte buffer: out of it, "
                       "or overlapping", size, src, dst, buf->size);
    if (!size)
        return GLESLLM_OK;
    gpu_gl_clear_errors();
    /* (the shaders' writes before it, visible to the copy) */
    GL_CHECK(glMemoryBarrier(GL_ALL_BARRIER_BITS));
    GL_CHECK(glBindBuffer(GL_COPY_READ_BUFFER, buf->id));
    GL_CHECK(glBindBuffer(GL_COPY_WRITE_BUFFER, buf->id));
    GL_CHECK(glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, (GLintptr)src,
                                 (GLintptr)dst, (GLsizeiptr)size));
    GL_CHECK(glBindBuffer(GL_COPY_READ_BUFFER, 0));
    GL_CHECK(glBindBuffer(GL_COPY_WRITE_BUFFER, 0));
    return GLESLLM_OK;
}
