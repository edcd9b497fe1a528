/* Pre-tokenizer expressions and the PCRE2 splitter. See pretokenize.h.
 *
 * The expressions are the models' own (their tokenizer.json), in the
 * variants llama.cpp runs: it spells the case-insensitive contractions of
 * llama 3 and qwen2 out ('[sS] ...), and adds the digit-group and
 * punctuation passes of the families below. Non-ASCII characters are written
 * as \x{...} so that no editor or normaliser can change them. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretokenize.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"

#define GPT2_WORDS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define CJK_RUNS "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

static const char *const re_default[] = { "[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_WORDS, "\\p{N}+",
                                           "[0-9][0-9][0-9]", NULL };
static const char *const re_gpt2[] = { GPT2_WORDS, NULL };
static const char *const re_llama3[] = { LLAMA3_HEAD "\\p{N}{1,3}" LLAMA3_TAIL, NULL };
static const char *const re_qwen2[] = { LLAMA3_HEAD "\\p{N}" LLAMA3_TAIL, NULL };
static const char *const re_starcoder[] = { "\\p{N}", GPT2_WORDS, NULL };
static const char *const re_falcon[] = { "[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_WORDS, "[0-9][0-9][0-9]",
                                         NULL };
static const char *const re_deepseek_coder[] = { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_RUNS,
                                                 "\\p{N}", NULL };
/* the cased Latin, Greek, Cyrillic, ... letters of DeepSeek LLM's tokenizer */
static const char *const re_deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    CJK_RUNS,
    "\\p{N}+",
    NULL
};
static const char *const re_bloom[] = { " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}"
                                        "\\x{06D4}\\x{060C})]+",
                                        NULL };

enum { ADDS_BOS = 1, IGNORE_MERGES = 2, KEEP_SPACES = 4 };

typedef struct pretok_kind {
    const char *names; /* '|'-separated values of tokenizer.ggml.pre */
    const char *const *exprs;
    unsigned flags;
} pretok_kind;

static const pretok_kind kinds[] = {
    { "default", re_default, 0 },
    { "llama3|llama-v3|llama-bpe|falcon3|dbrx|smaug-bpe|chatglm-bpe", re_llama3, 0 },
    { "deepseek-llm", re_deepseek_llm, KEEP_SPACES },
    { "deepseek-coder", re_deepseek_coder, KEEP_SPACES },
    { "falcon", re_falcon, 0 },
    { "starcoder|refact|codeshell|exaone|minerva-7b", re_starcoder, 0 },
    { "command-r|smollm", re_starcoder, KEEP_SPACES },
    { "gpt-2|gpt2|phi-2|mpt|olmo|jais|gpt-neox|roberta-bpe|jina-es|jina-de|jina-v1-en|"
      "jina-v2-es|jina-v2-de|jina-v2-code|gigachat",
      re_gpt2, 0 },
    { "qwen2|deepseek-r1-qwen", re_qwen2, KEEP_SPACES },
    { "stablelm2", re_qwen2, 0 },
    { "poro-chat|bloom|gpt3-finnish", re_bloom, 0 },
};
/* llama 3's family: merges skipped for whole-token words, BOS added */
static const char llama3_names[] = "llama3|llama-v3|llama-bpe|falcon3";

struct pretok {
    const pretok_kind *kind;
    unsigned flags;
    size_t n;
    pcre2_code *re[8];
};

static bool name_in(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k == n && memcmp(p, name, n) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

glesllm_status pretok_create(const char *name, pretok **out, bool *known)
{
    *out = NULL;
    const pretok_kind *kind = &kinds[0];
    bool found = !name || !*name;
    for (size_t i = 0; !found && i < sizeof kinds / sizeof kinds[0]; i++)
        if (name_in(kinds[i].names, name)) {
            kind = &kinds[i];
            found = true;
        }
    if (known)
        *known = found;
    pretok *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for a pre-tokenizer");
    p->kind = kind;
    p->flags = kind->flags;
    if (found && name && name_in(llama3_names, name))
        p->flags |= ADDS_BOS | IGNORE_MERGES;
    for (const char *const *e = kind->exprs; *e; e++) {
        int code;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)*e, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            pretok_destroy(p);
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "the pre-tokenizer expression %s does not compile at offset %zu: %s "
                           "(PCRE2 built without Unicode support?)",
                           *e, (size_t)at, (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: interpreted when it fails */
        p->re[p->n++] = re;
    }
    *out = p;
    return GLESLLM_OK;
}

void pretok_destroy(pretok *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        pcre2_code_free(p->re[i]);
    free(p);
}

bool pretok_ignores_merges(const pretok *p) { return p->flags & IGNORE_MERGES; }
bool pretok_adds_bos(const pretok *p) { return p->flags & ADDS_BOS; }
bool pretok_cleans_spaces(const pretok *p) { return !(p->flags & KEEP_SPACES); }

static glesllm_status push(pretok_span **spans, size_t *count, size_t *cap, size_t off, size_t len)
{
    pretok_span *s = grow_array(*spans, cap, *count + 1, sizeof *s, 64);
    if (!s)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory splitting text into words");
    *spans = s;
    (*spans)[(*count)++] = (pretok_span){ off, len };
    return GLESLLM_OK;
}

/* Cuts text[off..off+len) by re into its matches and the runs between them. */
static glesllm_status cut(pcre2_code *re, pcre2_match_data *md, const char *text, size_t off,
                          size_t len, pretok_span **spans, size_t *count, size_t *cap)
{
    PCRE2_SPTR subject = (PCRE2_SPTR)(text + off);
    size_t done = 0, at = 0;
    glesllm_status st = GLESLLM_OK;
    while (at < len && !st) {
        int rc = pcre2_match(re, subject, len, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the pre-tokenizer failed on the text "
                           "(PCRE2 error %d)", rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (e == s) { /* an empty match cuts nothing: step over one character */
            at = s + 1;
            while (at < len && ((unsigned char)text[off + at] & 0xc0) == 0x80)
                at++;
            continue;
        }
        if (s > done)
            st = push(spans, count, cap, off + done, s - done);
        if (!st)
            st = push(spans, count, cap, off + s, e - s);
        done = at = e;
    }
    if (!st && done < len)
        st = push(spans, count, cap, off + done, len - done);
    return st;
}

glesllm_status pretok_split(const pretok *p, const char *text, size_t n, pretok_span **spans,
                            size_t *count, size_t *cap)
{
    size_t first = *count;
    glesllm_status st = push(spans, count, cap, 0, n);
    pretok_span *tmp = NULL;
    size_t tmp_n = 0, tmp_cap = 0;
    for (size_t r = 0; r < p->n && !st; r++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->re[r], NULL);
        if (!md) {
            st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for a pre-tokenizer match");
            break;
        }
        tmp_n = 0;
        for (size_t i = first; i < *count && !st; i++)
            st = cut(p->re[r], md, text, (*spans)[i].off, (*spans)[i].len, &tmp, &tmp_n, &tmp_cap);
        pcre2_match_data_free(md);
        *count = first; /* the new cuts replace the old */
        for (size_t i = 0; i < tmp_n && !st; i++)
            st = push(spans, count, cap, tmp[i].off, tmp[i].len);
    }
    free(tmp);
    return st;
}
