/* Muon (verl's megatron optim.optimizer=muon) against Megatron-core's own TensorParallelMuon and emerging_optimizers'
 * newton_schulz (tests/fixtures/megatron/muon.json, tools/fixtures/make_muon_ref.py): two steps on Megatron's fused
 * modules (linear_qkv split or whole, linear_fc1 = [gate; up], per-expert fc1 / fc2) beside AdamW on a norm, in f32
 * and in bf16 (fp32_matmul_prec=medium); every coefficient set; state round trips; bad shapes and settings. Runs on
 * the CPU backend and on the sim backend (backend memory behind poisoned pointers). */
#include "verlc/core.h"
#include "verlc/json.h"
#include "verlc/optim.h"
#include "tensor/backend.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static cJSON *fixture;

static float *dev(const float *h, size_t n) {
    float *d = vc_be()->alloc(n * sizeof(float));
    if (h) vc_be()->h2d(d, h, n * sizeof(float));
    else vc_be()->zero(d, n * sizeof(float));
    return d;
}
static void pull(float *h, const float *d, size_t n) {
    vc_be()->d2h(h, d, n * sizeof(float));
    CHECK_OK(vc_be()->sync());
}

static float *floats(const cJSON *a, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(a);
    float *x = malloc(sizeof(float) * (*n ? *n : 1));
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) x[i++] = (float)v->valuedouble;
    return x;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void config_from(const cJSON *c, vc_muon_config *m) {
    vc_muon_config_default(m);
    m->on = 1;
    m->momentum = cJSON_GetObjectItem(c, "momentum")->valuedouble;
    m->nesterov = cJSON_IsTrue(cJSON_GetObjectItem(c, "nesterov"));
    m->split_qkv = cJSON_IsTrue(cJSON_GetObjectItem(c, "split_qkv"));
    m->ns_steps = (int)cJSON_GetObjectItem(c, "steps")->valuedouble;
    m->extra_scale = cJSON_GetObjectItem(c, "extra")->valuedouble;
    CHECK_OK(vc_muon_coeff_parse("coeff", cJSON_GetObjectItem(c, "coeff")->valuestring, &m->coeff));
    CHECK_OK(vc_muon_scale_parse("scale", cJSON_GetObjectItem(c, "scale")->valuestring, &m->scale_mode));
    CHECK_OK(vc_muon_prec_parse("prec", cJSON_GetObjectItem(c, "prec")->valuestring, &m->bf16));
}

/* emerging_optimizers 0.3's newton_schulz, every coefficient set, wide and tall (f32) */
static void test_newton_schulz(void) {
    const cJSON *c;
    int n = 0;
    double worst = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fixture, "ns_cases")) {
        vc_muon_config m;
        vc_muon_config_default(&m);
        m.bf16 = 0;
        m.ns_steps = (int)cJSON_GetObjectItem(c, "steps")->valuedouble;
        CHECK_OK(vc_muon_coeff_parse("coeff", cJSON_GetObjectItem(c, "coeff")->valuestring, &m.coeff));
        int64_t R = (int64_t)cJSON_GetObjectItem(c, "rows")->valuedouble, C = (int64_t)cJSON_GetObjectItem(c, "cols")->valuedouble;
        size_t nx, ny;
        float *x = floats(cJSON_GetObjectItem(c, "x"), &nx), *y = floats(cJSON_GetObjectItem(c, "y"), &ny);
        float *d = dev(x, nx);
        CHECK_OK(vc_muon_orthogonalize(&m, d, R, C));
        pull(x, d, nx);
        double e = max_diff(x, y, ny);
        CHECK_MSG(nx == ny && e < 5e-5, "newton_schulz %s x %d on [%lld, %lld]: max |diff| %.3g",
                  cJSON_GetObjectItem(c, "coeff")->valuestring, m.ns_steps, (long long)R, (long long)C, e);
        worst = fmax(worst, e);
        vc_be()->free(d);
        free(x);
        free(y);
        n++;
    }
    CHECK_MSG(n == 14, "%d Newton-Schulz cases", n);
    printf("newton_schulz: %d cases, max |diff| %.3g from emerging_optimizers\n", n, worst);
}

/* the fixture's parameters in verlc's order, with Muon's view as the trainer gives it (vc_model_param_matrix) */
static const char *const NAMES[] = { "q", "k", "v", "o", "gate", "up", "down", "exp_gate", "exp_up", "exp_down",
                                     "router", "norm" };
#define NP 12

typedef struct run {
    vc_optim_param p[NP];
    float *w[NP], *g[NP];
    vc_adamw opt;
} run;

