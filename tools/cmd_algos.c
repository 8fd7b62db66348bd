/* verlc algos FILE: evaluates verl's core algorithm functions on JSON inputs.
 *   {"inputs": {name: array}, "calls": [{"fn": name, "args": {verl argument: value or input name}}]}
 * prints {"results": [...]} with what verl returns (tuples as lists, metric dicts with verl's keys,
 * arrays nested as the inputs). Arrays may be nested lists, flat lists, or {"shape": [...], "data": [...]}. */
#include "cli.h"
#include "verlc/json.h"
#include "verlc/core.h"
#include "verlc/rl.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ARRS = 12 };

struct arr {
    float *data;
    size_t n;
    int ndim;
    int shape[4];
};

struct call {
    const char *fn;
    cJSON *args, *inputs;
    struct arr arrs[MAX_ARRS];
    int n_arrs;
    char **idx;
    int n_idx;
};

/* ------------------------------------------------------------------ array parsing */
static vc_status arr_shape(const cJSON *j, struct arr *a, int depth) {
    if (!cJSON_IsArray(j)) return VC_OK;
    if (depth >= 4) return vc_fail(VC_ERR_SHAPE, "arrays deeper than 4 dimensions are not supported");
    a->shape[depth] = cJSON_GetArraySize(j);
    a->ndim = depth + 1;
    return a->shape[depth] ? arr_shape(j->child, a, depth + 1) : VC_OK;
}

static vc_status arr_fill(const cJSON *j, struct arr *a, int depth, size_t *pos) {
    if (depth == a->ndim) {
        if (!cJSON_IsNumber(j) && !cJSON_IsBool(j)) return vc_fail(VC_ERR_FORMAT, "array element is not a number");
        a->data[(*pos)++] = cJSON_IsBool(j) ? (float)cJSON_IsTrue(j) : (float)j->valuedouble;
        return VC_OK;
    }
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != a->shape[depth])
        return vc_fail(VC_ERR_SHAPE, "ragged array (dimension %d)", depth);
    for (const cJSON *c = j->child; c; c = c->next) {
        vc_status st = arr_fill(c, a, depth + 1, pos);
        if (st) return st;
    }
    return VC_OK;
}

static vc_status arr_parse(const cJSON *j, struct arr *a) {
    memset(a, 0, sizeof *a);
    const cJSON *data = j;
    if (cJSON_IsObject(j)) {
        data = cJSON_GetObjectItemCaseSensitive(j, "data");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
        if (!cJSON_IsArray(data) || !cJSON_IsArray(shape)) return vc_fail(VC_ERR_FORMAT, "expected {shape, data}");
    }
    if (cJSON_IsNumber(j)) { a->ndim = 0; a->n = 1; }
    else {
        vc_status st = arr_shape(data, a, 0);
        if (st) return st;
        a->n = 1;
        for (int d = 0; d < a->ndim; d++) a->n *= (size_t)a->shape[d];
    }
    a->data = vc_malloc(sizeof(float) * (a->n ? a->n : 1));
    if (!a->data) return VC_ERR_NOMEM;
    size_t pos = 0;
    vc_status st = cJSON_IsNumber(j) ? (a->data[0] = (float)j->valuedouble, VC_OK) : arr_fill(data, a, 0, &pos);
    if (st) { free(a->data); a->data = NULL; return st; }
    if (data != j) { /* explicit shape overrides the (flat) data's shape */
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
        size_t n = 1;
        int nd = 0;
        for (const cJSON *c = shape->child; c && nd < 4; c = c->next) { a->shape[nd++] = c->valueint; n *= (size_t)c->valueint; }
        if (n != a->n) { free(a->data); a->data = NULL; return vc_fail(VC_ERR_SHAPE, "shape does not match data size"); }
        a->ndim = nd;
    }
    return VC_OK;
}

static cJSON *arr_json(const float *x, const int *shape, int ndim, size_t *pos) {
    if (ndim == 0) return cJSON_CreateNumber((double)x[(*pos)++]);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < shape[0]; i++) cJSON_AddItemToArray(a, arr_json(x, shape + 1, ndim - 1, pos));
    return a;
}

static cJSON *arr_out(const float *x, const struct arr *like) {
    size_t pos = 0;
    return arr_json(x, like->shape, like->ndim, &pos);
}

