/* verl's prime_math reward (verl/utils/reward_score/prime_math: the numina_* data sources): the answer taken from
 * the response as match_answer does (answer markers, the last \boxed{}, the text after "is", "=", ...), graded by
 * the PRM800K grader (grade_prm800k.c, prime's flavour), else by math_equal (grader.py): strings, numbers within a
 * relative 1e-4 (also as percentages), intervals and tuples part by part (its sympy stage never accepts: see
 * symbolic_equal). With "\pi" in either, pi is tried as math.pi and as 3.14, the answer's "\pi" replaced by it and
 * the text evaluated by Python where it can be. */
#include "rl/prm800k.h"
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- Python values: a string, an int or a float ---- */
enum { PV_STR, PV_INT, PV_FLOAT };
typedef struct {
    int kind;
    char *s; /* PV_STR (owned) */
    long long i;
    double f;
} pyval;

static pyval pv_str(char *s) { return (pyval){ PV_STR, s, 0, 0 }; }
static void pv_free(pyval *v) { free(v->s), v->s = NULL; }

/* Python's repr of a float: the shortest digits that read back, fixed notation from 1e-4 up to 1e16 */
static void float_repr(double f, char *out, size_t cap) {
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char buf[64];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    int e = (int)strtol(strchr(buf, 'e') + 1, NULL, 10);
    if (e < -4 || e >= 16) { /* 1e+16, 1.5e-05 */
        char m[40];
        snprintf(m, sizeof m, "%.*s", (int)(strchr(buf, 'e') - buf), buf);
        snprintf(out, cap, "%se%c%02d", m, e < 0 ? '-' : '+', abs(e));
        return;
    }
    int dec = p - 1 - e;
    snprintf(out, cap, "%.*f", dec > 0 ? dec : 0, f);
    if (!strchr(out, '.')) strncat(out, ".0", cap - strlen(out) - 1);
}

/* str(v), malloc'd */
static char *pv_text(const pyval *v) {
    char buf[64];
    if (v->kind == PV_STR) return vc_strdup(v->s);
    if (v->kind == PV_INT) snprintf(buf, sizeof buf, "%lld", v->i);
    else float_repr(v->f, buf, sizeof buf);
    return vc_strdup(buf);
}

/* ---- Python's eval of arithmetic text (handle_pi's eval): numbers, + - * / // % **, parentheses ---- */
typedef struct {
    const char *s;
    int fail;
} py_eval;

static pyval pe_expr(py_eval *e, int depth);

static void pe_space(py_eval *e) {
    while (*e->s == ' ' || *e->s == '\t') e->s++;
}
static double pv_f(const pyval *v) { return v->kind == PV_INT ? (double)v->i : v->f; }

static pyval pe_atom(py_eval *e, int depth) {
    pe_space(e);
    pyval r = { PV_INT, NULL, 0, 0 };
    if (depth > 100) { e->fail = 1; return r; }
    if (*e->s == '(') {
        e->s++;
        r = pe_expr(e, depth + 1);
        pe_space(e);
        if (*e->s != ')') e->fail = 1;
        else e->s++;
        return r;
    }
    const char *p = e->s;
    int dot = 0, digits = 0;
    while ((*p >= '0' && *p <= '9') || *p == '.' || *p == '_') { dot += *p == '.'; digits += *p != '.'; p++; }
    if (!digits || dot > 1) { e->fail = 1; return r; }
    int ex = (*p | 32) == 'e' && ((p[1] >= '0' && p[1] <= '9') || ((p[1] == '+' || p[1] == '-') && p[2] >= '0' && p[2] <= '9'));
    if (ex) { p += 2; while (*p >= '0' && *p <= '9') p++; }
    char buf[128];
    size_t n = 0;
    for (const char *q = e->s; q < p && n + 1 < sizeof buf; q++)
        if (*q != '_') buf[n++] = *q;
    buf[n] = 0;
    e->s = p;
    if (dot || ex) r = (pyval){ PV_FLOAT, NULL, 0, strtod(buf, NULL) };
    else {
        errno = 0;
        r.i = strtoll(buf, NULL, 10);
        if (errno || (buf[0] == '0' && buf[1])) e->fail = 1; /* too large, or Python's "leading zeros" error */
    }
    return r;
}

