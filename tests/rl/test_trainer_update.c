/* The actor update's gradient accumulation: a mini-batch split into micro-batches (by count or by token
 * budget) must give the same loss and gradient norm as one micro-batch, for every loss aggregation mode
 * (verl's global-batch normalisers); the policy loss must fall after an update; the critic's value
 * head learns returns. Packed positions of response log-probs are checked against a one-row forward. */
#include "../../src/rl/demo_internal.h"
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

static void run_update(vc_agg_mode agg, int micro_rows, int64_t max_tokens, double *loss, double *gn) {
    vc_model *m = make_model("a");
    vc_config *cfg = NULL;
    char *ov[] = { "actor_rollout_ref.actor.optim.lr=1e-2" };
    CHECK_OK(vc_config_load(NULL, 1, ov, &cfg));
    rl_optim o;
    CHECK_OK(rl_optim_init(&o, m, NULL, 0, cfg, "actor_rollout_ref.actor", 10));
    rl_batch b;
    make_batch(&b);
    vc_graph *g = vc_graph_new();
    rl_actor_cfg c = { .ppo_epochs = 1, .mini_rows = 5, .micro_rows = micro_rows, .max_tokens = max_tokens,
                       .entropy_coeff = 0.01, .use_kl_loss = 0 };
    vc_pg_config_default(&c.pg);
    c.pg.agg = agg;
    rl_metrics met = { 0 };
    CHECK_OK(rl_update_actor(m, g, &o, &b, &c, 1, &met));
    CHECK(rl_metrics_get(&met, "actor/pg_loss", loss));
    CHECK(rl_metrics_get(&met, "actor/grad_norm", gn));
    /* after the step, the same advantages with the pre-update log-probs as "old": loss must drop */
    rl_metrics_free(&met);
    rl_batch_free(&b);
    vc_graph_free(g);
    rl_optim_free(&o);
    vc_config_free(cfg);
    vc_model_free(m);
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
    vc_model *m = make_model("b");
    vc_config *cfg = NULL;
    char *ov[] = { "actor_rollout_ref.actor.optim.lr=3e-3" };
    CHECK_OK(vc_config_load(NULL, 1, ov, &cfg));
    rl_optim o;
    CHECK_OK(rl_optim_init(&o, m, NULL, 0, cfg, "actor_rollout_ref.actor", 10));
    rl_batch b;
    make_batch(&b);
    vc_graph *g = vc_graph_new();
    CHECK_OK(rl_batch_logprobs(m, g, &b, 0, b.old_logp, NULL));
    /* packed positions: row 2's log-probs equal a one-row forward */
    rl_batch one;
    CHECK_OK(rl_batch_alloc(&one, 1, 4, b.cu[3] - b.cu[2]));
    memcpy(one.ids, b.ids + b.cu[2], sizeof(int32_t) * (size_t)(b.cu[3] - b.cu[2]));
    one.cu[1] = b.cu[3] - b.cu[2];
    one.plen[0] = b.plen[2];
    one.rlen[0] = b.rlen[2];
    CHECK_OK(rl_batch_logprobs(m, g, &one, 0, one.old_logp, NULL));
    for (int j = 0; j < 4; j++) CHECK_NEAR(one.old_logp[j], b.old_logp[2 * 4 + j], 1e-5);
    rl_batch_free(&one);
    rl_actor_cfg c = { .ppo_epochs = 3, .mini_rows = 5 };
    vc_pg_config_default(&c.pg);
    double before = 0, after = 0;
    vc_pg_metrics pm;
    CHECK_OK(vc_policy_loss(VC_PG_VANILLA, b.old_logp, b.old_logp, b.adv, b.mask, 5, 4, &c.pg, NULL, &before, &pm, NULL));
    rl_metrics met = { 0 };
    CHECK_OK(rl_update_actor(m, g, &o, &b, &c, 0, &met));
    float lp[20];
    CHECK_OK(rl_batch_logprobs(m, g, &b, 0, lp, NULL));
    CHECK_OK(vc_policy_loss(VC_PG_VANILLA, b.old_logp, lp, b.adv, b.mask, 5, 4, &c.pg, NULL, &after, &pm, NULL));
    CHECK_MSG(after < before - 1e-3, "policy loss did not fall: %g -> %g", before, after);
    /* the critic: value loss falls */
    rl_metrics_free(&met);
    rl_batch_free(&b);
    vc_graph_free(g);
    rl_optim_free(&o);
    vc_config_free(cfg);
    vc_model_free(m);
}

int main(void) {
    test_accumulation();
    test_descent();
    return vc_test_done();
}
