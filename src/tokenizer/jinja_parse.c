/* Parser: tokens to a syntax tree, following Jinja2's grammar (jinja2/parser.py) for the
 * statement and expression subset that chat templates use. */
#include "tokenizer/jinja.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *src;
    jtok *t;
    int nt, i, depth;
} parser;

#define PMAX_DEPTH 150

static vc_status pfail(const parser *P, int pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static vc_status pfail(const parser *P, int pos, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    jinja_linecol(P->src, pos, &line, &col);
    return vc_fail(VC_ERR_FORMAT, "chat template line %d col %d: %s", line, col, msg);
}

static jtok *cur(parser *P) { return &P->t[P->i]; }
static int is_op(parser *P, const char *op) { return cur(P)->k == T_OP && !strcmp(cur(P)->s, op); }
static int is_name(parser *P, const char *nm) { return cur(P)->k == T_NAME && !strcmp(cur(P)->s, nm); }
static int next_is_name(parser *P, const char *nm) {
    return P->i + 1 < P->nt && P->t[P->i + 1].k == T_NAME && !strcmp(P->t[P->i + 1].s, nm);
}

static const char *tok_desc(const jtok *t) {
    switch (t->k) {
    case T_TEXT: return "template text";
    case T_VBEGIN: return "'{{'";
    case T_VEND: return "'}}'";
    case T_BBEGIN: return "'{%'";
    case T_BEND: return "'%}'";
    case T_STR: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_EOF: return "end of template";
    default: return t->s;
    }
}

static vc_status expect_op(parser *P, const char *op) {
    if (!is_op(P, op)) return pfail(P, cur(P)->pos, "expected '%s', got %s", op, tok_desc(cur(P)));
    P->i++;
    return VC_OK;
}

static jnode *node(jkind k, int pos) {
    jnode *n = calloc(1, sizeof *n);
    if (n) { n->k = k; n->pos = pos; }
    return n;
}

static vc_status add_kid(jnode *n, jnode *kid, const char *name) {
    if (n->n == n->cap) {
        int cap = n->cap ? 2 * n->cap : 4;
        jnode **v = realloc(n->v, cap * sizeof *v);
        if (!v) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        n->v = v;
        char **nm = realloc(n->names, cap * sizeof *nm);
        if (!nm) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        n->names = nm;
        n->cap = cap;
    }
    n->v[n->n] = kid;
    n->names[n->n++] = name ? strdup(name) : NULL;
    n->nnames = n->n;
    return VC_OK;
}

void jnode_free(jnode *n) {
    if (!n) return;
    if (n->k == E_REF) { free(n); return; }
    free(n->str);
    if (n->lit && n->lit->rc < 0 && n->lit != &jv_none_v && n->lit != &jv_true_v && n->lit != &jv_false_v &&
        n->lit != &jv_undef_v) {
        n->lit->rc = 1;  /* literals are immortal while the tree lives (renders share them across threads) */
        jv_unref(n->lit);
    }
    jnode_free(n->a); jnode_free(n->b); jnode_free(n->c); jnode_free(n->d);
    for (int i = 0; i < n->n; i++) jnode_free(n->v[i]);
    for (int i = 0; i < n->nnames; i++) free(n->names[i]);
    free(n->v);
    free(n->names);
    free(n);
}

static vc_status parse_expr(parser *P, jnode **out);
static vc_status parse_or(parser *P, jnode **out);
static vc_status parse_unary(parser *P, int with_filter, jnode **out);

#define TRY(x) do { st = (x); if (st) goto fail; } while (0)
#define NEW(var, kind, pos) do { var = node(kind, pos); if (!var) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto fail; } } while (0)

/* ( args ) : positional and keyword arguments */
static vc_status parse_call_args(parser *P, jnode *call) {
    vc_status st = expect_op(P, "(");
    if (st) return st;
    while (!is_op(P, ")")) {
        if (call->n) { st = expect_op(P, ","); if (st) return st; if (is_op(P, ")")) break; }
        const char *kw = NULL;
        if (is_op(P, "*") || is_op(P, "**")) kw = cur(P)->s, P->i++;  /* f(*list), f(**dict): kw "*" / "**" */
        else if (cur(P)->k == T_NAME && P->i + 1 < P->nt && P->t[P->i + 1].k == T_OP && !strcmp(P->t[P->i + 1].s, "=")) {
            kw = cur(P)->s;
            P->i += 2;
        }
        jnode *arg = NULL;
        st = parse_expr(P, &arg);
        if (st) return st;
        st = add_kid(call, arg, kw);
        if (st) { jnode_free(arg); return st; }
    }
    P->i++;
    return VC_OK;
}

static vc_status parse_list_like(parser *P, jnode *n, const char *close, int dict) {
    vc_status st;
    P->i++;
    while (!is_op(P, close)) {
        if (n->n) { st = expect_op(P, ","); if (st) return st; if (is_op(P, close)) break; }
        jnode *e = NULL;
        st = parse_expr(P, &e);
        if (st) return st;
        st = add_kid(n, e, NULL);
        if (st) { jnode_free(e); return st; }
        if (dict) {
            st = expect_op(P, ":");
            if (!st) st = parse_expr(P, &e);
            if (!st) { st = add_kid(n, e, NULL); if (st) jnode_free(e); }
            if (st) return st;
        }
    }
    P->i++;
    return VC_OK;
}

static vc_status parse_primary(parser *P, jnode **out) {
    jtok *t = cur(P);
    jnode *n = NULL;
    vc_status st = VC_OK;
    if (t->k == T_NAME) {
        const char *s = t->s;
        if (!strcmp(s, "true") || !strcmp(s, "True")) { NEW(n, E_LIT, t->pos); n->lit = jv_bool(1); }
        else if (!strcmp(s, "false") || !strcmp(s, "False")) { NEW(n, E_LIT, t->pos); n->lit = jv_bool(0); }
        else if (!strcmp(s, "none") || !strcmp(s, "None")) { NEW(n, E_LIT, t->pos); n->lit = jv_none(); }
        else { NEW(n, E_NAME, t->pos); n->str = strdup(s); }
        P->i++;
    } else if (t->k == T_STR) {
        /* adjacent string literals concatenate */
        size_t len = 0;
        int j = P->i;
        for (; j < P->nt && P->t[j].k == T_STR; j++) len += P->t[j].len;
        char *buf = malloc(len + 1);
        if (!buf) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        size_t o = 0;
        for (int k = P->i; k < j; k++) { memcpy(buf + o, P->t[k].s, P->t[k].len); o += P->t[k].len; }
        buf[o] = 0;
        NEW(n, E_LIT, t->pos);
        n->lit = jv_str_take(buf, o);
        P->i = j;
    } else if (t->k == T_INT) { NEW(n, E_LIT, t->pos); n->lit = jv_int(t->i); P->i++; }
    else if (t->k == T_FLOAT) { NEW(n, E_LIT, t->pos); n->lit = jv_float(t->f); P->i++; }
    else if (is_op(P, "(")) {
        P->i++;
        if (is_op(P, ")")) { P->i++; NEW(n, E_TUPLE, t->pos); }
        else {
            TRY(parse_expr(P, &n));
            if (is_op(P, ",")) {
                jnode *tup;
                NEW(tup, E_TUPLE, t->pos);
                st = add_kid(tup, n, NULL);
                if (st) { jnode_free(tup); goto fail; }
                n = tup;
                while (is_op(P, ",")) {
                    P->i++;
                    if (is_op(P, ")")) break;
                    jnode *e = NULL;
                    TRY(parse_expr(P, &e));
                    st = add_kid(n, e, NULL);
                    if (st) { jnode_free(e); goto fail; }
                }
            }
            TRY(expect_op(P, ")"));
        }
    } else if (is_op(P, "[")) { NEW(n, E_LIST, t->pos); TRY(parse_list_like(P, n, "]", 0)); }
    else if (is_op(P, "{")) { NEW(n, E_DICT, t->pos); TRY(parse_list_like(P, n, "}", 1)); }
    else return pfail(P, t->pos, "unexpected %s in expression", tok_desc(t));
    if ((n->k == E_LIT && !n->lit)) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto fail; }
    if (n->k == E_LIT && n->lit->rc > 0) n->lit->rc = -1;
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

static vc_status parse_subscript(parser *P, jnode **io) {
    vc_status st = VC_OK;
    int pos = cur(P)->pos;
    P->i++;
    jnode *parts[3] = { 0 }, *n = NULL;
    int k = 0, is_slice = 0;
    for (;;) {
        if (!is_op(P, ":") && !is_op(P, "]")) TRY(parse_expr(P, &parts[k]));
        if (is_op(P, ":") && k < 2) { is_slice = 1; k++; P->i++; continue; }
        break;
    }
    TRY(expect_op(P, "]"));
    if (is_slice) { NEW(n, E_SLICE, pos); n->b = parts[0]; n->c = parts[1]; n->d = parts[2]; }
    else {
        if (!parts[0]) { st = pfail(P, pos, "empty subscript"); goto fail; }
        NEW(n, E_ITEM, pos);
        n->b = parts[0];
    }
    n->a = *io;
    *io = n;
    return VC_OK;
fail:
    for (int i = 0; i < 3; i++) jnode_free(parts[i]);
    return st;
}

static vc_status parse_postfix(parser *P, jnode **io) {
    vc_status st;
    for (;;) {
        if (is_op(P, ".")) {
            P->i++;
            jtok *t = cur(P);
            if (t->k != T_NAME && t->k != T_INT) return pfail(P, t->pos, "expected attribute name after '.'");
            jnode *n = node(t->k == T_NAME ? E_ATTR : E_ITEM, t->pos);
            if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
            if (t->k == T_NAME) n->str = strdup(t->s);
            else {
                n->b = node(E_LIT, t->pos);
                if (n->b) n->b->lit = jv_int(t->i);
                if (n->b && n->b->lit) n->b->lit->rc = -1;
            }
            n->a = *io;
            *io = n;
            P->i++;
        } else if (is_op(P, "[")) {
            st = parse_subscript(P, io);
            if (st) return st;
        } else if (is_op(P, "(")) {
            jnode *n = node(E_CALL, cur(P)->pos);
            if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
            n->a = *io;
            *io = n;
            st = parse_call_args(P, n);
            if (st) return st;
        } else return VC_OK;
    }
}

/* after '|' or 'is' at pos: the filter's or test's name and arguments, applied to *io */
static vc_status parse_one_filter(parser *P, jnode **io, int is_test, int pos) {
    vc_status st;
    jnode *n = node(is_test ? E_TEST : E_FILTER, pos);
    if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    n->a = *io;
    *io = n;
    if (is_test && is_name(P, "not")) { n->op = 1; P->i++; }
    if (cur(P)->k != T_NAME) return pfail(P, cur(P)->pos, "expected a %s name", is_test ? "test" : "filter");
    n->str = strdup(cur(P)->s);
    P->i++;
    while (is_op(P, ".") && P->i + 1 < P->nt && P->t[P->i + 1].k == T_NAME) { /* dotted names */
        size_t l = strlen(n->str) + strlen(P->t[P->i + 1].s) + 2;
        char *s = malloc(l);
        if (!s) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        snprintf(s, l, "%s.%s", n->str, P->t[P->i + 1].s);
        free(n->str);
        n->str = s;
        P->i += 2;
    }
    if (is_op(P, "(")) { st = parse_call_args(P, n); if (st) return st; }
    else if (is_test) {
        jtok *t = cur(P);
        int arg_ok = t->k == T_STR || t->k == T_INT || t->k == T_FLOAT || is_op(P, "(") || is_op(P, "[") ||
                     is_op(P, "{") || (t->k == T_NAME && strcmp(t->s, "else") && strcmp(t->s, "or") &&
                                       strcmp(t->s, "and") && strcmp(t->s, "is") && strcmp(t->s, "if"));
        if (t->k == T_NAME && !strcmp(t->s, "is")) return pfail(P, t->pos, "You cannot chain multiple tests with is");
        if (arg_ok) {
            jnode *arg = NULL;
            st = parse_primary(P, &arg);
            if (!st) st = parse_postfix(P, &arg);
            if (!st) { st = add_kid(n, arg, NULL); if (st) jnode_free(arg); }
            else jnode_free(arg);
            if (st) return st;
        }
    }
    return VC_OK;
}

static vc_status parse_filter_expr(parser *P, jnode **io) {
    vc_status st;
    for (;;) {
        if (is_op(P, "|") || is_name(P, "is")) {
            int is_test = cur(P)->k == T_NAME, pos = cur(P)->pos;
            P->i++;
            st = parse_one_filter(P, io, is_test, pos);
            if (st) return st;
        } else if (is_op(P, "(")) {
            jnode *n = node(E_CALL, cur(P)->pos);
            if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
            n->a = *io;
            *io = n;
            st = parse_call_args(P, n);
            if (st) return st;
        } else return VC_OK;
    }
}

static vc_status parse_unary(parser *P, int with_filter, jnode **out) {
    vc_status st;
    if (++P->depth > PMAX_DEPTH) return pfail(P, cur(P)->pos, "expression nested too deeply");
    jnode *n = NULL;
    if (is_op(P, "-") || is_op(P, "+")) {
        n = node(is_op(P, "-") ? E_NEG : E_POS, cur(P)->pos);
        if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        P->i++;
        st = parse_unary(P, 0, &n->a);
    } else st = parse_primary(P, &n);
    if (!st) st = parse_postfix(P, &n);
    if (!st && with_filter) st = parse_filter_expr(P, &n);
    P->depth--;
    if (st) { jnode_free(n); return st; }
    *out = n;
    return VC_OK;
}

static jnode *binop(jkind k, int op, int pos, jnode *a, jnode *b) {
    jnode *n = node(k, pos);
    if (!n) { jnode_free(a); jnode_free(b); return NULL; }
    n->op = op; n->a = a; n->b = b;
    return n;
}

typedef vc_status (*level_fn)(parser *, jnode **);
struct opdef { const char *s; int op; };

static vc_status parse_binary_level(parser *P, jnode **out, level_fn next, const struct opdef *ops, int right) {
    jnode *a = NULL;
    vc_status st = next(P, &a);
    if (st) return st;
    for (;;) {
        const struct opdef *d = NULL;
        for (int i = 0; ops[i].s; i++) if (is_op(P, ops[i].s)) { d = &ops[i]; break; }
        if (!d) break;
        int pos = cur(P)->pos;
        P->i++;
        jnode *b = NULL;
        st = right ? parse_unary(P, 1, &b) : next(P, &b);
        if (st) { jnode_free(a); return st; }
        a = binop(E_BIN, d->op, pos, a, b);
        if (!a) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    }
    *out = a;
    return VC_OK;
}

static vc_status parse_unary1(parser *P, jnode **o) { return parse_unary(P, 1, o); }
static vc_status parse_pow(parser *P, jnode **o) {
    static const struct opdef ops[] = { { "**", OP_POW }, { 0, 0 } };
    return parse_binary_level(P, o, parse_unary1, ops, 1);
}
static vc_status parse_math2(parser *P, jnode **o) {
    static const struct opdef ops[] = { { "*", OP_MUL }, { "/", OP_DIV }, { "//", OP_FLOORDIV }, { "%", OP_MOD }, { 0, 0 } };
    return parse_binary_level(P, o, parse_pow, ops, 0);
}
static vc_status parse_concat(parser *P, jnode **o) {
    static const struct opdef ops[] = { { "~", OP_CONCAT }, { 0, 0 } };
    return parse_binary_level(P, o, parse_math2, ops, 0);
}
static vc_status parse_math1(parser *P, jnode **o) {
    static const struct opdef ops[] = { { "+", OP_ADD }, { "-", OP_SUB }, { 0, 0 } };
    return parse_binary_level(P, o, parse_concat, ops, 0);
}

static int cmp_op(parser *P, int *adv) {
    static const struct opdef ops[] = { { "==", OP_EQ }, { "!=", OP_NE }, { "<", OP_LT }, { "<=", OP_LE },
                                        { ">", OP_GT }, { ">=", OP_GE }, { 0, 0 } };
    *adv = 1;
    for (int i = 0; ops[i].s; i++) if (is_op(P, ops[i].s)) return ops[i].op;
    if (is_name(P, "in")) return OP_IN;
    if (is_name(P, "not") && next_is_name(P, "in")) { *adv = 2; return OP_NOTIN; }
    return 0;
}

static vc_status parse_compare(parser *P, jnode **out) {
    jnode *a = NULL, *res = NULL;
    vc_status st = parse_math1(P, &a);
    if (st) return st;
    int adv, op;
    while ((op = cmp_op(P, &adv))) {
        int pos = cur(P)->pos;
        P->i += adv;
        jnode *b = NULL;
        st = parse_math1(P, &b);
        if (st) { jnode_free(res ? res : a); return st; } /* after the first comparison, res owns a */
        /* a < b < c is (a < b) and (b < c); the second use of b is a non-owning reference */
        jnode *lhs = a;
        if (res) { lhs = node(E_REF, pos); if (lhs) lhs->a = a; }
        jnode *c = lhs ? binop(E_CMP, op, pos, lhs, b) : NULL;
        if (!c) { jnode_free(res); if (!lhs) { jnode_free(b); } return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
        res = res ? binop(E_AND, 0, pos, res, c) : c;
        if (!res) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        a = b;
    }
    *out = res ? res : a;
    return VC_OK;
}

static vc_status parse_not(parser *P, jnode **out) {
    if (is_name(P, "not")) {
        jnode *n = node(E_NOT, cur(P)->pos);
        if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        P->i++;
        if (++P->depth > PMAX_DEPTH) { jnode_free(n); return pfail(P, cur(P)->pos, "expression nested too deeply"); }
        vc_status st = parse_not(P, &n->a);
        P->depth--;
        if (st) { jnode_free(n); return st; }
        *out = n;
        return VC_OK;
    }
    return parse_compare(P, out);
}

static vc_status parse_logic(parser *P, jnode **out, const char *word, jkind k, level_fn next) {
    jnode *a = NULL;
    vc_status st = next(P, &a);
    if (st) return st;
    while (is_name(P, word)) {
        int pos = cur(P)->pos;
        P->i++;
        jnode *b = NULL;
        st = next(P, &b);
        if (st) { jnode_free(a); return st; }
        a = binop(k, 0, pos, a, b);
        if (!a) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    }
    *out = a;
    return VC_OK;
}
static vc_status parse_and(parser *P, jnode **o) { return parse_logic(P, o, "and", E_AND, parse_not); }
static vc_status parse_or(parser *P, jnode **o) { return parse_logic(P, o, "or", E_OR, parse_and); }

/* conditional expression: a if cond [else b] */
static vc_status parse_expr(parser *P, jnode **out) {
    if (++P->depth > PMAX_DEPTH) return pfail(P, cur(P)->pos, "expression nested too deeply");
    jnode *a = NULL;
    vc_status st = parse_or(P, &a);
    while (!st && is_name(P, "if")) {
        jnode *n = node(E_COND, cur(P)->pos);
        if (!n) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); break; }
        P->i++;
        n->b = a;
        a = n;
        st = parse_or(P, &n->a);
        if (!st && is_name(P, "else")) { P->i++; st = parse_expr(P, &n->c); }
    }
    P->depth--;
    if (st) { jnode_free(a); return st; }
    *out = a;
    return VC_OK;
}

