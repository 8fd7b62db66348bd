/* Evaluator: walks the syntax tree with a chain of variable frames and writes text into a buffer.
 * Scoping follows Jinja: a for-loop iteration and a macro call open a frame, if-blocks do not. */
#include "tokenizer/jinja.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread jframe *t_cur;  /* frame of the statement being executed (per render thread) */
jframe *jinja_frame(void) { return t_cur; }
void jinja_set_frame(jframe *f) { t_cur = f; }

vc_status jerr(const jctx *c, const jnode *n, vc_status st, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 0, col = 0;
    if (c && n) jinja_linecol(c->src, n->pos, &line, &col);
    return vc_fail(st, "chat template line %d col %d: %s", line, col, msg);
}

/* ---- frames ---- */
vc_status jframe_set(jframe *f, const char *name, jv *v) {
    if (!v) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) { jv_unref(f->vals[i]); f->vals[i] = v; return VC_OK; }
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        char **nm = realloc(f->names, cap * sizeof *nm);
        if (nm) f->names = nm;
        jv **vv = nm ? realloc(f->vals, cap * sizeof *vv) : NULL;
        if (!vv) { jv_unref(v); return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
        f->vals = vv;
        f->cap = cap;
    }
    f->names[f->n] = strdup(name);
    if (!f->names[f->n]) { jv_unref(v); return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
    f->vals[f->n++] = v;
    return VC_OK;
}

jv *jframe_get_local(const jframe *f, const char *name) {
    for (int i = f->n - 1; i >= 0; i--)
        if (!strcmp(f->names[i], name)) return f->vals[i];
    return NULL;
}

jv *jframe_get(const jframe *f, const char *name) {
    for (; f; f = f->parent)
        for (int i = f->n - 1; i >= 0; i--)
            if (!strcmp(f->names[i], name)) return f->vals[i];
    return NULL;
}

void jframe_clear(jframe *f) {
    for (int i = 0; i < f->n; i++) { free(f->names[i]); jv_unref(f->vals[i]); }
    free(f->names);
    free(f->vals);
    f->names = NULL;
    f->vals = NULL;
    f->n = f->cap = 0;
}

static vc_status step(jctx *c, const jnode *n) {
    if (++c->steps > JINJA_MAX_STEPS) {
        c->steps = JINJA_MAX_STEPS + 1;
        c->over_said = 1;
        return jerr(c, n, VC_ERR_ARG, JINJA_LIMIT_MSG, JINJA_MAX_STEPS);
    }
    return VC_OK;
}

vc_status jinja_undef_error(jctx *c, const jnode *n, const jv *v) {
    return jerr(c, n, VC_ERR_ARG, "%s", v->hint ? v->hint : "value is undefined");
}

/* ---- expressions ---- */
static int64_t norm_index(int64_t i, int64_t len) { return i < 0 ? i + len : i; }

static int is_index(const jv *v) { return v && (v->t == JV_INT || v->t == JV_BOOL); }
static int64_t index_of(const jv *v) { return v->t == JV_INT ? v->u.i : v->u.b; }

/* Python slice indices for a sequence of `len` elements (the indices' types checked by the caller) */
static vc_status slice_bounds(jctx *c, const jnode *n, jv *s0, jv *s1, jv *s2, int64_t len,
                              int64_t *start, int64_t *stop, int64_t *stepv) {
    int64_t stp = is_index(s2) ? index_of(s2) : 1;
    if (stp == 0) return jerr(c, n, VC_ERR_ARG, "slice step cannot be zero");
    int64_t lo = stp > 0 ? 0 : -1, hi = stp > 0 ? len : len - 1;
    int64_t a = stp > 0 ? lo : hi, b = stp > 0 ? hi : lo;
    if (is_index(s0)) { a = norm_index(index_of(s0), len); a = a < lo ? lo : a > hi ? hi : a; }
    if (is_index(s1)) { b = norm_index(index_of(s1), len); b = b < lo ? lo : b > hi ? hi : b; }
    *start = a; *stop = b; *stepv = stp;
    return VC_OK;
}

static const char *utf8_next(const char *p, const char *end) {
    p++;
    while (p < end && ((unsigned char)*p & 0xC0) == 0x80) p++;
    return p;
}

