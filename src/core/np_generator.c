/* numpy's Generator as np.random.default_rng(seed) makes it (numpy 1.17 and later): a SeedSequence of the integer
 * seed hashed into PCG64's 128-bit state and increment, PCG64's XSL-RR output (32-bit draws from halves of a 64-bit
 * one, low half first), its bounded integers by Lemire's multiply-and-reject, and Generator.choice(n, k,
 * replace=False): Floyd's sampling with a probing set, then a shuffle of the k, or for populations over 10,000 of
 * which more than a 50th is drawn, a shuffle of the tail of 0..n-1. verl draws with it where a dataset keeps
 * train_max_samples of its rows. */
#include "verlc/rng.h"
#include "verlc/core.h"
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

enum { POOL = 4 };
static const uint32_t HASH_A = 0x43b0d7e5u, MUL_A = 0x931e8875u, HASH_B = 0x8b51f9ddu, MUL_B = 0x58f38dedu;
static const uint32_t MIX_L = 0xca01f9ddu, MIX_R = 0x4973f715u;

static uint32_t hashmix(uint32_t v, uint32_t *h) {
    v ^= *h;
    *h *= MUL_A;
    v *= *h;
    return v ^ (v >> 16);
}

static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t r = MIX_L * x - MIX_R * y;
    return r ^ (r >> 16);
}

/* SeedSequence(seed).generate_state(4, uint64) */
static void seed_words(uint64_t seed, uint64_t out[4]) {
    uint32_t ent[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) }, pool[POOL], h = HASH_A;
    int n_ent = seed >> 32 ? 2 : 1; /* the integer's 32-bit words, lowest first */
    for (int i = 0; i < POOL; i++) pool[i] = hashmix(i < n_ent ? ent[i] : 0, &h);
    for (int s = 0; s < POOL; s++)
        for (int d = 0; d < POOL; d++)
            if (s != d) pool[d] = mix(pool[d], hashmix(pool[s], &h));
    uint32_t w[8], hb = HASH_B;
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % POOL] ^ hb;
        hb *= MUL_B;
        v *= hb;
        w[i] = v ^ (v >> 16);
    }
    for (int i = 0; i < 4; i++) out[i] = (uint64_t)w[2 * i] | (uint64_t)w[2 * i + 1] << 32;
}

static u128 pcg_mult(void) { return (u128)2549297995355413924ull << 64 | 4865540595714422341ull; }

void vc_np_pcg64_seed(vc_np_pcg64 *g, uint64_t seed) {
    uint64_t w[4];
    seed_words(seed, w);
    u128 init = (u128)w[0] << 64 | w[1], seq = (u128)w[2] << 64 | w[3];
    u128 inc = seq << 1 | 1, st = inc; /* state 0, one step, add the initial state, one step */
    st = (st + init) * pcg_mult() + inc;
    memcpy(g->state, &st, sizeof st);
    memcpy(g->inc, &inc, sizeof inc);
    g->has32 = 0;
    g->buf32 = 0;
}

uint64_t vc_np_pcg64_next64(vc_np_pcg64 *g) {
    u128 st, inc;
    memcpy(&st, g->state, sizeof st);
    memcpy(&inc, g->inc, sizeof inc);
    st = st * pcg_mult() + inc;
    memcpy(g->state, &st, sizeof st);
    uint64_t x = (uint64_t)(st >> 64) ^ (uint64_t)st;
    unsigned r = (unsigned)(st >> 122);
    return (x >> r) | (x << ((64 - r) & 63));
}

uint32_t vc_np_pcg64_next32(vc_np_pcg64 *g) {
    if (g->has32) {
        g->has32 = 0;
        return g->buf32;
    }
    uint64_t v = vc_np_pcg64_next64(g);
    g->has32 = 1;
    g->buf32 = (uint32_t)(v >> 32);
    return (uint32_t)v;
}

