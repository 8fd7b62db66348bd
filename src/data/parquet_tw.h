/* Parquet writing (internal): bytes appended to a vc_strbuf (verlc/report.h's growing buffer) and the Thrift compact
 * protocol's writing side (field headers by delta, zigzag varints, lists, nested structs), for the page headers and
 * the footer parquet_write.c writes. */
#ifndef VC_DATA_PARQUET_TW_H
#define VC_DATA_PARQUET_TW_H
#include "verlc/report.h"
#include <stddef.h>
#include <stdint.h>

typedef vc_strbuf pw_buf; /* (oom set by the first failed growth; later writes do nothing) */

void pb_put(pw_buf *b, const void *src, size_t n);
void pb_byte(pw_buf *b, uint8_t c);
void pb_u32le(pw_buf *b, uint32_t v);
void pb_varint(pw_buf *b, uint64_t v);
void pb_free(pw_buf *b);

#define TW_DEPTH 16
typedef struct tw {
    pw_buf *b;
    int depth;
    int16_t last[TW_DEPTH]; /* the previous field id of each open struct */
} tw;

void tw_i32(tw *w, int id, int64_t v);
void tw_i64(tw *w, int id, int64_t v);
void tw_bin(tw *w, int id, const void *p, size_t n);
void tw_str(tw *w, int id, const char *s);
void tw_byte(tw *w, int id, int v);
void tw_bool(tw *w, int id, int v);
/* a struct field (tw_begin) or a list's struct element (tw_elem_begin), closed by tw_end */
void tw_begin(tw *w, int id);
void tw_elem_begin(tw *w);
void tw_end(tw *w);
/* a list field's header; its n elements follow */
void tw_list(tw *w, int id, int elem_type, size_t n);
/* one element of a list of i32 / binary */
void tw_elem_i32(tw *w, int64_t v);
void tw_elem_bin(tw *w, const char *s);
#endif