/* codepoint offsets of a UTF-8 string: offs[i] = byte start of char i, offs[n] = len */
size_t *jinja_utf8_offsets(const char *s, size_t len, size_t *count) {
    /* counted with the same walk that fills the table: utf8_count skips every continuation byte, this walk
     * makes a stray one at the start (invalid UTF-8, e.g. from a dataset) a character of its own */
    size_t n = 0, k = 0;
    jinja_work(len / 64);
    for (const char *p = s, *e = s + len; p < e; p = utf8_next(p, e)) n++;
    size_t *o = malloc((n + 1) * sizeof *o);
    if (!o) return NULL;
    for (const char *p = s, *e = s + len; p < e; p = utf8_next(p, e)) o[k++] = (size_t)(p - s);
    o[k] = len;
    *count = k;
    return o;
}

static vc_status eval_slice(jctx *c, const jnode *n, jv *obj, jv **out) {
    jv *p[3] = { 0 };
    jnode *pn[3] = { n->b, n->c, n->d };
    vc_status st = VC_OK;
    for (int i = 0; i < 3 && !st; i++) if (pn[i]) st = jinja_eval(c, pn[i], &p[i]);
    int64_t a, b, s;
    if (st) goto out;
    /* Jinja compiles a slice to Python's own subscript (not its getitem, which would make a TypeError Undefined):
     * slicing what is not a sequence, or with indices that are not integers, fails */
    for (int i = 0; i < 3 && !st; i++)
        if (p[i] && p[i]->t != JV_NONE && p[i]->t != JV_UNDEF && !is_index(p[i]))
            st = jerr(c, n, VC_ERR_ARG, "slice indices must be integers or None or have an __index__ method");
    if (st) goto out;
    if (obj->t == JV_UNDEF) st = jinja_undef_error(c, n, obj);
    else if (obj->t != JV_LIST && obj->t != JV_STR)
        st = jerr(c, n, VC_ERR_ARG, obj->t == JV_DICT ? "unhashable type: 'slice'" : "'%s' object is not subscriptable", jv_type_name(obj));
    else if (obj->t == JV_LIST) {
        st = slice_bounds(c, n, p[0], p[1], p[2], (int64_t)obj->u.list.n, &a, &b, &s);
        if (st) goto out;
        jv *l = jv_list();
        if (!l) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto out; }
        l->is_tuple = obj->is_tuple;
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s)
            if ((st = jv_list_push(l, jv_ref(obj->u.list.items[i])))) break;
        if (st) { jv_unref(l); goto out; }
        *out = l;
    } else if (obj->t == JV_STR) {
        size_t cnt;
        size_t *offs = jinja_utf8_offsets(obj->u.str.s, obj->u.str.len, &cnt);
        if (!offs) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto out; }
        st = slice_bounds(c, n, p[0], p[1], p[2], (int64_t)cnt, &a, &b, &s);
        jbuf buf = { 0 };
        jbuf_put(&buf, "", 0);
        for (int64_t i = a; !st && (s > 0 ? i < b : i > b); i += s)
            jbuf_put(&buf, obj->u.str.s + offs[i], offs[i + 1] - offs[i]);
        free(offs);
        if (st || buf.oom) { free(buf.p); if (!st) st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto out; }
        *out = jv_str_take(buf.p, buf.n);
    }
out:
    for (int i = 0; i < 3; i++) jv_unref(p[i]);
    return st;
}

static vc_status get_item(jctx *c, const jnode *n, jv *obj, jv *key, jv **out) {
    if (obj->t == JV_UNDEF) return jinja_undef_error(c, n, obj);
    if (obj->t == JV_DICT || obj->t == JV_NS) {
        jv *v = jv_dict_getv(obj, key);
        if (v) { *out = jv_ref(v); return VC_OK; }
        if (key->t == JV_STR && obj->t == JV_DICT) return jinja_getattr(c, n, obj, key->u.str.s, out);
    } else if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT || key->t == JV_BOOL)) {
        int64_t i = key->t == JV_INT ? key->u.i : key->u.b;
        if (obj->t == JV_LIST) {
            i = norm_index(i, (int64_t)obj->u.list.n);
            if (i >= 0 && i < (int64_t)obj->u.list.n) { *out = jv_ref(obj->u.list.items[i]); return VC_OK; }
        } else {
            size_t cnt;
            size_t *offs = jinja_utf8_offsets(obj->u.str.s, obj->u.str.len, &cnt);
            if (!offs) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
            i = norm_index(i, (int64_t)cnt);
            if (i >= 0 && i < (int64_t)cnt) *out = jv_str(obj->u.str.s + offs[i], offs[i + 1] - offs[i]);
            free(offs);
            if (i >= 0 && i < (int64_t)cnt) return *out ? VC_OK : vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        }
    } else if (key->t == JV_STR) return jinja_getattr(c, n, obj, key->u.str.s, out);
    jbuf kb = { 0 };
    jv_write_repr(&kb, key, 0);
    *out = jv_undef("'%s object' has no attribute %s", jv_type_name(obj), kb.p ? kb.p : "?");
    free(kb.p);
    return VC_OK;
}

