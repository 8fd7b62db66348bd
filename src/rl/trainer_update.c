/* Actor and critic updates (verl's DataParallelPPOActor.update_policy / DataParallelPPOCritic.update_critic):
 * ppo_epochs x mini-batches x micro-batches; each micro-batch's loss is aggregated with the
 * mini-batch's global normalisers (token count, row count), so the summed micro-batch gradients equal
 * the mini-batch gradient; d loss / d log-prob (from rl.h) is pushed into the model through the fused
 * LM head as a dot product with constant per-token weights. The optimiser is this file's small
 * interface to the training core (AdamW, clipping, schedule). */
#include "rl_internal.h"
#include "verlc/ops.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- optimiser ---- */
static vc_status lr_from_cfg(const vc_config *cfg, const char *prefix, int64_t total, vc_lr_schedule *s, double *wd,
                             double *b1, double *b2, double *clip) {
    char k[160];
    vc_lr_config lc;
    vc_lr_config_default(&lc);
    vc_status st = VC_OK;
#define GETD(name, dst, def) do { snprintf(k, sizeof k, "%s.%s", prefix, name); if (!st) st = vc_config_get_double_or(cfg, k, def, dst); } while (0)
#define GETS(name, dst) do { snprintf(k, sizeof k, "%s.%s", prefix, name); if (!st) st = vc_config_get_str_or(cfg, k, NULL, dst); } while (0)
    GETD("optim.lr", &lc.lr, 1e-6);
    GETD("optim.lr_warmup_steps_ratio", &lc.lr_warmup_steps_ratio, 0);
    GETD("optim.min_lr_ratio", &lc.min_lr_ratio, 0);
    GETD("optim.num_cycles", &lc.num_cycles, 0.5);
    GETD("optim.weight_decay", wd, 0.01);
    GETD("optim.betas.0", b1, 0.9);
    GETD("optim.betas.1", b2, 0.999);
    GETD("grad_clip", clip, 1.0);
    GETS("optim.lr_scheduler_type", &lc.lr_scheduler_type);
    GETS("optim.warmup_style", &lc.warmup_style);
    double ws = -1;
    GETD("optim.lr_warmup_steps", &ws, -1);
#undef GETD
#undef GETS
    if (st) return st;
    lc.lr_warmup_steps = (int64_t)ws;
    lc.total_training_steps = total;
    return vc_lr_schedule_init(s, &lc);
}

vc_status rl_optim_init(rl_optim *o, vc_model *m, vc_tensor *const *extra, int n_extra, const vc_config *cfg,
                        const char *prefix, int64_t total_steps) {
    memset(o, 0, sizeof *o);
    vc_adamw_config ac;
    vc_adamw_config_default(&ac);
    vc_status st = lr_from_cfg(cfg, prefix, total_steps, &o->sched, &ac.weight_decay, &ac.beta1, &ac.beta2, &o->clip);
    if (st) return st;
    ac.lr = o->sched.base_lr;
    if ((st = vc_model_enable_grad(m))) return st;
    int np = vc_model_n_params(m);
    vc_optim_param *p = vc_calloc((size_t)(np + n_extra), sizeof *p);
    o->grads = vc_calloc((size_t)(np + n_extra), sizeof(float *));
    o->sizes = vc_calloc((size_t)(np + n_extra), sizeof(size_t));
    if (!p || !o->grads || !o->sizes) {
        free(p);
        return VC_ERR_NOMEM;
    }
    for (int i = 0; i < np + n_extra; i++) {
        int decay = 0;
        vc_tensor *t = i < np ? vc_model_param(m, i, NULL, &decay) : extra[i - np];
        if (!t->grad) continue;
        p[o->n] = (vc_optim_param){ t->data, t->grad, (size_t)t->n, i < np ? decay : 1 };
        o->grads[o->n] = t->grad;
        o->sizes[o->n] = (size_t)t->n;
        o->n++;
    }
    st = vc_adamw_init(&o->opt, &ac, p, o->n);
    free(p);
    rl_optim_zero(o);
    return st;
}

void rl_optim_zero(rl_optim *o) {
    for (size_t i = 0; i < o->n; i++) memset(o->grads[i], 0, sizeof(float) * o->sizes[i]);
}

