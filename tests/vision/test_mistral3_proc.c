/* Mistral 3's image processor (PixtralImageProcessor as PixtralProcessor calls it: an image over longest_edge scaled
 * down, its sides rounded up to whole patch x merge steps, normalized, patches row by row) behind qwen_vl_utils'
 * fetch_image, as verl's image path runs it, against transformers 5.25's PixtralImageProcessorPil
 * (tools/fixtures/make_mistral3_image_fixture.py): the pixel values and sizes of five images at two settings, the
 * merge read from processor_config.json, PixtralProcessor's markup (rows of [IMG], each followed by [IMG_BREAK], the
 * last by [IMG_END]), bad configs. */
#include "vc_test.h"
#include "vision_helpers.h"
#include "data/vl_rows.h"
#include <math.h>
#include <unistd.h>

#define M3_VIS VISION_DIR "/mistral3"

/* image s at setting c against the reference's NAME.pixels and NAME.size: the worst difference */
static double check_one(const vc_vl_image_config *c, const vc_checkpoint *ck, const char *s, const char *name) {
    vc_vl_pixels px;
    const vc_st_tensor *p;
    const int64_t *ref = verl_pixels_ref(c, ck, s, name, "size", &px, &p); /* fetched height, width; resized ones */
    int P = c->patch_size, h = 0, w = 0;
    int same = p && ref && px.grid_t == 1 && px.grid_h == ref[2] / P && px.grid_w == ref[3] / P &&
               p->shape[0] == px.rows && p->shape[1] == px.cols && !vc_vl_processor_resize(c, ref[0], ref[1], &h, &w) &&
               h == ref[2] && w == ref[3];
    CHECK_MSG(same, "%s: %lld x %lld values, grid %d x %d", name, (long long)px.rows, (long long)px.cols, px.grid_h,
              px.grid_w);
    return pixels_diff(&px, p, same);
}

static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(M3_VIS, &cfg));
    CHECK(cfg.tv); /* (its Fast class name picks torchvision's backend; these references are the PIL backend's,
                      * tests/vision/test_tv_proc.c checks the other) */
    cfg.tv = 0;
    CHECK(cfg.pixtral && cfg.patch_size == 4 && cfg.merge_size == 2 && cfg.fixed_h == 64 && cfg.resample == 3 &&
          cfg.temporal_patch_size == 1 && cfg.image_mean[0] > 0.48);
    vc_vl_image_config big = cfg;
    big.patch_size = 2, big.fixed_h = 96, big.resample = 2;
    int n = 0;
    double worst = check_settings(M3_VIS, &cfg, &big, check_one, &n);
    printf("mistral3 processor: %d images through fetch_image and PixtralImageProcessor, max pixel difference %g\n", n,
           worst);
    CHECK_MSG(n == 10 && worst == 0, "Mistral 3 pixel values differ from transformers by %g", worst);
    /* a side scaled to no pixel (transformers' resize fails too): refused by name */
    int h, w;
    CHECK(vc_vl_pixtral_size(&cfg, 5, 3000, &h, &w) && strstr(vc_last_error(), "0 pixels"));
}

/* the template's [IMG] becomes rows of the merged grid's tokens, each row closed by [IMG_BREAK], the last by
 * [IMG_END] */
static void markup(void) {
    vc_vl_pads p = { "[IMG]", NULL, NULL, NULL, NULL, NULL };
    vc_vl_pads_apply(&p, 2, "[IMG_BREAK]", "[IMG_END]");
    vc_rl_image im[1] = { { .grid = { 1, 4, 6 }, .tokens = 6 } }; /* 2 rows of 3 after the 2 x 2 merge */
    char *out = NULL;
    CHECK_OK(vc_vl_expand_visuals("See [IMG]?", &p, im, 1, 1, "test", &out, NULL));
    CHECK_MSG(out && !strcmp(out, "See [IMG][IMG][IMG][IMG_BREAK][IMG][IMG][IMG][IMG_END]?"), "markup: %s", out);
    free(out);
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"resample\": 0", "resample" },
                                          { "\"patch_size\": {\"height\": 4, \"width\": 8}", "patch_size" },
                                          { "\"size\": {\"longest_edge\": 0}", "longest_edge" },
                                          { "\"patch_size\": -4", "patch_size" } };
    refused_configs("PixtralImageProcessor", "", bad, sizeof bad / sizeof bad[0]);
}

int main(void) {
    check_pixels();
    markup();
    bad_configs();
    return vc_test_done();
}
