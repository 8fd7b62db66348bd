/* The actor and critic updates on the shared training core (train.h's vc_trainer with the PPO loss
 * callbacks): a mini-batch split into micro-batches (by count or by token budget) must give the same
 * loss and gradient norm as one micro-batch, for every loss aggregation mode (verl's global-batch
 * normalisers); the policy loss must fall after an update; the critic's value head learns returns.
 * Packed positions of response log-probs are checked against a one-row forward, and the rollout
 * engine's log-probs against the trainer's recomputation. */
#include "../../src/rl/demo_internal.h"
#include "../../src/rl/trainer_internal.h"
#include "verlc/ops.h"
#include "verlc/rng.h"
#include "vc_test.h"
#include <unistd.h>

static vc_model *make_model(const char *tag) {
    char p[128];
    snprintf(p, sizeof p, "/tmp/verlc_tupd_%d_%s.json", (int)getpid(), tag);
    vc_model *m = NULL;
    CHECK_OK(demo_write_model_config(p, DEMO_VOCAB));
    CHECK_OK(vc_model_init_random(p, 11, &m));
    unlink(p);
    return m;
}

/* 5 rows of different prompt / response lengths with random advantages */
static void make_batch(rl_batch *b) {
    static const int PL[] = { 4, 6, 5, 3, 6 }, RL[] = { 3, 1, 4, 2, 4 };
    int64_t tot = 0;
    for (int i = 0; i < 5; i++) tot += PL[i] + RL[i];
    CHECK_OK(rl_batch_alloc(b, 5, 4, tot));
    for (int i = 0; i < 5; i++) {
        int64_t o = b->cu[i];
        for (int t = 0; t < PL[i] + RL[i]; t++) b->ids[o + t] = 2 + (int32_t)vc_rng_below(12, 5, i, t, 0);
        b->cu[i + 1] = o + PL[i] + RL[i];
        b->plen[i] = PL[i];
        b->rlen[i] = RL[i];
        char uid[8];
        snprintf(uid, sizeof uid, "%d", i / 2);
        b->uid[i] = vc_strdup(uid);
        for (int j = 0; j < RL[i]; j++) {
            b->mask[i * 4 + j] = 1;
            b->adv[i * 4 + j] = vc_rng_normal(9, i, j, 0);
            b->ret[i * 4 + j] = 0.5f * (float)(i % 3);
        }
    }
}

/* a model, its actor trainer (lr as a config value) and make_batch's rows */
typedef struct upd {
    vc_model *m;
    vc_config *cfg;
    vc_trainer tr;
    rl_batch b;
} upd;

static void upd_open(upd *u, const char *tag, const char *lr) {
    u->m = make_model(tag);
    char ov0[64];
    snprintf(ov0, sizeof ov0, "actor_rollout_ref.actor.optim.lr=%s", lr);
    char *ov[] = { ov0 };
    CHECK_OK(vc_config_load(NULL, 1, ov, &u->cfg));
    CHECK_OK(rl_trainer_init(&u->tr, u->m, NULL, 0, u->cfg, "actor_rollout_ref.actor", 10, 0));
    make_batch(&u->b);
}

static void upd_close(upd *u) {
    rl_batch_free(&u->b);
    vc_trainer_free(&u->tr);
    vc_config_free(u->cfg);
    vc_model_free(u->m);
}

static void run_update(vc_agg_mode agg, int micro_rows, int64_t max_tokens, double *loss, double *gn) {
    upd u;
    upd_open(&u, "a", "1e-2");
    rl_actor_cfg c = { .ppo_epochs = 1, .mini_rows = 5, .micro_rows = micro_rows, .max_tokens = max_tokens,
                       .entropy_coeff = 0.01, .use_kl_loss = 0 };
    vc_pg_config_default(&c.pg);
    c.pg.agg = agg;
    rl_metrics met = { 0 };
    CHECK_OK(rl_update_actor(&u.tr, &u.b, &c, 1, &met));
    CHECK(rl_metrics_get(&met, "actor/pg_loss", loss));
    CHECK(rl_metrics_get(&met, "actor/grad_norm", gn));
    CHECK(u.tr.step == 1);
    rl_metrics_free(&met);
    upd_close(&u);
}

