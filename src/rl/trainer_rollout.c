/* Rollout of a batch of prompts (n samples each) into the trainer's rl_batch, and its rewards: the
 * built-in scorer for the row's data_source, or custom_reward_function.path as an external program
 * speaking JSON lines (reward.h). */
#include "trainer_internal.h"
#include "verlc/reward.h"
#include "verlc/tokenizer.h"
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rewards ---- */
vc_status rl_reward_open(vc_rl_trainer *t) {
    if (!t->reward_cmd) return VC_OK;
    size_t n = strlen(t->reward_cmd) + 8;
    char *cmd = vc_malloc(n);
    if (!cmd) return VC_ERR_NOMEM;
    snprintf(cmd, n, "exec %s", t->reward_cmd);
    char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    vc_status st = vc_reward_proc_start(argv, t->reward_timeout_ms, &t->proc);
    free(cmd);
    return st ? vc_fail_ctx(st, "custom_reward_function.path (%s)", t->reward_cmd) : VC_OK;
}

void rl_reward_close(vc_rl_trainer *t) {
    if (t->proc) vc_reward_proc_close(t->proc);
    t->proc = NULL;
}

/* exact match after trimming whitespace (the demo's arithmetic task) */
static double exact_match(const char *a, const char *b) {
    while (isspace((unsigned char)*a)) a++;
    while (isspace((unsigned char)*b)) b++;
    size_t na = strlen(a), nb = strlen(b);
    while (na && isspace((unsigned char)a[na - 1])) na--;
    while (nb && isspace((unsigned char)b[nb - 1])) nb--;
    return na == nb && !memcmp(a, b, na) ? 1.0 : 0.0;
}

