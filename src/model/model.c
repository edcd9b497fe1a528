/* Hyperparameters and tensors of a llama-family GGUF model. See model.h. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/model_info.h"
#include "quant/quant_gpu.h"

/* Finds `name` and checks it is n_mat matrices of rows x cols (n_mat 1: a
 * matrix, rows 1 too: a vector); out->rows counts the rows of all of them. */
static glesllm_status get_tensor_n(const gguf_file *f, const char *name, uint64_t n_mat,
                                   uint64_t rows, uint64_t cols, bool optional, model_tensor *out)
{
    memset(out, 0, sizeof *out);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        if (optional)
            return GLESLLM_OK;
        return err_set(GLESLLM_ERR_FORMAT, "the model has no tensor %s", name);
    }
    /* (dimensions past the ones asked must be 1, as llama.cpp checks them:
     * [64, 256, 2] is not a 512 x 64 matrix) */
    bool flat = t->ne[2] == n_mat;
    for (uint32_t d = 3; d < GGUF_MAX_DIMS; d++)
        flat = flat && t->ne[d] == 1;
    if (t->ne[0] != cols || t->ne[1] != rows || !flat) {
        char want[96];
        if (n_mat > 1)
            snprintf(want, sizeof want, "[%llu, %llu, %llu] (columns, rows, experts)",
                     (unsigned long long)cols, (unsigned long long)rows,
                     (unsigned long long)n_mat);
        else
            snprintf(want, sizeof want, "[%llu, %llu] (columns, rows)", (unsigned long long)cols,
                     (unsigned long long)rows);
        return err_set(GLESLLM_ERR_FORMAT,
                       "tensor %s has shape [%llu, %llu, %llu, %llu]; the metadata says %s: the "
                       "file is damaged or of another architecture",
                       name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], want);
    }
    if (!quant_gpu_layout_of(t->type))
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "tensor %s is of type %s, which glesllm cannot run yet; supported: F32, "
                       "F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K",
                       name, ggml_type_name(t->type));
    out->name = t->name;
    out->type = t->type;
    out->rows = rows * n_mat;
    out->cols = cols;
    out->data = t->data;
    return GLESLLM_OK;
}

/* Rows [row0, row0 + rows) of t, as a tensor of their own (the same name) */
static model_tensor row_range(const model_tensor *t, uint64_t row0, uint64_t rows)
{
    model_tensor r = *t;
    r.rows = rows;
    r.data = (const uint8_t *)t->data + row0 * model_tensor_row_bytes(t);
    return r;
}

static glesllm_status get_tensor(const gguf_file *f, const char *name, uint64_t rows,
                                 uint64_t cols, bool optional, model_tensor *out)
{
    return get_tensor_n(f, name, 1, rows, cols, optional, out);
}

/* A tensor of a layer: `name` after "blk.N.", n_mat matrices of rows x
 * cols, looked for where present. */
typedef struct layer_want {
    model_tensor *t;
    const char *name;
    uint64_t n_mat, rows, cols;
    bool present;
} layer_want;

static glesllm_status get_layer(const gguf_file *f, uint32_t il, const layer_want *w, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!w[k].present)
            continue; /* (a tensor there all the same: check_all_read) */
        char name[96];
        snprintf(name, sizeof name, "blk.%u.%s", il, w[k].name);
        glesllm_status st = get_tensor_n(f, name, w[k].n_mat, w[k].rows, w[k].cols, false, w[k].t);
        if (st)
            return st;
    }
    return GLESLLM_OK;
}

/* The architectures glesllm runs, and what tells them apart as data: the
 * rest of a model's description comes from its file. Adding one is an entry
 * here, its graph (model/arch/) and its entry in gpu_model.c's table. */
static const struct arch_desc {
    const char *name;
    model_arch arch;
    bool rope_neox;   /* RoPE on pairs half a head apart */
    bool qkv_bias;    /* attn_q/k/v.bias tensors */
    bool moe;         /* experts: required (else: where expert_count says) */
    bool expert_norm; /* the chosen experts' weights renormalised to sum 1 */
    bool shexp;       /* a shared expert beside the routed ones */
    model_qk_norm qk_norm; /* attn_q_norm, attn_k_norm */
    bool ff_exp_key;  /* the experts' width: expert_feed_forward_length (else feed_forward_length) */
    bool fused;       /* Q|K|V in attn_qkv and gate|up in ffn_up */
    bool swa;         /* a sliding window on every layer, where the file gives one */
    uint32_t no_rope_period; /* model_hparams.no_rope_period */
    bool ssm;         /* Mamba blocks instead of attention and FFN (model_hparams.ssm) */
    bool hybrid;      /* with ssm: Mamba blocks in the layers whose attention.head_count_kv
                         is 0, attention in the others, a FFN after each */
    bool mamba2;      /* with ssm: Mamba-2 blocks (model_hparams.ssm_mamba2) */
    bool gemma2;      /* Gemma 2's scales, soft caps, post norms and GELU (model_hparams) */
    bool rwkv;        /* RWKV-7's time and channel mixes (model_hparams.rwkv) */
} archs[] = {
    { .name = "llama", .arch = MODEL_ARCH_LLAMA, .expert_norm = true },
    { .name = "qwen2", .arch = MODEL_ARCH_QWEN2, .rope_neox = true, .qkv_bias = true },
    { .name = "qwen2moe", .arch = MODEL_ARCH_QWEN2MOE, .rope_neox = true, .qkv_bias = true,
      .moe = true, .shexp = true, .ff_exp_key = true },
    { .name = "olmoe", .arch = MODEL_ARCH_OLMOE, .rope_neox = true, .moe = true,
      .qk_norm = MODEL_QK_WIDTH },
    { .name = "qwen3", .arch = MODEL_ARCH_QWEN3, .rope_neox = true, .qk_norm = MODEL_QK_HEAD },
    { .name = "qwen3moe", .arch = MODEL_ARCH_QWEN3MOE, .rope_neox = true, .moe = true,
      .expert_norm = true, .qk_norm = MODEL_QK_HEAD, .ff_exp_key = true },
    { .name = "phi3", .arch = MODEL_ARCH_PHI3, .rope_neox = true, .fused = true,
      .swa = true },
    /* (every fourth layer without RoPE: llama.cpp's fixed rule, as the model's
     * own no_rope_layer_interval) */
    { .name = "smollm3", .arch = MODEL_ARCH_SMOLLM3, .no_rope_period = 4 },
    { .name = "gemma2", .arch = MODEL_ARCH_GEMMA2, .rope_neox = true, .swa = true,
      .gemma2 = true },
    { .name = "gemma3", .arch = MODEL_ARCH_GEMMA3, .rope_neox = true, .swa = true,
      .gemma2 = true, .qk_norm = MODEL_QK_HEAD },
    { .name = "mamba", .arch = MODEL_ARCH_MAMBA, .ssm = true },
    { .name = "mamba2", .arch = MODEL_ARCH_MAMBA2, .ssm = true, .mamba2 = true },
    /* (its attention turns nothing: a period of 1 leaves every layer without RoPE) */
    { .name = "jamba", .arch = MODEL_ARCH_JAMBA, .ssm = true, .hybrid = true,
      .no_rope_period = 1 },
    { .name = "rwkv7", .arch = MODEL_ARCH_RWKV7, .rwkv = true },
};

