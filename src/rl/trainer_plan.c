/* The RL trainer's memory plan, before the first step (verl's runs meet their out-of-memory an hour in): the
 * actor's weights, gradients, AdamW state and the activations of its largest micro-batch, measured by one
 * trial forward + backward (vc_trainer_plan_rows: rows of the longest prompt + the response length packed into one
 * micro-batch, the loss and so the LM head on their responses, as in the updates),
 * plus the critic's, the reference model's, the reward model's and the distillation teachers' resident state (and
 * forward_kl_topk's student head chunk). The critic's updates and the log-prob, reference, teacher, value and
 * reward-model passes run in the actor's step arena too, so the activations are the largest of all: the critic's
 * update by a trial through its value head, a pass's peak measured on one and two rows and extended to the rows its
 * token budget packs (no-grad passes keep one layer's temporaries at a time: their memory grows by rows). The
 * models and optimiser states are allocated before the plan: the activations (and bf16 weight copies) must fit what
 * is left. The rollout's KV pool is freed before the updates, so it is reported beside, not added. */
#include "trainer_internal.h"
#include "verlc/ops.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB(x) ((double)(x) / 1073741824.0)

/* the largest micro-batch of an update: the token budget (at most one mini-batch of full-length rows), or
 * micro_rows full-length rows, or without either the whole mini-batch (the update runs it as one micro-batch). Under
 * data parallelism a rank's share of a mini-batch is not bounded by mini_rows / world (its rows are its prompts'
 * groups, then balanced by tokens): the whole mini-batch bounds it. */
static int64_t largest_micro(int64_t budget, int mini_rows, int micro_rows, int64_t seq) {
    int64_t whole = (int64_t)mini_rows * seq;
    int64_t most = budget > 0 ? budget : (int64_t)(micro_rows > 0 ? micro_rows : mini_rows > 0 ? mini_rows : 1) * seq;
    return whole > 0 && most > whole ? whole : most;
}

/* the arena bytes of one pass of `rows` rows of seq tokens (a prompt, then `tail` response tokens) in one
 * forward, the way the step runs it */
static vc_status pass_rows_bytes(const rl_pass_spec *p, vc_graph *g, int rows, int64_t seq, int64_t tail,
                                 size_t *bytes) {
    rl_batch b;
    vc_status st = rl_batch_alloc(&b, rows, (int)tail, (int64_t)rows * seq);
    if (st) return st;
    int64_t V = vc_cfg_out_vocab(vc_model_cfg(p->m));
    for (int i = 0; i < rows; i++) {
        b.cu[i + 1] = (int64_t)(i + 1) * seq;
        b.plen[i] = seq - tail;
        b.rlen[i] = tail;
    }
    for (int64_t k = 0; k < b.cu[rows]; k++) b.ids[k] = (int32_t)((k * 7919) % V);
    vc_model *vm = p->kind == RL_PASS_VALUES ? p->critic->m : p->m;
    if (p->img && vc_model_vision(vm) && !(st = rl_batch_rimg_alloc(&b))) {
        /* every row leads with the images (a tool's lie in the response: the span is the row's, borrowed) */
        for (int i = 0; !st && i < rows; i++) {
            b.rimg[i] = *p->img;
            if ((b.rspan[i] = vc_images_trial_ids(vm, p->img, b.ids + b.cu[i], seq)) < 0)
                st = vc_fail(VC_ERR_ARG, "memory plan: the images do not fit a trial row of %lld tokens", (long long)seq);
        }
    }
    if (!st && p->kind == RL_PASS_TOPK) st = rl_batch_topk_alloc(&b, p->topk);
    vc_graph_reset(g);
    vc_graph_clear_peak(g);
    float *sq = p->sum_pi_sq ? b.sum_pi_sq : NULL;
    if (!st && p->kind == RL_PASS_LOGP) st = rl_batch_logprobs_ex(p->m, g, &b, 0, 1.0f, 0, b.old_logp, NULL, sq);
    if (!st && p->kind == RL_PASS_TOPK) st = rl_batch_teacher_topk(p->m, g, &b, NULL, rows, 0);
    if (!st && p->kind == RL_PASS_VALUES) st = rl_critic_values(p->critic, g, &b, 0, b.values);
    if (!st && p->kind == RL_PASS_SCORES) st = rl_batch_last_scores(p->m, g, &b, 0, b.score);
    *bytes = vc_graph_peak_bytes(g);
    vc_graph_reset(g);
    if (b.rimg) memset(b.rimg, 0, sizeof *b.rimg * (size_t)rows); /* borrowed */
    rl_batch_free(&b);
    return st;
}

