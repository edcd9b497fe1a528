/* An embedded C project on the installed engine: .ci/run builds it through
 * pkg-config and through find_package(glesllm), and compares the ids it
 * prints with `glesllm run --temp 0 --print-ids` on the same model and
 * prompt. Misuse first: each must get a status, not a crash.
 *
 * usage: consumer [MODEL.gguf [PROMPT [N]]]   (no model: the built-in demo) */
#include <glesllm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_id(void *ud, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    int *count = ud;
    if (token >= 0)
        printf("%s%d", (*count)++ ? " " : "", token);
    return 0;
}

static int fail(const char *what, glesllm_status st)
{
    fprintf(stderr, "consumer: %s: %s (%s)\n", what, glesllm_last_error(), glesllm_strerror(st));
    return 1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : NULL;
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
    int n = argc > 3 ? atoi(argv[3]) : 32;
    int32_t ids[4] = { 0 };
    size_t n_ids;
    if (glesllm_tokenize(NULL, "x", 1, 0, ids, 4, &n_ids) == GLESLLM_OK ||
        glesllm_decode(NULL, ids, 1, 0, 0) == GLESLLM_OK ||
        glesllm_generate(NULL, "x", NULL, NULL, NULL, NULL) == GLESLLM_OK ||
        glesllm_context_create(NULL, NULL, NULL) == GLESLLM_OK) {
        fprintf(stderr, "consumer: a NULL handle was accepted\n");
        return 1;
    }
    glesllm_backend_params bp;
    glesllm_backend *b = NULL;
    glesllm_model *m = NULL;
    glesllm_context *c = NULL;
    glesllm_status st;
    if ((st = glesllm_backend_params_from_env(&bp)) || (st = glesllm_backend_open(&bp, &b)))
        return fail("opening the GPU", st);
    st = path ? glesllm_model_open(b, path, NULL, &m) : glesllm_model_open_demo(b, NULL, &m);
    if (st)
        return fail("opening the model", st);
    if ((st = glesllm_context_create(m, NULL, &c)))
        return fail("making a context", st);
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = n;
    int count = 0;
    if ((st = glesllm_generate(c, prompt, &gp, print_id, &count, NULL)))
        return fail("generating", st);
    printf("\n");
    /* positions past the context, and the backend closed too early */
    if (glesllm_decode(c, ids, 1, glesllm_context_n_ctx(c), 0) == GLESLLM_OK ||
        glesllm_backend_close(b) != GLESLLM_ERR_BUSY) {
        fprintf(stderr, "consumer: misuse was accepted\n");
        return 1;
    }
    glesllm_context_free(c);
    glesllm_model_close(m);
    if ((st = glesllm_backend_close(b)))
        return fail("closing the GPU", st);
    fprintf(stderr, "consumer: %d ids from glesllm %s\n", count, glesllm_version());
    return 0;
}
