/* Python's printf-style formatting, str % values, as a template's '%' on a string runs it:
 * %[(key)][flags][width][.precision][length]type with the types s r a d i u o x X e E f F g G c and %%. */
#define _GNU_SOURCE
#include "tokenizer/jinja.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")
#define MAX_FIELD 100000  /* widths and precisions beyond this are refused (Python would print them) */

typedef struct { int minus, plus, space, alt, zero, esc; int64_t width, prec; } spec;  /* esc: a Markup's % */

/* `body` (n bytes, `chars` characters) padded to the spec's width: spaces before it (after it with '-') */
static void put_padded(jbuf *b, const spec *f, const char *body, size_t n, int64_t chars) {
    int64_t pad = f->width > chars ? f->width - chars : 0;
    if (!f->minus) for (int64_t i = 0; i < pad; i++) jbuf_putc(b, ' ');
    jbuf_put(b, body, n);
    if (f->minus) for (int64_t i = 0; i < pad; i++) jbuf_putc(b, ' ');
}

/* an integer: sign, prefix ('#': 0o / 0x / 0X), digits of at least `prec`, zeros to the width with '0' */
static void put_int(jbuf *b, const spec *f, int64_t v, char type) {
    char digits[72];
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    snprintf(digits, sizeof digits, type == 'o' ? "%llo" : type == 'x' ? "%llx" : type == 'X' ? "%llX" : "%llu",
             (unsigned long long)mag);
    const char *sign = v < 0 ? "-" : f->plus ? "+" : f->space ? " " : "";
    const char *prefix = !f->alt ? "" : type == 'o' ? "0o" : type == 'x' ? "0x" : type == 'X' ? "0X" : "";
    int64_t nd = (int64_t)strlen(digits), zeros = f->prec > nd ? f->prec - nd : 0;
    int64_t len = (int64_t)(strlen(sign) + strlen(prefix)) + zeros + nd;
    if (f->zero && !f->minus && f->width > len) zeros += f->width - len, len = f->width;
    jbuf tmp = { 0 };
    jbuf_puts(&tmp, sign);
    jbuf_puts(&tmp, prefix);
    for (int64_t i = 0; i < zeros; i++) jbuf_putc(&tmp, '0');
    jbuf_puts(&tmp, digits);
    if (tmp.oom) { b->oom = 1; free(tmp.p); return; }
    put_padded(b, f, tmp.p, tmp.n, len);
    free(tmp.p);
}

/* a float through C's printf, whose e / f / g output for these flags is Python's; nan without a sign */
static void put_float(jbuf *b, const spec *f, double x, char type) {
    char fmt[32], *out = NULL;
    snprintf(fmt, sizeof fmt, "%%%s%s%s%s%s*.*%c", f->minus ? "-" : "", f->plus ? "+" : "", f->space ? " " : "",
             f->alt ? "#" : "", f->zero && isfinite(x) ? "0" : "", type);
    if (isnan(x)) x = NAN;
    int n = asprintf(&out, fmt, (int)f->width, (int)(f->prec < 0 ? 6 : f->prec), x);
    if (n < 0) { b->oom = 1; return; }
    jbuf_put(b, out, (size_t)n);
    free(out);
}

/* ascii(): repr's text with every non-ASCII character escaped (\xNN, \uNNNN, \UNNNNNNNN) */
vc_status jinja_ascii_escape(jbuf *t) {
    jbuf o = { 0 };
    jbuf_put(&o, "", 0);
    const uint8_t *p = (const uint8_t *)t->p;
    utf8proc_ssize_t left = (utf8proc_ssize_t)t->n;
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) cp = *p, k = 1;
        char esc[16];
        if (cp < 0x80) jbuf_putc(&o, (char)cp);
        else {
            snprintf(esc, sizeof esc, cp <= 0xff ? "\\x%02x" : cp <= 0xffff ? "\\u%04x" : "\\U%08x", (unsigned)cp);
            jbuf_puts(&o, esc);
        }
        p += k, left -= k;
    }
    if (o.oom) { free(o.p); return OOM(); }
    free(t->p);
    *t = o;
    return VC_OK;
}

