/* Tokenizer throughput: encode and decode about 1 MB of mixed text (English
 * prose, code, numbers, Cyrillic, CJK, emoji) with a GGUF vocabulary, on the
 * CPU. Prints MB/s of input text for each direction.
 *
 *   bench_tokenize -m VOCAB.gguf [-f TEXT] [-s MB] [-r REPEATS]
 *
 * Without -f the text is made here from a fixed seed, so runs compare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

static const char *const pieces[] = {
    "The quick brown fox jumps over the lazy dog. ",
    "It was the best of times, it was the worst of times; ",
    "we'll see what they've done, isn't it? ",
    "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n",
    "def main():\n    print(\"hello, world\")\n\n",
    "    return x ** 2 + 3.14159 * y;  // 2026-11-22 12:34:56\n",
    "1234567890 42 3.5e-7 0x1F ",
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80! ", /* Привет, мир! */
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xe3\x80\x82", /* 你好，世界。 */
    "\xf0\x9f\xa6\x99 \xf0\x9f\x9a\x80 \xe2\x9c\x85 ",                          /* 🦙 🚀 ✅ */
    "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \303\234ber ",
    "\n\n\t  ",
};

static char *make_text(size_t bytes, size_t *len)
{
    char *s = malloc(bytes + 256);
    if (!s)
        return NULL;
    uint64_t rng = 0x5eed;
    size_t n = 0;
    while (n < bytes) {
        const char *p = pieces[splitmix64(&rng) % (sizeof pieces / sizeof pieces[0])];
        size_t k = strlen(p);
        memcpy(s + n, p, k);
        n += k;
    }
    s[n] = 0;
    *len = n;
    return s;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *file = NULL;
    double mb = 1.0;
    int repeats = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-m") == 0)
            model = argv[i + 1];
        else if (strcmp(argv[i], "-f") == 0)
            file = argv[i + 1];
        else if (strcmp(argv[i], "-s") == 0)
            mb = atof(argv[i + 1]);
        else if (strcmp(argv[i], "-r") == 0)
            repeats = atoi(argv[i + 1]);
    }
    if (!model || mb <= 0 || repeats < 1) {
        fprintf(stderr, "usage: bench_tokenize -m VOCAB.gguf [-f TEXT] [-s MB] [-r REPEATS]\n");
        return 2;
    }
    size_t len = 0;
    char *text = NULL;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            perror(file);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        text = malloc(len + 1);
        if (!text || fread(text, 1, len, f) != len) {
            fprintf(stderr, "bench_tokenize: cannot read %s\n", file);
            return 1;
        }
        fclose(f);
    } else {
        text = make_text((size_t)(mb * 1048576.0), &len);
    }
    gguf_file *gf;
    vocab *v;
    if (!text || gguf_open(model, &gf) || vocab_load(gf, &v)) {
        fprintf(stderr, "bench_tokenize: %s\n", glesllm_last_error());
        return 1;
    }
    gguf_close(gf);
    double best_enc = 1e30, best_dec = 1e30;
    size_t n_ids = 0;
    for (int r = 0; r < repeats; r++) {
        tok_ids t = { 0 };
        double t0 = now_seconds();
        if (tok_encode(v, text, len, 0, &t)) {
            fprintf(stderr, "bench_tokenize: %s\n", glesllm_last_error());
            return 1;
        }
        double t1 = now_seconds();
        char *back;
        size_t back_len;
        if (tok_decode(v, t.ids, t.n, 0, &back, &back_len)) {
            fprintf(stderr, "bench_tokenize: %s\n", glesllm_last_error());
            return 1;
        }
        double t2 = now_seconds();
        best_enc = t1 - t0 < best_enc ? t1 - t0 : best_enc;
        best_dec = t2 - t1 < best_dec ? t2 - t1 : best_dec;
        n_ids = t.n;
        free(back);
        tok_ids_free(&t);
    }
    double mib = len / 1048576.0;
    printf("%s (%s, pre %s): %.2f MiB, %zu tokens (%.2f bytes/token); best of %d\n", model,
           vocab_kind_of(v) == VOCAB_SPM ? "SPM" : "BPE", vocab_pre_name(v), mib, n_ids,
           (double)len / (double)(n_ids ? n_ids : 1), repeats);
    printf("  encode: %8.3f s  %8.2f MB/s  %10.0f tokens/s\n", best_enc, mib / best_enc, n_ids / best_enc);
    printf("  decode: %8.3f s  %8.2f MB/s  %10.0f tokens/s\n", best_dec, mib / best_dec, n_ids / best_dec);
    vocab_free(v);
    free(text);
    return 0;
}
