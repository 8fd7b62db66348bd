/* verlc bench allreduce: time, algorithm bandwidth and bus bandwidth of the communicator's float32 sum
 * allreduce (MPI's order) and ordered allreduce (rank order) from 4 KiB to 64 MiB, as nccl-tests reports
 * them: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (what each link carries in a ring). Launch
 * with several ranks, e.g. `mpirun -np 4 verlc bench allreduce`; each size is checked once for the
 * right values (bitwise for the ordered sum). */
#include "verlc/core.h"
#include "verlc/dist.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* argv[0] is "allreduce" (or "bench" followed by "allreduce"); options follow. */
int vc_bench_allreduce(int argc, char **argv);

struct bench_opts {
    size_t min_bytes, max_bytes;
    int iters; /* 0: as many as fit in about 0.2 s, at least 3 */
    const char *kind;
};

static void usage(FILE *f) {
    fprintf(f, "usage: verlc bench allreduce [--min BYTES] [--max BYTES] [--iters N] [--kind auto|mpi|nccl]\n"
               "  sizes double from --min (default 4K) to --max (default 64M); K, M, G suffixes are binary.\n"
               "  Launch several ranks: mpirun -np 4 verlc bench allreduce   (or srun -n 4 ...)\n");
}

static int parse_size(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (end == s || *end || !(v > 0)) return -1;
    *out = (size_t)(v * mul);
    return *out >= 4 ? 0 : -1;
}

static int parse_opts(int argc, char **argv, struct bench_opts *o) {
    *o = (struct bench_opts){ 4096, (size_t)64 << 20, 0, "auto" };
    int i = 1;
    if (argc > 1 && !strcmp(argv[1], "allreduce")) i = 2; /* called with argv[0] = "bench" */
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        if (!v) { fprintf(stderr, "verlc bench allreduce: %s needs a value\n", a); return -1; }
        i++;
        if (!strcmp(a, "--min") && !parse_size(v, &o->min_bytes)) continue;
        if (!strcmp(a, "--max") && !parse_size(v, &o->max_bytes)) continue;
        if (!strcmp(a, "--iters") && (o->iters = atoi(v)) > 0) continue;
        if (!strcmp(a, "--kind")) { o->kind = v; continue; }
        fprintf(stderr, "verlc bench allreduce: bad option %s %s\n", a, v);
        usage(stderr);
        return -1;
    }
    if (o->max_bytes < o->min_bytes) o->max_bytes = o->min_bytes;
    return 0;
}

/* Rank r's value at element i: multiples of 2^-10 below 1, so that sums round only for many ranks. */
__attribute__((noinline)) static float value(int r, size_t i) {
    uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)r * 40503u;
    return (float)((h >> 8) % 1024) / 1024.0f - 0.5f + (float)r * 1e-3f;
}

/* Uploads every rank's values, reduces once, and checks the result against the rank-order sum. */
static vc_status check_once(vc_comm *c, float *dev, float *host, size_t n, int ordered, int *ok) {
    int P = vc_comm_size(c), me = vc_comm_rank(c);
    vc_status st;
    for (size_t i = 0; i < n; i++) host[i] = value(me, i);
    if ((st = vc_comm_mem_upload(c, dev, host, n * sizeof *host))) return st;
    st = ordered ? vc_comm_allreduce_f32_ordered(c, dev, n, VC_SUM) : vc_comm_allreduce_f32(c, dev, n, VC_SUM);
    if (st || (st = vc_comm_mem_download(c, host, dev, n * sizeof *host))) return st;
    *ok = 1;
    for (size_t i = 0; i < n && *ok; i++) {
        float want = value(0, i);
        for (int r = 1; r < P; r++) want += value(r, i);
        *ok = ordered ? !memcmp(&want, &host[i], sizeof want) : (host[i] - want <= 1e-5f && want - host[i] <= 1e-5f);
    }
    double bad = !*ok; /* every rank reports the worst */
    if ((st = vc_comm_allreduce_f64(c, &bad, 1, VC_MAX))) return st;
    *ok = bad == 0;
    return VC_OK;
}

