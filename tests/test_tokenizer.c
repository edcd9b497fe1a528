/* Tokenizers: llama.cpp's ids for the shared vocabularies and test strings,
 * the reference prompts, small hand-made vocabularies that pin each rule
 * (merge order, byte fallback, special tokens, pre-tokenizer words), the
 * decoder, and malformed vocabulary metadata. No GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "reference_jsonl.h"
#include "test_support.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocab.h"

void setUp(void) {}
void tearDown(void) {}

/* ---- helpers ------------------------------------------------------------------- */

static vocab *load_file(const char *path)
{
    gguf_file *f = NULL;
    vocab *v = NULL;
    glesllm_status st = gguf_open(path, &f);
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
    st = vocab_load(f, &v);
    gguf_close(f); /* the vocabulary owns its memory */
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
    return v;
}

/* A vocabulary file in memory from the writer; keys beyond the token list
 * are added by `extra` (may be NULL). Returns the load status. */
typedef void (*extra_fn)(gguf_writer *w);
static glesllm_status load_built(const char *model, const char *const *toks, const float *scores,
                                 const int32_t *types, size_t n, const char *const *merges,
                                 size_t n_merges, extra_fn extra, vocab **out)
{
    gguf_writer *w;
    TEST_ASSERT_EQUAL(GLESLLM_OK, gguf_writer_create(&w));
    gguf_writer_set_str(w, "general.architecture", "llama");
    if (model)
        gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    if (toks)
        gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, n);
    if (scores)
        gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n);
    if (types)
        gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n);
    if (merges)
        gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, n_merges);
    if (extra)
        extra(w);
    uint8_t *data;
    size_t size;
    TEST_ASSERT_EQUAL(GLESLLM_OK, gguf_writer_write_memory(w, &data, &size));
    gguf_writer_destroy(w);
    gguf_file *f;
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, gguf_open_memory(data, size, &f), glesllm_last_error());
    *out = NULL;
    glesllm_status st = vocab_load(f, out);
    gguf_close(f);
    free(data);
    return st;
}