/* ---- statements ---- */
static vc_status parse_body(parser *P, const char *const *ends, const char *what, int open_pos, jnode **out);

static vc_status expect_bend(parser *P) {
    if (cur(P)->k != T_BEND) return pfail(P, cur(P)->pos, "expected '%%}', got %s", tok_desc(cur(P)));
    P->i++;
    return VC_OK;
}

static vc_status parse_if(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "elif", "else", "endif", NULL };
    static const char *const ends2[] = { "endif", NULL };
    vc_status st;
    jnode *n = NULL;
    NEW(n, S_IF, pos);
    TRY(parse_expr(P, &n->a));
    TRY(expect_bend(P));
    TRY(parse_body(P, ends, "if", pos, &n->b));
    if (is_name(P, "elif")) {
        int p2 = cur(P)->pos;
        P->i++;
        TRY(parse_if(P, p2, &n->c));
        *out = n;
        return VC_OK;     /* the nested if consumed endif */
    }
    if (is_name(P, "else")) {
        P->i++;
        TRY(expect_bend(P));
        TRY(parse_body(P, ends2, "if", pos, &n->c));
    }
    P->i++; /* endif */
    TRY(expect_bend(P));
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

static vc_status parse_targets(parser *P, jnode *n) {
    int paren = is_op(P, "(");
    if (paren) P->i++;
    do {
        if (n->n && !is_op(P, ",")) break;
        if (n->n) P->i++;
        if (cur(P)->k != T_NAME) return pfail(P, cur(P)->pos, "expected a variable name, got %s", tok_desc(cur(P)));
        vc_status st = add_kid(n, NULL, cur(P)->s);
        if (st) return st;
        P->i++;
    } while (is_op(P, ","));
    if (paren) return expect_op(P, ")");
    return VC_OK;
}

