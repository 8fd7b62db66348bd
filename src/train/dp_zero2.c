/* ZeRO-2: sharded gradients without a full-size gradient buffer (trainer.sharding=zero2).
 *
 * The flat vector of the trained tensors (dp.c) is cut into chunks of bucket * world floats (the plain-DP
 * buckets: contiguous flat ranges). Before each micro-batch's backward the tape says, per trained tensor,
 * the highest and lowest tape node that writes its gradient (takes it as an input or declares it, see
 * below; backward visits nodes from the last: the tensor's gradient is first written at the highest and
 * final after the lowest). Chunks are reduced in a fixed order, last chunk first (the same on every rank,
 * so the collectives match), each as soon as backward has passed every writer of the tensors it overlaps
 * (a backward hook after each node); a tensor's gradient memory is released (zeroed for reuse) once its
 * lowest chunk is reduced. Its live interval is thus [release node, first-write node]; tensors whose
 * intervals do not intersect may share memory, and a first-fit packing of the intervals gives each tensor
 * an offset in one reusable working area (64-float aligned), typically a few layers' worth. A node writes
 * the gradients of its inputs and of the tensors it declares (vc_node_writes): a gradient-checkpointing
 * node declares its layer's weights, which its recompute writes while the node runs, so with
 * checkpointing a layer's weights are live together from that node on and the area stays a few layers'
 * worth. Tensors the tape does not show at all are live for the whole backward.
 *
 * A chunk's reduction is an ordered reduce-scatterv of its range (vc_comm_reduce_scatterv_f32_ordered): the
 * chunk is cut at the rank blocks, rank r receives the rank-order sum of the piece inside its own block
 * [first, first + count) (the same bits as ZeRO-1's ordered reduce-scatter, and as the ordered all-reduce
 * this used before), and each rank sends only the other ranks' pieces: (N-1)/N of the chunk, half an
 * all-reduce's traffic. The rank copies its piece into its f32 gradient shard (first micro-batch of the
 * step) or adds it (later ones). Every
 * rank runs the same number of rounds per step (the most micro-batches of any rank); a rank with fewer
 * reduces zeros.
 *
 * Overlap (cfg.overlap_grad_reduce): the hook only marks chunks final (posts them) and a communication
 * thread reduces them in the same order, while backward goes on. Released memory is reused by tensors
 * written later, so before backward runs node k, every chunk whose release frees memory that a tensor
 * first written at node k uses must be reduced (and that memory zeroed): per chunk the plan keeps the
 * highest first-write node of the tensors that reuse the memory it releases (c_dl), and the hook after
 * node i waits for every posted chunk with c_dl >= i - 1 (the hook runs after every node, in descending
 * order). The main thread makes no collective call while the thread runs.
 * Each chunk's reduction is the one above, in the same order, so the bits do not change. */
#include "trainer_dp.h"
#include "tensor/backend.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64 /* floats */

typedef struct tref {
    uintptr_t p;
    int i;
} tref;

struct vc_dp_zero2 {
    vc_tensor **tens;      /* [n] the trained tensors */
    float **orig;          /* [n] their grad pointers before ZeRO-2 (extra parameters' own buffers) */
    tref *map;             /* [n] tensor address -> index, sorted */
    int n;
    float *area;           /* the working area (backend memory) */
    size_t area_len, used; /* floats allocated; used by the last plan */
    float *stage;          /* [bucket] backend staging for the shard additions (host communicator) */
    size_t chunk, n_chunks;
    int64_t *p_lo, *p_hi, *p_rel, *c_lo; /* per tensor / per chunk (see above) */
    size_t *p_off, *c_min; /* per tensor: offset in the area, lowest chunk it overlaps */
    size_t *counts;        /* [world] floats of the chunk reduced now that each rank owns */
    int *order;
    size_t next;           /* chunks reduced in this round */
    int round, local, hooked, early;
    vc_status st;
    /* overlap: the communication thread of this micro-batch's backward */
    int ov;                /* a thread reduces the chunks of this micro-batch */
    int64_t *c_dl;         /* [n_chunks] highest first-write node of the tensors reusing what c releases */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int sync_ready, running;
    size_t posted, done;   /* chunks (in reduction order) final / reduced */
    int failed;
    char msg[512];         /* the thread's error message (vc_fail's message is thread-local) */
};

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static int tref_cmp(const void *a, const void *b) {
    const tref *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

static int find_tensor(const struct vc_dp_zero2 *z, const vc_tensor *x) {
    int lo = 0, hi = z->n - 1;
    uintptr_t u = (uintptr_t)x;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (u < z->map[mid].p) hi = mid - 1;
        else if (u > z->map[mid].p) lo = mid + 1;
        else return z->map[mid].i;
    }
    return -1;
}

