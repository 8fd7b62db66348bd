/* verlc data: dataset conversion. */
#include "cli.h"
#include "verlc/json.h"
#include "verlc/core.h"
#include "verlc/data.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int usage(void) {
    fprintf(stderr, "usage: verlc data gsm8k|math|geo3k|geo3k_multiturn_w_tool|hellaswag --input DIR --out DIR [--parquet]\n"
                    "       verlc data dapo_multiturn_w_tool|aime2024_multiturn_w_tool|search_r1 --input DIR --out DIR [--parquet]\n"
                    "       verlc data gsm8k_multiturn_w_tool|gsm8k_tool_agent_loop|gsm8k_multiturn_sft|gsm8k_multiturn_w_interaction\n"
                    "                  --input DIR --out DIR "
                    "[--parquet]\n"
                    "       verlc data full_hh_rlhf --split sft|rm|rl --input DIR --out DIR [--parquet]\n"
                    "       verlc data openr1mm --input DIR --out DIR [--parquet]\n"
                    "       verlc data jsonl --input F.parquet|F.jsonl --out O.jsonl\n"
                    "       verlc data parquet --input F.jsonl|F.parquet --out O.parquet\n"
                    "  gsm8k / math: GSM8K ({question, answer}; DIR/train.jsonl, DIR/train.parquet or Hugging Face's\n"
                    "  DIR/main/train-00000-of-00001.parquet) or MATH-lighteval ({problem, solution, level, type};\n"
                    "  DIR/data/train-00000-of-00001.parquet) into verl's row schema, as verl's\n"
                    "  examples/data_preprocess/gsm8k.py and math_dataset.py make them, written as DIR/train.jsonl and\n"
                    "  test.jsonl (--parquet: train.parquet and test.parquet, as those scripts write them); the gsm8k_*\n"
                    "  forms as verl's scripts of those names make them (tool-calling prompts, agent loop, SFT messages,\n"
                    "  interaction_kwargs);\n"
                    "  geo3k: hiyouga/geometry3k ({images, problem, answer}; DIR/data/train-00000-of-00001.parquet) as\n"
                    "  geo3k.py makes it, the images written as Hugging Face datasets' Image feature\n"
                    "  hellaswag: Rowan/hellaswag (DIR/data/{train,validation,test}-00000-of-00001.parquet) as verl's\n"
                    "  hellaswag.py makes it: rows with a label, their endings as a model reward's choices\n"
                    "  dapo_multiturn_w_tool / aime2024_multiturn_w_tool: DAPO-Math-17k's or AIME-2024's rows (the one\n"
                    "  DIR/data/*.parquet) with the code interpreter's tool kwargs, as verl's ReTool scripts make them\n"
                    "  search_r1: PeterJinGo/nq_hotpotqa_train's DIR/{train,test}.parquet as verl's\n"
                    "  preprocess_search_r1_dataset.py makes them (the search tool's prompt and create_kwargs)\n"
                    "  openr1mm: lmms-lab/multimodal-open-r1-8k-verified (DIR/data/train-*.parquet) as verl's openr1mm.py\n"
                    "  splits and converts it: DIR/train and DIR/test (10%%, seed 42), the images kept as records\n"
                    "  full_hh_rlhf: Dahoas/full-hh-rlhf's train rows (DIR/data/train-00000-of-00001.parquet) as verl's\n"
                    "  full_hh_rlhf.py makes them: DIR/sft/train, DIR/rm/train and test (75%% and 25%%), or DIR/rl/train\n"
                    "  jsonl / parquet: the rows verlc reads from a Parquet or JSONL file, written as JSONL / Parquet\n");
    return 2;
}

/* the conversions' flags: --input DIR, --out DIR, --parquet and (split non-NULL) --split NAME; 0 when they parse and
 * name input and output, else usage's status */
