/* Helper of the in-process RL trainer tests (test_trainer_ckpt.c, test_trainer_errors.c): the demo's
 * tiny random model with its tokenizer at <dir>/model. Include after src/rl/demo_internal.h. */
#ifndef VC_RL_DEMO_UTIL_H
#define VC_RL_DEMO_UTIL_H
#include "verlc/model.h"
#include "vc_test.h"
#include <stdlib.h>
#include <sys/stat.h>

/* creates dir and writes <dir>/config.json and <dir>/model (random weights from seed, the demo
 * tokenizer); four checks */
static void demo_model_setup(const char *dir, uint64_t seed) {
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
#endif
