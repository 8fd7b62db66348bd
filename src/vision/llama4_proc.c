/* Llama 4's image processor (transformers' Llama4ImageProcessor, torchvision only), behind qwen_vl_utils' fetch_image
 * as verl runs every processor: the canvas of up to max_patches size x size tiles that best fits the image
 * (get_best_fit: the least upscale over 1, else the least downscale, ties to the smaller area; scales in float32 as
 * torch divides its int64 resolutions), the image resized to the largest size within it without distortion (no more
 * than a tile's side of upscaling unless resize_to_max_canvas) by torchvision's antialiased filter on the uint8 image,
 * padded with black at the right and bottom, rescaled and normalized in bfloat16 as Llama 4's override does (each
 * step rounded to bfloat16), cut into tiles row by row; past one tile the whole image resized to one tile follows;
 * each tile's patches row by row, each (channel, row, column), the tiles the frames of the grid. */
#include "verlc/dtype.h"
#include "verlc/image.h"
#include "vl_internal.h"
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status vc_vl_llama4_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t h = 336, w = 336, r = 2, hi = 16;
    vc_status st = vc_vl_get_hw(j, 1 << 14, &h, &w, file);
    if (!st) st = vc_json_get_int(j, "resample", 2, &r, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_patches", VL_LLAMA4_MAX_TILES, &hi, file);
    if (!st) st = vc_json_get_bool(j, "resize_to_max_canvas", 0, &c->to_max_canvas, file);
    if (st) return st;
    if (r != 2 && r != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (2, BILINEAR, and 3, BICUBIC, are built)", file,
                       (long long)r);
    if (h != w || h % c->patch_size)
        return vc_fail(VC_ERR_FORMAT, "%s: size %lldx%lld is not a square of whole %d-pixel patches (Llama 4's tiles)",
                       file, (long long)w, (long long)h, c->patch_size);
    for (int k = 0; k < 3; k++) c->image_mean[k] = c->image_std[k] = 0.5; /* (its class defaults) */
    c->llama4 = 1, c->fixed_h = (int)h, c->fixed_w = (int)w, c->resample = (int)r, c->max_tiles = (int)hi;
    c->temporal_patch_size = 1;
    return VC_OK;
}

/* find_supported_resolutions' canvases (in tiles: rows, columns) in its order: the tilings of counts max down to 1,
 * factor by factor, grouped by aspect ratio, the groups in order of their ratios' first appearance */
static int canvases(int max, int (*rc)[2]) {
    int all[VL_LLAMA4_CANVASES][2], n = 0, k = 0;
    for (int count = max; count >= 1; count--)
        for (int f = 1; f <= count; f++)
            if (count % f == 0) all[n][0] = f, all[n][1] = count / f, n++;
    for (int i = 0; i < n; i++) {
        double r = (double)all[i][0] / (double)all[i][1];
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = (double)all[j][0] / (double)all[j][1] == r;
        for (int j = i; j < n && !seen; j++)
            if ((double)all[j][0] / (double)all[j][1] == r) rc[k][0] = all[j][0], rc[k][1] = all[j][1], k++;
    }
    return k;
}

/* a side after get_max_res_without_distortion's scale, in float32 (a torch scalar's) or double */
static int64_t scaled_side(int64_t side, double scale, int f32) {
    return f32 ? (int64_t)floorf((float)side * (float)scale) : (int64_t)floor((double)side * scale);
}

