/* Kimi-VL's image processor (KimiVLImageProcessor: scaled to in_token_limit patches, padded to whole merge blocks or
 * cropped to whole patches, patches row by row) and Kimi K2.5's (media_proc_cfg: navit_resize_image's limits, padded
 * to whole merge blocks) behind qwen_vl_utils' fetch_image, as verl runs them, against the same steps in Pillow,
 * torchvision and NumPy (tools/fixtures/make_kimi_image_fixture.py): preprocessor_config.json, the pixel values and
 * grids of five images at three settings each, the images they cannot take refused by name, bad configs. */
#include "vc_test.h"
#include "vision_helpers.h"
#include <math.h>
#include <unistd.h>

#define KIMI_VIS VISION_DIR "/kimi_vl"
#define K25_VIS VISION_DIR "/kimi_k25"

static void setting(vc_vl_image_config *c, const cJSON *over) {
    const cJSON *l = cJSON_GetObjectItem(over, "in_token_limit"), *p = cJSON_GetObjectItem(over, "pad_input");
    const cJSON *l25 = cJSON_GetObjectItem(over, "in_patch_limit"), *s = cJSON_GetObjectItem(over, "patch_limit_on_one_side");
    if (l || l25) c->in_token_limit = (int64_t)(l ? l : l25)->valuedouble;
    if (s) c->side_limit = (int64_t)s->valuedouble;
    if (p) c->pad_input = cJSON_IsTrue(p);
}

static int refused(const cJSON *ref, const char *key) {
    for (const cJSON *r = cJSON_GetObjectItem(ref, "refused")->child; r; r = r->next)
        if (!strcmp(r->valuestring, key)) return 1;
    return 0;
}

/* the processor of fixture folder dir (its config as loaded: cfg) on the reference's images and settings: n_want
 * images whose pixels equal Python's, n_refused refused naming the merge blocks */
static void check_pixels(const char *dir, const char *label, const vc_vl_image_config *base, int n_want, int n_refused) {
    vc_vl_image_config cfg = *base;
    char path[256];
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    snprintf(path, sizeof path, "%s/reference.json", dir);
    CHECK_OK(vc_json_load_file(path, &ref));
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    CHECK_OK(vc_ckpt_open(path, &ck));
    if (!ref || !ck) return;
    int n = 0, nref = 0;
    double worst = 0;
    for (const cJSON *s = cJSON_GetObjectItem(ref, "settings")->child; s; s = s->next) {
        vc_vl_image_config c = cfg;
        setting(&c, s);
        int i = 0;
        for (const cJSON *im = cJSON_GetObjectItem(ref, "images")->child; im; im = im->next, i++) {
            char key[64], name[80];
            snprintf(key, sizeof key, "%d%s%s", i, *s->string ? "." : "", s->string);
            vc_image img;
            vc_vl_pixels px;
            CHECK_OK(vc_image_load(img_path(im->valuestring), VC_ALPHA_QWEN_VL_UTILS, &img));
            vc_status st = vc_vl_verl_image(&c, &img, NULL, im->valuestring, &px);
            vc_image_free(&img);
            if (refused(ref, key)) {
                CHECK_MSG(st && strstr(vc_last_error(), "merge blocks") && strstr(vc_last_error(), im->valuestring),
                          "%s: should be refused naming the image and the merge blocks; got %s", key,
                          st ? vc_last_error() : "pixels");
                if (!st) vc_vl_pixels_free(&px);
                nref++;
                continue;
            }
            CHECK_MSG(!st, "%s: %s", key, vc_last_error());
            if (st) continue;
            snprintf(name, sizeof name, "%s.grid", key);
            const vc_st_tensor *g = vc_ckpt_find(ck, name);
            snprintf(name, sizeof name, "%s.pixels", key);
            const vc_st_tensor *p = vc_ckpt_find(ck, name);
            const int64_t *gv = g ? g->data : NULL;
            int same = g && p && px.grid_t == 1 && gv[0] == px.grid_h && gv[1] == px.grid_w && p->shape[0] == px.rows &&
                       p->shape[1] == px.cols;
            CHECK_MSG(same, "%s: grid %d x %d, Python %lld x %lld", key, px.grid_h, px.grid_w, gv ? (long long)gv[0] : -1LL,
                      gv ? (long long)gv[1] : -1LL);
            for (int64_t k = 0; same && k < px.rows * px.cols; k++)
                worst = fmax(worst, fabs((double)px.data[k] - (double)((const float *)p->data)[k]));
            /* the grid the dataset plans with (vc_vl_processor_resize) is the processed image's */
            int h = 0, w = 0;
            vc_image again;
            CHECK_OK(vc_image_load(img_path(im->valuestring), VC_ALPHA_QWEN_VL_UTILS, &again));
            vc_image fetched;
            CHECK_OK(vc_vl_fetch_image(&again, &(vc_vl_fetch_opts){ .patch_size = 14 }, NULL, &fetched));
            CHECK_OK(vc_vl_processor_resize(&c, fetched.height, fetched.width, &h, &w));
            CHECK(h == px.grid_h * 14 && w == px.grid_w * 14);
            vc_image_free(&fetched);
            vc_image_free(&again);
            vc_vl_pixels_free(&px);
            n++;
        }
    }
    printf("%s processor: %d images through fetch_image and its steps (%d refused), max pixel difference %g\n", label, n,
           nref, worst);
    CHECK_MSG(n == n_want && nref == n_refused && worst == 0, "%s pixel values differ from Python by %g (%d images)",
              label, worst, n);
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
}

