/* Edge cases of the core algorithms (singleton groups, fully-masked rows, single-token masks) and
 * gradients checked against finite differences. */
#include "verlc/rl.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>

static unsigned rng = 12345;
static float frand(float lo, float hi) {
    rng = rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)((rng >> 8) / 16777216.0);
}

static void test_groups(void) {
    const char *idx[] = { "b", "a", "b", "c", "a" };
    int gid[5], n;
    CHECK_OK(vc_group_ids(idx, 5, gid, &n));
    CHECK(n == 3 && gid[0] == 0 && gid[1] == 1 && gid[2] == 0 && gid[3] == 2 && gid[4] == 1);
    /* GRPO: group "b" = rows 0,2 (scores 1, 3), singleton "c" (score 5 -> mean 0, std 1), "a" = 2, 2 (std 0) */
    float r[5 * 2] = { 1, 0, 2, 0, 0, 3, 5, 0, 0, 2 }, m[5 * 2] = { 1, 1, 1, 1, 1, 1, 1, 0, 0, 0 };
    float adv[10], ret[10];
    CHECK_OK(vc_adv_grpo(r, m, idx, 5, 2, 1, 1e-6f, adv, ret));
    double sd = sqrt(2.0); /* unbiased std of {1, 3} */
    CHECK_NEAR(adv[0], -1.0 / (sd + 1e-6), 1e-6);
    CHECK_NEAR(adv[4], 1.0 / (sd + 1e-6), 1e-6);
    CHECK_NEAR(adv[6], 5.0 / (1.0 + 1e-6), 1e-5); /* singleton: mean 0, std 1 */
    CHECK(adv[7] == 0.0f);                          /* masked position */
    CHECK(adv[2] == 0.0f && adv[3] == 0.0f);        /* identical scores: exactly zero */
    CHECK(adv[8] == 0.0f && adv[9] == 0.0f);        /* fully masked row */
    CHECK(ret[0] == adv[0]);
    /* RLOO: singleton keeps its score; pair gets n/(n-1)(s - mean) */
    CHECK_OK(vc_adv_rloo(r, m, idx, 5, 2, adv, ret));
    CHECK_NEAR(adv[6], 5.0, 1e-6);
    CHECK_NEAR(adv[0], 2.0 * (1.0 - 2.0), 1e-6);
    /* OPO: length-weighted baseline of group b: (2*1 + 2*3)/4 = 2 */
    CHECK_OK(vc_adv_opo(r, m, idx, 5, 2, adv, ret));
    CHECK_NEAR(adv[0], -1.0, 1e-6);
    /* GPG: alpha = 5 / #nonzero(4) once row 4 scores 0 */
    r[9] = 0.0f;
    CHECK_OK(vc_adv_gpg(r, m, idx, 5, 2, 1.0f, adv, ret));
    CHECK_NEAR(adv[0], 1.25 * -1.0, 1e-6);
    CHECK_NEAR(adv[6], 1.25 * 5.0, 1e-5);
    const char *bad[] = { "a", NULL };
    CHECK(vc_adv_grpo(r, m, bad, 2, 2, 1, 1e-6f, adv, ret) == VC_ERR_MISSING);
}