/* ids of text, as a space-separated string (for readable failures) */
static const char *encode_str(const vocab *v, const char *text, size_t len, unsigned flags)
{
    static char buf[8192];
    tok_ids t = { 0 };
    glesllm_status st = tok_encode(v, text, len, flags, &t);
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < t.n && o + 16 < sizeof buf; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%d", i ? " " : "", t.ids[i]);
    tok_ids_free(&t);
    return buf;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    TEST_ASSERT_NOT_NULL_MESSAGE(f, path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    TEST_ASSERT_NOT_NULL(s);
    TEST_ASSERT_EQUAL((size_t)n, fread(s, 1, (size_t)n, f));
    s[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return s;
}

/* ---- llama.cpp's ids on the shared vocabularies ----------------------------------- */

/* Text llama.cpp's decoder cleans up for BPE vocabularies that ask for it:
 * its round trip does not hold there, so ours is not expected to either. */
static bool cleaned_by_llama_cpp(const char *s, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == ' ' && strchr("?!.,'", s[i + 1]) && s[i + 1])
            return true;
    return false;
}

/* Whether ids hold a user-defined SentencePiece piece with a "\342\226\201"
 * in it (Gemma 3's runs of spaces): llama.cpp decodes such a piece as its
 * text, so its round trip does not hold there either. */
static bool user_piece_with_space(const vocab *v, const tok_ids *t)
{
    for (size_t i = 0; vocab_kind_of(v) == VOCAB_SPM && i < t->n; i++) {
        size_t len;
        const char *txt = vocab_text(v, t->ids[i], &len);
        if (vocab_type(v, t->ids[i]) == TOKEN_USER_DEFINED && txt && strstr(txt, "\342\226\201"))
            return true;
    }
    return false;
}

/* Every string of inp_path (separated by "\n__ggml_vocab_test__\n") encodes
 * under the vocabulary of the file at path to line k of out_path, with no
 * BOS and special tokens not parsed; and decodes back to itself where
 * llama.cpp's round trip holds. */
static void check_strings(const char *name, const char *path, const char *inp_path,
                          const char *out_path)
{
    vocab *v = load_file(path);
    TEST_ASSERT_EQUAL_STRING("", vocab_warnings(v));
    size_t n_inp, n_out;
    char *inp = slurp(inp_path, &n_inp), *outs = slurp(out_path, &n_out);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *s = inp, *line = outs;
    int checked = 0, mismatched = 0, round_trips = 0;
    char first_bad[2048] = "";
    while (*s && *line) {
        char *end = strstr(s, sep);
        TEST_ASSERT_NOT_NULL_MESSAGE(end, "an .inp string without its separator");
        char *eol = strchr(line, '\n');
        TEST_ASSERT_NOT_NULL(eol);
        *eol = 0;
        const char *want = line + (*line == ' '); /* lines start with a space */
        size_t len = (size_t)(end - s);
        const char *got = encode_str(v, s, len, 0);
        if (strcmp(got, want) != 0 && mismatched++ == 0)
            snprintf(first_bad, sizeof first_bad, "%s: string %d ('%.*s'): want [%s], got [%s]",
                     name, checked, (int)(len < 200 ? len : 200), s, want, got);
        if (!vocab_cleans_spaces(v) || !cleaned_by_llama_cpp(s, len)) {
            tok_ids t = { 0 };
            TEST_ASSERT_EQUAL(GLESLLM_OK, tok_encode(v, s, len, TOK_ADD_SPECIAL, &t));
            if (!user_piece_with_space(v, &t)) {
                char *back;
                size_t back_len;
                TEST_ASSERT_EQUAL(GLESLLM_OK,
                                  tok_decode(v, t.ids, t.n, TOK_REMOVE_SPECIAL, &back, &back_len));
                char msg[512];
                snprintf(msg, sizeof msg, "%s: decode(encode(s)) != s for string %d ('%.*s'): '%s'",
                         name, checked, (int)(len < 100 ? len : 100), s, back);
                TEST_ASSERT_TRUE_MESSAGE(back_len == len && memcmp(back, s, len) == 0, msg);
                free(back);
                round_trips++;
            }
            tok_ids_free(&t);
        }
        checked++;
        s = end + strlen(sep);
        line = eol + 1;
    }
    printf("%s: %d strings, %d ids mismatched, %d round trips checked\n", name, checked, mismatched,
           round_trips);
    TEST_ASSERT_TRUE_MESSAGE(checked >= 40, "fewer test strings than the files hold");
    TEST_ASSERT_EQUAL_MESSAGE(0, mismatched, first_bad);
    free(inp);
    free(outs);
    vocab_free(v);
}

/* ../shared/tokenizer's VOCAB.gguf with its .inp strings and llama.cpp's .out */
static void check_vocab(const char *name)
{
    TEST_NEEDS_SHARED(dir);
    char path[1024], inp_path[1100], out_path[1100];
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-%s.gguf", dir, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    check_strings(name, path, inp_path, out_path);
}

/* The RWKV World vocabulary (../shared's RWKV-7 file) on the llama-spm test
 * strings (Unicode of 1 to 4 bytes, whitespace runs, code): the ids
 * llama.cpp gives (tests/reference/rwkv-world.out, llama_reference.c
 * --tokens), and back to the same bytes */
static void test_rwkv_vocab(void)
{
    TEST_NEEDS_SHARED(dir);
    char path[1024], inp_path[1100];
    snprintf(path, sizeof path, "%s/models/arch-rwkv7.gguf", dir);
    snprintf(inp_path, sizeof inp_path, "%s/tokenizer/ggml-vocab-llama-spm.gguf.inp", dir);
    check_strings("rwkv", path, inp_path, GLESLLM_TEST_DATA_DIR "/reference/rwkv-world.out");
}

static void test_llama_spm_vocab(void) { check_vocab("llama-spm"); }
static void test_phi3_vocab(void) { check_vocab("phi-3"); }
static void test_gpt2_vocab(void) { check_vocab("gpt-2"); }
static void test_starcoder_vocab(void) { check_vocab("starcoder"); }
static void test_deepseek_coder_vocab(void) { check_vocab("deepseek-coder"); }

/* Real vocabularies (tests/data/vocab, from Hugging Face tokenizer.json
 * files by tests/reference/vocab_from_hf.py): Gemma 2's and Gemma 3's
 * SentencePiece (256,000 and 262,144 pieces, no space prefix), Llama 3's
 * byte-level BPE, the same with SmolLM3's pre-tokenizer (smollm: each digit
 * alone), Qwen3's; llama.cpp's ids on 175 texts (vocab_reference.py), and
 * back to the same text. */
static void test_real_vocabularies(void)
{
    static const char *const names[] = { "gemma", "gemma3", "llama3", "smollm3", "qwen3" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024], out[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", GLESLLM_TEST_VOCAB_DIR, names[i]);
        snprintf(out, sizeof out, "%s/data/vocab/%s.out", GLESLLM_TEST_DATA_DIR, names[i]);
        check_strings(names[i], path, GLESLLM_TEST_DATA_DIR "/data/vocab/texts.inp", out);
    }
}

/* The reference prompts tokenize to llama.cpp's prompt_ids (BOS as the
 * vocabulary asks: the SPM models add it, GPT-2 does not). */
static void test_reference_prompts(void)
{
    TEST_NEEDS_SHARED(dir);
    static const char *const models[] = { "aidreams260K-f32", "tiny-spm-f32", "tiny-bpe-f32" };
    static ref_case cases[8];
    for (size_t m = 0; m < 3; m++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/reference/%s.jsonl", dir, models[m]);
        int n = ref_read(path, cases, 8);
        TEST_ASSERT_TRUE_MESSAGE(n > 0, path);
        snprintf(path, sizeof path, "%s/models/%s.gguf", dir, models[m]);
        vocab *v = load_file(path);
        for (int c = 0; c < n; c++) {
            TEST_ASSERT_TRUE(cases[c].prompt[0]);
            char want[4096] = "";
            for (int i = 0, o = 0; i < cases[c].n_prompt; i++)
                o += snprintf(want + o, sizeof want - (size_t)o, "%s%d", i ? " " : "", cases[c].prompt_ids[i]);
            TEST_ASSERT_EQUAL_STRING_MESSAGE(want, encode_str(v, cases[c].prompt, strlen(cases[c].prompt),
                                                              TOK_ADD_SPECIAL),
                                             cases[c].prompt);
        }
        vocab_free(v);
    }
}

/* ---- rules, on small hand-made vocabularies (no ../shared needed) ------------------ */

/* SPM: <unk> <s> </s>, the 256 byte tokens, then pieces with scores. */
#define SPM_N (3 + 256 + 13)
static const char *spm_pieces[13] = { "\342\226\201", "a", "b", "c", "ab", "bc", "\342\226\201a",
                                      "\342\226\201ab", "<|user|>", "h", "i", "hi",
                                      "<end_of_turn>" };
static const float spm_piece_scores[13] = { -1, -2, -2, -2, -1.0f, -0.5f, -3, -4, 0, -2, -2, -1, 0 };

static vocab *spm_vocab(void)
{
    static char bytes[256][8];
    const char *toks[SPM_N];
    float scores[SPM_N];
    int32_t types[SPM_N];
    toks[0] = "<unk>", toks[1] = "<s>", toks[2] = "</s>";
    types[0] = TOKEN_UNKNOWN, types[1] = types[2] = TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[3 + b] = bytes[b];
        types[3 + b] = TOKEN_BYTE;
    }
    for (int i = 0; i < 13; i++) {
        toks[259 + i] = spm_pieces[i];
        types[259 + i] = i == 8 || i == 12 ? TOKEN_USER_DEFINED : TOKEN_NORMAL;
    }
    for (int i = 0; i < SPM_N; i++)
        scores[i] = i >= 259 ? spm_piece_scores[i - 259] : 0.0f;
    vocab *v;
    glesllm_status st = load_built("llama", toks, scores, types, SPM_N, NULL, 0, NULL, &v);
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
    return v;
}
#define SPM_ID(piece_index) (259 + (piece_index))

