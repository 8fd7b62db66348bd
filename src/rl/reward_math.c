/* MATH reward (verl/utils/reward_score/math_reward.py, from lm-evaluation-harness hendrycks_math).
 * Python exceptions inside strip_string are modelled as a NULL result. */
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <stdlib.h>
#include <string.h>

char *vc_math_last_boxed(const char *s) {
    const char *sp = strstr(s, "\\boxed ");
    if (sp) { /* "\\boxed " + string.split("\\boxed ")[-1].split("$")[0] */
        const char *last = sp, *q;
        while ((q = strstr(last + 7, "\\boxed "))) last = q;
        last += 7;
        const char *d = strchr(last, '$');
        char *tail = vc_rs_ndup(last, d ? (size_t)(d - last) : strlen(last));
        char *r = tail ? vc_rs_cat("\\boxed ", tail, NULL, NULL, NULL, NULL) : NULL;
        free(tail);
        return r;
    }
    const char *idx = NULL, *q;
    for (q = strstr(s, "\\boxed"); q; q = strstr(q + 1, "\\boxed")) idx = q;
    if (!idx)
        for (q = strstr(s, "\\fbox"); q; q = strstr(q + 1, "\\fbox")) idx = q;
    if (!idx) return NULL;
    int open = 0;
    for (const char *p = idx; *p; p++) {
        if (*p == '{') open++;
        if (*p == '}' && --open == 0) return vc_rs_ndup(idx, (size_t)(p - idx + 1));
    }
    return NULL;
}

/* remove_boxed; NULL where Python's asserts fail. */
char *vc_math_remove_boxed(const char *s) {
    if (strstr(s, "\\boxed ")) return strncmp(s, "\\boxed ", 7) ? NULL : vc_strdup(s + 7);
    size_t n = strlen(s);
    if (strncmp(s, "\\boxed{", 7) || n < 8 || s[n - 1] != '}') return NULL;
    return vc_rs_ndup(s + 7, n - 8);
}

/* Replaces *s by f(*s) (freeing the old one); keeps NULL as the error marker. */
static char *step_replace(char *s, const char *old, const char *rep) {
    if (!s) return NULL;
    char *r = vc_rs_replace(s, old, rep);
    free(s);
    return r;
}

static char *fix_sqrt(char *s) {
    if (!strstr(s, "\\sqrt")) return s;
    const char *p = strstr(s, "\\sqrt");
    char *out = vc_rs_ndup(s, (size_t)(p - s));
    while (out && p) {
        const char *part = p + 5, *next = strstr(part, "\\sqrt");
        size_t len = next ? (size_t)(next - part) : strlen(part);
        if (len == 0) { free(out); out = NULL; break; } /* split[0] raises IndexError */
        char *seg = vc_rs_ndup(part, len), *n;
        if (!seg) { free(out); out = NULL; break; }
        if (seg[0] != '{') {
            size_t k = vc_rs_u8len(seg);
            char *a = vc_rs_ndup(seg, k);
            n = a ? vc_rs_cat(out, "\\sqrt{", a, "}", seg + k, NULL) : NULL;
            free(a);
        } else n = vc_rs_cat(out, "\\sqrt", seg, NULL, NULL, NULL);
        free(seg);
        free(out);
        out = n;
        p = next;
    }
    free(s);
    return out;
}

/* fix_fracs; *err set where Python raises (an empty piece after "\frac"). */
static char *fix_fracs(char *s, int *err) {
    const char *p = strstr(s, "\\frac");
    if (!p) return s;
    char *out = vc_rs_ndup(s, (size_t)(p - s));
    while (out && p) {
        const char *part = p + 5, *next = strstr(part, "\\frac");
        size_t len = next ? (size_t)(next - part) : strlen(part), k1, k2;
        char *seg = vc_rs_ndup(part, len), *n = NULL;
        if (!seg) { free(out); out = NULL; break; }
        if (len == 0) { *err = 1; free(seg); free(out); out = NULL; break; }
        if (seg[0] == '{') n = vc_rs_cat(out, "\\frac", seg, NULL, NULL, NULL);
        else if (vc_rs_cp_count(seg, len) < 2) { free(seg); free(out); return s; } /* returns the input */
        else {
            k1 = vc_rs_u8len(seg);
            k2 = vc_rs_u8len(seg + k1);
            char *a = vc_rs_ndup(seg, k1), *b = vc_rs_ndup(seg + k1, k2);
            if (a && b && b[0] != '{') n = vc_rs_cat(out, "\\frac{", a, "}{", b, "}");
            else if (a && b) n = vc_rs_cat(out, "\\frac{", a, "}", b, NULL);
            char *m = n ? vc_rs_cat(n, seg + k1 + k2, NULL, NULL, NULL, NULL) : NULL;
            free(n); n = m;
            free(a); free(b);
        }
        free(seg);
        free(out);
        out = n;
        p = next;
    }
    free(s);
    return out;
}