static void test_accumulation(void) {
    for (int agg = 0; agg < 4; agg++) {
        double l1, g1, l2, g2, l3, g3;
        run_update((vc_agg_mode)agg, 0, 0, &l1, &g1);
        run_update((vc_agg_mode)agg, 1, 0, &l2, &g2);
        run_update((vc_agg_mode)agg, 0, 15, &l3, &g3);
        CHECK_MSG(fabs(l1 - l2) < 1e-5 && fabs(l1 - l3) < 1e-5, "%s: pg_loss %g / %g / %g", vc_agg_mode_name(agg), l1, l2, l3);
        CHECK_MSG(fabs(g1 - g2) < 1e-4 * (1 + g1) && fabs(g1 - g3) < 1e-4 * (1 + g1), "%s: grad_norm %g / %g / %g",
                  vc_agg_mode_name(agg), g1, g2, g3);
        CHECK_MSG(g1 > 0, "zero gradient");
    }
}

/* policy loss with fixed old log-probs falls after a few updates (off-policy path) */
static void test_descent(void) {
    upd u;
    upd_open(&u, "b", "3e-3");
    vc_model *m = u.m;
    rl_batch *b = &u.b;
    vc_graph *g = vc_graph_new();
    CHECK_OK(rl_batch_logprobs(m, g, b, 0, 1.0f, b->old_logp, NULL, NULL));
    /* packed positions: row 2's log-probs equal a one-row forward */
    rl_batch one;
    CHECK_OK(rl_batch_alloc(&one, 1, 4, b->cu[3] - b->cu[2]));
    memcpy(one.ids, b->ids + b->cu[2], sizeof(int32_t) * (size_t)(b->cu[3] - b->cu[2]));
    one.cu[1] = b->cu[3] - b->cu[2];
    one.plen[0] = b->plen[2];
    one.rlen[0] = b->rlen[2];
    CHECK_OK(rl_batch_logprobs(m, g, &one, 0, 1.0f, one.old_logp, NULL, NULL));
    for (int j = 0; j < 4; j++) CHECK_NEAR(one.old_logp[j], b->old_logp[2 * 4 + j], 1e-5);
    rl_batch_free(&one);
    rl_actor_cfg c = { .ppo_epochs = 3, .mini_rows = 5 };
    vc_pg_config_default(&c.pg);
    double before = 0, after = 0;
    vc_pg_metrics pm;
    CHECK_OK(vc_policy_loss(VC_PG_VANILLA, b->old_logp, b->old_logp, b->adv, b->mask, 5, 4, &c.pg, NULL, &before, &pm, NULL));
    rl_metrics met = { 0 };
    CHECK_OK(rl_update_actor(&u.tr, b, &c, 0, &met));
    CHECK(u.tr.step == 3);
    float lp[20];
    CHECK_OK(rl_batch_logprobs(m, g, b, 0, 1.0f, lp, NULL, NULL));
    CHECK_OK(vc_policy_loss(VC_PG_VANILLA, b->old_logp, lp, b->adv, b->mask, 5, 4, &c.pg, NULL, &after, &pm, NULL));
    CHECK_MSG(after < before - 1e-3, "policy loss did not fall: %g -> %g", before, after);
    rl_metrics_free(&met);
    vc_graph_free(g);
    upd_close(&u);
}

/* one off-policy update of make_batch's rows (old log-probs perturbed from the model's) with c; the reported
 * pg_loss, and the loss vc_policy_loss gives at the start over rows [r0, r0 + n) with normalisers nm */