vc_status rl_pass_trial_bytes(const rl_pass_spec *p, vc_graph *g, int64_t rows, int64_t seq, int64_t tail,
                              size_t *bytes) {
    size_t one = 0, two = 0;
    vc_status st = pass_rows_bytes(p, g, 1, seq, tail, &one);
    if (!st && rows > 1) st = pass_rows_bytes(p, g, 2, seq, tail, &two);
    static const char *const what[] = { "log-prob", "teacher top-k", "value", "reward-model" };
    if (st) return vc_fail_ctx(st, "memory plan trial of a %s pass", what[p->kind]);
    size_t lin = rows > 1 && two > one ? one + (two - one) * (size_t)(rows - 1) : one;
    *bytes = lin + lin / 50; /* 2%: small per-row buffers rounded up to the arena's 64 bytes grow by steps */
    return VC_OK;
}

/* the peak of a pass whose token budget packs rows of seq tokens (budget 0: every row of the rank's batch at once:
 * its block of whole prompts, all n samples of each, as the rollout divides them) */
static vc_status pass_bytes(vc_rl_trainer *t, rl_pass_kind kind, vc_model *m, int64_t budget, int64_t seq,
                            int64_t tail, size_t *bytes) {
    int64_t w = t->world > 0 ? t->world : 1, all = (((int64_t)t->batch_prompts + w - 1) / w) * t->n;
    int64_t rows = budget > 0 ? (budget + seq - 1) / seq : all;
    if (rows > all) rows = all;
    rl_pass_spec p = { kind, m, &t->critic, t->acfg.dist.topk, t->calc_sum_pi_sq && m == t->actor, t->atr.plan_images };
    return rl_pass_trial_bytes(&p, t->g, rows < 1 ? 1 : rows, seq, tail, bytes);
}

/* the critic's loss in its plan trial: its value head on the hidden states, their mean (the value loss's own
 * temporaries are a few floats per token) */
static vc_status critic_trial_loss(void *ctx, vc_graph *g, const vc_micro_batch *mb, vc_tensor *h, vc_tensor *ent,
                                   vc_tensor **loss) {
    (void)mb, (void)ent;
    rl_critic *cr = ctx;
    vc_tensor *v = vc_op_linear(g, h, &cr->head_w, &cr->head_b);
    if (v) v = vc_reshape(g, v, 1, (int64_t[]){ v->n });
    float *w = v ? vc_graph_alloc(g, sizeof(float) * (size_t)v->n, 0) : NULL;
    for (int64_t i = 0; w && i < v->n; i++) w[i] = 1.0f / (float)v->n;
    *loss = w ? vc_op_dot_const(g, v, w) : NULL;
    return *loss ? VC_OK : vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
}

/* the critic's plan: its update activations (its trainer shares the actor's arena), measured as the actor's, and
 * its resident state (this rank's shard of it under ZeRO) */
static vc_status critic_plan(vc_rl_trainer *t, int64_t seq, size_t *act, size_t *resident) {
    *act = *resident = 0;
    if (!t->use_critic) return VC_OK;
    int64_t most = largest_micro(t->ccfg.max_tokens, t->ccfg.mini_rows, t->ccfg.micro_rows, seq);
    vc_mem_plan pc;
    vc_status st = vc_trainer_plan_loss(&t->ctr, most, seq, t->max_resp, critic_trial_loss, &t->critic, 0, NULL, &pc);
    if (st) return vc_fail_ctx(st, "critic memory plan");
    *act = pc.activations;
    *resident = pc.weights + pc.grads + pc.optim + pc.copies;
    return VC_OK;
}

/* the largest of the no-grad passes' peaks in the actor's arena: old log-probs, reference, teachers, values, reward
 * model (at its own rows' length: rl_rm_plan_len) */
static vc_status passes_bytes(vc_rl_trainer *t, int64_t seq, size_t *most) {
    size_t b = 0;
    int64_t tail = t->max_resp < seq ? t->max_resp : seq - 1;
    vc_status st = pass_bytes(t, RL_PASS_LOGP, t->actor, t->fwd_tokens, seq, tail, most);
    if (!st && t->need_ref && t->ref && !(st = pass_bytes(t, RL_PASS_LOGP, t->ref, t->ref_tokens, seq, tail, &b)))
        *most = b > *most ? b : *most;
    rl_pass_kind tk = t->acfg.dist.topk ? RL_PASS_TOPK : RL_PASS_LOGP;
    for (int i = 0; !st && i < t->n_teacher; i++)
        if (!(st = pass_bytes(t, tk, t->teacher[i], t->ref_tokens, seq, tail, &b))) *most = b > *most ? b : *most;
    if (!st && t->use_critic && !(st = pass_bytes(t, RL_PASS_VALUES, t->critic.m, t->critic_tokens, seq, tail, &b)))
        *most = b > *most ? b : *most;
    int64_t rs = seq; /* the reward model's rows, re-rendered with its own template */
    if (!st && t->rm && !(st = rl_rm_plan_len(t->rm, t->train, seq, tail, &rs)) &&
        !(st = pass_bytes(t, RL_PASS_SCORES, rl_rm_model(t->rm), t->rm_tokens, rs, tail < rs ? tail : rs - 1, &b)))
        *most = b > *most ? b : *most;
    return st;
}

