/* Helpers of the SFT data tests (test_sft_data.c, test_sft_images.c): token ids decoded, and the loss-masked tokens of
 * a row. Static functions: each test program includes this header once. */
#ifndef VC_SFT_TEST_UTIL_H
#define VC_SFT_TEST_UTIL_H
#include "train/sft_internal.h"
#include "vc_test.h"

static char *decode(const vc_tokenizer *tok, const int32_t *ids, size_t n) {
    char *s = NULL;
    size_t len = 0;
    CHECK_OK(vc_tokenizer_decode(tok, ids, n, 0, &s, &len));
    return s ? s : vc_strdup("");
}

/* the loss-masked tokens of row i, decoded */
static char *trained(const vc_tokenizer *tok, const sft_data *d, size_t i) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(d->cu[i + 1] - d->cu[i] + 1));
    size_t n = 0;
    for (int64_t k = d->cu[i]; k < d->cu[i + 1]; k++)
        if (d->mask[k] > 0) ids[n++] = d->ids[k];
    char *s = decode(tok, ids, n);
    free(ids);
    return s;
}
#endif
