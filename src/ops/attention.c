/* Attention over the KV cache. See attention.h. */
#include "ops/attention.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/tuning.h"

#define ATTN_GROUPS 256u /* the work groups a query aims at: enough to fill a large GPU */
#define ATTN_WG 128u

/* The score's scale and soft cap as defines (SCORE_SCALE, SOFTCAP; none:
 * the kernels' 1 / sqrt(HEAD_DIM) and no cap), the floats' bits exact. */
static void score_defines(const attn_shape *s, char *buf, size_t n)
{
    int k = 0;
    buf[0] = 0;
    if (s->scale > 0.0f)
        k = snprintf(buf, n, "\nSCORE_SCALE uintBitsToFloat(%uu)", gpu_f2u(s->scale));
    if (s->softcap > 0.0f && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "\nSOFTCAP uintBitsToFloat(%uu)", gpu_f2u(s->softcap));
}

/* A kernel's defines: the shape's (work-group size, head, group, KV row,
 * score scale and cap, the cache's pages) around its own lines `own`. */
static void kernel_defines(const attn_shape *s, const char *own, char *buf, size_t n)
{
    char sc[96], kv[64];
    score_defines(s, sc, sizeof sc);
    kv_layout_defines(&s->kv, kv, sizeof kv);
    snprintf(buf, n, "WG_SIZE %u\nHEAD_DIM %u\nGROUP %u\nKV_DIM %u\n%s%s%s", ATTN_WG,
             s->head_dim, s->n_head / s->n_head_kv, s->n_head_kv * s->head_dim, own, sc, kv);
}

/* Lanes a row (a power of two) that rows rows' outputs of h2 pairs each
 * spread over in a work group: the most that fit and divide h2. */
static uint32_t lanes_a_row(uint32_t rows, uint32_t h2)
{
    uint32_t lanes = 1;
    while (lanes * 2 * rows <= ATTN_WG && h2 % (lanes * 2) == 0)
        lanes *= 2;
    return lanes;
}

/* The prefill kernel with a work group a head (attn_prefill_head.comp): the
 * first tiling (queries x positions) of the list whose shared memory fits. */
static glesllm_status build_head_tiles(gpu_context *ctx, attn_kernels *k)
{
    const attn_shape *s = &k->s;
    uint32_t hd = s->head_dim, max_shared = gpu_context_limits(ctx)->max_shared_bytes;
    static const uint32_t tiles[][2] = { { 8, 16 }, { 4, 32 }, { 4, 16 }, { 4, 8 } };
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        uint32_t bq = tiles[i][0], bkv = tiles[i][1];
        uint32_t bytes = 4 * (bq * hd + 2 * bkv * (hd / 2 + 1) + bq * bkv);
        if (bytes > max_shared)
            continue;
        char own[96], defs[384];
        snprintf(own, sizeof own, "BQ %u\nBKV %u\nLPQ %u", bq, bkv, lanes_a_row(bq, hd / 2));
        kernel_defines(s, own, defs, sizeof defs);
        k->tile_q = bq;
        k->tiles_grouped = false;
        return gpu_program_build(ctx, "attn_prefill_head.comp", defs, &k->tiles);
    }
    return err_set(GLESLLM_ERR_UNSUPPORTED,
                   "prefill attention: a head dimension of %u does not fit in %u bytes of shared "
                   "memory",
                   hd, max_shared);
}

/* The prefill kernel: a KV head's query heads a work group
 * (attn_prefill.comp), its tiles rows ((query, head) pairs: the GROUP heads
 * of each of BQ queries) x positions, the first of the list whose shared
 * memory fits. The most rows a K/V tile serves, not the most work groups a
 * multiprocessor, made it fastest; where its grid over a prefill of n_batch
 * tokens is under ATTN_GROUPS / 2 work groups, or a tile's rows hold under
 * 4096 values of Q, a work group a head ran faster, and the engine takes that
 * kernel unless s->grouped says (bench/RESULTS.md "Prefill attention"). */
static glesllm_status build_tiles(gpu_context *ctx, attn_kernels *k)
{
    const attn_shape *s = &k->s;
    uint32_t hd = s->head_dim, h2 = hd / 2, wg = ATTN_WG, group = s->n_head / s->n_head_kv;
    uint32_t max_shared = gpu_context_limits(ctx)->max_shared_bytes;
    static const uint32_t tiles[][2] = { { 64, 8 }, { 32, 8 }, { 16, 8 }, { 8, 8 }, { 4, 8 },
                                         { 1, 4 } };
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        uint32_t bq = tiles[i][0] / group ? tiles[i][0] / group : 1, bkv = tiles[i][1];
        uint32_t rows = bq * group;
        uint32_t bytes = 4 * (rows * 2 * h2 + 4 * bkv * (h2 + 1) + rows * (bkv + 1));
        if (bytes > max_shared || rows > wg)
            continue;
        uint64_t grid = (uint64_t)s->n_head_kv * ((s->n_batch + bq - 1) / bq);
        if (s->grouped == TUNE_OFF ||
            (s->grouped == TUNE_AUTO && (grid < ATTN_GROUPS / 2 || rows * hd < 4096)))
            return build_head_tiles(ctx, k);
        /* scores: SQ rows at a position a thread; output: LPR lanes a row */
        uint32_t sq = (rows + wg / bkv - 1) / (wg / bkv);
        char own[96], defs[384];
        snprintf(own, sizeof own, "BQ %u\nBKV %u\nSQ %u\nLPR %u", bq, bkv, sq,
                 lanes_a_row(rows, h2));
        kernel_defines(s, own, defs, sizeof defs);
        k->tile_q = bq;
        k->tiles_grouped = true;
        return gpu_program_build(ctx, "attn_prefill.comp", defs, &k->tiles);
    }
    return build_head_tiles(ctx, k);
}

