/* Loading and checking a GGUF vocabulary; token pieces. See vocab.h.
 * Defaults and special cases follow llama.cpp, which wrote most GGUF files:
 * an SPM vocabulary adds BOS and a leading space unless told otherwise, a
 * BPE one adds nothing unless its pre-tokenizer family does (llama 3). */
#include "text/vocab.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "text/pretokenize.h"
#include "text/unicode.h"

enum { ATTR_LSTRIP = 1, ATTR_RSTRIP = 2 };

struct vocab {
    vocab_kind kind;
    uint32_t n;
    char *arena;        /* every token text, NUL-terminated */
    uint64_t *off;      /* n: where each starts */
    uint32_t *len;      /* n */
    float *score;       /* n */
    uint8_t *type;      /* n: TOKEN_* */
    uint8_t *attr;      /* n: ATTR_* */
    uint32_t *slots;    /* text -> id hash: id + 1, 0 empty */
    uint64_t mask;

    char *merge_arena;  /* each merge as left then right, no separator */
    uint64_t *merge_off;
    uint32_t *merge_left, *merge_right; /* byte lengths */
    uint32_t n_merges;
    uint32_t *merge_slots; /* rank + 1 */
    uint64_t merge_mask;

    int32_t bos, eos, eot, unk;
    int32_t eog[8];
    int n_eog;
    bool add_bos, add_eos, add_space_prefix;
    int32_t byte_tok[256];
    int32_t *specials;
    size_t n_specials;
    /* RWKV: every token's bytes (the text unescaped), a bytes -> id hash
     * (id + 1, 0 empty) and the longest */
    char *raw_arena;
    uint64_t *raw_off;
    uint32_t *raw_len;
    uint32_t *raw_slots;
    uint32_t raw_max;
    pretok *pre;
    char pre_name[64];
    char warnings[256];
};


static uint64_t table_size(uint64_t n)
{
    uint64_t s = 16;
    while (s < 2 * n)
        s <<= 1;
    return s;
}

int32_t vocab_find(const vocab *v, const char *s, size_t n)
{
    for (uint64_t i = fnv1a(FNV1A_SEED, s, n) & v->mask;; i = (i + 1) & v->mask) {
        uint32_t e = v->slots[i];
        if (!e)
            return -1;
        uint32_t id = e - 1;
        if (v->len[id] == n && memcmp(v->arena + v->off[id], s, n) == 0)
            return (int32_t)id;
    }
}

/* A later token with the same text takes the slot, as in llama.cpp. */
static void insert_token(vocab *v, uint32_t id)
{
    const char *s = v->arena + v->off[id];
    uint32_t n = v->len[id];
    for (uint64_t i = fnv1a(FNV1A_SEED, s, n) & v->mask;; i = (i + 1) & v->mask) {
        uint32_t e = v->slots[i];
        if (!e || (v->len[e - 1] == n && memcmp(v->arena + v->off[e - 1], s, n) == 0)) {
            v->slots[i] = id + 1;
            return;
        }
    }
}

static uint64_t merge_hash(const char *l, size_t nl, const char *r, size_t nr)
{
    uint64_t h = fnv1a(FNV1A_SEED, l, nl);
    h = (h ^ 0xffu) * 0x100000001b3ull; /* a byte no UTF-8 text holds */
    return fnv1a(h, r, nr);
}

static bool merge_is(const vocab *v, uint32_t m, const char *l, size_t nl, const char *r, size_t nr)
{
    const char *s = v->merge_arena + v->merge_off[m];
    return v->merge_left[m] == nl && v->merge_right[m] == nr && memcmp(s, l, nl) == 0 &&
           memcmp(s + nl, r, nr) == 0;
}

