#include <stdlib.h>
#include "verlc/core.h"
#include "verlc/rng.h"
#include "vc_test.h"
#include <stdint.h>
#include <string.h>

/* Random123 kat_vectors, "philox4x32 10" lines: counter (4 words), key (2 words), expected (4 words). */
static const uint32_t KAT[3][10] = {
    { 0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
    { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
      0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
    { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
      0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
};

static void test_kat(void) {
    for (int t = 0; t < 3; t++) {
        const uint32_t *v = KAT[t];
        uint64_t lo = (uint64_t)v[0] | ((uint64_t)v[1] << 32);
        uint64_t hi = (uint64_t)v[2] | ((uint64_t)v[3] << 32);
        uint64_t key = (uint64_t)v[4] | ((uint64_t)v[5] << 32);
        uint32_t out[4];
        vc_philox(key, hi, lo, out);
        for (int i = 0; i < 4; i++) CHECK_MSG(out[i] == v[6 + i], "kat %d word %d: %08x", t, i, out[i]);
    }
}

static void test_uniform_normal(void) {
    const int n = 100000;
    double s = 0, s2 = 0, ns = 0, ns2 = 0, ns4 = 0;
    float umin = 1, umax = 0;
    int bins[10] = { 0 };
    for (int i = 0; i < n; i++) {
        float u = vc_rng_uniform(1234, 7, 3, (uint64_t)i);
        if (u < umin) umin = u;
        if (u > umax) umax = u;
        s += u;
        s2 += (double)u * u;
        bins[(int)(u * 10)]++;
        double z = vc_rng_normal(1234, 7, 4, (uint64_t)i);
        ns += z;
        ns2 += z * z;
        ns4 += z * z * z * z;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    CHECK(umin >= 0.0f && umax < 1.0f);
    CHECK_NEAR(mean, 0.5, 0.005);          /* sd of the mean: 0.29/sqrt(1e5) = 0.0009 */
    CHECK_NEAR(var, 1.0 / 12.0, 0.002);
    for (int b = 0; b < 10; b++) CHECK_MSG(abs(bins[b] - n / 10) < 600, "bin %d: %d", b, bins[b]);
    double nmean = ns / n, nvar = ns2 / n - nmean * nmean;
    CHECK_NEAR(nmean, 0.0, 0.015);
    CHECK_NEAR(nvar, 1.0, 0.02);
    CHECK_NEAR(ns4 / n, 3.0, 0.15); /* kurtosis of a normal */
    /* pure function of the key and counter */
    CHECK(vc_rng_uniform(1, 2, 3, 4) == vc_rng_uniform(1, 2, 3, 4));
    CHECK(vc_rng_u32(1, 2, 3, 4) != vc_rng_u32(2, 2, 3, 4));
    CHECK(vc_rng_u32(1, 2, 3, 4) != vc_rng_u32(1, 2, 3, 5));
    CHECK(vc_rng_u32(1, 2, 3, 4) != vc_rng_u32(1, 2, 4, 4));
    CHECK(vc_rng_u32(1, 2, 3, 4) != vc_rng_u32(1, 3, 3, 4));
    /* high bits of b and c still matter */
    CHECK(vc_rng_u32(1, 2, 3, 4) != vc_rng_u32(1, 2, 3 + (1ull << 32), 4));
    CHECK(vc_rng_u32(1, 2, 3, 4) != vc_rng_u32(1, 2, 3, 4 + (1ull << 40)));
    for (int i = 0; i < 1000; i++) CHECK(vc_rng_below(7, 9, 0, 0, (uint64_t)i) < 7);
}

static void test_shuffle(void) {
    enum { N = 1000 };
    static uint32_t a[N], b[N], c[N];
    for (uint32_t i = 0; i < N; i++) a[i] = b[i] = c[i] = i;
    vc_shuffle_u32(a, N, 42, 0);
    vc_shuffle_u32(b, N, 42, 0);
    vc_shuffle_u32(c, N, 42, 1);
    static unsigned char seen[N];
    memset(seen, 0, sizeof seen);
    int perm = 1, fixed = 0, same_ab = 1, same_ac = 1;
    for (int i = 0; i < N; i++) {
        if (a[i] >= N || seen[a[i]]) perm = 0;
        else seen[a[i]] = 1;
        fixed += a[i] == (uint32_t)i;
        same_ab &= a[i] == b[i];
        same_ac &= a[i] == c[i];
    }
    CHECK(perm);
    CHECK(same_ab);
    CHECK(!same_ac);
    CHECK(fixed < 10); /* expected number of fixed points of a random permutation is 1 */
    /* each position of a 4-element shuffle is roughly uniform over many epochs */
    int count[4][4] = { { 0 } };
    for (uint64_t e = 0; e < 8000; e++) {
        uint32_t v[4] = { 0, 1, 2, 3 };
        vc_shuffle_u32(v, 4, 5, e);
        for (int i = 0; i < 4; i++) count[i][v[i]]++;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) CHECK_MSG(abs(count[i][j] - 2000) < 200, "pos %d val %d: %d", i, j, count[i][j]);
    vc_shuffle_u32(NULL, 0, 1, 1); /* empty is fine */
    uint32_t one = 7;
    vc_shuffle_u32(&one, 1, 1, 1);
    CHECK(one == 7);
}

/* numpy's legacy stream: RandomState(42).shuffle(list(range(n))) as numpy 2 gives it (values taken from numpy) */
static void test_numpy_shuffle(void) {
    static const struct { size_t n; size_t head[12]; size_t weighted; } CASES[] = {
        { 10, { 8, 1, 5, 0, 7, 2, 9, 4, 3, 6 }, 209 },
        { 37, { 17, 13, 4, 29, 35, 25, 6, 26, 24, 16, 8, 15 }, 12215 },
        { 1000, { 521, 737, 740, 660, 411, 678, 626, 513, 859, 136, 811, 76 }, 251374799 },
    };
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        size_t n = CASES[c].n, *x = malloc(n * sizeof *x), w = 0;
        for (size_t i = 0; i < n; i++) x[i] = i;
        vc_np_mt19937 m;
        vc_np_seed(&m, 42);
        vc_np_shuffle(&m, x, n);
        int head = 1;
        for (size_t i = 0; i < n && i < 12; i++) head &= x[i] == CASES[c].head[i];
        for (size_t i = 0; i < n; i++) w += i * x[i];
        CHECK_MSG(head && w == CASES[c].weighted, "numpy shuffle of %zu: head %zu %zu %zu, sum i*x %zu", n, x[0], x[1],
                  x[2], w);
        free(x);
    }
}

/* numpy 2.4's Generator (np.random.default_rng(seed)): its raw words, bounded integers (integers(0, 2**32) takes 32-bit
 * words, integers(0, 10**12) Lemire's 64-bit form) and choice(n, k, replace=False) by Floyd's sampling and by the tail
 * shuffle (n over 10,000, k over n / 50); the values numpy printed */
static void test_numpy_generator(void) {
    vc_np_pcg64 g;
    vc_np_pcg64_seed(&g, 42);
    CHECK(vc_np_pcg64_next64(&g) == 0xc621fbcd16d92688ull && vc_np_pcg64_next64(&g) == 0x705a5661a791ffc1ull);
    vc_np_pcg64_seed(&g, 42);
    uint64_t a = vc_np_pcg64_bounded(&g, 0xffffffffu), b = vc_np_pcg64_bounded(&g, 0xffffffffu);
    CHECK(a == 383329928 && b == 3324115917u && vc_np_pcg64_bounded(&g, 0xffffffffu) == 2811363265u);
    vc_np_pcg64_seed(&g, 3);
    a = vc_np_pcg64_bounded(&g, 999999999999ull);
    CHECK(a == 85649167143ull && vc_np_pcg64_bounded(&g, 999999999999ull) == 236810506596ull);
    int64_t out[1000];
    static const int64_t C5[5] = { 5781, 3279, 4890, 666, 3235 };
    static const int64_t C16[16] = { 11, 3, 9, 13, 5, 8, 12, 15, 1, 4, 6, 14, 7, 10, 2, 0 };
    vc_np_pcg64_seed(&g, 42);
    CHECK(vc_np_choice(&g, 7473, 5, out) == VC_OK && !memcmp(out, C5, sizeof C5));
    vc_np_pcg64_seed(&g, (1ull << 40) + 5);
    CHECK(vc_np_choice(&g, 16, 16, out) == VC_OK && !memcmp(out, C16, sizeof C16));
    vc_np_pcg64_seed(&g, 7);
    uint64_t h = 0;
    CHECK(vc_np_choice(&g, 20000, 1000, out) == VC_OK);
    for (int i = 0; i < 1000; i++) h = h * 1000003u + (uint64_t)out[i];
    CHECK(out[0] == 3762 && out[1] == 1432 && out[2] == 9397 && out[999] == 18898 && h == 3903956350503813351ull);
    CHECK(vc_np_choice(&g, 3, 4, out) == VC_ERR_ARG);
}

int main(void) {
    test_kat();
    test_numpy_generator();
    test_numpy_shuffle();
    test_uniform_normal();
    test_shuffle();
    return vc_test_done();
}
