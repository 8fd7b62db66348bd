/* Parquet column chunks: page headers, decompression (snappy, gzip, zstd), the RLE / bit-packed hybrid
 * of levels and dictionary indices, PLAIN values and dictionaries, data pages v1 and v2. Every length
 * is checked against the bytes it claims before it is read. */
#include "parquet.h"
#include "parquet_thrift.h"
#include <brotli/decode.h>
#include <lz4.h>
#include <snappy-c.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define MAX_PAGE ((size_t)1 << 30)
#define MAX_ENTRIES ((int64_t)1 << 31)

enum { PAGE_DATA = 0, PAGE_DICT = 2, PAGE_DATA_V2 = 3 };
enum { ENC_PLAIN = 0, ENC_PLAIN_DICT = 2, ENC_RLE = 3, ENC_DELTA_BINARY = 5, ENC_DELTA_LENGTH = 6, ENC_DELTA_BYTES = 7,
       ENC_RLE_DICT = 8, ENC_BYTE_SPLIT = 9 };

typedef struct page_hdr {
    int type, enc, v2_compressed;
    int64_t usize, csize, num_values, def_len, rep_len;
} page_hdr;

typedef struct col_ctx {
    const pq_file *f;
    const pq_node *node;
    const pq_chunk *ch;
    pq_column *out;
    char where[600]; /* "file: parquet column 'a.b' (row group 2)" */
    pq_val *dict;
    int64_t dict_n;
} col_ctx;

