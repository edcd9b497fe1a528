/* The backend: the GPU opened for the library, and its lock. */
#include <GLES3/gl31.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/env.h"

glesllm_status api_enter(glesllm_backend *b, bool wait, api_call *call)
{
    call->b = b;
    if (wait) {
        pthread_mutex_lock(&b->lock);
    } else if (pthread_mutex_trylock(&b->lock) != 0) {
        return err_set(GLESLLM_ERR_BUSY,
                       "the backend is inside another call (on another thread, or this call is "
                       "from a callback of it); calls on one backend go one at a time (give "
                       "each thread its own backend to run them side by side)");
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

void api_log(glesllm_log_fn fn, void *ud, glesllm_log_level level, const char *fmt, ...)
{
    if (!fn)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fn(ud, level, msg);
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
    if (gpu_context_warning(b->gpu) && b->log)
        b->log(b->log_ud, GLESLLM_LOG_WARN, gpu_context_warning(b->gpu));
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

