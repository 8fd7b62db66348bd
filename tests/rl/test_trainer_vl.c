/* GRPO on an image-text model end to end through build/verlc: a tiny random Qwen2-VL (vision tower included) with the
 * Qwen3 tokenizer's vocabulary, Qwen2-VL's chat template and image processor, prompts with images (paths, two images
 * in a row, a text-only row); the rollout and the trainer compute the same log-probs of the sampled tokens (one set
 * of kernels, M-RoPE and image features in both), the tower is trained unless actor.freeze_vision_tower, and the
 * export carries it; under LoRA the tower's linears get adapters (frozen: kept untrained). */
#include "rl_cli_util.h"
#include "verlc/dist.h"
#include "verlc/model.h"
#include "verlc/report.h"
#include "verlc/safetensors.h"
#include <limits.h>
#include <math.h>

static const char *CFG = RL_CLI_QWEN2_VL_CFG;

static const char *CFG3 = RL_CLI_QWEN3_VL_CFG;

/* Qwen3.5: Qwen3-VL's tower without deepstack beside the Gated DeltaNet text decoder (a linear-attention layer, then a
 * gated full-attention layer whose partial rotary interleaves the M-RoPE axes) */
static const char *CFG35 =
    "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],\"model_type\":\"qwen3_5\",\"image_token_id\":151655,"
    "\"video_token_id\":151656,\"vision_start_token_id\":151652,\"vision_end_token_id\":151653,\"tie_word_embeddings\":true,"
    "\"bos_token_id\":151643,\"eos_token_id\":151645,\"text_config\":{\"model_type\":\"qwen3_5_text\",\"vocab_size\":%d,"
    "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32,"
    "\"intermediate_size\":128,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,\"hidden_act\":\"silu\","
    "\"layer_types\":[\"linear_attention\",\"full_attention\"],\"linear_num_key_heads\":2,\"linear_num_value_heads\":2,"
    "\"linear_key_head_dim\":16,\"linear_value_head_dim\":16,\"linear_conv_kernel_dim\":4,"
    "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000,\"partial_rotary_factor\":0.5,"
    "\"mrope_section\":[3,3,2],\"mrope_interleaved\":true}},"
    "\"vision_config\":{\"model_type\":\"qwen3_5_vision\",\"depth\":2,\"hidden_size\":32,\"num_heads\":2,"
    "\"intermediate_size\":64,\"out_hidden_size\":64,\"patch_size\":16,\"spatial_merge_size\":2,\"temporal_patch_size\":2,"
    "\"in_channels\":3,\"num_position_embeddings\":16,\"hidden_act\":\"gelu_pytorch_tanh\"}}";

/* GLM-4.1V (glm4v): its tower (bicubic positions from a 4 x 4 table, downsample, its merger), GLM-4's text decoder with
 * GPT-J pairs, partial rotary and M-RoPE sections; the Qwen3 tokenizer's ids for its image tokens */
static const char *CFG_GLM =
    "{\"architectures\":[\"Glm4vForConditionalGeneration\"],\"model_type\":\"glm4v\",\"image_token_id\":151655,"
    "\"video_token_id\":151656,\"image_start_token_id\":151652,\"image_end_token_id\":151653,"
    "\"tie_word_embeddings\":false,\"bos_token_id\":151643,\"eos_token_id\":151645,"
    "\"text_config\":{\"model_type\":\"glm4v_text\",\"vocab_size\":%d,"
    "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
    "\"intermediate_size\":128,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"hidden_act\":\"silu\","
    "\"attention_bias\":true,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000,"
    "\"mrope_section\":[2,3,3],\"partial_rotary_factor\":0.5}},"
    "\"vision_config\":{\"depth\":1,\"hidden_size\":32,\"num_heads\":2,\"intermediate_size\":48,\"out_hidden_size\":64,"
    "\"image_size\":56,\"patch_size\":14,\"spatial_merge_size\":2,\"temporal_patch_size\":2,\"in_channels\":3,"
    "\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-5}}";

/* Kimi-VL (kimi_vl): MoonViT (bicubic positions from a 4 x 6 table, the 2-D rope on interleaved pairs) and its
 * projector beside a DeepSeek-V3 text decoder (MLA without a q LoRA, MoE after a dense layer, plain positions); its image
 * token is media_placeholder_token_id (the Qwen3 tokenizer's <|image_pad|> id, renamed <|media_pad|>) */
static const char *CFG_KIMI =
    "{\"architectures\":[\"KimiVLForConditionalGeneration\"],\"model_type\":\"kimi_vl\","
    "\"media_placeholder_token_id\":151655,\"tie_word_embeddings\":false,\"pad_token_id\":0,"
    "\"text_config\":{\"model_type\":\"deepseek_v3\",\"vocab_size\":%d,\"hidden_size\":64,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":2,\"num_key_value_heads\":2,\"intermediate_size\":128,\"moe_intermediate_size\":32,"
    "\"n_routed_experts\":4,\"num_experts_per_tok\":2,\"n_shared_experts\":1,\"first_k_dense_replace\":1,"
    "\"n_group\":1,\"topk_group\":1,\"q_lora_rank\":null,\"kv_lora_rank\":16,\"qk_nope_head_dim\":16,"
    "\"qk_rope_head_dim\":16,\"v_head_dim\":16,\"routed_scaling_factor\":2.446,\"norm_topk_prob\":true,"
    "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"hidden_act\":\"silu\",\"bos_token_id\":151643,"
    "\"eos_token_id\":151645,\"rope_theta\":800000},"
    "\"vision_config\":{\"model_type\":\"moonvit\",\"num_hidden_layers\":1,\"hidden_size\":32,"
    "\"num_attention_heads\":2,\"intermediate_size\":48,\"patch_size\":14,\"init_pos_emb_height\":4,"
    "\"init_pos_emb_width\":6,\"merge_kernel_size\":[2,2]}}";

/* Llama 4 (llama4): its vision model on 56-pixel tiles behind the pixel shuffle, adapter and projector, beside Llama
 * 4's text model (chunked attention, a NoPE layer, MoE every second layer); its image token <|patch|> is the Qwen3
 * tokenizer's <|image_pad|> id, renamed */
