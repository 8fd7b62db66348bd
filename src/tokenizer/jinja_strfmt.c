/* Python's str.format as the sandbox runs it: replacement fields {name.attr[key]!conversion:spec} with automatic or
 * explicit numbering, nested fields in the spec, and the format mini-language for str, int, bool and float values
 * ([[fill]align][sign][z][#][0][width][,|_][.precision][type]). */
#include "tokenizer/jinja.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")
#define MAX_FIELD 100000

typedef struct {
    const char *fill; size_t fill_len;     /* one character */
    char align, sign, type, grouping;      /* 0 where not given */
    int alt, zero, z, fill_given;
    int64_t width, prec;                   /* -1 where not given */
} fspec;

typedef struct { jctx *c; const jnode *at; jv **args; char **kw; int n; int auto_idx; int manual; } fctx;

static vc_status parse_spec(fctx *F, const char *s, size_t len, fspec *f) {
    const char *p = s, *e = s + len;
    *f = (fspec){ .fill = " ", .fill_len = 1, .width = -1, .prec = -1 };
    size_t k = 1;
    while (p + k < e && ((unsigned char)p[k] & 0xC0) == 0x80) k++;
    if (p + k < e && strchr("<>=^", p[k])) f->fill = p, f->fill_len = k, f->align = p[k], p += k + 1, f->fill_given = 1;
    else if (p < e && strchr("<>=^", *p)) f->align = *p++;
    if (p < e && strchr("+- ", *p)) f->sign = *p++;
    if (p < e && *p == 'z') f->z = 1, p++;
    if (p < e && *p == '#') f->alt = 1, p++;
    if (p < e && *p == '0') { f->zero = 1; p++; }
    if (p < e && *p >= '0' && *p <= '9') {
        f->width = 0;
        while (p < e && *p >= '0' && *p <= '9') if ((f->width = f->width * 10 + (*p++ - '0')) > MAX_FIELD) goto big;
    }
    if (p < e && (*p == ',' || *p == '_')) f->grouping = *p++;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || *p < '0' || *p > '9') return jerr(F->c, F->at, VC_ERR_ARG, "Format specifier missing precision");
        f->prec = 0;
        while (p < e && *p >= '0' && *p <= '9') if ((f->prec = f->prec * 10 + (*p++ - '0')) > MAX_FIELD) goto big;
    }
    if (p < e) f->type = *p++;
    if (p < e) return jerr(F->c, F->at, VC_ERR_ARG, "Invalid format specifier '%.*s'", (int)len, s);
    return VC_OK;
big:
    return jerr(F->c, F->at, VC_ERR_ARG, "Too many decimal digits in format string");
}

/* body (sign and prefix apart, for '=') padded to the width with the fill */
static void put_aligned(jbuf *b, const fspec *f, char def_align, const char *sign, const char *body, size_t n) {
    int64_t chars = (int64_t)(utf8_count(sign, strlen(sign)) + utf8_count(body, n));
    int64_t pad = f->width > chars ? f->width - chars : 0, left = 0;
    char al = f->align ? f->align : def_align;
    if (al == '>') left = pad;
    else if (al == '^') left = pad / 2;
    if (al == '=') jbuf_puts(b, sign);
    for (int64_t i = 0; i < (al == '=' ? pad : left); i++) jbuf_put(b, f->fill, f->fill_len);
    if (al != '=') jbuf_puts(b, sign);
    jbuf_put(b, body, n);
    for (int64_t i = al == '=' ? pad : left; i < pad; i++) jbuf_put(b, f->fill, f->fill_len);
}

/* digits with a separator every `every` digits from the right (in the integer part: up to the first '.' or 'e') */
static void group_digits(jbuf *o, const char *d, char sep, int every) {
    size_t n = strcspn(d, ".eE%");
    size_t lead = strspn(d, "0123456789abcdefABCDEF") < n ? 0 : n;
    for (size_t i = 0; i < n; i++) {
        jbuf_putc(o, d[i]);
        if (lead && i + 1 < n && (n - i - 1) % (size_t)every == 0) jbuf_putc(o, sep);
    }
    jbuf_puts(o, d + n);
}

