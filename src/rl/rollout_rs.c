/* algorithm.rollout_correction.rollout_rs (verl's compute_rollout_rejection_mask and compute_rs_metrics):
 * tokens or whole sequences whose divergence between the trainer's and the rollout's policy leaves a
 * trust region are masked out of training. Per token, with r = log(pi_train / pi_rollout) clamped to
 * +-20: k1 = -r, k2 = r^2 / 2, k3 = exp(r) - 1 - r; sequence options take the sum, mean or max over
 * the response. k1 bounds are ratios (lower_upper, or upper with lower 1/upper) compared in log space;
 * the others have an upper bound. Also the off-policy diagnostics (compute_offpolicy_metrics). */
#include "rollout_corr.h"
#include "verlc/core.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAFETY_BOUND 20.0
#define RS_S0 40                      /* first sum of option 0 */
#define RS_TOT (RS_S0 + RL_RS_MAX * 13) /* the combined mask's sums */
#define RS_M0 12                      /* first extreme of option 0 */
enum { R_M, R_SUM, R_SUMC, R_SUMC2, R_HI, R_LO, R_VN, R_VS, R_VS2, R_VHI, R_VLO, R_REJ, R_REJROWS };
enum { RX_TMAX, RX_VMAX, RX_VABS };
enum { RN_TMIN, RN_VMIN };
enum { T_REJ, T_ROWSANY, T_ROWS, T_M };

static const char *const rs_names[] = { "token_k1",    "token_k2",    "token_k3",   "seq_sum_k1",
                                        "seq_sum_k2",  "seq_sum_k3",  "seq_mean_k1", "seq_mean_k2",
                                        "seq_mean_k3", "seq_max_k2",  "seq_max_k3" };

/* the next comma-separated item of *p, trimmed, into buf */
static int next_item(const char **p, char *buf, size_t cap) {
    while (**p == ',' || isspace((unsigned char)**p)) (*p)++;
    if (!**p) return 0;
    size_t n = strcspn(*p, ",");
    const char *e = *p + n;
    while (e > *p && isspace((unsigned char)e[-1])) e--;
    size_t len = (size_t)(e - *p) < cap - 1 ? (size_t)(e - *p) : cap - 1;
    memcpy(buf, *p, len);
    buf[len] = 0;
    *p += n;
    return 1;
}

static int parse_num(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    return end != s && !*end && isfinite(*out);
}

#define RSK "algorithm.rollout_correction."
static vc_status parse_threshold(rl_rs_opt *o, const char *spec) {
    double lower, upper;
    const char *us = strchr(spec, '_');
    if (o->k != 1 && us)
        return vc_fail(VC_ERR_ARG, RSK "rollout_rs_threshold for %s takes one upper bound without '_', got '%s'",
                       o->name, spec);
    if (us) {
        char lo_s[64];
        size_t n = (size_t)(us - spec) < sizeof lo_s - 1 ? (size_t)(us - spec) : sizeof lo_s - 1;
        memcpy(lo_s, spec, n);
        lo_s[n] = 0;
        if (!parse_num(lo_s, &lower) || !parse_num(us + 1, &upper))
            return vc_fail(VC_ERR_ARG, RSK "rollout_rs_threshold: invalid threshold '%s' for %s", spec, o->name);
    } else {
        if (!parse_num(spec, &upper))
            return vc_fail(VC_ERR_ARG, RSK "rollout_rs_threshold: invalid threshold '%s' for %s", spec, o->name);
        lower = upper > 0 ? 1.0 / upper : 0;
    }
    if (!(upper > 0) || (o->k == 1 && !(lower > 0)))
        return vc_fail(VC_ERR_ARG, RSK "rollout_rs_threshold for %s must be positive, got '%s'", o->name, spec);
    o->lo = o->k == 1 ? log(lower) : 0.0;
    o->hi = o->k == 1 ? log(upper) : upper;
    return VC_OK;
}

