/* The step arena and the tape. The arena is a list of large chunks; reset keeps the chunks and
 * rewinds, so steady-state steps allocate nothing from the system. */
#include "verlc/tensor.h"
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include <stdlib.h>
#include <string.h>

/* a new chunk is twice the arena's last one, from 1 MiB up to 64 MiB (or the allocation's size where larger): a
 * small graph (a decode step of a small model) maps a megabyte or two, not 64 MiB, and a large one reaches 64 MiB
 * chunks after a few */
#define CHUNK_FIRST ((size_t)1 << 20)
#define CHUNK_MAX ((size_t)64 << 20)

typedef struct chunk {
    struct chunk *next;
    size_t size, used;
    char *mem;
    const vc_backend *be; /* backend memory: the backend that allocated it; NULL: host */
} chunk;

typedef struct arena {
    chunk *head, *cur;
    size_t used, last; /* last: the size of the chunk made last (0: none yet) */
} arena;

struct vc_graph {
    arena host, data; /* host: headers and metadata; data: backend memory (tensor data, gradients) */
    size_t peak;
    vc_node *nodes;
    int64_t n_nodes, cap_nodes;
    int grad;
    vc_status status;
    /* scale-out hook (train/dp_overlap.c): runs after each tape node during backward */
    void (*hook)(void *ctx, int64_t node);
    void *hook_ctx;
    /* ZeRO-3 (train/dp_zero3.c): runs before each tape node during backward */
    vc_status (*pre)(void *ctx, int64_t node);
    void *pre_ctx;
    /* gradient buffers handed back during backward (a node's output gradient, once the node ran: nothing
     * reads it after), reused by later vc_tensor_grad calls: the arena then holds the live gradients of a
     * few layers at a time instead of every activation's */
    struct freed { void *p; size_t bytes; } *freed;
    int n_freed, cap_freed;
    /* child graphs (vc_graph_child): the parent, the kept child, the child in use (NULL: none) */
    vc_graph *parent, *kept, *active;
};

vc_graph *vc_graph_new(void) {
    vc_graph *g = vc_calloc(1, sizeof *g);
    if (g) g->grad = 1;
    return g;
}

static void arena_free(arena *a) {
    for (chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        if (c->be) c->be->free(c->mem);
        else vc_aligned_free(c->mem);
        free(c);
    }
}

void vc_graph_free(vc_graph *g) {
    if (!g) return;
    vc_graph_free(g->kept);
    arena_free(&g->host);
    arena_free(&g->data);
    free(g->nodes);
    free(g->freed);
    free(g);
}

static void arena_reset(arena *a) {
    for (chunk *c = a->head; c; c = c->next) c->used = 0;
    a->cur = a->head;
    a->used = 0;
}

void vc_graph_reset(vc_graph *g) {
    arena_reset(&g->host);
    arena_reset(&g->data);
    g->n_nodes = 0;
    g->n_freed = 0;
    g->status = VC_OK;
}

vc_graph_mark vc_graph_get_mark(const vc_graph *g) {
    vc_graph_mark m = { g->host.cur, g->host.cur ? g->host.cur->used : 0, g->host.used, g->n_nodes,
                        g->data.cur, g->data.cur ? g->data.cur->used : 0, g->data.used };
    return m;
}

static void arena_rewind(arena *a, void *cp, size_t used, size_t total) {
    chunk *c = cp;
    if (!c) {
        arena_reset(a);
        return;
    }
    c->used = used;
    for (chunk *n = c->next; n; n = n->next) n->used = 0;
    a->cur = c;
    a->used = total;
}

void vc_graph_rewind(vc_graph *g, vc_graph_mark m) {
    arena_rewind(&g->host, m.chunk, m.used, m.total);
    arena_rewind(&g->data, m.dchunk, m.dused, m.dtotal);
    g->n_nodes = m.nodes;
}

vc_graph *vc_graph_child(vc_graph *g) {
    vc_graph *c = g->kept && g->active != g->kept ? g->kept : vc_graph_new();
    if (!c) return NULL;
    if (!g->kept) g->kept = c;
    vc_graph_reset(c);
    c->grad = 1;
    c->hook = NULL;
    c->pre = NULL;
    c->parent = g;
    if (!g->active) g->active = c;
    return c;
}

void vc_graph_child_release(vc_graph *c) {
    if (!c) return;
    vc_graph *g = c->parent;
    if (g && g->active == c) g->active = NULL;
    if (!g || g->kept != c) {
        vc_graph_free(c);
        return;
    }
    vc_graph_reset(c); /* its chunks stay for the next use */
}

