/* Tool-call parsers of verl's tool agent loop (`rollout.multi_turn.format`): hermes (verl b178a3cd's only one)
 * and later verl's (verl/experimental/agent_loop/tool_parser.py at 1dda039b) qwen3_coder, glm, seed, minimax,
 * kimi, deepseek_v4 and gemma4, each reading the decoded response as that file's regular expressions do
 * (non-greedy DOTALL matches, Python's `$`, str.strip, int() / float() / json.loads / ast.literal_eval on the
 * values), written here as plain scans. tests/rl/test_tool_parser.c holds them to verl's own outputs. */
#include "agent_internal.h"
#include "tool_parser.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;
    size_t n;
} span;

static const char *const NAMES[] = { "hermes", "qwen3_coder", "glm", "seed", "minimax", "kimi", "deepseek_v4", "gemma4" };

vc_status rl_tool_format_parse(const char *name, int *kind) {
    for (int i = 0; i < (int)(sizeof NAMES / sizeof NAMES[0]); i++)
        if (!strcmp(name, NAMES[i])) return *kind = i, VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED, "actor_rollout_ref.rollout.multi_turn.format=%s: verlc parses hermes, "
                   "qwen3_coder, glm, seed, minimax, kimi, deepseek_v4 and gemma4 tool calls (not gpt-oss)", name);
}

const char *rl_tool_format_stop(int kind) {
    return kind == RL_TF_GLM ? "<|observation|>" : kind == RL_TF_KIMI ? "<|im_end|>"
         : kind == RL_TF_GEMMA4 ? "<tool_call|>" : NULL;
}

/* ---- text helpers ---- */
static const char *find(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    for (; p && p + n <= end; p++) {
        p = memchr(p, lit[0], (size_t)(end - p));
        if (!p || p + n > end) return NULL;
        if (!memcmp(p, lit, n)) return p;
    }
    return NULL;
}

static int starts(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    return p + n <= end && !memcmp(p, lit, n);
}

/* bytes of the whitespace character at p (str.isspace / regex \s), 0 if none */
static int space_at(const char *p, const char *end) {
    unsigned char c = (unsigned char)*p;
    if (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x80 || p + 1 >= end) return 0;
    unsigned char d = (unsigned char)p[1];
    if (c == 0xc2) return d == 0x85 || d == 0xa0 ? 2 : 0;
    if (p + 2 >= end) return 0;
    unsigned char e = (unsigned char)p[2];
    if (c == 0xe1 && d == 0x9a && e == 0x80) return 3;                                  /* U+1680 */
    if (c == 0xe2 && d == 0x80 && (e <= 0x8a || e == 0xa8 || e == 0xa9 || e == 0xaf)) return 3;
    if (c == 0xe2 && d == 0x81 && e == 0x9f) return 3;                                  /* U+205F */
    if (c == 0xe3 && d == 0x80 && e == 0x80) return 3;                                  /* U+3000 */
    return 0;
}

static const char *skip_space(const char *p, const char *end) {
    for (int k; p < end && (k = space_at(p, end)); p += k) {}
    return p;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
}

/* str.strip() */
static span strip(span s) {
    const char *a = skip_space(s.p, s.p + s.n), *b = s.p + s.n;
    while (b > a) { /* the last character: step back over UTF-8 continuation bytes */
        const char *c = b - 1;
        while (c > a && ((unsigned char)*c & 0xc0) == 0x80) c--;
        if (space_at(c, b) != b - c) break;
        b = c;
    }
    return (span){ a, (size_t)(b - a) };
}

static cJSON *str_of(span s) {
    char *t = malloc(s.n + 1);
    if (!t) return NULL;
    memcpy(t, s.p, s.n);
    t[s.n] = 0;
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j;
}

/* json.loads: the whole span one JSON value (surrounding whitespace allowed), else NULL */
static cJSON *json_loads(span s) {
    char *t = malloc(s.n + 1);
    if (!t) return NULL;
    memcpy(t, s.p, s.n);
    t[s.n] = 0;
    cJSON *j = cJSON_ParseWithOpts(t, NULL, 1);
    free(t);
    return j;
}

/* strip, then json.loads, else the stripped text (seed, minimax and glm values) */
static cJSON *json_or_text(span s) {
    span v = strip(s);
    cJSON *j = json_loads(v);
    return j ? j : str_of(v);
}

/* s with the underscores Python allows between digits removed, into buf ("1_000"); 0 if one is misplaced */
static int py_digits(span s, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] == '_') {
            if (!(i > 0 && i + 1 < s.n && hexval(s.p[i - 1]) >= 0 && hexval(s.p[i + 1]) >= 0)) return 0;
            continue;
        }
        if (k + 1 >= cap) return 0;
        buf[k++] = s.p[i];
    }
    buf[k] = 0;
    return k > 0;
}

