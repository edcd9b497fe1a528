/* The loader's checks of a model file as a whole, on the host: the demo
 * model's file rewritten with one thing wrong (a layer past block_count, a
 * block_count of billions, a three-dimensional token_embd, a tensor no
 * llama model has, the parts of a mixture-of-experts model) is refused with
 * a message naming it, before anything is allocated by its sizes. */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

/* One change to the demo model's file. */
typedef struct edit {
    const char *key;  /* a UINT32 key set to u32 (replacing the file's) */
    uint32_t u32;
    const char *reshaped; /* a tensor given shape ne (n_dims), the same bytes */
    uint32_t n_dims;
    uint64_t ne[4];
    const char *added; /* a copy of blk.0.attn_norm.weight under this name */
} edit;

static uint8_t *mem; /* the rewritten file, alive while it is open */

/* The demo model's file with edit e, opened from memory. */
static gguf_file *edited(const edit *e)
{
    demo_spec s = demo_spec_default();
    uint8_t *data;
    size_t size, msize;
    gguf_file *src, *out;
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, demo_model_to_memory(&s, &data, &size));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open_memory(data, size, &src));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    for (uint64_t i = 0; i < gguf_kv_count(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        char key[128];
        gguf_str_copy(kv->key, key, sizeof key);
        if (e->key && strcmp(key, e->key) == 0)
            continue;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, key, kv->value.type, kv->raw,
                                                              kv->raw_len));
    }
    if (e->key)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_u32(w, e->key, e->u32));
    for (uint64_t i = 0; i < gguf_tensor_count(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        bool re = e->reshaped && strcmp(t->name, e->reshaped) == 0;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                              gguf_writer_add_tensor(w, t->name, t->type, re ? e->n_dims : t->n_dims,
                                                     re ? e->ne : t->ne, t->data));
    }
    if (e->added) {
        const gguf_tensor *t = gguf_find_tensor(src, "blk.0.attn_norm.weight");
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                              gguf_writer_add_tensor(w, e->added, t->type, t->n_dims, t->ne, t->data));
    }
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write_memory(w, &mem, &msize));
    gguf_writer_destroy(w);
    gguf_close(src);
    free(data);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open_memory(mem, msize, &out),
                                  glesllm_last_error());
    return out;
}

/* model_open's status on the demo file with edit e; its message in err */
static glesllm_status open_edited(const edit *e, char *err, size_t n)
{
    gguf_file *f = edited(e);
    model m;
    glesllm_status st = model_open(f, &m);
    snprintf(err, n, "%s", st == GLESLLM_OK ? "" : glesllm_last_error());
    if (st == GLESLLM_OK)
        model_close(&m);
    gguf_close(f);
    free(mem);
    mem = NULL;
    return st;
}

static void test_the_demo_file_opens(void)
{
    char err[512];
    edit e = { 0 };
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, open_edited(&e, err, sizeof err), err);
}

/* block_count 3 on a 4-layer file: not 3 layers run silently */
static void test_a_layer_past_block_count_is_refused(void)
{
    char err[512];
    edit e = { .key = "llama.block_count", .u32 = 3 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_edited(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "blk.3."), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "llama.block_count says 3 layers"), err);
}

/* a block_count of billions: refused, not a 2 TB allocation */
static void test_a_huge_block_count_is_refused_before_allocating(void)
{
    char err[512];
    edit e = { .key = "llama.block_count", .u32 = 4000000000u };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_edited(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "block_count is 4000000000"), err);
}

/* token_embd as [256, 1024, 2] holds as many values as the [256, 2048]
 * the metadata asks for, but is no such matrix */
static void test_a_three_dimensional_tensor_is_refused(void)
{
    char err[512];
    edit e = { .reshaped = "token_embd.weight", .n_dims = 3, .ne = { 256, 1024, 2, 1 } };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_edited(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "token_embd.weight has shape [256, 1024, 2, 1]"), err);
}

static void test_a_tensor_nobody_reads_is_refused(void)
{
    char err[512];
    edit e = { .added = "blk.1.attn_sinks.weight" };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, open_edited(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "tensor blk.1.attn_sinks.weight"), err);
}

/* a Mixtral file is named as such, not "the model has no tensor
 * blk.0.ffn_gate.weight" */
static void test_mixture_of_experts_is_named(void)
{
    char err[512];
    edit e = { .key = "llama.expert_count", .u32 = 8 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, open_edited(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "mixture-of-experts"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "llama.expert_count is 8"), err);
    edit router = { .added = "blk.0.ffn_gate_inp.weight" };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, open_edited(&router, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "mixture-of-experts"), err);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_the_demo_file_opens);
    RUN_TEST(test_a_layer_past_block_count_is_refused);
    RUN_TEST(test_a_huge_block_count_is_refused_before_allocating);
    RUN_TEST(test_a_three_dimensional_tensor_is_refused);
    RUN_TEST(test_a_tensor_nobody_reads_is_refused);
    RUN_TEST(test_mixture_of_experts_is_named);
    return test_exit_code(UNITY_END());
}
