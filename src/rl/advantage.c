/* Advantage estimators (verl/trainer/ppo/core_algos.py compute_*_advantage*). */
#define _GNU_SOURCE /* qsort_r */
#include "verlc/rl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static vc_status check_shape(const char *fn, int B, int T) {
    if (B <= 0 || T <= 0) return vc_fail(VC_ERR_SHAPE, "%s: bad shape [%d,%d]", fn, B, T);
    return VC_OK;
}

/* Sort helper: row numbers ordered by their index string (stable by row). */
static int cmp_rows(const void *a, const void *b, void *ctx) {
    const char *const *index = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(index[x], index[y]);
    return c ? c : (x > y) - (x < y);
}

vc_status vc_group_ids(const char *const *index, int B, int *gid, int *n_groups) {
    if (!index) return vc_fail(VC_ERR_MISSING, "index: group ids are required");
    for (int i = 0; i < B; i++)
        if (!index[i]) return vc_fail(VC_ERR_MISSING, "index[%d] is missing", i);
    int *order = vc_malloc(sizeof(int) * (size_t)(B ? B : 1));
    int *first = vc_malloc(sizeof(int) * (size_t)(B ? B : 1));
    if (!order || !first) { free(order); free(first); return VC_ERR_NOMEM; }
    for (int i = 0; i < B; i++) order[i] = i;
    qsort_r(order, (size_t)B, sizeof(int), cmp_rows, (void *)index);
    /* first[r] = smallest row with the same string; groups numbered by first appearance */
    for (int k = 0; k < B; k++) {
        int r = order[k];
        first[r] = (k > 0 && !strcmp(index[order[k - 1]], index[r])) ? first[order[k - 1]] : r;
    }
    int n = 0;
    for (int i = 0; i < B; i++) gid[i] = (first[i] == i) ? n++ : -1;
    for (int i = 0; i < B; i++) if (gid[i] < 0) gid[i] = gid[first[i]];
    *n_groups = n;
    free(order);
    free(first);
    return VC_OK;
}

/* Per-row sum of token rewards. */
static void row_scores(const float *r, int B, int T, double *s) {
    for (int i = 0; i < B; i++) {
        double a = 0.0;
        for (int t = 0; t < T; t++) a += r[(size_t)i * T + t];
        s[i] = (float)a; /* torch keeps the sum in float32 */
    }
}

struct groups { int n; int *gid; int *count; double *mean, *std; };

static void groups_free(struct groups *g) {
    free(g->gid); free(g->count); free(g->mean); free(g->std);
    memset(g, 0, sizeof *g);
}

/* Group statistics of per-row scores: singleton groups get mean 0, std 1 (as verl). */
static vc_status groups_build(const char *const *index, const double *s, int B, struct groups *g) {
    memset(g, 0, sizeof *g);
    g->gid = vc_malloc(sizeof(int) * (size_t)B);
    g->count = vc_calloc((size_t)B, sizeof(int));
    g->mean = vc_calloc((size_t)B, sizeof(double));
    g->std = vc_calloc((size_t)B, sizeof(double));
    if (!g->gid || !g->count || !g->mean || !g->std) { groups_free(g); return VC_ERR_NOMEM; }
    vc_status st = vc_group_ids(index, B, g->gid, &g->n);
    if (st) { groups_free(g); return st; }
    for (int i = 0; i < B; i++) { g->count[g->gid[i]]++; g->mean[g->gid[i]] += s[i]; }
    for (int k = 0; k < g->n; k++) g->mean[k] = g->count[k] > 1 ? (float)(g->mean[k] / g->count[k]) : 0.0;
    for (int i = 0; i < B; i++) {
        double c = s[i] - g->mean[g->gid[i]];
        g->std[g->gid[i]] += c * c;
    }
    for (int k = 0; k < g->n; k++) /* torch.std: unbiased */
        g->std[k] = g->count[k] > 1 ? (float)sqrt(g->std[k] / (g->count[k] - 1)) : 1.0;
    return VC_OK;
}

static void broadcast(const double *a, const float *mask, int B, int T, float *adv, float *ret) {
    for (int i = 0; i < B; i++)
        for (int t = 0; t < T; t++) {
            size_t k = (size_t)i * T + t;
            float v = (float)a[i] * mask[k];
            adv[k] = v;
            if (ret) ret[k] = v;
        }
}

