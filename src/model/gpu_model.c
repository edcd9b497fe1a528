/* The GPU model: its weights uploaded (repacked, Q|K|V and gate/up fused),
 * its kernels, the activation buffer's layout, the KV cache, and reading
 * results back. The passes are model/pass.c, the graphs model/arch/. See
 * gpu_model.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/gpu_model_impl.h"
#include "quant/quant.h"

/* Each architecture's graph (model/arch/): adding one is a graph file, an
 * entry here and one in model.c's table. */
static arch_graph arch_graph_of(model_arch arch)
{
    static const arch_graph graphs[] = {
        [MODEL_ARCH_LLAMA] = llama_graph,
        [MODEL_ARCH_QWEN2] = llama_graph, /* biases and NeoX RoPE are data */
        [MODEL_ARCH_QWEN2MOE] = llama_graph, /* and experts */
        [MODEL_ARCH_OLMOE] = llama_graph, /* the Q/K norm is data too */
        [MODEL_ARCH_QWEN3] = llama_graph,
        [MODEL_ARCH_QWEN3MOE] = llama_graph,
        [MODEL_ARCH_PHI3] = llama_graph, /* fused tensors and a window are data */
        [MODEL_ARCH_SMOLLM3] = llama_graph, /* its layers without RoPE: a table of no turn */
        [MODEL_ARCH_MAMBA] = mamba_graph,
        [MODEL_ARCH_MAMBA2] = mamba_graph, /* (its block's ops are data: pass_ssm) */
        [MODEL_ARCH_JAMBA] = jamba_graph,
        [MODEL_ARCH_GEMMA2] = gemma2_graph,
        [MODEL_ARCH_GEMMA3] = gemma2_graph, /* its Q/K norms, window and local RoPE are data */
        [MODEL_ARCH_RWKV7] = rwkv7_graph,
    };
    return graphs[arch];
}

/* ---- policies ---------------------------------------------------------------- */

const char *kv_placement_name(kv_placement p)
{
    return p == KV_MAPPED ? "mapped" : p == KV_DEVICE ? "device" : "auto";
}

glesllm_status kv_placement_choose(gpu_context *ctx, const tuning *tune, kv_placement *out,
                                   const char **why)
{
    const gpu_caps *C = gpu_context_caps(ctx);
    const tuning *t = tuning_or_default(tune);
    if (t->kv != TUNE_AUTO) {
        *out = t->kv == TUNE_KV_MAPPED ? KV_MAPPED : KV_DEVICE;
        if (*out == KV_MAPPED && !C->buffer_storage)
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "GLESLLM_KV=mapped needs GL_EXT_buffer_storage, which this driver lacks");
        *why = "set by GLESLLM_KV";
        return GLESLLM_OK;
    }
    if (!C->buffer_storage) {
        *out = KV_DEVICE;
        *why = "no GL_EXT_buffer_storage for persistent mapping";
    } else if (C->memory_total) {
        /* a mapped buffer lives in host memory there (../shared/DESIGN.md:
         * 51 GB/s against 2860 GB/s on an H200) */
        *out = KV_DEVICE;
        *why = "the driver reports dedicated GPU memory (a discrete GPU reads mapped storage "
               "over the bus)";
    } else {
        *out = KV_MAPPED;
        *why = "no dedicated GPU memory reported: the GPU shares memory with the CPU";
    }
    return GLESLLM_OK;
}

void gpu_model_prefetch_choose(gpu_context *ctx, const tuning *tune, uint64_t down_bytes, bool *out,
                               const char **why)
{
    const tuning *t = tuning_or_default(tune);
    prefetch_choose(ctx, t->prefetch == TUNE_AUTO ? 0 : t->prefetch == TUNE_ON ? 1 : -1,
                    down_bytes, out, why);
}

/* ---- weights ----------------------------------------------------------------- */

/* Row r of the fused matrix when Q/K rows of each head are reordered so the
 * NeoX RoPE pairs (i, i + head_dim/2) become adjacent rows (2i, 2i+1). Any
 * order of a head's dimensions that Q and K share leaves q . k unchanged. */
static uint64_t source_row(uint64_t r, uint32_t head_dim, bool pair_halves)
{
    if (!pair_halves)
        return r;
    uint64_t head = r / head_dim, i = r % head_dim, half = head_dim / 2;
    return head * head_dim + (i % 2 ? i / 2 + half : i / 2);
}

typedef struct fuse_part {
    const model_tensor *t;
    bool pair_halves;
} fuse_part;

/* Uploads rows of several tensors of one type as one weight, its parts
 * holding whole groups of `group` rows (experts; 0: any). interleave: row 2i
 * from parts[0], 2i+1 from parts[1] (gate/up); else one after the other.
 * twin: the same weight of the model whose weights gm shares, taken
 * instead. */
static glesllm_status upload_grouped(gpu_model *gm, const char *name, const fuse_part *parts,
                                     uint32_t n, bool interleave, uint64_t group,
                                     const gpu_weight *twin, gpu_weight *out)
{
    if (twin) { /* the weights of the model gm shares them with (not owned) */
        *out = *twin;
        return GLESLLM_OK;
    }
    const model_tensor *t0 = parts[0].t;
    if (n == 1 && !parts[0].pair_halves) /* the tensor as it is */
        return gpu_weight_upload_groups(gm->ctx, name, t0->type, t0->rows, t0->cols, t0->data,
                                        gm->max_part_bytes, group, out);
    uint64_t rb = model_tensor_row_bytes(t0), rows = 0;
    for (uint32_t i = 0; i < n; i++)
        rows += parts[i].t->rows;
    uint8_t *host = malloc((size_t)(rows * rb));
    if (!host)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of host memory assembling %s", name);
    uint64_t r = 0;
    uint32_t hd = gm->m->hp.head_dim;
    for (uint32_t i = 0; i < n; i++) {
        const model_tensor *t = parts[i].t;
        for (uint64_t j = 0; j < t->rows; j++) {
            uint64_t dst = interleave ? 2 * j + i : r + j;
            memcpy(host + dst * rb,
                   (const uint8_t *)t->data + source_row(j, hd, parts[i].pair_halves) * rb, rb);
        }
        r += t->rows;
    }
    glesllm_status st = gpu_weight_upload_groups(gm->ctx, name, t0->type, rows, t0->cols, host,
                                                 gm->max_part_bytes, group, out);
    free(host);
    return st;
}

static glesllm_status upload_fused(gpu_model *gm, const char *name, const fuse_part *parts,
                                   uint32_t n, bool interleave, const gpu_weight *twin,
                                   gpu_weight *out)
{
    return upload_grouped(gm, name, parts, n, interleave, 0, twin, out);
}

typedef struct upload_progress {
    const gpu_model_options *opt;
    uint64_t done, total;
} upload_progress;

static void progress(upload_progress *p, uint64_t bytes)
{
    p->done += bytes;
    if (p->opt->progress)
        p->opt->progress(p->opt->progress_ud, p->done, p->total);
}

/* Uploads a tensor as one weight with its kernels. */
static glesllm_status upload_linear(gpu_model *gm, const model_tensor *t, const matvec_variant *var,
                                    const gpu_linear *twin, gpu_linear *out)
{
    fuse_part part = { t, false };
    glesllm_status st = upload_fused(gm, t->name, &part, 1, false, twin ? &twin->w : NULL, &out->w);
    return st ? st : gm_linear_kernels(gm, out, var, NULL);
}

/* gate and up (named so in errors) of layer li are one interleaved weight:
 * they must be of one type */
static glesllm_status check_glu_types(uint32_t li, const model_tensor *gate, const char *gname,
                                      const model_tensor *up, const char *uname)
{
    if (gate->type == up->type)
        return GLESLLM_OK;
    return err_set(GLESLLM_ERR_UNSUPPORTED,
                   "layer %u: %s (%s) and %s (%s) differ in type; glesllm runs them as one "
                   "interleaved matrix and needs one type",
                   li, gname, ggml_type_name(gate->type), uname, ggml_type_name(up->type));
}

/* A dense weight read by expert kernels: the router, the shared expert */
static glesllm_status upload_beside(gpu_model *gm, const char *name, const fuse_part *parts,
                                    uint32_t n, matvec_epilogue e, const gpu_linear *twin,
                                    gpu_linear *out, upload_progress *pr)
{
    glesllm_status st = upload_fused(gm, name, parts, n, n == 2, twin ? &twin->w : NULL, &out->w);
    if (!st)
        st = gm_expert_kernel(gm, out, out->w.rows, e, false);
    for (uint32_t i = 0; i < n; i++)
        progress(pr, model_tensor_bytes(parts[i].t));
    gm->weight_bytes += out->w.bytes;
    return st;
}

/* The FFN of a mixture-of-experts layer: router, experts (gate/up
 * interleaved within each expert, as glu's), shared expert and its gate. */
