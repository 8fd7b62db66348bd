/* RoPE: parse every fixture config and compare inv_freq and the attention scale with values computed here
 * from the published formulas in double precision; hand-computed constants; bad configs. */
#include "vc_test.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/rope.h"

/* ---- reference formulas, double precision ---- */
static double ref_default(double theta, int i, int d) { return pow(theta, -(2.0 * i) / d); }

static double ref_corr(double rot, int d, double theta, double maxp) {
    return d * log(maxp / (rot * 2 * M_PI)) / (2 * log(theta));
}

typedef struct ref_params {
    int type;
    double theta, factor, lff, hff, orig, attn_factor, beta_fast, beta_slow, mscale, mscale_all;
    int truncate, has_attn;
    const double *ext;
} ref_params;

/* Returns the attention scale, fills inv[d/2]. */
static double ref_freqs(const ref_params *p, int d, double seq, double maxp, double *inv) {
    double attn = 1.0;
    for (int i = 0; i < d / 2; i++) inv[i] = ref_default(p->theta, i, d);
    if (p->type == VC_ROPE_LINEAR) for (int i = 0; i < d / 2; i++) inv[i] /= p->factor;
    if (p->type == VC_ROPE_DYNAMIC && seq > maxp) {
        double base = p->theta * pow(p->factor * seq / maxp - (p->factor - 1), (double)d / (d - 2));
        for (int i = 0; i < d / 2; i++) inv[i] = ref_default(base, i, d);
    }
    if (p->type == VC_ROPE_LLAMA3) {
        for (int i = 0; i < d / 2; i++) {
            double wl = 2 * M_PI / inv[i], lo = p->orig / p->lff, hi = p->orig / p->hff;
            if (wl > lo) inv[i] /= p->factor;
            else if (wl >= hi) {
                double s = (p->orig / wl - p->lff) / (p->hff - p->lff);
                inv[i] = (1 - s) * inv[i] / p->factor + s * inv[i];
            }
        }
    }
    if (p->type == VC_ROPE_YARN) {
        double f = p->factor, o = p->orig > 0 ? p->orig : maxp;
        double lo = ref_corr(p->beta_fast, d, p->theta, o), hi = ref_corr(p->beta_slow, d, p->theta, o);
        if (p->truncate) { lo = floor(lo); hi = ceil(hi); }
        lo = fmax(lo, 0);
        hi = fmin(hi, d - 1);
        if (lo == hi) hi += 0.001;
        for (int i = 0; i < d / 2; i++) {
            double ramp = fmin(fmax((i - lo) / (hi - lo), 0), 1);
            inv[i] = inv[i] / f * ramp + inv[i] * (1 - ramp);
        }
        double m1 = p->mscale && p->mscale_all ? p->mscale : 1, m2 = p->mscale && p->mscale_all ? p->mscale_all : 0;
        attn = f <= 1 ? 1 : (0.1 * m1 * log(f) + 1) / (m2 ? 0.1 * m2 * log(f) + 1 : 1);
        if (p->has_attn) attn = p->attn_factor;
    }
    if (p->type == VC_ROPE_LONGROPE) {
        for (int i = 0; i < d / 2; i++) inv[i] /= p->ext[i];
        double f = maxp / p->orig;
        attn = f <= 1 ? 1 : sqrt(1 + log(f) / log(p->orig));
    }
    return attn;
}

static void compare(const char *what, const float *got, const double *want, int n, float attn, double want_attn) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-6 * fabs(want[i]))) {
            fprintf(stderr, "%s: inv_freq[%d] = %.9g, formula %.9g\n", what, i, got[i], want[i]);
            bad++;
        }
    CHECK_MSG(bad == 0, "%s: %d of %d frequencies differ", what, bad, n);
    CHECK_MSG(fabs(attn - want_attn) <= 1e-6 * want_attn, "%s: attention scale %.9g, formula %.9g", what, attn,
              want_attn);
}

static cJSON *load_config(const char *model, char *path, size_t n) {
    snprintf(path, n, "%s/fixtures/models/%s/config.json", vc_test_shared(), model);
    cJSON *c = NULL;
    CHECK_OK(vc_json_load_file(path, &c));
    return c;
}

