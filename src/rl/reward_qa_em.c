/* Search-R1's exact-match QA reward (verl/utils/reward_score/search_r1_like_qa_em.py, data sources
 * searchR1_*): the last <answer>...</answer> of the response (stripped), normalised as SQuAD's
 * normalize_answer (lower case, ASCII punctuation removed, the words a / an / the removed, whitespace
 * runs joined by one space), compared with each golden answer normalised the same way. Python str
 * semantics on UTF-8; lower() is the simple Unicode lower-case mapping (utf8proc), which differs from
 * Python's full mapping only for a few characters such as U+0130. */
#include "rl/reward_str.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <oniguruma.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* lower case, without string.punctuation */
static char *lower_nopunct(const char *s) {
    size_t n = strlen(s);
    char *out = vc_malloc(4 * n + 1), *o = out;
    if (!out) return NULL;
    int32_t c;
    for (size_t k; *s; s += k) {
        k = vc_rs_next_cp(s, &c);
        if (c < 128 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", (char)c) && c) continue;
        o += utf8proc_encode_char(utf8proc_tolower(c), (utf8proc_uint8_t *)o);
    }
    *o = 0;
    return out;
}

/* " ".join(s.split()) */
static char *join_words(const char *s) {
    char *out = vc_malloc(strlen(s) + 1), *o = out;
    if (!out) return NULL;
    int32_t c;
    int gap = 0;
    for (size_t k; *s; s += k) {
        k = vc_rs_next_cp(s, &c);
        if (vc_rs_py_space(c)) {
            gap = o > out;
            continue;
        }
        if (gap) *o++ = ' ';
        gap = 0;
        memcpy(o, s, k);
        o += k;
    }
    *o = 0;
    return out;
}

char *vc_qa_normalize(const char *s) {
    char *a = lower_nopunct(s), *b = NULL, *c = NULL;
    regex_t *re = NULL;
    if (a && !vc_rs_re_compile("\\b(a|an|the)\\b", &re) && !vc_rs_re_sub(re, " ", a, &b)) c = join_words(b);
    vc_rs_re_free(re);
    free(a);
    free(b);
    return c;
}

/* the last non-overlapping <answer>(.*?)</answer> (DOTALL), stripped; NULL when there is none */
static char *last_answer(const char *s, int *found) {
    const char *best = NULL, *best_end = NULL;
    for (const char *p = strstr(s, "<answer>"), *q; p && (q = strstr(p + 8, "</answer>")); p = strstr(q + 9, "<answer>"))
        best = p + 8, best_end = q;
    *found = best != NULL;
    if (!best) return NULL;
    char *raw = vc_rs_ndup(best, (size_t)(best_end - best)), *out = raw ? vc_rs_py_strip(raw) : NULL;
    free(raw);
    return out;
}

vc_status vc_reward_qa_em(const char *solution, const char *ground_truth, double *score) {
    *score = 0;
    cJSON *gt = cJSON_Parse(ground_truth);
    if (cJSON_IsString(gt)) { /* a JSON object inside a JSON string */
        cJSON *in = cJSON_Parse(gt->valuestring);
        cJSON_Delete(gt);
        gt = in;
    }
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(gt, "target");
    if (!cJSON_IsString(target) && !cJSON_IsArray(target)) {
        cJSON_Delete(gt);
        return vc_fail(VC_ERR_FORMAT, "searchR1 reward: ground_truth needs {\"target\": answer or [answers]}");
    }
    int found = 0;
    char *ans = last_answer(solution, &found), *pred = ans ? vc_qa_normalize(ans) : NULL;
    vc_status st = found && !pred ? VC_ERR_NOMEM : VC_OK;
    int hit = 0;
    for (const cJSON *t = cJSON_IsArray(target) ? target->child : target; !st && pred && t && !hit;
         t = cJSON_IsArray(target) ? t->next : NULL) {
        if (!cJSON_IsString(t)) {
            st = vc_fail(VC_ERR_FORMAT, "searchR1 reward: a golden answer is not a string");
            break;
        }
        char *g = vc_qa_normalize(t->valuestring);
        if (!g) st = VC_ERR_NOMEM;
        else hit = !strcmp(g, pred);
        free(g);
    }
    /* more than 10 answer tags: a quarter of the score (verl's guard against repeated tags) */
    if (!st && hit)
        *score = vc_rs_count(solution, "<answer>") > 10 || vc_rs_count(solution, "</answer>") > 10 ? 0.25 : 1.0;
    free(ans);
    free(pred);
    cJSON_Delete(gt);
    return st;
}
