/* Interpolation, as OmegaConf does it: ${a.b} (absolute), ${.b} / ${..b} (relative to the node's
 * container), ${oc.select:key,default} (default when the key is absent or ???), ${oc.env:VAR,default}.
 * A string that is exactly one interpolation takes the referenced value and type (lists and maps are
 * copied); interpolations inside longer text become text (null -> None, bools -> True/False as Python
 * prints them). Resolution is in place, depth-first, with a cycle guard. */
#include "config/cfg_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
/* Interpolations resolved inside one another (a -> b -> c ...): each level recurses, so the chain must
 * end well before the stack does. */
#define MAX_NESTED 200
/* What one resolution may build: nodes copied by whole-value interpolations and text bytes made by
 * embedded ones. Values that double at each reference (b: "${a}${a}", c: "${b}${b}", ...) end here
 * instead of exhausting memory. */
#define MAX_COPIED 1000000
#define MAX_TEXT ((size_t)16 << 20)

/* Keys compared by the lookups of one resolution. */
#define MAX_SCANNED 50000000

struct rstate {
    size_t copied, text, scanned;
    int nested;
};

struct chain {
    vc_cfg_node *n[MAX_DEPTH]; /* n[0] is the root, n[len-1] the current node */
    int len;
    struct rstate *rs;
};

static vc_status resolve_node(struct chain *c);
static vc_status resolve_tree(struct chain *c);
static vc_status eval_expr(struct chain *c, const char *expr, size_t len, vc_cfg_node **out);

/* Dotted path of the chain's last node, for messages. */
static const char *chain_path(const struct chain *c, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int d = 1; d < c->len && o < n; d++) {
        const vc_cfg_node *p = c->n[d - 1];
        for (size_t i = 0; i < p->n; i++) {
            if (p->items[i] != c->n[d]) continue;
            if (p->kind == VC_CFG_MAP) o += snprintf(buf + o, n - o, "%s%s", d > 1 ? "." : "", p->keys[i]);
            else o += snprintf(buf + o, n - o, "[%zu]", i);
            break;
        }
    }
    return buf;
}

/* Finds the node a key names; fills `out` with the chain to it (resolving nodes on the way). Returns
 * VC_OK with out->len == 0 when the key does not exist. */
static vc_status locate(struct chain *c, const char *key, struct chain *out) {
    int dots = 0;
    while (key[dots] == '.') dots++;
    *out = *c;
    if (dots) {
        out->len = c->len - dots; /* ".x": the container of the current node */
        if (out->len < 1) { out->len = 0; return VC_OK; }
    } else {
        out->len = 1;
    }
    const char *rest = key + dots;
    if (!*rest) return VC_OK;
    size_t len = strlen(rest);
    char *buf = vc_malloc(len + 1), *segs[MAX_DEPTH];
    if (!buf) return VC_ERR_NOMEM;
    int ns = vc_cfg_path_split(rest, buf, segs, MAX_DEPTH);
    vc_status st = VC_OK;
    if (ns < 0) {
        char p[256];
        st = vc_fail(VC_ERR_ARG, "config: %s: bad interpolation key '%s'", chain_path(c, p, sizeof p), key);
    }
    for (int i = 0; i < ns && st == VC_OK; i++) {
        vc_cfg_node *cur = out->n[out->len - 1];
        if ((st = resolve_node(out)) != VC_OK) break; /* the container may itself be an interpolation */
        if (cur->kind == VC_CFG_MAP && (c->rs->scanned += cur->n) > MAX_SCANNED) { /* map lookups are linear */
            char p[256];
            st = vc_fail(VC_ERR_ARG, "config: %s: interpolation lookups compare more than %d keys (maps too large)",
                         chain_path(c, p, sizeof p), MAX_SCANNED);
            break;
        }
        vc_cfg_node *next = vc_cfg_child(cur, segs[i]);
        if (!next || out->len >= MAX_DEPTH) { out->len = 0; break; }
        out->n[out->len++] = next;
    }
    free(buf);
    return st;
}

