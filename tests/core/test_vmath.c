/* core/vmath.h: the 8-lane exp against libm's double exp (relative error, special values), the same bits for
 * an element in a full block, in an array's tail and alone; max, sum and dot against plain loops. */
#include "core/vmath.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>

static void test_exp_accuracy(void) {
    double worst = 0;
    float at = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        double want = exp((double)x), got = vc_expf(x), rel = fabs(got - want) / want;
        if (rel > worst) worst = rel, at = x;
    }
    printf("vc_expf over [-87, 88]: worst relative error %.3g at %g\n", worst, at);
    CHECK_MSG(worst < 3e-7, "exp relative error %.3g at %g", worst, at);
    CHECK(vc_expf(0.0f) == 1.0f);
    CHECK(vc_expf(-INFINITY) == 0.0f);
    CHECK(vc_expf(-200.0f) == 0.0f);
    CHECK(isinf(vc_expf(INFINITY)) && isinf(vc_expf(100.0f)));
    CHECK(isnan(vc_expf(NAN)));
    CHECK(fabs(vc_expf(-80.0f) / exp(-80.0) - 1) < 1e-6); /* a small normal result */
}

/* exp_shift in blocks of 8, the tail and in place: the same bits as one value at a time */
static void test_exp_shift_layout(void) {
    enum { N = 37 };
    float src[N], a[N], b[N];
    for (int i = 0; i < N; i++) src[i] = (float)(i * 0.731 - 12.5);
    src[5] = -INFINITY;
    for (int n = 0; n <= N; n++) {
        vc_exp_shift(a, src, n, 1.25f);
        for (int i = 0; i < n; i++) b[i] = src[i];
        vc_exp_shift(b, b, n, 1.25f);
        int same = 1;
        for (int i = 0; i < n; i++) same &= a[i] == vc_expf(src[i] - 1.25f) && b[i] == a[i];
        CHECK_MSG(same, "exp_shift over %d values differs from the scalar exp", n);
    }
    CHECK(a[5] == 0.0f);
}

static void test_reductions(void) {
    enum { N = 1003 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    if (!x || !y) {
        CHECK(0);
        return;
    }
    for (int i = 0; i < N; i++) {
        x[i] = (float)sin(i * 1.7) * 3.0f;
        y[i] = (float)cos(i * 0.3);
    }
    for (int n = 0; n <= N; n += n < 20 ? 1 : 97) {
        float m = -INFINITY;
        double s = 0, d = 0;
        for (int i = 0; i < n; i++) {
            m = x[i] > m ? x[i] : m;
            s += x[i];
            d += (double)x[i] * y[i];
        }
        CHECK_MSG(vc_max_f32(x, n) == m, "max over %d values", n);
        CHECK_MSG(fabs(vc_sum_f64(x, n) - s) <= 1e-12 * (1 + fabs(s)) * n, "sum over %d values", n);
        CHECK_MSG(fabs(vc_dot_f64(x, y, n) - d) <= 1e-12 * (1 + fabs(d)) * n, "dot over %d values", n);
    }
    x[300] = NAN; /* passed over, as by a "v > m" scan */
    x[700] = 9.0f;
    CHECK(vc_max_f32(x, N) == 9.0f);
    for (int i = 0; i < N; i++) x[i] = -INFINITY;
    CHECK(vc_max_f32(x, N) == -INFINITY);
    free(x);
    free(y);
}

/* one-pass softmax statistics: the bits of exp_shift then sum / dot over the shifted row */
static void test_softmax_stats(void) {
    enum { N = 1003 };
    float *z = malloc(N * sizeof *z), *d = malloc(N * sizeof *d), *e = malloc(N * sizeof *e);
    if (!z || !d || !e) {
        CHECK(0);
        goto out;
    }
    for (int i = 0; i < N; i++) z[i] = (float)sin(i * 2.3) * 12.0f;
    z[17] = -INFINITY; /* a masked logit */
    for (int n = 1; n <= N; n += n < 20 ? 1 : 89) {
        float m = vc_max_f32(z, n);
        for (int i = 0; i < n; i++) d[i] = z[i] - m;
        vc_exp_shift(e, d, n, 0.0f);
        double s, a, q, s1, a1;
        vc_softmax_stats(z, n, m, &s, &a, &q);
        vc_softmax_stats(z, n, m, &s1, &a1, NULL);
        int fin = n <= 17; /* -inf * 0 = NaN in the plain dot: compare sum e d only before the masked logit */
        CHECK_MSG(s == vc_sum_f64(e, n) && s1 == s && (a1 == a || (isnan(a) && isnan(a1))), "softmax stats sum over %d values", n);
        CHECK_MSG(!fin || a == vc_dot_f64(e, d, n), "softmax stats sum e d over %d values", n);
        CHECK_MSG(q == vc_dot_f64(e, e, n), "softmax stats sum e^2 over %d values", n);
    }
out:
    free(z);
    free(d);
    free(e);
}

int main(void) {
    test_exp_accuracy();
    test_exp_shift_layout();
    test_reductions();
    test_softmax_stats();
    return vc_test_done();
}
