/* Helpers for the GPU tests: random data, device buffers that are freed at the end, and comparisons
 * of a device result against the CPU backend's result (max abs error, relative to the reference's
 * largest magnitude). Without a usable device the tests print "no CUDA device: skipped" and pass. */
#ifndef VC_CUDA_TEST_UTIL_H
#define VC_CUDA_TEST_UTIL_H
#include "tensor/backend.h"
#include "vc_test.h"
#include "verlc/core.h"
#include "verlc/cuda.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEEP 4096
static void *t_host[MAX_KEEP], *t_dev[MAX_KEEP];
static int t_nhost, t_ndev;
static uint64_t t_rng = 0x9E3779B97F4A7C15ull;

static inline float urand(void) { /* uniform [-1, 1) */
    t_rng ^= t_rng << 13;
    t_rng ^= t_rng >> 7;
    t_rng ^= t_rng << 17;
    return (float)((t_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static inline float *hbuf(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (t_nhost < MAX_KEEP) t_host[t_nhost++] = p;
    return p;
}

static inline float *hrand(size_t n, float scale) {
    float *p = hbuf(n);
    for (size_t i = 0; i < n; i++) p[i] = scale * urand();
    return p;
}

static inline void *dalloc(size_t bytes) {
    void *p = vc_cuda_malloc(bytes ? bytes : 4);
    if (!p) {
        fprintf(stderr, "device allocation failed: %s\n", vc_last_error());
        exit(1);
    }
    if (t_ndev < MAX_KEEP) t_dev[t_ndev++] = p;
    return p;
}

/* device copy of a host array (any element type) */
static inline void *dcopy(const void *h, size_t bytes) {
    void *d = dalloc(bytes);
    if (bytes && vc_cuda_h2d(d, h, bytes) != VC_OK) {
        fprintf(stderr, "h2d: %s\n", vc_last_error());
        exit(1);
    }
    return d;
}
static inline float *dup_f(const float *h, size_t n) { return (float *)dcopy(h, n * sizeof(float)); }

static inline float *fetch(const float *d, size_t n) {
    float *h = hbuf(n);
    if (n && vc_cuda_d2h(h, d, n * sizeof(float)) != VC_OK) fprintf(stderr, "d2h: %s\n", vc_last_error());
    return h;
}

static inline float *clone(const float *h, size_t n) {
    float *c = hbuf(n);
    memcpy(c, h, n * sizeof(float));
    return c;
}

/* compares a host copy of a GPU result with the reference; returns the relative error */
static inline double cmp_host(const char *name, const float *g, const float *r, size_t n, double tol) {
    double maxabs = 0, maxref = 0;
    int nan = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(g[i]) != isnan(r[i]) || isinf(g[i]) != isinf(r[i])) nan++;
        if (!isfinite(g[i]) || !isfinite(r[i])) continue;
        double e = fabs((double)g[i] - r[i]);
        if (e > maxabs) {
            maxabs = e;
            at = i;
        }
        if (fabs(r[i]) > maxref) maxref = fabs(r[i]);
    }
    double rel = maxabs / (maxref > 1e-30 ? maxref : 1e-30);
    int ok = rel <= tol && !nan;
    printf("  %-44s n=%-9zu max abs %.3e  max|ref| %.3e  rel %.3e (tol %.0e)%s\n", name, n, maxabs, maxref, rel, tol,
           ok ? "" : "  FAIL");
    if (!ok && n) printf("    worst at %zu: gpu %.9g cpu %.9g; %d nan/inf mismatches\n", at, g[at], r[at], nan);
    CHECK_MSG(ok, "%s: rel %.3e > %.0e", name, rel, tol);
    return rel;
}

static inline double cmp(const char *name, const float *dev, const float *ref, size_t n, double tol) {
    return cmp_host(name, fetch(dev, n), ref, n, tol);
}

/* GPU result equal bit for bit to another run (determinism) */
/* a's n floats (device memory) bit for bit b's: two ways to the same values */
static inline void same_bits_as(const char *name, const float *a_dev, const float *b_dev, size_t n) {
    float *a = fetch(a_dev, n), *b = fetch(b_dev, n);
    int ok = memcmp(a, b, n * sizeof(float)) == 0;
    printf("  %-60s %s\n", name, ok ? "the same bits" : "DIFFERENT bits  FAIL");
    CHECK_MSG(ok, "%s: different bits", name);
}

static inline void same_bits(const char *name, const float *a_dev, const float *b_dev, size_t n) {
    float *a = fetch(a_dev, n), *b = fetch(b_dev, n);
    int ok = memcmp(a, b, n * sizeof(float)) == 0;
    printf("  %-44s %s\n", name, ok ? "identical bits run to run" : "DIFFERENT bits run to run  FAIL");
    CHECK_MSG(ok, "%s not deterministic", name);
}

/* a digest of n floats' bits (device memory), printed: a kernel rewritten to give the same bits prints the same digests
 * as the kernel it replaces (compare two builds' output) */
static inline void bits_digest(const char *name, const float *dev, size_t n) {
    const unsigned char *b = (const unsigned char *)fetch(dev, n);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
    printf("  %-60s digest %016llx\n", name, (unsigned long long)h);
}

/* 1 on the CUDA emulator (tools/cudaemu): timings mean nothing there and the timing runs are skipped */
static inline int timing_skipped(const char *what) {
#ifdef VC_CUDA_EMU
    printf("timing (%s): skipped on the CUDA emulator\n", what);
    return 1;
#else
    (void)what;
    return 0;
#endif
}

/* 0: continue; otherwise the process should exit with 0 after printing the skip line */
static inline int gpu_skip(void) {
    if (vc_cuda_device_count() > 0 && vc_cuda_init(-1) == VC_OK) {
        char name[256];
        if (vc_cuda_device_name(name, sizeof name) == VC_OK) printf("device: %s\n", name);
        return 0;
    }
    if (vc_cuda_device_count() == 0) vc_cuda_init(-1); /* sets the one-line message */
    printf("no CUDA device: skipped (%s)\n", vc_last_error());
    return 1;
}

static inline void check_sticky(const char *where) {
    vc_status st = vc_cuda_sync();
    CHECK_MSG(st == VC_OK, "%s: %s", where, vc_last_error());
}

static inline void release_all(void) {
    for (int i = 0; i < t_ndev; i++) vc_cuda_free(t_dev[i]);
    for (int i = 0; i < t_nhost; i++) free(t_host[i]);
    t_ndev = t_nhost = 0;
    vc_cuda_sync();
}
#endif
