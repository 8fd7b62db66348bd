/* Host reduction kernels of the communicators: fixed left-to-right order, so that the bits of a
 * result depend only on the inputs and their order. */
#include "dist_internal.h"
#include <string.h>

/* max/min that propagate NaN from either side: x wins when it is larger (smaller) or NaN */
#define VC_RED_LOOP(T)                                                                        \
    do {                                                                                     \
        T *a = (T *)acc;                                                                     \
        const T *b = (const T *)x;                                                           \
        if (op == VC_SUM)                                                                    \
            for (size_t i = 0; i < n; i++) a[i] += b[i];                                     \
        else if (op == VC_MAX)                                                               \
            for (size_t i = 0; i < n; i++) a[i] = (b[i] > a[i] || b[i] != b[i]) ? b[i] : a[i]; \
        else                                                                                 \
            for (size_t i = 0; i < n; i++) a[i] = (b[i] < a[i] || b[i] != b[i]) ? b[i] : a[i]; \
    } while (0)

void vc_dist_reduce_into(void *acc, const void *x, size_t n, int dtype, int op) {
    if (dtype == VC_DIST_F64) VC_RED_LOOP(double);
    else VC_RED_LOOP(float);
}

void vc_dist_reduce_ordered(void *dst, const void *base, size_t stride, int k, size_t n, int dtype, int op) {
    size_t es = vc_dist_dtype_size(dtype);
    if (k <= 0 || n == 0) return;
    if (dst != base) memmove(dst, base, n * es);
    for (int r = 1; r < k; r++)
        vc_dist_reduce_into(dst, (const char *)base + (size_t)r * stride * es, n, dtype, op);
}

void vc_dist_split(size_t n, int p, int r, size_t *first, size_t *count) {
    size_t q = n / (size_t)p, rem = n % (size_t)p, ur = (size_t)r;
    *count = q + (ur < rem);
    *first = ur * q + (ur < rem ? ur : rem);
}
