/* Helpers of the data-parallel `verlc train` tests (test_rl_dp.c, test_rl_zero.c): an mpirun launch of
 * one GRPO run on the tiny Qwen3 model of rl_cli_util.h, weight and metric comparisons, reward programs,
 * the environment of the MPI jobs. Static functions: each test program includes this header once. */
#ifndef VC_RL_DP_UTIL_H
#define VC_RL_DP_UTIL_H
#include "rl_cli_util.h"
#include "verlc/dist.h"
#include "verlc/model.h"
#include "verlc/report.h"
#include <limits.h>
#include <math.h>
#include <sys/stat.h>

static const char *mpirun = "mpirun";

static int on_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    return cli_sh("command -v '%s' >/dev/null 2>&1", prog) == 0;
}

/* MCA settings of tests/train/test_dp.c: shared memory only, no rsh agent */
static const char *MPI_FLAGS = "--allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca pml ob1 "
                               "--mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent false "
                               "-x VERLC_DIST_TIMEOUT -x LSAN_OPTIONS -x VC_RLDP_MODE";

/* 4 prompts x 2 samples per step; mini-batches of 2 prompts, so on 2 ranks the first global mini-batch
 * is all rank 0's rows and the second all rank 1's */
static const char *COMMON =
    "data.train_files=%s/data/train.jsonl data.val_files=%s/data/test.jsonl "
    "data.train_max_samples=8 data.val_max_samples=4 data.train_batch_size=4 data.max_prompt_length=256 "
    "data.max_response_length=8 data.filter_overlong_prompts=true data.truncation=error data.shuffle=False "
    "actor_rollout_ref.model.path=%s/model actor_rollout_ref.actor.optim.lr=1e-3 "
    "actor_rollout_ref.actor.ppo_mini_batch_size=%d actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
    "actor_rollout_ref.rollout.n=2 algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=True "
    "actor_rollout_ref.actor.kl_loss_coef=0.001 trainer.total_training_steps=1 trainer.val_before_train=False "
    "trainer.test_freq=1 trainer.save_freq=1 trainer.nnodes=1 ";

/* runs verlc train on np ranks (np 0: without mpirun); returns the exit status */
static int train(int np, int ngpu, int mini, const char *out, const char *extra, const char *log) {
    char common[2048];
    snprintf(common, sizeof common, COMMON, dir, dir, dir, mini);
    char launch[1024] = "";
    if (np > 0) snprintf(launch, sizeof launch, "timeout 300 %s %s -np %d ", mpirun, MPI_FLAGS, np);
    return cli_sh("%s%s train %s trainer.n_gpus_per_node=%d trainer.default_local_dir=%s %s > %s 2>&1", launch, bin,
                  common, ngpu, out, extra ? extra : "", log);
}

static double max_weight_diff(const char *a, const char *b) {
    vc_model *x = NULL, *y = NULL;
    double d = INFINITY;
    CHECK_OK(vc_model_load(a, &x));
    CHECK_OK(vc_model_load(b, &y));
    if (x && y && vc_model_n_params(x) == vc_model_n_params(y)) {
        d = 0;
        for (int i = 0; i < vc_model_n_params(x); i++) {
            const char *nx = NULL, *ny = NULL;
            vc_tensor *tx = vc_model_param(x, i, &nx, NULL), *ty = vc_model_param(y, i, &ny, NULL);
            if (!tx || !ty || strcmp(nx, ny) || tx->n != ty->n) {
                d = INFINITY;
                break;
            }
            for (int64_t k = 0; k < tx->n; k++) d = fmax(d, fabs((double)tx->data[k] - ty->data[k]));
        }
    }
    vc_model_free(x);
    vc_model_free(y);
    return d;
}

/* the exported weights (hf_model/) of runs a_run and b_run within tol */
static void check_close(const char *a_run, const char *b_run, const char *what, double tol) {
    char a[500], b[500];
    snprintf(a, sizeof a, "%s/hf_model", a_run);
    snprintf(b, sizeof b, "%s/hf_model", b_run);
    double d = max_weight_diff(a, b);
    printf("%s: max |dw| over the exported weights %.3g (tolerance %g)\n", what, d, tol);
    CHECK_MSG(d <= tol, "%s: exported weights differ by %g", what, d);
}

