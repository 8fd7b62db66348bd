/* Data parallelism of the RL trainer: reductions of metrics and counts over the ranks, the fixed split
 * of a step's prompts (contiguous blocks), the failure agreement of collective saves, and the check of
 * trainer.nnodes x trainer.n_gpus_per_node against the job's ranks, ZeRO-1 sharding of the actor and
 * critic optimiser state (<prefix>.zero_stage) and its checkpoints (every rank writes its shard). */
#include "trainer_internal.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

vc_status rl_dist_reduce(vc_rl_trainer *t, double *v, int n, vc_reduce_op op) {
    if (!t->comm || t->world <= 1 || n <= 0) return VC_OK;
    /* rank-ordered sums: the same bits on every rank and in every run */
    vc_status st = op == VC_SUM ? vc_comm_allreduce_f64_ordered(t->comm, v, (size_t)n, op)
                                : vc_comm_allreduce_f64(t->comm, v, (size_t)n, op);
    return st ? vc_fail_ctx(st, "reduction of %d metrics", n) : VC_OK;
}

void rl_dist_block(const vc_rl_trainer *t, int n, int *lo, int *hi) {
    int w = t->world > 1 ? t->world : 1, r = t->world > 1 ? t->rank : 0;
    *lo = (int)((int64_t)n * r / w);
    *hi = (int)((int64_t)n * (r + 1) / w);
}

vc_status rl_dist_agree(vc_rl_trainer *t, vc_status st, const char *what) {
    if (!t->comm || t->world <= 1) return st;
    double bad = st ? 1 : 0;
    vc_status cs = vc_comm_allreduce_f64(t->comm, &bad, 1, VC_MAX);
    if (st || cs) return st ? st : cs;
    return bad ? vc_fail(VC_ERR_IO, "rank %d: %s: another rank failed (see its message)", t->rank, what) : VC_OK;
}

/* verl's defaults are nnodes=1, n_gpus_per_node=8: one process runs anyway (with a notice); a job of
 * several ranks must match the keys exactly. */
vc_status rl_dist_check_world(vc_rl_trainer *t, const vc_config *cfg) {
    int64_t nn = 1, ng = 1;
    vc_status st = vc_config_get_int_or(cfg, "trainer.nnodes", 1, &nn);
    if (!st) st = vc_config_get_int_or(cfg, "trainer.n_gpus_per_node", 1, &ng);
    if (st) return st;
    if (nn < 1) nn = 1;
    if (ng < 1) ng = 1;
    if (t->world <= 1) {
        if (nn * ng > 1 && t->verbose)
            vc_info("trainer.nnodes=%lld x trainer.n_gpus_per_node=%lld, but one process runs: launch with "
                    "mpirun -np %lld verlc train ... for data parallelism", (long long)nn, (long long)ng,
                    (long long)(nn * ng));
        return VC_OK;
    }
    if (nn * ng != t->world)
        return vc_fail(VC_ERR_ARG,
                       "trainer.nnodes=%lld x trainer.n_gpus_per_node=%lld = %lld ranks, but this job has %d (%s): "
                       "launch with mpirun -np %lld (or fix the keys)", (long long)nn, (long long)ng,
                       (long long)(nn * ng), t->world, vc_comm_kind(t->comm), (long long)(nn * ng));
    return VC_OK;
}

vc_status rl_dist_sharding(const vc_config *cfg, const char *prefix, int *sharding, int *overlap) {
    char k[160];
    int64_t z = 0;
    snprintf(k, sizeof k, "%s.overlap_grad_reduce", prefix);
    vc_status st = vc_config_get_bool_or(cfg, k, 0, overlap);
    snprintf(k, sizeof k, "%s.zero_stage", prefix);
    if (!st) st = vc_config_get_int_or(cfg, k, 0, &z);
    if (st) return st;
    if (z < 0 || z > 3)
        return vc_fail(VC_ERR_ARG, "%s=%lld: expected 0 (plain data parallelism), 1 (ZeRO-1: optimiser state "
                       "sharded over the ranks), 2 (ZeRO-2: optimiser state and gradients sharded) or 3 (ZeRO-3: "
                       "weights too)", k, (long long)z);
    *sharding = z == 3 ? VC_SHARD_ZERO3 : z == 2 ? VC_SHARD_ZERO2 : z == 1 ? VC_SHARD_ZERO1 : VC_SHARD_NONE;
    return VC_OK;
}

int rl_dist_sharded(const vc_rl_trainer *t) {
    return vc_trainer_sharded(&t->atr) || (t->use_critic && vc_trainer_sharded(&t->ctr));
}

/* every rank: dir/name/optim_shard_R_of_N.bin of one trainer */
static vc_status write_shard(const char *dir, const char *name, const vc_trainer *tr) {
    if (!vc_trainer_sharded(tr)) return VC_OK;
    char *sub = vc_path_join(dir, name);
    if (!sub) return VC_ERR_NOMEM;
    vc_status st = mkdir(sub, 0755) != 0 && errno != EEXIST ? vc_fail(VC_ERR_IO, "%s: cannot create directory", sub)
                                                             : vc_train_ckpt_write_shard(sub, tr);
    free(sub);
    return st;
}

vc_status rl_dist_fill_sharded(vc_rl_trainer *t, const char *dir, vc_status (*fill)(void *ctx, const char *dir)) {
    vc_status st = t->rank == 0 ? fill(t, dir) : VC_OK;
    if (!st) st = write_shard(dir, "actor", &t->atr);
    if (!st && t->use_critic) st = write_shard(dir, "critic", &t->ctr);
    return st;
}
