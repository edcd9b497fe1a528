/* bench_verify: what speculative decoding's verification costs next to a
 * plain decode step, on one model.
 *
 *   bench_verify MODEL.gguf [-r REPS] [-p PROMPT_TOKENS] [--profile]
 *
 * After a prompt of PROMPT_TOKENS (default 64), times (median of REPS, default
 * 20, after 0.3 s of them untimed) one decode step with its argmax, and the target's pass
 * over k drafted tokens for k = 1, 2, 4, 8, 16: k + 1 tokens (the last kept
 * token and the drafted ones) with the argmax of every position, as
 * engine_speculative runs it. The cache is rolled back after each pass. Prints
 * the times, the ratio to the decode step, and tokens/s when every drafted
 * token is kept. --profile: then, for the decode step and each pass, the GPU
 * time of every kind of dispatch over REPS more runs (a timestamp after each
 * dispatch, which slows the run a little). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_model.h"
#include "common/util.h"
#include "profile_table.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_verify: %s: %s\n", what, glesllm_last_error());
    return 1;
}

/* Median seconds of reps passes of n tokens at pos (n == 0: a decode step),
 * after WARM_S seconds of them untimed. (With one untimed step, a decode
 * step after the prompt sometimes ran at 9.3-9.7 ms all through its reps
 * against 3.6, on an H200 in 3 of about 12 runs, the passes after it as
 * usual; bench/RESULTS.md session 53.) */
#define WARM_S 0.3
static int time_pass(gpu_model *gm, uint32_t pos, uint32_t n, int reps, double *out)
{
    double t[256], warm_end = now_seconds() + WARM_S;
    for (int r = -1; r < reps; r++) {
        double t0 = now_seconds();
        glesllm_status st = n ? gpu_model_prefill(gm, pos, n, GPU_STEP_ARGMAX_ALL)
                              : gpu_model_step(gm, pos, GPU_STEP_ARGMAX);
        if (st || gpu_model_wait(gm))
            return fail("timing a pass");
        if (r >= 0)
            t[r] = now_seconds() - t0;
        else if (now_seconds() < warm_end)
            r--; /* still warming up */
        if (gpu_model_truncate(gm, pos))
            return fail("rolling back");
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    *out = t[reps / 2];
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_verify MODEL.gguf [-r REPS] [-p PROMPT_TOKENS] [--profile]\n");
        return 2;
    }
    int reps = 20;
    long prompt = 64;
    bool profile = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--profile") == 0)
            profile = true;
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
            prompt = atol(argv[++i]);
        else {
            fprintf(stderr, "bench_verify: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || reps > 256 || prompt < 1 || prompt > 4000) {
        fprintf(stderr, "bench_verify: -r is 1..256, -p 1..4000\n");
        return 2;
    }
    static const uint32_t drafted[] = { 1, 2, 4, 8, 16 };
    gpu_model_options mo = { (uint32_t)prompt + 32 };
    mo.n_small = 17; /* 16 drafted tokens and the last kept one in one pass */
    bench_model b;
    bench_model_open("bench_verify", argv[1], &mo, &b);
    gpu_context *ctx = b.ctx;
    gpu_model *gm = b.gm;
    for (uint32_t i = 0; i < (uint32_t)prompt + 17; i++)
        gpu_model_set_token(gm, i, (int32_t)((i * 7919u + 13u) % b.m.hp.n_vocab));
    if (gpu_model_prepare_small(gm) || gpu_model_prefill(gm, 0, (uint32_t)prompt, 0) ||
        gpu_model_wait(gm))
        return fail("the prompt");
    double step;
    if (time_pass(gm, (uint32_t)prompt, 0, reps, &step))
        return 1;
    printf("model %s, %.0f MiB of weights on %s, after %ld prompt tokens, median of %d\n",
           argv[1], gpu_model_weight_bytes(gm) / 1048576.0,
           gpu_context_string(ctx, 0x1F01 /* GL_RENDERER */), prompt, reps);
    printf("decode step:               %8.3f ms  (%.1f tokens/s)\n", step * 1e3, 1.0 / step);
    for (size_t i = 0; i < sizeof drafted / sizeof drafted[0]; i++) {
        double t;
        uint32_t n = drafted[i] + 1;
        if (time_pass(gm, (uint32_t)prompt, n, reps, &t))
            return 1;
        printf("verify %2u drafted (%2u tok): %8.3f ms  %5.2fx a step  (%.1f tokens/s if all kept)\n",
               drafted[i], n, t * 1e3, t / step, n / t);
    }
    if (profile) {
        gpu_queue *q = gpu_model_queue(gm);
        if (!gpu_queue_profile_enable(q, GPU_PROFILE_DISPATCHES))
            return fail("--profile");
        for (size_t i = 0; i <= sizeof drafted / sizeof drafted[0]; i++) {
            uint32_t n = i ? drafted[i - 1] + 1 : 0;
            double t;
            gpu_queue_profile_reset(q);
            if (time_pass(gm, (uint32_t)prompt, n, reps, &t))
                return 1;
            char what[64];
            if (n)
                snprintf(what, sizeof what, "a pass of %u drafted (%u tokens)", n - 1, n);
            else
                snprintf(what, sizeof what, "a decode step");
            /* time_pass runs reps + 1 passes (one warm-up) */
            print_profile_table(q, reps + 1, what, n ? "pass" : "step");
        }
    }
    bench_model_close(&b);
    return 0;
}
