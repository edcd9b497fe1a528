/* The GGUF writer: version 3, metadata in the order given, tensor data
 * aligned to general.alignment (default 32) with each tensor padded, as
 * llama.cpp writes files. Output goes to a temporary file renamed at the end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/tmp_files.h"
#include "gguf/gguf.h"

typedef struct wkv {
    char *key;
    gguf_type type;
    uint8_t *raw;
    uint64_t raw_len;
} wkv;

typedef struct wtensor {
    char name[GGUF_MAX_NAME];
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t size;
    const void *data;
    gguf_fill_fn fill;
    void *fill_ctx;
} wtensor;

struct gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

glesllm_status gguf_writer_create(gguf_writer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? GLESLLM_OK : err_set(GLESLLM_ERR_NO_MEMORY, "out of memory creating a GGUF writer");
}

void gguf_writer_destroy(gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].raw);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

glesllm_status gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *raw,
                                   uint64_t raw_len)
{
    if ((unsigned)type >= GGUF_TYPE_COUNT || !key || !*key)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: bad key or value type %u", type);
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: key '%s' set twice", key);
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv)
            return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
        w->kv = kv;
        w->cap_kv = cap;
    }
    wkv *kv = &w->kv[w->n_kv];
    kv->key = strdup(key);
    kv->raw = malloc(raw_len ? (size_t)raw_len : 1);
    if (!kv->key || !kv->raw) {
        free(kv->key);
        free(kv->raw);
        return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
    }
    if (raw_len)
        memcpy(kv->raw, raw, (size_t)raw_len);
    kv->type = type;
    kv->raw_len = raw_len;
    w->n_kv++;
    return GLESLLM_OK;
}

static glesllm_status set_scalar(gguf_writer *w, const char *key, gguf_type type, uint64_t bits, int n)
{
    uint8_t b[8];
    put_le(b, bits, n);
    return gguf_writer_set_raw(w, key, type, b, (uint64_t)n);
}

glesllm_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, GGUF_TYPE_UINT32, v, 4);
}
glesllm_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, GGUF_TYPE_INT32, (uint32_t)v, 4);
}
glesllm_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v)
{
    return set_scalar(w, key, GGUF_TYPE_UINT64, v, 8);
}
glesllm_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return set_scalar(w, key, GGUF_TYPE_FLOAT32, bits, 4);
}
glesllm_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v)
{
    return set_scalar(w, key, GGUF_TYPE_BOOL, v ? 1 : 0, 1);
}

glesllm_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v)
{
    size_t n = strlen(v);
    uint8_t *raw = malloc(8 + n);
    if (!raw)
        return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
    put_le(raw, n, 8);
    memcpy(raw + 8, v, n);
    glesllm_status st = gguf_writer_set_raw(w, key, GGUF_TYPE_STRING, raw, 8 + n);
    free(raw);
    return st;
}

glesllm_status gguf_writer_set_array(gguf_writer *w, const char *key, gguf_type elem,
                                     const void *data, uint64_t count)
{
    int es = gguf_value_size(elem);
    if (!es)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "GGUF writer: set_array takes fixed-size elements, not %s", gguf_type_name(elem));
    uint64_t n = 12 + count * (uint64_t)es;
    uint8_t *raw = malloc((size_t)n);
    if (!raw)
        return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
    put_le(raw, elem, 4);
    put_le(raw + 4, count, 8);
    if (count)
        memcpy(raw + 12, data, (size_t)(count * (uint64_t)es)); /* host is little-endian */
    glesllm_status st = gguf_writer_set_raw(w, key, GGUF_TYPE_ARRAY, raw, n);
    free(raw);
    return st;
}

glesllm_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *strs,
                                         uint64_t count)
{
    uint64_t n = 12;
    for (uint64_t i = 0; i < count; i++)
        n += 8 + strlen(strs[i]);
    uint8_t *raw = malloc((size_t)n), *p = raw;
    if (!raw)
        return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
    put_le(p, GGUF_TYPE_STRING, 4);
    put_le(p + 4, count, 8);
    p += 12;
    for (uint64_t i = 0; i < count; i++) {
        size_t len = strlen(strs[i]);
        put_le(p, len, 8);
        memcpy(p + 8, strs[i], len);
        p += 8 + len;
    }
    glesllm_status st = gguf_writer_set_raw(w, key, GGUF_TYPE_ARRAY, raw, n);
    free(raw);
    return st;
}

static glesllm_status add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                 const uint64_t *ne, const void *data, gguf_fill_fn fill, void *ctx)
{
    if (!name || !*name || strlen(name) >= GGUF_MAX_NAME)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: tensor name must be 1 to %d bytes",
                       GGUF_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' added twice", name);
    uint64_t size;
    glesllm_status st = ggml_tensor_bytes(type, n_dims, ne, &size);
    if (st != GLESLLM_OK)
        return err_prefix(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s': ", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t)
            return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->size = size;
    t->data = data;
    t->fill = fill;
    t->fill_ctx = ctx;
    return GLESLLM_OK;
}

glesllm_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *ne, const void *data)
{
    if (!data)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' without data", name);
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

glesllm_status gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, uint32_t type,
                                           uint32_t n_dims, const uint64_t *ne, gguf_fill_fn fill,
                                           void *fill_ctx)
{
    if (!fill)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' without a fill", name);
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, fill_ctx);
}

