/* The loader's checks of a model file as a whole, on the host: the demo
 * model's file rewritten with one thing wrong (a layer past block_count, a
 * block_count of billions, a three-dimensional token_embd, a tensor no
 * llama model has, a router without experts, experts of a shape or layout
 * the metadata does not say) is refused with
 * a message naming it, before anything is allocated by its sizes; and a
 * corpus of such files (hyperparameters missing, zero, absurd, of another
 * type, not finite; vocabularies cut short; tensors missing, reshaped,
 * retyped, unknown; and a Mixtral-layout file's expert keys and tensors)
 * through describe, open and tokenize as `glesllm info`
 * and `run` take them: the verdict each should get, messages that name what
 * is wrong and print safely. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glesllm.h"
#include "gguf/gguf.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

/* ---- crafted files ---------------------------------------------------------- */

/* One thing wrong with the demo model's file, as a user's file might have
 * it: a hyperparameter missing, zero, absurd, of another type or not a
 * number; a vocabulary cut short or naming a tokenizer nobody knows; a
 * tensor missing, reshaped, retyped or unknown. */
typedef enum { K_NONE, K_U32, K_I32, K_U64, K_F32, K_STR, K_BOOL, K_DROP, K_SHORT } key_op;
typedef enum { T_NONE, T_DROP, T_SHAPE, T_TYPE, T_COPY_AS } tensor_op;
typedef struct craft {
    const char *key; /* replaced by (op, num or str), dropped, or (an array) cut to one element */
    key_op op;
    double num;
    const char *str;
    const char *tensor; /* dropped, given shape ne (n_dims), type ttype, or copied as `str` */
    tensor_op top;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t ttype;
    /* OK: glesllm_model_open takes it; else its status and a part of its message */
    glesllm_status want;
    const char *says;
    const char *vocab_says; /* opens, and tokenizing fails saying this (NULL: it works) */
} craft;

static void set_key(gguf_writer *w, const craft *c, const gguf_kv *orig)
{
    glesllm_status st = GLESLLM_OK;
    switch (c->op) {
    case K_U32: st = gguf_writer_set_u32(w, c->key, (uint32_t)c->num); break;
    case K_I32: st = gguf_writer_set_i32(w, c->key, (int32_t)c->num); break;
    case K_U64: st = gguf_writer_set_u64(w, c->key, (uint64_t)c->num); break;
    case K_F32: st = gguf_writer_set_f32(w, c->key, (float)c->num); break;
    case K_STR: st = gguf_writer_set_str(w, c->key, c->str); break;
    case K_BOOL: st = gguf_writer_set_bool(w, c->key, c->num != 0); break;
    case K_SHORT: { /* the array's first element alone: its type, count 1, the element */
        TEST_ASSERT_NOT_NULL_MESSAGE(orig, c->key);
        TEST_ASSERT_EQUAL_INT(GGUF_TYPE_ARRAY, orig->value.type);
        const uint8_t *raw = orig->raw;
        uint32_t elem;
        memcpy(&elem, raw, 4);
        TEST_ASSERT_TRUE(elem == GGUF_TYPE_FLOAT32 || elem == GGUF_TYPE_INT32);
        uint8_t one[16];
        uint64_t count = 1;
        memcpy(one, &elem, 4);
        memcpy(one + 4, &count, 8);
        memcpy(one + 12, raw + 12, 4);
        st = gguf_writer_set_raw(w, c->key, GGUF_TYPE_ARRAY, one, sizeof one);
        break;
    }
    default: break;
    }
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
}

