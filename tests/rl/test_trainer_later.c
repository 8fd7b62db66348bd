/* Later verl's algorithms in the trainer: adv_estimator=gdpo with reward components from a Python
 * compute_score (later verl's reward group and gdpo reward manager), checked against
 * reinforce_plus_plus_baseline, which GDPO equals with one component and no std normalisation (same rollout,
 * same first-step advantages, loss and gradient); verl's gdpo/<key>/ metrics; the dppo_tv, dppo_kl and
 * dro losses and the token-sum aggregation running two steps; use_prefix_grouper's shared prompts giving the same
 * step; and the refusals verl makes, named. */
#include "../../src/rl/demo_internal.h"
#include "rl_demo_util.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* the value of "key" in the logged line of step `step` (1-based); NAN when absent */
static double logged(const char *name, int step, const char *key) {
    char log[300], pat[160], *line = NULL;
    snprintf(log, sizeof log, "%s/%s.jsonl", dir, name);
    snprintf(pat, sizeof pat, "\"%s\":", key);
    FILE *f = fopen(log, "r");
    size_t cap = 0;
    double v = NAN;
    for (int k = 1; f && getline(&line, &cap, f) > 0; k++)
        if (k == step) {
            const char *p = strstr(line, pat);
            v = p ? atof(p + strlen(pat)) : NAN;
        }
    free(line);
    if (f) fclose(f);
    return v;
}

static vc_status run(const char *name, int steps, const char *extra) {
    char buf[4096];
    demo_file_logger(dir, name);
    snprintf(buf, sizeof buf,
             "actor_rollout_ref.model.path=%s/model|data.train_files=%s/train.jsonl|data.val_files=null|"
             "data.train_batch_size=2|data.max_prompt_length=16|data.max_response_length=4|"
             "actor_rollout_ref.rollout.n=4|actor_rollout_ref.actor.ppo_mini_batch_size=2|"
             "actor_rollout_ref.rollout.temperature=1.5|actor_rollout_ref.actor.optim.lr=1e-2|"
             "trainer.total_training_steps=%d|trainer.save_freq=-1|trainer.logger=[file]|"
             "trainer.default_local_dir=%s/%s|reward.custom_reward_function.path=%s/rw.py|trainer.experiment_name=later|%s",
             dir, dir, steps, dir, name, dir, extra);
    int64_t done = 0;
    return demo_fit(buf, &done);
}

static void test_gdpo(void) {
    CHECK_OK(run("gdpo1", 1, "algorithm.adv_estimator=gdpo|+algorithm.gdpo_reward_keys=[length_reward]|"
                             "algorithm.norm_adv_by_std_in_grpo=false|reward.reward_manager.name=gdpo"));
    CHECK_OK(run("rpp", 1, "algorithm.adv_estimator=reinforce_plus_plus_baseline"));
    static const char *K[] = { "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
                               "actor/pg_loss", "actor/grad_norm" };
    for (int i = 0; i < 5; i++) {
        double a = logged("gdpo1", 1, K[i]), b = logged("rpp", 1, K[i]);
        CHECK_MSG(isfinite(a) && fabs(a - b) <= 1e-6 * fmax(1, fabs(b)), "%s: gdpo %.9g, reinforce++ baseline %.9g", K[i],
                  a, b);
    }
    CHECK_MSG(logged("gdpo1", 1, "critic/advantages/max") > 0.1, "the rewards did not vary");
    /* two components with weights, std-normalised; verl's metrics of each */
    CHECK_OK(run("gdpo2", 2, "algorithm.adv_estimator=gdpo|+algorithm.gdpo_reward_keys=[length_reward,digit_reward]|"
                             "+algorithm.gdpo_reward_weights=[1.0,0.5]"));
    double m = logged("gdpo2", 1, "gdpo/digit_reward/mean"), mx = logged("gdpo2", 1, "gdpo/digit_reward/max");
    double mn = logged("gdpo2", 1, "gdpo/length_reward/min"), sd = logged("gdpo2", 2, "gdpo/length_reward/std");
    CHECK_MSG(m >= 0 && m <= mx && mx <= 1 && mn >= 0 && mn <= 1 && sd >= 0 && sd <= 0.5, "gdpo metrics %g %g %g %g",
              m, mx, mn, sd);
    CHECK(isfinite(logged("gdpo2", 2, "actor/pg_loss")));
}

