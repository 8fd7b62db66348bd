/* verl's MCP tools (config.type mcp: verl.tools.mcp_base_tool.MCPBaseTool and mcp_search_tool.MCPSearchTool,
 * with verl's MCPClientManager): the servers of mcp.mcp_servers_config_path ({"mcpServers": {name: {url,
 * auth_token} or {command, args, env, cwd}}}), their tools listed (tools/list) and chosen by
 * mcp.tool_selected_list, each schema made as verl's mcp2openai makes it; calls (tools/call) answered with the
 * text of the result's text parts. Also verl's tool schema validation, for every tool. */
#include "agent_internal.h"
#include "mcp.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- verl's OpenAIFunctionToolSchema: validated, then dumped with exclude_unset and exclude_none ---- */
static vc_status copy_str(cJSON *out, const cJSON *o, const char *key, int required, const char *where, const char *at) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (!required) return VC_OK;
        return vc_fail(VC_ERR_FORMAT, "%s: tool_schema%s.%s: a string is required", where, at, key);
    }
    if (!cJSON_IsString(v)) return vc_fail(VC_ERR_FORMAT, "%s: tool_schema%s.%s must be a string", where, at, key);
    return cJSON_AddStringToObject(out, key, v->valuestring) ? VC_OK : VC_ERR_NOMEM;
}

static vc_status copy_str_list(cJSON *out, const cJSON *o, const char *key, int required, const char *where, const char *at) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *e;
    if (!v || cJSON_IsNull(v)) {
        if (!required) return VC_OK;
        return vc_fail(VC_ERR_FORMAT, "%s: tool_schema%s.%s: a list of strings is required", where, at, key);
    }
    if (!cJSON_IsArray(v)) return vc_fail(VC_ERR_FORMAT, "%s: tool_schema%s.%s must be a list of strings", where, at, key);
    cJSON_ArrayForEach(e, v) if (!cJSON_IsString(e))
        return vc_fail(VC_ERR_FORMAT, "%s: tool_schema%s.%s must be a list of strings", where, at, key);
    cJSON *d = cJSON_Duplicate(v, 1);
    return d && cJSON_AddItemToObject(out, key, d) ? VC_OK : VC_ERR_NOMEM;
}

static vc_status parameters(cJSON *fn_out, const cJSON *p, const char *where) {
    if (!cJSON_IsObject(p)) return vc_fail(VC_ERR_FORMAT, "%s: tool_schema.function.parameters must be a mapping", where);
    cJSON *o = cJSON_AddObjectToObject(fn_out, "parameters");
    vc_status st = o ? copy_str(o, p, "type", 1, where, ".function.parameters") : VC_ERR_NOMEM;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(p, "properties"), *e;
    if (!st && !cJSON_IsObject(props))
        st = vc_fail(VC_ERR_FORMAT, "%s: tool_schema.function.parameters.properties: a mapping is required", where);
    cJSON *po = st ? NULL : cJSON_AddObjectToObject(o, "properties");
    cJSON_ArrayForEach(e, (st ? NULL : props)) {
        char at[200];
        snprintf(at, sizeof at, ".function.parameters.properties.%.120s", e->string);
        cJSON *q = cJSON_IsObject(e) ? cJSON_AddObjectToObject(po, e->string) : NULL;
        if (!q) st = vc_fail(VC_ERR_FORMAT, "%s: tool_schema%s must be a mapping", where, at);
        if (!st) st = copy_str(q, e, "type", 1, where, at);
        if (!st) st = copy_str(q, e, "description", 0, where, at);
        if (!st) st = copy_str_list(q, e, "enum", 0, where, at);
        if (st) break;
    }
    if (!st) st = copy_str_list(o, p, "required", 1, where, ".function.parameters");
    return st;
}

