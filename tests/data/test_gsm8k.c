#include "verlc/core.h"
#include "verlc/data.h"
#include "verlc/rng.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_extract(void) {
    char out[64];
    struct { const char *in, *want; } ok[] = {
        { "so 5+5=10\n#### 10", "10" },
        { "#### 1,000,000", "1000000" },
        { "#### -3.5 dollars", "-3.5" },
        { "#### x\n#### 7", "7" },       /* first place where the pattern matches */
        { "a #### 12.\n", "12." },       /* '.' belongs to the character class */
        { "#### 4,5 #### 6", "45" },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int r = vc_gsm8k_extract_solution(ok[i].in, out, sizeof out);
        CHECK_MSG(r && !strcmp(out, ok[i].want), "'%s' -> '%s'", ok[i].in, r ? out : "(none)");
    }
    CHECK(!vc_gsm8k_extract_solution("no answer", out, sizeof out));
    CHECK(!vc_gsm8k_extract_solution("####  5", out, sizeof out)); /* two spaces: no match */
    CHECK(!vc_gsm8k_extract_solution("#### -", out, sizeof out));
}

static void test_convert(void) {
    char in[512], dir[] = "/tmp/vc_gsm8k_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *out = vc_path_join(dir, "train.jsonl");
    snprintf(in, sizeof in, "%s/data/gsm8k/train.jsonl", vc_test_shared());
    size_t n = 0;
    CHECK_OK(vc_gsm8k_convert(in, out, "train", &n));
    CHECK(n == 7473);
    vc_jsonl *d = NULL;
    CHECK_OK(vc_jsonl_read(out, VC_JSONL_STRICT, &d));
    CHECK(d && d->n_rows == 7473);
    CHECK_OK(vc_verl_check(d, 1));
    vc_verl_row row;
    CHECK_OK(vc_verl_row_get(d, 0, &row));
    CHECK(!strcmp(row.data_source, "openai/gsm8k") && !strcmp(row.ability, "math"));
    CHECK(!strcmp(row.reward_style, "rule") && !strcmp(row.ground_truth, "72"));
    CHECK(row.n_prompt == 1 && !strcmp(row.prompt[0].role, "user"));
    CHECK(!strcmp(row.prompt[0].content,
                  "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                  "How many clips did Natalia sell altogether in April and May? Let's think step by step and output "
                  "the final answer after \"####\"."));
    CHECK(!strcmp(cJSON_GetObjectItem(row.extra_info, "split")->valuestring, "train"));
    vc_verl_row_clear(&row);
    /* every row: index matches, ground truth has no commas and is the text after "#### " */
    size_t good = 0;
    for (size_t i = 0; d && i < d->n_rows; i++) {
        vc_verl_row r;
        if (vc_verl_row_get(d, i, &r)) continue;
        const cJSON *idx = cJSON_GetObjectItem(r.extra_info, "index");
        const char *ans = cJSON_GetObjectItem(r.extra_info, "answer")->valuestring;
        const char *tail = strstr(ans, "#### ");
        good += idx && idx->valueint == (int)i && !strchr(r.ground_truth, ',') && tail &&
                strlen(r.ground_truth) > 0 && strstr(r.prompt[0].content, VC_GSM8K_INSTRUCTION);
        vc_verl_row_clear(&r);
    }
    CHECK_MSG(good == 7473, "%zu/7473 rows well-formed", good);
    /* a known row with a thousands separator: "#### 1,000"-style answers lose their commas */
    int seen_comma = 0;
    for (size_t i = 0; d && i < d->n_rows && !seen_comma; i++) {
        const char *ans = cJSON_GetObjectItem(cJSON_GetObjectItem(d->rows[i], "extra_info"), "answer")->valuestring;
        const char *t = strstr(ans, "#### ");
        if (t && strchr(t, ',')) {
            seen_comma = 1;
            vc_verl_row r;
            CHECK_OK(vc_verl_row_get(d, i, &r));
            char want[64];
            vc_gsm8k_extract_solution(ans, want, sizeof want);
            CHECK(!strcmp(r.ground_truth, want) && !strchr(want, ','));
            vc_verl_row_clear(&r);
        }
    }
    CHECK(seen_comma);
    /* --parquet: the same rows as verl's gsm8k.py writes them, read back equal */
    char *pq = vc_path_join(dir, "train.parquet");
    CHECK_OK(vc_gsm8k_convert(in, pq, "train", &n));
    vc_jsonl *p = NULL;
    CHECK_OK(vc_jsonl_read(pq, VC_JSONL_STRICT, &p));
    size_t same = 0;
    for (size_t i = 0; p && d && i < p->n_rows && i < d->n_rows; i++) same += cJSON_Compare(p->rows[i], d->rows[i], 1);
    CHECK_MSG(p && p->n_rows == 7473 && same == 7473, "%zu of 7473 rows the same through Parquet", same);
    vc_jsonl_free(p);
    unlink(pq);
    free(pq);
    vc_jsonl_free(d);
    unlink(out);

    /* a raw row without an answer is reported with file and line */
    char *bad = vc_path_join(dir, "bad.jsonl");
    FILE *f = fopen(bad, "w");
    fprintf(f, "{\"question\": \"q\", \"answer\": \"#### 1\"}\n\n{\"question\": \"q\"}\n");
    fclose(f);
    CHECK(vc_gsm8k_convert(bad, out, "train", &n) == VC_ERR_MISSING);
    CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:3: missing field answer") != NULL, "%s", vc_last_error());
    f = fopen(bad, "w");
    fprintf(f, "{\"question\": \"q\", \"answer\": \"no final answer\"}\n");
    fclose(f);
    CHECK(vc_gsm8k_convert(bad, out, "train", &n) == VC_ERR_FORMAT);
    CHECK(strstr(vc_last_error(), "bad.jsonl:1: answer has no final") != NULL);
    unlink(bad);
    free(bad);

    /* the CLI converts both splits */
    const char *bin = getenv("VERLC_BIN");
    if (bin) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s data gsm8k --input %s/data/gsm8k --out %s/cli > /dev/null", bin,
                 vc_test_shared(), dir);
        CHECK(system(cmd) == 0);
        snprintf(cmd, sizeof cmd, "%s/cli/test.jsonl", dir);
        CHECK_OK(vc_jsonl_read(cmd, 0, &d));
        CHECK(d && d->n_rows == 1319);
        if (d) {
            const char *split = NULL;
            CHECK_OK(vc_jsonl_string(d, 0, "extra_info.split", &split));
            CHECK(split && !strcmp(split, "test"));
        }
        vc_jsonl_free(d);
        unlink(cmd);
        snprintf(cmd, sizeof cmd, "%s/cli/train.jsonl", dir);
        unlink(cmd);
        snprintf(cmd, sizeof cmd, "%s/cli", dir);
        rmdir(cmd);
        snprintf(cmd, sizeof cmd, "%s data nosuch 2>/dev/null", bin);
        CHECK(system(cmd) != 0);
    }
    free(out);
    rmdir(dir);
}