static glesllm_status upload_experts(gpu_model *gm, uint32_t li, upload_progress *pr)
{
    const model_hparams *hp = &gm->m->hp;
    const model_layer *l = &gm->m->layers[li];
    gpu_layer *g = &gm->layers[li];
    const gpu_layer *tw = gm->share ? &gm->share->layers[li] : NULL;
    char name[64];
    glesllm_status st;
    fuse_part r = { &l->router, false };
    if ((st = upload_beside(gm, l->router.name, &r, 1, MATVEC_STORE, tw ? &tw->router : NULL,
                            &g->router, pr)))
        return st;
    if ((st = check_glu_types(li, &l->gate_exps, "ffn_gate_exps", &l->up_exps, "ffn_up_exps")))
        return st;
    fuse_part gu[2] = { { &l->gate_exps, false }, { &l->up_exps, false } };
    fuse_part dn = { &l->down_exps, false };
    snprintf(name, sizeof name, "blk.%u.ffn_gate_up_exps", li);
    if ((st = upload_grouped(gm, name, gu, 2, true, 2ull * hp->n_ff_exp, tw ? &tw->eglu.w : NULL,
                             &g->eglu.w)) ||
        (st = gm_expert_kernel(gm, &g->eglu, 2ull * hp->n_ff_exp, MATVEC_GLU, true)) ||
        (st = upload_grouped(gm, l->down_exps.name, &dn, 1, false, hp->n_embd,
                             tw ? &tw->edown.w : NULL, &g->edown.w)) ||
        (st = gm_expert_kernel(gm, &g->edown, hp->n_embd, MATVEC_STORE, true)))
        return st;
    progress(pr, 2 * model_tensor_bytes(&l->gate_exps) + model_tensor_bytes(&l->down_exps));
    gm->weight_bytes += g->eglu.w.bytes + g->edown.w.bytes;
    if (!hp->n_ff_shexp)
        return GLESLLM_OK;
    if ((st = check_glu_types(li, &l->gate_shexp, "ffn_gate_shexp", &l->up_shexp, "ffn_up_shexp")))
        return st;
    fuse_part sgu[2] = { { &l->gate_shexp, false }, { &l->up_shexp, false } };
    fuse_part sdn = { &l->down_shexp, false }, sgt = { &l->shexp_gate, false };
    snprintf(name, sizeof name, "blk.%u.ffn_gate_up_shexp", li);
    if ((st = upload_beside(gm, name, sgu, 2, MATVEC_GLU, tw ? &tw->sglu : NULL, &g->sglu, pr)) ||
        (st = gm_plain_matmul(gm, &g->sglu, MATVEC_GLU)) ||
        (st = upload_beside(gm, l->down_shexp.name, &sdn, 1, MATVEC_STORE,
                            tw ? &tw->sdown : NULL, &g->sdown, pr)) ||
        (st = gm_plain_matmul(gm, &g->sdown, MATVEC_STORE)))
        return st;
    return upload_beside(gm, l->shexp_gate.name, &sgt, 1, MATVEC_STORE, tw ? &tw->sgate : NULL,
                         &g->sgate, pr);
}

/* The shape of a model's Mamba blocks, for ops/ssm.h. */
static ssm_shape ssm_shape_of(const model_hparams *hp)
{
    ssm_shape s = { hp->ssm_d_inner, hp->ssm_d_conv,  hp->ssm_d_state, hp->ssm_dt_rank,
                    hp->ssm_dt_b_c_rms, hp->ssm_mamba2, hp->ssm_n_group };
    return s;
}

/* Rows [0, rows) of t dequantized into dst, row i at dst + i * stride (a
 * vector, one row: any stride). */
static glesllm_status put_rows(const model_tensor *t, float *dst, uint64_t stride)
{
    for (uint64_t i = 0; i < t->rows; i++) {
        glesllm_status st = quant_dequantize(
            t->type, (const uint8_t *)t->data + i * model_tensor_row_bytes(t), dst + i * stride,
            t->cols);
        if (st)
            return err_prefix(st, "tensor %s: ", t->name);
    }
    return GLESLLM_OK;
}

/* A Mamba block: its three projections as weights, its small tensors in one
 * parameter buffer (ops/ssm.h ssm_params). */
static glesllm_status upload_ssm_layer(gpu_model *gm, uint32_t li, upload_progress *pr)
{
    const model_hparams *hp = &gm->m->hp;
    const model_layer *l = &gm->m->layers[li];
    gpu_layer *g = &gm->layers[li];
    const gpu_layer *tw = gm->share ? &gm->share->layers[li] : NULL;
    matvec_variant in = { MATVEC_STORE }, plain = { MATVEC_STORE }, add = { MATVEC_ADD };
    in.norm_scale = add.norm_out = gm->fuse_norm;
    glesllm_status st;
    bool m2 = hp->ssm_mamba2; /* (no x projection: B, C and the steps come from in) */
    if ((st = upload_linear(gm, &l->ssm_in, &in, tw ? &tw->ssm_in : NULL, &g->ssm_in)) ||
        (!m2 && (st = upload_linear(gm, &l->ssm_x, &plain, tw ? &tw->ssm_x : NULL, &g->ssm_x))) ||
        (st = upload_linear(gm, &l->ssm_out, &add, tw ? &tw->ssm_out : NULL, &g->ssm_out)))
        return st;
    const model_tensor *big[] = { &l->ssm_in, &l->ssm_x, &l->ssm_out };
    for (size_t i = 0; i < 3; i++)
        if (big[i]->data)
            progress(pr, model_tensor_bytes(big[i]));
    gm->weight_bytes += g->ssm_in.w.bytes + g->ssm_x.w.bytes + g->ssm_out.w.bytes;
    ssm_shape sh = ssm_shape_of(hp);
    ssm_params pl = ssm_params_layout(&sh);
    uint32_t di = hp->ssm_d_inner, r = hp->ssm_dt_rank;
    float *host = calloc((size_t)pl.floats, sizeof(float));
    if (!host)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of host memory for layer %u's SSM parameters",
                       li);
    if ((st = put_rows(&l->ssm_conv, host + pl.taps, hp->ssm_d_conv)) ||
        (st = put_rows(&l->ssm_conv_b, host + pl.conv_b, 0))) {
        /* (nothing else to put) */
    } else if (m2) { /* a head's bias, A and D; the grouped norm's weights */
        if (!(st = put_rows(&l->ssm_dt_b, host + pl.dt_b, 0)) &&
            !(st = put_rows(&l->ssm_a, host + pl.a, 1)) && !(st = put_rows(&l->ssm_d, host + pl.d, 1)))
            st = put_rows(&l->ssm_norm, host + pl.norm_w, di / hp->ssm_n_group);
    } else if (!(st = put_rows(&l->ssm_dt, host + pl.dt_w, r)) &&
               !(st = put_rows(&l->ssm_dt_b, host + pl.dt_b, 0)) &&
               !(st = put_rows(&l->ssm_a, host + pl.a, hp->ssm_d_state)) &&
               !(st = put_rows(&l->ssm_d, host + pl.d, 0))) {
        /* the norms' weights (Jamba), else ones (FalconMamba's have none) */
        const model_tensor *nw[3] = { &l->ssm_dt_norm, &l->ssm_b_norm, &l->ssm_c_norm };
        uint64_t at = pl.norm_w;
        for (uint32_t i = 0; !st && i < 3; i++) {
            uint32_t n = i ? hp->ssm_d_state : r;
            for (uint32_t k = 0; k < n; k++)
                host[at + k] = 1.0f;
            if (nw[i]->data)
                st = put_rows(nw[i], host + at, n);
            at += n;
        }
    }
    if (!st) {
        char what[48];
        snprintf(what, sizeof what, "SSM parameters of layer %u", li);
        st = gpu_buffer_create(gm->ctx, (size_t)pl.floats * 4, host, GPU_BUFFER_DEVICE, what,
                               &g->ssm_par);
    }
    free(host);
    const model_tensor *small[] = { &l->ssm_conv, &l->ssm_conv_b, &l->ssm_dt,  &l->ssm_dt_b,
                                    &l->ssm_a,    &l->ssm_d,      &l->ssm_norm };
    for (size_t i = 0; i < 7; i++)
        if (small[i]->data)
            progress(pr, model_tensor_bytes(small[i]));
    return st;
}

static rwkv_shape rwkv_shape_of(const model_hparams *hp)
{
    rwkv_shape s = { hp->n_embd, hp->rwkv_head };
    return s;
}

/* An RWKV-7 layer: its matrices as weights (the outputs adding to x), its
 * vectors in one parameter buffer (ops/rwkv.h rwkv_params). */
