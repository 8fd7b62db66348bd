/* MCP's HTTP transports over libcurl: streamable HTTP (each message POSTed to the URL; the answer is the
 * body, as JSON or as server-sent events; the session id the server gives is sent back) and the older
 * HTTP+SSE one (a GET event stream whose `endpoint` event names where messages are POSTed; answers come back
 * on the stream). */
#define _GNU_SOURCE
#include "mcp.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef VC_HAVE_CURL
int rl_mcp_have_http(void) { return 0; }
vc_status rl_mcp_http_open(const char *url, const cJSON *headers, int sse, rl_mcp_http **out) {
    *out = NULL;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s: this verlc was built without libcurl (MCP over HTTP): install "
                   "libcurl4-openssl-dev and rebuild, or run the server over stdio (`command`)", url);
}
vc_status rl_mcp_http_post(rl_mcp_http *h, const char *body, long want_id, double deadline, cJSON **answer) {
    return vc_fail(VC_ERR_UNSUPPORTED, "MCP over HTTP: built without libcurl");
}
void rl_mcp_http_set_protocol(rl_mcp_http *h, const char *version) {}
void rl_mcp_http_close(rl_mcp_http *h) {}
#else
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>

struct rl_mcp_http {
    char *url, *endpoint, *session, *proto;
    cJSON *headers;
    int sse;
    CURLM *multi;
    CURL *stream; /* the SSE transport's GET */
    rl_sse ev;
    cJSON *inbox; /* messages from the stream not yet taken */
    int stream_done;
    char err[CURL_ERROR_SIZE];
};

int rl_mcp_have_http(void) { return 1; }

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static struct curl_slist *header_list(const rl_mcp_http *h, int post) {
    struct curl_slist *l = NULL;
    char b[1024];
    const cJSON *e;
    l = curl_slist_append(l, post ? "Accept: application/json, text/event-stream" : "Accept: text/event-stream");
    if (post) l = curl_slist_append(l, "Content-Type: application/json");
    if (h->session) { snprintf(b, sizeof b, "mcp-session-id: %s", h->session); l = curl_slist_append(l, b); }
    if (h->proto) { snprintf(b, sizeof b, "mcp-protocol-version: %s", h->proto); l = curl_slist_append(l, b); }
    cJSON_ArrayForEach(e, h->headers) if (cJSON_IsString(e)) {
        snprintf(b, sizeof b, "%s: %s", e->string, e->valuestring);
        l = curl_slist_append(l, b);
    }
    return l;
}

/* ---- events: an `endpoint` names the POST URL, `message`s are JSON-RPC messages ---- */
typedef struct { rl_mcp_http *h; cJSON *inbox; } ev_ctx;

static void on_event(void *ctx, const char *event, const char *data) {
    ev_ctx *c = ctx;
    if (!strcmp(event, "endpoint") && c->h && !c->h->endpoint) {
        CURLU *u = curl_url();
        char *abs = NULL;
        if (u && !curl_url_set(u, CURLUPART_URL, c->h->url, 0) && !curl_url_set(u, CURLUPART_URL, data, 0) &&
            !curl_url_get(u, CURLUPART_URL, &abs, 0)) {
            c->h->endpoint = vc_strdup(abs);
        }
        curl_free(abs);
        curl_url_cleanup(u);
    } else if (!strcmp(event, "message")) {
        cJSON *j = cJSON_Parse(data);
        if (cJSON_IsArray(j)) { /* a batch */
            cJSON *e;
            while ((e = cJSON_DetachItemFromArray(j, 0))) cJSON_AddItemToArray(c->inbox, e);
            cJSON_Delete(j);
        } else if (j) cJSON_AddItemToArray(c->inbox, j);
    }
}

static size_t stream_write(char *p, size_t sz, size_t n, void *ud) {
    rl_mcp_http *h = ud;
    ev_ctx c = { h, h->inbox };
    rl_sse_feed(&h->ev, p, sz * n, on_event, &c);
    return h->ev.oom ? 0 : sz * n;
}

/* The answer with id `want` taken out of a message list, or NULL. */
static cJSON *take_answer(cJSON *inbox, long want) {
    int i = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, inbox) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsNumber(id) && (long)id->valuedouble == want && !cJSON_GetObjectItemCaseSensitive(e, "method"))
            return cJSON_DetachItemFromArray(inbox, i);
        i++;
    }
    return NULL;
}