vc_status rl_rs_parse(const char *rs, const char *threshold, rl_rc_cfg *c) {
    c->n_rs = 0;
    if (!rs) return VC_OK;
    char item[64];
    const char *p = rs;
    while (next_item(&p, item, sizeof item)) {
        int found = -1, dup = 0;
        for (int i = 0; i < RL_RS_MAX; i++)
            if (!strcmp(item, rs_names[i])) found = i;
        if (found < 0)
            return vc_fail(VC_ERR_ARG, RSK "rollout_rs: unknown option '%s' (token_k1|k2|k3, seq_sum_k1|k2|k3, "
                                       "seq_mean_k1|k2|k3, seq_max_k2|k3, comma separated)", item);
        for (int i = 0; i < c->n_rs; i++) dup |= !strcmp(c->rs[i].name, item);
        if (dup) continue;
        rl_rs_opt *o = &c->rs[c->n_rs++];
        snprintf(o->name, sizeof o->name, "%s", item);
        o->agg = found < 3 ? RL_RS_TOKEN : found < 6 ? RL_RS_SEQ_SUM : found < 9 ? RL_RS_SEQ_MEAN : RL_RS_SEQ_MAX;
        o->k = item[strlen(item) - 1] - '0';
    }
    if (!c->n_rs) return vc_fail(VC_ERR_ARG, RSK "rollout_rs names no option");
    if (!threshold) return vc_fail(VC_ERR_ARG, RSK "rollout_rs_threshold must be given with rollout_rs=%s", rs);
    char specs[RL_RS_MAX][64];
    int n = 0;
    p = threshold;
    while (n < RL_RS_MAX && next_item(&p, specs[n], sizeof specs[0])) n++;
    if (next_item(&p, item, sizeof item) || !(n == 1 || n == c->n_rs))
        return vc_fail(VC_ERR_ARG, RSK "rollout_rs_threshold '%s' needs one threshold, or one per rollout_rs option (%d)",
                       threshold, c->n_rs);
    for (int i = 0; i < c->n_rs; i++) {
        vc_status st = parse_threshold(&c->rs[i], specs[n == 1 ? 0 : i]);
        if (st) return st;
    }
    return VC_OK;
}

static int rs_pass(const rl_rs_opt *o, double x) { return o->k == 1 ? (x >= o->lo && x <= o->hi) : x <= o->hi; }

static double tok_stat(int k, double r) {
    double rs = r < -SAFETY_BOUND ? -SAFETY_BOUND : (r > SAFETY_BOUND ? SAFETY_BOUND : r);
    return k == 1 ? -rs : k == 2 ? 0.5 * rs * rs : exp(rs) - 1.0 - rs;
}

/* one option over row i: the row's statistic (sequence options) or mean token statistic (token) */
static double row_value(const rl_rs_opt *o, const double *lr, const float *mask, size_t row, int T, double msum) {
    double s = 0, mx = -INFINITY;
    for (int j = 0; j < T; j++) {
        double v = tok_stat(o->k, lr[row + j]);
        s += v * mask[row + j];
        if (mask[row + j] > 0) mx = fmax(mx, v);
    }
    if (o->agg == RL_RS_SEQ_SUM) return s;
    if (o->agg == RL_RS_SEQ_MAX) return isinf(mx) ? 0.0 : mx;
    return s / (msum + 1e-8);
}

static void rs_option(const rl_rs_opt *o, int idx, const double *lr, const float *mask, int B, int T, rl_rc_raw *r,
                      float *keep) {
    double *s = r->s + RS_S0 + idx * 13, *mx = r->mx + RS_M0 + idx * 4, *mn = r->mn + RS_M0 + idx * 4;
    double clo = o->k == 1 ? o->lo : 0.0;
    for (int i = 0; i < B; i++) {
        size_t row = (size_t)i * T;
        double msum = 0;
        for (int j = 0; j < T; j++) msum += mask[row + j];
        double v = row_value(o, lr, mask, row, T, msum);
        int seq_keep = rs_pass(o, v), rejected = 0;
        for (int j = 0; j < T; j++) {
            size_t k = row + j;
            double m = mask[k], st = o->agg == RL_RS_TOKEN ? tok_stat(o->k, lr[k]) : v;
            int pass = o->agg == RL_RS_TOKEN ? rs_pass(o, st) : seq_keep;
            if (keep) keep[k] *= (float)pass;
            if (!(m > 0)) continue;
            double sc = st < clo ? clo : (st > o->hi ? o->hi : st);
            s[R_M] += m;
            s[R_SUM] += st * m;
            s[R_SUMC] += sc * m;
            s[R_SUMC2] += sc * sc * m;
            s[R_HI] += (st > o->hi) * m;
            s[R_LO] += (o->k == 1 && st < o->lo) * m;
            s[R_REJ] += (1 - pass) * m;
            rejected |= !pass;
            mx[RX_TMAX] = fmax(mx[RX_TMAX], st);
            mn[RN_TMIN] = fmin(mn[RN_TMIN], st);
        }
        if (!(msum > 0)) continue;
        s[R_VN] += 1;
        s[R_VS] += v;
        s[R_VS2] += v * v;
        s[R_VHI] += v > o->hi;
        s[R_VLO] += o->k == 1 && v < o->lo;
        s[R_REJROWS] += rejected;
        mx[RX_VMAX] = fmax(mx[RX_VMAX], v);
        mx[RX_VABS] = fmax(mx[RX_VABS], fabs(v));
        mn[RN_VMIN] = fmin(mn[RN_VMIN], v);
    }
}

