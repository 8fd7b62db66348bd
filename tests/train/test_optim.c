#pragma GCC optimize("fp-contract=off")
#include "verlc/core.h"
#include "verlc/optim.h"
#include "verlc/json.h"
#include "tensor/backend.h"
#include "infer/infer.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

/* Weights, gradients and moments are backend memory: the tests run on the CPU backend and on the sim
 * backend (poisoned pointers) and move values only with h2d / d2h. */
static float *dev(const float *h, size_t n) {
    float *d = vc_be()->alloc(n * sizeof(float));
    if (h) vc_be()->h2d(d, h, n * sizeof(float));
    else vc_be()->zero(d, n * sizeof(float));
    return d;
}
static void push(float *d, const float *h, size_t n) { vc_be()->h2d(d, h, n * sizeof(float)); }
static void pull(float *h, const float *d, size_t n) {
    vc_be()->d2h(h, d, n * sizeof(float));
    CHECK_OK(vc_be()->sync());
}
static float one(const float *d, size_t i) {
    float x;
    pull(&x, d + i, 1);
    return x;
}
static void dfree(float *d) { vc_be()->free(d); }
#include <float.h>

/* Reference AdamW step written from torch's _single_tensor_adam (decoupled weight decay): every float32
 * operation is done in double and rounded to float, which gives the correctly rounded float result
 * for +, -, *, / and sqrt; the first moment uses the fused multiply-add of torch's vectorised lerp. */
static float rf(double x) { return (float)x; }

static void ref_step(float *w, const float *g, float *m, float *v, size_t n, int t, double lr, double b1, double b2,
                     double eps, double wd) {
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    float step_neg = rf(-(lr / bc1)), bc2s = rf(sqrt(bc2));
    float wdm = rf(1.0 - lr * wd), lw = rf(1.0 - b1), b2f = rf(b2), omb2 = rf(1.0 - b2), epsf = rf(eps);
    for (size_t i = 0; i < n; i++) {
        float p = w[i];
        if (wd != 0) p = rf((double)p * wdm);
        float d = rf((double)g[i] - m[i]);
        m[i] = rf(fma((double)lw, (double)d, (double)m[i]));
        float vv = rf((double)v[i] * b2f);
        float gg = rf(rf((double)omb2 * g[i]) * (double)g[i]);
        v[i] = rf((double)vv + gg);
        float den = rf(rf(sqrt((double)v[i])) / (double)bc2s);
        den = rf((double)den + epsf);
        float upd = rf(rf((double)step_neg * m[i]) / (double)den);
        w[i] = rf((double)p + upd);
    }
}

enum { NA = 37, NB = 5 };

static void fill(float *w, float *ga, size_t n, int step, float scale) {
    for (size_t i = 0; i < n; i++) {
        if (w) w[i] = scale * sinf(0.37f * (float)i + 1.0f);
        ga[i] = scale * cosf(0.91f * (float)i + 0.5f * (float)step) * (i % 3 ? 1.0f : 1e-3f);
    }
}

static void test_adamw_matches_reference(void) {
    float wa[NA], wb[NB], ga[NA], gb[NB], ra[NA], rb[NB];
    float ma[NA] = { 0 }, va[NA] = { 0 }, mb[NB] = { 0 }, vb[NB] = { 0 };
    fill(wa, ga, NA, 0, 0.5f);
    fill(wb, gb, NB, 0, 2.0f);
    memcpy(ra, wa, sizeof wa);
    memcpy(rb, wb, sizeof wb);
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    cfg.weight_decay = 0.1;
    float *dwa = dev(wa, NA), *dga = dev(ga, NA), *dwb = dev(wb, NB), *dgb = dev(gb, NB);
    vc_optim_param params[2] = { { dwa, dga, NA, 1 }, { dwb, dgb, NB, 0 } };
    vc_adamw opt;
    CHECK_OK(vc_adamw_init(&opt, &cfg, params, 2));
    int mismatches = 0;
    float om[2][NA], ov[2][NA];
    for (int t = 1; t <= 6; t++) {
        double lr = 1e-3 * t / 3.0;
        fill(NULL, ga, NA, t, 0.5f);
        fill(NULL, gb, NB, t, 2.0f);
        push(dga, ga, NA);
        push(dgb, gb, NB);
        CHECK_OK(vc_adamw_step(&opt, lr));
        pull(wa, dwa, NA);
        pull(wb, dwb, NB);
        pull(om[0], opt.m[0], NA);
        pull(ov[0], opt.v[0], NA);
        pull(om[1], opt.m[1], NB);
        pull(ov[1], opt.v[1], NB);
        ref_step(ra, ga, ma, va, NA, t, lr, 0.9, 0.999, 1e-8, 0.1);
        ref_step(rb, gb, mb, vb, NB, t, lr, 0.9, 0.999, 1e-8, 0.0); /* decay off for this tensor */
        for (int i = 0; i < NA; i++) mismatches += wa[i] != ra[i] || om[0][i] != ma[i] || ov[0][i] != va[i];
        for (int i = 0; i < NB; i++) mismatches += wb[i] != rb[i] || om[1][i] != mb[i] || ov[1][i] != vb[i];
    }
    CHECK_MSG(mismatches == 0, "%s: %d float mismatches against the reference", vc_be()->name, mismatches);
    CHECK(opt.step == 6);
    vc_adamw_free(&opt);
    dfree(dwa); dfree(dga); dfree(dwb); dfree(dgb);
}