/* The demo model's file with craft c, at path; src: the demo's file. */
static void craft_file(const craft *c, const gguf_file *src, const char *path)
{
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    bool placed = false;
    for (uint64_t i = 0; i < gguf_kv_count(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        char key[128];
        gguf_str_copy(kv->key, key, sizeof key);
        if (c->key && strcmp(key, c->key) == 0) {
            set_key(w, c, kv); /* in the key's place (K_DROP: nothing) */
            placed = true;
            continue;
        }
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_set_raw(w, key, kv->value.type, kv->raw,
                                                              kv->raw_len));
    }
    if (c->key && !placed)
        set_key(w, c, NULL);
    void *retyped = NULL;
    for (uint64_t i = 0; i < gguf_tensor_count(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        bool it = c->tensor && strcmp(t->name, c->tensor) == 0;
        uint32_t type = t->type, n_dims = t->n_dims;
        const uint64_t *ne = t->ne;
        const void *bytes = t->data;
        if (it && c->top == T_DROP)
            continue;
        if (it && c->top == T_SHAPE) {
            n_dims = c->n_dims;
            ne = c->ne;
        }
        if (it && c->top == T_TYPE) { /* the same bytes as far as they go, then a pattern */
            uint64_t need = 0;
            type = c->ttype;
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, ggml_tensor_bytes(type, n_dims, ne, &need));
            retyped = malloc((size_t)need);
            TEST_ASSERT_NOT_NULL(retyped);
            for (uint64_t b = 0; b < need; b++)
                ((uint8_t *)retyped)[b] = b < t->size ? ((const uint8_t *)t->data)[b] : (uint8_t)b;
            bytes = retyped;
        }
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                      gguf_writer_add_tensor(w, t->name, type, n_dims, ne, bytes),
                                      glesllm_last_error());
        if (it && c->top == T_COPY_AS)
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_add_tensor(w, c->str, t->type, t->n_dims,
                                                                     t->ne, t->data));
    }
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_writer_write(w, path), glesllm_last_error());
    gguf_writer_destroy(w);
    free(retyped);
}

/* model_open's status on the demo file with craft c (written to a
 * temporary file and opened as glesllm_model_open opens it, without the
 * vocabulary); its message in err */
static glesllm_status open_crafted(const craft *c, char *err, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/glesllm-test-model-file-%ld.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    demo_spec s = demo_spec_default();
    uint8_t *data;
    size_t size;
    gguf_file *src, *f;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, demo_model_to_memory(&s, &data, &size));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open_memory(data, size, &src));
    craft_file(c, src, path);
    gguf_close(src);
    free(data);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &f), glesllm_last_error());
    model m;
    glesllm_status st = model_open(f, &m);
    snprintf(err, n, "%s", st == GLESLLM_OK ? "" : glesllm_last_error());
    if (st == GLESLLM_OK)
        model_close(&m);
    gguf_close(f);
    unlink(path);
    return st;
}

static void test_the_demo_file_opens(void)
{
    char err[512];
    craft e = { 0 };
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, open_crafted(&e, err, sizeof err), err);
}

/* block_count 3 on a 4-layer file: not 3 layers run silently */
static void test_a_layer_past_block_count_is_refused(void)
{
    char err[512];
    craft e = { "llama.block_count", K_U32, 3 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_crafted(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "blk.3."), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "llama.block_count says 3 layers"), err);
}

/* a block_count of billions: refused, not a 2 TB allocation */
static void test_a_huge_block_count_is_refused_before_allocating(void)
{
    char err[512];
    craft e = { "llama.block_count", K_U32, 4e9 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_crafted(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "block_count is 4000000000"), err);
}

/* token_embd as [256, 1024, 2] holds as many values as the [256, 2048]
 * the metadata asks for, but is no such matrix */
static void test_a_three_dimensional_tensor_is_refused(void)
{
    char err[512];
    craft e = { .tensor = "token_embd.weight", .top = T_SHAPE, .n_dims = 3,
                .ne = { 256, 1024, 2, 1 } };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_crafted(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "token_embd.weight has shape [256, 1024, 2, 1]"), err);
}

static void test_a_tensor_nobody_reads_is_refused(void)
{
    char err[512];
    craft e = { .tensor = "blk.0.attn_norm.weight", .top = T_COPY_AS,
                .str = "blk.1.attn_sinks.weight" };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, open_crafted(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "tensor blk.1.attn_sinks.weight"), err);
}

/* expert_count on a dense file: how many experts a token uses is missing
 * (and then its router); a router without expert_count: the count is */
static void test_experts_half_there_are_named(void)
{
    char err[512];
    craft e = { "llama.expert_count", K_U32, 8 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_crafted(&e, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "no llama.expert_used_count"), err);
    craft router = { .tensor = "blk.0.attn_norm.weight", .top = T_COPY_AS,
                     .str = "blk.0.ffn_gate_inp.weight" };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, open_crafted(&router, err, sizeof err));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "no llama.expert_count"), err);
}