static void setup(run *r, const cJSON *params, const vc_adamw_config *cfg, int split_qkv) {
    for (int i = 0; i < NP; i++) {
        const cJSON *pp = cJSON_GetObjectItem(params, NAMES[i]), *sh = cJSON_GetObjectItem(pp, "shape");
        size_t n;
        float *w0 = floats(cJSON_GetObjectItem(pp, "w0"), &n);
        r->w[i] = dev(w0, n);
        r->g[i] = dev(NULL, n);
        free(w0);
        int nd = cJSON_GetArraySize(sh);
        vc_optim_param *q = &r->p[i];
        *q = (vc_optim_param){ r->w[i], r->g[i], n, nd > 1 };
        if (nd > 1) {
            q->rows = (int64_t)cJSON_GetArrayItem(sh, nd - 2)->valuedouble;
            q->cols = (int64_t)cJSON_GetArrayItem(sh, nd - 1)->valuedouble;
            q->mats = (int64_t)n / (q->rows * q->cols);
        }
        if (i <= 2 && !split_qkv) q->fuse = 1;
        if (i == 4 || i == 5) q->fuse = 2;
        if (i == 7 || i == 8) q->fuse = 3;
    }
    CHECK_OK(vc_adamw_init(&r->opt, cfg, r->p, NP));
}

static void set_grads(run *r, const cJSON *params, int step) {
    for (int i = 0; i < NP; i++) {
        size_t n;
        float *g = floats(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(params, NAMES[i]), "g"), step), &n);
        vc_be()->h2d(r->g[i], g, n * sizeof(float));
        CHECK_OK(vc_be()->sync());
        free(g);
    }
}

static void free_run(run *r) {
    vc_adamw_free(&r->opt);
    for (int i = 0; i < NP; i++) {
        vc_be()->free(r->w[i]);
        vc_be()->free(r->g[i]);
    }
}

/* Megatron-core's TensorParallelMuon (+ AdamW on the norm): two steps, the weights and momenta after them; the
 * difference measured against the size of the two updates */
static void test_megatron_steps(void) {
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fixture, "opt_cases")) {
        const cJSON *params = cJSON_GetObjectItem(c, "params"), *lrs = cJSON_GetObjectItem(c, "lr");
        vc_adamw_config cfg;
        vc_adamw_config_default(&cfg);
        cfg.weight_decay = cJSON_GetObjectItem(c, "weight_decay")->valuedouble;
        config_from(cJSON_GetObjectItem(c, "config"), &cfg.muon);
        run r;
        setup(&r, params, &cfg, cfg.muon.split_qkv);
        for (int s = 0; s < cJSON_GetArraySize(lrs); s++) {
            set_grads(&r, params, s);
            CHECK_OK(vc_adamw_step(&r.opt, cJSON_GetArrayItem(lrs, s)->valuedouble));
        }
        double worst = 0, worst_m = 0;
        for (int i = 0; i < NP; i++) {
            const cJSON *pp = cJSON_GetObjectItem(params, NAMES[i]);
            size_t k;
            float *w0 = floats(cJSON_GetObjectItem(pp, "w0"), &k), *want = floats(cJSON_GetObjectItem(pp, "w"), &k),
                  *wm = floats(cJSON_GetObjectItem(pp, "m"), &k), *got = malloc(sizeof(float) * k);
            double moved = max_diff(w0, want, k);
            pull(got, r.w[i], k);
            double e = max_diff(got, want, k) / moved;
            pull(got, r.opt.m[i], k);
            double em = max_diff(got, wm, k);
            /* f32: rounding apart (products summed in another order); bf16 iterations: a bf16 rounding step apart */
            double tol = cfg.muon.bf16 ? 2e-3 : 1e-4;
            CHECK_MSG(e < tol && em < 1e-6, "muon case %d %s: max |w - Megatron's| %.3g of the update's %.3g, momentum "
                      "%.3g", n, NAMES[i], e * moved, moved, em);
            worst = fmax(worst, e);
            worst_m = fmax(worst_m, em);
            free(w0);
            free(want);
            free(wm);
            free(got);
        }
        printf("muon case %d (%s, %s, %s): weights within %.3g of the update, momenta within %.3g of Megatron-core's\n",
               n, cfg.muon.bf16 ? "bf16" : "f32", cfg.muon.split_qkv ? "split qkv" : "fused qkv",
               cfg.muon.nesterov ? "nesterov" : "ema", worst, worst_m);
        /* Muon's params have no second moment; the norm (AdamW's) has */
        CHECK(r.opt.v[0] == NULL && r.opt.v[NP - 1] != NULL);
        free_run(&r);
        n++;
    }
    CHECK_MSG(n == 4, "%d Muon cases", n);
}

