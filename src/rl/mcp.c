/* MCP client sessions (see mcp.h): initialize handshake, requests matched to answers by id, the stdio
 * transport (newline-delimited JSON-RPC on the server's stdin/stdout; its notifications and log lines are
 * skipped, its requests answered "method not found" except ping), and the server-sent-events parser. */
#include "mcp.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MCP_PROTOCOL "2025-06-18"

enum { MCP_STDIO, MCP_HTTP, MCP_SSE };

struct rl_mcp {
    char *name;
    cJSON *cfg;
    int kind, timeout_ms, ready;
    long next_id;
    double rate, tokens, last; /* verl's TokenBucket: calls per second */
    vc_reward_proc *proc;
    rl_mcp_http *http;
};

const char *rl_mcp_name(const rl_mcp *m) { return m->name; }

void rl_mcp_set_rate(rl_mcp *m, double per_second) {
    m->rate = m->tokens = per_second > 0 ? per_second : 0;
    m->last = vc_now();
}

/* waits for a token, as verl's call_tool does (0.1 s sleeps) */
static void rate_wait(rl_mcp *m) {
    if (!(m->rate > 0)) return;
    for (;;) {
        double now = vc_now();
        m->tokens = m->tokens + (now - m->last) * m->rate;
        if (m->tokens > m->rate) m->tokens = m->rate;
        m->last = now;
        if (m->tokens >= 1) {
            m->tokens -= 1;
            return;
        }
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

vc_status rl_mcp_new(const char *name, const cJSON *server, int timeout_ms, rl_mcp **out) {
    *out = NULL;
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(server, "url");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(server, "command");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(server, "transport");
    if (!cJSON_IsObject(server) || (!cJSON_IsString(url) && !cJSON_IsString(cmd)))
        return vc_fail(VC_ERR_FORMAT, "MCP server '%s' needs a `url` or a `command`", name);
    rl_mcp *m = vc_calloc(1, sizeof *m);
    if (!m) return VC_ERR_NOMEM;
    m->name = vc_strdup(name);
    m->cfg = cJSON_Duplicate(server, 1);
    m->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    m->next_id = 0;
    if (cJSON_IsString(cmd)) m->kind = MCP_STDIO;
    else {
        /* verl sends every server with an auth_token over SSE; fastmcp picks SSE for a URL ending in /sse */
        const char *u = url->valuestring;
        int sse = cJSON_GetObjectItemCaseSensitive(server, "auth_token") || ends_with(u, "/sse") || ends_with(u, "/sse/");
        if (cJSON_IsString(tr)) sse = !strcmp(tr->valuestring, "sse");
        m->kind = sse ? MCP_SSE : MCP_HTTP;
    }
    if (!m->name || !m->cfg) {
        rl_mcp_free(m);
        return VC_ERR_NOMEM;
    }
    *out = m;
    return VC_OK;
}

static void disconnect(rl_mcp *m) {
    if (m->proc) vc_reward_proc_close(m->proc);
    if (m->http) rl_mcp_http_close(m->http);
    m->proc = NULL;
    m->http = NULL;
    m->ready = 0;
}

void rl_mcp_free(rl_mcp *m) {
    if (!m) return;
    disconnect(m);
    cJSON_Delete(m->cfg);
    free(m->name);
    free(m);
}

/* argv for a stdio server: `env [-C cwd] [K=V ...] command args...` (env and cwd from the entry) */
static vc_status stdio_start(rl_mcp *m) {
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(m->cfg, "args");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(m->cfg, "env");
    const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(m->cfg, "cwd"), *e;
    int n = 4 + cJSON_GetArraySize(args) + cJSON_GetArraySize(env);
    char **argv = vc_calloc((size_t)n + 1, sizeof *argv);
    if (!argv) return VC_ERR_NOMEM;
    int k = 0, owned0;
    argv[k++] = "env";
    if (cJSON_IsString(cwd)) { argv[k++] = "-C"; argv[k++] = cwd->valuestring; }
    owned0 = k;
    vc_status st = VC_OK;
    cJSON_ArrayForEach(e, env) {
        if (!cJSON_IsString(e) || !e->string) { st = vc_fail(VC_ERR_FORMAT, "MCP server '%s': env values must be strings", m->name); break; }
        size_t l = strlen(e->string) + strlen(e->valuestring) + 2;
        if (!(argv[k] = vc_malloc(l))) { st = VC_ERR_NOMEM; break; }
        snprintf(argv[k++], l, "%s=%s", e->string, e->valuestring);
    }
    int owned1 = k;
    argv[k++] = cJSON_GetObjectItemCaseSensitive(m->cfg, "command")->valuestring;
    cJSON_ArrayForEach(e, args) {
        if (!cJSON_IsString(e)) { st = st ? st : vc_fail(VC_ERR_FORMAT, "MCP server '%s': args must be strings", m->name); break; }
        argv[k++] = e->valuestring;
    }
    if (!st) st = vc_reward_proc_start(argv, m->timeout_ms, &m->proc);
    for (int i = owned0; i < owned1; i++) free(argv[i]);
    free(argv);
    return st;
}

/* one message as a line to the server */
static vc_status stdio_send(rl_mcp *m, const char *body, double deadline) {
    size_t n = strlen(body);
    char *line = vc_malloc(n + 2);
    if (!line) return VC_ERR_NOMEM;
    memcpy(line, body, n);
    memcpy(line + n, "\n", 2);
    vc_status st = vc_reward_proc_send_line(m->proc, line, deadline);
    free(line);
    return st;
}

/* a request from the server (j has an id and a method): ping answered, anything else "method not found" */
static vc_status stdio_server_request(rl_mcp *m, const cJSON *j, double deadline) {
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id"), *meth = cJSON_GetObjectItemCaseSensitive(j, "method");
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    cJSON_AddItemToObject(r, "id", cJSON_Duplicate(jid, 1));
    if (!strcmp(meth->valuestring, "ping")) cJSON_AddObjectToObject(r, "result");
    else {
        cJSON *err = cJSON_AddObjectToObject(r, "error");
        cJSON_AddNumberToObject(err, "code", -32601);
        cJSON_AddStringToObject(err, "message", "Method not found");
    }
    char *s = vc_json_print(r, 0);
    vc_status st = s ? stdio_send(m, s, deadline) : VC_ERR_NOMEM;
    free(s);
    cJSON_Delete(r);
    return st;
}

/* the next answer line (an object with a numeric id and no method) into *answer; the server's requests are
 * answered, its notifications, log lines and anything else skipped */
static vc_status stdio_next_answer(rl_mcp *m, double deadline, cJSON **answer) {
    for (;;) {
        char *l = NULL;
        vc_status st = vc_reward_proc_read_line(m->proc, deadline, &l);
        if (st) return st;
        cJSON *j = cJSON_Parse(l);
        free(l);
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id"), *meth = cJSON_GetObjectItemCaseSensitive(j, "method");
        if (cJSON_IsNumber(jid) && !meth) {
            *answer = j;
            return VC_OK;
        }
        st = jid && cJSON_IsString(meth) ? stdio_server_request(m, j, deadline) : VC_OK;
        cJSON_Delete(j);
        if (st) return st;
    }
}

static long answer_id(const cJSON *ans) { return (long)cJSON_GetObjectItemCaseSensitive(ans, "id")->valuedouble; }

/* Writes one message and, for a request (id >= 0), reads lines until the answer with that id. */
static vc_status stdio_exchange(rl_mcp *m, const char *body, long id, double deadline, cJSON **answer) {
    vc_status st = stdio_send(m, body, deadline);
    while (!st && id >= 0) {
        cJSON *j = NULL;
        if ((st = stdio_next_answer(m, deadline, &j))) break;
        if (answer_id(j) == id) {
            *answer = j;
            return VC_OK;
        }
        cJSON_Delete(j); /* a stray answer */
    }
    return st;
}

/* n requests written together, their answers read in any order (each within the timeout of the one before); the
 * calls a failure leaves unanswered get it (status, err) */
static vc_status stdio_many(rl_mcp *m, int n, char *const *body, const long *id, cJSON **ans, vc_status *status,
                            char **err) {
    double deadline = vc_now() + m->timeout_ms / 1000.0;
    vc_status st = VC_OK;
    for (int i = 0; !st && i < n; i++) st = stdio_send(m, body[i], deadline);
    for (int left = n; !st && left;) {
        cJSON *j = NULL;
        if ((st = stdio_next_answer(m, deadline, &j))) break;
        int k = -1;
        for (int i = 0; i < n; i++)
            if (id[i] == answer_id(j) && !ans[i]) k = i;
        if (k < 0) { /* a stray answer */
            cJSON_Delete(j);
            continue;
        }
        ans[k] = j;
        left--;
        deadline = vc_now() + m->timeout_ms / 1000.0;
    }
    if (st == VC_ERR_NOMEM) return st;
    for (int i = 0; st && i < n; i++)
        if (!ans[i] && !(status[i] = st, err[i] = vc_strdup(vc_last_error()))) return VC_ERR_NOMEM;
    return VC_OK;
}

/* a request's JSON text (id < 0: a notification; params taken) */
static char *message(const char *method, long id, cJSON *params) {
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "jsonrpc", "2.0");
    if (id >= 0) cJSON_AddNumberToObject(req, "id", (double)id);
    cJSON_AddStringToObject(req, "method", method);
    if (params) cJSON_AddItemToObject(req, "params", params);
    char *body = vc_json_print(req, 0);
    cJSON_Delete(req);
    return body;
}

/* an answer's result object into *result; a JSON-RPC error (or no result) is VC_ERR_FORMAT with its message */
static vc_status answer_result(cJSON *ans, cJSON **result) {
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(ans, "error");
    cJSON *res = cJSON_DetachItemFromObjectCaseSensitive(ans, "result");
    vc_status st = VC_OK;
    if (err || !cJSON_IsObject(res)) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
        st = vc_fail(VC_ERR_FORMAT, "%s", cJSON_IsString(msg) ? msg->valuestring : "the answer has no result");
        cJSON_Delete(res);
        res = NULL;
    }
    *result = res;
    return st;
}