static void test_losses(void) {
    static const char *M[] = { "dppo_tv", "dppo_kl", "dro" };
    for (int i = 0; i < 3; i++) {
        char ov[300];
        snprintf(ov, sizeof ov, "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.policy_loss.loss_mode=%s|"
                                "actor_rollout_ref.actor.policy_loss.dro_beta=0.1|actor_rollout_ref.actor.loss_agg_mode=%s",
                 M[i], i == 2 ? "token-sum" : "token-mean");
        CHECK_OK(run(M[i], 2, ov));
        double kl = logged(M[i], 2, "actor/ppo_kl"), cf = logged(M[i], 2, "actor/pg_clipfrac");
        CHECK_MSG(isfinite(kl) && isfinite(logged(M[i], 2, "actor/pg_loss")), "%s: ppo_kl %g", M[i], kl);
        CHECK_MSG(i == 2 ? isnan(cf) : (cf >= 0 && cf <= 1), "%s: pg_clipfrac %g (dro reports none, as verl)", M[i], cf);
    }
}

/* later verl's use_prefix_grouper: each group's prompt computed once in the old-log-prob, reference and update
 * passes; the same losses, KL and gradient norm as without it */
static void test_prefix_grouper(void) {
    static const char *BASE = "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.use_kl_loss=true|"
                              "actor_rollout_ref.actor.ppo_epochs=2|actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4|"
                              "trainer.balance_batch=false";
    char ov[600];
    CHECK_OK(run("pg0", 1, BASE));
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.actor.use_prefix_grouper=true", BASE);
    CHECK_OK(run("pg1", 1, ov));
    /* log-prob forwards of a few tokens: groups split over forwards (the reference pass), or several whole
     * groups in one forward counted by the tokens they add (the old-log-prob pass) */
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.actor.use_prefix_grouper=true|"
                            "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=12|"
                            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=48", BASE);
    CHECK_OK(run("pg2", 1, ov));
    /* update micro-batches by a token budget that holds one group: groups kept whole, every prompt shared */
    static const char *DYN = "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.use_kl_loss=true|"
                             "actor_rollout_ref.actor.ppo_epochs=2|actor_rollout_ref.actor.use_dynamic_bsz=true|"
                             "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=30|trainer.balance_batch=false";
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.actor.use_prefix_grouper=true", DYN);
    CHECK_OK(run("pg3", 1, ov));
    static const char *K[] = { "actor/pg_loss", "actor/kl_loss", "actor/ppo_kl", "actor/grad_norm", "actor/entropy",
                               "critic/advantages/max" };
    for (int i = 0; i < 6; i++) {
        double a = logged("pg0", 1, K[i]), b = logged("pg1", 1, K[i]), c = logged("pg2", 1, K[i]);
        CHECK_MSG(isfinite(a) && fabs(a - b) <= 2e-5 * fmax(1e-2, fabs(a)) && fabs(a - c) <= 2e-5 * fmax(1e-2, fabs(a)),
                  "%s: %.9g without, %.9g / %.9g with shared prompts", K[i], a, b, c);
    }
    double sh = logged("pg1", 1, "perf/prefix_shared_tokens"), plen = logged("pg1", 1, "prompt_length/mean");
    /* 2 groups of 4 rows in micro-batches of 4: 3 rows per group skip plen - 1 tokens, in 2 epochs */
    CHECK_MSG(sh == 2 * 2 * 3 * (plen - 1), "shared tokens %g with prompts of %g", sh, plen);
    double sh3 = logged("pg3", 1, "perf/prefix_shared_tokens"), g3 = logged("pg3", 1, "actor/grad_norm");
    CHECK_MSG(sh3 == sh && fabs(g3 - logged("pg0", 1, "actor/grad_norm")) <= 2e-5 * fabs(g3),
              "token-budget micro-batches: shared tokens %g (want %g), grad_norm %.9g", sh3, sh, g3);
    CHECK(isnan(logged("pg0", 1, "perf/prefix_shared_tokens")));
}

/* ... on a model with Gated DeltaNet layers (Qwen3-Next's shape, random): the linear layers run each row's prompt over
 * its gathered rows, the others compute it once; the same step as without the grouper, the budgets counting the rows
 * the linear layers run */