static void test_spm_rules(void)
{
    vocab *v = spm_vocab();
    char want[256];
    /* "abc" with the leading space: "▁abc"; pairs by score: bc (-0.5) beats
     * ab (-1) and ▁a (-3); then ▁a + bc has no token: [▁a, bc]... but ▁a
     * is only merged after bc, so the result is ▁a bc */
    snprintf(want, sizeof want, "%d %d", SPM_ID(6), SPM_ID(5));
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "abc", 3, 0));
    /* BOS when asked; "ab" alone merges ▁a (-3) then ▁ab (-4)... ab (-1)
     * first: ▁ + ab, and "▁ab" is a token: one piece */
    snprintf(want, sizeof want, "1 %d", SPM_ID(7));
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "ab", 2, TOK_ADD_SPECIAL));
    /* a character without a token falls back to its UTF-8 bytes */
    snprintf(want, sizeof want, "%d %d %d", SPM_ID(0), 3 + 0xc3, 3 + 0xa9);
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "\xc3\xa9", 2, 0));
    /* control text stays text unless parsed; user-defined text is always a
     * token, and a space prefix follows every special token */
    snprintf(want, sizeof want, "%d %d %d %d %d", SPM_ID(0), 3 + '<', 3 + 's', 3 + '>', SPM_ID(11));
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "<s>hi", 5, 0));
    snprintf(want, sizeof want, "1 %d %d", SPM_ID(0), SPM_ID(11));
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "<s>hi", 5, TOK_PARSE_SPECIAL));
    snprintf(want, sizeof want, "%d %d %d %d", SPM_ID(6), SPM_ID(8), SPM_ID(0), SPM_ID(11));
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "a<|user|>hi", 11, 0));
    /* an end-of-turn text is a control token whatever its type (as
     * llama.cpp makes Gemma's user-defined <end_of_turn>): text unless
     * parsed */
    const char *eot = "hi<end_of_turn>";
    char eot_id[16];
    snprintf(eot_id, sizeof eot_id, "%d", SPM_ID(12));
    TEST_ASSERT_NULL(strstr(encode_str(v, eot, strlen(eot), 0), eot_id));
    snprintf(want, sizeof want, "%d %d %d", SPM_ID(0), SPM_ID(11), SPM_ID(12));
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, eot, strlen(eot), TOK_PARSE_SPECIAL));
    TEST_ASSERT_EQUAL_INT(SPM_ID(12), vocab_eot(v));
    /* empty text: nothing, or BOS alone */
    TEST_ASSERT_EQUAL_STRING("", encode_str(v, "", 0, 0));
    TEST_ASSERT_EQUAL_STRING("1", encode_str(v, "", 0, TOK_ADD_SPECIAL));
    vocab_free(v);
}

