/* ZeRO-3: sharded weights, gathered one decoder layer at a time (trainer.sharding=zero3, the FSDP
 * FULL_SHARD analogue). Builds on ZeRO-2 (sharded gradients and AdamW state, dp_zero2.c).
 *
 * The f32 master weights are this rank's block of the flat vector (dp.c: [first, first + count)), and
 * AdamW updates them there. The model keeps full copies only of the tensors outside the decoder layers
 * (embedding, final norm, head, extra parameters: "globals"; refreshed from their owners after every
 * update) and of untrained buffers (vc_model_compact). A layer's trained tensors live in one of two slots
 * of the largest layer's size: layer l always in slot l % 2, at fixed offsets, so a tensor has the same
 * address whenever its layer is resident, and addresses saved in the tape stay right. A layer is
 * gathered into its slot (a broadcast from each rank whose block holds part of it, bucket-sized pieces)
 *  - in forward, before the decoder runs it (vc_model_set_layer_hook), and
 *  - in backward, before the first tape node that reads one of its weights (as input or declared by a
 *    checkpointed layer; vc_graph_set_backward_pre_hook)
 * unless the slot still holds it (the last two layers of a forward are still there when backward
 * starts). Slots hold copies only: nothing is written back.
 *
 * Every gather is a collective, issued at points fixed by the model's structure, interleaved with
 * ZeRO-2's chunk reductions (after tape nodes). So every rank must run the same number of micro-batches
 * in a step (vc_trainer_accumulate_ex checks it, and makes token-budget partitions equal like verl's
 * same_micro_num_in_dp), and the gradient reduction is not overlapped on a thread.
 *
 * Work outside a trainer step (evaluation, rollout, checkpoints) runs on full weights:
 * vc_trainer_full_weights(t, 1) gathers every layer into one full-size buffer (a collective) and points
 * the tensors there; (t, 0) copies this rank's block back into the master shard (so weights loaded from
 * a checkpoint meanwhile are kept) and frees it. Calls nest. A forward on sharded weights outside a step
 * fails with a message naming the layer. */
#include "trainer_dp.h"
#include "tensor/backend.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 16 /* floats */

typedef struct lref {
    uintptr_t p;
    int layer;
} lref;

typedef struct npend {
    int64_t node;
    int layer;
} npend;

struct vc_dp_zero3 {
    int L;
    int *tlayer;          /* [n_params] decoder layer of each trained tensor, -1 for globals */
    size_t *toff;         /* [n_params] offset inside its layer's block */
    size_t *loff;         /* [L + 1] offset of each layer's block in the full buffer */
    size_t slot_len;      /* floats of the largest layer's block */
    float *slot;          /* [2 * slot_len] backend memory */
    int resident[2];      /* layer held by each slot, -1 none */
    float *full;          /* [loff[L]] while full_refs > 0 */
    int full_refs;
    float *master;        /* [shard_len] this rank's f32 master weights (backend memory) */
    size_t n_kept;        /* floats every rank keeps whole: the model's other tensors and extra parameters */
    int active;           /* inside the trainer's micro-batches: gathers allowed */
    lref *map;            /* layer tensors by address (backward pre-hook) */
    int n_map;
    npend *pend;          /* this backward's first node of each layer, descending */
    int n_pend, next;
    int64_t gathers;      /* layers gathered (statistics) */
};

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int lref_cmp(const void *a, const void *b) {
    uintptr_t x = ((const lref *)a)->p, y = ((const lref *)b)->p;
    return x < y ? -1 : x > y;
}

/* Broadcasts the flat range [a, b) from its owners into the trained tensors (d->w), in pieces of the
 * communication buffer; each owner reads its part from the master shard. */
static vc_status bcast_range(vc_trainer *t, size_t a, size_t b) {
    struct vc_trainer_dp *d = t->dp;
    struct vc_dp_zero3 *z = d->z3;
    size_t cap = ((size_t)d->world + 1) * d->bucket;
    vc_status st = VC_OK;
    while (a < b && !st) {
        int r = (int)(a / d->shard_len);
        size_t n = min_sz(min_sz(b, ((size_t)r + 1) * d->shard_len) - a, cap);
        if (r == d->rank) vc_dp_to_comm(d, d->buf, z->master + (a - d->first), n);
        st = vc_comm_bcast(d->comm, d->buf, n * sizeof(float), r);
        if (!st) vc_dp_flat_write(t, d->w, a, n, d->buf);
        a += n;
    }
    return st;
}

