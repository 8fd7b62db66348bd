/* Shared by the drivers of tools/fuzz/diff_*.py: their input lines carry texts as hex. */
#ifndef VC_FUZZ_DRV_UTIL_H
#define VC_FUZZ_DRV_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the bytes of a hex string, NUL-terminated (malloc'd) */
static inline char *drv_unhex(const char *h) {
    size_t n = strlen(h) / 2;
    char *s = malloc(n + 1);
    if (!s) exit(3);
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(h + 2 * i, "%2x", &v);
        s[i] = (char)v;
    }
    s[n] = 0;
    return s;
}
/* the next tab-separated field of *line (empty fields kept, unlike strtok's), "" past the end */
static inline char *drv_field(char **line) {
    char *f = *line ? *line : (char *)"", *t = *line ? strchr(*line, '\t') : NULL;
    if (t) *t = 0;
    *line = t ? t + 1 : NULL;
    return f;
}
#endif
