/* model/: a llama-family model as the engine runs it: hyperparameters from
 * the GGUF metadata and the tensors of every layer, checked for shape and
 * type before anything is uploaded. Knows no GPU.
 *
 * Architectures: `llama` (Llama 2/3, Mistral, SmolLM, TinyLlama: RoPE on
 * adjacent pairs; with experts, Mixtral), `qwen2` (Q/K/V biases, NeoX RoPE on
 * pairs half a head apart), `qwen2moe` (qwen2's attention, experts and a
 * shared expert), `olmoe` (NeoX RoPE after an RMSNorm of Q and of K over
 * their width, experts), `qwen3` (NeoX RoPE after an RMSNorm of each head of
 * Q and K, no biases), `qwen3moe` (qwen3's attention, experts) and `phi3`
 * (Phi-3, Phi-4: Q|K|V in one tensor, gate|up in another, NeoX RoPE, a
 * sliding window on every layer where the file gives one), `smollm3`
 * (llama's, without RoPE on every fourth layer), `mamba` (Mamba-1: no
 * attention, each layer a selective state-space block whose recurrent state
 * takes the KV cache's place; model_hparams.ssm), `mamba2` (Mamba-2: heads
 * of channels sharing a scalar decay, B and C from the convolved input in
 * groups, a grouped norm before the output) and `jamba` (layers of
 * Mamba blocks or of attention without RoPE, as attention.head_count_kv
 * says a layer, each followed by a FFN or experts not renormalised) and
 * `gemma2` (the embeddings times sqrt(n_embd), NeoX RoPE, a sliding window
 * on every other layer, attention scores and logits soft-capped, a norm
 * after the attention and after the FFN as well as before, GELU), `gemma3`
 * (Gemma 2's without soft caps, each head of Q and K RMS-normalised, the
 * window on five layers of six, which turn by RoPE of base 10000 unscaled)
 * and
 * `rwkv7` (RWKV-7: LayerNorms with biases, each layer a time mix whose
 * recurrent state is a matrix a head updated by a delta rule, and a channel
 * mix, both reading the previous token's input; model_hparams.rwkv). */
#ifndef GLESLLM_MODEL_MODEL_H
#define GLESLLM_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef enum model_arch {
    MODEL_ARCH_LLAMA,
    MODEL_ARCH_QWEN2,
    MODEL_ARCH_QWEN2MOE,
    MODEL_ARCH_OLMOE,
    MODEL_ARCH_QWEN3,
    MODEL_ARCH_QWEN3MOE,
    MODEL_ARCH_PHI3,
    MODEL_ARCH_SMOLLM3,
    MODEL_ARCH_MAMBA,
    MODEL_ARCH_MAMBA2,
    MODEL_ARCH_JAMBA,
    MODEL_ARCH_GEMMA2,
    MODEL_ARCH_GEMMA3,
    MODEL_ARCH_RWKV7
} model_arch;

/* An RMSNorm of Q and K before RoPE (attn_q_norm, attn_k_norm): none, over
 * the whole width (OLMoE), or a head at a time with one weight for all
 * heads (Qwen3). */
typedef enum model_qk_norm { MODEL_QK_NONE, MODEL_QK_WIDTH, MODEL_QK_HEAD } model_qk_norm;

/* The most experts a layer may have (llama.cpp's limit too), and the most a
 * token may use. */
#define MODEL_MAX_EXPERTS 256
#define MODEL_MAX_EXPERTS_USED 16

/* The widest convolution and the most state values a channel of a Mamba
 * block that glesllm runs (Mamba-1's are 4 and 16). */
#define MODEL_SSM_MAX_CONV 8
#define MODEL_SSM_MAX_STATE 128
/* The largest RWKV head (the releases' are 64) */
#define MODEL_RWKV_MAX_HEAD 128