/* one conversion of value v */
static vc_status convert(jctx *c, const jnode *at, jbuf *b, const spec *f, char type, jv *v) {
    if (type == 's' || type == 'r' || type == 'a') {
        jbuf t = { 0 };
        jbuf_put(&t, "", 0);
        vc_status st = type == 's' ? jv_write_str(&t, v) : jv_write_repr(&t, v, 0);
        if (!st && type == 'a') st = jinja_ascii_escape(&t);
        if (!st && f->esc && !(v->t == JV_STR && v->is_safe)) {  /* Markup % value: str / repr of it escaped */
            jbuf e = { 0 };
            jbuf_put(&e, "", 0);
            jinja_html_escape_into(&e, t.p, t.n);
            free(t.p);
            t = e;
        }
        if (!st && t.oom) st = OOM();
        if (st) { free(t.p); return st; }
        size_t n = t.n;
        int64_t chars = (int64_t)utf8_count(t.p, t.n);
        if (f->prec >= 0 && chars > f->prec) {  /* the first prec characters */
            size_t i = 0;
            for (int64_t k = 0; k < f->prec; k++) { i++; while (i < n && ((unsigned char)t.p[i] & 0xC0) == 0x80) i++; }
            n = i, chars = f->prec;
        }
        put_padded(b, f, t.p, n, chars);
        free(t.p);
        return VC_OK;
    }
    if (v->t == JV_UNDEF) return jinja_undef_error(c, at, v);
    int is_int = v->t == JV_INT || v->t == JV_BOOL, is_num = is_int || v->t == JV_FLOAT;
    int64_t i = v->t == JV_INT ? v->u.i : v->t == JV_BOOL ? v->u.b : 0;
    if (type == 'c') {
        if (v->t == JV_STR && utf8_count(v->u.str.s, v->u.str.len) == 1) {
            put_padded(b, f, v->u.str.s, v->u.str.len, 1);
            return VC_OK;
        }
        if (!is_int) return jerr(c, at, VC_ERR_ARG, "%%c requires an int or a unicode character, not %s", jv_type_name(v));
        if (i < 0 || i > 0x10FFFF) return jerr(c, at, VC_ERR_ARG, "%%c arg not in range(0x110000)");
        uint8_t enc[4];
        utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)i, enc);
        put_padded(b, f, (const char *)enc, (size_t)(k > 0 ? k : 0), 1);
        return VC_OK;
    }
    if (strchr("diu", type)) {
        if (!is_num) return jerr(c, at, VC_ERR_ARG, "%%%c format: a real number is required, not %s", type, jv_type_name(v));
        if (v->t == JV_FLOAT) {
            if (!isfinite(v->u.f)) return jerr(c, at, VC_ERR_ARG, "cannot convert float %s to integer", isnan(v->u.f) ? "NaN" : "infinity");
            if (fabs(v->u.f) >= 9.2e18) return jerr(c, at, VC_ERR_UNSUPPORTED, "unsupported construct: %%d of a float beyond 64-bit integers");
            i = (int64_t)v->u.f;  /* int() truncates toward zero */
        }
        put_int(b, f, i, 'd');
        return VC_OK;
    }
    if (strchr("oxX", type)) {
        if (!is_int) return jerr(c, at, VC_ERR_ARG, "%%%c format: an integer is required, not %s", type, jv_type_name(v));
        put_int(b, f, i, type);
        return VC_OK;
    }
    if (!is_num) return jerr(c, at, VC_ERR_ARG, "must be real number, not %s", jv_type_name(v));
    put_float(b, f, v->t == JV_FLOAT ? v->u.f : (double)i, type);
    return VC_OK;
}

/* a width or precision: digits, or '*' taking the next value (an int) */
static vc_status field_num(jctx *c, const jnode *at, const char **p, const char *e, jv **vals, size_t nvals, size_t *next,
                           int64_t *out) {
    if (*p < e && **p == '*') {
        (*p)++;
        if (*next >= nvals) return jerr(c, at, VC_ERR_ARG, "not enough arguments for format string");
        jv *v = vals[(*next)++];
        if (v->t != JV_INT && v->t != JV_BOOL) return jerr(c, at, VC_ERR_ARG, "* wants int");
        *out = v->t == JV_INT ? v->u.i : v->u.b;
        return VC_OK;
    }
    int64_t n = 0;
    while (*p < e && **p >= '0' && **p <= '9') {
        n = n * 10 + (**p - '0');
        if (n > MAX_FIELD) return jerr(c, at, VC_ERR_ARG, "width or precision too big in a format string");
        (*p)++;
    }
    *out = n;
    return VC_OK;
}