/* points every trained tensor's grad (and t->grads) at p + off[i], or at p itself when off is NULL */
static void point(vc_trainer *t, struct vc_dp_zero2 *z, float *p, const size_t *off) {
    for (int i = 0; i < z->n; i++) {
        z->tens[i]->grad = off ? p + off[i] : p;
        t->grads[i] = z->tens[i]->grad;
    }
}

static vc_status grow_area(vc_trainer *t, struct vc_dp_zero2 *z, size_t need) {
    if (need <= z->area_len) return VC_OK;
    float *a = vc_be()->alloc(need * sizeof(float));
    if (!a) return vc_fail(VC_ERR_NOMEM, "ZeRO-2: cannot allocate a gradient working area of %.1f MB", need * 4e-6);
    vc_be()->free(z->area);
    z->area = a;
    z->area_len = need;
    point(t, z, a, NULL);
    return VC_OK;
}

vc_status vc_dp_zero2_init(vc_trainer *t, vc_tensor **tens) {
    struct vc_trainer_dp *d = t->dp;
    struct vc_dp_zero2 *z = vc_calloc(1, sizeof *z);
    if (!z) return VC_ERR_NOMEM;
    d->z2 = z;
    int n = z->n = t->n_params;
    size_t nn = (size_t)n + 1;
    z->chunk = d->bucket * (size_t)d->world;
    z->n_chunks = (d->n_flat + z->chunk - 1) / z->chunk;
    z->tens = vc_calloc(nn, sizeof *z->tens);
    z->orig = vc_calloc(nn, sizeof *z->orig);
    z->map = vc_calloc(nn, sizeof *z->map);
    z->p_lo = vc_calloc(nn, sizeof *z->p_lo);
    z->p_hi = vc_calloc(nn, sizeof *z->p_hi);
    z->p_rel = vc_calloc(nn, sizeof *z->p_rel);
    z->p_off = vc_calloc(nn, sizeof *z->p_off);
    z->c_min = vc_calloc(nn, sizeof *z->c_min);
    z->order = vc_calloc(nn, sizeof *z->order);
    z->c_lo = vc_calloc(z->n_chunks + 1, sizeof *z->c_lo);
    z->counts = vc_calloc((size_t)d->world, sizeof *z->counts);
    z->c_dl = vc_calloc(z->n_chunks + 1, sizeof *z->c_dl);
    if (!z->tens || !z->orig || !z->map || !z->p_lo || !z->p_hi || !z->p_rel || !z->p_off || !z->c_min ||
        !z->order || !z->c_lo || !z->counts || !z->c_dl)
        return VC_ERR_NOMEM;
    pthread_mutex_init(&z->mu, NULL);
    pthread_cond_init(&z->cv, NULL);
    z->sync_ready = 1;
    size_t largest = 1;
    for (int i = 0; i < n; i++) {
        z->tens[i] = tens[i];
        z->orig[i] = tens[i]->grad;
        z->map[i] = (tref){ (uintptr_t)tens[i], i };
        if (t->sizes[i] > largest) largest = t->sizes[i];
        size_t a = d->offs[i] / z->chunk; /* lowest chunk overlapping tensor i */
        z->c_min[i] = a;
    }
    qsort(z->map, (size_t)n, sizeof *z->map, tref_cmp);
    if (!d->dev_comm && !(z->stage = vc_be()->alloc(d->bucket * sizeof(float))))
        return vc_fail(VC_ERR_NOMEM, "ZeRO-2: the shard staging buffer");
    return grow_area(t, z, largest);
}

