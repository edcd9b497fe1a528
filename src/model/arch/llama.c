/* The llama family's graph: Llama 2/3, Mistral, SmolLM, TinyLlama, and Qwen2
 * (the same graph with Q/K/V biases and NeoX RoPE, which the model's
 * description carries: model_hparams.rope_neox, the layers' bias tensors);
 * with experts in place of the FFN, Mixtral and Qwen2-MoE.
 *
 * One function records a pass of any number of tokens (a decode step, a
 * small batch, a prefill chunk: model/pass.c records each op as its pass
 * needs). Shapes a token, as in the activation buffer:
 *   x, xn      n_embd                        the residual stream, its norm
 *   q | k | v  n_head * head_dim | 2 x n_head_kv * head_dim
 *   attn_out   n_head * head_dim
 *   hidden     n_ff */
#include "model/gpu_model_impl.h"

/* One transformer block: x += attention(norm(x)); x += ffn(norm(x)).
 * next_norm: the weight of the norm that reads x after this layer (the next
 * layer's attn_norm or the output norm), which the down projection's kernel
 * may compute ahead. */
static glesllm_status llama_layer(gpu_pass *p, const gpu_layer *l, uint64_t next_norm)
{
    glesllm_status st;
    /* xn = RMSNorm(x) * attn_norm */
    if ((st = pass_norm(p, l->attn_norm)))
        return st;
    /* q, k, v = Wq xn, Wk xn, Wv xn (+ biases); RoPE on q and k; k and v
     * into this layer's cache at the tokens' positions */
    if ((st = pass_qkv(p, l)))
        return st;
    /* attn_out = softmax(q K^T / sqrt(head_dim)) V, per head over the cache
     * (a K/V head shared by n_head / n_head_kv query heads) */
    if ((st = pass_attention(p, l)))
        return st;
    /* x += Wo attn_out */
    if ((st = pass_residual(p, &l->wo, PASS_ATTN_OUT, l->ffn_norm)))
        return st;
    /* x += Wdown(silu(Wgate xn) * (Wup xn)), xn = RMSNorm(x) * ffn_norm; with
     * experts the sum over the router's top k experts e of w_e times theirs
     * (+ the shared expert's FFN times sigmoid(its gate . xn)) */
    return pass_ffn(p, l, next_norm);
}

glesllm_status llama_graph(gpu_pass *p)
{
    const gpu_model *gm = p->gm;
    uint32_t n_layer = gm->m->hp.n_layer;
    /* x = token_embd[token] */
    glesllm_status st = pass_embed(p);
    for (uint32_t i = 0; st == GLESLLM_OK && i < n_layer; i++) {
        st = llama_layer(p, &gm->layers[i],
                         i + 1 < n_layer ? gm->layers[i + 1].attn_norm : gm->out_norm);
        /* (the next layer's Wq|Wk|Wv read into the GPU's cache beside down,
         * where that pays) */
        if (!st && i + 1 < n_layer)
            st = pass_prefetch_qkv(p, &gm->layers[i], &gm->layers[i + 1]);
    }
    /* logits = Woutput RMSNorm(x) * out_norm, and what the pass asks of
     * them (argmax, candidates) */
    return st ? st : pass_logits(p, gm->out_norm);
}