/* one %-directive starting after the '%' at *p; `dict` is the mapping argument (or NULL) */
static vc_status directive(jctx *c, const jnode *at, jbuf *b, const char **p, const char *e, const char *start, jv **vals,
                           size_t nvals, size_t *next, jv *dict, int esc) {
    jv *v = NULL;
    spec f = { .prec = -1, .esc = esc };
    if (*p < e && **p == '%') { (*p)++; jbuf_putc(b, '%'); return VC_OK; }  /* only "%%" is a literal '%' */
    if (*p < e && **p == '(') {  /* %(key): the key up to the matching ')' */
        const char *k0 = ++*p;
        int depth = 1;
        while (*p < e && depth) depth += **p == '(' ? 1 : **p == ')' ? -1 : 0, (*p)++;
        if (depth) return jerr(c, at, VC_ERR_ARG, "incomplete format key");
        if (!dict) return jerr(c, at, VC_ERR_ARG, "format requires a mapping");
        jv *key = jv_str(k0, (size_t)(*p - 1 - k0));
        if (!key) return OOM();
        v = dict->t == JV_DICT ? jv_dict_getv(dict, key) : NULL;
        vc_status st = v ? VC_OK : jerr(c, at, VC_ERR_ARG, dict->t == JV_DICT ? "KeyError: '%s'" : "%s indices must be integers",
                                        dict->t == JV_DICT ? key->u.str.s : jv_type_name(dict));
        jv_unref(key);
        if (st) return st;
    }
    for (; *p < e && strchr("-+ #0", **p); (*p)++)
        **p == '-' ? (f.minus = 1) : **p == '+' ? (f.plus = 1) : **p == ' ' ? (f.space = 1) : **p == '#' ? (f.alt = 1) : (f.zero = 1);
    vc_status st = field_num(c, at, p, e, vals, nvals, next, &f.width);
    if (!st && f.width < 0) f.minus = 1, f.width = -f.width;
    if (!st && *p < e && **p == '.') { (*p)++; st = field_num(c, at, p, e, vals, nvals, next, &f.prec); }
    if (st) return st;
    if (f.width > MAX_FIELD || f.prec > MAX_FIELD) return jerr(c, at, VC_ERR_ARG, "width or precision too big in a format string");
    while (*p < e && strchr("hlL", **p)) (*p)++;
    if (*p >= e) return jerr(c, at, VC_ERR_ARG, "incomplete format");
    char type = *(*p)++;
    if (!v) {
        if (*next >= nvals) return jerr(c, at, VC_ERR_ARG, "not enough arguments for format string");
        v = vals[(*next)++];
    }
    if (!strchr("sradiuoxXeEfFgGc", type))
        return jerr(c, at, VC_ERR_ARG, "unsupported format character '%c' (0x%x) at index %zu", type >= 32 && type < 127 ? type : '?',
                    (unsigned char)type, utf8_count(start, (size_t)(*p - 1 - start)));
    if (jinja_work(1 + (size_t)(f.width + (f.prec > 0 ? f.prec : 0)) / 64)) return VC_OK;
    return convert(c, at, b, &f, type, v);
}

vc_status jinja_printf(jctx *c, const jnode *at, const jv *fmt, jv *arg, jv **out) {
    /* a tuple gives the values; any other value is the one value, and a mapping-like one (dict, list: what has
     * __getitem__ and is not a str or tuple) also the mapping for %(key) that excuses values left unused */
    jv **vals = arg->t == JV_LIST && arg->is_tuple ? arg->u.list.items : &arg;
    size_t nvals = arg->t == JV_LIST && arg->is_tuple ? arg->u.list.n : 1, next = 0;
    jv *dict = (arg->t == JV_DICT || (arg->t == JV_LIST && !arg->is_tuple) || arg->t == JV_UNDEF) ? arg : NULL;
    const char *p = fmt->u.str.s, *e = p + fmt->u.str.len;
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    vc_status st = VC_OK;
    jinja_work(fmt->u.str.len / 64);
    while (p < e && !st) {
        const char *pc = memchr(p, '%', (size_t)(e - p));
        jbuf_put(&b, p, (size_t)((pc ? pc : e) - p));
        if (!pc) break;
        p = pc + 1;
        st = directive(c, at, &b, &p, e, fmt->u.str.s, vals, nvals, &next, dict, fmt->is_safe);
        if (!st && jinja_over()) st = jerr(c, at, VC_ERR_ARG, JINJA_LIMIT_MSG, JINJA_MAX_STEPS);
        if (!st && b.n > JINJA_MAX_OUT) st = jerr(c, at, VC_ERR_ARG, "formatted string too large");
    }
    if (!st && next < nvals && !dict) st = jerr(c, at, VC_ERR_ARG, "not all arguments converted during string formatting");
    if (!st && b.oom) st = OOM();
    if (st) { free(b.p); return st; }
    *out = jv_str_take(b.p, b.n);
    if (*out) (*out)->is_safe = fmt->is_safe;
    return *out ? VC_OK : OOM();
}
