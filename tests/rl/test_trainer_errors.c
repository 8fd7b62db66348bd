/* Bad inputs to the trainer: missing dataset, rows without ground truth, malformed rows, unknown
 * data sources, reward programs that crash, hang or answer with a non-number, bad config values.
 * Each must fail fast with a message naming the file:line, key or program; none may hang. */
#include "../../src/rl/demo_internal.h"
#include "rl_demo_util.h"
#include "verlc/report.h"
#include "verlc/trainer.h"
#include "vc_test.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void put(const char *name, const char *text, int exec) {
    char *p = vc_path_join(dir, name);
    CHECK_OK(vc_write_file_atomic(p, text, strlen(text)));
    if (exec) chmod(p, 0755);
    free(p);
}

static const char *ROW = "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"12+34=\"}],"
                         "\"reward_model\":{\"style\":\"rule\",\"ground_truth\":\"46\"}}\n";

/* builds a config from the base overrides plus extra ones ("|"-separated) and runs new + fit */
static vc_status run(const char *extra, double *seconds) {
    char buf[4096];
    snprintf(buf, sizeof buf,
             "actor_rollout_ref.model.path=%s/model|data.train_files=%s/train.jsonl|data.val_files=null|"
             "data.train_batch_size=2|data.max_prompt_length=16|data.max_response_length=3|actor_rollout_ref.rollout.n=2|"
             "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.ppo_mini_batch_size=2|trainer.total_training_steps=1|"
             "trainer.default_local_dir=%s/run|trainer.resume_mode=disable|%s",
             dir, dir, dir, extra);
    double t0 = vc_now();
    int64_t done = 0;
    vc_status st = demo_fit(buf, &done);
    if (seconds) *seconds = vc_now() - t0;
    return st;
}

static void expect(const char *extra, vc_status want, const char *needle1, const char *needle2) {
    double s = 0;
    vc_status st = run(extra, &s);
    const char *msg = vc_last_error();
    CHECK_MSG(st == want, "[%s] status %s, want %s (%s)", extra, vc_status_name(st), vc_status_name(want), msg);
    if (needle1) CHECK_MSG(strstr(msg, needle1) != NULL, "[%s] message lacks `%s`: %s", extra, needle1, msg);
    if (needle2) CHECK_MSG(strstr(msg, needle2) != NULL, "[%s] message lacks `%s`: %s", extra, needle2, msg);
    CHECK_MSG(s < 20, "[%s] took %.1f s", extra, s);
    printf("  %-70.70s -> %s\n", extra, msg);
}

static void setup(void) {
    demo_model_setup(dir, 3);
    demo_rm_setup(dir, 5);
    char rows[2048] = "";
    for (int i = 0; i < 4; i++) strcat(rows, ROW);
    put("train.jsonl", rows, 0);
    put("dapo.jsonl",
        "{\"data_source\":\"math_dapo\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+1=\"}],\"reward_model\":{\"ground_truth\":\"2\"}}\n"
        "{\"data_source\":\"math_dapo\",\"prompt\":[{\"role\":\"user\",\"content\":\"2+2=\"}],\"reward_model\":{\"ground_truth\":\"4\"}}\n"
        "{\"data_source\":\"aime2024\",\"prompt\":[{\"role\":\"user\",\"content\":\"3+3=\"}],\"reward_model\":{\"ground_truth\":\"6\"}}\n", 0);
    put("tools.yaml",
        "tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    tool_schema:\n      type: function\n"
        "      function:\n        name: calc_gsm8k_reward\n        description: d\n        parameters: {type: object, properties: "
        "{answer: {type: string}}, required: [answer]}\n", 0);
    put("nogt.jsonl",
        "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+2=\"}],\"reward_model\":{\"ground_truth\":\"3\"}}\n"
        "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+3=\"}],\"reward_model\":{\"style\":\"rule\"}}\n",
        0);
    put("broken.jsonl", "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+2=\"}],\"reward_model\":{\"ground_truth\":\"3\"}}\n"
                        "\n{\"data_source\": \"x\", \"prompt\": [}\n", 0);
    put("unknown_ds.jsonl", "{\"data_source\":\"acme/secret\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+2=\"}],\"reward_model\":{\"ground_truth\":\"3\"}}\n"
                            "{\"data_source\":\"acme/secret\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+3=\"}],\"reward_model\":{\"ground_truth\":\"4\"}}\n", 0);
    put("crash.sh", "#!/bin/sh\nread line\nexit 3\n", 1);
    put("hang.sh", "#!/bin/sh\nexec sleep 60\n", 1);
    put("nonnum.sh", "#!/bin/sh\nwhile read line; do echo '{\"score\": \"high\"}'; done\n", 1);
    put("good.sh", "#!/bin/sh\nwhile read line; do echo '{\"score\": 0.5}'; done\n", 1);
}

