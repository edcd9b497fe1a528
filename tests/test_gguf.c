/* The GGUF reader and writer: every value type, every tensor type, round
 * trips of real files, typed accessors, and a malformed-file set in which
 * each case asserts its own error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_bytes.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

/* ---- writer -> reader, all value and tensor types ------------------------- */

static uint8_t *tensor_data[GGML_TYPE_MAX_ID];

static gguf_writer *full_writer(uint32_t alignment)
{
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_str(w, "general.architecture", "llama"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_u32(w, "general.alignment", alignment));
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    double f64 = -1.25e300;
    int64_t i64 = -9007199254740993ll; /* -(2^53 + 1): not a double */
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.u8", GGUF_TYPE_UINT8, &u8, 1));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.i8", GGUF_TYPE_INT8, &i8, 1));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.u16", GGUF_TYPE_UINT16, &u16, 2));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.i16", GGUF_TYPE_INT16, &i16, 2));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_u32(w, "t.u32", 4000000000u));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_i32(w, "t.i32", -2000000000));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_f32(w, "t.f32", 0.15625f));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_bool(w, "t.bool", true));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \"w\""));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_u64(w, "t.u64", 0xfedcba9876543210ull));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.i64", GGUF_TYPE_INT64, &i64, 8));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.f64", GGUF_TYPE_FLOAT64, &f64, 8));
    float fa[5] = { 1.5f, -2.0f, 3.25f, 0.1f, -7.0f };
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_array(w, "t.arr.f32", GGUF_TYPE_FLOAT32, fa, 5));
    int32_t ia[3] = { -1, 2, -3 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_array(w, "t.arr.i32", GGUF_TYPE_INT32, ia, 3));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_array(w, "t.arr.empty", GGUF_TYPE_UINT8, NULL, 0));
    const char *strs[4] = { "a", "", "\xe2\x96\x81the", "<0x0A>" };
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_str_array(w, "t.arr.str", strs, 4));
    /* nested: [[u32 7, 8], ["x", "yz"], []] */
    bytes nb = { 0 };
    b_u32(&nb, GGUF_TYPE_ARRAY);
    b_u64(&nb, 3);
    b_u32(&nb, GGUF_TYPE_UINT32);
    b_u64(&nb, 2);
    b_u32(&nb, 7);
    b_u32(&nb, 8);
    b_u32(&nb, GGUF_TYPE_STRING);
    b_u64(&nb, 2);
    b_str(&nb, "x");
    b_str(&nb, "yz");
    b_u32(&nb, GGUF_TYPE_INT8);
    b_u64(&nb, 0);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, "t.arr.nested", GGUF_TYPE_ARRAY, nb.p, nb.n));
    free(nb.p);
    /* a tensor of every known type: 2 rows of two blocks */
    test_rng rng = { 99 };
    for (uint32_t t = 0; t < GGML_TYPE_MAX_ID; t++) {
        if (!ggml_block_size(t))
            continue;
        uint64_t ne[2] = { 2u * ggml_block_size(t), 2 }, size;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, ggml_tensor_bytes(t, 2, ne, &size));
        free(tensor_data[t]);
        tensor_data[t] = malloc(size);
        for (uint64_t i = 0; i < size; i++)
            tensor_data[t][i] = (uint8_t)rng_next(&rng);
        char name[32];
        snprintf(name, sizeof name, "tensor.%s", ggml_type_name(t));
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_writer_add_tensor(w, name, t, 2, ne, tensor_data[t]),
                                      glesllm_last_error());
    }
    return w;
}

