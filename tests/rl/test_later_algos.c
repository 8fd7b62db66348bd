/* Golden test of later verl's policy losses dppo_tv, dppo_kl and dro and its gdpo advantage estimator
 * (verl-project/verl 1dda039b) against verl's own functions (tests/fixtures/rl/later_algos_reference.json,
 * made by tools/fixtures/make_later_algos_ref.py): the loss, its gradient w.r.t. log_prob (torch autograd)
 * and verl's metrics, over aggregation modes, divergence bounds, truncation at clip_ratio_c and rollout IS
 * weights; GDPO's advantages with weights, without std normalisation, booleans as components and a
 * singleton group. Also: dro without dro_beta is refused, the loss names parse. */
#include "../../src/rl/rl_internal.h"
#include "verlc/core.h"
#include "verlc/ops.h"
#include "verlc/tensor.h"
#include "verlc/json.h"
#include "verlc/rl.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *matrix(const cJSON *m, int B, int T) {
    float *out = calloc((size_t)B * T, sizeof(float));
    for (int i = 0; i < B; i++)
        for (int j = 0; j < T; j++) out[i * T + j] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(m, i), j)->valuedouble;
    return out;
}

static double num(const cJSON *o, const char *k, double def) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : def;
}

static void policy_losses(const cJSON *ref) {
    int B = (int)num(ref, "B", 0), T = (int)num(ref, "T", 0), n = 0;
    float *mask = matrix(cJSON_GetObjectItem(ref, "mask"), B, T);
    float *old = matrix(cJSON_GetObjectItem(ref, "old_log_prob"), B, T);
    float *lp = matrix(cJSON_GetObjectItem(ref, "log_prob"), B, T);
    float *adv = matrix(cJSON_GetObjectItem(ref, "advantages"), B, T);
    float *isw = matrix(cJSON_GetObjectItem(ref, "rollout_is_weights"), B, T);
    float *g = calloc((size_t)B * T, sizeof(float));
    for (const cJSON *c = cJSON_GetObjectItem(ref, "cases")->child; c; c = c->next, n++) {
        const char *name = cJSON_GetObjectItem(c, "mode")->valuestring;
        const cJSON *kw = cJSON_GetObjectItem(c, "config"), *jm = cJSON_GetObjectItem(c, "metrics");
        vc_pg_mode mode;
        vc_pg_config cfg;
        vc_pg_config_default(&cfg);
        CHECK_OK(vc_pg_mode_parse(name, &mode));
        CHECK_OK(vc_agg_mode_parse(cJSON_GetObjectItem(c, "agg")->valuestring, &cfg.agg));
        cfg.clip_ratio = num(kw, "clip_ratio", 0.2);
        cfg.clip_ratio_low = num(kw, "clip_ratio_low", -1);
        cfg.clip_ratio_high = num(kw, "clip_ratio_high", -1);
        cfg.clip_ratio_c = num(kw, "clip_ratio_c", 3.0);
        cfg.dro_beta = num(kw, "dro_beta", 0);
        double loss = 0;
        vc_pg_metrics m;
        const float *w = cJSON_IsTrue(cJSON_GetObjectItem(c, "is_weights")) ? isw : NULL;
        CHECK_OK(vc_policy_loss(mode, old, lp, adv, mask, B, T, &cfg, w, &loss, &m, g));
        float *want = matrix(cJSON_GetObjectItem(c, "grad"), B, T);
        double gw = 0, wl = num(c, "loss", NAN);
        for (int k = 0; k < B * T; k++) gw = fmax(gw, fabs(g[k] - want[k]));
        CHECK_MSG(fabs(loss - wl) < 2e-6 * fmax(1, fabs(wl)), "case %d (%s): loss %.8g, verl %.8g", n, name, loss, wl);
        CHECK_MSG(gw < 2e-6, "case %d (%s): gradient differs from verl's by %g", n, name, gw);
        double wk = num(jm, "actor/ppo_kl", NAN);
        CHECK_MSG(fabs(m.ppo_kl - wk) < 1e-6, "case %d (%s): ppo_kl %.8g, verl %.8g", n, name, m.ppo_kl, wk);
        if (cJSON_GetObjectItem(jm, "actor/pg_clipfrac")) {
            double wc = num(jm, "actor/pg_clipfrac", NAN), wlo = num(jm, "actor/pg_clipfrac_lower", NAN);
            CHECK_MSG(fabs(m.pg_clipfrac - wc) < 1e-6 && fabs(m.pg_clipfrac_lower - wlo) < 1e-6,
                      "case %d (%s): pg_clipfrac %g / lower %g, verl %g / %g", n, name, m.pg_clipfrac,
                      m.pg_clipfrac_lower, wc, wlo);
        }
        free(want);
    }
    CHECK_MSG(n >= 9, "%d policy-loss cases in the reference", n);
    /* verl's ValueError: dro needs a positive beta */
    vc_pg_config cfg;
    vc_pg_config_default(&cfg);
    double loss;
    CHECK(vc_policy_loss(VC_PG_DRO, old, lp, adv, mask, B, T, &cfg, NULL, &loss, NULL, NULL) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "dro_beta") != NULL);
    free(mask), free(old), free(lp), free(adv), free(isw), free(g);
}

