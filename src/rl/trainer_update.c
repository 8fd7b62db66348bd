/* Actor and critic updates (verl's DataParallelPPOActor.update_policy / DataParallelPPOCritic.update_critic)
 * on the training core: ppo_epochs x mini-batches, each one vc_trainer_step (train.h: micro-batches by
 * count or token budget, gradient accumulation, clipping, skip on non-finite, AdamW, LR schedule). The
 * PPO losses enter through the step's loss callback: each micro-batch's rows are gathered into [n, T]
 * response arrays, rl.h's losses (aggregated with the mini-batch's global normalisers, so the summed
 * micro-batch gradients equal the mini-batch gradient) give d loss / d log-prob (and d / d entropy),
 * applied as constant per-token weights on the log-prob and entropy tensors (dot products). The critic
 * gets the final hidden states (loss_on_hidden) and applies its value head in the callback. */
#include "trainer_internal.h"
#include "verlc/ops.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- optimiser ---- */
/* verl builds <prefix>.optim.optimizer from optimizer_impl with lr, weight_decay, betas and
 * override_optimizer_config as keyword arguments; verlc's is torch.optim.AdamW (fused): other optimizers
 * are refused by name, and of the overrides, eps, betas and weight_decay are honoured, foreach / fused /
 * capturable / differentiable (how torch runs the same update) accepted, anything else refused. */
