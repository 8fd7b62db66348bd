/* Policy losses that look at the whole micro-batch before the per-token loss: clip_cov and kl_cov
 * (core_algos.compute_policy_loss_{clip_cov,kl_cov}, "The Entropy Mechanism of Reinforcement Learning
 * for Reasoning Language Models", arXiv 2505.22617) and geo_mean (GMPO, arXiv 2507.20673). */
#include "policy_loss_internal.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* masked means of A and of lp (verl_F.masked_mean: sum / (mask sum + 1e-8)) */
static void cov_means(const float *adv, const float *lp, const float *mask, size_t n, double *ma, double *ml) {
    *ma = vc_masked_mean(adv, mask, n);
    *ml = vc_masked_mean(lp, mask, n);
}

vc_status pg_clip_cov_corr(const float *old, const float *lp, const float *adv, const float *mask, size_t n,
                           double lo, double hi, const vc_pg_config *cfg, float *corr) {
    if (!(cfg->clip_cov_ratio > 0))
        return vc_fail(VC_ERR_ARG, "policy_loss: clip_cov_ratio must be > 0, got %g", cfg->clip_cov_ratio);
    size_t *cand = vc_malloc(sizeof(size_t) * (n ? n : 1));
    if (!cand) return VC_ERR_NOMEM;
    double ma, ml, msum = 0;
    cov_means(adv, lp, mask, n, &ma, &ml);
    size_t nc = 0;
    for (size_t k = 0; k < n; k++) {
        corr[k] = 1.0f;
        msum += mask[k];
        if (!(mask[k] > 0)) continue;
        double r = (float)exp((double)lp[k] - old[k]), A = adv[k], pass;
        float l1 = (float)(-A * r), l2 = (float)(-A * pg_clampd(r, 1.0 - lo, 1.0 + hi, &pass));
        if (l2 > l1) continue; /* clipped by the PPO clip already */
        double cov = (A - ma) * ((double)lp[k] - ml);
        if (cov > cfg->clip_cov_lb && cov < cfg->clip_cov_ub) cand[nc++] = k;
    }
    size_t want = (size_t)(cfg->clip_cov_ratio * msum);
    if (want < 1) want = 1;
    if (want > nc) want = nc;
    /* a uniform choice of `want` candidates: the first `want` steps of a Fisher-Yates shuffle */
    for (size_t i = 0; i < want; i++) {
        size_t j = i + (size_t)vc_rng_below(nc - i, cfg->seed, cfg->draw, i, 0x636c6970u);
        size_t t = cand[i];
        cand[i] = cand[j];
        cand[j] = t;
        corr[cand[i]] = 0.0f;
    }
    free(cand);
    return VC_OK;
}

struct cov_item { double cov; size_t k; };
static int cov_desc(const void *a, const void *b) {
    const struct cov_item *x = a, *y = b;
    if (x->cov != y->cov) return x->cov > y->cov ? -1 : 1;
    return x->k < y->k ? -1 : (x->k > y->k);
}

vc_status pg_kl_cov_pick(const float *lp, const float *adv, const float *mask, size_t n, const vc_pg_config *cfg,
                         float *sel) {
    if (!(cfg->kl_cov_ratio > 0))
        return vc_fail(VC_ERR_ARG, "policy_loss: kl_cov_ratio must be > 0, got %g", cfg->kl_cov_ratio);
    memset(sel, 0, sizeof(float) * n);
    size_t nv = 0;
    double sa = 0, sl = 0;
    for (size_t k = 0; k < n; k++)
        if (mask[k] > 0) { nv++; sa += adv[k]; sl += lp[k]; }
    if (!nv) return VC_OK;
    struct cov_item *it = vc_malloc(sizeof *it * nv);
    if (!it) return VC_ERR_NOMEM;
    double ma = sa / (double)nv, ml = sl / (double)nv; /* plain means over the valid tokens */
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (mask[k] > 0) it[m++] = (struct cov_item){ (adv[k] - ma) * ((double)lp[k] - ml), k };
    size_t want = (size_t)((double)nv * cfg->kl_cov_ratio);
    if (want < 1) want = 1;
    qsort(it, nv, sizeof *it, cov_desc);
    for (size_t i = 0; i < want && i < nv; i++) sel[it[i].k] = 1.0f;
    free(it);
    return VC_OK;
}

/* d/dd of sgn * min(sgn d, sgn clamp(d, -lo, hi)), torch's tie and clamp rules */
static double geo_dmin(double sgn, double d, double lo, double hi, double *m, int *clipped) {
    double pass, c = pg_clampd(d, -lo, hi, &pass);
    float a = (float)(sgn * d), b = (float)(sgn * c);
    *m = sgn * (a < b ? a : b);
    *clipped = (float)d != (float)c;
    double wa = a < b ? 1.0 : (a == b ? 0.5 : 0.0);
    return sgn * sgn * (wa + (1.0 - wa) * pass);
}

vc_status pg_geo_mean(const float *old, const float *lp, const float *adv, const float *mask, int B, int T,
                      double lo, double hi, const vc_agg_norm *norm, const float *is_weights, double *loss,
                      vc_pg_metrics *met, float *dlogp) {
    double denom = norm->global_batch_size > 0 ? norm->global_batch_size : B;
    double scale = (norm->dp_size > 0 ? norm->dp_size : 1.0) / denom, total = 0;
    double cf = 0, cl = 0, kl = 0, msum_all = 0;
    for (int i = 0; i < B; i++) {
        size_t row = (size_t)i * T;
        double ms = 0, sm = 0, sa = 0, lw = 0;
        for (int t = 0; t < T; t++) {
            size_t k = row + t;
            double d = (double)lp[k] - old[k], sgn = adv[k] > 0 ? 1.0 : (adv[k] < 0 ? -1.0 : 0.0), m;
            int clipped;
            double dm = geo_dmin(sgn, d, lo, hi, &m, &clipped);
            ms += mask[k];
            sm += m * mask[k];
            sa += (double)adv[k] * mask[k];
            if (is_weights) lw += log((double)is_weights[k] + 1e-10) * mask[k];
            cf += (clipped && adv[k] > 0) * mask[k];
            cl += (clipped && adv[k] < 0) * mask[k];
            kl += -d * mask[k];
            if (dlogp) dlogp[k] = (float)(dm * mask[k]); /* finished below */
        }
        msum_all += ms;
        double ratio = exp(sm / (ms + 1e-8)), A = sa / (ms + 1e-8);
        double w = is_weights ? exp(lw / (ms + 1e-8)) : 1.0, li = -A * ratio * w;
        total += li;
        if (dlogp)
            for (int t = 0; t < T; t++) dlogp[row + t] = (float)(scale * li * dlogp[row + t] / (ms + 1e-8));
    }
    *loss = total * scale;
    if (met) {
        met->pg_clipfrac = cf / (msum_all + 1e-8);
        met->pg_clipfrac_lower = cl / (msum_all + 1e-8);
        met->ppo_kl = kl / (msum_all + 1e-8);
    }
    return VC_OK;
}
