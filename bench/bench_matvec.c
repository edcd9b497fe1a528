/* bench_matvec: GB/s of the matvec kernel (glsl/matvec.comp) for every GPU
 * weight format on the Mistral-7B shapes, next to a plain copy kernel
 * measured in the same run.
 *
 * Each measurement cycles through enough copies of the tensor (and separate
 * output buffers, so no barriers) that the working set is well beyond the
 * GPU's last-level cache, records them in one submission, waits for its
 * fence, and divides wall time by the count. GB/s = bytes of the tensor in
 * its GPU layout / time per matvec. The copy kernel's GB/s counts the bytes
 * it reads plus the bytes it writes (as STREAM does).
 *
 * usage: bench_matvec [-f Q4_0,Q8_0,...] [-s 14336x4096,...] [--ms N]
 *                     [--wg N --tpr N --nr N --subgroup 0|1] [--chain]
 *                     [--glu] [--norm] [--sweep]
 * --chain: every matvec of a round writes the same output, so each waits for
 *          the one before (a barrier between them), as in a decode step where
 *          each matvec reads what the one before wrote; without it they run
 *          back to back and overlap. Timed by GPU timestamps at the start and
 *          end of each submission where the driver has them (the CPU's
 *          recording, which can outlast a short kernel, left out).
 * --ws MiB: the bytes of tensor copies cycled through (default 512; a model's
 *          weights are several GB).
 * --one-buffer: the copies side by side in one buffer (as many as its
 *          storage-block limit holds) instead of a buffer each.
 * --sweep: for each format and shape, every work split.
 * --glu, --norm: the decode step's fused variants: rows as interleaved gate
 *          and up with silu(gate) * up written (an FFN's gate/up), x
 *          RMS-normalised: with one token as a step splits the norm (the
 *          kernel reads x as already times the weight, and 1024 partial sums
 *          of squares, as many as a Mistral-7B O projection leaves; x's first
 *          values stand in for them), with several inside the kernel (x
 *          doubles as the norm weight). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "gguf/gguf.h"
#include "ops/matvec.h"
#include "random_weights.h"

#define BENCH_NAME "bench_matvec"
#include "bench_util.h"

static const uint32_t all_formats[] = { GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16,
                                        GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                        GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q2_K,
                                        GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                                        GGML_TYPE_Q6_K };
static const uint64_t all_shapes[][2] = { { 4096, 4096 }, { 1024, 4096 }, { 14336, 4096 },
                                          { 4096, 14336 }, { 32000, 4096 } };

#define MAX_COPIES 512

static gpu_context *ctx;
/* the engine's tuning, from the environment (tuning_from_env) */
static tuning tune = TUNING_DEFAULT_INIT;
static gpu_queue *queue;
static double target_ms = 200;
static uint32_t n_tokens = 1; /* --tokens: the multi-token matvec of that many */
static bool chain;            /* --chain */
static bool one_buffer;       /* --one-buffer: the copies in one buffer, not one each */
static bool glu_epilogue;     /* --glu */
static bool norm_x;           /* --norm */
static uint64_t working_set = (uint64_t)512 << 20; /* --ws MiB: bytes of copies cycled through */
static double gpu_ms_round;   /* GPU time a round (timestamps), 0 where unmeasured */

static double now_ms(void) { return now_seconds() * 1e3; }

/* Runs `record` rounds until target_ms has passed; returns ms per round. */
typedef int (*record_fn)(void *arg);
static double time_rounds(record_fn record, void *arg)
{
    /* warm-up: compile, first touch */
    if (record(arg) || gpu_queue_submit(queue) || gpu_queue_wait(queue, 0))
        die("warm-up");
    int rounds = 1;
    for (;;) {
        double t0 = now_ms();
        for (int i = 0; i < rounds; i++)
            if (record(arg))
                die("record");
        gpu_queue_profile_reset(queue);
        if (gpu_queue_submit(queue) || gpu_queue_wait(queue, 60000))
            die("submit");
        double dt = now_ms() - t0;
        if (dt >= target_ms || rounds >= (1 << 20)) {
            gpu_profile_entry e[16];
            size_t n = gpu_queue_profile_get(queue, e, 16);
            double ns = 0;
            for (size_t i = 0; i < n && i < 16; i++)
                ns += (double)e[i].total_ns;
            gpu_ms_round = ns / 1e6 / rounds;
            return dt / rounds;
        }
        rounds = dt > 1 ? (int)(rounds * (target_ms * 1.2 / dt)) + 1 : rounds * 8;
    }
}

