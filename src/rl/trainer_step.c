/* One training step (the body of verl's RayPPOTrainer.fit loop): generate -> reward -> old / ref
 * log-probs -> values -> KL in reward -> advantages -> critic update -> actor update -> metrics. */
#include "trainer_internal.h"
#include "verlc/perf.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static vc_status dp_whiten(vc_rl_trainer *t, const rl_batch *b, const float *x, float *out);

/* GDPO: the weighted sum of per-component GRPO advantages, whitened over this rank's rows (global: over
 * the global batch) */
static vc_status gdpo(vc_rl_trainer *t, rl_batch *b, int global) {
    int K = t->n_gdpo, B = b->B;
    size_t n = (size_t)B * b->T;
    float *s = vc_malloc(sizeof(float) * (size_t)K * (B ? B : 1));
    const float *rows[RL_MAX_GDPO];
    vc_status st = s ? rl_gdpo_scores(t, t->train, b, s) : VC_ERR_NOMEM;
    for (int k = 0; k < K; k++) rows[k] = s + (size_t)k * B;
    const char *const *uid = (const char *const *)b->uid;
    if (!st && !global)
        st = vc_adv_gdpo(rows, t->gdpo_w, K, b->mask, uid, B, b->T, t->norm_adv, 1e-6f, b->adv, b->ret);
    else if (!st) {
        st = vc_adv_gdpo_sum(rows, t->gdpo_w, K, b->mask, uid, B, b->T, t->norm_adv, 1e-6f, b->adv);
        if (!st) st = dp_whiten(t, b, b->adv, b->adv);
        for (size_t q = 0; !st && q < n; q++) b->ret[q] = b->adv[q] *= b->mask[q];
    }
    free(s);
    return st;
}

static vc_status local_advantages(vc_rl_trainer *t, rl_batch *b, const float *baselines) {
    const char *a = t->adv;
    int B = b->B, T = b->T;
    const char *const *uid = (const char *const *)b->uid;
    if (!strcmp(a, "gae")) return vc_adv_gae(b->rewards, b->values, b->mask, B, T, (float)t->gamma, (float)t->lam, b->adv, b->ret);
    if (!strcmp(a, "grpo")) return vc_adv_grpo(b->rewards, b->mask, uid, B, T, t->norm_adv, 1e-6f, b->adv, b->ret);
    if (!strcmp(a, "rloo")) return vc_adv_rloo(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "rloo_vectorized")) return vc_adv_rloo_vectorized(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "grpo_vectorized"))
        return vc_adv_grpo_vectorized(b->rewards, b->mask, uid, B, T, t->norm_adv, 1e-6f, b->adv, b->ret);
    if (!strcmp(a, "grpo_passk")) return vc_adv_grpo_passk(b->rewards, b->mask, uid, B, T, t->norm_adv, 1e-6f, b->adv, b->ret);
    if (!strcmp(a, "opo")) return vc_adv_opo(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "gpg")) return vc_adv_gpg(b->rewards, b->mask, uid, B, T, 1.0f, b->adv, b->ret);
    if (!strcmp(a, "reinforce_plus_plus")) return vc_adv_reinforce_pp(b->rewards, b->mask, B, T, (float)t->gamma, b->adv, b->ret);
    if (!strcmp(a, "reinforce_plus_plus_baseline"))
        return vc_adv_reinforce_pp_baseline(b->rewards, b->mask, uid, B, T, b->adv, b->ret);
    if (!strcmp(a, "remax")) return vc_adv_remax(b->rewards, baselines, b->mask, B, T, b->adv, b->ret);
    if (strstr(a, "optimal_token_baseline")) { /* verl passes the rollout IS weights when the batch has them */
        int tir = !strcmp(a, "tir_optimal_token_baseline");
        return vc_adv_optimal_token_baseline(b->rewards, b->mask, uid, b->old_logp, b->sum_pi_sq,
                                             t->acfg.use_is ? b->is_w : NULL, B, T, tir, tir, b->adv, b->ret);
    }
    if (!strcmp(a, "gdpo")) return gdpo(t, b, 0);
    return vc_fail(VC_ERR_ARG, "algorithm.adv_estimator: unknown `%s`", a);
}

/* verl's masked_whiten over the global batch (mean, unbiased variance summed over ranks): x -> out */
static vc_status dp_whiten(vc_rl_trainer *t, const rl_batch *b, const float *x, float *out) {
    size_t n = (size_t)b->B * b->T;
    double v[2] = { 0, 0 }, s = 0;
    for (size_t k = 0; k < n; k++) v[0] += (double)x[k] * b->mask[k], v[1] += b->mask[k];
    vc_status st = rl_dist_reduce(t, v, 2, VC_SUM);
    if (st) return st;
    double m = v[1], mean = v[0] / (m + 1e-8);
    if (m <= 1.0) return vc_fail(VC_ERR_ARG, "masked_whiten: the global batch has %g response tokens", m);
    for (size_t k = 0; k < n; k++)
        if (b->mask[k] != 0.0f) s += ((double)x[k] - mean) * ((double)x[k] - mean) * b->mask[k];
    if ((st = rl_dist_reduce(t, &s, 1, VC_SUM))) return st;
    double var = s / (m + 1e-8) * (m / (m - 1.0)), r = 1.0 / sqrt(var + 1e-8);
    for (size_t k = 0; k < n; k++) out[k] = (float)(((double)x[k] - mean) * r);
    return VC_OK;
}

