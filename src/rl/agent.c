/* Multi-turn rollouts with tools (verl's ToolAgentLoop, agent_name "tool_agent"). For each response:
 * the prompt's messages are rendered with the tools' schemas; the model generates; hermes tool calls in
 * the new text (up to multi_turn.max_parallel_calls) are run and their responses appended as
 * {"role": "tool"} messages, rendered alone with the generation prompt and with the template's default
 * system prompt cut off (verl's remove_system_prompt). The tool tokens are part of the response with
 * mask 0 and log-prob 0, so the loss skips them. The loop ends when the model calls no tool, at
 * max_assistant_turns / max_user_turns, or when the response would reach max_response_length (a tool
 * response that does not fit is not appended, as in verl). Rows whose agent is single_turn_agent run
 * one generation of their dataset prompt, exactly as without the agent. A prompt with images is rendered with the
 * tools from its content-list messages, its pads expanded as the processor does; every turn's request carries its
 * images (the engine computes such a prompt whole), and so does each response of the batch for the trainer.
 * All responses of a batch advance turn by turn together: each turn is one call of the rollout engine. */
#include "agent_internal.h"
#include "data/vl_rows.h"
#include "tool_parser.h"
#include "trainer_internal.h"
#include "verlc/chat_template.h"
#include "verlc/tokenizer.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALLS 16

struct rl_agent {
    int default_tools;          /* rows without agent_name run the tool agent */
    int max_assistant, max_user, max_parallel, max_tool_len, trunc;
    int format;                 /* multi_turn.format (RL_TF_*) */
    int32_t *stops;             /* the generation's stop tokens: EOS, and the format's own (n_stops) */
    int n_stops;
    rl_tool *tools;
    int n_tools;
    rl_interaction *inter;      /* interaction_config_path (NULL: none) */
    int n_inter;
    cJSON *schemas;             /* NULL without a tool config */
    int32_t *sys;               /* the template's default system prompt tokens */
    size_t n_sys;
    double turns_sum, turns_n, turns_min, turns_max; /* num_turns of the last rollout */
};

void rl_agent_free(rl_agent *a) {
    if (!a) return;
    rl_tools_free(a->tools, a->n_tools);
    rl_interactions_free(a->inter, a->n_inter);
    cJSON_Delete(a->schemas);
    free(a->sys);
    free(a->stops);
    free(a);
}

/* messages -> tokens through the chat template (no special tokens added, as apply_chat_template); with images
 * (im[n_im], content-list messages) each image's pad token repeated for its grid first, as the processor expands
 * it; where names the row */
static vc_status render_ids(const vc_rl_trainer *t, const cJSON *msgs, const cJSON *tools, int gen,
                            const vc_rl_image *im, int n_im, const char *where, int32_t **ids, size_t *n) {
    char *text = NULL, *full = NULL;
    vc_chat_opts o = { .add_generation_prompt = gen, .enable_thinking = -1, .tools = tools, .extra = t->chat_kwargs };
    vc_status st = vc_chat_template_render(t->tmpl, msgs, &o, &text);
    const vc_model_config *mc = n_im && t->actor ? vc_model_cfg(t->actor) : NULL;
    const char *pad = mc && mc->image_id >= 0 ? vc_tokenizer_id_to_token(t->tok, mc->image_id) : NULL;
    const char *vpad = mc && mc->video_id >= 0 ? vc_tokenizer_id_to_token(t->tok, mc->video_id) : NULL;
    int videos = 0; /* (as the dataset renders it: a video pad is a pad only in a row with videos) */
    for (int k = 0; k < n_im; k++) videos |= im[k].video != NULL;
    vc_vl_pads pads = { pad ? pad : VC_VL_IMAGE_TOKEN, videos ? (vpad ? vpad : VC_VL_VIDEO_TOKEN) : NULL };
    if (mc) vc_vl_pads_model(&pads, mc, t->tok);
    if (!st && n_im) st = vc_vl_expand_visuals(text, &pads, im, n_im, 1, where, &full, NULL);
    if (!st) st = vc_tokenizer_encode(t->tok, full ? full : text, strlen(full ? full : text), 0, ids, n);
    free(text);
    free(full);
    return st;
}

static void row_where(const vc_rl_dataset *d, const vc_rl_prompt *p, char *buf, size_t cap) {
    snprintf(buf, cap, "%s:%lld", d->rows ? d->rows->path : "data", (long long)p->line);
}

/* verl's initialize_system_prompt: what one empty user turn renders to beyond what a second one adds */
static vc_status system_prompt(const vc_rl_trainer *t, rl_agent *a) {
    cJSON *one = cJSON_Parse("[{\"role\":\"user\",\"content\":\"\"}]");
    cJSON *two = cJSON_Parse("[{\"role\":\"user\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"}]");
    int32_t *t1 = NULL, *t2 = NULL;
    size_t n1 = 0, n2 = 0;
    vc_status st = one && two ? render_ids(t, one, NULL, 0, NULL, 0, NULL, &t1, &n1) : VC_ERR_NOMEM;
    if (!st) st = render_ids(t, two, NULL, 0, NULL, 0, NULL, &t2, &n2);
    if (!st) {
        size_t turn = n2 > n1 ? n2 - n1 : 0;
        a->n_sys = n1 > turn ? n1 - turn : 0;
        a->sys = t1;
        t1 = NULL;
    }
    free(t1);
    free(t2);
    cJSON_Delete(one);
    cJSON_Delete(two);
    return st;
}

