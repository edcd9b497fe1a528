/* Session files. See session.h. */
#include "model/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/tmp_files.h"
#include "common/util.h"

static const char MAGIC[8] = "GLESKVC";

typedef struct session_header {
    uint32_t version, n_layer, n_head_kv, head_dim, n_vocab;
    uint64_t fingerprint;
    uint32_t n_tokens;
    uint32_t window_from; /* version 3 */
} session_header;

#define HEADER_BYTES (8 + 5 * 4 + 8 + 4 + 4)

static uint32_t header_bytes(const session_header *h)
{
    return h->version >= 3 ? HEADER_BYTES : HEADER_BYTES - 4;
}

/* Shapes and types of every tensor and samples of its bytes (start, middle,
 * end): a different model or another quantization of it gives another value. */
static uint64_t tensor_print(uint64_t h, const model_tensor *t)
{
    if (!t->data)
        return fnv1a(h, "-", 1);
    uint64_t dims[3] = { t->type, t->rows, t->cols };
    h = fnv1a(h, dims, sizeof dims);
    uint64_t bytes = model_tensor_bytes(t), take = bytes < 64 ? bytes : 64;
    const unsigned char *d = t->data;
    h = fnv1a(h, d, take);
    h = fnv1a(h, d + bytes / 2 - (bytes / 2 < take ? bytes / 2 : take / 2), take);
    return fnv1a(h, d + bytes - take, take);
}

static uint64_t model_fingerprint(const model *m)
{
    const model_hparams *hp = &m->hp;
    uint64_t h = FNV1A_SEED;
    uint32_t shape[] = { hp->arch, hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv,
                         hp->head_dim, hp->n_vocab };
    float f[] = { hp->eps, hp->rope_base, hp->rope_scale };
    h = fnv1a(h, shape, sizeof shape);
    h = fnv1a(h, f, sizeof f);
    h = tensor_print(h, &m->tok_embd);
    h = tensor_print(h, &m->output);
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        const model_layer *l = &m->layers[i];
        const model_tensor *ts[] = { &l->wq, &l->wk, &l->wv, &l->wo, &l->gate, &l->up, &l->down };
        const model_tensor *ssm[] = { &l->ssm_in, &l->ssm_x, &l->ssm_dt, &l->ssm_a, &l->ssm_out };
        for (size_t k = 0; !hp->ssm && k < sizeof ts / sizeof ts[0]; k++)
            h = tensor_print(h, ts[k]);
        for (size_t k = 0; hp->ssm && k < sizeof ssm / sizeof ssm[0]; k++)
            h = tensor_print(h, ssm[k]);
    }
    return h;
}

/* The checksum over the file: FNV-1a's step on 32-bit words (every part of
 * the file is whole words), fast enough to check a cache of hundreds of MB
 * on every load. */
static uint64_t sum_words(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t w = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 |
                     (uint32_t)p[i + 3] << 24;
        h = (h ^ w) * 0x100000001b3ull;
    }
    return h;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static session_header header_of(const gpu_model *gm, uint32_t n)
{
    const model *m = gpu_model_model(gm);
    uint32_t ring, used;
    gpu_model_kv_ring(gm, &ring, &used);
    session_header h = { ring ? 3 : 2, m->hp.n_layer, m->hp.n_head_kv, m->hp.head_dim,
                         m->hp.n_vocab, model_fingerprint(m), n, 0 };
    return h;
}

static void encode_header(const session_header *h, unsigned char *b)
{
    memcpy(b, MAGIC, 8);
    uint32_t v[5] = { h->version, h->n_layer, h->n_head_kv, h->head_dim, h->n_vocab };
    for (int i = 0; i < 5; i++)
        put32(b + 8 + 4 * i, v[i]);
    put32(b + 28, (uint32_t)h->fingerprint);
    put32(b + 32, (uint32_t)(h->fingerprint >> 32));
    put32(b + 36, h->n_tokens);
    if (h->version >= 3)
        put32(b + 40, h->window_from);
}

