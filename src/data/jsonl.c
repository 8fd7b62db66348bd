/* JSONL reading: one JSON object per line, malformed lines reported with file, line and column. */
#define _GNU_SOURCE
#include "verlc/data.h"
#include "verlc/json.h"
#include "parquet.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vc_status add_row(vc_jsonl *d, cJSON *row, int64_t line) {
    if (d->n_rows == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        cJSON **rows = realloc(d->rows, cap * sizeof *rows);
        if (!rows) return vc_fail(VC_ERR_NOMEM, "%s: out of memory at line %lld", d->path, (long long)line);
        d->rows = rows;
        int64_t *lines = realloc(d->lines, cap * sizeof *lines);
        if (!lines) return vc_fail(VC_ERR_NOMEM, "%s: out of memory at line %lld", d->path, (long long)line);
        d->lines = lines;
        d->cap = cap;
    }
    d->rows[d->n_rows] = row;
    d->lines[d->n_rows] = line;
    d->n_rows++;
    return VC_OK;
}

static void keep_bad(vc_jsonl *d, int64_t line, const char *msg) {
    d->n_skipped++;
    if (d->n_bad >= VC_JSONL_MAX_BAD) return;
    if (!d->bad) d->bad = calloc(VC_JSONL_MAX_BAD, sizeof *d->bad);
    if (!d->bad) return;
    char *m = strdup(msg);
    if (!m) return;
    d->bad[d->n_bad].line = line;
    d->bad[d->n_bad].message = m;
    d->n_bad++;
}

/* Copy of a line with bare NaN / Infinity / -Infinity (outside strings) replaced by null. */
static char *nonfinite_to_null(const char *s, size_t n) {
    char *o = malloc(2 * n + 1);
    if (!o) return NULL;
    size_t j = 0;
    int in_str = 0;
    for (size_t i = 0; i < n;) {
        char ch = s[i];
        if (in_str) {
            o[j++] = ch;
            if (ch == '\\' && i + 1 < n) o[j++] = s[++i];
            else if (ch == '"') in_str = 0;
            i++;
            continue;
        }
        if (ch == '"') in_str = 1;
        size_t k = !strncmp(s + i, "NaN", 3) ? 3 : !strncmp(s + i, "Infinity", 8) ? 8
                 : !strncmp(s + i, "-Infinity", 9) ? 9 : 0;
        if (k && i + k <= n) {
            memcpy(o + j, "null", 4);
            j += 4;
            i += k;
            continue;
        }
        o[j++] = ch;
        i++;
    }
    o[j] = 0;
    return o;
}

