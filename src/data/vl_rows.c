/* Rows with images, shared by the RL prompt dataset and SFT (see vl_rows.h): verl's _build_messages splits each
 * message's content on "<image>" / "<video>" / "<audio>" into a content list, every image goes through qwen_vl_utils'
 * fetch_image and the image processor (verl/utils/dataset/vision_utils.py process_image), and the processor repeats
 * each "<|image_pad|>" grid_t * grid_h * grid_w / merge_size^2 times before tokenizing. */
#include "data/vl_rows.h"
#include "io/url_fetch.h"
#include "verlc/data.h"
#include "verlc/image.h"
#include "verlc/report.h"
#include "verlc/tokenizer.h"
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
    const cJSON *pil = cJSON_GetObjectItemCaseSensitive(v, "pil"), *mode = cJSON_GetObjectItemCaseSensitive(v, "pil_mode");
    if (pil && !cJSON_IsBool(pil))
        return vc_fail(VC_ERR_FORMAT, "%s: %s[%d].pil must be true or false (true: a PIL image, as Hugging Face "
                       "datasets decodes an Image feature)", where, key, k);
    im->pil = cJSON_IsTrue(pil);
    if (im->pil && mode && !(cJSON_IsString(mode) && !strcmp(mode->valuestring, "RGB")))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: %s[%d]: an Image feature of mode %s (datasets converts it to that mode "
                       "before verl's convert(\"RGB\")) is not built; mode RGB or none is", where, key, k,
                       cJSON_IsString(mode) ? mode->valuestring : "(not a string)");
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
    if (!strncmp(*src, "data:", 5) && !strstr(*src, ";base64,"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: a data URI without base64 data", w);
    return VC_OK;
}

/* decodes an image's source (a base64 data URI, an http(s) URL, a file:// URI or a path) as Pillow opens it and
 * fetch_image's to_rgb converts it (alpha VC_ALPHA_QWEN_VL_UTILS), or as verl's _build_messages converts a PIL
 * image, convert("RGB"), before fetch_image (VC_ALPHA_CONVERT_RGB) */
static vc_status decode_source(const char *src, const char *what, vc_image_alpha alpha, vc_image *out) {
    memset(out, 0, sizeof *out);
    if (vc_url_is_http(src)) { /* (requests.get, then Image.open on the body) */
        uint8_t *bytes = NULL;
        size_t n = 0;
        char name[512];
        snprintf(name, sizeof name, "%s: %.300s", what, src);
        vc_status st = vc_url_fetch(src, what, &bytes, &n);
        if (!st) st = vc_image_decode(bytes, n, name, alpha, out);
        free(bytes);
        return st;
    }
    if (!strncmp(src, "data:", 5)) {
        const char *b = strstr(src, ";base64,") + 8;
        uint8_t *bytes = NULL;
        size_t n = 0;
        vc_status st = vc_base64_decode(b, strlen(b), what, &bytes, &n);
        if (!st) st = vc_image_decode(bytes, n, what, alpha, out);
        free(bytes);
        return st;
    }
    vc_status st = vc_image_load(!strncmp(src, "file://", 7) ? src + 7 : src, alpha, out);
    return st ? vc_fail_ctx(st, "%s", what) : VC_OK;
}

vc_status vc_vl_value_source(const cJSON *v, const char *what, const char **src) { return image_source(what, v, src); }

vc_status vc_vl_decode_value(const cJSON *v, const char *what, vc_image *out) {
    const char *src = NULL;
    memset(out, 0, sizeof *out);
    vc_status st = image_source(what, v, &src);
    return st ? st : decode_source(src, what, VC_ALPHA_QWEN_VL_UTILS, out);
}

/* how an entry's transparency becomes RGB: fetch_image's to_rgb, or a PIL image's convert("RGB") before it */
static vc_image_alpha entry_alpha(const vc_rl_image *im) { return im->pil ? VC_ALPHA_CONVERT_RGB : VC_ALPHA_QWEN_VL_UTILS; }

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
    if (c->llama4) { /* Llama 4: its canvas's tiles and, past one, the whole image, each a frame */
        int rh, rw;
        int n = vc_vl_llama4_tiles(c, fh, fw, &im->tiles_h, &im->tiles_w, &rh, &rw);
        im->grid[0] = n, im->grid[1] = c->fixed_h / P, im->grid[2] = c->fixed_w / P;
        im->tokens = (int64_t)n * im->grid[1] * im->grid[2] / ((int64_t)M * M);
        return VC_OK;
    }
    if (c->got) { /* InternVL: tiles, each a frame */
        int cols, rows, n = vc_vl_got_tiles(c, fh, fw, &cols, &rows);
        if (c->max_tiles <= 1 && !c->do_resize && (fh != c->fixed_h || fw != c->fixed_w))
            return vc_fail(VC_ERR_SHAPE, "%s: %dx%d with do_resize false and max_patches 1: InternVL's tower takes tiles "
                           "of %dx%d only", what, fw, fh, c->fixed_w, c->fixed_h);
        im->grid[0] = n, im->grid[1] = c->fixed_h / P, im->grid[2] = c->fixed_w / P;
        im->tokens = (int64_t)n * im->grid[1] * im->grid[2] / ((int64_t)M * M);
        return VC_OK;
    }
    if (c->do_resize && (st = vc_vl_processor_resize(c, fh, fw, &h, &w)))
        return vc_fail_ctx(st, "%s: image processor", what);
    if (!c->do_resize) {
        h = fh, w = fw;
        if (c->gemma3 && (h != c->fixed_h || w != c->fixed_w))
            return vc_fail(VC_ERR_SHAPE, "%s: %dx%d with do_resize false: Gemma 3's tower takes images of its size %dx%d "
                           "only", what, w, h, c->fixed_w, c->fixed_h);
        if (h % (P * M) || w % (P * M))
            return vc_fail(VC_ERR_SHAPE, "%s: %dx%d is not a multiple of patch_size * merge_size = %d and do_resize "
                           "is false", what, w, h, P * M);
    }
    /* Gemma 3's pan and scan: the whole image and its crops, each a frame at the processor's size */
    int ncw, nch, cw, chh, crops = c->gemma3 ? vc_vl_gemma3_crops(c, fh, fw, &ncw, &nch, &cw, &chh) : 0;
    if (crops && !c->do_resize)
        return vc_fail(VC_ERR_SHAPE, "%s: %dx%d with do_pan_and_scan true and do_resize false: Gemma 3's tower takes "
                       "images of its size %dx%d only, not its %dx%d crops", what, fw, fh, c->fixed_w, c->fixed_h, cw, chh);
    im->crops = crops;
    im->grid[0] = 1 + crops, im->grid[1] = h / P, im->grid[2] = w / P;
    im->tokens = (int64_t)(1 + crops) * (h / P) * (w / P) / ((int64_t)M * M);
    return VC_OK;
}

