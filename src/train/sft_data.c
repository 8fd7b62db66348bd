/* SFT rows -> token ids and loss masks: prompt/response rows (verl's SFTDataset: chat-templated prompt,
 * response + EOS, loss on the response) and multi-turn `messages` rows (verl's MultiTurnSFTDataset:
 * the conversation rendered incrementally, loss on assistant turns only). */
#include "sft_internal.h"
#include "data/vl_rows.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


vc_status sft_rowbuf_push(sft_rowbuf *r, const int32_t *ids, size_t n, float m) {
    if (r->n + n > r->cap) {
        size_t cap = (r->n + n) * 2 + 64;
        int32_t *a = realloc(r->ids, cap * sizeof *a);
        if (a) r->ids = a;
        float *b = a ? realloc(r->mask, cap * sizeof *b) : NULL;
        if (!a || !b) return vc_fail(VC_ERR_NOMEM, "out of memory");
        r->mask = b;
        r->cap = cap;
    }
    memcpy(r->ids + r->n, ids, n * sizeof *ids);
    for (size_t i = 0; i < n; i++) r->mask[r->n + i] = m;
    r->n += n;
    return VC_OK;
}

static vc_status push_text(const sft_tok *tk, sft_rowbuf *r, const char *text, size_t len, float m) {
    if (!len) return VC_OK;
    int32_t *ids = NULL;
    size_t n = 0;
    vc_status st = vc_tokenizer_encode(tk->tok, text, len, 0, &ids, &n);
    if (!st) st = sft_rowbuf_push(r, ids, n, m);
    free(ids);
    return st;
}

/* the row's template options (verl's MultiTurnSFTDataset: tools and enable_thinking per row) and images (n_img
 * 0: none; then msgs are content lists and each rendering's j-th pad token is image j, expanded to its tokens) */
typedef struct {
    const cJSON *tools;
    int thinking;
    const vc_rl_image *img; /* images and videos' entries in marker order */
    int n_img, n_vid;
    const char *where;
} row_opts;
static const row_opts NO_OPTS = { NULL, -1, NULL, 0, 0, NULL };

static vc_status render(const sft_tok *tk, const cJSON *msgs, int n, int gen, const row_opts *ro, char **out) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_Duplicate(cJSON_GetArrayItem(msgs, i), 1));
    vc_chat_opts o = { gen, ro->thinking, ro->tools, tk->kwargs };
    vc_status st = vc_chat_template_render(tk->tmpl, arr, &o, out);
    cJSON_Delete(arr);
    if (st || !ro->n_img) return st;
    char *x = NULL; /* the whole conversation holds every image; its first messages the first ones */
    vc_vl_pads pads = { tk->pad, ro->n_vid ? tk->video_pad : NULL };
    vc_vl_pads_apply(&pads, tk->wrap, tk->boi, tk->eoi);
    st = vc_vl_expand_visuals(*out, &pads, ro->img, ro->n_img, n == cJSON_GetArraySize(msgs), ro->where, &x, NULL);
    free(*out);
    *out = x;
    return st;
}

/* a message's text to locate it in the rendering: its string content, or its content list's last text */
static const char *content_text(const cJSON *m) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *last = NULL;
    if (cJSON_IsString(c)) return c->valuestring;
    for (const cJSON *e = cJSON_IsArray(c) ? c->child : NULL; e; e = e->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "text");
        if (cJSON_IsString(t)) last = t;
    }
    return last ? last->valuestring : NULL;
}