static vc_status parse_for(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "else", "endfor", NULL };
    static const char *const ends2[] = { "endfor", NULL };
    vc_status st;
    jnode *n = NULL;
    NEW(n, S_FOR, pos);
    TRY(parse_targets(P, n));
    if (!is_name(P, "in")) { st = pfail(P, cur(P)->pos, "expected 'in' in for loop, got %s", tok_desc(cur(P))); goto fail; }
    P->i++;
    TRY(parse_or(P, &n->a));
    if (is_op(P, ",")) { st = pfail(P, cur(P)->pos, "unsupported construct: tuple as for-loop iterable"); goto fail; }
    if (is_name(P, "if")) { P->i++; TRY(parse_expr(P, &n->b)); }
    if (is_name(P, "recursive")) { st = pfail(P, cur(P)->pos, "unsupported construct: recursive for loop"); goto fail; }
    TRY(expect_bend(P));
    TRY(parse_body(P, ends, "for", pos, &n->c));
    if (is_name(P, "else")) {
        P->i++;
        TRY(expect_bend(P));
        TRY(parse_body(P, ends2, "for", pos, &n->d));
    }
    P->i++;
    TRY(expect_bend(P));
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

static vc_status parse_set(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "endset", NULL };
    vc_status st;
    jnode *n = NULL;
    NEW(n, S_SET, pos);
    if (cur(P)->k == T_NAME && P->t[P->i + 1].k == T_OP && !strcmp(P->t[P->i + 1].s, ".")) {
        NEW(n->c, E_NAME, cur(P)->pos);           /* set ns.attr = value */
        n->c->str = strdup(cur(P)->s);
        P->i += 2;
        if (cur(P)->k != T_NAME) { st = pfail(P, cur(P)->pos, "expected attribute name"); goto fail; }
        n->str = strdup(cur(P)->s);
        P->i++;
    } else TRY(parse_targets(P, n));
    if (cur(P)->k == T_BEND && !n->c && n->n == 1) {
        n->k = S_SETBLOCK;
        P->i++;
        TRY(parse_body(P, ends, "set", pos, &n->b));
        P->i++;
        TRY(expect_bend(P));
        *out = n;
        return VC_OK;
    }
    TRY(expect_op(P, "="));
    TRY(parse_expr(P, &n->a));
    if (is_op(P, ",")) {
        jnode *tup;
        NEW(tup, E_TUPLE, n->a->pos);
        st = add_kid(tup, n->a, NULL);
        n->a = tup;
        if (st) goto fail;
        while (is_op(P, ",")) {
            P->i++;
            jnode *e = NULL;
            TRY(parse_expr(P, &e));
            st = add_kid(tup, e, NULL);
            if (st) { jnode_free(e); goto fail; }
        }
    }
    TRY(expect_bend(P));
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

