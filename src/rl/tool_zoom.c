/* verl's ImageZoomInTool (verl/tools/image_zoom_in_tool.py, the DeepEyes recipe's tool): the row's image
 * (create_kwargs.image) through qwen_vl_utils' fetch_image, a bounding box [x1, y1, x2, y2] clamped to it and grown
 * about its centre to 28 pixels a side when smaller (_maybe_resize_bbox, in the same double arithmetic), the region
 * cut out as PIL's Image.crop does, and the crop returned to the model as an image with a line of text. A call
 * without a valid box gets verl's error text and the tool reward -0.05. */
#include "agent_internal.h"
#include "data/vl_rows.h"
#include "verlc/image.h"
#include "prm800k.h"
#include "py_text.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_DIM 28 /* ImageZoomInTool.MIN_DIMENSION */

/* Python's max(a, b) / min(a, b): the first argument unless the second compares greater / smaller (NaN loses) */
static double py_max(double a, double b) { return b > a ? b : a; }
static double py_min(double a, double b) { return b < a ? b : a; }

static int valid_box(double l, double t, double r, double b) {
    if (!(l < r && t < b)) return 0;
    double h = b - t, w = r - l;
    if (py_min(h, w) == 0) return 0;
    return !(py_max(h, w) / py_min(h, w) > 100);
}

int rl_zoom_resize_bbox(const double bbox[4], int image_w, int image_h, double out[4]) {
    double W = image_w, H = image_h;
    double l = py_max(0.0, bbox[0]), t = py_max(0.0, bbox[1]), r = py_min(W, bbox[2]), b = py_min(H, bbox[3]);
    if (!valid_box(l, t, r, b)) return 0;
    double box[4] = { l, t, r, b }, h = b - t, w = r - l;
    if (h < MIN_DIM || w < MIN_DIM) { /* grown about the centre, its smaller side to MIN_DIM, kept inside */
        double cx = (l + r) / 2.0, cy = (t + b) / 2.0, md = py_min(h, w);
        if (md == 0) return 0;
        double ratio = MIN_DIM / md, tw = w * ratio, th = h * ratio;
        if (tw > W) {
            double s = W / tw;
            tw = W;
            th *= s;
        }
        if (th > H) {
            double s = H / th;
            th = H;
            tw *= s;
        }
        double nl = cx - tw / 2.0, nt = cy - th / 2.0;
        if (nl < 0) nl = 0;
        if (nt < 0) nt = 0;
        if (nl + tw > W) nl = W - tw;
        if (nt + th > H) nt = H - th;
        box[0] = floor(nl), box[1] = floor(nt), box[2] = ceil(nl + tw), box[3] = ceil(nt + th);
    }
    if (!valid_box(box[0], box[1], box[2], box[3])) return 0;
    if (floor(box[3]) - floor(box[1]) < MIN_DIM || floor(box[2]) - floor(box[0]) < MIN_DIM) return 0;
    memcpy(out, box, sizeof box);
    return 1;
}

int64_t rl_zoom_patches_bound(const vc_vl_image_config *c, int src_w, int src_h) {
    int H, W; /* the tool's fetch_image: qwen_vl_utils' defaults (factor 28, 4 to 16384 steps of 28 x 28) */
    if (vc_qwen_vl_utils_smart_resize(src_h, src_w, 28, 4 * 784, 16384 * 784, &H, &W)) {
        vc_clear_error(); /* the tool's call names it when it comes */
        return 0;
    }
    /* a crop is at most H x W (the box lies in the image) and at least 27 a side (28 between the box's floors, one
     * less once PIL rounds its corners); the processor's rounding adds half a step to a side, and its area stays
     * within max_pixels (GLM-4V's over its temporal frames) unless raised to min_pixels, where the rounding up of
     * each side adds at most f beta (h + w) + f^2, beta (h + w) <= sqrt(min) (sqrt(r) + 1 / sqrt(r)) for the crop's
     * aspect ratio r (at most the longer side over 27, and 200: smart_resize refuses more) */
    double f = (double)c->patch_size * c->merge_size, t = c->glm ? c->temporal_patch_size : 1;
    double mx = (double)c->max_pixels / t, mn = (double)c->min_pixels / t, r = fmin(200.0, fmax(H, W) / 27.0);
    double area = fmin(((double)H + f / 2) * ((double)W + f / 2), mx);
    double up = mn + f * sqrt(mn) * (sqrt(r) + 1 / sqrt(r)) + f * f;
    area = fmax(fmax(area, up), f * f);
    return (int64_t)ceil(area / ((double)c->patch_size * c->patch_size));
}

vc_status rl_zoom_crop(const vc_image *in, const double box[4], vc_image *out) {
    /* PIL's _crop: each coordinate round()ed (half to even), the region outside the image black */
    double x0 = nearbyint(box[0]), y0 = nearbyint(box[1]), x1 = nearbyint(box[2]), y1 = nearbyint(box[3]);
    *out = *in;
    out->rgb = NULL;
    if (!(x1 > x0 && y1 > y0) || x1 - x0 > 1e6 || y1 - y0 > 1e6) return vc_fail(VC_ERR_ARG, "crop of an empty box");
    int w = (int)(x1 - x0), h = (int)(y1 - y0), X0 = (int)x0, Y0 = (int)y0;
    if (!(out->rgb = vc_calloc((size_t)w * (size_t)h * 3, 1))) return VC_ERR_NOMEM;
    out->width = w, out->height = h;
    for (int y = 0; y < h; y++) {
        int sy = Y0 + y;
        if (sy < 0 || sy >= in->height) continue;
        for (int x = 0; x < w; x++) {
            int sx = X0 + x;
            if (sx >= 0 && sx < in->width)
                memcpy(out->rgb + ((size_t)y * w + x) * 3, in->rgb + ((size_t)sy * in->width + sx) * 3, 3);
        }
    }
    return VC_OK;
}

