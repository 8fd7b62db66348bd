/* verlc eval key=value ...: verl's offline evaluation (python -m verl.trainer.main_eval, config evaluation.yaml) of a
 * file of generated responses: each row's responses (data.response_key, a list of strings or one string) scored
 * against its reward_model.ground_truth by custom_reward_function.path's function (or, without one, verl's
 * default_compute_score by data source, which main_eval itself lacks), a row's score the mean over its responses,
 * and the mean over each data source's rows printed as main_eval prints its dict:
 * {'test_score/openai/gsm8k': 0.75}. Rows come from Parquet or JSONL. */
#include "cli.h"
#include "verlc/core.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path, *response_key, *source_key, *rm_key, *fn_path, *fn_name;
} eval_args;

static int usage(void) {
    fprintf(stderr, "usage: verlc eval data.path=FILE [data.response_key=responses] [data.data_source_key=data_source]\n"
                    "  [data.reward_model_key=reward_model] [custom_reward_function.path=FILE.py "
                    "custom_reward_function.name=compute_score]\n"
                    "verl's main_eval: each row's responses scored against reward_model.ground_truth; prints the mean "
                    "per data source\n");
    return 2;
}

/* verl's evaluation.yaml keys (Hydra's + / ++ taken); ray_kwargs and data.prompt_key are read by nobody here */
static int parse(int argc, char **argv, eval_args *a) {
    *a = (eval_args){ NULL, "responses", "data_source", "reward_model", NULL, "compute_score" };
    static const char *const KEYS[] = { "data.path", "data.response_key", "data.data_source_key",
                                        "data.reward_model_key", "custom_reward_function.path",
                                        "custom_reward_function.name" };
    const char **field[] = { &a->path, &a->response_key, &a->source_key, &a->rm_key, &a->fn_path, &a->fn_name };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i] + strspn(argv[i], "+"), *eq = strchr(k, '=');
        if (!eq) return fprintf(stderr, "verlc eval: '%s' is not key=value\n", argv[i]), 0;
        size_t n = (size_t)(eq - k);
        const char *v = eq + 1, **slot = NULL;
        for (size_t j = 0; j < sizeof KEYS / sizeof *KEYS; j++)
            if (strlen(KEYS[j]) == n && !strncmp(k, KEYS[j], n)) slot = field[j];
        if (slot) *slot = strcmp(v, "null") ? v : NULL;
        else if (!(n == 15 && !strncmp(k, "data.prompt_key", 15)) && strncmp(k, "ray_kwargs.", 11) && strncmp(k, "data.use_shm", 12))
            return fprintf(stderr, "verlc eval: unknown key '%.*s' (verl's evaluation.yaml has data.path, "
                                   "data.response_key, data.data_source_key, data.reward_model_key, "
                                   "custom_reward_function.path and .name)\n", (int)n, k), 0;
    }
    if (!a->path) return fprintf(stderr, "verlc eval: data.path is required\n"), 0;
    return 1;
}

/* one response's score: the custom function's, or the built-in scorer of the row's data source */
static vc_status score_one(vc_reward_proc *proc, const char *source, const char *text, const cJSON *gt, double *score) {
    if (proc) return vc_reward_proc_score_v(proc, source, text, gt, NULL, score, NULL);
    char *g = cJSON_IsString(gt) ? NULL : cJSON_PrintUnformatted(gt);
    vc_status st = vc_reward_default(source, text, cJSON_IsString(gt) ? gt->valuestring : g ? g : "null", NULL, score);
    cJSON_free(g);
    return st;
}

typedef struct {
    char **name;
    double *sum;
    long *rows;
    int n;
} per_source;

static vc_status add(per_source *p, const char *source, double score) {
    int i = 0;
    while (i < p->n && strcmp(p->name[i], source)) i++;
    if (i == p->n) {
        char **nm = realloc(p->name, sizeof *nm * (size_t)(i + 1));
        double *s = nm ? realloc(p->sum, sizeof *s * (size_t)(i + 1)) : NULL;
        long *r = s ? realloc(p->rows, sizeof *r * (size_t)(i + 1)) : NULL;
        if (nm) p->name = nm;
        if (s) p->sum = s;
        if (r) p->rows = r;
        if (!r || !(p->name[i] = vc_strdup(source))) return VC_ERR_NOMEM;
        p->sum[i] = 0, p->rows[i] = 0, p->n++;
    }
    p->sum[i] += score, p->rows[i]++;
    return VC_OK;
}

/* row i: its responses' mean score into its data source's */
static vc_status eval_row(const vc_jsonl *d, size_t i, const eval_args *a, vc_reward_proc *proc, per_source *p) {
    const cJSON *row = d->rows[i], *src = cJSON_GetObjectItemCaseSensitive(row, a->source_key);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(row, a->response_key);
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, a->rm_key), "ground_truth");
    long line = (long)d->lines[i];
    if (!cJSON_IsString(src)) return vc_fail(VC_ERR_FORMAT, "%s:%ld: no string '%s'", d->path, line, a->source_key);
    if (!gt) return vc_fail(VC_ERR_FORMAT, "%s:%ld: no '%s.ground_truth'", d->path, line, a->rm_key);
    int n = cJSON_IsArray(res) ? cJSON_GetArraySize(res) : cJSON_IsString(res) ? 1 : -1;
    if (n <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s:%ld: '%s' is not a non-empty list of strings", d->path, line, a->response_key);
    double sum = 0;
    for (int k = 0; k < n; k++) {
        const cJSON *r = cJSON_IsArray(res) ? cJSON_GetArrayItem(res, k) : res;
        if (!cJSON_IsString(r))
            return vc_fail(VC_ERR_FORMAT, "%s:%ld: '%s' item %d is not a string", d->path, line, a->response_key, k);
        double s = 0;
        vc_status st = score_one(proc, src->valuestring, r->valuestring, gt, &s);
        if (st) return vc_fail_ctx(st, "%s:%ld, response %d", d->path, line, k);
        sum += s;
    }
    return add(p, src->valuestring, sum / n);
}

/* a float as Python's repr writes it (the shortest digits that read back the same) */
static void py_float(double v, char *buf, size_t cap) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eni")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

int vc_cmd_eval(int argc, char **argv) {
    eval_args a;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage();
    if (!parse(argc, argv, &a)) return 2;
    vc_jsonl *d = NULL;
    vc_reward_proc *proc = NULL;
    per_source p = { 0 };
    vc_status st = vc_jsonl_read(a.path, VC_JSONL_STRICT, &d);
    if (!st && a.fn_path)
        st = vc_reward_path_is_python(a.fn_path) ? vc_reward_py_start(a.fn_path, a.fn_name, NULL, 0, 300000, &proc)
                                                : vc_fail(VC_ERR_ARG, "custom_reward_function.path=%s: main_eval takes a "
                                                          "Python file", a.fn_path);
    for (size_t i = 0; !st && i < d->n_rows; i++) st = eval_row(d, i, &a, proc, &p);
    if (!st) {
        printf("{");
        for (int i = 0; i < p.n; i++) {
            char num[40];
            py_float(p.sum[i] / (double)p.rows[i], num, sizeof num);
            printf("%s'test_score/%s': %s", i ? ", " : "", p.name[i], num);
        }
        printf("}\n");
    } else fprintf(stderr, "verlc eval: %s\n", vc_last_error());
    for (int i = 0; i < p.n; i++) free(p.name[i]);
    free(p.name), free(p.sum), free(p.rows);
    if (proc) vc_reward_proc_close(proc);
    vc_jsonl_free(d);
    return st ? 1 : 0;
}
