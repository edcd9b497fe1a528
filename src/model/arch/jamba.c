/* The Jamba graph: a hybrid of Mamba blocks (ops/ssm.h, their recurrent
 * state in the layer's state slots; dt, B and C normalised with weights) and
 * attention without RoPE (the layers whose attention.head_count_kv is not 0,
 * a KV cache each), every layer followed by a FFN or by experts (softmax,
 * top k, not renormalised). Shapes as in llama.c and mamba.c. */
#include "model/gpu_model_impl.h"

static glesllm_status jamba_layer(gpu_pass *p, const gpu_layer *l, uint64_t next_norm)
{
    /* xn = RMSNorm(x) * attn_norm */
    glesllm_status st = pass_norm(p, l->attn_norm);
    if (st)
        return st;
    if (l->recurrent) {
        /* x += Wout ((scan(silu(conv(Win_x xn)); dt, B, C) + D xc) * silu(Win_z xn)) */
        if ((st = pass_ssm(p, l)) ||
            (st = pass_residual(p, &l->ssm_out, PASS_SSM_OUT, l->ffn_norm)))
            return st;
    } else {
        /* x += Wo softmax(q K^T / sqrt(head_dim)) V, q, k, v = Wq|k|v xn
         * (a table of no turn in place of RoPE) */
        if ((st = pass_qkv(p, l)) || (st = pass_attention(p, l)) ||
            (st = pass_residual(p, &l->wo, PASS_ATTN_OUT, l->ffn_norm)))
            return st;
    }
    /* x += the FFN (or the experts) of RMSNorm(x) * ffn_norm */
    return pass_ffn(p, l, next_norm);
}

glesllm_status jamba_graph(gpu_pass *p)
{
    const gpu_model *gm = p->gm;
    uint32_t n_layer = gm->m->hp.n_layer;
    glesllm_status st = pass_embed(p);
    for (uint32_t i = 0; st == GLESLLM_OK && i < n_layer; i++)
        st = jamba_layer(p, &gm->layers[i],
                         i + 1 < n_layer ? gm->layers[i + 1].attn_norm : gm->out_norm);
    return st ? st : pass_logits(p, gm->out_norm);
}