static size_t lcp(const char *a, const char *b) {
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

/* end of message i's text inside the full rendering F, given its own rendering R (messages 0..i) */
static size_t message_end(const char *F, size_t from, const char *R, const char *content) {
    size_t b = lcp(F, R);
    if (!R[b] || !content || !*content) return b;
    /* the template renders a turn differently once it is history (e.g. Qwen3 drops empty <think>):
     * locate the content itself and match the turn's closing text after it */
    const char *q = strstr(F + from, content), *r = strstr(R, content);
    if (!q || !r) return b;
    size_t L = strlen(content);
    size_t e = (size_t)(q - F) + L;
    return e + lcp(F + e, r + L);
}

/* verl's turn-by-turn tokens for a row without images (sft_turns.c); 1: taken, 0: the whole conversation's way */
static int verl_row(const vc_sft_config *c, const sft_tok *tk, const sft_turn_probe *tp, const cJSON *msgs,
                    const row_opts *ro, sft_rowbuf *r, vc_status *st, int *fatal) {
    if (!tp->ok || ro->n_img || ro->n_vid) return 0;
    int64_t at = -1;
    *st = sft_verl_turns(tk, tp, msgs, ro->tools, ro->thinking, r, &at);
    if (!*st && at >= 0 && !c->ignore_ids_mismatch) {
        *fatal = 1; /* verl stops on it */
        *st = vc_fail(VC_ERR_ARG, "its turns rendered one by one (as verl's MultiTurnSFTDataset renders them) differ "
                      "from the whole conversation from token %lld on (a template that renders a turn otherwise as "
                      "history, e.g. Qwen3's <think> on the last turn); verl stops there too: set "
                      "data.ignore_input_ids_mismatch=true to train on the turns, as verl then does", (long long)at);
    }
    return 1;
}

static vc_status messages_row(const sft_tok *tk, const cJSON *msgs, const row_opts *ro, sft_rowbuf *r) {
    int n = cJSON_GetArraySize(msgs);
    char *F = NULL, *R = NULL, *G = NULL;
    if (!tk->tmpl) return vc_fail(VC_ERR_MISSING, "a messages row needs a chat template (tokenizer_config.json)");
    if (n == 0) return vc_fail(VC_ERR_FORMAT, "empty messages list");
    vc_status st = render(tk, msgs, n, 0, ro, &F);
    size_t prev = 0, flen = F ? strlen(F) : 0;
    for (int i = 0; i < n && !st; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) {
            st = vc_fail(VC_ERR_FORMAT, "message %d has no string role", i);
            break;
        }
        if ((st = render(tk, msgs, i + 1, 0, ro, &R))) break;
        size_t end = i + 1 == n ? flen : message_end(F, prev, R, content_text(m));
        if (end < prev) end = prev;
        size_t start = prev;
        if (!strcmp(role->valuestring, "assistant")) {
            if ((st = render(tk, msgs, i, 1, ro, &G))) break;
            size_t g = lcp(F, G);
            if (g > prev && g <= end) start = g;
            free(G);
            G = NULL;
        }
        st = push_text(tk, r, F + prev, start - prev, 0.0f);
        if (!st) st = push_text(tk, r, F + start, end - start, !strcmp(role->valuestring, "assistant") ? 1.0f : 0.0f);
        prev = end;
        free(R);
        R = NULL;
    }
    if (!st && prev < flen) st = push_text(tk, r, F + prev, flen - prev, 0.0f);
    free(F);
    free(R);
    free(G);
    return st;
}

/* verl's prompt_dict_keys / response_dict_keys: field[k1][k2]... ("[k1,k2]" or "k1,k2"); NULL when a
 * key is missing */
static const cJSON *descend(const cJSON *v, const char *keys) {
    if (!keys || !v) return v;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keys);
    char *save = NULL;
    for (char *k = strtok_r(buf, "[], '\"", &save); k && v; k = strtok_r(NULL, "[], '\"", &save))
        v = cJSON_GetObjectItemCaseSensitive(v, k);
    return v;
}