/* int(text): surrounding whitespace, a sign, decimal digits (underscores between them) */
static int py_int(span s, double *out) {
    span v = strip(s);
    char buf[128];
    if (!py_digits(v, buf, sizeof buf)) return 0;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!*p) return 0;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return 0;
    *out = strtod(buf, NULL);
    return 1;
}

/* float(text): a decimal float, inf / infinity / nan (any case), underscores between digits */
static int py_float(span s, double *out) {
    span v = strip(s);
    char buf[128];
    if (!py_digits(v, buf, sizeof buf)) return 0;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity") || !strcasecmp(p, "nan")) {
        *out = strtod(buf, NULL);
        return 1;
    }
    int digits = 0;
    const char *q = p;
    for (; *q >= '0' && *q <= '9'; q++) digits++;
    if (*q == '.')
        for (q++; *q >= '0' && *q <= '9'; q++) digits++;
    if (!digits) return 0;
    if (*q == 'e' || *q == 'E') {
        q++;
        q += *q == '+' || *q == '-';
        if (*q < '0' || *q > '9') return 0;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q) return 0;
    *out = strtod(buf, NULL);
    return 1;
}

/* ---- ast.literal_eval (the literals a model writes: strings, numbers, True / False / None, lists, tuples,
 * dicts; sets, bytes, complex numbers and string concatenation are not taken) ---- */
typedef struct {
    const char *p, *end;
    int depth;
} lit;

static void lit_ws(lit *L) {
    while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r' || *L->p == '\f'))
        L->p++;
}

static cJSON *lit_value(lit *L);

static void put_utf8(char *o, size_t *k, unsigned long u) {
    if (u < 0x80) o[(*k)++] = (char)u;
    else if (u < 0x800) o[(*k)++] = (char)(0xc0 | u >> 6), o[(*k)++] = (char)(0x80 | (u & 63));
    else if (u < 0x10000)
        o[(*k)++] = (char)(0xe0 | u >> 12), o[(*k)++] = (char)(0x80 | (u >> 6 & 63)), o[(*k)++] = (char)(0x80 | (u & 63));
    else
        o[(*k)++] = (char)(0xf0 | u >> 18), o[(*k)++] = (char)(0x80 | (u >> 12 & 63)),
        o[(*k)++] = (char)(0x80 | (u >> 6 & 63)), o[(*k)++] = (char)(0x80 | (u & 63));
}

static cJSON *lit_string(lit *L) {
    char q = *L->p++;
    char *o = malloc((size_t)(L->end - L->p) * 2 + 8);
    size_t k = 0;
    if (!o) return NULL;
    while (L->p < L->end && *L->p != q) {
        char c = *L->p++;
        if (c == '\n') break; /* an unterminated single-line string */
        if (c != '\\' || L->p >= L->end) {
            o[k++] = c;
            continue;
        }
        char e = *L->p++;
        static const char FROM[] = "nrtabfv0\\'\"", TO[] = "\n\r\t\a\b\f\v\0\\'\"";
        const char *f = e ? strchr(FROM, e) : NULL;
        int nx = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (f) o[k++] = TO[f - FROM];
        else if (e == '\n') {} /* a line continuation */
        else if (nx) {
            unsigned long u = 0;
            for (int i = 0; i < nx; i++, L->p++) {
                int h = L->p < L->end ? hexval(*L->p) : -1;
                if (h < 0) return free(o), NULL;
                u = u * 16 + (unsigned long)h;
            }
            if (u > 0x10ffff) return free(o), NULL;
            put_utf8(o, &k, u);
        } else o[k++] = '\\', o[k++] = e; /* Python keeps an unknown escape as it is */
    }
    if (L->p >= L->end || *L->p != q) return free(o), NULL;
    L->p++;
    o[k] = 0;
    cJSON *j = memchr(o, 0, k) ? NULL : cJSON_CreateString(o); /* NUL inside: not representable */
    free(o);
    return j;
}

