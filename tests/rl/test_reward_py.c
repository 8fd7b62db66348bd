/* verl's reward functions and managers through `verlc train`: custom_reward_function.path naming a Python file
 * (its function called with keyword arguments and reward_kwargs, dict results kept as extra values, the row's
 * own ground-truth type, prints kept off the protocol, async functions), reward_model.reward_manager batch
 * (one call per batch, the manager's reward_kwargs under the function's), dapo (overlong shaping from
 * reward_model.reward_kwargs) and prime (a raising function scores 0 and training goes on), and the errors a
 * verl command line can carry. Checked from the rollout dumps and metrics of one in-process step. */
#include "../../src/rl/demo_internal.h"
#include "rl_demo_util.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void put(const char *name, const char *text) {
    char *p = vc_path_join(dir, name);
    CHECK_OK(vc_write_file_atomic(p, text, strlen(text)));
    free(p);
}

static const char *PY =
    "import os, sys\n"
    "def compute_score(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):\n"
    "    print('a print in the function must not reach the protocol stream')\n"
    "    os.write(1, b'nor a write to fd 1 (as native libraries print)\\n')\n"
    "    assert extra_info['rollout_reward_scores'] == {}\n"
    "    return {'score': 0.01 * len(solution_str) + bonus, 'gt_type': type(ground_truth).__name__,\n"
    "            'idx': extra_info.get('index', -1), 'src': data_source, 'turns': extra_info.get('num_turns', -1)}\n"
    "def compute_batch(data_sources, solution_strs, ground_truths, extra_infos, bonus=0.0, scale=1.0):\n"
    "    assert len(data_sources) == len(solution_strs) == len(ground_truths) == len(extra_infos)\n"
    "    return [scale * 0.01 * len(s) + bonus for s in solution_strs]\n"
    "def broken(data_source, solution_str, ground_truth, extra_info=None):\n"
    "    return 1 / 0\n"
    "async def async_score(data_source, solution_str, ground_truth, extra_info=None):\n"
    "    return 0.25\n";

/* one step of the demo model on 2 prompts x 2 samples, dumping the rollout to <dir>/dump */
static vc_status run(const char *extra) {
    char buf[4096];
    snprintf(buf, sizeof buf,
             "actor_rollout_ref.model.path=%s/model|data.train_files=%s/train.jsonl|data.val_files=null|"
             "data.train_batch_size=2|data.max_prompt_length=16|data.max_response_length=3|actor_rollout_ref.rollout.n=2|"
             "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.ppo_mini_batch_size=2|trainer.total_training_steps=1|"
             "trainer.default_local_dir=%s/run|trainer.resume_mode=disable|trainer.rollout_data_dir=%s/dump|%s",
             dir, dir, dir, dir, extra);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s/dump %s/run", dir, dir);
    CHECK(system(cmd) == 0);
    int64_t done = 0;
    return demo_fit(buf, &done);
}

/* the dump's lines, or NULL */
static cJSON *dump_lines(void) {
    char *p = vc_path_join(dir, "dump/1.jsonl"), *text = NULL;
    size_t len = 0;
    cJSON *arr = NULL;
    if (vc_read_file(p, &text, &len) == VC_OK) {
        arr = cJSON_CreateArray();
        for (char *s = text, *nl; s && *s; s = nl ? nl + 1 : NULL) {
            if ((nl = strchr(s, '\n'))) *nl = 0;
            cJSON *j = cJSON_Parse(s);
            if (j) cJSON_AddItemToArray(arr, j);
        }
    }
    CHECK_MSG(arr && cJSON_GetArraySize(arr) == 4, "%s: want 4 lines", p);
    free(text);
    free(p);
    return arr;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsBool(v) ? cJSON_IsTrue(v) : NAN;
}
static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static double out_len(const cJSON *o) { return (double)strlen(str(o, "output")); } /* ASCII outputs */

static double last_metric(const char *name) {
    char *p = vc_path_join(dir, "run/metrics.jsonl");
    vc_metrics *m = NULL;
    double v = NAN;
    if (vc_metrics_read(p, &m) == VC_OK && m) {
        const vc_metric_series *se = vc_metrics_find(m, name);
        if (se && se->n) v = se->y[se->n - 1];
    }
    vc_metrics_free(m);
    free(p);
    return v;
}

static void expect(const char *extra, vc_status want, const char *needle1, const char *needle2) {
    vc_status st = run(extra);
    const char *msg = vc_last_error();
    CHECK_MSG(st == want, "[%s] status %s, want %s (%s)", extra, vc_status_name(st), vc_status_name(want), msg);
    if (needle1) CHECK_MSG(strstr(msg, needle1) != NULL, "[%s] message lacks `%s`: %s", extra, needle1, msg);
    if (needle2) CHECK_MSG(strstr(msg, needle2) != NULL, "[%s] message lacks `%s`: %s", extra, needle2, msg);
    printf("  %-60.60s -> %.160s\n", extra, msg);
}

