/* Built-in rewards: gsm8k, math (strip_string / is_equiv), countdown, the data_source dispatcher, and
 * gsm8k scoring of the real GSM8K answers in shared/data. */
#include "verlc/reward.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void check_extract(const char *s, int flexible, const char *want) {
    char *got = vc_gsm8k_extract(s, flexible);
    CHECK_MSG(want ? got && !strcmp(got, want) : !got, "extract(%s, %d) = %s, want %s", s, flexible,
              got ? got : "None", want ? want : "None");
    free(got);
}

static void test_gsm8k(void) {
    check_extract("so the answer is\n#### 1,234", 0, "1234");
    check_extract("#### 5 then #### -7.5", 0, "-7.5");
    check_extract("#### $5", 0, NULL);          /* '$' is not part of the strict pattern */
    check_extract("####5", 0, NULL);
    check_extract("##### 12", 0, "12");
    check_extract("#### --3", 0, NULL);
    check_extract("#### -", 0, NULL);
    check_extract("costs $1,000. Then 25 apples.", 1, "25");
    check_extract("value 3 and then .", 1, "3");
    check_extract("just . dots .", 1, ".");      /* every match invalid: Python keeps the first */
    check_extract("no numbers", 1, NULL);
    check_extract("x -5,000", 1, "-5,000");     /* flexible keeps commas */
    /* only the last 300 characters count (code points, not bytes) */
    char buf[2048];
    strcpy(buf, "#### 42 ");
    for (int i = 0; i < 299; i++) strcat(buf, "\xc3\xa9"); /* 'é' twice the bytes */
    check_extract(buf, 0, NULL);
    strcpy(buf, "#### 42");
    for (int i = 0; i < 293; i++) strcat(buf, "\xc3\xa9");
    check_extract(buf, 0, "42");
    CHECK(vc_reward_gsm8k("#### 18", "18", 0, 0.0, 1.0) == 1.0);
    CHECK(vc_reward_gsm8k("#### 17", "18", 0, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_gsm8k("18", "18", 0, 0.1, 1.0) == 0.0);
    CHECK(vc_reward_gsm8k("The answer is 18", "18", 1, 0.0, 1.0) == 1.0);
}

static void check_strip(const char *in, const char *want) {
    char *got = vc_math_strip_string(in);
    CHECK_MSG(want ? got && !strcmp(got, want) : !got, "strip_string(%s) = %s, want %s", in, got ? got : "(raise)",
              want ? want : "(raise)");
    free(got);
}

static void test_math(void) {
    char *b = vc_math_last_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}} done");
    CHECK(b && !strcmp(b, "\\boxed{\\frac{1}{2}}"));
    free(b);
    b = vc_math_last_boxed("so \\boxed 5$ and more");
    CHECK(b && !strcmp(b, "\\boxed 5"));
    free(b);
    b = vc_math_last_boxed("\\fbox{7}");
    CHECK(b && !strcmp(b, "\\fbox{7}"));
    free(b);
    CHECK(vc_math_last_boxed("\\boxed{unclosed") == NULL);
    CHECK(vc_math_last_boxed("nothing") == NULL);
    check_strip("\\dfrac{1}{2}", "\\frac{1}{2}");
    check_strip("0.5", "\\frac{1}{2}");
    check_strip(".5", "\\frac{1}{2}");
    check_strip("\\frac12", "\\frac{1}{2}");
    check_strip("\\frac1{72}", "\\frac{1}{72}");
    check_strip("\\frac{3}4", "\\frac{3}4");
    check_strip("3/4", "\\frac{3}{4}");
    check_strip("-3/4", "\\frac{-3}{4}");
    check_strip("03/4", "03/4");
    check_strip("x = 5", "5");
    check_strip("abc = 5", "abc=5");
    check_strip("\\sqrt3", "\\sqrt{3}");
    check_strip("\\left( 1, 2 \\right)", "(1,2)");
    check_strip("90^\\circ", "90");
    check_strip("10\\%", "10");
    check_strip("5 \\text{ cm}", "5");
    check_strip("5\\text{ cm} and 6\\text{ m}", NULL); /* assert len(splits) == 2 */
    check_strip("\\sqrt", NULL);                         /* split[0] of an empty piece */
    check_strip("1\\frac", NULL);
    check_strip("\\frac1", "\\frac1");                   /* too short: returned unchanged */
    check_strip("\\$1,000", "1,000");
    check_strip("", "");
    CHECK(vc_math_is_equiv("\\frac{1}{2}", "0.5"));
    CHECK(vc_math_is_equiv("\\sqrt", "\\sqrt"));          /* raises: raw comparison */
    CHECK(!vc_math_is_equiv("\\sqrt", "\\sqrt "));
    CHECK(vc_reward_math("The answer is $\\boxed{\\dfrac{1}{2}}$.", "\\frac12") == 1.0);
    CHECK(vc_reward_math("The answer is $\\boxed{3}$.", "4") == 0.0);
    CHECK(vc_reward_math("\\fbox{3}", "3") == 0.0); /* remove_boxed asserts on \fbox */
    CHECK(vc_reward_math("no box 3", "3") == 0.0);
}

