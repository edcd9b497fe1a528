/* The decode step on the GPU. See forward.h. */
#include "model/forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "common/error.h"
#include "model/weights.h"
#include "quant/quant.h"

#define CHUNK_MAX 256u   /* attention positions per work group */
#define ONE_CHUNK 64u    /* attention_chunks: one chunk up to this many positions */
#define CHUNK_MIN 16u    /* and at least this many a chunk past them */
#define ATTN_GROUPS 256u /* the work groups it aims at */
#define ATTN_FEW_N 16    /* batches of at most this many tokens (or n_small) take attention.comp */
#define ARGMAX_WG 128u
#define SLICE 2048u      /* logits per work group in argmax and top-k */
#define RMS_WG 128u      /* rms_norm.comp's work group (and rms_prep's partial sums) */
#define MAX_KERNELS 96
#define MAX_SEGMENTS 3

/* Multi-token kernels come in sets by how many tokens they take: a run of n
 * tokens takes the set of the fewest tokens >= n (multi_set), so that a
 * short pass (verifying 1 or 2 drafted tokens) runs kernels whose registers,
 * shared memory and split (weights.c matvec_multi_config) suit it instead of
 * the largest set's. The largest set (gpu_model multi_nt tokens) is built
 * with the model, the others on their first use or all at once by
 * gpu_model_prepare_small. H200, Mistral-7B Q4_0, verifying 1 / 2 / 4
 * drafted tokens (bench_verify): 7.44 / 7.91 / 8.88 ms with the kernels of 9
 * tokens for every pass, 6.28-6.37 / 6.81-6.94 / 8.57-8.67 with the sets
 * (bench/RESULTS.md session 39). */
#define MULTI_SETS 4
static const uint32_t multi_small_sets[MULTI_SETS - 1] = { 2, 3, 5 };
typedef const matvec_kernel *multi_kernels[MULTI_SETS];

/* A weight holding consecutive rows of a fused matrix (Q|K|V, gate/up). */
typedef struct segment {
    gpu_weight w;
    uint64_t row_base;  /* its first row in the fused matrix */
    const matvec_kernel *k;
    const matmul_kernel *mk;
    multi_kernels vk;        /* small batches: several tokens a dispatch */
} segment;

typedef struct gpu_layer {
    segment qkv[MAX_SEGMENTS];
    uint32_t n_qkv;
    gpu_weight wo, glu, down;
    const matvec_kernel *k_wo, *k_glu, *k_down;
    const matmul_kernel *mk_wo, *mk_glu, *mk_down;
    multi_kernels vk_wo, vk_glu, vk_down;
    gpu_buffer cache;                    /* Q scratch | K | V */
    uint64_t attn_norm, ffn_norm, bias;  /* float offsets in act */
} gpu_layer;

struct gpu_model {
    gpu_context *ctx;
    gpu_queue *q;
    const model *m;
    uint32_t n_ctx;
    kv_placement kv;
    gpu_weight tok_embd, output_own;
    const gpu_weight *output;
    get_rows_kernel embed;
    const matvec_kernel *k_out;
    matvec_kernel kernels[MAX_KERNELS];
    uint32_t n_kernels;
    matmul_kernel mkernels[MAX_KERNELS];
    uint32_t n_mkernels;
    matmul_config mcfg, mcfg32; /* the prefill tiling; f32 tiles (F32 weights) */
    const matmul_kernel *mk_out;
    multi_kernels vk_out;
    /* prefills of at most n_small tokens: multi-token matvecs (multi_nt
     * tokens a dispatch, multi_tokens), the norm folded in, logits of every
     * position at vlog in act (n_small rows of act_stride(n_vocab)) */
    uint32_t n_small, multi_nt; /* multi_nt: tokens a multi-token dispatch */
    uint32_t n_small_plain;     /* the default's n_small (GPU_STEP_PLAIN: small_limit) */
    uint32_t set_nt[MULTI_SETS], n_sets; /* the sets' tokens, ascending (multi_nt last) */
    bool set_built[MULTI_SETS];
    uint64_t vlog;
    uint64_t bxp; /* the units of x of a multi-token matvec with matvec_config.xg */
    bool last_small; /* the last prefill took that path */
    gpu_program attn, attn_pre, argmax1, argmax2, topk1, topk2, penalty, rms, rms_prep, prefetch;
    gpu_buffer sink;      /* prefetch.comp's, never written */
    bool prefetch_down;   /* the down matrix into L2 beside gate/up (prefetch_choose) */
    uint32_t prefetch_wg;
    /* RMSNorm split between the kernel that writes x and the matvec that
     * reads it (matvec_variant norm_out / norm_scale), else its own dispatch */
    bool fuse_norm;
    gpu_layer *layers;
    gpu_buffer act, tokens, cand;
    gpu_buffer xt; /* the f16-tile matmuls' token tiles (made on the first prefill chunk) */
    gpu_buffer attn_count; /* attention.comp's chunk counters, a uint a head */
    uint32_t cand_k, pen_last_n;
    float pen;
    /* float offsets in act */
    uint64_t out_norm, rope, x, xn, attn_out, hidden, logits, partials, argmax_part, lists;
    uint64_t sq; /* fuse_norm: the partial sums of squares of x (x times the weight at xn) */
    uint64_t k_base, v_base; /* uint offsets in a layer's cache */
    /* prefill: n_batch rows each (float offsets in act) */
    uint32_t n_batch;
    uint64_t bx, bxn, bq, battn, bhid;
    uint32_t pre_bq; /* queries per attention work group */
    gpu_program attn_few; /* attention.comp for a few tokens (MULTI) */
    uint32_t few_n;       /* ... batches of at most few_n tokens */
    /* logits of every position (GPU_STEP_ALL_LOGITS): n_batch rows of
     * act_stride(n_vocab) in buffers of logits_rows rows, made on first use */
    gpu_buffer *logits_all;
    uint32_t n_logits_all, logits_rows;
    uint32_t argmax_groups, attn_wg, max_chunks;
    uint64_t weight_bytes;
    uint32_t last_dispatches;
    uint32_t n_past; /* positions [0, n_past) of the cache are valid */
};

/* The small batches of a prefill with these flags (GPU_STEP_PLAIN: the
 * default's), and the batches that take the few-token attention. */
static uint32_t small_limit(const gpu_model *gm, unsigned flags)
{
    /* (n_small may shrink with the batch after n_small_plain is set) */
    return flags & GPU_STEP_PLAIN && gm->n_small_plain < gm->n_small ? gm->n_small_plain
                                                                       : gm->n_small;
}

static uint32_t few_limit(const gpu_model *gm, unsigned flags)
{
    uint32_t n = small_limit(gm, flags);
    return n > ATTN_FEW_N ? n : ATTN_FEW_N; /* (few_n: the largest) */
}

const char *kv_placement_name(kv_placement p)
{
    return p == KV_MAPPED ? "mapped" : p == KV_DEVICE ? "device" : "auto";
}

glesllm_status kv_placement_choose(gpu_context *ctx, kv_placement *out, const char **why)
{
    const gpu_caps *C = gpu_context_caps(ctx);
    const char *env = getenv("GLESLLM_KV");
    if (env && *env) {
        if (strcmp(env, "device") == 0)
            *out = KV_DEVICE;
        else if (strcmp(env, "mapped") == 0)
            *out = KV_MAPPED;
        else
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "GLESLLM_KV=%s: expected 'device' or 'mapped'", env);
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
        /* Measured on an H200 (../shared/DESIGN.md): a mapped buffer lives in
         * host memory and reads at 51 GB/s against 2860 GB/s on the device. */
        *out = KV_DEVICE;
        *why = "the driver reports dedicated GPU memory (a discrete GPU reads mapped storage "
               "over the bus)";
    } else {
        *out = KV_MAPPED;
        *why = "no dedicated GPU memory reported: the GPU shares memory with the CPU";
    }
    return GLESLLM_OK;
}

/* ---- kernels ---------------------------------------------------------------- */

/* field by field: the structs have padding that memcmp would compare */
static bool same_kernel(const matvec_kernel *k, uint32_t type, const matvec_config *c,
                        const matvec_variant *v)
{
    return k->type == type && k->cfg.wg == c->wg && k->cfg.tpr == c->tpr && k->cfg.nr == c->nr &&
           k->cfg.subgroup == c->subgroup && k->cfg.xsh == c->xsh && k->cfg.xb == c->xb &&
           k->cfg.x_once == c->x_once && k->cfg.xg == c->xg &&
           k->var.epilogue == v->epilogue && k->var.norm == v->norm && k->var.q_dim == v->q_dim && k->var.kv_dim == v->kv_dim &&
           k->var.head_dim == v->head_dim && k->var.bias == v->bias && k->var.nt == v->nt &&
           k->var.norm_scale == v->norm_scale && k->var.norm_out == v->norm_out;
}

static glesllm_status get_matvec(gpu_model *gm, uint32_t type, uint64_t rows, uint64_t cols,
                                 const matvec_variant *var, const matvec_kernel **out)
{
    matvec_config cfg = var->nt > 1 ? matvec_multi_config(gm->ctx, type, var->nt, rows, cols)
                                    : matvec_default_config(gm->ctx, type, rows, cols);
    if ((var->epilogue == MATVEC_GLU || var->epilogue == MATVEC_QKV) && cfg.nr % 2)
        cfg.nr = 2;
    for (uint32_t i = 0; i < gm->n_kernels; i++) {
        const matvec_kernel *k = &gm->kernels[i];
        if (same_kernel(k, type, &cfg, var)) {
            *out = k;
            return GLESLLM_OK;
        }
    }
    if (gm->n_kernels == MAX_KERNELS)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "the model needs more than %d matvec variants",
                       MAX_KERNELS);
    glesllm_status st = matvec_build(gm->ctx, type, &cfg, var, &gm->kernels[gm->n_kernels]);
    if (st != GLESLLM_OK)
        return st;
    *out = &gm->kernels[gm->n_kernels++];
    return GLESLLM_OK;
}

