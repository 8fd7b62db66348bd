/* verlc generate --model DIR --input prompts.jsonl --output out.jsonl [options]: batched sampling with the
 * rollout engine. Rows carry `messages` (rendered with the chat template and a generation prompt) or
 * `prompt` (raw text, or a list of messages as in verl's schema). One output row per sample. */
#include "device_args.h"
#include "verlc/json.h"
#include "verlc/chat_template.h"
#include "verlc/data.h"
#include "verlc/pool.h"
#include "verlc/rollout.h"
#include "verlc/tokenizer.h"
#include "verlc/image.h"
#include "../src/data/vl_rows.h"
#include "verlc/trainer.h"
#include "verlc/vision.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_generate.h"

static int usage(void) {
    fprintf(stderr,
            "usage: verlc generate --model DIR --input prompts.jsonl --output out.jsonl [--tokenizer DIR]\n"
            "  [--n N] [--seed S] [--temperature T] [--top-p P] [--top-k K] [--min-p M] [--max-new-tokens N]\n"
            "  [--greedy] [--stop STR]... [--kv-budget BYTES|--kv-fraction F] [--max-batch B (256)] [--threads N]\n"
            "  [--speculative (draft with the model's MTP layer: the same tokens, fewer steps)\n"
            "   [--num-speculative-tokens K (drafts a step, 1 to 8; default 1)]]\n"
            "  [--max-prompt-len N --overlong skip|truncate|error] " VC_DEVICE_USAGE "\n");
    return 2;
}

static double parse_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1e3; break;
    case 'm': case 'M': v *= 1e6; break;
    case 'g': case 'G': v *= 1e9; break;
    default: break;
    }
    return v;
}

static int parse_args(int argc, char **argv, gen_args *a) {
    for (int i = 1; i < argc; i++) /* verl's key=value form (main_generation_server) */
        if (argv[i][0] != '-' && strchr(argv[i], '=') && argv[i - 1][0] != '-')
            return gen_verl_args(argc, argv, a);
    *a = (gen_args){ .n = 1, .max_new = 256, .temperature = 1.0f, .top_p = 1.0f, .max_batch = 256, .overlong = OVER_ERROR,
                     .spec_k = -1 };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--greedy")) { a->greedy = 1; continue; }
        if (!strcmp(k, "--speculative")) { a->spec = 1; continue; }
        if (!v) { fprintf(stderr, "verlc: generate: '%s' needs a value (or is unknown)\n", k); return 0; }
        i++;
        if (!strcmp(k, "--model")) a->model = v;
        else if (!strcmp(k, "--input")) a->input = v;
        else if (!strcmp(k, "--output")) a->output = v;
        else if (!strcmp(k, "--tokenizer")) a->tok_dir = v;
        else if (!strcmp(k, "--device")) a->device = v;
        else if (!strcmp(k, "--precision")) a->precision = v;
        else if (!strcmp(k, "--n")) a->n = atoi(v);
        else if (!strcmp(k, "--seed")) a->seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--temperature")) a->temperature = strtof(v, NULL);
        else if (!strcmp(k, "--top-p")) a->top_p = strtof(v, NULL);
        else if (!strcmp(k, "--top-k")) a->top_k = atoi(v);
        else if (!strcmp(k, "--min-p")) a->min_p = strtof(v, NULL);
        else if (!strcmp(k, "--max-new-tokens")) a->max_new = atoi(v);
        else if (!strcmp(k, "--kv-budget")) a->kv_budget = parse_bytes(v);
        else if (!strcmp(k, "--kv-fraction")) a->kv_fraction = strtod(v, NULL);
        else if (!strcmp(k, "--max-batch")) a->max_batch = atoi(v);
        else if (!strcmp(k, "--num-speculative-tokens")) a->spec_k = atoi(v);
        else if (!strcmp(k, "--threads")) a->threads = atoi(v);
        else if (!strcmp(k, "--max-prompt-len")) a->max_prompt = atoi(v);
        else if (!strcmp(k, "--stop") && a->n_stop < 16) a->stop[a->n_stop++] = v;
        else if (!strcmp(k, "--overlong")) {
            if (!strcmp(v, "skip")) a->overlong = OVER_SKIP;
            else if (!strcmp(v, "truncate")) a->overlong = OVER_TRUNCATE;
            else if (!strcmp(v, "error")) a->overlong = OVER_ERROR;
            else { fprintf(stderr, "verlc: generate: --overlong takes skip, truncate or error, not '%s'\n", v); return 0; }
        } else { fprintf(stderr, "verlc: generate: unknown argument '%s'\n", k); return 0; }
    }
    if (!a->model || !a->input || !a->output) return 0;
    if (!a->tok_dir) a->tok_dir = a->model;
    a->inputs[a->n_inputs++] = a->input;
    size_t lo = strlen(a->output);
    a->parquet = lo > 8 && !strcmp(a->output + lo - 8, ".parquet");
    if (a->n < 1) { fprintf(stderr, "verlc: generate: --n must be >= 1\n"); return 0; }
    if (a->max_batch < 1) { fprintf(stderr, "verlc: generate: --max-batch must be >= 1\n"); return 0; }
    if (a->spec_k != -1 && (a->spec_k < 1 || a->spec_k > VC_SPEC_MAX)) {
        fprintf(stderr, "verlc: generate: --num-speculative-tokens must be 1 to %d\n", VC_SPEC_MAX);
        return 0;
    }
    if (a->spec_k > 0) a->spec = 1;
    return 1;
}