typedef struct model_hparams {
    model_arch arch;
    char arch_name[32];
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx_train;
    float eps;         /* RMSNorm epsilon */
    float rope_base;   /* theta base */
    float rope_scale;  /* position multiplier: 1 / linear scaling factor */
    const float *rope_freqs; /* head_dim / 2 frequency factors (rope_freqs.weight, Llama
                                3.1/3.2): pair i's angle divided by factor i; NULL: none */
    /* LongRoPE (Phi-3 128k, Phi-3.5): factors as rope_freqs's, the long ones
     * for a context past n_ctx_orig positions, else the short ones (NULL:
     * none); cos and sin times rope_attn_factor (rope.scaling.attn_factor) */
    const float *rope_long, *rope_short;
    uint32_t n_ctx_orig;
    float rope_attn_factor;
    bool rope_neox;    /* pairs (i, i + head_dim/2) instead of (2i, 2i+1) */
    bool qkv_bias;     /* Q, K and V have biases */
    model_qk_norm qk_norm; /* Q and K normalised before RoPE; model_qk_spans */
    uint32_t n_swa; /* a sliding window of n_swa positions on the layers model_layer_window
                       says (0: none) */
    /* Gemma 2: x starts as the embedding times embd_scale (0: 1); attention
     * scores are q . k times attn_scale (0: 1 / sqrt(head_dim)), then
     * cap tanh(s / cap) with cap attn_softcap (0: none); the logits likewise
     * with final_softcap; the FFN's gate through GELU (tanh) instead of SiLU;
     * post_norms: x += RMSNorm(out) * post weight after attention and FFN */
    float embd_scale, attn_scale, attn_softcap, final_softcap;
    bool gelu, post_norms;
    /* the window on every layer but each swa_period-th (0: on every layer;
     * model_info.h model_arch_swa_period), and (Gemma 3) those layers' RoPE of base
     * rope_base_swa without the file's scaling (0: the model's RoPE on
     * every layer) */
    uint32_t swa_period;
    float rope_base_swa;
    uint32_t no_rope_period; /* > 0: layer il has no RoPE where (il + 1) % it is 0 (SmolLM3) */
    /* Mixture of experts (n_expert 0: a dense model): a token's FFN is the
     * sum of the n_expert_used experts its router scores highest, each of
     * n_ff_exp rows, weighted by their softmax probabilities (renormalised
     * over the chosen ones where expert_norm, times expert_scale); qwen2moe
     * adds a shared expert of n_ff_shexp rows gated by a sigmoid. */
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    bool expert_norm;
    float expert_scale;
    /* A Mamba block (ssm: the model has them): the input projected to
     * d_inner channels and their gate, a causal convolution of d_conv taps
     * over each channel, a selective scan of d_state values a channel whose
     * step size comes through a rank dt_rank projection; dt_b_c_rms: the
     * step's input, B and C RMS-normalised (FalconMamba; Jamba's times
     * weights, model_layer.ssm_*_norm). */
    bool ssm, ssm_dt_b_c_rms;
    uint32_t ssm_d_conv, ssm_d_inner, ssm_d_state, ssm_dt_rank;
    /* Mamba-2 (ssm_mamba2): ssm_dt_rank is its head count, each head
     * ssm_d_inner / heads channels with one decay; B and C come from the
     * convolved input, ssm_n_group of them (head h takes group h % groups,
     * as llama.cpp does) */
    bool ssm_mamba2;
    uint32_t ssm_n_group;
    /* RWKV-7 (rwkv): heads of rwkv_head values (n_embd / rwkv_head of them),
     * each with a rwkv_head x rwkv_head state; the ranks of the low-rank
     * paths of the decay, the in-context learning rate, the value residual
     * and the gate; eps is the LayerNorms' */
    bool rwkv;
    uint32_t rwkv_head, rwkv_lora_w, rwkv_lora_a, rwkv_lora_v, rwkv_lora_g;
    int32_t bos, eos;  /* token ids, -1 when the file has none */
} model_hparams;

/* Whether the model keeps a recurrent state (Mamba blocks, RWKV). */
static inline bool model_hp_recurrent(const model_hparams *hp) { return hp->ssm || hp->rwkv; }

/* One tensor of the file: rows of `cols` values of `type`, GGUF layout. */
typedef struct model_tensor {
    const char *name;
    uint32_t type;
    uint64_t rows, cols;
    const void *data;
} model_tensor;

/* Bytes of one row of t in the GGUF layout. */
static inline uint64_t model_tensor_row_bytes(const model_tensor *t)
{
    return t->cols / ggml_block_size(t->type) * ggml_type_size(t->type);
}

/* Bytes of all of t in the GGUF layout. */
static inline uint64_t model_tensor_bytes(const model_tensor *t)
{
    return t->rows * model_tensor_row_bytes(t);
}