static cJSON *lit_number(lit *L) {
    const char *a = L->p;
    int hex = L->end - a > 1 && a[0] == '0' && ((a[1] | 32) == 'x' || (a[1] | 32) == 'o' || (a[1] | 32) == 'b');
    for (; L->p < L->end; L->p++) {
        char c = *L->p;
        int sign = (c == '+' || c == '-') && !hex && L->p > a && (L->p[-1] | 32) == 'e';
        if (!(sign || c == '.' || c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'))) break;
    }
    span s = { a, (size_t)(L->p - a) };
    double v;
    char buf[128];
    if (hex) {
        int base = (a[1] | 32) == 'x' ? 16 : (a[1] | 32) == 'o' ? 8 : 2;
        char *e;
        if (!py_digits((span){ a + 2, s.n - 2 }, buf, sizeof buf)) return NULL;
        v = (double)strtoull(buf, &e, base);
        return *e ? NULL : cJSON_CreateNumber(v);
    }
    if (s.n > 1 && a[0] == '0' && py_int(s, &v) && v != 0) return NULL; /* 012: not Python 3 */
    return py_float(s, &v) && isfinite(v) ? cJSON_CreateNumber(v) : NULL;
}

/* items up to close ([ ( {): a list (also a tuple) or a dict; "(x)" is x */
static cJSON *lit_seq(lit *L, char close) {
    int dict = close == '}', tuple = close == ')', n = 0, comma = 0;
    cJSON *out = dict ? cJSON_CreateObject() : cJSON_CreateArray(), *one = NULL;
    for (lit_ws(L); out && L->p < L->end && *L->p != close; lit_ws(L)) {
        cJSON *k = NULL, *v = lit_value(L);
        if (v && dict) {
            lit_ws(L);
            k = v;
            v = cJSON_IsString(k) && L->p < L->end && *L->p == ':' ? (L->p++, lit_value(L)) : NULL;
        }
        if (!v || (dict && !k)) {
            cJSON_Delete(k), cJSON_Delete(v), cJSON_Delete(out);
            return NULL;
        }
        if (dict) {
            cJSON_DeleteItemFromObjectCaseSensitive(out, k->valuestring); /* a later key wins */
            cJSON_AddItemToObject(out, k->valuestring, v);
            cJSON_Delete(k);
        } else cJSON_AddItemToArray(out, v), one = v;
        n++;
        lit_ws(L);
        comma = L->p < L->end && *L->p == ',';
        if (comma) L->p++;
        else break;
    }
    lit_ws(L);
    if (!out || L->p >= L->end || *L->p != close) return cJSON_Delete(out), NULL;
    L->p++;
    if (tuple && n == 1 && !comma) { /* parentheses around one value */
        cJSON_DetachItemViaPointer(out, one);
        cJSON_Delete(out);
        return one;
    }
    return out;
}

static cJSON *lit_value(lit *L) {
    lit_ws(L);
    if (L->p >= L->end || ++L->depth > 100) return NULL;
    cJSON *v = NULL;
    char c = *L->p;
    if (c == '\'' || c == '"') v = lit_string(L);
    else if (c == '[' || c == '(' || c == '{') L->p++, v = lit_seq(L, c == '[' ? ']' : c == '(' ? ')' : '}');
    else if (starts(L->p, L->end, "True")) L->p += 4, v = cJSON_CreateTrue();
    else if (starts(L->p, L->end, "False")) L->p += 5, v = cJSON_CreateFalse();
    else if (starts(L->p, L->end, "None")) L->p += 4, v = cJSON_CreateNull();
    else if (c == '-' || c == '+') { /* unary signs on a number */
        L->p++;
        v = lit_value(L);
        if (!cJSON_IsNumber(v)) cJSON_Delete(v), v = NULL;
        else if (c == '-') cJSON_SetNumberValue(v, -v->valuedouble);
    } else if ((c >= '0' && c <= '9') || c == '.') v = lit_number(L);
    if (v && L->p < L->end && (((*L->p | 32) >= 'a' && (*L->p | 32) <= 'z') || *L->p == '_')) /* "Truex" */
        cJSON_Delete(v), v = NULL;
    L->depth--;
    return v;
}

static cJSON *literal_eval(span s) {
    lit L = { s.p, s.p + s.n, 0 };
    while (L.p < L.end && (*L.p == ' ' || *L.p == '\t')) L.p++;
    cJSON *v = lit_value(&L);
    lit_ws(&L);
    if (v && L.p != L.end) cJSON_Delete(v), v = NULL;
    return v;
}

/* ---- the calls ---- */
typedef struct {
    rl_tool_call *calls;
    int n, max;
} sink;

/* takes args (NULL: {}); calls past max are dropped, as verl's loop keeps the first max_parallel_calls */
static int add_call(sink *k, span name, cJSON *args) {
    if (!args) args = cJSON_CreateObject();
    if (!args) return 0;
    if (k->n >= k->max) return cJSON_Delete(args), 1;
    rl_tool_call *c = &k->calls[k->n++];
    size_t n = name.n < sizeof c->name - 1 ? name.n : sizeof c->name - 1;
    memcpy(c->name, name.p, n);
    c->name[n] = 0;
    c->args = args;
    return 1;
}

/* the text before `at`, or all of it */
static char *dup_span(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) memcpy(s, p, n), s[n] = 0;
    return s;
}

/* ---- hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call> ---- */
static char *hermes(const char *t, const char *end, sink *k) {
    static const char O[] = "<tool_call>", C[] = "</tool_call>";
    if (!find(t, end, O) || !find(t, end, C)) return dup_span(t, (size_t)(end - t));
    char *content = malloc((size_t)(end - t) + 1);
    size_t m = 0;
    const char *p = t;
    for (const char *a; content && (a = find(p, end, O));) {
        const char *b = find(a + sizeof O - 1, end, C);
        if (!b) break;
        memcpy(content + m, p, (size_t)(a - p)), m += (size_t)(a - p);
        cJSON *j = json_loads((span){ a + sizeof O - 1, (size_t)(b - a - (sizeof O - 1)) });
        cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name"), *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
        if (cJSON_IsString(nm) && args) /* malformed calls are dropped, as verl logs and drops them */
            add_call(k, (span){ nm->valuestring, strlen(nm->valuestring) }, cJSON_Duplicate(args, 1));
        cJSON_Delete(j);
        p = b + sizeof C - 1;
    }
    if (content) memcpy(content + m, p, (size_t)(end - p)), content[m + (size_t)(end - p)] = 0;
    return content;
}

/* ---- qwen3_coder: <tool_call><function=NAME><parameter=KEY>value</parameter>...</function></tool_call>,
 * each value converted by the tool schema's type of that parameter ---- */

/* findall of "open(.*?)close|open(.*?)$" (lazy: $ before a final newline) or "open(.*)$" (greedy): the next
 * body from p, and where the search goes on */
static int next_open(const char *p, const char *end, const char *open, const char *close, int greedy_tail, span *body,
                     const char **next) {
    const char *a = find(p, end, open);
    if (!a) return 0;
    a += strlen(open);
    const char *b = find(a, end, close);
    if (b) *body = (span){ a, (size_t)(b - a) }, *next = b + strlen(close);
    else {
        const char *e = !greedy_tail && end > a && end[-1] == '\n' ? end - 1 : end;
        *body = (span){ a, (size_t)(e - a) }, *next = end;
    }
    return 1;
}

/* findall of "open(.*?)close": the next body from p and where the search goes on; 0 when none */
static int next_block(const char *p, const char *end, const char *open, const char *close, span *body, const char **next) {
    const char *a = find(p, end, open), *b = a ? find(a + strlen(open), end, close) : NULL;
    if (!b) return 0;
    a += strlen(open);
    *body = (span){ a, (size_t)(b - a) }, *next = b + strlen(close);
    return 1;
}

/* the parameter's type in the function's schema (NULL: the function or the parameter is not there) as
 * Python's str(type).strip().lower() */
static const char *param_type(const cJSON *tools, const char *fn, const char *param, char *buf, size_t cap) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function"), *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, fn) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "function"))
            continue;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "parameters"), "properties");
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, param), "type");
        if (!cJSON_GetObjectItemCaseSensitive(props, param)) return NULL;
        if (cJSON_IsString(pt)) snprintf(buf, cap, "%s", pt->valuestring);
        else if (cJSON_IsArray(pt)) { /* str(['integer', 'number']) */
            size_t k = (size_t)snprintf(buf, cap, "[");
            const cJSON *e;
            cJSON_ArrayForEach(e, pt) if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "%s'%s'", k > 1 ? ", " : "",
                                                                        cJSON_IsString(e) ? e->valuestring : "");
            if (k < cap) snprintf(buf + k, cap - k, "]");
        } else snprintf(buf, cap, "none");
        span s = strip((span){ buf, strlen(buf) });
        memmove(buf, s.p, s.n), buf[s.n] = 0;
        for (char *c = buf; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        return buf;
    }
    return NULL;
}