/* the rollout's EOS ids, and the format's stop token when the tokenizer has it (verl adds the parser's
 * stop_token_ids to the tool agent's sampling) */
static vc_status stop_tokens(const vc_rl_trainer *t, rl_agent *a) {
    const char *tok = rl_tool_format_stop(a->format);
    int id = tok ? vc_tokenizer_token_to_id(t->tok, tok) : -1;
    if (id < 0) return VC_OK;
    a->stops = vc_calloc((size_t)t->samp.n_eos + 1, sizeof *a->stops);
    if (!a->stops) return VC_ERR_NOMEM;
    for (int i = 0; i < t->samp.n_eos; i++) a->stops[a->n_stops++] = t->samp.eos_ids[i];
    a->stops[a->n_stops++] = id;
    return VC_OK;
}

#define MT "actor_rollout_ref.rollout.multi_turn."
vc_status rl_agent_open(vc_rl_trainer *t, const vc_config *c) {
    int enable = 0;
    const char *tool_path = NULL, *def = "single_turn_agent", *side = "middle", *fmt = "hermes", *inter = NULL;
    const char *fn_path = NULL; /* later verl's function_tool_path */
    int64_t ma = 0, mu = 0, mp = 1, ml = 256;
    vc_status st = vc_config_get_bool_or(c, MT "enable", 0, &enable);
    if (!st) st = vc_config_get_str_or(c, MT "tool_config_path", NULL, &tool_path);
    if (!st) st = vc_config_get_str_or(c, "actor_rollout_ref.rollout.agent.default_agent_loop", def, &def);
    if (!st) st = vc_config_get_int_or(c, MT "max_assistant_turns", 0, &ma);
    if (!st) st = vc_config_get_int_or(c, MT "max_user_turns", 0, &mu);
    if (!st) st = vc_config_get_int_or(c, MT "max_parallel_calls", 1, &mp);
    if (!st) st = vc_config_get_int_or(c, MT "max_tool_response_length", 256, &ml);
    if (!st) st = vc_config_get_str_or(c, MT "tool_response_truncate_side", "middle", &side);
    if (!st) st = vc_config_get_str_or(c, MT "format", "hermes", &fmt);
    if (!st) st = vc_config_get_str_or(c, MT "interaction_config_path", NULL, &inter);
    if (!st) st = vc_config_get_str_or(c, MT "function_tool_path", NULL, &fn_path);
    if (!st && !fn_path) st = vc_config_get_str_or(c, "data.function_tool_path", NULL, &fn_path);
    if (st) return st;
    int have_tools = tool_path || fn_path;
    int tool_default = !strcmp(def, "tool_agent");
    if (!tool_default && strcmp(def, "single_turn_agent"))
        return vc_fail(VC_ERR_UNSUPPORTED, "actor_rollout_ref.rollout.agent.default_agent_loop=%s: verlc runs "
                                           "single_turn_agent and tool_agent", def);
    if (!enable && !have_tools && !tool_default) return VC_OK;
    int format = RL_TF_HERMES;
    if ((st = rl_tool_format_parse(fmt, &format))) return st;
    if (mp < 1 || mp > MAX_CALLS) return vc_fail(VC_ERR_ARG, MT "max_parallel_calls must be in 1..%d, got %lld", MAX_CALLS, (long long)mp);
    int trunc = !strcmp(side, "left") ? RL_TRUNC_LEFT : !strcmp(side, "right") ? RL_TRUNC_RIGHT
              : !strcmp(side, "middle") ? RL_TRUNC_MIDDLE : -1;
    if (trunc < 0) return vc_fail(VC_ERR_ARG, MT "tool_response_truncate_side must be left, right or middle, got '%s'", side);
    rl_agent *a = vc_calloc(1, sizeof *a);
    if (!a) return VC_ERR_NOMEM;
    /* verl's agent loop picks the agent by the row's agent_name (default single_turn_agent); multi_turn.enable
     * with a tool config means tools for every row here, which is what that setting asks for */
    a->default_tools = tool_default || (enable && have_tools);
    a->max_assistant = (int)ma;
    a->max_user = (int)mu;
    a->max_parallel = (int)mp;
    a->max_tool_len = (int)ml;
    a->trunc = trunc;
    a->format = format;
    if (!st) st = stop_tokens(t, a);
    if (!st && tool_path) st = rl_tools_load(tool_path, &a->tools, &a->n_tools, &a->schemas);
    if (!st && fn_path && !a->schemas && !(a->schemas = cJSON_CreateArray())) st = VC_ERR_NOMEM;
    if (!st && fn_path) st = rl_function_tools_load(fn_path, &a->tools, &a->n_tools, a->schemas);
    if (!st && inter) st = rl_interactions_load(inter, &a->inter, &a->n_inter);
    if (!st) st = system_prompt(t, a);
    if (st) {
        rl_agent_free(a);
        return vc_fail_ctx(st, "multi-turn agent");
    }
    if (enable && !have_tools && !tool_default)
        vc_warn(MT "enable=true without tool_config_path or function_tool_path: responses are single-turn");
    t->agent = a;
    return VC_OK;
}

