/* The backend: the GPU opened for the library, its lock, and what it reports
 * (glesllm_backend_describe, which `glesllm info --gpu` prints). */
#include <GLES3/gl31.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/env.h"
#include "ops/matvec.h"
#include "ops/prefetch.h"

glesllm_status api_enter(glesllm_backend *b, bool wait, api_call *call)
{
    call->b = b;
    if (wait) {
        pthread_mutex_lock(&b->lock);
    } else if (pthread_mutex_trylock(&b->lock) != 0) {
        return err_set(GLESLLM_ERR_BUSY,
                       "the backend is in a call on another thread; calls on one backend go one "
                       "at a time (give each thread its own backend to run them side by side)");
    }
    glesllm_status st = gpu_context_enter(b->gpu, &call->cur);
    if (st)
        pthread_mutex_unlock(&b->lock);
    return st;
}

void api_leave(api_call *call)
{
    gpu_context_leave(call->b->gpu, &call->cur);
    pthread_mutex_unlock(&call->b->lock);
}

void api_log(const glesllm_backend *b, glesllm_log_level level, const char *fmt, ...)
{
    if (!b || !b->log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    b->log(b->log_ud, level, msg);
}

glesllm_status api_check_backend(const glesllm_backend *b)
{
    if (!b)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the backend is NULL");
    if (b->tag != TAG_BACKEND)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the handle given as a backend is not one (or was closed)");
    return GLESLLM_OK;
}

glesllm_backend_params glesllm_backend_default_params(void)
{
    glesllm_backend_params p;
    memset(&p, 0, sizeof p);
    return p;
}

glesllm_status glesllm_backend_params_from_env(glesllm_backend_params *out)
{
    if (!out)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = glesllm_backend_default_params();
    gpu_options go;
    tuning t;
    glesllm_status st = gpu_options_from_env(&go);
    if (!st)
        st = tuning_from_env(&t); /* (checked now: read again by open) */
    if (st)
        return st;
    out->platform = (glesllm_platform)go.platform;
    out->device = go.device_path;
    out->limits_min = go.limits_min;
    out->no_cache = go.no_cache;
    out->tuning_from_env = 1;
    return GLESLLM_OK;
}

_Static_assert((int)GLESLLM_PLATFORM_GBM == (int)GPU_PLATFORM_GBM &&
                   (int)GLESLLM_PLATFORM_DEVICE == (int)GPU_PLATFORM_DEVICE &&
                   (int)GLESLLM_PLATFORM_SURFACELESS == (int)GPU_PLATFORM_SURFACELESS,
               "platform values");

glesllm_status glesllm_backend_open(const glesllm_backend_params *params, glesllm_backend **out)
{
    if (!out)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    glesllm_backend_params p = params ? *params : glesllm_backend_default_params();
    if ((unsigned)p.platform > GLESLLM_PLATFORM_SURFACELESS)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "platform %d is none of glesllm_platform's",
                       (int)p.platform);
    glesllm_backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    b->tune = TUNING_DEFAULT;
    glesllm_status st = p.tuning_from_env ? tuning_from_env(&b->tune) : GLESLLM_OK;
    gpu_options go = { (gpu_platform)p.platform, p.device, p.limits_min != 0, p.no_cache != 0,
                       p.cache_dir };
    /* whatever the caller had current goes back after the create made ours current */
    gpu_current cur = gpu_current_get();
    if (!st)
        st = gpu_context_create(&go, &b->gpu);
    if (st) {
        free(b);
        return err_prefix(st, "opening the GPU: ");
    }
    gpu_context_leave(b->gpu, &cur);
    pthread_mutex_init(&b->lock, NULL);
    b->tag = TAG_BACKEND;
    b->log = p.log;
    b->log_ud = p.log_ud;
    *out = b;
    return GLESLLM_OK;
}

glesllm_status glesllm_backend_close(glesllm_backend *b)
{
    if (!b)
        return GLESLLM_OK;
    glesllm_status st = api_check_backend(b);
    if (st)
        return st;
    if (b->n_models)
        return err_set(GLESLLM_ERR_BUSY,
                       "the backend still has %u model(s) open (or contexts of closed ones); "
                       "free them first", b->n_models);
    api_call call;
    if ((st = api_enter(b, false, &call)))
        return st;
    gpu_current cur = call.cur;
    b->tag = 0;
    gpu_context_destroy(b->gpu); /* (releases this thread's EGL state) */
    if (cur.switched && cur.context)
        gpu_context_leave(NULL, &cur);
    pthread_mutex_unlock(&b->lock);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return GLESLLM_OK;
}

