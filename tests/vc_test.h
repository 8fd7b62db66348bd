/* Tiny assertion header for verlc's C tests. Each test program exits non-zero on any failure and
 * ends with the plain line "N passed, N failed". */
#ifndef VC_TEST_H
#define VC_TEST_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int vc_t_pass, vc_t_fail;

#define CHECK(cond) do { if (cond) vc_t_pass++; else { vc_t_fail++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { if (cond) vc_t_pass++; else { vc_t_fail++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
    if (fabs(_a - _b) <= (tol) && !isnan(_a) && !isnan(_b)) vc_t_pass++; else { vc_t_fail++; \
    fprintf(stderr, "%s:%d: |%s - %s| = |%.9g - %.9g| > %g\n", __FILE__, __LINE__, #a, #b, _a, _b, \
            (double)(tol)); } } while (0)
#define CHECK_OK(expr) do { vc_status _s = (expr); if (_s == VC_OK) vc_t_pass++; else { vc_t_fail++; \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, vc_last_error()); } } while (0)

/* Path of the shared reference folder: $VERLC_SHARED or ../shared. */
static inline const char *vc_test_shared(void) {
    const char *s = getenv("VERLC_SHARED");
    return s && *s ? s : "../shared";
}

/* Folders of fixture models: the shared ones, then verlc's own (tests/fixtures/models, made by
 * tools/fixtures/make_fixture.py for architectures the shared set lacks; tests run from the source root). */
static inline const char *vc_test_model_root(int i, char *buf, size_t cap) {
    if (i == 0) snprintf(buf, cap, "%s/fixtures/models", vc_test_shared());
    else if (i == 1) snprintf(buf, cap, "tests/fixtures/models");
    else return NULL;
    return buf;
}

/* Records a failure (instead of crashing later) when the shared reference folder is absent. */
static inline int vc_test_have_shared(void) {
    char p[1024];
    snprintf(p, sizeof p, "%s/fixtures", vc_test_shared());
    FILE *f = fopen(p, "r");
    if (f) fclose(f);
    else {
        vc_t_fail++;
        fprintf(stderr, "shared reference folder %s is missing (set VERLC_SHARED)\n", p);
    }
    return f != NULL;
}

/* a test's own random stream: xorshift64 over *state, floats in [-1, 1) */
static inline float vc_test_frand(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (float)((*state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static inline int vc_test_done(void) {
    printf("%d passed, %d failed\n", vc_t_pass, vc_t_fail);
    return vc_t_fail ? 1 : 0;
}
/* LIGHT: 1 in sanitizer builds, whose runs are several times slower (tests run a lighter set there) */
#if defined(__SANITIZE_ADDRESS__)
#define LIGHT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LIGHT 1
#endif
#endif
#ifndef LIGHT
#define LIGHT 0
#endif
#endif