/* Shared frame of the outcome estimators: scores, groups, a per-row transform, broadcast. */
typedef void (*outcome_fn)(const struct groups *g, double *s, int B, const void *arg);

static vc_status outcome_adv(const char *fn, const float *rewards, const float *mask, const char *const *index,
                             int B, int T, outcome_fn f, const void *arg, float *adv, float *ret) {
    vc_status st = check_shape(fn, B, T);
    if (st) return st;
    double *s = vc_malloc(sizeof(double) * (size_t)B);
    if (!s) return VC_ERR_NOMEM;
    struct groups g;
    row_scores(rewards, B, T, s);
    st = groups_build(index, s, B, &g);
    if (st) { free(s); return vc_fail_ctx(st, "%s", fn); }
    f(&g, s, B, arg);
    broadcast(s, mask, B, T, adv, ret);
    groups_free(&g);
    free(s);
    return VC_OK;
}

struct grpo_arg { int norm_by_std; double eps; };

static void grpo_fn(const struct groups *g, double *s, int B, const void *arg) {
    const struct grpo_arg *a = arg;
    for (int i = 0; i < B; i++) {
        int k = g->gid[i];
        double d = (float)(s[i] - g->mean[k]);
        s[i] = a->norm_by_std ? d / (float)(g->std[k] + a->eps) : d;
    }
}

vc_status vc_adv_grpo(const float *rewards, const float *mask, const char *const *index, int B, int T,
                      int norm_by_std, float eps, float *adv, float *ret) {
    struct grpo_arg a = { norm_by_std, eps };
    return outcome_adv("grpo_outcome_advantage", rewards, mask, index, B, T, grpo_fn, &a, adv, ret);
}

static void rloo_fn(const struct groups *g, double *s, int B, const void *arg) {
    for (int i = 0; i < B; i++) {
        int k = g->gid[i], n = g->count[k];
        if (n > 1) s[i] = (float)(s[i] * n / (n - 1)) - (float)(g->mean[k] * n / (n - 1));
    }
}

vc_status vc_adv_rloo(const float *rewards, const float *mask, const char *const *index, int B, int T,
                      float *adv, float *ret) {
    return outcome_adv("rloo_outcome_advantage", rewards, mask, index, B, T, rloo_fn, NULL, adv, ret);
}

struct gpg_arg { double f_norm, alpha; };

static void gpg_fn(const struct groups *g, double *s, int B, const void *arg) {
    const struct gpg_arg *a = arg;
    for (int i = 0; i < B; i++) s[i] = a->alpha * (float)(s[i] - g->mean[g->gid[i]]) / a->f_norm;
}

vc_status vc_adv_gpg(const float *rewards, const float *mask, const char *const *index, int B, int T,
                     float f_norm, float *adv, float *ret) {
    vc_status st = check_shape("gpg_outcome_advantage", B, T);
    if (st) return st;
    int m = 0;
    for (int i = 0; i < B; i++) {
        double a = 0.0;
        for (int t = 0; t < T; t++) a += rewards[(size_t)i * T + t];
        m += (float)a != 0.0f;
    }
    struct gpg_arg a = { f_norm, (double)(float)((double)B / (m > 0 ? m : 1)) };
    return outcome_adv("gpg_outcome_advantage", rewards, mask, index, B, T, gpg_fn, &a, adv, ret);
}

static void baseline_fn(const struct groups *g, double *s, int B, const void *arg) {
    for (int i = 0; i < B; i++) s[i] = (float)(s[i] - g->mean[g->gid[i]]);
}

vc_status vc_adv_reinforce_pp_baseline(const float *rewards, const float *mask, const char *const *index,
                                       int B, int T, float *adv, float *ret) {
    const char *fn = "reinforce_plus_plus_baseline_outcome_advantage";
    vc_status st = outcome_adv(fn, rewards, mask, index, B, T, baseline_fn, NULL, adv, NULL);
    if (st) return st;
    size_t n = (size_t)B * T;
    st = vc_masked_whiten(adv, mask, n, 1, adv);
    if (st) return vc_fail_ctx(st, "%s", fn);
    for (size_t k = 0; k < n; k++) {
        adv[k] *= mask[k];
        ret[k] = adv[k];
    }
    return VC_OK;
}