/* whether a data row runs the tool agent (its agent_name, else the default) */
static vc_status row_tools(const rl_agent *a, const vc_rl_prompt *p, int *tools) {
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(p->row, "agent_name");
    *tools = a->default_tools;
    if (!an) return VC_OK;
    if (cJSON_IsString(an) && !strcmp(an->valuestring, "tool_agent")) *tools = 1;
    else if (cJSON_IsString(an) && !strcmp(an->valuestring, "single_turn_agent")) *tools = 0;
    else return vc_fail(VC_ERR_UNSUPPORTED, "data line %lld: agent_name must be tool_agent or single_turn_agent", (long long)p->line);
    return VC_OK;
}

/* the source pixels of a row's zoom image: a prompt image's when the same source, else decoded here */
static vc_status zoom_source_size(const vc_rl_prompt *p, const cJSON *img, const char *what, int *w, int *h) {
    const char *src = NULL;
    vc_status st = vc_vl_value_source(img, what, &src);
    *w = *h = 0;
    for (int j = 0; !st && j < p->n_images && !*w; j++)
        if (p->images[j].src && !strcmp(p->images[j].src, src)) *w = p->images[j].width, *h = p->images[j].height;
    if (st || *w > 0) return st;
    vc_image im;
    if ((st = vc_vl_decode_value(img, what, &im))) return st;
    *w = im.width, *h = im.height;
    vc_image_free(&im);
    return VC_OK;
}

vc_status rl_agent_tool_images(const vc_rl_trainer *t, const vc_rl_dataset *d, const vc_rl_prompt *p, int64_t max_resp,
                               int32_t grid[3], int *k) {
    const rl_agent *a = t->agent;
    int tools = 0;
    grid[0] = grid[1] = grid[2] = 0, *k = 0;
    if (!a || !d || !d->vl || max_resp < 2) return VC_OK;
    vc_status st = row_tools(a, p, &tools);
    if (st || !tools) return st;
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p->row, "extra_info"), "tools_kwargs");
    int64_t most = 0; /* patches of the largest crop */
    for (int i = 0; i < a->n_tools; i++) {
        if (a->tools[i].kind != RL_TOOL_ZOOM) continue; /* the one tool that returns images */
        const cJSON *ck = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tk, a->tools[i].name), "create_kwargs");
        const cJSON *img = cJSON_GetObjectItemCaseSensitive(ck, "image");
        if (!img || cJSON_IsNull(img)) continue; /* the call answers with an error text */
        char what[400];
        snprintf(what, sizeof what, "data line %lld: extra_info.tools_kwargs.%s.create_kwargs.image", (long long)p->line,
                 a->tools[i].name);
        int w, h;
        if ((st = zoom_source_size(p, img, what, &w, &h))) return st;
        int64_t n = rl_zoom_patches_bound(d->vl, w, h);
        if (n > most) most = n;
    }
    if (!most) return VC_OK;
    /* a grid of at least that many patches, sides in whole merge blocks; InternVL's: its most tiles and the thumbnail */
    const vc_vl_image_config *c = d->vl;
    int64_t M = c->merge_size, gt = 1, gh = M * (int64_t)ceil(sqrt((double)most) / (double)M);
    int64_t gw = M * ((most + gh * M - 1) / (gh * M));
    if (c->got) gt = c->max_tiles > 1 ? c->max_tiles + 1 : 1, gh = c->fixed_h / c->patch_size, gw = c->fixed_w / c->patch_size;
    int64_t tokens = gt * gh * gw / (M * M) + 1;
    /* tool turns are appended only while the response stays under max_resp tokens, each image with its pads and more;
     * and there are no more of them than assistant turns times calls per turn */
    int64_t n = (max_resp - 1) / tokens;
    if (a->max_assistant > 0 && n > (int64_t)a->max_assistant * a->max_parallel) n = (int64_t)a->max_assistant * a->max_parallel;
    grid[0] = (int32_t)gt, grid[1] = (int32_t)gh, grid[2] = (int32_t)gw;
    *k = (int)(n < 1 << 20 ? n : 1 << 20);
    return VC_OK;
}

/* ---- one response's state ---- */
typedef struct {
    int32_t *ids;   /* prompt + response so far */
    int64_t n, plen;
    float *mask, *lp; /* per response token */
    int prompt, tools, done, finish, turns_a, turns_u;
    rl_interaction *inter; /* the row's interaction (NULL: none) */
    const cJSON *ikw;      /* its extra_info.interaction_kwargs */
    cJSON *msgs;           /* with an interaction: verl's agent messages (prompt, assistant, tool, user turns) */
    char rid[48];          /* the interaction's instance id */
    vc_images own;         /* once a tool returned an image: the prompt's images, then the tools' (grid, pixels owned) */
    int64_t span;          /* ... and the tokens they lie in (up to the last tool turn with an image) */
} ag_state;

