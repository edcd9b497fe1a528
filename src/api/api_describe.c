/* What the engine reports of itself: the GPU it runs on (`glesllm info
 * --gpu`) and a GGUF file from its header alone (`glesllm info MODEL`). */
#include <GLES3/gl31.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/utf8.h"
#include "model/model_info.h"
#include "ops/matvec.h"
#include "ops/prefetch.h"

/* f's text as *text (malloc'd) when fclose succeeds */
static glesllm_status close_text(FILE *f, glesllm_status st, char **text)
{
    if (fclose(f) != 0 && !st)
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    if (st) {
        free(*text);
        *text = NULL;
    }
    return st;
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static void describe(gpu_context *ctx, const tuning *tune, FILE *f)
{
    const gpu_limits *L = gpu_context_limits(ctx);
    const gpu_caps *C = gpu_context_caps(ctx);
    fprintf(f, "platform:            %s (%s)\n", gpu_platform_name(gpu_context_platform(ctx)),
           gpu_context_display_desc(ctx));
    fprintf(f, "GL_VENDOR:           %s\n", gpu_context_string(ctx, GL_VENDOR));
    fprintf(f, "GL_RENDERER:         %s\n", gpu_context_string(ctx, GL_RENDERER));
    fprintf(f, "GL_VERSION:          %s\n", gpu_context_string(ctx, GL_VERSION));
    fprintf(f, "GLSL version:        %s\n", gpu_context_string(ctx, GL_SHADING_LANGUAGE_VERSION));
    if (C->cpu)
        fprintf(f, "runs on:             the CPU (one-token products take whole rows a lane; "
                   "GLESLLM_CPU_SPLITS=0 gives a GPU's splits)\n");
    fprintf(f, "limits used%s:\n", gpu_context_limits_min(ctx) ? " (GLESLLM_LIMITS=min: GLES 3.1 minimums)" : "");
    fprintf(f, "  work group invocations     %u\n", L->max_invocations);
    fprintf(f, "  work group size            %u x %u x %u\n", L->max_group_size[0], L->max_group_size[1],
           L->max_group_size[2]);
    fprintf(f, "  work group count           %u x %u x %u\n", L->max_group_count[0],
           L->max_group_count[1], L->max_group_count[2]);
    fprintf(f, "  shared memory              %u bytes\n", L->max_shared_bytes);
    fprintf(f, "  storage blocks per shader  %u\n", L->max_storage_blocks);
    fprintf(f, "  storage buffer bindings    %u\n", L->max_storage_bindings);
    fprintf(f, "  storage block size         %llu MiB\n",
           (unsigned long long)(L->max_storage_block_bytes >> 20));
    fprintf(f, "  storage offset alignment   %u bytes\n", L->storage_offset_alignment);
    fprintf(f, "optional extensions:\n");
    fprintf(f, "  GL_EXT_buffer_storage      %s\n", yes_no(C->buffer_storage));
    if (C->subgroup) {
        int order = 0;
        glesllm_status ost = gpu_context_subgroup_order(ctx, &order);
        fprintf(f, "  GL_KHR_shader_subgroup     yes (subgroup size %u; subgroupAdd %s)\n",
               C->subgroup_size,
               ost != GLESLLM_OK               ? glesllm_last_error()
               : order == GPU_SG_HALVES     ? "adds the halves first, as a verifying pass's "
                                              "matvecs follow without subgroup operations"
               : order == GPU_SG_NEIGHBOURS ? "adds neighbours first, as a verifying pass's "
                                              "matvecs follow without subgroup operations"
                                            : "in an order not probed: a verifying pass's "
                                              "matvecs call it themselves (slower)");
    } else
        fprintf(f, "  GL_KHR_shader_subgroup     no%s\n",
               gpu_context_limits_min(ctx) ? " (off under GLESLLM_LIMITS=min)" : "");
    fprintf(f, "  fp16 arithmetic            %s%s\n", yes_no(C->fp16_arith),
           C->mediump_is_fp16 ? " (mediump float is fp16)" : "");
    fprintf(f, "  f16 types (NV_gpu_shader5) %s%s\n", yes_no(C->f16_types),
           C->f16_types ? " (prefill tiles in f16 except for F32 weights; matvec products "
                          "of the quantized formats in f16 unless GLESLLM_F16_DOT=0)"
                        : " (matvec products of the quantized formats in f32 pairs, the "
                          "code of the f16 products, unless GLESLLM_F16_DOT=0)");
    bool subn = false;
    if (gpu_context_f16_subnormals(ctx, &subn) == GLESLLM_OK)
        fprintf(f, "  f16 subnormals kept        %s%s\n", yes_no(subn),
               subn ? " (matvec levels of " MATVEC_SUBN_DEFAULT " as f16 subnormals with "
                      "f16 products; GLESLLM_F16_SUBN=0|1 overrides)"
                    : " (matvec levels as integers)");
    else
        fprintf(f, "  f16 subnormals kept        %s\n", glesllm_last_error());
    fprintf(f, "  program binaries           %s\n", yes_no(C->program_binary));
    if (C->memory_source)
        fprintf(f, "GPU memory:          %llu MiB, %llu MiB free (%s)\n",
               (unsigned long long)(C->memory_total >> 20),
               (unsigned long long)(gpu_context_memory_available(ctx) >> 20), C->memory_source);
    else
        fprintf(f, "GPU memory:          not reported by the driver\n");
    kv_placement kv;
    const char *why;
    if (kv_placement_choose(ctx, tune, &kv, &why) == GLESLLM_OK)
        fprintf(f, "KV cache:            %s buffers (%s; GLESLLM_KV=device|mapped overrides)\n",
               kv_placement_name(kv), why);
    else
        fprintf(f, "KV cache:            %s\n", glesllm_last_error());
    bool pf;
    gpu_model_prefetch_choose(ctx, tune, PREFETCH_MIN, &pf, &why);
    fprintf(f,
            "FFN prefetch:        %s (%s; GLESLLM_PREFETCH=0|1 overrides, GLESLLM_PREFETCH_MIB=N "
            "sets its size; with it the next layer's Q/K/V beside down where gate/up is Q4_0, "
            "GLESLLM_PREFETCH_QKV_MIB=N sets that)\n",
            pf ? "on" : "off", why);
    const char *dir = gpu_context_cache_dir(ctx);
    if (dir)
        fprintf(f, "program cache:       on (%s)\n", dir);
    else
        fprintf(f, "program cache:       off (%s)\n", gpu_context_cache_off_reason(ctx));
    const char *mesa_off, *mesa_dir = gpu_context_mesa_cache(ctx, &mesa_off);
    if (strstr(gpu_context_string(ctx, GL_VERSION), "Mesa"))
        fprintf(f, "Mesa shader cache:   %s (%s)\n", mesa_off[0] ? "off" : "on",
                mesa_off[0] ? mesa_off : mesa_dir[0] ? mesa_dir : "no folder");
}

glesllm_status glesllm_backend_describe(glesllm_backend *b, char **text)
{
    glesllm_status st = api_check_backend(b);
    if (st || !text)
        return st ? st : err_set(GLESLLM_ERR_INVALID_ARGUMENT, "text is NULL");
    *text = NULL;
    size_t len;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    api_call call;
    if (!(st = api_enter(b, false, &call))) {
        describe(b->gpu, &b->tune, f);
        api_leave(&call);
    }
    return close_text(f, st, text);
}

/* ---- a GGUF file ------------------------------------------------------------------ */

/* A string from a file, as JSON: invalid UTF-8 as U+FFFD, so that the
 * output is always valid JSON; control characters (C1 too: JSON allows them
 * raw, a terminal acts on them) as \uNNNN. */
static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        const unsigned char *p = (const unsigned char *)s + i;
        unsigned char c = p[0];
        size_t k = utf8_seq(p, n - i);
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else if (utf8_is_c1(p, k))
            fprintf(f, "\\u%04x", p[1]); /* (U+0080 + p[1] - 0x80) */
        else if (!k)
            fputs("\\ufffd", f);
        else
            fwrite(s + i, 1, k, f);
        i += k ? k : 1;
    }
    fputc('"', f);
}

