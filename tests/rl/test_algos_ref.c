/* Golden test: converts shared/fixtures/verl/core_algos_reference.json (outputs of verl's own functions)
 * into a `verlc algos` calls file, runs the program and compares every output value within 1e-5. */
#include "verlc/core.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int n_values, n_match;

/* Recursive comparison of a result against the reference (numbers, lists, dicts). */
static void compare(const cJSON *got, const cJSON *want, const char *what) {
    if (cJSON_IsNumber(want)) {
        n_values++;
        if (cJSON_IsNumber(got) && fabs(got->valuedouble - want->valuedouble) <= 1e-5) n_match++;
        else CHECK_MSG(0, "%s: got %.9g want %.9g", what, cJSON_IsNumber(got) ? got->valuedouble : NAN,
                       want->valuedouble);
        return;
    }
    if (cJSON_IsArray(want)) {
        CHECK_MSG(cJSON_IsArray(got) && cJSON_GetArraySize(got) == cJSON_GetArraySize(want), "%s: list size", what);
        if (!cJSON_IsArray(got)) return;
        const cJSON *g = got->child;
        for (const cJSON *w = want->child; w && g; w = w->next, g = g->next) compare(g, w, what);
        return;
    }
    if (cJSON_IsObject(want)) {
        for (const cJSON *w = want->child; w; w = w->next) {
            const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
            CHECK_MSG(g != NULL, "%s: missing key %s", what, w->string);
            if (g) compare(g, w, what);
        }
    }
}

static cJSON *call(cJSON *calls, const char *fn) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "fn", fn);
    cJSON_AddItemToArray(calls, c);
    return cJSON_AddObjectToObject(c, "args");
}

static void a_str(cJSON *a, const char *k, const char *v) { cJSON_AddStringToObject(a, k, v); }
static void a_num(cJSON *a, const char *k, double v) { cJSON_AddNumberToObject(a, k, v); }

