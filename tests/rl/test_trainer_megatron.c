/* verl's megatron strategy (ppo_megatron_trainer): the config composed from verl's megatron defaults by
 * `--config-name ppo_megatron_trainer` and by a YAML defaults entry, Hydra's `+` over null values (verl's
 * megatron scripts add recompute_method so), and a GRPO run whose actor/lr per step is Megatron-core's
 * schedule (cosine after one warmup step from lr_warmup_init), with Megatron's names for LoRA targets,
 * bfloat16 from megatron.dtype, full recomputation as checkpointing, later verl's optimizer=muon, and Megatron's
 * refusals named. */
#include "../../src/rl/demo_internal.h"
#include "rl_demo_util.h"
#include "../optim_file.h"
#include "verlc/report.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static vc_status load(int megatron, const char *yaml, char *ov, vc_config **cfg) {
    char *argv[64];
    int n = 0;
    for (char *s = strtok(ov, "|"); s && n < 64; s = strtok(NULL, "|")) argv[n++] = s;
    return vc_config_load_ex(yaml, megatron, n, argv, cfg);
}

static const char *str(const vc_config *c, const char *key) {
    const char *s = NULL;
    CHECK_OK(vc_config_get_str(c, key, &s));
    return s ? s : "";
}

static void test_config(void) {
    vc_config *c = NULL;
    char ov[512] = "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform|"
                   "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2";
    CHECK_OK(load(1, NULL, ov, &c));
    if (c) {
        CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "megatron") &&
              !strcmp(str(c, "critic.strategy"), "megatron") &&
              !strcmp(str(c, "actor_rollout_ref.actor.optim.optimizer"), "adam") &&
              !strcmp(str(c, "actor_rollout_ref.actor.optim.lr_decay_style"), "constant") &&
              !strcmp(str(c, "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method"), "uniform"));
        int64_t tp = 0, rtp = 0;
        CHECK_OK(vc_config_get_int(c, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size", &tp));
        CHECK_OK(vc_config_get_int(c, "actor_rollout_ref.ref.megatron.tensor_model_parallel_size", &rtp));
        CHECK(tp == 2 && rtp == 2); /* the reference follows the actor, as verl's interpolation says */
        int noticed = 0;
        for (size_t i = 0; i < vc_config_notice_count(c); i++)
            noticed |= strstr(vc_config_notice(c, i), "tensor_model_parallel_size") != NULL;
        CHECK_MSG(noticed, "no notice for tensor_model_parallel_size");
    }
    vc_config_free(c);
    /* `+` over a value that is not null stays an error, as in Hydra */
    char ov2[256] = "+actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2";
    CHECK(load(1, NULL, ov2, &c) == VC_ERR_ARG && strstr(vc_last_error(), "already exists"));
    /* ppo_trainer's defaults are not megatron's */
    char ov3[64] = "trainer.n_gpus_per_node=1";
    CHECK_OK(load(0, NULL, ov3, &c));
    CHECK(c && !strcmp(str(c, "actor_rollout_ref.actor.strategy"), "fsdp") &&
          !vc_config_has(c, "actor_rollout_ref.actor.megatron"));
    vc_config_free(c);
    /* Hydra's --config-name, and a YAML defaults list */
    char *argv[] = { "--config-path=nowhere", "--config-name=ppo_megatron_trainer", "critic.optim.min_lr=1e-7" };
    CHECK_OK(vc_config_load_argv(3, argv, NULL, &c));
    CHECK(c && !strcmp(str(c, "critic.strategy"), "megatron"));
    vc_config_free(c);
    char y[300];
    snprintf(y, sizeof y, "%s/mg.yaml", dir);
    const char *Y = "defaults:\n  - ppo_megatron_trainer\n  - _self_\nactor_rollout_ref:\n  actor:\n    optim:\n"
                    "      lr_decay_style: cosine\n";
    CHECK_OK(vc_write_file_atomic(y, Y, strlen(Y)));
    char ov4[8] = "";
    CHECK_OK(load(0, y, ov4, &c));
    CHECK(c && !strcmp(str(c, "actor_rollout_ref.actor.optim.lr_decay_style"), "cosine") &&
          !strcmp(str(c, "actor_rollout_ref.actor.strategy"), "megatron"));
    vc_config_free(c);
    const char *Y2 = "defaults:\n  - _self_\n  - ppo_megatron_trainer\ndata:\n  train_batch_size: 4\n";
    CHECK_OK(vc_write_file_atomic(y, Y2, strlen(Y2)));
    CHECK(load(0, y, ov4, &c) == VC_ERR_ARG && strstr(vc_last_error(), "must come first"));
}

