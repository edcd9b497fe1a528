/* A byte-level GGUF builder for tests that need files the writer refuses to
 * make: wrong counts, bad type ids, lengths near 2^64, truncations. */
#ifndef GLESLLM_TEST_GGUF_BYTES_H
#define GLESLLM_TEST_GGUF_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static inline void b_add(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void b_u32(bytes *b, uint32_t v)
{
    uint8_t t[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    b_add(b, t, 4);
}

static inline void b_u64(bytes *b, uint64_t v)
{
    b_u32(b, (uint32_t)v);
    b_u32(b, (uint32_t)(v >> 32));
}

static inline void b_str(bytes *b, const char *s)
{
    b_u64(b, strlen(s));
    b_add(b, s, strlen(s));
}

static inline void b_header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b_u32(b, 0x46554747u);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}

/* A tensor info: name, dims, type, offset. */
static inline void b_tensor(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                            uint32_t type, uint64_t offset)
{
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        b_u64(b, ne[i]);
    b_u32(b, type);
    b_u64(b, offset);
}

static inline void b_pad(bytes *b, size_t align)
{
    static const uint8_t z[256];
    b_add(b, z, (align - b->n % align) % align);
}

#endif
