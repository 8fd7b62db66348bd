/* Data-parallel `verlc train` (VERLC_BIN) under mpirun: one GRPO step (tiny Qwen3 with the real
 * tokenizer's vocabulary, GSM8K rows as tests/rl/test_trainer_e2e.c builds them) on 2 ranks gives the same
 * step-1 score metrics and validation accuracy as 1 rank, and with one mini-batch its exported weights within a float
 * tolerance, also with trainer.balance_batch moving rows between the ranks (and whole groups, with
 * use_prefix_grouper); with two mini-batches each is every rank's slice of its own rows, as in verl; a world size that contradicts trainer.nnodes x n_gpus_per_node is refused; a rank that hangs or
 * dies mid-step (in its reward program) makes the job fail within VERLC_DIST_TIMEOUT. Skips the MPI part
 * cleanly when mpirun (VERLC_MPIRUN) is missing or the build has no MPI. */
#include <stdlib.h>
#include "rl_dp_util.h"

/* 1 vs 2 ranks: same samples and rewards; the loss sums and gradient reductions run in another order
 * (per-rank micro-batches, rank-ordered gradient sums), so weights agree to float rounding after Adam */
#define WEIGHT_TOL 1e-5
#define METRIC_TOL 1e-6

static const char *SCORES[] = { "critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean",
                                "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
                                "response_length/mean", "response_length/max", "response_length/min",
                                "prompt_length/mean", "perf/total_num_tokens", "val-core/openai/gsm8k/acc/mean@1",
                                "val-aux/openai/gsm8k/response_length/mean", NULL };

/* the exported weights of runs a and b within WEIGHT_TOL, and their actor/grad_norm within 1e-4 */
static void check_same_step(const char *a_run, const char *b_run, const char *what) {
    check_close(a_run, b_run, what, WEIGHT_TOL);
    double g1 = metric(a_run, "actor/grad_norm"), g2 = metric(b_run, "actor/grad_norm");
    printf("actor/grad_norm: %.9g vs %.9g\n", g1, g2);
    CHECK_MSG(fabs(g1 - g2) <= 1e-4 * fmax(1, fabs(g1)), "%s: grad_norm %g vs %g", what, g1, g2);
}

/* mini: prompts per mini-batch of the 4; 4: one mini-batch split over the ranks, so 2 ranks give 1 rank's step;
 * 2: two mini-batches, which on 2 ranks are verl's (each rank's first and second prompt, as verl's workers split the
 * rows dispatched to them: tools/fuzz/diff_actor.py with DIFF_ACTOR_WORLD=2 runs verl's own), not 1 rank's (each of
 * its two prompts in order); their step is that of ZeRO-3, which has always formed each rank's mini-batches of its
 * own rows (ref_more: the reference run's settings) */