static vc_status exchange(rl_mcp *m, const char *method, cJSON *params, int notify, cJSON **result) {
    cJSON *ans = NULL;
    long id = notify ? -1 : m->next_id++;
    char *body = message(method, id, params);
    if (!body) return VC_ERR_NOMEM;
    double deadline = vc_now() + m->timeout_ms / 1000.0;
    vc_status st = m->kind == MCP_STDIO ? stdio_exchange(m, body, id, deadline, &ans)
                                        : rl_mcp_http_post(m->http, body, id, deadline, &ans);
    free(body);
    if (st) return vc_fail_ctx(st, "MCP server '%s': %s", m->name, method);
    if (notify) return VC_OK;
    st = answer_result(ans, result);
    cJSON_Delete(ans);
    return st;
}

/* Connects and runs the initialize handshake (protocol version, client info, initialized notification). */
static vc_status connect_session(rl_mcp *m) {
    vc_status st;
    if (m->kind == MCP_STDIO) st = stdio_start(m);
    else {
        const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(m->cfg, "headers");
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(m->cfg, "auth_token");
        cJSON *h = cJSON_IsObject(hdr) ? cJSON_Duplicate(hdr, 1) : cJSON_CreateObject();
        if (cJSON_IsString(tok)) {
            size_t l = strlen(tok->valuestring) + 8;
            char *b = vc_malloc(l);
            if (b) snprintf(b, l, "Bearer %s", tok->valuestring);
            if (b) cJSON_AddStringToObject(h, "Authorization", b);
            free(b);
        }
        st = rl_mcp_http_open(cJSON_GetObjectItemCaseSensitive(m->cfg, "url")->valuestring, h, m->kind == MCP_SSE, &m->http);
        cJSON_Delete(h);
    }
    if (st) return vc_fail_ctx(st, "MCP server '%s'", m->name);
    cJSON *p = cJSON_CreateObject(), *res = NULL;
    cJSON_AddStringToObject(p, "protocolVersion", MCP_PROTOCOL);
    cJSON_AddObjectToObject(p, "capabilities");
    cJSON *info = cJSON_AddObjectToObject(p, "clientInfo");
    cJSON_AddStringToObject(info, "name", "verlc");
    cJSON_AddStringToObject(info, "version", "1");
    st = exchange(m, "initialize", p, 0, &res);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(res, "protocolVersion");
    if (!st && m->http && cJSON_IsString(ver)) rl_mcp_http_set_protocol(m->http, ver->valuestring);
    cJSON_Delete(res);
    if (!st) st = exchange(m, "notifications/initialized", NULL, 1, NULL);
    if (st) disconnect(m);
    else m->ready = 1;
    return st;
}

