/* Scalars: YAML plain-scalar typing (as OmegaConf's loader does it), the Hydra override value grammar,
 * and the reverse direction (when a string must be quoted, how a float is printed). */
#define _GNU_SOURCE /* memmem */
#include "config/cfg_internal.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int str_in(const char *s, size_t len, const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) == len && !memcmp(s, *list, len)) return 1;
    return 0;
}

static const char *const NULLS[] = { "~", "null", "Null", "NULL", NULL };
static const char *const TRUES[] = { "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", NULL };
static const char *const FALSES[] = { "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", NULL };

/* Copies s without '_' separators into buf; 0 if it does not fit. */
static int strip_underscores(const char *s, size_t len, char *buf, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '_') continue;
        if (o + 1 >= n) return 0;
        buf[o++] = s[i];
    }
    buf[o] = 0;
    return 1;
}

/* the length of the run at s[i] of characters in `set` (a string of the characters allowed) */
static size_t run_of(const char *s, size_t len, size_t i, const char *set) {
    size_t j = i;
    while (j < len && s[j] && strchr(set, s[j])) j++;
    return j - i;
}

/* [1-9][0-9_]* (':' [0-5]?[0-9])+ at s[i] (YAML 1.1's base 60): its value in *v, the length matched (0: none) */
static size_t sexagesimal(const char *s, size_t len, size_t i, double *v) {
    if (i >= len || s[i] < '1' || s[i] > '9') return 0;
    size_t j = i + run_of(s, len, i, "0123456789_");
    char buf[40];
    if (!strip_underscores(s + i, j - i, buf, sizeof buf)) return 0;
    double acc = strtod(buf, NULL);
    int parts = 0;
    while (j < len && s[j] == ':') {
        size_t d = run_of(s, len, j + 1, "0123456789");
        if (d < 1 || d > 2 || (d == 2 && s[j + 1] > '5')) break;
        acc = acc * 60 + (d == 1 ? s[j + 1] - '0' : (s[j + 1] - '0') * 10 + (s[j + 2] - '0'));
        j += 1 + d;
        parts++;
    }
    if (!parts) return 0;
    *v = acc;
    return j - i;
}

/* YAML 1.1's int, as PyYAML resolves and builds it (OmegaConf's loader): [-+]? then 0b[01_]+ (binary), 0x[0-9a-fA-F_]+,
 * 0[0-7_]+ (octal: 010 is 8, 08 is a string), 0, [1-9][0-9_]*, or base 60 ([1-9][0-9_]*(:[0-5]?[0-9])+, 1:30 is 90) */
static int parse_int(const char *s, size_t len, int64_t *out) {
    size_t i = len && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    int neg = i && s[0] == '-', base = 10;
    size_t start = i, r = len - i;
    double sx;
    if (!r) return 0;
    if (r > 2 && s[i] == '0' && s[i + 1] == 'b' && run_of(s, len, i + 2, "01_") == r - 2) base = 2, start = i + 2;
    else if (r > 2 && s[i] == '0' && (s[i + 1] == 'x') && run_of(s, len, i + 2, "0123456789abcdefABCDEF_") == r - 2)
        base = 16, start = i + 2;
    else if (r > 1 && s[i] == '0' && run_of(s, len, i + 1, "01234567_") == r - 1) base = 8, start = i + 1;
    else if (r == 1 && s[i] == '0') { *out = 0; return 1; }
    else if (s[i] >= '1' && s[i] <= '9' && run_of(s, len, i, "0123456789_") == r) base = 10;
    else if (sexagesimal(s, len, i, &sx) == r && fabs(sx) < 9.2e18) { *out = (int64_t)(neg ? -sx : sx); return 1; }
    else return 0;
    char buf[80];
    if (!strip_underscores(s + start, len - start, buf, sizeof buf) || !buf[0]) return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, base);
    if (errno || *end || v > (unsigned long long)INT64_MAX + (unsigned long long)neg) return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

/* OmegaConf's YAML float (its loader's resolver, which also takes 1e-6 without a point):
 * [-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+]?[0-9]+)? | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+ | \.[0-9_]+([eE][-+][0-9]+)? (no sign)
 * | base 60 with a fraction | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN); hydra: Hydra's spellings of inf and nan too */
