/* Jinja filters, tests and global functions used by chat templates; tojson, raise_exception and
 * strftime_now behave as transformers defines them. */
#define _GNU_SOURCE
#include "tokenizer/jinja.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")
jv *jinja_arg(jv **args, char **kw, int n, int pos, const char *kwname);
vc_status jinja_undef_error(jctx *c, const jnode *n, const jv *v);
vc_status jinja_iterate(jctx *c, const jnode *n, jv *v, jv **list);
vc_status jinja_strip(const jv *s, const jv *chars, int left, int right, jv **out);
vc_status jinja_str_case(const jv *s, int mode, jv **out);
int jinja_str_is_case(const jv *s, int lower);
vc_status jinja_replace(jctx *c, const jnode *at, const jv *s, const jv *old, const jv *new_, int64_t count, jv **out);
vc_status jinja_compare(jctx *c, const jnode *n, int op, jv *a, jv *b, int *res);
vc_status jinja_contains(jctx *c, const jnode *n, const jv *hay, const jv *needle, int *res);

/* Jinja's round: method "common" is Python's round(value, precision) (an int stays an int; a float is rounded
 * correctly from its exact binary value, ties to even: 2.5 -> 2.0, 2.675 -> 2.67), "floor" / "ceil" those of
 * value * 10^precision over 10^precision, a float */
static vc_status f_round(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *pa = jinja_arg(args, kw, n, 0, "precision"), *ma = jinja_arg(args, kw, n, 1, "method");
    const char *method = ma && ma->t == JV_STR ? ma->u.str.s : "common";
    int64_t p = pa && pa->t == JV_INT ? pa->u.i : 0;
    int isint = in->t == JV_INT || in->t == JV_BOOL;
    double x = in->t == JV_FLOAT ? in->u.f : in->t == JV_INT ? (double)in->u.i : in->t == JV_BOOL ? in->u.b : NAN;
    if (isnan(x) && in->t != JV_FLOAT) return jerr(c, at, VC_ERR_ARG, "round filter needs a number");
    if (strcmp(method, "common") && strcmp(method, "floor") && strcmp(method, "ceil"))
        return jerr(c, at, VC_ERR_ARG, "method must be 'common', 'ceil' or 'floor'");
    if (p < -400 || p > 400) p = p < 0 ? -400 : 400;
    double m = pow(10, (double)p);
    if (strcmp(method, "common")) {
        *out = jv_float((method[0] == 'f' ? floor(x * m) : ceil(x * m)) / m);
        return *out ? VC_OK : VC_ERR_NOMEM;
    }
    if (isint && p >= 0) *out = jv_int(in->t == JV_BOOL ? in->u.b : in->u.i);
    else if (p < 0) { /* to a multiple of 10^-p, ties to even */
        double m2 = pow(10, (double)-p), r = nearbyint(x / m2) * m2;
        *out = isint ? jv_int((int64_t)r) : jv_float(r);
    } else if (!isfinite(x)) *out = jv_float(x);
    else {
        char buf[720]; /* 309 digits before the point, at most 340 after */
        snprintf(buf, sizeof buf, "%.*f", (int)(p < 340 ? p : 340), x);
        *out = jv_float(strtod(buf, NULL));
    }
    return *out ? VC_OK : VC_ERR_NOMEM;
}

vc_status jinja_to_str(const jv *v, jv **out) {
    if (v->t == JV_STR) { *out = jv_ref((jv *)v); return VC_OK; }
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    vc_status st = jv_write_str(&b, v);
    if (!st && b.oom) st = OOM();
    if (st) { free(b.p); return st; }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}