/* image value v (what names it) into im: its source, options and the grid the processor gives it */
static vc_status parse_image(const cJSON *v, const vc_vl_image_config *c, int patch, const char *where,
                             const char *key, int k, vc_rl_image *im) {
    char what[512];
    snprintf(what, sizeof what, "%s: %s[%d]", where, key, k);
    vc_status st = image_source(what, v, &im->src);
    if (!st && cJSON_IsObject(v)) st = image_options(where, key, k, v, im);
    if (st) return st;
    vc_image img;
    if ((st = decode_source(im->src, what, entry_alpha(im), &img))) return st;
    st = image_grid(c, patch, &img, what, im);
    im->width = img.width, im->height = img.height;
    vc_image_free(&img);
    return st;
}

vc_status vc_vl_parse_images(const cJSON *imgs, const vc_vl_image_config *c, int patch, const char *where,
                             const char *key, vc_rl_image **out) {
    int n = cJSON_GetArraySize(imgs);
    vc_rl_image *ims = vc_calloc((size_t)(n ? n : 1), sizeof *ims);
    if (!ims) return VC_ERR_NOMEM;
    *out = ims;
    if (patch <= 0) patch = c->patch_size;
    for (int k = 0; k < n; k++) {
        vc_status st = parse_image(cJSON_GetArrayItem(imgs, k), c, patch, where, key, k, &ims[k]);
        if (st) return st;
    }
    return VC_OK;
}

