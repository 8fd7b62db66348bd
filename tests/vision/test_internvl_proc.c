/* InternVL's image processor (GotOcr2ImageProcessor with crop_to_patches, as InternVLProcessor runs it: the tiling
 * nearest the image's aspect ratio, its tiles and a thumbnail, each normalized, patches row by row) behind qwen_vl_utils'
 * fetch_image, as verl's image path runs it, against transformers 5.25's GotOcr2ImageProcessorPil
 * (tools/fixtures/make_internvl_image_fixture.py): the pixel values and tile counts of five images at two settings, the
 * grid the data path gives each image before decoding its pixels, the prompt markup (InternVLProcessor's
 * <img> ... </img>), bad configs. */
#include "vc_test.h"
#include "vision_helpers.h"
#include "data/vl_rows.h"
#include <math.h>
#include <unistd.h>

#define INTERN_VIS VISION_DIR "/internvl"

/* image s at setting c: its pixels against the reference's NAME.pixels and NAME.tiles; the worst difference */
static double check_one(const vc_vl_image_config *c, const vc_checkpoint *ck, const char *s, const char *name) {
    vc_vl_pixels px;
    const vc_st_tensor *p;
    const int64_t *ref = verl_pixels_ref(c, ck, s, name, "tiles", &px, &p); /* tiles, fetched height and width */
    int side = c->fixed_h / 14, cols, rows;
    int same = p && ref && px.grid_t == ref[0] && px.grid_h == side && px.grid_w == side && p->shape[0] == px.rows &&
               p->shape[1] == px.cols && vc_vl_got_tiles(c, ref[1], ref[2], &cols, &rows) == ref[0];
    CHECK_MSG(same, "%s: %lld x %lld values, %d tiles of %d x %d", name, (long long)px.rows, (long long)px.cols,
              px.grid_t, px.grid_h, px.grid_w);
    return pixels_diff(&px, p, same);
}

static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(INTERN_VIS, &cfg));
    CHECK(cfg.tv); /* (its Fast class name picks torchvision's backend; these references are the PIL backend's,
                      * tests/vision/test_tv_proc.c checks the other) */
    cfg.tv = 0;
    CHECK(cfg.got && cfg.fixed_h == 56 && cfg.fixed_w == 56 && cfg.resample == 3 && cfg.min_tiles == 1 &&
          cfg.max_tiles == 6 && cfg.temporal_patch_size == 1 && cfg.patch_size == 14 && cfg.merge_size == 2 &&
          cfg.image_mean[0] == 0.485 && cfg.image_std[2] == 0.225);
    vc_vl_image_config big = cfg;
    big.fixed_h = big.fixed_w = 42, big.resample = 2, big.min_tiles = 2, big.max_tiles = 4;
    int n = 0;
    double worst = check_settings(INTERN_VIS, &cfg, &big, check_one, &n);
    printf("internvl processor: %d images through fetch_image and GotOcr2ImageProcessor's tiles, max pixel difference "
           "%g\n", n, worst);
    CHECK_MSG(n == 10 && worst == 0, "InternVL pixel values differ from transformers by %g", worst);
}

/* get_optimal_tiled_canvas: the nearest aspect ratio; on a tie the later (larger) tiling while the image covers more
 * than half of it; min_patches bounds the count from below; a single tile has no thumbnail */
static void tilings(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(INTERN_VIS, &c));
    c.fixed_h = c.fixed_w = 448, c.min_tiles = 1, c.max_tiles = 12;
    int cols, rows;
    CHECK(vc_vl_got_tiles(&c, 448, 448, &cols, &rows) == 1 && cols == 1 && rows == 1);
    /* 1:1 ties 1x1, 2x2 and 3x3 (transformers' answers): 1000 x 1000 covers more than half of 3x3's area (9 x 448^2 /
     * 2), so 3x3 and the thumbnail; 700 x 700 half of 2x2's but not of 3x3's; 500 x 500 neither */
    CHECK(vc_vl_got_tiles(&c, 1000, 1000, &cols, &rows) == 10 && cols == 3 && rows == 3);
    CHECK(vc_vl_got_tiles(&c, 700, 700, &cols, &rows) == 5 && cols == 2 && rows == 2);
    CHECK(vc_vl_got_tiles(&c, 500, 500, &cols, &rows) == 1 && cols == 1 && rows == 1);
    CHECK(vc_vl_got_tiles(&c, 448, 1344, &cols, &rows) == 4 && cols == 3 && rows == 1); /* 3:1 */
    CHECK(vc_vl_got_tiles(&c, 10, 3000, &cols, &rows) == 13 && cols == 12 && rows == 1); /* beyond 12:1 */
    c.min_tiles = 2;
    CHECK(vc_vl_got_tiles(&c, 448, 448, &cols, &rows) == 5 && cols == 2 && rows == 2);
    c.max_tiles = 1; /* no cropping: one tile */
    CHECK(vc_vl_got_tiles(&c, 448, 1344, &cols, &rows) == 1);
}