/* Broadcasts the runs of consecutive trained tensors of `layer` (-1: the globals). */
static vc_status bcast_group(vc_trainer *t, int layer) {
    struct vc_trainer_dp *d = t->dp;
    vc_status st = VC_OK;
    for (int i = 0; i < t->n_params && !st;) {
        if (d->z3->tlayer[i] != layer) {
            i++;
            continue;
        }
        int j = i;
        while (j < t->n_params && d->z3->tlayer[j] == layer) j++;
        st = bcast_range(t, d->offs[i], d->offs[j]);
        i = j;
    }
    return st;
}

/* Points layer l's tensors at base (its block) and records the addresses for the flat copies. */
static void point_layer(vc_trainer *t, int l, float *base) {
    struct vc_trainer_dp *d = t->dp;
    for (int k = 0; k < t->n_params; k++)
        if (d->z3->tlayer[k] == l) d->w[k] = d->tens[k]->data = base + d->z3->toff[k];
}

static float *slot_of(const struct vc_dp_zero3 *z, int l) { return z->slot + (size_t)(l & 1) * z->slot_len; }

static vc_status gather_layer(vc_trainer *t, int l) {
    struct vc_dp_zero3 *z = t->dp->z3;
    if (z->full_refs || z->resident[l & 1] == l) return VC_OK;
    z->resident[l & 1] = -1;
    vc_status st = bcast_group(t, l);
    if (st) return vc_fail_ctx(st, "ZeRO-3: gathering layer %d's weights", l);
    z->resident[l & 1] = l;
    z->gathers++;
    return VC_OK;
}

static vc_status layer_hook(void *ctx, int l) {
    vc_trainer *t = ctx;
    struct vc_dp_zero3 *z = t->dp->z3;
    if (z->full_refs || l >= z->L) return VC_OK; /* (an MTP row past the decoder's layers: never sharded) */
    if (!z->active)
        return vc_fail(VC_ERR_UNSUPPORTED, "ZeRO-3: layer %d's weights are sharded over the ranks outside the "
                       "trainer step (vc_trainer_full_weights gathers them for other work)", l);
    return gather_layer(t, l);
}

/* ---- setup ---- */
static vc_status layout(vc_trainer *t, struct vc_dp_zero3 *z) {
    struct vc_trainer_dp *d = t->dp;
    vc_model *m = t->model;
    int np = vc_model_n_params(m);
    z->L = (int)vc_model_cfg(m)->n_layer;
    z->tlayer = vc_calloc((size_t)t->n_params + 1, sizeof *z->tlayer);
    z->toff = vc_calloc((size_t)t->n_params + 1, sizeof *z->toff);
    z->loff = vc_calloc((size_t)z->L + 1, sizeof *z->loff);
    z->map = vc_calloc((size_t)t->n_params + 1, sizeof *z->map);
    z->pend = vc_calloc((size_t)z->L + 1, sizeof *z->pend);
    if (!z->tlayer || !z->toff || !z->loff || !z->map || !z->pend) return VC_ERR_NOMEM;
    size_t *lsz = vc_calloc((size_t)z->L + 1, sizeof *lsz);
    if (!lsz) return VC_ERR_NOMEM;
    for (int k = 0; k < t->n_params; k++) {
        z->tlayer[k] = -1;
        for (int i = 0; i < np; i++)
            if (vc_model_param(m, i, NULL, NULL) == d->tens[k]) z->tlayer[k] = vc_model_param_layer(m, i);
        int l = z->tlayer[k];
        if (l < 0 || l >= z->L) {
            z->tlayer[k] = -1;
            continue;
        }
        z->toff[k] = lsz[l];
        lsz[l] += up(t->sizes[k]);
        z->map[z->n_map++] = (lref){ (uintptr_t)d->tens[k], l };
    }
    qsort(z->map, (size_t)z->n_map, sizeof *z->map, lref_cmp);
    for (int l = 0; l < z->L; l++) {
        z->loff[l + 1] = z->loff[l] + lsz[l];
        if (lsz[l] > z->slot_len) z->slot_len = lsz[l];
    }
    free(lsz);
    return VC_OK;
}

