/* The Gemma 2 graph: llama's, with the embeddings times sqrt(n_embd) (the
 * lookup's scale), attention scores soft-capped (and Gemma 2 27B's query
 * scale: the attention kernels' defines), a sliding window on every other
 * layer (model_layer_window), the outputs of O and of down RMS-normalised
 * before they are added to x, GELU in the FFN's gate (the GLU epilogue's),
 * and the logits soft-capped (pass_logits). */
#include "model/gpu_model_impl.h"

static glesllm_status gemma2_layer(gpu_pass *p, const gpu_layer *l)
{
    glesllm_status st;
    /* xn = RMSNorm(x) * attn_norm; q, k, v; attention */
    if ((st = pass_norm(p, l->attn_norm)) || (st = pass_qkv(p, l)) ||
        (st = pass_attention(p, l)))
        return st;
    /* x += RMSNorm(Wo attn_out) * post_attention_norm */
    if ((st = pass_residual_normed(p, &l->wo, PASS_ATTN_OUT, l->attn_post)))
        return st;
    /* x += RMSNorm(Wdown (gelu(Wgate xn) * (Wup xn))) * post_ffw_norm, xn =
     * RMSNorm(x) * ffn_norm */
    if ((st = pass_norm(p, l->ffn_norm)) || (st = pass_glu(p, &l->glu)))
        return st;
    return pass_residual_normed(p, &l->down, PASS_HIDDEN, l->ffn_post);
}

glesllm_status gemma2_graph(gpu_pass *p)
{
    const gpu_model *gm = p->gm;
    glesllm_status st = pass_embed(p);
    for (uint32_t i = 0; st == GLESLLM_OK && i < gm->m->hp.n_layer; i++)
        st = gemma2_layer(p, &gm->layers[i]);
    return st ? st : pass_logits(p, gm->out_norm);
}
