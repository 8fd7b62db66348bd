/* NCCL communicator on device buffers, bootstrapped through an inner MPI communicator (which also
 * carries the host-side collectives: barrier, gatherv, the ordered reductions). One rank per GPU: the
 * device is local_rank modulo the visible device count. Collectives are enqueued on the communicator's
 * own stream and waited for with a deadline; on timeout the NCCL communicator is aborted
 * (ncclCommAbort) so that no kernel keeps spinning on a dead peer.
 * Compiled only when CMake finds the CUDA toolkit, nccl.h and MPI (VC_HAVE_NCCL). */
#include "dist_internal.h"
#include "verlc/cuda.h"
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct vc_nccl {
    vc_comm *host; /* inner MPI communicator */
    ncclComm_t nc;
    cudaStream_t stream;
    char bus[32]; /* this rank's GPU's PCI bus id */
};

static vc_status cuda_fail(cudaError_t e, const char *call) {
    return vc_fail(VC_ERR_DEVICE, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

static vc_status nccl_fail(struct vc_nccl *g, ncclResult_t r, const char *call) {
    const char *detail = g && g->nc ? ncclGetLastError(g->nc) : ncclGetLastError(NULL);
    return vc_fail(r == ncclSystemError || r == ncclRemoteError ? VC_ERR_IO : VC_ERR_DEVICE, "%s: %s%s%s", call,
                   ncclGetErrorString(r), detail && *detail ? ": " : "", detail ? detail : "");
}

static ncclRedOp_t nccl_op(int op) { return op == VC_SUM ? ncclSum : op == VC_MAX ? ncclMax : ncclMin; }
static ncclDataType_t nccl_type(int dtype) { return dtype == VC_DIST_F64 ? ncclFloat64 : ncclFloat32; }

/* Polls the stream until the enqueued collective finishes, NCCL reports an asynchronous error, or the
 * deadline passes. */
static vc_status nccl_wait(vc_comm *c, const char *call) {
    struct vc_nccl *g = c->impl;
    long nap_ns = 2000;
    for (;;) {
        cudaError_t e = cudaStreamQuery(g->stream);
        if (e == cudaSuccess) return VC_OK;
        if (e != cudaErrorNotReady) return cuda_fail(e, call);
        ncclResult_t async = ncclSuccess, r = ncclCommGetAsyncError(g->nc, &async);
        if (r != ncclSuccess) return nccl_fail(g, r, "ncclCommGetAsyncError");
        if (async != ncclSuccess && async != ncclInProgress) return nccl_fail(g, async, call);
        if (c->deadline > 0 && vc_now() > c->deadline) {
            ncclCommAbort(g->nc);
            g->nc = NULL;
            return vc_fail(VC_ERR_TIMEOUT,
                           "%s: no answer from the other ranks within %g s (VERLC_DIST_TIMEOUT): a rank has "
                           "died, hangs, or is not calling the same collective; NCCL communicator aborted",
                           call, c->timeout_s);
        }
        struct timespec ts = { 0, nap_ns };
        nanosleep(&ts, NULL);
        if (nap_ns < 100000) nap_ns *= 2;
    }
}

static vc_status enqueued(vc_comm *c, ncclResult_t r, const char *call) {
    if (r != ncclSuccess) return nccl_fail(c->impl, r, call);
    return nccl_wait(c, call);
}

/* The verlc kernels (and the d2d copies into the bucket) run on the backend's own non-blocking stream,
 * which neither this communicator's stream nor the legacy default stream of cudaMemcpy waits for:
 * every collective and staging copy first waits until that stream has produced its input. */
static vc_status after_verlc(const char *call) {
    if (!vc_cuda_ready() || !vc_cuda_stream()) return VC_OK;
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)vc_cuda_stream());
    return e == cudaSuccess ? VC_OK : cuda_fail(e, call);
}

/* Host buffers (the trainers' metric and count reductions pass host doubles) cannot go to NCCL: they
 * take the inner MPI communicator. */