int32_t vocab_merge_rank(const vocab *v, const char *l, size_t nl, const char *r, size_t nr)
{
    if (!v->merge_slots)
        return -1;
    for (uint64_t i = merge_hash(l, nl, r, nr) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        uint32_t e = v->merge_slots[i];
        if (!e)
            return -1;
        if (merge_is(v, e - 1, l, nl, r, nr))
            return (int32_t)(e - 1);
    }
}

/* The first rank of a repeated merge stays, as in llama.cpp. */
static void insert_merge(vocab *v, uint32_t m)
{
    const char *s = v->merge_arena + v->merge_off[m];
    size_t nl = v->merge_left[m], nr = v->merge_right[m];
    for (uint64_t i = merge_hash(s, nl, s + nl, nr) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        uint32_t e = v->merge_slots[i];
        if (!e) {
            v->merge_slots[i] = m + 1;
            return;
        }
        if (merge_is(v, e - 1, s, nl, s + nl, nr))
            return;
    }
}

static void warn(vocab *v, const char *msg)
{
    size_t used = strlen(v->warnings);
    snprintf(v->warnings + used, sizeof v->warnings - used, "%s%s", used ? "; " : "", msg);
}

/* An optional token id: -1 when absent or all ones (how converters write
 * "none"); an error when it names no token. */
static glesllm_status read_id(const gguf_file *f, const char *key, uint32_t n, int32_t *id)
{
    if (!gguf_find(f, key))
        return GLESLLM_OK;
    int64_t x;
    glesllm_status st = gguf_get_i64(f, key, &x);
    if (st)
        return st;
    if (x == -1 || x == 0xffffffffll) {
        *id = -1;
        return GLESLLM_OK;
    }
    if (x < 0 || x >= (int64_t)n)
        return err_set(GLESLLM_ERR_FORMAT, "%s = %lld names no token (the vocabulary has %u): "
                       "the file's tokenizer metadata is broken", key, (long long)x, n);
    *id = (int32_t)x;
    return GLESLLM_OK;
}

static glesllm_status read_bool(const gguf_file *f, const char *key, bool *out)
{
    return gguf_find(f, key) ? gguf_get_bool(f, key, out) : GLESLLM_OK;
}

static glesllm_status load_tokens(vocab *v, const gguf_file *f)
{
    const gguf_value *toks, *scores = NULL, *types = NULL;
    if (!gguf_find(f, "tokenizer.ggml.tokens"))
        return err_set(GLESLLM_ERR_FORMAT, "the file has no tokenizer.ggml.tokens: it holds no "
                       "vocabulary to tokenize with");
    glesllm_status st = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks);
    if (st)
        return st;
    uint64_t n = toks->v.arr.count;
    if (n == 0 || n > INT32_MAX)
        return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.tokens holds %llu tokens", (unsigned long long)n);
    v->n = (uint32_t)n;
    if (gguf_find(f, "tokenizer.ggml.scores")) {
        if ((st = gguf_get_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores)))
            return st;
        if (scores->v.arr.count != n)
            return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.scores has %llu entries for %u tokens",
                           (unsigned long long)scores->v.arr.count, v->n);
    }
    if (gguf_find(f, "tokenizer.ggml.token_type")) {
        if ((st = gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types)))
            return st;
        if (types->v.arr.count != n)
            return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.token_type has %llu entries for %u tokens",
                           (unsigned long long)types->v.arr.count, v->n);
    }
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < v->n; i++)
        bytes += gguf_array_string(toks, i).len + 1;
    v->arena = malloc(bytes);
    v->off = malloc(n * sizeof *v->off);
    v->len = malloc(n * sizeof *v->len);
    v->score = calloc(n, sizeof *v->score);
    v->type = malloc(n);
    v->attr = calloc(n, 1);
    v->mask = table_size(n) - 1;
    v->slots = calloc(v->mask + 1, sizeof *v->slots);
    if (!v->arena || !v->off || !v->len || !v->score || !v->type || !v->attr || !v->slots)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for a vocabulary of %u tokens", v->n);
    uint64_t o = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        gguf_str s = gguf_array_string(toks, i);
        if (s.len > UINT32_MAX)
            return err_set(GLESLLM_ERR_FORMAT, "token %u is %llu bytes long", i, (unsigned long long)s.len);
        memcpy(v->arena + o, s.data, s.len);
        v->arena[o + s.len] = 0;
        v->off[i] = o;
        v->len[i] = (uint32_t)s.len;
        o += s.len + 1;
        if (scores)
            v->score[i] = (float)gguf_array_number(scores, i);
        double t = types ? gguf_array_number(types, i) : TOKEN_NORMAL;
        if (t < TOKEN_UNDEFINED || t > TOKEN_BYTE)
            return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.token_type[%u] = %g is not a token "
                           "type (0..6)", i, t);
        v->type[i] = (uint8_t)t;
        insert_token(v, i);
    }
    return GLESLLM_OK;
}