/* item `idx` (Python's, negative from the end) of a list or string, or the value of int key idx; else Undefined */
static vc_status path_index(jv *cur, int64_t idx, jv **out) {
    jv *found = NULL, *key = NULL;
    int64_t n = cur->t == JV_LIST ? (int64_t)cur->u.list.n : cur->t == JV_STR ? (int64_t)utf8_count(cur->u.str.s, cur->u.str.len) : 0;
    int64_t i = idx < 0 ? idx + n : idx;
    if (cur->t == JV_LIST && i >= 0 && i < n) found = cur->u.list.items[i];
    else if (cur->t == JV_DICT && (key = jv_int(idx))) found = jv_dict_getv(cur, key);
    jv_unref(key);
    if (found) { *out = jv_ref(found); return VC_OK; }
    if (cur->t == JV_STR && i >= 0 && i < n) {
        const char *p = cur->u.str.s, *e = p + cur->u.str.len;
        for (int64_t k = 0;; k++) {
            const char *q = p + 1;
            while (q < e && ((unsigned char)*q & 0xC0) == 0x80) q++;
            if (k == i) { *out = jv_str(p, (size_t)(q - p)); return *out ? VC_OK : OOM(); }
            p = q;
        }
    }
    *out = jv_undef("no item %lld", (long long)idx);
    return VC_OK;
}

/* one step of an attribute path, as Jinja's environment.getitem: a part of digits is an index (path_index), any
 * other part a key, then an attribute (a method); what is missing is Undefined */
static vc_status path_step(jctx *c, const jnode *at, jv *cur, const char *name, size_t len, jv **out) {
    if (cur->t == JV_UNDEF) return jinja_undef_error(c, at, cur);
    int digits = len > 0 && len < 19;
    int64_t idx = 0;
    for (size_t i = 0; i < len && digits; i++) digits = name[i] >= '0' && name[i] <= '9', idx = idx * 10 + (name[i] - '0');
    if (digits) return path_index(cur, idx, out);
    char *key = strndup(name, len);
    if (!key) return OOM();
    jv *v = cur->t == JV_DICT || cur->t == JV_NS ? jv_dict_get(cur, key) : NULL;
    vc_status st = v ? VC_OK : jinja_getattr(c, at, cur, key, out);
    if (v) *out = jv_ref(v);
    free(key);
    return st;
}

/* attribute path "a.b.0" (or an int) of an item, as Jinja's make_attrgetter */
vc_status jinja_attr_path(jctx *c, const jnode *at, jv *item, const jv *path, jv **out) {
    if (path->t == JV_INT) return item->t == JV_UNDEF ? jinja_undef_error(c, at, item) : path_index(item, path->u.i, out);
    if (path->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "attribute must be a string");
    jv *cur = jv_ref(item);
    const char *p = path->u.str.s, *e = p + path->u.str.len;
    while (1) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        jv *next = NULL;
        vc_status st = path_step(c, at, cur, p, (size_t)((dot ? dot : e) - p), &next);
        jv_unref(cur);
        if (st) return st;
        cur = next;
        if (!dot) break;
        p = dot + 1;
    }
    *out = cur;
    return VC_OK;
}

static vc_status f_tojson(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *ea = jinja_arg(args, kw, n, 0, "ensure_ascii"), *ind = jinja_arg(args, kw, n, 1, "indent");
    jv *sep = jinja_arg(args, kw, n, 2, "separators"), *sk = jinja_arg(args, kw, n, 3, "sort_keys");
    int indent = -1;
    if (ind && ind->t == JV_INT) indent = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : (int)ind->u.i;
    else if (ind && ind->t != JV_NONE) return jerr(c, at, VC_ERR_UNSUPPORTED, "unsupported construct: tojson indent of type %s", jv_type_name(ind));
    const char *item_sep = indent >= 0 ? "," : ", ", *key_sep = ": ";
    if (sep && sep->t == JV_LIST && sep->u.list.n == 2 && sep->u.list.items[0]->t == JV_STR && sep->u.list.items[1]->t == JV_STR) {
        item_sep = sep->u.list.items[0]->u.str.s;
        key_sep = sep->u.list.items[1]->u.str.s;
    }
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    vc_status st = jv_write_json(&b, in, ea && jv_truthy(ea), indent, sk && jv_truthy(sk), item_sep, key_sep, 0);
    if (!st && b.oom) st = OOM();
    if (st) { free(b.p); return jerr(c, at, st, "%s", vc_last_error()); }
    *out = jv_str_take(b.p, b.n);
    return VC_OK;
}

