/* Optimal token baseline (verl's optimal_token_baseline and tir_optimal_token_baseline, core_algos.py):
 * a baseline per prompt group and timestep, B_t = sum G_t W_t / sum W_t over the group, where G_t is the
 * reward-to-go and W_t the cumulative path-variance proxy sum_{j<=t} (1 - 2 pi_j + sum_v pi_v^2) (each
 * term times the rollout importance weight squared when one is given).
 *
 * Both variants walk each row as a sequence of steps (a step: the position it came from, and its weight
 * in the group sums): the plain one takes every position with the response mask as weight; the TIR one
 * (multi-turn responses whose tool turns are masked out) takes the response tokens only, in order, with
 * weight 1, so step k is the k-th generated token of every row and rows without tokens join no group. */
#include "verlc/rl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int B, T;
    double *R, *W, *m, *base; /* per step [B,T]: reward-to-go, cumulative proxy, weight, baseline */
    int *pos, *len;           /* step -> position [B,T]; steps per row [B] */
    double *ntok;             /* masked tokens per row [B] */
} otb_rows;

static void otb_free(otb_rows *o) {
    free(o->R), free(o->W), free(o->m), free(o->base), free(o->pos), free(o->len), free(o->ntok);
}

static vc_status otb_build(otb_rows *o, const float *rewards, const float *mask, const float *old_logp,
                           const float *sum_pi_sq, const float *is_w, int B, int T, int tir, float *ret) {
    size_t n = (size_t)B * T;
    *o = (otb_rows){ .B = B, .T = T };
    o->R = calloc(n, sizeof(double)), o->W = calloc(n, sizeof(double)), o->m = calloc(n, sizeof(double));
    o->base = calloc(n, sizeof(double)), o->pos = calloc(n, sizeof(int));
    o->len = calloc((size_t)B, sizeof(int)), o->ntok = calloc((size_t)B, sizeof(double));
    if (!o->R || !o->W || !o->m || !o->base || !o->pos || !o->len || !o->ntok) return VC_ERR_NOMEM;
    for (int i = 0; i < B; i++) {
        const float *r = rewards + (size_t)i * T, *mk = mask + (size_t)i * T;
        double g = 0, w = 0;
        for (int j = T - 1; j >= 0; j--) ret[(size_t)i * T + j] = (float)(g += (double)r[j] * mk[j]);
        int k = 0;
        for (int j = 0; j < T; j++) {
            size_t q = (size_t)i * T + j;
            double x = 1.0 - 2.0 * exp((double)old_logp[q]) + sum_pi_sq[q];
            if (is_w) x *= (double)is_w[q] * is_w[q];
            w += x * mk[j];
            o->ntok[i] += mk[j];
            if (tir && mk[j] == 0.0f) continue;
            size_t s = (size_t)i * T + k++;
            o->R[s] = ret[q], o->W[s] = w, o->m[s] = tir ? 1.0 : mk[j], o->pos[s] = j;
        }
        o->len[i] = k;
    }
    return VC_OK;
}

/* the baselines of one group's rows (members[0..N)); zero_tail: the steps of a unique longest row beyond
 * the second longest get baseline 0 (they have no peer to compare with) */
static void otb_group(otb_rows *o, const int *members, int N, int tir, int zero_tail, double eps) {
    int K = 0;
    for (int a = 0; a < N; a++) K = o->len[members[a]] > K ? o->len[members[a]] : K;
    for (int k = 0; k < K; k++) {
        double num = 0, den = 0;
        for (int a = 0; a < N; a++) {
            int i = members[a];
            if (k >= o->len[i]) continue;
            size_t s = (size_t)i * o->T + k;
            num += o->R[s] * o->W[s] * o->m[s];
            den += o->W[s] * o->m[s];
        }
        double bk = num / (den + eps);
        for (int a = 0; a < N; a++)
            if (k < o->len[members[a]]) o->base[(size_t)members[a] * o->T + k] = bk;
    }
    if (!zero_tail) return;
    /* lengths: masked tokens (plain) or steps (TIR); the longest must be alone and strictly longer */
    double first = -1, second = -1;
    int at = -1, ties = 0;
    for (int a = 0; a < N; a++) {
        int i = members[a];
        double L = tir ? o->len[i] : (double)(int64_t)o->ntok[i];
        if (L > first) second = first, first = L, at = i, ties = 1;
        else if (L == first) second = L, ties++;
        else if (L > second) second = L;
    }
    if (ties != 1 || !(first > second)) return;
    for (int k = (int)second; k < o->len[at]; k++) o->base[(size_t)at * o->T + k] = 0.0;
}