static vc_status optimizer_from_cfg(const vc_config *cfg, const char *prefix, vc_adamw_config *a) {
    char k[200];
    const char *name = "AdamW", *impl = "torch.optim";
    snprintf(k, sizeof k, "%s.optim.optimizer", prefix);
    vc_status st = vc_config_get_str_or(cfg, k, "AdamW", &name);
    if (!st && strcmp(name, "AdamW") && strcmp(name, "adamw"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: `%s` is not built in (verlc trains with AdamW, fused)", k, name);
    snprintf(k, sizeof k, "%s.optim.optimizer_impl", prefix);
    if (!st) st = vc_config_get_str_or(cfg, k, "torch.optim", &impl);
    if (!st && strcmp(impl, "torch.optim"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: `%s` is not built in (verlc's AdamW is torch.optim.AdamW's update)", k,
                       impl);
    char o[200];
    snprintf(o, sizeof o, "%s.optim.override_optimizer_config", prefix);
    if (st || vc_config_kind(cfg, o) != VC_CFG_MAP) return st;
    size_t n = 0;
    if ((st = vc_config_map_len(cfg, o, &n))) return st;
    for (size_t i = 0; i < n && !st; i++) {
        const char *key = NULL;
        if ((st = vc_config_map_key(cfg, o, i, &key))) break;
        snprintf(k, sizeof k, "%s.%s", o, key);
        if (!strcmp(key, "eps")) st = vc_config_get_double(cfg, k, &a->eps);
        else if (!strcmp(key, "weight_decay")) st = vc_config_get_double(cfg, k, &a->weight_decay);
        else if (!strcmp(key, "betas")) {
            snprintf(k, sizeof k, "%s.betas", o);
            st = vc_config_list_double(cfg, k, 0, &a->beta1);
            if (!st) st = vc_config_list_double(cfg, k, 1, &a->beta2);
        } else if (!strcmp(key, "amsgrad") || !strcmp(key, "maximize")) {
            int on = 0;
            st = vc_config_get_bool(cfg, k, &on);
            if (!st && on) st = vc_fail(VC_ERR_UNSUPPORTED, "%s=true is not built in", k);
        } else if (strcmp(key, "foreach") && strcmp(key, "fused") && strcmp(key, "capturable") &&
                   strcmp(key, "differentiable"))
            st = vc_fail(VC_ERR_UNSUPPORTED, "%s: unknown AdamW argument (eps, betas, weight_decay are honoured)", k);
    }
    return st;
}

/* verl's megatron strategy (<prefix>.strategy: megatron, from ppo_megatron_trainer): Megatron-core's
 * optimizer as verl's init_megatron_optim_config builds it: `adam` (decoupled weight decay, as AdamW) with
 * optim.lr, weight_decay and clip_grad, betas and eps Megatron's (0.9, 0.999, 1e-8; optim.betas is not passed
 * by verl) unless override_optimizer_config sets adam_beta1 / adam_beta2 / adam_eps; no weight decay on biases
 * and norms (Megatron's parameter groups: tensors of one dimension); its OptimizerParamScheduler. */
static int strategy_is(const vc_config *cfg, const char *prefix, const char *name) {
    char k[160];
    const char *s = NULL;
    snprintf(k, sizeof k, "%s.strategy", prefix);
    return !vc_config_get_str_or(cfg, k, "fsdp", &s) && s && !strcmp(s, name);
}

int rl_strategy_megatron(const vc_config *cfg, const char *prefix) { return strategy_is(cfg, prefix, "megatron"); }

static const char *const MEGATRON_PERF_ONLY[] = {
    "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "use_precision_aware_optimizer",
    "optimizer_cpu_offload", "optimizer_offload_fraction", "use_torch_optimizer_for_cpu_offload",
    "overlap_cpu_optimizer_d2h_h2d", "pin_cpu_grads", "pin_cpu_params", "store_param_remainders",
    "barrier_with_L1_time", "log_num_zeros_in_grad", "timers", "bf16", "fp16", "params_dtype",
    "decoupled_weight_decay",
};

/* later verl's precision-aware optimizer keys: with optim.use_precision_aware_optimizer in a bf16 run
 * (megatron.dtype) verl passes optim.exp_avg_dtype / exp_avg_sq_dtype / main_grads_dtype to Megatron, whose
 * TransformerEngine FusedAdam stores the moments in those dtypes (its CPU optimizer keeps fp32 ones); verl checks
 * the names in any run */
static vc_status precision_aware_moments(const vc_config *cfg, const char *prefix, vc_adamw_config *a) {
    char k[200];
    const char *v = NULL;
    int on = 0, bf[3] = { 0 }, offload = 0;
    static const char *const KEYS[3] = { "exp_avg_dtype", "exp_avg_sq_dtype", "main_grads_dtype" };
    vc_status st = VC_OK;
    for (int i = 0; i < 3 && !st; i++) {
        snprintf(k, sizeof k, "%s.optim.%s", prefix, KEYS[i]);
        st = vc_config_get_str_or(cfg, k, "fp32", &v);
        if (!st) st = vc_adamw_moment_dtype(k, v, &bf[i]);
    }
    snprintf(k, sizeof k, "%s.optim.use_precision_aware_optimizer", prefix);
    if (!st) st = vc_config_get_bool_or(cfg, k, 0, &on);
    snprintf(k, sizeof k, "%s.megatron.dtype", prefix);
    if (!st) st = vc_config_get_str_or(cfg, k, "float32", &v);
    snprintf(k, sizeof k, "%s.optim.override_optimizer_config.optimizer_cpu_offload", prefix);
    if (!st && vc_config_kind(cfg, k) != VC_CFG_ABSENT) st = vc_config_get_bool_or(cfg, k, 0, &offload);
    snprintf(k, sizeof k, "%s.optim", prefix);
    return st ? st : vc_adamw_megatron_moments(k, bf, on, !strcmp(v, "bfloat16") || !strcmp(v, "bf16"), offload, a);
}

/* later verl's optimizer=muon (optim/megatron.yaml's muon_* keys, as verl hands them to Megatron-core) */
static vc_status muon_optimizer(const vc_config *cfg, const char *prefix, int quiet, vc_muon_config *m) {
    char k[200], g[200];
    vc_muon_keys mk;
    vc_muon_keys_default(&mk);
    snprintf(g, sizeof g, "%s.optim", prefix);
    mk.prefix = g;
    mk.quiet = quiet;
    vc_status st = VC_OK;
#define KD(key, dst) do { snprintf(k, sizeof k, "%s.%s", g, key); if (!st) st = vc_config_get_double_or(cfg, k, dst, &dst); } while (0)
#define KB(key, dst) do { snprintf(k, sizeof k, "%s.%s", g, key); if (!st) st = vc_config_get_bool_or(cfg, k, dst, &dst); } while (0)
#define KS(key, dst) do { snprintf(k, sizeof k, "%s.%s", g, key); if (!st) st = vc_config_get_str_or(cfg, k, dst, &dst); } while (0)
    KD("muon_momentum", mk.momentum);
    KD("muon_extra_scale_factor", mk.extra_scale);
    KD("betas.0", mk.beta1);
    KB("muon_nesterov", mk.nesterov);
    KB("muon_split_qkv", mk.split_qkv);
    KB("muon_match_adamw_update_rms", mk.match_adamw_rms);
    KB("use_layer_wise_distributed_optimizer", mk.layer_wise);
    KS("muon_scale_mode", mk.scale_mode);
    KS("muon_coefficient_type", mk.coefficient_type);
    KS("muon_tp_mode", mk.tp_mode);
    KS("muon_fp32_matmul_prec", mk.fp32_matmul_prec);
    KS("muon_scalar_optimizer", mk.scalar_optimizer);
    snprintf(k, sizeof k, "%s.muon_num_ns_steps", g);
    if (!st) st = vc_config_get_int_or(cfg, k, mk.ns_steps, &mk.ns_steps);
#undef KD
#undef KB
#undef KS
    return st ? st : vc_muon_configure(&mk, m);
}

static vc_status megatron_optimizer(const vc_config *cfg, const char *prefix, int quiet, vc_lr_schedule *s,
                                    vc_adamw_config *a, double *clip) {
    char k[200];
    const char *name = NULL, *style = NULL, *wsd_style = NULL, *incr = NULL;
    vc_lr_megatron_config mc = { 0 };
    double warm = -1, decay = -1, wsd = -1;
    vc_status st = VC_OK;
#define GETD(key, dst, def) do { snprintf(k, sizeof k, "%s.optim.%s", prefix, key); if (!st) st = vc_config_get_double_or(cfg, k, def, dst); } while (0)
#define GETS(key, dst, def) do { snprintf(k, sizeof k, "%s.optim.%s", prefix, key); if (!st) st = vc_config_get_str_or(cfg, k, def, dst); } while (0)
    GETS("optimizer", &name, "adam");
    if (!st && strcmp(name, "adam") && strcmp(name, "muon"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s.optim.optimizer=%s: verlc trains with Megatron's adam (decoupled weight "
                       "decay, as AdamW) or Megatron-core's muon", prefix, name);
    if (!st && !strcmp(name, "muon")) st = muon_optimizer(cfg, prefix, quiet, &a->muon);
    GETD("lr", &mc.lr, 1e-6);
    GETD("lr_warmup_init", &mc.lr_warmup_init, 0);
    GETD("min_lr", &mc.min_lr, 0);
    GETD("lr_warmup_steps_ratio", &mc.lr_warmup_steps_ratio, 0);
    GETD("lr_warmup_steps", &warm, -1);
    GETD("lr_decay_steps", &decay, -1);
    GETD("lr_wsd_decay_steps", &wsd, -1);
    GETD("weight_decay", &a->weight_decay, 0.01);
    GETD("clip_grad", clip, 1.0);
    GETS("lr_decay_style", &style, "constant");
    GETS("lr_wsd_decay_style", &wsd_style, "exponential");
    GETS("weight_decay_incr_style", &incr, "constant"); /* start and end decay are equal: any style is constant */
#undef GETD
#undef GETS
    if (st) return st;
    a->beta1 = 0.9;
    a->beta2 = 0.999;
    a->eps = 1e-8;
    char o[200];
    snprintf(o, sizeof o, "%s.optim.override_optimizer_config", prefix);
    size_t n = 0;
    if (vc_config_kind(cfg, o) == VC_CFG_MAP && (st = vc_config_map_len(cfg, o, &n))) return st;
    for (size_t i = 0; i < n && !st; i++) {
        const char *key = NULL;
        if ((st = vc_config_map_key(cfg, o, i, &key))) break;
        snprintf(k, sizeof k, "%s.%s", o, key);
        int perf = 0;
        for (size_t j = 0; j < sizeof MEGATRON_PERF_ONLY / sizeof *MEGATRON_PERF_ONLY; j++)
            perf |= !strcmp(key, MEGATRON_PERF_ONLY[j]);
        if (!strcmp(key, "adam_beta1")) st = vc_config_get_double(cfg, k, &a->beta1);
        else if (!strcmp(key, "adam_beta2")) st = vc_config_get_double(cfg, k, &a->beta2);
        else if (!strcmp(key, "adam_eps")) st = vc_config_get_double(cfg, k, &a->eps);
        else if (!strcmp(key, "weight_decay")) st = vc_config_get_double(cfg, k, &a->weight_decay);
        else if (!strcmp(key, "clip_grad")) st = vc_config_get_double(cfg, k, clip);
        else if (!strcmp(key, "main_grads_dtype") || !strcmp(key, "main_params_dtype") ||
                 !strcmp(key, "exp_avg_dtype") || !strcmp(key, "exp_avg_sq_dtype")) {
            const char *dt = NULL; /* Megatron's fp32 state; the other dtypes are torch dtypes YAML cannot name */
            int bf16 = 0;
            st = vc_config_get_str_or(cfg, k, "fp32", &dt);
            if (!st) st = vc_adamw_moment_dtype(k, dt, &bf16);
            if (!st && bf16)
                st = vc_fail(VC_ERR_UNSUPPORTED, "%s=%s is not supported: verlc's Megatron optimizer keeps fp32 "
                             "gradients, master weights and moments", k, dt);
        } else if (!perf)
            st = vc_fail(VC_ERR_UNSUPPORTED, "%s: not built in (adam_beta1, adam_beta2, adam_eps, weight_decay and "
                         "clip_grad are honoured, and the options that only change how Megatron runs the same update)", k);
    }
    if (!st) st = precision_aware_moments(cfg, prefix, a);
    if (st) return st;
    mc.lr_warmup_steps = (int64_t)warm;
    mc.lr_decay_steps = (int64_t)decay;
    mc.lr_wsd_decay_steps = (int64_t)wsd;
    mc.lr_decay_style = style;
    mc.lr_wsd_decay_style = wsd_style;
    mc.total_training_steps = s->total_steps;
    if ((st = vc_lr_megatron_init(s, &mc))) return vc_fail_ctx(st, "%s.optim", prefix);
    a->lr = s->base_lr;
    return VC_OK;
}

/* Megatron-lite's actor (actor@actor_rollout_ref.actor=mlite_actor: strategy mlite), its optimizer as its verl engine
 * builds it (_build_mlite_optimizer_config): Adam-style only, optim.lr, weight_decay (decoupled; none on biases and
 * norms, as Megatron's parameter groups), clip_grad, betas from optim.betas, eps from override_optimizer_config's
 * adam_eps / eps (else 1e-8); the other overrides it reads change only where the state lives; its own scheduler
 * (vc_lr_mlite_init), min_lr or lr x min_lr_ratio */
int rl_strategy_mlite(const vc_config *cfg, const char *prefix) { return strategy_is(cfg, prefix, "mlite"); }

static vc_status mlite_optimizer(const vc_config *cfg, const char *prefix, vc_lr_schedule *s, vc_adamw_config *a,
                                 double *clip) {
    char k[200], o[200];
    const char *name = NULL;
    vc_lr_megatron_config mc = { 0 };
    double warm = -1, decay = -1, wsd = -1, ratio = NAN;
    vc_status st = VC_OK;
#define GETD(key, dst, def) do { snprintf(k, sizeof k, "%s.optim.%s", prefix, key); if (!st) st = vc_config_get_double_or(cfg, k, def, dst); } while (0)
#define GETS(key, dst, def) do { snprintf(k, sizeof k, "%s.optim.%s", prefix, key); if (!st) st = vc_config_get_str_or(cfg, k, def, dst); } while (0)
    GETS("optimizer", &name, "adam");
    int adam = 0; /* its _normalize_optimizer_name: any name holding "adam", in any case */
    for (const char *c = name; !st && *c && !adam; c++) adam = !strncasecmp(c, "adam", 4);
    if (!st && !adam)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: Megatron-lite's engine takes Adam-style optimizers only", k, name);
    GETD("lr", &mc.lr, 1e-6);
    GETD("lr_warmup_init", &mc.lr_warmup_init, 0);
    GETD("min_lr", &mc.min_lr, NAN);
    GETD("min_lr_ratio", &ratio, NAN); /* (added with `+`: the megatron optim group has none) */
    GETD("lr_warmup_steps_ratio", &mc.lr_warmup_steps_ratio, 0);
    GETD("lr_warmup_steps", &warm, -1);
    GETD("lr_decay_steps", &decay, -1);
    GETD("lr_wsd_decay_steps", &wsd, -1);
    GETD("weight_decay", &a->weight_decay, 0.01);
    GETD("clip_grad", clip, 1.0);
    GETD("betas.0", &a->beta1, 0.9);
    GETD("betas.1", &a->beta2, 0.999);
    GETS("lr_decay_style", &mc.lr_decay_style, "constant");
    GETS("lr_wsd_decay_style", &mc.lr_wsd_decay_style, "exponential");
#undef GETD
#undef GETS
    if (st) return st;
    if (isnan(mc.min_lr)) mc.min_lr = isnan(ratio) ? 0.0 : mc.lr * ratio;
    a->eps = 1e-8;
    snprintf(o, sizeof o, "%s.optim.override_optimizer_config", prefix);
    size_t n = 0;
    if (vc_config_kind(cfg, o) == VC_CFG_MAP && (st = vc_config_map_len(cfg, o, &n))) return st;
    for (size_t i = 0; i < n && !st; i++) {
        const char *key = NULL;
        if ((st = vc_config_map_key(cfg, o, i, &key))) break;
        snprintf(k, sizeof k, "%s.%s", o, key);
        int on = 0;
        if (!strcmp(key, "adam_eps") || (!strcmp(key, "eps") && vc_config_kind(cfg, k) != VC_CFG_NULL))
            st = vc_config_get_double(cfg, k, &a->eps);
        else if (!strcmp(key, "decoupled_weight_decay")) {
            if (vc_config_kind(cfg, k) != VC_CFG_NULL && !(st = vc_config_get_bool(cfg, k, &on)) && !on)
                st = vc_fail(VC_ERR_UNSUPPORTED, "%s=false (L2 regularisation) is not built in: verlc's weight decay "
                             "is decoupled (AdamW's)", k);
        } else if (!strcmp(key, "use_precision_aware_optimizer")) { /* (without moment dtypes: fp32 moments) */
        } else if (strcmp(key, "offload_fraction") && strcmp(key, "optimizer_offload_fraction") &&
                   strcmp(key, "optimizer_cpu_offload") && strcmp(key, "overlap_cpu_optimizer_d2h_h2d"))
            vc_info("%s: not read by Megatron-lite's engine (ignored)", k);
    }
    if (st) return st;
    mc.lr_warmup_steps = (int64_t)warm;
    mc.lr_decay_steps = (int64_t)decay;
    mc.lr_wsd_decay_steps = (int64_t)wsd;
    mc.total_training_steps = s->total_steps;
    if ((st = vc_lr_mlite_init(s, &mc))) return vc_fail_ctx(st, "%s.optim", prefix);
    a->lr = s->base_lr;
    return VC_OK;
}

/* later verl's veomni strategy (model_engine=veomni): VeOmni's build_optimizer as verl's veomni engine calls it,
 * AdamW (eps 1e-8) with optim.lr, betas and weight_decay on every parameter, gradients clipped at optim.clip_grad
 * (its deprecated grad_clip wins when set, as verl's OptimizerConfig has it), and VeOmni's schedule
 * (vc_lr_veomni_init); override_optimizer_config is not passed on by verl's engine, and not here either */
int rl_strategy_veomni(const vc_config *cfg, const char *prefix) { return strategy_is(cfg, prefix, "veomni"); }

static vc_status veomni_optimizer(const vc_config *cfg, const char *prefix, vc_lr_schedule *s, vc_adamw_config *a,
                                  double *clip) {
    char k[200];
    const char *name = NULL;
    vc_lr_veomni_config vc = { 0 };
    double gc = NAN;
    vc_status st = VC_OK;
#define GETD(key, dst, def) do { snprintf(k, sizeof k, "%s.optim.%s", prefix, key); if (!st) st = vc_config_get_double_or(cfg, k, def, dst); } while (0)
    snprintf(k, sizeof k, "%s.optim.optimizer", prefix);
    st = vc_config_get_str_or(cfg, k, "adamw", &name);
    if (!st && strcmp(name, "adamw"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: verlc trains with VeOmni's adamw (torch's AdamW update)", k, name);
    snprintf(k, sizeof k, "%s.optim.lr_scheduler_type", prefix);
    if (!st) st = vc_config_get_str_or(cfg, k, "cosine", &vc.lr_scheduler_type);
    GETD("lr", &vc.lr, 1e-6);
    GETD("lr_min", &vc.lr_min, 0);
    GETD("lr_start", &vc.lr_start, 0);
    GETD("lr_warmup_steps_ratio", &vc.lr_warmup_steps_ratio, 0);
    GETD("lr_decay_ratio", &vc.lr_decay_ratio, 1);
    GETD("weight_decay", &a->weight_decay, 0.01);
    GETD("betas.0", &a->beta1, 0.9);
    GETD("betas.1", &a->beta2, 0.999);
    GETD("clip_grad", clip, 1.0);
    snprintf(k, sizeof k, "%s.optim.grad_clip", prefix);
    vc_cfg_kind gk = vc_config_kind(cfg, k); /* added with `+` only: verl's veomni optim group has no grad_clip */
    if (!st && gk != VC_CFG_NULL && gk != VC_CFG_ABSENT && !(st = vc_config_get_double(cfg, k, &gc))) *clip = gc;
#undef GETD
    if (st) return st;
    snprintf(k, sizeof k, "%s.optim.override_optimizer_config", prefix);
    size_t n = 0;
    if (vc_config_kind(cfg, k) == VC_CFG_MAP && !vc_config_map_len(cfg, k, &n) && n)
        vc_warn("%s: ignored, as verl's veomni engine does not pass it to VeOmni's optimizer", k);
    double ws = -1;
    snprintf(k, sizeof k, "%s.optim.lr_warmup_steps", prefix);
    if (!vc_config_get_double_or(cfg, k, -1, &ws) && ws > 0)
        vc_warn("%s=%g: ignored, as verl's veomni engine warms up for int(total steps x lr_warmup_steps_ratio) steps", k,
                ws);
    a->eps = 1e-8;
    vc.total_training_steps = s->total_steps;
    if ((st = vc_lr_veomni_init(s, &vc))) return vc_fail_ctx(st, "%s.optim", prefix);
    a->lr = s->base_lr;
    return VC_OK;
}

static vc_status lr_from_cfg(const vc_config *cfg, const char *prefix, int64_t total, vc_lr_schedule *s, double *wd,
                             double *b1, double *b2, double *clip) {
    char k[160];
    vc_lr_config lc;
    vc_lr_config_default(&lc);
    vc_status st = VC_OK;
#define GETD(name, dst, def) do { snprintf(k, sizeof k, "%s.%s", prefix, name); if (!st) st = vc_config_get_double_or(cfg, k, def, dst); } while (0)
#define GETS(name, dst) do { snprintf(k, sizeof k, "%s.%s", prefix, name); if (!st) st = vc_config_get_str_or(cfg, k, NULL, dst); } while (0)
    GETD("optim.lr", &lc.lr, 1e-6);
    GETD("optim.lr_warmup_steps_ratio", &lc.lr_warmup_steps_ratio, 0);
    GETD("optim.min_lr_ratio", &lc.min_lr_ratio, 0);
    GETD("optim.num_cycles", &lc.num_cycles, 0.5);
    GETD("optim.weight_decay", wd, 0.01);
    GETD("optim.betas.0", b1, 0.9);
    GETD("optim.betas.1", b2, 0.999);
    GETD("grad_clip", clip, 1.0);
    GETS("optim.lr_scheduler_type", &lc.lr_scheduler_type);
    GETS("optim.warmup_style", &lc.warmup_style);
    double ws = -1;
    GETD("optim.lr_warmup_steps", &ws, -1);
    int zero_indexed = 1; /* later verl's */
    snprintf(k, sizeof k, "%s.optim.zero_indexed_step", prefix);
    if (!st) st = vc_config_get_bool_or(cfg, k, 1, &zero_indexed);
    lc.one_indexed = !zero_indexed;
#undef GETD
#undef GETS
    if (st) return st;
    lc.lr_warmup_steps = (int64_t)ws;
    lc.total_training_steps = total;
    return vc_lr_schedule_init(s, &lc);
}

vc_status rl_trainer_init(vc_trainer *tr, vc_model *m, vc_tensor *const *extra, int n_extra, const vc_config *cfg,
                          const char *prefix, int64_t total_steps, int loss_on_hidden) {
    return rl_trainer_init_dp(tr, m, extra, n_extra, cfg, prefix, total_steps, loss_on_hidden, NULL);
}

vc_status rl_trainer_init_dp(vc_trainer *tr, vc_model *m, vc_tensor *const *extra, int n_extra, const vc_config *cfg,
                             const char *prefix, int64_t total_steps, int loss_on_hidden, vc_comm *comm) {
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    int megatron = rl_strategy_megatron(cfg, prefix), veomni = rl_strategy_veomni(cfg, prefix);
    int mlite = rl_strategy_mlite(cfg, prefix);
    vc_status st;
    if (veomni) {
        tc.sched.total_steps = total_steps;
        st = veomni_optimizer(cfg, prefix, &tc.sched, &tc.adamw, &tc.grad_clip);
    } else if (megatron) {
        tc.sched.total_steps = total_steps;
        st = megatron_optimizer(cfg, prefix, comm && vc_comm_rank(comm) != 0, &tc.sched, &tc.adamw, &tc.grad_clip);
        tc.decay_matrices_only = 1;
    } else if (mlite) {
        tc.sched.total_steps = total_steps;
        st = mlite_optimizer(cfg, prefix, &tc.sched, &tc.adamw, &tc.grad_clip);
        tc.decay_matrices_only = 1;
    } else {
        st = lr_from_cfg(cfg, prefix, total_steps, &tc.sched, &tc.adamw.weight_decay, &tc.adamw.beta1, &tc.adamw.beta2,
                         &tc.grad_clip);
    }
    char k[200];
    snprintf(k, sizeof k, "%s.enable_gradient_checkpointing",
             strcmp(prefix, "critic") ? "actor_rollout_ref.model" : "critic.model");
    if (!st) st = vc_config_get_bool_or(cfg, k, 0, &tc.checkpointing);
    if (!st && megatron) { /* Megatron's full recomputation is per layer, as verlc's checkpointing */
        const char *g = NULL;
        snprintf(k, sizeof k, "%s.megatron.override_transformer_config.recompute_granularity", prefix);
        st = vc_config_get_str_or(cfg, k, NULL, &g);
        if (!st && g && !strcmp(g, "full")) tc.checkpointing = 1;
    }
    if (!st && mlite) { /* Megatron-lite's impl_cfg.recompute list: [full] recomputes whole layers */
        snprintf(k, sizeof k, "%s.engine.impl_cfg.recompute", prefix);
        if (vc_config_kind(cfg, k) == VC_CFG_LIST) {
            size_t n = 0;
            st = vc_config_list_len(cfg, k, &n);
            for (size_t i = 0; i < n && !st; i++) {
                const char *g = NULL;
                char e[220];
                snprintf(e, sizeof e, "%s.%zu", k, i);
                if (!(st = vc_config_get_str(cfg, e, &g)) && g && !strcmp(g, "full")) tc.checkpointing = 1;
            }
        }
    }
    double temp = 1;
    /* the actor's log-probs and entropies are those of logits / rollout.temperature, as in verl */
    if (!st && strcmp(prefix, "critic"))
        st = vc_config_get_double_or(cfg, "actor_rollout_ref.rollout.temperature", 1.0, &temp);
    if (!st && !megatron && !veomni && !mlite) st = optimizer_from_cfg(cfg, prefix, &tc.adamw);
    if (st) return st;
    tc.temperature = temp > 0 ? (float)temp : 1.0f;
    tc.adamw.lr = tc.sched.base_lr;
    tc.need_entropy = !loss_on_hidden;
    tc.extra_params = extra;
    tc.n_extra_params = n_extra;
    tc.loss_on_hidden = loss_on_hidden;
    if (strcmp(prefix, "critic")) { /* later verl's actor.use_prefix_grouper: the actor's prompts computed once per group */
        snprintf(k, sizeof k, "%s.use_prefix_grouper", prefix);
        if ((st = vc_config_get_bool_or(cfg, k, 0, &tc.share_prefix))) return st;
        int en = 0, train = 0; /* verl's MTP training (model.mtp.enable with enable_train) */
        const char *M = "actor_rollout_ref.model.mtp.";
        snprintf(k, sizeof k, "%senable", M);
        if (!(st = vc_config_get_bool_or(cfg, k, 0, &en))) snprintf(k, sizeof k, "%senable_train", M);
        if (!st && !(st = vc_config_get_bool_or(cfg, k, 0, &train))) snprintf(k, sizeof k, "%sdetach_encoder", M);
        if (!st && !(st = vc_config_get_bool_or(cfg, k, 0, &tc.mtp_detach)))
            snprintf(k, sizeof k, "%smtp_loss_scaling_factor", M);
        if (!st) st = vc_config_get_double_or(cfg, k, 0.1, &tc.mtp_scale);
        if (st) return st;
        tc.mtp_train = en && train;
    }
    /* each rank passes the rows it rolled out; counts are summed before the micro-batches run */
    tc.comm = comm;
    tc.local_batch = 1;
    /* scale-out hook: <prefix>.zero_stage (0: plain DP, 1: ZeRO-1, 2: ZeRO-2, 3: ZeRO-3),
     * <prefix>.overlap_grad_reduce */
    if ((st = rl_dist_sharding(cfg, prefix, &tc.sharding, &tc.overlap_grad_reduce))) return st;
    if ((st = vc_trainer_init(tr, m, &tc))) return st;
    vc_trainer_print_memory(tr, strcmp(prefix, "critic") ? "actor" : "critic", stderr);
    /* ZeRO-3: full weights outside the optimiser steps (rollout, log-probs, values, checkpoints) */
    return vc_trainer_full_weights(tr, 1);
}

/* ---- shared mini-batch loop ---- */
typedef struct acc {
    double sum[20];
    int n;
} acc;

/* One rank's rows of an update's epoch as verl's engine workers draw them with actor.shuffle / critic.shuffle
 * (tensordict make_iterator: for each update a DataLoader over the rank's rows with a generator seeded
 * data_loader_seed + rank, its loader's iterator anew every epoch): an epoch draws the iterator's 64-bit base seed,
 * then its torch.randperm, then RandomSampler's second (discarded) one. */
void rl_engine_rows(int *order, int n, uint64_t seed, int64_t epoch) {
    vc_np_mt19937 m;
    vc_np_seed(&m, (uint32_t)seed);
    for (int64_t e = 0; e <= epoch; e++) {
        vc_np_next32(&m), vc_np_next32(&m);
        vc_torch_randperm(&m, (uint32_t *)order, (size_t)n);
        if (e < epoch) vc_torch_randperm(&m, (uint32_t *)order, (size_t)n);
    }
}

/* rows of a mini-batch: shuffled as verl's engine workers shuffle a rank's rows (rl_engine_rows), else in order */
static void minibatch_order(int *order, int B, int shuffle, uint64_t seed, int64_t epoch) {
    if (shuffle) rl_engine_rows(order, B, seed, epoch);
    else
        for (int i = 0; i < B; i++) order[i] = i;
}

static double mask_sum_rows(const rl_batch *b, const int *rows, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < b->T; j++) s += b->mask[(size_t)rows[i] * b->T + j];
    return s;
}

static void copy_rows(const rl_batch *b, const float *src, const int *rows, int n, float *dst) {
    for (int i = 0; i < n; i++) memcpy(dst + (size_t)i * b->T, src + (size_t)rows[i] * b->T, sizeof(float) * b->T);
}

/* [rows, T] scratch of the losses */
typedef struct mb_buf {
    float *logp, *ent, *old, *adv, *mask, *ref, *d, *dent, *kl, *dkl, *tmp, *isw, *keep, *dd;
} mb_buf;

static vc_status mb_buf_alloc(mb_buf *m, size_t n) {
    float **f[] = { &m->logp, &m->ent, &m->old, &m->adv, &m->mask, &m->ref, &m->d, &m->dent, &m->kl, &m->dkl, &m->tmp,
                    &m->isw, &m->keep, &m->dd };
    int ok = 1;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) ok &= (*f[i] = vc_calloc(n ? n : 1, sizeof(float))) != NULL;
    return ok ? VC_OK : VC_ERR_NOMEM;
}

static void mb_buf_free(mb_buf *m) {
    float *f[] = { m->logp, m->ent, m->old, m->adv, m->mask, m->ref, m->d, m->dent, m->kl, m->dkl, m->tmp, m->isw,
                   m->keep, m->dd };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
}

/* ---- mini-batches as train.h sees them ---- */
typedef struct mini {
    vc_minibatch mb;
    int64_t *cu;
    int32_t *ids, *group; /* group: the rows' uid groups (the trainer shares their prompts with share_prefix) */
    const char **uid;
    float *mask;
    int32_t *route; /* router replay: the rows' recorded experts, token-major (NULL: none) */
    const vc_images **img; /* image-text models: the rows' prompts' images, and their prompt lengths */
    int64_t *span;
} mini;

static vc_status mini_alloc(mini *m, const rl_batch *b) {
    m->cu = vc_malloc(sizeof(int64_t) * ((size_t)b->B + 1));
    m->ids = vc_malloc(sizeof(int32_t) * ((size_t)b->cu[b->B] + 1));
    m->mask = vc_malloc(sizeof(float) * ((size_t)b->cu[b->B] + 1));
    m->group = vc_malloc(sizeof(int32_t) * ((size_t)b->B + 1));
    m->uid = vc_malloc(sizeof(char *) * ((size_t)b->B + 1));
    m->route = NULL;
    m->img = vc_calloc((size_t)b->B + 1, sizeof *m->img);
    m->span = vc_calloc((size_t)b->B + 1, sizeof *m->span);
    return m->cu && m->ids && m->mask && m->group && m->uid && m->img && m->span ? VC_OK : VC_ERR_NOMEM;
}

static void mini_free(mini *m) {
    free(m->cu);
    free(m->ids);
    free(m->mask);
    free(m->group);
    free(m->uid);
    free(m->route);
    free(m->img);
    free(m->span);
}

/* rows[0..n) packed (prompt + response) with a token-aligned mask on the response tokens (and the rows'
 * recorded experts when m->route is there) */
static vc_status mini_build(mini *m, const rl_batch *b, const int *rows, int n) {
    m->cu[0] = 0;
    for (int i = 0; i < n; i++) {
        int r = rows[i];
        vc_status st = rl_batch_row_images(b, r, &m->img[i], &m->span[i]);
        if (st) return st;
        int64_t len = b->cu[r + 1] - b->cu[r], o = m->cu[i];
        memcpy(m->ids + o, b->ids + b->cu[r], sizeof(int32_t) * (size_t)len);
        if (m->route)
            memcpy(m->route + (size_t)o * (size_t)b->route_lk, b->route + (size_t)b->cu[r] * (size_t)b->route_lk,
                   sizeof(int32_t) * (size_t)(len * b->route_lk));
        for (int64_t k = 0; k < len; k++) {
            int64_t j = k - b->plen[r];
            m->mask[o + k] = j >= 0 && j < b->rlen[r] ? b->mask[(size_t)r * b->T + j] : 0.0f;
        }
        m->cu[i + 1] = o + len;
        m->uid[i] = b->uid ? b->uid[r] : NULL;
    }
    int ng = 0; /* without uids (never in a trainer batch) nothing is shared */
    int grouped = n > 0 && m->uid[0] && vc_group_ids(m->uid, n, m->group, &ng) == VC_OK;
    m->mb = (vc_minibatch){ n, m->cu, m->ids, m->mask, grouped ? m->group : NULL, m->route,
                            b->imgs || b->rimg ? m->img : NULL, m->span };
    return VC_OK;
}

/* the micro-batch's rows as an rl_mb view (for rl_mb_gather / rl_mb_scatter) */
static vc_status mb_view(vc_graph *g, const vc_micro_batch *mb, const int *rows, rl_mb *v) {
    memset(v, 0, sizeof *v);
    int *r = vc_graph_alloc(g, sizeof(int) * (size_t)mb->n_seq, 0);
    if (!r) return vc_fail(VC_ERR_NOMEM, "micro-batch of %d rows", mb->n_seq);
    for (int i = 0; i < mb->n_seq; i++) r[i] = rows[mb->seq[i]];
    v->n = mb->n_seq;
    v->rows = r;
    v->cu = (int64_t *)mb->cu_seqlens;
    return VC_OK;
}

static vc_status graph_err(vc_graph *g) { return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM; }

/* the mini-batch loop shared by actor and critic: one trainer step per mini-batch */
typedef struct loop {
    int ppo_epochs, mini_rows, micro_rows, shuffle;
    int64_t max_tokens;
    uint64_t seed;
    const char *who;
    int route; /* replay the batch's recorded experts (the actor's router replay) */
    int legacy; /* verl's legacy workers' loss normalisation (legacy_scale) */
    int64_t resp_width; /* seq-mean-token-sum-norm's divisor (rl_actor_cfg's): the padded responses' width, */
    double scale_len;   /* or actor.loss_scale_factor (legacy workers: the width alone) */
} loop;

typedef struct step_ctx {
    rl_batch *b;
    const int *rows;  /* the mini-batch's rows */
    vc_agg_norm norm; /* its normalisers */
    int first_epoch;
    mb_buf w;
    acc a;
    const void *cfg;
    int on_policy;
    rl_critic *cr;
    int64_t opt_step; /* the trainer step being taken, */
    int micro, g_off; /* its micro-batch count so far, this rank's first global row: random-draw keys */
    rl_rc_out *rc;    /* the actor's rollout_corr/ metrics summed over micro-batches (NULL: none) */
    int rc_n;
    double shared;    /* prompt tokens computed once per group instead of per row (use_prefix_grouper) */
    acc dist;         /* distillation: D_* sums over micro-batches (D_MIN / D_MAX: extremes) */
    vc_model *model;  /* the trained model and its log-prob temperature (distillation's top-k loss) */
    float temperature;
    const loop *l;    /* the loop's settings, and the ranks taking part (legacy_scale) */
    int world;
    double mtp[VC_MTP_MAX]; /* trained MTP layers: each depth's loss summed over the optimiser steps */
} step_ctx;

/* verl's legacy FSDP workers (b178a3cd's dp_actor / dp_critic, which its default use_legacy_worker_impl=auto picks;
 * verlc takes them at `enable` only): each micro-batch's losses are aggregated over that micro-batch alone (its
 * own tokens or rows) and scaled by 1 / (mini-batch rows / micro-batch rows), or by its rows / mini-batch rows
 * with use_dynamic_bsz, the mini-batch being a rank's share; the ranks' gradients are averaged where verlc sums
 * them. verl's engine workers and later verl normalise by the whole mini-batch instead (x->norm). */
static double legacy_scale(const step_ctx *x, int n) {
    int world = x->world > 0 ? x->world : 1, per = x->l->mini_rows / world;
    if (per < 1) per = 1;
    if (x->l->micro_rows > 0) {
        int acc = per / x->l->micro_rows;
        return 1.0 / ((acc > 0 ? acc : 1) * (double)world);
    }
    return (double)n / per / world;
}

/* a micro-batch's own normalisers (legacy_scale's aggregation): its tokens and rows, the batch's width */
static vc_agg_norm legacy_norm(const step_ctx *x) {
    return (vc_agg_norm){ 1, 0, 0, x->l->resp_width > 0 ? (double)x->l->resp_width : x->norm.loss_scale_factor };
}

/* The rows of global mini-batch order[0..nm) held by this rank (loc: global row -> local row or -1), as
 * local rows in the global order: every rank contributes its share, the union is one rank's mini-batch. */
static int local_rows(const int *order, int nm, const int *loc, int *out) {
    int k = 0;
    for (int i = 0; i < nm; i++)
        if (loc[order[i]] >= 0) out[k++] = loc[order[i]];
    return k;
}

/* Whether every rank holds B = GB / world rows and a mini-batch of mb_rows splits over them: then, as verl's workers
 * do (each splits the block of rows its dispatch gave it, actor.shuffle permuting that block), every rank's i-th
 * mini-batch is the i-th slice of mb_rows / world of its own rows (in their order: ascending global rows, also after
 * balance_batch), and the results depend on the rank count unless one mini-batch holds the whole batch */
static vc_status rank_slices_apply(const rl_dp *dp, int B, int GB, int mb_rows, int *on) {
    *on = 0;
    if (!dp || dp->world <= 1) return VC_OK;
    double ok = GB % dp->world == 0 && mb_rows % dp->world == 0 && B == GB / dp->world;
    vc_status st = vc_comm_allreduce_f64(dp->comm, &ok, 1, VC_MIN); /* (every rank the same layout) */
    *on = !st && ok > 0;
    return st;
}

static vc_status run_loop(vc_trainer *tr, rl_batch *b, const loop *l, vc_token_loss_fn fn, step_ctx *x,
                          const rl_dp *dp, double *gn_sum, double *lr, int *n_steps) {
    int B = b->B, GB = dp ? dp->g_B : B, off = dp ? dp->g_off : 0;
    int mb_rows = l->mini_rows > 0 && l->mini_rows < GB ? l->mini_rows : GB;
    int *order = vc_malloc(sizeof(int) * (size_t)GB), *rows = vc_malloc(sizeof(int) * ((size_t)B + 1));
    int *loc = vc_malloc(sizeof(int) * (size_t)GB); /* global row -> this rank's row, -1 elsewhere */
    mini mn = { 0 };
    vc_status st = order && rows && loc ? mini_alloc(&mn, b) : VC_ERR_NOMEM;
    if (!st && l->route && b->route &&
        !(mn.route = vc_malloc(sizeof(int32_t) * (size_t)(b->cu[b->B] * b->route_lk + 1))))
        st = VC_ERR_NOMEM;
    for (int g = 0; !st && g < GB; g++) loc[g] = -1;
    for (int i = 0; !st && i < B; i++) {
        int g = dp && dp->g_idx ? dp->g_idx[i] : off + i;
        if (g < 0 || g >= GB) st = vc_fail(VC_ERR_INTERNAL, "row %d has global index %d of %d", i, g, GB);
        else loc[g] = i;
    }
    if (!st) st = mb_buf_alloc(&x->w, (size_t)B * b->T);
    x->l = l;
    x->world = dp ? dp->world : 1;
    /* verl's layout where the rows split over the ranks (rank_slices_apply); else the global mini-batches' rows, each
     * rank its share of them, except under ZeRO-3, which needs equal micro-batch counts on every rank: an even share
     * of its own rows */
    int sliced = 0;
    if (!st) st = rank_slices_apply(dp, B, GB, mb_rows, &sliced);
    int own = sliced || vc_trainer_sharding(tr) == VC_SHARD_ZERO3, n_mini = (GB + mb_rows - 1) / mb_rows;
    int own_mini = sliced ? mb_rows / x->world : (mb_rows + x->world - 1) / x->world;
    for (int ep = 0; !st && ep < l->ppo_epochs; ep++) {
        /* (own rows: this rank's generator over them; else the global rows) */
        minibatch_order(order, own ? B : GB, l->shuffle, l->seed + (uint64_t)(own ? tr->rank : 0), ep);
        for (int mi = 0, m0 = 0; !st && mi < n_mini; mi++, m0 += mb_rows) {
            int gm = GB - m0 < mb_rows ? GB - m0 : mb_rows, nm;
            if (own) {
                int a = (int)((int64_t)mi * B / n_mini), e = (int)((int64_t)(mi + 1) * B / n_mini);
                if (sliced) a = mi * own_mini, e = a + own_mini < B ? a + own_mini : B;
                memcpy(rows, order + a, sizeof(int) * (size_t)(e - a));
                nm = e - a;
            } else
                nm = local_rows(order + m0, gm, loc, rows);
            if ((st = mini_build(&mn, b, rows, nm))) break;
            x->rows = rows;
            /* the global mini-batch's normalisers (summed over ranks in rank order) */
            double cnt[2] = { mask_sum_rows(b, rows, nm), nm };
            if (dp && dp->world > 1 && (st = vc_comm_allreduce_f64_ordered(dp->comm, cnt, 2, VC_SUM))) break;
            double width = l->scale_len > 0 ? l->scale_len : l->resp_width > 0 ? (double)l->resp_width : dp ? dp->g_T : 0;
            x->norm = (vc_agg_norm){ 1, cnt[0], cnt[1], width };
            x->first_epoch = ep == 0;
            tr->cfg.micro_bs = l->micro_rows > 0 ? l->micro_rows : (nm > 0 ? nm : 1);
            tr->cfg.max_tokens = l->max_tokens;
            vc_step_stats ss;
            /* ZeRO-3: the weights are sharded for the step, full again for rollout and the log-prob passes */
            st = vc_trainer_full_weights(tr, 0);
            x->opt_step = tr->step;
            x->micro = 0;
            x->g_off = off;
            if (!st) st = vc_trainer_step(tr, &mn.mb, fn, x, &ss);
            vc_status fw = vc_trainer_full_weights(tr, 1);
            if (!st) st = fw;
            if (!st && ss.skipped)
                vc_warn("%s update: loss %g or grad_norm %g is not finite: optimizer step skipped", l->who, ss.loss,
                        ss.grad_norm);
            *gn_sum += ss.grad_norm;
            x->shared += (double)ss.n_shared;
            for (int k = 0; k < ss.n_mtp; k++) x->mtp[k] += ss.mtp_loss[k];
            *lr = ss.lr;
            (*n_steps)++;
        }
    }
    free(order);
    free(rows);
    free(loc);
    mini_free(&mn);
    mb_buf_free(&x->w);
    return st;
}

/* sums of the callbacks' metric accumulators over the ranks */
static vc_status acc_reduce(const rl_dp *dp, acc *a, int n_sum, int i_max) {
    if (!dp || dp->world <= 1) return VC_OK;
    double v[17];
    for (int i = 0; i < n_sum; i++) v[i] = a->sum[i];
    v[n_sum] = a->n;
    vc_status st = vc_comm_allreduce_f64_ordered(dp->comm, v, (size_t)n_sum + 1, VC_SUM);
    if (!st && i_max >= 0) st = vc_comm_allreduce_f64(dp->comm, &a->sum[i_max], 1, VC_MAX);
    if (st) return st;
    for (int i = 0; i < n_sum; i++)
        if (i != i_max) a->sum[i] = v[i];
    a->n = (int)v[n_sum];
    return VC_OK;
}

/* the actor's rollout_corr/ metrics: means over the micro-batches of every rank */
static vc_status rc_reduce(const rl_dp *dp, rl_rc_out *o, int n_mb, rl_metrics *met) {
    double cnt = n_mb;
    vc_status st = VC_OK;
    if (dp && dp->world > 1) {
        st = vc_comm_allreduce_f64_ordered(dp->comm, o->v, (size_t)o->n, VC_SUM);
        if (!st) st = vc_comm_allreduce_f64_ordered(dp->comm, &cnt, 1, VC_SUM);
    }
    for (int i = 0; !st && cnt > 0 && i < o->n; i++) rl_metrics_set(met, o->name[i], o->v[i] / cnt);
    return st;
}

/* ---- actor ---- */
enum { A_PG, A_ENT, A_ENTG, A_KL, A_PPOKL, A_CLIP, A_CLIPLO, A_DIFF_SUM, A_DIFF_N, A_DIFF_MAX };
enum { D_LOSS, D_ABS, D_PPOKL, D_CLIP, D_CLIPLO, D_SMASS, D_TMASS, D_NPOS, D_OVN, D_OVADV, D_OVPOS, D_N_SUM,
       D_MIN = D_N_SUM, D_MAX, D_SMIN, D_SMAX, D_TMIN, D_TMAX };

/* forward_kl_topk: the student's log-probs of the teacher's top-k tokens at every response position of the
 * micro-batch (the LM head on those positions' hidden states a chunk at a time, log-softmax gathered on the
 * host: vc_model_head_gather), the per-position losses into w->kl ([n, T] layout) and the overlap metrics, and
 * the graph tensor of those log-probs (*lsg) with the host arrays the gradient needs */
typedef struct { vc_tensor *lsg; float *ds; int64_t *at; int64_t P; } topk_part;
static vc_status distill_topk_part(step_ctx *x, vc_graph *g, const vc_micro_batch *mbt, const rl_batch *b,
                                   const int *rows, int n, topk_part *tp) {
    mb_buf *w = &x->w;
    int K = b->tk_k;
    int64_t P = 0;
    for (int i = 0; i < n; i++) P += b->rlen[rows[i]];
    size_t p1 = (size_t)P + 1, pk = (size_t)(P * K) + 1; /* 4-byte arrays of P or P * K (+1: never empty) */
    int32_t *hid = vc_graph_alloc(g, 4 * p1, 0), *ids = vc_graph_alloc(g, 4 * pk, 0);
    int32_t *sid = vc_graph_alloc(g, 4 * pk, 0); /* the student's own top k */
    float *tl = vc_graph_alloc(g, 4 * pk, 0), *ds = vc_graph_alloc(g, 4 * pk, 0), *loss = vc_graph_alloc(g, 4 * p1, 0);
    float *sm = vc_graph_alloc(g, 4 * p1, 0), *tm = vc_graph_alloc(g, 4 * p1, 0), *ovn = vc_graph_alloc(g, 4 * p1, 0);
    float *ova = vc_graph_alloc(g, 4 * p1, 0);
    int64_t *at = vc_graph_alloc(g, sizeof(int64_t) * p1, 0);
    if (!hid || !ids || !tl || !ds || !loss || !sm || !tm || !ovn || !ova || !sid || !at) return graph_err(g);
    for (int i = 0, q = 0; i < n; i++) {
        int r = rows[i];
        for (int64_t j = 0; j < b->rlen[r]; j++, q++) {
            int64_t p = mbt->cu_seqlens[i] + b->plen[r] - 1 + j; /* the position predicting response token j */
            hid[q] = mbt->hidden_pos ? mbt->hidden_pos[p] : (int32_t)p;
            at[q] = (int64_t)i * b->T + j;
            size_t src = ((size_t)r * b->T + (size_t)j) * (size_t)K;
            memcpy(ids + (size_t)q * K, b->tk_ids + src, sizeof(int32_t) * (size_t)K);
            memcpy(tl + (size_t)q * K, b->tk_lp + src, sizeof(float) * (size_t)K);
        }
    }
    int32_t *dh = vc_graph_upload(g, hid, sizeof(int32_t) * (size_t)(P ? P : 1));
    vc_tensor *hs = dh && P ? vc_op_gather_rows(g, mbt->hidden, mbt->hidden_rows, dh, P) : NULL;
    const rl_distill_cfg *dc = &((const rl_actor_cfg *)x->cfg)->dist;
    vc_tensor *lsg = hs ? vc_model_head_gather(x->model, g, hs, ids, K, x->temperature, dc->chunk_rows, sid) : NULL;
    float *s = NULL;
    vc_status st = P && !lsg ? graph_err(g) : P ? rl_host_copy(g, lsg, &s) : VC_OK;
    if (st) return st;
    rl_distill_topk(dc, s, tl, ids, sid, P, K, &(rl_topk_out){ loss, ds, sm, tm, ovn, ova });
    memset(w->kl, 0, sizeof(float) * (size_t)n * b->T);
    acc *a = &x->dist;
    for (int64_t q = 0; q < P; q++) {
        w->kl[at[q]] = loss[q];
        if (w->mask[at[q]] > 0) { /* verl's mass metrics over the response tokens */
            a->sum[D_SMASS] += sm[q], a->sum[D_TMASS] += tm[q], a->sum[D_NPOS] += 1;
            a->sum[D_SMIN] = fmin(a->sum[D_SMIN], sm[q]), a->sum[D_SMAX] = fmax(a->sum[D_SMAX], sm[q]);
            a->sum[D_TMIN] = fmin(a->sum[D_TMIN], tm[q]), a->sum[D_TMAX] = fmax(a->sum[D_TMAX], tm[q]);
            a->sum[D_OVN] += ovn[q]; /* the teacher / student top-k overlap */
            if (ovn[q] > 0) a->sum[D_OVADV] += ova[q], a->sum[D_OVPOS] += 1;
        }
    }
    *tp = (topk_part){ lsg, ds, at, P };
    return VC_OK;
}

/* later verl's distillation loss of a micro-batch (its distillation_loss / distillation_ppo_loss):
 * per token the estimator of KL(student || teacher) at the sampled token, or forward_kl_topk's divergence
 * over the teacher's top-k tokens, clamped to +-loss_max_clamp, aggregated as the policy loss, or with
 * use_policy_gradient a vanilla policy loss of advantage -loss; the metrics into x->dist. Its gradient goes
 * into w->d (through the sampled tokens' log-probs) or, supervised forward_kl_topk, into *extra (a graph
 * term over the student's top-k log-probs). Without use_task_rewards the policy loss's gradient (w->d,
 * w->dent) is dropped and this is the whole loss. */
static vc_status distill_loss(step_ctx *x, const rl_actor_cfg *c, const rl_batch *b, const int *rows, int n,
                              vc_graph *g, const vc_micro_batch *mbt, vc_tensor **extra) {
    const rl_distill_cfg *dc = &c->dist;
    mb_buf *w = &x->w;
    size_t nt = (size_t)n * b->T;
    topk_part tp = { 0 };
    *extra = NULL;
    if (dc->topk) { /* w->kl: the per-position losses from the student's top-k log-probs */
        vc_status s0 = !b->tk_ids ? vc_fail(VC_ERR_INTERNAL, "distillation: no teacher top-k")
                                  : distill_topk_part(x, g, mbt, b, rows, n, &tp);
        if (s0) return s0;
    } else copy_rows(b, b->teacher_logp, rows, n, w->ref);
    rl_distill_out o;
    vc_status st = rl_distill_tokens(dc, c->pg.agg, &x->norm, w->logp, w->ref, w->old, w->mask, c->use_is ? w->isw : NULL,
                                     n, b->T, w->kl, w->dkl, w->tmp, w->dd, &o);
    if (st) return st;
    acc *a = &x->dist;
    a->sum[D_LOSS] += o.loss; /* verl's metric: before the coefficient */
    a->sum[D_ABS] += o.abs_loss;
    a->sum[D_PPOKL] += o.ppo_kl;
    a->sum[D_CLIP] += o.pg_clipfrac;
    a->sum[D_CLIPLO] += o.pg_clipfrac_lower;
    a->sum[D_MIN] = fmin(a->sum[D_MIN], o.loss_min);
    a->sum[D_MAX] = fmax(a->sum[D_MAX], o.loss_max);
    a->n++;
    double coef = dc->use_task_rewards ? dc->coef : 1.0;
    if (!dc->use_task_rewards) { /* the distillation loss alone */
        memset(w->d, 0, sizeof(float) * nt);
        memset(w->dent, 0, sizeof(float) * nt);
    }
    if (dc->topk && !dc->use_pg && tp.P) { /* the gradient reaches the student through its top-k log-probs */
        float *wk = vc_graph_alloc(g, sizeof(float) * (size_t)(tp.P * b->tk_k), 0);
        if (!wk) return graph_err(g);
        for (int64_t q = 0; q < tp.P; q++)
            for (int k = 0; k < b->tk_k; k++)
                wk[q * b->tk_k + k] = (float)coef * w->dd[tp.at[q]] * tp.ds[q * b->tk_k + k];
        if (!(*extra = vc_op_dot_const(g, tp.lsg, wk))) return graph_err(g);
        return VC_OK; /* the policy loss's own gradient stays in w->d */
    }
    for (size_t i = 0; i < nt; i++) w->d[i] += (float)coef * w->dd[i];
    return VC_OK;
}

/* distillation/ metrics: verl's loss (summed over a mini-batch's micro-batches, mean over mini-batches), its
 * mean absolute value (mean over micro-batches), range, and with use_policy_gradient the policy loss's */
static vc_status distill_metrics(const rl_dp *dp, const rl_actor_cfg *c, acc *a, int n_steps, rl_metrics *met) {
    vc_status st = VC_OK;
    if (dp && dp->world > 1) {
        double v[D_N_SUM + 1];
        for (int i = 0; i < D_N_SUM; i++) v[i] = a->sum[i];
        v[D_N_SUM] = a->n;
        st = vc_comm_allreduce_f64_ordered(dp->comm, v, D_N_SUM + 1, VC_SUM);
        static const int MINS[] = { D_MIN, D_SMIN, D_TMIN }, MAXS[] = { D_MAX, D_SMAX, D_TMAX };
        for (int i = 0; !st && i < 3; i++) st = vc_comm_allreduce_f64(dp->comm, &a->sum[MINS[i]], 1, VC_MIN);
        for (int i = 0; !st && i < 3; i++) st = vc_comm_allreduce_f64(dp->comm, &a->sum[MAXS[i]], 1, VC_MAX);
        for (int i = 0; !st && i < D_N_SUM; i++) a->sum[i] = v[i];
        if (!st) a->n = (int)v[D_N_SUM];
    }
    if (st || !a->n) return st;
    rl_metrics_set(met, "distillation/loss", a->sum[D_LOSS] / (n_steps > 0 ? n_steps : 1));
    if (c->dist.topk && a->sum[D_NPOS] > 0) { /* verl's top-k masses of the student and the teacher */
        rl_metrics_set(met, "distillation/student_mass", a->sum[D_SMASS] / a->sum[D_NPOS]);
        rl_metrics_set(met, "distillation/student_mass_min", a->sum[D_SMIN]);
        rl_metrics_set(met, "distillation/student_mass_max", a->sum[D_SMAX]);
        rl_metrics_set(met, "distillation/teacher_mass", a->sum[D_TMASS] / a->sum[D_NPOS]);
        rl_metrics_set(met, "distillation/teacher_mass_min", a->sum[D_TMIN]);
        rl_metrics_set(met, "distillation/teacher_mass_max", a->sum[D_TMAX]);
        rl_metrics_set(met, "distillation/overlap_ratio", a->sum[D_OVN] / a->sum[D_NPOS] / c->dist.topk);
        rl_metrics_set(met, "distillation/overlap_token_advantage",
                       a->sum[D_OVPOS] > 0 ? a->sum[D_OVADV] / a->sum[D_OVPOS] : 0.0);
    } else if (!c->dist.topk) rl_metrics_set(met, "distillation/abs_loss", a->sum[D_ABS] / a->n);
    rl_metrics_set(met, "distillation/loss_min", a->sum[D_MIN]);
    rl_metrics_set(met, "distillation/loss_max", a->sum[D_MAX]);
    if (c->dist.use_pg) {
        rl_metrics_set(met, "distillation/ppo_kl", a->sum[D_PPOKL] / a->n);
        rl_metrics_set(met, "distillation/pg_clipfrac", a->sum[D_CLIP] / a->n);
        rl_metrics_set(met, "distillation/pg_clipfrac_lower", a->sum[D_CLIPLO] / a->n);
    }
    return VC_OK;
}

static void probs_diff_acc(const rl_batch *b, const int *rows, int n, mb_buf *w, acc *a) {
    size_t nt = (size_t)n * b->T;
    copy_rows(b, b->rollout_logp, rows, n, w->tmp);
    for (size_t i = 0; i < nt; i++)
        if (w->mask[i] > 0) {
            double dlt = fabs(exp(w->logp[i]) - exp(w->tmp[i]));
            a->sum[A_DIFF_SUM] += dlt;
            a->sum[A_DIFF_N] += 1;
            if (dlt > a->sum[A_DIFF_MAX]) a->sum[A_DIFF_MAX] = dlt;
        }
}

/* the actor's rollout_corr/ metric names (rl_rc_finalize of nothing), the same on every rank */
static unsigned actor_rc_parts(const rl_rc_cfg *c) { return c->bypass ? RL_RC_IS | RL_RC_RS | RL_RC_OFF : RL_RC_OFF; }

static void actor_rc_names(const rl_rc_cfg *c, rl_rc_out *o) {
    rl_rc_raw r;
    rl_rc_raw_init(&r);
    rl_rc_finalize(c, actor_rc_parts(c), &r, o);
    if (c->bypass && c->is_level && c->is_norm) rl_rc_out_add(o, "rollout_is_batch_norm_factor", 0);
    for (int i = 0; i < o->n; i++) o->v[i] = 0;
}

/* Rollout correction inside the actor: in bypass mode (verl's compute_policy_loss_bypass_mode) the
 * current log-probs against the rollout's (w->old) give this micro-batch's importance weights (w->isw,
 * used by the reinforce loss) and rejection mask (w->keep); otherwise only the off-policy diagnostics
 * of the current policy. The metrics are summed into x->rc, averaged over micro-batches at the end. */
static vc_status actor_rc(step_ctx *x, const rl_actor_cfg *c, const rl_batch *b, const int *rows, int n) {
    const rl_rc_cfg *rc = &c->rc;
    mb_buf *w = &x->w;
    size_t nt = (size_t)n * b->T;
    rl_rc_raw *r = vc_malloc(sizeof *r);
    rl_rc_out *o = vc_malloc(sizeof *o);
    if (!r || !o) {
        free(r);
        free(o);
        return VC_ERR_NOMEM;
    }
    rl_rc_raw_init(r);
    if (!rc->bypass) copy_rows(b, b->rollout_logp, rows, n, w->tmp);
    rl_rc_accum(rc, actor_rc_parts(rc), w->logp, rc->bypass ? w->old : w->tmp, w->mask, n, b->T, r, w->isw, w->keep);
    rl_rc_finalize(rc, actor_rc_parts(rc), r, o);
    if (rc->bypass && rc->is_level && rc->is_norm) {
        double v[2];
        rl_rc_norm_sums(rc, w->isw, w->mask, n, b->T, v);
        rl_rc_out_add(o, "rollout_is_batch_norm_factor", rl_rc_normalise(w->isw, nt, v, rc->is_level == RL_RIS_SEQUENCE));
    }
    for (int i = 0; i < o->n && i < x->rc->n; i++) x->rc->v[i] += o->v[i];
    x->rc_n++;
    free(r);
    free(o);
    return VC_OK;
}

/* vc_token_loss_fn: policy loss (+ KL loss, - entropy bonus) of one micro-batch */
static vc_status actor_loss(void *ctx, vc_graph *g, const vc_micro_batch *mbt, vc_tensor *lp, vc_tensor *ent,
                            vc_tensor **loss) {
    step_ctx *x = ctx;
    const rl_actor_cfg *c = x->cfg;
    rl_batch *b = x->b;
    mb_buf *w = &x->w;
    rl_mb mb;
    vc_status st = mb_view(g, mbt, x->rows, &mb);
    if (st) return st;
    int n = mb.n;
    const int *rows = mb.rows;
    size_t nt = (size_t)n * b->T;
    /* log-probs and entropies live in backend memory: host copies feed the host-side loss */
    float *hl = NULL, *he = NULL;
    if ((st = rl_host_copy(g, lp, &hl)) || (st = rl_host_copy(g, ent, &he))) return st;
    rl_mb_gather(b, &mb, hl, w->logp, 0);
    rl_mb_gather(b, &mb, he, w->ent, 0);
    copy_rows(b, b->adv, rows, n, w->adv);
    copy_rows(b, b->mask, rows, n, w->mask);
    if (x->on_policy) memcpy(w->old, w->logp, sizeof(float) * nt);
    else copy_rows(b, b->old_logp, rows, n, w->old);
    if (x->on_policy && x->first_epoch) probs_diff_acc(b, rows, n, w, &x->a);
    vc_pg_config pg = c->pg;
    vc_agg_norm nm = c->legacy ? legacy_norm(x) : x->norm;
    double f = c->legacy ? legacy_scale(x, n) : 1.0;
    pg.norm = nm;
    pg.seed = c->seed;
    pg.draw = (uint64_t)x->opt_step << 32 | (uint64_t)(x->g_off & 0xfffff) << 12 | (uint64_t)(x->micro++ & 0xfff);
    double pg_loss = 0, ent_loss = 0, kl_loss = 0;
    vc_pg_metrics pm;
    vc_pg_mode mode = c->mode;
    const float *isw = NULL, *pmask = w->mask;
    if (c->use_is) {
        copy_rows(b, b->is_w, rows, n, w->isw);
        isw = w->isw;
    }
    if (x->rc && (st = actor_rc(x, c, b, rows, n))) return st;
    if (c->rc.bypass) {
        /* ppo_clip: the ratio to the rollout policy is the correction (no weights); reinforce: the
         * weights scale -A log pi. Rejected tokens leave the policy loss (not the KL or entropy terms). */
        mode = c->rc.reinforce ? VC_PG_REINFORCE : VC_PG_VANILLA;
        isw = c->rc.reinforce && c->rc.is_level ? w->isw : NULL;
        if (c->rc.n_rs) {
            for (size_t i = 0; i < nt; i++) w->keep[i] *= w->mask[i];
            pmask = w->keep;
        }
    }
    st = vc_policy_loss(mode, w->old, w->logp, w->adv, pmask, n, b->T, &pg, isw, &pg_loss, &pm, w->d);
    if (!st) st = vc_agg_loss(w->ent, w->mask, n, b->T, c->pg.agg, &nm, &ent_loss, w->dent);
    double ent_glob = ent_loss; /* by the mini-batch's normalisers: legacy mode's actor/entropy unless
                                  * rl_legacy_update_entropy */
    if (!st && c->legacy) st = vc_agg_loss(w->ent, w->mask, n, b->T, c->pg.agg, &x->norm, &ent_glob, NULL);
    if (st) return st;
    if (c->use_kl_loss) {
        copy_rows(b, b->ref_logp, rows, n, w->ref);
        vc_kl_penalty(c->kl_spec, w->logp, w->ref, nt, w->kl, w->dkl);
        if ((st = vc_agg_loss(w->kl, w->mask, n, b->T, c->pg.agg, &nm, &kl_loss, w->tmp))) return st;
        for (size_t i = 0; i < nt; i++) w->d[i] += (float)(c->kl_coef * w->tmp[i] * w->dkl[i]);
    }
    for (size_t i = 0; i < nt; i++) w->dent[i] *= (float)-c->entropy_coeff;
    if (c->legacy)
        for (size_t i = 0; i < nt; i++) {
            w->d[i] = (float)(w->d[i] * f);
            w->dent[i] = (float)(w->dent[i] * f);
        }
    vc_tensor *dist_term = NULL; /* forward_kl_topk's loss over the student's top-k log-probs */
    if (c->dist.on && (st = distill_loss(x, c, b, rows, n, g, mbt, &dist_term))) return st;
    float *wl = rl_mb_scatter(g, b, &mb, w->d), *we = c->entropy_coeff ? rl_mb_scatter(g, b, &mb, w->dent) : NULL;
    if (!wl || (c->entropy_coeff && !we)) return graph_err(g);
    vc_tensor *L = vc_op_dot_const(g, lp, wl);
    if (c->entropy_coeff) L = vc_op_add(g, L, vc_op_dot_const(g, ent, we));
    if (dist_term) L = vc_op_add(g, L, dist_term);
    if (!L) return graph_err(g);
    acc *a = &x->a;
    /* legacy: verl's metric sums the scaled losses of every micro-batch, the entropy bonus in them (its dp_actor
     * subtracts that from the policy loss in place before reading it) */
    a->sum[A_PG] += c->legacy ? (pg_loss - (c->entropy_coeff ? c->entropy_coeff * ent_loss : 0)) * f : pg_loss;
    a->sum[A_ENT] += ent_loss;
    a->sum[A_ENTG] += ent_glob;
    a->sum[A_KL] += kl_loss * f;
    a->sum[A_PPOKL] += pm.ppo_kl;
    a->sum[A_CLIP] += pm.pg_clipfrac;
    a->sum[A_CLIPLO] += pm.pg_clipfrac_lower;
    a->n++;
    *loss = L;
    return VC_OK;
}

vc_status rl_update_actor(vc_trainer *tr, rl_batch *b, const rl_actor_cfg *c, int on_policy, rl_metrics *met) {
    return rl_update_actor_dp(tr, b, c, on_policy, NULL, met);
}

vc_status rl_update_actor_dp(vc_trainer *tr, rl_batch *b, const rl_actor_cfg *c, int on_policy, const rl_dp *dp,
                             rl_metrics *met) {
    /* the legacy workers take the mini-batches in order whatever actor.shuffle says (DataProto.split) */
    loop l = { c->ppo_epochs, c->mini_rows, c->micro_rows,   c->shuffle && !c->legacy, c->max_tokens, c->seed,
               "actor",        1,            c->legacy,       c->resp_width, c->scale_len };
    step_ctx x = { .b = b, .cfg = c, .on_policy = on_policy, .model = tr->model, .temperature = tr->cfg.temperature,
                   .dist = { .sum = { [D_MIN] = INFINITY, [D_MAX] = -INFINITY, [D_SMIN] = INFINITY, [D_SMAX] = -INFINITY,
                                      [D_TMIN] = INFINITY, [D_TMAX] = -INFINITY } } };
    double gn = 0, lr = 0;
    int n_steps = 0;
    tr->cfg.agg = c->pg.agg;
    vc_status st = VC_OK;
    if (c->rc.bypass || c->rc.offpolicy) {
        if (!(x.rc = vc_malloc(sizeof *x.rc))) return VC_ERR_NOMEM;
        actor_rc_names(&c->rc, x.rc);
    }
    st = run_loop(tr, b, &l, actor_loss, &x, dp, &gn, &lr, &n_steps);
    if (!st) st = acc_reduce(dp, &x.a, A_DIFF_MAX + 1, A_DIFF_MAX);
    if (!st && x.rc) st = rc_reduce(dp, x.rc, x.rc_n, met);
    free(x.rc);
    if (!st && tr->cfg.share_prefix) { /* verlc's: the update's prompt tokens not recomputed, all ranks */
        if (dp && dp->world > 1) st = vc_comm_allreduce_f64_ordered(dp->comm, &x.shared, 1, VC_SUM);
        if (!st) rl_metrics_set(met, "perf/prefix_shared_tokens", x.shared);
    }
    const acc *a = &x.a;
    if (!st && c->dist.on) st = distill_metrics(dp, c, &x.dist, n_steps, met);
    if (!st && a->n) {
        /* micro-batch losses are partial sums of the mini-batch loss: report per mini-batch means (the legacy
         * workers: the sums of the scaled losses over every mini-batch and epoch; the micro-batches' mean entropy
         * where they compute it, else the mini-batches' as the old policy's pass would give it on policy) */
        double per = (double)n_steps, lper = c->legacy ? 1.0 : per;
        rl_metrics_set(met, "actor/pg_loss", a->sum[A_PG] / lper);
        rl_metrics_set(met, "actor/entropy", rl_legacy_update_entropy(c) ? a->sum[A_ENT] / a->n : a->sum[A_ENTG] / per);
        if (c->use_kl_loss) rl_metrics_set(met, "actor/kl_loss", a->sum[A_KL] / lper);
        rl_metrics_set(met, "actor/kl_coef", c->use_kl_loss ? c->kl_coef : 0);
        rl_metrics_set(met, "actor/ppo_kl", a->sum[A_PPOKL] / a->n);
        if (c->mode != VC_PG_DRO) { /* verl's dro reports ppo_kl alone */
            rl_metrics_set(met, "actor/pg_clipfrac", a->sum[A_CLIP] / a->n);
            rl_metrics_set(met, "actor/pg_clipfrac_lower", a->sum[A_CLIPLO] / a->n);
        }
        rl_metrics_set(met, "actor/grad_norm", gn / per);
        rl_metrics_set(met, "actor/lr", lr);
        for (int k = 0; tr->cfg.mtp_train && k < vc_model_cfg(tr->model)->n_mtp; k++) { /* (verl's mtp_losses) */
            char key[64];
            snprintf(key, sizeof key, "actor/mtp_losses/mtp_%d_loss", k + 1);
            rl_metrics_set(met, key, x.mtp[k] / per);
        }
        if (on_policy && a->sum[A_DIFF_N] > 0) {
            rl_metrics_set(met, "training/rollout_probs_diff_mean", a->sum[A_DIFF_SUM] / a->sum[A_DIFF_N]);
            rl_metrics_set(met, "training/rollout_probs_diff_max", a->sum[A_DIFF_MAX]);
        }
    }
    return st;
}

/* ---- critic ---- */
/* vc_token_loss_fn with loss_on_hidden: value head on the hidden states, clipped value loss */
static vc_status critic_loss(void *ctx, vc_graph *g, const vc_micro_batch *mbt, vc_tensor *h, vc_tensor *ent,
                             vc_tensor **loss) {
    (void)ent;
    step_ctx *x = ctx;
    const rl_critic_cfg *c = x->cfg;
    rl_batch *b = x->b;
    mb_buf *w = &x->w;
    rl_mb mb;
    vc_status st = mb_view(g, mbt, x->rows, &mb);
    if (st) return st;
    int n = mb.n;
    vc_tensor *v = vc_op_linear(g, h, &x->cr->head_w, &x->cr->head_b);
    if (v) v = vc_reshape(g, v, 1, (int64_t[]){ v->n });
    if (!v) return graph_err(g);
    float *hv = NULL;
    if ((st = rl_host_copy(g, v, &hv))) return st;
    rl_mb_gather(b, &mb, hv, w->logp, 0);
    copy_rows(b, b->ret, mb.rows, n, w->adv);
    copy_rows(b, b->values, mb.rows, n, w->old);
    copy_rows(b, b->mask, mb.rows, n, w->mask);
    double vf = 0, clipfrac = 0, f = c->legacy ? legacy_scale(x, n) : 1.0;
    vc_agg_norm nm = c->legacy ? legacy_norm(x) : x->norm;
    st = vc_value_loss(w->logp, w->adv, w->old, w->mask, n, b->T, (float)c->cliprange_value, c->agg, &nm, &vf,
                       &clipfrac, w->d);
    if (st) return st;
    if (c->legacy)
        for (size_t i = 0; i < (size_t)n * b->T; i++) w->d[i] = (float)(w->d[i] * f);
    float *wv = rl_mb_scatter(g, b, &mb, w->d);
    vc_tensor *L = wv ? vc_op_dot_const(g, v, wv) : NULL;
    if (!L) return graph_err(g);
    x->a.sum[0] += vf * f;
    x->a.sum[1] += clipfrac;
    x->a.sum[2] += vc_masked_mean(w->logp, w->mask, (size_t)n * b->T);
    x->a.n++;
    *loss = L;
    return VC_OK;
}

vc_status rl_update_critic(vc_trainer *tr, rl_critic *cr, rl_batch *b, const rl_critic_cfg *c, rl_metrics *met) {
    return rl_update_critic_dp(tr, cr, b, c, NULL, met);
}

vc_status rl_update_critic_dp(vc_trainer *tr, rl_critic *cr, rl_batch *b, const rl_critic_cfg *c, const rl_dp *dp,
                              rl_metrics *met) {
    loop l = { c->ppo_epochs, c->mini_rows, c->micro_rows, c->shuffle && !c->legacy, c->max_tokens, c->seed, "critic", 0,
               c->legacy,       c->resp_width };
    step_ctx x = { .b = b, .cfg = c, .cr = cr };
    double gn = 0, lr = 0;
    int n_steps = 0;
    tr->cfg.agg = c->agg;
    vc_status st = run_loop(tr, b, &l, critic_loss, &x, dp, &gn, &lr, &n_steps);
    if (!st) st = acc_reduce(dp, &x.a, 3, -1);
    if (!st && x.a.n) {
        rl_metrics_set(met, "critic/vf_loss", x.a.sum[0] / (c->legacy ? 1 : n_steps)); /* legacy: as actor/pg_loss */
        rl_metrics_set(met, "critic/vf_clipfrac", x.a.sum[1] / x.a.n);
        rl_metrics_set(met, "critic/vpred_mean", x.a.sum[2] / x.a.n);
        rl_metrics_set(met, "critic/grad_norm", gn / n_steps);
        rl_metrics_set(met, "critic/lr", lr);
    }
    return st;
}
