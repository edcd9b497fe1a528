/* glesllm info --gpu: what the engine would run on.
 * glesllm info MODEL.gguf: what a model is, from its header alone (no GL
 * context is created and no tensor data is read). */
#include <GLES3/gl31.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/gpu_model.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/model_info.h"
#include "ops/matvec.h"
#include "ops/prefetch.h"

static void info_usage(FILE *f)
{
    fprintf(f, "usage: glesllm info --gpu\n"
               "       glesllm info MODEL.gguf [-c N] [--json] [--tensors]\n"
               "  --gpu          open the GPU as the engine would and print the EGL platform,\n"
               "                 GL_VENDOR/RENDERER/VERSION, the limits used, optional extensions\n"
               "                 and whether the program cache is on\n"
               "  MODEL.gguf     architecture, size and shape of a model, read from its header only\n"
               "  -c, --ctx-size N  context size for the GPU memory estimate (default: the\n"
               "                 model's, at most 4096; 0 = the model's training context)\n"
               "  --json         the same as one JSON object\n"
               "  --tensors      also list every tensor (name, type, shape, offset)\n");
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static int info_gpu(void)
{
    gpu_options opt;
    tuning tune;
    glesllm_status st = gpu_options_from_env(&opt);
    if (st == GLESLLM_OK)
        st = tuning_from_env(&tune);
    if (st != GLESLLM_OK)
        return cli_fail("bad environment", st);
    gpu_context *ctx = NULL;
    st = gpu_context_create(&opt, &ctx);
    if (st != GLESLLM_OK)
        return cli_fail("cannot open the GPU", st);
    const gpu_limits *L = gpu_context_limits(ctx);
    const gpu_caps *C = gpu_context_caps(ctx);
    printf("platform:            %s (%s)\n", gpu_platform_name(gpu_context_platform(ctx)),
           gpu_context_display_desc(ctx));
    printf("GL_VENDOR:           %s\n", gpu_context_string(ctx, GL_VENDOR));
    printf("GL_RENDERER:         %s\n", gpu_context_string(ctx, GL_RENDERER));
    printf("GL_VERSION:          %s\n", gpu_context_string(ctx, GL_VERSION));
    printf("GLSL version:        %s\n", gpu_context_string(ctx, GL_SHADING_LANGUAGE_VERSION));
    printf("limits used%s:\n", gpu_context_limits_min(ctx) ? " (GLESLLM_LIMITS=min: GLES 3.1 minimums)" : "");
    printf("  work group invocations     %u\n", L->max_invocations);
    printf("  work group size            %u x %u x %u\n", L->max_group_size[0], L->max_group_size[1],
           L->max_group_size[2]);
    printf("  work group count           %u x %u x %u\n", L->max_group_count[0],
           L->max_group_count[1], L->max_group_count[2]);
    printf("  shared memory              %u bytes\n", L->max_shared_bytes);
    printf("  storage blocks per shader  %u\n", L->max_storage_blocks);
    printf("  storage buffer bindings    %u\n", L->max_storage_bindings);
    printf("  storage block size         %llu MiB\n",
           (unsigned long long)(L->max_storage_block_bytes >> 20));
    printf("  storage offset alignment   %u bytes\n", L->storage_offset_alignment);
    printf("optional extensions:\n");
    printf("  GL_EXT_buffer_storage      %s\n", yes_no(C->buffer_storage));
    if (C->subgroup) {
        int order = 0;
        glesllm_status ost = gpu_context_subgroup_order(ctx, &order);
        printf("  GL_KHR_shader_subgroup     yes (subgroup size %u; subgroupAdd %s)\n",
               C->subgroup_size,
               ost != GLESLLM_OK               ? glesllm_last_error()
               : order == GPU_SG_HALVES     ? "adds the halves first, as a verifying pass's "
                                              "matvecs follow without subgroup operations"
               : order == GPU_SG_NEIGHBOURS ? "adds neighbours first, as a verifying pass's "
                                              "matvecs follow without subgroup operations"
                                            : "in an order not probed: a verifying pass's "
                                              "matvecs call it themselves (slower)");
    } else
        printf("  GL_KHR_shader_subgroup     no%s\n",
               gpu_context_limits_min(ctx) ? " (off under GLESLLM_LIMITS=min)" : "");
    printf("  fp16 arithmetic            %s%s\n", yes_no(C->fp16_arith),
           C->mediump_is_fp16 ? " (mediump float is fp16)" : "");
    printf("  f16 types (NV_gpu_shader5) %s%s\n", yes_no(C->f16_types),
           C->f16_types ? " (prefill tiles in f16 except for F32 weights; matvec products "
                          "of the quantized formats in f16 unless GLESLLM_F16_DOT=0)"
                        : " (matvec products of the quantized formats in f32 pairs, the "
                          "code of the f16 products, unless GLESLLM_F16_DOT=0)");
    bool subn = false;
    if (gpu_context_f16_subnormals(ctx, &subn) == GLESLLM_OK)
        printf("  f16 subnormals kept        %s%s\n", yes_no(subn),
               subn ? " (matvec levels of " MATVEC_SUBN_DEFAULT " as f16 subnormals with "
                      "f16 products; GLESLLM_F16_SUBN=0|1 overrides)"
                    : " (matvec levels as integers)");
    else
        printf("  f16 subnormals kept        %s\n", glesllm_last_error());
    printf("  program binaries           %s\n", yes_no(C->program_binary));
    if (C->memory_source)
        printf("GPU memory:          %llu MiB, %llu MiB free (%s)\n",
               (unsigned long long)(C->memory_total >> 20),
               (unsigned long long)(gpu_context_memory_available(ctx) >> 20), C->memory_source);
    else
        printf("GPU memory:          not reported by the driver\n");
    kv_placement kv;
    const char *why;
    if (kv_placement_choose(ctx, &tune, &kv, &why) == GLESLLM_OK)
        printf("KV cache:            %s buffers (%s; GLESLLM_KV=device|mapped overrides)\n",
               kv_placement_name(kv), why);
    else
        printf("KV cache:            %s\n", glesllm_last_error());
    bool pf;
    gpu_model_prefetch_choose(ctx, &tune, PREFETCH_MIN, &pf, &why);
    printf("FFN prefetch:        %s (%s; GLESLLM_PREFETCH=0|1 overrides)\n", pf ? "on" : "off",
           why);
    const char *dir = gpu_context_cache_dir(ctx);
    if (dir)
        printf("program cache:       on (%s)\n", dir);
    else
        printf("program cache:       off (%s)\n", gpu_context_cache_off_reason(ctx));
    gpu_context_destroy(ctx);
    return 0;
}

/* ---- info MODEL -------------------------------------------------------------- */

static void json_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void json_cstr(const char *s) { json_str(s, strlen(s)); }

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

static void print_text(const char *path, const gguf_file *f, const model_info *mi, uint32_t n_ctx,
                       bool tensors)
{
    model_memory m = model_info_memory(mi, n_ctx);
    printf("file:               %s (%llu bytes, GGUF v%u)\n", path,
           (unsigned long long)mi->file_size, mi->gguf_version);
    printf("architecture:       %s\n", mi->arch[0] ? mi->arch : "(none)");
    printf("name:               %s\n", mi->name[0] ? mi->name : "(none)");
    printf("parameters:         %llu (%.2f M)\n", (unsigned long long)mi->n_params, mi->n_params / 1e6);
    printf("layers:             %u\n", mi->n_layers);
    printf("hidden size:        %u\n", mi->n_embd);
    printf("feed-forward size:  %u\n", mi->n_ff);
    printf("heads / KV heads:   %u / %u\n", mi->n_head, mi->n_head_kv);
    printf("head dimension:     %u\n", mi->head_dim);
    printf("context length:     %u\n", mi->n_ctx_train);
    printf("RoPE:               %s, base %g, scaling %s (factor %g)\n", mi->rope_type, mi->rope_base,
           mi->rope_scaling, mi->rope_factor);
    printf("vocab size:         %llu\n", (unsigned long long)mi->n_vocab);
    printf("tokenizer:          %s%s%s\n", mi->tokenizer_model[0] ? mi->tokenizer_model : "(none)",
           mi->tokenizer_pre[0] ? ", pre-tokenizer " : "", mi->tokenizer_pre);
    printf("tensors:            %llu, %.2f MiB\n", (unsigned long long)gguf_tensor_count(f),
           mib(mi->tensor_bytes));
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        if (mi->types[t].tensors)
            printf("  %-8s %5llu tensors %12.2f MiB\n", ggml_type_name((uint32_t)t),
                   (unsigned long long)mi->types[t].tensors, mib(mi->types[t].bytes));
    if (gguf_tensor_count(f) == 0)
        printf("  (no tensors: a vocabulary-only file)\n");
    printf("GPU memory at context %u: %.2f MiB (weights %.2f + KV cache F16 %.2f + activations %.2f)\n",
           n_ctx, mib(m.total), mib(m.weights), mib(m.kv_cache), mib(m.activations));
    if (tensors) {
        printf("%-40s %-8s %-28s %s\n", "tensor", "type", "shape", "offset");
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            char shape[96];
            printf("%-40s %-8s %-28s %llu\n", t->name, ggml_type_name(t->type),
                   format_shape(t, " x ", shape, sizeof shape),
                   (unsigned long long)(gguf_data_offset(f) + t->offset));
        }
    }
}