static void test_masks(void) {
    float x[6] = { 1, 2, 3, 4, 5, 6 }, one[6] = { 0, 0, 1, 0, 0, 0 }, none[6] = { 0 }, out[6];
    double v;
    CHECK(vc_masked_var(x, one, 6, 1, &v) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "sum of the mask is one") != NULL);
    CHECK(vc_masked_var(x, none, 6, 1, &v) == VC_ERR_ARG);
    CHECK(vc_masked_whiten(x, one, 6, 1, out) == VC_ERR_ARG);
    CHECK_OK(vc_masked_var(x, one, 6, 0, &v));
    CHECK_NEAR(v, 0.0, 1e-12);
    CHECK_NEAR(vc_masked_mean(x, none, 6), 0.0, 0);
    /* GAE with a single-token response: the whitening step raises verl's error, as a status */
    float vals[6] = { 0 }, adv[6], ret[6];
    CHECK(vc_adv_gae(x, vals, one, 1, 6, 1.0f, 1.0f, adv, ret) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "gae_advantage_return") != NULL);
    /* whiten: mean 3.5, unbiased var 3.5 */
    float all[6] = { 1, 1, 1, 1, 1, 1 };
    CHECK_OK(vc_masked_whiten(x, all, 6, 1, out));
    CHECK_NEAR(out[0], (1 - 3.5) / sqrt(3.5 + 1e-8), 1e-6);
    CHECK_OK(vc_masked_whiten(x, all, 6, 0, out));
    CHECK_NEAR(out[0], (1 - 3.5) / sqrt(3.5 + 1e-8) + 3.5, 1e-6);
    /* agg over fully-masked rows: seq-mean modes ignore them */
    float l[6] = { 1, 2, 3, 4, 5, 6 }, mk[6] = { 1, 1, 0, 0, 0, 0 };
    double a;
    CHECK_OK(vc_agg_loss(l, mk, 3, 2, VC_AGG_SEQ_MEAN_TOKEN_SUM, NULL, &a, NULL));
    CHECK_NEAR(a, 3.0, 1e-9);
    CHECK_OK(vc_agg_loss(l, mk, 3, 2, VC_AGG_SEQ_MEAN_TOKEN_MEAN, NULL, &a, NULL));
    CHECK_NEAR(a, 1.5, 1e-6);
    CHECK_OK(vc_agg_loss(l, mk, 3, 2, VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM, NULL, &a, NULL));
    CHECK_NEAR(a, 1.5, 1e-9);
    CHECK_OK(vc_agg_loss(l, none, 3, 2, VC_AGG_TOKEN_MEAN, NULL, &a, NULL));
    CHECK(a == 0.0);
    /* micro-batches with the global normaliser sum to the whole-batch value */
    float L[8], M[8];
    for (int i = 0; i < 8; i++) { L[i] = frand(-1, 1); M[i] = i % 3 != 2; }
    for (int mode = 0; mode < 5; mode++) {
        double whole, p1, p2;
        CHECK_OK(vc_agg_loss(L, M, 4, 2, (vc_agg_mode)mode, NULL, &whole, NULL));
        vc_agg_norm nrm = { .batch_num_tokens = vc_masked_sum(M, M, 8), .global_batch_size = 4 };
        CHECK_OK(vc_agg_loss(L, M, 2, 2, (vc_agg_mode)mode, &nrm, &p1, NULL));
        CHECK_OK(vc_agg_loss(L + 4, M + 4, 2, 2, (vc_agg_mode)mode, &nrm, &p2, NULL));
        CHECK_NEAR(p1 + p2, whole, 1e-6);
        /* and in parts (two ranks' rows), combined as the trainer's reduction combines them */
        double n1, d1, n2, d2;
        int adds1, adds2;
        vc_agg_parts(L, M, 2, 2, (vc_agg_mode)mode, 0, &n1, &d1, &adds1);
        vc_agg_parts(L + 4, M + 4, 2, 2, (vc_agg_mode)mode, 0, &n2, &d2, &adds2);
        CHECK(adds1 == adds2 && (adds1 ? 1 : d1 == d2));
        CHECK_NEAR((n1 + n2) / (adds1 ? d1 + d2 : d1), whole, 1e-6);
    }
    /* with a width: seq-mean-token-sum-norm's divisor */
    double nw, dw;
    int aw;
    vc_agg_parts(L, M, 4, 2, VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 7, &nw, &dw, &aw);
    vc_agg_norm n7 = { .loss_scale_factor = 7 };
    CHECK_OK(vc_agg_loss(L, M, 4, 2, VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM, &n7, &a, NULL));
    CHECK(!aw && dw == 7);
    CHECK_NEAR(nw / dw, a, 1e-9);
    /* later verl's token-sum: the masked sum, times dp_size */
    vc_agg_mode mm;
    CHECK_OK(vc_agg_mode_parse("token-sum", &mm));
    CHECK(mm == VC_AGG_TOKEN_SUM && !strcmp(vc_agg_mode_name(mm), "token-sum"));
    vc_agg_norm dp2 = { .dp_size = 2 };
    CHECK_OK(vc_agg_loss(l, mk, 3, 2, VC_AGG_TOKEN_SUM, &dp2, &a, NULL));
    CHECK_NEAR(a, 2 * 3.0, 1e-9);
    CHECK(vc_agg_mode_parse("token-max", &mm) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "token-max") != NULL);
}