/* the row's interaction (extra_info.interaction_kwargs: name, ...), as verl requires it, started for this
 * response (id: step and response) */
static vc_status row_interaction(const rl_agent *a, const vc_rl_prompt *p, uint64_t step_key, int i, ag_state *s) {
    const cJSON *ei = cJSON_GetObjectItemCaseSensitive(p->row, "extra_info");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(ei, "interaction_kwargs");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(kw, "name");
    if (!cJSON_IsString(name))
        return vc_fail(VC_ERR_MISSING, "data line %lld: extra_info.interaction_kwargs.name is required with an "
                                       "interaction config", (long long)p->line);
    for (int k = 0; k < a->n_inter; k++)
        if (!strcmp(a->inter[k].name, name->valuestring)) s->inter = &a->inter[k];
    if (!s->inter)
        return vc_fail(VC_ERR_ARG, "data line %lld: interaction '%s' is not in the interaction config", (long long)p->line,
                       name->valuestring);
    s->ikw = kw;
    /* verl's raw_prompt: with images, the content-list messages */
    if (!(s->msgs = cJSON_Duplicate(p->vl_messages ? p->vl_messages : p->messages, 1))) return VC_ERR_NOMEM;
    snprintf(s->rid, sizeof s->rid, "%llx-%d", (unsigned long long)step_key, i);
    vc_status st = rl_interaction_start(s->inter, s->rid, kw);
    return st ? vc_fail_ctx(st, "data line %lld", (long long)p->line) : VC_OK;
}

/* {"role": role, "content": text}, or with an image the content list [{"type": "image"}, {"type": "text", ...}]
 * (verl's tool message for a response with an image; the text item only when there is text) */
static cJSON *message(const char *role, const char *text, int image) {
    cJSON *m = cJSON_CreateObject(), *c = image ? cJSON_AddArrayToObject(m, "content") : NULL, *it;
    int ok = m && cJSON_AddStringToObject(m, "role", role);
    if (ok && !image) ok = cJSON_AddStringToObject(m, "content", text) != NULL;
    if (ok && image) {
        ok = c && (it = cJSON_CreateObject()) && (cJSON_AddItemToArray(c, it), cJSON_AddStringToObject(it, "type", "image"));
        if (ok && *text)
            ok = (it = cJSON_CreateObject()) && (cJSON_AddItemToArray(c, it), cJSON_AddStringToObject(it, "type", "text")) &&
                 cJSON_AddStringToObject(it, "text", text);
    }
    if (!ok) cJSON_Delete(m);
    return ok ? m : NULL;
}

/* appends a message to the response's messages (kept with an interaction only) */
static vc_status add_msg(ag_state *s, const char *role, const char *text) {
    if (!s->msgs) return VC_OK;
    cJSON *m = message(role, text, 0);
    if (!m) return VC_ERR_NOMEM;
    cJSON_AddItemToArray(s->msgs, m);
    return VC_OK;
}

/* the time steps of n entries and `more` entries of step 1 after them (malloc'd) */
static float *ts_copy(const float *ts, int n, int more) {
    float *o = vc_malloc(sizeof(float) * (size_t)(n + more + 1));
    for (int k = 0; o && k < n + more; k++) o[k] = k < n ? ts[k] : 1.0f;
    return o;
}

/* appends n processed tool images to the response's own images (the prompt's first, from im) */
static vc_status add_images(ag_state *s, rl_images *im, const vc_vl_pixels *px, int n) {
    const vc_images *base = NULL;
    vc_status st = s->own.n ? VC_OK : rl_images_get(im, s->prompt, &base);
    if (st) return st;
    if (!s->own.n && base) { /* the prompt's images first */
        int64_t rows = vc_images_rows(base, base->n);
        int32_t *g = vc_malloc(12 * (size_t)base->n);
        float *p = vc_malloc(sizeof(float) * (size_t)(rows * base->row) + 4);
        if (!g || !p) {
            free(g), free(p);
            return VC_ERR_NOMEM;
        }
        memcpy(g, base->grid, 12 * (size_t)base->n);
        memcpy(p, base->pixels, sizeof(float) * (size_t)(rows * base->row));
        s->own = (vc_images){ base->n, g, p, base->row };
        if (base->t_scale && !(s->own.t_scale = ts_copy(base->t_scale, base->n, 0))) return VC_ERR_NOMEM;
    }
    int64_t rows = vc_images_rows(&s->own, s->own.n), add = 0;
    for (int k = 0; k < n; k++) {
        if (s->own.n && px[k].cols != s->own.row) return vc_fail(VC_ERR_SHAPE, "a tool image of %lld values a patch "
                                                                 "beside images of %lld", (long long)px[k].cols, (long long)s->own.row);
        add += px[k].rows;
    }
    int64_t row = n ? px[0].cols : s->own.row;
    int32_t *g = realloc((void *)s->own.grid, 12 * (size_t)(s->own.n + n));
    if (g) s->own.grid = g;
    float *p = g ? realloc((void *)s->own.pixels, sizeof(float) * (size_t)((rows + add) * row) + 4) : NULL;
    if (!p) return VC_ERR_NOMEM;
    s->own.pixels = p;
    for (int k = 0; k < n; k++) {
        g[3 * (s->own.n + k)] = px[k].grid_t, g[3 * (s->own.n + k) + 1] = px[k].grid_h, g[3 * (s->own.n + k) + 2] = px[k].grid_w;
        memcpy(p + rows * row, px[k].data, sizeof(float) * (size_t)(px[k].rows * row));
        rows += px[k].rows;
    }
    if (s->own.t_scale) { /* (the tools' images: a step of 1) */
        float *ts = ts_copy(s->own.t_scale, s->own.n, n);
        if (!ts) return VC_ERR_NOMEM;
        free((void *)s->own.t_scale);
        s->own.t_scale = ts;
    }
    s->own.n += n;
    s->own.row = row;
    return VC_OK;
}

