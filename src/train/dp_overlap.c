/* Gradient reduction overlapped with backward (trainer config overlap_grad_reduce). Before the last
 * micro-batch's backward, the tape tells which nodes write which parameter gradients: a node writes the
 * gradient of every parameter whose persistent grad buffer holds one of its inputs' grad pointers. As
 * backward walks the tape from the end, a bucket's gradients are final once backward has passed the
 * earliest (lowest-index) node writing any of them. A communication thread reduces the buckets in a fixed
 * order (last bucket first, the same on every rank, so collectives match) as soon as each is final, while
 * backward continues on the main thread; the main thread makes no collective call until it joins the
 * thread. Each bucket's reduction is the one the non-overlapped path runs, so the bits are the same.
 * A node's writes also include the tensors it declares (vc_node_writes): a gradient-checkpointing node
 * declares its layer's weights, whose gradients its recompute writes, so a checkpointed layer's buckets
 * are final once backward has passed that node. */
#include "trainer_dp.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vc_dp_overlap {
    vc_trainer *t;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running;
    size_t n_buckets;
    int64_t *first;   /* [n_buckets] lowest tape index writing one of the bucket's gradients (INT64_MAX: none) */
    int64_t done;     /* backward has processed every node with index >= done */
    int early;        /* buckets whose reduction started while backward was still running (timing) */
    int eligible;     /* buckets final before backward's last node (from the tape: no timing) */
    vc_status st;
    char msg[512];    /* the thread's error message (vc_fail's message is thread-local) */
};

typedef struct gref {
    uintptr_t lo, hi; /* grad buffer [lo, hi) */
    int param;
} gref;

static int gref_cmp(const void *a, const void *b) {
    const gref *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* the trained tensor whose gradient buffer contains p, or -1 */
static int find_param(const gref *r, int n, const float *p) {
    uintptr_t u = (uintptr_t)p;
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (u < r[mid].lo) hi = mid - 1;
        else if (u >= r[mid].hi) lo = mid + 1;
        else return r[mid].param;
    }
    return -1;
}

/* per trained tensor: the lowest tape index of a node writing its gradient */
static vc_status param_writers(const vc_trainer *t, int64_t *pf) {
    int np = t->n_params;
    gref *r = vc_calloc((size_t)np + 1, sizeof *r);
    if (!r) return VC_ERR_NOMEM;
    for (int i = 0; i < np; i++) {
        r[i] = (gref){ (uintptr_t)t->grads[i], (uintptr_t)(t->grads[i] + t->sizes[i]), i };
        pf[i] = INT64_MAX;
    }
    qsort(r, (size_t)np, sizeof *r, gref_cmp);
    int64_t n_nodes = 0;
    const vc_node *nodes = vc_graph_tape(t->g, &n_nodes);
    for (int64_t j = 0; j < n_nodes; j++)
        for (int k = 0; k < VC_NODE_IN + nodes[j].n_more; k++) { /* the inputs, then the declared tensors */
            const vc_tensor *x = k < VC_NODE_IN ? nodes[j].in[k] : nodes[j].more[k - VC_NODE_IN];
            int p = x && x->grad ? find_param(r, np, x->grad) : -1;
            if (p >= 0 && j < pf[p]) pf[p] = j;
        }
    free(r);
    return VC_OK;
}

/* lowest writer over the trained tensors overlapping the flat range [a, a + len) */
static int64_t range_first(const vc_trainer *t, const int64_t *pf, size_t a, size_t len) {
    const struct vc_trainer_dp *d = t->dp;
    size_t e = a + len < d->n_flat ? a + len : d->n_flat;
    int64_t m = INT64_MAX;
    for (int i = 0; i < t->n_params; i++)
        if (d->offs[i] < e && d->offs[i + 1] > a && pf[i] < m) m = pf[i];
    return m;
}

