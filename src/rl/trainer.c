/* The trainer: configuration (verl's keys), set-up of models, tokenizer, datasets and reward, and the
 * fit loop (verl's RayPPOTrainer.fit). */
#include "trainer_internal.h"
#include "verlc/tracking.h"
#include "verlc/chat_template.h"
#include "verlc/image.h"
#include "verlc/vision.h"
#include "data/vl_rows.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "verlc/rng.h"
#include "verlc/tokenizer.h"
#include <math.h>
#include <stdlib.h>
#include "verlc/perf.h"
#include "verlc/cuda.h"
#include "tensor/backend.h"
#include <string.h>
#include <sys/stat.h>

static const char *ADV_NAMES[] = { "gae", "grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
                                   "remax", "opo", "gpg", "grpo_vectorized", "rloo_vectorized", "grpo_passk",
                                   "optimal_token_baseline", "tir_optimal_token_baseline", "gdpo", NULL };

#define TRY(x) do { if (!st) st = (x); } while (0)

static vc_status get_int(const vc_config *c, const char *k, int64_t def, int64_t *v) { return vc_config_get_int_or(c, k, def, v); }

static vc_status read_rollout(vc_rl_trainer *t, const vc_config *c) {
    vc_status st = VC_OK;
    int64_t n = 1, bs = 0, maxr = 0, topk = -1, vn = 1, fwd = 0;
    double temp = 1, topp = 1, vtemp = 0, vtopp = 1;
    int64_t vtopk = -1, max_seqs = 0, mbt = 8192;
    int vsample = 0, sample = 1;
    TRY(get_int(c, "actor_rollout_ref.rollout.n", 1, &n));
    TRY(get_int(c, "data.train_batch_size", 8, &bs));
    TRY(get_int(c, "data.max_response_length", 512, &maxr));
    TRY(get_int(c, "actor_rollout_ref.rollout.response_length", maxr, &maxr));
    TRY(vc_config_get_bool_or(c, "actor_rollout_ref.rollout.do_sample", 1, &sample));
    TRY(vc_config_get_double_or(c, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.3, &t->kv_fraction));
    TRY(get_int(c, "actor_rollout_ref.rollout.max_num_seqs", 0, &max_seqs));
    TRY(get_int(c, "actor_rollout_ref.rollout.max_num_batched_tokens", 8192, &mbt));
    TRY(vc_config_get_double_or(c, "actor_rollout_ref.rollout.temperature", 1.0, &temp));
    TRY(vc_config_get_bool_or(c, "actor_rollout_ref.rollout.enable_prefix_caching", 1, &t->prefix_cache));
    TRY(vc_config_get_double_or(c, "actor_rollout_ref.rollout.top_p", 1.0, &topp));
    TRY(get_int(c, "actor_rollout_ref.rollout.top_k", -1, &topk));
    TRY(vc_config_get_bool_or(c, "actor_rollout_ref.rollout.val_kwargs.do_sample", 0, &vsample));
    TRY(vc_config_get_double_or(c, "actor_rollout_ref.rollout.val_kwargs.temperature", 0, &vtemp));
    TRY(vc_config_get_double_or(c, "actor_rollout_ref.rollout.val_kwargs.top_p", 1, &vtopp));
    TRY(get_int(c, "actor_rollout_ref.rollout.val_kwargs.top_k", -1, &vtopk));
    TRY(get_int(c, "actor_rollout_ref.rollout.val_kwargs.n", 1, &vn));
    TRY(get_int(c, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", 16384, &fwd));
    /* the token budgets of the reference, value and reward-model passes (verl's keys; memory, not results) */
    int64_t ref_fwd = 0, crit_fwd = 0, rm_fwd = 0;
    TRY(get_int(c, "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", 16384, &ref_fwd));
    TRY(get_int(c, "critic.forward_max_token_len_per_gpu", 32768, &crit_fwd));
    TRY(get_int(c, "reward_model.forward_max_token_len_per_gpu", crit_fwd, &rm_fwd));
    const char *lpm = "processed_logprobs";
    TRY(vc_config_get_str_or(c, "actor_rollout_ref.rollout.logprobs_mode", "processed_logprobs", &lpm));
    if (st) return st;
    if (strcmp(lpm, "processed_logprobs") && strcmp(lpm, "raw_logprobs"))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.rollout.logprobs_mode: `%s` is not processed_logprobs or "
                                   "raw_logprobs (the rollout's log-probs are the trainer's, not logits)", lpm);
    t->raw_logprobs = !strcmp(lpm, "raw_logprobs");
    if (n < 1) return vc_fail(VC_ERR_ARG, "actor_rollout_ref.rollout.n must be >= 1 (got %lld)", (long long)n);
    if (bs < 1) return vc_fail(VC_ERR_ARG, "data.train_batch_size must be >= 1 (got %lld)", (long long)bs);
    if (maxr < 1) return vc_fail(VC_ERR_ARG, "data.max_response_length must be >= 1 (got %lld)", (long long)maxr);
    if (temp < 0) return vc_fail(VC_ERR_ARG, "actor_rollout_ref.rollout.temperature must be >= 0");
    if (!(t->kv_fraction > 0 && t->kv_fraction <= 1))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.rollout.gpu_memory_utilization must be in (0, 1] (got %g)",
                       t->kv_fraction);
    /* verl's rollout.max_num_seqs (its generated defaults give 256); 0 or null takes that too, not the engine's 64 */
    if (max_seqs < 0 || max_seqs >= 1 << 20)
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.rollout.max_num_seqs must be in [0, 2^20) (got %lld)",
                       (long long)max_seqs);
    t->max_seqs = max_seqs > 0 ? (int)max_seqs : 256;
    if (mbt < 1 || mbt > 1 << 24)
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.rollout.max_num_batched_tokens must be in [1, 2^24] (got %lld)",
                       (long long)mbt);
    t->prefill_chunk = (int)mbt;
    t->n = (int)n;
    t->batch_prompts = (int)bs;
    t->max_resp = maxr;
    t->fwd_tokens = fwd;
    t->ref_tokens = ref_fwd;
    t->critic_tokens = crit_fwd;
    t->rm_tokens = rm_fwd;
    t->samp = (vc_sampling){ .greedy = temp == 0 || !sample, .temperature = (float)(temp > 0 ? temp : 1), .top_k = (int)topk,
                             .top_p = (float)topp, .max_new_tokens = (int)maxr, .eos_ids = t->eos };
    t->val_samp = (vc_sampling){ .greedy = !vsample || vtemp == 0, .temperature = (float)(vtemp > 0 ? vtemp : 1),
                                 .top_k = (int)vtopk, .top_p = (float)vtopp, .max_new_tokens = (int)maxr, .eos_ids = t->eos };
    t->val_n = vsample ? (int)vn : 1;
    return VC_OK;
}

/* verl features whose non-default values change what is trained and that verlc does not have: refused,
 * not ignored */
static vc_status refuse_unimplemented(const vc_config *c) {
    static const struct { const char *key, *why; } BOOLS[] = {
        { "actor_rollout_ref.rollout.skip_rollout", "replaying dumped rollouts is not implemented" },
    };
    for (size_t i = 0; i < sizeof BOOLS / sizeof BOOLS[0]; i++) {
        int v = 0;
        vc_status st = vc_config_get_bool_or(c, BOOLS[i].key, 0, &v);
        if (st) return st;
        if (v) return vc_fail(VC_ERR_UNSUPPORTED, "%s=true: %s", BOOLS[i].key, BOOLS[i].why);
    }
    return VC_OK;
}

/* <prefix>lora_rank, lora_alpha, target_modules (all-linear, or a list of module names) and
 * exclude_modules; LoRA trains with plain data parallelism or ZeRO-1, so zero_key must say < 2 */
