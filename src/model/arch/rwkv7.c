/* The RWKV-7 graph: the embeddings LayerNorm'd, then each layer's time mix
 * and channel mix on the residual stream (ops/rwkv.h), their recurrent
 * state in the layer's state slots as a Mamba block's. Shapes a token, as
 * in the activation buffer:
 *   x               n_embd        the residual stream
 *   mixes           6 x n_embd    the normed x shifted toward the previous
 *                                 token's, one mix each for r w k v a g
 *   r k v y g       n_embd        receptance, key, value, output, gate
 *   path middles    their ranks   the decay's, learning rate's, value
 *                                 residual's and gate's low-rank paths
 *   hidden          n_ff          the channel mix's */
#include "model/gpu_model_impl.h"

glesllm_status rwkv7_graph(gpu_pass *p)
{
    const gpu_model *gm = p->gm;
    /* x = LayerNorm(token_embd[token]) */
    glesllm_status st = pass_embed(p);
    if (!st)
        st = pass_rwkv_embed_norm(p);
    for (uint32_t i = 0; st == GLESLLM_OK && i < gm->m->hp.n_layer; i++) {
        const gpu_layer *l = &gm->layers[i];
        /* x += time mix(LayerNorm(x)); x += channel mix(LayerNorm(x)) */
        if (!(st = pass_rwkv_time(p, l, i == 0)))
            st = pass_rwkv_channel(p, l);
    }
    /* logits = Woutput LayerNorm(x), and what the pass asks of them */
    return st ? st : pass_logits(p, gm->out_norm);
}
