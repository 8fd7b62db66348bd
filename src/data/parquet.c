/* Parquet rows as JSON objects: each row group's leaf columns are decoded (parquet_col.c) and rows are
 * assembled from their definition and repetition levels (record assembly as in the Dremel paper):
 * groups become objects, LIST groups arrays (3-level lists unwrapped to their items, 2-level ones
 * kept), MAP groups objects keyed by the key column, bare repeated fields arrays. Values: booleans,
 * integers (unsigned types as unsigned), floats (NaN and infinities as null, as the JSONL reader's
 * NaN), strings and other byte arrays as strings (binary that is not UTF-8, such as image bytes, as a
 * "data:application/octet-stream;base64,..." URI), decimals as numbers, dates as days and timestamps
 * as their integer since the epoch (INT96 as nanoseconds). A column with fewer or more entries than
 * its rows need is an error naming it. On request, the image columns that Hugging Face datasets decodes to PIL
 * images (its features in the file's metadata) have their image objects marked "pil": true (parquet_hf.c). */
#include "parquet.h"
#include "verlc/json.h"
#include "verlc/data.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct asm_ctx {
    const pq_file *f;
    pq_column *cols;
    int64_t *cur, *vcur; /* [n_leaves] next entry and next value of each leaf */
    int bad;             /* the leaf column whose levels did not fit, + 1 */
    int bad_text;        /* the leaf column of a string that is not UTF-8, + 1 */
} asm_ctx;

static double pow10i(int e) {
    double p = 1;
    for (int i = 0; i < e && i < 400; i++) p *= 10;
    return p;
}

/* a big-endian two's complement integer (a decimal's unscaled value) */
static double be_int(const uint8_t *p, uint32_t n) {
    if (!n) return 0;
    double v = (int8_t)p[0];
    for (uint32_t i = 1; i < n; i++) v = v * 256 + p[i];
    return v;
}

/* well-formed UTF-8 without NUL bytes */
static int utf8_text(const uint8_t *p, uint32_t n) {
    for (uint32_t i = 0; i < n;) {
        uint8_t c = p[i];
        int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!c || !len || len > (int)(n - i) || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return 0;
        for (int k = 1; k < len; k++)
            if ((p[i + k] & 0xc0) != 0x80) return 0;
        if (len == 3 && ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] >= 0xa0))) return 0;
        if (len == 4 && ((c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] >= 0x90))) return 0;
        i += (uint32_t)len;
    }
    return 1;
}

/* a FLOAT / DOUBLE value: a float, as pyarrow's to_pylist gives it, with Python's repr as its token
 * (vc_json_keep_numbers' convention: a chat template prints 1.0, not 1) */
static cJSON *num_or_null(double v) {
    cJSON *j = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
    if (j && isfinite(v)) {
        char t[40];
        vc_py_float_repr(v, t, sizeof t);
        j->valuestring = vc_strdup(t);
    }
    return j;
}

/* an INT64 value (a UINT64 one where uns), its digits kept past 2^53 (where the double rounds it) */
static cJSON *int64_json(int64_t x, int uns) {
    uint64_t u = (uint64_t)x;
    cJSON *j = cJSON_CreateNumber(uns ? (double)u : (double)x);
    if (j && (uns ? u >= ((uint64_t)1 << 53) : (x >= ((int64_t)1 << 53) || x <= -((int64_t)1 << 53)))) {
        char t[24];
        if (uns) snprintf(t, sizeof t, "%llu", (unsigned long long)u);
        else snprintf(t, sizeof t, "%lld", (long long)x);
        j->valuestring = vc_strdup(t);
    }
    return j;
}

