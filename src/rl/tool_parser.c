/* Tool-call parsers of verl's tool agent loop (`rollout.multi_turn.format`): hermes (verl b178a3cd's only one)
 * and later verl's (verl/experimental/agent_loop/tool_parser.py at 1dda039b) qwen3_coder, glm, seed, minimax,
 * kimi, deepseek_v4, gemma4 and gpt-oss, each reading the decoded response as that file's regular expressions do
 * (non-greedy DOTALL matches, Python's `$`, str.strip, int() / float() / json.loads / ast.literal_eval on the
 * values), written here as plain scans. tests/rl/test_tool_parser.c holds them to verl's own outputs. */
#include "agent_internal.h"
#include "tool_parser.h"
#include "py_text.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = { "hermes", "qwen3_coder", "glm",  "seed",
                                     "minimax", "kimi",        "deepseek_v4", "gemma4", "gpt-oss" };
#define DSV4_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

vc_status rl_tool_format_parse(const char *name, int *kind) {
    for (int i = 0; i < (int)(sizeof NAMES / sizeof NAMES[0]); i++)
        if (!strcmp(name, NAMES[i])) return *kind = i, VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED, "actor_rollout_ref.rollout.multi_turn.format=%s: verlc parses hermes, "
                   "qwen3_coder, glm, seed, minimax, kimi, deepseek_v4, gemma4 and gpt-oss tool calls", name);
}

const char *rl_tool_format_stop(int kind) {
    return kind == RL_TF_GLM ? "<|observation|>" : kind == RL_TF_KIMI ? "<|im_end|>"
         : kind == RL_TF_GEMMA4 ? "<tool_call|>" : NULL;
}

/* ---- the calls ---- */
typedef struct {
    rl_tool_call *calls;
    int n, max;
} sink;

/* takes args (NULL: {}); calls past max are dropped, as verl's loop keeps the first max_parallel_calls */
static int add_call(sink *k, pt_span name, cJSON *args) {
    if (!args) args = cJSON_CreateObject();
    if (!args) return 0;
    if (k->n >= k->max) return cJSON_Delete(args), 1;
    rl_tool_call *c = &k->calls[k->n++];
    size_t n = name.n < sizeof c->name - 1 ? name.n : sizeof c->name - 1;
    memcpy(c->name, name.p, n);
    c->name[n] = 0;
    c->args = args;
    c->text = NULL; /* not fetched yet */
    return 1;
}

/* ---- hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call> ---- */
static char *hermes(const char *t, const char *end, sink *k) {
    static const char O[] = "<tool_call>", C[] = "</tool_call>";
    if (!pt_find(t, end, O) || !pt_find(t, end, C)) return pt_dup(t, (size_t)(end - t));
    char *content = malloc((size_t)(end - t) + 1);
    size_t m = 0;
    const char *p = t;
    for (const char *a; content && (a = pt_find(p, end, O));) {
        const char *b = pt_find(a + sizeof O - 1, end, C);
        if (!b) break;
        memcpy(content + m, p, (size_t)(a - p)), m += (size_t)(a - p);
        cJSON *j = pt_json_loads((pt_span){ a + sizeof O - 1, (size_t)(b - a - (sizeof O - 1)) });
        cJSON *nm = get(j, "name"), *args = get(j, "arguments");
        if (cJSON_IsString(nm) && args) /* malformed calls are dropped, as verl logs and drops them */
            add_call(k, (pt_span){ nm->valuestring, strlen(nm->valuestring) }, cJSON_Duplicate(args, 1));
        cJSON_Delete(j);
        p = b + sizeof C - 1;
    }
    if (content) memcpy(content + m, p, (size_t)(end - p)), content[m + (size_t)(end - p)] = 0;
    return content;
}

/* ---- qwen3_coder: <tool_call><function=NAME><parameter=KEY>value</parameter>...</function></tool_call>,
 * each value converted by the tool schema's type of that parameter ---- */

