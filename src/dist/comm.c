/* Communicator front end: picks the implementation, checks arguments, keeps statistics and names the
 * rank and the collective in every error message. */
#include "dist_internal.h"
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int vc_comm_available(const char *kind) {
    if (!kind) return 0;
    if (!strcmp(kind, "single") || !strcmp(kind, "auto")) return 1;
#ifdef VC_HAVE_MPI
    if (!strcmp(kind, "mpi")) return 1;
#endif
#ifdef VC_HAVE_NCCL
    if (!strcmp(kind, "nccl")) return 1;
#endif
    return 0;
}

vc_status vc_dist_timeout_from_env(double *out) {
    const char *s = getenv("VERLC_DIST_TIMEOUT");
    *out = 300;
    if (!s || !*s) return VC_OK;
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ') end++;
    if (end == s || *end || !isfinite(v) || v < 0)
        return vc_fail(VC_ERR_ARG, "VERLC_DIST_TIMEOUT='%s': expected seconds, a number >= 0 (0 waits forever)", s);
    *out = v;
    return VC_OK;
}

/* Launcher variables that mpirun/mpiexec (Open MPI, MPICH, MVAPICH) and srun set for every rank. */
static const char *launcher_variable(void) {
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                        "SLURM_STEP_NUM_TASKS", "MV2_COMM_WORLD_SIZE" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return vars[i];
    }
    return NULL;
}

static vc_status resolve_kind(const char *kind, const char **out) {
    if (!kind || !*kind || !strcmp(kind, "auto")) {
        const char *env = getenv("VERLC_DIST");
        if (env && *env && strcmp(env, "auto")) {
            kind = env;
        } else {
            const char *var = launcher_variable();
            if (var && !vc_comm_available("mpi"))
                return vc_fail(VC_ERR_UNSUPPORTED,
                               "started by a parallel launcher (%s is set) but this verlc was built without MPI; "
                               "install libopenmpi-dev and rebuild, or set VERLC_DIST=single", var);
            kind = var ? "mpi" : "single";
        }
    }
    if (strcmp(kind, "single") && strcmp(kind, "mpi") && strcmp(kind, "nccl"))
        return vc_fail(VC_ERR_ARG, "communicator kind '%s': expected auto, single, mpi or nccl", kind);
    if (!vc_comm_available(kind))
        return vc_fail(VC_ERR_UNSUPPORTED, "communicator kind '%s': this verlc was built without %s", kind,
                       !strcmp(kind, "mpi") ? "MPI (libopenmpi-dev)" : "NCCL (CUDA toolkit, nccl.h, MPI)");
    *out = kind;
    return VC_OK;
}

vc_status vc_comm_init(int *argc, char ***argv, const char *kind, vc_comm **out) {
    vc_status st;
    const char *k = NULL;
    vc_comm *c = NULL;
    if (!out) return vc_fail(VC_ERR_ARG, "vc_comm_init: out is NULL");
    *out = NULL;
    if ((st = resolve_kind(kind, &k))) return st;
    if (!(c = vc_calloc(1, sizeof *c))) return VC_ERR_NOMEM;
    c->device = -1;
    if ((st = vc_dist_timeout_from_env(&c->timeout_s))) goto out;
    if (!strcmp(k, "single")) st = vc_dist_single_create(c);
#ifdef VC_HAVE_MPI
    else if (!strcmp(k, "mpi")) st = vc_dist_mpi_create(c, argc, argv);
#endif
#ifdef VC_HAVE_NCCL
    else if (!strcmp(k, "nccl")) st = vc_dist_nccl_create(c, argc, argv);
#endif
    else st = vc_fail(VC_ERR_INTERNAL, "communicator kind '%s' has no implementation", k);
    if (st) { vc_fail_ctx(st, "%s communicator", k); goto out; }
    *out = c;
    c = NULL;
out:
    free(c);
    return st;
}

void vc_comm_free(vc_comm *c) {
    if (!c) return;
    if (c->ops && c->ops->destroy) c->ops->destroy(c);
    free(c);
}