typedef struct model_layer {
    model_tensor attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    model_tensor bq, bk, bv; /* qwen2: biases (rows 1), else data NULL */
    model_tensor q_norm, k_norm; /* model_hparams.qk_norm: their weights, else data NULL */
    /* experts (data NULL in a dense model, whose gate/up/down are then set):
     * the router (n_expert rows); each expert tensor is n_expert matrices
     * one after the other, so expert e's row r is row e * n_ff_exp + r
     * (down: e * n_embd + r); the shared expert and its gate (one row) */
    model_tensor router, gate_exps, up_exps, down_exps;
    model_tensor gate_shexp, up_shexp, down_shexp, shexp_gate;
    /* a Mamba block (model_hparams.ssm): in (x | z, 2 d_inner rows), the
     * convolution's taps (d_inner rows of d_conv) and bias, x (dt | B | C
     * rows from the convolved x), dt (d_inner rows of dt_rank) and its bias,
     * A (d_inner rows of d_state, stored as -exp(A_log)), D, out */
    model_tensor ssm_in, ssm_conv, ssm_conv_b, ssm_x, ssm_dt, ssm_dt_b, ssm_a, ssm_d, ssm_out;
    model_tensor ssm_dt_norm, ssm_b_norm, ssm_c_norm; /* Jamba's norms' weights, else data NULL */
    model_tensor ssm_norm; /* Mamba-2's grouped norm's weights (n_group rows), else data NULL */
    model_tensor attn_post_norm, ffn_post_norm; /* model_hparams.post_norms, else data NULL */
    /* RWKV-7 (model_hparams.rwkv): attn_norm and ffn_norm are LayerNorms
     * with these biases; the time mix's receptance, key, value and output
     * are wq, wk, wv and wo, the channel mix's key and value up and down;
     * tm_lerp holds the six token-shift mixes (r w k v a g), then the
     * decay (w), learning rate (a), value residual (v) and gate (g) paths:
     * a vector and two low-rank matrices each (the gate's without vector),
     * k_k, k_a, r_k, the group norm's weight and bias and the channel mix's
     * token-shift mix */
    model_tensor attn_norm_b, ffn_norm_b;
    model_tensor tm_lerp, tm_w0, tm_w1, tm_w2, tm_a0, tm_a1, tm_a2, tm_v0, tm_v1, tm_v2;
    model_tensor tm_g1, tm_g2, tm_k_k, tm_k_a, tm_r_k, tm_ln, tm_ln_b, cm_lerp;
    bool recurrent; /* a Mamba block (its ssm_* tensors set) or an RWKV time mix in place
                       of attention */
} model_layer;

typedef struct model {
    const gguf_file *file; /* not owned: stays open while the model is used */
    model_hparams hp;
    model_tensor tok_embd, out_norm, output; /* output == tok_embd when tied */
    model_tensor tok_norm, tok_norm_b, out_norm_b; /* RWKV: the embeddings' LayerNorm, the
                                                      output norm's bias; else data NULL */
    model_tensor rope_freqs; /* data NULL when the file has none */
    model_tensor rope_long, rope_short; /* LongRoPE's factors: data NULL when none */
    bool tied;
    model_layer *layers;
} model;

/* Reads and checks the hyperparameters and every tensor. An architecture we
 * do not run, a missing tensor, a shape that does not match the metadata or
 * a type without a GPU layout is an error naming it. */
glesllm_status model_open(const gguf_file *f, model *out);
void model_close(model *m);

/* The layers of m with a Mamba block or an RWKV time mix in place of
 * attention. */
uint32_t model_recurrent_layers(const model *m);

/* The values one Q norm and one K norm cover (model_hparams.qk_norm: the
 * width, or a head; none: 0). */
void model_qk_spans(const model_hparams *hp, uint32_t *q_span, uint32_t *k_span);

/* The channels of a Mamba block's convolution: d_inner (Mamba-2: its x,
 * B and C, d_inner + 2 x n_group x d_state). */
static inline uint32_t ssm_conv_channels(const model_hparams *hp)
{
    return hp->ssm_d_inner + (hp->ssm_mamba2 ? 2 * hp->ssm_n_group * hp->ssm_d_state : 0);
}

/* The rows of a Mamba block's in projection: x | z (Mamba-2: z | x B C |
 * a step a head). */
static inline uint32_t ssm_in_width(const model_hparams *hp)
{
    return hp->ssm_mamba2 ? hp->ssm_d_inner + ssm_conv_channels(hp) + hp->ssm_dt_rank
                          : 2 * hp->ssm_d_inner;
}

/* Whether layer il rotates Q and K (RoPE). */
bool model_layer_rope(const model_hparams *hp, uint32_t il);

/* The positions layer il's queries see back from their own (its sliding
 * window), 0: all of them. */
uint32_t model_layer_window(const model_hparams *hp, uint32_t il);

/* The hyperparameters of layer il's RoPE: hp's, or Gemma 3's local ones
 * (rope_base_swa, no scaling or factors) on its window layers. */
model_hparams model_layer_rope_hp(const model_hparams *hp, uint32_t il);

/* The RoPE rotation of pair i (0 <= i < head_dim/2) at position pos < n_pos
 * (a context of n_pos), as cos/sin times rope_attn_factor: theta = scale *
 * pos * base^(-2i/head_dim) / freqs[i] (freqs: rope_freqs, or LongRoPE's for
 * a context of n_pos, where the file has them), computed the way llama.cpp
 * does (f32, the power built by repeated multiplication). */
void model_rope_table(const model_hparams *hp, uint32_t n_pos, float *cos_sin);

#endif
