/* safetensors writer: header built by hand (integers stay integers, names are JSON-escaped), data streamed
 * to a temp file that is fsynced and renamed into place; optional sharding with an HF-style index. */
#define _GNU_SOURCE
#include "verlc/safetensors.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wtensor {
    char *name;
    vc_dtype dt;
    int ndim;
    int64_t shape[VC_ST_MAX_DIMS];
    const void *data;
    void *owned;
    size_t nbytes;
    vc_st_fill_fn fill; /* lazy: the bytes come from fill(ctx, index, ...) at write time */
    void *ctx;
    int64_t index;
} wtensor;

struct vc_st_writer {
    wtensor *t;
    int n, cap;
    char **mk, **mv;
    int nm, capm;
};

/* Growable string for building headers. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static void sb_json_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') { char e[2] = { '\\', (char)*p }; sb_put(b, e, 2); }
        else if (*p < 0x20) sb_printf(b, "\\u%04x", *p);
        else sb_put(b, (const char *)p, 1);
    }
    sb_put(b, "\"", 1);
}

vc_status vc_st_writer_new(vc_st_writer **out) {
    *out = vc_calloc(1, sizeof **out);
    return *out ? VC_OK : VC_ERR_NOMEM;
}

void vc_st_writer_free(vc_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) { free(w->t[i].name); free(w->t[i].owned); }
    for (int i = 0; i < w->nm; i++) { free(w->mk[i]); free(w->mv[i]); }
    free(w->t);
    free(w->mk);
    free(w->mv);
    free(w);
}

int vc_st_writer_count(const vc_st_writer *w) { return w ? w->n : 0; }

/* a new entry (name, dtype, shape checked; its byte count in t->nbytes), data left to the caller */
static vc_status add_entry(vc_st_writer *w, const char *name, vc_dtype dt, int ndim, const int64_t *shape,
                           wtensor **out) {
    if (!name || !*name || !strcmp(name, "__metadata__"))
        return vc_fail(VC_ERR_ARG, "safetensors writer: invalid tensor name '%s'", name ? name : "(null)");
    if ((unsigned)dt >= VC_DTYPE_COUNT)
        return vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s': invalid dtype %d", name, (int)dt);
    if (ndim < 0 || ndim > VC_ST_MAX_DIMS || (ndim && !shape))
        return vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s': invalid ndim %d", name, ndim);
    size_t nb = vc_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s': negative shape", name);
        if (shape[i] && nb > SIZE_MAX / (size_t)shape[i])
            return vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s': size overflows", name);
        nb *= (size_t)shape[i];
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        wtensor *p = realloc(w->t, (size_t)cap * sizeof *p);
        if (!p) return vc_fail(VC_ERR_NOMEM, "safetensors writer: out of memory");
        w->t = p;
        w->cap = cap;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = vc_strdup(name);
    if (!t->name) return VC_ERR_NOMEM;
    t->dt = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->nbytes = nb;
    *out = t;
    return VC_OK;
}

vc_status vc_st_writer_add(vc_st_writer *w, const char *name, vc_dtype dt, int ndim, const int64_t *shape,
                           const void *data, int copy) {
    wtensor *t = NULL;
    vc_status st = add_entry(w, name, dt, ndim, shape, &t);
    if (st) return st;
    if (t->nbytes && !data) {
        free(t->name);
        return vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s': no data", name);
    }
    if (copy && t->nbytes) {
        t->owned = vc_malloc(t->nbytes);
        if (!t->owned) {
            free(t->name);
            return VC_ERR_NOMEM;
        }
        memcpy(t->owned, data, t->nbytes);
    }
    t->data = t->owned ? t->owned : data;
    w->n++;
    return VC_OK;
}

vc_status vc_st_writer_add_lazy(vc_st_writer *w, const char *name, vc_dtype dt, int ndim, const int64_t *shape,
                                vc_st_fill_fn fill, void *ctx, int64_t index) {
    if (!fill) return vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s': no fill function", name ? name : "(null)");
    wtensor *t = NULL;
    vc_status st = add_entry(w, name, dt, ndim, shape, &t);
    if (st) return st;
    t->fill = fill;
    t->ctx = ctx;
    t->index = index;
    w->n++;
    return VC_OK;
}