/* Python's truth of a JSON value */
static int truthy(const cJSON *v) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsString(v)) return v->valuestring[0] != 0;
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return v->child != NULL;
    return 1;
}

/* float(x) of one coordinate; 0 with Python's error text in err when it raises */
static int py_to_float(const cJSON *v, double *out, char *err, size_t cap) {
    if (cJSON_IsNumber(v)) return *out = v->valuedouble, 1;
    if (cJSON_IsBool(v)) return *out = cJSON_IsTrue(v), 1;
    if (cJSON_IsString(v)) {
        if (vc_py_float(v->valuestring, out)) return 1;
        char *r = pt_py_repr(v, 0);
        snprintf(err, cap, "could not convert string to float: %.300s", r ? r : "''");
        free(r);
        return 0;
    }
    snprintf(err, cap, "float() argument must be a string or a real number, not '%s'",
             cJSON_IsNull(v) ? "NoneType" : cJSON_IsArray(v) ? "list" : "dict");
    return 0;
}

static vc_status reply(char **text, double *reward, double r, const char *s) {
    *reward = r;
    return (*text = vc_strdup(s)) ? VC_OK : VC_ERR_NOMEM;
}

/* len() of a value, -1 when it has none */
static int py_len(const cJSON *v) {
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return cJSON_GetArraySize(v);
    if (cJSON_IsString(v)) {
        int n = 0;
        for (const char *s = v->valuestring; *s; s++) n += (*s & 0xC0) != 0x80;
        return n;
    }
    return -1;
}

vc_status rl_zoom_tool(const cJSON *args, const cJSON *ck, const char *where, char **text, double *reward,
                       vc_image *crop) {
    memset(crop, 0, sizeof *crop);
    *text = NULL;
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(ck, "image");
    if (!img || cJSON_IsNull(img)) /* create() raises: the agent loop's text, reward 0 */
        return reply(text, reward, 0.0, "Error when executing tool: Missing required 'image' parameter in kwargs");
    vc_image src, fetched;
    char what[600];
    snprintf(what, sizeof what, "%s: create_kwargs.image", where);
    vc_status st = vc_vl_decode_value(img, what, &src);
    if (st) return st; /* a row whose image cannot be read is the data's fault: named, not shown to the model */
    vc_vl_fetch_opts fo = { .patch_size = 14 }; /* fetch_image's default image_patch_size */
    st = vc_vl_fetch_image(&src, &fo, what, &fetched);
    vc_image_free(&src);
    if (st) return st;
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(args, "bbox_2d"), *label = cJSON_GetObjectItemCaseSensitive(args, "label");
    char err[400];
    double box[4], out[4];
    if (!truthy(bb) || py_len(bb) != 4) {
        vc_image_free(&fetched);
        return reply(text, reward, -0.05, "Error: bbox_2d parameter is missing or not a list of 4 numbers.");
    }
    /* `left, top, right, bottom = bbox_2d` unpacks a list's items, a dict's keys or a string's characters */
    cJSON part[4];
    const cJSON *item[4];
    char ch[4][8];
    const char *s = cJSON_IsString(bb) ? bb->valuestring : NULL;
    const cJSON *e = cJSON_IsString(bb) ? NULL : bb->child;
    for (int i = 0; i < 4; i++) {
        if (s) { /* one UTF-8 character */
            size_t k = 1;
            while ((s[k] & 0xC0) == 0x80) k++;
            snprintf(ch[i], sizeof ch[i], "%.*s", (int)k, s);
            s += k;
            part[i] = (cJSON){ .type = cJSON_String, .valuestring = ch[i] };
            item[i] = &part[i];
        } else {
            part[i] = (cJSON){ .type = cJSON_String, .valuestring = e->string };
            item[i] = cJSON_IsObject(bb) ? &part[i] : e;
            e = e->next;
        }
    }
    int ok = 1;
    for (int i = 0; ok && i < 4; i++) ok = py_to_float(item[i], &box[i], err, sizeof err);
    if (!ok) {
        char msg[480];
        snprintf(msg, sizeof msg, "Error processing image zoom-in: %s", err);
        vc_image_free(&fetched);
        return reply(text, reward, -0.05, msg);
    }
    char *bs = pt_py_repr(bb, 1), *ls = truthy(label) ? pt_py_repr(label, 1) : NULL; /* f"{bbox_2d}", f"{label}" */
    size_t cap = (bs ? strlen(bs) : 0) + (ls ? strlen(ls) : 0) + 128;
    char *m = bs && (ls || !truthy(label)) ? vc_malloc(cap) : NULL;
    if (!m) st = VC_ERR_NOMEM;
    else if (!rl_zoom_resize_bbox(box, fetched.width, fetched.height, out)) {
        snprintf(m, cap, "Error: The specified bounding box %s is invalid or results in a crop smaller than the "
                 "minimum size of %dx%d.", bs, MIN_DIM, MIN_DIM);
        st = reply(text, reward, -0.05, m);
    } else if (!(st = rl_zoom_crop(&fetched, out, crop))) {
        snprintf(m, cap, "Zoomed in on the image to the region %s%s%s.", bs, ls ? " with label " : "", ls ? ls : "");
        st = reply(text, reward, 0.0, m);
    }
    free(m), free(bs), free(ls);
    vc_image_free(&fetched);
    if (st) vc_image_free(crop);
    return st;
}