vc_status vc_adv_opo(const float *rewards, const float *mask, const char *const *index, int B, int T,
                     float *adv, float *ret) {
    vc_status st = check_shape("opo_outcome_advantage", B, T);
    if (st) return st;
    double *s = vc_malloc(sizeof(double) * (size_t)B);
    double *num = vc_calloc((size_t)B, sizeof(double)), *den = vc_calloc((size_t)B, sizeof(double));
    int *gid = vc_malloc(sizeof(int) * (size_t)B), *cnt = vc_calloc((size_t)B, sizeof(int)), ng = 0;
    if (!s || !num || !den || !gid || !cnt) { st = VC_ERR_NOMEM; goto out; }
    st = vc_group_ids(index, B, gid, &ng);
    if (st) { vc_fail_ctx(st, "opo_outcome_advantage"); goto out; }
    row_scores(rewards, B, T, s);
    for (int i = 0; i < B; i++) {
        double len = 0.0;
        for (int t = 0; t < T; t++) len += mask[(size_t)i * T + t];
        num[gid[i]] += len * s[i];
        den[gid[i]] += len;
        cnt[gid[i]]++;
    }
    for (int i = 0; i < B; i++) {
        int k = gid[i];
        double bsl = cnt[k] > 1 ? (float)(num[k] / den[k]) : 0.0;
        s[i] = (float)(s[i] - bsl);
    }
    broadcast(s, mask, B, T, adv, ret);
out:
    free(s); free(num); free(den); free(gid); free(cnt);
    return st;
}

vc_status vc_adv_gae(const float *rewards, const float *values, const float *mask, int B, int T,
                     float gamma, float lam, float *adv, float *ret) {
    vc_status st = check_shape("gae_advantage_return", B, T);
    if (st) return st;
    for (int i = 0; i < B; i++) {
        double nextv = 0.0, last = 0.0;
        for (int t = T - 1; t >= 0; t--) {
            size_t k = (size_t)i * T + t;
            double m = mask[k];
            double delta = rewards[k] + gamma * nextv - values[k];
            double cur = delta + (double)gamma * lam * last;
            nextv = values[k] * m + (1.0 - m) * nextv;
            last = cur * m + (1.0 - m) * last;
            adv[k] = (float)last;
        }
    }
    size_t n = (size_t)B * T;
    for (size_t k = 0; k < n; k++) ret[k] = adv[k] + values[k];
    st = vc_masked_whiten(adv, mask, n, 1, adv);
    return st ? vc_fail_ctx(st, "gae_advantage_return") : VC_OK;
}

vc_status vc_adv_reinforce_pp(const float *rewards, const float *mask, int B, int T, float gamma,
                              float *adv, float *ret) {
    vc_status st = check_shape("reinforce_plus_plus_outcome_advantage", B, T);
    if (st) return st;
    for (int i = 0; i < B; i++) {
        double run = 0.0;
        for (int t = T - 1; t >= 0; t--) {
            size_t k = (size_t)i * T + t;
            run = rewards[k] + gamma * run;
            ret[k] = (float)run;
            run *= mask[k]; /* reset after EOS */
        }
    }
    size_t n = (size_t)B * T;
    st = vc_masked_whiten(ret, mask, n, 1, adv);
    if (st) return vc_fail_ctx(st, "reinforce_plus_plus_outcome_advantage");
    for (size_t k = 0; k < n; k++) adv[k] *= mask[k];
    return VC_OK;
}

vc_status vc_adv_remax(const float *rewards, const float *baselines, const float *mask, int B, int T,
                       float *adv, float *ret) {
    vc_status st = check_shape("remax_outcome_advantage", B, T);
    if (st) return st;
    for (int i = 0; i < B; i++) {
        double run = 0.0;
        for (int t = T - 1; t >= 0; t--) {
            size_t k = (size_t)i * T + t;
            run += (double)rewards[k] * mask[k];
            ret[k] = (float)run;
            adv[k] = (float)(run - (double)baselines[i] * mask[k]);
        }
    }
    return VC_OK;
}

/* rloo_vectorized: (c s_i - sum of the group) / (c - 1), 0 in singleton groups (rloo keeps the score) */
static void rloo_vec_fn(const struct groups *g, double *s, int B, const void *arg) {
    (void)arg;
    for (int i = 0; i < B; i++) {
        int k = g->gid[i], c = g->count[k];
        s[i] = c > 1 ? (float)((float)(c * s[i]) - (float)(g->mean[k] * c)) / (float)(c - 1) : 0.0;
    }
}

