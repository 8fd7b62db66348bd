/* verl's Sandbox Fusion reward (verl/utils/reward_score/sandbox_fusion at b178a3cd): the completion's code is run by a
 * Sandbox Fusion service (https://github.com/bytedance/SandboxFusion, its /run_code API) on each test case, through
 * libcurl (http_batch.c), and each case is judged as verl judges the service's answer:
 *   - the request: {"compile_timeout", "run_timeout", "code", "stdin", "memory_limit_MB", "language": "python",
 *     "files": {}, "fetch_files": []}; a 504 answer is retried twice after 1 and 2 s, any other failure fails
 *     the case;
 *   - "Success" with the run "Finished": the stdout, trailing newlines stripped, against str(expected output)
 *     (a case whose expected output is null passes);
 *   - "Failed": a compile error (and every later case with it), a runtime error or a time-out; anything else an
 *     error. Only passes count.
 * With "fn_name" the code is wrapped in a harness (written for verlc, doing what verl's does): the standard
 * modules verl's harness star-imports, the function (or Solution().fn_name) called on the arguments read as one
 * JSON value per stdin line, its result printed as JSON (dict, list, tuple, None, bool) or with str(). With
 * "assert_case" each case's assertion is appended to the code. The score is verl's continuous one: the pass
 * rate of the first 10 cases (only those are run: the rest never count). */
#include "sandbox.h"
#include "verlc/json.h"
#include "http_batch.h"
#include "py_text.h"
#include "reward_str.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define FIRST_CASES 10 /* continuous=True scores the first 10 cases */

int vc_sandbox_source(const char *ds) {
    static const char *const S[] = { "codecontests", "apps", "codeforces", "taco" };
    for (size_t i = 0; ds && i < sizeof S / sizeof S[0]; i++)
        if (!strcmp(ds, S[i])) return 1;
    return 0;
}

/* Python's str.strip().isalpha() of s[0..n) */
static int py_stripped_isalpha(const char *s, size_t n) {
    pt_span t = pt_strip((pt_span){ s, n });
    utf8proc_ssize_t i = 0, len = (utf8proc_ssize_t)t.n;
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const uint8_t *)t.p + i, len - i, &c);
        if (k <= 0) return 0;
        i += k;
        utf8proc_category_t cat = utf8proc_category(c);
        if (!(cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
              cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO))
            return 0;
    }
    return len > 0;
}


char *vc_sandbox_code(const char *c) {
    const char *py = NULL, *q;
    for (q = strstr(c, "```python"); q; q = strstr(q + 1, "```python")) py = q; /* split(...)[-1] */
    if (py) {
        py += 9;
        const char *end = strstr(py, "```");
        return vc_rs_ndup(py, end ? (size_t)(end - py) : strlen(py));
    }
    const char *a = strstr(c, "```");
    if (!a) return NULL;
    a += 3;
    const char *end = strstr(a, "```"), *nl = strchr(a, '\n');
    size_t n = end ? (size_t)(end - a) : strlen(a);
    if (nl && (size_t)(nl - a) < n && py_stripped_isalpha(a, (size_t)(nl - a))) /* a language name line */
        return vc_rs_ndup(nl + 1, n - (size_t)(nl + 1 - a));
    return vc_rs_ndup(a, n);
}

/* the harness of a function-call case (verl's fn_name path): stdin lines as JSON arguments, the result printed */
static const char HARNESS_HEAD[] =
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics, itertools, "
    "functools, operator, io, sys, json, traceback\n"
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics, itertools, "
    "functools, operator, io, sys, json\n\n";
static const char HARNESS_TAIL[] =
    "\n\ndef __verlc_call(name):\n"
    "    text = sys.stdin.read()\n"
    "    try:\n"
    "        args = [json.loads(l) for l in text.split('\\n')] if text.strip() else []\n"
    "    except json.JSONDecodeError as e:\n"
    "        sys.stderr.write('arguments of %%s are not JSON lines: %%s\\n' %% (name, e))\n"
    "        return None, True\n"
    "    try:\n"
    "        g = globals()\n"
    "        fn = g[name] if name in g else getattr(g['Solution'](), name) if 'Solution' in g else None\n"
    "        if not fn:\n"
    "            sys.stderr.write('no function or method %%s\\n' %% name)\n"
    "            return None, True\n"
    "        return fn(*args), False\n"
    "    except Exception:\n"
    "        sys.stderr.write(traceback.format_exc())\n"
    "        return None, True\n\n"
    "if __name__ == '__main__':\n"
    "    __r, __failed = __verlc_call(%s)\n"
    "    if not __failed:\n"
    "        print(json.dumps(__r) if __r is None or isinstance(__r, (dict, list, tuple, bool)) else str(__r))\n";