static vc_status prompt_response_row(const vc_sft_config *c, const sft_tok *tk, const cJSON *row, sft_rowbuf *r) {
    const cJSON *p = descend(cJSON_GetObjectItemCaseSensitive(row, c->prompt_key), c->prompt_dict_keys);
    const cJSON *resp = descend(cJSON_GetObjectItemCaseSensitive(row, c->response_key), c->response_dict_keys);
    if (!p || !resp)
        return vc_fail(VC_ERR_MISSING, "row has neither '%s' nor '%s'/'%s'", c->messages_key, c->prompt_key,
                       c->response_key);
    if (!cJSON_IsString(resp)) return vc_fail(VC_ERR_FORMAT, "'%s' is not a string", c->response_key);
    char *text = NULL;
    vc_status st = VC_OK;
    if (cJSON_IsArray(p)) {
        if (!tk->tmpl) return vc_fail(VC_ERR_MISSING, "a message-list prompt needs a chat template");
        st = render(tk, p, cJSON_GetArraySize(p), 1, &NO_OPTS, &text);
    } else if (cJSON_IsString(p)) {
        if (tk->tmpl) {
            cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", p->valuestring);
            cJSON_AddItemToArray(msgs, m);
            st = render(tk, msgs, 1, 1, &NO_OPTS, &text);
            cJSON_Delete(msgs);
        } else {
            text = vc_strdup(p->valuestring);
        }
    } else {
        return vc_fail(VC_ERR_FORMAT, "'%s' is neither a string nor a list of messages", c->prompt_key);
    }
    if (!st && !text) st = VC_ERR_NOMEM;
    if (!st) st = push_text(tk, r, text, strlen(text), 0.0f);
    if (!st) st = push_text(tk, r, resp->valuestring, strlen(resp->valuestring), 1.0f);
    if (!st && tk->eos >= 0) st = sft_rowbuf_push(r, &tk->eos, 1, 1.0f);
    free(text);
    return st;
}

static vc_status grow_rows(sft_data *d) {
    size_t cap = d->cap_rows * 2 + 64;
    int64_t **arr[] = { &d->cu, &d->img_cu, &d->span, &d->line };
    for (int k = 0; k < 4; k++) {
        int64_t *a = realloc(*arr[k], cap * sizeof *a);
        if (!a) return vc_fail(VC_ERR_NOMEM, "out of memory");
        *arr[k] = a;
    }
    d->cap_rows = cap;
    return VC_OK;
}

static vc_status data_append(sft_data *d, const sft_rowbuf *r, size_t off, size_t n) {
    vc_status st = d->n + 2 > d->cap_rows ? grow_rows(d) : VC_OK;
    if (st) return st;
    size_t tot = d->n ? (size_t)d->cu[d->n] : 0;
    if (!d->n) d->cu[0] = d->img_cu[0] = 0;
    if (tot + n > d->cap_tok) {
        d->cap_tok = (tot + n) * 2 + 1024;
        int32_t *a = realloc(d->ids, d->cap_tok * sizeof *a);
        if (a) d->ids = a;
        float *b = a ? realloc(d->mask, d->cap_tok * sizeof *b) : NULL;
        if (!a || !b) return vc_fail(VC_ERR_NOMEM, "out of memory");
        d->mask = b;
    }
    memcpy(d->ids + tot, r->ids + off, n * sizeof *d->ids);
    memcpy(d->mask + tot, r->mask + off, n * sizeof *d->mask);
    for (size_t i = 0; i < n; i++)
        if (r->ids[off + i] > d->max_id) d->max_id = r->ids[off + i];
    if ((int64_t)n > d->longest) d->longest = (int64_t)n;
    d->cu[++d->n] = (int64_t)(tot + n);
    return VC_OK;
}

