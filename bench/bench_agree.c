/* bench_agree: how far apart the matvec kernels that serve one token (a
 * decode step) and several (a verifying pass, sets of 9, 5 and 3 tokens) put
 * the same products: each runs on the same random weights and the same x of
 * 9 tokens, and the largest difference between two kernels' outputs over
 * their first 3 tokens is printed relative to the largest output. A verifying
 * pass's logits can match a step's only as closely as these do (on an H200,
 * bench/RESULTS.md session 49: Q4_0 and Q8_0 within 5e-7 in every variant,
 * the one-token and the several-token kernels summing in other orders; Q4_K
 * and Q6_K 2e-5 to 5e-5, their one-token kernels reading the levels
 * otherwise).
 *
 *   bench_agree [-f Q4_0,...] [-s 4096x4096,...] [--glu|--add] [--norm|--norm-scale]
 *               [--tails]
 *
 * --glu: rows as interleaved gate and up, silu(gate) * up written (an FFN's
 * gate/up). --norm: x RMS-normalised inside every kernel (the several-token
 * kernels' x_prep.comp, the one-token kernel's own loads); --norm-scale: the
 * one-token kernel as a decode step takes it instead, x already times the
 * norm weight and the sum of its squares given (here from the CPU, in
 * double: so the kernels' sums cannot agree to the bit with either norm
 * option, even where a model's pass and steps do; bench_logits --batch
 * checks those, bench/RESULTS.md session 52). --add:
 * y += W x (the residual add), the one-token kernel also writing the new y
 * times a norm weight and its squares' sums as a decode step's O and down
 * (rows at most the columns). --tails: x's magnitudes spread over six
 * decades (uniform in the exponent), as a model's activations are, instead
 * of uniform in [-1, 1].
 *
 * Not a timing: the figures go to stdout, one line a format and shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "ops/matvec.h"
#include "random_weights.h"

#define BENCH_NAME "bench_agree"
#include "bench_util.h"

#define N_TOK 9u
#define N_CMP 3u /* tokens every kernel below takes */

static gpu_context *ctx;
/* the engine's tuning, from the environment (tuning_from_env) */
static tuning tune = TUNING_DEFAULT_INIT;
static gpu_queue *queue;
static bool glu, norm, norm_scale, add, tails; /* --glu, --norm, --norm-scale, --add, --tails */

static const uint32_t sets[] = { 9, 5, 3 };
#define N_KERNELS 4 /* one token, then the sets */

/* kernel i (0: one token, else the set sets[i - 1]) over x's tokens into y */
static void run_kernel(int i, uint32_t type, const gpu_weight *w, const gpu_buffer *bx,
                       const gpu_buffer *by, uint64_t rows, uint64_t cols, uint64_t xp_off)
{
    uint32_t nt = i ? sets[i - 1] : 1;
    matvec_config cfg = i ? matvec_multi_config(ctx, &tune, type, nt, rows, cols)
                          : matvec_default_config(ctx, &tune, type, rows, cols);
    if (glu && cfg.nr % 2)
        cfg.nr = 2; /* (as the model's get_matvec) */
    matvec_variant var = { glu ? MATVEC_GLU : add ? MATVEC_ADD : MATVEC_STORE };
    var.nt = nt;
    var.norm_out = add && !i; /* (as a decode step's O and down) */
    var.norm = norm || (norm_scale && i);
    var.norm_scale = norm_scale && !i;
    matvec_kernel k;
    if (matvec_build(ctx, &tune, type, &cfg, &var, &k))
        die("building a kernel");
    uint64_t xs = act_stride(cols), out = glu ? rows / 2 : rows;
    for (uint32_t t = 0; t < (i ? 1u : N_CMP); t++) {
        /* agree's layout: the tokens' x, the norm weight, x times it, the
         * sums of squares (4 floats a token) */
        matvec_args a = { N_TOK * xs, 1e-5f };
        a.n_tok = i ? nt : 0;
        a.y_stride = out;
        a.xp_off = xp_off;
        a.sq_off = (N_TOK + 1 + N_CMP) * xs + 4 * t;
        a.sq_count = 1;
        if (var.norm_out) { /* y times the norm weight and the squares' sums after y's rows */
            a.xg_off = N_TOK * rows;
            a.sq_off = (N_TOK + 1) * rows;
        }
        uint64_t x_off = var.norm_scale ? (N_TOK + 1 + t) * xs : t * xs;
        if (matvec_record_args(queue, &k, w, bx, x_off, by, (glu ? 2 : 1) * t * out, &a))
            die("recording a kernel");
    }
    if (gpu_queue_submit(queue) || gpu_queue_wait(queue, 0))
        die("running a kernel");
    matvec_destroy(&k);
}