static int parse_float(const char *s, size_t len, int hydra, double *out) {
    size_t i = len && (s[0] == '-' || s[0] == '+') ? 1 : 0, j;
    int neg = i && s[0] == '-';
    const char *r = s + i;
    size_t rl = len - i;
    static const char *const INF[] = { ".inf", ".Inf", ".INF", NULL };
    static const char *const NAN_[] = { ".nan", ".NaN", ".NAN", NULL };
    if (str_in(r, rl, INF) || (hydra && rl == 3 && !strncasecmp(r, "inf", 3))) { *out = neg ? -INFINITY : INFINITY; return 1; }
    if ((i == 0 && str_in(r, rl, NAN_)) || (hydra && rl == 3 && !strncasecmp(r, "nan", 3))) { *out = NAN; return 1; }
    int ok = 0;
    double sx;
    size_t sl = sexagesimal(s, len, i, &sx);
    if (sl && i + sl < len && s[i + sl] == '.' && run_of(s, len, i + sl + 1, "0123456789_") == len - i - sl - 1) {
        char buf[64];  /* base 60 with a fraction: 1:30.5 is 90.5 */
        if (!strip_underscores(s + i + sl, len - i - sl, buf, sizeof buf)) return 0;
        *out = (neg ? -1 : 1) * (sx + strtod(buf, NULL));
        return 1;
    }
    if (i == 0 && len > 1 && s[0] == '.') {  /* \.[0-9_]+([eE][-+][0-9]+)? */
        j = 1 + run_of(s, len, 1, "0123456789_");
        ok = j > 1 && isdigit((unsigned char)s[1]);
        if (ok && j < len && (s[j] == 'e' || s[j] == 'E')) {
            ok = j + 2 < len && (s[j + 1] == '-' || s[j + 1] == '+') && run_of(s, len, j + 2, "0123456789") == len - j - 2;
            j = len;
        }
        ok = ok && j == len;
    } else if (i < len && isdigit((unsigned char)s[i])) {
        j = i + run_of(s, len, i, "0123456789_");
        int point = j < len && s[j] == '.';
        if (point) j += 1 + run_of(s, len, j + 1, "0123456789_");
        int ex = j < len && (s[j] == 'e' || s[j] == 'E');
        if (ex) {
            size_t k = j + 1 + (j + 1 < len && (s[j + 1] == '-' || s[j + 1] == '+'));
            size_t d = run_of(s, len, k, "0123456789");
            ex = d > 0;
            j = d ? k + d : len + 1;
        }
        ok = j == len && (point || ex);
    }
    if (!ok) return 0;
    char buf[128];
    if (!strip_underscores(s, len, buf, sizeof buf)) return 0;
    *out = strtod(buf, NULL);
    return 1;
}

/* [0-9] ('_'? [0-9])*, or with first_nz '0' | [1-9] ('_'? [0-9])* (Hydra's INT_UNSIGNED): the length matched at s[i] */
static size_t digits_us(const char *s, size_t len, size_t i, int first_nz) {
    size_t j = i;
    if (j >= len || !isdigit((unsigned char)s[j])) return 0;
    if (first_nz && s[j] == '0') return 1;
    j++;
    while (j < len && (isdigit((unsigned char)s[j]) || (s[j] == '_' && j + 1 < len && isdigit((unsigned char)s[j + 1])))) j++;
    return j - i;
}

/* a number by Hydra's override grammar (OverrideLexer.g4): INT [+-]? ('0' | [1-9] ('_'? DIGIT)*) and FLOAT (a point
 * or an exponent, inf / nan in any case); no hex, no leading zeros (007 and 0x10 are strings there). 1: an int in
 * *iv, 2: a float in *fv, 0: not a number */
static int hydra_number(const char *s, size_t len, int64_t *iv, double *fv) {
    size_t i = len && (s[0] == '-' || s[0] == '+') ? 1 : 0, j;
    if (len - i == 3 && (!strncasecmp(s + i, "inf", 3) || !strncasecmp(s + i, "nan", 3))) {
        *fv = tolower((unsigned char)s[i]) == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
        return 2;
    }
    size_t a = digits_us(s, len, i, 1), f = 0;
    j = i + a;
    int point = j < len && s[j] == '.', ex = 0;
    if (point) {
        f = digits_us(s, len, j + 1, 0);
        if (!a && !f) return 0;
        j += 1 + f;
    } else if (!a) return 0;
    if (j < len && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1 + (j + 1 < len && (s[j + 1] == '-' || s[j + 1] == '+'));
        size_t d = digits_us(s, len, k, 0);
        if (!d) return 0;
        ex = 1;
        j = k + d;
    }
    if (j != len) return 0;
    char buf[128];
    if (!strip_underscores(s, len, buf, sizeof buf)) return 0;
    if (!point && !ex) {
        errno = 0;
        char *end;
        long long v = strtoll(buf, &end, 10);
        if (errno || *end) return 0;  /* (past 64 bits: a string here, an int to Hydra) */
        *iv = v;
        return 1;
    }
    *fv = strtod(buf, NULL);
    return 2;
}