static void test_prefix_grouper_linear(void) {
    char cp[300], md[300], cfg[1400];
    snprintf(cp, sizeof cp, "%s/lin_config.json", dir);
    snprintf(md, sizeof md, "%s/lin_model", dir);
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3NextForCausalLM\"],\"model_type\":\"qwen3_next\",\"vocab_size\":%d,"
             "\"hidden_size\":32,\"num_hidden_layers\":4,\"layer_types\":[\"linear_attention\",\"full_attention\","
             "\"linear_attention\",\"full_attention\"],\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":8,"
             "\"linear_conv_kernel_dim\":4,\"linear_key_head_dim\":8,\"linear_num_key_heads\":2,"
             "\"linear_num_value_heads\":4,\"linear_value_head_dim\":8,\"intermediate_size\":48,\"num_experts\":4,"
             "\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,\"shared_expert_intermediate_size\":16,"
             "\"decoder_sparse_step\":1,\"mlp_only_layers\":[0],\"norm_topk_prob\":true,\"rms_norm_eps\":1e-6,"
             "\"max_position_embeddings\":64,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0,"
             "\"partial_rotary_factor\":0.5},\"tie_word_embeddings\":true,\"eos_token_id\":1,\"pad_token_id\":0,"
             "\"torch_dtype\":\"float32\"}", DEMO_VOCAB);
    CHECK_OK(vc_write_file_atomic(cp, cfg, strlen(cfg)));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cp, 21, &m));
    if (!m) return;
    CHECK_OK(vc_model_save_hf(m, md, VC_F32));
    CHECK_OK(demo_write_tokenizer(md));
    vc_model_free(m);
    char ov[900];
    static const char *BASE = "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.use_kl_loss=true|"
                              "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4|trainer.balance_batch=false";
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.model.path=%s", BASE, md);
    CHECK_OK(run("lg0", 1, ov));
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.model.path=%s|actor_rollout_ref.actor.use_prefix_grouper=true", BASE, md);
    CHECK_OK(run("lg1", 1, ov));
    /* token budgets: a group's rows counted in full plus its prompt once (the rows its linear layers run) */
    snprintf(ov, sizeof ov, "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.use_kl_loss=true|"
             "actor_rollout_ref.actor.use_dynamic_bsz=true|actor_rollout_ref.actor.ppo_max_token_len_per_gpu=60|"
             "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=24|trainer.balance_batch=false|"
             "actor_rollout_ref.model.path=%s|actor_rollout_ref.actor.use_prefix_grouper=true", md);
    CHECK_OK(run("lg3", 1, ov));
    static const char *K[] = { "actor/pg_loss", "actor/kl_loss", "actor/ppo_kl", "actor/grad_norm", "actor/entropy" };
    for (int i = 0; i < 5; i++) {
        double a = logged("lg0", 1, K[i]), b = logged("lg1", 1, K[i]), c = logged("lg3", 1, K[i]);
        CHECK_MSG(isfinite(a) && fabs(a - b) <= 2e-5 * fmax(1e-2, fabs(a)) && fabs(a - c) <= 2e-5 * fmax(1e-2, fabs(a)),
                  "linear layers, %s: %.9g without, %.9g / %.9g with shared prompts", K[i], a, b, c);
    }
    double sh = logged("lg1", 1, "perf/prefix_shared_tokens");
    /* prompts of 4 tokens: each update micro-batch holds one group of 4 rows (35 of the budget's 60 rows), the
     * reference pass splits a group (24) */
    CHECK_MSG(sh > 0 && logged("lg3", 1, "perf/prefix_shared_tokens") == sh, "linear layers: shared tokens %g / %g", sh,
              logged("lg3", 1, "perf/prefix_shared_tokens"));
}

/* verl's QAT (actor_rollout_ref.actor.fsdp_config.qat, its recipe's keys): rollout, old log-probs and the update all
 * read the NVFP4-quantized actor, so the rollout's log-probs and the trainer's agree as without QAT (verl hands vLLM
 * weights quantized by another code path: up to 0.8% of their elements a code step off its training forward's,
 * tests/fixtures/qat/<model>/qat_reference.json); the forward changes; the FFN-only pattern */