glesllm_status attn_build(gpu_context *ctx, const attn_shape *s, attn_kernels *out)
{
    memset(out, 0, sizeof *out);
    if (!s->kv.page)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "attention: the cache's pages not given");
    out->s = *s;
    /* at most n_ctx / ATTN_CHUNK_MAX + 1 chunks of ATTN_CHUNK_MAX, or ATTN_GROUPS /
     * n_head + 1 smaller ones */
    out->max_chunks = s->n_ctx / ATTN_CHUNK_MAX + 1 + (ATTN_GROUPS + s->n_head - 1) / s->n_head + 1;
    char own[96], defs[384];
    snprintf(own, sizeof own, "CHUNK_MAX %u\nCHUNK_MIN %u\nONE_CHUNK %u%s", ATTN_CHUNK_MAX,
             ATTN_CHUNK_MIN, ATTN_ONE_CHUNK,
             gpu_context_caps(ctx)->subgroup ? "\nUSE_SUBGROUP 1" : "");
    kernel_defines(s, own, defs, sizeof defs);
    glesllm_status st = gpu_program_build(ctx, "attention.comp", defs, &out->step);
    if (st)
        return st;
    strncat(defs, "\nMULTI 1", sizeof defs - strlen(defs) - 1);
    if ((st = gpu_program_build(ctx, "attention.comp", defs, &out->few)) ||
        (st = build_tiles(ctx, out)))
        attn_destroy(out);
    return st;
}

void attn_destroy(attn_kernels *k)
{
    gpu_program_destroy(&k->step);
    gpu_program_destroy(&k->few);
    gpu_program_destroy(&k->tiles);
}

uint64_t attn_partials_floats(const attn_kernels *k, uint32_t n_queries)
{
    return (uint64_t)n_queries * k->s.n_head * k->max_chunks * (k->s.head_dim + 2ull);
}

uint32_t attn_counters(const attn_kernels *k, uint32_t n_queries)
{
    return n_queries * k->s.n_head;
}

/* The positions a query that sees len positions attends to, with a window
 * (0: none); as the kernels' first_seen. */
static uint32_t seen(uint32_t len, uint32_t window)
{
    return window && len > window ? window : len;
}

/* The chunks over len positions: *chunk positions each, *n_chunks of them.
 * Past ATTN_ONE_CHUNK positions the range is cut so that the heads make about
 * ATTN_GROUPS work groups, each chunk ATTN_CHUNK_MIN..ATTN_CHUNK_MAX positions. */
static glesllm_status chunks(const attn_kernels *k, uint32_t len, uint32_t *chunk,
                             uint32_t *n_chunks)
{
    *chunk = len;
    *n_chunks = 1;
    if (len > ATTN_ONE_CHUNK) {
        uint32_t want = (ATTN_GROUPS + k->s.n_head - 1) / k->s.n_head;
        uint32_t c = (len + want - 1) / want;
        *chunk = c < ATTN_CHUNK_MIN ? ATTN_CHUNK_MIN : c > ATTN_CHUNK_MAX ? ATTN_CHUNK_MAX : c;
        *n_chunks = (len + *chunk - 1) / *chunk;
    }
    if (*n_chunks > k->max_chunks)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "attention: %u chunks, room for %u",
                       *n_chunks, k->max_chunks);
    return GLESLLM_OK;
}

/* A dispatch over the cache and the activations (and, counted, the chunk
 * counters), a work group a head in x. */
static gpu_dispatch dispatch(const attn_kernels *k, const attn_io *io, const gpu_program *prog,
                             const uint32_t *params, uint32_t n_params, bool counted)
{
    gpu_dispatch d = { 0 };
    d.prog = prog;
    d.bindings[0] = (gpu_binding){ 0, io->cache, 0, 0, GPU_READ };
    d.bindings[1] = (gpu_binding){ 1, io->act, 0, 0, GPU_READ_WRITE };
    d.bindings[2] = (gpu_binding){ 2, io->count, 0, 0, GPU_READ_WRITE };
    d.n_bindings = counted ? 3 : 2;
    memcpy(d.params, params, n_params * sizeof *params);
    d.n_params = n_params;
    d.groups[0] = k->s.n_head;
    d.groups[1] = d.groups[2] = 1;
    return d;
}