static vc_status push(ag_state *s, const int32_t *tok, const float *lp, int64_t k, int gen, int64_t cap) {
    int32_t *ids = realloc(s->ids, sizeof(int32_t) * (size_t)(s->n + k + 1));
    if (!ids) return VC_ERR_NOMEM;
    s->ids = ids;
    int64_t r = s->n - s->plen;
    for (int64_t j = 0; j < k && r + j < cap; j++) {
        s->mask[r + j] = (float)gen;
        s->lp[r + j] = gen ? lp[j] : 0.0f;
    }
    memcpy(s->ids + s->n, tok, sizeof(int32_t) * (size_t)k);
    s->n += k;
    return VC_OK;
}

/* one call's response into the turn's messages (and the response's own, with an interaction); an image it returned
 * through the image processor into px[*n_px] (its pads expanded as verl's processor call expands them) */
static vc_status tool_response(vc_rl_trainer *t, const rl_agent *a, const vc_rl_dataset *d, const vc_rl_prompt *p,
                               ag_state *s, rl_tool_call *call, cJSON *msgs, vc_vl_pixels *px, vc_rl_image *pi, int *n_px) {
    char *resp = NULL, *cut = NULL, where[600];
    double reward = 0;
    vc_image img = { 0 };
    row_where(d, p, where, sizeof where);
    vc_status st = rl_tool_run(a->tools, a->n_tools, call, p->row, where, &resp, &reward, &img);
    if (!st && !(cut = rl_truncate_tool_text(resp, a->max_tool_len, a->trunc))) st = VC_ERR_NOMEM;
    if (!st && img.width && !d->vl)
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: tool %s returned an image, but the model takes no images (verl: use a "
                     "vision-language model)", where, call->name);
    if (!st && img.width) {
        char what[700];
        snprintf(what, sizeof what, "%s: the image of tool %s", where, call->name);
        if (!(st = vc_vl_image_process(d->vl, &img, what, &px[*n_px]))) {
            pi[*n_px] = (vc_rl_image){ .grid = { px[*n_px].grid_t, px[*n_px].grid_h, px[*n_px].grid_w },
                                       .tokens = vc_vl_image_tokens(&px[*n_px], d->vl->merge_size) };
            ++*n_px;
        }
    }
    cJSON *m = st ? NULL : message("tool", cut, img.width > 0);
    if (!st && !m) st = VC_ERR_NOMEM;
    if (m && s->msgs) cJSON_AddItemToArray(s->msgs, cJSON_Duplicate(m, 1));
    if (m) cJSON_AddItemToArray(msgs, m);
    vc_image_free(&img);
    free(resp);
    free(cut);
    return st;
}

/* the tool calls of a generation's text (at most max_parallel_calls) into calls[]; how many */
static int parse_calls(vc_rl_trainer *t, const rl_agent *a, const int32_t *gen, int64_t ng, rl_tool_call *calls,
                       vc_status *st) {
    char *text = NULL;
    size_t len = 0;
    *st = vc_tokenizer_decode(t->tok, gen, (size_t)ng, 0, &text, &len);
    int pad = vc_tokenizer_pad_id(t->tok);
    int nc = *st ? 0 : rl_parse_tool_calls_as(a->format, text, pad >= 0 ? vc_tokenizer_id_to_token(t->tok, pad) : NULL,
                                              a->schemas, calls, a->max_parallel, NULL);
    if (nc < 0) nc = 0, *st = VC_ERR_NOMEM;
    free(text);
    return nc;
}

static void free_calls(rl_tool_call *calls, int n) {
    for (int i = 0; i < n; i++) cJSON_Delete(calls[i].args), free(calls[i].text), calls[i].args = NULL, calls[i].text = NULL;
}