/* Parses one line; returns the object or NULL with a message in msg. */
static cJSON *parse_line(const char *s, size_t n, int policy, char *msg, size_t cap) {
    int nonfinite = (policy & VC_JSONL_NONFINITE_AS_NULL) != 0;
    if (!vc_json_diagnose(s, n, nonfinite, msg, cap)) return NULL;
    char *copy = nonfinite ? nonfinite_to_null(s, n) : NULL;
    if (nonfinite && !copy) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    cJSON *v = copy ? cJSON_Parse(copy) : cJSON_ParseWithLength(s, n);
    if (v) vc_json_keep_numbers(v, copy ? copy : s, copy ? strlen(copy) : n); /* 1.0 stays a float for templates */
    vc_json_py_keys(v); /* a repeated key: its last value, as json.loads */
    free(copy);
    if (!v) {
        snprintf(msg, cap, "cannot parse (nesting too deep or out of memory)");
        return NULL;
    }
    if (!cJSON_IsObject(v)) {
        snprintf(msg, cap, "row is not a JSON object");
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

/* Handles one raw line (without its '\n'). */
static vc_status take_line(vc_jsonl *d, char *s, size_t n, int64_t line, int policy) {
    if (line == 1 && n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) {
        s += 3;
        n -= 3;
    }
    if (n && s[n - 1] == '\r') n--;
    if (blank(s, n)) return VC_OK;
    char msg[256], full[768];
    cJSON *row = parse_line(s, n, policy, msg, sizeof msg);
    if (!row) {
        snprintf(full, sizeof full, "%s:%lld: %s", d->path, (long long)line, msg);
        if (!(policy & VC_JSONL_SKIP_BAD)) return vc_fail(VC_ERR_FORMAT, "%s", full);
        keep_bad(d, line, full);
        return VC_OK;
    }
    vc_status st = add_row(d, row, line);
    if (st) cJSON_Delete(row);
    return st;
}

static vc_jsonl *jsonl_new(const char *name) {
    vc_jsonl *d = vc_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->path = vc_strdup(name);
    if (!d->path) {
        free(d);
        return NULL;
    }
    return d;
}

vc_status vc_jsonl_parse(const char *name, const char *text, size_t len, int policy, vc_jsonl **out) {
    *out = NULL;
    vc_jsonl *d = jsonl_new(name);
    if (!d) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    char *buf = vc_malloc(len + 1);
    if (!buf) {
        st = VC_ERR_NOMEM;
        goto out;
    }
    memcpy(buf, text, len);
    buf[len] = 0;
    int64_t line = 0;
    for (size_t at = 0; at < len;) {
        char *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len;
        st = take_line(d, buf + at, end - at, ++line, policy);
        if (st) goto out;
        at = end + 1;
    }
out:
    free(buf);
    if (st) vc_jsonl_free(d);
    else *out = d;
    return st;
}

static vc_status take_parquet_row(void *user, cJSON *row, int64_t index) {
    vc_status st = cJSON_IsObject(row) ? add_row(user, row, index) : vc_fail(VC_ERR_FORMAT, "parquet row is not an object");
    if (st) cJSON_Delete(row);
    return st;
}

/* a Parquet file (PAR1 magic): its rows, numbered from 1 in place of lines */
static vc_status read_parquet(const char *path, FILE *f, int policy, vc_jsonl **out) {
    struct stat sb;
    if (fstat(fileno(f), &sb)) return vc_fail(VC_ERR_IO, "%s: %s", path, strerror(errno));
    if (sb.st_size < 12) return vc_fail(VC_ERR_FORMAT, "%s: parquet file of %lld bytes", path, (long long)sb.st_size);
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    if (m == MAP_FAILED) return vc_fail(VC_ERR_IO, "%s: %s", path, strerror(errno));
    vc_jsonl *d = jsonl_new(path);
    vc_status st = d ? pq_rows(path, m, (size_t)sb.st_size, (policy & VC_JSONL_HF_IMAGES) != 0, take_parquet_row, d)
                     : VC_ERR_NOMEM;
    munmap(m, (size_t)sb.st_size);
    if (st) vc_jsonl_free(d);
    else *out = d;
    return st;
}

/* a path as verl's dataset takes it: "~/x" is the home directory's x (fsspec expands it) */
static FILE *open_data(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f || path[0] != '~') return f;
    int e = errno;
    char *p = vc_path_expand_user(path);
    f = p ? fopen(p, "rb") : NULL;
    free(p);
    if (!f) errno = e;
    return f;
}

vc_status vc_jsonl_read(const char *path, int policy, vc_jsonl **out) {
    *out = NULL;
    FILE *f = open_data(path);
    if (!f) return vc_fail(VC_ERR_IO, "%s: %s", path, strerror(errno));
    char magic[4] = { 0 };
    if (fread(magic, 1, 4, f) == 4 && !memcmp(magic, "PAR1", 4)) {
        vc_status st = read_parquet(path, f, policy, out);
        fclose(f);
        return st;
    }
    rewind(f);
    vc_jsonl *d = jsonl_new(path);
    vc_status st = d ? VC_OK : VC_ERR_NOMEM;
    char *buf = NULL;
    size_t cap = 0;
    int64_t line = 0;
    ssize_t n;
    while (!st && (n = getline(&buf, &cap, f)) >= 0) {
        if (n && buf[n - 1] == '\n') n--;
        st = take_line(d, buf, (size_t)n, ++line, policy);
    }
    if (!st && ferror(f)) st = vc_fail(VC_ERR_IO, "%s: read error after line %lld", path, (long long)line);
    free(buf);
    fclose(f);
    if (st) vc_jsonl_free(d);
    else *out = d;
    return st;
}

void vc_jsonl_free(vc_jsonl *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_rows; i++) cJSON_Delete(d->rows[i]);
    for (size_t i = 0; i < d->n_bad; i++) free(d->bad[i].message);
    free(d->bad);
    free(d->rows);
    free(d->lines);
    free(d->path);
    free(d);
}

vc_status vc_jsonl_field(const vc_jsonl *d, size_t i, const char *path, const cJSON **out) {
    *out = NULL;
    if (i >= d->n_rows) return vc_fail(VC_ERR_ARG, "%s: row %zu out of range (%zu rows)", d->path, i, d->n_rows);
    const cJSON *v = d->rows[i];
    const char *p = path;
    char key[256];
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t k = dot ? (size_t)(dot - p) : strlen(p);
        if (k >= sizeof key) return vc_fail(VC_ERR_ARG, "field path too long: %s", path);
        memcpy(key, p, k);
        key[k] = 0;
        v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, key) : NULL;
        if (!v || cJSON_IsNull(v))
            return vc_fail(VC_ERR_MISSING, "%s:%lld: missing field %s", d->path, (long long)d->lines[i], path);
        p += k + (dot ? 1 : 0);
    }
    *out = v;
    return VC_OK;
}

vc_status vc_jsonl_string(const vc_jsonl *d, size_t i, const char *path, const char **out) {
    const cJSON *v;
    *out = NULL;
    vc_status st = vc_jsonl_field(d, i, path, &v);
    if (st) return st;
    if (!cJSON_IsString(v))
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: field %s is not a string", d->path, (long long)d->lines[i], path);
    *out = v->valuestring;
    return VC_OK;
}
