/* String helpers with Python str semantics for the reward functions. */
#include "rl/reward_str.h"
#include "verlc/core.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

size_t vc_rs_count(const char *s, const char *sep) {
    size_t n = 0, k = strlen(sep);
    if (!k) return 0;
    for (const char *p = strstr(s, sep); p; p = strstr(p + k, sep)) n++;
    return n;
}

char *vc_rs_replace(const char *s, const char *old, const char *rep) {
    size_t k = strlen(old), r = strlen(rep), n = vc_rs_count(s, old), len = strlen(s);
    char *out = vc_malloc(len + n * r + 1), *o = out;
    if (!out) return NULL;
    const char *p = s, *q;
    while (k && (q = strstr(p, old))) {
        memcpy(o, p, (size_t)(q - p)); o += q - p;
        memcpy(o, rep, r); o += r;
        p = q + k;
    }
    strcpy(o, p);
    return out;
}

size_t vc_rs_u8len(const char *s) {
    unsigned char c = (unsigned char)*s;
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;
    return n;
}

size_t vc_rs_cp_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i += vc_rs_u8len(s + i)) c++;
    return c;
}

char *vc_rs_ndup(const char *s, size_t n) {
    char *d = vc_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *vc_rs_cat(const char *a, const char *b, const char *c, const char *d, const char *e, const char *f) {
    const char *v[6] = { a, b, c, d, e, f };
    size_t n = 0;
    for (int i = 0; i < 6; i++) n += v[i] ? strlen(v[i]) : 0;
    char *out = vc_malloc(n + 1), *o = out;
    if (!out) return NULL;
    for (int i = 0; i < 6; i++) {
        size_t k = v[i] ? strlen(v[i]) : 0;
        if (k) memcpy(o, v[i], k);
        o += k;
    }
    *o = 0;
    return out;
}

int vc_rs_py_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t vc_rs_next_cp(const char *s, int32_t *c) {
    utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)s, -1, c);
    return n > 0 ? (size_t)n : 1;
}

char *vc_rs_py_strip(const char *s) {
    int32_t c;
    size_t k;
    while (*s && (k = vc_rs_next_cp(s, &c), vc_rs_py_space(c))) s += k;
    size_t end = 0;
    for (size_t i = 0; s[i]; i += k)
        if (k = vc_rs_next_cp(s + i, &c), !vc_rs_py_space(c)) end = i + k;
    return vc_rs_ndup(s, end);
}

/* Unicode's Cased (approximately: a letter of category Lu, Ll or Lt, or one with another case) and Case_Ignorable
 * (Mn, Me, Cf, Lm, Sk and the apostrophes, periods and colons of Word_Break MidLetter / MidNumLet / Single_Quote) */
static int is_cased(int32_t c) {
    utf8proc_category_t g = utf8proc_category(c);
    return g == UTF8PROC_CATEGORY_LU || g == UTF8PROC_CATEGORY_LL || g == UTF8PROC_CATEGORY_LT ||
           utf8proc_tolower(c) != c || utf8proc_toupper(c) != c;
}
static int is_case_ignorable(int32_t c) {
    static const int32_t mid[] = { 0x27, 0x2E, 0x3A, 0xB7, 0x387, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13, 0xFE52,
                                   0xFE55, 0xFF07, 0xFF0E, 0xFF1A };
    utf8proc_category_t g = utf8proc_category(c);
    if (g == UTF8PROC_CATEGORY_MN || g == UTF8PROC_CATEGORY_ME || g == UTF8PROC_CATEGORY_CF || g == UTF8PROC_CATEGORY_LM ||
        g == UTF8PROC_CATEGORY_SK) return 1;
    for (size_t i = 0; i < sizeof mid / sizeof mid[0]; i++)
        if (c == mid[i]) return 1;
    return 0;
}

/* the code point before s + at (at > 0), and its start */
static int32_t prev_cp(const char *s, size_t *at) {
    size_t i = *at - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    int32_t c;
    vc_rs_next_cp(s + i, &c);
    *at = i;
    return c;
}

/* capital sigma at s[i, i + 2) in Python's Final_Sigma context: cased (case-ignorable)* SIGMA !((case-ignorable)* cased) */
static int final_sigma(const char *s, size_t i) {
    size_t j = i;
    int32_t c = 0;
    while (j > 0 && is_case_ignorable(c = prev_cp(s, &j))) c = 0;
    if (!c || !is_cased(c)) return 0;
    for (j = i + 2; s[j]; j += vc_rs_next_cp(s + j, &c))
        if (vc_rs_next_cp(s + j, &c), !is_case_ignorable(c)) return !is_cased(c);
    return 1;
}

char *vc_rs_py_case(const char *s, int capitalize) {
    char *out = malloc(4 * strlen(s) + 1), *o = out; /* (a lowered code point is at most 4 bytes: U+0130 two of 1 + 2) */
    if (!out) return NULL;
    int32_t c;
    for (size_t i = 0, k; s[i]; i += k) {
        k = vc_rs_next_cp(s + i, &c);
        if (capitalize && i == 0) o += utf8proc_encode_char(utf8proc_totitle(c), (utf8proc_uint8_t *)o);
        else if (c == 0x130) memcpy(o, "i\xCC\x87", 3), o += 3;
        else if (c == 0x3A3 && final_sigma(s, i)) memcpy(o, "\xCF\x82", 2), o += 2;
        else o += utf8proc_encode_char(utf8proc_tolower(c), (utf8proc_uint8_t *)o);
    }
    *o = 0;
    return out;
}

vc_status vc_rs_check_texts(const char *who, const char *solution, const char *ground_truth) {
    if (!solution || !ground_truth) return vc_fail(VC_ERR_ARG, "%s: solution and ground truth are required", who);
    if (!vc_rs_valid_utf8(solution) || !vc_rs_valid_utf8(ground_truth))
        return vc_fail(VC_ERR_ARG, "%s: the %s is not valid UTF-8", who, vc_rs_valid_utf8(solution) ? "ground truth"
                                                                                                : "solution");
    return VC_OK;
}

int vc_rs_valid_utf8(const char *s) {
    int32_t c;
    for (utf8proc_ssize_t k; *s; s += k)
        if ((k = utf8proc_iterate((const utf8proc_uint8_t *)s, -1, &c)) < 0) return 0;
    return 1;
}