static int is_any(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(s, *list)) return 1;
    return 0;
}

static int prefix_any(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strncmp(s, *list, strlen(*list))) return 1;
    return 0;
}

/* verl's convert_param_value */
static cJSON *qwen_value(span v, const char *type) {
    static const char *const STR[] = { "string", "str", "text", "varchar", "char", "enum", NULL };
    static const char *const INT[] = { "int", "uint", "long", "short", "unsigned", NULL };
    static const char *const NUM[] = { "num", "float", NULL }, *const BOOL[] = { "boolean", "bool", "binary", NULL };
    if (v.n == 4 && !strncasecmp(v.p, "null", 4)) return cJSON_CreateNull();
    if (!type || is_any(type, STR)) return str_of(v);
    double d;
    if (prefix_any(type, INT)) return py_int(v, &d) ? cJSON_CreateNumber(d) : str_of(v);
    if (prefix_any(type, NUM)) return py_float(v, &d) && isfinite(d) ? cJSON_CreateNumber(d) : str_of(v);
    if (is_any(type, BOOL)) return v.n == 4 && !strncasecmp(v.p, "true", 4) ? cJSON_CreateTrue() : cJSON_CreateFalse();
    cJSON *j = !strcmp(type, "object") || !strncmp(type, "dict", 4) ? json_loads(v) : NULL;
    if (!j) j = literal_eval(v);
    return j ? j : str_of(v);
}