/* ------------------------------------------------------------------ argument access */
static cJSON *arg(struct call *c, const char *name) { return cJSON_GetObjectItemCaseSensitive(c->args, name); }

/* An array argument: the name of an input, or an inline array. NULL data when absent and optional. */
static vc_status get_arr(struct call *c, const char *name, int required, struct arr **out) {
    *out = NULL;
    cJSON *v = arg(c, name), *src = v;
    if (!v) return required ? vc_fail(VC_ERR_MISSING, "%s: missing argument '%s'", c->fn, name) : VC_OK;
    if (cJSON_IsString(v)) {
        src = cJSON_GetObjectItemCaseSensitive(c->inputs, v->valuestring);
        if (!src) return vc_fail(VC_ERR_MISSING, "%s: argument '%s' names unknown input '%s'", c->fn, name, v->valuestring);
    }
    if (c->n_arrs == MAX_ARRS) return vc_fail(VC_ERR_INTERNAL, "too many arrays");
    struct arr *a = &c->arrs[c->n_arrs];
    vc_status st = arr_parse(src, a);
    if (st) return vc_fail_ctx(st, "%s: argument '%s'", c->fn, name);
    c->n_arrs++;
    *out = a;
    return VC_OK;
}

static vc_status get_num(struct call *c, const char *name, double dflt, double *out) {
    cJSON *v = arg(c, name);
    *out = dflt;
    if (!v || cJSON_IsNull(v)) return VC_OK;
    if (cJSON_IsBool(v)) { *out = cJSON_IsTrue(v); return VC_OK; }
    if (cJSON_IsString(v)) { /* a scalar input */
        cJSON *src = cJSON_GetObjectItemCaseSensitive(c->inputs, v->valuestring);
        if (cJSON_IsNumber(src)) { *out = src->valuedouble; return VC_OK; }
    }
    if (!cJSON_IsNumber(v)) return vc_fail(VC_ERR_ARG, "%s: argument '%s' must be a number", c->fn, name);
    *out = v->valuedouble;
    return VC_OK;
}

static vc_status get_str(struct call *c, const char *name, const char *dflt, const char **out) {
    cJSON *v = arg(c, name);
    *out = dflt;
    if (!v || cJSON_IsNull(v)) return VC_OK;
    if (!cJSON_IsString(v)) return vc_fail(VC_ERR_ARG, "%s: argument '%s' must be a string", c->fn, name);
    *out = v->valuestring;
    return VC_OK;
}

static vc_status get_index(struct call *c, const char *name) {
    cJSON *v = arg(c, name), *src = v;
    if (!v) return vc_fail(VC_ERR_MISSING, "%s: missing argument '%s'", c->fn, name);
    if (cJSON_IsString(v)) src = cJSON_GetObjectItemCaseSensitive(c->inputs, v->valuestring);
    if (!cJSON_IsArray(src)) return vc_fail(VC_ERR_ARG, "%s: argument '%s' must name an array of ids", c->fn, name);
    int n = cJSON_GetArraySize(src), i = 0;
    c->idx = vc_calloc((size_t)(n ? n : 1), sizeof(char *));
    if (!c->idx) return VC_ERR_NOMEM;
    c->n_idx = n;
    char buf[64];
    for (cJSON *e = src->child; e; e = e->next, i++) {
        if (cJSON_IsString(e)) c->idx[i] = vc_strdup(e->valuestring);
        else if (cJSON_IsNumber(e)) { snprintf(buf, sizeof buf, "%.17g", e->valuedouble); c->idx[i] = vc_strdup(buf); }
        else return vc_fail(VC_ERR_ARG, "%s: %s[%d] is not a string or number", c->fn, name, i);
        if (!c->idx[i]) return VC_ERR_NOMEM;
    }
    return VC_OK;
}

/* [B,T] of a 2-D array; a flat one is one row unless B is known from the index. */
static vc_status dims(struct call *c, const struct arr *a, int B_hint, int *B, int *T) {
    if (a->ndim >= 2) { *B = a->shape[0]; *T = (int)(a->n / (size_t)(a->shape[0] ? a->shape[0] : 1)); }
    else if (B_hint > 0 && a->n % (size_t)B_hint == 0) { *B = B_hint; *T = (int)(a->n / (size_t)B_hint); }
    else { *B = 1; *T = (int)a->n; }
    if (*B <= 0 || *T <= 0) return vc_fail(VC_ERR_SHAPE, "%s: empty array", c->fn);
    return VC_OK;
}