/* rows of file a equal to file b's, their columns in the same order; how many (-1: unreadable) */
static long same_rows(const char *a_path, const char *b_path, size_t *n_a, size_t *n_b) {
    vc_jsonl *a = NULL, *b = NULL;
    CHECK_OK(vc_jsonl_read(a_path, VC_JSONL_STRICT, &a));
    CHECK_OK(vc_jsonl_read(b_path, VC_JSONL_STRICT, &b));
    long same = a && b ? 0 : -1;
    for (size_t i = 0; a && b && i < a->n_rows && i < b->n_rows; i++) {
        int eq = cJSON_Compare(a->rows[i], b->rows[i], 1);
        const cJSON *x = a->rows[i]->child, *y = b->rows[i]->child; /* (and the columns in verl's order) */
        for (; eq && x && y; x = x->next, y = y->next) eq = !strcmp(x->string, y->string);
        same += eq && !x && !y;
    }
    *n_a = a ? a->n_rows : 0, *n_b = b ? b->n_rows : 0;
    vc_jsonl_free(a);
    vc_jsonl_free(b);
    return same;
}

/* verl's gsm8k_multiturn_w_tool.py, gsm8k_tool_agent_loop.py, gsm8k_multiturn_sft.py and (verl until 2026-01)
 * gsm8k_multiturn_w_interaction.py on 4 GSM8K test rows
 * (tests/fixtures/gsm8k_forms: their Parquet files as verl wrote them, tools/fixtures/check_gsm8k_forms.py, which also
 * finds all 8,792 rows of GSM8K equal for every form): verlc's rows equal, in verl's column order */