vc_status vc_vl_parse_visuals(const cJSON *imgs, const cJSON *vids, const char *order, const vc_vl_image_config *c,
                              int patch, const vc_vl_videos *vv, const char *why, const char *where,
                              const char *key, const char *video_key, vc_rl_image **out, int *n_out) {
    int cap = (imgs ? cJSON_GetArraySize(imgs) : 0) + (vids ? cJSON_GetArraySize(vids) : 0) + 1, n = 0, ki = 0, kv = 0;
    vc_rl_image *ims = vc_calloc((size_t)cap, sizeof *ims);
    vc_status st = ims ? VC_OK : VC_ERR_NOMEM;
    if (patch <= 0) patch = c->patch_size;
    char what[512];
    for (const char *o = order; !st && *o; o++) {
        if (*o == 'i') {
            if (n + 1 > cap) { /* (videos may have grown the array past its first size) */
                vc_rl_image *g = realloc(ims, sizeof *g * (size_t)(2 * cap));
                if (!g) { st = VC_ERR_NOMEM; break; }
                memset(g + cap, 0, sizeof *g * (size_t)cap);
                ims = g, cap *= 2;
            }
            st = parse_image(cJSON_GetArrayItem(imgs, ki), c, patch, where, key, ki, &ims[n]);
            ki++, n++;
            continue;
        }
        snprintf(what, sizeof what, "%s: %s[%d]", where, video_key, kv);
        if (!vv) st = vc_fail(VC_ERR_UNSUPPORTED, "%s: %s", what, why ? why : "the model takes no video inputs");
        else st = vc_vl_parse_video(cJSON_GetArrayItem(vids, kv), vv, what, &ims, &n, &cap);
        kv++;
    }
    *out = ims, *n_out = n;
    return st;
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

/* content split on the markers into list; used[0] / used[1] count the images / videos taken, their kinds appended to
 * ord ('i' / 'v') */
typedef struct {
    const char *where, *key, *video_key;
    int n[2], used[2];
    char *ord;
    size_t n_ord;
} marks_state;

static vc_status split_content(marks_state *ms, const char *s, cJSON *list) {
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
        if (which == 2) return vc_fail(VC_ERR_UNSUPPORTED, "%s: an <audio> marker: audio inputs are not built", ms->where);
        const char *key = which ? ms->video_key : ms->key, *kind = which ? "video" : "image";
        if (ms->used[which] >= ms->n[which])
            return vc_fail(VC_ERR_FORMAT, "%s: more <%s> markers in the messages than the %d %ss of %s (verl: "
                           "%s_offset %d >= len(%ss) %d)", ms->where, kind, ms->n[which], kind, key ? key : "the row",
                           kind, ms->used[which], kind, ms->n[which]);
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddStringToObject(e, "type", kind)) return cJSON_Delete(e), VC_ERR_NOMEM;
        cJSON_AddItemToArray(list, e);
        ms->used[which]++;
        ms->ord[ms->n_ord++] = which ? 'v' : 'i';
        s = at + strlen(marks[which]);
    }
    return st;
}