/* optim.bin bytes round trip: a resumed optimiser steps to the same bits */
static void test_state(void) {
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(fixture, "opt_cases"), 1);
    const cJSON *params = cJSON_GetObjectItem(c, "params");
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    config_from(cJSON_GetObjectItem(c, "config"), &cfg.muon);
    run a, b;
    setup(&a, params, &cfg, cfg.muon.split_qkv);
    setup(&b, params, &cfg, cfg.muon.split_qkv);
    set_grads(&a, params, 0);
    CHECK_OK(vc_adamw_step(&a.opt, 0.02));
    size_t len = vc_adamw_state_size(&a.opt);
    unsigned char *buf = malloc(len);
    CHECK_OK(vc_adamw_state_save(&a.opt, buf, len));
    CHECK_OK(vc_adamw_state_load(&b.opt, buf, len));
    for (int i = 0; i < NP; i++) vc_be()->d2d(b.w[i], a.w[i], a.p[i].n * sizeof(float));
    set_grads(&a, params, 1);
    set_grads(&b, params, 1);
    CHECK_OK(vc_adamw_step(&a.opt, 0.01));
    CHECK_OK(vc_adamw_step(&b.opt, 0.01));
    int same = 1;
    for (int i = 0; i < NP; i++) {
        float *x = malloc(a.p[i].n * sizeof(float)), *y = malloc(a.p[i].n * sizeof(float));
        pull(x, a.w[i], a.p[i].n);
        pull(y, b.w[i], a.p[i].n);
        same &= !memcmp(x, y, a.p[i].n * sizeof(float));
        free(x);
        free(y);
    }
    CHECK_MSG(same && b.opt.step == 2, "a resumed Muon optimiser steps to other weights");
    free(buf);
    free_run(&a);
    free_run(&b);
}

static void test_bad(void) {
    int k;
    CHECK(vc_muon_coeff_parse("optim.muon_coefficient_type", "custom", &k) == VC_ERR_UNSUPPORTED &&
          strstr(vc_last_error(), "muon_coefficient_type=custom"));
    CHECK(vc_muon_scale_parse("optim.muon_scale_mode", "rms", &k) == VC_ERR_UNSUPPORTED);
    CHECK(vc_muon_prec_parse("optim.muon_fp32_matmul_prec", "low", &k) == VC_ERR_UNSUPPORTED);
    CHECK(fabs(vc_muon_scale_factor(VC_MUON_SPECTRAL, 4, 9) - 3.0) < 1e-12 &&
          fabs(vc_muon_scale_factor(VC_MUON_SHAPE_SCALING, 4, 9) - 1.0) < 1e-12 &&
          fabs(vc_muon_scale_factor(VC_MUON_SHAPE_SCALING, 9, 4) - 1.5) < 1e-12 &&
          fabs(vc_muon_scale_factor(VC_MUON_UNIT_RMS_NORM, 4, 9) - 2.0 / 3.0) < 1e-12);
    float *w = dev(NULL, 24), *g = dev(NULL, 24), *w2 = dev(NULL, 12), *g2 = dev(NULL, 12);
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    vc_muon_config_default(&cfg.muon);
    cfg.muon.on = 1;
    vc_optim_param p[2] = { { w, g, 24, 1, 1, 4, 6, 5 }, { w2, g2, 12, 1, 1, 2, 6, 0 } };
    vc_adamw o;
    p[0].rows = 5; /* 5 x 6 != 24 values */
    CHECK(vc_adamw_init(&o, &cfg, p, 2) == VC_ERR_SHAPE && strstr(vc_last_error(), "parameter 0"));
    p[0].rows = 4;
    p[1] = (vc_optim_param){ w2, g2, 12, 1, 1, 3, 4, 5 }; /* fused with a module of 6 columns */
    CHECK(vc_adamw_init(&o, &cfg, p, 2) == VC_ERR_SHAPE && strstr(vc_last_error(), "fused"));
    p[1].fuse = 0;
    cfg.muon.momentum = 1.0;
    CHECK(vc_adamw_init(&o, &cfg, p, 2) == VC_ERR_ARG && strstr(vc_last_error(), "momentum"));
    cfg.muon.momentum = 0.95;
    CHECK_OK(vc_adamw_init(&o, &cfg, p, 2));
    vc_adamw_free(&o);
    vc_be()->free(w);
    vc_be()->free(g);
    vc_be()->free(w2);
    vc_be()->free(g2);
}

int main(void) {
    const char *path = "tests/fixtures/megatron/muon.json";
    CHECK_OK(vc_json_load_file(path, &fixture));
    if (!fixture) return vc_test_done();
    const vc_backend *bes[2] = { vc_backend_cpu(), vc_backend_sim() };
    for (int b = 0; b < 2; b++) {
        vc_set_backend(bes[b]);
        test_newton_schulz();
        test_megatron_steps();
        /* in a bf16 run (the matmul precision bf16) the iteration keeps its own setting's precision */
        vc_set_matmul_precision(VC_PREC_BF16);
        test_megatron_steps();
        vc_set_matmul_precision(VC_PREC_F32);
        test_state();
        test_bad();
    }
    vc_set_backend(NULL);
    cJSON_Delete(fixture);
    return vc_test_done();
}
