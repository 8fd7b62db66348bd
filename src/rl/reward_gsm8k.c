/* GSM8K reward (verl/utils/reward_score/gsm8k.py). */
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <stdlib.h>
#include <string.h>

enum { GSM8K_CLIP_CHARS = 300 };

static int numch(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

/* Length of a match of "-?[0-9.,]+" at p (0 if none). */
static size_t match_number(const char *p) {
    size_t i = (*p == '-') ? 1 : 0;
    size_t j = i;
    while (numch(p[j])) j++;
    return j > i ? j : 0;
}

/* The last 300 code points of s. */
static const char *clip_tail(const char *s) {
    size_t n = strlen(s), cps = vc_rs_cp_count(s, n);
    const char *p = s;
    while (cps > GSM8K_CLIP_CHARS) { p += vc_rs_u8len(p); cps--; }
    return p;
}

char *vc_gsm8k_extract(const char *solution, int flexible) {
    const char *s = clip_tail(solution), *best = NULL;
    size_t best_len = 0;
    if (!flexible) { /* re.findall("#### (\-?[0-9\.\,]+)"), the last one */
        for (const char *p = strstr(s, "#### "); p; p = strstr(p + 1, "#### ")) {
            size_t k = match_number(p + 5);
            if (k) { best = p + 5; best_len = k; }
        }
        if (!best) return NULL;
        char *raw = vc_rs_ndup(best, best_len), *a = raw ? vc_rs_replace(raw, ",", "") : NULL;
        char *b = a ? vc_rs_replace(a, "$", "") : NULL;
        free(raw);
        free(a);
        return b;
    }
    /* flexible: all matches of "(\-?[0-9\.\,]+)" scanning left to right; the last one that is not "" or
     * "."; when every match is invalid Python's loop variable ends on the first match. */
    const char *first = NULL;
    size_t first_len = 0;
    for (const char *p = s; *p;) {
        size_t k = match_number(p);
        if (!k) { p++; continue; }
        if (!first) { first = p; first_len = k; }
        if (!(k == 1 && *p == '.')) { best = p; best_len = k; }
        p += k;
    }
    if (!first) return NULL;
    return best ? vc_rs_ndup(best, best_len) : vc_rs_ndup(first, first_len);
}

double vc_reward_gsm8k(const char *solution, const char *ground_truth, int flexible, double format_score,
                       double score) {
    char *a = vc_gsm8k_extract(solution, flexible);
    if (!a) return 0.0;
    double r = !strcmp(a, ground_truth) ? score : format_score;
    free(a);
    return r;
}
