/* Quantization-aware training (vc_model_qat; verl's fsdp_config.qat, w4a16): the NVFP4 fake quantization against
 * hand-worked values and against verl's own Triton kernel, verl's module choice and fusion siblings, the loss and
 * every gradient of a training step against verl's QATLinear modules in PyTorch (tests/fixtures/qat/<model>/
 * qat_reference.*, tools/fixtures/make_qat_reference.py: Llama, Qwen2 with tied embeddings and q/k/v biases, Phi-3's
 * fused qkv_proj and gate_up_proj, Qwen3-MoE's experts, Qwen2-MoE's shared expert and its gate), the full-precision
 * weights back bitwise after, ignore patterns, refusals. */
#include "model/qat.h"
#include "verlc/device.h"
#include "verlc/model.h"
#include "verlc/safetensors.h"
#include "verlc/train.h"
#include "tensor/backend.h"
#include "vc_test.h"
#include <unistd.h>

static const char *const DEFAULT_IGNORE[] = { "lm_head", "embed_tokens", "re:.*mlp.gate$" };
static const vc_qat_spec SPEC = { 16, DEFAULT_IGNORE, 3 };

static void e4m3_values(void) {
    CHECK(vc_qat_e4m3(448) == 448);
    CHECK(vc_qat_e4m3(0x1p-9f) == 0x1p-9f);        /* the smallest subnormal */
    CHECK(vc_qat_e4m3(0x1p-10f) == 0);              /* half of it: a tie, to the even 0 */
    CHECK(vc_qat_e4m3(3 * 0x1p-10f) == 0x1p-8f);     /* 1.5 steps: to 2 */
    CHECK(vc_qat_e4m3(1.0625f) == 1.0f);            /* between 1 and 1.125: to the even mantissa */
    CHECK(vc_qat_e4m3(1.1875f) == 1.25f);           /* between 1.125 and 1.25: to 1.25 */
    CHECK(vc_qat_e4m3(300) == 288);                 /* steps of 32 in [256, 448] */
    CHECK(vc_qat_e4m3(0.01f) == 0.009765625f);      /* 0.01 in steps of 2^-10 */
}

/* one group of 16 with amax 6 x 448 = 2688 (gs 1) and block max 6: scale 1, values at FP4's ties */
static void fp4_ties(void) {
    float x[16] = { 6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.26f, -0.74f, 1.3f, 2.6f, 4.9f, 5.1f, 0, -6 };
    float want[16] = { 6, 0, 1, 1, 2, 2, 4, 4, -0.5f, -0.5f, 1.5f, 3, 4, 6, 0, -6 };
    float y[16];
    vc_qat_fake_quant(x, y, 1, 16, 16, 2688, 0);
    int same = 1;
    for (int i = 0; i < 16; i++) same &= y[i] == want[i];
    CHECK(same);
    float z[16] = { 0 }, zy[16];
    z[3] = 1e-7f; /* a block max whose scale rounds under 1e-5: scale 1, everything to 0 */
    vc_qat_fake_quant(z, zy, 1, 16, 16, 1, 0);
    CHECK(zy[3] == 0);
}

static float *read_f32(vc_checkpoint *ck, const char *name, int64_t *n) {
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    if (!t) return NULL;
    *n = vc_st_tensor_numel(t);
    float *v = malloc(sizeof(float) * (size_t)*n);
    vc_st_tensor_to_f32(t, v);
    return v;
}

/* the model's weights while quantized, exported, against verl's fq.* (f32) or fq16.* (bf16) */
static void quantized_weights(vc_model *m, vc_checkpoint *ref, int bf16, int *n_modules) {
    char dir[] = "/tmp/vc_qat_XXXXXX", path[300];
    CHECK(mkdtemp(dir) != NULL);
    vc_set_matmul_precision(bf16 ? VC_PREC_BF16 : VC_PREC_F32);
    vc_model_weight_copies(m, 1);
    CHECK_OK(vc_model_save_hf(m, dir, VC_F32));
    vc_model_weight_copies(m, 0);
    vc_set_matmul_precision(VC_PREC_F32);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    vc_checkpoint *out = NULL;
    CHECK_OK(vc_ckpt_open(path, &out));
    const char *pre = bf16 ? "fq16." : "fq.";
    int n = 0, bad = 0;
    for (int i = 0; out && i < vc_ckpt_count(ref); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ref, i);
        if (strncmp(t->name, pre, strlen(pre))) continue;
        int64_t nr = 0, nm = 0;
        float *r = read_f32(ref, t->name, &nr), *mine = read_f32(out, t->name + strlen(pre), &nm);
        int same = mine && nm == nr;
        for (int64_t k = 0; same && k < nr; k++) same = r[k] == mine[k];
        if (!same) bad++, fprintf(stderr, "%s differs\n", t->name);
        n++;
        free(r);
        free(mine);
    }
    CHECK_MSG(n > 0 && !bad, "%d of %d quantized weights differ", bad, n);
    *n_modules = n;
    vc_ckpt_close(out);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    CHECK(system(path) == 0);
}

