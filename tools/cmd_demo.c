/* `verlc demo [--seed N] [--steps N] [--out DIR] [--threads N] [--device D] [--precision P]`: RL working end to end in minutes, no
 * download. The model is tiny (hidden 64): one thread is fastest (thread hand-offs cost more than the
 * GEMMs) and makes the run's figures the same on every machine, so it is the default unless --threads
 * or VERLC_THREADS says otherwise. */
#include "cli.h"
#include "verlc/pool.h"
#include "verlc/trainer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vc_cmd_demo(int argc, char **argv) {
    vc_demo_opts o = { .seed = 1, .steps = 100, .out_dir = "verlc_demo", .verbose = 1 };
    int threads = getenv("VERLC_THREADS") ? 0 : 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seed") && v) o.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--steps") && v) o.steps = atoi(argv[++i]);
        else if (!strcmp(a, "--out") && v) o.out_dir = argv[++i];
        else if (!strcmp(a, "--threads") && v) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--device") && v) o.device = argv[++i];
        else if (!strcmp(a, "--precision") && v) o.precision = argv[++i];
        else if (!strcmp(a, "--quiet")) o.verbose = 0;
        else if (strchr(a, '=') && a[0] != '-') {
            char **nv = realloc(o.overrides, sizeof(char *) * (size_t)(o.n_overrides + 1));
            if (!nv) return 1;
            o.overrides = nv;
            o.overrides[o.n_overrides++] = argv[i];
        }
        else {
            fprintf(stderr, "usage: verlc demo [--seed N] [--steps N] [--out DIR] [--threads N (default 1)] [--quiet]\n"
                            "                  [--device auto|cpu|cuda|cuda:N] [--precision fp32|bf16] [key=value...]\n");
            return !strcmp(a, "-h") || !strcmp(a, "--help") ? 0 : 2;
        }
    }
    if (threads > 0) vc_set_threads(threads);
    printf("verlc demo: GRPO on 2-digit addition with a tiny model built here (seed %llu, %d steps, run dir %s)\n",
           (unsigned long long)o.seed, o.steps, o.out_dir);
    vc_demo_result r;
    double t0 = vc_now();
    vc_status st = vc_demo_run(&o, &r);
    free(o.overrides);
    if (st) {
        fprintf(stderr, "verlc demo: %s\n", vc_last_error());
        return 1;
    }
    printf("\nvalidation accuracy (greedy, 200 held-out problems): before GRPO %.1f%% -> after GRPO %.1f%% (%+.1f points)\n",
           100 * r.acc_before, 100 * r.acc_after, 100 * (r.acc_after - r.acc_before));
    printf("time: warm-up %.0f s (%d steps), GRPO %.0f s, total %.0f s on %d threads\n", r.sft_seconds, r.sft_steps,
           r.rl_seconds, vc_now() - t0, vc_get_threads());
    printf("report: %s/report.html   metrics: %s/metrics.jsonl   model: %s/hf_model\n", o.out_dir, o.out_dir, o.out_dir);
    return 0;
}