static pyval pe_unary(py_eval *e, int depth);

static pyval pe_power(py_eval *e, int depth) {
    pyval b = pe_atom(e, depth);
    pe_space(e);
    if (e->s[0] == '*' && e->s[1] == '*') {
        e->s += 2;
        pyval x = pe_unary(e, depth + 1);
        if (b.kind == PV_INT && x.kind == PV_INT && x.i >= 0) {
            long double v = powl((long double)b.i, (long double)x.i);
            if (fabsl(v) > 9e18L) e->fail = 1;
            return (pyval){ PV_INT, NULL, (long long)v, 0 };
        }
        if (pv_f(&b) == 0 && pv_f(&x) < 0) e->fail = 1; /* ZeroDivisionError */
        double r = pow(pv_f(&b), pv_f(&x));
        if (isnan(r)) e->fail = 1; /* a negative base to a fraction: Python's complex */
        return (pyval){ PV_FLOAT, NULL, 0, r };
    }
    return b;
}

static pyval pe_unary(py_eval *e, int depth) {
    pe_space(e);
    if (*e->s == '-' || *e->s == '+') {
        int neg = *e->s == '-';
        e->s++;
        pyval v = pe_unary(e, depth + 1);
        if (neg) v.i = -v.i, v.f = -v.f;
        return v;
    }
    return pe_power(e, depth);
}

static pyval pe_term(py_eval *e, int depth) {
    pyval l = pe_unary(e, depth);
    for (;;) {
        pe_space(e);
        char c = *e->s;
        int fl = c == '/' && e->s[1] == '/';
        if (c != '*' && c != '/' && c != '%') return l;
        if (c == '*' && e->s[1] == '*') return l;
        e->s += fl ? 2 : 1;
        pyval r = pe_unary(e, depth);
        double y = pv_f(&r);
        if ((c == '/' || c == '%') && y == 0) { e->fail = 1; return l; }
        if (l.kind == PV_INT && r.kind == PV_INT && c != '/') {
            if (c == '*') l.i *= r.i;
            else { /* Python's floor division and modulo */
                long long q = l.i / r.i, m = l.i % r.i;
                if (m && ((m < 0) != (r.i < 0))) q--, m += r.i;
                l.i = c == '%' ? m : q;
            }
        } else {
            double x = pv_f(&l);
            l = (pyval){ PV_FLOAT, NULL, 0, c == '*' ? x * y : c == '%' ? x - y * floor(x / y) : fl ? floor(x / y) : x / y };
        }
    }
}

static pyval pe_expr(py_eval *e, int depth) {
    pyval l = pe_term(e, depth);
    for (;;) {
        pe_space(e);
        if (*e->s != '+' && *e->s != '-') return l;
        int sub = *e->s++ == '-';
        pyval r = pe_term(e, depth);
        if (l.kind == PV_INT && r.kind == PV_INT) l.i = sub ? l.i - r.i : l.i + r.i;
        else l = (pyval){ PV_FLOAT, NULL, 0, sub ? pv_f(&l) - pv_f(&r) : pv_f(&l) + pv_f(&r) };
    }
}

/* 1 with *out where eval(text) gives a number */
static int py_eval_number(const char *text, pyval *out) {
    py_eval e = { text, 0 };
    pyval v = pe_expr(&e, 0);
    pe_space(&e);
    if (e.fail || *e.s) return 0;
    *out = v;
    return 1;
}

/* ---- grader.py's normalize ---- */

