/* Parquet's other value encodings: DELTA_BINARY_PACKED (integers), DELTA_LENGTH_BYTE_ARRAY and
 * DELTA_BYTE_ARRAY (strings: lengths, or shared prefixes and suffixes, delta-packed), BYTE_STREAM_SPLIT
 * (fixed-width values stored byte plane by byte plane). Pure decoders over a page's bytes. */
#include "parquet.h"
#include "parquet_thrift.h"
#include <stdlib.h>
#include <string.h>

#define MAX_STRINGS_BYTES ((size_t)1 << 30)

/* bw bits (up to 64) at bit offset `bit` of p[0, n), least significant bit first */
static uint64_t unpack(const uint8_t *p, size_t n, uint64_t bit, int bw) {
    if (!bw) return 0;
    unsigned __int128 w = 0;
    size_t at = (size_t)(bit >> 3);
    for (size_t b = 0; b < 9 && at + b < n; b++) w |= (unsigned __int128)p[at + b] << (8 * b);
    w >>= bit & 7;
    return bw == 64 ? (uint64_t)w : (uint64_t)w & (((uint64_t)1 << bw) - 1);
}

int pq_delta_binary(const uint8_t *p, size_t n, int64_t *out, int64_t count, size_t *used) {
    tc_reader r = { .p = p, .end = p + n };
    uint64_t block = tc_varint(&r), mbs = tc_varint(&r), total = tc_varint(&r);
    int64_t first = tc_int(&r);
    if (r.bad || !block || !mbs || block % mbs || block > (1u << 20) || (int64_t)total < count) return 0;
    uint64_t per = block / mbs; /* values per miniblock */
    int64_t k = 0;
    uint64_t v = (uint64_t)first;
    if (count > 0) out[k++] = first;
    /* every value of the header is decoded (so *used is the end of the encoding), the first `count` kept */
    uint64_t left = total ? total - 1 : 0;
    while (left > 0) {
        uint64_t min = (uint64_t)tc_int(&r);
        if (r.bad || (uint64_t)(r.end - r.p) < mbs) return 0;
        const uint8_t *widths = r.p;
        r.p += mbs;
        for (uint64_t m = 0; m < mbs && left > 0; m++) {
            int bw = widths[m];
            if (bw > 64) return 0;
            uint64_t bytes = per * (uint64_t)bw / 8;
            if (bytes > (uint64_t)(r.end - r.p)) return 0;
            for (uint64_t j = 0; j < per && left > 0; j++, left--) {
                v += min + unpack(r.p, (size_t)bytes, j * (uint64_t)bw, bw);
                if (k < count) out[k++] = (int64_t)v;
            }
            r.p += bytes;
        }
    }
    *used = (size_t)(r.p - p);
    return k == count;
}

/* DELTA_LENGTH_BYTE_ARRAY: the lengths, then the bytes of every value one after another */
static int delta_length(const uint8_t *p, size_t n, pq_val *v, int64_t count, size_t *used) {
    int64_t *len = malloc((size_t)(count ? count : 1) * sizeof *len);
    size_t at = 0;
    int ok = len && pq_delta_binary(p, n, len, count, &at);
    for (int64_t i = 0; ok && i < count; i++) {
        ok = len[i] >= 0 && (uint64_t)len[i] <= n - at;
        if (!ok) break;
        v[i].s.p = p + at;
        v[i].s.n = (uint32_t)len[i];
        at += (size_t)len[i];
    }
    free(len);
    *used = at;
    return ok;
}

int pq_delta_strings(const uint8_t *p, size_t n, pq_val *v, int64_t count, int length_only, uint8_t **buf_out) {
    *buf_out = NULL;
    if (length_only) { /* the values point into the page */
        size_t used;
        return delta_length(p, n, v, count, &used);
    }
    int64_t *pre = malloc((size_t)(count ? count : 1) * sizeof *pre);
    size_t at = 0, used = 0, total = 0;
    int ok = pre && pq_delta_binary(p, n, pre, count, &at) && delta_length(p + at, n - at, v, count, &used);
    for (int64_t i = 0, prev = 0; ok && i < count; i++) { /* value i = prefix of value i-1 + its suffix */
        ok = pre[i] >= 0 && pre[i] <= prev && total <= MAX_STRINGS_BYTES;
        prev = pre[i] + v[i].s.n;
        total += (size_t)prev;
    }
    uint8_t *buf = ok && total <= MAX_STRINGS_BYTES ? malloc(total ? total : 1) : NULL;
    ok = buf != NULL;
    if (buf) {
        size_t o = 0;
        const uint8_t *last = buf;
        for (int64_t i = 0; i < count; i++) {
            uint8_t *dst = buf + o;
            memmove(dst, last, (size_t)pre[i]);
            memcpy(dst + pre[i], v[i].s.p, v[i].s.n);
            v[i].s.p = dst;
            v[i].s.n += (uint32_t)pre[i];
            last = dst;
            o += v[i].s.n;
        }
    }
    free(pre);
    *buf_out = buf;
    return ok;
}

void pq_plain_value(int type, const uint8_t *q, uint32_t w, pq_val *v) {
    if (type == PQ_INT32) {
        int32_t x;
        memcpy(&x, q, 4);
        v->i = x;
    } else if (type == PQ_INT64) memcpy(&v->i, q, 8);
    else if (type == PQ_FLOAT) {
        float x;
        memcpy(&x, q, 4);
        v->d = x;
    } else if (type == PQ_DOUBLE) memcpy(&v->d, q, 8);
    else { /* byte arrays, INT96: the bytes in place */
        v->s.p = q;
        v->s.n = w;
    }
}

int pq_byte_stream_split(const uint8_t *p, size_t n, int type, int width, pq_val *v, int64_t count, uint8_t **buf) {
    *buf = NULL;
    size_t w = type == PQ_FLOAT || type == PQ_INT32 ? 4 : type == PQ_DOUBLE || type == PQ_INT64 ? 8
             : type == PQ_FIXED && width > 0 ? (size_t)width : 0;
    if (!w || (uint64_t)count * w > n) return 0;
    uint8_t b[8], *fixed = NULL;
    if (type == PQ_FIXED && !(fixed = *buf = malloc(count ? (size_t)count * w : 1))) return 0;
    for (int64_t i = 0; i < count; i++) {
        uint8_t *dst = fixed ? fixed + (size_t)i * w : b;
        for (size_t k = 0; k < w; k++) dst[k] = p[k * (size_t)count + (size_t)i];
        pq_plain_value(type, dst, (uint32_t)w, &v[i]);
    }
    return 1;
}
