/* Calls and the block statements built on them: arguments with f(*seq) and f(**dict) spread, macros (defaults,
 * varargs, kwargs, caller), {% call %} blocks (the body as the callee's caller()), {% filter %} blocks and
 * {% with %} scopes. */
#include "tokenizer/jinja.h"
#include <stdlib.h>
#include <string.h>

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")

typedef struct { jv **args; char **kw; int n, cap; } arglist;

static vc_status arg_push(arglist *a, jv *v, const char *kw) {
    if (!v) return OOM();
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 8;
        jv **args = realloc(a->args, cap * sizeof *args);
        if (args) a->args = args;
        char **kws = args ? realloc(a->kw, cap * sizeof *kws) : NULL;
        if (!kws) { jv_unref(v); return OOM(); }
        a->kw = kws;
        a->cap = cap;
    }
    a->kw[a->n] = kw ? strdup(kw) : NULL;
    if (kw && !a->kw[a->n]) { jv_unref(v); return OOM(); }
    a->args[a->n++] = v;
    return VC_OK;
}

void jinja_args_free(jv **args, char **kw, int n) {
    for (int i = 0; i < n; i++) { jv_unref(args[i]); if (kw) free(kw[i]); }
    free(args);
    free(kw);
}

/* the values of n's arguments (n->v, keyword names in n->names), *seq spread as positional arguments and **dict as
 * keyword ones; free with jinja_args_free */
vc_status jinja_eval_args(jctx *c, const jnode *n, jv ***args, char ***kw, int *nargs) {
    arglist a = { 0 };
    vc_status st = VC_OK;
    for (int i = 0; i < n->n && !st; i++) {
        jv *v = NULL;
        const char *name = n->names ? n->names[i] : NULL;
        st = jinja_eval(c, n->v[i], &v);
        if (st) break;
        if (name && !strcmp(name, "*")) {
            jv *items = NULL;
            st = jinja_iterate(c, n->v[i], v, &items);
            for (size_t k = 0; !st && k < items->u.list.n; k++) st = arg_push(&a, jv_ref(items->u.list.items[k]), NULL);
            jv_unref(items);
        } else if (name && !strcmp(name, "**")) {
            if (v->t != JV_DICT) st = jerr(c, n->v[i], VC_ERR_ARG, "argument after ** must be a mapping, not %s", jv_type_name(v));
            for (size_t k = 0; !st && k < v->u.dict.n; k++) {
                jv *key = v->u.dict.keys[k];
                if (key->t != JV_STR) st = jerr(c, n->v[i], VC_ERR_ARG, "keywords must be strings");
                else st = arg_push(&a, jv_ref(v->u.dict.vals[k]), key->u.str.s);
            }
        } else {
            st = arg_push(&a, v, name);
            v = NULL;
        }
        jv_unref(v);
    }
    if (st) { jinja_args_free(a.args, a.kw, a.n); return st; }
    if (!a.args && !(a.args = calloc(1, sizeof *a.args))) return OOM();
    *args = a.args, *kw = a.kw, *nargs = a.n;
    return VC_OK;
}

/* a macro's (or a call block's caller's) body rendered with its parameters bound: positional arguments first, then
 * keyword ones, then defaults (evaluated in the macro's frame); extra ones in varargs / kwargs where the body reads
 * them; `caller` where a call block passes one */
static vc_status call_macro(jctx *c, const jnode *at, const jnode *m, jframe *scope, jv **args, char **kw, int n,
                            jv **out) {
    if (c->depth > JINJA_MAX_DEPTH / 2) return jerr(c, at, VC_ERR_ARG, "macro calls nested too deeply");
    jframe f = { .parent = scope ? scope : c->root };
    jframe *saved = jinja_frame();
    vc_status st = VC_OK;
    int npos = 0;
    for (int i = 0; i < n; i++) if (!kw || !kw[i]) npos++;
    if (npos > m->n && !(m->op & USES_VARARGS))
        return jerr(c, at, VC_ERR_ARG, "macro '%s' takes not more than %d argument(s)", m->str, m->n);
    jinja_set_frame(&f);
    jv *varargs = (m->op & USES_VARARGS) ? jv_list() : NULL, *kwargs = (m->op & USES_KWARGS) ? jv_dict() : NULL;
    if (((m->op & USES_VARARGS) && !varargs) || ((m->op & USES_KWARGS) && !kwargs)) st = OOM();
    if (varargs) varargs->is_tuple = 1;
    for (int p = 0, pi = 0, seen = 0; seen < npos && !st; pi++) { /* positional arguments, in order */
        if (kw && kw[pi]) continue;
        if (p < m->n) st = jframe_set(&f, m->names[p++], jv_ref(args[pi]));
        else st = jv_list_push(varargs, jv_ref(args[pi]));
        seen++;
    }
    for (int i = 0; i < n && !st; i++) { /* keyword arguments */
        if (!kw || !kw[i]) continue;
        int p = 0;
        while (p < m->n && strcmp(kw[i], m->names[p])) p++;
        if (p < m->n && p < npos) st = jerr(c, at, VC_ERR_ARG, "macro '%s' got multiple values for argument '%s'", m->str, kw[i]);
        else if (p < m->n) st = jframe_set(&f, m->names[p], jv_ref(args[i]));
        else if (!strcmp(kw[i], "caller") && (m->op & USES_CALLER)) st = jframe_set(&f, "caller", jv_ref(args[i]));
        else if (!strcmp(kw[i], "caller"))
            st = jerr(c, at, VC_ERR_ARG, "macro '%s' was invoked with a call block but does not use caller()", m->str);
        else if (kwargs) st = jv_dict_set(kwargs, jv_cstr(kw[i]), jv_ref(args[i]));
        else st = jerr(c, at, VC_ERR_ARG, "macro '%s' takes no keyword argument '%s'", m->str, kw[i]);
    }
    for (int p = npos; p < m->n && !st; p++) { /* defaults, in the macro's frame */
        if (jframe_get_local(&f, m->names[p])) continue;
        jv *v = NULL;
        if (m->v[p]) st = jinja_eval(c, m->v[p], &v);
        else v = jv_undef("parameter '%s' was not provided", m->names[p]);
        if (!st) st = jframe_set(&f, m->names[p], v);
    }
    if (!st && varargs) { st = jframe_set(&f, "varargs", varargs); varargs = NULL; }
    if (!st && kwargs) { st = jframe_set(&f, "kwargs", kwargs); kwargs = NULL; }
    if (!st && (m->op & USES_CALLER) && !jframe_get_local(&f, "caller"))
        st = jframe_set(&f, "caller", jv_undef("no caller: macro '%s' was not called from a call block", m->str));
    jv_unref(varargs);
    jv_unref(kwargs);
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    jrun r = { .c = c, .f = &f };
    c->depth++;
    if (!st) st = jinja_exec_body(&r, m->c, &b);
    c->depth--;
    c->loop_ctl = 0;
    jinja_set_frame(saved);
    jframe_clear(&f);
    if (!st && b.oom) st = jerr(c, at, VC_ERR_NOMEM, "output exceeds the size limit");
    if (st) { free(b.p); return st; }
    *out = jv_str_take(b.p, b.n);
    return VC_OK;
}

