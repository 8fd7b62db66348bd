/* verl's SearchTool (verl/tools/search_tool.py and tools/utils/search_r1_like_utils.py at b178a3cd, the Search-R1
 * example's tool): the call's query_list POSTed to a retrieval service as {"queries", "topk", "return_scores": true}
 * (500/502/503/504, connection failures and time-outs retried up to 10 tries, after 1, 2, ... s), the answer's
 * passages laid out as verl lays them out ("Doc 1 (Title: ...)\ntext", queries joined by "\n---\n"), all as
 * json.dumps({"result": ...}, ensure_ascii=False). A turn's calls of every response are sent together. */
#include "agent_internal.h"
#include "verlc/json.h"
#include "http_batch.h"
#include "py_text.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* json.dumps({"result": text}, ensure_ascii=False): Python's separators, cJSON's escapes (the same for text) */
static char *result_json(const char *text) {
    cJSON *s = cJSON_CreateString(text);
    char *q = s ? vc_json_print(s, 0) : NULL, *out = NULL;
    cJSON_Delete(s);
    if (q && (out = vc_malloc(strlen(q) + 16))) sprintf(out, "{\"result\": %s}", q);
    free(q);
    return out;
}

typedef pt_buf buf_t;
static void put(buf_t *b, const char *s, size_t k) { pt_buf_put(b, s, k); }
static void puts_(buf_t *b, const char *s) { pt_buf_put(b, s, strlen(s)); }

/* _passages2string of one query's passages; 0 when a passage is not {"document": {"contents": str}}, with the
 * KeyError's text in *why (verl: "Error processing search results: 'document'") */
static int passages(buf_t *b, const cJSON *list, const char **why) {
    buf_t one = { 0 };
    int idx = 0, ok = 1;
    for (const cJSON *d = cJSON_IsArray(list) ? list->child : NULL; ok && d; d = d->next) {
        const cJSON *doc = cJSON_GetObjectItemCaseSensitive(d, "document");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(doc, "contents");
        if (!cJSON_IsString(c)) {
            *why = !cJSON_IsObject(d) || !doc ? "'document'" : !c ? "'contents'" : "a passage's contents are not text";
            ok = 0;
            break;
        }
        const char *nl = strchr(c->valuestring, '\n');
        char head[64];
        snprintf(head, sizeof head, "Doc %d (Title: ", ++idx);
        puts_(&one, head);
        put(&one, c->valuestring, nl ? (size_t)(nl - c->valuestring) : strlen(c->valuestring));
        puts_(&one, ")\n");
        if (nl) puts_(&one, nl + 1);
        puts_(&one, "\n\n");
    }
    if (ok && !cJSON_IsArray(list)) ok = 0;
    if (ok && one.s) { /* .strip() */
        pt_span t = pt_strip((pt_span){ one.s, one.n });
        put(b, t.p, t.n);
    }
    free(one.s);
    return ok && !one.nomem;
}

static const char *reason(long code) { /* the standard reason phrases (requests prints the server's) */
    static const struct { long c; const char *r; } R[] = {
        { 400, "Bad Request" }, { 401, "Unauthorized" }, { 403, "Forbidden" }, { 404, "Not Found" },
        { 405, "Method Not Allowed" }, { 408, "Request Timeout" }, { 413, "Payload Too Large" },
        { 422, "Unprocessable Entity" }, { 429, "Too Many Requests" }, { 501, "Not Implemented" },
        { 505, "HTTP Version Not Supported" } };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++)
        if (R[i].c == code) return R[i].r;
    return "";
}

/* Python's type name of a JSON value, for AttributeError texts */
static const char *py_type(const cJSON *v) {
    return cJSON_IsArray(v) ? "list" : cJSON_IsString(v) ? "str" : cJSON_IsBool(v) ? "bool" : cJSON_IsNumber(v) ?
           (v->valuedouble == (double)(long long)v->valuedouble ? "int" : "float") : "NoneType";
}

