#include "verlc/core.h"
#include "verlc/data.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <unistd.h>

static void test_diagnose(void) {
    char msg[128];
    { const char *ok = "{\"a\": [1, 2.5e-3, true, null, \"x\\u00e9\"]}"; CHECK(vc_json_diagnose(ok, strlen(ok), 0, msg, sizeof msg)); }
    { const char *ok = "{\"a\": \"\\\\u0000\"}"; CHECK(vc_json_diagnose(ok, strlen(ok), 0, msg, sizeof msg)); } /* a backslash, then u0000 */
    const char *bad = "{\"question\": \"a\" \"answer\": 1}";
    CHECK(!vc_json_diagnose(bad, strlen(bad), 0, msg, sizeof msg));
    CHECK_MSG(!strcmp(msg, "expected ',' or '}' at column 18"), "%s", msg);
    /* columns count characters, not bytes */
    const char *utf = "{\"q\": \"\xc3\xa9\xc3\xa9\" x}";
    CHECK(!vc_json_diagnose(utf, strlen(utf), 0, msg, sizeof msg));
    CHECK_MSG(!strcmp(msg, "expected ',' or '}' at column 12"), "%s", msg);
    struct { const char *s, *want; } cases[] = {
        { "{\"a\" 1}", "expected ':' at column 6" },
        { "{\"a\": }", "expected value at column 7" },
        { "{\"a\": [1, 2}", "expected ',' or ']' at column 12" },
        { "{\"a\": \"x", "unterminated string at column 9" },
        { "{\"a\": 01}", "leading zero in number at column 8" },
        { "{\"a\": \"\\q\"}", "invalid escape in string at column 9" },
        { "{a: 1}", "expected string key at column 2" },
        { "{} x", "unexpected text after the value at column 4" },
        { "{\"a\": NaN}", "expected value at column 7" },
        { "{\"a\": tru}", "invalid literal at column 7" },
        { "{\"a\": \"\xff\"}", "invalid UTF-8 in string at column 8" },
        { "{\"a\": 1.}", "expected digit after '.' at column 9" },
        /* a NUL would end cJSON's string there (the rest of a prompt silently gone): refused by name */
        { "{\"a\": \"x\\u0000y\"}", "a string holding U+0000 (\\u0000), which verlc cannot keep, at column 11" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ok = vc_json_diagnose(cases[i].s, strlen(cases[i].s), 0, msg, sizeof msg);
        CHECK_MSG(!ok && !strcmp(msg, cases[i].want), "case %zu: '%s' (want '%s')", i, msg, cases[i].want);
    }
    CHECK(vc_json_diagnose("{\"a\": NaN, \"b\": -Infinity}", 26, 1, msg, sizeof msg));
    char deep[2000];
    memset(deep, '[', 1000);
    memset(deep + 1000, ']', 1000);
    CHECK(!vc_json_diagnose(deep, 2000, 0, msg, sizeof msg)); /* nesting limit, no stack overflow */
}

static const char *TEXT =
    "{\"data_source\": \"s\", \"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], \"ability\": \"math\", "
    "\"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"72\"}, \"extra_info\": {\"index\": 0}}\r\n"
    "\n"
    "   \n"
    "{\"data_source\": \"s\", \"prompt\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", "
    "\"content\": \"x\"}], \"reward_model\": {\"ground_truth\": 3.5}}\n"
    "{\"data_source\": \"s\", \"prompt\": [{\"role\": \"user\", \"content\": \"y\"}] \"reward_model\": {}}\n"
    "[1, 2]\n"
    "{\"data_source\": \"s\", \"prompt\": [{\"role\": \"user\", \"content\": \"z\"}], \"reward_model\": {\"style\": \"rule\"}}";

static void test_read(void) {
    vc_jsonl *d = NULL;
    CHECK(vc_jsonl_parse("train.jsonl", TEXT, strlen(TEXT), VC_JSONL_STRICT, &d) == VC_ERR_FORMAT);
    CHECK(d == NULL);
    CHECK_MSG(!strcmp(vc_last_error(), "train.jsonl:5: expected ',' or '}' at column 67"), "%s", vc_last_error());

    CHECK_OK(vc_jsonl_parse("train.jsonl", TEXT, strlen(TEXT), VC_JSONL_SKIP_BAD, &d));
    if (!d) return;
    CHECK(d->n_rows == 3);
    CHECK(d->n_skipped == 2);
    CHECK(d->n_bad == 2 && d->bad[0].line == 5 && d->bad[1].line == 6);
    CHECK(d->n_bad == 2 && !strcmp(d->bad[1].message, "train.jsonl:6: row is not a JSON object"));
    CHECK(d->lines[0] == 1 && d->lines[1] == 4 && d->lines[2] == 7);

    vc_verl_row row;
    CHECK_OK(vc_verl_row_get(d, 0, &row));
    CHECK(!strcmp(row.data_source, "s") && row.n_prompt == 1 && !strcmp(row.prompt[0].content, "hi"));
    CHECK(!strcmp(row.ability, "math") && !strcmp(row.reward_style, "rule") && !strcmp(row.ground_truth, "72"));
    CHECK(row.extra_info && cJSON_GetObjectItem(row.extra_info, "index")->valueint == 0);
    vc_verl_row_clear(&row);
    CHECK_OK(vc_verl_row_get(d, 1, &row));
    CHECK(row.n_prompt == 2 && !strcmp(row.prompt[0].role, "system") && !strcmp(row.prompt[1].content, "x"));
    CHECK(row.ability == NULL && row.reward_style == NULL && row.extra_info == NULL);
    CHECK(row.ground_truth && !strcmp(row.ground_truth, "3.5"));
    vc_verl_row_clear(&row);
    CHECK_OK(vc_verl_row_get(d, 2, &row));
    CHECK(row.ground_truth == NULL);
    vc_verl_row_clear(&row);

    CHECK(vc_verl_check(d, 1) == VC_ERR_MISSING);
    CHECK_MSG(!strcmp(vc_last_error(), "train.jsonl:7: missing field reward_model.ground_truth"), "%s", vc_last_error());
    CHECK_OK(vc_verl_check(d, 0));
    const char *s;
    CHECK(vc_jsonl_string(d, 1, "reward_model.style", &s) == VC_ERR_MISSING);
    CHECK(strstr(vc_last_error(), "train.jsonl:4: missing field reward_model.style") != NULL);
    CHECK(vc_jsonl_string(d, 1, "reward_model.ground_truth", &s) == VC_ERR_FORMAT);
    CHECK_OK(vc_jsonl_string(d, 0, "extra_info", &s) == VC_ERR_FORMAT ? VC_OK : VC_ERR_INTERNAL);
    vc_jsonl_free(d);

    /* rows that break the schema */
    const char *bad_prompt = "{\"data_source\": \"s\", \"prompt\": [{\"role\": \"user\"}]}\n";
    CHECK_OK(vc_jsonl_parse("p.jsonl", bad_prompt, strlen(bad_prompt), 0, &d));
    CHECK(vc_verl_row_get(d, 0, &row) == VC_ERR_MISSING);
    CHECK(strstr(vc_last_error(), "p.jsonl:1: missing field prompt[0].content") != NULL);
    vc_jsonl_free(d);
    /* present with the wrong type is a format error naming the type, not "missing" (found by fuzzing) */
    const char *typed = "{\"data_source\": \"s\", \"prompt\": [{\"role\": \"user\", \"content\": 5}]}\n"
                        "{\"data_source\": \"s\", \"prompt\": [\"hi\"]}\n";
    CHECK_OK(vc_jsonl_parse("p.jsonl", typed, strlen(typed), 0, &d));
    CHECK(vc_verl_row_get(d, 0, &row) == VC_ERR_FORMAT);
    CHECK(strstr(vc_last_error(), "p.jsonl:1: prompt[0].content must be a string, got number") != NULL);
    vc_verl_row_clear(&row);
    CHECK(vc_verl_row_get(d, 1, &row) == VC_ERR_FORMAT);
    CHECK(strstr(vc_last_error(), "p.jsonl:2: prompt[0] must be a {role, content} object, got string") != NULL);
    vc_verl_row_clear(&row);
    vc_jsonl_free(d);
    const char *no_source = "{\"prompt\": []}";
    CHECK_OK(vc_jsonl_parse("p.jsonl", no_source, strlen(no_source), 0, &d));
    CHECK(vc_verl_row_get(d, 0, &row) == VC_ERR_MISSING && strstr(vc_last_error(), "missing field data_source"));
    vc_jsonl_free(d);

    /* NaN tolerance (metrics written by Python) */
    const char *nan = "{\"step\": 1, \"x\": NaN, \"y\": -Infinity, \"s\": \"NaN\"}";
    CHECK(vc_jsonl_parse("m.jsonl", nan, strlen(nan), 0, &d) == VC_ERR_FORMAT);
    CHECK_OK(vc_jsonl_parse("m.jsonl", nan, strlen(nan), VC_JSONL_NONFINITE_AS_NULL, &d));
    if (d) {
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(d->rows[0], "x")) && cJSON_IsNull(cJSON_GetObjectItem(d->rows[0], "y")));
        CHECK(!strcmp(cJSON_GetObjectItem(d->rows[0], "s")->valuestring, "NaN"));
        vc_jsonl_free(d);
    }
    /* BOM and empty input */
    CHECK_OK(vc_jsonl_parse("e.jsonl", "", 0, 0, &d));
    CHECK(d && d->n_rows == 0);
    vc_jsonl_free(d);
    CHECK_OK(vc_jsonl_parse("b.jsonl", "\xEF\xBB\xBF{\"a\":1}", 10, 0, &d));
    CHECK(d && d->n_rows == 1);
    vc_jsonl_free(d);
}