/* the code of one case: the generation, then the case's assertion, wrapped when the cases name a function */
static char *case_code(const char *gen, const char *assert_case, const cJSON *fn_name) {
    size_t n = strlen(gen) + strlen(assert_case) + 4;
    char *code = vc_malloc(n), *fn = NULL;
    if (!code) return NULL;
    snprintf(code, n, "%s\n\n%s", gen, assert_case);
    if (!cJSON_IsString(fn_name) || !*fn_name->valuestring) return code;
    cJSON *name = cJSON_CreateString(fn_name->valuestring); /* a Python string literal (JSON's is one) */
    fn = name ? vc_json_print(name, 0) : NULL;
    cJSON_Delete(name);
    size_t m = sizeof HARNESS_HEAD + strlen(code) + sizeof HARNESS_TAIL + (fn ? strlen(fn) : 0) + 16;
    char *w = fn ? vc_malloc(m) : NULL, *tail = w ? vc_malloc(sizeof HARNESS_TAIL + strlen(fn) + 8) : NULL;
    if (tail) {
        snprintf(tail, sizeof HARNESS_TAIL + strlen(fn) + 8, HARNESS_TAIL, fn);
        snprintf(w, m, "%s%s%s", HARNESS_HEAD, code, tail);
    }
    free(code), free(fn), free(tail);
    if (!tail) free(w);
    return tail ? w : NULL;
}

/* ---- one test case: its request and its verdict ---- */

enum { R_PASS = 1, R_WRONG = 0, R_ERROR = -1, R_RUNTIME = -2, R_TIMEOUT = -3, R_COMPILE = -4 };

typedef struct {
    int row, idx;
    char *body;        /* the request JSON */
    char *expected;    /* str(expected output), NULL: None (passes on any output) */
    double timeout;    /* the request's compile and run timeouts (s) */
    int result;
    int keep;          /* keep the service's answer (answer: NULL when the request failed) */
    cJSON *answer;
} sb_case;

