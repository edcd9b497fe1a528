/* The KV cache's pages (ops/kv_layout.h): every attention layer's K and V
 * are a pool of pages, and each sequence has a row of the page table that
 * names its pages in order of position. The same page number holds the same
 * positions in every layer of a pool, so one row serves all of them. Pages
 * are taken as a sequence's passes reach them, shared between sequences
 * where one starts as another (gpu_model_seq_copy) and copied before a
 * sequence writes into a shared one, and given back when a sequence is
 * truncated.
 *
 * Sliding-window layers have a pool of their own (the ring) where that
 * saves memory: their rows of the table follow the full layers' (sequence
 * seq's is row n_seq + seq), and a pass gives back the pages that lie wholly
 * before its first query's window, the prefill tiles' slack and one pass
 * more kept for a rollback (kv_hold). A sequence truncated further back has
 * lost K/V that its next pass needs; gm_kv_window_ready runs its tokens
 * again from the start. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/gpu_model_impl.h"

static uint32_t *tab_row(gpu_model *gm, uint32_t row) { return gm->kv_tab + (size_t)row * gm->kvl.pps; }

static glesllm_status pool_init(kv_pool *p, uint64_t pages)
{
    p->pages = (uint32_t)pages;
    p->ref = calloc(p->pages, sizeof *p->ref);
    p->free = malloc((size_t)p->pages * sizeof *p->free);
    if (!p->ref || !p->free)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the KV cache's page table");
    /* (taken from the end: page 0 first, so that one sequence's pages are
     * the pool in order) */
    for (uint32_t i = 0; i < p->pages; i++)
        p->free[i] = p->pages - 1 - i;
    p->n_free = p->pages;
    return GLESLLM_OK;
}

/* The ring (ops/kv_layout.h kv_ring_pages), where it is smaller than a
 * full row and the batches' entries (seq << 24) can name its rows. */
static void ring_choose(gpu_model *gm, uint64_t pool0)
{
    const model_hparams *hp = &gm->m->hp;
    uint32_t w = 0;
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        uint32_t lw = gm->m->layers[i].recurrent ? 0 : model_layer_window(hp, i);
        w = lw > w ? lw : w;
    }
    gm->kv_window = w;
    gm->kv_pass = gm->n_batch > gm->n_small ? gm->n_batch : gm->n_small;
    gm->kv_hold = kv_ring_hold(w, gm->kv_pass);
    uint64_t ring = kv_ring_pages(w, gm->kv_pass, gm->kvl.page);
    if (!w || ring >= gm->kvl.pps || 2 * gm->n_seq > 256)
        return;
    gm->kv_ring = true;
    gm->kv_rows = 2 * gm->n_seq;
    gm->kvp[1].pages = (uint32_t)(ring * gm->n_seq < pool0 ? ring * gm->n_seq : pool0);
}

glesllm_status gm_kv_init(gpu_model *gm, uint32_t page, uint64_t positions)
{
    gm->kvl.page = page;
    gm->kvl.pps = (gm->n_ctx + page - 1) / page;
    uint64_t pages = positions ? (positions + page - 1) / page : (uint64_t)gm->n_seq * gm->kvl.pps;
    if (!pages || pages * page > (1ull << 31))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "a KV cache of %llu positions: 1 to 2^31 (pages of %u)",
                       (unsigned long long)positions, page);
    gm->kv_rows = gm->n_seq;
    ring_choose(gm, pages);
    size_t entries = (size_t)gm->kv_rows * gm->kvl.pps;
    gm->kv_tab = malloc(entries * sizeof *gm->kv_tab);
    if (!gm->kv_tab)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the KV cache's page table");
    for (size_t i = 0; i < entries; i++)
        gm->kv_tab[i] = KV_NO_PAGE;
    glesllm_status st = pool_init(&gm->kvp[0], pages);
    if (!st && gm->kv_ring)
        st = pool_init(&gm->kvp[1], gm->kvp[1].pages);
    return st;
}

