/* ops/: the KV cache's pages as the kernels see them (glsl/common.glsl
 * KV_ROW): a pool of pages of `page` positions, and the page table at the
 * start of the activations, `pps` entries a sequence (its pages in order of
 * position). A position's K and V are in its page's row page * `page` +
 * position % `page` of a layer's K and V. */
#ifndef GLESLLM_OPS_KV_LAYOUT_H
#define GLESLLM_OPS_KV_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct kv_layout {
    uint32_t page; /* positions a page, a power of two (0: no pages) */
    uint32_t pps;  /* pages a sequence at most: the table's entries a sequence */
} kv_layout;

/* The entry "none" of the table (a page not taken yet). */
#define KV_NO_PAGE 0xffffffffu

/* The ring of sliding-window layers (model/kv_pages.c): what a sequence's
 * ring holds before a pass of at most n_pass tokens (the widest window, the
 * prefill attention's K/V tiles that start up to KV_WINDOW_SLACK before it,
 * and one pass more for a rollback), and its pages: those and the pass's
 * own, not starting on a page's first position. */
#define KV_WINDOW_SLACK 32u
static inline uint32_t kv_ring_hold(uint32_t window, uint32_t n_pass)
{
    return window + KV_WINDOW_SLACK + n_pass;
}
static inline uint64_t kv_ring_pages(uint32_t window, uint32_t n_pass, uint32_t page)
{
    return ((uint64_t)kv_ring_hold(window, n_pass) + n_pass + page - 1) / page + 1;
}

/* Its defines for a kernel's build ("" for no pages). */
static inline void kv_layout_defines(const kv_layout *l, char *buf, size_t n)
{
    buf[0] = 0;
    if (l && l->page)
        snprintf(buf, n, "\nKV_PAGE %u\nKV_PPS %u", l->page, l->pps);
}

#endif
