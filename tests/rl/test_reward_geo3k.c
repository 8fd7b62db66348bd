/* Golden test of verl's hiyouga/geometry3k reward (geo3k.compute_score) and of mathruler 0.1.0's
 * grade_answer / extract_boxed_content behind it, against their own Python run unchanged (sympy 1.14,
 * pylatexenc 2.11): tests/fixtures/rl/geo3k_reference.json, made by tools/fixtures/make_geo3k_ref.py. Every
 * case must agree: geometry3k-style ground truths crossed with the forms models answer in (decimals, other
 * LaTeX, units, degrees, text, tuples) and random radical / fraction / pi expressions with equal and unequal
 * rewrites; the boxed-content extraction; the format bonus. Then the scorer through default_compute_score. */
#include "verlc/core.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "reward_test_util.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/rl/geo3k_reference.json"

static void grades(const cJSON *list) {
    int n = 0, same = 0, equal = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, n++) {
        const char *given = str_at(c, 0), *gt = str_at(c, 1);
        int want = cJSON_GetArrayItem(c, 2)->valueint, got = vc_mathruler_grade(given, gt);
        equal += want;
        same += got == want;
        CHECK_MSG(got == want, "grade_answer(\"%s\", \"%s\"): %d, mathruler %d", given, gt, got, want);
    }
    fprintf(stderr, "grade_answer: %d of %d as mathruler (%d equal pairs)\n", same, n, equal);
    CHECK_MSG(n >= 5000 && equal >= 300, "%d cases ran, %d equal", n, equal);
}

static void boxed(const cJSON *list) {
    int n = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, n++) {
        char *got = vc_mathruler_boxed(str_at(c, 0));
        CHECK_MSG(got && !strcmp(got, str_at(c, 1)), "extract_boxed_content(\"%s\"): \"%s\", mathruler \"%s\"",
                  str_at(c, 0), got ? got : "(null)", str_at(c, 1));
        free(got);
    }
    CHECK(n >= 10);
}

static void scores(const cJSON *list) {
    int n = 0, same = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, n++) {
        double want = cJSON_GetArrayItem(c, 2)->valuedouble, got = -1, dflt = -1;
        CHECK_OK(vc_reward_geo3k(str_at(c, 0), str_at(c, 1), &got));
        CHECK_OK(vc_reward_default("hiyouga/geometry3k", str_at(c, 0), str_at(c, 1), NULL, &dflt));
        same += got == want && dflt == want;
        CHECK_MSG(got == want && dflt == want, "compute_score(\"%s\", \"%s\"): %.17g (default %.17g), verl %.17g",
                  str_at(c, 0), str_at(c, 1), got, dflt, want);
    }
    fprintf(stderr, "geo3k compute_score: %d of %d as verl\n", same, n);
    CHECK(n >= 500);
}

/* grading that the fixture's forms do not reach: exact and float rules of sympy, tuples, bad input */
static void direct(void) {
    CHECK(vc_mathruler_grade("\\frac{1}{3}", "0.333333333333333") == 0);   /* a Float is not 1/3 */
    CHECK(vc_mathruler_grade("0.1+0.2", "0.3") == 0);                      /* 53-bit Floats, as sympy */
    CHECK(vc_mathruler_grade("1.5x", "\\frac{3x}{2}") == 1);               /* Float coefficient cancels */
    CHECK(vc_mathruler_grade("\\frac{x^2-1}{x-1}", "x+1") == 0);           /* "x^2-1/x-1": \\frac without parentheses */
    CHECK(vc_mathruler_grade("(x^2-1)/(x-1)", "x+1") == 1);                /* simplify cancels */
    CHECK(vc_mathruler_grade("\\sqrt{x^2}", "x") == 0);                    /* complex symbols */
    CHECK(vc_mathruler_grade("2\\pi\\sqrt{3}", "2\\sqrt{3}\\pi") == 0);    /* "pisqrt" splits into letters */
    CHECK(vc_mathruler_grade("(x+1)^2", "x^2+2x+1") == 1);
    CHECK(vc_mathruler_grade("x^(2)", "x^2") == 0);                        /* "^(" is never evaluated */
    CHECK(vc_mathruler_grade("x**2+2x+1", "(x+1)**2") == 1);
    CHECK(vc_mathruler_grade("abc", "cba") == 0);                          /* three letters: not evaluated */
    CHECK(vc_mathruler_grade(NULL, "1") == 0);
    double s = -1;
    CHECK(vc_reward_geo3k(NULL, "1", &s) == VC_ERR_ARG);
    vc_status st = vc_reward_geo3k("\\boxed{\xff}", "1", &s);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "solution is not valid UTF-8"), "invalid UTF-8: %s",
              vc_last_error());
}

int main(void) {
    cJSON *ref = NULL;
    vc_status st = vc_json_load_file(FIXTURE, &ref);
    CHECK_OK(st);
    if (st) return vc_test_done();
    grades(cJSON_GetObjectItem(ref, "grade"));
    boxed(cJSON_GetObjectItem(ref, "boxed"));
    scores(cJSON_GetObjectItem(ref, "score"));
    direct();
    cJSON_Delete(ref);
    return vc_test_done();
}