/* TransformerEngine's FusedAdam with exp_avg_dtype / exp_avg_sq_dtype bf16: the step's update from the moments before
 * rounding, the moments then stored rounded to bf16 (nearest even); either moment alone */
static float bf16r(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static void test_adamw_bf16_moments(void) {
    for (int which = 1; which <= 3; which++) { /* 1: first moment, 2: second, 3: both */
        float w[NA], g[NA], r[NA], m[NA] = { 0 }, v[NA] = { 0 }, om[NA], ov[NA];
        fill(w, g, NA, 0, 0.5f);
        memcpy(r, w, sizeof w);
        vc_adamw_config cfg;
        vc_adamw_config_default(&cfg);
        cfg.m_bf16 = which & 1, cfg.v_bf16 = (which >> 1) & 1;
        float *dw = dev(w, NA), *dg = dev(g, NA);
        vc_optim_param p = { dw, dg, NA, 1 };
        vc_adamw opt;
        CHECK_OK(vc_adamw_init(&opt, &cfg, &p, 1));
        int mismatches = 0, rounded = 0;
        for (int t = 1; t <= 5; t++) {
            fill(NULL, g, NA, t, 0.5f);
            push(dg, g, NA);
            CHECK_OK(vc_adamw_step(&opt, 1e-3));
            ref_step(r, g, m, v, NA, t, 1e-3, 0.9, 0.999, 1e-8, 0.01);
            for (int i = 0; i < NA; i++) {
                float mr = cfg.m_bf16 ? bf16r(m[i]) : m[i], vr = cfg.v_bf16 ? bf16r(v[i]) : v[i];
                rounded += mr != m[i] || vr != v[i];
                m[i] = mr, v[i] = vr;
            }
            pull(w, dw, NA);
            pull(om, opt.m[0], NA);
            pull(ov, opt.v[0], NA);
            for (int i = 0; i < NA; i++) mismatches += w[i] != r[i] || om[i] != m[i] || ov[i] != v[i];
        }
        CHECK_MSG(mismatches == 0 && rounded > 0, "%s: bf16 moments (%d): %d mismatches, %d values rounded",
                  vc_be()->name, which, mismatches, rounded);
        vc_adamw_free(&opt);
        dfree(dw);
        dfree(dg);
    }
    int bf = -1;
    CHECK(vc_adamw_moment_dtype("k", "torch.bfloat16", &bf) == VC_OK && bf == 1);
    CHECK(vc_adamw_moment_dtype("k", "fp32", &bf) == VC_OK && bf == 0);
    CHECK(vc_adamw_moment_dtype("k", NULL, &bf) == VC_OK && bf == 0);
    CHECK(vc_adamw_moment_dtype("optim.exp_avg_dtype", "fp16", &bf) == VC_ERR_UNSUPPORTED);
    CHECK(strstr(vc_last_error(), "optim.exp_avg_dtype=fp16") != NULL);
}

/* clipping's factor read by the step (vc_adamw_config.grad_scale) against the gradients scaled in place first, as
 * vc_clip_grad_norm scales them: the same weights and moments bit for bit over several steps; vc_clip_grad_coef gives
 * that factor and leaves the gradients as they are */
static void test_adamw_grad_scale(void) {
    float w[NA], g[NA], ws[NA], ms[NA], vs[NA], wf[NA], mf[NA], vf[NA];
    fill(w, g, NA, 0, 0.5f);
    float *dwa = dev(w, NA), *dwb = dev(w, NA), *dga = dev(g, NA), *dgb = dev(g, NA);
    vc_optim_param pa = { dwa, dga, NA, 1 }, pb = { dwb, dgb, NA, 1 };
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    vc_adamw a, b;
    CHECK_OK(vc_adamw_init(&a, &cfg, &pa, 1));
    CHECK_OK(vc_adamw_init(&b, &cfg, &pb, 1));
    int mismatches = 0;
    for (int t = 1; t <= 4; t++) {
        fill(NULL, g, NA, t, 3.0f);
        push(dga, g, NA);
        push(dgb, g, NA);
        float *gr[1] = { dgb };
        size_t n[1] = { NA };
        double norm = 0, coef = 0;
        CHECK(vc_clip_grad_coef(gr, n, 1, 1.0, &norm, &coef) == 1 && coef < 1.0 && coef > 0);
        CHECK(vc_clip_grad_norm((float *const[]){ dga }, n, 1, 1.0, &norm) == 1); /* a: scaled in place */
        pull(wf, dgb, NA);
        CHECK_MSG(!memcmp(wf, g, sizeof g), "vc_clip_grad_coef changed the gradients");
        b.cfg.grad_scale = (float)coef; /* b: read scaled */
        CHECK_OK(vc_adamw_step(&a, 1e-3));
        CHECK_OK(vc_adamw_step(&b, 1e-3));
        b.cfg.grad_scale = 0;
        pull(ws, dwa, NA), pull(ms, a.m[0], NA), pull(vs, a.v[0], NA);
        pull(wf, dwb, NA), pull(mf, b.m[0], NA), pull(vf, b.v[0], NA);
        mismatches += memcmp(ws, wf, sizeof ws) != 0 || memcmp(ms, mf, sizeof ms) != 0 || memcmp(vs, vf, sizeof vs) != 0;
    }
    CHECK_MSG(mismatches == 0, "%s: grad_scale differs from scaling the gradients in place (%d steps)", vc_be()->name,
              mismatches);
    vc_adamw_free(&a);
    vc_adamw_free(&b);
    dfree(dwa);
    dfree(dwb);
    dfree(dga);
    dfree(dgb);
}

/* Step 1 from zero moments moves each weight by lr * sign(g) (up to eps), after decay. */
static void test_adamw_first_step(void) {
    float w[4] = { 1.0f, -2.0f, 0.5f, 3.0f }, g[4] = { 0.3f, -0.01f, 5.0f, -1.0f };
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    cfg.lr = 0.01;
    cfg.weight_decay = 0.5;
    float *dw = dev(w, 4), *dg = dev(g, 4);
    vc_optim_param p = { dw, dg, 4, 1 };
    vc_adamw opt;
    CHECK_OK(vc_adamw_init(&opt, &cfg, &p, 1));
    CHECK_OK(vc_adamw_step(&opt, cfg.lr));
    pull(w, dw, 4);
    const double w0[4] = { 1.0, -2.0, 0.5, 3.0 }, s[4] = { 1, -1, 1, -1 };
    for (int i = 0; i < 4; i++) CHECK_NEAR(w[i], w0[i] * (1 - 0.005) - 0.01 * s[i], 2e-6);
    CHECK_NEAR(one(opt.m[0], 2), 0.5, 1e-6);
    CHECK_NEAR(one(opt.v[0], 2), 0.025, 1e-7);
    vc_adamw_free(&opt);
    /* decay flag off: no shrink */
    float w2[1] = { 1.0f }, g2[1] = { 1.0f };
    float *dw2 = dev(w2, 1), *dg2 = dev(g2, 1);
    vc_optim_param p2 = { dw2, dg2, 1, 0 };
    CHECK_OK(vc_adamw_init(&opt, &cfg, &p2, 1));
    CHECK_OK(vc_adamw_step(&opt, cfg.lr));
    CHECK_NEAR(one(dw2, 0), 0.99, 1e-6);
    CHECK(vc_adamw_step(&opt, NAN) == VC_ERR_ARG);
    vc_adamw_free(&opt);
    vc_adamw_config bad = cfg;
    bad.beta1 = 1.0;
    CHECK(vc_adamw_init(&opt, &bad, &p2, 1) == VC_ERR_ARG);
    dfree(dw); dfree(dg); dfree(dw2); dfree(dg2);
}

static void test_adamw_state(void) {
    float w1[NA], g[NA], w2[NA], wb[NB], gb[NB], wb2[NB];
    fill(w1, g, NA, 0, 1.0f);
    fill(wb, gb, NB, 0, 1.0f);
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    float *dw1 = dev(w1, NA), *dg = dev(g, NA), *dwb = dev(wb, NB), *dgb = dev(gb, NB);
    vc_optim_param p[2] = { { dw1, dg, NA, 1 }, { dwb, dgb, NB, 0 } };
    vc_adamw a, b;
    CHECK_OK(vc_adamw_init(&a, &cfg, p, 2));
    for (int t = 0; t < 3; t++) {
        fill(NULL, g, NA, t, 1.0f);
        push(dg, g, NA);
        CHECK_OK(vc_adamw_step(&a, 1e-3));
    }
    pull(w1, dw1, NA);
    pull(wb, dwb, NB);
    size_t len = vc_adamw_state_size(&a);
    CHECK(len == 24 + 2 * 8 + 2 * 4 * (NA + NB));
    unsigned char *buf = malloc(len);
    CHECK_OK(vc_adamw_state_save(&a, buf, len));
    float *dw2 = dev(w1, NA), *dwb2 = dev(wb, NB);
    vc_optim_param q[2] = { { dw2, dg, NA, 1 }, { dwb2, dgb, NB, 0 } };
    CHECK_OK(vc_adamw_init(&b, &cfg, q, 2));
    CHECK_OK(vc_adamw_state_load(&b, buf, len));
    CHECK(b.step == 3);
    for (int t = 3; t < 5; t++) {
        fill(NULL, g, NA, t, 1.0f);
        push(dg, g, NA);
        CHECK_OK(vc_adamw_step(&a, 1e-3));
        CHECK_OK(vc_adamw_step(&b, 1e-3));
    }
    pull(w1, dw1, NA);
    pull(wb, dwb, NB);
    pull(w2, dw2, NA);
    pull(wb2, dwb2, NB);
    CHECK(!memcmp(w1, w2, sizeof w1) && !memcmp(wb, wb2, sizeof wb)); /* resumed run is bit-identical */
    CHECK(vc_adamw_state_load(&b, buf, len - 1) == VC_ERR_FORMAT);
    buf[0] = 'X';
    CHECK(vc_adamw_state_load(&b, buf, len) == VC_ERR_FORMAT);
    buf[0] = 'V';
    vc_adamw c;
    vc_optim_param r[2] = { { dw2, dg, NA - 1, 1 }, { dwb2, dgb, NB, 0 } };
    CHECK_OK(vc_adamw_init(&c, &cfg, r, 2));
    CHECK(vc_adamw_state_load(&c, buf, len) == VC_ERR_SHAPE);
    CHECK(strstr(vc_last_error(), "tensor 0 has 37 elements saved, 36 expected") != NULL);
    vc_adamw_free(&c);
    CHECK_OK(vc_adamw_init(&c, &cfg, r, 1));
    CHECK(vc_adamw_state_load(&c, buf, len) == VC_ERR_SHAPE);
    vc_adamw_free(&c);
    free(buf);
    vc_adamw_free(&a);
    vc_adamw_free(&b);
    dfree(dw1); dfree(dg); dfree(dwb); dfree(dgb); dfree(dw2); dfree(dwb2);
}

/* the state streamed in pieces: the same layout as the buffer, across the staging pieces of a large tensor, and a
 * failing sink stops it with its status */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int calls, fail_at;
} sink;

