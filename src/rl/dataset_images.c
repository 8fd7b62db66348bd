/* Prompt rows with images (verl's RLHFDataset with a Qwen2-VL / Qwen2.5-VL processor): _build_messages splits each
 * message's content on "<image>" / "<video>" / "<audio>" into a content list, the chat template renders it, every
 * image goes through qwen_vl_utils' fetch_image and the image processor (verl/utils/dataset/vision_utils.py
 * process_image), and the processor repeats each "<|image_pad|>" grid_t * grid_h * grid_w / merge_size^2 times before
 * tokenizing. Only the images' sources and grids are kept; vc_rl_prompt_images makes a prompt's pixels on demand. */
#include "dataset_internal.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW(j, i) (j)->path, (long long)(j)->lines[i]

static const cJSON *item(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }
static int present(const cJSON *x) { return x && !cJSON_IsNull(x); }

vc_status rl_row_images(const vc_jsonl *j, size_t i, const vc_rl_data_opts *o, const cJSON **images) {
    *images = NULL;
    const cJSON *row = j->rows[i];
    const cJSON *v = o->video_key ? item(row, o->video_key) : NULL;
    if (present(v) && (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: %s: video inputs are not built (rows with videos are refused)",
                       ROW(j, i), o->video_key);
    const cJSON *im = o->image_key ? item(row, o->image_key) : NULL;
    if (!present(im)) return VC_OK;
    if (!cJSON_IsArray(im))
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s must be a list of images (paths or {bytes, path} objects)", ROW(j, i),
                       o->image_key);
    if (cJSON_GetArraySize(im) > 0) *images = im;
    return VC_OK;
}

/* ---- one image entry of a row ---- */

static vc_status opt_int(const vc_jsonl *j, size_t i, const char *key, int k, const cJSON *obj, const char *name,
                         int64_t *out) {
    const cJSON *x = item(obj, name);
    if (!present(x)) return VC_OK; /* null: fetch_image's default, as ele.get(name) gives None */
    if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 1e15 || x->valuedouble != floor(x->valuedouble))
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d].%s must be a positive integer", ROW(j, i), key, k, name);
    *out = (int64_t)x->valuedouble;
    return VC_OK;
}

static vc_status image_options(const vc_jsonl *j, size_t i, const char *key, int k, const cJSON *v, vc_rl_image *im) {
    int64_t rh = 0, rw = 0;
    vc_status st = opt_int(j, i, key, k, v, "min_pixels", &im->min_pixels);
    if (!st) st = opt_int(j, i, key, k, v, "max_pixels", &im->max_pixels);
    if (!st) st = opt_int(j, i, key, k, v, "resized_height", &rh);
    if (!st) st = opt_int(j, i, key, k, v, "resized_width", &rw);
    if (st) return st;
    if (rh > 1000000 || rw > 1000000)
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d]: resized_height / resized_width of %lldx%lld", ROW(j, i), key, k,
                       (long long)rw, (long long)rh);
    if (rh && rw) im->resized_h = (int)rh, im->resized_w = (int)rw; /* fetch_image needs both */
    return VC_OK;
}

/* the entry's source: a path string, or an object's bytes (a data URI) / image / image_url / path (the Hugging Face
 * datasets Image feature's {"bytes": null, "path": ...}) */
