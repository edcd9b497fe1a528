/* glesllm info --gpu: what the engine would run on.
 * glesllm info MODEL.gguf: what a model is, from its header alone, and
 * whether run would take it (no GL context is created and no tensor data is
 * read). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void info_usage(FILE *f)
{
    fprintf(f, "usage: glesllm info --gpu\n"
               "       glesllm info MODEL.gguf [-c N] [--json] [--tensors]\n"
               "  --gpu          open the GPU as the engine would and print the EGL platform,\n"
               "                 GL_VENDOR/RENDERER/VERSION, the limits used, optional extensions\n"
               "                 and whether the program cache is on\n"
               "  MODEL.gguf     architecture, size and shape of a model, read from its header only,\n"
               "                 and whether it will run (exit 1 and the reason if not)\n"
               "  -c, --ctx-size N  context size for the GPU memory estimate (default: the\n"
               "                 model's, at most 4096; 0 = the model's training context)\n"
               "  --json         the same as one JSON object\n"
               "  --tensors      also list every tensor (name, type, shape, offset)\n");
}

static int info_gpu(void)
{
    glesllm_backend *b = NULL;
    char *text = NULL;
    int rc = cli_open_backend(&b);
    if (rc)
        return rc;
    glesllm_status st = glesllm_backend_describe(b, &text);
    if (!st)
        fputs(text, stdout);
    free(text);
    glesllm_backend_close(b);
    return st ? cli_fail("describing the GPU", st) : 0;
}

static int info_model(const char *path, long ctx_arg, bool json, bool tensors)
{
    char *text = NULL;
    unsigned flags = (json ? GLESLLM_DESCRIBE_JSON : 0) | (tensors ? GLESLLM_DESCRIBE_TENSORS : 0);
    glesllm_status st = glesllm_file_describe(path, (int32_t)ctx_arg, flags, &text);
    if (st)
        return cli_fail("cannot read the model", st);
    fputs(text, stdout); /* (main checks that stdout took it) */
    free(text);
    /* the verdict run would give: the file opened and checked as a model
     * (no GPU: nothing is uploaded) */
    glesllm_model *m = NULL;
    glesllm_model_params p = { NULL, NULL, 0, NULL, NULL };
    if ((st = glesllm_model_open(NULL, path, &p, &m)))
        return cli_fail("this file will not run", st);
    glesllm_model_close(m);
    return 0;
}

int cmd_info(int argc, char **argv)
{
    bool gpu = false, json = false, tensors = false;
    const char *model_path = NULL;
    long ctx = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--gpu") == 0)
            gpu = true;
        else if (strcmp(a, "--json") == 0)
            json = true;
        else if (strcmp(a, "--tensors") == 0)
            tensors = true;
        else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx-size") == 0) {
            char *end = NULL;
            errno = 0;
            ctx = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || errno || !end || *end || ctx < 0 || ctx > 16777216) {
                fprintf(stderr, "glesllm info: %s needs a context size from 0 to 16777216\n", a);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            info_usage(stdout);
            return 0;
        } else if (a[0] != '-' && !model_path) {
            model_path = a;
        } else {
            fprintf(stderr, "glesllm info: unknown argument '%s'\n", a);
            info_usage(stderr);
            return 2;
        }
    }
    if (gpu == (model_path != NULL)) {
        info_usage(stderr);
        return 2;
    }
    if (gpu)
        return info_gpu();
    return info_model(model_path, ctx, json, tensors);
}