vc_status vc_vl_build_messages(const cJSON *msgs, int n_images, int n_videos, const char *where, const char *key,
                               const char *video_key, cJSON **out, char **order) {
    cJSON *arr = cJSON_Duplicate(msgs, 1);
    marks_state ms = { where, key, video_key, { n_images, n_videos }, { 0, 0 }, NULL, 0 };
    ms.ord = vc_malloc((size_t)n_images + (size_t)n_videos + 1);
    if (!arr || !ms.ord) return cJSON_Delete(arr), free(ms.ord), VC_ERR_NOMEM;
    vc_status st = VC_OK;
    for (cJSON *m = arr->child; !st && m; m = m->next) {
        const cJSON *c = cJSON_IsObject(m) ? item(m, "content") : NULL;
        if (!cJSON_IsString(c)) continue; /* contents that are already lists are kept, as verl keeps them */
        cJSON *list = cJSON_CreateArray();
        if (!list) st = VC_ERR_NOMEM;
        else if ((st = split_content(&ms, c->valuestring, list))) cJSON_Delete(list);
        else cJSON_ReplaceItemInObjectCaseSensitive(m, "content", list);
    }
    for (int w = 0; !st && w < 2; w++)
        if (ms.used[w] != ms.n[w]) {
            const char *kind = w ? "video" : "image";
            st = vc_fail(VC_ERR_FORMAT, "%s: %d <%s> markers in the messages for the %d %ss of %s (verl: %s_offset %d "
                         "!= len(%ss) %d)", where, ms.used[w], kind, ms.n[w], kind, (w ? video_key : key) ? (w ? video_key
                         : key) : "the row", kind, ms.used[w], kind, ms.n[w]);
        }
    ms.ord[ms.n_ord] = 0;
    if (st || !order) free(ms.ord);
    else *order = ms.ord;
    if (st) cJSON_Delete(arr);
    else *out = arr;
    return st;
}

/* ---- the rendered text with each pad token repeated ---- */

/* the next pad of either kind at or after s (*video: which) */
static const char *next_pad(const char *s, const vc_vl_pads *p, int *video) {
    const char *a = strstr(s, p->image), *b = p->video ? strstr(s, p->video) : NULL;
    *video = b && (!a || b < a);
    return *video ? b : a;
}

/* the text one visual's pad becomes (im[k..]: *taken entries): a split video's pad becomes each frame group's
 * "<T seconds><|vision_start|>" pads "<|vision_end|>" (transformers 5's Qwen3VLProcessor.replace_video_token: the
 * template's own start and end tokens around the pad stay) */
