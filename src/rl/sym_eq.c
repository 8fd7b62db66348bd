/* mathruler's are_equal_under_sympy (mathruler/grader.py, the PRM800K grader): should_allow_eval, then sympy's
 * parse_expr as Python 3.11 and sympy 1.14 run it (Python's tokens; auto_symbol, split_symbols,
 * auto_number, factorial_notation, implicit multiplication and application; Python's precedence), then
 * simplify(diff) == 0, decided by sym_eval.c. Names of sympy's namespace (src/rl/sympy_names.inc) stay themselves;
 * of those with at most two distinct letters (the only ones should_allow_eval lets through) pi, oo, nan, zoo, sqrt,
 * ln, re, im, csc and frac are built, the rest (ff, rf, li, id, all, eye, ...) make the answer "not equal". */
#include "rl/sym_eq.h"
#include "rl/reward_str.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef enum { IT_NUM, IT_SYM, IT_CONST, IT_FUNC, IT_OP, IT_END } item_kind;
typedef struct {
    item_kind kind;
    sym_kind sk;   /* IT_NUM / IT_CONST / IT_FUNC: the node kind */
    char text[48]; /* number digits, symbol name, operator */
} item;

typedef struct {
    item *it;
    size_t n, cap, pos;
    sym_node *nodes;
    size_t nn, ncap;
    int fail;
} sym_ps;

static int py_letter(int32_t c) {
    if (c < 0) return 0;
    utf8proc_category_t g = utf8proc_category(c);
    return g == UTF8PROC_CATEGORY_LU || g == UTF8PROC_CATEGORY_LL || g == UTF8PROC_CATEGORY_LT ||
           g == UTF8PROC_CATEGORY_LM || g == UTF8PROC_CATEGORY_LO;
}
static int id_start(int32_t c) { return c == '_' || (c < 128 ? ((c | 32) >= 'a' && (c | 32) <= 'z') : py_letter(c)); }
static int id_cont(int32_t c) {
    if (id_start(c) || (c >= '0' && c <= '9')) return 1;
    if (c < 128) return 0;
    utf8proc_category_t g = utf8proc_category(c);
    return g == UTF8PROC_CATEGORY_MN || g == UTF8PROC_CATEGORY_MC || g == UTF8PROC_CATEGORY_ND ||
           g == UTF8PROC_CATEGORY_PC;
}

static item *push(sym_ps *p, item_kind k) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        item *it = realloc(p->it, cap * sizeof *it);
        if (!it) { p->fail = 1; return NULL; }
        p->it = it;
        p->cap = cap;
    }
    item *r = &p->it[p->n++];
    memset(r, 0, sizeof *r);
    r->kind = k;
    return r;
}
static void set_text(item *t, const char *s, size_t n, sym_ps *p) {
    if (n >= sizeof t->text) { p->fail = 1; n = sizeof t->text - 1; }
    memcpy(t->text, s, n);
    t->text[n] = 0;
}

/* digits with single '_' separators (Python's (?:_?[0-9])*) after a first digit; returns the length */
static size_t digits(const char *s, int (*ok)(char)) {
    size_t i = 0;
    if (!ok(s[0])) return 0;
    i = 1;
    for (;;) {
        if (ok(s[i])) i++;
        else if (s[i] == '_' && ok(s[i + 1])) i += 2;
        else return i;
    }
}
static int dec(char c) { return c >= '0' && c <= '9'; }
static int hex(char c) { return dec(c) || ((c | 32) >= 'a' && (c | 32) <= 'f'); }
static int oct(char c) { return c >= '0' && c <= '7'; }
static int bin(char c) { return c == '0' || c == '1'; }

static size_t exponent(const char *s) {
    if ((*s | 32) != 'e') return 0;
    size_t i = 1 + (s[1] == '+' || s[1] == '-');
    size_t d = digits(s + i, dec);
    return d ? i + d : 0;
}
/* Python's Floatnumber at s: Pointfloat or Expfloat; 0 when none */
static size_t floatnumber(const char *s) {
    size_t d = digits(s, dec);
    if (d && s[d] == '.') {
        size_t f = digits(s + d + 1, dec);
        return d + 1 + f + exponent(s + d + 1 + f);
    }
    if (!d && s[0] == '.') {
        size_t f = digits(s + 1, dec);
        return f ? 1 + f + exponent(s + 1 + f) : 0;
    }
    size_t e = d ? exponent(s + d) : 0;
    return e ? d + e : 0;
}
/* Python's Number token (Imagnumber | Floatnumber | Intnumber, first alternative that matches) */
static size_t number(const char *s, sym_kind *k) {
    size_t d = digits(s, dec), f = floatnumber(s);
    if (d && (s[d] | 32) == 'j') { *k = SN_IMAG; return d + 1; }
    if (f && (s[f] | 32) == 'j') { *k = SN_IMAG; return f + 1; }
    if (f) { *k = SN_FLOAT; return f; }
    *k = SN_INT;
    if (s[0] == '0' && s[1]) {
        char b = (char)(s[1] | 32);
        size_t n = b == 'x' ? digits(s + 2 + (s[2] == '_'), hex) : b == 'o' ? digits(s + 2 + (s[2] == '_'), oct)
                 : b == 'b' ? digits(s + 2 + (s[2] == '_'), bin) : 0;
        if (n) return 2 + (s[2] == '_') + n;
        size_t i = 1; /* 0(?:_?0)* */
        for (;;) {
            if (s[i] == '0') i++;
            else if (s[i] == '_' && s[i + 1] == '0') i += 2;
            else return i;
        }
    }
    return d;
}

