/* verl's Sandbox Fusion reward (codecontests, apps, codeforces, taco with reward_model.sandbox_fusion.url) against
 * tests/rl/sandbox_server.py, a stand-in service that runs the code with python3: every case's score must be the one
 * verl's own sandbox_fusion.compute_score gave against the same server (tests/fixtures/rl/sandbox_reference.json,
 * tools/fixtures/make_sandbox_ref.py): code-block extraction, stdin / stdout cases, fn_name calls (Solution classes,
 * str() of the expected value), assert cases, the first 10 cases only, runtime errors, time-outs, 504 retries, HTTP
 * and service errors, compile errors failing the later cases, malformed test cases. All rows are scored in one
 * call, their cases in flight together; then the retries are counted, verl's SandboxFusionTool (a code interpreter
 * for multi-turn rollouts) is checked the same way, and the trainer's reward path is run. */
#include "../../src/rl/agent_internal.h"
#include "../../src/rl/http_batch.h"
#include "../../src/rl/py_text.h"
#include "../../src/rl/sandbox.h"
#include "../../src/rl/trainer_internal.h"
#include "agent_test_util.h"
#include "py_server_util.h"
#include "verlc/chat_template.h"
#include "verlc/config.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/rl/sandbox_reference.json"

static char url[128], log_path[128], peak_path[128];

