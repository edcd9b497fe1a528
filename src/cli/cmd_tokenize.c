/* glesllm tokenize: text to token ids with a model's vocabulary, as
 * llama.cpp's llama-tokenize prints them. Needs no GPU and no weights: a
 * vocabulary-only GGUF file is enough. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm tokenize -m MODEL.gguf [-p TEXT | -f FILE] [--ids] [--no-bos]\n"
            "                        [--special]\n"
            "\n"
            "Prints the token ids of a text (from -p, -f, or else standard input) under the\n"
            "model's vocabulary: one 'id -> 'piece'' line per token, or with --ids the ids on\n"
            "one line. Works on vocabulary-only GGUF files; needs no GPU.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE   the GGUF file whose vocabulary to use\n"
            "  -p, --prompt TEXT  the text\n"
            "  -f, --file FILE    the text from a file\n"
            "  --ids              print the ids only, space-separated on one line\n"
            "  --no-bos           do not add BOS (or EOS) even where the vocabulary asks\n"
            "  --special          special-token text (<s>, <|im_end|>, ...) becomes that token;\n"
            "                     else it is tokenized as plain text\n");
}

/* A piece as printable text: bytes that are no complete UTF-8 character
 * (half of an emoji, say) are shown as \xNN. */
static void print_piece(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        size_t k = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        if (k <= n - i && cli_utf8_char(p + i, k)) {
            fwrite(p + i, 1, k, stdout);
            i += k;
        } else {
            printf("\\x%02x", (unsigned char)p[i++]);
        }
    }
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, no_bos = false, special = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(o, "--ids") == 0) {
            ids_only = true;
        } else if (strcmp(o, "--no-bos") == 0) {
            no_bos = true;
        } else if (strcmp(o, "--special") == 0) {
            special = true;
        } else if (strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0 || strcmp(o, "-p") == 0 ||
                   strcmp(o, "--prompt") == 0 || strcmp(o, "-f") == 0 || strcmp(o, "--file") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "glesllm tokenize: missing value after '%s'\n", o);
                return 2;
            }
            const char *v = argv[++i];
            if (o[1] == 'm' || o[2] == 'm')
                model_path = v;
            else if (o[1] == 'p' || o[2] == 'p')
                prompt = v;
            else
                file = v;
        } else {
            fprintf(stderr, "glesllm tokenize: %s '%s'; see 'glesllm tokenize --help'\n",
                    o[0] == '-' ? "unknown option" : "unexpected argument", o);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "glesllm tokenize: no model: give the GGUF file with -m\n");
        return 2;
    }
    if (prompt && file) {
        fprintf(stderr, "glesllm tokenize: give the text one way: -p or -f\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (prompt) {
        len = strlen(prompt);
    } else {
        int rc = cli_read_text(file, &text, &len);
        if (rc)
            return rc;
    }
    glesllm_model *m = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = 1;
    glesllm_model_params mp = { NULL, NULL, 1, cli_log, NULL }; /* (the vocabulary alone) */
    glesllm_status st = glesllm_model_open(NULL, model_path, &mp, &m);
    if (st) {
        cli_fail("cannot read the model", st); /* (its errors name the path) */
        goto out;
    }
    unsigned flags = (no_bos ? 0 : GLESLLM_TOKENIZE_ADD_SPECIAL) |
                     (special ? GLESLLM_TOKENIZE_PARSE_SPECIAL : 0);
    const char *in = prompt ? prompt : text;
    if ((st = cli_tokenize(m, in, len, flags, &ids, &n_ids))) {
        cli_fail("tokenizing", st);
        goto out;
    }
    if (ids_only) {
        for (size_t i = 0; i < n_ids; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    } else {
        for (size_t i = 0; i < n_ids; i++) {
            char piece[256];
            size_t n = glesllm_token_piece(m, ids[i], 1, piece, sizeof piece);
            printf("%6d -> '", ids[i]);
            print_piece(piece, n < sizeof piece ? n : sizeof piece);
            printf("%s'\n", n > sizeof piece ? "..." : "");
        }
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    free(ids);
    glesllm_model_close(m);
    free(text);
    return rc;
}
