/* The training core on the cpu and sim devices and under bf16 matmul precision:
 *  - 4 optimiser steps of the fixture Qwen3 on cpu and on sim (poisoned backend pointers: any host
 *    dereference of backend memory crashes) give bitwise the same losses, gradient norms and weights;
 *  - a checkpoint written on sim and loaded on cpu (and the reverse) holds the same weights;
 *  - bf16 on the cpu: the first-step loss is within 2e-3 (relative) of the f32 one, and the loss falls;
 *  - device / precision options: cuda without a GPU fails with the one-line hint, bad dtypes are refused. */
#include "tensor/backend.h"
#include "verlc/cuda.h"
#include "verlc/device.h"
#include "verlc/rng.h"
#include "verlc/train.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSEQ 4
#define STEPS 4
static int64_t CU[NSEQ + 1];
static int32_t IDS[128];
static float MASK[128];

static void make_batch(vc_minibatch *b, int64_t vocab) {
    CU[0] = 0;
    for (int s = 0; s < NSEQ; s++) {
        int64_t L = 6 + vc_rng_below(12, 11, s, 0, 0);
        for (int64_t j = 0; j < L; j++) {
            IDS[CU[s] + j] = (int32_t)vc_rng_below((uint64_t)vocab, 11, s, 2, (uint64_t)j);
            MASK[CU[s] + j] = j >= 2 ? 1.0f : 0.0f;
        }
        CU[s + 1] = CU[s] + L;
    }
    *b = (vc_minibatch){ NSEQ, CU, IDS, MASK };
}

typedef struct run_out {
    double loss[STEPS], gnorm[STEPS];
    float *w;
    size_t n;
} run_out;

static float *all_weights(vc_model *m, size_t *n) {
    size_t tot = 0;
    for (int i = 0; i < vc_model_n_params(m); i++) tot += (size_t)vc_model_param(m, i, NULL, NULL)->n;
    float *w = malloc(tot * sizeof *w), *p = w;
    for (int i = 0; w && i < vc_model_n_params(m); i++) {
        CHECK_OK(vc_model_param_read(m, i, 0, p));
        p += vc_model_param(m, i, NULL, NULL)->n;
    }
    *n = tot;
    return w;
}

/* STEPS steps on `dev` at precision `prec`; the weights after; a checkpoint in ckpt_dir when given */
static void run(const char *dev, const char *prec, const char *ckpt_dir, run_out *o) {
    memset(o, 0, sizeof *o);
    vc_train_device d = { .device = dev, .param_dtype = prec };
    CHECK_OK(vc_train_setup_device(&d, NULL));
    CHECK(!strcmp(vc_device_name(), dev));
    char path[512];
    snprintf(path, sizeof path, "%s/fixtures/models/qwen3", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(path, &m));
    if (!m) return;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.adamw.lr = 1e-2;
    tc.sched.base_lr = 1e-2;
    tc.micro_bs = 2;
    vc_trainer t;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_minibatch b;
    make_batch(&b, vc_model_cfg(m)->vocab);
    for (int s = 0; s < STEPS; s++) {
        vc_step_stats st;
        CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
        o->loss[s] = st.loss;
        o->gnorm[s] = st.grad_norm;
    }
    vc_mem_plan plan;
    CHECK_OK(vc_trainer_plan(&t, 16, 0, NULL, &plan));
    CHECK(plan.weights > 0 && plan.grads > 0 && plan.activations > 0 && plan.host > 0 && !plan.on_gpu);
    o->w = all_weights(m, &o->n);
    if (ckpt_dir) {
        vc_train_state s;
        memset(&s, 0, sizeof s);
        s.seed = 1;
        snprintf(s.model_dir, sizeof s.model_dir, "%s", path);
        CHECK_OK(vc_train_ckpt_write(ckpt_dir, &t, &s));
    }
    vc_trainer_free(&t);
    vc_model_free(m);
}

/* weights of ckpt_dir loaded into a fresh fixture model on `dev` */
static float *load_on(const char *dev, const char *ckpt_dir, size_t *n) {
    CHECK_OK(vc_device_select(dev, "test"));
    char path[512];
    snprintf(path, sizeof path, "%s/fixtures/models/qwen3", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(path, &m));
    if (!m) return NULL;
    CHECK_OK(vc_train_ckpt_load_weights(ckpt_dir, m));
    float *w = all_weights(m, n);
    vc_model_free(m);
    return w;
}

