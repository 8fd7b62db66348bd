/* `verlc train [--config FILE.yaml] key=value...`: verl's PPO/GRPO trainer (include/verlc/trainer.h). */
#include "cli.h"
#include "verlc/config.h"
#include "verlc/trainer.h"
#include <stdio.h>
#include <string.h>

int vc_cmd_train(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--print-config") || (!strcmp(argv[i], "--cfg") && i + 1 < argc && !strcmp(argv[i + 1], "job")))
            return vc_train_print_config(argc, argv);
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: verlc train [--config FILE.yaml] [--print-config] key=value...\n"
                   "  verl's configuration keys, e.g. data.train_files=train.jsonl actor_rollout_ref.model.path=DIR\n"
                   "  algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4 trainer.total_training_steps=10\n");
            return 0;
        }
    }
    vc_config *cfg = NULL;
    if (vc_config_load_argv(argc - 1, argv + 1, NULL, &cfg) != VC_OK) {
        fprintf(stderr, "verlc train: %s\n", vc_last_error());
        return 2;
    }
    vc_status st = vc_rl_train_run(cfg);
    if (st) fprintf(stderr, "verlc train: %s\n", vc_last_error());
    vc_config_free(cfg);
    return st ? 1 : 0;
}
