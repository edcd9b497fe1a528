/* bench_matmul: TFLOP/s of the prefill matmul (glsl/matmul.comp) for a
 * weight of each format times a batch of tokens, with the tiling the engine
 * picks (GLESLLM_MATMUL=wg,tm,tn[,half] overrides it, as in the engine).
 *
 * Each measurement records the same product `reps` times in one submission
 * (one output, no barriers needed: every dispatch writes the same values),
 * waits for its fence and divides the wall time by the count, after a
 * warm-up submission. FLOP = 2 x rows x cols x tokens. The weight is random,
 * the activations uniform in [-1, 1].
 *
 * usage: bench_matmul [-f Q4_0,Q8_0,...] [-s 14336x4096,...] [-t TOKENS]
 *                     [--ms N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "gguf/gguf.h"
#include "ops/get_rows.h"
#include "ops/matmul.h"
#include "quant/quant_gpu.h"
#include "random_weights.h"

#define BENCH_NAME "bench_matmul"
#include "bench_util.h"

static gpu_context *ctx;
/* the engine's tuning, from the environment (tuning_from_env) */
static tuning tune = TUNING_DEFAULT_INIT;
static gpu_queue *queue;

/* Non-tensor-core rates of the cards this was measured on (vendor figures). */
static const char *card_rates(const char *renderer)
{
    static const struct { const char *name, *rates; } cards[] = {
        { "H200", "67 f32 / 134 f16 TFLOP/s (non-tensor, SXM)" },
        { "H100 PCIe", "51 f32 / 102 f16 TFLOP/s (non-tensor)" },
        { "H100", "67 f32 / 134 f16 TFLOP/s (non-tensor, SXM)" },
    };
    for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++)
        if (strstr(renderer, cards[i].name))
            return cards[i].rates;
    return "unknown";
}

/* us per product of a rows x cols weight of `type` and n_tok tokens */
static double time_matmul(uint32_t type, uint64_t rows, uint64_t cols, uint32_t n_tok,
                          double target_ms, matmul_config *cfg_out)
{
    uint64_t seed = type * 7919u + rows;
    size_t wbytes;
    void *wdata = random_weights(&seed, type, rows, cols, &wbytes);
    if (!wdata) {
        fprintf(stderr, "bench_matmul: out of memory for a %llux%llu weight\n",
                (unsigned long long)rows, (unsigned long long)cols);
        exit(1);
    }
    gpu_weight w;
    if (gpu_weight_upload(ctx, "w", type, rows, cols, wdata, 0, &w) != GLESLLM_OK)
        die("upload");
    free(wdata);
    /* activation rows padded to 32 values, as the engine's (matmul.comp) */
    uint64_t xs = (cols + 31) / 32 * 32;
    size_t xn = 8 + (size_t)n_tok * xs, yn = (size_t)n_tok * rows;
    float *x = malloc(xn * sizeof *x);
    if (!x)
        die("activations");
    for (size_t i = 0; i < xn; i++)
        x[i] = rw_float(&seed, -1.0f, 1.0f);
    gpu_buffer bx, by;
    if (gpu_buffer_create(ctx, xn * sizeof *x, x, 0, "x", &bx) != GLESLLM_OK ||
        gpu_buffer_create(ctx, yn * sizeof(float), NULL, 0, "y", &by) != GLESLLM_OK)
        die("buffers");
    free(x);
    matmul_config dflt = matmul_default_config(ctx, &tune);
    matmul_config cfg = matmul_config_for(&dflt, rows); /* the engine's for these rows */
    matmul_kernel k;
    matvec_variant var = { MATVEC_STORE };
    if (matmul_build(ctx, type, &cfg, &var, &k) != GLESLLM_OK)
        die("build");
    matmul_args a = { n_tok, 8, 0, rows };
    gpu_buffer bt = { 0 }; /* f16 tiles: the tokens' tiles, made by each product as in a prefill */
    uint64_t xt_bytes = matmul_xt_bytes(&cfg, n_tok, cols);
    if (xt_bytes && gpu_buffer_create(ctx, (size_t)xt_bytes, NULL, 0, "x tiles", &bt) != GLESLLM_OK)
        die("buffers");
    a.xt = &bt;
    int reps = 1;
    double us = 0;
    for (int round = 0; round < 8; round++) {
        double t0 = now_seconds();
        for (int r = 0; r < reps; r++)
            if (matmul_record(queue, &k, &w, &bx, &by, &a) != GLESLLM_OK)
                die("record");
        if (gpu_queue_submit(queue) != GLESLLM_OK || gpu_queue_wait(queue, 60000) != GLESLLM_OK)
            die("run");
        double ms = (now_seconds() - t0) * 1e3;
        us = ms * 1e3 / reps;
        if (round > 0 && ms >= target_ms) /* round 0: compile, first touch */
            break;
        int more = (int)(target_ms / (us / 1e3)) + 1;
        reps = more < 1 ? 1 : more > 4096 ? 4096 : more;
    }
    matmul_destroy(&k);
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&by);
    gpu_buffer_destroy(&bt);
    gpu_weight_destroy(&w);
    *cfg_out = cfg;
    return us;
}