/* Estimators with batch-wide statistics, redone over the global batch when data parallel: GAE and
 * REINFORCE++ (with baseline) whiten over the batch; GPG scales by B / (rows with a reward). The
 * others are per row or per group (groups are whole on one rank). */
static vc_status dp_advantages(vc_rl_trainer *t, rl_batch *b) {
    const char *a = t->adv;
    size_t n = (size_t)b->B * b->T;
    vc_status st = VC_OK;
    if (!strcmp(a, "gae")) {
        for (size_t k = 0; k < n; k++) b->adv[k] = b->ret[k] - b->values[k]; /* returns = A + V */
        return dp_whiten(t, b, b->adv, b->adv);
    }
    if (!strcmp(a, "reinforce_plus_plus")) {
        st = dp_whiten(t, b, b->ret, b->adv);
        for (size_t k = 0; !st && k < n; k++) b->adv[k] *= b->mask[k];
        return st;
    }
    if (!strcmp(a, "reinforce_plus_plus_baseline")) {
        /* the raw (s_i - group mean) * mask is GRPO's unnormalised advantage */
        const char *const *uid = (const char *const *)b->uid;
        st = vc_adv_grpo(b->rewards, b->mask, uid, b->B, b->T, 0, 1e-6f, b->adv, b->ret);
        if (!st) st = dp_whiten(t, b, b->adv, b->adv);
        for (size_t k = 0; !st && k < n; k++) b->ret[k] = b->adv[k] *= b->mask[k];
        return st;
    }
    if (!strcmp(a, "gdpo")) return gdpo(t, b, 1);
    if (!strcmp(a, "gpg")) {
        double c[2] = { b->B, 0 };
        for (int i = 0; i < b->B; i++) {
            double s = 0;
            for (int j = 0; j < b->T; j++) s += b->rewards[(size_t)i * b->T + j];
            c[1] += (float)s != 0.0f;
        }
        double local = (double)(float)(c[0] / (c[1] > 0 ? c[1] : 1));
        if ((st = rl_dist_reduce(t, c, 2, VC_SUM))) return st;
        double global = (double)(float)(c[0] / (c[1] > 0 ? c[1] : 1));
        for (size_t k = 0; k < n; k++) b->adv[k] = b->ret[k] = (float)(b->adv[k] / local * global);
    }
    return st;
}

vc_status rl_compute_advantages(vc_rl_trainer *t, rl_batch *b, const float *baselines) {
    vc_status st = local_advantages(t, b, baselines);
    /* a rank's own part may be too small to whiten alone: the global statistics decide */
    if (t->world > 1 && st == VC_ERR_ARG && strstr(vc_last_error(), "masked_var")) st = VC_OK;
    if (!st && t->world > 1) st = dp_advantages(t, b);
    return st;
}

/* verl's compute_data_metrics over the rows of every rank: sequence scores/rewards (of the rows with a
 * response: verl leaves aborted, empty ones out), token advantages/returns/values, lengths, the value
 * function's explained variance. Sums and counts are reduced in rank order, extremes by max/min. */
enum { S_SCORE, S_REW, S_ADV, S_RET, S_VAL, S_RLEN, S_PLEN, S_RLEN_NA, NS };
enum { X_RCLIP, X_PCLIP, X_NACLIP, X_ABORT, X_D, X_D2, X_R, X_R2, NX }; /* counts and explained-variance sums */

typedef struct mstat {
    double s[2 * NS + NX]; /* sum, count per stat; then the X_ sums */
    double mx[NS], mn[NS];
} mstat;

static void add(mstat *m, int k, double v) {
    m->s[2 * k] += v;
    m->s[2 * k + 1] += 1;
    m->mx[k] = fmax(m->mx[k], v);
    m->mn[k] = fmin(m->mn[k], v);
}

/* a row's tokens summed (sequence stats, of rows with a response), or each masked token */
static void seq_acc(mstat *m, int k, const rl_batch *b, const float *tok, int per_token) {
    for (int i = 0; i < b->B; i++) {
        double row = 0;
        for (int j = 0; j < b->T; j++) {
            size_t q = (size_t)i * b->T + j;
            if (!per_token) row += tok[q];
            else if (b->mask[q] > 0) add(m, k, tok[q]);
        }
        if (!per_token && b->rlen[i] > 0) add(m, k, row);
    }
}