/* The entry of archs[] of an architecture read_hparams took. */
static const struct arch_desc *arch_desc_of(model_arch arch)
{
    size_t i = 0;
    while (archs[i].arch != arch)
        i++;
    return &archs[i];
}

/* The hyperparameters a model reads: where one is there, it must be a number
 * of its kind (an integer of any width that fits 32 bits, or a float), else
 * the file is damaged; a missing one is said by read_hparams. */
static glesllm_status check_hp_types(const gguf_file *f, const char *arch, bool hybrid)
{
    static const struct {
        const char *suffix;
        bool is_float;
    } keys[] = { { "block_count", false },
                 { "embedding_length", false },
                 { "feed_forward_length", false },
                 { "attention.head_count", false },
                 { "attention.head_count_kv", false },
                 { "attention.key_length", false },
                 { "context_length", false },
                 { "rope.dimension_count", false },
                 { "rope.freq_base", true },
                 { "attention.layer_norm_rms_epsilon", true },
                 { "rope.scaling.factor", true },
                 { "rope.scale_linear", true },
                 { "rope.scaling.attn_factor", true },
                 { "rope.scaling.original_context_length", false },
                 { "expert_count", false },
                 { "expert_used_count", false },
                 { "expert_feed_forward_length", false },
                 { "expert_shared_feed_forward_length", false },
                 { "expert_gating_func", false },
                 { "attention.sliding_window", false },
                 { "ssm.conv_kernel", false },
                 { "ssm.inner_size", false },
                 { "ssm.state_size", false },
                 { "ssm.time_step_rank", false },
                 { "ssm.group_count", false },
                 { "wkv.head_size", false },
                 { "attention.decay_lora_rank", false },
                 { "attention.iclr_lora_rank", false },
                 { "attention.value_residual_mix_lora_rank", false },
                 { "attention.gate_lora_rank", false },
                 { "token_shift_count", false },
                 { "attention.layer_norm_epsilon", true },
                 { "attn_logit_softcapping", true },
                 { "final_logit_softcapping", true },
                 { "expert_weights_scale", true } };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", arch, keys[i].suffix);
        if (!gguf_find(f, key))
            continue;
        if (hybrid && strcmp(keys[i].suffix, "attention.head_count_kv") == 0)
            continue; /* (an array a layer: read_layer_kinds) */
        uint32_t u;
        float v;
        glesllm_status st = keys[i].is_float ? gguf_get_f32(f, key, &v) : gguf_get_u32(f, key, &u);
        if (st != GLESLLM_OK)
            return err_prefix(st, "the file is damaged: ");
        if (keys[i].is_float && !isfinite(v))
            return err_set(GLESLLM_ERR_FORMAT, "%s is %g, not a finite number: the file is damaged",
                           key, v);
    }
    return GLESLLM_OK;
}

/* The experts' hyperparameters of a file of architecture archs[ai] (none:
 * a dense model). */
static glesllm_status read_experts(const gguf_file *f, size_t ai, const model_info *mi,
                                   model_hparams *hp)
{
    const char *a = archs[ai].name;
    char key[160];
    hp->n_expert = mi->n_expert;
    hp->n_expert_used = mi->n_expert_used;
    if (!hp->n_expert && !archs[ai].moe)
        return GLESLLM_OK;
    if (!hp->n_expert || hp->n_expert > MODEL_MAX_EXPERTS)
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s.expert_count is %u; a %s model has 1 to %d experts a layer: the file "
                       "is damaged", a, hp->n_expert, a, MODEL_MAX_EXPERTS);
    snprintf(key, sizeof key, "%s.expert_used_count", a);
    if (!gguf_find(f, key))
        return err_set(GLESLLM_ERR_FORMAT,
                       "the model has %u experts a layer but no %s (how many a token uses): the "
                       "file is damaged", hp->n_expert, key);
    if (!hp->n_expert_used || hp->n_expert_used > hp->n_expert)
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s.expert_used_count is %u, for %u experts: it must be 1 to %u; the file "
                       "is damaged", a, hp->n_expert_used, hp->n_expert, hp->n_expert);
    if (hp->n_expert_used > MODEL_MAX_EXPERTS_USED)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "%s.expert_used_count is %u; glesllm routes a token to at most %d experts",
                       a, hp->n_expert_used, MODEL_MAX_EXPERTS_USED);
    /* (llama.cpp: Mixtral's and OLMoE's experts are feed_forward_length
     * wide; qwen2moe's and qwen3moe's expert_feed_forward_length, qwen2moe's
     * else feed_forward_length / expert_used_count) */
    hp->n_ff_exp = mi->n_ff;
    hp->n_ff_shexp = 0;
    if (archs[ai].ff_exp_key)
        hp->n_ff_exp = gguf_get_arch_u32(f, a, "expert_feed_forward_length",
                                         archs[ai].shexp ? mi->n_ff / hp->n_expert_used : 0);
    if (archs[ai].shexp)
        hp->n_ff_shexp = gguf_get_arch_u32(f, a, "expert_shared_feed_forward_length", mi->n_ff);
    if (!hp->n_ff_exp || (archs[ai].shexp && !hp->n_ff_shexp))
        return err_set(GLESLLM_ERR_FORMAT,
                       "the experts of this %s model have no width (%s.expert_feed_forward_length "
                       "and feed_forward_length): the file is damaged", a, a);
    hp->expert_norm = archs[ai].expert_norm;
    hp->expert_scale = 1.0f;
    snprintf(key, sizeof key, "%s.expert_weights_scale", a);
    if (gguf_find(f, key)) {
        gguf_get_f32(f, key, &hp->expert_scale);
        if (!(hp->expert_scale > 0.0f))
            return err_set(GLESLLM_ERR_FORMAT, "%s is %g; it must be above 0: the file is damaged",
                           key, hp->expert_scale);
    }
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    if (gguf_find(f, key)) {
        glesllm_status st = gguf_get_bool(f, key, &hp->expert_norm);
        if (st)
            return err_prefix(st, "the file is damaged: ");
    }
    /* 1: softmax, 2: sigmoid (DeepSeek-V3's, which these architectures do not use) */
    uint32_t gating = gguf_get_arch_u32(f, a, "expert_gating_func", 1);
    if (gating != 1)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "%s.expert_gating_func is %u; glesllm routes %s experts by softmax (1) only",
                       a, gating, a);
    return GLESLLM_OK;
}

/* The sliding window of an architecture that has one: the file's
 * attention.sliding_window, else (Phi-3 files written before the key) the
 * value llama.cpp assumes for the shape. */
