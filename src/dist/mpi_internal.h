/* MPI communicator internals shared by comm_mpi.c (set-up, data movement) and comm_mpi_reduce.c. */
#ifndef VC_DIST_MPI_INTERNAL_H
#define VC_DIST_MPI_INTERNAL_H
#include "dist_internal.h"
#include <mpi.h>

struct vc_mpi {
    MPI_Comm comm;    /* a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN */
    int *ia;          /* 4 * size ints of count/displacement scratch */
    void *scratch;    /* grow-only receive buffer; kept until destroy, as a request that timed out may
                       * still reference it */
    size_t scratch_bytes;
    size_t segment;   /* elements per round of the large reductions (VERLC_DIST_SEGMENT, default 2^24) */
};

/* Largest element or byte count handed to one MPI call (MPI counts are int). */
#define VC_MPI_MAX_COUNT ((size_t)1 << 30)

/* Waits for a nonblocking MPI operation until c->deadline: VC_ERR_TIMEOUT when peers do not answer. */
vc_status vc_mpi_wait(vc_comm *c, MPI_Request *req, const char *call);
/* Turns an MPI error code into a status whose message holds MPI's error text. */
vc_status vc_mpi_fail(int rc, const char *call);
/* Scratch of at least `bytes`. */
vc_status vc_mpi_scratch(struct vc_mpi *m, size_t bytes, void **out);

vc_status vc_mpi_allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op);
vc_status vc_mpi_allreduce_ordered(vc_comm *c, void *buf, size_t n, int dtype, int op);
vc_status vc_mpi_reduce_scatter_f32(vc_comm *c, const float *in, float *out, size_t n_per_rank);
vc_status vc_mpi_reduce_scatter_ordered_f32(vc_comm *c, const float *in, float *out, size_t n_per_rank);
vc_status vc_mpi_reduce_scatterv_ordered_f32(vc_comm *c, const float *in, float *out, const size_t *counts);

#endif