static vc_status same_size(struct call *c, const struct arr *a, const char *name, size_t n) {
    if (a && a->n != n) return vc_fail(VC_ERR_SHAPE, "%s: '%s' has %zu elements, expected %zu", c->fn, name, a->n, n);
    return VC_OK;
}

#define TRY(x) do { vc_status _s = (x); if (_s) return _s; } while (0)

static cJSON *pair(cJSON *a, cJSON *b) {
    cJSON *l = cJSON_CreateArray();
    cJSON_AddItemToArray(l, a);
    cJSON_AddItemToArray(l, b);
    return l;
}

/* Output buffers for [B,T] results. */
static vc_status two_bufs(size_t n, float **a, float **b) {
    *a = vc_malloc(sizeof(float) * n);
    *b = vc_malloc(sizeof(float) * n);
    if (!*a || !*b) { free(*a); free(*b); *a = *b = NULL; return VC_ERR_NOMEM; }
    return VC_OK;
}

static vc_status finish_pair(vc_status st, const struct arr *like, float *a, float *b, cJSON **res) {
    if (!st) *res = pair(arr_out(a, like), arr_out(b, like));
    free(a);
    free(b);
    return st;
}

/* token_level_rewards + response_mask, common to every estimator */
static vc_status adv_inputs(struct call *c, int with_index, struct arr **r, struct arr **m, int *B, int *T) {
    TRY(get_arr(c, "token_level_rewards", 1, r));
    TRY(get_arr(c, "response_mask", 1, m));
    if (with_index) TRY(get_index(c, "index"));
    TRY(dims(c, *r, with_index ? c->n_idx : 0, B, T));
    if (with_index && c->n_idx != *B) return vc_fail(VC_ERR_SHAPE, "%s: index has %d ids for %d rows", c->fn, c->n_idx, *B);
    return same_size(c, *m, "response_mask", (*r)->n);
}

static vc_status fn_gae(struct call *c, cJSON **res) {
    struct arr *r, *m, *v;
    int B, T;
    double gamma, lam;
    float *adv, *ret;
    TRY(adv_inputs(c, 0, &r, &m, &B, &T));
    TRY(get_arr(c, "values", 1, &v));
    TRY(same_size(c, v, "values", r->n));
    TRY(get_num(c, "gamma", 1.0, &gamma));
    TRY(get_num(c, "lam", 1.0, &lam));
    TRY(two_bufs(r->n, &adv, &ret));
    return finish_pair(vc_adv_gae(r->data, v->data, m->data, B, T, (float)gamma, (float)lam, adv, ret), r, adv, ret, res);
}

static vc_status fn_grpo(struct call *c, cJSON **res) {
    struct arr *r, *m;
    int B, T;
    double eps, norm;
    float *adv, *ret;
    TRY(adv_inputs(c, 1, &r, &m, &B, &T));
    TRY(get_num(c, "epsilon", 1e-6, &eps));
    TRY(get_num(c, "norm_adv_by_std_in_grpo", 1.0, &norm));
    TRY(two_bufs(r->n, &adv, &ret));
    vc_status (*f)(const float *, const float *, const char *const *, int, int, int, float, float *, float *) =
        !strcmp(c->fn, "grpo_vectorized_outcome_advantage") ? vc_adv_grpo_vectorized
        : !strcmp(c->fn, "grpo_passk_outcome_advantage")    ? vc_adv_grpo_passk
                                                            : vc_adv_grpo;
    vc_status st = f(r->data, m->data, (const char *const *)c->idx, B, T, norm != 0, (float)eps, adv, ret);
    return finish_pair(st, r, adv, ret, res);
}

static vc_status fn_grouped(struct call *c, cJSON **res) {
    struct arr *r, *m;
    int B, T;
    double eps, f_norm;
    float *adv, *ret;
    TRY(adv_inputs(c, 1, &r, &m, &B, &T));
    TRY(get_num(c, "epsilon", 1e-6, &eps)); /* accepted as verl does; unused */
    TRY(get_num(c, "f_norm", 1.0, &f_norm));
    TRY(two_bufs(r->n, &adv, &ret));
    const char *const *ix = (const char *const *)c->idx;
    vc_status st;
    if (!strcmp(c->fn, "rloo_outcome_advantage")) st = vc_adv_rloo(r->data, m->data, ix, B, T, adv, ret);
    else if (!strcmp(c->fn, "rloo_vectorized_outcome_advantage"))
        st = vc_adv_rloo_vectorized(r->data, m->data, ix, B, T, adv, ret);
    else if (!strcmp(c->fn, "opo_outcome_advantage")) st = vc_adv_opo(r->data, m->data, ix, B, T, adv, ret);
    else if (!strcmp(c->fn, "gpg_outcome_advantage")) st = vc_adv_gpg(r->data, m->data, ix, B, T, (float)f_norm, adv, ret);
    else st = vc_adv_reinforce_pp_baseline(r->data, m->data, ix, B, T, adv, ret);
    return finish_pair(st, r, adv, ret, res);
}