/* The multi-token twin of a decode variant (norm folded in), when small
 * batches are on. */
static glesllm_status get_multi(gpu_model *gm, uint32_t type, uint64_t rows, uint64_t cols,
                                const matvec_variant *var, multi_kernels ks)
{
    memset(ks, 0, sizeof(multi_kernels));
    if (!gm->n_small)
        return GLESLLM_OK;
    const matvec_kernel **out = &ks[gm->n_sets - 1];
    matvec_variant v = *var;
    v.nt = gm->multi_nt;
    v.norm = v.epilogue == MATVEC_QKV || v.epilogue == MATVEC_GLU || var->norm || var->norm_scale;
    v.norm_scale = v.norm_out = false;
    return get_matvec(gm, type, rows, cols, &v, out);
}

static bool same_matmul(const matmul_kernel *k, uint32_t type, const matvec_variant *v,
                        const matmul_config *c)
{
    return k->type == type && k->cfg.tm == c->tm && k->cfg.f16 == c->f16 && k->cfg.dup == c->dup &&
           k->cfg.split == c->split &&
           k->var.epilogue == v->epilogue && k->var.q_dim == v->q_dim &&
           k->var.kv_dim == v->kv_dim && k->var.head_dim == v->head_dim && k->var.bias == v->bias;
}

static glesllm_status get_matmul(gpu_model *gm, uint32_t type, uint64_t rows,
                                 const matvec_variant *var, const matmul_kernel **out)
{
    matvec_variant v = *var;
    v.norm = v.norm_scale = v.norm_out = false; /* prefill normalises in its own dispatch */
    /* f16 tiles for the quantized and 16-bit types; F32 weights stay f32 */
    matmul_config cfg = type == GGML_TYPE_F32 ? gm->mcfg32 : matmul_config_for(&gm->mcfg, rows);
    for (uint32_t i = 0; i < gm->n_mkernels; i++)
        if (same_matmul(&gm->mkernels[i], type, &v, &cfg)) {
            *out = &gm->mkernels[i];
            return GLESLLM_OK;
        }
    if (gm->n_mkernels == MAX_KERNELS)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "the model needs more than %d matmul variants",
                       MAX_KERNELS);
    glesllm_status st = matmul_build(gm->ctx, type, &cfg, &v, &gm->mkernels[gm->n_mkernels]);
    if (st != GLESLLM_OK)
        return st;
    *out = &gm->mkernels[gm->n_mkernels++];
    return GLESLLM_OK;
}

/* The prefill attention's tiles: the first of the list that fits the shared memory. */
static glesllm_status build_prefill_attention(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    uint32_t hd = hp->head_dim, wg = 128, max_shared = gpu_context_limits(gm->ctx)->max_shared_bytes;
    /* Small tiles keep a work group's shared memory small, so that several
     * run on a multiprocessor: on an H200, a 512-token prefill of Mistral-7B
     * (bench/RESULTS.md, session 31), us a layer: 16 x 32 (26.3 KiB) 978,
     * 16 x 16 548, 8 x 32 550, 8 x 16 (12.6 KiB) 452; pp512 of the Q4_0 model
     * 3020 -> 3164 tok/s from 16 x 32 to 8 x 16. (Batches of few tokens take
     * attention.comp: record_prefill_attention.) */
    static const uint32_t tiles[][2] = { { 8, 16 }, { 4, 32 }, { 4, 16 }, { 4, 8 } };
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        uint32_t bq = tiles[i][0], bkv = tiles[i][1];
        uint32_t bytes = 4 * (bq * hd + 2 * bkv * (hd / 2 + 1) + bq * bkv);
        if (bytes > max_shared)
            continue;
        uint32_t lpq = 1;
        while (lpq * 2 * bq <= wg && (hd / 2) % (lpq * 2) == 0)
            lpq *= 2;
        char defs[256];
        snprintf(defs, sizeof defs, "WG_SIZE %u\nHEAD_DIM %u\nGROUP %u\nKV_DIM %u\nBQ %u\nBKV %u\nLPQ %u",
                 wg, hd, hp->n_head / hp->n_head_kv, hp->n_head_kv * hd, bq, bkv, lpq);
        glesllm_status st = gpu_program_build(gm->ctx, "attn_prefill.comp", defs, &gm->attn_pre);
        if (st == GLESLLM_OK)
            gm->pre_bq = bq;
        return st;
    }
    return err_set(GLESLLM_ERR_UNSUPPORTED,
                   "prefill attention: a head dimension of %u does not fit in %u bytes of shared "
                   "memory",
                   hd, max_shared);
}

static glesllm_status build_programs(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    const gpu_caps *C = gpu_context_caps(gm->ctx);
    const char *sg = C->subgroup ? "\nUSE_SUBGROUP 1" : "";
    char defs[256];
    gm->attn_wg = 128;
    snprintf(defs, sizeof defs,
             "WG_SIZE %u\nHEAD_DIM %u\nGROUP %u\nKV_DIM %u\nCHUNK_MAX %u\nCHUNK_MIN %u\n"
             "ONE_CHUNK %u%s",
             gm->attn_wg, hp->head_dim, hp->n_head / hp->n_head_kv, hp->n_head_kv * hp->head_dim,
             CHUNK_MAX, CHUNK_MIN, ONE_CHUNK, sg);
    glesllm_status st = gpu_program_build(gm->ctx, "attention.comp", defs, &gm->attn);
    if (st)
        return st;
    strncat(defs, "\nMULTI 1", sizeof defs - strlen(defs) - 1); /* the same for a few tokens */
    if ((st = gpu_program_build(gm->ctx, "attention.comp", defs, &gm->attn_few)) ||
        (st = build_prefill_attention(gm)))
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u", ARGMAX_WG);
    if ((st = gpu_program_build(gm->ctx, "argmax.comp", defs, &gm->argmax1)))
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nFINAL 1", ARGMAX_WG);
    if ((st = gpu_program_build(gm->ctx, "argmax.comp", defs, &gm->argmax2)))
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPER_THREAD %u", ARGMAX_WG, SLICE / ARGMAX_WG);
    if ((st = gpu_program_build(gm->ctx, "topk.comp", defs, &gm->topk1)))
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPER_THREAD %u\nFINAL 1", ARGMAX_WG,
             SLICE / ARGMAX_WG);
    if ((st = gpu_program_build(gm->ctx, "topk.comp", defs, &gm->topk2)))
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u", ARGMAX_WG);
    if ((st = gpu_program_build(gm->ctx, "penalty.comp", defs, &gm->penalty)))
        return st;
    if (gm->prefetch_down) {
        uint32_t most = gpu_context_limits(gm->ctx)->max_invocations;
        gm->prefetch_wg = most >= PREFETCH_WG ? PREFETCH_WG : 128;
        snprintf(defs, sizeof defs, "WG_SIZE %u\nPER %u", gm->prefetch_wg, PREFETCH_PER);
        if ((st = gpu_program_build(gm->ctx, "prefetch.comp", defs, &gm->prefetch)) ||
            (st = gpu_buffer_create(gm->ctx, 16, NULL, GPU_BUFFER_DEVICE, "prefetch sink",
                                    &gm->sink)))
            return st;
    }
    snprintf(defs, sizeof defs, "WG_SIZE %u%s", RMS_WG, sg);
    if ((st = gpu_program_build(gm->ctx, "rms_norm.comp", defs, &gm->rms)))
        return st;
    snprintf(defs, sizeof defs, "WG_SIZE %u\nPREP 1", RMS_WG);
    return gpu_program_build(gm->ctx, "rms_norm.comp", defs, &gm->rms_prep);
}

/* ---- weights ---------------------------------------------------------------- */

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

/* Uploads rows of several tensors of one type as one weight. interleave:
 * row 2i from parts[0], 2i+1 from parts[1] (gate/up); else one after the
 * other. */