static const char *CFG_LLAMA4 =
    "{\"architectures\":[\"Llama4ForConditionalGeneration\"],\"model_type\":\"llama4\",\"image_token_index\":151655,"
    "\"tie_word_embeddings\":false,"
    "\"text_config\":{\"model_type\":\"llama4_text\",\"vocab_size\":%d,\"hidden_size\":64,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32,\"intermediate_size\":32,"
    "\"intermediate_size_mlp\":128,\"num_local_experts\":2,\"num_experts_per_tok\":1,\"interleave_moe_layer_step\":2,"
    "\"attention_chunk_size\":64,\"no_rope_layers\":[1,0],\"use_qk_norm\":true,\"max_position_embeddings\":4096,"
    "\"rms_norm_eps\":1e-5,\"rope_theta\":500000,\"bos_token_id\":151643,\"eos_token_id\":151645},"
    "\"vision_config\":{\"hidden_size\":32,\"intermediate_size\":128,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"image_size\":56,\"patch_size\":14,\"vision_output_dim\":48,\"projector_input_dim\":48,"
    "\"projector_output_dim\":48,\"pixel_shuffle_ratio\":0.5}}";

static const char *msub = "model"; /* the model folder the runs train */

/* four rows: one image, two images, an image after text (verl's geometry3k data source and reward), no image (gsm8k) */
static void write_data(const char *path) {
    char img[3][PATH_MAX];
    const char *rel[3] = { "tests/fixtures/vision/images/rgb_37x53.png", "tests/fixtures/vision/images/progressive_61x47.jpg",
                           "tests/fixtures/vision/images/rgb444_200x90.jpg" };
    for (int i = 0; i < 3; i++)
        if (!realpath(rel[i], img[i])) snprintf(img[i], sizeof img[i], "%s", rel[i]);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    const char *row = "{\"data_source\": \"hiyouga/geometry3k\", \"prompt\": [{\"role\": \"user\", \"content\": \"%s\"}], "
                      "\"images\": [%s], \"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"%d\"}}\n";
    char two[2 * PATH_MAX + 8], one[3][PATH_MAX + 4];
    for (int i = 0; i < 3; i++) snprintf(one[i], sizeof one[i], "\"%s\"", img[i]);
    snprintf(two, sizeof two, "\"%s\", \"%s\"", img[1], img[2]);
    fprintf(f, row, "<image>How many sides? Answer after ####.", one[0], 3);
    fprintf(f, row, "<image><image>Which is brighter?", two, 1);
    fprintf(f, row, "Count the corners: <image> then answer.", one[2], 4);
    fprintf(f, "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2 + 2?\"}], "
               "\"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"4\"}}\n");
    fclose(f);
}

static const char *launch = ""; /* an mpirun prefix for the data-parallel run */
static const char *rows_file = "rows.jsonl"; /* the data the runs read */

static void train_steps(const char *name, int steps, const char *extra) {
    CHECK_MSG(cli_sh("%s%s train algorithm.adv_estimator=grpo data.train_files=%s/%s data.val_files=%s/%s "
                     "data.train_batch_size=2 data.max_prompt_length=512 data.max_response_length=6 data.image_key=images "
                     "actor_rollout_ref.model.path=%s/%s actor_rollout_ref.actor.optim.lr=1e-2 "
                     "actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
                     "actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.01 actor_rollout_ref.actor.entropy_coeff=0.01 "
                     "actor_rollout_ref.rollout.n=2 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 "
                     "actor_rollout_ref.rollout.max_num_batched_tokens=16 trainer.logger=['console'] "
                     "trainer.n_gpus_per_node=1 trainer.total_training_steps=%d trainer.val_before_train=True "
                     "trainer.test_freq=2 trainer.default_local_dir=%s/%s %s >> %s/%s.log 2>&1",
                     launch, bin, dir, rows_file, dir, rows_file, dir, msub, steps, dir, name, extra, dir, name) == 0,
              "verlc train (%s) failed; see %s/%s.log", name, dir, name);
}

/* the run's first (first 1) or last value of metric name (-1: none) */
static double value_of(const char *run, const char *name, int first) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, run);
    vc_metrics *m = NULL;
    if (vc_metrics_read(path, &m)) return -1;
    const vc_metric_series *s = vc_metrics_find(m, name);
    double v = s && s->n ? s->y[first ? 0 : s->n - 1] : -1;
    vc_metrics_free(m);
    return v;
}

static void train(const char *name, const char *extra) { train_steps(name, 2, extra); }

