/* Helpers of the model tests (test_fixtures.c, test_device.c, test_consistency.c, test_lora.c): comparing an
 * exported checkpoint with its source and removing the export; a packed two-sequence loss. Static functions: each test program includes this header once. */
#ifndef VC_MODEL_TEST_UTIL_H
#define VC_MODEL_TEST_UTIL_H
#include "verlc/model.h"
#include "verlc/ops.h"
#include "verlc/safetensors.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>

/* 1 when every tensor of checkpoint src that the export out also holds has the same dtype and bytes there
 * (tensors the loader ignores, such as rotary caches, are not written back); *used: tensors compared,
 * *n_out: tensors in out. Two checks: the checkpoints open. */
static inline int export_matches(const char *src, const char *out, const char *name, int *used, int *n_out) {
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(src, &a));
    CHECK_OK(vc_ckpt_open(out, &b));
    int same = a && b;
    *used = 0;
    for (int i = 0; same && i < vc_ckpt_count(a); i++) {
        const vc_st_tensor *x = vc_ckpt_at(a, i), *y = vc_ckpt_find(b, x->name);
        if (!y) continue;
        (*used)++;
        same = x->nbytes == y->nbytes && x->dtype == y->dtype && !memcmp(x->data, y->data, x->nbytes);
        if (!same) fprintf(stderr, "%s: tensor %s differs after export\n", name, x->name);
    }
    *n_out = b ? vc_ckpt_count(b) : 0;
    vc_ckpt_close(a);
    vc_ckpt_close(b);
    return same;
}

/* rm -rf dir (one check) */
static inline void remove_tree(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}
/* Two packed sequences (11 and 7 tokens) and their mean next-token NLL (test_consistency.c, test_lora.c) */
__attribute__((unused)) static const int32_t IDS[] = { 5, 17, 3, 44, 9, 28, 11, 2, 39, 7, 21, 30, 6, 13, 50, 8, 1, 19 };
__attribute__((unused)) static const int64_t CU[] = { 0, 11, 18 };

/* loss over the 2-sequence packed batch; fills logp (18) */
static inline float loss_of(vc_model *m, vc_graph *g, float *logp, int backward) {
    int32_t tgt[18];
    float w[18];
    for (int s = 0; s < 2; s++)
        for (int64_t t = CU[s]; t < CU[s + 1]; t++) tgt[t] = t + 1 < CU[s + 1] ? IDS[t + 1] : -1;
    for (int t = 0; t < 18; t++) w[t] = tgt[t] >= 0 ? -1.0f / 16 : 0;
    vc_graph_reset(g);
    vc_graph_set_grad(g, backward);
    vc_batch b = { 2, CU, IDS };
    vc_tensor *h = vc_model_forward(m, g, &b, NULL), *lp = NULL;
    if (!h || vc_model_logprobs(m, g, h, tgt, &lp, NULL)) return NAN;
    if (logp) CHECK_OK(vc_tensor_read(lp, logp));
    vc_tensor *L = vc_op_dot_const(g, lp, w);
    float v = NAN;
    if (backward) CHECK_OK(vc_graph_backward(g, L, 1.0f));
    if (!L || vc_tensor_read(L, &v)) return NAN;
    return v;
}

#endif
