/* Operators, attribute access, iteration and the methods templates call on str, dict and list
 * values, with Python's semantics (what Jinja delegates to). */
#define _GNU_SOURCE
#include "tokenizer/jinja.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

vc_status jinja_undef_error(jctx *c, const jnode *n, const jv *v);
size_t *jinja_utf8_offsets(const char *s, size_t len, size_t *count);

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")

static int is_num(const jv *v) { return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL; }
static int is_intlike(const jv *v) { return v->t == JV_INT || v->t == JV_BOOL; }
static int64_t as_int(const jv *v) { return v->t == JV_INT ? v->u.i : v->u.b; }
static double as_num(const jv *v) { return v->t == JV_FLOAT ? v->u.f : (double)as_int(v); }

static const char *op_name(int op) {
    static const char *names[] = { "", "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in" };
    return op > 0 && op <= OP_NOTIN ? names[op] : "?";
}

static vc_status type_error(jctx *c, const jnode *n, int op, const jv *a, const jv *b) {
    if (a->t == JV_UNDEF) return jinja_undef_error(c, n, a);
    if (b->t == JV_UNDEF) return jinja_undef_error(c, n, b);
    return jerr(c, n, VC_ERR_ARG, "unsupported operand type(s) for %s: '%s' and '%s'", op_name(op), jv_type_name(a), jv_type_name(b));
}

static vc_status repeat(jctx *c, const jnode *n, const jv *seq, int64_t times, jv **out) {
    if (times < 0) times = 0;
    size_t unit = seq->t == JV_STR ? seq->u.str.len : seq->u.list.n;
    if (unit && (uint64_t)times > JINJA_MAX_OUT / unit) return jerr(c, n, VC_ERR_ARG, "sequence repetition too large");
    if (seq->t == JV_STR) {
        char *p = malloc(unit * times + 1);
        if (!p) return OOM();
        for (int64_t i = 0; i < times; i++) memcpy(p + i * unit, seq->u.str.s, unit);
        p[unit * times] = 0;
        *out = jv_str_take(p, unit * times);
        return *out ? VC_OK : OOM();
    }
    jv *l = jv_list();
    if (!l) return OOM();
    l->is_tuple = seq->is_tuple;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < unit; k++)
            if (jv_list_push(l, jv_ref(seq->u.list.items[k]))) { jv_unref(l); return OOM(); }
    *out = l;
    return VC_OK;
}

static vc_status concat(const jv *a, const jv *b, jv **out) {
    if (a->t == JV_STR) {
        char *p = malloc(a->u.str.len + b->u.str.len + 1);
        if (!p) return OOM();
        memcpy(p, a->u.str.s, a->u.str.len);
        memcpy(p + a->u.str.len, b->u.str.s, b->u.str.len);
        p[a->u.str.len + b->u.str.len] = 0;
        *out = jv_str_take(p, a->u.str.len + b->u.str.len);
        return *out ? VC_OK : OOM();
    }
    jv *l = jv_list();
    if (!l) return OOM();
    const jv *parts[2] = { a, b };
    l->is_tuple = a->is_tuple;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < parts[k]->u.list.n; i++)
            if (jv_list_push(l, jv_ref(parts[k]->u.list.items[i]))) { jv_unref(l); return OOM(); }
    *out = l;
    return VC_OK;
}

/* Python's ints have no bound; a result past 64 bits is refused rather than wrapped */
static vc_status int_overflow(jctx *c, const jnode *n) {
    return jerr(c, n, VC_ERR_UNSUPPORTED, "unsupported construct: an integer beyond 64 bits");
}