static glesllm_status upload_fused(gpu_model *gm, const char *name, const fuse_part *parts,
                                   uint32_t n, bool interleave, gpu_weight *out)
{
    const model_tensor *t0 = parts[0].t;
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
    glesllm_status st = gpu_weight_upload(gm->ctx, name, t0->type, rows, t0->cols, host, 0, out);
    free(host);
    return st;
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

static glesllm_status upload_layer(gpu_model *gm, uint32_t li, upload_progress *pr)
{
    const model_hparams *hp = &gm->m->hp;
    const model_layer *l = &gm->m->layers[li];
    gpu_layer *g = &gm->layers[li];
    bool neox = hp->rope_neox;
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    matvec_variant qkv = { MATVEC_QKV, false, q_dim, kv_dim, hp->head_dim, l->bq.data != NULL };
    qkv.norm_scale = gm->fuse_norm;
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
        if ((st = upload_fused(gm, name, parts + i, j - i, false, &s->w)))
            return st;
        g->n_qkv++;
        s->row_base = row_base;
        row_base += s->w.rows;
        if ((st = get_matvec(gm, s->w.type, s->w.rows, s->w.cols, &qkv, &s->k)) ||
            (st = get_matmul(gm, s->w.type, s->w.rows, &qkv, &s->mk)) ||
            (st = get_multi(gm, s->w.type, s->w.rows, s->w.cols, &qkv, s->vk)))
            return st;
        for (uint32_t k = i; k < j; k++)
            progress(pr, parts[k].t->rows * model_tensor_row_bytes(parts[k].t));
        i = j;
    }
    matvec_variant add = { MATVEC_ADD }, glu = { MATVEC_GLU };
    add.norm_out = glu.norm_scale = gm->fuse_norm;
    if ((st = gpu_weight_upload(gm->ctx, l->wo.name, l->wo.type, l->wo.rows, l->wo.cols, l->wo.data,
                                0, &g->wo)) ||
        (st = get_matvec(gm, l->wo.type, l->wo.rows, l->wo.cols, &add, &g->k_wo)) ||
        (st = get_matmul(gm, l->wo.type, l->wo.rows, &add, &g->mk_wo)) ||
        (st = get_multi(gm, l->wo.type, l->wo.rows, l->wo.cols, &add, g->vk_wo)))
        return st;
    progress(pr, l->wo.rows * model_tensor_row_bytes(&l->wo));
    if (l->gate.type != l->up.type)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "layer %u: ffn_gate (%s) and ffn_up (%s) differ in type; glesllm runs "
                       "them as one interleaved matrix and needs one type",
                       li, ggml_type_name(l->gate.type), ggml_type_name(l->up.type));
    fuse_part gu[2] = { { &l->gate, false }, { &l->up, false } };
    snprintf(name, sizeof name, "blk.%u.ffn_gate_up", li);
    if ((st = upload_fused(gm, name, gu, 2, true, &g->glu)) ||
        (st = get_matvec(gm, g->glu.type, g->glu.rows, g->glu.cols, &glu, &g->k_glu)) ||
        (st = get_matmul(gm, g->glu.type, g->glu.rows, &glu, &g->mk_glu)) ||
        (st = get_multi(gm, g->glu.type, g->glu.rows, g->glu.cols, &glu, g->vk_glu)))
        return st;
    progress(pr, 2 * l->gate.rows * model_tensor_row_bytes(&l->gate));
    if ((st = gpu_weight_upload(gm->ctx, l->down.name, l->down.type, l->down.rows, l->down.cols,
                                l->down.data, 0, &g->down)) ||
        (st = get_matvec(gm, l->down.type, l->down.rows, l->down.cols, &add, &g->k_down)) ||
        (st = get_matmul(gm, l->down.type, l->down.rows, &add, &g->mk_down)) ||
        (st = get_multi(gm, l->down.type, l->down.rows, l->down.cols, &add, g->vk_down)))
        return st;
    progress(pr, l->down.rows * model_tensor_row_bytes(&l->down));
    for (uint32_t i = 0; i < g->n_qkv; i++)
        gm->weight_bytes += g->qkv[i].w.bytes;
    gm->weight_bytes += g->wo.bytes + g->glu.bytes + g->down.bytes;
    return GLESLLM_OK;
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

static glesllm_status create_act(gpu_model *gm)
{
    const model *m = gm->m;
    const model_hparams *hp = &m->hp;
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    uint64_t at = 0, emb = align64(hp->n_embd);
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        gm->layers[i].attn_norm = at;
        gm->layers[i].ffn_norm = at + emb;
        at += 2 * emb;
        if (m->layers[i].bq.data) {
            gm->layers[i].bias = at;
            at += align64(q_dim + 2ull * kv_dim);
        }
    }
    gm->out_norm = at;
    at += emb;
    gm->rope = at;
    at += align64((uint64_t)gm->n_ctx * hp->head_dim);
    gm->x = at;
    at += emb;
    gm->xn = at;
    at += emb;
    gm->sq = at; /* a slot's sum for each row at most (matvec_norm_parts), or rms_prep's */
    at += align64(hp->n_embd > RMS_WG ? hp->n_embd : RMS_WG);
    gm->attn_out = at;
    at += align64(q_dim);
    gm->hidden = at;
    at += align64(hp->n_ff);
    gm->logits = at;
    at += align64(hp->n_vocab);
    /* record_attention: at most (n_ctx / CHUNK_MAX) + 1 chunks of CHUNK_MAX, or
     * 256 / n_head + 1 smaller ones */
    gm->max_chunks = gm->n_ctx / CHUNK_MAX + 1 + (256 + hp->n_head - 1) / hp->n_head + 1;
    gm->partials = at;
    /* ... for each head of each of few_n tokens in the MULTI attention (with
     * more (query, head) pairs, fewer chunks than one token's) */
    gm->few_n = few_limit(gm, 0);
    at += align64((uint64_t)gm->few_n * hp->n_head * gm->max_chunks * (hp->head_dim + 2ull));
    gm->argmax_groups = (hp->n_vocab + SLICE - 1) / SLICE;
    gm->argmax_part = at;
    at += align64(2ull * gm->argmax_groups * (gm->n_small ? gm->n_small : 1));
    gm->vlog = at;
    at += align64((uint64_t)gm->n_small * act_stride(hp->n_vocab));
    gm->lists = at;
    at += align64(gm->argmax_groups * (2ull * GPU_MAX_CANDIDATES + 2));
    /* (the widest row's units of multi_nt tokens; O's rows are q_dim long) */
    uint64_t widest = hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd;
    widest = q_dim > widest ? q_dim : widest;
    gm->bxp = at;
    at += align64(matvec_xg_room(widest, gm->multi_nt));
    /* prefill rows, n_batch of each: x, its norm, Q, attention out, FFN
     * hidden; the batch shrinks to what the storage-block limit leaves */
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    uint64_t per_tok = 2 * act_stride(hp->n_embd) + 2 * act_stride(q_dim) + act_stride(hp->n_ff);
    uint64_t room = limit / 4 > at + 256 ? (limit / 4 - at - 256) / per_tok : 0;
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
        st = put_vector(&l->attn_norm, host + g->attn_norm, hp->head_dim, false);
        if (!st)
            st = put_vector(&l->ffn_norm, host + g->ffn_norm, hp->head_dim, false);
        if (!st && l->bq.data) {
            float *b = host + g->bias;
            if (!(st = put_vector(&l->bq, b, hp->head_dim, hp->rope_neox)) &&
                !(st = put_vector(&l->bk, b + q_dim, hp->head_dim, hp->rope_neox)))
                st = put_vector(&l->bv, b + q_dim + kv_dim, hp->head_dim, false);
        }
    }
    if (!st)
        st = put_vector(&m->out_norm, host + gm->out_norm, hp->head_dim, false);
    if (!st) {
        model_rope_table(hp, gm->n_ctx, host + gm->rope);
        st = gpu_buffer_create(gm->ctx, (size_t)(at * 4), host, GPU_BUFFER_DEVICE, "activations",
                               &gm->act);
    }
    free(host);
    return st;
}

static glesllm_status create_caches(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    gm->k_base = align64(q_dim);
    gm->v_base = gm->k_base + align64(gm->n_ctx * kv_dim / 2);
    uint64_t bytes = (gm->v_base + align64(gm->n_ctx * kv_dim / 2)) * 4;
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    if (bytes > limit)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "one layer's KV cache at context %u needs %.1f MiB, over the GPU's "
                       "storage-block limit of %.0f MiB; use a smaller -c",
                       gm->n_ctx, bytes / 1048576.0, limit / 1048576.0);
    /* dynamic: a session file is written back into them */
    unsigned flags = gm->kv == KV_MAPPED ? GPU_BUFFER_MAPPED : GPU_BUFFER_DYNAMIC;
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        char what[48];
        snprintf(what, sizeof what, "KV cache of layer %u", i);
        glesllm_status st =
            gpu_buffer_create(gm->ctx, (size_t)bytes, NULL, flags, what, &gm->layers[i].cache);
        if (st != GLESLLM_OK)
            return st;
    }
    glesllm_status st = gpu_buffer_create(gm->ctx, (size_t)(gm->n_ctx + 1) * 4, NULL,
                                          GPU_BUFFER_MAPPED, "token ids", &gm->tokens);
    if (st)
        return st;
    /* a counter a head, or a (query, head) of the MULTI attention */
    uint32_t *zeros = calloc((size_t)gm->few_n * hp->n_head, 4);
    if (!zeros)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the attention counters");
    st = gpu_buffer_create(gm->ctx, (size_t)gm->few_n * hp->n_head * 4, zeros, GPU_BUFFER_DEVICE,
                           "attention counters", &gm->attn_count);
    free(zeros);
    if (st)
        return st;
    return gpu_buffer_create(gm->ctx, (2 + 2 * GPU_MAX_CANDIDATES) * 4, NULL, GPU_BUFFER_MAPPED,
                             "sampling candidates", &gm->cand);
}

glesllm_status prefetch_choose(gpu_context *ctx, uint64_t down_bytes, bool *out, const char **why)
{
    int set;
    *out = false;
    glesllm_status st = env_flag("GLESLLM_PREFETCH", "0 or 1", &set);
    if (st != GLESLLM_OK)
        return st;
    if (set >= 0) {
        *out = set == 1;
        *why = "set by GLESLLM_PREFETCH";
        return GLESLLM_OK;
    }
    /* Measured on an H100 (bench/RESULTS.md, session 10): Mistral-7B Q4_0
     * (31.5 MiB down matrices) tg128 178-179 -> 183 tokens/s; Q4_K_M (46
     * MiB of Q6_K, more than fits beside what gate/up streams through the
     * 50 MB L2) 141.5 -> 140.4 with its first 32 MiB read. Reading a matrix
     * twice only pays where it stays in a large cache between the two reads:
     * discrete GPUs (tens of MB of L2), not the few MB of a phone or board
     * GPU; and not for small matrices, whose extra dispatch costs more than
     * it saves. On an H200 in session 21 (the norm split, Q4_K rows rolled)
     * Q4_K_M gained from it: 206.3 -> 209.4 tokens/s with its matrices' first
     * 32 MiB read in every layer (207.1 reading only its Q4_K layers' 31.5
     * MiB), so larger matrices now get their first PREFETCH_MAX bytes read. */
    if (!gpu_context_caps(ctx)->memory_total)
        *why = "no dedicated GPU memory reported: a GPU sharing the CPU's memory, "
               "with small caches";
    else if (down_bytes < PREFETCH_MIN)
        *why = "FFN down matrices under 8 MiB";
    else {
        *out = true;
        *why = "a discrete GPU (large caches), for FFN down matrices of 8 MiB or more "
               "(their first 32 MiB)";
    }
    return GLESLLM_OK;
}

