/* Gemma 3's image processor (Gemma3ImageProcessor: every image resized to its fixed size with Pillow's BILINEAR filter,
 * or BICUBIC, normalized to [-1, 1], patches row by row) behind qwen_vl_utils' fetch_image, as verl's image path runs
 * it, against transformers 5.25's Gemma3ImageProcessorPil (tools/fixtures/make_gemma3_image_fixture.py): the pixel
 * values of five images at two settings, the prompt markup (Gemma3Processor's full_image_sequence), bad configs. */
#include "vc_test.h"
#include <stdlib.h>
#include "vision_helpers.h"
#include "data/vl_rows.h"
#include <math.h>
#include <unistd.h>

#define GEMMA_VIS VISION_DIR "/gemma3"

static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(GEMMA_VIS, &cfg));
    CHECK(cfg.gemma3 && cfg.fixed_h == 56 && cfg.fixed_w == 56 && cfg.resample == 2 && cfg.merge_size == 2 &&
          cfg.temporal_patch_size == 1 && cfg.image_mean[0] == 0.5 && cfg.image_std[2] == 0.5);
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(GEMMA_VIS "/reference.json", &ref));
    CHECK_OK(vc_ckpt_open(GEMMA_VIS "/reference.safetensors", &ck));
    if (!ref || !ck) return;
    int n = 0;
    double worst = 0;
    for (int pass = 0; pass < 2; pass++) {
        vc_vl_image_config c = cfg;
        if (pass) c.fixed_h = c.fixed_w = 112, c.resample = 3, c.merge_size = 2;
        int i = 0;
        for (const cJSON *s = cJSON_GetObjectItem(ref, "images")->child; s; s = s->next, i++, n++) {
            vc_image img;
            vc_vl_pixels px;
            char key[64];
            snprintf(key, sizeof key, "%d%s.pixels", i, pass ? ".big" : "");
            CHECK_OK(vc_image_load(img_path(s->valuestring), VC_ALPHA_QWEN_VL_UTILS, &img));
            CHECK_OK(vc_vl_verl_image(&c, &img, NULL, s->valuestring, &px));
            vc_image_free(&img);
            const vc_st_tensor *p = vc_ckpt_find(ck, key);
            int side = c.fixed_h / 14;
            int same = p && px.grid_t == 1 && px.grid_h == side && px.grid_w == side && p->shape[0] == px.rows &&
                       p->shape[1] == px.cols;
            CHECK_MSG(same, "%s: %lld x %lld values, grid %d x %d", key, (long long)px.rows, (long long)px.cols,
                      px.grid_h, px.grid_w);
            for (int64_t k = 0; same && k < px.rows * px.cols; k++)
                worst = fmax(worst, fabs((double)px.data[k] - (double)((const float *)p->data)[k]));
            vc_vl_pixels_free(&px);
        }
    }
    printf("gemma3 processor: %d images through fetch_image and Gemma3ImageProcessor, max pixel difference %g\n", n,
           worst);
    CHECK_MSG(n == 10 && worst == 0, "Gemma 3 pixel values differ from transformers by %g", worst);
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
}

/* without do_resize an image must have the tower's size: refused by name otherwise */
static void unresized(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(GEMMA_VIS, &c));
    c.do_resize = 0;
    vc_image img;
    vc_vl_pixels px;
    CHECK_OK(vc_image_load(img_path("rgb_37x53.png"), VC_ALPHA_QWEN_VL_UTILS, &img));
    CHECK(vc_vl_image_process(&c, &img, "rgb_37x53.png", &px) && strstr(vc_last_error(), "rgb_37x53.png: 37x53") &&
          strstr(vc_last_error(), "56x56"));
    vc_image sized;
    CHECK_OK(vc_image_resize(&img, 56, 56, 2, &sized));
    CHECK_OK(vc_vl_image_process(&c, &sized, "sized", &px));
    CHECK(px.grid_h == 4 && px.grid_w == 4 && px.rows == 16);
    vc_vl_pixels_free(&px);
    vc_image_free(&sized);
    vc_image_free(&img);
}

/* the template's begin-of-image marker becomes Gemma3Processor's full_image_sequence */
static void markup(void) {
    vc_vl_pads p = { "<image_soft_token>", NULL, NULL, NULL };
    vc_vl_pads_markup(&p, "<start_of_image>", "<end_of_image>");
    vc_rl_image im[2] = { { .tokens = 2 }, { .tokens = 1 } };
    char *out = NULL;
    CHECK_OK(vc_vl_expand_visuals("A <start_of_image> and <start_of_image>?", &p, im, 2, 1, "test", &out, NULL));
    CHECK_MSG(out && !strcmp(out, "A \n\n<start_of_image><image_soft_token><image_soft_token><end_of_image>\n\n and "
                                  "\n\n<start_of_image><image_soft_token><end_of_image>\n\n?"), "markup: %s", out);
    free(out);
    CHECK(vc_vl_expand_visuals("one <start_of_image> only", &p, im, 2, 1, "test", &out, NULL) &&
          strstr(vc_last_error(), "<start_of_image>"));
    vc_vl_pads q = { "<|image_pad|>", NULL, NULL, NULL }; /* no begin / end tokens: unchanged */
    vc_vl_pads_markup(&q, NULL, "<end_of_image>");
    CHECK(!q.close && !strcmp(q.image, "<|image_pad|>"));
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"do_pan_and_scan\": true", "do_pan_and_scan" },
                                          { "\"resample\": 0", "resample" },
                                          { "\"size\": {\"height\": 56, \"width\": 70}", "size" },
                                          { "\"image_seq_length\": 5", "image_seq_length" },
                                          { "\"size\": {\"height\": 0, \"width\": 56}", "height" } };
    refused_configs("Gemma3ImageProcessor", "\"size\": {\"height\": 56, \"width\": 56}, \"image_seq_length\": 4", bad,
                    sizeof bad / sizeof bad[0]);
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references are the PIL backend's; tests/vision/test_tv_proc.c
                                              * checks the torchvision one, the default) */
    check_pixels();
    unresized();
    markup();
    bad_configs();
    return vc_test_done();
}
