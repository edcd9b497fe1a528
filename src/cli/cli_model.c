/* Opening the GPU, a model (a GGUF file or the built-in demo) and a context
 * for a command. See cli.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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

int cli_open_backend(glesllm_backend **b)
{
    glesllm_backend_params p;
    glesllm_status st = glesllm_backend_params_from_env(&p);
    if (st)
        return cli_fail("opening the GPU", st);
    p.log = cli_log;
    /* (the library's message starts "opening the GPU: ") */
    return (st = glesllm_backend_open(&p, b)) ? cli_fail(NULL, st) : 0;
}

int cli_open_model(glesllm_backend *b, const char *path, glesllm_model **m)
{
    glesllm_model_params p = { load_progress, NULL, 0, NULL, NULL };
    glesllm_status st;
    if (path) {
        st = glesllm_model_open(b, path, &p, m);
        /* (its errors name the path) */
        return st ? cli_fail("cannot read the model", st) : 0;
    }
    st = glesllm_model_open_demo(b, &p, m);
    if (st)
        return cli_fail("making the demo model", st);
    char fmt[64];
    glesllm_model_formats(*m, fmt, sizeof fmt);
    fprintf(stderr, "glesllm: no -m given: running the built-in demo model (%s, %u layers, %u "
                    "hidden, %s; random weights, so the text means nothing)\n",
            glesllm_model_arch(*m), glesllm_model_n_layer(*m), glesllm_model_n_embd(*m), fmt);
    return 0;
}

int cli_make_context(glesllm_model *m, const char *name, uint32_t n_ctx, uint32_t n_batch,
                     uint32_t draft_max, glesllm_context **c)
{
    glesllm_context_params p = { n_ctx, n_batch, draft_max };
    glesllm_status st = glesllm_context_create(m, &p, c);
    if (st && isatty(2))
        fprintf(stderr, "\r\033[K");
    return st ? cli_fail(name, st) : 0;
}

glesllm_status cli_tokenize(const glesllm_model *m, const char *text, size_t len, unsigned flags,
                            int32_t **ids, size_t *n)
{
    *ids = NULL;
    glesllm_status st = glesllm_tokenize(m, text, len, flags, NULL, 0, n);
    if (st != GLESLLM_ERR_SMALL_BUFFER) /* (no tokens, or an error) */
        return st;
    if (!(*ids = malloc(sizeof **ids * *n)))
        return GLESLLM_ERR_NO_MEMORY;
    return glesllm_tokenize(m, text, len, flags, *ids, *n, n);
}