typedef struct copy_arg {
    gpu_program *prog;
    gpu_buffer *src, *dst;
    uint32_t groups;
} copy_arg;

static int record_copy(void *p)
{
    copy_arg *a = p;
    gpu_dispatch d;
    memset(&d, 0, sizeof d);
    d.prog = a->prog;
    d.bindings[0] = (gpu_binding){ 0, a->src, 0, 0, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, a->dst, 0, 0, GPU_WRITE };
    d.n_bindings = 2;
    d.params[0] = (uint32_t)(a->src->size / 16);
    d.n_params = 1;
    d.groups[0] = a->groups;
    d.groups[1] = d.groups[2] = 1;
    return gpu_queue_dispatch(queue, &d) != GLESLLM_OK;
}

static double copy_gbs(void)
{
    gpu_program prog;
    if (gpu_program_build(ctx, "copy.comp", "WG_SIZE 256", &prog))
        die("copy kernel");
    size_t size = (size_t)256 << 20;
    const gpu_limits *L = gpu_context_limits(ctx);
    if (size > L->max_storage_block_bytes)
        size = (size_t)L->max_storage_block_bytes;
    gpu_buffer a, b;
    void *init = calloc(1, size);
    if (!init || gpu_buffer_create(ctx, size, init, 0, "copy src", &a) ||
        gpu_buffer_create(ctx, size, NULL, 0, "copy dst", &b))
        die("copy buffers");
    free(init);
    copy_arg arg = { &prog, &a, &b, 4096 };
    double ms = time_rounds(record_copy, &arg);
    gpu_buffer_destroy(&a);
    gpu_buffer_destroy(&b);
    gpu_program_destroy(&prog);
    return 2.0 * size / (ms * 1e6);
}

typedef struct mv_arg {
    matvec_kernel *k;
    gpu_weight *w;
    int copies;
    gpu_buffer *x, *y;
} mv_arg;

static int record_mv(void *p)
{
    mv_arg *a = p;
    matvec_args va = { 0 };
    va.n_tok = n_tokens;
    va.eps = 1e-5f; /* --norm: the norm weight is x itself (norm_off 0) */
    va.sq_count = a->w[0].cols < 1024 ? (uint32_t)a->w[0].cols : 1024; /* one token: at 0 */
    va.y_stride = a->w[0].rows;
    va.xp_off = act_stride(a->w[0].cols) * n_tokens; /* (tensor_make's room after x) */
    for (int i = 0; i < a->copies; i++)
        if (matvec_record_args(queue, a->k, &a->w[i], a->x, 0, &a->y[chain ? 0 : i], 0, &va))
            return 1;
    return 0;
}

typedef struct bench_tensor {
    uint32_t type;
    uint64_t rows, cols;
    int copies;
    gpu_weight w[MAX_COPIES];
    gpu_buffer x, y[MAX_COPIES];
    gpu_buffer big; /* --one-buffer: copies 1.. side by side in it */
} bench_tensor;

