/* Tools of the multi-turn agent (verl's tool_agent loop): the tool config file (verl's
 * multi_turn.tool_config_path YAML: a list of {class_name, config, tool_schema}), the hermes tool-call
 * format (verl's HermesToolParser: <tool_call>{"name": ..., "arguments": {...}}</tool_call>) and the
 * tools verlc runs natively. verl's tools are Python classes; verlc implements the ones it ships with
 * under their class names (verl.tools.gsm8k_tool.Gsm8kTool) and refuses the others by name. */
#include "agent_internal.h"
#include "verlc/config.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *cls; int kind; } BUILTIN[] = {
    { "verl.tools.gsm8k_tool.Gsm8kTool", RL_TOOL_GSM8K },
};

vc_status rl_tools_load(const char *path, rl_tool **out, int *n_out, cJSON **schemas) {
    *out = NULL;
    *n_out = 0;
    *schemas = NULL;
    char *text = NULL, *js = NULL;
    size_t len = 0;
    vc_config *c = NULL;
    cJSON *list = NULL;
    vc_status st = vc_read_file(path, &text, &len);
    if (st) return vc_fail_ctx(st, "multi_turn.tool_config_path");
    if (!(st = vc_config_parse_yaml(text, len, path, &c))) {
        js = vc_config_to_json(c, "tools", 0);
        list = js ? cJSON_Parse(js) : NULL;
        if (!cJSON_IsArray(list)) st = vc_fail(VC_ERR_FORMAT, "%s: expected a list under `tools`", path);
    }
    int n = cJSON_GetArraySize(list);
    rl_tool *tools = st ? NULL : vc_calloc((size_t)(n ? n : 1), sizeof *tools);
    cJSON *sch = st ? NULL : cJSON_CreateArray();
    if (!st && (!tools || !sch)) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i), *cls = cJSON_GetObjectItemCaseSensitive(e, "class_name");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(e, "tool_schema");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(schema, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(cls) || !cJSON_IsString(name)) {
            st = vc_fail(VC_ERR_FORMAT, "%s: tools[%d] needs class_name and tool_schema.function.name", path, i);
            break;
        }
        tools[i].kind = -1;
        for (size_t k = 0; k < sizeof BUILTIN / sizeof BUILTIN[0]; k++)
            if (!strcmp(cls->valuestring, BUILTIN[k].cls)) tools[i].kind = BUILTIN[k].kind;
        if (tools[i].kind < 0) {
            st = vc_fail(VC_ERR_UNSUPPORTED, "%s: tools[%d]: class %s is a Python tool verlc cannot run (built in: %s)",
                         path, i, cls->valuestring, BUILTIN[0].cls);
            break;
        }
        snprintf(tools[i].name, sizeof tools[i].name, "%s", name->valuestring);
        cJSON *dup = cJSON_Duplicate(schema, 1);
        if (!dup) st = VC_ERR_NOMEM;
        else cJSON_AddItemToArray(sch, dup);
    }
    cJSON_Delete(list);
    free(js);
    free(text);
    vc_config_free(c);
    if (st) {
        free(tools);
        cJSON_Delete(sch);
        return st;
    }
    *out = tools;
    *n_out = n;
    *schemas = sch;
    return VC_OK;
}

/* ---- hermes tool calls ---- */
int rl_parse_tool_calls(const char *text, rl_tool_call *calls, int max) {
    static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
    int n = 0;
    for (const char *p = strstr(text, OPEN); p && n < max; p = strstr(p, OPEN)) {
        const char *body = p + sizeof OPEN - 1, *end = strstr(body, CLOSE);
        if (!end) break;
        cJSON *j = cJSON_ParseWithLength(body, (size_t)(end - body));
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
        if (cJSON_IsString(name) && args) { /* malformed calls are skipped, as verl logs and drops them */
            snprintf(calls[n].name, sizeof calls[n].name, "%s", name->valuestring);
            calls[n].args = cJSON_Duplicate(args, 1);
            if (calls[n].args) n++;
        }
        cJSON_Delete(j);
        p = end + sizeof CLOSE - 1;
    }
    return n;
}

/* Python's repr of a str (the quotes it picks, and its escapes for the common control characters) */
static void py_repr(const char *s, char *out, size_t cap) {
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    size_t k = 0;
    if (cap < 8) return;
    out[k++] = q;
    for (; *s && k + 5 < cap; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : *s == '\t' ? "\\t" : *s == '\r' ? "\\r" : NULL;
        if (*s == q) out[k++] = '\\', out[k++] = q;
        else if (esc) out[k++] = esc[0], out[k++] = esc[1];
        else out[k++] = *s;
    }
    out[k++] = q;
    out[k] = 0;
}

