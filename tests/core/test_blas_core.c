/* core/blas_core.c: on a CPU with AVX2 + FMA (or AVX-512) OpenBLAS runs its own kernels for it, never the generic
 * Prescott / Core2 ones Debian 12's OpenBLAS falls back to on CPUs it does not know (the constructor restarts the
 * process with OPENBLAS_CORETYPE); a set OPENBLAS_CORETYPE is left as it is. */
#include "verlc/pool.h"
#include "vc_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static int generic(const char *core) {
    static const char *const names[] = { "prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "unknown" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(core, names[i])) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) { /* the child: print the core it runs */
        printf("%s\n", vc_blas_core());
        return 0;
    }
    const char *core = vc_blas_core();
    printf("OpenBLAS core %s (OPENBLAS_CORETYPE=%s)\n", core, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        CHECK_MSG(!generic(core), "an AVX2 CPU runs OpenBLAS's generic %s kernels", core);
    /* a core the user names stands: the child started with Prescott keeps it */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=Prescott '%s' child", argv[0]);
    FILE *p = popen(cmd, "r");
    char line[64] = "";
    CHECK(p && fgets(line, sizeof line, p));
    if (p) pclose(p);
    CHECK_MSG(!strncasecmp(line, "prescott", 8), "OPENBLAS_CORETYPE=Prescott gave core '%s'", line);
#endif
    return vc_test_done();
}
