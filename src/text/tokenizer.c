/* Encoding and decoding. See tokenizer.h. */
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "text/pretokenize.h"
#include "text/unicode.h"

void tok_ids_free(tok_ids *t)
{
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static glesllm_status no_memory(void)
{
    return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory while tokenizing");
}

static glesllm_status push_id(tok_ids *t, int32_t id)
{
    int32_t *ids = grow_array(t->ids, &t->cap, t->n + 1, sizeof *ids, 256);
    if (!ids)
        return no_memory();
    t->ids = ids;
    t->ids[t->n++] = id;
    return GLESLLM_OK;
}

/* ---- the merge loop both models share ----------------------------------- */

/* A run of the text being merged: symbols form a list by prev/next; a
 * symbol merged into its left neighbour has n == 0. */
typedef struct symbol {
    int prev, next;
    size_t off, n;
} symbol;

/* A candidate merge of symbols left and right. SPM prefers the higher
 * score, BPE the lower rank (stored negated); ties go to the leftmost. */
typedef struct bigram {
    int left, right;
    double prio;
    size_t size;
} bigram;

typedef struct merger {
    symbol *sym;
    size_t n_sym, cap_sym;
    bigram *heap;
    size_t n_heap, cap_heap;
} merger;

static bool before(const bigram *a, const bigram *b)
{
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

static glesllm_status heap_push(merger *m, bigram b)
{
    bigram *heap = grow_array(m->heap, &m->cap_heap, m->n_heap + 1, sizeof *heap, 64);
    if (!heap)
        return no_memory();
    m->heap = heap;
    size_t i = m->n_heap++;
    while (i > 0 && before(&b, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = b;
    return GLESLLM_OK;
}

static bigram heap_pop(merger *m)
{
    bigram top = m->heap[0], last = m->heap[--m->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->n_heap)
            break;
        if (c + 1 < m->n_heap && before(&m->heap[c + 1], &m->heap[c]))
            c++;
        if (!before(&m->heap[c], &last))
            break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->n_heap)
        m->heap[i] = last;
    return top;
}

/* Splits s[0..n) into one symbol per UTF-8 character. */
static glesllm_status split_chars(merger *m, const char *s, size_t n)
{
    m->n_sym = 0;
    m->n_heap = 0;
    symbol *sym = grow_array(m->sym, &m->cap_sym, n, sizeof *sym, 64);
    if (!sym)
        return no_memory();
    m->sym = sym;
    for (size_t off = 0; off < n;) {
        size_t k = utf8_char_len((unsigned char)s[off]);
        if (k > n - off)
            k = n - off;
        int i = (int)m->n_sym++;
        m->sym[i] = (symbol){ i - 1, off + k == n ? -1 : i + 1, off, k };
        off += k;
    }
    return GLESLLM_OK;
}

typedef struct tok_ctx {
    const vocab *v;
    const char *s; /* the text being merged */
    merger m;
    tok_ids *out;
} tok_ctx;

/* Queues the merge of symbols l and r when the model has one. */
static glesllm_status try_pair(tok_ctx *c, int l, int r)
{
    if (l < 0 || r < 0)
        return GLESLLM_OK;
    const symbol *a = &c->m.sym[l], *b = &c->m.sym[r];
    bigram bg = { l, r, 0.0, a->n + b->n };
    if (vocab_kind_of(c->v) == VOCAB_SPM) {
        int32_t id = vocab_find(c->v, c->s + a->off, bg.size);
        if (id < 0)
            return GLESLLM_OK;
        bg.prio = vocab_score(c->v, id);
    } else {
        int32_t rank = vocab_merge_rank(c->v, c->s + a->off, a->n, c->s + b->off, b->n);
        if (rank < 0)
            return GLESLLM_OK;
        bg.prio = -(double)rank;
    }
    return heap_push(&c->m, bg);
}

/* Merges the best pair until none is left. */
static glesllm_status merge_all(tok_ctx *c)
{
    glesllm_status st = GLESLLM_OK;
    for (int i = 1; i < (int)c->m.n_sym && !st; i++)
        st = try_pair(c, i - 1, i);
    while (c->m.n_heap && !st) {
        bigram bg = heap_pop(&c->m);
        symbol *l = &c->m.sym[bg.left], *r = &c->m.sym[bg.right];
        if (!l->n || !r->n || l->n + r->n != bg.size)
            continue; /* outdated: one side has merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            c->m.sym[r->next].prev = bg.left;
        st = try_pair(c, l->prev, bg.left);
        if (!st)
            st = try_pair(c, bg.left, l->next);
    }
    return st;
}

/* ---- SentencePiece ------------------------------------------------------- */

static glesllm_status spm_fallback(tok_ctx *c, const symbol *sy)
{
    glesllm_status st = GLESLLM_OK;
    for (size_t j = 0; j < sy->n && !st; j++) {
        unsigned char b = (unsigned char)c->s[sy->off + j];
        int32_t id = vocab_byte_token(c->v, b);
        if (id < 0)
            id = vocab_find(c->v, (const char *)&b, 1);
        if (id < 0)
            id = vocab_unk(c->v);
        if (id >= 0)
            st = push_id(c->out, id);
    }
    return st;
}

/* text: the fragment, with a space in front when asked */
static glesllm_status spm_fragment(tok_ctx *c, char **buf, size_t *cap, const char *text, size_t n,
                                   bool space_prefix)
{
    char *b = grow_array(*buf, cap, 3 * (n + 1), 1, 256);
    if (!b)
        return no_memory();
    *buf = b;
    size_t o = 0;
    if (space_prefix) {
        memcpy(*buf, "\xe2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') {
            memcpy(*buf + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            (*buf)[o++] = text[i];
        }
    }
    c->s = *buf;
    glesllm_status st = split_chars(&c->m, *buf, o);
    if (!st)
        st = merge_all(c);
    for (int i = c->m.n_sym ? 0 : -1; i >= 0 && !st; i = c->m.sym[i].next) {
        const symbol *sy = &c->m.sym[i];
        int32_t id = vocab_find(c->v, c->s + sy->off, sy->n);
        st = id >= 0 ? push_id(c->out, id) : spm_fallback(c, sy);
    }
    return st;
}

/* ---- byte-level BPE -------------------------------------------------------- */

static glesllm_status bpe_word(tok_ctx *c, const char *w, size_t n)
{
    c->s = w;
    int32_t whole;
    if (vocab_ignores_merges(c->v) && (whole = vocab_find(c->v, w, n)) >= 0)
        return push_id(c->out, whole);
    glesllm_status st = split_chars(&c->m, w, n);
    if (!st)
        st = merge_all(c);
    for (size_t i = 0; i < c->m.n_sym && !st; i++) {
        const symbol *sy = &c->m.sym[i];
        if (!sy->n)
            continue;
        int32_t id = vocab_find(c->v, w + sy->off, sy->n);
        if (id >= 0) {
            st = push_id(c->out, id);
            continue;
        }
        /* no token: its bytes that have one, as llama.cpp takes them; where
         * one has none, llama.cpp drops it, and here the text is refused
         * (a symbol left unmerged is one character: one byte of the text) */
        for (size_t j = 0; j < sy->n && !st; j++) {
            if ((id = vocab_find(c->v, w + sy->off + j, 1)) >= 0) {
                st = push_id(c->out, id);
                continue;
            }
            size_t at = 0;
            uint32_t cp = utf8_next(w + sy->off, sy->n, &at);
            int b = gpt2_cp_to_byte(cp);
            char what[32];
            if (b >= 0)
                snprintf(what, sizeof what, "byte 0x%02X", b);
            else
                snprintf(what, sizeof what, "character U+%04X", (unsigned)cp);
            st = err_set(GLESLLM_ERR_UNSUPPORTED,
                         "the text holds %s, which this vocabulary has no token for (llama.cpp "
                         "drops it): the text cannot be tokenized as it is",
                         what);
        }
    }
    return st;
}

static glesllm_status bpe_fragment(tok_ctx *c, const char *text, size_t n)
{
    /* well-formed UTF-8 first (the pre-tokenizer needs it): each invalid
     * byte becomes U+FFFD, as llama.cpp reads it */
    char *clean = malloc(3 * n + 1), *word = NULL;
    pretok_span *spans = NULL;
    size_t n_spans = 0, cap_spans = 0, cap_word = 0, m = 0;
    if (!clean)
        return no_memory();
    for (size_t i = 0; i < n;)
        m += utf8_put(utf8_next(text, n, &i), clean + m);
    glesllm_status st = pretok_split(vocab_pretok(c->v), clean, m, &spans, &n_spans, &cap_spans);
    char enc[256][2];
    unsigned char enc_len[256];
    for (int b = 0; b < 256; b++)
        enc_len[b] = (unsigned char)utf8_put(gpt2_byte_to_cp((unsigned char)b), enc[b]);
    for (size_t k = 0; k < n_spans && !st; k++) {
        const pretok_span *sp = &spans[k];
        if (!sp->len)
            continue;
        char *w = grow_array(word, &cap_word, 2 * sp->len, 1, 64);
        if (!w) {
            st = no_memory();
            break;
        }
        word = w;
        size_t wl = 0;
        for (size_t j = 0; j < sp->len; j++) {
            unsigned char b = (unsigned char)clean[sp->off + j];
            memcpy(word + wl, enc[b], enc_len[b]);
            wl += enc_len[b];
        }
        st = bpe_word(c, word, wl);
    }
    free(spans);
    free(word);
    free(clean);
    return st;
}

/* ---- special tokens, then the model ----------------------------------------- */

typedef struct fragment {
    int32_t token; /* -1: text */
    size_t off, len;
} fragment;

typedef struct fragments {
    fragment *f;
    size_t n, cap;
} fragments;

static glesllm_status frag_push(fragments *fs, fragment f)
{
    fragment *f2 = grow_array(fs->f, &fs->cap, fs->n + 1, sizeof *f2, 16);
    if (!f2)
        return no_memory();
    fs->f = f2;
    fs->f[fs->n++] = f;
    return GLESLLM_OK;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* First occurrence of t[0..tl) in s[0..n) (memmem is not in C11 or POSIX). */
static const char *find_bytes(const char *s, size_t n, const char *t, size_t tl)
{
    if (!tl || tl > n)
        return NULL;
    for (const char *p = s, *end = s + n - tl + 1; p < end; p++) {
        p = memchr(p, t[0], (size_t)(end - p));
        if (!p)
            return NULL;
        if (memcmp(p, t, tl) == 0)
            return p;
    }
    return NULL;
}

/* Cuts every occurrence of special token id out of the text fragments of
 * *fs (longer tokens were cut before). */
static glesllm_status cut_special(const vocab *v, const char *text, int32_t id, fragments *fs,
                                  fragments *tmp)
{
    size_t tl;
    const char *t = vocab_text(v, id, &tl);
    bool lstrip = vocab_lstrip(v, id), rstrip = vocab_rstrip(v, id), found = false;
    for (size_t i = 0; i < fs->n && !found; i++)
        found = fs->f[i].token < 0 && find_bytes(text + fs->f[i].off, fs->f[i].len, t, tl);
    if (!found)
        return GLESLLM_OK;
    tmp->n = 0;
    glesllm_status st = GLESLLM_OK;
    for (size_t i = 0; i < fs->n && !st; i++) {
        fragment f = fs->f[i];
        if (f.token >= 0) {
            st = frag_push(tmp, f);
            continue;
        }
        size_t at = f.off, end = f.off + f.len;
        while (at < end && !st) {
            const char *hit = find_bytes(text + at, end - at, t, tl);
            if (!hit) {
                st = frag_push(tmp, (fragment){ -1, at, end - at });
                break;
            }
            size_t h = (size_t)(hit - text), left = h - at;
            if (lstrip)
                while (left > 0 && is_space(text[at + left - 1]))
                    left--;
            if (left)
                st = frag_push(tmp, (fragment){ -1, at, left });
            if (!st)
                st = frag_push(tmp, (fragment){ id, h, tl });
            at = h + tl;
            if (rstrip)
                while (at < end && is_space(text[at]))
                    at++;
        }
    }
    fragments swap = *fs;
    *fs = *tmp;
    *tmp = swap;
    return st;
}

/* RWKV World: the longest token at each point, as llama.cpp's trie walk
 * finds it; a byte no token begins with is the unknown token, where the
 * vocabulary has one. */
static glesllm_status rwkv_fragment(const vocab *v, const char *s, size_t n, tok_ids *out)
{
    glesllm_status st = GLESLLM_OK;
    for (size_t i = 0; i < n && !st;) {
        size_t len;
        int32_t id = vocab_longest_bytes(v, s + i, n - i, &len);
        if (id < 0) {
            if (vocab_unk(v) < 0)
                return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                               "byte 0x%02x of the text has no token in this RWKV vocabulary, "
                               "which has no unknown token either", (unsigned char)s[i]);
            id = vocab_unk(v);
            len = 1;
        }
        st = push_id(out, id);
        i += len;
    }
    return st;
}

glesllm_status tok_encode(const vocab *v, const char *text, size_t n, unsigned flags, tok_ids *out)
{
    fragments fs = { 0 }, tmp = { 0 };
    tok_ctx c = { .v = v, .out = out };
    char *buf = NULL;
    size_t cap = 0;
    glesllm_status st = GLESLLM_OK;
    if (n)
        st = frag_push(&fs, (fragment){ -1, 0, n });
    size_t n_special;
    const int32_t *special = vocab_specials(v, &n_special);
    for (size_t i = 0; i < n_special && fs.n && !st; i++)
        if ((flags & TOK_PARSE_SPECIAL) || vocab_type(v, special[i]) == TOKEN_USER_DEFINED)
            st = cut_special(v, text, special[i], &fs, &tmp);

    bool add = flags & TOK_ADD_SPECIAL, prev_special = true;
    if (!st && add && vocab_adds_bos(v))
        st = push_id(out, vocab_bos(v));
    for (size_t i = 0; i < fs.n && !st; i++) {
        const fragment *f = &fs.f[i];
        if (f->token >= 0) {
            st = push_id(out, f->token);
            prev_special = true;
        } else if (vocab_kind_of(v) == VOCAB_SPM) {
            st = spm_fragment(&c, &buf, &cap, text + f->off, f->len,
                              vocab_adds_space_prefix(v) && prev_special);
            prev_special = false;
        } else if (vocab_kind_of(v) == VOCAB_RWKV) {
            st = rwkv_fragment(v, text + f->off, f->len, out);
        } else {
            st = bpe_fragment(&c, text + f->off, f->len);
        }
    }
    if (!st && add && vocab_adds_eos(v))
        st = push_id(out, vocab_eos(v));
    free(buf);
    free(fs.f);
    free(tmp.f);
    free(c.m.sym);
    free(c.m.heap);
    return st;
}

/* ---- decoding ------------------------------------------------------------------ */

/* llama.cpp's clean-up of BPE text: no space before ? ! . , ; " ' " loses
 * both spaces; no space before 's 'm 're 've. */
static size_t clean_spaces(char *s, size_t n)
{
    size_t t = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            t--;
        s[t++] = x;
    }
    n = t;
    t = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
            t--;
            s[++i] = 0; /* the next space goes too, and is no space to what follows */
        }
        s[t++] = x;
    }
    n = t;
    t = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1], x2 = i + 2 < n ? s[i + 2] : 0;
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))
                t--;
        }
        s[t++] = x;
    }
    return t;
}

glesllm_status tok_decode(const vocab *v, const int32_t *ids, size_t n, unsigned flags, char **text,
                          size_t *len)
{
    *text = NULL;
    *len = 0;
    if ((flags & TOK_REMOVE_SPECIAL) && n && vocab_adds_bos(v) && ids[0] == vocab_bos(v)) {
        ids++;
        n--;
    }
    if ((flags & TOK_REMOVE_SPECIAL) && n && vocab_adds_eos(v) && ids[n - 1] == vocab_eos(v))
        n--;
    bool special = flags & TOK_UNPARSE_SPECIAL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += vocab_piece(v, ids[i], special, NULL, 0);
    char *s = malloc(total + 1);
    if (!s)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for %zu bytes of text", total);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = vocab_piece(v, ids[i], special, s + o, total - o);
        if (i == 0 && k && s[o] == ' ' && vocab_kind_of(v) == VOCAB_SPM && vocab_adds_space_prefix(v)) {
            memmove(s + o, s + o + 1, k - 1); /* the space the encoder put in front */
            k--;
        }
        o += k;
    }
    if (vocab_cleans_spaces(v))
        o = clean_spaces(s, o);
    s[o] = 0;
    *text = s;
    *len = o;
    return GLESLLM_OK;
}
