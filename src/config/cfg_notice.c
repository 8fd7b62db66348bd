/* Keys that name Python-only machinery in verl (Ray, FSDP/Megatron, vLLM/SGLang, torch profilers...).
 * verlc accepts them so that verl command lines run unchanged, and says once per key that they have no
 * effect. Patterns are dotted paths where `*` matches one segment and `**` any number (also none). */
#include "config/cfg_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    N_ACCEPT_UNKNOWN = 1, /* accept the key even if verl's defaults (as embedded) lack it */
    N_DROP = 2,           /* do not store the value */
    N_SILENT = 4,         /* no notice */
};

struct notice_rule {
    const char *pattern;
    const char *quiet;  /* comma-separated values that need no notice (verlc's own behaviour) */
    int flags;
    const char *reason;
};

static const char R_ENGINE[] = "verlc generates with its built-in engine (paged KV cache, shared weights), not vLLM/SGLang";
static const char R_FSDP[] = "verlc shards with its own data-parallel trainer (MPI/NCCL), not FSDP/Megatron/VeOmni";
static const char R_RAY[] = "verlc runs without Ray";
static const char R_TORCH[] = "verlc uses its own fused kernels; torch.compile/Liger/flash-attn options do not apply";
static const char R_PROF[] = "Python profilers are not available; verlc reports its own timing/* metrics";
static const char R_PY[] = "a Python data-loader option";
static const char R_DP[] = "every rank is a data-parallel rank of verlc's own trainer (no model parallelism)";

