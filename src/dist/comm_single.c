/* Single-process communicator: one rank, so every collective is a copy or nothing. */
#include "dist_internal.h"
#include <stdlib.h>
#include <string.h>

static vc_status single_barrier(vc_comm *c) { return VC_OK; }
static vc_status single_bcast(vc_comm *c, void *buf, size_t bytes, int root) { return VC_OK; }
static vc_status single_allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op) { return VC_OK; }

static vc_status single_reduce_scatter(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    memcpy(out, in, n_per_rank * sizeof *out);
    return VC_OK;
}

static vc_status single_reduce_scatterv(vc_comm *c, const float *in, float *out, const size_t *counts) {
    memmove(out, in, counts[0] * sizeof *out); /* out may be in itself */
    return VC_OK;
}

static vc_status single_allgather(vc_comm *c, const void *in, void *out, size_t bytes_per_rank) {
    if (in) memcpy(out, in, bytes_per_rank);
    return VC_OK;
}

static vc_status single_gatherv(vc_comm *c, const void *in, size_t n, void **out_all, size_t **sizes, int root) {
    void *all = vc_malloc(n ? n : 1);
    size_t *sz = vc_malloc(sizeof *sz);
    if (!all || !sz) {
        free(all);
        free(sz);
        return VC_ERR_NOMEM;
    }
    if (n) memcpy(all, in, n);
    sz[0] = n;
    *out_all = all;
    *sizes = sz;
    return VC_OK;
}

static void single_destroy(vc_comm *c) {}

static const struct vc_comm_ops SINGLE_OPS = {
    .name = "single",
    .barrier = single_barrier,
    .bcast = single_bcast,
    .allreduce = single_allreduce,
    .allreduce_ordered = single_allreduce,
    .reduce_scatter_f32 = single_reduce_scatter,
    .reduce_scatter_ordered_f32 = single_reduce_scatter,
    .reduce_scatterv_ordered_f32 = single_reduce_scatterv,
    .allgather = single_allgather,
    .gatherv = single_gatherv,
    .destroy = single_destroy,
};

vc_status vc_dist_single_create(vc_comm *c) {
    c->ops = &SINGLE_OPS;
    c->rank = c->local_rank = 0;
    c->size = c->local_size = 1;
    return VC_OK;
}
