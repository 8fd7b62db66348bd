/* MPI communicator on host buffers: set-up, the watchdog wait, and the data-movement collectives.
 * Every collective is nonblocking underneath (MPI_Ibcast, MPI_Iallgather, ...) and polled with MPI_Test
 * until the call's deadline, so a dead or stuck peer gives VC_ERR_TIMEOUT instead of a hang. */
#ifdef VC_HAVE_MPI
#include "mpi_internal.h"
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_users;  /* live MPI-backed communicators */
static int g_owned;  /* verlc called MPI_Init_thread, so it finalises */
static int g_broken; /* a collective failed: finalising could wait for dead peers forever */

vc_status vc_mpi_fail(int rc, const char *call) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error code %d", rc);
    return vc_fail(VC_ERR_IO, "%s: %s", call, s);
}

/* Open MPI's nonblocking collectives advance only inside MPI calls, so the wait polls MPI_Test without
 * sleeping (yielding the core, as MPI's own blocking calls spin) for the first 5 s; a wait that long is
 * a peer busy elsewhere (or gone), and from then on the wait naps up to 1 ms between polls. */
vc_status vc_mpi_wait(vc_comm *c, MPI_Request *req, const char *call) {
    double t0 = vc_now();
    long nap_ns = 10000;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, call);
        if (done) return VC_OK;
        double now = vc_now();
        if (c->deadline > 0 && now > c->deadline)
            return vc_fail(VC_ERR_TIMEOUT,
                           "%s: no answer from the other ranks within %g s (VERLC_DIST_TIMEOUT): a rank has "
                           "died, hangs, or is not calling the same collective",
                           call, c->timeout_s);
        if (now - t0 < 5.0) {
            sched_yield();
            continue;
        }
        struct timespec ts = { 0, nap_ns };
        nanosleep(&ts, NULL);
        if (nap_ns < 1000000) nap_ns *= 2;
    }
}

vc_status vc_mpi_scratch(struct vc_mpi *m, size_t bytes, void **out) {
    if (bytes > m->scratch_bytes) {
        vc_aligned_free(m->scratch);
        m->scratch_bytes = 0;
        if (!(m->scratch = vc_aligned_alloc(bytes))) return VC_ERR_NOMEM;
        m->scratch_bytes = bytes;
    }
    *out = m->scratch;
    return VC_OK;
}

static vc_status mpi_barrier(vc_comm *c) {
    struct vc_mpi *m = c->impl;
    MPI_Request req;
    int rc = MPI_Ibarrier(m->comm, &req);
    if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, "MPI_Ibarrier");
    return vc_mpi_wait(c, &req, "MPI_Ibarrier");
}

static vc_status mpi_bcast(vc_comm *c, void *buf, size_t bytes, int root) {
    struct vc_mpi *m = c->impl;
    for (size_t off = 0; off < bytes; off += VC_MPI_MAX_COUNT) {
        size_t len = bytes - off < VC_MPI_MAX_COUNT ? bytes - off : VC_MPI_MAX_COUNT;
        MPI_Request req;
        int rc = MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, m->comm, &req);
        if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, "MPI_Ibcast");
        vc_status st = vc_mpi_wait(c, &req, "MPI_Ibcast");
        if (st) return st;
    }
    if (c->rank == root) vc_dist_sent(c, (double)bytes * (c->size - 1)); /* counted as if sent to each peer */
    return VC_OK;
}

static vc_status mpi_allgather(vc_comm *c, const void *in, void *out, size_t bytes_per_rank) {
    struct vc_mpi *m = c->impl;
    if (bytes_per_rank > VC_MPI_MAX_COUNT)
        return vc_fail(VC_ERR_UNSUPPORTED, "more than %zu bytes per rank", VC_MPI_MAX_COUNT);
    MPI_Request req;
    int rc = MPI_Iallgather(in ? in : MPI_IN_PLACE, (int)bytes_per_rank, MPI_BYTE, out, (int)bytes_per_rank,
                            MPI_BYTE, m->comm, &req);
    if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, "MPI_Iallgather");
    vc_status st = vc_mpi_wait(c, &req, "MPI_Iallgather");
    if (!st) vc_dist_sent(c, (double)bytes_per_rank * (c->size - 1));
    return st;
}