static const char *const KEYWORDS[] = { "False", "None", "True", "and", "as", "assert", "async", "await", "break",
                                        "class", "continue", "def", "del", "elif", "else", "except", "finally",
                                        "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
                                        "not", "or", "pass", "raise", "return", "try", "while", "with", "yield" };
static const char *const GREEK[] = { "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
                                     "kappa", "lamda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau",
                                     "upsilon", "phi", "chi", "psi", "omega", "digamma", "stigma", "koppa",
                                     "sampi", "heta", "san", "archaic koppa", "archaic sampi", "pamphylian digamma" };
/* the names of sympy's namespace with at most two distinct letters (no others pass should_allow_eval) that are
 * built; the rest of the namespace (ff, rf, li, id, all, eye, ...) is refused */
static const struct { const char *name; item_kind kind; sym_kind sk; } KNOWN[] = {
    { "pi", IT_CONST, SN_PI },    { "oo", IT_CONST, SN_INF },  { "nan", IT_CONST, SN_NAN }, { "zoo", IT_CONST, SN_ZOO },
    { "sqrt", IT_FUNC, SN_SQRT }, { "ln", IT_FUNC, SN_LN },    { "re", IT_FUNC, SN_RE },    { "im", IT_FUNC, SN_IM },
    { "csc", IT_FUNC, SN_CSC },   { "frac", IT_FUNC, SN_FRAC },
};
/* parse_expr's global namespace: `from sympy import *` and Python's builtin functions (generated) */
static const char *const NAMESPACE[] = {
#include "sympy_names.inc"
};
static int cmp_name(const void *a, const void *b) { return strcmp(a, *(const char *const *)b); }
static int in_namespace(const char *s) {
    return bsearch(s, NAMESPACE, sizeof NAMESPACE / sizeof NAMESPACE[0], sizeof NAMESPACE[0], cmp_name) != NULL;
}

static int in_list(const char *s, const char *const *l, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, l[i])) return 1;
    return 0;
}
static int greek_name(const char *s) {
    for (size_t i = 0; i < sizeof GREEK / sizeof GREEK[0]; i++)
        if (!strcasecmp(s, GREEK[i])) return 1;
    return 0;
}

/* split_symbols: a name of several characters becomes its characters (digit runs as numbers) */
static void split_name(sym_ps *p, const char *s) {
    for (const char *q = s; *q && !p->fail;) {
        if (dec(*q)) {
            size_t d = 0;
            while (dec(q[d])) d++;
            item *t = push(p, IT_NUM);
            if (!t) return;
            t->sk = SN_INT;
            set_text(t, q, d, p);
            q += d;
            continue;
        }
        item *t = push(p, IT_SYM);
        if (!t) return;
        size_t k = vc_rs_u8len(q);
        set_text(t, q, k, p);
        q += k;
    }
}

static void name_item(sym_ps *p, const char *s, size_t n) {
    char name[48];
    if (n >= sizeof name) { p->fail = 1; return; }
    memcpy(name, s, n);
    name[n] = 0;
    if (in_list(name, KEYWORDS, sizeof KEYWORDS / sizeof KEYWORDS[0])) { p->fail = 1; return; }
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (!strcmp(name, KNOWN[i].name)) {
            item *t = push(p, KNOWN[i].kind);
            if (t) { t->sk = KNOWN[i].sk; set_text(t, name, n, p); }
            return;
        }
    if (in_namespace(name)) { p->fail = 1; return; } /* sympy's, not built here */
    if (!strchr(name, '_') && !greek_name(name) && vc_rs_cp_count(name, n) > 1) { split_name(p, name); return; }
    item *t = push(p, IT_SYM);
    if (t) set_text(t, name, n, p);
}

