/* End to end through build/verlc (VERLC_BIN): GSM8K conversion, a tiny model with the Qwen3 tokenizer's
 * vocabulary, GRPO with validation, checkpoints, resume that continues bit-identically, export, and
 * PPO (GAE with a critic, with rollout correction's weights and rejection); metrics.jsonl must hold verl's
 * metric names. */
#include "rl_cli_util.h"
#include "verlc/model.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>

/* common overrides of verl's GSM8K quickstart, CI-sized */
static const char *COMMON =
    "data.train_files=%s/data/train.jsonl data.val_files=%s/data/test.jsonl "
    "data.train_max_samples=16 data.val_max_samples=4 data.train_batch_size=2 data.max_prompt_length=256 "
    "data.max_response_length=8 data.filter_overlong_prompts=true data.truncation=error "
    "actor_rollout_ref.model.path=%s/model actor_rollout_ref.actor.optim.lr=1e-3 "
    "actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
    "actor_rollout_ref.rollout.n=2 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 "
    "trainer.logger=['console'] trainer.project_name=verl_grpo_example_gsm8k trainer.n_gpus_per_node=1 ";

static void run_grpo(const char *out, int steps, int val_before, int test_freq, const char *log) {
    char common[2048];
    snprintf(common, sizeof common, COMMON, dir, dir, dir);
    int rc = cli_sh("%s train %s algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=True "
                    "actor_rollout_ref.actor.kl_loss_coef=0.001 actor_rollout_ref.actor.kl_loss_type=low_var_kl "
                    "actor_rollout_ref.actor.entropy_coeff=0 algorithm.use_kl_in_reward=False "
                    "trainer.total_training_steps=%d trainer.save_freq=1 trainer.test_freq=%d trainer.val_before_train=%s "
                    "'actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]' "
                    "trainer.default_local_dir=%s > %s 2>&1",
                    bin, common, steps, test_freq, val_before ? "True" : "False", out, log);
    CHECK_MSG(rc == 0, "verlc train (grpo, %d steps) failed; see %s", steps, log);
}

/* the step arena's peak over the run (updates and forward passes) reported, within the plan's activations */
static void check_arena_peak(const char *log) {
    CHECK_MSG(cli_arena_within_plan(log) == 0, "the step arena's peak is not reported, or exceeds the plan, in %s", log);
}

static void check_metrics(const char *path, const char *const *names) {
    vc_metrics *m = NULL;
    CHECK_OK(vc_metrics_read(path, &m));
    if (!m) return;
    for (int i = 0; names[i]; i++) CHECK_MSG(vc_metrics_find(m, names[i]) != NULL, "%s lacks %s", path, names[i]);
    vc_metrics_free(m);
}

static const char *GRPO_METRICS[] = {
    "critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean", "critic/rewards/max",
    "critic/rewards/min", "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
    "critic/returns/mean", "actor/pg_loss", "actor/entropy", "actor/ppo_kl", "actor/pg_clipfrac",
    "actor/pg_clipfrac_lower", "actor/grad_norm", "actor/kl_loss", "actor/lr", "response_length/mean",
    "response_length/max", "response_length/min", "response_length/clip_ratio", "prompt_length/mean",
    "timing_s/gen", "timing_s/reward", "timing_s/ref", "timing_s/adv", "timing_s/update_actor", "timing_s/step",
    "perf/throughput", "perf/total_num_tokens", "perf/mfu/actor", "val-core/openai/gsm8k/acc/mean@1",
    "training/rollout_probs_diff_mean", "training/rollout_probs_diff_max", "response/aborted_ratio",
    "response_length_non_aborted/mean", "response_length_non_aborted/clip_ratio", "prompt_length/clip_ratio",
    "perf/time_per_step", "timing_per_token_ms/gen", "timing_per_token_ms/ref", "timing_per_token_ms/update_actor",
    "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb", NULL };

/* verl's memory figures: on the CPU the process's peak resident memory, at least the actor's and the reference's
 * weights, gradients and AdamW state (0.09 GiB for this model); the system's used memory now (not a peak) */
static void check_memory_metrics(const char *path) {
    vc_metrics *m = NULL;
    CHECK_OK(vc_metrics_read(path, &m));
    const vc_metric_series *a = m ? vc_metrics_find(m, "perf/max_memory_allocated_gb") : NULL;
    const vc_metric_series *c = m ? vc_metrics_find(m, "perf/cpu_memory_used_gb") : NULL;
    double peak = a && a->n ? a->y[a->n - 1] : -1, sys = c && c->n ? c->y[c->n - 1] : -1;
    CHECK_MSG(peak > 0.09 && peak < 64 && sys > 0, "memory metrics: peak %g GiB, system %g GiB", peak, sys);
    vc_metrics_free(m);
}

