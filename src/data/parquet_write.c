/* JSON rows written as a Parquet file (vc_parquet_write): the schema inferred as pyarrow infers it
 * (parquet_infer.c; the reader's data URIs of binary values written as the bytes), each row shredded into its leaf columns' definition and repetition levels (Dremel's
 * algorithm, the three-level lists and optional fields pyarrow writes), data pages v1 of PLAIN values and
 * RLE levels, snappy-compressed, pages of about 1 MiB cut at row boundaries, row groups of up to 128 MiB, the
 * footer in the Thrift compact protocol; the file written atomically. */
#include "parquet_thrift.h"
#include "parquet_w.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>

static size_t PAGE_BYTES = 1 << 20, GROUP_BYTES = 128 << 20;
enum { GROUP_ROWS = 1 << 20 };

void pw_set_limits(size_t page_bytes, size_t group_bytes) {
    PAGE_BYTES = page_bytes ? page_bytes : 1 << 20;
    GROUP_BYTES = group_bytes ? group_bytes : 128 << 20;
}
enum { T_BOOLEAN = 0, T_INT32 = 1, T_INT64 = 2, T_DOUBLE = 5, T_BYTE_ARRAY = 6 };
enum { CODEC_SNAPPY = 1, ENC_PLAIN = 0, ENC_RLE = 3 };

typedef struct pw_col {
    const pw_node *leaf;
    const char **path; /* names from the top-level column down */
    int depth;
    uint16_t *def, *rep; /* the current page's levels */
    int64_t n, cap;
    pw_buf vals; /* its PLAIN values (booleans a byte each until the page is written) */
    int64_t n_vals;
    pw_buf chunk; /* the row group's pages so far */
    int64_t chunk_values, chunk_raw;
} pw_col;

typedef struct { int64_t offset, raw, size, values; } pw_chunk_meta;
typedef struct { int64_t rows, bytes; pw_chunk_meta *cols; } pw_group;

typedef struct pw_writer {
    const char *path;
    pw_col *cols;
    int n_cols;
    pw_buf file;
    pw_group *groups;
    int n_groups, cap_groups;
    int64_t group_rows, rows;
    vc_status err;
    const char *hf_meta; /* Hugging Face datasets' "huggingface" key-value metadata, or NULL */
} pw_writer;

/* ---- shredding ---- */
static void push_levels(pw_writer *w, pw_col *c, int d, int r) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 1024;
        uint16_t *dd = realloc(c->def, sizeof *dd * (size_t)cap);
        if (dd) c->def = dd;
        uint16_t *rr = dd ? realloc(c->rep, sizeof *rr * (size_t)cap) : NULL;
        if (rr) c->rep = rr;
        if (!dd || !rr) { w->err = VC_ERR_NOMEM; return; }
        c->cap = cap;
    }
    c->def[c->n] = (uint16_t)d;
    c->rep[c->n++] = (uint16_t)r;
}

static void null_leaves(pw_writer *w, const pw_node *n, int r, int d) {
    if (n->leaf >= 0) push_levels(w, &w->cols[n->leaf], d, r);
    if (n->elem) null_leaves(w, n->elem, r, d);
    for (int i = 0; i < n->n_kids; i++) null_leaves(w, n->kids[i], r, d);
}

