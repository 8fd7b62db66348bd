/* algorithm.rollout_correction (verl's rollout_corr_helper at commit b178a3cd): importance weights
 * (rollout_is), rejection sampling (rollout_rs), off-policy diagnostics and bypass mode.
 *
 * Statistics are gathered in two stages so that one code path serves the global batch (sums reduced
 * over ranks, then turned into metrics) and a micro-batch (the actor in bypass mode, whose metrics are
 * averaged over micro-batches as verl's reduce_metrics does): rl_rc_accum adds rows to an rl_rc_raw,
 * rl_rc_finalize turns it into named values. */
#ifndef VC_ROLLOUT_CORR_H
#define VC_ROLLOUT_CORR_H
#include "verlc/core.h"
#include <stddef.h>

enum { RL_RIS_OFF, RL_RIS_TOKEN, RL_RIS_SEQUENCE };
enum { RL_RS_TOKEN, RL_RS_SEQ_SUM, RL_RS_SEQ_MEAN, RL_RS_SEQ_MAX };
#define RL_RS_MAX 11

typedef struct rl_rs_opt {
    char name[16];  /* token_k1 ... seq_max_k3 */
    int agg, k;     /* RL_RS_*, estimator k1 / k2 / k3 */
    double lo, hi;  /* bounds on the statistic: k1 log(lower), log(upper); others (0, upper) */
} rl_rs_opt;

typedef struct rl_rc_cfg {
    int is_level, is_norm;  /* rollout_is (RL_RIS_*), rollout_is_batch_normalize */
    double is_thr;          /* rollout_is_threshold (the upper bound) */
    double is_lo;           /* later verl's IcePop ("lower_upper"): weights outside [is_lo, is_thr] are 0; 0: TIS */
    int n_rs;               /* rollout_rs options (comma separated; all must pass) */
    rl_rs_opt rs[RL_RS_MAX];
    int bypass, reinforce;  /* bypass_mode: old log-probs are the rollout's; loss_type reinforce or ppo_clip */
    int offpolicy;          /* the off-policy diagnostics (kl, k3_kl, perplexities, chi2) */
} rl_rc_cfg;

/* parses rollout_rs ("token_k1,seq_mean_k3", NULL: none) and rollout_rs_threshold (a number, or one
 * entry per option; k1 entries may be "lower_upper") into c->rs */
vc_status rl_rs_parse(const char *rs, const char *threshold, rl_rc_cfg *c);
vc_status rl_rollout_is_parse(const char *level, int *out);
/* rollout_is_threshold: a number (TIS, the upper bound) or later verl's "lower_upper" string (IcePop) */
vc_status rl_rollout_is_threshold_parse(const char *spec, double *upper, double *lower);

/* parts of the statistics */
enum { RL_RC_IS = 1, RL_RC_RS = 2, RL_RC_OFF = 4 };
#define RL_RC_NS (24 + 16 + RL_RS_MAX * 13 + 4)
#define RL_RC_NM (8 + 4 + RL_RS_MAX * 4)
typedef struct rl_rc_raw {
    double s[RL_RC_NS];               /* sums (reduced by VC_SUM) */
    double mx[RL_RC_NM], mn[RL_RC_NM]; /* extremes (VC_MAX, VC_MIN) */
} rl_rc_raw;
void rl_rc_raw_init(rl_rc_raw *r);

/* Adds B rows [B,T] of log-probs lp (the trainer's, or the current policy's in bypass mode) against the
 * rollout's rlp, on mask, to r. is_w (when parts has RL_RC_IS): the truncated weights, 0 on padding.
 * keep (when parts has RL_RC_RS): 1 where every rejection option passes, else 0. */
void rl_rc_accum(const rl_rc_cfg *c, unsigned parts, const float *lp, const float *rlp, const float *mask, int B,
                 int T, rl_rc_raw *r, float *is_w, float *keep);

/* rl_rs.c's parts of rl_rc_accum */
void rl_rs_accum(const rl_rc_cfg *c, const double *lr, const float *mask, int B, int T, rl_rc_raw *r, float *keep);
void rl_offpolicy_accum(const float *lp, const float *rlp, const float *mask, int B, int T, rl_rc_raw *r);

/* named values ("rollout_corr/..."): the same names, in the same order, for the same cfg and parts */
#define RL_RC_MAX_OUT (32 + RL_RS_MAX * 16)
typedef struct rl_rc_out {
    int n;
    char name[RL_RC_MAX_OUT][64];
    double v[RL_RC_MAX_OUT];
} rl_rc_out;
void rl_rc_finalize(const rl_rc_cfg *c, unsigned parts, const rl_rc_raw *r, rl_rc_out *o);
void rl_rs_finalize(const rl_rc_cfg *c, const rl_rc_raw *r, rl_rc_out *o);
void rl_offpolicy_finalize(const rl_rc_raw *r, rl_rc_out *o);
void rl_rc_out_add(rl_rc_out *o, const char *name, double v);

/* the sums that normalise is_w to mean 1 (tokens, or rows for sequence weights): v[0] / v[1] */
void rl_rc_norm_sums(const rl_rc_cfg *c, const float *is_w, const float *mask, int B, int T, double v[2]);
/* divides is_w by the mean v[0] / v[1] (when above 1e-8); the factor used, or 1 */
double rl_rc_normalise(float *is_w, size_t n, const double v[2], int seq);
#endif