static double update_pg(rl_actor_cfg *c, int r0, int n, const vc_agg_norm *nm, double *want) {
    upd u;
    upd_open(&u, "l", "1e-2");
    vc_model *m = u.m;
    rl_batch *b = &u.b;
    vc_graph *g = vc_graph_new();
    float lp[20];
    CHECK_OK(rl_batch_logprobs(m, g, b, 0, 1.0f, lp, NULL, NULL));
    for (int k = 0; k < 20; k++) b->old_logp[k] = lp[k] + 0.3f * (float)vc_rng_normal(5, k, 0, 0);
    b->have_old = 1;
    vc_pg_config pg = c->pg;
    pg.norm = nm ? *nm : (vc_agg_norm){ 0 };
    vc_pg_metrics pm;
    CHECK_OK(vc_policy_loss(VC_PG_VANILLA, b->old_logp + 4 * r0, lp + 4 * r0, b->adv + 4 * r0, b->mask + 4 * r0, n, 4, &pg,
                            NULL, want, &pm, NULL));
    rl_metrics met = { 0 };
    double got = NAN;
    CHECK_OK(rl_update_actor(&u.tr, b, c, 0, &met));
    CHECK(rl_metrics_get(&met, "actor/pg_loss", &got));
    rl_metrics_free(&met);
    vc_graph_free(g);
    upd_close(&u);
    return got;
}

/* trainer.use_legacy_worker_impl=enable (verl b178a3cd's dp_actor): each micro-batch's loss is its own token-mean,
 * scaled by 1 / (mini-batch / micro-batch rows), and the reported pg_loss is the sum of those; by default the
 * mini-batch's tokens normalise every micro-batch (verl's engine workers). Rows of 3, 1, 4, 2 and 4 response tokens
 * make the two differ. */
static void test_legacy_normalisation(void) {
    rl_actor_cfg c = { .ppo_epochs = 1, .mini_rows = 5, .micro_rows = 1 };
    vc_pg_config_default(&c.pg);
    double want_global, want_legacy = 0, w;
    CHECK_NEAR(update_pg(&c, 0, 5, NULL, &want_global), want_global, 1e-5);
    c.legacy = 1;
    double got = 0;
    for (int i = 0; i < 5; i++) { /* the mean of the rows' own token-means */
        got = update_pg(&c, i, 1, NULL, &w);
        want_legacy += w / 5;
    }
    CHECK_NEAR(got, want_legacy, 1e-5);
    CHECK_MSG(fabs(want_global - want_legacy) > 1e-3, "the batch does not tell the normalisations apart: %g / %g",
              want_global, want_legacy);
}

/* seq-mean-token-sum-norm divides by the responses' padded width, verl's rollout.response_length (resp_width), not
 * by the batch's longest response (4 here), or by actor.loss_scale_factor when set (scale_len); the legacy workers
 * do not read loss_scale_factor */
static void test_norm_width(void) {
    rl_actor_cfg c = { .ppo_epochs = 1, .mini_rows = 5, .micro_rows = 5, .resp_width = 10 };
    vc_pg_config_default(&c.pg);
    c.pg.agg = VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM;
    double want, four;
    vc_agg_norm w10 = { 1, 0, 0, 10 }, w7 = { 1, 0, 0, 7 };
    CHECK_NEAR(update_pg(&c, 0, 5, &w10, &want), want, 1e-6);
    update_pg(&c, 0, 5, NULL, &four);
    CHECK_MSG(fabs(want - four) > 1e-3, "width 10 and 4 give %g and %g", want, four);
    c.scale_len = 7;
    CHECK_NEAR(update_pg(&c, 0, 5, &w7, &want), want, 1e-6);
    c.legacy = 1;
    CHECK_NEAR(update_pg(&c, 0, 5, &w10, &want), want, 1e-6);
}

/* a critic on the demo backbone with a zero value head (as rl_critic_load builds it) */
static void make_critic(rl_critic *cr) {
    memset(cr, 0, sizeof *cr);
    cr->m = make_model("c");
    int64_t H = vc_model_cfg(cr->m)->hidden;
    cr->w = vc_calloc((size_t)H + 1, sizeof(float));
    cr->gw = vc_calloc((size_t)H + 1, sizeof(float));
    vc_param_init(&cr->head_w, cr->w, cr->gw, 2, (int64_t[]){ 1, H });
    vc_param_init(&cr->head_b, cr->w + H, cr->gw + H, 1, (int64_t[]){ 1 });
    cr->head[0] = &cr->head_w;
    cr->head[1] = &cr->head_b;
}