/* the last value of a metric of the last run (NAN when missing) */
static double last_metric(const char *name) {
    char *p = vc_path_join(dir, "run/metrics.jsonl");
    vc_metrics *m = NULL;
    double v = NAN;
    if (vc_metrics_read(p, &m) == VC_OK && m) {
        const vc_metric_series *se = vc_metrics_find(m, name);
        if (se && se->n) v = se->y[se->n - 1];
    }
    vc_metrics_free(m);
    free(p);
    return v;
}

/* verl's actor divides its logits by rollout.temperature, and the rollout's log-probs are vLLM's
 * processed ones (temperature applied): the two agree at 0.7 (rollout_is forces the old-log-prob pass),
 * while the model's raw log-probs (logprobs_mode=raw_logprobs) do not. The optimal token baseline runs
 * with sum_pi_squared and reports verl's variance-proxy metrics. */
static void temperature_and_otb(void) {
    const char *base = "actor_rollout_ref.rollout.temperature=0.7|algorithm.rollout_correction.rollout_is=token";
    char e[512];
    CHECK_OK(run(base, NULL));
    double same = last_metric("training/rollout_probs_diff_max");
    snprintf(e, sizeof e, "%s|actor_rollout_ref.rollout.logprobs_mode=raw_logprobs", base);
    CHECK_OK(run(e, NULL));
    double raw = last_metric("training/rollout_probs_diff_max");
    CHECK_MSG(same < 1e-4 && raw > 1e-2, "rollout vs trainer probabilities at temperature 0.7: %g processed, %g raw",
              same, raw);
    printf("  rollout vs trainer at temperature 0.7: max |p diff| %.2g (processed log-probs), %.2g (raw)\n", same, raw);
    for (int tir = 0; tir < 2; tir++) {
        snprintf(e, sizeof e, "%s|algorithm.adv_estimator=%soptimal_token_baseline|"
                 "actor_rollout_ref.actor.calculate_sum_pi_squared=true", base, tir ? "tir_" : "");
        CHECK_OK(run(e, NULL));
        double p2 = last_metric("variance_proxy/proxy2_total_power"), w = last_metric("variance_proxy/expected_w");
        double p1 = last_metric("variance_proxy/proxy1_signal_strength"), gn = last_metric("actor/grad_norm");
        CHECK_MSG(isfinite(p2) && p2 >= 0 && w > 0 && fabs(p1 - gn * gn) < 1e-6 * (1 + p1),
                  "%s: variance proxies %g %g %g (grad_norm %g)", e, p2, w, p1, gn);
    }
}

/* validation with val_kwargs.n = 4 samples: verl's mean/std/best/worst metrics on the core variable acc;
 * math_dapo rows (score +-1, acc, pred) add maj@k, and the validation dump lines carry acc and pred */
