/* The PRM800K grader's grade_answer as mathruler 0.1.0 (mathruler/grader.py, math_normalize.py: behind verl's
 * geometry3k reward) and verl's prime_math (verl/utils/reward_score/prime_math/__init__.py: its numina_* sources)
 * have it: the MATH normalisation's strings, then its own normalisation (units, LaTeX to text as pylatexenc does
 * (latex_text.c), lower case), then sympy (sym_eq.c) element by element. The two differ in small ways (the percent
 * signs of the MATH normalisation, a "liter" unit, prime's keeping spaces and braces). Python's exceptions
 * inside the normalisations are followed as their try / except do. */
#include "rl/latex_text.h"
#include "rl/prm800k.h"
#include "rl/reward_str.h"
#include "rl/sym_eq.h"
#include "verlc/reward.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* the regular expressions, compiled once: the units (mathruler's sixteen, then prime's "liter"), then the rest */
static const char *const UNITS[] = { "degree", "cm",    "centimeter", "meter", "mile", "second", "minute", "hour", "day",
                                     "week",   "month", "year",       "foot",  "feet", "inch",   "yard",   "liter" };
#define N_UNITS (sizeof UNITS / sizeof UNITS[0])
enum { RE_CIRC = N_UNITS, RE_COMMA_BANG, RE_MINUS, RE_MIXED, RE_COMMAS, RE_TEXT, RE_FRAC, RE_COUNT };
static const char *const PATTERNS[RE_COUNT - N_UNITS] = {
    "\\^ *\\\\circ", ",\\\\! *", "- *", "([0-9]) +([0-9])", "(\\d)(,)(\\d\\d\\d)($|\\D)", "^\\\\text\\{(.+?)\\}$",
    "^-?[0-9]+.?/0*[1-9][0-9]*.?$",
};
static struct re_pattern_buffer *g_re[RE_COUNT];
static int g_re_ok;
static pthread_once_t g_re_once = PTHREAD_ONCE_INIT;

static void compile_patterns(void) {
    char pat[64];
    for (size_t i = 0; i < RE_COUNT; i++) {
        if (i < N_UNITS) snprintf(pat, sizeof pat, "%s(es)?(s)? *(\\^[0-9]+)?", UNITS[i]);
        if (vc_rs_re_compile(i < N_UNITS ? pat : PATTERNS[i - N_UNITS], &g_re[i])) return;
    }
    g_re_ok = 1;
}

static struct re_pattern_buffer *re_at(int i) {
    return pthread_once(&g_re_once, compile_patterns) || !g_re_ok ? NULL : g_re[i];
}

/* re.sub(pattern i, repl, *s) in place; 0 on failure (the string is kept) */
static int re_sub(char **s, int i, const char *repl) {
    struct re_pattern_buffer *re = re_at(i);
    char *out = NULL;
    if (!*s || !re || vc_rs_re_sub(re, repl, *s, &out)) return 0;
    free(*s);
    *s = out;
    return 1;
}

/* the last match's group 1 of pattern i (the pattern anchored: its only match), or NULL */
static char *re_group(int i, const char *s) {
    struct re_pattern_buffer *re = re_at(i);
    char *g = NULL;
    if (!re || vc_rs_re_findall_last(re, s, &g)) return NULL;
    return g;
}

static int replace(char **s, const char *old, const char *rep) {
    if (!*s) return 0;
    char *t = vc_rs_replace(*s, old, rep);
    if (!t) return 0;
    free(*s);
    *s = t;
    return 1;
}

/* m = re.search(r"^\\text\{(?P<text>.+?)\}$", s): the group, or NULL */
static char *text_group(const char *s) { return re_group(RE_TEXT, s); }

/* math_normalize.normalize_answer */
static char *mathd_normalize(const char *answer, int flavor) {
    char *a = vc_rs_py_strip(answer);
    if (!a) return NULL;
    char *g = text_group(a);
    if (g) {
        free(a);
        a = vc_rs_py_strip(g);
        free(g);
        if (!a) return NULL;
    }
    char *r = flavor == VC_PRM_PRIME ? vc_math_strip_string(a) : vc_math_strip_string_prm800k(a);
    if (!r) return a; /* an exception: the answer as it is */
    free(a);
    return r;
}

/* digit ('_'? digit)*: its length, 0 when none; the digits go to *o */
static size_t digitpart(const char *s, char **o) {
    size_t i = 0;
    if (!(s[0] >= '0' && s[0] <= '9')) return 0;
    for (;;) {
        if (s[i] >= '0' && s[i] <= '9') *(*o)++ = s[i++];
        else if (s[i] == '_' && s[i + 1] >= '0' && s[i + 1] <= '9') i++;
        else return i;
    }
}

