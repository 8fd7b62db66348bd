/* GSM8K, MATH and Geometry3K to verl's row schema, as verl's examples/data_preprocess/gsm8k.py (and its
 * multi-turn, tool-agent and SFT variants), math_dataset.py and geo3k.py do it. */
#include "verlc/data.h"
#include "verlc/json.h"
#include "verlc/report.h"
#include "verlc/reward.h"
#include "data/rows.h"
#include "rl/reward_str.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int solution_char(char ch) { return (ch >= '0' && ch <= '9') || ch == '.' || ch == ','; }

/* First match of the regex "#### (\-?[0-9\.\,]+)"; the capture is greedy. */
int vc_gsm8k_extract_solution(const char *answer, char *out, size_t cap) {
    for (const char *p = strstr(answer, "#### "); p; p = strstr(p + 1, "#### ")) {
        const char *q = p + 5, *start = q;
        if (*q == '-') q++;
        const char *digits = q;
        while (solution_char(*q)) q++;
        if (q == digits) continue;
        size_t n = 0;
        for (const char *r = start; r < q; r++)
            if (*r != ',') {
                if (n + 1 >= cap) return 0;
                out[n++] = *r;
            }
        out[n] = 0;
        return 1;
    }
    return 0;
}

/* gsm8k_multiturn_w_tool.py's system prompt */
static const char TOOL_SYSTEM[] =
    "You are a math expert. You are given a question and you need to solve it step by step. Reasoning step by step "
    "before any tool call. You should use the `calc_gsm8k_reward` tool after step by step solving the question, before "
    "generate final answer at least once and refine your answer if necessary. Put your final answer in the format of "
    "`#### <answer>`.";

/* gsm8k_multiturn_w_interaction.py's */
static const char INTERACTION_SYSTEM[] =
    "You are a math expert. You are given a question and you need to solve it step by step. You should rethinking "
    "carefully if user point out your answer is wrong. Put your final answer in the format of `#### <answer>`.";

/* extra_info's interaction_kwargs {name gsm8k, query: the user's message, ground_truth} (0: out of memory) */
static int interaction_kwargs(cJSON *extra, const char *question, const char *truth) {
    char *query = vc_rs_cat(question, " ", VC_GSM8K_TOOL_INSTRUCTION, NULL, NULL, NULL);
    cJSON *ik = query ? cJSON_AddObjectToObject(extra, "interaction_kwargs") : NULL;
    int ok = ik && cJSON_AddStringToObject(ik, "name", "gsm8k") && cJSON_AddStringToObject(ik, "query", query) &&
             cJSON_AddStringToObject(ik, "ground_truth", truth);
    free(query);
    return ok;
}

/* geo3k_multiturn_w_tool.py's (ending in a space, as verl's does) */
static const char GEO3K_TOOL_SYSTEM[] =
    "You are a math expert. You are given a question and you need to solve it step by step. Reasoning step by step "
    "before any tool call. You should use the `calc_geo3k_reward` tool after step by step solving the question, before "
    "generate final answer at least once and refine your answer if necessary. ";

/* extra_info's need_tools_kwargs and tools_kwargs.<tool>.create_kwargs.ground_truth (0: out of memory) */
static int tool_kwargs(cJSON *extra, const char *tool, const char *truth) {
    cJSON *tk = cJSON_AddBoolToObject(extra, "need_tools_kwargs", 1) ? cJSON_AddObjectToObject(extra, "tools_kwargs") : NULL;
    cJSON *ck = tk ? cJSON_AddObjectToObject(cJSON_AddObjectToObject(tk, tool), "create_kwargs") : NULL;
    return ck && cJSON_AddStringToObject(ck, "ground_truth", truth);
}

/* verl's fields onto row, in its order: data_source (agent_name where given), the prompt (a system message where
 * given, then question + " " + instruction as the user's), ability "math", the rule reward's ground truth, extra_info
 * with split and index (returned, NULL when out of memory) */
static cJSON *verl_fields_ex(cJSON *row, const char *source, const char *agent, const char *system, const char *question,
                             const char *instruction, const char *truth, const char *split, int64_t index) {
    if (!row || !cJSON_AddStringToObject(row, "data_source", source)) return NULL;
    if (agent && !cJSON_AddStringToObject(row, "agent_name", agent)) return NULL;
    cJSON *prompt = cJSON_AddArrayToObject(row, "prompt");
    if ((system && !vc_row_message(prompt, "system", system, NULL, NULL, NULL)) ||
        !vc_row_message(prompt, "user", question, instruction ? " " : NULL, instruction, NULL))
        return NULL;
    cJSON_AddStringToObject(row, "ability", "math");
    cJSON *rm = cJSON_AddObjectToObject(row, "reward_model");
    cJSON_AddStringToObject(rm, "style", "rule");
    cJSON_AddStringToObject(rm, "ground_truth", truth);
    cJSON *extra = cJSON_AddObjectToObject(row, "extra_info");
    cJSON_AddStringToObject(extra, "split", split);
    return cJSON_AddNumberToObject(extra, "index", (double)index) ? extra : NULL;
}

