/* glesllm: the command line. main() picks the subcommand (cmd_*.c). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
            "  chat [-m MODEL]     talk to a model in the terminal, with its chat template\n"
            "  serve [-m MODEL]    an HTTP server with OpenAI's API; see 'serve --help'\n"
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

static int dispatch(int argc, char **argv)
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
    if (strcmp(cmd, "chat") == 0)
        return cmd_chat(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0) {
#ifdef GLESLLM_SERVER
        return cmd_serve(argc - 1, argv + 1);
#else
        fprintf(stderr, "glesllm: this build has no server: install libmicrohttpd-dev and "
                        "libcjson-dev (Debian, Ubuntu), run cmake again and rebuild\n");
        return 1;
#endif
    }
    fprintf(stderr, "glesllm: unknown command '%s'; see 'glesllm --help'\n", cmd);
    return 2;
}

int main(int argc, char **argv)
{
    int rc = dispatch(argc, argv);
    /* a write to standard output that failed (a full disk, a closed pipe) is
     * a failure, named, whatever the command made of it */
    int e = fflush(stdout) != 0 ? errno : 0;
    if (e || ferror(stdout)) {
        fprintf(stderr, "glesllm: writing to standard output failed: %s\n",
                e ? strerror(e) : "an earlier write did not complete");
        return rc ? rc : 1;
    }
    return rc;
}