static cJSON *leaf_json(const pq_node *n, const pq_val *v) {
    int dec = n->converted == 5 || n->logical == 5;
    switch (n->type) {
    case PQ_BOOLEAN: return cJSON_CreateBool(v->i != 0);
    case PQ_INT32: {
        int uns = (n->converted >= 11 && n->converted <= 14) || (n->logical == 10 && !n->int_signed);
        double x = uns ? (double)(uint32_t)v->i : (double)(int32_t)v->i;
        return cJSON_CreateNumber(dec ? x / pow10i(n->scale) : x);
    }
    case PQ_INT64: {
        int uns = n->converted == 14 || (n->logical == 10 && !n->int_signed);
        double x = uns ? (double)(uint64_t)v->i : (double)v->i;
        if (!dec) return int64_json(v->i, uns);
        return cJSON_CreateNumber(dec ? x / pow10i(n->scale) : x);
    }
    case PQ_INT96: { /* nanoseconds of the day, then the Julian day */
        int64_t ns;
        int32_t day;
        memcpy(&ns, v->s.p, 8);
        memcpy(&day, v->s.p + 8, 4);
        return cJSON_CreateNumber(((double)day - 2440588.0) * 86400e9 + (double)ns);
    }
    case PQ_FLOAT:
    case PQ_DOUBLE: return num_or_null(v->d);
    default: break;
    }
    if (dec) return num_or_null(be_int(v->s.p, v->s.n) / pow10i(n->scale));
    if (!utf8_text(v->s.p, v->s.n)) { /* image bytes and other binary: a base64 data URI; a text column: an error */
        int text = n->converted == 0 || n->converted == 19 || n->logical == 1 || n->logical == 12;
        if (text) return NULL;
        char *uri = vc_base64_encode(VC_DATA_URI_BINARY, v->s.p, v->s.n);
        cJSON *j = uri ? cJSON_CreateString(uri) : NULL;
        free(uri);
        return j;
    }
    char *s = malloc((size_t)v->s.n + 1);
    if (!s) return NULL;
    memcpy(s, v->s.p, v->s.n);
    s[v->s.n] = 0;
    cJSON *j = cJSON_CreateString(s);
    free(s);
    return j;
}

/* the entry the next read of leaf l sees: its definition and repetition levels (-1 when none is left) */
static int peek_def(asm_ctx *a, int l) {
    const pq_column *c = &a->cols[l];
    if (a->cur[l] >= c->n) return -1;
    return c->def ? c->def[a->cur[l]] : 0;
}

static int peek_rep(asm_ctx *a, int l) {
    const pq_column *c = &a->cols[l];
    if (a->cur[l] >= c->n) return -1;
    return c->rep ? c->rep[a->cur[l]] : 0;
}

/* node absent here (null or empty): every leaf under it holds one entry for that */
static void skip_absent(asm_ctx *a, const pq_node *n) {
    for (int l = n->leaf0; l < n->leaf1; l++) {
        int d = peek_def(a, l);
        if (d < 0 || d >= n->def) {
            if (!a->bad) a->bad = l + 1;
            return;
        }
        a->cur[l]++;
    }
}

static cJSON *field(asm_ctx *a, const pq_node *n, int depth);

/* the value of n where it is present */
static cJSON *present(asm_ctx *a, const pq_node *n, int depth) {
    const pq_file *f = a->f;
    if (a->bad || depth > 128) return NULL;
    if (!n->num_children) {
        int l = n->leaf0;
        if (peek_def(a, l) != n->def) {
            a->bad = l + 1;
            return NULL;
        }
        a->cur[l]++;
        if (a->vcur[l] >= a->cols[l].n_vals) {
            a->bad = l + 1;
            return NULL;
        }
        cJSON *v = leaf_json(n, &a->cols[l].vals[a->vcur[l]++]);
        if (!v && !a->bad_text) a->bad_text = l + 1;
        return v;
    }
    const pq_node *c0 = &f->nodes[n->first_child];
    if (n->unwrap || n->kind == PQ_K_LIST) return field(a, c0, depth + 1); /* a list's item, or its repeated child */
    if (n->kind == PQ_K_MAP) { /* the repeated key_value group: entries become members */
        cJSON *obj = cJSON_CreateObject(), *kv = field(a, c0, depth + 1);
        const cJSON *e;
        cJSON_ArrayForEach(e, kv) {
            const cJSON *k = e->child, *v = k ? k->next : NULL;
            char num[64];
            const char *key = cJSON_IsString(k) ? k->valuestring : NULL;
            if (!key && cJSON_IsNumber(k)) snprintf(num, sizeof num, "%.17g", k->valuedouble), key = num;
            if (key && v && obj) cJSON_AddItemToObject(obj, key, cJSON_Duplicate(v, 1));
        }
        cJSON_Delete(kv);
        return obj;
    }
    cJSON *obj = cJSON_CreateObject();
    for (int i = 0, ci = n->first_child; i < n->num_children && !a->bad; i++) {
        const pq_node *c = &f->nodes[ci];
        cJSON *v = field(a, c, depth + 1);
        if (!v || !obj) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            return NULL;
        }
        cJSON_AddItemToObject(obj, c->name, v);
        ci += 1; /* next sibling: past this child's subtree */
        while (ci < f->n_nodes && f->nodes[ci].parent != n - f->nodes) ci++;
    }
    return obj;
}

