/* Rows with images, shared by the RL prompt dataset and SFT (see vl_rows.h): verl's _build_messages splits each
 * message's content on "<image>" / "<video>" / "<audio>" into a content list, every image goes through qwen_vl_utils'
 * fetch_image and the image processor (verl/utils/dataset/vision_utils.py process_image), and the processor repeats
 * each "<|image_pad|>" grid_t * grid_h * grid_w / merge_size^2 times before tokenizing. */
#include "data/vl_rows.h"
#include "verlc/data.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *item(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }
static int present(const cJSON *x) { return x && !cJSON_IsNull(x); }

/* ---- one image entry of a row ---- */

static vc_status opt_int(const char *where, const char *key, int k, const cJSON *obj, const char *name,
                         int64_t *out) {
    const cJSON *x = item(obj, name);
    if (!present(x)) return VC_OK; /* null: fetch_image's default, as ele.get(name) gives None */
    if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 1e15 || x->valuedouble != floor(x->valuedouble))
        return vc_fail(VC_ERR_FORMAT, "%s: %s[%d].%s must be a positive integer", where, key, k, name);
    *out = (int64_t)x->valuedouble;
    return VC_OK;
}

static vc_status image_options(const char *where, const char *key, int k, const cJSON *v, vc_rl_image *im) {
    int64_t rh = 0, rw = 0;
    vc_status st = opt_int(where, key, k, v, "min_pixels", &im->min_pixels);
    if (!st) st = opt_int(where, key, k, v, "max_pixels", &im->max_pixels);
    if (!st) st = opt_int(where, key, k, v, "resized_height", &rh);
    if (!st) st = opt_int(where, key, k, v, "resized_width", &rw);
    if (st) return st;
    if (rh > 1000000 || rw > 1000000)
        return vc_fail(VC_ERR_FORMAT, "%s: %s[%d]: resized_height / resized_width of %lldx%lld", where, key, k,
                       (long long)rw, (long long)rh);
    if (rh && rw) im->resized_h = (int)rh, im->resized_w = (int)rw; /* fetch_image needs both */
    return VC_OK;
}

/* the entry's source: a path string, or an object's bytes (a data URI) / image / image_url / path (the Hugging Face
 * datasets Image feature's {"bytes": null, "path": ...}) */