/* ---- progress ---- */
typedef struct {
    int tty;
    double t0, last;
} progress;

static void fmt_time(char *b, size_t n, double s) {
    if (s < 0 || s > 1e7) snprintf(b, n, "?");
    else if (s >= 3600) snprintf(b, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else snprintf(b, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
}

static void on_progress(void *ctx, int done, int total, double tps) {
    progress *p = ctx;
    double now = vc_now(), el = now - p->t0;
    if (now - p->last < (p->tty ? 0.2 : 10.0) && done < total) return;
    p->last = now;
    char eta[32];
    fmt_time(eta, sizeof eta, done ? el / done * (total - done) : -1);
    if (p->tty) {
        int w = 30, f = total ? (int)((double)done / total * w) : w;
        char bar[64];
        for (int i = 0; i < w; i++) bar[i] = i < f ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r[%s] %d/%d prompts  %.1f tok/s  ETA %s ", bar, done, total, tps, eta);
        if (done == total) fputc('\n', stderr);
    } else
        fprintf(stderr, "generate: %d/%d prompts, %.1f tok/s, ETA %s\n", done, total, tps, eta);
    fflush(stderr);
}

/* ---- prompts ---- */
typedef struct {
    int64_t index;   /* row in the inputs, counted over them in order */
    const cJSON *src; /* the input row */
    char *text;      /* rendered prompt */
    int32_t *ids;
    size_t n_ids;
} prompt_row;

/* the row has a non-empty images or videos list */
static int has_visuals(const cJSON *row) {
    const char *keys[2] = { "images", "videos" };
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, keys[k]);
        if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) return 1;
    }
    return 0;
}

static vc_status render_row(const vc_jsonl *d, size_t i, const vc_tokenizer *tk, vc_chat_template **tmpl,
                            const gen_args *a, prompt_row *r) {
    const cJSON *row = d->rows[i], *msgs = cJSON_GetObjectItemCaseSensitive(row, "messages");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(row, "prompt");
    const char *tok_dir = a->tok_dir;
    if (!msgs && cJSON_IsArray(pr)) msgs = pr;
    if (a->prompt_key && !cJSON_IsArray(msgs = cJSON_GetObjectItemCaseSensitive(row, a->prompt_key)))
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: data.prompt_key '%s' is %s, not a list of messages", d->path,
                       (long long)d->lines[i], a->prompt_key, msgs ? "present" : "absent");
    if (has_visuals(row)) /* (rather than generating from "<image>" / "<video>" as text) */
        return vc_fail(VC_ERR_UNSUPPORTED, "%s:%lld: a row with images or videos needs an image-text model (Qwen2-VL, "
                       "Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V) and verl's schema: `prompt` as a list of messages with "
                       "<image> / <video> markers", d->path, (long long)d->lines[i]);
    int special = 1;
    if (msgs) {
        if (!cJSON_IsArray(msgs))
            return vc_fail(VC_ERR_FORMAT, "%s:%lld: 'messages' must be a list of {role, content}", d->path, (long long)d->lines[i]);
        if (!*tmpl) {
            vc_status st = vc_chat_template_load(tok_dir, tmpl);
            if (st) return st;
        }
        vc_chat_opts o = { .add_generation_prompt = 1, .enable_thinking = -1 };
        vc_status st = vc_chat_template_render(*tmpl, msgs, &o, &r->text);
        if (st) return vc_fail(st, "%s:%lld: %s", d->path, (long long)d->lines[i], vc_last_error());
        special = 0; /* the template writes the special tokens itself */
    } else if (cJSON_IsString(pr)) {
        r->text = strdup(pr->valuestring);
        if (!r->text) return VC_ERR_NOMEM;
    } else
        return vc_fail(VC_ERR_MISSING, "%s:%lld: row has neither 'messages' nor a 'prompt' string or list", d->path,
                       (long long)d->lines[i]);
    return vc_tokenizer_encode(tk, r->text, strlen(r->text), special, &r->ids, &r->n_ids);
}