/* One fixture: parse, check the parsed type, compare with the formulas at seq_len 12 (the reference input). */
static void check_fixture(const char *model, int want_type, const ref_params *rp, float *out) {
    char path[512];
    cJSON *c = load_config(model, path, sizeof path);
    vc_rope r;
    vc_status st = vc_rope_parse(c, path, &r);
    CHECK_MSG(st == VC_OK, "%s: %s", model, vc_last_error());
    CHECK_MSG(r.type == want_type, "%s: type %s", model, vc_rope_type_name(r.type));
    int64_t hd = 0, hidden = 0, heads = 1, rope_hd = 0;
    vc_json_get_int(c, "hidden_size", 0, &hidden, path);
    vc_json_get_int(c, "num_attention_heads", 1, &heads, path);
    vc_json_get_int(c, "head_dim", hidden / heads, &hd, path);
    vc_json_get_int(c, "qk_rope_head_dim", 0, &rope_hd, path);
    int dim = (int)((rope_hd ? rope_hd : hd) * r.partial_rotary_factor);
    float attn = 0;
    CHECK_OK(vc_rope_inv_freq(&r, dim, 12, 0, out, &attn));
    double want[VC_ROPE_MAX_FACTORS];
    double wa = ref_freqs(rp, dim, 12, (double)r.max_position_embeddings, want);
    compare(model, out, want, dim / 2, attn, wa);
    cJSON_Delete(c);
}

static void test_fixtures(void) {
    float f[256];
    ref_params def = { .type = VC_ROPE_DEFAULT, .theta = 10000 };
    check_fixture("llama", VC_ROPE_DEFAULT, &def, f);
    CHECK(f[0] == 1.0f && f[2] == 0.1f && f[4] == 0.01f && f[6] == 0.001f); /* 10000^(-k/4), exact in float */
    CHECK_NEAR(f[1], 0.316227766, 1e-8);
    check_fixture("gemma2", VC_ROPE_DEFAULT, &def, f);
    check_fixture("llama_tied", VC_ROPE_DEFAULT, &def, f);
    ref_params lin = { .type = VC_ROPE_LINEAR, .theta = 10000, .factor = 2 };
    check_fixture("llama_linear_rope", VC_ROPE_LINEAR, &lin, f);
    CHECK(f[0] == 0.5f && f[2] == 0.05f);
    ref_params dyn = { .type = VC_ROPE_DYNAMIC, .theta = 10000, .factor = 2 };
    check_fixture("llama_dynamic_rope", VC_ROPE_DYNAMIC, &dyn, f);
    /* max_position_embeddings 8, seq_len 12: base = 10000 * (2*12/8 - 1)^(16/14) = 10000 * 2^(8/7) */
    CHECK_NEAR(f[4], 1.0 / sqrt(10000 * pow(2, 8.0 / 7)), 1e-6 * f[4]);
    ref_params l3 = { .type = VC_ROPE_LLAMA3, .theta = 500000, .factor = 8, .lff = 1, .hff = 4, .orig = 32 };
    check_fixture("llama31_rope", VC_ROPE_LLAMA3, &l3, f);
    /* wavelengths: 2*pi (< 8: kept), then > 32 (low frequency: divided by 8) */
    CHECK(f[0] == 1.0f);
    CHECK_NEAR(f[1], pow(500000, -0.125) / 8, 1e-6 * f[1]);
    ref_params qy = { .type = VC_ROPE_YARN, .theta = 1e6, .factor = 4, .orig = 32, .beta_fast = 32, .beta_slow = 1,
                      .truncate = 1 };
    check_fixture("qwen2_yarn", VC_ROPE_YARN, &qy, f);
    /* correction range [0, 1]: pair 0 extrapolates, pairs >= 1 interpolate; attention 0.1 ln 4 + 1 */
    CHECK(f[0] == 1.0f);
    CHECK_NEAR(f[3], pow(1e6, -6.0 / 16) / 4, 1e-6 * f[3]);
    ref_params dy = qy;
    dy.theta = 10000;
    dy.mscale = dy.mscale_all = 1;
    check_fixture("deepseek_v3_yarn", VC_ROPE_YARN, &dy, f);
    char path[512];
    cJSON *c = load_config("deepseek_v3_yarn", path, sizeof path);
    vc_rope r;
    CHECK_OK(vc_rope_parse(c, path, &r));
    float attn = 0;
    CHECK_OK(vc_rope_inv_freq(&r, 8, 12, 128, f, &attn));
    CHECK(attn == 1.0f); /* mscale / mscale_all_dim = 1 */
    CHECK_NEAR(vc_rope_softmax_mscale(&r), pow(0.1 * log(4.0) + 1, 2), 1e-12);
    cJSON_Delete(c);
    static const double lf[8] = { 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0 };
    ref_params lr = { .type = VC_ROPE_LONGROPE, .theta = 10000, .orig = 8, .ext = lf };
    check_fixture("phi3_longrope", VC_ROPE_LONGROPE, &lr, f);
    CHECK_NEAR(f[7], pow(10000, -14.0 / 16) / 12, 1e-6 * f[7]);
    /* short factors up to the original 8 positions, sqrt(1 + ln 8 / ln 8) = sqrt 2 either way */
    c = load_config("phi3_longrope", path, sizeof path);
    CHECK_OK(vc_rope_parse(c, path, &r));
    CHECK_OK(vc_rope_inv_freq(&r, 16, 8, 0, f, &attn));
    CHECK_NEAR(f[7], pow(10000, -14.0 / 16) / 4.0, 1e-6 * f[7]);
    CHECK_NEAR(attn, sqrt(2.0), 1e-7);
    CHECK_OK(vc_rope_inv_freq(&r, 16, 9, 0, f, &attn));
    CHECK_NEAR(f[7], pow(10000, -14.0 / 16) / 12.0, 1e-6 * f[7]);
    CHECK(vc_rope_inv_freq(&r, 12, 9, 0, f, &attn) == VC_ERR_SHAPE);
    cJSON_Delete(c);
    /* dynamic within max positions is the default rope */
    c = load_config("llama_dynamic_rope", path, sizeof path);
    CHECK_OK(vc_rope_parse(c, path, &r));
    CHECK_OK(vc_rope_inv_freq(&r, 16, 8, 0, f, &attn));
    CHECK(f[2] == 0.1f && attn == 1.0f);
    cJSON_Delete(c);
}