static const struct notice_rule RULES[] = {
    { "**._target_", NULL, N_ACCEPT_UNKNOWN | N_DROP | N_SILENT, "" },
    { "defaults", NULL, N_ACCEPT_UNKNOWN | N_DROP, "a defaults list composes only at the top of a YAML file" },
    { "hydra.**", NULL, N_ACCEPT_UNKNOWN | N_DROP, "Hydra runtime settings do not apply" },
    { "actor_rollout_ref.rollout.name", "verlc,native,hf", 0, R_ENGINE },
    { "reward_model.rollout.name", "verlc,native,hf", 0, R_ENGINE },
    { "actor_rollout_ref.rollout.mode", "async,sync", 0, R_ENGINE },
    { "**.engine_kwargs.**", NULL, N_ACCEPT_UNKNOWN, R_ENGINE },
    { "**.rollout.enforce_eager", NULL, 0, R_ENGINE },
    { "**.rollout.free_cache_engine", NULL, 0, R_ENGINE },
    { "**.rollout.load_format", NULL, 0, R_ENGINE },
    { "**.rollout.cudagraph_capture_sizes", NULL, 0, R_ENGINE },
    { "**.rollout.disable_log_stats", NULL, 0, R_ENGINE },
    { "**.rollout.skip_tokenizer_init", NULL, 0, R_ENGINE },
    { "**.rollout.layered_summon", NULL, 0, R_ENGINE },
    { "**.rollout.multi_stage_wake_up", NULL, 0, R_ENGINE },
    { "**.rollout.enable_chunked_prefill", NULL, 0, R_ENGINE },
    { "**.rollout.scheduling_policy", NULL, 0, R_ENGINE },
    { "**.rollout.agent.agent_loop_config_path", NULL, 0, "custom agent loops are Python classes; verlc runs "
                                                         "single_turn_agent and tool_agent" },
    { "**.rollout.quantization", NULL, 0, "the rollout runs in the training precision (no FP8 rollout)" },
    { "**.rollout.over_sample_rate", "0,0.0", 0, "every request of a step is generated to the end" },
    { "**.rollout.checkpoint_engine.**", NULL, 0, "verlc shares weight buffers between trainer and rollout; no weight sync" },
    { "**.rollout.prometheus.**", NULL, 0, R_RAY },
    { "**.rollout.trace.**", NULL, 0, R_RAY },
    { "*.strategy", "fsdp,fsdp2,megatron,veomni,mlite,verlc", 0, R_FSDP },
    { "*.*.strategy", "fsdp,fsdp2,megatron,veomni,mlite,verlc", 0, R_FSDP },
    { "**.fsdp_config.mixed_precision.**", NULL, N_ACCEPT_UNKNOWN | N_SILENT, "" }, /* honoured: the matmul precision */
    { "actor_rollout_ref.actor.fsdp_config.qat.**", NULL, N_SILENT, "" }, /* honoured: src/train/qat_config.c */
    { "**.fsdp_config.**", NULL, N_ACCEPT_UNKNOWN, R_FSDP },
    /* honoured under the megatron strategy: the matmul precision and full recomputation (checkpointing) */
    { "**.megatron.dtype", NULL, N_SILENT, "" },
    /* later verl's engine key for router replay: read */
    { "actor_rollout_ref.actor.megatron.router_replay.mode", NULL, N_SILENT | N_ACCEPT_UNKNOWN, "" },
    { "**.megatron.override_transformer_config.recompute_granularity", "full", 0,
      "verlc recomputes whole layers (full); selective recomputation is not built in" },
    { "**.megatron.**", NULL, N_ACCEPT_UNKNOWN, R_FSDP },
    /* the veomni engine's settings: its router replay read, its kernels and sharding noticed (its keys are fixed:
     * a misspelt one is refused, as verl refuses it) */
    { "actor_rollout_ref.actor.veomni.router_replay.mode", NULL, N_SILENT, "" },
    { "**.veomni.mixed_precision", NULL, N_SILENT, "" }, /* the matmul precision is the trainer's */
    { "**.veomni.**", NULL, 0, R_FSDP },
    /* Megatron-lite's actor engine (mlite_actor): the matmul precision and full recomputation read, the rest noticed */
    { "actor_rollout_ref.actor.engine.dtype", NULL, N_SILENT, "" },
    { "actor_rollout_ref.actor.engine.impl_cfg.recompute", NULL, N_ACCEPT_UNKNOWN | N_SILENT, "" },
    { "actor_rollout_ref.actor.engine.impl_cfg.**", NULL, N_ACCEPT_UNKNOWN, R_FSDP },
    { "actor_rollout_ref.actor.engine.tp", "1", 0, R_DP },
    { "actor_rollout_ref.actor.engine.pp", "1", 0, R_DP },
    { "actor_rollout_ref.actor.engine.vpp", "1,null", 0, R_DP },
    { "actor_rollout_ref.actor.engine.ep", "1", 0, R_DP },
    { "actor_rollout_ref.actor.engine.cp", "1", 0, R_DP },
    { "actor_rollout_ref.actor.engine.etp", "1,null", 0, R_DP },
    { "actor_rollout_ref.actor.engine.**", NULL, 0, R_FSDP },
    /* verlc's own data-parallel sharding of the actor / critic optimiser state (src/rl/trainer_dist.c) */
    { "actor_rollout_ref.actor.zero_stage", NULL, N_ACCEPT_UNKNOWN | N_SILENT, NULL },
    { "critic.zero_stage", NULL, N_ACCEPT_UNKNOWN | N_SILENT, NULL },
    { "actor_rollout_ref.actor.overlap_grad_reduce", NULL, N_ACCEPT_UNKNOWN | N_SILENT, NULL },
    { "critic.overlap_grad_reduce", NULL, N_ACCEPT_UNKNOWN | N_SILENT, NULL },
    { "reward.num_workers", NULL, 0, R_RAY },
    { "reward.reward_model.enable_resource_pool", NULL, 0, R_RAY },
    { "reward.reward_model.n_gpus_per_node", NULL, 0, R_RAY },
    { "reward.reward_model.nnodes", NULL, 0, R_RAY },
    { "reward.reward_model.rollout.**", NULL, N_ACCEPT_UNKNOWN, R_ENGINE },
    { "reward.reward_kwargs.**", NULL, N_ACCEPT_UNKNOWN | N_SILENT, "" }, /* honoured: reward_model.reward_kwargs */
    /* honoured: the code data sources' reward (src/rl/sandbox.c) */
    { "reward_model.sandbox_fusion.**", NULL, N_SILENT, "" },
    { "reward.sandbox_fusion.**", NULL, N_SILENT, "" },
    { "**.sandbox_fusion.**", NULL, 0, "verlc's Sandbox Fusion client is the reward's (reward_model.sandbox_fusion.*); "
                                       "tools that run code in a sandbox are verl's Python" },
    { "ray_kwargs.**", NULL, N_ACCEPT_UNKNOWN, R_RAY },
    { "ray_init.**", NULL, N_ACCEPT_UNKNOWN, R_RAY },
    { "transfer_queue.**", NULL, 0, R_RAY },
    { "trainer.ray_wait_register_center_timeout", NULL, 0, R_RAY },
    { "trainer.use_legacy_worker_impl", NULL, N_SILENT, "" }, /* honoured: the legacy workers' loss normalisation */
    { "trainer.default_hdfs_dir", NULL, 0, "HDFS upload is not built in; checkpoints stay in trainer.default_local_dir" },
    { "trainer.esi_redundant_time", NULL, 0, R_RAY },
    { "actor_rollout_ref.hybrid_engine", "true", 0, "verlc always shares actor and rollout weights" },
    { "trainer.logger", "console,file,tensorboard", 0, "only the console, file (JSONL) and tensorboard loggers are built in" },
    { "**.use_remove_padding", NULL, 0, "verlc always packs sequences without padding" },
    { "**.use_torch_compile", NULL, 0, R_TORCH },
    { "**.use_liger", NULL, 0, R_TORCH },
    { "**.use_fused_kernels", NULL, 0, R_TORCH },
    { "**.fused_kernel_options.**", NULL, 0, R_TORCH },
    { "**.entropy_from_logits_with_chunking", NULL, 0, R_TORCH },
    { "**.entropy_checkpointing", NULL, 0, R_TORCH },
    { "**.ulysses_sequence_parallel_size", "1", 0, "sequence parallelism is not implemented" },
    { "**.enable_activation_offload", "false", 0, "activation offload is not implemented" },
    { "**.use_shm", "false", 0, R_PY },
    { "**.trust_remote_code", NULL, 0, "verlc reads remote-code layouts natively and never runs model Python code" },
    { "**.external_lib", NULL, 0, "no Python libraries are imported" },
    { "data.filter_overlong_prompts_workers", NULL, 0, R_PY },
    { "data.custom_cls.**", NULL, 0, "custom Python dataset classes cannot be loaded" },
    { "data.sampler.**", NULL, 0, "custom Python samplers cannot be loaded" },
    { "data.datagen.**", NULL, 0, "custom Python data generators cannot be loaded" },
    { "**.profiler.**", NULL, 0, R_PROF },
    { "global_profiler.**", NULL, 0, R_PROF },
    { "**.nccl_timeout", NULL, 0, R_RAY },
};

