/* verlc's side of tools/fuzz/diff_tools.py: reads lines "format<TAB>text hex" and prints, per line, a JSON object
 * {"content": ..., "calls": [{"name": ..., "arguments": ...}]} as rl_parse_tool_calls_as finds them (ERR: failed). */
#include "drv_util.h"
#include "verlc/json.h"
#include "rl/agent_internal.h"
#include "rl/tool_parser.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *rest = line, *fmt = drv_field(&rest), *text = drv_unhex(drv_field(&rest)), *content = NULL;
        int kind = 0;
        rl_tool_call calls[64];
        int n = rl_tool_format_parse(fmt, &kind) ? -1 : rl_parse_tool_calls_as(kind, text, "<pad>", NULL, calls, 64, &content);
        if (n < 0) {
            printf("ERR\n");
            free(text);
            continue;
        }
        cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "calls");
        cJSON_AddStringToObject(o, "content", content ? content : "");
        for (int i = 0; i < n; i++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", calls[i].name);
            cJSON_AddItemToObject(c, "arguments", calls[i].args ? calls[i].args : cJSON_CreateNull());
            cJSON_AddItemToArray(a, c);
            free(calls[i].text);
        }
        char *s = vc_json_print(o, 0);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        free(content);
        free(text);
    }
    return 0;
}
