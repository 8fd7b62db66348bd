/* Golden test of algorithm.rollout_correction against verl's own rollout_corr_helper
 * (tests/fixtures/rl/rollout_corr_reference.json, made by tools/fixtures/make_rollout_corr_ref.py):
 * for importance weights per token and per sequence (truncated, batch-normalised), rejection
 * sampling with every option kind and chained options, and the off-policy diagnostics, verlc's
 * weights, rejection mask and every metric (the same names, no more, no fewer) must match. The
 * statistics split over several parts (as over ranks or micro-batches) must sum to the same figures.
 * Option and threshold errors are refused with a message naming the key. */
#include "rl/rollout_corr.h"
#include "verlc/core.h"
#include "verlc/json.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void matrix(const cJSON *m, int B, int T, float *out) {
    for (int i = 0; i < B; i++)
        for (int j = 0; j < T; j++) out[i * T + j] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(m, i), j)->valuedouble;
}

static const char *str_of(const cJSON *v, char *buf, size_t cap) {
    if (!v || cJSON_IsNull(v)) return NULL;
    if (cJSON_IsString(v)) return v->valuestring;
    snprintf(buf, cap, "%.17g", v->valuedouble);
    return buf;
}

static void cfg_of(const cJSON *c, rl_rc_cfg *rc) {
    memset(rc, 0, sizeof *rc);
    char b1[64], b2[64];
    const cJSON *thr = cJSON_GetObjectItem(c, "rollout_is_threshold"), *bn = cJSON_GetObjectItem(c, "rollout_is_batch_normalize");
    rc->is_thr = thr ? thr->valuedouble : 2.0;
    rc->is_norm = cJSON_IsTrue(bn);
    CHECK_OK(rl_rollout_is_parse(str_of(cJSON_GetObjectItem(c, "rollout_is"), b1, sizeof b1), &rc->is_level));
    CHECK_OK(rl_rs_parse(str_of(cJSON_GetObjectItem(c, "rollout_rs"), b1, sizeof b1),
                         str_of(cJSON_GetObjectItem(c, "rollout_rs_threshold"), b2, sizeof b2), rc));
}

/* statistics of rows [0, B) taken in two parts (rows [0, cut) and [cut, B)) and merged as ranks would */
static void accum_split(const rl_rc_cfg *rc, unsigned parts, const float *lp, const float *rlp, const float *mask,
                        int B, int T, int cut, rl_rc_raw *r, float *w, float *keep) {
    rl_rc_raw a, b;
    rl_rc_raw_init(&a);
    rl_rc_raw_init(&b);
    size_t o = (size_t)cut * T;
    rl_rc_accum(rc, parts, lp, rlp, mask, cut, T, &a, w, keep);
    rl_rc_accum(rc, parts, lp + o, rlp + o, mask + o, B - cut, T, &b, w ? w + o : NULL, keep ? keep + o : NULL);
    for (int i = 0; i < RL_RC_NS; i++) r->s[i] = a.s[i] + b.s[i];
    for (int i = 0; i < RL_RC_NM; i++) r->mx[i] = fmax(a.mx[i], b.mx[i]), r->mn[i] = fmin(a.mn[i], b.mn[i]);
}

