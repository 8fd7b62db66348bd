/* compressed-tensors checkpoints (tests/fixtures/quant_ct, tools/fixtures/make_ct_fixture.py): int4 weights packed
 * eight to a word with a bf16 scale per group of 16, int8 packed four to a word with a scale per row, float8 with a
 * scale per row, plain int8 with one scale, and Kimi K2.5's nested DeepSeek-V3 text model packed 8 bits a value with its
 * quantization_config at the top (rows of 16: as many words as 7 bits would fill, so the bits are the config's), and
 * asymmetric int4 per group (zero points packed down the rows) and int8 per row (int8 zero points); each loads as the float checkpoint compressed-tensors' own decompress gives (every parameter bit for
 * bit), exports plain weights without the quantization_config, and bad ones are refused by name. */
#include "model_test_util.h"
#include "vc_test.h"
#include "verlc/safetensors.h"
#include <cjson/cJSON.h>
#include <unistd.h>

static const char *ROOT = "tests/fixtures/quant_ct";

/* the largest difference of two models' parameters, -1 when they do not line up */
static double param_diff(vc_model *a, vc_model *b) {
    int n = vc_model_n_params(a);
    if (n != vc_model_n_params(b)) return -1;
    double d = 0;
    for (int i = 0; i < n; i++) {
        vc_tensor *x = vc_model_param(a, i, NULL, NULL), *y = vc_model_param(b, i, NULL, NULL);
        if (x->n != y->n) return -1;
        float *hx = malloc(sizeof(float) * (size_t)x->n), *hy = malloc(sizeof(float) * (size_t)y->n);
        if (hx && hy && !vc_model_param_read(a, i, 0, hx) && !vc_model_param_read(b, i, 0, hy))
            for (int64_t j = 0; j < x->n; j++) d = fmax(d, fabs((double)hx[j] - hy[j]));
        else d = -1;
        free(hx), free(hy);
        if (d < 0) return d;
    }
    return d;
}

static void kinds(void) {
    static const char *K[] = { "w4_group", "w8_channel", "fp8_channel", "int8_tensor", "k25_w8_channel", "w4_group_asym",
                               "int8_channel_asym", "w4_group_actorder", "nvfp4", "mxfp4", "sparse24" };
    for (size_t k = 0; k < sizeof K / sizeof K[0]; k++) {
        char q[256], p[256], out[256], cfg[300];
        snprintf(q, sizeof q, "%s/%s", ROOT, K[k]);
        snprintf(p, sizeof p, "%s/%s_plain", ROOT, K[k]);
        vc_model *mq = NULL, *mp = NULL, *back = NULL;
        CHECK_OK(vc_model_load(q, &mq));
        CHECK_OK(vc_model_load(p, &mp));
        double d = mq && mp ? param_diff(mq, mp) : -1;
        CHECK_MSG(d == 0, "%s: the loaded weights differ from compressed-tensors' decompression by %g", K[k], d);
        /* exported plain, without the quantization_config; read back the same */
        snprintf(out, sizeof out, "/tmp/verlc_ct_%d_%s", (int)getpid(), K[k]);
        if (mq) CHECK_OK(vc_model_save_hf(mq, out, VC_F32));
        CHECK_OK(vc_model_load(out, &back));
        d = back && mp ? param_diff(back, mp) : -1;
        char *text = NULL;
        size_t n = 0;
        snprintf(cfg, sizeof cfg, "%s/config.json", out);
        CHECK_OK(vc_read_file(cfg, &text, &n));
        CHECK_MSG(d == 0 && text && !strstr(text, "quantization_config"), "%s: export %g, config %s", K[k], d,
                  text ? text : "(none)");
        printf("%s: loaded as compressed-tensors' decompression, bit for bit; exported plain\n", K[k]);
        free(text);
        vc_model_free(mq), vc_model_free(mp), vc_model_free(back);
        remove_tree(out);
    }
}

