/* algorithm.use_pf_ppo: verl's three weightings (pow, max_min, max_random, each plus 1e-8), resampling
 * with replacement that copies whole rows (tokens, every [B,T] array, uid, text), draws whose
 * frequencies follow the weights, and, over 2 MPI ranks holding halves of the batch, the same resampled
 * global batch as one rank (each rank keeping its number of rows). */
#include "../../src/rl/trainer_internal.h"
#include "mpi_launch.h"
#include "verlc/dist.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NB 6
#define NT 3
static const float SCORE[NB] = { 0.5f, -1.0f, 2.0f, 0.0f, 2.0f, -1.0f }; /* max 2 (rows 2, 4), min -1 (1, 5) */

/* global rows [g0, g0 + n) of a batch whose every value names its row */
static void make_rows(rl_batch *b, int g0, int n) {
    int64_t tot = 0;
    for (int i = 0; i < n; i++) tot += 2 + (g0 + i) % 3;
    CHECK_OK(rl_batch_alloc(b, n, NT, tot));
    for (int i = 0; i < n; i++) {
        int g = g0 + i, len = 2 + g % 3;
        for (int k = 0; k < len; k++) b->ids[b->cu[i] + k] = 100 * g + k;
        b->cu[i + 1] = b->cu[i] + len;
        b->plen[i] = 1;
        b->rlen[i] = len - 1 < NT ? len - 1 : NT;
        b->prompt[i] = g / 2;
        b->score[i] = SCORE[g];
        char s[32];
        snprintf(s, sizeof s, "uid%d", g / 2);
        b->uid[i] = vc_strdup(s);
        snprintf(s, sizeof s, "text of %d", g);
        b->text[i] = vc_strdup(s);
        float *arr[RL_BATCH_ARRAYS];
        rl_batch_arrays(b, arr);
        for (int a = 0; a < RL_BATCH_ARRAYS; a++)
            for (int j = 0; j < NT; j++) arr[a][i * NT + j] = 1000.0f * a + 10.0f * g + j;
        memset(b->token_scores + i * NT, 0, sizeof(float) * NT);
        b->token_scores[i * NT + b->rlen[i] - 1] = SCORE[g];
    }
}

/* the global row a resampled row is a copy of (-1: a mix of rows) */
static int row_origin(const rl_batch *b, int i) {
    int g = b->ids[b->cu[i]] / 100;
    char s[32];
    snprintf(s, sizeof s, "text of %d", g);
    int ok = g >= 0 && g < NB && b->cu[i + 1] - b->cu[i] == 2 + g % 3 && !strcmp(b->text[i], s) && b->score[i] == SCORE[g];
    float *arr[RL_BATCH_ARRAYS];
    rl_batch_arrays(b, arr);
    for (int a = 0; ok && a < RL_BATCH_ARRAYS; a++) /* token_scores were set apart */
        for (int j = 0; j < NT; j++)
            if (arr[a] != b->token_scores) ok &= arr[a][i * NT + j] == 1000.0f * a + 10.0f * g + j;
    return ok ? g : -1;
}

static void resample(vc_rl_trainer *t, rl_batch *b, int g0, const char *method, int64_t step, int *origin) {
    rl_dp dp = { t->comm, t->world, g0, NB, NT, NULL };
    snprintf(t->pf_method, sizeof t->pf_method, "%s", method);
    t->step = step;
    CHECK_OK(rl_pf_ppo(t, b, &dp));
    for (int i = 0; i < b->B; i++) origin[i] = row_origin(b, i);
}

static void test_weights(void) {
    double s[4] = { -2, 0.5, 3, 3 }, w[4];
    CHECK_OK(rl_pf_weights("pow", 2.0, s, 4, w));
    CHECK_NEAR(w[0], 4 + 1e-8, 1e-12);
    CHECK_NEAR(w[1], 0.25 + 1e-8, 1e-12);
    CHECK_OK(rl_pf_weights("max_min", 2.0, s, 4, w));
    CHECK(w[0] > 0.99 && w[1] == 1e-8 && w[2] > 0.99 && w[3] > 0.99);
    CHECK_OK(rl_pf_weights("max_random", 2.0, s, 4, w));
    CHECK_NEAR(w[0], 0.1 + 1e-8, 1e-12);
    CHECK_NEAR(w[2], 0.4 + 1e-8, 1e-12);
    CHECK(rl_pf_weights("rank", 2.0, s, 4, w) == VC_ERR_ARG && strstr(vc_last_error(), "reweight_method"));
}

