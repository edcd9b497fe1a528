/* Context creation: a configless OpenGL ES 3.1+ context with no surface, the
 * limits kernels are sized by, and the optional extensions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "gpu/gpu_internal.h"

#ifndef EGL_NO_CONFIG_KHR
#define EGL_NO_CONFIG_KHR ((EGLConfig)0)
#endif

/* OpenGL ES 3.1 minimums (OpenGL ES 3.1 spec, table 20.45 and 20.47). */
#define MIN_INVOCATIONS 128u
#define MIN_GROUP_SIZE_XY 128u
#define MIN_GROUP_SIZE_Z 64u
#define MIN_GROUP_COUNT 65535u
#define MIN_SHARED_BYTES 16384u
#define MIN_STORAGE_BLOCKS 4u
#define MIN_STORAGE_BLOCK_BYTES (1ull << 27)
#define MAX_OFFSET_ALIGNMENT 256u

static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

glesllm_status gpu_options_from_env(gpu_options *opt)
{
    memset(opt, 0, sizeof *opt);
    const char *p = env_value("GLESLLM_PLATFORM");
    if (p) {
        if (strcmp(p, "gbm") == 0)
            opt->platform = GPU_PLATFORM_GBM;
        else if (strcmp(p, "device") == 0)
            opt->platform = GPU_PLATFORM_DEVICE;
        else if (strcmp(p, "surfaceless") == 0)
            opt->platform = GPU_PLATFORM_SURFACELESS;
        else if (strcmp(p, "auto") == 0)
            opt->platform = GPU_PLATFORM_AUTO;
        else
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "GLESLLM_PLATFORM=%s is not known; use gbm, device, surfaceless or auto", p);
    }
    opt->device_path = env_value("GLESLLM_DEVICE");
    const char *l = env_value("GLESLLM_LIMITS");
    if (l) {
        if (strcmp(l, "min") == 0)
            opt->limits_min = true;
        else if (strcmp(l, "native") != 0)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "GLESLLM_LIMITS=%s is not known; use min (GLES 3.1 minimums) or native", l);
    }
    int no_cache;
    glesllm_status st = env_flag("GLESLLM_NO_CACHE", "1 (cache off) or 0", &no_cache);
    opt->no_cache = no_cache == 1;
    return st;
}

static uint32_t clamp_min(uint32_t v, uint32_t floor_, bool min)
{
    return (min && v > floor_) ? floor_ : v;
}

static glesllm_status query_limits(gpu_context *ctx)
{
    gpu_limits *L = &ctx->limits;
    GLint v = 0;
    GLint64 v64 = 0;
    bool min = ctx->limits_min;
    GL_CHECK(glGetIntegerv(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS, &v));
    L->max_invocations = clamp_min((uint32_t)v, MIN_INVOCATIONS, min);
    for (GLuint i = 0; i < 3; i++) {
        GL_CHECK(glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_SIZE, i, &v));
        L->max_group_size[i] = clamp_min((uint32_t)v, i < 2 ? MIN_GROUP_SIZE_XY : MIN_GROUP_SIZE_Z, min);
        GL_CHECK(glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &v));
        L->max_group_count[i] = clamp_min((uint32_t)v, MIN_GROUP_COUNT, min);
    }
    GL_CHECK(glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &v));
    L->max_shared_bytes = clamp_min((uint32_t)v, MIN_SHARED_BYTES, min);
    GL_CHECK(glGetIntegerv(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, &v));
    L->max_storage_blocks = clamp_min((uint32_t)v, MIN_STORAGE_BLOCKS, min);
    GL_CHECK(glGetIntegerv(GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS, &v));
    L->max_storage_bindings = clamp_min((uint32_t)v, MIN_STORAGE_BLOCKS, min);
    GL_CHECK(glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &v64));
    L->max_storage_block_bytes = (uint64_t)v64;
    if (min && L->max_storage_block_bytes > MIN_STORAGE_BLOCK_BYTES)
        L->max_storage_block_bytes = MIN_STORAGE_BLOCK_BYTES;
    GL_CHECK(glGetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &v));
    L->storage_offset_alignment = min ? MAX_OFFSET_ALIGNMENT : (uint32_t)(v > 0 ? v : 1);

    if (L->max_invocations < MIN_INVOCATIONS || L->max_storage_blocks < MIN_STORAGE_BLOCKS ||
        L->max_shared_bytes < MIN_SHARED_BYTES)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "the driver reports compute limits below the OpenGL ES 3.1 minimums "
                       "(%u invocations, %u storage blocks, %u bytes shared memory); it is not a "
                       "conformant GLES 3.1 driver",
                       L->max_invocations, L->max_storage_blocks, L->max_shared_bytes);
    return GLESLLM_OK;
}

