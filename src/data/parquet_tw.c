/* The Thrift compact protocol's writing side and the byte buffer under it (parquet_tw.h). */
#include "parquet_tw.h"
#include "parquet_thrift.h"
#include <stdlib.h>
#include <string.h>

void pb_put(pw_buf *b, const void *src, size_t n) {
    if (n) vc_sb_putn(b, (const char *)src, n);
}

void pb_byte(pw_buf *b, uint8_t c) { pb_put(b, &c, 1); }

void pb_u32le(pw_buf *b, uint32_t v) {
    uint8_t q[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    pb_put(b, q, 4);
}

void pb_varint(pw_buf *b, uint64_t v) {
    uint8_t q[10];
    int n = 0;
    do {
        q[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) q[n] |= 0x80;
        n++;
    } while (v);
    pb_put(b, q, (size_t)n);
}

void pb_free(pw_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static void field(tw *w, int id, int type) {
    int d = id - w->last[w->depth];
    if (d > 0 && d <= 15) pb_byte(w->b, (uint8_t)(d << 4 | type));
    else {
        pb_byte(w->b, (uint8_t)type);
        pb_varint(w->b, zigzag(id));
    }
    w->last[w->depth] = (int16_t)id;
}

void tw_i32(tw *w, int id, int64_t v) {
    field(w, id, TC_I32);
    pb_varint(w->b, zigzag(v));
}

void tw_i64(tw *w, int id, int64_t v) {
    field(w, id, TC_I64);
    pb_varint(w->b, zigzag(v));
}

void tw_bin(tw *w, int id, const void *p, size_t n) {
    field(w, id, TC_BINARY);
    pb_varint(w->b, n);
    pb_put(w->b, p, n);
}

void tw_str(tw *w, int id, const char *s) { tw_bin(w, id, s, strlen(s)); }

void tw_byte(tw *w, int id, int v) {
    field(w, id, TC_BYTE);
    pb_byte(w->b, (uint8_t)v);
}

void tw_bool(tw *w, int id, int v) { field(w, id, v ? TC_TRUE : TC_FALSE); } /* (the value is the field's type) */

static void open_struct(tw *w) {
    if (w->depth + 1 >= TW_DEPTH) { w->b->oom = 1; return; } /* (never nested this deep by the writer) */
    w->last[++w->depth] = 0;
}

void tw_begin(tw *w, int id) {
    field(w, id, TC_STRUCT);
    open_struct(w);
}

void tw_elem_begin(tw *w) { open_struct(w); }

void tw_end(tw *w) {
    pb_byte(w->b, TC_STOP);
    if (w->depth > 0) w->depth--;
}

void tw_list(tw *w, int id, int elem_type, size_t n) {
    field(w, id, TC_LIST);
    if (n < 15) pb_byte(w->b, (uint8_t)(n << 4 | (size_t)elem_type));
    else {
        pb_byte(w->b, (uint8_t)(0xf0 | elem_type));
        pb_varint(w->b, n);
    }
}

void tw_elem_i32(tw *w, int64_t v) { pb_varint(w->b, zigzag(v)); }

void tw_elem_bin(tw *w, const char *s) {
    size_t n = strlen(s);
    pb_varint(w->b, n);
    pb_put(w->b, s, n);
}
