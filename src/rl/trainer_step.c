/* One training step (the body of verl's RayPPOTrainer.fit loop): generate -> reward -> old / ref
 * log-probs -> values -> KL in reward -> advantages -> critic update -> actor update -> metrics. */
#include "trainer_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status rl_compute_advantages(vc_rl_trainer *t, rl_batch *b, const float *baselines) {
    const char *a = t->adv;
    int B = b->B, T = b->T;
    const char *const *uid = (const char *const *)b->uid;
    if (!strcmp(a, "gae")) return vc_adv_gae(b->rewards, b->values, b->mask, B, T, (float)t->gamma, (float)t->lam, b->adv, b->ret);
    if (!strcmp(a, "grpo")) return vc_adv_grpo(b->rewards, b->mask, uid, B, T, t->norm_adv, 1e-6f, b->adv, b->ret);
    if (!strcmp(a, "rloo")) return vc_adv_rloo(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "opo")) return vc_adv_opo(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "gpg")) return vc_adv_gpg(b->rewards, b->mask, uid, B, T, 1.0f, b->adv, b->ret);
    if (!strcmp(a, "reinforce_plus_plus")) return vc_adv_reinforce_pp(b->rewards, b->mask, B, T, (float)t->gamma, b->adv, b->ret);
    if (!strcmp(a, "reinforce_plus_plus_baseline"))
        return vc_adv_reinforce_pp_baseline(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "remax")) return vc_adv_remax(b->rewards, baselines, b->mask, B, T, b->adv, b->ret);
    return vc_fail(VC_ERR_ARG, "algorithm.adv_estimator: unknown `%s`", a);
}

static void stats3(rl_metrics *m, const char *name, double sum, double n, double mx, double mn, int with_minmax) {
    rl_metrics_setf(m, n > 0 ? sum / n : 0, "%s/mean", name);
    if (!with_minmax) return;
    rl_metrics_setf(m, n > 0 ? mx : 0, "%s/max", name);
    rl_metrics_setf(m, n > 0 ? mn : 0, "%s/min", name);
}

/* verl's compute_data_metrics over the rows: sequence scores/rewards, token advantages/returns/values */
static void seq_stat(rl_metrics *m, const char *name, const rl_batch *b, const float *tok, int per_token) {
    double s = 0, n = 0, mx = -INFINITY, mn = INFINITY;
    for (int i = 0; i < b->B; i++) {
        double row = 0;
        for (int j = 0; j < b->T; j++) {
            size_t k = (size_t)i * b->T + j;
            if (b->mask[k] <= 0) continue;
            if (per_token) {
                s += tok[k], n += 1, mx = fmax(mx, tok[k]), mn = fmin(mn, tok[k]);
            } else row += tok[k];
        }
        if (!per_token) s += row, n += 1, mx = fmax(mx, row), mn = fmin(mn, row);
    }
    stats3(m, name, s, n, mx, mn, 1);
}

void rl_data_metrics(vc_rl_trainer *t, const rl_batch *b, rl_metrics *met) {
    seq_stat(met, "critic/score", b, b->token_scores, 0);
    seq_stat(met, "critic/rewards", b, b->rewards, 0);
    seq_stat(met, "critic/advantages", b, b->adv, 1);
    seq_stat(met, "critic/returns", b, b->ret, 1);
    if (b->have_values) seq_stat(met, "critic/values", b, b->values, 1);
    double rs = 0, rmx = 0, rmn = INFINITY, clip = 0, ps = 0, pmx = 0, pmn = INFINITY;
    for (int i = 0; i < b->B; i++) {
        rs += (double)b->rlen[i];
        rmx = fmax(rmx, (double)b->rlen[i]);
        rmn = fmin(rmn, (double)b->rlen[i]);
        clip += b->rlen[i] >= t->max_resp;
        ps += (double)b->plen[i];
        pmx = fmax(pmx, (double)b->plen[i]);
        pmn = fmin(pmn, (double)b->plen[i]);
    }
    rl_metrics_set(met, "response_length/mean", rs / b->B);
    rl_metrics_set(met, "response_length/max", rmx);
    rl_metrics_set(met, "response_length/min", rmn);
    rl_metrics_set(met, "response_length/clip_ratio", clip / b->B);
    rl_metrics_set(met, "prompt_length/mean", ps / b->B);
    rl_metrics_set(met, "prompt_length/max", pmx);
    rl_metrics_set(met, "prompt_length/min", pmn);
}

/* ReMax: the greedy response's score is each prompt's baseline */
static vc_status remax_baselines(vc_rl_trainer *t, const uint32_t *idx, int n, rl_batch *b, float **out) {
    rl_batch g;
    vc_sampling s = t->samp;
    s.greedy = 1;
    vc_status st = rl_rollout_batch(t, t->train, idx, n, &s, 1, (uint64_t)t->step, &g);
    if (!st) st = rl_score_batch(t, t->train, &g, NULL);
    float *bl = st ? NULL : vc_calloc((size_t)b->B, sizeof(float));
    if (!st && !bl) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++)
        for (int k = 0; k < n; k++)
            if ((int)idx[k] == b->prompt[i]) bl[i] = g.score[k];
    if (!st) rl_batch_free(&g);
    *out = bl;
    return st;
}