static void test_countdown(void) {
    double v;
    CHECK_OK(vc_arith_eval("(3 + 5) * 2 - 4 / 2", &v));
    CHECK_NEAR(v, 14.0, 1e-12);
    CHECK_OK(vc_arith_eval("-2**2", &v));
    CHECK_NEAR(v, -4.0, 1e-12);
    CHECK_OK(vc_arith_eval("2**-1 + 7//2", &v));
    CHECK_NEAR(v, 3.5, 1e-12);
    CHECK_OK(vc_arith_eval("2**3**2", &v));
    CHECK_NEAR(v, 512.0, 1e-9);
    CHECK_OK(vc_arith_eval("-7//2", &v));
    CHECK_NEAR(v, -4.0, 1e-12);
    CHECK(vc_arith_eval("1/0", &v) == VC_ERR_NUMERIC);
    CHECK(vc_arith_eval("1/(3-3)", &v) == VC_ERR_NUMERIC);
    CHECK(vc_arith_eval("05 + 1", &v) == VC_ERR_FORMAT);
    CHECK_OK(vc_arith_eval("00 + 1.5 + .5 + 1.", &v));
    CHECK_NEAR(v, 3.0, 1e-12);
    CHECK(vc_arith_eval("(1 + 2", &v) == VC_ERR_FORMAT);
    CHECK(vc_arith_eval("1 2", &v) == VC_ERR_FORMAT);
    CHECK(vc_arith_eval("1.2.3", &v) == VC_ERR_FORMAT);
    CHECK(vc_arith_eval("import os", &v) == VC_ERR_FORMAT);
    CHECK(vc_arith_eval("2 ** x", &v) == VC_ERR_FORMAT);
    CHECK(vc_arith_eval("()", &v) == VC_ERR_FORMAT);
    double nums[3] = { 93, 43, 1 };
    CHECK(vc_reward_countdown("<think>..</think>\n<answer>(93-43)+1</answer>", 51, nums, 3, 0.1, 1.0) == 1.0);
    CHECK(vc_reward_countdown("<answer>93-43+1</answer> <answer>93-43</answer>", 51, nums, 3, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer>93+43-1</answer>", 51, nums, 3, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer>(93-43)+1\n</answer>", 51, nums, 3, 0.1, 1.0) == 0.0); /* last line only */
    CHECK(vc_reward_countdown("no answer", 51, nums, 3, 0.1, 1.0) == 0.0);
    CHECK(vc_reward_countdown("<answer>93-43+1+1</answer>", 52, nums, 3, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer> 93 - 43 + 1 = 51 </answer>", 51, nums, 3, 0.1, 1.0) == 0.1);
    double d[4] = { 4, 4, 6, 1 };
    CHECK(vc_reward_countdown("<answer>6/(1-4/4)</answer>", 24, d, 4, 0.1, 1.0) == 0.1); /* division by zero */
    CHECK(vc_reward_countdown("<answer>(4+4)*(6/1)/2</answer>", 24, d, 4, 0.1, 1.0) == 0.1); /* extra 2 */
    CHECK(vc_reward_countdown("<answer>4*6*(4/4)*1</answer>", 24, d, 4, 0.1, 1.0) == 0.1);   /* 4 used thrice */
    CHECK(vc_reward_countdown("<answer>(4*6)*(4-1)/(4-1)</answer>", 24, d, 4, 0.1, 1.0) == 0.1);
    double d2[4] = { 4, 4, 6, 1 };
    CHECK(vc_reward_countdown("<answer>4 * 6 * 1 + 4 - 4</answer>", 24, d2, 4, 0.1, 1.0) == 0.1); /* 5 numbers */
    CHECK(vc_reward_countdown("<answer>(4 + 4) * 6 / (1 + 1)</answer>", 24, d2, 4, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer>(6 - 4) * 4 * 1 * 3</answer>", 24, d2, 4, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer>6 * 4 * (4 - 1) / 3</answer>", 24, d2, 4, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer>6 * 4 / (4 / 4)</answer>", 24, d2, 4, 0.1, 1.0) == 0.1);
    CHECK(vc_reward_countdown("<answer>(4 + 4) * (6 - 1)</answer>", 40, d2, 4, 0.1, 1.0) == 1.0);
}

static void test_dispatch(void) {
    double s = -1;
    CHECK_OK(vc_reward_default("openai/gsm8k", "... #### 72", "72", NULL, &s));
    CHECK(s == 1.0);
    CHECK_OK(vc_reward_default("openai/gsm8k", "... #### 72", "\"72\"", "{\"split\":\"train\"}", &s));
    CHECK(s == 1.0);
    CHECK_OK(vc_reward_default("lighteval/MATH", "\\boxed{\\frac{2}{4}}", "\\frac{2}{4}", NULL, &s));
    CHECK(s == 1.0);
    CHECK_OK(vc_reward_default("DigitalLearningGmbH/MATH-lvl5", "\\boxed{3}", "\"3\"", NULL, &s));
    CHECK(s == 1.0);
    CHECK_OK(vc_reward_default("countdown", "<answer>(93-43)+1</answer>", "{\"target\": 51, \"numbers\": [93, 43, 1]}", NULL, &s));
    CHECK(s == 1.0);
    CHECK(vc_reward_default("countdown", "<answer>1</answer>", "51", NULL, &s) == VC_ERR_FORMAT);
    CHECK(vc_reward_default("my/dataset", "x", "y", NULL, &s) == VC_ERR_UNSUPPORTED);
    CHECK(strstr(vc_last_error(), "my/dataset") != NULL);
}

/* Every GSM8K test answer ends with "#### <answer>": strict extraction must recover it. */
static void test_gsm8k_data(void) {
    char path[512], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/data/gsm8k/test.jsonl", vc_test_shared());
    if (vc_read_file(path, &text, &len)) { printf("skipping GSM8K data: %s\n", vc_last_error()); return; }
    int rows = 0, ok = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        cJSON *a = cJSON_GetObjectItem(j, "answer");
        if (cJSON_IsString(a)) {
            const char *gt = strstr(a->valuestring, "#### ");
            char *want = gt ? strdup(gt + 5) : NULL;
            if (want) { /* verl's data preprocessing removes commas from the ground truth */
                char *w = want;
                for (char *r = want; *r; r++) if (*r != ',') *w++ = *r;
                *w = 0;
            }
            rows++;
            ok += want && vc_reward_gsm8k(a->valuestring, want, 0, 0.0, 1.0) == 1.0;
            free(want);
        }
        cJSON_Delete(j);
    }
    free(text);
    printf("gsm8k: %d/%d reference answers score 1.0\n", ok, rows);
    CHECK(rows > 1000 && ok == rows);
}

int main(void) {
    test_gsm8k();
    test_math();
    test_countdown();
    test_dispatch();
    test_gsm8k_data();
    return vc_test_done();
}