/* ---- create / destroy ---------------------------------------------------------- */

void gpu_model_destroy(gpu_model *gm)
{
    if (!gm)
        return;
    if (gm->q) {
        gpu_queue_wait(gm->q, 0);
        gpu_queue_destroy(gm->q);
    }
    for (uint32_t i = 0; gm->layers && i < gm->m->hp.n_layer; i++) {
        gpu_layer *g = &gm->layers[i];
        for (uint32_t j = 0; j < g->n_qkv; j++)
            gpu_weight_destroy(&g->qkv[j].w);
        gpu_weight_destroy(&g->wo);
        gpu_weight_destroy(&g->glu);
        gpu_weight_destroy(&g->down);
        gpu_buffer_destroy(&g->cache);
    }
    free(gm->layers);
    gpu_weight_destroy(&gm->tok_embd);
    gpu_weight_destroy(&gm->output_own);
    get_rows_destroy(&gm->embed);
    for (uint32_t i = 0; i < gm->n_kernels; i++)
        matvec_destroy(&gm->kernels[i]);
    for (uint32_t i = 0; i < gm->n_mkernels; i++)
        matmul_destroy(&gm->mkernels[i]);
    gpu_program_destroy(&gm->attn_pre);
    gpu_program_destroy(&gm->attn_few);
    for (uint32_t i = 0; i < gm->n_logits_all; i++)
        gpu_buffer_destroy(&gm->logits_all[i]);
    free(gm->logits_all);
    gpu_program_destroy(&gm->attn);
    gpu_program_destroy(&gm->argmax1);
    gpu_program_destroy(&gm->argmax2);
    gpu_program_destroy(&gm->topk1);
    gpu_program_destroy(&gm->topk2);
    gpu_program_destroy(&gm->penalty);
    gpu_program_destroy(&gm->rms);
    gpu_program_destroy(&gm->rms_prep);
    gpu_program_destroy(&gm->prefetch);
    gpu_buffer_destroy(&gm->sink);
    gpu_buffer_destroy(&gm->cand);
    gpu_buffer_destroy(&gm->act);
    gpu_buffer_destroy(&gm->xt);
    gpu_buffer_destroy(&gm->tokens);
    gpu_buffer_destroy(&gm->attn_count);
    free(gm);
}

static glesllm_status check_memory(gpu_model *gm, uint64_t weights)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t kv = 2ull * hp->n_layer * gm->n_ctx * hp->n_head_kv * hp->head_dim * 2;
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
    glesllm_status st = check_memory(gm, pr.total);
    if (st)
        return st;
    if (opt->prefetch) {
        gm->prefetch_down = opt->prefetch > 0;
    } else {
        const model_tensor *d = &m->layers[0].down;
        const char *why;
        if ((st = prefetch_choose(gm->ctx, d->rows * model_tensor_row_bytes(d),
                                  &gm->prefetch_down, &why)))
            return st;
    }
    if ((st = gpu_queue_create(gm->ctx, &gm->q)) || (st = build_programs(gm)))
        return st;
    gm->layers = calloc(hp->n_layer, sizeof *gm->layers);
    if (!gm->layers)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    if ((st = create_act(gm)) || (st = create_caches(gm)))
        return st;
    const model_tensor *te = &m->tok_embd;
    if ((st = gpu_weight_upload(gm->ctx, te->name, te->type, te->rows, te->cols, te->data, 0,
                                &gm->tok_embd)) ||
        (st = get_rows_build(gm->ctx, te->type, &gm->embed)))
        return st;
    progress(&pr, te->rows * model_tensor_row_bytes(te));
    gm->weight_bytes += gm->tok_embd.bytes;
    gm->output = &gm->tok_embd;
    if (!m->tied) {
        const model_tensor *o = &m->output;
        if ((st = gpu_weight_upload(gm->ctx, o->name, o->type, o->rows, o->cols, o->data, 0,
                                    &gm->output_own)))
            return st;
        gm->output = &gm->output_own;
        gm->weight_bytes += gm->output_own.bytes;
        progress(&pr, o->rows * model_tensor_row_bytes(o));
    }
    matvec_variant head = { MATVEC_STORE };
    head.norm_scale = gm->fuse_norm;
    matvec_variant head_norm = { MATVEC_STORE, true };
    matvec_variant store = { MATVEC_STORE };
    if ((st = get_matvec(gm, gm->output->type, gm->output->rows, gm->output->cols, &head,
                         &gm->k_out)) ||
        (st = get_matmul(gm, gm->output->type, gm->output->rows, &store, &gm->mk_out)) ||
        (st = get_multi(gm, gm->output->type, gm->output->rows, gm->output->cols, &head_norm,
                        gm->vk_out)))
        return st;
    for (uint32_t i = 0; i < hp->n_layer; i++)
        if ((st = upload_layer(gm, i, &pr)))
            return st;
    return GLESLLM_OK;
}

/* The tokens of a multi-token dispatch for small batches of up to n_small:
 * the fewest runs of at most MATVEC_MULTI_NT tokens, split evenly (a pass of
 * 9 tokens, 8 drafted, is one run of 9, not 8 + 1: the second run reads every
 * weight again for one token). */
static uint32_t multi_tokens(uint32_t n_small)
{
    if (n_small < 2)
        return 2;
    uint32_t runs = (n_small + MATVEC_MULTI_NT - 1) / MATVEC_MULTI_NT;
    return (n_small + runs - 1) / runs;
}

glesllm_status gpu_model_create(gpu_context *ctx, const model *m, const gpu_model_options *opt,
                                gpu_model **out)
{
    *out = NULL;
    if (!opt->n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "context size must be at least 1");
    /* for benchmarks: GLESLLM_SMALL_BATCH=N stands in for a default n_small
     * (0 or less: off), GLESLLM_MULTI_NT=N sets the tokens of a multi-token
     * dispatch (2..MATVEC_MAX_NT). The norm inside the matvecs beat a
     * dispatch of its own on the H200: Mistral-7B Q4_0 152 against 135
     * tokens/s (bench/RESULTS.md). Since session 21 a decode step splits it:
     * the +y matvec that writes x also writes x times the next norm's weight
     * and partial sums of its squares, and the next matvec only scales (Q4_0
     * 221 -> 242 tokens/s, Q4_K_M 184 -> 204: each slot of lanes no longer
     * loads x and the norm weight and squares x). GLESLLM_FUSE_NORM=0 makes
     * each norm its own dispatch. The kernels' tuning variables are checked
     * here too (weights_env_check). */
    long env_small = GPU_SMALL_BATCH, env_nt = 0;
    int fuse = -1;
    glesllm_status est = env_long("GLESLLM_SMALL_BATCH", -2147483647, 2147483647, &env_small);
    if (est == GLESLLM_OK)
        est = env_long("GLESLLM_MULTI_NT", 2, MATVEC_MAX_NT, &env_nt);
    if (est == GLESLLM_OK)
        est = env_flag("GLESLLM_FUSE_NORM", "0 (each norm its own dispatch) or 1", &fuse);
    if (est == GLESLLM_OK)
        est = weights_env_check();
    if (est != GLESLLM_OK)
        return est;
    gpu_model *gm = calloc(1, sizeof *gm);
    if (!gm)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    gm->ctx = ctx;
    gm->m = m;
    gm->n_ctx = opt->n_ctx;
    gm->n_batch = opt->n_batch ? opt->n_batch : 512;
    if (gm->n_batch > opt->n_ctx)
        gm->n_batch = opt->n_ctx;
    long n_small = opt->n_small ? opt->n_small : env_small;
    gm->n_small = n_small < 0 ? 0 : (uint32_t)n_small;
    if (gm->n_small > gm->n_batch)
        gm->n_small = gm->n_batch;
    gm->n_small_plain = env_small < 0 ? 0 : (uint32_t)env_small;
    gm->multi_nt = env_nt ? (uint32_t)env_nt : multi_tokens(gm->n_small);
    for (uint32_t i = 0; i < MULTI_SETS - 1; i++)
        if (multi_small_sets[i] < gm->multi_nt)
            gm->set_nt[gm->n_sets++] = multi_small_sets[i];
    gm->set_nt[gm->n_sets] = gm->multi_nt;
    gm->set_built[gm->n_sets++] = true; /* with the weights */
    gm->mcfg = matmul_default_config(ctx);
    gm->mcfg32 = matmul_f32_config(ctx);
    if (opt->f32_tiles)
        gm->mcfg = gm->mcfg32;
    gm->kv = opt->kv;
    gm->cand_k = 40;
    gm->fuse_norm = fuse != 0;
    gm->pen = 1.0f;
    glesllm_status st = GLESLLM_OK;
    if (gm->kv == KV_AUTO) {
        const char *why;
        st = kv_placement_choose(ctx, &gm->kv, &why);
    }
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
    ((uint32_t *)gm->tokens.mapped)[pos] = (uint32_t)token;
    return GLESLLM_OK;
}

int32_t gpu_model_get_token(const gpu_model *gm, uint32_t pos)
{
    return pos <= gm->n_ctx ? (int32_t)((const uint32_t *)gm->tokens.mapped)[pos] : -1;
}

/* ---- the step ---------------------------------------------------------------------- */