static double last_of(const char *run, const char *name) { return value_of(run, name, 0); }

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* `verlc generate` on the rows (verl's schema with images): one output per row, each image's pads shown once in the
 * prompt, the same bytes with one sequence at a time, and other pixels give other log-probs */
static void generate(void) {
    const char *gen = "%s generate --model %s/model --input %s/%s --output %s/%s --greedy --max-new-tokens 4 %s 2>%s/gen.err";
    CHECK_MSG(cli_sh(gen, bin, dir, dir, "rows.jsonl", dir, "g1.jsonl", "", dir) == 0, "verlc generate with images failed");
    CHECK(cli_sh(gen, bin, dir, dir, "rows.jsonl", dir, "g2.jsonl", "--max-batch 1", dir) == 0);
    CHECK(cli_sh("sed 's/rgb_37x53.png/rgb444_200x90.jpg/' %s/rows.jsonl > %s/rows_b.jsonl", dir, dir) == 0);
    CHECK(cli_sh(gen, bin, dir, dir, "rows_b.jsonl", dir, "g3.jsonl", "", dir) == 0);
    char p[700];
    snprintf(p, sizeof p, "%s/g1.jsonl", dir);
    char *a = slurp(p);
    snprintf(p, sizeof p, "%s/g2.jsonl", dir);
    char *b = slurp(p);
    snprintf(p, sizeof p, "%s/g3.jsonl", dir);
    char *c = slurp(p);
    CHECK_MSG(a && count(a, "\"finish_reason\"") == 4 && count(a, "<|image_pad|>") == 4, "generate's rows: %s", a ? a : "");
    CHECK_MSG(a && b && !strcmp(a, b), "generate with images: --max-batch 1 differs");
    char *l1 = a ? strstr(a, "\"logprobs\"") : NULL, *l3 = c ? strstr(c, "\"logprobs\"") : NULL;
    CHECK_MSG(l1 && l3 && strncmp(l1, l3, 60), "other pixels, the same log-probs: the images were not used");
    free(a);
    free(b);
    free(c);
}

/* the largest difference between two exported models' weights (the tower's included) */
/* the largest difference between two models' weights, and (rms) the root mean square one */
static double weight_diff(const char *a, const char *b, double *rms) {
    vc_model *x = NULL, *y = NULL;
    double d = INFINITY, ss = 0;
    int64_t count = 0;
    if (!vc_model_load(a, &x) && !vc_model_load(b, &y) && vc_model_n_params(x) == vc_model_n_params(y)) {
        d = 0;
        for (int i = 0; i < vc_model_n_params(x) && isfinite(d); i++) {
            vc_tensor *tx = vc_model_param(x, i, NULL, NULL), *ty = vc_model_param(y, i, NULL, NULL);
            float *u = tx->n == ty->n ? malloc(sizeof(float) * (size_t)tx->n) : NULL, *v = u ? malloc(sizeof(float) * (size_t)tx->n) : NULL;
            if (!v || vc_model_param_read(x, i, 0, u) || vc_model_param_read(y, i, 0, v)) d = INFINITY;
            for (int64_t k = 0; v && isfinite(d) && k < tx->n; k++) {
                double e = fabs((double)u[k] - v[k]);
                d = fmax(d, e);
                ss += e * e;
            }
            count += tx->n;
            free(u);
            free(v);
        }
    }
    vc_model_free(x);
    vc_model_free(y);
    *rms = count ? sqrt(ss / (double)count) : INFINITY;
    return d;
}

/* two ranks under mpirun (each rolls out its prompt with its images; balance_batch moves rows, and their images
 * follow by prompt): the weights of the one-rank run within float rounding */
static void data_parallel(const char *init) {
    /* (the sanitizer build leaves it to the plain one: its data-parallel paths run in tests/rl/test_rl_dp.c) */
    if (!cli_mpirun_usable()) {
        printf("data parallelism skipped: a sanitizer build, no MPI in this build or no mpirun\n");
        return;
    }
    launch = CLI_MPIRUN_2;
    train("two_ranks", "trainer.n_gpus_per_node=2");
    launch = "";
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/trained/hf_model", dir);
    snprintf(b, sizeof b, "%s/two_ranks/hf_model", dir);
    double d_rms = 0, moved_rms = 0, d = weight_diff(a, b, &d_rms), moved = weight_diff(init, b, &moved_rms);
    /* the gradients agree to float rounding (the ranks sum their rows in other orders) and so do the weights: the
     * forward GEMMs are row-invariant (with OpenBLAS's, which round a row by its place in its tiles, AdamW at lr
     * 1e-2 turned the gradient's ulps into steps of the learning rate: 2e-3 apart on AMD EPYC) */
    double g1[2] = { value_of("trained", "actor/grad_norm", 1), value_of("two_ranks", "actor/grad_norm", 1) };
    double g2[2] = { last_of("trained", "actor/grad_norm"), last_of("two_ranks", "actor/grad_norm") };
    double k2[2] = { last_of("trained", "actor/kl_loss"), last_of("two_ranks", "actor/kl_loss") };
    double r1 = fabs(g1[0] - g1[1]) / fmax(g1[0], 1e-30), r2 = fabs(g2[0] - g2[1]) / fmax(g2[0], 1e-30);
    double rk = fabs(k2[0] - k2[1]) / fmax(k2[0], 1e-30);
    printf("1 vs 2 ranks: grad norms %.3g / %.3g apart (relative), step-2 KL %.3g; weights %.3g apart, %.3g in rms "
           "(moved %.3g, %.3g in rms)\n", r1, r2, rk, d, d_rms, moved, moved_rms);
    CHECK_MSG(g1[0] > 0 && r1 < 1e-4 && r2 < 1e-3 && rk < 1e-3, "1 vs 2 ranks with images: grad norms %g / %g and "
              "%g / %g, step-2 KL %g / %g", g1[0], g1[1], g2[0], g2[1], k2[0], k2[1]);
    /* AdamW divides by sqrt(v) + eps: an element whose gradient the ranks' sums round differently, relative to its
     * size, moves by another fraction of the learning rate (1e-2): the largest difference stays under a tenth of it
     * (1.6e-5 on AMD EPYC with AVX-512, under 1e-5 with AVX2), the root mean square one within 1e-5 of the steps' */
    CHECK_MSG(d <= 1e-3 && d_rms <= 1e-5 * moved_rms && moved > 1e-3,
              "1 vs 2 ranks with images: weights differ by %g, %g in rms (moved %g, %g in rms)", d, d_rms, moved,
              moved_rms);
}

/* 1 when dir's adapter file has module mod's lora_B, and *moved whether any of its values is not 0 */
static int adapter_b(const char *dir, const char *mod, int *moved) {
    char path[700], name[300];
    vc_checkpoint *ck = NULL;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    snprintf(name, sizeof name, "base_model.model.%s.lora_B.weight", mod);
    *moved = 0;
    const vc_st_tensor *t = vc_ckpt_open(path, &ck) ? NULL : vc_ckpt_find(ck, name);
    for (size_t k = 0; t && t->dtype == VC_F32 && k < t->nbytes / 4; k++) *moved |= ((const float *)t->data)[k] != 0.0f;
    vc_ckpt_close(ck);
    return t != NULL;
}

/* LoRA (verl's default target_modules all-linear): the tower's linears get adapters too, trained with the text's (the
 * merged export moves them, not the Conv3d patch embedding); resumed, the same export bit for bit; with the tower frozen
 * its adapters stay as drawn (B 0, kept in the file as verl keeps them); a run from the adapter (lora_adapter_path)
 * starts from it: its step-1 KL to the adapters-off reference is not 0 */
/* the tool agent (verl's geo3k multi-turn example's Geo3kTool, and the DeepEyes recipe's ImageZoomInTool beside it) on
 * the rows with images: the prompts rendered with the tools through the real engine and trainer, whose log-probs
 * still agree */
static void agent(void) {
    char tools[600];
    snprintf(tools, sizeof tools, "%s/tools.yaml", dir);
    FILE *f = fopen(tools, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("tools:\n  - class_name: verl.tools.geo3k_tool.Geo3kTool\n    config: {type: native}\n    tool_schema:\n"
          "      type: function\n      function:\n        name: calc_geo3k_reward\n        description: geo3k\n"
          "        parameters: {type: object, properties: {answer: {type: string}}, required: [answer]}\n"
          "  - class_name: verl.tools.image_zoom_in_tool.ImageZoomInTool\n    config: {num_workers: 2, type: native}\n"
          "    tool_schema:\n      type: function\n      function:\n        name: image_zoom_in_tool\n"
          "        description: zoom\n        parameters: {type: object, properties: {bbox_2d: {type: array, items: "
          "{type: number}}}, required: [bbox_2d]}\n", f);
    fclose(f);
    char extra[900];
    snprintf(extra, sizeof extra, "actor_rollout_ref.rollout.multi_turn.enable=True "
             "actor_rollout_ref.rollout.multi_turn.tool_config_path=%s actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3 "
             "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent data.return_raw_chat=True", tools);
    train_steps("agent", 1, extra);
    double diff = last_of("agent", "training/rollout_probs_diff_max"), kl = last_of("agent", "actor/kl_loss");
    CHECK_MSG(diff >= 0 && diff < 1e-9 && kl >= 0 && kl < 1e-7, "tool agent with images: rollout vs trainer %g, step-1 KL %g",
              diff, kl);
    CHECK_MSG(last_of("agent", "num_turns/min") >= 2, "the tool agent's turns were not reported");
    if (LIGHT) return; /* (the memory plan's tool crops: figures the release build checks) */
    /* with ImageZoomInTool's image in the rows (the text-only row's too, a file no prompt shows), the memory plan's
     * trials carry the crops a response may gain (here 2 of 12 x 10 patches within 64 tokens: a 196 x 84 fetch of
     * the 200 x 90 image, crops to 105 patches), so the trial's activations grow */
    CHECK(cli_sh("sed 's|\"reward_model\"|\"extra_info\": {\"tools_kwargs\": {\"image_zoom_in_tool\": {\"create_kwargs\": "
                 "{\"image\": \"tests/fixtures/vision/images/rgb444_200x90.jpg\"}}}}, \"reward_model\"|' %s/rows.jsonl > "
                 "%s/zoom.jsonl", dir, dir) == 0);
    char more[1200];
    snprintf(more, sizeof more, "%s data.max_response_length=64 data.train_files=%s/zoom.jsonl", extra, dir);
    train_steps("zoomplan", 1, more);
    snprintf(more, sizeof more, "%s data.max_response_length=64", extra);
    train_steps("zoomnone", 1, more);
    char log[600], log0[600];
    snprintf(log, sizeof log, "%s/zoomplan.log", dir);
    snprintf(log0, sizeof log0, "%s/zoomnone.log", dir);
    CHECK_MSG(cli_sh("grep -q 'may gain 2 tool images of up to 1 tile of 12 x 10 patches' %s", log) == 0 &&
              cli_sh("grep -q 'tool image' %s", log0) != 0, "the plan's tool images (see %s)", log);
    double with = cli_planned_mib(log), without = cli_planned_mib(log0);
    CHECK_MSG(with > without && without > 0, "planned step arena %.3f MiB with the crops, %.3f without", with, without);
    printf("zoom crops in the memory plan: step arena planned %.2f MiB, %.2f MiB without them\n", with, without);
    CHECK_MSG(cli_arena_within_plan(log) == 0, "the step arena's peak exceeds the plan in %s", log);
}

static void lora(const char *init) {
    static const char *L = "actor_rollout_ref.model.lora_rank=4 actor_rollout_ref.model.lora_alpha=8 ";
    char keys[1024], out[700], ad[700], a[700], b[700];
    int moved = 0;
    snprintf(keys, sizeof keys, "%strainer.save_freq=1", L);
    train("lora", keys);
    snprintf(out, sizeof out, "%s/lora/hf_model", dir);
    snprintf(ad, sizeof ad, "%s/lora_adapter", out);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.blocks.0.attn.qkv.weight") == 0 &&
              cli_same_tensor(init, out, "model.visual.merger.mlp.2.weight") == 0,
              "LoRA: the tower's linears did not move");
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.patch_embed.proj.weight") == 1 &&
              cli_same_tensor(init, out, "model.visual.blocks.0.norm1.weight") == 1,
              "LoRA moved the tower's base weights");
    CHECK_MSG(adapter_b(ad, "model.visual.blocks.0.mlp.fc1", &moved) && moved, "LoRA: the tower's fc1 adapter is %s",
              moved ? "missing" : "untrained");
    if (LIGHT) return; /* (resume, a frozen tower and a given adapter under LoRA: the release build) */
    train_steps("lora_resumed", 1, keys);
    train_steps("lora_resumed", 2, keys);
    snprintf(a, sizeof a, "%s/lora_resumed.log", dir);
    CHECK_MSG(cli_sh("grep -q 'resumed from .*global_step_1' %s", a) == 0, "the LoRA run did not resume (%s)", a);
    snprintf(a, sizeof a, "%s/model.safetensors", out);
    snprintf(b, sizeof b, "%s/lora_resumed/hf_model/model.safetensors", dir);
    CHECK_MSG(cli_file_eq(a, b), "LoRA with the tower's adapters: the resumed run's export differs");
    snprintf(keys, sizeof keys, "%sactor_rollout_ref.actor.freeze_vision_tower=True", L);
    train_steps("lora_frozen", 1, keys); /* (one step shows what moves) */
    snprintf(out, sizeof out, "%s/lora_frozen/hf_model", dir);
    snprintf(ad, sizeof ad, "%s/lora_adapter", out);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.blocks.0.attn.qkv.weight") == 1, "LoRA: a frozen tower moved");
    CHECK_MSG(cli_same_tensor(init, out, "model.language_model.layers.0.self_attn.q_proj.weight") == 0,
              "LoRA: the text did not move with the tower frozen");
    CHECK_MSG(adapter_b(ad, "model.visual.blocks.0.attn.qkv", &moved) && !moved,
              "LoRA: the frozen tower's adapter is %s", moved ? "trained" : "missing");
    snprintf(keys, sizeof keys, "%sactor_rollout_ref.model.lora_adapter_path=%s/lora/hf_model/lora_adapter", L, dir);
    train_steps("lora_from", 1, keys);
    double kl = value_of("lora_from", "actor/kl_loss", 1), kl0 = value_of("lora", "actor/kl_loss", 1);
    printf("LoRA: step-1 KL to the reference %g fresh, %g from the trained adapter\n", kl0, kl);
    CHECK_MSG(kl0 >= 0 && kl0 < 1e-7 && kl > 1e-6, "LoRA: step-1 KL %g fresh, %g from an adapter", kl0, kl);
}