static cJSON *verl_fields(cJSON *row, const char *source, const char *question, const char *instruction,
                          const char *truth, const char *split, int64_t index) {
    return verl_fields_ex(row, source, NULL, NULL, question, instruction, truth, split, index);
}

/* the rows of gsm8k.py, gsm8k_multiturn_w_tool.py, gsm8k_tool_agent_loop.py and gsm8k_multiturn_w_interaction.py (their
 * keys in verl's order), and
 * gsm8k_multiturn_sft.py's messages */
static cJSON *build_row(const char *question, const char *answer, const char *solution, const char *split,
                        int64_t index, vc_gsm8k_form form) {
    cJSON *row = cJSON_CreateObject();
    if (form == VC_GSM8K_SFT) {
        cJSON *msgs = row ? cJSON_AddArrayToObject(row, "messages") : NULL;
        if (!vc_row_message(msgs, "user", question, " ", VC_GSM8K_INSTRUCTION, NULL) ||
            !vc_row_message(msgs, "assistant", answer, NULL, NULL, NULL)) {
            cJSON_Delete(row);
            return NULL;
        }
        return row;
    }
    int tool = form == VC_GSM8K_W_TOOL || form == VC_GSM8K_AGENT_LOOP, talk = form == VC_GSM8K_INTERACTION;
    cJSON *extra = verl_fields_ex(row, "openai/gsm8k", form == VC_GSM8K_AGENT_LOOP ? "tool_agent" : NULL,
                                  tool ? TOOL_SYSTEM : talk ? INTERACTION_SYSTEM : NULL, question,
                                  tool || talk ? VC_GSM8K_TOOL_INSTRUCTION : VC_GSM8K_INSTRUCTION, solution, split, index);
    int ok = extra && cJSON_AddStringToObject(extra, "answer", answer) && cJSON_AddStringToObject(extra, "question", question);
    if (ok && tool) ok = tool_kwargs(extra, "calc_gsm8k_reward", solution);
    if (ok && talk) ok = interaction_kwargs(extra, question, solution);
    if (!ok) {
        cJSON_Delete(row);
        return NULL;
    }
    return row;
}

vc_status vc_gsm8k_make_row(const cJSON *raw, const char *split, int64_t index, cJSON **out) {
    return vc_gsm8k_make_row_form(raw, split, index, VC_GSM8K_RL, out);
}

vc_status vc_gsm8k_make_row_form(const cJSON *raw, const char *split, int64_t index, vc_gsm8k_form form, cJSON **out) {
    *out = NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(raw, "question");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(raw, "answer");
    if (!cJSON_IsString(q)) return vc_fail(VC_ERR_MISSING, "missing field question");
    if (!cJSON_IsString(a)) return vc_fail(VC_ERR_MISSING, "missing field answer");
    size_t cap = strlen(a->valuestring) + 1;
    char *sol = vc_malloc(cap);
    if (!sol) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (form != VC_GSM8K_SFT && !vc_gsm8k_extract_solution(a->valuestring, sol, cap)) { /* (the SFT rows need none) */
        st = vc_fail(VC_ERR_FORMAT, "answer has no final \"#### <number>\"");
        goto out;
    }
    *out = build_row(q->valuestring, a->valuestring, sol, split, index, form);
    if (!*out) st = vc_fail(VC_ERR_NOMEM, "out of memory building a row");
out:
    free(sol);
    return st;
}

/* math_dataset.py's process_fn: the other columns kept (MATH-lighteval's level and type), then the new ones */
vc_status vc_math_make_row(const cJSON *raw, const char *split, int64_t index, cJSON **out) {
    *out = NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(raw, "problem");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(raw, "solution");
    if (!cJSON_IsString(q)) return vc_fail(VC_ERR_MISSING, "missing field problem");
    if (!cJSON_IsString(a)) return vc_fail(VC_ERR_MISSING, "missing field solution");
    char *boxed = vc_math_last_boxed(a->valuestring), *sol = boxed ? vc_math_remove_boxed(boxed) : NULL;
    free(boxed);
    if (!sol)
        return vc_fail(VC_ERR_FORMAT, "solution has no final \\boxed{...} answer (verl's remove_boxed asserts)");
    cJSON *row = cJSON_CreateObject();
    for (const cJSON *c = raw->child; row && c; c = c->next)
        if (c->string && strcmp(c->string, "problem") && strcmp(c->string, "solution"))
            cJSON_AddItemToObject(row, c->string, cJSON_Duplicate(c, 1));
    if (!verl_fields(row, "DigitalLearningGmbH/MATH-lighteval", q->valuestring, VC_MATH_INSTRUCTION, sol, split, index))
        cJSON_Delete(row), row = NULL;
    free(sol);
    *out = row;
    return row ? VC_OK : vc_fail(VC_ERR_NOMEM, "out of memory building a row");
}

