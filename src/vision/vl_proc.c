/* The Qwen2-VL image processor (transformers' Qwen2VLImageProcessor, which Qwen2.5-VL and Qwen3-VL use too), GLM-4V's
 * (Glm4vImageProcessor / Glm46VImageProcessor: the same steps, its own smart_resize and defaults) and qwen_vl_utils'
 * fetch_image in front of them, as verl runs them on each row's images. */
#include "verlc/image.h"
#include "vl_internal.h"
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

const double VC_CLIP_MEAN[3] = { 0.48145466, 0.4578275, 0.40821073 };
const double VC_CLIP_STD[3] = { 0.26862954, 0.26130258, 0.27577711 };

void vc_vl_image_config_default(vc_vl_image_config *c) {
    memset(c, 0, sizeof *c);
    c->min_pixels = 56 * 56, c->max_pixels = 28 * 28 * 1280;
    c->patch_size = 14, c->temporal_patch_size = 2, c->merge_size = 2;
    memcpy(c->image_mean, VC_CLIP_MEAN, sizeof VC_CLIP_MEAN);
    memcpy(c->image_std, VC_CLIP_STD, sizeof VC_CLIP_STD);
    c->rescale_factor = 1.0 / 255;
    c->do_resize = c->do_rescale = c->do_normalize = c->do_convert_rgb = 1;
    c->resample = 3;
}

/* Gemma 3's processor: size {height, width}, its BILINEAR default, transformers' IMAGENET_STANDARD mean and std (0.5),
 * image_seq_length tokens an image (the tower's pooling: a square whose side divides the patch grid's), pan and scan
 * with Gemma3Processor's defaults where the keys are null (a minimum crop of 256 pixels, at most 4 crops, from an
 * aspect ratio of 1.2) */
vc_status vc_vl_get_hw(const cJSON *j, int64_t max, int64_t *h, int64_t *w, const char *file) {
    const cJSON *size = vc_json_member(j, "size");
    char ctx[1100];
    snprintf(ctx, sizeof ctx, "%s: size", file);
    if (size && !cJSON_IsObject(size)) return vc_fail(VC_ERR_FORMAT, "%s: size is not an object", file);
    vc_status st = size ? vc_vl_get_pos_int(size, "height", max, h, ctx) : VC_OK;
    return !st && size ? vc_vl_get_pos_int(size, "width", max, w, ctx) : st;
}

static vc_status parse_gemma3(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t h = 224, w = 224, seq = 256, p = 14, r = 2;
    int pas = 0;
    vc_status st = vc_vl_get_hw(j, 1 << 16, &h, &w, file);
    if (!st) st = vc_vl_get_pos_int(j, "image_seq_length", 1 << 20, &seq, file);
    if (!st) st = vc_vl_get_pos_int(j, "patch_size", 1024, &p, file);
    if (!st) st = vc_json_get_int(j, "resample", 2, &r, file);
    const cJSON *pj = vc_json_member(j, "do_pan_and_scan");
    if (!st && pj && !cJSON_IsNull(pj)) st = vc_json_get_bool(j, "do_pan_and_scan", 0, &pas, file); /* (null: off) */
    int64_t min_crop = 256, max_crops = 4;
    double min_ratio = 1.2;
    if (!st && cJSON_IsNumber(vc_json_member(j, "pan_and_scan_min_crop_size")))
        st = vc_vl_get_pos_int(j, "pan_and_scan_min_crop_size", 1 << 16, &min_crop, file);
    if (!st && cJSON_IsNumber(vc_json_member(j, "pan_and_scan_max_num_crops")))
        st = vc_vl_get_pos_int(j, "pan_and_scan_max_num_crops", 64, &max_crops, file);
    if (!st && cJSON_IsNumber(vc_json_member(j, "pan_and_scan_min_ratio_to_activate"))) {
        min_ratio = vc_json_member(j, "pan_and_scan_min_ratio_to_activate")->valuedouble;
        if (!isfinite(min_ratio) || min_ratio <= 0)
            st = vc_fail(VC_ERR_ARG, "%s: pan_and_scan_min_ratio_to_activate = %g (a positive number is needed)", file,
                         min_ratio);
    }
    if (st) return st;
    c->pas = pas, c->pas_min_crop = (int)min_crop, c->pas_max_crops = (int)max_crops, c->pas_min_ratio = min_ratio;
    if (r != 2 && r != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (2, BILINEAR, and 3, BICUBIC, are built)", file,
                       (long long)r);
    int64_t ts = (int64_t)(sqrt((double)seq) + 0.5);
    if (h != w || h % p || ts * ts != seq || (h / p) % ts)
        return vc_fail(VC_ERR_FORMAT, "%s: size %lldx%lld and image_seq_length %lld: not a square of %lld-pixel patches "
                       "pooling to a square of tokens", file, (long long)w, (long long)h, (long long)seq, (long long)p);
    c->gemma3 = 1, c->fixed_h = (int)h, c->fixed_w = (int)w, c->resample = (int)r;
    c->patch_size = (int)p, c->temporal_patch_size = 1, c->merge_size = (int)((h / p) / ts);
    for (int i = 0; i < 3; i++) c->image_mean[i] = c->image_std[i] = 0.5;
    return VC_OK;
}

