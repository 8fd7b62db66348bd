/* Python's ways with text, for reading model output as later verl's tool parsers do (tool_parser.c): spans of
 * a decoded response, substring search, str.isspace / str.strip, json.loads, int() / float() of a string,
 * ast.literal_eval of the literals a model writes, and the findall scans of their non-greedy regexes. */
#include "py_text.h"
#include "verlc/json.h"
#include "verlc/core.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *pt_find(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    for (; p && p + n <= end; p++) {
        p = memchr(p, lit[0], (size_t)(end - p));
        if (!p || p + n > end) return NULL;
        if (!memcmp(p, lit, n)) return p;
    }
    return NULL;
}

int pt_starts(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    return p + n <= end && !memcmp(p, lit, n);
}

/* bytes of the whitespace character at p (str.isspace / regex \s), 0 if none */
static int pt_space_at(const char *p, const char *end) {
    unsigned char c = (unsigned char)*p;
    if (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x80 || p + 1 >= end) return 0;
    unsigned char d = (unsigned char)p[1];
    if (c == 0xc2) return d == 0x85 || d == 0xa0 ? 2 : 0;
    if (p + 2 >= end) return 0;
    unsigned char e = (unsigned char)p[2];
    if (c == 0xe1 && d == 0x9a && e == 0x80) return 3;                                  /* U+1680 */
    if (c == 0xe2 && d == 0x80 && (e <= 0x8a || e == 0xa8 || e == 0xa9 || e == 0xaf)) return 3;
    if (c == 0xe2 && d == 0x81 && e == 0x9f) return 3;                                  /* U+205F */
    if (c == 0xe3 && d == 0x80 && e == 0x80) return 3;                                  /* U+3000 */
    return 0;
}

const char *pt_skip_space(const char *p, const char *end) {
    for (int k; p < end && (k = pt_space_at(p, end)); p += k) {}
    return p;
}

static int pt_hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
}

/* str.pt_strip() */
pt_span pt_strip(pt_span s) {
    const char *a = pt_skip_space(s.p, s.p + s.n), *b = s.p + s.n;
    while (b > a) { /* the last character: step back over UTF-8 continuation bytes */
        const char *c = b - 1;
        while (c > a && ((unsigned char)*c & 0xc0) == 0x80) c--;
        if (pt_space_at(c, b) != b - c) break;
        b = c;
    }
    return (pt_span){ a, (size_t)(b - a) };
}

cJSON *pt_str_of(pt_span s) {
    char *t = malloc(s.n + 1);
    if (!t) return NULL;
    memcpy(t, s.p, s.n);
    t[s.n] = 0;
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j;
}

int pt_json_number_repr(const cJSON *v, char *buf, size_t cap) {
    if (!cJSON_IsNumber(v)) return 0;
    const char *tok = v->valuestring;
    if (vc_json_number_is_float(v)) vc_py_float_repr(v->valuedouble, buf, cap);
    else if (tok) snprintf(buf, cap, "%s", strcmp(tok, "-0") ? tok : "0"); /* Python's int, digit for digit */
    else snprintf(buf, cap, "%.0f", v->valuedouble);
    return 1;
}

/* ---- repr() / str() of what json.loads made ---- */

typedef pt_buf sbuf;

void pt_buf_put(pt_buf *b, const char *s, size_t k) {
    if (b->nomem) return;
    if (b->n + k + 1 > b->cap) {
        size_t cap = (b->n + k + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->nomem = 1;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, s, k);
    b->n += k;
    b->s[b->n] = 0;
}

static void put(sbuf *b, const char *s) { pt_buf_put(b, s, strlen(s)); }

/* repr() of a JSON value as json.loads gives it (a tool call's numbers know whether they were ints or floats) */
static void py_value(sbuf *b, const cJSON *v) {
    char num[40];
    if (cJSON_IsNumber(v)) {
        pt_json_number_repr(v, num, sizeof num);
        put(b, num);
    } else if (cJSON_IsString(v)) {
        int dq = strchr(v->valuestring, '\'') && !strchr(v->valuestring, '"');
        put(b, dq ? "\"" : "'");
        for (const char *s = v->valuestring; *s; s++) {
            char c[8] = { *s, 0 };
            if (*s == '\\') strcpy(c, "\\\\");
            else if (*s == '\n') strcpy(c, "\\n");
            else if (*s == '\t') strcpy(c, "\\t");
            else if (*s == '\r') strcpy(c, "\\r");
            else if (*s == '\'' && !dq) strcpy(c, "\\'");
            put(b, c);
        }
        put(b, dq ? "\"" : "'");
    } else if (cJSON_IsBool(v)) put(b, cJSON_IsTrue(v) ? "True" : "False");
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        int obj = cJSON_IsObject(v), first = 1;
        put(b, obj ? "{" : "[");
        for (const cJSON *e = v->child; e; e = e->next, first = 0) {
            if (!first) put(b, ", ");
            if (obj) {
                cJSON key = { .type = cJSON_String, .valuestring = e->string };
                py_value(b, &key);
                put(b, ": ");
            }
            py_value(b, e);
        }
        put(b, obj ? "}" : "]");
    } else put(b, "None");
}