static int str_eq_rstrip_nl(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    while (na && a[na - 1] == '\n') na--;
    while (nb && b[nb - 1] == '\n') nb--;
    return na == nb && !memcmp(a, b, na);
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int status_is(const cJSON *o, const char *k, const char *want) {
    const char *s = jstr(o, k);
    return s && !strcmp(s, want);
}

/* verl's _process_single_case verdict of the service's answer */
static int verdict(const cJSON *ans, const char *expected) {
    const cJSON *cr = cJSON_GetObjectItemCaseSensitive(ans, "compile_result"),
                *rr = cJSON_GetObjectItemCaseSensitive(ans, "run_result");
    if (!cJSON_IsObject(cr) || !cr->child) cr = NULL; /* None or {} is falsy */
    if (!cJSON_IsObject(rr) || !rr->child) rr = NULL;
    const cJSON *crc = cr ? cJSON_GetObjectItemCaseSensitive(cr, "return_code") : NULL,
                *rrc = rr ? cJSON_GetObjectItemCaseSensitive(rr, "return_code") : NULL;
    int rc_zero = cJSON_IsNumber(rrc) && rrc->valuedouble == 0;
    if (status_is(ans, "status", "Failed")) {
        if (cr && (status_is(cr, "status", "Error") || status_is(cr, "status", "TimeLimitExceeded") ||
                   (status_is(cr, "status", "Finished") && !(cJSON_IsNumber(crc) && crc->valuedouble == 0))))
            return R_COMPILE;
        if (!rr) return R_ERROR;
        if (status_is(rr, "status", "TimeLimitExceeded")) return R_TIMEOUT;
        if (status_is(rr, "status", "Error") || (status_is(rr, "status", "Finished") && !rc_zero)) return R_RUNTIME;
        return R_ERROR;
    }
    if (status_is(ans, "status", "Success")) {
        if (!rr || !status_is(rr, "status", "Finished")) return R_ERROR;
        const cJSON *out = cJSON_GetObjectItemCaseSensitive(rr, "stdout");
        char *got = !out || cJSON_IsNull(out) ? vc_strdup("") : pt_py_repr(out, 1); /* str(actual_output) */
        int pass = !expected || (got && str_eq_rstrip_nl(got, expected));
        free(got);
        return pass ? R_PASS : R_WRONG;
    }
    return R_ERROR; /* SandboxError or an unknown status */
}

/* Sandbox Fusion's run_code request */
static char *request_body(const char *code, const char *stdin_s, double timeout, int memory_mb, const char *language) {
    cJSON *req = cJSON_CreateObject();
    char *body = NULL;
    if (req && cJSON_AddNumberToObject(req, "compile_timeout", timeout) && cJSON_AddNumberToObject(req, "run_timeout", timeout) &&
        cJSON_AddStringToObject(req, "code", code) &&
        (stdin_s ? cJSON_AddStringToObject(req, "stdin", stdin_s) : cJSON_AddNullToObject(req, "stdin")) &&
        cJSON_AddNumberToObject(req, "memory_limit_MB", memory_mb) && cJSON_AddStringToObject(req, "language", language) &&
        cJSON_AddObjectToObject(req, "files") && cJSON_AddArrayToObject(req, "fetch_files"))
        body = vc_json_print(req, 0);
    cJSON_Delete(req);
    return body;
}

/* ---- the cases of a row ---- */

/* json.loads of the test cases (ints and floats kept apart: str(2.0) is "2.0") */
static cJSON *loads(const char *s) { return pt_json_loads((pt_span){ s, strlen(s) }); }

static cJSON *test_cases_of(const char *tests) {
    cJSON *j = loads(tests);
    if (cJSON_IsString(j)) { /* the test cases as a JSON string: json.loads */
        cJSON *k = loads(j->valuestring);
        cJSON_Delete(j);
        j = k;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* the row's first cases into c[*n..) (at most FIRST_CASES); 0 when verl scores the row 0 without running it */
static int row_cases(const vc_sandbox_opts *o, int row, const char *code, const char *tests, sb_case *c, int *n,
                     vc_status *st) {
    cJSON *tc = test_cases_of(tests);
    const cJSON *ac = cJSON_GetObjectItemCaseSensitive(tc, "assert_case");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(tc, "inputs"), *out = cJSON_GetObjectItemCaseSensitive(tc, "outputs");
    int with_asserts = cJSON_IsArray(ac), na = with_asserts ? cJSON_GetArraySize(ac) : 0;
    int ni = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : with_asserts && !in ? na : -1;
    int no = cJSON_IsArray(out) ? cJSON_GetArraySize(out) : with_asserts && !out ? na : -1;
    int ok = tc && ni > 0 && ni == no && (!ac || (with_asserts && na == ni)); /* verl's -1 / empty / invalid: 0 */
    for (int i = 0; ok && i < ni && i < FIRST_CASES; i++) {
        const cJSON *a = with_asserts ? cJSON_GetArrayItem(ac, i) : NULL;
        if (a && !cJSON_IsString(a)) ok = 0; /* generation + "\n\n" + a raises: the row scores 0 */
    }
    for (int i = 0; ok && i < ni && i < FIRST_CASES; i++) {
        const cJSON *x = cJSON_IsArray(in) ? cJSON_GetArrayItem(in, i) : NULL;
        const cJSON *y = cJSON_IsArray(out) ? cJSON_GetArrayItem(out, i) : NULL;
        const cJSON *a = with_asserts ? cJSON_GetArrayItem(ac, i) : NULL;
        char *stdin_s = x ? (cJSON_IsNull(x) ? NULL : pt_py_repr(x, 1)) : vc_strdup(""); /* setdefault: "" */
        char *exp = y && !cJSON_IsNull(y) ? pt_py_repr(y, 1) : NULL;
        char *cc = case_code(code, a ? a->valuestring : "", cJSON_GetObjectItemCaseSensitive(tc, "fn_name"));
        char *body = cc ? request_body(cc, stdin_s, o->timeout_s, o->memory_limit_mb, "python") : NULL;
        free(cc), free(stdin_s);
        if (!body || (y && !cJSON_IsNull(y) && !exp)) {
            free(body), free(exp);
            *st = VC_ERR_NOMEM;
            ok = 0;
            break;
        }
        c[(*n)++] = (sb_case){ .row = row, .idx = i, .body = body, .expected = exp, .timeout = o->timeout_s,
                               .result = R_ERROR };
    }
    cJSON_Delete(tc);
    return ok;
}


/* every case's request through the service (verl's call_sandbox_api: a 504 tried 3 times in all, after 1 and 2 s;
 * any other failure ends the case) and its verdict */
static vc_status run_cases(const vc_sandbox_opts *o, sb_case *c, int n) {
    static const long RETRY[] = { 504 };
    vc_http_policy pol = { .max_in_flight = o->max_concurrent > 0 ? o->max_concurrent : 64, .max_attempts = 3,
                           .retry_delay = o->retry_delay, .retry_codes = RETRY, .n_retry_codes = 1 };
    vc_http_req *r = vc_calloc((size_t)n + 1, sizeof *r);
    if (!r) return VC_ERR_NOMEM;
    for (int i = 0; i < n; i++) r[i] = (vc_http_req){ .body = c[i].body, .timeout_s = 2 * c[i].timeout + 10 };
    vc_status st = vc_http_post_many(o->url, r, n, &pol); /* + verl's API_TIMEOUT of 10 s */
    for (int i = 0; !st && i < n; i++) {
        cJSON *ans = r[i].code >= 200 && r[i].code < 300 && r[i].resp ? cJSON_Parse(r[i].resp) : NULL;
        c[i].result = cJSON_IsObject(ans) ? verdict(ans, c[i].expected) : R_ERROR;
        if (c[i].keep && cJSON_IsObject(ans)) c[i].answer = ans;
        else cJSON_Delete(ans);
    }
    vc_http_reqs_free(r, n);
    free(r);
    return st;
}

vc_status vc_sandbox_score(const vc_sandbox_opts *o, int n, const char *const *solution, const char *const *tests,
                           double *score) {
    sb_case *c = vc_calloc((size_t)n * FIRST_CASES + 1, sizeof *c);
    int *first = vc_malloc(sizeof(int) * (size_t)(n + 1)), *count = vc_calloc((size_t)n + 1, sizeof(int)), nc = 0;
    vc_status st = c && first && count ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        score[i] = 0;
        first[i] = nc;
        char *code = solution[i] && tests[i] ? vc_sandbox_code(solution[i]) : NULL;
        if (code && !row_cases(o, i, code, tests[i], c, &nc, &st)) /* the row scores 0: drop what it queued */
            while (nc > first[i]) free(c[--nc].body), free(c[nc].expected);
        count[i] = nc - first[i];
        free(code);
    }
    if (!st && nc) st = run_cases(o, c, nc);
    for (int i = 0; !st && i < n; i++) {
        int pass = 0, compile_at = -1;
        for (int k = 0; k < count[i]; k++) { /* a compile error fails every later case too */
            int r = c[first[i] + k].result;
            if (r == R_COMPILE && compile_at < 0) compile_at = k;
            pass += r == R_PASS && compile_at < 0;
        }
        score[i] = count[i] ? (double)pass / count[i] : 0.0;
    }
    for (int k = 0; c && k < nc; k++) free(c[k].body), free(c[k].expected);
    free(c), free(first), free(count);
    return st;
}

/* ---- verl's SandboxFusionTool ---- */

static int supported_language(const char *l) {
    static const char *const L[] = { "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash",
                                     "typescript", "sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala",
                                     "julia", "pytest", "junit", "kotlin_script", "jest", "verilog", "python_gpu",
                                     "lean", "swift", "racket" };
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++)
        if (!strcmp(l, L[i])) return 1;
    return 0;
}

/* the text verl's tool gives for one answer of the service (NULL: the request failed) */
static char *tool_text(const cJSON *ans) {
    const cJSON *rr = cJSON_GetObjectItemCaseSensitive(ans, "run_result");
    if (!cJSON_IsObject(rr) || !status_is(rr, "status", "Finished")) return vc_strdup("no stdout here");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(rr, "stdout"), *err = cJSON_GetObjectItemCaseSensitive(rr, "stderr");
    if (!cJSON_IsString(out) || !cJSON_IsString(err)) return vc_strdup(""); /* None + str raises: no text */
    size_t n = strlen(out->valuestring) + strlen(err->valuestring) + 1;
    char *t = vc_malloc(n);
    if (t) snprintf(t, n, "%s%s", out->valuestring, err->valuestring); /* stdout + stderr */
    return t;
}

vc_status vc_sandbox_tool_run_many(const vc_sandbox_opts *o, int n, const char *const *code, const double *timeout,
                                   const char *const *language, char **text) {
    sb_case *run = vc_calloc((size_t)n + 1, sizeof *run);
    int *at = vc_malloc(sizeof(int) * (size_t)(n + 1)), nr = 0;
    vc_status st = run && at ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        text[i] = NULL;
        at[i] = -1;
        if (!supported_language(language[i]) || !(timeout[i] >= 0 && timeout[i] < 1e7)) continue; /* verl fails it */
        run[nr] = (sb_case){ .timeout = timeout[i], .result = R_ERROR, .keep = 1,
                             .body = request_body(code[i], NULL, timeout[i], o->memory_limit_mb, language[i]) };
        if (!run[nr].body) st = VC_ERR_NOMEM;
        at[i] = nr++;
    }
    if (!st && nr) st = run_cases(o, run, nr); /* all in flight together, up to max_concurrent */
    for (int i = 0; !st && i < n; i++)
        if (!(text[i] = tool_text(at[i] >= 0 ? run[at[i]].answer : NULL))) st = VC_ERR_NOMEM;
    for (int i = 0; st && i < n; i++) free(text[i]), text[i] = NULL;
    for (int k = 0; run && k < nr; k++) free(run[k].body), cJSON_Delete(run[k].answer);
    free(run), free(at);
    return st;
}

vc_status vc_sandbox_tool_run(const vc_sandbox_opts *o, const char *code, double timeout, const char *language,
                              char **text) {
    return vc_sandbox_tool_run_many(o, 1, &code, &timeout, &language, text);
}