/* verl's Gsm8kTool: the answer (prefixed with "#### " unless it is) scored with gsm8k's flexible method;
 * each call is a fresh instance (verl creates and releases one per call), so the tool reward is 0 for a
 * correct answer and -0.05 otherwise */
static vc_status gsm8k_tool(const cJSON *args, const char *ground_truth, char **text, double *tool_reward) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(args, "answer");
    char *ans = !a ? vc_strdup("") : cJSON_IsString(a) ? vc_strdup(a->valuestring) : cJSON_PrintUnformatted(a);
    if (!ans) return VC_ERR_NOMEM;
    size_t n = strlen(ans) + 8;
    char *resp = vc_malloc(n), *rep = vc_malloc(2 * strlen(ans) + 8);
    if (!resp || !rep) {
        free(ans), free(resp), free(rep);
        return VC_ERR_NOMEM;
    }
    snprintf(resp, n, "%s%s", strncmp(ans, "#### ", 5) ? "#### " : "", ans);
    double reward = ground_truth ? vc_reward_gsm8k(resp, ground_truth, 1, 0.0, 1.0) : 0.0;
    *tool_reward = reward > 0.0 ? 0.0 : -0.05;
    py_repr(ans, rep, 2 * strlen(ans) + 8);
    size_t tn = strlen(rep) + 64;
    *text = vc_malloc(tn);
    if (*text) snprintf(*text, tn, "Current parsed answer=%s reward=%s", rep, reward > 0.0 ? "1.0" : "0.0");
    free(ans), free(resp), free(rep);
    return *text ? VC_OK : VC_ERR_NOMEM;
}

vc_status rl_tool_run(const rl_tool *tools, int n_tools, const rl_tool_call *call, const cJSON *row, char **text,
                       double *tool_reward) {
    *text = NULL;
    *tool_reward = 0;
    const rl_tool *tool = NULL;
    for (int i = 0; i < n_tools; i++)
        if (!strcmp(tools[i].name, call->name)) tool = &tools[i];
    char msg[320];
    if (!tool) { /* verl's message for its KeyError */
        snprintf(msg, sizeof msg, "Error when executing tool: '%s'", call->name);
        return (*text = vc_strdup(msg)) ? VC_OK : VC_ERR_NOMEM;
    }
    if (!cJSON_IsObject(call->args)) {
        snprintf(msg, sizeof msg, "Error when executing tool: the arguments of %s are not an object", call->name);
        return (*text = vc_strdup(msg)) ? VC_OK : VC_ERR_NOMEM;
    }
    /* extra_info.tools_kwargs.<name>.create_kwargs */
    const cJSON *ei = cJSON_GetObjectItemCaseSensitive(row, "extra_info");
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ei, "tools_kwargs"), tool->name);
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(tk, "create_kwargs");
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(ck, "ground_truth");
    char *gts = !gt ? NULL : cJSON_IsString(gt) ? vc_strdup(gt->valuestring) : cJSON_PrintUnformatted(gt);
    vc_status st = gsm8k_tool(call->args, gts, text, tool_reward);
    free(gts);
    return st;
}

/* Python slicing by characters (UTF-8 code points), as verl truncates tool responses */
static size_t cp_offset(const char *s, size_t n_cp) {
    size_t i = 0, c = 0;
    while (s[i] && c < n_cp) {
        i++;
        while ((s[i] & 0xC0) == 0x80) i++;
        c++;
    }
    return i;
}

static size_t cp_len(const char *s) {
    size_t c = 0;
    for (; *s; s++) c += (*s & 0xC0) != 0x80;
    return c;
}

char *rl_truncate_tool_text(const char *t, int max_len, int side) {
    size_t n = cp_len(t);
    if (max_len <= 0 || n <= (size_t)max_len) return vc_strdup(t);
    size_t bytes = strlen(t) + 32;
    char *out = vc_malloc(bytes);
    if (!out) return NULL;
    if (side == RL_TRUNC_LEFT) /* verl's "left": keeps the beginning */
        snprintf(out, bytes, "%.*s...(truncated)", (int)cp_offset(t, (size_t)max_len), t);
    else if (side == RL_TRUNC_RIGHT)
        snprintf(out, bytes, "(truncated)...%s", t + cp_offset(t, n - (size_t)max_len));
    else {
        size_t h = (size_t)max_len / 2;
        snprintf(out, bytes, "%.*s...(truncated)...%s", (int)cp_offset(t, h), t, t + cp_offset(t, n - h));
    }
    return out;
}