/* a random model in <dir>/<sub> from config template tmpl (cfg: its text) with Qwen2-VL's template and the processor
 * at 16-pixel patches (Qwen3-VL's and Qwen3.5's); the runs train it from here on */
static void patch16_model(const char *sub, const char *tmpl, char *cfg, size_t cap) {
    msub = sub;
    CHECK(cli_sh("mkdir -p %s/%s", dir, sub) == 0);
    snprintf(cfg, cap, tmpl, rl_cli_vocab());
    rl_cli_init_model(sub, cfg);
    CHECK(cli_sh("cp tests/fixtures/vision/dataset/chat_template.jinja %s/%s/ && sed 's/\"patch_size\": 14/\"patch_size\": 16/' "
                 "tests/fixtures/vision/dataset/preprocessor_config.json > %s/%s/preprocessor_config.json", dir, sub, dir,
                 sub) == 0);
}

/* Qwen3.5 (verl's Qwen3.5 GRPO examples train on geo3k's images): one GRPO step with images whose rollout (the Gated
 * DeltaNet's state slots beside the images' prompt) and trainer agree, the tower and the text trained */
static void qwen3_5(void) {
    char cfg[4096], init[600], out[600], path[600];
    patch16_model("model35", CFG35, cfg, sizeof cfg);
    train_steps("trained35", 1, "");
    /* micro-batches of several rows with images (the memory plan's trial once read past its one-row image list) */
    if (!LIGHT) train_steps("micro35", 1, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
                "actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.use_dynamic_bsz=False");
    snprintf(path, sizeof path, "%s/micro35.log", dir);
    CHECK_MSG(LIGHT || cli_arena_within_plan(path) == 0, "micro-batches of 2 rows with images: the arena exceeds the plan in %s", path);
    double diff = last_of("trained35", "training/rollout_probs_diff_max"), kl = value_of("trained35", "actor/kl_loss", 1);
    printf("Qwen3.5 with images: rollout vs trainer max probability diff %g, step-1 KL %g\n", diff, kl);
    CHECK_MSG(diff >= 0 && diff < 1e-6 && kl >= 0 && kl < 1e-7, "Qwen3.5: rollout vs trainer %g, step-1 KL %g", diff, kl);
    snprintf(path, sizeof path, "%s/trained35.log", dir);
    CHECK_MSG(cli_arena_within_plan(path) == 0, "the step arena's peak exceeds the plan (or is not reported) in %s", path);
    snprintf(init, sizeof init, "%s/model35", dir);
    snprintf(out, sizeof out, "%s/trained35/hf_model", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.pos_embed.weight") == 0 &&
              cli_same_tensor(init, out, "model.visual.blocks.1.attn.qkv.weight") == 0 &&
              cli_same_tensor(init, out, "model.language_model.layers.0.linear_attn.A_log") == 0,
              "Qwen3.5's tower or Gated DeltaNet was not trained (or not exported)");
    /* verl's Qwen3.5 on-policy distillation example takes images too: the teacher scores each row with its images
     * (here the actor's own weights: the step-1 k1 loss is 0 exactly; forward_kl_topk's top-8 pass computes rows
     * together while these updates take one row at a time, within 1e-12 (0 with micro-batches of 2 rows, checked by
     * hand): without the images it would be far) */
    if (LIGHT) return; /* (distillation with images: the release build) */
    char keys[1200];
    snprintf(keys, sizeof keys, "distillation.enabled=true distillation.teacher_models.teacher_model.model_path=%s "
             "distillation.distillation_loss.use_task_rewards=false", init);
    train_steps("distill35", 1, keys);
    double dl = value_of("distill35", "distillation/loss", 1);
    size_t at = strlen(keys);
    snprintf(keys + at, sizeof keys - at, " distillation.distillation_loss.loss_mode=forward_kl_topk "
             "distillation.distillation_loss.topk=8");
    train_steps("distill35k", 1, keys);
    double dk = value_of("distill35k", "distillation/loss", 1);
    printf("Qwen3.5 distillation from itself with images: loss %g (k1), %g (forward_kl_topk)\n", dl, dk);
    CHECK_MSG(dl == 0 && dk >= 0 && dk < 1e-9, "Qwen3.5 distillation from itself with images: loss %g, %g", dl, dk);
}