static vc_status eval_call(jctx *c, const jnode *n, jv **out) {
    jv *fn = NULL, **args = NULL;
    char **kw = NULL;
    int nargs = 0;
    vc_status st = jinja_eval(c, n->a, &fn);
    if (!st) st = jinja_eval_args(c, n, &args, &kw, &nargs);
    if (!st) st = jinja_call_value(c, n, fn, args, kw, nargs, out);
    if (args) jinja_args_free(args, kw, nargs);
    jv_unref(fn);
    return st;
}

static vc_status eval_filter_or_test(jctx *c, const jnode *n, jv **out) {
    jv *in = NULL, **args = NULL;
    char **kw = NULL;
    int nargs = 0;
    vc_status st = jinja_eval(c, n->a, &in);
    if (!st) st = jinja_eval_args(c, n, &args, &kw, &nargs);
    if (!st && n->k == E_FILTER) st = jinja_filter(c, n, n->str, in, args, kw, nargs, out);
    else if (!st) {
        for (int i = 0; i < nargs && !st; i++)
            if (kw && kw[i]) st = jerr(c, n, VC_ERR_UNSUPPORTED, "unsupported construct: keyword argument to test '%s'", n->str);
        int r = 0;
        if (!st) st = jinja_test(c, n, n->str, in, args, nargs, &r);
        if (!st) *out = jv_bool(n->op ? !r : r);
    }
    if (args) jinja_args_free(args, kw, nargs);
    jv_unref(in);
    return st;
}

vc_status jinja_binop(jctx *c, const jnode *n, int op, jv *a, jv *b, jv **out);
vc_status jinja_compare(jctx *c, const jnode *n, int op, jv *a, jv *b, int *res);

static vc_status eval_seq(jctx *c, const jnode *n, jv **out) {
    jv *l = n->k == E_DICT ? jv_dict() : jv_list();
    if (!l) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    l->is_tuple = n->k == E_TUPLE;
    vc_status st = VC_OK;
    for (int i = 0; i < n->n && !st; i++) {
        jv *v = NULL;
        st = jinja_eval(c, n->v[i], &v);
        if (st) break;
        if (n->k != E_DICT) { st = jv_list_push(l, v); continue; }
        jv *val = NULL;
        st = jinja_eval(c, n->v[++i], &val);
        if (st) { jv_unref(v); break; }
        st = jv_dict_set(l, v, val);
    }
    if (st) { jv_unref(l); return st; }
    *out = l;
    return VC_OK;
}