/* this rank's block of the weights into the master shard, from the tensors (d->w) */
static void to_master(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    size_t cap = ((size_t)d->world + 1) * d->bucket;
    for (size_t k = 0; k < d->count; k += cap) {
        size_t n = min_sz(cap, d->count - k);
        vc_dp_flat_read(t, d->w, d->first + k, n, d->buf);
        vc_dp_from_comm(d, d->z3->master + k, d->buf, n);
    }
}

vc_status vc_dp_zero3_init(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    struct vc_dp_zero3 *z = vc_calloc(1, sizeof *z);
    if (!z) return VC_ERR_NOMEM;
    d->z3 = z;
    z->resident[0] = z->resident[1] = -1;
    vc_status st = layout(t, z);
    if (st) return st;
    z->master = vc_be()->alloc((d->shard_len ? d->shard_len : 1) * sizeof(float));
    z->slot = vc_be()->alloc((z->slot_len ? 2 * z->slot_len : 1) * sizeof(float));
    if (!z->master || !z->slot) return vc_fail(VC_ERR_NOMEM, "ZeRO-3: the weight shard and layer slots");
    to_master(t);
    int np = vc_model_n_params(t->model);
    uint8_t *ext = vc_calloc((size_t)np + 1, 1);
    if (!ext) return VC_ERR_NOMEM;
    for (int i = 0; i < np; i++) {
        vc_tensor *p = vc_model_param(t->model, i, NULL, NULL);
        for (int k = 0; k < t->n_params; k++)
            if (d->tens[k] == p && z->tlayer[k] >= 0) ext[i] = 1;
    }
    for (int i = 0; i < np; i++)
        if (!ext[i]) z->n_kept += (size_t)vc_model_param(t->model, i, NULL, NULL)->n;
    for (int k = 0; k < t->cfg.n_extra_params && t->cfg.extra_params; k++) z->n_kept += (size_t)t->cfg.extra_params[k]->n;
    st = vc_model_compact(t->model, ext);
    free(ext);
    if (st) return st;
    for (int k = 0; k < t->n_params; k++) d->w[k] = d->tens[k]->data; /* the globals moved */
    for (int l = 0; l < z->L; l++) point_layer(t, l, slot_of(z, l));
    vc_model_set_layer_hook(t->model, layer_hook, t);
    return VC_OK;
}

void vc_dp_zero3_free(vc_trainer *t) {
    struct vc_dp_zero3 *z = t->dp ? t->dp->z3 : NULL;
    if (!z) return;
    if (t->model) {
        vc_model_set_layer_hook(t->model, NULL, NULL);
        for (int k = 0; k < t->n_params; k++)
            if (z->tlayer[k] >= 0) t->dp->tens[k]->data = NULL; /* their memory goes with the trainer */
    }
    vc_be()->free(z->master);
    vc_be()->free(z->slot);
    vc_be()->free(z->full);
    free(z->tlayer);
    free(z->toff);
    free(z->loff);
    free(z->map);
    free(z->pend);
    free(z);
    t->dp->z3 = NULL;
}

float *vc_dp_zero3_master(const vc_trainer *t) { return t->dp && t->dp->z3 ? t->dp->z3->master : NULL; }

void vc_dp_zero3_active(vc_trainer *t, int on) {
    if (t->dp && t->dp->z3) t->dp->z3->active = on;
}

/* ---- backward ---- */
static vc_status pre_hook(void *ctx, int64_t node) {
    vc_trainer *t = ctx;
    struct vc_dp_zero3 *z = t->dp->z3;
    vc_status st = VC_OK;
    while (!st && z->next < z->n_pend && z->pend[z->next].node == node) st = gather_layer(t, z->pend[z->next++].layer);
    return st;
}

static int layer_of(const struct vc_dp_zero3 *z, const vc_tensor *p) {
    lref key = { (uintptr_t)p, 0 };
    const lref *f = p ? bsearch(&key, z->map, (size_t)z->n_map, sizeof *z->map, lref_cmp) : NULL;
    return f ? f->layer : -1;
}