static void test_every_value_and_tensor_type_round_trips(void)
{
    gguf_writer *w = full_writer(64);
    uint8_t *data;
    size_t size;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write_memory(w, &data, &size));
    gguf_writer_destroy(w);
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open_memory(data, size, &f), glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT32(3, gguf_version(f));
    TEST_ASSERT_EQUAL_UINT32(64, gguf_alignment(f));
    TEST_ASSERT_EQUAL_UINT64(0, gguf_data_offset(f) % 64);
    uint64_t u;
    int64_t i;
    float fl;
    bool b;
    gguf_str s;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u64(f, "t.u8", &u));
    TEST_ASSERT_EQUAL_UINT64(200, u);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_i64(f, "t.i8", &i));
    TEST_ASSERT_EQUAL_INT64(-100, i);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u64(f, "t.u16", &u));
    TEST_ASSERT_EQUAL_UINT64(60000, u);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_i64(f, "t.i16", &i));
    TEST_ASSERT_EQUAL_INT64(-30000, i);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u64(f, "t.u32", &u));
    TEST_ASSERT_EQUAL_UINT64(4000000000u, u);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_i64(f, "t.i32", &i));
    TEST_ASSERT_EQUAL_INT64(-2000000000, i);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_f32(f, "t.f32", &fl));
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.15625, fl); /* exact: a power-of-two fraction */
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_bool(f, "t.bool", &b));
    TEST_ASSERT_TRUE(b);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_str(f, "t.str", &s));
    TEST_ASSERT_TRUE(gguf_str_eq(s, "h\xc3\xa9llo \"w\""));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u64(f, "t.u64", &u));
    TEST_ASSERT_EQUAL_UINT64(0xfedcba9876543210ull, u);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_i64(f, "t.i64", &i));
    TEST_ASSERT_EQUAL_INT64(-9007199254740993ll, i);
    TEST_ASSERT_TRUE(gguf_find(f, "t.f64")->value.v.f64 == -1.25e300);
    const gguf_value *a;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "t.arr.f32", GGUF_TYPE_FLOAT32, &a));
    TEST_ASSERT_EQUAL_UINT64(5, a->v.arr.count);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 3.25, gguf_array_number(a, 2));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "t.arr.i32", GGUF_TYPE_INT32, &a));
    TEST_ASSERT_FLOAT_WITHIN(0.0, -3.0, gguf_array_number(a, 2));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "t.arr.empty", GGUF_TYPE_UINT8, &a));
    TEST_ASSERT_EQUAL_UINT64(0, a->v.arr.count);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "t.arr.str", GGUF_TYPE_STRING, &a));
    TEST_ASSERT_EQUAL_UINT64(4, a->v.arr.count);
    TEST_ASSERT_TRUE(gguf_str_eq(gguf_array_string(a, 0), "a"));
    TEST_ASSERT_TRUE(gguf_str_eq(gguf_array_string(a, 1), ""));
    TEST_ASSERT_TRUE(gguf_str_eq(gguf_array_string(a, 2), "\xe2\x96\x81the"));
    TEST_ASSERT_TRUE(gguf_str_eq(gguf_array_string(a, 3), "<0x0A>"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "t.arr.nested", GGUF_TYPE_ARRAY, &a));
    TEST_ASSERT_EQUAL_UINT64(3, a->v.arr.count);
    gguf_value n0 = gguf_array_array(a, 0), n1 = gguf_array_array(a, 1), n2 = gguf_array_array(a, 2);
    TEST_ASSERT_EQUAL_INT(GGUF_TYPE_UINT32, n0.v.arr.type);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 8.0, gguf_array_number(&n0, 1));
    TEST_ASSERT_EQUAL_INT(GGUF_TYPE_STRING, n1.v.arr.type);
    TEST_ASSERT_TRUE(gguf_str_eq(gguf_array_string(&n1, 1), "yz"));
    TEST_ASSERT_EQUAL_INT(GGUF_TYPE_INT8, n2.v.arr.type);
    TEST_ASSERT_EQUAL_UINT64(0, n2.v.arr.count);
    /* tensors: same type, shape and bytes, aligned */
    for (uint32_t t = 0; t < GGML_TYPE_MAX_ID; t++) {
        if (!ggml_block_size(t))
            continue;
        char name[32];
        snprintf(name, sizeof name, "tensor.%s", ggml_type_name(t));
        const gguf_tensor *ti = gguf_find_tensor(f, name);
        TEST_ASSERT_NOT_NULL_MESSAGE(ti, name);
        TEST_ASSERT_EQUAL_UINT32(t, ti->type);
        TEST_ASSERT_EQUAL_UINT64(2u * ggml_block_size(t), ti->ne[0]);
        TEST_ASSERT_EQUAL_UINT64(2, ti->ne[1]);
        TEST_ASSERT_EQUAL_UINT64(0, ti->offset % 64);
        TEST_ASSERT_EQUAL_MEMORY(tensor_data[t], ti->data, (size_t)ti->size);
    }
    gguf_close(f);
    free(data);
}

