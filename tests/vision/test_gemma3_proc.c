/* Gemma 3's image processor (Gemma3ImageProcessor: every image resized to its fixed size with Pillow's BILINEAR filter,
 * or BICUBIC, normalized to [-1, 1], patches row by row) behind qwen_vl_utils' fetch_image, as verl's image path runs
 * it, against transformers 5.25's Gemma3ImageProcessorPil (tools/fixtures/make_gemma3_image_fixture.py): the pixel
 * values of five images at two settings and with pan and scan (the whole image and its crops; two of them also on the
 * torchvision backend, transformers' Gemma3ImageProcessor), the crops' arithmetic,
 * the prompt markup (Gemma3Processor's full_image_sequence, and pan and scan's), bad configs. */
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

/* pan and scan: the whole image's patches then each crop's, and their number, as transformers' (the fixture's PAS
 * setting: crops of at least 20 pixels, at most 3, from an aspect ratio of 1.3); through the data path, the image's
 * grid of frames and tokens */
static void check_pas(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(GEMMA_VIS, &c));
    CHECK(!c.pas && c.pas_min_crop == 256 && c.pas_max_crops == 4 && c.pas_min_ratio == 1.2); /* (Gemma3Processor's) */
    c.pas = 1, c.pas_min_crop = 20, c.pas_max_crops = 3, c.pas_min_ratio = 1.3;
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(GEMMA_VIS "/reference.json", &ref));
    CHECK_OK(vc_ckpt_open(GEMMA_VIS "/reference.safetensors", &ck));
    if (!ref || !ck) return;
    int n = 0, cropped = 0;
    double worst = 0;
    for (const cJSON *s = cJSON_GetObjectItem(ref, "images")->child; s; s = s->next, n++) {
        vc_image img;
        vc_vl_pixels px;
        char key[64], ck2[64];
        snprintf(key, sizeof key, "%d.pas.pixels", n);
        snprintf(ck2, sizeof ck2, "%d.pas.crops", n);
        CHECK_OK(vc_image_load(img_path(s->valuestring), VC_ALPHA_QWEN_VL_UTILS, &img));
        CHECK_OK(vc_vl_verl_image(&c, &img, NULL, s->valuestring, &px));
        const vc_st_tensor *p = vc_ckpt_find(ck, key), *pc = vc_ckpt_find(ck, ck2);
        int crops = pc ? ((const int32_t *)pc->data)[0] : -1;
        int same = p && px.grid_t == crops + 1 && px.grid_h == 4 && px.grid_w == 4 && p->shape[0] == px.rows &&
                   p->shape[1] == px.cols;
        CHECK_MSG(same, "%s: %lld x %lld values, %d frames (transformers: %d crops)", key, (long long)px.rows,
                  (long long)px.cols, px.grid_t, crops);
        for (int64_t k = 0; same && k < px.rows * px.cols; k++)
            worst = fmax(worst, fabs((double)px.data[k] - (double)((const float *)p->data)[k]));
        cropped += crops > 0;
        vc_vl_pixels_free(&px);
        /* the data path: the row's image gets the same frames and 4 tokens each */
        char row[512];
        snprintf(row, sizeof row, "[\"%s\"]", img_path(s->valuestring));
        cJSON *imgs = cJSON_Parse(row);
        vc_rl_image *ims = NULL;
        CHECK_OK(vc_vl_parse_images(imgs, &c, 0, "row", "images", &ims));
        CHECK_MSG(ims && ims[0].crops == crops && ims[0].grid[0] == crops + 1 && ims[0].tokens == 4 * (crops + 1),
                  "%s: the data path's grid (%d, %d, %d), %lld tokens, %d crops", s->valuestring, ims ? ims[0].grid[0] : 0,
                  ims ? ims[0].grid[1] : 0, ims ? ims[0].grid[2] : 0, ims ? (long long)ims[0].tokens : 0LL,
                  ims ? ims[0].crops : 0);
        free(ims);
        cJSON_Delete(imgs);
        vc_image_free(&img);
    }
    /* the torchvision backend (transformers' Gemma3ImageProcessor, where torchvision is installed): the first two */
    c.tv = 1;
    int ntv = 0;
    for (const cJSON *s = cJSON_GetObjectItem(ref, "images")->child; s && ntv < 2; s = s->next, ntv++) {
        vc_image img;
        vc_vl_pixels px;
        char key[64];
        snprintf(key, sizeof key, "%d.pas.tv.pixels", ntv);
        CHECK_OK(vc_image_load(img_path(s->valuestring), VC_ALPHA_QWEN_VL_UTILS, &img));
        CHECK_OK(vc_vl_verl_image(&c, &img, NULL, s->valuestring, &px));
        const vc_st_tensor *p = vc_ckpt_find(ck, key);
        int same = p && p->shape[0] == px.rows && p->shape[1] == px.cols;
        CHECK_MSG(same, "%s: %lld x %lld values on the torchvision backend", key, (long long)px.rows, (long long)px.cols);
        for (int64_t k = 0; same && k < px.rows * px.cols; k++)
            worst = fmax(worst, fabs((double)px.data[k] - (double)((const float *)p->data)[k]));
        vc_vl_pixels_free(&px);
        vc_image_free(&img);
    }
    printf("gemma3 pan and scan: %d images (%d cropped) on the PIL backend, %d on the torchvision one, max pixel "
           "difference %g against transformers\n", n, cropped, ntv, worst);
    CHECK_MSG(n == 5 && cropped >= 3 && ntv == 2 && worst == 0, "Gemma 3 pan and scan pixel values differ by %g", worst);
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
}

