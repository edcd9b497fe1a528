#include "common/env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

glesllm_status env_flag(const char *name, const char *use, int *out)
{
    const char *v = getenv(name);
    *out = -1;
    if (!v || !*v)
        return GLESLLM_OK;
    if (strcmp(v, "0") && strcmp(v, "1"))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "%s=%s is not known; use %s", name, v, use);
    *out = v[0] == '1';
    return GLESLLM_OK;
}

glesllm_status env_long(const char *name, long lo, long hi, long *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return GLESLLM_OK;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < lo || n > hi)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "%s=%s: expected a whole number from %ld to %ld", name, v, lo, hi);
    *out = n;
    return GLESLLM_OK;
}

int env_uints(const char *name, unsigned *v, int lo, int hi)
{
    const char *env = getenv(name), *p = env;
    if (!env || !*env)
        return 0;
    int n = 0;
    for (;;) {
        char *end;
        if (n == hi || *p < '0' || *p > '9')
            return -1;
        unsigned long x = strtoul(p, &end, 10);
        if (x >= 1ul << 20)
            return -1;
        v[n++] = (unsigned)x;
        if (!*end)
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    return n >= lo ? n : -1;
}
