/* SFT messages rows with images (verl's MultiTurnSFTDataset with a Qwen2-VL processor) on a tiny random Qwen2-VL with
 * the Qwen3 tokenizer's vocabulary, Qwen2-VL's chat template and image processor: a single-turn row's ids are
 * transformers' processor's (tests/fixtures/vision/sft_single_turn.json), each row holds its images' pad tokens, the
 * loss covers exactly the assistant turns (the text the same rows without images train on); `verlc sft` trains the
 * tower (its weights move; under LoRA its adapters, unless exclude_modules leaves it out); a missing image, more
 * <image> markers than images, images for a text-only model, images in a prompt/response row and truncation through
 * the image tokens are refused naming the row. */
#include "rl/rl_cli_util.h"
#include "data/vl_rows.h"
#include "train/sft_internal.h"
#include "sft_test_util.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include <math.h>

static const char *CFG = RL_CLI_QWEN2_VL_CFG;

static const char *TEXT_CFG =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"vocab_size\":%d,\"hidden_size\":16,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":8,\"intermediate_size\":32,"
    "\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,\"hidden_act\":\"silu\","
    "\"tie_word_embeddings\":true,\"eos_token_id\":151645,\"torch_dtype\":\"float32\"}";

#define IMG "tests/fixtures/vision/images/"

/* rows with images (img 1) or the same rows' text without markers or images (img 0) */
static void write_rows(const char *path, int img) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    const char *m = img ? "<image>" : "";
    fprintf(f, "{\"messages\": [{\"role\": \"user\", \"content\": \"%sWhat shape is it?\"}, {\"role\": \"assistant\", "
               "\"content\": \"A wide box.\"}]%s}\n", m, img ? ", \"images\": [\"" IMG "rgb444_200x90.jpg\"]" : "");
    fprintf(f, "{\"messages\": [{\"role\": \"user\", \"content\": \"%sDescribe it.\"}, {\"role\": \"assistant\", "
               "\"content\": \"Red.\"}, {\"role\": \"user\", \"content\": \"Now %sthis one?\"}, {\"role\": \"assistant\", "
               "\"content\": \"Also red, but smaller.\"}]%s}\n", m, m,
            img ? ", \"images\": [\"" IMG "rgb_37x53.png\", {\"path\": \"" IMG "progressive_61x47.jpg\"}]" : "");
    fprintf(f, "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2 + 2?\"}, {\"role\": \"assistant\", "
               "\"content\": \"4\"}], \"images\": []}\n");
    fclose(f);
}


/* the single-turn row against transformers' processor: the same ids, the same grid */
static void check_golden(const sft_data *d) {
    cJSON *g = NULL;
    CHECK_OK(vc_json_load_file("tests/fixtures/vision/sft_single_turn.json", &g));
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(g, "input_ids");
    const cJSON *thw = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(g, "image_grid_thw"), 0);
    int n = cJSON_GetArraySize(ids), same = n == d->cu[1] - d->cu[0];
    for (int k = 0; same && k < n; k++) same = d->ids[d->cu[0] + k] == cJSON_GetArrayItem(ids, k)->valueint;
    CHECK_MSG(same, "row 1: %lld ids, transformers' processor gives %d (or they differ)", (long long)(d->cu[1] - d->cu[0]),
              n);
    for (int k = 0; k < 3 && d->img; k++)
        CHECK(d->img[0].grid[k] == cJSON_GetArrayItem(thw, k)->valueint);
    cJSON_Delete(g);
}