static void stat_set(rl_metrics *met, const mstat *m, int k, const char *name) {
    double n = m->s[2 * k + 1];
    rl_metrics_setf(met, n > 0 ? m->s[2 * k] / n : 0, "%s/mean", name);
    rl_metrics_setf(met, n > 0 ? m->mx[k] : 0, "%s/max", name);
    rl_metrics_setf(met, n > 0 ? m->mn[k] : 0, "%s/min", name);
}

static void lengths(vc_rl_trainer *t, const rl_batch *b, mstat *m) {
    double *x = m->s + 2 * NS;
    for (int i = 0; i < b->B; i++) {
        add(m, S_RLEN, (double)b->rlen[i]);
        add(m, S_PLEN, (double)b->plen[i]);
        x[X_RCLIP] += b->rlen[i] >= t->max_resp;
        x[X_PCLIP] += t->max_prompt > 0 && b->plen[i] >= t->max_prompt;
        x[X_ABORT] += b->rlen[i] == 0;
        if (b->rlen[i] > 0) add(m, S_RLEN_NA, (double)b->rlen[i]), x[X_NACLIP] += b->rlen[i] >= t->max_resp;
    }
    for (size_t q = 0; b->have_values && q < (size_t)b->B * b->T; q++)
        if (b->mask[q] > 0) {
            double d = (double)b->ret[q] - b->values[q], r = b->ret[q];
            x[X_D] += d, x[X_D2] += d * d, x[X_R] += r, x[X_R2] += r * r;
        }
}

/* torch.var (unbiased) of n values from their sum and sum of squares */
static double var_of(double s, double s2, double n) { return n > 1 ? (s2 - s * s / n) / (n - 1) : NAN; }

vc_status rl_data_metrics(vc_rl_trainer *t, const rl_batch *b, rl_metrics *met) {
    mstat m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < NS; k++) m.mx[k] = -INFINITY, m.mn[k] = INFINITY;
    seq_acc(&m, S_SCORE, b, b->token_scores, 0);
    seq_acc(&m, S_REW, b, b->rewards, 0);
    seq_acc(&m, S_ADV, b, b->adv, 1);
    seq_acc(&m, S_RET, b, b->ret, 1);
    if (b->have_values) seq_acc(&m, S_VAL, b, b->values, 1);
    lengths(t, b, &m);
    vc_status st = rl_dist_reduce(t, m.s, 2 * NS + NX, VC_SUM);
    if (!st) st = rl_dist_reduce(t, m.mx, NS, VC_MAX);
    if (!st) st = rl_dist_reduce(t, m.mn, NS, VC_MIN);
    if (st) return st;
    const double *x = m.s + 2 * NS, nr = m.s[2 * S_RLEN + 1], nna = m.s[2 * S_RLEN_NA + 1];
    stat_set(met, &m, S_SCORE, "critic/score");
    stat_set(met, &m, S_REW, "critic/rewards");
    stat_set(met, &m, S_ADV, "critic/advantages");
    stat_set(met, &m, S_RET, "critic/returns");
    if (b->have_values) {
        double n = m.s[2 * S_VAL + 1];
        stat_set(met, &m, S_VAL, "critic/values");
        rl_metrics_set(met, "critic/vf_explained_var", 1.0 - var_of(x[X_D], x[X_D2], n) / (var_of(x[X_R], x[X_R2], n) + 1e-5));
    }
    stat_set(met, &m, S_RLEN, "response_length");
    rl_metrics_set(met, "response_length/clip_ratio", nr > 0 ? x[X_RCLIP] / nr : 0);
    stat_set(met, &m, S_RLEN_NA, "response_length_non_aborted");
    rl_metrics_set(met, "response_length_non_aborted/clip_ratio", nna > 0 ? x[X_NACLIP] / nna : 0);
    rl_metrics_set(met, "response/aborted_ratio", nr > 0 ? x[X_ABORT] / nr : 0);
    stat_set(met, &m, S_PLEN, "prompt_length");
    rl_metrics_set(met, "prompt_length/clip_ratio", nr > 0 ? x[X_PCLIP] / nr : 0);
    return VC_OK;
}

/* ReMax: the greedy response's score is each prompt's baseline */
static vc_status remax_baselines(vc_rl_trainer *t, const uint32_t *idx, int n, rl_batch *b, float **out) {
    rl_batch g;
    vc_sampling s = t->samp;
    s.greedy = 1;
    vc_status st = rl_rollout_batch(t, t->train, idx, n, &s, 1, (uint64_t)t->step, &g);
    if (!st) st = rl_score_batch(t, t->train, &g, NULL, NULL);
    float *bl = st ? NULL : vc_calloc((size_t)b->B, sizeof(float));
    if (!st && !bl) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++)
        for (int k = 0; k < n; k++)
            if ((int)idx[k] == b->prompt[i]) bl[i] = g.score[k];
    if (!st) rl_batch_free(&g);
    *out = bl;
    return st;
}

