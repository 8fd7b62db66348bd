/* Test helper: re-launch the running test program under mpirun (Open MPI, as root, shared-memory
 * transport only) with a time limit, for tests that run their own ranks. */
#ifndef VC_MPI_LAUNCH_H
#define VC_MPI_LAUNCH_H
#include "verlc/core.h"
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline int vc_test_on_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, path, prog);
        if (access(buf, X_OK) == 0) return 1;
        path = end ? end + 1 : NULL;
    }
    return 0;
}

/* Runs `mpirun -np np <this program>` with mode_var=mode and the listed environment variables
 * (NULL-terminated) exported to the ranks; output to `log`; the process group is killed after `limit`
 * seconds. Returns the exit status (-1: killed or not started); *secs gets the wall time. */
static inline int vc_test_run_mpi(const char *mpirun, int np, const char *mode_var, const char *mode,
                                  const char *const *env, const char *log, double limit, double *secs) {
    char exe[PATH_MAX], nps[16];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = 0;
    snprintf(nps, sizeof nps, "%d", np);
    setenv(mode_var, mode, 1);
    const char *argv[64];
    int k = 0;
    const char *fixed[] = { mpirun, "--allow-run-as-root", "--oversubscribe", "-np", nps, "--bind-to", "none", "--mca",
                            "btl", "self,vader", "--mca", "pml", "ob1", "--mca", "btl_vader_single_copy_mechanism",
                            "none", "--mca", "plm_rsh_agent", "false", "-x", mode_var, "-x", "LSAN_OPTIONS" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[k++] = fixed[i];
    for (int i = 0; env && env[i] && k < 60; i++) {
        argv[k++] = "-x";
        argv[k++] = env[i];
    }
    argv[k++] = exe;
    argv[k] = NULL;
    double t0 = vc_now();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(126);
        execvp(mpirun, (char *const *)argv);
        _exit(127);
    }
    unsetenv(mode_var);
    if (pid < 0) return -1;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return -1;
        if (vc_now() - t0 > limit) {
            kill(-pid, SIGTERM);
            struct timespec ts = { 0, 300000000 };
            nanosleep(&ts, NULL);
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            *secs = vc_now() - t0;
            return -1;
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    *secs = vc_now() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 1 when the file log holds needle at least `times` times */
static inline int vc_test_log_has(const char *log, const char *needle, int times) {
    char *text = NULL;
    size_t len = 0;
    int n = 0;
    if (vc_read_file(log, &text, &len)) return 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) n++;
    free(text);
    return n >= times;
}
#endif
