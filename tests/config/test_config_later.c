/* Command lines written for verl's later configuration (verl-project/verl, August 2026) on verlc's b178a3cd
 * defaults: the `reward` group taken onto the keys verlc reads (reward manager, custom reward function, reward
 * model, DAPO's reward_kwargs; the earlier key winning when both are set, as in verl's migration), later keys
 * accepted with a notice, later feature switches refused by name, `model_engine=megatron|dp` as Hydra's group
 * selection (also in a defaults list), `+` over keys later verl dropped, and YAML files adding keys as Hydra
 * lets them (a likely misspelling of a verl key still refused). */
#include "verlc/config.h"
#include "vc_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static vc_status load(const char *yaml, const char *ov, vc_config **c) {
    char buf[2048], *argv[32];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", ov);
    for (char *s = strtok(buf, "|"); s && n < 32; s = strtok(NULL, "|")) argv[n++] = s;
    *c = NULL;
    return yaml ? vc_config_load(yaml, n, argv, c) : vc_config_load_argv(n, argv, NULL, c);
}

static const char *str(const vc_config *c, const char *key) {
    const char *s = NULL;
    return c && !vc_config_get_str(c, key, &s) && s ? s : "(none)";
}

static int noticed(const vc_config *c, const char *part) {
    for (size_t i = 0; c && i < vc_config_notice_count(c); i++)
        if (strstr(vc_config_notice(c, i), part)) return 1;
    return 0;
}