static void test_typed_accessors_check_types(void)
{
    gguf_writer *w = full_writer(32);
    uint8_t *data;
    size_t size;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write_memory(w, &data, &size));
    gguf_writer_destroy(w);
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open_memory(data, size, &f));
    uint32_t u32;
    uint64_t u64;
    float fl;
    gguf_str s;
    const gguf_value *a;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_u32(f, "t.str", &u32));
    TEST_ASSERT_EQUAL_STRING("metadata key 't.str' holds a string, not an integer", glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_u32(f, "no.such.key", &u32));
    TEST_ASSERT_EQUAL_STRING("metadata key 'no.such.key' is missing", glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_u64(f, "t.i8", &u64));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "is negative"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_u32(f, "t.u64", &u32));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "does not fit 32 bits"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_f32(f, "t.u32", &fl));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_str(f, "t.arr.str", &s));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_array(f, "t.arr.str", GGUF_TYPE_INT32, &a));
    TEST_ASSERT_EQUAL_STRING("metadata key 't.arr.str' is an array of string, not of int32",
                             glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u32(f, "t.u16", &u32)); /* widening is fine */
    TEST_ASSERT_EQUAL_UINT32(60000, u32);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_get_f32(f, "t.f64", &fl)); /* -1.25e300 */
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "does not fit a 32-bit float"));
    /* out-of-range element access returns empties, never reads outside */
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "t.arr.str", GGUF_TYPE_STRING, &a));
    TEST_ASSERT_EQUAL_UINT64(0, gguf_array_string(a, 4).len);
    gguf_close(f);
    free(data);
}

static void test_writer_refuses_bad_input(void)
{
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_u32(w, "k", 1));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gguf_writer_set_u32(w, "k", 2));
    uint8_t block[18] = { 1 };
    uint64_t ne_bad[1] = { 33 }, ne_ok[1] = { 32 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          gguf_writer_add_tensor(w, "t", GGML_TYPE_Q4_0, 1, ne_bad, block));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "not a multiple of the Q4_0 block size 32"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gguf_writer_add_tensor(w, "t", 4, 1, ne_ok, block));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_add_tensor(w, "t", GGML_TYPE_Q4_0, 1, ne_ok, block));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          gguf_writer_add_tensor(w, "t", GGML_TYPE_Q4_0, 1, ne_ok, block));
    /* a write into a missing folder fails and leaves nothing behind */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO, gguf_writer_write(w, "/nonexistent-dir/x.gguf"));
    gguf_writer_destroy(w);
}

/* ---- real files ------------------------------------------------------------ */

static unsigned char *read_whole(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, fp) != *n) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    return b;
}

static const char *const shared_files[] = {
    "models/aidreams260K-f32.gguf", "models/tiny-spm-f32.gguf", "models/tiny-spm-q8_0.gguf",
    "models/tiny-spm-q4_0.gguf", "models/tiny-spm-q4_k_m.gguf", "models/tiny-spm-q6_k.gguf",
    "models/tiny-bpe-f32.gguf", "tokenizer/ggml-vocab-llama-spm.gguf",
    "tokenizer/ggml-vocab-gpt-2.gguf", "tokenizer/ggml-vocab-starcoder.gguf",
    "tokenizer/ggml-vocab-phi-3.gguf", "tokenizer/ggml-vocab-deepseek-coder.gguf",
};

