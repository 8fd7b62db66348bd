/* A Parquet schema from JSON rows, as pyarrow infers a table's types from Python rows (json.loads' values):
 * null alone is the null type, bools, ints (int64), floats (double; ints and floats together are double), strings,
 * lists of one item type, and dicts as structs whose fields are every key seen, in the order first seen (a key a row
 * lacks is null there). Types that cannot share a column fail, as pyarrow's inference does, naming row and key. A
 * string column whose every value is the data URI the reader gives binary bytes (image bytes) is binary again. */
#include "parquet_w.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *KIND[] = { "null", "bool", "int", "float", "string", "list", "object" };

int pw_int_value(const cJSON *j, int64_t *out) {
    if (j->valuestring) { /* (vc_json_keep_numbers' token: every digit of an int) */
        errno = 0;
        char *end;
        long long v = strtoll(j->valuestring, &end, 10);
        if (errno || *end) return 0;
        *out = v;
        return 1;
    }
    double d = j->valuedouble;
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return 0;
    *out = (int64_t)d;
    return 1;
}

int pw_uint_value(const cJSON *j, uint64_t *out) {
    if (!j->valuestring || j->valuestring[0] == '-') return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(j->valuestring, &end, 10);
    if (errno || *end || v < (1ULL << 63)) return 0;
    *out = v;
    return 1;
}

static int kind_of(const cJSON *v) {
    if (cJSON_IsNull(v)) return PW_NULL;
    if (cJSON_IsBool(v)) return PW_BOOL;
    if (cJSON_IsNumber(v)) return vc_json_number_is_float(v) ? PW_DOUBLE : PW_INT;
    if (cJSON_IsString(v)) return PW_STRING;
    if (cJSON_IsArray(v)) return PW_LIST;
    return PW_STRUCT;
}

static pw_node *node_new(const char *name) {
    pw_node *n = calloc(1, sizeof *n);
    if (n && !(n->name = strdup(name))) {
        free(n);
        n = NULL;
    }
    if (n) n->leaf = -1;
    return n;
}

static pw_node *kid(pw_node *n, const char *name, int hint) {
    if (hint < n->n_kids && !strcmp(n->kids[hint]->name, name)) return n->kids[hint];
    for (int i = 0; i < n->n_kids; i++)
        if (!strcmp(n->kids[i]->name, name)) return n->kids[i];
    if (n->n_kids == n->cap_kids) {
        int cap = n->cap_kids ? 2 * n->cap_kids : 8;
        pw_node **k = realloc(n->kids, sizeof *k * (size_t)cap);
        if (!k) return NULL;
        n->kids = k;
        n->cap_kids = cap;
    }
    pw_node *c = node_new(name);
    if (c) n->kids[n->n_kids++] = c;
    return c;
}

typedef struct {
    size_t row;
    const char *path;
    char key[512];
} ictx;

static vc_status merge(ictx *x, pw_node *n, const cJSON *v) {
    int k = kind_of(v);
    if (k == PW_NULL) return VC_OK;
    if (n->kind == PW_NULL) n->kind = k;
    else if ((n->kind == PW_INT && k == PW_DOUBLE) || (n->kind == PW_DOUBLE && k == PW_INT)) n->kind = PW_DOUBLE;
    else if (n->kind != k)
        return vc_fail(VC_ERR_FORMAT, "%s: row %zu: key '%s' holds a %s where earlier rows hold a %s (one Parquet column "
                       "has one type)", x->path, x->row, x->key, KIND[k], KIND[n->kind]);
    if (k == PW_INT) {
        int64_t i;
        uint64_t u;
        if (pw_int_value(v, &i)) n->neg |= i < 0;
        else if (pw_uint_value(v, &u)) n->big = 1;
        else
            return vc_fail(VC_ERR_FORMAT, "%s: row %zu: key '%s': an int past 64 bits (%s)", x->path, x->row, x->key,
                           v->valuestring ? v->valuestring : "?");
        if (n->neg && n->big)
            return vc_fail(VC_ERR_FORMAT, "%s: row %zu: key '%s' holds ints below 0 and past 2^63 - 1 (no 64-bit type "
                           "holds both)", x->path, x->row, x->key);
    }
    if (k == PW_STRING) {
        n->n_str++;
        n->n_uri += !strncmp(v->valuestring, VC_DATA_URI_BINARY, strlen(VC_DATA_URI_BINARY));
    }
    if (k == PW_LIST) {
        if (!n->elem && !(n->elem = node_new("element"))) return VC_ERR_NOMEM;
        size_t l = strlen(x->key);
        snprintf(x->key + l, sizeof x->key - l, "[]");
        for (const cJSON *c = v->child; c; c = c->next) {
            vc_status st = merge(x, n->elem, c);
            if (st) return st;
        }
        x->key[l] = 0;
    } else if (k == PW_STRUCT) {
        int i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            pw_node *f = c->string ? kid(n, c->string, i) : NULL;
            if (!f) return VC_ERR_NOMEM;
            size_t l = strlen(x->key);
            snprintf(x->key + l, sizeof x->key - l, "%s%s", l ? "." : "", c->string);
            vc_status st = merge(x, f, c);
            x->key[l] = 0;
            if (st) return st;
        }
    }
    return VC_OK;
}