static void check_options(void) {
    int prec = -1;
    CHECK_OK(vc_train_precision_parse("bf16", NULL, &prec));
    CHECK(prec == VC_PREC_BF16);
    CHECK_OK(vc_train_precision_parse("float32", NULL, &prec));
    CHECK(prec == VC_PREC_F32);
    CHECK(vc_train_precision_parse("fp16", "--precision", &prec) == VC_ERR_UNSUPPORTED);
    CHECK(vc_train_precision_parse("int8", "--precision", &prec) == VC_ERR_ARG);
    /* bf16 reductions (verl's Ascend scripts) run in f32, with a warning; an unknown type is refused by name */
    vc_train_device d = { .device = "cpu", .param_dtype = "bf16", .reduce_dtype = "bf16", .reduce_key = "reduce_dtype" };
    CHECK_OK(vc_train_setup_device(&d, NULL));
    CHECK(vc_matmul_precision() == VC_PREC_BF16);
    vc_set_matmul_precision(VC_PREC_F32);
    d.reduce_dtype = "int8";
    CHECK(vc_train_setup_device(&d, NULL) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "reduce_dtype=int8") != NULL);
    d = (vc_train_device){ .device = "tpu", .device_key = "trainer.device" };
    CHECK(vc_train_setup_device(&d, NULL) == VC_ERR_ARG);
    if (vc_cuda_device_count() == 0) {
        d = (vc_train_device){ .device = "cuda", .device_key = "trainer.device" };
        CHECK(vc_train_setup_device(&d, NULL) == VC_ERR_DEVICE);
        const char *e = vc_last_error();
        CHECK_MSG(strstr(e, "--device cpu") && !strchr(e, '\n'), "hint: %s", e);
        d.device = "auto"; /* no GPU: auto is the cpu */
        CHECK_OK(vc_train_setup_device(&d, NULL));
        CHECK(!strcmp(vc_device_name(), "cpu"));
    }
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    char dir[128], ca[160], cb[160], cmd[256];
    snprintf(dir, sizeof dir, "/tmp/verlc_test_device_%d", (int)getpid());
    snprintf(ca, sizeof ca, "%s/cpu", dir);
    snprintf(cb, sizeof cb, "%s/sim", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s", ca, cb);
    CHECK(system(cmd) == 0);
    run_out c, s, h;
    run("cpu", "fp32", ca, &c);
    run("sim", "fp32", cb, &s);
    CHECK(c.n == s.n && c.w && s.w);
    int same = c.n == s.n && !memcmp(c.loss, s.loss, sizeof c.loss) && !memcmp(c.gnorm, s.gnorm, sizeof c.gnorm);
    CHECK_MSG(same, "sim losses/grad norms differ from cpu: %.9g vs %.9g", c.loss[STEPS - 1], s.loss[STEPS - 1]);
    CHECK_MSG(c.w && s.w && c.n == s.n && !memcmp(c.w, s.w, c.n * sizeof *c.w), "sim weights differ from cpu");
    CHECK(c.loss[STEPS - 1] < c.loss[0]);
    /* a sim checkpoint loads on cpu and a cpu one on sim, with the same weights */
    size_t n1 = 0, n2 = 0;
    float *w1 = load_on("cpu", cb, &n1), *w2 = load_on("sim", ca, &n2);
    CHECK(w1 && w2 && n1 == c.n && n2 == c.n && !memcmp(w1, c.w, n1 * 4) && !memcmp(w2, c.w, n2 * 4));
    free(w1);
    free(w2);
    /* bf16 GEMMs on the cpu: close to f32 at the first step, and it trains */
    run("cpu", "bf16", NULL, &h);
    double rel = fabs(h.loss[0] - c.loss[0]) / fabs(c.loss[0]);
    printf("first-step loss f32 %.6f bf16 %.6f (rel %.2e); bf16 loss %.4f -> %.4f\n", c.loss[0], h.loss[0], rel,
           h.loss[0], h.loss[STEPS - 1]);
    CHECK_MSG(rel < 2e-3, "bf16 first-step loss %.6f vs f32 %.6f", h.loss[0], c.loss[0]);
    CHECK(h.loss[0] != c.loss[0]); /* bf16 really rounds the GEMM inputs */
    CHECK(h.loss[STEPS - 1] < h.loss[0]);
    vc_set_matmul_precision(VC_PREC_F32);
    check_options();
    CHECK_OK(vc_device_select("cpu", "test"));
    free(c.w);
    free(s.w);
    free(h.w);
    if (!vc_t_fail) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
    }
    return vc_test_done();
}