vc_status rl_optim_step(rl_optim *o, double *grad_norm, double *lr, int *stepped) {
    *lr = vc_lr_at(&o->sched, o->steps);
    *stepped = vc_clip_grad_norm(o->grads, o->sizes, o->n, o->clip, grad_norm);
    vc_status st = VC_OK;
    if (*stepped) st = vc_adamw_step(&o->opt, *lr);
    else vc_warn("grad_norm is not finite (%g): optimizer step skipped", *grad_norm);
    o->steps++;
    rl_optim_zero(o);
    return st;
}

void rl_optim_free(rl_optim *o) {
    vc_adamw_free(&o->opt);
    free(o->grads);
    free(o->sizes);
    memset(o, 0, sizeof *o);
}

/* ---- shared mini-batch loop ---- */
typedef struct acc {
    double sum[16];
    int n;
} acc;

/* rows of a mini-batch: a seeded permutation when shuffling, else in order */
static void minibatch_order(int *order, int B, int shuffle, uint64_t seed, int64_t epoch) {
    for (int i = 0; i < B; i++) order[i] = i;
    if (shuffle) vc_shuffle_u32((uint32_t *)order, (size_t)B, seed, (uint64_t)epoch);
}

static double mask_sum_rows(const rl_batch *b, const int *rows, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < b->T; j++) s += b->mask[(size_t)rows[i] * b->T + j];
    return s;
}

static void copy_rows(const rl_batch *b, const float *src, const int *rows, int n, float *dst) {
    for (int i = 0; i < n; i++) memcpy(dst + (size_t)i * b->T, src + (size_t)rows[i] * b->T, sizeof(float) * b->T);
}

/* ---- actor ---- */
typedef struct mb_buf {
    float *logp, *ent, *old, *adv, *mask, *ref, *d, *dent, *kl, *dkl, *tmp;
} mb_buf;

static vc_status mb_buf_alloc(mb_buf *m, size_t n) {
    float **f[] = { &m->logp, &m->ent, &m->old, &m->adv, &m->mask, &m->ref, &m->d, &m->dent, &m->kl, &m->dkl, &m->tmp };
    int ok = 1;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) ok &= (*f[i] = vc_calloc(n ? n : 1, sizeof(float))) != NULL;
    return ok ? VC_OK : VC_ERR_NOMEM;
}

static void mb_buf_free(mb_buf *m) {
    float *f[] = { m->logp, m->ent, m->old, m->adv, m->mask, m->ref, m->d, m->dent, m->kl, m->dkl, m->tmp };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
}

enum { A_PG, A_ENT, A_KL, A_PPOKL, A_CLIP, A_CLIPLO, A_GN, A_LR, A_DIFF_SUM, A_DIFF_N, A_DIFF_MAX };