/* Read each file, write it back with the writer: the same bytes, so the
 * same metadata and byte-identical tensor data. */
static void test_shared_files_round_trip_byte_identical(void)
{
    TEST_NEEDS_SHARED(dir);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "/tmp/glesllm-test-gguf-%ld.gguf", (long)getpid());
    for (size_t k = 0; k < sizeof shared_files / sizeof shared_files[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, shared_files[k]);
        gguf_file *f;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &f), glesllm_last_error());
        gguf_writer *w;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
        for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
            const gguf_kv *kv = gguf_kv_at(f, i);
            char key[256];
            gguf_str_copy(kv->key, key, sizeof key);
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, key, kv->value.type, kv->raw, kv->raw_len));
        }
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
        }
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_writer_write(w, tmp), glesllm_last_error());
        gguf_writer_destroy(w);
        size_t n_orig, n_new;
        unsigned char *orig = read_whole(path, &n_orig), *copy = read_whole(tmp, &n_new);
        TEST_ASSERT_NOT_NULL(orig);
        TEST_ASSERT_NOT_NULL(copy);
        TEST_ASSERT_EQUAL_size_t(n_orig, n_new);
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(orig, copy, n_orig, shared_files[k]);
        free(orig);
        free(copy);
        gguf_close(f);
    }
    unlink(tmp);
}

static void test_shared_model_metadata(void)
{
    TEST_NEEDS_SHARED(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-spm-q4_k_m.gguf", dir);
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &f), glesllm_last_error());
    uint32_t v;
    gguf_str s;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_str(f, "general.architecture", &s));
    TEST_ASSERT_TRUE(gguf_str_eq(s, "llama"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u32(f, "llama.embedding_length", &v));
    TEST_ASSERT_EQUAL_UINT32(256, v);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u32(f, "llama.attention.head_count_kv", &v));
    TEST_ASSERT_EQUAL_UINT32(4, v);
    const gguf_value *tok;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok));
    TEST_ASSERT_EQUAL_UINT64(32000, tok->v.arr.count);
    TEST_ASSERT_TRUE(gguf_str_eq(gguf_array_string(tok, 13), "<0x0A>"));
    TEST_ASSERT_EQUAL_UINT64(38, gguf_tensor_count(f));
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    TEST_ASSERT_NOT_NULL(t);
    TEST_ASSERT_EQUAL_UINT32(GGML_TYPE_Q6_K, t->type);
    TEST_ASSERT_EQUAL_UINT64(256, t->ne[0]);
    TEST_ASSERT_EQUAL_UINT64(32000, t->ne[1]);
    gguf_close(f);
}

/* ---- malformed files: each with its own error --------------------------------- */

static void expect_error(const bytes *b, const char *needle)
{
    gguf_file *f = NULL;
    glesllm_status st = gguf_open_memory(b->p, b->n, &f);
    char msg[600];
    snprintf(msg, sizeof msg, "expected an error containing '%s', got: %s", needle,
             st == GLESLLM_OK ? "success" : glesllm_last_error());
    TEST_ASSERT_NULL(f);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_ERR_FORMAT, st, msg);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), needle), msg);
}

/* header + one string kv + one F32 tensor "w" of 8 elements + data */
static bytes small_file(void)
{
    bytes b = { 0 };
    uint64_t ne[1] = { 8 };
    b_header(&b, 3, 1, 1);
    b_str(&b, "general.name");
    b_u32(&b, GGUF_TYPE_STRING);
    b_str(&b, "tiny");
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 0);
    b_pad(&b, 32);
    for (int i = 0; i < 8; i++)
        b_u32(&b, 0x3f800000u + (uint32_t)i);
    return b;
}