static vc_status memory_plan(vc_rl_trainer *t);

/* image-text models: the training prompt whose rows can hold the most image patches (its own images and the most the
 * tools can add to a response: ImageZoomInTool's crops), those images with zero pixels, for the plan's trial row (the
 * tower's activations grow with the patches) into *im (grid and pixels malloc'd); n 0: none */
static vc_status largest_images(const vc_rl_trainer *t, vc_images *im) {
    const vc_rl_dataset *d = t->train;
    memset(im, 0, sizeof *im);
    if (!d || !d->vl || !vc_model_vision(t->actor)) return VC_OK;
    int64_t best = 0, rows = 0;
    size_t at = 0;
    int32_t tool_grid[3] = { 0 }, g[3];
    int tool_n = 0, k;
    for (size_t i = 0; i < d->n; i++) {
        const vc_rl_prompt *p = &d->p[i];
        int64_t n = 0;
        for (int j = 0; j < p->n_images; j++) n += (int64_t)p->images[j].grid[0] * p->images[j].grid[1] * p->images[j].grid[2];
        vc_status st = rl_agent_tool_images(t, d, p, t->max_resp, g, &k);
        if (st) return vc_fail_ctx(st, "memory plan: the tools' images");
        n += (int64_t)k * g[0] * g[1] * g[2];
        if (n > best) best = n, at = i, tool_n = k, memcpy(tool_grid, g, sizeof g);
    }
    if (!best) return VC_OK;
    const vc_rl_prompt *p = &d->p[at];
    int n_im = p->n_images + tool_n;
    int32_t *grid = vc_malloc(sizeof(int32_t) * 3 * (size_t)n_im);
    rows = vc_vision_row(vc_model_vision(t->actor));
    float *pix = vc_calloc((size_t)(best * rows), sizeof(float));
    if (!grid || !pix) {
        free(grid);
        free(pix);
        return vc_fail(VC_ERR_NOMEM, "memory plan: images of %lld patches", (long long)best);
    }
    for (int k = 0; k < p->n_images; k++) memcpy(grid + 3 * k, p->images[k].grid, sizeof(int32_t) * 3);
    for (int k = p->n_images; k < n_im; k++) memcpy(grid + 3 * k, tool_grid, sizeof tool_grid);
    if (tool_n && t->rank == 0)
        vc_info("memory plan: a response may gain %d tool image%s of up to %d tile%s of %d x %d patches "
                "(ImageZoomInTool's crops of data line %lld's image): the trial rows carry them", tool_n,
                tool_n == 1 ? "" : "s", tool_grid[0], tool_grid[0] == 1 ? "" : "s", tool_grid[1], tool_grid[2],
                (long long)p->line);
    *im = (vc_images){ n_im, grid, pix, rows };
    return VC_OK;
}

vc_status rl_memory_plan(vc_rl_trainer *t) {
    const char *env = getenv("VERLC_MEMORY_PLAN"); /* 0: no trial step (quick runs; the tests that are not about it) */
    if (env && !strcmp(env, "0")) return VC_OK;
    vc_images im;
    vc_status st = largest_images(t, &im);
    if (st) return st;
    t->atr.plan_images = t->ctr.plan_images = im.n ? &im : NULL; /* (the passes' trials read the actor's) */
    st = memory_plan(t);
    t->atr.plan_images = t->ctr.plan_images = NULL;
    free((void *)im.grid);
    free((void *)im.pixels);
    return st;
}