/* Builds the calls for one reference output key; returns 0 when the key is not understood. */
static int build(cJSON *calls, const char *key) {
    char mode[64] = "";
    const char *p = strchr(key, '(');
    if (p) { snprintf(mode, sizeof mode, "%s", p + 1); char *q = strpbrk(mode, ",)"); if (q) *q = 0; }
    cJSON *a;
    if (!strncmp(key, "gae(", 4)) {
        a = call(calls, "gae_advantage_return");
        int dense = strstr(key, "dense") != NULL;
        a_str(a, "token_level_rewards", dense ? "dense_rewards" : "token_level_rewards");
        a_str(a, "values", "values"); a_str(a, "response_mask", "response_mask");
        a_num(a, "gamma", dense ? 0.99 : 1.0); a_num(a, "lam", dense ? 0.95 : 1.0);
    } else if (!strncmp(key, "grpo(", 5)) {
        a = call(calls, "grpo_outcome_advantage");
        a_str(a, "token_level_rewards", "token_level_rewards"); a_str(a, "response_mask", "response_mask");
        a_str(a, "index", "index");
        cJSON_AddBoolToObject(a, "norm_adv_by_std_in_grpo", strstr(key, "True") != NULL);
    } else if (!strcmp(key, "rloo") || !strcmp(key, "reinforce_plus_plus_baseline")) {
        a = call(calls, !strcmp(key, "rloo") ? "rloo_outcome_advantage" : "reinforce_plus_plus_baseline_outcome_advantage");
        a_str(a, "token_level_rewards", "token_level_rewards"); a_str(a, "response_mask", "response_mask");
        a_str(a, "index", "index");
    } else if (!strncmp(key, "reinforce_plus_plus(", 20)) {
        a = call(calls, "reinforce_plus_plus_outcome_advantage");
        a_str(a, "token_level_rewards", "token_level_rewards"); a_str(a, "response_mask", "response_mask");
        a_num(a, "gamma", 1.0);
    } else if (!strncmp(key, "remax(", 6)) {
        a = call(calls, "remax_outcome_advantage");
        a_str(a, "token_level_rewards", "token_level_rewards"); a_str(a, "response_mask", "response_mask");
        cJSON *bl = cJSON_AddArrayToObject(a, "reward_baselines");
        for (int i = 0; i < 8; i++) cJSON_AddItemToArray(bl, cJSON_CreateNumber(0.4));
    } else if (!strncmp(key, "agg_loss(", 9)) {
        a = call(calls, "agg_loss");
        a_str(a, "loss_mat", "advantages"); a_str(a, "loss_mask", "response_mask"); a_str(a, "loss_agg_mode", mode);
    } else if (!strncmp(key, "policy_loss_vanilla(", 20)) {
        a = call(calls, "policy_loss_vanilla");
        a_str(a, "old_log_prob", "old_log_prob"); a_str(a, "log_prob", "log_prob"); a_str(a, "advantages", "advantages");
        a_str(a, "response_mask", "response_mask"); a_str(a, "loss_agg_mode", mode);
        a_num(a, "clip_ratio", 0.2); a_num(a, "clip_ratio_low", 0.2); a_num(a, "clip_ratio_high", 0.28);
        a_num(a, "clip_ratio_c", 3.0);
    } else if (!strncmp(key, "entropy_loss(", 13)) {
        a = call(calls, "entropy_loss");
        a_str(a, "logits", "logits"); a_str(a, "response_mask", "response_mask"); a_str(a, "loss_agg_mode", mode);
    } else if (!strncmp(key, "value_loss(", 11)) {
        a = call(calls, "value_loss");
        a_str(a, "vpreds", "vpreds"); a_str(a, "returns", "returns"); a_str(a, "values", "values");
        a_str(a, "response_mask", "response_mask"); a_num(a, "cliprange_value", 0.5); a_str(a, "loss_agg_mode", mode);
    } else if (!strncmp(key, "kl_penalty(", 11)) {
        a = call(calls, "kl_penalty");
        a_str(a, "logprob", "log_prob"); a_str(a, "ref_logprob", "ref_log_prob"); a_str(a, "kl_penalty", mode);
    } else if (!strncmp(key, "compute_rewards(", 16)) {
        a = call(calls, "rewards");
        a_str(a, "token_level_scores", "token_level_rewards"); a_str(a, "old_log_prob", "old_log_prob");
        a_str(a, "ref_log_prob", "ref_log_prob"); a_num(a, "kl_ratio", 0.1);
    } else if (!strcmp(key, "masked_whiten(adv)")) {
        a = call(calls, "masked_whiten");
        a_str(a, "values", "advantages"); a_str(a, "mask", "response_mask");
    } else if (!strcmp(key, "entropy_from_logits")) {
        a = call(calls, "entropy_from_logits");
        a_str(a, "logits", "logits");
    } else return 0;
    return 1;
}

/* Runs `verlc algos path`, returns its stdout (caller frees) and exit status. */
static char *run_algos(const char *path, int *rc) {
    const char *bin = getenv("VERLC_BIN");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s algos %s 2>/tmp/verlc_algos_err_%d.txt", bin ? bin : "build/verlc", path, (int)getpid());
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 2) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int s = pclose(f);
    *rc = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
    return buf;
}

static char *read_err(void) {
    char path[64], *t = NULL;
    size_t n;
    snprintf(path, sizeof path, "/tmp/verlc_algos_err_%d.txt", (int)getpid());
    if (vc_read_file(path, &t, &n)) return vc_strdup("");
    unlink(path);
    return t;
}

static void write_tmp(const char *text, char *path) {
    strcpy(path, "/tmp/verlc_algos_XXXXXX");
    int fd = mkstemp(path);
    close(fd);
    vc_write_file_atomic(path, text, strlen(text));
}

