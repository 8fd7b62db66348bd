/* LaTeX to plain text as pylatexenc 2.11's LatexNodes2Text().latex_to_text does with its defaults (the
 * conversion mathruler's grader, behind verl's hiyouga/geometry3k reward, runs on answers): the parser's
 * tokens (macros with their post-space, groups, specials, \( \) \[ \] $ math), each known macro's arguments
 * as its LatexWalker parses them ('{' one expression, '[' an optional bracketed argument, '*' a star) and the
 * text latex2text makes of them (src/rl/latex_table.inc, generated from pylatexenc's tables). Environments
 * give their contents' text, matrices laid out as "[ a b; c d ]" and equations as displayed math, as latex2text's
 * environment table has them. */
#include "rl/latex_text.h"
#include "rl/reward_str.h"
#include "verlc/core.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct lt_macro {
    const char *name, *argspec;
    char kind; /* L literal, F %-format, A arguments joined, D nothing, C accent, M math alphabet */
    const char *text;
} lt_macro;

static const lt_macro MACROS[] = {
#include "latex_table.inc"
};

typedef struct {
    char *p;
    size_t n, cap;
    int nomem;
} lt_buf;

typedef struct {
    const char *s;
    size_t len, pos;
    int keyerror; /* Python raised: the whole conversion fails */
    int nomem;    /* an argument's text could not be allocated */
    int dollar;   /* inside $...$: "$$" is two tokens */
    int math;     /* inside math of any kind */
    long n_nodes; /* nodes parsed so far (a matrix cell without any is left out) */
    const char *env;  /* the innermost environment's name (env_n bytes): only its \end closes it */
    size_t env_n;
    const char *bare_post; /* the post-space of the macro without arguments just parsed, if any */
    size_t bare_post_n;
} lt_src;