/* Parses a config given as text; returns the status and fills r. */
static vc_status parse_text(const char *json, const char *layer, vc_rope *r) {
    cJSON *c = cJSON_Parse(json);
    CHECK(c != NULL);
    vc_status st = vc_rope_parse_layer(c, "test/config.json", layer, r);
    cJSON_Delete(c);
    return st;
}

static void test_real_shapes(void) {
    vc_rope r;
    float f[64], attn;
    double want[64];
    /* Llama-3.1-8B: head dim 128, theta 500000, factor 8, original 8192: all three llama3 regions */
    CHECK_OK(parse_text("{\"rope_theta\":500000.0,\"max_position_embeddings\":131072,\"rope_scaling\":{\"factor\":8.0,"
                        "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192,"
                        "\"rope_type\":\"llama3\"}}", NULL, &r));
    CHECK_OK(vc_rope_inv_freq(&r, 128, 100, 0, f, &attn));
    ref_params l3 = { .type = VC_ROPE_LLAMA3, .theta = 500000, .factor = 8, .lff = 1, .hff = 4, .orig = 8192 };
    compare("llama3-8b", f, want, 64, attn, ref_freqs(&l3, 128, 100, 131072, want));
    /* DeepSeek-V3: rope dim 64, factor 40, original 4096, mscale = mscale_all_dim = 1, transformers-5 style */
    CHECK_OK(parse_text("{\"max_position_embeddings\":163840,\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":10000,"
                        "\"factor\":40,\"original_max_position_embeddings\":4096,\"beta_fast\":32,\"beta_slow\":1,"
                        "\"mscale\":1.0,\"mscale_all_dim\":1.0}}", NULL, &r));
    CHECK_OK(vc_rope_inv_freq(&r, 64, 10, 0, f, &attn));
    ref_params dv3 = { .type = VC_ROPE_YARN, .theta = 10000, .factor = 40, .orig = 4096, .beta_fast = 32,
                       .beta_slow = 1, .mscale = 1, .mscale_all = 1, .truncate = 1 };
    compare("deepseek-v3", f, want, 32, attn, ref_freqs(&dv3, 64, 10, 163840, want));
    CHECK_NEAR(vc_rope_softmax_mscale(&r), pow(0.1 * log(40.0) + 1, 2), 1e-12);
    /* YaRN without original (factor used as is), mscale != mscale_all_dim, no truncation */
    CHECK_OK(parse_text("{\"rope_theta\":10000,\"max_position_embeddings\":4096,\"rope_scaling\":{\"type\":\"yarn\","
                        "\"factor\":16,\"mscale\":0.707,\"mscale_all_dim\":1.0,\"truncate\":false,\"beta_fast\":0}}",
                        NULL, &r));
    CHECK(r.beta_fast == 32 && r.truncate == 0);
    CHECK_OK(vc_rope_inv_freq(&r, 64, 10, 0, f, &attn));
    ref_params y2 = { .type = VC_ROPE_YARN, .theta = 10000, .factor = 16, .beta_fast = 32, .beta_slow = 1,
                      .mscale = 0.707, .mscale_all = 1.0 };
    compare("yarn-untruncated", f, want, 32, attn, ref_freqs(&y2, 64, 10, 4096, want));
    /* the explicit factor wins over max_position_embeddings / original (transformers 5) */
    CHECK_OK(parse_text("{\"rope_theta\":10000,\"max_position_embeddings\":256,\"rope_scaling\":{\"type\":\"yarn\","
                        "\"factor\":4.0,\"original_max_position_embeddings\":32}}", NULL, &r));
    CHECK_OK(vc_rope_inv_freq(&r, 16, 10, 0, f, &attn));
    CHECK_NEAR(attn, 0.1 * log(4.0) + 1, 1e-6);
    CHECK_NEAR(f[7], pow(10000, -14.0 / 16) / 4, 1e-6 * f[7]);
    /* explicit attention_factor wins */
    CHECK_OK(parse_text("{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"attention_factor\":0.5}}", NULL, &r));
    CHECK_OK(vc_rope_inv_freq(&r, 64, 10, 2048, f, &attn));
    CHECK(attn == 0.5f);
    CHECK(vc_rope_softmax_mscale(&r) == 1.0);
    /* partial rotary factor, from the top level or from rope_parameters */
    CHECK_OK(parse_text("{\"partial_rotary_factor\":0.5,\"rope_theta\":10000.0,\"rope_scaling\":null}", NULL, &r));
    CHECK(r.partial_rotary_factor == 0.5 && r.type == VC_ROPE_DEFAULT && r.theta_given);
    CHECK_OK(parse_text("{\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1e6,\"partial_rotary_factor\":0.25}}",
                        NULL, &r));
    CHECK(r.partial_rotary_factor == 0.25 && r.theta == 1e6);
    /* longrope without a top-level original: factor from the dict, threshold max_position_embeddings */
    static const double sf[4] = { 1, 2, 3, 4 }, lf2[4] = { 5, 6, 7, 8 };
    CHECK_OK(parse_text("{\"max_position_embeddings\":100,\"rope_scaling\":{\"type\":\"longrope\",\"factor\":4.0,"
                        "\"short_factor\":[1,2,3,4],\"long_factor\":[5,6,7,8]}}", NULL, &r));
    CHECK(r.original_max_pos == 0);
    CHECK_OK(vc_rope_inv_freq(&r, 8, 100, 0, f, &attn));
    CHECK_NEAR(f[3], pow(10000, -6.0 / 8) / sf[3], 1e-6 * f[3]);
    CHECK_NEAR(attn, sqrt(1 + log(4.0) / log(100.0)), 1e-6);
    CHECK_OK(vc_rope_inv_freq(&r, 8, 101, 0, f, &attn));
    CHECK_NEAR(f[3], pow(10000, -6.0 / 8) / lf2[3], 1e-6 * f[3]);
    /* no rope keys at all: default with base 10000, flagged as not given */
    CHECK_OK(parse_text("{}", NULL, &r));
    CHECK(r.type == VC_ROPE_DEFAULT && r.theta == 10000 && !r.theta_given);
}

