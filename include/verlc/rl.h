/* verlc rl: verl's core algorithms (verl/trainer/ppo/core_algos.py, verl/utils/torch_functional.py)
 * over plain float arrays.
 *
 * Conventions: every [B,T] array is row-major (B responses, T response positions) in float32;
 * `mask` is the response mask (1 for response tokens, 0 for padding; values are used as weights
 * exactly as verl's masked_sum does). Reductions accumulate in double so that results agree with
 * torch's float32 results to ~1e-6. Outputs may alias inputs of the same shape unless noted.
 * Functions return VC_OK or a status with vc_last_error() naming the problem (e.g. masked_var's
 * "mask sum is 1" error, which verl raises as ValueError). */
#ifndef VERLC_RL_H
#define VERLC_RL_H
#include "verlc/core.h"
#include <stddef.h>

/* ---------------------------------------------------------------- masked statistics */
/* sum(x * mask) over mask != 0 (NaNs outside the mask are ignored, as in verl's masked_sum). */
double vc_masked_sum(const float *x, const float *mask, size_t n);
/* masked_sum / (sum(mask) + 1e-8) */
double vc_masked_mean(const float *x, const float *mask, size_t n);
/* Masked variance; unbiased applies the Bessel correction n/(n-1) with n = sum(mask) and fails with
 * VC_ERR_ARG when that sum is 0 or 1 (verl raises ValueError there). */
vc_status vc_masked_var(const float *x, const float *mask, size_t n, int unbiased, double *var);
/* out = (x - mean) * rsqrt(var + 1e-8) [+ mean when !shift_mean]; unbiased variance as in verl. */
vc_status vc_masked_whiten(const float *x, const float *mask, size_t n, int shift_mean, float *out);

/* ---------------------------------------------------------------- loss aggregation */
typedef enum vc_agg_mode {
    VC_AGG_TOKEN_MEAN,              /* "token-mean" */
    VC_AGG_SEQ_MEAN_TOKEN_SUM,      /* "seq-mean-token-sum" */
    VC_AGG_SEQ_MEAN_TOKEN_MEAN,     /* "seq-mean-token-mean" */
    VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM, /* "seq-mean-token-sum-norm": b178a3cd's sum over rows / T (later verl's is
                                     * the mean over rows / T) */
    VC_AGG_TOKEN_SUM,               /* "token-sum" (later verl): masked sum, times dp_size */
} vc_agg_mode;
vc_status vc_agg_mode_parse(const char *name, vc_agg_mode *mode);
const char *vc_agg_mode_name(vc_agg_mode mode);

/* Global normalisers of verl's agg_loss (config.global_batch_info), so that a mini-batch split into
 * micro-batches aggregates as one batch: sum the micro-batch losses computed with the mini-batch's
 * batch_num_tokens / global_batch_size. A value <= 0 means verl's default (None): the mask sum of this
 * call, the number of non-empty rows of this call, T, and dp_size 1. NULL means all defaults. */
typedef struct vc_agg_norm {
    double dp_size;           /* multiplies token-mean and seq-mean results */
    double batch_num_tokens;  /* token-mean denominator */
    double global_batch_size; /* seq-mean-* denominator */
    double loss_scale_factor; /* seq-mean-token-sum-norm denominator */
} vc_agg_norm;

/* loss = agg(loss_mat, mask) as verl's agg_loss; when dloss != NULL it receives d loss / d loss_mat
 * [B,T] (the weight of each element). */
vc_status vc_agg_loss(const float *loss_mat, const float *mask, int B, int T, vc_agg_mode mode,
                      const vc_agg_norm *norm, double *loss, float *dloss);

/* agg_loss of a batch held in parts (several ranks): *num and *den with agg = num / den, where *num adds up over the
 * parts, and *den too when *den_adds (token and row counts), else it is the same in every part (width: the
 * seq-mean-token-sum-norm divisor, <= 0 for T; 1 for token-sum) */
void vc_agg_parts(const float *loss_mat, const float *mask, int B, int T, vc_agg_mode mode, double width, double *num,
                  double *den, int *den_adds);

/* ---------------------------------------------------------------- advantage estimators */
/* Every estimator takes token-level rewards [B,T] and writes advantages and returns [B,T].
 * `index` holds B group ids (the prompt uid of each response); singleton groups get mean 0, std 1. */

/* GAE: delta_t = r_t + gamma V_{t+1} - V_t, A_t = delta_t + gamma lam A_{t+1}, skipping masked
 * positions; returns = A + V; advantages are then masked-whitened. */
vc_status vc_adv_gae(const float *rewards, const float *values, const float *mask, int B, int T,
                     float gamma, float lam, float *adv, float *ret);