/* one tensor uploaded `copies` times (repacked once) */
static void tensor_make(bench_tensor *t, uint32_t type, uint64_t rows, uint64_t cols)
{
    memset(t, 0, sizeof *t);
    t->type = type;
    t->rows = rows;
    t->cols = cols;
    uint64_t seed = rows * 31 + cols + type;
    size_t bytes;
    void *data = random_weights(&seed, type, rows, cols, &bytes);
    if (!data)
        die("random weights");
    if (gpu_weight_upload(ctx, "bench", type, rows, cols, data, 0, &t->w[0]))
        die("upload");
    t->copies = (int)((working_set + t->w[0].bytes - 1) / t->w[0].bytes);
    if (t->copies > MAX_COPIES)
        t->copies = MAX_COPIES;
    if (t->copies < 2)
        t->copies = 2;
    /* further copies: the same repacked bytes in new buffers */
    uint64_t row_bytes = bytes / rows;
    for (int c = 1; c < t->copies; c++) {
        t->w[c] = t->w[0];
        if (!(t->w[c].parts = calloc(t->w[0].n_parts, sizeof *t->w[0].parts)))
            die("copies");
    }
    if (one_buffer) {
        const gpu_weight_part *src = &t->w[0].parts[0];
        uint64_t stride = (src->plan.bytes + 255) / 256 * 256;
        uint64_t limit = gpu_context_limits(ctx)->max_storage_block_bytes;
        if (limit > ((uint64_t)1 << 32) - 1)
            limit = ((uint64_t)1 << 32) - 1; /* plane offsets are 32-bit parameters */
        while (t->copies > 2 && (uint64_t)(t->copies - 1) * stride > limit)
            t->copies--;
        uint8_t *host = malloc((size_t)((t->copies - 1) * stride));
        if (t->w[0].n_parts != 1 || !host ||
            quant_gpu_repack(&src->plan, (const uint8_t *)data, host))
            die("--one-buffer (one part, host memory)");
        for (int c = 2; c < t->copies; c++)
            memcpy(host + (c - 1) * stride, host, (size_t)src->plan.bytes);
        if (gpu_buffer_create(ctx, (size_t)((t->copies - 1) * stride), host, 0, "bench copies",
                              &t->big))
            die("copies upload");
        free(host);
        for (int c = 1; c < t->copies; c++) {
            t->w[c].parts[0] = *src;
            t->w[c].parts[0].buf = t->big;
            for (int k = 0; k < QGPU_MAX_PLANES; k++)
                t->w[c].parts[0].plan.plane_offset[k] += (uint64_t)(c - 1) * stride;
        }
    }
    for (uint32_t i = 0; i < t->w[0].n_parts && !one_buffer; i++) {
        const gpu_weight_part *src = &t->w[0].parts[i];
        void *host = malloc((size_t)src->plan.bytes);
        if (!host || quant_gpu_repack(&src->plan, (const uint8_t *)data + src->row0 * row_bytes, host))
            die("repack");
        for (int c = 1; c < t->copies; c++) {
            t->w[c].parts[i] = *src;
            if (gpu_buffer_create(ctx, (size_t)src->plan.bytes, host, 0, "bench copy",
                                  &t->w[c].parts[i].buf))
                die("copy upload");
        }
        free(host);
    }
    free(data);
    size_t xn = (size_t)act_stride(cols) * n_tokens;
    /* and room for the units of x of the kernels with xg */
    size_t xp = (size_t)matvec_xg_room(cols, n_tokens);
    float *x = calloc(xn + xp, 4);
    for (size_t i = 0; i < xn; i++)
        x[i] = rw_float(&seed, -1, 1);
    if (gpu_buffer_create(ctx, (xn + xp) * 4, x, 0, "x", &t->x))
        die("x");
    free(x);
    for (int c = 0; c < t->copies; c++)
        if (gpu_buffer_create(ctx, (size_t)rows * 4 * n_tokens, NULL, 0, "y", &t->y[c]))
            die("y");
}

static void tensor_free(bench_tensor *t)
{
    for (int c = 0; c < t->copies; c++) {
        if (c && one_buffer)
            memset(&t->w[c].parts[0].buf, 0, sizeof(gpu_buffer)); /* t->big's */
        gpu_weight_destroy(&t->w[c]);
        gpu_buffer_destroy(&t->y[c]);
    }
    gpu_buffer_destroy(&t->big);
    gpu_buffer_destroy(&t->x);
}

static double measure(bench_tensor *t, const matvec_config *cfg, double *us)
{
    matvec_kernel k;
    matvec_variant var = { glu_epilogue ? MATVEC_GLU : MATVEC_STORE };
    var.norm = norm_x && n_tokens > 1;
    var.norm_scale = norm_x && n_tokens <= 1;
    var.nt = n_tokens;
    if (matvec_build(ctx, &tune, t->type, cfg, &var, &k))
        die("matvec kernel");
    mv_arg a = { &k, t->w, t->copies, &t->x, t->y };
    double ms = time_rounds(record_mv, &a) / t->copies;
    if (chain && gpu_ms_round > 0) /* the GPU's time: the CPU's recording left out */
        ms = gpu_ms_round / t->copies;
    matvec_destroy(&k);
    *us = ms * 1e3;
    return (double)t->w[0].bytes / (ms * 1e6);
}

