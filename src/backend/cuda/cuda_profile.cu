/* Op profiler (VERLC_CUDA_PROFILE=1): GPU time per op name, from a pair of CUDA events around every
 * op entry (recorded at vc_cu_begin and at its last vc_cu_end), resolved whenever the host waits for
 * the stream; plus how busy the GPU was between the first and last op of each wait (an idle GPU means
 * the host is the bottleneck: launch overhead, synchronisation). Printed to stderr at exit. The event
 * records add host time per op, so the run is a little slower than without. Off: one flag test per op.
 * When the host is the bottleneck an op's interval holds the GPU's wait for the host to queue the op's kernels
 * (cuBLAS's host work, a page table's upload), not only their run: VERLC_CUDA_PROFILE=ahead queues a spin of
 * VERLC_CUDA_PROFILE_AHEAD_US microseconds (50 unless set) before each op's first event, so that the op is queued in
 * full before the GPU reaches it and its interval is its GPU time alone (the run is slower: the spins). */
#include "cuda_internal.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int vc_cu_prof_on = -1;
static long long g_ahead_ns; /* VERLC_CUDA_PROFILE=ahead: the spin queued before each op */

/* waits ns nanoseconds of the GPU's global timer (one thread); the emulator runs kernels in order on the host, so
 * there is nothing to get ahead of */
__global__ void k_prof_spin(long long ns) {
#ifndef VC_CUDA_EMULATOR
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while ((long long)(t - t0) < ns);
#else
    (void)ns;
#endif
}

struct prof_rec {
    const char *op;
    cudaEvent_t a, b;
    int closed;
};
struct prof_sum {
    const char *op;
    long calls;
    double ms;
};

#define MAX_OPS 256
static prof_rec *g_rec;
static int g_nrec, g_caprec, g_open = -1;
static cudaEvent_t *g_free;
static int g_nfree, g_capfree;
static prof_sum g_sum[MAX_OPS];
static int g_nsum;
static double g_span_ms, g_busy_ms;
static long g_ops, g_nested; /* g_nested: begins while another op's record was open and not yet ended */
static long g_dropped;        /* ops counted before the last vc_cuda_profile_reset (a bench's warm-up) */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* ops may come from a communication thread */

static void report(void) {
    if (!g_ops) return;
    if (g_ahead_ns)
        fprintf(stderr, "cuda profile: each op queued behind a %.0f us spin: its interval is its GPU time without the "
                "host's launch gaps (the busy share below counts the spins as idle)\n", g_ahead_ns / 1e3);
    if (g_dropped)
        fprintf(stderr, "cuda profile: %ld ops before the last reset not counted (a warm-up, prompt steps)\n", g_dropped);
    fprintf(stderr, "cuda profile: %ld ops, %.3f s of GPU time; the GPU was busy %.0f%% of the time between the first "
            "and last op of each host wait\n", g_ops, g_busy_ms / 1e3, g_span_ms > 0 ? 100.0 * g_busy_ms / g_span_ms : 0.0);
    /* by total time, descending */
    for (int i = 0; i < g_nsum; i++)
        for (int j = i + 1; j < g_nsum; j++)
            if (g_sum[j].ms > g_sum[i].ms) {
                prof_sum t = g_sum[i];
                g_sum[i] = g_sum[j];
                g_sum[j] = t;
            }
    if (g_nested)
        fprintf(stderr, "  (%ld ops began inside another op's interval before its first end: that op's time so far went "
                "to them; vc_cu_prof_nest around an op's internal calls keeps them out)\n", g_nested);
    fprintf(stderr, "  %-34s %9s %11s %10s %6s\n", "op", "calls", "total ms", "mean us", "share");
    for (int i = 0; i < g_nsum; i++)
        fprintf(stderr, "  %-34s %9ld %11.3f %10.2f %5.1f%%\n", g_sum[i].op, g_sum[i].calls, g_sum[i].ms,
                1e3 * g_sum[i].ms / (double)g_sum[i].calls, g_busy_ms > 0 ? 100.0 * g_sum[i].ms / g_busy_ms : 0.0);
}

int vc_cu_prof_enabled(void) {
    if (vc_cu_prof_on < 0) {
        const char *e = getenv("VERLC_CUDA_PROFILE");
        vc_cu_prof_on = e && (atoi(e) || !strcmp(e, "ahead")) ? 1 : 0;
        if (vc_cu_prof_on && !strcmp(e, "ahead")) {
            const char *us = getenv("VERLC_CUDA_PROFILE_AHEAD_US");
            g_ahead_ns = 1000LL * (us && atoll(us) > 0 ? atoll(us) : 50);
        }
        if (vc_cu_prof_on) atexit(report);
    }
    return vc_cu_prof_on;
}

