/* Streams a completion of a prompt: the smallest whole program on libglesllm.
 *
 *   cc simple.c $(pkg-config --cflags --libs glesllm) -o simple
 *   ./simple model.gguf "Once upon a time"
 */
#include <glesllm.h>
#include <stdio.h>

static int print_piece(void *ud, int32_t token, const char *text, size_t len)
{
    (void)ud;
    (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would stop */
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
        return 2;
    }
    glesllm_backend *gpu = NULL;
    glesllm_model *model = NULL;
    glesllm_context *ctx = NULL;
    glesllm_status st;
    if ((st = glesllm_backend_open(NULL, &gpu)) ||
        (st = glesllm_model_open(gpu, argv[1], NULL, &model)) ||
        (st = glesllm_context_create(model, NULL, &ctx))) {
        fprintf(stderr, "simple: %s\n", glesllm_last_error());
        return 1;
    }
    glesllm_sampling sampling = glesllm_sampling_default(); /* temp 0.8, top-k 40, ... */
    sampling.seed = 42;
    glesllm_set_sampling(ctx, &sampling);
    glesllm_generate_params params = glesllm_generate_default(); /* 128 tokens */
    glesllm_generate_result result;
    st = glesllm_generate(ctx, argv[2], &params, print_piece, NULL, &result);
    if (st)
        fprintf(stderr, "\nsimple: %s\n", glesllm_last_error());
    else
        fprintf(stderr, "\n%u tokens at %.1f tokens/s\n", result.n_gen,
                result.gen_s > 0 ? result.n_gen / result.gen_s : 0.0);
    glesllm_context_free(ctx);
    glesllm_model_close(model);
    glesllm_backend_close(gpu);
    return st ? 1 : 0;
}
