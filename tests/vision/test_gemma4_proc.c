/* Gemma 4's image processor (Gemma4ImageProcessor: each image resized, its aspect ratio kept, to whole k x k blocks of
 * patches within its soft-token budget, rescaled to [0, 1], patches row by row with each patch's values (row, column,
 * channel)) behind qwen_vl_utils' fetch_image, as verl's image path runs it, against transformers 5.25's
 * Gemma4ImageProcessorPil (tools/fixtures/make_gemma4_image_fixture.py): the pixel values and patch grids of five images
 * at two settings, the sizes it refuses, Gemma4Processor's markup (begin-of-image, the image token once per soft token,
 * end-of-image around each image token of the template), bad configs. */
#include "vc_test.h"
#include <stdlib.h>
#include "vision_helpers.h"
#include "data/vl_rows.h"
#include <math.h>
#include <unistd.h>

#define G4_VIS VISION_DIR "/gemma4"

/* image s at setting c against the reference's NAME.pixels and NAME.size: the worst difference */
static double check_one(const vc_vl_image_config *c, const vc_checkpoint *ck, const char *s, const char *name) {
    vc_vl_pixels px;
    const vc_st_tensor *p;
    const int64_t *ref = verl_pixels_ref(c, ck, s, name, "size", &px, &p); /* fetched height, width; patch rows, columns */
    int h = 0, w = 0;
    int same = p && ref && px.grid_t == 1 && px.grid_h == ref[2] && px.grid_w == ref[3] && p->shape[0] == px.rows &&
               p->shape[1] == px.cols && !vc_vl_processor_resize(c, ref[0], ref[1], &h, &w) &&
               h == ref[2] * c->patch_size && w == ref[3] * c->patch_size;
    CHECK_MSG(same, "%s: %lld x %lld values, grid %d x %d", name, (long long)px.rows, (long long)px.cols, px.grid_h,
              px.grid_w);
    return pixels_diff(&px, p, same);
}

static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(G4_VIS, &cfg));
    CHECK(cfg.gemma4 && cfg.patch_size == 4 && cfg.merge_size == 3 && cfg.max_soft == 70 && cfg.resample == 3 &&
          !cfg.do_normalize && cfg.temporal_patch_size == 1);
    vc_vl_image_config big = cfg;
    big.patch_size = 2, big.max_soft = 140, big.merge_size = 2, big.resample = 2;
    int n = 0;
    double worst = check_settings(G4_VIS, &cfg, &big, check_one, &n);
    printf("gemma4 processor: %d images through fetch_image and Gemma4ImageProcessor, max pixel difference %g\n", n,
           worst);
    CHECK_MSG(n == 10 && worst == 0, "Gemma 4 pixel values differ from transformers by %g", worst);
}

/* get_aspect_ratio_preserving_size: the budget of 70 soft tokens of 3 x 3 patches of 16 pixels (630 patches); a thin
 * image keeps one block across; sizes it cannot meet are refused by name */
static void sizes(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(G4_VIS, &c));
    c.patch_size = 16;
    int h, w;
    CHECK_OK(vc_vl_gemma4_size(&c, 480, 640, &h, &w));
    CHECK_MSG(h == 336 && w == 432 && (h / 16) * (w / 16) <= 630, "480 x 640: %d x %d", h, w); /* (transformers') */
    CHECK_OK(vc_vl_gemma4_size(&c, 8, 5000, &h, &w)); /* a row of blocks, as long as the budget lets it be */
    CHECK_MSG(h == 48 && w == 3360, "8 x 5000: %d x %d", h, w);
    c.patch_size = 1 << 12; /* (transformers would make it 98304 pixels a side: refused by name instead) */
    CHECK(vc_vl_gemma4_size(&c, 20, 20, &h, &w) && strstr(vc_last_error(), "20x20") &&
          strstr(vc_last_error(), "patches"));
}

/* the template's image token becomes Gemma4Processor's begin-of-image, the token once per soft token, end-of-image */
static void markup(void) {
    vc_vl_pads p = { "<|image|>", NULL, NULL, NULL, NULL };
    vc_vl_pads_wrap(&p, "<|image>", "<image|>");
    vc_rl_image im[1] = { { .tokens = 3 } };
    char *out = NULL;
    CHECK_OK(vc_vl_expand_visuals("Look: <|image|> now", &p, im, 1, 1, "test", &out, NULL));
    CHECK_MSG(out && !strcmp(out, "Look: <|image><|image|><|image|><|image|><image|> now"), "markup: %s", out);
    free(out);
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"max_soft_tokens\": 100", "max_soft_tokens" },
                                          { "\"resample\": 0", "resample" },
                                          { "\"patch_size\": 0", "patch_size" },
                                          { "\"pooling_kernel_size\": -1", "pooling_kernel_size" } };
    refused_configs("Gemma4ImageProcessor", "", bad, sizeof bad / sizeof bad[0]);
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references are the PIL backend's; tests/vision/test_tv_proc.c
                                              * checks the torchvision one, the default) */
    check_pixels();
    sizes();
    markup();
    bad_configs();
    return vc_test_done();
}
