/* References from llama.cpp for model files it runs but ../shared does not
 * hold (the demo writer's files of features such as LongRoPE): llama.cpp's
 * own outputs on the same bytes, in ../shared/reference's format. A tool,
 * not part of the build: compile it against a llama.cpp build of February
 * 2025 (CPU), outside this project:
 *
 *   cc -O2 llama_reference.c -I LLAMA/include -I LLAMA/ggml/include \
 *      -L LLAMA_BUILD/bin -lllama -lggml -lggml-base -o llama_reference
 *   llama_reference FILE.gguf N_CTX SEED > OUT.jsonl
 *   llama_reference --tokens FILE.gguf STRINGS.inp > OUT.out
 *
 * Three cases (prompts of 9, 5 and 14 ids: the BOS where the vocabulary
 * has one, then ids drawn from SEED), each: prompt_ids, forced_argmax (the argmax after each prompt
 * token), last_top5, greedy (32 ids) and greedy_margin (top-1 minus top-2
 * logit at each greedy step), plus gguf_fnv1a: the FNV-1a of the file as two
 * 32-bit halves, which the test compares with the file it makes.
 *
 * --tokens: the ids of each string of STRINGS.inp (separated by a line
 * __ggml_vocab_test__, as ../shared/tokenizer's), one line each as
 * ../shared/tokenizer's .out: no BOS, special tokens not parsed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void top2(const float *l, int n, int *best, float *margin)
{
    int a = 0, b = -1;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[a]) {
            b = a;
            a = i;
        } else if (b < 0 || l[i] > l[b]) {
            b = i;
        }
    }
    *best = a;
    *margin = l[a] - l[b];
}

static int decode(struct llama_context *c, const llama_token *ids, int n, int pos0, int all)
{
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all || i == n - 1;
    }
    b.n_tokens = n;
    int r = llama_decode(c, b);
    llama_batch_free(b);
    return r;
}

/* --tokens: the .out lines of a .inp file */
static int tokens(const char *model, const char *inp)
{
    FILE *f = fopen(inp, "rb");
    if (!f) {
        perror(inp);
        return 1;
    }
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = 1;
    struct llama_model *m = llama_model_load_from_file(model, mp);
    if (!m)
        return 1;
    const struct llama_vocab *v = llama_model_get_vocab(m);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    static llama_token ids[1 << 16];
    for (char *s = text, *end; (end = strstr(s, sep)) != NULL; s = end + strlen(sep)) {
        int k = llama_tokenize(v, s, (int)(end - s), ids, 1 << 16, 0, 0);
        if (k < 0)
            return 1;
        for (int i = 0; i < k; i++)
            printf(" %d", ids[i]);
        printf("\n");
    }
    llama_model_free(m);
    llama_backend_free();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--tokens") == 0)
        return tokens(argv[2], argv[3]);
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE.gguf N_CTX SEED | --tokens FILE.gguf STRINGS.inp\n",
                argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        h = (h ^ (uint8_t)ch) * 0x100000001b3ull;
    fclose(f);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m)
        return 1;
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int nv = llama_vocab_n_tokens(v);
    uint64_t seed = strtoull(argv[3], NULL, 10);
    const char *name = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
    static const int lens[] = { 9, 5, 14 };
    for (int c = 0; c < 3; c++) {
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t)atoi(argv[2]);
        cp.n_batch = cp.n_ubatch = cp.n_ctx;
        cp.n_threads = cp.n_threads_batch = 1;
        struct llama_context *ctx = llama_init_from_model(m, cp);
        if (!ctx)
            return 1;
        llama_token ids[64];
        int n = lens[c];
        /* (a vocabulary without BOS, RWKV's: all drawn) */
        int bos = llama_vocab_bos(v) >= 0;
        ids[0] = bos ? llama_vocab_bos(v) : 3 + (int)(next(&seed) % (uint64_t)(nv - 3));
        for (int i = 1; i < n; i++)
            ids[i] = 3 + (int)(next(&seed) % (uint64_t)(nv - 3));
        if (decode(ctx, ids, n, 0, 1))
            return 1;
        printf("{\"model\":\"%s\",\"n_vocab\":%d,\"prompt\":\"\",\"prompt_ids\":[", name, nv);
        for (int i = 0; i < n; i++)
            printf("%s%d", i ? "," : "", ids[i]);
        printf("],\"forced_argmax\":[");
        for (int i = 0; i < n; i++) {
            int best;
            float mg;
            top2(llama_get_logits_ith(ctx, i), nv, &best, &mg);
            printf("%s%d", i ? "," : "", best);
        }
        printf("],\"last_top5\":[");
        float *l = malloc(sizeof(float) * nv);
        memcpy(l, llama_get_logits_ith(ctx, n - 1), sizeof(float) * nv);
        for (int k = 0; k < 5; k++) {
            int b = 0;
            for (int i = 1; i < nv; i++)
                if (l[i] > l[b])
                    b = i;
            printf("%s[%d,%.6f]", k ? "," : "", b, l[b]);
            l[b] = -1e30f;
        }
        free(l);
        int greedy[32];
        float margin[32];
        for (int g = 0; g < 32; g++) {
            top2(llama_get_logits_ith(ctx, -1), nv, &greedy[g], &margin[g]);
            llama_token t = greedy[g];
            if (g < 31 && decode(ctx, &t, 1, n + g, 0))
                return 1;
        }
        printf("],\"greedy\":[");
        for (int g = 0; g < 32; g++)
            printf("%s%d", g ? "," : "", greedy[g]);
        printf("],\"greedy_margin\":[");
        for (int g = 0; g < 32; g++)
            printf("%s%.5f", g ? "," : "", margin[g]);
        printf("],\"gguf_fnv1a\":[%llu,%llu]}\n", (unsigned long long)(h >> 32),
               (unsigned long long)(h & 0xffffffffu));
        llama_free(ctx);
    }
    llama_model_free(m);
    llama_backend_free();
    return 0;
}
