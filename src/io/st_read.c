/* Reads and validates one safetensors file: 8-byte little-endian header length N, N bytes of JSON header,
 * then the data section, which the tensors must tile exactly (no gap, no overlap, ending at EOF), as the
 * reference implementation (huggingface/safetensors, Metadata::validate) requires. */
#define _GNU_SOURCE
#include "st_internal.h"
#include "verlc/json.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct span {
    uint64_t begin, end;
    int idx;
} span;

vc_status vc_st_map_file(vc_st_map *f, size_t min_size, const char *what) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return vc_fail(VC_ERR_IO, "%s: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return vc_fail(VC_ERR_IO, "%s: not a regular file", f->path);
    }
    f->size = (size_t)st.st_size;
    if (f->size < min_size || !f->size) {
        close(fd);
        return vc_fail(VC_ERR_FORMAT, "%s: file is %zu bytes, too small to hold %s", f->path, f->size, what);
    }
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return vc_fail(VC_ERR_IO, "%s: mmap failed: %s", f->path, strerror(errno));
    f->map = m;
    return VC_OK;
}

void vc_st_map_release(vc_st_map *f) {
    if (f->map) munmap(f->map, f->size);
    f->map = NULL;
    free(f->path);
    f->path = NULL;
}

void vc_st_lists_free(vc_st_lists *l) {
    for (int i = 0; i < l->n; i++) free((char *)l->t[i].name);
    for (int i = 0; i < l->nmeta; i++) { free(l->meta[i].key); free(l->meta[i].value); }
    free(l->t);
    free(l->meta);
    free(l->shard);
    memset(l, 0, sizeof *l);
}

/* Non-negative integral JSON number up to 2^53. */
static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d != floor(d) || d > 9007199254740992.0) return -1;
    *out = (uint64_t)d;
    return 0;
}

static vc_status parse_metadata(const vc_st_map *f, const cJSON *m, vc_st_lists *l) {
    if (!cJSON_IsObject(m))
        return vc_fail(VC_ERR_FORMAT, "%s: __metadata__ must be an object of strings, got %s", f->path,
                       vc_json_type_name(m));
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return vc_fail(VC_ERR_FORMAT, "%s: __metadata__ entry '%s' must be a string, got %s", f->path,
                           e->string, vc_json_type_name(e));
        int dup = 0;
        for (int i = 0; i < l->nmeta && !dup; i++) dup = !strcmp(l->meta[i].key, e->string);
        if (dup) continue; /* first file (or first entry) wins */
        if (l->nmeta == l->capmeta) {
            int cap = l->capmeta ? 2 * l->capmeta : 8;
            vc_st_kv *p = realloc(l->meta, (size_t)cap * sizeof *p);
            if (!p) return vc_fail(VC_ERR_NOMEM, "%s: out of memory", f->path);
            l->meta = p;
            l->capmeta = cap;
        }
        char *k = vc_strdup(e->string), *v = vc_strdup(e->valuestring);
        if (!k || !v) { free(k); free(v); return VC_ERR_NOMEM; }
        l->meta[l->nmeta++] = (vc_st_kv){ k, v };
    }
    return VC_OK;
}

/* Fills *t from one header entry; data_offsets are returned relative to the data section. */
static vc_status parse_entry(const vc_st_map *f, const cJSON *e, uint64_t data_size, vc_st_tensor *t,
                             span *sp) {
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': entry must be an object, got %s", f->path, name,
                       vc_json_type_name(e));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt || !sh || !off)
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': missing '%s'", f->path, name,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (!cJSON_IsString(dt))
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': dtype must be a string", f->path, name);
    int known = 0;
    for (int i = 0; i < VC_DTYPE_COUNT && !known; i++)
        if (!strcmp(dt->valuestring, vc_dtype_name((vc_dtype)i))) { t->dtype = (vc_dtype)i; known = 1; }
    if (!known)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s': unknown or unsupported dtype '%s'", f->path, name,
                       dt->valuestring);
    if (!cJSON_IsArray(sh))
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': shape must be an array", f->path, name);
    int nd = cJSON_GetArraySize(sh);
    if (nd > VC_ST_MAX_DIMS)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)", f->path,
                       name, nd, VC_ST_MAX_DIMS);
    uint64_t numel = 1;
    int overflow = 0, k = 0;
    for (const cJSON *d = sh->child; d; d = d->next, k++) {
        uint64_t v;
        if (json_u64(d, &v))
            return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", f->path,
                           name, k);
        t->shape[k] = (int64_t)v;
        if (v && numel > UINT64_MAX / v) overflow = 1;
        numel *= v;
    }
    t->ndim = nd;
    uint64_t b, en;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || json_u64(off->child, &b) ||
        json_u64(off->child->next, &en))
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': data_offsets must be two non-negative integers",
                       f->path, name);
    if (b > en)
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] begin after end", f->path,
                       name, (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return vc_fail(VC_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] out of range (data section is %llu bytes)",
                       f->path, name, (unsigned long long)b, (unsigned long long)en,
                       (unsigned long long)data_size);
    size_t es = vc_dtype_size(t->dtype);
    if (overflow || numel > UINT64_MAX / es || numel * es != en - b)
        return vc_fail(VC_ERR_SHAPE, "%s: tensor '%s': %llu bytes in data_offsets but shape x %s needs %s%llu",
                       f->path, name, (unsigned long long)(en - b), vc_dtype_name(t->dtype),
                       overflow || numel > UINT64_MAX / es ? "more than " : "",
                       overflow || numel > UINT64_MAX / es ? (unsigned long long)UINT64_MAX
                                                             : (unsigned long long)(numel * es));
    t->nbytes = (size_t)(en - b);
    sp->begin = b;
    sp->end = en;
    return VC_OK;
}

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Tensors sorted by offset must start exactly where the previous one ended and the last must end at EOF. */
static vc_status check_tiling(const vc_st_map *f, span *sp, int n, const vc_st_tensor *t, uint64_t data_size) {
    qsort(sp, (size_t)n, sizeof *sp, span_cmp);
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (sp[i].begin < pos)
            return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'",
                           f->path, t[sp[i].idx].name, (unsigned long long)sp[i].begin,
                           (unsigned long long)sp[i].end, t[sp[i - 1].idx].name);
        if (sp[i].begin > pos)
            return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': gap of %llu bytes before its data_offsets [%llu, %llu]",
                           f->path, t[sp[i].idx].name, (unsigned long long)(sp[i].begin - pos),
                           (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end);
        pos = sp[i].end;
    }
    if (pos != data_size)
        return vc_fail(VC_ERR_FORMAT, "%s: tensors cover %llu of the %llu data bytes (incomplete metadata)",
                       f->path, (unsigned long long)pos, (unsigned long long)data_size);
    return VC_OK;
}

