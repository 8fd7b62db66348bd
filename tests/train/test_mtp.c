/* Trained multi-token-prediction layers (vc_model_load_mtp, vc_trainer_config.mtp_scale): the MTP loss and every
 * gradient against PyTorch for MiMo's, Qwen3.5-MoE's, DeepSeek-V3's, GLM-4.5's and MiMo-V2-Flash's layouts, and
 * MiMo's with two MTP layers, depth 2 reading depth 1 (tests/fixtures/models/{mimo,qwen3_5_moe_mtp,deepseek_v3_mtp,
 * glm4_moe_mtp,mimo_mtp2,mimo_v2_flash_mtp}/mtp_reference.*, tools/fixtures/make_mtp_reference.py), over one micro-batch and two; detach_encoder; a step's MTP
 * weights in the export under the checkpoint's names; refusals. */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/safetensors.h"
#include "verlc/train.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIMO "tests/fixtures/models/mimo"

typedef struct {
    const char *dir, *prefix; /* the fixture, its MTP tensors' prefix */
    vc_checkpoint *ck;
    vc_minibatch b;
    int64_t cu[3];
    int32_t ids[64];
    float mask[64], main_loss, mtp_loss[VC_MTP_MAX];
    int n_mtp; /* the MTP layers the reference trains */
} golden;

static float read1(vc_checkpoint *ck, const char *name) {
    float v = NAN;
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    if (t) vc_st_tensor_to_f32(t, &v);
    return v;
}

static int golden_open(golden *r, const char *dir, const char *prefix) {
    memset(r, 0, sizeof *r);
    r->dir = dir, r->prefix = prefix;
    vc_checkpoint *ref = NULL;
    char p[256];
    snprintf(p, sizeof p, "%s/mtp_reference.safetensors", dir);
    CHECK_OK(vc_ckpt_open(p, &ref));
    if (!ref) return 0;
    r->ck = ref;
    const vc_st_tensor *ids = vc_ckpt_find(ref, "ids"), *cu = vc_ckpt_find(ref, "cu_seqlens"), *mk = vc_ckpt_find(ref, "mask");
    int64_t T = ids ? vc_st_tensor_numel(ids) : 0;
    CHECK(ids && cu && mk && T <= 64 && vc_st_tensor_numel(cu) == 3);
    if (!ids || !cu || !mk || T > 64) return 0;
    const int64_t *iv = (const int64_t *)ids->data, *cv = (const int64_t *)cu->data;
    for (int64_t i = 0; i < T; i++) r->ids[i] = (int32_t)iv[i];
    for (int i = 0; i < 3; i++) r->cu[i] = cv[i];
    vc_st_tensor_to_f32(mk, r->mask);
    r->main_loss = read1(ref, "main_loss");
    const vc_st_tensor *ml = vc_ckpt_find(ref, "mtp_loss");
    r->n_mtp = ml ? (int)vc_st_tensor_numel(ml) : 0;
    CHECK(r->n_mtp >= 1 && r->n_mtp <= VC_MTP_MAX);
    if (r->n_mtp < 1 || r->n_mtp > VC_MTP_MAX) return 0;
    vc_st_tensor_to_f32(ml, r->mtp_loss);
    r->b = (vc_minibatch){ 2, r->cu, r->ids, r->mask };
    return 1;
}

static vc_status trainer(vc_trainer *t, vc_model *m, double scale, int detach, int micro_bs, double lr) {
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = micro_bs;
    tc.agg = VC_AGG_TOKEN_MEAN;
    tc.mtp_train = 1;
    tc.mtp_scale = scale;
    tc.mtp_detach = detach;
    tc.sched.base_lr = tc.adamw.lr = lr;
    return vc_trainer_init(t, m, &tc);
}

/* the largest error of m's gradient of every reference gradient (scaled by that gradient's largest value, or 1e-3 of
 * the model's largest where smaller); only: names with this prefix (NULL: all) */