static void test_qat(void) {
    char qc[300], ov[1200];
    snprintf(qc, sizeof qc, "%s/nvfp4_w4a16.json", dir);
    const char *js = "{\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\", \"ignore\": [\"lm_head\"]}";
    CHECK_OK(vc_write_file_atomic(qc, js, strlen(js)));
    static const char *BASE = "algorithm.adv_estimator=grpo|actor_rollout_ref.rollout.calculate_log_probs=true|"
                              "trainer.balance_batch=false";
    CHECK_OK(run("noqat", 2, BASE));
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.actor.fsdp_config.qat.enable=True|"
                            "actor_rollout_ref.actor.fsdp_config.qat.mode=w4a16|"
                            "actor_rollout_ref.actor.fsdp_config.qat.quantization_config_path=%s|"
                            "actor_rollout_ref.actor.fsdp_config.qat.ignore_patterns=[\"lm_head\", \"embed_tokens\", \"re:.*mlp.gate$\"]",
             BASE, qc);
    CHECK_OK(run("qat", 2, ov));
    snprintf(ov, sizeof ov, "%s|actor_rollout_ref.actor.fsdp_config.qat.enable=True|"
                            "actor_rollout_ref.actor.fsdp_config.qat.ignore_patterns=[lm_head, embed_tokens, 're:.*self_attn.*']",
             BASE);
    if (!LIGHT) CHECK_OK(run("qatffn", 2, ov)); /* (sanitizer builds: the full QAT run only) */
    for (int step = 1; step <= 2; step++) {
        double d0 = logged("noqat", step, "training/rollout_probs_diff_max"), d1 = logged("qat", step, "training/rollout_probs_diff_max");
        double d2 = LIGHT ? 0 : logged("qatffn", step, "training/rollout_probs_diff_max");
        CHECK_MSG(isfinite(d1) && d1 < 1e-4 && d2 < 1e-4 && d0 < 1e-4, "step %d: rollout vs trainer probabilities %g "
                  "with QAT, %g FFN-only, %g without", step, d1, d2, d0);
    }
    double e0 = logged("noqat", 1, "actor/entropy"), e1 = logged("qat", 1, "actor/entropy");
    double e2 = LIGHT ? -1 : logged("qatffn", 1, "actor/entropy");
    CHECK_MSG(isfinite(e1) && e1 != e0 && e2 != e0 && e2 != e1, "entropies %.9g without, %.9g with QAT, %.9g FFN-only", e0,
              e1, e2);
    printf("QAT in the trainer: rollout vs trainer probabilities within %.2g (without QAT %.2g); entropy %.6f (%.6f "
           "without)\n", logged("qat", 2, "training/rollout_probs_diff_max"), logged("noqat", 2, "training/rollout_probs_diff_max"),
           e1, e0);
}

static void expect(const char *ov, const char *needle) {
    vc_status st = run("bad", 1, ov);
    CHECK_MSG(st && strstr(vc_last_error(), needle), "%s: %s", ov, st ? vc_last_error() : "accepted");
}

static void test_refusals(void) {
    expect("algorithm.adv_estimator=gdpo", "gdpo_reward_keys");
    expect("algorithm.adv_estimator=gdpo|+algorithm.gdpo_reward_keys=[a,b]|+algorithm.gdpo_reward_weights=[1]",
           "gdpo_reward_weights");
    expect("algorithm.adv_estimator=gdpo|+algorithm.gdpo_reward_keys=[nope]", "'nope' not found");
    expect("actor_rollout_ref.actor.policy_loss.loss_mode=dro", "dro_beta");
    expect("actor_rollout_ref.actor.loss_agg_mode=token-max", "token-max");
    expect("actor_rollout_ref.actor.fsdp_config.qat.enable=true|actor_rollout_ref.actor.fsdp_config.qat.mode=w4a4", "w4a4");
    expect("actor_rollout_ref.actor.fsdp_config.qat.enable=true|actor_rollout_ref.actor.fsdp_config.qat.group_size=0",
           "group_size=0");
    expect("actor_rollout_ref.actor.fsdp_config.qat.enable=true|"
           "actor_rollout_ref.actor.fsdp_config.qat.quantization_config_path=/nonexistent/q.json", "/nonexistent/q.json");
    expect("actor_rollout_ref.actor.fsdp_config.qat.enable=true|actor_rollout_ref.model.lora_rank=4", "LoRA");
    expect("actor_rollout_ref.actor.fsdp_config.qat.enable=true|"
           "actor_rollout_ref.actor.fsdp_config.qat.ignore_patterns=['re:(x']", "(x");
    expect("actor_rollout_ref.actor.qat.enable=true", "fsdp_config.qat");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_later_%d", (int)getpid());
    demo_model_setup(dir, 13);
    char p[300];
    demo_rows_setup(dir, "x");
    snprintf(p, sizeof p, "%s/rw.py", dir);
    const char *py = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                     "    n = len(solution_str)\n"
                     "    length = min(n, 8) / 8.0\n"
                     "    digit = any(c.isdigit() for c in solution_str)\n"
                     "    if extra_info is not None and 'experiment_name' in extra_info:\n"
                     "        assert extra_info['experiment_name'] == 'later', extra_info  # the gdpo manager's\n"
                     "    return {'score': length, 'length_reward': length, 'digit_reward': digit}\n";
    CHECK_OK(vc_write_file_atomic(p, py, strlen(py)));
    test_gdpo();
    test_losses();
    test_prefix_grouper();
    test_prefix_grouper_linear();
    test_qat();
    test_refusals();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