/* the value of n as a member of its parent, which is present */
static cJSON *field(asm_ctx *a, const pq_node *n, int depth) {
    if (a->bad) return NULL;
    int d = peek_def(a, n->leaf0);
    if (d < 0) {
        a->bad = n->leaf0 + 1;
        return NULL;
    }
    if (n->repetition != PQ_REPEATED) {
        if (d < n->def) {
            skip_absent(a, n);
            return a->bad ? NULL : cJSON_CreateNull();
        }
        return present(a, n, depth);
    }
    cJSON *arr = cJSON_CreateArray();
    if (d < n->def) { /* an empty list */
        skip_absent(a, n);
        if (a->bad) cJSON_Delete(arr), arr = NULL;
        return arr;
    }
    for (;;) {
        cJSON *v = present(a, n, depth);
        if (!v || !arr) {
            cJSON_Delete(v);
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, v);
        if (peek_rep(a, n->leaf0) != n->rep) break; /* next entry starts an outer list's item or a row */
    }
    return arr;
}

static vc_status read_group(const pq_file *f, const pq_hf_cols *hf, int g, int64_t first, pq_row_fn fn, void *user) {
    int L = f->n_leaves;
    asm_ctx a = { .f = f };
    a.cols = vc_calloc((size_t)L, sizeof *a.cols);
    a.cur = vc_calloc((size_t)L, sizeof *a.cur);
    a.vcur = vc_calloc((size_t)L, sizeof *a.vcur);
    vc_status st = a.cols && a.cur && a.vcur ? VC_OK : VC_ERR_NOMEM;
    if (!st && !L && f->groups[g].num_rows) /* (pyarrow writes a table without columns as 0 rows) */
        st = vc_fail(VC_ERR_FORMAT, "%s: parquet row group %d: %lld rows without a column", f->path, g,
                     (long long)f->groups[g].num_rows);
    for (int l = 0; l < L && !st; l++) st = pq_column_read(f, g, l, &a.cols[l]);
    for (int64_t r = 0; r < f->groups[g].num_rows && !st; r++) {
        for (int l = 0; l < L && !a.bad; l++)
            if (peek_rep(&a, l) != 0) a.bad = l + 1; /* every column starts the row */
        cJSON *row = a.bad ? NULL : present(&a, &f->nodes[0], 0);
        if (!row) {
            char name[400];
            if (a.bad)
                st = vc_fail(VC_ERR_FORMAT, "%s: parquet column '%s' (row group %d): its levels do not fit row %lld",
                             f->path, pq_leaf_name(f, a.bad - 1, name, sizeof name), g, (long long)(first + r + 1));
            else if (a.bad_text)
                st = vc_fail(VC_ERR_FORMAT, "%s: parquet column '%s': row %lld holds a string that is not UTF-8", f->path,
                             pq_leaf_name(f, a.bad_text - 1, name, sizeof name), (long long)(first + r + 1));
            else st = VC_ERR_NOMEM;
            break;
        }
        if ((st = pq_hf_mark(hf, row))) {
            cJSON_Delete(row);
            break;
        }
        st = fn(user, row, first + r + 1);
    }
    for (int l = 0; l < L && !st; l++)
        if (a.cur[l] != a.cols[l].n || a.vcur[l] != a.cols[l].n_vals) {
            char name[400];
            st = vc_fail(VC_ERR_FORMAT, "%s: parquet column '%s' (row group %d): %lld entries beyond its %lld rows",
                         f->path, pq_leaf_name(f, l, name, sizeof name), g, (long long)(a.cols[l].n - a.cur[l]),
                         (long long)f->groups[g].num_rows);
        }
    for (int l = 0; a.cols && l < L; l++) pq_column_free(&a.cols[l]);
    free(a.cols);
    free(a.cur);
    free(a.vcur);
    return st;
}

vc_status pq_rows(const char *path, const uint8_t *data, size_t size, int hf_images, pq_row_fn fn, void *user) {
    pq_file f = { .path = path, .data = data, .size = size };
    pq_hf_cols hf = { 0 };
    vc_status st = pq_meta_read(&f);
    if (!st && hf_images) st = pq_hf_images(&f, &hf);
    int64_t first = 0;
    for (int g = 0; g < f.n_groups && !st; g++) {
        st = read_group(&f, &hf, g, first, fn, user);
        first += f.groups[g].num_rows;
    }
    pq_hf_free(&hf);
    pq_meta_free(&f);
    return st;
}
