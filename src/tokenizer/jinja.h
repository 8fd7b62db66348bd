/* Internal interface of the Jinja2-subset interpreter behind chat templates: values, lexer tokens,
 * syntax tree, evaluator context. Semantics follow Jinja2 as configured by transformers
 * (ImmutableSandboxedEnvironment, trim_blocks=True, lstrip_blocks=True, loopcontrols). */
#ifndef VC_JINJA_H
#define VC_JINJA_H
#include "verlc/core.h"
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values (reference counted; the singletons are never freed) ---- */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS,
               JV_FUNC, JV_MACRO } jv_type;
typedef struct jv jv;
struct jnode;
struct jv {
    jv_type t;
    int rc;          /* < 0: immortal */
    int is_tuple;    /* JV_LIST that prints as a tuple */
    int is_safe;     /* JV_STR that is a Markup (safe and escape give one): `+` escapes a plain string joined to it */
    union {
        int b;
        int64_t i;
        double f;
        struct { char *s; size_t len; } str;
        struct { jv **items; size_t n, cap; } list;   /* JV_LIST */
        struct { jv **keys, **vals; size_t n, cap; } dict; /* JV_DICT, JV_NS */
        struct { int id; jv *self; const char *name; } fn;   /* builtin function or bound method (id: JINJA_FN_*) */
        struct { const struct jnode *node; struct jframe *scope; } macro; /* scope: a caller's; NULL: the globals */
    } u;
    char *hint;      /* JV_UNDEF: what was looked up, for error messages */
};

extern jv jv_undef_v, jv_none_v, jv_true_v, jv_false_v;
jv *jv_ref(jv *v);
void jv_unref(jv *v);
jv *jv_undef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
jv *jv_none(void);
jv *jv_bool(int b);
jv *jv_int(int64_t i);
jv *jv_float(double f);
jv *jv_str(const char *s, size_t len);
jv *jv_cstr(const char *s);
jv *jv_str_take(char *s, size_t len);
jv *jv_list(void);
jv *jv_dict(void);
vc_status jv_list_push(jv *l, jv *item);            /* steals item */
vc_status jv_dict_set(jv *d, jv *key, jv *val);     /* steals key and val */
jv *jv_dict_get(const jv *d, const char *key);      /* borrowed or NULL */
jv *jv_dict_getv(const jv *d, const jv *key);       /* borrowed or NULL */
int jv_truthy(const jv *v);
int jv_equal(const jv *a, const jv *b);
const char *jv_type_name(const jv *v);
size_t utf8_count(const char *s, size_t len);
jv *jv_from_json(const cJSON *j);

/* growable output buffer */
typedef struct { char *p; size_t n, cap; int oom; } jbuf;
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_putc(jbuf *b, char c);
void jbuf_fmt_float(jbuf *b, double f);            /* Python repr of a float */
vc_status jv_write_str(jbuf *b, const jv *v);      /* Python str() */
vc_status jv_write_repr(jbuf *b, const jv *v, int depth);
/* json.dumps(v, ensure_ascii, indent (<0: none), sort_keys) */
vc_status jv_write_json(jbuf *b, const jv *v, int ensure_ascii, int indent, int sort_keys,
                        const char *item_sep, const char *key_sep, int depth);

/* ---- lexer ---- */
typedef enum { T_TEXT, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP,
               T_EOF } jtok_kind;
typedef struct {
    jtok_kind k;
    int pos;          /* byte offset in the normalized source */
    char *s;          /* T_TEXT, T_NAME, T_STR (decoded), T_OP */
    size_t len;
    int64_t i;
    double f;
} jtok;
vc_status jinja_lex(const char *src, jtok **out, int *n);
void jinja_tokens_free(jtok *t, int n);
void jinja_linecol(const char *src, int pos, int *line, int *col);