static vc_status fn_rpp(struct call *c, cJSON **res) {
    struct arr *r, *m;
    int B, T;
    double gamma;
    float *adv, *ret;
    TRY(adv_inputs(c, 0, &r, &m, &B, &T));
    TRY(get_num(c, "gamma", 1.0, &gamma));
    TRY(two_bufs(r->n, &adv, &ret));
    return finish_pair(vc_adv_reinforce_pp(r->data, m->data, B, T, (float)gamma, adv, ret), r, adv, ret, res);
}

static vc_status fn_remax(struct call *c, cJSON **res) {
    struct arr *r, *m, *bl;
    int B, T;
    float *adv, *ret;
    TRY(get_arr(c, "reward_baselines", 1, &bl));
    TRY(get_arr(c, "token_level_rewards", 1, &r));
    TRY(get_arr(c, "response_mask", 1, &m));
    TRY(dims(c, r, (int)bl->n, &B, &T));
    TRY(same_size(c, m, "response_mask", r->n));
    TRY(same_size(c, bl, "reward_baselines", (size_t)B));
    TRY(two_bufs(r->n, &adv, &ret));
    return finish_pair(vc_adv_remax(r->data, bl->data, m->data, B, T, adv, ret), r, adv, ret, res);
}

static vc_status get_norm(struct call *c, vc_agg_norm *n) {
    memset(n, 0, sizeof *n);
    TRY(get_num(c, "dp_size", 0, &n->dp_size));
    TRY(get_num(c, "batch_num_tokens", 0, &n->batch_num_tokens));
    TRY(get_num(c, "global_batch_size", 0, &n->global_batch_size));
    return get_num(c, "loss_scale_factor", 0, &n->loss_scale_factor);
}

static vc_status get_agg(struct call *c, vc_agg_mode *mode) {
    const char *s;
    TRY(get_str(c, "loss_agg_mode", "token-mean", &s));
    vc_status st = vc_agg_mode_parse(s, mode);
    return st ? vc_fail_ctx(st, "%s", c->fn) : VC_OK;
}

static vc_status fn_agg(struct call *c, cJSON **res) {
    struct arr *l, *m;
    int B, T;
    vc_agg_mode mode;
    vc_agg_norm norm;
    double out;
    TRY(get_arr(c, "loss_mat", 1, &l));
    TRY(get_arr(c, "loss_mask", 1, &m));
    TRY(dims(c, l, 0, &B, &T));
    TRY(same_size(c, m, "loss_mask", l->n));
    TRY(get_agg(c, &mode));
    TRY(get_norm(c, &norm));
    TRY(vc_agg_loss(l->data, m->data, B, T, mode, &norm, &out, NULL));
    *res = cJSON_CreateNumber((float)out);
    return VC_OK;
}

