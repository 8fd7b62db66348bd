/* Prompt datasets for RL (verl's RLHFDataset): JSONL rows in verl's schema, prompts rendered with the
 * tokenizer's chat template (add_generation_prompt) and tokenized without special tokens, overlong
 * prompts filtered (counted) or truncated per data.truncation. Rows with images: dataset_images.c. */
#include "dataset_internal.h"
#include "verlc/json.h"
#include "verlc/rng.h"
#include "data/vl_rows.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void vc_rl_dataset_free(vc_rl_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->p[i].ids);
        free(d->p[i].extra_info);
        free(d->p[i].images);
    }
    free(d->p);
    free(d->vl);
    free(d->videos);
    vc_jsonl_free(d->rows);
    free(d);
}

/* an image or video token of p in ids [a, b): a cut there would split a run */
static int cuts_image(const vc_rl_prompt *p, const int ids[2], int64_t a, int64_t b) {
    for (int64_t t = a; p->n_images && t < b; t++)
        if (p->ids[t] == ids[0] || (ids[1] >= 0 && p->ids[t] == ids[1])) return 1;
    return 0;
}

/* keeps max tokens of ids per data.truncation; VC_ERR_ARG for "error" and for a cut through an image's tokens */
static vc_status truncate_prompt(const vc_jsonl *j, size_t i, const char *mode, int64_t max, const int image_id[2],
                                 vc_rl_prompt *p) {
    int64_t n = p->len;
    int cut = !mode ? 0 : !strcmp(mode, "left") ? cuts_image(p, image_id, 0, n - max)
                        : !strcmp(mode, "right") ? cuts_image(p, image_id, max, n)
                        : !strcmp(mode, "middle") ? cuts_image(p, image_id, max / 2, n - (max - max / 2)) : 0;
    if (cut)
        return vc_fail(VC_ERR_ARG, "%s:%lld: prompt with images is %lld tokens, longer than data.max_prompt_length="
                       "%lld, and data.truncation=%s would cut through an image's tokens (set "
                       "data.filter_overlong_prompts=true, as verl's image datasets do)", j->path,
                       (long long)j->lines[i], (long long)n, (long long)max, mode);
    if (!mode || !strcmp(mode, "error"))
        return vc_fail(VC_ERR_ARG,
                       "%s:%lld: prompt is %lld tokens, longer than data.max_prompt_length=%lld "
                       "(set data.filter_overlong_prompts=true or data.truncation=left|right|middle)",
                       j->path, (long long)j->lines[i], (long long)n, (long long)max);
    if (!strcmp(mode, "left")) memmove(p->ids, p->ids + (n - max), sizeof(int32_t) * (size_t)max);
    else if (!strcmp(mode, "middle")) {
        int64_t left = max / 2, right = max - left;
        memmove(p->ids + left, p->ids + (n - right), sizeof(int32_t) * (size_t)right);
    } else if (strcmp(mode, "right"))
        return vc_fail(VC_ERR_ARG, "data.truncation: unknown mode `%s` (error, left, right, middle)", mode);
    p->len = max;
    return VC_OK;
}

static vc_status render_row(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                            const vc_rl_data_opts *opts, vc_rl_prompt *p) {
    const char *key = opts->prompt_key ? opts->prompt_key : "prompt";
    const cJSON *msgs = NULL, *imgs = NULL, *vids = NULL;
    vc_status st = vc_jsonl_field(j, i, key, &msgs);
    if (st) return st;
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: %s must be a non-empty list of {role, content} messages", j->path,
                       (long long)j->lines[i], key);
    if ((st = rl_row_images(j, i, opts, &imgs, &vids))) return st;
    if (imgs || vids) return rl_render_image_row(j, i, tok, tmpl, opts, msgs, imgs, vids, p);
    char *text = NULL;
    vc_chat_opts o = { .add_generation_prompt = 1, .enable_thinking = -1, .extra = opts->chat_kwargs };
    st = vc_chat_template_render(tmpl, msgs, &o, &text);
    if (st) return vc_fail_ctx(st, "%s:%lld: chat template", j->path, (long long)j->lines[i]);
    size_t n = 0;
    st = vc_tokenizer_encode(tok, text, strlen(text), 0, &p->ids, &n);
    free(text);
    p->messages = msgs;
    p->len = (int64_t)n;
    return st;
}

