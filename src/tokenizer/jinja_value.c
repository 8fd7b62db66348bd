/* Values of the Jinja interpreter: construction, reference counting, truthiness, equality,
 * and the three ways templates turn values into text (Python str, Python repr, json.dumps). */
#include "tokenizer/jinja.h"
#include "verlc/json.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jv jv_undef_v = { .t = JV_UNDEF, .rc = -1 };
jv jv_none_v = { .t = JV_NONE, .rc = -1 };
jv jv_true_v = { .t = JV_BOOL, .rc = -1, .u.b = 1 };
jv jv_false_v = { .t = JV_BOOL, .rc = -1, .u.b = 0 };
__thread long *jinja_meter;

static vc_status over_limit(void) {
    return vc_fail(VC_ERR_ARG, "chat template: " JINJA_LIMIT_MSG, JINJA_MAX_STEPS);
}

static jv *jv_new(jv_type t) {
    jv *v = calloc(1, sizeof *v);
    if (v) { v->t = t; v->rc = 1; }
    return v;
}

jv *jv_ref(jv *v) {
    if (v && v->rc >= 0) v->rc++;
    return v;
}

void jv_unref(jv *v) {
    if (!v || v->rc < 0 || --v->rc > 0) return;
    switch (v->t) {
    case JV_STR: free(v->u.str.s); break;
    case JV_LIST:
        for (size_t i = 0; i < v->u.list.n; i++) jv_unref(v->u.list.items[i]);
        free(v->u.list.items);
        break;
    case JV_DICT: case JV_NS:
        for (size_t i = 0; i < v->u.dict.n; i++) { jv_unref(v->u.dict.keys[i]); jv_unref(v->u.dict.vals[i]); }
        free(v->u.dict.keys); free(v->u.dict.vals);
        break;
    case JV_FUNC: jv_unref(v->u.fn.self); break;
    default: break;
    }
    free(v->hint);
    free(v);
}

jv *jv_undef(const char *fmt, ...) {
    jv *v = jv_new(JV_UNDEF);
    if (!v) return &jv_undef_v;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    v->hint = strdup(buf);
    return v;
}
jv *jv_none(void) { return &jv_none_v; }
jv *jv_bool(int b) { return b ? &jv_true_v : &jv_false_v; }
jv *jv_int(int64_t i) { jv *v = jv_new(JV_INT); if (v) v->u.i = i; return v; }
jv *jv_float(double f) { jv *v = jv_new(JV_FLOAT); if (v) v->u.f = f; return v; }