/* the peak of g, and of its root with the chain of children in use below the root (the root's peak counts them) */
static void note_peak(vc_graph *g) {
    size_t own = g->host.used + g->data.used;
    if (own > g->peak) g->peak = own;
    vc_graph *root = g;
    while (root->parent) root = root->parent;
    if (root == g && !g->active) return;
    size_t total = 0;
    for (vc_graph *x = root; x; x = x->active) total += x->host.used + x->data.used;
    if (total > root->peak) root->peak = total;
}

void vc_graph_set_grad(vc_graph *g, int enabled) { g->grad = enabled; }
int vc_graph_grad_enabled(const vc_graph *g) { return g->grad; }
size_t vc_graph_peak_bytes(const vc_graph *g) { return g->peak; }
size_t vc_graph_used_bytes(const vc_graph *g) { return g->host.used + g->data.used; }
void vc_graph_trim(vc_graph *g) {
    if (!g) return;
    vc_graph_reset(g);
    arena_free(&g->host);
    arena_free(&g->data);
    memset(&g->host, 0, sizeof g->host);
    memset(&g->data, 0, sizeof g->data);
    if (g->kept && g->active != g->kept) {
        vc_graph_free(g->kept);
        g->kept = NULL;
    }
}

void vc_graph_clear_peak(vc_graph *g) {
    for (vc_graph *x = g; x; x = x->kept) x->peak = x->host.used + x->data.used;
}
vc_status vc_graph_status(const vc_graph *g) { return g->status; }
void vc_graph_fail(vc_graph *g, vc_status st) {
    if (g->status == VC_OK) g->status = st;
}

/* the backend memory of a chunk comes from the backend active when it was made; a chunk made by a
 * backend with another memory kind (a different allocator) is not reused */
static void *arena_alloc(vc_graph *g, arena *a, size_t bytes, const vc_backend *be, int quiet) {
    bytes = (bytes + 63) & ~(size_t)63;
    if (!bytes) bytes = 64;
    chunk *c = a->cur;
    while (c && (c->used + bytes > c->size || (be && c->be->alloc != be->alloc))) c = c->next;
    if (!c) {
        c = vc_calloc(1, sizeof *c);
        if (!c) goto oom;
        size_t grow = a->last ? a->last * 2 : CHUNK_FIRST;
        if (grow > CHUNK_MAX) grow = CHUNK_MAX;
        c->size = bytes > grow ? bytes : grow;
        c->be = be;
        c->mem = be ? be->alloc(c->size) : aligned_alloc(64, c->size);
        if (!c->mem) {
            free(c);
            goto oom;
        }
        /* append at the end of the list so earlier chunks are reused first after a reset */
        a->last = c->size;
        if (!a->head) a->head = c;
        else {
            chunk *t = a->head;
            while (t->next) t = t->next;
            t->next = c;
        }
    }
    a->cur = c;
    void *p = c->mem + c->used;
    c->used += bytes;
    a->used += bytes;
    note_peak(g);
    return p;
oom:
    if (quiet) { /* the caller does without */
        vc_clear_error();
        return NULL;
    }
    if (g->status == VC_OK)
        g->status = vc_fail(VC_ERR_NOMEM, "step arena: cannot allocate %zu bytes of %s memory (%zu in use)", bytes,
                            be ? be->name : "host", a->used);
    return NULL;
}

void *vc_graph_alloc(vc_graph *g, size_t bytes, int zero) {
    void *p = arena_alloc(g, &g->host, bytes, NULL, 0);
    if (p && zero) memset(p, 0, bytes);
    return p;
}

void *vc_graph_dalloc(vc_graph *g, size_t bytes, int zero) {
    const vc_backend *be = vc_be();
    void *p = arena_alloc(g, &g->data, bytes, be, 0);
    if (p && zero) be->zero(p, bytes);
    return p;
}

void *vc_graph_dalloc_try(vc_graph *g, size_t bytes) { return arena_alloc(g, &g->data, bytes, vc_be(), 1); }

void *vc_graph_upload(vc_graph *g, const void *src, size_t bytes) {
    void *p = vc_graph_dalloc(g, bytes, 0);
    if (p && bytes) vc_be()->h2d(p, src, bytes);
    return p;
}

vc_status vc_tensor_read(const vc_tensor *t, float *dst) {
    if (!t || !t->data) return vc_fail(VC_ERR_INTERNAL, "tensor read: no data");
    vc_be()->d2h(dst, t->data, (size_t)t->n * sizeof(float));
    return vc_be()->sync();
}

vc_status vc_tensor_write(vc_tensor *t, const float *src) {
    if (!t || !t->data) return vc_fail(VC_ERR_INTERNAL, "tensor write: no data");
    vc_be()->h2d(t->data, src, (size_t)t->n * sizeof(float));
    return vc_be()->sync();
}

vc_status vc_tensor_read_grad(const vc_tensor *t, float *dst) {
    if (!t || !t->grad) return vc_fail(VC_ERR_INTERNAL, "tensor read: no gradient");
    vc_be()->d2h(dst, t->grad, (size_t)t->n * sizeof(float));
    return vc_be()->sync();
}

