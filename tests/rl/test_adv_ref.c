/* Golden test of the advantage estimators the shared core_algos fixture lacks: grpo_vectorized (with
 * and without std normalisation), rloo_vectorized and grpo_passk (with and without, and with a tie at a
 * group's maximum), optimal_token_baseline and tir_optimal_token_baseline (with and without rollout IS
 * weights and zero tail, on a response mask with holes), and verl's variance-proxy metrics, against
 * verl's own functions (tests/fixtures/rl/adv_reference.json, made by tools/fixtures/make_adv_ref.py).
 * The rows include singleton groups, an empty response and a dense reward. grpo_passk refuses a
 * singleton group with a message. */
#include "verlc/core.h"
#include "verlc/json.h"
#include "verlc/rl.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void matrix(const cJSON *m, int B, int T, float *out) {
    for (int i = 0; i < B; i++)
        for (int j = 0; j < T; j++) out[i * T + j] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(m, i), j)->valuedouble;
}

/* a [B,T] array of the call (NULL when absent or null), in a fresh buffer */
static float *opt_matrix(const cJSON *c, const char *key, int *B, int *T) {
    const cJSON *m = cJSON_GetObjectItem(c, key);
    if (!m || !cJSON_IsArray(m)) return NULL;
    *B = cJSON_GetArraySize(m), *T = cJSON_GetArraySize(cJSON_GetArrayItem(m, 0));
    float *out = calloc((size_t)*B * *T, sizeof(float));
    matrix(m, *B, *T, out);
    return out;
}

/* optimal_token_baseline / tir_: their own rows (a mask with holes, old log-probs, sum pi^2, IS weights) */
static int otb_calls(const cJSON *ref) {
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(ref, "calls")->child; c; c = c->next) {
        const char *fn = cJSON_GetObjectItem(c, "fn")->valuestring;
        if (!strstr(fn, "optimal_token_baseline")) continue;
        int B = 0, T = 0, b2, t2;
        float *mask = opt_matrix(c, "response_mask", &B, &T), *r = opt_matrix(c, "token_level_rewards", &b2, &t2);
        float *olp = opt_matrix(c, "old_log_probs", &b2, &t2), *sq = opt_matrix(c, "sum_pi_squared", &b2, &t2);
        float *isw = opt_matrix(c, "rollout_is_weights", &b2, &t2), *want = opt_matrix(c, "advantages", &b2, &t2);
        float *wret = opt_matrix(c, "returns", &b2, &t2);
        float *adv = calloc((size_t)B * T, sizeof(float)), *ret = calloc((size_t)B * T, sizeof(float));
        const char **idx = calloc((size_t)B, sizeof *idx);
        for (int i = 0; i < B; i++) idx[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "index"), i)->valuestring;
        int zt = cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "args"), "handle_zero_tail"));
        int tir = !strncmp(fn, "tir_", 4);
        CHECK_OK(vc_adv_optimal_token_baseline(r, mask, idx, olp, sq, isw, B, T, tir, zt, adv, ret));
        double worst = 0;
        for (int k = 0; k < B * T; k++) worst = fmax(worst, fmax(fabs(adv[k] - want[k]), fabs(ret[k] - wret[k])));
        CHECK_MSG(worst < 2e-6, "%s (IS weights %d, zero tail %d): max difference %g from verl", fn, isw != NULL, zt,
                  worst);
        free(mask), free(r), free(olp), free(sq), free(isw), free(want), free(wret), free(adv), free(ret), free(idx);
        n++;
    }
    return n;
}

