/* verl's configuration: defaults as verl ships them, verl's documented command lines (GSM8K quickstart
 * PPO, the GRPO example), schema checks (unknown keys with suggestions, types), YAML files merged on
 * top (errors name file and line), notices for Python-only keys, argv parsing. */
#include "config/cfg_internal.h"
#include "vc_test.h"
#include "verlc/config.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int err_has(const char *needle) {
    const char *e = vc_last_error();
    int ok = e && strstr(e, needle) != NULL;
    if (!ok) fprintf(stderr, "  error text was: %s\n  expected to contain: %s\n", e ? e : "(null)", needle);
    return ok;
}

static int64_t geti(vc_config *c, const char *k) {
    int64_t v = -12345;
    CHECK_OK(vc_config_get_int(c, k, &v));
    return v;
}
static double getd(vc_config *c, const char *k) {
    double v = -12345;
    CHECK_OK(vc_config_get_double(c, k, &v));
    return v;
}
static int getb(vc_config *c, const char *k) {
    int v = -1;
    CHECK_OK(vc_config_get_bool(c, k, &v));
    return v;
}
static int str_is(vc_config *c, const char *k, const char *want) {
    const char *s = NULL;
    if (vc_config_get_str(c, k, &s) != VC_OK) { fprintf(stderr, "  %s\n", vc_last_error()); return 0; }
    int ok = s && !strcmp(s, want);
    if (!ok) fprintf(stderr, "  %s = '%s', want '%s'\n", k, s ? s : "(null)", want);
    return ok;
}

