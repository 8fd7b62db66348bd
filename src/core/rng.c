/* Philox4x32-10 counter-based generator and helpers (see include/verlc/rng.h). */
#include "verlc/rng.h"
#include <math.h>

/* Multipliers and Weyl key increments from the Random123 paper. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void philox_round(uint32_t c[4], const uint32_t k[2]) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

void vc_philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
    uint32_t c[4] = { (uint32_t)counter_lo, (uint32_t)(counter_lo >> 32), (uint32_t)counter_hi,
                      (uint32_t)(counter_hi >> 32) };
    uint32_t k[2] = { (uint32_t)key, (uint32_t)(key >> 32) };
    for (int r = 0; r < 10; r++) {
        if (r) {
            k[0] += PHILOX_W0;
            k[1] += PHILOX_W1;
        }
        philox_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

void vc_rng_block(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint32_t out[4]) {
    uint64_t key = seed;
    uint64_t high = (b >> 32) | ((c >> 32) << 32);
    if (high) key ^= high * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    vc_philox(key, a, (b << 32) | (c & 0xffffffffull), out);
}

uint32_t vc_rng_u32(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    uint32_t o[4];
    vc_rng_block(seed, a, b, c, o);
    return o[0];
}

uint64_t vc_rng_u64(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    uint32_t o[4];
    vc_rng_block(seed, a, b, c, o);
    return (uint64_t)o[0] | ((uint64_t)o[1] << 32);
}

float vc_rng_uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    return (float)(vc_rng_u32(seed, a, b, c) >> 8) * (1.0f / 16777216.0f);
}

float vc_rng_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    uint32_t o[4];
    vc_rng_block(seed, a, b, c, o);
    double u1 = ((double)(o[0] >> 8) + 1.0) * (1.0 / 16777216.0); /* (0, 1]: log is finite */
    double u2 = (double)(o[1] >> 8) * (1.0 / 16777216.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t vc_rng_below(uint64_t bound, uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    unsigned __int128 m = (unsigned __int128)vc_rng_u64(seed, a, b, c) * bound;
    return (uint64_t)(m >> 64);
}

void vc_shuffle_u32(uint32_t *idx, size_t n, uint64_t seed, uint64_t epoch) {
    /* Stream "sequence" 0x5348 ('SH') keeps shuffles apart from other users of (seed, epoch). */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)vc_rng_below(i, seed, epoch, 0x5348, i - 1);
        uint32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
