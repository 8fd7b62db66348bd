/* Videos as verl prepares them for Qwen-VL models: qwen_vl_utils' fetch_video (smart_nframes, the sampled indices,
 * the frame size under the video's pixel budget) and transformers' Qwen2VLVideoProcessor / Qwen3VLVideoProcessor
 * (their smart_resize, the fused rescale-and-normalize, patches with the last frame repeated to a whole temporal
 * patch), with Qwen3-VL's frame timestamps. Frames arrive decoded (src/vision/video.c, or a row's image files). */
#include "verlc/image.h"
#include "verlc/json.h"
#include "vl_internal.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the processor's config ---- */

void vc_vl_video_config_default(vc_vl_video_config *c, int qwen3) {
    memset(c, 0, sizeof *c);
    c->qwen3 = qwen3;
    c->patch_size = qwen3 ? 16 : 14, c->temporal_patch_size = 2, c->merge_size = 2;
    int64_t f = 2LL * c->patch_size;
    c->min_pixels = 128 * f * f, c->max_pixels = 768 * f * f;
    for (int i = 0; i < 3; i++) /* IMAGENET_STANDARD_MEAN / _STD for Qwen3-VL, the CLIP values for Qwen2-VL */
        c->image_mean[i] = qwen3 ? 0.5 : VC_CLIP_MEAN[i], c->image_std[i] = qwen3 ? 0.5 : VC_CLIP_STD[i];
    c->rescale_factor = 1.0 / 255;
    c->do_resize = c->do_rescale = c->do_normalize = 1;
    c->max_video_tokens = 128000;
    c->do_sample_frames = qwen3, c->fps = 2.0, c->min_frames = 4, c->max_frames = 768;
}

