/* What a GGUF model is, from its metadata and tensor infos alone (no tensor
 * data, no GPU): the figures `glesllm info MODEL` prints. */
#ifndef GLESLLM_MODEL_INFO_H
#define GLESLLM_MODEL_INFO_H

#include "gguf/gguf.h"

typedef struct model_type_use {
    uint64_t tensors, bytes, elements;
} model_type_use;

typedef struct model_info {
    char arch[64];          /* general.architecture ("" if absent) */
    char name[256];         /* general.name */
    uint64_t n_params;      /* elements of all tensors */
    uint32_t n_layers, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx_train;
    uint32_t n_expert, n_expert_used; /* {arch}.expert_count, _used_count; 0: dense */
    /* {arch}.ssm.*: a state-space model's channels, state values a channel,
     * convolution taps and step rank (0: none) */
    uint32_t ssm_d_inner, ssm_d_state, ssm_d_conv, ssm_dt_rank;
    uint32_t ssm_n_group; /* Mamba-2's groups of B and C (ssm.group_count), 0: none */
    /* the layers with attention (a KV cache): all of a transformer's, none
     * of Mamba's, Jamba's where its attention.head_count_kv array is not 0
     * (n_head_kv then that value) */
    uint32_t n_attn_layers;
    /* {arch}.attention.sliding_window (0: none) and the layers it is on, as
     * the architecture places it (Gemma 2: every other, Gemma 3: five of
     * six, others: all) */
    uint32_t window, n_window_layers;
    const char *rope_type;  /* "norm", "neox", "none" or "unknown" (by architecture) */
    float rope_base;        /* {arch}.rope.freq_base, default 10000 */
    uint32_t rope_dims;     /* {arch}.rope.dimension_count, 0 if absent */
    float rms_eps;          /* {arch}.attention.layer_norm_rms_epsilon, 0 if absent */
    float norm_eps;         /* {arch}.attention.layer_norm_epsilon (LayerNorm's), 0 if absent */
    uint32_t wkv_head_size; /* {arch}.wkv.head_size: RWKV's head, 0: none */
    /* whether the file has attention.key_length (not 0), rope.dimension_count
     * and the epsilon (any value): a key that is there but wrong is said as such */
    bool head_dim_given, rope_dims_given, rms_eps_given;
    char rope_scaling[32];  /* "none", "linear", "yarn", ... */
    float rope_factor;
    uint64_t n_vocab;
    char tokenizer_model[64], tokenizer_pre[64];
    model_type_use types[GGML_TYPE_MAX_ID];
    uint64_t tensor_bytes, file_size;
    uint32_t gguf_version;
} model_info;

glesllm_status model_info_read(const gguf_file *f, model_info *out);

/* An architecture's period of layers without the window where its file has
 * one: layer il has none where (il + 1) % period is 0 (Gemma 2: 2, Gemma 3:
 * 6); 0: the window on every layer (Phi-3). The hyperparameters
 * (model_hparams.swa_period) and info's count of window layers read it. */
uint32_t model_arch_swa_period(const char *arch);

/* GPU memory the model needs at a context of n_ctx tokens: weights as stored,
 * the F16 KV cache (2 x attention layers x n_ctx x kv_heads x head_dim x 2
 * bytes; a sliding-window layer's ring_positions at most), a
 * state-space or RWKV model's recurrent state (F32, three copies: before and after
 * the last pass, and a rollback's), and activations (residual, Q/K/V, FFN, logits, attention
 * scores per head). */
typedef struct model_memory {
    uint64_t weights, kv_cache, recurrent, activations, total;
} model_memory;
model_memory model_info_memory(const model_info *mi, uint32_t n_ctx);
/* The positions a window layer keeps at a context of n_ctx with the default
 * chunk and page (n_ctx where its ring would not be smaller). */
uint32_t model_info_ring_positions(const model_info *mi, uint32_t n_ctx);

#endif