static vc_status visual_text(const vc_vl_pads *p, int video, const vc_rl_image *im, int k, int n, const char *where,
                             vc_strbuf *o, int *taken) {
    const vc_rl_image *e = &im[k];
    const char *pad = video ? p->video : p->image;
    size_t pl = strlen(pad);
    if (!!e->video != video)
        return vc_fail(VC_ERR_FORMAT, "%s: the rendered prompt's %s pad %d stands where the row's %s is", where,
                       video ? "video" : "image", k, e->video ? "video" : "image");
    if (!video && p->tiles) { /* Llama 4: the tiles row by row between separators, then <|image|> and the whole image */
        int rows = e->tiles_h, cols = e->tiles_w;
        int64_t per = e->grid[0] > 0 ? e->tokens / e->grid[0] : 0;
        if (rows < 1 || cols < 1 || e->grid[0] != rows * cols + (rows * cols > 1) || per * e->grid[0] != e->tokens)
            return vc_fail(VC_ERR_INTERNAL, "%s: image %d's %lld tokens are not its %d x %d tiles'", where, k,
                           (long long)e->tokens, rows, cols);
        vc_sb_puts(o, p->open);
        for (int y = 0; rows * cols > 1 && y < rows; y++) {
            for (int x = 0; x < cols; x++) {
                for (int64_t t = 0; t < per; t++) vc_sb_puts(o, p->rep);
                if (x + 1 < cols) vc_sb_puts(o, "<|tile_x_separator|>");
            }
            vc_sb_puts(o, "<|tile_y_separator|>");
        }
        vc_sb_puts(o, p->image);
        for (int64_t t = 0; t < per; t++) vc_sb_puts(o, p->rep);
        vc_sb_puts(o, p->close);
        *taken = 1;
        return VC_OK;
    }
    if (!video && p->brk) { /* Mistral 3: rows of the merged grid, each closed by a break, the last by the end */
        int64_t m2 = e->tokens > 0 ? (int64_t)e->grid[1] * e->grid[2] / e->tokens : 0;
        int64_t m = (int64_t)(sqrt((double)m2) + 0.5), h = m ? e->grid[1] / m : 0, w = m ? e->grid[2] / m : 0;
        if (m < 1 || m * m != m2 || h * w != e->tokens)
            return vc_fail(VC_ERR_INTERNAL, "%s: image %d's %lld tokens are not rows of its grid", where, k,
                           (long long)e->tokens);
        for (int64_t r = 0; r < h; r++) {
            for (int64_t t = 0; t < w; t++) vc_sb_puts(o, p->rep);
            vc_sb_puts(o, r + 1 < h ? p->brk : p->close);
        }
        *taken = 1;
        return VC_OK;
    }
    if (!video && p->close && !p->open && e->crops > 0) { /* Gemma 3's pan and scan (replace_image_token) */
        int64_t per = e->tokens / (e->crops + 1);
        if (per * (e->crops + 1) != e->tokens)
            return vc_fail(VC_ERR_INTERNAL, "%s: image %d's %lld tokens are not its %d crops'", where, k,
                           (long long)e->tokens, e->crops);
        for (int f = 0; f <= e->crops; f++) {
            vc_sb_puts(o, f == 0 ? "Here is the original image \n\n"
                          : f == 1 ? " and here are some crops to help you see better \n\n" : " \n\n");
            vc_sb_puts(o, p->image);
            for (int64_t t = 0; t < per; t++) vc_sb_puts(o, p->rep);
            vc_sb_puts(o, p->close);
            vc_sb_puts(o, "\n\n");
        }
        *taken = 1;
        return VC_OK;
    }
    if (!video && p->close) { /* Gemma 3's full_image_sequence; InternVL's <img> ... </img> */
        if (!p->open) vc_sb_puts(o, "\n\n");
        vc_sb_puts(o, p->open ? p->open : p->image);
        for (int64_t t = 0; t < e->tokens; t++) vc_sb_puts(o, p->rep);
        vc_sb_puts(o, p->close);
        if (!p->open) vc_sb_puts(o, "\n\n");
        *taken = 1;
        return VC_OK;
    }
    if (!video || !e->groups) {
        for (int64_t t = 0; t < e->tokens; t++) vc_sb_putn(o, pad, pl);
        *taken = 1;
        return VC_OK;
    }
    if (k + e->groups > n) return vc_fail(VC_ERR_INTERNAL, "%s: video entries cut short", where);
    for (int g = 0; g < e->groups; g++) {
        vc_sb_printf(o, "<%.1f seconds><|vision_start|>", im[k + g].ts);
        for (int64_t t = 0; t < im[k + g].tokens; t++) vc_sb_putn(o, pad, pl);
        vc_sb_puts(o, "<|vision_end|>");
    }
    *taken = e->groups;
    return VC_OK;
}

void vc_vl_pads_markup(vc_vl_pads *p, const char *boi, const char *eoi) {
    if (!boi || !eoi) return;
    p->rep = p->image, p->image = boi, p->close = eoi, p->open = NULL;
}

void vc_vl_pads_wrap(vc_vl_pads *p, const char *open, const char *close) {
    if (!open || !close) return;
    p->rep = p->image, p->open = open, p->close = close;
}

int vc_vl_markup_texts(const vc_model_config *mc, const struct vc_tokenizer *tok, const char **open, const char **close) {
    *open = mc->image_open ? mc->image_open : mc->boi_id >= 0 ? vc_tokenizer_id_to_token(tok, mc->boi_id) : NULL;
    *close = mc->image_close ? mc->image_close : mc->eoi_id >= 0 ? vc_tokenizer_id_to_token(tok, mc->eoi_id) : NULL;
    return mc->image_wrap;
}