jv *jv_str_take(char *s, size_t len) {
    jv *v = jv_new(JV_STR);
    if (!v || !s) { free(s); free(v); return NULL; }
    jinja_work(len / 64);
    v->u.str.s = s;
    v->u.str.len = len;
    return v;
}
jv *jv_str(const char *s, size_t len) {
    char *p = malloc(len + 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = 0;
    return jv_str_take(p, len);
}
jv *jv_cstr(const char *s) { return jv_str(s, strlen(s)); }
jv *jv_list(void) { return jv_new(JV_LIST); }
jv *jv_dict(void) { return jv_new(JV_DICT); }

vc_status jv_list_push(jv *l, jv *item) {
    if (!item) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    if (jinja_work(1)) { jv_unref(item); return over_limit(); }
    if (l->u.list.n == l->u.list.cap) {
        size_t cap = l->u.list.cap ? 2 * l->u.list.cap : 4;
        jv **p = realloc(l->u.list.items, cap * sizeof *p);
        if (!p) { jv_unref(item); return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
        l->u.list.items = p;
        l->u.list.cap = cap;
    }
    l->u.list.items[l->u.list.n++] = item;
    return VC_OK;
}

vc_status jv_dict_set(jv *d, jv *key, jv *val) {
    if (!key || !val) { jv_unref(key); jv_unref(val); return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
    if (jinja_work(1 + d->u.dict.n / 16)) { jv_unref(key); jv_unref(val); return over_limit(); }
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (jv_equal(d->u.dict.keys[i], key)) {
            jv_unref(key);
            jv_unref(d->u.dict.vals[i]);
            d->u.dict.vals[i] = val;
            return VC_OK;
        }
    if (d->u.dict.n == d->u.dict.cap) {
        size_t cap = d->u.dict.cap ? 2 * d->u.dict.cap : 4;
        jv **k = realloc(d->u.dict.keys, cap * sizeof *k);
        if (k) d->u.dict.keys = k;
        jv **v = k ? realloc(d->u.dict.vals, cap * sizeof *v) : NULL;
        if (!v) { jv_unref(key); jv_unref(val); return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
        d->u.dict.vals = v;
        d->u.dict.cap = cap;
    }
    d->u.dict.keys[d->u.dict.n] = key;
    d->u.dict.vals[d->u.dict.n++] = val;
    return VC_OK;
}

jv *jv_dict_get(const jv *d, const char *key) {
    size_t len = strlen(key);
    if (jinja_work(d->u.dict.n / 16)) return NULL;
    for (size_t i = 0; i < d->u.dict.n; i++) {
        const jv *k = d->u.dict.keys[i];
        if (k->t == JV_STR && k->u.str.len == len && !memcmp(k->u.str.s, key, len)) return d->u.dict.vals[i];
    }
    return NULL;
}

jv *jv_dict_getv(const jv *d, const jv *key) {
    if (jinja_work(d->u.dict.n / 16)) return NULL;
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (jv_equal(d->u.dict.keys[i], key)) return d->u.dict.vals[i];
    return NULL;
}

int jv_truthy(const jv *v) {
    switch (v->t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return v->u.str.len != 0;
    case JV_LIST: return v->u.list.n != 0;
    case JV_DICT: return v->u.dict.n != 0;
    default: return 1;
    }
}

static int jv_is_num(const jv *v) { return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL; }
static double jv_num(const jv *v) {
    return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : (double)v->u.b;
}

int jv_equal(const jv *a, const jv *b) {
    if (jinja_work(1)) return 0;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->t != JV_FLOAT && b->t != JV_FLOAT) {
            int64_t x = a->t == JV_INT ? a->u.i : a->u.b, y = b->t == JV_INT ? b->u.i : b->u.b;
            return x == y;
        }
        return jv_num(a) == jv_num(b);
    }
    if (a->t != b->t || (a->t == JV_LIST && a->is_tuple != b->is_tuple)) return 0;  /* (1, 2) != [1, 2] */
    switch (a->t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR:
        if (a->u.str.len != b->u.str.len) return 0;
        jinja_work(a->u.str.len / 64);
        return !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
    case JV_LIST:
        if (a->u.list.n != b->u.list.n) return 0;
        for (size_t i = 0; i < a->u.list.n; i++)
            if (!jv_equal(a->u.list.items[i], b->u.list.items[i])) return 0;
        return 1;
    case JV_DICT:
        if (a->u.dict.n != b->u.dict.n) return 0;
        for (size_t i = 0; i < a->u.dict.n; i++) {
            const jv *o = jv_dict_getv(b, a->u.dict.keys[i]);
            if (!o || !jv_equal(a->u.dict.vals[i], o)) return 0;
        }
        return 1;
    default: return a == b;
    }
}

const char *jv_type_name(const jv *v) {
    static const char *names[] = { "Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                   "dict", "Namespace", "builtin_function_or_method", "Macro" };
    if (v->t == JV_LIST && v->is_tuple) return "tuple";
    return names[v->t];
}

size_t utf8_count(const char *s, size_t len) {
    /* characters start at every non-continuation byte, and at byte 0 whatever it is (stray continuation bytes
     * at the start of invalid UTF-8 make one character, as jinja_utf8_offsets walks them) */
    size_t n = len && ((unsigned char)s[0] & 0xC0) == 0x80;
    jinja_work(len / 64);
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

jv *jv_from_json(const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return jv_none();
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        /* an int or a float as json.loads made it: by the token the parser kept (vc_json_keep_numbers), else by value
         * (integral values within 2^53 are ints) */
        double d = j->valuedouble;
        if (vc_json_number_is_float(j)) return jv_float(d);
        if (j->valuestring) {
            errno = 0;
            long long i = strtoll(j->valuestring, NULL, 10);
            if (!errno) return jv_int(i);
        }
        return d == floor(d) && fabs(d) < 9.2e18 ? jv_int((int64_t)d) : jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_cstr(j->valuestring ? j->valuestring : "");
    int is_obj = cJSON_IsObject(j);
    if (!is_obj && !cJSON_IsArray(j)) return jv_none();
    jv *out = is_obj ? jv_dict() : jv_list();
    if (!out) return NULL;
    for (const cJSON *c = j->child; c; c = c->next) {
        jv *item = jv_from_json(c);
        vc_status st = is_obj ? jv_dict_set(out, jv_cstr(c->string ? c->string : ""), item)
                              : jv_list_push(out, item);
        if (st) { jv_unref(out); return NULL; }
    }
    return out;
}

/* ---- text output ---- */
void jbuf_put(jbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    jinja_work(n / 64);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = cap > JINJA_MAX_OUT + 1 ? NULL : realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jbuf_puts(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s)); }
void jbuf_putc(jbuf *b, char c) { jbuf_put(b, &c, 1); }

void jbuf_fmt_float(jbuf *b, double f) {
    char out[64];
    vc_py_float_repr(f, out, sizeof out);
    jbuf_puts(b, out);
}

static void write_int(jbuf *b, int64_t i) {
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)i);
    jbuf_puts(b, t);
}

static void write_pyrepr_str(jbuf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char t[8];
        if (ch == '\\' || ch == (unsigned char)q) { jbuf_putc(b, '\\'); jbuf_putc(b, (char)ch); }
        else if (ch == '\n') jbuf_puts(b, "\\n");
        else if (ch == '\r') jbuf_puts(b, "\\r");
        else if (ch == '\t') jbuf_puts(b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) { snprintf(t, sizeof t, "\\x%02x", ch); jbuf_puts(b, t); }
        else jbuf_putc(b, (char)ch);
    }
    jbuf_putc(b, q);
}