vc_status rl_tool_schema_verl(const cJSON *in, const char *where, cJSON **out) {
    *out = NULL;
    if (!cJSON_IsObject(in)) return vc_fail(VC_ERR_FORMAT, "%s: tool_schema must be a mapping", where);
    cJSON *o = cJSON_CreateObject(), *fo = NULL;
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(in, "function");
    vc_status st = o ? copy_str(o, in, "type", 1, where, "") : VC_ERR_NOMEM;
    if (!st && !cJSON_IsObject(fn)) st = vc_fail(VC_ERR_FORMAT, "%s: tool_schema.function: a mapping is required", where);
    if (!st && !(fo = cJSON_AddObjectToObject(o, "function"))) st = VC_ERR_NOMEM;
    if (!st) st = copy_str(fo, fn, "name", 1, where, ".function");
    if (!st) st = copy_str(fo, fn, "description", 1, where, ".function");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(fn, "parameters"), *strict = cJSON_GetObjectItemCaseSensitive(fn, "strict");
    if (!st && p && !cJSON_IsNull(p)) st = parameters(fo, p, where);
    if (!st && strict && !cJSON_IsNull(strict)) {
        if (!cJSON_IsBool(strict)) st = vc_fail(VC_ERR_FORMAT, "%s: tool_schema.function.strict must be a boolean", where);
        else cJSON_AddBoolToObject(fo, "strict", cJSON_IsTrue(strict));
    }
    if (st) {
        cJSON_Delete(o);
        return st;
    }
    *out = o;
    return VC_OK;
}

/* ---- loading ---- */
static const char *const MCP_BASE = "verl.tools.mcp_base_tool.MCPBaseTool";
static const char *const MCP_SEARCH = "verl.tools.mcp_search_tool.MCPSearchTool";

/* verl's mcp2openai: {type: function, function: {name, description, parameters: inputSchema (required: []
 * when it has none), strict: false}} */
static cJSON *mcp2openai(const cJSON *tool, const char *name) {
    cJSON *o = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(o, "function");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(tool, "description");
    cJSON *params = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(tool, "inputSchema"), 1);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddItemToObject(f, "description", desc ? cJSON_Duplicate(desc, 1) : cJSON_CreateNull());
    if (!params) params = cJSON_CreateObject();
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    if (!req || (cJSON_IsArray(req) && !cJSON_GetArraySize(req)) || cJSON_IsNull(req) || cJSON_IsFalse(req)) {
        cJSON_DeleteItemFromObjectCaseSensitive(params, "required");
        cJSON_AddArrayToObject(params, "required");
    }
    cJSON_AddItemToObject(f, "parameters", params);
    cJSON_AddBoolToObject(f, "strict", 0);
    return o;
}

static int selected(const cJSON *list, const char *name) {
    const cJSON *e;
    if (!cJSON_GetArraySize(list)) return 1;
    cJSON_ArrayForEach(e, list) if (cJSON_IsString(e) && !strcmp(e->valuestring, name)) return 1;
    return 0;
}

static vc_status push_tool(rl_tool **tools, int *n, int *cap, rl_tool t) {
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 8;
        rl_tool *p = realloc(*tools, (size_t)c * sizeof *p);
        if (!p) return VC_ERR_NOMEM;
        memset(p + *cap, 0, (size_t)(c - *cap) * sizeof *p);
        *tools = p;
        *cap = c;
    }
    (*tools)[(*n)++] = t;
    return VC_OK;
}

/* The tools one server lists, chosen and appended; prefix: fastmcp's "<server>_" when several servers share
 * one client (verl's servers without an auth_token). */
static vc_status server_tools(rl_mcp *m, int prefix, int search, int timeout_ms, const cJSON *sel, const char *where,
                              rl_tool **tools, int *n, int *cap, cJSON *schemas) {
    cJSON *list = NULL, *e;
    vc_status st = rl_mcp_list_tools(m, &list);
    if (st) return vc_fail_ctx(st, "%s", where);
    cJSON_ArrayForEach(e, list) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(nm)) continue;
        char name[256];
        snprintf(name, sizeof name, "%s%s%s", prefix ? rl_mcp_name(m) : "", prefix ? "_" : "", nm->valuestring);
        if (!selected(sel, name)) continue;
        if (strlen(name) >= sizeof((rl_tool *)0)->name) {
            st = vc_fail(VC_ERR_UNSUPPORTED, "%s: MCP tool name '%s' is longer than %zu bytes", where, name,
                         sizeof((rl_tool *)0)->name - 1);
            break;
        }
        char w[400];
        snprintf(w, sizeof w, "%s: MCP tool %s", where, name);
        cJSON *raw = mcp2openai(e, name), *sch = NULL;
        st = raw ? rl_tool_schema_verl(raw, w, &sch) : VC_ERR_NOMEM;
        cJSON_Delete(raw);
        rl_tool t = { .kind = RL_TOOL_MCP, .mcp = m, .mcp_search = search, .timeout_ms = timeout_ms };
        snprintf(t.name, sizeof t.name, "%s", name);
        if (!st && !(t.mcp_name = vc_strdup(nm->valuestring))) st = VC_ERR_NOMEM;
        if (!st) st = push_tool(tools, n, cap, t);
        if (st) {
            free(t.mcp_name);
            cJSON_Delete(sch);
            break;
        }
        cJSON_AddItemToArray(schemas, sch);
    }
    cJSON_Delete(list);
    return st;
}

