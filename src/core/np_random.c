/* numpy's legacy random stream (np.random.seed / RandomState(seed) with an integer seed): MT19937 seeded by
 * init_genrand, and the bounded integers of its legacy randint / shuffle (masked rejection). verl draws with it
 * where its results depend on the draw (validation bootstrap, the logged validation samples). */
#include "verlc/rng.h"

void vc_np_seed(vc_np_mt19937 *m, uint32_t s) {
    m->mt[0] = s;
    for (int i = 1; i < 624; i++) m->mt[i] = 1812433253u * (m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}

uint32_t vc_np_next32(vc_np_mt19937 *m) {
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->mt[k] & 0x80000000u) | (m->mt[(k + 1) % 624] & 0x7fffffffu);
            m->mt[k] = m->mt[(k + 397) % 624] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
        }
        m->i = 0;
    }
    uint32_t y = m->mt[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

uint64_t vc_np_interval(vc_np_mt19937 *m, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, v;
    for (int s = 1; s < 64; s <<= 1) mask |= mask >> s;
    if (max <= 0xffffffffu)
        while ((v = vc_np_next32(m) & mask) > max) {
        }
    else
        while ((v = (((uint64_t)vc_np_next32(m) << 32) | vc_np_next32(m)) & mask) > max) {
        }
    return v;
}

void vc_np_shuffle(vc_np_mt19937 *m, size_t *idx, size_t n) {
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)vc_np_interval(m, i), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

/* torch.randperm(n, generator=g) on the CPU: below 2^32 / 20 rows a Fisher-Yates from the front with each 32-bit word
 * modulo the rows left; above, the inside-out form with 64-bit words (the first word high) modulo i + 1 */
void vc_torch_randperm(vc_np_mt19937 *m, uint32_t *out, size_t n) {
    if ((uint64_t)n < 0xffffffffu / 20) {
        for (size_t i = 0; i < n; i++) out[i] = (uint32_t)i;
        for (size_t i = 0; i + 1 < n; i++) {
            size_t z = i + (size_t)(vc_np_next32(m) % (uint64_t)(n - i));
            uint32_t t = out[i];
            out[i] = out[z], out[z] = t;
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t hi = vc_np_next32(m), r = (hi << 32) | vc_np_next32(m);
        size_t z = (size_t)(r % (uint64_t)(i + 1));
        out[i] = (uint32_t)i;
        out[i] = out[z], out[z] = (uint32_t)i;
    }
}
