/* Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as
 * 1, 2, 3", SC'11), the generator behind cuRAND's and JAX's counter-based streams.
 * A value is a pure function of (seed, a, b, c), typically (seed, step, sequence, position), so a sample
 * does not depend on batch composition, thread count or call order. */
#ifndef VERLC_RNG_H
#define VERLC_RNG_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

/* One Philox4x32-10 block. Key words: k0 = low 32 bits of key, k1 = high 32 bits. Counter words:
 * c0 = low(counter_lo), c1 = high(counter_lo), c2 = low(counter_hi), c3 = high(counter_hi).
 * With that mapping the Random123 known-answer vectors apply directly. */
void vc_philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);

/* Four raw 32-bit words for (seed, a, b, c). Mapping: key = seed, counter_hi = a,
 * counter_lo = (b << 32) | (c & 0xffffffff); the high 32 bits of b and c are folded into the key,
 * so inputs that differ anywhere give different streams (b and c below 2^32 never collide). */
void vc_rng_block(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint32_t out[4]);
uint32_t vc_rng_u32(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
uint64_t vc_rng_u64(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* Uniform float in [0, 1) with 24-bit resolution: (word0 >> 8) * 2^-24. */
float vc_rng_uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
/* Standard normal by Box-Muller on words 0 and 1 (u1 in (0,1], u2 in [0,1)), computed in double. */
float vc_rng_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
/* Uniform integer in [0, bound) (bound > 0) by 64-bit multiply-shift; bias below 2^-32 for bound < 2^32. */
uint64_t vc_rng_below(uint64_t bound, uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* In-place Fisher-Yates shuffle of idx[0..n), a pure function of (contents, seed, epoch). */
void vc_shuffle_u32(uint32_t *idx, size_t n, uint64_t seed, uint64_t epoch);

/* numpy's legacy generator (np.random.seed(s) / RandomState(s)): MT19937 with init_genrand seeding, its
 * raw 32-bit words, legacy randint's bounded draw in [0, max] (masked rejection; 64-bit words above
 * 2^32 - 1) and RandomState.shuffle of a list (Fisher-Yates from the end with those draws). */
typedef struct vc_np_mt19937_s {
    uint32_t mt[624];
    int i;
} vc_np_mt19937;
void vc_np_seed(vc_np_mt19937 *m, uint32_t seed);
uint32_t vc_np_next32(vc_np_mt19937 *m);
uint64_t vc_np_interval(vc_np_mt19937 *m, uint64_t max);
void vc_np_shuffle(vc_np_mt19937 *m, size_t *idx, size_t n);
/* torch's CPU generator is the same MT19937 (torch.Generator().manual_seed(s): vc_np_seed with the seed's low 32 bits;
 * unseeded: VC_TORCH_DEFAULT_SEED); torch.randperm(n, generator=g) from it into out[0..n) */
#define VC_TORCH_DEFAULT_SEED 67280421310721ull

/* numpy's Generator (np.random.default_rng(seed) for an integer seed below 2^64: SeedSequence into PCG64),
 * src/core/np_generator.c: its raw words, its bounded integers in [0, max] (Lemire's method) and
 * Generator.choice(pop, k, replace=False) (shuffled) into out[0..k) */
typedef struct {
    uint64_t state[2], inc[2]; /* 128-bit, in the machine's order */
    int has32;
    uint32_t buf32;
} vc_np_pcg64;
void vc_np_pcg64_seed(vc_np_pcg64 *g, uint64_t seed);
uint64_t vc_np_pcg64_next64(vc_np_pcg64 *g);
uint32_t vc_np_pcg64_next32(vc_np_pcg64 *g);
uint64_t vc_np_pcg64_bounded(vc_np_pcg64 *g, uint64_t max);
vc_status vc_np_choice(vc_np_pcg64 *g, size_t pop, size_t k, int64_t *out);
/* Generator.permutation(n) into out[0..n) (Generator.shuffle of arange(n): draws by masked rejection) */
void vc_np_permutation(vc_np_pcg64 *g, size_t n, int64_t *out);
void vc_torch_randperm(vc_np_mt19937 *m, uint32_t *out, size_t n);

#endif