int vc_vl_llama4_tiles(const vc_vl_image_config *c, int64_t height, int64_t width, int *rows, int *cols, int *rh,
                       int *rw) {
    int rc[VL_LLAMA4_CANVASES][2], n = canvases(c->max_tiles, rc), T = c->fixed_h, best = -1, any_up = 0, any_down = 0;
    float up = 0.0f, down = 0.0f, sc[VL_LLAMA4_CANVASES];
    for (int i = 0; i < n; i++) { /* get_best_fit: each canvas's limiting scale, in float32 */
        float sw = (float)(rc[i][1] * T) / (float)width, sh = (float)(rc[i][0] * T) / (float)height;
        sc[i] = sh > sw ? sw : sh;
        if (sc[i] >= 1.0f && (!any_up || (c->to_max_canvas ? sc[i] > up : sc[i] < up))) up = sc[i], any_up = 1;
        if (sc[i] < 1.0f && (!any_down || sc[i] > down)) down = sc[i], any_down = 1;
    }
    float sel = any_up ? up : down;
    for (int i = 0; i < n; i++) /* of the canvases at that scale, the first of least area */
        if (sc[i] == sel && (best < 0 || rc[i][0] * rc[i][1] < rc[best][0] * rc[best][1])) best = i;
    int64_t th = (int64_t)rc[best][0] * T, tw = (int64_t)rc[best][1] * T;
    /* min(max(side, tile), target): the target itself (a torch scalar) where it is the smaller, else a Python int */
    int64_t nh = th, nw = tw;
    int fh = 1, fw = 1;
    if (!c->to_max_canvas) {
        int64_t mh = height > T ? height : T, mw = width > T ? width : T;
        if (th >= mh) nh = mh, fh = 0;
        if (tw >= mw) nw = mw, fw = 0;
    }
    /* get_max_res_without_distortion: a torch scalar's scale is float32, compared in float32 with a Python one */
    double scw = fw ? (double)((float)nw / (float)width) : (double)nw / (double)width;
    double sch = fh ? (double)((float)nh / (float)height) : (double)nh / (double)height;
    int less = fw || fh ? (float)scw < (float)sch : scw < sch;
    int64_t oh, ow;
    if (less) ow = nw, oh = scaled_side(height, scw, fw), oh = oh < nh ? oh : nh;
    else oh = nh, ow = scaled_side(width, sch, fh), ow = ow < nw ? ow : nw;
    *rows = rc[best][0], *cols = rc[best][1], *rh = oh < 1 ? 1 : (int)oh, *rw = ow < 1 ? 1 : (int)ow;
    return *rows * *cols + (*rows * *cols > 1);
}

/* Llama 4's rescale_and_normalize: the level times rescale_factor, then (x - mean) / std, each rounded to bfloat16 */
void vc_vl_llama4_levels(const vc_vl_image_config *c, float table[3][256]) {
    for (int ch = 0; ch < 3; ch++) {
        float m = vc_bf16_to_f32(vc_f32_to_bf16((float)c->image_mean[ch]));
        float s = vc_bf16_to_f32(vc_f32_to_bf16((float)c->image_std[ch]));
        for (int v = 0; v < 256; v++) {
            float x = c->do_rescale ? vc_bf16_to_f32(vc_f32_to_bf16((float)v * (float)c->rescale_factor)) : (float)v;
            if (c->do_normalize) x = vc_bf16_to_f32(vc_f32_to_bf16(vc_bf16_to_f32(vc_f32_to_bf16(x - m)) / s));
            table[ch][v] = x;
        }
    }
}

/* tile (x0, y0) of src, T x T pixels (black past its edges), as a frame */
static void put_tile(const vc_image *src, int x0, int y0, int T, const float table[3][256], float *frame) {
    for (int y = 0; y < T; y++)
        for (int x = 0; x < T * 3; x++) {
            int sx = x0 + x / 3, sy = y0 + y, in = sx < src->width && sy < src->height;
            frame[(size_t)y * (size_t)T * 3 + (size_t)x] =
                table[x % 3][in ? src->rgb[((size_t)sy * (size_t)src->width + (size_t)sx) * 3 + x % 3] : 0];
        }
}

vc_status vc_vl_llama4_process(const vc_vl_image_config *c, const vc_image *img, const char *what, vc_vl_pixels *out) {
    const int T = c->fixed_h;
    int rows, cols, rh, rw, n = vc_vl_llama4_tiles(c, img->height, img->width, &rows, &cols, &rh, &rw);
    float table[3][256];
    vc_vl_llama4_levels(c, table);
    size_t fp = (size_t)T * (size_t)T * 3;
    float *plane = malloc(sizeof(float) * fp * (size_t)n);
    if (!plane) return vc_fail(VC_ERR_NOMEM, "%s: %d tiles of %dx%d pixel values", what, n, T, T);
    vc_image fit = { 0 }, whole = { 0 };
    vc_status st = vc_image_resize_tv(img, rw, rh, c->resample, &fit);
    for (int i = 0; !st && i < rows * cols; i++) put_tile(&fit, i % cols * T, i / cols * T, T, table, plane + fp * i);
    if (!st && n > rows * cols && !(st = vc_image_resize_tv(img, T, T, c->resample, &whole)))
        put_tile(&whole, 0, 0, T, table, plane + fp * (size_t)(n - 1));
    if (!st) st = vc_vl_patchify(plane, n, T, T, c->patch_size, 1, 1, what, out); /* (each tile a frame) */
    else st = vc_fail_ctx(st, "%s", what);
    free(plane);
    vc_image_free(&fit), vc_image_free(&whole);
    return st;
}
