/* Helpers of the in-process RL trainer tests (test_trainer_ckpt.c, test_trainer_errors.c): the demo's
 * tiny random model with its tokenizer at <dir>/model, and a quiet trainer run from config overrides.
 * Include after src/rl/demo_internal.h. */
#ifndef VC_RL_DEMO_UTIL_H
#define VC_RL_DEMO_UTIL_H
#include "verlc/config.h"
#include "verlc/model.h"
#include "verlc/trainer.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* creates dir and writes <dir>/config.json and <dir>/model (random weights from seed, the demo
 * tokenizer); four checks */
static inline void demo_model_setup(const char *dir, uint64_t seed) {
    char *md = vc_path_join(dir, "model"), *cp = vc_path_join(dir, "config.json");
    mkdir(dir, 0755);
    CHECK_OK(demo_write_model_config(cp, DEMO_VOCAB));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cp, seed, &m));
    CHECK_OK(vc_model_save_hf(m, md, VC_F32));
    CHECK_OK(demo_write_tokenizer(md));
    vc_model_free(m);
    free(md);
    free(cp);
}

/* loads a config from "|"-separated overrides (buf is split in place) and runs vc_rl_trainer_new and
 * vc_rl_trainer_fit quietly; *step (when fit succeeded): the trainer's global steps done */
static inline vc_status demo_fit(char *buf, int64_t *step) {
    char *argv[64];
    int n = 0;
    for (char *s = strtok(buf, "|"); s && n < 64; s = strtok(NULL, "|")) argv[n++] = s;
    vc_config *cfg = NULL;
    vc_status st = vc_config_load(NULL, n, argv, &cfg);
    if (!st) {
        vc_config_set_quiet(cfg, 1);
        vc_rl_trainer *t = NULL;
        st = vc_rl_trainer_new(cfg, &t);
        if (!st) {
            vc_rl_trainer_set_verbose(t, 0);
            st = vc_rl_trainer_fit(t);
        }
        if (!st) *step = vc_rl_trainer_step(t);
        vc_rl_trainer_free(t);
    }
    vc_config_free(cfg);
    return st;
}
#endif