/* zero padding ('=' with fill '0') of grouped digits: zeros joined to the digits and grouped with them, until the
 * number reaches the width ('{:05,}' of 1 is 0,001) */
static void zero_group(jbuf *d, const fspec *f, const char *sign, const char *digits, int every) {
    char z[256];
    size_t nz = 0, slen = utf8_count(sign, strlen(sign));
    for (;;) {
        d->n = 0;
        jbuf_put(d, "", 0);
        char *joined = malloc(nz + strlen(digits) + 1);
        if (!joined) { d->oom = 1; return; }
        memset(joined, '0', nz);
        strcpy(joined + nz, digits);
        group_digits(d, joined, f->grouping, every);
        free(joined);
        if ((int64_t)(d->n + slen) >= f->width || nz >= sizeof z) return;
        nz++;
    }
}

static const char *sign_of(const fspec *f, int neg) { return neg ? "-" : f->sign == '+' ? "+" : f->sign == ' ' ? " " : ""; }

static vc_status fmt_float(fctx *F, jbuf *b, const fspec *f, double x) {
    char t = f->type, buf[512];
    if (t && !strchr("eEfFgGn%", t)) return jerr(F->c, F->at, VC_ERR_ARG, "Unknown format code '%c' for object of type 'float'", t);
    int neg = signbit(x) && !isnan(x);
    double a = fabs(x);
    int64_t p = f->prec;
    if (!isfinite(a)) snprintf(buf, sizeof buf, "%s", isnan(a) ? (t && strchr("EFG", t) ? "NAN" : "nan") : (t && strchr("EFG", t) ? "INF" : "inf"));
    else if (t == '%') snprintf(buf, sizeof buf, f->alt ? "%#.*f%%" : "%.*f%%", (int)(p < 0 ? 6 : p), a * 100);
    else if (t) {  /* e E f F g G n through C's printf, whose output for these is Python's */
        char cf[8];
        snprintf(cf, sizeof cf, "%%%s.*%c", f->alt ? "#" : "", t == 'n' ? 'g' : t);
        snprintf(buf, sizeof buf, cf, (int)(p < 0 ? 6 : (p == 0 && strchr("gGn", t)) ? 1 : p), a);
    }
    else if (p < 0) { jbuf r = { 0 }; jbuf_fmt_float(&r, a); snprintf(buf, sizeof buf, "%s", r.p ? r.p : "?"); free(r.p); }
    else { /* no type, a precision: 'g' whose fixed form keeps a decimal digit and switches at exp >= p - 1 */
        int64_t pp = p ? p : 1;
        snprintf(buf, sizeof buf, "%.*e", (int)(pp - 1), a);
        int ex = atoi(strchr(buf, 'e') + 1);
        if (ex >= -4 && ex < pp - 1) {
            snprintf(buf, sizeof buf, "%.*f", (int)(pp - 1 - ex), a);
            size_t n = strlen(buf);
            if (!f->alt && strchr(buf, '.')) while (buf[n - 1] == '0' && buf[n - 2] != '.') buf[--n] = 0;
            if (!strchr(buf, '.')) strcat(buf, ".0");
        } else {
            snprintf(buf, sizeof buf, "%.*e", (int)(pp - 1), a);
            char *ep = strchr(buf, 'e'), tail[16], *q = ep;
            snprintf(tail, sizeof tail, "%s", ep);
            if (!f->alt && strchr(buf, '.')) {  /* trailing zeros of the mantissa, and its point if nothing follows it */
                while (q[-1] == '0') q--;
                if (q[-1] == '.') q--;
                strcpy(q, tail);
            }
        }
    }
    if (f->z && neg && !buf[strcspn(buf, "123456789")]) neg = 0;  /* 'z': a negative zero after rounding is 0 */
    if (f->alt && !t && isfinite(a) && !strchr(buf, '.')) {  /* '#': the point kept, 1.e+300 */
        char *ep = strchr(buf, 'e');
        size_t at = ep ? (size_t)(ep - buf) : strlen(buf);
        memmove(buf + at + 1, buf + at, strlen(buf + at) + 1);
        buf[at] = '.';
    }
    jbuf d = { 0 };
    jbuf_put(&d, "", 0);
    if (f->grouping && isfinite(a) && f->align == '=' && f->fill[0] == '0') zero_group(&d, f, sign_of(f, neg), buf, 3);
    else if (f->grouping && isfinite(a)) group_digits(&d, buf, f->grouping, 3);
    else jbuf_puts(&d, buf);
    if (d.oom) { free(d.p); return OOM(); }
    put_aligned(b, f, '>', sign_of(f, neg), d.p, d.n);
    free(d.p);
    return VC_OK;
}

