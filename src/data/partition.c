/* Balanced partitions of sequences (Karmarkar-Karp largest differencing, as verl's
 * seqlen_balancing.karmarkar_karp) and token-budget micro-batches. */
#include "verlc/data.h"
#include <stdlib.h>
#include <string.h>

typedef struct kk_item {
    uint32_t idx;
    int64_t val;
} kk_item;

typedef struct kk_set {
    int64_t sum;
    size_t n, cap;
    kk_item *items;
} kk_set;

typedef struct kk_state {
    kk_set *sets; /* [k], kept in decreasing order */
} kk_state;

/* verl's Set.__lt__: by sum, then item count, then the (idx, val) item lists lexicographically. */
static int set_cmp(const kk_set *a, const kk_set *b) {
    if (a->sum != b->sum) return a->sum < b->sum ? -1 : 1;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (size_t i = 0; i < a->n; i++) {
        if (a->items[i].idx != b->items[i].idx) return a->items[i].idx < b->items[i].idx ? -1 : 1;
        if (a->items[i].val != b->items[i].val) return a->items[i].val < b->items[i].val ? -1 : 1;
    }
    return 0;
}

static int set_add(kk_set *s, uint32_t idx, int64_t val) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        kk_item *p = realloc(s->items, cap * sizeof *p);
        if (!p) return 0;
        s->items = p;
        s->cap = cap;
    }
    s->items[s->n++] = (kk_item){ idx, val };
    s->sum += val;
    return 1;
}

/* Stable sort in decreasing order (Python's sorted(reverse=True) keeps equal sets in place). */
static void sort_sets_desc(kk_set *s, size_t k) {
    for (size_t i = 1; i < k; i++) {
        kk_set t = s[i];
        size_t j = i;
        while (j > 0 && set_cmp(&s[j - 1], &t) < 0) {
            s[j] = s[j - 1];
            j--;
        }
        s[j] = t;
    }
}

static int64_t spread(const kk_state *st, size_t k) { return st->sets[0].sum - st->sets[k - 1].sum; }

/* verl's State.__lt__: larger spread first, then the larger first set. */
static int state_lt(const kk_state *a, const kk_state *b, size_t k) {
    int64_t sa = spread(a, k), sb = spread(b, k);
    if (sa != sb) return sa > sb;
    return set_cmp(&a->sets[0], &b->sets[0]) > 0;
}

/* Binary heap with Python heapq's exact sift order, so ties resolve as in verl. */
typedef struct kk_heap {
    kk_state **a;
    size_t n, k;
} kk_heap;

static void heap_siftdown(kk_heap *h, size_t start, size_t pos) {
    kk_state *item = h->a[pos];
    while (pos > start) {
        size_t parent = (pos - 1) >> 1;
        if (state_lt(item, h->a[parent], h->k)) {
            h->a[pos] = h->a[parent];
            pos = parent;
            continue;
        }
        break;
    }
    h->a[pos] = item;
}

static void heap_siftup(kk_heap *h, size_t pos) {
    size_t end = h->n, start = pos;
    kk_state *item = h->a[pos];
    size_t child = 2 * pos + 1;
    while (child < end) {
        size_t right = child + 1;
        if (right < end && !state_lt(h->a[child], h->a[right], h->k)) child = right;
        h->a[pos] = h->a[child];
        pos = child;
        child = 2 * pos + 1;
    }
    h->a[pos] = item;
    heap_siftdown(h, start, pos);
}

static void heap_push(kk_heap *h, kk_state *s) {
    h->a[h->n++] = s;
    heap_siftdown(h, 0, h->n - 1);
}

static kk_state *heap_pop(kk_heap *h) {
    kk_state *last = h->a[--h->n];
    if (!h->n) return last;
    kk_state *top = h->a[0];
    h->a[0] = last;
    heap_siftup(h, 0);
    return top;
}

static void state_free(kk_state *s, size_t k) {
    if (!s) return;
    for (size_t i = 0; i < k; i++) free(s->sets[i].items);
    free(s->sets);
    free(s);
}

static kk_state *state_new(size_t k) {
    kk_state *s = calloc(1, sizeof *s);
    if (s && !(s->sets = calloc(k, sizeof *s->sets))) {
        free(s);
        s = NULL;
    }
    return s;
}

/* a.sets[i] takes b.sets[k-1-i]: the largest set meets the smallest. */
static int state_merge(kk_state *a, const kk_state *b, size_t k) {
    for (size_t i = 0; i < k; i++) {
        const kk_set *o = &b->sets[k - 1 - i];
        for (size_t j = 0; j < o->n; j++)
            if (!set_add(&a->sets[i], o->items[j].idx, o->items[j].val)) return 0;
    }
    sort_sets_desc(a->sets, k);
    return 1;
}