typedef struct { const char *in, *out, *split; int parquet; } data_args;
static int parse_args(int argc, char **argv, data_args *a, int with_split) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--parquet")) a->parquet = 1;
        else if (!strcmp(argv[i], "--input") && i + 1 < argc) a->in = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) a->out = argv[++i];
        else if (with_split && !strcmp(argv[i], "--split") && i + 1 < argc) a->split = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage();
        else {
            fprintf(stderr, "verlc data %s: unknown argument '%s'\n", argv[0], argv[i]);
            return usage();
        }
    }
    return a->in && a->out ? 0 : usage();
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* DIR/hub/PREFIX*.parquet in name order (a Hugging Face dataset's shards) into *paths (free each and the array);
 * returns their count (0: none, or out of memory) */
static int hub_shards(const char *in, const char *hub, const char *prefix, char ***paths) {
    char *dir = vc_path_join(in, hub);
    DIR *d = dir ? opendir(dir) : NULL;
    int n = 0, ok = 1;
    *paths = NULL;
    for (struct dirent *e; ok && d && (e = readdir(d));) {
        size_t l = strlen(e->d_name), pl = strlen(prefix);
        if (strncmp(e->d_name, prefix, pl) || l < pl + 8 || strcmp(e->d_name + l - 8, ".parquet")) continue;
        char **grown = realloc(*paths, sizeof **paths * (size_t)(n + 1));
        if (grown) *paths = grown;
        if (!(ok = grown && (grown[n] = vc_path_join(dir, e->d_name)))) break;
        n++;
    }
    if (d) closedir(d);
    free(dir);
    if (!ok) {
        for (int i = 0; i < n; i++) free((*paths)[i]);
        n = 0;
    }
    if (n) qsort(*paths, (size_t)n, sizeof **paths, cmp_str);
    return n;
}

/* in's file of a split: JSONL, or Parquet as named by hand or in a Hugging Face dataset's layout (hub: its folder,
 * main/ in openai/gsm8k, data/ in DigitalLearningGmbH/MATH-lighteval, hiyouga/geometry3k, Dahoas/full-hh-rlhf); none
 * there: the JSONL name, for the message (NULL: out of memory) */
static char *source(const char *in, const char *hub, const char *split, int any_hub_file) {
    char name[96], *src = NULL;
    if (any_hub_file) { /* (DAPO-Math-17k's data/dapo-math-17k.parquet, AIME-2024's data/aime-2024.parquet: the one
                         * Parquet file in hub/, which datasets loads as the train split) */
        char **paths;
        int n = hub_shards(in, hub, "", &paths);
        for (int i = 1; i < n; i++) free(paths[i]);
        src = n ? paths[0] : NULL;
        free(paths);
        if (n == 1) return src;
        free(src);
        src = NULL;
    }
    for (int k = 0; k < 4; k++) {
        if (k == 2) snprintf(name, sizeof name, "%s/%s-00000-of-00001.parquet", hub, split);
        else snprintf(name, sizeof name, "%s.%s", split, k == 1 ? "parquet" : "jsonl");
        free(src);
        src = vc_path_join(in, name);
        if (k == 3 || (src && vc_file_exists(src))) break;
    }
    return src;
}

/* lmms-lab/multimodal-open-r1-8k-verified's train shards (DIR/data/train-*.parquet in name order, or one train file)
 * split and converted as verl's openr1mm.py does */
static int cmd_openr1mm(int argc, char **argv) {
    data_args a;
    int rc = parse_args(argc, argv, &a, 0);
    if (rc) return rc;
    const char *in = a.in, *out = a.out;
    int parquet = a.parquet;
    char **paths;
    int n = hub_shards(in, "data", "train-", &paths);
    if (!n && (paths = malloc(sizeof *paths)) && (paths[0] = source(in, "data", "train", 0))) n = 1;
    size_t rows[2] = { 0, 0 };
    const char *ext = parquet ? "parquet" : "jsonl";
    vc_status st = !n ? VC_ERR_NOMEM : vc_openr1mm_convert((const char *const *)paths, n, out, ext, rows);
    if (st) fprintf(stderr, "verlc data openr1mm: %s\n", vc_last_error());
    else printf("train: %zu rows -> %s/train.%s\ntest: %zu rows -> %s/test.%s\n", rows[0], out, ext, rows[1], out, ext);
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return st ? 1 : 0;
}

/* Dahoas/full-hh-rlhf's train rows in full_hh_rlhf.py's --split form (sft, rm or rl) */
static int cmd_hh_rlhf(int argc, char **argv) {
    data_args a;
    int rc = parse_args(argc, argv, &a, 1);
    if (rc) return rc;
    const char *in = a.in, *out = a.out, *split = a.split;
    int parquet = a.parquet;
    static const char *const NAMES[3] = { "sft", "rm", "rl" };
    int kind = -1;
    for (int k = 0; split && k < 3; k++)
        if (!strcmp(split, NAMES[k])) kind = k;
    if (kind < 0) {
        if (split) fprintf(stderr, "verlc data full_hh_rlhf: --split %s: not sft, rm or rl\n", split);
        else fprintf(stderr, "verlc data full_hh_rlhf: --split sft|rm|rl is required\n");
        return usage();
    }
    char *src = source(in, "data", "train", 0);
    size_t n[2] = { 0, 0 };
    vc_status st = !src ? VC_ERR_NOMEM : vc_hh_rlhf_convert(src, out, (vc_hh_split)kind, parquet ? "parquet" : "jsonl", n);
    if (st) fprintf(stderr, "verlc data full_hh_rlhf: %s\n", vc_last_error());
    else {
        printf("train: %zu rows -> %s/%s/train.%s\n", n[0], out, NAMES[kind], parquet ? "parquet" : "jsonl");
        if (kind == VC_HH_RM) printf("test: %zu rows -> %s/rm/test.%s\n", n[1], out, parquet ? "parquet" : "jsonl");
    }
    free(src);
    return st ? 1 : 0;
}

/* GSM8K, MATH or Geometry3K (in a verl script's variant) from their Hugging Face files or JSONL into verl's rows */
static int cmd_dataset(int argc, char **argv, vc_dataset ds, int variant) {
    data_args a;
    int rc = parse_args(argc, argv, &a, 0);
    if (rc) return rc;
    const char *in = a.in, *out = a.out, *name = argv[0];
    int parquet = a.parquet;
    if (vc_mkdirs(out)) { /* (its parents too) */
        fprintf(stderr, "verlc data %s: %s\n", name, vc_last_error());
        return 1;
    }
    const char *splits[3] = { "train", ds == VC_DS_HELLASWAG ? "validation" : "test", "test" };
    for (int s = 0; s < (ds == VC_DS_HELLASWAG ? 3 : ds == VC_DS_RETOOL ? 1 : 2); s++) {
        char file[32];
        snprintf(file, sizeof file, "%s.%s", splits[s], parquet ? "parquet" : "jsonl");
        /* JSONL, or Parquet as named by hand or in Hugging Face's openai/gsm8k (main/train-00000-of-00001.parquet),
         * DigitalLearningGmbH/MATH-lighteval or hiyouga/geometry3k (data/train-00000-of-00001.parquet) */
        char *src = source(in, ds != VC_DS_GSM8K ? "data" : "main", splits[s], ds == VC_DS_RETOOL);
        char *dst = vc_path_join(out, file);
        size_t n = 0;
        vc_status st = !src || !dst ? VC_ERR_NOMEM : vc_dataset_convert(ds, variant, src, dst, splits[s], &n);
        if (!st) printf("%s: %zu rows -> %s\n", splits[s], n, dst);
        free(src);
        free(dst);
        if (st) {
            fprintf(stderr, "verlc data %s: %s\n", name, vc_last_error());
            return 1;
        }
    }
    return 0;
}

/* the rows as verlc reads them (Parquet or JSONL), one JSON object per line, or (parquet) as a Parquet file */
static int cmd_convert(int argc, char **argv, int parquet) {
    const char *in = NULL, *out = NULL, *name = parquet ? "parquet" : "jsonl";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) in = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else return usage();
    }
    if (!in || !out) return usage();
    vc_jsonl *d = NULL;
    /* (as `verlc train` reads it; the Parquet file gets the rows as pandas reads them) */
    vc_status st = vc_jsonl_read(in, VC_JSONL_STRICT | (parquet ? 0 : VC_JSONL_HF_IMAGES), &d);
    vc_strbuf b = { 0 };
    for (size_t i = 0; !st && !parquet && i < d->n_rows; i++) {
        char *row = vc_json_print(d->rows[i], 0);
        if (row) vc_sb_puts(&b, row);
        vc_sb_puts(&b, "\n");
        if (!row || b.oom) st = vc_fail(VC_ERR_NOMEM, "out of memory at row %zu", i + 1);
        free(row);
    }
    if (!st) st = parquet ? vc_parquet_write(out, d->rows, d->n_rows) : vc_write_file_atomic(out, b.p ? b.p : "", b.n);
    if (!st) printf("%s: %zu rows -> %s\n", in, d->n_rows, out);
    else fprintf(stderr, "verlc data %s: %s\n", name, vc_last_error());
    free(b.p);
    vc_jsonl_free(d);
    return st ? 1 : 0;
}