/* another family's image path through verl's dataset path, on the Qwen3 tokenizer with its image tokens renamed to the
 * family's: its processor and chat template from tests/fixtures/vision/<fix>, generate (each image's markup in the
 * output rows), then one GRPO step whose rollout and trainer log-probs agree, and two of the tower's tensors trained and
 * exported */
typedef struct {
    const char *label, *sub, *cfg, *fix;
    const char *pad, *start, *end; /* the family's names of <|image_pad|>, <|vision_start|>, <|vision_end|> */
    const char *markup;            /* an image's markup in generate's output rows */
    const char *moved[2];          /* tower tensors the step moves */
    const char *sed;               /* more of the tokenizer's special tokens renamed (a sed script), or NULL */
} vl_family;

static void family(const vl_family *v) {
    char init[600], out[600], name[64], p[700];
    msub = v->sub;
    rl_cli_vl_model(v->sub, v->cfg, v->fix, v->pad, v->start, v->end);
    if (v->sed)
        CHECK(cli_sh("sed -i '%s' %s/%s/tokenizer.json %s/%s/tokenizer_config.json", v->sed, dir, v->sub, dir, v->sub) == 0);
    CHECK_MSG(cli_sh("%s generate --model %s/%s --input %s/rows.jsonl --output %s/%s.jsonl --greedy "
                     "--max-new-tokens 3 2>%s/%s_gen.err", bin, dir, v->sub, dir, dir, v->sub, dir, v->sub) == 0,
              "verlc generate with images on %s failed (%s/%s_gen.err)", v->label, dir, v->sub);
    snprintf(p, sizeof p, "%s/%s.jsonl", dir, v->sub);
    char *a = slurp(p);
    CHECK_MSG(a && count(a, "\"finish_reason\"") == 4 && count(a, v->markup) == 4, "%s generate's rows: %s", v->label,
              a ? a : "");
    free(a);
    snprintf(name, sizeof name, "trained_%s", v->sub);
    train_steps(name, 1, "");
    double diff = value_of(name, "training/rollout_probs_diff_max", 1), kl = value_of(name, "actor/kl_loss", 1);
    printf("%s: rollout vs trainer max probability diff %g, step-1 KL %g\n", v->label, diff, kl);
    CHECK_MSG(diff >= 0 && diff < 1e-9 && kl >= 0 && kl < 1e-7, "%s: rollout vs trainer %g, step-1 KL %g", v->label,
              diff, kl);
    snprintf(init, sizeof init, "%s/%s", dir, v->sub);
    snprintf(out, sizeof out, "%s/%s/hf_model", dir, name);
    CHECK_MSG(cli_same_tensor(init, out, v->moved[0]) == 0 && cli_same_tensor(init, out, v->moved[1]) == 0,
              "%s's tower was not trained (or not exported)", v->label);
}