vc_status jinja_eval(jctx *c, const jnode *n, jv **out) {
    vc_status st = step(c, n);
    if (st) return st;
    if (++c->depth > JINJA_MAX_DEPTH) { c->depth--; return jerr(c, n, VC_ERR_ARG, "evaluation nested too deeply"); }
    jv *a = NULL, *b = NULL;
    *out = NULL;
    switch (n->k) {
    case E_LIT: *out = jv_ref(n->lit); break;
    case E_REF: st = jinja_eval(c, n->a, out); break;
    case E_NAME: {
        jv *v = jframe_get(t_cur, n->str);
        *out = v ? jv_ref(v) : jinja_global_func(n->str);
        if (!*out) *out = jv_undef("'%s' is undefined", n->str);
        break;
    }
    case E_ATTR:
        st = jinja_eval(c, n->a, &a);
        if (!st && a->t == JV_UNDEF) st = jinja_undef_error(c, n, a);
        if (!st) st = jinja_getattr(c, n, a, n->str, out);
        break;
    case E_ITEM:
        st = jinja_eval(c, n->a, &a);
        if (!st) st = jinja_eval(c, n->b, &b);
        if (!st) st = get_item(c, n, a, b, out);
        break;
    case E_SLICE:
        st = jinja_eval(c, n->a, &a);
        if (!st) st = eval_slice(c, n, a, out);
        break;
    case E_CALL: st = eval_call(c, n, out); break;
    case E_FILTER: case E_TEST: st = eval_filter_or_test(c, n, out); break;
    case E_NOT:
        st = jinja_eval(c, n->a, &a);
        if (!st) *out = jv_bool(!jv_truthy(a));
        break;
    case E_NEG: case E_POS:
        st = jinja_eval(c, n->a, &a);
        if (st) break;
        if (a->t == JV_INT || a->t == JV_BOOL) {
            int64_t i = a->t == JV_INT ? a->u.i : a->u.b;
            *out = jv_int(n->k == E_NEG ? -i : i);
        } else if (a->t == JV_FLOAT) *out = jv_float(n->k == E_NEG ? -a->u.f : a->u.f);
        else if (a->t == JV_UNDEF) st = jinja_undef_error(c, n, a);
        else st = jerr(c, n, VC_ERR_ARG, "bad operand type for unary %c: '%s'", n->k == E_NEG ? '-' : '+', jv_type_name(a));
        break;
    case E_BIN:
        st = jinja_eval(c, n->a, &a);
        if (!st) st = jinja_eval(c, n->b, &b);
        if (!st) st = jinja_binop(c, n, n->op, a, b, out);
        break;
    case E_CMP: {
        int r = 0;
        st = jinja_eval(c, n->a, &a);
        if (!st) st = jinja_eval(c, n->b, &b);
        if (!st) st = jinja_compare(c, n, n->op, a, b, &r);
        if (!st) *out = jv_bool(r);
        break;
    }
    case E_AND: case E_OR:
        st = jinja_eval(c, n->a, &a);
        if (st) break;
        if (jv_truthy(a) == (n->k == E_OR)) { *out = a; a = NULL; }
        else st = jinja_eval(c, n->b, out);
        break;
    case E_COND:
        st = jinja_eval(c, n->a, &a);
        if (st) break;
        if (jv_truthy(a)) st = jinja_eval(c, n->b, out);
        else if (n->c) st = jinja_eval(c, n->c, out);
        else *out = jv_undef("the inline if-expression evaluated to false and no else section was defined");
        break;
    case E_LIST: case E_TUPLE: case E_DICT: st = eval_seq(c, n, out); break;
    default: st = jerr(c, n, VC_ERR_INTERNAL, "statement node in expression position");
    }
    jv_unref(a);
    jv_unref(b);
    c->depth--;
    if (!st && !*out) st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    if (jinja_over() && !c->over_said) { /* work metered inside an operation: name the expression */
        c->over_said = 1;
        st = jerr(c, n, VC_ERR_ARG, JINJA_LIMIT_MSG, JINJA_MAX_STEPS);
    }
    if (st) { jv_unref(*out); *out = NULL; }
    return st;
}

/* ---- statements ---- */
static vc_status exec(jrun *r, const jnode *n, jbuf *out);

vc_status jinja_exec_body(jrun *r, const jnode *n, jbuf *out) {
    for (int i = 0; i < n->n; i++) {
        vc_status st = exec(r, n->v[i], out);
        if (st) return st;
        if (r->c->loop_ctl) return VC_OK;
    }
    return VC_OK;
}

static vc_status bind_targets(jctx *c, const jnode *n, jframe *f, jv *v) {
    if (n->n == 1) return jframe_set(f, n->names[0], jv_ref(v));
    if (v->t != JV_LIST)
        return jerr(c, n, VC_ERR_ARG, "cannot unpack non-sequence %s into %d names", jv_type_name(v), n->n);
    if ((int)v->u.list.n != n->n)
        return jerr(c, n, VC_ERR_ARG, "cannot unpack %zu values into %d names", v->u.list.n, n->n);
    for (int i = 0; i < n->n; i++) {
        vc_status st = jframe_set(f, n->names[i], jv_ref(v->u.list.items[i]));
        if (st) return st;
    }
    return VC_OK;
}

vc_status jinja_iterate(jctx *c, const jnode *n, jv *v, jv **list); /* builtins: value -> list of items */

/* loop.cycle(...) (self: the index) and loop.changed(...) (self: the loop's one-item list of the last value) */
static jv *loop_method(int id, const char *name, jv *self) {
    jv *f = self ? calloc(1, sizeof *f) : NULL;
    if (!f) { jv_unref(self); return NULL; }
    f->t = JV_FUNC;
    f->rc = 1;
    f->u.fn.id = id;
    f->u.fn.self = self;
    f->u.fn.name = name;
    return f;
}