/* Python's float(s): 1 with *v when s (within Python's whitespace) is [sign] (digits [. [digits]] | . digits)
 * [e [sign] digits] with '_' between digits, or inf / infinity / nan */
int vc_py_float(const char *s, double *v) {
    char *t = vc_rs_py_strip(s);
    if (!t) return 0;
    size_t n = strlen(t);
    char *buf = malloc(n + 2), *o = buf;
    int ok = buf != NULL;
    const char *p = t;
    if (ok && (*p == '+' || *p == '-')) *o++ = *p++;
    if (ok && (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity") || !strcasecmp(p, "nan"))) {
        *v = strtod(t, NULL);
        free(buf);
        free(t);
        return 1;
    }
    if (ok) {
        size_t d = digitpart(p, &o), f = 0;
        p += d;
        if (*p == '.') {
            *o++ = *p++;
            f = digitpart(p, &o);
            p += f;
        }
        ok = d || f;
        if (ok && (*p == 'e' || *p == 'E')) {
            *o++ = *p++;
            if (*p == '+' || *p == '-') *o++ = *p++;
            size_t x = digitpart(p, &o);
            ok = x > 0;
            p += x;
        }
        ok = ok && !*p;
        *o = 0;
    }
    if (ok) *v = strtod(buf, NULL);
    free(buf);
    free(t);
    return ok;
}

/* abs(x - int(round(x))) <= 1e-7 (False where Python raises: inf, nan) */
static int is_int_value(double x) { return isfinite(x) && fabs(x - nearbyint(x)) <= 1e-7; }

/* str(int(v)) of a double, Python's exact digits */
static char *int_str(double v) {
    char buf[400];
    snprintf(buf, sizeof buf, "%.0f", v == 0 ? 0.0 : v);
    return vc_strdup(buf);
}

/* _strip_properly_formatted_commas */
static char *strip_commas(const char *s) {
    char *x = vc_strdup(s);
    for (;;) {
        char *before = x ? vc_strdup(x) : NULL;
        if (!before || !re_sub(&x, RE_COMMAS, "\\1\\3\\4")) { free(before); free(x); return NULL; }
        int same = !strcmp(before, x);
        free(before);
        if (same) return x;
    }
}

static int str_is_int(const char *s) {
    char *x = strip_commas(s);
    double v;
    int r = x && vc_py_float(x, &v) && is_int_value(v);
    free(x);
    return r;
}

/* _str_to_int: int(float(x.replace(",", ""))) */
static char *str_to_int(const char *s) {
    char *x = vc_rs_replace(s, ",", "");
    double v = 0;
    int ok = x && vc_py_float(x, &v);
    free(x);
    return ok ? int_str(trunc(v)) : NULL;
}

/* _parse_latex; NULL where pylatexenc raises */
static char *parse_latex(const char *e) {
    char *s = vc_strdup(e);
    static const char *const PRE[][2] = { { "\\tfrac", "\\frac" }, { "\\dfrac", "\\frac" }, { "\\frac", " \\frac" } };
    for (size_t i = 0; i < sizeof PRE / sizeof PRE[0]; i++)
        if (!replace(&s, PRE[i][0], PRE[i][1])) { free(s); return NULL; }
    char *t = NULL;
    vc_status st = vc_latex_to_text(s, &t);
    free(s);
    if (st) return NULL;
    static const char *const POST[][2] = { { "\xe2\x88\x9a", "sqrt" }, { "\xcf\x80", "pi" }, { "\xe2\x88\x9e", "inf" },
                                           { "\xe2\x88\xaa", "U" },    { "\xc2\xb7", "*" },  { "\xc3\x97", "*" } };
    for (size_t i = 0; i < sizeof POST / sizeof POST[0]; i++)
        if (!replace(&t, POST[i][0], POST[i][1])) { free(t); return NULL; }
    char *r = vc_rs_py_strip(t);
    free(t);
    return r;
}


/* grader._normalize */
static char *normalize(const char *in, int flavor) {
    char *g = text_group(in);
    char *e = vc_strdup(g ? g : in);
    free(g);
    static const char *const R[][2] = { { "\\%", "%" },          { "\\$", "$" },          { "$", "" },
                                        { "%", "" },             { " or ", " , " },       { " and ", " , " },
                                        { "million", "*10^6" }, { "billion", "*10^9" }, { "trillion", "*10^12" } };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++)
        if (!replace(&e, R[i][0], R[i][1])) goto fail;
    size_t n_units = N_UNITS - (flavor != VC_PRM_PRIME); /* "liter": prime's */
    for (size_t i = 0; i < n_units; i++)
        if (!re_sub(&e, (int)i, "")) goto fail;
    if (!re_sub(&e, RE_CIRC, "")) goto fail;
    size_t n = strlen(e);
    if (n && e[0] == '{' && e[n - 1] == '}') {
        memmove(e, e + 1, n - 2);
        e[n - 2] = 0;
    }
    if (!re_sub(&e, RE_COMMA_BANG, "")) goto fail;
    double v;
    if (vc_py_float(e, &v) && is_int_value(v)) {
        free(e);
        if (!(e = int_str(nearbyint(v)))) return NULL;
    }
    if (strchr(e, '\\')) {
        char *t = parse_latex(e);
        if (t) { free(e); e = t; }
    }
    if (!re_sub(&e, RE_MINUS, "-") || !re_sub(&e, RE_MIXED, "\\1+\\2")) goto fail;
    if (flavor != VC_PRM_PRIME && (!replace(&e, " ", "") || !replace(&e, "{", "") || !replace(&e, "}", ""))) goto fail;
    char *l = vc_rs_py_case(e, 0);
    free(e);
    if (!(e = l)) return NULL;
    if (str_is_int(e)) {
        char *t = str_to_int(e);
        if (t) { free(e); e = t; }
    }
    return e;
fail:
    free(e);
    return NULL;
}