static vc_status f_length(jctx *c, const jnode *at, jv *in, jv **out) {
    switch (in->t) {
    case JV_STR: *out = jv_int((int64_t)utf8_count(in->u.str.s, in->u.str.len)); return VC_OK;
    case JV_LIST: *out = jv_int((int64_t)in->u.list.n); return VC_OK;
    case JV_DICT: *out = jv_int((int64_t)in->u.dict.n); return VC_OK;
    case JV_UNDEF: *out = jv_int(0); return VC_OK;
    default: return jerr(c, at, VC_ERR_ARG, "object of type '%s' has no len()", jv_type_name(in));
    }
}

static vc_status f_join(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *d = jinja_arg(args, kw, n, 0, "d"), *attr = jinja_arg(args, kw, n, 1, "attribute"), *items = NULL;
    vc_status st = jinja_iterate(c, at, in, &items);
    if (st) return st;
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    for (size_t i = 0; i < items->u.list.n && !st; i++) {
        if (i && d) st = jv_write_str(&b, d);
        jv *it = items->u.list.items[i], *v = NULL;
        if (attr) { st = jinja_attr_path(c, at, it, attr, &v); if (!st) st = jv_write_str(&b, v); jv_unref(v); }
        else if (!st) st = jv_write_str(&b, it);
    }
    jv_unref(items);
    if (!st && b.oom) st = OOM();
    if (st) { free(b.p); return st; }
    *out = jv_str_take(b.p, b.n);
    return VC_OK;
}

/* select, reject, selectattr, rejectattr and map yield nothing for a false value (None, '', []) without looking at
 * their arguments, as Jinja's do: `none|selectattr('type', 'equalto', 'x')|list` is [] */
static vc_status f_select(jctx *c, const jnode *at, const char *name, jv *in, jv **args, char **kw, int n, jv **out) {
    if (!jv_truthy(in)) { *out = jv_list(); return *out ? VC_OK : OOM(); }
    int by_attr = strstr(name, "attr") != NULL, keep = name[0] == 's';
    int first = by_attr ? 1 : 0;
    jv *items = NULL, *res = NULL;
    if (by_attr && n < 1) return jerr(c, at, VC_ERR_ARG, "%s needs an attribute name", name);
    const char *test = NULL;
    if (n > first) {
        if (args[first]->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "%s: test name must be a string", name);
        test = args[first]->u.str.s;
    }
    vc_status st = jinja_iterate(c, at, in, &items);
    if (!st && !(res = jv_list())) st = OOM();
    for (size_t i = 0; !st && i < items->u.list.n; i++) {
        jv *it = items->u.list.items[i], *v = NULL;
        int r;
        st = by_attr ? jinja_attr_path(c, at, it, args[0], &v) : VC_OK;
        if (!by_attr) v = jv_ref(it);
        if (st) break;
        if (test) st = jinja_test(c, at, test, v, args + first + 1, n - first - 1, &r);
        else r = jv_truthy(v);
        jv_unref(v);
        if (!st && r == keep) st = jv_list_push(res, jv_ref(it));
    }
    jv_unref(items);
    if (st) { jv_unref(res); return st; }
    *out = res;
    return VC_OK;
}

static vc_status f_map(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    if (!jv_truthy(in)) { *out = jv_list(); return *out ? VC_OK : OOM(); }
    jv *attr = jinja_arg(args, kw, n, -1, "attribute"), *def = jinja_arg(args, kw, n, -1, "default");
    jv *items = NULL, *res = NULL;
    if (!attr && (n < 1 || args[0]->t != JV_STR || (kw && kw[0])))
        return jerr(c, at, VC_ERR_ARG, "map needs a filter name or attribute=");
    vc_status st = jinja_iterate(c, at, in, &items);
    if (!st && !(res = jv_list())) st = OOM();
    for (size_t i = 0; !st && i < items->u.list.n; i++) {
        jv *v = NULL;
        if (attr) {
            st = jinja_attr_path(c, at, items->u.list.items[i], attr, &v);
            if (!st && v->t == JV_UNDEF && def) { jv_unref(v); v = jv_ref(def); }
        } else st = jinja_filter(c, at, args[0]->u.str.s, items->u.list.items[i], args + 1, kw ? kw + 1 : NULL, n - 1, &v);
        if (!st) st = jv_list_push(res, v);
    }
    jv_unref(items);
    if (st) { jv_unref(res); return st; }
    *out = res;
    return VC_OK;
}