static int count_lines_with(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char line[1 << 16];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static void golden(const cJSON *cases) {
    int n = cJSON_GetArraySize(cases), same = 0, i = 0;
    const char **sol = vc_calloc((size_t)n, sizeof *sol), **gt = vc_calloc((size_t)n, sizeof *gt);
    double *got = vc_calloc((size_t)n, sizeof *got);
    for (const cJSON *c = cases->child; c; c = c->next, i++) {
        sol[i] = cJSON_GetArrayItem(c, 0)->valuestring;
        gt[i] = cJSON_GetArrayItem(c, 1)->valuestring;
    }
    vc_sandbox_opts o = { .url = url, .max_concurrent = 8, .memory_limit_mb = 1024, .timeout_s = 10, .retry_delay = 0.05 };
    double t0 = vc_now();
    CHECK_OK(vc_sandbox_score(&o, n, sol, gt, got));
    i = 0;
    for (const cJSON *c = cases->child; c; c = c->next, i++) {
        double want = cJSON_GetArrayItem(c, 2)->valuedouble;
        same += fabs(got[i] - want) < 1e-12;
        CHECK_MSG(fabs(got[i] - want) < 1e-12, "case %d: score %g, verl %g\n%s\n%s", i, got[i], want, sol[i], gt[i]);
    }
    fprintf(stderr, "sandbox_fusion: %d of %d scores as verl's (%.1f s)\n", same, n, vc_now() - t0);
    CHECK(n >= 40);
    /* a 504 is tried three times in all, then the case fails */
    CHECK_MSG(count_lines_with(log_path, "SB_504_ALWAYS") == 3, "%d tries of the always-504 case",
              count_lines_with(log_path, "SB_504_ALWAYS"));
    CHECK_MSG(count_lines_with(log_path, "SB_504_ONCE") == 2, "%d tries of the once-504 case",
              count_lines_with(log_path, "SB_504_ONCE"));
    /* only the first 10 cases run */
    CHECK_MSG(count_lines_with(log_path, "\"stdin\":\"11\"") == 0, "a case past the 10th was run");
    free(sol), free(gt), free(got);
}

static void code_blocks(void) {
    struct { const char *in, *want; } C[] = {
        { "a ```python\nx=1\n``` b", "\nx=1\n" },
        { "```java\nint x;\n```", "int x;\n" },
        { "```\nx=1\n```", "\nx=1\n" },
        { "```  Python  \nx\n```", "x\n" },
        { "```c++\nx\n```", "c++\nx\n" },
        { "```x", "x" },
        { "none", NULL },
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char *got = vc_sandbox_code(C[i].in);
        CHECK_MSG(C[i].want ? got && !strcmp(got, C[i].want) : !got, "%s -> [%s]", C[i].in, got ? got : "(none)");
        free(got);
    }
}

/* no service listening: every case fails, the rows score 0, nothing hangs */
static void unreachable(void) {
    const char *sol[] = { "```python\nprint(1)\n```" }, *gt[] = { "{\"inputs\": [\"\"], \"outputs\": [\"1\"]}" };
    double s = 1;
    vc_sandbox_opts o = { .url = "http://127.0.0.1:9/run_code", .max_concurrent = 2, .memory_limit_mb = 64,
                          .timeout_s = 2, .retry_delay = 0.01 };
    CHECK_OK(vc_sandbox_score(&o, 1, sol, gt, &s));
    CHECK(s == 0);
}

/* verl's SandboxFusionTool (examples/sglang_multiturn's code_interpreter) loaded from its tool config: each call's text
 * is the one verl's own tool gave against the same server (a traceback's last line, the rest being Python's) */
static void tool(const cJSON *cases) {
    char path[160];
    snprintf(path, sizeof path, "/tmp/verlc_sandbox_tool_%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "tools:\n  - class_name: \"verl.tools.sandbox_fusion_tools.SandboxFusionTool\"\n    config:\n"
               "      sandbox_fusion_url: \"%s\"\n      num_workers: 10\n      enable_global_rate_limit: true\n"
               "      rate_limit: 10\n      default_timeout: 30\n      default_language: \"python\"\n"
               "      memory_limit_mb: 1024\n      type: native\n    tool_schema:\n      type: \"function\"\n"
               "      function:\n        name: \"code_interpreter\"\n        description: \"run code\"\n"
               "        parameters:\n          type: \"object\"\n          properties:\n            code:\n"
               "              type: \"string\"\n          required: [\"code\"]\n", url);
    fclose(f);
    rl_tool *tools = NULL;
    int n = 0, same = 0, k = 0;
    cJSON *schemas = NULL;
    CHECK_OK(rl_tools_load(path, &tools, &n, &schemas));
    for (const cJSON *c = cases ? cases->child : NULL; n == 1 && c; c = c->next, k++) {
        const char *args = cJSON_GetArrayItem(c, 0)->valuestring, *want = cJSON_GetArrayItem(c, 1)->valuestring;
        rl_tool_call call = { "code_interpreter", pt_json_loads((pt_span){ args, strlen(args) }) };
        char *text = NULL;
        double r = 1;
        CHECK_OK(rl_tool_run(tools, n, &call, NULL, "row", &text, &r, &(vc_image){ 0 }));
        const char *tail = strncmp(want, "Traceback", 9) ? want : strrchr(want, '\n') ? NULL : want;
        int ok = text && r == 0;
        if (ok && tail) ok = !strcmp(text, want);
        else if (ok) { /* the last line of the traceback */
            const char *w = want + strlen(want) - 1, *g = text + strlen(text) - (*text ? 1 : 0);
            while (w > want && w[-1] != '\n') w--;
            while (g > text && g[-1] != '\n') g--;
            ok = !strcmp(w, g) && !strncmp(text, "Traceback", 9);
        }
        same += ok;
        CHECK_MSG(ok, "code_interpreter %s: [%s], verl [%s]", args, text ? text : "(null)", want);
        free(text);
        cJSON_Delete(call.args);
    }
    fprintf(stderr, "SandboxFusionTool: %d of %d calls as verl's\n", same, k);
    CHECK(k >= 10);
    rl_tools_free(tools, n);
    cJSON_Delete(schemas);
    /* without its url the tool is refused when the config loads, as verl raises */
    f = fopen(path, "w");
    if (f) {
        fputs("tools:\n  - class_name: verl.tools.sandbox_fusion_tools.SandboxFusionTool\n    config: {type: native}\n"
              "    tool_schema: {type: function, function: {name: ci, description: x, parameters: {type: object, "
              "properties: {code: {type: string}}, required: [code]}}}\n", f);
        fclose(f);
        CHECK(rl_tools_load(path, &tools, &n, &schemas) == VC_ERR_FORMAT);
        CHECK_MSG(strstr(vc_last_error(), "sandbox_fusion_url"), "%s", vc_last_error());
    }
    unlink(path);
}

/* a multi-turn rollout whose 8 responses all call code_interpreter in the same turn (a scripted engine, the Qwen3
 * tokenizer and template): each gets its own run's output in its tool turn, and the calls reach the service together
 * (at the tool's rate_limit of 10 in flight), as verl's loop makes them concurrently */
typedef struct { vc_tokenizer *tok; int calls; } code_ctx;

static vc_status code_script(void *p, const vc_rollout_request *r, int n, const vc_sampling *s, vc_rollout_sample **out,
                             int *n_out) {
    code_ctx *c = p;
    int total = 0, k = 0;
    vc_rollout_sample *smp = agent_test_samples(r, n, &total);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < r[i].n_samples; j++, k++) {
            char text[300];
            int who = c->calls == 0 ? (int)r[i].prompt_index * 10 + j : 0;
            if (c->calls == 0)
                snprintf(text, sizeof text, "<tool_call>\n{\"name\": \"code_interpreter\", \"arguments\": {\"code\": "
                         "\"import time\\ntime.sleep(0.3)\\nprint(%d * 7)\"}}\n</tool_call><|im_end|>", who);
            else snprintf(text, sizeof text, "Done.<|im_end|>");
            smp[k] = agent_test_sample(c->tok, text, i, j, s->max_new_tokens, -0.5f, 0.0f);
        }
    c->calls++;
    *out = smp;
    *n_out = total;
    return VC_OK;
}

