/* The GGUF reader. See gguf.h for the layout and the rules it enforces. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "gguf/gguf.h"

#define MAX_NESTING 8
#define MIN_KV_BYTES 13     /* u64 key length + u32 type + 1 value byte */
#define MIN_TENSOR_BYTES 32 /* u64 name length + u32 n_dims + u64 ne + u32 type + u64 offset */

struct gguf_file {
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t **tables; /* offset tables of string/array arrays, freed at close */
    uint64_t n_tables;
};

typedef struct cursor {
    const uint8_t *base;
    size_t size, pos;
} cursor;

static bool have(const cursor *c, uint64_t n) { return n <= (uint64_t)(c->size - c->pos); }

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static glesllm_status truncated(const cursor *c, const char *what)
{
    return err_set(GLESLLM_ERR_FORMAT,
                   "file is truncated: %s at byte %zu runs past the end of the file (%zu bytes)",
                   what, c->pos, c->size);
}

static glesllm_status rd(cursor *c, int n, uint64_t *v, const char *what)
{
    *v = 0;
    if (!have(c, (uint64_t)n))
        return truncated(c, what);
    *v = le(c->base + c->pos, n);
    c->pos += (size_t)n;
    return GLESLLM_OK;
}

static glesllm_status rd_str(cursor *c, gguf_str *s, const char *what)
{
    uint64_t len;
    s->data = "";
    s->len = 0;
    glesllm_status st = rd(c, 8, &len, what);
    if (st != GLESLLM_OK)
        return st;
    if (!have(c, len))
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s at byte %zu has length %llu, past the end of the file (%zu bytes left)",
                       what, c->pos - 8, (unsigned long long)len, c->size - c->pos);
    s->data = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return GLESLLM_OK;
}

#define fixed_size gguf_value_size