/* geo3k.py's process_fn: the problem and answer taken out, the images kept where they stand, the other columns
 * kept, then verl's fields (datasets' map keeps a returned column in its place and appends the new ones) */
vc_status vc_geo3k_make_row(const cJSON *raw, const char *split, int64_t index, cJSON **out) {
    return vc_geo3k_make_row_tool(raw, split, index, 0, out);
}

/* and geo3k_multiturn_w_tool.py's (tool 1): a system prompt asking for calc_geo3k_reward, its create_kwargs */
vc_status vc_geo3k_make_row_tool(const cJSON *raw, const char *split, int64_t index, int tool, cJSON **out) {
    *out = NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(raw, "problem");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(raw, "answer");
    if (!cJSON_IsString(q)) return vc_fail(VC_ERR_MISSING, "missing field problem");
    if (!cJSON_IsString(a)) return vc_fail(VC_ERR_MISSING, "missing field answer");
    if (!cJSON_GetObjectItemCaseSensitive(raw, "images")) return vc_fail(VC_ERR_MISSING, "missing field images");
    cJSON *row = cJSON_CreateObject();
    for (const cJSON *c = raw->child; row && c; c = c->next)
        if (c->string && strcmp(c->string, "problem") && strcmp(c->string, "answer"))
            cJSON_AddItemToObject(row, c->string, cJSON_Duplicate(c, 1));
    cJSON *extra = verl_fields_ex(row, "hiyouga/geometry3k", NULL, tool ? GEO3K_TOOL_SYSTEM : NULL, q->valuestring,
                                  VC_GEO3K_INSTRUCTION, a->valuestring, split, index);
    if (!extra || !cJSON_AddStringToObject(extra, "answer", a->valuestring) ||
        !cJSON_AddStringToObject(extra, "question", q->valuestring) ||
        (tool && !tool_kwargs(extra, "calc_geo3k_reward", a->valuestring))) {
        cJSON_Delete(row);
        return vc_fail(VC_ERR_NOMEM, "out of memory building a row");
    }
    *out = row;
    return VC_OK;
}

/* dapo_multiturn_w_tool.py's / aime2024_multiturn_w_tool.py's process_fn: the row as it is, extra_info (in its place)
 * with need_tools_kwargs and tools_kwargs.code_interpreter.create_kwargs.ground_truth after its own keys */
static vc_status retool_row(const cJSON *raw, const char *split, int64_t index, int variant, cJSON **out) {
    (void)split, (void)index, (void)variant;
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(raw, "extra_info");
    const cJSON *truth = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(raw, "reward_model"),
                                                          "ground_truth");
    if (!cJSON_IsObject(extra)) return vc_fail(VC_ERR_MISSING, "`extra_info` is %s", extra ? "not an object" : "missing");
    if (!truth) return vc_fail(VC_ERR_MISSING, "`reward_model.ground_truth` is missing");
    cJSON *row = cJSON_Duplicate(raw, 1), *e = row ? cJSON_GetObjectItemCaseSensitive(row, "extra_info") : NULL;
    cJSON *ck = e && cJSON_AddBoolToObject(e, "need_tools_kwargs", 1) ? cJSON_AddObjectToObject(e, "tools_kwargs") : NULL;
    ck = ck ? cJSON_AddObjectToObject(cJSON_AddObjectToObject(ck, "code_interpreter"), "create_kwargs") : NULL;
    if (!ck || !cJSON_AddItemToObject(ck, "ground_truth", cJSON_Duplicate(truth, 1))) {
        cJSON_Delete(row);
        return vc_fail(VC_ERR_NOMEM, "out of memory building a row");
    }
    *out = row;
    return VC_OK;
}

static vc_status search_r1_row(const cJSON *raw, const char *split, int64_t index, int variant, cJSON **out) {
    (void)variant;
    return vc_search_r1_make_row(raw, split, index, out);
}