static vc_status arith(jctx *c, const jnode *n, int op, jv *a, jv *b, jv **out) {
    if (is_intlike(a) && is_intlike(b) && op != OP_DIV) {
        int64_t x = as_int(a), y = as_int(b), r = 0;
        switch (op) {
        case OP_ADD: if (__builtin_add_overflow(x, y, &r)) return int_overflow(c, n); break;
        case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) return int_overflow(c, n); break;
        case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) return int_overflow(c, n); break;
        case OP_FLOORDIV: case OP_MOD:
            if (!y) return jerr(c, n, VC_ERR_ARG, "integer division or modulo by zero");
            if (y == -1) { if (op == OP_FLOORDIV && x == INT64_MIN) return int_overflow(c, n); r = op == OP_MOD ? 0 : -x; break; }
            r = x / y;
            if ((x % y) && ((x < 0) != (y < 0))) r--;
            if (op == OP_MOD) r = x - r * y;
            break;
        case OP_POW:
            if (y < 0) {
                if (!x) return jerr(c, n, VC_ERR_ARG, "0.0 cannot be raised to a negative power");
                *out = jv_float(pow((double)x, (double)y));
                return VC_OK;
            }
            r = 1;
            for (int64_t i = 0; i < y; i++) {  /* |x| >= 2 overflows within 64 steps; 0, 1 and -1 stay put */
                if (__builtin_mul_overflow(r, x, &r)) return int_overflow(c, n);
                if (x >= -1 && x <= 1 && i >= 1) { r = x == -1 ? ((y & 1) ? -1 : 1) : x; break; }
            }
            break;
        }
        *out = jv_int(r);
        return VC_OK;
    }
    double x = as_num(a), y = as_num(b), r = 0;
    switch (op) {
    case OP_ADD: r = x + y; break;
    case OP_SUB: r = x - y; break;
    case OP_MUL: r = x * y; break;
    case OP_DIV: if (y == 0) return jerr(c, n, VC_ERR_ARG, "division by zero"); r = x / y; break;
    case OP_FLOORDIV: if (y == 0) return jerr(c, n, VC_ERR_ARG, "float floor division by zero"); r = floor(x / y); break;
    case OP_MOD: if (y == 0) return jerr(c, n, VC_ERR_ARG, "float modulo"); r = x - floor(x / y) * y; break;
    case OP_POW:
        if (x == 0 && y < 0) return jerr(c, n, VC_ERR_ARG, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y) && isfinite(y)) return jerr(c, n, VC_ERR_UNSUPPORTED, "unsupported construct: a complex power");
        r = pow(x, y);
        if (isinf(r) && isfinite(x) && isfinite(y)) return jerr(c, n, VC_ERR_ARG, "(34, 'Numerical result out of range')");
        break;
    }
    *out = jv_float(r);
    return VC_OK;
}

vc_status jinja_binop(jctx *c, const jnode *n, int op, jv *a, jv *b, jv **out) {
    if (op == OP_CONCAT) {
        jbuf buf = { 0 };
        jbuf_put(&buf, "", 0);
        vc_status st = jv_write_str(&buf, a);
        if (!st) st = jv_write_str(&buf, b);
        if (!st && buf.oom) st = OOM();
        if (st) { free(buf.p); return st; }
        *out = jv_str_take(buf.p, buf.n);
        return VC_OK;
    }
    if (is_num(a) && is_num(b)) return arith(c, n, op, a, b, out);
    if (op == OP_ADD && a->t == JV_STR && b->t == JV_STR && a->is_safe != b->is_safe) {
        /* Markup + str, str + Markup: the plain one escaped, a Markup (functionary's templates join tool JSON so) */
        jv *ea = NULL, *eb = NULL;
        vc_status st = jinja_html_escape(a, &ea);
        if (!st) st = jinja_html_escape(b, &eb);
        if (!st) st = concat(ea, eb, out);
        if (!st) (*out)->is_safe = 1;
        jv_unref(ea);
        jv_unref(eb);
        return st;
    }
    if (op == OP_ADD && a->t == b->t && (a->t == JV_STR || (a->t == JV_LIST && a->is_tuple == b->is_tuple))) {
        vc_status st = concat(a, b, out);
        if (!st && a->t == JV_STR) (*out)->is_safe = a->is_safe;
        return st;
    }
    if (op == OP_MUL && (a->t == JV_STR || a->t == JV_LIST) && is_intlike(b)) return repeat(c, n, a, as_int(b), out);
    if (op == OP_MUL && (b->t == JV_STR || b->t == JV_LIST) && is_intlike(a)) return repeat(c, n, b, as_int(a), out);
    if (op == OP_MOD && a->t == JV_STR) return jinja_printf(c, n, a, b, out);
    return type_error(c, n, op, a, b);
}

