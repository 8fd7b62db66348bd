/* CPU backend memory: backend memory is host memory. */
#include "cpu.h"
#include <stdint.h>
#include <string.h>

void *vc_cpu_alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63 ? (bytes + 63) & ~(size_t)63 : 64);
    if (!p) vc_fail(VC_ERR_NOMEM, "cpu: cannot allocate %zu bytes", bytes);
    return p;
}
void vc_cpu_free(void *p) { free(p); }
void vc_cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memmove(dst, src, bytes);
}
void vc_cpu_zero(void *dst, size_t bytes) {
    if (bytes) memset(dst, 0, bytes);
}
static size_t g_fault_bytes; /* the failed scratch allocation (0: none) */
static int g_fail_next;

void *vc_cpu_scratch(size_t count, size_t size, int zero) {
    size_t n = size && count > SIZE_MAX / size ? SIZE_MAX : count * size;
    void *p = NULL;
    if (__atomic_load_n(&g_fail_next, __ATOMIC_RELAXED) > 0 && __atomic_sub_fetch(&g_fail_next, 1, __ATOMIC_RELAXED) >= 0)
        p = NULL;
    else if (n != SIZE_MAX)
        p = zero ? calloc(n ? n : 1, 1) : malloc(n ? n : 1);
    if (!p) {
        size_t none = 0; /* the first fault is kept (ops may run on pool threads: the message is made at sync) */
        __atomic_compare_exchange_n(&g_fault_bytes, &none, n ? n : 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    return p;
}

void vc_cpu_scratch_test(int n) {
    __atomic_store_n(&g_fail_next, n, __ATOMIC_RELAXED);
    __atomic_store_n(&g_fault_bytes, 0, __ATOMIC_RELEASE);
}

static const char *g_fault_what; /* an op's refused arguments (a static message; NULL: none) */

void vc_cpu_fault(const char *what) {
    const char *none = NULL;
    __atomic_compare_exchange_n(&g_fault_what, &none, what, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

vc_status vc_cpu_sync(void) {
    const char *w = __atomic_load_n(&g_fault_what, __ATOMIC_ACQUIRE);
    if (w) return vc_fail(VC_ERR_ARG, "cpu: %s", w);
    size_t b = __atomic_load_n(&g_fault_bytes, __ATOMIC_ACQUIRE);
    if (b) return vc_fail(VC_ERR_NOMEM, "cpu: an op could not allocate its %zu bytes of scratch memory", b);
    return VC_OK;
}