int vc_comm_rank(const vc_comm *c) { return c ? c->rank : 0; }
int vc_comm_size(const vc_comm *c) { return c ? c->size : 1; }
int vc_comm_local_rank(const vc_comm *c) { return c ? c->local_rank : 0; }
int vc_comm_local_size(const vc_comm *c) { return c ? c->local_size : 1; }
const char *vc_comm_kind(const vc_comm *c) { return c && c->ops ? c->ops->name : "none"; }
int vc_comm_device(const vc_comm *c) { return c ? c->device : -1; }
int vc_comm_on_device(const vc_comm *c) { return c ? c->on_device : 0; }
double vc_comm_timeout(const vc_comm *c) { return c ? c->timeout_s : 0; }
int vc_comm_broken(const vc_comm *c) { return c ? c->broken : 1; }

vc_status vc_comm_set_timeout(vc_comm *c, double seconds) {
    if (!c) return vc_fail(VC_ERR_ARG, "vc_comm_set_timeout: communicator is NULL");
    if (!isfinite(seconds) || seconds < 0)
        return vc_fail(VC_ERR_ARG, "communicator timeout %g s: expected a number >= 0 (0 waits forever)", seconds);
    c->timeout_s = seconds;
    return VC_OK;
}

void vc_comm_get_stats(const vc_comm *c, vc_comm_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (c) *out = c->stats;
}

void vc_comm_abort(vc_comm *c, int code) {
    if (c && c->ops && c->ops->abort) c->ops->abort(c, code);
}

/* ---- collectives ---------------------------------------------------------------------------- */

/* Checks the communicator before a collective; the message names the rank and the collective. */
/* MPI runs at MPI_THREAD_SERIALIZED and a communicator's scratch buffers are shared: the collectives of
 * every communicator in the process run one at a time, whichever thread calls (the overlapped gradient
 * reductions run on a communication thread; the trainers make no collective call meanwhile, and this
 * lock makes sure of it rather than trusting it). */
static pthread_mutex_t g_coll = PTHREAD_MUTEX_INITIALIZER;
#define SERIAL(expr)                                                                                           \
    ({                                                                                                         \
        pthread_mutex_lock(&g_coll);                                                                           \
        vc_status serial_st_ = (expr);                                                                         \
        pthread_mutex_unlock(&g_coll);                                                                         \
        serial_st_;                                                                                            \
    })

static vc_status enter(vc_comm *c, const char *what) {
    if (!c || !c->ops) return vc_fail(VC_ERR_ARG, "%s: communicator is NULL", what);
    if (c->broken)
        return vc_fail(VC_ERR_ARG, "rank %d: %s refused: the communicator is broken by an earlier failure",
                       c->rank, what);
    c->deadline = c->timeout_s > 0 ? vc_now() + c->timeout_s : 0;
    return VC_OK;
}

/* Wraps an implementation's failure: "rank R: WHAT failed: reason". The communicator is broken
 * afterwards (peers may be inside the collective, or dead); a timeout is also logged at once, since
 * the caller may block elsewhere before it reports. */
static vc_status leave(vc_comm *c, vc_status st, double t0, double bytes, const char *what) {
    c->stats.calls++;
    c->stats.seconds += vc_now() - t0;
    c->stats.bytes += bytes;
    if (st == VC_OK) return VC_OK;
    vc_fail_ctx(st, "rank %d: %s failed", c->rank, what);
    c->broken = 1;
    if (st == VC_ERR_TIMEOUT) vc_log(VC_LOG_ERROR, "%s", vc_last_error());
    return st;
}

static vc_status null_arg(vc_comm *c, const char *what, const char *name) {
    return vc_fail(VC_ERR_ARG, "rank %d: %s: %s is NULL", c->rank, what, name);
}

vc_status vc_comm_barrier(vc_comm *c) {
    vc_status st = enter(c, "barrier");
    if (st) return st;
    double t0 = vc_now();
    return leave(c, SERIAL(c->ops->barrier(c)), t0, 0, "barrier");
}

