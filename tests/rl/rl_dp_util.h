/* Helpers of the data-parallel `verlc train` tests (test_rl_dp.c, test_rl_zero.c): shell commands,
 * an mpirun launch of one GRPO run on the tiny Qwen3 model, weight and metric comparisons. Static
 * functions: each test program includes this header once. */
#ifndef VC_RL_DP_UTIL_H
#define VC_RL_DP_UTIL_H
#include "verlc/dist.h"
#include "verlc/model.h"
#include "verlc/report.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256], bin[512], shared[512];
static const char *mpirun = "mpirun";

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static int on_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    return sh("command -v '%s' >/dev/null 2>&1", prog) == 0;
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
    return sh("%s%s train %s trainer.n_gpus_per_node=%d trainer.default_local_dir=%s %s > %s 2>&1", launch, bin,
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

static void setup(void) {
    CHECK(sh("mkdir -p %s/model", dir) == 0);
    CHECK(sh("%s data gsm8k --input %s/data/gsm8k --out %s/data > %s/data.log 2>&1", bin, shared, dir, dir) == 0);
    char tdir[600], cfg[1024], path[600];
    snprintf(tdir, sizeof tdir, "%s/fixtures/tokenizers/qwen3", shared);
    vc_tokenizer *tok = NULL;
    CHECK_OK(vc_tokenizer_load(tdir, &tok));
    int vocab = tok ? vc_tokenizer_vocab_size(tok) : 151669;
    vc_tokenizer_free(tok);
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"vocab_size\":%d,\"hidden_size\":32,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":16,"
             "\"intermediate_size\":64,\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,"
             "\"hidden_act\":\"silu\",\"tie_word_embeddings\":true,\"bos_token_id\":151643,\"eos_token_id\":151645,"
             "\"torch_dtype\":\"float32\"}", vocab);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK_OK(vc_write_file_atomic(path, cfg, strlen(cfg)));
    CHECK(sh("%s init --config %s --out %s/model --seed 7 > /dev/null && cp %s/tokenizer.json %s/tokenizer_config.json %s/model/",
             bin, path, dir, tdir, tdir, dir) == 0);
}

/* a reward program whose scores vary with the response (two digits of its JSON line's CRC), so GRPO groups
 * have non-zero advantages; the same text scores the same on any rank */
static void write_scorer(char *extra, size_t n) {
    char prog[400];
    snprintf(prog, sizeof prog, "%s/score.sh", dir);
    FILE *f = fopen(prog, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "#!/bin/sh\n"
               "while read -r line; do\n"
               "  c=$(printf %%s \"$line\" | cksum | cut -d' ' -f1)\n"
               "  echo \"{\\\"score\\\": 0.$(( c %% 9 ))$(( c / 9 %% 10 ))}\"\n"
               "done\n");
    fclose(f);
    chmod(prog, 0755);
    snprintf(extra, n, "custom_reward_function.path=%s", prog);
}

/* Common start of main: binary, shared folder, mpirun; 0 when the MPI part must be skipped. */
static int rldp_start(const char *tag) {
    const char *b = getenv("VERLC_BIN");
    snprintf(bin, sizeof bin, "%s", b ? b : "build/verlc");
    snprintf(shared, sizeof shared, "%s", vc_test_shared());
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
    snprintf(dir, sizeof dir, "/tmp/verlc_%s_%d", tag, (int)getpid());
    return 1;
}
#endif