void vc_dp_zero2_free(vc_trainer *t) {
    struct vc_dp_zero2 *z = t->dp ? t->dp->z2 : NULL;
    if (!z) return;
    if (z->hooked) vc_graph_set_backward_hook(t->g, NULL, NULL);
    if (z->running) vc_dp_zero2_end(t); /* lets the thread finish and joins it */
    if (z->sync_ready) {
        pthread_mutex_destroy(&z->mu);
        pthread_cond_destroy(&z->cv);
    }
    /* the model's tensors lose their gradients (vc_model_enable_grad gives them storage again); extra
     * parameters get their own buffers back */
    if (z->tens) {
        vc_model_enable_grad_at(t->model, NULL);
        for (int i = 0; i < z->n; i++)
            if (z->tens[i] && z->tens[i]->grad) z->tens[i]->grad = z->orig[i]; /* not the model's */
    }
    vc_be()->free(z->area);
    vc_be()->free(z->stage);
    free(z->tens); free(z->orig); free(z->map); free(z->p_lo); free(z->p_hi); free(z->p_rel);
    free(z->p_off); free(z->c_min); free(z->order); free(z->c_lo); free(z->counts); free(z->c_dl);
    free(z);
    t->dp->z2 = NULL;
}

/* ---- the plan of one micro-batch ---- */
/* node j writes x's gradient: widens the writer range of x when it is a trained tensor */
static void note_writer(struct vc_dp_zero2 *z, const vc_tensor *x, int64_t j) {
    int p = x ? find_tensor(z, x) : -1;
    if (p < 0) return;
    if (j < z->p_lo[p]) z->p_lo[p] = j;
    if (j > z->p_hi[p]) z->p_hi[p] = j;
}

/* per trained tensor, the lowest and highest node writing its gradient: the inputs of a node and the
 * tensors it declares (vc_node_writes: a checkpointed layer's weights, written by its recompute) */
static void writers(vc_trainer *t, struct vc_dp_zero2 *z, int64_t n_nodes) {
    for (int i = 0; i < z->n; i++) {
        z->p_lo[i] = INT64_MAX;
        z->p_hi[i] = -1;
    }
    const vc_node *nodes = vc_graph_tape(t->g, &n_nodes);
    for (int64_t j = 0; j < n_nodes; j++) {
        for (int k = 0; k < VC_NODE_IN; k++) note_writer(z, nodes[j].in[k], j);
        for (int k = 0; k < nodes[j].n_more; k++) note_writer(z, nodes[j].more[k], j);
    }
    for (int i = 0; i < z->n; i++)
        if (z->p_hi[i] < 0) { /* not on the tape: written anywhere, live throughout */
            z->p_lo[i] = 0;
            z->p_hi[i] = n_nodes;
        }
}

/* chunk finality, the release node of each tensor: chunk c is reduced at the hook of node
 * R(c) = min(c_lo[c], R(c + 1)) (reduction order last chunk first) */