static glesllm_status upload_rwkv_layer(gpu_model *gm, uint32_t li, upload_progress *pr)
{
    const model_hparams *hp = &gm->m->hp;
    const model_layer *l = &gm->m->layers[li];
    gpu_layer *g = &gm->layers[li];
    const gpu_layer *tw = gm->share ? &gm->share->layers[li] : NULL;
    matvec_variant plain = { MATVEC_STORE }, add = { MATVEC_ADD };
    struct {
        const model_tensor *t;
        gpu_linear *out;
        const gpu_linear *twin;
        const matvec_variant *var;
    } mats[] = {
        { &l->wq, &g->rw_r, tw ? &tw->rw_r : NULL, &plain },
        { &l->wk, &g->rw_k, tw ? &tw->rw_k : NULL, &plain },
        { &l->wv, &g->rw_v, tw ? &tw->rw_v : NULL, &plain },
        { &l->tm_w1, &g->rw_w1, tw ? &tw->rw_w1 : NULL, &plain },
        { &l->tm_w2, &g->rw_w2, tw ? &tw->rw_w2 : NULL, &plain },
        { &l->tm_a1, &g->rw_a1, tw ? &tw->rw_a1 : NULL, &plain },
        { &l->tm_a2, &g->rw_a2, tw ? &tw->rw_a2 : NULL, &plain },
        /* (layer 0's value-residual path is never read) */
        { li ? &l->tm_v1 : NULL, &g->rw_v1, tw ? &tw->rw_v1 : NULL, &plain },
        { li ? &l->tm_v2 : NULL, &g->rw_v2, tw ? &tw->rw_v2 : NULL, &plain },
        { &l->tm_g1, &g->rw_g1, tw ? &tw->rw_g1 : NULL, &plain },
        { &l->tm_g2, &g->rw_g2, tw ? &tw->rw_g2 : NULL, &plain },
        { &l->wo, &g->wo, tw ? &tw->wo : NULL, &add },
        { &l->up, &g->rw_ck, tw ? &tw->rw_ck : NULL, &plain },
        { &l->down, &g->down, tw ? &tw->down : NULL, &add },
    };
    glesllm_status st = GLESLLM_OK;
    for (size_t i = 0; !st && i < sizeof mats / sizeof mats[0]; i++) {
        if (!mats[i].t)
            continue;
        st = upload_linear(gm, mats[i].t, mats[i].var, mats[i].twin, mats[i].out);
        progress(pr, model_tensor_bytes(mats[i].t));
        gm->weight_bytes += mats[i].out->w.bytes;
    }
    if (st)
        return st;
    rwkv_shape sh = rwkv_shape_of(hp);
    rwkv_params pl = rwkv_params_layout(&sh);
    float *host = calloc((size_t)pl.floats, sizeof(float));
    if (!host)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of host memory for layer %u's parameters", li);
    const struct {
        const model_tensor *t;
        uint64_t at;
    } vecs[] = { { &l->attn_norm, pl.att_w }, { &l->attn_norm_b, pl.att_b },
                 { &l->ffn_norm, pl.ffn_w },  { &l->ffn_norm_b, pl.ffn_b },
                 { &l->tm_lerp, pl.lerp },    { &l->cm_lerp, pl.cm_lerp },
                 { &l->tm_w0, pl.w0 },        { &l->tm_a0, pl.a0 },
                 { &l->tm_v0, pl.v0 },        { &l->tm_k_k, pl.k_k },
                 { &l->tm_k_a, pl.k_a },      { &l->tm_r_k, pl.r_k },
                 { &l->tm_ln, pl.ln_w },      { &l->tm_ln_b, pl.ln_b } };
    for (size_t i = 0; !st && i < sizeof vecs / sizeof vecs[0]; i++) {
        st = put_rows(vecs[i].t, host + vecs[i].at, hp->n_embd);
        progress(pr, model_tensor_bytes(vecs[i].t));
    }
    if (!st) {
        char what[48];
        snprintf(what, sizeof what, "RWKV parameters of layer %u", li);
        st = gpu_buffer_create(gm->ctx, (size_t)pl.floats * 4, host, GPU_BUFFER_DEVICE, what,
                               &g->ssm_par);
    }
    free(host);
    return st;
}

/* A layer's FFN: experts where it has a router, else gate/up (interleaved)
 * and down. */
static glesllm_status upload_ffn(gpu_model *gm, uint32_t li, upload_progress *pr)
{
    const model_layer *l = &gm->m->layers[li];
    gpu_layer *g = &gm->layers[li];
    const gpu_layer *tw = gm->share ? &gm->share->layers[li] : NULL;
    if (g->moe)
        return upload_experts(gm, li, pr);
    matvec_variant add = { MATVEC_ADD }, glu = { MATVEC_GLU };
    add.norm_out = glu.norm_scale = gm->fuse_norm;
    glu.gelu = gm->m->hp.gelu;
    if (gm->m->hp.post_norms) /* (down's output normalised before the add: pass_residual) */
        add.epilogue = MATVEC_STORE;
    char name[64];
    glesllm_status st;
    if ((st = check_glu_types(li, &l->gate, "ffn_gate", &l->up, "ffn_up")))
        return st;
    fuse_part gu[2] = { { &l->gate, false }, { &l->up, false } };
    snprintf(name, sizeof name, "blk.%u.ffn_gate_up", li);
    if ((st = upload_fused(gm, name, gu, 2, true, tw ? &tw->glu.w : NULL, &g->glu.w)) ||
        (st = gm_linear_kernels(gm, &g->glu, &glu, NULL)))
        return st;
    progress(pr, 2 * model_tensor_bytes(&l->gate));
    if ((st = upload_linear(gm, &l->down, &add, tw ? &tw->down : NULL, &g->down)))
        return st;
    progress(pr, model_tensor_bytes(&l->down));
    gm->weight_bytes += g->glu.w.bytes + g->down.w.bytes;
    return GLESLLM_OK;
}

static glesllm_status upload_layer(gpu_model *gm, uint32_t li, upload_progress *pr)
{
    const model_layer *ml = &gm->m->layers[li];
    gm->layers[li].recurrent = ml->recurrent;
    gm->layers[li].moe = ml->router.data != NULL;
    if (gm->m->hp.rwkv)
        return upload_rwkv_layer(gm, li, pr);
    if (ml->recurrent) { /* (Jamba's with a FFN after it, Mamba-1's without) */
        glesllm_status st = upload_ssm_layer(gm, li, pr);
        return st || !ml->ffn_norm.data ? st : upload_ffn(gm, li, pr);
    }
    const model_hparams *hp = &gm->m->hp;
    const model_layer *l = &gm->m->layers[li];
    gpu_layer *g = &gm->layers[li];
    const gpu_layer *tw = gm->share ? &gm->share->layers[li] : NULL; /* shared weights */
    bool neox = hp->rope_neox;
    g->window = model_layer_window(hp, li);
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    matvec_variant qkv = { MATVEC_QKV, false, q_dim, kv_dim, hp->head_dim, l->bq.data != NULL,
                           gm->kvl };
    qkv.norm_scale = gm->fuse_norm;
    /* a Q/K norm needs whole rows before RoPE: the projections store them
     * and ops/norm.h's Q/K norm does the QKV epilogue's work */
    matvec_variant rows = { MATVEC_STORE }, rows_multi = { MATVEC_STORE, true };
    rows.norm_scale = gm->fuse_norm;
    bool qk = hp->qk_norm != MODEL_QK_NONE;
    /* (NeoX RoPE: Q's and K's rows reordered so that a rotated pair is two
     * adjacent rows, as for the other models) */
    fuse_part parts[3] = { { &l->wq, neox }, { &l->wk, neox }, { &l->wv, false } };
    char name[64];
    glesllm_status st;
    /* Q, K, V: one weight for each run of equal types */
    uint64_t row_base = 0;
    for (uint32_t i = 0; i < 3;) {
        uint32_t j = i + 1;
        while (j < 3 && parts[j].t->type == parts[i].t->type)
            j++;
        segment *s = &g->qkv[g->n_qkv];
        snprintf(name, sizeof name, "blk.%u.attn_qkv[%u]", li, g->n_qkv);
        if ((st = upload_fused(gm, name, parts + i, j - i, false, tw ? &tw->qkv[g->n_qkv].l.w : NULL,
                               &s->l.w)))
            return st;
        g->n_qkv++;
        s->row_base = row_base;
        row_base += s->l.w.rows;
        if ((st = gm_linear_kernels(gm, &s->l, qk ? &rows : &qkv, qk ? &rows_multi : NULL)))
            return st;
        for (uint32_t k = i; k < j; k++)
            progress(pr, model_tensor_bytes(parts[k].t));
        i = j;
    }
    /* the residual adds write the next norm's first half, the matvecs after
     * them scale (the norm split across two kernels) */
    matvec_variant add = { MATVEC_ADD };
    add.norm_out = gm->fuse_norm;
    if (hp->post_norms) /* (O's output normalised before the add: pass_residual) */
        add.epilogue = MATVEC_STORE;
    if ((st = upload_linear(gm, &l->wo, &add, tw ? &tw->wo : NULL, &g->wo)))
        return st;
    progress(pr, model_tensor_bytes(&l->wo));
    for (uint32_t i = 0; i < g->n_qkv; i++)
        gm->weight_bytes += g->qkv[i].l.w.bytes;
    gm->weight_bytes += g->wo.w.bytes;
    return upload_ffn(gm, li, pr);
}

/* ---- the activation buffer --------------------------------------------------- */

static uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

/* Dequantizes a 1-D tensor (norm weight, bias) into dst, reordered by
 * source_row when pair_halves (a Q or K bias under NeoX RoPE). */
static glesllm_status put_vector(const model_tensor *t, float *dst, uint32_t head_dim,
                                 bool pair_halves)
{
    float *tmp = malloc(sizeof(float) * t->cols);
    if (!tmp)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    glesllm_status st = quant_dequantize(t->type, t->data, tmp, t->cols);
    for (uint64_t i = 0; st == GLESLLM_OK && i < t->cols; i++)
        dst[i] = tmp[source_row(i, head_dim, pair_halves)];
    free(tmp);
    return st ? err_prefix(st, "tensor %s: ", t->name) : GLESLLM_OK;
}

/* The logit rows an argmax takes at once: a small prefill's every position,
 * else one. Its partials' room and its counters are both sized by it. */
static uint32_t argmax_rows(const gpu_model *gm)
{
    return gm->n_small ? gm->n_small : 1;
}