static vc_status loop_info(jv *items, size_t i, size_t len, jv *changed, jv **out) {
    jv *d = jv_dict();
    if (!d) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    struct { const char *k; jv *v; } kv[] = {
        { "index", jv_int((int64_t)i + 1) }, { "index0", jv_int((int64_t)i) },
        { "revindex", jv_int((int64_t)(len - i)) }, { "revindex0", jv_int((int64_t)(len - i - 1)) },
        { "first", jv_bool(i == 0) }, { "last", jv_bool(i + 1 == len) }, { "length", jv_int((int64_t)len) },
        { "depth", jv_int(1) }, { "depth0", jv_int(0) },
        { "previtem", i > 0 ? jv_ref(items->u.list.items[i - 1]) : NULL },
        { "nextitem", i + 1 < len ? jv_ref(items->u.list.items[i + 1]) : NULL },
        { "cycle", loop_method(JINJA_FN_CYCLE, "cycle", jv_int((int64_t)i)) },
        { "changed", loop_method(JINJA_FN_CHANGED, "changed", jv_ref(changed)) },
    };
    vc_status st = VC_OK;
    for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) {
        if (!kv[k].v && (k == 9 || k == 10)) continue;  /* no previtem / nextitem */
        if (!kv[k].v) st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        if (!st) st = jv_dict_set(d, jv_cstr(kv[k].k), kv[k].v);
        else jv_unref(kv[k].v);
    }
    if (st) { jv_unref(d); return st; }
    *out = d;
    return VC_OK;
}

static vc_status exec_for(jrun *r, const jnode *n, jbuf *out) {
    jctx *c = r->c;
    jv *it = NULL, *items = NULL, *kept = NULL;
    vc_status st = jinja_eval(c, n->a, &it);
    if (!st) st = jinja_iterate(c, n->a, it, &items);
    if (st) goto out;
    jframe *saved = t_cur;
    if (n->b) { /* loop filter: applied before loop.index/length are computed */
        kept = jv_list();
        if (!kept) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto out; }
        for (size_t i = 0; i < items->u.list.n && !st; i++) {
            jframe f = { .parent = saved };
            jv *cond = NULL;
            t_cur = &f;
            st = step(c, n);
            if (!st) st = bind_targets(c, n, &f, items->u.list.items[i]);
            if (!st) st = jinja_eval(c, n->b, &cond);
            if (!st && jv_truthy(cond)) st = jv_list_push(kept, jv_ref(items->u.list.items[i]));
            jv_unref(cond);
            jframe_clear(&f);
            t_cur = saved;
        }
        if (st) goto out;
        jv_unref(items);
        items = kept;
        kept = NULL;
    }
    size_t len = items->u.list.n;
    jv *changed = jv_list();  /* loop.changed's last value, kept across the iterations */
    if (!changed) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto out; }
    r->loops++;
    for (size_t i = 0; i < len && !st; i++) {
        jframe f = { .parent = saved };
        jv *loop = NULL;
        t_cur = &f;
        jinja_work(7);   /* an iteration costs about as much as several expression nodes */
        st = step(c, n);
        if (!st) st = loop_info(items, i, len, changed, &loop);
        if (!st) st = jframe_set(&f, "loop", loop);
        if (!st) st = bind_targets(c, n, &f, items->u.list.items[i]);
        if (!st) st = jinja_exec_body(r, n->c, out);
        jframe_clear(&f);
        t_cur = saved;
        if (c->loop_ctl == 1) { c->loop_ctl = 0; break; }
        c->loop_ctl = 0;
    }
    r->loops--;
    jv_unref(changed);
    if (!st && len == 0 && n->d) st = jinja_exec_body(r, n->d, out);
out:
    jv_unref(it);
    jv_unref(items);
    jv_unref(kept);
    return st;
}

static int jv_contains(const jv *hay, const jv *needle, int depth) {
    if (hay == needle) return 1;
    if (depth > JINJA_MAX_DEPTH || jinja_work(1)) return 1;
    if (hay->t == JV_LIST)
        for (size_t i = 0; i < hay->u.list.n; i++) if (jv_contains(hay->u.list.items[i], needle, depth + 1)) return 1;
    if (hay->t == JV_DICT || hay->t == JV_NS)
        for (size_t i = 0; i < hay->u.dict.n; i++) if (jv_contains(hay->u.dict.vals[i], needle, depth + 1)) return 1;
    return 0;
}