/* a row-wise Python function: score from the function, its other keys as extra values, the row's own
 * ground-truth type (a string stays a string, a number a number), reward_kwargs passed */
static void check_row_function(void) {
    char e[1024];
    snprintf(e, sizeof e, "custom_reward_function.path=%s/rewards.py|+custom_reward_function.reward_kwargs.bonus=0.5", dir);
    CHECK_OK(run(e));
    cJSON *L = dump_lines();
    int bad = 0, str_rows = 0, num_rows = 0;
    for (const cJSON *o = L ? L->child : NULL; o; o = o->next) {
        const cJSON *gts = cJSON_GetObjectItemCaseSensitive(o, "gts");
        const char *want = cJSON_IsString(gts) ? "str" : "int";
        str_rows += cJSON_IsString(gts);
        num_rows += cJSON_IsNumber(gts);
        if (fabs(num(o, "score") - (0.01 * out_len(o) + 0.5)) > 1e-6 || strcmp(str(o, "gt_type"), want) ||
            strcmp(str(o, "src"), "verlc/addition") || !(num(o, "idx") >= 0) || num(o, "turns") != 2) {
            char *s = cJSON_PrintUnformatted(o);
            printf("  unexpected line: %s\n", s);
            free(s);
            bad++;
        }
    }
    CHECK_MSG(!bad && str_rows && num_rows, "row function: %d bad lines (%d string, %d number ground truths)", bad,
              str_rows, num_rows);
    printf("  row function: 4 dump lines with score 0.01 x len + bonus, gt types str/int, extra keys kept, "
           "extra_info's num_turns 2 (verl's naive manager)\n");
    cJSON_Delete(L);
    /* later verl's remote manager: naive's rows and scores (verl runs them in worker processes, as verlc does) */
    snprintf(e, sizeof e, "reward.reward_manager.name=remote|custom_reward_function.path=%s/rewards.py|"
             "+custom_reward_function.reward_kwargs.bonus=0.5", dir);
    CHECK_OK(run(e));
    L = dump_lines();
    bad = 0;
    for (const cJSON *o = L ? L->child : NULL; o; o = o->next)
        bad += fabs(num(o, "score") - (0.01 * out_len(o) + 0.5)) > 1e-6 || num(o, "turns") != 2;
    CHECK_MSG(L && L->child && !bad, "remote manager: %d rows scored otherwise than naive", bad);
    cJSON_Delete(L);
    /* verl's prime manager hands the row's extra_info as it is: no num_turns */
    snprintf(e, sizeof e, "reward_model.reward_manager=prime|custom_reward_function.path=%s/rewards.py", dir);
    CHECK_OK(run(e));
    L = dump_lines();
    bad = 0;
    for (const cJSON *o = L ? L->child : NULL; o; o = o->next) bad += num(o, "turns") != -1;
    CHECK_MSG(L && L->child && !bad, "prime manager: %d rows saw a num_turns", bad);
    cJSON_Delete(L);
    /* an async function */
    snprintf(e, sizeof e, "custom_reward_function.path=file://%s/rewards.py|custom_reward_function.name=async_score", dir);
    CHECK_OK(run(e));
    L = dump_lines();
    for (const cJSON *o = L ? L->child : NULL; o; o = o->next)
        CHECK_MSG(num(o, "score") == 0.25 && num(o, "acc") == 0.25, "async function: score %g, acc %g", num(o, "score"),
                  num(o, "acc"));
    cJSON_Delete(L);
}

/* verl's batch manager: one call with lists; the function's reward_kwargs win over the manager's */
static void check_batch_manager(void) {
    char e[1024];
    snprintf(e, sizeof e, "reward_model.reward_manager=batch|custom_reward_function.path=%s/rewards.py|"
             "custom_reward_function.name=compute_batch|+reward_model.reward_kwargs.scale=2|"
             "+reward_model.reward_kwargs.bonus=9|+custom_reward_function.reward_kwargs.bonus=0.5", dir);
    CHECK_OK(run(e));
    cJSON *L = dump_lines();
    for (const cJSON *o = L ? L->child : NULL; o; o = o->next) {
        double want = 2 * 0.01 * out_len(o) + 0.5;
        CHECK_MSG(fabs(num(o, "score") - want) < 1e-6 && fabs(num(o, "acc") - want) < 1e-6,
                  "batch manager: score %g acc %g, want %g", num(o, "score"), num(o, "acc"), want);
    }
    printf("  batch manager: 4 rows scored 2 x 0.01 x len + 0.5 in one call\n");
    cJSON_Delete(L);
}

/* verl's dapo manager: overlong shaping from reward_model.reward_kwargs (max_resp_len 1, buffer 1: every
 * response is over by its length), logged as overlong_reward / overlong, added to the built-in score */
