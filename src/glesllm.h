/* glesllm: LLM inference through OpenGL ES 3.1 compute shaders on headless EGL.
 *
 * Public interface of libglesllm. Every function that can fail returns a
 * glesllm_status; GLESLLM_OK is 0. After a failure, glesllm_last_error()
 * returns a message for the calling thread naming what went wrong and what to
 * do about it; it stays valid until the next failing call on that thread.
 */
#ifndef GLESLLM_H
#define GLESLLM_H

#ifdef __cplusplus
extern "C" {
#endif

#define GLESLLM_VERSION_MAJOR 0
#define GLESLLM_VERSION_MINOR 1
#define GLESLLM_VERSION_PATCH 0

/* Stable values: they may be stored or compared by callers. */
typedef enum glesllm_status {
    GLESLLM_OK = 0,
    GLESLLM_ERR_INVALID_ARGUMENT = 1, /* a caller passed something unusable */
    GLESLLM_ERR_NO_MEMORY = 2,        /* host allocation failed */
    GLESLLM_ERR_IO = 3,               /* a file could not be opened, read or written */
    GLESLLM_ERR_EGL = 4,              /* no usable EGL display or context */
    GLESLLM_ERR_GL = 5,               /* an OpenGL ES call reported an error */
    GLESLLM_ERR_UNSUPPORTED = 6,      /* the driver lacks a required version, limit or extension */
    GLESLLM_ERR_SHADER = 7,           /* a kernel failed to compile or link */
    GLESLLM_ERR_GPU_OUT_OF_MEMORY = 8,/* the driver could not allocate GPU memory */
    GLESLLM_ERR_FORMAT = 9,           /* malformed input file (GGUF, cache, ...) */
    GLESLLM_ERR_TIMEOUT = 10          /* the GPU did not finish in time */
} glesllm_status;

/* Short fixed description of a status code ("GPU out of memory"). */
const char *glesllm_strerror(glesllm_status status);

/* Detailed message of the last failure on this thread ("" if none). */
const char *glesllm_last_error(void);

/* "MAJOR.MINOR.PATCH" */
const char *glesllm_version(void);

#ifdef __cplusplus
}
#endif
#endif /* GLESLLM_H */
