/* Shared helpers for the vision tests: the fixtures of tools/fixtures/make_image_fixture.py (tests/fixtures/vision,
 * tests run from the source root). */
#ifndef VC_TEST_VISION_HELPERS_H
#define VC_TEST_VISION_HELPERS_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verlc/core.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include <unistd.h>

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
/* image file s through verl's path (fetch_image, the processor) at setting c into *px (the caller frees it, or
 * pixels_diff does), the reference's NAME.pixels into *p and its NAME.AUX integers returned (NULL: absent); needs
 * vc_test.h */
static inline const int64_t *verl_pixels_ref(const vc_vl_image_config *c, const vc_checkpoint *ck, const char *s,
                                             const char *name, const char *aux, vc_vl_pixels *px,
                                             const vc_st_tensor **p) {
    vc_image img;
    char key[64];
    memset(px, 0, sizeof *px);
    CHECK_OK(vc_image_load(img_path(s), VC_ALPHA_QWEN_VL_UTILS, &img));
    CHECK_OK(vc_vl_verl_image(c, &img, NULL, s, px));
    vc_image_free(&img);
    snprintf(key, sizeof key, "%s.pixels", name);
    *p = vc_ckpt_find(ck, key);
    snprintf(key, sizeof key, "%s.%s", name, aux);
    const vc_st_tensor *t = vc_ckpt_find(ck, key);
    return t && t->dtype == VC_I64 ? (const int64_t *)t->data : NULL;
}

/* the largest difference between px's values and the reference p's where `same` (their shapes agree), else INFINITY;
 * px freed */
static inline double pixels_diff(vc_vl_pixels *px, const vc_st_tensor *p, int same) {
    double worst = 0;
    for (int64_t k = 0; same && k < px->rows * px->cols; k++)
        worst = fmax(worst, fabs((double)px->data[k] - (double)((const float *)p->data)[k]));
    vc_vl_pixels_free(px);
    return same ? worst : INFINITY;
}

/* one reference image's check: its file s at setting c against the reference's NAME.* entries; the worst difference */
typedef double (*pixels_check_fn)(const vc_vl_image_config *c, const vc_checkpoint *ck, const char *s, const char *name);

/* every image of dir's reference.json through f at setting c (names "0".."4") and at big ("0.big"..): the worst
 * difference, *n the images checked; needs vc_test.h */
static inline double check_settings(const char *dir, const vc_vl_image_config *c, const vc_vl_image_config *big,
                                    pixels_check_fn f, int *n) {
    char path[512];
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    double worst = 0;
    *n = 0;
    snprintf(path, sizeof path, "%s/reference.json", dir);
    CHECK_OK(vc_json_load_file(path, &ref));
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    CHECK_OK(vc_ckpt_open(path, &ck));
    const cJSON *images = ref ? cJSON_GetObjectItem(ref, "images") : NULL;
    for (int pass = 0; pass < 2 && images && ck; pass++) {
        int i = 0;
        for (const cJSON *s = images->child; s; s = s->next, i++, (*n)++) {
            char name[32];
            snprintf(name, sizeof name, "%d%s", i, pass ? ".big" : "");
            worst = fmax(worst, f(pass ? big : c, ck, s->valuestring, name));
        }
    }
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
    return worst;
}

/* each bad[i][0] (a preprocessor_config.json entry) in a config of processor `type` after `base`'s keys (the last of
 * duplicate keys counts, as in Python's json) is refused naming bad[i][1] and the file; needs vc_test.h */
static inline void refused_configs(const char *type, const char *base, const char *const (*bad)[2], size_t n) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/verlc_proc_%d.json", (int)getpid());
    for (size_t i = 0; i < n; i++) {
        char text[768];
        snprintf(text, sizeof text, "{\"image_processor_type\": \"%s\", %s%s%s}", type, base, *base ? ", " : "",
                 bad[i][0]);
        CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
        vc_vl_image_config c;
        vc_status st = vc_vl_image_config_load(path, &c);
        CHECK_MSG(st && strstr(vc_last_error(), bad[i][1]) && strstr(vc_last_error(), path), "%s %s: %s", type, bad[i][0],
                  st ? vc_last_error() : "accepted");
    }
    remove(path);
}

#endif
