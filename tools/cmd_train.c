/* `verlc train [--config FILE.yaml] [--device D] [--precision P] key=value...`: verl's PPO/GRPO trainer (include/verlc/trainer.h).
 * Under mpirun (or any MPI launcher) every rank runs it data-parallel; rank 0 prints and writes. */
#include "cli.h"
#include "verlc/config.h"
#include "verlc/dist.h"
#include "verlc/trainer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAM_DTYPE "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype"

void vc_cli_free_args(char **a, int n) {
    for (int i = 0; a && i < n; i++) free(a[i]);
    free(a);
}

/* argv[1..] with --device D / --precision P turned into trainer.device=D / ...param_dtype=P overrides */
int vc_cli_verl_args(const char *cmd, int argc, char **argv, char ***out, int *n) {
    char **a = calloc((size_t)argc + 1, sizeof *a);
    if (!a) return 1;
    *n = 0;
    for (int i = 1; i < argc; i++) {
        const char *key = !strcmp(argv[i], "--device") ? "trainer.device" : !strcmp(argv[i], "--precision") ? PARAM_DTYPE : NULL;
        if (!key) {
            if (!(a[*n] = strdup(argv[i]))) {
                vc_cli_free_args(a, *n);
                return 1;
            }
            (*n)++;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "verlc %s: %s needs a value\n", cmd, argv[i]);
            vc_cli_free_args(a, *n);
            return 1;
        }
        size_t len = strlen(key) + strlen(argv[i + 1]) + 2;
        char *kv = malloc(len);
        if (!kv) {
            vc_cli_free_args(a, *n);
            return 1;
        }
        snprintf(kv, len, "%s=%s", key, argv[++i]);
        a[(*n)++] = kv;
    }
    *out = a;
    return 0;
}

int vc_cmd_train(int argc, char **argv) {
    int plan_only = 0; /* --plan: the memory plan, then stop */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plan")) {
            plan_only = 1;
            memmove(argv + i, argv + i + 1, sizeof *argv * (size_t)(argc - i - 1));
            argc--, i--;
            continue;
        }
        if (!strcmp(argv[i], "--print-config") || (!strcmp(argv[i], "--cfg") && i + 1 < argc && !strcmp(argv[i + 1], "job")))
            return vc_train_print_config(argc, argv);
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: verlc train [--config FILE.yaml] [--print-config] [--plan] key=value...\n"
                   "  verl's configuration keys, e.g. data.train_files=train.jsonl actor_rollout_ref.model.path=DIR\n"
                   "  algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4 trainer.total_training_steps=10\n"
                   "Data parallel: mpirun -np N verlc train ... trainer.nnodes=1 trainer.n_gpus_per_node=N\n"
                   "  (VERLC_DIST=mpi|single overrides the launcher detection). Each rank rolls out a contiguous\n"
                   "  block of every step's prompts; updates use the global mini-batch; rank 0 prints and writes.\n"
                   "Device: --device auto|cpu|cuda|cuda:N (trainer.device; auto = cuda when a GPU is usable) and\n"
                   "  --precision fp32|bf16 (actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype).\n"
                   "Memory: --plan loads, allocates and prints the memory plan, then stops (writes no file);\n"
                   "  VERLC_MEMORY_AVAILABLE=24G plans against that much memory: will the run fit a smaller device?\n");
            return 0;
        }
    }
    vc_config *cfg = NULL;
    char **args = NULL;
    int n_args = 0;
    if (vc_cli_verl_args("train", argc, argv, &args, &n_args)) return 2;
    vc_status lst = vc_config_load_argv(n_args, args, NULL, &cfg);
    vc_cli_free_args(args, n_args);
    if (lst != VC_OK) {
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
    if (plan_only) unsetenv("VERLC_MEMORY_PLAN"); /* the plan is what was asked for */
    vc_status st = plan_only ? vc_rl_train_plan_dp(cfg, comm) : vc_rl_train_run_dp(cfg, comm);
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