void rl_rs_accum(const rl_rc_cfg *c, const double *lr, const float *mask, int B, int T, rl_rc_raw *r, float *keep) {
    size_t n = (size_t)B * T;
    float *kp = keep ? keep : vc_malloc(sizeof(float) * (n ? n : 1));
    if (!kp) return;
    for (size_t k = 0; k < n; k++) kp[k] = 1.0f;
    for (int o = 0; o < c->n_rs; o++) rs_option(&c->rs[o], o, lr, mask, B, T, r, kp);
    double *t = r->s + RS_TOT;
    for (int i = 0; i < B; i++) {
        int any = 0;
        for (int j = 0; j < T; j++) {
            size_t k = (size_t)i * T + j;
            t[T_M] += mask[k];
            t[T_REJ] += (1.0 - kp[k]) * mask[k];
            any |= mask[k] > 0 && !(kp[k] > 0.5f);
        }
        t[T_ROWS] += 1;
        t[T_ROWSANY] += any;
    }
    if (kp != keep) free(kp);
}

void rl_rs_finalize(const rl_rc_cfg *c, const rl_rc_raw *r, rl_rc_out *o) {
    char nm[48];
#define ADD(suffix, v) (snprintf(nm, sizeof nm, "rollout_rs_%s_%s", op->name, suffix), rl_rc_out_add(o, nm, v))
    for (int i = 0; i < c->n_rs; i++) {
        const rl_rs_opt *op = &c->rs[i];
        const double *s = r->s + RS_S0 + i * 13, *mx = r->mx + RS_M0 + i * 4, *mn = r->mn + RS_M0 + i * 4;
        double M = s[R_M] + 1e-8, vn = s[R_VN], k1 = op->k == 1;
        int by_seq = op->agg != RL_RS_TOKEN && vn > 0;
        ADD("mean", s[R_SUM] / M);
        ADD("max", s[R_M] > 0 ? (by_seq ? mx[RX_VMAX] : mx[RX_TMAX]) : 0);
        ADD("min", s[R_M] > 0 ? (by_seq ? mn[RN_VMIN] : mn[RN_TMIN]) : 0);
        ADD("fraction_high", by_seq ? s[R_VHI] / vn : s[R_HI] / M);
        ADD("fraction_low", !k1 ? 0.0 : by_seq ? s[R_VLO] / vn : s[R_LO] / M);
        double mc = s[R_SUMC] / M, var = s[R_SUMC2] / M - mc * mc;
        ADD("std", s[R_M] > 1 ? sqrt(fmax(var, 0)) : 0.0);
        double sm = vn > 0 ? s[R_VS] / vn : 0;
        ADD("seq_mean", sm);
        ADD("seq_std", vn > 1 ? sqrt(fmax((s[R_VS2] - vn * sm * sm) / (vn - 1), 0)) : 0.0);
        ADD("seq_max", vn > 0 ? mx[RX_VMAX] : 0);
        ADD("seq_min", vn > 0 ? mn[RN_VMIN] : 0);
        ADD("seq_max_deviation", vn > 0 ? mx[RX_VABS] : 0);
        ADD("seq_fraction_high", vn > 0 ? s[R_VHI] / vn : 0);
        if (k1) ADD("seq_fraction_low", vn > 0 ? s[R_VLO] / vn : 0);
        ADD("masked_fraction", s[R_REJ] / M);
        ADD("seq_masked_fraction", vn > 0 ? s[R_REJROWS] / vn : 0);
    }
#undef ADD
    const double *t = r->s + RS_TOT;
    rl_rc_out_add(o, "rollout_rs_masked_fraction", t[T_REJ] / (t[T_M] + 1e-8));
    rl_rc_out_add(o, "rollout_rs_seq_masked_fraction", t[T_ROWS] > 0 ? t[T_ROWSANY] / t[T_ROWS] : 0);
}