static void test_file(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/data/gsm8k/train.jsonl", vc_test_shared());
    vc_jsonl *d = NULL;
    CHECK_OK(vc_jsonl_read(path, VC_JSONL_STRICT, &d));
    CHECK(d && d->n_rows == 7473);
    vc_jsonl_free(d);
    CHECK(vc_jsonl_read("/nonexistent/x.jsonl", 0, &d) == VC_ERR_IO);
    CHECK(strstr(vc_last_error(), "/nonexistent/x.jsonl") != NULL);
    /* many bad lines: the count is exact, messages are capped */
    char tmp[] = "/tmp/vc_jsonl_XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 200; i++) fprintf(f, i % 2 ? "{\"i\": %d}\n" : "{\"i\": %d,}\n", i);
    fclose(f);
    CHECK_OK(vc_jsonl_read(tmp, VC_JSONL_SKIP_BAD, &d));
    CHECK(d && d->n_rows == 100 && d->n_skipped == 100 && d->n_bad == VC_JSONL_MAX_BAD);
    CHECK(d && d->n_bad && strstr(d->bad[0].message, ":1: expected string key at column 9") != NULL);
    vc_jsonl_free(d);
    /* "~/x" as verl's datasets read it: the home directory's x (tmp is /tmp/...: HOME=/tmp finds it) */
    const char *home = getenv("HOME");
    char *saved = home ? strdup(home) : NULL, tilde[64];
    setenv("HOME", "/tmp", 1);
    snprintf(tilde, sizeof tilde, "~/%s", tmp + 5);
    CHECK_OK(vc_jsonl_read(tilde, VC_JSONL_SKIP_BAD, &d));
    CHECK(d && d->n_rows == 100);
    vc_jsonl_free(d);
    CHECK(vc_jsonl_read("~/no_such_verlc_file.jsonl", 0, &d) == VC_ERR_IO && strstr(vc_last_error(), "~/no_such"));
    if (saved) setenv("HOME", saved, 1);
    free(saved);
    unlink(tmp);
}

int main(void) {
    test_diagnose();
    test_read();
    test_file();
    return vc_test_done();
}