static glesllm_status create_act(gpu_model *gm)
{
    const model *m = gm->m;
    const model_hparams *hp = &m->hp;
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    /* the page table first (glsl/common.glsl KV_ROW) */
    uint64_t table = (uint64_t)gm->kv_rows * gm->kvl.pps;
    uint64_t at = align64(table), emb = align64(hp->n_embd);
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        gm->layers[i].attn_norm = at;
        gm->layers[i].ffn_norm = at + emb;
        at += 2 * emb;
        if (m->layers[i].bq.data) {
            gm->layers[i].bias = at;
            at += align64(q_dim + 2ull * kv_dim);
        }
        if (m->layers[i].attn_post_norm.data) {
            gm->layers[i].attn_post = at;
            gm->layers[i].ffn_post = at + emb;
            at += 2 * emb;
        }
        if (m->layers[i].q_norm.data) {
            gm->layers[i].q_norm = at;
            at += align64(m->layers[i].q_norm.cols);
            gm->layers[i].k_norm = at;
            at += align64(m->layers[i].k_norm.cols);
        }
    }
    gm->out_norm = at;
    at += hp->rwkv ? 2 * emb : emb; /* (RWKV: its bias after it) */
    gm->rope = at;
    at += align64((uint64_t)gm->n_ctx * hp->head_dim);
    /* layers without RoPE rotate by a table of cos 1, sin 0: the same
     * kernels, the values unchanged to the bit */
    gm->no_rope = 0;
    /* (Gemma 3's window layers turn by a table of their own) */
    uint64_t local_rope = 0;
    if (hp->rope_base_swa > 0.0f) {
        local_rope = at;
        at += align64((uint64_t)gm->n_ctx * hp->head_dim);
    }
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        bool rope = model_layer_rope(hp, i);
        if (!rope && !gm->no_rope) {
            gm->no_rope = at;
            at += align64((uint64_t)gm->n_ctx * hp->head_dim);
        }
        gm->layers[i].rope = !rope ? gm->no_rope
                             : local_rope && model_layer_window(hp, i) ? local_rope
                                                                       : gm->rope;
    }
    gm->x = at;
    at += emb;
    gm->xn = at;
    at += emb;
    gm->sq = at; /* a slot's sum for each row at most (matvec_norm_parts), or rms_prep's */
    at += align64(hp->n_embd > NORM_WG ? hp->n_embd : NORM_WG);
    gm->attn_out = at;
    at += align64(q_dim);
    gm->hidden = at;
    at += align64(hp->n_ff);
    gm->logits = at;
    at += align64(hp->n_vocab);
    /* the attention's partial results for each head of each of few_n tokens
     * (a step's are fewer) */
    gm->partials = at;
    gm->few_n = gm_few_limit(gm, 0);
    at += align64(attn_partials_floats(&gm->attn, gm->few_n));
    gm->argmax_part = at;
    at += align64(sample_argmax_floats(hp->n_vocab) * argmax_rows(gm));
    gm->vlog = at;
    at += align64((uint64_t)gm->n_small * act_stride(hp->n_vocab));
    gm->lists = at;
    at += align64(sample_topk_floats(hp->n_vocab));
    /* (the widest row's units of multi_nt tokens; O's rows are q_dim long,
     * a Mamba block's x and out projections' d_inner) */
    uint64_t widest = hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd;
    widest = q_dim > widest ? q_dim : widest;
    widest = hp->ssm_d_inner > widest ? hp->ssm_d_inner : widest;
    gm->bxp = at;
    at += align64(matvec_xg_room(widest, gm->multi_nt));
    /* prefill rows, n_batch of each: x, its norm, Q, attention out, FFN
     * hidden; the batch shrinks to what the storage-block limit leaves */
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    uint64_t per_tok = 2 * act_stride(hp->n_embd) + 2 * act_stride(q_dim) + act_stride(hp->n_ff);
    uint64_t qkv_row = act_stride(q_dim + 2ull * kv_dim);
    if (hp->qk_norm != MODEL_QK_NONE)
        per_tok += qkv_row;
    /* experts: a token's router logits, route, shared gate, and for each of
     * its slots (and the shared expert) a hidden row and an output row, and
     * its slots' places in the grouping (with the experts' counts) */
    uint32_t ke = hp->n_expert_used;
    if (hp->n_expert) {
        per_tok += act_stride(hp->n_expert) + 4 * ke + 1 + ke * act_stride(hp->n_ff_exp) +
                   (ke + 1ull) * act_stride(hp->n_embd) + act_stride(hp->n_ff_shexp);
        gm->moe_group = at;
        at += align64(moe_group_floats(hp->n_expert));
    }
    /* Mamba blocks: a token's x|z, convolved x, dt|B|C, output and steps'
     * sums, and its share of the scan's carries (a sub-chunk's each
     * ssm_sub_tokens of a full chunk) */
    ssm_shape sh = ssm_shape_of(hp);
    if (hp->post_norms)
        per_tok += act_stride(hp->n_embd);
    if (hp->ssm)
        per_tok += act_stride(ssm_in_width(hp)) + act_stride(ssm_conv_channels(hp)) +
                   2 * act_stride(hp->ssm_d_inner) +
                   act_stride(hp->ssm_dt_rank + 2ull * hp->ssm_d_state) +
                   (uint64_t)hp->ssm_d_inner * hp->ssm_d_state;
    /* RWKV-7: a token's six mixes and nine rows of n_embd, its low-rank
     * paths' middles and its channel mix's hidden row */
    uint64_t rw_ranks[4] = { hp->rwkv_lora_w, hp->rwkv_lora_a, hp->rwkv_lora_v, hp->rwkv_lora_g };
    /* (and the chunked update's data: a chunk's share a token, one chunk
     * more for a batch that ends in part of one) */
    uint64_t rw_chunk = hp->rwkv ? rwkv_chunk_floats(&gm->rwkv, 1) : 0;
    if (hp->rwkv) {
        per_tok += 15 * act_stride(hp->n_embd) + act_stride(hp->n_ff);
        for (int i = 0; i < 4; i++)
            per_tok += act_stride(rw_ranks[i]);
        if (gm->rwkv.chunk)
            per_tok += (rw_chunk + gm->rwkv.chunk - 1) / gm->rwkv.chunk;
        gm->rw_tok_norm = at;
        at += 2 * emb;
    }
    uint64_t room = limit / 4 > at + 1024 + rw_chunk ? (limit / 4 - at - 1024 - rw_chunk) / per_tok
                                                     : 0;
    if (gm->n_batch > room)
        gm->n_batch = room ? (uint32_t)room : 1;
    if (gm->n_small > gm->n_batch)
        gm->n_small = gm->n_batch;
    uint64_t nb = gm->n_batch;
    gm->bx = at;
    at += align64(nb * act_stride(hp->n_embd));
    gm->bxn = at;
    at += align64(nb * act_stride(hp->n_embd));
    gm->bq = at;
    at += align64(nb * act_stride(q_dim));
    gm->battn = at;
    at += align64(nb * act_stride(q_dim));
    gm->bhid = at;
    at += align64(nb * act_stride(hp->n_ff));
    if (hp->qk_norm != MODEL_QK_NONE) {
        gm->bqkv = at;
        at += align64(nb * qkv_row);
    }
    if (hp->post_norms) {
        gm->post = at;
        at += align64(nb * act_stride(hp->n_embd));
    }
    if (hp->ssm) {
        gm->ssm_xz = at;
        at += align64(nb * act_stride(ssm_in_width(hp)));
        gm->ssm_xc = at;
        at += align64(nb * act_stride(ssm_conv_channels(hp)));
        gm->ssm_dbc = at;
        at += align64(nb * act_stride(hp->ssm_dt_rank + 2ull * hp->ssm_d_state));
        gm->ssm_y = at;
        at += align64(nb * act_stride(hp->ssm_d_inner));
        gm->ssm_cum = at;
        at += align64(nb * act_stride(hp->ssm_d_inner));
        gm->ssm_carry = at;
        at += align64(ssm_carry_floats(&sh, gm->n_batch));
        gm->ssm_gram = at;
        at += align64(ssm_gram_floats(&sh, gm->n_batch));
    }
    if (hp->rwkv) {
        uint64_t rows = align64(nb * act_stride(hp->n_embd));
        gm->rw_mix = at;
        gm->rw_block = rows;
        at += 6 * rows;
        uint64_t *one[] = { &gm->rw_r, &gm->rw_k, &gm->rw_v, &gm->rw_first, &gm->rw_y,
                            &gm->rw_g, &gm->rw_lw, &gm->rw_la, &gm->rw_lv };
        for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
            *one[i] = at;
            at += rows;
        }
        uint64_t *mid[] = { &gm->rw_mw, &gm->rw_ma, &gm->rw_mv, &gm->rw_mg };
        for (int i = 0; i < 4; i++) {
            *mid[i] = at;
            at += align64(nb * act_stride(rw_ranks[i]));
        }
        gm->rw_hid = at;
        at += align64(nb * act_stride(hp->n_ff));
        gm->rw_chunks = at;
        at += align64(rwkv_chunk_floats(&gm->rwkv, gm->n_batch));
    }
    if (hp->n_expert) {
        gm->moe_logits = at;
        at += align64(nb * act_stride(hp->n_expert));
        gm->moe_route = at;
        at += align64(nb * 2 * ke);
        gm->moe_sgate = at;
        at += align64(nb);
        gm->moe_hid = at;
        at += align64(nb * ke * act_stride(hp->n_ff_exp));
        gm->moe_out = at;
        at += align64(nb * ke * act_stride(hp->n_embd));
        gm->moe_shared = at;
        at += align64(nb * act_stride(hp->n_embd));
        gm->moe_shid = at;
        at += align64(nb * act_stride(hp->n_ff_shexp));
        gm->moe_list = at;
        at += align64(moe_list_floats(nb * ke));
    }
    if (at * 4 > limit)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "the activations and constants (%.1f MiB at context %u, batch %u) exceed "
                       "the GPU's storage-block limit of %.0f MiB; use a smaller -c or -b",
                       at * 4.0 / (1 << 20), gm->n_ctx, gm->n_batch, limit / 1048576.0);
    float *host = calloc((size_t)at, sizeof(float));
    if (!host)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of host memory");
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; st == GLESLLM_OK && i < hp->n_layer; i++) {
        const model_layer *l = &m->layers[i];
        const gpu_layer *g = &gm->layers[i];
        if (hp->rwkv) /* (its norms are in its parameter buffer) */
            continue;
        st = put_vector(&l->attn_norm, host + g->attn_norm, hp->head_dim, false);
        if (!st && l->ffn_norm.data) /* (Mamba blocks have one norm) */
            st = put_vector(&l->ffn_norm, host + g->ffn_norm, hp->head_dim, false);
        if (!st && l->bq.data) {
            float *b = host + g->bias;
            if (!(st = put_vector(&l->bq, b, hp->head_dim, hp->rope_neox)) &&
                !(st = put_vector(&l->bk, b + q_dim, hp->head_dim, hp->rope_neox)))
                st = put_vector(&l->bv, b + q_dim + kv_dim, hp->head_dim, false);
        }
        if (!st && l->attn_post_norm.data &&
            !(st = put_vector(&l->attn_post_norm, host + g->attn_post, hp->head_dim, false)))
            st = put_vector(&l->ffn_post_norm, host + g->ffn_post, hp->head_dim, false);
        /* (reordered as Q's and K's rows are) */
        if (!st && l->q_norm.data &&
            !(st = put_vector(&l->q_norm, host + g->q_norm, hp->head_dim, hp->rope_neox)))
            st = put_vector(&l->k_norm, host + g->k_norm, hp->head_dim, hp->rope_neox);
    }
    if (!st)
        st = put_vector(&m->out_norm, host + gm->out_norm, hp->head_dim, false);
    if (!st && hp->rwkv &&
        !(st = put_vector(&m->out_norm_b, host + gm->out_norm + emb, 0, false)) &&
        !(st = put_vector(&m->tok_norm, host + gm->rw_tok_norm, 0, false)))
        st = put_vector(&m->tok_norm_b, host + gm->rw_tok_norm + emb, 0, false);
    for (uint32_t i = 0; !st && local_rope && i < hp->n_layer; i++)
        if (gm->layers[i].rope == local_rope) {
            model_hparams l = model_layer_rope_hp(hp, i);
            model_rope_table(&l, gm->n_ctx, host + local_rope);
            break;
        }
    if (!st) {
        model_rope_table(hp, gm->n_ctx, host + gm->rope);
        for (uint64_t i = 0; gm->no_rope && i < (uint64_t)gm->n_ctx * hp->head_dim; i++)
            host[gm->no_rope + i] = i % 2 ? 0.0f : 1.0f;
        if (table) /* (a model without attention has none) */
            memcpy(host, gm->kv_tab, (size_t)table * 4);
        /* dynamic: the page table changes as sequences take pages */
        st = gpu_buffer_create(gm->ctx, (size_t)(at * 4), host, GPU_BUFFER_DYNAMIC, "activations",
                               &gm->act);
    }
    free(host);
    return st;
}