static int on_host(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

/* A copy that is complete in both directions on return (a plain cudaMemcpy from pageable memory may
 * return before its DMA to the device has landed, and the verlc stream would not wait for it). */
static vc_status staged_copy(struct vc_nccl *g, void *dst, const void *src, size_t bytes, int to_device) {
    const char *call = to_device ? "cudaMemcpy to device" : "cudaMemcpy to host";
    vc_status st = after_verlc(call);
    if (st) return st;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                    g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    return e == cudaSuccess ? VC_OK : cuda_fail(e, call);
}

/* The inner MPI communicator shares this call's deadline and breaks with it. */
static vc_status host_call(vc_comm *c, vc_status st) {
    struct vc_nccl *g = c->impl;
    if (st && g->host->broken == 0) g->host->broken = 1;
    vc_dist_sent(c, g->host->stats.bytes_sent); /* the inner communicator's traffic is this one's */
    g->host->stats.bytes_sent = 0;
    return st;
}

/* Bytes a ring algorithm makes each rank send for `bytes` of payload times `factor` ((N-1)/N units). */
static void ring_sent(vc_comm *c, double bytes, double factor) {
    vc_dist_sent(c, bytes * factor * (c->size - 1) / c->size);
}

static vc_comm *host(vc_comm *c) {
    struct vc_nccl *g = c->impl;
    g->host->deadline = c->deadline;
    return g->host;
}

static vc_status nccl_barrier(vc_comm *c) {
    cudaError_t e = cudaStreamSynchronize(((struct vc_nccl *)c->impl)->stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize");
    vc_comm *h = host(c);
    return host_call(c, h->ops->barrier(h));
}

static vc_status nccl_bcast(vc_comm *c, void *buf, size_t bytes, int root) {
    struct vc_nccl *g = c->impl;
    if (on_host(buf)) return host_call(c, host(c)->ops->bcast(host(c), buf, bytes, root));
    vc_status st = after_verlc("ncclBroadcast");
    if (st) return st;
    if (c->rank == root) vc_dist_sent(c, (double)bytes * (c->size - 1)); /* counted as if sent to each peer */
    return enqueued(c, ncclBroadcast(buf, buf, bytes, ncclInt8, root, g->nc, g->stream), "ncclBroadcast");
}

static vc_status nccl_allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op) {
    struct vc_nccl *g = c->impl;
    if (on_host(buf)) return host_call(c, host(c)->ops->allreduce(host(c), buf, n, dtype, op));
    vc_status st = after_verlc("ncclAllReduce");
    if (st) return st;
    ring_sent(c, (double)n * vc_dist_dtype_size(dtype), 2);
    return enqueued(c, ncclAllReduce(buf, buf, n, nccl_type(dtype), nccl_op(op), g->nc, g->stream),
                    "ncclAllReduce");
}

/* Rank-order reduction needs a fixed summation order that NCCL's kernels do not promise: stage the
 * data through host memory and reduce with the MPI communicator's ordered algorithm. */
static vc_status nccl_allreduce_ordered(vc_comm *c, void *buf, size_t n, int dtype, int op) {
    if (on_host(buf)) return host_call(c, host(c)->ops->allreduce_ordered(host(c), buf, n, dtype, op));
    size_t bytes = n * vc_dist_dtype_size(dtype);
    vc_status st;
    void *h = vc_malloc(bytes);
    if (!h) return VC_ERR_NOMEM;
    if ((st = staged_copy(c->impl, h, buf, bytes, 0))) goto out;
    vc_comm *hc = host(c);
    if ((st = host_call(c, hc->ops->allreduce_ordered(hc, h, n, dtype, op)))) goto out;
    st = staged_copy(c->impl, buf, h, bytes, 1);
out:
    free(h);
    return st;
}

static vc_status nccl_reduce_scatter(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    struct vc_nccl *g = c->impl;
    if (on_host(in) && on_host(out))
        return host_call(c, host(c)->ops->reduce_scatter_f32(host(c), in, out, n_per_rank));
    vc_status st = after_verlc("ncclReduceScatter");
    if (st) return st;
    ring_sent(c, (double)n_per_rank * sizeof(float) * c->size, 1);
    return enqueued(c, ncclReduceScatter(in, out, n_per_rank, ncclFloat32, ncclSum, g->nc, g->stream),
                    "ncclReduceScatter");
}

static vc_status nccl_allgather(vc_comm *c, const void *in, void *out, size_t bytes_per_rank) {
    struct vc_nccl *g = c->impl;
    if (on_host(out) && (!in || on_host(in))) /* MPI's in-place form is in == NULL */
        return host_call(c, host(c)->ops->allgather(host(c), in, out, bytes_per_rank));
    if (!in) in = (char *)out + (size_t)c->rank * bytes_per_rank; /* NCCL's in-place form */
    vc_status st = after_verlc("ncclAllGather");
    if (st) return st;
    ring_sent(c, (double)bytes_per_rank * c->size, 1);
    return enqueued(c, ncclAllGather(in, out, bytes_per_rank, ncclInt8, g->nc, g->stream), "ncclAllGather");
}

/* Rank order again: the whole range comes to the host, the inner MPI communicator's ordered
 * reduce-scatterv (alltoallv: reduce-scatter traffic) sums this rank's piece in place, which goes back
 * to out. */
static vc_status nccl_reduce_scatterv_ordered(vc_comm *c, const float *in, float *out, const size_t *counts) {
    vc_comm *hc = host(c);
    if (on_host(in) && on_host(out)) return host_call(c, hc->ops->reduce_scatterv_ordered_f32(hc, in, out, counts));
    size_t total = 0, displ = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank) displ = total;
        total += counts[r];
    }
    vc_status st;
    float *h = vc_malloc(total * sizeof *h);
    if (!h) return VC_ERR_NOMEM;
    if ((st = staged_copy(c->impl, h, in, total * sizeof *h, 0))) goto out;
    if ((st = host_call(c, hc->ops->reduce_scatterv_ordered_f32(hc, h, h + displ, counts)))) goto out;
    st = staged_copy(c->impl, out, h + displ, counts[c->rank] * sizeof *h, 1);
