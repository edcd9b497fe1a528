#include "model/model_info.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "model/gpu_model.h"
#include "ops/kv_layout.h"

static const char *const rope_norm[] = { "llama", "baichuan", "internlm2", "minicpm", "deci",
                                         "granite", "granitemoe", "command-r", "olmo", "deepseek",
                                         "deepseek2", "xverse", "refact", "mistral", "llama4",
                                         "smollm3", NULL };
static const char *const rope_neox[] = { "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3",
                                         "qwen3moe", "phi2", "phi3", "gemma", "gemma2", "gemma3",
                                         "stablelm", "gptneox", "falcon", "starcoder2", "olmo2",
                                         "olmoe", "nemotron", "exaone", "openelm", "plamo",
                                         "codeshell", "orion", NULL };
static const char *const rope_none[] = { "gpt2", "starcoder", "mpt", "bloom", "bert", "jais",
                                         "nomic-bert", "jina-bert-v2", "t5", "mamba", "mamba2", "jamba",
                                         "rwkv6", "rwkv7", NULL };

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static float arch_f32(const gguf_file *f, const char *arch, const char *suffix, float dflt)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v = dflt;
    if (gguf_find(f, key) && gguf_get_f32(f, key, &v) != GLESLLM_OK)
        v = dflt;
    return v;
}

static bool arch_has(const gguf_file *f, const char *arch, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_find(f, key) != NULL;
}

static void copy_str(const gguf_file *f, const char *key, char *buf, size_t n)
{
    gguf_str s;
    buf[0] = '\0';
    if (gguf_find(f, key) && gguf_get_str(f, key, &s) == GLESLLM_OK)
        gguf_str_copy(s, buf, n);
}

uint32_t model_arch_swa_period(const char *arch)
{
    return strcmp(arch, "gemma2") == 0 ? 2 : strcmp(arch, "gemma3") == 0 ? 6 : 0;
}

glesllm_status model_info_read(const gguf_file *f, model_info *mi)
{
    memset(mi, 0, sizeof *mi);
    mi->file_size = gguf_file_size(f);
    mi->gguf_version = gguf_version(f);
    copy_str(f, "general.architecture", mi->arch, sizeof mi->arch);
    copy_str(f, "general.name", mi->name, sizeof mi->name);
    copy_str(f, "tokenizer.ggml.model", mi->tokenizer_model, sizeof mi->tokenizer_model);
    copy_str(f, "tokenizer.ggml.pre", mi->tokenizer_pre, sizeof mi->tokenizer_pre);
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        mi->n_params += t->n_elements;
        mi->tensor_bytes += t->size;
        mi->types[t->type].tensors++;
        mi->types[t->type].bytes += t->size;
        mi->types[t->type].elements += t->n_elements;
    }
    const char *a = mi->arch;
    mi->n_layers = gguf_get_arch_u32(f, a, "block_count", 0);
    mi->n_embd = gguf_get_arch_u32(f, a, "embedding_length", 0);
    mi->n_ff = gguf_get_arch_u32(f, a, "feed_forward_length", 0);
    mi->n_expert = gguf_get_arch_u32(f, a, "expert_count", 0);
    mi->n_expert_used = gguf_get_arch_u32(f, a, "expert_used_count", 0);
    mi->ssm_d_inner = gguf_get_arch_u32(f, a, "ssm.inner_size", 0);
    mi->ssm_d_state = gguf_get_arch_u32(f, a, "ssm.state_size", 0);
    mi->ssm_d_conv = gguf_get_arch_u32(f, a, "ssm.conv_kernel", 0);
    mi->ssm_dt_rank = gguf_get_arch_u32(f, a, "ssm.time_step_rank", 0);
    mi->ssm_n_group = gguf_get_arch_u32(f, a, "ssm.group_count", 0);
    mi->n_head = gguf_get_arch_u32(f, a, "attention.head_count", 0);
    mi->n_head_kv = gguf_get_arch_u32(f, a, "attention.head_count_kv", 0);
    if (!mi->n_head_kv)
        mi->n_head_kv = mi->n_head;
    mi->n_attn_layers = mi->n_head ? mi->n_layers : 0;
    char kv_key[160];
    snprintf(kv_key, sizeof kv_key, "%s.attention.head_count_kv", a);
    const gguf_value *kv_arr;
    if (gguf_find(f, kv_key) && gguf_get_array(f, kv_key, GGUF_TYPE_COUNT, &kv_arr) == GLESLLM_OK &&
        kv_arr->v.arr.type != GGUF_TYPE_STRING && kv_arr->v.arr.type != GGUF_TYPE_ARRAY) {
        /* a value a layer (Jamba: 0 where the layer is a Mamba block) */
        mi->n_attn_layers = 0;
        mi->n_head_kv = 0;
        for (uint64_t i = 0; i < kv_arr->v.arr.count && i < mi->n_layers; i++) {
            double v = gguf_array_number(kv_arr, i);
            if (v > 0 && v < 65536) {
                mi->n_attn_layers++;
                mi->n_head_kv = (uint32_t)v;
            }
        }
    }
    mi->window = gguf_get_arch_u32(f, a, "attention.sliding_window", 0);
    uint32_t period = model_arch_swa_period(a);
    if (mi->window)
        mi->n_window_layers = mi->n_attn_layers - (period ? mi->n_attn_layers / period : 0);
    mi->head_dim = gguf_get_arch_u32(f, a, "attention.key_length", 0);
    mi->head_dim_given = mi->head_dim != 0;
    if (!mi->head_dim && mi->n_head)
        mi->head_dim = mi->n_embd / mi->n_head;
    mi->n_ctx_train = gguf_get_arch_u32(f, a, "context_length", 0);
    mi->rope_base = arch_f32(f, a, "rope.freq_base", 10000.0f);
    mi->rope_dims = gguf_get_arch_u32(f, a, "rope.dimension_count", 0);
    mi->rms_eps = arch_f32(f, a, "attention.layer_norm_rms_epsilon", 0.0f);
    mi->norm_eps = arch_f32(f, a, "attention.layer_norm_epsilon", 0.0f);
    mi->wkv_head_size = gguf_get_arch_u32(f, a, "wkv.head_size", 0);
    mi->rope_dims_given = arch_has(f, a, "rope.dimension_count");
    mi->rms_eps_given = arch_has(f, a, "attention.layer_norm_rms_epsilon");
    mi->rope_factor = 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    copy_str(f, key, mi->rope_scaling, sizeof mi->rope_scaling);
    if (mi->rope_scaling[0]) {
        mi->rope_factor = arch_f32(f, a, "rope.scaling.factor", 1.0f);
    } else {
        float lin = arch_f32(f, a, "rope.scale_linear", 0.0f);
        snprintf(mi->rope_scaling, sizeof mi->rope_scaling, "%s", lin > 0.0f ? "linear" : "none");
        if (lin > 0.0f)
            mi->rope_factor = lin;
    }
    mi->rope_type = !a[0] ? "unknown"
                    : in_list(rope_norm, a) ? "norm"
                    : in_list(rope_neox, a) ? "neox"
                    : in_list(rope_none, a) ? "none"
                                            : "unknown";
    const gguf_value *tokens;
    if (gguf_find(f, "tokenizer.ggml.tokens") &&
        gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens) == GLESLLM_OK)
        mi->n_vocab = tokens->v.arr.count;
    else
        mi->n_vocab = gguf_get_arch_u32(f, a, "vocab_size", 0);
    return GLESLLM_OK;
}