vc_status jv_write_repr(jbuf *b, const jv *v, int depth) {
    if (depth > JINJA_MAX_DEPTH) return vc_fail(VC_ERR_ARG, "chat template: value nested too deeply to print");
    if (jinja_work(1)) return over_limit();
    if (b->oom) return VC_OK; /* the caller reports the size limit */
    switch (v->t) {
    case JV_STR: write_pyrepr_str(b, v->u.str.s, v->u.str.len); return VC_OK;
    case JV_LIST: {
        jbuf_putc(b, v->is_tuple ? '(' : '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) jbuf_puts(b, ", ");
            vc_status st = jv_write_repr(b, v->u.list.items[i], depth + 1);
            if (st) return st;
        }
        if (v->is_tuple && v->u.list.n == 1) jbuf_putc(b, ',');
        jbuf_putc(b, v->is_tuple ? ')' : ']');
        return VC_OK;
    }
    case JV_DICT: case JV_NS: {
        jbuf_puts(b, v->t == JV_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v->u.dict.n; i++) {
            if (i) jbuf_puts(b, ", ");
            vc_status st = jv_write_repr(b, v->u.dict.keys[i], depth + 1);
            if (!st) { jbuf_puts(b, ": "); st = jv_write_repr(b, v->u.dict.vals[i], depth + 1); }
            if (st) return st;
        }
        jbuf_puts(b, v->t == JV_NS ? "}>" : "}");
        return VC_OK;
    }
    default: return jv_write_str(b, v);
    }
}

vc_status jv_write_str(jbuf *b, const jv *v) {
    switch (v->t) {
    case JV_UNDEF: return VC_OK;
    case JV_NONE: jbuf_puts(b, "None"); return VC_OK;
    case JV_BOOL: jbuf_puts(b, v->u.b ? "True" : "False"); return VC_OK;
    case JV_INT: write_int(b, v->u.i); return VC_OK;
    case JV_FLOAT: jbuf_fmt_float(b, v->u.f); return VC_OK;
    case JV_STR: jbuf_put(b, v->u.str.s, v->u.str.len); return VC_OK;
    case JV_FUNC: jbuf_puts(b, "<built-in function>"); return VC_OK;
    case JV_MACRO: jbuf_puts(b, "<Macro>"); return VC_OK;
    default: return jv_write_repr(b, v, 0);
    }
}

static void write_json_str(jbuf *b, const char *s, size_t n, int ensure_ascii) {
    jbuf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char t[16];
        switch (ch) {
        case '"': jbuf_puts(b, "\\\""); continue;
        case '\\': jbuf_puts(b, "\\\\"); continue;
        case '\n': jbuf_puts(b, "\\n"); continue;
        case '\r': jbuf_puts(b, "\\r"); continue;
        case '\t': jbuf_puts(b, "\\t"); continue;
        case '\b': jbuf_puts(b, "\\b"); continue;
        case '\f': jbuf_puts(b, "\\f"); continue;
        default: break;
        }
        if (ch < 0x20) { snprintf(t, sizeof t, "\\u%04x", ch); jbuf_puts(b, t); continue; }
        if (ch < 0x80 || !ensure_ascii) { jbuf_putc(b, (char)ch); continue; }
        /* decode one UTF-8 sequence and write \uXXXX (surrogate pairs above the BMP) */
        int extra = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : ch >= 0xC0 ? 1 : 0;
        uint32_t cp = ch & (0x3F >> extra);
        for (int k = 0; k < extra && i + 1 < n; k++) cp = (cp << 6) | ((unsigned char)s[++i] & 0x3F);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
        } else snprintf(t, sizeof t, "\\u%04x", cp);
        jbuf_puts(b, t);
    }
    jbuf_putc(b, '"');
}

