/* Variables of the environment that tune the engine: read the same way
 * everywhere (unset or empty: not set; anything not understood: an error
 * that names the variable, its value and what it takes). */
#ifndef GLESLLM_COMMON_ENV_H
#define GLESLLM_COMMON_ENV_H

#include "common/error.h"

/* A 0|1 variable: *out is -1 when it is not set, else 0 or 1. `use` says
 * what the values mean in the error ("1 (cache off) or 0"). */
glesllm_status env_flag(const char *name, const char *use, int *out);

/* A whole number in lo..hi: *out is left as it is when it is not set. */
glesllm_status env_long(const char *name, long lo, long hi, long *out);

/* lo..hi comma-separated whole numbers (each below 2^20) into v: how many,
 * 0 when unset or empty, -1 when it is anything else (no error is set: the
 * caller names what the variable takes). */
int env_uints(const char *name, unsigned *v, int lo, int hi);

#endif