static vc_status request(rl_mcp *m, const char *method, cJSON *params, cJSON **result) {
    vc_status st = m->ready ? VC_OK : connect_session(m);
    if (st) {
        cJSON_Delete(params);
        return st;
    }
    st = exchange(m, method, params, 0, result);
    if (st && st != VC_ERR_FORMAT) disconnect(m); /* a transport failure: a new session next time */
    return st;
}

vc_status rl_mcp_list_tools(rl_mcp *m, cJSON **tools) {
    *tools = cJSON_CreateArray();
    if (!*tools) return VC_ERR_NOMEM;
    char *cursor = NULL;
    vc_status st = VC_OK;
    for (int page = 0; !st && page < 1000; page++) {
        cJSON *p = NULL, *res = NULL, *e;
        if (cursor) {
            p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "cursor", cursor);
        }
        free(cursor);
        cursor = NULL;
        if ((st = request(m, "tools/list", p, &res))) break;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(res, "tools"), *next = cJSON_GetObjectItemCaseSensitive(res, "nextCursor");
        cJSON_ArrayForEach(e, list) cJSON_AddItemToArray(*tools, cJSON_Duplicate(e, 1));
        if (cJSON_IsString(next) && *next->valuestring) cursor = vc_strdup(next->valuestring);
        cJSON_Delete(res);
        if (!cursor) break;
    }
    free(cursor);
    if (st) {
        cJSON_Delete(*tools);
        *tools = NULL;
    }
    return st;
}

