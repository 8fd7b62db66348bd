/* Golden test of the advantage estimators the shared core_algos fixture lacks: grpo_vectorized (with
 * and without std normalisation), rloo_vectorized and grpo_passk (with and without, and with a tie at a
 * group's maximum), against verl's own functions (tests/fixtures/rl/adv_reference.json, made by
 * tools/fixtures/make_adv_ref.py). The rows include singleton groups, an empty response and a dense
 * reward. grpo_passk refuses a singleton group with a message. */
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
    for (const cJSON *c = cJSON_GetObjectItem(ref, "calls")->child; c; c = c->next, n++) {
        const char *fn = cJSON_GetObjectItem(c, "fn")->valuestring;
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
    /* a group of one response has no second best */
    const char *one[] = { "a", "a", "b" };
    float r3[3] = { 1, 2, 3 }, m3[3] = { 1, 1, 1 }, a3[3], t3[3];
    vc_status st = vc_adv_grpo_passk(r3, m3, one, 3, 1, 1, 1e-6f, a3, t3);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "group 'b' has 1"), "passk singleton: %s", vc_last_error());
    free(mask), free(r), free(adv), free(ret), free(want), free(idx);
    cJSON_Delete(ref);
    return vc_test_done();
}