/* BPE over GPT-2's byte alphabet: the 256 byte characters, then merges. */
static const char *const bpe_merges[] = { "h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "\xc4\xa0w o",
                                          "r l", "o rl" };
static const char *const bpe_merged[] = { "he", "ll", "hell", "hello", "\xc4\xa0w", "\xc4\xa0wo", "rl", "orl" };
#define BPE_N (256 + 8 + 1)

static const char *bpe_pre = "gpt-2";
static void bpe_extra(gguf_writer *w)
{
    if (bpe_pre)
        gguf_writer_set_str(w, "tokenizer.ggml.pre", bpe_pre);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", BPE_N - 1);
}

/* a byte whose character bpe_vocab_load leaves out (-1: none) */
static int bpe_missing = -1;

static glesllm_status bpe_vocab_load(vocab **v, const char *const *merges, size_t n_merges)
{
    static char chars[256][4];
    const char *toks[BPE_N];
    int32_t types[BPE_N];
    for (int b = 0; b < 256; b++) {
        size_t k = utf8_put(gpt2_byte_to_cp((unsigned char)b), chars[b]);
        chars[b][k] = 0;
        toks[b] = b == bpe_missing ? "<missing>" : chars[b];
        types[b] = TOKEN_NORMAL;
    }
    for (int i = 0; i < 8; i++) {
        toks[256 + i] = bpe_merged[i];
        types[256 + i] = TOKEN_NORMAL;
    }
    toks[BPE_N - 1] = "<|endoftext|>";
    types[BPE_N - 1] = TOKEN_CONTROL;
    return load_built("gpt2", toks, NULL, types, BPE_N, merges, n_merges, bpe_extra, v);
}