/* bytes of one layer's K (or V) for one position */
static size_t kv_row(const session_header *h) { return (size_t)h->n_head_kv * h->head_dim * 2; }

static bool write_body(gpu_model *gm, FILE *f, session_header *h, const int32_t *tokens,
                       glesllm_status *st)
{
    unsigned char b[HEADER_BYTES];
    /* (the ring made to hold its last positions first: a rollback may
     * have lost them) */
    if (h->version >= 3 && (*st = gpu_model_ring_held(gm, &h->window_from)))
        return false;
    if (h->window_from > h->n_tokens)
        h->window_from = h->n_tokens;
    encode_header(h, b);
    uint32_t hb = header_bytes(h);
    if (fwrite(b, 1, hb, f) != hb)
        return false;
    uint64_t sum = sum_words(FNV1A_SEED, b, hb);
    for (uint32_t i = 0; i < h->n_tokens; i++) {
        put32(b, (uint32_t)tokens[i]);
        sum = sum_words(sum, b, 4);
        if (fwrite(b, 1, 4, f) != 4)
            return false;
    }
    size_t bytes = kv_row(h) * h->n_tokens;
    /* each layer's K and V, or its recurrent states after the tokens */
    uint64_t sb = gpu_model_state_bytes(gm);
    const model *m = gpu_model_model(gm);
    size_t room = 2 * bytes > sb ? 2 * bytes : (size_t)sb;
    unsigned char *k = malloc(room ? room : 1);
    if (!k) {
        *st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading the cache");
        return false;
    }
    bool ok = true;
    for (uint32_t l = 0; ok && l < h->n_layer; l++) {
        bool rec = m->layers[l].recurrent;
        size_t n = rec ? (h->n_tokens ? (size_t)sb : 0) : 2 * bytes;
        if (rec && n)
            *st = gpu_model_state_io(gm, l, h->n_tokens, k, false);
        else if (!rec)
            *st = gpu_model_kv_io(gm, l, 0, h->n_tokens, k, k + bytes, false);
        if (*st)
            ok = false;
        else {
            sum = sum_words(sum, k, n);
            ok = fwrite(k, 1, n, f) == n;
        }
    }
    free(k);
    put32(b, (uint32_t)sum);
    put32(b + 4, (uint32_t)(sum >> 32));
    return ok && fwrite(b, 1, 8, f) == 8;
}