static vc_status image_source(const char *w, const cJSON *v, const char **src) {
    *src = NULL;
    if (cJSON_IsString(v)) *src = v->valuestring;
    else if (cJSON_IsObject(v)) {
        const cJSON *b = item(v, "bytes");
        const char *names[] = { "image", "image_url", "path" };
        if (present(b)) {
            if (!cJSON_IsString(b) || strncmp(b->valuestring, "data:", 5))
                return vc_fail(VC_ERR_FORMAT, "%s.bytes must be an image's bytes (binary in Parquet, a "
                               "base64 data URI in JSON)", w);
            *src = b->valuestring;
        }
        for (int n = 0; !*src && n < 3; n++) {
            const cJSON *s = item(v, names[n]);
            if (!present(s)) continue;
            if (!cJSON_IsString(s))
                return vc_fail(VC_ERR_FORMAT, "%s.%s must be a string (a path, file:// or data URI)",
                               w, names[n]);
            *src = s->valuestring;
        }
        if (!*src)
            return vc_fail(VC_ERR_FORMAT, "%s has none of bytes, image, image_url or path", w);
    } else
        return vc_fail(VC_ERR_FORMAT, "%s must be a path or an object with bytes / image / path",
                       w);
    if (!**src) return vc_fail(VC_ERR_FORMAT, "%s is an empty path", w);
    if (!strncmp(*src, "http://", 7) || !strncmp(*src, "https://", 8))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: %.200s: images from http(s) URLs are not fetched "
                       "(verlc reads local files and data URIs only)", w, *src);
    if (!strncmp(*src, "data:", 5) && !strstr(*src, ";base64,"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: a data URI without base64 data", w);
    return VC_OK;
}

/* decodes an image's source (a base64 data URI, a file:// URI or a path) as Pillow opens it and fetch_image's
 * to_rgb converts it */
static vc_status decode_source(const char *src, const char *what, vc_image *out) {
    memset(out, 0, sizeof *out);
    if (!strncmp(src, "data:", 5)) {
        const char *b = strstr(src, ";base64,") + 8;
        uint8_t *bytes = NULL;
        size_t n = 0;
        vc_status st = vc_base64_decode(b, strlen(b), what, &bytes, &n);
        if (!st) st = vc_image_decode(bytes, n, what, VC_ALPHA_QWEN_VL_UTILS, out);
        free(bytes);
        return st;
    }
    vc_status st = vc_image_load(!strncmp(src, "file://", 7) ? src + 7 : src, VC_ALPHA_QWEN_VL_UTILS, out);
    return st ? vc_fail_ctx(st, "%s", what) : VC_OK;
}

vc_status vc_vl_value_source(const cJSON *v, const char *what, const char **src) { return image_source(what, v, src); }

vc_status vc_vl_decode_value(const cJSON *v, const char *what, vc_image *out) {
    const char *src = NULL;
    memset(out, 0, sizeof *out);
    vc_status st = image_source(what, v, &src);
    return st ? st : decode_source(src, what, out);
}

static vc_vl_fetch_opts fetch_opts(int patch, const vc_rl_image *im) {
    vc_vl_fetch_opts f = { .patch_size = patch, .min_pixels = im->min_pixels, .max_pixels = im->max_pixels,
                           .resized_h = im->resized_h, .resized_w = im->resized_w };
    return f;
}

/* the grid the processor gives the image after fetch_image: its sizes alone decide it (vc_vl_verl_image's steps) */
static vc_status image_grid(const vc_vl_image_config *c, int patch, const vc_image *img, const char *what,
                            vc_rl_image *im) {
    vc_vl_fetch_opts f = fetch_opts(patch, im);
    int factor = f.patch_size * 2, fh, fw, h, w; /* qwen_vl_utils' SPATIAL_MERGE_SIZE 2 */
    int64_t f2 = (int64_t)factor * factor;
    int64_t mn = f.min_pixels > 0 ? f.min_pixels : 4 * f2, mx = f.max_pixels > 0 ? f.max_pixels : 16384 * f2;
    vc_status st = f.resized_h > 0 && f.resized_w > 0
                       ? vc_qwen_vl_utils_smart_resize(f.resized_h, f.resized_w, factor, 4 * f2, 16384 * f2, &fh, &fw)
                       : vc_qwen_vl_utils_smart_resize(img->height, img->width, factor, mn, mx, &fh, &fw);
    if (st) return vc_fail_ctx(st, "%s: fetch_image", what);
    const int P = c->patch_size, M = c->merge_size;
    if (c->do_resize && (st = vc_vl_processor_resize(c, fh, fw, &h, &w)))
        return vc_fail_ctx(st, "%s: image processor", what);
    if (!c->do_resize) {
        h = fh, w = fw;
        if (h % (P * M) || w % (P * M))
            return vc_fail(VC_ERR_SHAPE, "%s: %dx%d is not a multiple of patch_size * merge_size = %d and do_resize "
                           "is false", what, w, h, P * M);
    }
    im->grid[0] = 1, im->grid[1] = h / P, im->grid[2] = w / P;
    im->tokens = (int64_t)(h / P) * (w / P) / ((int64_t)M * M);
    return VC_OK;
}

vc_status vc_vl_parse_images(const cJSON *imgs, const vc_vl_image_config *c, int patch, const char *where,
                             const char *key, vc_rl_image **out) {
    int n = cJSON_GetArraySize(imgs);
    vc_rl_image *ims = vc_calloc((size_t)(n ? n : 1), sizeof *ims);
    if (!ims) return VC_ERR_NOMEM;
    *out = ims;
    if (patch <= 0) patch = c->patch_size;
    char what[512];
    for (int k = 0; k < n; k++) {
        const cJSON *v = cJSON_GetArrayItem(imgs, k);
        vc_rl_image *im = &ims[k];
        snprintf(what, sizeof what, "%s: %s[%d]", where, key, k);
        vc_status st = image_source(what, v, &im->src);
        if (!st && cJSON_IsObject(v)) st = image_options(where, key, k, v, im);
        if (st) return st;
        vc_image img;
        if ((st = decode_source(im->src, what, &img))) return st;
        st = image_grid(c, patch, &img, what, im);
        im->width = img.width, im->height = img.height;
        vc_image_free(&img);
        if (st) return st;
    }
    return VC_OK;
}

/* ---- messages with content lists (verl's _build_messages) ---- */

static vc_status add_text(cJSON *list, const char *s, size_t n) {
    if (!n) return VC_OK; /* empty segments dropped */
    char *t = vc_malloc(n + 1);
    if (!t) return VC_ERR_NOMEM;
    memcpy(t, s, n);
    t[n] = 0;
    cJSON *e = cJSON_CreateObject();
    int ok = e && cJSON_AddStringToObject(e, "type", "text") && cJSON_AddStringToObject(e, "text", t);
    free(t);
    if (!ok) return cJSON_Delete(e), VC_ERR_NOMEM;
    cJSON_AddItemToArray(list, e);
    return VC_OK;
}

/* content split on the markers into list; *used counts the images taken */
static vc_status split_content(const char *where, const char *key, const char *s, int n_images, int *used,
                               cJSON *list) {
    static const char *marks[] = { "<image>", "<video>", "<audio>" };
    vc_status st = VC_OK;
    while (!st) {
        const char *at = NULL;
        int which = -1;
        for (int m = 0; m < 3; m++) {
            const char *f = strstr(s, marks[m]);
            if (f && (!at || f < at)) at = f, which = m;
        }
        if (!at) return add_text(list, s, strlen(s));
        if ((st = add_text(list, s, (size_t)(at - s)))) break;
        if (which > 0)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: a %s marker: %s inputs are not built", where, marks[which],
                           which == 1 ? "video" : "audio");
        if (*used >= n_images)
            return vc_fail(VC_ERR_FORMAT, "%s: more <image> markers in the messages than the %d images of %s "
                           "(verl: image_offset %d >= len(images) %d)", where, n_images, key, *used, n_images);
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddStringToObject(e, "type", "image")) return cJSON_Delete(e), VC_ERR_NOMEM;
        cJSON_AddItemToArray(list, e);
        (*used)++;
        s = at + strlen(marks[0]);
    }
    return st;
}