static void put_value(pw_writer *w, pw_col *c, const pw_node *n, const cJSON *v) {
    if (n->kind == PW_BOOL) pb_byte(&c->vals, cJSON_IsTrue(v));
    else if (n->kind == PW_INT) {
        int64_t i = 0;
        uint64_t u = 0;
        if (pw_int_value(v, &i)) u = (uint64_t)i;
        else pw_uint_value(v, &u); /* (one or the other: checked by the inference) */
        for (int b = 0; b < 8; b++) pb_byte(&c->vals, (uint8_t)(u >> (8 * b)));
    } else if (n->kind == PW_DOUBLE) {
        double d = v->valuedouble;
        int64_t i = 0;
        if (!vc_json_number_is_float(v) && (!pw_int_value(v, &i) || i > (1LL << 53) || i < -(1LL << 53)) && !w->err)
            w->err = vc_fail(VC_ERR_FORMAT, "%s: row %lld: column '%s' holds floats and the int %s, past what a "
                             "double holds exactly (2^53)", w->path, (long long)w->rows + 1, c->path[0],
                             v->valuestring ? v->valuestring : "?");
        uint64_t u;
        memcpy(&u, &d, 8);
        for (int b = 0; b < 8; b++) pb_byte(&c->vals, (uint8_t)(u >> (8 * b)));
    } else if (pw_binary(n)) { /* the reader's data URI of binary bytes: the bytes */
        const char *b64 = v->valuestring + strlen(VC_DATA_URI_BINARY);
        uint8_t *bytes = NULL;
        size_t len = 0;
        if (vc_base64_decode(b64, strlen(b64), "a binary value", &bytes, &len)) {
            if (!w->err)
                w->err = vc_fail(VC_ERR_FORMAT, "%s: row %lld: column '%s': %s", w->path, (long long)w->rows + 1,
                                 c->path[0], vc_last_error());
        } else {
            pb_u32le(&c->vals, (uint32_t)len);
            pb_put(&c->vals, bytes, len);
        }
        free(bytes);
    } else {
        size_t len = strlen(v->valuestring);
        pb_u32le(&c->vals, (uint32_t)len);
        pb_put(&c->vals, v->valuestring, len);
    }
    c->n_vals++;
}

/* obj's member named key: the last of several, as json.loads keeps it (NULL: absent) */
static const cJSON *member(const cJSON *obj, const char *key) {
    const cJSON *m = NULL;
    for (const cJSON *c = obj->child; c; c = c->next)
        if (c->string && !strcmp(c->string, key)) m = c;
    return m;
}

/* n's value v (NULL: the key is absent) at repetition level r, its parent present up to definition level d */
static void shred(pw_writer *w, const pw_node *n, const cJSON *v, int r, int d) {
    if (!v || cJSON_IsNull(v) || n->kind == PW_NULL) {
        null_leaves(w, n, r, d);
        return;
    }
    if (n->leaf >= 0) {
        pw_col *c = &w->cols[n->leaf];
        push_levels(w, c, n->def, r);
        put_value(w, c, n, v);
    } else if (n->kind == PW_LIST) {
        if (!v->child) null_leaves(w, n->elem, r, n->def); /* an empty list: present, no items */
        int first = 1;
        for (const cJSON *it = v->child; it; it = it->next, first = 0)
            shred(w, n->elem, it, first ? r : n->elem->rep, n->def + 1);
    } else
        for (int i = 0; i < n->n_kids; i++)
            shred(w, n->kids[i], member(v, n->kids[i]->name), r, n->def);
}

/* ---- pages ---- */
static int bit_width(int max) {
    int b = 0;
    while ((1 << b) <= max) b++;
    return b;
}

/* the RLE / bit-packed hybrid as runs of equal levels, behind its 4-byte length */
static void rle_levels(pw_buf *b, const uint16_t *lv, int64_t n, int max) {
    int bytes = (bit_width(max) + 7) / 8;
    size_t at = b->n;
    pb_u32le(b, 0);
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && lv[j] == lv[i] && j - i < (1 << 30)) j++;
        pb_varint(b, (uint64_t)(j - i) << 1);
        for (int k = 0; k < bytes; k++) pb_byte(b, (uint8_t)(lv[i] >> (8 * k)));
        i = j;
    }
    if (!b->oom) {
        uint32_t len = (uint32_t)(b->n - at - 4);
        for (int k = 0; k < 4; k++) b->p[at + k] = (uint8_t)(len >> (8 * k));
    }
}