/* ---------------------------------------------------------------- finite differences */
enum { B = 4, T = 5, N = B * T };
static float g_old[N], g_lp[N], g_adv[N], g_mask[N];

static double pg_loss(vc_pg_mode mode, const vc_pg_config *cfg, float *dlogp) {
    double l;
    vc_pg_metrics m;
    if (vc_policy_loss(mode, g_old, g_lp, g_adv, g_mask, B, T, cfg, NULL, &l, &m, dlogp)) return NAN;
    return l;
}

static void test_pg_grad(void) {
    for (int k = 0; k < N; k++) {
        g_old[k] = frand(-3, -0.1f);
        g_lp[k] = g_old[k] + frand(-0.6f, 0.6f);
        g_adv[k] = frand(-2, 2);
        g_mask[k] = (k % T) < T - (k / T); /* rows of length 5, 4, 3, 2 */
    }
    g_old[3] = g_lp[3] + 2.0f; /* ratio far below 1 - clip with A < 0: dual-clip region */
    g_adv[3] = -1.5f;
    vc_pg_config cfg;
    vc_pg_config_default(&cfg);
    cfg.clip_ratio_high = 0.28;
    float g[N];
    int n_checked = 0, n_zero = 0;
    for (int mode = 0; mode < 4; mode++) {
        cfg.agg = (vc_agg_mode)mode;
        pg_loss(VC_PG_VANILLA, &cfg, g);
        for (int k = 0; k < N; k++) {
            float save = g_lp[k];
            const float h = 1e-3f;
            g_lp[k] = save + h;
            double lp = pg_loss(VC_PG_VANILLA, &cfg, NULL);
            g_lp[k] = save - h;
            double lm = pg_loss(VC_PG_VANILLA, &cfg, NULL);
            g_lp[k] = save;
            double fd = (lp - lm) / (2.0 * ((double)(save + h) - (save - h)) / 2.0);
            CHECK_NEAR(g[k], fd, 2e-3 * (1 + fabs(fd)));
            n_checked++;
            n_zero += g[k] == 0.0f && g_mask[k] != 0.0f;
        }
    }
    CHECK(n_zero > 0); /* some clipped elements have zero gradient */
    printf("vanilla PPO: %d gradients checked against finite differences (%d clipped)\n", n_checked, n_zero);
    /* value loss */
    float vp[N], ret[N], val[N], dv[N];
    for (int k = 0; k < N; k++) { val[k] = frand(-1, 1); vp[k] = val[k] + frand(-1, 1); ret[k] = frand(-2, 2); }
    double vl, vf;
    CHECK_OK(vc_value_loss(vp, ret, val, g_mask, B, T, 0.5f, VC_AGG_SEQ_MEAN_TOKEN_MEAN, NULL, &vl, &vf, dv));
    for (int k = 0; k < N; k++) {
        float save = vp[k];
        double a, b;
        vp[k] = save + 1e-3f;
        vc_value_loss(vp, ret, val, g_mask, B, T, 0.5f, VC_AGG_SEQ_MEAN_TOKEN_MEAN, NULL, &a, NULL, NULL);
        vp[k] = save - 1e-3f;
        vc_value_loss(vp, ret, val, g_mask, B, T, 0.5f, VC_AGG_SEQ_MEAN_TOKEN_MEAN, NULL, &b, NULL, NULL);
        vp[k] = save;
        double fd = (a - b) / ((double)(save + 1e-3f) - (save - 1e-3f));
        CHECK_NEAR(dv[k], fd, 2e-3 * (1 + fabs(fd)));
    }
    CHECK(vf > 0.0 && vf < 1.0);
}