static double grad_err(const vc_model *m, vc_checkpoint *ref, const char *only, const char **worst) {
    double e = 0, floor = 0;
    for (int i = 0; i < vc_ckpt_count(ref); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ref, i);
        if (strncmp(t->name, "grad.", 5)) continue;
        int64_t n = vc_st_tensor_numel(t);
        float *r = malloc(sizeof(float) * (size_t)n);
        vc_st_tensor_to_f32(t, r);
        for (int64_t j = 0; j < n; j++) floor = fmax(floor, 1e-3 * fabs(r[j]));
        free(r);
    }
    for (int i = 0; i < vc_ckpt_count(ref); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ref, i);
        if (strncmp(t->name, "grad.", 5) || (only && strncmp(t->name + 5, only, strlen(only)))) continue;
        int64_t n = vc_st_tensor_numel(t), nm = 0;
        float *r = malloc(sizeof(float) * (size_t)n), *mine = NULL;
        vc_st_tensor_to_f32(t, r);
        if (vc_model_hf_grad(m, t->name + 5, &mine, &nm) || nm != n) {
            CHECK_MSG(0, "no gradient of %s (%s)", t->name + 5, vc_last_error());
            free(r);
            free(mine);
            continue;
        }
        double big = floor, d = 0;
        for (int64_t j = 0; j < n; j++) big = fmax(big, fabs(r[j])), d = fmax(d, fabs(mine[j] - r[j]));
        if (d / big > e) e = d / big, *worst = t->name + 5;
        free(r);
        free(mine);
    }
    return e;
}

static void against_torch(golden *r) {
    for (int micro = 1; micro <= 2; micro++) {
        vc_model *m = NULL;
        CHECK_OK(vc_model_load_mtp(r->dir, &m));
        if (!m) return;
        CHECK(vc_model_cfg(m)->n_mtp == r->n_mtp);
        vc_trainer t;
        CHECK_OK(trainer(&t, m, 0.1, 0, micro, 0));
        vc_step_stats st;
        vc_model_zero_grad(m);
        CHECK_OK(vc_trainer_accumulate(&t, &r->b, NULL, NULL, &st));
        CHECK(st.n_mtp == r->n_mtp && st.n_micro == 3 - micro);
        CHECK_NEAR(st.loss, r->main_loss, 2e-5);
        for (int k = 0; k < r->n_mtp; k++) CHECK_NEAR(st.mtp_loss[k], r->mtp_loss[k], 2e-5);
        const char *w = "";
        double e = grad_err(m, r->ck, NULL, &w);
        CHECK_MSG(e < 2e-4, "gradient error %.3g at %s", e, w);
        printf("%s MTP vs torch, %d micro-batch%s: loss %.7f (%.7f), mtp loss %.7f (%.7f)%s, gradients within %.2g (%s)\n",
               r->dir, 3 - micro, micro == 1 ? "es" : "", st.loss, r->main_loss, st.mtp_loss[r->n_mtp - 1],
               r->mtp_loss[r->n_mtp - 1], r->n_mtp > 1 ? " at the last depth" : "", e, w);
        vc_trainer_free(&t);
        vc_model_free(m);
    }
}

/* bf16 matmuls (verl's autocast training): the losses and gradients within bf16's error of PyTorch's f32 ones (2e-2
 * and a tenth of each tensor's largest: measured 2.5e-3..8.7e-3 and 1.8e-2..5e-2), but Qwen3.5-MoE's, where PyTorch's
 * own bf16 autocast moves its gradients off its f32 ones by as much (near-ties of the MTP layer's 4 experts: its router's
 * by 0.280, an expert's down_proj's by 0.191, the layer's post-attention norm's by 0.154; verlc's bf16: 0.28, 0.19,
 * 0.16), within 0.35 */