static vc_status fn_policy(struct call *c, cJSON **res) {
    struct arr *old, *lp, *adv, *m, *w;
    int B, T;
    vc_pg_config cfg;
    vc_pg_mode mode;
    vc_pg_config_default(&cfg);
    TRY(vc_pg_mode_parse(c->fn + strlen("policy_loss_"), &mode));
    TRY(get_arr(c, "old_log_prob", 1, &old));
    TRY(get_arr(c, "log_prob", 1, &lp));
    TRY(get_arr(c, "advantages", 1, &adv));
    TRY(get_arr(c, "response_mask", 1, &m));
    TRY(get_arr(c, "rollout_is_weights", 0, &w));
    TRY(dims(c, lp, 0, &B, &T));
    TRY(same_size(c, old, "old_log_prob", lp->n));
    TRY(same_size(c, adv, "advantages", lp->n));
    TRY(same_size(c, m, "response_mask", lp->n));
    TRY(same_size(c, w, "rollout_is_weights", lp->n));
    if (mode == VC_PG_GSPO) cfg.agg = VC_AGG_SEQ_MEAN_TOKEN_MEAN;
    else TRY(get_agg(c, &cfg.agg));
    TRY(get_norm(c, &cfg.norm));
    TRY(get_num(c, "clip_ratio", 0.2, &cfg.clip_ratio));
    TRY(get_num(c, "clip_ratio_low", -1.0, &cfg.clip_ratio_low));
    TRY(get_num(c, "clip_ratio_high", -1.0, &cfg.clip_ratio_high));
    TRY(get_num(c, "clip_ratio_c", 3.0, &cfg.clip_ratio_c));
    TRY(get_num(c, "dro_beta", 0.0, &cfg.dro_beta));
    TRY(get_num(c, "tau_pos", cfg.tau_pos, &cfg.tau_pos));  /* (verl: config.tau_pos; config.policy_loss.* below) */
    TRY(get_num(c, "tau_neg", cfg.tau_neg, &cfg.tau_neg));
    TRY(get_num(c, "clip_cov_ratio", cfg.clip_cov_ratio, &cfg.clip_cov_ratio));
    TRY(get_num(c, "clip_cov_lb", cfg.clip_cov_lb, &cfg.clip_cov_lb));
    TRY(get_num(c, "clip_cov_ub", cfg.clip_cov_ub, &cfg.clip_cov_ub));
    TRY(get_num(c, "kl_cov_ratio", cfg.kl_cov_ratio, &cfg.kl_cov_ratio));
    TRY(get_num(c, "ppo_kl_coef", cfg.ppo_kl_coef, &cfg.ppo_kl_coef));
    double loss, grad_flag = 0;
    vc_pg_metrics mt;
    TRY(get_num(c, "with_grad", 0.0, &grad_flag));
    float *g = grad_flag != 0 ? vc_malloc(sizeof(float) * (lp->n ? lp->n : 1)) : NULL;
    if (grad_flag != 0 && !g) return VC_ERR_NOMEM;
    vc_status st = vc_policy_loss(mode, old->data, lp->data, adv->data, m->data, B, T, &cfg, w ? w->data : NULL, &loss, &mt, g);
    if (st) { free(g); return st; }
    cJSON *d = cJSON_CreateObject();
    if (mode != VC_PG_DRO) cJSON_AddNumberToObject(d, "actor/pg_clipfrac", mt.pg_clipfrac);
    cJSON_AddNumberToObject(d, "actor/ppo_kl", mt.ppo_kl);
    if (mode != VC_PG_DRO) cJSON_AddNumberToObject(d, "actor/pg_clipfrac_lower", mt.pg_clipfrac_lower);
    *res = pair(cJSON_CreateNumber((float)loss), d);
    if (g && *res) cJSON_AddItemToArray(*res, arr_out(g, lp)); /* with_grad: d loss / d log_prob as a third item */
    free(g);
    return VC_OK;
}

static vc_status fn_entropy_loss(struct call *c, cJSON **res) {
    struct arr *lg, *m;
    vc_agg_mode mode;
    vc_agg_norm norm;
    double loss;
    TRY(get_arr(c, "logits", 1, &lg));
    TRY(get_arr(c, "response_mask", 1, &m));
    TRY(get_agg(c, &mode));
    TRY(get_norm(c, &norm));
    if (lg->ndim < 2) return vc_fail(VC_ERR_SHAPE, "%s: logits must be [B,T,V] or [T,V]", c->fn);
    int V = lg->shape[lg->ndim - 1];
    int B, T;
    TRY(dims(c, m, 0, &B, &T));
    TRY(same_size(c, lg, "logits", m->n * (size_t)V));
    TRY(vc_entropy_loss(lg->data, m->data, B, T, V, mode, &norm, &loss));
    *res = cJSON_CreateNumber((float)loss);
    return VC_OK;
}

static vc_status fn_entropy(struct call *c, cJSON **res) {
    struct arr *lg;
    TRY(get_arr(c, "logits", 1, &lg));
    if (lg->ndim < 1) return vc_fail(VC_ERR_SHAPE, "%s: logits must have a vocabulary axis", c->fn);
    int V = lg->shape[lg->ndim - 1];
    size_t N = V ? lg->n / (size_t)V : 0;
    float *h = vc_malloc(sizeof(float) * (N ? N : 1));
    if (!h) return VC_ERR_NOMEM;
    vc_entropy_from_logits(lg->data, N, (size_t)V, h);
    size_t pos = 0;
    *res = arr_json(h, lg->shape, lg->ndim - 1, &pos);
    free(h);
    return VC_OK;
}

