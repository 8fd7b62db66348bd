/* Policy losses with their gradients w.r.t. log_prob (core_algos.compute_policy_loss_{vanilla,gspo,cispo}). */
#include "verlc/rl.h"
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
}

vc_status vc_pg_mode_parse(const char *name, vc_pg_mode *mode) {
    if (name && !strcmp(name, "vanilla")) *mode = VC_PG_VANILLA;
    else if (name && !strcmp(name, "gspo")) *mode = VC_PG_GSPO;
    else if (name && !strcmp(name, "cispo")) *mode = VC_PG_CISPO;
    else return vc_fail(VC_ERR_UNSUPPORTED, "unsupported policy loss_mode: %s", name ? name : "(null)");
    return VC_OK;
}

/* torch.maximum / torch.minimum backward: the gradient goes to the larger (smaller) input, half each on ties. */
static double max_wa(double a, double b) { return a > b ? 1.0 : (a == b ? 0.5 : 0.0); }
static double min_wa(double a, double b) { return a < b ? 1.0 : (a == b ? 0.5 : 0.0); }
/* torch.clamp: value and whether the gradient passes (inclusive bounds) */
static double clampd(double x, double lo, double hi, double *pass) {
    *pass = (x >= lo && x <= hi) ? 1.0 : 0.0;
    return x < lo ? lo : (x > hi ? hi : x);
}

struct pg_elem { double loss, dloss, clipped, lower; }; /* loss, d loss/d lp, clipfrac flags */

/* vanilla PPO element with dual clip; r = exp(x), dr/dlp = r * xpass */
static struct pg_elem pg_vanilla(double A, double r, double dr, double lo, double hi, double c) {
    struct pg_elem e;
    double cpass, rc = clampd(r, 1.0 - lo, 1.0 + hi, &cpass);
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

static struct pg_elem pg_element(vc_pg_mode mode, double old, double lp, double A, double seq,
                                 double lo, double hi, double c) {
    struct pg_elem e = { 0 };
    double xpass, x;
    if (mode == VC_PG_GSPO) {
        x = clampd((float)seq, -INFINITY, 10.0, &xpass); /* lp - sg(lp) + sg(seq), clamped above at 10 */
        double r = exp((float)x);
        double cpass, rc = clampd(r, 1.0 - lo, 1.0 + hi, &cpass);
        double l1 = (float)(-A * r), l2 = (float)(-A * rc), w = max_wa(l1, l2);
        e.loss = l1 > l2 ? l1 : l2;
        e.dloss = w * (-A * r * xpass) + (1.0 - w) * (-A * cpass * r * xpass);
        e.clipped = l2 > l1;
        return e;
    }
    x = clampd((float)(lp - old), -20.0, 20.0, &xpass);
    double r = (float)exp(x);
    if (mode == VC_PG_CISPO) {
        double cpass, rc = (float)clampd(r, 1.0 - lo, 1.0 + hi, &cpass);
        e.loss = -rc * A * lp;
        e.dloss = -rc * A;
        e.clipped = r != rc;
        return e;
    }
    return pg_vanilla(A, r, r * xpass, lo, hi, c);
}

vc_status vc_policy_loss(vc_pg_mode mode, const float *old_logp, const float *logp, const float *adv,
                         const float *mask, int B, int T, const vc_pg_config *cfg, const float *is_weights,
                         double *loss, vc_pg_metrics *metrics, float *dlogp) {
    if (B <= 0 || T <= 0) return vc_fail(VC_ERR_SHAPE, "policy_loss: bad shape [%d,%d]", B, T);
    if (mode == VC_PG_VANILLA && !(cfg->clip_ratio_c > 1.0))
        return vc_fail(VC_ERR_ARG, "policy_loss: clip_ratio_c for dual-clip PPO must be > 1.0, got %g",
                       cfg->clip_ratio_c);
    size_t n = (size_t)B * T;
    float *lmat = vc_malloc(sizeof(float) * n), *dl = vc_malloc(sizeof(float) * n);
    float *cf = vc_malloc(sizeof(float) * n), *lf = vc_malloc(sizeof(float) * n), *kl = vc_malloc(sizeof(float) * n);
    vc_status st = VC_OK;
    if (!lmat || !dl || !cf || !lf || !kl) { st = VC_ERR_NOMEM; goto out; }
    double lo, hi;
    clip_bounds(cfg, &lo, &hi);
    for (int i = 0; i < B; i++) {
        size_t row = (size_t)i * T;
        double seq = mode == VC_PG_GSPO ? gspo_seq(old_logp, logp, mask, T, row) : 0.0;
        for (int t = 0; t < T; t++) {
            size_t k = row + t;
            struct pg_elem e = pg_element(mode, old_logp[k], logp[k], adv[k], seq, lo, hi, cfg->clip_ratio_c);
            double w = is_weights ? is_weights[k] : 1.0;
            lmat[k] = (float)(e.loss * w);
            dl[k] = (float)(e.dloss * w);
            cf[k] = (float)e.clipped;
            lf[k] = (float)e.lower;
            double d = (double)logp[k] - old_logp[k];
            if (mode != VC_PG_GSPO) d = d < -20.0 ? -20.0 : (d > 20.0 ? 20.0 : d);
            kl[k] = (float)-d;
        }
    }
    vc_agg_mode agg = mode == VC_PG_GSPO ? VC_AGG_SEQ_MEAN_TOKEN_MEAN : cfg->agg;
    st = vc_agg_loss(lmat, mask, B, T, agg, &cfg->norm, loss, dlogp ? lmat : NULL);
    if (st) goto out;
    if (dlogp)
        for (size_t k = 0; k < n; k++) dlogp[k] = lmat[k] * dl[k];
    if (metrics) {
        metrics->pg_clipfrac = (float)vc_masked_mean(cf, mask, n);
        metrics->ppo_kl = (float)vc_masked_mean(kl, mask, n);
        metrics->pg_clipfrac_lower = mode == VC_PG_VANILLA ? (float)vc_masked_mean(lf, mask, n) : 0.0;
    }
out:
    free(lmat); free(dl); free(cf); free(lf); free(kl);
    return st;
}