/* verl's defaults (ppo_trainer.yaml and its sub-configs) */
static void test_defaults(void) {
    vc_config *c;
    CHECK_OK(vc_config_load(NULL, 0, NULL, &c));
    if (!c) return;
    CHECK(geti(c, "data.train_batch_size") == 1024);
    CHECK(geti(c, "data.max_prompt_length") == 512);
    CHECK(geti(c, "data.max_response_length") == 512);
    CHECK(vc_config_kind(c, "data.val_batch_size") == VC_CFG_NULL);
    CHECK(vc_config_kind(c, "data.tokenizer") == VC_CFG_NULL);
    CHECK(str_is(c, "data.prompt_key", "prompt"));
    CHECK(str_is(c, "data.reward_fn_key", "data_source"));
    CHECK(str_is(c, "data.truncation", "error"));
    CHECK(getb(c, "data.return_raw_chat") == 1);
    CHECK(getb(c, "data.shuffle") == 1);
    CHECK(getb(c, "data.filter_overlong_prompts") == 0);
    CHECK(str_is(c, "actor_rollout_ref.model.path", "~/models/deepseek-llm-7b-chat"));
    CHECK(getb(c, "actor_rollout_ref.model.enable_gradient_checkpointing") == 1);
    CHECK(getb(c, "actor_rollout_ref.model.use_remove_padding") == 1);
    CHECK(str_is(c, "actor_rollout_ref.actor.strategy", "fsdp"));
    CHECK(geti(c, "actor_rollout_ref.actor.ppo_mini_batch_size") == 256);
    CHECK(vc_config_kind(c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == VC_CFG_NULL);
    CHECK(getb(c, "actor_rollout_ref.actor.use_dynamic_bsz") == 0);
    CHECK(geti(c, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu") == 16384);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.grad_clip"), 1.0, 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.clip_ratio"), 0.2, 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.clip_ratio_low"), 0.2, 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.clip_ratio_high"), 0.2, 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.clip_ratio_c"), 3.0, 0);
    CHECK(str_is(c, "actor_rollout_ref.actor.loss_agg_mode", "token-mean"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.entropy_coeff"), 0.0, 0);
    CHECK(getb(c, "actor_rollout_ref.actor.use_kl_loss") == 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.kl_loss_coef"), 0.001, 0);
    CHECK(str_is(c, "actor_rollout_ref.actor.kl_loss_type", "low_var_kl"));
    CHECK(geti(c, "actor_rollout_ref.actor.ppo_epochs") == 1);
    CHECK(getb(c, "actor_rollout_ref.actor.shuffle") == 0);
    CHECK(str_is(c, "actor_rollout_ref.actor.policy_loss.loss_mode", "vanilla"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.lr"), 1e-6, 0);
    CHECK(geti(c, "actor_rollout_ref.actor.optim.lr_warmup_steps") == -1);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio"), 0.0, 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.min_lr_ratio"), 0.0, 0);
    CHECK(vc_config_kind(c, "actor_rollout_ref.actor.optim.warmup_style") == VC_CFG_NULL);
    CHECK(str_is(c, "actor_rollout_ref.actor.optim.lr_scheduler_type", "constant"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.weight_decay"), 0.01, 0);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.betas[1]"), 0.999, 0);
    CHECK(geti(c, "actor_rollout_ref.actor.optim.total_training_steps") == -1);
    CHECK(getb(c, "actor_rollout_ref.actor.fsdp_config.param_offload") == 0);
    CHECK(str_is(c, "actor_rollout_ref.actor.checkpoint.save_contents[0]", "model"));
    CHECK(str_is(c, "actor_rollout_ref.rollout.name", "verlc"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.rollout.temperature"), 1.0, 0);
    CHECK(geti(c, "actor_rollout_ref.rollout.top_k") == -1);
    CHECK_NEAR(getd(c, "actor_rollout_ref.rollout.top_p"), 1.0, 0);
    CHECK(str_is(c, "actor_rollout_ref.rollout.dtype", "bfloat16"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.rollout.gpu_memory_utilization"), 0.5, 0);
    CHECK(geti(c, "actor_rollout_ref.rollout.n") == 1);
    CHECK(geti(c, "actor_rollout_ref.rollout.tensor_model_parallel_size") == 2);
    CHECK(getb(c, "actor_rollout_ref.rollout.do_sample") == 1);
    CHECK(geti(c, "actor_rollout_ref.rollout.max_num_batched_tokens") == 8192);
    CHECK_NEAR(getd(c, "actor_rollout_ref.rollout.val_kwargs.temperature"), 0.0, 0);
    CHECK(getb(c, "actor_rollout_ref.rollout.val_kwargs.do_sample") == 0);
    CHECK(geti(c, "actor_rollout_ref.rollout.val_kwargs.n") == 1);
    CHECK_NEAR(getd(c, "critic.optim.lr"), 1e-5, 0);
    CHECK_NEAR(getd(c, "critic.cliprange_value"), 0.5, 0);
    CHECK(geti(c, "critic.ppo_max_token_len_per_gpu") == 32768);
    CHECK(getb(c, "reward_model.enable") == 0);
    CHECK(vc_config_kind(c, "custom_reward_function.path") == VC_CFG_NULL);
    CHECK(str_is(c, "custom_reward_function.name", "compute_score"));
    CHECK_NEAR(getd(c, "algorithm.gamma"), 1.0, 0);
    CHECK_NEAR(getd(c, "algorithm.lam"), 1.0, 0);
    CHECK(str_is(c, "algorithm.adv_estimator", "gae"));
    CHECK(getb(c, "algorithm.norm_adv_by_std_in_grpo") == 1);
    CHECK(getb(c, "algorithm.use_kl_in_reward") == 0);
    CHECK(str_is(c, "algorithm.kl_penalty", "kl"));
    CHECK(str_is(c, "algorithm.kl_ctrl.type", "fixed"));
    CHECK_NEAR(getd(c, "algorithm.kl_ctrl.kl_coef"), 0.001, 0);
    CHECK(geti(c, "algorithm.kl_ctrl.horizon") == 10000);
    CHECK_NEAR(getd(c, "algorithm.kl_ctrl.target_kl"), 0.1, 0);
    CHECK(geti(c, "trainer.total_epochs") == 30);
    CHECK(vc_config_kind(c, "trainer.total_training_steps") == VC_CFG_NULL);
    CHECK(str_is(c, "trainer.project_name", "verl_examples"));
    CHECK(str_is(c, "trainer.experiment_name", "gsm8k"));
    size_t n = 0;
    CHECK_OK(vc_config_list_len(c, "trainer.logger", &n));
    CHECK(n == 2);
    CHECK(geti(c, "trainer.nnodes") == 1);
    CHECK(geti(c, "trainer.n_gpus_per_node") == 8);
    CHECK(geti(c, "trainer.save_freq") == -1);
    CHECK(geti(c, "trainer.test_freq") == -1);
    CHECK(getb(c, "trainer.val_before_train") == 1);
    CHECK(str_is(c, "trainer.resume_mode", "auto"));
    CHECK(geti(c, "trainer.critic_warmup") == 0);
    CHECK(str_is(c, "trainer.device", "auto")); /* verlc's default: cuda when a GPU is usable, else cpu */
    /* interpolations in verl's defaults */
    CHECK(str_is(c, "trainer.default_local_dir", "checkpoints/verl_examples/gsm8k"));
    CHECK(geti(c, "actor_rollout_ref.rollout.prompt_length") == 512);
    CHECK(geti(c, "actor_rollout_ref.rollout.response_length") == 512);
    CHECK(str_is(c, "actor_rollout_ref.ref.strategy", "fsdp"));
    CHECK(geti(c, "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu") == 16384);
    CHECK(geti(c, "critic.ppo_mini_batch_size") == 256);
    CHECK(vc_config_kind(c, "critic.ppo_micro_batch_size_per_gpu") == VC_CFG_NULL);
    CHECK(geti(c, "critic.forward_max_token_len_per_gpu") == 32768);
    CHECK(str_is(c, "critic.loss_agg_mode", "token-mean"));
    CHECK(str_is(c, "critic.model.tokenizer_path", "~/models/deepseek-llm-7b-chat"));
    CHECK(str_is(c, "reward_manager.name", "naive"));
    CHECK(geti(c, "reward_model.forward_max_token_len_per_gpu") == 32768);
    CHECK_OK(vc_config_list_len(c, "actor_rollout_ref.actor.checkpoint.load_contents", &n));
    CHECK(n == 3);
    CHECK(vc_config_kind(c, "actor_rollout_ref.rollout.profiler.tool_config") == VC_CFG_MAP);
    CHECK(vc_config_notice_count(c) == 0); /* defaults alone raise no notices */
    vc_config_free(c);
}

/* docs/start/quickstart.rst: PPO on GSM8K with Qwen2.5-0.5B-Instruct */
static char *PPO[] = {
    "data.train_files=$HOME/data/gsm8k/train.parquet", "data.val_files=$HOME/data/gsm8k/test.parquet",
    "data.train_batch_size=256", "data.max_prompt_length=512", "data.max_response_length=512",
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.actor.optim.lr=1e-6",
    "actor_rollout_ref.actor.ppo_mini_batch_size=64", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4", "critic.optim.lr=1e-5",
    "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct", "critic.ppo_micro_batch_size_per_gpu=4",
    "algorithm.kl_ctrl.kl_coef=0.001", "trainer.logger=console", "trainer.val_before_train=False",
    "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.save_freq=10", "trainer.test_freq=10",
    "trainer.total_epochs=15",
};

/* examples/grpo_trainer/run_qwen2-7b.sh (as the shell passes it) */
static char *GRPO[] = {
    "algorithm.adv_estimator=grpo", "data.train_files=/home/u/data/gsm8k/train.parquet",
    "data.val_files=/home/u/data/gsm8k/test.parquet", "data.train_batch_size=1024", "data.max_prompt_length=512",
    "data.max_response_length=1024", "data.filter_overlong_prompts=True", "data.truncation=error",
    "actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct", "actor_rollout_ref.actor.optim.lr=1e-6",
    "actor_rollout_ref.model.use_remove_padding=True", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40", "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.actor.kl_loss_coef=0.001", "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff=0", "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.actor.fsdp_config.param_offload=False", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.n=5", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40",
    "actor_rollout_ref.ref.fsdp_config.param_offload=True", "algorithm.use_kl_in_reward=False", "trainer.critic_warmup=0",
    "trainer.logger=[\"console\",\"wandb\"]", "trainer.project_name=verl_grpo_example_gsm8k",
    "trainer.experiment_name=qwen2_7b_function_rm", "trainer.n_gpus_per_node=8", "trainer.nnodes=1",
    "trainer.save_freq=20", "trainer.test_freq=5", "trainer.total_epochs=15",
};

/* examples/ppo_trainer/run_qwen2-7b_seq_balance.sh: file lists, dynamic batch sizes */
static char *SEQ_BALANCE[] = {
    "algorithm.adv_estimator=gae",
    "data.train_files=['/d/gsm8k/train.parquet', '/d/math/train.parquet']",
    "data.val_files=['/d/gsm8k/test.parquet', '/d/math/test.parquet']", "data.return_raw_chat=True",
    "data.train_batch_size=4096", "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000", "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.multi_turn.format=hermes", "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=24000",
    "critic.model.use_remove_padding=True", "critic.model.enable_gradient_checkpointing=True",
    "critic.ppo_max_token_len_per_gpu=98304", "critic.model.fsdp_config.optimizer_offload=False",
    "trainer.experiment_name=qwen2-7b_function_rm_bsz8k_p4k_r4k_seq_packing", "actor_rollout_ref.model.lora_rank=64",
    "actor_rollout_ref.model.lora_alpha=32", "actor_rollout_ref.rollout.load_format=safetensors",
    "actor_rollout_ref.rollout.layered_summon=True",
};

static int has_notice(vc_config *c, const char *needle) {
    for (size_t i = 0; i < vc_config_notice_count(c); i++)
        if (strstr(vc_config_notice(c, i), needle)) return 1;
    return 0;
}

static void test_quickstart_ppo(void) {
    vc_config *c;
    CHECK_OK(vc_config_load(NULL, (int)(sizeof PPO / sizeof PPO[0]), PPO, &c));
    if (!c) return;
    CHECK(str_is(c, "data.train_files", "$HOME/data/gsm8k/train.parquet"));
    size_t n;
    CHECK_OK(vc_config_list_len(c, "data.train_files", &n)); /* a string is a one-file list */
    CHECK(n == 1);
    CHECK(geti(c, "data.train_batch_size") == 256);
    CHECK(str_is(c, "actor_rollout_ref.model.path", "Qwen/Qwen2.5-0.5B-Instruct"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.lr"), 1e-6, 0);
    CHECK(geti(c, "actor_rollout_ref.actor.ppo_mini_batch_size") == 64);
    CHECK(geti(c, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == 4);
    CHECK(geti(c, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu") == 8);
    CHECK(geti(c, "actor_rollout_ref.rollout.tensor_model_parallel_size") == 1);
    CHECK_NEAR(getd(c, "actor_rollout_ref.rollout.gpu_memory_utilization"), 0.4, 0);
    CHECK(geti(c, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu") == 4);
    CHECK_NEAR(getd(c, "critic.optim.lr"), 1e-5, 0);
    CHECK(str_is(c, "critic.model.path", "Qwen/Qwen2.5-0.5B-Instruct"));
    CHECK(geti(c, "critic.ppo_micro_batch_size_per_gpu") == 4);
    CHECK(geti(c, "critic.forward_micro_batch_size_per_gpu") == 4); /* ${oc.select:.ppo_micro_batch_size_per_gpu} */
    CHECK(geti(c, "critic.ppo_mini_batch_size") == 64);              /* follows the actor */
    CHECK(str_is(c, "critic.model.tokenizer_path", "Qwen/Qwen2.5-0.5B-Instruct"));
    CHECK(str_is(c, "reward_model.model.input_tokenizer", "Qwen/Qwen2.5-0.5B-Instruct"));
    CHECK_NEAR(getd(c, "algorithm.kl_ctrl.kl_coef"), 0.001, 0);
    CHECK(str_is(c, "trainer.logger", "console"));
    CHECK(getb(c, "trainer.val_before_train") == 0);
    CHECK(geti(c, "trainer.n_gpus_per_node") == 1);
    CHECK(geti(c, "trainer.save_freq") == 10);
    CHECK(geti(c, "trainer.test_freq") == 10);
    CHECK(geti(c, "trainer.total_epochs") == 15);
    CHECK(geti(c, "actor_rollout_ref.rollout.prompt_length") == 512);
    CHECK(has_notice(c, "actor_rollout_ref.rollout.name=vllm"));
    CHECK(!has_notice(c, "trainer.logger"));
    /* the printed config parses back (a --print-config output can be fed to --config) */
    char *y = vc_config_to_yaml(c, NULL);
    vc_config *back = NULL;
    CHECK(y != NULL);
    if (y) CHECK_OK(vc_config_parse_yaml(y, strlen(y), "printed.yaml", &back));
    if (back) CHECK(vc_cfg_node_equal(c->root, back->root));
    vc_config_free(back);
    free(y);
    vc_config_free(c);
}

static void test_grpo(void) {
    vc_config *c;
    CHECK_OK(vc_config_load(NULL, (int)(sizeof GRPO / sizeof GRPO[0]), GRPO, &c));
    if (!c) return;
    CHECK(str_is(c, "algorithm.adv_estimator", "grpo"));
    CHECK(geti(c, "actor_rollout_ref.rollout.n") == 5);
    CHECK(geti(c, "actor_rollout_ref.actor.rollout_n") == 5); /* ${oc.select:actor_rollout_ref.rollout.n,1} */
    CHECK(getb(c, "actor_rollout_ref.actor.use_kl_loss") == 1);
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.kl_loss_coef"), 0.001, 0);
    CHECK(str_is(c, "actor_rollout_ref.actor.kl_loss_type", "low_var_kl"));
    CHECK_NEAR(getd(c, "actor_rollout_ref.actor.entropy_coeff"), 0, 0);
    CHECK(vc_config_kind(c, "actor_rollout_ref.actor.entropy_coeff") == VC_CFG_FLOAT);
    CHECK(getb(c, "data.filter_overlong_prompts") == 1);
    CHECK(geti(c, "actor_rollout_ref.rollout.response_length") == 1024);
    CHECK(str_is(c, "trainer.default_local_dir", "checkpoints/verl_grpo_example_gsm8k/qwen2_7b_function_rm"));
    size_t n;
    CHECK_OK(vc_config_list_len(c, "trainer.logger", &n));
    CHECK(n == 2);
    CHECK(has_notice(c, "'wandb' is ignored"));
    CHECK(has_notice(c, "actor_rollout_ref.ref.fsdp_config.param_offload=true"));
    /* re-stating a default (param_offload=False, use_remove_padding=True) is not worth a notice */
    CHECK(!has_notice(c, "actor_rollout_ref.actor.fsdp_config.param_offload"));
    CHECK(!has_notice(c, "actor_rollout_ref.model.use_remove_padding"));
    vc_config_free(c);
}

static void test_seq_balance(void) {
    vc_config *c;
    CHECK_OK(vc_config_load(NULL, (int)(sizeof SEQ_BALANCE / sizeof SEQ_BALANCE[0]), SEQ_BALANCE, &c));
    if (!c) return;
    size_t n = 0;
    const char *s = NULL;
    CHECK_OK(vc_config_list_len(c, "data.train_files", &n));
    CHECK(n == 2);
    CHECK_OK(vc_config_list_str(c, "data.val_files", 1, &s));
    CHECK(s && !strcmp(s, "/d/math/test.parquet"));
    CHECK(getb(c, "actor_rollout_ref.ref.log_prob_use_dynamic_bsz") == 1);
    CHECK(getb(c, "critic.use_dynamic_bsz") == 1);
    CHECK(getb(c, "reward_model.use_dynamic_bsz") == 1); /* ${critic.use_dynamic_bsz}, two hops */
    CHECK(geti(c, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu") == 24000);
    CHECK(geti(c, "critic.forward_max_token_len_per_gpu") == 98304);
    CHECK(geti(c, "actor_rollout_ref.model.lora_rank") == 64);
    vc_config_free(c);
}

static void test_errors(void) {
    vc_config *c = NULL;
    struct { const char *ov, *msg; } bad[] = {
        { "actor_rollout_ref.actor.optim.lrr=1e-6",
          "unknown key 'actor_rollout_ref.actor.optim.lrr' (did you mean 'actor_rollout_ref.actor.optim.lr'?)" },
        { "data.train_batch_sise=8", "did you mean 'data.train_batch_size'?" },
        { "actor_rollout_ref.ppo_mini_batch_size=8", "did you mean 'actor_rollout_ref.actor.ppo_mini_batch_size'?" },
        { "trainer.total_epoch=3", "did you mean 'trainer.total_epochs'?" },
        { "zzzz.qqqq=1", "unknown key 'zzzz.qqqq'" },
        { "data.train_batch_size=abc", "data.train_batch_size expects an integer, got 'abc'" },
        { "data.train_batch_size=1.5", "data.train_batch_size expects an integer" },
        { "data.train_batch_size=[1,2]", "expects an integer" },
        { "trainer.val_before_train=maybe", "trainer.val_before_train expects a boolean" },
        { "critic.ppo_micro_batch_size_per_gpu=x", "critic.ppo_micro_batch_size_per_gpu expects an integer" },
        { "actor_rollout_ref.rollout.prompt_length=abc", "prompt_length expects an integer" },
        { "data.val_batch_size=1.5", "data.val_batch_size expects an integer" },
        { "actor_rollout_ref.actor.optim.lr=fast", "actor_rollout_ref.actor.optim.lr expects a number" },
        { "algorithm.kl_ctrl=3", "algorithm.kl_ctrl expects a mapping" },
        { "data.train_files={a: 1}", "expects a string" },
        { "algorithm.kl_ctrl={kl_coeff: 1}", "did you mean 'algorithm.kl_ctrl.kl_coef'?" },
        { "algorithm.gamma.x=1", "'gamma' is not a mapping" },
        { "+data.train_batch_size=1", "already exists" },
        { "~data.nope", "unknown key 'data.nope'" },
        { "data.train_batch_size", "is not a key=value override" },
        { "actor_rollout_ref.rollout.prompt_length=${data.nope}", "no such key" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *argv[1] = { (char *)bad[k].ov };
        vc_status st = vc_config_load_argv(1, argv, NULL, &c);
        CHECK_MSG(st != VC_OK && c == NULL, "override %s should fail", bad[k].ov);
        CHECK(err_has(bad[k].msg));
    }
    /* fine: integral floats for ints, ints for floats, 0/1 for bools, null anywhere, +new keys, open maps */
    char *good[] = { "data.train_batch_size=256.0", "actor_rollout_ref.actor.optim.lr=1", "trainer.val_before_train=0",
                     "data.max_prompt_length=null", "+data.my_extra_key=hello",
                     "+actor_rollout_ref.model.override_config.attention_dropout=0.0",
                     "actor_rollout_ref.model.override_config.rope_theta=10000", "ray_init.num_cpus=4",
                     "actor_rollout_ref.actor.optim._target_=verl.workers.config.FSDPOptimizerConfig",
                     "trainer.experiment_name=123" };
    CHECK_OK(vc_config_load(NULL, (int)(sizeof good / sizeof good[0]), good, &c));
    if (c) {
        CHECK(vc_config_kind(c, "data.train_batch_size") == VC_CFG_INT);
        CHECK(str_is(c, "data.train_batch_size", "256"));
        CHECK(str_is(c, "actor_rollout_ref.actor.optim.lr", "1.0"));
        CHECK(vc_config_kind(c, "actor_rollout_ref.actor.optim.lr") == VC_CFG_FLOAT);
        CHECK(getb(c, "trainer.val_before_train") == 0);
        CHECK(vc_config_kind(c, "actor_rollout_ref.rollout.prompt_length") == VC_CFG_NULL);
        CHECK(str_is(c, "data.my_extra_key", "hello"));
        CHECK(geti(c, "actor_rollout_ref.model.override_config.rope_theta") == 10000);
        CHECK(geti(c, "ray_init.num_cpus") == 4);
        CHECK(has_notice(c, "ray_init.num_cpus"));
        CHECK(!vc_config_has(c, "actor_rollout_ref.actor.optim._target_"));
        CHECK(str_is(c, "trainer.experiment_name", "123"));
        CHECK(str_is(c, "trainer.default_local_dir", "checkpoints/verl_examples/123"));
        vc_config_free(c);
    }
}

static char *write_tmp(const char *tag, const char *text) {
    static char paths[4][128];
    static int k;
    char *p = paths[k++ % 4];
    snprintf(p, 128, "/tmp/vc_cfg_test_%d_%s.yaml", (int)getpid(), tag);
    FILE *f = fopen(p, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return p;
}

static void test_yaml_files(void) {
    const char *user =
        "# my run\n"
        "defaults:\n  - ppo_trainer\n  - _self_\n"
        "hydra:\n  searchpath: [file://verl/trainer/config]\n"
        "data:\n  train_files: [a.parquet, b.parquet]\n  train_batch_size: 32\n"
        "actor_rollout_ref:\n  actor:\n    optim:\n      _target_: verl.workers.config.FSDPOptimizerConfig\n"
        "      lr: 3e-6\n      betas: [0.8, 0.9]\n    fsdp_config:\n      param_offload: true\n"
        "  rollout:\n    n: 4\n"
        "algorithm:\n  adv_estimator: grpo\n"
        "trainer:\n  logger: [console, file]\n  project_name: p\n";
    char *path = write_tmp("user", user);
    char *ov[] = { "trainer.project_name=override_wins", "actor_rollout_ref.rollout.n=8" };
    vc_config *c = NULL;
    CHECK_OK(vc_config_load(path, 2, ov, &c));
    if (c) {
        size_t n;
        CHECK_OK(vc_config_list_len(c, "data.train_files", &n));
        CHECK(n == 2);
        CHECK(geti(c, "data.train_batch_size") == 32);
        CHECK(geti(c, "data.max_prompt_length") == 512); /* untouched keys keep defaults */
        CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.lr"), 3e-6, 0);
        CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.weight_decay"), 0.01, 0);
        CHECK_NEAR(getd(c, "actor_rollout_ref.actor.optim.betas[0]"), 0.8, 0);
        CHECK(getb(c, "actor_rollout_ref.actor.fsdp_config.param_offload") == 1);
        CHECK(geti(c, "actor_rollout_ref.rollout.n") == 8);
        CHECK(str_is(c, "algorithm.adv_estimator", "grpo"));
        CHECK(str_is(c, "trainer.project_name", "override_wins"));
        CHECK(str_is(c, "trainer.default_local_dir", "checkpoints/override_wins/gsm8k"));
        CHECK(!vc_config_has(c, "defaults") && !vc_config_has(c, "hydra"));
        CHECK(has_notice(c, "fsdp_config.param_offload"));
        CHECK(!has_notice(c, "trainer.logger"));
        vc_config_free(c);
    }
    struct { const char *text, *msg; } bad[] = {
        { "data:\n  train_batch_size: 8\n  max_prompt_lenght: 9\n", ":3: unknown key 'data.max_prompt_lenght' (did you mean 'data.max_prompt_length'?)" },
        { "data:\n  train_batch_size: eight\n", ":2: data.train_batch_size expects an integer, got 'eight'" },
        { "data:\n  train_batch_size: 8\n   bad_indent: 1\n", ":3: YAML error" },
        { "data: [unclosed\n\nfoo: 1\n", "YAML error" },
        { "data:\n  seed: 1\n  seed: 2\n", ":3: duplicate key 'seed'" },
        { "- a\n- b\n", "top level must be a mapping" },
        { "trainer:\n  logger: {a: 1}\n", ":2: trainer.logger expects a list" },
        { "a: *nope\n", ":1: unknown alias" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        path = write_tmp("bad", bad[k].text);
        c = NULL;
        CHECK_MSG(vc_config_load(path, 0, NULL, &c) != VC_OK, "case %zu", k);
        CHECK(c == NULL);
        CHECK(err_has(path));
        CHECK(err_has(bad[k].msg));
    }
    CHECK(vc_config_load("/nonexistent/x.yaml", 0, NULL, &c) == VC_ERR_IO);
    CHECK(err_has("/nonexistent/x.yaml"));
    char p[160];
    snprintf(p, sizeof p, "/tmp/vc_cfg_test_%d_user.yaml", (int)getpid());
    unlink(p);
    snprintf(p, sizeof p, "/tmp/vc_cfg_test_%d_bad.yaml", (int)getpid());
    unlink(p);
}

static void put_file(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *slash = strrchr(p, '/');
    *slash = 0;
    mkdir(p, 0755);
    *slash = '/';
    FILE *f = fopen(p, "w");
    if (f) { fputs(text, f); fclose(f); }
}

/* Hydra defaults lists: files, groups at their package, _self_'s place, searchpath, errors */
static void test_defaults_lists(void) {
    char dir[128], more[160], path[256];
    snprintf(dir, sizeof dir, "/tmp/vc_cfg_defaults_%d", (int)getpid());
    snprintf(more, sizeof more, "%s/more", dir);
    mkdir(dir, 0755);
    mkdir(more, 0755);
    put_file(dir, "base.yaml", "data:\n  train_batch_size: 64\ntrainer:\n  total_epochs: 1\n");
    put_file(dir, "actor_tweaks/fast.yaml", "ppo_mini_batch_size: 8\nclip_ratio: 0.3\n");
    put_file(more, "far.yaml", "data:\n  max_prompt_length: 333\n");
    put_file(dir, "main.yaml",
             "hydra:\n  searchpath: [file:///nonexistent/verl/trainer/config, file:///tmp/vc_cfg_defaults_PID/more]\n"
             "defaults:\n  - ppo_trainer\n  - base\n  - actor_tweaks@actor_rollout_ref.actor: fast\n"
             "  - optional nope: x\n  - override actor@actor_rollout_ref.actor: dp_actor\n  - far\n"
             "  - _self_\ntrainer:\n  total_epochs: 3\n");
    /* the searchpath names this process's folder */
    snprintf(path, sizeof path, "%s/main.yaml", dir);
    char *text = NULL;
    size_t len;
    CHECK_OK(vc_read_file(path, &text, &len));
    if (text) {
        char pid[16], fixed[2048];
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        char *at = strstr(text, "PID");
        snprintf(fixed, sizeof fixed, "%.*s%s%s", (int)(at - text), text, pid, at + 3);
        put_file(dir, "main.yaml", fixed);
        free(text);
    }
    vc_config *c = NULL;
    CHECK_OK(vc_config_load(path, 0, NULL, &c));
    if (c) {
        CHECK(geti(c, "trainer.total_epochs") == 3);     /* _self_ last: the file's own keys win */
        CHECK(geti(c, "data.train_batch_size") == 64);   /* from base.yaml */
        CHECK(geti(c, "actor_rollout_ref.actor.ppo_mini_batch_size") == 8); /* group at its package */
        CHECK_NEAR(getd(c, "actor_rollout_ref.actor.clip_ratio"), 0.3, 0);
        CHECK(geti(c, "data.max_prompt_length") == 333); /* found through hydra.searchpath */
        CHECK(has_notice(c, "actor@actor_rollout_ref.actor: dp_actor")); /* verl's built-in group */
        CHECK(!has_notice(c, "nope"));                  /* optional and absent: silent */
        vc_config_free(c);
    }
    /* _self_ first: what follows overrides the file's own keys */
    put_file(dir, "selffirst.yaml", "defaults:\n  - _self_\n  - base\ntrainer:\n  total_epochs: 3\n");
    snprintf(path, sizeof path, "%s/selffirst.yaml", dir);
    CHECK_OK(vc_config_load(path, 0, NULL, &c));
    if (c) {
        CHECK(geti(c, "trainer.total_epochs") == 1);
        vc_config_free(c);
    }
    struct { const char *name, *text, *msg1, *msg2; } bad[] = {
        { "nofile.yaml", "defaults:\n  - missing_one\n", "nofile.yaml", "'missing_one'" },
        { "noopt.yaml", "defaults:\n  - actor_tweaks@actor_rollout_ref.actor: slow\n", "noopt.yaml", "actor_tweaks/slow" },
        { "cycle.yaml", "defaults:\n  - cycle\n", "cycle.yaml", "nest" },
        { "pkg.yaml", "defaults:\n  - actor_tweaks@no_such.section: fast\n", "fast.yaml", "no_such.section" },
        { "shape.yaml", "defaults:\n  - {a: b, c: d}\n", "shape.yaml", "one 'group: option'" },
        { "typo.yaml", "defaults:\n  - base\ndata:\n  train_batch_sise: 1\n", "typo.yaml:4", "train_batch_size" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        put_file(dir, bad[k].name, bad[k].text);
        snprintf(path, sizeof path, "%s/%s", dir, bad[k].name);
        c = NULL;
        CHECK_MSG(vc_config_load(path, 0, NULL, &c) != VC_OK && c == NULL, "%s", bad[k].name);
        CHECK_MSG(err_has(bad[k].msg1) && err_has(bad[k].msg2), "%s: %s", bad[k].name, vc_last_error());
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* --print-config output fed back as --config gives the same config, with no notices beyond the one
 * for verl's own default logger list (wandb). */
static void test_print_config_fixpoint(void) {
    vc_config *a = NULL, *b = NULL;
    char *ov[] = { "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=4", "data.train_files=[x, y]" };
    CHECK_OK(vc_config_load(NULL, 3, ov, &a));
    char *y = a ? vc_config_to_yaml(a, NULL) : NULL;
    char *path = y ? write_tmp("fix", y) : NULL;
    CHECK(path != NULL);
    if (path) CHECK_OK(vc_config_load(path, 0, NULL, &b));
    if (a && b) {
        CHECK(vc_cfg_node_equal(a->root, b->root));
        CHECK(vc_config_notice_count(b) == 1);
        CHECK(has_notice(b, "'wandb' is ignored"));
    }
    free(y);
    if (path) unlink(path);
    vc_config_free(a);
    vc_config_free(b);
}

static void test_argv(void) {
    char *path = write_tmp("argv", "data:\n  train_batch_size: 12\n");
    char dir[128], name[64];
    snprintf(dir, sizeof dir, "/tmp");
    snprintf(name, sizeof name, "vc_cfg_test_%d_argv", (int)getpid());
    vc_config *c = NULL;
    int print = 0;
    char *a1[] = { "--config", path, "--print-config", "trainer.nnodes=2" };
    CHECK_OK(vc_config_load_argv(4, a1, &print, &c));
    CHECK(print == 1);
    if (c) { CHECK(geti(c, "data.train_batch_size") == 12); CHECK(geti(c, "trainer.nnodes") == 2); }
    vc_config_free(c);
    char opt[200];
    snprintf(opt, sizeof opt, "--config=%s", path);
    char *a2[] = { opt };
    CHECK_OK(vc_config_load_argv(1, a2, &print, &c));
    CHECK(print == 0);
    vc_config_free(c);
    char *a3[] = { "--config-path", dir, "--config-name", name, "data.seed=3" };
    CHECK_OK(vc_config_load_argv(5, a3, NULL, &c));
    if (c) { CHECK(geti(c, "data.train_batch_size") == 12); CHECK(geti(c, "data.seed") == 3); }
    vc_config_free(c);
    char *a4[] = { "--config-name=ppo_trainer" };
    CHECK_OK(vc_config_load_argv(1, a4, NULL, &c));
    vc_config_free(c);
    char *a5[] = { "--frobnicate" };
    CHECK(vc_config_load_argv(1, a5, NULL, &c) == VC_ERR_ARG);
    CHECK(err_has("unknown option '--frobnicate'"));
    char *a6[] = { "--config" };
    CHECK(vc_config_load_argv(1, a6, NULL, &c) == VC_ERR_ARG);
    unlink(path);
}

/* `-m MODULE` (verl's python3 -m MODULE): recipe.dapo.main_dapo's @hydra.main defaults read from the module file as
 * python -m finds it, a relative --config-path taken from the module's directory (Hydra's rule), verl.trainer.main_ppo
 * on the built-in defaults; other modules (their own trainers) and Hydra's multirun refused by name */
static void test_module(void) {
    char root[128], p[300], cwd[512];
    snprintf(root, sizeof root, "/tmp/vc_cfg_module_%d", (int)getpid());
    snprintf(p, sizeof p, "mkdir -p %s/recipe/dapo/config %s/recipe/dapo/other", root, root);
    CHECK(system(p) == 0);
    snprintf(p, sizeof p, "%s/recipe/dapo/main_dapo.py", root);
    const char *py = "import hydra\n\n@hydra.main(config_path=\"config\", config_name=\"dapo_trainer\", version_base=None)\n"
                     "def main(config):\n    pass\n";
    CHECK_OK(vc_write_file_atomic(p, py, strlen(py)));
    const char *yml = "defaults:\n  - ppo_trainer\n  - _self_\ndata:\n  gen_batch_size: 7\n";
    snprintf(p, sizeof p, "%s/recipe/dapo/config/dapo_trainer.yaml", root);
    CHECK_OK(vc_write_file_atomic(p, yml, strlen(yml)));
    snprintf(p, sizeof p, "%s/recipe/dapo/other/mine.yaml", root);
    const char *mine = "defaults:\n  - ppo_trainer\n  - _self_\ndata:\n  gen_batch_size: 9\n";
    CHECK_OK(vc_write_file_atomic(p, mine, strlen(mine)));
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(root) == 0);
    vc_config *c = NULL;
    char *a1[] = { "-m", "recipe.dapo.main_dapo", "data.train_batch_size=3" };
    CHECK_OK(vc_config_load_argv(3, a1, NULL, &c));
    if (c) { CHECK(geti(c, "data.gen_batch_size") == 7); CHECK(geti(c, "data.train_batch_size") == 3); }
    vc_config_free(c);
    char *a2[] = { "-m", "recipe.dapo.main_dapo", "--config-path=other", "--config-name", "mine" };
    CHECK_OK(vc_config_load_argv(5, a2, NULL, &c));
    if (c) CHECK(geti(c, "data.gen_batch_size") == 9);
    vc_config_free(c);
    char *a3[] = { "--module", "verl.trainer.main_ppo", "--config-path=config", "--config-name=ppo_trainer" };
    CHECK_OK(vc_config_load_argv(4, a3, NULL, &c));
    vc_config_free(c);
    char *a4[] = { "-m", "recipe.gvpo.gvpo_main_ppo" };
    CHECK(vc_config_load_argv(2, a4, NULL, &c) == VC_ERR_UNSUPPORTED && err_has("recipe.gvpo.gvpo_main_ppo"));
    char *a7[] = { "-m", "--print-config" };
    CHECK(vc_config_load_argv(2, a7, NULL, &c) == VC_ERR_ARG && err_has("-m needs a module name"));
    char *a5[] = { "-m", "data.seed=1,2" };
    CHECK(vc_config_load_argv(2, a5, NULL, &c) == VC_ERR_UNSUPPORTED && err_has("multirun"));
    CHECK(chdir(cwd) == 0); /* (no recipe/ here) */
    char *a6[] = { "-m", "recipe.dapo.main_dapo" };
    CHECK(vc_config_load_argv(2, a6, NULL, &c) == VC_ERR_IO && err_has("recipe/dapo/main_dapo.py"));
    snprintf(p, sizeof p, "rm -rf %s", root);
    CHECK(system(p) == 0);
}

int main(void) {
    test_defaults();
    test_quickstart_ppo();
    test_grpo();
    test_seq_balance();
    test_errors();
    test_yaml_files();
    test_defaults_lists();
    test_print_config_fixpoint();
    test_argv();
    test_module();
    return vc_test_done();
}