static void test_one_vs_two(int mini, const char *tag, const char *more, const char *ref_more) {
    char r1[400], r2[400], log[500], a[500], b[500], extra[800] = "";
    write_scorer(extra, sizeof extra);
    if (more) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s", more);
    if (!tag) tag = "";
    snprintf(r1, sizeof r1, "%s/run_1_%d%s", dir, mini, tag);
    snprintf(r2, sizeof r2, "%s/run_2_%d%s", dir, mini, tag);
    snprintf(log, sizeof log, "%s/one_%d%s.log", dir, mini, tag);
    int rc = train(0, 1, mini, r1, extra, log);
    CHECK_MSG(rc == 0, "verlc train on one process failed (%d); see %s", rc, log);
    snprintf(log, sizeof log, "%s/two_%d%s.log", dir, mini, tag);
    double t0 = vc_now();
    rc = train(2, 2, mini, r2, extra, log);
    CHECK_MSG(rc == 0, "mpirun -np 2 verlc train failed (%d); see %s", rc, log);
    if (rc) cli_sh("cat %s >&2", log);
    printf("2 ranks: %.1f s\n", vc_now() - t0);
    /* only rank 0 prints: one step line, one export notice */
    CHECK_MSG(cli_sh("test $(grep -c 'final actor exported' %s) -eq 1", log) == 0, "export notice not printed once (%s)",
              log);
    snprintf(a, sizeof a, "%s/hf_model", r1);
    snprintf(b, sizeof b, "%s/hf_model", r2);
    if (mini == 4) {
        check_same_step(r1, r2, "one mini-batch of 4 prompts: 1 rank vs 2 ranks");
    } else { /* two mini-batches: not 1 rank's; ZeRO-3's */
        double d = max_weight_diff(a, b);
        printf("mini-batches of %d prompts: max |w(1 rank) - w(2 ranks)|: %.3g (other mini-batches)\n", mini, d);
        CHECK_MSG(d > 100 * WEIGHT_TOL, "2 ranks' mini-batches of %d prompts are 1 rank's (%g), not verl's", mini, d);
        char r3[400], more3[900];
        snprintf(r3, sizeof r3, "%s/run_2_%d%s_z3", dir, mini, tag);
        snprintf(more3, sizeof more3, "%s %s", extra, ref_more);
        snprintf(log, sizeof log, "%s/two_%d%s_z3.log", dir, mini, tag);
        rc = train(2, 2, mini, r3, more3, log);
        CHECK_MSG(rc == 0, "mpirun -np 2 verlc train with ZeRO-3 failed (%d); see %s", rc, log);
        char what[200];
        snprintf(what, sizeof what, "two mini-batches on 2 ranks: %s vs the run's own settings", ref_more);
        if (!rc) check_same_step(r3, r2, what);
    }
    /* the step changed the weights at all (else the comparison says nothing) */
    snprintf(a, sizeof a, "%s/model", dir);
    double moved = max_weight_diff(a, b);
    printf("max |w(2 ranks) - w(initial)|: %.3g\n", moved);
    CHECK_MSG(moved > 100 * WEIGHT_TOL, "the step barely moved the weights (%g)", moved);
    for (int i = 0; SCORES[i]; i++) {
        double x = metric(r1, SCORES[i]), y = metric(r2, SCORES[i]);
        CHECK_MSG(!isnan(x) && fabs(x - y) <= METRIC_TOL * fmax(1, fabs(x)), "%s: 1 rank %.9g, 2 ranks %.9g",
                  SCORES[i], x, y);
    }
    /* trainer.balance_batch (verl's default): rows moved for equal work, mini-batches composed as on one rank */
    double lo = metric(r2, "global_seqlen/balanced_min"), hi = metric(r2, "global_seqlen/balanced_max");
    double spread = metric(r2, "global_seqlen/minmax_diff"), mean = metric(r2, "global_seqlen/mean");
    printf("global_seqlen: rollout layout spread %.0f, balanced %.0f..%.0f\n", spread, lo, hi);
    CHECK_MSG(!isnan(lo) && hi - lo <= spread && lo <= mean && mean <= hi, "balance_batch: %g..%g, spread %g", lo, hi,
              spread);
    CHECK_NEAR(2 * mean, metric(r2, "perf/total_num_tokens"), 0.5);
    /* one rank: one partition (its rows in verl's order), the whole batch's tokens */
    CHECK_NEAR(metric(r1, "global_seqlen/mean"), metric(r1, "perf/total_num_tokens"), 0.5);
    printf("critic/score/mean %.4f\n", metric(r2, "critic/score/mean"));
    /* checkpoint and resume-ready layout written once, by rank 0 */
    snprintf(a, sizeof a, "%s/global_step_1/actor/model.safetensors", r2);
    CHECK_MSG(vc_file_exists(a), "no checkpoint at %s", a);
    snprintf(a, sizeof a, "%s/latest_checkpointed_iteration.txt", r2);
    CHECK_MSG(file_has(a, "1"), "%s missing", a);
}

/* verl's actor/entropy is its old-log-prob pass's over the whole batch (loss_agg_mode): with two mini-batches of 2
 * prompts that pass runs, and its value is the one-mini-batch run's update entropy at the same weights (on policy
 * there is no old pass: the update's first forward is it); the update's own mean over its mini-batches, reported
 * before, saw the weights the first mini-batch had moved */
static void test_entropy_metric(void) {
    char a[500], b[500];
    snprintf(a, sizeof a, "%s/run_1_2", dir);
    snprintf(b, sizeof b, "%s/run_1_4", dir);
    double e2 = metric(a, "actor/entropy"), e4 = metric(b, "actor/entropy");
    printf("actor/entropy: two mini-batches %.9g, one %.9g\n", e2, e4);
    /* the same weights and rows in two forwards (within rounding); after the first mini-batch's step (lr 1e-3 on
     * this model) the update's mean moved by 1.3e-6 of it */
    CHECK_MSG(!isnan(e2) && fabs(e2 - e4) <= 3e-7 * fmax(1, fabs(e4)), "actor/entropy %.9g vs %.9g", e2, e4);
}