static vc_status f_indent(jctx *c, const jnode *at, jv *s, jv **args, char **kw, int n, jv **out) {
    jv *w = jinja_arg(args, kw, n, 0, "width"), *first = jinja_arg(args, kw, n, 1, "first");
    jv *blank = jinja_arg(args, kw, n, 2, "blank");
    jbuf pad = { 0 }, b = { 0 };
    jbuf_put(&pad, "", 0);
    jbuf_put(&b, "", 0);
    if (w && w->t == JV_STR) jbuf_put(&pad, w->u.str.s, w->u.str.len);
    else for (int64_t i = 0; i < (w && w->t == JV_INT ? w->u.i : 4) && i < 256; i++) jbuf_putc(&pad, ' ');
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    int line = 0;
    while (p <= e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        int is_blank = 1;
        for (const char *q = p; q < le; q++) if (*q != ' ' && *q != '\t' && *q != '\r') is_blank = 0;
        if ((line > 0 || (first && jv_truthy(first))) && (!is_blank || (blank && jv_truthy(blank))))
            jbuf_put(&b, pad.p, pad.n);
        jbuf_put(&b, p, (size_t)(le - p));
        if (!nl) break;
        jbuf_putc(&b, '\n');
        p = nl + 1;
        line++;
    }
    free(pad.p);
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    return VC_OK;
}

static vc_status f_int(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, int as_float, jv **out) {
    jv *def = jinja_arg(args, kw, n, 0, "default");
    if (in->t == JV_UNDEF) return jinja_undef_error(c, at, in);  /* int(Undefined) raises */
    if (in->t == JV_INT || in->t == JV_BOOL) { int64_t i = in->t == JV_INT ? in->u.i : in->u.b; *out = as_float ? jv_float((double)i) : jv_int(i); return VC_OK; }
    if (in->t == JV_FLOAT) { *out = as_float ? jv_float(in->u.f) : jv_int((int64_t)in->u.f); return VC_OK; }
    if (in->t == JV_STR) {
        char *end;
        double d = strtod(in->u.str.s, &end);
        while (*end == ' ' || *end == '\n' || *end == '\t') end++;
        if (end != in->u.str.s && !*end && isfinite(d)) { *out = as_float ? jv_float(d) : jv_int((int64_t)d); return VC_OK; }
    }
    if (def) { *out = jv_ref(def); return VC_OK; }
    *out = as_float ? jv_float(0.0) : jv_int(0);
    return VC_OK;
}

static vc_status first_last(jctx *c, const jnode *at, jv *in, int last, jv **out) {
    jv *items = NULL;
    vc_status st = jinja_iterate(c, at, in, &items);
    if (st) return st;
    size_t k = items->u.list.n;
    *out = k ? jv_ref(items->u.list.items[last ? k - 1 : 0]) : jv_undef("No %s item, sequence was empty.", last ? "last" : "first");
    jv_unref(items);
    return VC_OK;
}