static vc_status fmt_int(fctx *F, jbuf *b, const fspec *f, int64_t v) {
    char t = f->type ? f->type : 'd', digits[80];
    if (strchr("eEfFgG%", t)) return fmt_float(F, b, f, (double)v);
    if (!strchr("dnbcoxX", t)) return jerr(F->c, F->at, VC_ERR_ARG, "Unknown format code '%c' for object of type 'int'", t);
    if (f->prec >= 0) return jerr(F->c, F->at, VC_ERR_ARG, "Precision not allowed in integer format specifier");
    if (t == 'c') {
        if (f->sign || f->alt) return jerr(F->c, F->at, VC_ERR_ARG, "Sign or alternate form not allowed with integer format specifier 'c'");
        if (v < 0 || v > 0x10FFFF) return jerr(F->c, F->at, VC_ERR_ARG, "%%c arg not in range(0x110000)");
        uint8_t enc[4];
        utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)v, enc);
        put_aligned(b, f, '>', "", (const char *)enc, (size_t)(k > 0 ? k : 0));
        return VC_OK;
    }
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (t == 'b') {
        int i = 79;
        digits[i] = 0;
        do { digits[--i] = (char)('0' + (mag & 1)); mag >>= 1; } while (mag);
        memmove(digits, digits + i, (size_t)(80 - i));
    } else snprintf(digits, sizeof digits, t == 'o' ? "%llo" : t == 'x' ? "%llx" : t == 'X' ? "%llX" : "%llu", (unsigned long long)mag);
    jbuf d = { 0 };
    jbuf_put(&d, "", 0);
    const char *prefix = !f->alt ? "" : t == 'b' ? "0b" : t == 'o' ? "0o" : t == 'x' ? "0x" : t == 'X' ? "0X" : "";
    char sign[8];
    snprintf(sign, sizeof sign, "%s%s", sign_of(f, v < 0), prefix);
    if (f->grouping && f->align == '=' && f->fill[0] == '0') zero_group(&d, f, sign, digits, t == 'd' || t == 'n' ? 3 : 4);
    else if (f->grouping) group_digits(&d, digits, f->grouping, t == 'd' || t == 'n' ? 3 : 4);
    else jbuf_puts(&d, digits);
    if (d.oom) { free(d.p); return OOM(); }
    put_aligned(b, f, '>', sign, d.p, d.n);
    free(d.p);
    return VC_OK;
}

/* the spec's checks and its '0' flag for a value of a kind (number: an int or a float) */
static vc_status settle_spec(fctx *F, fspec *f, int number, int is_float) {
    char t = f->type;
    int float_type = is_float || (t && strchr("eEfFgG%", t));
    if (f->z && !(number && float_type)) return jerr(F->c, F->at, VC_ERR_ARG, "Negative zero coercion (z) not allowed in this format specifier");
    if (f->grouping == ',' && t && !strchr("deEfFgG%", t)) return jerr(F->c, F->at, VC_ERR_ARG, "Cannot specify ',' with '%c'.", t);
    if (f->grouping == '_' && t && !strchr("deEfFgG%bxXo", t)) return jerr(F->c, F->at, VC_ERR_ARG, "Cannot specify '_' with '%c'.", t);
    if (f->zero && !f->fill_given) f->fill = "0", f->fill_len = 1;  /* '0': zeros, and where no alignment is given */
    if (f->zero && !f->align && number) f->align = '=';              /* a number's padding between sign and digits */
    return VC_OK;
}