vc_status vc_adv_optimal_token_baseline(const float *rewards, const float *mask, const char *const *index,
                                        const float *old_logp, const float *sum_pi_sq, const float *is_w, int B,
                                        int T, int tir, int zero_tail, float *adv, float *ret) {
    const char *fn = tir ? "tir_optimal_token_baseline" : "optimal_token_baseline";
    if (B <= 0 || T <= 0) return vc_fail(VC_ERR_SHAPE, "%s: bad shape [%d,%d]", fn, B, T);
    if (!old_logp || !sum_pi_sq)
        return vc_fail(VC_ERR_MISSING, "%s: needs the old policy's log-probs and sum_pi_squared "
                                       "(actor_rollout_ref.actor.calculate_sum_pi_squared=True)", fn);
    otb_rows o = { 0 };
    int *gid = malloc(sizeof(int) * (size_t)B), *members = malloc(sizeof(int) * (size_t)B), ng = 0;
    vc_status st = gid && members ? otb_build(&o, rewards, mask, old_logp, sum_pi_sq, is_w, B, T, tir, ret)
                                  : VC_ERR_NOMEM;
    if (!st) st = vc_group_ids(index, B, gid, &ng);
    for (int g = 0; !st && g < ng; g++) {
        int N = 0;
        for (int i = 0; i < B; i++)
            if (gid[i] == g && (!tir || o.len[i] > 0)) members[N++] = i;
        if (N > 1) otb_group(&o, members, N, tir, zero_tail, 1e-8); /* one row alone: baseline 0 */
    }
    if (!st) {
        memset(adv, 0, sizeof(float) * (size_t)B * T);
        for (int i = 0; i < B; i++)
            for (int k = 0; k < o.len[i]; k++) {
                size_t s = (size_t)i * T + k, q = (size_t)i * T + o.pos[s];
                adv[q] = (float)((o.R[s] - o.base[s]) * mask[q]);
            }
    }
    otb_free(&o);
    free(gid);
    free(members);
    return st;
}

/* verl's compute_variance_proxy_metrics: per row the mean advantage A and the score-norm proxy
 * W = sum_t mask (1 - 2 pi_t + sum pi^2) (times the IS weight squared); rows with importance weights use
 * their mean weight rho: proxy 2 = mean(rho^2 A^2 max(W / rho_t^2 summed, 0)), else mean(A^2 max(W, 0)). */
void vc_variance_proxy_sums(const float *adv, const float *mask, const float *old_logp, const float *sum_pi_sq,
                            const float *is_w, int B, int T, double sums[3]) {
    for (int i = 0; i < B; i++) {
        double ms = 0, as = 0, w = 0, wo = 0, rs = 0;
        for (int j = 0; j < T; j++) {
            size_t q = (size_t)i * T + j;
            double x = 1.0 - 2.0 * exp((double)old_logp[q]) + sum_pi_sq[q];
            ms += mask[q];
            as += (double)adv[q] * mask[q];
            if (is_w) {
                double r2 = (double)is_w[q] * is_w[q];
                w += x * r2 * mask[q];
                wo += x * r2 / fmax(r2, 1e-10) * mask[q];
                rs += (double)is_w[q] * mask[q];
            } else w += x * mask[q];
        }
        double A = as / (ms + 1e-8), rho = rs / (ms + 1e-8);
        sums[0] += is_w ? rho * rho * A * A * fmax(wo, 0.0) : A * A * fmax(w, 0.0);
        sums[1] += A * A;
        sums[2] += w;
    }
}