/* 1 when the model has a vision tower and some row holds images or videos in verl's schema (a `prompt` list) */
static int image_input(const vc_model *m, const vc_jsonl *d, const char *key) {
    for (size_t i = 0; vc_model_vision(m) && i < d->n_rows; i++)
        if (has_visuals(d->rows[i]) && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(d->rows[i], key))) return 1;
    return 0;
}

/* the rendered prompt for the output: its ids decoded with each image's (or video frame group's) run of pad tokens
 * as one */
static vc_status prompt_text(const vc_tokenizer *tk, const vc_rl_prompt *p, int32_t pad, int32_t vpad, char **out) {
    int32_t *ids = vc_malloc(sizeof(int32_t) * (size_t)(p->len ? p->len : 1));
    if (!ids) return VC_ERR_NOMEM;
    size_t n = 0;
    for (int64_t t = 0; t < p->len; t++)
        if ((p->ids[t] != pad && p->ids[t] != vpad) || !n || ids[n - 1] != p->ids[t]) ids[n++] = p->ids[t];
    size_t len = 0;
    vc_status st = vc_tokenizer_decode(tk, ids, n, 0, out, &len);
    free(ids);
    return st;
}

/* verl rows with images through its RLHFDataset path (the chat template over content lists, fetch_image and the
 * image processor, each pad expanded): rows[], their requests with their images (pixels kept in im[]) */
static vc_status image_rows(const gen_args *a, const vc_model *m, const vc_tokenizer *tk, vc_chat_template **tmpl,
                            int64_t limit, const vc_jsonl *d, prompt_row *rows, vc_rollout_request *rq, vc_images *im,
                            int *n_rows) {
    size_t src = 0;
    vc_vl_image_config vl;
    vc_vl_videos vv;
    char *dir = NULL, why[400] = "";
    int has_video = 0;
    vc_rl_dataset *ds = NULL;
    vc_status st = vc_hf_resolve(a->model, &dir);
    if (!st) st = vc_vl_image_config_load(dir, &vl);
    if (!st) st = vc_vl_videos_setup(m, dir, vl.patch_size, &vv, why, sizeof why, &has_video);
    if (!st && !*tmpl) st = vc_chat_template_load(a->tok_dir, tmpl);
    const vc_model_config *mc = vc_model_cfg(m);
    int32_t pad = mc->image_id, vpad = mc->video_id;
    vc_rl_data_opts o = { .prompt_key = a->prompt_key ? a->prompt_key : "prompt", .max_prompt_length = limit,
                          .max_samples = -1, .image_key = "images",
                          .video_key = "videos", .vl = &vl, .image_token = vc_tokenizer_id_to_token(tk, pad),
                          .videos = has_video ? &vv : NULL, .no_video_reason = why,
                          .video_token = vpad >= 0 ? vc_tokenizer_id_to_token(tk, vpad) : NULL,
                          .filter_overlong = a->overlong == OVER_SKIP,
                          .truncation = a->overlong == OVER_TRUNCATE ? "left" : "error" };
    o.image_wrap = vc_vl_markup_texts(mc, tk, &o.image_boi, &o.image_eoi); /* (Gemma 3, Gemma 4, InternVL) */
    if (!st) st = vc_rl_dataset_load(a->input, tk, *tmpl, &o, &ds);
    for (size_t i = 0; !st && i < ds->n; i++) {
        const vc_rl_prompt *p = &ds->p[i];
        prompt_row *r = &rows[*n_rows];
        float *pix = NULL, *ts = NULL;
        int32_t *grid = NULL;
        int ni = 0;
        int64_t row = 0;
        r->index = p->line - 1;
        while (src + 1 < d->n_rows && d->lines[src] < p->line) src++; /* (the dataset's rows in the file's order) */
        r->src = d->rows[src];
        r->n_ids = (size_t)p->len;
        if ((st = vc_rl_prompt_visuals(ds, i, &pix, &grid, &ni, &row, &ts))) break;
        im[*n_rows] = (vc_images){ ni, grid, pix, row, ts };
        r->ids = vc_malloc(sizeof(int32_t) * (size_t)(p->len ? p->len : 1));
        if (!r->ids) st = VC_ERR_NOMEM;
        else memcpy(r->ids, p->ids, sizeof(int32_t) * (size_t)p->len);
        if (!st) st = prompt_text(tk, p, pad, vpad, &r->text);
        rq[*n_rows] = (vc_rollout_request){ r->ids, (int64_t)r->n_ids, a->n, (uint64_t)r->index, ni ? &im[*n_rows] : NULL };
        (*n_rows)++;
    }
    if (ds && ds->n_filtered) fprintf(stderr, "verlc: generate: %zu prompts longer than %lld tokens skipped\n", ds->n_filtered,
                                      (long long)limit);
    vc_rl_dataset_free(ds);
    free(dir);
    return st;
}