static glesllm_status load_merges(vocab *v, const gguf_file *f)
{
    const gguf_value *merges;
    if (!gguf_find(f, "tokenizer.ggml.merges"))
        return err_set(GLESLLM_ERR_FORMAT, "a gpt2 (BPE) vocabulary needs tokenizer.ggml.merges, "
                       "and the file has none: reconvert the model");
    glesllm_status st = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges);
    if (st)
        return st;
    uint64_t n = merges->v.arr.count, bytes = 0;
    if (n > INT32_MAX - 1)
        return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.merges holds %llu merges", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        bytes += gguf_array_string(merges, i).len;
    v->n_merges = (uint32_t)n;
    v->merge_arena = malloc(bytes ? bytes : 1);
    v->merge_off = malloc((n ? n : 1) * sizeof *v->merge_off);
    v->merge_left = malloc((n ? n : 1) * sizeof *v->merge_left);
    v->merge_right = malloc((n ? n : 1) * sizeof *v->merge_right);
    v->merge_mask = table_size(n) - 1;
    v->merge_slots = calloc(v->merge_mask + 1, sizeof *v->merge_slots);
    if (!v->merge_arena || !v->merge_off || !v->merge_left || !v->merge_right || !v->merge_slots)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for %llu merges", (unsigned long long)n);
    uint64_t o = 0;
    for (uint32_t i = 0; i < v->n_merges; i++) {
        gguf_str s = gguf_array_string(merges, i);
        /* "left right", split at the first space after the first byte */
        const char *sp = s.len > 1 ? memchr(s.data + 1, ' ', s.len - 1) : NULL;
        if (!sp || s.len > UINT32_MAX) {
            char shown[48];
            return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.merges[%u] ('%s') is not two "
                           "pieces separated by a space", i, gguf_str_copy(s, shown, sizeof shown));
        }
        size_t nl = (size_t)(sp - s.data), nr = s.len - nl - 1;
        memcpy(v->merge_arena + o, s.data, nl);
        memcpy(v->merge_arena + o + nl, sp + 1, nr);
        v->merge_off[i] = o;
        v->merge_left[i] = (uint32_t)nl;
        v->merge_right[i] = (uint32_t)nr;
        o += nl + nr;
        insert_merge(v, i);
    }
    return GLESLLM_OK;
}

/* llama.cpp finds end-of-turn tokens by their text when the file names
 * none, and treats them as control tokens whatever their type. */