static vc_status fn_value(struct call *c, cJSON **res) {
    struct arr *vp, *rt, *v, *m;
    int B, T;
    vc_agg_mode mode;
    vc_agg_norm norm;
    double clip, loss, frac;
    TRY(get_arr(c, "vpreds", 1, &vp));
    TRY(get_arr(c, "returns", 1, &rt));
    TRY(get_arr(c, "values", 1, &v));
    TRY(get_arr(c, "response_mask", 1, &m));
    TRY(dims(c, vp, 0, &B, &T));
    TRY(same_size(c, rt, "returns", vp->n));
    TRY(same_size(c, v, "values", vp->n));
    TRY(same_size(c, m, "response_mask", vp->n));
    if (!arg(c, "cliprange_value")) return vc_fail(VC_ERR_MISSING, "%s: missing argument 'cliprange_value'", c->fn);
    TRY(get_num(c, "cliprange_value", 0, &clip));
    TRY(get_agg(c, &mode));
    TRY(get_norm(c, &norm));
    double grad_flag = 0;
    TRY(get_num(c, "with_grad", 0.0, &grad_flag));
    float *g = grad_flag != 0 ? vc_malloc(sizeof(float) * (vp->n ? vp->n : 1)) : NULL;
    if (grad_flag != 0 && !g) return VC_ERR_NOMEM;
    vc_status st = vc_value_loss(vp->data, rt->data, v->data, m->data, B, T, (float)clip, mode, &norm, &loss, &frac, g);
    if (st) { free(g); return st; }
    *res = pair(cJSON_CreateNumber((float)loss), cJSON_CreateNumber(frac));
    if (g && *res) cJSON_AddItemToArray(*res, arr_out(g, vp)); /* with_grad: d loss / d vpreds */
    free(g);
    return VC_OK;
}

static vc_status fn_kl(struct call *c, cJSON **res) {
    struct arr *lp, *ref;
    const char *name;
    vc_kl_spec spec;
    TRY(get_arr(c, "logprob", 1, &lp));
    TRY(get_arr(c, "ref_logprob", 1, &ref));
    TRY(same_size(c, ref, "ref_logprob", lp->n));
    TRY(get_str(c, "kl_penalty", NULL, &name));
    if (!name) return vc_fail(VC_ERR_MISSING, "%s: missing argument 'kl_penalty'", c->fn);
    TRY(vc_kl_parse(name, &spec));
    float *kl = vc_malloc(sizeof(float) * (lp->n ? lp->n : 1));
    if (!kl) return VC_ERR_NOMEM;
    vc_kl_penalty(spec, lp->data, ref->data, lp->n, kl, NULL);
    *res = arr_out(kl, lp);
    free(kl);
    return VC_OK;
}

static vc_status fn_rewards(struct call *c, cJSON **res) {
    struct arr *s, *old, *ref;
    double ratio;
    TRY(get_arr(c, "token_level_scores", 1, &s));
    TRY(get_arr(c, "old_log_prob", 1, &old));
    TRY(get_arr(c, "ref_log_prob", 1, &ref));
    TRY(same_size(c, old, "old_log_prob", s->n));
    TRY(same_size(c, ref, "ref_log_prob", s->n));
    if (!arg(c, "kl_ratio")) return vc_fail(VC_ERR_MISSING, "%s: missing argument 'kl_ratio'", c->fn);
    TRY(get_num(c, "kl_ratio", 0, &ratio));
    float *out = vc_malloc(sizeof(float) * (s->n ? s->n : 1));
    if (!out) return VC_ERR_NOMEM;
    vc_kl_rewards(s->data, old->data, ref->data, s->n, (float)ratio, out);
    *res = arr_out(out, s);
    free(out);
    return VC_OK;
}