static vc_status read_lora_opts(const vc_config *c, const char *prefix, const char *zero_key, rl_lora_opts *o) {
    char k[128], *tg = o->targets;
    int64_t rank = 0, zero = 0;
    /* verl's megatron strategy names them model.lora.{rank, alpha, target_modules, exclude_modules} */
    char mp[64];
    snprintf(mp, sizeof mp, "%s", prefix);
    char *dot = strchr(mp, '.');
    if (dot) *dot = 0;
    int mg = rl_strategy_megatron(c, !strcmp(mp, "critic") ? "critic" : "actor_rollout_ref.actor");
    const char *K_RANK = mg ? "lora.rank" : "lora_rank", *K_ALPHA = mg ? "lora.alpha" : "lora_alpha";
    const char *K_TARGET = mg ? "lora.target_modules" : "target_modules", *K_EXCL = mg ? "lora.exclude_modules" : "exclude_modules";
    snprintf(k, sizeof k, "%s%s", prefix, K_RANK);
    vc_status st = vc_config_get_int_or(c, k, 0, &rank);
    if (st || rank <= 0) return st;
    if (mg) { /* Megatron-bridge's plain LoRA without dropout is what verlc trains */
        const char *type = NULL;
        double dropout = 0;
        snprintf(k, sizeof k, "%slora.type", prefix);
        if (!(st = vc_config_get_str_or(c, k, "lora", &type)) && strcmp(type, "lora"))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: verlc trains plain LoRA adapters", k, type);
        snprintf(k, sizeof k, "%slora.dropout", prefix);
        if (!st && !(st = vc_config_get_double_or(c, k, 0, &dropout)) && dropout != 0)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s=%g: LoRA dropout is not built in", k, dropout);
        if (st) return st;
        snprintf(k, sizeof k, "%s%s", prefix, K_RANK);
    }
    if (rank > 4096) return vc_fail(VC_ERR_ARG, "%s=%lld is too large", k, (long long)rank);
    if ((st = vc_config_get_int_or(c, zero_key, 0, &zero))) return st;
    if (zero >= 2)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s with %s=%lld: LoRA trains with plain data parallelism or ZeRO-1", k,
                       zero_key, (long long)zero);
    o->rank = (int)rank;
    snprintf(k, sizeof k, "%s%s", prefix, K_ALPHA);
    if ((st = vc_config_get_double_or(c, k, 16, &o->alpha))) return st;
    snprintf(k, sizeof k, "%s%s", prefix, K_TARGET);
    snprintf(tg, sizeof o->targets, "all-linear");
    size_t nt = 0;
    if (vc_config_has(c, k) && (st = vc_config_list_len(c, k, &nt))) return st;
    for (size_t i = 0; i < nt; i++) {
        const char *s = NULL;
        if ((st = vc_config_list_str(c, k, i, &s))) return st;
        size_t at = i ? strlen(tg) : 0;
        if (s) snprintf(tg + at, sizeof o->targets - at, "%s%s", i ? "," : "", s);
    }
    if (!nt && vc_config_kind(c, k) == VC_CFG_LIST) snprintf(tg, sizeof o->targets, "[]"); /* no module */
    /* later verl's target_parameters (PEFT's: parameters that are not nn.Linear, the routed experts' fused
     * tensors and the router), a list of names */
    snprintf(k, sizeof k, "%starget_parameters", prefix);
    nt = 0;
    if (!mg && vc_config_kind(c, k) == VC_CFG_LIST && (st = vc_config_list_len(c, k, &nt))) return st;
    for (size_t i = 0; i < nt; i++) {
        const char *s = NULL;
        if ((st = vc_config_list_str(c, k, i, &s))) return st;
        size_t at = strlen(o->params);
        if (s) snprintf(o->params + at, sizeof o->params - at, "%s%s", at ? "," : "", s);
    }
    if (!mg && vc_config_has(c, k) && vc_config_kind(c, k) != VC_CFG_LIST)
        return vc_fail(VC_ERR_ARG, "%s: expected a list of parameter names (e.g. [mlp.experts.gate_up_proj, "
                                   "mlp.experts.down_proj])", k);
    /* exclude_modules: a string is a regular expression (PEFT); a list names modules, matched at the end of
     * their paths */
    snprintf(k, sizeof k, "%s%s", prefix, K_EXCL);
    if (vc_config_kind(c, k) == VC_CFG_LIST) {
        size_t ne = 0;
        if ((st = vc_config_list_len(c, k, &ne))) return st;
        snprintf(o->exclude, sizeof o->exclude, "(.*\\.)?(");
        for (size_t i = 0; i < ne; i++) {
            const char *s = NULL;
            if ((st = vc_config_list_str(c, k, i, &s))) return st;
            size_t at = strlen(o->exclude);
            snprintf(o->exclude + at, sizeof o->exclude - at, "%s%s", i ? "|" : "", s ? s : "");
        }
        size_t at = strlen(o->exclude);
        snprintf(o->exclude + at, sizeof o->exclude - at, ")");
    } else if (vc_config_has(c, k)) {
        const char *s = NULL;
        if ((st = vc_config_get_str(c, k, &s))) return st;
        snprintf(o->exclude, sizeof o->exclude, "%s", s ? s : "");
    }
    return VC_OK;
}

/* actor_rollout_ref.actor.fsdp_config.qat: the actor's linears fake-quantized to NVFP4 for its rollout, log-prob
 * passes and updates (the reference model, loaded apart, computes in full precision, as verl's forward-only one) */
static vc_status actor_qat(vc_rl_trainer *t, const vc_config *cfg) {
#define QAT "actor_rollout_ref.actor.fsdp_config.qat."
    vc_qat_opts o;
    int64_t zero = 0;
    vc_status st = vc_config_get_int_or(cfg, "actor_rollout_ref.actor.zero_stage", 0, &zero);
    if (!st) st = vc_qat_opts_read(cfg, QAT, &o);
    if (st) return st;
    st = vc_qat_setup(t->actor, &o, QAT, zero == 3, t->verbose);
    vc_qat_opts_free(&o);
    return st;
#undef QAT
}

/* actor_rollout_ref.model.lora_rank > 0: adapters on the actor (frozen base weights), from
 * lora_adapter_path when given (PEFT's adapter_model.safetensors) */
vc_status rl_attach_actor_lora(vc_rl_trainer *t, const vc_config *c) {
#define M "actor_rollout_ref.model."
    rl_lora_opts o = { .alpha = 16, .seed = t->seed ^ 0x6c6f7261u };
    const char *from = NULL;
    vc_status st = read_lora_opts(c, M, "actor_rollout_ref.actor.zero_stage", &o);
    if (st || o.rank <= 0) return st;
    if (!st) st = vc_config_get_str_or(c, rl_strategy_megatron(c, "actor_rollout_ref.actor") ? M "lora.adapter_path"
                                                                                              : M "lora_adapter_path", NULL, &from);
    if (!st) st = rl_lora_attach(t->actor, &o);
    if (!st && from) st = vc_model_lora_load(t->actor, from);
    if (st) return vc_fail_ctx(st, M "lora_rank");
    t->lora_rank = o.rank;
    return VC_OK;
#undef M
}

/* algorithm.filter_groups (DAPO's dynamic sampling) and data.gen_batch_size */
static vc_status read_filter_groups(vc_rl_trainer *t, const vc_config *c) {
    int on = 0;
    int64_t mx = 0, gen = t->batch_prompts;
    const char *metric = NULL;
    vc_status st = vc_config_get_bool_or(c, "algorithm.filter_groups.enable", 0, &on);
    if (!st) st = vc_config_get_int_or(c, "algorithm.filter_groups.max_num_gen_batches", 0, &mx);
    if (!st) st = vc_config_get_str_or(c, "algorithm.filter_groups.metric", "acc", &metric);
    if (!st) st = vc_config_get_int_or(c, "data.gen_batch_size", t->batch_prompts, &gen);
    if (st || !on) return st;
    if (strcmp(metric, "acc") && strcmp(metric, "score") && strcmp(metric, "seq_reward") &&
        strcmp(metric, "seq_final_reward"))
        return vc_fail(VC_ERR_ARG, "algorithm.filter_groups.metric must be acc, score, seq_reward or seq_final_reward, "
                                   "got '%s'", metric);
    if (gen < 1 || gen > INT32_MAX) return vc_fail(VC_ERR_ARG, "data.gen_batch_size must be >= 1, got %lld", (long long)gen);
    if (!strcmp(t->adv, "remax"))
        return vc_fail(VC_ERR_UNSUPPORTED, "algorithm.filter_groups with adv_estimator=remax is not supported");
    t->filter_groups = 1;
    t->fg_acc = !strcmp(metric, "acc"); /* the score without the overlong penalty */
    snprintf(t->fg_key, sizeof t->fg_key, "%s", !strcmp(metric, "acc") || !strcmp(metric, "score") ? metric : "");
    t->fg_max = mx > INT32_MAX ? INT32_MAX : (int)mx;
    t->gen_prompts = (int)gen;
    return VC_OK;
}

/* algorithm.rollout_correction: importance weights (rollout_is), rejection sampling (rollout_rs), bypass
 * mode (loss_type ppo_clip or reinforce), and the off-policy diagnostics whenever rollout log-probs are
 * asked for (rollout.calculate_log_probs) or a correction is on */
static vc_status read_rollout_correction(vc_rl_trainer *t, const vc_config *c) {
#define RC "algorithm.rollout_correction."
    rl_rc_cfg *rc = &t->acfg.rc;
    const char *lvl = NULL, *rs = NULL, *rs_thr = NULL, *loss = "ppo_clip";
    int calc = 0;
    memset(rc, 0, sizeof *rc);
    vc_status st = vc_config_get_str_or(c, RC "rollout_is", NULL, &lvl);
    if (!st && vc_config_kind(c, RC "rollout_is_threshold") == VC_CFG_STR) { /* later verl: "lower_upper" (IcePop) */
        const char *spec = NULL;
        st = vc_config_get_str(c, RC "rollout_is_threshold", &spec);
        if (!st) st = rl_rollout_is_threshold_parse(spec ? spec : "", &rc->is_thr, &rc->is_lo);
    } else if (!st) st = vc_config_get_double_or(c, RC "rollout_is_threshold", 2.0, &rc->is_thr);
    if (!st) st = vc_config_get_bool_or(c, RC "rollout_is_batch_normalize", 0, &rc->is_norm);
    if (!st) st = vc_config_get_str_or(c, RC "rollout_rs", NULL, &rs);
    if (!st) st = vc_config_get_str_or(c, RC "rollout_rs_threshold", NULL, &rs_thr);
    if (!st) st = vc_config_get_bool_or(c, RC "bypass_mode", 0, &rc->bypass);
    if (!st) st = vc_config_get_str_or(c, RC "loss_type", "ppo_clip", &loss);
    if (!st) st = vc_config_get_bool_or(c, "actor_rollout_ref.rollout.calculate_log_probs", 0, &calc);
    if (!st) st = rl_rollout_is_parse(lvl, &rc->is_level);
    if (!st && rc->is_level && !(rc->is_thr > 0))
        st = vc_fail(VC_ERR_ARG, RC "rollout_is_threshold must be positive, got %g", rc->is_thr);
    if (!st) st = rl_rs_parse(rs, rs_thr, rc);
    if (!st && strcmp(loss, "ppo_clip") && strcmp(loss, "reinforce"))
        st = vc_fail(VC_ERR_ARG, RC "loss_type must be ppo_clip or reinforce, got '%s'", loss);
    rc->reinforce = !strcmp(loss, "reinforce");
    if (!st && rc->bypass && rc->reinforce && rc->is_norm && t->world > 1)
        st = vc_fail(VC_ERR_UNSUPPORTED, RC "rollout_is_batch_normalize in bypass mode normalises each "
                                        "micro-batch: not supported on several ranks");
    if (st) return st;
    rc->offpolicy = calc || rc->is_level || rc->n_rs || rc->bypass;
    /* decoupled mode: the trainer's weights scale the policy loss; bypass mode: the actor's own */
    t->acfg.use_is = rc->is_level != RL_RIS_OFF && !rc->bypass;
    if (rc->bypass && t->acfg.mode != VC_PG_VANILLA)
        vc_warn(RC "bypass_mode uses its own loss (%s): actor.policy_loss.loss_mode is not used", loss);
    return VC_OK;
#undef RC
}