static int str_cmp(const jv *a, const jv *b) {
    size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
    int r = memcmp(a->u.str.s, b->u.str.s, n);
    return r ? r : (a->u.str.len > b->u.str.len) - (a->u.str.len < b->u.str.len);
}

static vc_status order(jctx *c, const jnode *n, int op, const jv *a, const jv *b, int *cmp) {
    if (is_num(a) && is_num(b)) {
        double x = as_num(a), y = as_num(b);
        if (is_intlike(a) && is_intlike(b)) *cmp = (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
        else *cmp = (x > y) - (x < y);
        return VC_OK;
    }
    if (a->t == JV_STR && b->t == JV_STR) { *cmp = str_cmp(a, b); return VC_OK; }
    if (a->t == JV_LIST && b->t == JV_LIST && a->is_tuple == b->is_tuple) {
        for (size_t i = 0; i < a->u.list.n && i < b->u.list.n; i++) {
            if (jv_equal(a->u.list.items[i], b->u.list.items[i])) continue;
            return order(c, n, op, a->u.list.items[i], b->u.list.items[i], cmp);
        }
        *cmp = (a->u.list.n > b->u.list.n) - (a->u.list.n < b->u.list.n);
        return VC_OK;
    }
    if (a->t == JV_UNDEF) return jinja_undef_error(c, n, a);
    if (b->t == JV_UNDEF) return jinja_undef_error(c, n, b);
    return jerr(c, n, VC_ERR_ARG, "'%s' not supported between instances of '%s' and '%s'", op_name(op), jv_type_name(a), jv_type_name(b));
}

vc_status jinja_contains(jctx *c, const jnode *n, const jv *hay, const jv *needle, int *res) {
    *res = 0;
    if (hay->t == JV_STR) {
        if (needle->t != JV_STR)
            return jerr(c, n, VC_ERR_ARG, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (!needle->u.str.len) { *res = 1; return VC_OK; }
        jinja_work(hay->u.str.len / 64);  /* memmem is linear (two-way); a byte-by-byte memcmp scan is not */
        *res = memmem(hay->u.str.s, hay->u.str.len, needle->u.str.s, needle->u.str.len) != NULL;
        return VC_OK;
    }
    if (hay->t == JV_LIST) {
        for (size_t i = 0; i < hay->u.list.n && !*res; i++) *res = jv_equal(hay->u.list.items[i], needle);
        return VC_OK;
    }
    if (hay->t == JV_DICT) {
        if (needle->t == JV_DICT || (needle->t == JV_LIST && !needle->is_tuple))
            return jerr(c, n, VC_ERR_ARG, "unhashable type: '%s'", jv_type_name(needle));
        *res = jv_dict_getv(hay, needle) != NULL;
        return VC_OK;
    }
    if (hay->t == JV_UNDEF) return VC_OK;  /* iterating Undefined yields nothing */
    return jerr(c, n, VC_ERR_ARG, "argument of type '%s' is not iterable", jv_type_name(hay));
}

vc_status jinja_compare(jctx *c, const jnode *n, int op, jv *a, jv *b, int *res) {
    int cmp = 0;
    vc_status st = VC_OK;
    switch (op) {
    case OP_EQ: *res = jv_equal(a, b); return VC_OK;
    case OP_NE: *res = !jv_equal(a, b); return VC_OK;
    case OP_IN: return jinja_contains(c, n, b, a, res);
    case OP_NOTIN: st = jinja_contains(c, n, b, a, res); *res = !*res; return st;
    default: break;
    }
    st = order(c, n, op, a, b, &cmp);
    if (st) return st;
    *res = op == OP_LT ? cmp < 0 : op == OP_LE ? cmp <= 0 : op == OP_GT ? cmp > 0 : cmp >= 0;
    return VC_OK;
}

vc_status jinja_iterate(jctx *c, const jnode *n, jv *v, jv **list) {
    if (v->t == JV_LIST) { *list = jv_ref(v); return VC_OK; }
    jv *l = jv_list();
    if (!l) return OOM();
    vc_status st = VC_OK;
    if (v->t == JV_DICT) {
        for (size_t i = 0; i < v->u.dict.n && !st; i++) st = jv_list_push(l, jv_ref(v->u.dict.keys[i]));
    } else if (v->t == JV_STR) {
        size_t cnt;
        size_t *o = jinja_utf8_offsets(v->u.str.s, v->u.str.len, &cnt);
        if (!o) st = OOM();
        for (size_t i = 0; !st && i < cnt; i++) st = jv_list_push(l, jv_str(v->u.str.s + o[i], o[i + 1] - o[i]));
        free(o);
    } else if (v->t != JV_UNDEF) st = jerr(c, n, VC_ERR_ARG, "'%s' object is not iterable", jv_type_name(v));
    if (st) { jv_unref(l); return st; }
    *list = l;
    return VC_OK;
}

/* ---- attributes and methods ---- */
static const char *const STR_METHODS[] = { "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
    "upper", "lower", "replace", "title", "capitalize", "find", "rfind", "count", "join", "isupper", "islower",
    "splitlines", NULL };
static const char *const DICT_METHODS[] = { "items", "keys", "values", "get", NULL };
static const char *const LIST_METHODS[] = { "count", "index", NULL };
static const char *const UNSAFE_METHODS[] = { "append", "extend", "insert", "pop", "remove", "clear", "sort",
    "reverse", "update", "setdefault", "popitem", "add", "discard", NULL };

static const char *find_name(const char *const *names, const char *name) {
    for (int i = 0; names[i]; i++) if (!strcmp(names[i], name)) return names[i];
    return NULL;
}

static vc_status bound(jv *self, const char *name, jv **out) {
    jv *f = calloc(1, sizeof *f);
    if (!f) return OOM();
    f->t = JV_FUNC;
    f->rc = 1;
    f->u.fn.self = jv_ref(self);
    f->u.fn.name = name;
    *out = f;
    return VC_OK;
}

static const char *obj_desc(const jv *v) {
    switch (v->t) {
    case JV_NONE: return "None";
    case JV_DICT: return "dict object";
    case JV_LIST: return v->is_tuple ? "tuple object" : "list object";
    case JV_STR: return "str object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_NS: return "Namespace object";
    default: return "object";
    }
}

vc_status jinja_getattr(jctx *c, const jnode *at, jv *obj, const char *name, jv **out) {
    const char *m = NULL;
    if (obj->t == JV_DICT && (m = find_name(DICT_METHODS, name))) return bound(obj, m, out);
    if (obj->t == JV_STR && ((m = find_name(STR_METHODS, name)) || (m = jinja_str_method2_name(name)))) return bound(obj, m, out);
    if (obj->t == JV_LIST && (m = find_name(LIST_METHODS, name))) return bound(obj, m, out);
    if (obj->t == JV_DICT || obj->t == JV_NS) {
        jv *v = jv_dict_get(obj, name);
        if (v) { *out = jv_ref(v); return VC_OK; }
    }
    if ((obj->t == JV_LIST || obj->t == JV_DICT) && find_name(UNSAFE_METHODS, name)) {
        *out = jv_undef("access to attribute '%s' of '%s' object is unsafe (transformers renders with an immutable sandbox)",
                        name, jv_type_name(obj));
        return VC_OK;
    }
    *out = jv_undef("'%s' has no attribute '%s'", obj_desc(obj), name);
    return VC_OK;
}

/* argument `pos` (positional) or keyword `kwname`; borrowed or NULL */
jv *jinja_arg(jv **args, char **kw, int n, int pos, const char *kwname) {
    int p = 0;
    for (int i = 0; i < n; i++) {
        if (kw && kw[i]) { if (kwname && !strcmp(kw[i], kwname)) return args[i]; continue; }
        if (p++ == pos) return args[i];
    }
    return NULL;
}

/* CASE_TITLE is Jinja's title filter (words begin after whitespace and -({[<), CASE_PYTITLE Python's str.title (a
 * cased character after an uncased one is titlecased, after a cased one lowercased: "{'a'" -> "{'A'", "1st" -> "1St") */
typedef enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_TITLE, CASE_PYTITLE } case_mode;

/* Python's str.islower / isupper (the lower / upper tests, the methods): at least one cased character (a letter of
 * category Lu, Ll or Lt), and none of the other case (titlecase counts as neither) */
int jinja_str_is_case(const jv *s, int lower) {
    const uint8_t *p = (const uint8_t *)s->u.str.s;
    utf8proc_ssize_t left = (utf8proc_ssize_t)s->u.str.len;
    int cased = 0;
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) cp = *p, k = 1;
        int pc = jinja_py_case(cp);
        if (utf8proc_category(cp) == UTF8PROC_CATEGORY_LT || pc == (lower ? 1 : 2)) return 0;
        cased |= pc != 0;
        p += k, left -= k;
    }
    return cased;
}