static void test_forms(void) {
    char dir[] = "/tmp/vc_g8f_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static const struct { const char *name; vc_gsm8k_form form; } F[] = {
        { "gsm8k_multiturn_w_tool", VC_GSM8K_W_TOOL }, { "gsm8k_tool_agent_loop", VC_GSM8K_AGENT_LOOP },
        { "gsm8k_multiturn_sft", VC_GSM8K_SFT }, { "gsm8k_multiturn_w_interaction", VC_GSM8K_INTERACTION } };
    for (int i = 0; i < 4; i++) {
        char want[256], *out = vc_path_join(dir, "o.parquet");
        snprintf(want, sizeof want, "tests/fixtures/gsm8k_forms/%s.parquet", F[i].name);
        size_t n = 0, na = 0, nb = 0;
        CHECK_OK(vc_gsm8k_convert_form("tests/fixtures/gsm8k_forms/test.jsonl", out, "test", F[i].form, &n));
        long same = same_rows(out, want, &na, &nb);
        CHECK_MSG(n == 4 && na == 4 && nb == 4 && same == 4, "%s: %ld of %zu rows as verl's", F[i].name, same, nb);
        unlink(out);
        free(out);
    }
    rmdir(dir);
}

/* Geometry3K (tests/fixtures/geo3k, tools/fixtures/make_geo3k_fixture.py): the rows verl's geo3k.py made, images kept
 * in their column as {bytes, path}; the file written with datasets' Image feature in its `huggingface` metadata (the
 * reader takes them as images datasets decodes to PIL); a column named as images that holds none refused */
static void test_geo3k(void) {
    char dir[] = "/tmp/vc_geo3k_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static const char *splits[2] = { "train", "test" };
    for (int s = 0; s < 4; s++) { /* geo3k.py, then geo3k_multiturn_w_tool.py */
        char in[256], want[256], *out = vc_path_join(dir, "o.parquet");
        snprintf(in, sizeof in, "tests/fixtures/geo3k/hub/data/%s-00000-of-00001.parquet", splits[s % 2]);
        snprintf(want, sizeof want, "tests/fixtures/geo3k/verl%s/%s.parquet", s < 2 ? "" : "_tool", splits[s % 2]);
        size_t n = 0, na = 0, nb = 0;
        CHECK_OK(vc_geo3k_convert(in, out, splits[s % 2], s >= 2, &n));
        long same = same_rows(out, want, &na, &nb);
        CHECK_MSG(n == (s % 2 ? 2 : 3) && na == n && nb == n && same == (long)n, "geo3k %s (%s): %ld of %zu rows as verl's",
                  splits[s % 2], s < 2 ? "geo3k.py" : "with tools", same, n);
        vc_jsonl *d = NULL; /* read as verl's dataset reads it: the images as datasets' decoded PIL images */
        CHECK_OK(vc_jsonl_read(out, VC_JSONL_STRICT | VC_JSONL_HF_IMAGES, &d));
        const cJSON *im = d && d->n_rows ? cJSON_GetArrayItem(cJSON_GetObjectItem(d->rows[0], "images"), 0) : NULL;
        CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItem(im, "pil")), "the images column is not datasets' Image feature");
        vc_jsonl_free(d);
        unlink(out);
        free(out);
    }
    cJSON *row = cJSON_Parse("{\"images\": [\"a.png\"], \"x\": 1}");
    char *bad = vc_path_join(dir, "bad.parquet");
    static const char *const IMG[] = { "images" };
    CHECK(vc_parquet_write_hf(bad, &row, 1, IMG, 1) == VC_ERR_FORMAT && strstr(vc_last_error(), "'images' holds no images"));
    CHECK(access(bad, F_OK) != 0);
    cJSON_Delete(row);
    free(bad);
    rmdir(dir);
}

/* MATH-lighteval rows (tests/fixtures/math, tools/fixtures/make_math_fixture.py): the rows verl's math_dataset.py made
 * from them, column order included (nested and spaced \\boxed answers, the last one taken); the CLI from the Hugging
 * Face layout; a solution without a \\boxed answer named by file and row */
