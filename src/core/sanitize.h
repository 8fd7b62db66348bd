/* Kernels whose inner loops the sanitizer build compiles without AddressSanitizer's and UBSan's checks (per-element
 * checks on every vector load made them most of the sanitizer tests' time; VC_NO_ASAN on those functions) check
 * their operands' whole extents once per call instead: vc_asan_check_read / vc_asan_check_write report an access
 * to any poisoned byte of [p, p + n) as AddressSanitizer reports a bad load or store, and abort. Outside
 * AddressSanitizer builds they compile to nothing. */
#ifndef VERLC_SANITIZE_H
#define VERLC_SANITIZE_H
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define VC_ASAN 1
static inline void vc_asan_check(const void *p, size_t n, int is_write) {
    if (!p || !n) return;
    void *bad = __asan_region_is_poisoned((void *)p, n);
    if (bad)
        __asan_report_error(__builtin_return_address(0), __builtin_frame_address(0), __builtin_frame_address(0), bad,
                            is_write, 1);
}
#else
#define VC_ASAN 0
static inline void vc_asan_check(const void *p, size_t n, int is_write) {
    (void)p;
    (void)n;
    (void)is_write;
}
#endif

/* on a kernel's inner functions: no per-access checks (their callers check the extents), no UBSan checks */
#define VC_NO_ASAN __attribute__((no_sanitize_address, no_sanitize_undefined))

/* a row-major matrix view of rows x cols floats with row stride ld: its extent in bytes */
static inline size_t vc_matrix_bytes(long long rows, long long cols, long long ld) {
    return rows > 0 && cols > 0 ? (size_t)((rows - 1) * ld + cols) * sizeof(float) : 0;
}
static inline void vc_asan_check_read(const void *p, size_t n) { vc_asan_check(p, n, 0); }
static inline void vc_asan_check_write(void *p, size_t n) { vc_asan_check(p, n, 1); }
#endif