static void test_small_file_is_valid(void)
{
    bytes b = small_file();
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open_memory(b.p, b.n, &f), glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT64(32, gguf_tensor_at(f, 0)->size);
    gguf_close(f);
    free(b.p);
}

static void test_truncated_at_every_byte(void)
{
    bytes b = small_file();
    /* every length short of the whole file fails, with a message about the
     * end of the file (the section boundaries are among these lengths) */
    for (size_t n = 0; n < b.n; n++) {
        bytes t = { b.p, n, n };
        gguf_file *f = NULL;
        glesllm_status st = gguf_open_memory(t.p, t.n, &f);
        char msg[700];
        snprintf(msg, sizeof msg, "length %zu: %s", n, st ? glesllm_last_error() : "accepted");
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_ERR_FORMAT, st, msg);
        const char *e = glesllm_last_error();
        TEST_ASSERT_TRUE_MESSAGE(strstr(e, "truncated") || strstr(e, "past the end") ||
                                     strstr(e, "not a GGUF file") || strstr(e, "more than the") ||
                                     strstr(e, "data section is missing"),
                                 msg);
    }
    free(b.p);
}

static void test_bad_magic_and_versions(void)
{
    bytes b = { 0 };
    b_add(&b, "GGML\x03\0\0\0", 8);
    expect_error(&b, "not a GGUF file: it starts with bytes 47 47 4d 4c");
    b.n = 0;
    b_header(&b, 1, 0, 0);
    expect_error(&b, "GGUF version 1 is not supported");
    b.n = 0;
    b_header(&b, 0x03000000u, 0, 0);
    expect_error(&b, "big-endian GGUF file");
    b.n = 0;
    b_header(&b, 4, 0, 0);
    expect_error(&b, "unsupported GGUF version 4");
    b.n = 0;
    b_add(&b, "GG", 2);
    expect_error(&b, "not a GGUF file: only 2 bytes");
    free(b.p);
}

static void test_counts_and_lengths_near_2_64(void)
{
    bytes b = { 0 };
    b_header(&b, 3, 0, UINT64_MAX);
    expect_error(&b, "header claims 18446744073709551615 metadata entries");
    b.n = 0;
    b_header(&b, 3, UINT64_MAX - 1, 0);
    expect_error(&b, "header claims 18446744073709551614 tensors");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_u64(&b, UINT64_MAX); /* key length */
    b_add(&b, "abcdefgh", 8);
    expect_error(&b, "a metadata key at byte 24 has length 18446744073709551615");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GGUF_TYPE_STRING);
    b_u64(&b, UINT64_MAX - 7); /* string value length */
    b_add(&b, "abcdefgh", 8);
    expect_error(&b, "a string value at byte");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_UINT64);
    b_u64(&b, UINT64_MAX / 4); /* count * 8 would overflow */
    b_add(&b, "abcdefgh", 8);
    expect_error(&b, "key 'k': array of 4611686018427387903 uint64 elements cannot fit");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_STRING);
    b_u64(&b, 1ull << 62);
    expect_error(&b, "array of 4611686018427387904 string elements cannot fit");
    free(b.p);
}

static void test_bad_dimensions(void)
{
    bytes b = { 0 };
    uint64_t ne_over[2] = { 1ull << 40, 1ull << 40 };
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "big", 2, ne_over, GGML_TYPE_F32, 0);
    b_pad(&b, 32);
    expect_error(&b, "tensor 'big': dimension 1 (1099511627776) makes the element count overflow");
    b.n = 0;
    uint64_t ne_neg[1] = { UINT64_MAX };
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "neg", 1, ne_neg, GGML_TYPE_F32, 0);
    expect_error(&b, "tensor 'neg': dimension 0");
    b.n = 0;
    uint64_t ne5[5] = { 1, 1, 1, 1, 1 };
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "five", 5, ne5, GGML_TYPE_F32, 0);
    expect_error(&b, "tensor 'five' has 5 dimensions (1 to 4 allowed)");
    b.n = 0;
    uint64_t ne_q[2] = { 48, 2 };
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "q", 2, ne_q, GGML_TYPE_Q4_0, 0);
    expect_error(&b, "tensor 'q': row length 48 is not a multiple of the Q4_0 block size 32");
    free(b.p);
}