/* "-?(0|[1-9][0-9]*)" except "-0": the strings for which "{}".format(int(x)) == x */
static int canonical_int(const char *s, size_t n) {
    size_t i = (n && s[0] == '-') ? 1 : 0;
    if (i == n) return 0;
    for (size_t k = i; k < n; k++) if (s[k] < '0' || s[k] > '9') return 0;
    if (s[i] == '0') return n - i == 1 && i == 0;
    return 1;
}

static char *fix_a_slash_b(char *s) {
    if (vc_rs_count(s, "/") != 1) return s;
    const char *slash = strchr(s, '/');
    if (!canonical_int(s, (size_t)(slash - s)) || !canonical_int(slash + 1, strlen(slash + 1))) return s;
    char *a = vc_rs_ndup(s, (size_t)(slash - s));
    char *r = a ? vc_rs_cat("\\frac{", a, "}{", slash + 1, "}", NULL) : NULL;
    free(a);
    free(s);
    return r;
}

/* Hendrycks' _strip_string; `percent`: the two percent replacements (verl's math_reward removes "\\%" and
 * "\%"; PRM800K's math_normalize, in mathruler, removes "\%" and "%") */
static char *strip_string(const char *in, const char *const percent[2]) {
    static const char *const R1[][2] = {
        { "\n", "" }, { "\\!", "" }, { "\\\\", "\\" }, { "tfrac", "frac" }, { "dfrac", "frac" },
        { "\\left", "" }, { "\\right", "" }, { "^{\\circ}", "" }, { "^\\circ", "" }, { "\\$", "" },
    };
    const char *const R2[][2] = { { percent[0], "" }, { percent[1], "" }, { " .", " 0." }, { "{.", "{0." } };
    char *s = vc_strdup(in);
    for (size_t i = 0; i < sizeof R1 / sizeof R1[0]; i++) s = step_replace(s, R1[i][0], R1[i][1]);
    if (!s) return NULL;
    size_t units = vc_rs_count(s, "\\text{ ");
    if (units > 1) { free(s); return NULL; } /* assert len(splits) == 2 */
    if (units == 1) *strstr(s, "\\text{ ") = 0;
    for (size_t i = 0; i < sizeof R2 / sizeof R2[0]; i++) s = step_replace(s, R2[i][0], R2[i][1]);
    if (!s || !*s) return s;
    if (s[0] == '.') { char *t = vc_rs_cat("0", s, NULL, NULL, NULL, NULL); free(s); s = t; if (!s) return NULL; }
    if (vc_rs_count(s, "=") == 1) {
        const char *eq = strchr(s, '=');
        if (vc_rs_cp_count(s, (size_t)(eq - s)) <= 2) { char *t = vc_strdup(eq + 1); free(s); s = t; if (!s) return NULL; }
    }
    s = fix_sqrt(s);
    s = step_replace(s, " ", "");
    if (!s) return NULL;
    int err = 0;
    s = fix_fracs(s, &err);
    if (!s) return NULL;
    if (!strcmp(s, "0.5")) { free(s); s = vc_strdup("\\frac{1}{2}"); if (!s) return NULL; }
    return fix_a_slash_b(s);
}

char *vc_math_strip_string(const char *in) {
    static const char *const P[2] = { "\\\\%", "\\%" };
    return strip_string(in, P);
}

char *vc_math_strip_string_prm800k(const char *in) {
    static const char *const P[2] = { "\\%", "%" };
    return strip_string(in, P);
}

int vc_math_is_equiv(const char *a, const char *b) {
    char *x = vc_math_strip_string(a), *y = x ? vc_math_strip_string(b) : NULL;
    int eq = (x && y) ? !strcmp(x, y) : !strcmp(a, b);
    free(x);
    free(y);
    return eq;
}

double vc_reward_math(const char *solution, const char *ground_truth) {
    char *boxed = vc_math_last_boxed(solution);
    if (!boxed) return 0.0;
    char *ans = vc_math_remove_boxed(boxed);
    double r = ans && vc_math_is_equiv(ans, ground_truth) ? 1.0 : 0.0;
    free(ans);
    free(boxed);
    return r;
}