static vc_status col_fail(col_ctx *c, vc_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static vc_status col_fail(col_ctx *c, vc_status st, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vc_fail(st, "%s: %s", c->where, msg);
}

static const char *codec_name(int codec) {
    static const char *names[] = { "UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW" };
    return codec >= 0 && codec < 8 ? names[codec] : "unknown";
}

static void read_data_hdr(tc_reader *r, page_hdr *h, int v2) {
    int last = 0, id, t;
    while (tc_field(r, &last, &id, &t)) {
        if (id == 1 && t == TC_I32) h->num_values = tc_int(r);
        else if (!v2 && id == 2 && t == TC_I32) h->enc = (int)tc_int(r);
        else if (v2 && id == 4 && t == TC_I32) h->enc = (int)tc_int(r);
        else if (v2 && id == 5 && t == TC_I32) h->def_len = tc_int(r);
        else if (v2 && id == 6 && t == TC_I32) h->rep_len = tc_int(r);
        else if (v2 && id == 7 && (t == TC_TRUE || t == TC_FALSE)) h->v2_compressed = tc_bool(r, t);
        else tc_skip(r, t);
    }
}

/* the PageHeader at p; returns the header's length, 0 when malformed */
static size_t read_page_hdr(const uint8_t *p, const uint8_t *end, page_hdr *h) {
    tc_reader r = { .p = p, .end = end };
    memset(h, 0, sizeof *h);
    h->type = -1;
    h->v2_compressed = 1;
    int last = 0, id, t;
    while (tc_field(&r, &last, &id, &t)) {
        if (id == 1 && t == TC_I32) h->type = (int)tc_int(&r);
        else if (id == 2 && t == TC_I32) h->usize = tc_int(&r);
        else if (id == 3 && t == TC_I32) h->csize = tc_int(&r);
        else if ((id == 5 || id == 7 || id == 8) && t == TC_STRUCT) read_data_hdr(&r, h, id == 8);
        else tc_skip(&r, t);
    }
    return r.bad ? 0 : (size_t)(r.p - p);
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* Hadoop's LZ4 framing: frames of [decompressed size, compressed size (big-endian 32-bit), LZ4 block] */
static int lz4_hadoop(const uint8_t *src, size_t n, uint8_t *dst, size_t size) {
    size_t in = 0, out = 0;
    while (in < n) {
        if (n - in < 8) return 0;
        uint32_t du = be32(src + in), dc = be32(src + in + 4);
        in += 8;
        if (dc > n - in || du > size - out || dc > INT32_MAX || du > INT32_MAX) return 0;
        if (LZ4_decompress_safe((const char *)src + in, (char *)dst + out, (int)dc, (int)du) != (int)du) return 0;
        in += dc;
        out += du;
    }
    return out == size;
}

/* src[0, n) decompressed into a new buffer of exactly `size` bytes */
static vc_status inflate_page(col_ctx *c, const uint8_t *src, size_t n, size_t size, uint8_t **out) {
    *out = NULL;
    if (size > MAX_PAGE) return col_fail(c, VC_ERR_FORMAT, "page of %zu bytes", size);
    uint8_t *dst = malloc(size ? size : 1);
    if (!dst) return vc_fail(VC_ERR_NOMEM, "%s: out of memory for a page of %zu bytes", c->where, size);
    int ok = 0;
    size_t got = 0;
    switch (c->ch->codec) {
    case 0:
        ok = n == size;
        if (ok) memcpy(dst, src, n);
        break;
    case 1:
        got = size;
        ok = snappy_validate_compressed_buffer((const char *)src, n) == SNAPPY_OK &&
             snappy_uncompressed_length((const char *)src, n, &got) == SNAPPY_OK && got == size &&
             snappy_uncompress((const char *)src, n, (char *)dst, &got) == SNAPPY_OK && got == size;
        break;
    case 2: {
        z_stream z = { 0 };
        if (inflateInit2(&z, 15 + 32) != Z_OK) break;
        z.next_in = (Bytef *)src;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)size;
        int rc = inflate(&z, Z_FINISH);
        ok = rc == Z_STREAM_END && z.total_out == size;
        inflateEnd(&z);
        break;
    }
    case 4: {
        size_t got_b = size;
        ok = BrotliDecoderDecompress(n, src, &got_b, dst) == BROTLI_DECODER_RESULT_SUCCESS && got_b == size;
        break;
    }
    case 5: /* Hadoop-framed LZ4 as older writers made it, else a raw block (as Arrow reads it) */
        ok = lz4_hadoop(src, n, dst, size) || (n <= INT32_MAX && size <= INT32_MAX &&
                                               LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)size) == (int)size);
        break;
    case 6: {
        size_t rc = ZSTD_decompress(dst, size, src, n);
        ok = !ZSTD_isError(rc) && rc == size;
        break;
    }
    case 7:
        ok = n <= INT32_MAX && size <= INT32_MAX &&
             LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)size) == (int)size;
        break;
    default:
        free(dst);
        return col_fail(c, VC_ERR_UNSUPPORTED, "compression %s is not read (SNAPPY, GZIP, ZSTD, BROTLI, LZ4, LZ4_RAW or none)",
                        codec_name(c->ch->codec));
    }
    if (!ok) {
        free(dst);
        return col_fail(c, VC_ERR_FORMAT, "%s page does not decompress to its %zu bytes", codec_name(c->ch->codec), size);
    }
    *out = dst;
    return VC_OK;
}

static vc_status keep_buf(col_ctx *c, uint8_t *b) {
    pq_column *o = c->out;
    if (o->n_bufs == o->cap_bufs) {
        int cap = o->cap_bufs ? 2 * o->cap_bufs : 8;
        uint8_t **nb = realloc(o->bufs, (size_t)cap * sizeof *nb);
        if (!nb) {
            free(b);
            return VC_ERR_NOMEM;
        }
        o->bufs = nb;
        o->cap_bufs = cap;
    }
    o->bufs[o->n_bufs++] = b;
    return VC_OK;
}