static cudaEvent_t event(void) {
    if (g_nfree) return g_free[--g_nfree];
    cudaEvent_t e = NULL;
    if (cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return e;
}

static void recycle(cudaEvent_t e) {
    if (!e) return;
    if (g_nfree == g_capfree) {
        int cap = g_capfree ? 2 * g_capfree : 1024;
        cudaEvent_t *f = (cudaEvent_t *)realloc(g_free, (size_t)cap * sizeof *f);
        if (!f) {
            cudaEventDestroy(e);
            return;
        }
        g_free = f;
        g_capfree = cap;
    }
    g_free[g_nfree++] = e;
}

static void add(const char *op, double ms) {
    int i = 0;
    while (i < g_nsum && strcmp(g_sum[i].op, op)) i++;
    if (i == g_nsum) {
        if (g_nsum == MAX_OPS) return;
        g_sum[g_nsum++] = prof_sum{ op, 0, 0.0 };
    }
    g_sum[i].calls++;
    g_sum[i].ms += ms;
    g_busy_ms += ms;
    g_ops++;
}

static void begin_locked(const char *op);
void vc_cu_prof_begin(const char *op) {
    pthread_mutex_lock(&g_mu);
    begin_locked(op);
    pthread_mutex_unlock(&g_mu);
}

static void begin_locked(const char *op) {
    if (g_open >= 0 && !g_rec[g_open].closed) g_nested++;
    if (g_nrec == g_caprec) {
        int cap = g_caprec ? 2 * g_caprec : 1024;
        prof_rec *r = (prof_rec *)realloc(g_rec, (size_t)cap * sizeof *r);
        if (!r) return;
        g_rec = r;
        g_caprec = cap;
    }
    prof_rec *r = &g_rec[g_nrec];
    r->op = op;
    r->a = event();
    r->b = event();
    r->closed = 0;
    if (g_ahead_ns) k_prof_spin<<<1, 1, 0, vc_cu_stream()>>>(g_ahead_ns);
    if (!r->a || !r->b || cudaEventRecord(r->a, vc_cu_stream()) != cudaSuccess) {
        cudaGetLastError();
        recycle(r->a);
        recycle(r->b);
        g_open = -1;
        return;
    }
    g_open = g_nrec++;
}

void vc_cu_prof_end(const char *op) {
    pthread_mutex_lock(&g_mu);
    (void)op; /* an entry may end under another name (a sub-path): the op is the one that began */
    if (g_open >= 0) {
        if (cudaEventRecord(g_rec[g_open].b, vc_cu_stream()) == cudaSuccess) g_rec[g_open].closed = 1;
        else cudaGetLastError();
    }
    pthread_mutex_unlock(&g_mu);
}

/* forget the counts so far (a bench calls it after its warm-up: first calls pay for module loading, cuBLAS's
 * heuristics and the memory pool's growth) */
void vc_cuda_profile_reset(void) {
    if (vc_cu_prof_on <= 0 || vc_cuda_sync() != VC_OK) return; /* the wait collects what is recorded */
    pthread_mutex_lock(&g_mu);
    g_dropped += g_ops;
    g_nsum = 0;
    g_span_ms = g_busy_ms = 0;
    g_ops = g_nested = 0;
    pthread_mutex_unlock(&g_mu);
}

/* after the stream has been waited for: every recorded op has run */
void vc_cu_prof_collect(void) {
    pthread_mutex_lock(&g_mu);
    int first = -1, last = -1;
    for (int i = 0; i < g_nrec; i++) {
        prof_rec *r = &g_rec[i];
        float ms = 0;
        if (r->closed && cudaEventElapsedTime(&ms, r->a, r->b) == cudaSuccess) {
            add(r->op, ms);
            if (first < 0) first = i;
            last = i;
        } else cudaGetLastError();
    }
    float span = 0;
    if (first >= 0 && cudaEventElapsedTime(&span, g_rec[first].a, g_rec[last].b) == cudaSuccess) g_span_ms += span;
    else cudaGetLastError();
    for (int i = 0; i < g_nrec; i++) {
        recycle(g_rec[i].a);
        recycle(g_rec[i].b);
    }
    g_nrec = 0;
    g_open = -1;
    pthread_mutex_unlock(&g_mu);
}
