/* Dahoas/full-hh-rlhf to verl's SFT, reward-model and RL rows, as verl's examples/data_preprocess/full_hh_rlhf.py
 * makes them (its three --split forms). */
#include "verlc/data.h"
#include "data/rows.h"
#include "verlc/json.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Python's round(): to the nearest, ties to even (the default rounding mode's nearbyint) */
static long long round_even(double x) {
    int mode = fegetround();
    fesetround(FE_TONEAREST);
    double r = nearbyint(x);
    fesetround(mode);
    return (long long)r;
}

void vc_hh_rm_slices(size_t n, size_t *train_end, size_t *test_start) {
    long long end = round_even(75.0 * (double)n / 100.0), start = round_even(-25.0 * (double)n / 100.0);
    if (start < 0) start += (long long)n; /* (-0 is 0: the whole set) */
    *train_end = end > (long long)n ? n : (size_t)end;
    *test_start = start < 0 ? 0 : (size_t)start;
}

/* a new object of the given string fields (NULL: out of memory) */
static cJSON *strings_row(const char *const *keys, const char *const *vals, int n) {
    cJSON *row = cJSON_CreateObject();
    for (int i = 0; row && i < n; i++)
        if (!cJSON_AddStringToObject(row, keys[i], vals[i])) {
            cJSON_Delete(row);
            return NULL;
        }
    return row;
}

/* the RL row: raw's columns but `response` in their order (prompt as a user message), then the script's new fields */
static cJSON *rl_row(const cJSON *raw, const char *prompt, const char *response, int64_t index) {
    cJSON *add = cJSON_CreateObject(), *row = cJSON_CreateObject();
    int ok = vc_row_message(cJSON_AddArrayToObject(add, "prompt"), "user", prompt, NULL, NULL, NULL) &&
             cJSON_AddStringToObject(add, "data_source", "Dahoas/full-hh-rlhf") &&
             cJSON_AddStringToObject(add, "ability", "alignment");
    cJSON *rm = ok ? cJSON_AddObjectToObject(add, "reward_model") : NULL;
    ok = rm && cJSON_AddStringToObject(rm, "style", "model") && cJSON_AddStringToObject(rm, "ground_truth", response);
    cJSON *extra = ok ? cJSON_AddObjectToObject(add, "extra_info") : NULL;
    ok = extra && cJSON_AddStringToObject(extra, "split", "train") && cJSON_AddNumberToObject(extra, "index", (double)index);
    for (const cJSON *c = raw->child; ok && row && c; c = c->next) { /* (datasets' map: returned keys update the row) */
        if (!c->string || !strcmp(c->string, "response")) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(add, c->string);
        ok = cJSON_AddItemToObject(row, c->string, cJSON_Duplicate(v ? v : c, 1));
    }
    for (const cJSON *c = add->child; ok && row && c; c = c->next)
        if (!cJSON_GetObjectItemCaseSensitive(raw, c->string))
            ok = cJSON_AddItemToObject(row, c->string, cJSON_Duplicate(c, 1));
    cJSON_Delete(add);
    if (!ok) cJSON_Delete(row);
    return ok ? row : NULL;
}

/* out_dir/sub/name.ext from rows[from, to) */
static vc_status write_part(const char *out_dir, const char *sub, const char *name, const char *ext, cJSON **rows,
                            size_t from, size_t to, int hf) {
    char file[64];
    snprintf(file, sizeof file, "%s/%s.%s", sub, name, ext);
    char *dir = vc_path_join(out_dir, sub), *path = vc_path_join(out_dir, file);
    vc_status st = !dir || !path ? vc_fail(VC_ERR_NOMEM, "out of memory") : vc_mkdirs(dir);
    if (!st) st = vc_rows_write(path, rows + from, to - from, hf, NULL, 0);
    free(dir);
    free(path);
    return st;
}

vc_status vc_hh_rlhf_convert(const char *in_path, const char *out_dir, vc_hh_split split, const char *ext,
                             size_t n_rows[2]) {
    n_rows[0] = n_rows[1] = 0;
    vc_jsonl *d = NULL;
    vc_status st = vc_jsonl_read(in_path, VC_JSONL_STRICT, &d);
    if (st) return st;
    size_t n = split == VC_HH_SFT ? 2 * d->n_rows : d->n_rows;
    cJSON **rows = calloc(n + 1, sizeof *rows);
    if (!rows) st = vc_fail(VC_ERR_NOMEM, "%s: out of memory", in_path);
    for (size_t i = 0; !st && i < d->n_rows; i++) {
        const cJSON *raw = d->rows[i];
        char where[600];
        snprintf(where, sizeof where, "%s:%lld", in_path, (long long)d->lines[i]);
        const char *p = NULL, *r = NULL, *ch = NULL, *rej = NULL;
        if ((st = vc_row_text(raw, "prompt", where, &p)) ||
            (st = split == VC_HH_RL ? vc_row_text(raw, "response", where, &r) : vc_row_text(raw, "chosen", where, &ch)) ||
            (split != VC_HH_RL && (st = vc_row_text(raw, "rejected", where, &rej))))
            break;
        if (split == VC_HH_SFT) {
            static const char *const K[2] = { "prompt", "response" };
            rows[2 * i] = strings_row(K, (const char *const[]){ p, ch }, 2);
            rows[2 * i + 1] = strings_row(K, (const char *const[]){ p, rej }, 2);
        } else if (split == VC_HH_RM) {
            static const char *const K[3] = { "prompt", "chosen", "rejected" };
            rows[i] = strings_row(K, (const char *const[]){ p, ch, rej }, 3);
        } else rows[i] = rl_row(raw, p, r, (int64_t)i);
        if (!rows[i] || (split == VC_HH_SFT && !rows[2 * i + 1])) st = vc_fail(VC_ERR_NOMEM, "%s: out of memory", in_path);
    }
    if (!st && split == VC_HH_SFT) { /* (pandas' to_parquet in verl's script) */
        st = write_part(out_dir, "sft", "train", ext, rows, 0, n, 0);
        n_rows[0] = n;
    } else if (!st && split == VC_HH_RM) {
        size_t end, start;
        vc_hh_rm_slices(n, &end, &start);
        st = write_part(out_dir, "rm", "train", ext, rows, 0, end, 0);
        if (!st) st = write_part(out_dir, "rm", "test", ext, rows, start, n, 0);
        n_rows[0] = end, n_rows[1] = n - start;
    } else if (!st) { /* (datasets' to_parquet) */
        st = write_part(out_dir, "rl", "train", ext, rows, 0, n, 1);
        n_rows[0] = n;
    }
    for (size_t i = 0; rows && i < n; i++) cJSON_Delete(rows[i]);
    free(rows);
    vc_jsonl_free(d);
    return st;
}