/* one "<function=" body: NAME>parameters; 0 when it has no '>' (verl skips it) */
static int qwen_function(span f, const cJSON *tools, sink *k) {
    const char *end = f.p + f.n, *gt = memchr(f.p, '>', f.n);
    if (!gt) return 1;
    char fn[256], pname[256], tb[256];
    snprintf(fn, sizeof fn, "%.*s", (int)(gt - f.p), f.p);
    cJSON *args = cJSON_CreateObject();
    span body;
    for (const char *p = gt + 1; args && next_open(p, end, "<parameter=", "</parameter>", 0, &body, &p);) {
        const char *g = memchr(body.p, '>', body.n);
        if (!g) continue;
        span v = { g + 1, (size_t)(body.p + body.n - g - 1) };
        if (v.n && v.p[0] == '\n') v.p++, v.n--;
        if (v.n && v.p[v.n - 1] == '\n') v.n--;
        snprintf(pname, sizeof pname, "%.*s", (int)(g - body.p), body.p);
        const char *ty = param_type(tools, fn, pname, tb, sizeof tb);
        cJSON *val = qwen_value(v, ty);
        if (!val) return cJSON_Delete(args), 0;
        cJSON_DeleteItemFromObjectCaseSensitive(args, pname);
        cJSON_AddItemToObject(args, pname, val);
    }
    return args && add_call(k, (span){ f.p, (size_t)(gt - f.p) }, args);
}

static char *qwen3_coder(const char *t, const char *end, const cJSON *tools, sink *k) {
    const char *first = find(t, end, "<tool_call>");
    if (!first) return dup_span(t, (size_t)(end - t));
    int n_fn = 0;
    span call, fn;
    for (const char *p = t; next_open(p, end, "<tool_call>", "</tool_call>", 0, &call, &p);) {
        const char *ce = call.p + call.n;
        for (const char *q = call.p; next_open(q, ce, "<function=", "</function>", 1, &fn, &q); n_fn++)
            if (!qwen_function(fn, tools, k)) return NULL;
    }
    return n_fn ? dup_span(t, (size_t)(first - t)) : dup_span(t, (size_t)(end - t));
}

/* ---- glm: <tool_call>NAME<arg_key>k</arg_key> <arg_value>v</arg_value>...</tool_call> ---- */

/* the next "<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>" from p (the key extends past a
 * "</arg_key>" that no "<arg_value>" follows, as the regex backtracks) */
static int glm_pair(const char *p, const char *end, span *key, span *val, const char **next) {
    for (const char *a; (a = find(p, end, "<arg_key>")); p = a + 1) {
        const char *ks = a + 9;
        for (const char *ke = find(ks, end, "</arg_key>"); ke; ke = find(ke + 1, end, "</arg_key>")) {
            const char *v = skip_space(ke + 10, end);
            const char *ve = starts(v, end, "<arg_value>") ? find(v + 11, end, "</arg_value>") : NULL;
            if (!ve) continue;
            *key = (span){ ks, (size_t)(ke - ks) }, *val = (span){ v + 11, (size_t)(ve - v - 11) };
            *next = ve + 12;
            return 1;
        }
    }
    return 0;
}

static int glm_call(span c, sink *k) {
    const char *end = c.p + c.n, *first = find(c.p, end, "<arg_key>");
    cJSON *args = cJSON_CreateObject();
    span key, val;
    char kb[256];
    for (const char *p = first; args && p && glm_pair(p, end, &key, &val, &p);) {
        span ks = strip(key);
        cJSON *v = json_or_text(val);
        if (!v) return cJSON_Delete(args), 0;
        snprintf(kb, sizeof kb, "%.*s", (int)ks.n, ks.p);
        cJSON_DeleteItemFromObjectCaseSensitive(args, kb);
        cJSON_AddItemToObject(args, kb, v);
    }
    return args && add_call(k, strip((span){ c.p, (size_t)((first ? first : end) - c.p) }), args);
}

/* _strip_thinking_markers: a leading "<think>...</think>", then a leading "</think>" */
static span glm_unthink(span s) {
    const char *end = s.p + s.n, *p = skip_space(s.p, end);
    const char *te = starts(p, end, "<think>") ? find(p + 7, end, "</think>") : NULL;
    if (te) s = (span){ te + 8, (size_t)(end - te - 8) };
    p = skip_space(s.p, end);
    if (starts(p, end, "</think>")) s = (span){ p + 8, (size_t)(end - p - 8) };
    return s;
}