/* after a generation: run its tool calls (nc of them; freed here) and append their rendered responses (and images) */
static vc_status tool_turn(vc_rl_trainer *t, const rl_agent *a, const vc_rl_dataset *d, int prompt, ag_state *s,
                           rl_tool_call *calls, int nc, int64_t max_resp) {
    const vc_rl_prompt *p = &d->p[prompt];
    char where[512];
    vc_vl_pixels px[MAX_CALLS];
    vc_rl_image pi[MAX_CALLS];
    int n_px = 0;
    vc_status st = VC_OK;
    cJSON *msgs = cJSON_CreateArray();
    if (!msgs) st = VC_ERR_NOMEM;
    for (int i = 0; i < nc; i++)
        if (!st) st = tool_response(t, a, d, p, s, &calls[i], msgs, px, pi, &n_px);
    free_calls(calls, nc);
    int32_t *ids = NULL;
    size_t n = 0;
    row_where(d, p, where, sizeof where);
    if (!st) st = render_ids(t, msgs, NULL, 1, pi, n_px, where, &ids, &n);
    cJSON_Delete(msgs);
    size_t cut = !st && n >= a->n_sys ? a->n_sys : 0;
    int64_t add = (int64_t)(n - cut);
    if (!st && (s->n - s->plen) + add >= max_resp) s->done = 1; /* verl does not append what does not fit */
    else if (!st) {
        st = push(s, ids + cut, NULL, add, 0, max_resp);
        s->turns_u++; /* max_user_turns is checked after the next generation, as in verl */
        if (!st && n_px) { /* the images join the response's (verl's image_data) once the turn is appended */
            st = add_images(s, rl_images_for(t, d), px, n_px);
            s->span = s->n;
        }
    }
    for (int k = 0; k < n_px; k++) vc_vl_pixels_free(&px[k]);
    free(ids);
    return st;
}

/* verl's interacting state: the interaction answers the messages so far with a user turn (mask 0),
 * appended whatever the budget (the response is cut at max_response_length at the end, as in verl) */
static vc_status interaction_turn(vc_rl_trainer *t, const rl_agent *a, ag_state *s, int64_t max_resp) {
    int stop = 0;
    double score = 0;
    char *reply = NULL;
    vc_status st = rl_interaction_respond(s->inter, s->rid, s->msgs, s->ikw, &reply, &stop, &score);
    if (!st) st = add_msg(s, "user", reply);
    cJSON *msgs = st ? NULL : cJSON_Parse("[{\"role\":\"user\"}]");
    if (!st && (!msgs || !cJSON_AddStringToObject(cJSON_GetArrayItem(msgs, 0), "content", reply))) st = VC_ERR_NOMEM;
    free(reply);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!st) st = render_ids(t, msgs, NULL, 1, NULL, 0, NULL, &ids, &n);
    cJSON_Delete(msgs);
    size_t cut = !st && n >= a->n_sys ? a->n_sys : 0;
    if (!st) st = push(s, ids + cut, NULL, (int64_t)(n - cut), 0, max_resp);
    free(ids);
    s->turns_u++;
    if (stop || s->n - s->plen >= max_resp) s->done = 1;
    return st;
}

/* with an interaction, verl keeps the generation as an assistant message (decoded without special tokens) */
static vc_status assistant_msg(vc_rl_trainer *t, ag_state *s, const int32_t *gen, int64_t ng) {
    if (!s->msgs) return VC_OK;
    char *text = NULL;
    size_t len = 0;
    vc_status st = vc_tokenizer_decode(t->tok, gen, (size_t)ng, 1, &text, &len);
    if (!st) st = add_msg(s, "assistant", text);
    free(text);
    return st;
}

/* the samples of one engine call into their states; j-th request -> state req_state[j] (+ sample). The tool calls of
 * all samples are parsed first, so that calls to remote tools that keep no state (SandboxFusionTool) are made
 * together; then each sample's turn runs in order. */
static vc_status take_samples(vc_rl_trainer *t, const vc_rl_dataset *d, ag_state *S, const int *req_state,
                              const vc_rollout_sample *smp, int ns, const vc_sampling *sp, int64_t max_resp) {
    const rl_agent *a = t->agent;
    rl_tool_call(*calls)[MAX_CALLS] = vc_calloc((size_t)ns + 1, sizeof *calls);
    rl_tool_call **all = vc_calloc((size_t)ns * MAX_CALLS + 1, sizeof *all);
    const cJSON **rows = vc_calloc((size_t)ns * MAX_CALLS + 1, sizeof *rows); /* each call's data row */
    int *nc = vc_calloc((size_t)ns + 1, sizeof *nc), *go = vc_calloc((size_t)ns + 1, sizeof *go), n_all = 0;
    int64_t *kept = vc_calloc((size_t)ns + 1, sizeof *kept); /* the tokens each sample added */
    vc_status st = calls && all && rows && nc && go && kept ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < ns; i++) {
        ag_state *s = &S[req_state[smp[i].request] + smp[i].sample];
        int64_t room = max_resp - (s->n - s->plen), k = smp[i].n_tokens < room ? smp[i].n_tokens : room;
        if ((st = push(s, smp[i].tokens, rl_rollout_logp(t, &smp[i], sp), k, 1, max_resp))) break;
        kept[i] = k;
        s->finish = k < smp[i].n_tokens ? VC_FINISH_LENGTH : smp[i].finish;
        s->turns_a++;
        if (s->n - s->plen >= max_resp || !s->tools || (a->max_assistant && s->turns_a >= a->max_assistant) ||
            (a->max_user && s->turns_u >= a->max_user))
            s->done = 1;
        else {
            go[i] = 1;
            nc[i] = parse_calls(t, a, smp[i].tokens, k, calls[i], &st);
            for (int c = 0; c < nc[i]; c++) rows[n_all] = d->p[s->prompt].row, all[n_all++] = &calls[i][c];
        }
    }
    if (!st && n_all) st = rl_tools_prefetch(a->tools, a->n_tools, all, rows, n_all);
    for (int i = 0; !st && i < ns; i++) {
        if (!go[i]) continue;
        ag_state *s = &S[req_state[smp[i].request] + smp[i].sample];
        st = assistant_msg(t, s, smp[i].tokens, kept[i]);
        int n_calls = nc[i];
        if (!st && n_calls) st = tool_turn(t, a, d, s->prompt, s, calls[i], n_calls, max_resp);
        nc[i] = 0;
        if (!st && !n_calls && s->inter) st = interaction_turn(t, a, s, max_resp);
        else if (!st && !n_calls) s->done = 1;
    }
    for (int i = 0; calls && nc && i < ns; i++) free_calls(calls[i], nc[i]);
    free(calls), free(all), free(rows), free(nc), free(go), free(kept);
    return st;
}