static void test_bpe_rules(void)
{
    vocab *v;
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, bpe_vocab_load(&v, bpe_merges, 8), glesllm_last_error());
    char want[256];
    /* words "hello" " world": hello merges fully; " world": Ġw, Ġwo, then
     * "rl" and "orl"? o is taken by Ġwo (rank 5) before orl (rank 7) could
     * apply, so: Ġwo rl d */
    snprintf(want, sizeof want, "%d %d %d %d", 256 + 3, 256 + 5, 256 + 6, 'd');
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "hello world", 11, 0));
    /* no BOS for a GPT-2 vocabulary; "<|endoftext|>" is text unless parsed */
    char plain[256];
    snprintf(plain, sizeof plain, "%s", encode_str(v, "<|endoftext|>", 13, 0));
    TEST_ASSERT_TRUE(strchr(plain, ' ') != NULL);
    TEST_ASSERT_EQUAL_STRING(plain, encode_str(v, "<|endoftext|>", 13, TOK_ADD_SPECIAL));
    snprintf(want, sizeof want, "%d", BPE_N - 1);
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "<|endoftext|>", 13, TOK_PARSE_SPECIAL));
    TEST_ASSERT_TRUE(vocab_is_eog(v, BPE_N - 1));
    /* bytes of any UTF-8 (and of invalid input, read as U+FFFD) are tokens */
    tok_ids t = { 0 };
    TEST_ASSERT_EQUAL(GLESLLM_OK, tok_encode(v, "\xff", 1, 0, &t));
    char *back;
    size_t n;
    TEST_ASSERT_EQUAL(GLESLLM_OK, tok_decode(v, t.ids, t.n, 0, &back, &n));
    TEST_ASSERT_EQUAL_STRING("\xef\xbf\xbd", back);
    free(back);
    tok_ids_free(&t);
    vocab_free(v);

    /* an unknown pre-tokenizer is a warning naming it, then the default */
    bpe_pre = "no-such-pre";
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, bpe_vocab_load(&v, bpe_merges, 8), glesllm_last_error());
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(vocab_warnings(v), "'no-such-pre'"), vocab_warnings(v));
    TEST_ASSERT_EQUAL_STRING("default", vocab_pre_name(v));
    snprintf(want, sizeof want, "%d %d %d %d", 256 + 3, 256 + 5, 256 + 6, 'd');
    TEST_ASSERT_EQUAL_STRING(want, encode_str(v, "hello world", 11, 0));
    vocab_free(v);
    bpe_pre = "gpt-2";
}

/* A BPE vocabulary without the token of a byte: the text holding it is
 * refused, naming the byte (llama.cpp drops it: "a,b" without the comma's
 * token becomes "ab"), whether the byte's character is one byte of UTF-8 (',')
 * or two ('\n', U+010A) */
static void test_bpe_byte_without_token_is_refused(void)
{
    static const int missing[] = { ',', '\n' };
    static const char *const texts[] = { "a,b", "a\nb" };
    for (int i = 0; i < 2; i++) {
        vocab *v;
        bpe_missing = missing[i];
        glesllm_status st = bpe_vocab_load(&v, bpe_merges, 8);
        bpe_missing = -1;
        TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
        tok_ids t = { 0 };
        TEST_ASSERT_EQUAL(GLESLLM_ERR_UNSUPPORTED, tok_encode(v, texts[i], 3, 0, &t));
        char want[16];
        snprintf(want, sizeof want, "byte 0x%02X", missing[i]);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), want), glesllm_last_error());
        tok_ids_free(&t);
        /* text without it is as before */
        TEST_ASSERT_EQUAL_STRING("97 98", encode_str(v, "ab", 2, 0)); /* ids: the bytes */
        vocab_free(v);
    }
}

