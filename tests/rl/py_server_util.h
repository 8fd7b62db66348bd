/* The stand-in HTTP services of the RL tests (tests/rl/sandbox_server.py, retrieval_server.py): started with
 * python3 from the repository root, their port read from their first line. */
#ifndef VC_PY_SERVER_UTIL_H
#define VC_PY_SERVER_UTIL_H
#include "verlc/reward.h"
#include "vc_test.h"
#include <stdio.h>
#include <stdlib.h>

/* the service of script, reached at url ("http://127.0.0.1:PORT" + path); close it with vc_reward_proc_close */
static inline vc_reward_proc *test_py_server(const char *script, const char *path, char *url, size_t cap) {
    char *argv[] = { "python3", (char *)script, NULL }, *line = NULL;
    vc_reward_proc *srv = NULL;
    CHECK_OK(vc_reward_proc_start(argv, 60000, &srv));
    if (srv) CHECK_OK(vc_reward_proc_read_line(srv, vc_now() + 20, &line));
    snprintf(url, cap, "http://127.0.0.1:%d%s", line ? atoi(line) : 0, path);
    free(line);
    return srv;
}
#endif