/* Splits "a,b" at top-level commas (outside quotes, brackets and ${}). */
static int split_args(const char *s, size_t len, const char **starts, size_t *lens, int max) {
    int n = 0, depth = 0;
    char q = 0;
    size_t b = 0;
    for (size_t i = 0; i <= len; i++) {
        char ch = i < len ? s[i] : ',';
        if (q) { if (ch == q) q = 0; continue; }
        if (ch == '\'' || ch == '"') q = ch;
        else if (ch == '{' || ch == '[') depth++;
        else if (ch == '}' || ch == ']') depth--;
        else if (ch == ',' && depth == 0) {
            if (n == max) return -1;
            size_t a = b, e = i;
            while (a < e && (s[a] == ' ' || s[a] == '\t')) a++;
            while (e > a && (s[e - 1] == ' ' || s[e - 1] == '\t')) e--;
            starts[n] = s + a;
            lens[n++] = e - a;
            b = i + 1;
        }
    }
    return n;
}

static vc_status charge_copy(struct chain *c, const vc_cfg_node *n) {
    char p[256];
    c->rs->copied += vc_cfg_node_count(n, MAX_COPIED + 1);
    if (c->rs->copied > MAX_COPIED)
        return vc_fail(VC_ERR_ARG, "config: %s: interpolations copy more than %d values", chain_path(c, p, sizeof p),
                       MAX_COPIED);
    return VC_OK;
}

/* Evaluates a resolver argument: interpolations in it first, then Hydra value typing. */
static vc_status eval_arg(struct chain *c, const char *s, size_t len, vc_cfg_node **out) {
    char *text = vc_malloc(len + 1);
    if (!text) return VC_ERR_NOMEM;
    memcpy(text, s, len);
    text[len] = 0;
    vc_status st = VC_OK;
    if (len > 3 && text[0] == '$' && text[1] == '{' && text[len - 1] == '}') {
        st = eval_expr(c, text + 2, len - 3, out);
    } else {
        *out = vc_cfg_parse_value(text);
        if (!*out) st = VC_ERR_ARG;
    }
    free(text);
    return st;
}

static vc_status eval_select(struct chain *c, const char *args, size_t len, vc_cfg_node **out, int env) {
    const char *a[3];
    size_t al[3];
    char p[256];
    int n = split_args(args, len, a, al, 3);
    if (n < 1 || n > 2 || !al[0])
        return vc_fail(VC_ERR_ARG, "config: %s: %s needs a key and an optional default", chain_path(c, p, sizeof p),
                       env ? "oc.env" : "oc.select");
    char *key = vc_malloc(al[0] + 1);
    if (!key) return VC_ERR_NOMEM;
    memcpy(key, a[0], al[0]);
    key[al[0]] = 0;
    vc_status st = VC_OK;
    if (env) {
        const char *v = getenv(key);
        if (v) *out = vc_cfg_scalar_str(v, strlen(v));
        else if (n == 2) st = eval_arg(c, a[1], al[1], out);
        else st = vc_fail(VC_ERR_MISSING, "config: %s: environment variable '%s' is not set", chain_path(c, p, sizeof p), key);
        free(key);
        return st != VC_OK ? st : *out ? VC_OK : VC_ERR_NOMEM;
    }
    struct chain t;
    st = locate(c, key, &t);
    free(key);
    if (st != VC_OK) return st;
    vc_cfg_node *target = t.len ? t.n[t.len - 1] : NULL;
    if (target && (st = resolve_tree(&t)) != VC_OK) return st;
    if (target && target->kind != VC_CFG_MISSING) {
        if ((st = charge_copy(c, target)) != VC_OK) return st;
        *out = vc_cfg_node_copy(target);
    }
    else if (n == 2) return eval_arg(c, a[1], al[1], out);
    else *out = vc_cfg_node_new(VC_CFG_NULL);
    return *out ? VC_OK : VC_ERR_NOMEM;
}