/* The pre-tokenizers cut words as their expressions say. */
static void expect_words(const char *pre, const char *text, const char *want)
{
    pretok *p;
    bool known;
    TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, pretok_create(pre, &p, &known), glesllm_last_error());
    TEST_ASSERT_TRUE_MESSAGE(known, pre);
    pretok_span *spans = NULL;
    size_t n = 0, cap = 0;
    TEST_ASSERT_EQUAL(GLESLLM_OK, pretok_split(p, text, strlen(text), &spans, &n, &cap));
    char got[1024] = "";
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%.*s", i ? "|" : "", (int)spans[i].len,
                              text + spans[i].off);
    TEST_ASSERT_EQUAL_STRING_MESSAGE(want, got, pre);
    free(spans);
    pretok_destroy(p);
}

static void test_pretokenizer_words(void)
{
    expect_words("gpt-2", "Hello world's 123  x!!\n", "Hello| world|'s| 123| | x|!!|\n");
    expect_words("llama-bpe", "Hello 12345 WE'RE\n\n  ok", "Hello| |123|45| WE|'RE|\n\n| | ok");
    expect_words("qwen2", "a 123", "a| |1|2|3");
    expect_words("starcoder", "x12 y", "x|1|2| y");
    expect_words("deepseek-coder", "ab, 12\n", "ab|,| |1|2|\n");
    expect_words("deepseek-llm", "ab, 12  ", "ab|,| |12|  ");
    expect_words("default", "a+b 1234", "a|+|b| |123|4");
    expect_words("falcon", "a`b", "a|`|b");
    expect_words("bloom", "hi, you", "hi|,| you");
    /* Unicode classes: letters and numbers beyond ASCII */
    expect_words("gpt-2", "\xd0\xbd\xd0\xb5 \xd9\xa3", "\xd0\xbd\xd0\xb5| \xd9\xa3");
    /* every name the table knows compiles */
    static const char *const names[] = { "default", "llama3", "llama-v3", "llama-bpe", "falcon3",
                                          "dbrx", "smaug-bpe", "chatglm-bpe", "deepseek-llm",
                                          "deepseek-coder", "falcon", "starcoder", "refact",
                                          "command-r", "smollm", "codeshell", "exaone",
                                          "minerva-7b", "gpt-2", "phi-2", "mpt", "olmo", "jais",
                                          "gpt-neox", "qwen2", "stablelm2", "deepseek-r1-qwen",
                                          "poro-chat", "bloom", "gpt3-finnish" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pretok *p;
        bool known;
        TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, pretok_create(names[i], &p, &known), names[i]);
        TEST_ASSERT_TRUE_MESSAGE(known, names[i]);
        pretok_destroy(p);
    }
}

/* ---- decoding ------------------------------------------------------------------- */

static void test_decode_and_stream(void)
{
    vocab *v = spm_vocab();
    /* pieces: ▁ is a space, bytes reassemble, control tokens print nothing */
    int32_t ids[] = { 1, SPM_ID(6), SPM_ID(0), 3 + 0xc3, 3 + 0xa9, 2 };
    char *s;
    size_t n;
    TEST_ASSERT_EQUAL(GLESLLM_OK, tok_decode(v, ids, 6, TOK_REMOVE_SPECIAL, &s, &n));
    TEST_ASSERT_EQUAL_STRING("a \xc3\xa9", s); /* the leading space the encoder adds is gone */
    free(s);
    TEST_ASSERT_EQUAL(GLESLLM_OK, tok_decode(v, ids, 6, TOK_UNPARSE_SPECIAL, &s, &n));
    TEST_ASSERT_EQUAL_STRING("<s> a \xc3\xa9</s>", s);
    free(s);

    /* streaming: a character split across tokens is held until complete */
    utf8_stream u = { { 0 }, 0 };
    char out[64];
    TEST_ASSERT_EQUAL(0, utf8_stream_push(&u, "\xf0\x9f", 2, out));
    TEST_ASSERT_EQUAL(0, utf8_stream_push(&u, "\xa6", 1, out));
    TEST_ASSERT_EQUAL(4, utf8_stream_push(&u, "\x99", 1, out));
    TEST_ASSERT_EQUAL_MEMORY("\xf0\x9f\xa6\x99", out, 4);
    /* invalid bytes become U+FFFD, never raw: a stray continuation, a lead
     * cut short, an overlong form, a surrogate, and a lead left at the end */
    size_t k = utf8_stream_push(&u, "\x80" "a\xe2" "b\xc0\xaf\xed\xa0\x80" "c\xe2\x82", 12, out);
    k += utf8_stream_flush(&u, out + k);
    out[k] = 0;
    TEST_ASSERT_EQUAL_STRING("\xef\xbf\xbd" "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                             "\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd",
                             out);
    TEST_ASSERT_TRUE(utf8_valid(out, k));
    vocab_free(v);

    /* BPE vocabularies that ask for it lose the space before punctuation */
    TEST_ASSERT_EQUAL(GLESLLM_OK, bpe_vocab_load(&v, bpe_merges, 8));
    tok_ids t = { 0 };
    TEST_ASSERT_EQUAL(GLESLLM_OK, tok_encode(v, "hello , world .", 15, 0, &t));
    TEST_ASSERT_EQUAL(GLESLLM_OK, tok_decode(v, t.ids, t.n, 0, &s, &n));
    TEST_ASSERT_EQUAL_STRING("hello, world.", s);
    free(s);
    tok_ids_free(&t);
    vocab_free(v);
}