static vc_status put_sink(void *ctx, const void *p, size_t n) {
    sink *s = ctx;
    if (++s->calls == s->fail_at) return vc_fail(VC_ERR_IO, "sink full");
    if (s->n + n > s->cap) return vc_fail(VC_ERR_INTERNAL, "sink overflow");
    memcpy(s->p + s->n, p, n);
    s->n += n;
    return VC_OK;
}

static void test_adamw_stream(void) {
    size_t n = ((size_t)1 << 22) + 5; /* past one staging piece */
    float *w = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    for (size_t i = 0; i < n; i++) w[i] = 0.001f * (float)(i % 977), g[i] = 0.01f * (float)((i * 7) % 101) - 0.5f;
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    float *dw = dev(w, n), *dg = dev(g, n);
    vc_optim_param p = { dw, dg, n, 1 };
    vc_adamw a;
    CHECK_OK(vc_adamw_init(&a, &cfg, &p, 1));
    CHECK_OK(vc_adamw_step(&a, 1e-3));
    pull(m, a.m[0], n);
    pull(v, a.v[0], n);
    sink s = { malloc(vc_adamw_state_size(&a)), 0, vc_adamw_state_size(&a), 0, 0 };
    CHECK_OK(vc_adamw_state_stream(&a, put_sink, &s));
    uint64_t cnt = 0;
    if (s.n == s.cap) memcpy(&cnt, s.p + 24, 8);
    CHECK_MSG(s.n == s.cap && !memcmp(s.p, "VCADAMW1", 8) && cnt == n && !memcmp(s.p + 32, m, n * 4) &&
                  !memcmp(s.p + 32 + n * 4, v, n * 4),
              "streamed state: %zu of %zu bytes, moments as in backend memory", s.n, s.cap);
    CHECK_MSG(s.calls > 6, "%d pieces: the large tensor is staged in pieces", s.calls);
    sink f = { s.p, 0, s.cap, 0, 6 };
    CHECK(vc_adamw_state_stream(&a, put_sink, &f) == VC_ERR_IO && f.calls == 6);
    free(s.p);
    vc_adamw_free(&a);
    dfree(dw);
    dfree(dg);
    free(w), free(g), free(m), free(v);
}

