/* Small GGUF files made with the writer, for the mutation test and the
 * fuzzer's seed corpus: every value type, nested arrays, several tensor types. */
#ifndef GLESLLM_TEST_GGUF_SAMPLES_H
#define GLESLLM_TEST_GGUF_SAMPLES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

/* the bits of a double: mutated files hold NaNs and huge values, which must
 * not be converted to integers */
static inline uint64_t sample_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static glesllm_status sample_fill(void *ctx, void *buf, uint64_t offset, size_t n)
{
    uint32_t seed = (uint32_t)(uintptr_t)ctx;
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)buf)[i] = (uint8_t)((offset + i) * 2654435761u >> 24 ^ seed);
    return GLESLLM_OK;
}

/* Variant k (0..3) of a small model-like file, in malloc'd memory. */
static inline glesllm_status gguf_sample(int k, uint8_t **data, size_t *size)
{
    gguf_writer *w;
    glesllm_status st = gguf_writer_create(&w);
    if (st != GLESLLM_OK)
        return st;
    static const char *const toks[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81the", "<0x0A>", "a" };
    float scores[6] = { 0, 0, 0, -1.5f, -2.0f, -3.0f };
    int32_t types[6] = { 2, 3, 3, 1, 6, 1 };
    gguf_writer_set_str(w, "general.architecture", k == 3 ? "qwen2" : "llama");
    gguf_writer_set_str(w, "general.name", "sample");
    if (k == 1)
        gguf_writer_set_u32(w, "general.alignment", 64);
    gguf_writer_set_u32(w, "llama.block_count", 1);
    gguf_writer_set_u32(w, "llama.embedding_length", 64);
    gguf_writer_set_u32(w, "llama.feed_forward_length", 128);
    gguf_writer_set_u32(w, "llama.attention.head_count", 4);
    gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2);
    gguf_writer_set_u32(w, "llama.context_length", 256);
    gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_writer_set_u64(w, "sample.u64", 1ull << 40);
    if (k == 3) { /* a byte-level BPE vocabulary, for the tokenizer in the fuzzer */
        static const char *const bpe[] = { "H", "e", "l", "o", "He", "ll", "Hell", "Hello",
                                           "\xc4\xa0", "<|endoftext|>" };
        static const char *const merges[] = { "H e", "l l", "He ll", "Hell o" };
        int32_t bpe_types[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 3 };
        gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
        gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", bpe, 10);
        gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, bpe_types, 10);
        gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, 4);
    } else {
        gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
        gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, 6);
        gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 6);
        gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 6);
    }
    /* nested: [[1, 2], ["x"]] */
    uint8_t nested[] = { 9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, /* array of 2 arrays */
                         4, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0,
                         8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'x' };
    gguf_writer_set_raw(w, "sample.nested", GGUF_TYPE_ARRAY, nested, sizeof nested);
    static const uint32_t ttypes[4][3] = { { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0 },
                                           { GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K },
                                           { GGML_TYPE_BF16, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K },
                                           { GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q3_K } };
    static const char *const names[3] = { "token_embd.weight", "blk.0.attn_q.weight",
                                          "blk.0.ffn_down.weight" };
    for (int t = 0; t < 3; t++) {
        uint32_t type = ttypes[k & 3][t];
        uint64_t ne[2] = { 256, (uint64_t)(t + 1) * 2 };
        gguf_writer_add_tensor_fill(w, names[t], type, 2, ne, sample_fill, (void *)(uintptr_t)(k + t));
    }
    uint64_t ne1[1] = { 64 };
    gguf_writer_add_tensor_fill(w, "output_norm.weight", GGML_TYPE_F32, 1, ne1, sample_fill, NULL);
    st = gguf_writer_write_memory(w, data, size);
    gguf_writer_destroy(w);
    return st;
}

/* Touches everything a parsed file exposes: every value, every array
 * element, the first and last byte of every tensor. Returns a checksum so
 * the reads are not optimised away. */
static inline uint64_t gguf_walk(const gguf_file *f)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        sum += kv->key.len + kv->raw_len;
        if (kv->value.type == GGUF_TYPE_STRING && kv->value.v.str.len)
            sum += (uint8_t)kv->value.v.str.data[kv->value.v.str.len - 1];
        if (kv->value.type != GGUF_TYPE_ARRAY)
            continue;
        const gguf_value *a = &kv->value;
        for (uint64_t j = 0; j < a->v.arr.count && j < 100000; j++) {
            if (a->v.arr.type == GGUF_TYPE_STRING) {
                gguf_str s = gguf_array_string(a, j);
                sum += s.len ? (uint8_t)s.data[s.len - 1] : 0;
            } else if (a->v.arr.type == GGUF_TYPE_ARRAY) {
                gguf_value sub = gguf_array_array(a, j);
                for (uint64_t m = 0; m < sub.v.arr.count && m < 1000; m++)
                    sum += sub.v.arr.type == GGUF_TYPE_STRING ? gguf_array_string(&sub, m).len
                                                              : sample_bits(gguf_array_number(&sub, m));
            } else {
                sum += sample_bits(gguf_array_number(a, j));
            }
        }
    }
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->size)
            sum += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
    }
    return sum;
}

#endif