static void check_case(const cJSON *ref, const cJSON *cs, int split) {
    int B = cJSON_GetObjectItem(ref, "B")->valueint, T = cJSON_GetObjectItem(ref, "T")->valueint;
    size_t n = (size_t)B * T;
    float *lp = calloc(n, sizeof(float)), *rlp = calloc(n, sizeof(float)), *mask = calloc(n, sizeof(float));
    float *w = calloc(n, sizeof(float)), *keep = calloc(n, sizeof(float)), *want = calloc(n, sizeof(float));
    rl_rc_raw *r = malloc(sizeof *r);
    rl_rc_out *o = malloc(sizeof *o);
    matrix(cJSON_GetObjectItem(ref, "old_log_prob"), B, T, lp);
    matrix(cJSON_GetObjectItem(ref, "rollout_log_prob"), B, T, rlp);
    matrix(cJSON_GetObjectItem(ref, "response_mask"), B, T, mask);
    const cJSON *c = cJSON_GetObjectItem(cs, "config");
    char *what = cJSON_PrintUnformatted(c);
    rl_rc_cfg rc;
    cfg_of(c, &rc);
    unsigned parts = RL_RC_IS | RL_RC_RS | RL_RC_OFF;
    rl_rc_raw_init(r);
    if (split) accum_split(&rc, parts, lp, rlp, mask, B, T, split, r, w, keep);
    else rl_rc_accum(&rc, parts, lp, rlp, mask, B, T, r, w, keep);
    rl_rc_finalize(&rc, parts, r, o);
    if (rc.is_level && rc.is_norm) {
        double v[2];
        rl_rc_norm_sums(&rc, w, mask, B, T, v);
        rl_rc_out_add(o, "rollout_is_batch_norm_factor", rl_rc_normalise(w, n, v, rc.is_level == RL_RIS_SEQUENCE));
    }
    /* weights and mask */
    const cJSON *jw = cJSON_GetObjectItem(cs, "rollout_is_weights");
    if (rc.is_level) {
        matrix(jw, B, T, want);
        double worst = 0;
        for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(w[k] - want[k]) / (1 + fabs(want[k])));
        CHECK_MSG(worst < 2e-6, "%s: weights differ by %g", what, worst);
    } else CHECK_MSG(cJSON_IsNull(jw), "%s: verl made weights", what);
    matrix(cJSON_GetObjectItem(cs, "response_mask"), B, T, want);
    int bad = 0;
    for (size_t k = 0; k < n; k++) bad += (rc.n_rs ? mask[k] * keep[k] : mask[k]) != want[k];
    CHECK_MSG(bad == 0, "%s: %d mask entries differ", what, bad);
    /* metrics: verl's names exactly, values within float32 rounding of verl's */
    const cJSON *met = cJSON_GetObjectItem(cs, "metrics");
    CHECK_MSG(o->n == cJSON_GetArraySize(met), "%s: %d metrics, verl has %d", what, o->n, cJSON_GetArraySize(met));
    for (int i = 0; i < o->n; i++) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(met, o->name[i]);
        CHECK_MSG(m != NULL, "%s: verl has no metric %s", what, o->name[i]);
        if (!m) continue;
        double d = fabs(o->v[i] - m->valuedouble);
        CHECK_MSG(d <= 2e-6 * (1 + fabs(m->valuedouble)), "%s: %s = %.9g, verl %.9g", what, o->name[i], o->v[i],
                  m->valuedouble);
    }
    free(what);
    free(lp), free(rlp), free(mask), free(w), free(keep), free(want), free(r), free(o);
}

static void expect_err(const char *rs, const char *thr, const char *needle) {
    rl_rc_cfg rc;
    memset(&rc, 0, sizeof rc);
    vc_status st = rl_rs_parse(rs, thr, &rc);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), needle), "rollout_rs=%s threshold=%s: %s", rs, thr ? thr : "null",
              st ? vc_last_error() : "accepted");
}

static void test_parse(void) {
    rl_rc_cfg rc;
    memset(&rc, 0, sizeof rc);
    CHECK_OK(rl_rs_parse(" token_k1 , token_k1,seq_max_k3", "2.0", &rc));
    CHECK(rc.n_rs == 2); /* duplicates dropped */
    CHECK_NEAR(rc.rs[0].lo, log(0.5), 1e-12);
    CHECK_NEAR(rc.rs[0].hi, log(2.0), 1e-12);
    CHECK(rc.rs[1].agg == RL_RS_SEQ_MAX && rc.rs[1].k == 3 && rc.rs[1].hi == 2.0);
    CHECK_OK(rl_rs_parse(NULL, NULL, &rc));
    CHECK(rc.n_rs == 0);
    expect_err("seq_max_k1", "2", "unknown option 'seq_max_k1'");
    expect_err("token_k2", NULL, "rollout_rs_threshold must be given");
    expect_err("token_k2", "0.1_0.5", "one upper bound without '_'");
    expect_err("token_k1", "-1", "must be positive");
    expect_err("token_k1", "0_2", "must be positive");
    expect_err("token_k1,token_k2", "1,2,3", "one per rollout_rs option");
    expect_err("token_k3", "abc", "invalid threshold 'abc'");
    expect_err(" , ", "1", "names no option");
}

/* later verl's IcePop ("lower_upper": weights outside the bounds zeroed) against its own helper
 * (tests/fixtures/rl/icepop_reference.json, tools/fixtures/make_icepop_ref.py at verl-project/verl 1dda039b):
 * the weights, the batch normalisation and rollout_is_oob_ratio, token and sequence level */
