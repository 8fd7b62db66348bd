/* Strict JSON syntax checker that says what was expected and where; used to explain a JSONL line
 * that does not parse (cJSON only reports a position). */
#include "verlc/data.h"
#include <stdio.h>
#include <string.h>

#define CHECK_MAX_DEPTH 512

typedef struct jc {
    const char *s;
    size_t n, i;
    int nonfinite;
    const char *err; /* static text of the first error */
    size_t err_at;
} jc;

static int fail(jc *c, const char *what) {
    if (!c->err) {
        c->err = what;
        c->err_at = c->i;
    }
    return 0;
}

static void ws(jc *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int lit(jc *c, const char *w) {
    size_t k = strlen(w);
    if (c->n - c->i < k || memcmp(c->s + c->i, w, k)) return fail(c, "invalid literal");
    c->i += k;
    return 1;
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static int number(jc *c) {
    if (c->s[c->i] == '-') {
        c->i++;
        if (c->nonfinite && c->n - c->i >= 8 && !memcmp(c->s + c->i, "Infinity", 8)) {
            c->i += 8;
            return 1;
        }
    }
    if (c->i >= c->n || !is_digit(c->s[c->i])) return fail(c, "expected digit");
    if (c->s[c->i] == '0') {
        c->i++;
        if (c->i < c->n && is_digit(c->s[c->i])) return fail(c, "leading zero in number");
    } else {
        while (c->i < c->n && is_digit(c->s[c->i])) c->i++;
    }
    if (c->i < c->n && c->s[c->i] == '.') {
        c->i++;
        if (c->i >= c->n || !is_digit(c->s[c->i])) return fail(c, "expected digit after '.'");
        while (c->i < c->n && is_digit(c->s[c->i])) c->i++;
    }
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
        if (c->i >= c->n || !is_digit(c->s[c->i])) return fail(c, "expected digit in exponent");
        while (c->i < c->n && is_digit(c->s[c->i])) c->i++;
    }
    return 1;
}

static int hex4(jc *c) {
    for (int k = 0; k < 4; k++, c->i++) {
        char h = c->i < c->n ? c->s[c->i] : 0;
        if (!is_digit(h) && !(h >= 'a' && h <= 'f') && !(h >= 'A' && h <= 'F'))
            return fail(c, "expected 4 hex digits after \\u");
    }
    return 1;
}

/* One UTF-8 sequence starting at c->i (a lead byte >= 0x80). */
static int utf8(jc *c) {
    const unsigned char *u = (const unsigned char *)c->s;
    unsigned char b = u[c->i];
    int len = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 0;
    if (!len || (b >= 0xF5)) return fail(c, "invalid UTF-8 in string");
    if (c->n - c->i < (size_t)len) return fail(c, "truncated UTF-8 in string");
    for (int k = 1; k < len; k++)
        if ((u[c->i + k] & 0xC0) != 0x80) return fail(c, "invalid UTF-8 in string");
    if ((b == 0xE0 && u[c->i + 1] < 0xA0) || (b == 0xF0 && u[c->i + 1] < 0x90) ||
        (b == 0xF4 && u[c->i + 1] >= 0x90) || (b == 0xED && u[c->i + 1] >= 0xA0))
        return fail(c, "invalid UTF-8 in string");
    c->i += (size_t)len;
    return 1;
}

static int string(jc *c) {
    c->i++; /* opening quote */
    while (c->i < c->n) {
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '"') {
            c->i++;
            return 1;
        }
        if (ch < 0x20) return fail(c, "control character in string");
        if (ch == '\\') {
            c->i++;
            char e = c->i < c->n ? c->s[c->i] : 0;
            if (e == 'u') {
                c->i++;
                if (c->i + 4 <= c->n && !memcmp(c->s + c->i, "0000", 4)) /* cJSON's strings end at a NUL: refused, not cut */
                    return fail(c, "a string holding U+0000 (\\u0000), which verlc cannot keep,");
                if (!hex4(c)) return 0;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                c->i++;
            } else {
                return fail(c, "invalid escape in string");
            }
        } else if (ch >= 0x80) {
            if (!utf8(c)) return 0;
        } else {
            c->i++;
        }
    }
    return fail(c, "unterminated string");
}

static int value(jc *c, int depth);

static int object(jc *c, int depth) {
    c->i++;
    ws(c);
    if (c->i < c->n && c->s[c->i] == '}') {
        c->i++;
        return 1;
    }
    for (;;) {
        ws(c);
        if (c->i >= c->n || c->s[c->i] != '"') return fail(c, "expected string key");
        if (!string(c)) return 0;
        ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') return fail(c, "expected ':'");
        c->i++;
        if (!value(c, depth + 1)) return 0;
        ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == '}') {
            c->i++;
            return 1;
        }
        return fail(c, "expected ',' or '}'");
    }
}

static int array(jc *c, int depth) {
    c->i++;
    ws(c);
    if (c->i < c->n && c->s[c->i] == ']') {
        c->i++;
        return 1;
    }
    for (;;) {
        if (!value(c, depth + 1)) return 0;
        ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == ']') {
            c->i++;
            return 1;
        }
        return fail(c, "expected ',' or ']'");
    }
}

static int value(jc *c, int depth) {
    if (depth > CHECK_MAX_DEPTH) return fail(c, "nesting too deep");
    ws(c);
    if (c->i >= c->n) return fail(c, "expected value");
    switch (c->s[c->i]) {
    case '{': return object(c, depth);
    case '[': return array(c, depth);
    case '"': return string(c);
    case 't': return lit(c, "true");
    case 'f': return lit(c, "false");
    case 'n': return lit(c, "null");
    case 'N': return c->nonfinite ? lit(c, "NaN") : fail(c, "expected value");
    case 'I': return c->nonfinite ? lit(c, "Infinity") : fail(c, "expected value");
    default:
        if (c->s[c->i] == '-' || is_digit(c->s[c->i])) return number(c);
        return fail(c, "expected value");
    }
}

/* 1-based column in characters (UTF-8 continuation bytes do not count). */
static size_t column_of(const char *s, size_t at) {
    size_t col = 1;
    for (size_t k = 0; k < at; k++)
        if (((unsigned char)s[k] & 0xC0) != 0x80) col++;
    return col;
}

int vc_json_diagnose(const char *s, size_t len, int allow_nonfinite, char *msg, size_t cap) {
    jc c = { .s = s, .n = len, .nonfinite = allow_nonfinite };
    if (value(&c, 0)) {
        ws(&c);
        if (c.i == c.n) return 1;
        fail(&c, "unexpected text after the value");
    }
    if (msg && cap) snprintf(msg, cap, "%s at column %zu", c.err, column_of(s, c.err_at));
    return 0;
}