static void run_critic(int micro_rows, int64_t max_tokens, int legacy, int steps, double *vf0, double *vf_last,
                       double *gn0) {
    rl_critic cr;
    make_critic(&cr);
    vc_config *cfg = NULL;
    char *ov[] = { "critic.optim.lr=1e-2" };
    CHECK_OK(vc_config_load(NULL, 1, ov, &cfg));
    vc_trainer tr;
    CHECK_OK(rl_trainer_init(&tr, cr.m, cr.head, 2, cfg, "critic", 10, 1));
    CHECK(tr.n_params == vc_model_n_params(cr.m) + 2);
    rl_batch b;
    make_batch(&b);
    rl_critic_cfg c = { .cliprange_value = 0.5, .agg = VC_AGG_TOKEN_MEAN, .ppo_epochs = 1, .mini_rows = 5,
                        .micro_rows = micro_rows, .max_tokens = max_tokens, .legacy = legacy };
    for (int s = 0; s < steps; s++) {
        rl_metrics met = { 0 };
        CHECK_OK(rl_update_critic(&tr, &cr, &b, &c, &met));
        double vf = 0;
        CHECK(rl_metrics_get(&met, "critic/vf_loss", &vf));
        if (s == 0) {
            *vf0 = vf;
            CHECK(rl_metrics_get(&met, "critic/grad_norm", gn0));
        }
        *vf_last = vf;
        rl_metrics_free(&met);
    }
    CHECK_MSG(cr.w[vc_model_cfg(cr.m)->hidden] != 0.0f, "value head bias did not move");
    rl_batch_free(&b);
    vc_trainer_free(&tr);
    vc_config_free(cfg);
    rl_critic_free(&cr);
}

static void test_critic(void) {
    double a0, a1, ga, b0, b1, gb, c0, c1, gc;
    run_critic(0, 0, 0, 1, &a0, &a1, &ga);
    run_critic(2, 0, 0, 1, &b0, &b1, &gb);
    run_critic(0, 12, 0, 1, &c0, &c1, &gc);
    CHECK_MSG(fabs(a0 - b0) < 1e-5 && fabs(a0 - c0) < 1e-5, "vf_loss %g / %g / %g", a0, b0, c0);
    CHECK_MSG(fabs(ga - gb) < 1e-4 * (1 + ga) && fabs(ga - gc) < 1e-4 * (1 + ga), "critic grad_norm %g / %g / %g", ga, gb, gc);
    /* the legacy workers: the rows' own value losses (the zero head predicts 0 everywhere) averaged over the five
     * micro-batches of one row, not token-weighted */
    rl_batch b;
    make_batch(&b);
    float zero[4] = { 0 }, d[4];
    double want = 0, vf, cf;
    for (int i = 0; i < 5; i++) {
        CHECK_OK(vc_value_loss(zero, b.ret + 4 * i, b.values + 4 * i, b.mask + 4 * i, 1, 4, 0.5f, VC_AGG_TOKEN_MEAN, NULL,
                               &vf, &cf, d));
        want += vf / 5;
    }
    rl_batch_free(&b);
    run_critic(1, 0, 1, 1, &b0, &b1, &gb);
    CHECK_NEAR(b0, want, 1e-6);
    CHECK_MSG(fabs(a0 - want) > 1e-3, "the batch does not tell the normalisations apart: %g / %g", a0, want);
    run_critic(0, 0, 0, 8, &a0, &a1, &ga);
    CHECK_MSG(a1 < 0.7 * a0, "value loss did not fall: %g -> %g", a0, a1);
}

/* the rollout engine's log-probs against the trainer's recomputation: the model's own (raw) against the
 * trainer at temperature 1, and those of the distribution sampled from (vLLM's processed_logprobs, verl's
 * default) against the trainer at the sampling temperature, as verl's actor divides its logits by it */
