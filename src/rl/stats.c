/* Masked statistics and loss aggregation (verl/utils/torch_functional.py, core_algos.agg_loss). */
#include "verlc/rl.h"
#include <math.h>
#include <string.h>

double vc_masked_sum(const float *x, const float *mask, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        if (mask[i] != 0.0f) s += (double)x[i] * mask[i];
    return s;
}

static double mask_total(const float *mask, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += mask[i];
    return s;
}

double vc_masked_mean(const float *x, const float *mask, size_t n) {
    return vc_masked_sum(x, mask, n) / (mask_total(mask, n) + 1e-8);
}

vc_status vc_masked_var(const float *x, const float *mask, size_t n, int unbiased, double *var) {
    double m = mask_total(mask, n);
    if (unbiased && m == 0.0) return vc_fail(VC_ERR_ARG, "masked_var: at least one element in the mask has to be 1");
    if (unbiased && m == 1.0)
        return vc_fail(VC_ERR_ARG, "masked_var: the sum of the mask is one, which can cause a division by zero");
    double mean = vc_masked_sum(x, mask, n) / (m + 1e-8), s = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (mask[i] == 0.0f) continue;
        double c = (double)x[i] - mean;
        s += c * c * mask[i];
    }
    double v = s / (m + 1e-8);
    if (unbiased) v *= m / (m - 1.0);
    *var = v;
    return VC_OK;
}

vc_status vc_masked_whiten(const float *x, const float *mask, size_t n, int shift_mean, float *out) {
    double var, mean = vc_masked_mean(x, mask, n);
    vc_status st = vc_masked_var(x, mask, n, 1, &var);
    if (st) return vc_fail_ctx(st, "masked_whiten");
    double r = 1.0 / sqrt(var + 1e-8);
    for (size_t i = 0; i < n; i++) {
        double w = ((double)x[i] - mean) * r;
        out[i] = (float)(shift_mean ? w : w + mean);
    }
    return VC_OK;
}

static const char *const AGG_NAMES[] = { "token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
                                         "seq-mean-token-sum-norm", "token-sum" };

vc_status vc_agg_mode_parse(const char *name, vc_agg_mode *mode) {
    for (int i = 0; i < 5; i++)
        if (name && !strcmp(name, AGG_NAMES[i])) { *mode = (vc_agg_mode)i; return VC_OK; }
    return vc_fail(VC_ERR_ARG, "invalid loss_agg_mode: %s (token-mean, seq-mean-token-sum, seq-mean-token-mean, "
                               "seq-mean-token-sum-norm, token-sum)", name ? name : "(null)");
}

const char *vc_agg_mode_name(vc_agg_mode mode) {
    return (unsigned)mode < 5 ? AGG_NAMES[mode] : "?";
}

/* Row sums of loss*mask and of mask. */
static void row_sums(const float *loss, const float *mask, int T, int i, double *ls, double *ms) {
    double a = 0.0, b = 0.0;
    for (int t = 0; t < T; t++) {
        size_t k = (size_t)i * T + t;
        b += mask[k];
        if (mask[k] != 0.0f) a += (double)loss[k] * mask[k];
    }
    *ls = a;
    *ms = b;
}

static double pos_or(double v, double dflt) { return v > 0.0 ? v : dflt; }

/* the mode's numerator over the rows (seq-mean-token-mean: the rows' token means), the mask's sum, the non-empty rows */
static void agg_sums(const float *loss_mat, const float *mask, int B, int T, vc_agg_mode mode, double *total,
                     double *n_tok, double *n_rows) {
    *total = *n_tok = *n_rows = 0.0;
    for (int i = 0; i < B; i++) {
        double ls, ms;
        row_sums(loss_mat, mask, T, i, &ls, &ms);
        *n_tok += ms;
        if (ms > 0.0) *n_rows += 1.0;
        if (mode == VC_AGG_SEQ_MEAN_TOKEN_MEAN) *total += ms > 0.0 ? ls / (ms + 1e-8) : 0.0;
        else *total += ls; /* an empty row's ls is 0 */
    }
}

void vc_agg_parts(const float *loss_mat, const float *mask, int B, int T, vc_agg_mode mode, double width, double *num,
                  double *den, int *den_adds) {
    double n_rows, n_tok;
    agg_sums(loss_mat, mask, B, T, mode, num, &n_tok, &n_rows);
    *den_adds = mode == VC_AGG_TOKEN_MEAN || mode == VC_AGG_SEQ_MEAN_TOKEN_SUM || mode == VC_AGG_SEQ_MEAN_TOKEN_MEAN;
    *den = mode == VC_AGG_TOKEN_MEAN ? n_tok
           : *den_adds ? n_rows
           : mode == VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM ? pos_or(width, (double)T) : 1.0;
}

vc_status vc_agg_loss(const float *loss_mat, const float *mask, int B, int T, vc_agg_mode mode,
                      const vc_agg_norm *norm, double *loss, float *dloss) {
    if (B < 0 || T < 0) return vc_fail(VC_ERR_SHAPE, "agg_loss: bad shape [%d,%d]", B, T);
    vc_agg_norm nz = { 0 };
    if (norm) nz = *norm;
    double dp = pos_or(nz.dp_size, 1.0), total, n_rows, n_tok;
    agg_sums(loss_mat, mask, B, T, mode, &total, &n_tok, &n_rows);
    double denom, scale;
    switch (mode) {
    case VC_AGG_TOKEN_MEAN: denom = nz.batch_num_tokens > 0 ? nz.batch_num_tokens : n_tok; scale = dp; break;
    case VC_AGG_SEQ_MEAN_TOKEN_SUM:
    case VC_AGG_SEQ_MEAN_TOKEN_MEAN: denom = pos_or(nz.global_batch_size, n_rows); scale = dp; break;
    case VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM: denom = pos_or(nz.loss_scale_factor, (double)T); scale = 1.0; break;
    case VC_AGG_TOKEN_SUM: denom = 1.0; scale = dp; break;
    default: return vc_fail(VC_ERR_ARG, "agg_loss: invalid loss_agg_mode %d", (int)mode);
    }
    /* torch divides 0 by 0 here and gets NaN; an all-masked batch contributes nothing instead. */
    *loss = denom != 0.0 ? total / denom * scale : 0.0;
    if (!dloss) return VC_OK;
    for (int i = 0; i < B; i++) {
        double ls, ms, w = denom != 0.0 ? scale / denom : 0.0;
        row_sums(loss_mat, mask, T, i, &ls, &ms);
        if (mode == VC_AGG_SEQ_MEAN_TOKEN_MEAN) w = ms > 0.0 ? w / (ms + 1e-8) : 0.0;
        for (int t = 0; t < T; t++) {
            size_t k = (size_t)i * T + t;
            dloss[k] = mask[k] != 0.0f ? (float)(w * mask[k]) : 0.0f;
        }
    }
    return VC_OK;
}