static vc_status flush_page(pw_writer *w, pw_col *c) {
    if (!c->n) return VC_OK;
    pw_buf page = { 0 }, head = { 0 };
    if (c->leaf->rep > 0) rle_levels(&page, c->rep, c->n, c->leaf->rep);
    rle_levels(&page, c->def, c->n, c->leaf->def);
    if (c->leaf->kind == PW_BOOL) { /* PLAIN booleans: bit-packed, the first in the lowest bit */
        for (int64_t i = 0; i < c->n_vals; i += 8) {
            uint8_t byte = 0;
            for (int64_t k = i; k < i + 8 && k < c->n_vals; k++) byte |= (uint8_t)(c->vals.p[k] << (k - i));
            pb_byte(&page, byte);
        }
    } else
        pb_put(&page, c->vals.p, c->vals.n);
    vc_status st = page.oom || c->vals.oom ? VC_ERR_NOMEM : VC_OK;
    if (!st && page.n > 0x7fffff00u)
        st = vc_fail(VC_ERR_FORMAT, "%s: column '%s': a page of %zu bytes past Parquet's 2 GiB (a value too large)",
                     w->path, c->path[0], page.n);
    size_t cap = snappy_max_compressed_length(page.n), got = cap;
    char *z = st ? NULL : malloc(cap ? cap : 1);
    if (!st && !z) st = VC_ERR_NOMEM;
    if (!st && snappy_compress((const char *)page.p, page.n, z, &got) != SNAPPY_OK)
        st = vc_fail(VC_ERR_INTERNAL, "%s: snappy compression failed", w->path);
    if (!st) {
        tw t = { .b = &head };
        tw_i32(&t, 1, 0); /* DATA_PAGE */
        tw_i32(&t, 2, (int64_t)page.n);
        tw_i32(&t, 3, (int64_t)got);
        tw_begin(&t, 5);
        tw_i32(&t, 1, c->n);
        tw_i32(&t, 2, ENC_PLAIN);
        tw_i32(&t, 3, ENC_RLE);
        tw_i32(&t, 4, ENC_RLE);
        tw_end(&t);
        tw_end(&t);
        pb_put(&c->chunk, head.p, head.n);
        pb_put(&c->chunk, z, got);
        c->chunk_values += c->n;
        c->chunk_raw += (int64_t)(head.n + page.n);
        if (head.oom || c->chunk.oom) st = VC_ERR_NOMEM;
    }
    free(z);
    pb_free(&page);
    pb_free(&head);
    c->n = 0;
    c->vals.n = 0;
    c->n_vals = 0;
    return st;
}

static vc_status flush_group(pw_writer *w) {
    if (!w->group_rows) return VC_OK;
    if (w->n_groups == w->cap_groups) {
        int cap = w->cap_groups ? 2 * w->cap_groups : 4;
        pw_group *g = realloc(w->groups, sizeof *g * (size_t)cap);
        if (!g) return VC_ERR_NOMEM;
        w->groups = g;
        w->cap_groups = cap;
    }
    pw_group *g = &w->groups[w->n_groups];
    *g = (pw_group){ w->group_rows, 0, calloc((size_t)w->n_cols + 1, sizeof(pw_chunk_meta)) };
    if (!g->cols) return VC_ERR_NOMEM;
    w->n_groups++;
    for (int i = 0; i < w->n_cols; i++) {
        pw_col *c = &w->cols[i];
        vc_status st = flush_page(w, c);
        if (st) return st;
        g->cols[i] = (pw_chunk_meta){ (int64_t)w->file.n, c->chunk_raw, (int64_t)c->chunk.n, c->chunk_values };
        g->bytes += c->chunk_raw;
        pb_put(&w->file, c->chunk.p, c->chunk.n);
        c->chunk.n = 0;
        c->chunk_raw = c->chunk_values = 0;
    }
    w->group_rows = 0;
    return w->file.oom ? VC_ERR_NOMEM : VC_OK;
}

/* after each row: pages past PAGE_BYTES written, the row group closed past its bytes or rows */
static vc_status row_done(pw_writer *w) {
    int64_t bytes = 0;
    w->group_rows++;
    w->rows++;
    for (int i = 0; i < w->n_cols; i++) {
        pw_col *c = &w->cols[i];
        if (c->vals.n + (size_t)c->n * 4 >= PAGE_BYTES) {
            vc_status st = flush_page(w, c);
            if (st) return st;
        }
        bytes += (int64_t)(c->chunk.n + c->vals.n) + c->n * 4;
    }
    return (size_t)bytes >= GROUP_BYTES || w->group_rows >= GROUP_ROWS ? flush_group(w) : VC_OK;
}

/* ---- the footer ---- */
static int count_elems(const pw_node *n) {
    int k = 1 + (n->kind == PW_LIST ? 1 + count_elems(n->elem) : 0);
    for (int i = 0; i < n->n_kids; i++) k += count_elems(n->kids[i]);
    return k;
}

static void empty_union(tw *t, int id, int member) {
    tw_begin(t, id);
    tw_begin(t, member);
    tw_end(t);
    tw_end(t);
}

