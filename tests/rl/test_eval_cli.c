/* verlc eval: verl's main_eval over a file of generated responses. Each row's score is the mean over its responses,
 * each data source's the mean over its rows, printed as main_eval prints its dict; the scorer is verl's
 * default_compute_score by data source, or custom_reward_function.path's Python function; bad rows and keys are
 * refused naming the file, line and key. */
#include "cli_util.h"
#include <stdio.h>

static char dir[256], bin[4096];

static void put(const char *name, const char *text) {
    char p[320];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) fputs(text, f), fclose(f);
}

/* 0 when `verlc eval ARGS` prints exactly want (its first line) and exits with rc */
static int eval_is(const char *args, int rc, const char *want) {
    char out[320], line[512] = "";
    snprintf(out, sizeof out, "%s/out.txt", dir);
    int got = cli_sh("cd %s && %s eval %s > %s 2>&1", dir, bin, args, out);
    FILE *f = fopen(out, "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    line[strcspn(line, "\n")] = 0;
    CHECK_MSG(got == rc && strstr(line, want), "eval %s: rc %d (want %d), printed '%s' (want '%s')", args, got, rc, line,
              want);
    return got == rc && strstr(line, want) ? 0 : 1;
}

int main(void) {
    cli_quiet = 1;
    cli_tmpdir(dir, sizeof dir, "eval");
    CHECK(realpath(cli_bin(), bin) != NULL && cli_sh("mkdir -p %s", dir) == 0);
    put("gen.jsonl",
        "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"q\"}], "
        "\"responses\": [\"so #### 72\", \"#### 5\"], \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"72\"}}\n"
        "{\"data_source\": \"openai/gsm8k\", \"responses\": [\"#### 10\", \"#### 10\"], \"reward_model\": {\"ground_truth\": \"10\"}}\n"
        "{\"data_source\": \"lighteval/MATH\", \"responses\": [\"the answer is \\\\boxed{4}\"], "
        "\"reward_model\": {\"ground_truth\": \"4\"}}\n");
    /* gsm8k: rows (1 + 0) / 2 and 1, so 0.75; MATH 1 */
    eval_is("data.path=gen.jsonl", 0, "{'test_score/openai/gsm8k': 0.75, 'test_score/lighteval/MATH': 1.0}");
    /* one response a row as a string, other key names */
    put("one.jsonl", "{\"src\": \"openai/gsm8k\", \"out\": \"#### 3\", \"rm\": {\"ground_truth\": \"4\"}}\n");
    eval_is("data.path=one.jsonl data.response_key=out +data.data_source_key=src data.reward_model_key=rm", 0,
            "{'test_score/openai/gsm8k': 0.0}");
    /* bad input: named by file, line and key; unknown keys and a missing path refused */
    eval_is("data.path=gen.jsonl data.response_key=nope", 1, "gen.jsonl:1: 'nope' is not a non-empty list");
    put("bad.jsonl", "{\"data_source\": \"openai/gsm8k\", \"responses\": [\"#### 1\"], \"reward_model\": {}}\n"
                     "{\"data_source\": \"openai/gsm8k\", \"responses\": [\"#### 1\", 7], \"reward_model\": {\"ground_truth\": \"1\"}}\n");
    eval_is("data.path=bad.jsonl", 1, "bad.jsonl:1: no 'reward_model.ground_truth'");
    put("bad2.jsonl", "{\"data_source\": \"openai/gsm8k\", \"responses\": [\"#### 1\", 7], \"reward_model\": {\"ground_truth\": \"1\"}}\n");
    eval_is("data.path=bad2.jsonl", 1, "bad2.jsonl:1: 'responses' item 1 is not a string");
    put("unknown.jsonl", "{\"data_source\": \"my/set\", \"responses\": [\"x\"], \"reward_model\": {\"ground_truth\": \"1\"}}\n");
    eval_is("data.path=unknown.jsonl", 1, "my/set");
    eval_is("data.pth=gen.jsonl", 2, "unknown key 'data.pth'");
    eval_is("data.response_key=x", 2, "data.path is required");
    eval_is("data.path=missing.parquet", 1, "missing.parquet");
    /* custom_reward_function.path: verl's Python function, called per response */
    if (system("python3 -c 'import json' > /dev/null 2>&1") == 0) {
        put("fn.py", "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                     "    return 1.0 if ground_truth in solution_str else 0.25\n");
        /* gsm8k: (1 + 0.25) / 2 = 0.625 and 1, so 0.8125 */
        eval_is("data.path=gen.jsonl custom_reward_function.path=fn.py", 0,
                "{'test_score/openai/gsm8k': 0.8125, 'test_score/lighteval/MATH': 1.0}");
    } else
        printf("custom reward function skipped: no python3\n");
    cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