/* `%}`, the block's body up to one of ends, the closing tag's name and its `%}` */
static vc_status block_body(parser *P, const char *const *ends, const char *what, int pos, jnode **body) {
    vc_status st = expect_bend(P);
    if (!st) st = parse_body(P, ends, what, pos, body);
    if (!st) {
        P->i++;
        st = expect_bend(P);
    }
    return st;
}

/* ( name [= default], ... ): a macro's or a call block's parameters, as n's children and names */
static vc_status parse_params(parser *P, jnode *n) {
    vc_status st = expect_op(P, "(");
    while (!st && !is_op(P, ")")) {
        if (n->n && (st = expect_op(P, ","))) break;
        if (is_op(P, ")")) break;
        if (cur(P)->k != T_NAME) return pfail(P, cur(P)->pos, "expected parameter name");
        const char *nm = cur(P)->s;
        P->i++;
        jnode *def = NULL;
        if (is_op(P, "=")) { P->i++; st = parse_expr(P, &def); }
        if (!st) st = add_kid(n, def, nm);
        if (st) jnode_free(def);
    }
    if (!st) P->i++;
    return st;
}

/* the USES_* names read anywhere in n but inside macros it defines */
static int uses_special(const jnode *n) {
    if (!n || n->k == S_MACRO) return 0;
    int u = 0;
    if (n->k == E_NAME && n->str)
        u = !strcmp(n->str, "varargs") ? USES_VARARGS : !strcmp(n->str, "kwargs") ? USES_KWARGS
          : !strcmp(n->str, "caller") ? USES_CALLER : 0;
    if (n->k != E_REF) u |= uses_special(n->a) | uses_special(n->b) | uses_special(n->c) | uses_special(n->d);
    for (int i = 0; i < n->n; i++) u |= uses_special(n->v[i]);
    return u;
}

