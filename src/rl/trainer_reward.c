/* Rewards of the trainer's responses, as verl's reward managers compute them (reward_model.reward_manager /
 * reward_manager.name): naive and prime (one call per row), dapo (with reward_model.reward_kwargs'
 * overlong_buffer_cfg and max_resp_len), batch (one call per batch); the scorer is the built-in one for the
 * row's data_source (verl's default_compute_score), custom_reward_function.path as verl's Python function
 * (reward_py.c) or a program speaking JSON lines (reward.h), or the reward model (reward_model.c). */
#include "trainer_internal.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vc_status rl_reward_open(vc_rl_trainer *t) {
    if (!t->reward_cmd) return VC_OK;
    vc_status st;
    if (t->reward_py)
        st = vc_reward_py_start(t->reward_cmd, t->reward_name, t->reward_kwargs, t->reward_mgr == RL_RM_BATCH,
                                t->reward_timeout_ms, &t->proc);
    else {
        size_t n = strlen(t->reward_cmd) + 8;
        char *cmd = vc_malloc(n);
        if (!cmd) return VC_ERR_NOMEM;
        snprintf(cmd, n, "exec %s", t->reward_cmd);
        char *argv[] = { "/bin/sh", "-c", cmd, NULL };
        st = vc_reward_proc_start(argv, t->reward_timeout_ms, &t->proc);
        free(cmd);
    }
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

/* the row's own reward_model.ground_truth and extra_info values (NULL when absent) */
static const cJSON *row_gt(const vc_rl_prompt *p) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p->row, "reward_model"), "ground_truth");
}
static const cJSON *row_extra(const vc_rl_prompt *p) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(p->row, "extra_info");
    return cJSON_IsObject(e) ? e : NULL;
}

/* the extra_info a reward manager hands the function: the row's, and what verl's manager adds to it (naive, remote
 * and gdpo: num_turns and rollout_reward_scores; gdpo: experiment_name; dapo: rollout_reward_scores); NULL with
 * *own 0: the row's own (prime, batch) */
static vc_status manager_extra(const vc_rl_trainer *t, const vc_rl_prompt *p, int num_turns, cJSON **out) {
    int naive = t->reward_mgr == RL_RM_NAIVE || t->reward_mgr == RL_RM_GDPO, dapo = t->reward_mgr == RL_RM_DAPO;
    *out = NULL;
    if (!naive && !dapo) return VC_OK;
    cJSON *ex = row_extra(p) ? cJSON_Duplicate(row_extra(p), 1) : cJSON_CreateObject();
    int ok = ex != NULL;
    if (ok && naive) { /* verl's agent loop's __num_turns__ */
        cJSON_DeleteItemFromObjectCaseSensitive(ex, "num_turns");
        ok = (num_turns > 0 ? cJSON_AddNumberToObject(ex, "num_turns", num_turns) : cJSON_AddNullToObject(ex, "num_turns")) != NULL;
    }
    if (ok) {
        cJSON_DeleteItemFromObjectCaseSensitive(ex, "rollout_reward_scores");
        ok = cJSON_AddObjectToObject(ex, "rollout_reward_scores") != NULL; /* the agent loop's reward_scores: none */
    }
    if (ok && t->reward_mgr == RL_RM_GDPO) {
        cJSON_DeleteItemFromObjectCaseSensitive(ex, "experiment_name");
        ok = cJSON_AddStringToObject(ex, "experiment_name", t->exp_name) != NULL;
    }
    if (!ok) {
        cJSON_Delete(ex);
        return VC_ERR_NOMEM;
    }
    *out = ex;
    return VC_OK;
}

