/* verl's Sandbox Fusion reward for code (verl/utils/reward_score/sandbox_fusion: the data sources codecontests, apps,
 * codeforces and taco when reward_model.sandbox_fusion.url is set), sandbox.c. */
#ifndef VC_RL_SANDBOX_H
#define VC_RL_SANDBOX_H
#include "verlc/core.h"

typedef struct vc_sandbox_opts {
    const char *url;     /* the service's run_code endpoint, e.g. http://host:8080/run_code */
    int max_concurrent;  /* requests in flight at once (verl's sandbox_fusion.max_concurrent, default 64) */
    int memory_limit_mb; /* per run (verl's sandbox_fusion.memory_limit_mb, default 1024) */
    int timeout_s;       /* compile and run timeout of each test case (verl's default 10) */
    double retry_delay;  /* seconds before the first retry of a 504 answer (verl's 1; linear: 1, 2) */
} vc_sandbox_opts;

/* 1 when verl scores data_source through the sandbox (codecontests, apps, codeforces, taco) */
int vc_sandbox_source(const char *data_source);
/* verl's sandbox_fusion.compute_score(continuous=True) of n rows at once: the code of solution[i] (its last
 * ```python block, else its first ``` block) run on each test case of tests[i] (reward_model.ground_truth: JSON
 * {"inputs": [...], "outputs": [...], "fn_name"?: ..., "assert_case"?: [...]}, or that JSON in a string), the
 * stdout compared with the expected output as verl compares them; score[i] is the pass rate of the first 10
 * cases. Everything verl scores 0 (no code block, test cases that are not JSON, failed or timed-out requests,
 * errors the service reports) scores 0 here. All rows' cases share max_concurrent requests in flight. Fails only
 * when out of memory or built without libcurl. */
vc_status vc_sandbox_score(const vc_sandbox_opts *o, int n, const char *const *solution, const char *const *tests,
                           double *score);
/* verl's SandboxFusionTool: code run in language with the compile and run timeouts (no stdin); *text (malloc'd) what
 * the tool tells the model: the run's stdout then stderr when it finished, else "no stdout here" (also for a
 * language Sandbox Fusion lacks, a failed request, a time-out) */
vc_status vc_sandbox_tool_run(const vc_sandbox_opts *o, const char *code, double timeout, const char *language,
                              char **text);
/* ... n of them at once, at most o->max_concurrent requests in flight (text[i] malloc'd) */
vc_status vc_sandbox_tool_run_many(const vc_sandbox_opts *o, int n, const char *const *code, const double *timeout,
                                   const char *const *language, char **text);
/* the code verl sends for a completion (NULL when it has none: score 0); malloc'd */
char *vc_sandbox_code(const char *completion);
#endif
