/* Gemma 4's image processor (transformers' Gemma4ImageProcessorPil), behind qwen_vl_utils' fetch_image as verl runs
 * every processor: an image is resized with Pillow's filter (only if its size changes) to the largest size of whole
 * k x k blocks of P-pixel patches within max_soft_tokens k^2 patches, its aspect ratio kept
 * (get_aspect_ratio_preserving_size), rescaled to [0, 1] (the model takes 2 (x - 0.5) itself; normalize is off by
 * default), and cut into patches row by row, each patch's values (row, column, channel). */
#include "verlc/image.h"
#include "vl_internal.h"
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status vc_vl_gemma4_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t p = 16, soft = 280, k = 3, r = 3;
    vc_status st = vc_vl_get_pos_int(j, "patch_size", 1024, &p, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_soft_tokens", 1 << 20, &soft, file);
    if (!st) st = vc_vl_get_pos_int(j, "pooling_kernel_size", 64, &k, file);
    if (!st) st = vc_json_get_int(j, "resample", 3, &r, file);
    if (st) return st;
    if (soft != 70 && soft != 140 && soft != 280 && soft != 560 && soft != 1120)
        return vc_fail(VC_ERR_FORMAT, "%s: max_soft_tokens = %lld (Gemma 4's processor takes 70, 140, 280, 560 or 1120)",
                       file, (long long)soft);
    if (r != 2 && r != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (2, BILINEAR, and 3, BICUBIC, are built)", file,
                       (long long)r);
    c->gemma4 = 1, c->patch_size = (int)p, c->merge_size = (int)k, c->temporal_patch_size = 1, c->max_soft = (int)soft;
    c->resample = (int)r, c->do_normalize = 0; /* (its class defaults: no normalize, mean 0, std 1) */
    for (int i = 0; i < 3; i++) c->image_mean[i] = 0.0, c->image_std[i] = 1.0;
    return VC_OK;
}

vc_status vc_vl_gemma4_size(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w) {
    int64_t P = c->patch_size, k = c->merge_size, max_patches = (int64_t)c->max_soft * k * k, side = k * P;
    int64_t target = max_patches * P * P;
    if (height < 1 || width < 1) return vc_fail(VC_ERR_ARG, "image of %lldx%lld", (long long)width, (long long)height);
    double factor = sqrt((double)target / (double)(height * width));
    int64_t th = (int64_t)floor(factor * (double)height / (double)side) * side;
    int64_t tw = (int64_t)floor(factor * (double)width / (double)side) * side;
    if (!th && !tw)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: Gemma 4's processor resizes it to 0x0", (long long)width,
                       (long long)height);
    int64_t longest = max_patches / (k * k) * side;
    if (!th) th = side, tw = (int64_t)floor((double)width / (double)height) * side, tw = tw < longest ? tw : longest;
    else if (!tw) tw = side, th = (int64_t)floor((double)height / (double)width) * side, th = th < longest ? th : longest;
    if (th * tw > target || th > 1 << 15 || tw > 1 << 15)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: resized to %lldx%lld it exceeds %lld patches of %lld pixels",
                       (long long)width, (long long)height, (long long)tw, (long long)th, (long long)max_patches,
                       (long long)P);
    *out_h = (int)th, *out_w = (int)tw;
    return VC_OK;
}

vc_status vc_vl_gemma4_process(const vc_vl_image_config *c, const vc_image *img, const float table[3][256],
                               const char *what, vc_vl_pixels *out) {
    int H = img->height, W = img->width, P = c->patch_size, M = c->merge_size;
    vc_status st = c->do_resize ? vc_vl_gemma4_size(c, img->height, img->width, &H, &W) : VC_OK;
    if (st) return vc_fail_ctx(st, "%s", what);
    if (!c->do_resize && (H % (P * M) || W % (P * M)))
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d is not a multiple of patch_size * pooling_kernel_size = %d and do_resize "
                       "is false", what, W, H, P * M);
    vc_image resized = { 0 };
    const vc_image *src = img;
    if ((H != img->height || W != img->width) && (st = vc_vl_resize(c, img, W, H, c->resample, &resized)))
        return vc_fail_ctx(st, "%s", what);
    if (resized.rgb) src = &resized;
    int gh = H / P, gw = W / P;
    out->grid_t = 1, out->grid_h = gh, out->grid_w = gw, out->rows = (int64_t)gh * gw, out->cols = (int64_t)3 * P * P;
    out->data = malloc(sizeof(float) * (size_t)(out->rows * out->cols));
    if (!out->data) {
        vc_image_free(&resized);
        return vc_fail(VC_ERR_NOMEM, "%s: %lld x %lld pixel values", what, (long long)out->rows, (long long)out->cols);
    }
    float *o = out->data;
    for (int py = 0; py < gh; py++) /* patches row by row; in each, rows of pixels, each pixel's channels */
        for (int px = 0; px < gw; px++)
            for (int y = 0; y < P; y++) {
                const uint8_t *s = src->rgb + ((size_t)(py * P + y) * (size_t)src->width + (size_t)px * P) * 3;
                for (int k = 0; k < 3 * P; k++) *o++ = table[k % 3][s[k]];
            }
    vc_image_free(&resized);
    return VC_OK;
}