/* how many of `want` calls may start now under the rate limit (waiting for the first: verl's token per call) */
static int rate_take(rl_mcp *m, int want) {
    if (!(m->rate > 0)) return want;
    rate_wait(m);
    int k = 1;
    for (; k < want && m->tokens >= 1; k++) m->tokens -= 1;
    return k;
}

static cJSON *call_params(const char *tool, const cJSON *args) {
    cJSON *p = cJSON_CreateObject();
    if (!p) return NULL;
    cJSON_AddStringToObject(p, "name", tool);
    cJSON_AddItemToObject(p, "arguments", args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject());
    return p;
}

/* calls [0, n) at once on a session that is up: outcomes in result / status / err */
static vc_status call_batch(rl_mcp *m, int n, const char *const *tool, const cJSON *const *args, cJSON **result,
                            vc_status *status, char **err) {
    char **body = vc_calloc((size_t)n + 1, sizeof *body);
    long *id = vc_calloc((size_t)n + 1, sizeof *id);
    cJSON **ans = vc_calloc((size_t)n + 1, sizeof *ans);
    vc_status st = body && id && ans ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        cJSON *p = call_params(tool[i], args[i]);
        id[i] = m->next_id++;
        if (!p || !(body[i] = message("tools/call", id[i], p))) st = VC_ERR_NOMEM;
    }
    if (!st)
        st = m->kind == MCP_STDIO ? stdio_many(m, n, body, id, ans, status, err)
                                  : rl_mcp_http_post_many(m->http, n, (const char *const *)body, id, m->timeout_ms / 1000.0,
                                                          ans, status, err);
    int broken = 0;
    for (int i = 0; !st && i < n; i++) {
        if (status[i]) { /* the transport failed it: named as exchange names it */
            char *e = err[i];
            vc_fail(status[i], "MCP server '%s': tools/call: %s", m->name, e ? e : "failed");
            free(e);
            err[i] = vc_strdup(vc_last_error());
            broken = 1;
        } else if ((status[i] = answer_result(ans[i], &result[i])))
            err[i] = vc_strdup(vc_last_error());
    }
    if (broken) disconnect(m); /* a new session next time */
    for (int i = 0; i < n; i++) {
        if (body) free(body[i]);
        if (ans) cJSON_Delete(ans[i]);
    }
    free(body), free(id), free(ans);
    return st;
}