/* one LoRA step on the family model in sub: the merged export moves tower linear `lin`, not norm `nrm`, and the adapter
 * holds trained B matrices for modules m1 and m2 */
static void family_lora(const char *sub, const char *lin, const char *nrm, const char *m1, const char *m2) {
    char init[600], out[600], ad[700], name[64];
    int moved = 0;
    msub = sub;
    snprintf(name, sizeof name, "lora_%s", sub);
    train_steps(name, 1, "actor_rollout_ref.model.lora_rank=4 actor_rollout_ref.model.lora_alpha=8 trainer.save_freq=1");
    snprintf(init, sizeof init, "%s/%s", dir, sub);
    snprintf(out, sizeof out, "%s/%s/hf_model", dir, name);
    snprintf(ad, sizeof ad, "%s/lora_adapter", out);
    CHECK_MSG(cli_same_tensor(init, out, lin) == 0 && cli_same_tensor(init, out, nrm) == 1,
              "%s under LoRA: %s did not move, or %s did", sub, lin, nrm);
    CHECK_MSG(adapter_b(ad, m1, &moved) && moved && adapter_b(ad, m2, &moved) && moved,
              "%s under LoRA: the adapter of %s or %s is %s", sub, m1, m2, moved ? "missing" : "untrained");
}

/* GLM-4.1V: Glm4vImageProcessor's smart_resize after fetch_image, its markup <|begin_of_image|><|image|><|end_of_image|>
 * with each <|image|> expanded; Kimi-VL: KimiVLImageProcessor's patches (padded to whole merge blocks, row by row), its
 * media markup (<|media_start|>image<|media_content|><|media_pad|><|media_end|>, each <|media_pad|> expanded), and LoRA
 * adapters on the tower's and projector's linears; Gemma 3: Gemma3ImageProcessor's fixed-size images and
 * Gemma3Processor's markup (the template's <start_of_image> written as "\n\n<start_of_image>" + 4 image tokens +
 * "<end_of_image>\n\n"), the image tokens attending to each other both ways in the rollout's prefill and in training;
 * InternVL: GotOcr2ImageProcessor's tiles and thumbnail, InternVLProcessor's markup (the template's <IMG_CONTEXT>
 * written as <img>, the token once per feature, </img>); Gemma 4: Gemma4ImageProcessor's aspect-kept sizes and
 * Gemma4Processor's markup (<|image|> written as <|image>, the token once per soft token, <image|>), the image tokens
 * attending both ways in the sliding layer only; Mistral 3: PixtralImageProcessor's sizes and PixtralProcessor's rows of
 * [IMG] closed by [IMG_BREAK] and [IMG_END]; Llama 4: Llama4ImageProcessor's tiles and Llama4Processor's tile markup */
static void families(void) {
    static const vl_family F[7] = {
        { "GLM-4.1V", "model_glm", NULL, "glm4v", "<|image|>", "<|begin_of_image|>", "<|end_of_image|>",
          "<|begin_of_image|><|image|><|end_of_image|>",
          { "model.visual.downsample.weight", "model.visual.embeddings.position_embedding.weight" } },
        { "Kimi-VL", "model_kimi", NULL, "kimi_vl", "<|media_pad|>", "<|media_start|>", "<|media_end|>",
          "<|media_content|><|media_pad|><|media_end|>",
          { "vision_tower.patch_embed.pos_emb.weight", "multi_modal_projector.linear_2.weight" } },
        { "Gemma 3", "model_gemma", NULL, "gemma3", "<image_soft_token>", "<start_of_image>", "<end_of_image>",
          "<start_of_image><image_soft_token><end_of_image>",
          { "model.vision_tower.embeddings.position_embedding.weight",
            "model.multi_modal_projector.mm_input_projection_weight" } },
        { "InternVL", "model_internvl", NULL, "internvl", "<IMG_CONTEXT>", "<img>", "</img>", "<IMG_CONTEXT></img>",
          { "model.vision_tower.embeddings.cls_token", "model.multi_modal_projector.linear_2.weight" } },
        { "Gemma 4", "model_gemma4", NULL, "gemma4", "<|image|>", "<|image>", "<image|>", "<|image|><image|>",
          { "model.vision_tower.patch_embedder.position_embedding_table",
            "model.embed_vision.embedding_projection.weight" } },
        { "Mistral 3", "model_mistral3", NULL, "mistral3", "[IMG]", "[IMG_BREAK]", "[IMG_END]", "[IMG][IMG_END]",
          { "model.vision_tower.ln_pre.weight", "model.multi_modal_projector.patch_merger.merging_layer.weight" } },
        { "Llama 4", "model_llama4", NULL, "llama4", "<|patch|>", "<|image_start|>", "<|image_end|>",
          "<|image|><|patch|><|image_end|>",
          { "vision_model.positional_embedding_vlm", "vision_model.vision_adapter.mlp.fc2.weight" },
          "s#<|quad_start|>#<|image|>#g; s#<|box_start|>#<|tile_x_separator|>#g; s#<|box_end|>#<|tile_y_separator|>#g" } };
    /* (Kimi K2.5's tower is Kimi-VL's behind its own projector names: verlc check and the export round trip of
     * tests/fixtures/models/kimi_k25_image cover it, its processor tests/vision/test_kimi_proc.c) */
    const char *cfgs[7] = { CFG_GLM, CFG_KIMI, RL_CLI_GEMMA3_CFG, RL_CLI_INTERNVL_CFG, RL_CLI_GEMMA4_CFG,
                            RL_CLI_MISTRAL3_CFG, CFG_LLAMA4 };
    for (int i = 0; i < (LIGHT ? 3 : 7); i++) { /* (InternVL, Gemma 4, Mistral 3 and Llama 4: the release build) */
        vl_family v = F[i];
        v.cfg = cfgs[i];
        family(&v);
    }
    /* Gemma 3 with use_prefix_grouper: the text row's samples share its prompt, the image rows' stay apart (their
     * image runs' bidirectional attention over their own rows) */
    msub = "model_gemma";
    train_steps("gemma_pg", 1, "actor_rollout_ref.actor.use_prefix_grouper=true");
    double diff = value_of("gemma_pg", "training/rollout_probs_diff_max", 1), kl = value_of("gemma_pg", "actor/kl_loss", 1);
    printf("Gemma 3 with use_prefix_grouper: rollout vs trainer max probability diff %g, step-1 KL %g\n", diff, kl);
    CHECK_MSG(diff >= 0 && diff < 1e-9 && kl >= 0 && kl < 1e-7, "Gemma 3 with use_prefix_grouper: rollout vs trainer %g, "
              "step-1 KL %g", diff, kl);
    /* under LoRA: adapters on Kimi-VL's tower and projector linears (wqkv, wo, fc0, fc1, linear_1, linear_2: the remote
     * code's names; Kimi K2.5's are the same tower's, its projector's proj.0 / proj.2) and on
     * Gemma 3's tower linears (q / k / v / out_proj, fc1, fc2; its projection matrix is no nn.Linear), PEFT's names
     * (the release build) */
    if (LIGHT) return;
    family_lora("model_kimi", "vision_tower.encoder.blocks.0.wqkv.weight", "vision_tower.encoder.blocks.0.norm0.weight",
                "vision_tower.encoder.blocks.0.mlp.fc0", "multi_modal_projector.linear_1");
    family_lora("model_gemma", "model.vision_tower.encoder.layers.0.self_attn.k_proj.weight",
                "model.vision_tower.encoder.layers.0.layer_norm1.weight", "model.vision_tower.encoder.layers.0.mlp.fc1",
                "model.vision_tower.encoder.layers.0.self_attn.q_proj");
    family_lora("model_gemma4", "model.vision_tower.encoder.layers.0.self_attn.k_proj.linear.weight",
                "model.vision_tower.encoder.layers.0.input_layernorm.weight",
                "model.vision_tower.encoder.layers.0.mlp.gate_proj.linear", "model.embed_vision.embedding_projection");
    /* (InternVL's and Mistral 3's tower adapters: PEFT's merge of them checked by tools/fixtures/peft_sweep.sh) */
}