/* the parameter's type in the function's schema (NULL: the function or the parameter is not there) as
 * Python's str(type).strip().lower() */
static const char *param_type(const cJSON *tools, const char *fn, const char *param, char *buf, size_t cap) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = get(t, "function"), *nm = get(f, "name");
        const cJSON *ty = get(t, "type");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, fn) || !cJSON_IsString(ty) ||
            strcmp(ty->valuestring, "function"))
            continue;
        const cJSON *props = get(get(f, "parameters"), "properties");
        const cJSON *pt = get(get(props, param), "type");
        if (!get(props, param)) return NULL;
        if (cJSON_IsString(pt)) snprintf(buf, cap, "%s", pt->valuestring);
        else if (cJSON_IsArray(pt)) { /* str(['integer', 'number']) */
            size_t k = (size_t)snprintf(buf, cap, "[");
            const cJSON *e;
            cJSON_ArrayForEach(e, pt) if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "%s'%s'", k > 1 ? ", " : "",
                                                                        cJSON_IsString(e) ? e->valuestring : "");
            if (k < cap) snprintf(buf + k, cap - k, "]");
        } else snprintf(buf, cap, "none");
        pt_span s = pt_strip((pt_span){ buf, strlen(buf) });
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
static cJSON *qwen_value(pt_span v, const char *type) {
    static const char *const STR[] = { "string", "str", "text", "varchar", "char", "enum", NULL };
    static const char *const INT[] = { "int", "uint", "long", "short", "unsigned", NULL };
    static const char *const NUM[] = { "num", "float", NULL }, *const BOOL[] = { "boolean", "bool", "binary", NULL };
    if (v.n == 4 && !strncasecmp(v.p, "null", 4)) return cJSON_CreateNull();
    if (!type || is_any(type, STR)) return pt_str_of(v);
    double d;
    if (prefix_any(type, INT)) return pt_py_int(v, &d) ? cJSON_CreateNumber(d) : pt_str_of(v);
    if (prefix_any(type, NUM)) return pt_py_float(v, &d) && isfinite(d) ? cJSON_CreateNumber(d) : pt_str_of(v);
    if (is_any(type, BOOL)) return v.n == 4 && !strncasecmp(v.p, "true", 4) ? cJSON_CreateTrue() : cJSON_CreateFalse();
    cJSON *j = !strcmp(type, "object") || !strncmp(type, "dict", 4) ? pt_json_loads(v) : NULL;
    if (!j) j = pt_literal_eval(v);
    return j ? j : pt_str_of(v);
}

/* one "<function=" body: NAME>parameters; 0 when it has no '>' (verl skips it) */
static int qwen_function(pt_span f, const cJSON *tools, sink *k) {
    const char *end = f.p + f.n, *gt = memchr(f.p, '>', f.n);
    if (!gt) return 1;
    char fn[256], pname[256], tb[256];
    snprintf(fn, sizeof fn, "%.*s", (int)(gt - f.p), f.p);
    cJSON *args = cJSON_CreateObject();
    pt_span body;
    for (const char *p = gt + 1; args && pt_next_open(p, end, "<parameter=", "</parameter>", 0, &body, &p);) {
        const char *g = memchr(body.p, '>', body.n);
        if (!g) continue;
        pt_span v = { g + 1, (size_t)(body.p + body.n - g - 1) };
        if (v.n && v.p[0] == '\n') v.p++, v.n--;
        if (v.n && v.p[v.n - 1] == '\n') v.n--;
        snprintf(pname, sizeof pname, "%.*s", (int)(g - body.p), body.p);
        const char *ty = param_type(tools, fn, pname, tb, sizeof tb);
        cJSON *val = qwen_value(v, ty);
        if (!val) return cJSON_Delete(args), 0;
        cJSON_DeleteItemFromObjectCaseSensitive(args, pname);
        cJSON_AddItemToObject(args, pname, val);
    }
    return args && add_call(k, (pt_span){ f.p, (size_t)(gt - f.p) }, args);
}