vc_status rl_mcp_call_tools(rl_mcp *m, int n, const char *const *tool, const cJSON *const *args, cJSON **result,
                            vc_status *status, char **err) {
    for (int i = 0; i < n; i++) result[i] = NULL, status[i] = VC_OK, err[i] = NULL;
    vc_status st = VC_OK;
    for (int at = 0; !st && at < n;) {
        int k = rate_take(m, n - at);
        vc_status up = m->ready ? VC_OK : connect_session(m);
        if (up == VC_ERR_NOMEM) return up;
        for (int i = at; up && i < at + k; i++)
            if ((status[i] = up) && !(err[i] = vc_strdup(vc_last_error()))) return VC_ERR_NOMEM;
        if (!up) st = call_batch(m, k, tool + at, args + at, result + at, status + at, err + at);
        at += k;
    }
    return st;
}

vc_status rl_mcp_call_tool(rl_mcp *m, const char *tool, const cJSON *args, cJSON **result) {
    rate_wait(m);
    cJSON *p = cJSON_CreateObject();
    if (!p) return VC_ERR_NOMEM;
    cJSON_AddStringToObject(p, "name", tool);
    cJSON_AddItemToObject(p, "arguments", args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject());
    return request(m, "tools/call", p, result);
}

/* ---- server-sent events ---- */
static int grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void sse_line(rl_sse *s, char *line, rl_sse_fn fn, void *ctx) {
    if (!*line) { /* end of an event */
        if (s->dn) {
            s->data[s->dn - 1] = 0; /* the last line's '\n' */
            fn(ctx, s->event ? s->event : "message", s->data);
        }
        s->dn = 0;
        free(s->event);
        s->event = NULL;
        return;
    }
    if (*line == ':') return; /* a comment */
    char *val = strchr(line, ':');
    if (val) {
        *val++ = 0;
        if (*val == ' ') val++;
    } else val = line + strlen(line);
    if (!strcmp(line, "data")) {
        size_t l = strlen(val);
        if (grow(&s->data, &s->dcap, s->dn + l + 2)) { s->oom = 1; return; }
        memcpy(s->data + s->dn, val, l);
        s->dn += l;
        s->data[s->dn++] = '\n';
        s->data[s->dn] = 0;
    } else if (!strcmp(line, "event")) {
        free(s->event);
        s->event = vc_strdup(val);
    }
}

void rl_sse_feed(rl_sse *s, const char *bytes, size_t n, rl_sse_fn fn, void *ctx) {
    if (grow(&s->buf, &s->cap, s->n + n + 1)) { s->oom = 1; return; }
    memcpy(s->buf + s->n, bytes, n);
    s->n += n;
    size_t start = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->buf[i] != '\n' && s->buf[i] != '\r') continue;
        int crlf = s->buf[i] == '\r' && i + 1 < s->n && s->buf[i + 1] == '\n';
        if (s->buf[i] == '\r' && i + 1 == s->n) break; /* a '\r' that may be half of "\r\n" */
        s->buf[i] = 0;
        sse_line(s, s->buf + start, fn, ctx);
        i += (size_t)crlf;
        start = i + 1;
    }
    memmove(s->buf, s->buf + start, s->n - start);
    s->n -= start;
}

void rl_sse_free(rl_sse *s) {
    free(s->buf);
    free(s->data);
    free(s->event);
    memset(s, 0, sizeof *s);
}