/* with max_patches 1 and do_resize false an image must be one tile: refused by name otherwise */
static void unresized(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(INTERN_VIS, &c));
    c.do_resize = 0, c.max_tiles = 1;
    vc_image img;
    vc_vl_pixels px;
    CHECK_OK(vc_image_load(img_path("rgb_37x53.png"), VC_ALPHA_QWEN_VL_UTILS, &img));
    CHECK(vc_vl_image_process(&c, &img, "rgb_37x53.png", &px) && strstr(vc_last_error(), "rgb_37x53.png: 37x53") &&
          strstr(vc_last_error(), "56x56"));
    vc_image sized;
    CHECK_OK(vc_image_resize(&img, 56, 56, 3, &sized));
    CHECK_OK(vc_vl_image_process(&c, &sized, "sized", &px));
    CHECK(px.grid_t == 1 && px.grid_h == 4 && px.grid_w == 4 && px.rows == 16);
    vc_vl_pixels_free(&px);
    vc_image_free(&sized);
    vc_image_free(&img);
}

/* the data path's grid before the pixels: tiles x side x side, the tokens the pads are repeated for */
static void grids(void) {
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(INTERN_VIS, &c));
    cJSON *imgs = cJSON_CreateArray();
    cJSON_AddItemToArray(imgs, cJSON_CreateString(img_path("rgb444_200x90.jpg")));
    cJSON_AddItemToArray(imgs, cJSON_CreateString(img_path("gray_5x300.png")));
    vc_rl_image *im = NULL;
    CHECK_OK(vc_vl_parse_images(imgs, &c, 14, "test", "images", &im));
    /* (fetched 196 x 84 and 28 x 308: 3 tiles of 2 x 1 plus the thumbnail, 6 x 1 plus it; see the reference) */
    CHECK(im && im[0].grid[0] == 3 && im[0].grid[1] == 4 && im[0].grid[2] == 4 && im[0].tokens == 12);
    CHECK(im && im[1].grid[0] == 7 && im[1].tokens == 28);
    float *pix = NULL;
    int32_t *grid = NULL;
    int64_t row = 0;
    CHECK_OK(vc_vl_images_pixels(&c, 14, im, 2, "test", &pix, &grid, &row));
    CHECK(grid && grid[0] == 3 && grid[3] == 7 && row == 3 * 14 * 14);
    free(pix), free(grid);
    free(im);
    cJSON_Delete(imgs);
}

/* the template's image token becomes InternVLProcessor's <img>, the token once per feature, </img> */
static void markup(void) {
    vc_vl_pads p = { "<IMG_CONTEXT>", NULL, NULL, NULL, NULL };
    vc_vl_pads_wrap(&p, "<img>", "</img>");
    vc_rl_image im[2] = { { .tokens = 2 }, { .tokens = 1 } };
    char *out = NULL;
    CHECK_OK(vc_vl_expand_visuals("A <IMG_CONTEXT>\nand <IMG_CONTEXT>\n?", &p, im, 2, 1, "test", &out, NULL));
    CHECK_MSG(out && !strcmp(out, "A <img><IMG_CONTEXT><IMG_CONTEXT></img>\nand <img><IMG_CONTEXT></img>\n?"),
              "markup: %s", out);
    free(out);
    CHECK(vc_vl_expand_visuals("one <IMG_CONTEXT> only", &p, im, 2, 1, "test", &out, NULL) &&
          strstr(vc_last_error(), "<IMG_CONTEXT>"));
    vc_vl_pads q = { "<|image_pad|>", NULL, NULL, NULL, NULL }; /* no texts: unchanged */
    vc_vl_pads_wrap(&q, NULL, "</img>");
    CHECK(!q.close && !q.open && !strcmp(q.image, "<|image_pad|>"));
}

static void bad_configs(void) {
    static const char *const bad[][2] = { { "\"resample\": 0", "resample" },
                                          { "\"size\": {\"height\": 56, \"width\": 70}", "size" },
                                          { "\"size\": {\"height\": 50, \"width\": 50}", "size" },
                                          { "\"min_patches\": 0", "min_patches" },
                                          { "\"max_patches\": -2", "max_patches" },
                                          { "\"size\": {\"height\": 0, \"width\": 56}", "height" } };
    refused_configs("GotOcr2ImageProcessorFast", "\"size\": {\"height\": 56, \"width\": 56}", bad,
                    sizeof bad / sizeof bad[0]);
}

int main(void) {
    check_pixels();
    tilings();
    unresized();
    grids();
    markup();
    bad_configs();
    return vc_test_done();
}