/* ---- syntax tree ---- */
typedef enum {
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NEG, E_POS, E_NOT,
    E_BIN, E_CMP, E_AND, E_OR, E_COND, E_LIST, E_TUPLE, E_DICT, E_REF,
    S_BODY, S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_BREAK, S_CONTINUE,
    S_CALLBLOCK, S_FILTERBLOCK, S_WITH
} jkind;
typedef struct jnode jnode;
struct jnode {
    jkind k;
    int pos;
    int op;            /* operator code; E_TEST: negated */
    char *str;         /* name, attribute, filter or test; S_TEXT text */
    size_t len;
    jv *lit;
    jnode *a, *b, *c, *d;
    jnode **v;         /* children: body statements, items, call arguments */
    char **names;      /* keyword names parallel to v (NULL = positional); targets; params */
    int n, cap, nnames;
};
enum { JINJA_FN_CYCLE = 1, JINJA_FN_CHANGED };  /* loop.cycle, loop.changed */
/* S_MACRO / S_CALLBLOCK (op): which of the special names its body reads, as Jinja decides whether a macro takes extra
 * positional arguments (varargs), extra keyword arguments (kwargs) and a call block (caller) */
enum { USES_VARARGS = 1, USES_KWARGS = 2, USES_CALLER = 4 };
/* S_FILTERBLOCK: its filter chain's input, the rendered body, is bound to this name (no identifier can be it) */
#define JINJA_FILTER_INPUT "\x01filter"
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };
vc_status jinja_parse(const char *src, jnode **out);   /* src must be normalized */
char *jinja_normalize(const char *src);
void jnode_free(jnode *n);

/* ---- evaluation ---- */
typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    char **names;
    jv **vals;
    int n, cap;
};
typedef struct {
    const char *src;
    jframe *root;
    long steps;
    int depth;
    int loop_ctl;       /* 1 = break, 2 = continue pending */
    int over_said;      /* the evaluation-limit error has been given its position */
} jctx;
#define JINJA_MAX_STEPS 5000000L
#define JINJA_MAX_DEPTH 200
#define JINJA_MAX_OUT ((size_t)256 << 20)

/* Work meter: the data work of value operations (a list item or dict entry made, visited or compared,
 * 64 bytes of text copied or scanned) counts against JINJA_MAX_STEPS together with the evaluation steps,
 * so that no template runs long on few steps ('a' * 100000000 or range(100000) inside a loop, equality or
 * printing of lists that share items). During a render it points at the context's step counter; NULL
 * (no metering) otherwise. jinja_work returns 1 once the limit is passed: the caller stops early and
 * the evaluator then fails with the limit error. */
extern __thread long *jinja_meter;
static inline int jinja_work(size_t units) {
    if (!jinja_meter) return 0;
    long room = JINJA_MAX_STEPS + 1 - *jinja_meter;
    if (room <= 0 || units >= (size_t)room) { *jinja_meter = JINJA_MAX_STEPS + 1; return 1; }
    *jinja_meter += (long)units;
    return 0;
}
static inline int jinja_over(void) { return jinja_meter && *jinja_meter > JINJA_MAX_STEPS; }
#define JINJA_LIMIT_MSG "template exceeded the evaluation limit of %ld steps"