static void against_torch_bf16(golden *r) {
    vc_set_matmul_precision(VC_PREC_BF16);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load_mtp(r->dir, &m));
    vc_trainer t;
    if (m && !trainer(&t, m, 0.1, 0, 1, 0)) {
        vc_step_stats st;
        vc_model_zero_grad(m);
        CHECK_OK(vc_trainer_accumulate(&t, &r->b, NULL, NULL, &st));
        double le = fabs(st.loss - r->main_loss);
        for (int k = 0; k < r->n_mtp; k++) le = fmax(le, fabs(st.mtp_loss[k] - r->mtp_loss[k]));
        const char *w = "";
        double e = grad_err(m, r->ck, NULL, &w), tol = strstr(r->dir, "qwen3_5_moe") ? 0.35 : 0.1;
        CHECK_MSG(le < 2e-2 && e < tol, "%s in bf16: losses %.3g, gradients %.3g (%s) off PyTorch's f32", r->dir, le, e, w);
        printf("%s MTP in bf16 vs torch f32: losses within %.2g, gradients within %.2g (%s)\n", r->dir, le, e, w);
        vc_trainer_free(&t);
    }
    vc_model_free(m);
    vc_set_matmul_precision(VC_PREC_F32);
}

/* every gradient of the model, flat */
static float *all_grads(vc_model *m, size_t *n) {
    size_t tot = 0;
    for (int i = 0; i < vc_model_n_params(m); i++) tot += (size_t)vc_model_param(m, i, NULL, NULL)->n;
    float *g = malloc(sizeof(float) * (tot + 1));
    for (int i = 0, k = 0; i < vc_model_n_params(m); i++) {
        vc_model_param_read(m, i, 1, g + k);
        k += (int)vc_model_param(m, i, NULL, NULL)->n;
    }
    *n = tot;
    return g;
}

/* detach_encoder: the MTP layer's gradients as without it, every other one the main loss's alone (scale 0's) */
static void detached(golden *r) {
    float *g[3] = { NULL, NULL, NULL };
    size_t n = 0;
    double scale[3] = { 0.1, 0.1, 0.0 };
    int det[3] = { 1, 0, 0 };
    vc_model *m = NULL;
    CHECK_OK(vc_model_load_mtp(r->dir, &m));
    if (!m) return;
    for (int k = 0; k < 3; k++) {
        vc_trainer t;
        CHECK_OK(trainer(&t, m, scale[k], det[k], 1, 0));
        vc_step_stats st;
        vc_model_zero_grad(m);
        CHECK_OK(vc_trainer_accumulate(&t, &r->b, NULL, NULL, &st));
        for (int j = 0; j < r->n_mtp; j++) CHECK_NEAR(st.mtp_loss[j], r->mtp_loss[j], 2e-5);
        g[k] = all_grads(m, &n);
        if (k == 0) {
            const char *w = "";
            /* (with several depths only the last one's are as without: detached, the others lose the later depths') */
            char pre[96];
            if (r->n_mtp > 1) snprintf(pre, sizeof pre, "%s%d.", r->prefix, r->n_mtp - 1);
            else snprintf(pre, sizeof pre, "%s", r->prefix);
            double e = grad_err(m, r->ck, pre, &w);
            CHECK_MSG(e < 2e-4, "detached: MTP gradient error %.3g at %s", e, w);
        }
        vc_trainer_free(&t);
    }
    /* outside the MTP layer: detached == scale 0 bit for bit, and the undetached differ (the test can fail) */
    int same = 1, differ = 0, mtp_zero = 1;
    for (int i = 0, k = 0; i < vc_model_n_params(m); i++) {
        const char *name = NULL;
        vc_tensor *p = vc_model_param(m, i, &name, NULL);
        int64_t pn = p->n;
        int mtp = vc_model_param_layer(m, i) > vc_model_cfg(m)->n_layer;
        if (!p->grad) { /* (a buffer: DeepSeek's routing correction bias) */
            k += (int)pn;
            continue;
        }
        for (int64_t j = 0; j < pn; j++, k++) {
            if (mtp) mtp_zero &= g[2][k] == 0.0f;
            else {
                same &= g[0][k] == g[2][k], differ |= g[1][k] != g[2][k];
            }
        }
    }
    CHECK_MSG(same, "detach_encoder: the model's gradients are the main loss's alone");
    CHECK_MSG(differ, "without detach_encoder the MTP loss reaches the model");
    CHECK_MSG(mtp_zero, "scale 0: no gradient into the MTP layer");
    for (int k = 0; k < 3; k++) free(g[k]);
    vc_model_free(m);
}