static char *glm(const char *t, const char *end, sink *k) {
    const char *first = find(t, end, "<tool_call>");
    if (!first || !find(t, end, "</tool_call>")) return dup_span(t, (size_t)(end - t));
    span c;
    for (const char *p = t; next_block(p, end, "<tool_call>", "</tool_call>", &c, &p);)
        if (!glm_call(c, k)) return NULL;
    span s = glm_unthink((span){ t, (size_t)(first - t) });
    return dup_span(s.p, s.n);
}

/* ---- seed and minimax: <seed:tool_call><function=NAME> <parameter=K>v</parameter></function>, and
 * <minimax:tool_call><invoke name="NAME"> <parameter name="K">v</parameter></invoke> ---- */

/* the next "OPEN([^STOP]+)MID\s*(.*?)CLOSE" (head chars exclude the ones in stop; mid_ws: \s* after MID) */
static int tag_search(const char *p, const char *end, const char *open, const char *stop, const char *mid, int mid_ws,
                      const char *close, span *head, span *body, const char **next) {
    for (const char *a; (a = find(p, end, open)); p = a + 1) {
        const char *h = a + strlen(open), *he = h;
        while (he < end && !strchr(stop, *he)) he++;
        if (he == h || !starts(he, end, mid)) continue;
        const char *b = he + strlen(mid);
        if (mid_ws) b = skip_space(b, end);
        const char *c = find(b, end, close);
        if (!c) continue;
        *head = (span){ h, (size_t)(he - h) }, *body = (span){ b, (size_t)(c - b) }, *next = c + strlen(close);
        return 1;
    }
    return 0;
}

static cJSON *xml_params(span body, const char *open, const char *stop, const char *mid) {
    cJSON *args = cJSON_CreateObject();
    span key, val;
    char kb[256];
    const char *end = body.p + body.n;
    for (const char *p = body.p; args && tag_search(p, end, open, stop, mid, 0, "</parameter>", &key, &val, &p);) {
        span ks = strip(key);
        cJSON *v = json_or_text(val);
        if (!v) return cJSON_Delete(args), NULL;
        snprintf(kb, sizeof kb, "%.*s", (int)ks.n, ks.p);
        cJSON_DeleteItemFromObjectCaseSensitive(args, kb);
        cJSON_AddItemToObject(args, kb, v);
    }
    return args;
}

static char *seed_minimax(const char *t, const char *end, int minimax, sink *k) {
    const char *O = minimax ? "<minimax:tool_call>" : "<seed:tool_call>";
    const char *C = minimax ? "</minimax:tool_call>" : "</seed:tool_call>";
    const char *first = find(t, end, O);
    if (!first || !find(t, end, C)) return dup_span(t, (size_t)(end - t));
    span blk, name, body;
    for (const char *p = t; next_block(p, end, O, C, &blk, &p);) {
        const char *be = blk.p + blk.n;
        for (const char *q = blk.p; q;) {
            int hit = minimax ? tag_search(q, be, "<invoke name=\"", "\"", "\">", 1, "</invoke>", &name, &body, &q)
                              : tag_search(q, be, "<function=", ">\n", ">", 1, "</function>", &name, &body, &q);
            if (!hit) break;
            cJSON *args = minimax ? xml_params(body, "<parameter name=\"", "\"", "\">")
                                  : xml_params(body, "<parameter=", ">\n", ">");
            if (!args || !add_call(k, strip(name), args)) return NULL;
            if (!minimax) break; /* seed: the first function of a block (regex search) */
        }
    }
    return dup_span(t, (size_t)(first - t));
}

/* ---- kimi: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{json}
 * <|tool_call_end|>..., the name matched to the tools as verl's _infer_tool_name ---- */
static void kimi_name(span raw, const cJSON *args, const cJSON *tools, char *out, size_t cap) {
    snprintf(out, cap, "%.*s", (int)raw.n, raw.p);
    char low[256];
    snprintf(low, sizeof low, "%s", out);
    for (char *c = low; *c; c++) *c = *c == '-' ? '_' : (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    const cJSON *t, *hit = NULL;
    int n_tools = 0, n_sub = 0, n_req = 0;
    const char *sub = NULL, *req = NULL;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type"), *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(nm)) continue;
        n_tools++;
        if (!strcmp(nm->valuestring, out)) return;
        char ln[256];
        snprintf(ln, sizeof ln, "%s", nm->valuestring);
        for (char *c = ln; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        if (strstr(low, ln)) n_sub++, sub = nm->valuestring;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "parameters"), "required");
        int all = cJSON_GetArraySize(r) > 0;
        cJSON_ArrayForEach(hit, r) all &= cJSON_IsString(hit) && cJSON_GetObjectItemCaseSensitive(args, hit->valuestring);
        if (all) n_req++, req = nm->valuestring;
    }
    if (!n_tools) return;
    if (n_sub == 1) snprintf(out, cap, "%s", sub);
    else if (n_req == 1) snprintf(out, cap, "%s", req);
}

