/* Shared helpers for the vision tests: the fixtures of tools/fixtures/make_image_fixture.py (tests/fixtures/vision,
 * tests run from the source root). */
#ifndef VC_TEST_VISION_HELPERS_H
#define VC_TEST_VISION_HELPERS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verlc/core.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"

#define VISION_DIR "tests/fixtures/vision"

static inline char *vis_path(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], VISION_DIR "/%s", name);
    return buf[k];
}

static inline char *img_path(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, VISION_DIR "/images/%s", name);
    return buf;
}

/* the whole file (malloc'd), NULL when it cannot be read */
static inline char *read_all(const char *path, size_t *n) {
    char *b = NULL;
    if (vc_read_file(path, &b, n) != VC_OK) return NULL;
    return b;
}

/* A reference U8 image tensor [h, w, 3] compared with img: the count of differing bytes (-1: shape or absent) and
 * the largest difference in *maxd */
static inline long cmp_u8_image(const vc_checkpoint *ref, const char *key, const vc_image *img, int *maxd) {
    const vc_st_tensor *t = vc_ckpt_find(ref, key);
    *maxd = 0;
    if (!t || t->dtype != VC_U8 || t->ndim != 3 || t->shape[0] != img->height || t->shape[1] != img->width ||
        t->shape[2] != 3) {
        fprintf(stderr, "%s: absent or shaped unlike %dx%d\n", key, img->width, img->height);
        return -1;
    }
    const uint8_t *a = t->data;
    long bad = 0;
    for (size_t i = 0; i < (size_t)img->width * (size_t)img->height * 3; i++) {
        int d = abs((int)a[i] - (int)img->rgb[i]);
        if (d) bad++;
        if (d > *maxd) *maxd = d;
    }
    return bad;
}
#endif
