/* lmms-lab/multimodal-open-r1-8k-verified to verl's image rows, as verl's examples/data_preprocess/openr1mm.py makes
 * them: datasets' train_test_split(test_size=0.1, seed=42) of the rows (numpy's default_rng(42).permutation), each
 * image kept as its {bytes, path} record. */
#include "verlc/data.h"
#include "data/rows.h"
#include "verlc/json.h"
#include "verlc/report.h"
#include "verlc/rng.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OPENR1MM_SOURCE "lmms-lab/multimodal-open-r1-8k-verified"
#define OPENR1MM_INSTRUCTION                                                                                        \
    "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. The " \
    "reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE enclosed within "   \
    "<answer> </answer> tags."

void vc_hf_split_sizes(size_t n, double test_size, size_t *n_train, size_t *n_test) {
    double t = ceil(test_size * (double)n); /* (datasets: ceil(test_size * n_samples), the rest for training) */
    *n_test = t > (double)n ? n : (size_t)t;
    *n_train = n - *n_test;
}

/* the script's process_fn of raw (the split's index-th row): the row verl writes, its selected columns */
static vc_status make_row(const cJSON *raw, const char *split, size_t index, const char *where, cJSON **out) {
    const char *problem, *solution;
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(raw, "image");
    vc_status st;
    if ((st = vc_row_text(raw, "problem", where, &problem)) || (st = vc_row_text(raw, "solution", where, &solution)))
        return st;
    if (!img) return vc_fail(VC_ERR_FORMAT, "%s: `image` is missing", where);
    cJSON *row = cJSON_CreateObject(), *images = NULL, *rm = NULL, *extra = NULL;
    cJSON *prompt = row && cJSON_AddStringToObject(row, "data_source", OPENR1MM_SOURCE) ? cJSON_AddArrayToObject(row, "prompt") : NULL;
    int ok = vc_row_message(prompt, "user", "<image>\n", problem, "\n\n", OPENR1MM_INSTRUCTION) &&
             (images = cJSON_AddArrayToObject(row, "images")) && cJSON_AddItemToArray(images, cJSON_Duplicate(img, 1)) &&
             cJSON_AddStringToObject(row, "ability", "math") && (rm = cJSON_AddObjectToObject(row, "reward_model")) &&
             cJSON_AddStringToObject(rm, "style", "rule") && cJSON_AddStringToObject(rm, "ground_truth", solution) &&
             (extra = cJSON_AddObjectToObject(row, "extra_info")) && cJSON_AddStringToObject(extra, "split", split) &&
             cJSON_AddNumberToObject(extra, "index", (double)index) &&
             cJSON_AddStringToObject(extra, "question", problem) && cJSON_AddStringToObject(extra, "answer", solution);
    if (!ok) {
        cJSON_Delete(row);
        return vc_fail(VC_ERR_NOMEM, "%s: out of memory", where);
    }
    *out = row;
    return VC_OK;
}

vc_status vc_openr1mm_convert(const char *const *in_paths, int n_in, const char *out_dir, const char *ext, size_t n_rows[2]) {
    n_rows[0] = n_rows[1] = 0;
    vc_jsonl **d = calloc((size_t)n_in + 1, sizeof *d);
    vc_status st = d ? VC_OK : VC_ERR_NOMEM;
    size_t n = 0;
    for (int f = 0; !st && f < n_in; f++) /* (the shards in order: datasets' train split) */
        if (!(st = vc_jsonl_read(in_paths[f], VC_JSONL_STRICT, &d[f]))) n += d[f]->n_rows;
    size_t n_train = 0, n_test = 0;
    vc_hf_split_sizes(n, 0.1, &n_train, &n_test);
    if (!st && !n_train)
        st = vc_fail(VC_ERR_FORMAT, "%s: %zu rows leave no training rows after a 10%% test split", n_in ? in_paths[0] : "", n);
    int64_t *perm = st ? NULL : malloc(sizeof *perm * n);
    cJSON **rows = st ? NULL : calloc(n + 1, sizeof *rows);
    if (!st && (!perm || !rows)) st = vc_fail(VC_ERR_NOMEM, "out of memory for %zu rows", n);
    if (!st) {
        vc_np_pcg64 g;
        vc_np_pcg64_seed(&g, 42);
        vc_np_permutation(&g, n, perm); /* (test: its first n_test, train: the rest) */
    }
    for (size_t i = 0; !st && i < n; i++) {
        size_t src = (size_t)perm[i], f = 0;
        while (src >= d[f]->n_rows) src -= d[f++]->n_rows;
        char where[600];
        snprintf(where, sizeof where, "%s:%lld", d[f]->path, (long long)d[f]->lines[src]);
        int test = i < n_test;
        st = make_row(d[f]->rows[src], test ? "test" : "train", test ? i : i - n_test, where, &rows[i]);
    }
    for (int s = 0; !st && s < 2; s++) { /* (datasets' to_parquet: the images as the records they are) */
        char name[32];
        snprintf(name, sizeof name, "%s.%s", s ? "test" : "train", ext);
        char *path = vc_path_join(out_dir, name);
        st = !path ? VC_ERR_NOMEM : vc_mkdirs(out_dir);
        if (!st) st = vc_rows_write(path, s ? rows : rows + n_test, s ? n_test : n_train, 1, NULL, 0);
        free(path);
    }
    if (!st) n_rows[0] = n_train, n_rows[1] = n_test;
    for (size_t i = 0; rows && i < n; i++) cJSON_Delete(rows[i]);
    free(rows);
    free(perm);
    for (int f = 0; d && f < n_in; f++) vc_jsonl_free(d[f]);
    free(d);
    return st;
}