static void test_layer_types(void) {
    vc_rope r;
    const char *v5 = "{\"layer_types\":[\"sliding_attention\",\"full_attention\"],\"rope_parameters\":{"
                     "\"full_attention\":{\"rope_type\":\"linear\",\"factor\":8.0,\"rope_theta\":1000000.0},"
                     "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}}";
    CHECK_OK(parse_text(v5, "full_attention", &r));
    CHECK(r.type == VC_ROPE_LINEAR && r.factor == 8 && r.theta == 1e6);
    CHECK_OK(parse_text(v5, "sliding_attention", &r));
    CHECK(r.type == VC_ROPE_DEFAULT && r.theta == 10000);
    CHECK_OK(parse_text(v5, NULL, &r));
    CHECK(r.type == VC_ROPE_LINEAR);
    CHECK(parse_text(v5, "chunked_attention", &r) == VC_ERR_MISSING && strstr(vc_last_error(), "chunked_attention"));
    /* flat settings apply to every layer type */
    CHECK_OK(parse_text("{\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":5.0}}", "sliding_attention", &r));
    CHECK(r.theta == 5.0);
    /* classic Gemma 3: global layers scaled, local layers use rope_local_base_freq */
    const char *g3 = "{\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0}}";
    CHECK_OK(parse_text(g3, "sliding_attention", &r));
    CHECK(r.type == VC_ROPE_DEFAULT && r.theta == 10000);
    CHECK_OK(parse_text(g3, "full_attention", &r));
    CHECK(r.type == VC_ROPE_LINEAR && r.theta == 1e6);
    /* rope_theta outside rope_parameters is the fallback (standardize_rope_params) */
    CHECK_OK(parse_text("{\"rope_theta\":7.0,\"rope_parameters\":{\"rope_type\":\"linear\",\"factor\":2}}", NULL, &r));
    CHECK(r.theta == 7.0 && r.factor == 2);
}