static char *qwen3_coder(const char *t, const char *end, const cJSON *tools, sink *k) {
    const char *first = pt_find(t, end, "<tool_call>");
    if (!first) return pt_dup(t, (size_t)(end - t));
    int n_fn = 0;
    pt_span call, fn;
    for (const char *p = t; pt_next_open(p, end, "<tool_call>", "</tool_call>", 0, &call, &p);) {
        const char *ce = call.p + call.n;
        for (const char *q = call.p; pt_next_open(q, ce, "<function=", "</function>", 1, &fn, &q); n_fn++)
            if (!qwen_function(fn, tools, k)) return NULL;
    }
    return n_fn ? pt_dup(t, (size_t)(first - t)) : pt_dup(t, (size_t)(end - t));
}

/* ---- glm: <tool_call>NAME<arg_key>k</arg_key> <arg_value>v</arg_value>...</tool_call> ---- */

/* the next "<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>" from p (the key extends past a
 * "</arg_key>" that no "<arg_value>" follows, as the regex backtracks) */
static int glm_pair(const char *p, const char *end, pt_span *key, pt_span *val, const char **next) {
    for (const char *a; (a = pt_find(p, end, "<arg_key>")); p = a + 1) {
        const char *ks = a + 9;
        for (const char *ke = pt_find(ks, end, "</arg_key>"); ke; ke = pt_find(ke + 1, end, "</arg_key>")) {
            const char *v = pt_skip_space(ke + 10, end);
            if (!pt_starts(v, end, "<arg_value>")) continue;
            const char *ve = pt_find(v + 11, end, "</arg_value>");
            if (!ve) return 0; /* no closing tag further on: no later pair can match either */
            *key = (pt_span){ ks, (size_t)(ke - ks) }, *val = (pt_span){ v + 11, (size_t)(ve - v - 11) };
            *next = ve + 12;
            return 1;
        }
    }
    return 0;
}

static int glm_call(pt_span c, sink *k) {
    const char *end = c.p + c.n, *first = pt_find(c.p, end, "<arg_key>");
    cJSON *args = cJSON_CreateObject();
    pt_span key, val;
    char kb[256];
    for (const char *p = first; args && p && glm_pair(p, end, &key, &val, &p);) {
        pt_span ks = pt_strip(key);
        cJSON *v = pt_json_or_text(val);
        if (!v) return cJSON_Delete(args), 0;
        snprintf(kb, sizeof kb, "%.*s", (int)ks.n, ks.p);
        cJSON_DeleteItemFromObjectCaseSensitive(args, kb);
        cJSON_AddItemToObject(args, kb, v);
    }
    return args && add_call(k, pt_strip((pt_span){ c.p, (size_t)((first ? first : end) - c.p) }), args);
}

/* _strip_thinking_markers: a leading "<think>...</think>", then a leading "</think>" */
static pt_span glm_unthink(pt_span s) {
    const char *end = s.p + s.n, *p = pt_skip_space(s.p, end);
    const char *te = pt_starts(p, end, "<think>") ? pt_find(p + 7, end, "</think>") : NULL;
    if (te) s = (pt_span){ te + 8, (size_t)(end - te - 8) };
    p = pt_skip_space(s.p, end);
    if (pt_starts(p, end, "</think>")) s = (pt_span){ p + 8, (size_t)(end - p - 8) };
    return s;
}

static char *glm(const char *t, const char *end, sink *k) {
    const char *first = pt_find(t, end, "<tool_call>");
    if (!first || !pt_find(t, end, "</tool_call>")) return pt_dup(t, (size_t)(end - t));
    pt_span c;
    for (const char *p = t; pt_next_block(p, end, "<tool_call>", "</tool_call>", &c, &p);)
        if (!glm_call(c, k)) return NULL;
    pt_span s = glm_unthink((pt_span){ t, (size_t)(first - t) });
    return pt_dup(s.p, s.n);
}

