/* A model loaded for a test: a GGUF (a file, or a demo model made in memory),
 * the model read from it, its GPU upload and optionally the CPU reference. */
#ifndef GLESLLM_TEST_MODEL_FIXTURE_H
#define GLESLLM_TEST_MODEL_FIXTURE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/demo_model.h"
#include "model/gpu_model.h"
#include "model/model.h"
#include "model/ref_model.h"
#include "unity.h"

typedef struct loaded {
    uint8_t *data;
    gguf_file *f;
    model m;
    gpu_model *gm;
    ref_model *ref;
} loaded;

static inline void fixture_unload(loaded *L)
{
    gpu_model_destroy(L->gm);
    ref_model_destroy(L->ref);
    model_close(&L->m);
    gguf_close(L->f);
    free(L->data);
    memset(L, 0, sizeof *L);
}

/* Takes f; the CPU reference too when `ref`. */
static inline void fixture_load_file(gpu_context *ctx, gguf_file *f, const gpu_model_options *opt,
                                     bool ref, loaded *L)
{
    L->f = f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, model_open(f, &L->m), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_model_create(ctx, &L->m, opt, &L->gm),
                                  glesllm_last_error());
    if (ref)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, ref_model_create(&L->m, opt->n_ctx, &L->ref));
}

static inline void fixture_load_demo(gpu_context *ctx, const demo_spec *s,
                                     const gpu_model_options *opt, bool ref, loaded *L)
{
    memset(L, 0, sizeof *L);
    size_t size;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, demo_model_to_memory(s, &L->data, &size),
                                  glesllm_last_error());
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open_memory(L->data, size, &f),
                                  glesllm_last_error());
    fixture_load_file(ctx, f, opt, ref, L);
}

/* max |got - want| / max |want|: how far a row of logits is off */
static inline double fixture_rel_diff(const float *got, const float *want, uint32_t n)
{
    double md = 0.0, mx = 1e-30;
    for (uint32_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)got[i] - want[i]));
        mx = fmax(mx, fabs((double)want[i]));
    }
    return md / mx;
}

/* The small models the decode tests use: 2 layers, 256 hidden, 4/2 heads,
 * 512 ff, 300 tokens, every matrix in `type`. */
static inline demo_spec fixture_small_spec(const char *arch, uint32_t type)
{
    demo_spec s = demo_spec_default();
    s.arch = arch;
    s.n_layer = 2;
    s.n_embd = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 512;
    s.n_vocab = 300;
    s.type = s.embd_type = s.out_type = type;
    s.seed = 7;
    return s;
}

/* A small Gemma 2/3 (arch) of n_layer layers, F32, 128 hidden in heads of
 * 64, a window of 5, tied. */
static inline demo_spec fixture_gemma_spec(const char *arch, uint32_t n_layer)
{
    demo_spec g = fixture_small_spec(arch, GGML_TYPE_F32);
    g.n_layer = n_layer;
    g.n_embd = 128;
    g.head_dim = 64;
    g.window = 5;
    g.tied = true;
    return g;
}

/* The Qwen3, Qwen3-MoE, SmolLM3 and Gemma 3 files whose reference is Hugging
 * Face transformers (tests/reference/hf-*.jsonl, make_reference.py): 2
 * layers, 64 hidden, 4/2 heads of 32 (Q wider than x), F32; 192 ff, or 8
 * experts of 48, 2 a token; SmolLM3: 5 layers (the fourth without RoPE),
 * heads of 16; Gemma 3: 7 layers (the sixth global), a window of 8, tied. */
static inline demo_spec fixture_hf_spec(const char *arch)
{
    demo_spec s = demo_spec_default();
    s.arch = arch;
    s.name = arch;
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 32;
    s.n_ff = 192;
    s.type = s.embd_type = s.out_type = GGML_TYPE_F32;
    s.seed = 2026;
    if (strcmp(arch, "qwen3moe") == 0) {
        s.n_ff = 48;
        s.n_expert = 8;
        s.n_expert_used = 2;
    }
    if (strcmp(arch, "smollm3") == 0) {
        s.n_layer = 5;
        s.head_dim = 0;
    }
    if (strcmp(arch, "gemma3") == 0) { /* (a global layer, the sixth, between window ones) */
        s.n_layer = 7;
        s.window = 8;
        s.tied = true;
    }
    return s;
}

/* The Phi-3 file with LongRoPE factors whose reference is llama.cpp's
 * (tests/reference/llama-phi3-longrope.jsonl, llama_reference.c): 2 layers,
 * 64 hidden, 4/2 heads, 128 ff, F32, a context of 128 (the original 64: a
 * context of 128 takes the long factors) and a window of 12. */
static inline demo_spec fixture_longrope_spec(void)
{
    demo_spec s = demo_spec_default();
    s.arch = "phi3";
    s.name = "longrope"; /* (llama.cpp looks for Phi-3's special tokens in a "phi3" name) */
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 128;
    s.n_ctx = 128;
    s.window = 12;
    s.long_rope = true;
    s.type = s.embd_type = s.out_type = GGML_TYPE_F32;
    s.seed = 2026;
    return s;
}

/* The RWKV-7 file whose reference is llama.cpp's
 * (tests/reference/llama-rwkv7.jsonl, llama_reference.c): 2 layers, 64
 * hidden in heads of 32, 192 ff, F32. */
static inline demo_spec fixture_rwkv7_spec(void)
{
    demo_spec s = demo_spec_default();
    s.arch = "rwkv7";
    s.name = "rwkv7";
    s.n_layer = 2;
    s.n_embd = 64;
    s.head_dim = 32;
    s.n_ff = 192;
    s.type = s.embd_type = s.out_type = GGML_TYPE_F32;
    s.seed = 2026;
    return s;
}

#endif