char *pt_py_repr(const cJSON *v, int as_str) {
    sbuf b = { 0 };
    if (as_str && cJSON_IsString(v)) put(&b, v->valuestring);
    else py_value(&b, v);
    if (!b.nomem && !b.s) put(&b, "");
    if (b.nomem) free(b.s);
    return b.nomem ? NULL : b.s;
}

/* json.loads: the whole pt_span one JSON value (surrounding whitespace allowed), else NULL */
cJSON *pt_json_loads(pt_span s) {
    char *t = malloc(s.n + 1);
    if (!t) return NULL;
    memcpy(t, s.p, s.n);
    t[s.n] = 0;
    cJSON *j = cJSON_ParseWithOpts(t, NULL, 1);
    if (j) vc_json_keep_numbers(j, t, s.n); /* json.loads tells 3 from 3.0 */
    vc_json_py_keys(j);                       /* ... and keeps a repeated key's last value */
    free(t);
    return j;
}

/* strip, then json.loads, else the stripped text (seed, minimax and glm values) */
cJSON *pt_json_or_text(pt_span s) {
    pt_span v = pt_strip(s);
    cJSON *j = pt_json_loads(v);
    return j ? j : pt_str_of(v);
}

/* s with the underscores Python allows between digits removed, into buf ("1_000"); 0 if one is misplaced */
static int pt_py_digits(pt_span s, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] == '_') {
            if (!(i > 0 && i + 1 < s.n && pt_hexval(s.p[i - 1]) >= 0 && pt_hexval(s.p[i + 1]) >= 0)) return 0;
            continue;
        }
        if (k + 1 >= cap) return 0;
        buf[k++] = s.p[i];
    }
    buf[k] = 0;
    return k > 0;
}

/* int(text): surrounding whitespace, a sign, decimal digits (underscores between them) */
int pt_py_int(pt_span s, double *out) {
    pt_span v = pt_strip(s);
    char buf[128];
    if (!pt_py_digits(v, buf, sizeof buf)) return 0;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!*p) return 0;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return 0;
    *out = strtod(buf, NULL);
    return 1;
}

/* float(text): a decimal float, inf / infinity / nan (any case), underscores between digits */
int pt_py_float(pt_span s, double *out) {
    pt_span v = pt_strip(s);
    char buf[128];
    if (!pt_py_digits(v, buf, sizeof buf)) return 0;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity") || !strcasecmp(p, "nan")) {
        *out = strtod(buf, NULL);
        return 1;
    }
    int digits = 0;
    const char *q = p;
    for (; *q >= '0' && *q <= '9'; q++) digits++;
    if (*q == '.')
        for (q++; *q >= '0' && *q <= '9'; q++) digits++;
    if (!digits) return 0;
    if (*q == 'e' || *q == 'E') {
        q++;
        q += *q == '+' || *q == '-';
        if (*q < '0' || *q > '9') return 0;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q) return 0;
    *out = strtod(buf, NULL);
    return 1;
}

/* ---- ast.literal_eval (the literals a model writes: strings, numbers, True / False / None, lists, tuples,
 * dicts; sets, bytes, complex numbers and string concatenation are not taken) ---- */
typedef struct {
    const char *p, *end;
    int depth;
} lit;

static void lit_ws(lit *L) {
    while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r' || *L->p == '\f'))
        L->p++;
}

static cJSON *lit_value(lit *L);