static vc_status to_batch(vc_rl_trainer *t, const vc_rl_dataset *d, ag_state *S, int NS, int n_samples, uint64_t step_key,
                          int64_t max_resp, rl_batch *b) {
    int64_t tot = 0, T = 1;
    for (int i = 0; i < NS; i++) { /* responses past the budget (an interaction's last turn) are cut */
        if (S[i].n - S[i].plen > max_resp) S[i].n = S[i].plen + max_resp;
        tot += S[i].n;
        if (S[i].n - S[i].plen > T) T = S[i].n - S[i].plen;
    }
    vc_status st = rl_batch_alloc(b, NS, (int)T, tot);
    if (!st) b->imgs = rl_images_for(t, d); /* each row's images follow its prompt index ... */
    for (int i = 0; !st && i < NS; i++)
        if (S[i].own.n && !(st = rl_batch_rimg_alloc(b))) { /* ... or are its own, with the tools' */
            b->rimg[i] = S[i].own;
            b->rspan[i] = S[i].span;
            memset(&S[i].own, 0, sizeof S[i].own);
        }
    for (int i = 0; !st && i < NS; i++) {
        ag_state *s = &S[i];
        int64_t o = b->cu[i], r = s->n - s->plen;
        memcpy(b->ids + o, s->ids, sizeof(int32_t) * (size_t)s->n);
        b->cu[i + 1] = o + s->n;
        b->plen[i] = s->plen;
        b->rlen[i] = r;
        b->prompt[i] = s->prompt;
        b->finish[i] = s->finish;
        b->turns[i] = s->turns_a + s->turns_u + 1; /* verl's num_turns */
        memcpy(b->mask + (size_t)i * b->T, s->mask, sizeof(float) * (size_t)r);
        memcpy(b->rollout_logp + (size_t)i * b->T, s->lp, sizeof(float) * (size_t)r);
        char uid[64];
        snprintf(uid, sizeof uid, "%llu:%d", (unsigned long long)step_key, i / n_samples);
        size_t len = 0;
        if (!(b->uid[i] = vc_strdup(uid))) st = VC_ERR_NOMEM;
        if (!st) st = vc_tokenizer_decode(t->tok, s->ids + s->plen, (size_t)r, 1, &b->text[i], &len);
    }
    return st;
}


