#define _GNU_SOURCE
/* Multi-turn tool rollouts of prompts with images (verl's tool_agent loop on a Qwen2-VL dataset, as its geo3k
 * multi-turn example runs with verl.tools.geo3k_tool.Geo3kTool), with a scripted rollout engine: the prompt rendered
 * with the tools (by the example's own chat template) from the row's content-list messages, each image's pads
 * expanded as the dataset's own prompt has them (from its user turn on, the two are the same text); every engine
 * request of every turn carries the row's images; the tool turn answered by Geo3kTool; the batch's rows keep their
 * images for the trainer's passes. */
#include "../../src/rl/agent_internal.h"
#include "agent_test_util.h"
#include "../../src/rl/trainer_internal.h"
#include "verlc/chat_template.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/rollout.h"
#include "vl_cfg.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[128];
static vc_vl_image_config VL;

/* the chat template of verl's geo3k multi-turn example (examples/sglang_multiturn/config/geo3k_multiturn_grpo.yaml's
 * custom_chat_template: Qwen2.5-VL's image markup with hermes tools in the system turn) */
#define TOOLS_TEMPLATE "tests/fixtures/vision/dataset/chat_template_tools.jinja"

typedef struct {
    vc_tokenizer *tok;
    int calls, requests, with_images, images_right;
    const vc_rl_dataset *d;
} script_ctx;

static const char *CALL = "Let me check.<tool_call>\n{\"name\": \"calc_geo3k_reward\", \"arguments\": {\"answer\": "
                          "\"\\\\frac{40}{3}\"}}\n</tool_call><|im_end|>";
static const char *FINAL = "So \\boxed{\\frac{40}{3}}<|im_end|>";

static vc_status scripted(void *p, const vc_rollout_request *r, int n, const vc_sampling *s, vc_rollout_sample **out,
                          int *n_out) {
    script_ctx *c = p;
    int total = 0, k = 0;
    vc_rollout_sample *smp = agent_test_samples(r, n, &total);
    for (int i = 0; i < n; i++) {
        c->requests++;
        /* turn 0's request id is the prompt index; later turns' prompt * 0x10000 + sample */
        int prompt = (int)(c->calls == 0 ? r[i].prompt_index : r[i].prompt_index / 0x10000u);
        int want = prompt < (int)c->d->n ? c->d->p[prompt].n_images : -1;
        c->with_images += r[i].images != NULL;
        c->images_right += r[i].images && r[i].images->n == want && r[i].images->pixels && r[i].images->grid;
        for (int j = 0; j < r[i].n_samples; j++, k++) {
            smp[k] = agent_test_sample(c->tok, c->calls == 0 ? CALL : FINAL, i, j, s->max_new_tokens, -0.5f, 0.0f);
        }
    }
    c->calls++;
    *out = smp;
    *n_out = total;
    return VC_OK;
}