static void find_eog(vocab *v)
{
    static const char *const eot_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                             "<|endoftext|>", "<EOT>", "_<EOT>",
                                             "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>" };
    v->n_eog = 0;
    if (v->eos >= 0)
        v->eog[v->n_eog++] = v->eos;
    if (v->eot >= 0 && v->eot != v->eos)
        v->eog[v->n_eog++] = v->eot;
    for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0]; i++) {
        int32_t id = vocab_find(v, eot_texts[i], strlen(eot_texts[i]));
        if (id < 0)
            continue;
        if (v->eot < 0)
            v->eot = id;
        v->type[id] = TOKEN_CONTROL; /* (a user-defined one too: Gemma's <end_of_turn>) */
        bool seen = false;
        for (int k = 0; k < v->n_eog; k++)
            seen |= v->eog[k] == id;
        if (!seen && v->n_eog < (int)(sizeof v->eog / sizeof v->eog[0]))
            v->eog[v->n_eog++] = id;
    }
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int longest_first(const void *a, const void *b)
{
    const special_key *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool is_special_type(int t)
{
    return t == TOKEN_CONTROL || t == TOKEN_USER_DEFINED || t == TOKEN_UNKNOWN;
}

static glesllm_status collect_specials(vocab *v, const gguf_file *f)
{
    size_t n = 0;
    for (uint32_t i = 0; i < v->n; i++)
        n += v->len[i] && is_special_type(v->type[i]);
    special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    v->specials = malloc((n ? n : 1) * sizeof *v->specials);
    if (!keys || !v->specials) {
        free(keys);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the special tokens");
    }
    for (uint32_t i = 0; i < v->n; i++)
        if (v->len[i] && is_special_type(v->type[i]))
            keys[v->n_specials++] = (special_key){ v->len[i], (int32_t)i };
    qsort(keys, v->n_specials, sizeof *keys, longest_first);
    for (size_t i = 0; i < v->n_specials; i++)
        v->specials[i] = keys[i].id;
    free(keys);

    /* Phi-3's special tokens swallow the whitespace after them (llama.cpp
     * keys this on the model name). */
    gguf_str name;
    char lower[64] = "";
    if (gguf_find(f, "general.name") && gguf_get_str(f, "general.name", &name) == GLESLLM_OK) {
        gguf_str_copy(name, lower, sizeof lower);
        for (char *c = lower; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    }
    if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
        for (size_t i = 0; i < v->n_specials; i++)
            v->attr[v->specials[i]] |= ATTR_RSTRIP;
        static const char *const on[] = { "</s>" }, *const off[] = { "<unk>", "<s>", "<|endoftext|>" };
        int32_t id = vocab_find(v, on[0], strlen(on[0]));
        if (id >= 0)
            v->attr[id] |= ATTR_RSTRIP;
        for (size_t i = 0; i < 3; i++)
            if ((id = vocab_find(v, off[i], strlen(off[i]))) >= 0)
                v->attr[id] &= (uint8_t)~ATTR_RSTRIP;
    }
    return GLESLLM_OK;
}

/* An RWKV token's bytes from its text, as llama.cpp reads it: \t \n \r,
 * \xNN (lowercase hex), \ before any other character for that character;
 * returns the length written to out (at most n, the text's). */
static size_t rwkv_unescape(const char *s, size_t n, char *out)
{
    size_t o = 0;
    int hex = 0;
    unsigned acc = 0;
    bool esc = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (hex) {
            acc = ((acc << 4) + (c >= 'a' ? c - 'a' + 10u : c - (unsigned)'0')) & 0xffu;
            if (--hex == 0) {
                out[o++] = (char)acc;
                acc = 0;
            }
        } else if (esc) {
            esc = false;
            if (c == 'x')
                hex = 2;
            else
                out[o++] = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : (char)c;
        } else if (c == '\\') {
            esc = true;
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

static int32_t raw_find(const vocab *v, const char *s, size_t n)
{
    for (uint64_t i = fnv1a(FNV1A_SEED, s, n) & v->mask;; i = (i + 1) & v->mask) {
        uint32_t e = v->raw_slots[i];
        if (!e)
            return -1;
        uint32_t id = e - 1;
        if (v->raw_len[id] == n && memcmp(v->raw_arena + v->raw_off[id], s, n) == 0)
            return (int32_t)id;
    }
}

/* RWKV: each token's bytes and the hash over them (a later token of the
 * same bytes takes the slot, as in llama.cpp's trie). */
static glesllm_status load_rwkv_bytes(vocab *v)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < v->n; i++)
        bytes += v->len[i];
    v->raw_arena = malloc(bytes ? bytes : 1);
    v->raw_off = malloc(v->n * sizeof *v->raw_off);
    v->raw_len = malloc(v->n * sizeof *v->raw_len);
    v->raw_slots = calloc(v->mask + 1, sizeof *v->raw_slots);
    if (!v->raw_arena || !v->raw_off || !v->raw_len || !v->raw_slots)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for a vocabulary of %u tokens", v->n);
    uint64_t o = 0;
    for (uint32_t id = 0; id < v->n; id++) {
        uint32_t n = (uint32_t)rwkv_unescape(v->arena + v->off[id], v->len[id], v->raw_arena + o);
        v->raw_off[id] = o;
        v->raw_len[id] = n;
        o += n;
        if (!n)
            continue;
        if (n > v->raw_max)
            v->raw_max = n;
        const char *s = v->raw_arena + v->raw_off[id];
        for (uint64_t i = fnv1a(FNV1A_SEED, s, n) & v->mask;; i = (i + 1) & v->mask) {
            uint32_t e = v->raw_slots[i];
            if (!e || (v->raw_len[e - 1] == n && memcmp(v->raw_arena + v->raw_off[e - 1], s, n) == 0)) {
                v->raw_slots[i] = id + 1;
                break;
            }
        }
    }
    return GLESLLM_OK;
}

int32_t vocab_longest_bytes(const vocab *v, const char *s, size_t n, size_t *len)
{
    for (size_t k = n < v->raw_max ? n : v->raw_max; k > 0; k--) {
        int32_t id = raw_find(v, s, k);
        if (id >= 0) {
            *len = k;
            return id;
        }
    }
    *len = 0;
    return -1;
}

static glesllm_status load(vocab *v, const gguf_file *f)
{
    gguf_str model;
    glesllm_status st;
    if (!gguf_find(f, "tokenizer.ggml.model"))
        return err_set(GLESLLM_ERR_FORMAT, "the file has no tokenizer.ggml.model: it holds no vocabulary");
    if ((st = gguf_get_str(f, "tokenizer.ggml.model", &model)))
        return st;
    if (gguf_str_eq(model, "llama")) {
        v->kind = VOCAB_SPM;
    } else if (gguf_str_eq(model, "gpt2")) {
        v->kind = VOCAB_BPE;
    } else if (gguf_str_eq(model, "rwkv")) {
        v->kind = VOCAB_RWKV;
    } else {
        char name[64];
        return err_set(GLESLLM_ERR_UNSUPPORTED, "tokenizer model '%s' is not supported (llama "
                       "SentencePiece, gpt2 BPE and rwkv are)", gguf_str_copy(model, name, sizeof name));
    }
    if ((st = load_tokens(v, f)))
        return st;
    if (v->kind == VOCAB_BPE && (st = load_merges(v, f)))
        return st;
    if (v->kind == VOCAB_RWKV && (st = load_rwkv_bytes(v)))
        return st;

    /* llama.cpp's defaults, before the file's own keys */
    v->bos = v->eos = v->eot = v->unk = -1;
    if (v->kind == VOCAB_SPM) {
        v->bos = 1 < v->n ? 1 : -1;
        v->eos = 2 < v->n ? 2 : -1;
        v->unk = 0;
        v->add_bos = v->add_space_prefix = true;
        strcpy(v->pre_name, "default");
    } else if (v->kind == VOCAB_RWKV) { /* (no BOS, EOS or unknown token, none added) */
        strcpy(v->pre_name, "default");
    } else {
        /* llama.cpp defaults BOS and EOS of a BPE vocabulary to id 11; a file
         * without them gets none here rather than a comma that ends text. */
        gguf_str pre = { "", 0 };
        if (gguf_find(f, "tokenizer.ggml.pre") && (st = gguf_get_str(f, "tokenizer.ggml.pre", &pre)))
            return st;
        gguf_str_copy(pre, v->pre_name, sizeof v->pre_name);
        bool known;
        if ((st = pretok_create(v->pre_name, &v->pre, &known)))
            return st;
        if (!pre.len) {
            warn(v, "the vocabulary names no pre-tokenizer (tokenizer.ggml.pre): using 'default'");
            strcpy(v->pre_name, "default");
        } else if (!known) {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown pre-tokenizer '%s' (tokenizer.ggml.pre): using "
                     "'default'; token ids may differ from the model's own tokenizer", v->pre_name);
            warn(v, msg);
            strcpy(v->pre_name, "default");
        }
        v->add_bos = pretok_adds_bos(v->pre);
    }
    static const char *const id_keys[] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.unknown_token_id",
                                           "tokenizer.ggml.padding_token_id",
                                           "tokenizer.ggml.seperator_token_id" };
    int32_t pad = -1, sep = -1;
    int32_t *ids[] = { &v->bos, &v->eos, &v->eot, &v->unk, &pad, &sep };
    for (size_t i = 0; i < 6; i++)
        if ((st = read_id(f, id_keys[i], v->n, ids[i])))
            return st;
    if ((st = read_bool(f, "tokenizer.ggml.add_bos_token", &v->add_bos)) ||
        (st = read_bool(f, "tokenizer.ggml.add_eos_token", &v->add_eos)) ||
        (v->kind == VOCAB_SPM &&
         (st = read_bool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix))))
        return st;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        v->byte_tok[b] = v->kind == VOCAB_SPM ? vocab_find(v, hex, 6) : -1;
    }
    find_eog(v);
    return collect_specials(v, f);
}