vc_status rl_agent_rollout(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, int n, const vc_sampling *s,
                           int n_samples, uint64_t step_key, rl_batch *b) {
    rl_agent *a = t->agent;
    int NS = n * n_samples, active = NS;
    int64_t max_resp = s->max_new_tokens;
    memset(b, 0, sizeof *b);
    ag_state *S = vc_calloc((size_t)(NS ? NS : 1), sizeof *S);
    vc_rollout_request *r = vc_calloc((size_t)(NS ? NS : 1), sizeof *r);
    int *req_state = vc_calloc((size_t)(NS ? NS : 1), sizeof *req_state);
    vc_status st = S && r && req_state ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) { /* the first prompt: the dataset's, or rendered with the tools */
        const vc_rl_prompt *p = &d->p[idx[i]];
        int tools = 0;
        int32_t *ids = NULL;
        size_t len = (size_t)p->len;
        char where[512];
        row_where(d, p, where, sizeof where);
        if (!(st = row_tools(a, p, &tools)) && tools && a->schemas) /* with images: the content-list messages */
            st = render_ids(t, p->n_images ? p->vl_messages : p->messages, a->schemas, 1, p->images, p->n_images, where,
                            &ids, &len);
        for (int k = 0; !st && k < n_samples; k++) {
            ag_state *q = &S[i * n_samples + k];
            q->prompt = (int)idx[i];
            q->tools = tools;
            if (tools && a->inter && (st = row_interaction(a, p, step_key, i * n_samples + k, q))) break;
            q->plen = q->n = (int64_t)len;
            q->ids = vc_malloc(sizeof(int32_t) * (len + 1));
            q->mask = vc_calloc((size_t)max_resp + 1, sizeof(float));
            q->lp = vc_calloc((size_t)max_resp + 1, sizeof(float));
            if (!q->ids || !q->mask || !q->lp) st = VC_ERR_NOMEM;
            else memcpy(q->ids, ids ? ids : p->ids, sizeof(int32_t) * len);
        }
        free(ids);
    }
    double tsum = 0, tmin = 1e300, tmax = 0;
    rl_images *im = rl_images_for(t, d);
    /* the turns of one rollout keep the KV pool: a turn's prompt starts with the last turn's tokens */
    int session = t->eng && !t->gen && t->prefix_cache;
    if (session) vc_rollout_session(t->eng, 1);
    for (int turn = 0; !st && active > 0; turn++) {
        int nr = 0;
        vc_sampling sp = *s;
        if (a->stops) sp.eos_ids = a->stops, sp.n_eos = a->n_stops;
        sp.seed = t->seed * 0x9E3779B97F4A7C15ull + step_key * 0xD1B54A32D192ED03ull + 1; /* rl_rollout_batch's */
        if (turn == 0) /* every prompt with its n samples: the same streams as a single-turn rollout */
            for (int i = 0; !st && i < n; i++) {
                r[nr] = (vc_rollout_request){ S[i * n_samples].ids, S[i * n_samples].n, n_samples, idx[i] };
                st = rl_images_get(im, (int)idx[i], &r[nr].images); /* every turn computes the prompt with its images */
                req_state[nr++] = i * n_samples;
            }
        else {
            sp.seed ^= 0xA3EC647659359ACDull * (uint64_t)turn;
            for (int i = 0; !st && i < NS; i++)
                if (!S[i].done) {
                    r[nr] = (vc_rollout_request){ S[i].ids, S[i].n, 1, (uint64_t)S[i].prompt * 0x10000u + (uint64_t)(i % n_samples) };
                    if (S[i].own.n) r[nr].images = &S[i].own; /* the prompt's and the tools' */
                    else st = rl_images_get(im, S[i].prompt, &r[nr].images);
                    req_state[nr++] = i;
                }
            int64_t room = 0;
            for (int i = 0; i < NS; i++)
                if (!S[i].done && max_resp - (S[i].n - S[i].plen) > room) room = max_resp - (S[i].n - S[i].plen);
            sp.max_new_tokens = (int)room;
        }
        vc_rollout_sample *smp = NULL;
        int ns = 0;
        if (!st) st = rl_generate(t, r, nr, &sp, &smp, &ns);
        if (!st) st = take_samples(t, d, S, req_state, smp, ns, &sp, max_resp);
        vc_rollout_samples_free(smp, ns);
        active = 0;
        for (int i = 0; i < NS; i++) active += !S[i].done;
    }
    if (session) vc_rollout_session(t->eng, 0);
    for (int i = 0; !st && i < NS; i++) {
        double nt = S[i].turns_a + S[i].turns_u + 1; /* verl's num_turns */
        tsum += nt, tmin = nt < tmin ? nt : tmin, tmax = nt > tmax ? nt : tmax;
    }
    a->turns_sum = tsum, a->turns_n = NS, a->turns_min = tmin, a->turns_max = tmax;
    if (!st) st = to_batch(t, d, S, NS, n_samples, step_key, max_resp, b);
    for (int i = 0; S && i < NS; i++) {
        free(S[i].ids), free(S[i].mask), free(S[i].lp), cJSON_Delete(S[i].msgs);
        free((void *)S[i].own.grid), free((void *)S[i].own.pixels), free((void *)S[i].own.t_scale);
    }
    free(S);
    free(r);
    free(req_state);
    if (st) rl_batch_free(b);
    return st;
}

void rl_agent_turns(const vc_rl_trainer *t, double acc[4]) {
    const rl_agent *a = t->agent;
    acc[0] += a->turns_sum, acc[1] += a->turns_n;
    if (a->turns_n > 0) acc[2] = fmin(acc[2], a->turns_min), acc[3] = fmax(acc[3], a->turns_max);
}

vc_status rl_agent_metrics(vc_rl_trainer *t, rl_metrics *met) {
    rl_agent *a = t->agent;
    double v[2] = { a->turns_sum, a->turns_n }, mn = a->turns_min, mx = a->turns_max;
    vc_status st = rl_dist_reduce(t, v, 2, VC_SUM);
    if (!st) st = rl_dist_reduce(t, &mn, 1, VC_MIN);
    if (!st) st = rl_dist_reduce(t, &mx, 1, VC_MAX);
    if (st || !(v[1] > 0)) return st;
    rl_metrics_set(met, "num_turns/mean", v[0] / v[1]);
    rl_metrics_set(met, "num_turns/min", mn);
    rl_metrics_set(met, "num_turns/max", mx);
    return VC_OK;
}
