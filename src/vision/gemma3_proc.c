/* Gemma 3's pan and scan (Gemma3ImageProcessor with do_pan_and_scan, as Gemma3Processor runs it): an image whose
 * aspect ratio reaches pan_and_scan_min_ratio_to_activate is cut along its long side into about that ratio of crops
 * (2 to pan_and_scan_max_num_crops, each at least pan_and_scan_min_crop_size pixels), and the whole image and each
 * crop are resized to the processor's size: each one a frame of the image's grid, its own 256 (image_seq_length)
 * tokens in the prompt ("Here is the original image ... and here are some crops to help you see better ..."). */
#include "verlc/image.h"
#include "vl_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int vc_vl_gemma3_crops(const vc_vl_image_config *c, int64_t height, int64_t width, int *ncw, int *nch, int *cw,
                       int *chh) {
    *ncw = *nch = 1, *cw = (int)width, *chh = (int)height;
    if (!c->gemma3 || !c->pas || height < 1 || width < 1) return 0;
    double w = (double)width, h = (double)height;
    int n;
    if (width >= height) { /* square or landscape */
        if (w / h < c->pas_min_ratio) return 0;
        n = (int)floor(w / h + 0.5); /* (half rounded up) */
        n = (int)fmin(floor(w / c->pas_min_crop), n);
    } else {
        if (h / w < c->pas_min_ratio) return 0;
        n = (int)floor(h / w + 0.5);
        n = (int)fmin(floor(h / c->pas_min_crop), n);
    }
    n = n < 2 ? 2 : n;
    n = n > c->pas_max_crops ? c->pas_max_crops : n;
    int along_w = width >= height, nw = along_w ? n : 1, nh = along_w ? 1 : n;
    int sw = (int)ceil(w / nw), sh = (int)ceil(h / nh);
    if (n < 1 || (sw < sh ? sw : sh) < c->pas_min_crop) return 0; /* crops too small */
    *ncw = nw, *nch = nh, *cw = sw, *chh = sh;
    return nw * nh;
}

/* the rows y0.. and columns x0.. of img (clipped to it, as a slice of the array is) as an image of their own */
static vc_status crop(const vc_image *img, int x0, int y0, int w, int h, vc_image *out) {
    w = x0 + w > img->width ? img->width - x0 : w;
    h = y0 + h > img->height ? img->height - y0 : h;
    *out = *img;
    out->width = w, out->height = h, out->rgb = NULL;
    if (w < 1 || h < 1) /* (the last of n crops of ceil(side / n) can start past a small image's edge) */
        return vc_fail(VC_ERR_SHAPE, "pan and scan: the crop at (%d, %d) of a %dx%d image is empty (transformers' "
                       "processor fails there too; raise pan_and_scan_min_crop_size)", x0, y0, img->width, img->height);
    out->rgb = malloc((size_t)w * (size_t)h * 3);
    if (!out->rgb) return vc_fail(VC_ERR_NOMEM, "a %dx%d crop", w, h);
    for (int y = 0; y < h; y++)
        memcpy(out->rgb + (size_t)y * (size_t)w * 3, img->rgb + ((size_t)(y0 + y) * (size_t)img->width + x0) * 3,
               (size_t)w * 3);
    return VC_OK;
}

/* one resized frame's levels through table into frame (fixed_h x fixed_w x 3) */
static vc_status frame_of(const vc_vl_image_config *c, const vc_image *img, const float table[3][256], float *frame) {
    vc_image r = { 0 };
    vc_status st = vc_vl_resize(c, img, c->fixed_w, c->fixed_h, c->resample, &r);
    for (size_t i = 0; !st && i < (size_t)c->fixed_w * (size_t)c->fixed_h * 3; i++) frame[i] = table[i % 3][r.rgb[i]];
    vc_image_free(&r);
    return st;
}

vc_status vc_vl_gemma3_process(const vc_vl_image_config *c, const vc_image *img, const float table[3][256],
                               const char *what, vc_vl_pixels *out) {
    int ncw, nch, cw, chh, n = vc_vl_gemma3_crops(c, img->height, img->width, &ncw, &nch, &cw, &chh);
    if (n && !c->do_resize)
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d with do_pan_and_scan true and do_resize false: Gemma 3's tower takes "
                       "images of its size %dx%d only, not its %dx%d crops", what, img->width, img->height, c->fixed_w,
                       c->fixed_h, cw, chh);
    size_t fp = (size_t)c->fixed_w * (size_t)c->fixed_h * 3;
    float *frames = malloc(sizeof(float) * fp * (size_t)(n + 1));
    if (!frames) return vc_fail(VC_ERR_NOMEM, "%s: %d frames of %dx%d pixel values", what, n + 1, c->fixed_w, c->fixed_h);
    vc_status st = frame_of(c, img, table, frames); /* the whole image first, then the crops row by row */
    for (int i = 0; !st && i < n; i++) {
        vc_image part = { 0 };
        st = crop(img, i % ncw * cw, i / ncw * chh, cw, chh, &part);
        if (!st) st = frame_of(c, &part, table, frames + fp * (i + 1));
        vc_image_free(&part);
    }
    if (!st) st = vc_vl_patchify(frames, n + 1, c->fixed_h, c->fixed_w, c->patch_size, 1, 1, what, out);
    else st = vc_fail_ctx(st, "%s", what);
    free(frames);
    return st;
}