/* d loss / d lp against central differences for one mode over the g_* data; returns the count of
 * masked-in elements whose analytic gradient is exactly zero */
static int fd_check(vc_pg_mode mode, const vc_pg_config *cfg, const char *what) {
    float g[N];
    int n_zero = 0;
    double worst = 0;
    CHECK_MSG(!isnan(pg_loss(mode, cfg, g)), "%s: %s", what, vc_last_error());
    for (int k = 0; k < N; k++) {
        float save = g_lp[k];
        const float h = 1e-3f;
        g_lp[k] = save + h;
        double lp = pg_loss(mode, cfg, NULL);
        g_lp[k] = save - h;
        double lm = pg_loss(mode, cfg, NULL);
        g_lp[k] = save;
        double fd = (lp - lm) / ((double)(save + h) - (save - h));
        CHECK_MSG(fabs(g[k] - fd) <= 1e-4 + 2e-3 * fabs(fd), "%s: d/dlp[%d] %g vs finite difference %g", what, k,
                  g[k], fd);
        if (fabs(g[k] - fd) > worst) worst = fabs(g[k] - fd);
        n_zero += g[k] == 0.0f && g_mask[k] != 0.0f;
    }
    printf("%-8s: %d gradients against finite differences, worst |error| %.2g\n", what, N, worst);
    return n_zero;
}