static vc_status bucket_writers(vc_trainer *t, struct vc_dp_overlap *o) {
    const struct vc_trainer_dp *d = t->dp;
    int64_t *pf = vc_calloc((size_t)t->n_params + 1, sizeof *pf);
    if (!pf) return VC_ERR_NOMEM;
    vc_status st = param_writers(t, pf);
    for (size_t b = 0; b < o->n_buckets && !st; b++) {
        size_t k, len;
        vc_dp_bucket_ranges(t, b, &k, &len);
        o->first[b] = INT64_MAX;
        for (int r = 0; r < (d->zero1 ? d->world : 1); r++) {
            int64_t m = range_first(t, pf, (size_t)r * (d->zero1 ? d->shard_len : 0) + k, len);
            if (m < o->first[b]) o->first[b] = m;
        }
    }
    free(pf);
    return st;
}

static void on_node(void *ctx, int64_t i) {
    struct vc_dp_overlap *o = ctx;
    pthread_mutex_lock(&o->mu);
    o->done = i;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void *comm_main(void *arg) {
    struct vc_dp_overlap *o = arg;
    for (size_t i = 0; i < o->n_buckets; i++) {
        size_t b = o->n_buckets - 1 - i; /* the order of reduce_grads with overlap on */
        pthread_mutex_lock(&o->mu);
        while (o->done > o->first[b]) pthread_cond_wait(&o->cv, &o->mu);
        o->early += o->done != INT64_MIN;
        pthread_mutex_unlock(&o->mu);
        vc_status st = vc_dp_reduce_bucket(o->t, b);
        if (st) {
            o->st = st;
            snprintf(o->msg, sizeof o->msg, "%s", vc_last_error());
            break;
        }
    }
    return NULL;
}

vc_status vc_dp_overlap_begin(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    struct vc_dp_overlap *o = d->ov;
    if (!o) {
        if (!(o = vc_calloc(1, sizeof *o))) return VC_ERR_NOMEM;
        o->t = t;
        o->n_buckets = vc_dp_n_buckets(t);
        o->first = vc_calloc(o->n_buckets + 1, sizeof *o->first);
        pthread_mutex_init(&o->mu, NULL);
        pthread_cond_init(&o->cv, NULL);
        d->ov = o;
        if (!o->first) return VC_ERR_NOMEM;
    }
    vc_status st = bucket_writers(t, o);
    if (st) return st;
    int64_t n_nodes = 0;
    vc_graph_tape(t->g, &n_nodes);
    o->done = n_nodes;
    o->eligible = 0;
    for (size_t b = 0; b < o->n_buckets; b++) o->eligible += o->first[b] > 0;
    o->st = VC_OK;
    o->early = 0;
    o->msg[0] = 0;
    if (pthread_create(&o->th, NULL, comm_main, o) != 0)
        return vc_fail(VC_ERR_INTERNAL, "trainer: cannot start the gradient communication thread");
    o->running = 1;
    vc_graph_set_backward_hook(t->g, on_node, o);
    return VC_OK;
}

vc_status vc_dp_overlap_end(vc_trainer *t) {
    struct vc_dp_overlap *o = t->dp->ov;
    if (!o || !o->running) return VC_OK;
    vc_graph_set_backward_hook(t->g, NULL, NULL);
    on_node(o, INT64_MIN); /* backward is over (or did not run): every bucket is final */
    pthread_join(o->th, NULL);
    o->running = 0;
    if (o->st) return vc_fail(o->st, "%s", o->msg);
    t->dp->reduced = 1;
    t->dp->early = o->eligible;
    vc_debug("overlap: %d of %zu gradient buckets final before the end of backward, %d started during it",
             o->eligible, o->n_buckets, o->early);
    return VC_OK;
}

void vc_dp_overlap_free(vc_trainer *t) {
    struct vc_dp_overlap *o = t->dp ? t->dp->ov : NULL;
    if (!o) return;
    vc_dp_overlap_end(t);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o->first);
    free(o);
    t->dp->ov = NULL;
}