static void test_bad_type_ids(void)
{
    bytes b = { 0 };
    uint64_t ne[1] = { 32 };
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 1, ne, 77, 0);
    expect_error(&b, "tensor 't' has unknown type id 77");
    b.n = 0;
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 1, ne, 4 /* Q4_2: removed from ggml */, 0);
    expect_error(&b, "tensor 't' has unknown type id 4");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 13);
    expect_error(&b, "key 'k': unknown value type id 13");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, 99);
    b_u64(&b, 1);
    expect_error(&b, "key 'k': array of unknown element type id 99");
    free(b.p);
}

static void alignment_case(uint32_t type, uint64_t value, int n, const char *needle)
{
    bytes b = { 0 };
    b_header(&b, 3, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, type);
    if (n == 4)
        b_u32(&b, (uint32_t)value);
    else
        b_u64(&b, value);
    expect_error(&b, needle);
    free(b.p);
}

static void test_bad_alignment(void)
{
    alignment_case(GGUF_TYPE_UINT32, 0, 4, "general.alignment is 0; it must be a power of two");
    alignment_case(GGUF_TYPE_UINT32, 48, 4, "general.alignment is 48; it must be a power of two");
    alignment_case(GGUF_TYPE_UINT64, 32, 8, "general.alignment must be a uint32, not uint64");
}

static void test_layout_errors(void)
{
    uint64_t ne[1] = { 8 };
    bytes b = { 0 };
    /* a valid header, then nothing where the data should be */
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 0);
    expect_error(&b, "the data section is missing: tensor data should start at byte 64");
    /* data shorter than the tensor */
    b_pad(&b, 32);
    b_u64(&b, 1);
    expect_error(&b, "tensor 'w' (32 bytes at data offset 0) runs past the end of the file");
    /* overlapping tensors */
    b.n = 0;
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "a", 1, ne, GGML_TYPE_F32, 0);
    b_tensor(&b, "b", 1, ne, GGML_TYPE_F32, 0);
    b_pad(&b, 32);
    for (int i = 0; i < 16; i++)
        b_u32(&b, 1);
    expect_error(&b, "tensors 'a' and 'b' overlap");
    /* misaligned offset */
    b.n = 0;
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "a", 1, ne, GGML_TYPE_F32, 4);
    b_pad(&b, 32);
    for (int i = 0; i < 16; i++)
        b_u32(&b, 1);
    expect_error(&b, "tensor 'a' offset 4 is not a multiple of the alignment 32");
    free(b.p);
}

static void test_duplicates_names_and_nesting(void)
{
    bytes b = { 0 };
    b_header(&b, 3, 0, 2);
    for (int i = 0; i < 2; i++) {
        b_str(&b, "general.name");
        b_u32(&b, GGUF_TYPE_UINT8);
        b_add(&b, "x", 1);
    }
    expect_error(&b, "duplicate metadata key 'general.name'");
    b.n = 0;
    uint64_t ne[1] = { 8 };
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 0);
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 32);
    b_pad(&b, 32);
    for (int i = 0; i < 16; i++)
        b_u32(&b, 1);
    expect_error(&b, "duplicate tensor name 'w'");
    b.n = 0;
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "a_tensor_name_that_is_far_too_long_for_ggml_to_accept_it_at_all_", 1, ne,
             GGML_TYPE_F32, 0);
    expect_error(&b, "tensor 0: name of 64 bytes (1 to 63");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "deep");
    b_u32(&b, GGUF_TYPE_ARRAY);
    for (int i = 0; i < 10; i++) {
        b_u32(&b, GGUF_TYPE_ARRAY);
        b_u64(&b, 1);
    }
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u64(&b, 0);
    expect_error(&b, "key 'deep': arrays nested deeper than 8");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_str(&b, "");
    b_u32(&b, GGUF_TYPE_UINT32);
    b_u32(&b, 7);
    expect_error(&b, "metadata entry 0 has an empty key");
    free(b.p);
}