static double last_of(const vc_metrics *m, const char *name) {
    const vc_metric_series *se = m ? vc_metrics_find(m, name) : NULL;
    return se && se->n ? se->y[se->n - 1] : -1;
}

/* verl's MFU figures (vc_perf_verl_flops over the time and the promised peak): above 0 and not absurd (verl's count
 * takes the embedding for a matrix and the LM head over every position, where verlc's head runs on the response
 * positions: on this model's 64-wide hidden and 151,936-token vocabulary the figures can pass 1 on a fast CPU), and
 * the actor's update and its old-log-prob pass over the same rows count the same FLOPs, the pass a third of them,
 * the update once per epoch (ppo_epochs 2) */
static void check_mfu(const char *path, int infer) {
    vc_metrics *m = NULL;
    CHECK_OK(vc_metrics_read(path, &m));
    double a = last_of(m, "perf/mfu/actor"), c = last_of(m, "perf/mfu/critic");
    CHECK_MSG(a > 0 && a < 100, "%s: perf/mfu/actor = %g", path, a);
    if (infer) {
        double i = last_of(m, "perf/mfu/actor_infer"), ta = last_of(m, "timing_s/update_actor");
        double ti = last_of(m, "timing_s/old_log_prob");
        CHECK_MSG(c > 0 && c < 100, "%s: perf/mfu/critic = %g", path, c);
        CHECK_MSG(i > 0 && fabs(6 * i * ti - a * ta) <= 1e-4 * a * ta, "%s: actor_infer %g x %g s x 3 x 2 against actor %g x %g s",
                  path, i, ti, a, ta);
    }
    vc_metrics_free(m);
}

static const char *PPO_METRICS[] = { "critic/values/mean", "critic/vf_loss", "critic/returns/mean", "timing_s/update_critic",
                                     "timing_s/old_log_prob", "actor/pg_loss", "rollout_corr/rollout_is_mean",
                                     "rollout_corr/rollout_rs_token_k1_masked_fraction", "rollout_corr/k3_kl",
                                     "rollout_corr/chi2_seq", "critic/vf_explained_var", "timing_per_token_ms/values",
                                     "timing_per_token_ms/update_critic", "perf/mfu/critic", "perf/mfu/actor_infer",
                                     NULL };

/* trainer.rollout_data_dir / validation_data_dir: verl's JSONL samples with the reward's extra values
 * (validation lines also "reward"); the custom chat template renders the inputs; ignore_eos runs every
 * response to max_response_length */
static void check_dumps(const char *metrics) {
    vc_metrics *m = NULL;
    CHECK_OK(vc_metrics_read(metrics, &m));
    const vc_metric_series *se = m ? vc_metrics_find(m, "response_length/min") : NULL;
    double mn = se && se->n ? se->y[se->n - 1] : -1;
    CHECK_MSG(mn == 8, "ignore_eos: shortest response %g tokens, max_response_length 8", mn);
    vc_metrics_free(m);
    for (int k = 0; k < 2; k++) {
        char p[400], *text = NULL;
        size_t len = 0;
        snprintf(p, sizeof p, "%s/%s/1.jsonl", dir, k ? "dump_val" : "dump_train");
        CHECK_MSG(vc_read_file(p, &text, &len) == VC_OK, "%s missing", p);
        int lines = 0, ok = 1;
        for (char *s = text, *e; s && *s; s = e ? e + 1 : NULL, lines++) {
            e = strchr(s, '\n');
            if (e) *e = 0;
            cJSON *j = cJSON_Parse(s);
            const cJSON *in = cJSON_GetObjectItem(j, "input"), *st = cJSON_GetObjectItem(j, "step");
            ok &= cJSON_IsString(in) && !strncmp(in->valuestring, "Q: ", 3) && strstr(in->valuestring, " A:") &&
                  cJSON_IsString(cJSON_GetObjectItem(j, "output")) && cJSON_IsNumber(cJSON_GetObjectItem(j, "score")) &&
                  cJSON_GetObjectItem(j, "gts") && cJSON_IsNumber(st) && st->valueint == 1 &&
                  cJSON_IsNumber(cJSON_GetObjectItem(j, "acc")) && /* verl's reward_extra_info: acc = the score */
                  (k ? cJSON_IsNumber(cJSON_GetObjectItem(j, "reward")) : !cJSON_GetObjectItem(j, "reward"));
            cJSON_Delete(j);
        }
        CHECK_MSG(ok && lines == (k ? 4 : 4), "%s: %d lines, fields %s", p, lines, ok ? "ok" : "wrong");
        free(text);
    }
}