/* ---- off-policy diagnostics: sums at 24.., extremes at 8 ---- */
#define OP_S0 24
#define OP_M0 8
enum { O_M, O_KL, O_K3, O_RHO2, O_ROWS, O_TPPL, O_TLPPL, O_RPPL, O_RLPPL, O_LD, O_LDA, O_PPLR, O_CHI2S };

void rl_offpolicy_accum(const float *lp, const float *rlp, const float *mask, int B, int T, rl_rc_raw *r) {
    double *s = r->s + OP_S0;
    for (int i = 0; i < B; i++) {
        double ms = 0, st = 0, sr = 0, lsum = 0;
        for (int j = 0; j < T; j++) {
            size_t k = (size_t)i * T + j;
            double m = mask[k], d = (double)lp[k] - rlp[k], dc = d < -SAFETY_BOUND ? -SAFETY_BOUND : fmin(d, SAFETY_BOUND);
            ms += m, st += lp[k] * m, sr += rlp[k] * m, lsum += d * m;
            s[O_M] += m;
            s[O_KL] += -d * m;
            s[O_K3] += (exp(d) - d - 1.0) * m;
            s[O_RHO2] += exp(2.0 * dc) * m;
        }
        double mt = st / (ms + 1e-8), mr = sr / (ms + 1e-8), ld = mr - mt;
        double lc = lsum < -SAFETY_BOUND ? -SAFETY_BOUND : fmin(lsum, SAFETY_BOUND);
        s[O_ROWS] += 1;
        s[O_TPPL] += exp(-mt);
        s[O_TLPPL] += -mt;
        s[O_RPPL] += exp(-mr);
        s[O_RLPPL] += -mr;
        s[O_LD] += ld;
        s[O_LDA] += fabs(ld);
        s[O_PPLR] += exp(ld);
        s[O_CHI2S] += exp(2.0 * lc);
        r->mx[OP_M0] = fmax(r->mx[OP_M0], ld);
        r->mn[OP_M0] = fmin(r->mn[OP_M0], ld);
    }
}

void rl_offpolicy_finalize(const rl_rc_raw *r, rl_rc_out *o) {
    const double *s = r->s + OP_S0;
    double n = fmax(s[O_ROWS], 1), M = s[O_M] + 1e-8;
    int any = s[O_ROWS] > 0;
    rl_rc_out_add(o, "training_ppl", s[O_TPPL] / n);
    rl_rc_out_add(o, "training_log_ppl", s[O_TLPPL] / n);
    rl_rc_out_add(o, "kl", s[O_KL] / M);
    rl_rc_out_add(o, "k3_kl", s[O_K3] / M);
    rl_rc_out_add(o, "rollout_ppl", s[O_RPPL] / n);
    rl_rc_out_add(o, "rollout_log_ppl", s[O_RLPPL] / n);
    rl_rc_out_add(o, "log_ppl_diff", s[O_LD] / n);
    rl_rc_out_add(o, "log_ppl_abs_diff", s[O_LDA] / n);
    rl_rc_out_add(o, "log_ppl_diff_max", any ? r->mx[OP_M0] : 0);
    rl_rc_out_add(o, "log_ppl_diff_min", any ? r->mn[OP_M0] : 0);
    rl_rc_out_add(o, "ppl_ratio", s[O_PPLR] / n);
    rl_rc_out_add(o, "chi2_token", s[O_RHO2] / M - 1.0);
    rl_rc_out_add(o, "chi2_seq", s[O_CHI2S] / n - 1.0);
}