static vc_status eval_expr_in(struct chain *c, const char *expr, size_t len, vc_cfg_node **out);

/* Every nested resolution passes here (a key's value naming another key, a resolver argument holding an
 * interpolation): the count bounds the recursion. */
static vc_status eval_expr(struct chain *c, const char *expr, size_t len, vc_cfg_node **out) {
    char p[256];
    *out = NULL;
    if (c->rs->nested >= MAX_NESTED)
        return vc_fail(VC_ERR_ARG, "config: %s: interpolations nested more than %d deep (at '${%.*s}')",
                       chain_path(c, p, sizeof p), MAX_NESTED, len > 64 ? 64 : (int)len, expr);
    c->rs->nested++;
    vc_status st = eval_expr_in(c, expr, len, out);
    c->rs->nested--;
    return st;
}

static vc_status eval_expr_in(struct chain *c, const char *expr, size_t len, vc_cfg_node **out) {
    char p[256];
    *out = NULL;
    while (len && (*expr == ' ' || *expr == '\t')) { expr++; len--; }
    while (len && (expr[len - 1] == ' ' || expr[len - 1] == '\t')) len--;
    if (len > 10 && !strncmp(expr, "oc.select:", 10)) return eval_select(c, expr + 10, len - 10, out, 0);
    if (len > 7 && !strncmp(expr, "oc.env:", 7)) return eval_select(c, expr + 7, len - 7, out, 1);
    const char *colon = memchr(expr, ':', len);
    if (colon)
        return vc_fail(VC_ERR_UNSUPPORTED, "config: %s: resolver '%.*s' is not supported (only oc.select and oc.env)",
                       chain_path(c, p, sizeof p), (int)(colon - expr), expr);
    char *key = vc_malloc(len + 1);
    if (!key) return VC_ERR_NOMEM;
    memcpy(key, expr, len);
    key[len] = 0;
    struct chain t;
    vc_status st = locate(c, key, &t);
    if (st == VC_OK && !t.len)
        st = vc_fail(VC_ERR_MISSING, "config: %s: interpolation '${%s}': no such key", chain_path(c, p, sizeof p), key);
    if (st == VC_OK) st = resolve_tree(&t);
    if (st == VC_OK && t.n[t.len - 1]->kind == VC_CFG_MISSING)
        st = vc_fail(VC_ERR_MISSING, "config: %s: interpolation '${%s}' names a value nobody set (?\?\?)",
                     chain_path(c, p, sizeof p), key);
    if (st == VC_OK) st = charge_copy(c, t.n[t.len - 1]);
    if (st == VC_OK && !(*out = vc_cfg_node_copy(t.n[t.len - 1]))) st = VC_ERR_NOMEM;
    free(key);
    return st;
}

/* End of the ${...} starting at s (s[0..1] == "${"), or NULL if unbalanced. */
static const char *interp_end(const char *s) {
    int depth = 0;
    char q = 0;
    for (const char *p = s; *p; p++) {
        if (q) { if (*p == q) q = 0; continue; }
        if (p > s + 1 && (*p == '\'' || *p == '"')) q = *p;
        else if (p[0] == '$' && p[1] == '{') { depth++; p++; }
        else if (*p == '{') depth++;
        else if (*p == '}' && --depth == 0) return p;
    }
    return NULL;
}

static vc_status append_text(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *b = realloc(*buf, nc);
        if (!b) return vc_fail(VC_ERR_NOMEM, "config: out of memory");
        *buf = b;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return VC_OK;
}

static vc_status value_text(struct chain *c, const vc_cfg_node *v, char *tmp, size_t n, const char **out) {
    char p[256];
    switch (v->kind) {
    case VC_CFG_NULL: *out = "None"; return VC_OK;
    case VC_CFG_BOOL: *out = v->b ? "True" : "False"; return VC_OK;
    case VC_CFG_INT: snprintf(tmp, n, "%lld", (long long)v->i); *out = tmp; return VC_OK;
    case VC_CFG_FLOAT: vc_py_float_repr(v->f, tmp, n); *out = tmp; return VC_OK;  /* Python's str(): inf, 1000.0 */
    case VC_CFG_STR: *out = v->s; return VC_OK;
    default:
        return vc_fail(VC_ERR_ARG, "config: %s: cannot put a list or mapping inside a string", chain_path(c, p, sizeof p));
    }
}