/* rows with videos (verl's video_key): an mp4 through fetch_video, a frame list after an image, a webm at 4 frames,
 * each kept small by its pixel bounds */
static void write_video_data(const char *path) {
    const char *rel[4] = { "tests/fixtures/vision/video/h264_32x24.mp4", "tests/fixtures/vision/video/vp9_33x25.webm",
                           "tests/fixtures/vision/video_proc/frames/c_0.png", "tests/fixtures/vision/images/rgb_37x53.png" };
    char abs[4][PATH_MAX];
    for (int i = 0; i < 4; i++)
        if (!realpath(rel[i], abs[i])) snprintf(abs[i], sizeof abs[i], "%s", rel[i]);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    const char *b = "\"min_pixels\": 3136, \"max_pixels\": 12544";
    fprintf(f, "{\"data_source\": \"hiyouga/geometry3k\", \"prompt\": [{\"role\": \"user\", \"content\": \"<video>What moves?\"}], "
               "\"videos\": [{\"video\": \"%s\", %s}], \"reward_model\": {\"ground_truth\": \"A\"}}\n", abs[0], b);
    fprintf(f, "{\"data_source\": \"hiyouga/geometry3k\", \"prompt\": [{\"role\": \"user\", \"content\": \"Look at <image> then "
               "<video>.\"}], \"images\": [\"%s\"], \"videos\": [{\"video\": [\"%s\", \"%s\", \"%s\"], %s}], "
               "\"reward_model\": {\"ground_truth\": \"B\"}}\n", abs[3], abs[2], abs[2], abs[2], b);
    fprintf(f, "{\"data_source\": \"hiyouga/geometry3k\", \"prompt\": [{\"role\": \"user\", \"content\": \"<video>Which color?\"}], "
               "\"videos\": [{\"video\": \"%s\", \"nframes\": 4, %s}], \"reward_model\": {\"ground_truth\": \"C\"}}\n",
            abs[1], b);
    fclose(f);
}

/* videos (verl's Qwen3.5 video example, run_qwen3_5_2b_video_fsdp.sh): GRPO steps on rows with videos whose rollout
 * and trainer agree, on Qwen2-VL (a video one run of frame groups) and Qwen3.5 (frame groups between timestamps), and
 * `verlc generate` on them at any batch size */
static void videos(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/rows_video.jsonl", dir);
    write_video_data(path);
    rows_file = "rows_video.jsonl";
    const char *subs[2] = { "model", "model35" }, *runs[2] = { "video2", "video35" };
    CHECK(cli_sh("cp tests/fixtures/vision/video_dataset/qwen3_vl/video_preprocessor_config.json %s/model35/", dir) == 0);
    /* (the sanitizer build runs the video code in the dataset and processor tests; here it keeps to generate) */
    for (int k = 0; k < 2 && !getenv("VERLC_SANITIZE"); k++) {
        msub = subs[k];
        train_steps(runs[k], 1, "data.shuffle=False data.video_key=videos");
        double diff = last_of(runs[k], "training/rollout_probs_diff_max"), kl = value_of(runs[k], "actor/kl_loss", 1);
        printf("%s with videos: rollout vs trainer max probability diff %g, step-1 KL %g\n", subs[k], diff, kl);
        CHECK_MSG(diff >= 0 && diff < 1e-6 && kl >= 0 && kl < 1e-7, "%s with videos: rollout vs trainer %g, step-1 KL %g",
                  subs[k], diff, kl);
    }
    const char *gen = "%s generate --model %s/model --input %s/rows_video.jsonl --output %s/%s --greedy --max-new-tokens 4 "
                      "%s 2>%s/gen_video.err";
    CHECK(cli_sh(gen, bin, dir, dir, dir, "v1.jsonl", "", dir) == 0);
    CHECK(cli_sh(gen, bin, dir, dir, dir, "v2.jsonl", "--max-batch 1", dir) == 0);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/v1.jsonl", dir);
    snprintf(b, sizeof b, "%s/v2.jsonl", dir);
    char *x = slurp(a), *y = slurp(b);
    CHECK_MSG(x && y && !strcmp(x, y) && strstr(x, "<|video_pad|>"), "generate with videos: --max-batch 1 differs (or no "
              "rows)");
    free(x), free(y);
    rows_file = "rows.jsonl";
}