static void test_clip(void) {
    float a[3] = { 3.0f, 0.0f, 4.0f }, b[2] = { 0.0f, 12.0f };
    float *da = dev(a, 3), *db = dev(b, 2);
    float *gr[2] = { da, db };
    size_t n[2] = { 3, 2 };
    double norm;
    CHECK(vc_clip_grad_norm(gr, n, 2, 100.0, &norm) == 1);
    CHECK_NEAR(norm, 13.0, 1e-12);
    CHECK(one(da, 0) == 3.0f && one(db, 1) == 12.0f); /* under the limit: untouched */
    CHECK(vc_clip_grad_norm(gr, n, 2, 1.0, &norm) == 1);
    CHECK_NEAR(norm, 13.0, 1e-12);
    float c = (float)(1.0 / (13.0 + 1e-6));
    pull(a, da, 3);
    pull(b, db, 2);
    CHECK(a[0] == 3.0f * c && a[2] == 4.0f * c && b[1] == 12.0f * c);
    CHECK_NEAR(vc_grad_norm((const float *const *)gr, n, 2), 1.0, 1e-6);
    a[1] = NAN;
    b[1] = 5.0f;
    push(da, a, 3);
    push(db, b, 2);
    CHECK(vc_clip_grad_norm(gr, n, 2, 1.0, &norm) == 0);
    CHECK(isnan(norm) && one(db, 1) == 5.0f); /* non-finite: grads untouched, caller skips the step */
    a[1] = INFINITY;
    push(da, a, 3);
    CHECK(vc_clip_grad_norm(gr, n, 2, 1.0, &norm) == 0 && one(db, 1) == 5.0f);
    dfree(da);
    dfree(db);
    /* large tensors: norm in double is exact enough and deterministic */
    enum { BIG = 100003 };
    float *big = malloc(BIG * sizeof *big);
    for (int i = 0; i < BIG; i++) big[i] = 1e-3f;
    float *dbig = dev(big, BIG);
    float *gb[1] = { dbig };
    size_t nb[1] = { BIG };
    CHECK(vc_clip_grad_norm(gb, nb, 1, 0.0, &norm) == 1);
    CHECK_NEAR(norm, sqrt(BIG * (double)1e-3f * (double)1e-3f), 1e-12);
    free(big);
    dfree(dbig);
}