vc_status jinja_str_case(const jv *s, int mode, jv **out) {
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    const uint8_t *p = (const uint8_t *)s->u.str.s;
    utf8proc_ssize_t left = (utf8proc_ssize_t)s->u.str.len;
    int word_start = 1, first = 1;
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) { cp = *p; k = 1; }
        utf8proc_int32_t r = cp;
        if (mode == CASE_UPPER) r = utf8proc_toupper(cp);
        else if (mode == CASE_LOWER) r = utf8proc_tolower(cp);
        else if (mode == CASE_CAPITALIZE) r = first ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
        else if (mode == CASE_PYTITLE) {
            utf8proc_category_t g = utf8proc_category(cp);
            r = word_start ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
            word_start = !(g == UTF8PROC_CATEGORY_LU || g == UTF8PROC_CATEGORY_LL || g == UTF8PROC_CATEGORY_LT);
        } else {
            /* Jinja's title filter: words begin after whitespace, '-', '(', '{', '[', '<' */
            int sep = cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '-' || cp == '(' || cp == '{' ||
                      cp == '[' || cp == '<' || cp == '\v' || cp == '\f';
            r = sep ? cp : word_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            word_start = sep;
        }
        first = 0;
        uint8_t enc[4];
        utf8proc_ssize_t e = utf8proc_encode_char(r, enc);
        if (e <= 0) jbuf_put(&b, (const char *)p, (size_t)k);
        else jbuf_put(&b, (const char *)enc, (size_t)e);
        p += k;
        left -= k;
    }
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}