/* Random text (invalid UTF-8, NULs, special-token text) never crashes the
 * tokenizers and gives only ids of the vocabulary; SPM with byte fallback
 * gives valid text back as it was. */
static void test_random_bytes(void)
{
    vocab *spm = spm_vocab(), *bpe;
    TEST_ASSERT_EQUAL(GLESLLM_OK, bpe_vocab_load(&bpe, bpe_merges, 8));
    /* pieces of text; the last three make it invalid UTF-8 */
    static const char *const units[] = { "a", "b", " ", "hi", "\n", "\t", "<|user|>", "<s>",
                                         "\xc3\xa9", "\xf0\x9f\xa6\x99", "\xe2\x96", "\x80", "\xff" };
    const size_t n_units = sizeof units / sizeof units[0];
    test_rng rng = { 77 };
    char text[256];
    for (int it = 0; it < 400; it++) {
        size_t n = 0;
        bool valid = it % 3 != 0;
        for (size_t k = rng_next(&rng) % 30; k > 0; k--) { /* 30 * 8 bytes fit */
            const char *u = units[rng_next(&rng) % (valid ? n_units - 3 : n_units)];
            memcpy(text + n, u, strlen(u));
            n += strlen(u);
        }
        if (!valid && n < sizeof text) /* and a NUL */
            text[n++] = 0;
        for (int k = 0; k < 2; k++) {
            vocab *v = k ? bpe : spm;
            tok_ids t = { 0 };
            TEST_ASSERT_EQUAL(GLESLLM_OK, tok_encode(v, text, n, TOK_ADD_SPECIAL | (it & 1 ? TOK_PARSE_SPECIAL : 0), &t));
            for (size_t i = 0; i < t.n; i++)
                TEST_ASSERT_TRUE(t.ids[i] >= 0 && (uint32_t)t.ids[i] < vocab_size(v));
            char *back;
            size_t len;
            TEST_ASSERT_EQUAL(GLESLLM_OK, tok_decode(v, t.ids, t.n, TOK_REMOVE_SPECIAL | TOK_UNPARSE_SPECIAL, &back, &len));
            /* a literal U+2581 reads back as a space, and text after a
             * special token gets SentencePiece's space in front */
            bool exact = utf8_valid(text, n); /* else a lead byte takes the next byte along */
            for (size_t i = 0; i + 2 < n; i++)
                exact &= memcmp(text + i, "\342\226\201", 3) != 0;
            for (size_t i = 1; i < t.n; i++)
                exact &= vocab_type(v, t.ids[i]) == TOKEN_NORMAL || vocab_type(v, t.ids[i]) == TOKEN_BYTE;
            if (!k && exact)
                TEST_ASSERT_TRUE_MESSAGE(len == n && memcmp(back, text, n) == 0, "SPM round trip");
            free(back);
            tok_ids_free(&t);
        }
    }
    vocab_free(spm);
    vocab_free(bpe);
}