static glesllm_status read_window(const gguf_file *f, const struct arch_desc *ad,
                                  const model_info *mi, model_hparams *hp)
{
    if (!ad->swa)
        return GLESLLM_OK;
    uint32_t def = 0, n_ctx = mi->n_ctx_train, nl = hp->n_layer;
    if (ad->arch == MODEL_ARCH_GEMMA3)
        def = 0; /* (llama.cpp requires the key of Gemma 3 files) */
    else if (ad->gemma2)
        def = 4096; /* (llama.cpp's for Gemma 2 files without the key) */
    else if ((nl == 32 || nl == 40) && n_ctx == 4096)
        def = 2047; /* Phi-3-mini-4k, Phi-3-medium-4k */
    else if (nl == 32 && hp->n_head_kv == 32 && n_ctx == 131072)
        def = 262144; /* Phi-3-mini-128k */
    else if (nl == 40 && n_ctx == 131072)
        def = 131072; /* Phi-3-medium-128k */
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window", ad->name);
    if (!gguf_find(f, key) && !def)
        return err_set(GLESLLM_ERR_FORMAT,
                       "the model has no %s (the positions a query sees; 0 for none), and its "
                       "shape is none whose window is known: convert it again with a current "
                       "llama.cpp", key);
    hp->n_swa = gguf_get_arch_u32(f, ad->name, "attention.sliding_window", def);
    return GLESLLM_OK;
}

/* A hybrid model's attention.head_count_kv: an array of a value a layer, 0
 * where the layer is a Mamba block, the same value for every attention
 * layer (which becomes n_head_kv); the layers' kinds are set by
 * model_open (layer_kinds). */
static glesllm_status read_kv_heads(const gguf_file *f, const char *a, model_hparams *hp)
{
    char key[160];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
    const gguf_value *arr;
    if (!gguf_find(f, key) || gguf_get_array(f, key, GGUF_TYPE_COUNT, &arr) != GLESLLM_OK ||
        arr->v.arr.count != hp->n_layer || arr->v.arr.type == GGUF_TYPE_STRING ||
        arr->v.arr.type == GGUF_TYPE_ARRAY)
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s must be an array of a number for each of the %u layers (0: a Mamba "
                       "block): the file is damaged", key, hp->n_layer);
    hp->n_head_kv = 0;
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        double v = gguf_array_number(arr, i);
        if (v < 0 || v > hp->n_head || v != (uint32_t)v || (v && hp->n_head_kv && v != hp->n_head_kv))
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "%s[%u] is %g; glesllm runs attention layers of one KV head count "
                           "that divides %u heads, and Mamba blocks (0)", key, i, v, hp->n_head);
        if (v)
            hp->n_head_kv = (uint32_t)v;
    }
    if (!hp->n_head_kv) /* (no attention layer: the kernels' shape is never used) */
        hp->n_head_kv = hp->n_head;
    return GLESLLM_OK;
}

/* The shape of a model's Mamba blocks (the limits are those of the scan
 * kernel, ops/ssm.h). */
static glesllm_status read_ssm_shape(const gguf_file *f, const model_info *mi, bool hybrid,
                                     model_hparams *hp)
{
    const char *a = mi->arch;
    hp->ssm = true;
    const struct {
        const char *suffix;
        uint32_t *v;
    } keys[] = { { "block_count", &hp->n_layer },
                 { "embedding_length", &hp->n_embd },
                 { "ssm.conv_kernel", &hp->ssm_d_conv },
                 { "ssm.inner_size", &hp->ssm_d_inner },
                 { "ssm.state_size", &hp->ssm_d_state },
                 { "ssm.time_step_rank", &hp->ssm_dt_rank } };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", a, keys[i].suffix);
        *keys[i].v = gguf_get_arch_u32(f, a, keys[i].suffix, 0);
        if (!*keys[i].v)
            return err_set(GLESLLM_ERR_FORMAT, gguf_find(f, key) ? "%s is 0: the file is damaged"
                                                                 : "the model has no %s", key);
    }
    char key[160];
    snprintf(key, sizeof key, "%s.ssm.dt_b_c_rms", a);
    if (gguf_find(f, key) && gguf_get_bool(f, key, &hp->ssm_dt_b_c_rms) != GLESLLM_OK)
        return err_set(GLESLLM_ERR_FORMAT, "%s is not a boolean: the file is damaged", key);
    if (hybrid) /* (Jamba's norms of dt, B and C, with weights) */
        hp->ssm_dt_b_c_rms = true;
    if (hp->ssm_mamba2) {
        hp->ssm_n_group = gguf_get_arch_u32(f, a, "ssm.group_count", 0);
        uint32_t g = hp->ssm_n_group, nh = hp->ssm_dt_rank;
        if (!g || hp->ssm_d_inner % nh || nh % g)
            return err_set(GLESLLM_ERR_FORMAT,
                           "%s.ssm.group_count is %u, for %u heads (ssm.time_step_rank) of %u "
                           "channels (ssm.inner_size): the heads must divide the channels and "
                           "the groups the heads; the file is damaged", a, g, nh,
                           hp->ssm_d_inner);
    }
    if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > MODEL_SSM_MAX_CONV || hp->ssm_d_state > MODEL_SSM_MAX_STATE ||
        hp->ssm_dt_rank > hp->ssm_d_inner)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "a Mamba block of a %u-tap convolution, %u state values a channel and a "
                       "step of rank %u for %u channels is not supported (2 to %d taps, at most "
                       "%d state values, a rank of at most the channels)",
                       hp->ssm_d_conv, hp->ssm_d_state, hp->ssm_dt_rank, hp->ssm_d_inner,
                       MODEL_SSM_MAX_CONV, MODEL_SSM_MAX_STATE);
    return GLESLLM_OK;
}

/* RWKV-7's shape: its heads and the ranks of its low-rank paths (the
 * limits are the time-mix kernel's, ops/rwkv.h). */
static glesllm_status read_rwkv(const gguf_file *f, const model_info *mi, model_hparams *hp)
{
    const char *a = mi->arch;
    hp->rwkv = true;
    const struct {
        const char *suffix;
        uint32_t *v;
    } keys[] = { { "block_count", &hp->n_layer },
                 { "embedding_length", &hp->n_embd },
                 { "feed_forward_length", &hp->n_ff },
                 { "wkv.head_size", &hp->rwkv_head },
                 { "attention.decay_lora_rank", &hp->rwkv_lora_w },
                 { "attention.iclr_lora_rank", &hp->rwkv_lora_a },
                 { "attention.value_residual_mix_lora_rank", &hp->rwkv_lora_v },
                 { "attention.gate_lora_rank", &hp->rwkv_lora_g } };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", a, keys[i].suffix);
        *keys[i].v = gguf_get_arch_u32(f, a, keys[i].suffix, 0);
        if (!*keys[i].v)
            return err_set(GLESLLM_ERR_FORMAT,
                           gguf_find(f, key) ? "%s is 0: the file is damaged"
                           : i == 7 ? "the model has no %s: glesllm runs RWKV-7 models with a "
                                      "gate (the RWKV-7 releases have one)"
                                    : "the model has no %s", key);
    }
    if (hp->n_embd % hp->rwkv_head)
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s.embedding_length %u is not a multiple of wkv.head_size %u: the file is "
                       "damaged", a, hp->n_embd, hp->rwkv_head);
    if (hp->rwkv_head % 4 || hp->rwkv_head > MODEL_RWKV_MAX_HEAD)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "RWKV heads of %u values are not supported (a multiple of 4, at most %d)",
                       hp->rwkv_head, MODEL_RWKV_MAX_HEAD);
    uint32_t shifts = gguf_get_arch_u32(f, a, "token_shift_count", 2);
    if (shifts != 2)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "%s.token_shift_count is %u; an RWKV-7 layer shifts 2 inputs (its time "
                       "and channel mixes')", a, shifts);
    hp->eps = mi->norm_eps;
    if (!(hp->eps > 0.0f))
        return err_set(GLESLLM_ERR_FORMAT,
                       "the model has no %s.attention.layer_norm_epsilon above 0 (its LayerNorms' "
                       "epsilon): the file is damaged", a);
    return GLESLLM_OK;
}