static vc_status parse_macro(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "endmacro", NULL };
    vc_status st;
    jnode *n = NULL;
    NEW(n, S_MACRO, pos);
    if (cur(P)->k != T_NAME) { st = pfail(P, cur(P)->pos, "expected macro name"); goto fail; }
    n->str = strdup(cur(P)->s);
    P->i++;
    TRY(parse_params(P, n));
    TRY(block_body(P, ends, "macro", pos, &n->c));
    n->op = uses_special(n->c);
    for (int i = 0; i < n->n; i++) n->op |= uses_special(n->v[i]);
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

/* {% call [(params)] macro(args) %}body{% endcall %}: the node is also the caller macro (params, body in c, "caller") */
static vc_status parse_callblock(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "endcall", NULL };
    vc_status st;
    jnode *n = NULL;
    NEW(n, S_CALLBLOCK, pos);
    n->str = strdup("caller");
    if (!n->str) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto fail; }
    if (is_op(P, "(")) TRY(parse_params(P, n));
    TRY(parse_expr(P, &n->a));
    if (n->a->k != E_CALL) { st = pfail(P, n->a->pos, "expected a call after 'call'"); goto fail; }
    TRY(block_body(P, ends, "call", pos, &n->c));
    n->op = uses_special(n->c);
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

/* {% filter name(args)|name2 %}body{% endfilter %}: the chain applied to JINJA_FILTER_INPUT */
static vc_status parse_filterblock(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "endfilter", NULL };
    vc_status st;
    jnode *n = NULL, *in = NULL;
    NEW(n, S_FILTERBLOCK, pos);
    NEW(in, E_NAME, pos);
    n->a = in;
    in->str = strdup(JINJA_FILTER_INPUT);
    if (!in->str) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto fail; }
    for (;;) {
        TRY(parse_one_filter(P, &n->a, 0, cur(P)->pos));
        if (!is_op(P, "|")) break;
        P->i++;
    }
    TRY(block_body(P, ends, "filter", pos, &n->b));
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