vc_status vc_st_writer_set_metadata(vc_st_writer *w, const char *key, const char *value) {
    if (!key || !value) return vc_fail(VC_ERR_ARG, "safetensors writer: metadata key and value are required");
    for (int i = 0; i < w->nm; i++)
        if (!strcmp(w->mk[i], key)) {
            char *v = vc_strdup(value);
            if (!v) return VC_ERR_NOMEM;
            free(w->mv[i]);
            w->mv[i] = v;
            return VC_OK;
        }
    if (w->nm == w->capm) {
        int cap = w->capm ? 2 * w->capm : 8;
        char **a = realloc(w->mk, (size_t)cap * sizeof *a);
        if (!a) return VC_ERR_NOMEM;
        w->mk = a;
        char **b = realloc(w->mv, (size_t)cap * sizeof *b);
        if (!b) return VC_ERR_NOMEM;
        w->mv = b;
        w->capm = cap;
    }
    char *k = vc_strdup(key), *v = vc_strdup(value);
    if (!k || !v) { free(k); free(v); return VC_ERR_NOMEM; }
    w->mk[w->nm] = k;
    w->mv[w->nm] = v;
    w->nm++;
    return VC_OK;
}

/* Layout order: larger element size first (keeps every tensor aligned), then by name. */
static int layout_cmp(const void *a, const void *b) {
    const wtensor *x = *(const wtensor *const *)a, *y = *(const wtensor *const *)b;
    size_t sx = vc_dtype_size(x->dt), sy = vc_dtype_size(y->dt);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int name_cmp(const void *a, const void *b) {
    return strcmp((*(const wtensor *const *)a)->name, (*(const wtensor *const *)b)->name);
}

static void build_header(const vc_st_writer *w, wtensor **ts, int n, sbuf *h) {
    sb_put(h, "{", 1);
    if (w->nm) {
        sb_put(h, "\"__metadata__\":{", 16);
        for (int i = 0; i < w->nm; i++) {
            if (i) sb_put(h, ",", 1);
            sb_json_str(h, w->mk[i]);
            sb_put(h, ":", 1);
            sb_json_str(h, w->mv[i]);
        }
        sb_put(h, "}", 1);
    }
    unsigned long long off = 0;
    for (int i = 0; i < n; i++) {
        const wtensor *t = ts[i];
        if (i || w->nm) sb_put(h, ",", 1);
        sb_json_str(h, t->name);
        sb_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", vc_dtype_name(t->dt));
        for (int d = 0; d < t->ndim; d++) sb_printf(h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        sb_printf(h, "],\"data_offsets\":[%llu,%llu]}", off, off + (unsigned long long)t->nbytes);
        off += t->nbytes;
    }
    sb_put(h, "}", 1);
    while (!h->oom && h->n % 8) sb_put(h, " ", 1);
}

/* tensor t's bytes into f: its data, or its fill piece by piece through the staging buffer *stage */
static vc_status write_tensor(vc_afile *f, const wtensor *t, void **stage) {
    if (!t->fill) return vc_afile_write(f, t->data, t->nbytes);
    if (!t->nbytes) return VC_OK;
    if (!*stage && !(*stage = vc_malloc(VC_ST_FILL_PIECE))) return VC_ERR_NOMEM;
    size_t es = vc_dtype_size(t->dt), piece = VC_ST_FILL_PIECE / es * es;
    vc_status st = VC_OK;
    for (size_t off = 0; off < t->nbytes && !st; off += piece) {
        size_t n = t->nbytes - off < piece ? t->nbytes - off : piece;
        st = t->fill(t->ctx, t->index, off, *stage, n);
        if (st) return vc_fail_ctx(st, "safetensors writer: tensor '%s'", t->name);
        st = vc_afile_write(f, *stage, n);
    }
    return st;
}

/* Writes tensors ts[0..n) (any order; re-sorted for layout) to path through a fsynced temp file. */
static vc_status write_file(const vc_st_writer *w, wtensor **ts, int n, const char *path) {
    sbuf h = { 0 };
    qsort(ts, (size_t)n, sizeof *ts, layout_cmp);
    build_header(w, ts, n, &h);
    if (h.oom) {
        free(h.p);
        return vc_fail(VC_ERR_NOMEM, "%s: out of memory for the header", path);
    }
    vc_afile *f;
    vc_status st = vc_afile_open(path, &f);
    if (st) {
        free(h.p);
        return st;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    st = vc_afile_write(f, len8, 8);
    if (!st) st = vc_afile_write(f, h.p, h.n);
    void *stage = NULL;
    for (int i = 0; i < n && !st; i++) st = write_tensor(f, ts[i], &stage);
    free(stage);
    free(h.p);
    if (st) {
        vc_afile_abort(f);
        return st;
    }
    return vc_afile_commit(f);
}

/* Sorted-by-name view of the writer's tensors; duplicate names are an error. */
static vc_status sorted_view(const vc_st_writer *w, wtensor ***out) {
    wtensor **ts = vc_calloc((size_t)w->n + 1, sizeof *ts);
    if (!ts) return VC_ERR_NOMEM;
    for (int i = 0; i < w->n; i++) ts[i] = &w->t[i];
    qsort(ts, (size_t)w->n, sizeof *ts, name_cmp);
    for (int i = 1; i < w->n; i++)
        if (!strcmp(ts[i - 1]->name, ts[i]->name)) {
            vc_status st = vc_fail(VC_ERR_ARG, "safetensors writer: tensor '%s' added twice", ts[i]->name);
            free(ts);
            return st;
        }
    *out = ts;
    return VC_OK;
}

vc_status vc_st_writer_write(vc_st_writer *w, const char *path) {
    wtensor **ts = NULL;
    vc_status st = sorted_view(w, &ts);
    if (st != VC_OK) return st;
    st = write_file(w, ts, w->n, path);
    free(ts);
    return st;
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) { fsync(fd); close(fd); }
}

static vc_status make_dirs(const char *dir) {
    char *p = vc_strdup(dir);
    if (!p) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                st = vc_fail(VC_ERR_IO, "%s: cannot create folder: %s", p, strerror(errno));
                break;
            }
            *s = c;
        }
        if (!c) break;
    }
    free(p);
    return st;
}