/* Gemma 2's scales and soft caps (llama.cpp's defaults where a key is
 * missing); its query scale is 1 / sqrt(n_embd / n_head) for the 27B shape
 * (46 layers), as llama.cpp takes it, else 1 / sqrt(head_dim). Gemma 3's
 * the same without caps (its 27B: 62 layers), with the window's period and
 * local RoPE base llama.cpp fixes for it. */
static glesllm_status read_gemma2(const gguf_file *f, const char *a, model_hparams *hp)
{
    hp->swa_period = model_arch_swa_period(a);
    if (hp->arch == MODEL_ARCH_GEMMA3) { /* (no caps; llama.cpp's fixed local RoPE) */
        hp->rope_base_swa = 10000.0f;
        hp->embd_scale = sqrtf((float)hp->n_embd);
        hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                           : 1.0f / sqrtf((float)hp->head_dim);
        hp->gelu = hp->post_norms = true;
        return GLESLLM_OK;
    }
    const struct {
        const char *suffix;
        float *v, def;
    } caps[] = { { "attn_logit_softcapping", &hp->attn_softcap, 50.0f },
                 { "final_logit_softcapping", &hp->final_softcap, 30.0f } };
    for (size_t i = 0; i < 2; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", a, caps[i].suffix);
        *caps[i].v = caps[i].def;
        if (gguf_find(f, key))
            gguf_get_f32(f, key, caps[i].v); /* (its type: check_hp_types) */
        if (!(*caps[i].v > 0.0f))
            return err_set(GLESLLM_ERR_FORMAT, "%s is %g; it must be above 0: the file is damaged",
                           key, *caps[i].v);
    }
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->attn_scale = hp->n_layer == 46 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim);
    hp->gelu = hp->post_norms = true;
    return GLESLLM_OK;
}

/* The attention's hyperparameters of a file of architecture archs[a_i]
 * (its heads, RoPE, window; a hybrid's KV heads a layer). */
static glesllm_status read_attention(const gguf_file *f, const model_info *mi, size_t a_i,
                                     model_hparams *hp)
{
    const char *a = mi->arch;
    glesllm_status st;
    /* (a missing head_count_kv is head_count's: model_info_read) */
    const struct {
        const char *suffix;
        uint32_t v;
    } needed[] = { { "block_count", hp->n_layer },
                   { "embedding_length", hp->n_embd },
                   { "feed_forward_length", hp->n_ff },
                   { "attention.head_count", hp->n_head } };
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", a, needed[i].suffix);
        if (!needed[i].v)
            return err_set(GLESLLM_ERR_FORMAT, gguf_find(f, key) ? "%s is 0: the file is damaged"
                                                                 : "the model has no %s", key);
    }
    if (archs[a_i].hybrid && (st = read_kv_heads(f, a, hp)))
        return st;
    if (hp->n_head % hp->n_head_kv)
        return err_set(GLESLLM_ERR_FORMAT,
                       "%u attention heads (%s.attention.head_count) are not a multiple of %u KV "
                       "heads (attention.head_count_kv)", hp->n_head, a, hp->n_head_kv);
    if (!mi->head_dim_given && (hp->n_embd % hp->n_head || !hp->head_dim))
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s.embedding_length %u is not a multiple of attention.head_count %u: the "
                       "file is damaged", a, hp->n_embd, hp->n_head);
    if (!hp->head_dim)
        return err_set(GLESLLM_ERR_FORMAT, "%s.attention.key_length is 0: the file is damaged", a);
    hp->rope_base = mi->rope_base;
    /* (a NaN base gives NaN logits, silently) */
    if (!(hp->rope_base > 1.0f))
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s.rope.freq_base is %g; RoPE needs a finite base above 1 (10000 is "
                       "usual): the file is damaged", a, hp->rope_base);
    hp->n_ctx_orig = gguf_get_arch_u32(f, a, "rope.scaling.original_context_length",
                                       hp->n_ctx_train);
    hp->rope_attn_factor = 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", a);
    if (gguf_find(f, key) && (gguf_get_f32(f, key, &hp->rope_attn_factor) != GLESLLM_OK ||
                              !(hp->rope_attn_factor > 0.0f) || !isfinite(hp->rope_attn_factor)))
        return err_set(GLESLLM_ERR_FORMAT, "%s is not a positive number: the file is damaged",
                       key);
    hp->rope_scale = 1.0f;
    if (strcmp(mi->rope_scaling, "linear") == 0 && mi->rope_factor > 0.0f)
        hp->rope_scale = 1.0f / mi->rope_factor;
    if (mi->rope_dims_given && (mi->rope_dims == 0 || mi->rope_dims > hp->head_dim))
        return err_set(GLESLLM_ERR_FORMAT,
                       "%s.rope.dimension_count is %u, for heads of %u dimensions: the file is "
                       "damaged", a, mi->rope_dims, hp->head_dim);
    if ((st = read_window(f, &archs[a_i], mi, hp)) != GLESLLM_OK ||
        (archs[a_i].gemma2 && (st = read_gemma2(f, a, hp)) != GLESLLM_OK))
        return st;
    return GLESLLM_OK;
}