/* {% with a = expr, ... %}body{% endwith %}: the values taken in the enclosing scope, the names the body's */
static vc_status parse_with(parser *P, int pos, jnode **out) {
    static const char *const ends[] = { "endwith", NULL };
    vc_status st;
    jnode *n = NULL;
    NEW(n, S_WITH, pos);
    while (cur(P)->k != T_BEND) {
        if (n->n) TRY(expect_op(P, ","));
        if (cur(P)->k != T_NAME) { st = pfail(P, cur(P)->pos, "expected a variable name"); goto fail; }
        const char *nm = cur(P)->s;
        P->i++;
        TRY(expect_op(P, "="));
        jnode *e = NULL;
        TRY(parse_expr(P, &e));
        st = add_kid(n, e, nm);
        if (st) { jnode_free(e); goto fail; }
    }
    TRY(block_body(P, ends, "with", pos, &n->b));
    *out = n;
    return VC_OK;
fail:
    jnode_free(n);
    return st;
}

static vc_status parse_stmt(parser *P, jnode **out) {
    static const char *const gen_ends[] = { "endgeneration", NULL };
    int pos = P->t[P->i - 1].pos;
    jtok *t = cur(P);
    if (t->k != T_NAME) return pfail(P, t->pos, "expected a statement keyword, got %s", tok_desc(t));
    const char *kw = t->s;
    P->i++;
    if (!strcmp(kw, "if")) return parse_if(P, pos, out);
    if (!strcmp(kw, "for")) return parse_for(P, pos, out);
    if (!strcmp(kw, "set")) return parse_set(P, pos, out);
    if (!strcmp(kw, "macro")) return parse_macro(P, pos, out);
    if (!strcmp(kw, "call")) return parse_callblock(P, pos, out);
    if (!strcmp(kw, "filter")) return parse_filterblock(P, pos, out);
    if (!strcmp(kw, "with")) return parse_with(P, pos, out);
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        jnode *n = node(kw[0] == 'b' ? S_BREAK : S_CONTINUE, pos);
        if (!n) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        vc_status st = expect_bend(P);
        if (st) { jnode_free(n); return st; }
        *out = n;
        return VC_OK;
    }
    if (!strcmp(kw, "generation")) { /* transformers' AssistantTracker: renders its body unchanged */
        vc_status st = expect_bend(P);
        if (!st) st = parse_body(P, gen_ends, "generation", pos, out);
        if (!st) { P->i++; st = expect_bend(P); if (st) { jnode_free(*out); *out = NULL; } }
        return st;
    }
    if (!strncmp(kw, "end", 3) || !strcmp(kw, "else") || !strcmp(kw, "elif"))
        return pfail(P, t->pos, "unexpected '%s' (no open block it could close)", kw);
    return pfail(P, t->pos, "unsupported construct: '{%% %s %%}' tag", kw);
}

