/* The Mamba graph (Mamba-1, FalconMamba): no attention and no FFN, each
 * layer one selective state-space block on the residual stream, its
 * recurrent state in the layer's state slots (ops/ssm.h). Shapes a token,
 * as in the activation buffer:
 *   x, xn   n_embd            the residual stream, its norm
 *   x | z   2 x d_inner       the block's input and gate
 *   xc      d_inner           the input after the causal convolution
 *   dt|B|C  dt_rank + 2 x d_state
 *   y       d_inner           the scan's output, gated */
#include "model/gpu_model_impl.h"

glesllm_status mamba_graph(gpu_pass *p)
{
    const gpu_model *gm = p->gm;
    uint32_t n_layer = gm->m->hp.n_layer;
    /* x = token_embd[token] */
    glesllm_status st = pass_embed(p);
    for (uint32_t i = 0; st == GLESLLM_OK && i < n_layer; i++) {
        const gpu_layer *l = &gm->layers[i];
        uint64_t next_norm = i + 1 < n_layer ? gm->layers[i + 1].attn_norm : gm->out_norm;
        /* xn = RMSNorm(x) * attn_norm; x | z = Win xn; xc = silu(conv(x));
         * dt | B | C = Wx xc; y = (scan + D xc) * silu(z) */
        if (!(st = pass_norm(p, l->attn_norm)) && !(st = pass_ssm(p, l)))
            /* x += Wout y */
            st = pass_residual(p, &l->ssm_out, PASS_SSM_OUT, next_norm);
    }
    /* logits = Woutput RMSNorm(x) * out_norm, and what the pass asks of them */
    return st ? st : pass_logits(p, gm->out_norm);
}