static void releases(vc_trainer *t, struct vc_dp_zero2 *z) {
    const struct vc_trainer_dp *d = t->dp;
    for (size_t c = 0; c < z->n_chunks; c++) z->c_lo[c] = INT64_MAX;
    for (int i = 0; i < z->n; i++) {
        if (d->offs[i + 1] == d->offs[i]) continue;
        for (size_t c = z->c_min[i]; c * z->chunk < d->offs[i + 1]; c++)
            if (z->p_lo[i] < z->c_lo[c]) z->c_lo[c] = z->p_lo[i];
    }
    int64_t r = INT64_MAX;
    for (size_t c = z->n_chunks; c-- > 0;) {
        if (z->c_lo[c] < r) r = z->c_lo[c];
        z->c_lo[c] = r; /* from here on: the node at whose hook chunk c is reduced */
    }
    for (int i = 0; i < z->n; i++) z->p_rel[i] = z->c_lo[z->c_min[i] < z->n_chunks ? z->c_min[i] : 0];
}

static struct vc_dp_zero2 *SORT_Z; /* qsort context (the plan runs on the trainer's thread only) */
static int by_start(const void *a, const void *b) {
    int64_t x = SORT_Z->p_hi[*(const int *)a], y = SORT_Z->p_hi[*(const int *)b];
    return x > y ? -1 : x < y ? 1 : *(const int *)a - *(const int *)b;
}

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* first-fit: the lowest offset where tensor i does not overlap a placed tensor live at the same time */
static size_t place(const vc_trainer *t, const struct vc_dp_zero2 *z, int k) {
    int i = z->order[k];
    size_t off = 0, len = round_up(t->sizes[i]);
    for (int moved = 1; moved;) {
        moved = 0;
        for (int q = 0; q < k; q++) {
            int j = z->order[q];
            if (z->p_rel[j] > z->p_hi[i] || z->p_rel[i] > z->p_hi[j]) continue; /* never live together */
            size_t a = z->p_off[j], b = a + round_up(t->sizes[j]);
            if (off < b && a < off + len) {
                off = b;
                moved = 1;
            }
        }
    }
    return off;
}

/* overlap: per chunk, the highest first-write node of a tensor whose memory overlaps a tensor the chunk
 * releases and that is written after that release */
static void deadlines(const vc_trainer *t, struct vc_dp_zero2 *z) {
    for (size_t c = 0; c < z->n_chunks; c++) z->c_dl[c] = INT64_MIN;
    for (int j = 0; j < z->n; j++) {
        if (!t->sizes[j] || z->c_min[j] >= z->n_chunks) continue;
        size_t a = z->p_off[j], b = a + round_up(t->sizes[j]);
        int64_t *dl = &z->c_dl[z->c_min[j]];
        for (int i = 0; i < z->n; i++) {
            size_t x = z->p_off[i], y = x + round_up(t->sizes[i]);
            if (i != j && t->sizes[i] && x < b && a < y && z->p_hi[i] < z->p_rel[j] && z->p_hi[i] > *dl)
                *dl = z->p_hi[i];
        }
    }
}

static vc_status plan(vc_trainer *t, struct vc_dp_zero2 *z) {
    int64_t n_nodes = 0;
    vc_graph_tape(t->g, &n_nodes);
    writers(t, z, n_nodes);
    releases(t, z);
    for (int i = 0; i < z->n; i++) z->order[i] = i;
    SORT_Z = z;
    qsort(z->order, (size_t)z->n, sizeof *z->order, by_start);
    size_t need = 1;
    for (int k = 0; k < z->n; k++) {
        int i = z->order[k];
        z->p_off[i] = place(t, z, k);
        if (z->p_off[i] + round_up(t->sizes[i]) > need) need = z->p_off[i] + round_up(t->sizes[i]);
    }
    vc_status st = grow_area(t, z, need);
    if (st) return st;
    z->used = need;
    if (z->ov) deadlines(t, z);
    point(t, z, z->area, z->p_off);
    vc_be()->zero(z->area, need * sizeof(float));
    return VC_OK;
}