static void test_rollout_logprobs(void) {
    vc_model *m = make_model("d");
    vc_rollout_engine *e = NULL;
    CHECK_OK(vc_rollout_new(m, NULL, &e));
    int32_t p0[] = { 3, 4, 5, 6, 12 }, p1[] = { 7, 8, 13 };
    vc_rollout_request r[2] = { { p0, 5, 3, 0 }, { p1, 3, 2, 1 } };
    vc_sampling s = { .temperature = 0.7f, .top_p = 1, .max_new_tokens = 6, .seed = 5 };
    vc_rollout_sample *out = NULL;
    int n = 0;
    CHECK_OK(vc_rollout_generate(e, r, 2, &s, &out, &n));
    CHECK(n == 5);
    rl_batch b;
    int64_t tot = 0;
    for (int i = 0; i < n; i++) tot += r[out[i].request].prompt_len + out[i].n_tokens;
    CHECK_OK(rl_batch_alloc(&b, n, 6, tot));
    for (int i = 0; i < n; i++) {
        const vc_rollout_request *q = &r[out[i].request];
        memcpy(b.ids + b.cu[i], q->prompt, sizeof(int32_t) * (size_t)q->prompt_len);
        memcpy(b.ids + b.cu[i] + q->prompt_len, out[i].tokens, sizeof(int32_t) * (size_t)out[i].n_tokens);
        b.cu[i + 1] = b.cu[i] + q->prompt_len + out[i].n_tokens;
        b.plen[i] = q->prompt_len;
        b.rlen[i] = out[i].n_tokens;
    }
    vc_graph *g = vc_graph_new();
    CHECK_OK(rl_batch_logprobs(m, g, &b, 0, 1.0f, b.old_logp, NULL, NULL));
    CHECK_OK(rl_batch_logprobs(m, g, &b, 0, 0.7f, b.ref_logp, NULL, NULL));
    double mx = 0, mt = 0, gap = 0;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < out[i].n_tokens; j++) {
            mx = fmax(mx, fabs(out[i].logp[j] - b.old_logp[i * 6 + j]));
            mt = fmax(mt, fabs(out[i].logp_sampled[j] - b.ref_logp[i * 6 + j]));
            gap = fmax(gap, fabs(b.old_logp[i * 6 + j] - b.ref_logp[i * 6 + j]));
        }
    CHECK_MSG(mx < 1e-4, "rollout vs trainer log-prob max diff %g", mx);
    CHECK_MSG(mt < 1e-4, "rollout (processed, temperature 0.7) vs trainer at 0.7: max diff %g", mt);
    CHECK_MSG(gap > 1e-2, "the temperature changed the trainer's log-probs by only %g", gap);
    vc_graph_free(g);
    rl_batch_free(&b);
    vc_rollout_samples_free(out, n);
    vc_rollout_free(e);
    vc_model_free(m);
}

/* Rollout correction's bypass mode in the actor: the policy loss is taken against the rollout's
 * log-probs (b.old_logp holds them, as the trainer sets them) with this micro-batch's importance weights
 * (reinforce) and rejection mask, normalised by the mini-batch's full token count as verl's
 * global_batch_info does. pg_loss must equal the loss computed on the host from the model's log-probs,
 * and per-row options must not depend on the micro-batch split. */
typedef struct bypass_case {
    int reinforce, is_level;
    const char *rs, *thr;
} bypass_case;