uint32_t model_info_ring_positions(const model_info *mi, uint32_t n_ctx)
{
    /* (gpu_model's defaults: chunks at most the context, pages) */
    uint32_t pass = n_ctx < GPU_N_BATCH ? n_ctx : GPU_N_BATCH, page = GPU_KV_PAGE;
    uint64_t ring = kv_ring_pages(mi->window, pass, page);
    return mi->window && ring < (n_ctx + page - 1) / page ? (uint32_t)(ring * page) : n_ctx;
}

model_memory model_info_memory(const model_info *mi, uint32_t n_ctx)
{
    model_memory m;
    m.weights = mi->tensor_bytes;
    uint64_t kv_dim = (uint64_t)mi->n_head_kv * mi->head_dim;
    uint32_t ring = model_info_ring_positions(mi, n_ctx);
    m.kv_cache = 2ull * ((uint64_t)(mi->n_attn_layers - mi->n_window_layers) * n_ctx +
                         (uint64_t)mi->n_window_layers * ring) * kv_dim * 2u;
    uint64_t q_dim = (uint64_t)mi->n_head * mi->head_dim;
    m.activations = 4ull * (2ull * mi->n_embd + q_dim + 2 * kv_dim + 2ull * mi->n_ff + mi->n_vocab +
                            (uint64_t)mi->n_head * n_ctx);
    /* (the convolution's inputs: Mamba-2's are its x, B and C) */
    uint64_t taps = mi->ssm_d_conv ? mi->ssm_d_conv - 1ull : 0;
    uint64_t width = mi->ssm_d_inner + 2ull * mi->ssm_n_group * mi->ssm_d_state;
    m.recurrent = 3ull * (mi->n_layers - mi->n_attn_layers) * 4 *
                  (taps * width + (uint64_t)mi->ssm_d_inner * mi->ssm_d_state);
    if (mi->wkv_head_size) /* RWKV: two token shifts and a head_size^2 matrix a head */
        m.recurrent = 3ull * mi->n_layers * 4 *
                      (2ull * mi->n_embd + (uint64_t)mi->n_embd * mi->wkv_head_size);
    m.total = m.weights + m.kv_cache + m.recurrent + m.activations;
    return m;
}