/* mi: what model_info_read made of f */
static glesllm_status read_hparams(const gguf_file *f, const model_info *mi, model_hparams *hp)
{
    glesllm_status st;
    memset(hp, 0, sizeof *hp);
    gguf_str arch;
    if (!gguf_find(f, "general.architecture"))
        return err_set(GLESLLM_ERR_FORMAT, "the file has no general.architecture: it is no model "
                       "file, or a damaged one");
    if ((st = gguf_get_str(f, "general.architecture", &arch)) != GLESLLM_OK)
        return st;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", mi->arch);
    size_t a_i = 0;
    while (a_i < sizeof archs / sizeof archs[0] && strcmp(mi->arch, archs[a_i].name) != 0)
        a_i++;
    if (a_i == sizeof archs / sizeof archs[0] || arch.len != strlen(mi->arch))
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "architecture '%s' is not supported; glesllm runs llama (Llama 2/3, "
                       "Mistral, Mixtral, SmolLM, TinyLlama), qwen2, qwen2moe, qwen3, qwen3moe, "
                       "olmoe, phi3 (Phi-3, Phi-4), smollm3, gemma2, gemma3, mamba, mamba2, jamba "
                       "and rwkv7 models",
                       mi->arch);
    hp->arch = archs[a_i].arch;
    hp->rope_neox = archs[a_i].rope_neox;
    hp->qkv_bias = archs[a_i].qkv_bias;
    hp->qk_norm = archs[a_i].qk_norm;
    hp->no_rope_period = archs[a_i].no_rope_period;
    const char *a = mi->arch;
    if ((st = check_hp_types(f, a, archs[a_i].hybrid)) != GLESLLM_OK)
        return st;
    if ((st = read_experts(f, a_i, mi, hp)) != GLESLLM_OK)
        return st;
    hp->n_layer = mi->n_layers;
    hp->n_embd = mi->n_embd;
    hp->n_ff = mi->n_ff;
    hp->n_head = mi->n_head;
    hp->n_head_kv = mi->n_head_kv;
    hp->head_dim = mi->head_dim;
    hp->n_ctx_train = mi->n_ctx_train;
    if (mi->n_vocab > INT32_MAX)
        return err_set(GLESLLM_ERR_FORMAT, "vocabulary of %llu tokens is too large",
                       (unsigned long long)mi->n_vocab);
    hp->n_vocab = (uint32_t)mi->n_vocab;
    hp->ssm_mamba2 = archs[a_i].mamba2;
    if (archs[a_i].ssm && (st = read_ssm_shape(f, mi, archs[a_i].hybrid, hp)))
        return st;
    if (archs[a_i].rwkv) {
        if ((st = read_rwkv(f, mi, hp)))
            return st;
    } else if ((!archs[a_i].ssm || archs[a_i].hybrid) && (st = read_attention(f, mi, a_i, hp))) {
        return st; /* (Mamba's blocks have no attention) */
    }
    if (!archs[a_i].rwkv)
        hp->eps = mi->rms_eps;
    if (!(hp->eps > 0.0f))
        return err_set(GLESLLM_ERR_FORMAT,
                       mi->rms_eps_given ? "%s.attention.layer_norm_rms_epsilon is %g; it must be "
                                          "above 0: the file is damaged"
                                        : "the model has no %s.attention.layer_norm_rms_epsilon "
                                          "(a positive float)",
                       a, hp->eps);
    if (!hp->n_vocab)
        return err_set(GLESLLM_ERR_FORMAT, "the model has no vocabulary size");
    hp->bos = gguf_get_id_or_none(f, "tokenizer.ggml.bos_token_id");
    hp->eos = gguf_get_id_or_none(f, "tokenizer.ggml.eos_token_id");
    return GLESLLM_OK;
}


/* What a well-formed file may ask that the engine does not do; looked at
 * once its tensors have matched the metadata, so that a damaged file is
 * said to be damaged rather than unsupported. */
static glesllm_status check_support(const model_info *mi, const model_hparams *hp)
{
    const char *a = hp->arch_name;
    if (hp->head_dim % 2 || hp->head_dim > 256)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "heads of %u dimensions are not supported (even, at most 256)",
                       hp->head_dim);
    if (strcmp(mi->rope_scaling, "linear") != 0 && strcmp(mi->rope_scaling, "none") != 0)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "%s.rope.scaling.type '%s' is not supported (none and linear are)", a,
                       mi->rope_scaling);
    if (mi->rope_dims_given && mi->rope_dims != hp->head_dim)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "partial RoPE (%s.rope.dimension_count is %u of %u dimensions a head) is "
                       "not supported", a, mi->rope_dims, hp->head_dim);
    return GLESLLM_OK;
}

/* What the experts' tensors say against the metadata, before they are
 * looked for one by one: a router without an expert count, and the layout
 * of files converted before mid-2024 (one tensor an expert). */
static glesllm_status check_expert_layout(const gguf_file *f, const model_hparams *hp)
{
    if (!hp->n_expert && gguf_find_tensor(f, "blk.0.ffn_gate_inp.weight"))
        return err_set(GLESLLM_ERR_FORMAT,
                       "the file has an expert router (blk.0.ffn_gate_inp.weight) but no "
                       "%s.expert_count: the file is damaged", hp->arch_name);
    if (hp->n_expert && gguf_find_tensor(f, "blk.0.ffn_gate.0.weight"))
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "the file keeps each expert in its own tensor (blk.0.ffn_gate.0.weight), as "
                       "GGUF files converted before mid-2024 do; glesllm reads experts stacked in "
                       "ffn_gate_exps, ffn_up_exps and ffn_down_exps: convert the model again "
                       "with a current llama.cpp");
    return GLESLLM_OK;
}

/* Whether tensor t of the file is one the model reads. */
static bool is_read(const model *m, const gguf_tensor *t)
{
    const model_tensor *top[] = { &m->tok_embd,   &m->out_norm,  &m->output,
                                  &m->rope_freqs, &m->rope_long, &m->rope_short,
                                  &m->tok_norm,   &m->tok_norm_b, &m->out_norm_b };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (top[i]->name == t->name)
            return true;
    for (uint32_t i = 0; i < m->hp.n_layer; i++) {
        const model_layer *l = &m->layers[i];
        const model_tensor *in[] = { &l->attn_norm,  &l->wq,        &l->wk,        &l->wv,
                                     &l->wo,         &l->ffn_norm,  &l->gate,      &l->up,
                                     &l->down,       &l->bq,        &l->bk,        &l->bv,
                                     &l->router,     &l->gate_exps, &l->up_exps,   &l->down_exps,
                                     &l->gate_shexp, &l->up_shexp,  &l->down_shexp,
                                     &l->shexp_gate, &l->q_norm,    &l->k_norm,
                                     &l->ssm_in,     &l->ssm_conv,  &l->ssm_conv_b,
                                     &l->ssm_x,      &l->ssm_dt,    &l->ssm_dt_b,
                                     &l->ssm_a,      &l->ssm_d,     &l->ssm_out,
                                     &l->ssm_dt_norm, &l->ssm_b_norm, &l->ssm_c_norm,
                                     &l->ssm_norm,   &l->attn_post_norm, &l->ffn_post_norm,
                                     &l->attn_norm_b, &l->ffn_norm_b, &l->tm_lerp,
                                     &l->tm_w0,      &l->tm_w1,     &l->tm_w2,     &l->tm_a0,
                                     &l->tm_a1,      &l->tm_a2,     &l->tm_v0,     &l->tm_v1,
                                     &l->tm_v2,      &l->tm_g1,     &l->tm_g2,     &l->tm_k_k,
                                     &l->tm_k_a,     &l->tm_r_k,    &l->tm_ln,     &l->tm_ln_b,
                                     &l->cm_lerp };
        for (size_t k = 0; k < sizeof in / sizeof in[0]; k++)
            if (in[k]->name == t->name)
                return true;
    }
    return false;
}

/* Every tensor of the file is read (as llama.cpp requires): one left over
 * is a layer past block_count or a part of another architecture, and
 * running without it gives wrong tokens silently. */