static void put(lt_buf *b, const char *s, size_t n) {
    if (b->nomem || !n) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->nomem = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_(lt_buf *b, const char *s) { put(b, s, strlen(s)); }
static char *take(lt_buf *b) {
    if (b->nomem) { free(b->p); return NULL; }
    if (!b->p) return vc_strdup("");
    return b->p;
}

static int32_t cp_at(const lt_src *x, size_t pos, size_t *k) {
    int32_t c = -1;
    *k = pos < x->len ? vc_rs_next_cp(x->s + pos, &c) : 0;
    return c;
}
static int is_space_at(const lt_src *x, size_t pos) {
    size_t k;
    int32_t c = cp_at(x, pos, &k);
    return pos < x->len && vc_rs_py_space(c);
}
static int py_alpha(int32_t c) {
    if (c < 0) return 0;
    utf8proc_category_t g = utf8proc_category(c);
    return g == UTF8PROC_CATEGORY_LU || g == UTF8PROC_CATEGORY_LL || g == UTF8PROC_CATEGORY_LT ||
           g == UTF8PROC_CATEGORY_LM || g == UTF8PROC_CATEGORY_LO;
}
static void skip_space(lt_src *x) {
    while (is_space_at(x, x->pos)) {
        size_t k;
        cp_at(x, x->pos, &k);
        x->pos += k;
    }
}

static const lt_macro *find_macro(const char *name, size_t n) {
    size_t lo = 0, hi = sizeof MACROS / sizeof MACROS[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(MACROS[mid].name, name, n);
        if (!c && MACROS[mid].name[n]) c = 1;
        if (!c) return &MACROS[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* the specials of pylatexenc's default context, longest first */
static const char *const SPECIALS[][2] = { { "---", "\xe2\x80\x94" }, { "--", "\xe2\x80\x93" }, { "``", "\xe2\x80\x9c" },
                                           { "''", "\xe2\x80\x9d" },  { "!`", "\xc2\xa1" },    { "?`", "\xc2\xbf" },
                                           { "~", "\xc2\xa0" },       { "&", "   " } };
static const char *special_at(const lt_src *x, size_t pos, size_t *n) {
    for (size_t i = 0; i < sizeof SPECIALS / sizeof SPECIALS[0]; i++) {
        size_t k = strlen(SPECIALS[i][0]);
        if (pos + k <= x->len && !memcmp(x->s + pos, SPECIALS[i][0], k)) { *n = k; return SPECIALS[i][1]; }
    }
    return NULL;
}

/* the macro name after the backslash at pos: letters, or one character; 0 at the end of the input */
static size_t macro_name(const lt_src *x, size_t pos, int *alpha) {
    size_t k, i = pos + 1;
    if (i >= x->len) return 0;
    int32_t c = cp_at(x, i, &k);
    *alpha = py_alpha(c);
    i += k;
    while (*alpha && i < x->len && (c = cp_at(x, i, &k), py_alpha(c))) i += k;
    return i - pos - 1;
}

/* a macro's post-space: the whitespace after a letter macro, stopping before a blank line */
static size_t post_space(const lt_src *x, size_t pos) {
    size_t i = pos, nl = 0;
    while (is_space_at(x, i)) {
        size_t k;
        cp_at(x, i, &k);
        if (x->s[i] == '\n' && ++nl == 2 && i > pos && x->s[i - 1] == '\n') return i - 1 - pos;
        i += k;
    }
    return i - pos;
}

#define LT_MAX_ARGS 8
typedef struct lt_args {
    char *text[LT_MAX_ARGS];
    int ke[LT_MAX_ARGS]; /* making the argument's text raised (it matters only where the text is used) */
    int n;
} lt_args;

enum { STOP_NONE, STOP_BRACE, STOP_BRACKET, STOP_MATH_PAREN, STOP_MATH_BRACKET, STOP_DOLLAR, STOP_DOLLAR2, STOP_ENV,
       STOP_MATRIX };
enum { ENDED = 1, CELL, ROW }; /* what ended a run of nodes: its stop token, a matrix's '&' or \\ */
static int nodes(lt_src *x, lt_buf *b, int stop, int depth);
struct lt_macro;
static int parse_args(lt_src *x, const struct lt_macro *m, struct lt_args *a, int depth);
static int macro(lt_src *x, lt_buf *b, const char *name, size_t n, size_t after);

/* Python's str.strip() of a buffer's text, appended to b */
static void put_stripped(lt_buf *b, const char *s) {
    char *t = vc_rs_py_strip(s ? s : "");
    if (!t) { b->nomem = 1; return; }
    puts_(b, t);
    free(t);
}

static void math(lt_src *x, lt_buf *b, int stop, int display, int depth) {
    lt_buf in = { 0 };
    int saved = x->dollar;
    x->dollar = stop == STOP_DOLLAR;
    x->math++;
    nodes(x, &in, stop, depth + 1);
    x->math--;
    x->bare_post = NULL;
    x->dollar = saved;
    if (in.nomem) b->nomem = 1;
    if (!display) { put_stripped(b, in.p); free(in.p); return; }
    char *t = vc_rs_py_strip(in.p ? in.p : "");
    free(in.p);
    char *ind = t ? vc_rs_replace(t, "\n", "\n    ") : NULL;
    if (!ind) b->nomem = 1;
    else { puts_(b, "\n    "); puts_(b, ind); puts_(b, "\n"); }
    free(t);
    free(ind);
}

/* the environments latex2text and its walker know: their arguments (dropped) and how their contents read */
enum { ENV_PLAIN, ENV_LINES, ENV_MATRIX, ENV_EQUATION };
static const struct { const char *name, *argspec; int kind; } ENVS[] = {
    { "figure", "[", ENV_PLAIN },       { "figure*", "[", ENV_PLAIN },      { "table", "[", ENV_PLAIN },
    { "table*", "[", ENV_PLAIN },       { "tabular", "{", ENV_PLAIN },      { "tabular*", "{{", ENV_PLAIN },
    { "tabularx", "{[{", ENV_PLAIN },   { "array", "[{", ENV_MATRIX },      { "pmatrix", "", ENV_MATRIX },
    { "bmatrix", "", ENV_MATRIX },      { "smallmatrix", "", ENV_MATRIX },  { "psmallmatrix", "", ENV_MATRIX },
    { "bsmallmatrix", "", ENV_MATRIX }, { "center", "", ENV_LINES },        { "flushleft", "", ENV_LINES },
    { "flushright", "", ENV_LINES },    { "equation", "", ENV_EQUATION },   { "equation*", "", ENV_EQUATION },
    { "eqnarray", "", ENV_EQUATION },   { "eqnarray*", "", ENV_EQUATION },  { "align", "", ENV_EQUATION },
    { "align*", "", ENV_EQUATION },     { "multline", "", ENV_EQUATION },   { "multline*", "", ENV_EQUATION },
    { "gather", "", ENV_EQUATION },     { "gather*", "", ENV_EQUATION },    { "dmath", "", ENV_EQUATION },
    { "dmath*", "", ENV_EQUATION },     { "alignat", "{", ENV_PLAIN },      { "alignat*", "{", ENV_PLAIN },
    { "enumerate", "[", ENV_PLAIN },    { "itemize", "[", ENV_PLAIN },      { "description", "[", ENV_PLAIN },
    { "theorem", "[", ENV_PLAIN },      { "proposition", "[", ENV_PLAIN },  { "lemma", "[", ENV_PLAIN },
    { "corollary", "[", ENV_PLAIN },    { "definition", "[", ENV_PLAIN },   { "conjecture", "[", ENV_PLAIN },
    { "remark", "[", ENV_PLAIN },       { "proof", "[", ENV_PLAIN },        { "thm", "[", ENV_PLAIN },
    { "prop", "[", ENV_PLAIN },         { "lem", "[", ENV_PLAIN },          { "cor", "[", ENV_PLAIN },
    { "conj", "[", ENV_PLAIN },         { "rem", "[", ENV_PLAIN },          { "defn", "[", ENV_PLAIN },
};

#define LT_MAX_ROWS 256
typedef struct {
    char **cell; /* the row's cells' stripped texts */
    int n, cap;
} lt_row;

/* a cell's stripped text onto row r; its code-point width raises *widest */
static void add_cell(lt_row *r, const char *text, size_t *widest, lt_buf *b) {
    char *t = vc_rs_py_strip(text ? text : "");
    if (t && r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 4;
        char **v = realloc(r->cell, sizeof *v * (size_t)cap);
        if (v) r->cell = v, r->cap = cap;
        else free(t), t = NULL;
    }
    if (!t) { b->nomem = 1; return; }
    size_t w = vc_rs_cp_count(t, strlen(t));
    if (w > *widest) *widest = w;
    r->cell[r->n++] = t;
}

/* fmt_matrix_environment_node: cells split at the contents' own '&' and \\, each stripped (a cell without any
 * node is left out), right-justified to the widest, "[ a b; c d ]"; no cell at all is Python's ValueError */
static void matrix(lt_src *x, lt_buf *b, int depth) {
    lt_row *rows = calloc(LT_MAX_ROWS, sizeof *rows);
    if (!rows) { b->nomem = 1; return; }
    int nr = 0, code, cells = 0;
    size_t widest = 0;
    do {
        lt_buf c = { 0 };
        long before = x->n_nodes;
        code = nodes(x, &c, STOP_MATRIX, depth + 1);
        if (x->n_nodes > before) add_cell(&rows[nr], c.p, &widest, b), cells++;
        free(c.p);
        if (code != CELL && nr < LT_MAX_ROWS - 1) nr++;
    } while (code == CELL || code == ROW);
    if (!cells) x->keyerror = 1; /* max() of nothing */
    puts_(b, "[ ");
    for (int i = 0; i < nr; i++) {
        if (i) puts_(b, "; ");
        for (int j = 0; j < rows[i].n; j++) {
            if (j) puts_(b, " ");
            for (size_t w = vc_rs_cp_count(rows[i].cell[j], strlen(rows[i].cell[j])); w < widest; w++) puts_(b, " ");
            puts_(b, rows[i].cell[j]);
            free(rows[i].cell[j]);
        }
        free(rows[i].cell);
    }
    free(rows);
    puts_(b, " ]");
}

/* \begin{name} ... \end{name}: the environment's arguments dropped, its contents as latex2text lays them out */
static int environment(lt_src *x, lt_buf *b, size_t at, int begin, int depth) {
    size_t i = at, k;
    while (is_space_at(x, i)) { cp_at(x, i, &k); i += k; }
    if (i >= x->len || x->s[i] != '{') return 0;
    size_t j = i + 1;
    while (j < x->len && x->s[j] != '}') {
        int32_t c = cp_at(x, j, &k);
        if (!(c == '*' || c == ' ' || c == '.' || c == '_' || c == '-' || py_alpha(c) || (c >= '0' && c <= '9')))
            return 0;
        j += k;
    }
    if (j >= x->len || j == i + 1) return 0;
    x->pos = j + 1;
    if (!begin) /* 2: the innermost environment's own \end; another is dropped */
        return x->env && x->env_n == j - i - 1 && !memcmp(x->env, x->s + i + 1, x->env_n) ? 2 : 1;
    const char *outer = x->env;
    size_t outer_n = x->env_n;
    x->env = x->s + i + 1;
    x->env_n = j - i - 1;
    int kind = ENV_PLAIN;
    for (size_t e = 0; e < sizeof ENVS / sizeof ENVS[0]; e++)
        if (strlen(ENVS[e].name) == j - i - 1 && !memcmp(ENVS[e].name, x->s + i + 1, j - i - 1)) {
            lt_macro m = { ENVS[e].name, ENVS[e].argspec, 'D', "" };
            struct lt_args a;
            if (parse_args(x, &m, &a, depth))
                for (int q = 0; q < a.n; q++) free(a.text[q]);
            kind = ENVS[e].kind;
        }
    if (kind == ENV_MATRIX) matrix(x, b, depth);
    else if (kind == ENV_EQUATION) math(x, b, STOP_ENV, 1, depth);
    else {
        if (kind == ENV_LINES) puts_(b, "\n");
        nodes(x, b, STOP_ENV, depth + 1); /* up to its \end (consumed there) */
        if (kind == ENV_LINES) puts_(b, "\n");
    }
    x->env = outer;
    x->env_n = outer_n;
    return 1;
}

/* A comment at x->pos as pylatexenc's token takes it, skipped: up to its line's end, with that line break and the
 * whitespace after it unless a second line break starts that whitespace (a new paragraph: then the break stays). 0
 * when no comment is there. */
static int skip_comment(lt_src *x) {
    if (x->pos >= x->len || x->s[x->pos] != '%') return 0;
    size_t e = x->pos;
    while (e < x->len && x->s[e] != '\n' && x->s[e] != '\r') e++;
    if (e < x->len && !(e + 1 < x->len && (x->s[e + 1] == '\n' || x->s[e + 1] == '\r'))) {
        e++;
        while (is_space_at(x, e)) {
            size_t k;
            cp_at(x, e, &k);
            e += k;
        }
    }
    x->pos = e;
    return 1;
}

/* one token-sized argument ('{' in an argument spec): a group, a bare macro, a special or one character;
 * 0 at the end of the input */
static int arg_expr(lt_src *x, lt_buf *b, int depth) {
    do {
        while (is_space_at(x, x->pos)) { /* a blank line in the whitespace is a token of its own */
            if (x->s[x->pos] == '\n' && x->pos + 1 < x->len && x->s[x->pos + 1] == '\n') {
                put(b, "\n\n", 2);
                x->pos += 2;
                return 1;
            }
            size_t k;
            cp_at(x, x->pos, &k);
            x->pos += k;
        }
    } while (skip_comment(x)); /* a comment is no argument: the one after it is taken */
    if (x->pos >= x->len) return 0;
    size_t k, p = x->pos;
    char c = x->s[p];
    if (c == '{') {
        x->pos++;
        nodes(x, b, STOP_BRACE, depth + 1);
        return 1;
    }
    if (c == '}') return 1; /* an empty argument; the brace stays */
    if (c == '$') { /* a math-mode token taken as characters */
        size_t two = !x->dollar && p + 1 < x->len && x->s[p + 1] == '$';
        put(b, x->s + p, 1 + two);
        x->pos = p + 1 + two;
        return 1;
    }
    if (c == '\\') {
        int alpha;
        size_t n = macro_name(x, p, &alpha);
        if (!n) return 0;
        if (n == 3 && !memcmp(x->s + p + 1, "end", 3)) return 1; /* an empty argument; \end stays */
        x->pos = p + 1 + n;
        if (alpha) x->pos += post_space(x, x->pos);
        const lt_macro *m = find_macro(x->s + p + 1, n);
        if (m) { /* a bare macro: no arguments */
            lt_src none = *x;
            none.s = "";
            none.len = none.pos = 0;
            macro(&none, b, m->name, n, 0);
            x->keyerror |= none.keyerror;
            x->nomem |= none.nomem;
        }
        return 1;
    }
    const char *sp = special_at(x, p, &k);
    if (sp) { puts_(b, sp); x->pos = p + k; return 1; }
    cp_at(x, p, &k);
    put(b, x->s + p, k);
    x->pos = p + k;
    return 1;
}

/* the text of an argument that could not be allocated (the conversion then fails: lt_src.nomem) */
static char EMPTY_ARG[1];

/* frees a's texts and empties it */
static void args_free(lt_args *a) {
    for (int i = 0; i < a->n; i++)
        if (a->text[i] != EMPTY_ARG) free(a->text[i]);
    a->n = 0;
}

/* '[': an optional argument in brackets (nothing consumed when absent); \\'s must follow it at once */
static int arg_opt(lt_src *x, lt_buf *b, int no_space, int depth) {
    size_t save = x->pos;
    if (no_space && is_space_at(x, x->pos)) return 0;
    skip_space(x);
    if (x->pos >= x->len || x->s[x->pos] != '[') { x->pos = save; return 0; }
    x->pos++;
    nodes(x, b, STOP_BRACKET, depth + 1); /* unclosed: up to the end of the input */
    return 1;
}


/* the arguments of a macro by its spec; 0 (nothing consumed) when the input ends before a mandatory one */
static int parse_args(lt_src *x, const lt_macro *m, lt_args *a, int depth) {
    const char *spec = m->argspec;
    size_t save = x->pos;
    a->n = 0;
    for (const char *s = spec; *s && a->n < LT_MAX_ARGS; s++) {
        lt_buf t = { 0 };
        int got = 1, saved = x->keyerror;
        x->keyerror = 0;
        if (*s == '{') {
            if (!arg_expr(x, &t, depth)) {
                x->keyerror = saved;
                free(t.p);
                args_free(a);
                x->pos = save;
                return 0;
            }
        } else if (*s == '[') got = arg_opt(x, &t, !strcmp(m->name, "\\"), depth);
        else if (*s == '*') {
            size_t p = x->pos;
            skip_space(x);
            if (x->pos < x->len && x->s[x->pos] == '*') { puts_(&t, "*"); x->pos++; }
            else { x->pos = p; got = 0; }
        }
        a->ke[a->n] = x->keyerror;
        x->keyerror = saved;
        char *txt = got ? take(&t) : (free(t.p), vc_strdup(""));
        if (!txt) x->nomem = 1; /* (the macro then sees an empty argument; the conversion fails) */
        a->text[a->n++] = txt ? txt : EMPTY_ARG;
    }
    return 1;
}

/* Python's "%s/%s" % args or "%(2)s" % {"1": .., "2": ..}; *keyerror where Python raises KeyError;
 * NULL result: TypeError / ValueError (pylatexenc then keeps the format text as it is) */
static char *pyformat(const char *f, const lt_args *a, int *keyerror) {
    lt_buf o = { 0 };
    int next = 0, named = 0;
    for (const char *p = f; *p; p++) named |= p[0] == '%' && p[1] == '(';
    for (const char *p = f; *p; p++) {
        if (*p != '%') { put(&o, p, 1); continue; }
        p++;
        if (*p == '%') { put(&o, "%", 1); continue; }
        int idx = -1;
        if (*p == '(') {
            char *e;
            long v = strtol(p + 1, &e, 10);
            if (*e != ')' || e[1] != 's') { free(o.p); return NULL; }
            if (v < 1 || v > a->n) { *keyerror = 1; free(o.p); return NULL; }
            idx = (int)v - 1;
            p = e + 1;
        } else if (*p == 's' && !named) {
            if (next >= a->n) { free(o.p); return NULL; }
            idx = next++;
        } else { free(o.p); return NULL; }
        puts_(&o, a->text[idx]);
    }
    if (!named && next != a->n) { free(o.p); return NULL; } /* not all arguments converted */
    return take(&o);
}

static void accent(lt_buf *b, const lt_args *a, const char *comb) {
    char *c = a->n ? vc_rs_py_strip(a->text[0]) : vc_strdup(" ");
    if (!c) { b->nomem = 1; return; }
    for (const char *p = c; *p;) {
        int32_t ch;
        size_t k = vc_rs_next_cp(p, &ch);
        char one[16] = { 0 };
        if (ch == 0x131) memcpy(one, "i", 1);
        else if (ch == 0x237) memcpy(one, "j", 1);
        else memcpy(one, p, k < 8 ? k : 8);
        strcat(one, comb);
        utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)one);
        if (!nfc) b->nomem = 1;
        else puts_(b, (const char *)nfc);
        free(nfc);
        p += k;
    }
    free(c);
}

static void math_alphabet(lt_buf *b, const char *text, const char *table) {
    for (const char *p = text; *p;) {
        int32_t ch;
        size_t k = vc_rs_next_cp(p, &ch);
        int idx = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? 26 + ch - 'a' : -1;
        if (idx < 0) put(b, p, k);
        else {
            const char *q = table;
            for (int i = 0; i < idx; i++) q += vc_rs_u8len(q);
            put(b, q, vc_rs_u8len(q));
        }
        p += k;
    }
}

/* the macro "name" whose token ended at `after` (post-space included): its arguments and its text; 1 when
 * it has no arguments */
static int macro(lt_src *x, lt_buf *b, const char *name, size_t n, size_t after) {
    x->pos = after;
    const lt_macro *m = find_macro(name, n);
    if (!m) return 1; /* unknown: nothing, no arguments */
    lt_args a;
    if (!parse_args(x, m, &a, 0)) a.n = 0;
    int used = m->kind == 'F' || m->kind == 'A' ? a.n : m->kind == 'C' || m->kind == 'M' ? (a.n > 0) : 0;
    for (int i = 0; i < used; i++) x->keyerror |= a.ke[i];
    switch (m->kind) {
    case 'L': puts_(b, m->text); break;
    case 'A':
        for (int i = 0; i < a.n; i++) puts_(b, a.text[i]);
        break;
    case 'F': {
        int ke = 0;
        char *r = pyformat(m->text, &a, &ke);
        if (ke) x->keyerror = 1;
        else if (!r) puts_(b, m->text);
        else puts_(b, r);
        free(r);
        break;
    }
    case 'C': accent(b, &a, m->text); break;
    case 'M': math_alphabet(b, a.n ? a.text[0] : "", m->text); break;
    default: break;
    }
    const int none = a.n == 0;
    args_free(&a);
    return none;
}

/* \verb<d>...<d>: dropped (nothing after the name consumed when the closing <d> is missing); pylatexenc
 * raises when the input ends before <d> */
static int verb(lt_src *x, size_t at) {
    size_t k;
    while (is_space_at(x, at)) { cp_at(x, at, &k); at += k; }
    if (at >= x->len) { x->keyerror = 1; x->pos = x->len; return 0; }
    cp_at(x, at, &k);
    for (size_t i = at + k; i + k <= x->len; i++)
        if (!memcmp(x->s + i, x->s + at, k)) { x->pos = i + k; return 0; }
    x->pos = at;
    return 0;
}

/* one backslash token at x->pos; 1 when it ends the current stop context */
static int backslash(lt_src *x, lt_buf *b, int stop, int depth) {
    size_t p = x->pos;
    int alpha = 0;
    size_t n = macro_name(x, p, &alpha);
    if (!n) { /* a lone backslash at the end: the input ends, and the whitespace before it (the space pylatexenc
               * gathers in front of a token) goes with it where the text ends with it as the source has it */
        size_t w = p;
        while (w > 0 && (unsigned char)x->s[w - 1] < 0x80 && vc_rs_py_space(x->s[w - 1])) w--;
        if (p - w && b->n >= p - w && !memcmp(b->p + b->n - (p - w), x->s + w, p - w)) b->p[b->n -= p - w] = 0;
        x->pos = x->len;
        return 0;
    }
    const char *name = x->s + p + 1;
    size_t after = p + 1 + n;
    if (n == 1 && (*name == '(' || *name == '[')) {
        x->pos = after;
        math(x, b, *name == '(' ? STOP_MATH_PAREN : STOP_MATH_BRACKET, *name == '[', depth);
        return 0;
    }
    if (n == 1 && (*name == ')' || *name == ']')) {
        x->pos = after;
        if (stop == (*name == ')' ? STOP_MATH_PAREN : STOP_MATH_BRACKET)) return ENDED;
        x->n_nodes--; /* a stray closing delimiter is no node */
        return 0;
    }
    if ((n == 5 && !memcmp(name, "begin", 5)) || (n == 3 && !memcmp(name, "end", 3))) {
        int begin = n == 5;
        int e = environment(x, b, after, begin, depth);
        if (e && !begin && e == 2 && (stop == STOP_ENV || stop == STOP_MATRIX)) return ENDED;
        if (e && !begin) x->n_nodes--; /* another environment's \end is dropped: no node */
        if (e) return 0;
        put(b, x->s + p, n + 1); /* a malformed \begin / \end is kept as text */
        x->pos = after;
        return 0;
    }
    size_t ps = alpha ? post_space(x, after) : 0;
    if (n == 4 && !memcmp(name, "verb", 4)) return verb(x, after + ps);
    if (n == 1 && *name == '\\' && stop == STOP_MATRIX) { /* a row ends; the macro's own arguments go */
        lt_buf skip = { 0 };
        macro(x, &skip, name, n, after);
        free(skip.p);
        return ROW;
    }
    if (macro(x, b, name, n, after + ps) && ps) {
        x->bare_post = x->s + after;
        x->bare_post_n = ps;
    }
    return 0;
}

/* nodes up to the end of the input or the stop token (consumed) */
static int plain_char(const lt_src *x, size_t p, int stop) {
    size_t k;
    char c = x->s[p];
    return !(c == '\\' || c == '{' || c == '}' || c == '%' || c == '$' || (c == ']' && stop == STOP_BRACKET) ||
             special_at(x, p, &k));
}

/* a run of characters: in math mode a run of whitespace only is dropped, and the post-space of a macro
 * without arguments just before is put back (pylatexenc's spacing "based on source" in equations) */
static void chars_run(lt_src *x, lt_buf *b, int stop) {
    size_t p = x->pos, k = 0;
    int blank = 1;
    while (x->pos < x->len && plain_char(x, x->pos, stop)) {
        blank &= is_space_at(x, x->pos);
        cp_at(x, x->pos, &k);
        x->pos += k;
    }
    if (x->math && blank) return;
    if (x->math && x->bare_post) put(b, x->bare_post, x->bare_post_n);
    put(b, x->s + p, x->pos - p);
}

/* nodes up to the end of the input or the stop token (consumed: 1) */
static int nodes(lt_src *x, lt_buf *b, int stop, int depth) {
    if (depth > 200) { x->pos = x->len; return 0; }
    while (x->pos < x->len && !b->nomem) {
        size_t p = x->pos, k;
        char c = x->s[p];
        const char *bare = x->bare_post;
        x->bare_post = NULL;
        x->n_nodes++; /* (taken back below for the token that ends the run) */
        if (plain_char(x, p, stop)) {
            x->bare_post = bare;
            chars_run(x, b, stop);
            x->bare_post = NULL;
            continue;
        }
        if (c == '\\') {
            long seen = x->n_nodes;
            int code = backslash(x, b, stop, depth);
            if (code) { x->n_nodes--; return code; }
            if (x->n_nodes < seen) x->bare_post = bare; /* not a node (a stray \end, \) or \]): nothing between */
            continue;
        }
        if (c == '{') {
            x->pos++;
            nodes(x, b, STOP_BRACE, depth + 1);
            x->bare_post = NULL;
            continue;
        }
        if (c == '}') {
            x->pos++;
            if (stop == STOP_BRACE) return 1;
            x->n_nodes--; /* a stray closing brace is dropped: no node */
            x->bare_post = bare;
            continue;
        }
        if (c == ']' && stop == STOP_BRACKET) { x->pos++; return 1; }
        if (c == '%') { /* a comment: up to the end of the line */
            while (x->pos < x->len && x->s[x->pos] != '\n' && x->s[x->pos] != '\r') x->pos++;
            continue;
        }
        if (c == '$') {
            int two = !x->dollar && p + 1 < x->len && x->s[p + 1] == '$';
            if ((stop == STOP_DOLLAR && !two) || (stop == STOP_DOLLAR2 && two)) { x->pos += two ? 2 : 1; return 1; }
            if (stop == STOP_DOLLAR && two) { x->pos++; return 1; }
            x->pos += two ? 2 : 1;
            math(x, b, two ? STOP_DOLLAR2 : STOP_DOLLAR, two, depth);
            continue;
        }
        k = 1;
        const char *sp = special_at(x, p, &k);
        x->pos = p + k;
        if (sp && stop == STOP_MATRIX && !strcmp(sp, "   ")) { x->n_nodes--; return CELL; } /* the matrix's '&' */
        if (sp) puts_(b, sp);
    }
    return 0;
}

vc_status vc_latex_to_text(const char *latex, char **out) {
    *out = NULL;
    if (!latex) return VC_ERR_ARG;
    if (!vc_rs_valid_utf8(latex)) return vc_fail(VC_ERR_ARG, "latex: the text is not UTF-8");
    lt_src x = { .s = latex, .len = strlen(latex) };
    lt_buf b = { 0 };
    nodes(&x, &b, STOP_NONE, 0);
    if (x.nomem) b.nomem = 1;
    if (x.keyerror && !b.nomem) {
        free(b.p);
        return vc_fail(VC_ERR_FORMAT, "latex: a macro's text needs an argument the input lacks");
    }
    *out = take(&b);
    return *out ? VC_OK : VC_ERR_NOMEM;
}