/* Matches dotted segments; `**` eats zero or more segments, `*` exactly one. */
int vc_cfg_path_match(const char *pat, const char *path) {
    if (!*pat) return !*path;
    if (!strncmp(pat, "**", 2)) {
        const char *prest = pat[2] == '.' ? pat + 3 : pat + 2;
        if (vc_cfg_path_match(prest, path)) return 1;
        for (const char *p = path; *p; p++)
            if (*p == '.' && vc_cfg_path_match(prest, p + 1)) return 1;
        return !*prest && *path;
    }
    size_t pl = strcspn(pat, "."), sl = strcspn(path, ".");
    if (!(pl == 1 && pat[0] == '*') && (pl != sl || strncmp(pat, path, pl))) return 0;
    if (!sl) return 0;
    pat += pl;
    path += sl;
    if (!*path) return !*pat || !strcmp(pat, ".**");
    if (!*pat) return 0;
    return vc_cfg_path_match(pat + 1, path + 1);
}

void vc_cfg_add_notice(vc_config *cfg, const char *fmt, ...) {
    char buf[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < cfg->n_notices; i++)
        if (!strcmp(cfg->notices[i], buf)) return;
    if (cfg->n_notices == cfg->cap_notices) {
        size_t cap = cfg->cap_notices ? cfg->cap_notices * 2 : 8;
        char **n = realloc(cfg->notices, cap * sizeof *n);
        if (!n) return;
        cfg->notices = n;
        cfg->cap_notices = cap;
    }
    if (!(cfg->notices[cfg->n_notices] = vc_strdup(buf))) return;
    cfg->n_notices++;
    if (!cfg->quiet) vc_info("verlc: note: %s", buf); /* VERLC_LOG=warn silences notices */
}

static int is_quiet_value(const char *quiet, const char *v) {
    size_t vl = strlen(v);
    for (const char *q = quiet; q && *q;) {
        size_t ql = strcspn(q, ",");
        if (ql == vl && !strncasecmp(q, v, ql)) return 1;
        q += ql + (q[ql] == ',');
    }
    return 0;
}

static const char *scalar_text(const vc_cfg_node *v, char *buf, size_t n) {
    switch (v->kind) {
    case VC_CFG_NULL: return "null";
    case VC_CFG_BOOL: return v->b ? "true" : "false";
    case VC_CFG_INT: snprintf(buf, n, "%lld", (long long)v->i); return buf;
    case VC_CFG_FLOAT: vc_cfg_format_float(v->f, buf, n); return buf;
    case VC_CFG_STR: return v->s;
    case VC_CFG_LIST: return "[...]";
    case VC_CFG_MAP: return "{...}";
    default: return "???";
    }
}