vc_status jerr(const jctx *c, const jnode *n, vc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
vc_status jinja_render(const char *src, const jnode *root, jframe *globals, jbuf *out);
typedef struct jrun {
    jctx *c;
    jframe *f;
    int loops;          /* enclosing for-loops in the current macro/template body */
} jrun;
vc_status jinja_exec_body(jrun *r, const jnode *n, jbuf *out);
jframe *jinja_frame(void);          /* the frame of the statement being executed (per render thread) */
void jinja_set_frame(jframe *f);
jv *jframe_get_local(const jframe *f, const char *name);  /* in f itself, not its parents; borrowed or NULL */
vc_status jinja_eval_args(jctx *c, const jnode *n, jv ***args, char ***kw, int *nargs);
void jinja_args_free(jv **args, char **kw, int n);
vc_status jinja_exec_callblock(jrun *r, const jnode *n, jbuf *out);
vc_status jinja_exec_filterblock(jrun *r, const jnode *n, jbuf *out);
vc_status jinja_exec_with(jrun *r, const jnode *n, jbuf *out);
vc_status jframe_set(jframe *f, const char *name, jv *v); /* steals v */
jv *jframe_get(const jframe *f, const char *name);        /* borrowed or NULL */
void jframe_clear(jframe *f);
vc_status jinja_eval(jctx *c, const jnode *n, jv **out);
vc_status jinja_call_value(jctx *c, const jnode *at, jv *fn, jv **args, char **kw, int n, jv **out);

/* ---- builtins ---- */
vc_status jinja_filter(jctx *c, const jnode *at, const char *name, jv *in, jv **args, char **kw,
                       int n, jv **out);
vc_status jinja_test(jctx *c, const jnode *at, const char *name, jv *in, jv **args, int n, int *res);
vc_status jinja_getattr(jctx *c, const jnode *at, jv *obj, const char *name, jv **out);
vc_status jinja_call_builtin(jctx *c, const jnode *at, jv *fn, jv **args, char **kw, int n, jv **out);
jv *jinja_global_func(const char *name); /* range, namespace, ... or NULL */
/* shared by the builtins' files */
jv *jinja_arg(jv **args, char **kw, int n, int pos, const char *kwname);   /* borrowed or NULL */
vc_status jinja_undef_error(jctx *c, const jnode *n, const jv *v);
vc_status jinja_iterate(jctx *c, const jnode *n, jv *v, jv **list);
vc_status jinja_compare(jctx *c, const jnode *n, int op, jv *a, jv *b, int *res);
vc_status jinja_binop(jctx *c, const jnode *n, int op, jv *a, jv *b, jv **out);
vc_status jinja_str_case(const jv *s, int mode, jv **out);        /* 0 upper, 1 lower, 2 capitalize, 3 title */
vc_status jinja_to_str(const jv *v, jv **out);                      /* Python str(); Undefined is '' */
vc_status jinja_attr_path(jctx *c, const jnode *at, jv *item, const jv *path, jv **out);  /* "a.b.0" */
vc_status jinja_seq_filter(jctx *c, const jnode *at, const char *name, jv *in, jv **args, char **kw, int n, jv **out,
                           int *handled);
vc_status jinja_list_method(jctx *c, const jnode *at, const char *m, jv *l, jv **args, int n, jv **out);
const char *jinja_str_method2_name(const char *name);  /* the static name of a jinja_strmeth.c method, or NULL */
vc_status jinja_str_method2(jctx *c, const jnode *at, const char *m, jv *s, jv **args, char **kw, int n, jv **out);
int jinja_py_case(int32_t cp);  /* 2: Unicode's Lowercase, 1: Uppercase, 0: neither */
/* the first (from_right: last) place of nd in h, metered as work; NULL where none */
const char *jinja_find_sub(const char *h, size_t hl, const char *nd, size_t nl, int from_right);
vc_status jinja_str_pad(jctx *c, const jnode *at, const char *m, const jv *s, jv *width, jv *fill, jv **out);
vc_status jinja_ascii_escape(jbuf *t);
vc_status jinja_html_escape(const jv *s, jv **out);
void jinja_html_escape_into(jbuf *b, const char *s, size_t n);  /* Markup.escape: & < > " ' as entities, a Markup; one as it is */  /* repr's text to ascii()'s: non-ASCII characters as \xNN, \uNNNN, \UNNNNNNNN */
vc_status jinja_str_format(jctx *c, const jnode *at, const jv *s, jv **args, char **kw, int n, jv **out);
vc_status jinja_printf(jctx *c, const jnode *at, const jv *fmt, jv *arg, jv **out);  /* str % arg */
#endif
