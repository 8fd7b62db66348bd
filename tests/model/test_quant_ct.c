/* compressed-tensors checkpoints (tests/fixtures/quant_ct, tools/fixtures/make_ct_fixture.py): int4 weights packed
 * eight to a word with a bf16 scale per group of 16, int8 packed four to a word with a scale per row, float8 with a
 * scale per row, plain int8 with one scale, and Kimi K2.5's nested DeepSeek-V3 text model packed 8 bits a value with its
 * quantization_config at the top (rows of 16: as many words as 7 bits would fill, so the bits are the config's); each loads as the float checkpoint compressed-tensors' own decompress gives (every parameter bit for
 * bit), exports plain weights without the quantization_config, and bad ones are refused by name. */
#include "model_test_util.h"
#include "vc_test.h"
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
    static const char *K[] = { "w4_group", "w8_channel", "fp8_channel", "int8_tensor", "k25_w8_channel" };
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

int main(void) {
    kinds();
    refused("asymmetric", "s/\"symmetric\": true/\"symmetric\": false/", "asymmetric");
    refused("activation order", "s/\"dynamic\": false,/\"actorder\": \"group\", \"dynamic\": false,/", "actorder");
    refused("another format", "s/\"format\": \"pack-quantized\"/\"format\": \"nvfp4-pack-quantized\"/g", "nvfp4-pack-quantized");
    /* a packed weight of another shape than config.json implies */
    refused("intermediate size", "s/\"intermediate_size\": 128/\"intermediate_size\": 96/", "weight_packed");
    return vc_test_done();
}
