/* gguf/: the GGUF file format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
 *
 * Reader: over a read-only mmap (or a caller's memory). Every count, length,
 * offset and dimension is checked against the bytes left and for overflow
 * before use; nothing in a file reaches an assert. Errors name the key or
 * tensor and the byte offset. Tensor data is never touched by gguf_open:
 * it stays in the mapping until a caller reads it.
 *
 * Writer: builds a file in memory order (header, metadata, tensor infos,
 * aligned data) the way llama.cpp lays it out, to a temporary file renamed
 * at the end, so an interrupted write leaves no partial file.
 *
 * Layout of a file (little-endian):
 *   u32 magic "GGUF" | u32 version (2, 3) | u64 n_tensors | u64 n_kv
 *   n_kv x { str key | u32 type | value }          str = u64 len + bytes
 *   n_tensors x { str name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to general.alignment (default 32) | tensor data (offsets relative here)
 */
#ifndef GLESLLM_GGUF_H
#define GLESLLM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glesllm.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64 /* tensor names are shorter than this (as ggml) */

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* ggml tensor types, by their stable ids in GGUF files. */
typedef enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_MAX_ID = 40
} ggml_type;

/* Name ("Q4_K"), elements per block and bytes per block; NULL/0 for an id
 * that is not a known type. */
const char *ggml_type_name(uint32_t type);
uint32_t ggml_block_size(uint32_t type);
uint32_t ggml_type_size(uint32_t type);
/* The id of a name ("q4_k" or "Q4_K"), or -1. */
int ggml_type_from_name(const char *name);
const char *gguf_type_name(uint32_t type);
/* Bytes of a fixed-size value type; 0 for string, array and unknown ids. */
int gguf_value_size(uint32_t type);

typedef struct gguf_str {
    const char *data; /* not NUL-terminated: inside the file */
    uint64_t len;
} gguf_str;

/* One metadata value. Arrays keep their payload in the file; elements of
 * fixed size are at data + i * size, strings and nested arrays through
 * gguf_array_string / gguf_array_array. */
typedef struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64;  /* UINT8..UINT64 */
        int64_t i64;   /* INT8..INT64 */
        double f64;    /* FLOAT32, FLOAT64 */
        bool b;
        gguf_str str;
        struct {
            gguf_type type;     /* element type */
            uint64_t count;
            const uint8_t *data;/* first element */
            uint64_t bytes;     /* payload bytes */
            const uint64_t *offsets; /* variable-size elements: offset of each from data */
        } arr;
    } v;
} gguf_value;

typedef struct gguf_kv {
    gguf_str key;
    gguf_value value;
    const uint8_t *raw;  /* the value's bytes in the file (after its type id) */
    uint64_t raw_len;
} gguf_kv;

typedef struct gguf_tensor {
    char name[GGUF_MAX_NAME];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    uint32_t type;              /* ggml_type */
    uint64_t offset;            /* from the start of the data section */
    uint64_t size;              /* bytes */
    uint64_t n_elements;
    const void *data;           /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* mmap a file read-only and parse it. */
glesllm_status gguf_open(const char *path, gguf_file **out);
/* Parse `size` bytes the caller keeps alive until gguf_close. */
glesllm_status gguf_open_memory(const void *data, size_t size, gguf_file **out);
void gguf_close(gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_file_size(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f);

uint64_t gguf_kv_count(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i);
const gguf_kv *gguf_find(const gguf_file *f, const char *key); /* NULL if absent */

uint64_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed accessors. They fail with GLESLLM_ERR_FORMAT naming the key when the
 * key is absent or holds another type (integers of any width convert when the
 * value fits; FLOAT32/FLOAT64 convert to each other). */
glesllm_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
glesllm_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
glesllm_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
glesllm_status gguf_get_f32(const gguf_file *f, const char *key, float *out);
glesllm_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
/* An architecture's key, "{arch}.{suffix}" (the model keys llama.cpp names
 * by architecture), as a 32-bit count: `def` where the file has none or it
 * is no integer that fits. Never fails. */
uint32_t gguf_get_arch_u32(const gguf_file *f, const char *arch, const char *suffix,
                           uint32_t def);
/* An optional id (a token id, ...): the key's value when it is an integer in
 * [0, INT32_MAX], else -1 (absent, another type, out of range). Never fails. */
int32_t gguf_get_id_or_none(const gguf_file *f, const char *key);
glesllm_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* An array whose elements have type `elem` (GGUF_TYPE_COUNT: any). */
glesllm_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem,
                              const gguf_value **out);
/* Element i of an array of strings / of arrays. */
gguf_str gguf_array_string(const gguf_value *arr, uint64_t i);
gguf_value gguf_array_array(const gguf_value *arr, uint64_t i);
/* Element i of an array of numbers, as a double. */
double gguf_array_number(const gguf_value *arr, uint64_t i);

/* "text" of a gguf_str as a NUL-terminated copy into buf (cut to n-1). */
const char *gguf_str_copy(gguf_str s, char *buf, size_t n);
bool gguf_str_eq(gguf_str s, const char *c);

/* ---- writer ---------------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

glesllm_status gguf_writer_create(gguf_writer **out);
void gguf_writer_destroy(gguf_writer *w);

/* Metadata, in the order added (a key added twice is an error). */
glesllm_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
glesllm_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
glesllm_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
glesllm_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
glesllm_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
glesllm_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Any scalar or array type, given as its encoded bytes after the type id
 * (e.g. a value copied from a reader with gguf_kv.raw). */
glesllm_status gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type,
                                   const void *raw, uint64_t raw_len);
/* An array of fixed-size numbers (count elements of type elem). */
glesllm_status gguf_writer_set_array(gguf_writer *w, const char *key, gguf_type elem,
                                     const void *data, uint64_t count);
glesllm_status gguf_writer_set_str_array(gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t count);
/* A tensor; `data` (size bytes, as ggml_type lays them out) must stay alive
 * until the write. data == NULL writes `size` bytes from `fill(ctx, buf, off, n)`,
 * which returns GLESLLM_OK or fails the write (the temporary file is removed
 * and the fill's error is kept). */
typedef glesllm_status (*gguf_fill_fn)(void *ctx, void *buf, uint64_t offset, size_t n);
glesllm_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *ne, const void *data);
glesllm_status gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, uint32_t type,
                                           uint32_t n_dims, const uint64_t *ne, gguf_fill_fn fill,
                                           void *fill_ctx);
/* Writes version 3 with the alignment from general.alignment (if set) to
 * path.tmp.PID, then renames it to path. */
glesllm_status gguf_writer_write(gguf_writer *w, const char *path);
/* The same into malloc'd memory (tests, fuzz seeds). Caller frees. */
glesllm_status gguf_writer_write_memory(gguf_writer *w, uint8_t **data, size_t *size);

/* Bytes of a tensor of this type and shape, or 0 with an error when ne[0] is
 * not a multiple of the block or the size overflows. */
glesllm_status ggml_tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *ne,
                                 uint64_t *bytes);

#endif
