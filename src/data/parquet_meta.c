/* Parquet footer: the Thrift compact protocol, FileMetaData (schema, row groups, column chunks) and the
 * schema's analysis (definition / repetition levels, leaf ranges, LIST and MAP groups). Every count and
 * offset is checked against the file before use. */
#include "parquet.h"
#include "parquet_thrift.h"
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 100000
#define MAX_DEPTH 64

/* ---- Thrift compact protocol ---- */
uint64_t tc_varint(tc_reader *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) break;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

int64_t tc_int(tc_reader *r) {
    uint64_t u = tc_varint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

int tc_field(tc_reader *r, int *last, int *id, int *type) {
    if (r->bad || r->p >= r->end) {
        r->bad = 1;
        return 0;
    }
    uint8_t b = *r->p++;
    *type = b & 0x0f;
    if (*type == TC_STOP) return 0;
    if (*type > TC_STRUCT) {
        r->bad = 1;
        return 0;
    }
    int delta = b >> 4;
    *id = delta ? *last + delta : (int)tc_int(r);
    *last = *id;
    return !r->bad;
}

int64_t tc_list(tc_reader *r, int *elem_type) {
    if (r->p >= r->end) {
        r->bad = 1;
        return 0;
    }
    uint8_t b = *r->p++;
    *elem_type = b & 0x0f;
    int64_t n = b >> 4;
    if (n == 15) n = (int64_t)tc_varint(r);
    /* every element takes at least one byte, except booleans' values in a bool list (one byte each too) */
    if (n < 0 || n > r->end - r->p || *elem_type > TC_STRUCT) {
        r->bad = 1;
        return 0;
    }
    return n;
}

const uint8_t *tc_binary(tc_reader *r, size_t *n) {
    uint64_t len = tc_varint(r);
    if (r->bad || len > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        *n = 0;
        return NULL;
    }
    const uint8_t *s = r->p;
    r->p += len;
    *n = (size_t)len;
    return s;
}

char *tc_string(tc_reader *r) {
    size_t n = 0;
    const uint8_t *s = tc_binary(r, &n);
    if (!s) return NULL;
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = 0;
    return c;
}

int tc_bool(tc_reader *r, int type) { return type == TC_TRUE; }

void tc_skip(tc_reader *r, int type) {
    if (r->bad) return;
    if (++r->depth > MAX_DEPTH) {
        r->bad = 1;
        return;
    }
    switch (type) {
    case TC_TRUE:
    case TC_FALSE: break;
    case TC_BYTE:
        if (r->p >= r->end) r->bad = 1;
        else r->p++;
        break;
    case TC_I16:
    case TC_I32:
    case TC_I64: tc_varint(r); break;
    case TC_DOUBLE:
        if (r->end - r->p < 8) r->bad = 1;
        else r->p += 8;
        break;
    case TC_BINARY: {
        size_t n;
        tc_binary(r, &n);
        break;
    }
    case TC_LIST:
    case TC_SET: {
        int et;
        int64_t n = tc_list(r, &et);
        for (int64_t i = 0; i < n && !r->bad; i++) {
            if (et == TC_TRUE || et == TC_FALSE) tc_skip(r, TC_BYTE); /* bools in a list: one byte each */
            else tc_skip(r, et);
        }
        break;
    }
    case TC_MAP: {
        int64_t n = (int64_t)tc_varint(r);
        if (n < 0 || n > r->end - r->p) {
            r->bad = 1;
            break;
        }
        if (n == 0) break;
        uint8_t kv = r->p < r->end ? *r->p++ : 0;
        for (int64_t i = 0; i < n && !r->bad; i++) {
            tc_skip(r, kv >> 4 == TC_TRUE || kv >> 4 == TC_FALSE ? TC_BYTE : kv >> 4);
            tc_skip(r, (kv & 15) == TC_TRUE || (kv & 15) == TC_FALSE ? TC_BYTE : kv & 15);
        }
        break;
    }
    case TC_STRUCT: {
        int last = 0, id, t;
        while (tc_field(r, &last, &id, &t)) tc_skip(r, t);
        break;
    }
    default: r->bad = 1;
    }
    r->depth--;
}

/* ---- FileMetaData ---- */
/* LogicalType (a union of structs): which member, and the fields verlc uses of INTEGER, DECIMAL */
static void read_logical(tc_reader *r, pq_node *n) {
    int last = 0, id, t;
    while (tc_field(r, &last, &id, &t)) {
        if (t != TC_STRUCT) {
            tc_skip(r, t);
            continue;
        }
        n->logical = id;
        int l2 = 0, id2, t2;
        while (tc_field(r, &l2, &id2, &t2)) {
            if (id == 10 && id2 == 1 && t2 == TC_BYTE && r->p < r->end) n->int_bits = (int8_t)*r->p++;
            else if (id == 10 && id2 == 2 && (t2 == TC_TRUE || t2 == TC_FALSE)) n->int_signed = tc_bool(r, t2);
            else if (id == 5 && id2 == 1 && t2 == TC_I32) n->scale = (int)tc_int(r);
            else tc_skip(r, t2);
        }
    }
}

static void read_schema_element(tc_reader *r, pq_node *n) {
    int last = 0, id, t;
    n->converted = -1;
    n->type = -1; /* groups have none */
    n->int_signed = 1;
    while (tc_field(r, &last, &id, &t)) {
        if (id == 1 && t == TC_I32) n->type = (int)tc_int(r);
        else if (id == 2 && t == TC_I32) n->type_length = (int)tc_int(r);
        else if (id == 3 && t == TC_I32) n->repetition = (int)tc_int(r);
        else if (id == 4 && t == TC_BINARY) {
            free(n->name);
            n->name = tc_string(r);
        } else if (id == 5 && t == TC_I32) n->num_children = (int)tc_int(r);
        else if (id == 6 && t == TC_I32) n->converted = (int)tc_int(r);
        else if (id == 7 && t == TC_I32) n->scale = (int)tc_int(r);
        else if (id == 10 && t == TC_STRUCT) read_logical(r, n);
        else tc_skip(r, t);
    }
}

static void read_column_meta(tc_reader *r, pq_chunk *c) {
    int last = 0, id, t;
    while (tc_field(r, &last, &id, &t)) {
        if (id == 1 && t == TC_I32) c->type = (int)tc_int(r);
        else if (id == 4 && t == TC_I32) c->codec = (int)tc_int(r);
        else if (id == 5 && t == TC_I64) c->num_values = tc_int(r);
        else if (id == 7 && t == TC_I64) c->total_size = tc_int(r);
        else if (id == 9 && t == TC_I64) c->data_off = tc_int(r);
        else if (id == 11 && t == TC_I64) c->dict_off = tc_int(r);
        else tc_skip(r, t);
    }
}

static vc_status read_row_group(tc_reader *r, pq_file *f, pq_group *g) {
    int last = 0, id, t, n_cols = -1;
    while (tc_field(r, &last, &id, &t)) {
        if (id == 1 && t == TC_LIST) {
            int et;
            int64_t n = tc_list(r, &et);
            if (r->bad || et != TC_STRUCT || n != f->n_leaves)
                return vc_fail(VC_ERR_FORMAT, "%s: parquet row group with %lld column chunks for %d leaf columns",
                               f->path, (long long)n, f->n_leaves);
            free(g->cols);
            g->cols = vc_calloc((size_t)(n ? n : 1), sizeof *g->cols);
            if (!g->cols) return VC_ERR_NOMEM;
            for (int64_t i = 0; i < n && !r->bad; i++) { /* ColumnChunk: meta_data is field 3 */
                int l2 = 0, id2, t2;
                g->cols[i].dict_off = -1;
                while (tc_field(r, &l2, &id2, &t2)) {
                    if (id2 == 3 && t2 == TC_STRUCT) read_column_meta(r, &g->cols[i]);
                    else if (id2 == 1 && t2 == TC_BINARY) {
                        size_t len;
                        tc_binary(r, &len);
                        if (len)
                            return vc_fail(VC_ERR_UNSUPPORTED, "%s: parquet column chunks in other files are not read",
                                           f->path);
                    } else tc_skip(r, t2);
                }
            }
            n_cols = (int)n;
        } else if (id == 3 && t == TC_I64) g->num_rows = tc_int(r);
        else tc_skip(r, t);
    }
    if (r->bad || n_cols < 0 || g->num_rows < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: parquet footer: malformed row group", f->path);
    return VC_OK;
}

/* levels, leaf ranges and list/map shapes, depth-first from node i; returns the next node index */
static int analyse(pq_file *f, int i, int parent, int depth, vc_status *st) {
    if (*st) return f->n_nodes;
    if (i >= f->n_nodes || depth > MAX_DEPTH) {
        *st = vc_fail(VC_ERR_FORMAT, "%s: parquet schema: children counts do not match the elements", f->path);
        return f->n_nodes;
    }
    pq_node *n = &f->nodes[i];
    n->parent = parent;
    if (!n->name || n->repetition < 0 || n->repetition > 2 || n->num_children < 0) {
        *st = vc_fail(VC_ERR_FORMAT, "%s: parquet schema element %d malformed", f->path, i);
        return f->n_nodes;
    }
    const pq_node *p = parent >= 0 ? &f->nodes[parent] : NULL;
    n->def = (p ? p->def : 0) + (parent >= 0 && n->repetition != PQ_REQUIRED);
    n->rep = (p ? p->rep : 0) + (parent >= 0 && n->repetition == PQ_REPEATED);
    n->leaf0 = f->n_leaves;
    int next = i + 1;
    if (n->num_children == 0 && parent >= 0) { /* (a root without children: a table without columns) */
        if (n->type < PQ_BOOLEAN || n->type > PQ_FIXED) {
            *st = vc_fail(VC_ERR_FORMAT, "%s: parquet schema element '%s' has no type", f->path, n->name);
            return f->n_nodes;
        }
        f->leaf_node[f->n_leaves++] = i;
    } else {
        n->first_child = next;
        for (int c = 0; c < n->num_children && !*st; c++) next = analyse(f, next, i, depth + 1, st);
    }
    n->leaf1 = f->n_leaves;
    if (*st || !n->num_children || parent < 0) return next;
    if (n->leaf1 == n->leaf0) {
        *st = vc_fail(VC_ERR_FORMAT, "%s: parquet group '%s' holds no column", f->path, n->name);
        return f->n_nodes;
    }
    int is_list = n->converted == 3 || n->logical == 3, is_map = n->converted == 1 || n->converted == 2 ||
                                                                   n->logical == 2;
    pq_node *c = &f->nodes[n->first_child];
    if ((is_list || is_map) && n->num_children == 1 && c->repetition == PQ_REPEATED) {
        if (is_map && c->num_children == 2) n->kind = PQ_K_MAP;
        else if (is_list) {
            n->kind = PQ_K_LIST;
            /* the repeated child is the item unless it is a group of one field not named like a 2-level list's */
            char tuple[300];
            snprintf(tuple, sizeof tuple, "%s_tuple", n->name);
            c->unwrap = c->num_children == 1 && strcmp(c->name, "array") && strcmp(c->name, tuple);
        }
    }
    return next;
}

static vc_status read_schema(tc_reader *r, pq_file *f) {
    int et;
    int64_t n = tc_list(r, &et);
    if (r->bad || et != TC_STRUCT || n < 1 || n > MAX_NODES)
        return vc_fail(VC_ERR_FORMAT, "%s: parquet footer: schema of %lld elements", f->path, (long long)n);
    f->nodes = vc_calloc((size_t)n, sizeof *f->nodes);
    f->leaf_node = vc_calloc((size_t)n, sizeof *f->leaf_node);
    if (!f->nodes || !f->leaf_node) return VC_ERR_NOMEM;
    f->n_nodes = (int)n;
    for (int64_t i = 0; i < n && !r->bad; i++) read_schema_element(r, &f->nodes[i]);
    if (r->bad) return vc_fail(VC_ERR_FORMAT, "%s: parquet footer: malformed schema", f->path);
    vc_status st = VC_OK;
    f->nodes[0].repetition = PQ_REQUIRED;
    int end = analyse(f, 0, -1, 0, &st);
    if (!st && end != f->n_nodes)
        st = vc_fail(VC_ERR_FORMAT, "%s: parquet schema: %d elements outside the root", f->path, f->n_nodes - end);
    return st;
}

/* FileMetaData's key_value_metadata: list<KeyValue {1: key, 2: value}>; keeps "huggingface"'s value */
static vc_status read_key_values(tc_reader *r, pq_file *f) {
    int et, last, id, t;
    int64_t n = tc_list(r, &et);
    for (int64_t i = 0; i < n && !r->bad && et == TC_STRUCT; i++) {
        const uint8_t *key = NULL, *val = NULL;
        size_t kn = 0, vn = 0;
        last = 0;
        while (tc_field(r, &last, &id, &t)) {
            if (id == 1 && t == TC_BINARY) key = tc_binary(r, &kn);
            else if (id == 2 && t == TC_BINARY) val = tc_binary(r, &vn);
            else tc_skip(r, t);
        }
        if (key && val && kn == 11 && !memcmp(key, "huggingface", 11) && !f->hf_meta &&
            !(f->hf_meta = strndup((const char *)val, vn)))
            return VC_ERR_NOMEM;
    }
    if (et != TC_STRUCT && n > 0)
        for (int64_t i = 0; i < n && !r->bad; i++) tc_skip(r, et);
    return VC_OK;
}

vc_status pq_meta_read(pq_file *f) {
    if (f->size < 12 || memcmp(f->data, "PAR1", 4) || memcmp(f->data + f->size - 4, "PAR1", 4)) {
        if (f->size >= 8 && !memcmp(f->data + f->size - 4, "PARE", 4))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: encrypted parquet files are not read", f->path);
        return vc_fail(VC_ERR_FORMAT, "%s: not a parquet file (no PAR1 magic at both ends; truncated?)", f->path);
    }
    const uint8_t *q = f->data + f->size - 8;
    uint32_t flen = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    if (flen > f->size - 12)
        return vc_fail(VC_ERR_FORMAT, "%s: parquet footer length %u beyond the file (%zu bytes)", f->path, flen, f->size);
    tc_reader r = { .p = q - flen, .end = q };
    int last = 0, id, t, have_schema = 0, have_groups = 0;
    vc_status st = VC_OK;
    while (!st && tc_field(&r, &last, &id, &t)) {
        if (id == 2 && t == TC_LIST && !have_schema) {
            st = read_schema(&r, f);
            have_schema = 1;
        } else if (id == 3 && t == TC_I64) f->num_rows = tc_int(&r);
        else if (id == 5 && t == TC_LIST) st = read_key_values(&r, f);
        else if (id == 4 && t == TC_LIST && have_schema && !have_groups) {
            int et;
            int64_t n = tc_list(&r, &et);
            if (r.bad || et != TC_STRUCT) break;
            f->groups = vc_calloc((size_t)(n ? n : 1), sizeof *f->groups);
            if (!f->groups) return VC_ERR_NOMEM;
            f->n_groups = (int)n;
            for (int64_t g = 0; g < n && !st; g++) st = read_row_group(&r, f, &f->groups[g]);
            have_groups = 1;
        } else tc_skip(&r, t);
    }
    if (st) return st;
    if (r.bad || !have_schema || !have_groups)
        return vc_fail(VC_ERR_FORMAT, "%s: parquet footer malformed (%s)", f->path,
                       !have_schema ? "no schema" : !have_groups ? "no row groups" : "bad Thrift data");
    int64_t rows = 0;
    for (int g = 0; g < f->n_groups; g++) rows += f->groups[g].num_rows;
    if (rows != f->num_rows)
        return vc_fail(VC_ERR_FORMAT, "%s: parquet footer: %lld rows, row groups hold %lld", f->path,
                       (long long)f->num_rows, (long long)rows);
    return VC_OK;
}

void pq_meta_free(pq_file *f) {
    for (int i = 0; i < f->n_nodes; i++) free(f->nodes[i].name);
    for (int g = 0; g < f->n_groups; g++) free(f->groups[g].cols);
    free(f->nodes);
    free(f->leaf_node);
    free(f->groups);
    free(f->hf_meta);
    f->hf_meta = NULL;
    f->nodes = NULL;
    f->leaf_node = NULL;
    f->groups = NULL;
    f->n_nodes = f->n_leaves = f->n_groups = 0;
}

const char *pq_leaf_name(const pq_file *f, int leaf, char *buf, size_t cap) {
    int chain[MAX_DEPTH + 2], n = 0;
    for (int i = f->leaf_node[leaf]; i > 0 && n < MAX_DEPTH + 2; i = f->nodes[i].parent) chain[n++] = i;
    size_t at = 0;
    buf[0] = 0;
    while (n-- > 0 && at < cap) at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? "." : "", f->nodes[chain[n]].name);
    return buf;
}