static char *kimi(const char *t, const char *end, const cJSON *tools, sink *k) {
    static const char S[] = "<|tool_calls_section_begin|>", B[] = "<|tool_call_begin|>",
                      A[] = "<|tool_call_argument_begin|>", E[] = "<|tool_call_end|>";
    const char *sec = find(t, end, S);
    if (!sec) return dup_span(t, (size_t)(end - t));
    for (const char *p = t, *b; (b = find(p, end, B));) {
        const char *a = find(b + sizeof B - 1, end, A), *e = a ? find(a + sizeof A - 1, end, E) : NULL;
        p = e ? e + sizeof E - 1 : b + 1; /* the search goes on after a match, else one byte on */
        if (!e) continue;
        span raw = strip((span){ b + sizeof B - 1, (size_t)(a - b - (sizeof B - 1)) });
        cJSON *args = json_loads((span){ a + sizeof A - 1, (size_t)(e - a - (sizeof A - 1)) });
        if (!cJSON_IsObject(args)) cJSON_Delete(args), args = cJSON_CreateObject();
        char name[256];
        kimi_name(raw, args, tools, name, sizeof name);
        if (!add_call(k, (span){ name, strlen(name) }, args)) return NULL;
    }
    return dup_span(t, (size_t)(sec - t));
}

/* ---- deepseek_v4: DSML markup, values raw (string="true") or JSON ---- */
#define DSML "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"
static int dsv4_invoke(span blk, sink *k) {
    const char *end = blk.p + blk.n;
    for (const char *p = blk.p, *a; (a = find(p, end, "<" DSML "invoke name=\""));) {
        const char *n0 = a + strlen("<" DSML "invoke name=\""), *ne = find(n0, end, "\">");
        const char *b0 = ne ? ne + 2 : NULL, *be = b0 ? find(b0, end, "</" DSML "invoke>") : NULL;
        if (!be) break;
        cJSON *args = cJSON_CreateObject();
        const char *PO = "<" DSML "parameter name=\"", *PC = "</" DSML "parameter>";
        for (const char *q = b0, *c; args && (c = find(q, be, PO));) {
            const char *k0 = c + strlen(PO), *v0 = NULL, *ke = k0;
            int is_str = 0;
            for (; (ke = find(ke, be, "\" string=\"")); ke++) { /* the name extends to a string="true|false"> */
                const char *s = ke + 10;
                if (starts(s, be, "true\">")) { is_str = 1, v0 = s + 6; break; }
                if (starts(s, be, "false\">")) { v0 = s + 7; break; }
            }
            const char *ve = v0 ? find(v0, be, PC) : NULL;
            q = ve ? ve + strlen(PC) : c + 1;
            if (!ve) continue;
            span v = { v0, (size_t)(ve - v0) };
            cJSON *val = is_str ? NULL : json_loads(v);
            if (!val) val = str_of(v);
            char kb[256];
            snprintf(kb, sizeof kb, "%.*s", (int)(ke - k0), k0);
            cJSON_DeleteItemFromObjectCaseSensitive(args, kb);
            cJSON_AddItemToObject(args, kb, val);
        }
        if (!args || !add_call(k, (span){ n0, (size_t)(ne - n0) }, args)) return 0;
        p = be + strlen("</" DSML "invoke>");
    }
    return 1;
}

/* text after the last "</think>" */
static span dsv4_reasoning(span s) {
    const char *last = NULL, *end = s.p + s.n;
    for (const char *p = s.p; (p = find(p, end, "</think>")); p++) last = p;
    return last ? (span){ last + 8, (size_t)(end - last - 8) } : s;
}

/* text with every occurrence of each of the tokens (NULL entries skipped) removed, in place */
static size_t remove_all(char *t, size_t n, const char *const *tok, int ntok) {
    for (int i = 0; i < ntok; i++) {
        size_t m = tok[i] ? strlen(tok[i]) : 0, w = 0;
        if (!m) continue;
        for (size_t r = 0; r < n;)
            if (r + m <= n && !memcmp(t + r, tok[i], m)) r += m;
            else t[w++] = t[r++];
        n = w;
        t[n] = 0;
    }
    return n;
}

static char *deepseek_v4(const char *t, const char *end, sink *k) {
    const char *S = "<" DSML "tool_calls>", *C = "</" DSML "tool_calls>";
    const char *first = find(t, end, S);
    if (!first) {
        span s = dsv4_reasoning((span){ t, (size_t)(end - t) });
        return dup_span(s.p, s.n);
    }
    span blk;
    for (const char *p = t; next_block(p, end, S, C, &blk, &p);)
        if (!dsv4_invoke(blk, k)) return NULL;
    span s = dsv4_reasoning((span){ t, (size_t)(first - t) });
    if (s.n >= 2 && s.p[s.n - 1] == '\n' && s.p[s.n - 2] == '\n') s.n -= 2;
    return dup_span(s.p, s.n);
}