static bool is_signed(uint32_t t)
{
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

/* A little-endian two's-complement integer of n bytes, exactly (no double:
 * int64 values above 2^53 must survive). */
static int64_t sign_extend(uint64_t u, int n)
{
    if (n < 8 && (u >> (8 * n - 1)) & 1)
        u |= ~0ull << (8 * n);
    int64_t v;
    memcpy(&v, &u, 8);
    return v;
}

static double decode_number(uint32_t type, const uint8_t *p)
{
    int n = fixed_size(type);
    uint64_t u = le(p, n);
    if (type == GGUF_TYPE_FLOAT32) {
        uint32_t b = (uint32_t)u;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    if (type == GGUF_TYPE_FLOAT64) {
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    if (is_signed(type))
        return (double)sign_extend(u, n);
    return (double)u;
}

/* Validates and steps over one value of `type` without keeping it. */
static glesllm_status skip_value(cursor *c, uint32_t type, const char *key, int depth)
{
    if (depth > MAX_NESTING)
        return err_set(GLESLLM_ERR_FORMAT, "key '%s': arrays nested deeper than %d", key, MAX_NESTING);
    int n = fixed_size(type);
    if (n) {
        if (!have(c, (uint64_t)n))
            return truncated(c, "a metadata value");
        c->pos += (size_t)n;
        return GLESLLM_OK;
    }
    if (type == GGUF_TYPE_STRING) {
        gguf_str s;
        return rd_str(c, &s, "a string value");
    }
    if (type != GGUF_TYPE_ARRAY)
        return err_set(GLESLLM_ERR_FORMAT, "key '%s': unknown value type id %u at byte %zu", key,
                       type, c->pos);
    uint64_t elem, count;
    glesllm_status st = rd(c, 4, &elem, "an array's element type");
    if (st == GLESLLM_OK)
        st = rd(c, 8, &count, "an array's length");
    if (st != GLESLLM_OK)
        return st;
    if (elem >= GGUF_TYPE_COUNT)
        return err_set(GLESLLM_ERR_FORMAT, "key '%s': array of unknown element type id %llu", key,
                       (unsigned long long)elem);
    int es = fixed_size((uint32_t)elem);
    uint64_t min = es ? (uint64_t)es : (elem == GGUF_TYPE_STRING ? 8u : 12u);
    if (count > (uint64_t)(c->size - c->pos) / min)
        return err_set(GLESLLM_ERR_FORMAT,
                       "key '%s': array of %llu %s elements cannot fit in the %zu bytes left", key,
                       (unsigned long long)count, gguf_type_name((uint32_t)elem), c->size - c->pos);
    if (es) {
        c->pos += (size_t)(count * (uint64_t)es);
        return GLESLLM_OK;
    }
    for (uint64_t i = 0; i < count; i++)
        if ((st = skip_value(c, (uint32_t)elem, key, depth + 1)) != GLESLLM_OK)
            return st;
    return GLESLLM_OK;
}

static glesllm_status keep_table(gguf_file *f, uint64_t *table)
{
    uint64_t **t = realloc(f->tables, (size_t)(f->n_tables + 1) * sizeof *t);
    if (!t) {
        free(table);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading metadata");
    }
    f->tables = t;
    f->tables[f->n_tables++] = table;
    return GLESLLM_OK;
}

static glesllm_status parse_value(gguf_file *f, cursor *c, uint32_t type, gguf_value *out,
                                  const char *key)
{
    memset(out, 0, sizeof *out);
    out->type = (gguf_type)type;
    size_t start = c->pos;
    glesllm_status st = skip_value(c, type, key, 0);
    if (st != GLESLLM_OK)
        return st;
    const uint8_t *p = c->base + start;
    if (fixed_size(type)) {
        if (type == GGUF_TYPE_FLOAT32 || type == GGUF_TYPE_FLOAT64)
            out->v.f64 = decode_number(type, p);
        else if (type == GGUF_TYPE_BOOL)
            out->v.b = p[0] != 0;
        else if (is_signed(type))
            out->v.i64 = sign_extend(le(p, fixed_size(type)), fixed_size(type));
        else
            out->v.u64 = le(p, fixed_size(type));
        return GLESLLM_OK;
    }
    if (type == GGUF_TYPE_STRING) {
        out->v.str.len = le(p, 8);
        out->v.str.data = (const char *)p + 8;
        return GLESLLM_OK;
    }
    /* array: validated above; index variable-size elements */
    out->v.arr.type = (gguf_type)le(p, 4);
    out->v.arr.count = le(p + 4, 8);
    out->v.arr.data = p + 12;
    out->v.arr.bytes = (uint64_t)(c->pos - start - 12);
    if (fixed_size(out->v.arr.type) || out->v.arr.count == 0)
        return GLESLLM_OK;
    uint64_t *offsets = malloc((size_t)out->v.arr.count * sizeof *offsets);
    if (!offsets)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory indexing array '%s'", key);
    cursor sub = { c->base, c->pos, start + 12 };
    for (uint64_t i = 0; i < out->v.arr.count; i++) {
        offsets[i] = (uint64_t)(sub.pos - (start + 12));
        skip_value(&sub, out->v.arr.type, key, 1); /* already validated */
    }
    out->v.arr.offsets = offsets;
    return keep_table(f, offsets);
}

static int cmp_kv(const void *a, const void *b)
{
    const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
    uint64_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
    int r = memcmp(x->key.data, y->key.data, (size_t)n);
    return r ? r : (x->key.len > y->key.len) - (x->key.len < y->key.len);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static glesllm_status parse_header(gguf_file *f, cursor *c)
{
    if (c->size < 4)
        return err_set(GLESLLM_ERR_FORMAT, "not a GGUF file: only %zu bytes", c->size);
    uint64_t magic, version;
    rd(c, 4, &magic, "magic");
    if (magic != GGUF_MAGIC) {
        const uint8_t *m = c->base;
        return err_set(GLESLLM_ERR_FORMAT,
                       "not a GGUF file: it starts with bytes %02x %02x %02x %02x, not \"GGUF\"",
                       m[0], m[1], m[2], m[3]);
    }
    glesllm_status st = rd(c, 4, &version, "version");
    if (st != GLESLLM_OK)
        return st;
    if (version == 1)
        return err_set(GLESLLM_ERR_FORMAT, "GGUF version 1 is not supported; convert the model "
                                           "again with a current llama.cpp (versions 2 and 3 are read)");
    if (version != 0 && (version & 0xffff) == 0)
        return err_set(GLESLLM_ERR_FORMAT,
                       "big-endian GGUF file (version reads as 0x%08llx); only little-endian "
                       "files are supported",
                       (unsigned long long)version);
    if (version != 2 && version != 3)
        return err_set(GLESLLM_ERR_FORMAT, "unsupported GGUF version %llu (versions 2 and 3 are read)",
                       (unsigned long long)version);
    f->version = (uint32_t)version;
    if ((st = rd(c, 8, &f->n_tensors, "the tensor count")) != GLESLLM_OK ||
        (st = rd(c, 8, &f->n_kv, "the metadata count")) != GLESLLM_OK)
        return st;
    if (f->n_kv > (c->size - c->pos) / MIN_KV_BYTES)
        return err_set(GLESLLM_ERR_FORMAT,
                       "header claims %llu metadata entries, more than the %zu bytes of the file "
                       "can hold",
                       (unsigned long long)f->n_kv, c->size);
    if (f->n_tensors > (c->size - c->pos) / MIN_TENSOR_BYTES)
        return err_set(GLESLLM_ERR_FORMAT,
                       "header claims %llu tensors, more than the %zu bytes of the file can hold",
                       (unsigned long long)f->n_tensors, c->size);
    return GLESLLM_OK;
}

static glesllm_status parse_kvs(gguf_file *f, cursor *c)
{
    f->kv = calloc(f->n_kv ? (size_t)f->n_kv : 1, sizeof *f->kv);
    if (!f->kv)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading %llu metadata entries",
                       (unsigned long long)f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        uint64_t type;
        glesllm_status st = rd_str(c, &kv->key, "a metadata key");
        if (st != GLESLLM_OK)
            return err_prefix(st, "metadata entry %llu: ", (unsigned long long)i);
        char key[128];
        gguf_str_copy(kv->key, key, sizeof key);
        if (kv->key.len == 0)
            return err_set(GLESLLM_ERR_FORMAT, "metadata entry %llu has an empty key",
                           (unsigned long long)i);
        if ((st = rd(c, 4, &type, "a value type")) != GLESLLM_OK)
            return err_prefix(st, "key '%s': ", key);
        if (type >= GGUF_TYPE_COUNT)
            return err_set(GLESLLM_ERR_FORMAT, "key '%s': unknown value type id %llu", key,
                           (unsigned long long)type);
        kv->raw = c->base + c->pos;
        if ((st = parse_value(f, c, (uint32_t)type, &kv->value, key)) != GLESLLM_OK)
            return st;
        kv->raw_len = (uint64_t)(c->base + c->pos - kv->raw);
    }
    return GLESLLM_OK;
}

static glesllm_status parse_tensor_infos(gguf_file *f, cursor *c)
{
    f->tensors = calloc(f->n_tensors ? (size_t)f->n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading %llu tensor infos",
                       (unsigned long long)f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        gguf_str name;
        uint64_t n_dims, type;
        glesllm_status st = rd_str(c, &name, "a tensor name");
        if (st != GLESLLM_OK)
            return err_prefix(st, "tensor %llu: ", (unsigned long long)i);
        if (name.len == 0 || name.len >= GGUF_MAX_NAME || memchr(name.data, 0, (size_t)name.len))
            return err_set(GLESLLM_ERR_FORMAT,
                           "tensor %llu: name of %llu bytes (1 to %d without NUL bytes allowed)",
                           (unsigned long long)i, (unsigned long long)name.len, GGUF_MAX_NAME - 1);
        memcpy(t->name, name.data, (size_t)name.len);
        t->name[name.len] = '\0';
        if ((st = rd(c, 4, &n_dims, "the number of dimensions")) != GLESLLM_OK)
            return err_prefix(st, "tensor '%s': ", t->name);
        if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
            return err_set(GLESLLM_ERR_FORMAT, "tensor '%s' has %llu dimensions (1 to %d allowed)",
                           t->name, (unsigned long long)n_dims, GGUF_MAX_DIMS);
        t->n_dims = (uint32_t)n_dims;
        uint64_t elements = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d >= t->n_dims)
                continue;
            if ((st = rd(c, 8, &t->ne[d], "a dimension")) != GLESLLM_OK)
                return err_prefix(st, "tensor '%s': ", t->name);
            if (t->ne[d] > (uint64_t)INT64_MAX ||
                (t->ne[d] && elements > (uint64_t)INT64_MAX / t->ne[d]))
                return err_set(GLESLLM_ERR_FORMAT,
                               "tensor '%s': dimension %u (%llu) makes the element count "
                               "overflow",
                               t->name, d, (unsigned long long)t->ne[d]);
            elements *= t->ne[d];
        }
        t->n_elements = elements;
        if ((st = rd(c, 4, &type, "the tensor type")) != GLESLLM_OK ||
            (st = rd(c, 8, &t->offset, "the tensor offset")) != GLESLLM_OK)
            return err_prefix(st, "tensor '%s': ", t->name);
        if (!ggml_block_size((uint32_t)type) || type > UINT32_MAX)
            return err_set(GLESLLM_ERR_FORMAT, "tensor '%s' has unknown type id %llu", t->name,
                           (unsigned long long)type);
        t->type = (uint32_t)type;
        if ((st = ggml_tensor_bytes(t->type, t->n_dims, t->ne, &t->size)) != GLESLLM_OK)
            return err_prefix(st, "tensor '%s': ", t->name);
    }
    return GLESLLM_OK;
}

static glesllm_status check_unique(gguf_file *f)
{
    uint64_t n = f->n_kv > f->n_tensors ? f->n_kv : f->n_tensors;
    const void **idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory checking names");
    glesllm_status st = GLESLLM_OK;
    for (uint64_t i = 0; i < f->n_kv; i++)
        idx[i] = &f->kv[i];
    qsort(idx, (size_t)f->n_kv, sizeof *idx, cmp_kv);
    for (uint64_t i = 1; i < f->n_kv && st == GLESLLM_OK; i++)
        if (cmp_kv(&idx[i - 1], &idx[i]) == 0) {
            char key[128];
            st = err_set(GLESLLM_ERR_FORMAT, "duplicate metadata key '%s'",
                         gguf_str_copy(((const gguf_kv *)idx[i])->key, key, sizeof key));
        }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        idx[i] = &f->tensors[i];
    qsort(idx, (size_t)f->n_tensors, sizeof *idx, cmp_tensor_name);
    for (uint64_t i = 1; i < f->n_tensors && st == GLESLLM_OK; i++)
        if (cmp_tensor_name(&idx[i - 1], &idx[i]) == 0)
            st = err_set(GLESLLM_ERR_FORMAT, "duplicate tensor name '%s'",
                         ((const gguf_tensor *)idx[i])->name);
    free(idx);
    return st;
}

static glesllm_status place_data(gguf_file *f, cursor *c)
{
    const gguf_kv *a = gguf_find(f, "general.alignment");
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (a) {
        if (a->value.type != GGUF_TYPE_UINT32)
            return err_set(GLESLLM_ERR_FORMAT, "general.alignment must be a uint32, not %s",
                           gguf_type_name(a->value.type));
        uint64_t v = a->value.v.u64;
        if (v == 0 || (v & (v - 1)))
            return err_set(GLESLLM_ERR_FORMAT, "general.alignment is %llu; it must be a power of two",
                           (unsigned long long)v);
        f->alignment = (uint32_t)v;
    }
    uint64_t pos = c->pos, off = (pos + f->alignment - 1) / f->alignment * f->alignment;
    f->data_offset = off;
    if (f->n_tensors == 0)
        return GLESLLM_OK;
    if (off > c->size)
        return err_set(GLESLLM_ERR_FORMAT,
                       "the data section is missing: tensor data should start at byte %llu, but "
                       "the file ends at %zu",
                       (unsigned long long)off, c->size);
    uint64_t data_size = c->size - off;
    const gguf_tensor **idx = malloc((size_t)f->n_tensors * sizeof *idx);
    if (!idx)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory checking tensor offsets");
    glesllm_status st = GLESLLM_OK;
    for (uint64_t i = 0; i < f->n_tensors && st == GLESLLM_OK; i++) {
        gguf_tensor *t = &f->tensors[i];
        idx[i] = t;
        if (t->offset % f->alignment)
            st = err_set(GLESLLM_ERR_FORMAT, "tensor '%s' offset %llu is not a multiple of the "
                                             "alignment %u",
                         t->name, (unsigned long long)t->offset, f->alignment);
        else if (t->offset > data_size || t->size > data_size - t->offset)
            st = err_set(GLESLLM_ERR_FORMAT,
                         "tensor '%s' (%llu bytes at data offset %llu) runs past the end of the "
                         "file (%llu bytes of data); the file is truncated or corrupt",
                         t->name, (unsigned long long)t->size, (unsigned long long)t->offset,
                         (unsigned long long)data_size);
        else
            t->data = c->base + off + t->offset;
    }
    if (st == GLESLLM_OK) {
        qsort(idx, (size_t)f->n_tensors, sizeof *idx, cmp_tensor_offset);
        for (uint64_t i = 1; i < f->n_tensors && st == GLESLLM_OK; i++)
            if (idx[i - 1]->offset + idx[i - 1]->size > idx[i]->offset)
                st = err_set(GLESLLM_ERR_FORMAT, "tensors '%s' and '%s' overlap in the file",
                             idx[i - 1]->name, idx[i]->name);
    }
    free(idx);
    return st;
}

glesllm_status gguf_open_memory(const void *data, size_t size, gguf_file **out)
{
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory opening a GGUF file");
    f->base = data;
    f->size = size;
    cursor c = { data, size, 0 };
    glesllm_status st = parse_header(f, &c);
    if (st == GLESLLM_OK)
        st = parse_kvs(f, &c);
    if (st == GLESLLM_OK)
        st = parse_tensor_infos(f, &c);
    if (st == GLESLLM_OK)
        st = check_unique(f);
    if (st == GLESLLM_OK)
        st = place_data(f, &c);
    if (st != GLESLLM_OK) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return GLESLLM_OK;
}

glesllm_status gguf_open(const char *path, gguf_file **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(GLESLLM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(GLESLLM_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return err_set(GLESLLM_ERR_FORMAT, "%s: not a GGUF file: the file is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return err_set(GLESLLM_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    glesllm_status s = gguf_open_memory(p, (size_t)st.st_size, out);
    if (s != GLESLLM_OK) {
        munmap(p, (size_t)st.st_size);
        return err_prefix(s, "%s: ", path);
    }
    (*out)->mapped = true;
    return GLESLLM_OK;
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    for (uint64_t i = 0; i < f->n_tables; i++)
        free(f->tables[i]);
    free(f->tables);
    free(f->kv);
    free(f->tensors);
    if (f->mapped)
        munmap((void *)f->base, f->size);
    free(f);
}

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
uint64_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i) { return i < f->n_kv ? &f->kv[i] : NULL; }
uint64_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

bool gguf_str_eq(gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.data, c, n) == 0;
}

const char *gguf_str_copy(gguf_str s, char *buf, size_t n)
{
    size_t len = s.len < n - 1 ? (size_t)s.len : n - 1;
    memcpy(buf, s.data, len);
    buf[len] = '\0';
    return buf;
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key))
            return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

/* ---- typed accessors ------------------------------------------------------ */

static glesllm_status find_typed(const gguf_file *f, const char *key, const gguf_kv **kv)
{
    *kv = gguf_find(f, key);
    if (!*kv)
        return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' is missing", key);
    return GLESLLM_OK;
}

static glesllm_status wrong_type(const char *key, const char *want, uint32_t got)
{
    return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' holds a %s, not %s", key,
                   gguf_type_name(got), want);
}

