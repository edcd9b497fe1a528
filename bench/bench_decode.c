/* Decode speed (llama-bench's tg): BOS, then N greedy tokens on the GPU,
 * repeated; prints tokens/s (mean +- sd over the repetitions), dispatches
 * per token, and the weight bytes read per token times tokens/s (GB/s: every
 * weight is read once per token) next to the copy-kernel ceiling measured by
 * bench_matvec.
 *
 *   bench_decode -m MODEL.gguf [-n 128] [-r 3] [-c 4096] [--profile [-p 512]]
 *
 * --profile: one more run with a GPU timestamp after every dispatch, then the
 * GPU time per token of each kind of dispatch (program, work groups, whether a
 * barrier preceded it), largest first. The timestamps slow the run a little.
 * With -p N also the same table for one prefill of N tokens (ids 1..N) from
 * an empty cache. --profile-steps: one more run, every dispatch of a step by
 * its place in the step (use -n below 64 so that every step has the same
 * dispatches: past 64 positions attention adds its merge).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_model.h"
#include "engine/generate.h"
#include "profile_table.h"

static bool count(void *ud, int32_t id)
{
    (void)ud;
    (void)id;
    return true;
}

static int by_seq(const void *a, const void *b)
{
    const gpu_profile_entry *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* --profile-steps: every dispatch of a step by its place in the step */
static int print_sequence(gpu_model *gm, const gen_options *o)
{
    gpu_queue *q = gpu_model_queue(gm);
    gen_stats gs;
    if (!gpu_queue_profile_enable(q, GPU_PROFILE_SEQUENCE)) {
        fprintf(stderr, "bench_decode: --profile-steps: %s\n", glesllm_last_error());
        return 1;
    }
    gpu_queue_profile_reset(q);
    if (engine_generate(gm, o, &gs)) {
        fprintf(stderr, "bench_decode: %s\n", glesllm_last_error());
        return 1;
    }
    static gpu_profile_entry e[512];
    size_t n = gpu_queue_profile_get(q, e, 512);
    n = n < 512 ? n : 512;
    qsort(e, n, sizeof *e, by_seq);
    printf("Every dispatch of a decode step by place (us, mean over the steps that had it):\n");
    for (size_t i = 0; i < n; i++)
        printf("  %4u %8.2f  %-28s %5u groups  x%llu\n", e[i].seq,
               e[i].total_ns / 1e3 / (double)e[i].count, e[i].name, e[i].groups,
               (unsigned long long)e[i].count);
    gpu_queue_profile_enable(q, GPU_PROFILE_DISPATCHES);
    return 0;
}

static int print_profile(gpu_model *gm, const gen_options *o, uint32_t n_prefill)
{
    gpu_queue *q = gpu_model_queue(gm);
    gen_stats gs;
    if (!gpu_queue_profile_enable(q, GPU_PROFILE_DISPATCHES)) {
        fprintf(stderr, "bench_decode: --profile: %s\n", glesllm_last_error());
        return 1;
    }
    if (engine_generate(gm, o, &gs)) {
        fprintf(stderr, "bench_decode: %s\n", glesllm_last_error());
        return 1;
    }
    char what[64];
    snprintf(what, sizeof what, "decode, %u steps", gs.n_gen);
    print_profile_table(q, gs.n_gen ? gs.n_gen : 1, what, "token");
    if (!n_prefill)
        return 0;
    for (uint32_t i = 0; i < n_prefill; i++)
        if (gpu_model_set_token(gm, i, (int32_t)(1 + i % (gpu_model_model(gm)->hp.n_vocab - 1))))
            break;
    gpu_queue_profile_reset(q);
    if (gpu_model_truncate(gm, 0) || gpu_model_prefill(gm, 0, n_prefill, GPU_STEP_ARGMAX) ||
        gpu_model_wait(gm)) {
        fprintf(stderr, "bench_decode: prefill: %s\n", glesllm_last_error());
        return 1;
    }
    snprintf(what, sizeof what, "one prefill of %u tokens", n_prefill);
    print_profile_table(q, 1, what, "pass");
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int n = 128, reps = 3, n_ctx = 4096, n_prefill = 0;
    bool profile = false, steps = false;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--profile")) {
            profile = true;
            i--;
        } else if (!strcmp(argv[i], "--profile-steps")) {
            steps = true;
            i--;
        } else if (i + 1 >= argc)
            path = NULL, i = argc;
        else if (!strcmp(argv[i], "-m"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "-n"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c"))
            n_ctx = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-p"))
            n_prefill = atoi(argv[i + 1]);
    }
    if (!path || n < 2 || reps < 1 || n_ctx < n + 1 || n_prefill < 0 || n_prefill > n_ctx) {
        fprintf(stderr,
                "usage: bench_decode -m MODEL.gguf [-n 128] [-r 3] [-c 4096] [--profile [-p N]] [--profile-steps]\n");
        return 2;
    }
    bench_model b;
    gpu_model_options mo = { (uint32_t)n_ctx };
    bench_model_open("bench_decode", path, &mo, &b);
    gpu_context *ctx = b.ctx;
    gpu_model *gm = b.gm;
    const model *mp = &b.m;
    int32_t bos = mp->hp.bos >= 0 ? mp->hp.bos : 1;
    gen_options o = { &bos, 1, n, { 0 }, true, NULL, NULL, count, NULL };
    double tps[64], sum = 0.0;
    gen_stats gs;
    if (reps > 64)
        reps = 64;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        if (engine_generate(gm, &o, &gs)) {
            fprintf(stderr, "bench_decode: %s\n", glesllm_last_error());
            return 1;
        }
        if (r >= 0)
            sum += tps[r] = (gs.n_gen - 1) / gs.gen_s;
    }
    double mean = sum / reps, var = 0.0;
    for (int r = 0; r < reps; r++)
        var += (tps[r] - mean) * (tps[r] - mean);
    double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0;
    double gb = gpu_model_weight_bytes(gm) / 1e9;
    printf("%-40s %-28s tg%-4d %8.1f +- %5.1f tok/s  %4u dispatches/token  %6.2f GB weights  "
           "%7.1f GB/s  %.2f ms/token recording on the CPU\n",
           path, gpu_context_string(ctx, 0x1F01), n, mean, sd, gs.dispatches_per_token, gb,
           gb * mean, gs.n_gen ? 1e3 * gs.record_s / gs.n_gen : 0.0);
    uint64_t ev_n, ev_bytes;
    if (gpu_context_memory_evicted(ctx, &ev_n, &ev_bytes) && ev_n)
        fprintf(stderr, "bench_decode: the driver evicted %llu times, %llu MiB\n",
                (unsigned long long)ev_n, (unsigned long long)(ev_bytes >> 20));
    if (profile && print_profile(gm, &o, (uint32_t)n_prefill) != 0)
        return 1;
    if (steps && print_sequence(gm, &o) != 0)
        return 1;
    bench_model_close(&b);
    return 0;
}
