/* Small helpers shared by every layer: a seedable generator and a clock. */
#ifndef GLESLLM_COMMON_UTIL_H
#define GLESLLM_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* splitmix64: small, seedable, the same sequence on every platform. */
static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* FNV-1a over n bytes, continuing from h (start from FNV1A_SEED). */
#define FNV1A_SEED 0xcbf29ce484222325ull
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* Room for `need` elements of `size` bytes in the growable array p of *cap
 * elements (doubling, from `first`): the array, moved or not, or NULL when out
 * of memory (then p and *cap are unchanged). */
static inline void *grow_array(void *p, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap && p)
        return p;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * size);
    if (q)
        *cap = c;
    return q;
}

/* Seconds on the monotonic clock. */
static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