int vc_cmd_data(int argc, char **argv) {
    if (argc < 2) return usage();
    static const struct { const char *name; vc_dataset ds; int variant; } SETS[] = { /* verl's scripts' names */
        { "gsm8k", VC_DS_GSM8K, VC_GSM8K_RL }, { "gsm8k_multiturn_w_tool", VC_DS_GSM8K, VC_GSM8K_W_TOOL },
        { "gsm8k_tool_agent_loop", VC_DS_GSM8K, VC_GSM8K_AGENT_LOOP }, { "gsm8k_multiturn_sft", VC_DS_GSM8K, VC_GSM8K_SFT },
        { "gsm8k_multiturn_w_interaction", VC_DS_GSM8K, VC_GSM8K_INTERACTION },
        { "math", VC_DS_MATH, 0 }, { "geo3k", VC_DS_GEO3K, 0 }, { "geo3k_multiturn_w_tool", VC_DS_GEO3K, 1 },
        { "hellaswag", VC_DS_HELLASWAG, 0 }, { "dapo_multiturn_w_tool", VC_DS_RETOOL, 0 },
        { "aime2024_multiturn_w_tool", VC_DS_RETOOL, 0 }, { "search_r1", VC_DS_SEARCH_R1, 0 } };
    for (size_t i = 0; i < sizeof SETS / sizeof SETS[0]; i++)
        if (!strcmp(argv[1], SETS[i].name)) return cmd_dataset(argc - 1, argv + 1, SETS[i].ds, SETS[i].variant);
    if (!strcmp(argv[1], "full_hh_rlhf")) return cmd_hh_rlhf(argc - 1, argv + 1);
    if (!strcmp(argv[1], "openr1mm")) return cmd_openr1mm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "jsonl")) return cmd_convert(argc - 1, argv + 1, 0);
    if (!strcmp(argv[1], "parquet")) return cmd_convert(argc - 1, argv + 1, 1);
    fprintf(stderr, "verlc data: unknown dataset '%s'\n", argv[1]);
    return usage();
}