static vc_status f_reverse(jctx *c, const jnode *at, jv *in, jv **out) {
    jv *items = NULL, *res;
    if (in->t == JV_STR) {
        char *p = malloc(in->u.str.len + 1);
        if (!p) return OOM();
        size_t o = in->u.str.len;
        p[o] = 0;
        for (size_t i = 0; i < in->u.str.len;) {  /* reverse by characters */
            size_t k = 1;
            while (i + k < in->u.str.len && ((unsigned char)in->u.str.s[i + k] & 0xC0) == 0x80) k++;
            o -= k;
            memcpy(p + o, in->u.str.s + i, k);
            i += k;
        }
        *out = jv_str_take(p, in->u.str.len);
        return *out ? VC_OK : OOM();
    }
    vc_status st = jinja_iterate(c, at, in, &items);
    if (st) return st;
    if (!(res = jv_list())) st = OOM();
    for (size_t i = items->u.list.n; !st && i-- > 0;) st = jv_list_push(res, jv_ref(items->u.list.items[i]));
    jv_unref(items);
    if (st) { jv_unref(res); return st; }
    *out = res;
    return VC_OK;
}

void jinja_html_escape_into(jbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '&') jbuf_puts(b, "&amp;");
        else if (ch == '<') jbuf_puts(b, "&lt;");
        else if (ch == '>') jbuf_puts(b, "&gt;");
        else if (ch == '"') jbuf_puts(b, "&#34;");
        else if (ch == '\'') jbuf_puts(b, "&#39;");
        else jbuf_putc(b, ch);
    }
}

vc_status jinja_html_escape(const jv *s, jv **out) {
    if (s->is_safe) { *out = jv_ref((jv *)s); return VC_OK; }
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    jinja_html_escape_into(&b, s->u.str.s, s->u.str.len);
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    if (!*out) return OOM();
    (*out)->is_safe = 1;
    return VC_OK;
}

/* sum(iterable, attribute=None, start=0) */
static vc_status f_sum(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *attr = jinja_arg(args, kw, n, 0, "attribute"), *start = jinja_arg(args, kw, n, 1, "start"), *items = NULL;
    vc_status st = jinja_iterate(c, at, in, &items);
    if (st) return st;
    jv *acc = start ? jv_ref(start) : jv_int(0);
    for (size_t i = 0; !st && i < items->u.list.n; i++) {
        jv *next = NULL, *v = NULL;
        st = attr ? jinja_attr_path(c, at, items->u.list.items[i], attr, &v) : VC_OK;
        if (!st) st = jinja_binop(c, at, OP_ADD, acc, v ? v : items->u.list.items[i], &next);
        jv_unref(v);
        jv_unref(acc);
        acc = next;
    }
    jv_unref(items);
    if (st) return st;
    *out = acc;
    return VC_OK;
}

static vc_status f_unique(jctx *c, const jnode *at, jv *in, jv **out) {
    jv *items = NULL, *res = jv_list();
    if (!res) return OOM();
    vc_status st = jinja_iterate(c, at, in, &items);
    for (size_t i = 0; !st && i < items->u.list.n; i++) {
        int seen = 0;
        for (size_t k = 0; k < res->u.list.n && !seen; k++) seen = jv_equal(res->u.list.items[k], items->u.list.items[i]);
        if (!seen) st = jv_list_push(res, jv_ref(items->u.list.items[i]));
    }
    jv_unref(items);
    if (st) { jv_unref(res); return st; }
    *out = res;
    return VC_OK;
}

static vc_status f_items(jctx *c, const jnode *at, jv *in, jv **out) {
    if (in->t == JV_UNDEF) { *out = jv_list(); return *out ? VC_OK : OOM(); }
    if (in->t != JV_DICT) return jerr(c, at, VC_ERR_ARG, "Can only get item pairs from a mapping.");
    jv *fn = NULL;
    vc_status st = jinja_getattr(c, at, in, "items", &fn);
    if (!st) st = jinja_call_builtin(c, at, fn, NULL, NULL, 0, out);
    jv_unref(fn);
    return st;
}