vc_status vc_comm_bcast(vc_comm *c, void *buf, size_t bytes, int root) {
    char what[96];
    snprintf(what, sizeof what, "broadcast of %zu bytes from rank %d", bytes, root);
    vc_status st = enter(c, what);
    if (st) return st;
    if (root < 0 || root >= c->size)
        return vc_fail(VC_ERR_ARG, "rank %d: %s: root must be in [0, %d)", c->rank, what, c->size);
    if (bytes == 0) return VC_OK;
    if (!buf) return null_arg(c, what, "buffer");
    double t0 = vc_now();
    return leave(c, SERIAL(c->ops->bcast(c, buf, bytes, root)), t0, (double)bytes, what);
}

static const char *op_name(int op) { return op == VC_SUM ? "sum" : op == VC_MAX ? "max" : "min"; }

static vc_status allreduce(vc_comm *c, void *buf, size_t n, int dtype, int op, int ordered) {
    char what[96];
    snprintf(what, sizeof what, "%sallreduce of %zu %s (%s)", ordered ? "ordered " : "", n,
             dtype == VC_DIST_F64 ? "doubles" : "floats", op_name(op));
    vc_status st = enter(c, what);
    if (st) return st;
    if (op != VC_SUM && op != VC_MAX && op != VC_MIN)
        return vc_fail(VC_ERR_ARG, "rank %d: allreduce: unknown reduction %d (expected VC_SUM, VC_MAX, VC_MIN)",
                       c->rank, op);
    if (n == 0) return VC_OK;
    if (!buf) return null_arg(c, what, "buffer");
    double t0 = vc_now();
    st = SERIAL(ordered ? c->ops->allreduce_ordered(c, buf, n, dtype, op) : c->ops->allreduce(c, buf, n, dtype, op));
    return leave(c, st, t0, (double)n * vc_dist_dtype_size(dtype), what);
}

vc_status vc_comm_allreduce_f32(vc_comm *c, float *buf, size_t n, vc_reduce_op op) {
    return allreduce(c, buf, n, VC_DIST_F32, op, 0);
}
vc_status vc_comm_allreduce_f64(vc_comm *c, double *buf, size_t n, vc_reduce_op op) {
    return allreduce(c, buf, n, VC_DIST_F64, op, 0);
}
vc_status vc_comm_allreduce_f32_ordered(vc_comm *c, float *buf, size_t n, vc_reduce_op op) {
    return allreduce(c, buf, n, VC_DIST_F32, op, 1);
}
vc_status vc_comm_allreduce_f64_ordered(vc_comm *c, double *buf, size_t n, vc_reduce_op op) {
    return allreduce(c, buf, n, VC_DIST_F64, op, 1);
}

/* Entry checks shared by both reduce-scatters; *skip is set when there is nothing to do. */
static vc_status reduce_scatter_enter(vc_comm *c, const char *what, const float *in, const float *out,
                                      size_t n_per_rank, int *skip) {
    vc_status st = enter(c, what);
    *skip = st == VC_OK && n_per_rank == 0;
    if (st || *skip) return st;
    if (!in || !out) return null_arg(c, what, in ? "output" : "input");
    if (out < in + (size_t)c->size * n_per_rank && in < out + n_per_rank)
        return vc_fail(VC_ERR_ARG, "rank %d: %s: input and output overlap", c->rank, what);
    return VC_OK;
}

vc_status vc_comm_reduce_scatter_f32(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    char what[96];
    int skip;
    snprintf(what, sizeof what, "reduce-scatter of %zu floats per rank", n_per_rank);
    vc_status st = reduce_scatter_enter(c, what, in, out, n_per_rank, &skip);
    if (st || skip) return st;
    double t0 = vc_now();
    return leave(c, SERIAL(c->ops->reduce_scatter_f32(c, in, out, n_per_rank)), t0,
                 (double)n_per_rank * c->size * sizeof(float), what);
}