static int is_space_byte(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f); }

/* Does `chars` (NULL = whitespace) contain the UTF-8 character at s[0..k)? */
static int in_charset(const jv *chars, const char *s, size_t k) {
    if (!chars) return k == 1 && is_space_byte(*s);
    const char *c = chars->u.str.s, *e = c + chars->u.str.len;
    while (c < e) {
        size_t ck = 1;
        while (c + ck < e && ((unsigned char)c[ck] & 0xC0) == 0x80) ck++;
        if (ck == k && !memcmp(c, s, k)) return 1;
        c += ck;
    }
    return 0;
}

vc_status jinja_strip(const jv *s, const jv *chars, int left, int right, jv **out) {
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    if (chars && chars->t != JV_STR) chars = NULL;
    while (left && p < e) {
        size_t k = 1;
        while (p + k < e && ((unsigned char)p[k] & 0xC0) == 0x80) k++;
        if (!in_charset(chars, p, k)) break;
        p += k;
    }
    while (right && e > p) {
        const char *q = e - 1;
        while (q > p && ((unsigned char)*q & 0xC0) == 0x80) q--;
        if (!in_charset(chars, q, (size_t)(e - q))) break;
        e = q;
    }
    *out = jv_str(p, (size_t)(e - p));
    return *out ? VC_OK : OOM();
}

const char *jinja_find_sub(const char *h, size_t hl, const char *nd, size_t nl, int from_right) {
    if (nl > hl) return NULL;
    if (from_right && !nl) return h + hl; /* Python: 'abc'.rfind('') is 3 */
    if (from_right) { /* candidates where the first byte matches, each metered (no linear rfind in libc) */
        for (size_t i = hl - nl + 1; i-- > 0;) {
            if (h[i] != nd[0]) continue;
            if (jinja_work(1 + nl / 64)) return NULL;
            if (!memcmp(h + i, nd, nl)) return h + i;
        }
        return NULL;
    }
    const char *hit = nl ? memmem(h, hl, nd, nl) : h;
    jinja_work(((hit ? (size_t)(hit - h) : hl) + nl) / 64);
    return hit;
}