void gm_kv_destroy(gpu_model *gm)
{
    free(gm->kv_tab);
    for (int i = 0; i < 2; i++) {
        free(gm->kvp[i].ref);
        free(gm->kvp[i].free);
    }
}

uint32_t gm_kv_row(const gpu_model *gm, uint32_t row, uint32_t pos)
{
    uint32_t page = gm->kv_tab[(size_t)row * gm->kvl.pps + pos / gm->kvl.page];
    return page * gm->kvl.page + pos % gm->kvl.page;
}

/* Entries [first, end) of a row to the table in act. */
static glesllm_status upload(gpu_model *gm, uint32_t row, uint32_t first, uint32_t end)
{
    if (first >= end)
        return GLESLLM_OK;
    size_t at = (size_t)row * gm->kvl.pps + first;
    return gpu_buffer_write(&gm->act, at * 4, gm->kv_tab + at, (size_t)(end - first) * 4);
}

static void give_back(kv_pool *p, uint32_t page)
{
    if (--p->ref[page] == 0)
        p->free[p->n_free++] = page;
}

/* The pool of a row of the table. */
static kv_pool *pool_of(gpu_model *gm, uint32_t row) { return &gm->kvp[row >= gm->n_seq]; }

/* A page's K and V rows, in every attention layer of a pool, copied to another. */
static glesllm_status copy_page(gpu_model *gm, bool ring, uint32_t from, uint32_t to)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t row = (uint64_t)hp->n_head_kv * hp->head_dim * 2; /* bytes: F16 */
    uint64_t bytes = row * gm->kvl.page, s = from * bytes, d = to * bytes;
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; !st && i < hp->n_layer; i++) {
        const gpu_layer *l = &gm->layers[i];
        if (gm->m->layers[i].recurrent || l->ring != ring)
            continue;
        gpu_buffer *b = &gm->layers[i].cache;
        st = gpu_buffer_copy_within(b, (size_t)(gm->k_base * 4 + s), (size_t)(gm->k_base * 4 + d),
                                    (size_t)bytes);
        if (!st)
            st = gpu_buffer_copy_within(b, (size_t)(l->v_base * 4 + s),
                                        (size_t)(l->v_base * 4 + d), (size_t)bytes);
    }
    return st;
}

/* A row's pages [first, end) given back. */
static void drop_pages(gpu_model *gm, uint32_t r, uint32_t first, uint32_t end)
{
    uint32_t *row = tab_row(gm, r);
    kv_pool *pool = pool_of(gm, r);
    /* (the table in act keeps the old entries: no kernel reads a position
     * it does not hold, and a page taken again is written there) */
    for (uint32_t i = first; i < end && i < gm->kvl.pps; i++)
        if (row[i] != KV_NO_PAGE) {
            give_back(pool, row[i]);
            row[i] = KV_NO_PAGE;
        }
}

void gm_kv_drop(gpu_model *gm, uint32_t seq, uint32_t keep)
{
    uint32_t first = (keep + gm->kvl.page - 1) / gm->kvl.page;
    drop_pages(gm, seq, first, gm->kvl.pps);
    if (gm->kv_ring)
        drop_pages(gm, gm->n_seq + seq, first, gm->kvl.pps);
}

/* The pages [first, last] of a row: how many it must take (none yet, or
 * shared), and how many it frees by giving back those before `below`. */
static void row_need(gpu_model *gm, uint32_t r, uint32_t first, uint32_t last, uint32_t below,
                     uint32_t *need, uint32_t *freed)
{
    const uint32_t *row = tab_row(gm, r);
    const kv_pool *pool = pool_of(gm, r);
    *need = *freed = 0;
    for (uint32_t i = first; i <= last; i++)
        *need += row[i] == KV_NO_PAGE || pool->ref[row[i]] > 1;
    for (uint32_t i = 0; i < below; i++)
        *freed += row[i] != KV_NO_PAGE && pool->ref[row[i]] == 1;
}