/* a step moves the MTP weights; the export writes them under MiMo's names, where a plain load finds them again */
static void exported(golden *r) {
    vc_model *m = NULL;
    CHECK_OK(vc_model_load_mtp(r->dir, &m));
    if (!m) return;
    vc_trainer t;
    CHECK_OK(trainer(&t, m, 0.1, 0, 2, 1e-2));
    vc_step_stats st;
    CHECK_OK(vc_trainer_step(&t, &r->b, NULL, NULL, &st));
    char dir[] = "/tmp/vc_mtp_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_OK(vc_model_save_hf(m, dir, VC_F32));
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(r->dir, &a));
    CHECK_OK(vc_ckpt_open(dir, &b));
    int mtp = 0, moved = 0, same_count = a && b && vc_ckpt_count(a) == vc_ckpt_count(b);
    for (int i = 0; a && b && i < vc_ckpt_count(a); i++) {
        const vc_st_tensor *x = vc_ckpt_at(a, i), *y = vc_ckpt_find(b, x->name);
        if (strncmp(x->name, r->prefix, strlen(r->prefix))) continue;
        mtp++;
        if (!y || vc_st_tensor_numel(x) != vc_st_tensor_numel(y)) {
            printf("  %s: not in the export\n", x->name);
            continue;
        }
        float *u = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(x)), *v = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(y));
        vc_st_tensor_to_f32(x, u);
        vc_st_tensor_to_f32(y, v);
        int mv = memcmp(u, v, sizeof(float) * (size_t)vc_st_tensor_numel(x)) != 0;
        moved += mv || strstr(x->name, "e_score_correction_bias"); /* (a buffer, not trained) */
        free(u);
        free(v);
    }
    CHECK_MSG(same_count && mtp >= 10 && moved == mtp, "export: %d of %d MTP tensors trained and written", moved, mtp);
    /* DeepSeek's copies of the embedding and the LM head: written from the model's own, trained, tensors */
    static const char *const COPY[][2] = { { "embed_tokens.weight", "model.embed_tokens.weight" },
                                           { "shared_head.head.weight", "lm_head.weight" } };
    for (int i = 0; b && i < 2; i++) {
        char cn[128];
        snprintf(cn, sizeof cn, "%s%s", r->prefix, COPY[i][0]);
        const vc_st_tensor *c = vc_ckpt_find(b, cn), *o = vc_ckpt_find(b, COPY[i][1]);
        if (c) CHECK_MSG(o && c->nbytes == o->nbytes && !memcmp(c->data, o->data, c->nbytes), "%s: not the model's", cn);
    }
    vc_ckpt_close(a);
    vc_ckpt_close(b);
    /* loaded again with its MTP layer trained: the same weights */
    vc_model *m2 = NULL;
    CHECK_OK(vc_model_load_mtp(dir, &m2));
    int eq = m2 && vc_model_n_params(m2) == vc_model_n_params(m);
    for (int i = 0; eq && i < vc_model_n_params(m); i++) {
        int64_t pn = vc_model_param(m, i, NULL, NULL)->n;
        float *u = malloc(sizeof(float) * (size_t)pn), *v = malloc(sizeof(float) * (size_t)pn);
        vc_model_param_read(m, i, 0, u);
        vc_model_param_read(m2, i, 0, v);
        eq = memcmp(u, v, sizeof(float) * (size_t)pn) == 0;
        free(u);
        free(v);
    }
    CHECK_MSG(eq, "the export loads back with the trained MTP weights");
    vc_model_free(m2);
    vc_trainer_free(&t);
    vc_model_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void refusals(golden *r) {
    char path[512];
    snprintf(path, sizeof path, "%s/fixtures/models/qwen2", vc_test_shared());
    vc_model *m = NULL;
    CHECK(vc_model_load_mtp(path, &m) == VC_ERR_ARG && strstr(vc_last_error(), "declares no multi-token"));
    /* a config declaring two MTP layers where the checkpoint has one: the missing tensor named as the checkpoint would */
    char dir[] = "/tmp/vc_mtp2_XXXXXX", cmd[512];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "sed 's/\"num_nextn_predict_layers\": 1/\"num_nextn_predict_layers\": 2/' %s/config.json > "
             "%s/config.json && cp %s/model.safetensors %s/", MIMO, dir, MIMO, dir);
    CHECK(system(cmd) == 0);
    CHECK(vc_model_load_mtp(dir, &m) == VC_ERR_MISSING &&
          strstr(vc_last_error(), "'model.mtp_layers.1.input_layernorm.weight' is missing"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    CHECK_OK(vc_model_load_mtp(MIMO, &m));
    if (!m) return;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.share_prefix = tc.mtp_train = 1;
    vc_trainer t;
    CHECK(vc_trainer_init(&t, m, &tc) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "use_prefix_grouper"));
    /* without mtp_train the MTP rows are frozen: a step leaves them as they were */
    vc_trainer_config_default(&tc);
    tc.sched.base_lr = tc.adamw.lr = 1e-2;
    tc.adamw.weight_decay = 0.1;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    int last = vc_model_n_params(m) - 1;
    int64_t pn = vc_model_param(m, last, NULL, NULL)->n;
    float *u = malloc(sizeof(float) * (size_t)pn), *v = malloc(sizeof(float) * (size_t)pn);
    vc_model_param_read(m, last, 0, u);
    vc_step_stats st;
    CHECK_OK(vc_trainer_step(&t, &r->b, NULL, NULL, &st));
    vc_model_param_read(m, last, 0, v);
    CHECK(vc_model_param_layer(m, last) > vc_model_cfg(m)->n_layer && st.n_mtp == 0 &&
          !memcmp(u, v, sizeof(float) * (size_t)pn) && !vc_model_param(m, last, NULL, NULL)->requires_grad);
    free(u);
    free(v);
    vc_trainer_free(&t);
    vc_model_free(m);
    /* MTP training or hidden states asked of a model loaded without them */
    CHECK_OK(vc_model_load(MIMO, &m));
    tc.mtp_train = 1;
    CHECK(vc_trainer_init(&t, m, &tc) == VC_ERR_ARG && strstr(vc_last_error(), "loaded without MTP layers"));
    vc_graph *g = vc_graph_new();
    vc_tensor *out[1] = { NULL };
    vc_batch b = { 1, r->cu, r->ids, NULL };
    b.mtp_out = out;
    CHECK(!vc_model_forward(m, g, &b, NULL) && strstr(vc_last_error(), "without trained MTP layers"));
    vc_graph_free(g);
    vc_model_free(m);
}