static vc_status probs_diff(vc_rl_trainer *t, const rl_batch *b, const float *lp, rl_metrics *met) {
    double v[2] = { 0, 0 }, mx = 0;
    for (size_t k = 0; k < (size_t)b->B * b->T; k++)
        if (b->mask[k] > 0) {
            double d = fabs(exp(lp[k]) - exp(b->rollout_logp[k]));
            v[0] += d, v[1] += 1, mx = fmax(mx, d);
        }
    vc_status st = rl_dist_reduce(t, v, 2, VC_SUM);
    if (!st) st = rl_dist_reduce(t, &mx, 1, VC_MAX);
    rl_metrics_set(met, "training/rollout_probs_diff_mean", v[1] > 0 ? v[0] / v[1] : 0);
    rl_metrics_set(met, "training/rollout_probs_diff_max", mx);
    return st;
}

/* verl's timing_per_token_ms/<stage>: the stage's seconds per token of the global batch, in ms (response
 * tokens for gen, prompt + response tokens for the others) */
static vc_status per_token_timing(vc_rl_trainer *t, const rl_batch *b, rl_metrics *met) {
    double n[2] = { 0, 0 };
    for (int i = 0; i < b->B; i++) n[0] += (double)b->rlen[i], n[1] += (double)(b->plen[i] + b->rlen[i]);
    vc_status st = rl_dist_reduce(t, n, 2, VC_SUM);
    static const char *const STAGE[] = { "gen", "ref", "values", "adv", "update_critic", "update_actor" };
    for (int k = 0; !st && k < 6; k++) {
        double s = 0, tok = k ? n[1] : n[0];
        char name[64];
        snprintf(name, sizeof name, "timing_s/%s", STAGE[k]);
        if (rl_metrics_get(met, name, &s) && tok > 0) rl_metrics_setf(met, s * 1000.0 / tok, "timing_per_token_ms/%s", STAGE[k]);
    }
    return st;
}

/* verl's variance_proxy/... metrics (with sum_pi_squared in the batch): the signal strength is the actor's
 * gradient norm squared, 0 before the actor trains */
static vc_status variance_proxy(vc_rl_trainer *t, const rl_batch *b, rl_metrics *met) {
    double v[4] = { 0, 0, 0, b->B }, gn = 0;
    vc_variance_proxy_sums(b->adv, b->mask, b->old_logp, b->sum_pi_sq, t->acfg.use_is ? b->is_w : NULL, b->B, b->T, v);
    vc_status st = rl_dist_reduce(t, v, 4, VC_SUM);
    if (st || v[3] < 1) return st;
    int trained = rl_metrics_get(met, "actor/grad_norm", &gn);
    double p1 = trained ? gn * gn : 0, p2 = v[0] / v[3];
    rl_metrics_set(met, "variance_proxy/proxy1_signal_strength", p1);
    rl_metrics_set(met, "variance_proxy/proxy2_total_power", p2);
    rl_metrics_set(met, "variance_proxy/proxy3_pure_noise", trained && v[3] > 1 ? fmax(0.0, (p2 - p1) / (v[3] - 1)) : 0);
    rl_metrics_set(met, "variance_proxy/expected_a_squared", v[1] / v[3]);
    rl_metrics_set(met, "variance_proxy/expected_w", v[2] / v[3]);
    return VC_OK;
}

/* this rank's block of the step's prompts; the global batch's rows, offset and longest response */
static vc_status dp_layout(vc_rl_trainer *t, const rl_batch *b, int n_prompts, int lo, rl_dp *dp) {
    double T = b->T;
    vc_status st = rl_dist_reduce(t, &T, 1, VC_MAX);
    *dp = (rl_dp){ t->comm, t->world > 1 ? t->world : 1, lo * t->n, n_prompts * t->n, (int)T };
    return st;
}

/* the layout of a batch whose rows per rank vary (dynamic sampling): rank r's rows follow ranks < r */
static vc_status dp_layout_rows(vc_rl_trainer *t, const rl_batch *b, rl_dp *dp) {
    int W = t->world > 1 ? t->world : 1, me = t->world > 1 ? t->rank : 0;
    double *v = vc_calloc((size_t)W + 1, sizeof(double)), T = b->T;
    if (!v) return VC_ERR_NOMEM;
    v[me] = b->B;
    vc_status st = rl_dist_reduce(t, v, W, VC_SUM);
    if (!st) st = rl_dist_reduce(t, &T, 1, VC_MAX);
    int off = 0, tot = 0;
    for (int r = 0; r < W; r++) {
        if (r < me) off += (int)v[r];
        tot += (int)v[r];
    }
    *dp = (rl_dp){ t->comm, W, off, tot, (int)T };
    free(v);
    return st;
}

