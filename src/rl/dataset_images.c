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

static vc_status tokenize_expanded(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const char *text,
                                   const char *pad, vc_rl_prompt *p) {
    char *full = NULL, where[512];
    size_t n = 0;
    snprintf(where, sizeof where, "%s:%lld", ROW(j, i));
    vc_status st = vc_vl_expand_pads(text, pad, p->images, p->n_images, 1, where, &full, NULL);
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
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: %s: the row has %d image%s but %s (image inputs need a Qwen-VL or "
                       "GLM-4V model with a preprocessor_config.json)", ROW(j, i), o->image_key, n, n == 1 ? "" : "s",
                       o->no_image_reason ? o->no_image_reason : "the model takes no image inputs");
    cJSON *vm = NULL;
    char where[512];
    snprintf(where, sizeof where, "%s:%lld", ROW(j, i));
    vc_status st = vc_vl_build_messages(msgs, n, where, o->image_key, &vm);
    if (!st) p->n_images = n, st = vc_vl_parse_images(imgs, o->vl, o->image_patch_size, where, o->image_key, &p->images);
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
    char where[512];
    snprintf(where, sizeof where, "%s:%lld", d->rows->path, (long long)p->line);
    vc_status st = vc_vl_images_pixels(d->vl, d->image_patch_size, p->images, p->n_images, where, pixels, grid, row);
    if (!st) *n_images = p->n_images;
    return st;
}