/* image_mean / image_std: a list of 3 numbers or one number for every channel (transformers' normalize) */
vc_status vc_vl_get_triple(const cJSON *j, const char *key, double out[3], int positive, const char *file) {
    const cJSON *v = vc_json_member(j, key);
    if (!v) return VC_OK;
    if (cJSON_IsNumber(v)) {
        out[0] = out[1] = out[2] = v->valuedouble;
    } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 3) {
        for (int i = 0; i < 3; i++) {
            const cJSON *e = cJSON_GetArrayItem(v, i);
            if (!cJSON_IsNumber(e)) return vc_fail(VC_ERR_FORMAT, "%s: %s[%d] is not a number", file, key, i);
            out[i] = e->valuedouble;
        }
    } else {
        return vc_fail(VC_ERR_FORMAT, "%s: %s must be 3 numbers (one per RGB channel) or one number", file, key);
    }
    for (int i = 0; i < 3; i++)
        if (!isfinite(out[i]) || (positive && out[i] <= 0))
            return vc_fail(VC_ERR_ARG, "%s: %s[%d] = %g (a %s number is needed)", file, key, i, out[i],
                           positive ? "positive" : "finite");
    return VC_OK;
}

vc_status vc_vl_get_pos_int(const cJSON *j, const char *key, int64_t max, int64_t *v, const char *file) {
    vc_status st = vc_json_get_int(j, key, *v, v, file);
    if (st != VC_OK) return st;
    if (*v <= 0 || *v > max) return vc_fail(VC_ERR_ARG, "%s: %s = %lld (1 to %lld)", file, key, (long long)*v,
                                            (long long)max);
    return VC_OK;
}

/* Keys as transformers reads them: the size dict's shortest_edge / longest_edge, overridden by top-level
 * min_pixels / max_pixels (Qwen2VLImageProcessor.__init__) */
