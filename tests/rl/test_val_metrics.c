/* Golden test of verl's validation metrics (mean@n, std@n, bootstrap best@k / worst@k / maj@k with
 * numpy's seeded draws, the average over prompts, val-core / val-aux naming) against verl's own
 * functions run on the same samples (tests/fixtures/rl/val_metrics_reference.json, made by
 * tools/fixtures/make_val_metrics_ref.py): one response per prompt, n = 6 over two sources, math_dapo's
 * votes with ties and an invalid prediction, a custom program's numbers without acc, n = 16. Every
 * metric verl reports must be there with its value, and no other. */
#include "../../src/rl/trainer_internal.h"
#include "verlc/json.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void run_case(const cJSON *c) {
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *js = cJSON_GetObjectItem(c, "samples"), *want = cJSON_GetObjectItem(c, "metrics");
    int n = cJSON_GetArraySize(js), i = 0;
    rl_val_sample *s = calloc((size_t)n, sizeof *s);
    for (const cJSON *e = js->child; e; e = e->next, i++)
        s[i] = (rl_val_sample){ cJSON_GetObjectItem(e, "data_source")->valuestring,
                                (uint64_t)cJSON_GetObjectItem(e, "uid")->valuedouble,
                                cJSON_GetObjectItem(e, "reward")->valuedouble, cJSON_GetObjectItem(e, "info") };
    rl_metrics met = { 0 };
    CHECK_OK(rl_val_metrics(NULL, s, n, &met));
    int found = 0;
    double worst = 0;
    for (const cJSON *w = want->child; w; w = w->next) {
        double v = NAN;
        int have = rl_metrics_get(&met, w->string, &v);
        CHECK_MSG(have, "%s: %s missing", name, w->string);
        found += have;
        if (have) worst = fmax(worst, fabs(v - w->valuedouble));
        CHECK_MSG(!have || fabs(v - w->valuedouble) < 1e-9, "%s: %s = %.12g, verl %.12g", name, w->string, v,
                  w->valuedouble);
    }
    CHECK_MSG(met.n == cJSON_GetArraySize(want), "%s: %d metrics, verl %d", name, met.n, cJSON_GetArraySize(want));
    printf("%-32s %3d metrics as verl's, max difference %.1e\n", name, found, worst);
    rl_metrics_free(&met);
    free(s);
}

int main(void) {
    cJSON *ref = NULL;
    vc_json_load_file("tests/fixtures/rl/val_metrics_reference.json", &ref);
    CHECK_MSG(ref != NULL, "tests/fixtures/rl/val_metrics_reference.json: missing or not JSON");
    if (!ref) return vc_test_done();
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(ref, "cases")->child; c; c = c->next, n++) run_case(c);
    CHECK(n == 5);
    cJSON_Delete(ref);
    return vc_test_done();
}
