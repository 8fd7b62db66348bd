/* Later verl's veomni engine (`model_engine=veomni`): a GRPO run whose actor/lr per step is VeOmni's schedule as
 * verl's veomni engine builds it (cosine after int(total x lr_warmup_steps_ratio) warmup steps from lr_start, to
 * lr_min), its default (cosine to 0 at the last step), bf16 matmuls from veomni.mixed_precision, and its refusals
 * named (another optimizer, a schedule VeOmni lacks, a warmup past the cosine's decay steps). And on every engine
 * the schedule moves once per training step, whatever its mini-batches and epochs, as verl steps its schedulers. */
#include "../../src/rl/demo_internal.h"
#include "rl_demo_util.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static vc_status run_on(int engine, const char *name, const char *extra, double *lrs, int n_lrs) {
    return demo_run_lrs(dir, engine, name, extra, lrs, n_lrs);
}

static vc_status run(const char *name, const char *extra, double *lrs, int n_lrs) {
    return run_on(VC_ENGINE_VEOMNI, name, extra, lrs, n_lrs);
}

/* two mini-batches a step (one prompt each) and two epochs: four optimiser steps, one schedule position */
static void test_once_per_step(void) {
    static const char *const MB = "actor_rollout_ref.actor.ppo_mini_batch_size=1|actor_rollout_ref.actor.ppo_epochs=2|";
    char ov[600];
    double lr[3] = { -1, -1, -1 };
    /* verl's cosine: one warmup step (0), the peak, half-way to min_lr_ratio 0 */
    snprintf(ov, sizeof ov, "%sactor_rollout_ref.actor.optim.lr_scheduler_type=cosine|"
             "actor_rollout_ref.actor.optim.lr_warmup_steps=1", MB);
    CHECK_OK(run_on(VC_ENGINE_DP, "dp_mb", ov, lr, 3));
    CHECK_MSG(lr[0] == 0 && fabs(lr[1] - 1e-2) < 1e-15 && fabs(lr[2] - 5e-3) < 1e-15, "fsdp actor/lr %.17g %.17g %.17g",
              lr[0], lr[1], lr[2]);
    /* VeOmni's cosine over 3 steps, no warmup: the peak, then 0.75 and 0.25 of it */
    snprintf(ov, sizeof ov, "%sactor_rollout_ref.actor.optim.lr_min=0", MB);
    CHECK_OK(run_on(VC_ENGINE_VEOMNI, "vo_mb", ov, lr, 3));
    CHECK_MSG(fabs(lr[0] - 1e-2) < 1e-15 && fabs(lr[1] - 7.5e-3) < 1e-15 && fabs(lr[2] - 2.5e-3) < 1e-15,
              "veomni actor/lr %.17g %.17g %.17g", lr[0], lr[1], lr[2]);
    /* Megatron's linear decay over 3 steps: the peak, 2/3 and 1/3 of it */
    snprintf(ov, sizeof ov, "%sactor_rollout_ref.actor.optim.lr_decay_style=linear", MB);
    CHECK_OK(run_on(VC_ENGINE_MEGATRON, "mg_mb", ov, lr, 3));
    CHECK_MSG(fabs(lr[0] - 1e-2) < 1e-15 && fabs(lr[1] - 1e-2 * 2 / 3) < 1e-15 && fabs(lr[2] - 1e-2 / 3) < 1e-15,
              "megatron actor/lr %.17g %.17g %.17g", lr[0], lr[1], lr[2]);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_veomni_%d", (int)getpid());
    demo_model_setup(dir, 11);
    demo_rows_setup(dir, "verlc/addition");
    double lr[3] = { -1, -1, -1 };
    /* one warmup step (int(3 x 0.34)) from lr_start 0, the peak, then half-way down the cosine to lr_min: 1e-3 +
     * 0.5 x 9e-3; with bf16 matmuls (mixed_precision) */
    CHECK_OK(run("cosine", "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.34|actor_rollout_ref.actor.optim.lr_min=1e-3|"
                 "actor_rollout_ref.actor.veomni.mixed_precision=true|actor_rollout_ref.actor.optim.clip_grad=0.5", lr, 3));
    CHECK_MSG(lr[0] == 0 && fabs(lr[1] - 1e-2) < 1e-15 && fabs(lr[2] - (1e-3 + 0.5 * 9e-3)) < 1e-15,
              "actor/lr %.17g %.17g %.17g", lr[0], lr[1], lr[2]);
    /* the default: cosine from the peak to lr_min 0 over the run (step 1 of 2: half-way) */
    CHECK_OK(run("default", "actor_rollout_ref.actor.veomni.param_offload=true", lr, 2));
    CHECK_MSG(fabs(lr[0] - 1e-2) < 1e-15 && fabs(lr[1] - 5e-3) < 1e-15, "default actor/lr %.17g %.17g", lr[0], lr[1]);
    /* VeOmni's constant schedule */
    CHECK_OK(run("constant", "actor_rollout_ref.actor.optim.lr_scheduler_type=constant", lr, 2));
    CHECK_MSG(lr[0] == 1e-2 && lr[1] == 1e-2, "constant actor/lr %.17g %.17g", lr[0], lr[1]);
    test_once_per_step();
    static const struct { const char *ov, *needle; } BAD[] = {
        { "actor_rollout_ref.actor.optim.optimizer=muon", "optim.optimizer=muon" },
        { "actor_rollout_ref.actor.optim.lr_scheduler_type=wsd", "wsd" },
        { "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=1.0|actor_rollout_ref.actor.optim.lr_decay_ratio=0",
          "lr_decay_ratio" },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        vc_status st = run("bad", BAD[i].ov, lr, 1);
        CHECK_MSG(st && strstr(vc_last_error(), BAD[i].needle), "bad %zu: %s", i, vc_last_error());
    }
    char p[300];
    snprintf(p, sizeof p, "rm -rf %s", dir);
    CHECK(system(p) == 0);
    return vc_test_done();
}