/* A string from a file, for a terminal (term_escape); buf has room for
 * 4 * strlen(s) + 1. */
static const char *term_str(const char *s, char *buf)
{
    term_escape(s, strlen(s), false, buf, 4 * strlen(s) + 1);
    return buf;
}

static void json_cstr(FILE *f, const char *s) { json_str(f, s, strlen(s)); }

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* A tensor's dimensions joined by sep ("4096 x 32000", or "4096, 32000"). */
static const char *format_shape(const gguf_tensor *t, const char *sep, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t d = 0; d < t->n_dims && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%llu", d ? sep : "", (unsigned long long)t->ne[d]);
    return buf;
}

static void print_text(FILE *f, const char *path, const gguf_file *gf, const model_info *mi, uint32_t n_ctx,
                       bool tensors)
{
    model_memory m = model_info_memory(mi, n_ctx);
    fprintf(f, "file:               %s (%llu bytes, GGUF v%u)\n", path,
           (unsigned long long)mi->file_size, mi->gguf_version);
    char e1[4 * sizeof mi->name + 1], e2[4 * sizeof mi->tokenizer_pre + 1];
    fprintf(f, "architecture:       %s\n", mi->arch[0] ? term_str(mi->arch, e1) : "(none)");
    fprintf(f, "name:               %s\n", mi->name[0] ? term_str(mi->name, e1) : "(none)");
    fprintf(f, "parameters:         %llu (%.2f M)\n", (unsigned long long)mi->n_params, mi->n_params / 1e6);
    fprintf(f, "layers:             %u\n", mi->n_layers);
    fprintf(f, "hidden size:        %u\n", mi->n_embd);
    fprintf(f, "feed-forward size:  %u\n", mi->n_ff);
    if (mi->n_expert)
        fprintf(f, "experts:            %u, %u a token\n", mi->n_expert, mi->n_expert_used);
    if (mi->ssm_d_inner && mi->ssm_n_group)
        fprintf(f, "state space:        %u channels in %u heads, %u state values each, %u "
                   "group(s) of B and C, %u-tap convolution\n", mi->ssm_d_inner,
                mi->ssm_dt_rank, mi->ssm_d_state, mi->ssm_n_group, mi->ssm_d_conv);
    else if (mi->ssm_d_inner)
        fprintf(f, "state space:        %u channels, %u state values each, %u-tap convolution, "
                   "step rank %u\n", mi->ssm_d_inner, mi->ssm_d_state, mi->ssm_d_conv,
                mi->ssm_dt_rank);
    if (mi->ssm_d_inner && mi->n_attn_layers)
        fprintf(f, "attention layers:   %u of %u (the others Mamba blocks)\n", mi->n_attn_layers,
                mi->n_layers);
    if (mi->wkv_head_size && mi->n_embd % mi->wkv_head_size == 0)
        fprintf(f, "time mix:           %u heads of %u (RWKV-7: a %ux%u state each)\n",
                mi->n_embd / mi->wkv_head_size, mi->wkv_head_size, mi->wkv_head_size,
                mi->wkv_head_size);
    if (mi->n_head || (!mi->ssm_d_inner && !mi->wkv_head_size)) { /* (none in Mamba, RWKV) */
        fprintf(f, "heads / KV heads:   %u / %u\n", mi->n_head, mi->n_head_kv);
        fprintf(f, "head dimension:     %u\n", mi->head_dim);
    }
    fprintf(f, "context length:     %u\n", mi->n_ctx_train);
    if (mi->window) {
        uint32_t ring = model_info_ring_positions(mi, n_ctx);
        fprintf(f, "sliding window:     %u positions on %u of %u layers", mi->window,
                mi->n_window_layers, mi->n_attn_layers);
        if (ring < n_ctx)
            fprintf(f, " (at context %u their K/V a ring of %u)", n_ctx, ring);
        fputc('\n', f);
    }
    fprintf(f, "RoPE:               %s, base %g, scaling %s (factor %g)\n", mi->rope_type,
            mi->rope_base, term_str(mi->rope_scaling, e1), mi->rope_factor);
    fprintf(f, "vocab size:         %llu\n", (unsigned long long)mi->n_vocab);
    fprintf(f, "tokenizer:          %s%s%s\n",
            mi->tokenizer_model[0] ? term_str(mi->tokenizer_model, e1) : "(none)",
            mi->tokenizer_pre[0] ? ", pre-tokenizer " : "", term_str(mi->tokenizer_pre, e2));
    fprintf(f, "tensors:            %llu, %.2f MiB\n", (unsigned long long)gguf_tensor_count(gf),
           mib(mi->tensor_bytes));
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        if (mi->types[t].tensors)
            fprintf(f, "  %-8s %5llu tensors %12.2f MiB\n", ggml_type_name((uint32_t)t),
                   (unsigned long long)mi->types[t].tensors, mib(mi->types[t].bytes));
    if (gguf_tensor_count(gf) == 0)
        fprintf(f, "  (no tensors: a vocabulary-only file)\n");
    if (m.recurrent)
        fprintf(f, "GPU memory at context %u: %.2f MiB (weights %.2f + KV cache F16 %.2f + "
                   "recurrent state F32 %.2f + activations %.2f)\n",
                n_ctx, mib(m.total), mib(m.weights), mib(m.kv_cache), mib(m.recurrent),
                mib(m.activations));
    else
        fprintf(f, "GPU memory at context %u: %.2f MiB (weights %.2f + KV cache F16 %.2f + activations %.2f)\n",
               n_ctx, mib(m.total), mib(m.weights), mib(m.kv_cache), mib(m.activations));
    if (tensors) {
        fprintf(f, "%-40s %-8s %-28s %s\n", "tensor", "type", "shape", "offset");
        for (uint64_t i = 0; i < gguf_tensor_count(gf); i++) {
            const gguf_tensor *t = gguf_tensor_at(gf, i);
            char shape[96];
            char name[4 * sizeof t->name + 1];
            fprintf(f, "%-40s %-8s %-28s %llu\n", term_str(t->name, name), ggml_type_name(t->type),
                   format_shape(t, " x ", shape, sizeof shape),
                   (unsigned long long)(gguf_data_offset(gf) + t->offset));
        }
    }
}