/* ---- the crafted-file corpus ------------------------------------------------ */

#define L "llama."
static const craft corpus[] = {
    /* the layers */
    { L "block_count", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "block_count" },
    { L "block_count", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "block_count" },
    { L "block_count", K_U32, 3, .want = GLESLLM_ERR_FORMAT, .says = "blk.3." },
    { L "block_count", K_U32, 5, .want = GLESLLM_ERR_FORMAT, .says = "block_count" },
    { L "block_count", K_U32, 4e9, .want = GLESLLM_ERR_FORMAT, .says = "block_count is 4000000000" },
    { L "block_count", K_STR, .str = "4", .want = GLESLLM_ERR_FORMAT, .says = "block_count" },
    { L "block_count", K_F32, 4.0, .want = GLESLLM_ERR_FORMAT, .says = "block_count" },
    { L "block_count", K_I32, -1, .want = GLESLLM_ERR_FORMAT, .says = "block_count" },
    { L "block_count", K_U64, 4 }, /* any integer type holding 4 */
    /* the shapes */
    { L "embedding_length", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "embedding_length" },
    { L "embedding_length", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "embedding_length" },
    { L "embedding_length", K_U32, 512, .want = GLESLLM_ERR_FORMAT, .says = "token_embd.weight" },
    { L "embedding_length", K_U32, 4e9, .want = GLESLLM_ERR_FORMAT, .says = "[4000000000, 2048]" },
    { L "feed_forward_length", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "feed_forward_length" },
    { L "feed_forward_length", K_U32, 769, .want = GLESLLM_ERR_FORMAT, .says = "ffn_" },
    { L "attention.head_count", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "head_count" },
    { L "attention.head_count", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "head_count" },
    { L "attention.head_count", K_U32, 3, .want = GLESLLM_ERR_FORMAT, .says = "head_count" },
    { L "attention.head_count", K_U32, 512, .want = GLESLLM_ERR_FORMAT, .says = "head_count" },
    { L "attention.head_count_kv", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "attn_k.weight" },
    { L "attention.head_count_kv", K_U32, 3, .want = GLESLLM_ERR_FORMAT, .says = "head_count_kv" },
    { L "attention.head_count_kv", K_U32, 16, .want = GLESLLM_ERR_FORMAT, .says = "head_count_kv" },
    { L "attention.head_count_kv", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "attn_k.weight" },
    { L "rope.dimension_count", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "rope.dimension_count" },
    { L "rope.dimension_count", K_U32, 31, .want = GLESLLM_ERR_UNSUPPORTED, .says = "partial RoPE (llama.rope.dimension_count is 31" },
    { L "rope.dimension_count", K_U32, 1000, .want = GLESLLM_ERR_FORMAT, .says = "rope.dimension_count" },
    /* the numbers */
    { L "context_length", K_DROP }, /* (then the context is the user's) */
    { L "context_length", K_U32, 4e9 },
    { L "rope.freq_base", K_F32, NAN, .want = GLESLLM_ERR_FORMAT, .says = "rope.freq_base" },
    { L "rope.freq_base", K_F32, INFINITY, .want = GLESLLM_ERR_FORMAT, .says = "rope.freq_base" },
    { L "rope.freq_base", K_F32, 0, .want = GLESLLM_ERR_FORMAT, .says = "rope.freq_base" },
    { L "rope.freq_base", K_F32, -10000, .want = GLESLLM_ERR_FORMAT, .says = "rope.freq_base" },
    { L "rope.freq_base", K_STR, .str = "10000", .want = GLESLLM_ERR_FORMAT, .says = "rope.freq_base" },
    { L "rope.freq_base", K_DROP }, /* llama's default, 10000 */
    { L "attention.layer_norm_rms_epsilon", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "epsilon" },
    { L "attention.layer_norm_rms_epsilon", K_F32, NAN, .want = GLESLLM_ERR_FORMAT, .says = "epsilon" },
    { L "attention.layer_norm_rms_epsilon", K_F32, -1e-5, .want = GLESLLM_ERR_FORMAT, .says = "epsilon" },
    { L "attention.layer_norm_rms_epsilon", K_F32, 0, .want = GLESLLM_ERR_FORMAT, .says = "epsilon" },
    { L "attention.layer_norm_rms_epsilon", K_BOOL, 1, .want = GLESLLM_ERR_FORMAT, .says = "epsilon" },
    { L "rope.scaling.type", K_STR, .str = "linear" }, /* (without a factor: 1) */
    { L "rope.scaling.factor", K_F32, NAN, .want = GLESLLM_ERR_FORMAT, .says = "rope.scaling.factor" },
    { L "rope.scaling.type", K_STR, .str = "sideways", .want = GLESLLM_ERR_UNSUPPORTED, .says = "sideways" },
    { L "expert_count", K_U32, 8, .want = GLESLLM_ERR_FORMAT, .says = "expert_used_count" },
    /* what the file is */
    { "general.architecture", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "general.architecture" },
    { "general.architecture", K_STR, .str = "", .want = GLESLLM_ERR_UNSUPPORTED, .says = "architecture ''" },
    { "general.architecture", K_STR, .str = "rwkv6", .want = GLESLLM_ERR_UNSUPPORTED, .says = "rwkv6" },
    { "general.architecture", K_STR, .str = "llama\x1b]0;pwned\x07", .want = GLESLLM_ERR_UNSUPPORTED, .says = "'llama\\x1b]0;pwned\\x07'" },
    { "general.architecture", K_U32, 1, .want = GLESLLM_ERR_FORMAT, .says = "general.architecture" },
    { "general.name", K_STR, .str = "\x1b[2J\x1b]0;title\x07\xff\xfe\xc2\x9b" "31m" }, /* (escaped by describe) */
    { "general.alignment", K_U32, 64 },
    /* the vocabulary: the model opens, its text functions say what is wrong */
    { "tokenizer.ggml.model", K_STR, .str = "gpt3", .vocab_says = "gpt3" },
    { "tokenizer.ggml.model", K_DROP, .vocab_says = "tokenizer.ggml.model" },
    { "tokenizer.ggml.tokens", K_DROP, .vocab_says = "tokenizer.ggml.tokens" },
    { "tokenizer.ggml.tokens", K_STR, .str = "a", .vocab_says = "tokenizer.ggml.tokens" },
    { "tokenizer.ggml.scores", K_SHORT, .vocab_says = "tokenizer.ggml.scores" },
    { "tokenizer.ggml.token_type", K_SHORT, .vocab_says = "tokenizer.ggml.token_type" },
    { "tokenizer.ggml.bos_token_id", K_U32, 999999, .vocab_says = "bos_token_id" },
    { "tokenizer.ggml.eos_token_id", K_I32, -5, .vocab_says = "eos_token_id" },
    /* the tensors */
    { .tensor = "token_embd.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "token_embd.weight" },
    { .tensor = "output_norm.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "output_norm.weight" },
    { .tensor = "blk.2.ffn_down.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.2.ffn_down.weight" },
    { .tensor = "output.weight", .top = T_DROP }, /* tied: the output is token_embd */
    { .tensor = "blk.0.attn_q.weight", .top = T_SHAPE, .n_dims = 2, .ne = { 512, 128 }, .want = GLESLLM_ERR_FORMAT, .says = "blk.0.attn_q.weight" },
    { .tensor = "output_norm.weight", .top = T_SHAPE, .n_dims = 2, .ne = { 128, 2 }, .want = GLESLLM_ERR_FORMAT, .says = "output_norm.weight" },
    { .tensor = "blk.1.attn_k.weight", .top = T_SHAPE, .n_dims = 2, .ne = { 256, 64 }, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.attn_k.weight" },
    { .tensor = "blk.0.attn_norm.weight", .top = T_TYPE, .ttype = GGML_TYPE_F16 },
    { .tensor = "blk.0.attn_norm.weight", .top = T_TYPE, .ttype = GGML_TYPE_Q8_0 }, /* (vectors are dequantized) */
    { .tensor = "blk.3.ffn_up.weight", .top = T_TYPE, .ttype = GGML_TYPE_IQ2_XXS, .want = GLESLLM_ERR_UNSUPPORTED, .says = "blk.3.ffn_up.weight" },
    { .tensor = "blk.0.attn_norm.weight", .top = T_COPY_AS, .str = "blk.0.attn_sinks", .want = GLESLLM_ERR_UNSUPPORTED, .says = "blk.0.attn_sinks" },
    { .tensor = "blk.0.attn_norm.weight", .top = T_COPY_AS, .str = "rope_freqs.weight", .want = GLESLLM_ERR_FORMAT, .says = "rope_freqs.weight" },
};

/* The same for a Mixtral-layout file (4 experts of 96 rows, 2 a token, 64
 * hidden): the experts' keys and tensors. */
static const craft expert_corpus[] = {
    { 0 },
    { L "expert_used_count", K_U32, 5, .want = GLESLLM_ERR_FORMAT, .says = "expert_used_count is 5, for 4 experts" },
    { L "expert_used_count", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "expert_used_count is 0" },
    { L "expert_used_count", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "no llama.expert_used_count" },
    { L "expert_used_count", K_STR, .str = "2", .want = GLESLLM_ERR_FORMAT, .says = "expert_used_count" },
    { L "expert_count", K_U32, 300, .want = GLESLLM_ERR_FORMAT, .says = "expert_count is 300" },
    { L "expert_count", K_U32, 3, .want = GLESLLM_ERR_FORMAT, .says = "ffn_gate_inp.weight" },
    { L "expert_count", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "no llama.expert_count" },
    { L "expert_gating_func", K_U32, 2, .want = GLESLLM_ERR_UNSUPPORTED, .says = "expert_gating_func is 2" },
    { L "expert_weights_scale", K_F32, NAN, .want = GLESLLM_ERR_FORMAT, .says = "expert_weights_scale" },
    { L "expert_weights_scale", K_F32, -1, .want = GLESLLM_ERR_FORMAT, .says = "expert_weights_scale" },
    { L "expert_weights_scale", K_F32, 2.5 },
    { L "expert_weights_norm", K_BOOL, 0 },
    { L "expert_weights_norm", K_U32, 7, .want = GLESLLM_ERR_FORMAT, .says = "expert_weights_norm" },
    { .tensor = "blk.1.ffn_up_exps.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.ffn_up_exps.weight" },
    { .tensor = "blk.0.ffn_down_exps.weight", .top = T_SHAPE, .n_dims = 3, .ne = { 96, 64, 3 }, .want = GLESLLM_ERR_FORMAT, .says = "(columns, rows, experts)" },
    { .tensor = "blk.0.ffn_gate_exps.weight", .top = T_SHAPE, .n_dims = 2, .ne = { 64, 384 }, .want = GLESLLM_ERR_FORMAT, .says = "blk.0.ffn_gate_exps.weight" },
    { .tensor = "blk.0.ffn_norm.weight", .top = T_COPY_AS, .str = "blk.0.ffn_gate.0.weight", .want = GLESLLM_ERR_UNSUPPORTED, .says = "convert the model again" },
    { .tensor = "blk.0.ffn_norm.weight", .top = T_COPY_AS, .str = "blk.0.ffn_gate.weight", .want = GLESLLM_ERR_UNSUPPORTED, .says = "blk.0.ffn_gate.weight" },
};

/* An OLMoE file (the expert file's shape, Q and K normalised over their
 * width of 64 and 32): its norms' tensors. */
static const craft olmoe_corpus[] = {
    { 0 },
    { .tensor = "blk.1.attn_k_norm.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.attn_k_norm.weight" },
    { .tensor = "blk.0.attn_q_norm.weight", .top = T_SHAPE, .n_dims = 1, .ne = { 16 }, .want = GLESLLM_ERR_FORMAT, .says = "blk.0.attn_q_norm.weight" },
    { .tensor = "blk.0.attn_k_norm.weight", .top = T_SHAPE, .n_dims = 1, .ne = { 64 }, .want = GLESLLM_ERR_FORMAT, .says = "blk.0.attn_k_norm.weight" },
    { .tensor = "blk.0.attn_q_norm.weight", .top = T_TYPE, .ttype = GGML_TYPE_F16 },
    { "olmoe.expert_count", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "expert_count is 0" },
};
#undef L

static void craft_name(const craft *c, char *buf, size_t n)
{
    static const char *const kops[] = { "", "u32", "i32", "u64", "f32", "str", "bool", "dropped",
                                        "cut to one element" };
    static const char *const tops[] = { "", "dropped", "reshaped", "retyped", "copied" };
    if (c->key)
        snprintf(buf, n, "%s %s %g", c->key, kops[c->op], c->num);
    else
        snprintf(buf, n, "%s %s", c->tensor, tops[c->top]);
}

/* No byte a terminal acts on (ESC, BEL, C1 ...): what the file holds is
 * escaped wherever it is printed. */
static void assert_printable(const char *s, const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        TEST_ASSERT_TRUE_MESSAGE(*p >= 0x20 || *p == '\n' || *p == '\t', msg);
    TEST_ASSERT_TRUE_MESSAGE(!s || !strstr(s, "\xc2\x9b"), msg); /* (C1's CSI) */
}

/* Every file of the corpus, as `glesllm info` and `glesllm run` take it
 * (describe, then open by path without a GPU, then tokenize): what it says
 * and does is the table's; nothing crashes (the suite runs under ASan in
 * CI); nothing it prints of the file reaches a terminal raw. */
/* Each of n crafts of the model of spec s through describe, open and
 * tokenize: the verdict it should get, messages that name it and print
 * safely. */
static void check_corpus(const demo_spec *s, const craft *cases, size_t n_cases)
{
    char path[512];
    snprintf(path, sizeof path, "%s/glesllm-test-crafted-%ld.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    uint8_t *data;
    size_t size;
    gguf_file *src;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, demo_model_to_memory(s, &data, &size));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open_memory(data, size, &src));
    for (size_t i = 0; i < n_cases; i++) {
        const craft *c = &cases[i];
        char name[200], msg[900];
        craft_name(c, name, sizeof name);
        craft_file(c, src, path);
        for (unsigned flags = 0; flags < 2; flags++) {
            char *text = NULL;
            glesllm_status st = glesllm_file_describe(path, 0, flags ? GLESLLM_DESCRIBE_JSON : 0,
                                                      &text);
            snprintf(msg, sizeof msg, "%s: describe: %s", name,
                     st ? glesllm_last_error() : "control bytes in its text");
            TEST_ASSERT_TRUE_MESSAGE(st == GLESLLM_OK || strlen(glesllm_last_error()) > 10, msg);
            assert_printable(text, msg);
            free(text);
        }
        glesllm_model *m = NULL;
        glesllm_status st = glesllm_model_open(NULL, path, NULL, &m);
        snprintf(msg, sizeof msg, "%s: status %d, %s", name, (int)st,
                 st ? glesllm_last_error() : "opened");
        TEST_ASSERT_EQUAL_INT_MESSAGE(c->want, st, msg);
        if (st != GLESLLM_OK) {
            TEST_ASSERT_NULL(m);
            assert_printable(glesllm_last_error(), msg);
            TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), c->says), msg);
            TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), path), msg);
            continue;
        }
        int32_t ids[64];
        size_t n = 0;
        st = glesllm_tokenize(m, "Hello world, a b", 16, 0, ids, 64, &n);
        snprintf(msg, sizeof msg, "%s: tokenize: status %d, %s", name, (int)st,
                 st ? glesllm_last_error() : "ok");
        if (c->vocab_says) {
            TEST_ASSERT_NOT_EQUAL_MESSAGE(GLESLLM_OK, st, msg);
            TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), c->vocab_says), msg);
        } else {
            TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, st, msg);
            char text[256];
            size_t len;
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, glesllm_detokenize(m, ids, n, 0, text, sizeof text, &len));
        }
        glesllm_model_close(m);
    }
    gguf_close(src);
    free(data);
    unlink(path);
}

