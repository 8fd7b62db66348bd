/* Distributed communicator: one interface, three implementations.
 *   "single": one process; collectives are copies or no-ops.
 *   "mpi":    host buffers over MPI (MPI_Init_thread when MPI is not yet initialised).
 *   "nccl":   device (CUDA) buffers over NCCL, bootstrapped through MPI; one rank per GPU,
 *             the GPU is local_rank modulo the visible device count.
 * "auto" picks "mpi" when the process was started by mpirun/mpiexec/srun (OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE, PMIX_RANK, SLURM_STEP_NUM_TASKS, MV2_COMM_WORLD_SIZE in the environment), else "single";
 * VERLC_DIST=single|mpi|nccl overrides "auto".
 *
 * Every collective is blocking and must be called by every rank in the same order. Failures return a
 * status whose message names the rank and the collective ("rank 1: allreduce of 1048576 floats failed:
 * ..."). A peer that dies or hangs makes the others fail with VC_ERR_TIMEOUT after VERLC_DIST_TIMEOUT
 * seconds (default 300; 0 waits forever) instead of hanging; after that the communicator is broken
 * (every later call fails at once) and the process should end, e.g. through vc_comm_abort().
 *
 * Determinism: vc_comm_allreduce_* give bitwise-identical results on every rank (each element is
 * reduced once, by one rank, then copied), but the summation order is MPI's or NCCL's choice.
 * vc_comm_allreduce_*_ordered sum in rank order, ((x_0 + x_1) + x_2) + ..., whatever the transport, so
 * their bits depend only on the inputs and the number of ranks. Max/min propagate NaN.
 * No MPI, CUDA or NCCL type appears here. Init and free are not thread-safe; call collectives on one
 * communicator from one thread at a time. */
#ifndef VERLC_DIST_H
#define VERLC_DIST_H
#include "verlc/core.h"
#include <stddef.h>

typedef struct vc_comm vc_comm;

typedef enum vc_reduce_op { VC_SUM = 0, VC_MAX = 1, VC_MIN = 2 } vc_reduce_op;

/* argc/argv may be NULL. kind: "auto", "single", "mpi" or "nccl" (NULL means "auto"). */
vc_status vc_comm_init(int *argc, char ***argv, const char *kind, vc_comm **out);
/* Frees the communicator; the last MPI-backed one finalises MPI when verlc initialised it (MPI cannot be
 * started again in that process). A broken communicator is freed without talking to peers. */
void vc_comm_free(vc_comm *c);
/* Whether this build has the implementation: "single", "mpi", "nccl" (1) or not (0). */
int vc_comm_available(const char *kind);

int vc_comm_rank(const vc_comm *c);
int vc_comm_size(const vc_comm *c);
int vc_comm_local_rank(const vc_comm *c); /* rank among the processes on this node */
int vc_comm_local_size(const vc_comm *c);
const char *vc_comm_kind(const vc_comm *c); /* "single", "mpi" or "nccl" */
int vc_comm_device(const vc_comm *c);       /* CUDA device ordinal of an "nccl" communicator, else -1 */
/* Whether collectives take device pointers (1 for "nccl"). vc_comm_gatherv_bytes always takes host ones. */
int vc_comm_on_device(const vc_comm *c);
double vc_comm_timeout(const vc_comm *c);
/* Seconds a collective may wait for peers; 0 waits forever. */
vc_status vc_comm_set_timeout(vc_comm *c, double seconds);
int vc_comm_broken(const vc_comm *c);

vc_status vc_comm_barrier(vc_comm *c);
vc_status vc_comm_bcast(vc_comm *c, void *buf, size_t bytes, int root);
/* In place: buf[i] = op over ranks of buf[i]. */
vc_status vc_comm_allreduce_f32(vc_comm *c, float *buf, size_t n, vc_reduce_op op);
vc_status vc_comm_allreduce_f64(vc_comm *c, double *buf, size_t n, vc_reduce_op op);
/* As above, reduced in rank order (see the determinism note). "nccl" stages through host memory. */
vc_status vc_comm_allreduce_f32_ordered(vc_comm *c, float *buf, size_t n, vc_reduce_op op);
vc_status vc_comm_allreduce_f64_ordered(vc_comm *c, double *buf, size_t n, vc_reduce_op op);
/* in: [size * n_per_rank]; out: [n_per_rank] = sum over ranks of in[rank * n_per_rank ...]. */
vc_status vc_comm_reduce_scatter_f32(vc_comm *c, const float *in, float *out, size_t n_per_rank);
/* As above, summed in rank order ((x_0 + x_1) + x_2) + ...: the same bits as the ordered allreduce's
 * block of this rank. "nccl" stages through host memory. */
vc_status vc_comm_reduce_scatter_f32_ordered(vc_comm *c, const float *in, float *out, size_t n_per_rank);
/* Reduce-scatter with per-rank counts, summed in rank order. in: the whole range of counts[0] + ... +
 * counts[size-1] floats; rank r's piece is the counts[r] floats after those of ranks 0..r-1. out:
 * [counts[rank]] = ((x_0 + x_1) + x_2) + ... of this rank's piece: the same bits as the ordered
 * allreduce's floats at that place. counts must be the same on every rank (zeros allowed); out may be
 * this rank's piece of in (in place), else must not overlap in. Each rank sends only the pieces of the
 * other ranks (reduce-scatter traffic, half an allreduce's). "nccl" stages through host memory. */
vc_status vc_comm_reduce_scatterv_f32_ordered(vc_comm *c, const float *in, float *out, const size_t *counts);
/* out: [size * bytes_per_rank], rank r's block at r * bytes_per_rank. in may be that block of out. */
vc_status vc_comm_allgather(vc_comm *c, const void *in, void *out, size_t bytes_per_rank);
/* Gathers n bytes from every rank (n may differ between ranks) to `root`, or to every rank when
 * root is -1. Receivers get *out_all (the blocks concatenated in rank order) and *sizes ([size] byte
 * counts), both malloc'ed for the caller to free(); other ranks get NULL in both. Host memory only. */
vc_status vc_comm_gatherv_bytes(vc_comm *c, const void *in, size_t n, void **out_all, size_t **sizes,
                                int root);

/* Memory the collectives of `c` take: device memory for "nccl", host memory otherwise. */
vc_status vc_comm_mem_alloc(vc_comm *c, size_t bytes, void **out);
void vc_comm_mem_free(vc_comm *c, void *p);
vc_status vc_comm_mem_upload(vc_comm *c, void *dst, const void *host_src, size_t bytes);
vc_status vc_comm_mem_download(vc_comm *c, void *host_dst, const void *src, size_t bytes);

/* Ends every rank of the job with `code` (MPI_Abort) after a fatal error, so that peers do not wait for
 * their timeout. For the program's top level only; returns (doing nothing) for "single". */
void vc_comm_abort(vc_comm *c, int code);

/* Time of the collectives since init: calls and seconds spent, for logs and benchmarks. */
typedef struct vc_comm_stats {
    long calls;
    double seconds;
    double bytes; /* payload bytes handed to collectives by this rank */
    /* bytes this rank sent to other ranks: what the algorithms of verlc's implementations hand to the
     * transport for peers (MPI: the pieces of alltoall(v)s and gathers a rank sends; NCCL device
     * collectives: the ring algorithm's share, e.g. 2(N-1)/N of an allreduce's payload) */
    double bytes_sent;
} vc_comm_stats;
void vc_comm_get_stats(const vc_comm *c, vc_comm_stats *out);

#endif