/* count values of the RLE / bit-packed hybrid at p[0, n) with bit width bw; returns 0 when it ends early */
static int hybrid(const uint8_t *p, size_t n, int bw, uint32_t *out, int64_t count) {
    tc_reader r = { .p = p, .end = p + n };
    int64_t k = 0;
    size_t vbytes = ((size_t)bw + 7) / 8;
    uint32_t mask = bw >= 32 ? 0xffffffffu : ((uint32_t)1 << bw) - 1;
    while (k < count) {
        uint64_t h = tc_varint(&r);
        if (r.bad) return 0;
        if (h & 1) { /* bit-packed: (h >> 1) groups of 8 values, bw bytes each */
            uint64_t groups = h >> 1;
            if (groups > (uint64_t)(r.end - r.p) || groups * (uint64_t)bw > (uint64_t)(r.end - r.p)) return 0;
            size_t bytes = (size_t)(groups * (uint64_t)bw);
            for (uint64_t j = 0; j < groups * 8 && k < count; j++) {
                uint64_t bit = j * (uint64_t)bw, w = 0;
                size_t at = (size_t)(bit >> 3);
                for (size_t b = 0; b < 8 && at + b < bytes; b++) w |= (uint64_t)r.p[at + b] << (8 * b);
                out[k++] = (uint32_t)(w >> (bit & 7)) & mask;
            }
            r.p += bytes;
        } else { /* a run of one value */
            uint64_t run = h >> 1;
            if ((size_t)(r.end - r.p) < vbytes) return 0;
            uint32_t v = 0;
            for (size_t b = 0; b < vbytes; b++) v |= (uint32_t)r.p[b] << (8 * b);
            r.p += vbytes;
            if (v & ~mask) return 0;
            for (uint64_t j = 0; j < run && k < count; j++) out[k++] = v;
        }
    }
    return 1;
}

static int bit_width(int max) {
    int b = 0;
    while (max >> b) b++;
    return b;
}

/* levels of one page into lv[0, count) (max 0: none stored, all 0) */
static vc_status levels(col_ctx *c, const uint8_t *p, size_t n, int max, uint16_t *lv, int64_t count,
                        const char *what) {
    uint32_t *tmp = malloc((size_t)(count ? count : 1) * sizeof *tmp);
    if (!tmp) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (!hybrid(p, n, bit_width(max), tmp, count)) st = col_fail(c, VC_ERR_FORMAT, "%s levels end early", what);
    for (int64_t i = 0; !st && i < count; i++) {
        if (tmp[i] > (uint32_t)max) st = col_fail(c, VC_ERR_FORMAT, "%s level %u above the maximum %d", what, tmp[i], max);
        else lv[i] = (uint16_t)tmp[i];
    }
    free(tmp);
    return st;
}

/* count PLAIN values at p[0, n) into v; returns the bytes used, or -1 when they do not fit */
static int64_t plain(const col_ctx *c, const uint8_t *p, size_t n, pq_val *v, int64_t count) {
    size_t at = 0;
    int type = c->node->type;
    size_t w = type == PQ_INT32 || type == PQ_FLOAT ? 4 : type == PQ_INT64 || type == PQ_DOUBLE ? 8
             : type == PQ_INT96 ? 12 : type == PQ_FIXED ? (size_t)c->node->type_length : 0;
    if (type == PQ_BOOLEAN) {
        if ((uint64_t)count > (uint64_t)n * 8) return -1;
        for (int64_t i = 0; i < count; i++) v[i].i = p[i >> 3] >> (i & 7) & 1;
        return (count + 7) / 8;
    }
    for (int64_t i = 0; i < count; i++) {
        if (type == PQ_BYTE_ARRAY) {
            if (n - at < 4) return -1;
            w = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 | (size_t)p[at + 3] << 24;
            at += 4;
        }
        if (w > n - at || (w == 0 && type == PQ_FIXED)) return -1;
        pq_plain_value(type, p + at, (uint32_t)w, &v[i]);
        at += w;
    }
    return (int64_t)at;
}