vc_status jinja_call_value(jctx *c, const jnode *at, jv *fn, jv **args, char **kw, int n, jv **out) {
    if (fn->t == JV_MACRO && !fn->u.macro.node)
        return jerr(c, at, VC_ERR_ARG, "caller() called after its call block ended");
    if (fn->t == JV_MACRO) return call_macro(c, at, fn->u.macro.node, fn->u.macro.scope, args, kw, n, out);
    if (fn->t == JV_FUNC) return jinja_call_builtin(c, at, fn, args, kw, n, out);
    if (fn->t == JV_UNDEF) return jinja_undef_error(c, at, fn);
    return jerr(c, at, VC_ERR_ARG, "'%s' object is not callable", jv_type_name(fn));
}

/* {% call [(params)] m(args) %}body{% endcall %}: m(args, caller=the body as a macro seeing this scope) */
vc_status jinja_exec_callblock(jrun *r, const jnode *n, jbuf *out) {
    jctx *c = r->c;
    const jnode *call = n->a;
    jv *fn = NULL, **args = NULL, *res = NULL;
    char **kw = NULL;
    int nargs = 0;
    jv *caller = calloc(1, sizeof *caller);
    if (!caller) return OOM();
    caller->t = JV_MACRO;
    caller->rc = 1;
    caller->u.macro.node = n;
    caller->u.macro.scope = jinja_frame();
    vc_status st = jinja_eval(c, call->a, &fn);
    if (!st) st = jinja_eval_args(c, call, &args, &kw, &nargs);
    if (!st) {
        jv **a2 = realloc(args, (size_t)(nargs + 1) * sizeof *a2);
        char **k2 = a2 ? realloc(kw, (size_t)(nargs + 1) * sizeof *k2) : NULL;
        if (a2) args = a2;
        if (k2) kw = k2;
        if (!a2 || !k2 || !(kw[nargs] = strdup("caller"))) st = OOM();
        else args[nargs++] = jv_ref(caller);
    }
    if (!st) st = jinja_call_value(c, n, fn, args, kw, nargs, &res);
    if (!st) st = jv_write_str(out, res);
    caller->u.macro.node = NULL;  /* a caller kept past its block (set into a namespace) refuses to run */
    caller->u.macro.scope = NULL;
    jv_unref(caller);
    jv_unref(res);
    jv_unref(fn);
    jinja_args_free(args, kw, nargs);
    return st;
}

/* {% filter f(args)|g %}body{% endfilter %}: the chain applied to the rendered body */
vc_status jinja_exec_filterblock(jrun *r, const jnode *n, jbuf *out) {
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    vc_status st = jinja_exec_body(r, n->b, &b);
    if (!st && b.oom) st = jerr(r->c, n, VC_ERR_NOMEM, "output exceeds the size limit");
    if (st) { free(b.p); return st; }
    jframe f = { .parent = jinja_frame() }, *saved = jinja_frame();
    jv *v = NULL;
    st = jframe_set(&f, JINJA_FILTER_INPUT, jv_str_take(b.p, b.n));
    jinja_set_frame(&f);
    if (!st) st = jinja_eval(r->c, n->a, &v);
    jinja_set_frame(saved);
    if (!st) st = jv_write_str(out, v);
    jv_unref(v);
    jframe_clear(&f);
    return st;
}

/* {% with a = x, b = y %}body{% endwith %}: x and y evaluated here, the body in a scope of its own */
vc_status jinja_exec_with(jrun *r, const jnode *n, jbuf *out) {
    jframe f = { .parent = jinja_frame() }, *saved = jinja_frame();
    vc_status st = VC_OK;
    for (int i = 0; i < n->n && !st; i++) {
        jv *v = NULL;
        st = jinja_eval(r->c, n->v[i], &v);
        if (!st) st = jframe_set(&f, n->names[i], v);
    }
    jinja_set_frame(&f);
    if (!st) st = jinja_exec_body(r, n->b, out);
    jinja_set_frame(saved);
    jframe_clear(&f);
    return st;
}
