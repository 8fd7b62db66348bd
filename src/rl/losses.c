/* Value loss, entropy, KL penalties and KL controllers (core_algos.py, torch_functional.py). */
#include "verlc/rl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double max_w(double a, double b) { return a > b ? 1.0 : (a == b ? 0.5 : 0.0); }
static double min_w(double a, double b) { return a < b ? 1.0 : (a == b ? 0.5 : 0.0); }

/* One element of the clipped value loss: value of max(l1, l2) and its derivative w.r.t. v. */
static void vf_elem(double v, double R, double V, double c, double *l, double *dl, int *clipped) {
    double hi = (float)(V + c), lo = (float)(V - c);
    /* clip_by_value = max(min(v, hi), lo) */
    double a = v < hi ? v : hi, da = min_w(v, hi);
    double vc = a > lo ? a : lo, dvc = da * max_w(a, lo);
    double l1 = (float)((v - R) * (v - R)), l2 = (float)((vc - R) * (vc - R));
    double w = max_w(l1, l2);
    *l = l1 > l2 ? l1 : l2;
    *dl = w * 2.0 * (v - R) + (1.0 - w) * 2.0 * (vc - R) * dvc;
    *clipped = l2 > l1;
}

vc_status vc_value_loss(const float *vpreds, const float *returns, const float *values, const float *mask,
                        int B, int T, float cliprange_value, vc_agg_mode agg, const vc_agg_norm *norm,
                        double *vf_loss, double *vf_clipfrac, float *dvpreds) {
    if (B <= 0 || T <= 0) return vc_fail(VC_ERR_SHAPE, "value_loss: bad shape [%d,%d]", B, T);
    size_t n = (size_t)B * T;
    float *lm = vc_malloc(sizeof(float) * n), *dl = vc_malloc(sizeof(float) * n), *cf = vc_malloc(sizeof(float) * n);
    vc_status st = VC_OK;
    if (!lm || !dl || !cf) { st = VC_ERR_NOMEM; goto out; }
    for (size_t k = 0; k < n; k++) {
        double l, d;
        int c;
        vf_elem(vpreds[k], returns[k], values[k], cliprange_value, &l, &d, &c);
        lm[k] = (float)l;
        dl[k] = (float)d;
        cf[k] = (float)c;
    }
    double agg_v;
    st = vc_agg_loss(lm, mask, B, T, agg, norm, &agg_v, dvpreds ? lm : NULL);
    if (st) goto out;
    *vf_loss = 0.5 * agg_v;
    if (vf_clipfrac) *vf_clipfrac = (float)vc_masked_mean(cf, mask, n);
    if (dvpreds)
        for (size_t k = 0; k < n; k++) dvpreds[k] = 0.5f * lm[k] * dl[k];
out:
    free(lm); free(dl); free(cf);
    return st;
}

/* Row softmax statistics: max, log-sum-exp and E_p[z], accumulated in double. */
static void row_stats(const float *z, size_t V, double *lse, double *ez) {
    double m = -INFINITY, s = 0.0, sz = 0.0;
    for (size_t v = 0; v < V; v++) if (z[v] > m) m = z[v];
    for (size_t v = 0; v < V; v++) {
        double e = exp((double)z[v] - m);
        s += e;
        sz += e * z[v];
    }
    *lse = m + log(s);
    *ez = sz / s;
}

void vc_entropy_from_logits(const float *logits, size_t N, size_t V, float *out) {
    for (size_t i = 0; i < N; i++) {
        double lse, ez;
        row_stats(logits + i * V, V, &lse, &ez);
        out[i] = (float)(lse - ez);
    }
}

void vc_entropy_backward(const float *logits, size_t N, size_t V, const float *dH, float *dlogits) {
    for (size_t i = 0; i < N; i++) {
        const float *z = logits + i * V;
        double lse, ez;
        row_stats(z, V, &lse, &ez);
        for (size_t v = 0; v < V; v++) {
            double p = exp((double)z[v] - lse);
            dlogits[i * V + v] = (float)(dH[i] * -p * ((double)z[v] - ez));
        }
    }
}

vc_status vc_entropy_loss(const float *logits, const float *mask, int B, int T, int V, vc_agg_mode agg,
                          const vc_agg_norm *norm, double *loss) {
    if (B <= 0 || T <= 0 || V <= 0) return vc_fail(VC_ERR_SHAPE, "entropy_loss: bad shape [%d,%d,%d]", B, T, V);
    float *h = vc_malloc(sizeof(float) * (size_t)B * T);
    if (!h) return VC_ERR_NOMEM;
    vc_entropy_from_logits(logits, (size_t)B * T, (size_t)V, h);
    vc_status st = vc_agg_loss(h, mask, B, T, agg, norm, loss, NULL);
    free(h);
    return st;
}