/* ---- gemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,key2:bare}<tool_call|> ---- */
static int word(char c) {
    return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_' || (unsigned char)c >= 0x80;
}

static cJSON *gemma_bare(span b) {
    span v = strip(b);
    double d;
    if (v.n == 4 && !strncasecmp(v.p, "true", 4)) return cJSON_CreateTrue();
    if (v.n == 5 && !strncasecmp(v.p, "false", 5)) return cJSON_CreateFalse();
    if (v.n == 4 && !strncasecmp(v.p, "null", 4)) return cJSON_CreateNull();
    if (py_int(v, &d) || (py_float(v, &d) && isfinite(d))) return cJSON_CreateNumber(d);
    return str_of(v);
}

static cJSON *gemma_args(span s) {
    static const char Q[] = "<|\"|>";
    const char *end = s.p + s.n;
    cJSON *args = cJSON_CreateObject();
    for (const char *p = s.p; args && p < end;) {
        const char *w = p;
        while (w < end && word(*w)) w++;
        if (w == p || w >= end || *w != ':') { /* no "word:" here: the search moves on */
            p = w > p ? w : p + 1;
            continue;
        }
        span key = { p, (size_t)(w - p) };
        const char *v = w + 1, *qe = starts(v, end, Q) ? find(v + 5, end, Q) : NULL;
        cJSON *val;
        if (qe) val = str_of((span){ v + 5, (size_t)(qe - v - 5) }), p = qe + 5;
        else {
            const char *e = v;
            while (e < end && *e != ',' && *e != '}') e++;
            val = gemma_bare((span){ v, (size_t)(e - v) }), p = e;
        }
        char kb[256];
        snprintf(kb, sizeof kb, "%.*s", (int)key.n, key.p);
        if (!val) return cJSON_Delete(args), NULL;
        cJSON_DeleteItemFromObjectCaseSensitive(args, kb);
        cJSON_AddItemToObject(args, kb, val);
    }
    return args;
}

static char *gemma4(const char *t, const char *end, sink *k) {
    static const char O[] = "<|tool_call>call:", C[] = "}<tool_call|>";
    const char *first = find(t, end, "<|tool_call>");
    int n = 0;
    for (const char *p = t, *a; first && (a = find(p, end, O));) {
        const char *nm = a + sizeof O - 1, *ne = nm;
        while (ne < end && word(*ne)) ne++;
        const char *c = ne > nm && ne < end && *ne == '{' ? find(ne + 1, end, C) : NULL;
        p = c ? c + sizeof C - 1 : a + 1;
        if (!c) continue;
        cJSON *args = gemma_args((span){ ne + 1, (size_t)(c - ne - 1) });
        if (!args || !add_call(k, (span){ nm, (size_t)(ne - nm) }, args)) return NULL;
        n++;
    }
    return dup_span(t, (size_t)((n ? first : end) - t));
}

int rl_parse_tool_calls_as(int kind, const char *text, const char *pad, const cJSON *tools, rl_tool_call *calls,
                           int max, char **content) {
    sink k = { calls, 0, max };
    size_t n = strlen(text);
    char *t = dup_span(text, n), *c = NULL;
    if (!t) return -1;
    if (kind == RL_TF_GEMMA4 || kind == RL_TF_DSV4) { /* verl removes the pad (and DeepSeek's EOS) token */
        const char *tok[2] = { pad, kind == RL_TF_DSV4 ? "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>" : NULL };
        n = remove_all(t, n, tok, 2);
    }
    const char *end = t + n;
    switch (kind) {
    case RL_TF_HERMES: c = hermes(t, end, &k); break;
    case RL_TF_QWEN3_CODER: c = qwen3_coder(t, end, tools, &k); break;
    case RL_TF_GLM: c = glm(t, end, &k); break;
    case RL_TF_SEED: c = seed_minimax(t, end, 0, &k); break;
    case RL_TF_MINIMAX: c = seed_minimax(t, end, 1, &k); break;
    case RL_TF_KIMI: c = kimi(t, end, tools, &k); break;
    case RL_TF_DSV4: c = deepseek_v4(t, end, &k); break;
    default: c = gemma4(t, end, &k); break;
    }
    free(t);
    if (!c) { /* out of memory */
        for (int i = 0; i < k.n; i++) cJSON_Delete(calls[i].args);
        return -1;
    }
    if (content) *content = c;
    else free(c);
    return k.n;
}