static void print_json(FILE *f, const char *path, const gguf_file *gf, const model_info *mi, uint32_t n_ctx,
                       bool tensors)
{
    model_memory m = model_info_memory(mi, n_ctx);
    fprintf(f, "{\"file\": ");
    json_cstr(f, path);
    fprintf(f, ", \"file_size\": %llu, \"gguf_version\": %u, \"architecture\": ",
           (unsigned long long)mi->file_size, mi->gguf_version);
    json_cstr(f, mi->arch);
    fprintf(f, ", \"name\": ");
    json_cstr(f, mi->name);
    fprintf(f, ", \"parameters\": %llu, \"layers\": %u, \"hidden_size\": %u, \"feed_forward_size\": %u, "
           "\"heads\": %u, \"kv_heads\": %u, \"head_dim\": %u, \"context_length\": %u",
           (unsigned long long)mi->n_params, mi->n_layers, mi->n_embd, mi->n_ff, mi->n_head,
           mi->n_head_kv, mi->head_dim, mi->n_ctx_train);
    fprintf(f, ", \"experts\": %u, \"experts_used\": %u", mi->n_expert, mi->n_expert_used);
    fprintf(f, ", \"wkv_head_size\": %u", mi->wkv_head_size);
    /* sliding-window layers, and the positions of their K/V ring at n_ctx
     * (n_ctx where the ring would not be smaller than a full row) */
    fprintf(f, ", \"sliding_window\": %u, \"window_layers\": %u, \"attention_layers\": %u, "
               "\"window_kv_positions\": %u",
            mi->window, mi->n_window_layers, mi->n_attn_layers,
            model_info_ring_positions(mi, n_ctx));
    fprintf(f, ", \"rope\": {\"type\": \"%s\", \"base\": %.9g, \"scaling\": ", mi->rope_type, mi->rope_base);
    json_cstr(f, mi->rope_scaling);
    fprintf(f, ", \"factor\": %.9g}, \"vocab_size\": %llu, \"tokenizer_model\": ", mi->rope_factor,
           (unsigned long long)mi->n_vocab);
    json_cstr(f, mi->tokenizer_model);
    fprintf(f, ", \"tokenizer_pre\": ");
    json_cstr(f, mi->tokenizer_pre);
    fprintf(f, ", \"n_tensors\": %llu, \"tensor_bytes\": %llu, \"tensor_types\": {",
           (unsigned long long)gguf_tensor_count(gf), (unsigned long long)mi->tensor_bytes);
    bool first = true;
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        if (mi->types[t].tensors) {
            fprintf(f, "%s\"%s\": {\"tensors\": %llu, \"bytes\": %llu}", first ? "" : ", ",
                   ggml_type_name((uint32_t)t), (unsigned long long)mi->types[t].tensors,
                   (unsigned long long)mi->types[t].bytes);
            first = false;
        }
    fprintf(f, "}, \"gpu_memory\": {\"context\": %u, \"weights\": %llu, \"kv_cache\": %llu, "
           "\"recurrent_state\": %llu, \"activations\": %llu, \"total\": %llu}",
           n_ctx, (unsigned long long)m.weights, (unsigned long long)m.kv_cache,
           (unsigned long long)m.recurrent, (unsigned long long)m.activations,
           (unsigned long long)m.total);
    if (tensors) {
        fprintf(f, ", \"tensors\": [");
        for (uint64_t i = 0; i < gguf_tensor_count(gf); i++) {
            const gguf_tensor *t = gguf_tensor_at(gf, i);
            fprintf(f, "%s{\"name\": ", i ? ", " : "");
            json_cstr(f, t->name);
            char shape[96];
            fprintf(f, ", \"type\": \"%s\", \"shape\": [%s]", ggml_type_name(t->type),
                   format_shape(t, ", ", shape, sizeof shape));
            fprintf(f, ", \"offset\": %llu, \"bytes\": %llu}",
                   (unsigned long long)(gguf_data_offset(gf) + t->offset), (unsigned long long)t->size);
        }
        fprintf(f, "]");
    }
    fprintf(f, "}\n");
}

glesllm_status glesllm_file_describe(const char *path, int32_t n_ctx, unsigned flags, char **text)
{
    if (!path || !text)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "describe: NULL path or text");
    *text = NULL;
    gguf_file *gf = NULL;
    model_info mi;
    glesllm_status st = gguf_open(path, &gf);
    if (!st)
        st = model_info_read(gf, &mi);
    if (st) {
        gguf_close(gf);
        return st;
    }
    uint32_t ctx = n_ctx == 0 ? mi.n_ctx_train
                   : n_ctx > 0 ? (uint32_t)n_ctx
                               : (mi.n_ctx_train && mi.n_ctx_train < 4096 ? mi.n_ctx_train : 4096);
    size_t len;
    FILE *f = open_memstream(text, &len);
    if (!f) {
        gguf_close(gf);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    }
    bool tensors = flags & GLESLLM_DESCRIBE_TENSORS;
    if (flags & GLESLLM_DESCRIBE_JSON)
        print_json(f, path, gf, &mi, ctx, tensors);
    else
        print_text(f, path, gf, &mi, ctx, tensors);
    gguf_close(gf);
    return close_text(f, GLESLLM_OK, text);
}