vc_status vc_kl_parse(const char *name, vc_kl_spec *spec) {
    static const struct { const char *name; vc_kl_type type; } names[] = {
        { "kl", VC_KL_K1 }, { "k1", VC_KL_K1 }, { "abs", VC_KL_ABS }, { "mse", VC_KL_K2 },
        { "k2", VC_KL_K2 }, { "low_var_kl", VC_KL_K3 }, { "k3", VC_KL_K3 },
    };
    if (!name) return vc_fail(VC_ERR_ARG, "kl_penalty: missing name");
    size_t len = strlen(name);
    int plus = len > 0 && name[len - 1] == '+';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) == len - plus && !strncmp(name, names[i].name, len - plus)) {
            spec->type = names[i].type;
            spec->straight_through = plus && names[i].type != VC_KL_K2;
            return VC_OK;
        }
    }
    if (!strcmp(name, "full")) return vc_fail(VC_ERR_UNSUPPORTED, "kl_penalty: 'full' is not implemented (as in verl)");
    return vc_fail(VC_ERR_UNSUPPORTED, "kl_penalty: unknown kl penalty type '%s'", name);
}

void vc_kl_penalty(vc_kl_spec spec, const float *logp, const float *ref_logp, size_t n, float *kl, float *dkl) {
    for (size_t i = 0; i < n; i++) {
        double d = (float)((double)logp[i] - ref_logp[i]), v, g;
        switch (spec.type) {
        case VC_KL_K1: v = d; g = 1.0; break;
        case VC_KL_ABS: v = fabs(d); g = d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0); break;
        case VC_KL_K2: v = 0.5 * d * d; g = d; break;
        default: {
            double x = (float)((double)ref_logp[i] - logp[i]), pass = x >= -20.0 && x <= 20.0;
            x = x < -20.0 ? -20.0 : (x > 20.0 ? 20.0 : x);
            double r = (float)exp(x), k = (float)((float)(r - x) - 1.0);
            double kpass = k >= -10.0 && k <= 10.0;
            v = k < -10.0 ? -10.0 : (k > 10.0 ? 10.0 : k);
            g = (1.0 - r) * pass * kpass;
        }
        }
        if (spec.straight_through) g = d;
        kl[i] = (float)v;
        if (dkl) dkl[i] = (float)g;
    }
}

void vc_kl_rewards(const float *scores, const float *old_logp, const float *ref_logp, size_t n,
                   float kl_ratio, float *out) {
    for (size_t i = 0; i < n; i++) {
        float kl = old_logp[i] - ref_logp[i];
        out[i] = scores[i] - kl * kl_ratio;
    }
}

void vc_kl_ctrl_fixed(vc_kl_ctrl *c, double kl_coef) {
    memset(c, 0, sizeof *c);
    c->value = kl_coef;
}

vc_status vc_kl_ctrl_adaptive(vc_kl_ctrl *c, double init_kl_coef, double target_kl, double horizon) {
    if (!(horizon > 0)) return vc_fail(VC_ERR_ARG, "kl_ctrl.horizon must be larger than 0, got %g", horizon);
    if (!(target_kl != 0)) return vc_fail(VC_ERR_ARG, "kl_ctrl.target_kl must be non-zero");
    c->adaptive = 1;
    c->value = init_kl_coef;
    c->target = target_kl;
    c->horizon = horizon;
    return VC_OK;
}

void vc_kl_ctrl_update(vc_kl_ctrl *c, double current_kl, double n_steps) {
    if (!c->adaptive) return;
    double e = current_kl / c->target - 1.0;
    e = e < -0.2 ? -0.2 : (e > 0.2 ? 0.2 : e);
    c->value *= 1.0 + e * n_steps / c->horizon;
}

vc_status vc_apply_kl_penalty(const float *scores, const float *old_logp, const float *ref_logp,
                              const float *mask, int B, int T, vc_kl_spec spec, vc_kl_ctrl *ctrl,
                              float *rewards, double *current_kl, double *beta) {
    if (B <= 0 || T <= 0) return vc_fail(VC_ERR_SHAPE, "apply_kl_penalty: bad shape [%d,%d]", B, T);
    size_t n = (size_t)B * T;
    float *kld = vc_malloc(sizeof(float) * n);
    if (!kld) return VC_ERR_NOMEM;
    vc_kl_penalty(spec, old_logp, ref_logp, n, kld, NULL);
    double b = ctrl->value, kl_sum = 0.0;
    for (size_t k = 0; k < n; k++) {
        kld[k] *= mask[k];
        rewards[k] = (float)(scores[k] - (float)b * kld[k]);
    }
    for (int i = 0; i < B; i++)
        kl_sum += (float)vc_masked_mean(kld + (size_t)i * T, mask + (size_t)i * T, (size_t)T);
    double cur = (float)(kl_sum / B);
    vc_kl_ctrl_update(ctrl, cur, B);
    free(kld);
    if (current_kl) *current_kl = cur;
    if (beta) *beta = b;
    return VC_OK;
}