static void test_schedules(void) {
    vc_lr_config c;
    vc_lr_schedule s;
    vc_lr_config_default(&c);
    c.lr = 1e-3;
    c.lr_warmup_steps = 10;
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK(s.kind == VC_LR_CONSTANT && s.warmup_steps == 10);
    CHECK_NEAR(vc_lr_at(&s, 0), 0.0, 0);
    CHECK_NEAR(vc_lr_at(&s, 5), 0.5e-3, 1e-18);
    CHECK_NEAR(vc_lr_at(&s, 10), 1e-3, 1e-18);
    CHECK_NEAR(vc_lr_at(&s, 1000), 1e-3, 1e-18);

    c.lr_scheduler_type = "cosine";
    c.total_training_steps = 110;
    c.min_lr_ratio = 0.1;
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK_NEAR(vc_lr_at(&s, 4), 0.4e-3, 1e-18);
    CHECK_NEAR(vc_lr_at(&s, 10), 1e-3, 1e-15);
    CHECK_NEAR(vc_lr_at(&s, 60), 0.55e-3, 1e-15);                            /* cos(pi/2) = 0 */
    CHECK_NEAR(vc_lr_at(&s, 35), 1e-3 * (0.45 * cos(M_PI * 0.25) + 0.55), 1e-15);
    CHECK_NEAR(vc_lr_at(&s, 110), 0.1e-3, 1e-15);                            /* floor at min_lr_ratio */
    c.min_lr_ratio = 0.0;
    c.num_cycles = 1.0;
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK_NEAR(vc_lr_at(&s, 60), 0.0, 1e-15); /* full cycle: lowest mid-way */
    /* later verl's zero_indexed_step=false: the cosine schedule counts from 1 (warmup too) */
    vc_lr_schedule s1;
    c.one_indexed = 1;
    CHECK_OK(vc_lr_schedule_init(&s1, &c));
    CHECK_NEAR(vc_lr_at(&s1, 0), 0.1e-3, 1e-18); /* warmup step 1 of 10 */
    for (int64_t t = 0; t < 120; t += 7) CHECK_NEAR(vc_lr_at(&s1, t), vc_lr_at(&s, t + 1), 1e-18);
    c.one_indexed = 0;

    /* warmup as a ratio of total steps: int(0.1 * 55) = 5 */
    vc_lr_config_default(&c);
    c.lr = 2.0;
    c.lr_scheduler_type = "cosine";
    c.total_training_steps = 55;
    c.lr_warmup_steps_ratio = 0.1;
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK(s.warmup_steps == 5);
    CHECK_NEAR(vc_lr_at(&s, 1), 0.4, 1e-15);
    CHECK_NEAR(vc_lr_at(&s, 30), 1.0, 1e-12); /* progress 25/50 */
    c.lr_warmup_steps = 0;                    /* 0 also delegates to the ratio */
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK(s.warmup_steps == 5);

    /* deprecated warmup_style wins over lr_scheduler_type */
    c.warmup_style = "constant";
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK(s.kind == VC_LR_CONSTANT && vc_lr_at(&s, 30) == 2.0);
    c.warmup_style = NULL;

    c.lr_scheduler_type = "linear";
    c.lr_warmup_steps = 10;
    c.total_training_steps = 110;
    c.min_lr_ratio = 0.2;
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK_NEAR(vc_lr_at(&s, 5), 1.0, 1e-15);
    CHECK_NEAR(vc_lr_at(&s, 60), 2.0 * (0.2 + 0.5 * 0.8), 1e-15);
    CHECK_NEAR(vc_lr_at(&s, 110), 0.4, 1e-15);
    CHECK_NEAR(vc_lr_at(&s, 500), 0.4, 1e-15);

    c.lr_scheduler_type = "wsd";
    c.min_lr_ratio = 0.0;
    CHECK_OK(vc_lr_schedule_init(&s, &c));
    CHECK_NEAR(vc_lr_at(&s, 50), 2.0, 1e-15);  /* stable: 90 of the 100 post-warmup steps */
    CHECK_NEAR(vc_lr_at(&s, 105), 1.0, 1e-12); /* decay half-way */
    CHECK_NEAR(vc_lr_at(&s, 110), 0.0, 1e-15);

    c.lr_scheduler_type = "exponential";
    CHECK(vc_lr_schedule_init(&s, &c) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "exponential") != NULL);
    c.lr_scheduler_type = "cosine";
    c.total_training_steps = -1;
    CHECK(vc_lr_schedule_init(&s, &c) == VC_ERR_ARG);
}