/* format(v, spec) */
static vc_status format_value(fctx *F, jbuf *b, jv *v, const char *spec, size_t len) {
    if (!len && v->t != JV_FLOAT) return jv_write_str(b, v);  /* an empty spec is str(v) (True, not 1) */
    fspec f;
    vc_status st = parse_spec(F, spec, len, &f);
    int number = v->t == JV_FLOAT || v->t == JV_INT || v->t == JV_BOOL;
    if (!st) st = settle_spec(F, &f, number, v->t == JV_FLOAT);
    if (st) return st;
    if (jinja_work(1 + (size_t)(f.width > 0 ? f.width : 0) / 64)) return VC_OK;
    if (v->t == JV_FLOAT) return fmt_float(F, b, &f, v->u.f);
    if (v->t == JV_INT || v->t == JV_BOOL) return fmt_int(F, b, &f, v->t == JV_INT ? v->u.i : v->u.b);
    if (v->t != JV_STR && v->t != JV_UNDEF)
        return jerr(F->c, F->at, VC_ERR_ARG, "unsupported format string passed to %s.__format__", jv_type_name(v));
    if (f.type && f.type != 's') return jerr(F->c, F->at, VC_ERR_ARG, "Unknown format code '%c' for object of type 'str'", f.type);
    if (f.sign || f.alt || f.grouping || f.align == '=')
        return jerr(F->c, F->at, VC_ERR_ARG, "invalid format specifier for a string (sign, '#', grouping or '=' alignment)");
    jbuf t = { 0 };
    jbuf_put(&t, "", 0);
    st = jv_write_str(&t, v);
    size_t n = t.n;
    if (!st && f.prec >= 0) {  /* the first prec characters */
        size_t i = 0;
        for (int64_t k = 0; k < f.prec && i < t.n; k++) { i++; while (i < t.n && ((unsigned char)t.p[i] & 0xC0) == 0x80) i++; }
        n = i;
    }
    if (!st) put_aligned(b, &f, '<', "", t.p, n);
    free(t.p);
    return st;
}

/* the value a field name names: an argument (auto, index or keyword) then .attr and [key] steps */
static vc_status field_value(fctx *F, const char *s, size_t len, jv **out) {
    const char *p = s, *e = s + len, *q = p;
    while (q < e && *q != '.' && *q != '[') q++;
    jv *cur = NULL;
    int64_t idx = -1;
    int digits = q > p;
    for (const char *d = p; d < q && digits; d++) digits = *d >= '0' && *d <= '9';
    if (q == p || digits) {
        if (q == p ? F->manual : F->auto_idx > 0)
            return jerr(F->c, F->at, VC_ERR_ARG, "cannot switch between automatic field numbering and manual field specification");
        if (q == p) F->auto_idx++, idx = F->auto_idx - 1;
        else { F->manual = 1; idx = 0; for (const char *d = p; d < q; d++) if ((idx = idx * 10 + (*d - '0')) > 1000000) break; }
        for (int i = 0, k = 0; i < F->n && !cur; i++) if (!F->kw || !F->kw[i]) { if (k++ == idx) cur = jv_ref(F->args[i]); }
        if (!cur) return jerr(F->c, F->at, VC_ERR_ARG, "Replacement index %lld out of range for positional args tuple", (long long)idx);
    } else {
        for (int i = 0; i < F->n && !cur; i++)
            if (F->kw && F->kw[i] && strlen(F->kw[i]) == (size_t)(q - p) && !memcmp(F->kw[i], p, (size_t)(q - p))) cur = jv_ref(F->args[i]);
        if (!cur) return jerr(F->c, F->at, VC_ERR_ARG, "KeyError: '%.*s'", (int)(q - p), p);
    }
    vc_status st = VC_OK;
    while (q < e && !st) {
        char kind = *q++;
        const char *ke = q;
        if (kind == '.') while (ke < e && *ke != '.' && *ke != '[') ke++;
        else while (ke < e && *ke != ']') ke++;
        if (ke == q || (kind == '[' && ke >= e)) { st = jerr(F->c, F->at, VC_ERR_ARG, "bad field name in a format string"); break; }
        jv *key = jv_str(q, (size_t)(ke - q)), *next = NULL;
        st = key ? jinja_attr_path(F->c, F->at, cur, key, &next) : OOM();
        jv_unref(key);
        jv_unref(cur);
        cur = next;
        q = kind == '[' ? ke + 1 : ke;
    }
    if (st) { jv_unref(cur); return st; }
    *out = cur;
    return VC_OK;
}