static void test_zero_tensors_is_a_vocab_only_file(void)
{
    bytes b = { 0 };
    b_header(&b, 3, 0, 1);
    b_str(&b, "tokenizer.ggml.model");
    b_u32(&b, GGUF_TYPE_STRING);
    b_str(&b, "llama");
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open_memory(b.p, b.n, &f), glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT64(0, gguf_tensor_count(f));
    gguf_close(f);
    free(b.p);
}

static void test_open_errors_name_the_file(void)
{
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO, gguf_open("/nonexistent/model.gguf", &f));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "/nonexistent/model.gguf: cannot open"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO, gguf_open("/tmp", &f));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "not a regular file"));
    char path[256];
    snprintf(path, sizeof path, "/tmp/glesllm-test-empty-%ld.gguf", (long)getpid());
    FILE *fp = fopen(path, "wb");
    fclose(fp);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, gguf_open(path, &f));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "the file is empty"));
    unlink(path);
}

/* A writer killed by SIGKILL leaves OUT.tmp.PID behind: the next write of
 * OUT removes those of processes that are gone, and keeps one whose process
 * runs (here the test's parent). */
static void test_writer_removes_stale_temporary_files(void)
{
    char out[256], dead[300], live[300];
    snprintf(out, sizeof out, "/tmp/glesllm-test-gguf-%ld.gguf", (long)getpid());
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    TEST_ASSERT_TRUE(child > 0);
    TEST_ASSERT_EQUAL_INT(child, waitpid(child, NULL, 0));
    snprintf(dead, sizeof dead, "%s.tmp.%ld", out, (long)child);
    snprintf(live, sizeof live, "%s.tmp.%ld", out, (long)getppid());
    const char *names[] = { dead, live };
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(names[i], "wb");
        TEST_ASSERT_NOT_NULL(f);
        fputs("half a model", f);
        fclose(f);
    }
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_u32(w, "a", 1));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write(w, out));
    gguf_writer_destroy(w);
    TEST_ASSERT_EQUAL_INT(0, access(out, F_OK));
    TEST_ASSERT_NOT_EQUAL(0, access(dead, F_OK));
    TEST_ASSERT_EQUAL_INT(0, access(live, F_OK));
    unlink(live);
    unlink(out);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_every_value_and_tensor_type_round_trips);
    RUN_TEST(test_typed_accessors_check_types);
    RUN_TEST(test_writer_refuses_bad_input);
    RUN_TEST(test_shared_files_round_trip_byte_identical);
    RUN_TEST(test_shared_model_metadata);
    RUN_TEST(test_small_file_is_valid);
    RUN_TEST(test_truncated_at_every_byte);
    RUN_TEST(test_bad_magic_and_versions);
    RUN_TEST(test_counts_and_lengths_near_2_64);
    RUN_TEST(test_bad_dimensions);
    RUN_TEST(test_bad_type_ids);
    RUN_TEST(test_bad_alignment);
    RUN_TEST(test_layout_errors);
    RUN_TEST(test_duplicates_names_and_nesting);
    RUN_TEST(test_zero_tensors_is_a_vocab_only_file);
    RUN_TEST(test_open_errors_name_the_file);
    RUN_TEST(test_writer_removes_stale_temporary_files);
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        free(tensor_data[t]);
    return test_exit_code(UNITY_END());
}