/* a copy of the w4 fixture with its config's quantization_config edited (jq-like: a sed expression) or a tensor
 * file rewritten, then loaded: refused with needle in the message */
static void refused(const char *what, const char *sed, const char *needle) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/verlc_ct_bad_%d", (int)getpid());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s/w4_group %s && sed -i '%s' %s/config.json", dir, ROOT, dir, sed, dir);
    CHECK(system(cmd) == 0);
    vc_model *m = NULL;
    vc_status st = vc_model_load(dir, &m);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), needle), "%s: %s %s", what, vc_status_name(st), vc_last_error());
    vc_model_free(m);
    remove_tree(dir);
}

/* a copy of fixture ROOT/name at dir (its config.json as it is): every tensor passed to edit, which writes it (changed
 * or not) and returns 1, or returns 0 for a plain copy; then edit(NULL) adds any tensors */
typedef int (*edit_fn)(const vc_st_tensor *t, vc_st_writer *w, void *ctx);

static void rewrite(const char *name, const char *dir, edit_fn edit, void *ctx) {
    char src[256], cmd[800];
    snprintf(src, sizeof src, "%s/%s", ROOT, name);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp %s/config.json %s/", dir, dir, src, dir);
    CHECK(system(cmd) == 0);
    vc_checkpoint *ck = NULL;
    vc_st_writer *w = NULL;
    CHECK_OK(vc_ckpt_open(src, &ck));
    CHECK_OK(vc_st_writer_new(&w));
    for (int i = 0; ck && w && i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        if (!edit(t, w, ctx)) CHECK_OK(vc_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, 1));
    }
    if (w) edit(NULL, w, ctx);
    CHECK_OK(vc_st_writer_write_dir(w, dir, 0));
    vc_st_writer_free(w);
    vc_ckpt_close(ck);
}

static const char *const QP = "model.layers.0.self_attn.q_proj.weight";
static const float zeros[4096];

/* corrupt's edits of the w4 fixture, by mode */
static int corrupt_edit(const vc_st_tensor *t, vc_st_writer *w, void *ctx) {
    int mode = *(const int *)ctx;
    char qs[128], qp[128], extra[128];
    snprintf(qs, sizeof qs, "%s_scale", QP);
    snprintf(qp, sizeof qp, "%s_packed", QP);
    if (!t) { /* beside q_proj: a zero point of the wrong shape, or a group index (every column in group 0 / one short) */
        int64_t zs[2] = { 64, 1 }, gs[1] = { mode == 4 ? 64 : 63 };
        snprintf(extra, sizeof extra, "%s_%s", QP, mode == 2 ? "zero_point" : "g_idx");
        if (mode == 2) CHECK_OK(vc_st_writer_add(w, extra, VC_F32, 2, zs, zeros, 1));
        if (mode == 4 || mode == 5) CHECK_OK(vc_st_writer_add(w, extra, VC_I32, 1, gs, zeros, 1));
        return 1;
    }
    int64_t shape[4] = { 0 };
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
    if (mode == 0 && !strcmp(t->name, qs)) {
        shape[1] = 3;
        CHECK_OK(vc_st_writer_add(w, t->name, t->dtype, 2, shape, t->data, 1));
        return 1;
    }
    if (mode == 1 && !strcmp(t->name, qp)) {
        CHECK_OK(vc_st_writer_add(w, t->name, VC_F32, t->ndim, shape, t->data, 1));
        return 1;
    }
    return mode == 3 && !strcmp(t->name, qs); /* dropped */
}

/* the w4 fixture rewritten with one tensor changed (mode 0: the scale of q_proj cut to 3 groups a row, 1: q_proj's
 * packed words as floats, 2: a zero point of the wrong shape beside it, 3: its scale dropped, 4 / 5: a group index that
 * puts every column in one group, or misses a column): refused naming it, no crash */