/* A dispatch of `groups` work groups whose binding 0 is the activation buffer. */
static gpu_dispatch act_dispatch(gpu_model *gm, const gpu_program *prog, uint32_t groups,
                                 const uint32_t *params, uint32_t n_params)
{
    gpu_dispatch d = { 0 };
    d.prog = prog;
    d.bindings[0] = (gpu_binding){ 0, &gm->act, 0, 0, GPU_READ_WRITE };
    d.n_bindings = 1;
    memcpy(d.params, params, n_params * sizeof *params);
    d.n_params = n_params;
    d.groups[0] = groups;
    d.groups[1] = d.groups[2] = 1;
    return d;
}

/* The chunks of attention.comp over len positions, for `heads` (query,
 * head) pairs: *chunk positions each, *n_chunks of them (at most max_chunks,
 * the partials' room a pair). Past 64 positions the range is cut into chunks
 * so that there are many work groups (about 256 in all: enough to fill a
 * large GPU), each chunk at least 16 and at most CHUNK_MAX positions; their
 * partial results are merged by the last chunk of each head to finish. */
static glesllm_status attention_chunks(const gpu_model *gm, uint32_t len, uint32_t heads,
                                       uint32_t *chunk, uint32_t *n_chunks)
{
    *chunk = len;
    *n_chunks = 1;
    if (len > ONE_CHUNK) {
        uint32_t want = (ATTN_GROUPS + heads - 1) / heads;
        uint32_t c = (len + want - 1) / want;
        *chunk = c < CHUNK_MIN ? CHUNK_MIN : c > CHUNK_MAX ? CHUNK_MAX : c;
        *n_chunks = (len + *chunk - 1) / *chunk;
    }
    if (*n_chunks > gm->max_chunks)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "attention: %u chunks, room for %u",
                       *n_chunks, gm->max_chunks);
    return GLESLLM_OK;
}

/* A dispatch of an attention kernel over layer g's cache and the
 * activations (and, `counted`: attention.comp's chunk counters), a work group
 * a head (groups[1] and [2] 1). */
static gpu_dispatch attention_dispatch(gpu_model *gm, const gpu_layer *g, gpu_program *prog,
                                       const uint32_t *params, uint32_t n_params, bool counted)
{
    gpu_dispatch d = { 0 };
    d.prog = prog;
    d.bindings[0] = (gpu_binding){ 0, &g->cache, 0, 0, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, &gm->act, 0, 0, GPU_READ_WRITE };
    d.bindings[2] = (gpu_binding){ 2, &gm->attn_count, 0, 0, GPU_READ_WRITE };
    d.n_bindings = counted ? 3 : 2;
    memcpy(d.params, params, n_params * sizeof *params);
    d.n_params = n_params;
    d.groups[0] = gm->m->hp.n_head;
    d.groups[1] = d.groups[2] = 1;
    return d;
}

static glesllm_status record_attention(gpu_model *gm, const gpu_layer *g, uint32_t len)
{
    uint32_t chunk, n_chunks;
    glesllm_status st = attention_chunks(gm, len, gm->m->hp.n_head, &chunk, &n_chunks);
    if (st != GLESLLM_OK)
        return st;
    uint32_t p[] = { len, chunk, n_chunks, (uint32_t)gm->attn_out, (uint32_t)gm->partials,
                     (uint32_t)gm->k_base, (uint32_t)gm->v_base };
    gpu_dispatch d = attention_dispatch(gm, g, &gm->attn, p, 7, true);
    d.groups[1] = n_chunks;
    return gpu_queue_dispatch(gm->q, &d);
}

/* The argmax of `rows` rows of logits (act_stride(n_vocab) apart from float
 * offset `logits` in act) into token slots slot, slot + 1, ... */
static glesllm_status record_argmax_rows(gpu_model *gm, uint64_t logits, uint32_t rows,
                                         uint32_t slot)
{
    uint32_t p[] = { gm->m->hp.n_vocab, (uint32_t)logits, (uint32_t)gm->argmax_part, SLICE, 0,
                     (uint32_t)act_stride(gm->m->hp.n_vocab) };
    gpu_dispatch d = act_dispatch(gm, &gm->argmax1, gm->argmax_groups, p, 6);
    d.groups[1] = rows;
    glesllm_status st = gpu_queue_dispatch(gm->q, &d);
    if (st)
        return st;
    d.prog = &gm->argmax2;
    d.bindings[1] = (gpu_binding){ 1, &gm->tokens, 0, 0, GPU_WRITE };
    d.n_bindings = 2;
    d.params[0] = gm->argmax_groups;
    d.params[4] = slot;
    d.n_params = 5;
    d.groups[0] = 1;
    return gpu_queue_dispatch(gm->q, &d);
}

static glesllm_status record_argmax(gpu_model *gm, uint32_t slot)
{
    return record_argmax_rows(gm, gm->logits, 1, slot);
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

static glesllm_status record_candidates(gpu_model *gm, uint32_t pos)
{
    glesllm_status st;
    uint32_t window = gm->pen_last_n < pos + 1 ? gm->pen_last_n : pos + 1;
    if (gm->pen != 1.0f && window) {
        uint32_t pp[] = { pos + 1 - window, window, (uint32_t)gm->logits, gpu_f2u(gm->pen),
                          gm->m->hp.n_vocab };
        gpu_dispatch pd = act_dispatch(gm, &gm->penalty, 1, pp, 5);
        pd.bindings[1] = (gpu_binding){ 1, &gm->tokens, 0, 0, GPU_READ };
        pd.n_bindings = 2;
        if ((st = gpu_queue_dispatch(gm->q, &pd)))
            return st;
    }
    uint32_t p[] = { gm->m->hp.n_vocab, (uint32_t)gm->logits, (uint32_t)gm->lists, gm->cand_k,
                     gm->argmax_groups };
    gpu_dispatch d = act_dispatch(gm, &gm->topk1, gm->argmax_groups, p, 5);
    if ((st = gpu_queue_dispatch(gm->q, &d)))
        return st;
    d.prog = &gm->topk2;
    d.bindings[1] = (gpu_binding){ 1, &gm->cand, 0, 0, GPU_WRITE };
    d.n_bindings = 2;
    d.groups[0] = 1;
    return gpu_queue_dispatch(gm->q, &d);
}

/* y = RMSNorm(x) * w for `rows` rows of act_stride(n_embd) floats. */
static glesllm_status record_rms(gpu_model *gm, uint64_t w_off, uint64_t x_off, uint64_t y_off,
                                 uint32_t rows)
{
    uint32_t n = gm->m->hp.n_embd, stride = (uint32_t)act_stride(n);
    uint64_t span = (uint64_t)(rows - 1) * stride + n;
    gpu_dispatch d = { 0 };
    d.prog = &gm->rms;
    /* ranges for the barrier tracking; the rows are found by params 3, 4 */
    d.bindings[0] = (gpu_binding){ 0, &gm->act, 0, (x_off + span) * 4, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, &gm->act, w_off * 4, n * 4, GPU_READ };
    d.bindings[2] = (gpu_binding){ 2, &gm->act, 0, (y_off + span) * 4, GPU_WRITE };
    d.n_bindings = 3;
    d.params[0] = n;
    d.params[1] = gpu_f2u(gm->m->hp.eps);
    d.params[2] = stride;
    d.params[3] = (uint32_t)x_off;
    d.params[4] = (uint32_t)y_off;
    d.n_params = 5;
    d.groups[0] = rows;
    d.groups[1] = d.groups[2] = 1;
    return gpu_queue_dispatch(gm->q, &d);
}

/* rms_prep's work groups for an n_embd row (a group for each 4 RMS_WG
 * columns), each writing RMS_WG partial sums */
static uint32_t rms_prep_groups(const gpu_model *gm)
{
    return (gm->m->hp.n_embd + 4 * RMS_WG - 1) / (4 * RMS_WG);
}

/* The norm's first half for a matvec built with norm_scale, where no matvec
 * wrote it: xn = x * w for the row at x_off (not scaled) and partial sums of
 * its squares at sq, RMS_WG a work group, a group for each 4 RMS_WG columns
 * (at most max(n_embd, RMS_WG) sums: the room at sq); sets a's sq_off and
 * sq_count. */
static glesllm_status record_norm_prep(gpu_model *gm, uint64_t w_off, uint64_t x_off,
                                       matvec_args *a)
{
    uint32_t n = gm->m->hp.n_embd;
    gpu_dispatch d = { 0 };
    d.prog = &gm->rms_prep;
    d.bindings[0] = (gpu_binding){ 0, &gm->act, 0, (x_off + n) * 4, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, &gm->act, w_off * 4, n * 4, GPU_READ };
    uint32_t groups = rms_prep_groups(gm);
    d.bindings[2] = (gpu_binding){ 2, &gm->act, 0, (gm->sq + groups * RMS_WG) * 4, GPU_WRITE };
    d.n_bindings = 3;
    uint32_t p[] = { n, 0, 0, (uint32_t)x_off, (uint32_t)gm->xn, (uint32_t)gm->sq };
    memcpy(d.params, p, sizeof p);
    d.n_params = 6;
    d.groups[0] = groups;
    d.groups[1] = d.groups[2] = 1;
    a->sq_off = gm->sq;
    a->sq_count = groups * RMS_WG;
    return gpu_queue_dispatch(gm->q, &d);
}

/* The norm with the weight at w_off of x, for the next matvec, which reads
 * xn: nothing to record when the norm is split across the matvecs (the
 * kernel that wrote x wrote xn and the partial sums, a's sq_* say where),
 * else xn = RMSNorm(x) * w in its own dispatch. */
static glesllm_status record_norm(gpu_model *gm, uint64_t w_off)
{
    return gm->fuse_norm ? GLESLLM_OK : record_rms(gm, w_off, gm->x, gm->xn, 1);
}

/* The uint of a layer's cache that row g of the fused Q/K/V matrix writes in
 * a decode step (matvec.comp put_pair: Q to the scratch at 0, K and V to
 * this position's rows at a's k_off and v_off; the three regions in that
 * order), and a segment's rows [r0, r1) as one span in a's y_lo, y_hi: the
 * segments of a layer whose V is of another type (Q4_K_M's Q6_K) write
 * apart, so the queue puts no barrier between them and they overlap. */
static uint64_t qkv_uint(const model_hparams *hp, const matvec_args *a, uint64_t g)
{
    uint64_t q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    return g < q ? g : g < q + kv ? a->k_off + (g - q) / 2 : a->v_off + (g - q - kv) / 2;
}

static void qkv_written(const model_hparams *hp, uint64_t r0, uint64_t r1, matvec_args *a)
{
    a->y_lo = qkv_uint(hp, a, r0);
    a->y_hi = qkv_uint(hp, a, r1 - 1) + 1;
}

/* The args of a +y matvec into x that is followed by the norm with the
 * weight at next_norm (the norm_out half, when the norm is split). */
static matvec_args norm_out_args(const gpu_model *gm, uint64_t next_norm)
{
    matvec_args a = { next_norm };
    a.xg_off = gm->xn;
    a.sq_off = gm->sq;
    return a;
}

static glesllm_status check_past(const gpu_model *gm, uint32_t pos)
{
    if (pos > gm->n_past)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "position %u: the cache holds only positions 0..%d; process the ones "
                       "between first", pos, (int)gm->n_past - 1);
    return GLESLLM_OK;
}