static void gdpo(const cJSON *ref) {
    const cJSON *gd = cJSON_GetObjectItem(ref, "gdpo");
    int B = (int)num(gd, "B", 0), T = (int)num(gd, "T", 0), n = 0;
    float *mask = matrix(cJSON_GetObjectItem(gd, "response_mask"), B, T);
    float *s = calloc((size_t)2 * B, sizeof(float)), *adv = calloc((size_t)B * T, sizeof(float));
    float *ret = calloc((size_t)B * T, sizeof(float));
    const char **idx = calloc((size_t)B, sizeof *idx);
    for (int i = 0; i < B; i++) {
        idx[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(gd, "uid"), i)->valuestring;
        s[i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(gd, "accuracy_reward"), i)->valuedouble;
        s[B + i] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(gd, "format_reward"), i)->valuedouble;
    }
    const float *rows[2] = { s, s + B };
    for (const cJSON *c = cJSON_GetObjectItem(gd, "cases")->child; c; c = c->next, n++) {
        const cJSON *jw = cJSON_GetObjectItem(c, "weights");
        float w[2] = { 1, 1 };
        for (int k = 0; k < 2 && cJSON_IsArray(jw); k++) w[k] = (float)cJSON_GetArrayItem(jw, k)->valuedouble;
        int norm = cJSON_IsTrue(cJSON_GetObjectItem(c, "norm_adv_by_std_in_grpo"));
        CHECK_OK(vc_adv_gdpo(rows, cJSON_IsArray(jw) ? w : NULL, 2, mask, idx, B, T, norm, 1e-6f, adv, ret));
        float *want = matrix(cJSON_GetObjectItem(c, "advantages"), B, T);
        float *wret = matrix(cJSON_GetObjectItem(c, "returns"), B, T);
        double worst = 0;
        for (int k = 0; k < B * T; k++) worst = fmax(worst, fmax(fabs(adv[k] - want[k]), fabs(ret[k] - wret[k])));
        CHECK_MSG(worst < 2e-6, "gdpo case %d: max difference %g from verl", n, worst);
        free(want), free(wret);
    }
    CHECK_MSG(n >= 3, "%d gdpo cases in the reference", n);
    CHECK(vc_adv_gdpo(rows, NULL, 0, mask, idx, B, T, 1, 1e-6f, adv, ret) == VC_ERR_SHAPE);
    free(mask), free(s), free(adv), free(ret), free(idx);
}

/* forward_kl_topk: the student's logits [P, V] through vc_op_logsoftmax_gather at the teacher's top-k ids, the
 * per-position loss (rl_distill_topk) aggregated as verl's distillation_loss; the loss, the gradient w.r.t. the
 * logits and the mass metrics against verl's compute_forward_kl_topk + distillation_loss */
