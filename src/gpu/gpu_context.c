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

const char *gpu_gl_error_name(GLenum err)
{
    switch (err) {
    case GL_NO_ERROR: return "GL_NO_ERROR";
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    }
    return "unknown GL error";
}

glesllm_status gpu_gl_error_report(GLenum err, const char *call, const char *file, int line)
{
    gpu_gl_clear_errors();
    if (err == GL_OUT_OF_MEMORY)
        return err_set(GLESLLM_ERR_GPU_OUT_OF_MEMORY,
                       "GPU out of memory (GL_OUT_OF_MEMORY) in %s at %s:%d; use a smaller model or "
                       "context size",
                       call, file, line);
    return err_set(GLESLLM_ERR_GL, "%s failed with %s at %s:%d", call, gpu_gl_error_name(err), file,
                   line);
}

bool gpu_has_gl_extension(const char *name)
{
    GLint n = 0;
    glGetIntegerv(GL_NUM_EXTENSIONS, &n);
    for (GLint i = 0; i < n; i++) {
        const char *e = (const char *)glGetStringi(GL_EXTENSIONS, (GLuint)i);
        if (e && strcmp(e, name) == 0)
            return true;
    }
    return false;
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

/* One dispatch of a probe's program over buf (binding 0), waited for, on a
 * queue of its own */
static glesllm_status run_probe(gpu_context *ctx, gpu_program *prog, gpu_buffer *buf,
                                uint32_t groups)
{
    gpu_queue *q = NULL;
    glesllm_status st = gpu_queue_create(ctx, &q);
    if (st != GLESLLM_OK)
        return st;
    gpu_dispatch d = { .prog = prog, .n_bindings = 1, .groups = { groups, 1, 1 } };
    d.bindings[0] = (gpu_binding){ .slot = 0, .buf = buf, .access = GPU_READ_WRITE };
    st = gpu_queue_dispatch(q, &d);
    if (st == GLESLLM_OK)
        st = gpu_queue_submit(q);
    if (st == GLESLLM_OK)
        st = gpu_queue_wait(q, 0);
    gpu_queue_destroy(q);
    return st;
}

/* f16_probe.comp's dispatch: true when its four results are what IEEE
 * half arithmetic with subnormals gives (the multiply-add's first may round
 * either way: 4, 4.5 or 5 x 2^-24). */
static glesllm_status probe_f16_subnormals(gpu_context *ctx, bool *kept)
{
    const float u = 0x1p-24f; /* the f16 subnormal step */
    uint32_t v[6] = { 0x00300003u, gpu_f2u(16384.0f), 0, 0, 0, 0 }; /* levels 3, 48 */
    gpu_program prog;
    glesllm_status st = gpu_program_build(ctx, "f16_probe.comp",
                                          ctx->caps.f16_types ? "F16 1" : NULL, &prog);
    if (st != GLESLLM_OK)
        return st;
    gpu_buffer buf;
    st = gpu_buffer_create(ctx, sizeof v, v, 0, "f16 probe", &buf);
    if (st != GLESLLM_OK) {
        gpu_program_destroy(&prog);
        return st;
    }
    st = run_probe(ctx, &prog, &buf, 1);
    if (st == GLESLLM_OK)
        st = gpu_buffer_read(ctx, &buf, 0, v, sizeof v);
    gpu_buffer_destroy(&buf);
    gpu_program_destroy(&prog);
    if (st != GLESLLM_OK)
        return st;
    float r[4];
    memcpy(r, v + 2, sizeof r);
    *kept = r[0] == 3 * 0x1p-10f && r[1] == 48 * 0x1p-10f && r[2] >= 4 * u && r[2] <= 5 * u &&
            r[3] == 72 * u;
    return GLESLLM_OK;
}

/* A subgroup's sum of v[0..n) as lane 0 holds it after a butterfly: the
 * halves folded (lane i + n/2 onto lane i, then n/4...), or neighbours first
 * (i + 1 onto i, then i + 2...) */
static float tree_sum(const float *v, uint32_t n, int order)
{
    float t[128];
    memcpy(t, v, n * sizeof *t);
    if (order == GPU_SG_HALVES) {
        for (uint32_t h = n / 2; h; h /= 2)
            for (uint32_t i = 0; i < h; i++)
                t[i] = t[i] + t[i + h];
    } else {
        for (uint32_t h = 1; h < n; h *= 2)
            for (uint32_t i = 0; i + h < n; i += 2 * h)
                t[i] = t[i] + t[i + h];
    }
    return t[0];
}

/* sg_order.comp over random values of spread magnitudes (so that other
 * orders round otherwise), against tree_sum's two orders */
static glesllm_status probe_subgroup_order(gpu_context *ctx, int *order)
{
    enum { TRIALS = 32 };
    uint32_t n = ctx->caps.subgroup_size, count = TRIALS * n;
    *order = 0;
    if (!ctx->caps.subgroup || n < 2 || n > 128 || (n & (n - 1)))
        return GLESLLM_OK;
    float *v = malloc((count + TRIALS) * sizeof *v);
    if (!v)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    uint32_t r = 12345;
    for (uint32_t i = 0; i < count; i++) {
        r = r * 1664525u + 1013904223u;
        float m = 1.0f + (float)(r >> 9) * 0x1p-23f;
        v[i] = ldexpf((r & 1) ? -m : m, (int)((r >> 1) % 25) - 12);
    }
    gpu_program prog = { 0 };
    char defs[32];
    snprintf(defs, sizeof defs, "WG_SIZE %u", n);
    glesllm_status st = gpu_program_build(ctx, "sg_order.comp", defs, &prog);
    gpu_buffer buf = { 0 };
    if (st == GLESLLM_OK)
        st = gpu_buffer_create(ctx, (count + TRIALS) * sizeof *v, v, 0,
                               "subgroup order probe", &buf);
    if (st == GLESLLM_OK)
        st = run_probe(ctx, &prog, &buf, TRIALS);
    float got[TRIALS];
    if (st == GLESLLM_OK)
        st = gpu_buffer_read(ctx, &buf, count * sizeof *v, got, sizeof got);
    for (int o = GPU_SG_HALVES; st == GLESLLM_OK && o <= GPU_SG_NEIGHBOURS && !*order; o++) {
        bool all = true;
        for (uint32_t k = 0; k < TRIALS && all; k++)
            all = got[k] == tree_sum(v + k * n, n, o);
        if (all)
            *order = o;
    }
    if (buf.id)
        gpu_buffer_destroy(&buf);
    if (prog.id)
        gpu_program_destroy(&prog);
    free(v);
    return st;
}

glesllm_status gpu_context_subgroup_order(gpu_context *ctx, int *out)
{
    if (ctx->subgroup_order < 0) {
        int o = 0;
        glesllm_status st = probe_subgroup_order(ctx, &o);
        if (st != GLESLLM_OK)
            return st;
        ctx->subgroup_order = o;
    }
    *out = ctx->subgroup_order;
    return GLESLLM_OK;
}

glesllm_status gpu_context_f16_subnormals(gpu_context *ctx, bool *out)
{
    if (ctx->f16_subnormals < 0) {
        bool kept = false;
        glesllm_status st = probe_f16_subnormals(ctx, &kept);
        if (st != GLESLLM_OK)
            return st;
        ctx->f16_subnormals = kept;
    }
    *out = ctx->f16_subnormals > 0;
    return GLESLLM_OK;
}
