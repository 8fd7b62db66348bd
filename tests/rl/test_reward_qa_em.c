/* Search-R1's exact-match reward against verl's own function (tests/fixtures/rl/qa_em_reference.json, made
 * by tools/fixtures/make_qa_em_ref.py): the last <answer> tag, SQuAD normalisation (case, punctuation,
 * articles, whitespace, Unicode letters), several golden answers, a bare string target, the quarter score
 * for more than 10 tags; and the dispatch by data source. */
#include "verlc/json.h"
#include "verlc/reward.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    cJSON *ref = NULL;
    vc_json_load_file("tests/fixtures/rl/qa_em_reference.json", &ref);
    CHECK_MSG(ref != NULL, "tests/fixtures/rl/qa_em_reference.json: missing or not JSON");
    if (!ref) return vc_test_done();
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(ref, "cases")->child; c; c = c->next, n++) {
        const char *sol = cJSON_GetObjectItem(c, "solution")->valuestring;
        cJSON *gt = cJSON_CreateObject();
        cJSON_AddItemToObject(gt, "target", cJSON_Duplicate(cJSON_GetObjectItem(c, "target"), 1));
        char *gts = cJSON_PrintUnformatted(gt);
        double got = -1, want = cJSON_GetObjectItem(c, "score")->valuedouble;
        CHECK_OK(vc_reward_default("searchR1_nq", sol, gts, NULL, &got));
        CHECK_MSG(got == want, "case %d (%s, %s): %g, verl %g", n, sol, gts, got, want);
        char *norm = vc_qa_normalize(sol);
        const char *wn = cJSON_GetObjectItem(c, "normalized")->valuestring;
        CHECK_MSG(norm && !strcmp(norm, wn), "case %d: normalize_answer(%s) = '%s', verl '%s'", n, sol, norm, wn);
        free(norm);
        free(gts);
        cJSON_Delete(gt);
    }
    CHECK(n >= 30);
    double s = 0;
    CHECK(vc_reward_default("searchR1_nq", "<answer>x</answer>", "{\"answer\": \"x\"}", NULL, &s) == VC_ERR_FORMAT);
    CHECK_OK(vc_reward_default("searchR1_hotpotqa", "<answer>x</answer>", "\"{\\\"target\\\": [\\\"X\\\"]}\"", NULL, &s));
    CHECK(s == 1.0);
    printf("searchR1: %d cases as verl\n", n);
    cJSON_Delete(ref);
    return vc_test_done();
}