static glesllm_status take_row(gpu_model *gm, uint32_t r, uint32_t first, uint32_t last,
                               uint32_t below)
{
    uint32_t *row = tab_row(gm, r);
    kv_pool *pool = pool_of(gm, r);
    drop_pages(gm, r, 0, below); /* (before the window and the margin) */
    /* (the positions past this pass's are no longer the sequence's) */
    drop_pages(gm, r, last + 1, gm->kvl.pps);
    uint32_t lo = last + 1, hi = first;
    for (uint32_t i = first; i <= last; i++) {
        uint32_t old = row[i];
        if (old != KV_NO_PAGE && pool->ref[old] == 1)
            continue;
        uint32_t page = pool->free[--pool->n_free];
        pool->ref[page] = 1;
        if (old != KV_NO_PAGE) { /* shared: this sequence's own copy first */
            glesllm_status st = copy_page(gm, r >= gm->n_seq, old, page);
            if (st) {
                pool->ref[page] = 0;
                pool->free[pool->n_free++] = page;
                return st;
            }
            give_back(pool, old);
        }
        row[i] = page;
        lo = i < lo ? i : lo;
        hi = i + 1 > hi ? i + 1 : hi;
    }
    return upload(gm, r, lo, hi);
}

glesllm_status gm_kv_take(gpu_model *gm, uint32_t seq, uint32_t pos, uint32_t n)
{
    if (!gm->kv_tab || !n)
        return GLESLLM_OK;
    uint32_t P = gm->kvl.page, first = pos / P, last = (pos + n - 1) / P;
    /* the ring: the positions from kv_hold before the pass (before the
     * last position of a longer write, which no query reads: what a
     * session file's ring holds for certain) */
    uint32_t wfirst = first, below = 0;
    if (gm->kv_ring) {
        uint32_t start = n > gm->kv_pass ? pos + n - 1 : pos;
        uint32_t lo = start > gm->kv_hold ? start - gm->kv_hold : 0;
        below = lo / P;
        wfirst = lo > pos ? lo / P : first;
    }
    uint32_t need, freed, wneed = 0, wfreed = 0;
    row_need(gm, seq, first, last, 0, &need, &freed);
    if (gm->kv_ring)
        row_need(gm, gm->n_seq + seq, wfirst, last, below, &wneed, &wfreed);
    if (need > gm->kvp[0].n_free || wneed > gm->kvp[1].n_free + wfreed) {
        bool w = need <= gm->kvp[0].n_free;
        const kv_pool *pool = &gm->kvp[w];
        return err_set(GLESLLM_ERR_KV_FULL,
                       "the KV cache is full: positions %u..%u of sequence %u need %u more pages "
                       "of %u positions%s, %u of the %u are free; free a sequence or make the "
                       "cache larger",
                       pos, pos + n - 1, seq, w ? wneed : need, P,
                       w ? " in the sliding-window layers" : "", pool->n_free + (w ? wfreed : 0),
                       pool->pages);
    }
    glesllm_status st = take_row(gm, seq, first, last, 0);
    if (!st && gm->kv_ring)
        st = take_row(gm, gm->n_seq + seq, wfirst, last, below);
    return st;
}

glesllm_status gm_kv_share(gpu_model *gm, uint32_t src, uint32_t dst, uint32_t n)
{
    gm_kv_drop(gm, dst, 0);
    uint32_t pages = (n + gm->kvl.page - 1) / gm->kvl.page;
    glesllm_status st = GLESLLM_OK;
    for (uint32_t w = 0; !st && w <= (uint32_t)gm->kv_ring; w++) {
        uint32_t rs = w * gm->n_seq + src, rd = w * gm->n_seq + dst;
        uint32_t *s = tab_row(gm, rs), *d = tab_row(gm, rd);
        kv_pool *pool = pool_of(gm, rs);
        /* (the ring's pages the source still holds) */
        for (uint32_t i = 0; i < pages; i++)
            if ((d[i] = s[i]) != KV_NO_PAGE)
                pool->ref[d[i]]++;
        st = upload(gm, rd, 0, pages);
    }
    return st;
}