/* ---- seed and minimax: <seed:tool_call><function=NAME> <parameter=K>v</parameter></function>, and
 * <minimax:tool_call><invoke name="NAME"> <parameter name="K">v</parameter></invoke> ---- */

/* the next "OPEN([^STOP]+)MID\s*(.*?)CLOSE" (head chars exclude the ones in stop; mid_ws: \s* after MID) */
static int tag_search(const char *p, const char *end, const char *open, const char *stop, const char *mid, int mid_ws,
                      const char *close, pt_span *head, pt_span *body, const char **next) {
    for (const char *a; (a = pt_find(p, end, open)); p = a + 1) {
        const char *h = a + strlen(open), *he = h;
        while (he < end && !strchr(stop, *he)) he++;
        if (he == h || !pt_starts(he, end, mid)) continue;
        const char *b = he + strlen(mid);
        if (mid_ws) b = pt_skip_space(b, end);
        const char *c = pt_find(b, end, close);
        if (!c) return 0; /* none further on: no later opening can match either */
        *head = (pt_span){ h, (size_t)(he - h) }, *body = (pt_span){ b, (size_t)(c - b) }, *next = c + strlen(close);
        return 1;
    }
    return 0;
}

static cJSON *xml_params(pt_span body, const char *open, const char *stop, const char *mid) {
    cJSON *args = cJSON_CreateObject();
    pt_span key, val;
    char kb[256];
    const char *end = body.p + body.n;
    for (const char *p = body.p; args && tag_search(p, end, open, stop, mid, 0, "</parameter>", &key, &val, &p);) {
        pt_span ks = pt_strip(key);
        cJSON *v = pt_json_or_text(val);
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
    const char *first = pt_find(t, end, O);
    if (!first || !pt_find(t, end, C)) return pt_dup(t, (size_t)(end - t));
    pt_span blk, name, body;
    for (const char *p = t; pt_next_block(p, end, O, C, &blk, &p);) {
        const char *be = blk.p + blk.n;
        for (const char *q = blk.p; q;) {
            int hit = minimax ? tag_search(q, be, "<invoke name=\"", "\"", "\">", 1, "</invoke>", &name, &body, &q)
                              : tag_search(q, be, "<function=", ">\n", ">", 1, "</function>", &name, &body, &q);
            if (!hit) break;
            cJSON *args = minimax ? xml_params(body, "<parameter name=\"", "\"", "\">")
                                  : xml_params(body, "<parameter=", ">\n", ">");
            if (!args || !add_call(k, pt_strip(name), args)) return NULL;
            if (!minimax) break; /* seed: the first function of a block (regex search) */
        }
    }
    return pt_dup(t, (size_t)(first - t));
}

/* ---- kimi: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{json}
 * <|tool_call_end|>..., the name matched to the tools as verl's _infer_tool_name ---- */
static void kimi_name(pt_span raw, const cJSON *args, const cJSON *tools, char *out, size_t cap) {
    snprintf(out, cap, "%.*s", (int)raw.n, raw.p);
    char low[256];
    snprintf(low, sizeof low, "%s", out);
    for (char *c = low; *c; c++) *c = *c == '-' ? '_' : (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    const cJSON *t, *hit = NULL;
    int n_tools = 0, n_sub = 0, n_req = 0;
    const char *sub = NULL, *req = NULL;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *ty = get(t, "type"), *f = get(t, "function");
        const cJSON *nm = get(f, "name");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(nm)) continue;
        n_tools++;
        if (!strcmp(nm->valuestring, out)) return;
        char ln[256];
        snprintf(ln, sizeof ln, "%s", nm->valuestring);
        for (char *c = ln; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        if (strstr(low, ln)) n_sub++, sub = nm->valuestring;
        const cJSON *r = get(get(f, "parameters"), "required");
        int all = cJSON_GetArraySize(r) > 0;
        cJSON_ArrayForEach(hit, r) all &= cJSON_IsString(hit) && get(args, hit->valuestring) != NULL;
        if (all) n_req++, req = nm->valuestring;
    }
    if (!n_tools) return;
    if (n_sub == 1) snprintf(out, cap, "%s", sub);
    else if (n_req == 1) snprintf(out, cap, "%s", req);
}

static char *kimi(const char *t, const char *end, const cJSON *tools, sink *k) {
    static const char S[] = "<|tool_calls_section_begin|>", B[] = "<|tool_call_begin|>",
                      A[] = "<|tool_call_argument_begin|>", E[] = "<|tool_call_end|>";
    const char *sec = pt_find(t, end, S);
    if (!sec) return pt_dup(t, (size_t)(end - t));
    for (const char *p = t, *b; (b = pt_find(p, end, B));) {
        const char *a = pt_find(b + sizeof B - 1, end, A), *e = a ? pt_find(a + sizeof A - 1, end, E) : NULL;
        if (!e) break; /* no argument-begin / end further on: no later call can match */
        p = e + sizeof E - 1;
        pt_span raw = pt_strip((pt_span){ b + sizeof B - 1, (size_t)(a - b - (sizeof B - 1)) });
        cJSON *args = pt_json_loads((pt_span){ a + sizeof A - 1, (size_t)(e - a - (sizeof A - 1)) });
        if (!cJSON_IsObject(args)) cJSON_Delete(args), args = cJSON_CreateObject();
        char name[256];
        kimi_name(raw, args, tools, name, sizeof name);
        if (!add_call(k, (pt_span){ name, strlen(name) }, args)) return NULL;
    }
    return pt_dup(t, (size_t)(sec - t));
}

/* ---- deepseek_v4: DSML markup, values raw (string="true") or JSON ---- */
#define DSML "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"
static int dsv4_invoke(pt_span blk, sink *k) {
    const char *end = blk.p + blk.n;
    for (const char *p = blk.p, *a; (a = pt_find(p, end, "<" DSML "invoke name=\""));) {
        const char *n0 = a + strlen("<" DSML "invoke name=\""), *ne = pt_find(n0, end, "\">");
        const char *b0 = ne ? ne + 2 : NULL, *be = b0 ? pt_find(b0, end, "</" DSML "invoke>") : NULL;
        if (!be) break;
        cJSON *args = cJSON_CreateObject();
        const char *PO = "<" DSML "parameter name=\"", *PC = "</" DSML "parameter>";
        for (const char *q = b0, *c; args && (c = pt_find(q, be, PO));) {
            const char *k0 = c + strlen(PO), *v0 = NULL, *ke = k0;
            int is_str = 0;
            for (; (ke = pt_find(ke, be, "\" string=\"")); ke++) { /* the name extends to a string="true|false"> */
                const char *s = ke + 10;
                if (pt_starts(s, be, "true\">")) { is_str = 1, v0 = s + 6; break; }
                if (pt_starts(s, be, "false\">")) { v0 = s + 7; break; }
            }
            const char *ve = v0 ? pt_find(v0, be, PC) : NULL;
            if (!ve) break; /* nothing further on can close a parameter */
            q = ve + strlen(PC);
            pt_span v = { v0, (size_t)(ve - v0) };
            cJSON *val = is_str ? NULL : pt_json_loads(v);
            if (!val) val = pt_str_of(v);
            char kb[256];
            snprintf(kb, sizeof kb, "%.*s", (int)(ke - k0), k0);
            cJSON_DeleteItemFromObjectCaseSensitive(args, kb);
            cJSON_AddItemToObject(args, kb, val);
        }
        if (!args || !add_call(k, (pt_span){ n0, (size_t)(ne - n0) }, args)) return 0;
        p = be + strlen("</" DSML "invoke>");
    }
    return 1;
}

/* text after the last "</think>" */
static pt_span dsv4_reasoning(pt_span s) {
    const char *last = NULL, *end = s.p + s.n;
    for (const char *p = s.p; (p = pt_find(p, end, "</think>")); p++) last = p;
    return last ? (pt_span){ last + 8, (size_t)(end - last - 8) } : s;
}

static char *deepseek_v4(const char *t, const char *end, sink *k) {
    const char *S = "<" DSML "tool_calls>", *C = "</" DSML "tool_calls>";
    const char *first = pt_find(t, end, S);
    if (!first) {
        pt_span s = dsv4_reasoning((pt_span){ t, (size_t)(end - t) });
        return pt_dup(s.p, s.n);
    }
    pt_span blk;
    for (const char *p = t; pt_next_block(p, end, S, C, &blk, &p);)
        if (!dsv4_invoke(blk, k)) return NULL;
    pt_span s = dsv4_reasoning((pt_span){ t, (size_t)(first - t) });
    if (s.n >= 2 && s.p[s.n - 1] == '\n' && s.p[s.n - 2] == '\n') s.n -= 2;
    return pt_dup(s.p, s.n);
}

/* ---- gemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,key2:bare}<tool_call|> ---- */
static int word(char c) {
    return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_' || (unsigned char)c >= 0x80;
}

static cJSON *gemma_bare(pt_span b) {
    pt_span v = pt_strip(b);
    double d;
    if (v.n == 4 && !strncasecmp(v.p, "true", 4)) return cJSON_CreateTrue();
    if (v.n == 5 && !strncasecmp(v.p, "false", 5)) return cJSON_CreateFalse();
    if (v.n == 4 && !strncasecmp(v.p, "null", 4)) return cJSON_CreateNull();
    if (pt_py_int(v, &d) || (pt_py_float(v, &d) && isfinite(d))) return cJSON_CreateNumber(d);
    return pt_str_of(v);
}

static cJSON *gemma_args(pt_span s) {
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
        pt_span key = { p, (size_t)(w - p) };
        const char *v = w + 1, *qe = pt_starts(v, end, Q) ? pt_find(v + 5, end, Q) : NULL;
        cJSON *val;
        if (qe) val = pt_str_of((pt_span){ v + 5, (size_t)(qe - v - 5) }), p = qe + 5;
        else {
            const char *e = v;
            while (e < end && *e != ',' && *e != '}') e++;
            val = gemma_bare((pt_span){ v, (size_t)(e - v) }), p = e;
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
    const char *first = pt_find(t, end, "<|tool_call>");
    int n = 0;
    for (const char *p = t, *a; first && (a = pt_find(p, end, O));) {
        const char *nm = a + sizeof O - 1, *ne = nm;
        while (ne < end && word(*ne)) ne++;
        if (!(ne > nm && ne < end && *ne == '{')) { /* not "call:NAME{": the search moves on */
            p = a + 1;
            continue;
        }
        const char *c = pt_find(ne + 1, end, C);
        if (!c) break; /* no closing further on: no later call can match */
        p = c + sizeof C - 1;
        cJSON *args = gemma_args((pt_span){ ne + 1, (size_t)(c - ne - 1) });
        if (!args || !add_call(k, (pt_span){ nm, (size_t)(ne - nm) }, args)) return NULL;
        n++;
    }
    return pt_dup(t, (size_t)((n ? first : end) - t));
}

/* ---- gpt-oss (harmony): analysis messages dropped, then the calls
 * <|start|>assistant<|channel|>[^<]* to=functions.NAME <|constrain|>json<|message|>ARGS<|call|> ---- */
#define OAI_OPEN "<|start|>assistant<|channel|>"
#define OAI_JSON "<|constrain|>json<|message|>"
#define OAI_TO " to=functions."

/* re.sub(open.*?close, "") (DOTALL) in place; the new length */
static size_t cut_blocks(char *t, size_t n, const char *open, const char *close) {
    const char *p = t, *end = t + n, *next;
    size_t w = 0;
    pt_span body;
    while (pt_next_block(p, end, open, close, &body, &next)) {
        size_t keep = (size_t)(body.p - strlen(open) - p);
        memmove(t + w, p, keep);
        w += keep;
        p = next;
    }
    memmove(t + w, p, (size_t)(end - p));
    w += (size_t)(end - p);
    t[w] = 0;
    return w;
}

/* the call pattern where OAI_OPEN is at a: its name, arguments and end; 0 when it does not match there, -1 when no
 * <|call|> follows (nor can any later match). The run after the channel tag holds no '<' and must end in " " before
 * OAI_JSON; [^<]* being greedy, the name follows the run's last OAI_TO that leaves it a character */
static int oai_call_at(const char *a, const char *end, pt_span *name, pt_span *args, const char **next) {
    const char *r = a + strlen(OAI_OPEN), *lt = r, *to = NULL;
    while (lt < end && *lt != '<') lt++;
    if (lt == r || lt[-1] != ' ' || !pt_starts(lt, end, OAI_JSON)) return 0;
    for (const char *q = r; (q = pt_find(q, lt, OAI_TO)); q++)
        if (q + strlen(OAI_TO) < lt - 1) to = q;
    if (!to) return 0;
    const char *s = lt + strlen(OAI_JSON), *c = pt_find(s, end, "<|call|>");
    if (!c) return -1;
    *name = (pt_span){ to + strlen(OAI_TO), (size_t)(lt - 1 - to - strlen(OAI_TO)) };
    *args = (pt_span){ s, (size_t)(c - s) };
    *next = c + strlen("<|call|>");
    return 1;
}

static char *gpt_oss(char *t, size_t n, sink *k) {
    n = cut_blocks(t, n, "<|start|>assistant<|channel|>analysis<|message|>", "<|end|>");
    n = cut_blocks(t, n, "<|channel|>analysis<|message|>", "<|end|>");
    const char *end = t + n, *p = t, *a, *next;
    char *content = malloc(n + 1);
    size_t w = 0;
    pt_span name, args;
    int m = 0;
    while (content && (a = pt_find(p, end, OAI_OPEN)) && (m = oai_call_at(a, end, &name, &args, &next)) >= 0) {
        if (!m) { /* no match here: the scan moves on */
            memcpy(content + w, p, (size_t)(a + 1 - p));
            w += (size_t)(a + 1 - p);
            p = a + 1;
            continue;
        }
        cJSON *js = pt_json_loads(args);
        if (!add_call(k, name, js ? js : pt_str_of(args))) return free(content), NULL;
        memcpy(content + w, p, (size_t)(a - p));
        w += (size_t)(a - p);
        p = next;
    }
    if (!content) return NULL;
    memcpy(content + w, p, (size_t)(end - p));
    content[w + (size_t)(end - p)] = 0;
    return content;
}

int rl_parse_tool_calls_as(int kind, const char *text, const char *pad, const cJSON *tools, rl_tool_call *calls,
                           int max, char **content) {
    sink k = { calls, 0, max };
    size_t n = strlen(text);
    char *t = pt_dup(text, n), *c = NULL;
    if (!t) return -1;
    if (kind == RL_TF_GEMMA4 || kind == RL_TF_DSV4 || kind == RL_TF_GPT_OSS) { /* verl removes the pad (and
                                                                                 * DeepSeek's EOS) token */
        const char *tok[2] = { pad, kind == RL_TF_DSV4 ? DSV4_EOS : NULL };
        n = pt_remove_all(t, n, tok, 2);
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
    case RL_TF_GPT_OSS: c = gpt_oss(t, n, &k); break;
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
