/* verl's hiyouga/geometry3k reward (verl/utils/reward_score/geo3k.py) over mathruler 0.1.0's grader
 * (grade_prm800k.c): the last \boxed{} content graded against the ground truth, 0.9 of the score, plus 0.1 for the
 * <think>...</think>...\boxed{} format. */
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <stdlib.h>
#include <string.h>

char *vc_mathruler_boxed(const char *text) {
    const char *start = NULL;
    for (const char *q = strstr(text, "\\boxed{"); q; q = strstr(q + 1, "\\boxed{")) start = q;
    if (start) {
        const char *c = start + 7;
        int depth = 0;
        for (const char *p = c; *p; p++) {
            if (*p == '{') depth++;
            else if (*p == '}' && --depth == -1) {
                char *raw = vc_rs_ndup(c, (size_t)(p - c)), *r = raw ? vc_rs_py_strip(raw) : NULL;
                free(raw);
                return r;
            }
        }
    }
    return vc_strdup("None");
}

/* re.fullmatch(r"<think>.*</think>.*\\boxed\{.*\}.*", s, re.DOTALL) */
static int think_boxed_format(const char *s) {
    if (strncmp(s, "<think>", 7)) return 0;
    const char *e = strstr(s + 7, "</think>");
    const char *b = e ? strstr(e + 8, "\\boxed{") : NULL;
    return b && strchr(b + 7, '}');
}

vc_status vc_reward_geo3k(const char *solution, const char *ground_truth, double *score) {
    vc_status st = score ? vc_rs_check_texts("geo3k reward", solution, ground_truth)
                         : vc_fail(VC_ERR_ARG, "geo3k reward: no score to write");
    if (st) return st;
    char *answer = vc_mathruler_boxed(solution);
    if (!answer) return VC_ERR_NOMEM;
    double acc = vc_mathruler_grade(answer, ground_truth) ? 1.0 : 0.0, fmt = think_boxed_format(solution) ? 1.0 : 0.0;
    free(answer);
    const double format_score = 0.1;
    *score = (1.0 - format_score) * acc + format_score * fmt;
    return VC_OK;
}