vc_status pw_infer(pw_node *root, const cJSON *row, size_t index, const char *path) {
    if (!cJSON_IsObject(row)) return vc_fail(VC_ERR_FORMAT, "%s: row %zu is not an object", path, index);
    ictx x = { .row = index, .path = path };
    root->kind = PW_STRUCT;
    return merge(&x, root, row);
}

typedef struct {
    int leaves;
    const char *path;
    char key[512];
} lctx;

static int levels(lctx *x, pw_node *n, int def, int rep) {
    n->def = def + 1; /* every column and field is optional, as pyarrow writes them */
    n->rep = rep;
    size_t l = strlen(x->key);
    if (n->kind == PW_LIST) {
        if (!n->elem && !(n->elem = node_new("element"))) return -1; /* (a list only ever empty: list<null>) */
        snprintf(x->key + l, sizeof x->key - l, "[]");
        int r = levels(x, n->elem, def + 2, rep + 1); /* (the repeated group between them: def + 2) */
        x->key[l] = 0;
        return r;
    }
    if (n->kind == PW_STRUCT) {
        if (!n->n_kids) {
            vc_fail(VC_ERR_FORMAT, "%s: key '%s' is an empty object in every row: Parquet has no struct without fields",
                    x->path, x->key);
            return -1;
        }
        for (int i = 0; i < n->n_kids; i++) {
            snprintf(x->key + l, sizeof x->key - l, "%s%s", l ? "." : "", n->kids[i]->name);
            int r = levels(x, n->kids[i], n->def, rep);
            x->key[l] = 0;
            if (r < 0) return r;
        }
        return 0;
    }
    n->leaf = x->leaves++;
    return 0;
}

int pw_levels(pw_node *root, const char *path) {
    lctx x = { .path = path };
    root->def = root->rep = 0;
    for (int i = 0; i < root->n_kids; i++) {
        snprintf(x.key, sizeof x.key, "%s", root->kids[i]->name);
        if (levels(&x, root->kids[i], 0, 0) < 0) return -1;
    }
    return x.leaves;
}

int pw_binary(const pw_node *n) { return n->kind == PW_STRING && n->n_str > 0 && n->n_uri == n->n_str; }

void pw_node_free(pw_node *n) {
    if (!n) return;
    for (int i = 0; i < n->n_kids; i++) pw_node_free(n->kids[i]);
    pw_node_free(n->elem);
    free(n->kids);
    free(n->name);
    free(n);
}

/* a later member of c's object has c's key */
static int repeated_later(const cJSON *c) {
    for (const cJSON *d = c->next; d; d = d->next)
        if (!strcmp(d->string, c->string)) return 1;
    return 0;
}

int pw_same(const cJSON *a, const cJSON *b) {
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        for (const cJSON *c = a->child; c; c = c->next) {
            if (repeated_later(c)) continue; /* (the last of a repeated key is the value written) */
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, c->string);
            if (!(d ? pw_same(c, d) : cJSON_IsNull(c))) return 0;
        }
        for (const cJSON *d = b->child; d; d = d->next)
            if (!cJSON_GetObjectItemCaseSensitive(a, d->string) && !cJSON_IsNull(d)) return 0;
        return 1;
    }
    if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
        const cJSON *c = a->child, *d = b->child;
        for (; c && d; c = c->next, d = d->next)
            if (!pw_same(c, d)) return 0;
        return !c && !d;
    }
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        int64_t x, y;
        uint64_t u, w;
        if (!vc_json_number_is_float(a) && !vc_json_number_is_float(b) && pw_int_value(a, &x) && pw_int_value(b, &y))
            return x == y;
        if (!vc_json_number_is_float(a) && !vc_json_number_is_float(b) && pw_uint_value(a, &u) && pw_uint_value(b, &w))
            return u == w;
        return a->valuedouble == b->valuedouble && vc_json_number_is_float(a) <= vc_json_number_is_float(b);
    }
    return cJSON_Compare(a, b, 1);
}
