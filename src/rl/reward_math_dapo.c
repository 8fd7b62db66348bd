/* DAPO / AIME reward (verl/utils/reward_score/math_dapo.py, after lm-evaluation-harness's Minerva math):
 * the last "Answer: ..." line, normalize_final_answer on it and on the ground truth, string equality; or,
 * with strict_box_verify, the last \boxed{...} compared with the ground truth as it is.
 * Python str semantics on UTF-8: lengths and slices count code points, \s and strip() use str.isspace's
 * characters, isdigit() is Unicode's. */
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <oniguruma.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- Python str helpers ---- */
#define PY_SPACE_CLASS "[\\t\\n\\x0b\\f\\r\\x1c-\\x20\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"

/* the characters with Numeric_Type=Digit (str.isdigit() but not category Nd), from Python 3.11's unicodedata */
static const int32_t DIGIT_RANGES[][2] = {
    { 0xB2, 0xB3 },       { 0xB9, 0xB9 },       { 0x1369, 0x1371 },   { 0x19DA, 0x19DA },   { 0x2070, 0x2070 },
    { 0x2074, 0x2079 },   { 0x2080, 0x2089 },   { 0x2460, 0x2468 },   { 0x2474, 0x247C },   { 0x2488, 0x2490 },
    { 0x24EA, 0x24EA },   { 0x24F5, 0x24FD },   { 0x24FF, 0x24FF },   { 0x2776, 0x277E },   { 0x2780, 0x2788 },
    { 0x278A, 0x2792 },   { 0x10A40, 0x10A43 }, { 0x10E60, 0x10E68 }, { 0x11052, 0x1105A }, { 0x1F100, 0x1F10A },
};

static int py_digit(int32_t c) {
    if (utf8proc_category(c) == UTF8PROC_CATEGORY_ND) return 1;
    for (size_t i = 0; i < sizeof DIGIT_RANGES / sizeof DIGIT_RANGES[0]; i++)
        if (c >= DIGIT_RANGES[i][0] && c <= DIGIT_RANGES[i][1]) return 1;
    return 0;
}

static int py_isdigit(const char *s) {
    int32_t c;
    if (!*s) return 0;
    for (size_t k; *s; s += k)
        if (k = vc_rs_next_cp(s, &c), !py_digit(c)) return 0;
    return 1;
}

/* s[-n:]: the start of the last n code points */
static const char *py_tail(const char *s, size_t n) {
    size_t total = vc_rs_cp_count(s, strlen(s));
    for (; total > n; total--) s += vc_rs_u8len(s);
    return s;
}

/* ---- the regular expressions, compiled once ---- */
enum { RE_ANSWER, RE_DOLLARS, RE_TEXT, RE_TEXTBF, RE_OVERLINE, RE_BOXED, RE_FRAC, RE_SQRT, RE_COUNT };
static const char *const PATTERN[RE_COUNT] = {
    [RE_ANSWER] = "(?i)Answer" PY_SPACE_CLASS "*:" PY_SPACE_CLASS "*([^\\n]+)",
    [RE_DOLLARS] = "(.*?)(\\$)(.*?)(\\$)(.*)",
    [RE_TEXT] = "(\\\\text\\{)(.*?)(\\})",
    [RE_TEXTBF] = "(\\\\textbf\\{)(.*?)(\\})",
    [RE_OVERLINE] = "(\\\\overline\\{)(.*?)(\\})",
    [RE_BOXED] = "(\\\\boxed\\{)(.*)(\\})",
    [RE_FRAC] = "(frac)([^{])(.)",
    [RE_SQRT] = "(sqrt)([^{])",
};
/* the re.sub steps of normalize_final_answer, in order */
static const struct { int re; const char *repl; } RE_STEPS[] = {
    { RE_DOLLARS, "$\\3$" }, { RE_TEXT, "\\2" }, { RE_TEXTBF, "\\2" }, { RE_OVERLINE, "\\2" },
    { RE_BOXED, "\\2" },     { RE_FRAC, "frac{\\2}{\\3}" }, { RE_SQRT, "sqrt{\\2}" },
};
static regex_t *g_re[RE_COUNT];
static int g_re_ok;
static pthread_once_t g_re_once = PTHREAD_ONCE_INIT;

static void compile_patterns(void) {
    for (int i = 0; i < RE_COUNT; i++)
        if (vc_rs_re_compile(PATTERN[i], &g_re[i])) return;
    g_re_ok = 1;
}

static vc_status patterns_ready(void) {
    if (pthread_once(&g_re_once, compile_patterns) || !g_re_ok)
        return vc_fail(VC_ERR_INTERNAL, "math_dapo: the answer-normalisation regular expressions did not compile");
    return VC_OK;
}

/* ---- normalize_final_answer ---- */
static const char *const SUBSTITUTIONS[][2] = {
    { "an ", "" },   { "a ", "" },   { ".$", "$" },         { "\\$", "" },             { "\\ ", "" },
    { " ", "" },     { "mbox", "text" }, { ",\\text{and}", "," }, { "\\text{and}", "," }, { "\\text{m}", "\\text{}" },
};
static const char *const REMOVED_EXPRESSIONS[] = {
    "square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", "\\ldots", "sue", "points",
    "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds", "meters", "meals", "edges",
    "students", "childrentickets", "multiples", "\\text{s}", "\\text{.}", "\\text{\ns}", "\\text{}^2",
    "\\text{}^3", "\\text{\n}", "\\text{}", "\\mathrm{th}", "^\\circ", "^{\\circ}", "\\;", ",\\!", "{,}", "\"",
    "\\dots",
};