static void test_math(void) {
    char dir[] = "/tmp/vc_math_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static const char *splits[2] = { "train", "test" };
    for (int s = 0; s < 2; s++) {
        char in[256], want[256], *out = vc_path_join(dir, s ? "test.parquet" : "train.parquet");
        snprintf(in, sizeof in, "tests/fixtures/math/data/%s-00000-of-00001.parquet", splits[s]);
        snprintf(want, sizeof want, "tests/fixtures/math/verl/%s.parquet", splits[s]);
        size_t n = 0, na = 0, nb = 0;
        CHECK_OK(vc_math_convert(in, out, splits[s], &n));
        long same = same_rows(out, want, &na, &nb);
        CHECK_MSG(na == n && nb == n && same == (long)n && n > 0, "%s: %ld of %zu rows as verl's", splits[s], same, n);
        free(out);
    }
    char *bad = vc_path_join(dir, "bad.jsonl"), *out = vc_path_join(dir, "x.jsonl");
    FILE *f = fopen(bad, "w");
    fprintf(f, "{\"problem\": \"p\", \"solution\": \"\\\\boxed{1}\"}\n{\"problem\": \"q\", \"solution\": \"\\\\fbox{2}\"}\n");
    fclose(f);
    size_t n = 0;
    CHECK(vc_math_convert(bad, out, "train", &n) == VC_ERR_FORMAT);
    CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:2: solution has no final \\boxed{...} answer"), "%s", vc_last_error());
    const char *bin = getenv("VERLC_BIN");
    if (bin) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s data math --input tests/fixtures/math --out %s/cli --parquet > /dev/null", bin, dir);
        CHECK(system(cmd) == 0);
        snprintf(cmd, sizeof cmd, "%s/cli/test.parquet", dir);
        vc_jsonl *d = NULL;
        CHECK_OK(vc_jsonl_read(cmd, 0, &d));
        CHECK(d && d->n_rows == 3);
        vc_jsonl_free(d);
        snprintf(cmd, sizeof cmd, "rm -rf %s/cli", dir);
        CHECK(system(cmd) == 0);
    }
    unlink(bad);
    free(bad);
    free(out);
    rmdir(dir);
}

/* Dahoas/full-hh-rlhf (tests/fixtures/hh_rlhf, tools/fixtures/make_hh_rlhf_fixture.py): the sft, rm and rl files verl's
 * full_hh_rlhf.py made of 6 rows equal verlc's, in verl's column order (rl keeps the columns datasets' map kept); the
 * reward-model slices as datasets cuts train[:75%] and train[-25%:] of 1 to 40 rows; a row without its answer refused
 * naming the line and key */
