/* Logging, allocation and file helpers. */
#define _GNU_SOURCE
#include "verlc/core.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int log_level(void) {
    static int level = -1;
    if (level < 0) {
        const char *s = getenv("VERLC_LOG");
        level = VC_LOG_INFO;
        if (s && !strcmp(s, "error")) level = VC_LOG_ERROR;
        else if (s && !strcmp(s, "warn")) level = VC_LOG_WARN;
        else if (s && !strcmp(s, "debug")) level = VC_LOG_DEBUG;
    }
    return level;
}

void vc_log(int level, const char *fmt, ...) {
    if (level > log_level()) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void *vc_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) vc_fail(VC_ERR_NOMEM, "cannot allocate %zu bytes", n);
    return p;
}

void *vc_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) vc_fail(VC_ERR_NOMEM, "cannot allocate %zu x %zu bytes", count, size);
    return p;
}

void *vc_aligned_alloc(size_t n) {
    size_t r = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, r ? r : 64);
    if (!p) { vc_fail(VC_ERR_NOMEM, "cannot allocate %zu bytes", n); return NULL; }
    memset(p, 0, r ? r : 64);
    return p;
}

void vc_aligned_free(void *p) { free(p); }

char *vc_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = vc_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

vc_status vc_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return vc_fail(VC_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return vc_fail(VC_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = vc_malloc(n + 1);
    if (!buf) { fclose(f); return VC_ERR_NOMEM; }
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return vc_fail(VC_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return VC_OK;
}

struct vc_afile {
    int fd;
    char *path, *tmp;
};

vc_status vc_afile_open(const char *path, vc_afile **out) {
    *out = NULL;
    vc_afile *f = vc_calloc(1, sizeof *f);
    size_t n = strlen(path) + 32;
    char *tmp = f ? vc_malloc(n) : NULL, *dup = tmp ? vc_strdup(path) : NULL;
    if (!dup) {
        free(tmp);
        free(f);
        return VC_ERR_NOMEM;
    }
    snprintf(tmp, n, "%s.tmp.%d", path, (int)getpid());
    f->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        vc_status st = vc_fail(VC_ERR_IO, "%s: %s", tmp, strerror(errno));
        free(tmp);
        free(dup);
        free(f);
        return st;
    }
    f->tmp = tmp;
    f->path = dup;
    *out = f;
    return VC_OK;
}

vc_status vc_afile_write(vc_afile *f, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t w = write(f->fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return vc_fail(VC_ERR_IO, "%s: write failed: %s", f->path, strerror(w < 0 ? errno : ENOSPC));
        p += w;
        len -= (size_t)w;
    }
    return VC_OK;
}

static void afile_free(vc_afile *f) {
    free(f->tmp);
    free(f->path);
    free(f);
}

vc_status vc_afile_commit(vc_afile *f) {
    vc_status st = VC_OK;
    if (fsync(f->fd) != 0) st = vc_fail(VC_ERR_IO, "%s: fsync failed: %s", f->path, strerror(errno));
    if (close(f->fd) != 0 && !st) st = vc_fail(VC_ERR_IO, "%s: close failed: %s", f->path, strerror(errno));
    if (!st && rename(f->tmp, f->path) != 0)
        st = vc_fail(VC_ERR_IO, "%s: cannot rename the temp file into place: %s", f->path, strerror(errno));
    if (st) unlink(f->tmp);
    afile_free(f);
    return st;
}

void vc_afile_abort(vc_afile *f) {
    if (!f) return;
    close(f->fd);
    unlink(f->tmp);
    afile_free(f);
}

vc_status vc_write_file_atomic(const char *path, const void *data, size_t len) {
    vc_afile *f;
    vc_status st = vc_afile_open(path, &f);
    if (st) return st;
    if ((st = vc_afile_write(f, data, len))) {
        vc_afile_abort(f);
        return st;
    }
    return vc_afile_commit(f);
}

char *vc_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = vc_malloc(a + b + 2);
    if (!s) return NULL;
    memcpy(s, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') s[k++] = '/';
    memcpy(s + k, name, b + 1);
    return s;
}

char *vc_path_expand_user(const char *path) {
    const char *home = getenv("HOME");
    if (path && path[0] == '~' && path[1] == '/' && home && *home) return vc_path_join(home, path + 2);
    return path ? vc_strdup(path) : NULL;
}

int vc_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

vc_status vc_mkdirs(const char *path) {
    size_t n = strlen(path);
    char *buf = vc_malloc(n + 1);
    if (!buf) return VC_ERR_NOMEM;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    int bad = mkdir(buf, 0755) && !vc_file_exists(buf);
    free(buf);
    return bad ? vc_fail(VC_ERR_IO, "%s: cannot create directory", path) : VC_OK;
}

double vc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Python's repr of a float: the shortest digits that round-trip, fixed notation for exponents -4..15 */
void vc_py_float_repr(double f, char *res, size_t cap) {
    if (isnan(f)) { snprintf(res, cap, "nan"); return; }
    if (isinf(f)) { snprintf(res, cap, "%s", f < 0 ? "-inf" : "inf"); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) {       /* shortest digits that round-trip, as Python's repr */
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++) if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char out[64];
    int o = 0;
    if (neg) out[o++] = '-';
    if (exp >= -5 + 1 && exp < 16) {
        if (exp < 0) {
            out[o++] = '0'; out[o++] = '.';
            for (int i = 0; i < -exp - 1; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > exp + 1) for (int i = exp + 1; i < nd; i++) out[o++] = digits[i];
            else out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) { out[o++] = '.'; for (int i = 1; i < nd; i++) out[o++] = digits[i]; }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(res, cap, "%s", out);
}