vc_tensor *vc_tensor_wrap(vc_graph *g, float *data, int ndim, const int64_t *shape) {
    vc_tensor *t = vc_graph_alloc(g, sizeof *t, 1);
    if (!t) return NULL;
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->n *= shape[i];
    }
    t->data = data;
    return t;
}

vc_tensor *vc_tensor_new(vc_graph *g, int ndim, const int64_t *shape, int zero) {
    vc_tensor *t = vc_tensor_wrap(g, NULL, ndim, shape);
    if (!t) return NULL;
    t->data = vc_graph_dalloc(g, (size_t)t->n * sizeof(float), zero);
    return t->data ? t : NULL;
}

vc_tensor *vc_tensor_2d(vc_graph *g, int64_t a, int64_t b, int zero) {
    int64_t s[2] = { a, b };
    return vc_tensor_new(g, 2, s, zero);
}

void vc_param_init(vc_tensor *t, float *data, float *grad, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->n *= shape[i];
    }
    t->data = data;
    t->grad = grad;
    t->is_param = 1;
    t->requires_grad = grad != NULL;
}

/* the smallest handed-back gradient buffer that holds `bytes` (as it was left; reuse_grad: zeroed); NULL when none */
static void *reuse_grad_raw(vc_graph *g, size_t bytes) {
    int best = -1;
    for (int i = 0; i < g->n_freed; i++)
        if (g->freed[i].bytes >= bytes && (best < 0 || g->freed[i].bytes < g->freed[best].bytes)) best = i;
    if (best < 0) return NULL;
    void *p = g->freed[best].p;
    g->freed[best] = g->freed[--g->n_freed];
    return p;
}

static void *reuse_grad(vc_graph *g, size_t bytes) {
    void *p = reuse_grad_raw(g, bytes);
    if (p) vc_be()->zero(p, bytes);
    return p;
}

/* node n's output gradient becomes the gradient of its input `in` when in has none yet and the node's backward would
 * only add it to zeros (a view, a rounding, one side of a sum): nothing zeroed, nothing added. Only as the backward's
 * last use of n->out->grad (the output loses it); 0 when it does not apply (then add as usual). */
int vc_grad_take(vc_graph *g, vc_node *n, vc_tensor *in) {
    vc_tensor *out = n->out;
    (void)g;
    if (!in || in->grad || in->is_param || !in->requires_grad || !out->grad || !out->grad_pooled || out->is_param ||
        in->n != out->n)
        return 0;
    for (int k = 0; k < VC_NODE_IN; k++)
        if (n->in[k] == out) return 0;
    in->grad = out->grad;
    in->grad_pooled = 1;
    out->grad = NULL;
    out->grad_pooled = 0;
    return 1;
}

float *vc_grad_fresh(vc_graph *g, vc_tensor *t) {
    if (t->grad || t->is_param) return NULL; /* (a parameter's gradient persists: never pooled memory) */
    size_t bytes = (size_t)t->n * sizeof(float);
    float *p = reuse_grad_raw(g, bytes);
    if (!p) p = vc_graph_dalloc(g, bytes, 0);
    t->grad = p;
    t->grad_pooled = p != NULL;
    return p;
}

void *vc_graph_scratch(vc_graph *g, size_t bytes) {
    void *p = reuse_grad_raw(g, bytes);
    return p ? p : vc_graph_dalloc(g, bytes, 0);
}

/* t's gradient += src (t->n floats): a copy into fresh memory when t has none yet (no zeroing first) */
void vc_grad_add(vc_graph *g, vc_tensor *t, const float *src) {
    const vc_backend *B = vc_be();
    float *p = vc_grad_fresh(g, t);
    if (p) {
        B->d2d(p, src, (size_t)t->n * sizeof(float));
        return;
    }
    float *d = vc_tensor_grad(g, t); /* (NULL: the graph holds the status) */
    if (d) B->axpy(d, 1.0f, src, t->n);
}

float *vc_tensor_grad(vc_graph *g, vc_tensor *t) {
    if (!t->grad) {
        size_t bytes = (size_t)t->n * sizeof(float);
        t->grad = reuse_grad(g, bytes);
        if (!t->grad) t->grad = vc_graph_dalloc(g, bytes, 1);
        t->grad_pooled = t->grad != NULL;
    }
    return t->grad;
}

void *vc_graph_temp(vc_graph *g, size_t bytes, int zero) {
    void *p = reuse_grad(g, bytes); /* zeroed */
    return p ? p : vc_graph_dalloc(g, bytes, zero);
}