static int re_match_prefix(const char *pattern, const char *s) {
    struct re_pattern_buffer *re = NULL;
    char *g = NULL;
    if (vc_rs_re_compile(pattern, &re)) return 0;
    int r = !vc_rs_re_findall_last(re, s, &g) && g;
    free(g);
    vc_rs_re_free(re);
    return r;
}

/* handle_pi: every "\pi" as "*pi" after a digit, else "1*pi" (each search one past the last replacement's start,
 * as Python's find(.., idx + 1)), then Python's eval where it works */
static pyval handle_pi(char *s, double pi) {
    char num[40];
    float_repr(pi, num, sizeof num);
    for (char *at = strstr(s, "\\pi"); s && at;) {
        size_t idx = (size_t)(at - s);
        int digit = idx > 0 && s[idx - 1] >= '0' && s[idx - 1] <= '9';
        char *pre = vc_rs_ndup(s, idx), *t = pre ? vc_rs_cat(pre, digit ? "*" : "1*", num, at + 3, NULL, NULL) : NULL;
        free(pre);
        free(s);
        s = t;
        at = s && s[idx] ? strstr(s + idx + 1, "\\pi") : NULL;
    }
    pyval v;
    if (s && py_eval_number(s, &v)) { free(s); return v; }
    return pv_str(s);
}

/* *err where Python raises (handle_base's float()) */
static pyval normalize(const char *answer, double pi, int *err) {
    if (re_match_prefix("^\\$\\d+(\\.\\d+)?", answer)) return pv_str(vc_strdup(answer + 1));
    if (re_match_prefix("^\\d+(\\.\\d+)?%$", answer) || re_match_prefix("^\\d+(\\.\\d+)?\\\\%$", answer)) {
        char *a = vc_rs_replace(answer, "\\%", ""), *b = a ? vc_rs_replace(a, "%", "") : NULL;
        free(a);
        return pv_str(b);
    }
    if (strchr(answer, '_')) { /* handle_base: int(float(x.split("_")[0])) */
        char *head = vc_rs_ndup(answer, strcspn(answer, "_"));
        double f;
        int ok = head && vc_py_float(head, &f) && isfinite(f);
        free(head);
        if (!ok) { *err = 1; return pv_str(NULL); }
        return (pyval){ PV_INT, NULL, (long long)f, 0 };
    }
    char *s = vc_strdup(answer);
    if (s && strstr(s, "\\pi")) return handle_pi(s, pi);
    return pv_str(s);
}

/* is_digit: float() of the text ("{,}" or "," removed) */
static int is_digit(const pyval *v, double *out) {
    char *t = pv_text(v), *u = NULL;
    if (!t) return 0;
    u = strstr(t, "{,}") ? vc_rs_replace(t, "{,}", "") : vc_rs_replace(t, ",", "");
    int ok = u && vc_py_float(u, out);
    free(t);
    free(u);
    return ok;
}

static int isclose(double a, double b, double rel) {
    if (a == b) return 1;
    if (isinf(a) || isinf(b) || isnan(a) || isnan(b)) return 0;
    double d = fabs(a - b);
    return d <= fabs(rel * b) || d <= fabs(rel * a);
}

/* ---- math_equal ---- */

/* str.strip(chars) */
static char *strip_chars(const char *s, const char *chars) {
    size_t a = 0, b = strlen(s);
    while (a < b && strchr(chars, s[a])) a++;
    while (b > a && strchr(chars, s[b - 1])) b--;
    return vc_rs_ndup(s + a, b - a);
}

static char *remove_chars(const char *s, const char *chars) {
    char *o = vc_strdup(s), *w = o;
    for (const char *p = s; o && *p; p++)
        if (!strchr(chars, *p)) *w++ = *p;
    if (o) *w = 0;
    return o;
}