uint32_t gpu_model_n_past(const gpu_model *gm) { return gm->n_past; }

glesllm_status gpu_model_truncate(gpu_model *gm, uint32_t n_past)
{
    if (n_past > gm->n_past)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "truncating the cache to %u positions: it holds only %u", n_past,
                       gm->n_past);
    gm->n_past = n_past;
    return GLESLLM_OK;
}

/* Reads w (at most its first PREFETCH_MAX bytes) into the L2 cache beside
 * the kernel recorded before: no barrier comes between them, as the sink is
 * declared read (prefetch.comp never writes it in practice). */
static glesllm_status record_prefetch(gpu_model *gm, const gpu_weight *w)
{
    glesllm_status st = GLESLLM_OK;
    uint64_t left = PREFETCH_MAX;
    for (uint32_t i = 0; st == GLESLLM_OK && i < w->n_parts && left; i++) {
        const gpu_weight_part *p = &w->parts[i];
        uint64_t n = (p->buf.size < left ? p->buf.size : left) / 16; /* uvec4 */
        left -= n * 16;
        uint64_t per_group = gm->prefetch_wg * PREFETCH_PER;
        gpu_dispatch d = { &gm->prefetch,
                           { { 0, &p->buf, 0, (size_t)(n * 16), GPU_READ },
                             { 1, &gm->sink, 0, 0, GPU_READ } },
                           2, { (uint32_t)n }, 1,
                           { (uint32_t)((n + per_group - 1) / per_group), 1, 1 } };
        if (n)
            st = gpu_queue_dispatch(gm->q, &d);
    }
    return st;
}

glesllm_status gpu_model_step(gpu_model *gm, uint32_t pos, unsigned flags)
{
    const model_hparams *hp = &gm->m->hp;
    if (pos >= gm->n_ctx)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "position %u is past the context of %u", pos,
                       gm->n_ctx);
    glesllm_status st = check_past(gm, pos);
    if (st)
        return st;
    uint64_t before = gpu_queue_get_stats(gm->q).dispatches;
    uint64_t emb = act_stride(hp->n_embd);
    st = get_rows_record(gm->q, &gm->embed, &gm->tok_embd, &gm->tokens, pos, 1, &gm->act, gm->x, emb);
    uint64_t kv_half = (uint64_t)hp->n_head_kv * hp->head_dim / 2;
    /* where the split norm's partial sums are, and how many: the last +y
     * matvec's (its matvec_norm_parts) or rms_prep's */
    matvec_args sums = { 0 };
    if (!st && gm->fuse_norm)
        st = record_norm_prep(gm, gm->layers[0].attn_norm, gm->x, &sums);
    for (uint32_t li = 0; st == GLESLLM_OK && li < hp->n_layer; li++) {
        const gpu_layer *g = &gm->layers[li];
        matvec_args a = { g->attn_norm, hp->eps, gm->rope + (uint64_t)pos * hp->head_dim, g->bias,
                          gm->k_base + pos * kv_half, gm->v_base + pos * kv_half };
        a.sq_off = sums.sq_off;
        a.sq_count = sums.sq_count;
        st = record_norm(gm, g->attn_norm);
        for (uint32_t i = 0; st == GLESLLM_OK && i < g->n_qkv; i++) {
            qkv_written(hp, g->qkv[i].row_base, g->qkv[i].row_base + g->qkv[i].w.rows, &a);
            st = matvec_record_args(gm->q, g->qkv[i].k, &g->qkv[i].w, &gm->act, gm->xn, &g->cache,
                                    g->qkv[i].row_base, &a);
        }
        a.y_lo = a.y_hi = 0;
        if (!st)
            st = record_attention(gm, g, pos + 1);
        matvec_args o = norm_out_args(gm, g->ffn_norm);
        if (!st)
            st = matvec_record_args(gm->q, g->k_wo, &g->wo, &gm->act, gm->attn_out, &gm->act,
                                    gm->x, &o);
        a.norm_off = g->ffn_norm;
        a.sq_count = matvec_norm_parts(g->k_wo, &g->wo);
        if (!st)
            st = record_norm(gm, g->ffn_norm);
        if (!st)
            st = matvec_record_args(gm->q, g->k_glu, &g->glu, &gm->act, gm->xn, &gm->act,
                                    2 * gm->hidden, &a);
        if (!st && gm->prefetch_down)
            st = record_prefetch(gm, &g->down);
        matvec_args dn = norm_out_args(gm, li + 1 < hp->n_layer ? gm->layers[li + 1].attn_norm
                                                                 : gm->out_norm);
        if (!st)
            st = matvec_record_args(gm->q, g->k_down, &g->down, &gm->act, gm->hidden, &gm->act,
                                    gm->x, &dn);
        sums.sq_count = matvec_norm_parts(g->k_down, &g->down);
    }
    if (!st && flags) {
        matvec_args a = { gm->out_norm, hp->eps };
        a.sq_off = sums.sq_off;
        a.sq_count = sums.sq_count;
        st = record_norm(gm, gm->out_norm);
        if (!st)
            st = matvec_record_args(gm->q, gm->k_out, gm->output, &gm->act, gm->xn, &gm->act,
                                    gm->logits, &a);
    }
    if (!st && (flags & GPU_STEP_ARGMAX))
        st = record_argmax(gm, pos + 1);
    else if (!st && (flags & GPU_STEP_CANDIDATES))
        st = record_candidates(gm, pos);
    if (!st)
        st = gpu_queue_submit(gm->q);
    gm->last_dispatches = (uint32_t)(gpu_queue_get_stats(gm->q).dispatches - before);
    if (!st) /* later positions were computed from another token at pos */
        gm->n_past = pos + 1;
    return st;
}

glesllm_status gpu_model_wait(gpu_model *gm) { return gpu_queue_wait(gm->q, 0); }

glesllm_status gpu_model_wait_prior(gpu_model *gm) { return gpu_queue_wait_prior(gm->q, 0); }

glesllm_status gpu_model_kv_io(gpu_model *gm, uint32_t layer, uint32_t pos, uint32_t n, void *k,
                               void *v, bool write)
{
    const model_hparams *hp = &gm->m->hp;
    if (layer >= hp->n_layer || pos > gm->n_ctx || n > gm->n_ctx - pos)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "K/V of layer %u, positions %u..%u: outside the model or the context of %u",
                       layer, pos, pos + n, gm->n_ctx);
    uint64_t row = (uint64_t)hp->n_head_kv * hp->head_dim * 2; /* bytes: F16 */
    gpu_buffer *b = &gm->layers[layer].cache;
    size_t ko = (size_t)(gm->k_base * 4 + pos * row), vo = (size_t)(gm->v_base * 4 + pos * row);
    if (!write) {
        glesllm_status st = gpu_model_wait(gm);
        if (!st)
            st = gpu_buffer_read(gm->ctx, b, ko, k, (size_t)(n * row));
        return st ? st : gpu_buffer_read(gm->ctx, b, vo, v, (size_t)(n * row));
    }
    glesllm_status st = check_past(gm, pos);
    if (!st)
        st = gpu_model_wait(gm);
    if (!st)
        st = gpu_buffer_write(b, ko, k, (size_t)(n * row));
    if (!st)
        st = gpu_buffer_write(b, vo, v, (size_t)(n * row));
    if (!st)
        gm->n_past = pos + n;
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

/* ---- prefill ------------------------------------------------------------------------ */

uint32_t gpu_model_n_batch(const gpu_model *gm) { return gm->n_batch; }
uint32_t gpu_model_n_small(const gpu_model *gm) { return gm->n_small; }

static glesllm_status make_logits_all(gpu_model *gm)
{
    if (gm->logits_all)
        return GLESLLM_OK;
    uint64_t row = act_stride(gm->m->hp.n_vocab) * 4;
    uint64_t limit = gpu_context_limits(gm->ctx)->max_storage_block_bytes;
    uint64_t per = limit / row;
    if (!per)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "one row of logits exceeds the storage-block limit");
    if (per > gm->n_batch)
        per = gm->n_batch;
    gm->logits_rows = (uint32_t)per;
    uint32_t n = (gm->n_batch + gm->logits_rows - 1) / gm->logits_rows;
    gm->logits_all = calloc(n, sizeof *gm->logits_all);
    if (!gm->logits_all)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    for (; gm->n_logits_all < n; gm->n_logits_all++) {
        glesllm_status st = gpu_buffer_create(gm->ctx, (size_t)(per * row), NULL, GPU_BUFFER_DEVICE,
                                              "logits of every position",
                                              &gm->logits_all[gm->n_logits_all]);
        if (st)
            return st;
    }
    return GLESLLM_OK;
}