int main(void) {
    vc_config *c = NULL;
    /* the reward group */
    CHECK_OK(load(NULL, "reward.reward_manager.name=dapo|reward.custom_reward_function.path=/x/r.py|"
                        "reward.custom_reward_function.name=score|reward.reward_model.enable=true|"
                        "reward.reward_model.model_path=/m/rm|+reward.reward_kwargs.overlong_buffer_cfg.len=64|"
                        "+reward.reward_kwargs.max_resp_len=128|reward.num_workers=4", &c));
    CHECK(!strcmp(str(c, "reward_manager.name"), "dapo") && !strcmp(str(c, "custom_reward_function.path"), "/x/r.py") &&
          !strcmp(str(c, "custom_reward_function.name"), "score") && !strcmp(str(c, "reward_model.model.path"), "/m/rm"));
    int on = 0;
    int64_t len = 0, mx = 0;
    CHECK_OK(vc_config_get_bool(c, "reward_model.enable", &on));
    CHECK_OK(vc_config_get_int(c, "reward_model.reward_kwargs.overlong_buffer_cfg.len", &len));
    CHECK_OK(vc_config_get_int(c, "reward_model.reward_kwargs.max_resp_len", &mx));
    CHECK(on && len == 64 && mx == 128 && noticed(c, "reward.num_workers=4"));
    vc_config_free(c);
    /* both layouts set: the earlier key wins, with a notice */
    CHECK_OK(load(NULL, "reward.reward_manager.name=dapo|reward_model.reward_manager=prime", &c));
    CHECK(!strcmp(str(c, "reward_manager.name"), "prime") && noticed(c, "the latter wins"));
    vc_config_free(c);
    /* `+` over keys later verl dropped, still at their defaults */
    CHECK_OK(load(NULL, "+reward_model.overlong_buffer.enable=true|+reward_model.overlong_buffer.len=32", &c));
    CHECK_OK(vc_config_get_bool(c, "reward_model.overlong_buffer.enable", &on));
    CHECK(on);
    vc_config_free(c);
    CHECK(load(NULL, "reward_model.overlong_buffer.len=8|+reward_model.overlong_buffer.len=32", &c) == VC_ERR_ARG &&
          strstr(vc_last_error(), "already exists"));
    /* later keys: accepted, noticed; feature switches refused */
    CHECK_OK(load(NULL, "actor_rollout_ref.actor.checkpoint.strict=false|critic.fsdp.param_offload=true|"
                        "actor_rollout_ref.rollout.disaggregation.enabled=true", &c));
    CHECK(noticed(c, "checkpoint.strict=false is ignored") && noticed(c, "critic.fsdp.param_offload=true is ignored") &&
          noticed(c, "disaggregation.enabled"));
    vc_config_free(c);
    /* the rollout's own profiler tool_config (b178a3cd: the actor's by interpolation), as verl's profile example sets
     * it; the actor's still its own */
    CHECK_OK(load(NULL, "actor_rollout_ref.rollout.profiler.tool_config.torch.profile_token_start=0|"
                        "actor_rollout_ref.rollout.profiler.tool_config.torch.discrete=True|"
                        "actor_rollout_ref.actor.profiler.tool_config.torch.discrete=True", &c));
    CHECK(noticed(c, "rollout.profiler.tool_config.torch.profile_token_start=0 is ignored"));
    vc_config_free(c);
    /* on-policy distillation is read (its loss and teachers), the teacher servers' settings are noticed */
    CHECK_OK(load(NULL, "distillation.enabled=true|distillation.teacher_models.teacher_model.model_path=/m|"
                        "distillation.teacher_models.teacher_model.num_replicas=2", &c));
    CHECK(!noticed(c, "distillation.enabled") && !noticed(c, "model_path") && noticed(c, "num_replicas=2 is ignored"));
    vc_config_free(c);
    CHECK(load(NULL, "trainer.v1.trainer_mode=separate_async", &c) == VC_ERR_UNSUPPORTED &&
          strstr(vc_last_error(), "separate_async"));
    CHECK(load(NULL, "actor_rollout_ref.actor.qat.enable=true", &c) == VC_ERR_ARG && strstr(vc_last_error(), "fsdp_config.qat"));
    CHECK(load(NULL, "actor_rollout_ref.actor.megatron.qat.enable=true", &c) == VC_ERR_UNSUPPORTED);
    CHECK_OK(load(NULL, "actor_rollout_ref.actor.fsdp_config.qat.enable=true|actor_rollout_ref.actor.fsdp_config.qat.group_size=32", &c));
    CHECK(!noticed(c, "qat"));
    vc_config_free(c);
    /* model_engine: Hydra applies the group before the keys, wherever it stands */
    CHECK_OK(load(NULL, "actor_rollout_ref.actor.optim.lr_decay_style=cosine|model_engine=megatron", &c));
    CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "megatron") &&
          !strcmp(str(c, "actor_rollout_ref.actor.optim.lr_decay_style"), "cosine"));
    vc_config_free(c);
    CHECK_OK(load(NULL, "model_engine=dp", &c));
    CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "fsdp"));
    vc_config_free(c);
    /* model_engine=veomni: later verl's VeOmni groups (the keys of examples/grpo_trainer/run_qwen3_30b_veomni.sh):
     * strategies veomni, VeOmni's optimizer keys with its cosine default, its engine settings noticed; the FSDP
     * engine's keys it lacks refused, as verl refuses them */
    CHECK_OK(load(NULL, "actor_rollout_ref.actor.optim.lr=1e-6|actor_rollout_ref.actor.veomni.param_offload=True|"
                        "actor_rollout_ref.actor.veomni.optimizer_offload=True|actor_rollout_ref.actor.veomni.fsdp_size=-1|"
                        "actor_rollout_ref.actor.veomni.expert_parallel_size=1|actor_rollout_ref.ref.veomni.param_offload=True|"
                        "actor_rollout_ref.actor.use_torch_compile=False|model_engine=veomni", &c));
    CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "veomni") &&
          !strcmp(str(c, "actor_rollout_ref.ref.strategy"), "veomni") && !strcmp(str(c, "critic.strategy"), "veomni") &&
          !strcmp(str(c, "actor_rollout_ref.actor.optim.lr_scheduler_type"), "cosine") &&
          !strcmp(str(c, "critic.optim.optimizer"), "adamw"));
    CHECK(noticed(c, "veomni.param_offload=true is ignored") && noticed(c, "veomni.optimizer_offload=true is ignored") &&
          !noticed(c, "fsdp_size"));
    int ref_off = 0;
    CHECK_OK(vc_config_get_bool(c, "actor_rollout_ref.ref.veomni.param_offload", &ref_off));
    CHECK(ref_off && !vc_config_has(c, "actor_rollout_ref.actor.fsdp_config") &&
          !vc_config_has(c, "actor_rollout_ref.actor.optim.min_lr_ratio"));
    vc_config_free(c);
    static const char *const NOT_VEOMNI[] = { "actor_rollout_ref.actor.fsdp_config.param_offload=true",
                                              "actor_rollout_ref.actor.grad_clip=0.5",
                                              "actor_rollout_ref.actor.optim.min_lr_ratio=0.1",
                                              "critic.forward_micro_batch_size_per_gpu=2",
                                              "actor_rollout_ref.actor.veomni.no_such_key=1" };
    for (size_t i = 0; i < sizeof NOT_VEOMNI / sizeof *NOT_VEOMNI; i++) {
        char line[300];
        snprintf(line, sizeof line, "model_engine=veomni|%s", NOT_VEOMNI[i]);
        vc_status st = load(NULL, line, &c);
        CHECK_MSG(st == VC_ERR_ARG && c == NULL, "%s under veomni: %d (%s)", NOT_VEOMNI[i], (int)st, vc_last_error());
        vc_config_free(c);
        if (i < 4) CHECK_OK(load(NULL, NOT_VEOMNI[i], &c)); /* the FSDP engine's own keys */
        vc_config_free(c);
    }
    /* --config-name ppo_trainer keeps the engine chosen beside it; a YAML defaults list selects it too */
    CHECK_OK(load(NULL, "--config-name|ppo_trainer|model_engine=veomni", &c));
    CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "veomni"));
    vc_config_free(c);
    CHECK_OK(load(NULL, "model_engine=megatron|--config-name|ppo_trainer", &c));
    CHECK(!strcmp(str(c, "actor_rollout_ref.actor.strategy"), "megatron"));
    vc_config_free(c);
    CHECK(load(NULL, "model_engine=torchtitan", &c) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "torchtitan"));
    /* keys through an interpolated node, as later verl's scripts set them: ++ makes it a mapping of that key
     * alone (OmegaConf.update); a plain key=value goes into a copy of the mapping it interpolates (later verl
     * has that mapping there); a key the mapping lacks is still refused */
    CHECK_OK(load(NULL, "++actor_rollout_ref.ref.megatron.override_transformer_config.use_flash_attn=True|"
                        "actor_rollout_ref.rollout.profiler.tool_config.npu.level=level1", &c));
    int fa = 0;
    CHECK_OK(vc_config_get_bool(c, "actor_rollout_ref.ref.megatron.override_transformer_config.use_flash_attn", &fa));
    CHECK(fa);
    CHECK(!strcmp(str(c, "actor_rollout_ref.rollout.profiler.tool_config.npu.level"), "level1") &&
          !strcmp(str(c, "actor_rollout_ref.actor.profiler.tool_config.npu.level"), "level0"));
    vc_config_free(c);
    CHECK(load(NULL, "actor_rollout_ref.rollout.profiler.tool_config.npu.no_such_key=1", &c) == VC_ERR_ARG);
    /* a group option with a package (Megatron-lite's critic; its actor group is built in, tests/rl/test_trainer_megatron.c):
     * refused with what to do instead */
    CHECK(load(NULL, "critic@critic=mlite_critic", &c) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "config groups"));
    /* YAML: a defaults list with model_engine, a key verl's configs lack (Hydra lets files add keys), and a
     * misspelling, still refused */
    char path[128];
    snprintf(path, sizeof path, "/tmp/verlc_later_%d.yaml", (int)getpid());
    const char *Y = "defaults:\n  - model_engine: megatron\n  - _self_\nmy_recipe:\n  knob: 3\n"
                    "reward:\n  reward_manager:\n    name: dapo\n";
    CHECK_OK(vc_write_file_atomic(path, Y, strlen(Y)));
    CHECK_OK(load(path, "", &c));
    CHECK(!strcmp(str(c, "critic.strategy"), "megatron") && !strcmp(str(c, "reward_manager.name"), "dapo") &&
          noticed(c, "my_recipe is not one of verl's keys"));
    vc_config_free(c);
    /* a mapping under a name close to a scalar key of verl's is not a misspelling of it (rollout.server ~ seed) */
    const char *Y3 = "actor_rollout_ref:\n  rollout:\n    server:\n      timeout: 60\n";
    CHECK_OK(vc_write_file_atomic(path, Y3, strlen(Y3)));
    CHECK_OK(load(path, "", &c));
    CHECK(noticed(c, "actor_rollout_ref.rollout.server is not one of verl's keys"));
    vc_config_free(c);
    const char *Y2 = "data:\n  max_prompt_lenght: 9\n";
    CHECK_OK(vc_write_file_atomic(path, Y2, strlen(Y2)));
    CHECK(load(path, "", &c) == VC_ERR_ARG && strstr(vc_last_error(), "did you mean 'data.max_prompt_length'"));
    unlink(path);
    return vc_test_done();
}