static void validation_metrics(void) {
    char e[1024];
    snprintf(e, sizeof e, "data.val_files=%s/dapo.jsonl|actor_rollout_ref.rollout.val_kwargs.n=4|"
             "actor_rollout_ref.rollout.val_kwargs.do_sample=true|actor_rollout_ref.rollout.val_kwargs.temperature=1.0|"
             "trainer.val_before_train=true|trainer.test_freq=1|trainer.validation_data_dir=%s/valdump|"
             "reward_model.overlong_buffer.enable=true|reward_model.overlong_buffer.len=2|"
             "reward_model.overlong_buffer.penalty_factor=1.0|reward_model.overlong_buffer.log=true", dir, dir);
    CHECK_OK(run(e, NULL));
    static const char *WANT[] = { "val-core/math_dapo/acc/mean@4", "val-core/math_dapo/acc/best@4/mean",
                                  "val-core/math_dapo/acc/maj@4/mean", "val-aux/math_dapo/acc/std@4",
                                  "val-aux/math_dapo/acc/best@2/std", "val-aux/math_dapo/acc/worst@4/mean",
                                  "val-aux/math_dapo/score/maj@2/mean", "val-aux/math_dapo/reward/mean@4",
                                  "val-core/aime2024/acc/mean@4", "val-aux/math_dapo/overlong_reward/mean@4",
                                  "val-aux/math_dapo/overlong/mean@4", NULL };
    for (int i = 0; WANT[i]; i++) CHECK_MSG(isfinite(last_metric(WANT[i])), "validation: no %s", WANT[i]);
    double acc = last_metric("val-core/math_dapo/acc/mean@4"), best = last_metric("val-core/math_dapo/acc/best@4/mean");
    double rw = last_metric("val-aux/math_dapo/reward/mean@4");
    double pen = last_metric("val-aux/math_dapo/overlong_reward/mean@4"), ol = last_metric("val-aux/math_dapo/overlong/mean@4");
    /* the reward is the score (+-1) plus the overlong penalty; acc is the score's */
    CHECK_MSG(acc >= 0 && acc <= best && best <= 1 && fabs(rw - (2 * acc - 1) - pen) < 1e-9 && pen <= 0 && ol >= 0 && ol <= 1,
              "validation: acc %g, best@4 %g, reward %g, overlong penalty %g (%g overlong)", acc, best, rw, pen, ol);
    char *p = vc_path_join(dir, "valdump/0.jsonl"), *text = NULL;
    size_t len = 0;
    CHECK_MSG(vc_read_file(p, &text, &len) == VC_OK && text && strstr(text, "\"pred\":") && strstr(text, "\"acc\":") &&
                  strstr(text, "\"reward\":") && strstr(text, "\"overlong\":"), "%s lacks the reward's extra values", p);
    /* data.val_batch_size: validation in batches of one prompt samples the same responses (each prompt's
     * random stream is its own), so the same dump and metrics */
    size_t n1 = strlen(e);
    snprintf(e + n1, sizeof e - n1, "|data.val_batch_size=1");
    CHECK_OK(run(e, NULL));
    char *again = NULL;
    CHECK_MSG(vc_read_file(p, &again, &len) == VC_OK && again && text && !strcmp(again, text),
              "validation in batches of 1 sampled other responses");
    CHECK(last_metric("val-core/math_dapo/acc/mean@4") == acc && last_metric("val-aux/math_dapo/reward/mean@4") == rw);
    free(again);
    free(text);
    free(p);
    snprintf(e, sizeof e, "data.val_files=%s/dapo.jsonl|data.val_batch_size=0", dir);
    expect(e, VC_ERR_ARG, "data.val_batch_size", "positive");
}

/* verl's MTP training in RL (model.mtp.enable with enable_train) on a MiMo config of the demo model's shape whose MTP
 * layer `verlc init` writes: a step with verl's actor/mtp_losses metric, the layer moved (loss and gradients:
 * tests/train/test_mtp.c against PyTorch) */
/* the rollout drafting with the MTP layer (model.mtp.enable_rollout): the same step as without (the same tokens and
 * log-probs), drafts counted; also with LoRA adapters on the decoder (the MTP row has none), and three drafts a step */
