/* The KV page pool: one allocation carved into fixed-size pages; a free list and reference counts
 * (prompt pages are shared by the n samples of a prompt until one of them writes to a shared page). */
#include "infer/infer.h"
#include <string.h>

size_t vc_kv_page_bytes(int64_t page_tokens, int64_t n_layer, int64_t row, int bf16) {
    return (size_t)page_tokens * (size_t)n_layer * (size_t)row * (bf16 ? 2 : sizeof(float));
}

vc_status vc_kv_pool_init(vc_kv_pool *p, int64_t n_pages, int64_t page_tokens, int64_t n_layer, int64_t row, int bf16) {
    memset(p, 0, sizeof *p);
    p->bf16 = bf16;
    p->n_pages = n_pages;
    p->page_tokens = page_tokens;
    p->n_layer = n_layer;
    p->row = row;
    size_t bytes = vc_kv_page_bytes(page_tokens, n_layer, row, bf16) * (size_t)n_pages;
    /* not zeroed: attention reads only the tokens written (and untouched host pages cost nothing) */
    p->be = vc_be();
    p->mem = p->be->alloc(bytes ? bytes : 64);
    p->refc = vc_calloc((size_t)n_pages + 1, sizeof *p->refc);
    p->free_list = vc_malloc(((size_t)n_pages + 1) * sizeof *p->free_list);
    if (!p->mem || !p->refc || !p->free_list) {
        vc_kv_pool_release(p);
        return vc_fail(VC_ERR_NOMEM, "kv pool: cannot allocate %lld pages (%.1f MB)", (long long)n_pages, bytes / 1e6);
    }
    /* pages are handed out lowest id first */
    for (int64_t i = 0; i < n_pages; i++) p->free_list[i] = (int32_t)(n_pages - 1 - i);
    p->n_free = n_pages;
    return VC_OK;
}

void vc_kv_pool_release(vc_kv_pool *p) {
    if (p->mem) p->be->free(p->mem);
    free(p->refc);
    free(p->free_list);
    memset(p, 0, sizeof *p);
}

int32_t vc_kv_page_alloc(vc_kv_pool *p) {
    if (!p->n_free) return -1;
    int32_t pg = p->free_list[--p->n_free];
    p->refc[pg] = 1;
    if (p->n_pages - p->n_free > p->peak_used) p->peak_used = p->n_pages - p->n_free;
    return pg;
}

void vc_kv_page_ref(vc_kv_pool *p, int32_t page) { p->refc[page]++; }

void vc_kv_page_unref(vc_kv_pool *p, int32_t page) {
    if (--p->refc[page] == 0) p->free_list[p->n_free++] = page;
}

void vc_kv_page_copy(vc_kv_pool *p, int32_t dst, int32_t src, int64_t n_tokens) {
    size_t el = p->bf16 ? 2 : sizeof(float), layer = (size_t)(p->page_tokens * p->row) * el;
    char *m = (char *)p->mem;
    for (int64_t l = 0; l < p->n_layer; l++)
        p->be->d2d(m + ((size_t)dst * (size_t)p->n_layer + (size_t)l) * layer,
                   m + ((size_t)src * (size_t)p->n_layer + (size_t)l) * layer, (size_t)(n_tokens * p->row) * el);
}

int64_t vc_kv_pool_used(const vc_kv_pool *p) { return p->n_pages - p->n_free; }