static void schema_elems(tw *t, const pw_node *n) {
    static const int TYPE[] = { T_INT32, T_BOOLEAN, T_INT64, T_DOUBLE, T_BYTE_ARRAY };
    tw_elem_begin(t);
    if (n->leaf >= 0) tw_i32(t, 1, TYPE[n->kind]);
    tw_i32(t, 3, 1); /* OPTIONAL */
    tw_str(t, 4, n->name);
    if (n->kind == PW_LIST || n->kind == PW_STRUCT) tw_i32(t, 5, n->kind == PW_LIST ? 1 : n->n_kids);
    int text = n->kind == PW_STRING && !pw_binary(n);
    if (text) tw_i32(t, 6, 0); /* UTF8 */
    if (n->kind == PW_INT && n->big) tw_i32(t, 6, 14); /* UINT_64 */
    if (n->kind == PW_LIST) tw_i32(t, 6, 3);   /* LIST */
    if (text) empty_union(t, 10, 1);
    if (n->kind == PW_LIST) empty_union(t, 10, 3);
    if (n->kind == PW_NULL) empty_union(t, 10, 11); /* UNKNOWN: pyarrow's null type */
    if (n->kind == PW_INT && n->big) { /* INTEGER(64, unsigned) */
        tw_begin(t, 10);
        tw_begin(t, 10);
        tw_byte(t, 1, 64);
        tw_bool(t, 2, 0);
        tw_end(t);
        tw_end(t);
    }
    tw_end(t);
    if (n->kind == PW_LIST) {
        tw_elem_begin(t);
        tw_i32(t, 3, 2); /* REPEATED */
        tw_str(t, 4, "list");
        tw_i32(t, 5, 1);
        tw_end(t);
        schema_elems(t, n->elem);
    }
    for (int i = 0; i < n->n_kids; i++) schema_elems(t, n->kids[i]);
}

static void column_meta(tw *t, const pw_col *c, const pw_chunk_meta *m) {
    static const int TYPE[] = { T_INT32, T_BOOLEAN, T_INT64, T_DOUBLE, T_BYTE_ARRAY };
    tw_elem_begin(t);
    tw_i64(t, 2, m->offset);
    tw_begin(t, 3);
    tw_i32(t, 1, TYPE[c->leaf->kind]);
    tw_list(t, 2, TC_I32, 2);
    tw_elem_i32(t, ENC_PLAIN);
    tw_elem_i32(t, ENC_RLE);
    tw_list(t, 3, TC_BINARY, (size_t)c->depth);
    for (int k = 0; k < c->depth; k++) tw_elem_bin(t, c->path[k]);
    tw_i32(t, 4, CODEC_SNAPPY);
    tw_i64(t, 5, m->values);
    tw_i64(t, 6, m->raw);
    tw_i64(t, 7, m->size);
    tw_i64(t, 9, m->offset);
    tw_end(t);
    tw_end(t);
}

static void footer(const pw_writer *w, const pw_node *root, pw_buf *b) {
    tw t = { .b = b };
    tw_i32(&t, 1, 2);
    tw_list(&t, 2, TC_STRUCT, (size_t)count_elems(root));
    tw_elem_begin(&t);
    tw_str(&t, 4, "schema");
    tw_i32(&t, 5, root->n_kids);
    tw_end(&t);
    for (int i = 0; i < root->n_kids; i++) schema_elems(&t, root->kids[i]);
    tw_i64(&t, 3, w->rows);
    tw_list(&t, 4, TC_STRUCT, (size_t)w->n_groups);
    for (int g = 0; g < w->n_groups; g++) {
        tw_elem_begin(&t);
        tw_list(&t, 1, TC_STRUCT, (size_t)w->n_cols);
        for (int i = 0; i < w->n_cols; i++) column_meta(&t, &w->cols[i], &w->groups[g].cols[i]);
        tw_i64(&t, 2, w->groups[g].bytes);
        tw_i64(&t, 3, w->groups[g].rows);
        tw_end(&t);
    }
    if (w->hf_meta) { /* key_value_metadata: [{key, value}] */
        tw_list(&t, 5, TC_STRUCT, 1);
        tw_elem_begin(&t);
        tw_str(&t, 1, "huggingface");
        tw_str(&t, 2, w->hf_meta);
        tw_end(&t);
    }
    tw_str(&t, 6, "verlc");
    pb_byte(b, TC_STOP);
}