/* Each Mamba block's state buffer: SSM_SLOTS slots of its recurrent state. */
static glesllm_status create_states(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    ssm_shape sh = ssm_shape_of(hp);
    gm->slot = ssm_slot_layout(&sh);
    if (hp->rwkv) { /* (the token shifts where the convolution's inputs are) */
        rwkv_shape rs = rwkv_shape_of(hp);
        rwkv_slot rl = rwkv_slot_layout(&rs);
        gm->slot = (ssm_slot){ rl.att, rl.wkv, rl.floats };
    }
    uint64_t bytes = gm->slot.floats * SSM_SLOTS * 4;
    if (bytes > gpu_context_limits(gm->ctx)->max_storage_block_bytes)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "one layer's recurrent state (%.1f MiB) exceeds the GPU's storage-block "
                       "limit", bytes / 1048576.0);
    float *zeros = calloc((size_t)(bytes / 4), sizeof(float));
    if (!zeros)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the recurrent state");
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; st == GLESLLM_OK && i < hp->n_layer; i++) {
        if (!gm->m->layers[i].recurrent)
            continue;
        char what[48];
        snprintf(what, sizeof what, "recurrent state of layer %u", i);
        st = gpu_buffer_create(gm->ctx, (size_t)bytes, zeros, GPU_BUFFER_DYNAMIC, what,
                               &gm->layers[i].ssm_state);
    }
    free(zeros);
    return st;
}

/* Whether any layer of m has attention (a KV cache). */
static bool has_attention(const model *m)
{
    return model_recurrent_layers(m) < m->hp.n_layer;
}

static glesllm_status create_caches(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    glesllm_status st;
    if (model_hp_recurrent(hp) && (st = create_states(gm)))
        return st;
    if (!has_attention(gm->m)) {
        st = gpu_buffer_create(gm->ctx, (size_t)(gm->n_ctx + 1) * 4, NULL, GPU_BUFFER_MAPPED,
                               "token ids", &gm->tokens);
        return st ? st
                  : gpu_buffer_create(gm->ctx, (2 + 2 * GPU_MAX_CANDIDATES) * 4, NULL,
                                      GPU_BUFFER_MAPPED, "sampling candidates", &gm->cand);
    }
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    gm->k_base = align64(q_dim);
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    /* dynamic: a session file is written back into them */
    unsigned flags = gm->kv == KV_MAPPED ? GPU_BUFFER_MAPPED : GPU_BUFFER_DYNAMIC;
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        if (gm->m->layers[i].recurrent)
            continue;
        gpu_layer *l = &gm->layers[i];
        l->ring = gm_kv_layer_ring(gm, i);
        uint64_t positions = (uint64_t)gm->kvp[l->ring].pages * gm->kvl.page;
        l->v_base = gm->k_base + align64(positions * kv_dim / 2);
        uint64_t bytes = (l->v_base + align64(positions * kv_dim / 2)) * 4;
        if (bytes > limit)
            return err_set(GLESLLM_ERR_UNSUPPORTED,
                           "one layer's KV cache of %llu positions needs %.1f MiB, over the "
                           "GPU's storage-block limit of %.0f MiB; use a smaller -c%s",
                           (unsigned long long)positions, bytes / 1048576.0, limit / 1048576.0,
                           gm->n_seq > 1 ? " or fewer sequences" : "");
        char what[48];
        snprintf(what, sizeof what, "KV cache of layer %u", i);
        st = gpu_buffer_create(gm->ctx, (size_t)bytes, NULL, flags, what, &l->cache);
        if (st != GLESLLM_OK)
            return st;
    }
    /* each sequence's slots, then a batch's ids and picks */
    gm->tok_scratch = gm->n_seq * (gm->n_ctx + 1);
    st = gpu_buffer_create(gm->ctx, (size_t)(gm->tok_scratch + 2 * gm->n_small + 2) * 4, NULL,
                           GPU_BUFFER_MAPPED, "token ids", &gm->tokens);
    if (st)
        return st;
    /* a counter a (query, head) */
    st = gpu_buffer_create_zeroed(gm->ctx, (size_t)attn_counters(&gm->attn, gm->few_n) * 4,
                                  GPU_BUFFER_DEVICE, "attention counters", &gm->attn_count);
    if (st)
        return st;
    return gpu_buffer_create(gm->ctx, (2 + 2 * GPU_MAX_CANDIDATES) * 4, NULL, GPU_BUFFER_MAPPED,
                             "sampling candidates", &gm->cand);
}

/* ---- create / destroy ---------------------------------------------------------- */

