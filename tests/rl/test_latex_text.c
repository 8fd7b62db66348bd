/* LaTeX to text against pylatexenc 2.11's LatexNodes2Text().latex_to_text (the conversion mathruler's and prime_math's
 * graders run on answers): tests/fixtures/rl/latex_text_reference.json, made by tools/fixtures/make_latex_text_ref.py
 * (hand-picked answers and 2,500 random snippets of macros, groups, math, specials and environments). Every case must
 * give pylatexenc's text, or fail where pylatexenc raises. */
#include "../../src/rl/latex_text.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    cJSON *ref = NULL;
    vc_status st = vc_json_load_file("tests/fixtures/rl/latex_text_reference.json", &ref);
    CHECK_OK(st);
    if (st) return vc_test_done();
    int n = 0, same = 0, raised = 0;
    for (const cJSON *c = ref->child; c; c = c->next, n++) {
        const char *in = cJSON_GetArrayItem(c, 0)->valuestring;
        const cJSON *w = cJSON_GetArrayItem(c, 1);
        char *out = NULL;
        vc_status s = vc_latex_to_text(in, &out);
        int ok = cJSON_IsString(w) ? s == VC_OK && out && !strcmp(out, w->valuestring) : s == VC_ERR_FORMAT;
        raised += !cJSON_IsString(w);
        same += ok;
        CHECK_MSG(ok, "latex_to_text(\"%s\"): %s\"%s\", pylatexenc %s", in, s ? "raised " : "", out ? out : "",
                  cJSON_IsString(w) ? w->valuestring : "raises");
        free(out);
    }
    fprintf(stderr, "latex_to_text: %d of %d as pylatexenc (%d raise)\n", same, n, raised);
    CHECK(n >= 2500 && raised > 0);
    char *out = NULL;
    CHECK(vc_latex_to_text(NULL, &out) == VC_ERR_ARG && !out);
    /* found by fuzzing the graders: an accent over an accent whose argument is not UTF-8 (utf8proc's NFC refused it,
     * taken for an allocation failure, and the outer accent read a NULL argument) */
    static const char bad[] = "^\\c{\xd9*\xfe\xff\\c{\xd9*\":i";
    st = vc_latex_to_text(bad, &out);
    CHECK_MSG(st == VC_ERR_ARG && !out && strstr(vc_last_error(), "not UTF-8"), "not UTF-8: %d %s", st, vc_last_error());
    CHECK(vc_mathruler_grade(bad, "42") == 0);
    CHECK(vc_mathruler_grade("\\c{\\c{c}}", "\\c{\\c{c}}") == 1);
    cJSON_Delete(ref);
    return vc_test_done();
}