uint64_t vc_np_pcg64_bounded(vc_np_pcg64 *g, uint64_t max) {
    if (max == 0) return 0;
    if (max == 0xffffffffu) return vc_np_pcg64_next32(g);
    if (max < 0xffffffffu) {
        uint32_t n = (uint32_t)max + 1;
        uint64_t m = (uint64_t)vc_np_pcg64_next32(g) * n;
        if ((uint32_t)m < n)
            for (uint32_t floor = (uint32_t)(0xffffffffu - max) % n; (uint32_t)m < floor;)
                m = (uint64_t)vc_np_pcg64_next32(g) * n;
        return m >> 32;
    }
    if (max == UINT64_MAX) return vc_np_pcg64_next64(g);
    uint64_t n = max + 1;
    u128 m = (u128)vc_np_pcg64_next64(g) * n;
    if ((uint64_t)m < n)
        for (uint64_t floor = (UINT64_MAX - max) % n; (uint64_t)m < floor;) m = (u128)vc_np_pcg64_next64(g) * n;
    return (uint64_t)(m >> 64);
}

/* numpy's random_interval: a value in [0, max] by masked rejection (32-bit words up to 2^32 - 1) */
static uint64_t interval(vc_np_pcg64 *g, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, v;
    for (int s = 1; s < 64; s <<= 1) mask |= mask >> s;
    if (max <= 0xffffffffu)
        while ((v = vc_np_pcg64_next32(g) & mask) > max) {}
    else
        while ((v = vc_np_pcg64_next64(g) & mask) > max) {}
    return v;
}

void vc_np_permutation(vc_np_pcg64 *g, size_t n, int64_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)i;
    for (size_t i = n; i-- > 1;) { /* (Generator.shuffle) */
        size_t j = (size_t)interval(g, i);
        int64_t t = out[j];
        out[j] = out[i], out[i] = t;
    }
}

/* positions n-1 down to first each swapped with a draw in [0, i] */
static void shuffle_tail(vc_np_pcg64 *g, int64_t *d, size_t n, size_t first) {
    for (size_t i = n; i-- > first;) {
        size_t j = (size_t)vc_np_pcg64_bounded(g, i);
        int64_t t = d[j];
        d[j] = d[i], d[i] = t;
    }
}

vc_status vc_np_choice(vc_np_pcg64 *g, size_t pop, size_t k, int64_t *out) {
    if (k > pop) return vc_fail(VC_ERR_ARG, "choice: %zu of %zu without replacement", k, pop);
    if (pop > 10000 && k > pop / 50) {
        int64_t *all = vc_malloc(sizeof *all * pop);
        if (!all) return VC_ERR_NOMEM;
        for (size_t i = 0; i < pop; i++) all[i] = (int64_t)i;
        shuffle_tail(g, all, pop, pop - k > 1 ? pop - k : 1);
        memcpy(out, all + (pop - k), sizeof *out * k);
        free(all);
        return VC_OK;
    }
    uint64_t mask = (uint64_t)(1.2 * (double)k), *set;
    for (int s = 1; s < 64; s <<= 1) mask |= mask >> s; /* the least 2^m - 1 at or above 1.2 k */
    if (!(set = vc_malloc(sizeof *set * (size_t)(mask + 1)))) return VC_ERR_NOMEM;
    memset(set, 0xff, sizeof *set * (size_t)(mask + 1));
    for (size_t j = pop - k; j < pop; j++) { /* Floyd: a draw in [0, j], or j itself where it was drawn before */
        uint64_t v = vc_np_pcg64_bounded(g, j), loc = v & mask;
        while (set[loc] != UINT64_MAX && set[loc] != v) loc = (loc + 1) & mask;
        if (set[loc] == v) {
            v = j;
            for (loc = j & mask; set[loc] != UINT64_MAX;) loc = (loc + 1) & mask;
        }
        set[loc] = v;
        out[j - (pop - k)] = (int64_t)v;
    }
    free(set);
    shuffle_tail(g, out, k, 1);
    return VC_OK;
}