static int ms_left(double deadline) {
    double l = (deadline - vc_now()) * 1000.0;
    return l <= 0 ? 0 : (int)l + 1;
}

/* Drives the multi handle until `done` says so, the deadline passes, or a transfer fails. */
static vc_status pump(rl_mcp_http *h, CURL *post, int *post_done, long want, cJSON *inbox, double deadline,
                      cJSON **answer) {
    for (;;) {
        int running = 0, left;
        if (curl_multi_perform(h->multi, &running) != CURLM_OK) return vc_fail(VC_ERR_IO, "%s: curl failed", h->url);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(h->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            int bad = msg->data.result != CURLE_OK || code >= 400;
            if (msg->easy_handle == h->stream) {
                h->stream_done = 1;
                if (bad || !*answer) return vc_fail(VC_ERR_IO, "%s: the event stream ended (HTTP %ld%s%s)", h->url,
                                                    code, h->err[0] ? ": " : "", h->err);
            } else if (msg->easy_handle == post) {
                *post_done = 1;
                if (bad) return vc_fail(VC_ERR_IO, "%s: HTTP %ld%s%s", h->endpoint, code,
                                        msg->data.result ? ": " : "", msg->data.result ? curl_easy_strerror(msg->data.result) : "");
            }
        }
        if (want >= 0 && !*answer) *answer = take_answer(inbox, want);
        /* SSE: the answer comes on the stream once the POST is accepted; streamable HTTP: the POST's body is
         * the answer (an event stream the server may keep open once the answer is in) */
        if (h->sse ? *post_done && (want < 0 || *answer) : *post_done || *answer) return VC_OK;
        if (!ms_left(deadline)) return vc_fail(VC_ERR_TIMEOUT, "%s: no answer in time", h->url);
        if (h->sse && h->stream_done) return vc_fail(VC_ERR_IO, "%s: the event stream ended", h->url);
        int ms = ms_left(deadline);
        curl_multi_poll(h->multi, NULL, 0, ms < 100 ? ms : 100, NULL);
    }
}

static CURL *easy(rl_mcp_http *h, const char *url) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->err);
    return c;
}

/* ---- streamable HTTP: one POST per message ---- */
typedef struct { rl_mcp_http *h; vc_strbuf body; cJSON *inbox; int sse; } post_ctx;

static size_t post_header(char *p, size_t sz, size_t n, void *ud) {
    post_ctx *c = ud;
    size_t len = sz * n;
    static const char SID[] = "mcp-session-id:", CT[] = "content-type:";
    if (len > sizeof SID && !strncasecmp(p, SID, sizeof SID - 1) && !c->h->sse) {
        const char *v = p + sizeof SID - 1;
        size_t vl = len - (sizeof SID - 1);
        while (vl && (*v == ' ')) { v++; vl--; }
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ')) vl--;
        free(c->h->session);
        c->h->session = strndup(v, vl);
    }
    if (len > sizeof CT && !strncasecmp(p, CT, sizeof CT - 1)) c->sse = !!memmem(p, len, "text/event-stream", 17);
    return len;
}

static size_t post_write(char *p, size_t sz, size_t n, void *ud) {
    post_ctx *c = ud;
    if (c->sse) {
        ev_ctx e = { NULL, c->inbox };
        rl_sse_feed(&c->h->ev, p, sz * n, on_event, &e);
    } else vc_sb_putn(&c->body, p, sz * n);
    return sz * n;
}

vc_status rl_mcp_http_post(rl_mcp_http *h, const char *body, long want_id, double deadline, cJSON **answer) {
    *answer = NULL;
    post_ctx c = { .h = h, .inbox = h->sse ? h->inbox : cJSON_CreateArray() };
    const char *url = h->sse ? h->endpoint : h->url;
    CURL *e = easy(h, url);
    struct curl_slist *hl = header_list(h, 1);
    if (!e || !hl || !c.inbox) {
        if (e) curl_easy_cleanup(e);
        curl_slist_free_all(hl);
        if (!h->sse) cJSON_Delete(c.inbox);
        return VC_ERR_NOMEM;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    if (!h->sse) {
        rl_sse_free(&h->ev);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, post_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, &c);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, post_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &c);
    } else {
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, post_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &c);
        c.sse = 0; /* the POST's own body (202 Accepted, or nothing) is not the answer */
    }
    h->err[0] = 0;
    int done = 0;
    curl_multi_add_handle(h->multi, e);
    vc_status st = pump(h, e, &done, want_id, c.inbox, deadline, answer);
    curl_multi_remove_handle(h->multi, e);
    curl_easy_cleanup(e);
    curl_slist_free_all(hl);
    if (!st && !h->sse && want_id >= 0 && !*answer) { /* the body: JSON (one message or a batch) */
        cJSON *j = c.body.p ? cJSON_Parse(c.body.p) : NULL;
        if (cJSON_IsArray(j)) {
            cJSON *x;
            while ((x = cJSON_DetachItemFromArray(j, 0))) cJSON_AddItemToArray(c.inbox, x);
            cJSON_Delete(j);
        } else if (j) cJSON_AddItemToArray(c.inbox, j);
        *answer = take_answer(c.inbox, want_id);
        if (!*answer) st = vc_fail(VC_ERR_IO, "%s: the answer to request %ld is missing", h->url, want_id);
    }
    free(c.body.p);
    if (!h->sse) cJSON_Delete(c.inbox);
    return st;
}