/* A Mamba file's block shape: missing, zero, not a number, past what the
 * scan kernel takes, or not what its tensors say. */
#define M "mamba."
static const craft mamba_corpus[] = {
    { 0 },
    { M "ssm.conv_kernel", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "no mamba.ssm.conv_kernel" },
    { M "ssm.conv_kernel", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "conv_kernel is 0" },
    { M "ssm.conv_kernel", K_U32, 9, .want = GLESLLM_ERR_UNSUPPORTED, .says = "9-tap" },
    { M "ssm.conv_kernel", K_U32, 3, .want = GLESLLM_ERR_FORMAT, .says = "ssm_conv1d" },
    { M "ssm.inner_size", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "no mamba.ssm.inner_size" },
    { M "ssm.inner_size", K_STR, .str = "128", .want = GLESLLM_ERR_FORMAT, .says = "inner_size" },
    { M "ssm.state_size", K_U32, 129, .want = GLESLLM_ERR_UNSUPPORTED, .says = "129 state values" },
    { M "ssm.state_size", K_U32, 8, .want = GLESLLM_ERR_FORMAT, .says = "ssm_x" },
    { M "ssm.time_step_rank", K_U32, 4e9, .want = GLESLLM_ERR_UNSUPPORTED, .says = "rank" },
    { M "ssm.dt_b_c_rms", K_U32, 1, .want = GLESLLM_ERR_FORMAT, .says = "dt_b_c_rms" },
    { M "ssm.dt_b_c_rms", K_BOOL, 1 },
    { M "attention.layer_norm_rms_epsilon", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "epsilon" },
    { .tensor = "blk.1.ssm_a", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.ssm_a" },
    { .tensor = "blk.0.ssm_d", .top = T_COPY_AS, .str = "blk.0.ffn_norm.weight",
      .want = GLESLLM_ERR_UNSUPPORTED, .says = "blk.0.ffn_norm.weight" },
};
#undef M

/* Gemma 2's soft caps: not above 0, not a number; its window: missing
 * (llama.cpp's 4096). */
static const craft gemma2_corpus[] = {
    { 0 },
    { "gemma2.attn_logit_softcapping", K_F32, 0, .want = GLESLLM_ERR_FORMAT, .says = "attn_logit_softcapping is 0" },
    { "gemma2.final_logit_softcapping", K_F32, NAN, .want = GLESLLM_ERR_FORMAT, .says = "final_logit_softcapping" },
    { "gemma2.final_logit_softcapping", K_STR, .str = "30", .want = GLESLLM_ERR_FORMAT, .says = "final_logit_softcapping" },
    { "gemma2.attention.sliding_window", K_DROP },
    { .tensor = "blk.1.post_ffw_norm.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.post_ffw_norm.weight" },
};

/* Mamba-2's groups: missing, or not dividing its heads. */
static const craft mamba2_corpus[] = {
    { 0 },
    { "mamba2.ssm.group_count", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "group_count is 0" },
    { "mamba2.ssm.group_count", K_U32, 3, .want = GLESLLM_ERR_FORMAT, .says = "group_count is 3, for 4 heads" },
    { "mamba2.ssm.time_step_rank", K_U32, 5, .want = GLESLLM_ERR_FORMAT, .says = "for 5 heads" },
    { .tensor = "blk.0.ssm_norm.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.0.ssm_norm.weight" },
};

/* Jamba's layers: attention.head_count_kv (a value a layer) missing, a
 * number, cut short; a tensor of either kind of layer missing. */
#define J "jamba."
static const craft jamba_corpus[] = {
    { 0 },
    { J "attention.head_count_kv", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "head_count_kv must be an array" },
    { J "attention.head_count_kv", K_U32, 2, .want = GLESLLM_ERR_FORMAT, .says = "head_count_kv must be an array" },
    { J "attention.head_count_kv", K_SHORT, .want = GLESLLM_ERR_FORMAT, .says = "each of the 2 layers" },
    { J "ssm.state_size", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "no jamba.ssm.state_size" },
    { .tensor = "blk.1.attn_q.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.attn_q.weight" },
    { .tensor = "blk.0.ssm_b_norm.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.0.ssm_b_norm.weight" },
    { .tensor = "blk.1.ffn_gate_inp.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.ffn_gate.weight" },
};
#undef J

/* RWKV-7's shape: its head size missing, zero, not dividing the width or
 * past the kernel's; a rank or the token shifts not what the tensors and
 * the kernels take; the LayerNorms' epsilon missing; the gate's path
 * missing (RWKV-7 without a gate); a tensor missing, and the token-shift
 * mixes of another shape. */
#define R "rwkv7."
static const craft rwkv7_corpus[] = {
    { 0 },
    { R "wkv.head_size", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "no rwkv7.wkv.head_size" },
    { R "wkv.head_size", K_U32, 0, .want = GLESLLM_ERR_FORMAT, .says = "head_size is 0" },
    { R "wkv.head_size", K_U32, 24, .want = GLESLLM_ERR_FORMAT, .says = "not a multiple of wkv.head_size 24" },
    { R "wkv.head_size", K_U32, 2, .want = GLESLLM_ERR_UNSUPPORTED, .says = "heads of 2 values" },
    { R "wkv.head_size", K_STR, .str = "32", .want = GLESLLM_ERR_FORMAT, .says = "head_size" },
    { R "attention.decay_lora_rank", K_U32, 9, .want = GLESLLM_ERR_FORMAT, .says = "time_mix_w1" },
    { R "attention.gate_lora_rank", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "with a gate" },
    { R "token_shift_count", K_U32, 1, .want = GLESLLM_ERR_UNSUPPORTED, .says = "token_shift_count is 1" },
    { R "attention.layer_norm_epsilon", K_DROP, .want = GLESLLM_ERR_FORMAT, .says = "layer_norm_epsilon" },
    { R "attention.layer_norm_epsilon", K_F32, NAN, .want = GLESLLM_ERR_FORMAT, .says = "layer_norm_epsilon" },
    { .tensor = "blk.1.time_mix_k_a.weight", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "blk.1.time_mix_k_a.weight" },
    { .tensor = "token_embd_norm.bias", .top = T_DROP, .want = GLESLLM_ERR_FORMAT, .says = "token_embd_norm.bias" },
    { .tensor = "blk.0.time_mix_lerp_fused.weight", .top = T_SHAPE, .n_dims = 2, .ne = { 64, 5 }, .want = GLESLLM_ERR_FORMAT, .says = "6 vectors of 64" },
};
#undef R

static void test_crafted_corpus(void)
{
    demo_spec s = demo_spec_default();
    check_corpus(&s, corpus, sizeof corpus / sizeof corpus[0]);
}

/* The small F32 model of an architecture the crafted corpora start from */
static demo_spec crafted_spec(const char *arch)
{
    demo_spec s = demo_spec_default();
    s.arch = arch;
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 96;
    s.n_vocab = 300;
    s.type = s.embd_type = s.out_type = GGML_TYPE_F32;
    return s;
}

static void test_crafted_expert_files(void)
{
    demo_spec s = crafted_spec("llama");
    s.n_expert = 4;
    s.n_expert_used = 2;
    check_corpus(&s, expert_corpus, sizeof expert_corpus / sizeof expert_corpus[0]);
    s.arch = "olmoe";
    check_corpus(&s, olmoe_corpus, sizeof olmoe_corpus / sizeof olmoe_corpus[0]);
}

static void test_crafted_gemma2_files(void)
{
    demo_spec s = crafted_spec("gemma2");
    s.window = 8;
    s.tied = true;
    check_corpus(&s, gemma2_corpus, sizeof gemma2_corpus / sizeof gemma2_corpus[0]);
}

static void test_crafted_state_space_files(void)
{
    demo_spec s = crafted_spec("mamba");
    check_corpus(&s, mamba_corpus, sizeof mamba_corpus / sizeof mamba_corpus[0]);
    s.arch = "mamba2";
    check_corpus(&s, mamba2_corpus, sizeof mamba2_corpus / sizeof mamba2_corpus[0]);
    s.arch = "jamba";
    s.n_expert = 4;
    s.n_expert_used = 2;
    check_corpus(&s, jamba_corpus, sizeof jamba_corpus / sizeof jamba_corpus[0]);
    demo_spec r = crafted_spec("rwkv7");
    r.head_dim = 32;
    check_corpus(&r, rwkv7_corpus, sizeof rwkv7_corpus / sizeof rwkv7_corpus[0]);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_the_demo_file_opens);
    RUN_TEST(test_a_layer_past_block_count_is_refused);
    RUN_TEST(test_a_huge_block_count_is_refused_before_allocating);
    RUN_TEST(test_a_three_dimensional_tensor_is_refused);
    RUN_TEST(test_a_tensor_nobody_reads_is_refused);
    RUN_TEST(test_experts_half_there_are_named);

    RUN_TEST(test_crafted_corpus);
    RUN_TEST(test_crafted_expert_files);
    RUN_TEST(test_crafted_state_space_files);
    RUN_TEST(test_crafted_gemma2_files);
    return test_exit_code(UNITY_END());
}
