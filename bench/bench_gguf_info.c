/* bench_gguf_info: `glesllm info` on a multi-GB model takes milliseconds,
 * because only the header is read (the tensor data stays unmapped pages).
 *
 * Writes a Mistral-7B-shaped Q4_0 file with the project's writer (32 layers,
 * 4096 hidden, 14336 ff, 8 KV heads, a 32000-token vocabulary with scores and
 * types, Q6_K output: the layout llama.cpp's Q4_0 files have), filled with
 * pseudo-random bytes, then times
 *   - gguf_open + model_info_read + gguf_close in this process, and
 *   - the `glesllm info FILE` command end to end,
 * and reports the command's peak resident memory next to the file size.
 *
 * usage: bench_gguf_info [FILE] [--reuse]   (default /tmp/glesllm-bench-mistral7b-q4_0.gguf;
 *        a FILE that exists is timed with --reuse, never written over) */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "gguf/gguf.h"
#include "model/model_info.h"

extern char **environ;

static double now_ms(void) { return now_seconds() * 1e3; }

static glesllm_status fill(void *ctx, void *buf, uint64_t offset, size_t n)
{
    uint64_t x = offset * 0x9e3779b97f4a7c15ull + (uintptr_t)ctx + 1;
    uint64_t *p = buf;
    for (size_t i = 0; i < n / 8; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = x;
    }
    memset((uint8_t *)buf + n / 8 * 8, 0x5a, n % 8);
    return GLESLLM_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int write_model(const char *path)
{
    gguf_writer *w;
    if (gguf_writer_create(&w) != GLESLLM_OK)
        return 1;
    const uint32_t n_embd = 4096, n_ff = 14336, n_layer = 32, n_vocab = 32000, n_kv = 1024;
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "general.name", "bench mistral-7b shape q4_0");
    gguf_writer_set_u32(w, "llama.context_length", 32768);
    gguf_writer_set_u32(w, "llama.embedding_length", n_embd);
    gguf_writer_set_u32(w, "llama.block_count", n_layer);
    gguf_writer_set_u32(w, "llama.feed_forward_length", n_ff);
    gguf_writer_set_u32(w, "llama.attention.head_count", 32);
    gguf_writer_set_u32(w, "llama.attention.head_count_kv", 8);
    gguf_writer_set_f32(w, "llama.rope.freq_base", 1000000.0f);
    gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    char **toks = malloc(n_vocab * sizeof *toks);
    float *scores = malloc(n_vocab * sizeof *scores);
    int32_t *types = malloc(n_vocab * sizeof *types);
    for (uint32_t i = 0; i < n_vocab; i++) {
        toks[i] = malloc(16);
        snprintf(toks[i], 16, "\xe2\x96\x81tok%05u", i);
        scores[i] = -(float)i;
        types[i] = 1;
    }
    gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)toks, n_vocab);
    gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n_vocab);
    gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n_vocab);
    uint64_t emb[2] = { n_embd, n_vocab }, norm[1] = { n_embd };
    gguf_writer_add_tensor_fill(w, "token_embd.weight", GGML_TYPE_Q4_0, 2, emb, fill, (void *)1);
    for (uint32_t l = 0; l < n_layer; l++) {
        struct { const char *name; uint64_t ne0, ne1; uint32_t type; } t[] = {
            { "attn_norm", n_embd, 1, GGML_TYPE_F32 },   { "attn_q", n_embd, n_embd, GGML_TYPE_Q4_0 },
            { "attn_k", n_embd, n_kv, GGML_TYPE_Q4_0 },  { "attn_v", n_embd, n_kv, GGML_TYPE_Q4_0 },
            { "attn_output", n_embd, n_embd, GGML_TYPE_Q4_0 }, { "ffn_norm", n_embd, 1, GGML_TYPE_F32 },
            { "ffn_gate", n_embd, n_ff, GGML_TYPE_Q4_0 }, { "ffn_up", n_embd, n_ff, GGML_TYPE_Q4_0 },
            { "ffn_down", n_ff, n_embd, GGML_TYPE_Q4_0 },
        };
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s.weight", l, t[k].name);
            uint64_t ne[2] = { t[k].ne0, t[k].ne1 };
            gguf_writer_add_tensor_fill(w, name, t[k].type, t[k].ne1 == 1 ? 1 : 2, ne, fill,
                                        (void *)(uintptr_t)(l * 16 + k));
        }
    }
    gguf_writer_add_tensor_fill(w, "output_norm.weight", GGML_TYPE_F32, 1, norm, fill, (void *)2);
    gguf_writer_add_tensor_fill(w, "output.weight", GGML_TYPE_Q6_K, 2, emb, fill, (void *)3);
    glesllm_status st = gguf_writer_write(w, path);
    gguf_writer_destroy(w);
    for (uint32_t i = 0; i < n_vocab; i++)
        free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    if (st != GLESLLM_OK)
        fprintf(stderr, "bench_gguf_info: %s\n", glesllm_last_error());
    return st != GLESLLM_OK;
}