/* format_intervals: sympy's Interval(...) spellings as brackets */
static char *format_intervals(const char *p) {
    static const char *const K[][3] = { { "Interval(", "[", "]" }, { "Interval.Ropen(", "[", ")" },
                                        { "Interval.Lopen(", "(", "]" }, { "Interval.open(", "(", ")" } };
    size_t n = strlen(p);
    for (int i = 0; i < 4; i++) {
        size_t k = strlen(K[i][0]);
        if (n > k && !strncmp(p, K[i][0], k) && p[n - 1] == ')' && !strchr(p + n - 1, '\n')) {
            char *in = vc_rs_ndup(p + k, n - k - 1), *r = in ? vc_rs_cat(K[i][1], in, K[i][2], NULL, NULL, NULL) : NULL;
            free(in);
            return r;
        }
    }
    return vc_strdup(p);
}

static int math_equal_str(const char *pred, const char *ref, double pi, int depth, int *err);

/* the parts of "a, b, ..." (split on every comma) */
static char **split_commas(const char *s, int *n, int strip) {
    *n = 1;
    for (const char *p = s; *p; p++) *n += *p == ',';
    char **v = calloc((size_t)*n, sizeof *v);
    const char *p = s;
    for (int i = 0; v && i < *n; i++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char *part = vc_rs_ndup(p, len);
        v[i] = strip && part ? vc_rs_py_strip(part) : part;
        if (strip) free(part);
        p = c ? c + 1 : p + len;
    }
    return v;
}