/* sizes it cannot reach are refused by name: past 512 patches a side, no whole patch left */
static void limits(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(KIMI_VIS, &c));
    int h, w;
    c.in_token_limit = 1 << 20;
    CHECK(vc_vl_kimi_size(&c, 14 * 520, 28, &h, &w) && strstr(vc_last_error(), "512 per side"));
    c.in_token_limit = 4096;
    CHECK(vc_vl_kimi_size(&c, 14 * 520, 28, &h, &w)); /* 1,040 patches: not scaled, still 520 rows */
    CHECK_OK(vc_vl_kimi_size(&c, 14 * 600, 140, &h, &w)); /* 6,000 patches scaled under the limit first */
    CHECK(h % 28 == 0 && w % 28 == 0 && h / 14 < 512 && (h / 14) * (w / 14) <= 4096 + 2 * (h / 14 + w / 14));
    c.pad_input = 0;
    CHECK(vc_vl_kimi_size(&c, 10, 300, &h, &w) && strstr(vc_last_error(), "none"));
    c.pad_input = 1;
    CHECK_OK(vc_vl_kimi_size(&c, 10, 300, &h, &w)); /* padded: one block row */
    CHECK(h == 28 && w == 308);
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"merge_kernel_size\": [2, 3]", "merge_kernel_size" },
                                          { "\"in_token_limit\": 0", "in_token_limit" },
                                          { "\"patch_size\": -4", "patch_size" },
                                          { "\"image_std\": [0.5, 0, 0.5]", "image_std" },
                                          { "\"pad_input\": \"yes\"", "pad_input" } };
    refused_configs("KimiVLImageProcessor", "", bad, sizeof bad / sizeof bad[0]);
}

/* transformers 5's Kimi_K25ImageProcessor at the media_proc_cfg c's settings (max_patches, size's max side): its pixels
 * (torchvision's resize, the fused rescale and normalize) against transformers' (NAME.native.pixels); unequal sides
 * refused by name */