static void spec_runs(const char *md) {
    static const char *METRICS[] = { "actor/mtp_losses/mtp_1_loss", "actor/entropy", "response_length/mean",
                                     "training/rollout_probs_diff_mean" };
    static const char *MODES[] = { "actor_rollout_ref.model.mtp.enable_train=true",
                                   "actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.model.lora_alpha=8",
                                   "actor_rollout_ref.model.mtp.num_speculative_tokens=3" };
    char e[1024];
    for (int k = 0; k < 3; k++) {
        double want[4], got[4];
        for (int spec = 0; spec < 2; spec++) {
            snprintf(e, sizeof e, "actor_rollout_ref.model.path=%s|actor_rollout_ref.model.mtp.enable=true|%s|"
                     "data.max_response_length=12|actor_rollout_ref.model.mtp.enable_rollout=%s", md, MODES[k],
                     spec ? "true" : "false");
            vc_status st = run(e, NULL);
            CHECK_MSG(st == VC_OK, "[%s] %s", e, vc_last_error());
            for (int i = 0; i < 4; i++) (spec ? got : want)[i] = last_metric(METRICS[i]);
        }
        int same = 1;
        for (int i = 0; i < 4; i++) same &= memcmp(&want[i], &got[i], sizeof(double)) == 0 || (isnan(want[i]) && isnan(got[i]));
        double drafts = last_metric("rollout/drafts"), rate = last_metric("rollout/draft_acceptance_rate");
        CHECK_MSG(same, "[%s] drafting changed the step: entropy %g vs %g, response length %g vs %g", MODES[k], want[1],
                  got[1], want[2], got[2]);
        CHECK_MSG(drafts > 0 && rate >= 0 && rate <= 1, "[%s] %g drafts, acceptance %g", MODES[k], drafts, rate);
        printf("  RL drafting with the MTP layer [%s]: the same step (entropy %.6f), %g drafts, %.3f kept\n", MODES[k],
               got[1], drafts, rate);
    }
    /* rollout.name=sglang: SGLang's EAGLE steps are the drafts a step */
    snprintf(e, sizeof e, "actor_rollout_ref.model.path=%s|actor_rollout_ref.model.mtp.enable=true|"
             "actor_rollout_ref.model.mtp.enable_rollout=true|actor_rollout_ref.rollout.name=sglang|"
             "actor_rollout_ref.model.mtp.speculative_num_steps=9", md);
    CHECK(run(e, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "speculative_num_steps=9") != NULL);
    printf("  %s\n", vc_last_error());
}

/* Qwen3.5 (Gated DeltaNet layers, its MTP layer behind mtp.fc) drafting in verlc train: the same step as without */
static void hybrid_spec_run(void) {
    char *qp = vc_path_join(dir, "q35.json"), *qd = vc_path_join(dir, "q35"), cfg[1200], e[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": 32,"
             " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"layer_types\": [\"linear_attention\", \"full_attention\"],"
             " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, \"linear_num_key_heads\": 2,"
             " \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8, \"linear_value_head_dim\": 8,"
             " \"linear_conv_kernel_dim\": 4, \"vocab_size\": %d, \"mtp_num_hidden_layers\": 1, \"rms_norm_eps\": 1e-6,"
             " \"max_position_embeddings\": 256, \"tie_word_embeddings\": false, \"bos_token_id\": 1, \"eos_token_id\": 2,"
             " \"torch_dtype\": \"float32\"}", DEMO_VOCAB);
    CHECK_OK(vc_write_file_atomic(qp, cfg, strlen(cfg)));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random_ex(qp, 13, 1, &m));
    if (m) CHECK_OK(vc_model_save_hf(m, qd, VC_F32));
    CHECK_OK(demo_write_tokenizer(qd));
    double want[3], got[3];
    static const char *METRICS[] = { "actor/entropy", "response_length/mean", "training/rollout_probs_diff_mean" };
    for (int spec = 0; spec < 2; spec++) {
        snprintf(e, sizeof e, "actor_rollout_ref.model.path=%s|actor_rollout_ref.model.mtp.enable=true|"
                 "data.max_response_length=12|actor_rollout_ref.model.mtp.enable_rollout=%s", qd, spec ? "true" : "false");
        CHECK_MSG(run(e, NULL) == VC_OK, "[%s] %s", e, vc_last_error());
        for (int i = 0; i < 3; i++) (spec ? got : want)[i] = last_metric(METRICS[i]);
    }
    int same = 1;
    for (int i = 0; i < 3; i++) same &= memcmp(&want[i], &got[i], sizeof(double)) == 0;
    double drafts = last_metric("rollout/drafts");
    CHECK_MSG(same && drafts > 0, "qwen3.5 drafting: entropy %g vs %g, response length %g vs %g, %g drafts", want[0],
              got[0], want[1], got[1], drafts);
    printf("  RL drafting with Qwen3.5's MTP layer (Gated DeltaNet states taken back): the same step (entropy %.6f), "
           "%g drafts\n", got[0], drafts);
    vc_model_free(m);
    free(qp);
    free(qd);
}