/* *s = s.replace(old, rep), freeing the old string */
static vc_status replace_in(char **s, const char *old, const char *rep) {
    char *r = vc_rs_replace(*s, old, rep);
    if (!r) return vc_fail(VC_ERR_NOMEM, "math_dapo: out of memory");
    free(*s);
    *s = r;
    return VC_OK;
}

static vc_status re_sub_in(char **s, int re, const char *repl) {
    char *r;
    vc_status st = vc_rs_re_sub(g_re[re], repl, *s, &r);
    if (st) return st;
    free(*s);
    *s = r;
    return VC_OK;
}

/* the rewriting steps up to (not including) the number rule and strip(), on *s */
static vc_status rewrite(char **s) {
    vc_status st = VC_OK;
    for (size_t i = 0; !st && i < sizeof SUBSTITUTIONS / sizeof SUBSTITUTIONS[0]; i++)
        st = replace_in(s, SUBSTITUTIONS[i][0], SUBSTITUTIONS[i][1]);
    for (size_t i = 0; !st && i < sizeof REMOVED_EXPRESSIONS / sizeof REMOVED_EXPRESSIONS[0]; i++)
        st = replace_in(s, REMOVED_EXPRESSIONS[i], "");
    for (size_t i = 0; !st && i < sizeof RE_STEPS / sizeof RE_STEPS[0]; i++)
        st = re_sub_in(s, RE_STEPS[i].re, RE_STEPS[i].repl);
    return st ? st : replace_in(s, "$", "");
}

static vc_status normalize_final_answer(const char *answer, char **out) {
    const char *eq = strrchr(answer, '='); /* split("=")[-1] */
    char *s = vc_strdup(eq ? eq + 1 : answer), *plain = NULL;
    if (!s) return vc_fail(VC_ERR_NOMEM, "math_dapo: out of memory");
    vc_status st = rewrite(&s);
    if (!st && !(plain = vc_rs_replace(s, ",", ""))) st = vc_fail(VC_ERR_NOMEM, "math_dapo: out of memory");
    if (!st && py_isdigit(plain)) free(s), s = plain, plain = NULL; /* "1,000" -> "1000" */
    free(plain);
    *out = st ? NULL : vc_rs_py_strip(s);
    free(s);
    if (!st && !*out) st = vc_fail(VC_ERR_NOMEM, "math_dapo: out of memory");
    return st;
}

/* ---- the two verifiers ---- */
/* last_boxed_only_string + remove_boxed: the content of the last "\boxed{" up to its closing brace
 * (malloc'd; *out NULL when there is none or it is not closed) */
static vc_status last_boxed_content(const char *s, char **out) {
    const char *idx = NULL;
    for (const char *q = strstr(s, "\\boxed{"); q; q = strstr(q + 1, "\\boxed{")) idx = q;
    *out = NULL;
    if (!idx) return VC_OK;
    int open = 0;
    for (const char *p = idx; *p; p++) {
        if (*p == '{') open++;
        if (*p == '}' && --open == 0) {
            *out = vc_rs_ndup(idx + 7, (size_t)(p - idx - 7));
            return *out ? VC_OK : vc_fail(VC_ERR_NOMEM, "math_dapo: out of memory");
        }
    }
    return VC_OK;
}

/* is_correct_minerva (the answer pattern's default, the ground truth not extracted) */
static vc_status minerva(const char *solution, const char *gt, int *correct, char **pred) {
    char *found = NULL, *want = NULL;
    vc_status st = vc_rs_re_findall_last(g_re[RE_ANSWER], solution, &found);
    if (!st) st = normalize_final_answer(found ? found : "[INVALID]", pred);
    if (!st) st = normalize_final_answer(gt, &want);
    if (!st) *correct = !strcmp(*pred, want);
    free(found);
    free(want);
    return st;
}

vc_status vc_reward_math_dapo(const char *solution, const char *ground_truth, int strict_box_verify,
                              double *score, int *acc, char **pred) {
    if (pred) *pred = NULL;
    vc_status st = vc_rs_check_texts("math_dapo", solution, ground_truth);
    if (!st) st = patterns_ready();
    if (st) return st;
    const char *tail = py_tail(solution, 300); /* "the longest answer in MATH-500 has 159 characters" */
    int correct = 0;
    char *p = NULL;
    if (strict_box_verify) { /* is_correct_strict_box: the last 100 characters, the raw ground truth */
        st = last_boxed_content(py_tail(tail, 100), &p);
        correct = !st && p && !strcmp(p, ground_truth);
    } else st = minerva(tail, ground_truth, &correct, &p);
    if (st) {
        free(p);
        return st;
    }
    if (score) *score = correct ? 1.0 : -1.0;
    if (acc) *acc = correct;
    if (pred) *pred = p;
    else free(p);
    return VC_OK;
}
