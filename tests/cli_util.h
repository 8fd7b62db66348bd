/* Helpers of the tests that drive build/verlc (VERLC_BIN) through the shell: a printf-style command
 * runner, byte comparison of two files, the binary's path and a per-process temp folder name. Static
 * functions: each test program includes this header once. */
#ifndef VC_CLI_UTIL_H
#define VC_CLI_UTIL_H
#include "verlc/core.h"
#include "verlc/dist.h"
#include "vc_test.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 1: cli_sh keeps failing commands off stderr (for tests that expect commands to fail) */
static int cli_quiet;

/* Runs a printf-formatted shell command line; returns its exit status (0: success; -1: system failed;
 * 128: killed by a signal) and, unless cli_quiet, prints a failing command on stderr; with VERLC_TEST_TIMES set,
 * prints each command's seconds on stderr (to find what makes a test slow). */
static inline int cli_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int cli_sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("VERLC_TEST_TIMES"))
        fprintf(stderr, "%.2f s: %s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), cmd);
    if (rc && !cli_quiet) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* 0 when log holds exactly one "memory: the step arena ... peaked at X MiB, planned Y MiB" line with 0 < X <= Y
 * (the trainers' report of their step arena against the memory plan) */
static inline int cli_arena_within_plan(const char *log) {
    return cli_sh("awk '/step arena.* peaked at/ { for (i = 1; i < NF; i++) if ($i == \"at\") p = $(i + 1) + 0; "
                  "else if ($i == \"planned\") q = $(i + 1) + 0; n++ } END { exit !(n == 1 && p > 0 && p <= q) }' %s",
                  log);
}

/* the planned MiB of the step arena a run's log reports ("... peaked at X MiB, planned Y MiB"); -1: none */
static inline double cli_planned_mib(const char *log) {
    FILE *f = fopen(log, "r");
    char line[1024];
    double v = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "step arena");
        if (p && (p = strstr(p, "planned "))) v = atof(p + 8);
    }
    if (f) fclose(f);
    return v;
}

/* 1 when both files read and hold the same bytes */
static inline int cli_file_eq(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int eq = !vc_read_file(a, &x, &nx) && !vc_read_file(b, &y, &ny) && nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return eq;
}

/* the verlc binary: $VERLC_BIN or build/verlc */
static inline const char *cli_bin(void) {
    const char *b = getenv("VERLC_BIN");
    return b ? b : "build/verlc";
}

/* dir = /tmp/verlc_<tag>_<pid> (not created) */
static inline void cli_tmpdir(char *dir, size_t n, const char *tag) {
    snprintf(dir, n, "/tmp/verlc_%s_%d", tag, (int)getpid());
}
/* `verlc ...` under mpirun on 2 ranks of this machine (shared memory only, killed after 300 s): a command prefix; its
 * ranks get VERLC_DIST_TIMEOUT from the caller's environment */
#define CLI_MPIRUN_2                                                                                                     \
    "timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca pml ob1 "         \
    "--mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent false -x VERLC_DIST_TIMEOUT -np 2 "

/* whether CLI_MPIRUN_2 can run here: an MPI build, mpirun on the PATH, not a sanitizer build; sets VERLC_DIST_TIMEOUT */
static inline int cli_mpirun_usable(void) {
    if (getenv("VERLC_SANITIZE") || !vc_comm_available("mpi") || cli_sh("command -v mpirun > /dev/null 2>&1")) return 0;
    setenv("VERLC_DIST_TIMEOUT", "60", 1);
    return 1;
}

#endif