/* sapo, gpg, clip_cov, kl_cov and geo_mean: values by hand on small cases, gradients by finite differences */
static void test_more_pg_modes(void) {
    vc_pg_config cfg;
    vc_pg_config_default(&cfg);
    double l;
    vc_pg_metrics mt;
    float g[4];
    /* sapo: L = -A (4/tau) sigmoid(tau (r - 1)), tau = 1 for A > 0 and 1.05 for A <= 0; seq-mean-token-mean */
    float o1[2] = { -1.0f, -1.0f }, p1[2] = { -0.9f, -1.2f }, a1[2] = { 1.0f, -2.0f }, m1[2] = { 1, 1 };
    CHECK_OK(vc_policy_loss(VC_PG_SAPO, o1, p1, a1, m1, 2, 1, &cfg, NULL, &l, &mt, g));
    double r0 = exp((float)0.1f), r1 = exp((float)-0.2f), s0 = 1 / (1 + exp(-(r0 - 1))), s1 = 1 / (1 + exp(-1.05 * (r1 - 1)));
    CHECK_NEAR(l, 0.5 * (-4.0 * s0 * 1.0 + -(4.0 / 1.05) * s1 * -2.0), 1e-5);
    CHECK_NEAR(g[0], 0.5 * -1.0 * 4 * s0 * (1 - s0) * r0, 1e-5);
    CHECK(mt.pg_clipfrac == 0.0);
    /* gpg: L = token-mean(-A lp) */
    CHECK_OK(vc_policy_loss(VC_PG_GPG, o1, p1, a1, m1, 1, 2, &cfg, NULL, &l, &mt, g));
    CHECK_NEAR(l, 0.5 * (0.9 * 1.0 + -1.2 * 2.0), 1e-6);
    CHECK_NEAR(g[0], -0.5, 1e-7);
    CHECK_NEAR(g[1], 1.0, 1e-7);
    /* clip_cov: r = 1 everywhere, cov = (A - 0)(lp - (-2)) = {3, 0, 0, 0}: only token 0 lies in (1, 5) */
    float o2[4] = { -1, -2, -3, -2 }, a2[4] = { 3, 0, 0, -3 }, m2[4] = { 1, 1, 1, 1 };
    CHECK_OK(vc_policy_loss(VC_PG_CLIP_COV, o2, o2, a2, m2, 1, 4, &cfg, NULL, &l, &mt, g));
    CHECK_NEAR(l, 3.0 / 4.0, 1e-6); /* token 0's -3 switched off */
    CHECK(g[0] == 0.0f && g[3] == 0.75f);
    CHECK_NEAR(mt.pg_clipfrac, 0.25, 1e-6);
    cfg.clip_cov_lb = 3.5; /* no candidate left: nothing switched off */
    CHECK_OK(vc_policy_loss(VC_PG_CLIP_COV, o2, o2, a2, m2, 1, 4, &cfg, NULL, &l, &mt, g));
    CHECK_NEAR(l, 0.0, 1e-6);
    CHECK(mt.pg_clipfrac == 0.0);
    cfg.clip_cov_lb = 1.0;
    /* kl_cov: the top-1 covariance token (0) gains ppo_kl_coef |lp - old| */
    float p2[4] = { -0.5f, -2, -3, -2 };
    float a3[4] = { 3, 0, 0, -3 };
    CHECK_OK(vc_policy_loss(VC_PG_KL_COV, o2, p2, a3, m2, 1, 4, &cfg, NULL, &l, &mt, g));
    CHECK_NEAR(l, (-3.0 * exp(0.5) + 0.1 * 0.5 + 3.0) / 4.0, 1e-5);
    CHECK_NEAR(g[0], (-3.0 * exp(0.5) + 0.1) / 4.0, 1e-5);
    CHECK_NEAR(mt.ppo_kl, 0.5 / 4.0, 1e-6);
    /* geo_mean: d = {0.1, 0.5}, A > 0, clip 0.2: s = exp((0.1 + 0.2) / 2); token 1 clipped, no gradient */
    float o4[2] = { -1.0f, -1.0f }, p4[2] = { -0.9f, -0.5f }, a4[2] = { 1.0f, 1.0f };
    CHECK_OK(vc_policy_loss(VC_PG_GEO_MEAN, o4, p4, a4, m1, 1, 2, &cfg, NULL, &l, &mt, g));
    CHECK_NEAR(l, -exp(0.15), 1e-5);
    CHECK_NEAR(g[0], -exp(0.15) / 2.0, 1e-5);
    CHECK(g[1] == 0.0f);
    CHECK_NEAR(mt.pg_clipfrac, 0.5, 1e-6);
    CHECK(mt.pg_clipfrac_lower == 0.0);

    /* clip_cov's random choice: exactly max(1, int(ratio * tokens)) of the candidates, a pure function
     * of (seed, draw) */
    enum { M = 400 };
    static float ob[M], pb[M], ab[M], mb[M], g1[M], g2[M];
    for (int k = 0; k < M; k++) {
        ob[k] = -2.0f; pb[k] = -2.0f + frand(-2, 2); ab[k] = frand(-3, 3); mb[k] = k % 7 != 0;
    }
    vc_pg_config cc;
    vc_pg_config_default(&cc);
    cc.clip_ratio = 10.0; /* nothing clipped by the PPO clip */
    cc.clip_cov_ratio = 0.03;
    cc.clip_cov_lb = 0.5;
    int n_cand = 0, n_tok = 0;
    double ma = vc_masked_mean(ab, mb, M), ml = vc_masked_mean(pb, mb, M);
    for (int k = 0; k < M; k++) {
        double cov = (ab[k] - ma) * (pb[k] - ml);
        n_tok += mb[k] != 0;
        n_cand += mb[k] != 0 && cov > 0.5 && cov < 5.0;
    }
    int want = (int)(0.03 * n_tok);
    CHECK(n_cand > 2 * want && want > 3);
    int diff = 0, same = 1;
    cc.draw = 7;
    CHECK_OK(vc_policy_loss(VC_PG_CLIP_COV, ob, pb, ab, mb, 1, M, &cc, NULL, &l, &mt, g1));
    CHECK_NEAR(mt.pg_clipfrac, (double)want / n_tok, 1e-6);
    CHECK_OK(vc_policy_loss(VC_PG_CLIP_COV, ob, pb, ab, mb, 1, M, &cc, NULL, &l, &mt, g2));
    for (int k = 0; k < M; k++) same &= g1[k] == g2[k];
    cc.draw = 8;
    CHECK_OK(vc_policy_loss(VC_PG_CLIP_COV, ob, pb, ab, mb, 1, M, &cc, NULL, &l, &mt, g2));
    int n_off = 0;
    for (int k = 0; k < M; k++) {
        diff += (g1[k] == 0.0f) != (g2[k] == 0.0f);
        if (mb[k] != 0 && g1[k] == 0.0f && ab[k] != 0.0f) {
            double cov = (ab[k] - ma) * (pb[k] - ml);
            n_off++;
            CHECK_MSG(cov > 0.5 && cov < 5.0, "token %d switched off with cov %g", k, cov);
        }
    }
    CHECK(n_off == want);
    CHECK(same && diff > 0);
    printf("clip_cov: %d of %d candidates switched off (%d tokens); another draw differs in %d places\n", want,
           n_cand, n_tok, diff);

    /* gradients against finite differences over the shared random data */
    vc_pg_config_default(&cfg);
    cfg.clip_ratio_high = 0.28;
    int z;
    fd_check(VC_PG_SAPO, &cfg, "sapo");
    fd_check(VC_PG_GPG, &cfg, "gpg");
    cfg.clip_cov_ratio = 0.2;
    cfg.clip_cov_lb = 0.05;
    z = fd_check(VC_PG_CLIP_COV, &cfg, "clip_cov");
    CHECK(z > 0);
    cfg.kl_cov_ratio = 0.2;
    cfg.ppo_kl_coef = 0.5;
    fd_check(VC_PG_KL_COV, &cfg, "kl_cov");
    z = fd_check(VC_PG_GEO_MEAN, &cfg, "geo_mean");
    CHECK(z > 0); /* tokens clipped on their advantage's side have no gradient */
    cfg.norm.global_batch_size = 8; /* rows of a larger global batch: the same loss over 8 rows, times 2 ranks */
    cfg.norm.dp_size = 2;
    double l4 = pg_loss(VC_PG_GEO_MEAN, &cfg, NULL);
    cfg.norm = (vc_agg_norm){ 0 };
    CHECK_NEAR(l4, pg_loss(VC_PG_GEO_MEAN, &cfg, NULL) * B / 8.0 * 2.0, 1e-9);
    /* rollout-correction weights scale each token's loss and gradient (every per-token mode) */
    float wts[N], half[N], gw0[N], gw1[N];
    for (int k = 0; k < N; k++) wts[k] = 0.25f + 0.1f * (float)(k % 7), half[k] = 0.5f;
    vc_pg_mode per_token[] = { VC_PG_VANILLA, VC_PG_CISPO, VC_PG_SAPO, VC_PG_GPG, VC_PG_KL_COV };
    for (size_t i = 0; i < sizeof per_token / sizeof per_token[0]; i++) {
        double l0, l1;
        CHECK_OK(vc_policy_loss(per_token[i], g_old, g_lp, g_adv, g_mask, B, T, &cfg, NULL, &l0, &mt, gw0));
        CHECK_OK(vc_policy_loss(per_token[i], g_old, g_lp, g_adv, g_mask, B, T, &cfg, wts, &l1, &mt, gw1));
        int ok = 1;
        for (int k = 0; k < N; k++) ok &= fabs(gw1[k] - wts[k] * gw0[k]) <= 1e-6 * (1 + fabs(gw0[k]));
        CHECK_MSG(ok, "mode %d: the weighted gradient is not w * the gradient", (int)per_token[i]);
        CHECK_OK(vc_policy_loss(per_token[i], g_old, g_lp, g_adv, g_mask, B, T, &cfg, half, &l1, &mt, NULL));
        CHECK_NEAR(l1, 0.5 * l0, 1e-6 * (1 + fabs(l0)));
    }
    vc_pg_mode md;
    CHECK_OK(vc_pg_mode_parse("geo_mean", &md));
    CHECK(md == VC_PG_GEO_MEAN);
    CHECK(vc_pg_mode_parse("geo-mean", &md) == VC_ERR_UNSUPPORTED);
    CHECK(strstr(vc_last_error(), "clip_cov") != NULL);
    cfg.tau_neg = 0;
    CHECK(vc_policy_loss(VC_PG_SAPO, g_old, g_lp, g_adv, g_mask, B, T, &cfg, NULL, &l, &mt, NULL) == VC_ERR_ARG);
}

