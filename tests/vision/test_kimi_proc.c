/* Kimi-VL's image processor (KimiVLImageProcessor: scaled to in_token_limit patches, padded to whole merge blocks or
 * cropped to whole patches, patches row by row) behind qwen_vl_utils' fetch_image, as verl runs it, against the same
 * steps in Pillow and torchvision (tools/fixtures/make_kimi_image_fixture.py): preprocessor_config.json, the pixel
 * values and grids of five images at three settings, the images it cannot take refused by name, bad configs. */
#include "vc_test.h"
#include "vision_helpers.h"
#include <math.h>
#include <unistd.h>

#define KIMI_VIS VISION_DIR "/kimi_vl"

static void setting(vc_vl_image_config *c, const cJSON *over) {
    const cJSON *l = cJSON_GetObjectItem(over, "in_token_limit"), *p = cJSON_GetObjectItem(over, "pad_input");
    if (l) c->in_token_limit = (int64_t)l->valuedouble;
    if (p) c->pad_input = cJSON_IsTrue(p);
}

static int refused(const cJSON *ref, const char *key) {
    for (const cJSON *r = cJSON_GetObjectItem(ref, "refused")->child; r; r = r->next)
        if (!strcmp(r->valuestring, key)) return 1;
    return 0;
}

static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(KIMI_VIS, &cfg));
    CHECK(cfg.kimi && cfg.pad_input && cfg.in_token_limit == 4096 && cfg.patch_size == 14 && cfg.merge_size == 2 &&
          cfg.temporal_patch_size == 1 && cfg.image_mean[1] == 0.5);
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(KIMI_VIS "/reference.json", &ref));
    CHECK_OK(vc_ckpt_open(KIMI_VIS "/reference.safetensors", &ck));
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
    printf("kimi-vl processor: %d images through fetch_image and KimiVLImageProcessor's steps (%d refused), max pixel "
           "difference %g\n", n, nref, worst);
    CHECK_MSG(n == 13 && nref == 2 && worst == 0, "Kimi-VL pixel values differ from Python by %g (%d images)", worst, n);
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

int main(void) {
    check_pixels();
    limits();
    bad_configs();
    return vc_test_done();
}