/* later verl's skip.rollout: enable, dump_dir (~ the home directory), steps, action cache | repeat */
static vc_status read_skip(vc_rl_trainer *t, const vc_config *c) {
#define S "skip.rollout."
    const char *dir = NULL, *action = NULL, *proj = NULL;
    size_t n = 0;
    vc_status st = vc_config_get_bool_or(c, S "enable", 0, &t->skip_on);
    if (st || !t->skip_on) return st;
    TRY(vc_config_get_str_or(c, S "dump_dir", "~/.verl/rollout_dump", &dir));
    TRY(vc_config_get_str_or(c, S "action", "cache", &action));
    TRY(vc_config_get_str_or(c, "trainer.project_name", "verl_examples", &proj));
    if (!st && vc_config_kind(c, S "steps") == VC_CFG_LIST) st = vc_config_list_len(c, S "steps", &n);
    if (st) return st;
    if (strcmp(action, "cache") && strcmp(action, "repeat"))
        return vc_fail(VC_ERR_UNSUPPORTED, S "action=%s: rollout skipping supports cache and repeat", action);
    t->skip_repeat = !strcmp(action, "repeat");
    const char *home = getenv("HOME");
    if (dir[0] == '~' && (dir[1] == '/' || !dir[1])) snprintf(t->skip_dir, sizeof t->skip_dir, "%s%s", home ? home : "", dir + 1);
    else snprintf(t->skip_dir, sizeof t->skip_dir, "%s", dir);
    snprintf(t->project_name, sizeof t->project_name, "%s", proj ? proj : "");
    if (!(t->skip_steps = vc_calloc(n + 1, sizeof *t->skip_steps))) return VC_ERR_NOMEM;
    for (size_t i = 0; !st && i < n; i++) {
        double v = 0;
        if (!(st = vc_config_list_double(c, S "steps", i, &v)) && (v != (double)(int64_t)v || v < 0))
            st = vc_fail(VC_ERR_ARG, S "steps: %g is not a step number", v);
        t->skip_steps[i] = (int64_t)v;
    }
    t->skip_n = (int)n;
    if (!st && !n && t->verbose) vc_warn(S "enable=true with no steps: nothing is skipped (verl acts on the listed steps)");
    return st;
#undef S
}

/* later verl's actor.router_replay.mode (or its megatron or veomni engine's): disabled, R2 (the old policy's routing
 * replayed in the update) or R3 (the rollout's: verlc's old-log-prob pass computes bitwise what the rollout
 * computed, so its routing is the rollout's and R3 is R2) */
static vc_status read_router_replay(vc_rl_trainer *t, const vc_config *c) {
    static const char *const KEYS[] = { "actor_rollout_ref.actor.router_replay.mode",
                                        "actor_rollout_ref.actor.megatron.router_replay.mode",
                                        "actor_rollout_ref.actor.veomni.router_replay.mode" };
    for (size_t i = 0; i < 3; i++) {
        const char *mode = NULL;
        vc_status st = vc_config_get_str_or(c, KEYS[i], "disabled", &mode);
        if (st) return st;
        if (!strcmp(mode, "R2") || !strcmp(mode, "R3")) t->router_replay = mode[1] - '0';
        else if (strcmp(mode, "disabled"))
            return vc_fail(VC_ERR_ARG, "%s=%s: must be one of disabled, R2, R3", KEYS[i], mode);
    }
    return VC_OK;
}

/* later verl's distillation.* (on-policy distillation): the loss and its teachers' keys (the models are
 * loaded with the actor) */
static vc_status read_distill(vc_rl_trainer *t, const vc_config *c) {
#define D "distillation.distillation_loss."
    rl_distill_cfg *d = &t->acfg.dist;
    const char *mode = NULL, *pmode = NULL, *tkey = NULL;
    double clamp = NAN, cr = 0.2, lo = 0.2, hi = 0.2, lpc = NAN;
    int64_t topk = 32, chunk = 4096;
    int chunked = 0;
    vc_status st = vc_config_get_bool_or(c, "distillation.enabled", 0, &d->on);
    if (st || !d->on) return st;
    TRY(vc_config_get_str_or(c, D "loss_mode", "k3", &mode));
    TRY(vc_config_get_bool_or(c, D "use_task_rewards", 1, &d->use_task_rewards));
    TRY(vc_config_get_double_or(c, D "distillation_loss_coef", 1.0, &d->coef));
    TRY(vc_config_get_double_or(c, D "loss_max_clamp", NAN, &clamp));
    TRY(vc_config_get_bool_or(c, D "use_policy_gradient", 0, &d->use_pg));
    TRY(vc_config_get_str_or(c, D "policy_loss_mode", "vanilla", &pmode));
    TRY(vc_config_get_double_or(c, D "clip_ratio", 0.2, &cr));
    TRY(vc_config_get_double_or(c, D "clip_ratio_low", 0.2, &lo));
    TRY(vc_config_get_double_or(c, D "clip_ratio_high", 0.2, &hi));
    TRY(vc_config_get_str_or(c, "distillation.teacher_key", "data_source", &tkey));
    TRY(get_int(c, D "topk", 32, &topk));
    TRY(vc_config_get_double_or(c, D "log_prob_min_clamp", NAN, &lpc));
    TRY(vc_config_get_bool_or(c, D "use_chunked_topk", 0, &chunked)); /* fields of later verl's dataclass */
    TRY(get_int(c, D "chunked_topk_chunk_size", 4096, &chunk));
    if (st) return st;
    if (chunked && chunk < 1)
        return vc_fail(VC_ERR_ARG, D "chunked_topk_chunk_size=%lld: at least 1", (long long)chunk);
    d->chunk_rows = chunked ? chunk : 0; /* else verlc's own chunks (it always chunks the student's head) */
    if (!strcmp(mode, "forward_kl_topk")) { /* the teachers' top-k distributions */
        if (topk < 1 || topk > 4096) return vc_fail(VC_ERR_ARG, D "topk=%lld: 1 .. 4096", (long long)topk);
        d->topk = (int)topk;
    } else if ((st = vc_kl_parse(mode, &d->spec)) || d->spec.straight_through)
        return vc_fail(VC_ERR_ARG, D "loss_mode=%s: one of kl, k1, abs, mse, k2, low_var_kl, k3, forward_kl_topk", mode);
    d->lp_min_clamp = lpc;
    if (strcmp(pmode, "vanilla")) /* as verl */
        return vc_fail(VC_ERR_UNSUPPORTED, D "policy_loss_mode=%s: only vanilla is supported", pmode);
    if (!d->use_pg && (!strcmp(mode, "k1") || !strcmp(mode, "kl")))
        return vc_fail(VC_ERR_ARG, D "loss_mode=%s with use_policy_gradient=false: the gradient of the k1 loss does "
                       "not depend on the teacher's log-probs (verl refuses it too)", mode);
    if (strcmp(tkey, "data_source"))
        return vc_fail(VC_ERR_UNSUPPORTED, "distillation.teacher_key=%s: verlc routes rows to teachers by their "
                       "data_source", tkey);
    d->clamp = isnan(clamp) ? 0 : clamp;
    d->pg = t->acfg.pg;
    d->pg.clip_ratio = cr;
    d->pg.clip_ratio_low = lo;
    d->pg.clip_ratio_high = hi;
    return VC_OK;
#undef D
}

/* distillation.teacher_models, as verl resolves them: one entry (`teacher_model`) is the teacher of every
 * row; with more, `teacher_model` is dropped and each other entry serves the rows whose data source is its
 * key. Each model_path loaded and checked against the actor's vocabulary. */
/* the actor's weights with verl's MTP layers (model.mtp.*): copied through (enable), trained (enable_train), drafting
 * the rollout's tokens (enable_rollout: speculative decoding, where verlc builds the family's MTP layers; elsewhere the
 * rollout samples without drafts, the same tokens) */
static vc_status load_actor(vc_rl_trainer *t, const vc_config *cfg, int mtp, int mtp_train) {
    int spec = 0, say = t->rank == 0;
    int64_t ns = 1;
    vc_status st = mtp ? vc_config_get_bool_or(cfg, "actor_rollout_ref.model.mtp.enable_rollout", 0, &spec) : VC_OK;
    /* the drafts a step: vLLM's num_speculative_tokens, or under rollout.name=sglang its EAGLE speculative_num_steps
     * (verlc drafts a chain: a speculative_eagle_topk over 1, SGLang's tree, is read as 1) */
    const char *engine = "vllm";
    if (!st && spec) st = vc_config_get_str_or(cfg, "actor_rollout_ref.rollout.name", "vllm", &engine);
    int sglang = !st && spec && engine && !strcmp(engine, "sglang");
    if (!st && spec)
        st = vc_config_get_int_or(cfg, sglang ? "actor_rollout_ref.model.mtp.speculative_num_steps"
                                              : "actor_rollout_ref.model.mtp.num_speculative_tokens", sglang ? 3 : 1, &ns);
    if (st) return st;
    st = mtp_train || spec ? vc_model_load_mtp(t->model_path, &t->actor) : vc_model_load(t->model_path, &t->actor);
    if (st == VC_ERR_UNSUPPORTED && spec && !mtp_train) { /* a family whose MTP layers verlc does not build */
        if (say) vc_info("actor_rollout_ref.model.mtp.enable_rollout=true: %s; the rollout samples every token without "
                         "drafts (the same tokens)", vc_last_error());
        vc_clear_error();
        spec = 0;
        st = vc_model_load(t->model_path, &t->actor);
    }
    if (st)
        return vc_fail_ctx(st, "actor_rollout_ref.model.%s (%s)", mtp_train ? "mtp.enable_train" : spec ?
                           "mtp.enable_rollout" : "path", t->model_path);
    const vc_model_config *c = vc_model_cfg(t->actor);
    if (mtp && !mtp_train && (st = vc_mtp_enable_check(t->actor, t->model_path, "actor_rollout_ref.model.mtp.enable", say)))
        return st;
    if (mtp_train && say)
        vc_info("actor_rollout_ref.model.mtp.enable_train=true: %d multi-token-prediction layer%s trained beside the "
                "policy loss", c->n_mtp, c->n_mtp == 1 ? "" : "s");
    if (spec && (ns < 1 || ns > VC_SPEC_MAX))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.model.mtp.%s=%lld: expected 1 to %d", sglang ?
                       "speculative_num_steps" : "num_speculative_tokens", (long long)ns, VC_SPEC_MAX);
    if (spec && say)
        vc_info("actor_rollout_ref.model.mtp.enable_rollout=true: the rollout drafts up to %lld token%s a step with the "
                "first MTP layer (speculative decoding; the tokens and log-probs are those of sampling without it)",
                (long long)ns, ns == 1 ? "" : "s");
    t->spec = spec ? (int)ns : 0;
    return VC_OK;
}