static vc_status format_into(fctx *F, jbuf *b, const char *s, size_t len, int depth);

/* one {field[!conv][:spec]} (its text between the braces) */
static vc_status replacement(fctx *F, jbuf *b, const char *s, size_t len, int depth) {
    const char *e = s + len, *q = s;
    int sq = 0;
    while (q < e && (sq || (*q != '!' && *q != ':'))) { if (*q == '[') sq = 1; else if (*q == ']') sq = 0; q++; }
    char conv = 0;
    const char *spec = q;
    if (q < e && *q == '!') {
        if (q + 1 >= e || !strchr("rsa", q[1]) || (q + 2 < e && q[2] != ':'))
            return jerr(F->c, F->at, VC_ERR_ARG, "Unknown conversion specifier in a format string");
        conv = q[1];
        spec = q + 2;
    }
    if (spec < e && *spec == ':') spec++;
    jv *v = NULL;
    vc_status st = field_value(F, s, (size_t)(q - s), &v);
    if (st) return st;
    if (conv) {  /* repr / str / ascii, then the spec applies to that string */
        jbuf t = { 0 };
        jbuf_put(&t, "", 0);
        st = conv == 's' ? jv_write_str(&t, v) : jv_write_repr(&t, v, 0);
        if (!st && conv == 'a') st = jinja_ascii_escape(&t);
        jv_unref(v);
        v = st ? NULL : jv_str_take(t.p, t.n);
        if (!st && !v) st = OOM();
        if (st) { free(t.p); return st; }
    }
    jbuf sp = { 0 };  /* the spec with its nested fields formatted */
    jbuf_put(&sp, "", 0);
    if (spec < e && depth < 1) st = format_into(F, &sp, spec, (size_t)(e - spec), depth + 1);
    else if (spec < e) st = memchr(spec, '{', (size_t)(e - spec)) ? jerr(F->c, F->at, VC_ERR_ARG, "Max string recursion exceeded") : VC_OK,
        jbuf_put(&sp, spec, (size_t)(e - spec));
    if (!st && sp.oom) st = OOM();
    if (!st) st = format_value(F, b, v, sp.p, sp.n);
    free(sp.p);
    jv_unref(v);
    return st;
}

static vc_status format_into(fctx *F, jbuf *b, const char *s, size_t len, int depth) {
    const char *p = s, *e = s + len;
    jinja_work(len / 64);
    while (p < e) {
        const char *q = p;
        while (q < e && *q != '{' && *q != '}') q++;
        jbuf_put(b, p, (size_t)(q - p));
        if (q >= e) break;
        if (q + 1 < e && q[1] == *q) { jbuf_putc(b, *q); p = q + 2; continue; }
        if (*q == '}') return jerr(F->c, F->at, VC_ERR_ARG, "Single '}' encountered in format string");
        const char *r = q + 1;
        int open = 1;
        while (r < e && open) { open += *r == '{' ? 1 : *r == '}' ? -1 : 0; if (open) r++; }
        if (r >= e) return jerr(F->c, F->at, VC_ERR_ARG, "expected '}' before end of string");
        vc_status st = replacement(F, b, q + 1, (size_t)(r - q - 1), depth);
        if (st) return st;
        if (jinja_over()) return jerr(F->c, F->at, VC_ERR_ARG, JINJA_LIMIT_MSG, JINJA_MAX_STEPS);
        if (b->n > JINJA_MAX_OUT) return jerr(F->c, F->at, VC_ERR_ARG, "formatted string too large");
        p = r + 1;
    }
    return VC_OK;
}

vc_status jinja_str_format(jctx *c, const jnode *at, const jv *s, jv **args, char **kw, int n, jv **out) {
    fctx F = { c, at, args, kw, n, 0, 0 };
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    vc_status st = format_into(&F, &b, s->u.str.s, s->u.str.len, 0);
    if (!st && b.oom) st = OOM();
    if (st) { free(b.p); return st; }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}