static void json_newline(jbuf *b, int indent, int level) {
    jbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) jbuf_putc(b, ' ');
}

static int cmp_keys(const void *x, const void *y) {
    const jv *a = **(jv *const *const *)x, *b = **(jv *const *const *)y;
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
        int c = memcmp(a->u.str.s, b->u.str.s, n);
        return c ? c : (a->u.str.len > b->u.str.len) - (a->u.str.len < b->u.str.len);
    }
    return 0;
}

static vc_status write_json_key(jbuf *b, const jv *k, int ensure_ascii) {
    if (k->t == JV_STR) { write_json_str(b, k->u.str.s, k->u.str.len, ensure_ascii); return VC_OK; }
    if (k->t == JV_UNDEF || k->t >= JV_LIST)
        return vc_fail(VC_ERR_ARG, "chat template: tojson: keys must be str, int, float, bool or None, not %s",
                       jv_type_name(k));
    jbuf_putc(b, '"');
    if (k->t == JV_NONE) jbuf_puts(b, "null");
    else if (k->t == JV_BOOL) jbuf_puts(b, k->u.b ? "true" : "false");
    else jv_write_str(b, k);
    jbuf_putc(b, '"');
    return VC_OK;
}

vc_status jv_write_json(jbuf *b, const jv *v, int ensure_ascii, int indent, int sort_keys,
                        const char *item_sep, const char *key_sep, int depth) {
    if (depth > JINJA_MAX_DEPTH) return vc_fail(VC_ERR_ARG, "chat template: tojson: value nested too deeply");
    if (jinja_work(1)) return over_limit();
    if (b->oom) return VC_OK; /* the caller reports the size limit */
    vc_status st = VC_OK;
    switch (v->t) {
    case JV_NONE: jbuf_puts(b, "null"); return VC_OK;
    case JV_BOOL: jbuf_puts(b, v->u.b ? "true" : "false"); return VC_OK;
    case JV_INT: write_int(b, v->u.i); return VC_OK;
    case JV_FLOAT:
        if (isnan(v->u.f)) jbuf_puts(b, "NaN");
        else if (isinf(v->u.f)) jbuf_puts(b, v->u.f < 0 ? "-Infinity" : "Infinity");
        else jbuf_fmt_float(b, v->u.f);
        return VC_OK;
    case JV_STR: write_json_str(b, v->u.str.s, v->u.str.len, ensure_ascii); return VC_OK;
    case JV_LIST:
        if (!v->u.list.n) { jbuf_puts(b, "[]"); return VC_OK; }
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.n && !st; i++) {
            if (i) jbuf_puts(b, item_sep);
            if (indent >= 0) json_newline(b, indent, depth + 1);
            st = jv_write_json(b, v->u.list.items[i], ensure_ascii, indent, sort_keys, item_sep, key_sep, depth + 1);
        }
        if (indent >= 0) json_newline(b, indent, depth);
        jbuf_putc(b, ']');
        return st;
    case JV_DICT: {
        if (!v->u.dict.n) { jbuf_puts(b, "{}"); return VC_OK; }
        size_t n = v->u.dict.n;
        jv ***order = malloc(n * sizeof *order);
        if (!order) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        for (size_t i = 0; i < n; i++) order[i] = &v->u.dict.keys[i];
        if (sort_keys) qsort(order, n, sizeof *order, cmp_keys);
        jbuf_putc(b, '{');
        for (size_t i = 0; i < n && !st; i++) {
            size_t idx = (size_t)(order[i] - v->u.dict.keys);
            if (i) jbuf_puts(b, item_sep);
            if (indent >= 0) json_newline(b, indent, depth + 1);
            st = write_json_key(b, v->u.dict.keys[idx], ensure_ascii);
            if (st) break;
            jbuf_puts(b, key_sep);
            st = jv_write_json(b, v->u.dict.vals[idx], ensure_ascii, indent, sort_keys, item_sep, key_sep, depth + 1);
        }
        free(order);
        if (indent >= 0) json_newline(b, indent, depth);
        jbuf_putc(b, '}');
        return st;
    }
    default:
        return vc_fail(VC_ERR_ARG, "chat template: tojson: Object of type %s is not JSON serializable",
                       jv_type_name(v));
    }
}