static vc_status load_teachers(vc_rl_trainer *t, const vc_config *c) {
    const char *M = "distillation.teacher_models";
    size_t n = 0;
    vc_status st = vc_config_map_len(c, M, &n);
    if (!st && !n) st = vc_fail(VC_ERR_ARG, "%s: no teacher model", M);
    t->teacher = st ? NULL : vc_calloc(n, sizeof *t->teacher);
    t->teacher_key = st ? NULL : vc_calloc(n, sizeof *t->teacher_key);
    if (!st && (!t->teacher || !t->teacher_key)) st = VC_ERR_NOMEM;
    for (size_t i = 0; !st && i < n; i++) {
        const char *name = NULL, *path = NULL, *key = NULL;
        char k[256];
        if ((st = vc_config_map_key(c, M, i, &name))) break;
        if (n > 1 && !strcmp(name, "teacher_model")) continue; /* verl pops the default entry */
        snprintf(k, sizeof k, "%s.%s.model_path", M, name);
        if (!(st = vc_config_get_str_or(c, k, NULL, &path)) && !path) st = vc_fail(VC_ERR_MISSING, "%s is not set", k);
        snprintf(k, sizeof k, "%s.%s.key", M, name);
        if (!st && n > 1) st = vc_config_get_str_or(c, k, NULL, &key); /* one teacher: every row's */
        if (!st && !key && n > 1) st = vc_fail(VC_ERR_MISSING, "%s is not set: with several teachers each names the "
                                                               "data source it serves", k);
        for (int j = 0; !st && j < t->n_teacher; j++)
            if (key && !strcmp(t->teacher_key[j], key)) st = vc_fail(VC_ERR_ARG, "%s=%s: a second teacher of it", k, key);
        int j = t->n_teacher;
        if (!st && (st = vc_model_load(path, &t->teacher[j]))) st = vc_fail_ctx(st, "%s.%s.model_path (%s)", M, name, path);
        const vc_model_config *tc = st ? NULL : vc_model_cfg(t->teacher[j]), *ac = vc_model_cfg(t->actor);
        if (tc && (tc->vocab != ac->vocab || vc_cfg_out_vocab(tc) != vc_cfg_out_vocab(ac)))
            st = vc_fail(VC_ERR_ARG, "%s.%s.model_path (%s): a vocabulary of %lld (LM head %lld), the actor's has %lld "
                         "(%lld)", M, name, path, (long long)tc->vocab, (long long)vc_cfg_out_vocab(tc),
                         (long long)ac->vocab, (long long)vc_cfg_out_vocab(ac));
        if (!st && !(t->teacher_key[j] = vc_strdup(key ? key : ""))) st = VC_ERR_NOMEM;
        if (!st) t->n_teacher++;
        else vc_model_free(t->teacher[j]), t->teacher[j] = NULL;
    }
    return st;
}

/* the deprecated global ppo_micro_batch_size under key: per rank, as verl's workers divide it by the ranks (0 unset) */
static int64_t deprecated_micro(const vc_config *c, const char *key, int world, vc_status *st) {
    int64_t v = 0;
    *st = get_int(c, key, 0, &v);
    if (*st || v <= 0) return 0;
    int64_t per = v / (world > 1 ? world : 1);
    return per > 0 ? per : 1;
}

/* trainer.use_legacy_worker_impl: enable takes verl's legacy FSDP workers' loss normalisation (trainer_update.c's
 * legacy_scale); auto and disable verl's engine workers', as later verl has only those */
static vc_status read_legacy(const vc_config *c, int *legacy) {
    const char *v = "auto";
    vc_status st = vc_config_get_str_or(c, "trainer.use_legacy_worker_impl", "auto", &v);
    if (st) return st;
    if (strcmp(v, "auto") && strcmp(v, "enable") && strcmp(v, "disable"))
        return vc_fail(VC_ERR_ARG, "trainer.use_legacy_worker_impl: `%s` is not auto, enable or disable", v);
    *legacy = !strcmp(v, "enable");
    const char *who = rl_strategy_megatron(c, "actor_rollout_ref.actor") ? "megatron"
                      : rl_strategy_mlite(c, "actor_rollout_ref.actor") ? "mlite"
                      : rl_strategy_veomni(c, "actor_rollout_ref.actor") ? "veomni" : NULL;
    if (*legacy && who)
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer.use_legacy_worker_impl=enable: verlc has the legacy FSDP workers' "
                       "loss normalisation, not the legacy %s workers' (use auto or disable)", who);
    return VC_OK;
}

static vc_status read_actor(vc_rl_trainer *t, const vc_config *c) {
    vc_status st = VC_OK;
    const char *P = "actor_rollout_ref.actor.";
    char k[160];
#define K(x) (snprintf(k, sizeof k, "%s%s", P, x), k)
    rl_actor_cfg *a = &t->acfg;
    vc_pg_config_default(&a->pg);
    const char *agg = "token-mean", *mode = "vanilla", *klt = "low_var_kl";
    int64_t mini = 256, micro = 0, epochs = 1, maxtok = 16384, seed = 42;
    int dyn = 0, shuffle = 0;
    double lo = NAN, hi = NAN;
    TRY(vc_config_get_double_or(c, K("clip_ratio"), 0.2, &a->pg.clip_ratio));
    TRY(vc_config_get_double_or(c, K("clip_ratio_low"), NAN, &lo));
    TRY(vc_config_get_double_or(c, K("clip_ratio_high"), NAN, &hi));
    TRY(vc_config_get_double_or(c, K("clip_ratio_c"), 3.0, &a->pg.clip_ratio_c));
    TRY(vc_config_get_str_or(c, K("loss_agg_mode"), "token-mean", &agg));
    TRY(vc_config_get_str_or(c, K("policy_loss.loss_mode"), "vanilla", &mode));
    TRY(vc_config_get_double_or(c, K("tau_pos"), a->pg.tau_pos, &a->pg.tau_pos));
    TRY(vc_config_get_double_or(c, K("tau_neg"), a->pg.tau_neg, &a->pg.tau_neg));
    TRY(vc_config_get_double_or(c, K("policy_loss.clip_cov_ratio"), a->pg.clip_cov_ratio, &a->pg.clip_cov_ratio));
    TRY(vc_config_get_double_or(c, K("policy_loss.clip_cov_lb"), a->pg.clip_cov_lb, &a->pg.clip_cov_lb));
    TRY(vc_config_get_double_or(c, K("policy_loss.clip_cov_ub"), a->pg.clip_cov_ub, &a->pg.clip_cov_ub));
    TRY(vc_config_get_double_or(c, K("policy_loss.kl_cov_ratio"), a->pg.kl_cov_ratio, &a->pg.kl_cov_ratio));
    TRY(vc_config_get_double_or(c, K("policy_loss.ppo_kl_coef"), a->pg.ppo_kl_coef, &a->pg.ppo_kl_coef));
    TRY(vc_config_get_double_or(c, K("policy_loss.dro_beta"), 0, &a->pg.dro_beta));
    TRY(vc_config_get_double_or(c, K("entropy_coeff"), 0, &a->entropy_coeff));
    TRY(vc_config_get_bool_or(c, K("use_kl_loss"), 0, &a->use_kl_loss));
    TRY(vc_config_get_double_or(c, K("kl_loss_coef"), 0.001, &a->kl_coef));
    TRY(vc_config_get_str_or(c, K("kl_loss_type"), "low_var_kl", &klt));
    TRY(get_int(c, K("ppo_mini_batch_size"), 256, &mini));
    TRY(get_int(c, K("ppo_micro_batch_size_per_gpu"), 0, &micro));
    if (!st && micro <= 0) micro = deprecated_micro(c, K("ppo_micro_batch_size"), t->world, &st);
    TRY(get_int(c, K("ppo_epochs"), 1, &epochs));
    TRY(vc_config_get_bool_or(c, K("use_dynamic_bsz"), 0, &dyn));
    TRY(get_int(c, K("ppo_max_token_len_per_gpu"), 16384, &maxtok));
    TRY(vc_config_get_bool_or(c, K("shuffle"), 0, &shuffle));
    TRY(get_int(c, K("data_loader_seed"), 42, &seed));
    TRY(vc_config_get_bool_or(c, K("use_prefix_grouper"), 0, &a->prefix_share));
    TRY(vc_config_get_bool_or(c, K("calculate_entropy"), 0, &a->calc_entropy));
    TRY(read_router_replay(t, c));
    TRY(read_distill(t, c));
    TRY(read_legacy(c, &a->legacy));
    TRY(vc_config_get_double_or(c, K("loss_scale_factor"), 0, &a->scale_len));
#undef K
    if (st) return st;
    if (a->legacy && a->dist.on)
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer.use_legacy_worker_impl=enable with distillation: verl's on-policy "
                       "distillation runs on its engine workers (use auto or disable)");
    if ((st = vc_agg_mode_parse(agg, &a->pg.agg))) return vc_fail_ctx(st, "actor_rollout_ref.actor.loss_agg_mode");
    if ((st = vc_pg_mode_parse(mode, &a->mode))) return vc_fail_ctx(st, "actor_rollout_ref.actor.policy_loss.loss_mode");
    if ((st = vc_kl_parse(klt, &a->kl_spec))) return vc_fail_ctx(st, "actor_rollout_ref.actor.kl_loss_type");
    if (!(a->pg.tau_pos > 0) || !(a->pg.tau_neg > 0))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.tau_pos and tau_neg must be > 0");
    if (!(a->pg.clip_cov_ratio > 0) || !(a->pg.kl_cov_ratio > 0))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.policy_loss.clip_cov_ratio and kl_cov_ratio must be > 0");
    if (a->mode == VC_PG_DRO && !(a->pg.dro_beta > 0)) /* verl raises the same at the first update */
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.policy_loss.dro_beta must be a positive value when "
                                   "using DRO (loss_mode=dro), got %g", a->pg.dro_beta);
    if (!(a->pg.clip_cov_lb < a->pg.clip_cov_ub))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.policy_loss.clip_cov_lb must be < clip_cov_ub");
    a->pg.clip_ratio_low = isnan(lo) ? -1 : lo;
    a->pg.clip_ratio_high = isnan(hi) ? -1 : hi;
    if (epochs < 1) return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.ppo_epochs must be >= 1");
    if (mini < 1) return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.ppo_mini_batch_size must be >= 1");
    /* verl: ppo_mini_batch_size counts prompts; each brings rollout.n responses */
    a->mini_rows = (int)(mini * t->n);
    if (a->scale_len < 0 || (a->scale_len > 0 && a->scale_len < 1))
        return vc_fail(VC_ERR_ARG, "actor_rollout_ref.actor.loss_scale_factor must be a positive token count, got %g",
                       a->scale_len);
    a->resp_width = t->max_resp; /* verl pads the responses to rollout.response_length */
    a->micro_rows = dyn ? 0 : (int)micro;
    a->max_tokens = dyn ? maxtok : 0;
    a->ppo_epochs = (int)epochs;
    a->shuffle = shuffle;
    a->seed = (uint64_t)seed;
    return VC_OK;
}