/* Python's tokens of the expression */
static void tokenize(sym_ps *p, const char *s) {
    static const char *const OPS[] = { "**", "//", "+", "-", "*", "/", "%", "(", ")", ",", "!" };
    while (*s && !p->fail) {
        if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f') { s++; continue; }
        sym_kind k;
        size_t n = (dec(*s) || (*s == '.' && dec(s[1]))) ? number(s, &k) : 0;
        if (n) {
            item *t = push(p, IT_NUM);
            if (!t) return;
            t->sk = k;
            size_t m = 0;
            for (size_t i = 0; i < n && m + 1 < sizeof t->text; i++)
                if (s[i] != '_') t->text[m++] = s[i];
            if (m + 1 >= sizeof t->text) p->fail = 1;
            s += n;
            continue;
        }
        int32_t c;
        size_t k1 = vc_rs_next_cp(s, &c);
        if (id_start(c)) {
            size_t len = k1;
            while (s[len] && (vc_rs_next_cp(s + len, &c), id_cont(c))) len += vc_rs_u8len(s + len);
            name_item(p, s, len);
            s += len;
            continue;
        }
        size_t i = 0;
        for (; i < sizeof OPS / sizeof OPS[0]; i++)
            if (!strncmp(s, OPS[i], strlen(OPS[i]))) break;
        if (i == sizeof OPS / sizeof OPS[0]) { p->fail = 1; return; } /* not part of this grammar */
        item *t = push(p, IT_OP);
        if (!t) return;
        set_text(t, OPS[i], strlen(OPS[i]), p);
        s += strlen(OPS[i]);
    }
    push(p, IT_END);
}

static sym_node *node(sym_ps *p, sym_kind k, sym_node *a, sym_node *b) {
    if (p->nn == p->ncap) {
        p->fail = 1;
        return NULL;
    }
    sym_node *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof *r);
    r->kind = k;
    r->a = a;
    r->b = b;
    return r;
}

static const item *peek(const sym_ps *p) { return &p->it[p->pos]; }
static int is_op(const sym_ps *p, const char *op) { return peek(p)->kind == IT_OP && !strcmp(peek(p)->text, op); }
static int starts_primary(const sym_ps *p) {
    item_kind k = peek(p)->kind;
    return k == IT_NUM || k == IT_SYM || k == IT_CONST || k == IT_FUNC || is_op(p, "(");
}

static sym_node *expr(sym_ps *p, int depth);
static sym_node *factor(sym_ps *p, int depth);

static sym_node *number_node(sym_ps *p, const item *t) {
    sym_node *r = node(p, t->sk, NULL, NULL);
    if (!r) return NULL;
    memcpy(r->text, t->text, sizeof r->text);
    if (t->sk == SN_INT) {
        int base = 10;
        const char *s = t->text;
        if (s[0] == '0' && ((s[1] | 32) == 'x' || (s[1] | 32) == 'o' || (s[1] | 32) == 'b')) {
            base = (s[1] | 32) == 'x' ? 16 : (s[1] | 32) == 'o' ? 8 : 2;
            s += 2;
        }
        __int128 v = 0;
        long double f = 0;
        for (; *s; s++) {
            int d = dec(*s) ? *s - '0' : (*s | 32) - 'a' + 10;
            if (v > ((__int128)1 << 100)) r->big = 1;
            if (!r->big) v = v * base + d;
            f = f * base + d;
        }
        r->ival = v;
        r->fval = f;
    } else {
        char buf[48];
        size_t n = strlen(t->text) - (t->sk == SN_IMAG);
        memcpy(buf, t->text, n);
        buf[n] = 0;
        r->fval = strtold(buf, NULL);
    }
    return r;
}

/* a call's argument list: exactly one argument for the functions known here */
static sym_node *call(sym_ps *p, sym_kind fk, int depth) {
    p->pos++; /* ( */
    sym_node *a = expr(p, depth + 1);
    if (!a || !is_op(p, ")")) { p->fail = 1; return NULL; }
    p->pos++;
    return node(p, fk, a, NULL);
}

static sym_node *primary(sym_ps *p, int depth) {
    if (depth > 100) { p->fail = 1; return NULL; }
    const item *t = peek(p);
    if (t->kind == IT_NUM) { p->pos++; return number_node(p, t); }
    if (t->kind == IT_SYM) {
        p->pos++;
        sym_node *r = node(p, SN_SYM, NULL, NULL);
        if (r) memcpy(r->text, t->text, sizeof r->text);
        return r;
    }
    if (t->kind == IT_CONST) { p->pos++; return node(p, t->sk, NULL, NULL); }
    if (t->kind == IT_FUNC) {
        sym_kind fk = t->sk;
        p->pos++;
        if (is_op(p, "(")) return call(p, fk, depth);
        /* implicit application: the function of the next primary */
        if (!starts_primary(p)) { p->fail = 1; return NULL; }
        sym_node *a = primary(p, depth + 1);
        return a ? node(p, fk, a, NULL) : NULL;
    }
    if (is_op(p, "(")) {
        p->pos++;
        sym_node *r = expr(p, depth + 1);
        if (!r || !is_op(p, ")")) { p->fail = 1; return NULL; } /* tuples and empty parentheses too */
        p->pos++;
        return r;
    }
    p->fail = 1;
    return NULL;
}