/* row d->n - 1's images (sources copied: the rows are freed after loading), its image span and source line */
static vc_status append_images(sft_data *d, const row_opts *ro, int64_t span, int64_t line) {
    size_t i = d->n - 1, at = (size_t)d->img_cu[i];
    d->img_cu[i + 1] = (int64_t)(at + (size_t)ro->n_img);
    d->span[i] = span, d->line[i] = line;
    if (!ro->n_img) return VC_OK;
    if (at + (size_t)ro->n_img > d->cap_img) {
        size_t cap = (at + (size_t)ro->n_img) * 2 + 16;
        vc_rl_image *a = realloc(d->img, cap * sizeof *a);
        if (!a) return vc_fail(VC_ERR_NOMEM, "out of memory");
        d->img = a, d->cap_img = cap;
    }
    for (int k = 0; k < ro->n_img; k++) { /* (a frame list's video has no src) */
        vc_rl_image *e = &d->img[at + (size_t)k];
        *e = ro->img[k];
        e->src = ro->img[k].src ? vc_strdup(ro->img[k].src) : NULL;
        e->video = ro->img[k].video ? cJSON_Duplicate(ro->img[k].video, 1) : NULL;
        d->n_img = at + (size_t)k + 1; /* (the copies so far are freed with d) */
        if ((ro->img[k].src && !e->src) || (ro->img[k].video && !e->video))
            return vc_fail(VC_ERR_NOMEM, "out of memory");
    }
    return VC_OK;
}

/* a row with images or videos: its pad tokens are theirs (the tokenizer has each pad as one token) and the kept window
 * [off, off + n) holds them all (verl's truncation would hand the model fewer image tokens than features: refused
 * rather than cut); *span the tokens up to the end of the last image or video run */
static vc_status check_image_tokens(const vc_sft_config *c, const sft_tok *tk, const char *path, int64_t line,
                                    const sft_rowbuf *r, const row_opts *ro, size_t off, size_t n, int64_t *span) {
    int64_t want[2] = { 0, 0 }, got[2] = { 0, 0 }, kept = 0;
    *span = 0;
    if (!ro->n_img) return VC_OK;
    for (int k = 0; k < ro->n_img; k++) want[ro->img[k].video != NULL] += ro->img[k].tokens;
    for (size_t t = 0; t < r->n; t++) {
        int v = ro->n_vid && r->ids[t] == tk->video_pad_id;
        if (r->ids[t] != tk->pad_id && !v) continue;
        got[v]++;
        if (t >= off && t < off + n) kept++, *span = (int64_t)(t - off) + 1;
    }
    for (int v = 0; v < 2; v++)
        if (got[v] != want[v]) {
            const char *pad = v ? tk->video_pad : tk->pad;
            return vc_fail(VC_ERR_FORMAT, "%s:%lld: %lld %s tokens in the row's ids for %lld in its text (the "
                           "tokenizer must have %s as one added token)", path, (long long)line, (long long)got[v], pad,
                           (long long)want[v], pad);
        }
    if (kept != want[0] + want[1])
        return vc_fail(VC_ERR_ARG, "%s:%lld: truncation=%s to max_length %lld would cut the row's image tokens (%lld "
                       "of %lld kept): raise data.max_length or drop the row", path, (long long)line, c->truncation,
                       (long long)c->max_length, (long long)kept, (long long)(want[0] + want[1]));
    return VC_OK;
}

/* truncation and the "has a target" check for one tokenised row */
static vc_status finish_row(const vc_sft_config *c, const sft_tok *tk, const char *path, int64_t line,
                            const sft_rowbuf *r, const row_opts *ro, sft_data *d) {
    size_t off = 0, n = r->n;
    if ((int64_t)n > c->max_length) {
        if (!strcmp(c->truncation, "left")) off = n - (size_t)c->max_length;
        else if (strcmp(c->truncation, "right"))
            return vc_fail(VC_ERR_ARG, "%s:%lld: %zu tokens exceed max_length %lld (truncation=error; use left or right)",
                           path, (long long)line, n, (long long)c->max_length);
        n = (size_t)c->max_length;
    }
    int64_t span = 0;
    vc_status st = check_image_tokens(c, tk, path, line, r, ro, off, n, &span);
    if (st) return st;
    if (n < r->n) d->n_truncated++;
    double targets = 0;
    for (size_t i = off + 1; i < off + n; i++) targets += r->mask[i];
    if (targets <= 0) {
        d->n_no_target++;
        return VC_OK;
    }
    if ((st = data_append(d, r, off, n))) return st;
    return append_images(d, ro, span, line);
}

