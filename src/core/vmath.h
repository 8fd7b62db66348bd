/* Elementwise math for kernels, written with GCC's vector extensions (8 floats; the compiler maps them onto
 * AVX/AVX-512 or pairs of SSE registers, whatever -march allows): GCC 12 does not vectorise the scalar forms
 * of these loops (the exp's bit casts and the max/sum reductions), and they were most of the CPU LM head's
 * time. exp uses a fixed polynomial (Cephes-style range reduction, about 1 ulp); every element, the tail of
 * an array and a lone scalar included, goes through the same 8-lane code, so results are identical on every
 * thread and every run, for code built with the same flags (whether the polynomial's multiply-adds are fused follows
 * -march: the sanitizer build compiles the files that compare bits with one another alike); exp(-inf) = 0,
 * exp(x > 88.38) = inf. */
#ifndef VC_VMATH_H
#define VC_VMATH_H
#include <stdint.h>
#include <string.h>

typedef float vc_f8 __attribute__((vector_size(32)));
typedef int32_t vc_i8 __attribute__((vector_size(32)));
typedef float vc_f4 __attribute__((vector_size(16)));
typedef double vc_d4 __attribute__((vector_size(32)));

static inline vc_f8 vc_f8_load(const float *p) {
    vc_f8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vc_f8_store(float *p, vc_f8 v) { memcpy(p, &v, sizeof v); }

/* the first n (< 8) floats of p, zeros after them */
static inline vc_f8 vc_f8_load_part(const float *p, int64_t n) {
    vc_f8 v = { 0 };
    memcpy(&v, p, (size_t)n * sizeof(float));
    return v;
}

static inline vc_f8 vc_f8_splat(float x) { return (vc_f8){ x, x, x, x, x, x, x, x }; }

/* m ? a : b lane by lane (m: all ones or all zeros per lane, as vector comparisons give) */
static inline vc_f8 vc_f8_select(vc_i8 m, vc_f8 a, vc_f8 b) {
    return (vc_f8)((m & (vc_i8)a) | (~m & (vc_i8)b));
}

static inline vc_f8 vc_exp8(vc_f8 x) {
    const float hi = 88.3762626647949f, lo = -87.3365447505531f;
    vc_i8 over = x > hi;
    vc_f8 xc = vc_f8_select(over, vc_f8_splat(hi), x);
    vc_i8 under = xc < lo; /* -inf included; NaN stays NaN */
    xc = vc_f8_select(under, vc_f8_splat(lo), xc);
    vc_f8 fx = xc * 1.44269504088896341f + 0.5f;
    vc_f8 n = __builtin_convertvector(__builtin_convertvector(fx, vc_i8), vc_f8); /* |fx| < 2^8: floor is */
    n -= vc_f8_select(n > fx, vc_f8_splat(1.0f), vc_f8_splat(0.0f));              /* truncation, less 1 below */
    vc_f8 r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    vc_f8 y = r * 1.9875691500E-4f + 1.3981999507E-3f;
    y = y * r + 8.3334519073E-3f;
    y = y * r + 4.1665795894E-2f;
    y = y * r + 1.6666665459E-1f;
    y = y * r + 5.0000001201E-1f;
    y = y * r * r + r + 1.0f;
    vc_i8 e = (__builtin_convertvector(n, vc_i8) + 127) << 23;
    y = vc_f8_select(over, vc_f8_splat(__builtin_inff()), y * (vc_f8)e);
    return vc_f8_select(under, vc_f8_splat(0.0f), y);
}

static inline float vc_expf(float x) {
    return vc_exp8(vc_f8_splat(x))[0];
}

/* dst[i] = exp(src[i] - shift); dst may be src */
static inline void vc_exp_shift(float *dst, const float *src, int64_t n, float shift) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) vc_f8_store(dst + i, vc_exp8(vc_f8_load(src + i) - shift));
    if (i < n) {
        vc_f8 r = vc_exp8(vc_f8_load_part(src + i, n - i) - shift);
        memcpy(dst + i, &r, (size_t)(n - i) * sizeof(float));
    }
}

/* the largest of v[0..n), -inf for n = 0 (NaNs are passed over, as by a "v[i] > m" scan) */
static inline float vc_max_f32(const float *v, int64_t n) {
    vc_f8 m = vc_f8_splat(-__builtin_inff());
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vc_f8 x = vc_f8_load(v + i);
        m = vc_f8_select(x > m, x, m);
    }
    float r = -__builtin_inff();
    for (int l = 0; l < 8; l++) r = m[l] > r ? m[l] : r;
    for (; i < n; i++) r = v[i] > r ? v[i] : r;
    return r;
}