static vc_status read_critic(vc_rl_trainer *t, const vc_config *c) {
    vc_status st = VC_OK;
    rl_critic_cfg *a = &t->ccfg;
    const char *agg = "token-mean";
    int64_t mini = 256, micro = 0, epochs = 1, maxtok = 32768;
    int dyn = 0;
    TRY(vc_config_get_double_or(c, "critic.cliprange_value", 0.5, &a->cliprange_value));
    TRY(vc_config_get_str_or(c, "critic.loss_agg_mode", "token-mean", &agg));
    TRY(get_int(c, "critic.ppo_mini_batch_size", 256, &mini));
    TRY(get_int(c, "critic.ppo_micro_batch_size_per_gpu", 0, &micro));
    if (!st && micro <= 0) micro = deprecated_micro(c, "critic.ppo_micro_batch_size", t->world, &st);
    TRY(get_int(c, "critic.ppo_epochs", 1, &epochs));
    TRY(vc_config_get_bool_or(c, "critic.use_dynamic_bsz", 0, &dyn));
    TRY(get_int(c, "critic.ppo_max_token_len_per_gpu", 32768, &maxtok));
    if (st) return st;
    if ((st = vc_agg_mode_parse(agg, &a->agg))) return vc_fail_ctx(st, "critic.loss_agg_mode");
    a->mini_rows = (int)(mini * t->n);
    a->micro_rows = dyn ? 0 : (int)micro;
    a->max_tokens = dyn ? maxtok : 0;
    a->ppo_epochs = epochs > 0 ? (int)epochs : 1;
    a->seed = t->acfg.seed;
    a->legacy = t->acfg.legacy;
    a->resp_width = t->max_resp;
    return VC_OK;
}

/* the rollout's, the actor's and the critic's settings alone (t zeroed by the caller): tools/fuzz/actor_drv.c runs
 * an actor or a critic update on a given batch with them, as the trainer would */
vc_status rl_read_update_settings(vc_rl_trainer *t, const vc_config *c) {
    vc_status st = read_rollout(t, c);
    if (!st) st = read_actor(t, c);
    if (!st) st = read_rollout_correction(t, c);
    return st ? st : read_critic(t, c);
}

/* algorithm.use_pf_ppo: verl resamples only in its GAE branch; other estimators leave it unused */
static vc_status read_pf_ppo(vc_rl_trainer *t, const vc_config *c) {
    int on = 0;
    const char *m = "pow";
    double w = 2.0, probe = 1.0;
    vc_status st = vc_config_get_bool_or(c, "algorithm.use_pf_ppo", 0, &on);
    if (!st) st = vc_config_get_str_or(c, "algorithm.pf_ppo.reweight_method", "pow", &m);
    if (!st) st = vc_config_get_double_or(c, "algorithm.pf_ppo.weight_pow", 2.0, &w);
    if (st || !on) return st;
    if ((st = rl_pf_weights(m, w, &probe, 1, &probe))) return st;
    if (strcmp(t->adv, "gae")) {
        vc_warn("algorithm.use_pf_ppo applies to adv_estimator=gae only (as in verl): not used with %s", t->adv);
        return VC_OK;
    }
    snprintf(t->pf_method, sizeof t->pf_method, "%s", m);
    t->pf_pow = w;
    return VC_OK;
}

static vc_status read_algorithm(vc_rl_trainer *t, const vc_config *c) {
    vc_status st = VC_OK;
    const char *adv = "gae", *klp = "kl", *ctrl = "fixed";
    double coef = 0.001, target = 0.1, horizon = 10000;
    TRY(vc_config_get_str_or(c, "algorithm.adv_estimator", "gae", &adv));
    TRY(vc_config_get_bool_or(c, "algorithm.norm_adv_by_std_in_grpo", 1, &t->norm_adv));
    TRY(vc_config_get_double_or(c, "algorithm.gamma", 1.0, &t->gamma));
    TRY(vc_config_get_double_or(c, "algorithm.lam", 1.0, &t->lam));
    TRY(vc_config_get_bool_or(c, "algorithm.use_kl_in_reward", 0, &t->use_kl_in_reward));
    TRY(vc_config_get_str_or(c, "algorithm.kl_penalty", "kl", &klp));
    TRY(vc_config_get_str_or(c, "algorithm.kl_ctrl.type", "fixed", &ctrl));
    TRY(vc_config_get_double_or(c, "algorithm.kl_ctrl.kl_coef", 0.001, &coef));
    TRY(vc_config_get_double_or(c, "algorithm.kl_ctrl.target_kl", 0.1, &target));
    TRY(vc_config_get_double_or(c, "algorithm.kl_ctrl.horizon", 10000, &horizon));
    TRY(vc_config_get_bool_or(c, "actor_rollout_ref.actor.calculate_sum_pi_squared", 0, &t->calc_sum_pi_sq));
    if (st) return st;
    int known = 0;
    for (int i = 0; ADV_NAMES[i]; i++) known |= !strcmp(adv, ADV_NAMES[i]);
    if (!known)
        return vc_fail(VC_ERR_ARG, "algorithm.adv_estimator: unknown estimator `%s` (gae, grpo, rloo, reinforce_plus_plus, "
                                   "reinforce_plus_plus_baseline, remax, opo, gpg, grpo_vectorized, rloo_vectorized, "
                                   "grpo_passk, optimal_token_baseline, tir_optimal_token_baseline, gdpo)", adv);
    if (strstr(adv, "optimal_token_baseline") && !t->calc_sum_pi_sq) /* verl's assertion */
        return vc_fail(VC_ERR_ARG, "algorithm.adv_estimator=%s needs sum_pi_squared from the actor: set "
                                   "actor_rollout_ref.actor.calculate_sum_pi_squared=True", adv);
    snprintf(t->adv, sizeof t->adv, "%s", adv);
    if ((st = vc_kl_parse(klp, &t->kl_reward_spec))) return vc_fail_ctx(st, "algorithm.kl_penalty");
    if (!strcmp(ctrl, "adaptive")) st = vc_kl_ctrl_adaptive(&t->kl_ctrl, coef, target, horizon);
    else if (!strcmp(ctrl, "fixed")) vc_kl_ctrl_fixed(&t->kl_ctrl, coef);
    else st = vc_fail(VC_ERR_ARG, "algorithm.kl_ctrl.type: `%s` is not fixed or adaptive", ctrl);
    t->use_critic = !strcmp(adv, "gae");
    t->need_ref = t->acfg.use_kl_loss || t->use_kl_in_reward;
    if (!st) st = rl_gdpo_config(t, c);
    return st ? st : read_pf_ppo(t, c);
}

static vc_status read_trainer(vc_rl_trainer *t, const vc_config *c) {
    vc_status st = VC_OK;
    int64_t seed = 1;
    TRY(get_int(c, "trainer.test_freq", -1, &t->test_freq));
    TRY(get_int(c, "trainer.save_freq", -1, &t->save_freq));
    TRY(get_int(c, "trainer.critic_warmup", 0, &t->critic_warmup));
    TRY(vc_config_get_bool_or(c, "trainer.balance_batch", 1, &t->balance_batch));
    TRY(read_rollout_correction(t, c));
    TRY(rl_reward_config(t, c));
    TRY(rl_read_val_generations(t, c));
    TRY(read_filter_groups(t, c));
    TRY(vc_config_get_bool_or(c, "trainer.val_before_train", 1, &t->val_before_train));
    TRY(vc_config_get_bool_or(c, "trainer.val_only", 0, &t->val_only));
    TRY(vc_config_get_str_or(c, "trainer.rollout_data_dir", NULL, &t->rollout_dir));
    TRY(vc_config_get_str_or(c, "trainer.validation_data_dir", NULL, &t->val_dir));
    TRY(vc_config_get_str_or(c, "trainer.default_local_dir", "checkpoints/verlc", &t->out_dir));
    TRY(get_int(c, "trainer.max_actor_ckpt_to_keep", 0, &t->max_ckpt_keep));
    TRY(get_int(c, "data.seed", 1, &seed));
    t->seed = (uint64_t)seed;
    return st;
}