static void put_utf8(char *o, size_t *k, unsigned long u) {
    if (u < 0x80) o[(*k)++] = (char)u;
    else if (u < 0x800) o[(*k)++] = (char)(0xc0 | u >> 6), o[(*k)++] = (char)(0x80 | (u & 63));
    else if (u < 0x10000)
        o[(*k)++] = (char)(0xe0 | u >> 12), o[(*k)++] = (char)(0x80 | (u >> 6 & 63)),
        o[(*k)++] = (char)(0x80 | (u & 63));
    else
        o[(*k)++] = (char)(0xf0 | u >> 18), o[(*k)++] = (char)(0x80 | (u >> 12 & 63)),
        o[(*k)++] = (char)(0x80 | (u >> 6 & 63)), o[(*k)++] = (char)(0x80 | (u & 63));
}

static cJSON *lit_string(lit *L) {
    char q = *L->p++;
    char *o = malloc((size_t)(L->end - L->p) * 2 + 8);
    size_t k = 0;
    if (!o) return NULL;
    while (L->p < L->end && *L->p != q) {
        char c = *L->p++;
        if (c == '\n') break; /* an unterminated single-line string */
        if (c != '\\' || L->p >= L->end) {
            o[k++] = c;
            continue;
        }
        char e = *L->p++;
        static const char FROM[] = "nrtabfv0\\'\"", TO[] = "\n\r\t\a\b\f\v\0\\'\"";
        const char *f = e ? strchr(FROM, e) : NULL;
        int nx = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (f) o[k++] = TO[f - FROM];
        else if (e == '\n') {} /* a line continuation */
        else if (nx) {
            unsigned long u = 0;
            for (int i = 0; i < nx; i++, L->p++) {
                int h = L->p < L->end ? pt_hexval(*L->p) : -1;
                if (h < 0) return free(o), NULL;
                u = u * 16 + (unsigned long)h;
            }
            if (u > 0x10ffff) return free(o), NULL;
            put_utf8(o, &k, u);
        } else o[k++] = '\\', o[k++] = e; /* Python keeps an unknown escape as it is */
    }
    if (L->p >= L->end || *L->p != q) return free(o), NULL;
    L->p++;
    o[k] = 0;
    cJSON *j = memchr(o, 0, k) ? NULL : cJSON_CreateString(o); /* NUL inside: not representable */
    free(o);
    return j;
}

