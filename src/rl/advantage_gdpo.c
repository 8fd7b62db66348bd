/* GDPO (later verl's compute_gdpo_outcome_advantage, arXiv 2601.05242): each reward component normalised
 * within its prompt group as GRPO does, the components summed with their weights, the sum whitened over
 * the batch's response tokens. */
#include "verlc/rl.h"
#include <stdlib.h>
#include <string.h>

vc_status vc_adv_gdpo_sum(const float *const *scores, const float *weights, int K, const float *mask,
                          const char *const *index, int B, int T, int norm_by_std, float eps, float *out) {
    if (K < 1 || B < 1 || T < 1) return vc_fail(VC_ERR_SHAPE, "gdpo: bad shape: %d components, [%d,%d]", K, B, T);
    size_t n = (size_t)B * T;
    float *r = vc_calloc(n, sizeof(float)), *a = vc_malloc(n * sizeof(float));
    vc_status st = r && a ? VC_OK : VC_ERR_NOMEM;
    for (size_t q = 0; !st && q < n; q++) out[q] = 0.0f;
    for (int k = 0; !st && k < K; k++) {
        /* verl places the component at the last response token; GRPO sums the row, so any column serves */
        for (int i = 0; i < B; i++) r[(size_t)i * T] = scores[k][i];
        st = vc_adv_grpo(r, mask, index, B, T, norm_by_std, eps, a, NULL);
        float w = weights ? weights[k] : 1.0f;
        for (size_t q = 0; !st && q < n; q++) out[q] += w * a[q]; /* float32, as torch accumulates */
    }
    free(r);
    free(a);
    return st ? vc_fail_ctx(st, "gdpo") : VC_OK;
}

vc_status vc_adv_gdpo(const float *const *scores, const float *weights, int K, const float *mask,
                      const char *const *index, int B, int T, int norm_by_std, float eps, float *adv, float *ret) {
    size_t n = (size_t)B * T;
    vc_status st = vc_adv_gdpo_sum(scores, weights, K, mask, index, B, T, norm_by_std, eps, adv);
    if (!st && (st = vc_masked_whiten(adv, mask, n, 1, adv))) return vc_fail_ctx(st, "gdpo");
    for (size_t q = 0; !st && q < n; q++) {
        adv[q] *= mask[q];
        if (ret) ret[q] = adv[q];
    }
    return st;
}
