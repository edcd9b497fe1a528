/* Writes the benchmark models of bench/RESULTS.md: random weights in real
 * shapes and formats, made by the project's own writer and quantizer
 * (src/model/demo_model.c), so anyone can reproduce them and run llama.cpp
 * on the same files.
 *
 *   gen_model SHAPE TYPE OUT.gguf [N_LAYERS]
 *     SHAPE  smollm   SmolLM-135M: 576 hidden, 1536 ff, 30 layers, 9/3 heads,
 *                     49152 vocab, tied embeddings
 *            mistral  Mistral-7B: 4096 hidden, 14336 ff, 32 layers, 32/8 heads,
 *                     32000 vocab
 *            mixtral  Mixtral-8x7B: Mistral-7B's with 8 experts of 14336 ff
 *                     a layer, 2 a token
 *            olmoe    OLMoE-1B-7B: 2048 hidden, 16 layers, 16/16 heads (Q and
 *                     K normalised over the width), 50304 vocab, 64 experts
 *                     of 1024 ff, 8 a token
 *            qwen3    Qwen3-0.6B: 1024 hidden, 3072 ff, 28 layers, 16/8 heads of
 *                     128 (each head of Q and K normalised), 151936 vocab, tied
 *            llama32  Llama-3.2-1B: 2048 hidden, 8192 ff, 16 layers, 32/8 heads,
 *                     128256 vocab, tied (without its RoPE factors, which
 *                     change no speed)
 *            phi3     Phi-3-mini-4k: 3072 hidden, 8192 ff, 32 layers, 32/32 heads
 *                     of 96, 32064 vocab, Q|K|V and gate|up fused, a window of
 *                     2047 positions
 *            gemma2   Gemma-2-2B: 2304 hidden, 9216 ff, 26 layers, 8/4 heads of 256,
 *                     a window of 4096 on every other layer, 256000 vocab, tied
 *            gemma3   Gemma-3-1B: 1152 hidden, 6912 ff, 26 layers, 4/1 heads of 256
 *                     (each head of Q and K normalised), a window of 512 on
 *                     five layers of six, 262144 vocab, tied
 *            mamba    Mamba-2.8B: 2560 hidden, 64 layers of Mamba-1 blocks (5120
 *                     channels, 16 state values each, a step of rank 160),
 *                     50280 vocab, tied
 *            mamba2   Mamba2-2.7B: 2560 hidden, 64 layers of Mamba-2 blocks (5120
 *                     channels in 80 heads, 128 state values, 1 group),
 *                     50288 vocab, tied
 *            jamba    Jamba-v0.1: 4096 hidden, 32 layers, attention (32/8 heads,
 *                     no RoPE) in every eighth from the fifth, Mamba blocks
 *                     (8192 channels, 16 state values, rank 256) in the
 *                     others, 16 experts of 14336 ff, 2 a token, in every
 *                     second layer from the second, a FFN of 14336 in the
 *                     others; 65536 vocab
 *            rwkv7    RWKV-7 2.9B: 2560 hidden, 32 layers, heads of 64, 10240
 *                     ff, low-rank paths of 160 (decay, learning rate), 80
 *                     (value residual) and 320 (gate) kept F32 as llama.cpp
 *                     keeps them, 65536 vocab
 *     TYPE   Q4_0 | Q8_0 | Q4_K_M (llama.cpp's choices for the embeddings and
 *            the output matrix, Q6_K for attn_v/ffn_down in Q4_K_M's layers)
 *     N_LAYERS  fewer (or more) layers than the shape's, to see how a step's
 *            time depends on the bytes of weights it reads
 * Layers share the bytes of the first layer with the same tensor types, so a
 * 7B file takes seconds to make; the speed of a decode step does not depend
 * on the values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/demo_model.h"

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: gen_model smollm|mistral|mixtral|olmoe|qwen3|llama32|phi3|gemma2|gemma3|mamba|mamba2|jamba|rwkv7 "
                        "Q4_0|Q8_0|Q4_K_M OUT.gguf [N_LAYERS]\n");
        return 2;
    }
    demo_spec s = demo_spec_default();
    s.same_layers = true;
    s.n_ctx = 4096;
    if (strcmp(argv[1], "smollm") == 0) {
        s.name = "SmolLM-135M shape, random weights";
        s.n_layer = 30, s.n_embd = 576, s.n_ff = 1536, s.n_head = 9, s.n_head_kv = 3;
        s.n_vocab = 49152, s.tied = true;
    } else if (strcmp(argv[1], "mistral") == 0) {
        s.name = "Mistral-7B shape, random weights";
        s.n_layer = 32, s.n_embd = 4096, s.n_ff = 14336, s.n_head = 32, s.n_head_kv = 8;
        s.n_vocab = 32000, s.tied = false;
        s.n_ctx = 32768;
    } else if (strcmp(argv[1], "mixtral") == 0) {
        s.name = "Mixtral-8x7B shape, random weights";
        s.n_layer = 32, s.n_embd = 4096, s.n_ff = 14336, s.n_head = 32, s.n_head_kv = 8;
        s.n_vocab = 32000, s.tied = false;
        s.n_expert = 8, s.n_expert_used = 2;
        s.n_ctx = 32768;
    } else if (strcmp(argv[1], "olmoe") == 0) {
        s.name = "OLMoE-1B-7B shape, random weights";
        s.arch = "olmoe";
        s.n_layer = 16, s.n_embd = 2048, s.n_ff = 1024, s.n_head = 16, s.n_head_kv = 16;
        s.n_vocab = 50304, s.tied = false;
        s.n_expert = 64, s.n_expert_used = 8;
    } else if (strcmp(argv[1], "qwen3") == 0) {
        s.name = "Qwen3-0.6B shape, random weights";
        s.arch = "qwen3";
        s.n_layer = 28, s.n_embd = 1024, s.n_ff = 3072, s.n_head = 16, s.n_head_kv = 8;
        s.head_dim = 128;
        s.n_vocab = 151936, s.tied = true;
    } else if (strcmp(argv[1], "llama32") == 0) {
        s.name = "Llama-3.2-1B shape, random weights";
        s.n_layer = 16, s.n_embd = 2048, s.n_ff = 8192, s.n_head = 32, s.n_head_kv = 8;
        s.n_vocab = 128256, s.tied = true;
    } else if (strcmp(argv[1], "phi3") == 0) {
        /* (not "Phi-3": llama.cpp looks for Phi-3's special tokens in such a name) */
        s.name = "Phi 3 mini 4k shape, random weights";
        s.arch = "phi3";
        s.n_layer = 32, s.n_embd = 3072, s.n_ff = 8192, s.n_head = 32, s.n_head_kv = 32;
        s.n_vocab = 32064, s.tied = false;
        s.window = 2047;
    } else if (strcmp(argv[1], "gemma2") == 0) {
        s.name = "Gemma-2-2B shape, random weights";
        s.arch = "gemma2";
        s.n_layer = 26, s.n_embd = 2304, s.n_ff = 9216, s.n_head = 8, s.n_head_kv = 4;
        s.head_dim = 256;
        s.n_vocab = 256000, s.tied = true;
        s.window = 4096;
        s.n_ctx = 8192;
    } else if (strcmp(argv[1], "gemma3") == 0) {
        s.name = "Gemma-3-1B shape, random weights";
        s.arch = "gemma3";
        s.n_layer = 26, s.n_embd = 1152, s.n_ff = 6912, s.n_head = 4, s.n_head_kv = 1;
        s.head_dim = 256;
        s.n_vocab = 262144, s.tied = true;
        s.window = 512;
        s.n_ctx = 8192;
    } else if (strcmp(argv[1], "mamba") == 0) {
        s.name = "Mamba-2.8B shape, random weights";
        s.arch = "mamba";
        s.n_layer = 64, s.n_embd = 2560, s.n_vocab = 50280, s.tied = true;
        s.dt_rank = 160;
    } else if (strcmp(argv[1], "mamba2") == 0) {
        s.name = "Mamba2-2.7B shape, random weights";
        s.arch = "mamba2";
        s.n_layer = 64, s.n_embd = 2560, s.n_vocab = 50288, s.tied = true;
        s.dt_rank = 80;
        s.d_state = 128;
    } else if (strcmp(argv[1], "jamba") == 0) {
        s.name = "Jamba-v0.1 shape, random weights";
        s.arch = "jamba";
        s.n_layer = 32, s.n_embd = 4096, s.n_ff = 14336, s.n_head = 32, s.n_head_kv = 8;
        s.n_vocab = 65536, s.tied = false;
        s.n_expert = 16, s.n_expert_used = 2;
        s.attn_every = 8;
        s.dt_rank = 256;
    } else if (strcmp(argv[1], "rwkv7") == 0) {
        s.name = "RWKV-7 2.9B shape, random weights";
        s.arch = "rwkv7";
        s.n_layer = 32, s.n_embd = 2560, s.n_ff = 10240, s.head_dim = 64;
        s.n_vocab = 65536, s.tied = false;
    } else {
        fprintf(stderr, "gen_model: unknown shape '%s' (smollm, mistral, mixtral, olmoe, qwen3, "
                        "llama32, phi3, gemma2, gemma3, mamba, mamba2, jamba, rwkv7)\n", argv[1]);
        return 2;
    }
    if (argc == 5) {
        char *end;
        unsigned long n = strtoul(argv[4], &end, 10);
        if (*end || end == argv[4] || n < 1 || n > 1024) {
            fprintf(stderr, "gen_model: N_LAYERS must be a number from 1 to 1024, not '%s'\n",
                    argv[4]);
            return 2;
        }
        s.n_layer = (uint32_t)n;
    }
    if (strcmp(argv[2], "Q8_0") == 0) {
        s.type = s.embd_type = s.out_type = GGML_TYPE_Q8_0;
    } else if (strcmp(argv[2], "Q4_0") == 0) {
        s.type = GGML_TYPE_Q4_0;
        s.embd_type = s.tied ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0; /* tied: Q6_K, which needs rows of 256k, falls back to Q8_0 */
        s.out_type = GGML_TYPE_Q6_K;
    } else if (strcmp(argv[2], "Q4_K_M") == 0) {
        if (s.n_embd % 256) {
            fprintf(stderr, "gen_model: Q4_K needs rows of a multiple of 256 values\n");
            return 2;
        }
        s.type = GGML_TYPE_Q4_K;
        s.v_type = s.down_type = GGML_TYPE_Q6_K;
        s.more_bits_only = true;
        s.embd_type = s.tied ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
        s.out_type = GGML_TYPE_Q6_K;
    } else {
        fprintf(stderr, "gen_model: unknown type '%s' (Q4_0, Q8_0, Q4_K_M)\n", argv[2]);
        return 2;
    }
    demo_model *d;
    glesllm_status st = demo_model_create(&s, &d);
    if (!st)
        st = gguf_writer_write(demo_model_writer(d), argv[3]);
    if (st) {
        fprintf(stderr, "gen_model: %s\n", glesllm_last_error());
        return 1;
    }
    demo_model_destroy(d);
    fprintf(stderr, "gen_model: wrote %s (%s %s)\n", argv[3], argv[1], argv[2]);
    return 0;
}
