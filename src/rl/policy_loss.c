/* Policy losses with their gradients w.r.t. log_prob (core_algos.compute_policy_loss_{vanilla,gspo,cispo,
 * sapo,gpg,clip_cov,kl_cov,geo_mean}, and later verl's dppo_tv, dppo_kl and dro; the batch-level parts of
 * clip_cov, kl_cov and geo_mean are in policy_loss_cov.c). */
#include "policy_loss_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void vc_pg_config_default(vc_pg_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->clip_ratio = 0.2;
    cfg->clip_ratio_low = -1.0;
    cfg->clip_ratio_high = -1.0;
    cfg->clip_ratio_c = 3.0;
    cfg->agg = VC_AGG_TOKEN_MEAN;
    cfg->tau_pos = 1.0;
    cfg->tau_neg = 1.05;
    cfg->clip_cov_ratio = 0.0002;
    cfg->clip_cov_lb = 1.0;
    cfg->clip_cov_ub = 5.0;
    cfg->kl_cov_ratio = 0.0002;
    cfg->ppo_kl_coef = 0.1;
}

static const struct { const char *name; vc_pg_mode mode; } pg_modes[] = {
    { "vanilla", VC_PG_VANILLA }, { "gspo", VC_PG_GSPO }, { "cispo", VC_PG_CISPO }, { "sapo", VC_PG_SAPO },
    { "gpg", VC_PG_GPG }, { "clip_cov", VC_PG_CLIP_COV }, { "kl_cov", VC_PG_KL_COV }, { "geo_mean", VC_PG_GEO_MEAN },
    { "dppo_tv", VC_PG_DPPO_TV }, { "dppo_kl", VC_PG_DPPO_KL }, { "dro", VC_PG_DRO },
};

vc_status vc_pg_mode_parse(const char *name, vc_pg_mode *mode) {
    for (size_t i = 0; name && i < sizeof pg_modes / sizeof pg_modes[0]; i++)
        if (!strcmp(name, pg_modes[i].name)) {
            *mode = pg_modes[i].mode;
            return VC_OK;
        }
    return vc_fail(VC_ERR_UNSUPPORTED,
                   "unsupported policy loss_mode: %s (vanilla, gspo, cispo, sapo, gpg, clip_cov, kl_cov, geo_mean, "
                   "dppo_tv, dppo_kl, dro)",
                   name ? name : "(null)");
}

/* torch.maximum / torch.minimum backward: the gradient goes to the larger (smaller) input, half each on ties. */
static double max_wa(double a, double b) { return a > b ? 1.0 : (a == b ? 0.5 : 0.0); }
static double min_wa(double a, double b) { return a < b ? 1.0 : (a == b ? 0.5 : 0.0); }
struct pg_elem { double loss, dloss, clipped, lower; }; /* loss, d loss/d lp, clipfrac flags */

/* vanilla PPO element with dual clip; r = exp(x), dr/dlp = r * xpass */
static struct pg_elem pg_vanilla(double A, double r, double dr, double lo, double hi, double c) {
    struct pg_elem e;
    double cpass, rc = pg_clampd(r, 1.0 - lo, 1.0 + hi, &cpass);
    double l1 = -A * r, l2 = -A * rc, d1 = -A * dr, d2 = -A * cpass * dr;
    l1 = (float)l1; l2 = (float)l2; /* torch compares float32 values */
    double w1 = max_wa(l1, l2), m1 = l1 > l2 ? l1 : l2, dm1 = w1 * d1 + (1.0 - w1) * d2;
    double l3 = (float)(-A * c);
    e.clipped = l2 > l1;
    if (A < 0) {
        double w = min_wa(m1, l3);
        e.loss = m1 < l3 ? m1 : l3;
        e.dloss = w * dm1;
        e.lower = m1 > l3;
    } else {
        e.loss = m1;
        e.dloss = dm1;
        e.lower = 0.0;
    }
    return e;
}

static void clip_bounds(const vc_pg_config *cfg, double *lo, double *hi) {
    *lo = (cfg->clip_ratio_low >= 0) ? cfg->clip_ratio_low : cfg->clip_ratio;
    *hi = (cfg->clip_ratio_high >= 0) ? cfg->clip_ratio_high : cfg->clip_ratio;
}

/* GSPO per-row sequence log-ratio: sum(mask * (lp - old)) / max(1, sum(mask)) */
static double gspo_seq(const float *old, const float *lp, const float *mask, int T, size_t row) {
    double s = 0.0, m = 0.0;
    for (int t = 0; t < T; t++) {
        size_t k = row + t;
        s += ((double)lp[k] - old[k]) * mask[k];
        m += mask[k];
    }
    return s / (m < 1.0 ? 1.0 : m);
}

