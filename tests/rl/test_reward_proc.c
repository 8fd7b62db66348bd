/* Custom reward programs: the Python wrapper, and programs that crash, hang, print garbage or
 * non-numeric scores. Timeouts are short (300 ms) to keep the test fast. */
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static char *script(const char *name, const char *body) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(body, f);
    fclose(f);
    chmod(path, 0755);
    return path;
}

static int have_python(void) { return system("python3 -c 'import json' >/dev/null 2>&1") == 0; }

/* verl's Python reward functions (reward_py.c): rows and batches, dict answers, exceptions */
static void test_python(void) {
    if (!have_python()) { printf("skipping Python function test: no python3\n"); return; }
    char *user = script("user_reward.py",
                        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                        "    print('noise on stdout is redirected')\n"
                        "    if data_source == 'dict':\n"
                        "        return {'score': 0.25, 'acc': True}\n"
                        "    if data_source == 'text':\n"
                        "        return 'not a number'\n"
                        "    return float(len(solution_str)) + (extra_info or {}).get('bonus', 0)\n"
                        "def scores(data_sources, solution_strs, ground_truths, extra_infos, k=1):\n"
                        "    return [compute_score(d, s, g, e) if d != 'num' else k * g for d, s, g, e in\n"
                        "            zip(data_sources, solution_strs, ground_truths, extra_infos)]\n");
    vc_reward_proc *p = NULL;
    CHECK_OK(vc_reward_py_start(user, NULL, NULL, 0, 5000, &p));
    if (!p) { free(user); return; }
    double s = -1;
    CHECK_OK(vc_reward_proc_score(p, "x", "hello", "\"gt\"", "{\"bonus\": 0.5}", &s));
    CHECK_NEAR(s, 5.5, 1e-12);
    CHECK_OK(vc_reward_proc_score(p, "x", "h\xc3\xa9\n\"q\"", "{\"target\": 3}", NULL, &s)); /* unicode, quotes */
    CHECK_NEAR(s, 6.0, 1e-12);
    CHECK_OK(vc_reward_proc_score(p, "dict", "a", "1", NULL, &s));
    CHECK_NEAR(s, 0.25, 1e-12);
    vc_status st = vc_reward_proc_score(p, "text", "a", "1", NULL, &s); /* float('not a number') raises */
    CHECK(vc_reward_row_failed(st) && s == 0);
    CHECK(strstr(vc_last_error(), "row 4") != NULL && strstr(vc_last_error(), "ValueError") != NULL);
    CHECK_OK(vc_reward_proc_score(p, "x", "abc", "1", NULL, &s)); /* still in sync, not restarted */
    CHECK_NEAR(s, 3.0, 1e-12);
    CHECK(vc_reward_proc_restarts(p) == 0 && vc_reward_proc_failures(p) == 1);
    vc_reward_proc_close(p);
    /* verl's batch manager call: one list in, one list out, keyword arguments passed */
    CHECK_OK(vc_reward_py_start(user, "scores", "{\"k\": 2}", 1, 5000, &p));
    if (p) {
        cJSON *g[3] = { cJSON_CreateString("x"), cJSON_CreateNumber(4), cJSON_CreateNull() };
        const cJSON *gc[3] = { g[0], g[1], g[2] }, *ex[3] = { NULL, NULL, NULL };
        const char *ds[3] = { "x", "num", "dict" }, *sol[3] = { "abcd", "", "z" };
        double sc[3];
        int failed[3];
        cJSON *ans[3] = { NULL, NULL, NULL };
        CHECK_OK(vc_reward_proc_score_batch(p, 3, ds, sol, gc, ex, sc, ans, failed));
        CHECK_NEAR(sc[0], 4.0, 1e-12);
        CHECK_NEAR(sc[1], 8.0, 1e-12);
        CHECK_NEAR(sc[2], 0.25, 1e-12);
        CHECK(!failed[0] && !failed[1] && !failed[2]);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans[2], "acc")));
        for (int i = 0; i < 3; i++) cJSON_Delete(ans[i]), ans[i] = NULL;
        ds[1] = "text"; /* the whole call raises: every row fails, the program stays */
        st = vc_reward_proc_score_batch(p, 3, ds, sol, gc, ex, sc, ans, failed);
        CHECK(vc_reward_row_failed(st) && failed[0] && failed[1] && failed[2] && sc[0] == 0);
        CHECK(vc_reward_proc_restarts(p) == 0);
        for (int i = 0; i < 3; i++) cJSON_Delete(g[i]);
        vc_reward_proc_close(p);
    }
    free(user);
}

static void test_faults(void) {
    /* answers 1 for "ok", crashes on "crash", hangs on "hang", prints garbage on "garbage" */
    char *prog = script("faulty.sh",
                        "#!/bin/sh\n"
                        "while IFS= read -r line; do\n"
                        "  case \"$line\" in\n"
                        "    *'\"crash\"'*) exit 3 ;;\n"
                        "    *'\"hang\"'*) sleep 30 ;;\n"
                        "    *'\"garbage\"'*) echo 'Traceback (most recent call last):' ;;\n"
                        "    *) echo '{\"score\": 1}' ;;\n"
                        "  esac\n"
                        "done\n");
    char *argv[] = { prog, NULL };
    vc_reward_proc *p;
    CHECK_OK(vc_reward_proc_start(argv, 300, &p));
    if (!p) { free(prog); return; }
    double s;
    const char *seq[] = { "ok", "crash", "ok", "hang", "ok", "garbage", "ok" };
    int failed = 0;
    double t0 = vc_now();
    for (int i = 0; i < 7; i++) {
        s = -1;
        vc_status st = vc_reward_proc_score(p, seq[i], "sol", "1", NULL, &s);
        if (!strcmp(seq[i], "ok")) { CHECK_OK(st); CHECK(s == 1.0); }
        else {
            CHECK_MSG(vc_reward_row_failed(st), "%s: status %d", seq[i], st);
            CHECK(s == 0.0);
            char row[32];
            snprintf(row, sizeof row, "row %d", i);
            CHECK_MSG(strstr(vc_last_error(), row) != NULL, "%s", vc_last_error());
            failed++;
        }
    }
    CHECK(vc_now() - t0 < 5.0); /* the hang cost one timeout, not 30 s */
    CHECK(vc_reward_proc_failures(p) == failed);
    CHECK(vc_reward_proc_restarts(p) == 3);
    vc_reward_proc_close(p);
    free(prog);
    /* a program that cannot start is a fatal error */
    char *bad[] = { "/nonexistent/verlc-reward", NULL };
    CHECK(vc_reward_proc_start(bad, 300, &p) == VC_ERR_IO);
    CHECK(strstr(vc_last_error(), "/nonexistent/verlc-reward") != NULL);
    /* a program that never reads its input (and a request bigger than a socket buffer) */
    char *deaf = script("deaf.sh", "#!/bin/sh\nsleep 30\n");
    char *argv2[] = { deaf, NULL };
    CHECK_OK(vc_reward_proc_start(argv2, 300, &p));
    size_t big = 4 << 20;
    char *sol = malloc(big + 1);
    memset(sol, 'a', big);
    sol[big] = 0;
    if (p) {
        CHECK(vc_reward_proc_score(p, "x", sol, "1", NULL, &s) == VC_ERR_TIMEOUT);
        vc_reward_proc_close(p);
    }
    free(sol);
    free(deaf);
}

int main(void) {
    strcpy(dir, "/tmp/verlc_reward_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_python();
    test_faults();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return vc_test_done();
}