/* Every rank learns every size first (so that all ranks agree on the limits), then the bytes move. */
static vc_status mpi_gatherv(vc_comm *c, const void *in, size_t n, void **out_all, size_t **sizes, int root) {
    struct vc_mpi *m = c->impl;
    vc_status st;
    int P = c->size, rc;
    uint64_t mine = n, *all_n = vc_malloc((size_t)P * sizeof *all_n);
    size_t *sz = NULL, total = 0;
    char *all = NULL;
    MPI_Request req;
    if (!all_n) return VC_ERR_NOMEM;
    rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, all_n, 1, MPI_UINT64_T, m->comm, &req);
    if (rc != MPI_SUCCESS) { st = vc_mpi_fail(rc, "MPI_Iallgather of the sizes"); goto out; }
    if ((st = vc_mpi_wait(c, &req, "MPI_Iallgather of the sizes"))) goto out;
    int *counts = m->ia, *displs = m->ia + P;
    for (int r = 0; r < P; r++) {
        if (all_n[r] > INT_MAX || total + all_n[r] > INT_MAX) {
            st = vc_fail(VC_ERR_UNSUPPORTED, "more than %d bytes in all (rank %d sends %llu)", INT_MAX, r,
                         (unsigned long long)all_n[r]);
            goto out;
        }
        counts[r] = (int)all_n[r];
        displs[r] = (int)total;
        total += all_n[r];
    }
    int receiver = root == -1 || root == c->rank;
    if (receiver) {
        all = vc_malloc(total ? total : 1);
        sz = vc_malloc((size_t)P * sizeof *sz);
        if (!all || !sz) { st = VC_ERR_NOMEM; goto out; }
        for (int r = 0; r < P; r++) sz[r] = (size_t)all_n[r];
    }
    if (root == -1)
        rc = MPI_Iallgatherv(in, (int)n, MPI_BYTE, all, counts, displs, MPI_BYTE, m->comm, &req);
    else
        rc = MPI_Igatherv(in, (int)n, MPI_BYTE, all, counts, displs, MPI_BYTE, root, m->comm, &req);
    if (rc != MPI_SUCCESS) { st = vc_mpi_fail(rc, root == -1 ? "MPI_Iallgatherv" : "MPI_Igatherv"); goto out; }
    if ((st = vc_mpi_wait(c, &req, root == -1 ? "MPI_Iallgatherv" : "MPI_Igatherv"))) goto out;
    vc_dist_sent(c, (double)sizeof mine * (P - 1) + (root == -1          ? (double)n * (P - 1)
                                                     : root == c->rank ? 0
                                                                       : (double)n));
    if (receiver) {
        *out_all = all;
        *sizes = sz;
        all = NULL;
        sz = NULL;
    }
out:
    free(all_n);
    free(all);
    free(sz);
    return st;
}

static void mpi_abort(vc_comm *c, int code) {
    struct vc_mpi *m = c->impl;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(m ? m->comm : MPI_COMM_WORLD, code);
}

static void mpi_release(vc_comm *c) {
    struct vc_mpi *m = c->impl;
    if (c->broken) g_broken = 1;
    if (m) {
        if (m->comm != MPI_COMM_NULL && !g_broken) MPI_Comm_free(&m->comm);
        free(m->ia);
        vc_aligned_free(m->scratch);
        free(m);
        c->impl = NULL;
    }
    if (--g_users == 0 && g_owned && !g_broken) {
        MPI_Finalize();
        g_owned = 0;
    }
}

