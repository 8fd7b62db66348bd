/* JSON helpers: positioned syntax errors, typed getters with defaults and key-naming errors. */
#include <math.h>
#include "io_helpers.h"
#include "verlc/data.h"
#include "vc_test.h"
#include "verlc/json.h"

/* vc_json_text_set: (key, value or NULL) applied to text gives want */
static void edit_case(const char *text, const char *key, const char *value, const char *want) {
    char *t = vc_strdup(text);
    CHECK_OK(vc_json_text_set(&t, key, value));
    cJSON *j = cJSON_Parse(t);
    CHECK_MSG(t && !strcmp(t, want) && j, "set %s in %s: got %s, want %s", key, text, t ? t : "(null)", want);
    cJSON_Delete(j);
    free(t);
}

static void test_text_set(void) {
    const char *cfg = "{\n  \"a\": 7.0,\n  \"q\": {\"m\": [1, {\"x\": \"}\"}], \"s\": \"a,b\\\"\"},\n  \"dtype\": \"float32\"\n}\n";
    edit_case(cfg, "dtype", "\"bfloat16\"", "{\n  \"a\": 7.0,\n  \"q\": {\"m\": [1, {\"x\": \"}\"}], \"s\": \"a,b\\\"\"},\n  \"dtype\": \"bfloat16\"\n}\n");
    edit_case(cfg, "q", NULL, "{\n  \"a\": 7.0,\n  \"dtype\": \"float32\"\n}\n");
    edit_case(cfg, "dtype", NULL, "{\n  \"a\": 7.0,\n  \"q\": {\"m\": [1, {\"x\": \"}\"}], \"s\": \"a,b\\\"\"}\n}\n");
    edit_case(cfg, "m", NULL, cfg); /* only top-level members */
    edit_case(cfg, "new", "1.0", "{\n  \"new\": 1.0,\n  \"a\": 7.0,\n  \"q\": {\"m\": [1, {\"x\": \"}\"}], \"s\": \"a,b\\\"\"},\n  \"dtype\": \"float32\"\n}\n");
    edit_case("{}", "k", "2", "{\n  \"k\": 2}");
    edit_case("{\"only\": 1}", "only", NULL, "{}");
    char *bad = vc_strdup("[1, 2]");
    CHECK(vc_json_text_set(&bad, "k", "1") == VC_ERR_FORMAT);
    free(bad);
}

/* Python's json writes infinities as Infinity (transformers' configs): read as such outside strings, kept inside */
static void test_infinity(void) {
    const char *t = "{\"lim\": [0.0, Infinity], \"neg\": -Infinity, \"s\": \"Infinity \\\" Infinity\"}";
    cJSON *j = NULL;
    CHECK_OK(vc_json_parse(t, strlen(t), "inf.json", &j));
    const cJSON *lim = j ? cJSON_GetObjectItem(j, "lim") : NULL, *neg = j ? cJSON_GetObjectItem(j, "neg") : NULL;
    const cJSON *str = j ? cJSON_GetObjectItem(j, "s") : NULL;
    CHECK(lim && isinf(cJSON_GetArrayItem(lim, 1)->valuedouble) && cJSON_GetArrayItem(lim, 1)->valuedouble > 0);
    CHECK(neg && isinf(neg->valuedouble) && neg->valuedouble < 0);
    CHECK(cJSON_IsString(str) && !strcmp(str->valuestring, "Infinity \" Infinity"));
    cJSON_Delete(j);
    const char *bad = "{\"x\": NaN}";
    CHECK(vc_json_parse(bad, strlen(bad), "nan.json", &j) == VC_ERR_FORMAT);
}

/* json.loads' reading of what cJSON keeps otherwise (found against Python with tools/fuzz/diff_tools.py and
 * diff_chat.py): a repeated key's last value at the first key's place, at any depth; each number's token (3.0 a float,
 * an int past 2^53 whole) */
