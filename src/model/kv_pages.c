/* The KV cache's pages (ops/kv_layout.h): every attention layer's K and V
 * are a pool of pages, and each sequence has a row of the page table that
 * names its pages in order of position. The same page number holds the same
 * positions in every layer, so one table serves all of them. Pages are
 * taken as a sequence's passes reach them, shared between sequences where
 * one starts as another (gpu_model_seq_copy) and copied before a sequence
 * writes into a shared one, and given back when a sequence is truncated. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/gpu_model_impl.h"

static uint32_t *tab_row(gpu_model *gm, uint32_t seq) { return gm->kv_tab + (size_t)seq * gm->kvl.pps; }

glesllm_status gm_kv_init(gpu_model *gm, uint32_t page, uint64_t positions)
{
    gm->kvl.page = page;
    gm->kvl.pps = (gm->n_ctx + page - 1) / page;
    uint64_t pages = positions ? (positions + page - 1) / page : (uint64_t)gm->n_seq * gm->kvl.pps;
    if (!pages || pages * page > (1ull << 31))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "a KV cache of %llu positions: 1 to 2^31 (pages of %u)",
                       (unsigned long long)positions, page);
    gm->kv_pages = (uint32_t)pages;
    size_t entries = (size_t)gm->n_seq * gm->kvl.pps;
    gm->kv_tab = malloc(entries * sizeof *gm->kv_tab);
    gm->kv_ref = calloc(gm->kv_pages, sizeof *gm->kv_ref);
    gm->kv_free = malloc((size_t)gm->kv_pages * sizeof *gm->kv_free);
    if (!gm->kv_tab || !gm->kv_ref || !gm->kv_free)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory for the KV cache's page table");
    for (size_t i = 0; i < entries; i++)
        gm->kv_tab[i] = KV_NO_PAGE;
    /* (taken from the end: page 0 first, so that one sequence's pages are
     * the pool in order) */
    for (uint32_t i = 0; i < gm->kv_pages; i++)
        gm->kv_free[i] = gm->kv_pages - 1 - i;
    gm->kv_n_free = gm->kv_pages;
    return GLESLLM_OK;
}

void gm_kv_destroy(gpu_model *gm)
{
    free(gm->kv_tab);
    free(gm->kv_ref);
    free(gm->kv_free);
}

uint32_t gm_kv_row(const gpu_model *gm, uint32_t seq, uint32_t pos)
{
    uint32_t page = gm->kv_tab[(size_t)seq * gm->kvl.pps + pos / gm->kvl.page];
    return page * gm->kvl.page + pos % gm->kvl.page;
}

/* Entries [first, end) of seq's row to the table in act. */
static glesllm_status upload(gpu_model *gm, uint32_t seq, uint32_t first, uint32_t end)
{
    if (first >= end)
        return GLESLLM_OK;
    size_t at = (size_t)seq * gm->kvl.pps + first;
    return gpu_buffer_write(&gm->act, at * 4, gm->kv_tab + at, (size_t)(end - first) * 4);
}

static void give_back(gpu_model *gm, uint32_t page)
{
    if (--gm->kv_ref[page] == 0)
        gm->kv_free[gm->kv_n_free++] = page;
}

/* A page's K and V rows, in every attention layer, copied to another. */
static glesllm_status copy_page(gpu_model *gm, uint32_t from, uint32_t to)
{
    const model_hparams *hp = &gm->m->hp;
    uint64_t row = (uint64_t)hp->n_head_kv * hp->head_dim * 2; /* bytes: F16 */
    uint64_t bytes = row * gm->kvl.page, s = from * bytes, d = to * bytes;
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; !st && i < hp->n_layer; i++) {
        if (gm->m->layers[i].recurrent)
            continue;
        gpu_buffer *b = &gm->layers[i].cache;
        st = gpu_buffer_copy_within(b, (size_t)(gm->k_base * 4 + s), (size_t)(gm->k_base * 4 + d),
                                    (size_t)bytes);
        if (!st)
            st = gpu_buffer_copy_within(b, (size_t)(gm->v_base * 4 + s),
                                        (size_t)(gm->v_base * 4 + d), (size_t)bytes);
    }
    return st;
}

void gm_kv_drop(gpu_model *gm, uint32_t seq, uint32_t keep)
{
    uint32_t *row = tab_row(gm, seq);
    /* (the table in act keeps the old entries: no kernel reads a position
     * past a sequence's length, and a page taken again is written there) */
    for (uint32_t i = (keep + gm->kvl.page - 1) / gm->kvl.page; i < gm->kvl.pps; i++)
        if (row[i] != KV_NO_PAGE) {
            give_back(gm, row[i]);
            row[i] = KV_NO_PAGE;
        }
}

glesllm_status gm_kv_take(gpu_model *gm, uint32_t seq, uint32_t pos, uint32_t n)
{
    if (!gm->kv_tab || !n)
        return GLESLLM_OK;
    uint32_t *row = tab_row(gm, seq), P = gm->kvl.page;
    uint32_t first = pos / P, last = (pos + n - 1) / P;
    uint32_t need = 0;
    for (uint32_t i = first; i <= last; i++)
        need += row[i] == KV_NO_PAGE || gm->kv_ref[row[i]] > 1;
    if (need > gm->kv_n_free)
        return err_set(GLESLLM_ERR_KV_FULL,
                       "the KV cache is full: positions %u..%u of sequence %u need %u more pages "
                       "of %u positions, %u of the %u are free; free a sequence or make the cache "
                       "larger",
                       pos, pos + n - 1, seq, need, P, gm->kv_n_free, gm->kv_pages);
    /* (the positions past this pass's are no longer the sequence's) */
    gm_kv_drop(gm, seq, (last + 1) * P);
    uint32_t lo = last + 1, hi = first;
    for (uint32_t i = first; i <= last; i++) {
        uint32_t old = row[i];
        if (old != KV_NO_PAGE && gm->kv_ref[old] == 1)
            continue;
        uint32_t page = gm->kv_free[--gm->kv_n_free];
        gm->kv_ref[page] = 1;
        if (old != KV_NO_PAGE) { /* shared: this sequence's own copy first */
            glesllm_status st = copy_page(gm, old, page);
            if (st) {
                gm->kv_ref[page] = 0;
                gm->kv_free[gm->kv_n_free++] = page;
                return st;
            }
            give_back(gm, old);
        }
        row[i] = page;
        lo = i < lo ? i : lo;
        hi = i + 1 > hi ? i + 1 : hi;
    }
    return upload(gm, seq, lo, hi);
}

glesllm_status gm_kv_share(gpu_model *gm, uint32_t src, uint32_t dst, uint32_t n)
{
    gm_kv_drop(gm, dst, 0);
    uint32_t *s = tab_row(gm, src), *d = tab_row(gm, dst);
    uint32_t pages = (n + gm->kvl.page - 1) / gm->kvl.page;
    for (uint32_t i = 0; i < pages; i++) {
        d[i] = s[i];
        gm->kv_ref[d[i]]++;
    }
    return upload(gm, dst, 0, pages);
}

uint32_t gpu_model_kv_pages_of(const gpu_model *gm, const uint32_t *seqs, uint32_t n)
{
    if (!gm->kv_tab)
        return 0;
    unsigned char *seen = calloc(gm->kv_pages, 1);
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
    /* (a model without attention: no pages) */
    *page = gm->kvl.page;
    *total = gm->kv_pages;
    *used = gm->kv_pages - gm->kv_n_free;
}
