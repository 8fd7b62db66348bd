/* Helpers of the dataset conversions. */
#include "data/rows.h"
#include "rl/reward_str.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

vc_status vc_row_text(const cJSON *raw, const char *key, const char *where, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(raw, key);
    *out = cJSON_IsString(v) && vc_rs_valid_utf8(v->valuestring) ? v->valuestring : NULL;
    return *out ? VC_OK
                : vc_fail(VC_ERR_FORMAT, "%s: `%s` %s", where, key,
                          !v ? "is missing" : cJSON_IsString(v) ? "is not valid UTF-8" : "is not a string");
}

int vc_row_message(cJSON *list, const char *role, const char *a, const char *b, const char *c, const char *d) {
    char *content = list ? vc_rs_cat(a, b, c, d, NULL, NULL) : NULL;
    cJSON *m = content ? cJSON_CreateObject() : NULL;
    if (m && !cJSON_AddItemToArray(list, m)) cJSON_Delete(m), m = NULL; /* (now the list's) */
    int ok = m && cJSON_AddStringToObject(m, "role", role) && cJSON_AddStringToObject(m, "content", content);
    free(content);
    return ok;
}
