/* Llama-family GGUF models with random weights, made in memory by the
 * project's own writer and quantizer: the built-in demo of `glesllm run`,
 * the models of the decode tests, and the benchmark models of bench/. The
 * text they generate means nothing; their shapes and formats are real. */
#ifndef GLESLLM_MODEL_DEMO_MODEL_H
#define GLESLLM_MODEL_DEMO_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct demo_spec {
    /* "llama", "qwen2" (Q/K/V biases, NeoX RoPE), "qwen2moe", "olmoe" (norms
     * of Q and K over their width, NeoX RoPE; experts), "qwen3" (norms of
     * each head of Q and K, NeoX RoPE), "qwen3moe" or "phi3" (Q|K|V and
     * gate|up each in one tensor, NeoX RoPE, a sliding window), "mamba"
     * (Mamba-1 blocks of 2 n_embd channels; n_ff and the heads unused),
     * "mamba2" (Mamba-2 blocks: dt_rank heads, n_group groups) or
     * "gemma2" (tied embeddings advised; Gemma 2's norms, caps and window
     * on every other layer), "gemma3" (Gemma 2's without caps, norms of
     * each head of Q and K, the window on five layers of six, the global
     * layers' RoPE of base 1e6 scaled linearly by 8) or
     * "jamba" (Mamba blocks with norms of dt, B and C, attention without
     * RoPE in the layers i % attn_every == attn_every / 2, a FFN after each,
     * experts in the odd layers where n_expert) or "rwkv7" (heads of
     * head_dim, 0: 64; low-rank paths of ranks from n_embd; the heads'
     * counts unused) */
    const char *arch;
    const char *name; /* general.name */
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
    uint32_t head_dim; /* 0: n_embd / n_head (else attention.key_length) */
    uint32_t window;   /* phi3, gemma2: attention.sliding_window */
    /* LongRoPE: rope_factors_long/short (1 to 5, and near 1), an original
     * context of n_ctx / 2 and an attention factor of 1.2 */
    bool long_rope;
    uint32_t type;       /* attention and FFN matrices */
    uint32_t embd_type;  /* token_embd (the output too when tied) */
    uint32_t out_type;   /* output.weight when not tied */
    bool tied;
    /* type overrides for attn_v and ffn_down (0: `type`); with more_bits_only,
     * only in the layers llama.cpp's Q4_K_M gives more bits (the first and
     * last eighth, every third between) */
    uint32_t v_type, down_type;
    bool more_bits_only;
    bool same_layers; /* layers share the bytes of an earlier layer's tensor of the
                         same type: fast to make (benchmarks) */
    /* mixture of experts (n_expert 0: dense): n_expert experts of n_ff rows,
     * n_expert_used a token; "qwen2moe" adds a shared expert of n_ff_shexp
     * rows (its arch; "llama" with experts is Mixtral's layout) */
    uint32_t n_expert, n_expert_used, n_ff_shexp;
    /* mamba: the state values a channel (0: 16), the step's rank (0:
     * n_embd / 16 rounded up), and FalconMamba's norms of dt, B and C */
    uint32_t d_state, dt_rank;
    bool dt_b_c_rms;
    uint32_t attn_every; /* jamba: 0 means 2 */
    uint32_t n_group;    /* mamba2: 0 means 1 */
    uint64_t seed;
} demo_spec;

/* The built-in demo: a llama of 4 layers, 256 hidden, Q8_0. */
demo_spec demo_spec_default(void);

typedef struct demo_model demo_model;

/* Makes the tensors (random floats quantized by quant_quantize) and the
 * metadata, with a vocabulary of made-up SentencePiece words. */
glesllm_status demo_model_create(const demo_spec *spec, demo_model **out);
/* The writer holding the model: gguf_writer_write / _write_memory it. */
gguf_writer *demo_model_writer(demo_model *d);
void demo_model_destroy(demo_model *d);

/* create + write to memory + destroy. Caller frees *data. */
glesllm_status demo_model_to_memory(const demo_spec *spec, uint8_t **data, size_t *size);

#endif