/* applies the length limit; returns 0 to keep the row, 1 to skip it, -1 on error */
static int check_length(const gen_args *a, const vc_jsonl *d, size_t i, prompt_row *r, int64_t limit, const char *why) {
    if ((int64_t)r->n_ids <= limit) return 0;
    const char *act = a->overlong == OVER_SKIP ? "skipped" : a->overlong == OVER_TRUNCATE ? "truncated (kept the end)" : "";
    fprintf(stderr, "verlc: %s:%lld: prompt has %zu tokens, over the limit of %lld (%s)%s%s\n", d->path,
            (long long)d->lines[i], r->n_ids, (long long)limit, why, *act ? "; " : "", act);
    if (a->overlong == OVER_ERROR) return -1;
    if (a->overlong == OVER_SKIP) return 1;
    memmove(r->ids, r->ids + (r->n_ids - (size_t)limit), (size_t)limit * sizeof *r->ids);
    r->n_ids = (size_t)limit;
    return 0;
}

static const char *FINISH[] = { "eos", "length", "stop" };

static vc_status write_output(const gen_args *a, const vc_tokenizer *tk, const prompt_row *rows,
                              const vc_rollout_sample *s, int n) {
    FILE *f = fopen(a->output, "w");
    if (!f) return vc_fail(VC_ERR_IO, "%s: cannot open for writing", a->output);
    vc_status st = VC_OK;
    for (int i = 0; i < n && !st; i++) {
        const prompt_row *r = &rows[s[i].request];
        char *resp = NULL;
        size_t rl;
        if ((st = vc_tokenizer_decode(tk, s[i].tokens, (size_t)s[i].n_tokens, 1, &resp, &rl))) break;
        cJSON *o = cJSON_CreateObject(), *ids = cJSON_CreateArray(), *lp = cJSON_CreateArray();
        cJSON_AddNumberToObject(o, "index", (double)r->index);
        cJSON_AddNumberToObject(o, "sample", s[i].sample);
        cJSON_AddStringToObject(o, "prompt", r->text);
        cJSON_AddStringToObject(o, "response", resp);
        for (int64_t t = 0; t < s[i].n_tokens; t++) {
            cJSON_AddItemToArray(ids, cJSON_CreateNumber(s[i].tokens[t]));
            cJSON_AddItemToArray(lp, cJSON_CreateNumber(s[i].logp[t]));
        }
        cJSON_AddItemToObject(o, "response_ids", ids);
        cJSON_AddItemToObject(o, "logprobs", lp);
        cJSON_AddStringToObject(o, "finish_reason", FINISH[s[i].finish]);
        char *line = vc_json_print(o, 0);
        if (!line || fprintf(f, "%s\n", line) < 0) st = vc_fail(VC_ERR_IO, "%s: write failed", a->output);
        free(line);
        cJSON_Delete(o);
        free(resp);
    }
    if (fclose(f) && !st) st = vc_fail(VC_ERR_IO, "%s: write failed", a->output);
    return st;
}

