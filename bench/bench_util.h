/* What the GPU benchmark programs share: exiting with a clear error, and
 * their -f / -s lists. Define BENCH_NAME (the program's name, for the
 * messages) before including. */
#ifndef GLESLLM_BENCH_UTIL_H
#define GLESLLM_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <GLES3/gl31.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant_gpu.h"

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

/* -f "Q4_0,Q8_0,...": at most max formats the GPU has a layout for, into
 * out; their count. Exits with status 2 naming one it does not know. */
static inline int bench_parse_formats(const char *s, uint32_t *out, int max)
{
    char buf[256];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
        int t = ggml_type_from_name(tok);
        if (t < 0 || !quant_gpu_layout_of((uint32_t)t)) {
            fprintf(stderr, BENCH_NAME ": unknown or unsupported format '%s'\n", tok);
            exit(2);
        }
        out[n++] = (uint32_t)t;
    }
    return n;
}

/* -s "ROWSxCOLS,...": at most max shapes into out, each dimension 1..limit
 * (0: no limit); their count. Exits with status 2 naming one it cannot read. */
static inline int bench_parse_shapes(const char *s, uint64_t (*out)[2], int max, uint64_t limit)
{
    char buf[256];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
        unsigned long long r, c;
        if (sscanf(tok, "%llux%llu", &r, &c) != 2 || !r || !c ||
            (limit && (r > limit || c > limit))) {
            if (limit)
                fprintf(stderr, BENCH_NAME ": shape '%s' is not ROWSxCOLS (each 1..%llu)\n", tok,
                        (unsigned long long)limit);
            else
                fprintf(stderr, BENCH_NAME ": shape '%s' is not ROWSxCOLS\n", tok);
            exit(2);
        }
        out[n][0] = r;
        out[n++][1] = c;
    }
    return n;
}

#endif