/* one micro-batch: forward with grad, losses, backward */
static vc_status actor_micro(vc_model *m, vc_graph *g, rl_batch *b, const rl_actor_cfg *c, int on_policy,
                             const int *rows, int n, const vc_agg_norm *norm, mb_buf *w, acc *a, int first_epoch) {
    vc_graph_reset(g);
    vc_graph_set_grad(g, 1);
    rl_mb mb;
    vc_status st = rl_mb_build(g, b, rows, n, &mb);
    if (st) return st;
    vc_tensor *h = vc_model_forward(m, g, &mb.batch, NULL), *lp = NULL, *ent = NULL;
    if (!h) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    if ((st = vc_model_logprobs(m, g, h, mb.tgt, &lp, &ent))) return st;
    size_t nt = (size_t)n * b->T;
    rl_mb_gather(b, &mb, lp->data, w->logp, 0);
    rl_mb_gather(b, &mb, ent->data, w->ent, 0);
    copy_rows(b, b->adv, rows, n, w->adv);
    copy_rows(b, b->mask, rows, n, w->mask);
    if (on_policy) memcpy(w->old, w->logp, sizeof(float) * nt);
    else copy_rows(b, b->old_logp, rows, n, w->old);
    if (on_policy && first_epoch) {
        copy_rows(b, b->rollout_logp, rows, n, w->tmp);
        for (size_t i = 0; i < nt; i++)
            if (w->mask[i] > 0) {
                double dlt = fabs(exp(w->logp[i]) - exp(w->tmp[i]));
                a->sum[A_DIFF_SUM] += dlt;
                a->sum[A_DIFF_N] += 1;
                if (dlt > a->sum[A_DIFF_MAX]) a->sum[A_DIFF_MAX] = dlt;
            }
    }
    vc_pg_config pg = c->pg;
    pg.norm = *norm;
    double pg_loss = 0, ent_loss = 0, kl_loss = 0;
    vc_pg_metrics pm;
    st = vc_policy_loss(c->mode, w->old, w->logp, w->adv, w->mask, n, b->T, &pg, NULL, &pg_loss, &pm, w->d);
    if (!st) st = vc_agg_loss(w->ent, w->mask, n, b->T, c->pg.agg, norm, &ent_loss, w->dent);
    if (st) return st;
    if (c->use_kl_loss) {
        copy_rows(b, b->ref_logp, rows, n, w->ref);
        vc_kl_penalty(c->kl_spec, w->logp, w->ref, nt, w->kl, w->dkl);
        if ((st = vc_agg_loss(w->kl, w->mask, n, b->T, c->pg.agg, norm, &kl_loss, w->tmp))) return st;
        for (size_t i = 0; i < nt; i++) w->d[i] += (float)(c->kl_coef * w->tmp[i] * w->dkl[i]);
    }
    for (size_t i = 0; i < nt; i++) w->dent[i] *= (float)-c->entropy_coeff;
    float *wl = rl_mb_scatter(g, b, &mb, w->d), *we = c->entropy_coeff ? rl_mb_scatter(g, b, &mb, w->dent) : NULL;
    vc_tensor *L = vc_op_dot_const(g, lp, wl);
    if (c->entropy_coeff) L = vc_op_add(g, L, vc_op_dot_const(g, ent, we));
    if (!L) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    if ((st = vc_graph_backward(g, L, 1.0f))) return st;
    a->sum[A_PG] += pg_loss;
    a->sum[A_ENT] += ent_loss;
    a->sum[A_KL] += kl_loss;
    a->sum[A_PPOKL] += pm.ppo_kl;
    a->sum[A_CLIP] += pm.pg_clipfrac;
    a->sum[A_CLIPLO] += pm.pg_clipfrac_lower;
    a->n++;
    return VC_OK;
}

vc_status rl_update_actor(vc_model *m, vc_graph *g, rl_optim *o, rl_batch *b, const rl_actor_cfg *c, int on_policy,
                          rl_metrics *met) {
    int B = b->B, mini = c->mini_rows > 0 && c->mini_rows < B ? c->mini_rows : B;
    int *order = vc_malloc(sizeof(int) * (size_t)B), *starts = vc_malloc(sizeof(int) * (size_t)(B + 1));
    mb_buf w = { 0 };
    vc_status st = order && starts ? mb_buf_alloc(&w, (size_t)B * b->T) : VC_ERR_NOMEM;
    acc a = { { 0 }, 0 };
    int n_steps = 0;
    for (int ep = 0; !st && ep < c->ppo_epochs; ep++) {
        minibatch_order(order, B, c->shuffle, c->seed, ep);
        for (int m0 = 0; !st && m0 < B; m0 += mini) {
            int nm = B - m0 < mini ? B - m0 : mini;
            const int *rows = order + m0;
            vc_agg_norm norm = { 1, mask_sum_rows(b, rows, nm), nm, 0 };
            int k = rl_split_rows(b, rows, nm, c->max_tokens, c->micro_rows, starts);
            for (int s = 0; !st && s < k; s++)
                st = actor_micro(m, g, b, c, on_policy, rows + starts[s], starts[s + 1] - starts[s], &norm, &w, &a, ep == 0);
            double gn = 0, lr = 0;
            int stepped;
            if (!st) st = rl_optim_step(o, &gn, &lr, &stepped);
            a.sum[A_GN] += gn;
            a.sum[A_LR] = lr;
            n_steps++;
        }
    }
    if (!st && a.n) {
        /* micro-batch losses are partial sums of the mini-batch loss: report per mini-batch means */
        double per = (double)n_steps;
        rl_metrics_set(met, "actor/pg_loss", a.sum[A_PG] / per);
        rl_metrics_set(met, "actor/entropy", a.sum[A_ENT] / per);
        if (c->use_kl_loss) rl_metrics_set(met, "actor/kl_loss", a.sum[A_KL] / per);
        rl_metrics_set(met, "actor/kl_coef", c->use_kl_loss ? c->kl_coef : 0);
        rl_metrics_set(met, "actor/ppo_kl", a.sum[A_PPOKL] / a.n);
        rl_metrics_set(met, "actor/pg_clipfrac", a.sum[A_CLIP] / a.n);
        rl_metrics_set(met, "actor/pg_clipfrac_lower", a.sum[A_CLIPLO] / a.n);
        rl_metrics_set(met, "actor/grad_norm", a.sum[A_GN] / per);
        rl_metrics_set(met, "actor/lr", a.sum[A_LR]);
        if (on_policy && a.sum[A_DIFF_N] > 0) {
            rl_metrics_set(met, "training/rollout_probs_diff_mean", a.sum[A_DIFF_SUM] / a.sum[A_DIFF_N]);
            rl_metrics_set(met, "training/rollout_probs_diff_max", a.sum[A_DIFF_MAX]);
        }
    }
    free(order);
    free(starts);
    mb_buf_free(&w);
    return st;
}

