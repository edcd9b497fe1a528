#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm [--help] [--version] COMMAND [options]\n"
            "\n"
            "LLM inference through OpenGL ES 3.1 compute shaders on a headless EGL context.\n"
            "\n"
            "commands:\n"
            "  run [-m MODEL.gguf] generate text (no -m: a built-in demo model); see 'run --help'\n"
            "  info --gpu          show the EGL platform, GPU, limits and extensions the engine uses\n"
            "  info MODEL.gguf     show a model's architecture, shape, tensor types and GPU memory\n"
            "  quantize IN OUT T   write IN's weights quantized to T (Q4_0 Q8_0 Q4_K Q6_K Q4_K_M)\n"
            "  tokenize -m MODEL   text to token ids with the model's vocabulary; see 'tokenize --help'\n"
            "  bench [-m MODEL]    prompt and generation tokens/s, like llama-bench; see 'bench --help'\n"
            "  perplexity -m MODEL -f TEXT   perplexity of a text, as llama.cpp computes it\n"
            "\n"
            "environment:\n"
            "  GLESLLM_PLATFORM=gbm|device|surfaceless   force the EGL platform (default: first that works)\n"
            "  GLESLLM_DEVICE=/dev/dri/renderD128        use this DRM render node\n"
            "  GLESLLM_LIMITS=min                        clamp GPU limits to the OpenGL ES 3.1 minimums\n"
            "  GLESLLM_KV=device|mapped                  where the KV cache lives (default: by GPU)\n"
            "  GLESLLM_NO_CACHE=1                        do not read or write the program cache\n"
            "  XDG_CACHE_HOME                            program cache under $XDG_CACHE_HOME/glesllm\n"
            "                                            (default ~/.cache/glesllm)\n"
            "\n"
            "'glesllm COMMAND --help' describes a command.\n");
}

volatile sig_atomic_t cli_interrupted;
static struct sigaction old_int, old_term;

static void on_signal(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    cli_interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

void cli_release_signals(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}

void cli_progress_bar(int pct, char bar[31])
{
    for (int i = 0; i < 30; i++)
        bar[i] = i < pct * 30 / 100 ? '#' : '.';
    bar[30] = 0;
}

int cli_fail(const char *what, glesllm_status st)
{
    const char *msg = glesllm_last_error();
    fprintf(stderr, "glesllm: %s: %s\n", what, msg[0] ? msg : glesllm_strerror(st));
    return 1;
}

int cli_read_text(const char *path, char **text, size_t *len)
{
    FILE *f = path ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "glesllm: cannot open '%s': %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool failed = !buf || ferror(f);
    int err = errno;
    if (path)
        fclose(f);
    if (failed) {
        fprintf(stderr, "glesllm: reading %s: %s\n", path ? path : "standard input",
                buf ? strerror(err) : "out of memory");
        free(buf);
        return 1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("glesllm %s\n", glesllm_version());
        return 0;
    }
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "quantize") == 0)
        return cmd_quantize(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0)
        return cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "perplexity") == 0)
        return cmd_perplexity(argc - 1, argv + 1);
    fprintf(stderr, "glesllm: unknown command '%s'; see 'glesllm --help'\n", cmd);
    return 2;
}
