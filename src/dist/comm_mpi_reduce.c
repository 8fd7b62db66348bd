/* MPI reductions.
 * Small messages (all ranks' data together under VC_SMALL_BYTES): one allgather, then every rank sums
 * the P contributions in rank order itself: one latency, and the ordered result for free.
 * Large messages, plain: MPI reduce-scatter (each element reduced once, in MPI's order) and an
 * in-place allgatherv, so every rank holds the same bits without a full-size scratch buffer.
 * Large messages, ordered: an alltoallv hands rank r every rank's copy of chunk r, rank r sums them in
 * rank order, and an allgatherv spreads the chunks: the bits never depend on MPI's algorithm.
 * Ordered reduce-scatterv: the same alltoallv without the allgatherv (half the traffic).
 * Every path adds the bytes this rank hands to MPI for its peers to vc_comm_stats.bytes_sent. */
#ifdef VC_HAVE_MPI
#include "mpi_internal.h"
#include <limits.h>
#include <string.h>

#define VC_SMALL_BYTES ((size_t)256 << 10)

static MPI_Datatype mpi_type(int dtype) { return dtype == VC_DIST_F64 ? MPI_DOUBLE : MPI_FLOAT; }
static MPI_Op mpi_op(int op) { return op == VC_SUM ? MPI_SUM : op == VC_MAX ? MPI_MAX : MPI_MIN; }

static vc_status run(vc_comm *c, int rc, MPI_Request *req, const char *call) {
    if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, call);
    return vc_mpi_wait(c, req, call);
}

static vc_status small_allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op) {
    struct vc_mpi *m = c->impl;
    size_t es = vc_dist_dtype_size(dtype);
    void *all;
    MPI_Request req;
    vc_status st = vc_mpi_scratch(m, n * es * c->size, &all);
    if (st) return st;
    st = run(c, MPI_Iallgather(buf, (int)n, mpi_type(dtype), all, (int)n, mpi_type(dtype), m->comm, &req), &req,
             "MPI_Iallgather");
    if (st) return st;
    vc_dist_sent(c, (double)n * es * (c->size - 1));
    vc_dist_reduce_ordered(buf, all, n, c->size, n, dtype, op);
    return VC_OK;
}

/* counts/displs of the balanced split of n over the ranks into m->ia[0..P) and m->ia[P..2P) */
static void split_all(vc_comm *c, size_t n) {
    struct vc_mpi *m = c->impl;
    for (int r = 0; r < c->size; r++) {
        size_t first, count;
        vc_dist_split(n, c->size, r, &first, &count);
        m->ia[r] = (int)count;
        m->ia[c->size + r] = (int)first;
    }
}

static vc_status plain_segment(vc_comm *c, char *seg, size_t n, int dtype, int op) {
    struct vc_mpi *m = c->impl;
    int P = c->size, *counts = m->ia, *displs = m->ia + P;
    size_t es = vc_dist_dtype_size(dtype);
    MPI_Request req;
    split_all(c, n);
    /* in place: the whole segment goes in, this rank's reduced chunk comes back at its start */
    vc_status st = run(c, MPI_Ireduce_scatter(MPI_IN_PLACE, seg, counts, mpi_type(dtype), mpi_op(op), m->comm, &req),
                       &req, "MPI_Ireduce_scatter");
    if (st) return st;
    vc_dist_sent(c, (double)(n - (size_t)counts[c->rank]) * es + (double)counts[c->rank] * es * (P - 1));
    memmove(seg + (size_t)displs[c->rank] * es, seg, (size_t)counts[c->rank] * es);
    return run(c, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, seg, counts, displs, mpi_type(dtype), m->comm,
                                  &req),
               &req, "MPI_Iallgatherv");
}

static vc_status ordered_segment(vc_comm *c, char *seg, size_t n, int dtype, int op) {
    struct vc_mpi *m = c->impl;
    int P = c->size, me = c->rank;
    int *counts = m->ia, *displs = m->ia + P, *rcounts = m->ia + 2 * P, *rdispls = m->ia + 3 * P;
    size_t es = vc_dist_dtype_size(dtype);
    void *recv;
    MPI_Request req;
    split_all(c, n);
    for (int r = 0; r < P; r++) {
        rcounts[r] = counts[me];
        rdispls[r] = r * counts[me];
    }
    vc_status st = vc_mpi_scratch(m, (size_t)P * counts[me] * es + es, &recv);
    if (st) return st;
    st = run(c, MPI_Ialltoallv(seg, counts, displs, mpi_type(dtype), recv, rcounts, rdispls, mpi_type(dtype),
                               m->comm, &req),
             &req, "MPI_Ialltoallv");
    if (st) return st;
    vc_dist_sent(c, (double)(n - (size_t)counts[me]) * es + (double)counts[me] * es * (P - 1));
    vc_dist_reduce_ordered(seg + (size_t)displs[me] * es, recv, counts[me], P, counts[me], dtype, op);
    return run(c, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, seg, counts, displs, mpi_type(dtype), m->comm,
                                  &req),
               &req, "MPI_Iallgatherv");
}