/* ---- critic ---- */
static vc_status critic_micro(rl_critic *cr, vc_graph *g, rl_batch *b, const rl_critic_cfg *c, const int *rows, int n,
                              const vc_agg_norm *norm, mb_buf *w, acc *a) {
    vc_graph_reset(g);
    vc_graph_set_grad(g, 1);
    rl_mb mb;
    vc_status st = rl_mb_build(g, b, rows, n, &mb);
    if (st) return st;
    vc_tensor *v = rl_critic_forward(cr, g, &mb);
    if (!v) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    rl_mb_gather(b, &mb, v->data, w->logp, 0);
    copy_rows(b, b->ret, rows, n, w->adv);
    copy_rows(b, b->values, rows, n, w->old);
    copy_rows(b, b->mask, rows, n, w->mask);
    double vf = 0, clipfrac = 0;
    st = vc_value_loss(w->logp, w->adv, w->old, w->mask, n, b->T, (float)c->cliprange_value, c->agg, norm, &vf,
                       &clipfrac, w->d);
    if (st) return st;
    float *wv = rl_mb_scatter(g, b, &mb, w->d);
    vc_tensor *L = vc_op_dot_const(g, v, wv);
    if (!L) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    if ((st = vc_graph_backward(g, L, 1.0f))) return st;
    a->sum[0] += vf;
    a->sum[1] += clipfrac;
    a->sum[2] += vc_masked_mean(w->logp, w->mask, (size_t)n * b->T);
    a->n++;
    return VC_OK;
}

vc_status rl_update_critic(rl_critic *cr, vc_graph *g, rl_optim *o, rl_batch *b, const rl_critic_cfg *c,
                           rl_metrics *met) {
    int B = b->B, mini = c->mini_rows > 0 && c->mini_rows < B ? c->mini_rows : B;
    int *order = vc_malloc(sizeof(int) * (size_t)B), *starts = vc_malloc(sizeof(int) * (size_t)(B + 1));
    mb_buf w = { 0 };
    vc_status st = order && starts ? mb_buf_alloc(&w, (size_t)B * b->T) : VC_ERR_NOMEM;
    acc a = { { 0 }, 0 };
    double gn_sum = 0, lr = 0;
    int n_steps = 0;
    for (int ep = 0; !st && ep < c->ppo_epochs; ep++) {
        minibatch_order(order, B, c->shuffle, c->seed, ep);
        for (int m0 = 0; !st && m0 < B; m0 += mini) {
            int nm = B - m0 < mini ? B - m0 : mini;
            const int *rows = order + m0;
            vc_agg_norm norm = { 1, mask_sum_rows(b, rows, nm), nm, 0 };
            int k = rl_split_rows(b, rows, nm, c->max_tokens, c->micro_rows, starts);
            for (int s = 0; !st && s < k; s++)
                st = critic_micro(cr, g, b, c, rows + starts[s], starts[s + 1] - starts[s], &norm, &w, &a);
            double gn = 0;
            int stepped;
            if (!st) st = rl_optim_step(o, &gn, &lr, &stepped);
            gn_sum += gn;
            n_steps++;
        }
    }
    if (!st && a.n) {
        rl_metrics_set(met, "critic/vf_loss", a.sum[0] / n_steps);
        rl_metrics_set(met, "critic/vf_clipfrac", a.sum[1] / a.n);
        rl_metrics_set(met, "critic/vpred_mean", a.sum[2] / a.n);
        rl_metrics_set(met, "critic/grad_norm", gn_sum / n_steps);
        rl_metrics_set(met, "critic/lr", lr);
    }
    free(order);
    free(starts);
    mb_buf_free(&w);
    return st;
}