static double metric(const char *run, const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/metrics.jsonl", run);
    vc_metrics *m = NULL;
    double v = NAN;
    if (vc_metrics_read(p, &m)) return NAN;
    const vc_metric_series *s = vc_metrics_find(m, name);
    if (s && s->n) v = s->y[s->n - 1];
    vc_metrics_free(m);
    return v;
}

static int file_has(const char *path, const char *needle) {
    char *text = NULL;
    size_t n = 0;
    int has = !vc_read_file(path, &text, &n) && strstr(text, needle);
    free(text);
    return has;
}

/* a reward program whose scores vary with the response (two digits of its JSON line's CRC), so GRPO groups
 * have non-zero advantages; the same text scores the same on any rank */
/* writes an executable shell program (one check: the file opened); 0 when it could not be written */
static int write_prog(const char *prog, const char *text) {
    FILE *f = fopen(prog, "w");
    CHECK(f != NULL);
    if (!f) return 0;
    fputs(text, f);
    fclose(f);
    chmod(prog, 0755);
    return 1;
}

/* dir/NAME: a reward program scoring each response by `score` (shell arithmetic over c, the response's
 * cksum); 1 when written */
static int write_cksum_scorer(const char *name, const char *score, char *prog, size_t cap) {
    char text[512];
    snprintf(prog, cap, "%s/%s", dir, name);
    snprintf(text, sizeof text,
             "#!/bin/sh\nwhile read -r line; do\n  c=$(printf %%s \"$line\" | cksum | cut -d' ' -f1)\n"
             "  echo \"{\\\"score\\\": %s}\"\ndone\n", score);
    return write_prog(prog, text);
}

/* varied scores 0.00 .. 0.89 */
static void write_scorer(char *extra, size_t n) {
    char prog[400];
    if (write_cksum_scorer("score.sh", "0.$(( c % 9 ))$(( c / 9 % 10 ))", prog, sizeof prog))
        snprintf(extra, n, "custom_reward_function.path=%s", prog);
}

/* Common start of main: binary, shared folder, mpirun; 0 when the MPI part must be skipped. */
static int rldp_start(const char *tag) {
    cli_quiet = 1;
    rl_cli_start(tag);
    const char *m = getenv("VERLC_MPIRUN");
    if (m && *m) mpirun = m;
    if (!vc_comm_available("mpi")) {
        printf("skipped: this build has no MPI\n");
        return 0;
    }
    if (!on_path(mpirun)) {
        printf("skipped: %s not found\n", mpirun);
        return 0;
    }
    return 1;
}

/* Environment of the MPI jobs: leak detection off (Open MPI's plugins leak, tests/dist/test_dist.c),
 * VERLC_DIST_TIMEOUT 30 s, no fault mode; returns the old LSAN_OPTIONS for rldp_env_end (NULL: unset). */
static char *rldp_env_begin(void) {
    char *old = getenv("LSAN_OPTIONS") ? vc_strdup(getenv("LSAN_OPTIONS")) : NULL, lsan[512];
    snprintf(lsan, sizeof lsan, "%s%sdetect_leaks=0", old && *old ? old : "", old && *old ? ":" : "");
    setenv("LSAN_OPTIONS", lsan, 1);
    setenv("VERLC_DIST_TIMEOUT", "30", 1);
    setenv("VC_RLDP_MODE", "none", 1);
    return old;
}

/* restores LSAN_OPTIONS and removes dir unless a check failed or VC_RLDP_KEEP is set */
static void rldp_env_end(char *old) {
    if (old) setenv("LSAN_OPTIONS", old, 1);
    else unsetenv("LSAN_OPTIONS");
    free(old);
    if (!vc_t_fail && !getenv("VC_RLDP_KEEP")) cli_sh("rm -rf %s", dir);
}
#endif
