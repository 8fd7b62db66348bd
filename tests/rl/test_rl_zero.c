/* Data-parallel `verlc train` at 4 ranks with ZeRO-1 (actor_rollout_ref.actor.zero_stage=1) and gradient
 * reduction overlapped with backward (actor_rollout_ref.actor.overlap_grad_reduce=true), under
 * mpirun: two GRPO steps on 4 ranks with a sharded optimiser give the exported weights of one process
 * within a float tolerance; every rank prints its memory line with 1/4 of the AdamW moments; the step-1
 * checkpoint holds one optimiser shard per rank (no optim.bin); resuming it on 2 ranks (re-sharded,
 * ZeRO-2: gradients sharded too, reduced on a communication thread during backward;
 * and ZeRO-3: weights sharded too, gathered per layer) and on one process gives the uninterrupted run's
 * weights (tolerance: other reduction orders);
 * a rank killed mid-step makes a 4-rank job end within the timeout. Skips without MPI or mpirun.
 * Sanitizer builds run a lighter set (LIGHT, tests/vc_test.h). */
#include <stdlib.h>
#include "rl_dp_util.h"

/* different world sizes sum the per-rank gradients in another association (rank-ordered sums of
 * per-rank micro-batch sums) and the global norm from other partial sums */
#define WEIGHT_TOL 1e-5

/* the 4 prompts of a step in one mini-batch: each rank's share of it, so any rank count gives one process's step (with
 * several mini-batches each is every rank's slice of its own rows, as in verl, which depends on the rank count:
 * tests/rl/test_rl_dp.c) */
#define MINI 4

/* every rank printed its actor memory line with its 1/world share of the moments */
static void check_memory_lines(const char *log, int world, int stage) {
    char needle[64];
    for (int r = 0; r < world; r++) {
        snprintf(needle, sizeof needle, "rank %d/%d actor (ZeRO-%d", r, world, stage);
        CHECK_MSG(file_has(log, needle), "no '%s' line in %s", needle, log);
    }
    /* "(M of P parameters' moments)": M = ceil(P / world) except on the last ranks */
    char *text = NULL;
    size_t n = 0;
    if (vc_read_file(log, &text, &n)) return;
    const char *p = strstr(text, "rank 0/");
    unsigned long long m = 0, total = 0;
    p = p ? strstr(p, "AdamW") : NULL;
    p = p ? strchr(p, '(') : NULL;
    CHECK_MSG(p && sscanf(p, "(%llu of %llu", &m, &total) == 2, "memory line of rank 0 unreadable (%s)", log);
    CHECK_MSG(total > 0 && m == (total + (unsigned long long)world - 1) / (unsigned long long)world,
              "rank 0 holds %llu of %llu moments with %d ranks", m, total, world);
    printf("rank 0 of %d: AdamW moments for %llu of %llu parameters\n", world, m, total);
    free(text);
}

static void resume_from(const char *src_run, const char *run, int np, const char *zero, const char *extra,
                        const char *log) {
    CHECK(cli_sh("rm -rf %s && mkdir -p %s && cp -r %s/global_step_1 %s/ && echo 1 > %s/latest_checkpointed_iteration.txt",
                 run, run, src_run, run, run) == 0);
    char x[1200];
    snprintf(x, sizeof x, "%s trainer.total_training_steps=2 trainer.resume_mode=auto %s", extra, zero);
    int rc = train(np, np > 0 ? np : 1, MINI, run, x, log);
    CHECK_MSG(rc == 0, "resume on %d ranks failed (%d); see %s", np, rc, log);
    CHECK_MSG(file_has(log, "resumed from"), "%s: no resume notice", log);
}

/* Sanitizer builds run the model several times slower: 2 sharded ranks instead of 4, and the resumed
 * one-process run stands in for the one-process reference (the comparisons stay the same). */

