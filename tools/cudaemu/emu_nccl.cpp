/* verlc CUDA emulator: NCCL over MPI. A collective copies its input out of emulated device memory,
 * starts the matching nonblocking MPI collective on a duplicate of MPI_COMM_WORLD and leaves a pending
 * operation on the stream; cudaStreamQuery tests it (so verlc's deadline loop works unchanged) and
 * cudaStreamSynchronize waits; on completion the result is copied into the receive buffer. Reduction
 * order is MPI's, as NCCL's is NCCL's. Built when MPI is found. */
#include "emu_internal.h"
#include "nccl.h"
#include <memory>
#define OMPI_SKIP_MPICXX 1 /* the C API only: no MPI C++ bindings to link */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

struct vc_emu_nccl {
    MPI_Comm comm;
    int rank, size, aborted;
};

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static MPI_Datatype mpi_type(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: return MPI_SIGNED_CHAR;
    case ncclUint8: return MPI_UNSIGNED_CHAR;
    case ncclInt32: return MPI_INT;
    case ncclUint32: return MPI_UNSIGNED;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL; /* no half precision in MPI */
    }
}

static MPI_Op mpi_op(ncclRedOp_t op) {
    return op == ncclSum ? MPI_SUM : op == ncclProd ? MPI_PROD : op == ncclMax ? MPI_MAX : MPI_MIN;
}

extern "C" {
const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "internal error";
    }
}
const char *ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "verlc-emu-%d-%ld", (int)getpid(), (long)time(NULL));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId, int rank) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        fprintf(stderr, "cuda emulator: ncclCommInitRank: the emulated NCCL runs over MPI, which is not initialised\n");
        return ncclInvalidUsage;
    }
    vc_emu_nccl *c = new vc_emu_nccl();
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS) {
        delete c;
        return ncclSystemError;
    }
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    if (c->size != nranks || c->rank != rank) {
        fprintf(stderr, "cuda emulator: ncclCommInitRank(%d ranks, rank %d): the MPI world has %d ranks, this is %d\n", nranks,
                rank, c->size, c->rank);
        MPI_Comm_free(&c->comm);
        delete c;
        return ncclInvalidUsage;
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (!c) return ncclInvalidArgument;
    MPI_Comm_free(&c->comm);
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) { /* peers may be gone: nothing collective, the comm is leaked */
    if (c) c->aborted = 1;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async) {
    *async = c && c->aborted ? ncclRemoteError : ncclSuccess;
    return c ? ncclSuccess : ncclInvalidArgument;
}
}

/* the collective's common part: checks, input copied out, the MPI call started, completion pending */

static ncclResult_t collective(const char *call, const void *send, size_t in_bytes, void *recv, size_t out_bytes,
                               vc_emu_nccl *c, cudaStream_t s, std::function<int(const void *, void *, MPI_Request *)> start) {
    if (!c || c->aborted) return ncclInvalidUsage;
    if ((in_bytes && !vc_emu_dev_range(send, in_bytes)) || (out_bytes && !vc_emu_dev_range(recv, out_bytes))) {
        fprintf(stderr, "cuda emulator: %s: a buffer is not inside one device allocation (send %p, %zu bytes; recv %p, %zu bytes)\n",
                call, send, in_bytes, recv, out_bytes);
        return ncclInvalidArgument;
    }
    vc_emu_flush(); /* the input is what the stream has produced so far */
    std::shared_ptr<std::vector<char>> in(new std::vector<char>(in_bytes ? in_bytes : 1)), out(new std::vector<char>(out_bytes ? out_bytes : 1));
    if (in_bytes) vc_emu_dev_read(in->data(), send, in_bytes);
    std::shared_ptr<MPI_Request> req(new MPI_Request(MPI_REQUEST_NULL));
    if (start(in->data(), out->data(), req.get()) != MPI_SUCCESS) return ncclSystemError;
    vc_emu_stream_pending(s, [in, out, req, recv, out_bytes](int block) {
        int done = 0;
        if (block) {
            MPI_Wait(req.get(), MPI_STATUS_IGNORE);
            done = 1;
        } else MPI_Test(req.get(), &done, MPI_STATUS_IGNORE);
        if (done && out_bytes) vc_emu_dev_write(recv, out->data(), out_bytes);
        return done;
    });
    return ncclSuccess;
}

extern "C" {
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
    if (mpi_type(t) == MPI_DATATYPE_NULL || count > (size_t)2147483647) return ncclInvalidArgument;
    size_t b = count * type_size(t);
    return collective("ncclAllReduce", send, b, recv, b, c, s, [=](const void *in, void *out, MPI_Request *r) {
        return MPI_Iallreduce(in, out, (int)count, mpi_type(t), mpi_op(op), c->comm, r);
    });
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
    if (!c || mpi_type(t) == MPI_DATATYPE_NULL || recvcount > (size_t)2147483647) return ncclInvalidArgument;
    size_t b = recvcount * type_size(t);
    return collective("ncclReduceScatter", send, b * (size_t)c->size, recv, b, c, s, [=](const void *in, void *out, MPI_Request *r) {
        return MPI_Ireduce_scatter_block(in, out, (int)recvcount, mpi_type(t), mpi_op(op), c->comm, r);
    });
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c, cudaStream_t s) {
    if (!c || mpi_type(t) == MPI_DATATYPE_NULL || sendcount > (size_t)2147483647) return ncclInvalidArgument;
    size_t b = sendcount * type_size(t);
    return collective("ncclAllGather", send, b, recv, b * (size_t)c->size, c, s, [=](const void *in, void *out, MPI_Request *r) {
        return MPI_Iallgather(in, (int)sendcount, mpi_type(t), out, (int)sendcount, mpi_type(t), c->comm, r);
    });
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
    if (!c || mpi_type(t) == MPI_DATATYPE_NULL || count > (size_t)2147483647 || root < 0 || root >= c->size)
        return ncclInvalidArgument;
    size_t b = count * type_size(t);
    int me = c->rank;
    /* the root's input is its send buffer; every rank receives into recv */
    return collective("ncclBroadcast", me == root ? send : NULL, me == root ? b : 0, recv, b, c, s,
                      [=](const void *in, void *out, MPI_Request *r) {
                          if (me == root) memcpy(out, in, b);
                          return MPI_Ibcast(out, (int)count, mpi_type(t), root, c->comm, r);
                      });
}
}