int main(void) {
    rl_cli_start("e2e");
    double t0 = vc_now();
    /* 1. conversion (rl_cli_setup) */
    /* 2. a tiny Qwen3 with the real tokenizer's vocabulary */
    rl_cli_setup(32, 2, 16, 64);
    char path[600];
    /* 3. GRPO: 1 step with validation and a checkpoint, then resume to step 2; and 2 steps in one go */
    char out_a[300], out_b[300], log[400];
    snprintf(out_a, sizeof out_a, "%s/run_a", dir);
    snprintf(out_b, sizeof out_b, "%s/run_b", dir);
    snprintf(log, sizeof log, "%s/grpo_b1.log", dir);
    /* planned against 24 MiB (VERLC_MEMORY_AVAILABLE): the models, gradients and AdamW states (0.09 GiB) are
     * allocated before the plan, the steps' few MiB of activations fit what is left */
    setenv("VERLC_MEMORY_AVAILABLE", "24M", 1);
    run_grpo(out_b, 1, 1, 1, log);
    unsetenv("VERLC_MEMORY_AVAILABLE");
    /* the memory plan before the first step: the actor's measured share and the reference model's */
    CHECK_MSG(cli_sh("grep -q 'memory plan: actor .* GiB (weights .* activations .* micro-batch.s .* forward passes. .*) .* reference' %s", log) == 0,
              "no memory plan in %s", log);
    check_arena_peak(log);
    /* `verlc train --plan` with the default batch in micro-batches of one row: the plan, then stop, no file written. Against 64 MiB it fits (its
     * models and optimiser state, 0.11 GiB with the plan's activations, are allocated before it); against 256 KiB the
     * steps do not fit: it stops, naming the numbers' source */
    char plan_log[400];
    snprintf(plan_log, sizeof plan_log, "%s/grpo_plan.log", dir);
    for (int k = 0; k < 2; k++) {
        int prc = cli_sh("VERLC_MEMORY_AVAILABLE=%s %s train --plan algorithm.adv_estimator=grpo "
                         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 " /* (null: a whole mini-batch) */
                         "data.train_files=%s/data/train.jsonl data.val_files=%s/data/test.jsonl "
                         "actor_rollout_ref.model.path=%s/model trainer.default_local_dir=%s/plan%d > %s 2>&1",
                         k ? "256K" : "64M", bin, dir, dir, dir, dir, k, plan_log);
        CHECK_MSG(k ? prc != 0 : prc == 0, "verlc train --plan against %s: exit %d (see %s)", k ? "256K" : "64M", prc,
                  plan_log);
        CHECK_MSG(cli_sh(k ? "grep -q 'memory plan needs .* but only 0.000 GiB is available (VERLC_MEMORY_AVAILABLE)' %s"
                           : "grep -q '^memory plan: actor' %s", plan_log) == 0,
                  "--plan against %s: no %s in %s", k ? "256K" : "64M", k ? "refusal" : "plan", plan_log);
        CHECK_MSG(cli_sh("test -z \"$(ls -A %s/plan%d 2>/dev/null)\" && ! grep -q '^step 1' %s", dir, k, plan_log) == 0,
                  "--plan wrote files or ran a step (%s/plan%d)", dir, k);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_b);
    check_metrics(path, GRPO_METRICS);
    check_memory_metrics(path);
    check_mfu(path, 0);
    snprintf(path, sizeof path, "%s/global_step_1/actor/model.safetensors", out_b);
    CHECK_MSG(vc_file_exists(path), "no checkpoint at %s", path);
    /* save_contents with hf_model: the checkpoint also holds a Hugging Face directory that loads */
    snprintf(path, sizeof path, "%s/global_step_1/actor/huggingface", out_b);
    vc_model *hfm = NULL;
    CHECK_OK(vc_model_load(path, &hfm));
    vc_model_free(hfm);
    snprintf(path, sizeof path, "%s/global_step_1/actor/huggingface/tokenizer.json", out_b);
    CHECK_MSG(vc_file_exists(path), "no tokenizer in the checkpoint's huggingface directory");
    snprintf(log, sizeof log, "%s/grpo_b2.log", dir);
    run_grpo(out_b, 2, 1, 5, log);
    CHECK_MSG(cli_sh("grep -q 'resumed from .*global_step_1' %s", log) == 0, "second run did not resume (%s)", log);
    char pa[400], pb[400];
    if (!LIGHT) { /* (the uninterrupted run to compare with: the release build; the resumed one runs in both) */
        snprintf(log, sizeof log, "%s/grpo_a.log", dir);
        run_grpo(out_a, 2, 0, 5, log);
        snprintf(pa, sizeof pa, "%s/hf_model/model.safetensors", out_a);
        snprintf(pb, sizeof pb, "%s/hf_model/model.safetensors", out_b);
        CHECK_MSG(cli_file_eq(pa, pb), "resumed run's exported weights differ from an uninterrupted run");
    }
    snprintf(pa, sizeof pa, "%s/hf_model/config.json", LIGHT ? out_b : out_a);
    CHECK_MSG(vc_file_exists(pa), "no exported config.json");
    /* 4. PPO (GAE with a critic on the same backbone) */
    char common[2048];
    snprintf(common, sizeof common, COMMON, dir, dir, dir);
    snprintf(log, sizeof log, "%s/ppo.log", dir);
    int rc = cli_sh("TENSORBOARD_DIR=%s/tb %s train %s algorithm.adv_estimator=gae critic.model.path=%s/model critic.optim.lr=1e-3 "
                    "critic.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.actor.ppo_epochs=2 algorithm.use_kl_in_reward=True "
                    /* no micro-batch size: each mini-batch is one micro-batch (planned as such: check_arena_peak) */
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null "
                    "algorithm.kl_ctrl.type=adaptive trainer.total_training_steps=1 trainer.val_before_train=False "
                    "algorithm.rollout_correction.rollout_is=token algorithm.rollout_correction.rollout_rs=token_k1 "
                    "algorithm.rollout_correction.rollout_rs_threshold=2.0 actor_rollout_ref.rollout.ignore_eos=true "
                    "\"actor_rollout_ref.model.custom_chat_template='Q: {%% for m in messages %%}{{ m.content }}{%% endfor %%} A:'\" "
                    "trainer.rollout_data_dir=%s/dump_train trainer.validation_data_dir=%s/dump_val "
                    "trainer.test_freq=1 trainer.default_local_dir=%s/run_ppo \"trainer.logger=['console','tensorboard']\" "
                    "trainer.log_val_generations=2 "
                    "> %s 2>&1", dir, bin, common, dir, dir, dir, dir, log);
    CHECK_MSG(rc == 0, "verlc train (ppo) failed; see %s", log);
    /* the critic's update runs in the actor's step arena: planned (its trial's peak) and within the plan */
    CHECK_MSG(cli_sh("grep -q \"memory plan: actor .* the critic update's [0-9.]*) + critic\" %s", log) == 0,
              "no critic activations in the memory plan in %s", log);
    check_arena_peak(log);
    /* trainer.logger tensorboard: one event file in TENSORBOARD_DIR holding the run's scalar tags */
    CHECK_MSG(cli_sh("test $(ls %s/tb/events.out.tfevents.* | wc -l) -eq 1 && grep -aq critic/vf_loss %s/tb/events.out.tfevents.* "
                     "&& grep -aq val-core/openai/gsm8k/acc/mean@1 %s/tb/events.out.tfevents.*", dir, dir, dir) == 0,
              "no TensorBoard event file with the PPO metrics in %s/tb", dir);
    /* trainer.log_val_generations=2: verl's text summary of two validation samples at the step */
    CHECK_MSG(cli_sh("f=$(ls %s/tb/events.out.tfevents.*) && grep -aq 'val/generations/text_summary' $f && "
                     "grep -aq '[*][*]Generation Results - Step 1[*][*]' $f && grep -aq '### Sample 2' $f && "
                     "! grep -aq '### Sample 3' $f && grep -aq '[*][*]Score:[*][*] ' $f", dir) == 0,
              "no val/generations text with two samples in %s/tb", dir);
    snprintf(path, sizeof path, "%s/run_ppo/metrics.jsonl", dir);
    check_metrics(path, PPO_METRICS);
    check_mfu(path, 1);
    check_dumps(path);
    double dt = vc_now() - t0;
    printf("e2e: %.1f s\n", dt);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK_MSG(dt < 120, "end-to-end test took %.0f s", dt);
#endif
    if (!vc_t_fail) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