static const struct vc_comm_ops MPI_OPS = {
    .name = "mpi",
    .barrier = mpi_barrier,
    .bcast = mpi_bcast,
    .allreduce = vc_mpi_allreduce,
    .allreduce_ordered = vc_mpi_allreduce_ordered,
    .reduce_scatter_f32 = vc_mpi_reduce_scatter_f32,
    .reduce_scatter_ordered_f32 = vc_mpi_reduce_scatter_ordered_f32,
    .reduce_scatterv_ordered_f32 = vc_mpi_reduce_scatterv_ordered_f32,
    .allgather = mpi_allgather,
    .gatherv = mpi_gatherv,
    .abort = mpi_abort,
    .destroy = mpi_release,
};

static vc_status mpi_start(int *argc, char ***argv) {
    int inited = 0, finalized = 0, provided = 0, rc;
    MPI_Finalized(&finalized);
    if (finalized) return vc_fail(VC_ERR_UNSUPPORTED, "MPI was finalised in this process and cannot start again");
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, "MPI_Init_thread");
        g_owned = 1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (provided < MPI_THREAD_SERIALIZED)
            vc_debug("MPI provides thread level %d (< MPI_THREAD_SERIALIZED): call collectives from the main thread",
                     provided);
    }
    g_users++;
    return VC_OK;
}

/* Rank among the processes that share memory with this one (the node). */
static vc_status mpi_local_rank(vc_comm *c, struct vc_mpi *m) {
    MPI_Comm local;
    int rc = MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) return vc_mpi_fail(rc, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_size);
    MPI_Comm_free(&local);
    return VC_OK;
}

/* VERLC_DIST_SEGMENT: elements per round of the large reductions, which bounds their scratch memory
 * (segment x element size); every rank must use the same value. */
static vc_status segment_from_env(size_t *out) {
    const char *s = getenv("VERLC_DIST_SEGMENT");
    *out = (size_t)1 << 24;
    if (!s || !*s) return VC_OK;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || v < 1 || v > VC_MPI_MAX_COUNT)
        return vc_fail(VC_ERR_ARG, "VERLC_DIST_SEGMENT='%s': expected a count of elements in [1, %zu]", s,
                       VC_MPI_MAX_COUNT);
    *out = (size_t)v;
    return VC_OK;
}

vc_status vc_dist_mpi_create(vc_comm *c, int *argc, char ***argv) {
    vc_status st;
    struct vc_mpi *m;
    MPI_Request req;
    size_t segment;
    if ((st = segment_from_env(&segment))) return st;
    if ((st = mpi_start(argc, argv))) return st;
    c->ops = &MPI_OPS;
    if (!(m = c->impl = vc_calloc(1, sizeof *m))) { st = VC_ERR_NOMEM; goto out; }
    m->comm = MPI_COMM_NULL;
    m->segment = segment;
    /* MPI_Comm_idup, not MPI_Comm_dup: a rank that never arrives gives a timeout here too */
    int rc = MPI_Comm_idup(MPI_COMM_WORLD, &m->comm, &req);
    if (rc != MPI_SUCCESS) { st = vc_mpi_fail(rc, "MPI_Comm_idup"); goto out; }
    c->deadline = c->timeout_s > 0 ? vc_now() + c->timeout_s : 0;
    if ((st = vc_mpi_wait(c, &req, "MPI_Comm_idup(MPI_COMM_WORLD)"))) { c->broken = 1; goto out; }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &c->rank);
    MPI_Comm_size(m->comm, &c->size);
    if (!(m->ia = vc_calloc(4 * (size_t)c->size, sizeof *m->ia))) { st = VC_ERR_NOMEM; goto out; }
    if ((st = mpi_local_rank(c, m))) goto out;
out:
    if (st) mpi_release(c);
    return st;
}
#else
typedef int vc_dist_mpi_unused; /* built without MPI: comm.c reports "mpi" as unavailable */
#endif