static vc_status memory_plan(vc_rl_trainer *t) {
    int64_t longest = 1; /* the longest training prompt (verlc packs rows: no padding to max_prompt_length) */
    for (size_t i = 0; t->train && i < t->train->n; i++)
        if (t->train->p[i].len > longest) longest = t->train->p[i].len;
    int64_t seq = (longest < t->max_prompt ? longest : t->max_prompt) + t->max_resp;
    int64_t most = largest_micro(t->acfg.max_tokens, t->acfg.mini_rows, t->acfg.micro_rows, seq);
    vc_mem_plan pa;
    if (t->rank == 0) /* (a minute or more on a CPU: said before it starts) */
        vc_info("memory plan: a trial update of one %lld-token micro-batch (forward and backward) and the forward passes' "
                "trials before the first step (VERLC_MEMORY_PLAN=0 skips them)", (long long)most);
    double t0 = vc_now();
    vc_status st = vc_trainer_plan_rows(&t->atr, most, seq, t->max_resp, 0, NULL, &pa); /* a loss on responses */
    if (st) return vc_fail_ctx(st, "actor memory plan");
    size_t passes = 0, crit = 0, critic = 0; /* in the same arena as the actor's updates: the largest counts */
    if ((st = passes_bytes(t, seq, &passes)) || (st = critic_plan(t, seq, &crit, &critic))) return st;
    t->planned_act = pa.activations;
    if (passes > t->planned_act) t->planned_act = passes;
    if (crit > t->planned_act) t->planned_act = crit;
    pa.total += t->planned_act - pa.activations;
    /* the steps take what they use (the plan is their bound); their peak from here (reported against the plan) */
    vc_graph_trim(t->g);
    vc_graph_clear_peak(t->g);
    char crit_act[64] = ""; /* the critic's update activations (the largest is counted in the actor's) */
    if (t->use_critic) snprintf(crit_act, sizeof crit_act, ", the critic update's %.3f", GIB(crit));
    size_t ref = t->ref ? (size_t)vc_model_param_count(t->ref) * 4 : 0;
    for (int i = 0; i < t->n_teacher; i++) ref += (size_t)vc_model_param_count(t->teacher[i]) * 4; /* their weights */
    if (t->rm) ref += (size_t)vc_model_param_count(rl_rm_model(t->rm)) * 4;
    /* forward_kl_topk: the student's head a chunk of positions at a time (logits, scaled, their gradients) */
    const rl_distill_cfg *dc = &t->acfg.dist;
    size_t chunk = 0;
    if (dc->on && dc->topk) {
        const vc_model *am = t->atr.model;
        chunk = (size_t)vc_model_head_gather_rows(am, dc->chunk_rows) * (size_t)vc_cfg_out_vocab(vc_model_cfg(am)) * 16;
    }
    ref += chunk;
    size_t total = pa.total + critic + ref;
    char copies[64] = ""; /* bf16 copies of the weight matrices, where a GPU step makes them */
    if (pa.copies) snprintf(copies, sizeof copies, " + bf16 weight copies %.3f", GIB(pa.copies));
    if (t->rank == 0)
        vc_info("memory plan: actor %.3f GiB (weights %.3f + grads %.3f + %s %.3f%s + activations %.3f: a %lld-token "
                "micro-batch's %.3f, the forward passes' %.3f%s) + critic %.3f GiB + reference%s%s "
                "%.3f GiB = %.3f GiB, the steps' part in %.3f GiB %s after the rest is allocated; the rollout's KV pool "
                "(%.0f%% of the memory free when it generates) is released before the updates; trials %.1f s",
                GIB(pa.total), GIB(pa.weights), GIB(pa.grads), vc_adamw_name(&t->atr.opt), GIB(pa.optim), copies,
                GIB(t->planned_act),
                (long long)most, GIB(pa.activations), GIB(passes), crit_act, GIB(critic),
                t->n_teacher ? ", distillation teachers" : "", t->rm ? ", reward model" : "",
                GIB(ref), GIB(total), GIB(pa.available), pa.on_gpu ? "free on the GPU" : "available", t->kv_fraction * 100,
                vc_now() - t0);
    /* the models, gradients and AdamW states are allocated already: the steps add their activations (and the
     * bf16 weight copies, the distillation head chunk) to what is left */
    size_t more = t->planned_act + pa.copies + chunk;
    if (pa.available && more > pa.available)
        return vc_fail(VC_ERR_NOMEM, "RL memory plan: the steps need %.3f GiB more (activations %.3f of the plan's %.3f "
                                     "GiB) but %.3f GiB is available (%s): lower ppo_max_token_len_per_gpu, "
                                     "ppo_micro_batch_size_per_gpu or log_prob_max_token_len_per_gpu, or shard with "
                                     "more ranks",
                       GIB(more), GIB(t->planned_act), GIB(total), GIB(pa.available),
                       vc_plan_available_source(pa.on_gpu));
    return VC_OK;
}