/* SAPO's smooth gate: L = -A (4/tau) sigmoid(tau (r - 1)), dL/dr = -A 4 s (1 - s) */
static struct pg_elem pg_sapo(double A, double r, double dr, const vc_pg_config *cfg) {
    struct pg_elem e = { 0 };
    double tau = A > 0 ? cfg->tau_pos : cfg->tau_neg, s = 1.0 / (1.0 + exp(-tau * (r - 1.0)));
    e.loss = -(s * (4.0 / tau)) * A;
    e.dloss = -A * 4.0 * s * (1.0 - s) * dr;
    return e;
}

/* DPPO-Binary-TV / -KL: the truncated ratio as a constant, tokens beyond the divergence bound masked out;
 * float32 steps as torch's. d = float(lp - old). */
static struct pg_elem pg_dppo(int kl, double A, float lp, float old, float d, double lo, double hi, double c) {
    struct pg_elem e = { 0 };
    float x = d < -20.0f ? -20.0f : (d > 20.0f ? 20.0f : d), r = expf(x), cf = (float)c;
    float tr = r > cf ? cf : r, p = expf(lp), po = expf(old);
    int valid;
    if (!kl) {
        float diff = p - po;
        valid = A > 0 ? diff <= (float)hi : diff >= (float)-lo;
    } else {
        float t1 = po * (old - lp), num = (1.0f - po) + 1e-8f, den = (1.0f - p) + 1e-8f;
        float bkl = t1 + (1.0f - po) * logf(num / den);
        valid = A > 0 ? (bkl <= (float)hi || p <= po) : (bkl <= (float)lo || p >= po);
    }
    e.dloss = valid ? -A * tr : 0.0;
    e.loss = e.dloss * lp;
    e.clipped = !valid;
    e.lower = valid && r > cf;
    return e;
}

/* aux: clip_cov's corr or kl_cov's selection of this token */
static struct pg_elem pg_element(vc_pg_mode mode, double old, double lp, double A, double seq, double lo, double hi,
                                 const vc_pg_config *cfg, double aux) {
    struct pg_elem e = { 0 };
    double xpass, x, d = (float)(lp - old);
    switch (mode) {
    case VC_PG_GSPO: {
        x = pg_clampd((float)seq, -INFINITY, 10.0, &xpass); /* lp - sg(lp) + sg(seq), clamped above at 10 */
        double r = exp((float)x);
        double cpass, rc = pg_clampd(r, 1.0 - lo, 1.0 + hi, &cpass);
        double l1 = (float)(-A * r), l2 = (float)(-A * rc), w = max_wa(l1, l2);
        e.loss = l1 > l2 ? l1 : l2;
        e.dloss = w * (-A * r * xpass) + (1.0 - w) * (-A * cpass * r * xpass);
        e.clipped = l2 > l1;
        return e;
    }
    case VC_PG_GPG:
    case VC_PG_REINFORCE:
        e.loss = -lp * A;
        e.dloss = -A;
        return e;
    case VC_PG_CLIP_COV: { /* unclamped ratio, no dual clip, some tokens switched off */
        double r = (float)exp(d);
        e = pg_vanilla(A, r, r, lo, hi, INFINITY);
        e.loss *= aux;
        e.dloss *= aux;
        e.clipped = aux == 0.0;
        e.lower = 0.0;
        return e;
    }
    case VC_PG_DPPO_TV:
    case VC_PG_DPPO_KL:
        return pg_dppo(mode == VC_PG_DPPO_KL, A, (float)lp, (float)old, (float)d, lo, hi, cfg->clip_ratio_c);
    case VC_PG_DRO:
        e.loss = -(lp * A - 0.5 * cfg->dro_beta * d * d);
        e.dloss = -(A - cfg->dro_beta * d);
        return e;
    case VC_PG_KL_COV: {
        double r = (float)exp(d);
        e.loss = -A * r + aux * cfg->ppo_kl_coef * fabs(d);
        e.dloss = -A * r + aux * cfg->ppo_kl_coef * (d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0));
        return e;
    }
    default: break;
    }
    x = pg_clampd(d, -20.0, 20.0, &xpass);
    double r = (float)exp(x);
    if (mode == VC_PG_SAPO) return pg_sapo(A, r, r * xpass, cfg);
    if (mode == VC_PG_CISPO) {
        double cpass, rc = (float)pg_clampd(r, 1.0 - lo, 1.0 + hi, &cpass);
        e.loss = -rc * A * lp;
        e.dloss = -rc * A;
        e.clipped = r != rc;
        return e;
    }
    return pg_vanilla(A, r, r * xpass, lo, hi, cfg->clip_ratio_c);
}