static vc_status parse_config(const cJSON *j, vc_vl_image_config *c, const char *file) {
    vc_status st;
    const char *type = NULL;
    if ((st = vc_json_get_str(j, "image_processor_type", NULL, &type, file)) != VC_OK) return st;
    c->glm = type && (!strncmp(type, "Glm4vImageProcessor", 19) || !strncmp(type, "Glm46VImageProcessor", 20));
    if (type && !strcmp(type, "KimiVLImageProcessor")) return vc_vl_kimi_parse(j, c, file);
    if (type && !strcmp(type, "Kimi_K25ImageProcessor")) return vc_vl_kimi25_native_parse(j, c, file);
    if (vc_json_member(j, "media_proc_cfg")) return vc_vl_kimi25_parse(j, c, file); /* (Kimi K2.5 / K2.6) */
    if (type && !strncmp(type, "Gemma3ImageProcessor", 20) && (st = parse_gemma3(j, c, file)) != VC_OK) return st;
    if (type && !strncmp(type, "GotOcr2ImageProcessor", 21) && (st = vc_vl_got_parse(j, c, file)) != VC_OK) return st;
    if (type && !strncmp(type, "Gemma4ImageProcessor", 20) && (st = vc_vl_gemma4_parse(j, c, file)) != VC_OK) return st;
    if (type && !strncmp(type, "PixtralImageProcessor", 21) && (st = vc_vl_pixtral_parse(j, c, file)) != VC_OK) return st;
    if (type && !strncmp(type, "Llama4ImageProcessor", 20) && (st = vc_vl_llama4_parse(j, c, file)) != VC_OK) return st;
    int fixed = c->gemma3 || c->got || c->gemma4 || c->pixtral || c->llama4; /* (their own sizes: no min / max pixels) */
    if (type && !c->glm && !fixed && strncmp(type, "Qwen2VLImageProcessor", 21))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: image_processor_type %s (verlc has Qwen2VLImageProcessor's, "
                       "Glm4vImageProcessor's, KimiVLImageProcessor's, Gemma3ImageProcessor's, "
                       "Gemma4ImageProcessor's, GotOcr2ImageProcessor's, PixtralImageProcessor's and Llama4ImageProcessor's)", file, type);
    if (c->glm) c->min_pixels = 112 * 112, c->max_pixels = INT64_C(28) * 28 * 15000; /* its class defaults */
    int64_t resample = 3;
    if (!fixed && (st = vc_json_get_int(j, "resample", 3, &resample, file)) != VC_OK) return st;
    if (resample != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (only 3, BICUBIC, is implemented)", file,
                       (long long)resample);
    const cJSON *size = fixed ? NULL : vc_json_member(j, "size");
    if (size) {
        if (!cJSON_IsObject(size)) return vc_fail(VC_ERR_FORMAT, "%s: size is not an object", file);
        char ctx[1100];
        snprintf(ctx, sizeof ctx, "%s: size", file);
        /* transformers replaces its default size dict with this one: a missing edge stays missing */
        if (!vc_json_member(size, "shortest_edge") && !vc_json_member(j, "min_pixels"))
            return vc_fail(VC_ERR_MISSING, "%s: size has no shortest_edge (and there is no min_pixels)", file);
        if (!vc_json_member(size, "longest_edge") && !vc_json_member(j, "max_pixels"))
            return vc_fail(VC_ERR_MISSING, "%s: size has no longest_edge (and there is no max_pixels)", file);
        if ((st = vc_vl_get_pos_int(size, "shortest_edge", INT64_C(1) << 40, &c->min_pixels, ctx)) != VC_OK) return st;
        if ((st = vc_vl_get_pos_int(size, "longest_edge", INT64_C(1) << 40, &c->max_pixels, ctx)) != VC_OK) return st;
    }
    /* (GLM-4V's processor has no min_pixels / max_pixels: its size dict alone bounds it) */
    int glm_gemma = c->glm || fixed;
    if (!glm_gemma && (st = vc_vl_get_pos_int(j, "min_pixels", INT64_C(1) << 40, &c->min_pixels, file)) != VC_OK) return st;
    if (!glm_gemma && (st = vc_vl_get_pos_int(j, "max_pixels", INT64_C(1) << 40, &c->max_pixels, file)) != VC_OK) return st;
    /* max_pixels below min_pixels is accepted as transformers accepts it: smart_resize checks the max bound first */
    int64_t p = c->patch_size, t = c->temporal_patch_size, m = c->merge_size;
    if (!fixed && (st = vc_vl_get_pos_int(j, "patch_size", 1024, &p, file)) != VC_OK) return st;
    if (!fixed && (st = vc_vl_get_pos_int(j, "temporal_patch_size", 64, &t, file)) != VC_OK) return st;
    if (!fixed && (st = vc_vl_get_pos_int(j, "merge_size", 64, &m, file)) != VC_OK) return st;
    c->patch_size = (int)p, c->temporal_patch_size = (int)t, c->merge_size = (int)m;
    if ((st = vc_vl_get_triple(j, "image_mean", c->image_mean, 0, file)) != VC_OK) return st;
    if ((st = vc_vl_get_triple(j, "image_std", c->image_std, 1, file)) != VC_OK) return st;
    if ((st = vc_json_get_num(j, "rescale_factor", c->rescale_factor, &c->rescale_factor, file)) != VC_OK) return st;
    if (!isfinite(c->rescale_factor) || c->rescale_factor <= 0)
        return vc_fail(VC_ERR_ARG, "%s: rescale_factor = %g (a positive number is needed)", file, c->rescale_factor);
    if ((st = vc_json_get_bool(j, "do_resize", c->do_resize, &c->do_resize, file)) != VC_OK) return st;
    if (c->llama4 && !c->do_resize)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: do_resize = false (Llama 4's processor always resizes to its canvases, "
                       "and refuses it too)", file);
    if ((st = vc_json_get_bool(j, "do_rescale", c->do_rescale, &c->do_rescale, file)) != VC_OK) return st;
    if ((st = vc_json_get_bool(j, "do_normalize", c->do_normalize, &c->do_normalize, file)) != VC_OK) return st;
    return vc_json_get_bool(j, "do_convert_rgb", c->do_convert_rgb, &c->do_convert_rgb, file);
}