static glesllm_status check_all_read(const gguf_file *f, const model *m)
{
    uint64_t n = gguf_tensor_count(f);
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (is_read(m, t))
            continue;
        unsigned blk;
        if (sscanf(t->name, "blk.%u.", &blk) == 1 && blk >= m->hp.n_layer)
            return err_set(GLESLLM_ERR_FORMAT,
                           "the file has tensor %s, but %s.block_count says %u layers: the file "
                           "is damaged",
                           t->name, m->hp.arch_name, m->hp.n_layer);
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "the file has tensor %s, which a %s model does not have; glesllm does not "
                       "know what to do with it (llama.cpp refuses such a file too)",
                       t->name, m->hp.arch_name);
    }
    return GLESLLM_OK;
}

/* The tensors of a model with Mamba blocks: each layer's block (Jamba's
 * with the norms' weights) or attention (Jamba's layers whose
 * attention.head_count_kv is not 0), then Jamba's FFN, of experts where the
 * layer has a router. */
static glesllm_status open_ssm_layers(const gguf_file *f, model *m, bool hybrid)
{
    const model_hparams *hp = &m->hp;
    uint64_t di = hp->ssm_d_inner, ds = hp->ssm_d_state, r = hp->ssm_dt_rank;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t ne = hp->n_expert, ff = hp->n_ff, ng = hp->ssm_n_group ? hp->ssm_n_group : 1;
    const gguf_value *kinds = NULL;
    if (hybrid) {
        char key[160];
        snprintf(key, sizeof key, "%s.attention.head_count_kv", hp->arch_name);
        gguf_get_array(f, key, GGUF_TYPE_COUNT, &kinds); /* (read_kv_heads checked it) */
    }
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        model_layer *l = &m->layers[i];
        l->recurrent = !kinds || gguf_array_number(kinds, i) == 0;
        char name[96];
        snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.weight", i);
        bool m2 = hp->ssm_mamba2, ssm = l->recurrent && !m2, attn = !l->recurrent, ffn = hybrid;
        bool moe = ffn && ne && gguf_find_tensor(f, name);
        const layer_want want[] = {
            { &l->attn_norm, "attn_norm.weight", 1, 1, hp->n_embd, true },
            { &l->ssm_in, "ssm_in.weight", 1, 2 * di, hp->n_embd, ssm },
            /* Mamba-2: z | x B C | dt in, the convolution over x B C, a
             * scalar A, D and step bias a head, the grouped norm */
            { &l->ssm_in, "ssm_in.weight", 1, 2 * di + 2 * ng * ds + r, hp->n_embd, m2 },
            { &l->ssm_conv, "ssm_conv1d.weight", 1, di + 2 * ng * ds, hp->ssm_d_conv, m2 },
            { &l->ssm_conv_b, "ssm_conv1d.bias", 1, 1, di + 2 * ng * ds, m2 },
            { &l->ssm_dt_b, "ssm_dt.bias", 1, 1, r, m2 },
            { &l->ssm_a, "ssm_a", 1, r, 1, m2 },
            { &l->ssm_d, "ssm_d", 1, r, 1, m2 },
            { &l->ssm_norm, "ssm_norm.weight", 1, ng, di / ng, m2 },
            { &l->ssm_out, "ssm_out.weight", 1, hp->n_embd, di, m2 },
            { &l->ssm_conv, "ssm_conv1d.weight", 1, di, hp->ssm_d_conv, ssm },
            { &l->ssm_conv_b, "ssm_conv1d.bias", 1, 1, di, ssm },
            { &l->ssm_x, "ssm_x.weight", 1, r + 2 * ds, di, ssm },
            { &l->ssm_dt, "ssm_dt.weight", 1, di, r, ssm },
            { &l->ssm_dt_b, "ssm_dt.bias", 1, 1, di, ssm },
            { &l->ssm_a, "ssm_a", 1, di, ds, ssm },
            { &l->ssm_d, "ssm_d", 1, 1, di, ssm },
            { &l->ssm_out, "ssm_out.weight", 1, hp->n_embd, di, ssm },
            { &l->ssm_dt_norm, "ssm_dt_norm.weight", 1, 1, r, ssm && hybrid },
            { &l->ssm_b_norm, "ssm_b_norm.weight", 1, 1, ds, ssm && hybrid },
            { &l->ssm_c_norm, "ssm_c_norm.weight", 1, 1, ds, ssm && hybrid },
            { &l->wq, "attn_q.weight", 1, q_dim, hp->n_embd, attn },
            { &l->wk, "attn_k.weight", 1, kv, hp->n_embd, attn },
            { &l->wv, "attn_v.weight", 1, kv, hp->n_embd, attn },
            { &l->wo, "attn_output.weight", 1, hp->n_embd, q_dim, attn },
            { &l->ffn_norm, "ffn_norm.weight", 1, 1, hp->n_embd, ffn },
            { &l->gate, "ffn_gate.weight", 1, ff, hp->n_embd, ffn && !moe },
            { &l->up, "ffn_up.weight", 1, ff, hp->n_embd, ffn && !moe },
            { &l->down, "ffn_down.weight", 1, hp->n_embd, ff, ffn && !moe },
            { &l->router, "ffn_gate_inp.weight", 1, ne, hp->n_embd, moe },
            { &l->gate_exps, "ffn_gate_exps.weight", ne, hp->n_ff_exp, hp->n_embd, moe },
            { &l->up_exps, "ffn_up_exps.weight", ne, hp->n_ff_exp, hp->n_embd, moe },
            { &l->down_exps, "ffn_down_exps.weight", ne, hp->n_embd, hp->n_ff_exp, moe },
        };
        glesllm_status st = get_layer(f, i, want, sizeof want / sizeof want[0]);
        if (st)
            return st;
    }
    return GLESLLM_OK;
}

/* n vectors of `cols` values in one tensor, its other dimensions in any
 * order ([cols, 1, 1, n]: RWKV's time_mix_lerp_fused) */
static glesllm_status get_vectors(const gguf_file *f, const char *name, uint64_t n, uint64_t cols,
                                  model_tensor *out)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return err_set(GLESLLM_ERR_FORMAT, "the model has no tensor %s", name);
    if (t->ne[0] != cols || t->ne[1] * t->ne[2] * t->ne[3] != n)
        return err_set(GLESLLM_ERR_FORMAT,
                       "tensor %s has shape [%llu, %llu, %llu, %llu]; the metadata says %llu "
                       "vectors of %llu: the file is damaged or of another architecture",
                       name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
                       (unsigned long long)n, (unsigned long long)cols);
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "tensor %s is of type %s; glesllm reads it as F32 or F16, as llama.cpp "
                       "writes it", name, ggml_type_name(t->type));
    *out = (model_tensor){ t->name, t->type, n, cols, t->data };
    return GLESLLM_OK;
}

/* The tensors of an RWKV-7 model: the embeddings' LayerNorm, and each
 * layer's norms, time mix and channel mix (model_layer). */