/* the sampling keys: fps and num_frames may be null (num_frames is by default) */
static vc_status parse_sampling(const cJSON *j, vc_vl_video_config *c, const char *file) {
    vc_status st = vc_json_get_bool(j, "do_sample_frames", c->do_sample_frames, &c->do_sample_frames, file);
    const cJSON *fps = cJSON_GetObjectItemCaseSensitive(j, "fps");
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(j, "num_frames");
    if (!st && fps && cJSON_IsNull(fps)) c->fps = 0;
    else if (!st && fps) {
        st = vc_json_get_num(j, "fps", c->fps, &c->fps, file);
        if (!st && !(isfinite(c->fps) && c->fps > 0 && c->fps < 1e6))
            st = vc_fail(VC_ERR_ARG, "%s: fps = %g (a positive number is needed)", file, c->fps);
    }
    if (!st && nf && !cJSON_IsNull(nf)) st = vc_vl_get_pos_int(j, "num_frames", 1 << 20, &c->num_frames, file);
    if (!st) st = vc_vl_get_pos_int(j, "min_frames", 1 << 20, &c->min_frames, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_frames", 1 << 20, &c->max_frames, file);
    return st;
}

static vc_status parse_video_config(const cJSON *j, vc_vl_video_config *c, const char *file) {
    const char *type = NULL;
    vc_status st = vc_json_get_str(j, "video_processor_type", NULL, &type, file);
    if (!st && type && strcmp(type, c->qwen3 ? "Qwen3VLVideoProcessor" : "Qwen2VLVideoProcessor"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: video_processor_type %s (this model's is %s)", file, type,
                       c->qwen3 ? "Qwen3VLVideoProcessor" : "Qwen2VLVideoProcessor");
    const cJSON *size = vc_json_member(j, "size");
    if (!st && size) {
        if (!cJSON_IsObject(size)) return vc_fail(VC_ERR_FORMAT, "%s: size is not an object", file);
        char ctx[1100];
        snprintf(ctx, sizeof ctx, "%s: size", file);
        st = vc_vl_get_pos_int(size, "shortest_edge", INT64_C(1) << 40, &c->min_pixels, ctx);
        if (!st) st = vc_vl_get_pos_int(size, "longest_edge", INT64_C(1) << 40, &c->max_pixels, ctx);
    }
    if (!st) st = vc_vl_get_pos_int(j, "min_pixels", INT64_C(1) << 40, &c->min_pixels, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_pixels", INT64_C(1) << 40, &c->max_pixels, file);
    int64_t p = c->patch_size, t = c->temporal_patch_size, m = c->merge_size;
    if (!st) st = vc_vl_get_pos_int(j, "patch_size", 1024, &p, file);
    if (!st) st = vc_vl_get_pos_int(j, "temporal_patch_size", 64, &t, file);
    if (!st) st = vc_vl_get_pos_int(j, "merge_size", 64, &m, file);
    if (!st) st = vc_vl_get_pos_int(j, "max_video_tokens", INT64_C(1) << 30, &c->max_video_tokens, file);
    c->patch_size = (int)p, c->temporal_patch_size = (int)t, c->merge_size = (int)m;
    if (!st) st = vc_vl_get_triple(j, "image_mean", c->image_mean, 0, file);
    if (!st) st = vc_vl_get_triple(j, "image_std", c->image_std, 1, file);
    if (!st) st = vc_json_get_num(j, "rescale_factor", c->rescale_factor, &c->rescale_factor, file);
    if (!st && (!isfinite(c->rescale_factor) || c->rescale_factor <= 0))
        st = vc_fail(VC_ERR_ARG, "%s: rescale_factor = %g (a positive number is needed)", file, c->rescale_factor);
    if (!st) st = vc_json_get_bool(j, "do_resize", c->do_resize, &c->do_resize, file);
    if (!st) st = vc_json_get_bool(j, "do_rescale", c->do_rescale, &c->do_rescale, file);
    if (!st) st = vc_json_get_bool(j, "do_normalize", c->do_normalize, &c->do_normalize, file);
    if (!st) st = parse_sampling(j, c, file);
    const cJSON *cap = vc_json_member(j, "cap_pixels_per_frame");
    if (!st && cap && !cJSON_IsNull(cap)) st = vc_json_get_bool(j, "cap_pixels_per_frame", 0, &c->cap_pixels_per_frame,
                                                                 file);
    return st;
}

vc_status vc_vl_video_config_load(const char *model_dir, int qwen3, vc_vl_video_config *c) {
    vc_vl_video_config_default(c, qwen3);
    char *file = vc_path_join(model_dir, "video_preprocessor_config.json");
    if (file && !vc_file_exists(file)) free(file), file = vc_path_join(model_dir, "preprocessor_config.json");
    if (!file) return vc_fail(VC_ERR_NOMEM, "%s", model_dir);
    cJSON *j = NULL;
    vc_status st = vc_file_exists(file) ? vc_json_load_file(file, &j) : VC_OK; /* neither: the class defaults */
    if (!st && j && !cJSON_IsObject(j)) st = vc_fail(VC_ERR_FORMAT, "%s: not a JSON object", file);
    if (!st && j) st = parse_video_config(j, c, file);
    cJSON_Delete(j);
    free(file);
    return st;
}

/* ---- the processor ---- */

vc_status vc_vl_video_processor_sample(const vc_vl_video_config *c, int64_t n, const char *what, int64_t **idx,
                                       int64_t *m) {
    int64_t k = n;
    if (c->do_sample_frames && !c->qwen3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: the video processor's do_sample_frames needs the video's fps, which "
                       "frames handed over without their timing lack (transformers' Qwen2VLVideoProcessor refuses "
                       "them)", what);
    if (c->do_sample_frames && c->num_frames > 0 && c->fps > 0)
        return vc_fail(VC_ERR_ARG, "%s: the video processor's num_frames and fps are mutually exclusive", what);
    if (c->do_sample_frames && c->num_frames > 0) k = c->num_frames;
    else if (c->do_sample_frames && c->fps > 0) { /* (metadata.fps defaults to 24) */
        k = (int64_t)((double)n / 24.0 * c->fps);
        k = k > c->min_frames ? k : c->min_frames;
        k = k < c->max_frames ? k : c->max_frames;
        k = k < n ? k : n;
    } else if (c->do_sample_frames) {
        k = n > c->min_frames ? n : c->min_frames;
        k = k < c->max_frames ? k : c->max_frames;
    }
    if (!(*idx = malloc(sizeof(int64_t) * (size_t)(k > 0 ? k : 1)))) return VC_ERR_NOMEM;
    double step = k > 1 ? (double)(n - 1) / (double)(k - 1) : 0;
    for (int64_t i = 0; i < k; i++) /* numpy's linspace (i * step, the last exactly n - 1), rounded half to even */
        (*idx)[i] = !c->do_sample_frames ? i : i == k - 1 && k > 1 ? n - 1 : (int64_t)nearbyint((double)i * step);
    *m = k;
    return VC_OK;
}

/* Qwen3-VL's video smart_resize: the area bound counts all num_frames (rounded to the temporal factor) */
static vc_status qwen3_video_resize(int n, double h, double w, int T, int f, double mn, double mx, int *oh, int *ow) {
    if (n < T) return vc_fail(VC_ERR_ARG, "video of %d frames: the processor needs at least %d", n, T);
    if (h < f || w < f) {
        double s = fmax(f / h, f / w);
        h = floor(h * s), w = floor(w * s);
    }
    if (fmax(h, w) / fmin(h, w) > 200)
        return vc_fail(VC_ERR_ARG, "video of %.0fx%.0f: absolute aspect ratio must be smaller than 200", w, h);
    double hb = vc_py_round(h / f) * f, wb = vc_py_round(w / f) * f, tb = vc_py_round((double)n / T) * T;
    if (tb * hb * wb > mx) {
        double beta = sqrt((double)n * h * w / mx);
        hb = fmax(f, floor(h / beta / f) * f), wb = fmax(f, floor(w / beta / f) * f);
    } else if (tb * hb * wb < mn) {
        double beta = sqrt(mn / ((double)n * h * w));
        hb = ceil(h * beta / f) * f, wb = ceil(w * beta / f) * f;
    }
    if (hb < f || wb < f || hb > 1 << 20 || wb > 1 << 20)
        return vc_fail(VC_ERR_ARG, "video of %.0fx%.0f: the processor's smart_resize gives %.0fx%.0f", w, h, wb, hb);
    *oh = (int)hb, *ow = (int)wb;
    return VC_OK;
}

vc_status vc_vl_video_resize_hw(const vc_vl_video_config *c, int n, int height, int width, int *out_h, int *out_w) {
    int f = c->patch_size * c->merge_size, T = c->temporal_patch_size;
    int64_t mx = c->max_pixels;
    if (c->qwen3) {
        if (c->cap_pixels_per_frame && n > 0) {
            int64_t cap = c->max_video_tokens * f * f, per = c->max_pixels / n, lo = (int64_t)(c->min_pixels * 1.05);
            per = per < cap ? per : cap;
            mx = (per > lo ? per : lo) * n;
        }
        return qwen3_video_resize(n, height, width, T, f, (double)c->min_pixels, (double)mx, out_h, out_w);
    }
    if (c->cap_pixels_per_frame && n > 0) {
        int64_t total = (int64_t)((double)c->max_video_tokens * f * f * 0.9), share = total * T / n;
        int64_t lo = (int64_t)(c->min_pixels * 1.05);
        mx = mx < share ? mx : share;
        mx = mx > lo ? mx : lo;
    }
    return vc_vl_smart_resize(height, width, f, c->min_pixels, mx, out_h, out_w);
}

/* PyTorch's antialiased bicubic interpolation (_upsample_bicubic2d_aa, which torchvision's resize runs on float
 * frames, and on 8-bit ones cast to float, then clamped and rounded): separable, width first, a dimension whose
 * size stays skipped; each output's taps and weights in float as its _compute_indices_min_size_weights_aa computes
 * them (Keys' cubic with a = -0.5, widened by the downscale factor, normalised to sum 1), each sum accumulated in
 * float from the first tap. The fused multiply-adds are those of PyTorch 2.x's x86-64 build (AVX2 kernels, read off
 * its outputs: 0 of ~10^5 values differ on the fixtures' resizes): the cubic's polynomial fused, the taps after
 * the first added as rounded products in whole groups of 4 and fused after them. */
static float aa_cubic(float x) {
    const float A = -0.5f;
    x = fabsf(x);
    if (x < 1.0f) return fmaf(fmaf(A + 2.0f, x, -(A + 3.0f)) * x, x, 1.0f);
    if (x < 2.0f) return fmaf(fmaf(fmaf(A, x, -5.0f * A), x, 8.0f * A), x, -4.0f * A);
    return 0.0f;
}

static int aa_weights(int in, int out, int **lo_out, float **w_out) {
    float scale = (float)in / (float)out, support = scale >= 1.0f ? 2.0f * scale : 2.0f;
    float inv = scale >= 1.0f ? 1.0f / scale : 1.0f;
    int ksize = (int)ceilf(support) * 2 + 1;
    int *lo = malloc(sizeof(int) * 2 * (size_t)out);
    float *w = calloc((size_t)out * (size_t)ksize, sizeof(float));
    if (!lo || !w) return free(lo), free(w), 0;
    for (int i = 0; i < out; i++) {
        float center = (float)((double)scale * ((double)i + 0.5)), total = 0.0f;
        int64_t a = (int64_t)((double)(center - support) + 0.5), b = (int64_t)((double)(center + support) + 0.5);
        a = a < 0 ? 0 : a, b = b > in ? in : b;
        lo[i] = (int)a, lo[out + i] = (int)(b - a);
        float *wi = w + (size_t)i * ksize;
        for (int k = 0; k < lo[out + i] && k < ksize; k++) {
            wi[k] = aa_cubic((float)(((double)((float)(k + a) - center) + 0.5) * (double)inv));
            total += wi[k];
        }
        if (total != 0.0f)
            for (int k = 0; k < lo[out + i] && k < ksize; k++) wi[k] /= total;
    }
    *lo_out = lo, *w_out = w;
    return ksize;
}

/* one pass over n_outer blocks of [in x inner] floats into [out x inner] */
static void aa_pass(const float *src, float *dst, int64_t n_outer, int in, int out, int64_t inner, const int *lo,
                    const float *w, int ksize) {
    for (int64_t o = 0; o < n_outer; o++)
        for (int i = 0; i < out; i++) {
            const float *wi = w + (size_t)i * ksize;
            const float *s = src + (o * in + lo[i]) * inner;
            float *d = dst + (o * out + i) * inner;
            int K = lo[out + i], plain = (K - 1) / 4 * 4; /* taps 1..plain in groups of 4, then fused */
            for (int64_t c = 0; c < inner; c++) {
                float t = wi[0] * s[c];
                for (int k = 1; k <= plain; k++) {
                    float p = wi[k] * s[k * inner + c];
                    t += p;
                }
                for (int k = plain + 1; k < K; k++) t = fmaf(wi[k], s[k * inner + c], t);
                d[c] = t;
            }
        }
}

/* frames [n][h][w][3] floats to [n][oh][ow][3] (*out malloc'd) */
static vc_status resize_float(const float *src, int n, int h, int w, int oh, int ow, float **out) {
    float *mid = NULL, *dst = malloc(sizeof(float) * (size_t)n * oh * ow * 3), *ww = NULL, *wh = NULL;
    int *lw = NULL, *lh = NULL, kw = ow != w ? aa_weights(w, ow, &lw, &ww) : 1, kh = oh != h ? aa_weights(h, oh, &lh, &wh) : 1;
    if (ow != w && oh != h) mid = malloc(sizeof(float) * (size_t)n * h * ow * 3);
    vc_status st = dst && kw && kh && (mid || ow == w || oh == h) ? VC_OK : VC_ERR_NOMEM;
    if (!st && ow != w) aa_pass(src, oh != h ? mid : dst, (int64_t)n * h, w, ow, 3, lw, ww, kw);
    if (!st && oh != h) aa_pass(ow != w ? mid : src, dst, n, h, oh, (int64_t)ow * 3, lh, wh, kh);
    free(mid), free(lw), free(lh), free(ww), free(wh);
    if (st) return free(dst), st;
    *out = dst;
    return VC_OK;
}

/* transformers' fused rescale and normalize: mean and std in float32 times 1 / rescale_factor, then (x - mean) / std
 * in float32 (rescale alone: x * factor) */
static float level(const vc_vl_video_config *c, int ch, float x) {
    if (c->do_normalize) {
        float k = c->do_rescale ? (float)(1.0 / c->rescale_factor) : 1.0f;
        float m = (float)c->image_mean[ch] * k, s = (float)c->image_std[ch] * k;
        return (x - m) / s;
    }
    return c->do_rescale ? x * (float)c->rescale_factor : x;
}

vc_status vc_vl_video_process(const vc_vl_video_config *c, const vc_image *frames, int n, const char *what,
                              vc_vl_pixels *out) {
    memset(out, 0, sizeof *out);
    if (n < 1) return vc_fail(VC_ERR_ARG, "%s: a video without frames", what);
    int h = frames[0].height, w = frames[0].width, oh = h, ow = w, P = c->patch_size, M = c->merge_size;
    int T = c->temporal_patch_size;
    for (int i = 1; i < n; i++)
        if (frames[i].height != h || frames[i].width != w)
            return vc_fail(VC_ERR_SHAPE, "%s: frame %d is %dx%d, frame 0 %dx%d (a video's frames share one size)", what,
                           i, frames[i].width, frames[i].height, w, h);
    vc_status st = c->do_resize ? vc_vl_video_resize_hw(c, n, h, w, &oh, &ow) : VC_OK;
    if (st) return vc_fail_ctx(st, "%s", what);
    if (oh % (P * M) || ow % (P * M))
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d frames are not a multiple of patch_size * merge_size = %d", what, ow, oh,
                       P * M);
    size_t plane = (size_t)h * w * 3;
    float *px = malloc(sizeof(float) * plane * (size_t)n), *sized = NULL;
    if (!px) return vc_fail(VC_ERR_NOMEM, "%s: %d frames of %dx%d", what, n, w, h);
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < plane; k++) px[i * plane + k] = frames[i].rgb[k];
    if (oh != h || ow != w) {
        if ((st = resize_float(px, n, h, w, oh, ow, &sized))) return free(px), vc_fail(st, "%s: resize", what);
        free(px), px = sized;
    }
    size_t op = (size_t)oh * ow * 3;
    for (int f = 0; f < n; f++)
        for (size_t k = 0; k < op; k++) px[f * op + k] = level(c, (int)(k % 3), px[f * op + k]);
    st = vc_vl_patchify(px, n, oh, ow, P, M, T, what, out);
    free(px);
    return st;
}

/* ---- qwen_vl_utils' fetch_video ---- */

#define FRAME_FACTOR 2

vc_status vc_vl_smart_nframes(const vc_vl_video_opts *o, int64_t total, double video_fps, int64_t *n) {
    double nf;
    if (o->nframes > 0) {
        nf = vc_py_round((double)o->nframes / FRAME_FACTOR) * FRAME_FACTOR;
    } else {
        double fps = o->has_fps ? o->fps : 2.0;
        double mn = ceil((double)(o->min_frames > 0 ? o->min_frames : 4) / FRAME_FACTOR) * FRAME_FACTOR;
        double mx = floor((double)(o->max_frames > 0 ? o->max_frames : (total < 768 ? total : 768)) / FRAME_FACTOR) *
                    FRAME_FACTOR;
        nf = (double)total / video_fps * fps;
        nf = fmin(fmin(fmax(nf, mn), mx), (double)total);
        nf = floor(nf / FRAME_FACTOR) * FRAME_FACTOR;
    }
    if (!(nf >= FRAME_FACTOR && nf <= (double)total))
        return vc_fail(VC_ERR_ARG, "nframes should in interval [%d, %lld], but got %.0f", FRAME_FACTOR,
                       (long long)total, nf);
    *n = (int64_t)nf;
    return VC_OK;
}

/* calculate_video_frame_range: the first and last frame of video_start / video_end */
static vc_status frame_range(const vc_vl_video_opts *o, int64_t total, double fps, int64_t *a, int64_t *b) {
    *a = 0, *b = total - 1;
    if (!o->has_start && !o->has_end) return VC_OK;
    double dur = (double)total / fps;
    if (o->has_start) *a = (int64_t)ceil(fmax(0.0, fmin(o->video_start, dur)) * fps);
    if (o->has_end) {
        *b = (int64_t)floor(fmax(0.0, fmin(o->video_end, dur)) * fps);
        if (*b > total - 1) *b = total - 1;
    }
    if (*a >= *b)
        return vc_fail(VC_ERR_ARG, "Invalid time range: start frame %lld exceeds end frame %lld (%lld frames at %g fps)",
                       (long long)*a, (long long)*b, (long long)total, fps);
    return VC_OK;
}

vc_status vc_vl_video_sample(const vc_vl_video_opts *o, int64_t total, double video_fps, int64_t **idx, int64_t *n,
                              int64_t *count) {
    int64_t a, b;
    *idx = NULL, *n = 0;
    if (total < 1 || !(video_fps > 0) || !isfinite(video_fps))
        return vc_fail(VC_ERR_FORMAT, "a video of %lld frames at %g fps", (long long)total, video_fps);
    vc_status st = frame_range(o, total, video_fps, &a, &b);
    if (!st) st = vc_vl_smart_nframes(o, b - a + 1, video_fps, n);
    if (st) return st;
    if (count) *count = b - a + 1;
    if (!(*idx = malloc(sizeof(int64_t) * (size_t)*n))) return VC_ERR_NOMEM;
    /* torch.linspace in float32 (from both ends, as its kernel), then round half to even */
    float s = (float)a, e = (float)b, step = *n > 1 ? (e - s) / (float)(*n - 1) : 0.0f;
    for (int64_t i = 0; i < *n; i++) {
        float v = i < *n / 2 ? s + step * (float)i : e - step * (float)(*n - 1 - i);
        (*idx)[i] = (int64_t)nearbyintf(v);
    }
    return VC_OK;
}

/* qwen_vl_utils' MODEL_SEQ_LEN (environment, default 128000) */
static double model_seq_len(void) {
    const char *e = getenv("MODEL_SEQ_LEN");
    double v = e && *e ? strtod(e, NULL) : 128000.0;
    return isfinite(v) && v > 0 ? floor(v) : 128000.0;
}

vc_status vc_vl_fetch_video_hw(const vc_vl_video_opts *o, int patch, int64_t n, int height, int width, int *out_h,
                               int *out_w) {
    int f = patch * 2;
    double f2 = (double)f * f, mn = o->min_pixels > 0 ? (double)o->min_pixels : 128 * f2;
    double total = o->total_pixels > 0 ? (double)o->total_pixels : model_seq_len() * f2 * 0.9;
    double mx = fmax(fmin(768 * f2, total / (double)n * FRAME_FACTOR), floor(mn * 1.05));
    if (o->max_pixels > 0) mx = fmin((double)o->max_pixels, mx);
    if (o->resized_h > 0 && o->resized_w > 0)
        return vc_qwen_vl_utils_smart_resize(o->resized_h, o->resized_w, f, 4 * f2, 16384 * f2, out_h, out_w);
    return vc_qwen_vl_utils_smart_resize(height, width, f, mn, mx, out_h, out_w);
}

void vc_vl_video_timestamps(const int64_t *idx, int64_t n, double fps, double *ts) {
    for (int64_t i = 0; i < n; i += 2) {
        double a = (double)idx[i] / fps, b = (double)idx[i + 1 < n ? i + 1 : n - 1] / fps;
        ts[i / 2] = (a + b) / 2;
    }
}

/* torchvision's resize of an 8-bit frame: cast to float, interpolated, clamped to [0, 255], rounded half to even */
static vc_status resize_u8(vc_image *f, int w, int h) {
    size_t np = (size_t)f->width * f->height * 3, nq = (size_t)w * h * 3;
    float *x = malloc(sizeof(float) * np), *y = NULL;
    uint8_t *rgb = malloc(nq);
    vc_status st = x && rgb ? VC_OK : VC_ERR_NOMEM;
    for (size_t i = 0; !st && i < np; i++) x[i] = f->rgb[i];
    if (!st) st = resize_float(x, 1, f->height, f->width, h, w, &y);
    for (size_t i = 0; !st && i < nq; i++) rgb[i] = (uint8_t)nearbyintf(fminf(fmaxf(y[i], 0.0f), 255.0f));
    free(x), free(y);
    if (st) return free(rgb), st;
    free(f->rgb);
    f->rgb = rgb, f->width = w, f->height = h;
    return VC_OK;
}

vc_status vc_vl_fetch_resize(vc_image *frames, int n, const vc_vl_video_opts *o, int patch, const char *what) {
    int h, w, h0 = frames[0].height, w0 = frames[0].width;
    vc_status st = vc_vl_fetch_video_hw(o, patch, n, h0, w0, &h, &w);
    if (st) return vc_fail_ctx(st, "%s: fetch_video", what);
    for (int i = 0; i < n; i++) {
        if (frames[i].height != h0 || frames[i].width != w0)
            return vc_fail(VC_ERR_SHAPE, "%s: frame %d is %dx%d, frame 0 %dx%d (a video's frames share one size)", what,
                           i, frames[i].width, frames[i].height, w0, h0);
        if (frames[i].height == h && frames[i].width == w) continue;
        if ((st = resize_u8(&frames[i], w, h))) return vc_fail_ctx(st, "%s: frame %d", what, i);
    }
    return VC_OK;
}

vc_status vc_vl_fetch_frame_list(const vc_image *in, int n, const vc_vl_video_opts *o, int patch, const char *what,
                                 vc_image **out, int *n_out) {
    int m = n + (n & 1);
    vc_image *f = calloc((size_t)(m ? m : 1), sizeof *f);
    if (!f) return VC_ERR_NOMEM;
    /* fetch_image(frame, image_factor): the factor passed as its patch size, so frames are sized in steps of 4 patches */
    vc_vl_fetch_opts fo = { .patch_size = 2 * patch, .min_pixels = o->min_pixels, .max_pixels = o->max_pixels,
                            .resized_h = o->resized_h, .resized_w = o->resized_w };
    vc_status st = n < 1 ? vc_fail(VC_ERR_FORMAT, "%s: a video with no frames", what) : VC_OK;
    for (int i = 0; !st && i < n; i++) {
        char fw[600];
        snprintf(fw, sizeof fw, "%s: frame %d", what, i);
        st = vc_vl_fetch_image(&in[i], &fo, fw, &f[i]);
    }
    if (!st && m > n) { /* the last frame repeated to an even count */
        f[n] = f[n - 1];
        if (!(f[n].rgb = malloc((size_t)f[n - 1].width * f[n - 1].height * 3))) st = VC_ERR_NOMEM;
        else memcpy(f[n].rgb, f[n - 1].rgb, (size_t)f[n - 1].width * f[n - 1].height * 3);
    }
    if (!st) st = vc_vl_fetch_resize(f, m, o, patch, what);
    if (st) {
        for (int i = 0; i < m; i++) vc_image_free(&f[i]);
        free(f);
        return st;
    }
    *out = f, *n_out = m;
    return VC_OK;
}