vc_status jinja_filter(jctx *c, const jnode *at, const char *name, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *a0 = jinja_arg(args, kw, n, 0, NULL), *s = NULL;
    vc_status st = VC_OK;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv *def = jinja_arg(args, kw, n, 0, "default_value"), *boolean = jinja_arg(args, kw, n, 1, "boolean");
        int use = in->t == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(in));
        *out = use ? (def ? jv_ref(def) : jv_cstr("")) : jv_ref(in);
        return *out ? VC_OK : OOM();
    }
    if (!strcmp(name, "tojson")) return f_tojson(c, at, in, args, kw, n, out);
    int handled = 0;
    st = jinja_seq_filter(c, at, name, in, args, kw, n, out, &handled);
    if (handled) return st;
    if (!strcmp(name, "indent") && in->t != JV_STR) /* Jinja appends a newline to it first */
        return in->t == JV_UNDEF ? jinja_undef_error(c, at, in)
                                 : jerr(c, at, VC_ERR_ARG, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(in));
    if (!strcmp(name, "length") || !strcmp(name, "count")) return f_length(c, at, in, out);
    if (!strcmp(name, "join")) return f_join(c, at, in, args, kw, n, out);
    if (!strcmp(name, "first") || !strcmp(name, "last")) return first_last(c, at, in, name[0] == 'l', out);
    if (!strcmp(name, "list")) { /* list(value): a tuple's items as a list */
        st = jinja_iterate(c, at, in, out);
        if (st || !(*out)->is_tuple) return st;
        jv *tup = *out;
        *out = jv_list();
        for (size_t i = 0; *out && !st && i < tup->u.list.n; i++) st = jv_list_push(*out, jv_ref(tup->u.list.items[i]));
        jv_unref(tup);
        if (!*out) return OOM();
        if (st) jv_unref(*out);
        return st;
    }
    if (!strcmp(name, "items")) return f_items(c, at, in, out);
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr") || !strcmp(name, "select") || !strcmp(name, "reject"))
        return f_select(c, at, name, in, args, kw, n, out);
    if (!strcmp(name, "map")) return f_map(c, at, in, args, kw, n, out);
    if (!strcmp(name, "int")) return f_int(c, at, in, args, kw, n, 0, out);
    if (!strcmp(name, "float")) return f_int(c, at, in, args, kw, n, 1, out);
    if (!strcmp(name, "reverse")) return f_reverse(c, at, in, out);
    if (!strcmp(name, "unique")) return f_unique(c, at, in, out);
    if (!strcmp(name, "sum")) return f_sum(c, at, in, args, kw, n, out);
    if (!strcmp(name, "abs")) {
        if (in->t == JV_INT) *out = jv_int(in->u.i < 0 ? -in->u.i : in->u.i);
        else if (in->t == JV_BOOL) *out = jv_int(in->u.b);
        else if (in->t == JV_FLOAT) *out = jv_float(fabs(in->u.f));
        else return jerr(c, at, VC_ERR_ARG, "bad operand type for abs(): '%s'", jv_type_name(in));
        return VC_OK;
    }
    if (!strcmp(name, "round")) return f_round(c, at, in, args, kw, n, out);
    /* string filters take str(value); Undefined prints as '' */
    st = jinja_to_str(in, &s);
    if (st) return st;
    if (!strcmp(name, "string")) { *out = s; return VC_OK; }
    if (!strcmp(name, "safe")) {  /* a Markup of str(value) */
        if (!s->is_safe) { jv *m = jv_str(s->u.str.s, s->u.str.len); jv_unref(s); s = m; if (!s) return OOM(); s->is_safe = 1; }
        *out = s;
        return VC_OK;
    }
    if (!strcmp(name, "trim")) st = jinja_strip(s, a0 ? a0 : jinja_arg(args, kw, n, -1, "chars"), 1, 1, out);
    else if (!strcmp(name, "upper")) st = jinja_str_case(s, 0, out);
    else if (!strcmp(name, "lower")) st = jinja_str_case(s, 1, out);
    else if (!strcmp(name, "capitalize")) st = jinja_str_case(s, 2, out);
    else if (!strcmp(name, "title")) st = jinja_str_case(s, 3, out);
    else if (!strcmp(name, "replace")) {
        jv *a1 = jinja_arg(args, kw, n, 1, NULL), *cnt = jinja_arg(args, kw, n, 2, "count");
        if (!a0 || !a1) st = jerr(c, at, VC_ERR_ARG, "replace filter takes 2 arguments");
        else st = jinja_replace(c, at, s, a0, a1, cnt && cnt->t == JV_INT ? cnt->u.i : -1, out);
    } else if (!strcmp(name, "indent")) st = f_indent(c, at, s, args, kw, n, out);
    else if (!strcmp(name, "e") || !strcmp(name, "escape")) st = jinja_html_escape(s, out);
    else st = jerr(c, at, VC_ERR_UNSUPPORTED, "unsupported construct: filter '%s'", name);
    jv_unref(s);
    return st;
}