glesllm_status session_save(gpu_model *gm, const char *path, const int32_t *tokens, uint32_t n)
{
    if (n > gpu_model_n_past(gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "saving %u positions of a cache that holds %u", n, gpu_model_n_past(gm));
    char tmp[4096];
    glesllm_status st = tmp_name(path, tmp, sizeof tmp);
    if (st)
        return st;
    tmp_sweep(path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return err_set(GLESLLM_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    session_header h = header_of(gm, n);
    st = GLESLLM_OK;
    bool ok = write_body(gm, f, &h, tokens, &st);
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        if (st)
            return err_prefix(st, "%s: ", path);
        return err_set(GLESLLM_ERR_IO, "%s: writing the session file failed: %s", path,
                       strerror(saved));
    }
    return GLESLLM_OK;
}

static glesllm_status read_header(FILE *f, const char *path, session_header *h, long *size)
{
    unsigned char b[HEADER_BYTES];
    if (fseek(f, 0, SEEK_END) != 0 || (*size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        return err_set(GLESLLM_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (fread(b, 1, HEADER_BYTES - 4, f) != HEADER_BYTES - 4 || memcmp(b, MAGIC, 8) != 0)
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s is not a glesllm session file; delete it or give another path", path);
    h->version = get32(b + 8);
    h->n_layer = get32(b + 12);
    h->n_head_kv = get32(b + 16);
    h->head_dim = get32(b + 20);
    h->n_vocab = get32(b + 24);
    h->fingerprint = get32(b + 28) | (uint64_t)get32(b + 32) << 32;
    h->n_tokens = get32(b + 36);
    if (h->version != 2 && h->version != SESSION_VERSION)
        return err_set(GLESLLM_ERR_STATE_MISMATCH,
                       "%s: session file version %u, this build reads 2 and %u; delete it (the "
                       "next run writes a new one)", path, h->version, SESSION_VERSION);
    h->window_from = 0;
    if (h->version >= 3) {
        if (fread(b + 40, 1, 4, f) != 4)
            return err_set(GLESLLM_ERR_STATE_MISMATCH, "%s: cut short in its header", path);
        h->window_from = get32(b + 40);
    }
    return GLESLLM_OK;
}

/* Whether the file's checksum (its last 8 bytes) is that of the size - 8
 * bytes before it. */
static glesllm_status check_sum(FILE *f, const char *path, long size)
{
    size_t chunk = 1 << 20;
    unsigned char *buf = malloc(chunk);
    if (!buf)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading %s", path);
    uint64_t sum = FNV1A_SEED, left = (uint64_t)size - 8;
    bool ok = fseek(f, 0, SEEK_SET) == 0;
    while (ok && left) {
        size_t n = left < chunk ? (size_t)left : chunk;
        ok = fread(buf, 1, n, f) == n;
        sum = sum_words(sum, buf, n);
        left -= n;
    }
    ok = ok && fread(buf, 1, 8, f) == 8;
    uint64_t want = ok ? get32(buf) | (uint64_t)get32(buf + 4) << 32 : 0;
    free(buf);
    if (!ok)
        return err_set(GLESLLM_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (sum != want)
        return err_set(GLESLLM_ERR_STATE_MISMATCH,
                       "%s is damaged (its checksum does not match its contents)", path);
    return GLESLLM_OK;
}

static glesllm_status load(gpu_model *gm, FILE *f, const char *path, const int32_t *want,
                           uint32_t n_want, uint32_t *n_loaded)
{
    session_header h = { 0 }, mine = header_of(gm, 0);
    long size = 0;
    glesllm_status st = read_header(f, path, &h, &size);
    if (st)
        return st;
    /* the size first (the checksum is read from the end), then the
     * checksum (a damaged header could pass for another model's) */
    size_t row = kv_row(&h);
    /* (a model with Mamba blocks: their layers' states after the tokens in
     * place of K and V) */
    uint64_t sb = gpu_model_state_bytes(gm);
    uint32_t n_rec = model_recurrent_layers(gpu_model_model(gm));
    if (!h.n_head_kv && !sb)
        return err_set(GLESLLM_ERR_STATE_MISMATCH,
                       "%s was written for another model (a recurrent one)", path);
    uint64_t states = h.n_tokens ? (uint64_t)n_rec * sb : 0;
    uint64_t expect = header_bytes(&h) + 4ull * h.n_tokens +
                      2ull * (h.n_layer - n_rec) * row * h.n_tokens + states + 8;
    if ((uint64_t)size != expect && h.fingerprint != mine.fingerprint)
        return err_set(GLESLLM_ERR_STATE_MISMATCH,
                       "%s was written for another model (or another quantization of it), or "
                       "is damaged", path);
    if ((uint64_t)size != expect)
        return err_set(GLESLLM_ERR_STATE_MISMATCH,
                       "%s: %ld bytes, but its header says %llu (cut short or damaged)", path,
                       size, (unsigned long long)expect);
    if ((st = check_sum(f, path, size)))
        return st;
    if (h.n_layer != mine.n_layer || h.n_head_kv != mine.n_head_kv ||
        h.head_dim != mine.head_dim || h.n_vocab != mine.n_vocab ||
        h.fingerprint != mine.fingerprint)
        return err_set(GLESLLM_ERR_STATE_MISMATCH,
                       "%s was written for another model (or another quantization of it)", path);
    if (fseek(f, (long)header_bytes(&h), SEEK_SET) != 0)
        return err_set(GLESLLM_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    /* the file's tokens, as far as they match want (want NULL: all), at most
     * the context's */
    uint32_t n = 0, n_vocab = h.n_vocab;
    uint32_t most = h.n_tokens < gpu_model_n_ctx(gm) ? h.n_tokens : gpu_model_n_ctx(gm);
    unsigned char b[4];
    if ((st = gpu_model_truncate(gm, 0)))
        return st;
    while (n < most && (!want || n < n_want) && fread(b, 1, 4, f) == 4) {
        int32_t tok = (int32_t)get32(b);
        if (tok < 0 || (uint32_t)tok >= n_vocab)
            return err_set(GLESLLM_ERR_STATE_MISMATCH, "%s: token %d at position %u is "
                           "outside the vocabulary (damaged)", path, tok, n);
        if (want && tok != want[n])
            break;
        if ((st = gpu_model_set_token(gm, n, tok)))
            return st;
        n++;
    }
    /* (the states after fewer tokens are not in the file; nor, before
     * window_from, the window layers' K/V, which a model without a ring
     * reads, and one with a ring where the next pass reads them) */
    if ((n_rec && n < h.n_tokens) || h.window_from > gpu_model_ring_reads(gm, n))
        n = 0;
    *n_loaded = n;
    if (!n)
        return GLESLLM_OK;
    size_t bytes = row * n;
    size_t room = 2 * bytes > sb ? 2 * bytes : (size_t)sb;
    unsigned char *k = malloc(room ? room : 1);
    if (!k)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading %s", path);
    long at = (long)(header_bytes(&h) + 4ull * h.n_tokens);
    for (uint32_t l = 0; !st && l < h.n_layer; l++) {
        if (gpu_model_model(gm)->layers[l].recurrent) {
            if (fseek(f, at, SEEK_SET) != 0 || fread(k, 1, (size_t)sb, f) != sb)
                st = err_set(GLESLLM_ERR_IO, "%s: cannot read layer %u's recurrent state", path,
                             l);
            else
                st = gpu_model_state_io(gm, l, n, k, true);
            at += (long)sb;
            continue;
        }
        if (fseek(f, at, SEEK_SET) != 0 || fread(k, 1, bytes, f) != bytes ||
            fseek(f, (long)(at + row * h.n_tokens), SEEK_SET) != 0 ||
            fread(k + bytes, 1, bytes, f) != bytes)
            st = err_set(GLESLLM_ERR_IO, "%s: cannot read layer %u's K/V", path, l);
        else
            st = gpu_model_kv_io(gm, l, 0, n, k, k + bytes, true);
        at += (long)(2 * row * h.n_tokens);
    }
    free(k);
    if (st)
        gpu_model_truncate(gm, 0);
    else /* (the zeros before it are no K/V) */
        gpu_model_ring_forget(gm, h.window_from);
    return st;
}

glesllm_status session_read(gpu_model *gm, FILE *f, const char *name, const int32_t *want,
                            uint32_t n_want, uint32_t *n_loaded)
{
    *n_loaded = 0;
    glesllm_status st = load(gm, f, name, want, n_want, n_loaded);
    if (st)
        *n_loaded = 0;
    return st;
}

glesllm_status session_load(gpu_model *gm, const char *path, const int32_t *want, uint32_t n_want,
                            uint32_t *n_loaded)
{
    *n_loaded = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(GLESLLM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    glesllm_status st = session_read(gm, f, path, want, n_want, n_loaded);
    fclose(f);
    return st;
}

uint64_t session_bytes(const gpu_model *gm, uint32_t n)
{
    session_header h = header_of(gm, n);
    uint32_t n_rec = model_recurrent_layers(gpu_model_model(gm));
    return header_bytes(&h) + 4ull * n + 2ull * (h.n_layer - n_rec) * kv_row(&h) * n +
           (n ? n_rec * gpu_model_state_bytes(gm) : 0) + 8;
}

glesllm_status session_write(gpu_model *gm, FILE *f, const int32_t *tokens, uint32_t n)
{
    if (n > gpu_model_n_past(gm))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "saving %u positions of a cache that holds %u", n, gpu_model_n_past(gm));
    session_header h = header_of(gm, n);
    glesllm_status st = GLESLLM_OK;
    if (!write_body(gm, f, &h, tokens, &st) && !st)
        st = err_set(GLESLLM_ERR_IO, "writing the state failed: %s", strerror(errno));
    return st;
}