void vc_graph_release(vc_graph *g, void *p, size_t bytes) {
    if (!p) return;
    if (g->n_freed == g->cap_freed) {
        int cap = g->cap_freed ? 2 * g->cap_freed : 64;
        struct freed *f = realloc(g->freed, (size_t)cap * sizeof *f);
        if (!f) return; /* kept: only memory reuse is lost */
        g->freed = f;
        g->cap_freed = cap;
    }
    g->freed[g->n_freed++] = (struct freed){ p, bytes };
}

/* backward has run node n: its output's gradient is dead (the output's consumers ran before it), unless
 * the node also takes the output as an input (an in-place op) */
static void hand_back(vc_graph *g, const vc_node *n) {
    for (int k = 0; k < VC_NODE_IN; k++)
        if (n->in[k] == n->out) return;
    vc_grad_release(g, n->out);
}

void vc_grad_release(vc_graph *g, vc_tensor *t) {
    if (!t->grad || !t->grad_pooled || t->is_param) return;
    vc_graph_release(g, t->grad, (size_t)t->n * sizeof(float));
    t->grad = NULL;
    t->grad_pooled = 0;
}

vc_node *vc_tape_push(vc_graph *g, vc_backward_fn fn, vc_tensor *out, int n_in, vc_tensor *const *in) {
    if (!g->grad) return NULL;
    if (n_in > VC_NODE_IN) {
        if (g->status == VC_OK) g->status = vc_fail(VC_ERR_INTERNAL, "tape: a node of %d inputs", n_in);
        return NULL;
    }
    int need = 0;
    for (int i = 0; i < n_in; i++) need |= in[i] && in[i]->requires_grad;
    if (!need) return NULL;
    if (g->n_nodes == g->cap_nodes) {
        int64_t cap = g->cap_nodes ? g->cap_nodes * 2 : 1024;
        vc_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            if (g->status == VC_OK) g->status = vc_fail(VC_ERR_NOMEM, "tape: cannot grow to %lld nodes", (long long)cap);
            return NULL;
        }
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    vc_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    n->backward = fn;
    n->out = out;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    out->requires_grad = 1;
    return n;
}

vc_status vc_node_writes(vc_graph *g, vc_node *n, int count, vc_tensor *const *t) {
    int k = 0;
    for (int i = 0; i < count; i++) k += t[i] != NULL;
    vc_tensor **more = k ? vc_graph_alloc(g, (size_t)k * sizeof *more, 0) : NULL;
    if (k && !more) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    n->n_more = 0;
    for (int i = 0; i < count; i++)
        if (t[i]) more[n->n_more++] = t[i];
    n->more = more;
    return VC_OK;
}

static void reshape_backward(vc_graph *g, vc_node *n) {
    if (vc_grad_take(g, n, n->in[0])) return;
    vc_grad_add(g, n->in[0], n->out->grad);
}

vc_tensor *vc_reshape(vc_graph *g, vc_tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    vc_tensor *t = vc_tensor_wrap(g, x->data, ndim, shape);
    if (!t) return NULL;
    if (t->n != x->n) {
        g->status = vc_fail(VC_ERR_INTERNAL, "reshape: %lld elements into %lld", (long long)x->n, (long long)t->n);
        return NULL;
    }
    vc_tape_push(g, reshape_backward, t, 1, &x);
    return t;
}

vc_status vc_graph_backward_from(vc_graph *g) {
    if (g->status != VC_OK) return g->status;
    for (int64_t i = g->n_nodes - 1; i >= 0; i--) {
        vc_node *n = &g->nodes[i];
        if (g->pre && (g->status = g->pre(g->pre_ctx, i)) != VC_OK) return g->status;
        if (n->out->grad) n->backward(g, n); /* else no gradient reached this node */
        if (g->status != VC_OK) return g->status;
        hand_back(g, n);
        if (g->hook) g->hook(g->hook_ctx, i);
    }
    return VC_OK;
}

void vc_graph_set_backward_hook(vc_graph *g, void (*fn)(void *ctx, int64_t node), void *ctx) {
    g->hook = fn;
    g->hook_ctx = ctx;
}

void vc_graph_set_backward_pre_hook(vc_graph *g, vc_status (*fn)(void *ctx, int64_t node), void *ctx) {
    g->pre = fn;
    g->pre_ctx = ctx;
}

const vc_node *vc_graph_tape(const vc_graph *g, int64_t *n) {
    *n = g->n_nodes;
    return g->nodes;
}

vc_status vc_graph_backward(vc_graph *g, vc_tensor *loss, float seed) {
    if (!loss || loss->n != 1) return vc_fail(VC_ERR_INTERNAL, "backward needs a scalar loss");
    float *gl = vc_tensor_grad(g, loss);
    float *sd = vc_graph_upload(g, &seed, sizeof seed);
    if (!gl || !sd) return g->status;
    vc_be()->axpy(gl, 1.0f, sd, 1); /* gl += seed, in backend memory */
    return vc_graph_backward_from(g);
}