vc_status rl_reward_score(vc_rl_trainer *t, const vc_rl_prompt *p, const char *text, int num_turns, double *score,
                          int *failed, cJSON **info) {
    *failed = 0;
    *score = 0;
    if (info) *info = NULL;
    vc_status st = VC_OK;
    if (t->proc) {
        cJSON *ans = NULL, *ex = NULL;
        if ((st = manager_extra(t, p, num_turns, &ex))) return st;
        st = vc_reward_proc_score_v(t->proc, p->data_source, text, row_gt(p), ex ? ex : row_extra(p), score,
                                    info ? &ans : NULL);
        cJSON_Delete(ex);
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
    double exceed = (double)(rlen - (t->overlong_max - t->overlong_len));
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

/* the batch reward manager's one call for the whole batch (a Python function; failed rows score 0) */
static vc_status score_rows_batched(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, double *s, int *failed,
                                    cJSON **info) {
    int B = b->B;
    const char **ds = vc_calloc((size_t)B, sizeof *ds), **sol = vc_calloc((size_t)B, sizeof *sol);
    const cJSON **gt = vc_calloc((size_t)B, sizeof *gt), **ex = vc_calloc((size_t)B, sizeof *ex);
    vc_status st = ds && sol && gt && ex ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < B; i++) {
        const vc_rl_prompt *p = &d->p[b->prompt[i]];
        ds[i] = p->data_source;
        sol[i] = b->text[i];
        gt[i] = row_gt(p);
        ex[i] = row_extra(p);
    }
    if (!st) st = vc_reward_proc_score_batch(t->proc, B, ds, sol, gt, ex, s, info, failed);
    if (vc_reward_row_failed(st)) st = VC_OK; /* every row failed: counted by the caller */
    else if (st) st = vc_fail_ctx(st, "custom_reward_function.path (%s), reward_manager batch", t->reward_cmd);
    free(ds);
    free(sol);
    free(gt);
    free(ex);
    return st;
}

/* the rows verl's default_compute_score sends to the sandbox, scored together (done[i] 1 for them) */
static vc_status sandbox_rows(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, double *s, cJSON **info,
                              uint8_t *done) {
    int n = 0;
    for (int i = 0; i < b->B; i++) n += vc_sandbox_source(d->p[b->prompt[i]].data_source) && d->p[b->prompt[i]].ground_truth;
    if (!n || !t->sandbox.url || t->proc || t->reward_cmd) return VC_OK; /* a custom reward function scores them */
    const char **sol = vc_calloc((size_t)n, sizeof *sol), **gt = vc_calloc((size_t)n, sizeof *gt);
    double *sc = vc_calloc((size_t)n, sizeof *sc);
    int *row = vc_calloc((size_t)n, sizeof *row), k = 0;
    vc_status st = sol && gt && sc && row ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++) {
        const vc_rl_prompt *p = &d->p[b->prompt[i]];
        if (vc_sandbox_source(p->data_source) && p->ground_truth) row[k] = i, sol[k] = b->text[i], gt[k++] = p->ground_truth;
    }
    if (!st) st = vc_sandbox_score(&t->sandbox, n, sol, gt, sc);
    for (int j = 0; !st && j < n; j++) {
        s[row[j]] = sc[j];
        done[row[j]] = 1;
        if (info && !(info[row[j]] = scalar_info(sc[j]))) st = VC_ERR_NOMEM;
    }
    free(sol), free(gt), free(sc), free(row);
    return st;
}

static vc_status score_rows(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, double *s, int *failed,
                            cJSON **info, char *first_err, size_t n_err) {
    vc_status st = VC_OK;
    uint8_t *done = vc_calloc((size_t)b->B + 1, 1);
    if (!done) return VC_ERR_NOMEM;
    if (t->reward_mgr == RL_RM_BATCH) st = score_rows_batched(t, d, b, s, failed, info);
    else {
        st = sandbox_rows(t, d, b, s, info, done);
        for (int i = 0; !st && i < b->B; i++)
            if (!done[i])
                st = rl_reward_score(t, &d->p[b->prompt[i]], b->text[i], b->turns[i], &s[i], &failed[i], &info[i]);
    }
    free(done);
    for (int i = 0; !st && i < b->B && !*first_err; i++)
        if (failed[i]) snprintf(first_err, n_err, "%s", vc_last_error());
    for (int i = 0; !st && t->reward_mgr == RL_RM_BATCH && i < b->B; i++) /* {"score": x} alone: acc = score */
        if (cJSON_GetArraySize(info[i]) <= 1) {
            cJSON_Delete(info[i]);
            if (!(info[i] = scalar_info(s[i]))) st = VC_ERR_NOMEM;
        }
    return st;
}