static glesllm_status open_rwkv_layers(const gguf_file *f, model *m)
{
    const model_hparams *hp = &m->hp;
    uint64_t d = hp->n_embd, ff = hp->n_ff, rw = hp->rwkv_lora_w, ra = hp->rwkv_lora_a;
    uint64_t rg = hp->rwkv_lora_g;
    glesllm_status st;
    if ((st = get_tensor(f, "token_embd_norm.weight", 1, d, false, &m->tok_norm)) ||
        (st = get_tensor(f, "token_embd_norm.bias", 1, d, false, &m->tok_norm_b)) ||
        (st = get_tensor(f, "output_norm.bias", 1, d, false, &m->out_norm_b)))
        return st;
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        model_layer *l = &m->layers[i];
        l->recurrent = true;
        /* (layer 0's value-residual path, which nothing reads, is as wide as
         * the learning rate's, as llama.cpp writes it) */
        uint64_t rv = i ? hp->rwkv_lora_v : ra;
        const layer_want want[] = {
            { &l->attn_norm, "attn_norm.weight", 1, 1, d, true },
            { &l->attn_norm_b, "attn_norm.bias", 1, 1, d, true },
            { &l->ffn_norm, "attn_norm_2.weight", 1, 1, d, true },
            { &l->ffn_norm_b, "attn_norm_2.bias", 1, 1, d, true },
            { &l->tm_w0, "time_mix_w0.weight", 1, 1, d, true },
            { &l->tm_w1, "time_mix_w1.weight", 1, rw, d, true },
            { &l->tm_w2, "time_mix_w2.weight", 1, d, rw, true },
            { &l->tm_a0, "time_mix_a0.weight", 1, 1, d, true },
            { &l->tm_a1, "time_mix_a1.weight", 1, ra, d, true },
            { &l->tm_a2, "time_mix_a2.weight", 1, d, ra, true },
            { &l->tm_v0, "time_mix_v0.weight", 1, 1, d, true },
            { &l->tm_v1, "time_mix_v1.weight", 1, rv, d, true },
            { &l->tm_v2, "time_mix_v2.weight", 1, d, rv, true },
            { &l->tm_g1, "time_mix_g1.weight", 1, rg, d, true },
            { &l->tm_g2, "time_mix_g2.weight", 1, d, rg, true },
            { &l->tm_k_k, "time_mix_k_k.weight", 1, 1, d, true },
            { &l->tm_k_a, "time_mix_k_a.weight", 1, 1, d, true },
            { &l->tm_r_k, "time_mix_r_k.weight", 1, 1, d, true },
            { &l->wq, "time_mix_receptance.weight", 1, d, d, true },
            { &l->wk, "time_mix_key.weight", 1, d, d, true },
            { &l->wv, "time_mix_value.weight", 1, d, d, true },
            { &l->wo, "time_mix_output.weight", 1, d, d, true },
            { &l->tm_ln, "time_mix_ln.weight", 1, 1, d, true },
            { &l->tm_ln_b, "time_mix_ln.bias", 1, 1, d, true },
            { &l->cm_lerp, "channel_mix_lerp_k.weight", 1, 1, d, true },
            { &l->up, "channel_mix_key.weight", 1, ff, d, true },
            { &l->down, "channel_mix_value.weight", 1, d, ff, true },
        };
        if ((st = get_layer(f, i, want, sizeof want / sizeof want[0])))
            return st;
        char name[96];
        snprintf(name, sizeof name, "blk.%u.time_mix_lerp_fused.weight", i);
        if ((st = get_vectors(f, name, 6, d, &l->tm_lerp)))
            return st;
    }
    return GLESLLM_OK;
}

