/* Llama 4's image processor (Llama4ImageProcessor, torchvision only: the best-fitting canvas of tiles, torchvision's
 * antialiased resize without distortion, black padding, bfloat16 normalization, the tiles and past one the whole image
 * as one more) behind qwen_vl_utils' fetch_image, as verl's image path runs it, against transformers 5.25
 * (tools/fixtures/make_llama4_image_fixture.py): the pixel values and tilings of five images at two settings, the
 * canvases and resized sizes of 468 random sizes from the processor's own functions, the data path's grids and
 * Llama4Processor's markup, bad configs. */
#include "vc_test.h"
#include "vision_helpers.h"
#include "data/vl_rows.h"
#include <math.h>
#include <unistd.h>

#define L4_VIS VISION_DIR "/llama4"

/* image s at setting c: its pixels against the reference's NAME.pixels and NAME.tiles; the worst difference */
static double check_one(const vc_vl_image_config *c, const vc_checkpoint *ck, const char *s, const char *name) {
    vc_vl_pixels px;
    const vc_st_tensor *p;
    const int64_t *ref = verl_pixels_ref(c, ck, s, name, "tiles", &px, &p); /* tiles, rows, columns, fetched h, w */
    int side = c->fixed_h / 14, rows = 0, cols = 0, rh, rw;
    int n = ref ? vc_vl_llama4_tiles(c, ref[3], ref[4], &rows, &cols, &rh, &rw) : 0;
    int same = p && ref && px.grid_t == ref[0] && px.grid_h == side && px.grid_w == side && p->shape[0] == px.rows &&
               p->shape[1] == px.cols && n == ref[0] && rows == ref[1] && cols == ref[2];
    CHECK_MSG(same, "%s: %lld x %lld values, %d tiles of %d x %d (%d x %d)", name, (long long)px.rows,
              (long long)px.cols, px.grid_t, px.grid_h, px.grid_w, rows, cols);
    return pixels_diff(&px, p, same);
}

static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(L4_VIS, &cfg));
    CHECK(cfg.llama4 && cfg.fixed_h == 56 && cfg.fixed_w == 56 && cfg.resample == 2 && cfg.max_tiles == 6 &&
          !cfg.to_max_canvas && cfg.temporal_patch_size == 1 && cfg.patch_size == 14 && cfg.merge_size == 2 &&
          cfg.image_mean[0] == 0.5 && cfg.image_std[2] == 0.5);
    vc_vl_image_config big = cfg;
    big.fixed_h = big.fixed_w = 42, big.resample = 3, big.max_tiles = 4, big.to_max_canvas = 1;
    const double mean[3] = { 0.48145466, 0.4578275, 0.40821073 }, std[3] = { 0.26862954, 0.26130258, 0.27577711 };
    memcpy(big.image_mean, mean, sizeof mean), memcpy(big.image_std, std, sizeof std);
    int n = 0;
    double worst = check_settings(L4_VIS, &cfg, &big, check_one, &n);
    printf("llama4 processor: %d images through fetch_image and Llama4ImageProcessor's tiles, max pixel difference %g\n",
           n, worst);
    CHECK_MSG(n == 10 && worst == 0, "Llama 4 pixel values differ from transformers by %g", worst);
}

/* get_best_fit and get_max_res_without_distortion as _preprocess calls them (float32 scales where torch's are) */
static void tilings(void) {
    cJSON *ref = NULL;
    CHECK_OK(vc_json_load_file(L4_VIS "/reference.json", &ref));
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(L4_VIS, &c));
    c.fixed_h = c.fixed_w = 336;
    int n = 0, bad = 0;
    for (const cJSON *t = ref ? cJSON_GetObjectItem(ref, "tilings")->child : NULL; t; t = t->next, n++) {
        int v[8];
        for (int k = 0; k < 8; k++) v[k] = cJSON_GetArrayItem(t, k)->valueint;
        c.max_tiles = v[2], c.to_max_canvas = v[3];
        int rows, cols, rh, rw, tiles = vc_vl_llama4_tiles(&c, v[0], v[1], &rows, &cols, &rh, &rw);
        int ok = rows == v[4] && cols == v[5] && rh == v[6] && rw == v[7] && tiles == rows * cols + (rows * cols > 1);
        if (!ok && bad++ < 5)
            fprintf(stderr, "%d x %d (max %d%s): %d x %d tiles, %d x %d; transformers %d x %d, %d x %d\n", v[0], v[1],
                    v[2], v[3] ? ", max canvas" : "", rows, cols, rh, rw, v[4], v[5], v[6], v[7]);
    }
    printf("llama4 tilings: %d sizes, %d differ from transformers'\n", n, bad);
    CHECK(n == 468 && bad == 0);
    cJSON_Delete(ref);
}