/* Any integer value as (negative?, magnitude-preserving 64 bits). */
static glesllm_status get_integer(const gguf_file *f, const char *key, const gguf_kv **kv)
{
    glesllm_status st = find_typed(f, key, kv);
    if (st != GLESLLM_OK)
        return st;
    uint32_t t = (*kv)->value.type;
    if (!fixed_size(t) || t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64 || t == GGUF_TYPE_BOOL)
        return wrong_type(key, "an integer", t);
    return GLESLLM_OK;
}

glesllm_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out)
{
    const gguf_kv *kv;
    glesllm_status st = get_integer(f, key, &kv);
    if (st != GLESLLM_OK)
        return st;
    bool s = is_signed(kv->value.type);
    if (!s && kv->value.v.u64 > (uint64_t)INT64_MAX)
        return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' = %llu does not fit an int64", key,
                       (unsigned long long)kv->value.v.u64);
    *out = s ? kv->value.v.i64 : (int64_t)kv->value.v.u64;
    return GLESLLM_OK;
}

glesllm_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out)
{
    const gguf_kv *kv;
    glesllm_status st = get_integer(f, key, &kv);
    if (st != GLESLLM_OK)
        return st;
    bool s = is_signed(kv->value.type);
    if (s && kv->value.v.i64 < 0)
        return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' = %lld is negative", key,
                       (long long)kv->value.v.i64);
    *out = s ? (uint64_t)kv->value.v.i64 : kv->value.v.u64;
    return GLESLLM_OK;
}

