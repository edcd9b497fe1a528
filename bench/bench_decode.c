/* Decode speed (llama-bench's tg): BOS, then N greedy tokens on the GPU,
 * repeated; prints tokens/s (mean +- sd over the repetitions), dispatches
 * per token, and the weight bytes read per token times tokens/s (GB/s: every
 * weight is read once per token) next to the copy-kernel ceiling measured by
 * bench_matvec.
 *
 *   bench_decode -m MODEL.gguf [-n 128] [-r 3] [-c 4096]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/generate.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/forward.h"
#include "model/model.h"

static bool count(void *ud, int32_t id)
{
    (void)ud;
    (void)id;
    return true;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int n = 128, reps = 3, n_ctx = 4096;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "-n"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c"))
            n_ctx = atoi(argv[i + 1]);
    }
    if (!path || n < 2 || reps < 1 || n_ctx < n + 1) {
        fprintf(stderr, "usage: bench_decode -m MODEL.gguf [-n 128] [-r 3] [-c 4096]\n");
        return 2;
    }
    gguf_file *f;
    model m;
    gpu_options go;
    gpu_context *ctx;
    gpu_model *gm;
    if (gguf_open(path, &f) || model_open(f, &m) || gpu_options_from_env(&go) ||
        gpu_context_create(&go, &ctx)) {
        fprintf(stderr, "bench_decode: %s\n", glesllm_last_error());
        return 1;
    }
    gpu_model_options mo = { (uint32_t)n_ctx };
    if (gpu_model_create(ctx, &m, &mo, &gm)) {
        fprintf(stderr, "bench_decode: %s\n", glesllm_last_error());
        return 1;
    }
    int32_t bos = m.hp.bos >= 0 ? m.hp.bos : 1;
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
    gpu_model_destroy(gm);
    gpu_context_destroy(ctx);
    model_close(&m);
    gguf_close(f);
    return 0;
}