glesllm_status vocab_load(const gguf_file *f, vocab **out)
{
    *out = NULL;
    vocab *v = calloc(1, sizeof *v);
    if (!v)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for a vocabulary");
    glesllm_status st = load(v, f);
    if (st) {
        vocab_free(v);
        return err_prefix(st, "reading the vocabulary: ");
    }
    *out = v;
    return GLESLLM_OK;
}

void vocab_free(vocab *v)
{
    if (!v)
        return;
    free(v->arena);
    free(v->off);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->attr);
    free(v->slots);
    free(v->merge_arena);
    free(v->merge_off);
    free(v->merge_left);
    free(v->merge_right);
    free(v->merge_slots);
    free(v->raw_arena);
    free(v->raw_off);
    free(v->raw_len);
    free(v->raw_slots);
    free(v->specials);
    pretok_destroy(v->pre);
    free(v);
}

vocab_kind vocab_kind_of(const vocab *v) { return v->kind; }
uint32_t vocab_size(const vocab *v) { return v->n; }
const char *vocab_warnings(const vocab *v) { return v->warnings; }
const char *vocab_pre_name(const vocab *v) { return v->pre_name; }
int32_t vocab_bos(const vocab *v) { return v->bos; }
int32_t vocab_eos(const vocab *v) { return v->eos; }
int32_t vocab_eot(const vocab *v) { return v->eot; }
int32_t vocab_unk(const vocab *v) { return v->unk; }
bool vocab_adds_bos(const vocab *v) { return v->add_bos && v->bos >= 0; }
bool vocab_adds_eos(const vocab *v) { return v->add_eos && v->eos >= 0; }
bool vocab_adds_space_prefix(const vocab *v) { return v->add_space_prefix; }
bool vocab_ignores_merges(const vocab *v) { return v->pre && pretok_ignores_merges(v->pre); }
bool vocab_cleans_spaces(const vocab *v) { return v->pre && pretok_cleans_spaces(v->pre); }
const struct pretok *vocab_pretok(const vocab *v) { return v->pre; }
int32_t vocab_byte_token(const vocab *v, unsigned char b) { return v->byte_tok[b]; }

