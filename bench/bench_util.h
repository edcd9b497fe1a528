/* What the GPU benchmark programs share: exiting with a clear error. Define
 * BENCH_NAME (the program's name, for the messages) before including. */
#ifndef GLESLLM_BENCH_UTIL_H
#define GLESLLM_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <GLES3/gl31.h>

#include "common/error.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif

/* Exits with status 1 after printing `what` and the library's last error. */
static inline _Noreturn void die(const char *what)
{
    fprintf(stderr, BENCH_NAME ": %s: %s\n", what, glesllm_last_error());
    exit(1);
}

/* Exits with status 1 if GL reports an error (raw GL calls made by the program). */
static inline void check_gl(const char *what)
{
    GLenum e = glGetError();
    if (e != GL_NO_ERROR) {
        fprintf(stderr, BENCH_NAME ": %s failed with GL error 0x%x\n", what, e);
        exit(1);
    }
}

#endif