static double grad_err(const vc_model *m, vc_checkpoint *ref, const char **worst, int *count) {
    double e = 0;
    *count = 0;
    for (int i = 0; i < vc_ckpt_count(ref); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ref, i);
        if (strncmp(t->name, "grad.", 5)) continue;
        int64_t n = 0, nm = 0;
        float *r = read_f32(ref, t->name, &n), *mine = NULL;
        if (vc_model_hf_grad(m, t->name + 5, &mine, &nm) || nm != n) {
            CHECK_MSG(0, "no gradient of %s (%s)", t->name + 5, vc_last_error());
            free(r);
            free(mine);
            continue;
        }
        double big = 1e-6, d = 0;
        for (int64_t j = 0; j < n; j++) big = fmax(big, fabs(r[j])), d = fmax(d, fabs(mine[j] - r[j]));
        if (d / big > e) e = d / big, *worst = t->name + 5;
        (*count)++;
        free(r);
        free(mine);
    }
    return e;
}

static uint64_t weights_hash(vc_model *m) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < vc_model_n_params(m); i++) {
        vc_tensor *t = vc_model_param(m, i, NULL, NULL);
        float *v = malloc(sizeof(float) * (size_t)t->n);
        vc_model_param_read(m, i, 0, v);
        const unsigned char *b = (const unsigned char *)v;
        for (size_t k = 0; k < sizeof(float) * (size_t)t->n; k++) h = (h ^ b[k]) * 1099511628211ull;
        free(v);
    }
    return h;
}

static void against_verl(const char *name, int want_modules) {
    char dir[256], ref_path[256];
    snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), name);
    snprintf(ref_path, sizeof ref_path, "tests/fixtures/qat/%s/qat_reference.safetensors", name);
    vc_checkpoint *ref = NULL;
    vc_model *m = NULL;
    CHECK_OK(vc_ckpt_open(ref_path, &ref));
    CHECK_OK(vc_model_load(dir, &m));
    if (!ref || !m) goto out;
    CHECK_OK(vc_model_qat(m, &SPEC));
    int n32 = 0, n16 = 0;
    quantized_weights(m, ref, 0, &n32);
    quantized_weights(m, ref, 1, &n16);
    CHECK(n32 == n16);
    CHECK_MSG(vc_model_qat_modules(m) == want_modules, "%s: %d modules quantized, verl %d", name,
              vc_model_qat_modules(m), want_modules);
    uint64_t before = weights_hash(m);
    int64_t T = 0, nc = 0;
    float *idf = NULL, *mask = read_f32(ref, "mask", &T), *loss = read_f32(ref, "loss", &nc);
    const vc_st_tensor *ids = vc_ckpt_find(ref, "ids"), *cu = vc_ckpt_find(ref, "cu_seqlens");
    CHECK(ids && cu && mask && loss && vc_st_tensor_numel(cu) == 3);
    if (!ids || !cu || !mask || !loss) goto out_b;
    int32_t tok[64];
    int64_t cuv[3];
    for (int64_t i = 0; i < T && i < 64; i++) tok[i] = (int32_t)((const int64_t *)ids->data)[i];
    for (int i = 0; i < 3; i++) cuv[i] = ((const int64_t *)cu->data)[i];
    vc_minibatch b = { 2, cuv, tok, mask };
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = 1;
    tc.agg = VC_AGG_TOKEN_MEAN;
    vc_trainer t;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_step_stats st;
    vc_model_zero_grad(m);
    CHECK_OK(vc_trainer_accumulate(&t, &b, NULL, NULL, &st));
    CHECK_NEAR(st.loss, loss[0], 2e-5);
    const char *worst = "";
    int ng = 0;
    double e = grad_err(m, ref, &worst, &ng);
    CHECK_MSG(e < 1e-4, "%s: gradient error %.3g at %s", name, e, worst);
    CHECK(weights_hash(m) == before); /* the full-precision weights back, bitwise */
    printf("%s QAT vs verl: %d modules quantized (as verl's apply_qat), the quantized weights bitwise equal to its "
           "Triton kernel's in f32 and bf16 (%d tensors), loss %.7f (%.7f), %d gradients within %.2g (%s)\n",
           name, vc_model_qat_modules(m), n32, st.loss, loss[0], ng, e, worst);
    vc_trainer_free(&t);
