/* algorithm.rollout_correction.rollout_is (verl's rollout_corr_helper.compute_rollout_correction_weights):
 * truncated importance weights pi_old / pi_rollout between the trainer's log-probs and the rollout's,
 * per token or per sequence (the product over its tokens), capped at rollout_is_threshold, optionally
 * normalised to mean 1 over the global batch; the policy loss multiplies each token's loss by its
 * weight. verlc's rollout and training share kernels, so on the CPU the weights are 1 to rounding; on a
 * GPU, cuBLAS's batch-dependent GEMMs make them differ slightly, which is what this corrects. */
#include "trainer_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAFETY_BOUND 20.0

vc_status rl_rollout_is_parse(const char *level, int *out) {
    if (!level) *out = RL_RIS_OFF;
    else if (!strcmp(level, "token")) *out = RL_RIS_TOKEN;
    else if (!strcmp(level, "sequence")) *out = RL_RIS_SEQUENCE;
    else
        return vc_fail(VC_ERR_ARG, "algorithm.rollout_correction.rollout_is must be token, sequence or null, got '%s'",
                       level);
    return VC_OK;
}

static double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* sums over this rank's rows, reduced over ranks: [0] mask, [1] sum w, [2] #high, [3] #low, [4] sum wc,
 * [5] sum wc^2, [6] rows, [7] rows high, [8] rows low; and max / min of the weights */
enum { S_M, S_W, S_HI, S_LO, S_WC, S_WC2, S_ROWS, S_RHI, S_RLO, S_N };

vc_status rl_rollout_is_weights(vc_rl_trainer *t, rl_batch *b, rl_metrics *met) {
    double thr = t->ris_threshold, lo_thr = 1.0 / thr, s[S_N] = { 0 }, mx = -INFINITY, mn = INFINITY;
    int seq = t->ris_level == RL_RIS_SEQUENCE;
    for (int i = 0; i < b->B; i++) {
        size_t row = (size_t)i * b->T;
        double lsum = 0, msum = 0;
        for (int j = 0; j < b->T; j++) {
            lsum += ((double)b->old_logp[row + j] - b->rollout_logp[row + j]) * b->mask[row + j];
            msum += b->mask[row + j];
        }
        if (seq) { /* log-space statistics of the row's weight, as verl's metrics take them */
            s[S_ROWS] += 1;
            s[S_RHI] += lsum > log(thr);
            s[S_RLO] += lsum < log(lo_thr);
            if (msum > 0) {
                mx = fmax(mx, exp(fmin(lsum, SAFETY_BOUND)));
                mn = fmin(mn, exp(lsum));
            }
        }
        double wseq = exp(clampd(lsum, -SAFETY_BOUND, SAFETY_BOUND));
        for (int j = 0; j < b->T; j++) {
            size_t k = row + j;
            double m = b->mask[k];
            double w = seq ? wseq : exp(clampd((double)b->old_logp[k] - b->rollout_logp[k], -SAFETY_BOUND, SAFETY_BOUND));
            w *= m;
            if (m > 0) {
                double wc = clampd(w, lo_thr, thr);
                s[S_M] += m;
                s[S_W] += w * m;
                s[S_HI] += (w > thr) * m;
                s[S_LO] += (w < lo_thr) * m;
                s[S_WC] += wc * m;
                s[S_WC2] += wc * wc * m;
                if (!seq) mx = fmax(mx, w), mn = fmin(mn, w);
            }
            b->is_w[k] = (float)fmin(w, thr); /* truncated (TIS); padding stays 0 */
        }
    }
    vc_status st = rl_dist_reduce(t, s, S_N, VC_SUM);
    if (!st) st = rl_dist_reduce(t, &mx, 1, VC_MAX);
    if (!st) st = rl_dist_reduce(t, &mn, 1, VC_MIN);
    if (st) return st;
    double M = s[S_M] + 1e-8, mean_c = s[S_WC] / M, var = s[S_WC2] / M - mean_c * mean_c;
    rl_metrics_set(met, "rollout_corr/rollout_is_mean", s[S_W] / M);
    rl_metrics_set(met, "rollout_corr/rollout_is_max", mx);
    rl_metrics_set(met, "rollout_corr/rollout_is_min", mn);
    rl_metrics_set(met, "rollout_corr/rollout_is_ratio_fraction_high", seq ? s[S_RHI] / fmax(s[S_ROWS], 1) : s[S_HI] / M);
    rl_metrics_set(met, "rollout_corr/rollout_is_ratio_fraction_low", seq ? s[S_RLO] / fmax(s[S_ROWS], 1) : s[S_LO] / M);
    rl_metrics_set(met, "rollout_corr/rollout_is_std", s[S_M] > 1 ? sqrt(fmax(var, 0)) : 0.0);
    /* ESS of the weights clamped to [1/thr, thr]: 1 / mean((w / mean w)^2) */
    double ms = s[S_WC2] / M / ((mean_c + 1e-8) * (mean_c + 1e-8));
    rl_metrics_set(met, "rollout_corr/rollout_is_eff_sample_size", ms > 0 ? 1.0 / ms : 0.0);
    if (!t->ris_batch_norm) return VC_OK;
    /* normalised to mean 1 over the truncated weights of the global batch (tokens, or rows) */
    double v[2] = { 0, 0 };
    for (int i = 0; i < b->B; i++) {
        size_t row = (size_t)i * b->T;
        double ws = 0, ms2 = 0;
        for (int j = 0; j < b->T; j++) ws += (double)b->is_w[row + j] * b->mask[row + j], ms2 += b->mask[row + j];
        if (seq) {
            if (ms2 > 0) v[0] += ws / (ms2 + 1e-8), v[1] += 1;
        } else v[0] += ws, v[1] += ms2;
    }
    if ((st = rl_dist_reduce(t, v, 2, VC_SUM))) return st;
    double mean = v[1] > 0 ? v[0] / (seq ? fmax(v[1], 1e-8) : v[1] + 1e-8) : 0;
    if (mean > 1e-8)
        for (size_t k = 0; k < (size_t)b->B * b->T; k++) b->is_w[k] = (float)(b->is_w[k] / mean);
    rl_metrics_set(met, "rollout_corr/rollout_is_batch_norm_factor", mean > 1e-8 ? mean : 1.0);
    return VC_OK;
}