/* GRPO: s_i = sum_t r; A_i = (s_i - mean_g) / (std_g + eps) (or s_i - mean_g); adv = ret = A_i * mask. */
vc_status vc_adv_grpo(const float *rewards, const float *mask, const char *const *index, int B, int T,
                      int norm_by_std, float eps, float *adv, float *ret);
/* RLOO: A_i = n/(n-1) (s_i - mean_g) for groups of n > 1, s_i for singletons. */
vc_status vc_adv_rloo(const float *rewards, const float *mask, const char *const *index, int B, int T,
                      float *adv, float *ret);
/* rloo_vectorized: (c s_i - group sum) / (c - 1), 0 for singleton groups */
vc_status vc_adv_rloo_vectorized(const float *rewards, const float *mask, const char *const *index, int B, int T,
                                 float *adv, float *ret);
/* grpo_vectorized: GRPO with groupwise.group_mean_std's std (variance floored at eps) */
vc_status vc_adv_grpo_vectorized(const float *rewards, const float *mask, const char *const *index, int B, int T,
                                 int norm_by_std, float eps, float *adv, float *ret);
/* grpo_passk: the best response of each group gets its margin over the second best (optionally / std) */
vc_status vc_adv_grpo_passk(const float *rewards, const float *mask, const char *const *index, int B, int T,
                            int norm_by_std, float eps, float *adv, float *ret);
/* OPO: A_i = s_i - sum_g(len * s) / sum_g(len), len = response length. */
vc_status vc_adv_opo(const float *rewards, const float *mask, const char *const *index, int B, int T,
                     float *adv, float *ret);
/* GPG: A_i = alpha (s_i - mean_g) / f_norm with alpha = B / max(1, #nonzero scores). */
vc_status vc_adv_gpg(const float *rewards, const float *mask, const char *const *index, int B, int T,
                     float f_norm, float *adv, float *ret);
/* REINFORCE++: G_t = r_t + gamma G_{t+1} (reset after EOS); adv = whiten(G) * mask, ret = G. */
vc_status vc_adv_reinforce_pp(const float *rewards, const float *mask, int B, int T, float gamma,
                              float *adv, float *ret);
/* REINFORCE++ with baseline: (s_i - mean_g) broadcast over tokens, then masked-whitened. */
vc_status vc_adv_reinforce_pp_baseline(const float *rewards, const float *mask, const char *const *index,
                                       int B, int T, float *adv, float *ret);
/* ReMax: ret_t = sum_{t'>=t} r mask; adv = ret - baseline_i * mask. baselines: [B]. */
vc_status vc_adv_remax(const float *rewards, const float *baselines, const float *mask, int B, int T,
                       float *adv, float *ret);
/* Optimal token baseline (verl's optimal_token_baseline; tir = 1: tir_optimal_token_baseline, whose steps
 * are the response tokens only, for multi-turn responses with masked tool turns). Per prompt group and
 * step, B = sum G W / (sum W + 1e-8) with G the reward-to-go and W the cumulative sum of
 * (1 - 2 exp(old_logp) + sum_pi_sq) * is_w^2 (is_w NULL: 1); a group of one row has baseline 0.
 * zero_tail (verl's handle_zero_tail: false for the plain one, true for TIR) zeroes the baseline of a
 * unique longest row beyond the second longest. adv = (G - B) * mask, ret = G. */
vc_status vc_adv_optimal_token_baseline(const float *rewards, const float *mask, const char *const *index,
                                        const float *old_logp, const float *sum_pi_sq, const float *is_w, int B,
                                        int T, int tir, int zero_tail, float *adv, float *ret);
/* GDPO (later verl's gdpo, arXiv 2601.05242): scores[k] holds component k's per-row score [B]; each is
 * normalised as GRPO's outcome advantage within its group, the K results summed with weights (NULL: 1
 * each) in float32, and the sum masked-whitened over the batch: adv = ret = whiten(sum) * mask.
 * vc_adv_gdpo_sum stops before the whitening (out [B,T], for a whitening over several ranks). */
vc_status vc_adv_gdpo(const float *const *scores, const float *weights, int K, const float *mask,
                      const char *const *index, int B, int T, int norm_by_std, float eps, float *adv, float *ret);
vc_status vc_adv_gdpo_sum(const float *const *scores, const float *weights, int K, const float *mask,
                          const char *const *index, int B, int T, int norm_by_std, float eps, float *out);
/* verl's variance-proxy metrics, summed over rows into sums (to be reduced, then divided by the rows):
 * [0] proxy 2 (total power), [1] mean advantage squared, [2] score-norm proxy W. */