static void mtp_run(void) {
    char *cp = vc_path_join(dir, "config.json"), *mp = vc_path_join(dir, "mimo.json"), *md = vc_path_join(dir, "mimo");
    char *text = NULL, cfg[2048], e[600];
    size_t len = 0;
    CHECK_OK(vc_read_file(cp, &text, &len));
    const char *a = text ? strstr(text, "\"llama\"") : NULL;
    CHECK(a != NULL);
    if (a) {
        snprintf(cfg, sizeof cfg, "{\"num_nextn_predict_layers\":1,%.*s\"mimo\"%s", (int)(a - text - 1), text + 1, a + 7);
        CHECK_OK(vc_write_file_atomic(mp, cfg, strlen(cfg)));
        vc_model *m = NULL, *t = NULL;
        CHECK_OK(vc_model_init_random(mp, 9, &m));
        if (m) CHECK_OK(vc_model_save_hf(m, md, VC_F32));
        CHECK_OK(demo_write_tokenizer(md));
        snprintf(e, sizeof e, "actor_rollout_ref.model.path=%s|actor_rollout_ref.model.mtp.enable=true|"
                 "actor_rollout_ref.model.mtp.enable_train=true|trainer.save_freq=1", md);
        CHECK_OK(run(e, NULL));
        double v = last_metric("actor/mtp_losses/mtp_1_loss");
        CHECK_MSG(v > 1 && v < 20, "actor/mtp_losses/mtp_1_loss %g", v);
        /* the checkpoint's export holds the trained layer under MiMo's names */
        char out[400];
        snprintf(out, sizeof out, "%s/mimo_hf", dir);
        snprintf(e, sizeof e, "%s/run/global_step_1/actor", dir);
        CHECK_OK(vc_train_export(e, out, -1));
        CHECK_OK(vc_model_load_mtp(out, &t));
        int moved = 0;
        for (int i = 0; m && t && i < vc_model_n_params(m); i++) {
            if (vc_model_param_layer(m, i) <= vc_model_cfg(m)->n_layer) continue;
            int64_t n = vc_model_param(m, i, NULL, NULL)->n;
            float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
            vc_model_param_read(m, i, 0, x);
            vc_model_param_read(t, i, 0, y);
            moved += memcmp(x, y, sizeof(float) * (size_t)n) != 0;
            free(x);
            free(y);
        }
        CHECK_MSG(moved >= 10, "%d MTP tensors trained", moved);
        printf("  RL with MTP training: actor/mtp_losses/mtp_1_loss %.4f, %d MTP tensors moved\n", v, moved);
        spec_runs(md);
        hybrid_spec_run();
        vc_model_free(m);
        vc_model_free(t);
    }
    free(text);
    free(cp);
    free(mp);
    free(md);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_terr_%d", (int)getpid());
    setup();
    char e[1024];
    /* a healthy run first, so that every failure below is caused by its one bad input */
    CHECK_OK(run("", NULL));
    snprintf(e, sizeof e, "data.train_files=%s/nope.jsonl", dir);
    expect(e, VC_ERR_IO, "nope.jsonl", "not found");
    snprintf(e, sizeof e, "data.train_files=%s/nogt.jsonl", dir);
    expect(e, VC_ERR_MISSING, "nogt.jsonl:2", "reward_model.ground_truth");
    snprintf(e, sizeof e, "data.train_files=%s/broken.jsonl", dir);
    expect(e, VC_ERR_FORMAT, "broken.jsonl:3", NULL);
    snprintf(e, sizeof e, "data.train_files=%s/unknown_ds.jsonl", dir);
    expect(e, VC_ERR_UNSUPPORTED, "acme/secret", "custom_reward_function.path");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/crash.sh", dir);
    expect(e, VC_ERR_TIMEOUT, "crash.sh", "failed on");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/hang.sh|+custom_reward_function.timeout_s=0.3", dir);
    expect(e, VC_ERR_TIMEOUT, "hang.sh", "failed on");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/nonnum.sh", dir);
    expect(e, VC_ERR_FORMAT, "nonnum.sh", "score");
    snprintf(e, sizeof e, "custom_reward_function.path=%s/nope_program", dir);
    vc_status st = run(e, NULL);
    CHECK_MSG(st != VC_OK, "a missing reward program must fail");
    /* a custom reward program needs no ground truth */
    snprintf(e, sizeof e, "custom_reward_function.path=%s/good.sh|data.train_files=%s/nogt.jsonl", dir, dir);
    CHECK_OK(run(e, NULL));
    expect("algorithm.adv_estimator=ppo2", VC_ERR_ARG, "algorithm.adv_estimator", "ppo2");
    expect("actor_rollout_ref.rollout.n=0", VC_ERR_ARG, "actor_rollout_ref.rollout.n", NULL);
    expect("actor_rollout_ref.actor.loss_agg_mode=mean", VC_ERR_ARG, "loss_agg_mode", NULL);
    expect("actor_rollout_ref.actor.policy_loss.loss_mode=ppo3", VC_ERR_UNSUPPORTED, "loss_mode", "ppo3");
    expect("actor_rollout_ref.actor.tau_neg=0", VC_ERR_ARG, "tau_neg", NULL);
    expect("actor_rollout_ref.rollout.max_num_seqs=-3", VC_ERR_ARG, "max_num_seqs", "-3");
    expect("algorithm.filter_groups.enable=true|algorithm.filter_groups.max_num_gen_batches=2|"
           "actor_rollout_ref.rollout.n=2|data.gen_batch_size=2", VC_ERR_ARG, "filter_groups", "max_num_gen_batches=2");
    expect("algorithm.filter_groups.enable=true|algorithm.filter_groups.metric=bleu", VC_ERR_ARG, "metric", "bleu");
    expect("actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.model.exclude_modules=.*", VC_ERR_ARG, "lora_rank",
           "excluded");
    expect("algorithm.adv_estimator=gae|critic.model.lora_rank=4|critic.zero_stage=2", VC_ERR_UNSUPPORTED,
           "critic.model.lora_rank", "zero_stage");
    expect("actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.model.target_modules=[q_proj,qkv]", VC_ERR_ARG,
           "lora_rank", "qkv");
    snprintf(e, sizeof e, "reward_model.enable=true|reward_model.model.path=%s/model", dir);
    expect(e, VC_ERR_UNSUPPORTED, "reward_model.model.path", "no score head");
    expect("reward_model.enable=true|reward_model.model.path=/nonexistent/rm", VC_ERR_IO, "/nonexistent/rm", NULL);
    expect("actor_rollout_ref.model.mtp.enable=true|actor_rollout_ref.model.mtp.enable_train=true", VC_ERR_ARG,
           "mtp.enable_train", "declares no multi-token-prediction layers");
    mtp_run();
    expect("actor_rollout_ref.model.mtp.enable=true", VC_ERR_ARG, "mtp.enable", "declares no multi-token-prediction");
    expect("actor_rollout_ref.rollout.multi_turn.tool_config_path=/nonexistent/tools.yaml", VC_ERR_IO,
           "tool_config_path", "/nonexistent/tools.yaml");
    expect("actor_rollout_ref.rollout.agent.default_agent_loop=react_agent", VC_ERR_UNSUPPORTED, "default_agent_loop",
           "react_agent");
    expect("algorithm.use_pf_ppo=true|algorithm.pf_ppo.reweight_method=rank", VC_ERR_ARG, "reweight_method", "rank");
    expect("algorithm.rollout_correction.rollout_is=geometric", VC_ERR_ARG, "rollout_is", "geometric");
    expect("algorithm.rollout_correction.rollout_rs=token_k1", VC_ERR_ARG, "rollout_rs_threshold", NULL);
    expect("algorithm.rollout_correction.rollout_rs=seq_k9|algorithm.rollout_correction.rollout_rs_threshold=2",
           VC_ERR_ARG, "rollout_rs", "seq_k9");
    expect("algorithm.rollout_correction.bypass_mode=true|algorithm.rollout_correction.loss_type=ppo",
           VC_ERR_ARG, "loss_type", "ppo");
    expect("algorithm.rollout_correction.rollout_is=token|algorithm.rollout_correction.rollout_is_threshold=0",
           VC_ERR_ARG, "rollout_is_threshold", NULL);
    expect("algorithm.rollout_correction.rollout_is=token|algorithm.rollout_correction.rollout_is_threshold='2_1'",
           VC_ERR_ARG, "rollout_is_threshold", "lower <= upper");
    expect("actor_rollout_ref.actor.policy_loss.kl_cov_ratio=-1", VC_ERR_ARG, "kl_cov_ratio", NULL);
    expect("actor_rollout_ref.actor.policy_loss.clip_cov_lb=6", VC_ERR_ARG, "clip_cov_lb", NULL);
    expect("trainer.use_legacy_worker_impl=yes", VC_ERR_ARG, "use_legacy_worker_impl", "yes");
    expect("actor_rollout_ref.actor.loss_scale_factor=-2", VC_ERR_ARG, "loss_scale_factor", "-2");
    expect("trainer.use_legacy_worker_impl=enable|actor_rollout_ref.actor.strategy=megatron", VC_ERR_UNSUPPORTED,
           "use_legacy_worker_impl", "megatron");
    expect("data.max_prompt_length=3", VC_ERR_ARG, "max_prompt_length", "train.jsonl:1");
    /* overlong prompts filtered with a count: all of them here, which is an error naming the count */
    expect("data.max_prompt_length=3|data.filter_overlong_prompts=true", VC_ERR_ARG, "4 filtered", NULL);
    /* truncation keeps the run going */
    CHECK_OK(run("data.max_prompt_length=4|data.truncation=left", NULL));
    /* every estimator, loss mode and KL option runs a step */
    static const char *OK_RUNS[] = {
        "trainer.use_legacy_worker_impl=enable|actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "algorithm.adv_estimator=rloo", "algorithm.adv_estimator=reinforce_plus_plus",
        "algorithm.adv_estimator=reinforce_plus_plus_baseline", "algorithm.adv_estimator=remax",
        "algorithm.adv_estimator=opo", "algorithm.adv_estimator=gpg", "algorithm.norm_adv_by_std_in_grpo=false",
        "algorithm.adv_estimator=grpo_passk", "algorithm.adv_estimator=grpo_vectorized",
        "algorithm.adv_estimator=rloo_vectorized",
        "actor_rollout_ref.actor.use_kl_loss=true|actor_rollout_ref.actor.kl_loss_type=k2",
        "algorithm.use_kl_in_reward=true|algorithm.kl_ctrl.type=adaptive",
        "actor_rollout_ref.actor.policy_loss.loss_mode=gspo|actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
        "algorithm.rollout_correction.rollout_is=token",
        "actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.model.exclude_modules=[up_proj,o_proj]",
        "algorithm.rollout_correction.rollout_is=sequence|algorithm.rollout_correction.rollout_is_batch_normalize=true",
        "algorithm.rollout_correction.rollout_is=token|algorithm.rollout_correction.rollout_is_threshold='0.5_2.0'",
        "reward.reward_manager.name=dapo|+reward.reward_kwargs.overlong_buffer_cfg.enable=true|"
        "+reward.reward_kwargs.overlong_buffer_cfg.len=2|+reward.reward_kwargs.max_resp_len=4",
        "algorithm.rollout_correction.rollout_rs='token_k1,seq_mean_k3'|algorithm.rollout_correction.rollout_rs_threshold='0.5_2.0,0.1'",
        "algorithm.rollout_correction.bypass_mode=true|algorithm.rollout_correction.loss_type=reinforce|"
        "algorithm.rollout_correction.rollout_is=token|algorithm.rollout_correction.rollout_rs=seq_max_k2|"
        "algorithm.rollout_correction.rollout_rs_threshold=1",
        "algorithm.adv_estimator=optimal_token_baseline|actor_rollout_ref.actor.calculate_sum_pi_squared=true|"
        "algorithm.rollout_correction.bypass_mode=true|algorithm.rollout_correction.loss_type=ppo_clip",
        "algorithm.adv_estimator=tir_optimal_token_baseline|actor_rollout_ref.actor.calculate_sum_pi_squared=true|"
        "actor_rollout_ref.rollout.multi_turn.enable=true|actor_rollout_ref.rollout.multi_turn.tool_config_path=%s/tools.yaml",
        "actor_rollout_ref.actor.policy_loss.loss_mode=sapo",
        "actor_rollout_ref.actor.optim.override_optimizer_config={eps:1e-6,betas:[0.9,0.95],foreach:false}", "algorithm.adv_estimator=gpg|actor_rollout_ref.actor.policy_loss.loss_mode=gpg",
        "actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov|actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.2",
        "actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov|actor_rollout_ref.actor.policy_loss.ppo_kl_coef=1",
        "actor_rollout_ref.actor.policy_loss.loss_mode=geo_mean|actor_rollout_ref.actor.clip_ratio=0.4",
        "actor_rollout_ref.actor.entropy_coeff=0.01|actor_rollout_ref.actor.ppo_epochs=2|actor_rollout_ref.actor.ppo_mini_batch_size=1",
        "actor_rollout_ref.actor.use_dynamic_bsz=true|actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12",
        "actor_rollout_ref.rollout.top_k=3|actor_rollout_ref.rollout.top_p=0.9|actor_rollout_ref.rollout.temperature=0.7",
        "algorithm.adv_estimator=gae|critic.ppo_micro_batch_size_per_gpu=1|critic.model.path=%s/model",
        "algorithm.adv_estimator=gae|critic.model.path=%s/model|critic.forward_max_token_len_per_gpu=1|"
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=1|actor_rollout_ref.actor.use_kl_loss=true",
        "reward_model.enable=true|reward_model.model.path=%s/rm",
        "+data.apply_chat_template_kwargs.enable_thinking=false",
        "actor_rollout_ref.rollout.multi_turn.enable=true|actor_rollout_ref.rollout.multi_turn.tool_config_path=%s/tools.yaml",
        "algorithm.adv_estimator=gae|critic.model.path=%s/model|algorithm.use_pf_ppo=true|"
        "algorithm.pf_ppo.reweight_method=max_min", NULL };
    for (int i = 0; OK_RUNS[i]; i++) {
        snprintf(e, sizeof e, OK_RUNS[i], dir);
        vc_status s2 = run(e, NULL);
        CHECK_MSG(s2 == VC_OK, "[%s] %s", OK_RUNS[i], vc_last_error());
    }
    expect("actor_rollout_ref.model.path=/nonexistent/model", VC_ERR_IO, "/nonexistent/model", NULL);
    expect("actor_rollout_ref.actor.optim.optimizer=AdamW8bit", VC_ERR_UNSUPPORTED, "optim.optimizer", "AdamW8bit");
    snprintf(e, sizeof e, "critic.optim.optimizer_impl=bitsandbytes.optim|algorithm.adv_estimator=gae|critic.model.path=%s/model", dir);
    expect(e, VC_ERR_UNSUPPORTED, "critic.optim.optimizer_impl", "bitsandbytes");
    expect("actor_rollout_ref.actor.optim.override_optimizer_config={eps:1e-6,lion:true}", VC_ERR_UNSUPPORTED,
           "override_optimizer_config.lion", NULL);
    expect("actor_rollout_ref.actor.optim.override_optimizer_config={amsgrad:true}", VC_ERR_UNSUPPORTED, "amsgrad", NULL);
    expect("algorithm.adv_estimator=optimal_token_baseline", VC_ERR_ARG, "calculate_sum_pi_squared=True", NULL);
    expect("actor_rollout_ref.rollout.logprobs_mode=raw_logits", VC_ERR_ARG, "logprobs_mode", "raw_logits");
    temperature_and_otb();
    validation_metrics();
    if (!vc_t_fail) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    }
    return vc_test_done();
}