vc_status rl_score_batch(vc_rl_trainer *t, const vc_rl_dataset *d, rl_batch *b, rl_metrics *met, cJSON **infos) {
    if (t->rm && d == t->train) return rm_score_batch(t, d, b, met);
    int n_failed = 0, B = b->B;
    char first_err[512] = "";
    double *s = vc_calloc((size_t)B + 1, sizeof *s);
    int *failed = vc_calloc((size_t)B + 1, sizeof *failed);
    cJSON **info = vc_calloc((size_t)B + 1, sizeof *info);
    vc_status st = s && failed && info ? score_rows(t, d, b, s, failed, info, first_err, sizeof first_err) : VC_ERR_NOMEM;
    for (int i = 0; i < B; i++) {
        double pen = rl_overlong_penalty(t, b->rlen[i]);
        if (!st && info[i] && t->overlong_len > 0 && t->overlong_log && /* verl's DAPO reward manager's log */
            (!cJSON_AddNumberToObject(info[i], "overlong_reward", pen) ||
             !cJSON_AddBoolToObject(info[i], "overlong", pen < 0)))
            st = VC_ERR_NOMEM;
        free(b->info[i]); /* the row keeps the extra values as text (they move with it between ranks) */
        b->info[i] = !st && info[i] ? vc_json_print(info[i], 0) : NULL;
        if (!st && info[i] && !b->info[i]) st = VC_ERR_NOMEM;
        if (infos && !st) infos[i] = info[i];
        else cJSON_Delete(info[i]);
        if (st) continue;
        n_failed += failed[i];
        b->score[i] = (float)(s[i] + pen);
        if (b->rlen[i] > 0) b->token_scores[(size_t)i * b->T + b->rlen[i] - 1] = b->score[i];
    }
    free(s);
    free(failed);
    free(info);
    if (st) return st;
    if (met) rl_metrics_set(met, "reward/failed_rows", n_failed);
    if (n_failed) {
        vc_warn("reward program (%s) failed on %d of %d responses (scored 0): %s", t->reward_cmd, n_failed, B, first_err);
        if (2 * n_failed > B && t->reward_mgr != RL_RM_PRIME) /* verl's prime manager scores failures 0 and goes on */
            return vc_fail(VC_ERR_TIMEOUT,
                           "custom_reward_function.path (%s) failed on %d of %d responses; refusing to train on them: %s",
                           t->reward_cmd, n_failed, B, first_err);
    }
    return VC_OK;
}

/* ---- configuration ---- */
/* a mapping key as JSON text (NULL when absent or empty); VC_ERR_ARG when it is not a mapping */
static vc_status map_json(const vc_config *c, const char *key, char **out) {
    *out = NULL;
    if (!vc_config_has(c, key)) return VC_OK;
    char *s = vc_config_to_json(c, key, 0);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    vc_status st = VC_OK;
    if (!s) st = VC_ERR_NOMEM;
    else if (cJSON_IsNull(j)) {} /* null: none */
    else if (!cJSON_IsObject(j)) st = vc_fail(VC_ERR_ARG, "%s must be a mapping of keyword arguments", key);
    else if (j->child) *out = s, s = NULL;
    cJSON_Delete(j);
    free(s);
    return st;
}

/* DAPO's overlong reward shaping: reward_model.overlong_buffer (verl's DAPO recipe config, any manager) or
 * the dapo manager's reward_model.reward_kwargs.overlong_buffer_cfg with max_resp_len */
static vc_status read_overlong(vc_rl_trainer *t, const vc_config *c, const char *pre, int64_t max_len) {
    char k[4][160];
    static const char *const N[4] = { "enable", "len", "penalty_factor", "log" };
    for (int i = 0; i < 4; i++) snprintf(k[i], sizeof k[i], "%s.%s", pre, N[i]);
    int on = 0, log = 0;
    int64_t len = 0;
    double f = 0;
    vc_status st = vc_config_get_bool_or(c, k[0], 0, &on);
    if (!st) st = vc_config_get_int_or(c, k[1], 0, &len);
    if (!st) st = vc_config_get_double_or(c, k[2], 0, &f);
    if (!st) st = vc_config_get_bool_or(c, k[3], 0, &log);
    if (st || !on) return st;
    if (t->overlong_len)
        return vc_fail(VC_ERR_ARG, "%s and reward_model.overlong_buffer are both enabled: set one", pre);
    if (len < 1 || len > max_len)
        return vc_fail(VC_ERR_ARG, "%s must be in 1..%lld (the maximum response length), got %lld", k[1],
                       (long long)max_len, (long long)len);
    if (!(f >= 0)) return vc_fail(VC_ERR_ARG, "%s must be >= 0, got %g", k[2], f);
    t->overlong_len = len;
    t->overlong_factor = f;
    t->overlong_log = log;
    t->overlong_max = max_len;
    return VC_OK;
}