glesllm_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out)
{
    uint64_t v;
    glesllm_status st = gguf_get_u64(f, key, &v);
    if (st != GLESLLM_OK)
        return st;
    if (v > UINT32_MAX)
        return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' = %llu does not fit 32 bits", key,
                       (unsigned long long)v);
    *out = (uint32_t)v;
    return GLESLLM_OK;
}

uint32_t gguf_get_arch_u32(const gguf_file *f, const char *arch, const char *suffix,
                           uint32_t def)
{
    char key[192];
    uint32_t v = def;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_find(f, key) && gguf_get_u32(f, key, &v) == GLESLLM_OK ? v : def;
}

glesllm_status gguf_get_f32(const gguf_file *f, const char *key, float *out)
{
    const gguf_kv *kv;
    glesllm_status st = find_typed(f, key, &kv);
    if (st != GLESLLM_OK)
        return st;
    if (kv->value.type != GGUF_TYPE_FLOAT32 && kv->value.type != GGUF_TYPE_FLOAT64)
        return wrong_type(key, "a float", kv->value.type);
    double d = kv->value.v.f64;
    if (isfinite(d) && fabs(d) > FLT_MAX)
        return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' = %g does not fit a 32-bit float", key, d);
    *out = (float)d;
    return GLESLLM_OK;
}