static void free_parts(char **v, int n) {
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

/* all(math_equal(a[i], b[i])) over parts split by commas; -1 when the counts differ */
static int parts_equal(const char *pred, const char *ref, int strip, double pi, int depth, int *err) {
    int np = 0, nr = 0, ok = -1;
    char **a = split_commas(pred, &np, strip), **b = split_commas(ref, &nr, strip);
    if (a && b && np == nr) {
        ok = 1;
        for (int i = 0; i < np && ok && !*err; i++) ok = math_equal_str(a[i], b[i], pi, depth + 1, err);
    }
    free_parts(a, np);
    free_parts(b, nr);
    return ok;
}

static int math_equal_core(pyval *pv, pyval *rv, double pi, int depth, int *err);

/* math_equal(prediction, reference) of two texts */
static int math_equal_str(const char *pred, const char *ref, double pi, int depth, int *err) {
    if (depth > 20) return 0;
    pyval pv = normalize(pred, pi, err);
    pyval rv = *err ? pv_str(NULL) : normalize(ref, pi, err);
    int r = *err ? 0 : math_equal_core(&pv, &rv, pi, depth, err);
    pv_free(&pv);
    pv_free(&rv);
    return r;
}

/* the checks after normalize */
static int math_equal_core(pyval *pv, pyval *rv, double pi, int depth, int *err) {
    if (pv->kind == PV_STR && !pv->s) return 0;
    if (rv->kind == PV_STR && !rv->s) return 0;
    if (pv->kind == PV_STR) { /* prediction[:1000] */
        size_t at = 0;
        for (int c = 0; pv->s[at] && c < 1000; c++) at += vc_rs_u8len(pv->s + at);
        pv->s[at] = 0;
    }
    int r = 0;
    char *p = NULL, *q = NULL, *a = NULL, *b = NULL, *x = NULL, *y = NULL;
    if (pv->kind == PV_STR && rv->kind == PV_STR) {
        char *ps = vc_rs_py_strip(pv->s), *rs = vc_rs_py_strip(rv->s);
        int same = ps && rs && !strcasecmp(ps, rs);
        free(ps), free(rs);
        char *pn = vc_rs_replace(pv->s, " ", ""), *rn = vc_rs_replace(rv->s, " ", "");
        same |= pn && rn && !strcmp(pn, rn);
        free(pn), free(rn);
        if (same) return 1;
    }
    double pd, rd;
    if (is_digit(pv, &pd) && is_digit(rv, &rd)) { /* numbers: also as a percentage either way */
        double cand[3] = { rd / 100, rd, rd * 100 };
        for (int i = 0; i < 3; i++)
            if (isclose(cand[i], pd, 1e-4)) return 1;
        return 0;
    }
    if (pv->kind == PV_STR && !*pv->s) return 0; /* `not prediction` */
    char *rt = pv_text(rv), *pt = pv_text(pv);
    q = rt ? vc_rs_py_strip(rt) : NULL;
    char *ps0 = pt ? vc_rs_py_strip(pt) : NULL;
    free(rt), free(pt);
    p = ps0 ? format_intervals(ps0) : NULL;
    free(ps0);
    if (!p || !q) goto out;
    size_t lp = strlen(p), lq = strlen(q);
    int strip = (lp && p[0] == '[' && p[lp - 1] == ']' && q[0] != '(') || (lp && p[0] == '(' && p[lp - 1] == ')' && q[0] != '[');
    a = strip ? strip_chars(p, "[]()") : vc_strdup(p);
    b = strip ? strip_chars(q, "[]()") : vc_strdup(q);
    x = a ? remove_chars(a, "{}()") : NULL;
    y = b ? remove_chars(b, "{}()") : NULL;
    if (x && y && !strcmp(x, y)) { r = 1; goto out; }
    if (lp && lq && strchr("([", p[0]) && strchr(")]", p[lp - 1]) && p[0] == q[0] && p[lp - 1] == q[lq - 1]) {
        char *pi_ = vc_rs_ndup(p + 1, lp - 2), *qi = vc_rs_ndup(q + 1, lq - 2);
        int k = pi_ && qi ? parts_equal(pi_, qi, 0, M_PI, depth, err) : -1;
        free(pi_), free(qi);
        if (k == 1) { r = 1; goto out; }
        if (*err) goto out;
    }
    if (strchr(p, ',') && strchr(q, ',')) {
        int k = parts_equal(p, q, 1, M_PI, depth, err);
        if (k >= 0) { r = k; goto out; }
    }
    if (!strncmp(p, "Point", 5) && lq && q[0] == '(' && q[lq - 1] == ')') {
        const char *o = strchr(p, '(');
        if (o) {
            char *pi_ = vc_rs_ndup(o + 1, (size_t)(p + lp - 1 - (o + 1))), *qi = vc_rs_ndup(q + 1, lq - 2);
            int np = 0, nq = 0;
            char **ap = pi_ ? split_commas(pi_, &np, 0) : NULL, **aq = qi ? split_commas(qi, &nq, 0) : NULL;
            int all = ap && aq && np == nq; /* zip(strict=False): the shorter count */
            for (int i = 0; all && i < np && !*err; i++) all = math_equal_str(ap[i], aq[i], M_PI, depth + 1, err);
            free_parts(ap, np), free_parts(aq, nq);
            free(pi_), free(qi);
            if (all && !*err) { r = 1; goto out; }
        }
    }
    if (strstr(q, "\\begin{pmatrix}") && ((lp && p[0] == '[' && p[lp - 1] == ']') || !strncmp(p, "Matrix", 6))) {
        *err = p[0] == '['; /* eval of a list against a matrix: not built (Python's eval raises on most of them) */
        goto out;
    }
    /* symbolic_equal: verl runs each sympy call inside `with timeout_limit(seconds=...)`, but timeout_limit
     * (verl/utils/py_functional.py) is a decorator, not a context manager: every `with` raises, its except
     * catches it, and symbolic_equal returns False whatever the expressions (b178a3cd and later verl alike) */
out:
    free(p), free(q), free(a), free(b), free(x), free(y);
    return r;
}

/* ---- match_answer ---- */

static size_t rfind_lower(const char *s, const char *needle, int *found) {
    size_t n = strlen(s), k = strlen(needle);
    *found = 0;
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;) {
        size_t j = 0;
        while (j < k && (char)((s[i + j] >= 'A' && s[i + j] <= 'Z') ? s[i + j] + 32 : s[i + j]) == needle[j]) j++;
        if (j == k) { *found = 1; return i; }
    }
    return 0;
}