/* a metric set by this rank's part of the work, summed over the ranks */
static vc_status sum_metric(vc_rl_trainer *t, rl_metrics *met, const char *name) {
    double v = 0;
    rl_metrics_get(met, name, &v);
    vc_status st = rl_dist_reduce(t, &v, 1, VC_SUM);
    if (!st) rl_metrics_set(met, name, v);
    return st;
}

/* speculative decoding: the step's drafts (every rank's, counted since the step's generation began) and the share kept
 * (vLLM's draft acceptance rate) */
static vc_status spec_metrics(vc_rl_trainer *t, rl_metrics *met) {
    double v[2] = { (double)t->drafts, (double)t->drafts_kept };
    vc_status st = rl_dist_reduce(t, v, 2, VC_SUM);
    if (st) return st;
    rl_metrics_set(met, "rollout/drafts", v[0]);
    rl_metrics_set(met, "rollout/draft_acceptance_rate", v[0] > 0 ? v[1] / v[0] : 0);
    return VC_OK;
}

static double tokens_of(const rl_batch *b) { return (double)b->cu[b->B]; }

/* verl's MFU of a pass over this rank's rows of b that took dt seconds: its FlopsCounter's figure for m
 * (vc_perf_verl_flops; head_rows: its output head's, 0 the model's own) times mult (the epochs; a third for a
 * forward pass) over the promised peak */
static double mfu_of(const vc_rl_trainer *t, const vc_model *m, int64_t head_rows, const rl_batch *b, double mult,
                     double dt) {
    return dt > 0 ? vc_perf_verl_flops(m, head_rows, b->cu, b->B) * mult / dt / t->peak_flops : 0;
}

/* the distillation teachers' log-probs of the response tokens (temperature 1, as verl's teacher servers
 * return prompt_logprobs): one teacher serves every row, or each row the teacher of its data source */
static vc_status teacher_logprobs(vc_rl_trainer *t, rl_batch *b, int share) {
    int K = t->acfg.dist.topk; /* forward_kl_topk: the teachers' top-k tokens of every position */
    vc_status st0 = K ? rl_batch_topk_alloc(b, K) : VC_OK;
    if (st0) return st0;
    if (t->n_teacher == 1 && !*t->teacher_key[0])
        return K ? rl_batch_teacher_topk(t->teacher[0], t->g, b, NULL, b->B, t->ref_tokens)
                 : rl_batch_logprobs_ex(t->teacher[0], t->g, b, t->ref_tokens, 1.0f, share, b->teacher_logp, NULL, NULL);
    int *who = vc_malloc(sizeof(int) * (size_t)(b->B ? b->B : 1)), *rows = vc_malloc(sizeof(int) * (size_t)(b->B + 1));
    vc_status st = who && rows ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++) {
        const char *ds = t->train->p[b->prompt[i]].data_source;
        who[i] = -1;
        for (int k = 0; k < t->n_teacher; k++)
            if (ds && !strcmp(ds, t->teacher_key[k])) who[i] = k;
        if (who[i] < 0)
            st = vc_fail(VC_ERR_ARG, "distillation: row %d's data_source '%s' has no teacher (each of "
                         "distillation.teacher_models names the one it serves in its key)", i, ds ? ds : "");
    }
    for (int k = 0; !st && k < t->n_teacher; k++) { /* each teacher over its rows */
        int n = 0;
        for (int i = 0; i < b->B; i++)
            if (who[i] == k) rows[n++] = i;
        if (n && K) st = rl_batch_teacher_topk(t->teacher[k], t->g, b, rows, n, t->ref_tokens);
        else if (n) st = rl_batch_logprobs_of(t->teacher[k], t->g, b, rows, n, t->ref_tokens, 1.0f, share, b->teacher_logp);
    }
    free(who);
    free(rows);
    return st ? vc_fail_ctx(st, "distillation teachers") : VC_OK;
}

/* DAPO: generation batches until enough groups with varied rewards; *made: b holds a batch */
static vc_status dapo_batch(vc_rl_trainer *t, rl_metrics *met, rl_batch *b, rl_dp *dp, int *made) {
    int rounds = 0;
    double t0 = vc_now();
    t->drafts = t->drafts_kept = 0; /* (not validation's) */
    vc_status st = rl_dynamic_rollout(t, met, b, &rounds);
    if (st) return st;
    *made = 1;
    rl_metrics_set(met, "timing_s/gen", vc_now() - t0);
    if (t->spec && (st = spec_metrics(t, met))) return st;
    st = dp_layout_rows(t, b, dp);
    if (!st) st = sum_metric(t, met, "reward/failed_rows");
    return st;
}