static int npend_cmp(const void *a, const void *b) {
    int64_t x = ((const npend *)a)->node, y = ((const npend *)b)->node;
    return x > y ? -1 : x < y; /* descending: backward's order */
}

vc_status vc_dp_zero3_begin(vc_trainer *t) {
    struct vc_dp_zero3 *z = t->dp->z3;
    int64_t n = 0;
    const vc_node *nodes = vc_graph_tape(t->g, &n);
    for (int l = 0; l < z->L; l++) z->pend[l] = (npend){ -1, l };
    for (int64_t i = 0; i < n; i++) {
        const vc_node *nd = &nodes[i];
        for (int k = 0; k < VC_NODE_IN + nd->n_more; k++) {
            int l = layer_of(z, k < VC_NODE_IN ? nd->in[k] : nd->more[k - VC_NODE_IN]);
            if (l >= 0 && i > z->pend[l].node) z->pend[l].node = i;
        }
    }
    qsort(z->pend, (size_t)z->L, sizeof *z->pend, npend_cmp);
    z->n_pend = 0;
    while (z->n_pend < z->L && z->pend[z->n_pend].node >= 0) z->n_pend++;
    z->next = 0;
    vc_graph_set_backward_pre_hook(t->g, pre_hook, t);
    return VC_OK;
}

void vc_dp_zero3_end(vc_trainer *t) { vc_graph_set_backward_pre_hook(t->g, NULL, NULL); }

/* ---- after the optimiser step, and full weights ---- */
vc_status vc_dp_zero3_refresh(vc_trainer *t) {
    struct vc_dp_zero3 *z = t->dp->z3;
    z->resident[0] = z->resident[1] = -1;
    vc_status st = bcast_group(t, -1);
    for (int l = 0; z->full_refs && l < z->L && !st; l++) st = bcast_group(t, l);
    return st ? vc_fail_ctx(st, "ZeRO-3: gathering the updated weights") : VC_OK;
}

vc_status vc_trainer_full_weights(vc_trainer *t, int on) {
    struct vc_dp_zero3 *z = t->dp ? t->dp->z3 : NULL;
    if (!z) return VC_OK;
    if (on && z->full_refs++) return VC_OK;
    if (!on && (z->full_refs <= 0 || --z->full_refs)) return VC_OK;
    if (!on) {
        to_master(t);
        for (int l = 0; l < z->L; l++) point_layer(t, l, slot_of(z, l));
        vc_be()->free(z->full);
        z->full = NULL;
        z->resident[0] = z->resident[1] = -1;
        return VC_OK;
    }
    z->full = vc_be()->alloc((z->loff[z->L] ? z->loff[z->L] : 1) * sizeof(float));
    if (!z->full) {
        z->full_refs = 0;
        return vc_fail(VC_ERR_NOMEM, "ZeRO-3: cannot allocate %.1f MB for the full weights", z->loff[z->L] * 4e-6);
    }
    for (int l = 0; l < z->L; l++) point_layer(t, l, z->full + z->loff[l]);
    vc_status st = VC_OK;
    for (int l = 0; l < z->L && !st; l++) st = bcast_group(t, l);
    return st ? vc_fail_ctx(st, "ZeRO-3: gathering the full weights") : VC_OK;
}

int vc_dp_zero3_replicated(const vc_trainer *t, int i) {
    const struct vc_dp_zero3 *z = t->dp ? t->dp->z3 : NULL;
    return !z || z->full_refs || z->tlayer[i] < 0;
}

size_t vc_dp_zero3_weight_floats(const vc_trainer *t, size_t *master, size_t *slots, size_t *kept) {
    const struct vc_dp_zero3 *z = t->dp->z3;
    *master = t->dp->shard_len;
    *slots = 2 * z->slot_len + (z->full ? z->loff[z->L] : 0);
    *kept = z->n_kept;
    return *master + *slots + *kept;
}

int64_t vc_dp_zero3_gathers(const vc_trainer *t) { return t->dp && t->dp->z3 ? t->dp->z3->gathers : 0; }