/* later verl's switches for features verlc does not have: on, they stop the run */
static const struct { const char *key, *what; } LATER_FEATURES[] = {
    { "skip.rollout_tq.enable", "rollout dumps replayed in place of generation" },
    { "skip.async_rollout.enable", "rollout dumps replayed in place of generation" },
    { "critic.fsdp.qat.enable", "quantization-aware training of the critic" },
    { "actor_rollout_ref.actor.megatron.qat.enable", "Megatron's quantization-aware training (ModelOpt's NVFP4; "
                                                      "the FSDP engine's actor_rollout_ref.actor.fsdp_config.qat is built)" },
};

vc_status vc_cfg_later_check(const vc_config *cfg) {
    int on = 0; /* (verl's ActorConfig carries actor.qat, but its engines read fsdp_config.qat: QAT would not run) */
    if (vc_config_has(cfg, "actor_rollout_ref.actor.qat.enable") &&
        !vc_config_get_bool_or(cfg, "actor_rollout_ref.actor.qat.enable", 0, &on) && on)
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.qat.enable=true: verl's engine reads QAT from "
                       "actor_rollout_ref.actor.fsdp_config.qat (this one turns nothing on there); set that one");
    for (size_t i = 0; i < sizeof LATER_FEATURES / sizeof LATER_FEATURES[0]; i++) {
        int on = 0;
        if (vc_config_has(cfg, LATER_FEATURES[i].key) && !vc_config_get_bool_or(cfg, LATER_FEATURES[i].key, 0, &on) && on)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s=true: %s (a feature of verl's later versions) is not built in",
                           LATER_FEATURES[i].key, LATER_FEATURES[i].what);
    }
    const char *mode = NULL; /* the v1 trainer's asynchronous modes */
    if (vc_config_has(cfg, "trainer.v1.trainer_mode") && !vc_config_get_str_or(cfg, "trainer.v1.trainer_mode", "sync", &mode) &&
        mode && strcmp(mode, "sync"))
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer.v1.trainer_mode=%s: verlc trains synchronously (each step rolls out "
                       "with the weights it then updates); verl's asynchronous modes are not built in", mode);
    return VC_OK;
}

/* a key under one of the FSDP engine's keys the veomni engine's groups do not have (vc_cfg_veomni_removed): no rule
 * accepts it there (the fsdp_config rule would), so it is refused, as verl refuses it */
static int veomni_removed(const vc_config *cfg, const char *path) {
    for (size_t i = 0; cfg->engine == VC_ENGINE_VEOMNI && vc_cfg_veomni_removed[i]; i++) {
        size_t n = strlen(vc_cfg_veomni_removed[i]);
        if (!strncmp(path, vc_cfg_veomni_removed[i], n) && (path[n] == '.' || !path[n])) return 1;
    }
    return 0;
}

int vc_cfg_notice_check(vc_config *cfg, const char *path, const vc_cfg_node *val, int emit, int changed, int *ignore) {
    *ignore = 0;
    if (veomni_removed(cfg, path)) return 0;
    int later = cfg->later && vc_cfg_lookup(cfg->later, path) != NULL;
    for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++) {
        const struct notice_rule *rule = &RULES[r];
        if (!vc_cfg_path_match(rule->pattern, path)) continue;
        *ignore = !!(rule->flags & N_DROP);
        if ((rule->flags & N_SILENT) || !emit || (!changed && !rule->quiet)) return !!(rule->flags & N_ACCEPT_UNKNOWN);
        char buf[64];
        if (val && val->kind == VC_CFG_LIST && rule->quiet) { /* e.g. trainer.logger=[console,wandb] */
            for (size_t i = 0; i < val->n; i++) {
                const char *t = scalar_text(val->items[i], buf, sizeof buf);
                if (!is_quiet_value(rule->quiet, t))
                    vc_cfg_add_notice(cfg, "%s: '%s' is ignored: %s", path, t, rule->reason);
            }
        } else {
            const char *t = val ? scalar_text(val, buf, sizeof buf) : "null";
            if (val && val->kind != VC_CFG_NULL && !is_quiet_value(rule->quiet, t))
                vc_cfg_add_notice(cfg, "%s=%s is ignored: %s", path, t, rule->reason);
        }
        return !!(rule->flags & N_ACCEPT_UNKNOWN);
    }
    if (later && emit && changed && val && val->kind != VC_CFG_MAP) {
        int feature = 0;
        for (size_t i = 0; i < sizeof LATER_FEATURES / sizeof LATER_FEATURES[0]; i++)
            feature |= !strcmp(path, LATER_FEATURES[i].key);
        char buf[64];
        if (!feature)
            vc_cfg_add_notice(cfg, "%s=%s is ignored: a key of verl's later configuration that verlc does not read", path,
                              scalar_text(val, buf, sizeof buf));
    }
    return 0;
}