/* the next prompts rolled out and scored (remax: with its greedy baselines); *made: b holds a batch */
static vc_status rollout_batch(vc_rl_trainer *t, rl_metrics *met, rl_batch *b, rl_dp *dp, float **baselines,
                               int *made) {
    const uint32_t *idx = NULL;
    size_t n = vc_epoch_iter_next(&t->it, &idx);
    /* data parallel: rank r rolls out the contiguous block r of the prompts (all n samples of each, so
     * group statistics stay local); sampling is keyed by the global prompt index */
    if (t->world > 1 && (int)n < t->world)
        return vc_fail(VC_ERR_ARG, "step %lld: %zu prompts cannot be divided over %d ranks (data.train_batch_size)",
                       (long long)t->step, n, t->world);
    int lo = 0, hi = (int)n;
    rl_dist_block(t, (int)n, &lo, &hi);
    double t0 = vc_now();
    t->drafts = t->drafts_kept = 0; /* (not validation's) */
    vc_status st = rl_rollout_or_skip(t, idx + lo, hi - lo, (uint64_t)t->step, 0, b);
    if (st) return vc_fail_ctx(st, "step %lld: rollout", (long long)t->step);
    rl_metrics_set(met, "timing_s/gen", vc_now() - t0);
    *made = 1; /* (so the batch is freed whatever fails from here) */
    if (t->spec && (st = spec_metrics(t, met))) return st;
    if (t->agent && (st = rl_agent_metrics(t, met))) return st;
    t0 = vc_now();
    st = dp_layout(t, b, (int)n, lo, dp);
    if (!st) st = rl_score_batch(t, t->train, b, met, NULL);
    if (!st) st = sum_metric(t, met, "reward/failed_rows");
    if (!st && !strcmp(t->adv, "remax")) st = remax_baselines(t, idx + lo, hi - lo, b, baselines);
    rl_metrics_set(met, "timing_s/reward", vc_now() - t0);
    return st;
}

/* verl's actor/entropy from its old-log-prob pass: agg_loss of the entropies over the whole (global) batch by
 * loss_agg_mode, seq-mean-token-sum-norm by actor.loss_scale_factor or the padded response length */
static vc_status old_entropy(vc_rl_trainer *t, const rl_batch *b, const float *ent) {
    const rl_actor_cfg *a = &t->acfg;
    double v[2], width = a->scale_len > 0 ? a->scale_len : (double)a->resp_width;
    int adds;
    vc_agg_parts(ent, b->mask, b->B, b->T, a->pg.agg, width, &v[0], &v[1], &adds);
    vc_status st = rl_dist_reduce(t, v, adds ? 2 : 1, VC_SUM);
    t->old_entropy = !st && v[1] != 0 ? v[0] / v[1] : 0;
    return st;
}

/* the old policy's log-probs: the rollout's in bypass mode, else recomputed unless on policy (or for sum_pi_sq) */
static vc_status old_logprobs(vc_rl_trainer *t, rl_batch *b, int on_policy, rl_metrics *met) {
    vc_status st = VC_OK;
    t->old_entropy = NAN;
    /* log-probs of the logits divided by the rollout temperature, as verl's actor computes them */
    float temp = t->samp.temperature;
    int pg = t->acfg.prefix_share; /* verl's use_prefix_grouper: each group's prompt computed once */
    float *sq = t->calc_sum_pi_sq ? b->sum_pi_sq : NULL; /* verl's actor.calculate_sum_pi_squared */
    if (t->acfg.rc.bypass) { /* bypass mode: the rollout's log-probs are the old policy's, no recomputation */
        memcpy(b->old_logp, b->rollout_logp, sizeof(float) * (size_t)b->B * b->T);
        b->have_old = 1;
        if (sq) st = rl_batch_logprobs_ex(t->actor, t->g, b, t->fwd_tokens, temp, pg, NULL, NULL, sq);
    } else if (!on_policy || sq) {
        double t0 = vc_now();
        const vc_model_config *mc = vc_model_cfg(t->actor);
        /* router replay (R2 / R3): this pass records the experts the update then routes to; on policy (one
         * mini-batch, one epoch) the update's routing is this one anyway */
        if (t->router_replay && !on_policy && mc->n_expert > 0 &&
            !(st = rl_batch_route_alloc(b, mc->n_layer * mc->top_k)))
            b->route_rec = 1;
        float *ent = st ? NULL : vc_calloc((size_t)b->B * b->T, sizeof(float));
        if (!st && !ent) st = VC_ERR_NOMEM;
        if (!st) st = rl_batch_logprobs_ex(t->actor, t->g, b, t->fwd_tokens, temp, pg, b->old_logp, ent, sq);
        if (!st) st = old_entropy(t, b, ent);
        free(ent);
        b->route_rec = 0;
        b->have_old = !st;
        if (!st) st = probs_diff(t, b, b->old_logp, met);
        double dt = vc_now() - t0;
        rl_metrics_set(met, "timing_s/old_log_prob", dt);
        rl_metrics_set(met, "perf/mfu/actor_infer", mfu_of(t, t->actor, 0, b, 1.0 / 3.0, dt));
    }
    return st;
}

