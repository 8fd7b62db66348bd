/* algorithm.rollout_correction's importance weights (verl's compute_rollout_correction_weights and
 * compute_is_metrics): pi_train / pi_rollout per token, or per sequence (the product over its tokens),
 * truncated at rollout_is_threshold (or, later verl's IcePop, zeroed outside "lower_upper"), optionally
 * normalised to mean 1; and the two-stage statistics
 * (rollout_corr.h) shared with rejection sampling and the off-policy diagnostics (rollout_rs.c).
 * verlc's rollout and training share kernels, so on the CPU the weights are 1 to rounding; on a GPU,
 * cuBLAS's batch-dependent GEMMs make them differ slightly, which is what this corrects. */
#include "rollout_corr.h"
#include "verlc/core.h"
#include <math.h>
#include <stdio.h>
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

vc_status rl_rollout_is_threshold_parse(const char *spec, double *upper, double *lower) {
    char *end = NULL;
    const char *us = strchr(spec, '_');
    *lower = 0;
    if (us) {
        *lower = strtod(spec, &end);
        if (end != us) goto bad;
        spec = us + 1;
    }
    *upper = strtod(spec, &end);
    if (end == spec || *end) goto bad;
    if (!(*upper > 0) || (us && !(*lower > 0)) || (us && *lower > *upper))
        return vc_fail(VC_ERR_ARG, "algorithm.rollout_correction.rollout_is_threshold: bounds must be positive, lower <= "
                       "upper (got %g_%g)", *lower, *upper);
    return VC_OK;
bad:
    return vc_fail(VC_ERR_ARG, "algorithm.rollout_correction.rollout_is_threshold: '%s' is neither a number nor "
                   "\"lower_upper\"", spec);
}

void rl_rc_raw_init(rl_rc_raw *r) {
    memset(r->s, 0, sizeof r->s);
    for (int i = 0; i < RL_RC_NM; i++) r->mx[i] = -INFINITY, r->mn[i] = INFINITY;
}

void rl_rc_out_add(rl_rc_out *o, const char *name, double v) {
    if (o->n >= RL_RC_MAX_OUT) return;
    snprintf(o->name[o->n], sizeof o->name[0], "rollout_corr/%s", name);
    o->v[o->n++] = v;
}

static double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* sums: mask, w, w > thr, w < 1/thr, clamped w and its square; rows, rows above / below (log space);
 * per-row mean weights: rows, sum, square sum, above, below */
enum { I_M, I_W, I_HI, I_LO, I_WC, I_WC2, I_ROWS, I_RHI, I_RLO, I_SQN, I_SQS, I_SQS2, I_SQHI, I_SQLO, I_OOB };
enum { IX_MX, IX_SQMX, IX_SQDEV };  /* mx[] */
enum { IN_MN, IN_SQMN };            /* mn[] */

static void is_accum(const rl_rc_cfg *c, const double *lr, const float *mask, int B, int T, rl_rc_raw *r,
                     float *is_w) {
    double thr = c->is_thr, lo_thr = c->is_lo > 0 ? c->is_lo : 1.0 / thr, *s = r->s;
    int icepop = c->is_lo > 0;
    int seq = c->is_level == RL_RIS_SEQUENCE;
    for (int i = 0; i < B; i++) {
        size_t row = (size_t)i * T;
        double lsum = 0, msum = 0, wsum = 0;
        for (int j = 0; j < T; j++) lsum += lr[row + j] * mask[row + j], msum += mask[row + j];
        if (seq) { /* the row's weight in log space, as verl's metrics take it (every row) */
            s[I_ROWS] += 1;
            s[I_RHI] += lsum > log(thr);
            s[I_RLO] += lsum < log(lo_thr);
            r->mx[IX_MX] = fmax(r->mx[IX_MX], exp(fmin(lsum, SAFETY_BOUND)));
            r->mn[IN_MN] = fmin(r->mn[IN_MN], exp(lsum));
        }
        double wseq = exp(clampd(lsum, -SAFETY_BOUND, SAFETY_BOUND));
        for (int j = 0; j < T; j++) {
            size_t k = row + j;
            double m = mask[k], w = (seq ? wseq : exp(clampd(lr[k], -SAFETY_BOUND, SAFETY_BOUND))) * m;
            if (m > 0) {
                double wc = clampd(w, lo_thr, thr);
                s[I_M] += m;
                s[I_W] += w * m;
                s[I_HI] += (w > thr) * m;
                s[I_LO] += (w < lo_thr) * m;
                s[I_WC] += wc * m;
                s[I_WC2] += wc * wc * m;
                s[I_OOB] += (w < lo_thr || w > thr) * m;
                if (!seq) r->mx[IX_MX] = fmax(r->mx[IX_MX], w), r->mn[IN_MN] = fmin(r->mn[IN_MN], w);
            }
            wsum += w * m;
            /* truncated (TIS), or zero outside [lower, upper] (IcePop); padding stays 0 */
            if (is_w) is_w[k] = (float)(icepop ? (w >= lo_thr && w <= thr ? w : 0.0) : fmin(w, thr));
        }
        double sq = wsum / (msum + 1e-8); /* the row's mean weight (0 for an empty row) */
        s[I_SQN] += 1;
        s[I_SQS] += sq;
        s[I_SQS2] += sq * sq;
        s[I_SQHI] += sq > thr;
        s[I_SQLO] += sq < lo_thr;
        r->mx[IX_SQMX] = fmax(r->mx[IX_SQMX], sq);
        r->mx[IX_SQDEV] = fmax(r->mx[IX_SQDEV], fabs(sq - 1.0));
        r->mn[IN_SQMN] = fmin(r->mn[IN_SQMN], sq);
    }
}

