/* Helpers of the model tests (test_fixtures.c, test_device.c): comparing an exported checkpoint with its
 * source and removing the export. Static functions: each test program includes this header once. */
#ifndef VC_MODEL_TEST_UTIL_H
#define VC_MODEL_TEST_UTIL_H
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
#endif