out:
    free(h);
    return st;
}

static vc_status nccl_gatherv(vc_comm *c, const void *in, size_t n, void **out_all, size_t **sizes, int root) {
    vc_comm *h = host(c);
    return host_call(c, h->ops->gatherv(h, in, n, out_all, sizes, root));
}

static vc_status nccl_mem_alloc(vc_comm *c, size_t bytes, void **out) {
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *out = NULL;
        return vc_fail(VC_ERR_NOMEM, "cudaMalloc of %zu bytes on device %d: %s", bytes, c->device,
                       cudaGetErrorString(e));
    }
    return VC_OK;
}

static void nccl_mem_free(vc_comm *c, void *p) { cudaFree(p); }

static vc_status nccl_mem_copy(vc_comm *c, void *dst, const void *src, size_t bytes, int to_device) {
    return staged_copy(c->impl, dst, src, bytes, to_device);
}

static void nccl_abort(vc_comm *c, int code) {
    struct vc_nccl *g = c->impl;
    if (g->nc) ncclCommAbort(g->nc);
    g->nc = NULL;
    if (g->host->ops->abort) g->host->ops->abort(g->host, code);
}

static void nccl_destroy(vc_comm *c) {
    struct vc_nccl *g = c->impl;
    if (!g) return;
    if (g->nc) {
        if (c->broken) ncclCommAbort(g->nc); /* does not wait for peers */
        else ncclCommDestroy(g->nc);
    }
    if (g->stream) cudaStreamDestroy(g->stream);
    if (g->host) {
        if (c->broken) g->host->broken = 1;
        vc_comm_free(g->host);
    }
    free(g);
    c->impl = NULL;
}