const int32_t *vocab_specials(const vocab *v, size_t *n)
{
    *n = v->n_specials;
    return v->specials;
}

static bool in_range(const vocab *v, int32_t id) { return id >= 0 && (uint32_t)id < v->n; }
bool vocab_lstrip(const vocab *v, int32_t id) { return in_range(v, id) && (v->attr[id] & ATTR_LSTRIP); }
bool vocab_rstrip(const vocab *v, int32_t id) { return in_range(v, id) && (v->attr[id] & ATTR_RSTRIP); }

bool vocab_is_eog(const vocab *v, int32_t id)
{
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return true;
    return false;
}

const char *vocab_text(const vocab *v, int32_t id, size_t *len)
{
    if (!in_range(v, id)) {
        if (len)
            *len = 0;
        return "";
    }
    if (len)
        *len = v->len[id];
    return v->arena + v->off[id];
}

int64_t vocab_difference(const vocab *a, const vocab *b)
{
    if (a->kind != b->kind || vocab_bos(a) != vocab_bos(b) || vocab_eos(a) != vocab_eos(b))
        return -2;
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->arena + a->off[i], b->arena + b->off[i], a->len[i]))
            return i;
    return a->n == b->n ? -1 : (int64_t)n;
}

int vocab_type(const vocab *v, int32_t id) { return in_range(v, id) ? v->type[id] : TOKEN_UNDEFINED; }
float vocab_score(const vocab *v, int32_t id) { return in_range(v, id) ? v->score[id] : 0.0f; }

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t put(char *buf, size_t n, size_t o, char c)
{
    if (o < n)
        buf[o] = c;
    return o + 1;
}