static void test_python_reading(void) {
    const char *t = "{\"a\": 1, \"b\": {\"x\": 1, \"y\": 2, \"x\": 3, \"x\": 4.0}, \"a\": [{\"k\": 1, \"k\": 2}], "
                    "\"c\": 9007199254740993, \"d\": -0.0}";
    cJSON *j = NULL;
    CHECK_OK(vc_json_parse(t, strlen(t), "t", &j));
    vc_json_py_keys(j);
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    CHECK_MSG(s && !strcmp(s, "{\"a\":[{\"k\":2}],\"b\":{\"x\":4,\"y\":2},\"c\":9.00719925474099e+15,\"d\":-0}"), "keys: %s", s);
    const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "b"), "x"), *c = cJSON_GetObjectItem(j, "c");
    const cJSON *y = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "b"), "y");
    CHECK(x && x->valuestring && !strcmp(x->valuestring, "4.0") && vc_json_number_is_float(x));
    CHECK(y && !vc_json_number_is_float(y) && vc_json_number_is_float(cJSON_GetObjectItem(j, "d")));
    CHECK(c && c->valuestring && !strcmp(c->valuestring, "9007199254740993") && !vc_json_number_is_float(c));
    free(s);
    cJSON_Delete(j);
    vc_jsonl *d = NULL; /* a dataset row likewise */
    const char *row = "{\"prompt\": \"first\", \"n\": 1, \"prompt\": \"last\"}";
    CHECK_OK(vc_jsonl_parse("rows.jsonl", row, strlen(row), 0, &d));
    const cJSON *p = d && d->n_rows ? cJSON_GetObjectItem(d->rows[0], "prompt") : NULL;
    CHECK(p && cJSON_IsString(p) && !strcmp(p->valuestring, "last") && d->rows[0]->child == p);
    vc_jsonl_free(d);
}

/* vc_json_print writes numbers as json.dumps writes what json.loads read: cJSON's own printing turned 556926.4760330019
 * into 556926.476033002 (its 15-digit form passed a one-epsilon check), which reads back as another double */
static void test_exact_print(void) {
    const char *text = "{\"a\":556926.4760330019,\"b\":1.0,\"c\":12345678901234567890,\"d\":[0.1,-0.0,1e300,1.50],\"e\":3}";
    cJSON *j = NULL;
    CHECK_OK(vc_json_parse(text, strlen(text), "t", &j));
    char *s = vc_json_print(j, 0);
    CHECK_MSG(s && !strcmp(s, "{\"a\":556926.4760330019,\"b\":1.0,\"c\":12345678901234567890,\"d\":[0.1,-0.0,1e+300,1.5],\"e\":3}"),
              "printed %s", s ? s : "(null)");
    cJSON *back = s ? cJSON_Parse(s) : NULL;
    CHECK(back && cJSON_GetObjectItem(back, "a")->valuedouble == 556926.4760330019);
    free(s);
    cJSON_Delete(back);
    cJSON_Delete(j);
    /* numbers made in C: integral ones as digits, others by their shortest round-trip digits; non-finite as null */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", 12);
    cJSON_AddNumberToObject(o, "kl", 556926.4760330019);
    cJSON_AddNumberToObject(o, "x", 0.1 + 0.2);
    cJSON_AddNumberToObject(o, "inf", INFINITY);
    s = vc_json_print(o, 0);
    CHECK_MSG(s && !strcmp(s, "{\"step\":12,\"kl\":556926.4760330019,\"x\":0.30000000000000004,\"inf\":null}"), "printed %s",
              s ? s : "(null)");
    free(s);
    s = cJSON_PrintUnformatted(o);  /* (what cJSON alone writes: the last bit lost) */
    CHECK(s && strstr(s, "556926.476033002,"));
    free(s);
    cJSON_Delete(o);
}