vc_status vc_vl_image_config_load(const char *path, vc_vl_image_config *c) {
    vc_vl_image_config_default(c);
    size_t n = strlen(path);
    char *file = n >= 5 && !strcmp(path + n - 5, ".json") ? vc_strdup(path)
                                                          : vc_path_join(path, "preprocessor_config.json");
    if (!file) return vc_fail(VC_ERR_NOMEM, "%s", path);
    cJSON *j = NULL;
    vc_status st = vc_json_load_file(file, &j);
    if (st == VC_OK && !cJSON_IsObject(j)) st = vc_fail(VC_ERR_FORMAT, "%s: not a JSON object", file);
    if (st == VC_OK) st = parse_config(j, c, file);
    const char *env = getenv("VERLC_IMAGE_BACKEND");
    /* transformers 5 (verl's) picks the torchvision class wherever torchvision is installed, as verl's installs have
     * it; Kimi-VL's and Kimi K2.5's hub processors are their remote code's (Pillow and NumPy) */
    c->tv = c->kimi ? c->tv : 1;
    if (st == VC_OK && env && *env && !c->llama4 && !c->kimi) {
        if (strcmp(env, "torchvision") && strcmp(env, "pil"))
            st = vc_fail(VC_ERR_ARG, "VERLC_IMAGE_BACKEND=%s: torchvision or pil", env);
        c->tv = !strcmp(env, "torchvision");
    }
    cJSON_Delete(j);
    free(file);
    return st;
}

vc_status vc_vl_resize(const vc_vl_image_config *c, const vc_image *in, int out_w, int out_h, int filter, vc_image *out) {
    return c->tv ? vc_image_resize_tv(in, out_w, out_h, filter, out) : vc_image_resize(in, out_w, out_h, filter, out);
}

/* ---- smart_resize ---- */

/* Python's round() of a float: half to even (nearbyint in the default rounding mode) */
double vc_py_round(double x) { return nearbyint(x); }

static vc_status check_ratio(int64_t h, int64_t w, int factor) {
    if (h <= 0 || w <= 0 || factor <= 0)
        return vc_fail(VC_ERR_ARG, "smart_resize of %lldx%lld with factor %d", (long long)w, (long long)h, factor);
    double ratio = (double)(h > w ? h : w) / (double)(h > w ? w : h);
    if (ratio > 200)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: absolute aspect ratio must be smaller than 200, got %g",
                       (long long)w, (long long)h, ratio);
    return VC_OK;
}

static vc_status store_hw(double hb, double wb, int *oh, int *ow) {
    if (!(hb >= 1 && wb >= 1 && hb * wb <= (double)VC_IMAGE_MAX_PIXELS))
        return vc_fail(VC_ERR_ARG, "smart_resize gives %.0fx%.0f pixels", wb, hb);
    *oh = (int)hb, *ow = (int)wb;
    return VC_OK;
}