/* ---- reduction ---- */
/* adds (or, in the step's first round, copies) n reduced floats from communication memory into the shard */
static void into_shard(struct vc_trainer_dp *d, struct vc_dp_zero2 *z, float *dst, const float *src, size_t n) {
    if (z->round == 0) {
        if (d->dev_comm) vc_be()->d2d(dst, src, n * sizeof(float));
        else vc_be()->h2d(dst, src, n * sizeof(float));
        return;
    }
    if (d->dev_comm) {
        vc_be()->axpy(dst, 1.0f, src, (int64_t)n);
        return;
    }
    for (size_t k = 0; k < n; k += d->bucket) {
        size_t m = min_sz(d->bucket, n - k);
        vc_be()->h2d(z->stage, src + k, m * sizeof(float));
        vc_be()->axpy(dst + k, 1.0f, z->stage, (int64_t)m);
    }
}

/* the pieces of the flat range [a, a + len) inside each rank's block; returns where this rank's starts */
static size_t chunk_counts(const struct vc_trainer_dp *d, size_t a, size_t len, size_t *counts) {
    size_t displ = 0;
    for (int r = 0; r < d->world; r++) {
        size_t b0 = min_sz((size_t)r * d->shard_len, d->n_flat), b1 = min_sz(b0 + d->shard_len, d->n_flat);
        size_t lo = a > b0 ? a : b0, hi = min_sz(a + len, b1);
        counts[r] = hi > lo ? hi - lo : 0;
        if (r < d->rank) displ += counts[r];
    }
    return displ;
}

/* reduces chunk c (zeros when empty) and releases the tensors whose lowest chunk it is */
static vc_status reduce_chunk(vc_trainer *t, size_t c, int empty) {
    struct vc_trainer_dp *d = t->dp;
    struct vc_dp_zero2 *z = d->z2;
    size_t a = c * z->chunk, len = min_sz(z->chunk, d->n_flat - a);
    vc_status st = VC_OK;
    if (!z->local) {
        if (empty && d->dev_comm) vc_be()->zero(d->buf, len * sizeof(float));
        else if (empty) memset(d->buf, 0, len * sizeof(float));
        else vc_dp_flat_read(t, t->grads, a, len, d->buf);
        /* in place: this rank's reduced piece replaces its own piece of the chunk in the buffer; its flat
         * position is first + (a + displ - first) when it has one */
        size_t displ = chunk_counts(d, a, len, z->counts), mine = z->counts[d->rank];
        st = vc_comm_reduce_scatterv_f32_ordered(d->comm, d->buf, d->buf + displ, z->counts);
        if (!st && mine) into_shard(d, z, d->shard_grad + (a + displ - d->first), d->buf + displ, mine);
    }
    for (int i = 0; !empty && i < z->n; i++)
        if (z->c_min[i] == c) vc_be()->zero(z->tens[i]->grad, t->sizes[i] * sizeof(float));
    return st;
}

static void reduce_final(vc_trainer *t, int64_t node) {
    struct vc_dp_zero2 *z = t->dp->z2;
    while (!z->st && z->next < z->n_chunks) {
        size_t c = z->n_chunks - 1 - z->next;
        if (z->c_lo[c] < node) break;
        z->st = reduce_chunk(t, c, 0);
        z->next++;
        z->early += node > 0;
    }
}

static void on_node(void *ctx, int64_t i) { reduce_final(ctx, i); }

/* ---- overlap ---- */
static size_t chunk_of(const struct vc_dp_zero2 *z, size_t q) { return z->n_chunks - 1 - q; }