static void test_straight_through_grads(void) {
    /* CISPO: dL/dlp = -clip(r) A w (the clipped ratio is a constant) */
    float old[2] = { -1.0f, -1.0f }, lp[2] = { -0.5f, -1.1f }, adv[2] = { 1.0f, 2.0f }, m[2] = { 1, 1 }, g[2];
    vc_pg_config cfg;
    vc_pg_config_default(&cfg);
    double l;
    vc_pg_metrics mt;
    CHECK_OK(vc_policy_loss(VC_PG_CISPO, old, lp, adv, m, 1, 2, &cfg, NULL, &l, &mt, g));
    CHECK_NEAR(g[0], -1.2 * 1.0 * 0.5, 1e-6);             /* exp(0.5) clipped to 1.2 */
    CHECK_NEAR(g[1], -exp(-0.1) * 2.0 * 0.5, 1e-6);
    CHECK_NEAR(l, 0.5 * (1.2 * 0.5 + exp(-0.1) * 2.0 * 1.1), 1e-6);
    CHECK_NEAR(mt.pg_clipfrac, 0.5, 1e-6);
    /* GSPO: s = exp(mean(lp - old)), per-token gradient -A s / len within the clip range */
    float lp2[2] = { -0.95f, -1.0f };
    CHECK_OK(vc_policy_loss(VC_PG_GSPO, old, lp2, adv, m, 1, 2, &cfg, NULL, &l, &mt, g));
    double s = exp(0.025);
    CHECK_NEAR(l, -(1.0 * s + 2.0 * s) / 2.0, 1e-6);
    CHECK_NEAR(g[0], -1.0 * s / 2.0, 1e-6);
    CHECK_NEAR(g[1], -2.0 * s / 2.0, 1e-6);
    CHECK(mt.pg_clipfrac_lower == 0.0);
    /* KL: value and gradient of each estimator (finite differences), straight-through '+' variants */
    const char *names[] = { "kl", "abs", "mse", "low_var_kl", "k1+", "k3+", "k2+" };
    float a[3] = { -1.0f, -0.2f, -2.5f }, r[3] = { -1.3f, -0.1f, -0.4f }, kv[3], kg[3], kp[3], km[3];
    for (int i = 0; i < 7; i++) {
        vc_kl_spec sp;
        CHECK_OK(vc_kl_parse(names[i], &sp));
        vc_kl_penalty(sp, a, r, 3, kv, kg);
        for (int k = 0; k < 3; k++) {
            float ap[3], am[3];
            memcpy(ap, a, sizeof a); memcpy(am, a, sizeof a);
            ap[k] += 1e-3f; am[k] -= 1e-3f;
            vc_kl_penalty(sp, ap, r, 3, kp, NULL);
            vc_kl_penalty(sp, am, r, 3, km, NULL);
            double fd = ((double)kp[k] - km[k]) / ((double)ap[k] - am[k]);
            double d = (double)a[k] - r[k];
            if (sp.straight_through) CHECK_NEAR(kg[k], d, 1e-6);
            else CHECK_NEAR(kg[k], fd, 3e-3 * (1 + fabs(fd)));
        }
    }
    vc_kl_spec sp;
    CHECK_OK(vc_kl_parse("k3+", &sp));
    vc_kl_penalty(sp, a, r, 3, kv, kg);
    CHECK_NEAR(kv[0], exp(-0.3) + 0.3 - 1.0, 1e-6); /* forward value is k3's */
    CHECK(vc_kl_parse("full", &sp) == VC_ERR_UNSUPPORTED);
    CHECK(vc_kl_parse("k4", &sp) == VC_ERR_UNSUPPORTED);
    /* k3 clamps: ref - lp = 30 -> exp(20) - 21 clamped to 10, zero gradient */
    float big_a = -31.0f, big_r = -1.0f;
    CHECK_OK(vc_kl_parse("k3", &sp));
    vc_kl_penalty(sp, &big_a, &big_r, 1, kv, kg);
    CHECK(kv[0] == 10.0f && kg[0] == 0.0f);
}

