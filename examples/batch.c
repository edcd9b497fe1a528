/* Several prompts completed side by side: sequences of one cache, their
 * prompts together in passes (glesllm_decode_batch_tokens), then a token of
 * each in one pass that reads the model's weights once for all of them
 * (glesllm_decode_batch), each with its own sampling. What a server does for
 * its clients, in a page.
 *
 *   cc batch.c $(pkg-config --cflags --libs glesllm) -o batch
 *   ./batch model.gguf "Once upon a time" "The capital of France" "def fib(n):"
 */
#include <glesllm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX 8      /* prompts */
#define N_GEN 48   /* tokens each */

int main(int argc, char **argv)
{
    int n = argc - 2;
    if (n < 1 || n > MAX) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT... (1 to %d prompts)\n", argv[0], MAX);
        return 2;
    }
    glesllm_backend *gpu = NULL;
    glesllm_model *model = NULL;
    glesllm_context *seq[MAX];
    glesllm_context_params cp = { 1024, 0, 0 }; /* positions a sequence */
    glesllm_status st;
    if ((st = glesllm_backend_open(NULL, &gpu)) ||
        (st = glesllm_model_open(gpu, argv[1], NULL, &model)) ||
        (st = glesllm_context_create_seqs(model, &cp, (uint32_t)n, seq))) {
        fprintf(stderr, "batch: %s\n", glesllm_last_error());
        return 1;
    }
    uint32_t most = glesllm_decode_batch_max(seq[0]); /* 0: one at a time */
    char *text[MAX] = { 0 };
    size_t len[MAX] = { 0 };
    int32_t next[MAX], ids[MAX][1024];
    uint32_t n_ids[MAX];
    for (int i = 0; i < n && !st; i++) {
        glesllm_sampling s = glesllm_sampling_default();
        s.seed = 1000 + (uint64_t)i;
        glesllm_set_sampling(seq[i], &s);
        size_t k = 0;
        st = glesllm_tokenize(model, argv[2 + i], strlen(argv[2 + i]),
                              GLESLLM_TOKENIZE_ADD_SPECIAL, ids[i], 1024, &k);
        n_ids[i] = (uint32_t)k;
        text[i] = calloc(1, 16 * N_GEN + 1);
    }
    /* the prompts in passes of at most `most` tokens in all (one longer
     * than that alone), then each one's first token */
    for (int i0 = 0, g = 0; i0 < n && !st; i0 += g) {
        static int32_t toks[MAX * 1024];
        uint32_t total = 0;
        for (g = 0; i0 + g < n && total + n_ids[i0 + g] <= most; g++) {
            memcpy(toks + total, ids[i0 + g], sizeof(int32_t) * n_ids[i0 + g]);
            total += n_ids[i0 + g];
        }
        if (g)
            st = glesllm_decode_batch_tokens(seq + i0, (uint32_t)g, toks, n_ids + i0);
        else
            st = glesllm_decode(seq[i0], ids[i0], n_ids[i0], 0, 0), g = 1;
        for (int i = i0; i < i0 + g && !st; i++)
            st = glesllm_next_token(seq[i], &next[i]);
    }
    for (int step = 0; step < N_GEN && !st; step++) {
        for (int i = 0; i < n; i++) { /* each token's text */
            char piece[64];
            size_t k = glesllm_token_piece(model, next[i], 0, piece, sizeof piece);
            if (k > 16)
                k = 16;
            memcpy(text[i] + len[i], piece, k);
            len[i] += k;
        }
        /* a token of each sequence a pass (in passes of `most` where fewer) */
        for (int i0 = 0; i0 < n && !st; i0 += most ? (int)most : 1) {
            int cnt = most ? (n - i0 < (int)most ? n - i0 : (int)most) : 1;
            st = most ? glesllm_decode_batch(seq + i0, (uint32_t)cnt, next + i0)
                      : glesllm_decode(seq[i0], &next[i0], 1, glesllm_context_n_past(seq[i0]), 0);
            for (int i = i0; i < i0 + cnt && !st; i++)
                st = glesllm_next_token(seq[i], &next[i]);
        }
    }
    if (st)
        fprintf(stderr, "batch: %s\n", glesllm_last_error());
    for (int i = 0; i < n; i++) {
        printf("[%d] %s%.*s\n", i, argv[2 + i], (int)len[i], text[i] ? text[i] : "");
        free(text[i]);
        glesllm_context_free(seq[i]);
    }
    glesllm_model_close(model);
    glesllm_backend_close(gpu);
    return st ? 1 : 0;
}