vc_status jinja_test(jctx *c, const jnode *at, const char *name, jv *in, jv **args, int n, int *res) {
    jv *a0 = n > 0 ? args[0] : NULL;
    jv_type t = in->t;
    if (!strcmp(name, "defined")) *res = t != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *res = t == JV_UNDEF;
    else if (!strcmp(name, "none")) *res = t == JV_NONE;
    else if (!strcmp(name, "string")) *res = t == JV_STR;
    else if (!strcmp(name, "mapping")) *res = t == JV_DICT;
    else if (!strcmp(name, "iterable")) *res = t == JV_STR || t == JV_LIST || t == JV_DICT || t == JV_UNDEF;
    else if (!strcmp(name, "sequence")) *res = t == JV_STR || t == JV_LIST || t == JV_DICT || t == JV_UNDEF;
    else if (!strcmp(name, "number")) *res = t == JV_INT || t == JV_FLOAT || t == JV_BOOL;
    else if (!strcmp(name, "integer")) *res = t == JV_INT;
    else if (!strcmp(name, "float")) *res = t == JV_FLOAT;
    else if (!strcmp(name, "boolean")) *res = t == JV_BOOL;
    else if (!strcmp(name, "true")) *res = t == JV_BOOL && in->u.b;
    else if (!strcmp(name, "false")) *res = t == JV_BOOL && !in->u.b;
    else if (!strcmp(name, "callable")) *res = t == JV_FUNC || t == JV_MACRO;
    else if (!strcmp(name, "lower") || !strcmp(name, "upper")) { /* str(value).islower() / isupper() */
        jv *str = NULL;
        vc_status st = t == JV_STR ? VC_OK : jinja_to_str(in, &str);
        if (st) return st;
        *res = jinja_str_is_case(str ? str : in, name[0] == 'l');
        jv_unref(str);
    } else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        /* value % 2 == 1, value % 2 == 0, value % num == 0, with Python's '%' (bools and floats alike) */
        jv *two = jv_int(2), *rem = NULL;
        if (name[0] == 'd' && !a0) { jv_unref(two); return jerr(c, at, VC_ERR_ARG, "test 'divisibleby' needs an argument"); }
        vc_status st = jinja_binop(c, at, OP_MOD, in, name[0] == 'd' ? a0 : two, &rem);
        jv_unref(two);
        if (st) return st;
        *res = jv_equal(rem, name[0] == 'o' ? &jv_true_v : &jv_false_v);
        jv_unref(rem);
    } else if (!strcmp(name, "sameas")) {
        if (!a0) return jerr(c, at, VC_ERR_ARG, "test 'sameas' needs an argument");
        *res = (t == a0->t && (t == JV_NONE || t == JV_UNDEF || (t == JV_BOOL && in->u.b == a0->u.b))) || in == a0;
    } else {
        static const struct { const char *n; int op; } cmp[] = {
            { "equalto", OP_EQ }, { "eq", OP_EQ }, { "==", OP_EQ }, { "ne", OP_NE }, { "!=", OP_NE },
            { "lt", OP_LT }, { "lessthan", OP_LT }, { "<", OP_LT }, { "le", OP_LE }, { "<=", OP_LE },
            { "gt", OP_GT }, { "greaterthan", OP_GT }, { ">", OP_GT }, { "ge", OP_GE }, { ">=", OP_GE },
            { "in", OP_IN } };
        for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++)
            if (!strcmp(name, cmp[i].n)) {
                if (!a0) return jerr(c, at, VC_ERR_ARG, "test '%s' needs an argument", name);
                return jinja_compare(c, at, cmp[i].op, in, a0, res);
            }
        return jerr(c, at, VC_ERR_UNSUPPORTED, "unsupported construct: test '%s'", name);
    }
    return VC_OK;
}