glesllm_status attn_record_step(gpu_queue *q, const attn_kernels *k, const attn_io *io,
                                uint32_t len, uint32_t window, uint64_t out_off)
{
    uint32_t chunk, n_chunks;
    glesllm_status st = chunks(k, seen(len, window), &chunk, &n_chunks);
    if (st != GLESLLM_OK)
        return st;
    uint32_t p[] = { len, chunk, n_chunks, (uint32_t)out_off, (uint32_t)io->partials,
                     (uint32_t)io->k_base, (uint32_t)io->v_base, window, io->seq };
    gpu_dispatch d = dispatch(k, io, &k->step, p, 9, true);
    d.groups[1] = n_chunks;
    return gpu_queue_dispatch(q, &d);
}

glesllm_status attn_record_seqs(gpu_queue *q, const attn_kernels *k, const attn_io *io,
                                const uint32_t *tab, uint32_t n, uint32_t window, uint64_t q_off,
                                uint64_t out_off, uint32_t q_stride)
{
    /* `few`, each query its own length and rows (params 10 and on), in
     * dispatches of at most 16 queries (the params' room; the partials are
     * sized for at least that many: model/gpu_model_impl.h ATTN_FEW_N) */
    enum { MOST = 16 };
    for (uint32_t q0 = 0; q0 < n; q0 += MOST) {
        uint32_t cnt = n - q0 < MOST ? n - q0 : MOST, chunk, n_chunks = 1;
        for (uint32_t t = 0; t < cnt; t++) {
            uint32_t nc;
            glesllm_status st = chunks(k, seen((tab[q0 + t] & 0xffffffu) + 1, window), &chunk, &nc);
            if (st != GLESLLM_OK)
                return st;
            n_chunks = nc > n_chunks ? nc : n_chunks;
        }
        uint32_t want = (ATTN_GROUPS + k->s.n_head - 1) / k->s.n_head;
        uint32_t p[GPU_MAX_PARAMS] = { 0, want, k->max_chunks,
                                       (uint32_t)(out_off + (uint64_t)q0 * q_stride),
                                       (uint32_t)io->partials, (uint32_t)io->k_base,
                                       (uint32_t)io->v_base,
                                       (uint32_t)(q_off + (uint64_t)q0 * q_stride), q_stride,
                                       window, 1 /* entries */ };
        for (uint32_t t = 0; t < cnt; t++)
            p[11 + t] = tab[q0 + t];
        gpu_dispatch d = dispatch(k, io, &k->few, p, 11 + cnt, true);
        d.groups[1] = n_chunks;
        d.groups[2] = cnt;
        glesllm_status st = gpu_queue_dispatch(q, &d);
        if (st != GLESLLM_OK)
            return st;
    }
    return GLESLLM_OK;
}

glesllm_status attn_record_batch(gpu_queue *q, const attn_kernels *k, const attn_io *io,
                                 uint32_t pos0, uint32_t n, uint32_t window, bool few,
                                 uint64_t q_off, uint64_t out_off, uint32_t q_stride)
{
    if (few) {
        /* a work group a (query, head, chunk), each reading its positions' K
         * and V itself (bench/RESULTS.md "Verifying drafted tokens"); the
         * grid takes the most chunks of any query */
        uint32_t chunk, n_chunks = 1;
        for (uint32_t t = 0; t < n; t++) {
            uint32_t nc;
            glesllm_status st = chunks(k, seen(pos0 + t + 1, window), &chunk, &nc);
            if (st != GLESLLM_OK)
                return st;
            n_chunks = nc > n_chunks ? nc : n_chunks;
        }
        uint32_t want = (ATTN_GROUPS + k->s.n_head - 1) / k->s.n_head;
        uint32_t p[] = { pos0 + 1, want, k->max_chunks, (uint32_t)out_off,
                         (uint32_t)io->partials, (uint32_t)io->k_base, (uint32_t)io->v_base,
                         (uint32_t)q_off, q_stride, window, 0 /* one sequence: */, io->seq };
        gpu_dispatch d = dispatch(k, io, &k->few, p, 12, true);
        d.groups[1] = n_chunks;
        d.groups[2] = n;
        return gpu_queue_dispatch(q, &d);
    }
    uint32_t p[] = { n, pos0, (uint32_t)q_off, (uint32_t)out_off, q_stride,
                     (uint32_t)io->k_base, (uint32_t)io->v_base, window, io->seq };
    gpu_dispatch d = dispatch(k, io, &k->tiles, p, 9, false);
    if (k->tiles_grouped)
        d.groups[0] = k->s.n_head_kv; /* (a work group takes a KV head's query heads) */
    d.groups[1] = (n + k->tile_q - 1) / k->tile_q;
    return gpu_queue_dispatch(q, &d);
}
