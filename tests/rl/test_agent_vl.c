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
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <limits.h>
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

int main(void) {
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
