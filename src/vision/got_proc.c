/* GOT-OCR2's image processor as InternVL's processor runs it (transformers' GotOcr2ImageProcessorPil under
 * InternVLProcessor, whose images_kwargs set crop_to_patches): behind qwen_vl_utils' fetch_image as verl runs every
 * processor, an image is resized (Pillow's filter) to the tiling of size x size tiles, from min_patches to max_patches
 * of them, whose aspect ratio is nearest its own (get_optimal_tiled_canvas: on a tie the larger tiling while the image
 * covers more than half of it), cut into those tiles row by row, and followed by the whole image resized to one tile
 * where there are several; each tile rescaled and normalized in float32; its patches row by row, each (channel, row,
 * column), the tiles the frames of the grid. */
#include "verlc/image.h"
#include "vl_internal.h"
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* transformers' OPENAI_CLIP mean and std are the class defaults; InternVL's checkpoints give ImageNet's */
vc_status vc_vl_got_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t h = 384, w = 384, r = 3, lo = 1, hi = 12;
    vc_status st = vc_vl_get_hw(j, 1 << 14, &h, &w, file);
    if (!st) st = vc_json_get_int(j, "resample", 3, &r, file);
    if (!st) st = vc_vl_get_pos_int(j, "min_patches", 1 << 10, &lo, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_patches", 1 << 10, &hi, file);
    if (st) return st;
    if (r != 2 && r != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (2, BILINEAR, and 3, BICUBIC, are built)", file,
                       (long long)r);
    if (h != w || h % c->patch_size)
        return vc_fail(VC_ERR_FORMAT, "%s: size %lldx%lld is not a square of whole %d-pixel patches (InternVL's tiles)",
                       file, (long long)w, (long long)h, c->patch_size);
    c->got = 1, c->fixed_h = (int)h, c->fixed_w = (int)w, c->resample = (int)r, c->min_tiles = (int)lo;
    c->max_tiles = (int)hi, c->temporal_patch_size = 1;
    return VC_OK;
}

int vc_vl_got_tiles(const vc_vl_image_config *c, int64_t height, int64_t width, int *cols, int *rows) {
    double aspect = (double)width / (double)height, area = (double)width * (double)height, best = INFINITY;
    *cols = *rows = 1;
    if (c->max_tiles <= 1) return 1; /* (no cropping: the image resized to one tile) */
    /* the tilings of min to max tiles by their count, each count's by width (Python's stable sort of the list built
     * width by width) */
    for (int n = 1; n <= c->max_tiles; n++)
        for (int gw = 1; gw <= n && n >= c->min_tiles; gw++) {
            if (n % gw) continue;
            int gh = n / gw;
            double diff = fabs(aspect - (double)gw / (double)gh);
            if (diff < best) best = diff, *cols = gw, *rows = gh;
            else if (diff == best && area > 0.5 * c->fixed_h * c->fixed_w * gw * gh) *cols = gw, *rows = gh;
        }
    return *cols * *rows + (*cols * *rows != 1);
}

/* tile (x0, y0) of src, fw x fh pixels, as frame f of plane: each level's value */
static void put_tile(const vc_image *src, int x0, int y0, int fw, int fh, const float table[3][256], float *frame) {
    for (int y = 0; y < fh; y++) {
        const uint8_t *s = src->rgb + ((size_t)(y0 + y) * (size_t)src->width + (size_t)x0) * 3;
        float *o = frame + (size_t)y * (size_t)fw * 3;
        for (int k = 0; k < fw * 3; k++) o[k] = table[k % 3][s[k]];
    }
}

vc_status vc_vl_got_process(const vc_vl_image_config *c, const vc_image *img, const float table[3][256],
                            const char *what, vc_vl_pixels *out) {
    const int TW = c->fixed_w, TH = c->fixed_h;
    int cols, rows, n = vc_vl_got_tiles(c, img->height, img->width, &cols, &rows);
    if (c->max_tiles <= 1 && !c->do_resize && (img->width != TW || img->height != TH))
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d with do_resize false and max_patches 1: InternVL's tower takes tiles of "
                       "%dx%d only", what, img->width, img->height, TW, TH);
    size_t fp = (size_t)TW * (size_t)TH * 3;
    float *plane = malloc(sizeof(float) * fp * (size_t)n);
    if (!plane) return vc_fail(VC_ERR_NOMEM, "%s: %d tiles of %dx%d pixel values", what, n, TW, TH);
    vc_image big = { 0 }, thumb = { 0 };
    /* (cropping resizes whatever do_resize says, as the processor's crop_image_to_patches does) */
    vc_status st = c->max_tiles > 1 || c->do_resize ? vc_vl_resize(c, img, TW * cols, TH * rows, c->resample, &big) : VC_OK;
    const vc_image *src = big.rgb ? &big : img;
    for (int i = 0; !st && i < cols * rows; i++) put_tile(src, i % cols * TW, i / cols * TH, TW, TH, table, plane + fp * i);
    if (!st && n > cols * rows && !(st = vc_vl_resize(c, img, TW, TH, c->resample, &thumb)))
        put_tile(&thumb, 0, 0, TW, TH, table, plane + fp * (size_t)(n - 1));
    if (!st) st = vc_vl_patchify(plane, n, TH, TW, c->patch_size, 1, 1, what, out); /* (each tile a frame) */
    else st = vc_fail_ctx(st, "%s", what);
    free(plane);
    vc_image_free(&big), vc_image_free(&thumb);
    return st;
}