/* Megatron-core's OptimizerParamScheduler, run by tools/fixtures/make_megatron_lr.py (the wheel's own code) as
 * verl's megatron strategy builds it: every step's lr of ten schedules (warmups with and without init lr,
 * constant, linear, cosine, inverse-square-root, WSD in its four styles, lr_decay_steps before the end) */
static void test_megatron_schedules(void) {
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(vc_read_file("tests/fixtures/megatron/lr_schedules.json", &text, &len));
    cJSON *all = text ? cJSON_Parse(text) : NULL, *c;
    free(text);
    int n = 0, bad = 0;
    cJSON_ArrayForEach(c, all) {
        vc_lr_megatron_config mc = { .lr_warmup_steps = -1 };
#define NUM(key, dst) do { const cJSON *_v = cJSON_GetObjectItem(c, key); if (cJSON_IsNumber(_v)) dst = _v->valuedouble; } while (0)
#define STR(key, dst) do { const cJSON *_v = cJSON_GetObjectItem(c, key); if (cJSON_IsString(_v)) dst = _v->valuestring; } while (0)
        double total = 0, decay = -1, warm = -1, wsd = -1;
        NUM("lr", mc.lr);
        NUM("lr_warmup_init", mc.lr_warmup_init);
        NUM("min_lr", mc.min_lr);
        NUM("lr_warmup_steps_ratio", mc.lr_warmup_steps_ratio);
        NUM("total", total);
        NUM("lr_decay_steps", decay);
        NUM("lr_warmup_steps", warm);
        NUM("lr_wsd_decay_steps", wsd);
        STR("lr_decay_style", mc.lr_decay_style);
        STR("lr_wsd_decay_style", mc.lr_wsd_decay_style);
#undef NUM
#undef STR
        mc.total_training_steps = (int64_t)total;
        mc.lr_decay_steps = (int64_t)decay;
        mc.lr_warmup_steps = (int64_t)warm;
        mc.lr_wsd_decay_steps = (int64_t)wsd;
        vc_lr_schedule s;
        CHECK_OK(vc_lr_megatron_init(&s, &mc));
        const cJSON *lrs = cJSON_GetObjectItem(c, "lrs");
        for (int k = 0; k < cJSON_GetArraySize(lrs); k++) {
            double want = cJSON_GetArrayItem(lrs, k)->valuedouble, got = vc_lr_at(&s, k);
            if (fabs(got - want) > 1e-15 * fabs(want) + 1e-300 && bad++ < 5)
                fprintf(stderr, "megatron schedule %d step %d: %.17g, Megatron %.17g\n", n, k, got, want);
        }
        n++;
    }
    cJSON_Delete(all);
    CHECK_MSG(n == 10 && bad == 0, "%d schedules, %d steps differ from Megatron-core", n, bad);
    /* Megatron-core's checks */
    vc_lr_megatron_config mc = { .lr = 1e-5, .total_training_steps = 10, .lr_warmup_steps = 10 };
    vc_lr_schedule s;
    CHECK(vc_lr_megatron_init(&s, &mc) == VC_ERR_ARG && strstr(vc_last_error(), "warmup"));
    mc.lr_warmup_steps = 2;
    mc.lr_decay_style = "WSD";
    CHECK(vc_lr_megatron_init(&s, &mc) == VC_ERR_ARG && strstr(vc_last_error(), "lr_wsd_decay_steps"));
    mc.lr_decay_style = "poly";
    CHECK(vc_lr_megatron_init(&s, &mc) == VC_ERR_ARG && strstr(vc_last_error(), "poly"));
    mc.lr_decay_style = NULL;
    mc.min_lr = 1e-4;
    CHECK(vc_lr_megatron_init(&s, &mc) == VC_ERR_ARG && strstr(vc_last_error(), "min_lr"));
}