vc_status rl_mcp_http_open(const char *url, const cJSON *headers, int sse, rl_mcp_http **out) {
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    rl_mcp_http *h = vc_calloc(1, sizeof *h);
    if (!h) return VC_ERR_NOMEM;
    h->url = vc_strdup(url);
    h->headers = headers ? cJSON_Duplicate(headers, 1) : cJSON_CreateObject();
    h->inbox = cJSON_CreateArray();
    h->multi = curl_multi_init();
    h->sse = sse;
    vc_status st = h->url && h->headers && h->inbox && h->multi ? VC_OK : VC_ERR_NOMEM;
    if (!st && sse) { /* open the stream and wait for its endpoint */
        struct curl_slist *hl = header_list(h, 0);
        h->stream = easy(h, url);
        if (!h->stream || !hl) st = VC_ERR_NOMEM;
        else {
            curl_easy_setopt(h->stream, CURLOPT_HTTPHEADER, hl);
            curl_easy_setopt(h->stream, CURLOPT_WRITEFUNCTION, stream_write);
            curl_easy_setopt(h->stream, CURLOPT_WRITEDATA, h);
            curl_easy_setopt(h->stream, CURLOPT_PRIVATE, hl);
            curl_multi_add_handle(h->multi, h->stream);
            double deadline = vc_now() + 30;
            while (!st && !h->endpoint) {
                int running = 0, left;
                curl_multi_perform(h->multi, &running);
                CURLMsg *m;
                while ((m = curl_multi_info_read(h->multi, &left)))
                    if (m->msg == CURLMSG_DONE) {
                        long code = 0;
                        curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
                        st = vc_fail(VC_ERR_IO, "%s: the event stream ended before its endpoint (HTTP %ld%s%s)", url,
                                     code, h->err[0] ? ": " : "", h->err);
                    }
                if (!st && !h->endpoint && !ms_left(deadline)) st = vc_fail(VC_ERR_TIMEOUT, "%s: no endpoint event", url);
                if (!st && !h->endpoint) curl_multi_poll(h->multi, NULL, 0, 100, NULL);
            }
        }
        if (!h->stream) curl_slist_free_all(hl);
    }
    if (st) {
        rl_mcp_http_close(h);
        return st;
    }
    *out = h;
    return VC_OK;
}

void rl_mcp_http_set_protocol(rl_mcp_http *h, const char *version) {
    free(h->proto);
    h->proto = vc_strdup(version);
}

void rl_mcp_http_close(rl_mcp_http *h) {
    if (!h) return;
    if (h->stream) {
        struct curl_slist *hl = NULL;
        curl_easy_getinfo(h->stream, CURLINFO_PRIVATE, (char **)&hl);
        curl_multi_remove_handle(h->multi, h->stream);
        curl_easy_cleanup(h->stream);
        curl_slist_free_all(hl);
    }
    if (h->session && !h->sse) { /* end the session, as the client does on close (best effort) */
        CURL *e = easy(h, h->url);
        struct curl_slist *hl = header_list(h, 0);
        if (e && hl) {
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2000L);
            curl_easy_perform(e);
        }
        if (e) curl_easy_cleanup(e);
        curl_slist_free_all(hl);
    }
    if (h->multi) curl_multi_cleanup(h->multi);
    rl_sse_free(&h->ev);
    cJSON_Delete(h->inbox);
    cJSON_Delete(h->headers);
    free(h->url);
    free(h->endpoint);
    free(h->session);
    free(h->proto);
    free(h);
}
#endif