/* DAPO's dynamic sampling with a reward of 0 or 1 per response (about half the groups of 2 are equal and
 * dropped): several generation batches per step, the same kept groups and weights on 1 and 2 ranks */
static void test_dapo(void) {
    char prog[400], more[900];
    if (!write_cksum_scorer("coarse.sh", "$(( c % 2 ))", prog, sizeof prog)) return;
    snprintf(more, sizeof more, "custom_reward_function.path=%s algorithm.filter_groups.enable=true "
                                "algorithm.filter_groups.metric=score algorithm.filter_groups.max_num_gen_batches=30 "
                                "data.gen_batch_size=2 data.train_max_samples=64 reward_model.overlong_buffer.enable=true "
                                "reward_model.overlong_buffer.len=4 reward_model.overlong_buffer.penalty_factor=0.5", prog);
    test_one_vs_two(4, "dapo", more, NULL);
    char r1[400], r2[400];
    snprintf(r1, sizeof r1, "%s/run_1_4dapo", dir);
    snprintf(r2, sizeof r2, "%s/run_2_4dapo", dir);
    double g1 = metric(r1, "train/num_gen_batches"), g2 = metric(r2, "train/num_gen_batches");
    printf("DAPO dynamic sampling: %g generation batches of 2 prompts for 4 kept groups (2 ranks: %g)\n", g1, g2);
    CHECK_MSG(g1 > 2 && g1 == g2, "num_gen_batches %g vs %g (2 batches hold 4 groups unfiltered)", g1, g2);
}

static void test_world_mismatch(void) {
    char r[400], log[500];
    snprintf(r, sizeof r, "%s/run_bad", dir);
    snprintf(log, sizeof log, "%s/bad.log", dir);
    int rc = train(2, 4, 2, r, NULL, log);
    CHECK_MSG(rc != 0 && file_has(log, "n_gpus_per_node=4") && file_has(log, "this job has 2"),
              "a 2-rank job with trainer.n_gpus_per_node=4 was not refused (%d, %s)", rc, log);
}

/* rank 1's reward program hangs (or kills rank 1) while step 1 scores its samples */
static void test_fault(const char *mode) {
    char r[400], log[500], prog[500], extra[700];
    snprintf(r, sizeof r, "%s/run_%s", dir, mode);
    snprintf(log, sizeof log, "%s/%s.log", dir, mode);
    snprintf(prog, sizeof prog, "%s/reward_%s.sh", dir, mode);
    if (!write_prog(prog, "#!/bin/sh\n"
                          "if [ \"${OMPI_COMM_WORLD_RANK:-0}\" = 1 ]; then\n"
                          "  if [ \"$VC_RLDP_MODE\" = kill ]; then kill -9 $PPID; fi\n"
                          "  exec sleep 20\n"
                          "fi\n"
                          "while read line; do echo '{\"score\": 0.5}'; done\n"))
        return;
    setenv("VC_RLDP_MODE", mode, 1);
    snprintf(extra, sizeof extra, "custom_reward_function.path=%s +custom_reward_function.timeout_s=100", prog);
    double t0 = vc_now();
    int rc = train(2, 2, 2, r, extra, log);
    double secs = vc_now() - t0;
    setenv("VC_RLDP_MODE", "none", 1);
    int ok = rc != 0 && rc != 124 && secs < 25;
    CHECK_MSG(ok, "rank 1 %s mid-step: exit %d after %.1f s (see %s)", mode, rc, secs, log);
    if (!strcmp(mode, "hang"))
        CHECK_MSG(file_has(log, "rank 0") && file_has(log, "VERLC_DIST_TIMEOUT"),
                  "rank 0 did not report the timeout (%s)", log);
    printf("rank 1 %s in its reward program: job ended with status %d in %.1f s %s\n",
           !strcmp(mode, "hang") ? "hung" : "killed", rc, secs, ok ? "(pass)" : "(FAIL)");
}

