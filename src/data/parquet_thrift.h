/* Thrift compact protocol reading (internal to the Parquet reader): varints, field headers, lists,
 * binaries and skipping unknown fields. A reader that runs past its end or meets a bad type sets `bad`
 * and returns zeros from then on, so callers check once after a structure. */
#ifndef VC_DATA_PARQUET_THRIFT_H
#define VC_DATA_PARQUET_THRIFT_H
#include <stddef.h>
#include <stdint.h>

enum { TC_STOP, TC_TRUE, TC_FALSE, TC_BYTE, TC_I16, TC_I32, TC_I64, TC_DOUBLE, TC_BINARY, TC_LIST, TC_SET, TC_MAP,
       TC_STRUCT };

typedef struct tc_reader {
    const uint8_t *p, *end;
    int bad, depth;
} tc_reader;

uint64_t tc_varint(tc_reader *r);
int64_t tc_int(tc_reader *r); /* zigzag i16 / i32 / i64 */
/* next field of the current struct: 0 at its end (or when bad); *id and *type otherwise; *last is the
 * previous field id (start at 0 for each struct) */
int tc_field(tc_reader *r, int *last, int *id, int *type);
/* a list or set header: element type and count (bounded by the bytes left) */
int64_t tc_list(tc_reader *r, int *elem_type);
/* a binary / string: its bytes (not copied) and length */
const uint8_t *tc_binary(tc_reader *r, size_t *n);
int tc_bool(tc_reader *r, int type); /* a field's boolean value (in the type nibble) */
void tc_skip(tc_reader *r, int type);
char *tc_string(tc_reader *r); /* a binary copied with a terminating NUL (NULL: out of memory or bad) */
#endif