/* the row makers by dataset, with a variant each (GSM8K's form, Geometry3K's tools) */
static vc_status math_row(const cJSON *raw, const char *split, int64_t index, int variant, cJSON **out) {
    (void)variant;
    return vc_math_make_row(raw, split, index, out);
}
static vc_status gsm8k_row(const cJSON *raw, const char *split, int64_t index, int variant, cJSON **out) {
    return vc_gsm8k_make_row_form(raw, split, index, (vc_gsm8k_form)variant, out);
}

/* rows to out_path: Parquet where its name ends in .parquet (hf: with datasets' metadata, the columns named in images as
 * its Image feature), else JSONL */
vc_status vc_rows_write(const char *out_path, cJSON *const *rows, size_t n, int hf, const char *const *images,
                        int n_images) {
    size_t len = strlen(out_path);
    if (len > 8 && !strcmp(out_path + len - 8, ".parquet"))
        return hf ? vc_parquet_write_hf(out_path, rows, n, images, n_images) : vc_parquet_write(out_path, rows, n);
    vc_strbuf b = { 0 };
    for (size_t i = 0; i < n && !b.oom; i++) {
        char *text = vc_json_print(rows[i], 0);
        if (!text) b.oom = 1;
        else vc_sb_puts(&b, text), vc_sb_puts(&b, "\n");
        free(text);
    }
    vc_status st = b.oom ? vc_fail(VC_ERR_NOMEM, "%s: out of memory writing its rows", out_path)
                         : vc_write_file_atomic(out_path, b.p ? b.p : "", b.n);
    free(b.p);
    return st;
}

vc_status vc_dataset_convert(vc_dataset ds, int variant, const char *in_path, const char *out_path, const char *split,
                             size_t *n_rows) {
    size_t n_dummy;
    if (ds == VC_DS_HELLASWAG) return vc_hellaswag_convert(in_path, out_path, split, n_rows ? n_rows : &n_dummy);
    static vc_status (*const MAKE[])(const cJSON *, const char *, int64_t, int, cJSON **) = {
        [VC_DS_GSM8K] = gsm8k_row, [VC_DS_MATH] = math_row, [VC_DS_GEO3K] = vc_geo3k_make_row_tool,
        [VC_DS_RETOOL] = retool_row, [VC_DS_SEARCH_R1] = search_r1_row };
    if ((unsigned)ds >= sizeof MAKE / sizeof MAKE[0] || !MAKE[ds]) return vc_fail(VC_ERR_ARG, "unknown dataset %d", (int)ds);
    vc_status (*make)(const cJSON *, const char *, int64_t, int, cJSON **) = MAKE[ds];
    const char *images = ds == VC_DS_GEO3K ? "images" : NULL; /* (written as datasets' Image feature) */
    vc_jsonl *d = NULL;
    if (n_rows) *n_rows = 0;
    vc_status st = vc_jsonl_read(in_path, VC_JSONL_STRICT, &d);
    if (st) return st;
    cJSON **rows = calloc(d->n_rows + 1, sizeof *rows);
    if (!rows) {
        st = vc_fail(VC_ERR_NOMEM, "%s: out of memory", out_path);
        goto out;
    }
    for (size_t i = 0; i < d->n_rows; i++) {
        st = make(d->rows[i], split, (int64_t)i, variant, &rows[i]);
        if (st) {
            vc_fail_ctx(st, "%s:%lld", in_path, (long long)d->lines[i]);
            goto out;
        }
    }
    /* (with datasets' metadata as geo3k.py and the ReTool scripts write them) */
    st = vc_rows_write(out_path, rows, d->n_rows, images != NULL || ds == VC_DS_RETOOL, &images, images ? 1 : 0);
    if (!st && n_rows) *n_rows = d->n_rows;
out:
    for (size_t i = 0; rows && i < d->n_rows; i++) cJSON_Delete(rows[i]);
    free(rows);
    vc_jsonl_free(d);
    return st;
}

vc_status vc_gsm8k_convert(const char *in_path, const char *out_path, const char *split, size_t *n_rows) {
    return vc_dataset_convert(VC_DS_GSM8K, VC_GSM8K_RL, in_path, out_path, split, n_rows);
}

vc_status vc_gsm8k_convert_form(const char *in_path, const char *out_path, const char *split, vc_gsm8k_form form,
                                size_t *n_rows) {
    return vc_dataset_convert(VC_DS_GSM8K, form, in_path, out_path, split, n_rows);
}

vc_status vc_math_convert(const char *in_path, const char *out_path, const char *split, size_t *n_rows) {
    return vc_dataset_convert(VC_DS_MATH, 0, in_path, out_path, split, n_rows);
}

vc_status vc_geo3k_convert(const char *in_path, const char *out_path, const char *split, int tool, size_t *n_rows) {
    return vc_dataset_convert(VC_DS_GEO3K, tool, in_path, out_path, split, n_rows);
}