/* a run resumed from its step-1 checkpoint ends as the uninterrupted run "trained" (exported to out) did; a frozen
 * tower stays as init */
static void resumed_and_frozen(const char *init, const char *out) {
    char path[600], a[700], b[700], fout[600];
    train_steps("resumed", 1, "trainer.save_freq=1");
    train_steps("resumed", 2, "trainer.save_freq=1");
    snprintf(path, sizeof path, "%s/resumed.log", dir);
    CHECK_MSG(cli_sh("grep -q 'resumed from .*global_step_1' %s", path) == 0, "the second run did not resume (%s)", path);
    snprintf(a, sizeof a, "%s/model.safetensors", out);
    snprintf(b, sizeof b, "%s/resumed/hf_model/model.safetensors", dir);
    CHECK_MSG(cli_file_eq(a, b), "the resumed run's export differs from the uninterrupted run's");
    train_steps("frozen", 1, "actor_rollout_ref.actor.freeze_vision_tower=True");
    snprintf(fout, sizeof fout, "%s/frozen/hf_model", dir);
    CHECK_MSG(cli_same_tensor(init, fout, "model.visual.patch_embed.proj.weight") == 1, "a frozen tower moved");
    CHECK_MSG(cli_same_tensor(init, fout, "model.visual.merger.mlp.2.weight") == 1, "a frozen tower moved");
    CHECK_MSG(cli_same_tensor(init, fout, "model.language_model.embed_tokens.weight") == 0,
              "the text weights were not trained");
}

int main(void) {
    rl_cli_start("vl");
    char cfg[4096], path[600], out[600], init[600];
    CHECK(cli_sh("mkdir -p %s/model", dir) == 0);
    snprintf(cfg, sizeof cfg, CFG, rl_cli_vocab());
    rl_cli_init_model("model", cfg);
    CHECK(cli_sh("cp tests/fixtures/vision/dataset/chat_template.jinja tests/fixtures/vision/dataset/preprocessor_config.json "
                 "%s/model/", dir) == 0);
    snprintf(path, sizeof path, "%s/rows.jsonl", dir);
    write_data(path);
    generate();
    train("trained", "");
    /* the rollout's log-probs of its tokens are the trainer's (before the first update): the same kernels */
    double diff = last_of("trained", "training/rollout_probs_diff_max");
    CHECK_MSG(diff >= 0 && diff < 1e-9, "rollout vs trainer probabilities with images: max diff %g", diff);
    CHECK_MSG(last_of("trained", "actor/grad_norm") > 0, "no gradient");
    agent();
    /* the memory plan's trials carry the largest prompt's images: the vision tower's activations are planned */
    snprintf(path, sizeof path, "%s/trained.log", dir);
    CHECK_MSG(cli_arena_within_plan(path) == 0, "the step arena's peak exceeds the plan (or is not reported) in %s", path);
    /* the reference is the initial actor: its log-probs (the reference pass's images) are the actor's at step 1 */
    double kl = value_of("trained", "actor/kl_loss", 1);
    CHECK_MSG(kl >= 0 && kl < 1e-7, "step 1's KL to the reference (the same weights): %g", kl);
    CHECK_MSG(last_of("trained", "val-core/openai/gsm8k/acc/mean@1") >= 0, "no validation with images");
    snprintf(init, sizeof init, "%s/model", dir);
    snprintf(out, sizeof out, "%s/trained/hf_model", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.patch_embed.proj.weight") == 0, "the tower was not trained (or not exported)");
    CHECK_MSG(cli_same_tensor(init, out, "model.language_model.embed_tokens.weight") == 0, "the text weights were not trained");
    /* one step and a checkpoint (the tower's weights and AdamW state among the actor's), then resumed to the second:
     * the export is the uninterrupted run's, bit for bit (these runs and the others skipped under LIGHT run the code
     * paths of the runs the sanitizer build keeps with other settings: they are checked by the release build) */
    if (!LIGHT) resumed_and_frozen(init, out);
    lora(init);
    data_parallel(init);
    /* Qwen3-VL: its processor's 16-pixel patches, the deepstack features in rollout and training alike */
    patch16_model("model3", CFG3, cfg, sizeof cfg);
    train_steps("trained3", 1, "");
    double diff3 = last_of("trained3", "training/rollout_probs_diff_max"), kl3 = value_of("trained3", "actor/kl_loss", 1);
    CHECK_MSG(diff3 >= 0 && diff3 < 1e-9 && kl3 >= 0 && kl3 < 1e-7, "Qwen3-VL: rollout vs trainer %g, step-1 KL %g", diff3,
              kl3);
    snprintf(path, sizeof path, "%s/trained3.log", dir);
    CHECK_MSG(cli_arena_within_plan(path) == 0, "the step arena's peak exceeds the plan (or is not reported) in %s", path);
    /* bf16 matmuls (verl's param_dtype=bf16): the rollout and the trainer still read the same bf16-rounded inputs */
    if (!LIGHT) {
        train_steps("bf16_3", 1, "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16");
        double diff16 = value_of("bf16_3", "training/rollout_probs_diff_max", 1);
        double kl16 = value_of("bf16_3", "actor/kl_loss", 1);
        CHECK_MSG(diff16 >= 0 && diff16 < 1e-6 && kl16 >= 0 && kl16 < 1e-7, "Qwen3-VL in bf16: rollout vs trainer %g, "
                  "step-1 KL %g", diff16, kl16);
    }
    snprintf(init, sizeof init, "%s/model3", dir);
    snprintf(out, sizeof out, "%s/trained3/hf_model", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.deepstack_merger_list.0.linear_fc2.weight") == 0 &&
              cli_same_tensor(init, out, "model.visual.pos_embed.weight") == 0, "Qwen3-VL's tower was not trained");
    qwen3_5();
    videos();
    families();
    printf("rollout vs trainer max probability diff %g\n", diff);
    if (!vc_t_fail && !getenv("VERLC_KEEP")) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