static cJSON *lit_number(lit *L) {
    const char *a = L->p;
    int hex = L->end - a > 1 && a[0] == '0' && ((a[1] | 32) == 'x' || (a[1] | 32) == 'o' || (a[1] | 32) == 'b');
    for (; L->p < L->end; L->p++) {
        char c = *L->p;
        int sign = (c == '+' || c == '-') && !hex && L->p > a && (L->p[-1] | 32) == 'e';
        if (!(sign || c == '.' || c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'))) break;
    }
    pt_span s = { a, (size_t)(L->p - a) };
    double v;
    char buf[128];
    if (hex) {
        int base = (a[1] | 32) == 'x' ? 16 : (a[1] | 32) == 'o' ? 8 : 2;
        char *e;
        if (!pt_py_digits((pt_span){ a + 2, s.n - 2 }, buf, sizeof buf)) return NULL;
        v = (double)strtoull(buf, &e, base);
        return *e ? NULL : cJSON_CreateNumber(v);
    }
    if (s.n > 1 && a[0] == '0' && pt_py_int(s, &v) && v != 0) return NULL; /* 012: not Python 3 */
    return pt_py_float(s, &v) && isfinite(v) ? cJSON_CreateNumber(v) : NULL;
}

/* items up to close ([ ( {): a list (also a tuple) or a dict; "(x)" is x */
static cJSON *lit_seq(lit *L, char close) {
    int dict = close == '}', tuple = close == ')', n = 0, comma = 0;
    cJSON *out = dict ? cJSON_CreateObject() : cJSON_CreateArray(), *one = NULL;
    for (lit_ws(L); out && L->p < L->end && *L->p != close; lit_ws(L)) {
        cJSON *k = NULL, *v = lit_value(L);
        if (v && dict) {
            lit_ws(L);
            k = v;
            v = cJSON_IsString(k) && L->p < L->end && *L->p == ':' ? (L->p++, lit_value(L)) : NULL;
        }
        if (!v || (dict && !k)) {
            cJSON_Delete(k), cJSON_Delete(v), cJSON_Delete(out);
            return NULL;
        }
        if (dict) {
            cJSON_DeleteItemFromObjectCaseSensitive(out, k->valuestring); /* a later key wins */
            cJSON_AddItemToObject(out, k->valuestring, v);
            cJSON_Delete(k);
        } else cJSON_AddItemToArray(out, v), one = v;
        n++;
        lit_ws(L);
        comma = L->p < L->end && *L->p == ',';
        if (comma) L->p++;
        else break;
    }
    lit_ws(L);
    if (!out || L->p >= L->end || *L->p != close) return cJSON_Delete(out), NULL;
    L->p++;
    if (tuple && n == 1 && !comma) { /* parentheses around one value */
        cJSON_DetachItemViaPointer(out, one);
        cJSON_Delete(out);
        return one;
    }
    return out;
}

static cJSON *lit_value(lit *L) {
    lit_ws(L);
    if (L->p >= L->end || ++L->depth > 100) return NULL;
    cJSON *v = NULL;
    char c = *L->p;
    if (c == '\'' || c == '"') v = lit_string(L);
    else if (c == '[' || c == '(' || c == '{') L->p++, v = lit_seq(L, c == '[' ? ']' : c == '(' ? ')' : '}');
    else if (pt_starts(L->p, L->end, "True")) L->p += 4, v = cJSON_CreateTrue();
    else if (pt_starts(L->p, L->end, "False")) L->p += 5, v = cJSON_CreateFalse();
    else if (pt_starts(L->p, L->end, "None")) L->p += 4, v = cJSON_CreateNull();
    else if (c == '-' || c == '+') { /* unary signs on a number */
        L->p++;
        v = lit_value(L);
        if (!cJSON_IsNumber(v)) cJSON_Delete(v), v = NULL;
        else if (c == '-') cJSON_SetNumberValue(v, -v->valuedouble);
    } else if ((c >= '0' && c <= '9') || c == '.') v = lit_number(L);
    if (v && L->p < L->end && (((*L->p | 32) >= 'a' && (*L->p | 32) <= 'z') || *L->p == '_')) /* "Truex" */
        cJSON_Delete(v), v = NULL;
    L->depth--;
    return v;
}

cJSON *pt_literal_eval(pt_span s) {
    lit L = { s.p, s.p + s.n, 0 };
    while (L.p < L.end && (*L.p == ' ' || *L.p == '\t')) L.p++;
    cJSON *v = lit_value(&L);
    lit_ws(&L);
    if (v && L.p != L.end) cJSON_Delete(v), v = NULL;
    return v;
}

/* findall of "open(.*?)close|open(.*?)$" (lazy: $ before a final newline) or "open(.*)$" (greedy): the next
 * body from p, and where the search goes on */
int pt_next_open(const char *p, const char *end, const char *open, const char *close, int greedy_tail, pt_span *body,
                     const char **next) {
    const char *a = pt_find(p, end, open);
    if (!a) return 0;
    a += strlen(open);
    const char *b = pt_find(a, end, close);
    if (b) *body = (pt_span){ a, (size_t)(b - a) }, *next = b + strlen(close);
    else {
        const char *e = !greedy_tail && end > a && end[-1] == '\n' ? end - 1 : end;
        *body = (pt_span){ a, (size_t)(e - a) }, *next = end;
    }
    return 1;
}

/* findall of "open(.*?)close": the next body from p and where the search goes on; 0 when none */
int pt_next_block(const char *p, const char *end, const char *open, const char *close, pt_span *body,
                  const char **next) {
    const char *a = pt_find(p, end, open), *b = a ? pt_find(a + strlen(open), end, close) : NULL;
    if (!b) return 0;
    a += strlen(open);
    *body = (pt_span){ a, (size_t)(b - a) }, *next = b + strlen(close);
    return 1;
}

/* the text before `at`, or all of it */
char *pt_dup(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) memcpy(s, p, n), s[n] = 0;
    return s;
}

/* text with every occurrence of each of the tokens (NULL entries skipped) removed, in place */
size_t pt_remove_all(char *t, size_t n, const char *const *tok, int ntok) {
    for (int i = 0; i < ntok; i++) {
        size_t m = tok[i] ? strlen(tok[i]) : 0, w = 0;
        if (!m) continue;
        for (size_t r = 0; r < n;)
            if (r + m <= n && !memcmp(t + r, tok[i], m)) r += m;
            else t[w++] = t[r++];
        n = w;
        t[n] = 0;
    }
    return n;
}