static vc_status resolve_string(struct chain *c, vc_cfg_node *node) {
    char p[256];
    const char *s = node->s;
    const char *e = s[0] == '$' && s[1] == '{' ? interp_end(s) : NULL;
    vc_cfg_node *val = NULL;
    vc_status st = VC_OK;
    if (e && !e[1]) { /* the whole value is one interpolation: keep the referenced type */
        if ((st = eval_expr(c, s + 2, (size_t)(e - s - 2), &val)) != VC_OK) return st;
        vc_cfg_node_assign(node, val);
        return VC_OK;
    }
    char *buf = NULL, tmp[64];
    size_t len = 0, cap = 0;
    for (const char *q = s; *q && st == VC_OK;) {
        if (q[0] == '\\' && q[1] == '$' && q[2] == '{') { st = append_text(&buf, &len, &cap, "${", 2); q += 3; continue; }
        if (q[0] != '$' || q[1] != '{') { st = append_text(&buf, &len, &cap, q, 1); q++; continue; }
        const char *qe = interp_end(q);
        if (!qe) { st = vc_fail(VC_ERR_ARG, "config: %s: unbalanced '${' in '%s'", chain_path(c, p, sizeof p), s); break; }
        const char *text = NULL;
        if ((st = eval_expr(c, q + 2, (size_t)(qe - q - 2), &val)) == VC_OK &&
            (st = value_text(c, val, tmp, sizeof tmp, &text)) == VC_OK) {
            size_t tl = strlen(text);
            c->rs->text += tl;
            if (len + tl > MAX_TEXT || c->rs->text > MAX_TEXT * 4)
                st = vc_fail(VC_ERR_ARG, "config: %s: interpolated text grows past %zu MiB", chain_path(c, p, sizeof p),
                             MAX_TEXT >> 20);
            else st = append_text(&buf, &len, &cap, text, tl);
        }
        vc_cfg_node_free(val);
        val = NULL;
        q = qe + 1;
    }
    if (st == VC_OK) {
        free(node->s);
        node->s = buf ? buf : vc_strdup("");
        node->lit = 1;
        return node->s ? VC_OK : VC_ERR_NOMEM;
    }
    free(buf);
    return st;
}

/* Resolves the chain's last node (not its children). */
static vc_status resolve_node(struct chain *c) {
    vc_cfg_node *node = c->n[c->len - 1];
    char p[256];
    if (!vc_cfg_node_is_interp(node)) return VC_OK;
    if (node->resolving)
        return vc_fail(VC_ERR_ARG, "config: %s: interpolation cycle through '%s'", chain_path(c, p, sizeof p), node->s);
    node->resolving = 1;
    vc_status st = resolve_string(c, node);
    node->resolving = 0;
    return st;
}

static vc_status resolve_tree(struct chain *c) {
    vc_status st = resolve_node(c);
    vc_cfg_node *node = c->n[c->len - 1];
    if (st != VC_OK || (node->kind != VC_CFG_MAP && node->kind != VC_CFG_LIST)) return st;
    if (c->len >= MAX_DEPTH) return vc_fail(VC_ERR_ARG, "config: nested deeper than %d levels", MAX_DEPTH);
    for (size_t i = 0; i < node->n && st == VC_OK; i++) {
        c->n[c->len++] = node->items[i];
        st = resolve_tree(c);
        c->len--;
    }
    return st;
}

vc_status vc_config_resolve(vc_config *cfg) {
    struct rstate rs = { 0 };
    struct chain c = { .len = 1, .rs = &rs };
    c.n[0] = cfg->root;
    return resolve_tree(&c);
}