/* the reference policy's and the distillation teachers' log-probs, and the critic's values */
static vc_status ref_passes(vc_rl_trainer *t, rl_batch *b, rl_metrics *met) {
    vc_status st = VC_OK;
    float temp = t->samp.temperature; /* as old_logprobs' */
    int pg = t->acfg.prefix_share;
    double t0;
    if (t->need_ref) {
        t0 = vc_now();
        /* under LoRA without a named reference model: the actor with its adapters off is the base model */
        int was = t->ref ? 0 : vc_model_lora_enable(t->actor, 0);
        st = rl_batch_logprobs_ex(t->ref ? t->ref : t->actor, t->g, b, t->ref_tokens, temp, pg, b->ref_logp, NULL,
                                  NULL);
        if (!t->ref) vc_model_lora_enable(t->actor, was);
        b->have_ref = !st;
        rl_metrics_set(met, "timing_s/ref", vc_now() - t0);
    }
    if (!st && t->n_teacher) st = teacher_logprobs(t, b, pg);
    if (!st && t->use_critic) {
        t0 = vc_now();
        st = rl_critic_values(&t->critic, t->g, b, t->critic_tokens, b->values);
        b->have_values = !st;
        rl_metrics_set(met, "timing_s/values", vc_now() - t0);
    }
    return st;
}

/* use_kl_in_reward: the rewards are the scores less the KL penalty against the reference */
static vc_status kl_rewards(vc_rl_trainer *t, rl_batch *b, rl_metrics *met) {
    double kl = 0, beta = 0;
    vc_kl_ctrl before = t->kl_ctrl;
    vc_status st = vc_apply_kl_penalty(b->token_scores, b->old_logp, b->ref_logp, b->mask, b->B, b->T,
                                       t->kl_reward_spec, &t->kl_ctrl, b->rewards, &kl, &beta);
    if (!st && t->world > 1) {
        /* the global batch's mean over rows, and the controller updated with it as on one rank */
        double v[2] = { kl * b->B, b->B };
        st = rl_dist_reduce(t, v, 2, VC_SUM);
        kl = v[1] > 0 ? v[0] / v[1] : 0;
        t->kl_ctrl = before;
        vc_kl_ctrl_update(&t->kl_ctrl, kl, v[1]);
    }
    rl_metrics_set(met, "actor/reward_kl_penalty", kl);
    rl_metrics_set(met, "actor/reward_kl_penalty_coeff", beta);
    return st;
}

/* the rewards, then the rollout correction's weights and the advantages (corr: decoupled rollout correction) */
static vc_status advantages(vc_rl_trainer *t, rl_batch *b, rl_dp *dp, const float *baselines, int corr,
                            rl_metrics *met) {
    const rl_rc_cfg *rc = &t->acfg.rc;
    vc_status st = VC_OK;
    if (t->use_kl_in_reward) st = kl_rewards(t, b, met);
    else memcpy(b->rewards, b->token_scores, sizeof(float) * (size_t)b->B * b->T);
    /* verl's order: weights and rejection after the KL penalty, before the advantages */
    if (!st && !rc->bypass && b->have_old && (corr || rc->offpolicy)) st = rl_rollout_correction(t, b, met);
    if (!st) st = rl_compute_advantages(t, b, baselines);
    if (!st && t->pf_method[0]) st = rl_pf_ppo(t, b, dp);
    return st;
}

/* verl's memory figures with the actor update (vc_mem_metrics) */
static void memory_metrics(rl_metrics *met) {
    double a, r, c;
    vc_mem_metrics(&a, &r, &c);
    if (isfinite(a)) rl_metrics_set(met, "perf/max_memory_allocated_gb", a);
    if (isfinite(r)) rl_metrics_set(met, "perf/max_memory_reserved_gb", r);
    rl_metrics_set(met, "perf/cpu_memory_used_gb", c);
}

/* the updates: the batch balanced over the ranks, the critic, then the actor once past critic_warmup */
/* actor/entropy as verl reports it: its old-log-prob pass's (on policy, where verlc runs none, the update's at the
 * same weights) unless its legacy workers computed the update's (rl_legacy_update_entropy); the engine workers'
 * update reports actor/entropy_loss where entropy_coeff asks for it */
static void entropy_metrics(vc_rl_trainer *t, rl_metrics *met) {
    const rl_actor_cfg *a = &t->acfg;
    double upd;
    if (!rl_metrics_get(met, "actor/entropy", &upd)) return;
    if (!a->legacy && a->entropy_coeff != 0) rl_metrics_set(met, "actor/entropy_loss", upd);
    if (!isnan(t->old_entropy) && !rl_legacy_update_entropy(a)) rl_metrics_set(met, "actor/entropy", t->old_entropy);
}