static vc_status fn_masked(struct call *c, cJSON **res) {
    struct arr *x, *m;
    double flag;
    TRY(get_arr(c, "values", 1, &x));
    TRY(get_arr(c, "mask", 1, &m));
    TRY(same_size(c, m, "mask", x->n));
    if (!strcmp(c->fn, "masked_mean")) {
        *res = cJSON_CreateNumber((float)vc_masked_mean(x->data, m->data, x->n));
        return VC_OK;
    }
    if (!strcmp(c->fn, "masked_var")) {
        double var;
        TRY(get_num(c, "unbiased", 1.0, &flag));
        TRY(vc_masked_var(x->data, m->data, x->n, flag != 0, &var));
        *res = cJSON_CreateNumber((float)var);
        return VC_OK;
    }
    TRY(get_num(c, "shift_mean", 1.0, &flag));
    float *out = vc_malloc(sizeof(float) * (x->n ? x->n : 1));
    if (!out) return VC_ERR_NOMEM;
    vc_status st = vc_masked_whiten(x->data, m->data, x->n, flag != 0, out);
    if (!st) *res = arr_out(out, x);
    free(out);
    return st;
}

/* ------------------------------------------------------------------ dispatch */
#define NORM_ARGS "dp_size", "batch_num_tokens", "global_batch_size", "loss_scale_factor"
#define PG_ARGS "old_log_prob", "log_prob", "advantages", "response_mask", "loss_agg_mode", "clip_ratio", \
    "clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "rollout_is_weights", "dro_beta", "tau_pos", "tau_neg", \
    "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef", "with_grad", NORM_ARGS

struct fn_entry {
    const char *name;
    vc_status (*fn)(struct call *, cJSON **);
    const char *args[28];
};

static const struct fn_entry FNS[] = {
    { "gae_advantage_return", fn_gae, { "token_level_rewards", "values", "response_mask", "gamma", "lam" } },
    { "grpo_outcome_advantage", fn_grpo,
      { "token_level_rewards", "response_mask", "index", "epsilon", "norm_adv_by_std_in_grpo" } },
    { "grpo_vectorized_outcome_advantage", fn_grpo,
      { "token_level_rewards", "response_mask", "index", "epsilon", "norm_adv_by_std_in_grpo" } },
    { "grpo_passk_outcome_advantage", fn_grpo,
      { "token_level_rewards", "response_mask", "index", "epsilon", "norm_adv_by_std_in_grpo" } },
    { "rloo_outcome_advantage", fn_grouped, { "token_level_rewards", "response_mask", "index", "epsilon" } },
    { "rloo_vectorized_outcome_advantage", fn_grouped, { "token_level_rewards", "response_mask", "index", "epsilon" } },
    { "opo_outcome_advantage", fn_grouped, { "token_level_rewards", "response_mask", "index", "epsilon" } },
    { "gpg_outcome_advantage", fn_grouped,
      { "token_level_rewards", "response_mask", "index", "epsilon", "f_norm", "alpha" } },
    { "reinforce_plus_plus_baseline_outcome_advantage", fn_grouped,
      { "token_level_rewards", "response_mask", "index", "epsilon" } },
    { "reinforce_plus_plus_outcome_advantage", fn_rpp, { "token_level_rewards", "response_mask", "gamma" } },
    { "remax_outcome_advantage", fn_remax, { "token_level_rewards", "reward_baselines", "response_mask" } },
    { "agg_loss", fn_agg, { "loss_mat", "loss_mask", "loss_agg_mode", NORM_ARGS } },
    { "policy_loss_vanilla", fn_policy, { PG_ARGS } },
    { "policy_loss_gspo", fn_policy, { PG_ARGS } },
    { "policy_loss_cispo", fn_policy, { PG_ARGS } },
    { "policy_loss_dppo_tv", fn_policy, { PG_ARGS } },
    { "policy_loss_dppo_kl", fn_policy, { PG_ARGS } },
    { "policy_loss_dro", fn_policy, { PG_ARGS } },
    { "policy_loss_sapo", fn_policy, { PG_ARGS } },
    { "policy_loss_gpg", fn_policy, { PG_ARGS } },
    { "policy_loss_geo_mean", fn_policy, { PG_ARGS } },
    { "policy_loss_kl_cov", fn_policy, { PG_ARGS } },
    { "entropy_loss", fn_entropy_loss, { "logits", "response_mask", "loss_agg_mode", NORM_ARGS } },
    { "entropy_from_logits", fn_entropy, { "logits" } },
    { "value_loss", fn_value,
      { "vpreds", "returns", "values", "response_mask", "cliprange_value", "loss_agg_mode", "with_grad", NORM_ARGS } },
    { "kl_penalty", fn_kl, { "logprob", "ref_logprob", "kl_penalty" } },
    { "rewards", fn_rewards, { "token_level_scores", "old_log_prob", "ref_log_prob", "kl_ratio" } },
    { "masked_whiten", fn_masked, { "values", "mask", "shift_mean" } },
    { "masked_mean", fn_masked, { "values", "mask" } },
    { "masked_var", fn_masked, { "values", "mask", "unbiased" } },
};

