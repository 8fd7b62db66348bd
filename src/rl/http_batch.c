/* JSON POSTs to one URL, many in flight at once (curl's multi interface), each retried by the policy after a growing
 * delay. */
#include "http_batch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vc_http_reqs_free(vc_http_req *r, int n) {
    for (int i = 0; r && i < n; i++) free(r[i].resp), r[i].resp = NULL;
}

#ifndef VC_HAVE_CURL
int vc_http_available(void) { return 0; }
vc_status vc_http_post_many(const char *url, vc_http_req *r, int n, const vc_http_policy *p) {
    (void)r, (void)n, (void)p;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s: this verlc was built without libcurl: install libcurl4-openssl-dev and "
                   "rebuild", url);
}
#else
#include <curl/curl.h>
#include <pthread.h>

int vc_http_available(void) { return 1; }

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct {
    CURL *h;
    int job;
    char *buf;
    size_t n, cap;
    char err[CURL_ERROR_SIZE];
} slot;

static size_t on_data(char *p, size_t size, size_t nm, void *ud) {
    slot *s = ud;
    size_t k = size * nm;
    if (s->n + k + 1 > s->cap) {
        size_t cap = (s->n + k + 1) * 2;
        char *b = realloc(s->buf, cap);
        if (!b) return 0;
        s->buf = b, s->cap = cap;
    }
    memcpy(s->buf + s->n, p, k);
    s->n += k;
    s->buf[s->n] = 0;
    return k;
}

static vc_status start(CURLM *m, const char *url, struct curl_slist *hdr, vc_http_req *r, int job, slot *s) {
    memset(s, 0, sizeof *s);
    s->job = job;
    if (!(s->h = curl_easy_init())) return vc_fail(VC_ERR_NOMEM, "%s: curl_easy_init", url);
    curl_easy_setopt(s->h, CURLOPT_URL, url);
    curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, r[job].body);
    curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(s->h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->h, CURLOPT_ERRORBUFFER, s->err);
    curl_easy_setopt(s->h, CURLOPT_TIMEOUT_MS, (long)(1000 * (r[job].timeout_s > 0 ? r[job].timeout_s : 30)));
    curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
    curl_multi_add_handle(m, s->h);
    return VC_OK;
}

/* a finished attempt: kept as the request's answer, or (1) to be tried again after its delay */
static int finish(const vc_http_policy *p, vc_http_req *r, slot *s, CURLcode res) {
    long code = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
    int retry = 0;
    if (res != CURLE_OK) retry = p->retry_transport;
    for (int k = 0; res == CURLE_OK && k < p->n_retry_codes; k++) retry |= code == p->retry_codes[k];
    r->attempt++;
    free(r->resp);
    r->resp = NULL;
    r->code = res == CURLE_OK ? code : 0;
    r->timed_out = res == CURLE_OPERATION_TIMEDOUT;
    if (res != CURLE_OK) snprintf(r->err, sizeof r->err, "%s", *s->err ? s->err : curl_easy_strerror(res));
    else if (s->buf) r->resp = s->buf, s->buf = NULL;
    if (retry && r->attempt < p->max_attempts) {
        r->not_before = vc_now() + p->retry_delay * r->attempt;
        return 1;
    }
    return 0;
}

vc_status vc_http_post_many(const char *url, vc_http_req *r, int n, const vc_http_policy *p) {
    pthread_once(&curl_once, curl_init);
    int cap = p->max_in_flight > 0 ? p->max_in_flight : 64, *queue = vc_malloc(sizeof(int) * (size_t)(n + 1));
    slot *slots = vc_calloc((size_t)cap, sizeof *slots);
    CURLM *m = curl_multi_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = hdr ? curl_slist_append(hdr, "Accept: application/json") : NULL;
    vc_status st = queue && slots && m && hdr ? VC_OK : VC_ERR_NOMEM;
    int qn = n, active = 0, done = 0;
    for (int i = 0; i < n; i++) queue[i] = i, r[i].attempt = 0, r[i].not_before = 0, r[i].code = 0, r[i].err[0] = 0;
    double last = vc_now();
    while (!st && done < n) {
        for (int k = 0; !st && k < cap && qn > 0; k++) { /* free slots take the requests whose time has come */
            if (slots[k].h) continue;
            int pick = -1;
            double now = vc_now();
            for (int q = 0; q < qn && pick < 0; q++)
                if (r[queue[q]].not_before <= now) pick = q;
            if (pick < 0) break;
            int job = queue[pick];
            queue[pick] = queue[--qn];
            if (!(st = start(m, url, hdr, r, job, &slots[k]))) active++;
        }
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE) {
                slot *s = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
                if (finish(p, &r[s->job], s, msg->data.result)) queue[qn++] = s->job;
                else done++;
                curl_multi_remove_handle(m, s->h);
                curl_easy_cleanup(s->h);
                free(s->buf);
                memset(s, 0, sizeof *s);
                active--;
            }
        if (done < n) curl_multi_poll(m, NULL, 0, active ? 50 : 20, NULL);
        if (vc_now() - last > 30) { /* long work shows progress */
            fprintf(stderr, "%s: %d of %d requests answered\n", url, done, n);
            last = vc_now();
        }
    }
    for (int k = 0; slots && k < cap; k++)
        if (slots[k].h) {
            curl_multi_remove_handle(m, slots[k].h);
            curl_easy_cleanup(slots[k].h);
            free(slots[k].buf);
        }
    if (m) curl_multi_cleanup(m);
    curl_slist_free_all(hdr);
    free(slots), free(queue);
    return st;
}
#endif
