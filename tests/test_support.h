/* Helpers shared by the test programs: a seeded RNG (tests never use zeros),
 * the GPU context every GPU test opens the way the CLI does, and the exit code
 * that lets ctest show a binary whose tests were all ignored as skipped. */
#ifndef GLESLLM_TEST_SUPPORT_H
#define GLESLLM_TEST_SUPPORT_H

#include "common/util.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unity.h"

/* ctest's SKIP_RETURN_CODE for every test (tests/CMakeLists.txt). */
#define TEST_SKIP_EXIT_CODE 77

static inline int test_exit_code(int failures)
{
    if (failures == 0 && Unity.NumberOfTests > 0 && Unity.TestIgnores == Unity.NumberOfTests)
        return TEST_SKIP_EXIT_CODE;
    return failures ? 1 : 0;
}

/* Whether this machine has a DRM render node (the GBM platform's need). */
/* A file's text into buf (NUL-terminated, at most n - 1 bytes; "" when it
 * cannot be read). */
static inline void read_text_file(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static inline bool has_render_node(void)
{
    DIR *d = opendir("/dev/dri");
    bool found = false;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "renderD", 7) == 0)
            found = true;
    if (d)
        closedir(d);
    return found;
}

/* The shared test models and references (../shared in the project's
 * checkout), from GLESLLM_SHARED_DIR; NULL when absent, and tests that need
 * them ignore themselves with a message saying so. */
static inline const char *test_shared_dir(void)
{
    const char *d = getenv("GLESLLM_SHARED_DIR");
    if (!d || !*d)
        return NULL;
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/models", d);
    DIR *dir = opendir(probe);
    if (!dir)
        return NULL;
    closedir(dir);
    return d;
}

#define TEST_NEEDS_SHARED(dir)                                                                     \
    const char *dir = test_shared_dir();                                                           \
    if (!dir)                                                                                      \
    TEST_IGNORE_MESSAGE("GLESLLM_SHARED_DIR is not set to the shared test models: skipped")

/* splitmix64: small, seedable, and the same on every platform. */
typedef struct test_rng {
    uint64_t s;
} test_rng;

static inline uint64_t rng_next(test_rng *r) { return splitmix64(&r->s); }

/* uniform in [lo, hi) */
static inline float rng_float(test_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

static inline void rng_fill(test_rng *r, float *v, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        v[i] = rng_float(r, lo, hi);
}

/* sqrt(sum (y - x)^2 / sum x^2): the relative RMS error of y against x. */
static inline double rel_rms_error(const float *x, const float *y, size_t n)
{
    double e = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - x[i];
        e += d * d;
        s += (double)x[i] * x[i];
    }
    return sqrt(e / s);
}

/* Largest |a-b| / max(|b|, floor) over n values. */
static inline double max_rel_error(const float *a, const float *b, size_t n, double floor_)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - b[i], m = b[i] < 0 ? -b[i] : b[i];
        double r = (d < 0 ? -d : d) / (m > floor_ ? m : floor_);
        if (r > worst || r != r)
            worst = (r != r) ? 1e30 : r;
    }
    return worst;
}

#endif