static void test_hh_rlhf(void) {
    char dir[] = "/tmp/vc_hh_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *in = "tests/fixtures/hh_rlhf/hub/data/train-00000-of-00001.parquet";
    static const struct { vc_hh_split split; const char *file; size_t n; } F[] = {
        { VC_HH_SFT, "sft/train", 12 }, { VC_HH_RM, "rm/train", 4 }, { VC_HH_RM, "rm/test", 2 }, { VC_HH_RL, "rl/train", 6 } };
    for (int i = 0; i < 4; i++) {
        size_t n[2] = { 0, 0 }, na = 0, nb = 0;
        CHECK_OK(vc_hh_rlhf_convert(in, dir, F[i].split, "parquet", n));
        char got[256], want[256];
        snprintf(got, sizeof got, "%s/%s.parquet", dir, F[i].file);
        snprintf(want, sizeof want, "tests/fixtures/hh_rlhf/verl/%s.parquet", F[i].file);
        long same = same_rows(got, want, &na, &nb);
        CHECK_MSG(n[i == 2] == F[i].n && na == F[i].n && nb == F[i].n && same == (long)F[i].n,
                  "full_hh_rlhf %s: %ld of %zu rows as verl's (%zu written)", F[i].file, same, nb, n[i == 2]);
    }
    char *text = NULL;
    CHECK_OK(vc_read_file("tests/fixtures/hh_rlhf/slices.json", &text, NULL));
    cJSON *sl = text ? cJSON_Parse(text) : NULL;
    int checked = 0;
    for (const cJSON *e = sl ? sl->child : NULL; e; e = e->next, checked++) {
        size_t end, start, n = (size_t)atoi(e->string);
        vc_hh_rm_slices(n, &end, &start);
        CHECK_MSG(end == (size_t)cJSON_GetArrayItem(e, 0)->valueint && start == (size_t)cJSON_GetArrayItem(e, 1)->valueint,
                  "%zu rows: train[:75%%] ends at %zu, train[-25%%:] starts at %zu; datasets: %d, %d", n, end, start,
                  cJSON_GetArrayItem(e, 0)->valueint, cJSON_GetArrayItem(e, 1)->valueint);
    }
    CHECK(checked == 40);
    cJSON_Delete(sl);
    free(text);
    char *bad = vc_path_join(dir, "bad.jsonl");
    const char *rows = "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n"
                       "{\"prompt\": \"a\", \"chosen\": 3, \"rejected\": \"c\"}\n";
    CHECK_OK(vc_write_file_atomic(bad, rows, strlen(rows)));
    size_t n[2];
    CHECK(vc_hh_rlhf_convert(bad, dir, VC_HH_SFT, "jsonl", n) == VC_ERR_FORMAT);
    CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:2") && strstr(vc_last_error(), "`chosen` is not a string"), "%s",
              vc_last_error());
    CHECK(vc_hh_rlhf_convert(bad, dir, VC_HH_RL, "jsonl", n) == VC_ERR_FORMAT); /* (no response) */
    CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:1") && strstr(vc_last_error(), "`response` is missing"), "%s",
              vc_last_error());
    free(bad);
    const char *bin = getenv("VERLC_BIN");
    char cmd[1024];
    if (bin) { /* the CLI finds the hub layout's file; an unknown split is refused */
        snprintf(cmd, sizeof cmd, "%s data full_hh_rlhf --split rm --input tests/fixtures/hh_rlhf/hub --out %s/cli | "
                 "grep -q 'test: 2 rows' && test -s %s/cli/rm/train.jsonl", bin, dir, dir);
        CHECK(system(cmd) == 0);
        snprintf(cmd, sizeof cmd, "%s data full_hh_rlhf --split ppo --input tests/fixtures/hh_rlhf/hub --out %s/cli 2>&1 | "
                 "grep -q 'split ppo: not sft, rm or rl'", bin, dir);
        CHECK(system(cmd) == 0);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* Rowan/hellaswag (tests/fixtures/hellaswag, tools/fixtures/make_hellaswag_fixture.py): the rows verl's hellaswag.py
 * made (its preprocess() on WikiHow's brackets and [title] markers, capitalize's final sigma, U+0130 and title-case
 * digraph; rows without a label left out, the test split's all) equal verlc's; a bad label or missing context refused
 * naming the line and key */
static void test_hellaswag(void) {
    char dir[] = "/tmp/vc_hs_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static const struct { const char *split; size_t n; } F[] = { { "train", 5 }, { "validation", 3 }, { "test", 0 } };
    for (int i = 0; i < 3; i++) {
        char in[256], want[256], *out = vc_path_join(dir, "o.parquet");
        snprintf(in, sizeof in, "tests/fixtures/hellaswag/hub/data/%s-00000-of-00001.parquet", F[i].split);
        snprintf(want, sizeof want, "tests/fixtures/hellaswag/verl/%s.parquet", F[i].split);
        size_t n = 9, na = 9, nb = 9;
        CHECK_OK(vc_dataset_convert(VC_DS_HELLASWAG, 0, in, out, F[i].split, &n));
        long same = same_rows(out, want, &na, &nb);
        CHECK_MSG(n == F[i].n && na == n && nb == n && same == (long)n, "hellaswag %s: %ld of %zu rows as verl's (%zu)",
                  F[i].split, same, nb, n);
        unlink(out);
        free(out);
    }
    static const struct { const char *row, *msg; } BAD[] = {
        { "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"ctx_b\": \"c\", \"endings\": [\"d\"], \"label\": \"x1\"}",
          "`label` \"x1\" is not an integer" },
        { "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"endings\": [\"d\"], \"label\": \"1\"}", "`ctx_b` is missing" },
        { "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"ctx_b\": \"c\", \"endings\": \"d\", \"label\": \"1\"}",
          "`endings` is not a list" },
        { "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"ctx_b\": \"c\", \"endings\": [\"d\"], \"label\": 1}",
          "`label` is not a string" } };
    char *bad = vc_path_join(dir, "bad.jsonl"), *out = vc_path_join(dir, "o.jsonl");
    for (int i = 0; i < 4; i++) {
        char text[512];
        snprintf(text, sizeof text, "{\"label\": \"\"}\n%s\n", BAD[i].row);
        CHECK_OK(vc_write_file_atomic(bad, text, strlen(text)));
        size_t n;
        CHECK(vc_dataset_convert(VC_DS_HELLASWAG, 0, bad, out, "train", &n) == VC_ERR_FORMAT);
        CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:2") && strstr(vc_last_error(), BAD[i].msg), "%s", vc_last_error());
    }
    unlink(bad);
    free(bad);
    free(out);
    rmdir(dir);
}

/* verl's ReTool preprocessors (dapo_multiturn_w_tool.py; aime2024_multiturn_w_tool.py is the same code) on
 * DAPO-Math-17k-shaped rows (tests/fixtures/retool, tools/fixtures/make_retool_fixture.py): verlc's rows equal; rows
 * without an extra_info object or a ground truth refused naming the line */
static void test_retool(void) {
    char dir[] = "/tmp/vc_rt_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *out = vc_path_join(dir, "o.parquet"), *bad = vc_path_join(dir, "bad.jsonl");
    size_t n = 0, na = 0, nb = 0;
    CHECK_OK(vc_dataset_convert(VC_DS_RETOOL, 0, "tests/fixtures/retool/hub/data/dapo-math-17k.parquet", out, "train", &n));
    long same = same_rows(out, "tests/fixtures/retool/verl/train.parquet", &na, &nb);
    CHECK_MSG(n == 3 && na == 3 && nb == 3 && same == 3, "dapo_multiturn_w_tool: %ld of %zu rows as verl's", same, nb);
    static const char *const BAD[2][2] = { { "{\"reward_model\": {\"ground_truth\": \"1\"}, \"extra_info\": 3}",
                                             "`extra_info` is not an object" },
                                           { "{\"reward_model\": {}, \"extra_info\": {}}",
                                             "`reward_model.ground_truth` is missing" } };
    for (int i = 0; i < 2; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"reward_model\": {\"ground_truth\": 2}, \"extra_info\": {}}\n%s\n", BAD[i][0]);
        CHECK_OK(vc_write_file_atomic(bad, text, strlen(text)));
        CHECK(vc_dataset_convert(VC_DS_RETOOL, 0, bad, out, "train", &n) != VC_OK);
        CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:2") && strstr(vc_last_error(), BAD[i][1]), "%s", vc_last_error());
    }
    unlink(out);
    unlink(bad);
    free(out);
    free(bad);
    rmdir(dir);
}

/* verl's preprocess_search_r1_dataset.py on nq_hotpotqa_train-shaped rows (tests/fixtures/search_r1,
 * tools/fixtures/make_search_r1_fixture.py): verlc's rows equal, in pandas' columns and order; without a reward model the
 * golden answers are the ground truth; a data_source that is not a string refused naming the line */
static void test_search_r1(void) {
    char dir[] = "/tmp/vc_sr_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *out = vc_path_join(dir, "o.parquet"), *bad = vc_path_join(dir, "bad.jsonl");
    static const char *const SPLITS[2] = { "train", "test" };
    for (int s = 0; s < 2; s++) {
        char in[128], want[128];
        snprintf(in, sizeof in, "tests/fixtures/search_r1/hub/%s.parquet", SPLITS[s]);
        snprintf(want, sizeof want, "tests/fixtures/search_r1/verl/%s.parquet", SPLITS[s]);
        size_t n = 0, na = 0, nb = 0, want_n = s ? 2 : 4;
        CHECK_OK(vc_dataset_convert(VC_DS_SEARCH_R1, 0, in, out, SPLITS[s], &n));
        long same = same_rows(out, want, &na, &nb);
        CHECK_MSG(n == want_n && na == n && nb == n && same == (long)n, "search_r1 %s: %ld of %zu rows", SPLITS[s], same, nb);
    }
    cJSON *row = NULL, *raw = cJSON_Parse("{\"question\": \"q\", \"golden_answers\": [\"a\"], \"data_source\": \"nq\"}");
    CHECK_OK(vc_search_r1_make_row(raw, "train", 7, &row));
    char *text = row ? cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(row, "extra_info"), "tools_kwargs")) : NULL;
    CHECK_MSG(text && !strcmp(text, "{\"search\":{\"create_kwargs\":{\"ground_truth\":[\"a\"],\"question\":\"q\","
                                    "\"data_source\":\"searchR1_nq\"}}}"), "%s", text ? text : "(none)");
    free(text);
    cJSON_Delete(row);
    cJSON_Delete(raw);
    const char *rows = "{\"question\": \"q\", \"data_source\": \"nq\"}\n{\"question\": \"q\", \"data_source\": null}\n";
    CHECK_OK(vc_write_file_atomic(bad, rows, strlen(rows)));
    size_t n;
    CHECK(vc_dataset_convert(VC_DS_SEARCH_R1, 0, bad, out, "train", &n) == VC_ERR_FORMAT);
    CHECK_MSG(strstr(vc_last_error(), "bad.jsonl:2") && strstr(vc_last_error(), "`data_source` is not a string"), "%s",
              vc_last_error());
    unlink(out);
    unlink(bad);
    free(out);
    free(bad);
    rmdir(dir);
}

