/* Helper of the training-core tests (test_trainer.c, test_dp.c): a deterministic random mini-batch. */
#ifndef VC_TRAIN_TEST_UTIL_H
#define VC_TRAIN_TEST_UTIL_H
#include "verlc/rng.h"
#include "verlc/train.h"

/* n sequences of min_len + [0, len_span) tokens (ids below 256, a prompt of 1..4 tokens with mask 0,
 * the rest mask 1), all drawn from seed, into cu (n + 1 entries), ids and mask (large enough) */
static inline void random_minibatch(vc_minibatch *b, int n, int64_t min_len, uint64_t len_span, uint64_t seed,
                                    int64_t *cu, int32_t *ids, float *mask) {
    cu[0] = 0;
    for (int s = 0; s < n; s++) {
        int64_t L = min_len + vc_rng_below(len_span, seed, s, 0, 0), prompt = 1 + vc_rng_below(4, seed, s, 1, 0);
        for (int64_t j = 0; j < L; j++) {
            ids[cu[s] + j] = (int32_t)vc_rng_below(256, seed, s, 2, (uint64_t)j);
            mask[cu[s] + j] = j >= prompt ? 1.0f : 0.0f;
        }
        cu[s + 1] = cu[s] + L;
    }
    *b = (vc_minibatch){ n, cu, ids, mask };
}
#endif
