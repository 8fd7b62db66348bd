/* Top-k selection with PyTorch's CPU tie-breaking. torch.topk runs libstdc++'s nth_element (or
 * partial_sort when k * 64 <= n) over (value, index) pairs in index order, so which of several equal
 * values is chosen follows those algorithms' element moves; MoE routers that mask scores to 0 create
 * such ties. This reproduces them step by step. */
#include "cpu.h"
#include <math.h>

typedef struct { float v; int i; } elem;

static int gt(const elem *x, const elem *y) { return (isnan(x->v) && !isnan(y->v)) || x->v > y->v; }

static void push_heap(elem *f, long hole, long top, elem val) {
    long parent = (hole - 1) / 2;
    while (hole > top && gt(&f[parent], &val)) {
        f[hole] = f[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    f[hole] = val;
}

static void adjust_heap(elem *f, long hole, long len, elem val) {
    long top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (gt(&f[child], &f[child - 1])) child--;
        f[hole] = f[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        f[hole] = f[child - 1];
        hole = child - 1;
    }
    push_heap(f, hole, top, val);
}

static void make_heap(elem *f, long len) {
    if (len < 2) return;
    for (long parent = (len - 2) / 2;; parent--) {
        adjust_heap(f, parent, len, f[parent]);
        if (parent == 0) return;
    }
}

static void pop_heap(elem *f, long len, elem *result) {
    elem val = *result;
    *result = f[0];
    adjust_heap(f, 0, len, val);
}

static void heap_select(elem *f, long mid, long last) {
    make_heap(f, mid);
    for (long i = mid; i < last; i++)
        if (gt(&f[i], &f[0])) pop_heap(f, mid, &f[i]);
}

static void swap(elem *a, elem *b) {
    elem t = *a;
    *a = *b;
    *b = t;
}

static void median_to_first(elem *r, elem *a, elem *b, elem *c) {
    if (gt(a, b)) {
        if (gt(b, c)) swap(r, b);
        else if (gt(a, c)) swap(r, c);
        else swap(r, a);
    } else if (gt(a, c)) swap(r, a);
    else if (gt(b, c)) swap(r, c);
    else swap(r, b);
}

static long partition(elem *f, long first, long last, long pivot) {
    for (;;) {
        while (gt(&f[first], &f[pivot])) first++;
        last--;
        while (gt(&f[pivot], &f[last])) last--;
        if (!(first < last)) return first;
        swap(&f[first], &f[last]);
        first++;
    }
}

static void insertion_sort(elem *f, long first, long last) {
    if (first == last) return;
    for (long i = first + 1; i < last; i++) {
        elem val = f[i];
        if (gt(&val, &f[first])) {
            for (long j = i; j > first; j--) f[j] = f[j - 1];
            f[first] = val;
        } else {
            long j = i;
            while (gt(&val, &f[j - 1])) {
                f[j] = f[j - 1];
                j--;
            }
            f[j] = val;
        }
    }
}

static void nth_element(elem *f, long nth, long last) {
    long first = 0, n = last, lg = 0;
    while ((1L << (lg + 1)) <= n) lg++;
    long depth = 2 * lg;
    while (last - first > 3) {
        if (depth == 0) {
            heap_select(f + first, nth + 1 - first, last - first);
            swap(&f[first], &f[nth]);
            return;
        }
        depth--;
        long mid = first + (last - first) / 2;
        median_to_first(&f[first], &f[first + 1], &f[mid], &f[last - 1]);
        long cut = partition(f, first + 1, last, first);
        if (cut <= nth) first = cut;
        else last = cut;
    }
    insertion_sort(f, first, last);
}

void vc_topk_torch(const float *v, int n, int k, int32_t *idx) {
    elem q[1024];
    for (int i = 0; i < n; i++) q[i] = (elem){ v[i], i };
    if ((long)k * 64 <= n) {
        heap_select(q, k, n);
        for (long last = k; last > 1;) { /* sort_heap */
            last--;
            pop_heap(q, last, &q[last]);
        }
    } else nth_element(q, k - 1, n);
    for (int i = 0; i < k; i++) idx[i] = q[i].i;
}