/* The entry for key when it holds exactly `type`. */
static glesllm_status find_of_type(const gguf_file *f, const char *key, gguf_type type,
                                   const char *want, const gguf_kv **kv)
{
    glesllm_status st = find_typed(f, key, kv);
    if (st == GLESLLM_OK && (*kv)->value.type != type)
        return wrong_type(key, want, (*kv)->value.type);
    return st;
}

int32_t gguf_get_id_or_none(const gguf_file *f, const char *key)
{
    uint32_t v = 0;
    if (gguf_find(f, key) && gguf_get_u32(f, key, &v) == GLESLLM_OK && v <= INT32_MAX)
        return (int32_t)v;
    return -1;
}

glesllm_status gguf_get_bool(const gguf_file *f, const char *key, bool *out)
{
    const gguf_kv *kv;
    glesllm_status st = find_of_type(f, key, GGUF_TYPE_BOOL, "a bool", &kv);
    if (st == GLESLLM_OK)
        *out = kv->value.v.b;
    return st;
}

glesllm_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out)
{
    const gguf_kv *kv;
    glesllm_status st = find_of_type(f, key, GGUF_TYPE_STRING, "a string", &kv);
    if (st == GLESLLM_OK)
        *out = kv->value.v.str;
    return st;
}

glesllm_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem,
                              const gguf_value **out)
{
    const gguf_kv *kv;
    glesllm_status st = find_of_type(f, key, GGUF_TYPE_ARRAY, "an array", &kv);
    if (st != GLESLLM_OK)
        return st;
    if (elem != GGUF_TYPE_COUNT && kv->value.v.arr.type != elem)
        return err_set(GLESLLM_ERR_FORMAT, "metadata key '%s' is an array of %s, not of %s", key,
                       gguf_type_name(kv->value.v.arr.type), gguf_type_name(elem));
    *out = &kv->value;
    return GLESLLM_OK;
}