static const struct vc_comm_ops NCCL_OPS = {
    .name = "nccl",
    .barrier = nccl_barrier,
    .bcast = nccl_bcast,
    .allreduce = nccl_allreduce,
    .allreduce_ordered = nccl_allreduce_ordered,
    .reduce_scatter_f32 = nccl_reduce_scatter,
    .reduce_scatterv_ordered_f32 = nccl_reduce_scatterv_ordered,
    .allgather = nccl_allgather,
    .gatherv = nccl_gatherv,
    .mem_alloc = nccl_mem_alloc,
    .mem_free = nccl_mem_free,
    .mem_copy = nccl_mem_copy,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

/* Picks and opens this rank's GPU and, on rank 0, makes the NCCL unique id. */
static vc_status local_setup(vc_comm *c, ncclUniqueId *id) {
    struct vc_nccl *g = c->impl;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceCount");
    if (ndev <= 0) return vc_fail(VC_ERR_DEVICE, "no CUDA device visible");
    c->device = c->local_rank % ndev;
    if ((e = cudaSetDevice(c->device)) != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    if ((e = cudaDeviceGetPCIBusId(g->bus, (int)sizeof g->bus, c->device)) != cudaSuccess)
        return cuda_fail(e, "cudaDeviceGetPCIBusId");
    if ((e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail(e, "cudaStreamCreateWithFlags");
    if (c->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess) return nccl_fail(g, r, "ncclGetUniqueId");
    }
    return VC_OK;
}

/* NCCL refuses a communicator two of whose ranks drive one GPU ("Duplicate GPU detected"): every rank learns every
 * rank's host and GPU bus id first, and all refuse such a set-up alike, naming the ranks (a per-rank device
 * visibility such as Slurm's --gpus-per-task=1 gives each rank its own GPU as its device 0: not refused) */
struct gpu_id {
    char host[64], bus[32];
};

static vc_status shared_gpu_check(vc_comm *c, vc_comm *h) {
    struct vc_nccl *g = c->impl;
    struct gpu_id me, *all = vc_calloc((size_t)c->size, sizeof *all);
    if (!all) return VC_ERR_NOMEM; /* (the others' allgather then ends at the communicator's deadline) */
    memset(&me, 0, sizeof me);
    if (gethostname(me.host, sizeof me.host - 1)) snprintf(me.host, sizeof me.host, "?");
    snprintf(me.bus, sizeof me.bus, "%s", g->bus);
    vc_status st = host_call(c, h->ops->allgather(h, &me, all, sizeof me));
    for (int i = 1; !st && i < c->size; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(all[i].host, all[j].host) && !strcmp(all[i].bus, all[j].bus)) {
                st = vc_fail(VC_ERR_DEVICE, "VERLC_DIST=nccl: ranks %d and %d on %s share the GPU %s; NCCL needs a GPU "
                             "per rank (start at most one rank per GPU, or use VERLC_DIST=mpi)", j, i, all[i].host,
                             all[i].bus);
                break;
            }
    free(all);
    return st;
}

vc_status vc_dist_nccl_create(vc_comm *c, int *argc, char ***argv) {
    vc_status st, local;
    struct vc_nccl *g;
    ncclUniqueId id;
    double failed;
    memset(&id, 0, sizeof id);
    c->ops = &NCCL_OPS;
    if (!(g = c->impl = vc_calloc(1, sizeof *g))) return VC_ERR_NOMEM;
    if (!(g->host = vc_calloc(1, sizeof *g->host))) { st = VC_ERR_NOMEM; goto out; }
    g->host->device = -1;
    g->host->timeout_s = c->timeout_s;
    if ((st = vc_dist_mpi_create(g->host, argc, argv))) {
        free(g->host);
        g->host = NULL;
        goto out;
    }
    c->rank = g->host->rank;
    c->size = g->host->size;
    c->local_rank = g->host->local_rank;
    c->local_size = g->host->local_size;
    /* all ranks learn whether any rank failed to set up, so that none waits for a failed one */
    local = local_setup(c, &id);
    failed = local != VC_OK;
    c->deadline = c->timeout_s > 0 ? vc_now() + c->timeout_s : 0;
    vc_comm *h = host(c);
    if (local) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", vc_last_error());
        h->ops->allreduce(h, &failed, 1, VC_DIST_F64, VC_MAX);
        st = vc_fail(local, "rank %d: %s", c->rank, msg);
        goto out;
    }
    if ((st = host_call(c, h->ops->allreduce(h, &failed, 1, VC_DIST_F64, VC_MAX)))) goto out;
    if (failed) { st = vc_fail(VC_ERR_DEVICE, "another rank could not set up its GPU (see its message)"); goto out; }
    if ((st = shared_gpu_check(c, h))) goto out;
    if ((st = host_call(c, h->ops->bcast(h, &id, sizeof id, 0)))) goto out;
    ncclResult_t r = ncclCommInitRank(&g->nc, c->size, id, c->rank);
    if (r != ncclSuccess) {
        g->nc = NULL;
        st = nccl_fail(g, r, "ncclCommInitRank");
        goto out;
    }
    c->on_device = 1;
out:
    if (st) {
        c->broken = g->host && g->host->broken;
        nccl_destroy(c);
    }
    return st;
}
