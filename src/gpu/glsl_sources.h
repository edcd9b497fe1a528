/* The glsl/ files, embedded at build time by cmake/embed_glsl.cmake into
 * glsl_sources.c in the build folder: no files are needed at run time. */
#ifndef GLESLLM_GPU_GLSL_SOURCES_H
#define GLESLLM_GPU_GLSL_SOURCES_H

#include <stddef.h>

typedef struct glsl_source {
    const char *name; /* file name, e.g. "rms_norm.comp" */
    const char *text; /* NUL-terminated contents */
} glsl_source;

extern const glsl_source glsl_sources[];
extern const size_t glsl_source_count;

#endif