static vc_status read_dict(col_ctx *c, const page_hdr *h, const uint8_t *src) {
    if (c->dict) return col_fail(c, VC_ERR_FORMAT, "a second dictionary page");
    if (h->num_values < 0 || h->num_values > (int64_t)h->usize * 8 + 8)
        return col_fail(c, VC_ERR_FORMAT, "dictionary of %lld values", (long long)h->num_values);
    uint8_t *buf;
    vc_status st = inflate_page(c, src, (size_t)h->csize, (size_t)h->usize, &buf);
    if (st || (st = keep_buf(c, buf))) return st;
    c->dict = malloc((size_t)(h->num_values ? h->num_values : 1) * sizeof *c->dict);
    if (!c->dict) return VC_ERR_NOMEM;
    c->dict_n = h->num_values;
    if (plain(c, buf, (size_t)h->usize, c->dict, c->dict_n) < 0)
        return col_fail(c, VC_ERR_FORMAT, "dictionary values do not fit their page");
    return VC_OK;
}

/* a page's values: n_vals of them, encoded by enc at p[0, n) */
static vc_status values(col_ctx *c, int enc, const uint8_t *p, size_t n, int64_t n_vals) {
    pq_val *v = c->out->vals + c->out->n_vals;
    if (enc == ENC_PLAIN) {
        if (plain(c, p, n, v, n_vals) < 0) return col_fail(c, VC_ERR_FORMAT, "PLAIN values do not fit their page");
    } else if (enc == ENC_RLE && c->node->type == PQ_BOOLEAN) {
        uint32_t *tmp = malloc((size_t)(n_vals ? n_vals : 1) * sizeof *tmp);
        if (!tmp) return VC_ERR_NOMEM;
        int ok = n >= 4 && hybrid(p + 4, n - 4, 1, tmp, n_vals);
        for (int64_t i = 0; ok && i < n_vals; i++) v[i].i = tmp[i];
        free(tmp);
        if (!ok) return col_fail(c, VC_ERR_FORMAT, "RLE booleans end early");
    } else if (enc == ENC_PLAIN_DICT || enc == ENC_RLE_DICT) {
        if (!c->dict) return col_fail(c, VC_ERR_FORMAT, "dictionary-encoded page without a dictionary");
        uint32_t *idx = malloc((size_t)(n_vals ? n_vals : 1) * sizeof *idx);
        if (!idx) return VC_ERR_NOMEM;
        int ok = n_vals == 0 || (n >= 1 && p[0] <= 32 && hybrid(p + 1, n - 1, p[0], idx, n_vals));
        for (int64_t i = 0; ok && i < n_vals; i++) {
            ok = idx[i] < (uint64_t)c->dict_n;
            if (ok) v[i] = c->dict[idx[i]];
        }
        free(idx);
        if (!ok) return col_fail(c, VC_ERR_FORMAT, "dictionary indices malformed or beyond the %lld entries",
                                 (long long)c->dict_n);
    } else if (enc == ENC_DELTA_BINARY && (c->node->type == PQ_INT32 || c->node->type == PQ_INT64)) {
        int64_t *x = malloc((size_t)(n_vals ? n_vals : 1) * sizeof *x);
        size_t used;
        int ok = x && (n_vals == 0 || pq_delta_binary(p, n, x, n_vals, &used));
        for (int64_t i = 0; ok && i < n_vals; i++) v[i].i = c->node->type == PQ_INT32 ? (int32_t)x[i] : x[i];
        free(x);
        if (!ok) return col_fail(c, VC_ERR_FORMAT, "DELTA_BINARY_PACKED values malformed");
    } else if ((enc == ENC_DELTA_LENGTH || enc == ENC_DELTA_BYTES) && c->node->type == PQ_BYTE_ARRAY) {
        uint8_t *buf = NULL;
        int ok = n_vals == 0 || pq_delta_strings(p, n, v, n_vals, enc == ENC_DELTA_LENGTH, &buf);
        vc_status st = buf ? keep_buf(c, buf) : VC_OK;
        if (st) return st;
        if (!ok) return col_fail(c, VC_ERR_FORMAT, "%s values malformed",
                                 enc == ENC_DELTA_LENGTH ? "DELTA_LENGTH_BYTE_ARRAY" : "DELTA_BYTE_ARRAY");
    } else if (enc == ENC_BYTE_SPLIT && c->node->type != PQ_BOOLEAN && c->node->type != PQ_INT96 &&
               c->node->type != PQ_BYTE_ARRAY) {
        uint8_t *buf = NULL;
        int ok = pq_byte_stream_split(p, n, c->node->type, c->node->type_length, v, n_vals, &buf);
        vc_status st = buf ? keep_buf(c, buf) : VC_OK;
        if (st) return st;
        if (!ok) return col_fail(c, VC_ERR_FORMAT, "BYTE_STREAM_SPLIT values do not fit their page");
    } else
        return col_fail(c, VC_ERR_UNSUPPORTED, "value encoding %d is not read for this column's type", enc);
    c->out->n_vals += n_vals;
    return VC_OK;
}