static vc_status update(vc_rl_trainer *t, rl_batch *b, rl_dp *dp, int on_policy, rl_metrics *met) {
    vc_status st = VC_OK;
    double t0;
    if (t->balance_batch) st = rl_balance_batch(t, b, dp, met);
    /* the LR schedules' positions: verl steps each scheduler once per update call, after all its mini-batches and
     * epochs: the critic's every step, the actor's from critic_warmup on */
    t->ctr.sched_pos = t->step - 1;
    t->atr.sched_pos = t->step - (t->critic_warmup > 1 ? t->critic_warmup : 1);
    if (!st && t->use_critic) {
        t0 = vc_now();
        st = rl_update_critic_dp(&t->ctr, &t->critic, b, &t->ccfg, dp, met);
        double dt = vc_now() - t0;
        rl_metrics_set(met, "timing_s/update_critic", dt);
        rl_metrics_set(met, "perf/mfu/critic", mfu_of(t, t->critic.m, 1, b, t->ccfg.ppo_epochs, dt) /* its value head */);
    }
    if (!st && t->step >= t->critic_warmup) { /* verl: critic_warmup <= global_steps */
        t0 = vc_now();
        st = rl_update_actor_dp(&t->atr, b, &t->acfg, on_policy && !b->have_old, dp, met);
        double dt = vc_now() - t0;
        if (!st) entropy_metrics(t, met);
        rl_metrics_set(met, "timing_s/update_actor", dt);
        /* this rank's rows: a per-device figure, as verl's global one over its world size */
        rl_metrics_set(met, "perf/mfu/actor", mfu_of(t, t->actor, 0, b, t->acfg.ppo_epochs, dt));
        if (!st) memory_metrics(met);
    }
    return st;
}

/* the batch's data metrics, and its dump under trainer.rollout_data_dir */
static vc_status batch_metrics(vc_rl_trainer *t, rl_batch *b, rl_metrics *met) {
    vc_status st = rl_data_metrics(t, b, met);
    if (!st) st = rl_gdpo_metrics(t, t->train, b, met);
    if (!st && t->calc_sum_pi_sq && b->have_old) st = variance_proxy(t, b, met);
    if (!st && t->rollout_dir) st = rl_dump_batch(t, t->train, b, t->rollout_dir);
    return st;
}

vc_status rl_train_step(vc_rl_trainer *t, rl_metrics *met) {
    double t_step = vc_now();
    rl_batch b;
    rl_dp dp = { 0 };
    float *baselines = NULL;
    int made = 0; /* an error before the batch exists returns at once; after, the step's work stops but b is freed */
    vc_status st = t->filter_groups ? dapo_batch(t, met, &b, &dp, &made)
                                    : rollout_batch(t, met, &b, &dp, &baselines, &made);
    if (!made) return st;
    /* verl's shortcut: with one epoch and one mini-batch the old policy is the current one */
    const rl_rc_cfg *rc = &t->acfg.rc;
    int corr = rc->is_level || rc->n_rs; /* decoupled rollout correction: needs the trainer's old log-probs */
    int on_policy = t->acfg.ppo_epochs == 1 && t->acfg.mini_rows >= dp.g_B && !t->use_kl_in_reward && !corr;
    if (!st) st = old_logprobs(t, &b, on_policy, met);
    if (!st) st = ref_passes(t, &b, met);
    double t0 = vc_now();
    if (!st) st = advantages(t, &b, &dp, baselines, corr, met);
    rl_metrics_set(met, "timing_s/adv", vc_now() - t0);
    if (!st) st = update(t, &b, &dp, on_policy, met);
    if (!st) st = batch_metrics(t, &b, met);
    double tokens = tokens_of(&b);
    if (!st) st = rl_dist_reduce(t, &tokens, 1, VC_SUM);
    double step_s = vc_now() - t_step;
    rl_metrics_set(met, "timing_s/step", step_s);
    rl_metrics_set(met, "perf/time_per_step", step_s);
    if (!st) st = per_token_timing(t, &b, met);
    rl_metrics_set(met, "perf/total_num_tokens", tokens);
    rl_metrics_set(met, "perf/throughput", step_s > 0 ? tokens / step_s / (t->world > 1 ? t->world : 1) : 0);
    rl_metrics_set(met, "training/epoch", (double)t->it.epoch);
    free(baselines);
    free(dp.g_idx);
    rl_batch_free(&b);
    rl_images_drop(&t->train_img); /* the step's images: made again when a later step draws their prompts */
    return st ? vc_fail_ctx(st, "step %lld", (long long)t->step) : VC_OK;
}