static void test_entropy_and_ctrl(void) {
    float z[2 * 5], H[2], dH[2] = { 1.0f, -0.5f }, dz[10];
    for (int i = 0; i < 10; i++) z[i] = frand(-2, 2);
    vc_entropy_from_logits(z, 2, 5, H);
    vc_entropy_backward(z, 2, 5, dH, dz);
    for (int i = 0; i < 10; i++) {
        float s = z[i], Hp[2], Hm[2];
        z[i] = s + 1e-3f; vc_entropy_from_logits(z, 2, 5, Hp);
        z[i] = s - 1e-3f; vc_entropy_from_logits(z, 2, 5, Hm);
        z[i] = s;
        int r = i / 5;
        double fd = dH[r] * ((double)Hp[r] - Hm[r]) / ((double)(s + 1e-3f) - (s - 1e-3f));
        CHECK_NEAR(dz[i], fd, 2e-3);
    }
    float u[4] = { 0, 0, 0, 0 };
    vc_entropy_from_logits(u, 1, 4, H);
    CHECK_NEAR(H[0], log(4.0), 1e-6);
    vc_kl_ctrl c;
    CHECK(vc_kl_ctrl_adaptive(&c, 0.1, 6.0, 0.0) == VC_ERR_ARG);
    CHECK_OK(vc_kl_ctrl_adaptive(&c, 0.1, 6.0, 10000.0));
    vc_kl_ctrl_update(&c, 9.0, 256); /* error clipped to 0.2 */
    CHECK_NEAR(c.value, 0.1 * (1 + 0.2 * 256 / 10000.0), 1e-12);
    vc_kl_ctrl_update(&c, 5.4, 100); /* error -0.1 */
    CHECK_NEAR(c.value, 0.1 * (1 + 0.2 * 256 / 10000.0) * (1 - 0.1 * 100 / 10000.0), 1e-12);
    vc_kl_ctrl_fixed(&c, 0.05);
    vc_kl_ctrl_update(&c, 100.0, 10);
    CHECK(c.value == 0.05);
    /* apply_kl_penalty: rewards = scores - beta kl mask; current_kl = mean of row means */
    float sc[4] = { 0, 1, 0, 0 }, old[4] = { -1, -1, -2, -2 }, ref[4] = { -1.5f, -1, -1, -2 }, mk[4] = { 1, 1, 1, 0 }, rw[4];
    vc_kl_spec sp = { VC_KL_K1, 0 };
    double cur, beta;
    vc_kl_ctrl_fixed(&c, 0.1);
    CHECK_OK(vc_apply_kl_penalty(sc, old, ref, mk, 2, 2, sp, &c, rw, &cur, &beta));
    CHECK_NEAR(rw[0], -0.05, 1e-7);
    CHECK_NEAR(rw[2], 0.1, 1e-7);
    CHECK_NEAR(rw[3], 0.0, 0);
    CHECK_NEAR(cur, (0.25 + -1.0) / 2.0, 1e-6);
    CHECK(beta == 0.1);
}

int main(void) {
    test_groups();
    test_masks();
    test_pg_grad();
    test_straight_through_grads();
    test_more_pg_modes();
    test_entropy_and_ctrl();
    return vc_test_done();
}