/* the tokenized rows: pad runs of the images' tokens, the loss on the assistant turns as without images */
static void test_rows(void) {
    char mdir[600], path[600], tpath[600];
    snprintf(mdir, sizeof mdir, "%s/model", dir);
    vc_tokenizer *tok = NULL;
    vc_chat_template *tmpl = NULL;
    vc_vl_image_config vl;
    CHECK_OK(vc_tokenizer_load(mdir, &tok));
    CHECK_OK(vc_chat_template_load(mdir, &tmpl));
    CHECK_OK(vc_vl_image_config_load("tests/fixtures/vision/dataset/preprocessor_config.json", &vl));
    if (!tok || !tmpl) return;
    int32_t pad = vc_tokenizer_token_to_id(tok, VC_VL_IMAGE_TOKEN);
    sft_tok tk = { tok, tmpl, vc_tokenizer_eos_id(tok), NULL, "images", &vl, NULL, VC_VL_IMAGE_TOKEN, pad };
    vc_sft_config c;
    vc_sft_config_default(&c);
    c.max_length = 4096;
    c.skip_bad_lines = 0;
    snprintf(path, sizeof path, "%s/rows.jsonl", dir);
    snprintf(tpath, sizeof tpath, "%s/text_rows.jsonl", dir);
    write_rows(tpath, 0);
    sft_data d, t;
    CHECK_OK(sft_data_load(&c, path, &tk, &d));
    CHECK_OK(sft_data_load(&c, tpath, &tk, &t));
    CHECK(d.n == 3 && t.n == 3 && d.n_img == 3);
    if (d.n != 3 || t.n != 3) return;
    check_golden(&d);
    for (size_t i = 0; i < 3; i++) {
        int64_t want = 0, got = 0, masked = 0, tmasked = 0, last = 0;
        for (int64_t k = d.img_cu[i]; k < d.img_cu[i + 1]; k++) {
            want += (int64_t)d.img[k].grid[0] * d.img[k].grid[1] * d.img[k].grid[2] / 4;
            CHECK(d.img[k].tokens > 0);
        }
        for (int64_t k = d.cu[i]; k < d.cu[i + 1]; k++) {
            if (d.ids[k] == pad) {
                got++, last = k - d.cu[i] + 1;
                CHECK_MSG(d.mask[k] == 0, "row %zu: a pad in the loss", i);
            }
            masked += d.mask[k] > 0;
        }
        for (int64_t k = t.cu[i]; k < t.cu[i + 1]; k++) tmasked += t.mask[k] > 0;
        CHECK_MSG(got == want && (i == 2 || want > 0), "row %zu: %lld pad tokens for images of %lld", i, (long long)got,
                  (long long)want);
        CHECK_MSG(d.span[i] == last, "row %zu: image span %lld, last image token at %lld", i, (long long)d.span[i],
                  (long long)last);
        char *a = trained(tok, &d, i), *b = trained(tok, &t, i);
        CHECK_MSG(masked == tmasked && !strcmp(a, b), "row %zu: trains on [%s] (%lld tokens), without images [%s] (%lld)",
                  i, a, (long long)masked, b, (long long)tmasked);
        free(a), free(b);
    }
    CHECK(d.img_cu[1] - d.img_cu[0] == 1 && d.img_cu[2] - d.img_cu[1] == 2 && d.img_cu[3] == d.img_cu[2]);
    /* right truncation inside the image tokens: refused naming the row, not cut */
    sft_data x;
    c.max_length = 30, c.truncation = "right";
    CHECK(sft_data_load(&c, path, &tk, &x) == VC_ERR_ARG);
    CHECK_MSG(strstr(vc_last_error(), "rows.jsonl:1: truncation=right") != NULL, "%s", vc_last_error());
    sft_data_free(&d);
    sft_data_free(&t);
    vc_chat_template_free(tmpl);
    vc_tokenizer_free(tok);
}

/* `verlc sft` of model on rows into <dir>/<out>, its log <dir>/<out>.log; the exit status */
static const char *launch = ""; /* an mpirun prefix for the data-parallel run */

static int sft(const char *model, const char *rows, const char *out, const char *extra) {
    return cli_sh("%s%s sft --model %s/%s --train %s/%s --out %s/%s max_length=2048 train_batch_size=2 micro_batch_size=1 "
                  "lr=1e-2 epochs=2 max_steps=2 threads=2 quiet=1 %s > %s/%s.log 2>&1", launch, bin, dir, model, dir, rows, dir, out, extra,
                  dir, out);
}

static int log_has(const char *out, const char *text) {
    return cli_sh("grep -qF '%s' %s/%s.log", text, dir, out) == 0;
}