/* main_generation_server's rows: each prompt's input row with its samples' texts as `responses` */
static vc_status parquet_output(const gen_args *a, const vc_tokenizer *tk, const prompt_row *rows, int n_rows,
                                const vc_rollout_sample *s, int n) {
    gen_out_row *o = calloc((size_t)n_rows + 1, sizeof *o);
    char **texts = calloc((size_t)n_rows * (size_t)a->n + 1, sizeof *texts);
    vc_status st = o && texts ? VC_OK : vc_fail(VC_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < n_rows; i++) o[i] = (gen_out_row){ rows[i].src, texts + (size_t)i * (size_t)a->n };
    for (int i = 0; !st && i < n; i++) {
        size_t len;
        char **t = &o[s[i].request].texts[s[i].sample];
        free(*t);
        *t = NULL;
        st = vc_tokenizer_decode(tk, s[i].tokens, (size_t)s[i].n_tokens, 1, t, &len);
    }
    if (!st) st = gen_write_parquet(a->output, o, n_rows, a->n);
    for (size_t i = 0; texts && i < (size_t)n_rows * (size_t)a->n; i++) free(texts[i]);
    free(texts);
    free(o);
    return st;
}

int vc_cmd_generate(int argc, char **argv) {
    gen_args a;
    if (!parse_args(argc, argv, &a)) return usage();
    if (a.threads > 0) vc_set_threads(a.threads);
    int rc = vc_cli_device_apply("generate", a.device, a.precision);
    if (rc) return rc;
    rc = 1;
    int n_rows = 0, n_out = 0;
    vc_model *m = NULL;
    vc_tokenizer *tk = NULL;
    vc_chat_template *tmpl = NULL;
    vc_jsonl *ds[GEN_MAX_INPUTS] = { 0 };
    size_t total = 0;
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    prompt_row *rows = NULL;
    vc_rollout_request *rq = NULL;
    vc_images *im = NULL;
    vc_status st;
    if ((st = a.spec ? vc_model_load_mtp(a.model, &m) : vc_model_load(a.model, &m)) ||
        (st = vc_tokenizer_load(a.tok_dir, &tk)))
        goto out;
    for (int f = 0; f < a.n_inputs; f++) {
        if ((st = vc_jsonl_read(a.inputs[f], VC_JSONL_STRICT, &ds[f]))) goto out;
        total += ds[f]->n_rows;
    }
    const vc_model_config *c = vc_model_cfg(m);
    rows = calloc(total + 1, sizeof *rows);
    rq = calloc(total + 1, sizeof *rq);
    im = calloc(total + 1, sizeof *im);
    if (!rows || !rq || !im) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); goto out; }
    int64_t limit = c->max_pos > a.max_new ? c->max_pos - a.max_new : c->max_pos;
    const char *why = "context length minus --max-new-tokens";
    if (a.max_prompt > 0 && a.max_prompt < limit) {
        limit = a.max_prompt;
        why = a.cfg ? "actor_rollout_ref.rollout.prompt_length" : "--max-prompt-len";
    }
    int vl = 0; /* rows with images: through verl's dataset path, every row */
    for (int f = 0; f < a.n_inputs; f++) vl |= image_input(m, ds[f], a.prompt_key ? a.prompt_key : "prompt");
    if (vl && a.n_inputs > 1) {
        st = vc_fail(VC_ERR_UNSUPPORTED, "rows with images from %d files: one file at a time", a.n_inputs);
        goto out;
    }
    if (vl && (st = image_rows(&a, m, tk, &tmpl, limit, ds[0], rows, rq, im, &n_rows))) goto out;
    for (int f = 0, base = 0; !vl && f < a.n_inputs; base += (int)ds[f]->n_rows, f++)
        for (size_t i = 0; i < ds[f]->n_rows; i++) {
            const vc_jsonl *d = ds[f];
            prompt_row *r = &rows[n_rows];
            r->index = base + (int64_t)i;
            r->src = d->rows[i];
            if ((st = render_row(d, i, tk, &tmpl, &a, r))) { n_rows++; goto out; }
            int k = check_length(&a, d, i, r, limit, why);
            if (k < 0) {
                n_rows++;
                st = vc_fail(VC_ERR_ARG, a.cfg ? "prompt too long (vLLM refuses it too)"
                                               : "prompt too long (use --overlong skip|truncate)");
                goto out;
            }
            if (k > 0) { free(r->text); free(r->ids); memset(r, 0, sizeof *r); continue; }
            rq[n_rows] = (vc_rollout_request){ r->ids, (int64_t)r->n_ids, a.n, (uint64_t)r->index };
            n_rows++;
        }
    int32_t eos[VC_MAX_EOS + 1];
    int n_eos = 0;
    for (int i = 0; i < c->n_eos; i++) eos[n_eos++] = c->eos_ids[i];
    int te = vc_tokenizer_eos_id(tk), have = 0;
    for (int i = 0; i < n_eos; i++) have |= eos[i] == te;
    if (te >= 0 && !have) eos[n_eos++] = te;
    vc_sampling sp = { .greedy = a.greedy, .temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p,
                       .min_p = a.min_p, .max_new_tokens = a.max_new, .eos_ids = eos, .n_eos = n_eos,
                       .stop = a.stop, .n_stop = a.n_stop, .seed = a.seed };
    progress pg = { .tty = isatty(2), .t0 = vc_now() };
    vc_rollout_opts o = { .kv_budget_bytes = a.kv_budget, .kv_fraction = a.kv_fraction, .max_batch = a.max_batch,
                          .tokenizer = tk, .progress = on_progress, .progress_ctx = &pg,
                          .speculative = a.spec ? (a.spec_k > 0 ? a.spec_k : 1) : 0 };
    if ((st = vc_rollout_new(m, &o, &e)) || (st = vc_rollout_generate(e, rq, n_rows, &sp, &out, &n_out))) goto out;
    if ((st = a.parquet ? parquet_output(&a, tk, rows, n_rows, out, n_out) : write_output(&a, tk, rows, out, n_out)))
        goto out;
    vc_rollout_stats s;
    vc_rollout_last_stats(e, &s);
    fprintf(stderr, "generate (%s, %s): %d prompts, %d samples, %lld tokens in %.1f s (%.1f tok/s); %lld steps, "
                    "%lld preemptions, KV pages peak %lld of %lld (%lld tokens each); %lld prompt tokens computed, "
                    "%lld reused from the prefix cache\n",
            vc_device_name(), vc_cli_precision_name(), n_rows, n_out, (long long)s.generated, s.seconds, s.seconds > 0 ? s.generated / s.seconds : 0.0,
            (long long)s.steps, (long long)s.preemptions, (long long)s.peak_pages, (long long)s.pool_pages,
            (long long)s.page_tokens, (long long)s.prefill_tokens, (long long)s.prefix_hit_tokens);
    if (a.spec)
        fprintf(stderr, "generate: %lld drafts from the MTP layer, %lld kept (%.1f%%)\n", (long long)s.draft_tokens,
                (long long)s.draft_accepted, s.draft_tokens ? 100.0 * (double)s.draft_accepted / (double)s.draft_tokens : 0.0);
    rc = 0;
out:
    if (st) fprintf(stderr, "verlc: %s\n", vc_last_error());
    vc_rollout_samples_free(out, n_out);
    vc_rollout_free(e);
    for (int i = 0; rows && i < n_rows; i++) {
        free(rows[i].text);
        free(rows[i].ids);
        free((void *)im[i].grid);
        free((void *)im[i].pixels);
        free((void *)im[i].t_scale);
    }
    free(rows);
    free(im);
    free(rq);
    for (int f = 0; f < a.n_inputs; f++) vc_jsonl_free(ds[f]);
    vc_config_free(a.cfg);
    vc_chat_template_free(tmpl);
    vc_tokenizer_free(tk);
    vc_model_free(m);
    return rc;
}