static vc_status remove_stale(const char *dir, const char *name) {
    char *p = vc_path_join(dir, name);
    if (!p) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (unlink(p) != 0 && errno != ENOENT) st = vc_fail(VC_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
    free(p);
    return st;
}

static vc_status write_index(const char *dir, wtensor **ts, const int *shard_of, int n, int nshards,
                             unsigned long long total) {
    sbuf b = { 0 };
    char fname[64];
    sb_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n", total);
    for (int i = 0; i < n; i++) {
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", shard_of[i] + 1, nshards);
        sb_put(&b, "    ", 4);
        sb_json_str(&b, ts[i]->name);
        sb_printf(&b, ": \"%s\"%s\n", fname, i + 1 < n ? "," : "");
    }
    sb_put(&b, "  }\n}\n", 6);
    char *path = vc_path_join(dir, "model.safetensors.index.json");
    vc_status st = b.oom || !path ? vc_fail(VC_ERR_NOMEM, "%s: out of memory for the index", dir)
                                  : vc_write_file_atomic(path, b.p, b.n);
    free(path);
    free(b.p);
    return st;
}

/* Greedy split in name order: a shard closes when the next tensor would push it past max bytes. */
static vc_status write_shards(vc_st_writer *w, wtensor **ts, const char *dir, size_t max) {
    int n = w->n, nshards = 0;
    int *shard_of = vc_calloc((size_t)n + 1, sizeof *shard_of);
    wtensor **part = vc_calloc((size_t)n + 1, sizeof *part);
    vc_status st = shard_of && part ? VC_OK : VC_ERR_NOMEM;
    unsigned long long total = 0;
    size_t cur = 0;
    for (int i = 0; i < n && st == VC_OK; i++) {
        if (i == 0 || (cur && cur + ts[i]->nbytes > max)) { nshards++; cur = 0; }
        shard_of[i] = nshards - 1;
        cur += ts[i]->nbytes;
        total += ts[i]->nbytes;
    }
    for (int s = 0, i = 0; s < nshards && st == VC_OK; s++) {
        int k = 0;
        while (i < n && shard_of[i] == s) part[k++] = ts[i++];
        char fname[64];
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        char *path = vc_path_join(dir, fname);
        st = path ? write_file(w, part, k, path) : VC_ERR_NOMEM;
        free(path);
    }
    if (st == VC_OK) st = write_index(dir, ts, shard_of, n, nshards, total);
    if (st == VC_OK) st = remove_stale(dir, "model.safetensors");
    free(shard_of);
    free(part);
    return st;
}

vc_status vc_st_writer_write_dir(vc_st_writer *w, const char *dir, size_t max_shard_bytes) {
    wtensor **ts = NULL;
    vc_status st = make_dirs(dir);
    if (st != VC_OK) return st;
    if ((st = sorted_view(w, &ts)) != VC_OK) return st;
    size_t total = 0;
    for (int i = 0; i < w->n; i++) total += ts[i]->nbytes;
    if (max_shard_bytes == 0 || total <= max_shard_bytes || w->n <= 1) {
        char *path = vc_path_join(dir, "model.safetensors");
        st = path ? write_file(w, ts, w->n, path) : VC_ERR_NOMEM;
        free(path);
        if (st == VC_OK) st = remove_stale(dir, "model.safetensors.index.json");
    } else {
        st = write_shards(w, ts, dir, max_shard_bytes);
    }
    if (st == VC_OK) fsync_dir(dir);
    free(ts);
    return st;
}