int main(void) {
    test_exact_print();
    test_python_reading();
    test_text_set();
    test_infinity();
    char *T = tmp_dir();
    char *p = join2(T, "c.json");
    const char *txt = "{\n  \"a\": 3,\n  \"b\": 2.5,\n  \"s\": \"x\",\n  \"t\": true,\n  \"n\": null,\n  \"big\": 1e300\n}\n";
    CHECK(write_bytes(p, txt, strlen(txt)) == 0);
    cJSON *j = NULL;
    CHECK_OK(vc_json_load_file(p, &j));
    int64_t i = 0;
    double d = 0;
    int b = 0;
    const char *s = NULL;
    CHECK_OK(vc_json_get_int(j, "a", 7, &i, p));
    CHECK(i == 3);
    CHECK_OK(vc_json_get_int(j, "zz", 7, &i, p));
    CHECK(i == 7);
    CHECK_OK(vc_json_get_int(j, "n", 8, &i, p));
    CHECK(i == 8); /* null counts as absent */
    CHECK(vc_json_get_int(j, "b", 0, &i, p) == VC_ERR_FORMAT && strstr(vc_last_error(), "'b'"));
    CHECK(vc_json_get_int(j, "big", 0, &i, p) == VC_ERR_FORMAT);
    CHECK(vc_json_get_int(j, "s", 0, &i, p) == VC_ERR_FORMAT && strstr(vc_last_error(), p) &&
          strstr(vc_last_error(), "got string"));
    CHECK_OK(vc_json_get_num(j, "a", 0, &d, p));
    CHECK(d == 3.0);
    CHECK_OK(vc_json_get_num(j, "b", 0, &d, p));
    CHECK(d == 2.5);
    CHECK(vc_json_get_num(j, "t", 0, &d, p) == VC_ERR_FORMAT && strstr(vc_last_error(), "'t'"));
    CHECK_OK(vc_json_get_bool(j, "t", 0, &b, p));
    CHECK(b == 1);
    CHECK(vc_json_get_bool(j, "a", 0, &b, p) == VC_ERR_FORMAT);
    CHECK_OK(vc_json_get_str(j, "s", "d", &s, p));
    CHECK(s && !strcmp(s, "x"));
    CHECK_OK(vc_json_get_str(j, "q", "d", &s, p));
    CHECK(s && !strcmp(s, "d"));
    CHECK(vc_json_req_str(j, "q", &s, p) == VC_ERR_MISSING && strstr(vc_last_error(), "'q'"));
    CHECK(vc_json_req_num(j, "n", &d, p) == VC_ERR_MISSING);
    CHECK(vc_json_req_int(j, "s", &i, p) == VC_ERR_FORMAT);
    CHECK_OK(vc_json_req_int(j, "a", &i, p));
    CHECK(vc_json_member(j, "n") == NULL && vc_json_member(j, "a") != NULL);
    { /* a repeated key: its last value, as Python's json.loads (transformers reads config.json so) */
        cJSON *d = cJSON_Parse("{\"k\": 1, \"x\": 0, \"k\": 7}");
        int64_t k = 0;
        CHECK_OK(vc_json_get_int(d, "k", 0, &k, "dup"));
        CHECK(k == 7);
        cJSON_Delete(d);
    }
    cJSON_Delete(j);
    /* syntax errors name the file, the byte offset, line and column */
    const char *bad = "{\n  \"a\": 3,\n  \"b\": tru\n}";
    CHECK(write_bytes(p, bad, strlen(bad)) == 0);
    CHECK(vc_json_load_file(p, &j) == VC_ERR_FORMAT && j == NULL);
    CHECK(strstr(vc_last_error(), p) && strstr(vc_last_error(), "byte 19") && strstr(vc_last_error(), "line 3"));
    CHECK(vc_json_parse("{} x", 4, "inline", &j) == VC_ERR_FORMAT && strstr(vc_last_error(), "inline"));
    CHECK_OK(vc_json_parse("[1] \n", 5, "inline", &j));
    cJSON_Delete(j);
    CHECK(vc_json_parse("", 0, "empty", &j) == VC_ERR_FORMAT);
    char *missing = join2(T, "nope.json");
    CHECK(vc_json_load_file(missing, &j) == VC_ERR_IO && strstr(vc_last_error(), missing));
    free(missing);
    rm_tree(T);
    free(p);
    free(T);
    return vc_test_done();
}