/* The attention of n new tokens at pos0.. over the cache (flags: the
 * prefill's, for few_limit). */
static glesllm_status record_prefill_attention(gpu_model *gm, const gpu_layer *g, uint32_t pos0,
                                              uint32_t n, unsigned flags)
{
    const model_hparams *hp = &gm->m->hp;
    uint32_t q_stride = (uint32_t)act_stride((uint64_t)hp->n_head * hp->head_dim);
    if (n <= few_limit(gm, flags)) {
        /* Few tokens (a verification pass, a short prompt): attention.comp,
         * a work group a (query, head, chunk), each reading its positions'
         * K and V itself (from L2 mostly) instead of sharing tiles. On an
         * H200, verifying 8 drafted tokens of the Mistral-7B shape (Q4_0)
         * after 64 prompt tokens: 9.08 -> 8.54 ms, after 1000: 16.4 -> 9.6
         * ms, with the tiled kernel's work groups of 4 queries before
         * (bench/RESULTS.md session 45). Each query cuts its positions
         * into the chunks a decode step at its length would (attention.comp
         * MULTI), so that its output is the step's to the bit; the grid
         * takes the most chunks of any, at most max_chunks. */
        uint32_t chunk, n_chunks = 1;
        for (uint32_t q = 0; q < n; q++) {
            uint32_t nc;
            glesllm_status st = attention_chunks(gm, pos0 + q + 1, hp->n_head, &chunk, &nc);
            if (st != GLESLLM_OK)
                return st;
            n_chunks = nc > n_chunks ? nc : n_chunks;
        }
        uint32_t want = (ATTN_GROUPS + hp->n_head - 1) / hp->n_head;
        uint32_t p[] = { pos0 + 1, want, gm->max_chunks, (uint32_t)gm->battn,
                         (uint32_t)gm->partials, (uint32_t)gm->k_base, (uint32_t)gm->v_base,
                         (uint32_t)gm->bq, q_stride };
        gpu_dispatch d = attention_dispatch(gm, g, &gm->attn_few, p, 9, true);
        d.groups[1] = n_chunks;
        d.groups[2] = n;
        return gpu_queue_dispatch(gm->q, &d);
    }
    uint32_t p[] = { n, pos0, (uint32_t)gm->bq, (uint32_t)gm->battn, q_stride,
                     (uint32_t)gm->k_base, (uint32_t)gm->v_base };
    gpu_dispatch d = attention_dispatch(gm, g, &gm->attn_pre, p, 7, false);
    d.groups[1] = (n + gm->pre_bq - 1) / gm->pre_bq;
    return gpu_queue_dispatch(gm->q, &d);
}

/* What `flags` asks for the last of n tokens at pos0 whose x rows are at bx:
 * its logits as a decode step makes them, and their argmax or candidates. */
static glesllm_status record_last_logits(gpu_model *gm, uint32_t pos0, uint32_t n, unsigned flags)
{
    const model_hparams *hp = &gm->m->hp;
    if (!(flags & (GPU_STEP_LOGITS | GPU_STEP_ARGMAX | GPU_STEP_CANDIDATES)))
        return GLESLLM_OK;
    uint64_t row = gm->bx + (uint64_t)(n - 1) * act_stride(hp->n_embd);
    matvec_args a = { gm->out_norm, hp->eps };
    glesllm_status st = gm->fuse_norm ? record_norm_prep(gm, gm->out_norm, row, &a)
                                      : record_rms(gm, gm->out_norm, row, gm->xn, 1);
    if (!st)
        st = matvec_record_args(gm->q, gm->k_out, gm->output, &gm->act, gm->xn, &gm->act,
                                gm->logits, &a);
    if (!st && (flags & GPU_STEP_ARGMAX))
        st = record_argmax(gm, pos0 + n);
    else if (!st && (flags & GPU_STEP_CANDIDATES))
        st = record_candidates(gm, pos0 + n - 1);
    return st;
}

/* The buffer of the tokens' tiles the f16-tile matmuls read (matmul_args.xt):
 * a chunk's x for the widest input (Q/K/V and gate/up: n_embd; O: n_head x
 * head_dim; down: n_ff), made once, when the first chunk is recorded. */
static glesllm_status make_xt(gpu_model *gm)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t cols = hp->n_embd;
    if ((uint64_t)hp->n_head * hp->head_dim > cols)
        cols = (uint64_t)hp->n_head * hp->head_dim;
    if (hp->n_ff > cols)
        cols = hp->n_ff;
    uint64_t bytes = matmul_xt_bytes(&gm->mcfg, gm->n_batch, cols);
    if (gm->xt.id || !bytes)
        return GLESLLM_OK;
    if (bytes > gpu_context_limits(gm->ctx)->max_storage_block_bytes)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "prefill: the matmul's token tiles for a batch of %u tokens (%llu bytes) "
                       "exceed the GPU's storage-block limit (%llu bytes); use a smaller batch",
                       gm->n_batch, (unsigned long long)bytes,
                       (unsigned long long)gpu_context_limits(gm->ctx)->max_storage_block_bytes);
    return gpu_buffer_create(gm->ctx, (size_t)bytes, NULL, GPU_BUFFER_DEVICE, "matmul token tiles",
                             &gm->xt);
}

/* A prefill matmul of x in the activation buffer into y, with the model's
 * buffer for the f16 tiles' token tiles (every matmul of a chunk takes it). */
static glesllm_status chunk_matmul(gpu_model *gm, const matmul_kernel *k, const gpu_weight *w,
                                   const gpu_buffer *y, matmul_args a)
{
    a.xt = &gm->xt;
    return matmul_record(gm->q, k, w, &gm->act, y, &a);
}

/* One chunk of n <= n_batch tokens at pos0; `last`: the final chunk of the
 * prefill, which computes what `flags` asks for the last token. */
static glesllm_status record_chunk(gpu_model *gm, uint32_t pos0, uint32_t n, unsigned flags,
                                   bool last)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t emb = act_stride(hp->n_embd);
    uint32_t q_dim = hp->n_head * hp->head_dim;
    uint64_t kv_half = (uint64_t)hp->n_head_kv * hp->head_dim / 2;
    glesllm_status st = make_xt(gm);
    if (!st)
        st = get_rows_record(gm->q, &gm->embed, &gm->tok_embd, &gm->tokens, pos0, n, &gm->act,
                             gm->bx, emb);
    for (uint32_t li = 0; st == GLESLLM_OK && li < hp->n_layer; li++) {
        const gpu_layer *g = &gm->layers[li];
        st = record_rms(gm, g->attn_norm, gm->bx, gm->bxn, n);
        for (uint32_t i = 0; st == GLESLLM_OK && i < g->n_qkv; i++) {
            matmul_args a = { n, gm->bxn, gm->bq, act_stride(q_dim), g->qkv[i].row_base,
                              gm->rope + (uint64_t)pos0 * hp->head_dim, g->bias,
                              gm->k_base + pos0 * kv_half, gm->v_base + pos0 * kv_half };
            /* the parts share x: its tiles made once (when the kernels tile the
             * tokens alike; their rows a thread may differ) */
            const matmul_config *c0 = &g->qkv[0].mk->cfg, *ci = &g->qkv[i].mk->cfg;
            a.xt_made = i > 0 && c0->f16 && ci->f16 && c0->wg == ci->wg && c0->tn == ci->tn;
            st = chunk_matmul(gm, g->qkv[i].mk, &g->qkv[i].w, &g->cache, a);
        }
        if (!st)
            st = record_prefill_attention(gm, g, pos0, n, flags);
        if (!st) {
            matmul_args a = { n, gm->battn, gm->bx, emb };
            st = chunk_matmul(gm, g->mk_wo, &g->wo, &gm->act, a);
        }
        if (!st)
            st = record_rms(gm, g->ffn_norm, gm->bx, gm->bxn, n);
        if (!st) {
            matmul_args a = { n, gm->bxn, gm->bhid, act_stride(hp->n_ff) };
            st = chunk_matmul(gm, g->mk_glu, &g->glu, &gm->act, a);
        }
        if (!st) {
            matmul_args a = { n, gm->bhid, gm->bx, emb };
            st = chunk_matmul(gm, g->mk_down, &g->down, &gm->act, a);
        }
    }
    if (!st && (flags & GPU_STEP_ALL_LOGITS)) {
        st = record_rms(gm, gm->out_norm, gm->bx, gm->bxn, n);
        uint64_t vs = act_stride(hp->n_vocab);
        for (uint32_t t0 = 0, b = 0; !st && t0 < n; t0 += gm->logits_rows, b++) {
            uint32_t cnt = n - t0 < gm->logits_rows ? n - t0 : gm->logits_rows;
            matmul_args a = { cnt, gm->bxn + t0 * emb, 0, vs };
            st = chunk_matmul(gm, gm->mk_out, gm->output, &gm->logits_all[b], a);
        }
    }
    if (!st && last)
        st = record_last_logits(gm, pos0, n, flags);
    if (!st)
        st = gpu_queue_submit(gm->q);
    return st;
}

/* the tokens of the run at t0 of a small batch of n: runs of gm->multi_nt,
 * the last one what is left */
static uint32_t multi_run(const gpu_model *gm, uint32_t n, uint32_t t0)
{
    return n - t0 < gm->multi_nt ? n - t0 : gm->multi_nt;
}

/* the set for a run of n tokens: the fewest tokens >= n */
static uint32_t multi_set(const gpu_model *gm, uint32_t n)
{
    uint32_t s = 0;
    while (s + 1 < gm->n_sets && gm->set_nt[s] < n)
        s++;
    return s;
}