/* Without an implementation of its own: an ordered allreduce of a host copy, this rank's block kept. */
static vc_status reduce_scatter_ordered_fallback(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    size_t n = (size_t)c->size * n_per_rank;
    float *tmp = NULL;
    vc_status st = vc_comm_mem_alloc(c, n * sizeof(float), (void **)&tmp);
    if (st) return st;
    if (c->on_device) {
        /* device to device through the host: download, reduce, upload this rank's block */
        float *h = vc_malloc(n * sizeof(float));
        st = h ? vc_comm_mem_download(c, h, in, n * sizeof(float)) : vc_fail(VC_ERR_NOMEM, "out of memory");
        if (!st) st = vc_comm_mem_upload(c, tmp, h, n * sizeof(float));
        free(h);
    } else {
        memcpy(tmp, in, n * sizeof(float));
    }
    if (!st) st = c->ops->allreduce_ordered(c, tmp, n, VC_DIST_F32, VC_SUM) /* inside SERIAL (the caller) */;
    if (!st && c->on_device) {
        float *h = vc_malloc(n_per_rank * sizeof(float) + 1);
        st = h ? vc_comm_mem_download(c, h, tmp + (size_t)c->rank * n_per_rank, n_per_rank * sizeof(float))
               : vc_fail(VC_ERR_NOMEM, "out of memory");
        if (!st) st = vc_comm_mem_upload(c, out, h, n_per_rank * sizeof(float));
        free(h);
    } else if (!st) {
        memcpy(out, tmp + (size_t)c->rank * n_per_rank, n_per_rank * sizeof(float));
    }
    vc_comm_mem_free(c, tmp);
    return st;
}

vc_status vc_comm_reduce_scatter_f32_ordered(vc_comm *c, const float *in, float *out, size_t n_per_rank) {
    char what[96];
    int skip;
    snprintf(what, sizeof what, "ordered reduce-scatter of %zu floats per rank", n_per_rank);
    vc_status st = reduce_scatter_enter(c, what, in, out, n_per_rank, &skip);
    if (st || skip) return st;
    double t0 = vc_now();
    st = SERIAL(c->ops->reduce_scatter_ordered_f32 ? c->ops->reduce_scatter_ordered_f32(c, in, out, n_per_rank)
                                                   : reduce_scatter_ordered_fallback(c, in, out, n_per_rank));
    return leave(c, st, t0, (double)n_per_rank * c->size * sizeof(float), what);
}

/* Checks the counts of a reduce-scatterv: *total floats in all, this rank's piece at *displ. */
static vc_status scatterv_counts(vc_comm *c, const char *what, const size_t *counts, size_t *total,
                                 size_t *displ) {
    *total = *displ = 0;
    if (!counts) return null_arg(c, what, "counts");
    for (int r = 0; r < c->size; r++) {
        if (counts[r] > SIZE_MAX / sizeof(float) - *total)
            return vc_fail(VC_ERR_ARG, "rank %d: %s: counts overflow at rank %d", c->rank, what, r);
        if (r == c->rank) *displ = *total;
        *total += counts[r];
    }
    return VC_OK;
}

vc_status vc_comm_reduce_scatterv_f32_ordered(vc_comm *c, const float *in, float *out, const size_t *counts) {
    char what[96];
    size_t total = 0, displ = 0;
    vc_status st = enter(c, "ordered reduce-scatterv");
    if (st) return st;
    if ((st = scatterv_counts(c, "ordered reduce-scatterv", counts, &total, &displ))) return st;
    snprintf(what, sizeof what, "ordered reduce-scatterv of %zu floats (%zu to this rank)", total,
             counts[c->rank]);
    if (total == 0) return VC_OK; /* the counts are the same everywhere: every rank skips */
    if (!in || !out) return null_arg(c, what, in ? "output" : "input");
    size_t mine = counts[c->rank];
    if (out != in + displ && out < in + total && in < out + mine)
        return vc_fail(VC_ERR_ARG, "rank %d: %s: the output overlaps the input other than at this rank's piece",
                       c->rank, what);
    double t0 = vc_now();
    return leave(c, SERIAL(c->ops->reduce_scatterv_ordered_f32(c, in, out, counts)), t0, (double)total * sizeof(float),
                 what);
}

