/* Host <-> device copies through the pinned staging ring: sizes around and beyond the ring's chunks,
 * the host source reused (overwritten) right after h2d returns, many small h2d copies into one buffer
 * in order, h2d followed by a kernel and d2h, d2h of data a kernel just wrote, odd offsets. Prints the
 * h2d / d2h bandwidth of a 256 MiB copy. Without a GPU: "no CUDA device: skipped", exit 0. */
#include "cuda_test_util.h"

static void fill_bytes(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

static void round_trip(size_t n) {
    const vc_backend *G = vc_backend_cuda();
    unsigned char *src = malloc(n + 1), *want = malloc(n + 1), *got = malloc(n + 1);
    char *dev = vc_cuda_malloc(n + 64);
    CHECK(src && want && got && dev);
    fill_bytes(want, n, (unsigned)n);
    memcpy(src, want, n);
    G->h2d(dev + 3, src, n); /* odd device offset */
    memset(src, 0xAB, n);    /* the source may be reused at once */
    memset(got, 0, n);
    G->d2h(got, dev + 3, n);
    int ok = !memcmp(got, want, n) && G->sync() == VC_OK;
    printf("  round trip %10zu bytes: %s\n", n, ok ? "ok" : "FAIL");
    CHECK_MSG(ok, "round trip of %zu bytes", n);
    vc_cuda_free(dev);
    free(src);
    free(want);
    free(got);
}

static void ordered_small(void) {
    const vc_backend *G = vc_backend_cuda();
    enum { N = 1000, W = 256 };
    float *dev = vc_cuda_malloc(W * sizeof(float)), h[W], out[W];
    for (int i = 0; i < N; i++) { /* each copy overwrites the last; only the final one may remain */
        for (int j = 0; j < W; j++) h[j] = (float)(i * W + j);
        G->h2d(dev + (i % 2), h, (W - 1) * sizeof(float));
    }
    G->d2h(out, dev + ((N - 1) % 2), (W - 1) * sizeof(float));
    int ok = 1;
    for (int j = 0; j < W - 1; j++) ok &= out[j] == (float)((N - 1) * W + j);
    printf("  %d small h2d copies in order: %s\n", N, ok ? "ok" : "FAIL");
    CHECK(ok);
    /* h2d, then a kernel on the data, then d2h */
    for (int j = 0; j < W; j++) h[j] = (float)j;
    G->h2d(dev, h, sizeof h);
    for (int j = 0; j < W; j++) h[j] = -1.0f;
    G->scale(dev, dev, 2.0f, W);
    G->d2h(out, dev, sizeof out);
    ok = 1;
    for (int j = 0; j < W; j++) ok &= out[j] == 2.0f * (float)j;
    printf("  h2d -> kernel -> d2h: %s\n", ok ? "ok" : "FAIL");
    CHECK(ok);
    vc_cuda_free(dev);
}

static void bandwidth(void) {
    const vc_backend *G = vc_backend_cuda();
    size_t n = (size_t)256 << 20;
    char *h = malloc(n), *dev = vc_cuda_malloc(n);
    CHECK(h && dev);
    if (!h || !dev) return;
    memset(h, 1, n);
    G->h2d(dev, h, n);
    G->sync();
    double t0 = vc_now();
    G->h2d(dev, h, n);
    G->sync();
    double t1 = vc_now();
    G->d2h(h, dev, n);
    double t2 = vc_now();
    printf("timing: 256 MiB h2d %.2f GB/s, d2h %.2f GB/s (pageable host memory through the pinned ring)\n",
           n / (t1 - t0) / 1e9, n / (t2 - t1) / 1e9);
    vc_cuda_free(dev);
    free(h);
}

/* memory the pool keeps after a free (it does not return freed blocks to the device) counts as free: a plan or a KV
 * pool made after other work sees it; the pool's high-water mark holds the peak */
static void pool_free_counts(void) {
    size_t used0, free0, total, used1, free1, free2, hi = 0, res = 0;
    size_t n = (size_t)96 << 20;
    CHECK_OK(vc_cuda_mem_info(&used0, &free0, &total));
    char *p = vc_cuda_malloc(n);
    CHECK(p != NULL);
    CHECK_OK(vc_cuda_mem_info(&used1, &free1, &total));
    CHECK_MSG(used1 >= used0 + n && free1 + n <= free0, "allocated %zu: used %zu -> %zu, free %zu -> %zu", n, used0, used1,
              free0, free1);
    vc_cuda_free(p);
    CHECK_OK(vc_cuda_sync());
    CHECK_OK(vc_cuda_mem_info(NULL, &free2, &total));
    CHECK_MSG(free2 == free0, "after the free: %zu free, %zu before the allocation", free2, free0);
    CHECK_OK(vc_cuda_mem_peak(&hi, &res));
    CHECK(hi >= used0 + n && res >= hi);
}

int main(void) {
    if (gpu_skip()) return 0;
    pool_free_counts();
    static const size_t sizes[] = { 0, 1, 3, 4097, (size_t)2 << 20, ((size_t)2 << 20) + 1, ((size_t)9 << 20) + 7,
                                    (size_t)33 << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) round_trip(sizes[i]);
    ordered_small();
    if (!timing_skipped("copies")) bandwidth();
    check_sticky("copies");
    return vc_test_done();
}