/* the kernel of set si twin to the largest set's in ks (same type, variant
 * and weight; fewer tokens) */
static glesllm_status multi_twin(gpu_model *gm, multi_kernels ks, const gpu_weight *w, uint32_t si)
{
    const matvec_kernel *big = ks[gm->n_sets - 1];
    matvec_variant v = big->var;
    v.nt = gm->set_nt[si];
    return get_matvec(gm, big->type, w->rows, w->cols, &v, &ks[si]);
}

/* Set si's kernels for every weight, built on its first use (compiled then,
 * or read from the program cache). */
static glesllm_status build_multi_set(gpu_model *gm, uint32_t si)
{
    if (gm->set_built[si])
        return GLESLLM_OK;
    glesllm_status st = multi_twin(gm, gm->vk_out, gm->output, si);
    for (uint32_t li = 0; st == GLESLLM_OK && li < gm->m->hp.n_layer; li++) {
        gpu_layer *g = &gm->layers[li];
        for (uint32_t i = 0; st == GLESLLM_OK && i < g->n_qkv; i++)
            st = multi_twin(gm, g->qkv[i].vk, &g->qkv[i].w, si);
        if (!st)
            st = multi_twin(gm, g->vk_wo, &g->wo, si);
        if (!st)
            st = multi_twin(gm, g->vk_glu, &g->glu, si);
        if (!st)
            st = multi_twin(gm, g->vk_down, &g->down, si);
    }
    gm->set_built[si] = st == GLESLLM_OK;
    return st;
}

glesllm_status gpu_model_prepare_small(gpu_model *gm)
{
    glesllm_status st = GLESLLM_OK;
    for (uint32_t si = 0; gm->n_small && st == GLESLLM_OK && si < gm->n_sets; si++)
        st = build_multi_set(gm, si);
    return st;
}

/* A multi-token matvec over n tokens in runs of gm->multi_nt, each by the
 * set that fits it (built: build_multi_set): token t's x at
 * x_off + t * act_stride(cols), its y row y_stride further each (GLU: y_off
 * counts twice), QKV as matvec_args says. */
static glesllm_status record_multi(gpu_model *gm, const multi_kernels ks, const gpu_weight *w,
                                   const gpu_buffer *y, uint64_t x_off, uint64_t y_off,
                                   uint64_t y_stride, uint32_t n, const matvec_args *base)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t kv_half = (uint64_t)hp->n_head_kv * hp->head_dim / 2;
    uint64_t q_stride = act_stride((uint64_t)hp->n_head * hp->head_dim);
    const matvec_kernel *big = ks[gm->n_sets - 1];
    bool glu = big->var.epilogue == MATVEC_GLU, qkv = big->var.epilogue == MATVEC_QKV;
    glesllm_status st = GLESLLM_OK;
    for (uint32_t t0 = 0; st == GLESLLM_OK && t0 < n; t0 += gm->multi_nt) {
        matvec_args a = *base;
        a.n_tok = multi_run(gm, n, t0);
        const matvec_kernel *k = ks[multi_set(gm, a.n_tok)];
        a.y_stride = y_stride;
        a.xp_off = gm->bxp;
        if (qkv) {
            a.rope_off += (uint64_t)t0 * hp->head_dim;
            a.k_off += t0 * kv_half;
            a.v_off += t0 * kv_half;
            a.q_off += t0 * q_stride;
        }
        uint64_t yo = qkv ? y_off : y_off + (glu ? 2 : 1) * t0 * y_stride;
        st = matvec_record_args(gm->q, k, w, &gm->act, x_off + t0 * act_stride(w->cols), y, yo,
                                &a);
    }
    return st;
}

/* How a decode step splits the sum of squares of the norm before a
 * one-token matvec (fuse_norm): the partial sums the norm_out matvec k (of
 * w) writes, or (k NULL) record_norm_prep's. For the multi-token twin's
 * x_prep.comp, which adds them up as that matvec does (matvec_args.sq_rows);
 * left unset (any split) where the parts of w would number the partial sums
 * otherwise than one after the other, or without fuse_norm. */
static void step_norm_split(const gpu_model *gm, const matvec_kernel *k, const gpu_weight *w,
                            matvec_args *a)
{
    a->sq_rows = 0;
    a->sq_count = 0;
    if (!gm->fuse_norm)
        return;
    if (!k) {
        a->sq_count = rms_prep_groups(gm) * RMS_WG; /* record_norm_prep's */
        return;
    }
    for (uint32_t i = 0; i + 1 < w->n_parts; i++)
        if (w->parts[i].rows % k->cfg.nr)
            return;
    a->sq_rows = k->cfg.nr;
    a->sq_count = matvec_norm_parts(k, w);
}

/* A prefill of n <= n_small tokens at pos0: each weight read once for up to
 * gm->multi_nt tokens, five dispatches a layer as in a decode step (the
 * attention is the prefill's). */
static glesllm_status record_small(gpu_model *gm, uint32_t pos0, uint32_t n, unsigned flags)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t emb = act_stride(hp->n_embd), hid = act_stride(hp->n_ff);
    uint64_t kv_half = (uint64_t)hp->n_head_kv * hp->head_dim / 2;
    glesllm_status st = GLESLLM_OK;
    for (uint32_t t0 = 0; st == GLESLLM_OK && t0 < n; t0 += gm->multi_nt) /* record_multi's runs */
        st = build_multi_set(gm, multi_set(gm, multi_run(gm, n, t0)));
    if (!st)
        st = get_rows_record(gm->q, &gm->embed, &gm->tok_embd, &gm->tokens, pos0, n, &gm->act,
                             gm->bx, emb);
    for (uint32_t li = 0; st == GLESLLM_OK && li < hp->n_layer; li++) {
        const gpu_layer *g = &gm->layers[li];
        matvec_args a = { g->attn_norm, hp->eps, gm->rope + (uint64_t)pos0 * hp->head_dim, g->bias,
                          gm->k_base + pos0 * kv_half, gm->v_base + pos0 * kv_half };
        a.q_off = gm->bq;
        const gpu_layer *before = li ? &gm->layers[li - 1] : NULL;
        step_norm_split(gm, before ? before->k_down : NULL, before ? &before->down : NULL, &a);
        for (uint32_t i = 0; st == GLESLLM_OK && i < g->n_qkv; i++)
            st = record_multi(gm, g->qkv[i].vk, &g->qkv[i].w, &g->cache, gm->bx,
                              g->qkv[i].row_base, 0, n, &a);
        if (!st)
            st = record_prefill_attention(gm, g, pos0, n, flags);
        matvec_args none = { 0 }, ffn = { g->ffn_norm, hp->eps };
        step_norm_split(gm, g->k_wo, &g->wo, &ffn);
        if (!st)
            st = record_multi(gm, g->vk_wo, &g->wo, &gm->act, gm->battn, gm->bx, emb, n, &none);
        if (!st)
            st = record_multi(gm, g->vk_glu, &g->glu, &gm->act, gm->bx, 2 * gm->bhid, hid, n, &ffn);
        if (!st)
            st = record_multi(gm, g->vk_down, &g->down, &gm->act, gm->bhid, gm->bx, emb, n, &none);
    }
    if (!st && (flags & (GPU_STEP_ALL_LOGITS | GPU_STEP_ARGMAX_ALL))) {
        matvec_args a = { gm->out_norm, hp->eps };
        const gpu_layer *last = &gm->layers[hp->n_layer - 1];
        step_norm_split(gm, last->k_down, &last->down, &a);
        uint64_t vs = act_stride(hp->n_vocab);
        st = record_multi(gm, gm->vk_out, gm->output, &gm->act, gm->bx, gm->vlog, vs, n, &a);
        if (!st && (flags & GPU_STEP_ARGMAX_ALL))
            st = record_argmax_rows(gm, gm->vlog, n, pos0 + 1);
    }
    if (!st)
        st = record_last_logits(gm, pos0, n, flags);
    if (!st)
        st = gpu_queue_submit(gm->q);
    return st;
}

static glesllm_status record_prefill(gpu_model *gm, uint32_t pos, uint32_t n, unsigned flags)
{
    if (n <= small_limit(gm, flags)) {
        gm->last_small = true;
        return record_small(gm, pos, n, flags);
    }
    if (flags & GPU_STEP_ARGMAX_ALL)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the argmax of every position: %u tokens, more than the %u of a small "
                       "batch", n, gm->n_small);
    gm->last_small = false;
    if (flags & GPU_STEP_ALL_LOGITS) {
        if (n > gm->n_batch)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "logits of every position: %u tokens, more than the batch of %u", n,
                           gm->n_batch);
        glesllm_status st = make_logits_all(gm);
        if (st)
            return st;
    }
    glesllm_status st = GLESLLM_OK;
    for (uint32_t done = 0; st == GLESLLM_OK && done < n;) {
        uint32_t c = n - done < gm->n_batch ? n - done : gm->n_batch;
        st = record_chunk(gm, pos + done, c, flags, done + c == n);
        done += c;
    }
    return st;
}

glesllm_status gpu_model_prefill(gpu_model *gm, uint32_t pos, uint32_t n, unsigned flags)
{
    if (!n || pos >= gm->n_ctx || n > gm->n_ctx - pos)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "prefill of %u tokens at position %u: past the context of %u", n, pos,
                       gm->n_ctx);
    glesllm_status st = check_past(gm, pos);
    if (st)
        return st;
    uint64_t before = gpu_queue_get_stats(gm->q).dispatches;
    st = record_prefill(gm, pos, n, flags);
    gm->last_dispatches = (uint32_t)(gpu_queue_get_stats(gm->q).dispatches - before);
    if (!st)
        gm->n_past = pos + n;
    return st;
}

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