static void test_icepop(void) {
    cJSON *ref = NULL;
    vc_json_load_file("tests/fixtures/rl/icepop_reference.json", &ref);
    CHECK_MSG(ref != NULL, "tests/fixtures/rl/icepop_reference.json: missing or not JSON");
    if (!ref) return;
    int B = cJSON_GetObjectItem(ref, "B")->valueint, T = cJSON_GetObjectItem(ref, "T")->valueint, n = 0, bad = 0;
    size_t N = (size_t)B * T;
    float *mask = calloc(N, sizeof *mask), *lp = calloc(N, sizeof *lp), *rlp = calloc(N, sizeof *rlp);
    float *w = calloc(N, sizeof *w);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < T; j++) {
            mask[i * T + j] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "mask"), i), j)->valuedouble;
            lp[i * T + j] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "log_ratio"), i), j)->valuedouble;
        }
    for (const cJSON *cs = cJSON_GetObjectItem(ref, "cases")->child; cs; cs = cs->next, n++) {
        rl_rc_cfg c = { 0 };
        CHECK_OK(rl_rollout_is_parse(cJSON_GetObjectItem(cs, "rollout_is")->valuestring, &c.is_level));
        CHECK_OK(rl_rollout_is_threshold_parse(cJSON_GetObjectItem(cs, "threshold")->valuestring, &c.is_thr, &c.is_lo));
        c.is_norm = cJSON_IsTrue(cJSON_GetObjectItem(cs, "batch_normalize"));
        rl_rc_raw r;
        rl_rc_out o;
        rl_rc_raw_init(&r);
        rl_rc_accum(&c, RL_RC_IS, lp, rlp, mask, B, T, &r, w, NULL);
        rl_rc_finalize(&c, RL_RC_IS, &r, &o);
        double oob = -1, factor = 1;
        for (int k = 0; k < o.n; k++)
            if (!strcmp(o.name[k], "rollout_corr/rollout_is_oob_ratio")) oob = o.v[k];
        if (c.is_norm) {
            double v[2];
            rl_rc_norm_sums(&c, w, mask, B, T, v);
            factor = rl_rc_normalise(w, N, v, c.is_level == RL_RIS_SEQUENCE);
            CHECK_MSG(fabs(factor - cJSON_GetObjectItem(cs, "batch_norm_factor")->valuedouble) < 1e-6, "case %d: factor %g",
                      n, factor);
        }
        CHECK_MSG(fabs(oob - cJSON_GetObjectItem(cs, "oob_ratio")->valuedouble) < 1e-7, "case %d: oob %g", n, oob);
        const cJSON *want = cJSON_GetObjectItem(cs, "weights");
        for (int i = 0; i < B; i++)
            for (int j = 0; j < T; j++) {
                double x = cJSON_GetArrayItem(cJSON_GetArrayItem(want, i), j)->valuedouble, y = w[i * T + j];
                if (fabs(x - y) > 1e-6 * fmax(1, fabs(x)) && bad++ < 4)
                    fprintf(stderr, "icepop case %d [%d,%d]: %g, verl %g\n", n, i, j, y, x);
            }
    }
    CHECK_MSG(n == 8 && bad == 0, "icepop: %d cases, %d weights differ from verl's", n, bad);
    double up, lo;
    CHECK(rl_rollout_is_threshold_parse("2.5", &up, &lo) == VC_OK && up == 2.5 && lo == 0);
    CHECK(rl_rollout_is_threshold_parse("3_2", &up, &lo) == VC_ERR_ARG && strstr(vc_last_error(), "lower <= upper"));
    CHECK(rl_rollout_is_threshold_parse("0.5_x", &up, &lo) == VC_ERR_ARG);
    CHECK(rl_rollout_is_threshold_parse("0_2", &up, &lo) == VC_ERR_ARG);
    free(mask), free(lp), free(rlp), free(w);
    cJSON_Delete(ref);
}

int main(void) {
    test_parse();
    test_icepop();
    cJSON *ref = NULL;
    vc_json_load_file("tests/fixtures/rl/rollout_corr_reference.json", &ref);
    CHECK_MSG(ref != NULL, "tests/fixtures/rl/rollout_corr_reference.json: missing or not JSON");
    if (!ref) return vc_test_done();
    int n = 0;
    for (const cJSON *cs = cJSON_GetObjectItem(ref, "cases")->child; cs; cs = cs->next, n++) {
        check_case(ref, cs, 0);
        check_case(ref, cs, 3); /* in two parts: rows 0-2 and 3-6 */
    }
    CHECK(n >= 9);
    cJSON_Delete(ref);
    return vc_test_done();
}