/* verl's openr1mm.py (tests/fixtures/openr1mm, tools/fixtures/make_openr1mm_fixture.py: 12 rows with PNG images):
 * datasets' train_test_split(test_size=0.1, seed=42) as numpy's default_rng permutation gives it, the rows equal to
 * verl's in both splits; numpy's permutations themselves; the test split ceil(0.1 n) rows; a single row (no training
 * rows) refused */
static void test_openr1mm(void) {
    static const int64_t P42[12] = { 0, 7, 6, 9, 11, 3, 5, 2, 4, 10, 1, 8 }; /* np.random.default_rng(42).permutation(12) */
    static const int64_t P7[40] = { 4, 0, 28, 20, 30, 10, 12, 32, 19, 9, 14, 22, 27, 38, 3, 24, 39, 26, 13, 17, /* (seed 7) */
                                    18, 36, 35, 37, 8, 7, 1, 33, 15, 29, 6, 16, 23, 25, 5, 2, 31, 34, 21, 11 };
    int64_t got[40];
    vc_np_pcg64 g;
    vc_np_pcg64_seed(&g, 42);
    vc_np_permutation(&g, 12, got);
    CHECK(!memcmp(got, P42, sizeof P42));
    vc_np_pcg64_seed(&g, 7);
    vc_np_permutation(&g, 40, got);
    CHECK(!memcmp(got, P7, sizeof P7));
    size_t tr, te;
    vc_hf_split_sizes(30, 0.1, &tr, &te);
    CHECK(tr == 27 && te == 3);
    vc_hf_split_sizes(31, 0.1, &tr, &te);
    CHECK(tr == 27 && te == 4);
    char dir[] = "/tmp/vc_o1_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *in = "tests/fixtures/openr1mm/hub/data/train-00000-of-00001.parquet";
    size_t n[2] = { 0, 0 };
    CHECK_OK(vc_openr1mm_convert(&in, 1, dir, "parquet", n));
    static const char *const SPLITS[2] = { "train", "test" };
    for (int s = 0; s < 2; s++) {
        char got_path[128], want[128];
        snprintf(got_path, sizeof got_path, "%s/%s.parquet", dir, SPLITS[s]);
        snprintf(want, sizeof want, "tests/fixtures/openr1mm/verl/%s.parquet", SPLITS[s]);
        size_t na = 0, nb = 0, want_n = s ? 2 : 10;
        long same = same_rows(got_path, want, &na, &nb);
        CHECK_MSG(n[s] == want_n && na == want_n && nb == want_n && same == (long)want_n, "openr1mm %s: %ld of %zu rows",
                  SPLITS[s], same, nb);
        unlink(got_path);
    }
    char *one = vc_path_join(dir, "one.jsonl");
    const char *row = "{\"image\": \"a.png\", \"problem\": \"p\", \"solution\": \"s\"}\n";
    CHECK_OK(vc_write_file_atomic(one, row, strlen(row)));
    CHECK(vc_openr1mm_convert((const char *const *)&one, 1, dir, "jsonl", n) == VC_ERR_FORMAT);
    CHECK_MSG(strstr(vc_last_error(), "no training rows"), "%s", vc_last_error());
    unlink(one);
    free(one);
    rmdir(dir);
}

int main(void) {
    test_openr1mm();
    test_search_r1();
    test_retool();
    test_hellaswag();
    test_hh_rlhf();
    test_math();
    test_forms();
    test_geo3k();
    if (!vc_test_have_shared()) return vc_test_done();
    test_extract();
    test_convert();
    return vc_test_done();
}
