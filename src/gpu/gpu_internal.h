/* Shared by the files of gpu/ only: the context layout and the GL checking macro. */
#ifndef GLESLLM_GPU_INTERNAL_H
#define GLESLLM_GPU_INTERNAL_H

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl31.h>
#include <GLES2/gl2ext.h>

#include "common/error.h"
#include "gpu/gpu.h"

typedef void (*gpu_pfn_buffer_storage)(GLenum target, GLsizeiptr size, const void *data,
                                       GLbitfield flags);

struct gpu_context {
    gpu_platform platform;
    char display_desc[256];
    EGLDisplay display;
    EGLContext context;
    void *gbm_lib;     /* dlopen'd libgbm, GBM platform only */
    void *gbm_device;  /* struct gbm_device * */
    int drm_fd;
    void *nvml_lib;    /* dlopen'd NVML, NVIDIA only (gpu_memory.c) */

    gpu_limits limits;
    gpu_caps caps;
    bool limits_min;
    char vendor[256], renderer[256], version[256], glsl_version[256];

    gpu_pfn_buffer_storage buffer_storage;
    uint64_t allocated;
    unsigned staging_id;   /* reused by gpu_buffer_read */
    size_t staging_size;

    int f16_subnormals;    /* gpu_context_f16_subnormals: -1 not probed yet, else 0 or 1 */
    int subgroup_order;    /* gpu_context_subgroup_order: -1 not probed yet */

    bool cache_on;
    char cache_dir[1024];
    char cache_off_reason[256];
    char mesa_cache_dir[1024];
    char mesa_cache_off[400];  /* "" while on */
    bool mesa_cache_warn;      /* turned off here for want of room */
};

/* EGL display selection (egl_display.c). On success fills display,
 * platform, display_desc and, for GBM, the device handles. */
glesllm_status gpu_display_open(const gpu_options *opt, gpu_context *ctx);
void gpu_display_close(gpu_context *ctx);
const char *gpu_egl_error_name(EGLint err);

/* Whether the current context lists a GL extension (gpu_context.c). */
bool gpu_has_gl_extension(const char *name);

/* Free-memory reporting (gpu_memory.c). */
void gpu_memory_init(gpu_context *ctx);
void gpu_memory_close(gpu_context *ctx);

/* Program cache (program_cache.c). */
void gpu_cache_init(gpu_context *ctx, const gpu_options *opt);
/* Before the driver starts: turns Mesa's own cache off where its disk is too
 * full for it. */
void gpu_mesa_cache_guard(gpu_context *ctx);
/* Tries to link `prog` from the cache; false when absent, stale or broken
 * (a broken file is removed). */
bool gpu_cache_load(gpu_context *ctx, const char *source, GLuint prog);
void gpu_cache_store(gpu_context *ctx, const char *source, GLuint prog);

const char *gpu_gl_error_name(GLenum err);
glesllm_status gpu_gl_error_report(GLenum err, const char *call, const char *file, int line);

/* Runs a GL call and turns any GL error into a returned status naming the
 * call and file:line. For use in functions returning glesllm_status. */
#define GL_CHECK(call)                                                                             \
    do {                                                                                           \
        call;                                                                                      \
        GLenum gl_err_ = glGetError();                                                             \
        if (gl_err_ != GL_NO_ERROR)                                                                \
            return gpu_gl_error_report(gl_err_, #call, __FILE__, __LINE__);                        \
    } while (0)

/* Drains stale errors so the next GL_CHECK reports only its own call. */
static inline void gpu_gl_clear_errors(void)
{
    for (int i = 0; i < 16 && glGetError() != GL_NO_ERROR; i++) {
    }
}

#endif
