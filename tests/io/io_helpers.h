/* Shared helpers for the io tests: temp folders and raw file writing. */
#ifndef VC_TEST_IO_HELPERS_H
#define VC_TEST_IO_HELPERS_H
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes a fresh temp folder; the caller frees the path after rm_tree. */
static inline char *tmp_dir(void) {
    char *d = strdup("/tmp/verlc_io_XXXXXX");
    return mkdtemp(d) ? d : NULL;
}

static inline void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t k = n ? fwrite(data, 1, n, f) : 0;
    fclose(f);
    return k == n ? 0 : -1;
}

/* Writes a safetensors file from a header text, a declared header length and `ndata` data bytes. */
static inline int write_st_raw(const char *path, const char *header, uint64_t declared_len, size_t ndata) {
    size_t hl = strlen(header);
    size_t n = 8 + hl + ndata;
    unsigned char *b = calloc(1, n + 1);
    if (!b) return -1;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(declared_len >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < ndata; i++) b[8 + hl + i] = (unsigned char)(i * 7 + 1);
    int r = write_bytes(path, b, n);
    free(b);
    return r;
}

static inline int write_st(const char *path, const char *header, size_t ndata) {
    return write_st_raw(path, header, strlen(header), ndata);
}

static inline char *join2(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    snprintf(s, n, "%s/%s", a, b);
    return s;
}
#endif
