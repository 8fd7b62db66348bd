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
vc_status rl_mcp_http_post_many(rl_mcp_http *h, int n, const char *const *body, const long *id, double wait,
                                cJSON **answer, vc_status *status, char **err) {
    return vc_fail(VC_ERR_UNSUPPORTED, "MCP over HTTP: built without libcurl");
}
void rl_mcp_http_set_protocol(rl_mcp_http *h, const char *version) {}
void rl_mcp_http_close(rl_mcp_http *h) {}
#else
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
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

static CURL *easy(rl_mcp_http *h, const char *url, char *errbuf) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf ? errbuf : h->err);
    return c;
}

/* ---- POSTs, any number in flight: streamable HTTP answers in each POST's body (JSON, or events); HTTP+SSE
 * accepts them (202) and answers on the stream ---- */
typedef struct {
    rl_mcp_http *h;
    CURL *e;
    struct curl_slist *hl;
    vc_strbuf body;
    rl_sse ev;     /* the body's events (streamable HTTP) */
    int sse, done; /* the body is an event stream; the transfer finished */
    char err[CURL_ERROR_SIZE];
} post_ctx;

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
    if (c->h->sse) return sz * n; /* the POST's own body (202 Accepted, or nothing) is not the answer */
    if (c->sse) {
        ev_ctx e = { NULL, c->h->inbox };
        rl_sse_feed(&c->ev, p, sz * n, on_event, &e);
    } else vc_sb_putn(&c->body, p, sz * n);
    return sz * n;
}

static vc_status post_start(rl_mcp_http *h, post_ctx *c, const char *body) {
    c->h = h;
    c->e = easy(h, h->sse ? h->endpoint : h->url, c->err);
    c->hl = header_list(h, 1);
    if (!c->e || !c->hl) return VC_ERR_NOMEM;
    curl_easy_setopt(c->e, CURLOPT_HTTPHEADER, c->hl);
    curl_easy_setopt(c->e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->e, CURLOPT_HEADERFUNCTION, post_header);
    curl_easy_setopt(c->e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->e, CURLOPT_WRITEFUNCTION, post_write);
    curl_easy_setopt(c->e, CURLOPT_WRITEDATA, c);
    return curl_multi_add_handle(h->multi, c->e) == CURLM_OK ? VC_OK : VC_ERR_IO;
}

static void post_end(post_ctx *c) {
    if (c->e) {
        curl_multi_remove_handle(c->h->multi, c->e);
        curl_easy_cleanup(c->e);
    }
    curl_slist_free_all(c->hl);
    free(c->body.p);
    rl_sse_free(&c->ev);
}

/* the calls' outcomes: answer[i], or status[i] with err[i]; left counts the unsettled; progress moves the deadline */
typedef struct {
    int n, left;
    cJSON **answer;
    vc_status *status;
    char **err;
    char *settled;
    double wait, deadline;
} post_set;

