/* The KV page pool: one allocation carved into fixed-size pages; a free list and reference counts
 * (prompt pages are shared by the n samples of a prompt until one of them writes to a shared page), and
 * the prefix cache of full pages (infer.h). */
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
    free(p->c_parent);
    free(p->c_tok);
    free(p->c_hash);
    free(p->c_child);
    free(p->c_next);
    free(p->c_bucket);
    free(p->lru_prev);
    free(p->lru_next);
    memset(p, 0, sizeof *p);
}

/* ---- the prefix cache ---- */
static uint64_t page_hash(const vc_kv_pool *p, int32_t parent, const int32_t *tok) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)(parent + 2) * 0xD6E8FEB86659FD93ull;
    for (int64_t i = 0; i < p->page_tokens; i++) {
        h ^= (uint64_t)(uint32_t)tok[i];
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

static int evictable(const vc_kv_pool *p, int32_t pg) {
    return p->c_parent && p->c_parent[pg] != -2 && p->refc[pg] == 1 && p->c_child[pg] == 0;
}

static void lru_unlink(vc_kv_pool *p, int32_t pg) {
    int32_t a = p->lru_prev[pg], b = p->lru_next[pg];
    if (a < -1) return; /* not listed */
    if (a >= 0) p->lru_next[a] = b;
    else p->lru_head = b;
    if (b >= 0) p->lru_prev[b] = a;
    else p->lru_tail = a;
    p->lru_prev[pg] = p->lru_next[pg] = -2;
    p->n_lru--;
}

/* lists pg (newest) when it became evictable, unlists it when it stopped being so */
static void lru_update(vc_kv_pool *p, int32_t pg) {
    if (!p->c_parent) return;
    int listed = p->lru_prev[pg] >= -1;
    if (evictable(p, pg) == listed) return;
    if (listed) {
        lru_unlink(p, pg);
        return;
    }
    p->lru_prev[pg] = p->lru_tail;
    p->lru_next[pg] = -1;
    if (p->lru_tail >= 0) p->lru_next[p->lru_tail] = pg;
    else p->lru_head = pg;
    p->lru_tail = pg;
    p->n_lru++;
}

vc_status vc_kv_cache_enable(vc_kv_pool *p) {
    size_t n = (size_t)p->n_pages + 1;
    p->n_buckets = 1;
    while (p->n_buckets < p->n_pages) p->n_buckets <<= 1;
    p->c_parent = vc_malloc(n * sizeof *p->c_parent);
    p->c_tok = vc_malloc(n * (size_t)p->page_tokens * sizeof *p->c_tok);
    p->c_hash = vc_malloc(n * sizeof *p->c_hash);
    p->c_child = vc_calloc(n, sizeof *p->c_child);
    p->c_next = vc_malloc(n * sizeof *p->c_next);
    p->c_bucket = vc_malloc((size_t)p->n_buckets * sizeof *p->c_bucket);
    p->lru_prev = vc_malloc(n * sizeof *p->lru_prev);
    p->lru_next = vc_malloc(n * sizeof *p->lru_next);
    if (!p->c_parent || !p->c_tok || !p->c_hash || !p->c_child || !p->c_next || !p->c_bucket || !p->lru_prev ||
        !p->lru_next)
        return vc_fail(VC_ERR_NOMEM, "kv pool: no memory for the prefix cache of %lld pages", (long long)p->n_pages);
    for (size_t i = 0; i < n; i++) p->c_parent[i] = -2, p->lru_prev[i] = p->lru_next[i] = -2;
    for (int64_t i = 0; i < p->n_buckets; i++) p->c_bucket[i] = -1;
    p->lru_head = p->lru_tail = -1;
    return VC_OK;
}

static int32_t find(const vc_kv_pool *p, int32_t parent, const int32_t *tok, uint64_t h) {
    for (int32_t q = p->c_bucket[h & (uint64_t)(p->n_buckets - 1)]; q >= 0; q = p->c_next[q])
        if (p->c_hash[q] == h && p->c_parent[q] == parent &&
            !memcmp(p->c_tok + (size_t)q * (size_t)p->page_tokens, tok, sizeof *tok * (size_t)p->page_tokens))
            return q;
    return -1;
}

int32_t vc_kv_cache_take(vc_kv_pool *p, int32_t parent, const int32_t *tok) {
    if (!p->c_parent) return -1;
    int32_t q = find(p, parent, tok, page_hash(p, parent, tok));
    if (q >= 0) {
        p->refc[q]++;
        lru_update(p, q);
    }
    return q;
}

int32_t vc_kv_cache_put(vc_kv_pool *p, int32_t parent, const int32_t *tok, int32_t page) {
    if (!p->c_parent) return page;
    uint64_t h = page_hash(p, parent, tok);
    int32_t q = find(p, parent, tok, h);
    if (q >= 0 || p->c_parent[page] != -2) return q >= 0 ? q : page;
    p->c_parent[page] = parent;
    p->c_hash[page] = h;
    memcpy(p->c_tok + (size_t)page * (size_t)p->page_tokens, tok, sizeof *tok * (size_t)p->page_tokens);
    size_t b = h & (uint64_t)(p->n_buckets - 1);
    p->c_next[page] = p->c_bucket[b];
    p->c_bucket[b] = page;
    p->refc[page]++; /* the cache's reference */
    p->n_cached++;
    if (parent >= 0) {
        p->c_child[parent]++;
        lru_update(p, parent);
    }
    lru_update(p, page);
    return page;
}

/* removes evictable page pg from the cache; it is then free (refc 0, on no list) */
static void evict(vc_kv_pool *p, int32_t pg) {
    lru_unlink(p, pg);
    size_t b = p->c_hash[pg] & (uint64_t)(p->n_buckets - 1);
    int32_t *at = &p->c_bucket[b];
    while (*at != pg) at = &p->c_next[*at];
    *at = p->c_next[pg];
    int32_t parent = p->c_parent[pg];
    p->c_parent[pg] = -2;
    p->refc[pg] = 0;
    p->n_cached--;
    if (parent >= 0) {
        p->c_child[parent]--;
        lru_update(p, parent);
    }
}

void vc_kv_cache_clear(vc_kv_pool *p) {
    while (p->c_parent && p->lru_head >= 0) {
        int32_t pg = p->lru_head;
        evict(p, pg);
        p->free_list[p->n_free++] = pg;
    }
}

int32_t vc_kv_page_alloc(vc_kv_pool *p) {
    int32_t pg;
    if (p->n_free) pg = p->free_list[--p->n_free];
    else if (p->c_parent && p->lru_head >= 0) evict(p, pg = p->lru_head); /* the least recently used cached page */
    else return -1;
    p->refc[pg] = 1;
    if (vc_kv_pool_used(p) > p->peak_used) p->peak_used = vc_kv_pool_used(p);
    return pg;
}

void vc_kv_page_ref(vc_kv_pool *p, int32_t page) {
    p->refc[page]++;
    lru_update(p, page);
}

void vc_kv_page_unref(vc_kv_pool *p, int32_t page) {
    if (--p->refc[page] == 0) p->free_list[p->n_free++] = page;
    else lru_update(p, page);
}

void vc_kv_page_copy(vc_kv_pool *p, int32_t dst, int32_t src, int64_t n_tokens) {
    size_t el = p->bf16 ? 2 : sizeof(float), layer = (size_t)(p->page_tokens * p->row) * el;
    char *m = (char *)p->mem;
    for (int64_t l = 0; l < p->n_layer; l++)
        p->be->d2d(m + ((size_t)dst * (size_t)p->n_layer + (size_t)l) * layer,
                   m + ((size_t)src * (size_t)p->n_layer + (size_t)l) * layer, (size_t)(n_tokens * p->row) * el);
}

int64_t vc_kv_pool_used(const vc_kv_pool *p) { return p->n_pages - p->n_free - p->n_lru; }