int main(int argc, char **argv)
{
    uint32_t formats[16] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    int n_formats = 4, n_shapes = 1;
    uint64_t shapes[8][2] = { { 14336, 4096 } };
    uint32_t n_tok = 512;
    double target_ms = 200;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-f") && v) {
            n_formats = bench_parse_formats(v, formats, 16);
            i++;
        } else if (!strcmp(a, "-s") && v) {
            n_shapes = bench_parse_shapes(v, shapes, 8, 1u << 20);
            i++;
        } else if (!strcmp(a, "-t") && v) {
            char *end;
            long t = strtol(v, &end, 10);
            if (*end || t < 1 || t > 4096) {
                fprintf(stderr, "bench_matmul: -t takes 1..4096 tokens\n");
                return 2;
            }
            n_tok = (uint32_t)t;
            i++;
        } else if (!strcmp(a, "--ms") && v) {
            target_ms = atof(v);
            if (!(target_ms > 0 && target_ms <= 60000)) {
                fprintf(stderr, "bench_matmul: --ms takes 1..60000\n");
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "usage: bench_matmul [-f FORMATS] [-s RxC,...] [-t TOKENS] [--ms N]\n");
            return 2;
        }
    }
    if (tuning_from_env(&tune) != GLESLLM_OK) /* GLESLLM_MATMUL */
        die("environment");
    gpu_options opt;
    if (gpu_options_from_env(&opt) != GLESLLM_OK || gpu_context_create(&opt, &ctx) != GLESLLM_OK ||
        gpu_queue_create(ctx, &queue) != GLESLLM_OK)
        die("GPU");
    const char *renderer = gpu_context_string(ctx, 0x1F01 /* GL_RENDERER */);
    printf("GPU: %s; card: %s\n\n", renderer, card_rates(renderer));
    printf("| shape | format | tokens | tiles wg,tm,tn | us | TFLOP/s |\n|---|---|---|---|---|---|\n");
    for (int s = 0; s < n_shapes; s++)
        for (int f = 0; f < n_formats; f++) {
            matmul_config cfg;
            double us = time_matmul(formats[f], shapes[s][0], shapes[s][1], n_tok, target_ms, &cfg);
            printf("| %llux%llu | %s | %u | %u,%u,%u %s%s | %.1f | %.2f |\n",
                   (unsigned long long)shapes[s][0], (unsigned long long)shapes[s][1],
                   ggml_type_name(formats[f]), n_tok, cfg.wg, cfg.tm, cfg.tn,
                   cfg.f16    ? (cfg.row_sums ? "f16 dup rows" : cfg.dup ? "f16 dup" : "f16")
                   : cfg.half ? "mediump"
                              : "f32",
                   matmul_split(&cfg) > 1 ? " split 2" : "", us,
                   2.0 * shapes[s][0] * shapes[s][1] * n_tok / (us * 1e-6) / 1e12);
            fflush(stdout);
        }
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return 0;
}