/* log sum_i exp(z[i]) in double precision (host rows of logits: a log-softmax's normaliser) */
static inline double vc_logsumexp_row(const float *z, int64_t n) {
    double m = -__builtin_inf(), s = 0;
    for (int64_t i = 0; i < n; i++) m = z[i] > m ? z[i] : m;
    for (int64_t i = 0; i < n; i++) s += __builtin_exp((double)z[i] - m);
    return m + __builtin_log(s);
}

/* the k largest of v[0..n) into idx[0..k) in descending order (ties: the lower index first), as torch.topk;
 * a sorted insertion list (k is small against n); k <= n */
static inline void vc_topk_row(const float *v, int64_t n, int k, int32_t *idx) {
    int m = 0; /* idx[0..m): the best so far */
    for (int64_t j = 0; j < n; j++) {
        if (m == k && !(v[j] > v[idx[m - 1]])) continue;
        int at = m < k ? m++ : k - 1;
        while (at > 0 && v[j] > v[idx[at - 1]]) {
            idx[at] = idx[at - 1];
            at--;
        }
        idx[at] = (int32_t)j;
    }
}

/* two halves of 8 floats widened to doubles */
static inline void vc_f8_widen(const float *p, vc_d4 *lo, vc_d4 *hi) {
    vc_f4 a, b;
    memcpy(&a, p, sizeof a);
    memcpy(&b, p + 4, sizeof b);
    *lo = __builtin_convertvector(a, vc_d4);
    *hi = __builtin_convertvector(b, vc_d4);
}

/* fixed-order sum in double: eight lane accumulators, a fixed pairing of them, then the tail */
static inline double vc_sum_f64(const float *v, int64_t n) {
    vc_d4 a = { 0 }, b = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vc_d4 x0, x1;
        vc_f8_widen(v + i, &x0, &x1);
        a += x0;
        b += x1;
    }
    a += b;
    double s = (a[0] + a[1]) + (a[2] + a[3]);
    for (; i < n; i++) s += v[i];
    return s;
}

/* Softmax statistics of a row in one pass, without scratch memory: with d = z - shift and e = exp(d) as
 * vc_exp_shift gives them, *s = sum e, *a = sum e d and (q not NULL) *q = sum e^2, each in double and in
 * vc_sum_f64's order, so the bits are those of vc_exp_shift followed by vc_sum_f64 / vc_dot_f64. */
static inline void vc_softmax_stats(const float *z, int64_t n, float shift, double *s, double *a, double *q) {
    vc_d4 s0 = { 0 }, s1 = { 0 }, a0 = { 0 }, a1 = { 0 }, q0 = { 0 }, q1 = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vc_f8 d = vc_f8_load(z + i) - shift, e = vc_exp8(d);
        vc_d4 e0, e1, d0, d1;
        vc_f8_widen((const float *)&e, &e0, &e1);
        vc_f8_widen((const float *)&d, &d0, &d1);
        s0 += e0;
        s1 += e1;
        a0 += e0 * d0;
        a1 += e1 * d1;
        q0 += e0 * e0;
        q1 += e1 * e1;
    }
    s0 += s1;
    a0 += a1;
    q0 += q1;
    double S = (s0[0] + s0[1]) + (s0[2] + s0[3]), A = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    double Q = (q0[0] + q0[1]) + (q0[2] + q0[3]);
    if (i < n) {
        vc_f8 d = vc_f8_load_part(z + i, n - i) - shift, e = vc_exp8(d);
        for (int l = 0; l < n - i; l++) {
            S += e[l];
            A += (double)e[l] * d[l];
            Q += (double)e[l] * e[l];
        }
    }
    *s = S;
    *a = A;
    if (q) *q = Q;
}

/* fixed-order dot product in double, in the same order as vc_sum_f64 */
static inline double vc_dot_f64(const float *x, const float *y, int64_t n) {
    vc_d4 a = { 0 }, b = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vc_d4 x0, x1, y0, y1;
        vc_f8_widen(x + i, &x0, &x1);
        vc_f8_widen(y + i, &y0, &y1);
        a += x0 * y0;
        b += x1 * y1;
    }
    a += b;
    double s = (a[0] + a[1]) + (a[2] + a[3]);
    for (; i < n; i++) s += (double)x[i] * y[i];
    return s;
}

/* a . b in a fixed order whatever the caller (eight lane sums, a fixed pairing of them, then the tail): the same
 * bits for a row on its own and in a batch */
static inline float vc_dot_fixed(const float *a, const float *b, int n) {
    vc_f8 acc = vc_f8_splat(0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) acc += vc_f8_load(a + i) * vc_f8_load(b + i);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[i] += a x[i] (y and x do not overlap) */
static inline void vc_axpy(float *y, float a, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) vc_f8_store(y + i, vc_f8_load(y + i) + a * vc_f8_load(x + i));
    for (; i < n; i++) y[i] += a * x[i];
}

#endif
