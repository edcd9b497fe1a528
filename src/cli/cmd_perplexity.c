/* glesllm perplexity: the perplexity of a text under a model, computed as
 * llama.cpp's perplexity tool does (engine/perplexity.h). Progress on
 * stderr, the final estimate on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm perplexity -m MODEL.gguf [-f TEXT.txt] [-c N] [-b N] [--chunks N]\n"
            "\n"
            "Perplexity of a text (from -f, else standard input) as llama.cpp's perplexity\n"
            "computes it: windows of -c tokens, each from an empty cache starting with BOS,\n"
            "the second half of each window scored. Progress goes to stderr; the final\n"
            "'PPL = X +/- E' line to stdout.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE     the GGUF model\n"
            "  -f, --file FILE      the text (default: standard input)\n"
            "  -c, --ctx-size N     window length in tokens (default 512)\n"
            "  -b, --batch-size N   tokens per batched pass (default 512)\n"
            "  --chunks N           score at most N windows (default: all)\n");
}

static void progress(void *ud, uint32_t chunk, uint32_t n_chunks, double ppl)
{
    double *t0 = ud;
    if (chunk == 1) {
        double per = cli_now() - *t0;
        fprintf(stderr, "glesllm: %.2f s per window, about %.1f s for %u windows\n", per,
                per * n_chunks, n_chunks);
    }
    fprintf(stderr, "[%u]%.4f,%s", chunk, ppl, chunk == n_chunks ? "\n" : "");
}

/* the options that take a value */
static const char *const value_options[] = {
    "-m", "--model", "-f", "--file", "-c", "--ctx-size", "-b", "--batch-size", "--chunks", NULL
};

int cmd_perplexity(int argc, char **argv)
{
    const char *model_path = NULL, *file = NULL;
    long n_ctx = 512, n_batch = 512, chunks = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (cli_option_value("perplexity", argc, argv, i, value_options))
            return 2;
        const char *v = argv[++i];
        bool ok = true;
        if (strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0)
            model_path = v;
        else if (strcmp(o, "-f") == 0 || strcmp(o, "--file") == 0)
            file = v;
        else if (strcmp(o, "-c") == 0 || strcmp(o, "--ctx-size") == 0)
            ok = cli_parse_long(v, 2, 1L << 20, &n_ctx);
        else if (strcmp(o, "-b") == 0 || strcmp(o, "--batch-size") == 0)
            ok = cli_parse_long(v, 1, 1L << 16, &n_batch);
        else if (strcmp(o, "--chunks") == 0)
            ok = cli_parse_long(v, 0, 1L << 30, &chunks);
        else {
            fprintf(stderr, "glesllm perplexity: unknown option '%s'; see 'glesllm perplexity "
                            "--help'\n", o);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "glesllm perplexity: invalid value '%s' for %s%s\n", v, o,
                    cli_parse_want());
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "glesllm perplexity: no model: give one with -m MODEL.gguf\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cli_read_text(file, &text, &len);
    if (rc)
        return rc;
    glesllm_backend *b = NULL;
    glesllm_model *m = NULL;
    glesllm_context *c = NULL;
    glesllm_status st;
    size_t n_tok = 0;
    int32_t *ids = NULL;
    if ((rc = cli_open_backend(&b)) || (rc = cli_open_model(b, model_path, &m)))
        goto out;
    rc = 1;
    if ((st = cli_tokenize(m, text, len, GLESLLM_TOKENIZE_ADD_SPECIAL, &ids, &n_tok))) {
        cli_fail("tokenizing the text", st);
        goto out;
    }
    if (n_tok < 2 * (size_t)n_ctx) {
        fprintf(stderr, "glesllm perplexity: the text has %zu tokens; a context of %ld needs at "
                        "least %ld: give a longer text or a smaller -c\n", n_tok, n_ctx, 2 * n_ctx);
        rc = 2;
        goto out;
    }
    if ((rc = cli_make_context(m, model_path, (uint32_t)n_ctx, (uint32_t)n_batch, 0, &c)))
        goto out;
    rc = 1;
    glesllm_context_info ci;
    glesllm_context_get_info(c, &ci);
    fprintf(stderr, "glesllm: %s: %zu tokens, %zu windows of %ld; batch %u\n", model_path, n_tok,
            n_tok / (size_t)n_ctx, n_ctx, ci.n_batch);
    double t0 = cli_now();
    glesllm_perplexity_result r;
    cli_catch_signals(c);
    st = glesllm_perplexity(c, ids, n_tok, (uint32_t)chunks, progress, &t0, &r);
    cli_release_signals();
    if (st) {
        cli_fail("perplexity", st);
        goto out;
    }
    double s = cli_now() - t0;
    fprintf(stderr, "glesllm: %u windows, %u tokens scored in %.2f s (%.1f tokens/s evaluated)\n",
            r.n_chunks, r.n_scored, s, s > 0 ? r.n_chunks * (double)n_ctx / s : 0.0);
    if (r.cancelled && !r.n_chunks) {
        fprintf(stderr, "glesllm: interrupted inside the first window: no figures\n");
        rc = 130;
        goto out;
    }
    if (r.cancelled) {
        fprintf(stderr, "glesllm: interrupted after %u windows: PPL so far %.4f\n", r.n_chunks,
                r.ppl);
        rc = 130;
        goto out;
    }
    printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    rc = 0;
out:
    glesllm_context_free(c);
    glesllm_model_close(m);
    glesllm_backend_close(b);
    free(ids);
    free(text);
    return rc;
}