size_t vocab_piece(const vocab *v, int32_t id, bool special, char *buf, size_t n)
{
    if (!in_range(v, id))
        return 0;
    int type = v->type[id];
    const char *p = v->arena + v->off[id];
    size_t len = v->len[id], o = 0;
    if (type == TOKEN_CONTROL || type == TOKEN_UNKNOWN || type == TOKEN_USER_DEFINED) {
        if (!special && type != TOKEN_USER_DEFINED)
            return 0;
        for (size_t i = 0; i < len; i++)
            o = put(buf, n, o, p[i]);
        return o;
    }
    if (v->kind == VOCAB_RWKV) {
        for (size_t i = 0; i < v->raw_len[id]; i++)
            o = put(buf, n, o, v->raw_arena[v->raw_off[id] + i]);
        return o;
    }
    if (v->kind == VOCAB_SPM) {
        if (type == TOKEN_BYTE) {
            int hi = len == 6 ? hexval(p[3]) : -1, lo = len == 6 ? hexval(p[4]) : -1;
            return hi < 0 || lo < 0 ? 0 : put(buf, n, 0, (char)(hi * 16 + lo));
        }
        if (type != TOKEN_NORMAL)
            return 0;
        for (size_t i = 0; i < len; i++) {
            if (i + 2 < len && (unsigned char)p[i] == 0xe2 && (unsigned char)p[i + 1] == 0x96 &&
                (unsigned char)p[i + 2] == 0x81) { /* U+2581 */
                o = put(buf, n, o, ' ');
                i += 2;
            } else {
                o = put(buf, n, o, p[i]);
            }
        }
        return o;
    }
    if (type != TOKEN_NORMAL)
        return 0;
    for (size_t i = 0; i < len;) { /* GPT-2: each character stands for a byte */
        size_t at = i;
        uint32_t cp = utf8_next(p, len, &i);
        int b = gpt2_cp_to_byte(cp);
        if (b >= 0)
            o = put(buf, n, o, (char)b);
        else /* not a byte character: as it is */
            for (size_t j = at; j < i; j++)
                o = put(buf, n, o, p[j]);
    }
    return o;
}
