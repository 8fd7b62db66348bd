/* Pillow's BICUBIC (and BILINEAR) resize of an 8-bit RGB image, bit for bit (libImaging/Resample.c): a separable convolution,
 * horizontal pass then vertical pass, the filter's support widened by the downscale factor, each output pixel's
 * weights normalised to sum 1 in double, then turned into 22-bit fixed point and accumulated in int from a half
 * (rounding), the result clipped to [0, 255]. A pass whose size is unchanged is skipped (not an identity
 * convolution: that would round differently nowhere, but it is what Pillow does and costs nothing).
 * The pass order is Pillow 13's: vertical first when the height shrinks by more than twice what the width does
 * (Pillow PR #9549, "If height is scaled down significantly more than width, resize vertically first"; the
 * condition was read off Pillow 13.0.0's outputs, 0 disagreements in 1476 random resizes, and the 8-bit rounding
 * between the passes makes the order visible). Pillow 12.1 and older always go horizontal first, 12.2 / 12.3 only
 * for images over 100 times taller than wide.
 * torchvision's antialiased resize of a uint8 image (torch's AVX2 kernel, which transformers 5's torchvision image
 * processors run) is the same convolution with the weights in 16-bit fixed point: each axis's precision the most bits
 * (up to 22) that keep its largest weight under 2^15, and always the horizontal pass first (vc_image_resize_tv; bit for
 * bit against torch 2.15's F.interpolate(antialias=True) on x86-64 with AVX2, where torch runs that kernel).
 * This file is compiled with -ffp-contract=off (CMakeLists.txt): a fused multiply-add in the weights' arithmetic
 * would move a weight by an ulp and, rarely, an output level by one. */
#include "verlc/image.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)

/* Pillow's bicubic_filter with a = -0.5 (Keys' cubic convolution) */
static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* Pillow's bilinear_filter (a triangle of support 1) */
static double bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* precompute_coeffs + normalize_coeffs_8bpc: for each output index its first input index (bounds[2i]), its count of
 * inputs (bounds[2i + 1]) and ksize fixed-point weights, for Pillow's filter `filter` (2 BILINEAR, 3 BICUBIC), at
 * *prec bits: Pillow's 22, or with tv torch's (the most that keep the largest weight under 2^15). Returns ksize, 0 when
 * out of memory. */
static int coeffs(int in_size, int out_size, int filter, int tv, int *prec, int **bounds_out, int32_t **kk_out) {
    float in0 = 0.0f, in1 = (float)in_size; /* Pillow's box is float */
    double scale = (double)(in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double (*fn)(double) = filter == 2 ? bilinear : bicubic;
    double support = (filter == 2 ? 1.0 : 2.0) * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *kk = malloc(sizeof *kk * (size_t)out_size * (size_t)ksize);
    int *bounds = malloc(sizeof *bounds * 2 * (size_t)out_size);
    int32_t *fixed = malloc(sizeof *fixed * (size_t)out_size * (size_t)ksize);
    if (!kk || !bounds || !fixed) {
        free(kk), free(bounds), free(fixed);
        return 0;
    }
    double inv_filterscale = 1.0 / filterscale;
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale, ww = 0.0;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = kk + (size_t)xx * (size_t)ksize;
        int x = 0;
        for (; x < xmax; x++) {
            double w = fn((x + xmin - center + 0.5) * inv_filterscale);
            k[x] = w;
            ww += w;
        }
        if (ww != 0.0)
            for (x = 0; x < xmax; x++) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        bounds[xx * 2] = xmin, bounds[xx * 2 + 1] = xmax;
    }
    double w_max = kk[0];
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++) w_max = kk[i] > w_max ? kk[i] : w_max;
    int p = PRECISION_BITS;
    if (tv)
        for (p = 0; p < 22 && (int)(0.5 + w_max * (1 << (p + 1))) < (1 << 15); p++) {}
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++)
        fixed[i] = kk[i] < 0 ? (int32_t)(-0.5 + kk[i] * (1 << p)) : (int32_t)(0.5 + kk[i] * (1 << p));
    *prec = p;
    free(kk);
    *bounds_out = bounds, *kk_out = fixed;
    return ksize;
}

