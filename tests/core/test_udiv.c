/* vc_udiv (src/core/udiv.h): the multiply-and-shift quotient equals n / d for every divisor up to 2^17, then
 * divisors spread up to 2^31 - 1, at n = 0, around each of many multiples of d, random n, and 2^31 - 1, 2^32 - 1 */
#include "core/udiv.h"
#include "vc_test.h"
#include <stdio.h>

static uint64_t g_state = 0x9e3779b97f4a7c15ull;
static uint32_t next(void) { /* splitmix64 */
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

static long g_bad;
static void one(vc_udiv u, uint32_t d, uint32_t n) {
    if (vc_udiv_do(u, n) != n / d && g_bad++ < 5)
        fprintf(stderr, "udiv: %u / %u gave %u, not %u\n", n, d, vc_udiv_do(u, n), n / d);
}

static void divisor(uint32_t d) {
    const vc_udiv u = vc_udiv_make(d);
    one(u, d, 0);
    one(u, d, 0x7fffffffu);
    one(u, d, 0xffffffffu);
    for (int i = 0; i < 24; i++) {
        const uint32_t q = next() % (0xffffffffu / d), n = q * d; /* a multiple, and its neighbours */
        one(u, d, n);
        if (n) one(u, d, n - 1);
        one(u, d, n + 1);
        one(u, d, next());
    }
}

int main(void) {
    for (uint32_t d = 1; d <= (1u << 17); d++) divisor(d);
    for (int i = 0; i < 200000; i++) divisor(1 + next() % 0x7ffffffeu);
    for (uint32_t s = 1; s < 31; s++) { /* powers of two and their neighbours */
        divisor(1u << s);
        divisor((1u << s) - 1);
        divisor((1u << s) + 1);
    }
    divisor(0x7fffffffu);
    const vc_udiv u7 = vc_udiv_make(7);
    for (uint32_t n = 0; n < (1u << 22); n++) one(u7, 7, n); /* every n over a range */
    printf("udiv: %ld wrong quotients\n", g_bad);
    CHECK(g_bad == 0);
    return vc_test_done();
}