vc_status vc_adv_rloo_vectorized(const float *rewards, const float *mask, const char *const *index, int B, int T,
                                 float *adv, float *ret) {
    return outcome_adv("rloo_vectorized_outcome_advantage", rewards, mask, index, B, T, rloo_vec_fn, NULL, adv, ret);
}

/* grpo_vectorized: verl's groupwise.group_mean_std: std = sqrt(max(var, eps)) with the unbiased variance
 * (s2 - s1^2 / c) / max(c - 1, 1) in float32; singleton groups mean 0, std 1 */
vc_status vc_adv_grpo_vectorized(const float *rewards, const float *mask, const char *const *index, int B, int T,
                                 int norm_by_std, float eps, float *adv, float *ret) {
    const char *fn = "grpo_vectorized_outcome_advantage";
    vc_status st = check_shape(fn, B, T);
    if (st) return st;
    double *s = vc_malloc(sizeof(double) * (size_t)B), *s1 = vc_calloc((size_t)B, sizeof(double));
    double *s2 = vc_calloc((size_t)B, sizeof(double));
    int *gid = vc_malloc(sizeof(int) * (size_t)B), *cnt = vc_calloc((size_t)B, sizeof(int)), ng = 0;
    if (!s || !s1 || !s2 || !gid || !cnt) { st = VC_ERR_NOMEM; goto out; }
    if ((st = vc_group_ids(index, B, gid, &ng))) { vc_fail_ctx(st, "%s", fn); goto out; }
    row_scores(rewards, B, T, s);
    for (int i = 0; i < B; i++) {
        cnt[gid[i]]++;
        s1[gid[i]] = (float)(s1[gid[i]] + s[i]);
        s2[gid[i]] = (float)(s2[gid[i]] + (float)(s[i] * s[i]));
    }
    for (int k = 0; k < ng; k++) { /* s1 -> mean, s2 -> std */
        double c = cnt[k], mean = (float)(s1[k] / c), var = (float)((float)(s2[k] - (float)(s1[k] * s1[k]) / c) / fmax(c - 1, 1));
        s1[k] = c > 1 ? mean : 0.0;
        s2[k] = c > 1 ? (float)sqrt(fmax(var, eps)) : 1.0;
    }
    for (int i = 0; i < B; i++) {
        double d = (float)(s[i] - s1[gid[i]]);
        s[i] = norm_by_std ? (float)(d / (float)(s2[gid[i]] + eps)) : d;
    }
    broadcast(s, mask, B, T, adv, ret);
out:
    free(s); free(s1); free(s2); free(gid); free(cnt);
    return st;
}

/* grpo_passk (Pass@k, arXiv 2503.19595): in each group only the best response gets an advantage, the
 * margin over the second best (divided by the group's unbiased std + eps when norm_by_std); groups need
 * two responses at least. Ties go to the first row. */
vc_status vc_adv_grpo_passk(const float *rewards, const float *mask, const char *const *index, int B, int T,
                            int norm_by_std, float eps, float *adv, float *ret) {
    const char *fn = "grpo_passk_outcome_advantage";
    vc_status st = check_shape(fn, B, T);
    if (st) return st;
    double *s = vc_malloc(sizeof(double) * (size_t)B), *a = vc_calloc((size_t)B, sizeof(double));
    struct groups g = { 0 };
    if (!s || !a) { st = VC_ERR_NOMEM; goto out; }
    row_scores(rewards, B, T, s);
    if ((st = groups_build(index, s, B, &g))) { vc_fail_ctx(st, "%s", fn); goto out; }
    for (int k = 0; k < g.n && !st; k++) {
        int best = -1, second = -1;
        for (int i = 0; i < B; i++) {
            if (g.gid[i] != k) continue;
            if (best < 0 || s[i] > s[best]) second = best, best = i;
            else if (second < 0 || s[i] > s[second]) second = i;
        }
        if (second < 0) {
            st = vc_fail(VC_ERR_ARG, "%s: Pass@k needs at least 2 samples per group; group '%s' has 1 "
                                     "(actor_rollout_ref.rollout.n >= 2)", fn, index[best]);
            break;
        }
        double m = (float)(s[best] - s[second]);
        a[best] = norm_by_std ? (float)(m / (float)(g.std[k] + eps)) : m;
    }
    if (!st) broadcast(a, mask, B, T, adv, ret);
out:
    groups_free(&g);
    free(s); free(a);
    return st;
}
