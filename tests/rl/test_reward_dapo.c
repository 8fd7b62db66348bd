/* Golden test of verl's math_dapo.compute_score (the DAPO / AIME reward) against verl's own Python run
 * unchanged: tests/fixtures/rl/math_dapo_reference.json, made by tools/fixtures/make_math_dapo_ref.py
 * (verl b178a3cd). Every case must give verl's score, acc and pred exactly (pred NULL where verl's is None):
 * answer-line extraction, the 300- and 100-character cuts counted in code points, normalize_final_answer
 * with its regular expressions, Unicode whitespace and digits, strict \boxed{} verification. */
#include "verlc/core.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/rl/math_dapo_reference.json"

/* one case; 1 when the C result is verl's */
static int run_case(int i, const cJSON *c) {
    const char *sol = cJSON_GetObjectItem(c, "solution")->valuestring;
    const char *gt = cJSON_GetObjectItem(c, "ground_truth")->valuestring;
    int strict = cJSON_IsTrue(cJSON_GetObjectItem(c, "strict_box_verify"));
    double want_score = cJSON_GetObjectItem(c, "score")->valuedouble;
    int want_acc = cJSON_IsTrue(cJSON_GetObjectItem(c, "acc"));
    const cJSON *wp = cJSON_GetObjectItem(c, "pred");
    const char *want_pred = cJSON_IsString(wp) ? wp->valuestring : NULL;
    double score = 0;
    int acc = -1;
    char *pred = NULL;
    vc_status st = vc_reward_math_dapo(sol, gt, strict, &score, &acc, &pred);
    int same = st == VC_OK && score == want_score && acc == want_acc &&
               (want_pred ? pred && !strcmp(pred, want_pred) : !pred);
    CHECK_MSG(same, "case %d (strict %d) solution \"%s\" ground truth \"%s\": status %s, score %g acc %d pred %s%s%s; "
              "verl: score %g acc %d pred %s%s%s", i, strict, sol, gt, vc_status_name(st), score, acc, pred ? "\"" : "",
              pred ? pred : "None", pred ? "\"" : "", want_score, want_acc, want_pred ? "\"" : "",
              want_pred ? want_pred : "None", want_pred ? "\"" : "");
    free(pred);
    return same;
}

/* argument errors, optional outputs */
static void api_checks(void) {
    double score;
    int acc;
    char *pred = (char *)1;
    CHECK(vc_reward_math_dapo(NULL, "1", 0, &score, &acc, &pred) == VC_ERR_ARG && pred == NULL);
    CHECK(vc_reward_math_dapo("Answer: 1", NULL, 0, &score, &acc, &pred) == VC_ERR_ARG);
    vc_status st = vc_reward_math_dapo("Answer: \xff", "1", 0, &score, &acc, &pred);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "UTF-8"), "invalid UTF-8: %s", vc_last_error());
    CHECK_OK(vc_reward_math_dapo("Answer: 1,000", "1000", 0, &score, NULL, NULL));
    CHECK(score == 1.0);
}

int main(void) {
    cJSON *ref = NULL;
    vc_status st = vc_json_load_file(FIXTURE, &ref);
    CHECK_OK(st);
    if (st) return vc_test_done();
    int n = 0, same = 0;
    for (const cJSON *c = ref->child; c; c = c->next, n++) same += run_case(n, c);
    CHECK_MSG(n == cJSON_GetArraySize(ref) && n >= 60, "%d cases ran", n);
    fprintf(stderr, "math_dapo: %d of %d cases as verl\n", same, n);
    api_checks();
    cJSON_Delete(ref);
    return vc_test_done();
}