void gpu_model_destroy(gpu_model *gm)
{
    if (!gm)
        return;
    /* (weights shared with another model are that one's) */
#define linear_destroy(l) (gm->share ? (void)0 : gpu_weight_destroy(&(l)->w))
    if (gm->q) {
        gpu_queue_wait(gm->q, 0);
        gpu_queue_destroy(gm->q);
    }
    for (uint32_t i = 0; gm->layers && i < gm->m->hp.n_layer; i++) {
        gpu_layer *g = &gm->layers[i];
        for (uint32_t j = 0; j < g->n_qkv; j++)
            linear_destroy(&g->qkv[j].l);
        linear_destroy(&g->wo);
        linear_destroy(&g->glu);
        linear_destroy(&g->down);
        linear_destroy(&g->router);
        linear_destroy(&g->eglu);
        linear_destroy(&g->edown);
        linear_destroy(&g->sglu);
        linear_destroy(&g->sdown);
        linear_destroy(&g->sgate);
        linear_destroy(&g->ssm_in);
        linear_destroy(&g->ssm_x);
        linear_destroy(&g->ssm_out);
        gpu_linear *rw[] = { &g->rw_r,  &g->rw_k,  &g->rw_v,  &g->rw_w1, &g->rw_w2, &g->rw_a1,
                             &g->rw_a2, &g->rw_v1, &g->rw_v2, &g->rw_g1, &g->rw_g2, &g->rw_ck };
        for (size_t k = 0; k < sizeof rw / sizeof rw[0]; k++)
            linear_destroy(rw[k]);
        gpu_buffer_destroy(&g->ssm_par);
        gpu_buffer_destroy(&g->ssm_state);
        gpu_buffer_destroy(&g->cache);
    }
    free(gm->layers);
    if (gm->out.w.parts != gm->tok_embd.parts) /* (tied: the embeddings') */
        linear_destroy(&gm->out);
    if (!gm->share)
        gpu_weight_destroy(&gm->tok_embd);
#undef linear_destroy
    get_rows_destroy(&gm->embed);
    gm_kernels_destroy(gm);
    attn_destroy(&gm->attn);
    ssm_destroy(&gm->ssm);
    rwkv_destroy(&gm->rwkv);
    norm_destroy(&gm->norm);
    sample_destroy(&gm->sample);
    prefetch_destroy(&gm->prefetch);
    moe_destroy(&gm->moe);
    norm_destroy_qk(&gm->qk);
    for (uint32_t i = 0; i < gm->n_logits_all; i++)
        gpu_buffer_destroy(&gm->logits_all[i]);
    free(gm->logits_all);
    gpu_buffer_destroy(&gm->cand);
    gpu_buffer_destroy(&gm->act);
    gpu_buffer_destroy(&gm->xt);
    matmul_slices_destroy(&gm->slices);
    gpu_buffer_destroy(&gm->slices_part);
    gpu_buffer_destroy(&gm->tokens);
    gpu_buffer_destroy(&gm->attn_count);
    free(gm->seq_past);
    gm_kv_destroy(gm);
    free(gm);
}

static glesllm_status check_memory(gpu_model *gm, uint64_t weights)
{
    const model_hparams *hp = &gm->m->hp;
    /* (each attention layer's pool: the ring's where it has one) */
    uint64_t kv = 0;
    for (uint32_t i = 0; i < hp->n_layer; i++)
        if (!gm->m->layers[i].recurrent)
            kv += 2ull * gm->kvp[gm_kv_layer_ring(gm, i)].pages * gm->kvl.page * hp->n_head_kv *
                  hp->head_dim * 2;
    uint64_t need = weights + kv + (uint64_t)4 * (hp->n_vocab + 4ull * hp->n_ff + gm->n_ctx * 128ull);
    uint64_t avail = gpu_context_memory_available(gm->ctx);
    if (avail && need > avail)
        return err_set(GLESLLM_ERR_GPU_OUT_OF_MEMORY,
                       "the model needs about %.0f MiB of GPU memory at context %u (weights %.0f, "
                       "KV cache %.0f) but the GPU has %.0f MiB free; use a smaller -c or a "
                       "smaller quantization",
                       need / 1048576.0, gm->n_ctx, weights / 1048576.0, kv / 1048576.0,
                       avail / 1048576.0);
    return GLESLLM_OK;
}

static glesllm_status create(gpu_model *gm, const gpu_model_options *opt)
{
    const model *m = gm->m;
    const model_hparams *hp = &m->hp;
    upload_progress pr = { opt, 0, 0 };
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++)
        pr.total += gguf_tensor_at(m->file, i)->size;
    glesllm_status st = check_memory(gm, gm->share ? 0 : pr.total);
    if (st)
        return st;
    if (opt->prefetch) {
        gm->prefetch_down = opt->prefetch > 0;
    } else {
        const model_tensor *d = &m->layers[0].down;
        const char *why;
        gpu_model_prefetch_choose(gm->ctx, &gm->tune, model_tensor_bytes(d),
                                  &gm->prefetch_down, &why);
    }
    const model_layer *l0 = &m->layers[0];
    uint32_t gate_type = l0->gate.data ? l0->gate.type : l0->up.type;
    gm->prefetch_bytes = prefetch_bytes(gate_type, gm->tune.prefetch_mib);
    uint64_t qkv_bytes = 0;
    if (has_attention(m))
        qkv_bytes = model_tensor_bytes(&l0->wq) + model_tensor_bytes(&l0->wk) +
                    model_tensor_bytes(&l0->wv);
    gm->prefetch_qkv = prefetch_qkv_bytes(gate_type, qkv_bytes, gm->tune.prefetch_qkv_mib);
    attn_shape as = { hp->n_head, hp->n_head_kv, hp->head_dim, gm->n_ctx, gm->n_batch,
                      hp->attn_scale, hp->attn_softcap, gm->kvl, gm->tune.attn_group };
    ssm_shape sh = ssm_shape_of(hp);
    rwkv_shape rs = rwkv_shape_of(hp);
    if ((st = gpu_queue_create(gm->ctx, &gm->q)) ||
        (has_attention(m) && (st = attn_build(gm->ctx, &as, &gm->attn))) ||
        (hp->ssm && (st = ssm_build(gm->ctx, &sh, &gm->ssm))) ||
        (hp->rwkv && (st = rwkv_build(gm->ctx, &rs, &gm->tune, &gm->rwkv))) ||
        (st = sample_build(gm->ctx, argmax_rows(gm), &gm->sample)) ||
        (gm->prefetch_down && (st = prefetch_build(gm->ctx, &gm->prefetch))) ||
        (st = norm_build(gm->ctx, &gm->norm)) ||
        (hp->n_expert && (st = moe_build(gm->ctx, &gm->moe))))
        return st;
    if (hp->qk_norm != MODEL_QK_NONE) {
        qk_norm_shape qs = { hp->n_head * hp->head_dim, hp->n_head_kv * hp->head_dim,
                             hp->head_dim };
        model_qk_spans(hp, &qs.q_span, &qs.k_span);
        qs.kv = gm->kvl;
        if ((st = norm_build_qk(gm->ctx, &qs, &gm->qk)))
            return st;
    }
    gm->layers = calloc(hp->n_layer, sizeof *gm->layers);
    if (!gm->layers)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    if ((st = create_act(gm)) || (st = create_caches(gm)))
        return st;
    const model_tensor *te = &m->tok_embd;
    fuse_part emb = { te, false };
    if ((st = upload_fused(gm, te->name, &emb, 1, false, gm->share ? &gm->share->tok_embd : NULL,
                           &gm->tok_embd)) ||
        (st = get_rows_build(gm->ctx, te->type, &gm->embed)))
        return st;
    progress(&pr, model_tensor_bytes(te));
    gm->weight_bytes += gm->tok_embd.bytes;
    /* the output head: its own tensor, or the embeddings (tied) */
    if (!m->tied) {
        const model_tensor *o = &m->output;
        fuse_part out = { o, false };
        if ((st = upload_fused(gm, o->name, &out, 1, false, gm->share ? &gm->share->out.w : NULL,
                               &gm->out.w)))
            return st;
        gm->weight_bytes += gm->out.w.bytes;
        progress(&pr, model_tensor_bytes(o));
    } else {
        gm->out.w = gm->tok_embd; /* (not owned: gpu_model_destroy) */
    }
    gm->output = &gm->out.w;
    matvec_variant head = { MATVEC_STORE }, head_norm = { MATVEC_STORE, true };
    head.norm_scale = gm->fuse_norm;
    /* (RWKV's LayerNorm is its own dispatch before the head) */
    if ((st = gm_linear_kernels(gm, &gm->out, &head, hp->rwkv ? NULL : &head_norm)))
        return st;
    for (uint32_t i = 0; i < hp->n_layer; i++)
        if ((st = upload_layer(gm, i, &pr)))
            return st;
    return GLESLLM_OK;
}