/* one data page (v1 or v2) whose compressed bytes are src[0, h->csize) */
static vc_status read_data(col_ctx *c, const page_hdr *h, const uint8_t *src) {
    pq_column *o = c->out;
    int max_def = c->node->def, max_rep = c->node->rep;
    int64_t cnt = h->num_values;
    if (cnt <= 0 || cnt > c->ch->num_values - o->n)
        return col_fail(c, VC_ERR_FORMAT, "a page of %lld values where %lld remain", (long long)cnt,
                        (long long)(c->ch->num_values - o->n));
    const uint8_t *lv = NULL, *vals;
    size_t lv_n = 0, vals_n;
    uint8_t *buf = NULL;
    vc_status st;
    if (h->type == PAGE_DATA_V2) { /* levels stored uncompressed ahead of the (maybe compressed) values */
        if (h->rep_len < 0 || h->def_len < 0 || h->rep_len + h->def_len > h->csize || h->rep_len + h->def_len > h->usize)
            return col_fail(c, VC_ERR_FORMAT, "v2 page levels longer than the page");
        size_t ln = (size_t)(h->rep_len + h->def_len);
        lv = src;
        if (h->v2_compressed && c->ch->codec) {
            st = inflate_page(c, src + ln, (size_t)h->csize - ln, (size_t)h->usize - ln, &buf);
            if (st || (st = keep_buf(c, buf))) return st;
            vals = buf;
        } else vals = src + ln;
        vals_n = (size_t)h->usize - ln;
        if (!(h->v2_compressed && c->ch->codec) && h->usize != h->csize)
            return col_fail(c, VC_ERR_FORMAT, "uncompressed v2 page of two sizes");
        if (max_rep && (st = levels(c, lv, (size_t)h->rep_len, max_rep, o->rep + o->n, cnt, "repetition"))) return st;
        if (max_def && (st = levels(c, lv + h->rep_len, (size_t)h->def_len, max_def, o->def + o->n, cnt, "definition")))
            return st;
    } else {
        st = inflate_page(c, src, (size_t)h->csize, (size_t)h->usize, &buf);
        if (st || (st = keep_buf(c, buf))) return st;
        lv = buf;
        lv_n = (size_t)h->usize;
        size_t at = 0;
        for (int k = 0; k < 2; k++) { /* repetition, then definition levels: 4-byte length + hybrid */
            int max = k ? max_def : max_rep;
            if (!max) continue;
            if (lv_n - at < 4) return col_fail(c, VC_ERR_FORMAT, "page ends in its levels");
            size_t len = (size_t)lv[at] | (size_t)lv[at + 1] << 8 | (size_t)lv[at + 2] << 16 | (size_t)lv[at + 3] << 24;
            at += 4;
            if (len > lv_n - at) return col_fail(c, VC_ERR_FORMAT, "levels longer than their page");
            st = levels(c, lv + at, len, max, (k ? o->def : o->rep) + o->n, cnt, k ? "definition" : "repetition");
            if (st) return st;
            at += len;
        }
        vals = lv + at;
        vals_n = lv_n - at;
    }
    int64_t n_vals = 0;
    for (int64_t i = 0; i < cnt; i++) n_vals += !max_def || o->def[o->n + i] == max_def;
    if (max_rep && o->n == 0 && o->rep[0] != 0) return col_fail(c, VC_ERR_FORMAT, "first value continues a list");
    o->n += cnt;
    return values(c, h->enc, vals, vals_n, n_vals);
}

