#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/utf8.h"

#define ERR_MSG_MAX 4096

static _Thread_local char err_msg[ERR_MSG_MAX];

const char *glesllm_strerror(glesllm_status status)
{
    switch (status) {
    case GLESLLM_OK: return "success";
    case GLESLLM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case GLESLLM_ERR_NO_MEMORY: return "out of host memory";
    case GLESLLM_ERR_IO: return "input/output error";
    case GLESLLM_ERR_EGL: return "EGL error";
    case GLESLLM_ERR_GL: return "OpenGL ES error";
    case GLESLLM_ERR_UNSUPPORTED: return "not supported by this GPU driver";
    case GLESLLM_ERR_SHADER: return "shader compile or link error";
    case GLESLLM_ERR_GPU_OUT_OF_MEMORY: return "GPU out of memory";
    case GLESLLM_ERR_FORMAT: return "malformed file";
    case GLESLLM_ERR_TIMEOUT: return "GPU timeout";
    case GLESLLM_ERR_BUSY: return "busy";
    case GLESLLM_ERR_SMALL_BUFFER: return "buffer too small";
    case GLESLLM_ERR_CANCELLED: return "cancelled";
    case GLESLLM_ERR_STATE_MISMATCH: return "saved state damaged or of another model";
    case GLESLLM_ERR_KV_FULL: return "KV cache full";
    }
    return "unknown error";
}

const char *glesllm_last_error(void) { return err_msg; }

const char *glesllm_version(void)
{
#define GLESLLM_STR2(x) #x
#define GLESLLM_STR(x) GLESLLM_STR2(x)
    return GLESLLM_STR(GLESLLM_VERSION_MAJOR) "." GLESLLM_STR(GLESLLM_VERSION_MINOR) "." GLESLLM_STR(
        GLESLLM_VERSION_PATCH);
}

/* Messages name keys, tensors, paths and values from files and users: what
 * a terminal would act on is escaped (a name holding ESC sequences could
 * retitle or clear the terminal that shows the error). */
static void keep_escaped(const char *msg)
{
    term_escape(msg, strlen(msg), true, err_msg, sizeof err_msg);
}

glesllm_status err_set(glesllm_status status, const char *fmt, ...)
{
    char msg[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    keep_escaped(msg);
    return status;
}

glesllm_status err_prefix(glesllm_status status, const char *fmt, ...)
{
    char prefix[512];
    char old[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char msg[ERR_MSG_MAX];
    memcpy(old, err_msg, sizeof old);
    snprintf(msg, sizeof msg, "%s%s", prefix, old);
    keep_escaped(msg);
    return status;
}

void err_clear(void) { err_msg[0] = '\0'; }
