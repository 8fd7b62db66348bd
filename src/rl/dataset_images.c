/* Prompt rows with images (verl's RLHFDataset with a Qwen2-VL / Qwen2.5-VL or GLM-4V processor): _build_messages
 * splits each message's content on "<image>" / "<video>" / "<audio>" into a content list, the chat template renders it, every
 * image goes through qwen_vl_utils' fetch_image and the image processor (verl/utils/dataset/vision_utils.py
 * process_image), and the processor repeats each "<|image_pad|>" grid_t * grid_h * grid_w / merge_size^2 times before
 * tokenizing. Only the images' sources and grids are kept; vc_rl_prompt_images makes a prompt's pixels on demand. */
#include "dataset_internal.h"
#include "data/vl_rows.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW(j, i) (j)->path, (long long)(j)->lines[i]

static const cJSON *item(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }
static int present(const cJSON *x) { return x && !cJSON_IsNull(x); }

static vc_status row_list(const vc_jsonl *j, size_t i, const char *key, const char *kinds, const cJSON **out) {
    const cJSON *v = key ? item(j->rows[i], key) : NULL;
    *out = NULL;
    if (!present(v)) return VC_OK;
    if (!cJSON_IsArray(v)) return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s must be a list of %s", ROW(j, i), key, kinds);
    if (cJSON_GetArraySize(v) > 0) *out = v;
    return VC_OK;
}

vc_status rl_row_images(const vc_jsonl *j, size_t i, const vc_rl_data_opts *o, const cJSON **images,
                        const cJSON **videos) {
    vc_status st = row_list(j, i, o->image_key, "images (paths or {bytes, path} objects)", images);
    return st ? st : row_list(j, i, o->video_key, "videos (paths, frame lists or {video, fps, ...} objects)", videos);
}

/* the ids of pad (its token's id) and the entries' tokens of that kind must agree (transformers' "Mismatch in
 * `image` token count between text and `input_ids`") */
static vc_status count_pads(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const char *pad, int video,
                            const vc_rl_prompt *p) {
    int id = vc_tokenizer_token_to_id(tok, pad);
    int64_t want = 0, got = 0;
    for (int k = 0; k < p->n_images; k++) want += !!p->images[k].video == video ? p->images[k].tokens : 0;
    for (int64_t t = 0; id >= 0 && t < p->len; t++) got += p->ids[t] == id;
    if ((id < 0 && want) || got != want)
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %lld %s tokens in the prompt's ids for %lld in its text (the tokenizer "
                       "must have %s as one added token)", ROW(j, i), (long long)got, pad, (long long)want, pad);
    return VC_OK;
}

static vc_status tokenize_expanded(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const char *text,
                                   const vc_vl_pads *pads, vc_rl_prompt *p) {
    char *full = NULL, where[512];
    size_t n = 0;
    snprintf(where, sizeof where, "%s:%lld", ROW(j, i));
    vc_status st = vc_vl_expand_visuals(text, pads, p->images, p->n_images, 1, where, &full, NULL);
    if (!st) st = vc_tokenizer_encode(tok, full, strlen(full), 0, &p->ids, &n);
    free(full);
    if (st) return st;
    p->len = (int64_t)n;
    st = count_pads(j, i, tok, pads->close ? pads->rep : pads->image, 0, p); /* (Gemma 3: its image tokens) */
    return st || !pads->video ? st : count_pads(j, i, tok, pads->video, 1, p);
}

vc_status rl_render_image_row(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                              const vc_rl_data_opts *o, const cJSON *msgs, const cJSON *imgs, const cJSON *vids,
                              vc_rl_prompt *p) {
    int n = imgs ? cJSON_GetArraySize(imgs) : 0, nv = vids ? cJSON_GetArraySize(vids) : 0;
    if (!o->vl)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: %s: the row has %d %s%s but %s (image and video inputs need a "
                       "Qwen-VL or GLM-4V model with a preprocessor_config.json)", ROW(j, i),
                       n ? o->image_key : o->video_key, n ? n : nv, n ? "image" : "video", (n ? n : nv) == 1 ? "" : "s",
                       o->no_image_reason ? o->no_image_reason : "the model takes no image inputs");
    cJSON *vm = NULL;
    char where[512], *order = NULL;
    snprintf(where, sizeof where, "%s:%lld", ROW(j, i));
    vc_status st = vc_vl_build_messages(msgs, n, nv, where, o->image_key, o->video_key, &vm, &order);
    if (!st) st = vc_vl_parse_visuals(imgs, vids, order, o->vl, o->image_patch_size, o->videos, o->no_video_reason,
                                      where, o->image_key, o->video_key, &p->images, &p->n_images);
    free(order);
    char *text = NULL;
    vc_chat_opts co = { .add_generation_prompt = 1, .enable_thinking = -1, .extra = o->chat_kwargs };
    if (!st && (st = vc_chat_template_render(tmpl, vm, &co, &text)))
        st = vc_fail_ctx(st, "%s:%lld: chat template", ROW(j, i));
    vc_vl_pads pads = { o->image_token ? o->image_token : RL_IMAGE_TOKEN,
                        nv ? (o->video_token ? o->video_token : VC_VL_VIDEO_TOKEN) : NULL };
    vc_vl_pads_apply(&pads, o->image_wrap, o->image_boi, o->image_eoi);
    if (!st) st = tokenize_expanded(j, i, tok, text, &pads, p);
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

vc_status vc_rl_prompt_visuals(const vc_rl_dataset *d, size_t i, float **pixels, int32_t **grid, int *n_images,
                               int64_t *row, float **t_scale) {
    *pixels = NULL, *grid = NULL, *n_images = 0, *row = 0;
    if (t_scale) *t_scale = NULL;
    if (!d || i >= d->n) return vc_fail(VC_ERR_ARG, "vc_rl_prompt_images: prompt %zu of %zu", i, d ? d->n : 0);
    const vc_rl_prompt *p = &d->p[i];
    if (!p->n_images) return VC_OK;
    if (!d->vl) return vc_fail(VC_ERR_INTERNAL, "%s:%lld: images without a processor config", d->rows->path,
                               (long long)p->line);
    char where[512];
    snprintf(where, sizeof where, "%s:%lld", d->rows->path, (long long)p->line);
    vc_status st = vc_vl_visuals_pixels(d->vl, d->image_patch_size, d->videos, p->images, p->n_images, where, pixels,
                                        grid, row, t_scale);
    if (!st) *n_images = p->n_images;
    return st;
}

vc_status vc_rl_prompt_images(const vc_rl_dataset *d, size_t i, float **pixels, int32_t **grid, int *n_images,
                              int64_t *row) {
    return vc_rl_prompt_visuals(d, i, pixels, grid, n_images, row, NULL);
}
