/* Tensors, the step arena and the autograd tape.
 *
 * Compute tensors are contiguous f32 views: `data` points into an arena (activations) or into a
 * model's weight storage (parameters); a tensor never owns its memory. When gradients are on, each op
 * pushes a node onto the graph's tape; vc_graph_backward walks the tape in reverse. */
#ifndef VERLC_TENSOR_H
#define VERLC_TENSOR_H
#include "verlc/core.h"
#include <stdint.h>

#define VC_MAX_DIMS 4

typedef struct vc_tensor {
    float *data;       /* backend memory (device memory on a GPU) */
    float *grad;       /* backend memory; NULL until a gradient flows here; parameters own a persistent buffer */
    int64_t shape[VC_MAX_DIMS];
    int64_t n;         /* number of elements */
    int ndim;
    uint8_t requires_grad;
    uint8_t is_param;  /* grad buffer is persistent and accumulates across backward calls */
    uint8_t grad_pooled; /* grad came from vc_tensor_grad: backward hands it back once the producer ran */
} vc_tensor;

typedef struct vc_graph vc_graph;
struct vc_node;
typedef void (*vc_backward_fn)(vc_graph *g, struct vc_node *n);

/* A tape node. Its backward writes the gradients of its inputs in[] and, when n_more > 0, of the tensors
 * more[0 .. n_more) too: tensors it uses without taking them as inputs, e.g. the weights of a layer that a
 * gradient-checkpointing node re-runs on a scratch graph (src/model/decoder.c). Whoever needs to know
 * which node writes which gradient (data-parallel overlap, ZeRO-2's gradient memory plan) reads both;
 * a node's backward writes these gradients only while it runs. Set more with vc_node_writes after
 * vc_tape_push (NULL / 0 otherwise). */
#define VC_NODE_IN 13 /* inputs of one node at most */
typedef struct vc_node {
    vc_backward_fn backward;
    vc_tensor *out;
    vc_tensor *in[VC_NODE_IN];
    void *saved;        /* op-specific, arena memory */
    const void *ptr[4]; /* op-specific pointers to constant data (ids, indices, sequence layout) */
    double f[4];
    int64_t i[8];
    vc_tensor **more;   /* [n_more] further tensors whose gradients backward writes (graph arena memory) */
    int n_more;
} vc_node;

/* Graph: an arena for the tensors of one step plus the tape. */
vc_graph *vc_graph_new(void);
void vc_graph_free(vc_graph *g);
void vc_graph_reset(vc_graph *g);                /* O(1): forgets all tensors and nodes */
void vc_graph_set_grad(vc_graph *g, int enabled); /* record the tape? */
int vc_graph_grad_enabled(const vc_graph *g);
size_t vc_graph_peak_bytes(const vc_graph *g); /* the most in use at once, its children's use included */
void vc_graph_clear_peak(vc_graph *g); /* the peak from now on (a memory plan's trial measures itself alone) */
void vc_graph_trim(vc_graph *g); /* reset, and its memory (and its kept child's) given back to the system */
size_t vc_graph_used_bytes(const vc_graph *g);
/* A scratch graph for work inside one of g's nodes (a checkpointed layer's recompute, a head walked in chunks):
 * g keeps it between uses (empty, its memory kept, so steady-state steps allocate nothing), and what it holds
 * counts in g's peak. Release it when the node is done; taken again before that, a fresh one is made and freed
 * at its release. NULL when out of memory. */
vc_graph *vc_graph_child(vc_graph *g);
void vc_graph_child_release(vc_graph *child);
/* Backward from a scalar (n == 1) tensor with seed gradient `seed` (usually 1). Gradients
 * accumulate into parameters' persistent grad buffers. */
vc_status vc_graph_backward(vc_graph *g, vc_tensor *loss, float seed);
/* Backward from a tensor whose gradient the caller has filled (out->grad set via vc_tensor_grad). */
vc_status vc_graph_backward_from(vc_graph *g);
/* Status of the first failed allocation or op since the last reset (VC_OK if none). */
vc_status vc_graph_status(const vc_graph *g);

/* Mark / rewind: everything allocated after a mark is released by rewinding to it. Only valid when no
 * tape node recorded after the mark is still needed (inference). */
typedef struct {
    void *chunk;
    size_t used, total;
    int64_t nodes;
    void *dchunk;
    size_t dused, dtotal;
} vc_graph_mark;
vc_graph_mark vc_graph_get_mark(const vc_graph *g);
void vc_graph_rewind(vc_graph *g, vc_graph_mark mark);

/* Arena allocation from the graph (64-byte aligned; zeroed when `zero`). NULL on failure, and the
 * graph's status is set. vc_graph_alloc gives HOST memory (tensor headers, saved host metadata);
 * vc_graph_dalloc gives BACKEND memory (tensor data and gradients, anything a backend entry reads or
 * writes), from the active backend's allocator: device memory on a GPU. See src/tensor/backend.h. */
