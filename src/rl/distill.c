/* Later verl's on-policy distillation loss (verl/trainer/distillation/losses.py, verl-project/verl 1dda039b):
 * per response token a single-sample estimator of KL(student || teacher) at the sampled token (kl_penalty's
 * k1 / abs / k2 / k3 / low_var_kl of the student's and the teacher's log-probs), clamped to
 * +-loss_max_clamp, then either aggregated like the policy loss (a supervised distillation loss) or, with
 * use_policy_gradient, the advantage -loss (detached) of a vanilla PPO policy loss. The loss range and the
 * mean absolute loss are verl's metrics, taken before the clamp. */
#include "rl_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status rl_distill_tokens(const rl_distill_cfg *dc, vc_agg_mode agg, const vc_agg_norm *norm, const float *logp,
                            const float *teacher, const float *old, const float *mask, const float *isw, int n, int T,
                            float *kl, float *dkl, float *tmp, float *grad, rl_distill_out *o) {
    size_t nt = (size_t)n * (size_t)T;
    memset(o, 0, sizeof *o);
    o->loss_min = INFINITY;
    o->loss_max = -INFINITY;
    if (dc->topk) /* kl holds the caller's per-token loss (forward_kl_topk): its own gradient 1 */
        for (size_t i = 0; i < nt; i++) dkl[i] = 1;
    else vc_kl_penalty(dc->spec, logp, teacher, nt, kl, dkl);
    double abs_sum = 0, cnt = 0;
    for (size_t i = 0; i < nt; i++) {
        if (mask[i] > 0) {
            o->loss_min = fmin(o->loss_min, kl[i]);
            o->loss_max = fmax(o->loss_max, kl[i]);
            abs_sum += fabs(kl[i]);
            cnt += 1;
        }
        if (dc->clamp > 0 && fabs(kl[i]) > dc->clamp) kl[i] = (float)copysign(dc->clamp, kl[i]), dkl[i] = 0;
    }
    o->abs_loss = cnt > 0 ? abs_sum / cnt : 0;
    if (dc->use_pg) {
        for (size_t i = 0; i < nt; i++) tmp[i] = -kl[i];
        vc_pg_config pg = dc->pg;
        pg.agg = agg;
        if (norm) pg.norm = *norm;
        vc_pg_metrics pm;
        vc_status st = vc_policy_loss(VC_PG_VANILLA, old, logp, tmp, mask, n, T, &pg, isw, &o->loss, &pm, grad);
        o->ppo_kl = pm.ppo_kl;
        o->pg_clipfrac = pm.pg_clipfrac;
        o->pg_clipfrac_lower = pm.pg_clipfrac_lower;
        return st;
    }
    vc_status st = vc_agg_loss(kl, mask, n, T, agg, norm, &o->loss, tmp);
    for (size_t i = 0; !st && i < nt; i++) grad[i] = tmp[i] * dkl[i];
    return st;
}

/* p_t (log p_t - log p_s) of a teacher token, both log-probs clamped below at c (when clamp) */
static double topk_term(float sv, float tv, int clamp, float c) {
    float sc = clamp && sv < c ? c : sv, tc = clamp && tv < c ? c : tv;
    return exp((double)tc) * ((double)tc - sc);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* how many of the teacher's k ids are among the student's (sorted: k log k, as k may be thousands), and the
 * mean of -term over those */
static float topk_overlap(const int32_t *tid, const int32_t *sorted_sid, const float *s, const float *t, int k,
                          int clamp, float c, float *adv) {
    int cnt = 0;
    double a = 0;
    for (int j = 0; j < k; j++)
        if (bsearch(&tid[j], sorted_sid, (size_t)k, sizeof *sorted_sid, cmp_i32)) {
            cnt++;
            a -= topk_term(s[j], t[j], clamp, c);
        }
    *adv = cnt ? (float)(a / cnt) : 0.0f;
    return (float)cnt;
}

void rl_distill_topk(const rl_distill_cfg *dc, const float *s, const float *t, const int32_t *tids,
                     const int32_t *sids, int64_t P, int k, const rl_topk_out *o) {
    int clamp = !isnan(dc->lp_min_clamp);
    int32_t *sorted = tids && sids ? malloc(sizeof(int32_t) * (size_t)(k > 0 ? k : 1)) : NULL;
    float c = (float)dc->lp_min_clamp;
    for (int64_t q = 0; q < P; q++) {
        double l = 0, sm = 0, tm = 0;
        const float *sq = s + q * k, *tq = t + q * k;
        float *ds = o->ds + q * k;
        for (int j = 0; j < k; j++) {
            sm += exp((double)sq[j]);
            tm += exp((double)tq[j]);
            l += topk_term(sq[j], tq[j], clamp, c);
            ds[j] = clamp && sq[j] < c ? 0.0f : (float)-exp((double)(clamp && tq[j] < c ? c : tq[j]));
        }
        o->smass[q] = (float)sm;
        o->tmass[q] = (float)tm;
        o->loss[q] = l > 0 ? (float)l : 0.0f; /* top-k masses do not sum to 1: the divergence may go negative */
        if (!(l > 0))
            for (int j = 0; j < k; j++) ds[j] = 0;
        if (sorted) { /* the student's ids sorted, for the teacher's to be looked up */
            memcpy(sorted, sids + q * k, sizeof(int32_t) * (size_t)k);
            qsort(sorted, (size_t)k, sizeof *sorted, cmp_i32);
            o->ov_n[q] = topk_overlap(tids + q * k, sorted, sq, tq, k, clamp, c, &o->ov_adv[q]);
        } else if (tids && sids) o->ov_n[q] = o->ov_adv[q] = 0; /* out of memory: no overlap metrics */
    }
    free(sorted);
}
