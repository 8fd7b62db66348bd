/* GDPO in the trainer (later verl's adv_estimator=gdpo): algorithm.gdpo_reward_keys name the reward
 * components, which the reward function returns in its dict beside `score` (verl's reward_extra_info);
 * algorithm.gdpo_reward_weights weigh them (default 1 each). Also verl's gdpo/<key>/{mean,std,max,min}. */
#include "trainer_internal.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status rl_gdpo_config(vc_rl_trainer *t, const vc_config *c) {
    static const char *KK = "algorithm.gdpo_reward_keys", *KW = "algorithm.gdpo_reward_weights";
    size_t nk = 0, nw = 0;
    vc_status st = vc_config_list_len(c, KK, &nk);
    if (!st) st = vc_config_list_len(c, KW, &nw);
    if (st) return st;
    if (strcmp(t->adv, "gdpo")) {
        if (nk) vc_warn("%s is read by adv_estimator=gdpo only (as in verl): not used with %s", KK, t->adv);
        return VC_OK;
    }
    if (!nk) /* verl's assertion */
        return vc_fail(VC_ERR_ARG, "adv_estimator=gdpo requires '%s' listing the individual reward component keys "
                                   "returned by compute_score (e.g. ['format_reward', 'accuracy_reward'])", KK);
    if (nk > RL_MAX_GDPO) return vc_fail(VC_ERR_ARG, "%s: %zu keys, at most %d", KK, nk, RL_MAX_GDPO);
    if (nw && nw != nk) return vc_fail(VC_ERR_ARG, "%s has %zu weights for %zu keys", KW, nw, nk);
    for (size_t i = 0; i < nk; i++) {
        const char *k = NULL;
        double w = 1.0;
        if ((st = vc_config_list_str(c, KK, i, &k))) return vc_fail_ctx(st, "%s[%zu]", KK, i);
        if (!*k || strlen(k) >= sizeof t->gdpo_key[0])
            return vc_fail(VC_ERR_ARG, "%s[%zu]: `%s` is empty or too long", KK, i, k);
        if (nw && (st = vc_config_list_double(c, KW, i, &w))) return vc_fail_ctx(st, "%s[%zu]", KW, i);
        if (!isfinite(w)) return vc_fail(VC_ERR_ARG, "%s[%zu]: %g is not a finite weight", KW, i, w);
        snprintf(t->gdpo_key[i], sizeof t->gdpo_key[i], "%s", k);
        t->gdpo_w[i] = (float)w;
    }
    t->n_gdpo = (int)nk;
    return VC_OK;
}

/* the components of every row: out[k * B + i] (np.asarray(values, float32): numbers and booleans) */
vc_status rl_gdpo_scores(const vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, float *out) {
    vc_status st = VC_OK;
    for (int i = 0; !st && i < b->B; i++) {
        long long line = d ? (long long)d->p[b->prompt[i]].line : 0;
        cJSON *j = b->info && b->info[i] ? cJSON_Parse(b->info[i]) : NULL;
        if (!j)
            st = vc_fail(VC_ERR_MISSING, "adv_estimator=gdpo: the reward of the response to the prompt at line %lld "
                                         "has no extra values (compute_score must return a dict holding %s)",
                         line, t->gdpo_key[0]);
        for (int k = 0; !st && k < t->n_gdpo; k++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, t->gdpo_key[k]);
            if (cJSON_IsNumber(x) || cJSON_IsBool(x))
                out[(size_t)k * b->B + i] = cJSON_IsNumber(x) ? (float)x->valuedouble : (float)cJSON_IsTrue(x);
            else
                st = vc_fail(x ? VC_ERR_ARG : VC_ERR_MISSING, "adv_estimator=gdpo: GDPO reward key '%s' %s in the "
                             "reward of the response to the prompt at line %lld (algorithm.gdpo_reward_keys; the "
                             "reward returned %s)", t->gdpo_key[k], x ? "is not a number" : "not found", line,
                             b->info[i]);
        }
        cJSON_Delete(j);
    }
    return st;
}

/* verl's gdpo/<key>/{mean,std,max,min} over the global batch (np.std: population) */
vc_status rl_gdpo_metrics(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, rl_metrics *met) {
    if (t->n_gdpo == 0 || strcmp(t->adv, "gdpo")) return VC_OK;
    int K = t->n_gdpo, B = b->B;
    float *s = vc_malloc(sizeof(float) * (size_t)K * (B ? B : 1));
    double *v = vc_calloc((size_t)K * 5, sizeof(double)); /* per key: sum, sum of squares, count; max; min */
    vc_status st = s && v ? rl_gdpo_scores(t, d, b, s) : VC_ERR_NOMEM;
    double *sum = v, *mx = v + 3 * K, *mn = v + 4 * K;
    for (int k = 0; !st && k < K; k++) {
        mx[k] = -INFINITY, mn[k] = INFINITY;
        for (int i = 0; i < B; i++) {
            double x = s[(size_t)k * B + i];
            sum[3 * k] += x, sum[3 * k + 1] += x * x, sum[3 * k + 2] += 1;
            mx[k] = fmax(mx[k], x), mn[k] = fmin(mn[k], x);
        }
    }
    if (!st) st = rl_dist_reduce(t, sum, 3 * K, VC_SUM);
    if (!st) st = rl_dist_reduce(t, mx, K, VC_MAX);
    if (!st) st = rl_dist_reduce(t, mn, K, VC_MIN);
    for (int k = 0; !st && k < K; k++) {
        double n = sum[3 * k + 2], m = n > 0 ? sum[3 * k] / n : 0, var = n > 0 ? sum[3 * k + 1] / n - m * m : 0;
        if (n <= 0) continue;
        rl_metrics_setf(met, m, "gdpo/%s/mean", t->gdpo_key[k]);
        rl_metrics_setf(met, sqrt(var > 0 ? var : 0), "gdpo/%s/std", t->gdpo_key[k]);
        rl_metrics_setf(met, mx[k], "gdpo/%s/max", t->gdpo_key[k]);
        rl_metrics_setf(met, mn[k], "gdpo/%s/min", t->gdpo_key[k]);
    }
    free(s);
    free(v);
    return st;
}