void vc_vl_pads_apply(vc_vl_pads *p, int mode, const char *a, const char *b) {
    if (mode == 3 && a && b) /* (Llama4Processor: the template's <|image|> marks the image, the pad its tokens) */
        p->rep = p->image, p->image = "<|image|>", p->open = a, p->close = b, p->brk = NULL, p->tiles = 1;
    else if (mode == 2 && a && b) p->rep = p->image, p->brk = a, p->close = b, p->open = NULL;
    else if (mode == 1) vc_vl_pads_wrap(p, a, b);
    else if (mode == 0) vc_vl_pads_markup(p, a, b);
}

void vc_vl_pads_model(vc_vl_pads *p, const vc_model_config *mc, const struct vc_tokenizer *tok) {
    const char *open, *close;
    int mode = vc_vl_markup_texts(mc, tok, &open, &close);
    vc_vl_pads_apply(p, mode, open, close);
}

vc_status vc_vl_expand_visuals(const char *text, const vc_vl_pads *pads, const vc_rl_image *im, int n, int exact,
                               const char *where, char **out, int *used) {
    vc_strbuf o = { 0 };
    int k = 0, video = 0, pads_found = 0;
    const char *s = text;
    vc_status st = VC_OK;
    *out = NULL;
    for (const char *at = next_pad(s, pads, &video); !st && at; at = next_pad(s, pads, &video)) {
        if (k >= n) {
            st = vc_fail(VC_ERR_FORMAT, "%s: the rendered prompt holds more %s%s%s tokens than the row's %d images%s "
                         "(transformers: the number of tokens in the prompts should be the same as the number of images "
                         "passed)", where, pads->image, pads->video ? " / " : "", pads->video ? pads->video : "", n,
                         pads->video ? " and video entries" : "");
            break;
        }
        int taken = 0;
        vc_strbuf seg = { 0 };
        st = visual_text(pads, video, im, k, n, where, &seg, &taken);
        if (!st) {
            vc_sb_putn(&o, s, (size_t)(at - s));
            vc_sb_putn(&o, seg.p ? seg.p : "", seg.n);
        }
        if (seg.oom && !st) st = VC_ERR_NOMEM;
        free(seg.p);
        s = at + strlen(video ? pads->video : pads->image);
        k += taken, pads_found++;
    }
    if (!st && exact && k != n && !pads->video)
        st = vc_fail(VC_ERR_FORMAT, "%s: the rendered prompt holds %d %s tokens for %d images (transformers: the number "
                     "of %s tokens in the prompts should be the same as the number of images passed)", where,
                     pads_found, pads->image, n, pads->image);
    else if (!st && exact && k != n)
        st = vc_fail(VC_ERR_FORMAT, "%s: the rendered prompt holds %d %s / %s tokens for the row's %d image and video "
                     "entries (transformers: the number of tokens in the prompts should be the same as the number of "
                     "images and videos passed)", where, pads_found, pads->image, pads->video, n);
    if (!st) vc_sb_puts(&o, s);
    if (!st && (o.oom || !o.p)) st = VC_ERR_NOMEM;
    if (st) return free(o.p), st;
    *out = o.p;
    if (used) *used = k;
    return VC_OK;
}

vc_status vc_vl_expand_pads(const char *text, const char *pad, const vc_rl_image *im, int n, int exact,
                            const char *where, char **out, int *used) {
    vc_vl_pads p = { pad, NULL };
    return vc_vl_expand_visuals(text, &p, im, n, exact, where, out, used);
}

/* ---- pixels on demand ---- */