static void probs_diff(const rl_batch *b, const float *lp, rl_metrics *met) {
    double s = 0, n = 0, mx = 0;
    for (size_t k = 0; k < (size_t)b->B * b->T; k++)
        if (b->mask[k] > 0) {
            double d = fabs(exp(lp[k]) - exp(b->rollout_logp[k]));
            s += d, n += 1, mx = fmax(mx, d);
        }
    rl_metrics_set(met, "training/rollout_probs_diff_mean", n > 0 ? s / n : 0);
    rl_metrics_set(met, "training/rollout_probs_diff_max", mx);
}

static double tokens_of(const rl_batch *b) { return (double)b->cu[b->B]; }

vc_status rl_train_step(vc_rl_trainer *t, rl_metrics *met) {
    double t_step = vc_now(), t0;
    const uint32_t *idx = NULL;
    size_t n = vc_epoch_iter_next(&t->it, &idx);
    rl_batch b;
    float *baselines = NULL;
    t0 = vc_now();
    vc_status st = rl_rollout_batch(t, t->train, idx, (int)n, &t->samp, t->n, (uint64_t)t->step, &b);
    if (st) return vc_fail_ctx(st, "step %lld: rollout", (long long)t->step);
    rl_metrics_set(met, "timing_s/gen", vc_now() - t0);
    t0 = vc_now();
    st = rl_score_batch(t, t->train, &b, met);
    if (!st && !strcmp(t->adv, "remax")) st = remax_baselines(t, idx, (int)n, &b, &baselines);
    rl_metrics_set(met, "timing_s/reward", vc_now() - t0);
    /* verl's shortcut: with one epoch and one mini-batch the old policy is the current one */
    int on_policy = t->acfg.ppo_epochs == 1 && t->acfg.mini_rows >= b.B && !t->use_kl_in_reward;
    if (!st && !on_policy) {
        t0 = vc_now();
        st = rl_batch_logprobs(t->actor, t->g, &b, t->fwd_tokens, b.old_logp, NULL);
        b.have_old = !st;
        if (!st) probs_diff(&b, b.old_logp, met);
        rl_metrics_set(met, "timing_s/old_log_prob", vc_now() - t0);
    }
    if (!st && t->need_ref) {
        t0 = vc_now();
        st = rl_batch_logprobs(t->ref, t->g, &b, t->fwd_tokens, b.ref_logp, NULL);
        b.have_ref = !st;
        rl_metrics_set(met, "timing_s/ref", vc_now() - t0);
    }
    if (!st && t->use_critic) {
        t0 = vc_now();
        st = rl_critic_values(&t->critic, t->g, &b, t->fwd_tokens, b.values);
        b.have_values = !st;
        rl_metrics_set(met, "timing_s/values", vc_now() - t0);
    }
    t0 = vc_now();
    if (!st && t->use_kl_in_reward) {
        double kl = 0, beta = 0;
        st = vc_apply_kl_penalty(b.token_scores, b.old_logp, b.ref_logp, b.mask, b.B, b.T, t->kl_reward_spec,
                                 &t->kl_ctrl, b.rewards, &kl, &beta);
        rl_metrics_set(met, "actor/reward_kl_penalty", kl);
        rl_metrics_set(met, "actor/reward_kl_penalty_coeff", beta);
    } else if (!st) memcpy(b.rewards, b.token_scores, sizeof(float) * (size_t)b.B * b.T);
    if (!st) st = rl_compute_advantages(t, &b, baselines);
    rl_metrics_set(met, "timing_s/adv", vc_now() - t0);
    if (!st && t->use_critic) {
        t0 = vc_now();
        st = rl_update_critic(&t->ctr, &t->critic, &b, &t->ccfg, met);
        rl_metrics_set(met, "timing_s/update_critic", vc_now() - t0);
    }
    if (!st && t->step >= t->critic_warmup) { /* verl: critic_warmup <= global_steps */
        t0 = vc_now();
        st = rl_update_actor(&t->atr, &b, &t->acfg, on_policy && !b.have_old, met);
        double dt = vc_now() - t0;
        rl_metrics_set(met, "timing_s/update_actor", dt);
        /* forward + backward ~ 6 N flops per token and epoch */
        double flops = 6.0 * (double)t->n_params * tokens_of(&b) * t->acfg.ppo_epochs;
        rl_metrics_set(met, "perf/mfu/actor", dt > 0 ? flops / dt / t->peak_flops : 0);
    }
    if (!st) rl_data_metrics(t, &b, met);
    double step_s = vc_now() - t_step;
    rl_metrics_set(met, "timing_s/step", step_s);
    rl_metrics_set(met, "perf/total_num_tokens", tokens_of(&b));
    rl_metrics_set(met, "perf/throughput", step_s > 0 ? tokens_of(&b) / step_s : 0);
    rl_metrics_set(met, "training/epoch", (double)t->it.epoch);
    free(baselines);
    rl_batch_free(&b);
    return st ? vc_fail_ctx(st, "step %lld", (long long)t->step) : VC_OK;
}