vc_status jinja_replace(jctx *c, const jnode *at, const jv *s, const jv *old, const jv *new_, int64_t count, jv **out) {
    if (old->t != JV_STR || new_->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "replace() arguments must be str");
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    int64_t done = 0;
    if (!old->u.str.len) {  /* Python inserts `new` between every character and at both ends */
        while (count < 0 || done < count) {
            jbuf_put(&b, new_->u.str.s, new_->u.str.len);
            done++;
            if (p >= e) break;
            const char *q = p + 1;
            while (q < e && ((unsigned char)*q & 0xC0) == 0x80) q++;
            jbuf_put(&b, p, (size_t)(q - p));
            p = q;
        }
    } else {
        const char *hit;
        while ((count < 0 || done < count) && (hit = jinja_find_sub(p, (size_t)(e - p), old->u.str.s, old->u.str.len, 0))) {
            jbuf_put(&b, p, (size_t)(hit - p));
            jbuf_put(&b, new_->u.str.s, new_->u.str.len);
            p = hit + old->u.str.len;
            done++;
        }
    }
    jbuf_put(&b, p, (size_t)(e - p));
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}

static vc_status str_split(jctx *c, const jnode *at, const jv *s, const jv *sep, int64_t maxsplit, int right, jv **out) {
    jv *l = jv_list();
    if (!l) return OOM();
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    vc_status st = VC_OK;
    jv *parts_rev = NULL;
    if (sep && sep->t == JV_NONE) sep = NULL;
    if (sep && (sep->t != JV_STR || !sep->u.str.len)) { jv_unref(l); return jerr(c, at, VC_ERR_ARG, "split(): empty or non-string separator"); }
    if (right) { parts_rev = l; l = jv_list(); if (!l) { jv_unref(parts_rev); return OOM(); } }
    int64_t done = 0;
    if (!sep) {
        if (!right) {
            while (!st) {
                while (p < e && is_space_byte(*p)) p++;
                if (p >= e) break;
                const char *q = p;
                if (maxsplit >= 0 && done >= maxsplit) { while (e > q && is_space_byte(e[-1])) e--; q = e; }
                else while (q < e && !is_space_byte(*q)) q++;
                st = jv_list_push(l, jv_str(p, (size_t)(q - p)));
                done++;
                p = q;
            }
        } else {
            while (!st) {
                while (e > p && is_space_byte(e[-1])) e--;
                if (e <= p) break;
                const char *q = e;
                if (maxsplit >= 0 && done >= maxsplit) { while (p < q && is_space_byte(*p)) p++; q = p; }
                else while (q > p && !is_space_byte(q[-1])) q--;
                st = jv_list_push(parts_rev, jv_str(q, (size_t)(e - q)));
                done++;
                e = q;
            }
        }
    } else {
        size_t sl = sep->u.str.len;
        for (;;) {
            const char *hit = (maxsplit < 0 || done < maxsplit) ? jinja_find_sub(p, (size_t)(e - p), sep->u.str.s, sl, right) : NULL;
            if (!hit) break;
            if (right) { st = jv_list_push(parts_rev, jv_str(hit + sl, (size_t)(e - hit - sl))); e = hit; }
            else { st = jv_list_push(l, jv_str(p, (size_t)(hit - p))); p = hit + sl; }
            done++;
            if (st) break;
        }
        if (!st) st = jv_list_push(right ? parts_rev : l, jv_str(p, (size_t)(e - p)));
    }
    if (right && !st)
        for (size_t i = parts_rev->u.list.n; i-- > 0 && !st;) st = jv_list_push(l, jv_ref(parts_rev->u.list.items[i]));
    jv_unref(parts_rev);
    if (st) { jv_unref(l); return st; }
    *out = l;
    return VC_OK;
}

static int affix_match(const jv *s, const jv *a, int end) {
    if (a->t != JV_STR || a->u.str.len > s->u.str.len) return 0;
    const char *p = end ? s->u.str.s + s->u.str.len - a->u.str.len : s->u.str.s;
    return !memcmp(p, a->u.str.s, a->u.str.len);
}