const char *glesllm_backend_renderer(const glesllm_backend *b)
{
    return api_check_backend(b) ? "" : gpu_context_string(b->gpu, GL_RENDERER);
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static void describe(gpu_context *ctx, const tuning *tune, FILE *f)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    const gpu_caps *C = gpu_context_caps(ctx);
    fprintf(f, "platform:            %s (%s)\n", gpu_platform_name(gpu_context_platform(ctx)),
           gpu_context_display_desc(ctx));
    fprintf(f, "GL_VENDOR:           %s\n", gpu_context_string(ctx, GL_VENDOR));
    fprintf(f, "GL_RENDERER:         %s\n", gpu_context_string(ctx, GL_RENDERER));
    fprintf(f, "GL_VERSION:          %s\n", gpu_context_string(ctx, GL_VERSION));
    fprintf(f, "GLSL version:        %s\n", gpu_context_string(ctx, GL_SHADING_LANGUAGE_VERSION));
    fprintf(f, "limits used%s:\n", gpu_context_limits_min(ctx) ? " (GLESLLM_LIMITS=min: GLES 3.1 minimums)" : "");
    fprintf(f, "  work group invocations     %u\n", L->max_invocations);
    fprintf(f, "  work group size            %u x %u x %u\n", L->max_group_size[0], L->max_group_size[1],
           L->max_group_size[2]);
    fprintf(f, "  work group count           %u x %u x %u\n", L->max_group_count[0],
           L->max_group_count[1], L->max_group_count[2]);
    fprintf(f, "  shared memory              %u bytes\n", L->max_shared_bytes);
    fprintf(f, "  storage blocks per shader  %u\n", L->max_storage_blocks);
    fprintf(f, "  storage buffer bindings    %u\n", L->max_storage_bindings);
    fprintf(f, "  storage block size         %llu MiB\n",
           (unsigned long long)(L->max_storage_block_bytes >> 20));
    fprintf(f, "  storage offset alignment   %u bytes\n", L->storage_offset_alignment);
    fprintf(f, "optional extensions:\n");
    fprintf(f, "  GL_EXT_buffer_storage      %s\n", yes_no(C->buffer_storage));
    if (C->subgroup) {
        int order = 0;
        glesllm_status ost = gpu_context_subgroup_order(ctx, &order);
        fprintf(f, "  GL_KHR_shader_subgroup     yes (subgroup size %u; subgroupAdd %s)\n",
               C->subgroup_size,
               ost != GLESLLM_OK               ? glesllm_last_error()
               : order == GPU_SG_HALVES     ? "adds the halves first, as a verifying pass's "
                                              "matvecs follow without subgroup operations"
               : order == GPU_SG_NEIGHBOURS ? "adds neighbours first, as a verifying pass's "
                                              "matvecs follow without subgroup operations"
                                            : "in an order not probed: a verifying pass's "
                                              "matvecs call it themselves (slower)");
    } else
        fprintf(f, "  GL_KHR_shader_subgroup     no%s\n",
               gpu_context_limits_min(ctx) ? " (off under GLESLLM_LIMITS=min)" : "");
    fprintf(f, "  fp16 arithmetic            %s%s\n", yes_no(C->fp16_arith),
           C->mediump_is_fp16 ? " (mediump float is fp16)" : "");
    fprintf(f, "  f16 types (NV_gpu_shader5) %s%s\n", yes_no(C->f16_types),
           C->f16_types ? " (prefill tiles in f16 except for F32 weights; matvec products "
                          "of the quantized formats in f16 unless GLESLLM_F16_DOT=0)"
                        : " (matvec products of the quantized formats in f32 pairs, the "
                          "code of the f16 products, unless GLESLLM_F16_DOT=0)");
    bool subn = false;
    if (gpu_context_f16_subnormals(ctx, &subn) == GLESLLM_OK)
        fprintf(f, "  f16 subnormals kept        %s%s\n", yes_no(subn),
               subn ? " (matvec levels of " MATVEC_SUBN_DEFAULT " as f16 subnormals with "
                      "f16 products; GLESLLM_F16_SUBN=0|1 overrides)"
                    : " (matvec levels as integers)");
    else
        fprintf(f, "  f16 subnormals kept        %s\n", glesllm_last_error());
    fprintf(f, "  program binaries           %s\n", yes_no(C->program_binary));
    if (C->memory_source)
        fprintf(f, "GPU memory:          %llu MiB, %llu MiB free (%s)\n",
               (unsigned long long)(C->memory_total >> 20),
               (unsigned long long)(gpu_context_memory_available(ctx) >> 20), C->memory_source);
    else
        fprintf(f, "GPU memory:          not reported by the driver\n");
    kv_placement kv;
    const char *why;
    if (kv_placement_choose(ctx, tune, &kv, &why) == GLESLLM_OK)
        fprintf(f, "KV cache:            %s buffers (%s; GLESLLM_KV=device|mapped overrides)\n",
               kv_placement_name(kv), why);
    else
        fprintf(f, "KV cache:            %s\n", glesllm_last_error());
    bool pf;
    gpu_model_prefetch_choose(ctx, tune, PREFETCH_MIN, &pf, &why);
    fprintf(f, "FFN prefetch:        %s (%s; GLESLLM_PREFETCH=0|1 overrides)\n", pf ? "on" : "off",
           why);
    const char *dir = gpu_context_cache_dir(ctx);
    if (dir)
        fprintf(f, "program cache:       on (%s)\n", dir);
    else
        fprintf(f, "program cache:       off (%s)\n", gpu_context_cache_off_reason(ctx));
}

glesllm_status glesllm_backend_describe(glesllm_backend *b, char **text)
{
    glesllm_status st = api_check_backend(b);
    if (st || !text)
        return st ? st : err_set(GLESLLM_ERR_INVALID_ARGUMENT, "text is NULL");
    *text = NULL;
    size_t len;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    api_call call;
    if (!(st = api_enter(b, false, &call))) {
        describe(b->gpu, &b->tune, f);
        api_leave(&call);
    }
    if (fclose(f) != 0 && !st)
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    if (st) {
        free(*text);
        *text = NULL;
    }
    return st;
}