vc_status vc_vl_smart_resize(int64_t height, int64_t width, int factor, int64_t min_pixels, int64_t max_pixels,
                             int *out_h, int *out_w) {
    vc_status st = check_ratio(height, width, factor);
    if (st != VC_OK) return st;
    double f = factor, h = (double)height, w = (double)width;
    double hb = vc_py_round(h / f) * f, wb = vc_py_round(w / f) * f;
    if (hb * wb > max_pixels) {
        double beta = sqrt(h * w / max_pixels);
        hb = fmax(f, floor(h / beta / f) * f);
        wb = fmax(f, floor(w / beta / f) * f);
    } else if (hb * wb < min_pixels) {
        double beta = sqrt(min_pixels / (h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    return store_hw(hb, wb, out_h, out_w);
}

vc_status vc_glm4v_smart_resize(int64_t height, int64_t width, int temporal, int factor, int64_t min_pixels,
                                int64_t max_pixels, int *out_h, int *out_w) {
    if (height <= 0 || width <= 0 || factor <= 0 || temporal <= 0)
        return vc_fail(VC_ERR_ARG, "smart_resize of %lldx%lld with factor %d", (long long)width, (long long)height,
                       factor);
    if (height < factor || width < factor) { /* sides under one factor scaled up first, truncated as int() does */
        double scale = fmax((double)factor / (double)height, (double)factor / (double)width);
        height = (int64_t)((double)height * scale), width = (int64_t)((double)width * scale);
    }
    vc_status st = check_ratio(height, width, factor);
    if (st != VC_OK) return st;
    /* num_frames = temporal_factor = temporal_patch_size: t_bar is the temporal patch size */
    double f = factor, h = (double)height, w = (double)width, t = temporal;
    double hb = vc_py_round(h / f) * f, wb = vc_py_round(w / f) * f;
    if (t * hb * wb > max_pixels) {
        double beta = sqrt(t * h * w / max_pixels);
        hb = fmax(f, floor(h / beta / f) * f);
        wb = fmax(f, floor(w / beta / f) * f);
    } else if (t * hb * wb < min_pixels) {
        double beta = sqrt(min_pixels / (t * h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    return store_hw(hb, wb, out_h, out_w);
}

vc_status vc_vl_processor_resize(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w) {
    int factor = c->patch_size * c->merge_size;
    if (c->kimi) return vc_vl_kimi_size(c, height, width, out_h, out_w);
    if (c->gemma3) return *out_h = c->fixed_h, *out_w = c->fixed_w, VC_OK;
    if (c->gemma4) return vc_vl_gemma4_size(c, height, width, out_h, out_w);
    if (c->pixtral) return vc_vl_pixtral_size(c, height, width, out_h, out_w);
    if (c->glm)
        return vc_glm4v_smart_resize(height, width, c->temporal_patch_size, factor, c->min_pixels, c->max_pixels, out_h,
                                     out_w);
    return vc_vl_smart_resize(height, width, factor, c->min_pixels, c->max_pixels, out_h, out_w);
}

vc_status vc_qwen_vl_utils_smart_resize(int64_t height, int64_t width, int factor, double min_pixels, double max_pixels,
                                        int *out_h, int *out_w) {
    if (max_pixels < min_pixels)
        return vc_fail(VC_ERR_ARG, "smart_resize: max_pixels %.0f is below min_pixels %.0f", max_pixels, min_pixels);
    vc_status st = check_ratio(height, width, factor);
    if (st != VC_OK) return st;
    double f = factor, h = (double)height, w = (double)width;
    double hb = fmax(f, vc_py_round(h / f) * f), wb = fmax(f, vc_py_round(w / f) * f);
    if (hb * wb > max_pixels) {
        double beta = sqrt(h * w / max_pixels);
        hb = floor(h / beta / f) * f;
        wb = floor(w / beta / f) * f;
    } else if (hb * wb < min_pixels) {
        double beta = sqrt(min_pixels / (h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    if (hb < 1 || wb < 1)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: qwen_vl_utils' smart_resize gives %.0fx%.0f (max_pixels %.0f "
                       "leaves a side under one %d-pixel step)", (long long)width, (long long)height, wb, hb,
                       max_pixels, factor);
    return store_hw(hb, wb, out_h, out_w);
}

/* ---- the processor ---- */

/* rescale (float64 times the factor, then float32) and normalize ((x - mean) / std in float32), as transformers'
 * numpy functions compute; with c->tv its torchvision backend's: rescale and normalize fused (mean and std as float32
 * tensors times 1 / factor, in float32), or the level times the factor in float32 alone: the value of each 8-bit level
 * of each channel, once */
void vc_vl_level_table(const vc_vl_image_config *c, float table[3][256]) {
    for (int ch = 0; ch < 3; ch++) {
        float mean = (float)c->image_mean[ch], std = (float)c->image_std[ch];
        if (c->tv) {
            float inv = (float)(1.0 / c->rescale_factor), fm = mean * inv, fs = std * inv;
            for (int v = 0; v < 256; v++)
                table[ch][v] = c->do_rescale && c->do_normalize ? ((float)v - fm) / fs
                               : c->do_normalize                ? ((float)v - mean) / std
                               : c->do_rescale                  ? (float)v * (float)c->rescale_factor
                                                                : (float)v;
            continue;
        }
        for (int v = 0; v < 256; v++) {
            float x = c->do_rescale ? (float)((double)v * c->rescale_factor) : (float)v;
            table[ch][v] = c->do_normalize ? (x - mean) / std : x;
        }
    }
}

vc_status vc_vl_image_process(const vc_vl_image_config *c, const vc_image *img, const char *what, vc_vl_pixels *out) {
    memset(out, 0, sizeof *out);
    if (!what) what = "image";
    if (c->kimi) return vc_vl_kimi_process(c, img, what, out);
    if (!c->do_convert_rgb && img->mode != VC_IMG_RGB)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: a %s image with do_convert_rgb false (transformers keeps its "
                       "channels and refuses them)", what, vc_image_mode_name(img->mode));
    /* (Gemma 3, Mistral 3: patches row by row, blocks of one) */
    const int P = c->patch_size, M = c->gemma3 || c->pixtral ? 1 : c->merge_size, T = c->temporal_patch_size;
    const int factor = P * (c->pixtral ? c->merge_size : M);
    vc_image resized = { 0 }, keyed = { 0 };
    float table[3][256];
    vc_vl_level_table(c, table);
    const vc_image *src = img;
    vc_status st;
    if (c->do_convert_rgb && img->has_key) {
        /* convert_to_rgb: the transparent colour Pillow kept in image.info becomes alpha 0, i.e. white */
        size_t np = (size_t)img->width * (size_t)img->height;
        keyed = *img;
        keyed.has_key = 0;
        keyed.rgb = malloc(np * 3);
        if (!keyed.rgb) return vc_fail(VC_ERR_NOMEM, "%s: %dx%d image", what, img->width, img->height);
        memcpy(keyed.rgb, img->rgb, np * 3);
        for (size_t i = 0; i < np; i++)
            if (!memcmp(keyed.rgb + i * 3, img->key, 3)) memset(keyed.rgb + i * 3, 255, 3);
        img = src = &keyed;
    }
    if (c->llama4) { /* Llama 4's tiles (torchvision's resize, its own bfloat16 levels) */
        st = vc_vl_llama4_process(c, img, what, out);
        vc_image_free(&keyed);
        return st;
    }
    int ncw, nch, cw, chh;
    if (c->gemma3 && vc_vl_gemma3_crops(c, img->height, img->width, &ncw, &nch, &cw, &chh) > 0) { /* Gemma 3's pan
                                                                          and scan: the whole image and its crops */
        st = vc_vl_gemma3_process(c, img, table, what, out);
        vc_image_free(&keyed);
        return st;
    }
    if (c->got || c->gemma4) { /* InternVL's tiles; Gemma 4's patches */
        st = c->got ? vc_vl_got_process(c, img, table, what, out) : vc_vl_gemma4_process(c, img, table, what, out);
        vc_image_free(&keyed);
        return st;
    }
    if (c->do_resize) {
        int h, w;
        if ((st = vc_vl_processor_resize(c, img->height, img->width, &h, &w)) != VC_OK ||
            (st = vc_vl_resize(c, img, w, h, c->resample, &resized)) != VC_OK) {
            vc_image_free(&keyed);
            return vc_fail_ctx(st, "%s", what);
        }
        src = &resized;
    } else if (c->gemma3 && (img->height != c->fixed_h || img->width != c->fixed_w)) {
        vc_image_free(&keyed);
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d with do_resize false: Gemma 3's tower takes images of its size %dx%d "
                       "only", what, img->width, img->height, c->fixed_w, c->fixed_h);
    } else if (img->height % factor || img->width % factor) {
        vc_image_free(&keyed);
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d is not a multiple of patch_size * merge_size = %d and do_resize is "
                       "false", what, img->width, img->height, factor);
    }
    size_t np = (size_t)src->width * (size_t)src->height;
    float *plane = malloc(sizeof(float) * np * 3);
    st = plane ? VC_OK : vc_fail(VC_ERR_NOMEM, "%s: %dx%d pixel values", what, src->width, src->height);
    for (size_t i = 0; plane && i < np * 3; i++) plane[i] = table[i % 3][src->rgb[i]];
    if (!st) st = vc_vl_patchify(plane, 1, src->height, src->width, P, M, T, what, out);
    free(plane);
    vc_image_free(&resized), vc_image_free(&keyed);
    return st;
}

vc_status vc_vl_patchify(const float *frames, int n, int h, int w, int P, int M, int T, const char *what,
                         vc_vl_pixels *out) {
    int nt = (n + T - 1) / T, gh = h / P, gw = w / P;
    out->grid_t = nt, out->grid_h = gh, out->grid_w = gw;
    out->rows = (int64_t)nt * gh * gw, out->cols = (int64_t)3 * T * P * P;
    out->data = malloc(sizeof(float) * (size_t)out->rows * (size_t)out->cols);
    if (!out->data)
        return vc_fail(VC_ERR_NOMEM, "%s: %lld x %lld pixel values", what, (long long)out->rows, (long long)out->cols);
    /* rows: (frame group, block row, block column, row in block, column in block); columns: (channel, temporal
     * copy, y, x) */
    float *row = out->data;
    size_t fp = (size_t)h * (size_t)w * 3;
    for (int t = 0; t < nt; t++)
        for (int bh = 0; bh < gh / M; bh++)
            for (int bw = 0; bw < gw / M; bw++)
                for (int mh = 0; mh < M; mh++)
                    for (int mw = 0; mw < M; mw++, row += out->cols) {
                        int y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                        float *o = row;
                        for (int ch = 0; ch < 3; ch++)
                            for (int k = 0; k < T; k++) {
                                int f = t * T + k < n ? t * T + k : n - 1; /* the last frame repeated */
                                for (int py = 0; py < P; py++) {
                                    const float *s = frames + f * fp + ((size_t)(y0 + py) * (size_t)w + x0) * 3 + ch;
                                    for (int q = 0; q < P; q++) *o++ = s[q * 3];
                                }
                            }
                    }
    return VC_OK;
}

void vc_vl_pixels_free(vc_vl_pixels *p) {
    if (!p) return;
    free(p->data);
    memset(p, 0, sizeof *p);
}

int64_t vc_vl_image_tokens(const vc_vl_pixels *p, int merge_size) {
    return (int64_t)p->grid_t * p->grid_h * p->grid_w / ((int64_t)merge_size * merge_size);
}

/* ---- verl's path ---- */

vc_status vc_vl_fetch_image(const vc_image *in, const vc_vl_fetch_opts *o, const char *what, vc_image *out) {
    memset(out, 0, sizeof *out);
    if (!what) what = "image";
    int patch = o && o->patch_size > 0 ? o->patch_size : 14, factor = patch * 2; /* SPATIAL_MERGE_SIZE 2 */
    int64_t f2 = (int64_t)factor * factor;
    int64_t mn = o && o->min_pixels > 0 ? o->min_pixels : 4 * f2, mx = o && o->max_pixels > 0 ? o->max_pixels
                                                                                               : 16384 * f2;
    int h, w;
    vc_status st;
    if (o && o->resized_h > 0 && o->resized_w > 0)
        st = vc_qwen_vl_utils_smart_resize(o->resized_h, o->resized_w, factor, 4 * f2, 16384 * f2, &h, &w);
    else
        st = vc_qwen_vl_utils_smart_resize(in->height, in->width, factor, mn, mx, &h, &w);
    if (st != VC_OK) return vc_fail_ctx(st, "%s", what);
    if ((st = vc_image_resize_bicubic(in, w, h, out)) != VC_OK) return vc_fail_ctx(st, "%s", what);
    return VC_OK;
}

vc_status vc_vl_verl_image(const vc_vl_image_config *c, const vc_image *in, const vc_vl_fetch_opts *o,
                           const char *what, vc_vl_pixels *out) {
    memset(out, 0, sizeof *out);
    vc_vl_fetch_opts fo = { .patch_size = c->patch_size };
    if (o) fo = *o;
    if (fo.patch_size <= 0) fo.patch_size = c->patch_size;
    vc_image fetched;
    vc_status st = vc_vl_fetch_image(in, &fo, what, &fetched);
    if (st != VC_OK) return st;
    st = vc_vl_image_process(c, &fetched, what, out);
    vc_image_free(&fetched);
    return st;
}