static vc_status str_method(jctx *c, const jnode *at, const char *m, jv *s, jv **args, char **kw, int n, jv **out) {
    if (jinja_str_method2_name(m)) return jinja_str_method2(c, at, m, s, args, kw, n, out);
    jv *a0 = jinja_arg(args, kw, n, 0, NULL), *a1 = jinja_arg(args, kw, n, 1, NULL);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        int end = m[0] == 'e', r = 0;
        if (!a0) return jerr(c, at, VC_ERR_ARG, "%s() takes at least 1 argument", m);
        if (a0->t == JV_LIST) for (size_t i = 0; i < a0->u.list.n && !r; i++) r = affix_match(s, a0->u.list.items[i], end);
        else if (a0->t == JV_STR) r = affix_match(s, a0, end);
        else return jerr(c, at, VC_ERR_ARG, "%s first arg must be str or a tuple of str, not %s", m, jv_type_name(a0));
        *out = jv_bool(r);
        return VC_OK;
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv *sep = a0 ? a0 : jinja_arg(args, kw, n, -1, "sep");
        jv *mx = a1 ? a1 : jinja_arg(args, kw, n, -1, "maxsplit");
        return str_split(c, at, s, sep, mx && mx->t == JV_INT ? mx->u.i : -1, m[0] == 'r', out);
    }
    if (!strcmp(m, "strip")) return jinja_strip(s, a0, 1, 1, out);
    if (!strcmp(m, "lstrip")) return jinja_strip(s, a0, 1, 0, out);
    if (!strcmp(m, "rstrip")) return jinja_strip(s, a0, 0, 1, out);
    if (!strcmp(m, "upper")) return jinja_str_case(s, CASE_UPPER, out);
    if (!strcmp(m, "lower")) return jinja_str_case(s, CASE_LOWER, out);
    if (!strcmp(m, "title")) return jinja_str_case(s, CASE_PYTITLE, out);
    if (!strcmp(m, "capitalize")) return jinja_str_case(s, CASE_CAPITALIZE, out);
    if (!strcmp(m, "replace")) {
        jv *cnt = jinja_arg(args, kw, n, 2, "count");
        if (!a0 || !a1) return jerr(c, at, VC_ERR_ARG, "replace() takes at least 2 arguments");
        return jinja_replace(c, at, s, a0, a1, cnt && cnt->t == JV_INT ? cnt->u.i : -1, out);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
        if (!a0 || a0->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "%s() argument must be str", m);
        if (m[0] == 'c') {
            int64_t k = 0;
            const char *p = s->u.str.s, *e = p + s->u.str.len, *h;
            if (!a0->u.str.len) k = (int64_t)utf8_count(p, s->u.str.len) + 1;
            else while ((h = jinja_find_sub(p, (size_t)(e - p), a0->u.str.s, a0->u.str.len, 0))) { k++; p = h + a0->u.str.len; }
            *out = jv_int(k);
            return VC_OK;
        }
        const char *h = jinja_find_sub(s->u.str.s, s->u.str.len, a0->u.str.s, a0->u.str.len, m[0] == 'r');
        *out = jv_int(h ? (int64_t)utf8_count(s->u.str.s, (size_t)(h - s->u.str.s)) : -1);
        return VC_OK;
    }
    if (!strcmp(m, "join")) {
        if (!a0) return jerr(c, at, VC_ERR_ARG, "join() takes exactly one argument");
        jv *items = NULL;
        vc_status st = jinja_iterate(c, at, a0, &items);
        if (st) return st;
        jbuf b = { 0 };
        jbuf_put(&b, "", 0);
        for (size_t i = 0; i < items->u.list.n && !st; i++) {
            jv *it = items->u.list.items[i];
            if (it->t != JV_STR) st = jerr(c, at, VC_ERR_ARG, "sequence item %zu: expected str instance, %s found", i, jv_type_name(it));
            if (i) jbuf_put(&b, s->u.str.s, s->u.str.len);
            if (!st) jbuf_put(&b, it->u.str.s, it->u.str.len);
        }
        jv_unref(items);
        if (!st && b.oom) st = OOM();
        if (st) { free(b.p); return st; }
        *out = jv_str_take(b.p, b.n);
        return VC_OK;
    }
    if (!strcmp(m, "splitlines")) {
        jv *sep = jv_cstr("\n");
        vc_status st = sep ? str_split(c, at, s, sep, -1, 0, out) : OOM();
        jv_unref(sep);
        if (!st && (*out)->u.list.n && !(*out)->u.list.items[(*out)->u.list.n - 1]->u.str.len) {
            jv_unref((*out)->u.list.items[--(*out)->u.list.n]);
        }
        return st;
    }
    if (!strcmp(m, "isupper") || !strcmp(m, "islower")) { /* Python's: at least one cased character */
        *out = jv_bool(jinja_str_is_case(s, m[2] == 'l'));
        return VC_OK;
    }
    return jerr(c, at, VC_ERR_INTERNAL, "str method '%s' has no implementation", m);
}