static sym_node *postfix(sym_ps *p, int depth) {
    sym_node *r = primary(p, depth);
    while (r && is_op(p, "!")) {
        p->pos++;
        if (is_op(p, "!")) { p->fail = 1; return NULL; } /* factorial2: not built */
        r = node(p, SN_FACT, r, NULL);
    }
    return r;
}

static sym_node *power(sym_ps *p, int depth) {
    sym_node *b = postfix(p, depth);
    if (b && is_op(p, "**")) {
        p->pos++;
        sym_node *e = factor(p, depth + 1);
        return e ? node(p, SN_POW, b, e) : NULL;
    }
    return b;
}

static sym_node *factor(sym_ps *p, int depth) {
    if (depth > 100) { p->fail = 1; return NULL; }
    if (is_op(p, "-") || is_op(p, "+")) {
        int neg = is_op(p, "-");
        p->pos++;
        sym_node *a = factor(p, depth + 1);
        return a && neg ? node(p, SN_NEG, a, NULL) : a;
    }
    return power(p, depth);
}

static sym_node *term(sym_ps *p, int depth) {
    sym_node *l = factor(p, depth);
    while (l && !p->fail) {
        if (is_op(p, "*") || is_op(p, "/")) {
            int div = is_op(p, "/");
            p->pos++;
            sym_node *r = factor(p, depth);
            l = r ? node(p, div ? SN_DIV : SN_MUL, l, r) : NULL;
        } else if (is_op(p, "//") || is_op(p, "%")) {
            p->fail = 1; /* floor division and modulo: not built */
            return NULL;
        } else if (starts_primary(p)) { /* implicit multiplication */
            sym_node *r = factor(p, depth);
            l = r ? node(p, SN_MUL, l, r) : NULL;
        } else break;
    }
    return l;
}

static sym_node *expr(sym_ps *p, int depth) {
    sym_node *l = term(p, depth);
    while (l && (is_op(p, "+") || is_op(p, "-"))) {
        int sub = is_op(p, "-");
        p->pos++;
        sym_node *r = term(p, depth);
        l = r ? node(p, sub ? SN_SUB : SN_ADD, l, r) : NULL;
    }
    return l;
}

/* count_unknown_letters_in_expr and the bad substrings / regular expressions of should_allow_eval */
static int allow_eval(const char *e) {
    char *t = vc_rs_replace(e, "sqrt", ""), *u = t ? vc_rs_replace(t, "frac", "") : NULL;
    free(t);
    if (!u) return 0;
    int32_t seen[3];
    int n = 0, ok = 1;
    for (const char *q = u; *q && ok;) {
        int32_t c;
        q += vc_rs_next_cp(q, &c);
        if (!py_letter(c)) continue;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= seen[i] == c;
        if (!dup && n == 2) ok = 0;
        else if (!dup) seen[n++] = c;
    }
    free(u);
    if (!ok || strstr(e, "^{") || strstr(e, "^(")) return 0;
    for (const char *q = strchr(e, '^'); q; q = strchr(q + 1, '^')) {
        size_t d = 0;
        while (dec(q[1 + d])) d++;
        if (d >= 2 || (d >= 1 && q[1 + d] == '^')) return 0; /* \^[0-9][0-9]+ and \^[0-9]+\^ */
    }
    return 1;
}

int vc_sym_equal(const char *a, const char *b) {
    char *e = vc_rs_cat("(", a, ")-(", b, ")", NULL);
    if (!e) return 0;
    int eq = 0;
    sym_ps p = { 0 };
    char *py = allow_eval(e) ? vc_rs_replace(e, "^", "**") : NULL;
    if (!py) goto out;
    tokenize(&p, py);
    if (p.fail) goto out;
    p.ncap = 4 * p.n + 16;
    p.nodes = calloc(p.ncap, sizeof *p.nodes);
    if (!p.nodes) goto out;
    sym_node *root = expr(&p, 0);
    if (!root || p.fail || peek(&p)->kind != IT_END) goto out;
    int flt = vc_sym_has_float(root), lz = vc_sym_linear_zero(root, flt);
    if (lz >= 0) eq = lz;
    else eq = flt ? 0 : vc_sym_numeric_zero(root);
out:
    free(py);
    free(e);
    free(p.it);
    free(p.nodes);
    return eq;
}