/* the approx-KL metric of one token: -(lp - old), clamped as the mode's ratio is; |lp - old| for kl_cov */
static float pg_kl_metric(vc_pg_mode mode, double d) {
    if (mode == VC_PG_KL_COV) return (float)fabs(d);
    if (mode == VC_PG_VANILLA || mode == VC_PG_CISPO || mode == VC_PG_SAPO || mode == VC_PG_DPPO_TV ||
        mode == VC_PG_DPPO_KL)
        d = d < -20.0 ? -20.0 : (d > 20.0 ? 20.0 : d);
    return (float)-d;
}

vc_status vc_policy_loss(vc_pg_mode mode, const float *old_logp, const float *logp, const float *adv,
                         const float *mask, int B, int T, const vc_pg_config *cfg, const float *is_weights,
                         double *loss, vc_pg_metrics *metrics, float *dlogp) {
    if (B <= 0 || T <= 0) return vc_fail(VC_ERR_SHAPE, "policy_loss: bad shape [%d,%d]", B, T);
    if (mode == VC_PG_VANILLA && !(cfg->clip_ratio_c > 1.0))
        return vc_fail(VC_ERR_ARG, "policy_loss: clip_ratio_c for dual-clip PPO must be > 1.0, got %g",
                       cfg->clip_ratio_c);
    if (mode == VC_PG_SAPO && !(cfg->tau_pos > 0 && cfg->tau_neg > 0))
        return vc_fail(VC_ERR_ARG, "policy_loss: sapo's tau_pos and tau_neg must be > 0, got %g and %g", cfg->tau_pos,
                       cfg->tau_neg);
    if (mode == VC_PG_DRO && !(cfg->dro_beta > 0))
        return vc_fail(VC_ERR_ARG, "policy_loss.dro_beta must be a positive value when using DRO, got %g", cfg->dro_beta);
    size_t n = (size_t)B * T;
    double lo, hi;
    clip_bounds(cfg, &lo, &hi);
    if (mode == VC_PG_GEO_MEAN)
        return pg_geo_mean(old_logp, logp, adv, mask, B, T, lo, hi, &cfg->norm, is_weights, loss, metrics, dlogp);
    float *lmat = vc_malloc(sizeof(float) * n), *dl = vc_malloc(sizeof(float) * n);
    float *cf = vc_malloc(sizeof(float) * n), *lf = vc_malloc(sizeof(float) * n), *kl = vc_malloc(sizeof(float) * n);
    vc_status st = VC_OK;
    if (!lmat || !dl || !cf || !lf || !kl) { st = VC_ERR_NOMEM; goto out; }
    /* clip_cov / kl_cov choose tokens over the whole micro-batch first (into lf, reused below) */
    if (mode == VC_PG_CLIP_COV) st = pg_clip_cov_corr(old_logp, logp, adv, mask, n, lo, hi, cfg, lf);
    else if (mode == VC_PG_KL_COV) st = pg_kl_cov_pick(logp, adv, mask, n, cfg, lf);
    if (st) goto out;
    int aux = mode == VC_PG_CLIP_COV || mode == VC_PG_KL_COV;
    for (int i = 0; i < B; i++) {
        size_t row = (size_t)i * T;
        double seq = mode == VC_PG_GSPO ? gspo_seq(old_logp, logp, mask, T, row) : 0.0;
        for (int t = 0; t < T; t++) {
            size_t k = row + t;
            struct pg_elem e = pg_element(mode, old_logp[k], logp[k], adv[k], seq, lo, hi, cfg, aux ? lf[k] : 0.0);
            double w = is_weights ? is_weights[k] : 1.0;
            lmat[k] = (float)(e.loss * w);
            dl[k] = (float)(e.dloss * w);
            cf[k] = (float)e.clipped;
            lf[k] = (float)e.lower;
            kl[k] = pg_kl_metric(mode, (double)logp[k] - old_logp[k]);
        }
    }
    vc_agg_mode agg = mode == VC_PG_GSPO || mode == VC_PG_SAPO ? VC_AGG_SEQ_MEAN_TOKEN_MEAN : cfg->agg;
    st = vc_agg_loss(lmat, mask, B, T, agg, &cfg->norm, loss, dlogp ? lmat : NULL);
    if (st) goto out;
    if (dlogp)
        for (size_t k = 0; k < n; k++) dlogp[k] = lmat[k] * dl[k];
    if (metrics) {
        metrics->pg_clipfrac = (float)vc_masked_mean(cf, mask, n);
        metrics->ppo_kl = (float)vc_masked_mean(kl, mask, n);
        int lower = mode == VC_PG_VANILLA || mode == VC_PG_DPPO_TV || mode == VC_PG_DPPO_KL;
        metrics->pg_clipfrac_lower = lower ? (float)vc_masked_mean(lf, mask, n) : 0.0;
    }
out:
    free(lmat); free(dl); free(cf); free(lf); free(kl);
    return st;
}