/* Seconds per call, the slowest rank's. Rank 0 picks the iteration count from one timed call. */
static vc_status time_calls(vc_comm *c, float *dev, size_t n, int ordered, int iters, double *secs) {
    vc_status st;
    double t0 = vc_now(), dt;
    st = ordered ? vc_comm_allreduce_f32_ordered(c, dev, n, VC_SUM) : vc_comm_allreduce_f32(c, dev, n, VC_SUM);
    if (st) return st;
    if (iters <= 0) {
        dt = vc_now() - t0;
        iters = dt > 0 ? (int)(0.2 / dt) : 1000;
        iters = iters < 3 ? 3 : iters > 1000 ? 1000 : iters;
        if ((st = vc_comm_bcast(c, &iters, sizeof iters, 0))) return st;
    }
    if ((st = vc_comm_barrier(c))) return st;
    t0 = vc_now();
    for (int k = 0; k < iters && !st; k++)
        st = ordered ? vc_comm_allreduce_f32_ordered(c, dev, n, VC_SUM) : vc_comm_allreduce_f32(c, dev, n, VC_SUM);
    if (st) return st;
    double t = (vc_now() - t0) / iters;
    if ((st = vc_comm_allreduce_f64(c, &t, 1, VC_MAX))) return st;
    *secs = t;
    return VC_OK;
}

static vc_status bench_sizes(vc_comm *c, const struct bench_opts *o) {
    int P = vc_comm_size(c), me = vc_comm_rank(c);
    size_t max_n = o->max_bytes / sizeof(float);
    float *dev = NULL, *host = vc_malloc(max_n * sizeof *host);
    vc_status st = host ? vc_comm_mem_alloc(c, max_n * sizeof *host, (void **)&dev) : VC_ERR_NOMEM;
    if (st) goto out;
    if (me == 0) {
        printf("verlc bench allreduce: %s, %d ranks (%d on this node), float32 sum in place\n", vc_comm_kind(c), P,
               vc_comm_local_size(c));
        printf("%10s %10s | %11s %9s %9s | %11s %9s %9s | %s\n", "bytes", "floats", "plain us", "algbw", "busbw",
               "ordered us", "algbw", "busbw", "values");
    }
    /* warm-up: connections and buffers are set up on first use */
    for (int k = 0; k < 3 && !st; k++) st = vc_comm_allreduce_f32(c, dev, o->min_bytes / sizeof(float), VC_SUM);
    if (st) goto out;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 2) {
        size_t n = bytes / sizeof(float);
        double t[2];
        int ok[2];
        for (int ordered = 0; ordered < 2; ordered++) {
            if ((st = check_once(c, dev, host, n, ordered, &ok[ordered]))) goto out;
            memset(host, 0, n * sizeof *host); /* time on zeros: repeated sums stay finite */
            if ((st = vc_comm_mem_upload(c, dev, host, n * sizeof *host))) goto out;
            if ((st = time_calls(c, dev, n, ordered, o->iters, &t[ordered]))) goto out;
        }
        if (me == 0) {
            double b = (double)n * sizeof(float), f = 2.0 * (P - 1) / P;
            printf("%10zu %10zu | %11.1f %9.3f %9.3f | %11.1f %9.3f %9.3f | %s\n", (size_t)b, n, t[0] * 1e6,
                   b / t[0] / 1e9, f * b / t[0] / 1e9, t[1] * 1e6, b / t[1] / 1e9, f * b / t[1] / 1e9,
                   ok[0] && ok[1] ? "ok" : !ok[1] ? "WRONG (ordered)" : "WRONG (plain)");
            fflush(stdout);
        }
        if (!ok[0] || !ok[1]) { st = vc_fail(VC_ERR_NUMERIC, "allreduce of %zu floats gave wrong values", n); goto out; }
    }
    if (me == 0) printf("algbw = bytes / time; busbw = algbw * 2(n-1)/n; GB/s = 1e9 bytes/s; time of the slowest rank\n");
out:
    vc_comm_mem_free(c, dev);
    free(host);
    return st;
}

int vc_bench_allreduce(int argc, char **argv) {
    struct bench_opts o;
    vc_comm *c = NULL;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc > 0 ? 0 : 2;
    vc_status st = vc_comm_init(NULL, NULL, o.kind, &c);
    if (st) {
        fprintf(stderr, "verlc bench allreduce: %s\n", vc_last_error());
        return 1;
    }
    if (vc_comm_size(c) == 1) {
        printf("verlc bench allreduce: a single process (%s communicator) has nothing to exchange; launch several "
               "ranks, e.g. mpirun -np 4 verlc bench allreduce (or srun -n 4 ...)\n", vc_comm_kind(c));
        vc_comm_free(c);
        return 0;
    }
    st = bench_sizes(c, &o);
    if (st) {
        fprintf(stderr, "verlc bench allreduce: %s\n", vc_last_error());
        vc_comm_abort(c, 1); /* peers may be inside a collective: end them too */
    }
    vc_comm_free(c);
    return st ? 1 : 0;
}