bool gm_kv_window_held(const gpu_model *gm, uint32_t seq, uint32_t pos)
{
    if (!gm->kv_ring || !pos)
        return true;
    uint32_t P = gm->kvl.page;
    const uint32_t *row = gm->kv_tab + (size_t)(gm->n_seq + seq) * gm->kvl.pps;
    for (uint32_t i = gpu_model_ring_reads(gm, pos) / P; i <= (pos - 1) / P; i++)
        if (row[i] == KV_NO_PAGE)
            return false;
    return true;
}

bool gm_kv_layer_ring(const gpu_model *gm, uint32_t layer)
{
    return gm->kv_ring && !gm->m->layers[layer].recurrent &&
           model_layer_window(&gm->m->hp, layer) > 0;
}

uint32_t gpu_model_kv_pages_of(const gpu_model *gm, const uint32_t *seqs, uint32_t n)
{
    if (!gm->kv_tab)
        return 0;
    unsigned char *seen = calloc(gm->kvp[0].pages, 1);
    uint32_t count = 0;
    for (uint32_t i = 0; seen && i < n; i++) {
        const uint32_t *row = gm->kv_tab + (size_t)seqs[i] * gm->kvl.pps;
        for (uint32_t j = 0; seqs[i] < gm->n_seq && j < gm->kvl.pps; j++)
            if (row[j] != KV_NO_PAGE && !seen[row[j]]) {
                seen[row[j]] = 1;
                count++;
            }
    }
    free(seen);
    return count;
}

void gpu_model_kv_pages(const gpu_model *gm, uint32_t *page, uint32_t *used, uint32_t *total)
{
    /* (a model without attention: no pages; the ring's are the window
     * layers' own, sized so that they run out no sooner than these) */
    *page = gm->kvl.page;
    *total = gm->kvp[0].pages;
    *used = gm->kvp[0].pages - gm->kvp[0].n_free;
}

void gpu_model_kv_ring(const gpu_model *gm, uint32_t *pages, uint32_t *used)
{
    *pages = gm->kv_ring ? gm->kvp[1].pages : 0;
    *used = gm->kv_ring ? gm->kvp[1].pages - gm->kvp[1].n_free : 0;
}

glesllm_status gpu_model_ring_held(gpu_model *gm, uint32_t *from)
{
    *from = 0;
    glesllm_status st = gm->kv_ring ? gm_kv_window_ready(gm, gm->n_past) : GLESLLM_OK;
    if (st || !gm->kv_ring)
        return st;
    const uint32_t *row = tab_row(gm, gm->n_seq + gm->seq);
    uint32_t i = 0;
    while (i < gm->kvl.pps && row[i] == KV_NO_PAGE && (i + 1) * gm->kvl.page < gm->n_past)
        i++;
    *from = i * gm->kvl.page;
    return GLESLLM_OK;
}

uint32_t gpu_model_ring_reads(const gpu_model *gm, uint32_t n)
{
    /* (the first page a window's query at n reads, and the prefill tiles'
     * slack before it) */
    uint32_t back = gm->kv_window + KV_WINDOW_SLACK;
    if (!gm->kv_ring || n <= back)
        return 0;
    return (n - back) / gm->kvl.page * gm->kvl.page;
}

void gpu_model_ring_forget(gpu_model *gm, uint32_t from)
{
    /* (a page that starts before it, whole) */
    if (gm->kv_ring)
        drop_pages(gm, gm->n_seq + gm->seq, 0, (from + gm->kvl.page - 1) / gm->kvl.page);
}