static void run_bypass(const bypass_case *bc, int micro_rows, double *got, double *want, rl_metrics *met) {
    vc_model *m = make_model("e");
    vc_config *cfg = NULL;
    char *ov[] = { "actor_rollout_ref.actor.optim.lr=1e-2" };
    CHECK_OK(vc_config_load(NULL, 1, ov, &cfg));
    vc_trainer tr;
    CHECK_OK(rl_trainer_init(&tr, m, NULL, 0, cfg, "actor_rollout_ref.actor", 10, 0));
    rl_batch b;
    make_batch(&b);
    vc_graph *g = vc_graph_new();
    float lp[20], eff[20], w[20];
    CHECK_OK(rl_batch_logprobs(m, g, &b, 0, 1.0f, lp, NULL, NULL));
    for (int k = 0; k < 20; k++) /* the rollout policy: the model's log-probs, perturbed */
        b.rollout_logp[k] = b.old_logp[k] = lp[k] + (b.mask[k] > 0 ? 0.4f * vc_rng_normal(21, k, 0, 0) : 0.0f);
    b.old_logp[9] = b.rollout_logp[9] = lp[9] - 1.5f; /* a token far off the rollout policy */
    b.have_old = 1;
    rl_actor_cfg c = { .ppo_epochs = 1, .mini_rows = 5, .micro_rows = micro_rows };
    vc_pg_config_default(&c.pg);
    c.rc = (rl_rc_cfg){ .is_level = bc->is_level, .is_thr = 2.0, .bypass = 1, .reinforce = bc->reinforce, .offpolicy = 1 };
    CHECK_OK(rl_rs_parse(bc->rs, bc->thr, &c.rc));
    CHECK_OK(rl_update_actor(&tr, &b, &c, 0, met));
    CHECK(rl_metrics_get(met, "actor/pg_loss", got));
    /* on the host: weights and keep over the whole batch (row-local, so any split gives the same) */
    rl_rc_raw r;
    rl_rc_raw_init(&r);
    rl_rc_accum(&c.rc, RL_RC_IS | RL_RC_RS, lp, b.rollout_logp, b.mask, 5, 4, &r, w, eff);
    double ntok = 0;
    for (int k = 0; k < 20; k++) {
        ntok += b.mask[k];
        eff[k] = c.rc.n_rs ? eff[k] * b.mask[k] : b.mask[k];
    }
    c.pg.norm = (vc_agg_norm){ 1, ntok, 5, 0 };
    vc_pg_metrics pm;
    CHECK_OK(vc_policy_loss(bc->reinforce ? VC_PG_REINFORCE : VC_PG_VANILLA, b.rollout_logp, lp, b.adv, eff, 5, 4,
                            &c.pg, bc->reinforce && bc->is_level ? w : NULL, want, &pm, NULL));
    rl_batch_free(&b);
    vc_graph_free(g);
    vc_trainer_free(&tr);
    vc_config_free(cfg);
    vc_model_free(m);
}