/* the text verl's tool gives for one request's outcome */
static char *search_text(const vc_http_req *r, const char *url) {
    char msg[900];
    if (!(r->code >= 200 && r->code < 300)) { /* after the retries: verl's "Search error: API Call Failed: ..." */
        if (r->code == 500 || r->code == 502 || r->code == 503 || r->code == 504)
            snprintf(msg, sizeof msg, "Search error: API Call Failed: API Request Error: Server Error (%ld) on attempt "
                     "10/10", r->code);
        else if (r->code)
            snprintf(msg, sizeof msg, "Search error: API Call Failed: API Request Error: %ld %s Error: %s for url: %s",
                     r->code, r->code < 500 ? "Client" : "Server", reason(r->code), url);
        else
            snprintf(msg, sizeof msg, "Search error: API Call Failed: %s Error: %s", r->timed_out ? "Timeout" : "Connection",
                     r->err);
        return result_json(msg);
    }
    cJSON *ans = r->resp ? cJSON_Parse(r->resp) : NULL;
    if (!ans) {
        snprintf(msg, sizeof msg, "Search error: API Call Failed: API Response JSON Decode Error: not JSON, Response: "
                 "%.200s", r->resp ? r->resp : "");
        return result_json(msg);
    }
    const cJSON *res = cJSON_IsObject(ans) ? cJSON_GetObjectItemCaseSensitive(ans, "result") : NULL;
    char *out = NULL;
    int truthy = (cJSON_IsArray(ans) || cJSON_IsObject(ans)) ? ans->child != NULL
                 : cJSON_IsString(ans) ? *ans->valuestring != 0 : cJSON_IsNumber(ans) ? ans->valuedouble != 0
                 : cJSON_IsTrue(ans);
    if (!truthy) /* `elif api_response:` */
        out = result_json("Unknown API state (no response and no error message).");
    else if (!cJSON_IsObject(ans)) { /* api_response.get raises */
        snprintf(msg, sizeof msg, "Error processing search results: '%s' object has no attribute 'get'", py_type(ans));
        out = result_json(msg);
    }
    else if (!res || cJSON_IsNull(res) || ((cJSON_IsArray(res) || cJSON_IsObject(res)) && !res->child) ||
             (cJSON_IsString(res) && !*res->valuestring) || cJSON_IsFalse(res) ||
             (cJSON_IsNumber(res) && res->valuedouble == 0))
        out = result_json("No search results found.");
    else {
        buf_t b = { 0 };
        const char *why = "the results are not a list";
        int ok = cJSON_IsArray(res), first = 1;
        for (const cJSON *q = ok ? res->child : NULL; ok && q; q = q->next, first = 0) {
            if (!first) puts_(&b, "\n---\n");
            ok = passages(&b, q, &why);
        }
        snprintf(msg, sizeof msg, "Error processing search results: %s", why);
        out = b.nomem ? NULL : result_json(ok ? (b.s ? b.s : "") : msg);
        free(b.s);
    }
    cJSON_Delete(ans);
    return out;
}

/* the request of one call, or (NULL with *text set) verl's answer without one */
static char *search_body(const rl_tool *tool, const cJSON *args, char **text) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(args, "query_list");
    *text = NULL;
    if (!cJSON_IsArray(q) || !q->child) { /* missing, empty or not a list */
        *text = result_json("Error: 'query_list' is missing, empty, or not a list in parameters.");
        return NULL;
    }
    cJSON *req = cJSON_CreateObject();
    char *body = NULL;
    if (req && cJSON_AddItemToObject(req, "queries", cJSON_Duplicate(q, 1)) &&
        cJSON_AddNumberToObject(req, "topk", tool->topk) && cJSON_AddTrueToObject(req, "return_scores"))
        body = vc_json_print(req, 0);
    cJSON_Delete(req);
    return body;
}

vc_status rl_search_tool_many(const rl_tool *tool, const cJSON *const *args, int n, char **text) {
    static const long RETRY[] = { 500, 502, 503, 504 };
    vc_http_policy pol = { .max_in_flight = tool->concurrency, .max_attempts = 10, .retry_delay = tool->retry_delay,
                           .retry_codes = RETRY, .n_retry_codes = 4, .retry_transport = 1 };
    vc_http_req *r = vc_calloc((size_t)n + 1, sizeof *r);
    int *at = vc_malloc(sizeof(int) * (size_t)(n + 1)), nr = 0;
    vc_status st = r && at ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        at[i] = -1;
        char *body = search_body(tool, args[i], &text[i]);
        if (body) r[nr] = (vc_http_req){ .body = body, .timeout_s = tool->default_timeout }, at[i] = nr++;
        else if (!text[i]) st = VC_ERR_NOMEM;
    }
    if (!st && nr) st = vc_http_post_many(tool->command, r, nr, &pol);
    for (int i = 0; !st && i < n; i++)
        if (at[i] >= 0 && !(text[i] = search_text(&r[at[i]], tool->command))) st = VC_ERR_NOMEM;
    for (int i = 0; st && i < n; i++) free(text[i]), text[i] = NULL;
    for (int k = 0; r && k < nr; k++) free((char *)r[k].body);
    vc_http_reqs_free(r, nr);
    free(r), free(at);
    return st;
}