glesllm_status model_open(const gguf_file *f, model *m)
{
    memset(m, 0, sizeof *m);
    m->file = f;
    model_info mi;
    glesllm_status st = model_info_read(f, &mi);
    if (st == GLESLLM_OK)
        st = read_hparams(f, &mi, &m->hp);
    if (st != GLESLLM_OK)
        return err_prefix(st, "model: ");
    const model_hparams *hp = &m->hp;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    if ((st = get_tensor(f, "token_embd.weight", hp->n_vocab, hp->n_embd, false, &m->tok_embd)) ||
        (st = get_tensor(f, "output_norm.weight", 1, hp->n_embd, false, &m->out_norm)) ||
        (st = get_tensor(f, "output.weight", hp->n_vocab, hp->n_embd, true, &m->output)))
        return err_prefix(st, "model: ");
    if (!m->output.data) {
        m->output = m->tok_embd;
        m->tied = true;
    }
    /* Llama 3.1/3.2's RoPE frequency factors: pair i's angle divided by
     * factor i (llama.cpp's rope_freqs) */
    if ((st = get_tensor(f, "rope_freqs.weight", 1, hp->head_dim / 2, true, &m->rope_freqs)))
        return err_prefix(st, "model: ");
    /* and LongRoPE's: the long factors past the original context */
    if ((st = get_tensor(f, "rope_factors_long.weight", 1, hp->head_dim / 2, true,
                         &m->rope_long)) ||
        (st = get_tensor(f, "rope_factors_short.weight", 1, hp->head_dim / 2, true,
                         &m->rope_short)))
        return err_prefix(st, "model: ");
    const model_tensor *factors[] = { &m->rope_freqs, &m->rope_long, &m->rope_short };
    for (size_t i = 0; i < 3; i++)
        if (factors[i]->data && factors[i]->type != GGML_TYPE_F32)
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "model: tensor %s is of type %s; glesllm reads RoPE frequency factors "
                           "as F32, as llama.cpp writes them",
                           factors[i]->name, ggml_type_name(factors[i]->type));
    if (!m->rope_long.data != !m->rope_short.data)
        return err_set(GLESLLM_ERR_FORMAT,
                       "model: the file has %s but not %s: LongRoPE needs both; the file is damaged",
                       m->rope_long.data ? "rope_factors_long.weight" : "rope_factors_short.weight",
                       m->rope_long.data ? "rope_factors_short.weight" : "rope_factors_long.weight");
    if (m->rope_freqs.data && m->rope_long.data)
        return err_set(GLESLLM_ERR_FORMAT,
                       "model: the file has both rope_freqs.weight and LongRoPE's factors: the "
                       "file is damaged");
    m->hp.rope_freqs = m->rope_freqs.data;
    m->hp.rope_long = m->rope_long.data;
    m->hp.rope_short = m->rope_short.data;
    /* before the layers are allocated: a block_count of billions is a
     * damaged file, not a request for terabytes */
    bool fused = arch_desc_of(hp->arch)->fused;
    uint32_t per_layer = hp->rwkv ? 28 : hp->ssm ? 9 : fused ? 6 : 9;
    if ((uint64_t)hp->n_layer * per_layer > gguf_tensor_count(f))
        return err_set(GLESLLM_ERR_FORMAT,
                       "model: %s.block_count is %u, but the file holds %llu tensors (a layer "
                       "has %u or more): the file is damaged",
                       hp->arch_name, hp->n_layer, (unsigned long long)gguf_tensor_count(f),
                       per_layer);
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading the model's layers");
    if (hp->rwkv) {
        if ((st = open_rwkv_layers(f, m)) || (st = check_all_read(f, m))) {
            model_close(m);
            return err_prefix(st, "model: ");
        }
        return GLESLLM_OK;
    }
    if (hp->ssm) {
        if ((st = check_expert_layout(f, hp)) ||
            (st = open_ssm_layers(f, m, arch_desc_of(hp->arch)->hybrid)) ||
            (st = check_all_read(f, m)) || (st = check_support(&mi, hp))) {
            model_close(m);
            return err_prefix(st, "model: ");
        }
        return GLESLLM_OK;
    }
    bool bias = hp->qkv_bias, moe = hp->n_expert > 0, shexp = hp->n_ff_shexp > 0;
    if ((st = check_expert_layout(f, hp)) != GLESLLM_OK) {
        model_close(m);
        return err_prefix(st, "model: ");
    }
    uint64_t ne = hp->n_expert, fe = hp->n_ff_exp, fs = hp->n_ff_shexp;
    bool qk = hp->qk_norm != MODEL_QK_NONE;
    model_tensor qkv, gate_up;
    uint32_t q_span, k_span;
    model_qk_spans(hp, &q_span, &k_span);
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        model_layer *l = &m->layers[i];
        const layer_want want[] = {
            { &l->attn_norm, "attn_norm.weight", 1, 1, hp->n_embd, true },
            { &qkv, "attn_qkv.weight", 1, q_dim + 2 * kv_dim, hp->n_embd, fused },
            { &l->wq, "attn_q.weight", 1, q_dim, hp->n_embd, !fused },
            { &l->wk, "attn_k.weight", 1, kv_dim, hp->n_embd, !fused },
            { &l->wv, "attn_v.weight", 1, kv_dim, hp->n_embd, !fused },
            { &l->wo, "attn_output.weight", 1, hp->n_embd, q_dim, true },
            { &l->ffn_norm, "ffn_norm.weight", 1, 1, hp->n_embd, true },
            { &gate_up, "ffn_up.weight", 1, 2ull * hp->n_ff, hp->n_embd, fused && !moe },
            { &l->gate, "ffn_gate.weight", 1, hp->n_ff, hp->n_embd, !fused && !moe },
            { &l->up, "ffn_up.weight", 1, hp->n_ff, hp->n_embd, !fused && !moe },
            { &l->down, "ffn_down.weight", 1, hp->n_embd, hp->n_ff, !moe },
            { &l->bq, "attn_q.bias", 1, 1, q_dim, bias },
            { &l->bk, "attn_k.bias", 1, 1, kv_dim, bias },
            { &l->bv, "attn_v.bias", 1, 1, kv_dim, bias },
            { &l->router, "ffn_gate_inp.weight", 1, ne, hp->n_embd, moe },
            { &l->gate_exps, "ffn_gate_exps.weight", ne, fe, hp->n_embd, moe },
            { &l->up_exps, "ffn_up_exps.weight", ne, fe, hp->n_embd, moe },
            { &l->down_exps, "ffn_down_exps.weight", ne, hp->n_embd, fe, moe },
            { &l->gate_shexp, "ffn_gate_shexp.weight", 1, fs, hp->n_embd, shexp },
            { &l->up_shexp, "ffn_up_shexp.weight", 1, fs, hp->n_embd, shexp },
            { &l->down_shexp, "ffn_down_shexp.weight", 1, hp->n_embd, fs, shexp },
            { &l->shexp_gate, "ffn_gate_inp_shexp.weight", 1, 1, hp->n_embd, shexp },
            { &l->q_norm, "attn_q_norm.weight", 1, 1, q_span, qk },
            { &l->k_norm, "attn_k_norm.weight", 1, 1, k_span, qk },
            { &l->attn_post_norm, "post_attention_norm.weight", 1, 1, hp->n_embd, hp->post_norms },
            { &l->ffn_post_norm, "post_ffw_norm.weight", 1, 1, hp->n_embd, hp->post_norms },
        };
        if ((st = get_layer(f, i, want, sizeof want / sizeof want[0])) != GLESLLM_OK) {
            model_close(m);
            return err_prefix(st, "model: ");
        }
        if (fused) { /* Q, K and V (gate and up) as row ranges of one tensor */
            l->wq = row_range(&qkv, 0, q_dim);
            l->wk = row_range(&qkv, q_dim, kv_dim);
            l->wv = row_range(&qkv, q_dim + kv_dim, kv_dim);
            if (!moe) {
                l->gate = row_range(&gate_up, 0, hp->n_ff);
                l->up = row_range(&gate_up, hp->n_ff, hp->n_ff);
            }
        }
    }
    if ((st = check_all_read(f, m)) != GLESLLM_OK || (st = check_support(&mi, hp)) != GLESLLM_OK) {
        model_close(m);
        return err_prefix(st, "model: ");
    }
    return GLESLLM_OK;
}

uint32_t model_recurrent_layers(const model *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->hp.n_layer; i++)
        n += m->layers[i].recurrent;
    return n;
}

void model_close(model *m)
{
    if (!m)
        return;
    free(m->layers);
    m->layers = NULL;
}

void model_qk_spans(const model_hparams *hp, uint32_t *q_span, uint32_t *k_span)
{
    bool width = hp->qk_norm == MODEL_QK_WIDTH;
    *q_span = hp->qk_norm == MODEL_QK_NONE ? 0
              : width                      ? hp->n_head * hp->head_dim
                                           : hp->head_dim;
    *k_span = hp->qk_norm == MODEL_QK_NONE ? 0
              : width                      ? hp->n_head_kv * hp->head_dim
                                           : hp->head_dim;
}

bool model_layer_rope(const model_hparams *hp, uint32_t il)
{
    return !hp->no_rope_period || (il + 1) % hp->no_rope_period != 0;
}

uint32_t model_layer_window(const model_hparams *hp, uint32_t il)
{
    return hp->swa_period && (il + 1) % hp->swa_period == 0 ? 0 : hp->n_swa;
}

model_hparams model_layer_rope_hp(const model_hparams *hp, uint32_t il)
{
    model_hparams l = *hp;
    if (hp->rope_base_swa > 0.0f && model_layer_window(hp, il)) {
        l.rope_base = hp->rope_base_swa;
        l.rope_scale = 1.0f;
        l.rope_freqs = l.rope_long = l.rope_short = NULL;
        l.rope_attn_factor = 1.0f;
    }
    return l;
}

void model_rope_table(const model_hparams *hp, uint32_t n_pos, float *cos_sin)
{
    uint32_t half = hp->head_dim / 2;
    /* (llama.cpp: the long factors where the context is past the original) */
    const float *freqs = hp->rope_freqs ? hp->rope_freqs
                         : hp->rope_long && n_pos > hp->n_ctx_orig ? hp->rope_long
                                                                   : hp->rope_short;
    float mscale = hp->rope_attn_factor;
    float theta_scale = powf(hp->rope_base, -2.0f / (float)hp->head_dim);
    for (uint32_t p = 0; p < n_pos; p++) {
        float theta = (float)p;
        for (uint32_t i = 0; i < half; i++) {
            float t = hp->rope_scale * (freqs ? theta / freqs[i] : theta);
            cos_sin[((size_t)p * half + i) * 2] = cosf(t) * mscale;
            cos_sin[((size_t)p * half + i) * 2 + 1] = sinf(t) * mscale;
            theta *= theta_scale;
        }
    }
}