static void write_files(void) {
    char img[2][PATH_MAX], path[300];
    const char *rel[2] = { "tests/fixtures/vision/images/rgb_37x53.png", "tests/fixtures/vision/images/la_30x20.png" };
    for (int i = 0; i < 2; i++)
        if (!realpath(rel[i], img[i])) snprintf(img[i], sizeof img[i], "%s", rel[i]);
    snprintf(path, sizeof path, "%s/data.jsonl", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    const char *row = "{\"data_source\": \"hiyouga/geometry3k\", \"prompt\": [{\"role\": \"system\", \"content\": \"Use the "
                      "tool.\"}, {\"role\": \"user\", \"content\": \"%s\"}], \"images\": [%s], \"reward_model\": "
                      "{\"ground_truth\": \"%s\"}, \"extra_info\": {\"tools_kwargs\": {\"calc_geo3k_reward\": "
                      "{\"create_kwargs\": {\"ground_truth\": \"%s\"}}}}}\n";
    char one[PATH_MAX + 4], two[2 * PATH_MAX + 8];
    snprintf(one, sizeof one, "\"%s\"", img[0]);
    snprintf(two, sizeof two, "\"%s\", \"%s\"", img[0], img[1]);
    fprintf(f, row, "<image>Find x.", one, "\\\\frac { 40 } { 3 }", "\\\\frac { 40 } { 3 }");
    fprintf(f, row, "Compare <image> and <image>.", two, "7", "7");
    fclose(f);
    snprintf(path, sizeof path, "%s/tools.yaml", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("tools:\n  - class_name: \"verl.tools.geo3k_tool.Geo3kTool\"\n    config:\n      type: native\n    tool_schema:\n"
          "      type: \"function\"\n      function:\n        name: \"calc_geo3k_reward\"\n        description: \"geo3k\"\n"
          "        parameters:\n          type: \"object\"\n          properties:\n            answer:\n"
          "              type: \"string\"\n              description: \"the answer\"\n          required: [\"answer\"]\n", f);
    fclose(f);
}

static vc_chat_template *load_template(void) {
    FILE *f = fopen(TOOLS_TEMPLATE, "rb");
    CHECK(f != NULL);
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    vc_chat_template *t = NULL;
    CHECK_OK(vc_chat_template_from_string(buf, NULL, "<|endoftext|>", &t));
    return t;
}

/* ---- verl's ImageZoomInTool (the DeepEyes recipe): a tool response with an image ---- */

#define ZOOM_REF "tests/fixtures/rl/zoom_reference.json"

typedef struct {
    vc_tokenizer *tok;
    const cJSON *ref; /* zoom_reference.json's "agent": row r's call */
    int calls, later, later_right;
    double pix_err;
} zoom_ctx;

static vc_status zoom_scripted(void *p, const vc_rollout_request *r, int n, const vc_sampling *s, vc_rollout_sample **out,
                               int *n_out) {
    zoom_ctx *c = p;
    int total = 0, k = 0;
    vc_rollout_sample *smp = agent_test_samples(r, n, &total);
    for (int i = 0; i < n; i++) {
        int prompt = (int)(c->calls == 0 ? r[i].prompt_index : r[i].prompt_index / 0x10000u);
        const cJSON *row = cJSON_GetArrayItem(c->ref, prompt);
        if (c->calls > 0) { /* the prompt's image, then the crop: the processor's grid and pixels */
            const vc_images *im = r[i].images;
            const cJSON *g = cJSON_GetObjectItem(row, "grid");
            c->later++;
            if (im && im->n == 2 && im->grid[3] == cJSON_GetArrayItem(g, 0)->valueint &&
                im->grid[4] == cJSON_GetArrayItem(g, 1)->valueint && im->grid[5] == cJSON_GetArrayItem(g, 2)->valueint) {
                int64_t first = (int64_t)im->grid[0] * im->grid[1] * im->grid[2], rows = (int64_t)im->grid[3] * im->grid[4] * im->grid[5];
                double sum = 0, asum = 0;
                for (int64_t q = 0; q < rows * im->row; q++) {
                    double v = im->pixels[first * im->row + q];
                    sum += v, asum += fabs(v);
                }
                double e = fmax(fabs(sum - cJSON_GetObjectItem(row, "pixel_sum")->valuedouble),
                                fabs(asum - cJSON_GetObjectItem(row, "pixel_abs_sum")->valuedouble));
                c->pix_err = fmax(c->pix_err, e);
                c->later_right += e < 1e-6;
            }
        }
        char call[600];
        snprintf(call, sizeof call, "<tool_call>\n{\"name\": \"image_zoom_in_tool\", \"arguments\": %s}\n</tool_call><|im_end|>",
                 cJSON_GetObjectItem(row, "args")->valuestring);
        for (int j = 0; j < r[i].n_samples; j++, k++)
            smp[k] = agent_test_sample(c->tok, c->calls == 0 ? call : FINAL, i, j, s->max_new_tokens, -0.5f, 0.0f);
    }
    c->calls++;
    *out = smp;
    *n_out = total;
    return VC_OK;
}

static void zoom_files(const cJSON *ref) {
    char path[300];
    snprintf(path, sizeof path, "%s/zoom.jsonl", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    for (const cJSON *r = ref->child; r; r = r->next) {
        const char *img = cJSON_GetObjectItem(r, "image")->valuestring;
        fprintf(f, "{\"data_source\": \"deepeyes\", \"prompt\": [{\"role\": \"user\", \"content\": \"<image>Zoom.\"}], "
                   "\"images\": [\"%s\"], \"reward_model\": {\"ground_truth\": \"A\"}, \"extra_info\": {\"tools_kwargs\": "
                   "{\"image_zoom_in_tool\": {\"create_kwargs\": {\"image\": \"%s\"}}}}}\n", img, img);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/zoom.yaml", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("tools:\n  - class_name: verl.tools.image_zoom_in_tool.ImageZoomInTool\n    config: {num_workers: 2, type: native}\n"
          "    tool_schema:\n      type: function\n      function:\n        name: image_zoom_in_tool\n"
          "        description: Zoom in on a region of the image\n        parameters:\n          type: object\n"
          "          properties:\n            bbox_2d: {type: array, items: {type: number}}\n"
          "            label: {type: string}\n          required: [bbox_2d]\n", f);
    fclose(f);
}

/* the engine and the trainer agree on a response whose tool turn holds an image: a random Qwen2-VL continues row 0
 * (its prompt's image, the call, the tool turn with the crop) greedily through the rollout engine, the whole prompt
 * computed with both images; the trainer recomputes those tokens' log-probs from the row (the crop's tokens in its
 * response, inside the row's image span) */
static void zoom_logprobs(vc_tokenizer *tok, const rl_batch *b) {
    char path[400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f || !b->rimg) return;
    fprintf(f, RL_CLI_QWEN2_VL_CFG, vc_tokenizer_vocab_size(tok));
    fclose(f);
    vc_model *m = NULL;
    vc_rollout_engine *e = NULL;
    CHECK_OK(vc_model_init_random(path, 11, &m));
    if (m) CHECK_OK(vc_rollout_new(m, NULL, &e));
    if (!e) {
        vc_model_free(m);
        return;
    }
    int64_t span = b->rspan[0], base = b->cu[0], K = 5;
    vc_rollout_request r = { b->ids + base, span, 1, 0, &b->rimg[0] };
    vc_sampling s = { .greedy = 1, .temperature = 1, .top_p = 1, .max_new_tokens = (int)K };
    vc_rollout_sample *out = NULL;
    int n = 0;
    CHECK_OK(vc_rollout_generate(e, &r, 1, &s, &out, &n));
    rl_batch c;
    if (n != 1 || out[0].n_tokens != K || rl_batch_alloc(&c, 1, (int)(span - b->plen[0] + K), span + K)) {
        CHECK_MSG(0, "the engine gave %d samples", n);
        vc_rollout_samples_free(out, n);
        vc_rollout_free(e);
        vc_model_free(m);
        return;
    }
    memcpy(c.ids, b->ids + base, sizeof(int32_t) * (size_t)span);
    memcpy(c.ids + span, out[0].tokens, sizeof(int32_t) * (size_t)K);
    c.cu[1] = span + K, c.plen[0] = b->plen[0], c.rlen[0] = span - b->plen[0] + K, c.prompt[0] = b->prompt[0];
    CHECK_OK(rl_batch_rimg_alloc(&c));
    int64_t rows = vc_images_rows(&b->rimg[0], b->rimg[0].n);
    int32_t *grid = vc_malloc(12 * (size_t)b->rimg[0].n);
    float *px = vc_malloc(sizeof(float) * (size_t)(rows * b->rimg[0].row));
    if (grid && px) {
        memcpy(grid, b->rimg[0].grid, 12 * (size_t)b->rimg[0].n);
        memcpy(px, b->rimg[0].pixels, sizeof(float) * (size_t)(rows * b->rimg[0].row));
    }
    c.rimg[0] = (vc_images){ b->rimg[0].n, grid, px, b->rimg[0].row };
    c.rspan[0] = span;
    vc_graph *g = vc_graph_new();
    CHECK_OK(rl_batch_logprobs(m, g, &c, 0, 1.0f, c.old_logp, NULL, NULL));
    double mx = 0;
    for (int64_t j = 0; j < K; j++) mx = fmax(mx, fabs(out[0].logp[j] - c.old_logp[c.rlen[0] - K + j]));
    CHECK_MSG(mx < 1e-5, "rollout vs trainer after a tool turn with an image: max diff %g", mx);
    fprintf(stderr, "zoom: rollout vs trainer log-probs after a tool turn with an image: max diff %.3g\n", mx);
    /* without the row's images its image tokens are plain tokens: the log-probs move */
    free((void *)c.rimg[0].grid), free((void *)c.rimg[0].pixels);
    memset(&c.rimg[0], 0, sizeof c.rimg[0]);
    float *alt = vc_calloc((size_t)c.T, sizeof(float));
    if (alt && rl_batch_logprobs(m, g, &c, 0, 1.0f, alt, NULL, NULL) == VC_OK) {
        double d = 0;
        for (int64_t j = 0; j < K; j++) d = fmax(d, fabs(alt[c.rlen[0] - K + j] - c.old_logp[c.rlen[0] - K + j]));
        CHECK_MSG(d > 1e-4, "the crop changed the log-probs by only %g", d);
    }
    free(alt);
    vc_graph_free(g);
    rl_batch_free(&c);
    vc_rollout_samples_free(out, n);
    vc_rollout_free(e);
    vc_model_free(m);
}

/* the zoom rows' rollout: the crop joins the response's images (every later request carries the prompt's image and
 * the crop, whose grid and pixels are the processor's), the tool turn's tokens are transformers' processor's for the
 * tool message with the crop (its pads expanded, the system prompt cut as verl cuts it), and the batch rows keep
 * both images with the span that holds them for the trainer's passes */
static void zoom(vc_tokenizer *tok, vc_chat_template *tmpl) {
    cJSON *all = NULL;
    CHECK_OK(vc_json_load_file(ZOOM_REF, &all));
    const cJSON *ref = cJSON_GetObjectItem(all, "agent");
    if (!ref) return;
    zoom_files(ref);
    char tools[300], data[300], o1[400];
    snprintf(tools, sizeof tools, "%s/zoom.yaml", dir);
    snprintf(data, sizeof data, "%s/zoom.jsonl", dir);
    snprintf(o1, sizeof o1, "actor_rollout_ref.rollout.multi_turn.tool_config_path=%s", tools);
    char *ov[] = { "actor_rollout_ref.rollout.multi_turn.enable=true", o1,
                   "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent" };
    vc_config *cfg = NULL;
    CHECK_OK(vc_config_load(NULL, 3, ov, &cfg));
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->world = 1, t->seed = 3, t->tok = tok, t->tmpl = tmpl;
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1, .image_key = "images",
                          .video_key = "videos", .vl = &VL, .image_patch_size = 14 };
    CHECK_OK(vc_rl_dataset_load(data, t->tok, t->tmpl, &o, &t->train));
    CHECK_OK(rl_images_init(&t->train_img, t->train));
    CHECK_OK(rl_agent_open(t, cfg));
    zoom_ctx zc = { .tok = tok, .ref = ref };
    t->gen = zoom_scripted;
    t->gen_ctx = &zc;
    uint32_t idx[2] = { 0, 1 };
    vc_sampling s = { .temperature = 1, .top_p = 1, .max_new_tokens = 400 };
    rl_batch b;
    memset(&b, 0, sizeof b);
    if (t->train && t->agent) CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 2, 9, &b));
    CHECK_MSG(zc.calls == 2 && zc.later == 4 && zc.later_right == 4, "%d engine calls; %d of %d later requests with the "
              "prompt's image and the crop as the processor makes it (pixel sums within %g)", zc.calls, zc.later_right,
              zc.later, zc.pix_err);
    CHECK(b.B == 4 && b.rimg && b.rspan);
    for (int i = 0; i < b.B && b.rimg; i++) {
        const cJSON *row = cJSON_GetArrayItem(ref, b.prompt[i]), *ids = cJSON_GetObjectItem(row, "ids");
        int n_sys = cJSON_GetObjectItem(row, "n_sys")->valueint, n_ref = cJSON_GetArraySize(ids) - n_sys;
        char call[600];
        snprintf(call, sizeof call, "<tool_call>\n{\"name\": \"image_zoom_in_tool\", \"arguments\": %s}\n</tool_call><|im_end|>",
                 cJSON_GetObjectItem(row, "args")->valuestring);
        int32_t *ct = NULL;
        size_t nc = 0;
        CHECK_OK(vc_tokenizer_encode(tok, call, strlen(call), 0, &ct, &nc));
        const int32_t *turn = b.ids + b.cu[i] + b.plen[i] + nc;
        int same = b.rlen[i] > (int64_t)nc + n_ref;
        for (int k = 0; same && k < n_ref; k++) same = turn[k] == cJSON_GetArrayItem(ids, n_sys + k)->valueint;
        for (int k = 0; same && k < n_ref; k++) same = b.mask[(size_t)i * b.T + nc + k] == 0;
        CHECK_MSG(same, "row %d: the tool turn's %d tokens (mask 0) are not the processor's", i, n_ref);
        const vc_images *im = NULL;
        int64_t span = 0;
        CHECK_OK(rl_batch_row_images(&b, i, &im, &span));
        CHECK_MSG(im == &b.rimg[i] && im->n == 2 && span == b.plen[i] + (int64_t)nc + n_ref,
                  "row %d: %d images, span %lld", i, im ? im->n : 0, (long long)span);
        /* the memory plan's bound holds the crop: enough images of enough patches (the create_kwargs image
         * found among the prompt's, or decoded when the prompt does not show it) */
        vc_rl_prompt p = t->train->p[b.prompt[i]], bare = p;
        int32_t g[3], g2[3];
        int k = 0, k2 = 0;
        CHECK_OK(rl_agent_tool_images(t, t->train, &p, s.max_new_tokens, g, &k));
        bare.n_images = 0;
        CHECK_OK(rl_agent_tool_images(t, t->train, &bare, s.max_new_tokens, g2, &k2));
        const int32_t *crop = im ? im->grid + 3 : g;
        CHECK_MSG(k >= 1 && g[0] * g[1] * g[2] >= crop[0] * crop[1] * crop[2] && k == k2 && !memcmp(g, g2, sizeof g),
                  "row %d: the plan's bound %d x %dx%dx%d for a crop of %dx%dx%d (%d x %dx%dx%d decoded)", i, k, g[0],
                  g[1], g[2], crop[0], crop[1], crop[2], k2, g2[0], g2[1], g2[2]);
        free(ct);
    }
    /* the rows travel with their images (balance_batch's records) */
    char *buf = NULL;
    size_t bytes = 0;
    rl_batch back;
    memset(&back, 0, sizeof back);
    CHECK_OK(rl_batch_rows_write(&b, &buf, &bytes));
    CHECK_OK(rl_batch_rows_read(buf, bytes, b.T, &back));
    int kept = back.B == b.B && back.rimg;
    for (int i = 0; kept && i < b.B; i++) {
        int64_t rows = vc_images_rows(&b.rimg[i], b.rimg[i].n);
        kept = back.rimg[i].n == b.rimg[i].n && back.rspan[i] == b.rspan[i] &&
               !memcmp(back.rimg[i].grid, b.rimg[i].grid, 12 * (size_t)b.rimg[i].n) &&
               !memcmp(back.rimg[i].pixels, b.rimg[i].pixels, sizeof(float) * (size_t)(rows * b.rimg[i].row));
    }
    CHECK_MSG(kept, "the rows' images did not survive their records");
    zoom_logprobs(tok, &b);
    /* a record cut short, or whose grids disagree with its patch rows, is refused by name */
    rl_batch bad;
    memset(&bad, 0, sizeof bad);
    CHECK(bytes > 8 && rl_batch_rows_read(buf, bytes - 4, b.T, &bad) == VC_ERR_FORMAT);
    char *g = b.rimg ? memmem(buf, bytes, b.rimg[0].grid, 24) : NULL; /* row 0's two grids */
    CHECK(g != NULL);
    if (g) {
        int32_t h = ((int32_t *)(void *)b.rimg[0].grid)[4] + 1;
        memcpy(g + 16, &h, 4);
        CHECK(rl_batch_rows_read(buf, bytes, b.T, &bad) == VC_ERR_FORMAT);
        CHECK_MSG(strstr(vc_last_error(), "grids"), "%s", vc_last_error());
        rl_batch_free(&bad);
    }
    free(buf);
    rl_batch_free(&back);
    rl_batch_free(&b);
    rl_images_free(&t->train_img);
    rl_agent_free(t->agent);
    vc_rl_dataset_free(t->train);
    vc_config_free(cfg);
    free(t);
    cJSON_Delete(all);
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references' images are the PIL backend's) */
    snprintf(dir, sizeof dir, "/tmp/verlc_agent_vl_%d", (int)getpid());
    char mk[200];
    snprintf(mk, sizeof mk, "mkdir -p %s", dir);
    CHECK(system(mk) == 0);
    write_files();
    char tok_dir[600], tools[300], data[300], o1[400];
    snprintf(tok_dir, sizeof tok_dir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->world = 1;
    t->seed = 3;
    CHECK_OK(vc_tokenizer_load(tok_dir, &t->tok));
    t->tmpl = load_template();
    CHECK_OK(vc_vl_image_config_load("tests/fixtures/vision/dataset/", &VL));
    snprintf(tools, sizeof tools, "%s/tools.yaml", dir);
    snprintf(data, sizeof data, "%s/data.jsonl", dir);
    snprintf(o1, sizeof o1, "actor_rollout_ref.rollout.multi_turn.tool_config_path=%s", tools);
    char *ov[] = { "actor_rollout_ref.rollout.multi_turn.enable=true", o1,
                   "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent" };
    vc_config *cfg = NULL;
    CHECK_OK(vc_config_load(NULL, 3, ov, &cfg));
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1, .image_key = "images",
                          .video_key = "videos", .vl = &VL, .image_patch_size = 14 };
    CHECK_OK(vc_rl_dataset_load(data, t->tok, t->tmpl, &o, &t->train));
    CHECK_OK(rl_images_init(&t->train_img, t->train));
    CHECK_OK(rl_agent_open(t, cfg));
    if (!t->train || !t->agent) return vc_test_done();
    script_ctx sc = { .tok = t->tok, .d = t->train };
    t->gen = scripted;
    t->gen_ctx = &sc;
    uint32_t idx[2] = { 0, 1 };
    vc_sampling s = { .temperature = 1, .top_p = 1, .max_new_tokens = 300 };
    rl_batch b;
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 2, 5, &b));
    /* two turns (the call, then the answer) of 2 prompts x 2 samples: 2 requests, then 4 */
    CHECK_MSG(sc.calls == 2 && sc.requests == 6, "%d engine calls, %d requests", sc.calls, sc.requests);
    CHECK_MSG(sc.with_images == 6 && sc.images_right == 6, "requests with their row's images: %d (%d right) of %d",
              sc.with_images, sc.images_right, sc.requests);
    CHECK(b.B == 4 && b.imgs == &t->train_img);
    int pad = vc_tokenizer_token_to_id(t->tok, "<|image_pad|>");
    for (int i = 0; i < b.B; i++) {
        const vc_rl_prompt *p = &t->train->p[b.prompt[i]];
        int64_t pads = 0, want = 0;
        for (int64_t k = 0; k < b.plen[i]; k++) pads += b.ids[b.cu[i] + k] == pad;
        for (int k = 0; k < p->n_images; k++) want += p->images[k].tokens;
        CHECK_MSG(pads == want && want > 0, "row %d: %lld pad tokens in the prompt for %lld", i, (long long)pads,
                  (long long)want);
        /* the system turn with the tools, then exactly the dataset's prompt from the user turn on (the same pads) */
        char *text = NULL, *ds = NULL;
        size_t len = 0;
        CHECK_OK(vc_tokenizer_decode(t->tok, b.ids + b.cu[i], (size_t)b.plen[i], 0, &text, &len));
        CHECK_OK(vc_tokenizer_decode(t->tok, p->ids, (size_t)p->len, 0, &ds, &len));
        const char *u = text ? strstr(text, "<|im_start|>user") : NULL, *wu = ds ? strstr(ds, "<|im_start|>user") : NULL;
        CHECK_MSG(u && wu && !strcmp(u, wu), "row %d: the prompt with tools, from its user turn, is not the dataset's", i);
        CHECK_MSG(text && u && strstr(text, "# Tools") && strstr(text, "calc_geo3k_reward") < u &&
                  strstr(text, "Use the tool."), "row %d: no tool schema in its system turn: %s", i, text ? text : "");
        free(text);
        free(ds);
        const vc_images *im = NULL;
        CHECK_OK(rl_images_get(b.imgs, b.prompt[i], &im));
        CHECK(im && im->n == p->n_images);
    }
    /* the tool turn: Geo3kTool graded the call's answer against the row's ground truth */
    char *resp = NULL;
    size_t len = 0;
    CHECK_OK(vc_tokenizer_decode(t->tok, b.ids + b.cu[0] + b.plen[0], (size_t)b.rlen[0], 0, &resp, &len));
    CHECK_MSG(resp && strstr(resp, "Current parsed answer='\\\\frac{40}{3}' reward=1.0") && strstr(resp, FINAL),
              "row 0's response: %s", resp ? resp : "");
    free(resp);
    CHECK_OK(vc_tokenizer_decode(t->tok, b.ids + b.cu[2] + b.plen[2], (size_t)b.rlen[2], 0, &resp, &len));
    CHECK_MSG(resp && strstr(resp, "reward=0.0"), "row 2's response (ground truth 7): %s", resp ? resp : "");
    free(resp);
    rl_batch_free(&b);
    rl_images_free(&t->train_img);
    rl_agent_free(t->agent);
    vc_rl_dataset_free(t->train);
    zoom(t->tok, t->tmpl);
    vc_tokenizer_free(t->tok);
    vc_chat_template_free(t->tmpl);
    vc_config_free(cfg);
    free(t);
    if (!vc_t_fail) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
    }
    return vc_test_done();
}