static void batched_rollout(void) {
    char tools[160], data[160], o1[300], tok_dir[600], peak2[160], url2[128];
    /* a server of its own: the most runs at once of this rollout alone */
    snprintf(peak2, sizeof peak2, "%s.rollout", peak_path);
    setenv("SB_PEAK", peak2, 1);
    vc_reward_proc *srv = test_py_server("tests/rl/sandbox_server.py", "/run_code", url2, sizeof url2);
    snprintf(tools, sizeof tools, "/tmp/verlc_sandbox_tools_%d.yaml", (int)getpid());
    snprintf(data, sizeof data, "/tmp/verlc_sandbox_data_%d.jsonl", (int)getpid());
    FILE *f = fopen(tools, "w"), *g = fopen(data, "w");
    CHECK(f && g);
    if (!f || !g) return;
    fprintf(f, "tools:\n  - class_name: verl.tools.sandbox_fusion_tools.SandboxFusionTool\n    config: {sandbox_fusion_url: "
               "\"%s\", rate_limit: 10, type: native}\n    tool_schema: {type: function, function: {name: code_interpreter, "
               "description: run code, parameters: {type: object, properties: {code: {type: string}}, required: [code]}}}\n",
            url2);
    for (int i = 0; i < 2; i++)
        fprintf(g, "{\"data_source\": \"x\", \"prompt\": [{\"role\": \"user\", \"content\": \"Compute %d.\"}], "
                   "\"reward_model\": {\"ground_truth\": \"0\"}}\n", i);
    fclose(f), fclose(g);
    snprintf(tok_dir, sizeof tok_dir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    snprintf(o1, sizeof o1, "actor_rollout_ref.rollout.multi_turn.tool_config_path=%s", tools);
    char *ov[] = { "actor_rollout_ref.rollout.multi_turn.enable=true", o1 };
    vc_config *cfg = NULL;
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->world = 1, t->seed = 3;
    CHECK_OK(vc_tokenizer_load(tok_dir, &t->tok));
    CHECK_OK(vc_chat_template_load(tok_dir, &t->tmpl));
    CHECK_OK(vc_config_load(NULL, 2, ov, &cfg));
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1 };
    if (t->tok && t->tmpl) CHECK_OK(vc_rl_dataset_load(data, t->tok, t->tmpl, &o, &t->train));
    if (t->train && cfg) CHECK_OK(rl_agent_open(t, cfg));
    code_ctx cc = { t->tok, 0 };
    t->gen = code_script;
    t->gen_ctx = &cc;
    uint32_t idx[2] = { 0, 1 };
    vc_sampling s = { .temperature = 1, .top_p = 1, .max_new_tokens = 200 };
    rl_batch b;
    memset(&b, 0, sizeof b);
    if (t->agent) CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 4, 1, &b));
    int right = 0;
    for (int i = 0; i < b.B; i++) {
        char want[64];
        snprintf(want, sizeof want, "<tool_response>\n%d\n", (b.prompt[i] * 10 + i % 4) * 7);
        right += b.text[i] && strstr(b.text[i], want) != NULL;
    }
    CHECK_MSG(b.B == 8 && right == 8, "%d of %d responses got their own run's output", right, b.B);
    FILE *pk = fopen(peak2, "r");
    int peak = 0;
    if (pk) {
        if (fscanf(pk, "%d", &peak) != 1) peak = 0;
        fclose(pk);
    }
    CHECK_MSG(peak >= 4, "at most %d runs were in progress at once", peak);
    fprintf(stderr, "SandboxFusionTool in a rollout: 8 responses' calls, %d runs at once at most\n", peak);
    rl_batch_free(&b);
    rl_agent_free(t->agent);
    vc_rl_dataset_free(t->train);
    vc_tokenizer_free(t->tok);
    vc_chat_template_free(t->tmpl);
    vc_config_free(cfg);
    free(t);
    vc_reward_proc_close(srv);
    unlink(tools), unlink(data), unlink(peak2);
}