static void test_one_rank(void) {
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->world = 1;
    t->seed = 9;
    t->pf_pow = 2.0;
    int count[NB] = { 0 }, origin[NB], bad = 0, n = 0;
    for (int step = 0; step < 200; step++) {
        rl_batch b;
        make_rows(&b, 0, NB);
        resample(t, &b, 0, step < 100 ? "pow" : "max_min", step, origin);
        CHECK(b.B == NB);
        for (int i = 0; i < NB; i++) {
            bad += origin[i] < 0 || (step >= 100 && SCORE[origin[i]] != 2.0f && SCORE[origin[i]] != -1.0f);
            if (step < 100 && origin[i] >= 0) count[origin[i]]++, n++;
        }
        rl_batch_free(&b);
    }
    CHECK_MSG(bad == 0, "%d resampled rows are not whole copies of an allowed row", bad);
    /* pow 2: weights 0.25, 1, 4, 0, 4, 1 of 10.25 */
    double w[NB] = { 0.25, 1, 4, 1e-8, 4, 1 };
    for (int g = 0; g < NB; g++) {
        double p = w[g] / 10.25, f = (double)count[g] / n;
        CHECK_MSG(fabs(f - p) < 4 * sqrt(p * (1 - p) / n) + 1e-3, "row %d drawn %.3f of the time, weight %.3f", g, f, p);
    }
    free(t);
}

/* ranks hold rows [0, 3) and [3, 6); each must end with rows 3r.. of the one-rank result */
static int child_two_ranks(int *argc, char ***argv) {
    vc_comm *c = NULL;
    if (vc_comm_init(argc, argv, "mpi", &c)) return 2;
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->comm = c;
    t->world = vc_comm_size(c);
    t->rank = vc_comm_rank(c);
    t->seed = 9;
    t->pf_pow = 2.0;
    int mine[NB], one[NB];
    for (int step = 0; step < 6; step++) {
        const char *m = step % 3 == 0 ? "pow" : step % 3 == 1 ? "max_min" : "max_random";
        rl_batch b;
        make_rows(&b, 3 * t->rank, 3);
        resample(t, &b, 3 * t->rank, m, step, mine);
        CHECK(b.B == 3);
        rl_batch_free(&b);
        vc_rl_trainer solo = *t;
        solo.comm = NULL;
        solo.world = 1;
        make_rows(&b, 0, NB);
        resample(&solo, &b, 0, m, step, one);
        rl_batch_free(&b);
        for (int i = 0; i < 3; i++)
            CHECK_MSG(mine[i] == one[3 * t->rank + i] && mine[i] >= 0, "rank %d step %d row %d: row %d, one rank %d",
                      t->rank, step, i, mine[i], one[3 * t->rank + i]);
    }
    free(t);
    vc_comm_free(c);
    return vc_test_done();
}

static void test_two_ranks(void) {
    const char *mpirun = getenv("VERLC_MPIRUN");
    if (!mpirun || !*mpirun) mpirun = "mpirun";
    if (!vc_comm_available("mpi") || !vc_test_on_path(mpirun)) {
        printf("2-rank PF-PPO skipped: no MPI\n");
        return;
    }
    char log[64];
    snprintf(log, sizeof log, "/tmp/verlc_pfppo_%d.log", (int)getpid());
    char *old = getenv("LSAN_OPTIONS") ? vc_strdup(getenv("LSAN_OPTIONS")) : NULL;
    setenv("LSAN_OPTIONS", "detect_leaks=0", 1); /* Open MPI's own exit-time leaks (see test_dist.c) */
    double secs = 0;
    int rc = vc_test_run_mpi(mpirun, 2, "VC_PFPPO_MODE", "ranks", NULL, log, 60, &secs);
    int ok = rc == 0 && vc_test_log_has(log, " 0 failed", 2);
    CHECK_MSG(ok, "mpirun -np 2 PF-PPO: exit %d (log %s)", rc, log);
    if (ok) unlink(log);
    if (old) setenv("LSAN_OPTIONS", old, 1);
    else unsetenv("LSAN_OPTIONS");
    free(old);
    printf("2 ranks: the same resampled global batch as one rank (%.1f s)\n", secs);
}

int main(int argc, char **argv) {
    const char *mode = getenv("VC_PFPPO_MODE");
    if (mode && !strcmp(mode, "ranks")) return child_two_ranks(&argc, &argv);
    test_weights();
    test_one_rank();
    test_two_ranks();
    return vc_test_done();
}
