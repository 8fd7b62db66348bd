/* verl's dataset row schema over a JSONL dataset. */
#include "verlc/data.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long line_of(const vc_jsonl *d, size_t i) { return (long long)d->lines[i]; }

static vc_status get_prompt(const vc_jsonl *d, size_t i, vc_verl_row *row) {
    const cJSON *p;
    vc_status st = vc_jsonl_field(d, i, "prompt", &p);
    if (st) return st;
    int n = cJSON_GetArraySize(p);
    if (!cJSON_IsArray(p) || n == 0)
        return vc_fail(VC_ERR_FORMAT, "%s:%lld: prompt must be a non-empty list of {role, content} messages",
                       d->path, line_of(d, i));
    row->prompt = vc_calloc((size_t)n, sizeof *row->prompt);
    if (!row->prompt) return VC_ERR_NOMEM;
    row->n_prompt = (size_t)n;
    int k = 0;
    for (const cJSON *m = p->child; m; m = m->next, k++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m))
            return vc_fail(VC_ERR_FORMAT, "%s:%lld: prompt[%d] must be a {role, content} object, got %s", d->path,
                           line_of(d, i), k, vc_json_type_name(m));
        if (!role || !content)
            return vc_fail(VC_ERR_MISSING, "%s:%lld: missing field prompt[%d].%s", d->path, line_of(d, i), k,
                           !role ? "role" : "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content))
            return vc_fail(VC_ERR_FORMAT, "%s:%lld: prompt[%d].%s must be a string, got %s", d->path, line_of(d, i), k,
                           !cJSON_IsString(role) ? "role" : "content",
                           vc_json_type_name(!cJSON_IsString(role) ? role : content));
        row->prompt[k].role = role->valuestring;
        row->prompt[k].content = content->valuestring;
    }
    return VC_OK;
}

static const char *opt_string(const vc_jsonl *d, size_t i, const char *path) {
    const cJSON *v = NULL;
    if (vc_jsonl_field(d, i, path, &v) != VC_OK) {
        vc_clear_error();
        return NULL;
    }
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Shortest text that reads back as the same double (as Python's repr would print it). */
static void print_number(double x, char *buf, size_t cap) {
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, cap, "%.0f", x);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

static vc_status get_ground_truth(const vc_jsonl *d, size_t i, vc_verl_row *row) {
    const cJSON *gt = NULL;
    if (vc_jsonl_field(d, i, "reward_model.ground_truth", &gt) != VC_OK) {
        vc_clear_error();
        return VC_OK;
    }
    row->ground_truth_json = gt;
    if (cJSON_IsString(gt)) {
        row->ground_truth = gt->valuestring;
    } else if (cJSON_IsNumber(gt)) {
        row->owned = vc_malloc(40);
        if (!row->owned) return VC_ERR_NOMEM;
        print_number(gt->valuedouble, row->owned, 40);
        row->ground_truth = row->owned;
    } else {
        row->owned = vc_json_print(gt, 0);
        if (!row->owned) return vc_fail(VC_ERR_NOMEM, "%s:%lld: out of memory", d->path, line_of(d, i));
        row->ground_truth = row->owned;
    }
    return VC_OK;
}

vc_status vc_verl_row_get(const vc_jsonl *d, size_t i, vc_verl_row *row) {
    memset(row, 0, sizeof *row);
    if (i >= d->n_rows) return vc_fail(VC_ERR_ARG, "%s: row %zu out of range (%zu rows)", d->path, i, d->n_rows);
    row->line = d->lines[i];
    vc_status st = vc_jsonl_string(d, i, "data_source", &row->data_source);
    if (!st) st = get_prompt(d, i, row);
    if (!st) st = get_ground_truth(d, i, row);
    if (st) {
        vc_verl_row_clear(row);
        return st;
    }
    row->ability = opt_string(d, i, "ability");
    row->reward_style = opt_string(d, i, "reward_model.style");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(d->rows[i], "extra_info");
    row->extra_info = cJSON_IsObject(extra) ? extra : NULL;
    return VC_OK;
}

void vc_verl_row_clear(vc_verl_row *row) {
    free(row->prompt);
    free(row->owned);
    memset(row, 0, sizeof *row);
}

vc_status vc_verl_check(const vc_jsonl *d, int need_ground_truth) {
    for (size_t i = 0; i < d->n_rows; i++) {
        vc_verl_row row;
        vc_status st = vc_verl_row_get(d, i, &row);
        if (st) return st;
        int missing = need_ground_truth && !row.ground_truth;
        vc_verl_row_clear(&row);
        if (missing)
            return vc_fail(VC_ERR_MISSING, "%s:%lld: missing field reward_model.ground_truth", d->path, line_of(d, i));
    }
    return VC_OK;
}