vc_status vc_vl_build_messages(const cJSON *msgs, int n_images, const char *where, const char *key, cJSON **out) {
    cJSON *arr = cJSON_Duplicate(msgs, 1);
    if (!arr) return VC_ERR_NOMEM;
    int used = 0;
    vc_status st = VC_OK;
    for (cJSON *m = arr->child; !st && m; m = m->next) {
        const cJSON *c = cJSON_IsObject(m) ? item(m, "content") : NULL;
        if (!cJSON_IsString(c)) continue; /* contents that are already lists are kept, as verl keeps them */
        cJSON *list = cJSON_CreateArray();
        if (!list) st = VC_ERR_NOMEM;
        else if ((st = split_content(where, key, c->valuestring, n_images, &used, list))) cJSON_Delete(list);
        else cJSON_ReplaceItemInObjectCaseSensitive(m, "content", list);
    }
    if (!st && used != n_images)
        st = vc_fail(VC_ERR_FORMAT, "%s: %d <image> markers in the messages for the %d images of %s (verl: "
                     "image_offset %d != len(images) %d)", where, used, n_images, key, used, n_images);
    if (st) cJSON_Delete(arr);
    else *out = arr;
    return st;
}

/* ---- the rendered text with each pad token repeated ---- */

vc_status vc_vl_expand_pads(const char *text, const char *pad, const vc_rl_image *im, int n, int exact,
                            const char *where, char **out, int *used) {
    size_t pl = strlen(pad), len = strlen(text), count = 0, extra = 0;
    *out = NULL;
    for (const char *s = strstr(text, pad); s; s = strstr(s + pl, pad)) count++;
    if (exact ? count != (size_t)n : count > (size_t)n)
        return vc_fail(VC_ERR_FORMAT, "%s: the rendered prompt holds %zu %s tokens for %d images (transformers: "
                       "the number of %s tokens in the prompts should be the same as the number of images passed)",
                       where, count, pad, n, pad);
    for (size_t k = 0; k < count; k++) extra += (size_t)(im[k].tokens - 1) * pl;
    char *o = vc_malloc(len + extra + 1), *w = o;
    if (!o) return VC_ERR_NOMEM;
    const char *s = text;
    for (size_t k = 0; k < count; k++) {
        const char *at = strstr(s, pad);
        memcpy(w, s, (size_t)(at - s)), w += at - s;
        for (int64_t t = 0; t < im[k].tokens; t++) memcpy(w, pad, pl), w += pl;
        s = at + pl;
    }
    strcpy(w, s);
    *out = o;
    if (used) *used = (int)count;
    return VC_OK;
}