/* ---- setup ---- */
static vc_status col_paths(pw_writer *w, const pw_node *n, const char **stack, int depth) {
    if (depth >= 1000) return vc_fail(VC_ERR_FORMAT, "%s: rows nested past 1,000 levels", w->path);
    stack[depth++] = n->name;
    if (n->leaf >= 0) {
        pw_col *c = &w->cols[n->leaf];
        c->leaf = n;
        c->depth = depth;
        if (!(c->path = malloc(sizeof *c->path * (size_t)depth))) return VC_ERR_NOMEM;
        memcpy(c->path, stack, sizeof *stack * (size_t)depth);
        return VC_OK;
    }
    if (n->kind == PW_LIST) {
        stack[depth++] = "list";
        return col_paths(w, n->elem, stack, depth);
    }
    for (int i = 0; i < n->n_kids; i++) {
        vc_status st = col_paths(w, n->kids[i], stack, depth);
        if (st) return st;
    }
    return VC_OK;
}

static vc_status write_rows(pw_writer *w, const pw_node *root, cJSON *const *rows, size_t n_rows) {
    const char **stack = malloc(sizeof *stack * 2002);
    vc_status st = stack ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < root->n_kids; i++) st = col_paths(w, root->kids[i], stack, 0);
    free(stack);
    pb_put(&w->file, "PAR1", 4);
    for (size_t r = 0; !st && r < n_rows; r++) {
        for (int i = 0; i < root->n_kids; i++)
            shred(w, root->kids[i], member(rows[r], root->kids[i]->name), 0, 0);
        st = w->err ? w->err : row_done(w);
    }
    if (!st) st = flush_group(w);
    if (!st) {
        pw_buf foot = { 0 };
        footer(w, root, &foot);
        pb_put(&w->file, foot.p, foot.n);
        pb_u32le(&w->file, (uint32_t)foot.n);
        pb_put(&w->file, "PAR1", 4);
        if (foot.oom || w->file.oom) st = VC_ERR_NOMEM;
        pb_free(&foot);
    }
    return st;
}

vc_status vc_parquet_write(const char *path, cJSON *const *rows, size_t n_rows) {
    return vc_parquet_write_hf(path, rows, n_rows, NULL, -1);
}

vc_status vc_parquet_write_hf(const char *path, cJSON *const *rows, size_t n_rows, const char *const *images, int n_images) {
    pw_node root = { .name = "schema", .kind = PW_STRUCT, .leaf = -1 };
    pw_writer w = { .path = path };
    vc_status st = VC_OK;
    char *meta = NULL;
    for (size_t r = 0; !st && r < n_rows; r++) st = pw_infer(&root, rows[r], r + 1, path);
    if (!st && n_images > 0) pw_hf_image_types(&root, images, n_images);
    int n_cols = st ? 0 : pw_levels(&root, path);
    if (!st && n_cols < 0) st = VC_ERR_FORMAT;
    if (!st && n_images >= 0 && !(st = pw_hf_features(&root, images, n_images, path, &meta))) w.hf_meta = meta;
    if (!st && !(w.cols = calloc((size_t)n_cols + 1, sizeof *w.cols))) st = VC_ERR_NOMEM;
    w.n_cols = n_cols;
    if (!st) st = write_rows(&w, &root, rows, n_rows);
    if (st == VC_ERR_NOMEM) vc_fail(st, "%s: out of memory writing Parquet", path);
    if (!st) st = vc_write_file_atomic(path, w.file.p, w.file.n);
    for (int i = 0; w.cols && i < w.n_cols; i++) {
        free(w.cols[i].def);
        free(w.cols[i].rep);
        free(w.cols[i].path);
        pb_free(&w.cols[i].vals);
        pb_free(&w.cols[i].chunk);
    }
    for (int g = 0; g < w.n_groups; g++) free(w.groups[g].cols);
    free(w.groups);
    free(w.cols);
    pb_free(&w.file);
    for (int i = 0; i < root.n_kids; i++) pw_node_free(root.kids[i]);
    free(root.kids);
    free(meta);
    return st;
}