static vc_status image_source(const vc_jsonl *j, size_t i, const char *key, int k, const cJSON *v, const char **src) {
    *src = NULL;
    if (cJSON_IsString(v)) *src = v->valuestring;
    else if (cJSON_IsObject(v)) {
        const cJSON *b = item(v, "bytes");
        const char *names[] = { "image", "image_url", "path" };
        if (present(b)) {
            if (!cJSON_IsString(b) || strncmp(b->valuestring, "data:", 5))
                return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d].bytes must be an image's bytes (binary in Parquet, a "
                               "base64 data URI in JSON)", ROW(j, i), key, k);
            *src = b->valuestring;
        }
        for (int n = 0; !*src && n < 3; n++) {
            const cJSON *s = item(v, names[n]);
            if (!present(s)) continue;
            if (!cJSON_IsString(s))
                return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d].%s must be a string (a path, file:// or data URI)",
                               ROW(j, i), key, k, names[n]);
            *src = s->valuestring;
        }
        if (!*src)
            return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d] has none of bytes, image, image_url or path", ROW(j, i), key,
                           k);
    } else
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d] must be a path or an object with bytes / image / path",
                       ROW(j, i), key, k);
    if (!**src) return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s[%d] is an empty path", ROW(j, i), key, k);
    if (!strncmp(*src, "http://", 7) || !strncmp(*src, "https://", 8))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: %s[%d]: %.200s: images from http(s) URLs are not fetched "
                       "(verlc reads local files and data URIs only)", ROW(j, i), key, k, *src);
    if (!strncmp(*src, "data:", 5) && !strstr(*src, ";base64,"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: %s[%d]: a data URI without base64 data", ROW(j, i), key, k);
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
    if (c->do_resize && (st = vc_vl_smart_resize(fh, fw, P * M, c->min_pixels, c->max_pixels, &h, &w)))
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

static vc_status parse_images(const vc_jsonl *j, size_t i, const vc_rl_data_opts *o, const cJSON *imgs,
                              vc_rl_prompt *p) {
    int n = cJSON_GetArraySize(imgs);
    if (!(p->images = vc_calloc((size_t)n, sizeof *p->images))) return VC_ERR_NOMEM;
    p->n_images = n;
    int patch = o->image_patch_size > 0 ? o->image_patch_size : o->vl->patch_size;
    char what[512];
    for (int k = 0; k < n; k++) {
        const cJSON *v = cJSON_GetArrayItem(imgs, k);
        vc_rl_image *im = &p->images[k];
        vc_status st = image_source(j, i, o->image_key, k, v, &im->src);
        if (!st && cJSON_IsObject(v)) st = image_options(j, i, o->image_key, k, v, im);
        if (st) return st;
        snprintf(what, sizeof what, "%s:%lld: %s[%d]", ROW(j, i), o->image_key, k);
        vc_image img;
        if ((st = decode_source(im->src, what, &img))) return st;
        st = image_grid(o->vl, patch, &img, what, im);
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
static vc_status split_content(const vc_jsonl *j, size_t i, const char *key, const char *s, int n_images, int *used,
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
            return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: a %s marker: %s inputs are not built", ROW(j, i), marks[which],
                           which == 1 ? "video" : "audio");
        if (*used >= n_images)
            return vc_fail(VC_ERR_FORMAT, "%s:%lld: more <image> markers in the messages than the %d images of %s "
                           "(verl: image_offset %d >= len(images) %d)", ROW(j, i), n_images, key, *used, n_images);
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddStringToObject(e, "type", "image")) return cJSON_Delete(e), VC_ERR_NOMEM;
        cJSON_AddItemToArray(list, e);
        (*used)++;
        s = at + strlen(marks[0]);
    }
    return st;
}

static vc_status build_messages(const vc_jsonl *j, size_t i, const char *key, const cJSON *msgs, int n_images,
                                cJSON **out) {
    cJSON *arr = cJSON_Duplicate(msgs, 1);
    if (!arr) return VC_ERR_NOMEM;
    int used = 0;
    vc_status st = VC_OK;
    for (cJSON *m = arr->child; !st && m; m = m->next) {
        const cJSON *c = cJSON_IsObject(m) ? item(m, "content") : NULL;
        if (!cJSON_IsString(c)) continue; /* contents that are already lists are kept, as verl keeps them */
        cJSON *list = cJSON_CreateArray();
        if (!list) st = VC_ERR_NOMEM;
        else if ((st = split_content(j, i, key, c->valuestring, n_images, &used, list))) cJSON_Delete(list);
        else cJSON_ReplaceItemInObjectCaseSensitive(m, "content", list);
    }
    if (!st && used != n_images)
        st = vc_fail(VC_ERR_FORMAT, "%s:%lld: %d <image> markers in the messages for the %d images of %s (verl: "
                     "image_offset %d != len(images) %d)", ROW(j, i), used, n_images, key, used, n_images);
    if (st) cJSON_Delete(arr);
    else *out = arr;
    return st;
}

/* ---- the rendered text with each pad token repeated ---- */

static vc_status expand_pads(const vc_jsonl *j, size_t i, const char *text, const char *pad, const vc_rl_prompt *p,
                             char **out) {
    size_t pl = strlen(pad), len = strlen(text), count = 0, extra = 0;
    for (const char *s = strstr(text, pad); s; s = strstr(s + pl, pad)) count++;
    if (count != (size_t)p->n_images)
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: the rendered prompt holds %zu %s tokens for %d images (transformers: "
                       "the number of %s tokens in the prompts should be the same as the number of images passed)",
                       ROW(j, i), count, pad, p->n_images, pad);
    for (int k = 0; k < p->n_images; k++) extra += (size_t)(p->images[k].tokens - 1) * pl;
    char *o = vc_malloc(len + extra + 1), *w = o;
    if (!o) return VC_ERR_NOMEM;
    const char *s = text;
    for (int k = 0; k < p->n_images; k++) {
        const char *at = strstr(s, pad);
        memcpy(w, s, (size_t)(at - s)), w += at - s;
        for (int64_t t = 0; t < p->images[k].tokens; t++) memcpy(w, pad, pl), w += pl;
        s = at + pl;
    }
    strcpy(w, s);
    *out = o;
    return VC_OK;
}

static vc_status tokenize_expanded(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const char *text,
                                   const char *pad, vc_rl_prompt *p) {
    char *full = NULL;
    size_t n = 0;
    vc_status st = expand_pads(j, i, text, pad, p, &full);
    if (!st) st = vc_tokenizer_encode(tok, full, strlen(full), 0, &p->ids, &n);
    free(full);
    if (st) return st;
    p->len = (int64_t)n;
    int id = vc_tokenizer_token_to_id(tok, pad);
    int64_t want = 0, got = 0;
    for (int k = 0; k < p->n_images; k++) want += p->images[k].tokens;
    for (size_t t = 0; id >= 0 && t < n; t++) got += p->ids[t] == id;
    if (id < 0 || got != want) /* transformers' "Mismatch in `image` token count between text and `input_ids`" */
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %lld %s tokens in the prompt's ids for %lld in its text (the tokenizer "
                       "must have %s as one added token)", ROW(j, i), (long long)got, pad, (long long)want, pad);
    return VC_OK;
}