static vc_status load_text(vc_rl_trainer *t, const vc_config *c) {
    const char *tp = NULL;
    vc_status st = vc_config_get_str_or(c, "data.tokenizer", NULL, &tp);
    if (!st && !tp) st = vc_config_get_str_or(c, "actor_rollout_ref.model.tokenizer_path", NULL, &tp);
    if (st) return st;
    if (!tp) tp = t->model_path;
    if ((st = vc_tokenizer_load(tp, &t->tok))) return vc_fail_ctx(st, "tokenizer (%s)", tp);
    const char *custom = NULL;
    if ((st = vc_config_get_str_or(c, "actor_rollout_ref.model.custom_chat_template", NULL, &custom))) return st;
    if (custom) { /* verl sets it as the tokenizer's chat_template */
        const char *bos = vc_tokenizer_id_to_token(t->tok, vc_tokenizer_bos_id(t->tok));
        const char *eos = vc_tokenizer_id_to_token(t->tok, vc_tokenizer_eos_id(t->tok));
        if ((st = vc_chat_template_from_string(custom, bos, eos, &t->tmpl)))
            return vc_fail_ctx(st, "actor_rollout_ref.model.custom_chat_template");
    } else if ((st = vc_chat_template_load(tp, &t->tmpl)))
        return vc_fail_ctx(st, "chat template (%s)", tp);
    /* data.apply_chat_template_kwargs: further template variables, as verl passes them to every rendering */
    char *kw = vc_config_has(c, "data.apply_chat_template_kwargs") ? vc_config_to_json(c, "data.apply_chat_template_kwargs", 0) : NULL;
    cJSON *kj = kw ? cJSON_Parse(kw) : NULL;
    free(kw);
    if (kj && !cJSON_IsObject(kj)) {
        cJSON_Delete(kj);
        return vc_fail(VC_ERR_ARG, "data.apply_chat_template_kwargs must be a mapping (e.g. {enable_thinking: false})");
    }
    if (kj && !kj->child) cJSON_Delete(kj), kj = NULL;
    t->chat_kwargs = kj;
    const vc_model_config *mc = vc_model_cfg(t->actor);
    for (int i = 0; i < mc->n_eos && t->n_eos < RL_MAX_EOS; i++) t->eos[t->n_eos++] = mc->eos_ids[i];
    int te = vc_tokenizer_eos_id(t->tok), dup = 0;
    for (int i = 0; i < t->n_eos; i++) dup |= t->eos[i] == te;
    if (te >= 0 && !dup && t->n_eos < RL_MAX_EOS) t->eos[t->n_eos++] = te;
    int ignore = 0; /* rollout.ignore_eos: responses run to max_response_length (vLLM's ignore_eos) */
    if ((st = vc_config_get_bool_or(c, "actor_rollout_ref.rollout.ignore_eos", 0, &ignore))) return st;
    t->samp.n_eos = t->val_samp.n_eos = ignore ? 0 : t->n_eos;
    return VC_OK;
}

/* video inputs beside the images: the model's video processor (video_preprocessor_config.json, else
 * preprocessor_config.json) and how its tower takes videos; GLM-4V's are not built (the reason kept) */
static vc_status data_videos(vc_rl_trainer *t, const char *dir, vc_vl_videos *vv, char *why, size_t cap,
                             vc_rl_data_opts *o) {
    int ok = 0;
    vc_status st = vc_vl_videos_setup(t->actor, dir, o->image_patch_size > 0 ? o->image_patch_size : o->vl->patch_size,
                                      vv, why, cap, &ok);
    if (st || !ok) return st;
    int id = vc_model_cfg(t->actor)->video_id;
    o->video_token = id >= 0 ? vc_tokenizer_id_to_token(t->tok, id) : NULL;
    o->videos = vv;
    return VC_OK;
}

/* image inputs for the prompt datasets: the model's preprocessor_config.json when its config.json has a vision_config
 * of a model type whose images verlc builds (Qwen2-VL, Qwen2.5-VL, Qwen3-VL: its tower loaded); else only the reason,
 * for rows that hold images; videos beside them (data_videos) */
static vc_status data_images(vc_rl_trainer *t, vc_vl_image_config *vl, vc_vl_videos *vv, char *why, size_t cap,
                             vc_rl_data_opts *o) {
    char *dir = NULL;
    cJSON *cj = NULL;
    vc_status st = vc_hf_resolve(t->model_path, &dir);
    char *file = st ? NULL : vc_path_join(dir, "config.json");
    if (!st && !file) st = VC_ERR_NOMEM;
    if (!st) st = vc_json_load_file(file, &cj);
    free(file);
    const cJSON *vc = cJSON_GetObjectItemCaseSensitive(cj, "vision_config");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cj, "model_type");
    const char *type = cJSON_IsString(mt) ? mt->valuestring : "?";
    char *pre = dir ? vc_path_join(dir, "preprocessor_config.json") : NULL;
    if (st) snprintf(why, cap, "%s/config.json could not be read", t->model_path), st = VC_OK;
    else if (!cJSON_IsObject(vc)) snprintf(why, cap, "the model (%s, model_type %s) has no vision_config", t->model_path, type);
    else if (vc_model_load_vision(t->actor)) /* (the tower loads with the model where verlc builds it) */
        snprintf(why, cap, "%s", vc_last_error());
    else if (!pre || !vc_file_exists(pre)) snprintf(why, cap, "%s/preprocessor_config.json is not there", t->model_path);
    else if (!(st = vc_vl_image_config_load(pre, vl))) {
        o->vl = vl;
        vc_info("images: %s's processor on the %s backend%s", pre, vl->tv ? "torchvision" : vl->kimi ? "checkpoint's own"
                : "PIL", vl->tv && !vl->llama4 && !vl->kimi ? " (transformers 5's default; VERLC_IMAGE_BACKEND=pil for "
                "the other)" : "");
    }
    if (o->vl) { /* the processor's image token: the tokenizer's text of config.json's image_token_id */
        const vc_model_config *mc = vc_model_cfg(t->actor);
        int id = mc->image_id;
        o->image_token = id >= 0 ? vc_tokenizer_id_to_token(t->tok, id) : NULL;
        o->image_wrap = vc_vl_markup_texts(mc, t->tok, &o->image_boi, &o->image_eoi); /* (Gemma 3, Gemma 4, InternVL) */
    }
    o->no_image_reason = o->no_video_reason = why;
    if (!st && o->vl) st = data_videos(t, dir, vv, why, cap, o);
    free(pre);
    free(dir);
    cJSON_Delete(cj);
    return st ? vc_fail_ctx(st, "actor_rollout_ref.model.path") : VC_OK;
}

/* data.seed, or *null_seed where it is null (verl's default) */
static vc_status data_seed(const vc_config *c, int64_t *seed, int *null_seed) {
    vc_status st = vc_config_get_int(c, "data.seed", seed);
    *null_seed = st == VC_ERR_MISSING;
    if (*null_seed) vc_clear_error();
    return *null_seed ? VC_OK : st;
}

/* the prompts' order as verl's data loader draws it (create_rl_sampler: torchdata's RandomSampler over a generator
 * seeded by data.seed, or torch's default seed where it is null; with data.dataloader_num_workers above 0 each epoch
 * takes the second of two randperms) */
static vc_status verl_order(vc_rl_trainer *t, const vc_config *c) {
    int64_t seed = 0, workers = 8;
    int null_seed = 0;
    vc_status st = data_seed(c, &seed, &null_seed);
    if (st || (st = get_int(c, "data.dataloader_num_workers", 8, &workers))) return st;
    if (workers < 0) return vc_fail(VC_ERR_ARG, "data.dataloader_num_workers=%lld: not a count", (long long)workers);
    return vc_epoch_iter_torch(&t->it, VC_ORDER_TORCH_STREAM, null_seed ? VC_TORCH_DEFAULT_SEED : (uint64_t)seed,
                               workers ? 2 : 1, workers ? 1 : 0);
}

/* data.train_max_samples / val_max_samples: verl's RLHFDataset picks them with numpy's default_rng(data.seed) where
 * data.shuffle is on; without a seed its pick is not reproducible, and verlc keeps the first rows */
static vc_status max_samples_pick(const vc_config *c, int64_t tms, int64_t vms, vc_rl_data_opts *o) {
    int shuffle = 1, null_seed = 0;
    int64_t seed = 0;
    vc_status st = vc_config_get_bool_or(c, "data.shuffle", 1, &shuffle);
    if (st || (st = data_seed(c, &seed, &null_seed))) return st;
    o->pick_random = shuffle && !null_seed;
    o->pick_seed = (uint64_t)seed;
    if (shuffle && null_seed && (tms > 0 || vms > 0))
        vc_info("data.train_max_samples / val_max_samples with data.seed null: verl draws those rows at random without a "
                "seed; verlc keeps the first ones (set data.seed to draw verl's)");
    if (o->pick_random && seed < 0) return vc_fail(VC_ERR_ARG, "data.seed=%lld: numpy's seed must not be negative",
                                                   (long long)seed);
    return VC_OK;
}