static vc_status read_servers(const char *file, const char *where, cJSON **servers) {
    char *text = NULL;
    size_t len = 0;
    *servers = NULL;
    vc_status st = vc_read_file(file, &text, &len);
    if (st) return vc_fail_ctx(st, "%s: mcp.mcp_servers_config_path", where);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    cJSON *s = cJSON_DetachItemFromObjectCaseSensitive(root, "mcpServers");
    cJSON_Delete(root);
    if (!cJSON_IsObject(s) || !cJSON_GetArraySize(s)) {
        cJSON_Delete(s);
        return vc_fail(VC_ERR_FORMAT, "%s: %s: expected {\"mcpServers\": {name: {url or command ...}, ...}}", where, file);
    }
    *servers = s;
    return VC_OK;
}

vc_status rl_mcp_tools_load(const cJSON *entry, const char *path, int idx, rl_tool **tools, int *n, int *cap,
                            cJSON *schemas) {
    char where[600];
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(entry, "class_name");
    snprintf(where, sizeof where, "%s: tools[%d] (%s)", path, idx, cls->valuestring);
    int search = !strcmp(cls->valuestring, MCP_SEARCH);
    if (!search && strcmp(cls->valuestring, MCP_BASE))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: verlc runs verl's MCP tools MCPBaseTool and MCPSearchTool; another "
                       "class's own result parsing does not run", where);
    const cJSON *mcp = cJSON_GetObjectItemCaseSensitive(entry, "mcp"), *cfg = cJSON_GetObjectItemCaseSensitive(entry, "config");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(mcp, "mcp_servers_config_path");
    const cJSON *sel = cJSON_GetObjectItemCaseSensitive(mcp, "tool_selected_list");
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(cfg, "rate_limit"), *to = cJSON_GetObjectItemCaseSensitive(cfg, "timeout");
    if (!cJSON_IsString(file)) return vc_fail(VC_ERR_MISSING, "%s: needs mcp.mcp_servers_config_path", where);
    if (sel && !cJSON_IsArray(sel) && !cJSON_IsNull(sel))
        return vc_fail(VC_ERR_FORMAT, "%s: mcp.tool_selected_list must be a list of tool names", where);
    double secs = cJSON_IsNumber(to) ? to->valuedouble : 30;
    if (!(secs > 0)) return vc_fail(VC_ERR_FORMAT, "%s: config.timeout must be > 0", where);
    cJSON *servers = NULL, *e;
    vc_status st = read_servers(file->valuestring, where, &servers);
    int first = *n, n_group = 0, n_srv = cJSON_GetArraySize(servers);
    rl_mcp **srv = st ? NULL : vc_calloc((size_t)n_srv, sizeof *srv);
    if (!st && !srv) st = VC_ERR_NOMEM;
    cJSON_ArrayForEach(e, (st ? NULL : servers)) n_group += !cJSON_GetObjectItemCaseSensitive(e, "auth_token");
    /* verl's client order: each auth_token server (over SSE) on its own, then one client for the others */
    for (int pass = 0; pass < 2 && !st; pass++) {
        int i = 0;
        cJSON_ArrayForEach(e, servers) {
            int grouped = !cJSON_GetObjectItemCaseSensitive(e, "auth_token");
            if (grouped == pass && !st) {
                if ((st = rl_mcp_new(e->string, e, (int)(secs * 1000), &srv[i]))) st = vc_fail_ctx(st, "%s", where);
                if (!st) rl_mcp_set_rate(srv[i], cJSON_IsNumber(rate) ? rate->valuedouble : 10);
                if (!st) st = server_tools(srv[i], grouped && n_group > 1, search, (int)(secs * 1000), sel, where, tools, n,
                                           cap, schemas);
            }
            i++;
        }
    }
    if (!st && *n == first) st = vc_fail(VC_ERR_MISSING, "%s: the MCP servers list no tool%s", where,
                                         cJSON_GetArraySize(sel) ? " of mcp.tool_selected_list" : "");
    for (int i = 0; i < n_srv && srv; i++) { /* each server is freed with the first tool that uses it */
        int owned = 0;
        for (int k = first; k < *n && !owned; k++)
            if ((*tools)[k].mcp == srv[i]) owned = (*tools)[k].owns_mcp = 1;
        if (!owned) rl_mcp_free(srv[i]);
    }
    free(srv);
    cJSON_Delete(servers);
    return st;
}