vc_status pq_column_read(const pq_file *f, int g, int leaf, pq_column *out) {
    memset(out, 0, sizeof *out);
    col_ctx c = { .f = f, .node = &f->nodes[f->leaf_node[leaf]], .ch = &f->groups[g].cols[leaf], .out = out };
    char name[400];
    snprintf(c.where, sizeof c.where, "%s: parquet column '%s' (row group %d)", f->path,
             pq_leaf_name(f, leaf, name, sizeof name), g);
    const pq_chunk *ch = c.ch;
    if (ch->type != c.node->type) return col_fail(&c, VC_ERR_FORMAT, "chunk type %d, schema type %d", ch->type, c.node->type);
    if (c.node->type == PQ_FIXED && c.node->type_length <= 0) return col_fail(&c, VC_ERR_FORMAT, "fixed length %d", c.node->type_length);
    /* levels compress runs of nulls to a few bytes: bound what a small (crafted) file can make us allocate */
    int64_t cap = (int64_t)f->size < MAX_ENTRIES / 1024 ? (int64_t)f->size * 1024 : MAX_ENTRIES;
    if (cap < ((int64_t)1 << 24)) cap = (int64_t)1 << 24;
    if (ch->num_values < 0 || ch->num_values > cap)
        return col_fail(&c, VC_ERR_FORMAT, "%lld values in a file of %zu bytes", (long long)ch->num_values, f->size);
    int64_t pos = ch->dict_off > 0 && ch->dict_off < ch->data_off ? ch->dict_off : ch->data_off;
    int64_t lim = (int64_t)f->size - 8;
    /* (an empty row group's pages are not read: pyarrow writes its dictionary page and a data page offset of 0) */
    if (ch->num_values > 0 && (pos < 4 || pos >= lim)) return col_fail(&c, VC_ERR_FORMAT, "pages at offset %lld outside the file", (long long)pos);
    size_t n = (size_t)(ch->num_values ? ch->num_values : 1);
    out->vals = malloc(n * sizeof *out->vals);
    out->def = c.node->def ? malloc(n * sizeof *out->def) : NULL;
    out->rep = c.node->rep ? malloc(n * sizeof *out->rep) : NULL;
    vc_status st = !out->vals || (c.node->def && !out->def) || (c.node->rep && !out->rep) ? VC_ERR_NOMEM : VC_OK;
    while (!st && out->n < ch->num_values) {
        page_hdr h;
        size_t hl = pos < lim ? read_page_hdr(f->data + pos, f->data + lim, &h) : 0;
        if (!hl || h.csize < 0 || h.usize < 0 || h.csize > lim - pos - (int64_t)hl) {
            st = col_fail(&c, VC_ERR_FORMAT, "malformed page header at offset %lld", (long long)pos);
            break;
        }
        const uint8_t *src = f->data + pos + hl;
        pos += (int64_t)hl + h.csize;
        if (h.type == PAGE_DICT) st = read_dict(&c, &h, src);
        else if (h.type == PAGE_DATA || h.type == PAGE_DATA_V2) st = read_data(&c, &h, src);
        /* index pages and unknown page types are skipped */
    }
    free(c.dict);
    if (st) pq_column_free(out);
    return st;
}

void pq_column_free(pq_column *c) {
    for (int i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
    free(c->bufs);
    free(c->def);
    free(c->rep);
    free(c->vals);
    memset(c, 0, sizeof *c);
}