static vc_status run_call(cJSON *inputs, cJSON *call, int i, cJSON **res) {
    cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "fn");
    cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "args");
    if (!cJSON_IsString(fn)) return vc_fail(VC_ERR_FORMAT, "calls[%d]: missing \"fn\"", i);
    if (args && !cJSON_IsObject(args)) return vc_fail(VC_ERR_FORMAT, "calls[%d]: \"args\" must be an object", i);
    const char *name = fn->valuestring;
    if (!strncmp(name, "compute_", 8)) name += 8; /* verl's full names are accepted too */
    const struct fn_entry *e = NULL;
    for (size_t k = 0; k < sizeof FNS / sizeof FNS[0]; k++)
        if (!strcmp(FNS[k].name, name)) e = &FNS[k];
    if (!e) return vc_fail(VC_ERR_UNSUPPORTED, "calls[%d]: unknown function '%s'", i, fn->valuestring);
    for (cJSON *a = args ? args->child : NULL; a; a = a->next) {
        int ok = 0;
        for (int k = 0; e->args[k] && !ok; k++) ok = !strcmp(e->args[k], a->string);
        if (!ok) return vc_fail(VC_ERR_ARG, "calls[%d]: %s: unknown argument '%s'", i, e->name, a->string);
    }
    struct call c = { .fn = e->name, .args = args, .inputs = inputs };
    *res = NULL;
    vc_status st = e->fn(&c, res);
    for (int k = 0; k < c.n_arrs; k++) free(c.arrs[k].data);
    for (int k = 0; k < c.n_idx; k++) free(c.idx[k]);
    free(c.idx);
    if (st) { cJSON_Delete(*res); *res = NULL; return vc_fail_ctx(st, "calls[%d]", i); }
    return VC_OK;
}

static vc_status algos_run(const char *path, char **out) {
    char *text = NULL;
    size_t len;
    cJSON *root = NULL, *results = NULL;
    vc_status st = vc_read_file(path, &text, &len);
    if (st) return st;
    root = cJSON_ParseWithLength(text, len);
    if (!root) { st = vc_fail(VC_ERR_FORMAT, "%s: invalid JSON", path); goto out; }
    cJSON *inputs = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(root, "calls");
    if (!cJSON_IsArray(calls)) { st = vc_fail(VC_ERR_FORMAT, "%s: missing \"calls\" array", path); goto out; }
    if (inputs && !cJSON_IsObject(inputs)) { st = vc_fail(VC_ERR_FORMAT, "%s: \"inputs\" must be an object", path); goto out; }
    results = cJSON_CreateArray();
    int i = 0;
    for (cJSON *call = calls->child; call; call = call->next, i++) {
        cJSON *r;
        st = run_call(inputs, call, i, &r);
        if (st) { vc_fail_ctx(st, "%s", path); goto out; }
        cJSON_AddItemToArray(results, r);
    }
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddItemToObject(doc, "results", results);
    results = NULL;
    *out = vc_json_print(doc, 0);
    cJSON_Delete(doc);
    if (!*out) st = vc_fail(VC_ERR_NOMEM, "cannot print results");
out:
    cJSON_Delete(results);
    cJSON_Delete(root);
    free(text);
    return st;
}

int vc_cmd_algos(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: verlc algos FILE.json\n"
                        "  FILE: {\"inputs\": {name: array}, \"calls\": [{\"fn\": name, \"args\": {...}}]}\n"
                        "  functions:");
        for (size_t k = 0; k < sizeof FNS / sizeof FNS[0]; k++) fprintf(stderr, " %s", FNS[k].name);
        fprintf(stderr, "\n");
        return argc == 2 ? 0 : 2;
    }
    char *out = NULL;
    vc_status st = algos_run(argv[1], &out);
    if (st) {
        fprintf(stderr, "verlc algos: %s\n", vc_last_error());
        return 1;
    }
    printf("%s\n", out);
    free(out);
    return 0;
}