/* ---- calls ---- */
/* verl's MCPSearchTool._parse_tool_result: per text part (single quotes made double), the first
 * "results": [...] list (up to its first ']') appended */
static void search_results(vc_strbuf *b, const char *text) {
    char *t = vc_strdup(text);
    if (!t) return;
    for (char *p = t; *p; p++)
        if (*p == '\'') *p = '"';
    for (char *p = strstr(t, "\"results\""); p; p = strstr(p + 1, "\"results\"")) {
        const char *q = p + 9;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r' || *q == '\f' || *q == '\v') q++;
        if (*q++ != ':') continue;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r' || *q == '\f' || *q == '\v') q++;
        const char *end = *q == '[' ? strchr(q, ']') : NULL;
        if (!end) continue;
        vc_sb_putn(b, q, (size_t)(end - q + 1));
        break;
    }
    free(t);
}

/* the text verl's tool gives the model for one call's outcome: the result res, or the failure st (why its message) */
static vc_status mcp_text(const rl_tool *tool, vc_status st, const char *why, const cJSON *res, char **text) {
    const cJSON *e;
    vc_strbuf b = { 0 };
    if (st) /* verl's texts: an error answer is its "unexpected error", no answer a failed connection */
        vc_sb_printf(&b, "\n %s: %s", st == VC_ERR_FORMAT ? "An unexpected error occurred" : "Connection failed",
                     why ? why : "");
    int k = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "content")) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(e, "type"), *tx = cJSON_GetObjectItemCaseSensitive(e, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) continue;
        if (tool->mcp_search) search_results(&b, tx->valuestring);
        else {
            if (k++) vc_sb_puts(&b, " ");
            vc_sb_puts(&b, tx->valuestring);
        }
    }
    if (b.oom) {
        free(b.p);
        return VC_ERR_NOMEM;
    }
    *text = b.p ? b.p : vc_strdup("");
    return *text ? VC_OK : VC_ERR_NOMEM;
}

vc_status rl_mcp_tool_run(rl_tool *tool, const cJSON *args, char **text) {
    cJSON *res = NULL;
    vc_status st = rl_mcp_call_tool(tool->mcp, tool->mcp_name, args, &res);
    if (st == VC_ERR_NOMEM) return st;
    st = mcp_text(tool, st, st ? vc_last_error() : NULL, res, text);
    cJSON_Delete(res);
    return st;
}

vc_status rl_mcp_tools_run_many(rl_tool *const *tool, const cJSON *const *args, int n, char **text) {
    const char **name = vc_calloc((size_t)n + 1, sizeof *name);
    cJSON **res = vc_calloc((size_t)n + 1, sizeof *res);
    vc_status *one = vc_calloc((size_t)n + 1, sizeof *one);
    char **why = vc_calloc((size_t)n + 1, sizeof *why);
    vc_status st = name && res && one && why ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) name[i] = tool[i]->mcp_name;
    if (!st) st = rl_mcp_call_tools(tool[0]->mcp, n, name, args, res, one, why);
    for (int i = 0; !st && i < n; i++) st = mcp_text(tool[i], one[i], why[i], res[i], &text[i]);
    for (int i = 0; res && why && i < n; i++) cJSON_Delete(res[i]), free(why[i]);
    free(name), free(res), free(one), free(why);
    return st;
}
