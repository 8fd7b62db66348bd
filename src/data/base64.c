/* Base64 (RFC 4648, standard alphabet) for binary Parquet values carried as data URIs in JSON rows. */
#include "verlc/data.h"
#include <stdlib.h>
#include <string.h>

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *vc_base64_encode(const char *prefix, const uint8_t *p, size_t n) {
    size_t pl = prefix ? strlen(prefix) : 0, groups = (n + 2) / 3;
    char *out = vc_malloc(pl + 4 * groups + 1);
    if (!out) return NULL;
    if (pl) memcpy(out, prefix, pl);
    char *w = out + pl;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *w++ = B64[v >> 18 & 63];
        *w++ = B64[v >> 12 & 63];
        *w++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *w++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *w = 0;
    return out;
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static int b64_space(unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

vc_status vc_base64_decode(const char *s, size_t n, const char *what, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (!what) what = "base64";
    uint8_t *buf = vc_malloc(n / 4 * 3 + 3);
    if (!buf) return VC_ERR_NOMEM;
    uint32_t acc = 0;
    size_t k = 0, q = 0; /* q: characters of the current group of 4 */
    int pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (b64_space(c)) continue;
        int v = b64_value(c);
        if (c == '=' && (pad || q >= 2)) { /* padding ends a group of 2 or 3 characters */
            pad = 1;
            continue;
        }
        if (v < 0 || pad) {
            free(buf);
            return vc_fail(VC_ERR_FORMAT, "%s: not base64 at offset %zu", what, i);
        }
        acc = acc << 6 | (uint32_t)v;
        if (++q == 4) {
            buf[k++] = (uint8_t)(acc >> 16), buf[k++] = (uint8_t)(acc >> 8), buf[k++] = (uint8_t)acc;
            acc = 0, q = 0;
        }
    }
    if (q == 1) {
        free(buf);
        return vc_fail(VC_ERR_FORMAT, "%s: truncated base64 (a group of 1 character)", what);
    }
    if (q == 2) buf[k++] = (uint8_t)(acc >> 4);
    if (q == 3) buf[k++] = (uint8_t)(acc >> 10), buf[k++] = (uint8_t)(acc >> 2);
    *out = buf;
    *len = k;
    return VC_OK;
}