/* Megatron-lite's _MegatronLiteLRScheduler (verl's mlite actor), run by tools/fixtures/make_mlite_lr.py from its own
 * code: every step's lr of ten schedules (constant, cosine and linear with warmups from an init lr or a ratio of the
 * total, inverse-square-root, wsd in three styles and without decay steps, decay steps shorter than the warmup, no
 * total steps: no scheduler) */
static void test_mlite_schedules(void) {
    cJSON *all = NULL, *c;
    CHECK_OK(vc_json_load_file("tests/fixtures/megatron/mlite_lr_schedules.json", &all));
    int n = 0, bad = 0;
    cJSON_ArrayForEach(c, all) {
        vc_lr_megatron_config mc = { 0 };
        const cJSON *v;
#define NUM(key, dst, def) dst = cJSON_IsNumber(v = cJSON_GetObjectItem(c, key)) ? v->valuedouble : def
        NUM("lr", mc.lr, 0);
        NUM("lr_warmup_init", mc.lr_warmup_init, 0);
        NUM("min_lr", mc.min_lr, 0);
        NUM("lr_warmup_steps_ratio", mc.lr_warmup_steps_ratio, 0);
        NUM("total_training_steps", mc.total_training_steps, 0);
        NUM("lr_decay_steps", mc.lr_decay_steps, -1);
        NUM("lr_warmup_steps", mc.lr_warmup_steps, -1);
        NUM("lr_wsd_decay_steps", mc.lr_wsd_decay_steps, -1);
#undef NUM
        mc.lr_decay_style = cJSON_GetObjectItem(c, "lr_decay_style")->valuestring;
        mc.lr_wsd_decay_style = cJSON_GetObjectItem(c, "lr_wsd_decay_style")->valuestring;
        vc_lr_schedule s;
        CHECK_OK(vc_lr_mlite_init(&s, &mc));
        const cJSON *lrs = cJSON_GetObjectItem(c, "lrs");
        for (int k = 0; k < cJSON_GetArraySize(lrs); k++) {
            double want = cJSON_GetArrayItem(lrs, k)->valuedouble, got = vc_lr_at(&s, k);
            if (fabs(got - want) > 1e-15 * fabs(want) + 1e-300 && bad++ < 5)
                fprintf(stderr, "mlite schedule %d step %d: %.17g, Megatron-lite %.17g\n", n, k, got, want);
        }
        n++;
    }
    cJSON_Delete(all);
    CHECK_MSG(n == 10 && bad == 0, "%d schedules, %d steps differ from Megatron-lite's", n, bad);
    vc_lr_megatron_config mc = { .lr = 1e-5, .total_training_steps = 10, .lr_decay_style = "poly" };
    vc_lr_schedule s;
    CHECK(vc_lr_mlite_init(&s, &mc) == VC_ERR_ARG && strstr(vc_last_error(), "poly"));
    mc.lr_decay_style = "WSD";
    mc.lr_wsd_decay_style = "minus_sqrt"; /* Megatron's, not Megatron-lite's */
    CHECK(vc_lr_mlite_init(&s, &mc) == VC_ERR_ARG && strstr(vc_last_error(), "minus_sqrt"));
}

