/* The RL trainer on the sim device (the CPU kernels behind poisoned backend pointers: any host read of
 * device memory crashes) against the cpu device, through build/verlc: GRPO (2 steps, entropy bonus so
 * every update moves the weights) and PPO (GAE with the critic's value head, 1 step) give bitwise the
 * same metrics (timing_s/ and perf/ aside; training/rollout_probs_diff_* within 1e-9, see below) and
 * bitwise the same exported weights. trainer.device=cuda on a
 * machine without a GPU exits non-zero with a one-line hint. */
#include "rl_cli_util.h"
#include "verlc/cuda.h"
#include <cjson/cJSON.h>
#include <math.h>

/* every numeric metric of every line of a's metrics.jsonl equals b's (timing and throughput aside) */
static void same_metrics(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK_OK(vc_read_file(a, &x, &nx));
    CHECK_OK(vc_read_file(b, &y, &ny));
    int lines = 0, compared = 0, differ = 0;
    for (char *p = x, *q = y; p && q && *p && *q; lines++) {
        char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
        if (pe) *pe = 0;
        if (qe) *qe = 0;
        cJSON *ja = cJSON_Parse(p), *jb = cJSON_Parse(q);
        CHECK(ja && jb);
        for (cJSON *e = ja ? ja->child : NULL; e; e = e->next) {
            if (!cJSON_IsNumber(e) || !strncmp(e->string, "timing_s/", 9) || !strncmp(e->string, "perf/", 5) ||
                !strncmp(e->string, "timing_per_token_ms/", 20))
                continue;
            cJSON *f = cJSON_GetObjectItemCaseSensitive(jb, e->string);
            compared++;
            /* rollout-vs-trainer probability gaps: the rollout engine runs its row-invariant GEMM table on the
             * cpu and the active backend's GEMMs elsewhere (include/verlc/rollout.h), so they agree to 1e-9 */
            int gap = !strncmp(e->string, "training/rollout_probs_diff", 27);
            if (!f || (gap ? fabs(f->valuedouble - e->valuedouble) > 1e-9 : f->valuedouble != e->valuedouble)) {
                differ++;
                fprintf(stderr, "%s: %.17g (cpu) vs %.17g (sim)\n", e->string, e->valuedouble, f ? f->valuedouble : 0.0);
            }
        }
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        p = pe ? pe + 1 : NULL;
        q = qe ? qe + 1 : NULL;
    }
    printf("%s: %d lines, %d metrics compared, %d differ\n", b, lines, compared, differ);
    CHECK(lines > 0 && compared > 10 && differ == 0);
    free(x);
    free(y);
}

static void run_pair(const char *name, const char *extra) {
    rl_cli_train_on(name, extra, "cpu");
    rl_cli_train_on(name, extra, "sim");
    char a[600], b[600];
    rl_cli_out(a, sizeof a, name, "cpu", 0);
    rl_cli_out(b, sizeof b, name, "sim", 0);
    same_metrics(a, b);
    rl_cli_out(a, sizeof a, name, "cpu", 1);
    rl_cli_out(b, sizeof b, name, "sim", 1);
    CHECK_MSG(cli_file_eq(a, b), "%s: exported weights differ between cpu and sim", name);
    CHECK(cli_sh("grep -q 'device sim (trainer.device=sim), matmul precision f32' %s/%s_sim.log", dir, name) == 0);
}

int main(void) {
    rl_cli_start("rl_device");
    double t0 = vc_now();
    rl_cli_setup(16, 1, 8, 32);
    run_pair("grpo", "algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=False "
                     "trainer.total_training_steps=2");
    char ppo[512];
    snprintf(ppo, sizeof ppo, "algorithm.adv_estimator=gae critic.model.path=%s/model critic.optim.lr=1e-3 "
                              "critic.ppo_micro_batch_size_per_gpu=1 trainer.total_training_steps=1", dir);
    run_pair("ppo", ppo);
    /* a GPU device without a GPU: non-zero exit, one line naming the fix */
    if (vc_cuda_device_count() == 0) {
        CHECK(cli_sh("%s train data.train_files=%s/data/train.jsonl actor_rollout_ref.model.path=%s/model "
                     "trainer.device=cuda trainer.default_local_dir=%s/cuda > %s/cuda.log 2>&1; test $? -ne 0",
                     bin, dir, dir, dir, dir) == 0);
        CHECK(cli_sh("test $(grep -c 'verlc train: trainer.device cuda: .*--device cpu' %s/cuda.log) -eq 1", dir) == 0);
    }
    printf("rl device: %.1f s\n", vc_now() - t0);
    if (!vc_t_fail) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