int main(int argc, char **argv)
{
    const char *def = "/tmp/glesllm-bench-mistral7b-q4_0.gguf", *path = def;
    int reuse = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reuse") == 0)
            reuse = 1;
        else
            path = argv[i];
    }
    struct stat sb;
    /* FILE is written over only where it is the default: a model passed by
     * mistake is timed as it is, never replaced */
    if (!reuse && path != def && stat(path, &sb) == 0) {
        fprintf(stderr, "bench_gguf_info: %s exists; it is not written over (pass --reuse to "
                "time it as it is, or a path that does not exist)\n", path);
        return 2;
    }
    if (!reuse || stat(path, &sb) != 0) {
        fprintf(stderr, "writing %s ...\n", path);
        double t0 = now_ms();
        if (write_model(path))
            return 1;
        fprintf(stderr, "written in %.1f s\n", (now_ms() - t0) / 1e3);
    }
    stat(path, &sb);

    enum { RUNS = 30 };
    double in_proc[RUNS], cli[RUNS];
    model_info mi;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ms();
        gguf_file *f;
        if (gguf_open(path, &f) != GLESLLM_OK) {
            fprintf(stderr, "bench_gguf_info: %s\n", glesllm_last_error());
            return 1;
        }
        model_info_read(f, &mi);
        gguf_close(f);
        in_proc[r] = now_ms() - t0;
    }
    char *args[] = { (char *)GLESLLM_CLI_PATH, (char *)"info", (char *)path, (char *)"--json", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1 /* O_WRONLY */, 0);
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ms();
        pid_t pid;
        int status = 0;
        if (posix_spawn(&pid, GLESLLM_CLI_PATH, &fa, NULL, args, environ) != 0 ||
            waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_gguf_info: %s info failed\n", GLESLLM_CLI_PATH);
            return 1;
        }
        cli[r] = now_ms() - t0;
    }
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    qsort(in_proc, RUNS, sizeof in_proc[0], cmp_double);
    qsort(cli, RUNS, sizeof cli[0], cmp_double);
    printf("file: %s, %.2f GiB, %llu parameters, %u layers\n", path,
           (double)sb.st_size / (1 << 30), (unsigned long long)mi.n_params, mi.n_layers);
    printf("gguf_open + model_info_read + gguf_close: median %.2f ms, min %.2f ms (%d runs)\n",
           in_proc[RUNS / 2], in_proc[0], RUNS);
    printf("glesllm info --json (whole process):      median %.2f ms, min %.2f ms (%d runs)\n",
           cli[RUNS / 2], cli[0], RUNS);
    printf("peak resident memory of the command: %.1f MiB, against a %.0f MiB file\n",
           ru.ru_maxrss / 1024.0, (double)sb.st_size / (1 << 20));
    return 0;
}