/* Offset of element i of a validated variable-size array. */
static uint64_t element_offset(const gguf_value *arr, uint64_t i)
{
    if (arr->v.arr.offsets)
        return arr->v.arr.offsets[i];
    cursor c = { arr->v.arr.data, (size_t)arr->v.arr.bytes, 0 };
    for (uint64_t k = 0; k < i; k++)
        skip_value(&c, arr->v.arr.type, "", 1);
    return c.pos;
}

gguf_str gguf_array_string(const gguf_value *arr, uint64_t i)
{
    gguf_str s = { "", 0 };
    if (arr->type != GGUF_TYPE_ARRAY || arr->v.arr.type != GGUF_TYPE_STRING || i >= arr->v.arr.count)
        return s;
    const uint8_t *p = arr->v.arr.data + element_offset(arr, i);
    s.len = le(p, 8);
    s.data = (const char *)p + 8;
    return s;
}

gguf_value gguf_array_array(const gguf_value *arr, uint64_t i)
{
    gguf_value v;
    memset(&v, 0, sizeof v);
    if (arr->type != GGUF_TYPE_ARRAY || arr->v.arr.type != GGUF_TYPE_ARRAY || i >= arr->v.arr.count)
        return v;
    const uint8_t *p = arr->v.arr.data + element_offset(arr, i);
    uint64_t next = i + 1 < arr->v.arr.count ? element_offset(arr, i + 1) : arr->v.arr.bytes;
    v.type = GGUF_TYPE_ARRAY;
    v.v.arr.type = (gguf_type)le(p, 4);
    v.v.arr.count = le(p + 4, 8);
    v.v.arr.data = p + 12;
    v.v.arr.bytes = (uint64_t)(arr->v.arr.data + next - (p + 12));
    return v;
}

double gguf_array_number(const gguf_value *arr, uint64_t i)
{
    if (arr->type != GGUF_TYPE_ARRAY || i >= arr->v.arr.count)
        return 0.0;
    int n = fixed_size(arr->v.arr.type);
    if (!n)
        return 0.0;
    return decode_number(arr->v.arr.type, arr->v.arr.data + i * (uint64_t)n);
}
