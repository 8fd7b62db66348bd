/* algorithm.filter_groups (DAPO's dynamic sampling, recipe/dapo): generation batches of data.gen_batch_size
 * prompts are rolled out and scored one after another; a group (the rollout.n responses to one prompt)
 * is kept when its metric varies (or it has one response), since a group of equal rewards has zero
 * GRPO advantage; batches are drawn until data.train_batch_size groups are kept, and the surplus of the
 * last batch is dropped (verl: batch[:traj_bsz]). With several ranks each rank rolls out its block of
 * every generation batch; kept groups count in (batch, rank, order) order, so the batch is the same
 * set of groups whatever the world size. max_num_gen_batches > 0 bounds the batches of one step. */
#include "trainer_internal.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the value a group is judged on: for `acc` and `score` the reward's own value of that name when it
 * reported one (verl reads them from reward_extra_info), else for `acc` the score before the overlong
 * penalty (a scalar reward's acc); for seq_reward / seq_final_reward the row's score */
static double metric_of(const vc_rl_trainer *t, const rl_batch *b, int i) {
    double v = b->score[i];
    if (t->fg_key[0] && b->info[i]) {
        cJSON *j = cJSON_Parse(b->info[i]);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, t->fg_key);
        int have = cJSON_IsNumber(x) || cJSON_IsBool(x);
        if (have) v = cJSON_IsNumber(x) ? x->valuedouble : cJSON_IsTrue(x);
        cJSON_Delete(j);
        if (have) return v;
    }
    return t->fg_acc ? v - rl_overlong_penalty(t, b->rlen[i]) : v;
}

/* groups of b with varied metric (or of one response), in order of first appearance: keep[g] */
static vc_status kept_groups(const vc_rl_trainer *t, const rl_batch *b, int *gid, int *ng, uint8_t *keep) {
    vc_status st = vc_group_ids((const char *const *)b->uid, b->B, gid, ng);
    if (st) return st;
    int *first = vc_malloc(sizeof(int) * (size_t)(*ng ? *ng : 1)), *size = vc_calloc((size_t)(*ng ? *ng : 1), sizeof(int));
    if (!first || !size) {
        free(first);
        free(size);
        return VC_ERR_NOMEM;
    }
    double *m = vc_malloc(sizeof(double) * (size_t)(b->B + 1));
    if (!m) {
        free(first);
        free(size);
        return VC_ERR_NOMEM;
    }
    for (int i = 0; i < b->B; i++) m[i] = metric_of(t, b, i);
    for (int g = 0; g < *ng; g++) keep[g] = 0;
    for (int i = 0; i < b->B; i++) {
        int g = gid[i];
        if (!size[g]++) first[g] = i;
        else if (m[i] != m[first[g]]) keep[g] = 1;
    }
    free(m);
    for (int g = 0; g < *ng; g++)
        if (size[g] == 1) keep[g] = 1;
    free(first);
    free(size);
    return VC_OK;
}

/* this round's kept groups allowed on this rank: the remaining need, spent in rank order */
static vc_status allowance(vc_rl_trainer *t, int k_local, int remaining, int *allow, int *taken) {
    int W = t->world > 1 ? t->world : 1;
    double *k = vc_calloc((size_t)W, sizeof(double));
    if (!k) return VC_ERR_NOMEM;
    k[t->world > 1 ? t->rank : 0] = k_local;
    vc_status st = rl_dist_reduce(t, k, W, VC_SUM);
    int before = 0, total = 0;
    for (int r = 0; r < W; r++) {
        if (r < (t->world > 1 ? t->rank : 0)) before += (int)k[r];
        total += (int)k[r];
    }
    int a = remaining - before;
    *allow = a < 0 ? 0 : (a > k_local ? k_local : a);
    *taken = total < remaining ? total : remaining;
    free(k);
    return st;
}

vc_status rl_dynamic_rollout(vc_rl_trainer *t, rl_metrics *met, rl_batch *out, int *n_rounds) {
    rl_batch acc;
    memset(&acc, 0, sizeof acc);
    int need = t->batch_prompts, done = 0, round = 0;
    vc_status st = VC_OK;
    while (!st && done < need) {
        if (t->fg_max > 0 && round >= t->fg_max) {
            st = vc_fail(VC_ERR_ARG, "algorithm.filter_groups: %d generation batches kept %d of %d groups "
                                     "(max_num_gen_batches=%d): the rewards do not vary enough",
                         round, done, need, t->fg_max);
            break;
        }
        const uint32_t *idx = NULL;
        size_t n = vc_epoch_iter_next(&t->it, &idx);
        if (t->world > 1 && (int)n < t->world) {
            st = vc_fail(VC_ERR_ARG, "%zu prompts cannot be divided over %d ranks (data.gen_batch_size)", n, t->world);
            break;
        }
        int lo = 0, hi = (int)n;
        rl_dist_block(t, (int)n, &lo, &hi);
        rl_batch b;
        /* round 0 samples as a step without filtering does; later rounds with their own key */
        uint64_t key = (uint64_t)t->step + ((uint64_t)round << 40);
        st = rl_rollout_or_skip(t, idx + lo, hi - lo, key, round, &b);
        if (st) break;
        st = rl_score_batch(t, t->train, &b, met, NULL);
        int *gid = st ? NULL : vc_malloc(sizeof(int) * (size_t)(b.B ? b.B : 1));
        uint8_t *keep = st ? NULL : vc_malloc((size_t)(b.B ? b.B : 1));
        int *rows = st ? NULL : vc_malloc(sizeof(int) * (size_t)(b.B ? b.B : 1));
        int ng = 0, k_local = 0, allow = 0, taken = 0, nr = 0;
        if (!st && (!gid || !keep || !rows)) st = VC_ERR_NOMEM;
        if (!st) st = kept_groups(t, &b, gid, &ng, keep);
        for (int g = 0; !st && g < ng; g++) k_local += keep[g];
        if (!st) st = allowance(t, k_local, need - done, &allow, &taken);
        /* the first `allow` kept groups of this rank, all their rows */
        for (int g = 0, used = 0; !st && g < ng; g++) {
            if (!keep[g]) continue;
            if (used++ >= allow) keep[g] = 0;
        }
        for (int i = 0; !st && i < b.B; i++)
            if (keep[gid[i]]) rows[nr++] = i;
        if (!st) st = rl_batch_append_rows(&acc, &b, rows, nr);
        free(gid);
        free(keep);
        free(rows);
        rl_batch_free(&b);
        done += taken;
        round++;
    }
    if (st) {
        rl_batch_free(&acc);
        return vc_fail_ctx(st, "step %lld: dynamic sampling", (long long)t->step);
    }
    *out = acc;
    *n_rounds = round;
    rl_metrics_set(met, "train/num_gen_batches", round);
    return VC_OK;
}
