/* `verlc train [--config FILE.yaml] key=value...`: verl's PPO/GRPO trainer (include/verlc/trainer.h).
 * Under mpirun (or any MPI launcher) every rank runs it data-parallel; rank 0 prints and writes. */
#include "cli.h"
#include "verlc/config.h"
#include "verlc/dist.h"
#include "verlc/trainer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vc_cmd_train(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--print-config") || (!strcmp(argv[i], "--cfg") && i + 1 < argc && !strcmp(argv[i + 1], "job")))
            return vc_train_print_config(argc, argv);
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: verlc train [--config FILE.yaml] [--print-config] key=value...\n"
                   "  verl's configuration keys, e.g. data.train_files=train.jsonl actor_rollout_ref.model.path=DIR\n"
                   "  algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4 trainer.total_training_steps=10\n"
                   "Data parallel: mpirun -np N verlc train ... trainer.nnodes=1 trainer.n_gpus_per_node=N\n"
                   "  (VERLC_DIST=mpi|single overrides the launcher detection). Each rank rolls out a contiguous\n"
                   "  block of every step's prompts; updates use the global mini-batch; rank 0 prints and writes.\n");
            return 0;
        }
    }
    vc_config *cfg = NULL;
    if (vc_config_load_argv(argc - 1, argv + 1, NULL, &cfg) != VC_OK) {
        fprintf(stderr, "verlc train: %s\n", vc_last_error());
        return 2;
    }
    /* "auto": MPI when a parallel launcher started us, else one process */
    vc_comm *comm = NULL;
    if (vc_comm_init(&argc, &argv, "auto", &comm)) {
        fprintf(stderr, "verlc train: %s\n", vc_last_error());
        vc_config_free(cfg);
        return 1;
    }
    int rank = vc_comm_rank(comm), world = vc_comm_size(comm);
    /* ranks other than 0 keep quiet unless asked (warnings and errors still show) */
    if (rank != 0 && !getenv("VERLC_LOG")) setenv("VERLC_LOG", "warn", 1);
    vc_status st = vc_rl_train_run_dp(cfg, comm);
    if (st) {
        if (world > 1) fprintf(stderr, "verlc train: rank %d: %s\n", rank, vc_last_error());
        else fprintf(stderr, "verlc train: %s\n", vc_last_error());
        /* peers may wait in a collective: end the whole job now instead of after their timeout */
        if (world > 1) vc_comm_abort(comm, 1);
    }
    vc_config_free(cfg);
    vc_comm_free(comm);
    return st ? 1 : 0;
}
