/* The RL trainer's memory plan, before the first step (verl's runs meet their out-of-memory an hour in): the
 * actor's weights, gradients, AdamW state and the activations of its largest micro-batch, measured by one
 * trial forward + backward (vc_trainer_plan_rows: rows of the longest prompt + the response length packed to the
 * token budget, the loss and so the LM head on their responses, as in the updates),
 * plus the critic's, the reference model's and the distillation teachers' resident state (and forward_kl_topk's
 * student head chunk). The rollout's KV pool is freed before the updates, so it is reported beside, not added. */
#include "trainer_internal.h"
#include <stdlib.h>
#include <string.h>

#define GIB(x) ((double)(x) / 1073741824.0)

/* the largest micro-batch of an update: the token budget (at most one mini-batch of full-length rows), or
 * micro_rows full-length rows */
static int64_t largest_micro(int64_t budget, int mini_rows, int micro_rows, int64_t seq) {
    int64_t whole = (int64_t)mini_rows * seq;
    int64_t most = budget > 0 ? budget : (int64_t)(micro_rows > 0 ? micro_rows : 1) * seq;
    return whole > 0 && most > whole ? whole : most;
}

vc_status rl_memory_plan(vc_rl_trainer *t) {
    const char *env = getenv("VERLC_MEMORY_PLAN"); /* 0: no trial step (quick runs; the tests that are not about it) */
    if (env && !strcmp(env, "0")) return VC_OK;
    int64_t longest = 1; /* the longest training prompt (verlc packs rows: no padding to max_prompt_length) */
    for (size_t i = 0; t->train && i < t->train->n; i++)
        if (t->train->p[i].len > longest) longest = t->train->p[i].len;
    int64_t seq = (longest < t->max_prompt ? longest : t->max_prompt) + t->max_resp;
    int64_t most = largest_micro(t->acfg.max_tokens, t->acfg.mini_rows, t->acfg.micro_rows, seq);
    vc_mem_plan pa;
    vc_status st = vc_trainer_plan_rows(&t->atr, most, seq, t->max_resp, 0, NULL, &pa); /* a loss on responses */
    if (st) return vc_fail_ctx(st, "actor memory plan");
    size_t critic = t->use_critic ? (size_t)vc_model_param_count(t->critic.m) * 16 : 0; /* weights, grads, AdamW */
    size_t ref = t->ref ? (size_t)vc_model_param_count(t->ref) * 4 : 0;
    for (int i = 0; i < t->n_teacher; i++) ref += (size_t)vc_model_param_count(t->teacher[i]) * 4; /* their weights */
    /* forward_kl_topk: the student's head a chunk of positions at a time (logits, scaled, their gradients) */
    const rl_distill_cfg *dc = &t->acfg.dist;
    if (dc->on && dc->topk) {
        const vc_model *am = t->atr.model;
        ref += (size_t)vc_model_head_gather_rows(am, dc->chunk_rows) * (size_t)vc_cfg_out_vocab(vc_model_cfg(am)) * 16;
    }
    size_t total = pa.total + critic + ref;
    if (t->rank == 0)
        vc_info("memory plan: actor %.3f GiB (weights %.3f + grads %.3f + AdamW %.3f + activations %.3f of a %lld-token "
                "micro-batch) + critic %.3f GiB (without activations) + reference%s %.3f GiB = %.3f GiB of %.3f GiB %s; "
                "the rollout's KV pool (%.0f%% of the memory free when it generates) is released before the updates",
                GIB(pa.total), GIB(pa.weights), GIB(pa.grads), GIB(pa.optim), GIB(pa.activations), (long long)most,
                GIB(critic), t->n_teacher ? " and distillation teachers" : "", GIB(ref), GIB(total), GIB(pa.available), pa.on_gpu ? "free on the GPU" : "available",
                t->kv_fraction * 100);
    if (pa.available && total > pa.available)
        return vc_fail(VC_ERR_NOMEM, "RL memory plan: actor %.3f GiB + critic %.3f GiB + reference %.3f GiB = %.3f GiB "
                                     "exceeds the %.3f GiB available (lower ppo_max_token_len_per_gpu or "
                                     "ppo_micro_batch_size_per_gpu, or shard with more ranks)",
                       GIB(pa.total), GIB(critic), GIB(ref), GIB(total), GIB(pa.available));
    return VC_OK;
}