static void print_json(const char *path, const gguf_file *f, const model_info *mi, uint32_t n_ctx,
                       bool tensors)
{
    model_memory m = model_info_memory(mi, n_ctx);
    printf("{\"file\": ");
    json_cstr(path);
    printf(", \"file_size\": %llu, \"gguf_version\": %u, \"architecture\": ",
           (unsigned long long)mi->file_size, mi->gguf_version);
    json_cstr(mi->arch);
    printf(", \"name\": ");
    json_cstr(mi->name);
    printf(", \"parameters\": %llu, \"layers\": %u, \"hidden_size\": %u, \"feed_forward_size\": %u, "
           "\"heads\": %u, \"kv_heads\": %u, \"head_dim\": %u, \"context_length\": %u",
           (unsigned long long)mi->n_params, mi->n_layers, mi->n_embd, mi->n_ff, mi->n_head,
           mi->n_head_kv, mi->head_dim, mi->n_ctx_train);
    printf(", \"rope\": {\"type\": \"%s\", \"base\": %.9g, \"scaling\": ", mi->rope_type, mi->rope_base);
    json_cstr(mi->rope_scaling);
    printf(", \"factor\": %.9g}, \"vocab_size\": %llu, \"tokenizer_model\": ", mi->rope_factor,
           (unsigned long long)mi->n_vocab);
    json_cstr(mi->tokenizer_model);
    printf(", \"tokenizer_pre\": ");
    json_cstr(mi->tokenizer_pre);
    printf(", \"n_tensors\": %llu, \"tensor_bytes\": %llu, \"tensor_types\": {",
           (unsigned long long)gguf_tensor_count(f), (unsigned long long)mi->tensor_bytes);
    bool first = true;
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        if (mi->types[t].tensors) {
            printf("%s\"%s\": {\"tensors\": %llu, \"bytes\": %llu}", first ? "" : ", ",
                   ggml_type_name((uint32_t)t), (unsigned long long)mi->types[t].tensors,
                   (unsigned long long)mi->types[t].bytes);
            first = false;
        }
    printf("}, \"gpu_memory\": {\"context\": %u, \"weights\": %llu, \"kv_cache\": %llu, "
           "\"activations\": %llu, \"total\": %llu}",
           n_ctx, (unsigned long long)m.weights, (unsigned long long)m.kv_cache,
           (unsigned long long)m.activations, (unsigned long long)m.total);
    if (tensors) {
        printf(", \"tensors\": [");
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            printf("%s{\"name\": ", i ? ", " : "");
            json_cstr(t->name);
            char shape[96];
            printf(", \"type\": \"%s\", \"shape\": [%s]", ggml_type_name(t->type),
                   format_shape(t, ", ", shape, sizeof shape));
            printf(", \"offset\": %llu, \"bytes\": %llu}",
                   (unsigned long long)(gguf_data_offset(f) + t->offset), (unsigned long long)t->size);
        }
        printf("]");
    }
    printf("}\n");
}

