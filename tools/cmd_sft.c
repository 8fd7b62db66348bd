/* verlc sft --model DIR [--tokenizer DIR] --train FILE.jsonl [--val FILE.jsonl] --out RUN_DIR [--device D] [--precision P] [key=value...] */
#include "cli.h"
#include "verlc/dist.h"
#include "verlc/train.h"
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: verlc sft --model DIR [--tokenizer DIR] --train FILE.jsonl [--val FILE.jsonl] [--out RUN_DIR]\n"
            "                 [--resume latest|auto|CKPT_DIR] [KEY=VALUE ...] [--ALIAS VALUE ...]\n"
            "Supervised fine-tuning (verl's fsdp_sft_trainer). Rows hold either `messages` (chat template,\n"
            "loss on assistant turns) or prompt/response fields (loss on the response + EOS); for raw GSM8K\n"
            "use --prompt-key question --response-key answer. Malformed JSONL lines are reported as file:line\n"
            "and skipped (skip_bad_lines=false stops instead). Progress goes to the console and\n"
            "RUN_DIR/metrics.jsonl; checkpoints to RUN_DIR/step_N (save_freq, keep_last); `verlc export`\n"
            "(RUN_DIR by default verl's checkpoints/PROJECT_NAME/EXPERIMENT_NAME)\n"
            "turns one into a Hugging Face directory.\n"
            "Data parallel: mpirun -np N verlc sft ... (any MPI launcher; VERLC_DIST=mpi|single overrides the\n"
            "detection). Every rank loads the data and runs 1/N of each global batch's micro-batches;\n"
            "sharding=zero1 keeps 1/N of the AdamW state per rank. Rank 0 prints and writes metrics.\n"
            "Device and precision: --device auto|cpu|cuda|cuda:N (trainer.device; auto = cuda when a GPU is\n"
            "usable) and --precision fp32|bf16 (model.fsdp_config.mixed_precision.param_dtype; bf16 rounds\n"
            "GEMM inputs to bf16 with f32 accumulation, weights/gradients/AdamW state stay fp32).\n\n");
    vc_sft_config_help(f);
}

int vc_cmd_sft(int argc, char **argv) {
    vc_sft_config c;
    vc_sft_config_default(&c);
    vc_sft_config_select(&c, argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        vc_status st;
        const char *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-') {
            char key[128];
            const char *val;
            if (eq) {
                snprintf(key, sizeof key, "%.*s", (int)(eq - a - 2), a + 2);
                val = eq + 1;
            } else if (i + 1 < argc) {
                snprintf(key, sizeof key, "%s", a + 2);
                val = argv[++i];
            } else {
                fprintf(stderr, "verlc sft: %s needs a value\n", a);
                return 2;
            }
            for (char *p = key; *p; p++)
                if (*p == '-') *p = '_';
            st = vc_sft_config_set(&c, key, val);
        } else if (eq) {
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(eq - a), a);
            st = vc_sft_config_set(&c, key, eq + 1);
        } else {
            fprintf(stderr, "verlc sft: unexpected argument '%s' (see verlc sft --help)\n", a);
            return 2;
        }
        if (st) {
            fprintf(stderr, "verlc sft: %s\n", vc_last_error());
            return 2;
        }
    }
    char out_default[512];
    if (!c.out_dir) { /* verl's trainer.default_local_dir: checkpoints/${trainer.project_name}/${trainer.experiment_name} */
        snprintf(out_default, sizeof out_default, "checkpoints/%s/%s", c.project_name, c.experiment_name);
        c.out_dir = out_default;
    }
    if (!c.model_dir || !c.train_path) {
        usage(stderr);
        return 2;
    }
    /* "auto": MPI when a parallel launcher started us, else one process */
    vc_comm *comm = NULL;
    if (vc_comm_init(&argc, &argv, "auto", &comm)) {
        fprintf(stderr, "verlc sft: %s\n", vc_last_error());
        return 1;
    }
    int rank = vc_comm_rank(comm), world = vc_comm_size(comm);
    /* ranks other than 0 keep quiet unless asked (warnings and errors still show) */
    if (rank != 0 && !getenv("VERLC_LOG")) setenv("VERLC_LOG", "warn", 1);
    if (rank != 0) c.quiet = 1;
    c.comm = comm;
    int rc = 0;
    if (vc_sft_run(&c)) {
        if (world > 1) fprintf(stderr, "verlc sft: rank %d: %s\n", rank, vc_last_error());
        else fprintf(stderr, "verlc sft: %s\n", vc_last_error());
        rc = 1;
        /* peers may wait in a collective: end the whole job now instead of after their timeout */
        if (world > 1) vc_comm_abort(comm, 1);
    }
    vc_comm_free(comm);
    return rc;
}