/* the crops' arithmetic against transformers' pan_and_scan (its crops' count and first crop's size, computed there:
 * rounding half up, the minimum crop size, 2 to max crops, the activation ratio) */
static void crop_counts(void) {
    static const struct { int h, w, min_crop, max_crops; double ratio; int n, ch, cw; } cases[] = {
        { 300, 1000, 256, 4, 1.2, 3, 300, 334 }, { 90, 200, 256, 4, 1.2, 0, 0, 0 },
        { 1000, 300, 256, 4, 1.2, 3, 334, 300 }, { 600, 700, 256, 4, 1.2, 0, 0, 0 },
        { 512, 1800, 256, 4, 1.2, 4, 512, 450 }, { 100, 330, 20, 3, 1.3, 3, 100, 110 },
        { 500, 520, 10, 4, 1.01, 2, 500, 260 },  { 2000, 100, 20, 4, 1.2, 4, 500, 100 },
    };
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(GEMMA_VIS, &c));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        c.pas = 1, c.pas_min_crop = cases[i].min_crop, c.pas_max_crops = cases[i].max_crops;
        c.pas_min_ratio = cases[i].ratio;
        int ncw, nch, cw, ch, n = vc_vl_gemma3_crops(&c, cases[i].h, cases[i].w, &ncw, &nch, &cw, &ch);
        CHECK_MSG(n == cases[i].n && (!n || (ch == cases[i].ch && cw == cases[i].cw && ncw * nch == n)),
                  "%dx%d: %d crops of %dx%d (transformers: %d of %dx%d)", cases[i].w, cases[i].h, n, cw, ch,
                  cases[i].n, cases[i].cw, cases[i].ch);
    }
    /* a 4 x 1 image in 3 crops of 2: the last one starts past the edge (transformers' pan_and_scan cuts it empty and
     * its resize fails): refused by name */
    c.pas = 1, c.pas_min_crop = 1, c.pas_max_crops = 3, c.pas_min_ratio = 1.2;
    uint8_t px4[12] = { 0 };
    vc_image tiny = { .width = 4, .height = 1, .rgb = px4, .mode = VC_IMG_RGB };
    vc_vl_pixels out;
    CHECK_MSG(vc_vl_image_process(&c, &tiny, "tiny.png", &out) && strstr(vc_last_error(), "tiny.png") &&
                  strstr(vc_last_error(), "empty"), "an empty crop: %s", vc_last_error());
    c.pas = 0;
    int a, b, d, e;
    CHECK(vc_vl_gemma3_crops(&c, 300, 1000, &a, &b, &d, &e) == 0); /* (off) */
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
    /* pan and scan: Gemma3Processor.replace_image_token's text for an image and its 2 crops, one token each */
    vc_rl_image pas = { .tokens = 3, .crops = 2 };
    CHECK_OK(vc_vl_expand_visuals("A <start_of_image>.", &p, &pas, 1, 1, "test", &out, NULL));
    CHECK_MSG(out && !strcmp(out, "A Here is the original image \n\n<start_of_image><image_soft_token><end_of_image>\n\n "
                                  "and here are some crops to help you see better \n\n<start_of_image><image_soft_token>"
                                  "<end_of_image>\n\n \n\n<start_of_image><image_soft_token><end_of_image>\n\n."),
              "pan and scan markup: %s", out);
    free(out);
    vc_vl_pads q = { "<|image_pad|>", NULL, NULL, NULL }; /* no begin / end tokens: unchanged */
    vc_vl_pads_markup(&q, NULL, "<end_of_image>");
    CHECK(!q.close && !strcmp(q.image, "<|image_pad|>"));
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"pan_and_scan_min_crop_size\": 0", "pan_and_scan_min_crop_size" },
                                          { "\"pan_and_scan_max_num_crops\": -1", "pan_and_scan_max_num_crops" },
                                          { "\"pan_and_scan_min_ratio_to_activate\": -2",
                                            "pan_and_scan_min_ratio_to_activate" },
                                          { "\"do_pan_and_scan\": 3", "do_pan_and_scan" },
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
    check_pas();
    crop_counts();
    unresized();
    markup();
    bad_configs();
    return vc_test_done();
}