/* the data path's grid (tiles, each side x side) and tiling before the pixels, and Llama4Processor's markup: the
 * template's <|image|> becomes <|image_start|>, each tile's pads row by row between tile separators, <|image|>, the
 * whole image's pads, <|image_end|>; one tile alone has no separators and no second copy */
static void grids_markup(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(L4_VIS, &c));
    cJSON *imgs = cJSON_CreateArray();
    cJSON_AddItemToArray(imgs, cJSON_CreateString(img_path("rgb444_200x90.jpg")));
    cJSON_AddItemToArray(imgs, cJSON_CreateString(img_path("rgb_37x53.png")));
    vc_rl_image *im = NULL;
    CHECK_OK(vc_vl_parse_images(imgs, &c, 14, "test", "images", &im));
    /* (fetched 196 x 84: 2 x 3 tiles of 56 and the whole image; 28 x 56: 2 x 1 and it) */
    CHECK(im && im[0].grid[0] == 7 && im[0].grid[1] == 4 && im[0].grid[2] == 4 && im[0].tokens == 28 &&
          im[0].tiles_h == 2 && im[0].tiles_w == 3);
    CHECK(im && im[1].grid[0] == 3 && im[1].tiles_h == 2 && im[1].tiles_w == 1 && im[1].tokens == 12);
    vc_vl_pads p = { "<|patch|>", NULL, NULL, NULL, NULL, NULL, 0 };
    vc_vl_pads_apply(&p, 3, "<|image_start|>", "<|image_end|>");
    vc_rl_image two[2] = { { .tokens = 3, .grid = { 3, 2, 2 }, .tiles_h = 1, .tiles_w = 2 },
                           { .tokens = 1, .grid = { 1, 2, 2 }, .tiles_h = 1, .tiles_w = 1 } };
    char *out = NULL;
    CHECK_OK(vc_vl_expand_visuals("A <|image|> and <|image|>?", &p, two, 2, 1, "test", &out, NULL));
    CHECK_MSG(out && !strcmp(out, "A <|image_start|><|patch|><|tile_x_separator|><|patch|><|tile_y_separator|><|image|>"
                                  "<|patch|><|image_end|> and <|image_start|><|image|><|patch|><|image_end|>?"),
              "markup: %s", out);
    free(out);
    CHECK(vc_vl_expand_visuals("one <|image|> only", &p, two, 2, 1, "test", &out, NULL) &&
          strstr(vc_last_error(), "<|image|>"));
    free(im);
    cJSON_Delete(imgs);
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"resample\": 0", "resample" },
                                          { "\"size\": {\"height\": 56, \"width\": 70}", "size" },
                                          { "\"size\": {\"height\": 50, \"width\": 50}", "size" },
                                          { "\"max_patches\": 0", "max_patches" },
                                          { "\"max_patches\": 100000", "max_patches" },
                                          { "\"resize_to_max_canvas\": 3", "resize_to_max_canvas" },
                                          { "\"do_resize\": false", "do_resize" } };
    refused_configs("Llama4ImageProcessorFast", "\"size\": {\"height\": 56, \"width\": 56}", bad,
                    sizeof bad / sizeof bad[0]);
}

int main(void) {
    check_pixels();
    tilings();
    grids_markup();
    bad_configs();
    return vc_test_done();
}