static void open_gpu(double *copy, const char **renderer)
{
    gpu_options opt;
    if (tuning_from_env(&tune)) /* GLESLLM_MATVEC, GLESLLM_MULTI, ... */
        die("environment");
    if (gpu_options_from_env(&opt) || gpu_context_create(&opt, &ctx) || gpu_queue_create(ctx, &queue))
        die("GPU");
    if (chain && !gpu_queue_profile_enable(queue, GPU_PROFILE_SUBMITS))
        fprintf(stderr, "bench_matvec: no GPU timestamps (%s): wall time\n", glesllm_last_error());
    *renderer = gpu_context_string(ctx, 0x1F01 /* GL_RENDERER */);
    *copy = copy_gbs();
}

static const char *card_limit(const char *renderer);

static void print_header(double copy, const char *renderer)
{
    printf("device: %s (%s)\n", renderer, gpu_context_string(ctx, 0x1F02 /* GL_VERSION */));
    printf("card memory limit: %s\n", card_limit(renderer));
    printf("copy kernel (read + write): %.0f GB/s\n\n", copy);
    if (chain)
        printf("each matvec after the one before (--chain): the time of one running alone\n\n");
    if (glu_epilogue || norm_x)
        printf("fused:%s%s\n\n", glu_epilogue ? " silu(gate) * up (--glu)" : "",
               norm_x ? " RMSNorm of x (--norm)" : "");
}

static void close_gpu(void)
{
    gpu_queue_destroy(queue);
    gpu_context_destroy(ctx);
    queue = NULL;
    ctx = NULL;
}

static const char *card_limit(const char *renderer)
{
    static const struct { const char *name, *limit; } cards[] = {
        { "H200", "4800 GB/s (HBM3e)" }, { "H100 PCIe", "2000 GB/s (HBM2e)" },
        { "H100", "3350 GB/s (HBM3, SXM)" }, { "A100", "1555-2039 GB/s" },
    };
    for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++)
        if (strstr(renderer, cards[i].name))
            return cards[i].limit;
    return "unknown";
}