/* VeOmni's schedules, run by tools/fixtures/make_veomni_lr.py (the wheel's own code) as verl's veomni engine builds
 * them: every step's lr of eight schedules (cosine with and without warmup, lr_start, lr_min, an lr_decay_ratio
 * before the end; linear; constant), to 1e-15 */
static void test_veomni_schedules(void) {
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(vc_read_file("tests/fixtures/veomni/lr_schedules.json", &text, &len));
    cJSON *all = text ? cJSON_Parse(text) : NULL, *c;
    free(text);
    int n = 0, bad = 0;
    cJSON_ArrayForEach(c, all) {
        vc_lr_veomni_config vc = { .lr_decay_ratio = 1.0 };
#define NUM(key, dst) do { const cJSON *_v = cJSON_GetObjectItem(c, key); if (cJSON_IsNumber(_v)) dst = _v->valuedouble; } while (0)
        double total = 0;
        NUM("lr", vc.lr);
        NUM("total", total);
        NUM("warmup_ratio", vc.lr_warmup_steps_ratio);
        NUM("decay_ratio", vc.lr_decay_ratio);
        NUM("lr_min", vc.lr_min);
        NUM("lr_start", vc.lr_start);
#undef NUM
        const cJSON *style = cJSON_GetObjectItem(c, "style");
        vc.lr_scheduler_type = cJSON_IsString(style) ? style->valuestring : NULL;
        vc.total_training_steps = (int64_t)total;
        vc_lr_schedule s;
        CHECK_OK(vc_lr_veomni_init(&s, &vc));
        const cJSON *lrs = cJSON_GetObjectItem(c, "lrs");
        for (int k = 0; k < cJSON_GetArraySize(lrs); k++) {
            double want = cJSON_GetArrayItem(lrs, k)->valuedouble, got = vc_lr_at(&s, k);
            /* within 1e-15 (-march=native contracts a * b + c into one fused multiply-add, Python does not) */
            if (fabs(got - want) > 1e-15 * fabs(want) + 1e-300 && bad++ < 5)
                fprintf(stderr, "veomni schedule %d step %d: %.17g, VeOmni %.17g\n", n, k, got, want);
        }
        n++;
    }
    cJSON_Delete(all);
    CHECK_MSG(n == 8 && bad == 0, "%d schedules, %d steps differ from VeOmni", n, bad);
    /* what VeOmni cannot run: a warmup past the cosine's decay steps (its assert), lr 0 (it divides by it) */
    vc_lr_veomni_config vc = { .lr = 1e-5, .total_training_steps = 10, .lr_warmup_steps_ratio = 0.6,
                               .lr_decay_ratio = 0.5, .lr_scheduler_type = "cosine" };
    vc_lr_schedule s;
    CHECK(vc_lr_veomni_init(&s, &vc) == VC_ERR_ARG && strstr(vc_last_error(), "warmup"));
    vc.lr_warmup_steps_ratio = 0;
    vc.lr_scheduler_type = "wsd";
    CHECK(vc_lr_veomni_init(&s, &vc) == VC_ERR_ARG && strstr(vc_last_error(), "wsd"));
    vc.lr_scheduler_type = NULL;
    vc.lr = 0;
    CHECK(vc_lr_veomni_init(&s, &vc) == VC_ERR_ARG && strstr(vc_last_error(), "lr 0"));
}

int main(void) {
    const vc_backend *bes[2] = { vc_backend_cpu(), vc_backend_sim() };
    for (int b = 0; b < 2; b++) {
        vc_set_backend(bes[b]);
        for (int isa = VC_GEMM_AVX512BF16; isa >= VC_GEMM_SCALAR; isa--) /* (the step's vector width follows it) */
            if (vc_infer_gemm_set_isa(isa) == 0) {
                test_adamw_matches_reference();
                test_adamw_grad_scale();
            }
        vc_infer_gemm_set_isa(-1);
        test_adamw_first_step();
        test_adamw_bf16_moments();
        test_adamw_state();
        test_adamw_stream();
        test_clip();
        CHECK_OK(vc_be()->sync());
    }
    vc_set_backend(NULL);
    test_schedules();
    test_megatron_schedules();
    test_mlite_schedules();
    test_veomni_schedules();
    return vc_test_done();
}