static vc_status run(const char *name, const char *extra, double *lrs, int n_lrs) {
    return demo_run_lrs(dir, VC_ENGINE_MEGATRON, name, extra, lrs, n_lrs);
}

static void test_run(void) {
    double lr[3] = { -1, -1, -1 };
    /* Megatron's schedule: step 0 lr_warmup_init (0), step 1 the peak, step 2 cosine half-way to min_lr */
    CHECK_OK(run("cosine", "actor_rollout_ref.actor.optim.lr_decay_style=cosine|actor_rollout_ref.actor.optim.lr_warmup_steps=1|"
                 "actor_rollout_ref.actor.optim.min_lr=1e-3|actor_rollout_ref.actor.megatron.override_transformer_config."
                 "recompute_granularity=full|actor_rollout_ref.actor.megatron.dtype=bfloat16|"
                 "actor_rollout_ref.model.lora.rank=4|actor_rollout_ref.model.lora.alpha=8|"
                 "actor_rollout_ref.actor.optim.override_optimizer_config={exp_avg_sq_dtype: fp32}", lr, 3));
    CHECK_MSG(lr[0] == 0 && fabs(lr[1] - 1e-2) < 1e-15 && fabs(lr[2] - (1e-3 + 0.5 * 9e-3)) < 1e-15,
              "actor/lr %.17g %.17g %.17g", lr[0], lr[1], lr[2]);
    /* later verl's precision-aware optimizer in a bf16 run: Megatron's moments stored in bf16 (the first only here; the
     * entropy bonus gives gradients where the tiny model's rewards give none) */
    CHECK_OK(run("pa", "actor_rollout_ref.actor.optim.use_precision_aware_optimizer=True|"
                 "actor_rollout_ref.actor.optim.exp_avg_dtype=bf16|actor_rollout_ref.actor.megatron.dtype=bfloat16|"
                 "actor_rollout_ref.actor.entropy_coeff=0.01|trainer.save_freq=3", lr, 3));
    char ob[400];
    long nb[2], nz[2];
    snprintf(ob, sizeof ob, "%s/pa/global_step_3/actor/optim.bin", dir);
    CHECK(optim_file_moments(ob, nb, nz) == 0);
    CHECK_MSG(nz[0] > 100 && nb[0] == nz[0] && nb[1] < nz[1] / 100, "precision-aware moments: %ld / %ld, %ld / %ld",
              nb[0], nz[0], nb[1], nz[1]);
    /* later verl's optimizer=muon: Megatron-core's Muon on the matrices (one momentum buffer, no second moment), adam on
     * the embeddings, the head and the norms; the same run with adam keeps second moments everywhere */
    long mb[2], mz[2];
    CHECK_OK(run("muon", "actor_rollout_ref.actor.optim.optimizer=muon|actor_rollout_ref.actor.optim.muon_nesterov=True|"
                 "actor_rollout_ref.actor.optim.muon_match_adamw_update_rms=True|"
                 "actor_rollout_ref.actor.optim.use_layer_wise_distributed_optimizer=True|"
                 "actor_rollout_ref.actor.entropy_coeff=0.01|trainer.save_freq=3", lr, 3));
    snprintf(ob, sizeof ob, "%s/muon/global_step_3/actor/optim.bin", dir);
    CHECK(optim_file_moments(ob, mb, mz) == 0);
    CHECK_OK(run("adam", "actor_rollout_ref.actor.entropy_coeff=0.01|trainer.save_freq=3", lr, 3));
    snprintf(ob, sizeof ob, "%s/adam/global_step_3/actor/optim.bin", dir);
    CHECK(optim_file_moments(ob, nb, nz) == 0);
    CHECK_MSG(mz[0] > 100 && mz[1] > 0 && mz[1] < nz[1] / 2 && nz[1] > 100,
              "muon: %ld first, %ld second moments not 0 (adam: %ld, %ld)", mz[0], mz[1], nz[0], nz[1]);
    /* refusals, named */
    static const struct { const char *ov, *needle; } BAD[] = {
        { "actor_rollout_ref.actor.optim.optimizer=sgd", "optim.optimizer=sgd" },
        { "actor_rollout_ref.actor.optim.optimizer=muon|actor_rollout_ref.actor.optim.muon_scalar_optimizer=lion",
          "muon_scalar_optimizer=lion" },
        { "actor_rollout_ref.actor.optim.optimizer=muon|actor_rollout_ref.actor.optim.muon_coefficient_type=custom",
          "muon_coefficient_type=custom" },
        { "actor_rollout_ref.actor.optim.optimizer=muon|actor_rollout_ref.actor.optim.muon_match_adamw_update_rms=True|"
          "actor_rollout_ref.actor.optim.muon_extra_scale_factor=0.2", "set one of the two" },
        { "actor_rollout_ref.actor.optim.optimizer=muon|actor_rollout_ref.actor.optim.muon_num_ns_steps=0",
          "muon_num_ns_steps=0" },
        { "actor_rollout_ref.actor.optim.lr_decay_style=WSD", "lr_wsd_decay_steps" },
        { "actor_rollout_ref.actor.optim.override_optimizer_config={adam_beta3: 1}", "adam_beta3" },
        /* Megatron's state dtypes through the override: fp32 only (the others are torch dtypes YAML cannot name) */
        { "actor_rollout_ref.actor.optim.override_optimizer_config={exp_avg_dtype: bf16}", "exp_avg_dtype=bf16 is not" },
        { "actor_rollout_ref.model.lora.rank=4|actor_rollout_ref.model.lora.dropout=0.1", "lora.dropout" },
        { "actor_rollout_ref.model.lora.rank=4|actor_rollout_ref.model.lora.target_modules=[linear_x]", "linear_x" },
        { "actor_rollout_ref.actor.megatron.dtype=float16", "fp16" },
        { "actor_rollout_ref.actor.optim.exp_avg_dtype=fp16", "exp_avg_dtype=fp16" },
        { "actor_rollout_ref.actor.optim.use_precision_aware_optimizer=True|actor_rollout_ref.actor.megatron.dtype=bfloat16|"
          "actor_rollout_ref.actor.optim.main_grads_dtype=bf16", "main_grads_dtype=bf16 is not supported" },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        vc_status st = run("bad", BAD[i].ov, lr, 1);
        CHECK_MSG(st && strstr(vc_last_error(), BAD[i].needle), "bad %zu: %s", i, vc_last_error());
    }
}