static vc_cfg_node *typed_scalar(const char *s, size_t len, int hydra) {
    vc_cfg_node *n = NULL;
    int64_t iv;
    double fv;
    int kind;
    if (hydra ? (len == 4 && !strncasecmp(s, "null", 4)) : (len == 0 || str_in(s, len, NULLS))) {
        n = vc_cfg_node_new(VC_CFG_NULL);
    } else if (len == 3 && !memcmp(s, "???", 3)) {
        n = vc_cfg_node_new(VC_CFG_MISSING);
    } else if (hydra ? (len == 4 && !strncasecmp(s, "true", 4)) : str_in(s, len, TRUES)) {
        if ((n = vc_cfg_node_new(VC_CFG_BOOL))) n->b = 1;
    } else if (hydra ? (len == 5 && !strncasecmp(s, "false", 5)) : str_in(s, len, FALSES)) {
        if ((n = vc_cfg_node_new(VC_CFG_BOOL))) n->b = 0;
    } else if (hydra && (kind = hydra_number(s, len, &iv, &fv))) {
        if ((n = vc_cfg_node_new(kind == 1 ? VC_CFG_INT : VC_CFG_FLOAT))) { if (kind == 1) n->i = iv; else n->f = fv; }
    } else if (!hydra && parse_int(s, len, &iv)) {
        if ((n = vc_cfg_node_new(VC_CFG_INT))) n->i = iv;
    } else if (!hydra && parse_float(s, len, hydra, &fv)) {
        if ((n = vc_cfg_node_new(VC_CFG_FLOAT))) n->f = fv;
    } else {
        return vc_cfg_scalar_str(s, len);
    }
    if (!n) return NULL;
    if (n->kind != VC_CFG_NULL && n->kind != VC_CFG_MISSING) {
        n->s = vc_malloc(len + 1);
        if (!n->s) { vc_cfg_node_free(n); return NULL; }
        memcpy(n->s, s, len);
        n->s[len] = 0;
    }
    return n;
}

vc_cfg_node *vc_cfg_scalar_yaml(const char *s, size_t len) { return typed_scalar(s, len, 0); }

int vc_cfg_is_interp(const char *s) { return s && strstr(s, "${") != NULL; }

int vc_cfg_node_is_interp(const vc_cfg_node *n) {
    return n->kind == VC_CFG_STR && !n->lit && vc_cfg_is_interp(n->s);
}

/* ---- Hydra override values --------------------------------------------------------------------- */

struct vparser {
    const char *s, *p, *whole;
};

static void skip_ws(struct vparser *v) {
    while (*v->p == ' ' || *v->p == '\t') v->p++;
}

static vc_cfg_node *parse_element(struct vparser *v, int nested);

static vc_cfg_node *parse_quoted(struct vparser *v) {
    char q = *v->p++;
    size_t cap = strlen(v->p) + 1, o = 0;
    char *buf = vc_malloc(cap);
    if (!buf) return NULL;
    while (*v->p && *v->p != q) {
        if (*v->p == '\\' && (v->p[1] == q || v->p[1] == '\\')) v->p++;
        buf[o++] = *v->p++;
    }
    if (*v->p != q) {
        free(buf);
        vc_fail(VC_ERR_ARG, "unterminated %c-quoted string in '%s'", q, v->whole);
        return NULL;
    }
    v->p++;
    vc_cfg_node *n = vc_cfg_scalar_str(buf, o);
    free(buf);
    return n;
}

/* Scans an unquoted primitive; inside [..] / {..} it stops at , ] } (and : for map keys). */
static size_t scan_primitive(struct vparser *v, int nested, int key) {
    const char *p = v->p;
    int depth = 0;
    while (*p) {
        if (p[0] == '$' && p[1] == '{') { depth++; p += 2; continue; }
        if (*p == '}' && depth > 0) { depth--; p++; continue; }
        if (depth == 0 && nested && (*p == ',' || *p == ']' || *p == '}')) break;
        if (depth == 0 && key && *p == ':') break;
        if (*p == '\\' && p[1]) p++;
        p++;
    }
    return (size_t)(p - v->p);
}

static vc_cfg_node *parse_primitive(struct vparser *v, int nested) {
    size_t len = scan_primitive(v, nested, 0);
    const char *s = v->p;
    v->p += len;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    if (!nested && memchr(s, ',', len) && !memmem(s, len, "${", 2)) {
        vc_fail(VC_ERR_ARG, "ambiguous value '%s': quote it ('a,b') or write a list [a,b]", v->whole);
        return NULL;
    }
    /* unescape \x -> x outside interpolations */
    char *buf = vc_malloc(len + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len && strchr("\\,[]{}()=: '\"", s[i + 1])) i++;
        buf[o++] = s[i];
    }
    buf[o] = 0;
    vc_cfg_node *n = vc_cfg_is_interp(buf) ? vc_cfg_scalar_str(buf, o) : typed_scalar(buf, o, 1);
    free(buf);
    return n;
}