static vc_status load_data(vc_rl_trainer *t, const vc_config *c) {
    vc_rl_data_opts o = { 0 };
    vc_vl_image_config vl;
    vc_vl_videos vv;
    char why[512] = "";
    int64_t ips = 0;
    const char *train = NULL, *val = NULL;
    int64_t tms = -1, vms = -1;
    size_t nv = 0;
    vc_status st = VC_OK;
    TRY(vc_config_get_str_or(c, "data.prompt_key", "prompt", &o.prompt_key));
    TRY(vc_config_get_str_or(c, "data.reward_fn_key", "data_source", &o.reward_fn_key));
    o.chat_kwargs = t->chat_kwargs;
    TRY(get_int(c, "data.max_prompt_length", 512, &o.max_prompt_length));
    t->max_prompt = o.max_prompt_length;
    TRY(vc_config_get_str_or(c, "data.image_key", "images", &o.image_key));
    TRY(vc_config_get_str_or(c, "data.video_key", "videos", &o.video_key));
    TRY(get_int(c, "data.image_patch_size", 0, &ips));
    if (!st && (ips < 0 || ips > 4096)) return vc_fail(VC_ERR_ARG, "data.image_patch_size must be a patch size in pixels, "
                                                       "got %lld", (long long)ips);
    o.image_patch_size = (int)ips;
    TRY(data_images(t, &vl, &vv, why, sizeof why, &o));
    TRY(vc_config_get_bool_or(c, "data.filter_overlong_prompts", 0, &o.filter_overlong));
    TRY(vc_config_get_str_or(c, "data.truncation", "error", &o.truncation));
    TRY(get_int(c, "data.train_max_samples", -1, &tms));
    TRY(get_int(c, "data.val_max_samples", -1, &vms));
    int64_t vbs = 0;
    TRY(get_int(c, "data.val_batch_size", 0, &vbs));
    if (!st && (vbs < 0 || vbs > INT32_MAX || (vbs == 0 && vc_config_kind(c, "data.val_batch_size") == VC_CFG_INT)))
        return vc_fail(VC_ERR_ARG, "data.val_batch_size must be a positive number of prompts (or null), got %lld",
                       (long long)vbs);
    t->val_batch = vbs;
    TRY(vc_config_list_str(c, "data.train_files", 0, &train));
    TRY(vc_config_list_len(c, "data.val_files", &nv));
    if (!st && nv) st = vc_config_list_str(c, "data.val_files", 0, &val);
    if (st) return st;
    o.need_ground_truth = t->reward_cmd == NULL && !t->rm; /* a reward model scores training rows alone */
    if ((st = max_samples_pick(c, tms, vms, &o))) return st;
    o.max_samples = tms;
    if ((st = vc_rl_dataset_load(train, t->tok, t->tmpl, &o, &t->train))) return vc_fail_ctx(st, "data.train_files");
    o.max_samples = vms;
    o.need_ground_truth = t->reward_cmd == NULL;
    if (val && (st = vc_rl_dataset_load(val, t->tok, t->tmpl, &o, &t->val))) return vc_fail_ctx(st, "data.val_files");
    if ((st = rl_images_init(&t->train_img, t->train)) || (st = rl_images_init(&t->val_img, t->val))) return st;
    if (t->train->n_filtered || (t->val && t->val->n_filtered))
        vc_info("filter_overlong_prompts: dropped %zu train and %zu val prompts longer than %lld tokens",
                t->train->n_filtered, t->val ? t->val->n_filtered : 0, (long long)o.max_prompt_length);
    int shuffle = 1;
    if ((st = vc_config_get_bool_or(c, "data.shuffle", 1, &shuffle))) return st;
    /* with dynamic sampling the data loader yields generation batches (data.gen_batch_size) */
    int per = t->filter_groups ? t->gen_prompts : t->batch_prompts;
    int drop_last = t->train->n >= (size_t)per;
    if (!drop_last)
        vc_warn("%s=%d is larger than the %zu training prompts: using all of them per batch",
                t->filter_groups ? "data.gen_batch_size" : "data.train_batch_size", per, t->train->n);
    if ((st = vc_epoch_iter_init(&t->it, t->train->n, drop_last ? (size_t)per : t->train->n, shuffle, 1, t->seed)))
        return st;
    return verl_order(t, c);
}

static vc_status set_total_steps(vc_rl_trainer *t, const vc_config *c) {
    int64_t epochs = 1, total = -1;
    vc_status st = get_int(c, "trainer.total_epochs", 1, &epochs);
    if (!st) st = get_int(c, "trainer.total_training_steps", -1, &total);
    if (st) return st;
    int64_t per = (int64_t)vc_epoch_iter_batches(&t->it);
    t->total_steps = total > 0 ? total : per * epochs;
    if (t->total_steps < 1) return vc_fail(VC_ERR_ARG, "no training steps (trainer.total_epochs=%lld)", (long long)epochs);
    return VC_OK;
}

#define MP "actor_rollout_ref.actor.fsdp_config.mixed_precision."
#define CMP "critic.model.fsdp_config.mixed_precision."

/* trainer.device and the actor's mixed_precision (the matmul precision is process-wide: the critic's
 * param_dtype, when set, must agree), applied before any model loads */
static vc_status setup_device(vc_rl_trainer *t, const vc_config *c) {
    vc_train_device d = { .device_key = "trainer.device", .precision_key = MP "param_dtype",
                          .reduce_key = MP "reduce_dtype", .buffer_key = MP "buffer_dtype" };
    vc_status st = VC_OK;
    TRY(vc_config_get_str_or(c, "trainer.device", "auto", &d.device));
    TRY(vc_config_get_str_or(c, MP "param_dtype", "fp32", &d.param_dtype));
    if (!st && rl_strategy_megatron(c, "actor_rollout_ref.actor")) { /* Megatron's dtype; f32 master weights */
        d.precision_key = "actor_rollout_ref.actor.megatron.dtype";
        TRY(vc_config_get_str_or(c, d.precision_key, "float32", &d.param_dtype));
    }
    if (!st && rl_strategy_mlite(c, "actor_rollout_ref.actor")) { /* Megatron-lite's engine.dtype; f32 master weights */
        d.precision_key = "actor_rollout_ref.actor.engine.dtype";
        TRY(vc_config_get_str_or(c, d.precision_key, "float32", &d.param_dtype));
    }
    if (!st && rl_strategy_veomni(c, "actor_rollout_ref.actor")) { /* VeOmni's bf16 mixed precision, or f32 */
        int a = 0, b = 0;
        d.precision_key = "actor_rollout_ref.actor.veomni.mixed_precision";
        TRY(vc_config_get_bool_or(c, d.precision_key, 0, &a));
        d.param_dtype = a ? "bf16" : "fp32";
        if (!st && t->use_critic && rl_strategy_veomni(c, "critic") &&
            !(st = vc_config_get_bool_or(c, "critic.veomni.mixed_precision", 0, &b)) && a != b)
            st = vc_fail(VC_ERR_UNSUPPORTED, "critic.veomni.mixed_precision=%s differs from %s=%s: verlc's matmul "
                         "precision is one per process", b ? "true" : "false", d.precision_key, a ? "true" : "false");
    }
    TRY(vc_config_get_str_or(c, MP "reduce_dtype", "fp32", &d.reduce_dtype));
    TRY(vc_config_get_str_or(c, MP "buffer_dtype", "fp32", &d.buffer_dtype));
    if (!st && t->use_critic && rl_strategy_megatron(c, "critic") && rl_strategy_megatron(c, "actor_rollout_ref.actor")) {
        const char *cp = NULL;
        int a = 0, b = 0;
        TRY(vc_config_get_str_or(c, "critic.megatron.dtype", "float32", &cp));
        TRY(vc_train_precision_parse(cp, "critic.megatron.dtype", &b));
        TRY(vc_train_precision_parse(d.param_dtype, d.precision_key, &a));
        if (!st && a != b)
            st = vc_fail(VC_ERR_UNSUPPORTED, "critic.megatron.dtype=%s differs from %s=%s: verlc's matmul precision is one "
                         "per process", cp, d.precision_key, d.param_dtype);
    } else if (!st && t->use_critic && vc_config_has(c, CMP "param_dtype")) {
        const char *cp = NULL;
        int a = 0, b = 0;
        TRY(vc_config_get_str_or(c, CMP "param_dtype", "fp32", &cp));
        TRY(vc_train_precision_parse(cp, CMP "param_dtype", &b));
        TRY(vc_train_precision_parse(d.param_dtype, MP "param_dtype", &a));
        if (!st && cp && a != b)
            st = vc_fail(VC_ERR_UNSUPPORTED, CMP "param_dtype=%s differs from " MP "param_dtype=%s: verlc's matmul "
                         "precision is one per process", cp, d.param_dtype);
    }
    TRY(vc_train_setup_device(&d, t->verbose ? stdout : NULL));
    return st;
}

vc_status vc_rl_trainer_new(const vc_config *cfg, vc_rl_trainer **out) { return vc_rl_trainer_new_dp(cfg, NULL, out); }