static vc_status allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op, int ordered) {
    size_t es = vc_dist_dtype_size(dtype);
    if (c->size == 1) return VC_OK;
    if (n * es * c->size <= VC_SMALL_BYTES) return small_allreduce(c, buf, n, dtype, op);
    size_t segment = ((struct vc_mpi *)c->impl)->segment;
    for (size_t off = 0; off < n; off += segment) {
        size_t len = n - off < segment ? n - off : segment;
        char *seg = (char *)buf + off * es;
        vc_status st = ordered ? ordered_segment(c, seg, len, dtype, op) : plain_segment(c, seg, len, dtype, op);
        if (st) return st;
    }
    return VC_OK;
}

vc_status vc_mpi_allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op) {
    return allreduce(c, buf, n, dtype, op, 0);
}

vc_status vc_mpi_allreduce_ordered(vc_comm *c, void *buf, size_t n, int dtype, int op) {
    return allreduce(c, buf, n, dtype, op, 1);
}

vc_status vc_mpi_reduce_scatter_f32(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    struct vc_mpi *m = c->impl;
    MPI_Request req;
    if (n_per_rank > VC_MPI_MAX_COUNT)
        return vc_fail(VC_ERR_UNSUPPORTED, "more than %zu floats per rank", VC_MPI_MAX_COUNT);
    vc_dist_sent(c, (double)n_per_rank * sizeof(float) * (c->size - 1));
    return run(c, MPI_Ireduce_scatter_block(in, out, (int)n_per_rank, MPI_FLOAT, MPI_SUM, m->comm, &req), &req,
               "MPI_Ireduce_scatter_block");
}

/* An alltoall hands this rank every rank's copy of its block; they are summed in rank order. */
vc_status vc_mpi_reduce_scatter_ordered_f32(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    struct vc_mpi *m = c->impl;
    MPI_Request req;
    void *recv;
    if (n_per_rank > VC_MPI_MAX_COUNT)
        return vc_fail(VC_ERR_UNSUPPORTED, "more than %zu floats per rank", VC_MPI_MAX_COUNT);
    vc_status st = vc_mpi_scratch(m, (size_t)c->size * n_per_rank * sizeof(float), &recv);
    if (st) return st;
    st = run(c, MPI_Ialltoall(in, (int)n_per_rank, MPI_FLOAT, recv, (int)n_per_rank, MPI_FLOAT, m->comm, &req), &req,
             "MPI_Ialltoall");
    if (st) return st;
    vc_dist_sent(c, (double)n_per_rank * sizeof(float) * (c->size - 1));
    vc_dist_reduce_ordered(out, recv, n_per_rank, c->size, n_per_rank, VC_DIST_F32, VC_SUM);
    return VC_OK;
}

/* One round of the reduce-scatterv: floats [off, off + segment) of every rank's piece. */
static vc_status scatterv_round(vc_comm *c, const float *in, float *out, const size_t *counts, size_t off) {
    struct vc_mpi *m = c->impl;
    int P = c->size, me = c->rank;
    int *sc = m->ia, *sd = m->ia + P, *rc = m->ia + 2 * P, *rd = m->ia + 3 * P;
    size_t piece = 0, sent = 0, mine = counts[me] > off ? counts[me] - off : 0;
    if (mine > m->segment) mine = m->segment;
    for (int r = 0; r < P; r++) {
        size_t len = counts[r] > off ? counts[r] - off : 0;
        if (len > m->segment) len = m->segment;
        sc[r] = (int)len;
        sd[r] = (int)(piece + (len ? off : 0));
        rc[r] = (int)mine;
        rd[r] = (int)((size_t)r * mine);
        if (r != me) sent += len;
        piece += counts[r];
    }
    float *recv;
    MPI_Request req;
    vc_status st = vc_mpi_scratch(m, ((size_t)P * mine + 1) * sizeof(float), (void **)&recv);
    if (st) return st;
    st = run(c, MPI_Ialltoallv(in, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, m->comm, &req), &req,
             "MPI_Ialltoallv");
    if (st) return st;
    vc_dist_sent(c, (double)sent * sizeof(float));
    /* in place: out + off is this rank's piece of in at off, which the alltoallv has sent already */
    vc_dist_reduce_ordered(out + off, recv, mine, P, mine, VC_DIST_F32, VC_SUM);
    return VC_OK;
}

/* An alltoallv hands this rank every rank's copy of its piece, summed in rank order, in rounds of at most
 * VERLC_DIST_SEGMENT floats per piece (the same rounds on every rank: the counts are). */
vc_status vc_mpi_reduce_scatterv_ordered_f32(vc_comm *c, const float *in, float *out, const size_t *counts) {
    struct vc_mpi *m = c->impl;
    size_t total = 0, most = 0;
    for (int r = 0; r < c->size; r++) {
        total += counts[r];
        if (counts[r] > most) most = counts[r];
    }
    if (total > INT_MAX)
        return vc_fail(VC_ERR_UNSUPPORTED, "more than %d floats in one reduce-scatterv", INT_MAX);
    vc_status st = VC_OK;
    for (size_t off = 0; off < most && !st; off += m->segment) st = scatterv_round(c, in, out, counts, off);
    return st;
}
#else
typedef int vc_dist_mpi_reduce_unused;
#endif