static void test_zero_resume(void) {
    const int W = LIGHT ? 2 : 4;
    char r1[400], z4[400], ra[400], rb[400], log[500], extra[500] = "", x[1200], p[600];
    write_scorer(extra, sizeof extra);
    snprintf(r1, sizeof r1, "%s/one", dir);
    snprintf(z4, sizeof z4, "%s/zero%d", dir, W);
    snprintf(ra, sizeof ra, "%s/resume2", dir);
    snprintf(rb, sizeof rb, "%s/resume1", dir);
    int rc;
    if (!LIGHT) {
        snprintf(x, sizeof x, "%s trainer.total_training_steps=2", extra);
        snprintf(log, sizeof log, "%s/one.log", dir);
        rc = train(0, 1, MINI, r1, x, log);
        CHECK_MSG(rc == 0, "one process failed (%d); see %s", rc, log);
    }
    snprintf(x, sizeof x, "%s trainer.total_training_steps=2 actor_rollout_ref.actor.zero_stage=1 "
             "actor_rollout_ref.actor.overlap_grad_reduce=true", extra);
    snprintf(log, sizeof log, "%s/zero%d.log", dir, W);
    double t0 = vc_now();
    unsetenv("VERLC_MEMORY_PLAN"); /* this run plans: the trials on every rank, sharded state, one step arena */
    rc = train(W, W, MINI, z4, x, log);
    setenv("VERLC_MEMORY_PLAN", "0", 1);
    CHECK_MSG(rc == 0, "mpirun -np %d (ZeRO-1) failed (%d); see %s", W, rc, log);
    printf("%d ranks, ZeRO-1, 2 steps: %.1f s\n", W, vc_now() - t0);
    if (rc) return;
    check_memory_lines(log, W, 1);
    CHECK_MSG(cli_sh("grep -q '^memory plan: actor' %s", log) == 0 && cli_arena_within_plan(log) == 0,
              "no memory plan, or the step arena's peak over it, in %s", log);
    if (!LIGHT) {
        check_close(r1, z4, "GRPO, 2 steps: 1 process vs 4 ranks ZeRO-1", WEIGHT_TOL);
        double g1 = metric(r1, "actor/grad_norm"), g4 = metric(z4, "actor/grad_norm");
        printf("actor/grad_norm at step 2: 1 process %.9g, 4 ranks %.9g\n", g1, g4);
        CHECK_MSG(fabs(g1 - g4) <= 1e-4 * fmax(1, fabs(g1)), "grad_norm %g vs %g", g1, g4);
    }
    /* one shard per rank, no whole-model optimiser file */
    for (int r = 0; r < W; r++) {
        snprintf(p, sizeof p, "%s/global_step_1/actor/optim_shard_%d_of_%d.bin", z4, r, W);
        CHECK_MSG(vc_file_exists(p), "%s missing", p);
    }
    snprintf(p, sizeof p, "%s/global_step_1/actor/optim.bin", z4);
    CHECK_MSG(!vc_file_exists(p), "%s written with ZeRO-1", p);
    { /* also under the sanitizers: ZeRO-2's set-up and teardown in the RL trainer */
        snprintf(log, sizeof log, "%s/resume2.log", dir);
        /* resumed with ZeRO-2 (sharded gradients, reduced per micro-batch): the same checkpoint layout */
        resume_from(z4, ra, 2,
                    "actor_rollout_ref.actor.zero_stage=2 actor_rollout_ref.actor.overlap_grad_reduce=true", extra,
                    log);
        check_memory_lines(log, 2, 2);
        CHECK_MSG(file_has(log, "ZeRO-2 grads = shard"), "no ZeRO-2 gradient line in %s", log);
        check_close(z4, ra, "4-rank ZeRO-1 checkpoint resumed on 2 ranks (ZeRO-2) vs uninterrupted", WEIGHT_TOL);
        /* ZeRO-3: weights sharded during the update, full for rollout, log-probs, checkpoint and export */
        snprintf(log, sizeof log, "%s/resume3.log", dir);
        resume_from(z4, ra, 2, "actor_rollout_ref.actor.zero_stage=3", extra, log);
        check_memory_lines(log, 2, 3);
        CHECK_MSG(file_has(log, "ZeRO-3 weights = master shard"), "no ZeRO-3 weight line in %s", log);
        check_close(z4, ra, "4-rank ZeRO-1 checkpoint resumed on 2 ranks (ZeRO-3) vs uninterrupted", WEIGHT_TOL);
    }
    if (!LIGHT) { /* one mini-batch per step: the same rows, so ZeRO-3 matches ZeRO-2 */
        char z2[400], z3[400];
        snprintf(z2, sizeof z2, "%s/z2full", dir);
        snprintf(z3, sizeof z3, "%s/z3full", dir);
        snprintf(x, sizeof x, "%s trainer.total_training_steps=2 actor_rollout_ref.actor.zero_stage=2", extra);
        snprintf(log, sizeof log, "%s/z2full.log", dir);
        rc = train(2, 2, 4, z2, x, log);
        CHECK_MSG(rc == 0, "2 ranks ZeRO-2 failed (%d); see %s", rc, log);
        snprintf(x, sizeof x, "%s trainer.total_training_steps=2 actor_rollout_ref.actor.zero_stage=3", extra);
        snprintf(log, sizeof log, "%s/z3full.log", dir);
        rc = train(2, 2, 4, z3, x, log);
        CHECK_MSG(rc == 0, "2 ranks ZeRO-3 failed (%d); see %s", rc, log);
        if (!rc) check_close(z2, z3, "GRPO, 2 steps, one mini-batch: 2 ranks ZeRO-2 vs ZeRO-3", WEIGHT_TOL);
        /* PPO: the critic too (its value head is an extra parameter, kept whole under ZeRO-3) */
        const char *ppo = "algorithm.adv_estimator=gae critic.optim.lr=1e-3 critic.ppo_micro_batch_size_per_gpu=1 "
                          "critic.ppo_mini_batch_size=4";
        snprintf(z2, sizeof z2, "%s/ppo2", dir); /* new run folders: a folder with checkpoints resumes */
        snprintf(z3, sizeof z3, "%s/ppo3", dir);
        for (int z = 2; z <= 3 && !rc; z++) {
            snprintf(x, sizeof x, "%s %s critic.model.path=%s/model trainer.total_training_steps=2 "
                     "actor_rollout_ref.actor.zero_stage=%d critic.zero_stage=%d", extra, ppo, dir, z, z);
            snprintf(log, sizeof log, "%s/ppo%d.log", dir, z);
            rc = train(2, 2, 4, z == 2 ? z2 : z3, x, log);
            CHECK_MSG(rc == 0, "2 ranks PPO ZeRO-%d failed (%d); see %s", z, rc, log);
        }
        if (!rc) {
            check_close(z2, z3, "PPO, 2 steps: 2 ranks ZeRO-2 vs ZeRO-3 (actor and critic)", WEIGHT_TOL);
            double v2 = metric(z2, "critic/vf_loss"), v3 = metric(z3, "critic/vf_loss");
            printf("critic/vf_loss at step 2: ZeRO-2 %.9g, ZeRO-3 %.9g\n", v2, v3);
            CHECK_MSG(v2 == v3, "critic/vf_loss %g vs %g", v2, v3);
        }
    }
    snprintf(log, sizeof log, "%s/resume1.log", dir);
    resume_from(z4, rb, 0, "", extra, log);
    check_close(z4, rb, "ZeRO-1 checkpoint resumed on one process vs uninterrupted", WEIGHT_TOL);
    if (!LIGHT) check_close(r1, rb, "resumed on one process vs one process throughout", WEIGHT_TOL);
}