/* ---- global functions ---- */
static const char *const GLOBALS[] = { "range", "namespace", "dict", "raise_exception", "strftime_now", NULL };

jv *jinja_global_func(const char *name) {
    for (int i = 0; GLOBALS[i]; i++)
        if (!strcmp(GLOBALS[i], name)) {
            jv *f = calloc(1, sizeof *f);
            if (!f) return NULL;
            f->t = JV_FUNC;
            f->rc = 1;
            f->u.fn.name = GLOBALS[i];
            return f;
        }
    return NULL;
}

static vc_status g_range(jctx *c, const jnode *at, jv **args, int n, jv **out) {
    int64_t v[3] = { 0, 0, 1 };
    if (n < 1 || n > 3) return jerr(c, at, VC_ERR_ARG, "range expected 1 to 3 arguments, got %d", n);
    for (int i = 0; i < n; i++) {
        if (args[i]->t != JV_INT && args[i]->t != JV_BOOL)
            return jerr(c, at, VC_ERR_ARG, "'%s' object cannot be interpreted as an integer", jv_type_name(args[i]));
        v[n == 1 ? 1 : i] = args[i]->t == JV_INT ? args[i]->u.i : args[i]->u.b;
    }
    if (!v[2]) return jerr(c, at, VC_ERR_ARG, "range() arg 3 must not be zero");
    double count = ceil(((double)v[1] - (double)v[0]) / (double)v[2]);
    if (count > 100000) return jerr(c, at, VC_ERR_ARG, "range too big (%.0f items; the sandbox limit is 100000)", count);
    jv *l = jv_list();
    if (!l) return OOM();
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2])
        if (jv_list_push(l, jv_int(i))) { jv_unref(l); return OOM(); }
    *out = l;
    return VC_OK;
}

vc_status jinja_call_global(jctx *c, const jnode *at, const char *name, jv **args, char **kw, int n, jv **out) {
    if (!strcmp(name, "range")) {
        for (int i = 0; i < n; i++) if (kw && kw[i]) return jerr(c, at, VC_ERR_ARG, "range() takes no keyword arguments");
        return g_range(c, at, args, n, out);
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jv *d = jv_dict();
        if (!d) return OOM();
        if (name[0] == 'n') d->t = JV_NS;
        vc_status st = VC_OK;
        for (int i = 0; i < n && !st; i++) {
            if (kw && kw[i]) st = jv_dict_set(d, jv_cstr(kw[i]), jv_ref(args[i]));
            else if (args[i]->t == JV_DICT)
                for (size_t k = 0; k < args[i]->u.dict.n && !st; k++)
                    st = jv_dict_set(d, jv_ref(args[i]->u.dict.keys[k]), jv_ref(args[i]->u.dict.vals[k]));
            else st = jerr(c, at, VC_ERR_ARG, "%s() positional argument must be a mapping", name);
        }
        if (st) { jv_unref(d); return st; }
        *out = d;
        return VC_OK;
    }
    if (!strcmp(name, "raise_exception")) {
        jbuf b = { 0 };
        if (n > 0) jv_write_str(&b, args[0]);
        vc_status st = jerr(c, at, VC_ERR_ARG, "template raised an exception: %s", b.p ? b.p : "");
        free(b.p);
        return st;
    }
    if (!strcmp(name, "strftime_now")) {
        if (n < 1 || args[0]->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "strftime_now(format) needs a format string");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[512];
        size_t k = strftime(buf, sizeof buf, args[0]->u.str.s, &tmv);
        *out = jv_str(buf, k);
        return *out ? VC_OK : OOM();
    }
    return jerr(c, at, VC_ERR_INTERNAL, "unknown builtin '%s'", name);
}