/* drafting with a MiMo model's MTP layer (model.mtp.enable_rollout) on 2 ranks with ZeRO-3: the same step as without
 * (the MTP layer's weights are whole on every rank: frozen, never sharded) */
static void test_spec_zero3(void) {
    char cfg[1024], a[400], b[400], extra[1400], score[500] = "", log[500];
    write_scorer(score, sizeof score); /* (rewards that vary: a step that moves the weights) */
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"MiMoForCausalLM\"],\"model_type\":\"mimo\",\"vocab_size\":%d,\"hidden_size\":32,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"intermediate_size\":64,"
             "\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-6,\"num_nextn_predict_layers\":1,"
             "\"tie_word_embeddings\":true,\"bos_token_id\":151643,\"eos_token_id\":151645,\"torch_dtype\":\"float32\"}",
             rl_cli_vocab());
    CHECK(cli_sh("mkdir -p %s/mimo", dir) == 0);
    rl_cli_init_model("mimo", cfg);
    for (int spec = 0; spec < 2; spec++) {
        char *out = spec ? b : a;
        snprintf(out, 400, "%s/run_spec_%d", dir, spec);
        snprintf(extra, sizeof extra, "%s actor_rollout_ref.model.path=%s/mimo actor_rollout_ref.model.mtp.enable=true "
                 "actor_rollout_ref.model.mtp.enable_rollout=%s actor_rollout_ref.actor.zero_stage=3", score, dir,
                 spec ? "true" : "false");
        snprintf(log, sizeof log, "%s/spec_%d.log", dir, spec);
        int rc = train(2, 2, 2, out, extra, log);
        CHECK_MSG(rc == 0, "mpirun -np 2 verlc train, ZeRO-3, drafting %d, failed (%d); see %s", spec, rc, log);
        if (rc) cli_sh("cat %s >&2", log);
    }
    CHECK_MSG(cli_sh("grep -q 'drafts up to 1 token' %s", log) == 0, "the drafting run did not draft (%s)", log);
    check_same_step(a, b, "2 ranks with ZeRO-3: drafting with the MTP layer vs not");
    double g = metric(b, "actor/grad_norm");
    CHECK_MSG(g > 1e-4, "the ZeRO-3 drafting step moved nothing (grad_norm %g): the comparison says nothing", g);
}

int main(void) {
    /* many short multi-rank runs on 2 cores: no memory-plan trial step (rl_test_trainer_e2e and
     * rl_test_trainer_errors run it) */
    setenv("VERLC_MEMORY_PLAN", "0", 1);
    if (!rldp_start("rldp")) return vc_test_done();
    char *old = rldp_env_begin();
    double t0 = vc_now();
    rl_cli_setup(32, 2, 16, 64);
    test_one_vs_two(2, NULL, NULL, "actor_rollout_ref.actor.zero_stage=3");
    test_spec_zero3();
#if !defined(__SANITIZE_ADDRESS__) /* sanitizer builds: the DAPO run below has one mini-batch of 4 prompts too */
    test_one_vs_two(4, NULL, NULL, NULL);
    test_entropy_metric();
#endif
/* sanitizer builds: LoRA runs under them in model/test_lora and rl/test_trainer_ckpt, sharded AdamW state in
 * rl/test_rl_zero */
#if !defined(__SANITIZE_ADDRESS__)
    /* LoRA adapters on 2 ranks with ZeRO-1 (the adapters' AdamW state sharded; the merged export compared with plain
     * data parallelism's: LoRA refuses ZeRO-3) */
    test_one_vs_two(2, "lora", "actor_rollout_ref.model.lora_rank=8 actor_rollout_ref.model.lora_alpha=16 "
                       "actor_rollout_ref.actor.zero_stage=1", "actor_rollout_ref.actor.zero_stage=0");
    /* shared prompts: verl's group-level balancing moves whole groups; one mini-batch, so the same step */
    test_one_vs_two(4, "pg", "actor_rollout_ref.actor.use_prefix_grouper=true", NULL);
#endif
    test_dapo();
    test_world_mismatch();
    setenv("VERLC_DIST_TIMEOUT", "3", 1);
    test_fault("hang");
    test_fault("kill");
    printf("rl dp: %.1f s\n", vc_now() - t0);
    rldp_env_end(old);
    return vc_test_done();
}