vc_status rl_render_image_row(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                              const vc_rl_data_opts *o, const cJSON *msgs, const cJSON *imgs, vc_rl_prompt *p) {
    int n = cJSON_GetArraySize(imgs);
    if (!o->vl)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: %s: the row has %d image%s but %s (image inputs need a Qwen2-VL / "
                       "Qwen2.5-VL model with a preprocessor_config.json)", ROW(j, i), o->image_key, n, n == 1 ? "" : "s",
                       o->no_image_reason ? o->no_image_reason : "the model takes no image inputs");
    cJSON *vm = NULL;
    vc_status st = build_messages(j, i, o->image_key, msgs, n, &vm);
    if (!st) st = parse_images(j, i, o, imgs, p);
    char *text = NULL;
    vc_chat_opts co = { .add_generation_prompt = 1, .enable_thinking = -1, .extra = o->chat_kwargs };
    if (!st && (st = vc_chat_template_render(tmpl, vm, &co, &text)))
        st = vc_fail_ctx(st, "%s:%lld: chat template", ROW(j, i));
    if (!st) st = tokenize_expanded(j, i, tok, text, o->image_token ? o->image_token : RL_IMAGE_TOKEN, p);
    free(text);
    if (st) return cJSON_Delete(vm), st;
    /* the content-list messages live in the row, as verl's raw_prompt */
    cJSON_DeleteItemFromObjectCaseSensitive(j->rows[i], "_verlc_raw_prompt");
    cJSON_AddItemToObject(j->rows[i], "_verlc_raw_prompt", vm);
    p->vl_messages = vm;
    p->messages = msgs;
    return VC_OK;
}

/* ---- pixels on demand ---- */

vc_status vc_rl_prompt_images(const vc_rl_dataset *d, size_t i, float **pixels, int32_t **grid, int *n_images,
                              int64_t *row) {
    *pixels = NULL, *grid = NULL, *n_images = 0, *row = 0;
    if (!d || i >= d->n) return vc_fail(VC_ERR_ARG, "vc_rl_prompt_images: prompt %zu of %zu", i, d ? d->n : 0);
    const vc_rl_prompt *p = &d->p[i];
    if (!p->n_images) return VC_OK;
    if (!d->vl) return vc_fail(VC_ERR_INTERNAL, "%s:%lld: images without a processor config", d->rows->path,
                               (long long)p->line);
    const vc_vl_image_config *c = d->vl;
    int64_t cols = 3LL * c->temporal_patch_size * c->patch_size * c->patch_size, rows = 0;
    for (int k = 0; k < p->n_images; k++) rows += (int64_t)p->images[k].grid[0] * p->images[k].grid[1] * p->images[k].grid[2];
    float *px = vc_malloc(sizeof(float) * (size_t)(rows ? rows : 1) * (size_t)cols);
    int32_t *g = vc_malloc(sizeof(int32_t) * 3 * (size_t)p->n_images);
    vc_status st = px && g ? VC_OK : VC_ERR_NOMEM;
    int64_t at = 0;
    char what[512];
    for (int k = 0; !st && k < p->n_images; k++) {
        const vc_rl_image *im = &p->images[k];
        snprintf(what, sizeof what, "%s:%lld: image %d", d->rows->path, (long long)p->line, k);
        vc_image img;
        vc_vl_pixels out = { 0 };
        vc_vl_fetch_opts f = fetch_opts(d->image_patch_size > 0 ? d->image_patch_size : c->patch_size, im);
        if ((st = decode_source(im->src, what, &img))) break;
        st = vc_vl_verl_image(c, &img, &f, what, &out);
        vc_image_free(&img);
        if (!st && (out.grid_t != im->grid[0] || out.grid_h != im->grid[1] || out.grid_w != im->grid[2] ||
                    out.cols != cols || at + out.rows > rows))
            st = vc_fail(VC_ERR_FORMAT, "%s: now a grid of %dx%dx%d patches, %dx%dx%d when the dataset was loaded (the "
                         "file changed?)", what, out.grid_t, out.grid_h, out.grid_w, im->grid[0], im->grid[1],
                         im->grid[2]);
        if (!st) {
            memcpy(px + at * cols, out.data, sizeof(float) * (size_t)out.rows * (size_t)cols);
            memcpy(g + 3 * k, im->grid, sizeof im->grid);
            at += out.rows;
        }
        vc_vl_pixels_free(&out);
    }
    if (st) {
        free(px), free(g);
        return st;
    }
    *pixels = px, *grid = g, *n_images = p->n_images, *row = cols;
    return VC_OK;
}
