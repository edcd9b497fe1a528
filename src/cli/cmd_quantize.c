/* glesllm quantize IN.gguf OUT.gguf TYPE: see quant/quantize_model.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm quantize [--threads N] IN.gguf OUT.gguf TYPE\n"
            "\n"
            "Writes IN's weights quantized to TYPE into OUT (through a temporary file renamed\n"
            "at the end: an interrupted or failed run leaves nothing behind).\n"
            "\n"
            "TYPE:  Q4_0    4.5 bits per weight; the output matrix Q6_K\n"
            "       Q8_0    8.5 bits per weight\n"
            "       Q4_K    4.5 bits per weight (K quants); the output matrix Q6_K\n"
            "       Q6_K    6.6 bits per weight\n"
            "       Q4_K_M  llama.cpp's mix: Q4_K, with Q6_K for the output matrix and for\n"
            "               attn_v/ffn_down of the first and last eighth of the layers and\n"
            "               every third layer between\n"
            "Norms and other 1-D tensors stay as they are. Rows whose length is not a whole\n"
            "number of blocks fall back as llama.cpp does (Q4_K -> Q5_0, Q6_K -> Q8_0,\n"
            "else F16), with a note.\n"
            "\n"
            "options:\n"
            "  --threads N   CPU threads (default: all)\n");
}

static void on_tensor(void *ctx, uint64_t index, uint64_t count, const char *name,
                      const char *from, const char *to, uint64_t done, uint64_t total)
{
    (void)ctx;
    int pct = total ? (int)(100.0 * done / total) : 100;
    if (isatty(2)) {
        char bar[31];
        cli_progress_bar(pct, bar);
        fprintf(stderr, "\r\033[K[%s] %3d%% [%llu/%llu] %s %s -> %s", bar, pct,
                (unsigned long long)index + 1, (unsigned long long)count, name,
                from, to);
    } else {
        fprintf(stderr, "[%3d%%] [%llu/%llu] %s %s -> %s\n", pct, (unsigned long long)index + 1,
                (unsigned long long)count, name, from, to);
    }
}

static void on_note(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "%sglesllm: quantize: note: %s\n", isatty(2) ? "\r\033[K" : "", msg);
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3];
    int n_pos = 0;
    unsigned threads = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--threads") == 0 || strcmp(argv[i], "-t") == 0) {
            char *end;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || v < 1 || v > 1024) {
                fprintf(stderr, "glesllm: quantize: --threads needs a number from 1 to 1024\n");
                return 2;
            }
            threads = (unsigned)v;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "glesllm: quantize: unknown option '%s'; see 'glesllm quantize --help'\n",
                    argv[i]);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, "glesllm: quantize: too many arguments; see 'glesllm quantize --help'\n");
            return 2;
        }
    }
    if (n_pos != 3) {
        usage(stderr);
        return 2;
    }
    struct stat si;
    cli_catch_signals(NULL);
    glesllm_quantize_params qp = { pos[2], threads, on_tensor, on_note, NULL, &cli_interrupted };
    double t0 = cli_now();
    glesllm_status st = glesllm_quantize(pos[0], pos[1], &qp);
    double secs = cli_now() - t0;
    cli_release_signals();
    if (isatty(2))
        fprintf(stderr, "\r\033[K");
    if (cli_interrupted) {
        fprintf(stderr, "glesllm: quantize: interrupted; %s was not written\n", pos[1]);
        return 130;
    }
    if (st == GLESLLM_ERR_INVALID_ARGUMENT) { /* an unknown type, or the input as output */
        fprintf(stderr, "glesllm: quantize: %s\n", glesllm_last_error());
        return 2;
    }
    if (st != GLESLLM_OK)
        return cli_fail("quantize", st);
    struct stat out;
    if (stat(pos[1], &out) == 0 && stat(pos[0], &si) == 0)
        fprintf(stderr, "glesllm: quantize: %s (%.2f MiB) -> %s %s (%.2f MiB) in %.2f s\n", pos[0],
                si.st_size / 1048576.0, pos[2], pos[1],
                out.st_size / 1048576.0, secs);
    return 0;
}