static const char *const MANAGERS[] = { "naive", "prime", "dapo", "batch", "gdpo" }; /* RL_RM_* order */

/* reward_model.reward_kwargs: the manager's constructor arguments in verl (naive and prime take none; dapo
 * max_resp_len and overlong_buffer_cfg; batch passes them on to the function) */
static vc_status read_manager_kwargs(vc_rl_trainer *t, const vc_config *c, char **batch_kwargs) {
    static const char *K = "reward_model.reward_kwargs";
    char *kw = NULL;
    vc_status st = map_json(c, K, &kw);
    cJSON *j = kw ? cJSON_Parse(kw) : NULL;
    if (st || !j) goto out;
    if (t->reward_mgr == RL_RM_BATCH) {
        *batch_kwargs = kw;
        kw = NULL;
        goto out;
    }
    for (const cJSON *e = j->child; e && !st; e = e->next)
        if (t->reward_mgr != RL_RM_DAPO || (strcmp(e->string, "max_resp_len") && strcmp(e->string, "overlong_buffer_cfg")))
            st = vc_fail(VC_ERR_ARG, "%s.%s: the %s reward manager takes no such argument%s", K, e->string,
                         MANAGERS[t->reward_mgr],
                         t->reward_mgr == RL_RM_DAPO ? " (it takes max_resp_len and overlong_buffer_cfg)"
                                                     : " (set reward_model.reward_manager=dapo for overlong_buffer_cfg)");
    if (st || !cJSON_GetObjectItemCaseSensitive(j, "overlong_buffer_cfg")) goto out;
    int64_t max_len = -1;
    if ((st = vc_config_get_int_or(c, "reward_model.reward_kwargs.max_resp_len", -1, &max_len))) goto out;
    if (max_len < 1) { /* verl's DAPO manager asserts it */
        st = vc_fail(VC_ERR_ARG, "%s.overlong_buffer_cfg needs %s.max_resp_len (the response length the buffer ends at)", K, K);
        goto out;
    }
    st = read_overlong(t, c, "reward_model.reward_kwargs.overlong_buffer_cfg", max_len);
out:
    cJSON_Delete(j);
    free(kw);
    return st;
}

/* reward_model.sandbox_fusion: verl's default_compute_score runs the code data sources there when url is set */
static vc_status read_sandbox(vc_rl_trainer *t, const vc_config *c) {
    int64_t conc = 64, mem = 1024;
    t->sandbox = (vc_sandbox_opts){ .timeout_s = 10, .retry_delay = 1.0 };
    vc_status st = vc_config_get_str_or(c, "reward_model.sandbox_fusion.url", NULL, &t->sandbox.url);
    if (!st) st = vc_config_get_int_or(c, "reward_model.sandbox_fusion.max_concurrent", 64, &conc);
    if (!st) st = vc_config_get_int_or(c, "reward_model.sandbox_fusion.memory_limit_mb", 1024, &mem);
    if (st) return st;
    if (t->sandbox.url && !*t->sandbox.url) t->sandbox.url = NULL;
    if (conc < 1 || conc > 100000 || mem < 1 || mem > (1 << 24))
        return vc_fail(VC_ERR_ARG, "reward_model.sandbox_fusion: max_concurrent %lld and memory_limit_mb %lld must be "
                       "positive", (long long)conc, (long long)mem);
    t->sandbox.max_concurrent = (int)conc, t->sandbox.memory_limit_mb = (int)mem;
    return VC_OK;
}

