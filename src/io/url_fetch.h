/* http(s) URLs of images and videos, fetched as qwen_vl_utils fetches them (requests.get: redirects followed, an
 * error status refused; the http_proxy / https_proxy variables honoured), through libcurl. */
#ifndef VC_URL_FETCH_H
#define VC_URL_FETCH_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

/* bytes over which a fetch into memory (an image) is refused */
#define VC_URL_MAX_BYTES (INT64_C(1) << 29)
/* the most the images' cache keeps (each entry at most an eighth of it): a row's image is read once for its grid
 * when the data loads and again when its pixels are made */
#define VC_URL_CACHE_BYTES (INT64_C(1) << 28)

/* 1 when s starts with http:// or https:// */
int vc_url_is_http(const char *s);
/* the body of url into *buf (malloc'd, *n bytes; from the cache when it holds them); what names the value in
 * errors: one line with the URL and the HTTP status or the transfer's error; VC_ERR_UNSUPPORTED without libcurl */
vc_status vc_url_fetch(const char *url, const char *what, uint8_t **buf, size_t *n);
/* the body of url streamed into a new temporary file ($TMPDIR, else /tmp): *path malloc'd; the caller unlinks it */
vc_status vc_url_fetch_file(const char *url, const char *what, char **path);
/* empties the cache (tests) and returns how many transfers the process has made */
int64_t vc_url_fetches(int clear_cache);
#endif