static void settle(post_set *s, int i, vc_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void settle(post_set *s, int i, vc_status st, const char *fmt, ...) {
    if (s->settled[i]) return;
    s->settled[i] = 1;
    s->left--;
    s->status[i] = st;
    s->deadline = vc_now() + s->wait;
    if (!st) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->err[i] = vc_strdup(msg);
}

/* call i's answer, if it is in: from the inbox, or (streamable HTTP, once the POST is done) its JSON body */
static void collect(rl_mcp_http *h, post_ctx *c, const long *id, post_set *s, int i) {
    if (id[i] < 0) { /* a notification: no answer */
        if (c->done) settle(s, i, VC_OK, " ");
        return;
    }
    if (!s->answer[i]) s->answer[i] = take_answer(h->inbox, id[i]);
    if (!s->answer[i] && !h->sse && c->done) {
        cJSON *j = c->body.p ? cJSON_Parse(c->body.p) : NULL, *x;
        if (cJSON_IsArray(j)) {
            while ((x = cJSON_DetachItemFromArray(j, 0))) cJSON_AddItemToArray(h->inbox, x);
            cJSON_Delete(j);
        } else if (j) cJSON_AddItemToArray(h->inbox, j);
        if (!(s->answer[i] = take_answer(h->inbox, id[i])))
            settle(s, i, VC_ERR_IO, "%s: the answer to request %ld is missing", h->url, id[i]);
    }
    /* SSE: the answer comes on the stream once the POST is accepted; streamable HTTP: the POST's body is the answer
     * (an event stream the server may keep open once the answer is in) */
    if (s->answer[i] && (!h->sse || c->done)) settle(s, i, VC_OK, " ");
}

/* one pass over the multi handle's finished transfers: the POSTs' failures, the stream's end (*ended) */
static vc_status transfers(rl_mcp_http *h, post_ctx *c, post_set *s, int *ended) {
    int running = 0, left;
    if (curl_multi_perform(h->multi, &running) != CURLM_OK) return vc_fail(VC_ERR_IO, "%s: curl failed", h->url);
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(h->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        long code = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
        int bad = msg->data.result != CURLE_OK || code >= 400;
        if (msg->easy_handle == h->stream) {
            h->stream_done = *ended = 1;
            continue;
        }
        for (int i = 0; i < s->n; i++) {
            if (msg->easy_handle != c[i].e) continue;
            c[i].done = 1;
            if (bad)
                settle(s, i, VC_ERR_IO, "%s: HTTP %ld%s%s", h->sse ? h->endpoint : h->url, code,
                       msg->data.result ? ": " : "", msg->data.result ? curl_easy_strerror(msg->data.result) : "");
        }
    }
    return VC_OK;
}

vc_status rl_mcp_http_post_many(rl_mcp_http *h, int n, const char *const *body, const long *id, double wait,
                                cJSON **answer, vc_status *status, char **err) {
    post_ctx *c = vc_calloc((size_t)n + 1, sizeof *c);
    char *settled = vc_calloc((size_t)n + 1, 1);
    post_set s = { n, n, answer, status, err, settled, wait, vc_now() + wait };
    for (int i = 0; i < n; i++) answer[i] = NULL, status[i] = VC_OK, err[i] = NULL;
    vc_status st = c && settled ? VC_OK : VC_ERR_NOMEM;
    h->err[0] = 0;
    for (int i = 0; !st && i < n; i++) st = post_start(h, &c[i], body[i]);
    while (!st && s.left) {
        int ended = 0;
        if (transfers(h, c, &s, &ended)) { /* curl itself failed: every call still waiting gets it */
            char why[512];
            snprintf(why, sizeof why, "%s", vc_last_error());
            for (int i = 0; i < n; i++) settle(&s, i, VC_ERR_IO, "%s", why);
            break;
        }
        for (int i = 0; i < n; i++)
            if (!settled[i]) collect(h, &c[i], id, &s, i);
        for (int i = 0; (ended || (h->sse && h->stream_done)) && i < n; i++)
            settle(&s, i, VC_ERR_IO, "%s: the event stream ended%s%s", h->url, h->err[0] ? ": " : "", h->err);
        for (int i = 0; s.left && !ms_left(s.deadline) && i < n; i++)
            settle(&s, i, VC_ERR_TIMEOUT, "%s: no answer in time", h->url);
        int ms = ms_left(s.deadline);
        if (s.left) curl_multi_poll(h->multi, NULL, 0, ms < 100 ? ms : 100, NULL);
    }
    for (int i = 0; c && i < n; i++) post_end(&c[i]);
    if (st) /* no call's outcome stands */
        for (int i = 0; i < n; i++) cJSON_Delete(answer[i]), answer[i] = NULL, free(err[i]), err[i] = NULL;
    cJSON *x; /* what no call took (notifications, late answers) */
    while (h->inbox && (x = cJSON_DetachItemFromArray(h->inbox, 0))) cJSON_Delete(x);
    free(c);
    free(settled);
    return st;
}

vc_status rl_mcp_http_post(rl_mcp_http *h, const char *body, long want_id, double deadline, cJSON **answer) {
    vc_status one = VC_OK;
    char *err = NULL;
    vc_status st = rl_mcp_http_post_many(h, 1, &body, &want_id, deadline - vc_now(), answer, &one, &err);
    if (!st && one) st = vc_fail(one, "%s", err ? err : "MCP over HTTP failed");
    free(err);
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
        h->stream = easy(h, url, NULL);
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
        CURL *e = easy(h, h->url, NULL);
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
