/* CPU backend memory: backend memory is host memory. */
#include "cpu.h"
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
vc_status vc_cpu_sync(void) { return VC_OK; }