static void native(const vc_vl_image_config *c) {
    char path[128], text[512];
    snprintf(path, sizeof path, "/tmp/verlc_k25native_%d.json", (int)getpid());
    snprintf(text, sizeof text, "{\"image_processor_type\": \"Kimi_K25ImageProcessor\", \"max_patches\": %lld, "
             "\"size\": {\"max_height\": %lld, \"max_width\": %lld}, \"patch_size\": 14, \"merge_size\": 2}",
             (long long)c->in_token_limit, (long long)c->side_limit, (long long)c->side_limit);
    CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
    vc_vl_image_config n;
    CHECK_OK(vc_vl_image_config_load(path, &n));
    CHECK(n.kimi == 2 && n.tv && n.in_token_limit == c->in_token_limit && n.side_limit == c->side_limit);
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(K25_VIS "/reference.json", &ref));
    CHECK_OK(vc_ckpt_open(K25_VIS "/reference.safetensors", &ck));
    int i = 0;
    double worst = 0;
    for (const cJSON *im = ref && ck ? cJSON_GetObjectItem(ref, "images")->child : NULL; im; im = im->next, i++) {
        char name[32];
        snprintf(name, sizeof name, "%d.native", i);
        vc_vl_pixels px;
        const vc_st_tensor *p;
        verl_pixels_ref(&n, ck, im->valuestring, name, "none", &px, &p);
        int same = p && p->shape[0] == px.rows && p->shape[1] == px.cols;
        worst = fmax(worst, pixels_diff(&px, p, same));
    }
    printf("kimi-k2.5 transformers processor: %d images, max pixel difference %g\n", i, worst);
    CHECK(i == 5 && worst == 0);
    snprintf(text, sizeof text, "{\"image_processor_type\": \"Kimi_K25ImageProcessor\", \"size\": {\"max_height\": 512, "
             "\"max_width\": 256}}");
    CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
    CHECK(vc_vl_image_config_load(path, &n) && strstr(vc_last_error(), "max_width"));
    remove(path);
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
}

/* Kimi K2.5's media_proc_cfg: its keys; past patch_limit_on_one_side padded, refused by name; transformers 5's
 * processor; bad values refused naming the key */
static void k25(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(K25_VIS, &c));
    CHECK(c.kimi == 2 && c.pad_input && c.in_token_limit == 16384 && c.side_limit == 512 && c.patch_size == 14 &&
          c.merge_size == 2 && c.temporal_patch_size == 1 && c.image_mean[1] == 0.5 && c.image_std[2] == 0.5);
    check_pixels(K25_VIS, "kimi-k2.5", &c, 15, 0);
    int h, w;
    vc_vl_image_config s = c;
    s.side_limit = 3; /* 42 x 42 pixels: 3 x 3 patches, padded to 4 x 4 */
    CHECK(vc_vl_kimi_size(&s, 42, 42, &h, &w) && strstr(vc_last_error(), "patch_limit_on_one_side 3"));
    s.side_limit = 4;
    CHECK_OK(vc_vl_kimi_size(&s, 14 * 300, 14 * 30, &h, &w)); /* scaled to 4 patches a side at most */
    CHECK(h == 56 && w == 28);
    CHECK_OK(vc_vl_kimi_size(&c, 14 * 500, 126, &h, &w)); /* 4,500 patches: not scaled (under 16,384), padded */
    CHECK(h == 14 * 500 && w == 140);
    CHECK_OK(vc_vl_kimi_size(&c, 14 * 600, 126, &h, &w)); /* 600 rows: scaled to 512 (7,168 pixels), 126 to 107 */
    CHECK(h == 7168 && w == 112);
    native(&c);
    static const char *const bad[][2] = { { "\"merge_kernel_size\": [2, 3]", "merge_kernel_size" },
                                          { "\"merge_kernel_size\": 2.5", "merge_kernel_size" },
                                          { "\"in_patch_limit\": 0", "in_patch_limit" },
                                          { "\"patch_limit_on_one_side\": -1", "patch_limit_on_one_side" },
                                          { "\"fixed_output_tokens\": 64", "fixed_output_tokens" },
                                          { "\"image_std\": [0.5, 0, 0.5]", "image_std" } };
    char path[128], text[512];
    snprintf(path, sizeof path, "/tmp/verlc_k25proc_%d.json", (int)getpid());
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "{\"media_proc_cfg\": {%s}}", bad[i][0]);
        const char *key = bad[i][1];
        CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
        vc_status st = vc_vl_image_config_load(path, &s);
        CHECK_MSG(st && strstr(vc_last_error(), key) && strstr(vc_last_error(), path), "%s: %s", text,
                  st ? vc_last_error() : "accepted");
    }
    remove(path);
}

int main(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(KIMI_VIS, &cfg));
    CHECK(cfg.kimi == 1 && cfg.pad_input && cfg.in_token_limit == 4096 && cfg.patch_size == 14 && cfg.merge_size == 2 &&
          cfg.temporal_patch_size == 1 && cfg.image_mean[1] == 0.5);
    check_pixels(KIMI_VIS, "kimi-vl", &cfg, 13, 2);
    limits();
    bad_configs();
    k25();
    return vc_test_done();
}
