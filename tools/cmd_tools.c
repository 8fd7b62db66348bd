/* verlc tools: a multi-turn tool config (verl's multi_turn.tool_config_path, or later verl's function_tool_path)
 * loaded as a training run loads it:
 * each tool with the schema its chat template gets, and optionally one call with the text the model would see.
 * For checking tools (MCP servers, programs, Python classes) before a long run. */
#include "cli.h"
#include "verlc/json.h"
#include "rl/agent_internal.h"
#include "rl/py_text.h"
#include "verlc/core.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: verlc tools TOOL_CONFIG.yaml|FUNCTION_TOOLS.py [NAME ARGUMENTS_JSON [ROW_JSON]]\n"
                    "  lists the tools of a multi-turn tool config (or of a Python file of @function_tool functions,\n"
                    "  multi_turn.function_tool_path) as a run loads them (MCP servers are connected and\n"
                    "  their tools listed), one JSON schema per line as the chat template gets it; with NAME, runs one\n"
                    "  call with those arguments (and the data row ROW_JSON, for extra_info.tools_kwargs) and prints\n"
                    "  the tool's answer as the model would see it\n");
    return 2;
}

int vc_cmd_tools(int argc, char **argv) {
    argc--, argv++; /* past "tools" */
    if (argc != 1 && argc != 3 && argc != 4) return usage();
    if (argv[0][0] == '-') return usage();
    rl_tool *tools = NULL;
    int n = 0, rc = 0;
    cJSON *schemas = NULL, *row = NULL;
    size_t len = strlen(argv[0]);
    int py = len > 3 && !strcmp(argv[0] + len - 3, ".py");
    vc_status st = py ? ((schemas = cJSON_CreateArray()) ? rl_function_tools_load(argv[0], &tools, &n, schemas) : VC_ERR_NOMEM)
                      : rl_tools_load(argv[0], &tools, &n, &schemas);
    if (st) {
        fprintf(stderr, "verlc tools: %s\n", vc_last_error());
        return 1;
    }
    if (argc == 1) {
        const cJSON *s;
        cJSON_ArrayForEach(s, schemas) {
            char *t = vc_json_print(s, 0);
            printf("%s\n", t ? t : "null");
            free(t);
        }
    } else {
        rl_tool_call call = { .args = pt_json_loads((pt_span){ argv[2], strlen(argv[2]) }) }; /* as a tool call's */
        snprintf(call.name, sizeof call.name, "%s", argv[1]);
        row = argc == 4 ? cJSON_Parse(argv[3]) : NULL;
        if (!call.args || (argc == 4 && !row)) {
            fprintf(stderr, "verlc tools: %s is not valid JSON\n", !call.args ? "ARGUMENTS_JSON" : "ROW_JSON");
            rc = 2;
        } else {
            char *text = NULL;
            double reward = 0;
            vc_image img = { 0 };
            st = rl_tool_run(tools, n, &call, row, "ROW_JSON", &text, &reward, &img);
            if (st) {
                fprintf(stderr, "verlc tools: %s\n", vc_last_error());
                rc = 1;
            } else printf("%s\n", text);
            if (!st && img.width) printf("[image %dx%d]\n", img.width, img.height); /* an image for the model */
            vc_image_free(&img);
            free(text);
        }
        cJSON_Delete(call.args);
    }
    cJSON_Delete(row);
    cJSON_Delete(schemas);
    rl_tools_free(tools, n);
    return rc;
}
