/* Communicator internals: the implementation table behind include/verlc/dist.h. The front end
 * (comm.c) checks arguments, counts time and names the rank and collective in error messages; an
 * implementation only moves data and reports what went wrong. */
#ifndef VC_DIST_INTERNAL_H
#define VC_DIST_INTERNAL_H
#include "verlc/dist.h"

enum vc_dist_dtype { VC_DIST_F32, VC_DIST_F64 };

static inline size_t vc_dist_dtype_size(int dtype) { return dtype == VC_DIST_F64 ? 8 : 4; }

struct vc_comm_ops {
    const char *name;
    vc_status (*barrier)(vc_comm *c);
    vc_status (*bcast)(vc_comm *c, void *buf, size_t bytes, int root);
    vc_status (*allreduce)(vc_comm *c, void *buf, size_t n, int dtype, int op);
    vc_status (*allreduce_ordered)(vc_comm *c, void *buf, size_t n, int dtype, int op);
    vc_status (*reduce_scatter_f32)(vc_comm *c, const float *in, float *out, size_t n_per_rank);
    /* optional: NULL falls back to an ordered allreduce of a host copy */
    vc_status (*reduce_scatter_ordered_f32)(vc_comm *c, const float *in, float *out, size_t n_per_rank);
    /* counts[r] floats of in go to rank r; out may be this rank's piece of in */
    vc_status (*reduce_scatterv_ordered_f32)(vc_comm *c, const float *in, float *out, const size_t *counts);
    /* in == NULL means in place (the rank's block of out already holds the data) */
    vc_status (*allgather)(vc_comm *c, const void *in, void *out, size_t bytes_per_rank);
    vc_status (*gatherv)(vc_comm *c, const void *in, size_t n, void **out_all, size_t **sizes, int root);
    /* optional (NULL: host memory) */
    vc_status (*mem_alloc)(vc_comm *c, size_t bytes, void **out);
    void (*mem_free)(vc_comm *c, void *p);
    vc_status (*mem_copy)(vc_comm *c, void *dst, const void *src, size_t bytes, int to_device);
    void (*abort)(vc_comm *c, int code);
    void (*destroy)(vc_comm *c); /* frees impl; must not talk to peers when c->broken */
};

struct vc_comm {
    const struct vc_comm_ops *ops;
    void *impl;
    int rank, size, local_rank, local_size;
    int device;       /* CUDA ordinal or -1 */
    int on_device;    /* collectives take device pointers */
    double timeout_s; /* 0: wait forever */
    double deadline;  /* vc_now() limit of the collective in progress; 0: none */
    int broken;       /* set after a timeout or transport failure; later calls fail at once */
    vc_comm_stats stats;
};

/* Implementations. Each fills a zeroed vc_comm (ops, impl, ranks) or fails with a message. */
vc_status vc_dist_single_create(vc_comm *c);
vc_status vc_dist_mpi_create(vc_comm *c, int *argc, char ***argv);
#ifdef VC_HAVE_NCCL
vc_status vc_dist_nccl_create(vc_comm *c, int *argc, char ***argv);
#endif

/* acc[i] = op(acc[i], x[i]) for i < n; max/min propagate NaN. */
void vc_dist_reduce_into(void *acc, const void *x, size_t n, int dtype, int op);
/* dst = src_0 op src_1 op ... op src_{k-1}, left to right; src_r = base + r * stride elements. */
void vc_dist_reduce_ordered(void *dst, const void *base, size_t stride, int k, size_t n, int dtype, int op);
/* Balanced split of n elements over p parts: part r has n/p + (r < n%p) elements starting at *first. */
void vc_dist_split(size_t n, int p, int r, size_t *first, size_t *count);

/* Adds bytes that this rank sends to peers to its statistics (vc_comm_stats.bytes_sent). */
static inline void vc_dist_sent(vc_comm *c, double bytes) { c->stats.bytes_sent += bytes; }

/* Seconds from VERLC_DIST_TIMEOUT (default 300), or VC_ERR_ARG for a malformed value. */
vc_status vc_dist_timeout_from_env(double *out);

#endif
