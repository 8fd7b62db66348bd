/* Rowan/hellaswag to verl's rows, as verl's examples/data_preprocess/hellaswag.py makes them: rows without a label
 * dropped, the context as one user message, the endings as a model reward's multiple choices. */
#include "verlc/data.h"
#include "data/rows.h"
#include "verlc/json.h"
#include "verlc/report.h"
#include "rl/reward_str.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* the script's preprocess(): strip, " [title]" -> ". ", every "[...]" (within a line) removed, "  " -> " "
 * (malloc'd; NULL: out of memory) */
static char *preprocess(const char *text, struct re_pattern_buffer *brackets) {
    char *a = vc_rs_py_strip(text), *b = a ? vc_rs_replace(a, " [title]", ". ") : NULL, *c = NULL;
    if (b && vc_rs_re_sub(brackets, "", b, &c)) c = NULL;
    char *d = c ? vc_rs_replace(c, "  ", " ") : NULL;
    free(a);
    free(b);
    free(c);
    return d;
}

/* Python's int() of a label: an optional sign and decimal digits between white space */
static int parse_label(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
    if (errno || end == s || *end || !((*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == ' ' ||
                                       (*s >= '\t' && *s <= '\r'))) return 0;
    *out = v;
    return 1;
}

/* the prompt, reward and extra_info of one labelled row, added to row (a copy of raw) */
static vc_status add_fields(cJSON *row, const cJSON *raw, const char *split, int64_t index, const char *where,
                            struct re_pattern_buffer *brackets) {
    const char *act, *a, *b, *label;
    vc_status st;
    if ((st = vc_row_text(raw, "activity_label", where, &act)) || (st = vc_row_text(raw, "ctx_a", where, &a)) ||
        (st = vc_row_text(raw, "ctx_b", where, &b)) || (st = vc_row_text(raw, "label", where, &label)))
        return st;
    long long gold;
    if (!parse_label(label, &gold)) return vc_fail(VC_ERR_FORMAT, "%s: `label` \"%s\" is not an integer", where, label);
    const cJSON *endings = cJSON_GetObjectItemCaseSensitive(raw, "endings"), *e;
    if (!cJSON_IsArray(endings)) return vc_fail(VC_ERR_FORMAT, "%s: `endings` is not a list", where);
    char *cap = vc_rs_py_case(b, 1), *ctx = cap ? vc_rs_cat(act, ": ", a, " ", cap, "") : NULL;
    char *query = ctx ? preprocess(ctx, brackets) : NULL;
    cJSON *prompt = cJSON_CreateArray(), *rm = cJSON_CreateObject(), *choices = NULL;
    int ok = query && vc_row_message(prompt, "user", query, NULL, NULL, NULL) && cJSON_AddStringToObject(rm, "style", "model") &&
             cJSON_AddStringToObject(rm, "eval", "multiple_choice") &&
             cJSON_AddNumberToObject(rm, "ground_truth", (double)gold) && (choices = cJSON_AddArrayToObject(rm, "choices"));
    free(cap);
    free(ctx);
    free(query);
    for (int i = 0; ok && (e = cJSON_GetArrayItem(endings, i)); i++) {
        if (!cJSON_IsString(e) || !vc_rs_valid_utf8(e->valuestring)) {
            cJSON_Delete(prompt);
            cJSON_Delete(rm);
            return vc_fail(VC_ERR_FORMAT, "%s: `endings` item %d is not a UTF-8 string", where, i);
        }
        char *p = preprocess(e->valuestring, brackets);
        ok = p && cJSON_AddItemToArray(choices, cJSON_CreateString(p));
        free(p);
    }
    /* (datasets' map: the returned keys after the row's own, in the script's order) */
    cJSON *extra = ok ? cJSON_CreateObject() : NULL;
    ok = extra && cJSON_AddStringToObject(extra, "split", split) && cJSON_AddNumberToObject(extra, "index", (double)index) &&
         cJSON_AddStringToObject(row, "data_source", "Rowan/hellaswag") && cJSON_AddItemToObject(row, "prompt", prompt);
    if (ok) prompt = NULL;
    ok = ok && cJSON_AddStringToObject(row, "ability", "nlp") && cJSON_AddItemToObject(row, "reward_model", rm);
    if (ok) rm = NULL;
    ok = ok && cJSON_AddItemToObject(row, "extra_info", extra);
    if (!ok) cJSON_Delete(extra);
    cJSON_Delete(prompt);
    cJSON_Delete(rm);
    return ok ? VC_OK : vc_fail(VC_ERR_NOMEM, "%s: out of memory", where);
}

vc_status vc_hellaswag_convert(const char *in_path, const char *out_path, const char *split, size_t *n_rows) {
    *n_rows = 0;
    vc_jsonl *d = NULL;
    struct re_pattern_buffer *brackets = NULL;
    vc_status st = vc_jsonl_read(in_path, VC_JSONL_STRICT, &d);
    if (!st) st = vc_rs_re_compile("\\[.*?\\]", &brackets);
    cJSON **rows = st ? NULL : calloc(d->n_rows + 1, sizeof *rows);
    if (!st && !rows) st = vc_fail(VC_ERR_NOMEM, "%s: out of memory", in_path);
    size_t n = 0;
    for (size_t i = 0; !st && i < d->n_rows; i++) {
        char where[600];
        snprintf(where, sizeof where, "%s:%lld", in_path, (long long)d->lines[i]);
        const cJSON *label = cJSON_GetObjectItemCaseSensitive(d->rows[i], "label");
        if (!cJSON_IsString(label)) {
            st = vc_fail(VC_ERR_FORMAT, "%s: `label` %s", where, label ? "is not a string" : "is missing");
            break;
        }
        if (!*label->valuestring) continue; /* (the script's filter: no label, as in the test split) */
        if (!(rows[n] = cJSON_Duplicate(d->rows[i], 1))) st = vc_fail(VC_ERR_NOMEM, "%s: out of memory", where);
        else st = add_fields(rows[n], d->rows[i], split, (int64_t)n, where, brackets);
        n++;
    }
    if (!st) st = vc_rows_write(out_path, rows, n, 1, NULL, 0); /* (datasets' to_parquet) */
    if (!st) *n_rows = n;
    for (size_t i = 0; rows && i < n; i++) cJSON_Delete(rows[i]);
    free(rows);
    vc_rs_re_free(brackets);
    vc_jsonl_free(d);
    return st;
}