/* A bad config fails with `want` and a message naming the file and each needle. */
static void bad(const char *json, vc_status want, const char *n1, const char *n2) {
    vc_rope r;
    vc_status st = parse_text(json, NULL, &r);
    const char *m = vc_last_error();
    CHECK_MSG(st == want, "%s: got %s (%s)", json, vc_status_name(st), m);
    CHECK_MSG(strstr(m, "test/config.json") && (!n1 || strstr(m, n1)) && (!n2 || strstr(m, n2)), "message: %s", m);
}

static void test_bad_configs(void) {
    bad("{\"rope_scaling\":{\"type\":\"ntk-by-parts\",\"factor\":2}}", VC_ERR_UNSUPPORTED, "'type'", "'ntk-by-parts'");
    bad("{\"rope_parameters\":{\"rope_type\":\"wild\",\"rope_theta\":1}}", VC_ERR_UNSUPPORTED, "rope_parameters", "'wild'");
    bad("{\"rope_scaling\":{\"type\":\"linear\"}}", VC_ERR_MISSING, "rope_scaling", "'factor'");
    bad("{\"rope_scaling\":{\"rope_type\":\"dynamic\"}}", VC_ERR_MISSING, "'factor'", NULL);
    bad("{\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":1e4}}", VC_ERR_MISSING, "'factor'", NULL);
    bad("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"high_freq_factor\":4,\"original_max_position_embeddings\":8192}}",
        VC_ERR_MISSING, "'low_freq_factor'", NULL);
    bad("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4}}",
        VC_ERR_MISSING, "'original_max_position_embeddings'", NULL);
    bad("{\"rope_scaling\":{\"type\":\"longrope\",\"long_factor\":[1,2]}}", VC_ERR_MISSING, "'short_factor'", NULL);
    bad("{\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":\"x\",\"long_factor\":[1]}}", VC_ERR_FORMAT, "'short_factor'", NULL);
    bad("{\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,\"a\"],\"long_factor\":[1]}}", VC_ERR_FORMAT, "entry 1", NULL);
    bad("{\"rope_scaling\":{\"type\":\"linear\",\"factor\":\"2\"}}", VC_ERR_FORMAT, "'factor'", "string");
    bad("{\"rope_scaling\":{\"type\":7}}", VC_ERR_FORMAT, "'type'", NULL);
    bad("{\"rope_scaling\":3}", VC_ERR_FORMAT, "'rope_scaling'", NULL);
    bad("{\"rope_parameters\":[1]}", VC_ERR_FORMAT, "'rope_parameters'", NULL);
    bad("{\"rope_theta\":\"big\"}", VC_ERR_FORMAT, "'rope_theta'", NULL);
    bad("{\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":\"1e4\"}}", VC_ERR_FORMAT, "'rope_theta'", NULL);
    bad("{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,\"truncate\":\"no\"}}", VC_ERR_FORMAT, "'truncate'", NULL);
    bad("{\"rope_scaling\":{\"type\":\"linear\",\"factor\":-1}}", VC_ERR_ARG, "factor", NULL);
    bad("{\"max_position_embeddings\":1.5}", VC_ERR_FORMAT, "'max_position_embeddings'", NULL);
    /* argument errors at frequency time */
    vc_rope r;
    float f[8], a;
    CHECK_OK(parse_text("{\"rope_scaling\":{\"type\":\"dynamic\",\"factor\":2}}", NULL, &r));
    CHECK(vc_rope_inv_freq(&r, 16, 12, 0, f, &a) == VC_ERR_ARG); /* no max_position_embeddings anywhere */
    CHECK(vc_rope_inv_freq(&r, 7, 12, 8, f, &a) == VC_ERR_ARG);
}

