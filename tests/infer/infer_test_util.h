/* Helpers of the rollout tests (test_rollout.c, test_sample_device.c): a random model from a config.json
 * text, and bitwise comparison of two sample lists. */
#ifndef VC_INFER_TEST_UTIL_H
#define VC_INFER_TEST_UTIL_H
#include "verlc/model.h"
#include "verlc/rollout.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a model of the given config.json text with random weights from seed; NULL (message printed) on failure */
static inline vc_model *model_from_config(const char *config, uint64_t seed) {
    char path[] = "/tmp/vc_infer_cfgXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    (void)!write(fd, config, strlen(config));
    close(fd);
    vc_model *m = NULL;
    vc_status st = vc_model_init_random(path, seed, &m);
    unlink(path);
    if (st) fprintf(stderr, "init: %s\n", vc_last_error());
    return m;
}

/* 1 when the n samples of a and b have the same length, finish reason, tokens and log-probs (bitwise) */
static inline int same_samples(const vc_rollout_sample *a, const vc_rollout_sample *b, int n) {
    for (int i = 0; i < n; i++) {
        if (a[i].n_tokens != b[i].n_tokens || a[i].finish != b[i].finish) return 0;
        if (memcmp(a[i].tokens, b[i].tokens, (size_t)a[i].n_tokens * 4)) return 0;
        if (memcmp(a[i].logp, b[i].logp, (size_t)a[i].n_tokens * 4)) return 0;
        if (memcmp(a[i].logp_sampled, b[i].logp_sampled, (size_t)a[i].n_tokens * 4)) return 0;
    }
    return 1;
}
#endif