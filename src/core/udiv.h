/* Division by a divisor fixed for a kernel launch as a multiply, an add and a shift (Granlund and Montgomery,
 * "Division by invariant integers using multiplication", PLDI 1994, the round-up method): q = n / d for every 32-bit
 * n and 1 <= d < 2^31. GPU element loops take it where a 64-bit division an element would cost them more than their
 * memory traffic. Header-only, for C and for CUDA (host and device); tests/core/test_udiv.c checks it. */
#ifndef VC_UDIV_H
#define VC_UDIV_H
#include <stdint.h>

#ifdef __CUDACC__
#define VC_UDIV_FN __host__ __device__ static inline
#else
#define VC_UDIV_FN static inline
#endif

typedef struct {
    uint32_t m, s; /* the magic multiplier, s = ceil(log2 d) */
} vc_udiv;

VC_UDIV_FN vc_udiv vc_udiv_make(uint32_t d) {
    vc_udiv u;
    uint32_t s = 0;
    while (s < 31 && ((uint32_t)1 << s) < d) s++;
    /* m = floor(2^32 (2^s - d) / d) + 1 (< 2^32: 2^s < 2d) */
    u.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
    u.s = s;
    return u;
}

VC_UDIV_FN uint32_t vc_udiv_do(vc_udiv u, uint32_t n) {
    const uint32_t t = (uint32_t)(((uint64_t)n * u.m) >> 32);
    return (uint32_t)(((uint64_t)t + n) >> u.s);
}
#endif