/* rank 3 of 4 is killed while step 1 scores its samples */
static void test_kill4(void) {
    char r[400], log[500], prog[500], extra[700];
    snprintf(r, sizeof r, "%s/run_kill4", dir);
    snprintf(log, sizeof log, "%s/kill4.log", dir);
    snprintf(prog, sizeof prog, "%s/reward_kill4.sh", dir);
    if (!write_prog(prog, "#!/bin/sh\n"
                          "if [ \"${OMPI_COMM_WORLD_RANK:-0}\" = 3 ]; then kill -9 $PPID; exec sleep 20; fi\n"
                          "while read line; do echo '{\"score\": 0.5}'; done\n"))
        return;
    snprintf(extra, sizeof extra, "custom_reward_function.path=%s actor_rollout_ref.actor.zero_stage=1", prog);
    double t0 = vc_now();
    int rc = train(4, 4, 2, r, extra, log);
    double secs = vc_now() - t0;
    int ok = rc != 0 && rc != 124 && secs < 25;
    CHECK_MSG(ok, "rank 3 of 4 killed mid-step: exit %d after %.1f s (see %s)", rc, secs, log);
    printf("rank 3 of 4 killed in its reward program: job ended with status %d in %.1f s %s\n", rc, secs,
           ok ? "(pass)" : "(FAIL)");
}

int main(void) {
    /* many short multi-rank runs on 2 cores: no memory-plan trial step (rl_test_trainer_e2e and
     * rl_test_trainer_errors run it) */
    setenv("VERLC_MEMORY_PLAN", "0", 1);
    if (!rldp_start("rlzero")) return vc_test_done();
    char *old = rldp_env_begin();
    double t0 = vc_now();
    rl_cli_setup(32, 2, 16, 64);
    test_zero_resume();
    setenv("VERLC_DIST_TIMEOUT", "3", 1);
    test_kill4();
    printf("rl zero: %.1f s\n", vc_now() - t0);
    rldp_env_end(old);
    return vc_test_done();
}
