/* Vectorisable elementwise math for kernels: exp over arrays with a fixed polynomial (Cephes-style
 * range reduction, about 1 ulp), identical results on every thread and every run; exp(-inf) = 0. */
#ifndef VC_VMATH_H
#define VC_VMATH_H
#include <stdint.h>
#include <string.h>

static inline float vc_expf(float x) {
    const float hi = 88.3762626647949f, lo = -87.3365447505531f;
    float xc = x > hi ? hi : (x < lo ? lo : x);
    float fx = xc * 1.44269504088896341f;
    float n = __builtin_floorf(fx + 0.5f);
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float y = 1.9875691500E-4f;
    y = y * r + 1.3981999507E-3f;
    y = y * r + 8.3334519073E-3f;
    y = y * r + 4.1665795894E-2f;
    y = y * r + 1.6666665459E-1f;
    y = y * r + 5.0000001201E-1f;
    y = y * r * r + r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &e, 4);
    return x < lo ? 0.0f : y * scale;
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

/* dst[i] = exp(src[i] - shift) */
static inline void vc_exp_shift(float *dst, const float *src, int64_t n, float shift) {
    for (int64_t i = 0; i < n; i++) dst[i] = vc_expf(src[i] - shift);
}

/* fixed-order sum in double with four interleaved accumulators */
static inline double vc_sum_f64(const float *v, int64_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 += v[i];
        a1 += v[i + 1];
        a2 += v[i + 2];
        a3 += v[i + 3];
    }
    for (; i < n; i++) a0 += v[i];
    return (a0 + a1) + (a2 + a3);
}

/* fixed-order dot product in double with four interleaved accumulators */
static inline double vc_dot_f64(const float *a, const float *b, int64_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 += (double)a[i] * b[i];
        a1 += (double)a[i + 1] * b[i + 1];
        a2 += (double)a[i + 2] * b[i + 2];
        a3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) a0 += (double)a[i] * b[i];
    return (a0 + a1) + (a2 + a3);
}
/* a . b in a fixed order whatever the caller (eight partial sums, then the tail): the same bits for a row on its
 * own and in a batch */
static inline float vc_dot_fixed(const float *a, const float *b, int n) {
    float acc[8] = { 0 };
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif
