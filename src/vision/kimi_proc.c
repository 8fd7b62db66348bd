/* Kimi-VL's image processor (KimiVLImageProcessor in the checkpoints' image_processing_kimi_vl.py) and Kimi K2.5 /
 * K2.6's (the media_proc_cfg of their preprocessor_config.json, read by the checkpoints' remote processor and by vLLM's
 * port of it), behind qwen_vl_utils' fetch_image as verl runs every processor. Kimi-VL: an image of more than
 * in_token_limit patches is scaled by sqrt(limit / patches) (sides truncated, Pillow's bicubic filter), then padded
 * with black at the right and bottom to whole merge blocks (pad_input) or centre-cropped to whole patches; to_tensor's
 * x / 255 and normalize's (x - mean) / std in float32. Kimi K2.5 (navit_resize_image): scaled by the least of 1,
 * sqrt(in_patch_limit / patches) and patch_limit_on_one_side patches over each side (sides truncated, at most that
 * limit), padded with black to whole merge blocks; x / 255 in double rounded to float32, then (x - mean) * (1 / std)
 * in float32. Both: the patches row by row, each (channel, row, column). */
#include "verlc/image.h"
#include "vl_internal.h"
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* merge_kernel_size of o: two equal integers in [1, 64] (a square merge; with one_ok a single integer too, as vLLM's
 * port of Kimi K2.5's processor reads it); unchanged when absent */
static vc_status merge_key(const cJSON *o, int one_ok, const char *file, int64_t *out) {
    const cJSON *mk = vc_json_member(o, "merge_kernel_size");
    if (!mk) return VC_OK;
    int pair = cJSON_IsArray(mk) && cJSON_GetArraySize(mk) == 2;
    const cJSON *a = pair ? cJSON_GetArrayItem(mk, 0) : mk, *b = pair ? cJSON_GetArrayItem(mk, 1) : mk;
    if ((!pair && !one_ok) || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble != b->valuedouble ||
        !(a->valuedouble >= 1 && a->valuedouble <= 64) || a->valuedouble != floor(a->valuedouble))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: merge_kernel_size must be %stwo equal integers in [1, 64] (a square merge)",
                       file, one_ok ? "an integer or " : "");
    *out = (int64_t)a->valuedouble;
    return VC_OK;
}

vc_status vc_vl_kimi_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t p = 14, lim = 4096, mk = 2;
    vc_status st = vc_vl_get_pos_int(j, "patch_size", 1024, &p, file);
    if (!st) st = vc_vl_get_pos_int(j, "in_token_limit", INT64_C(1) << 30, &lim, file);
    if (!st) st = vc_json_get_bool(j, "pad_input", 0, &c->pad_input, file);
    if (!st) st = merge_key(j, 0, file, &mk);
    if (!st) st = vc_vl_get_triple(j, "image_mean", c->image_mean, 0, file);
    if (!st) st = vc_vl_get_triple(j, "image_std", c->image_std, 1, file);
    c->kimi = 1, c->patch_size = (int)p, c->in_token_limit = lim, c->merge_size = (int)mk, c->temporal_patch_size = 1;
    c->do_resize = c->do_rescale = c->do_normalize = c->do_convert_rgb = 1, c->rescale_factor = 1.0 / 255;
    return st;
}

/* Kimi K2.5's keys: media_proc_cfg's (fixed_output_tokens null; its video keys are not read) */
vc_status vc_vl_kimi25_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    const cJSON *m = vc_json_member(j, "media_proc_cfg");
    const cJSON *fixed = vc_json_member(m, "fixed_output_tokens");
    int64_t p = 14, lim = 16384, side = 512, merge = 2;
    if (!cJSON_IsObject(m)) return vc_fail(VC_ERR_FORMAT, "%s: media_proc_cfg is not an object", file);
    if (fixed && !cJSON_IsNull(fixed))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: media_proc_cfg.fixed_output_tokens is set (only null, each image's own "
                       "token count, is built)", file);
    vc_status st = merge_key(m, 1, file, &merge);
    if (!st) st = vc_vl_get_pos_int(m, "patch_size", 1024, &p, file);
    if (!st) st = vc_vl_get_pos_int(m, "in_patch_limit", INT64_C(1) << 30, &lim, file);
    if (!st) st = vc_vl_get_pos_int(m, "patch_limit_on_one_side", 1 << 16, &side, file);
    c->image_mean[0] = c->image_mean[1] = c->image_mean[2] = 0.5;
    c->image_std[0] = c->image_std[1] = c->image_std[2] = 0.5;
    if (!st) st = vc_vl_get_triple(m, "image_mean", c->image_mean, 0, file);
    if (!st) st = vc_vl_get_triple(m, "image_std", c->image_std, 1, file);
    c->kimi = 2, c->pad_input = 1, c->patch_size = (int)p, c->in_token_limit = lim, c->side_limit = side;
    c->merge_size = (int)merge, c->temporal_patch_size = 1;
    c->do_resize = c->do_rescale = c->do_normalize = c->do_convert_rgb = 1, c->rescale_factor = 1.0 / 255;
    return st;
}

/* transformers 5's Kimi_K25ImageProcessor: max_patches, size's max_height (= max_width), patch_size, merge_size,
 * IMAGENET_STANDARD's mean and std, BICUBIC; torchvision's resize and fused rescale and normalize */
vc_status vc_vl_kimi25_native_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t p = 14, lim = 16384, merge = 2, side = 512, sw = 512, r = 3;
    const cJSON *size = vc_json_member(j, "size");
    char ctx[1100];
    snprintf(ctx, sizeof ctx, "%s: size", file);
    vc_status st = size && !cJSON_IsObject(size) ? vc_fail(VC_ERR_FORMAT, "%s is not an object", ctx) : VC_OK;
    if (!st && size) st = vc_vl_get_pos_int(size, "max_height", 1 << 16, &side, ctx);
    if (!st && size) st = vc_vl_get_pos_int(size, "max_width", 1 << 16, &sw, ctx);
    if (!st && sw != side) st = vc_fail(VC_ERR_FORMAT, "%s: max_height %lld and max_width %lld differ (the processor "
                                        "takes them equal)", ctx, (long long)side, (long long)sw);
    if (!st) st = vc_vl_get_pos_int(j, "patch_size", 1024, &p, file);
    if (!st) st = vc_vl_get_pos_int(j, "merge_size", 64, &merge, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_patches", INT64_C(1) << 30, &lim, file);
    if (!st) st = vc_json_get_int(j, "resample", 3, &r, file);
    if (!st && r != 3 && r != 2)
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (2, BILINEAR, and 3, BICUBIC, are built)", file, (long long)r);
    for (int k = 0; k < 3; k++) c->image_mean[k] = c->image_std[k] = 0.5;
    if (!st) st = vc_vl_get_triple(j, "image_mean", c->image_mean, 0, file);
    if (!st) st = vc_vl_get_triple(j, "image_std", c->image_std, 1, file);
    c->kimi = 2, c->pad_input = 1, c->patch_size = (int)p, c->in_token_limit = lim, c->side_limit = side, c->tv = 1;
    c->merge_size = (int)merge, c->temporal_patch_size = 1, c->resample = (int)r;
    return st;
}

/* Kimi K2.5's navit_resize_image: the least of 1 and the three limits' scales, sides truncated (at least 1, at most
 * the side limit) */
static void navit(const vc_vl_image_config *c, int64_t h, int64_t w, int64_t *sh, int64_t *sw) {
    double P = c->patch_size, per = (double)c->side_limit * P;
    double np = fmax(1.0, (double)(w / c->patch_size)) * fmax(1.0, (double)(h / c->patch_size));
    double scale = fmin(fmin(1.0, sqrt((double)c->in_token_limit / np)), fmin(per / (double)w, per / (double)h));
    *sw = (int64_t)((double)w * scale), *sh = (int64_t)((double)h * scale);
    *sw = *sw < 1 ? 1 : *sw > (int64_t)per ? (int64_t)per : *sw;
    *sh = *sh < 1 ? 1 : *sh > (int64_t)per ? (int64_t)per : *sh;
}

/* the scaled size (rescale's first step): sides truncated as int(w * scale) */
static vc_status scaled(const vc_vl_image_config *c, int64_t h, int64_t w, int64_t *sh, int64_t *sw) {
    int64_t P = c->patch_size, n = (w / P) * (h / P);
    *sh = h, *sw = w;
    if (c->kimi == 2) navit(c, h, w, sh, sw);
    else if (n > c->in_token_limit) {
        double scale = sqrt((double)c->in_token_limit / (double)n);
        *sw = (int64_t)((double)w * scale), *sh = (int64_t)((double)h * scale);
    }
    if (*sh < 1 || *sw < 1)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: scaling it to in_token_limit %lld leaves %lldx%lld pixels",
                       (long long)w, (long long)h, (long long)c->in_token_limit, (long long)*sw, (long long)*sh);
    return VC_OK;
}

vc_status vc_vl_kimi_size(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w) {
    int64_t h, w, P = c->patch_size, B = (int64_t)c->patch_size * c->merge_size;
    vc_status st = scaled(c, height, width, &h, &w);
    if (st) return st;
    if (c->pad_input) h += (B - h % B) % B, w += (B - w % B) % B;
    else h -= h % P, w -= w % P;
    if (h < P || w < P)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: cropped to whole %lld-pixel patches it has none", (long long)width,
                       (long long)height, (long long)P);
    if (c->kimi == 2 && (w / P > c->side_limit || h / P > c->side_limit)) /* (navit_resize_image's assertion) */
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: padded to whole merge blocks it is %lld x %lld patches, past "
                       "patch_limit_on_one_side %lld", (long long)width, (long long)height, (long long)(h / P),
                       (long long)(w / P), (long long)c->side_limit);
    if (c->kimi == 1 && (w / P >= 512 || h / P >= 512)) /* the processor's "Exceed pos emb" */
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: a grid of %lld x %lld patches exceeds MoonViT's 512 per side "
                       "(in_token_limit %lld)", (long long)width, (long long)height, (long long)(h / P),
                       (long long)(w / P), (long long)c->in_token_limit);
    if ((h / P) % c->merge_size || (w / P) % c->merge_size)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: a grid of %lld x %lld patches is not whole %d x %d merge blocks "
                       "(pad_input is false: the processor crops to whole patches only)", (long long)width,
                       (long long)height, (long long)(h / P), (long long)(w / P), c->merge_size, c->merge_size);
    *out_h = (int)h, *out_w = (int)w;
    return VC_OK;
}

vc_status vc_vl_kimi_process(const vc_vl_image_config *c, const vc_image *img, const char *what, vc_vl_pixels *out) {
    int H, W;
    int64_t sh, sw;
    vc_status st = vc_vl_kimi_size(c, img->height, img->width, &H, &W);
    if (!st) st = scaled(c, img->height, img->width, &sh, &sw);
    if (st) return vc_fail_ctx(st, "%s", what);
    vc_image resized = { 0 };
    const vc_image *src = img;
    if (sh != img->height || sw != img->width) {
        st = c->tv ? vc_image_resize_tv(img, (int)sw, (int)sh, c->resample, &resized)
                   : vc_image_resize_bicubic(img, (int)sw, (int)sh, &resized);
        if (st) return vc_fail_ctx(st, "%s", what);
        src = &resized;
    }
    /* padding: black pixels at the right and bottom; cropping: the centre (torchvision's int(round((h - H) / 2))) */
    int top = c->pad_input ? 0 : (int)vc_py_round((double)(src->height - H) / 2.0);
    int left = c->pad_input ? 0 : (int)vc_py_round((double)(src->width - W) / 2.0);
    float table[3][256];
    if (c->tv) vc_vl_level_table(c, table); /* (transformers' torchvision backend: Kimi_K25ImageProcessor) */
    for (int ch = 0; ch < 3 && !c->tv; ch++)
        for (int v = 0; v < 256; v++)
            table[ch][v] = c->kimi == 2 ? ((float)(v / 255.0) - (float)c->image_mean[ch]) * (1.0f / (float)c->image_std[ch])
                                        : ((float)v / 255.0f - (float)c->image_mean[ch]) / (float)c->image_std[ch];
    float *plane = malloc(sizeof(float) * (size_t)H * (size_t)W * 3);
    if (!plane) {
        vc_image_free(&resized);
        return vc_fail(VC_ERR_NOMEM, "%s: %dx%d pixel values", what, W, H);
    }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < 3; ch++) {
                int sy = y + top, sx = x + left, in = sy < src->height && sx < src->width;
                uint8_t v = in ? src->rgb[((size_t)sy * (size_t)src->width + (size_t)sx) * 3 + ch] : 0;
                plane[((size_t)y * (size_t)W + (size_t)x) * 3 + ch] = table[ch][v];
            }
    st = vc_vl_patchify(plane, 1, H, W, c->patch_size, 1, 1, what, out); /* blocks of one patch: row by row */
    free(plane);
    vc_image_free(&resized);
    return st;
}