static void query_caps(gpu_context *ctx)
{
    gpu_caps *C = &ctx->caps;
    C->buffer_storage = gpu_has_gl_extension("GL_EXT_buffer_storage");
    if (C->buffer_storage)
        ctx->buffer_storage = (gpu_pfn_buffer_storage)eglGetProcAddress("glBufferStorageEXT");
    if (!ctx->buffer_storage)
        C->buffer_storage = false;

    if (gpu_has_gl_extension("GL_KHR_shader_subgroup")) {
        GLint stages = 0, features = 0, size = 0;
        glGetIntegerv(GL_SUBGROUP_SUPPORTED_STAGES_KHR, &stages);
        glGetIntegerv(GL_SUBGROUP_SUPPORTED_FEATURES_KHR, &features);
        glGetIntegerv(GL_SUBGROUP_SIZE_KHR, &size);
        const GLint need = GL_SUBGROUP_FEATURE_BASIC_BIT_KHR | GL_SUBGROUP_FEATURE_ARITHMETIC_BIT_KHR;
        C->subgroup = (stages & GL_COMPUTE_SHADER_BIT) && (features & need) == need && size > 0;
        C->subgroup_size = C->subgroup ? (uint32_t)size : 0;
    }
    C->fp16_arith = gpu_has_gl_extension("GL_EXT_shader_explicit_arithmetic_types_float16");
    C->f16_types = gpu_has_gl_extension("GL_NV_gpu_shader5");
    GLint range[2] = { 0, 0 }, precision = 0;
    glGetShaderPrecisionFormat(GL_FRAGMENT_SHADER, GL_MEDIUM_FLOAT, range, &precision);
    C->mediump_is_fp16 = precision > 0 && precision < 23;
    GLint formats = 0;
    glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &formats);
    C->program_binary = formats > 0;
    /* by name: no GL query says where shaders run, and the EGL device's
     * EGL_MESA_device_software exists only on that platform */
    static const char *const cpu_renderers[] = { "llvmpipe", "softpipe", "SwiftShader" };
    for (size_t i = 0; i < sizeof cpu_renderers / sizeof cpu_renderers[0]; i++)
        if (strncmp(ctx->renderer, cpu_renderers[i], strlen(cpu_renderers[i])) == 0)
            C->cpu = true;
    gpu_gl_clear_errors();

    if (ctx->limits_min) {
        /* The portable floor: no optional arithmetic paths. Buffer storage
         * stays: it is how mapped buffers exist at all. */
        C->subgroup = false;
        C->subgroup_size = 0;
        C->fp16_arith = false;
        C->f16_types = false;
    }
}

static void copy_gl_string(char *dst, size_t n, GLenum name)
{
    const char *s = (const char *)glGetString(name);
    snprintf(dst, n, "%s", s ? s : "(unknown)");
}

static glesllm_status create_context(gpu_context *ctx)
{
    const char *exts = eglQueryString(ctx->display, EGL_EXTENSIONS);
    bool no_config = exts && strstr(exts, "EGL_KHR_no_config_context");
    bool surfaceless = exts && strstr(exts, "EGL_KHR_surfaceless_context");
    if (!surfaceless)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "EGL display (%s) lacks EGL_KHR_surfaceless_context; a context without a "
                       "surface is needed for headless compute",
                       ctx->display_desc);
    if (!eglBindAPI(EGL_OPENGL_ES_API))
        return err_set(GLESLLM_ERR_EGL, "eglBindAPI(EGL_OPENGL_ES_API) failed (%s): this EGL has no "
                                        "OpenGL ES (install libgles2 and a driver)",
                       gpu_egl_error_name(eglGetError()));
    EGLConfig config = EGL_NO_CONFIG_KHR;
    if (!no_config) {
        const EGLint want[] = { EGL_RENDERABLE_TYPE, EGL_OPENGL_ES3_BIT, EGL_NONE };
        EGLint n = 0;
        if (!eglChooseConfig(ctx->display, want, &config, 1, &n) || n < 1)
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "EGL display (%s) has neither EGL_KHR_no_config_context nor an OpenGL "
                           "ES 3 config (%s)",
                           ctx->display_desc, gpu_egl_error_name(eglGetError()));
    }
    const EGLint attrs[] = { EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 1, EGL_NONE };
    ctx->context = eglCreateContext(ctx->display, config, EGL_NO_CONTEXT, attrs);
    if (ctx->context == EGL_NO_CONTEXT)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "the driver offers no OpenGL ES 3.1 context on %s (eglCreateContext: %s); "
                       "compute shaders need OpenGL ES 3.1",
                       ctx->display_desc, gpu_egl_error_name(eglGetError()));
    if (!eglMakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx->context))
        return err_set(GLESLLM_ERR_EGL, "eglMakeCurrent without a surface failed on %s (%s)",
                       ctx->display_desc, gpu_egl_error_name(eglGetError()));
    return GLESLLM_OK;
}

