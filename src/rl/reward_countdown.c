/* Countdown reward (TinyZero's countdown.py, as adapted for response-only solution strings) with a small
 * arithmetic parser in place of Python's eval. */
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct parser { const char *p; vc_status err; };

static void skip_ws(struct parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\f') ps->p++;
}

static double perr(struct parser *ps, vc_status st) {
    if (!ps->err) ps->err = st;
    return NAN;
}

static int isdig(char c) { return c >= '0' && c <= '9'; }

/* Python decimal literals: 12, 1.5, .5, 1.; "05" is a syntax error (but "00" and "05.5" are not). */
static double number(struct parser *ps) {
    const char *s = ps->p;
    size_t nd = 0;
    while (isdig(ps->p[0])) { ps->p++; nd++; }
    int frac = 0;
    if (*ps->p == '.') {
        frac = 1;
        ps->p++;
        while (isdig(ps->p[0])) { ps->p++; nd++; }
    }
    if (!nd) return perr(ps, VC_ERR_FORMAT);
    if (!frac && s[0] == '0')
        for (const char *q = s; q < ps->p; q++) if (*q != '0') return perr(ps, VC_ERR_FORMAT);
    return strtod(s, NULL);
}

static double expr(struct parser *ps);
static double factor(struct parser *ps);

static double atom(struct parser *ps) {
    skip_ws(ps);
    if (*ps->p == '(') {
        ps->p++;
        double v = expr(ps);
        skip_ws(ps);
        if (*ps->p != ')') return perr(ps, VC_ERR_FORMAT);
        ps->p++;
        return v;
    }
    return number(ps);
}

/* power := atom ['**' factor]  (right-associative; binds tighter than unary minus on its left) */
static double power(struct parser *ps) {
    double b = atom(ps);
    skip_ws(ps);
    if (ps->p[0] == '*' && ps->p[1] == '*') {
        ps->p += 2;
        double e = factor(ps);
        if (b == 0.0 && e < 0.0) return perr(ps, VC_ERR_NUMERIC); /* ZeroDivisionError */
        return pow(b, e);
    }
    return b;
}

static double factor(struct parser *ps) {
    skip_ws(ps);
    if (*ps->p == '-' || *ps->p == '+') {
        int neg = *ps->p++ == '-';
        double v = factor(ps);
        return neg ? -v : v;
    }
    return power(ps);
}

static double term(struct parser *ps) {
    double v = factor(ps);
    for (;;) {
        skip_ws(ps);
        const char *p = ps->p;
        if (p[0] == '*' && p[1] != '*') { ps->p++; v *= factor(ps); }
        else if (p[0] == '/') {
            int floor_div = p[1] == '/';
            ps->p += floor_div ? 2 : 1;
            double d = factor(ps);
            if (d == 0.0) return perr(ps, VC_ERR_NUMERIC);
            v = floor_div ? floor(v / d) : v / d;
        } else return v;
    }
}

static double expr(struct parser *ps) {
    double v = term(ps);
    for (;;) {
        skip_ws(ps);
        if (*ps->p == '+') { ps->p++; v += term(ps); }
        else if (*ps->p == '-') { ps->p++; v -= term(ps); }
        else return v;
    }
}

vc_status vc_arith_eval(const char *s, double *out) {
    if (!*s) return vc_fail(VC_ERR_FORMAT, "empty expression");
    for (const char *q = s; *q; q++)
        if (!strchr("0123456789+-*/(). \t\n\r\f\v", *q)) return vc_fail(VC_ERR_FORMAT, "invalid character in equation");
    struct parser ps = { s, VC_OK };
    double v = expr(&ps);
    skip_ws(&ps);
    if (!ps.err && *ps.p) ps.err = VC_ERR_FORMAT;
    if (ps.err) return vc_fail(ps.err, ps.err == VC_ERR_NUMERIC ? "division by zero" : "syntax error in equation");
    if (!isfinite(v)) return vc_fail(VC_ERR_NUMERIC, "equation overflows"); /* Python: OverflowError */
    *out = v;
    return VC_OK;
}

/* Last line, last <answer>(.*?)</answer>, stripped; NULL when none. */
static char *extract_equation(const char *s) {
    const char *line = strrchr(s, '\n');
    line = line ? line + 1 : s;
    const char *best = NULL, *best_end = NULL;
    for (const char *p = strstr(line, "<answer>"); p; ) {
        const char *e = strstr(p + 8, "</answer>");
        if (!e) break;
        best = p + 8;
        best_end = e;
        p = strstr(e + 9, "<answer>");
    }
    if (!best) return NULL;
    while (best < best_end && strchr(" \t\r\f\v", *best)) best++;
    while (best_end > best && strchr(" \t\r\f\v", best_end[-1])) best_end--;
    return vc_rs_ndup(best, (size_t)(best_end - best));
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Numbers of \d+ runs in the equation, as a sorted multiset equal to the available numbers. */
static int uses_numbers(const char *eq, const double *numbers, int n) {
    int cnt = 0, ok = 1;
    for (const char *p = eq; *p; p++) if (isdig(*p) && (p == eq || !isdig(p[-1]))) cnt++;
    if (cnt != n) return 0;
    double *a = malloc(sizeof(double) * (size_t)(n ? n : 1)), *b = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!a || !b) { free(a); free(b); return 0; }
    int k = 0;
    for (const char *p = eq; *p; p++) if (isdig(*p) && (p == eq || !isdig(p[-1]))) a[k++] = strtod(p, NULL);
    memcpy(b, numbers, sizeof(double) * (size_t)n);
    qsort(a, (size_t)n, sizeof(double), cmp_d);
    qsort(b, (size_t)n, sizeof(double), cmp_d);
    for (int i = 0; i < n; i++) ok &= a[i] == b[i];
    free(a);
    free(b);
    return ok;
}

double vc_reward_countdown(const char *solution, double target, const double *numbers, int n_numbers,
                           double format_score, double score) {
    char *eq = extract_equation(solution);
    if (!eq) return 0.0;
    double r = format_score, v;
    if (uses_numbers(eq, numbers, n_numbers) && vc_arith_eval(eq, &v) == VC_OK && fabs(v - target) < 1e-5) r = score;
    free(eq);
    return r;
}