/* the trainer's reward path: reward_model.sandbox_fusion.url read, the code rows scored through the service with
 * their extra values, the other rows by their own scorers */
static void trainer_path(void) {
    char o1[200];
    snprintf(o1, sizeof o1, "reward_model.sandbox_fusion.url=%s", url);
    char *ov[] = { o1, "reward_model.sandbox_fusion.max_concurrent=4" };
    vc_config *cfg = NULL;
    CHECK_OK(vc_config_load(NULL, 2, ov, &cfg));
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->max_resp = 64;
    if (cfg) CHECK_OK(rl_reward_config(t, cfg));
    CHECK(t->sandbox.url && !strcmp(t->sandbox.url, url) && t->sandbox.max_concurrent == 4 &&
          t->sandbox.memory_limit_mb == 1024);
    vc_rl_prompt p[3] = { { .data_source = "codecontests", .ground_truth = "{\"inputs\": [\"1 2\"], \"outputs\": [\"3\"]}" },
                          { .data_source = "openai/gsm8k", .ground_truth = "72" },
                          { .data_source = "taco", .ground_truth = "{\"inputs\": [\"1 2\", \"2 2\"], \"outputs\": [\"3\", \"5\"]}" } };
    vc_rl_dataset d = { .n = 3, .p = p };
    rl_batch b;
    CHECK_OK(rl_batch_alloc(&b, 3, 4, 3));
    const char *txt[3] = { "```python\nprint(sum(map(int, input().split())))\n```", "so #### 72",
                           "```python\nprint(sum(map(int, input().split())))\n```" };
    for (int i = 0; i < 3; i++) {
        b.prompt[i] = i, b.text[i] = vc_strdup(txt[i]), b.rlen[i] = 1, b.cu[i + 1] = i + 1;
        b.uid[i] = vc_strdup("u");
    }
    rl_metrics met = { 0 };
    CHECK_OK(rl_score_batch(t, &d, &b, &met, NULL));
    CHECK_MSG(b.score[0] == 1 && b.score[1] == 1 && b.score[2] == 0.5, "scores %g %g %g", b.score[0], b.score[1],
              b.score[2]);
    rl_metrics_free(&met);
    rl_batch_free(&b);
    vc_config_free(cfg);
    free(t);
}

int main(void) {
    snprintf(log_path, sizeof log_path, "/tmp/verlc_sandbox_%d.log", (int)getpid());
    setenv("SB_LOG", log_path, 1);
    snprintf(peak_path, sizeof peak_path, "/tmp/verlc_sandbox_peak_%d", (int)getpid());
    setenv("SB_PEAK", peak_path, 1);
    code_blocks();
    if (!vc_http_available() || system("python3 -c 'import json' > /dev/null 2>&1") != 0) {
        printf("skipping the service checks: %s\n", vc_http_available() ? "no python3" : "built without libcurl");
        return vc_test_done();
    }
    vc_reward_proc *srv = test_py_server("tests/rl/sandbox_server.py", "/run_code", url, sizeof url);
    cJSON *ref = NULL;
    CHECK_OK(vc_json_load_file(FIXTURE, &ref));
    const cJSON *cases = cJSON_GetObjectItem(ref, "cases");
    if (cases) golden(cases);
    tool(cJSON_GetObjectItem(ref, "tool"));
    cJSON_Delete(ref);
    unreachable();
    trainer_path();
    if (vc_test_have_shared()) batched_rollout();
    vc_reward_proc_close(srv);
    unlink(log_path), unlink(peak_path);
    return vc_test_done();
}