static void check_dapo_manager(void) {
    CHECK_OK(run("reward_model.reward_manager=dapo|+reward_model.reward_kwargs.max_resp_len=1|"
                 "+reward_model.reward_kwargs.overlong_buffer_cfg.enable=True|"
                 "+reward_model.reward_kwargs.overlong_buffer_cfg.len=1|"
                 "+reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor=0.25|"
                 "+reward_model.reward_kwargs.overlong_buffer_cfg.log=True"));
    cJSON *L = dump_lines();
    for (const cJSON *o = L ? L->child : NULL; o; o = o->next) {
        double pen = num(o, "overlong_reward"), base = num(o, "score") - pen;
        double k = -pen / 0.25; /* the response's tokens */
        CHECK_MSG(k >= 1 && k <= 3 && fabs(k - round(k)) < 1e-6 && num(o, "overlong") == 1 &&
                      (fabs(base) < 1e-6 || fabs(base - 1) < 1e-6),
                  "dapo manager: score %g, overlong_reward %g, overlong %g", num(o, "score"), pen, num(o, "overlong"));
    }
    printf("  dapo manager: overlong_reward = -0.25 x tokens on every row, score = match + penalty\n");
    cJSON_Delete(L);
}

static void check_errors(void) {
    char e[1024];
    /* verl's prime manager scores a raising function 0 and goes on; naive stops (more than half failed) */
    snprintf(e, sizeof e, "reward_model.reward_manager=prime|custom_reward_function.path=%s/rewards.py|"
             "custom_reward_function.name=broken", dir);
    CHECK_OK(run(e));
    CHECK_MSG(last_metric("reward/failed_rows") == 4, "prime manager: failed rows %g, want 4", last_metric("reward/failed_rows"));
    snprintf(e, sizeof e, "custom_reward_function.path=%s/rewards.py|custom_reward_function.name=broken", dir);
    expect(e, VC_ERR_TIMEOUT, "ZeroDivisionError", "rewards.py");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/rewards.py|custom_reward_function.name=nope", dir);
    expect(e, VC_ERR_ARG, "has no nope", "custom_reward_function.path");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/bad.py", dir);
    expect(e, VC_ERR_ARG, "import fails here", "bad.py");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/missing.py", dir);
    expect(e, VC_ERR_ARG, "not found", "missing.py");
    expect("custom_reward_function.path=pkg://no_such_module_verlc", VC_ERR_ARG, "no_such_module_verlc", NULL);
    expect("reward_model.reward_manager=no_such_manager", VC_ERR_UNSUPPORTED, "reward_manager=no_such_manager", NULL);
    expect("reward_manager.source=importlib", VC_ERR_UNSUPPORTED, "reward_manager.source", NULL);
    expect("reward_model.reward_manager=batch", VC_ERR_ARG, "batch", "custom_reward_function.path");
    expect("+reward_model.reward_kwargs.max_resp_len=3", VC_ERR_ARG, "reward_kwargs.max_resp_len", "naive");
    expect("reward_model.reward_manager=dapo|+reward_model.reward_kwargs.overlong_buffer_cfg.enable=True|"
           "+reward_model.reward_kwargs.overlong_buffer_cfg.len=1", VC_ERR_ARG, "max_resp_len", NULL);
    expect("reward_model.reward_manager=dapo|+reward_model.reward_kwargs.foo=1", VC_ERR_ARG, "reward_kwargs.foo", "dapo");
    expect("+custom_reward_function.reward_kwargs.bonus=1", VC_ERR_ARG, "custom_reward_function.reward_kwargs", NULL);
    setenv("VERLC_PYTHON", "/nonexistent/python9", 1);
    snprintf(e, sizeof e, "custom_reward_function.path=%s/rewards.py", dir);
    expect(e, VC_ERR_IO, "VERLC_PYTHON", "python9");
    unsetenv("VERLC_PYTHON");
}

int main(void) {
    if (system("python3 -c 'import json' > /dev/null 2>&1") != 0) {
        printf("skipping: no python3 (verl's reward functions are Python)\n");
        return 0;
    }
    snprintf(dir, sizeof dir, "/tmp/verlc_rpy_%d", (int)getpid());
    demo_model_setup(dir, 3);
    put("train.jsonl",
        "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"12+34=\"}],"
        "\"reward_model\":{\"style\":\"rule\",\"ground_truth\":\"46\"},\"extra_info\":{\"index\":0}}\n"
        "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"20+20=\"}],"
        "\"reward_model\":{\"style\":\"rule\",\"ground_truth\":40},\"extra_info\":{\"index\":1}}\n");
    put("rewards.py", PY);
    put("bad.py", "raise RuntimeError('import fails here')\n");
    check_row_function();
    check_batch_manager();
    check_dapo_manager();
    check_errors();
    if (!vc_t_fail) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    }
    return vc_test_done();
}
