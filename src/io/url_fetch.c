/* http(s) URLs of images and videos through libcurl's easy interface: one transfer per call (redirects followed, an
 * error status refused as requests' raise_for_status refuses it, a stalled transfer abandoned), images' bodies kept in
 * a small least-recently-used cache. */
#include "io/url_fetch.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int vc_url_is_http(const char *s) { return s && (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8)); }

#ifndef VC_HAVE_CURL
static vc_status no_curl(const char *url, const char *what) {
    return vc_fail(VC_ERR_UNSUPPORTED, "%s: %.200s: this verlc was built without libcurl, which fetches http(s) URLs: "
                   "install libcurl4-openssl-dev and rebuild", what, url);
}
vc_status vc_url_fetch(const char *url, const char *what, uint8_t **buf, size_t *n) {
    *buf = NULL, *n = 0;
    return no_curl(url, what);
}
vc_status vc_url_fetch_file(const char *url, const char *what, char **path) {
    *path = NULL;
    return no_curl(url, what);
}
int64_t vc_url_fetches(int clear_cache) {
    (void)clear_cache;
    return 0;
}
#else
#include <curl/curl.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- the cache: entries most recently used first ---- */
typedef struct entry {
    char *url;
    uint8_t *buf;
    size_t n;
    struct entry *next;
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *head;
static int64_t held, transfers;

static void entry_free(entry *e) {
    free(e->url), free(e->buf), free(e);
}

/* a copy of url's cached body (moved to the front), 0 when not cached */
static int cache_get(const char *url, uint8_t **buf, size_t *n) {
    int hit = 0;
    pthread_mutex_lock(&mu);
    for (entry **p = &head; *p; p = &(*p)->next) {
        entry *e = *p;
        if (strcmp(e->url, url)) continue;
        if ((*buf = malloc(e->n ? e->n : 1))) {
            memcpy(*buf, e->buf, e->n);
            *n = e->n, hit = 1;
            *p = e->next, e->next = head, head = e;
        }
        break;
    }
    pthread_mutex_unlock(&mu);
    return hit;
}

static void cache_put(const char *url, const uint8_t *buf, size_t n) {
    if ((int64_t)n > VC_URL_CACHE_BYTES / 8) return;
    entry *e = calloc(1, sizeof *e);
    if (e) e->url = strdup(url), e->buf = malloc(n ? n : 1);
    if (!e || !e->url || !e->buf) {
        if (e) entry_free(e);
        return;
    }
    memcpy(e->buf, buf, n);
    e->n = n;
    pthread_mutex_lock(&mu);
    e->next = head, head = e, held += (int64_t)n;
    while (held > VC_URL_CACHE_BYTES) { /* drop the least recently used */
        entry **p = &head;
        while ((*p)->next) p = &(*p)->next;
        held -= (int64_t)(*p)->n;
        entry_free(*p);
        *p = NULL;
    }
    pthread_mutex_unlock(&mu);
}

int64_t vc_url_fetches(int clear_cache) {
    pthread_mutex_lock(&mu);
    while (clear_cache && head) {
        entry *e = head;
        head = e->next;
        entry_free(e);
    }
    if (clear_cache) held = 0;
    int64_t t = transfers;
    pthread_mutex_unlock(&mu);
    return t;
}

/* ---- transfers ---- */
typedef struct {
    uint8_t *buf;
    size_t n, cap;
    FILE *f;
    int too_big;
} sink;

static size_t on_data(char *p, size_t size, size_t nm, void *ud) {
    sink *s = ud;
    size_t k = size * nm;
    if (s->f) return fwrite(p, 1, k, s->f);
    if (s->n + k > (size_t)VC_URL_MAX_BYTES) return s->too_big = 1, 0;
    if (s->n + k > s->cap) {
        size_t cap = (s->n + k) * 2;
        uint8_t *b = realloc(s->buf, cap);
        if (!b) return 0;
        s->buf = b, s->cap = cap;
    }
    memcpy(s->buf + s->n, p, k);
    s->n += k;
    return k;
}

static vc_status transfer(const char *url, const char *what, sink *s) {
    pthread_once(&once, init);
    CURL *h = curl_easy_init();
    if (!h) return vc_fail(VC_ERR_NOMEM, "%s: %.200s: curl_easy_init", what, url);
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 30L); /* (requests' limit) */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_USERAGENT, "verlc");
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* (requests asks for gzip and deflate) */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a transfer stalled for a minute is abandoned */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    pthread_mutex_lock(&mu);
    transfers++;
    pthread_mutex_unlock(&mu);
    if (s->too_big)
        return vc_fail(VC_ERR_ARG, "%s: %.200s: over %lld bytes", what, url, (long long)VC_URL_MAX_BYTES);
    if (rc != CURLE_OK)
        return vc_fail(VC_ERR_IO, "%s: %.200s: %s", what, url, *err ? err : curl_easy_strerror(rc));
    if (code >= 400) return vc_fail(VC_ERR_IO, "%s: %.200s: HTTP status %ld", what, url, code);
    return VC_OK;
}

vc_status vc_url_fetch(const char *url, const char *what, uint8_t **buf, size_t *n) {
    *buf = NULL, *n = 0;
    if (cache_get(url, buf, n)) return VC_OK;
    sink s = { 0 };
    vc_status st = transfer(url, what, &s);
    if (st) return free(s.buf), st;
    if (!s.buf && !(s.buf = malloc(1))) return VC_ERR_NOMEM;
    cache_put(url, s.buf, s.n);
    *buf = s.buf, *n = s.n;
    return VC_OK;
}

vc_status vc_url_fetch_file(const char *url, const char *what, char **path) {
    const char *dir = getenv("TMPDIR");
    size_t len = strlen(dir && *dir ? dir : "/tmp") + 32;
    char *p = malloc(len);
    if (!p) return VC_ERR_NOMEM;
    snprintf(p, len, "%s/verlc_url_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(p);
    if (fd < 0) {
        vc_status st = vc_fail(VC_ERR_IO, "%s: %.200s: a temporary file in %s: %s", what, url,
                               dir && *dir ? dir : "/tmp", strerror(errno));
        return free(p), st;
    }
    sink s = { .f = fdopen(fd, "wb") };
    vc_status st = s.f ? transfer(url, what, &s) : vc_fail(VC_ERR_IO, "%s: %s: %s", what, p, strerror(errno));
    if (s.f && fclose(s.f) && !st) st = vc_fail(VC_ERR_IO, "%s: %s: %s", what, p, strerror(errno));
    if (!s.f) close(fd);
    if (st) {
        unlink(p);
        return free(p), st;
    }
    *path = p;
    return VC_OK;
}
#endif