out_b:
    free(idf);
    free(mask);
    free(loss);
out:
    vc_ckpt_close(ref);
    vc_model_free(m);
}

/* ignore patterns: substrings and re.match (anchored at the start); refusals */
static void patterns_and_refusals(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/fixtures/models/llama", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    static const char *const FFN[] = { "lm_head", "embed_tokens", "re:.*self_attn.*" };
    vc_qat_spec s = { 16, FFN, 3 };
    CHECK_OK(vc_model_qat(m, &s));
    CHECK(vc_model_qat_modules(m) == 6); /* gate, up, down of 2 layers */
    static const char *const ANCHORED[] = { "lm_head", "re:self_attn" }; /* re.match: not at the start, no match */
    s = (vc_qat_spec){ 16, ANCHORED, 2 };
    CHECK_OK(vc_model_qat(m, &s));
    CHECK(vc_model_qat_modules(m) == 14);
    s = (vc_qat_spec){ 16, NULL, 0 }; /* nothing ignored: the untied LM head too */
    CHECK_OK(vc_model_qat(m, &s));
    CHECK(vc_model_qat_modules(m) == 15);
    s = (vc_qat_spec){ 48, DEFAULT_IGNORE, 3 }; /* widths 64 and 128: no module's input is a multiple of 48 */
    CHECK_OK(vc_model_qat(m, &s));
    CHECK(vc_model_qat_modules(m) == 0);
    static const char *const BAD[] = { "re:(unclosed" };
    s = (vc_qat_spec){ 16, BAD, 1 };
    CHECK(vc_model_qat(m, &s) == VC_ERR_ARG && strstr(vc_last_error(), "(unclosed"));
    s = (vc_qat_spec){ 0, DEFAULT_IGNORE, 3 };
    CHECK(vc_model_qat(m, &s) == VC_ERR_ARG && strstr(vc_last_error(), "group_size"));
    CHECK_OK(vc_model_qat(m, NULL));
    CHECK(vc_model_qat_modules(m) == 0);
    CHECK_OK(vc_model_lora_init(m, 4, 8, "all-linear", 1));
    CHECK(vc_model_qat(m, &SPEC) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "LoRA"));
    vc_model_free(m);
    snprintf(dir, sizeof dir, "%s/fixtures/models/qwen2", vc_test_shared()); /* tied: lm_head must stay ignored */
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    s = (vc_qat_spec){ 16, DEFAULT_IGNORE + 1, 2 };
    CHECK(vc_model_qat(m, &s) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "tied"));
    vc_model_free(m);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    e4m3_values();
    fp4_ties();
    against_verl("llama", 14);
    against_verl("qwen2", 14);
    against_verl("phi3", 8);
    against_verl("qwen3_moe", 8 + 2 * 4 * 3);
    against_verl("qwen2_moe", 16 + 2 * 4 * 3);
    patterns_and_refusals();
    /* a backend whose memory the host cannot touch (the sim device): quantized on the host through a staging buffer
     * of the largest module, uploaded run by run */
    setenv("VERLC_QAT_STAGING_FLOATS", "1", 1);
    CHECK_OK(vc_device_select("sim", "test"));
    against_verl("qwen3_moe", 8 + 2 * 4 * 3);
    against_verl("phi3", 8);
    CHECK_OK(vc_device_select("cpu", "test"));
    return vc_test_done();
}