static void distillation_topk(const cJSON *ref) {
    int P = (int)num(ref, "P", 0), V = (int)num(ref, "V", 0), K = (int)num(ref, "K", 0), n = 0;
    CHECK_MSG(P > 0 && V > 0 && K > 0, "distill_reference.json: no topk part");
    if (!(P > 0 && V > 0 && K > 0)) return;
    float *lg = matrix(cJSON_GetObjectItem(ref, "student_logits"), P, V), *tl = matrix(cJSON_GetObjectItem(ref, "teacher_logprobs"), P, K);
    float *mask = calloc((size_t)P, 4), *gx = calloc((size_t)P * V, 4);
    for (int q = 0; q < P; q++) mask[q] = (float)cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "mask"), q)->valuedouble;
    int32_t *ids = calloc((size_t)P * K, 4);
    for (int q = 0; q < P; q++)
        for (int k = 0; k < K; k++)
            ids[q * K + k] = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "teacher_ids"), q), k)->valueint;
    float *s = calloc((size_t)P * K, 4), *ds = calloc((size_t)P * K, 4), *loss = calloc((size_t)P, 4);
    float *sm = calloc((size_t)P, 4), *tm = calloc((size_t)P, 4), *dkl = calloc((size_t)P, 4), *tmp = calloc((size_t)P, 4);
    float *gl = calloc((size_t)P, 4), *wk = calloc((size_t)P * K, 4), *ovn = calloc((size_t)P, 4), *ova = calloc((size_t)P, 4);
    int32_t *sid = calloc((size_t)P * K, 4);
    for (const cJSON *c = cJSON_GetObjectItem(ref, "cases")->child; c; c = c->next, n++) {
        const cJSON *jm = cJSON_GetObjectItem(c, "metrics"), *lpc = cJSON_GetObjectItem(c, "log_prob_min_clamp");
        rl_distill_cfg dc = { .on = 1, .coef = 1, .use_task_rewards = 1, .clamp = num(c, "clamp", 0), .topk = K,
                              .lp_min_clamp = cJSON_IsNumber(lpc) ? lpc->valuedouble : NAN };
        vc_agg_mode agg;
        CHECK_OK(vc_agg_mode_parse(cJSON_GetObjectItem(c, "agg")->valuestring, &agg));
        vc_graph *g = vc_graph_new();
        vc_tensor x;
        int64_t sh[2] = { P, V };
        memset(gx, 0, sizeof(float) * (size_t)P * V);
        vc_param_init(&x, lg, gx, 2, sh);
        x.requires_grad = 1;
        vc_tensor *lsg = vc_op_logsoftmax_gather(g, &x, ids, K, sid);
        CHECK_OK(vc_tensor_read(lsg, s));
        rl_distill_topk(&dc, s, tl, ids, sid, P, K, &(rl_topk_out){ loss, ds, sm, tm, ovn, ova });
        rl_distill_out o;
        CHECK_OK(rl_distill_tokens(&dc, agg, NULL, s, s, s, mask, NULL, 1, P, loss, dkl, tmp, gl, &o));
        for (int q = 0; q < P; q++)
            for (int k = 0; k < K; k++) wk[q * K + k] = gl[q] * ds[q * K + k];
        CHECK_OK(vc_graph_backward(g, vc_op_dot_const(g, lsg, wk), 1.0f));
        float *want = matrix(cJSON_GetObjectItem(c, "grad"), P, V);
        double gw = 0, wl = num(c, "loss", NAN);
        for (int i = 0; i < P * V; i++) gw = fmax(gw, fabs(gx[i] - want[i]));
        CHECK_MSG(fabs(o.loss - wl) < 2e-6 * fmax(1, fabs(wl)), "topk case %d: loss %.8g, verl %.8g", n, o.loss, wl);
        CHECK_MSG(gw < 2e-6, "topk case %d: gradient w.r.t. the logits differs from verl's by %g", n, gw);
        double m[8] = { 0, INFINITY, -INFINITY, 0, INFINITY, -INFINITY, 0, 0 }, cnt = 0, nov = 0;
        for (int q = 0; q < P; q++)
            if (mask[q] > 0) {
                m[0] += sm[q], m[1] = fmin(m[1], sm[q]), m[2] = fmax(m[2], sm[q]), cnt += 1;
                m[3] += tm[q], m[4] = fmin(m[4], tm[q]), m[5] = fmax(m[5], tm[q]);
                m[6] += ovn[q];
                if (ovn[q] > 0) m[7] += ova[q], nov += 1;
            }
        m[0] /= cnt, m[3] /= cnt, m[6] /= cnt * K, m[7] = nov > 0 ? m[7] / nov : 0;
        static const char *MK[] = { "distillation/student_mass", "distillation/student_mass_min",
                                    "distillation/student_mass_max", "distillation/teacher_mass",
                                    "distillation/teacher_mass_min", "distillation/teacher_mass_max",
                                    "distillation/overlap_ratio", "distillation/overlap_token_advantage" };
        CHECK_MSG(m[6] > 0 && m[6] < 1, "topk case %d: an overlap ratio of %g does not test the overlap", n, m[6]);
        for (int k = 0; k < 8; k++)
            CHECK_MSG(fabs(m[k] - num(jm, MK[k], NAN)) < 2e-6, "topk case %d: %s %.8g, verl %.8g", n, MK[k], m[k],
                      num(jm, MK[k], NAN));
        CHECK_MSG(fabs(o.loss_min - num(jm, "distillation/loss_min", NAN)) < 2e-6 &&
                  fabs(o.loss_max - num(jm, "distillation/loss_max", NAN)) < 2e-6 * fmax(1, o.loss_max),
                  "topk case %d: loss range %g..%g", n, o.loss_min, o.loss_max);
        free(want);
        vc_graph_free(g);
    }
    printf("distillation forward_kl_topk: %d cases matched (loss, logits' gradient, masses, overlap)\n", n);
    CHECK(n >= 4);
    free(lg), free(tl), free(mask), free(gx), free(ids), free(s), free(ds), free(loss), free(sm), free(tm), free(dkl);
    free(ovn), free(ova), free(sid);
    free(tmp), free(gl), free(wk);
}

/* later verl's on-policy distillation loss (tests/fixtures/rl/distill_reference.json, made by
 * tools/fixtures/make_distill_ref.py from verl's distillation_loss): each estimator, loss_max_clamp, the three
 * aggregations, and use_policy_gradient's vanilla policy loss; the loss, its gradient and the metrics */
