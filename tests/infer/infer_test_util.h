/* Helper of the rollout tests (test_rollout.c, test_sample_device.c): a random model from a config.json
 * text. */
#ifndef VC_INFER_TEST_UTIL_H
#define VC_INFER_TEST_UTIL_H
#include "verlc/model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a model of the given config.json text with random weights from seed; NULL (message printed) on failure */
static vc_model *model_from_config(const char *config, uint64_t seed) {
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
#endif