int main(int argc, char **argv)
{
    uint32_t formats[16];
    int n_formats = 0;
    uint64_t shapes[8][2];
    int n_shapes = 0, sweep = 0;
    matvec_config force = { 0, 0, 0, false, false };
    int force_sub = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-f") && v) {
            n_formats = bench_parse_formats(v, formats, 16);
            i++;
        } else if (!strcmp(a, "-s") && v) {
            n_shapes = bench_parse_shapes(v, shapes, 8, 0);
            i++;
        } else if (!strcmp(a, "--ms") && v) {
            target_ms = atof(v);
            i++;
        } else if (!strcmp(a, "--wg") && v) {
            force.wg = (uint32_t)atoi(v);
            i++;
        } else if (!strcmp(a, "--tpr") && v) {
            force.tpr = (uint32_t)atoi(v);
            i++;
        } else if (!strcmp(a, "--nr") && v) {
            force.nr = (uint32_t)atoi(v);
            i++;
        } else if (!strcmp(a, "--ws") && v) {
            working_set = (uint64_t)atoi(v) << 20;
            i++;
        } else if (!strcmp(a, "--one-buffer")) {
            one_buffer = true;
        } else if (!strcmp(a, "--chain")) {
            chain = true;
        } else if (!strcmp(a, "--glu")) {
            glu_epilogue = true;
        } else if (!strcmp(a, "--norm")) {
            norm_x = true;
        } else if (!strcmp(a, "--subgroup") && v) {
            force_sub = atoi(v);
            i++;
        } else if (!strcmp(a, "--tokens") && v) {
            n_tokens = (uint32_t)atoi(v);
            if (n_tokens < 1 || n_tokens > MATVEC_MAX_NT) {
                fprintf(stderr, "bench_matvec: --tokens takes 1..%d\n", MATVEC_MAX_NT);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--sweep")) {
            sweep = 1;
        } else {
            fprintf(stderr, "usage: bench_matvec [-f FORMATS] [-s RxC,...] [--ms N] [--wg N] "
                            "[--tpr N] [--nr N] [--subgroup 0|1] [--tokens N] "
                            "[--chain] [--glu] [--norm] [--ws MiB] [--one-buffer] [--sweep]\n");
            return 2;
        }
    }
    if (!n_formats) {
        n_formats = (int)(sizeof all_formats / sizeof all_formats[0]);
        memcpy(formats, all_formats, sizeof all_formats);
    }
    if (!n_shapes) {
        n_shapes = (int)(sizeof all_shapes / sizeof all_shapes[0]);
        memcpy(shapes, all_shapes, sizeof all_shapes);
    }
    /* One process per measurement: on NVIDIA's driver, matvecs over buffers
     * created after several GB were allocated and freed in the same process
     * ran up to 3x slower (bench/RESULTS.md); a fresh context each time keeps
     * the figures independent of their order. */
    double copy = 0;
    const char *renderer = "";
    if (sweep) {
        open_gpu(&copy, &renderer);
        print_header(copy, renderer);
        printf("| shape | format | wg | tpr | nr | subgroup | xb | us | GB/s | %% of copy "
               "|\n|---|---|---|---|---|---|---|---|---|---|\n");
        const gpu_caps *C = gpu_context_caps(ctx);
        uint32_t maxwg = gpu_context_limits(ctx)->max_invocations;
        for (int sh = 0; sh < n_shapes; sh++)
            for (int f = 0; f < n_formats; f++) {
                bench_tensor *t = malloc(sizeof *t);
                tensor_make(t, formats[f], shapes[sh][0], shapes[sh][1]);
                /* several tokens: also 4 and 8 lanes a row, and xb 1, 8 and 32
                 * (the invocations of a warp on one unit of x) where they tile
                 * the work group and x is staged */
                uint32_t tpr0 = n_tokens > 1 ? 4 : 16;
                /* one token: x staged once a work group where the default
                 * does it (the kernel drops it past 128 lanes a row) */
                bool x_once = n_tokens <= 1 &&
                              matvec_default_config(ctx, &tune, t->type, t->rows, t->cols).x_once;
                for (uint32_t wg = 128; wg <= 512 && wg <= maxwg; wg *= 2)
                    for (uint32_t tpr = tpr0; tpr <= wg && tpr <= 256; tpr *= 2)
                        for (uint32_t nr = 1; nr <= 8; nr *= 2)
                            for (uint32_t xb = 1; xb <= 32; xb = xb == 1 ? 8 : xb * 4) {
                                int sub = C->subgroup && tpr % C->subgroup_size == 0;
                                matvec_config cfg = { wg, tpr, nr, sub != 0, false };
                                cfg.xb = xb;
                                cfg.x_once = x_once;
                                if ((force.wg && wg != force.wg) ||
                                    (force.tpr && tpr != force.tpr) ||
                                    (force.nr && nr != force.nr))
                                    continue;
                                if (glu_epilogue && nr % 2)
                                    continue; /* gate and up rows go in pairs */
                                /* several tokens: x staged in shared memory where it fits */
                                cfg.xsh = n_tokens > 1 &&
                                          matvec_shared_bytes(&cfg, n_tokens, true) <=
                                              gpu_context_limits(ctx)->max_shared_bytes;
                                if (matvec_shared_bytes(&cfg, n_tokens, cfg.xsh) >
                                    gpu_context_limits(ctx)->max_shared_bytes)
                                    continue;
                                matvec_config fit = cfg;
                                matvec_fit_xb(&fit);
                                if (xb > 1 && (!cfg.xsh || fit.xb != xb))
                                    continue; /* xb needs staged x and must tile wg */
                                double us, gbs = measure(t, &cfg, &us);
                                printf("| %llux%llu | %s | %u | %u | %u | %d%s | %u | %.2f | %.0f | "
                                       "%.0f%% |\n",
                                       (unsigned long long)t->rows, (unsigned long long)t->cols,
                                       ggml_type_name(t->type), wg, tpr, nr, sub,
                                       cfg.xsh ? " xsh" : "", xb, us, gbs, 100 * gbs / copy);
                                fflush(stdout);
                            }
                /* the default again, last: drift within the process shows here */
                matvec_config cfg =
                    n_tokens > 1 ? matvec_multi_config(ctx, &tune, t->type, n_tokens, t->rows, t->cols)
                                 : matvec_default_config(ctx, &tune, t->type, t->rows, t->cols);
                double us, gbs = measure(t, &cfg, &us);
                printf("| %llux%llu | %s | %u | %u | %u | %d%s | %u | %.2f | %.0f | %.0f%% | "
                       "default, measured last\n",
                       (unsigned long long)t->rows, (unsigned long long)t->cols,
                       ggml_type_name(t->type), cfg.wg, cfg.tpr, cfg.nr, cfg.subgroup,
                       cfg.xsh ? " xsh" : "", cfg.xb > 1 ? cfg.xb : 1, us, gbs, 100 * gbs / copy);
                tensor_free(t);
                free(t);
            }
        close_gpu();
        return 0;
    }
    /* the parent never opens the GPU: a driver that was used does not
     * survive fork() */
    for (int s = 0; s < n_shapes; s++)
        for (int f = 0; f < n_formats; f++) {
            pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                return 1;
            }
            if (pid > 0) {
                int status;
                waitpid(pid, &status, 0);
                if (!WIFEXITED(status) || WEXITSTATUS(status))
                    return 1;
                continue;
            }
            open_gpu(&copy, &renderer);
            if (s == 0 && f == 0) {
                print_header(copy, renderer);
                printf("| shape (rows x cols) | format | MiB | wg/tpr/nr/sg | us | GB/s | copy GB/s | "
                       "%% of copy |\n|---|---|---|---|---|---|---|---|\n");
            }
            bench_tensor *t = malloc(sizeof *t);
            tensor_make(t, formats[f], shapes[s][0], shapes[s][1]);
            matvec_config cfg =
                n_tokens > 1 ? matvec_multi_config(ctx, &tune, t->type, n_tokens, t->rows, t->cols)
                             : matvec_default_config(ctx, &tune, t->type, t->rows, t->cols);
            if (force.wg)
                cfg.wg = force.wg;
            if (force.tpr)
                cfg.tpr = force.tpr;
            if (force.nr)
                cfg.nr = force.nr;
            if (force_sub >= 0)
                cfg.subgroup = force_sub != 0;
            matvec_fit_xb(&cfg); /* a forced split the default xb does not divide */
            if (cfg.xsh && matvec_shared_bytes(&cfg, n_tokens, true) >
                               gpu_context_limits(ctx)->max_shared_bytes)
                cfg.xsh = false; /* a forced split that leaves no room for it */
            double us, gbs = measure(t, &cfg, &us);
            uint64_t ev_n, ev_bytes;
            if (gpu_context_memory_evicted(ctx, &ev_n, &ev_bytes) && ev_n)
                fprintf(stderr, "bench_matvec: the driver evicted %llu times, %llu MiB\n",
                        (unsigned long long)ev_n, (unsigned long long)(ev_bytes >> 20));
            char xb[16] = "";
            if (n_tokens > 1 && cfg.xb > 1)
                snprintf(xb, sizeof xb, " xb%u", cfg.xb);
            printf("| %llux%llu | %s | %.1f | %u/%u/%u/%d%s%s | %.2f | %.0f | %.0f | %.0f%% |\n",
                   (unsigned long long)t->rows, (unsigned long long)t->cols,
                   ggml_type_name(t->type), (double)t->w[0].bytes / (1 << 20), cfg.wg, cfg.tpr,
                   cfg.nr, cfg.subgroup, cfg.xsh ? " xsh" : "", xb, us, gbs, copy,
                   100 * gbs / copy);
            fflush(stdout);
            tensor_free(t);
            free(t);
            close_gpu();
            _exit(0);
        }
    return 0;
}
