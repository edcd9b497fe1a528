/* The tuning read from the environment, at the edge. See tuning.h. */
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "common/tuning.h"

const tuning *tuning_or_default(const tuning *t)
{
    static const tuning dflt = TUNING_DEFAULT_INIT;
    return t ? t : &dflt;
}

#define MATVEC_SPLIT_USE "wg,tpr,nr (work-group size, lanes a row, rows a thread)"
#define MULTI_SPLIT_USE                                                                       \
    "wg,tpr,nr[,xb] (work-group size, lanes a row, rows a thread, and invocations on one unit " \
    "of x: a power of two up to 64)"
#define MATMUL_TILES_USE "wg,tm,tn[,0|1|2|3|4] (work-group size, rows and tokens a thread, tiles)"
#define FETCH_AHEAD_USE "0 (off), 1, 2, 4 or 8 (rows a group, loaded a group ahead)"

/* A 0|1 variable into *out (TUNE_AUTO when unset). */
static glesllm_status flag(const char *name, const char *use, int *out)
{
    int v;
    glesllm_status st = env_flag(name, use, &v);
    *out = v < 0 ? TUNE_AUTO : v ? TUNE_ON : TUNE_OFF;
    return st;
}

static glesllm_status bad(const char *name, const char *use)
{
    return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "%s=%s is not known; use %s", name, getenv(name),
                   use);
}

static glesllm_status read_env(tuning *t)
{
    unsigned v[4] = { 0, 0, 0, 1 };
    int n = env_uints("GLESLLM_MATVEC", v, 3, 3);
    if (n < 0)
        return bad("GLESLLM_MATVEC", MATVEC_SPLIT_USE);
    for (int i = 0; i < n; i++)
        t->matvec[i] = v[i];
    t->n_matvec = (uint32_t)n;
    v[3] = 1; /* xb unless given */
    n = env_uints("GLESLLM_MULTI", v, 3, 4);
    if (n < 0 || (n == 4 && (!v[3] || v[3] > 64 || (v[3] & (v[3] - 1)))))
        return bad("GLESLLM_MULTI", MULTI_SPLIT_USE);
    for (int i = 0; i < 4 && n; i++)
        t->multi[i] = v[i];
    t->n_multi = (uint32_t)n;
    v[3] = 0;
    n = env_uints("GLESLLM_MATMUL", v, 3, 4);
    if (n < 0 || (n == 4 && v[3] > 4))
        return bad("GLESLLM_MATMUL", MATMUL_TILES_USE);
    for (int i = 0; i < 4 && n; i++)
        t->matmul[i] = v[i];
    t->n_matmul = (uint32_t)n;
    n = env_uints("GLESLLM_FETCH_AHEAD", v, 1, 1);
    if (n < 0 || (n == 1 && (v[0] > 8 || (v[0] & (v[0] - 1)))))
        return bad("GLESLLM_FETCH_AHEAD", FETCH_AHEAD_USE);
    t->fetch_ahead = n == 1 ? (int)v[0] : TUNE_AUTO;
    glesllm_status st;
    if ((st = flag("GLESLLM_CPU_SPLITS",
                   "0 (a GPU's one-token splits), 1 (a CPU rasteriser's: whole rows a lane) or "
                   "leave it unset (by the renderer: 1 on llvmpipe)",
                   &t->cpu_splits)) ||
        (st = flag("GLESLLM_F16_DOT",
                   "0 (f32 products), 1 (f16 products for the quantized formats, f32 pairs where "
                   "the driver has no f16 types) or leave it unset (1)",
                   &t->f16_dot)) ||
        (st = flag("GLESLLM_F16_SUBN",
                   "0 (no levels as f16 subnormals), 1 (every quantized format's, with f16 "
                   "products) or leave it unset (the engine's choice, where the driver keeps "
                   "subnormals)",
                   &t->f16_subn)) ||
        (st = flag("GLESLLM_X_ONCE",
                   "0 (each slot's lanes make x's f16 pairs) or 1 (once a work group, every "
                   "quantized format: the default)",
                   &t->x_once)) ||
        (st = flag("GLESLLM_UNROLL",
                   "0 (no one-token kernel unrolled), 1 (every one) or leave it unset (the "
                   "K-quants')",
                   &t->unroll)) ||
        (st = flag("GLESLLM_MULTI_XSH",
                   "0 (every token's x from memory) or 1 (staged in shared memory)",
                   &t->multi_xsh)) ||
        (st = flag("GLESLLM_MULTI_XG",
                   "0 (x staged by the several-token kernels) or 1 (made ready once a dispatch, "
                   "where they take f16 products: the default)",
                   &t->multi_xg)) ||
        (st = flag("GLESLLM_XG_VL",
                   "0 (a several-token lane for each of the one-token kernel's) or 1 (a "
                   "subgroup's lanes a row, each for several: the default)",
                   &t->xg_vl)) ||
        (st = flag("GLESLLM_FUSE_NORM", "0 (each norm its own dispatch) or 1", &t->fuse_norm)) ||
        (st = flag("GLESLLM_PREFETCH", "0 or 1", &t->prefetch)) ||
        (st = flag("GLESLLM_RWKV_CHUNK",
                   "0 (an RWKV prompt's state update token by token: the default) or 1 (in "
                   "chunks)", &t->rwkv_chunk)) ||
        (st = flag("GLESLLM_ATTN_GROUP",
                   "0 (prefill attention a work group a head), 1 (a KV head's query heads a work "
                   "group) or leave it unset (by the model's shape)",
                   &t->attn_group)))
        return st;
    const char *kv = getenv("GLESLLM_KV");
    if (kv && *kv) {
        if (strcmp(kv, "device") == 0)
            t->kv = TUNE_KV_DEVICE;
        else if (strcmp(kv, "mapped") == 0)
            t->kv = TUNE_KV_MAPPED;
        else
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "GLESLLM_KV=%s: expected 'device' or 'mapped'", kv);
    }
    long small = TUNE_SMALL_AUTO + 1, nt = 0, page = 0, slices = TUNE_AUTO, pf_mib = 0,
         pf_qkv = TUNE_AUTO;
    if ((st = env_long("GLESLLM_SMALL_BATCH", -2147483647, 2147483647, &small)) ||
        (st = env_long("GLESLLM_MULTI_NT", 2, 16, &nt)) ||
        (st = env_long("GLESLLM_KV_PAGE", 1, 1024, &page)) ||
        (st = env_long("GLESLLM_MATMUL_SLICES", 0, 65535, &slices)) ||
        (st = env_long("GLESLLM_PREFETCH_MIB", 1, 4096, &pf_mib)) ||
        (st = env_long("GLESLLM_PREFETCH_QKV_MIB", 0, 4096, &pf_qkv)))
        return st;
    t->matmul_slices = (int)slices;
    if (page & (page - 1))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "GLESLLM_KV_PAGE=%ld: expected a power of two from 1 to 1024 (positions a "
                       "page of the KV cache)", page);
    t->kv_page = (uint32_t)page;
    t->small_batch = small == TUNE_SMALL_AUTO + 1 ? TUNE_SMALL_AUTO : small;
    t->multi_nt = (uint32_t)nt;
    t->prefetch_mib = (uint32_t)pf_mib;
    t->prefetch_qkv_mib = (int)pf_qkv;
    return GLESLLM_OK;
}

glesllm_status tuning_from_env(tuning *t)
{
    *t = TUNING_DEFAULT;
    glesllm_status st = read_env(t);
    if (st)
        *t = TUNING_DEFAULT;
    return st;
}