void vc_variance_proxy_sums(const float *adv, const float *mask, const float *old_logp, const float *sum_pi_sq,
                            const float *is_w, int B, int T, double sums[3]);
/* Group ids from index strings, numbered in order of first appearance; gid: [B]. */
vc_status vc_group_ids(const char *const *index, int B, int *gid, int *n_groups);

/* ---------------------------------------------------------------- policy losses */
typedef struct vc_pg_config {
    double clip_ratio;      /* PPO epsilon */
    double clip_ratio_low;  /* < 0 (or NaN): clip_ratio */
    double clip_ratio_high; /* < 0 (or NaN): clip_ratio */
    double clip_ratio_c;    /* dual-clip lower bound, must be > 1 (verl default 3.0) */
    vc_agg_mode agg;
    vc_agg_norm norm;       /* zeroes: verl defaults */
    double tau_pos, tau_neg;                      /* sapo gate temperatures (verl: 1.0, 1.05) */
    double clip_cov_ratio, clip_cov_lb, clip_cov_ub; /* clip_cov (0.0002, 1.0, 5.0) */
    double kl_cov_ratio, ppo_kl_coef;             /* kl_cov (0.0002, 0.1) */
    double dro_beta;        /* dro's quadratic log-ratio penalty (policy_loss.dro_beta; must be > 0 for dro) */
    uint64_t seed, draw;    /* clip_cov's random choice of tokens: a pure function of (seed, draw) */
} vc_pg_config;
void vc_pg_config_default(vc_pg_config *cfg); /* clip 0.2, c 3.0, token-mean */

/* verl's metric dict: actor/pg_clipfrac, actor/ppo_kl, actor/pg_clipfrac_lower */
typedef struct vc_pg_metrics {
    double pg_clipfrac, ppo_kl, pg_clipfrac_lower;
} vc_pg_metrics;

typedef enum vc_pg_mode {
    VC_PG_VANILLA, VC_PG_GSPO, VC_PG_CISPO, VC_PG_SAPO, VC_PG_GPG, VC_PG_CLIP_COV, VC_PG_KL_COV, VC_PG_GEO_MEAN,
    VC_PG_DPPO_TV, VC_PG_DPPO_KL, VC_PG_DRO, /* later verl's (verl-project/verl 1dda039b) */
    VC_PG_REINFORCE /* -A log pi (rollout correction's bypass mode with loss_type reinforce; not a loss_mode) */
} vc_pg_mode;
vc_status vc_pg_mode_parse(const char *name, vc_pg_mode *mode);

/* Policy loss of the given mode (verl's compute_policy_loss_<mode>). is_weights: optional [B,T]
 * rollout correction weights (NULL: none). dlogp: optional [B,T] output d loss / d log_prob, for
 * back-propagation through the model (old_log_prob, advantages and weights are constants).
 * vanilla: L = max(-A r, -A clip(r, 1-lo, 1+hi)), and min(that, -A c) where A < 0; r = exp(lp - old).
 * gspo:    the same clip on s = exp(mean_t(lp - old)) with per-token straight-through gradient; always
 *          aggregated seq-mean-token-mean.
 * cispo:   L = -sg(clip(r)) A lp.
 * sapo:    L = -A (4/tau) sigmoid(tau (r - 1)), tau = tau_pos where A > 0 else tau_neg; always
 *          aggregated seq-mean-token-mean (arXiv 2511.20347).
 * gpg:     L = -A lp.
 * clip_cov: L = corr max(-A r, -A clip(r)) (no dual clip, r unclamped); corr = 0 on a random choice of
 *          max(1, int(ratio * tokens)) tokens among those with lb < cov < ub that the clip left alone,
 *          cov = (A - mean A)(lp - mean lp) over the mask (arXiv 2505.22617); pg_clipfrac = share with corr 0.
 * kl_cov:  L = -A r, plus ppo_kl_coef |lp - old| on the max(1, int(ratio * tokens)) tokens of largest cov
 *          (ties: the earlier token); ppo_kl is masked_mean(|lp - old|).
 * geo_mean: per row, s = exp(mean_t sgn(A) min(sgn(A) d, sgn(A) clip(d, -lo, hi))), d = lp - old,
 *          L_i = -mean_t(A) s, averaged over rows (GMPO, arXiv 2507.20673): norm.global_batch_size (else
 *          B) rows, times norm.dp_size; is_weights enter as their per-row geometric mean.
 * dppo_tv: L = -A sg(min(r, c)) lp v with r = exp(clamp(lp - old, -20, 20)), c = clip_ratio_c and v = 0
 *          (token masked out, counted in pg_clipfrac) where p - p_old > hi for A > 0, or < -lo for A <= 0,
 *          p = exp(lp) (DPPO-Binary-TV, arXiv 2602.04879; clip_ratio* are divergence thresholds here);
 *          pg_clipfrac_lower = share with r > c among the kept tokens.
 * dppo_kl: the same with the binary KL p_old (old - lp) + (1 - p_old) log((1 - p_old + 1e-8) / (1 - p + 1e-8))
 *          > hi (A > 0, p > p_old) or > lo (A <= 0, p < p_old) masking the token (DPPO-Binary-KL).
 * dro:     L = -(lp A - beta/2 (lp - old)^2), beta = dro_beta > 0 (direct reward optimisation). */