/* ---- malformed metadata ------------------------------------------------------------- */

/* v is read after st is made: a pointer, as argument order is unspecified */
static void expect_load_error(glesllm_status st, vocab *const *v, const char *needle)
{
    TEST_ASSERT_NULL_MESSAGE(*v, needle);
    TEST_ASSERT_NOT_EQUAL_MESSAGE(GLESLLM_OK, st, needle);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), needle), glesllm_last_error());
}

static void bos_out_of_range(gguf_writer *w) { gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 9); }
static void five_scores(gguf_writer *w)
{
    static const float scores[5] = { 0, 0, 0, -1, -2 };
    gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 5);
}
static void five_types(gguf_writer *w)
{
    static const int32_t types[5] = { 2, 3, 3, 1, 1 };
    gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 5);
}
static void bos_none(gguf_writer *w) { gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0xffffffffu); }

static void test_malformed_vocabularies(void)
{
    static const char *const toks[] = { "<unk>", "<s>", "</s>", "a", "b" };
    float scores[5] = { 0, 0, 0, -1, -2 };
    int32_t types[5] = { 2, 3, 3, 1, 1 };
    vocab *v;
    expect_load_error(load_built("llama", NULL, NULL, NULL, 0, NULL, 0, NULL, &v), &v,
                      "tokenizer.ggml.tokens");
    expect_load_error(load_built(NULL, toks, scores, types, 5, NULL, 0, NULL, &v), &v,
                      "tokenizer.ggml.model");
    expect_load_error(load_built("bert", toks, scores, types, 5, NULL, 0, NULL, &v), &v, "'bert'");
    /* scores and types of the wrong length */
    static const char *const six[] = { "<unk>", "<s>", "</s>", "a", "b", "c" };
    expect_load_error(load_built("llama", six, NULL, NULL, 6, NULL, 0, five_scores, &v), &v,
                      "tokenizer.ggml.scores has 5 entries for 6 tokens");
    expect_load_error(load_built("llama", six, NULL, NULL, 6, NULL, 0, five_types, &v), &v,
                      "token_type has 5 entries for 6 tokens");
    /* an id out of range is an error; all ones means none */
    expect_load_error(load_built("llama", toks, scores, types, 5, NULL, 0, bos_out_of_range, &v), &v,
                      "tokenizer.ggml.bos_token_id = 9");
    TEST_ASSERT_EQUAL(GLESLLM_OK, load_built("llama", toks, scores, types, 5, NULL, 0, bos_none, &v));
    TEST_ASSERT_EQUAL(-1, vocab_bos(v));
    TEST_ASSERT_FALSE(vocab_adds_bos(v));
    vocab_free(v);
    /* a token type that is none */
    int32_t bad_types[5] = { 2, 3, 3, 1, 9 };
    expect_load_error(load_built("llama", toks, scores, bad_types, 5, NULL, 0, NULL, &v), &v,
                      "token_type[4] = 9");
    /* BPE without merges, or with a merge that is not two pieces */
    expect_load_error(bpe_vocab_load(&v, NULL, 0), &v, "tokenizer.ggml.merges");
    static const char *const bad_merges[] = { "h e", "hello" };
    expect_load_error(bpe_vocab_load(&v, bad_merges, 2), &v, "tokenizer.ggml.merges[1] ('hello')");
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_llama_spm_vocab);
    RUN_TEST(test_phi3_vocab);
    RUN_TEST(test_gpt2_vocab);
    RUN_TEST(test_starcoder_vocab);
    RUN_TEST(test_deepseek_coder_vocab);
    RUN_TEST(test_rwkv_vocab);
    RUN_TEST(test_real_vocabularies);
    RUN_TEST(test_reference_prompts);
    RUN_TEST(test_spm_rules);
    RUN_TEST(test_bpe_rules);
    RUN_TEST(test_bpe_byte_without_token_is_refused);
    RUN_TEST(test_pretokenizer_words);
    RUN_TEST(test_decode_and_stream);
    RUN_TEST(test_random_bytes);
    RUN_TEST(test_malformed_vocabularies);
    return test_exit_code(UNITY_END());
}