static vc_status trainer_new(const vc_config *cfg, vc_comm *comm, int plan_only, vc_rl_trainer **out) {
    *out = NULL;
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    if (!t) return VC_ERR_NOMEM;
    t->cfg = cfg;
    t->comm = comm;
    t->rank = comm ? vc_comm_rank(comm) : 0;
    t->world = comm ? vc_comm_size(comm) : 1;
    t->verbose = t->rank == 0; /* rank 0 prints */
    char *ckpt = NULL;
    vc_status st = VC_OK;
    TRY(vc_config_get_str(cfg, "actor_rollout_ref.model.path", &t->model_path));
    if (!st && !t->model_path) st = vc_fail(VC_ERR_MISSING, "actor_rollout_ref.model.path is not set");
    TRY(refuse_unimplemented(cfg));
    TRY(read_rollout(t, cfg));
    TRY(read_actor(t, cfg));
    TRY(read_critic(t, cfg));
    TRY(read_algorithm(t, cfg));
    TRY(read_trainer(t, cfg));
    TRY(read_skip(t, cfg));
    if (!st && t->router_replay && t->acfg.rc.bypass)
        st = vc_fail(VC_ERR_UNSUPPORTED, "actor_rollout_ref.actor.router_replay.mode=R%d with algorithm.rollout_correction."
                     "bypass_mode=true: the routing is recorded by the old-log-prob pass that bypass mode skips",
                     t->router_replay);
    TRY(rl_dist_check_world(t, cfg));
    TRY(setup_device(t, cfg));
    TRY(vc_mkdirs(t->out_dir));
    TRY(rl_ckpt_find(cfg, t->out_dir, &ckpt));
    /* the base weights; a checkpoint's are loaded over them with the optimiser state below */
    int mtp = 0, mtp_train = 0; /* verl's MTP parameters: kept as they are, or trained (enable_train) */
    if (!st && !(st = vc_config_get_bool_or(cfg, "actor_rollout_ref.model.mtp.enable", 0, &mtp)))
        st = vc_config_get_bool_or(cfg, "actor_rollout_ref.model.mtp.enable_train", 0, &mtp_train);
    mtp_train &= mtp;
    TRY(load_actor(t, cfg, mtp, mtp_train));
    TRY(rl_attach_actor_lora(t, cfg));
    TRY(actor_qat(t, cfg));
    if (!st && t->acfg.dist.on) st = load_teachers(t, cfg);
    /* under LoRA the reference policy is the actor with its adapters off, unless a model is named */
    if (!st && t->need_ref && (!t->lora_rank || vc_config_has(cfg, "actor_rollout_ref.ref.model.path"))) {
        const char *rp = t->model_path;
        if (vc_config_has(cfg, "actor_rollout_ref.ref.model.path")) st = vc_config_get_str_or(cfg, "actor_rollout_ref.ref.model.path", rp, &rp);
        if (!st && (st = vc_model_load(rp, &t->ref))) st = vc_fail_ctx(st, "reference model (%s)", rp);
    }
    if (!st && t->use_critic) {
        const char *cp = t->model_path;
        TRY(vc_config_get_str_or(cfg, "critic.model.path", t->model_path, &cp));
        rl_lora_opts lo = { .alpha = 16, .seed = t->seed ^ 0x63726974u };
        TRY(read_lora_opts(cfg, "critic.model.", "critic.zero_stage", &lo));
        TRY(rl_critic_load(cp, &lo, &t->critic));
    }
    TRY(load_text(t, cfg));
    TRY(rl_reward_open(t));
    TRY(rl_rm_open(cfg, &t->rm));
    TRY(rl_agent_open(t, cfg));
    TRY(load_data(t, cfg));
    if (!st && vc_model_cfg(t->actor)->learned_pos && t->max_prompt + t->max_resp > vc_model_cfg(t->actor)->max_pos)
        st = vc_fail(VC_ERR_ARG, "data.max_prompt_length + data.max_response_length (%lld) exceeds %s's %lld learned "
                     "positions (n_positions)", (long long)(t->max_prompt + t->max_resp),
                     vc_model_cfg(t->actor)->model_type, (long long)vc_model_cfg(t->actor)->max_pos);
    TRY(set_total_steps(t, cfg));
    vc_comm *dp = t->world > 1 ? t->comm : NULL;
    int freeze = 0; /* verl's actor.freeze_vision_tower: the tower gets no gradients, out of the optimiser (under LoRA
                     * its adapters, which verl freezes after PEFT made them: kept in the files, never trained) */
    TRY(vc_config_get_bool_or(cfg, "actor_rollout_ref.actor.freeze_vision_tower", 0, &freeze));
    if (!st && vc_model_vision(t->actor)) st = vc_model_freeze_vision(t->actor, freeze);
    vc_tensor *const *lora = NULL;
    int n_lora = st ? 0 : vc_model_lora_params(t->actor, &lora);
    TRY(rl_trainer_init_dp(&t->atr, t->actor, lora, n_lora, cfg, "actor_rollout_ref.actor", t->total_steps, 0, dp));
    if (!st && t->use_critic)
        st = rl_trainer_init_dp(&t->ctr, t->critic.m, t->critic.extra, t->critic.n_extra, cfg, "critic", t->total_steps,
                                1, dp);
    if (!st && t->use_critic) vc_trainer_use_graph(&t->ctr, t->atr.g); /* its updates never overlap the actor's */
    if (!st) {
        vc_rollout_opts ro = { .kv_fraction = t->kv_fraction, .max_batch = t->max_seqs, .tokenizer = t->tok,
                               .prefill_chunk = t->prefill_chunk, .no_prefix_cache = !t->prefix_cache,
                               .speculative = t->spec };
        st = vc_rollout_new(t->actor, &ro, &t->eng);
    }
    /* the log-prob, reference and value passes run in the actor trainer's arena, idle between its updates: one
     * arena's memory for both (the memory plan counts the larger) */
    if (!st) t->g = t->atr.g;
    if (!st) st = rl_memory_plan(t);
    if (!st && plan_only) { /* verlc train --plan: the plan printed, no file written */
        free(ckpt);
        vc_rl_trainer_free(t);
        return VC_OK;
    }
    if (!st && !(t->metrics_path = vc_path_join(t->out_dir, "metrics.jsonl"))) st = VC_ERR_NOMEM;
    if (!st && ckpt) st = rl_ckpt_load_state(t, ckpt);
    if (!st && !ckpt && t->rank == 0) remove(t->metrics_path);
    if (!st && t->rank == 0) st = rl_open_tracker(t, cfg);
    free(ckpt);
    if (st) {
        vc_rl_trainer_free(t);
        return st;
    }
    t->peak_flops = vc_perf_promised_peak();
    *out = t;
    return VC_OK;
}

vc_status vc_rl_trainer_new_dp(const vc_config *cfg, vc_comm *comm, vc_rl_trainer **out) {
    return trainer_new(cfg, comm, 0, out);
}

vc_status vc_rl_train_plan_dp(const vc_config *cfg, vc_comm *comm) {
    vc_rl_trainer *t = NULL;
    return trainer_new(cfg, comm, 1, &t);
}

void vc_rl_trainer_free(vc_rl_trainer *t) {
    if (!t) return;
    /* the trainers first: their ZeRO-2 state gives the models' gradient pointers back; the critic's before the
     * actor's, whose step arena it borrows */
    vc_trainer_free(&t->ctr);
    vc_trainer_free(&t->atr);
    vc_model_free(t->actor);
    vc_model_free(t->ref);
    for (int i = 0; i < t->n_teacher; i++) vc_model_free(t->teacher[i]), free(t->teacher_key[i]);
    free(t->teacher);
    free(t->teacher_key);
    free(t->skip_steps);
    if (t->use_critic) rl_critic_free(&t->critic);
    if (t->own_comm) vc_comm_free(t->comm);
    vc_tokenizer_free(t->tok);
    vc_chat_template_free(t->tmpl);
    rl_images_free(&t->train_img);
    rl_images_free(&t->val_img);
    vc_rl_dataset_free(t->train);
    vc_rl_dataset_free(t->val);
    vc_epoch_iter_free(&t->it);
    vc_rollout_free(t->eng);
    rl_reward_close(t);
    rl_rm_free(t->rm);
    rl_agent_free(t->agent);
    cJSON_Delete(t->chat_kwargs);
    free(t->reward_kwargs);
    rl_metrics_free(&t->met);
    rl_metrics_free(&t->last);
    free(t->metrics_path);
    vc_tracker_close(t->tracker);
    free(t);
}

void vc_rl_trainer_set_verbose(vc_rl_trainer *t, int verbose) { t->verbose = t->rank == 0 ? verbose : 0; }
int64_t vc_rl_trainer_step(const vc_rl_trainer *t) { return t->step; }

int vc_rl_trainer_metric(const vc_rl_trainer *t, const char *name, double *value) { return rl_metrics_get(&t->last, name, value); }

static vc_status log_step(vc_rl_trainer *t) {
    for (int i = 0; i < t->met.n; i++) rl_metrics_set(&t->last, t->met.name[i], t->met.value[i]);
    if (t->rank != 0) return VC_OK; /* rank 0 prints and writes the metrics */
    if (t->verbose) rl_metrics_console(&t->met, t->step, t->total_steps, stdout);
    vc_status st = rl_metrics_append_jsonl(&t->met, t->step, t->metrics_path);
    if (!st) st = vc_tracker_log(t->tracker, t->step, (size_t)t->met.n, (const char *const *)t->met.name, t->met.value);
    return st;
}

vc_status vc_rl_trainer_validate(vc_rl_trainer *t) {
    rl_metrics_clear(&t->met);
    vc_status st = rl_validate(t, &t->met);
    if (!st)
        for (int i = 0; i < t->met.n; i++) rl_metrics_set(&t->last, t->met.name[i], t->met.value[i]);
    return st;
}

vc_status vc_rl_trainer_fit(vc_rl_trainer *t) {
    vc_status st = VC_OK;
    if (t->val && t->val_before_train && t->step == 0) {
        rl_metrics_clear(&t->met);
        if (!(st = rl_validate(t, &t->met))) st = log_step(t);
        if (st || t->val_only) return st;
    }
    while (!st && t->step < t->total_steps) {
        rl_metrics_clear(&t->met);
        t->step++;
        st = rl_train_step(t, &t->met);
        int last = t->step == t->total_steps;
        if (!st && t->val && t->test_freq > 0 && (t->step % t->test_freq == 0 || last)) st = rl_validate(t, &t->met);
        if (!st && t->save_freq > 0 && (t->step % t->save_freq == 0 || last)) st = rl_ckpt_save(t);
        if (!st) st = log_step(t);
    }
    if (st) return st;
    if (t->planned_act && t->rank == 0 && t->total_steps > 0)
        vc_info("memory: the step arena (updates and forward passes) peaked at %.2f MiB, planned %.2f MiB",
                vc_graph_peak_bytes(t->g) / 1048576.0, t->planned_act / 1048576.0);
    char *dir = vc_path_join(t->out_dir, "hf_model");
    /* the weights are the same on every rank: rank 0 exports, the others learn whether it worked */
    st = !dir ? VC_ERR_NOMEM : t->rank == 0 ? rl_export_hf(t, dir) : VC_OK;
    st = rl_dist_agree(t, st, "export");
    if (!st && t->verbose) printf("final actor exported to %s\n", dir);
    free(dir);
    return st;
}

vc_status vc_rl_train_run(const vc_config *cfg) { return vc_rl_train_run_dp(cfg, NULL); }

vc_status vc_rl_train_run_dp(const vc_config *cfg, vc_comm *comm) {
    vc_rl_trainer *t = NULL;
    vc_status st = vc_rl_trainer_new_dp(cfg, comm, &t);
    if (!st) st = vc_rl_trainer_fit(t);
    vc_rl_trainer_free(t);
    return st;
}