/* entry k's pixels: an image's, or a whole video's (all its frame groups) */
static vc_status entry_pixels(const vc_vl_image_config *c, int patch, const vc_vl_videos *vv, const vc_rl_image *e,
                              const char *where, int k, vc_vl_pixels *out) {
    char what[512];
    snprintf(what, sizeof what, "%s: %s %d", where, e->video ? "video entry" : "image", k);
    if (e->video) {
        if (!vv) return vc_fail(VC_ERR_INTERNAL, "%s: a video without a video processor", what);
        return vc_vl_video_pixels(vv, e, what, out);
    }
    vc_image img;
    vc_vl_fetch_opts f = fetch_opts(patch > 0 ? patch : c->patch_size, e);
    vc_status st = decode_source(e->src, what, entry_alpha(e), &img);
    if (st) return st;
    st = vc_vl_verl_image(c, &img, &f, what, out);
    vc_image_free(&img);
    return st;
}

vc_status vc_vl_visuals_pixels(const vc_vl_image_config *c, int patch, const vc_vl_videos *vv, const vc_rl_image *im,
                               int n, const char *where, float **pixels, int32_t **grid, int64_t *row,
                               float **t_scale) {
    *pixels = NULL, *grid = NULL, *row = 0;
    if (t_scale) *t_scale = NULL;
    int64_t cols = 3LL * c->temporal_patch_size * c->patch_size * c->patch_size, rows = 0;
    int timed = 0;
    for (int k = 0; k < n; k++) rows += (int64_t)im[k].grid[0] * im[k].grid[1] * im[k].grid[2], timed |= im[k].t_scale != 0;
    float *px = vc_malloc(sizeof(float) * (size_t)(rows ? rows : 1) * (size_t)cols);
    int32_t *g = vc_malloc(sizeof(int32_t) * 3 * (size_t)(n ? n : 1));
    float *ts = timed && t_scale ? vc_malloc(sizeof(float) * (size_t)n) : NULL;
    vc_status st = px && g && (ts || !timed || !t_scale) ? VC_OK : VC_ERR_NOMEM;
    int64_t at = 0;
    for (int k = 0; !st && k < n;) {
        const vc_rl_image *e = &im[k];
        int span = e->groups ? e->groups : 1; /* a split video's entries come from one processing */
        vc_vl_pixels out = { 0 };
        if ((st = entry_pixels(c, patch, vv, e, where, k, &out))) break;
        int gt = e->groups ? 1 : e->grid[0];
        if (out.grid_t != gt * span || out.grid_h != e->grid[1] || out.grid_w != e->grid[2] || out.cols != cols ||
            at + out.rows > rows || k + span > n)
            st = vc_fail(VC_ERR_FORMAT, "%s: %s %d: now a grid of %dx%dx%d patches, %dx%dx%d when the dataset was "
                         "loaded (the file changed?)", where, e->video ? "video entry" : "image", k, out.grid_t,
                         out.grid_h, out.grid_w, gt * span, e->grid[1], e->grid[2]);
        if (!st) {
            memcpy(px + at * cols, out.data, sizeof(float) * (size_t)out.rows * (size_t)cols);
            for (int j = 0; j < span; j++) {
                memcpy(g + 3 * (k + j), im[k + j].grid, sizeof im[k + j].grid);
                if (ts) ts[k + j] = im[k + j].t_scale != 0 ? im[k + j].t_scale : 1.0f;
            }
            at += out.rows;
            k += span;
        }
        vc_vl_pixels_free(&out);
    }
    if (st) {
        free(px), free(g), free(ts);
        return st;
    }
    *pixels = px, *grid = g, *row = cols;
    if (t_scale) *t_scale = ts;
    return VC_OK;
}

vc_status vc_vl_images_pixels(const vc_vl_image_config *c, int patch, const vc_rl_image *im, int n, const char *where,
                              float **pixels, int32_t **grid, int64_t *row) {
    return vc_vl_visuals_pixels(c, patch, NULL, im, n, where, pixels, grid, row, NULL);
}