/* ---- pixels on demand ---- */

vc_status vc_vl_images_pixels(const vc_vl_image_config *c, int patch, const vc_rl_image *im, int n, const char *where,
                              float **pixels, int32_t **grid, int64_t *row) {
    *pixels = NULL, *grid = NULL, *row = 0;
    int64_t cols = 3LL * c->temporal_patch_size * c->patch_size * c->patch_size, rows = 0;
    for (int k = 0; k < n; k++) rows += (int64_t)im[k].grid[0] * im[k].grid[1] * im[k].grid[2];
    float *px = vc_malloc(sizeof(float) * (size_t)(rows ? rows : 1) * (size_t)cols);
    int32_t *g = vc_malloc(sizeof(int32_t) * 3 * (size_t)(n ? n : 1));
    vc_status st = px && g ? VC_OK : VC_ERR_NOMEM;
    int64_t at = 0;
    char what[512];
    for (int k = 0; !st && k < n; k++) {
        snprintf(what, sizeof what, "%s: image %d", where, k);
        vc_image img;
        vc_vl_pixels out = { 0 };
        vc_vl_fetch_opts f = fetch_opts(patch > 0 ? patch : c->patch_size, &im[k]);
        if ((st = decode_source(im[k].src, what, &img))) break;
        st = vc_vl_verl_image(c, &img, &f, what, &out);
        vc_image_free(&img);
        if (!st && (out.grid_t != im[k].grid[0] || out.grid_h != im[k].grid[1] || out.grid_w != im[k].grid[2] ||
                    out.cols != cols || at + out.rows > rows))
            st = vc_fail(VC_ERR_FORMAT, "%s: now a grid of %dx%dx%d patches, %dx%dx%d when the dataset was loaded (the "
                         "file changed?)", what, out.grid_t, out.grid_h, out.grid_w, im[k].grid[0], im[k].grid[1],
                         im[k].grid[2]);
        if (!st) {
            memcpy(px + at * cols, out.data, sizeof(float) * (size_t)out.rows * (size_t)cols);
            memcpy(g + 3 * k, im[k].grid, sizeof im[k].grid);
            at += out.rows;
        }
        vc_vl_pixels_free(&out);
    }
    if (st) {
        free(px), free(g);
        return st;
    }
    *pixels = px, *grid = g, *row = cols;
    return VC_OK;
}