void *vc_graph_alloc(vc_graph *g, size_t bytes, int zero);
void *vc_graph_dalloc(vc_graph *g, size_t bytes, int zero);
/* vc_graph_dalloc for memory the caller can do without (a cache): NULL on failure, the graph's status untouched */
void *vc_graph_dalloc_try(vc_graph *g, size_t bytes);
/* Backward temporaries (backend memory): vc_graph_temp takes a buffer handed back earlier in this backward
 * when one holds `bytes` (zeroed then), else arena memory (zeroed when zero); vc_graph_release hands one
 * back (bytes as asked) once the node is done with it, for later gradients and temporaries. */
void *vc_graph_temp(vc_graph *g, size_t bytes, int zero);
void vc_graph_release(vc_graph *g, void *p, size_t bytes);
/* Copies a host array into new backend memory of the graph (ids, targets, rope tables, weights). */
void *vc_graph_upload(vc_graph *g, const void *src, size_t bytes);
/* Copies t's data (or its gradient) to the host array dst (t->n floats). */
vc_status vc_tensor_read(const vc_tensor *t, float *dst);
vc_status vc_tensor_read_grad(const vc_tensor *t, float *dst);
/* Copies the host array src (t->n floats) into t's data. */
vc_status vc_tensor_write(vc_tensor *t, const float *src);
vc_tensor *vc_tensor_new(vc_graph *g, int ndim, const int64_t *shape, int zero);
vc_tensor *vc_tensor_2d(vc_graph *g, int64_t a, int64_t b, int zero);
/* A tensor header (in the arena) over existing memory, e.g. a parameter or a caller's buffer. */
vc_tensor *vc_tensor_wrap(vc_graph *g, float *data, int ndim, const int64_t *shape);
/* Same data, new shape (element count must match); gradients flow through. */
vc_tensor *vc_reshape(vc_graph *g, vc_tensor *x, int ndim, const int64_t *shape);
/* Gradient buffer of t, allocated zeroed in the arena when first needed. */
float *vc_tensor_grad(vc_graph *g, vc_tensor *t);
/* In a backward function: node n's output gradient handed to input `in` as its gradient when in has none yet (the
 * node would add it to zeros): 1 when done, n->out->grad is then gone (call it last); 0: add as usual. */
int vc_grad_take(vc_graph *g, vc_node *n, vc_tensor *in);
/* t's pooled gradient handed back for later gradients and temporaries (its readers have run: a node's other
 * outputs, as the tape hands back each node's own); nothing for a parameter's or none */
void vc_grad_release(vc_graph *g, vc_tensor *t);
/* t's gradient += src (t->n floats in backend memory): copied into fresh memory when t has none yet. */
void vc_grad_add(vc_graph *g, vc_tensor *t, const float *src);
/* t's gradient buffer, uninitialised, when t has none yet (the caller writes all of it); NULL when it has one, is
 * a parameter or memory ran out (then use vc_tensor_grad and add). */
float *vc_grad_fresh(vc_graph *g, vc_tensor *t);
/* A backward temporary like vc_graph_temp's, uninitialised (the caller writes all of it before reading). */
void *vc_graph_scratch(vc_graph *g, size_t bytes);
/* Initialise a free-standing parameter tensor header (memory owned by the caller). */
void vc_param_init(vc_tensor *t, float *data, float *grad, int ndim, const int64_t *shape);

/* The tape recorded so far: *n nodes in push order (backward visits them in reverse). */
const vc_node *vc_graph_tape(const vc_graph *g, int64_t *n);
/* fn(ctx, i) runs after backward has processed (or skipped) tape node i, for i = n - 1 down to 0; NULL
 * removes it. Data-parallel training uses it to start gradient reductions while backward continues. */
void vc_graph_set_backward_hook(vc_graph *g, void (*fn)(void *ctx, int64_t node), void *ctx);
/* fn(ctx, i) runs before backward processes (or skips) tape node i, for i = n - 1 down to 0; a non-OK
 * status stops backward with it. NULL removes it. ZeRO-3 gathers a layer's weights before its nodes. */
void vc_graph_set_backward_pre_hook(vc_graph *g, vc_status (*fn)(void *ctx, int64_t node), void *ctx);

/* Pushes a node if gradients are enabled and any input requires them; returns the node or NULL. */
vc_node *vc_tape_push(vc_graph *g, vc_backward_fn fn, vc_tensor *out, int n_in, vc_tensor *const *in);
/* Declares that n's backward also writes the gradients of t[0 .. count) (n->more, copied into the graph's
 * arena; NULL entries are skipped). Replaces an earlier declaration; VC_ERR_NOMEM when the arena is full. */
vc_status vc_node_writes(vc_graph *g, vc_node *n, int count, vc_tensor *const *t);
#endif
