/* Shared pieces of the policy losses (policy_loss.c, policy_loss_cov.c). */
#ifndef VC_POLICY_LOSS_INTERNAL_H
#define VC_POLICY_LOSS_INTERNAL_H
#include "verlc/rl.h"

/* torch.clamp: value and whether the gradient passes (inclusive bounds) */
static inline double pg_clampd(double x, double lo, double hi, double *pass) {
    *pass = (x >= lo && x <= hi) ? 1.0 : 0.0;
    return x < lo ? lo : (x > hi ? hi : x);
}

/* clip_cov: corr[n] = 0 on the randomly chosen high-covariance tokens, 1 elsewhere */
vc_status pg_clip_cov_corr(const float *old, const float *lp, const float *adv, const float *mask, size_t n,
                           double lo, double hi, const vc_pg_config *cfg, float *corr);
/* kl_cov: sel[n] = 1 on the tokens of largest covariance, 0 elsewhere */
vc_status pg_kl_cov_pick(const float *lp, const float *adv, const float *mask, size_t n, const vc_pg_config *cfg,
                         float *sel);
/* geo_mean: the whole loss, its metrics and gradient (rows averaged, no loss_agg_mode) */
vc_status pg_geo_mean(const float *old, const float *lp, const float *adv, const float *mask, int B, int T,
                      double lo, double hi, const vc_agg_norm *norm, const float *is_weights, double *loss,
                      vc_pg_metrics *met, float *dlogp);
#endif