/* Megatron-lite's actor group (actor@actor_rollout_ref.actor=mlite_actor, verl's Megatron-lite example scripts): its
 * keys composed (the megatron optim group, its engine group; the FSDP actor's keys it lacks refused), its own lr
 * scheduler per step (WSD's exponential decay is start (end / start)^ratio there, not Megatron-core's), and refusals */
static void test_mlite(void) {
    vc_config *c = NULL;
    char *argv[] = { "actor@actor_rollout_ref.actor=mlite_actor", "actor_rollout_ref.actor.engine.ep=8",
                     "+actor_rollout_ref.actor.engine.impl_cfg.optimizer=fsdp2",
                     "+actor_rollout_ref.actor.engine.impl_cfg.recompute=[full]",
                     "+actor_rollout_ref.actor.optim.override_optimizer_config.offload_fraction=1.0",
                     "actor_rollout_ref.actor.optim.betas=[0.9,0.95]", "hydra.searchpath=[pkg://verl_mlite.config]" };
    CHECK_OK(vc_config_load_argv(7, argv, NULL, &c));
    if (c) {
        CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "mlite") &&
              !strcmp(str(c, "actor_rollout_ref.actor.optim.lr_decay_style"), "constant") &&
              !strcmp(str(c, "critic.strategy"), "fsdp") && !vc_config_has(c, "actor_rollout_ref.actor.fsdp_config"));
        vc_config_free(c);
    }
    char *bad[] = { "actor@actor_rollout_ref.actor=mlite_actor", "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine" };
    CHECK(vc_config_load_argv(2, bad, NULL, &c) == VC_ERR_ARG && strstr(vc_last_error(), "lr_scheduler_type"));
    char *other[] = { "ref@actor_rollout_ref.ref=mlite_ref" };
    CHECK(vc_config_load_argv(1, other, NULL, &c) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "mlite_ref"));
    /* the same group from a YAML defaults list */
    char y[300];
    snprintf(y, sizeof y, "%s/ml.yaml", dir);
    const char *Y = "defaults:\n  - ppo_trainer\n  - actor@actor_rollout_ref.actor: mlite_actor\n  - _self_\n"
                    "actor_rollout_ref:\n  actor:\n    engine:\n      tp: 1\n";
    CHECK_OK(vc_write_file_atomic(y, Y, strlen(Y)));
    char ov[8] = "";
    CHECK_OK(load(0, y, ov, &c));
    CHECK(c && !strcmp(str(c, "actor_rollout_ref.actor.strategy"), "mlite"));
    vc_config_free(c);
    /* a run: Megatron-lite's scheduler (lr 1e-2, WSD over the last 2 of 3 steps to 1e-3, exponential) */
    double lr[3] = { -1, -1, -1 };
    CHECK_OK(demo_run_lrs(dir, VC_ENGINE_DP | VC_GROUP_MLITE_ACTOR, "mlite",
                          "actor_rollout_ref.actor.optim.lr_decay_style=WSD|actor_rollout_ref.actor.optim.min_lr=1e-3|"
                          "actor_rollout_ref.actor.optim.lr_wsd_decay_steps=2|actor_rollout_ref.actor.optim.betas=[0.9,0.95]|"
                          "+actor_rollout_ref.actor.engine.impl_cfg.recompute=[full]|"
                          "+actor_rollout_ref.actor.optim.override_optimizer_config.adam_eps=1e-6", lr, 3));
    CHECK_MSG(fabs(lr[0] - 1e-2) < 1e-15 && fabs(lr[1] - 1e-2) < 1e-15 && fabs(lr[2] - 1e-2 * sqrt(0.1)) < 1e-15,
              "mlite actor/lr %.17g %.17g %.17g", lr[0], lr[1], lr[2]);
    static const struct { const char *ov, *needle; } BAD[] = {
        { "actor_rollout_ref.actor.optim.optimizer=sgd", "Adam-style" },
        { "+actor_rollout_ref.actor.optim.override_optimizer_config.decoupled_weight_decay=false",
          "decoupled_weight_decay=false" },
        { "actor_rollout_ref.actor.optim.lr_decay_style=poly", "poly" },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        vc_status st = demo_run_lrs(dir, VC_ENGINE_DP | VC_GROUP_MLITE_ACTOR, "mlbad", BAD[i].ov, lr, 1);
        CHECK_MSG(st && strstr(vc_last_error(), BAD[i].needle), "mlite bad %zu: %s", i, vc_last_error());
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_megatron_%d", (int)getpid());
    demo_model_setup(dir, 11);
    char p[300];
    demo_rows_setup(dir, "verlc/addition");
    test_config();
    test_run();
    test_mlite();
    snprintf(p, sizeof p, "rm -rf %s", dir);
    CHECK(system(p) == 0);
    return vc_test_done();
}
