/* algorithm.use_pf_ppo (PF-PPO, policy filtration; verl's compute_pf_ppo_reweight_data, applied with GAE
 * after the advantages): the step's global batch is resampled with replacement, each response drawn with
 * probability proportional to a weight of its sequence score (the sum of its token scores):
 *   pow        |score| ^ weight_pow
 *   max_min    1 for the batch's highest and lowest scores, else 0
 *   max_random 0.4 for the highest score, else 0.1
 * (plus 1e-8, so every weight is positive). The draw is verlc's counter-based RNG keyed by the trainer's
 * seed and step, the same on every rank, so any number of ranks trains on the same resampled batch (not
 * torch.multinomial's stream). Each rank keeps its number of rows. */
#include "trainer_internal.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status rl_pf_weights(const char *method, double weight_pow, const double *score, int n, double *w) {
    double mx = -INFINITY, mn = INFINITY;
    for (int i = 0; i < n; i++) mx = fmax(mx, score[i]), mn = fmin(mn, score[i]);
    for (int i = 0; i < n; i++) {
        if (!strcmp(method, "pow")) w[i] = pow(fabs(score[i]), weight_pow);
        else if (!strcmp(method, "max_min")) w[i] = score[i] == mx || score[i] == mn;
        else if (!strcmp(method, "max_random")) w[i] = score[i] == mx ? 0.4 : 0.1;
        else return vc_fail(VC_ERR_ARG, "algorithm.pf_ppo.reweight_method must be pow, max_min or max_random, got '%s'", method);
        w[i] = fmax(w[i] + 1e-8, 1e-8);
    }
    return VC_OK;
}

/* every rank's sequence scores, in global row order */
static vc_status global_scores(vc_rl_trainer *t, const rl_batch *b, const rl_dp *dp, double *all) {
    int GB = dp->g_B;
    memset(all, 0, sizeof(double) * (size_t)GB);
    for (int i = 0; i < b->B; i++) {
        double s = 0;
        for (int j = 0; j < b->T; j++) s += b->token_scores[(size_t)i * b->T + j];
        all[dp->g_off + i] = (float)s;
    }
    /* each row is set by one rank only: a sum gives every rank the whole array */
    return rl_dist_reduce(t, all, GB, VC_SUM);
}

vc_status rl_pf_ppo(vc_rl_trainer *t, rl_batch *b, const rl_dp *dp) {
    int GB = dp->g_B;
    double *score = vc_malloc(sizeof(double) * (size_t)GB), *cum = vc_malloc(sizeof(double) * (size_t)GB);
    int *src = vc_malloc(sizeof(int) * (size_t)(b->B ? b->B : 1));
    vc_status st = score && cum && src ? VC_OK : VC_ERR_NOMEM;
    if (!st) st = global_scores(t, b, dp, score);
    if (!st) st = rl_pf_weights(t->pf_method, t->pf_pow, score, GB, cum);
    for (int g = 1; !st && g < GB; g++) cum[g] += cum[g - 1];
    /* draw k of the GB draws lands on the first row whose cumulative weight exceeds u * total */
    for (int i = 0; !st && i < b->B; i++) {
        int k = dp->g_off + i, lo = 0, hi = GB - 1;
        double u = (double)vc_rng_uniform(t->seed, 0x7066707070ull, (uint64_t)t->step, (uint64_t)k) * cum[GB - 1];
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cum[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        src[i] = lo;
    }
    if (!st) st = rl_batch_take_global(t, b, dp, src);
    free(score);
    free(cum);
    free(src);
    return st ? vc_fail_ctx(st, "algorithm.use_pf_ppo") : VC_OK;
}