static int info_model(const char *path, long ctx_arg, bool json, bool tensors)
{
    gguf_file *f = NULL;
    glesllm_status st = gguf_open(path, &f);
    if (st != GLESLLM_OK)
        return cli_fail("cannot read the model", st);
    model_info mi;
    st = model_info_read(f, &mi);
    if (st != GLESLLM_OK) {
        gguf_close(f);
        return cli_fail("cannot read the model", st);
    }
    uint32_t n_ctx = ctx_arg == 0 ? mi.n_ctx_train
                     : ctx_arg > 0 ? (uint32_t)ctx_arg
                                   : (mi.n_ctx_train && mi.n_ctx_train < 4096 ? mi.n_ctx_train : 4096);
    if (json)
        print_json(path, f, &mi, n_ctx, tensors);
    else
        print_text(path, f, &mi, n_ctx, tensors);
    gguf_close(f);
    return 0;
}

int cmd_info(int argc, char **argv)
{
    bool gpu = false, json = false, tensors = false;
    const char *model_path = NULL;
    long ctx = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--gpu") == 0)
            gpu = true;
        else if (strcmp(a, "--json") == 0)
            json = true;
        else if (strcmp(a, "--tensors") == 0)
            tensors = true;
        else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx-size") == 0) {
            char *end = NULL;
            errno = 0;
            ctx = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || errno || !end || *end || ctx < 0 || ctx > 16777216) {
                fprintf(stderr, "glesllm info: %s needs a context size from 0 to 16777216\n", a);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            info_usage(stdout);
            return 0;
        } else if (a[0] != '-' && !model_path) {
            model_path = a;
        } else {
            fprintf(stderr, "glesllm info: unknown argument '%s'\n", a);
            info_usage(stderr);
            return 2;
        }
    }
    if (gpu == (model_path != NULL)) {
        info_usage(stderr);
        return 2;
    }
    if (gpu)
        return info_gpu();
    return info_model(model_path, ctx, json, tensors);
}