/* An error case: exit status 1 and a one-line message containing `needle`. */
static void expect_error(const char *doc, const char *needle) {
    char path[64];
    int rc;
    write_tmp(doc, path);
    char *out = run_algos(path, &rc), *err = read_err();
    CHECK_MSG(rc == 1, "expected exit 1, got %d for %s", rc, doc);
    CHECK_MSG(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    CHECK_MSG(strchr(err, '\n') == err + strlen(err) - 1, "message is not one line: %s", err);
    free(out); free(err);
    unlink(path);
}

int main(void) {
    char ref_path[512], *text;
    size_t len;
    snprintf(ref_path, sizeof ref_path, "%s/fixtures/verl/core_algos_reference.json", vc_test_shared());
    CHECK_OK(vc_read_file(ref_path, &text, &len));
    if (!text) return vc_test_done();
    cJSON *ref = cJSON_Parse(text);
    free(text);
    cJSON *outputs = cJSON_GetObjectItem(ref, "outputs");
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddItemToObject(doc, "inputs", cJSON_Duplicate(cJSON_GetObjectItem(ref, "inputs"), 1));
    cJSON *calls = cJSON_AddArrayToObject(doc, "calls");
    int n_keys = 0;
    for (cJSON *o = outputs->child; o; o = o->next, n_keys++) CHECK_MSG(build(calls, o->string), "unmapped output %s", o->string);
    char *calls_text = cJSON_PrintUnformatted(doc), path[64];
    write_tmp(calls_text, path);
    int rc;
    char *out = run_algos(path, &rc), *err = read_err();
    CHECK_MSG(rc == 0, "verlc algos failed (%d): %s", rc, err);
    cJSON *res = cJSON_Parse(out ? out : "");
    cJSON *results = cJSON_GetObjectItem(res, "results");
    CHECK(cJSON_GetArraySize(results) == n_keys);
    cJSON *r = results ? results->child : NULL;
    for (cJSON *o = outputs->child; o && r; o = o->next, r = r->next) compare(r, o, o->string);
    printf("reference: %d/%d values match within 1e-5 over %d functions\n", n_match, n_values, n_keys);
    CHECK(n_values > 0 && n_match == n_values);
    cJSON_Delete(res); free(out); free(err); free(calls_text); cJSON_Delete(doc); cJSON_Delete(ref);
    unlink(path);

    expect_error("{\"inputs\":{},\"calls\":[{\"fn\":\"frobnicate\",\"args\":{}}]}", "frobnicate");
    expect_error("{\"inputs\":{\"x\":[1,2]},\"calls\":[{\"fn\":\"masked_whiten\",\"args\":{\"values\":\"x\","
                 "\"mask\":\"x\",\"bogus_arg\":1}}]}", "bogus_arg");
    expect_error("{\"inputs\":{\"x\":[1,2]},\"calls\":[{\"fn\":\"masked_whiten\",\"args\":{\"values\":\"x\","
                 "\"mask\":\"nope\"}}]}", "nope");
    expect_error("{\"inputs\":{\"x\":[1,2],\"m\":[1,0]},\"calls\":[{\"fn\":\"masked_whiten\",\"args\":"
                 "{\"values\":\"x\",\"mask\":\"m\"}}]}", "sum of the mask is one");
    expect_error("{\"inputs\":{\"x\":[1,2],\"m\":[1,1]},\"calls\":[{\"fn\":\"agg_loss\",\"args\":"
                 "{\"loss_mat\":\"x\",\"loss_mask\":\"m\",\"loss_agg_mode\":\"token-max\"}}]}", "token-max");
    expect_error("{\"inputs\":{\"x\":[1,2]},\"calls\":[{\"fn\":\"kl_penalty\",\"args\":"
                 "{\"logprob\":\"x\",\"ref_logprob\":\"x\",\"kl_penalty\":\"k9\"}}]}", "k9");
    expect_error("not json", "invalid JSON");
    return vc_test_done();
}