static void is_finalize(const rl_rc_cfg *c, const rl_rc_raw *r, rl_rc_out *o) {
    const double *s = r->s;
    int seq = c->is_level == RL_RIS_SEQUENCE;
    double M = s[I_M] + 1e-8, mean_c = s[I_WC] / M, var = s[I_WC2] / M - mean_c * mean_c;
    double rows = fmax(s[I_ROWS], 1), n = s[I_SQN], sqm = n > 0 ? s[I_SQS] / n : 0;
    rl_rc_out_add(o, "rollout_is_max", s[I_M] > 0 || seq ? r->mx[IX_MX] : 0);
    rl_rc_out_add(o, "rollout_is_min", s[I_M] > 0 || seq ? r->mn[IN_MN] : 0);
    rl_rc_out_add(o, "rollout_is_mean", s[I_W] / M);
    rl_rc_out_add(o, "rollout_is_ratio_fraction_high", seq ? s[I_RHI] / rows : s[I_HI] / M);
    rl_rc_out_add(o, "rollout_is_ratio_fraction_low", seq ? s[I_RLO] / rows : s[I_LO] / M);
    rl_rc_out_add(o, "rollout_is_std", s[I_M] > 1 ? sqrt(fmax(var, 0)) : 0.0);
    /* ESS of the weights clamped to [1/thr, thr]: 1 / mean((w / mean w)^2) */
    double ms = s[I_WC2] / M / ((mean_c + 1e-8) * (mean_c + 1e-8));
    rl_rc_out_add(o, "rollout_is_eff_sample_size", ms > 0 ? 1.0 / ms : 0.0);
    rl_rc_out_add(o, "rollout_is_seq_mean", sqm);
    rl_rc_out_add(o, "rollout_is_seq_std", n > 1 ? sqrt(fmax((s[I_SQS2] - n * sqm * sqm) / (n - 1), 0)) : 0.0);
    rl_rc_out_add(o, "rollout_is_seq_max", n > 0 ? r->mx[IX_SQMX] : 0);
    rl_rc_out_add(o, "rollout_is_seq_min", n > 0 ? r->mn[IN_SQMN] : 0);
    rl_rc_out_add(o, "rollout_is_seq_max_deviation", n > 0 ? r->mx[IX_SQDEV] : 0);
    rl_rc_out_add(o, "rollout_is_seq_fraction_high", n > 0 ? s[I_SQHI] / n : 0);
    rl_rc_out_add(o, "rollout_is_seq_fraction_low", n > 0 ? s[I_SQLO] / n : 0);
    if (c->is_lo > 0) rl_rc_out_add(o, "rollout_is_oob_ratio", s[I_OOB] / M); /* IcePop: tokens zeroed */
}

void rl_rc_accum(const rl_rc_cfg *c, unsigned parts, const float *lp, const float *rlp, const float *mask, int B,
                 int T, rl_rc_raw *r, float *is_w, float *keep) {
    size_t n = (size_t)B * T;
    double *lr = vc_malloc(sizeof(double) * (n ? n : 1));
    if (!lr) return; /* statistics only: left empty rather than failing the step */
    for (size_t k = 0; k < n; k++) lr[k] = (double)lp[k] - rlp[k];
    if ((parts & RL_RC_IS) && c->is_level) is_accum(c, lr, mask, B, T, r, is_w);
    if ((parts & RL_RC_RS) && c->n_rs) rl_rs_accum(c, lr, mask, B, T, r, keep);
    if (parts & RL_RC_OFF) rl_offpolicy_accum(lp, rlp, mask, B, T, r);
    free(lr);
}

void rl_rc_finalize(const rl_rc_cfg *c, unsigned parts, const rl_rc_raw *r, rl_rc_out *o) {
    o->n = 0;
    if ((parts & RL_RC_IS) && c->is_level) is_finalize(c, r, o);
    if ((parts & RL_RC_RS) && c->n_rs) rl_rs_finalize(c, r, o);
    if (parts & RL_RC_OFF) rl_offpolicy_finalize(r, o);
}

void rl_rc_norm_sums(const rl_rc_cfg *c, const float *is_w, const float *mask, int B, int T, double v[2]) {
    int seq = c->is_level == RL_RIS_SEQUENCE;
    v[0] = v[1] = 0;
    for (int i = 0; i < B; i++) {
        size_t row = (size_t)i * T;
        double ws = 0, ms = 0;
        for (int j = 0; j < T; j++) ws += (double)is_w[row + j] * mask[row + j], ms += mask[row + j];
        if (!seq) v[0] += ws, v[1] += ms;
        else if (ms > 0) v[0] += ws / (ms + 1e-8), v[1] += 1;
    }
}

double rl_rc_normalise(float *is_w, size_t n, const double v[2], int seq) {
    double mean = v[1] > 0 ? v[0] / (seq ? fmax(v[1], 1e-8) : v[1] + 1e-8) : 0;
    if (!(mean > 1e-8)) return 1.0;
    for (size_t k = 0; k < n; k++) is_w[k] = (float)(is_w[k] / mean);
    return mean;
}
