/* Golden test of verl's prime_math reward (the numina_* data sources) against its own Python run unchanged
 * (sympy 1.14, pylatexenc 2.11, parse_latex unavailable as in verl's environment):
 * tests/fixtures/rl/prime_math_reference.json, made by tools/fixtures/make_prime_math_ref.py. Every case must
 * agree: compute_score on answers in many forms inside typical responses, match_answer's extraction, and
 * math_equal (strings, numbers within 1e-4 and as percentages, intervals, tuples, pi as math.pi or 3.14, sympy). */
#include "verlc/core.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "reward_test_util.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/rl/prime_math_reference.json"

static void scores(const cJSON *list) {
    int n = 0, same = 0, right = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, n++) {
        double want = cJSON_GetArrayItem(c, 2)->valuedouble, got = -1, dflt = -1;
        CHECK_OK(vc_reward_prime_math(str_at(c, 0), str_at(c, 1), &got));
        CHECK_OK(vc_reward_default("numina_olympiads", str_at(c, 0), str_at(c, 1), NULL, &dflt));
        right += want == 1.0;
        same += got == want && dflt == want;
        CHECK_MSG(got == want && dflt == want, "compute_score(\"%s\", \"%s\"): %g (default %g), verl %g", str_at(c, 0),
                  str_at(c, 1), got, dflt, want);
    }
    fprintf(stderr, "prime_math compute_score: %d of %d as verl (%d correct)\n", same, n, right);
    CHECK_MSG(n >= 3000 && right >= 200, "%d cases, %d correct", n, right);
}

static void matches(const cJSON *list) {
    int n = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, n++) {
        char *got = vc_prime_math_match_answer(str_at(c, 0));
        CHECK_MSG(got && !strcmp(got, str_at(c, 1)), "match_answer(\"%s\"): \"%s\", verl \"%s\"", str_at(c, 0),
                  got ? got : "(null)", str_at(c, 1));
        free(got);
    }
    CHECK(n >= 300);
}

static void equals(const cJSON *list) {
    int n = 0, same = 0, eq = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, n++) {
        double pi = cJSON_GetArrayItem(c, 2)->valuedouble;
        int want = cJSON_GetArrayItem(c, 3)->valueint, got = vc_prime_math_equal(str_at(c, 0), str_at(c, 1), pi);
        eq += want == 1;
        same += got == (want == 1);
        CHECK_MSG(got == (want == 1), "math_equal(\"%s\", \"%s\", pi=%g): %d, verl %d", str_at(c, 0), str_at(c, 1), pi,
                  got, want);
    }
    fprintf(stderr, "math_equal: %d of %d as verl (%d equal)\n", same, n, eq);
    CHECK_MSG(n >= 1000 && eq >= 50, "%d cases, %d equal", n, eq);
}

int main(void) {
    cJSON *ref = NULL;
    vc_status st = vc_json_load_file(FIXTURE, &ref);
    CHECK_OK(st);
    if (st) return vc_test_done();
    scores(cJSON_GetObjectItem(ref, "score"));
    matches(cJSON_GetObjectItem(ref, "match"));
    equals(cJSON_GetObjectItem(ref, "equal"));
    double s = -1;
    CHECK(vc_reward_prime_math(NULL, "1", &s) == VC_ERR_ARG);
    st = vc_reward_prime_math("answer: 1", "\xc3", &s);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "ground truth is not valid UTF-8"), "invalid UTF-8: %s",
              vc_last_error());
    cJSON_Delete(ref);
    return vc_test_done();
}