static void test_bypass(void) {
    const bypass_case cases[] = {
        { 0, RL_RIS_OFF, NULL, NULL },              /* ppo_clip: the ratio to the rollout policy */
        { 0, RL_RIS_TOKEN, "token_k1", "0.5_1.8" }, /* weights only for metrics; rejection */
        { 1, RL_RIS_OFF, NULL, NULL },              /* plain REINFORCE */
        { 1, RL_RIS_TOKEN, NULL, NULL },            /* truncated token weights */
        { 1, RL_RIS_SEQUENCE, "seq_mean_k3", "0.05" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got1, want1, got2, want2, v;
        rl_metrics m1 = { 0 }, m2 = { 0 };
        run_bypass(&cases[i], 0, &got1, &want1, &m1);
        run_bypass(&cases[i], 2, &got2, &want2, &m2);
        CHECK_MSG(fabs(got1 - want1) < 1e-5 * (1 + fabs(want1)), "bypass case %zu: pg_loss %.8g, host %.8g", i, got1, want1);
        CHECK_MSG(fabs(got2 - want1) < 1e-5 * (1 + fabs(want1)), "bypass case %zu, micro-batches of 2: pg_loss %.8g, host %.8g",
                  i, got2, want1);
        CHECK_MSG(rl_metrics_get(&m1, "rollout_corr/k3_kl", &v) && v > 0.01, "bypass case %zu: rollout_corr/k3_kl", i);
        if (cases[i].is_level) CHECK(rl_metrics_get(&m2, "rollout_corr/rollout_is_eff_sample_size", &v) && v > 0 && v <= 1);
        if (cases[i].rs)
            CHECK_MSG(rl_metrics_get(&m1, "rollout_corr/rollout_rs_masked_fraction", &v) && v > 0 && v < 1,
                      "bypass case %zu: masked fraction %g", i, v);
        rl_metrics_free(&m1);
        rl_metrics_free(&m2);
    }
}

/* the memory plan's trial of a log-prob pass: measured on one and two rows, extended to six, it matches a real pass
 * of six such rows and bounds a pass of six shorter rows of the same budget */
static void test_pass_trial(void) {
    vc_model *m = make_model("p");
    vc_graph *g = vc_graph_new();
    enum { R = 6, SEQ = 24, TAIL = 8 };
    rl_pass_spec spec = { RL_PASS_LOGP, m, NULL, 0, 0 };
    size_t est = 0;
    CHECK_OK(rl_pass_trial_bytes(&spec, g, R, SEQ, TAIL, &est));
    for (int shorter = 0; shorter < 2; shorter++) {
        rl_batch b;
        CHECK_OK(rl_batch_alloc(&b, R, TAIL, R * SEQ));
        for (int i = 0; i < R; i++) {
            int64_t len = shorter ? SEQ - 1 - i % 3 : SEQ, resp = shorter ? TAIL - i % 2 : TAIL;
            b.cu[i + 1] = b.cu[i] + len;
            b.plen[i] = len - resp;
            b.rlen[i] = resp;
        }
        for (int64_t k = 0; k < b.cu[R]; k++) b.ids[k] = (int32_t)((k * 13 + 5) % DEMO_VOCAB);
        vc_graph_reset(g);
        vc_graph_clear_peak(g);
        CHECK_OK(rl_batch_logprobs(m, g, &b, 0, 1.0f, b.old_logp, NULL, NULL));
        size_t real = vc_graph_peak_bytes(g);
        CHECK_MSG(real <= est && (shorter || real >= est - est / 20),
                  "a pass of %d %s rows peaks at %zu bytes, the trial's estimate is %zu", R, shorter ? "shorter" : "full",
                  real, est);
        rl_batch_free(&b);
    }
    vc_graph_free(g);
    vc_model_free(m);
}

/* actor.shuffle / critic.shuffle as verl's engine workers draw the mini-batches (tensordict make_iterator's DataLoader
 * over each rank's rows, a generator seeded data_loader_seed + rank): the orders torch 2.15 gave for 3 epochs of 8 rows
 * on one rank (seed 42), for 2 epochs of 4 rows on each of 2 ranks (seeds 42 and 43), and for 6 rows (seed 7) */
static void test_engine_shuffle(void) {
    static const int W1[3][8] = { { 4, 6, 2, 3, 0, 7, 1, 5 }, { 7, 4, 3, 1, 5, 0, 2, 6 }, { 5, 1, 7, 4, 3, 0, 6, 2 } };
    static const int W2[2][2][4] = { { { 0, 2, 1, 3 }, { 3, 2, 0, 1 } }, { { 2, 0, 1, 3 }, { 3, 2, 1, 0 } } };
    static const int P6[6] = { 1, 2, 5, 3, 0, 4 };
    int order[8];
    for (int e = 0; e < 3; e++) {
        rl_engine_rows(order, 8, 42, e);
        CHECK_MSG(!memcmp(order, W1[e], sizeof W1[e]), "one rank, epoch %d", e);
    }
    for (int e = 0; e < 2; e++)
        for (int r = 0; r < 2; r++) {
            rl_engine_rows(order, 4, 42 + (uint64_t)r, e);
            CHECK_MSG(!memcmp(order, W2[e][r], sizeof W2[e][r]), "rank %d of two, epoch %d", r, e);
        }
    rl_engine_rows(order, 6, 7, 0);
    CHECK(!memcmp(order, P6, sizeof P6));
}

/* trainer.balance_batch on 3 ranks: verl b178a3cd's _balance_batch on 12 rows of these lengths (its Karmarkar-Karp
 * partitions of the workloads into equal counts, each sorted by (workload, index) and taken as even places then odd
 * ones reversed) gave rank 0 rows 2 8 1 9, rank 1 rows 5 3 4 0, rank 2 rows 6 7 11 10, in that order */
static void test_balance_partition(void) {
    static const int64_t len[12] = { 141, 298, 86, 209, 262, 53, 26, 260, 152, 139, 118, 260 };
    static const int want[3][4] = { { 2, 8, 1, 9 }, { 5, 3, 4, 0 }, { 6, 7, 11, 10 } };
    int owner[12], label[12];
    CHECK_OK(rl_balance_partition(len, NULL, 12, 3, owner, label));
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 4; j++)
            CHECK_MSG(owner[want[r][j]] == r && label[want[r][j]] == 4 * r + j, "row %d: rank %d place %d, want %d %d",
                      want[r][j], owner[want[r][j]], label[want[r][j]], r, 4 * r + j);
}

int main(void) {
    test_engine_shuffle();
    test_balance_partition();
    test_pass_trial();
    test_bypass();
    test_accumulation();
    test_legacy_normalisation();
    test_norm_width();
    test_descent();
    test_critic();
    test_rollout_logprobs();
    return vc_test_done();
}