static void corrupt(int mode, const char *needle) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/verlc_ct_corrupt_%d", (int)getpid());
    rewrite("w4_group", dir, corrupt_edit, &mode);
    vc_model *m = NULL;
    vc_status st = vc_model_load(dir, &m);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), needle) && strstr(vc_last_error(), "q_proj"),
              "corrupt %d: %s %s", mode, vc_status_name(st), vc_last_error());
    vc_model_free(m);
    remove_tree(dir);
}

static int add_input_scale(const vc_st_tensor *t, vc_st_writer *w, void *ctx) {
    (void)ctx;
    static const float one[1] = { 1.0f };
    int64_t s1[1] = { 1 };
    if (!t) CHECK_OK(vc_st_writer_add(w, "model.layers.0.self_attn.q_proj.input_global_scale", VC_F32, 1, s1, one, 1));
    return !t;
}

/* the nvfp4 fixture with a W4A4 scheme's activation scale beside q_proj: loaded with the same weights, the scale listed
 * as ignored (activation quantization is not applied) */
static void activation_scale(void) {
    char dir[256], plain[256];
    snprintf(plain, sizeof plain, "%s/nvfp4_plain", ROOT);
    snprintf(dir, sizeof dir, "/tmp/verlc_ct_act_%d", (int)getpid());
    rewrite("nvfp4", dir, add_input_scale, NULL);
    vc_model *m = NULL, *mp = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    CHECK_OK(vc_model_load(plain, &mp));
    CHECK(m && mp && param_diff(m, mp) == 0);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (m && f) CHECK_OK(vc_model_describe(m, f));
    if (f) fclose(f);
    CHECK_MSG(text && strstr(text, "ignored: model.layers.0.self_attn.q_proj.input_global_scale (activation quantization"),
              "describe: %s", text ? text : "(none)");
    free(text);
    vc_model_free(m), vc_model_free(mp);
    remove_tree(dir);
}

static int full_bitmask(const vc_st_tensor *t, vc_st_writer *w, void *ctx) {
    (void)ctx;
    if (!t || strcmp(t->name, "model.layers.0.self_attn.q_proj.bitmask")) return !t;
    size_t n = (size_t)vc_st_tensor_numel(t);
    uint8_t *copy = malloc(n);
    if (!copy) return 0;
    memcpy(copy, t->data, n);
    copy[0] = 0xff;
    CHECK_OK(vc_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, copy, 1));
    free(copy);
    return 1;
}

/* the sparse24 fixture with q_proj's first bitmask byte all ones (6 values kept in its first 8 columns' 2 groups of 4):
 * refused naming the bitmask */
static void sparse_corrupt(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/verlc_ct_sparse_%d", (int)getpid());
    rewrite("sparse24", dir, full_bitmask, NULL);
    vc_model *m = NULL;
    vc_status st = vc_model_load(dir, &m);
    CHECK_MSG(st == VC_ERR_FORMAT && strstr(vc_last_error(), "q_proj.bitmask' row 0 keeps more values"), "%s %s",
              vc_status_name(st), vc_last_error());
    vc_model_free(m);
    remove_tree(dir);
}

int main(void) {
    kinds();
    sparse_corrupt();
    activation_scale();
    corrupt(0, "weight_scale");
    corrupt(1, "weight_packed");
    corrupt(2, "zero point");
    corrupt(3, "weight_scale");
    corrupt(4, "columns in group 0");
    corrupt(5, "group index per column");
    refused("activation order", "s/\"dynamic\": false,/\"actorder\": \"dynamic\", \"dynamic\": false,/", "actorder");
    refused("another format", "s/\"format\": \"pack-quantized\"/\"format\": \"marlin-24\"/g", "marlin-24");
    /* nvfp4-pack-quantized over integer groups: refused, as 4-bit floats in groups of 16 are what it holds */
    refused("nvfp4 over ints", "s/\"format\": \"pack-quantized\"/\"format\": \"nvfp4-pack-quantized\"/g", "4-bit floats");
    /* a packed weight of another shape than config.json implies */
    refused("intermediate size", "s/\"intermediate_size\": 128/\"intermediate_size\": 96/", "weight_packed");
    return vc_test_done();
}