/* _is_frac: ^-?[0-9]+.?/0*[1-9][0-9]*.?$ */
static int is_frac(const char *s) {
    char *g = re_group(RE_FRAC, s);
    free(g);
    return g != NULL;
}

/* split_tuple: the elements of "(a,b)" / "[a,b)" ... or the expression itself; *n elements */
static char **split_tuple(const char *e, int *n) {
    *n = 0;
    char *x = strip_commas(e);
    if (!x) return NULL;
    size_t len = strlen(x);
    char **v = calloc(len + 2, sizeof *v);
    if (!v || !len) { free(x); return v; }
    int tuple = len > 2 && strchr("()[]", x[0]) && strchr("()[]", x[len - 1]);
    for (size_t i = 1; tuple && i + 1 < len; i++) tuple = !strchr("()[]", x[i]);
    if (!tuple) { v[(*n)++] = x; return v; }
    x[len - 1] = 0;
    for (char *p = x + 1;;) {
        char *c = strchr(p, ',');
        if (c) *c = 0;
        v[(*n)++] = vc_rs_py_strip(p);
        if (!c) break;
        p = c + 1;
    }
    free(x);
    return v;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static const char *last_cp(const char *s) {
    size_t n = strlen(s);
    if (!n) return s;
    n--;
    while (n && ((unsigned char)s[n] & 0xc0) == 0x80) n--;
    return s + n;
}
static int last_cp_eq(const char *a, const char *b) { return !strcmp(last_cp(a), last_cp(b)); }

static int first_cp_eq(const char *a, const char *b) {
    size_t k = vc_rs_u8len(a);
    return k == vc_rs_u8len(b) && !memcmp(a, b, k);
}

/* the element-wise comparison of grade_answer */
static int elements_equal(const char *gt, const char *given) {
    int ng = 0, nh = 0, ok = 0;
    char **g = split_tuple(gt, &ng), **h = split_tuple(given, &nh);
    if (!g || !h) goto out;
    if (ng > 1 && (!first_cp_eq(gt, given) || !last_cp_eq(gt, given))) goto out;
    if (ng != nh) goto out;
    ok = 1;
    for (int i = 0; i < ng && ok; i++) {
        if (is_frac(g[i]) && is_frac(h[i])) ok = !strcmp(g[i], h[i]);
        else if (str_is_int(g[i]) != str_is_int(h[i])) ok = 0;
        else ok = vc_sym_equal(g[i], h[i]);
    }
out:
    free_list(g, ng);
    free_list(h, nh);
    return ok;
}

int vc_prm800k_grade(const char *given, const char *ground_truth, int flavor) {
    if (!given || !ground_truth) return 0;
    char *gm = mathd_normalize(ground_truth, flavor), *hm = mathd_normalize(given, flavor);
    int eq = gm && hm && !strcmp(gm, hm);
    free(gm);
    free(hm);
    if (eq) return 1;
    char *g = normalize(ground_truth, flavor), *h = normalize(given, flavor);
    if (g && h) {
        if (!strcmp(g, h)) eq = 1;
        else if (*h) eq = elements_equal(g, h);
    }
    free(g);
    free(h);
    return eq;
}

int vc_mathruler_grade(const char *given, const char *ground_truth) {
    return vc_prm800k_grade(given, ground_truth, VC_PRM_MATHRULER);
}