static vc_status read_manager(vc_rl_trainer *t, const vc_config *c) {
    const char *name = NULL, *src = NULL;
    vc_status st = vc_config_get_str_or(c, "reward_manager.name", NULL, &name);
    if (!st && !name) st = vc_config_get_str_or(c, "reward_model.reward_manager", "naive", &name);
    if (!st) st = vc_config_get_str_or(c, "reward_manager.source", "register", &src);
    if (st) return st;
    if (strcmp(src, "register"))
        return vc_fail(VC_ERR_UNSUPPORTED, "reward_manager.source=%s: a Python reward manager class cannot run in verlc "
                                           "(use register with naive, prime, dapo, batch or gdpo)", src);
    if (!strcmp(name, "remote")) { /* later verl's: naive's rows and results, computed in worker processes */
        t->reward_mgr = 0;
        return VC_OK;
    }
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, MANAGERS[i])) {
            t->reward_mgr = i;
            return VC_OK;
        }
    return vc_fail(VC_ERR_UNSUPPORTED, "reward_model.reward_manager=%s: verlc has verl's naive, prime, dapo, batch, gdpo and remote managers",
                   name);
}

vc_status rl_reward_config(vc_rl_trainer *t, const vc_config *c) {
    char *batch_kw = NULL, *fn_kw = NULL;
    double tmo = 60;
    t->overlong_max = t->max_resp;
    const char *exp = NULL;
    vc_status st = read_manager(t, c);
    if (!st) st = vc_config_get_str_or(c, "trainer.experiment_name", "", &exp);
    if (!st) snprintf(t->exp_name, sizeof t->exp_name, "%s", exp ? exp : "");
    if (!st) st = read_overlong(t, c, "reward_model.overlong_buffer", t->max_resp);
    if (!st) st = read_sandbox(t, c);
    if (!st) st = read_manager_kwargs(t, c, &batch_kw);
    if (!st) st = vc_config_get_str_or(c, "custom_reward_function.path", NULL, &t->reward_cmd);
    if (!st) st = vc_config_get_str_or(c, "custom_reward_function.name", "compute_score", &t->reward_name);
    if (!st) st = vc_config_get_double_or(c, "custom_reward_function.timeout_s", 60, &tmo);
    if (!st) st = map_json(c, "custom_reward_function.reward_kwargs", &fn_kw);
    if (st) goto out;
    if (t->reward_cmd && !*t->reward_cmd) t->reward_cmd = NULL;
    t->reward_py = vc_reward_path_is_python(t->reward_cmd);
    if (!(tmo > 0) || tmo > 1e6) {
        st = vc_fail(VC_ERR_ARG, "custom_reward_function.timeout_s must be in (0, 1e6] seconds, got %g", tmo);
        goto out;
    }
    t->reward_timeout_ms = (int)(tmo * 1000);
    if (t->reward_mgr == RL_RM_BATCH && !t->reward_py) {
        st = vc_fail(VC_ERR_ARG, "reward_model.reward_manager=batch calls a Python function with lists: set "
                                 "custom_reward_function.path to its .py file");
        goto out;
    }
    if ((fn_kw || batch_kw) && !t->reward_py) {
        st = vc_fail(VC_ERR_ARG, "%s is for a Python reward function (custom_reward_function.path=FILE.py)",
                     fn_kw ? "custom_reward_function.reward_kwargs" : "reward_model.reward_kwargs");
        goto out;
    }
    if (batch_kw && fn_kw) { /* verl: the function's own kwargs win over the manager's */
        cJSON *a = cJSON_Parse(batch_kw), *b = cJSON_Parse(fn_kw);
        for (cJSON *e = b ? b->child : NULL; a && e; e = e->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(a, e->string);
            cJSON_AddItemToObject(a, e->string, cJSON_Duplicate(e, 1));
        }
        t->reward_kwargs = a ? vc_json_print(a, 0) : NULL;
        cJSON_Delete(a);
        cJSON_Delete(b);
        if (!t->reward_kwargs) st = VC_ERR_NOMEM;
    } else {
        t->reward_kwargs = fn_kw ? fn_kw : batch_kw;
        fn_kw = batch_kw = NULL;
    }
out:
    free(batch_kw);
    free(fn_kw);
    return st;
}