static vc_cfg_node *parse_list(struct vparser *v) {
    vc_cfg_node *list = vc_cfg_node_new(VC_CFG_LIST);
    if (!list) return NULL;
    v->p++;
    skip_ws(v);
    if (*v->p == ']') { v->p++; return list; }
    for (;;) {
        vc_cfg_node *e = parse_element(v, 1);
        if (!e || vc_cfg_list_push(list, e) != VC_OK) goto fail;
        skip_ws(v);
        if (*v->p == ',') { v->p++; continue; }
        if (*v->p == ']') { v->p++; return list; }
        vc_fail(VC_ERR_ARG, "expected ',' or ']' at offset %d in '%s'", (int)(v->p - v->s), v->whole);
        goto fail;
    }
fail:
    vc_cfg_node_free(list);
    return NULL;
}

static vc_cfg_node *parse_dict(struct vparser *v) {
    vc_cfg_node *map = vc_cfg_node_new(VC_CFG_MAP);
    if (!map) return NULL;
    v->p++;
    skip_ws(v);
    if (*v->p == '}') { v->p++; return map; }
    for (;;) {
        skip_ws(v);
        size_t len = scan_primitive(v, 1, 1);
        const char *k = v->p;
        v->p += len;
        while (len && (k[len - 1] == ' ' || k[len - 1] == '\t')) len--;
        if (!len || *v->p != ':') {
            vc_fail(VC_ERR_ARG, "expected 'key: value' at offset %d in '%s'", (int)(k - v->s), v->whole);
            goto fail;
        }
        v->p++;
        char *key = vc_malloc(len + 1);
        if (!key) goto fail;
        memcpy(key, k, len);
        key[len] = 0;
        vc_cfg_node *e = parse_element(v, 1);
        vc_status st = e ? vc_cfg_map_put(map, key, e) : VC_ERR_ARG;
        free(key);
        if (st != VC_OK) goto fail;
        skip_ws(v);
        if (*v->p == ',') { v->p++; continue; }
        if (*v->p == '}') { v->p++; return map; }
        vc_fail(VC_ERR_ARG, "expected ',' or '}' at offset %d in '%s'", (int)(v->p - v->s), v->whole);
        goto fail;
    }
fail:
    vc_cfg_node_free(map);
    return NULL;
}

static vc_cfg_node *parse_element(struct vparser *v, int nested) {
    skip_ws(v);
    if (*v->p == '[') return parse_list(v);
    if (*v->p == '{') return parse_dict(v);
    if (*v->p == '\'' || *v->p == '"') {
        vc_cfg_node *n = parse_quoted(v);
        /* 'a''b' style concatenation is rare; text after a closing quote is an error */
        return n;
    }
    return parse_primitive(v, nested);
}

vc_cfg_node *vc_cfg_parse_value(const char *s) {
    struct vparser v = { s, s, s };
    vc_cfg_node *n = parse_element(&v, 0);
    if (!n) return NULL;
    skip_ws(&v);
    if (*v.p) {
        vc_cfg_node_free(n);
        vc_fail(VC_ERR_ARG, "unexpected text '%s' after the value in '%s'", v.p, s);
        return NULL;
    }
    return n;
}

/* ---- emitting ---------------------------------------------------------------------------------- */

int vc_cfg_str_needs_quote(const char *s) {
    size_t len = strlen(s);
    if (!len) return 1;
    vc_cfg_node *t = typed_scalar(s, len, 0);
    int typed = !t || t->kind != VC_CFG_STR;
    vc_cfg_node_free(t);
    if (typed) return 1;
    if (strchr("-?:,[]{}#&*!|>'\"%@` \t", s[0])) {
        /* "-x" and ":x" style starts are fine in YAML only when followed by a non-space; keep it simple */
        return 1;
    }
    if (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == ':') return 1;
    if (strstr(s, ": ") || strstr(s, " #") || strstr(s, ":\t")) return 1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 1;
    return 0;
}

void vc_cfg_format_float(double f, char *buf, size_t n) {
    if (isnan(f)) { snprintf(buf, n, ".nan"); return; }
    if (isinf(f)) { snprintf(buf, n, f < 0 ? "-.inf" : ".inf"); return; }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, f);
        if (strtod(buf, NULL) == f) break;
    }
    if (!strpbrk(buf, ".eE")) {
        size_t l = strlen(buf);
        if (l + 3 <= n) memcpy(buf + l, ".0", 3);
    } else if (!strchr(buf, '.')) {
        /* 1e-06 -> 1.0e-06: both read back as floats; keep verl's look */
        char *e = strpbrk(buf, "eE");
        char tail[32];
        snprintf(tail, sizeof tail, "%s", e);
        *e = 0;
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, ".0%s", tail);
    }
}
