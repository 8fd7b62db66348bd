/* Search-R1's question-answering rows (PeterJinGo/nq_hotpotqa_train) to verl's tool-calling rows, as verl's
 * examples/data_preprocess/preprocess_search_r1_dataset.py makes them. */
#include "verlc/data.h"
#include "data/rows.h"
#include "verlc/json.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define SEARCH_R1_SYSTEM "You are a helpful and harmless assistant."
#define SEARCH_R1_USER                                                                                                \
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new " \
    "information. After reasoning, if you find you lack some knowledge, you can call a search engine by <tool_call> "  \
    "query </tool_call> and it will return the top searched results between <tool_response> and </tool_response>. "   \
    "You can search as many times as your want. If you find no further external knowledge needed, you can directly "  \
    "provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing " \
    "</answer>. Question: "

/* a copy of raw's key, or null where it has none (pandas' row.get) */
static cJSON *copy_or_null(const cJSON *raw, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(raw, key);
    return v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull();
}

vc_status vc_search_r1_make_row(const cJSON *raw, const char *split, int64_t index, cJSON **out) {
    *out = NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(raw, "question"), *ds = cJSON_GetObjectItemCaseSensitive(raw, "data_source");
    if (q && !cJSON_IsString(q)) return vc_fail(VC_ERR_FORMAT, "`question` is not a string");
    if (ds && !cJSON_IsString(ds)) /* (verl's str() of a missing value is pandas' spelling of it: nan or None) */
        return vc_fail(VC_ERR_FORMAT, "`data_source` is not a string");
    const char *question = q ? q->valuestring : "";
    const cJSON *rm = cJSON_GetObjectItemCaseSensitive(raw, "reward_model");
    const cJSON *truth = cJSON_IsObject(rm) ? cJSON_GetObjectItemCaseSensitive(rm, "ground_truth") : NULL;
    if (!truth) truth = cJSON_GetObjectItemCaseSensitive(raw, "golden_answers"); /* (or []) */
    size_t dn = ds ? strlen(ds->valuestring) : 0;
    char *source = malloc(dn + 10);
    if (source) memcpy(source, "searchR1_", 9), memcpy(source + 9, ds ? ds->valuestring : "", dn + 1);
    cJSON *row = source ? cJSON_CreateObject() : NULL;
    cJSON *prompt = row && cJSON_AddStringToObject(row, "data_source", source) ? cJSON_AddArrayToObject(row, "prompt") : NULL;
    int ok = prompt && vc_row_message(prompt, "system", SEARCH_R1_SYSTEM, NULL, NULL, NULL) &&
             vc_row_message(prompt, "user", SEARCH_R1_USER, question, NULL, NULL) &&
             cJSON_AddItemToObject(row, "ability", copy_or_null(raw, "ability")) &&
             cJSON_AddItemToObject(row, "reward_model", copy_or_null(raw, "reward_model"));
    cJSON *extra = ok ? cJSON_AddObjectToObject(row, "extra_info") : NULL;
    ok = extra && cJSON_AddNumberToObject(extra, "index", (double)index) && cJSON_AddBoolToObject(extra, "need_tools_kwargs", 1) &&
         cJSON_AddStringToObject(extra, "question", question) && cJSON_AddStringToObject(extra, "split", split);
    cJSON *ck = ok ? cJSON_AddObjectToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(extra, "tools_kwargs"), "search"),
                                             "create_kwargs") : NULL;
    ok = ck && cJSON_AddItemToObject(ck, "ground_truth", truth ? cJSON_Duplicate(truth, 1) : cJSON_CreateArray()) &&
         cJSON_AddStringToObject(ck, "question", question) && cJSON_AddStringToObject(ck, "data_source", source) &&
         cJSON_AddItemToObject(row, "metadata", copy_or_null(raw, "metadata"));
    free(source);
    if (!ok) {
        cJSON_Delete(row);
        return vc_fail(VC_ERR_NOMEM, "out of memory building a row");
    }
    *out = row;
    return VC_OK;
}