static void run_all(int with_refusals) {
    static const char *const FIX[][2] = { { MIMO, "model.mtp_layers." }, { "tests/fixtures/models/qwen3_5_moe_mtp", "mtp." },
                                          { "tests/fixtures/models/deepseek_v3_mtp", "model.layers.2." },
                                          { "tests/fixtures/models/glm4_moe_mtp", "model.layers.2." },
                                          { "tests/fixtures/models/mimo_mtp2", "model.mtp_layers." },
                                          { "tests/fixtures/models/mimo_v2_flash_mtp", "model.mtp." } };
    for (int i = 0; i < 6; i++) {
        golden r;
        CHECK(golden_open(&r, FIX[i][0], FIX[i][1]));
        if (!r.ck) continue;
        against_torch(&r);
        against_torch_bf16(&r);
        detached(&r);
        exported(&r);
        if (i == 0 && with_refusals) refusals(&r);
        vc_ckpt_close(r.ck);
    }
}

int main(void) {
    /* the CPU, then the sim device (the CPU kernels behind poisoned pointers) or VC_MTP_DEVICE (cuda: the emulator's) */
    const char *dev = getenv("VC_MTP_DEVICE"), *devs[2] = { "cpu", dev && *dev ? dev : "sim" };
    for (int d = 0; d < 2; d++) {
        CHECK_OK(vc_device_select(devs[d], "test"));
        printf("device %s\n", devs[d]);
        run_all(d == 0);
    }
    CHECK_OK(vc_device_select("cpu", "test"));
    return vc_test_done();
}