static vc_status parse_body(parser *P, const char *const *ends, const char *what, int open_pos, jnode **out) {
    vc_status st;
    jnode *body = node(S_BODY, P->t[P->i].pos);
    if (!body) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    if (++P->depth > PMAX_DEPTH) { st = pfail(P, cur(P)->pos, "blocks nested too deeply"); goto fail; }
    for (;;) {
        jtok *t = cur(P);
        jnode *n = NULL;
        if (t->k == T_EOF) {
            if (ends) {
                int line, col;
                jinja_linecol(P->src, open_pos, &line, &col);
                int last = 0;
                while (ends[last + 1]) last++;
                st = pfail(P, t->pos, "unexpected end of template: '%s' block opened at line %d col %d is not closed (missing '{%% %s %%}')",
                           what, line, col, ends[last]);
                goto fail;
            }
            break;
        }
        if (t->k == T_TEXT) {
            NEW(n, S_TEXT, t->pos);
            n->str = malloc(t->len + 1);
            if (!n->str) { jnode_free(n); st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto fail; }
            memcpy(n->str, t->s, t->len + 1);
            n->len = t->len;
            P->i++;
        } else if (t->k == T_VBEGIN) {
            NEW(n, S_OUT, t->pos);
            P->i++;
            st = parse_expr(P, &n->a);
            if (!st && cur(P)->k != T_VEND) st = pfail(P, cur(P)->pos, "expected '}}', got %s", tok_desc(cur(P)));
            if (st) { jnode_free(n); goto fail; }
            P->i++;
        } else if (t->k == T_BBEGIN) {
            P->i++;
            if (ends && cur(P)->k == T_NAME)
                for (int k = 0; ends[k]; k++)
                    if (!strcmp(cur(P)->s, ends[k])) goto done;
            TRY(parse_stmt(P, &n));
        } else {
            st = pfail(P, t->pos, "unexpected %s", tok_desc(t));
            goto fail;
        }
        st = add_kid(body, n, NULL);
        if (st) { jnode_free(n); goto fail; }
    }
done:
    P->depth--;
    *out = body;
    return VC_OK;
fail:
    jnode_free(body);
    return st;
}

/* Jinja's source preparation: newlines normalized to \n, one trailing newline dropped
 * (keep_trailing_newline=False). */
char *jinja_normalize(const char *src) {
    size_t n = strlen(src), o = 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') { s[o++] = '\n'; if (src[i + 1] == '\n') i++; }
        else s[o++] = src[i];
    }
    if (o && s[o - 1] == '\n') o--;
    s[o] = 0;
    return s;
}

vc_status jinja_parse(const char *src, jnode **out) {
    jtok *t = NULL;
    int nt = 0;
    vc_status st = jinja_lex(src, &t, &nt);
    if (st) return st;
    parser P = { .src = src, .t = t, .nt = nt };
    st = parse_body(&P, NULL, NULL, 0, out);
    jinja_tokens_free(t, nt);
    return st;
}