vc_status vc_policy_loss(vc_pg_mode mode, const float *old_logp, const float *logp, const float *adv,
                         const float *mask, int B, int T, const vc_pg_config *cfg, const float *is_weights,
                         double *loss, vc_pg_metrics *metrics, float *dlogp);

/* ---------------------------------------------------------------- value, entropy, KL */
/* vf_loss = 0.5 agg(max((v - R)^2, (clip(v, V - c, V + c) - R)^2)); vf_clipfrac = masked_mean(l2 > l1).
 * dvpreds: optional [B,T] d vf_loss / d vpreds. */
vc_status vc_value_loss(const float *vpreds, const float *returns, const float *values, const float *mask,
                        int B, int T, float cliprange_value, vc_agg_mode agg, const vc_agg_norm *norm,
                        double *vf_loss, double *vf_clipfrac, float *dvpreds);

/* H = logsumexp(z) - sum softmax(z) z over the last axis; logits [N,V] -> out [N]. */
void vc_entropy_from_logits(const float *logits, size_t N, size_t V, float *out);
/* dlogits[n,v] = dH[n] * (-p_v (z_v - E_p[z])); the backward of vc_entropy_from_logits. */
void vc_entropy_backward(const float *logits, size_t N, size_t V, const float *dH, float *dlogits);
/* entropy_loss = agg(entropy_from_logits(logits), mask); logits [B,T,V]. */
vc_status vc_entropy_loss(const float *logits, const float *mask, int B, int T, int V, vc_agg_mode agg,
                          const vc_agg_norm *norm, double *loss);

typedef enum vc_kl_type {
    VC_KL_K1,  /* "kl", "k1": lp - ref */
    VC_KL_ABS, /* "abs": |lp - ref| */
    VC_KL_K2,  /* "mse", "k2": 0.5 (lp - ref)^2 */
    VC_KL_K3,  /* "low_var_kl", "k3": clamp(exp(d) - d - 1, -10, 10), d = clamp(ref - lp, -20, 20) */
} vc_kl_type;
typedef struct vc_kl_spec {
    vc_kl_type type;
    int straight_through; /* "+" suffix: value of `type`, gradient of k2 */
} vc_kl_spec;
vc_status vc_kl_parse(const char *name, vc_kl_spec *spec);
/* kl[i] and optionally dkl[i] = d kl / d logprob[i] over n elements. */
void vc_kl_penalty(vc_kl_spec spec, const float *logp, const float *ref_logp, size_t n, float *kl, float *dkl);
/* verl's compute_rewards: scores - kl_ratio * (old_logp - ref_logp). */
void vc_kl_rewards(const float *scores, const float *old_logp, const float *ref_logp, size_t n,
                   float kl_ratio, float *out);

/* KL controllers (verl's FixedKLController / AdaptiveKLController). */
typedef struct vc_kl_ctrl {
    int adaptive;
    double value, target, horizon;
} vc_kl_ctrl;
void vc_kl_ctrl_fixed(vc_kl_ctrl *c, double kl_coef);
vc_status vc_kl_ctrl_adaptive(vc_kl_ctrl *c, double init_kl_coef, double target_kl, double horizon);
/* adaptive: value *= 1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon; fixed: no-op. */
void vc_kl_ctrl_update(vc_kl_ctrl *c, double current_kl, double n_steps);
/* verl's apply_kl_penalty: rewards = scores - beta * kl(old, ref) * mask with beta = ctrl->value;
 * current_kl = mean over rows of the masked token mean; then the controller is updated with n_steps = B.
 * Outputs verl's metrics actor/reward_kl_penalty (current_kl) and actor/reward_kl_penalty_coeff (beta). */
vc_status vc_apply_kl_penalty(const float *scores, const float *old_logp, const float *ref_logp,
                              const float *mask, int B, int T, vc_kl_spec spec, vc_kl_ctrl *ctrl,
                              float *rewards, double *current_kl, double *beta);

#endif
