/* OpenBLAS's settings: its thread count, and its kernels for this CPU. Debian 12's OpenBLAS (0.3.21) does not recognise some newer x86-64 CPUs
 * (Sapphire Rapids among them) and falls back to its Prescott (SSE3) kernels: sgemm runs about 6x slower than
 * with the AVX-512 ones the CPU has (13.7 vs 83.6 GFLOP/s on one core of such a machine). OpenBLAS reads
 * OPENBLAS_CORETYPE once, as it is loaded, before any code of ours runs; so when it chose a generic core on a
 * CPU with AVX2 or AVX-512 and the variable is unset, this constructor starts the program again (the same pid,
 * arguments and environment) with OPENBLAS_CORETYPE naming the CPU's class. A set OPENBLAS_CORETYPE is always
 * left as it is (which also ends the restart; set it to keep OpenBLAS's own choice). Any program linking libverlc
 * gets this, the tests included. */
#define _GNU_SOURCE
#include "verlc/pool.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

extern char *openblas_get_corename(void);
extern void openblas_set_num_threads(int);

void vc_blas_threads(int n) { openblas_set_num_threads(n); }

const char *vc_blas_core(void) {
    const char *n = openblas_get_corename();
    return n ? n : "unknown";
}

#if defined(__x86_64__) && defined(__GNUC__)
/* the OpenBLAS core for this CPU's vector units, or NULL when OpenBLAS's own choice stands */
static const char *core_for_cpu(void) {
    __builtin_cpu_init(); /* (libgcc checks that the OS saves the AVX and AVX-512 registers) */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

__attribute__((constructor)) static void blas_core(int argc, char **argv, char **envp) {
    (void)argc;
    (void)envp;
    const char *pre = getenv("LD_PRELOAD");
    if (getenv("OPENBLAS_CORETYPE") || !argv || !argv[0] || (pre && strstr(pre, "vgpreload"))) return; /* (valgrind:
                                                                   * /proc/self/exe would be its tool) */
    static const char *const generic[] = { "prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "unknown" };
    const char *now = vc_blas_core();
    int fallback = 0;
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) fallback |= !strcasecmp(now, generic[i]);
    const char *want = fallback ? core_for_cpu() : NULL;
    if (!want || setenv("OPENBLAS_CORETYPE", want, 1)) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* no restart: the generic kernels, as before */
}
#endif