/* verl's reward_extra_info of a scalar reward: acc = the score (its reward loop's rule) */
static cJSON *scalar_info(double score) {
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddNumberToObject(o, "acc", score)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

vc_status rl_reward_score(vc_rl_trainer *t, const vc_rl_prompt *p, const char *text, double *score, int *failed,
                          cJSON **info) {
    *failed = 0;
    *score = 0;
    if (info) *info = NULL;
    vc_status st = VC_OK;
    if (t->proc) {
        cJSON *ans = NULL;
        st = vc_reward_proc_score_ex(t->proc, p->data_source, text, p->ground_truth, p->extra_info, score,
                                     info ? &ans : NULL);
        if (vc_reward_row_failed(st)) {
            *failed = 1;
            return VC_OK;
        }
        if (st)
            return vc_fail_ctx(st, "custom_reward_function.path (%s), prompt at line %lld", t->reward_cmd,
                               (long long)p->line);
        /* {"score": x} alone stands for a number; an answer with more keys is verl's dict result */
        if (info && ans && cJSON_GetArraySize(ans) > 1) *info = ans;
        else {
            cJSON_Delete(ans);
            if (info && !(*info = scalar_info(*score))) return VC_ERR_NOMEM;
        }
        return VC_OK;
    }
    if (!p->ground_truth)
        return vc_fail(VC_ERR_MISSING, "line %lld: missing field reward_model.ground_truth", (long long)p->line);
    if (!strncmp(p->data_source, "verlc/", 6)) *score = exact_match(text, p->ground_truth);
    else if ((st = vc_reward_default_info(p->data_source, text, p->ground_truth, p->extra_info, score, info)))
        return vc_fail_ctx(st, "reward for the prompt at line %lld (set custom_reward_function.path)", (long long)p->line);
    if (info && !*info && !(*info = scalar_info(*score))) return VC_ERR_NOMEM;
    return VC_OK;
}

double rl_overlong_penalty(const vc_rl_trainer *t, int64_t rlen) {
    if (t->overlong_len <= 0) return 0;
    double exceed = (double)(rlen - (t->max_resp - t->overlong_len));
    double pen = -exceed / (double)t->overlong_len * t->overlong_factor;
    return pen < 0 ? pen : 0;
}

/* training batches with a reward model: its score at the last response token, nothing else (verl's
 * rm_scores replace the reward function's) */
static vc_status rm_score_batch(vc_rl_trainer *t, const vc_rl_dataset *d, rl_batch *b, rl_metrics *met) {
    vc_status st = rl_rm_score(t, d, b, b->score);
    for (int i = 0; !st && i < b->B; i++)
        if (b->rlen[i] > 0) b->token_scores[(size_t)i * b->T + b->rlen[i] - 1] = b->score[i];
    if (!st && met) rl_metrics_set(met, "reward/failed_rows", 0);
    return st;
}

vc_status rl_score_batch(vc_rl_trainer *t, const vc_rl_dataset *d, rl_batch *b, rl_metrics *met, cJSON **infos) {
    if (t->rm && d == t->train) return rm_score_batch(t, d, b, met);
    int n_failed = 0;
    char first_err[512] = "";
    for (int i = 0; i < b->B; i++) {
        double s = 0;
        int failed = 0;
        cJSON *info = NULL;
        vc_status st = rl_reward_score(t, &d->p[b->prompt[i]], b->text[i], &s, &failed, &info);
        double pen = rl_overlong_penalty(t, b->rlen[i]);
        if (!st && info && t->overlong_len > 0 && t->overlong_log && /* verl's DAPO reward manager's log */
            (!cJSON_AddNumberToObject(info, "overlong_reward", pen) || !cJSON_AddBoolToObject(info, "overlong", pen < 0)))
            st = VC_ERR_NOMEM;
        free(b->info[i]); /* the row keeps the extra values as text (they move with it between ranks) */
        b->info[i] = info ? cJSON_PrintUnformatted(info) : NULL;
        if (!st && info && !b->info[i]) st = VC_ERR_NOMEM;
        if (infos) infos[i] = info;
        else cJSON_Delete(info);
        if (st) return st;
        if (failed) {
            if (!n_failed) snprintf(first_err, sizeof first_err, "%s", vc_last_error());
            n_failed++;
        }
        s += pen;
        b->score[i] = (float)s;
        if (b->rlen[i] > 0) b->token_scores[(size_t)i * b->T + b->rlen[i] - 1] = (float)s;
    }
    if (met) rl_metrics_set(met, "reward/failed_rows", n_failed);
    if (n_failed) {
        vc_warn("reward program (%s) failed on %d of %d responses (scored 0): %s", t->reward_cmd, n_failed, b->B, first_err);
        if (2 * n_failed > b->B)
            return vc_fail(VC_ERR_TIMEOUT,
                           "custom_reward_function.path (%s) failed on %d of %d responses; refusing to train on them: %s",
                           t->reward_cmd, n_failed, b->B, first_err);
    }
    return VC_OK;
}

/* ---- generation ---- */
static vc_status generate(vc_rl_trainer *t, const vc_rollout_request *r, int n, const vc_sampling *s,
                          vc_rollout_sample **out, int *n_out) {
    if (t->gen) return t->gen(t->gen_ctx, r, n, s, out, n_out);
    return vc_rollout_generate(t->eng, r, n, s, out, n_out);
}

static void samples_free(vc_rollout_sample *s, int n) { vc_rollout_samples_free(s, n); }

static vc_status fill_batch(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, const vc_rollout_sample *smp,
                            int ns, const vc_sampling *sp, uint64_t step_key, rl_batch *b) {
    int64_t tot = 0, T = 1;
    for (int i = 0; i < ns; i++) {
        tot += d->p[idx[smp[i].request]].len + smp[i].n_tokens;
        if (smp[i].n_tokens > T) T = smp[i].n_tokens;
    }
    vc_status st = rl_batch_alloc(b, ns, (int)T, tot);
    for (int i = 0; !st && i < ns; i++) {
        const vc_rl_prompt *p = &d->p[idx[smp[i].request]];
        int64_t o = b->cu[i];
        memcpy(b->ids + o, p->ids, sizeof(int32_t) * (size_t)p->len);
        memcpy(b->ids + o + p->len, smp[i].tokens, sizeof(int32_t) * (size_t)smp[i].n_tokens);
        b->cu[i + 1] = o + p->len + smp[i].n_tokens;
        b->plen[i] = p->len;
        b->rlen[i] = smp[i].n_tokens;
        b->prompt[i] = (int)idx[smp[i].request];
        b->finish[i] = smp[i].finish;
        const float *lp = rl_rollout_logp(t, &smp[i], sp);
        for (int64_t j = 0; j < smp[i].n_tokens; j++) {
            b->mask[(size_t)i * b->T + j] = 1;
            b->rollout_logp[(size_t)i * b->T + j] = lp[j];
        }
        char uid[64];
        snprintf(uid, sizeof uid, "%llu:%d", (unsigned long long)step_key, smp[i].request);
        size_t len = 0;
        if (!(b->uid[i] = vc_strdup(uid))) st = VC_ERR_NOMEM;
        if (!st) st = vc_tokenizer_decode(t->tok, smp[i].tokens, (size_t)smp[i].n_tokens, 1, &b->text[i], &len);
    }
    return st;
}

vc_status rl_rollout_batch(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, int n, const vc_sampling *s,
                           int n_samples, uint64_t step_key, rl_batch *b) {
    if (t->agent) return rl_agent_rollout(t, d, idx, n, s, n_samples, step_key, b);
    memset(b, 0, sizeof *b);
    vc_rollout_request *r = vc_calloc((size_t)n, sizeof *r);
    if (!r) return VC_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        r[i] = (vc_rollout_request){ d->p[idx[i]].ids, d->p[idx[i]].len, n_samples, idx[i] };
    vc_sampling sp = *s;
    /* a fresh random stream per step: (seed, step) -> sampling seed */
    sp.seed = t->seed * 0x9E3779B97F4A7C15ull + step_key * 0xD1B54A32D192ED03ull + 1;
    vc_rollout_sample *smp = NULL;
    int ns = 0;
    vc_status st = generate(t, r, n, &sp, &smp, &ns);
    if (!st) st = fill_batch(t, d, idx, smp, ns, &sp, step_key, b);
    samples_free(smp, ns);
    free(r);
    if (st) rl_batch_free(b);
    return st;
}