static void set_text(char **resp, char *t) {
    if (!t) return;
    free(*resp);
    *resp = t;
}

/* _last_boxed_only_string: the last \boxed / \fbox group's content, stripped; NULL when none */
static char *last_boxed_only(const char *s) {
    const char *idx = NULL, *q;
    for (q = strstr(s, "\\boxed"); q; q = strstr(q + 1, "\\boxed")) idx = q;
    if (!idx)
        for (q = strstr(s, "\\fbox"); q; q = strstr(q + 1, "\\fbox")) idx = q;
    if (!idx) return NULL;
    const char *l = NULL;
    int open = 0;
    for (const char *p = idx; *p; p++) {
        if (*p == '{') {
            open++;
            if (!l) l = p;
        } else if (*p == '}' && --open == 0) {
            if (!l) return NULL;
            char *raw = vc_rs_ndup(l + 1, (size_t)(p - l - 1)), *r = raw ? vc_rs_py_strip(raw) : NULL;
            free(raw);
            return r;
        }
    }
    return NULL;
}

char *vc_prime_math_match_answer(const char *response) {
    char *r = vc_strdup(response);
    static const char *const AFTER[] = { "answer:", "answer is", "answers are" };
    static const char *const BEFORE[] = { "is answer", "is the answer", "are answers", "are the answers" };
    static const char *const LAST[] = { "be ", "is ", "are ", "=", ": ", "get ", "be\n", "is\n", "are\n", ":\n", "get\n" };
    int found;
    for (size_t i = 0; r && i < 3; i++) {
        size_t at = rfind_lower(r, AFTER[i], &found);
        if (found) set_text(&r, vc_rs_py_strip(r + at + strlen(AFTER[i])));
    }
    for (size_t i = 0; r && i < 4; i++) {
        size_t at = rfind_lower(r, BEFORE[i], &found);
        if (found) {
            char *h = vc_rs_ndup(r, at);
            set_text(&r, h ? vc_rs_py_strip(h) : NULL);
            free(h);
        }
    }
    char *boxed = r ? last_boxed_only(r) : NULL;
    if (boxed && *boxed) set_text(&r, boxed);
    else free(boxed);
    if (r && strstr(r, ". ")) {
        size_t at = rfind_lower(r, ". ", &found);
        char *h = vc_rs_ndup(r, at);
        set_text(&r, h ? vc_rs_py_strip(h) : NULL);
        free(h);
    }
    for (size_t i = 0; r && i < sizeof LAST / sizeof LAST[0]; i++) {
        size_t at = rfind_lower(r, LAST[i], &found);
        if (found) set_text(&r, vc_rs_py_strip(r + at + strlen(LAST[i])));
    }
    return r;
}

int vc_prime_math_equal(const char *prediction, const char *reference, double pi) {
    int err = 0;
    int r = math_equal_str(prediction, reference, pi, 0, &err);
    return err ? 0 : r;
}

vc_status vc_reward_prime_math(const char *solution, const char *ground_truth, double *score) {
    vc_status st = score ? vc_rs_check_texts("prime_math reward", solution, ground_truth)
                         : vc_fail(VC_ERR_ARG, "prime_math reward: no score to write");
    if (st) return st;
    char *ans = vc_prime_math_match_answer(solution);
    if (!ans) return VC_ERR_NOMEM;
    int ok = vc_prm800k_grade(ans, ground_truth, VC_PRM_PRIME);
    if (!ok) {
        int err = 0;
        if (strstr(ans, "\\pi") || strstr(ground_truth, "\\pi")) {
            int a = math_equal_str(ans, ground_truth, M_PI, 0, &err);
            int b = err ? 0 : math_equal_str(ans, ground_truth, 3.14, 0, &err);
            ok = !err && (a || b);
        } else ok = math_equal_str(ans, ground_truth, M_PI, 0, &err) && !err;
    }
    free(ans);
    *score = ok ? 1.0 : 0.0;
    return VC_OK;
}