/* a row's images (tk->image_key) and videos (tk->video_key): with any, *vm its messages with content lists and
 * ro->img / n_img their entries in marker order (parsed: sources into the row, grids; a video's entries its frame
 * groups'); refused naming the row when the model takes neither or the row is a prompt/response row (verl's SFTDataset
 * has no images) */
static vc_status row_images(const sft_tok *tk, const cJSON *row, const cJSON *msgs, const char *where, row_opts *ro,
                            cJSON **vm, int *fatal) {
    const char *key = tk->image_key, *vkey = tk->video_key ? tk->video_key : "videos";
    const cJSON *im = key ? cJSON_GetObjectItemCaseSensitive(row, key) : NULL;
    const cJSON *vid = cJSON_GetObjectItemCaseSensitive(row, vkey);
    *vm = NULL;
    if (cJSON_IsNull(im)) im = NULL;
    if (cJSON_IsNull(vid)) vid = NULL;
    if (im && !cJSON_IsArray(im))
        return vc_fail(VC_ERR_FORMAT, "%s: %s must be a list of images (paths or {bytes, path} objects)", where, key);
    if (vid && !cJSON_IsArray(vid))
        return vc_fail(VC_ERR_FORMAT, "%s: %s must be a list of videos (paths, frame lists or {\"video\": ...} "
                       "objects)", where, vkey);
    int n = im ? cJSON_GetArraySize(im) : 0, nv = vid ? cJSON_GetArraySize(vid) : 0;
    if (!n && !nv) return VC_OK;
    /* (not a bad row to skip: the model or the row kind takes none) */
    *fatal = !tk->vl || !msgs || (nv && !tk->vv);
    const char *what = n ? key : vkey;
    if (!tk->vl)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: %s: the row has %d %s%s but %s (image inputs need a Qwen2-VL / "
                       "Qwen2.5-VL / Qwen3-VL model with a preprocessor_config.json)", where, what, n ? n : nv,
                       n ? "image" : "video", (n ? n : nv) == 1 ? "" : "s",
                       tk->no_image_reason ? tk->no_image_reason : "the model takes no image inputs");
    if (!msgs)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: %s: %s in a prompt/response row are not built (verl's SFTDataset "
                       "takes none): use a messages row with <image> / <video> markers", where, what,
                       n ? "images" : "videos");
    vc_rl_image *img = NULL;
    char *order = NULL;
    int n_out = 0;
    vc_status st = vc_vl_build_messages(msgs, n, nv, where, key, vkey, vm, &order);
    if (!st) st = vc_vl_parse_visuals(im, vid, order, tk->vl, 0, tk->vv, tk->no_video_reason, where, key, vkey, &img,
                                      &n_out);
    free(order);
    ro->img = img, ro->n_img = img ? n_out : 0, ro->n_vid = nv;
    return st;
}

/* tools: a list of schemas, or a JSON string of one (parquet conversions store them so); enable_thinking:
 * a bool; absent or null fields leave the template's defaults */
static vc_status row_options(const vc_sft_config *c, const cJSON *row, row_opts *ro, cJSON **parsed) {
    const cJSON *t = c->tools_key ? cJSON_GetObjectItemCaseSensitive(row, c->tools_key) : NULL;
    const cJSON *th = c->enable_thinking_key ? cJSON_GetObjectItemCaseSensitive(row, c->enable_thinking_key) : NULL;
    if (cJSON_IsString(t)) t = *parsed = cJSON_Parse(t->valuestring);
    if (t && !cJSON_IsNull(t) && !cJSON_IsArray(t))
        return vc_fail(VC_ERR_FORMAT, "'%s' must be a list of tool schemas", c->tools_key);
    ro->tools = cJSON_IsArray(t) && cJSON_GetArraySize(t) > 0 ? t : NULL;
    if (th && !cJSON_IsNull(th) && !cJSON_IsBool(th))
        return vc_fail(VC_ERR_FORMAT, "'%s' must be true or false", c->enable_thinking_key);
    ro->thinking = cJSON_IsBool(th) ? cJSON_IsTrue(th) : -1;
    const char *d = c->enable_thinking_default;
    if (ro->thinking < 0 && d && strcasecmp(d, "none") && strcasecmp(d, "null")) {
        if (!strcasecmp(d, "true")) ro->thinking = 1;
        else if (!strcasecmp(d, "false")) ro->thinking = 0;
        else return vc_fail(VC_ERR_ARG, "data.enable_thinking_default=%s: true, false or none", d);
    }
    return VC_OK;
}