/* verl's compute_variance_proxy_metrics on the last call's rows, with and without IS weights */
static void variance_proxy(const cJSON *ref) {
    const cJSON *last = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "calls"), cJSON_GetArraySize(cJSON_GetObjectItem(ref, "calls")) - 1);
    int B = 0, T = 0, b2, t2, n = 0;
    float *mask = opt_matrix(last, "response_mask", &B, &T), *olp = opt_matrix(last, "old_log_probs", &b2, &t2);
    float *sq = opt_matrix(last, "sum_pi_squared", &b2, &t2);
    for (const cJSON *v = cJSON_GetObjectItem(ref, "variance_proxy")->child; v; v = v->next, n++) {
        float *isw = opt_matrix(v, "rollout_is_weights", &b2, &t2), *adv = opt_matrix(v, "advantages", &b2, &t2);
        double s[3] = { 0, 0, 0 }, gn = cJSON_GetObjectItem(v, "gradient_norm")->valuedouble;
        vc_variance_proxy_sums(adv, mask, olp, sq, isw, B, T, s);
        const cJSON *m = cJSON_GetObjectItem(v, "metrics");
        double p2 = s[0] / B, got[3] = { p2, s[1] / B, s[2] / B }, p3 = fmax(0.0, (p2 - gn * gn) / (B - 1));
        const char *keys[3] = { "variance_proxy/proxy2_total_power", "variance_proxy/expected_a_squared",
                                "variance_proxy/expected_w" };
        for (int k = 0; k < 3; k++) {
            double want = cJSON_GetObjectItem(m, keys[k])->valuedouble;
            CHECK_MSG(fabs(got[k] - want) < 2e-6 * (1 + fabs(want)), "%s (IS %d): %.8g, verl %.8g", keys[k], isw != NULL,
                      got[k], want);
        }
        double w3 = cJSON_GetObjectItem(m, "variance_proxy/proxy3_pure_noise")->valuedouble;
        CHECK_MSG(fabs(p3 - w3) < 2e-6 * (1 + w3), "proxy3 %.8g, verl %.8g", p3, w3);
        free(isw), free(adv);
    }
    CHECK(n == 2);
    free(mask), free(olp), free(sq);
}

int main(void) {
    cJSON *ref = NULL;
    vc_json_load_file("tests/fixtures/rl/adv_reference.json", &ref);
    CHECK_MSG(ref != NULL, "tests/fixtures/rl/adv_reference.json: missing or not JSON");
    if (!ref) return vc_test_done();
    const cJSON *jm = cJSON_GetObjectItem(ref, "response_mask");
    int B = cJSON_GetArraySize(jm), T = cJSON_GetArraySize(cJSON_GetArrayItem(jm, 0)), n = 0;
    float *mask = calloc((size_t)B * T, sizeof(float)), *r = calloc((size_t)B * T, sizeof(float));
    float *adv = calloc((size_t)B * T, sizeof(float)), *ret = calloc((size_t)B * T, sizeof(float));
    float *want = calloc((size_t)B * T, sizeof(float));
    const char **idx = calloc((size_t)B, sizeof *idx);
    matrix(jm, B, T, mask);
    for (const cJSON *c = cJSON_GetObjectItem(ref, "calls")->child; c; c = c->next) {
        const char *fn = cJSON_GetObjectItem(c, "fn")->valuestring;
        if (strstr(fn, "optimal_token_baseline")) continue;
        n++;
        const cJSON *nm = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "args"), "norm_adv_by_std_in_grpo");
        int norm = !nm || cJSON_IsTrue(nm);
        matrix(cJSON_GetObjectItem(c, "token_level_rewards"), B, T, r);
        for (int i = 0; i < B; i++) idx[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "index"), i)->valuestring;
        vc_status st;
        if (!strcmp(fn, "grpo_vectorized")) st = vc_adv_grpo_vectorized(r, mask, idx, B, T, norm, 1e-6f, adv, ret);
        else if (!strcmp(fn, "grpo_passk")) st = vc_adv_grpo_passk(r, mask, idx, B, T, norm, 1e-6f, adv, ret);
        else st = vc_adv_rloo_vectorized(r, mask, idx, B, T, adv, ret);
        CHECK_OK(st);
        double worst = 0;
        matrix(cJSON_GetObjectItem(c, "advantages"), B, T, want);
        for (int k = 0; k < B * T; k++) worst = fmax(worst, fabs(adv[k] - want[k]));
        matrix(cJSON_GetObjectItem(c, "returns"), B, T, want);
        for (int k = 0; k < B * T; k++) worst = fmax(worst, fabs(ret[k] - want[k]));
        CHECK_MSG(worst < 2e-6, "%s (norm %d): max difference %g from verl", fn, norm, worst);
    }
    CHECK(n == 6);
    CHECK(otb_calls(ref) == 8);
    variance_proxy(ref);
    /* a group of one response has no second best */
    const char *one[] = { "a", "a", "b" };
    float r3[3] = { 1, 2, 3 }, m3[3] = { 1, 1, 1 }, a3[3], t3[3];
    vc_status st = vc_adv_grpo_passk(r3, m3, one, 3, 1, 1, 1e-6f, a3, t3);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "group 'b' has 1"), "passk singleton: %s", vc_last_error());
    free(mask), free(r), free(adv), free(ret), free(want), free(idx);
    cJSON_Delete(ref);
    return vc_test_done();
}