/* ---- output ------------------------------------------------------------------ */

static uint32_t writer_alignment(const gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0 && w->kv[i].type == GGUF_TYPE_UINT32 &&
            w->kv[i].raw_len == 4) {
            uint32_t a = (uint32_t)(w->kv[i].raw[0] | w->kv[i].raw[1] << 8 | w->kv[i].raw[2] << 16 |
                                    (uint32_t)w->kv[i].raw[3] << 24);
            if (a && !(a & (a - 1)))
                return a;
        }
    return GGUF_DEFAULT_ALIGNMENT;
}

static bool put(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

static bool put_u(FILE *f, uint64_t v, int n)
{
    uint8_t b[8];
    put_le(b, v, n);
    return put(f, b, (size_t)n);
}

static bool pad(FILE *f, uint64_t *pos, uint32_t align)
{
    static const uint8_t zeros[256];
    uint64_t n = (align - *pos % align) % align;
    *pos += n;
    while (n) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        if (!put(f, zeros, k))
            return false;
        n -= k;
    }
    return true;
}

/* *fill_st: GLESLLM_OK, or a tensor fill's failure (its error is set) */
static bool write_all(gguf_writer *w, FILE *f, glesllm_status *fill_st)
{
    *fill_st = GLESLLM_OK;
    uint32_t align = writer_alignment(w);
    bool ok = put_u(f, GGUF_MAGIC, 4) && put_u(f, 3, 4) && put_u(f, w->n_t, 8) && put_u(f, w->n_kv, 8);
    uint64_t pos = 24;
    for (size_t i = 0; ok && i < w->n_kv; i++) {
        size_t klen = strlen(w->kv[i].key);
        ok = put_u(f, klen, 8) && put(f, w->kv[i].key, klen) && put_u(f, w->kv[i].type, 4) &&
             put(f, w->kv[i].raw, (size_t)w->kv[i].raw_len);
        pos += 8 + klen + 4 + w->kv[i].raw_len;
    }
    uint64_t offset = 0;
    for (size_t i = 0; ok && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        size_t nlen = strlen(t->name);
        ok = put_u(f, nlen, 8) && put(f, t->name, nlen) && put_u(f, t->n_dims, 4);
        for (uint32_t d = 0; ok && d < t->n_dims; d++)
            ok = put_u(f, t->ne[d], 8);
        ok = ok && put_u(f, t->type, 4) && put_u(f, offset, 8);
        pos += 8 + nlen + 4 + 8ull * t->n_dims + 4 + 8;
        offset += (t->size + align - 1) / align * align;
    }
    if (w->n_t) /* as llama.cpp: a file without tensors ends after its metadata */
        ok = ok && pad(f, &pos, align);
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = NULL;
    for (size_t i = 0; ok && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->data) {
            ok = put(f, t->data, (size_t)t->size);
        } else {
            if (!buf && !(buf = malloc(CHUNK)))
                ok = false;
            for (uint64_t off = 0; ok && off < t->size; off += CHUNK) {
                size_t n = t->size - off < CHUNK ? (size_t)(t->size - off) : CHUNK;
                if ((*fill_st = t->fill(t->fill_ctx, buf, off, n)) != GLESLLM_OK) {
                    ok = false;
                    break;
                }
                ok = put(f, buf, n);
            }
        }
        pos += t->size;
        ok = ok && pad(f, &pos, align);
    }
    free(buf);
    return ok;
}

glesllm_status gguf_writer_write(gguf_writer *w, const char *path)
{
    char tmp[4096];
    glesllm_status st = tmp_name(path, tmp, sizeof tmp);
    if (st)
        return st;
    tmp_sweep(path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return err_set(GLESLLM_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    glesllm_status fill_st;
    bool ok = write_all(w, f, &fill_st);
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        if (fill_st != GLESLLM_OK)
            return err_prefix(fill_st, "%s: ", path);
        return err_set(GLESLLM_ERR_IO, "%s: write failed: %s", path, strerror(saved));
    }
    if (rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        return err_set(GLESLLM_ERR_IO, "%s: cannot rename the finished file into place: %s", path,
                       strerror(saved));
    }
    return GLESLLM_OK;
}

glesllm_status gguf_writer_write_memory(gguf_writer *w, uint8_t **data, size_t *size)
{
    char *p = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&p, &n);
    if (!f)
        return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
    glesllm_status fill_st;
    bool ok = write_all(w, f, &fill_st);
    if (fclose(f) != 0)
        ok = false;
    if (!ok) {
        free(p);
        if (fill_st != GLESLLM_OK)
            return fill_st;
        return err_set(GLESLLM_ERR_NO_MEMORY, "GGUF writer: out of memory");
    }
    *data = (uint8_t *)p;
    *size = n;
    return GLESLLM_OK;
}