glesllm_status gpu_model_create(gpu_context *ctx, const model *m, const gpu_model_options *opt,
                                gpu_model **out)
{
    *out = NULL;
    if (!opt->n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "context size must be at least 1");
    const tuning *t = tuning_or_default(opt->tuning);
    /* the tuning's small_batch stands in for the default n_small (0 or less:
     * none), its multi_nt for the tokens of a several-token dispatch; its
     * fuse_norm off gives each norm of a step its own dispatch instead of
     * splitting it across the matvecs (bench/RESULTS.md "The norm split
     * across the matvecs") */
    long dflt_small = t->small_batch == TUNE_SMALL_AUTO ? GPU_SMALL_BATCH : t->small_batch;
    gpu_model *gm = calloc(1, sizeof *gm);
    if (!gm)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    if (opt->share && (opt->share->ctx != ctx || opt->share->m != m)) {
        free(gm);
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "weights can be shared only between models of one file on one GPU context");
    }
    gm->ctx = ctx;
    gm->m = m;
    gm->share = opt->share;
    gm->tune = *t;
    gm->n_ctx = opt->n_ctx;
    gm->n_seq = opt->n_seq ? opt->n_seq : 1;
    if (gm->n_seq > 1 && (model_hp_recurrent(&m->hp) || gm->n_seq > 256 || opt->n_ctx >= (1u << 24))) {
        free(gm);
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "%u sequences in one context: only for models whose layers are all "
                       "attention, at most 256 of them and 16M positions each",
                       opt->n_seq);
    }
    if (!(gm->seq_past = calloc(gm->n_seq, sizeof *gm->seq_past))) {
        free(gm);
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    }
    gm->max_part_bytes = opt->max_part_bytes;
    gm->n_batch = opt->n_batch ? opt->n_batch : GPU_N_BATCH;
    if (gm->n_batch > opt->n_ctx)
        gm->n_batch = opt->n_ctx;
    long n_small = opt->n_small ? opt->n_small : dflt_small;
    gm->n_small = n_small < 0 ? 0 : (uint32_t)n_small;
    if (gm->n_small > gm->n_batch)
        gm->n_small = gm->n_batch;
    gm->n_small_plain = dflt_small < 0 ? 0 : (uint32_t)dflt_small;
    gm->multi_nt = t->multi_nt ? t->multi_nt : gm_multi_tokens(gm->n_small);
    gm_multi_sets(gm);
    gm->graph = arch_graph_of(m->hp.arch);
    gm->mcfg = matmul_default_config(ctx, t);
    gm->mcfg32 = matmul_f32_config(ctx, t);
    if (opt->f32_tiles)
        gm->mcfg = gm->mcfg32;
    gm->kv = opt->kv;
    gm->cand_k = 40;
    /* (Gemma 2's norms after O and down take their outputs whole: no split) */
    gm->fuse_norm = t->fuse_norm != TUNE_OFF && !m->hp.post_norms && !m->hp.rwkv;
    gm->pen = 1.0f;
    gm->anchor = -1;
    glesllm_status st = GLESLLM_OK;
    if (gm->kv == KV_AUTO) {
        const char *why;
        st = kv_placement_choose(ctx, &gm->tune, &gm->kv, &why);
    }
    /* the cache's pages (bench/RESULTS.md "The paged KV cache") */
    if (st == GLESLLM_OK && has_attention(m))
        st = gm_kv_init(gm, t->kv_page ? t->kv_page : GPU_KV_PAGE,
                        opt->kv_size);
    if (st == GLESLLM_OK)
        st = create(gm, opt);
    if (st != GLESLLM_OK) {
        gpu_model_destroy(gm);
        return err_prefix(st, "loading the model onto the GPU: ");
    }
    *out = gm;
    return GLESLLM_OK;
}

uint32_t gpu_model_n_ctx(const gpu_model *gm) { return gm->n_ctx; }
uint32_t gpu_model_n_vocab(const gpu_model *gm) { return gm->m->hp.n_vocab; }
const model *gpu_model_model(const gpu_model *gm) { return gm->m; }

gpu_queue *gpu_model_queue(gpu_model *gm) { return gm->q; }
kv_placement gpu_model_kv(const gpu_model *gm) { return gm->kv; }
uint64_t gpu_model_weight_bytes(const gpu_model *gm) { return gm->weight_bytes; }

uint64_t gpu_model_step_bytes(const gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t n = gm->out.w.bytes; /* (the embeddings: one row) */
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        const gpu_layer *g = &gm->layers[i];
        for (uint32_t j = 0; j < g->n_qkv; j++)
            n += g->qkv[j].l.w.bytes;
        n += g->wo.w.bytes + g->glu.w.bytes + g->down.w.bytes + g->router.w.bytes +
             g->sglu.w.bytes + g->sdown.w.bytes + g->sgate.w.bytes + g->ssm_in.w.bytes +
             g->ssm_x.w.bytes + g->ssm_out.w.bytes;
        const gpu_linear *rw[] = { &g->rw_r,  &g->rw_k,  &g->rw_v,  &g->rw_w1, &g->rw_w2, &g->rw_a1,
                                   &g->rw_a2, &g->rw_v1, &g->rw_v2, &g->rw_g1, &g->rw_g2, &g->rw_ck };
        for (size_t k = 0; k < sizeof rw / sizeof rw[0]; k++)
            n += rw[k]->w.bytes;
        if (hp->n_expert) /* a token's experts of the stacked ones */
            n += (g->eglu.w.bytes + g->edown.w.bytes) / hp->n_expert * hp->n_expert_used;
    }
    return n;
}
uint32_t gpu_model_last_dispatches(const gpu_model *gm) { return gm->last_dispatches; }

glesllm_status gpu_model_set_token(gpu_model *gm, uint32_t pos, int32_t token)
{
    if (pos > gm->n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "token slot %u is past the context of %u",
                       pos, gm->n_ctx);
    if (token < 0 || (uint32_t)token >= gm->m->hp.n_vocab)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "token id %d is outside the model's vocabulary of %u", token,
                       gm->m->hp.n_vocab);
    ((uint32_t *)gm->tokens.mapped)[gm_tok_base(gm) + pos] = (uint32_t)token;
    return GLESLLM_OK;
}

int32_t gpu_model_get_token(const gpu_model *gm, uint32_t pos)
{
    return pos <= gm->n_ctx
               ? (int32_t)((const uint32_t *)gm->tokens.mapped)[gm_tok_base(gm) + pos]
               : -1;
}

uint32_t gpu_model_n_seq(const gpu_model *gm) { return gm->n_seq; }

glesllm_status gpu_model_select_seq(gpu_model *gm, uint32_t seq)
{
    if (seq >= gm->n_seq)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "sequence %u of %u", seq, gm->n_seq);
    if (seq != gm->seq) {
        gm->seq_past[gm->seq] = gm->n_past;
        gm->n_past = gm->seq_past[seq];
        gm->seq = seq;
    }
    return GLESLLM_OK;
}

glesllm_status gpu_model_seq_copy(gpu_model *gm, uint32_t src, uint32_t dst, uint32_t n)
{
    if (src >= gm->n_seq || dst >= gm->n_seq || src == dst || n > gpu_model_seq_past(gm, src))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "copying %u positions of sequence %u to sequence %u (of %u): the source "
                       "holds %u", n, src, dst, gm->n_seq, gpu_model_seq_past(gm, src));
    /* (its pages shared: a page either writes into is copied first; the
     * token slots copied once the passes that write them are done) */
    glesllm_status st = gm_kv_share(gm, src, dst, n);
    if (!st)
        st = gpu_model_wait(gm);
    if (st)
        return st;
    uint32_t *tok = gm->tokens.mapped;
    memcpy(tok + (size_t)dst * (gm->n_ctx + 1), tok + (size_t)src * (gm->n_ctx + 1),
           sizeof *tok * n);
    if (dst == gm->seq)
        gm->n_past = n;
    else
        gm->seq_past[dst] = n;
    return GLESLLM_OK;
}

uint32_t gpu_model_seq_past(const gpu_model *gm, uint32_t seq)
{
    return seq >= gm->n_seq ? 0 : seq == gm->seq ? gm->n_past : gm->seq_past[seq];
}

int32_t gpu_model_seq_token(const gpu_model *gm, uint32_t seq, uint32_t pos)
{
    if (seq >= gm->n_seq || pos > gm->n_ctx)
        return -1;
    return (int32_t)((const uint32_t *)gm->tokens.mapped)[seq * (gm->n_ctx + 1) + pos];
}

glesllm_status gpu_model_set_sampling(gpu_model *gm, uint32_t k, float penalty, uint32_t last_n)
{
    if (!k || k > GPU_MAX_CANDIDATES || !(penalty > 0.0f))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "sampling: %u candidates (1..%d) and penalty %g (> 0)", k,
                       GPU_MAX_CANDIDATES, penalty);
    gm->cand_k = k;
    gm->pen = penalty;
    gm->pen_last_n = last_n;
    return GLESLLM_OK;
}

uint32_t gpu_model_candidates(const gpu_model *gm, float *vals, int32_t *ids, float *max,
                              float *sum_exp)
{
    const float *r = gm->cand.mapped;
    *max = r[0];
    *sum_exp = r[1];
    uint32_t n = 0;
    for (uint32_t k = 0; k < gm->cand_k; k++) {
        if (!(r[2 + 2 * k] > -3.0e38f))
            break;
        vals[n] = r[2 + 2 * k];
        ids[n++] = (int32_t)r[3 + 2 * k];
    }
    return n;
}

uint32_t gpu_model_n_past(const gpu_model *gm) { return gm->n_past; }
uint64_t gpu_model_replayed(const gpu_model *gm) { return gm->replayed; }

glesllm_status gpu_model_truncate(gpu_model *gm, uint32_t n_past)
{
    if (n_past > gm->n_past)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "truncating the cache to %u positions: it holds only %u", n_past,
                       gm->n_past);
    if (n_past < gm->n_past)
        gm->anchor_next = true;
    gm->n_past = n_past;
    gm_drop_slots_after(gm, n_past); /* (their tokens may change) */
    if (gm->kv_tab)
        gm_kv_drop(gm, gm->seq, n_past);
    return GLESLLM_OK;
}

glesllm_status gpu_model_wait(gpu_model *gm) { return gpu_queue_wait(gm->q, 0); }

glesllm_status gpu_model_wait_prior(gpu_model *gm) { return gpu_queue_wait_prior(gm->q, 0); }