static void distillation(void) {
    const char *path = "tests/fixtures/rl/distill_reference.json";
    cJSON *ref = NULL;
    vc_json_load_file(path, &ref);
    CHECK_MSG(ref != NULL, "%s: missing or not JSON", path);
    if (!ref) return;
    int B = (int)num(ref, "B", 0), T = (int)num(ref, "T", 0), n = 0;
    float *mask = matrix(cJSON_GetObjectItem(ref, "mask"), B, T), *old = matrix(cJSON_GetObjectItem(ref, "old"), B, T);
    float *lp = matrix(cJSON_GetObjectItem(ref, "student"), B, T), *te = matrix(cJSON_GetObjectItem(ref, "teacher"), B, T);
    size_t nt = (size_t)B * T;
    float *kl = calloc(nt, 4), *dkl = calloc(nt, 4), *tmp = calloc(nt, 4), *g = calloc(nt, 4);
    for (const cJSON *c = cJSON_GetObjectItem(ref, "cases")->child; c; c = c->next, n++) {
        const char *mode = cJSON_GetObjectItem(c, "mode")->valuestring;
        const cJSON *jm = cJSON_GetObjectItem(c, "metrics");
        rl_distill_cfg dc = { .on = 1, .coef = 1, .use_task_rewards = 1, .clamp = num(c, "clamp", 0),
                              .use_pg = cJSON_IsTrue(cJSON_GetObjectItem(c, "use_pg")) };
        vc_pg_config_default(&dc.pg);
        dc.pg.clip_ratio = 0.2;
        dc.pg.clip_ratio_low = 0.2;
        dc.pg.clip_ratio_high = num(c, "clip_ratio_high", 0.2);
        vc_agg_mode agg;
        CHECK_OK(vc_kl_parse(mode, &dc.spec));
        CHECK_OK(vc_agg_mode_parse(cJSON_GetObjectItem(c, "agg")->valuestring, &agg));
        rl_distill_out o;
        CHECK_OK(rl_distill_tokens(&dc, agg, NULL, lp, te, old, mask, NULL, B, T, kl, dkl, tmp, g, &o));
        float *want = matrix(cJSON_GetObjectItem(c, "grad"), B, T);
        double gw = 0, wl = num(c, "loss", NAN);
        for (size_t k = 0; k < nt; k++) gw = fmax(gw, fabs(g[k] - want[k]));
        CHECK_MSG(fabs(o.loss - wl) < 2e-6 * fmax(1, fabs(wl)), "distillation case %d (%s): loss %.8g, verl %.8g", n,
                  mode, o.loss, wl);
        CHECK_MSG(gw < 2e-6, "distillation case %d (%s): gradient differs from verl's by %g", n, mode, gw);
        static const char *K[] = { "distillation/abs_loss", "distillation/loss_min", "distillation/loss_max",
                                   "distillation/ppo_kl", "distillation/pg_clipfrac", "distillation/pg_clipfrac_lower" };
        double got[] = { o.abs_loss, o.loss_min, o.loss_max, o.ppo_kl, o.pg_clipfrac, o.pg_clipfrac_lower };
        for (int k = 0; k < 6; k++) {
            const cJSON *x = cJSON_GetObjectItem(jm, K[k]);
            CHECK_MSG(!x == (k >= 3 && !dc.use_pg), "distillation case %d (%s): %s %s", n, mode, K[k],
                      x ? "unexpected" : "missing");
            if (x) CHECK_MSG(fabs(got[k] - x->valuedouble) < 2e-6 * fmax(1, fabs(x->valuedouble)),
                             "distillation case %d (%s): %s %.8g, verl %.8g", n, mode, K[k], got[k], x->valuedouble);
        }
        free(want);
    }
    printf("distillation: %d cases of verl's distillation_loss (estimators, clamp, policy gradient) matched\n", n);
    distillation_topk(cJSON_GetObjectItem(ref, "topk"));
    CHECK_MSG(n >= 8, "%d distillation cases in the reference", n);
    free(mask), free(old), free(lp), free(te), free(kl), free(dkl), free(tmp), free(g);
    cJSON_Delete(ref);
}

int main(void) {
    const char *path = "tests/fixtures/rl/later_algos_reference.json";
    cJSON *ref = NULL;
    vc_json_load_file(path, &ref);
    CHECK_MSG(ref != NULL, "%s: missing or not JSON", path);
    if (!ref) return vc_test_done();
    policy_losses(ref);
    gdpo(ref);
    distillation();
    vc_pg_mode m;
    CHECK(vc_pg_mode_parse("dppo", &m) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "dppo_kl"));
    cJSON_Delete(ref);
    return vc_test_done();
}