static vc_status exec_set(jrun *r, const jnode *n) {
    jctx *c = r->c;
    jv *v = NULL;
    vc_status st = jinja_eval(c, n->a, &v);
    if (st) return st;
    if (n->c) {
        jv *ns = jframe_get(t_cur, n->c->str);
        if (!ns) st = jerr(c, n, VC_ERR_ARG, "'%s' is undefined", n->c->str);
        else if (ns->t != JV_NS) st = jerr(c, n, VC_ERR_ARG, "cannot assign attribute on non-namespace object");
        else if (jv_contains(v, ns, 0) && !jinja_over()) st = jerr(c, n, VC_ERR_UNSUPPORTED, "unsupported construct: namespace stored inside itself");
        else if (!jinja_over()) { st = jv_dict_set(ns, jv_cstr(n->str), v); v = NULL; }
    } else st = bind_targets(c, n, t_cur, v);
    jv_unref(v);
    if (jinja_over() && !c->over_said) { c->over_said = 1; st = jerr(c, n, VC_ERR_ARG, JINJA_LIMIT_MSG, JINJA_MAX_STEPS); }
    return st;
}

static vc_status exec_setblock(jrun *r, const jnode *n) {
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    vc_status st = jinja_exec_body(r, n->b, &b);
    if (!st && b.oom) st = jerr(r->c, n, VC_ERR_NOMEM, "output exceeds the size limit");
    if (st) { free(b.p); return st; }
    return jframe_set(t_cur, n->names[0], jv_str_take(b.p, b.n));
}

static vc_status exec(jrun *r, const jnode *n, jbuf *out) {
    jctx *c = r->c;
    vc_status st = step(c, n);
    if (st) return st;
    switch (n->k) {
    case S_BODY: return jinja_exec_body(r, n, out);
    case S_TEXT: jbuf_put(out, n->str, n->len); break;
    case S_OUT: {
        jv *v = NULL;
        st = jinja_eval(c, n->a, &v);
        if (!st) st = jv_write_str(out, v);
        jv_unref(v);
        if (st) return st;
        break;
    }
    case S_IF: {
        jv *v = NULL;
        st = jinja_eval(c, n->a, &v);
        if (st) return st;
        int t = jv_truthy(v);
        jv_unref(v);
        if (t) return exec(r, n->b, out);
        return n->c ? exec(r, n->c, out) : VC_OK;
    }
    case S_FOR: return exec_for(r, n, out);
    case S_SET: return exec_set(r, n);
    case S_SETBLOCK: return exec_setblock(r, n);
    case S_CALLBLOCK: st = jinja_exec_callblock(r, n, out); if (st) return st; break;
    case S_FILTERBLOCK: st = jinja_exec_filterblock(r, n, out); if (st) return st; break;
    case S_WITH: st = jinja_exec_with(r, n, out); if (st) return st; break;
    case S_MACRO: {
        jv *m = calloc(1, sizeof *m);
        if (!m) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        m->t = JV_MACRO;
        m->rc = 1;
        m->u.macro.node = n;
        return jframe_set(t_cur, n->str, m);
    }
    case S_BREAK: case S_CONTINUE:
        if (!r->loops) return jerr(c, n, VC_ERR_FORMAT, "'%s' outside of a for loop", n->k == S_BREAK ? "break" : "continue");
        c->loop_ctl = n->k == S_BREAK ? 1 : 2;
        break;
    default: return jerr(c, n, VC_ERR_INTERNAL, "expression node in statement position");
    }
    if (out->oom) return jerr(c, n, VC_ERR_NOMEM, "output exceeds the size limit of %zu bytes", JINJA_MAX_OUT);
    if (jinja_over() && !c->over_said) { c->over_said = 1; return jerr(c, n, VC_ERR_ARG, JINJA_LIMIT_MSG, JINJA_MAX_STEPS); }
    return VC_OK;
}

vc_status jinja_render(const char *src, const jnode *root, jframe *globals, jbuf *out) {
    jctx c = { .src = src, .root = globals };
    jrun r = { .c = &c, .f = globals };
    jframe *saved = t_cur;
    long *saved_meter = jinja_meter;
    t_cur = globals;
    jinja_meter = &c.steps;
    jbuf_put(out, "", 0);
    vc_status st = jinja_exec_body(&r, root, out);
    if (!st && jinja_over()) st = vc_fail(VC_ERR_ARG, "chat template: " JINJA_LIMIT_MSG, JINJA_MAX_STEPS);
    t_cur = saved;
    jinja_meter = saved_meter;
    if (!st && out->oom) st = vc_fail(VC_ERR_NOMEM, "chat template: output exceeds the size limit");
    return st;
}