glesllm_status gpu_model_kv_io(gpu_model *gm, uint32_t layer, uint32_t pos, uint32_t n, void *k,
                               void *v, bool write)
{
    const model_hparams *hp = &gm->m->hp;
    if (layer >= hp->n_layer || gm->m->layers[layer].recurrent || pos > gm->n_ctx ||
        n > gm->n_ctx - pos)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "K/V of layer %u, positions %u..%u: outside the model, the context of %u "
                       "or the layers with attention",
                       layer, pos, pos + n, gm->n_ctx);
    uint64_t row = (uint64_t)hp->n_head_kv * hp->head_dim * 2; /* bytes: F16 */
    const gpu_layer *l = &gm->layers[layer];
    gpu_buffer *b = &gm->layers[layer].cache;
    /* (a read: positions the cache holds, whose pages are the sequence's) */
    if (!write && pos + n > gm->n_past)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "K/V of positions %u..%u: the cache holds %u",
                       pos, pos + n, gm->n_past);
    glesllm_status st = write ? gm_check_past(gm, pos) : GLESLLM_OK;
    if (!st && write)
        st = gm_kv_take(gm, gm->seq, pos, n);
    else if (!st) /* (the ring's last positions, made again if a rollback lost them, before
                   * any layer is read) */
        st = gm_kv_window_ready(gm, gm->n_past);
    if (!st)
        st = gpu_model_wait(gm);
    /* a run of rows of one page at a time; a window layer's positions
     * before its ring's first page are not kept (zeros read, none written) */
    uint32_t tr = l->ring ? gm->n_seq + gm->seq : gm->seq;
    const uint32_t *entries = gm->kv_tab + (size_t)tr * gm->kvl.pps;
    for (uint32_t done = 0; !st && done < n;) {
        uint32_t p = pos + done, in_page = gm->kvl.page - p % gm->kvl.page;
        uint32_t c = n - done < in_page ? n - done : in_page;
        char *kd = (char *)k + done * row, *vd = (char *)v + done * row;
        if (entries[p / gm->kvl.page] == KV_NO_PAGE) {
            if (!write) {
                memset(kd, 0, (size_t)(c * row));
                memset(vd, 0, (size_t)(c * row));
            }
            done += c;
            continue;
        }
        uint64_t at = gm_kv_row(gm, tr, p) * row;
        size_t ko = (size_t)(gm->k_base * 4 + at), vo = (size_t)(l->v_base * 4 + at);
        if (write) {
            st = gpu_buffer_write(b, ko, kd, (size_t)(c * row));
            if (!st)
                st = gpu_buffer_write(b, vo, vd, (size_t)(c * row));
        } else {
            st = gpu_buffer_read(gm->ctx, b, ko, kd, (size_t)(c * row));
            if (!st)
                st = gpu_buffer_read(gm->ctx, b, vo, vd, (size_t)(c * row));
        }
        done += c;
    }
    if (!st && write)
        gm->n_past = pos + n;
    return st;
}

uint64_t gpu_model_kv_gpu_bytes(const gpu_model *gm)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < gm->m->hp.n_layer; i++)
        n += gm->layers[i].cache.size;
    return n;
}

uint64_t gpu_model_state_gpu_bytes(const gpu_model *gm)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < gm->m->hp.n_layer; i++)
        n += gm->layers[i].ssm_state.size;
    return n;
}

/* The bytes of one layer's state in a session file, and of its first part
 * (the convolution's inputs; RWKV's token shifts) */
static void state_sizes(const gpu_model *gm, size_t *first, size_t *one)
{
    const model_hparams *hp = &gm->m->hp;
    if (hp->rwkv) {
        *first = 4 * (size_t)gm->slot.ssm;
        *one = *first + 4ull * hp->n_embd * hp->rwkv_head;
        return;
    }
    *first = 4ull * (hp->ssm_d_conv - 1) * ssm_conv_channels(hp);
    *one = *first + 4ull * hp->ssm_d_inner * hp->ssm_d_state;
}

uint64_t gpu_model_state_bytes(const gpu_model *gm)
{
    size_t first, one;
    if (!model_hp_recurrent(&gm->m->hp))
        return 0;
    state_sizes(gm, &first, &one);
    return 2 * (uint64_t)one;
}

glesllm_status gpu_model_state_io(gpu_model *gm, uint32_t layer, uint32_t n, void *data,
                                  bool write)
{
    const model_hparams *hp = &gm->m->hp;
    if (!model_hp_recurrent(hp) || layer >= hp->n_layer || !gm->m->layers[layer].recurrent ||
        n > (write ? gm->n_ctx : gm->n_past) || !n)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the recurrent state of layer %u after %u tokens: outside the model or "
                       "the %u tokens it holds", layer, n, write ? gm->n_ctx : gm->n_past);
    gpu_buffer *b = &gm->layers[layer].ssm_state;
    size_t conv, one;
    state_sizes(gm, &conv, &one);
    /* the states after n - 1 and n tokens: slots (held, or made) to read,
     * slots 0 and 1 to write; after 0 tokens the state is zeros */
    uint32_t slot[2] = { 0, 1 };
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; !write && !st && i < 2; i++)
        if (n - 1 + i > 0)
            st = gm_ssm_slot_at(gm, n - 1 + i, &slot[i]);
    if (!st)
        st = gpu_model_wait(gm);
    if (st)
        return st;
    if (write)
        for (uint32_t i = 0; i < SSM_SLOTS; i++)
            gm->slot_ok[i] = false;
    for (uint32_t i = 0; !st && i < 2; i++) {
        char *d = (char *)data + i * one;
        size_t at = (size_t)(slot[i] * gm->slot.floats * 4);
        if (n - 1 + i == 0) {
            if (!write)
                memset(d, 0, one);
            continue;
        }
        if (write) {
            st = gpu_buffer_write(b, at + gm->slot.conv * 4, d, conv);
            if (!st)
                st = gpu_buffer_write(b, at + gm->slot.ssm * 4, d + conv, one - conv);
            gm->slot_ok[slot[i]] = st == GLESLLM_OK;
            gm->slot_pos[slot[i]] = n - 1 + i;
        } else {
            st = gpu_buffer_read(gm->ctx, b, at + gm->slot.conv * 4, d, conv);
            if (!st)
                st = gpu_buffer_read(gm->ctx, b, at + gm->slot.ssm * 4, d + conv, one - conv);
        }
    }
    if (!st && write)
        gm->n_past = n;
    return st;
}

glesllm_status gpu_model_read_logits(gpu_model *gm, float *out)
{
    glesllm_status st = gpu_model_wait(gm);
    if (st)
        return st;
    return gpu_buffer_read(gm->ctx, &gm->act, gm->logits * 4, out, gm->m->hp.n_vocab * 4ull);
}

glesllm_status gpu_model_read_act(gpu_model *gm, gpu_act_kind kind, bool small, uint32_t row,
                                  float *out, uint32_t *n)
{
    const model_hparams *hp = &gm->m->hp;
    uint32_t len = kind == GPU_ACT_ATTN     ? hp->n_head * hp->head_dim
                   : kind == GPU_ACT_HIDDEN ? hp->n_ff
                                            : hp->n_embd;
    if (small ? row >= gm->n_small : row != 0)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "activations of row %u: a %s has %u", row,
                       small ? "small prefill" : "step", small ? gm->n_small : 1);
    uint64_t at = kind == GPU_ACT_ATTN ? (small ? gm->battn : gm->attn_out)
                  : kind == GPU_ACT_HIDDEN ? (small ? gm->bhid : gm->hidden)
                                           : (small ? gm->bx : gm->x);
    at += (uint64_t)row * act_stride(len);
    *n = len;
    glesllm_status st = gpu_model_wait(gm);
    return st ? st : gpu_buffer_read(gm->ctx, &gm->act, at * 4, out, len * 4ull);
}

uint32_t gpu_model_n_batch(const gpu_model *gm) { return gm->n_batch; }
uint32_t gpu_model_n_small(const gpu_model *gm) { return gm->n_small; }

glesllm_status gpu_model_read_logits_all(gpu_model *gm, uint32_t first, uint32_t count, float *out)
{
    uint32_t nv = gm->m->hp.n_vocab;
    if (gm->last_small) {
        if (first > gm->n_small || count > gm->n_small - first)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "logits of positions %u..%u: the last prefill had at most %u", first,
                           first + count, gm->n_small);
        glesllm_status st = gpu_model_wait(gm);
        for (uint32_t i = 0; st == GLESLLM_OK && i < count; i++)
            st = gpu_buffer_read(gm->ctx, &gm->act, (gm->vlog + (first + i) * act_stride(nv)) * 4,
                                 out + (size_t)i * nv, (size_t)nv * 4);
        return st;
    }
    if (!gm->logits_all || first > gm->n_batch || count > gm->n_batch - first)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "logits of positions %u..%u: no prefill with GPU_STEP_ALL_LOGITS made them",
                       first, first + count);
    glesllm_status st = gpu_model_wait(gm);
    uint64_t stride = act_stride(nv);
    float *tmp = stride == nv ? NULL : malloc((size_t)(gm->logits_rows * stride) * 4);
    if (stride != nv && !tmp)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading logits");
    /* runs of rows within one buffer, one read each */
    for (uint32_t i = 0; st == GLESLLM_OK && i < count;) {
        uint32_t r = first + i, in_buf = r % gm->logits_rows;
        uint32_t run = gm->logits_rows - in_buf < count - i ? gm->logits_rows - in_buf : count - i;
        float *dst = tmp ? tmp : out + (size_t)i * nv;
        st = gpu_buffer_read(gm->ctx, &gm->logits_all[r / gm->logits_rows],
                             (size_t)(in_buf * stride * 4), dst, (size_t)(run * stride * 4));
        for (uint32_t k = 0; tmp && k < run; k++)
            memcpy(out + (size_t)(i + k) * nv, tmp + (size_t)k * stride, (size_t)nv * 4);
        i += run;
    }
    free(tmp);
    return st;
}