typedef struct len_idx {
    int64_t len;
    uint32_t idx;
} len_idx;

static int len_idx_cmp(const void *x, const void *y) {
    const len_idx *a = x, *b = y;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int u32_cmp(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Fills `out` from the final state: groups in the state's order, items ascending within a group. */
static vc_status emit(const kk_state *s, size_t k, size_t n, vc_partition *out) {
    out->offsets = vc_malloc((k + 1) * sizeof *out->offsets);
    out->items = vc_malloc((n ? n : 1) * sizeof *out->items);
    if (!out->offsets || !out->items) return VC_ERR_NOMEM;
    out->n_groups = k;
    out->n_items = n;
    size_t at = 0;
    for (size_t g = 0; g < k; g++) {
        out->offsets[g] = at;
        for (size_t j = 0; j < s->sets[g].n; j++) out->items[at++] = s->sets[g].items[j].idx;
        qsort(out->items + out->offsets[g], at - out->offsets[g], sizeof *out->items, u32_cmp);
    }
    out->offsets[k] = at;
    return VC_OK;
}

static vc_status kk_check_args(const int64_t *lens, size_t n, size_t k, int equal_size) {
    if (k == 0) return vc_fail(VC_ERR_ARG, "partition: number of groups must be positive");
    if (n < k) return vc_fail(VC_ERR_ARG, "partition: %zu items cannot fill %zu non-empty groups", n, k);
    if (n > UINT32_MAX) return vc_fail(VC_ERR_ARG, "partition: too many items (%zu)", n);
    if (equal_size && n % k)
        return vc_fail(VC_ERR_ARG, "partition: %zu items do not split into %zu equal groups", n, k);
    for (size_t i = 0; i < n; i++)
        if (lens[i] < 0) return vc_fail(VC_ERR_ARG, "partition: item %zu has negative length %lld", i, (long long)lens[i]);
    return VC_OK;
}

vc_status vc_partition_balanced(const int64_t *lens, size_t n, size_t k, int equal_size, vc_partition *out) {
    memset(out, 0, sizeof *out);
    vc_status st = kk_check_args(lens, n, k, equal_size);
    if (st) return st;
    len_idx *sorted = vc_malloc(n * sizeof *sorted);
    kk_heap h = { .a = vc_calloc(n, sizeof(kk_state *)), .k = k };
    if (!sorted || !h.a) {
        st = VC_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) sorted[i] = (len_idx){ lens[i], (uint32_t)i };
    qsort(sorted, n, sizeof *sorted, len_idx_cmp);
    size_t step = equal_size ? k : 1;
    for (size_t off = 0; off < n; off += step) {
        kk_state *s = state_new(k);
        if (!s) {
            st = VC_ERR_NOMEM;
            goto out;
        }
        for (size_t j = 0; j < step; j++)
            if (!set_add(&s->sets[j], sorted[off + j].idx, sorted[off + j].len)) {
                state_free(s, k);
                st = VC_ERR_NOMEM;
                goto out;
            }
        sort_sets_desc(s->sets, k);
        heap_push(&h, s);
    }
    while (h.n > 1) {
        kk_state *a = heap_pop(&h), *b = heap_pop(&h);
        int ok = state_merge(a, b, k);
        state_free(b, k);
        heap_push(&h, a);
        if (!ok) {
            st = VC_ERR_NOMEM;
            goto out;
        }
    }
    st = emit(h.a[0], k, n, out);
out:
    for (size_t i = 0; h.a && i < h.n; i++) state_free(h.a[i], k);
    free(h.a);
    free(sorted);
    if (st) vc_partition_free(out);
    return st;
}

void vc_partition_free(vc_partition *p) {
    free(p->offsets);
    free(p->items);
    memset(p, 0, sizeof *p);
}

int64_t vc_partition_sum(const vc_partition *p, size_t g, const int64_t *lens) {
    int64_t s = 0;
    for (size_t j = p->offsets[g]; j < p->offsets[g + 1]; j++) s += lens[p->items[j]];
    return s;
}

static int64_t max_group(const vc_partition *p, const int64_t *lens) {
    int64_t m = 0;
    for (size_t g = 0; g < p->n_groups; g++) {
        int64_t s = vc_partition_sum(p, g, lens);
        if (s > m) m = s;
    }
    return m;
}

/* verl's order of dynamic micro-batches: sorted by (workload, first item) descending, then the even places
 * reversed followed by the odd ones (the lightest at both ends) */
static vc_status order_groups(vc_partition *p, const int64_t *w) {
    size_t k = p->n_groups, *g = vc_malloc(k * sizeof *g), *ord = vc_malloc(k * sizeof *ord);
    size_t *off = vc_malloc((k + 1) * sizeof *off);
    uint32_t *items = vc_malloc((p->n_items ? p->n_items : 1) * sizeof *items);
    int64_t *sum = vc_malloc(k * sizeof *sum);
    vc_status st = g && ord && off && items && sum ? VC_OK : VC_ERR_NOMEM;
    for (size_t i = 0; !st && i < k; i++) {
        g[i] = i;
        sum[i] = vc_partition_sum(p, i, w);
    }
    for (size_t i = 1; !st && i < k; i++) { /* insertion sort, descending; few groups */
        size_t t = g[i], j = i;
        while (j > 0) {
            size_t u = g[j - 1];
            uint32_t fu = p->items[p->offsets[u]], ft = p->items[p->offsets[t]];
            if (sum[u] > sum[t] || (sum[u] == sum[t] && fu >= ft)) break;
            g[j] = u;
            j--;
        }
        g[j] = t;
    }
    size_t m = 0, evens = (k + 1) / 2;
    for (size_t j = evens; !st && j-- > 0;) ord[m++] = g[2 * j]; /* the even places, last first */
    for (size_t i = 1; !st && i < k; i += 2) ord[m++] = g[i];
    size_t at = 0;
    for (size_t i = 0; !st && i < k; i++) {
        off[i] = at;
        for (size_t q = p->offsets[ord[i]]; q < p->offsets[ord[i] + 1]; q++) items[at++] = p->items[q];
    }
    if (!st) {
        off[k] = at;
        free(p->offsets);
        free(p->items);
        p->offsets = off;
        p->items = items;
        off = NULL;
        items = NULL;
    }
    free(g);
    free(ord);
    free(off);
    free(items);
    free(sum);
    return st;
}

vc_status vc_micro_batches_by_tokens(const int64_t *lens, size_t n, int64_t max_tokens, size_t min_groups,
                                     vc_partition *out) {
    memset(out, 0, sizeof *out);
    if (n == 0) return vc_fail(VC_ERR_ARG, "micro-batches: no sequences");
    if (max_tokens <= 0) return vc_fail(VC_ERR_ARG, "micro-batches: token budget %lld must be positive", (long long)max_tokens);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > max_tokens)
            return vc_fail(VC_ERR_ARG, "micro-batches: sequence %zu has %lld tokens, over the budget of %lld per micro-batch",
                           i, (long long)lens[i], (long long)max_tokens);
        if (lens[i] < 0) return vc_fail(VC_ERR_ARG, "micro-batches: sequence %zu has negative length", i);
        total += lens[i];
    }
    size_t k = (size_t)((total + max_tokens - 1) / max_tokens);
    if (k < min_groups) k = min_groups;
    if (k < 1) k = 1;
    if (k > n) k = n;
    int64_t *w = vc_malloc(n * sizeof *w);
    if (!w) return VC_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) w[i] = vc_seq_workload(lens[i]);
    /* Balanced groups can overshoot the budget when items are lumpy; one more group at a time
     * always ends, since n groups of one item each fit. */
    for (;; k++) {
        vc_status st = vc_partition_balanced(w, n, k, 0, out);
        if (!st && max_group(out, lens) > max_tokens) {
            vc_partition_free(out);
            continue;
        }
        if (!st) st = order_groups(out, w);
        if (st) vc_partition_free(out);
        free(w);
        return st;
    }
}

vc_status vc_micro_batches_by_count(size_t n, size_t micro_bs, vc_partition *out) {
    memset(out, 0, sizeof *out);
    if (micro_bs == 0) return vc_fail(VC_ERR_ARG, "micro-batches: micro batch size must be positive");
    if (n > UINT32_MAX) return vc_fail(VC_ERR_ARG, "micro-batches: too many items (%zu)", n);
    size_t k = (n + micro_bs - 1) / micro_bs;
    out->offsets = vc_malloc((k + 1) * sizeof *out->offsets);
    out->items = vc_malloc((n ? n : 1) * sizeof *out->items);
    if (!out->offsets || !out->items) {
        vc_partition_free(out);
        return VC_ERR_NOMEM;
    }
    out->n_groups = k;
    out->n_items = n;
    for (size_t g = 0; g <= k; g++) out->offsets[g] = g * micro_bs < n ? g * micro_bs : n;
    for (size_t i = 0; i < n; i++) out->items[i] = (uint32_t)i;
    return VC_OK;
}