vc_status vc_st_lists_grow(vc_st_lists *l, int extra) {
    if (l->n + extra <= l->cap) return VC_OK;
    int cap = l->cap ? l->cap : 64;
    while (cap < l->n + extra) cap *= 2;
    vc_st_tensor *p = realloc(l->t, (size_t)cap * sizeof *p);
    if (!p) return vc_fail(VC_ERR_NOMEM, "out of memory for %d tensors", cap);
    l->t = p;
    if (l->want_shards) {
        vc_pt_shard *s = realloc(l->shard, (size_t)cap * sizeof *s);
        if (!s) return vc_fail(VC_ERR_NOMEM, "out of memory for %d tensors", cap);
        memset(s + l->cap, 0, (size_t)(cap - l->cap) * sizeof *s);
        l->shard = s;
    }
    l->cap = cap;
    return VC_OK;
}

static vc_status parse_header(vc_st_map *f, const cJSON *root, uint64_t hlen, vc_st_lists *l) {
    const unsigned char *base = f->map;
    uint64_t data_size = f->size - 8 - hlen;
    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "__metadata__")) n++;
    vc_status st = vc_st_lists_grow(l, n);
    if (st != VC_OK) return st;
    span *sp = vc_calloc((size_t)n + 1, sizeof *sp);
    if (!sp) return VC_ERR_NOMEM;
    int first = l->n, k = 0;
    for (const cJSON *e = root->child; e && st == VC_OK; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) { st = parse_metadata(f, e, l); continue; }
        vc_st_tensor *t = &l->t[first + k];
        memset(t, 0, sizeof *t);
        st = parse_entry(f, e, data_size, t, &sp[k]);
        if (st != VC_OK) break;
        t->name = vc_strdup(e->string);
        if (!t->name) { st = VC_ERR_NOMEM; break; }
        t->data = base + 8 + hlen + sp[k].begin;
        t->file = f->path;
        sp[k].idx = first + k;
        k++;
        l->n = first + k; /* so that names are freed on a later failure */
    }
    if (st == VC_OK) st = check_tiling(f, sp, k, l->t, data_size);
    free(sp);
    return st;
}

vc_status vc_st_parse_file(vc_st_map *f, vc_st_lists *l) {
    vc_status st = vc_st_map_file(f, 8, "the 8-byte header length");
    if (st != VC_OK) return st;
    const unsigned char *m = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | m[i];
    if (hlen > VC_ST_MAX_HEADER)
        return vc_fail(VC_ERR_FORMAT, "%s: header length %llu exceeds the %u-byte limit", f->path,
                       (unsigned long long)hlen, VC_ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return vc_fail(VC_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", f->path,
                       (unsigned long long)hlen, f->size);
    if (hlen < 2 || m[8] != '{')
        return vc_fail(VC_ERR_FORMAT, "%s: header does not start with '{'", f->path);
    size_t wl = strlen(f->path) + 16;
    char *what = vc_malloc(wl);
    if (!what) return VC_ERR_NOMEM;
    snprintf(what, wl, "%s: header", f->path);
    cJSON *root = NULL;
    st = vc_json_parse((const char *)m + 8, (size_t)hlen, what, &root);
    free(what);
    if (st != VC_OK) return st;
    if (!cJSON_IsObject(root)) st = vc_fail(VC_ERR_FORMAT, "%s: header is not a JSON object", f->path);
    else st = parse_header(f, root, hlen, l);
    cJSON_Delete(root);
    return st;
}

int64_t vc_st_tensor_numel(const vc_st_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

void vc_st_tensor_to_f32(const vc_st_tensor *t, float *dst) {
    size_t n = (size_t)vc_st_tensor_numel(t), es = vc_dtype_size(t->dtype);
    if (((uintptr_t)t->data % es) == 0) { vc_convert_to_f32(dst, t->data, t->dtype, n); return; }
    /* unaligned: bounce through an aligned stack buffer */
    uint64_t tmp[512];
    size_t per = sizeof tmp / es;
    const unsigned char *src = t->data;
    for (size_t i = 0; i < n; i += per) {
        size_t c = n - i < per ? n - i : per;
        memcpy(tmp, src + i * es, c * es);
        vc_convert_to_f32(dst + i, tmp, t->dtype, c);
    }
}