static void agree(uint32_t type, uint64_t rows, uint64_t cols)
{
    uint64_t seed = rows * 131 + cols * 7 + type;
    size_t bytes;
    void *data = random_weights(&seed, type, rows, cols, &bytes);
    gpu_weight w;
    if (!data || gpu_weight_upload(ctx, "w", type, rows, cols, data, 0, &w))
        die("the weights");
    free(data);
    uint64_t out = glu ? rows / 2 : rows;
    /* the tokens' x, the norm weight, x times it, the sums of squares
     * (run_kernel's layout), the units of x */
    uint64_t xs = act_stride(cols), xp_off = ((N_TOK + 1 + N_CMP) * xs + 4 * N_CMP + 3) / 4 * 4;
    size_t xn = (size_t)(xp_off + matvec_xg_room(cols, N_TOK));
    float *x = calloc(xn, 4), *y[N_KERNELS];
    if (!x)
        die("memory");
    for (size_t i = 0; i < (N_TOK + 1) * xs; i++) {
        x[i] = rw_float(&seed, -1.0f, 1.0f);
        if (tails && i < N_TOK * xs) /* magnitudes spread over 6 decades, as activations' */
            x[i] *= powf(10.0f, rw_float(&seed, -6.0f, 0.0f));
    }
    for (uint32_t t = 0; t < N_CMP; t++) {
        double ss = 0.0;
        for (uint64_t i = 0; i < cols; i++) {
            x[(N_TOK + 1 + t) * xs + i] = x[t * xs + i] * x[N_TOK * xs + i];
            ss += (double)x[t * xs + i] * x[t * xs + i];
        }
        x[(N_TOK + 1 + N_CMP) * xs + 4 * t] = (float)ss;
    }
    /* y: the tokens' rows, then (--add, the one-token kernel) y times the
     * norm weight and the sums of squares; starting from the same random
     * values for every kernel */
    size_t yn = (size_t)((N_TOK + 2) * rows + 4);
    float *y0 = malloc(yn * 4);
    if (!y0)
        die("memory");
    for (size_t i = 0; i < yn; i++)
        y0[i] = rw_float(&seed, -1.0f, 1.0f);
    gpu_buffer bx, by;
    if (gpu_buffer_create(ctx, xn * 4, x, 0, "x", &bx) ||
        gpu_buffer_create(ctx, yn * 4, NULL, GPU_BUFFER_DYNAMIC, "y", &by))
        die("the buffers");
    for (int i = 0; i < N_KERNELS; i++) {
        if (!(y[i] = malloc((size_t)(N_CMP * out * 4))))
            die("memory");
        if (gpu_buffer_write(&by, 0, y0, yn * 4))
            die("writing y");
        run_kernel(i, type, &w, &bx, &by, rows, cols, xp_off);
        if (gpu_buffer_read(ctx, &by, 0, y[i], (size_t)(N_CMP * out * 4)))
            die("reading y");
    }
    float mag = 0.0f;
    for (uint64_t j = 0; j < N_CMP * out; j++)
        mag = fmaxf(mag, fabsf(y[0][j]));
    printf("%-5s %6llux%-6llu", ggml_type_name(type), (unsigned long long)rows,
           (unsigned long long)cols);
    static const int pairs[][2] = { { 0, 1 }, { 0, 2 }, { 0, 3 }, { 1, 2 }, { 1, 3 } };
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        float d = 0.0f;
        for (uint64_t j = 0; j < N_CMP * out; j++)
            d = fmaxf(d, fabsf(y[pairs[p][0]][j] - y[pairs[p][1]][j]));
        printf("  %10.3e", d / fmaxf(mag, 1e-30f));
    }
    printf("\n");
    for (int i = 0; i < N_KERNELS; i++)
        free(y[i]);
    free(y0);
    free(x);
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&by);
    gpu_weight_destroy(&w);
}

int main(int argc, char **argv)
{
    uint32_t types[16] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    size_t n_types = 4, n_shapes = 2;
    uint64_t shapes[16][2] = { { 4096, 4096 }, { 4096, 14336 } };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") && i + 1 < argc) {
            n_types = (size_t)bench_parse_formats(argv[++i], types, 16);
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            n_shapes = (size_t)bench_parse_shapes(argv[++i], shapes, 16, 65536);
            for (size_t k = 0; k < n_shapes; k++)
                if (shapes[k][1] % 256)
                    return fprintf(stderr, "bench_agree: -s: columns a multiple of 256\n"), 2;
        } else if (!strcmp(argv[i], "--glu")) {
            glu = true;
        } else if (!strcmp(argv[i], "--norm")) {
            norm = true;
        } else if (!strcmp(argv[i], "--norm-scale")) {
            norm_scale = true;
        } else if (!strcmp(argv[i], "--add")) {
            add = true;
        } else if (!strcmp(argv[i], "--tails")) {
            tails = true;
        } else {
            fprintf(stderr, "usage: bench_agree [-f Q4_0,Q8_0,...] [-s 4096x4096,...] "
                            "[--glu|--add] [--norm|--norm-scale] [--tails]\n");
            return 2;
        }
    }
    if ((norm && norm_scale) || (glu && add) || (add && (norm || norm_scale))) {
        fprintf(stderr, "bench_agree: --norm or --norm-scale, --glu or --add, not both; --add "
                        "without a norm (as a step's O and down)\n");
        return 2;
    }
    for (size_t i = 0; add && i < n_shapes; i++)
        if (shapes[i][0] > shapes[i][1]) {
            fprintf(stderr, "bench_agree: --add takes rows at most the columns (the norm weight "
                            "the one-token kernel reads is a row of x)\n");
            return 2;
        }
    gpu_options opt;
    if (tuning_from_env(&tune) || gpu_options_from_env(&opt) || gpu_context_create(&opt, &ctx) ||
        gpu_queue_create(ctx, &queue))
        die("GPU");
    printf("largest difference between two kernels' outputs (3 tokens), over the largest output\n");
    printf("%-18s  %10s  %10s  %10s  %10s  %10s\n", "format shape", "1 / x9", "1 / x5", "1 / x3",
           "x9 / x5", "x9 / x3");
    for (size_t f = 0; f < n_types; f++)
        for (size_t s = 0; s < n_shapes; s++)
            agree(types[f], shapes[s][0], shapes[s][1]);
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    return 0;
}