static vc_status dict_method(jctx *c, const jnode *at, const char *m, jv *d, jv **args, char **kw, int n, jv **out) {
    if (!strcmp(m, "get")) {
        jv *k = jinja_arg(args, kw, n, 0, "key"), *def = jinja_arg(args, kw, n, 1, "default");
        if (!k) return jerr(c, at, VC_ERR_ARG, "get() takes at least 1 argument");
        jv *v = jv_dict_getv(d, k);
        *out = jv_ref(v ? v : def ? def : jv_none());
        return VC_OK;
    }
    jv *l = jv_list();
    if (!l) return OOM();
    vc_status st = VC_OK;
    for (size_t i = 0; i < d->u.dict.n && !st; i++) {
        if (m[0] == 'k') st = jv_list_push(l, jv_ref(d->u.dict.keys[i]));
        else if (m[0] == 'v') st = jv_list_push(l, jv_ref(d->u.dict.vals[i]));
        else {
            jv *pair = jv_list();
            if (!pair) { st = OOM(); break; }
            pair->is_tuple = 1;
            st = jv_list_push(pair, jv_ref(d->u.dict.keys[i]));
            if (!st) st = jv_list_push(pair, jv_ref(d->u.dict.vals[i]));
            if (!st) st = jv_list_push(l, pair);
            else jv_unref(pair);
        }
    }
    if (st) { jv_unref(l); return st; }
    *out = l;
    return VC_OK;
}

vc_status jinja_call_global(jctx *c, const jnode *at, const char *name, jv **args, char **kw, int n, jv **out);

vc_status jinja_call_builtin(jctx *c, const jnode *at, jv *fn, jv **args, char **kw, int n, jv **out) {
    jv *self = fn->u.fn.self;
    if (fn->u.fn.id == JINJA_FN_CYCLE) {  /* the argument at the iteration's index, round robin */
        if (!n) return jerr(c, at, VC_ERR_ARG, "no items for cycling given");
        *out = jv_ref(args[self->u.i % n]);
        return VC_OK;
    }
    if (fn->u.fn.id == JINJA_FN_CHANGED) {  /* whether the arguments differ from the last call's */
        jv *now = jv_list();
        vc_status st = now ? VC_OK : OOM();
        for (int i = 0; i < n && !st; i++) st = jv_list_push(now, jv_ref(args[i]));
        if (st) { jv_unref(now); return st; }
        int same = self->u.list.n && jv_equal(self->u.list.items[0], now);
        if (!same && self->u.list.n) { jv_unref(self->u.list.items[0]); self->u.list.items[0] = now; }
        else if (!same) st = jv_list_push(self, now);
        else jv_unref(now);
        *out = jv_bool(!same);
        return st;
    }
    if (!self) return jinja_call_global(c, at, fn->u.fn.name, args, kw, n, out);
    if (self->t == JV_STR) return str_method(c, at, fn->u.fn.name, self, args, kw, n, out);
    if (self->t == JV_LIST) {
        for (int i = 0; i < n; i++)
            if (kw && kw[i]) return jerr(c, at, VC_ERR_ARG, "%s() takes no keyword arguments", fn->u.fn.name);
        return jinja_list_method(c, at, fn->u.fn.name, self, args, n, out);
    }
    return dict_method(c, at, fn->u.fn.name, self, args, kw, n, out);
}
