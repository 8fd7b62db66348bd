/* verl's default_compute_score: the built-in scorer chosen by data_source. */
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *const MATH_SOURCES[] = { "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval",
                                            "DigitalLearningGmbH/MATH-lvl5", "HuggingFaceH4/MATH-500" };

/* A JSON string is decoded; anything else is used as written. */
static char *gt_text(const char *gt) {
    const char *p = gt;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '"') {
        cJSON *j = cJSON_Parse(p);
        char *s = cJSON_IsString(j) ? vc_strdup(j->valuestring) : NULL;
        cJSON_Delete(j);
        if (s) return s;
    }
    return vc_strdup(gt);
}

static vc_status countdown(const char *solution, const char *gt, double *score) {
    cJSON *j = cJSON_Parse(gt);
    if (cJSON_IsString(j)) { /* a JSON-encoded object inside a string */
        cJSON *k = cJSON_Parse(j->valuestring);
        cJSON_Delete(j);
        j = k;
    }
    cJSON *target = cJSON_GetObjectItemCaseSensitive(j, "target");
    cJSON *nums = cJSON_GetObjectItemCaseSensitive(j, "numbers");
    vc_status st = VC_OK;
    if (!cJSON_IsNumber(target) || !cJSON_IsArray(nums)) {
        st = vc_fail(VC_ERR_FORMAT, "countdown: ground_truth needs {\"target\": number, \"numbers\": [...]}");
        goto out;
    }
    int n = cJSON_GetArraySize(nums), i = 0;
    double *v = vc_malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) { st = VC_ERR_NOMEM; goto out; }
    for (cJSON *e = nums->child; e; e = e->next) v[i++] = e->valuedouble;
    *score = vc_reward_countdown(solution, target->valuedouble, v, n, 0.1, 1.0);
    free(v);
out:
    cJSON_Delete(j);
    return st;
}

static int in_list(const char *ds, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ds, list[i])) return 1;
    return 0;
}
#define IN(ds, list) in_list(ds, list, sizeof list / sizeof list[0])

static const char *const SEARCH_R1[] = { "searchR1_nq", "searchR1_triviaqa", "searchR1_popqa", "searchR1_hotpotqa",
                                         "searchR1_2wikimultihopqa", "searchR1_musique", "searchR1_bamboogle" };
/* verl's prime_math sources */
static const char *const NUMINA[] = { "numina_aops_forum", "numina_synthetic_math", "numina_amc_aime",
                                      "numina_synthetic_amc", "numina_cn_k12", "numina_olympiads" };
/* data sources verl's default_compute_score scores by running code (with a sandbox URL: src/rl/sandbox.c) */
static const char *const VERL_PYTHON[] = { "codecontests", "apps", "codeforces", "taco" };

/* verl's math_dapo sources: its dict result {"score", "acc", "pred"} */
static int is_dapo_source(const char *ds) {
    return !strcmp(ds, "math_dapo") || !strcmp(ds, "math") || !strcmp(ds, "math_dapo_reasoning") ||
           !strncmp(ds, "aime", 4);
}

static vc_status math_dapo(const char *solution, const char *gt, double *score, cJSON **info) {
    int acc = 0;
    char *pred = NULL;
    vc_status st = vc_reward_math_dapo(solution, gt, 0, score, &acc, &pred);
    if (!st && info) {
        cJSON *o = cJSON_CreateObject();
        int ok = o && cJSON_AddNumberToObject(o, "score", *score) && cJSON_AddBoolToObject(o, "acc", acc) &&
                 (pred ? cJSON_AddStringToObject(o, "pred", pred) != NULL : cJSON_AddNullToObject(o, "pred") != NULL);
        if (!ok) {
            cJSON_Delete(o);
            st = VC_ERR_NOMEM;
        } else *info = o;
    }
    free(pred);
    return st;
}

vc_status vc_reward_default_info(const char *data_source, const char *solution_str, const char *ground_truth,
                                 const char *extra_info_json, double *score, cJSON **info) {
    (void)extra_info_json; /* none of the built-in scorers reads it */
    if (info) *info = NULL;
    if (!data_source || !solution_str || !ground_truth)
        return vc_fail(VC_ERR_MISSING, "reward: data_source, solution_str and ground_truth are required");
    if (!strncmp(data_source, "countdown", 9)) return countdown(solution_str, ground_truth, score);
    if (IN(data_source, SEARCH_R1)) return vc_reward_qa_em(solution_str, ground_truth, score);
    int geo = !strcmp(data_source, "hiyouga/geometry3k"), numina = IN(data_source, NUMINA);
    if (geo || numina) {
        char *gt = gt_text(ground_truth);
        if (!gt) return VC_ERR_NOMEM;
        vc_status st = geo ? vc_reward_geo3k(solution_str, gt, score) : vc_reward_prime_math(solution_str, gt, score);
        free(gt);
        return st;
    }
    int is_math = IN(data_source, MATH_SOURCES), dapo = is_dapo_source(data_source);
    if (!is_math && !dapo && strcmp(data_source, "openai/gsm8k"))
        return vc_fail(VC_ERR_UNSUPPORTED, "reward function is not implemented for data_source '%s'%s", data_source,
                       IN(data_source, VERL_PYTHON)
                           ? " without a sandbox: set reward_model.sandbox_fusion.url to a Sandbox Fusion service's "
                             "run_code endpoint (or, with verl installed, custom_reward_function.path="
                             "pkg://verl.utils.reward_score custom_reward_function.name=default_compute_score for its "
                             "local prime_code)"
                           : "");
    char *gt = gt_text(ground_truth);
    if (!gt) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (dapo) st = math_dapo(solution_str, gt, score, info);
    else *score = is_math ? vc_reward_math(solution_str, gt) : vc_reward_gsm8k(solution_str, gt, 0, 0.0, 1.0);
    free(gt);
    return st;
}

vc_status vc_reward_default(const char *data_source, const char *solution_str, const char *ground_truth,
                            const char *extra_info_json, double *score) {
    return vc_reward_default_info(data_source, solution_str, ground_truth, extra_info_json, score, NULL);
}