glesllm_status gpu_context_create(const gpu_options *opt, gpu_context **out)
{
    *out = NULL;
    gpu_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory creating the GPU context");
    ctx->display = EGL_NO_DISPLAY;
    ctx->context = EGL_NO_CONTEXT;
    ctx->drm_fd = -1;
    ctx->limits_min = opt->limits_min;
    ctx->f16_subnormals = -1;
    ctx->subgroup_order = -1;

    gpu_mesa_cache_guard(ctx);
    glesllm_status st = gpu_display_open(opt, ctx);
    if (st == GLESLLM_OK)
        st = create_context(ctx);
    if (st != GLESLLM_OK) {
        gpu_context_destroy(ctx);
        return st;
    }
    copy_gl_string(ctx->vendor, sizeof ctx->vendor, GL_VENDOR);
    copy_gl_string(ctx->renderer, sizeof ctx->renderer, GL_RENDERER);
    copy_gl_string(ctx->version, sizeof ctx->version, GL_VERSION);
    copy_gl_string(ctx->glsl_version, sizeof ctx->glsl_version, GL_SHADING_LANGUAGE_VERSION);
    gpu_gl_clear_errors();

    GLint major = 0, minor = 0;
    glGetIntegerv(GL_MAJOR_VERSION, &major);
    glGetIntegerv(GL_MINOR_VERSION, &minor);
    if (major < 3 || (major == 3 && minor < 1)) {
        st = err_set(GLESLLM_ERR_UNSUPPORTED,
                     "the driver gave OpenGL ES %d.%d (\"%s\" on %s); compute shaders need OpenGL "
                     "ES 3.1 or later",
                     (int)major, (int)minor, ctx->version, ctx->renderer);
        gpu_context_destroy(ctx);
        return st;
    }
    st = query_limits(ctx);
    if (st != GLESLLM_OK) {
        gpu_context_destroy(ctx);
        return st;
    }
    query_caps(ctx);
    gpu_memory_init(ctx);
    gpu_cache_init(ctx, opt);
    *out = ctx;
    return GLESLLM_OK;
}

void gpu_context_destroy(gpu_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->context != EGL_NO_CONTEXT) {
        if (ctx->staging_id)
            glDeleteBuffers(1, &ctx->staging_id);
        eglMakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(ctx->display, ctx->context);
    }
    gpu_display_close(ctx);
    gpu_memory_close(ctx);
    eglReleaseThread();
    free(ctx);
}

gpu_platform gpu_context_platform(const gpu_context *ctx) { return ctx->platform; }
const char *gpu_context_display_desc(const gpu_context *ctx) { return ctx->display_desc; }
const gpu_limits *gpu_context_limits(const gpu_context *ctx) { return &ctx->limits; }
const gpu_caps *gpu_context_caps(const gpu_context *ctx) { return &ctx->caps; }
bool gpu_context_limits_min(const gpu_context *ctx) { return ctx->limits_min; }
uint64_t gpu_context_allocated(const gpu_context *ctx) { return ctx->allocated; }

const char *gpu_context_string(const gpu_context *ctx, unsigned gl_name)
{
    switch (gl_name) {
    case GL_VENDOR: return ctx->vendor;
    case GL_RENDERER: return ctx->renderer;
    case GL_VERSION: return ctx->version;
    case GL_SHADING_LANGUAGE_VERSION: return ctx->glsl_version;
    }
    return "";
}

const char *gpu_context_cache_dir(const gpu_context *ctx)
{
    return ctx->cache_on ? ctx->cache_dir : NULL;
}

const char *gpu_context_cache_off_reason(const gpu_context *ctx)
{
    return ctx->cache_on ? NULL : ctx->cache_off_reason;
}

const char *gpu_context_mesa_cache(const gpu_context *ctx, const char **off)
{
    *off = ctx->mesa_cache_off;
    return ctx->mesa_cache_dir;
}

const char *gpu_context_warning(const gpu_context *ctx)
{
    return ctx->mesa_cache_warn ? ctx->mesa_cache_off : NULL;
}

gpu_current gpu_current_get(void)
{
    gpu_current c = { eglGetCurrentDisplay(), eglGetCurrentSurface(EGL_DRAW),
                      eglGetCurrentSurface(EGL_READ), eglGetCurrentContext(), true };
    if (c.context == EGL_NO_CONTEXT)
        c.context = NULL;
    return c;
}

glesllm_status gpu_context_enter(gpu_context *ctx, gpu_current *saved)
{
    *saved = gpu_current_get();
    saved->switched = false;
    if (saved->context == ctx->context)
        return GLESLLM_OK;
    if (!eglMakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx->context))
        return err_set(GLESLLM_ERR_EGL,
                       "cannot make the GPU context current on this thread (eglMakeCurrent: %s); "
                       "is it current on another thread?",
                       gpu_egl_error_name(eglGetError()));
    saved->switched = true;
    return GLESLLM_OK;
}

void gpu_context_leave(gpu_context *ctx, const gpu_current *saved)
{
    if (!saved->switched)
        return;
    if (saved->context)
        eglMakeCurrent(saved->display, saved->draw, saved->read, saved->context);
    else
        eglMakeCurrent(ctx->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
}