/* the communication thread: reduces the posted chunks in order until all are done or one fails */
static void *comm_main(void *arg) {
    vc_trainer *t = arg;
    struct vc_dp_zero2 *z = t->dp->z2;
    pthread_mutex_lock(&z->mu);
    while (z->done < z->n_chunks) {
        while (z->done == z->posted) pthread_cond_wait(&z->cv, &z->mu);
        size_t c = chunk_of(z, z->done);
        pthread_mutex_unlock(&z->mu);
        vc_status st = reduce_chunk(t, c, 0);
        pthread_mutex_lock(&z->mu);
        if (st) {
            z->st = st;
            z->failed = 1;
            snprintf(z->msg, sizeof z->msg, "%s", vc_last_error());
            pthread_cond_broadcast(&z->cv);
            break;
        }
        z->done++;
        pthread_cond_broadcast(&z->cv);
    }
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

/* after backward node i (INT64_MIN: backward is over): posts the chunks final now, then waits until the
 * thread has reduced every chunk whose released memory node i - 1 may write */
static void on_node_ov(void *ctx, int64_t i) {
    vc_trainer *t = ctx;
    struct vc_dp_zero2 *z = t->dp->z2;
    pthread_mutex_lock(&z->mu);
    size_t before = z->posted;
    while (z->posted < z->n_chunks && z->c_lo[chunk_of(z, z->posted)] >= i) z->posted++;
    if (i > 0) z->early += (int)(z->posted - before);
    if (z->posted != before) pthread_cond_broadcast(&z->cv);
    size_t need = 0;
    for (size_t q = 0; i != INT64_MIN && q < z->posted; q++)
        if (z->c_dl[chunk_of(z, q)] >= i - 1) need = q + 1;
    while (z->done < need && !z->failed) pthread_cond_wait(&z->cv, &z->mu);
    pthread_mutex_unlock(&z->mu);
}

vc_status vc_dp_zero2_begin(vc_trainer *t, int local) {
    struct vc_dp_zero2 *z = t->dp->z2;
    z->local = local;
    z->next = 0;
    z->early = 0;
    z->ov = t->cfg.overlap_grad_reduce && !local;
    z->st = plan(t, z);
    if (z->st) return z->st;
    if (z->ov) {
        z->posted = z->done = 0;
        z->failed = 0;
        z->msg[0] = 0;
        if (pthread_create(&z->th, NULL, comm_main, t) != 0)
            return z->st = vc_fail(VC_ERR_INTERNAL, "ZeRO-2: cannot start the gradient communication thread");
        z->running = 1;
    }
    vc_graph_set_backward_hook(t->g, z->ov ? on_node_ov : on_node, t);
    z->hooked = 1;
    return VC_OK;
}

vc_status vc_dp_zero2_end(vc_trainer *t) {
    struct vc_dp_zero2 *z = t->dp->z2;
    if (z->hooked) vc_graph_set_backward_hook(t->g, NULL, NULL);
    if (!z->hooked && !z->running) return VC_OK;
    z->hooked = 0;
    if (z->running) {
        on_node_ov(t, INT64_MIN); /* every chunk is final: the thread reduces the rest */
        pthread_join(z->th, NULL);
        z->running = 0;
        if (z->st) vc_fail(z->st, "%s", z->msg);
    } else {
        reduce_final(t, INT64_MIN); /* whatever is left (or all of it when backward did not run) */
    }
    if (!z->local) z->round++;
    t->dp->early = z->early;
    return z->st;
}

vc_status vc_dp_zero2_empty_round(vc_trainer *t) {
    struct vc_dp_zero2 *z = t->dp->z2;
    vc_status st = VC_OK;
    z->local = 0;
    for (size_t k = 0; k < z->n_chunks && !st; k++) st = reduce_chunk(t, z->n_chunks - 1 - k, 1);
    z->round++;
    return st;
}

void vc_dp_zero2_step_start(vc_trainer *t) {
    if (t->dp && t->dp->z2) t->dp->z2->round = 0;
}

int vc_dp_zero2_rounds(const vc_trainer *t) { return t->dp && t->dp->z2 ? t->dp->z2->round : 0; }

size_t vc_dp_zero2_chunks(const vc_trainer *t) { return t->dp && t->dp->z2 ? t->dp->z2->n_chunks : 0; }

size_t vc_dp_zero2_area(const vc_trainer *t) { return t->dp && t->dp->z2 ? t->dp->z2->area_len : 0; }