/* clip8: the sum's integer part at p bits, clipped (Pillow's lookup table spans -640..639, which sums never leave) */
static inline uint8_t clip8(int32_t ss, int p) {
    int32_t v = ss >> p; /* arithmetic shift, as Pillow's int on gcc/clang */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* rows [y0, y0 + rows) of src (width sw) into dst (width dw) */
static void pass_horizontal(const uint8_t *src, int sw, int y0, int rows, uint8_t *dst, int dw, int ksize,
                            const int *bounds, const int32_t *kk, int p) {
    for (int yy = 0; yy < rows; yy++) {
        const uint8_t *in = src + (size_t)(yy + y0) * (size_t)sw * 3;
        uint8_t *out = dst + (size_t)yy * (size_t)dw * 3;
        for (int xx = 0; xx < dw; xx++) {
            int xmin = bounds[xx * 2], xmax = bounds[xx * 2 + 1];
            const int32_t *k = kk + (size_t)xx * (size_t)ksize;
            int32_t s0 = 1 << (p - 1), s1 = s0, s2 = s0;
            for (int x = 0; x < xmax; x++) {
                const uint8_t *p = in + (size_t)(x + xmin) * 3;
                s0 += p[0] * k[x], s1 += p[1] * k[x], s2 += p[2] * k[x];
            }
            out[xx * 3] = clip8(s0, p), out[xx * 3 + 1] = clip8(s1, p), out[xx * 3 + 2] = clip8(s2, p);
        }
    }
}

static void pass_vertical(const uint8_t *src, int w, uint8_t *dst, int dh, int ksize, const int *bounds,
                          const int32_t *kk, int p) {
    size_t stride = (size_t)w * 3;
    for (int yy = 0; yy < dh; yy++) {
        int ymin = bounds[yy * 2], ymax = bounds[yy * 2 + 1];
        const int32_t *k = kk + (size_t)yy * (size_t)ksize;
        uint8_t *out = dst + (size_t)yy * stride;
        for (size_t i = 0; i < stride; i++) {
            int32_t ss = 1 << (p - 1);
            for (int y = 0; y < ymax; y++) ss += src[(size_t)(y + ymin) * stride + i] * k[y];
            out[i] = clip8(ss, p);
        }
    }
}

vc_status vc_image_resize_bicubic(const vc_image *in, int out_w, int out_h, vc_image *out) {
    return vc_image_resize(in, out_w, out_h, 3, out);
}

static vc_status resize(const vc_image *in, int out_w, int out_h, int filter, int tv, vc_image *out);

vc_status vc_image_resize(const vc_image *in, int out_w, int out_h, int filter, vc_image *out) {
    return resize(in, out_w, out_h, filter, 0, out);
}

vc_status vc_image_resize_tv(const vc_image *in, int out_w, int out_h, int filter, vc_image *out) {
    return resize(in, out_w, out_h, filter, 1, out);
}

static vc_status resize(const vc_image *in, int out_w, int out_h, int filter, int tv, vc_image *out) {
    memset(out, 0, sizeof *out);
    if (filter != 2 && filter != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "image resize: Pillow filter %d (2, BILINEAR, and 3, BICUBIC, are built)",
                       filter);
    if (out_w <= 0 || out_h <= 0) return vc_fail(VC_ERR_ARG, "image resize to %dx%d: height and width must be > 0",
                                                 out_w, out_h);
    if ((int64_t)out_w * out_h > VC_IMAGE_MAX_PIXELS)
        return vc_fail(VC_ERR_ARG, "image resize to %dx%d: over %lld pixels", out_w, out_h, VC_IMAGE_MAX_PIXELS);
    int need_h = out_w != in->width, need_v = out_h != in->height;
    int vertical_first = !tv && out_h < in->height && (int64_t)in->height - out_h > 2 * ((int64_t)in->width - out_w);
    int pv = 0, ph = 0;
    int *bv = NULL, *bh = NULL;
    int32_t *kv = NULL, *kh = NULL;
    uint8_t *tmp = NULL, *res = NULL;
    vc_status st = VC_OK;
    int ksv = coeffs(in->height, out_h, filter, tv, &pv, &bv, &kv);
    if (!ksv) return vc_fail(VC_ERR_NOMEM, "image resize to %dx%d", out_w, out_h);
    const uint8_t *cur = in->rgb;
    int cur_w = in->width;
    if (vertical_first && need_h) {
        int ksh = coeffs(in->width, out_w, filter, tv, &ph, &bh, &kh);
        tmp = malloc((size_t)in->width * 3 * (size_t)out_h);
        res = malloc((size_t)out_w * 3 * (size_t)out_h);
        if (!ksh || !tmp || !res) { st = vc_fail(VC_ERR_NOMEM, "image resize to %dx%d", out_w, out_h); goto out; }
        pass_vertical(in->rgb, in->width, tmp, out_h, ksv, bv, kv, pv);
        pass_horizontal(tmp, in->width, 0, out_h, res, out_w, ksh, bh, kh, ph);
        need_h = need_v = 0;
    } else if (need_h) {
        /* only the input rows the vertical pass reads */
        int y_first = bv[0], y_last = bv[out_h * 2 - 2] + bv[out_h * 2 - 1];
        int ksh = coeffs(in->width, out_w, filter, tv, &ph, &bh, &kh);
        tmp = malloc((size_t)out_w * 3 * (size_t)(y_last - y_first));
        if (!ksh || !tmp) { st = vc_fail(VC_ERR_NOMEM, "image resize to %dx%d", out_w, out_h); goto out; }
        for (int i = 0; i < out_h; i++) bv[i * 2] -= y_first;
        pass_horizontal(in->rgb, in->width, y_first, y_last - y_first, tmp, out_w, ksh, bh, kh, ph);
        cur = tmp, cur_w = out_w;
        if (!need_v) { res = tmp, tmp = NULL; }
    }
    if (need_v) {
        res = malloc((size_t)cur_w * 3 * (size_t)out_h);
        if (!res) { st = vc_fail(VC_ERR_NOMEM, "image resize to %dx%d", out_w, out_h); goto out; }
        pass_vertical(cur, cur_w, res, out_h, ksv, bv, kv, pv);
    }
    if (!res) { /* neither pass: a copy */
        size_t nb = (size_t)in->width * (size_t)in->height * 3;
        res = malloc(nb);
        if (!res) { st = vc_fail(VC_ERR_NOMEM, "image copy %dx%d", out_w, out_h); goto out; }
        memcpy(res, in->rgb, nb);
    }
    out->rgb = res, res = NULL;
    out->width = out_w, out->height = out_h, out->mode = VC_IMG_RGB, out->transparent = in->transparent;
    out->has_key = in->has_key; /* Image.resize keeps image.info's transparency */
    memcpy(out->key, in->key, 3);
out:
    free(bv), free(kv), free(bh), free(kh), free(tmp), free(res);
    return st;
}