vc_status vc_comm_allgather(vc_comm *c, const void *in, void *out, size_t bytes_per_rank) {
    char what[96];
    snprintf(what, sizeof what, "allgather of %zu bytes per rank", bytes_per_rank);
    vc_status st = enter(c, what);
    if (st) return st;
    if (bytes_per_rank == 0) return VC_OK;
    if (!in || !out) return null_arg(c, what, in ? "output" : "input");
    char *mine = (char *)out + (size_t)c->rank * bytes_per_rank;
    const char *src = in;
    if (src == mine) src = NULL; /* in place */
    else if (src < (char *)out + (size_t)c->size * bytes_per_rank && (char *)out < src + bytes_per_rank)
        return vc_fail(VC_ERR_ARG, "rank %d: %s: input overlaps the output other than at this rank's block",
                       c->rank, what);
    double t0 = vc_now();
    return leave(c, SERIAL(c->ops->allgather(c, src, out, bytes_per_rank)), t0, (double)bytes_per_rank, what);
}

vc_status vc_comm_gatherv_bytes(vc_comm *c, const void *in, size_t n, void **out_all, size_t **sizes,
                                int root) {
    char what[96];
    if (root == -1) snprintf(what, sizeof what, "gatherv of %zu bytes to all ranks", n);
    else snprintf(what, sizeof what, "gatherv of %zu bytes to rank %d", n, root);
    vc_status st = enter(c, what);
    if (st) return st;
    if (!out_all || !sizes) return null_arg(c, what, out_all ? "sizes" : "out_all");
    *out_all = NULL;
    *sizes = NULL;
    if (root < -1 || root >= c->size)
        return vc_fail(VC_ERR_ARG, "rank %d: %s: root must be -1 (all) or in [0, %d)", c->rank, what, c->size);
    if (n && !in) return null_arg(c, what, "input");
    double t0 = vc_now();
    return leave(c, SERIAL(c->ops->gatherv(c, in, n, out_all, sizes, root)), t0, (double)n, what);
}

/* ---- memory --------------------------------------------------------------------------------- */

vc_status vc_comm_mem_alloc(vc_comm *c, size_t bytes, void **out) {
    if (!out) return vc_fail(VC_ERR_ARG, "vc_comm_mem_alloc: out is NULL");
    *out = NULL;
    if (c && c->ops && c->ops->mem_alloc) return c->ops->mem_alloc(c, bytes, out);
    *out = vc_aligned_alloc(bytes ? bytes : 1);
    return *out ? VC_OK : VC_ERR_NOMEM;
}

void vc_comm_mem_free(vc_comm *c, void *p) {
    if (!p) return;
    if (c && c->ops && c->ops->mem_free) c->ops->mem_free(c, p);
    else vc_aligned_free(p);
}

static vc_status mem_copy(vc_comm *c, void *dst, const void *src, size_t bytes, int to_device) {
    if (!bytes) return VC_OK;
    if (!dst || !src) return vc_fail(VC_ERR_ARG, "communicator memory copy of %zu bytes: NULL pointer", bytes);
    if (c && c->ops && c->ops->mem_copy) return c->ops->mem_copy(c, dst, src, bytes, to_device);
    memmove(dst, src, bytes);
    return VC_OK;
}

vc_status vc_comm_mem_upload(vc_comm *c, void *dst, const void *host_src, size_t bytes) {
    return mem_copy(c, dst, host_src, bytes, 1);
}
vc_status vc_comm_mem_download(vc_comm *c, void *host_dst, const void *src, size_t bytes) {
    return mem_copy(c, host_dst, src, bytes, 0);
}