static vc_status load_row(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                          const vc_rl_data_opts *o, vc_rl_prompt *p) {
    vc_verl_row row;
    vc_status st = vc_verl_row_get(j, i, &row);
    if (st) return st;
    p->data_source = row.data_source;
    p->line = row.line;
    p->row = j->rows[i];
    p->ground_truth = NULL;
    if (row.ground_truth) {
        /* a printed (non-string) ground truth lives in row.owned: keep it alive in the JSON tree */
        if (row.owned) {
            cJSON *gt = cJSON_CreateString(row.owned);
            cJSON *rm = cJSON_GetObjectItemCaseSensitive(j->rows[i], "reward_model");
            if (!gt) st = VC_ERR_NOMEM;
            else cJSON_AddItemToObject(rm, "_verlc_ground_truth_text", gt), p->ground_truth = gt->valuestring;
        } else p->ground_truth = row.ground_truth;
    } else if (o->need_ground_truth)
        st = vc_fail(VC_ERR_MISSING, "%s:%lld: missing field reward_model.ground_truth", j->path, (long long)row.line);
    if (!st && row.extra_info && !(p->extra_info = vc_json_print(row.extra_info, 0))) st = VC_ERR_NOMEM;
    vc_verl_row_clear(&row);
    if (!st && o->reward_fn_key && strcmp(o->reward_fn_key, "data_source") &&
        (st = vc_jsonl_string(j, i, o->reward_fn_key, &p->data_source)))
        st = vc_fail_ctx(st, "data.reward_fn_key");
    if (!st) st = render_row(j, i, tok, tmpl, o, p);
    return st;
}

/* max_samples of the total rows: verl's RLHFDataset draws them with numpy's default_rng(data.seed).choice where the data
 * is shuffled (unseeded where data.seed is null: verlc keeps the first ones then), else takes the first ones */
static vc_status pick_rows(const vc_rl_data_opts *o, size_t total, int64_t **pick, size_t *n) {
    *n = (size_t)o->max_samples;
    if (!o->pick_random) return VC_OK;
    vc_np_pcg64 g;
    vc_np_pcg64_seed(&g, o->pick_seed);
    if (!(*pick = vc_malloc(sizeof **pick * *n))) return VC_ERR_NOMEM;
    return vc_np_choice(&g, total, *n, *pick);
}

vc_status vc_rl_dataset_load(const char *path, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                             const vc_rl_data_opts *o, vc_rl_dataset **out) {
    *out = NULL;
    if (!path) return vc_fail(VC_ERR_ARG, "dataset: no file given");
    char *full = vc_path_expand_user(path); /* "~/": as verl's datasets read it */
    int found = vc_file_exists(path) || (full && vc_file_exists(full));
    free(full);
    if (!found) return vc_fail(VC_ERR_IO, "%s: dataset file not found", path);
    vc_rl_dataset *d = vc_calloc(1, sizeof *d);
    if (!d) return VC_ERR_NOMEM;
    vc_status st = vc_jsonl_read(path, VC_JSONL_STRICT | VC_JSONL_HF_IMAGES, &d->rows); /* (datasets.load_dataset) */
    if (!st && d->rows->n_rows == 0) st = vc_fail(VC_ERR_FORMAT, "%s: dataset has no rows", path);
    size_t n = st ? 0 : d->rows->n_rows;
    int64_t *pick = NULL; /* the rows kept, in their order (NULL: the first n) */
    if (!st && o->max_samples > 0 && (size_t)o->max_samples < n) st = pick_rows(o, n, &pick, &n);
    if (!st && !(d->p = vc_calloc(n, sizeof *d->p))) st = VC_ERR_NOMEM;
    if (!st && o->vl && !(d->vl = vc_malloc(sizeof *d->vl))) st = VC_ERR_NOMEM;
    if (d->vl) *d->vl = *o->vl;
    if (!st && o->videos && !(d->videos = vc_malloc(sizeof *d->videos))) st = VC_ERR_NOMEM;
    if (d->videos) *d->videos = *o->videos;
    d->image_patch_size = o->image_patch_size > 0 ? o->image_patch_size : o->vl ? o->vl->patch_size : 0;
    int image_id[2] = { vc_tokenizer_token_to_id(tok, o->image_token ? o->image_token : RL_IMAGE_TOKEN),
                        vc_tokenizer_token_to_id(tok, o->video_token ? o->video_token : VC_VL_VIDEO_TOKEN) };
    for (size_t k = 0; !st && k < n; k++) {
        size_t i = pick ? (size_t)pick[k] : k;
        vc_rl_prompt *p = &d->p[d->n];
        st = load_row(d->rows, i, tok, tmpl, o, p);
        d->n++;
        if (st || p->len <= o->max_prompt_length || o->max_prompt_length <= 0) continue;
        if (o->filter_overlong) {
            free(p->ids);
            free(p->extra_info);
            free(p->images);
            memset(p, 0, sizeof *p);
            d->n--;
            d->n_filtered++;
        } else {
            st = truncate_prompt(d->rows, i, o->truncation, o->max_prompt_length, image_id, p);
            d->n_truncated += !st;
        }
    }
    free(pick);
    if (!st && d->n == 0)
        st = vc_fail(VC_ERR_ARG, "%s: every prompt is longer than data.max_prompt_length=%lld (%zu filtered)", path,
                     (long long)o->max_prompt_length, d->n_filtered);
    if (st) {
        vc_rl_dataset_free(d);
        return st;
    }
    *out = d;
    return VC_OK;
}