vc_status sft_data_load(const vc_sft_config *c, const char *path, const sft_tok *tk, sft_data *d) {
    memset(d, 0, sizeof *d);
    vc_jsonl *j = NULL;
    vc_status st = vc_jsonl_read(path, c->skip_bad_lines ? VC_JSONL_SKIP_BAD : VC_JSONL_STRICT, &j);
    if (st) return st;
    d->n_bad_lines = j->n_skipped;
    for (size_t i = 0; i < j->n_bad; i++) vc_warn("skipped malformed line: %s", j->bad[i].message);
    sft_rowbuf r = { 0 };
    char where[512];
    sft_turn_probe tp = { 0 }; /* verl's probes of the template (failing: the whole conversation's way) */
    if (tk->tmpl && c->multiturn != 0 && sft_turn_probe_init(tk, &tp))
        vc_warn("sft: the chat template fails on verl's probe turns (%s); messages rows are split from the whole "
                "conversation", vc_last_error());
    for (size_t i = 0; i < j->n_rows && !st; i++) {
        r.n = 0;
        snprintf(where, sizeof where, "%s:%lld", path, (long long)j->lines[i]);
        const cJSON *msgs = c->multiturn ? cJSON_GetObjectItemCaseSensitive(j->rows[i], c->messages_key) : NULL;
        cJSON *parsed = NULL, *vm = NULL;
        int fatal = 0;
        row_opts ro = NO_OPTS;
        ro.where = where;
        if (c->multiturn == 1 && !cJSON_IsArray(msgs)) {
            st = vc_fail(VC_ERR_FORMAT, "data.multiturn.enable=true: the row has no '%s' list", c->messages_key);
            goto row_done;
        }
        if (cJSON_IsArray(msgs)) st = row_options(c, j->rows[i], &ro, &parsed);
        if (!st) st = row_images(tk, j->rows[i], cJSON_IsArray(msgs) ? msgs : NULL, where, &ro, &vm, &fatal);
        if (!st)
            st = !cJSON_IsArray(msgs)                                       ? prompt_response_row(c, tk, j->rows[i], &r)
                 : verl_row(c, tk, &tp, vm ? vm : msgs, &ro, &r, &st, &fatal) ? st
                                                                             : messages_row(tk, vm ? vm : msgs, &ro, &r);
        cJSON_Delete(parsed);
        cJSON_Delete(vm);
    row_done:
        if (st && st != VC_ERR_NOMEM && !fatal && c->skip_bad_lines) {
            if (d->n_bad_rows++ < 8) vc_warn("%s: skipped row: %s", where, vc_last_error());
            st = VC_OK;
        } else if (st) {
            if (strncmp(vc_last_error(), where, strlen(where))) vc_fail_ctx(st, "%s", where);
        } else st = finish_row(c, tk, path, j->lines[i], &r, &ro, d);
        free((void *)ro.img);
    }
    free(r.ids);
    free(r.mask);
    vc_jsonl_free(j);
    if (!st && d->n == 0) st = vc_fail(VC_ERR_ARG, "%s: no usable rows", path);
    if (st) sft_data_free(d);
    return st;
}

void sft_data_free(sft_data *d) {
    for (size_t k = 0; k < d->n_img; k++) free((void *)d->img[k].src), cJSON_Delete((cJSON *)d->img[k].video);
    free(d->img);
    free(d->img_cu);
    free(d->span);
    free(d->line);
    free(d->cu);
    free(d->ids);
    free(d->mask);
    memset(d, 0, sizeof *d);
}