static void test_dynamic_state(void) {
    int64_t cached = 0;
    CHECK(vc_rope_dynamic_seq_len(&cached, 5, 8) == 8);   /* original frequencies */
    CHECK(vc_rope_dynamic_seq_len(&cached, 12, 8) == 12); /* grow */
    CHECK(vc_rope_dynamic_seq_len(&cached, 10, 8) == 12); /* keep the longer cache */
    CHECK(vc_rope_dynamic_seq_len(&cached, 8, 8) == 12);  /* not below max positions: keep */
    CHECK(vc_rope_dynamic_seq_len(&cached, 7, 8) == 8);   /* reset */
}

/* Baichuan's position embedding: rope for the 7B (max_position_embeddings, or width 4096), ALiBi for the
 * 13B (model_max_length only), or as "position_embedding" says */
static void test_baichuan_alibi(void) {
    static const struct { const char *extra; int alibi; } C[] = {
        { "\"hidden_size\":5120,\"model_max_length\":4096", 1 },
        { "\"hidden_size\":4096,\"model_max_length\":4096", 0 },
        { "\"hidden_size\":5120,\"max_position_embeddings\":4096", 0 },
        { "\"hidden_size\":64,\"position_embedding\":\"alibi\",\"max_position_embeddings\":128", 1 },
        { "\"hidden_size\":64,\"position_embedding\":\"rope\"", 0 },
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"model_type\":\"baichuan\",\"vocab_size\":64,\"num_hidden_layers\":1,"
                                    "\"num_attention_heads\":8,\"intermediate_size\":32,%s}", C[i].extra);
        cJSON *c = cJSON_Parse(json);
        vc_model_config mc;
        CHECK_OK(vc_config_parse_model(c, "test/config.json", &mc));
        CHECK_MSG(mc.alibi == C[i].alibi && (mc.rot_dim == 0) == C[i].alibi, "case %zu: alibi %d rot %d", i, mc.alibi,
                  mc.rot_dim);
        cJSON_Delete(c);
    }
}

int main(void) {
    test_fixtures();
    test_baichuan_alibi();
    test_real_shapes();
    test_layer_types();
    test_bad_configs();
    test_dynamic_state();
    return vc_test_done();
}