static void test_cli(void) {
    CHECK_MSG(sft("model", "rows.jsonl", "run", "") == 0, "verlc sft with images failed: see %s/run.log", dir);
    /* micro-batches of two rows with images: the memory plan's trial gives every row the images (it once read past
     * its one-row list) */
    CHECK_MSG(LIGHT || (sft("model", "rows.jsonl", "micro2", "micro_batch_size=2") == 0 && log_has("micro2", "memory plan")),
              "verlc sft with images in micro-batches of 2 failed: see %s/micro2.log", dir);
    char init[600], out[600], metrics[600];
    snprintf(init, sizeof init, "%s/model/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/run/step_2/model.safetensors", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.patch_embed.proj.weight") == 0, "the tower was not trained");
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.merger.mlp.2.weight") == 0, "the tower's merger was not trained");
    snprintf(metrics, sizeof metrics, "%s/run/metrics.jsonl", dir);
    CHECK(cli_sh("test $(grep -c '\"train/loss\": [0-9]' %s) = 2", metrics) == 0);
    CHECK(cli_arena_within_plan(strcat(strcpy(out, dir), "/run.log")) == 0);
    /* LoRA (all-linear): the tower's linears get adapters that the images train, its weights stay; excluded, none */
    CHECK_MSG(sft("model", "rows.jsonl", "lora", "lora_rank=4 lora_alpha=8") == 0, "verlc sft with LoRA and images "
              "failed: see %s/lora.log", dir);
    char ad[600];
    snprintf(out, sizeof out, "%s/lora/step_2/model.safetensors", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.blocks.0.mlp.fc1.weight") == 1, "LoRA moved the tower's weights");
    snprintf(ad, sizeof ad, "%s/lora/step_2/lora_adapter/adapter_model.safetensors", dir);
    vc_checkpoint *ck = NULL;
    const char *fc1 = "base_model.model.model.visual.blocks.0.mlp.fc1.lora_B.weight";
    const vc_st_tensor *b = vc_ckpt_open(ad, &ck) ? NULL : vc_ckpt_find(ck, fc1);
    int moved = 0;
    for (size_t k = 0; b && b->dtype == VC_F32 && k < b->nbytes / 4; k++) moved |= ((const float *)b->data)[k] != 0.0f;
    CHECK_MSG(b && moved, "SFT with LoRA: the tower's fc1 adapter is %s", b ? "untrained" : "missing");
    vc_ckpt_close(ck);
    if (LIGHT) return; /* (excluding modules, and the rows without their images: the release build) */
    CHECK_MSG(sft("model", "rows.jsonl", "lora_ex", "lora_rank=4 lora_alpha=8 exclude_modules=.*visual.*") == 0,
              "verlc sft with LoRA excluding the tower failed: see %s/lora_ex.log", dir);
    snprintf(ad, sizeof ad, "%s/lora_ex/step_2/lora_adapter/adapter_model.safetensors", dir);
    CHECK_MSG(cli_sh("grep -q 'self_attn.q_proj.lora_A' %s && ! grep -q 'visual' %s", ad, ad) == 0,
              "exclude_modules=.*visual.*: the tower has adapters (or the text none) in %s", ad);
    /* the same rows without their images train on other losses: the images reach the model */
    CHECK(sft("model", "rows.jsonl", "noimg", "data.image_key=none_here") == 0);
    CHECK(cli_sh("a=$(grep -o '\"train/loss\": [0-9.e-]*' %1$s/run/metrics.jsonl | head -1); "
                 "b=$(grep -o '\"train/loss\": [0-9.e-]*' %1$s/noimg/metrics.jsonl | head -1); test \"$a\" != \"$b\"",
                 dir) == 0);
}

/* Gemma 3 in SFT: Gemma3Processor's markup around each image's tokens, the image tokens attending to each other both
 * ways in training; its tower trains, and the rows without their images train on another loss */
static void test_gemma(void) {
    rl_cli_vl_model("model_gemma", RL_CLI_GEMMA3_CFG, "gemma3", "<image_soft_token>", "<start_of_image>",
                    "<end_of_image>");
    CHECK_MSG(sft("model_gemma", "rows.jsonl", "gemma", "") == 0, "verlc sft with images on Gemma 3 failed: see %s/gemma.log",
              dir);
    char init[600], out[600];
    snprintf(init, sizeof init, "%s/model_gemma/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/gemma/step_2/model.safetensors", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.vision_tower.embeddings.position_embedding.weight") == 0 &&
              cli_same_tensor(init, out, "model.vision_tower.encoder.layers.0.self_attn.k_proj.weight") == 0,
              "SFT on Gemma 3 with images: the tower was not trained");
    if (LIGHT) return; /* (the rows without their images: the release build) */
    CHECK(sft("model_gemma", "rows.jsonl", "gemma_noimg", "data.image_key=none_here") == 0);
    CHECK(cli_sh("a=$(grep -o '\"train/loss\": [0-9.e-]*' %1$s/gemma/metrics.jsonl | head -1); "
                 "b=$(grep -o '\"train/loss\": [0-9.e-]*' %1$s/gemma_noimg/metrics.jsonl | head -1); test \"$a\" != \"$b\"",
                 dir) == 0);
}

/* SFT with images on the family model `name` (model_<name>, its processor and template from
 * tests/fixtures/vision/<name>, the Qwen3 tokenizer's pad / start / end renamed): tensors moved[] train, kept[] (its
 * buffers) do not (the release build) */
static void sft_family(const char *name, const char *cfg, const char *const pads[3], const char *const moved[2],
                       const char *kept) {
    if (LIGHT) return;
    char sub[64], init[600], out[600];
    snprintf(sub, sizeof sub, "model_%s", name);
    rl_cli_vl_model(sub, cfg, name, pads[0], pads[1], pads[2]);
    CHECK_MSG(sft(sub, "rows.jsonl", name, "") == 0, "verlc sft with images on %s failed: see %s/%s.log", name, dir, name);
    snprintf(init, sizeof init, "%s/%s/model.safetensors", dir, sub);
    snprintf(out, sizeof out, "%s/%s/step_2/model.safetensors", dir, name);
    CHECK_MSG(cli_same_tensor(init, out, moved[0]) == 0 && cli_same_tensor(init, out, moved[1]) == 0 &&
              (!kept || cli_same_tensor(init, out, kept) == 1),
              "SFT on %s with images: the tower was not trained, or its buffers were", name);
}

/* Gemma 4: Gemma4ImageProcessor's patches, Gemma4Processor's markup around each image token of the template (a wrong
 * count of image tokens stops the run by name), its clip bounds untouched (InternVL's and Mistral 3's markup share
 * that path: test_trainer_vl runs them through verl's RL dataset) */
static void test_gemma4(void) {
    static const char *const gp[3] = { "<|image|>", "<|image>", "<image|>" };
    static const char *const gm[2] = { "model.vision_tower.patch_embedder.position_embedding_table",
                                       "model.embed_vision.embedding_projection.weight" };
    sft_family("gemma4", RL_CLI_GEMMA4_CFG, gp, gm, "model.vision_tower.encoder.layers.0.mlp.up_proj.output_max");
}

/* the largest difference between two checkpoints' tensors of the same names (INFINITY: not comparable) */
static double ckpt_diff(const char *a, const char *b) {
    vc_checkpoint *x = NULL, *y = NULL;
    double d = INFINITY;
    if (!vc_ckpt_open(a, &x) && !vc_ckpt_open(b, &y) && vc_ckpt_count(x) == vc_ckpt_count(y)) {
        d = 0;
        for (int i = 0; i < vc_ckpt_count(x) && isfinite(d); i++) {
            const vc_st_tensor *u = vc_ckpt_at(x, i), *v = vc_ckpt_find(y, u->name);
            if (!v || u->dtype != VC_F32 || v->dtype != VC_F32 || u->nbytes != v->nbytes) { d = INFINITY; break; }
            for (size_t k = 0; k < u->nbytes / 4; k++)
                d = fmax(d, fabs((double)((const float *)u->data)[k] - ((const float *)v->data)[k]));
        }
    }
    vc_ckpt_close(x);
    vc_ckpt_close(y);
    return d;
}

/* two ranks under mpirun, each running its micro-batch and making only its own rows' images: one rank's weights */
static void test_dp(void) {
    if (!cli_mpirun_usable()) {
        printf("data parallelism skipped: a sanitizer build, no MPI in this build, or no mpirun\n");
        return;
    }
    launch = CLI_MPIRUN_2;
    CHECK_MSG(sft("model", "rows.jsonl", "dp2", "") == 0, "verlc sft with images on 2 ranks failed: see %s/dp2.log", dir);
    launch = "";
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/run/step_2/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/dp2/step_2/model.safetensors", dir);
    double d = ckpt_diff(a, b);
    printf("sft with images, 1 vs 2 ranks: max weight difference %.3g\n", d);
    /* (one rank adds its second row's weight gradient into the first's inside the GEMM, two ranks add the two after
     * it: AdamW at lr 1e-2 carries that rounding to 1e-5-2e-5 of the weights; a row computed wrong moves them 1e-2) */
    CHECK_MSG(d <= 1e-4, "sft with images: 2 ranks' weights differ from 1 rank's by %g", d);
}

static void bad_row(const char *name, const char *row, const char *model, const char *want) {
    char path[600], rows[64];
    snprintf(rows, sizeof rows, "%s.jsonl", name);
    snprintf(path, sizeof path, "%s/%s", dir, rows);
    CHECK_OK(vc_write_file_atomic(path, row, strlen(row)));
    CHECK_MSG(sft(model, rows, name, "skip_bad_lines=false") != 0, "%s: accepted", name);
    char at[128];
    snprintf(at, sizeof at, "%s:1: ", rows);
    CHECK_MSG(log_has(name, at) && log_has(name, want), "%s: the refusal does not name the row or '%s': see %s/%s.log",
              name, want, dir, name);
}

static void test_bad(void) {
    bad_row("missing", "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>Hi\"}, {\"role\": \"assistant\", "
            "\"content\": \"Yo\"}], \"images\": [\"" IMG "no_such.png\"]}\n", "model", "no_such.png");
    bad_row("markers", "{\"messages\": [{\"role\": \"user\", \"content\": \"<image><image>Hi\"}, {\"role\": "
            "\"assistant\", \"content\": \"Yo\"}], \"images\": [\"" IMG "rgb_37x53.png\"]}\n", "model", "more <image> markers");
    bad_row("textmodel", "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>Hi\"}, {\"role\": \"assistant\", "
            "\"content\": \"Yo\"}], \"images\": [\"" IMG "rgb_37x53.png\"]}\n", "text", "has no vision tower");
    bad_row("prompt", "{\"prompt\": \"<image>Hi\", \"response\": \"Yo\", \"images\": [\"" IMG "rgb_37x53.png\"]}\n", "model",
            "prompt/response row");
    bad_row("video", "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
            "\"content\": \"Yo\"}], \"videos\": [\"clip.mp4\"]}\n", "model", "0 <video> markers");
    bad_row("videofile", "{\"messages\": [{\"role\": \"user\", \"content\": \"<video>Hi\"}, {\"role\": \"assistant\", "
            "\"content\": \"Yo\"}], \"videos\": [\"no_such_clip.mp4\"]}\n", "model", "no_such_clip.mp4");
    bad_row("textvideo", "{\"messages\": [{\"role\": \"user\", \"content\": \"<video>Hi\"}, {\"role\": \"assistant\", "
            "\"content\": \"Yo\"}], \"videos\": [\"clip.mp4\"]}\n", "text", "has no vision tower");
    /* images for a text-only model stop the run even where bad rows are skipped */
    CHECK(sft("text", "rows.jsonl", "textskip", "") != 0 && log_has("textskip", "rows.jsonl:1: "));
}

int main(void) {
    cli_quiet = 1;
    rl_cli_start("sft_images");
    char cfg[4096], path[600];
    CHECK(cli_sh("mkdir -p %s/model %s/text", dir, dir) == 0);
    snprintf(cfg, sizeof cfg, CFG, rl_cli_vocab());
    rl_cli_init_model("model", cfg);
    CHECK(cli_sh("cp tests/fixtures/vision/dataset/chat_template.jinja tests/fixtures/vision/dataset/preprocessor_config.json "
                 "%s/model/", dir) == 0);
    snprintf(cfg, sizeof cfg, TEXT_CFG, rl_cli_vocab());
    rl_cli_init_model("text", cfg);
    snprintf(path, sizeof path, "%s/rows.jsonl", dir);
    write_rows(path, 1);
    test_rows();
    test_cli();
    test_gemma();
    test_gemma4();
    test_dp();
    test_bad();
    if (!vc_t_fail && !getenv("KEEP")) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
