/* Loading a model for a command (a GGUF file or the built-in demo). See
 * cli.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"
#include "model/demo_model.h"

static void load_progress(void *ud, uint64_t done, uint64_t total)
{
    (void)ud;
    if (!isatty(2))
        return;
    int pct = total ? (int)(100.0 * done / total) : 100;
    char bar[31];
    cli_progress_bar(pct, bar);
    fprintf(stderr, "\r\033[K[%s] %3d%% loading %.0f / %.0f MiB", bar, pct, done / 1048576.0,
            total / 1048576.0);
    if (done >= total)
        fprintf(stderr, "\r\033[K");
}

int cli_model_open(const char *path, unsigned need, cli_model *cm)
{
    memset(cm, 0, sizeof *cm);
    cm->t0 = now_seconds();
    cm->name = path ? path : "demo";
    glesllm_status st;
    const char *what = "cannot read the model"; /* (gguf_open's errors name the path) */
    if (path) {
        st = gguf_open(path, &cm->f);
    } else {
        demo_spec spec = demo_spec_default();
        fprintf(stderr, "glesllm: no -m given: running the built-in demo model (%s, %u layers, "
                        "%u hidden, %s; random weights, so the text means nothing)\n",
                spec.arch, spec.n_layer, spec.n_embd, ggml_type_name(spec.type));
        size_t size;
        what = "making the demo model";
        st = demo_model_to_memory(&spec, &cm->demo, &size);
        if (!st)
            st = gguf_open_memory(cm->demo, size, &cm->f);
    }
    if (!st && (st = model_open(cm->f, &cm->m)))
        what = path ? path : "demo model";
    if (st) {
        cli_model_close(cm);
        return cli_fail(what, st);
    }
    cm->opened = true;
    if (need & CLI_NEED_VOCAB) {
        if ((st = vocab_load(cm->f, &cm->voc))) {
            cli_model_close(cm);
            return cli_fail("the model's vocabulary", st);
        }
        if (*vocab_warnings(cm->voc))
            fprintf(stderr, "glesllm: warning: %s\n", vocab_warnings(cm->voc));
    }
    return 0;
}

/* the engine's tuning from the environment, read with the GPU's options */
static tuning cli_tune = TUNING_DEFAULT_INIT;

const tuning *cli_tuning(void) { return &cli_tune; }

int cli_open_gpu(gpu_context **ctx)
{
    gpu_options go;
    glesllm_status st;
    if ((st = gpu_options_from_env(&go)) || (st = tuning_from_env(&cli_tune)) ||
        (st = gpu_context_create(&go, ctx)))
        return cli_fail("opening the GPU", st);
    return 0;
}

int cli_model_upload(cli_model *cm, gpu_context *ctx, uint32_t n_ctx, uint32_t n_batch,
                     int32_t n_small)
{
    gpu_model_options mo = { n_ctx, KV_AUTO, load_progress, NULL, n_batch, n_small };
    mo.tuning = &cli_tune;
    glesllm_status st = gpu_model_create(ctx, &cm->m, &mo, &cm->gm);
    if (st) {
        if (isatty(2))
            fprintf(stderr, "\r\033[K");
        return cli_fail(cm->name, st);
    }
    cm->load_s = now_seconds() - cm->t0;
    return 0;
}

void cli_model_close(cli_model *cm)
{
    gpu_model_destroy(cm->gm);
    if (cm->opened)
        model_close(&cm->m);
    vocab_free(cm->voc);
    gguf_close(cm->f);
    free(cm->demo);
    memset(cm, 0, sizeof *cm);
}
