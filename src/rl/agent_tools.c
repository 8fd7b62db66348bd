/* Tools of the multi-turn agent (verl's tool_agent loop): the tool config file (verl's
 * multi_turn.tool_config_path YAML: a list of {class_name, config, tool_schema}) and the tools verlc runs
 * natively (the tool-call formats are in tool_parser.c). verl's tools are Python classes; verlc implements the ones it ships with
 * under their class names (verl.tools.gsm8k_tool.Gsm8kTool, verl.tools.geo3k_tool.Geo3kTool,
 * verl.tools.image_zoom_in_tool.ImageZoomInTool: tool_zoom.c, verl.tools.sandbox_fusion_tools.SandboxFusionTool: sandbox.c,
 * verl.tools.search_tool.SearchTool: tool_search.c) and runs any other class in a Python
 * interpreter (vc_tool_py_start), answering the CommandTool protocol. */
#include "agent_internal.h"
#include "verlc/json.h"
#include "mcp.h"
#include "py_text.h"
#include "http_batch.h"
#include "sandbox.h"
#include "verlc/image.h"
#include "verlc/config.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *cls; int kind; } BUILTIN[] = {
    { "verl.tools.gsm8k_tool.Gsm8kTool", RL_TOOL_GSM8K },
    { "verl.tools.geo3k_tool.Geo3kTool", RL_TOOL_GEO3K },
    { "verl.tools.image_zoom_in_tool.ImageZoomInTool", RL_TOOL_ZOOM },
    { "verl.tools.sandbox_fusion_tools.SandboxFusionTool", RL_TOOL_SANDBOX },
    { "verl.tools.search_tool.SearchTool", RL_TOOL_SEARCH },
    { "verlc.tools.CommandTool", RL_TOOL_COMMAND },
};

void rl_tools_free(rl_tool *tools, int n) {
    for (int i = 0; tools && i < n; i++) {
        if (tools[i].proc && !tools[i].shares_proc) vc_reward_proc_close(tools[i].proc);
        for (int w = 0; tools[i].workers && w < tools[i].concurrency - 1; w++) vc_reward_proc_close(tools[i].workers[w]);
        free(tools[i].workers);
        if (tools[i].owns_mcp) rl_mcp_free(tools[i].mcp);
        free(tools[i].command);
        free(tools[i].mcp_name);
        free(tools[i].language);
    }
    free(tools);
}

/* verlc.tools.CommandTool's config: {command: "...", timeout: seconds, num_workers: copies of the program} */
static vc_status command_config(const cJSON *e, const char *path, int i, rl_tool *t) {
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(e, "config");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(cfg, "command");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(cfg, "timeout");
    const cJSON *nw = cJSON_GetObjectItemCaseSensitive(cfg, "num_workers");
    if (!cJSON_IsString(cmd) || !*cmd->valuestring)
        return vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: verlc.tools.CommandTool needs config.command", path, i);
    double secs = cJSON_IsNumber(to) ? to->valuedouble : 60;
    if (!(secs > 0)) return vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: config.timeout must be > 0", path, i);
    double workers = nw ? (cJSON_IsNumber(nw) ? nw->valuedouble : -1) : 1;
    if (!(workers >= 1 && workers <= 256 && workers == (int)workers))
        return vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: config.num_workers must be a whole number from 1 to 256", path, i);
    t->concurrency = (int)workers;
    if (t->concurrency > 1 && !(t->workers = vc_calloc((size_t)t->concurrency - 1, sizeof *t->workers)))
        return VC_ERR_NOMEM;
    t->timeout_ms = (int)(secs * 1000);
    return (t->command = vc_strdup(cmd->valuestring)) ? VC_OK : VC_ERR_NOMEM;
}

/* a service tool's requests in flight (config.rate_limit with enable_global_rate_limit, as by default, else
 * num_workers; verl's default dflt) and its retry delay (verl's 1 s; config.verlc_retry_delay, for tests) */
static void service_limits(const cJSON *cfg, int dflt, rl_tool *t) {
    const cJSON *rl = cJSON_GetObjectItemCaseSensitive(cfg, "rate_limit"), *nw = cJSON_GetObjectItemCaseSensitive(cfg, "num_workers");
    const cJSON *gl = cJSON_GetObjectItemCaseSensitive(cfg, "enable_global_rate_limit");
    const cJSON *lim = cJSON_IsFalse(gl) ? nw : rl, *rd = cJSON_GetObjectItemCaseSensitive(cfg, "verlc_retry_delay");
    t->concurrency = cJSON_IsNumber(lim) && lim->valuedouble >= 1 ? (int)fmin(lim->valuedouble, 4096) : dflt;
    t->retry_delay = cJSON_IsNumber(rd) && rd->valuedouble >= 0 ? rd->valuedouble : 1.0;
}

/* a service tool's URL (config.<key>, required as verl requires it) and libcurl to reach it */
static vc_status service_url(const cJSON *url, const char *path, int i, const char *tool, const char *key,
                             const char *what) {
    if (!cJSON_IsString(url) || !*url->valuestring)
        return vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: %s needs config.%s (%s)", path, i, tool, key, what);
    if (!vc_http_available())
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: tools[%d]: %s: this verlc was built without libcurl: install "
                       "libcurl4-openssl-dev and rebuild", path, i, tool);
    return VC_OK;
}

/* verl's SearchTool's config: retrieval_service_url (required, as verl asserts), topk (3), timeout (30 s) */
static vc_status search_config(const cJSON *e, const char *path, int i, rl_tool *t) {
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(e, "config");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(cfg, "retrieval_service_url");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(cfg, "topk"), *to = cJSON_GetObjectItemCaseSensitive(cfg, "timeout");
    vc_status st = service_url(url, path, i, "SearchTool", "retrieval_service_url",
                               "the retrieval service, e.g. http://127.0.0.1:8000/retrieve");
    if (st) return st;
    if ((k && !(cJSON_IsNumber(k) && k->valuedouble >= 1)) || (to && !(cJSON_IsNumber(to) && to->valuedouble > 0)))
        return vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: topk and timeout must be positive numbers", path, i);
    service_limits(cfg, 120, t);
    t->topk = k ? (int)k->valuedouble : 3;
    t->default_timeout = to ? to->valuedouble : 30;
    return (t->command = vc_strdup(url->valuestring)) ? VC_OK : VC_ERR_NOMEM;
}

/* verl's SandboxFusionTool's config: sandbox_fusion_url (required, as verl raises without it), default_timeout (30),
 * default_language ("python"), memory_limit_mb (1024); num_workers and the rate limits are Ray's */
static vc_status sandbox_config(const cJSON *e, const char *path, int i, rl_tool *t) {
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(e, "config");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(cfg, "sandbox_fusion_url");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(cfg, "default_timeout");
    const cJSON *lang = cJSON_GetObjectItemCaseSensitive(cfg, "default_language");
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(cfg, "memory_limit_mb");
    vc_status st = service_url(url, path, i, "SandboxFusionTool", "sandbox_fusion_url", "the service's run_code endpoint");
    if (st) return st;
    if ((to && !cJSON_IsNumber(to)) || (lang && !cJSON_IsString(lang)) || (mem && !cJSON_IsNumber(mem)))
        return vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: default_timeout and memory_limit_mb must be numbers, "
                       "default_language a string", path, i);
    service_limits(cfg, 10, t);
    t->default_timeout = to ? to->valuedouble : 30;
    t->memory_mb = mem ? (int)mem->valuedouble : 1024;
    t->command = vc_strdup(url->valuestring);
    t->language = vc_strdup(lang ? lang->valuestring : "python");
    return t->command && t->language ? VC_OK : VC_ERR_NOMEM;
}

/* verl's SandboxFusionTool.execute's arguments: code (str() of a non-string; malloc'd), timeout and language from the
 * call or the config (another type fails the call in verl: "no stdout here") */
static char *sandbox_args(const rl_tool *tool, const cJSON *args, double *timeout, const char **language) {
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code"), *to = cJSON_GetObjectItemCaseSensitive(args, "timeout");
    const cJSON *lang = cJSON_GetObjectItemCaseSensitive(args, "language");
    *timeout = !to ? tool->default_timeout : cJSON_IsNumber(to) ? to->valuedouble : -1;
    *language = !lang ? tool->language : cJSON_IsString(lang) ? lang->valuestring : "";
    return !code ? vc_strdup("") : pt_py_repr(code, 1);
}

static vc_sandbox_opts sandbox_opts(const rl_tool *tool) {
    return (vc_sandbox_opts){ .url = tool->command, .max_concurrent = tool->concurrency, .memory_limit_mb = tool->memory_mb,
                              .retry_delay = tool->retry_delay };
}

static vc_status sandbox_tool(const rl_tool *tool, const cJSON *args, char **text) {
    double t;
    const char *l;
    char *src = sandbox_args(tool, args, &t, &l);
    if (!src) return VC_ERR_NOMEM;
    vc_sandbox_opts o = sandbox_opts(tool);
    vc_status st = vc_sandbox_tool_run(&o, src, t, l, text);
    free(src);
    return st;
}

/* the calls of a SearchTool, sent together */
static vc_status search_prefetch(const rl_tool *tool, rl_tool_call *const *calls, int n) {
    int m = 0, j = 0;
    for (int i = 0; i < n; i++) m += !calls[i]->text && cJSON_IsObject(calls[i]->args) && !strcmp(calls[i]->name, tool->name);
    if (!m) return VC_OK;
    const cJSON **args = vc_calloc((size_t)m, sizeof *args);
    char **text = vc_calloc((size_t)m, sizeof *text);
    int *who = vc_calloc((size_t)m, sizeof *who);
    vc_status st = args && text && who ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++)
        if (!calls[i]->text && cJSON_IsObject(calls[i]->args) && !strcmp(calls[i]->name, tool->name))
            args[j] = calls[i]->args, who[j++] = i;
    if (!st) st = rl_search_tool_many(tool, args, m, text);
    for (j = 0; !st && j < m; j++) calls[who[j]]->text = text[j];
    free(args), free(text), free(who);
    return st;
}

/* the tool of that name (the last of that name, as rl_tool_run takes it); NULL: none */
static const rl_tool *find_tool(const rl_tool *tools, int n_tools, const char *name) {
    const rl_tool *t = NULL;
    for (int i = 0; i < n_tools; i++)
        if (!strcmp(tools[i].name, name)) t = &tools[i];
    return t;
}

static vc_status python_prefetch(rl_tool *tools, int n_tools, const rl_tool *tool, rl_tool_call *const *calls,
                                 const cJSON *const *rows, int n);

/* whether tools[k] is the first with its interpreter */
static int first_of_proc(const rl_tool *tools, int k) {
    for (int i = 0; i < k; i++)
        if (tools[i].proc == tools[k].proc) return 0;
    return 1;
}

/* whether tools[k] is the first MCP tool of its server */
static int first_of_server(const rl_tool *tools, int k) {
    for (int i = 0; i < k; i++)
        if (tools[i].kind == RL_TOOL_MCP && tools[i].mcp == tools[k].mcp) return 0;
    return 1;
}

/* the calls to one MCP server's tools, sent together */
static vc_status mcp_prefetch(rl_tool *tools, int n_tools, const struct rl_mcp *mcp, rl_tool_call *const *calls, int n) {
    rl_tool **tool = vc_calloc((size_t)n + 1, sizeof *tool);
    const cJSON **args = vc_calloc((size_t)n + 1, sizeof *args);
    char **text = vc_calloc((size_t)n + 1, sizeof *text);
    int *who = vc_calloc((size_t)n + 1, sizeof *who), m = 0;
    vc_status st = tool && args && text && who ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        rl_tool *c = calls[i]->text || !cJSON_IsObject(calls[i]->args) ? NULL : (rl_tool *)find_tool(tools, n_tools, calls[i]->name);
        if (c && c->kind == RL_TOOL_MCP && c->mcp == mcp) tool[m] = c, args[m] = calls[i]->args, who[m++] = i;
    }
    if (!st && m > 1) st = rl_mcp_tools_run_many(tool, args, m, text); /* one call: rl_tool_run's */
    for (int j = 0; !st && m > 1 && j < m; j++) calls[who[j]]->text = text[j];
    if (st)
        for (int j = 0; text && j < m; j++) free(text[j]);
    free(tool), free(args), free(text), free(who);
    return st;
}

static vc_status command_prefetch(rl_tool *tool, rl_tool_call *const *calls, const cJSON *const *rows, int n);

vc_status rl_tools_prefetch(rl_tool *tools, int n_tools, rl_tool_call *const *calls, const cJSON *const *rows, int n) {
    vc_status st = VC_OK;
    for (int k = 0; !st && k < n_tools; k++) {
        if (tools[k].kind == RL_TOOL_PYTHON && tools[k].proc && first_of_proc(tools, k)) {
            st = python_prefetch(tools, n_tools, &tools[k], calls, rows, n);
            continue;
        }
        if (tools[k].kind == RL_TOOL_MCP && first_of_server(tools, k)) {
            st = mcp_prefetch(tools, n_tools, tools[k].mcp, calls, n);
            continue;
        }
        if (tools[k].kind == RL_TOOL_SEARCH) {
            st = search_prefetch(&tools[k], calls, n);
            continue;
        }
        if (tools[k].kind == RL_TOOL_COMMAND && tools[k].concurrency > 1) {
            st = command_prefetch(&tools[k], calls, rows, n);
            continue;
        }
        if (tools[k].kind != RL_TOOL_SANDBOX) continue;
        int m = 0;
        for (int i = 0; i < n; i++) m += !calls[i]->text && cJSON_IsObject(calls[i]->args) && !strcmp(calls[i]->name, tools[k].name);
        if (!m) continue;
        char **code = vc_calloc((size_t)m, sizeof *code), **text = vc_calloc((size_t)m, sizeof *text);
        const char **lang = vc_calloc((size_t)m, sizeof *lang);
        double *to = vc_calloc((size_t)m, sizeof *to);
        int *who = vc_calloc((size_t)m, sizeof *who), j = 0;
        st = code && text && lang && to && who ? VC_OK : VC_ERR_NOMEM;
        for (int i = 0; !st && i < n; i++)
            if (!calls[i]->text && cJSON_IsObject(calls[i]->args) && !strcmp(calls[i]->name, tools[k].name)) {
                if (!(code[j] = sandbox_args(&tools[k], calls[i]->args, &to[j], &lang[j]))) st = VC_ERR_NOMEM;
                who[j++] = i;
            }
        vc_sandbox_opts o = sandbox_opts(&tools[k]);
        if (!st) st = vc_sandbox_tool_run_many(&o, m, (const char *const *)code, to, lang, text);
        for (j = 0; !st && j < m; j++) calls[who[j]]->text = text[j];
        for (j = 0; code && j < m; j++) free(code[j]);
        free(code), free(text), free(lang), free(to), free(who);
    }
    return st;
}

/* any other class: verl's tool class in a Python interpreter, built from its config (without verlc_timeout, the
 * seconds a call may take: default 300) and tool_schema */
static vc_status python_tool(const cJSON *e, const char *cls, const char *path, int i, rl_tool *t) {
    cJSON *cfg = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "config"), 1);
    if (!cfg) cfg = cJSON_CreateObject();
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(cfg, "type");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(cfg, "verlc_timeout");
    double secs = cJSON_IsNumber(to) ? to->valuedouble : 300;
    vc_status st = VC_OK;
    if (!cJSON_IsObject(cfg)) st = vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: config must be a mapping", path, i);
    else if (cJSON_IsString(type) && strcmp(type->valuestring, "native"))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: tools[%d]: config.type=%s: verl's tool types are native and mcp", path, i,
                     type->valuestring);
    else if (!(secs > 0)) st = vc_fail(VC_ERR_FORMAT, "%s: tools[%d]: config.verlc_timeout must be > 0", path, i);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "verlc_timeout");
    char *cj = st ? NULL : vc_json_print(cfg, 0);
    char *sj = st ? NULL : vc_json_print(cJSON_GetObjectItemCaseSensitive(e, "tool_schema"), 0);
    if (!st && (!cj || !sj)) st = VC_ERR_NOMEM;
    t->kind = RL_TOOL_PYTHON;
    t->timeout_ms = (int)(secs * 1000);
    if (!st && (st = vc_tool_py_start(cls, cj, sj, t->timeout_ms, &t->proc)))
        st = vc_fail_ctx(st, "%s: tools[%d] (class %s)", path, i, cls);
    free(cj);
    free(sj);
    cJSON_Delete(cfg);
    return st;
}

/* the list under `key` of a YAML file, as JSON (*list owned by the caller) */
static vc_status yaml_list(const char *path, const char *key, const char *cfg_key, cJSON **list) {
    char *text = NULL, *js = NULL;
    size_t len = 0;
    vc_config *c = NULL;
    *list = NULL;
    vc_status st = vc_read_file(path, &text, &len);
    if (st) return vc_fail_ctx(st, "%s", cfg_key);
    if (!(st = vc_config_parse_yaml(text, len, path, &c))) {
        js = vc_config_to_json(c, key, 0);
        *list = js ? cJSON_Parse(js) : NULL;
        if (!cJSON_IsArray(*list)) st = vc_fail(VC_ERR_FORMAT, "%s: expected a list under `%s`", path, key);
    }
    free(js);
    free(text);
    vc_config_free(c);
    return st;
}

/* one native tool: built in, verlc.tools.CommandTool, or a Python class; its schema as verl renders it */
static vc_status native_tool(const cJSON *e, const char *path, int i, rl_tool *t, cJSON *schemas) {
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(e, "class_name");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(e, "tool_schema");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(schema, "function"), "name");
    if (!cJSON_IsString(name))
        return vc_fail(VC_ERR_FORMAT, "%s: tools[%d] needs class_name and tool_schema.function.name", path, i);
    char where[600];
    snprintf(where, sizeof where, "%s: tools[%d] (%s)", path, i, cls->valuestring);
    cJSON *sch = NULL;
    vc_status st = rl_tool_schema_verl(schema, where, &sch);
    if (st) return st;
    t->kind = -1;
    for (size_t k = 0; k < sizeof BUILTIN / sizeof BUILTIN[0]; k++)
        if (!strcmp(cls->valuestring, BUILTIN[k].cls)) t->kind = BUILTIN[k].kind;
    if (t->kind < 0) st = python_tool(e, cls->valuestring, path, i, t);
    if (!st && t->kind == RL_TOOL_COMMAND) st = command_config(e, path, i, t);
    if (!st && t->kind == RL_TOOL_SANDBOX) st = sandbox_config(e, path, i, t);
    if (!st && t->kind == RL_TOOL_SEARCH) st = search_config(e, path, i, t);
    if (!st && strlen(name->valuestring) >= sizeof t->name)
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: tool name longer than %zu bytes", where, sizeof t->name - 1);
    snprintf(t->name, sizeof t->name, "%s", name->valuestring);
    if (st) cJSON_Delete(sch);
    else cJSON_AddItemToArray(schemas, sch);
    return st;
}

vc_status rl_tools_load(const char *path, rl_tool **out, int *n_out, cJSON **schemas) {
    *out = NULL;
    *n_out = 0;
    *schemas = NULL;
    cJSON *list = NULL;
    vc_status st = yaml_list(path, "tools", "multi_turn.tool_config_path", &list);
    int n_list = cJSON_GetArraySize(list), n = 0, cap = n_list + 1;
    rl_tool *tools = st ? NULL : vc_calloc((size_t)cap, sizeof *tools);
    cJSON *sch = st ? NULL : cJSON_CreateArray();
    if (!st && (!tools || !sch)) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < n_list; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i), *cls = cJSON_GetObjectItemCaseSensitive(e, "class_name");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "config"), "type");
        if (!cJSON_IsString(cls)) {
            st = vc_fail(VC_ERR_FORMAT, "%s: tools[%d] needs class_name", path, i);
            break;
        }
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "mcp")) {
            st = rl_mcp_tools_load(e, path, i, &tools, &n, &cap, sch);
            continue;
        }
        if (n == cap) { /* room for one more */
            rl_tool *p = realloc(tools, (size_t)(cap * 2) * sizeof *p);
            if (!p) { st = VC_ERR_NOMEM; break; }
            memset(p + cap, 0, (size_t)cap * sizeof *p);
            tools = p;
            cap *= 2;
        }
        st = native_tool(e, path, i, &tools[n], sch);
        n++; /* a failed tool's program is closed with the others */
    }
    for (int i = 0; !st && i < n; i++)
        for (int k = 0; k < i && !st; k++)
            if (!strcmp(tools[i].name, tools[k].name))
                st = vc_fail(VC_ERR_FORMAT, "%s: two tools are named %s", path, tools[i].name);
    cJSON_Delete(list);
    if (st) {
        rl_tools_free(tools, n);
        cJSON_Delete(sch);
        return st;
    }
    *out = tools;
    *n_out = n;
    *schemas = sch;
    return VC_OK;
}

/* one function tool of the file's server (the first owns it) after the *n tools, its schema into schemas */
static vc_status function_tool(const cJSON *e, const char *path, vc_reward_proc *proc, rl_tool *tools, int *n,
                               cJSON *schemas) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    char where[600];
    snprintf(where, sizeof where, "function_tool_path %s: tool %s", path, cJSON_IsString(name) ? name->valuestring : "?");
    if (!cJSON_IsString(name) || strlen(name->valuestring) >= sizeof tools->name)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: a name of 1 to %zu bytes", where, sizeof tools->name - 1);
    for (int k = 0; k < *n; k++) /* verl's message */
        if (!strcmp(tools[k].name, name->valuestring))
            return vc_fail(VC_ERR_FORMAT, "Function tool name(s) ['%s'] collide with tools already declared in "
                           "tool_config_path. Each tool name must be unique across `tool_config_path` and "
                           "`function_tool_path`; rename one of them.", name->valuestring);
    cJSON *sch = NULL;
    vc_status st = rl_tool_schema_verl(cJSON_GetObjectItemCaseSensitive(e, "schema"), where, &sch);
    if (st) return st;
    rl_tool *t = &tools[*n];
    *t = (rl_tool){ .kind = RL_TOOL_PYTHON, .proc = proc, .timeout_ms = 300000 };
    for (int k = 0; k < *n; k++) t->shares_proc |= tools[k].proc == proc;
    snprintf(t->name, sizeof t->name, "%s", name->valuestring);
    cJSON_AddItemToArray(schemas, sch);
    (*n)++;
    return VC_OK;
}

vc_status rl_function_tools_load(const char *path, rl_tool **tools, int *n, cJSON *schemas) {
    vc_reward_proc *proc = NULL;
    vc_status st = vc_function_tools_py_start(path, 300000, &proc);
    if (st) return vc_fail_ctx(st, "actor_rollout_ref.rollout.multi_turn.function_tool_path");
    cJSON *ans = NULL;
    st = vc_reward_proc_call(proc, "{\"op\": \"list\"}\n", &ans);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(ans, "tools"), *e;
    int m = cJSON_GetArraySize(list), owned = 0;
    rl_tool *p = st ? NULL : realloc(*tools, (size_t)(*n + m + 1) * sizeof *p);
    if (!st && !p) st = VC_ERR_NOMEM;
    if (p) *tools = p;
    cJSON_ArrayForEach(e, list) {
        if (st) break;
        st = function_tool(e, path, proc, *tools, n, schemas);
        owned |= !st;
    }
    cJSON_Delete(ans);
    if (!owned) vc_reward_proc_close(proc); /* else the first of its tools closes it */
    return st;
}

/* ---- interactions ---- */
static const char *const GSM8K_INTERACTION = "verl.interactions.gsm8k_interaction.Gsm8kInteraction";

void rl_interactions_free(rl_interaction *it, int n) {
    for (int i = 0; it && i < n; i++)
        if (it[i].proc) vc_reward_proc_close(it[i].proc);
    free(it);
}

/* verl names an interaction by `name`, else by its class's name without "Interaction", lower-cased */
static void interaction_name(const cJSON *e, const char *cls, char *out, size_t cap) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (cJSON_IsString(name)) {
        snprintf(out, cap, "%s", name->valuestring);
        return;
    }
    const char *simple = strrchr(cls, '.') ? strrchr(cls, '.') + 1 : cls;
    size_t n = strlen(simple);
    if (n > 11 && !strcmp(simple + n - 11, "Interaction")) n -= 11;
    size_t k = 0;
    for (; k < n && k + 1 < cap; k++) out[k] = (char)tolower((unsigned char)simple[k]);
    out[k] = 0;
}

static vc_status python_interaction(const cJSON *e, const char *cls, const char *path, int i, rl_interaction *it) {
    cJSON *cfg = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "config"), 1);
    if (!cfg || cJSON_IsNull(cfg)) cJSON_Delete(cfg), cfg = cJSON_CreateObject();
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return vc_fail(VC_ERR_FORMAT, "%s: interaction[%d]: config must be a mapping", path, i);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "name");
    cJSON_AddStringToObject(cfg, "name", it->name); /* as verl's registry sets it */
    char *cj = vc_json_print(cfg, 0);
    vc_status st = cj ? vc_interaction_py_start(cls, cj, 300000, &it->proc) : VC_ERR_NOMEM;
    if (st) st = vc_fail_ctx(st, "%s: interaction[%d] (class %s)", path, i, cls);
    free(cj);
    cJSON_Delete(cfg);
    return st;
}

vc_status rl_interactions_load(const char *path, rl_interaction **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    cJSON *list = NULL;
    vc_status st = yaml_list(path, "interaction", "multi_turn.interaction_config_path", &list);
    int n = cJSON_GetArraySize(list);
    rl_interaction *it = st ? NULL : vc_calloc((size_t)(n ? n : 1), sizeof *it);
    if (!st && !it) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i), *cls = cJSON_GetObjectItemCaseSensitive(e, "class_name");
        if (!cJSON_IsString(cls)) {
            st = vc_fail(VC_ERR_FORMAT, "%s: interaction[%d] needs class_name", path, i);
            break;
        }
        interaction_name(e, cls->valuestring, it[i].name, sizeof it[i].name);
        for (int j = 0; j < i && !st; j++)
            if (!strcmp(it[j].name, it[i].name))
                st = vc_fail(VC_ERR_FORMAT, "%s: duplicate interaction name '%s'", path, it[i].name);
        if (!st && strcmp(cls->valuestring, GSM8K_INTERACTION)) st = python_interaction(e, cls->valuestring, path, i, &it[i]);
    }
    cJSON_Delete(list);
    if (st) {
        rl_interactions_free(it, n);
        return st;
    }
    *out = it;
    *n_out = n;
    return VC_OK;
}

vc_status rl_interaction_start(rl_interaction *it, const char *id, const cJSON *kwargs) {
    if (!it->proc) return VC_OK; /* Gsm8kInteraction keeps nothing verlc needs: ground_truth is in kwargs */
    cJSON *req = cJSON_CreateObject(), *ans = NULL;
    cJSON_AddStringToObject(req, "op", "start");
    cJSON_AddStringToObject(req, "id", id);
    cJSON_AddItemToObject(req, "kwargs", kwargs ? cJSON_Duplicate(kwargs, 1) : cJSON_CreateObject());
    char *s = vc_json_print(req, 0), *line = s ? vc_malloc(strlen(s) + 2) : NULL;
    if (line) sprintf(line, "%s\n", s);
    vc_status st = line ? vc_reward_proc_call(it->proc, line, &ans) : VC_ERR_NOMEM;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(ans, "error");
    if (!st && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "ok")))
        st = vc_fail(VC_ERR_ARG, "interaction %s: start_interaction raised %s", it->name,
                     cJSON_IsString(err) ? err->valuestring : "(no answer)");
    else if (st) st = vc_fail_ctx(st, "interaction %s: start_interaction", it->name);
    free(s);
    free(line);
    cJSON_Delete(req);
    cJSON_Delete(ans);
    return st;
}

static vc_status gsm8k_respond(const cJSON *messages, const cJSON *kwargs, char **reply, int *terminate, double *score) {
    const char *content = "";
    for (const cJSON *m = messages ? messages->child : NULL; m; m = m->next) { /* the last assistant message */
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant") && cJSON_IsString(c)) content = c->valuestring;
    }
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(kwargs, "ground_truth");
    *score = cJSON_IsString(gt) ? vc_reward_gsm8k(content, gt->valuestring, 0, 0.0, 1.0) : 0.0;
    *terminate = *score == 1.0;
    *reply = vc_strdup(*terminate ? "Your response is correct!"
                                  : "Your response is incorrect! You need to reflect on your answer and try again.");
    return *reply ? VC_OK : VC_ERR_NOMEM;
}

vc_status rl_interaction_respond(rl_interaction *it, const char *id, const cJSON *messages, const cJSON *kwargs,
                                 char **reply, int *terminate, double *score) {
    *reply = NULL;
    *terminate = 0;
    *score = NAN;
    if (!it->proc) return gsm8k_respond(messages, kwargs, reply, terminate, score);
    cJSON *req = cJSON_CreateObject(), *ans = NULL;
    cJSON_AddStringToObject(req, "op", "respond");
    cJSON_AddStringToObject(req, "id", id);
    cJSON_AddItemToObject(req, "messages", cJSON_Duplicate(messages, 1));
    cJSON_AddItemToObject(req, "kwargs", kwargs ? cJSON_Duplicate(kwargs, 1) : cJSON_CreateObject());
    char *s = vc_json_print(req, 0), *line = s ? vc_malloc(strlen(s) + 2) : NULL;
    if (line) sprintf(line, "%s\n", s);
    vc_status st = line ? vc_reward_proc_call(it->proc, line, &ans) : VC_ERR_NOMEM;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(ans, "content"), *err = cJSON_GetObjectItemCaseSensitive(ans, "error");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(ans, "score");
    if (!st && !cJSON_IsString(c)) /* verl's loop stops on the exception; so does verlc */
        st = vc_fail(VC_ERR_ARG, "interaction %s: generate_response raised %s", it->name,
                     cJSON_IsString(err) ? err->valuestring : "(no answer)");
    else if (st) st = vc_fail_ctx(st, "interaction %s: generate_response", it->name);
    else {
        *terminate = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "terminate"));
        if (cJSON_IsNumber(sc)) *score = sc->valuedouble;
        if (!(*reply = vc_strdup(c->valuestring))) st = VC_ERR_NOMEM;
    }
    free(s);
    free(line);
    cJSON_Delete(req);
    cJSON_Delete(ans);
    return st;
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
    char *ans = !a ? vc_strdup("") : pt_py_repr(a, 1); /* str(answer) */
    if (!ans) return VC_ERR_NOMEM;
    size_t n = strlen(ans) + 8;
    char *resp = vc_malloc(n), *rep = vc_malloc(2 * strlen(ans) + 8);
    if (!resp || !rep) {
        free(ans), free(resp), free(rep);
        return VC_ERR_NOMEM;
    }
    snprintf(resp, n, "%s%s", strncmp(ans, "#### ", 5) ? "#### " : "", ans);
    double reward = ground_truth ? vc_reward_gsm8k(resp, ground_truth, 1, 0.0, 1.0) : 0.0;
    char *found = vc_gsm8k_extract(resp, 1); /* none: verl's compute_score returns the int 0 */
    *tool_reward = reward > 0.0 ? 0.0 : -0.05;
    py_repr(ans, rep, 2 * strlen(ans) + 8);
    size_t tn = strlen(rep) + 64;
    *text = vc_malloc(tn);
    if (*text) snprintf(*text, tn, "Current parsed answer=%s reward=%s", rep, reward > 0.0 ? "1.0" : found ? "0.0" : "0");
    free(found);
    free(ans), free(resp), free(rep);
    return *text ? VC_OK : VC_ERR_NOMEM;
}

/* verl's Geo3kTool: the answer graded as it is (geo3k.compute_score with use_boxed=False, format_score=0.0);
 * a fresh instance per call, so the tool reward is 0 for a correct answer and -0.05 otherwise */
static vc_status geo3k_tool(const cJSON *args, const char *ground_truth, char **text, double *tool_reward) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(args, "answer");
    char *ans = !a ? vc_strdup("") : pt_py_repr(a, 1); /* str(answer) */
    if (!ans) return VC_ERR_NOMEM;
    double reward = ground_truth && vc_mathruler_grade(ans, ground_truth) ? 1.0 : 0.0;
    *tool_reward = reward > 0.0 ? 0.0 : -0.05;
    size_t rn = 2 * strlen(ans) + 8;
    char *rep = vc_malloc(rn);
    if (rep) py_repr(ans, rep, rn);
    size_t tn = rep ? strlen(rep) + 64 : 0;
    *text = rep ? vc_malloc(tn) : NULL;
    if (*text) snprintf(*text, tn, "Current parsed answer=%s reward=%s", rep, reward > 0.0 ? "1.0" : "0.0");
    free(ans);
    free(rep);
    return *text ? VC_OK : VC_ERR_NOMEM;
}

/* one call as a tool program takes it: {"name", "arguments", "create_kwargs", "extra_info"} (NULL: no memory) */
static cJSON *call_request(const rl_tool_call *call, const cJSON *ck, const cJSON *ei) {
    cJSON *req = cJSON_CreateObject();
    int ok = req && cJSON_AddStringToObject(req, "name", call->name) &&
             cJSON_AddItemToObject(req, "arguments", cJSON_Duplicate(call->args, 1)) &&
             cJSON_AddItemToObject(req, "create_kwargs", ck ? cJSON_Duplicate(ck, 1) : cJSON_CreateObject()) &&
             cJSON_AddItemToObject(req, "extra_info", ei ? cJSON_Duplicate(ei, 1) : cJSON_CreateNull());
    if (!ok) cJSON_Delete(req);
    return ok ? req : NULL;
}

/* a JSON value as one request line, ending in a newline (malloc'd; NULL: no memory) */
static char *json_line(const cJSON *v) {
    char *s = vc_json_print(v, 0), *line = s ? vc_malloc(strlen(s) + 2) : NULL;
    if (line) sprintf(line, "%s\n", s);
    free(s);
    return line;
}

/* a tool program's answer as the model sees it: {"text", "reward"}, or verl's error text when the call failed
 * (st a failed row: why, else the last error) or the answer has no text; other failures returned */
static vc_status program_answer(vc_status st, const cJSON *ans, const char *why, char **text, double *reward) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(ans, "text"), *r = cJSON_GetObjectItemCaseSensitive(ans, "reward");
    if (st && !vc_reward_row_failed(st)) return st;
    if (st || !cJSON_IsString(t)) { /* the model sees the failure, as in verl */
        const char *w = !st ? "the program's answer has no \"text\"" : why ? why : vc_last_error();
        size_t n = strlen(w) + 40;
        char *msg = vc_malloc(n);
        if (msg) snprintf(msg, n, "Error when executing tool: %s", w);
        *text = msg;
        return msg ? VC_OK : VC_ERR_NOMEM;
    }
    *text = vc_strdup(t->valuestring);
    *reward = cJSON_IsNumber(r) ? r->valuedouble : 0.0;
    return *text ? VC_OK : VC_ERR_NOMEM;
}

/* verlc.tools.CommandTool: one JSON line per call to a long-running program,
 *   {"name": ..., "arguments": {...}, "create_kwargs": {...}, "extra_info": {...}}
 * and one line back, {"text": "...", "reward": x} (reward optional). A program that hangs past the
 * timeout, exits or answers badly gives the model verl's "Error when executing tool: ..." text, and is
 * restarted at the next call. */
static vc_status command_tool(rl_tool *tool, int slot, const rl_tool_call *call, const cJSON *ck, const cJSON *ei,
                              char **text, double *tool_reward) {
    vc_status st = VC_OK;
    struct vc_reward_proc **proc = slot ? &tool->workers[slot - 1] : &tool->proc;
    if (!*proc) {
        size_t n = strlen(tool->command) + 8;
        char *cmd = vc_malloc(n);
        if (!cmd) return VC_ERR_NOMEM;
        snprintf(cmd, n, "exec %s", tool->command);
        char *argv[] = { "/bin/sh", "-c", cmd, NULL };
        st = vc_reward_proc_start(argv, tool->timeout_ms, proc);
        free(cmd);
        if (st) return vc_fail_ctx(st, "tool %s (%s)", tool->name, tool->command);
    }
    cJSON *req = call_request(call, ck, ei);
    char *line = req ? json_line(req) : NULL;
    cJSON_Delete(req);
    if (!line) return VC_ERR_NOMEM;
    cJSON *ans = NULL;
    st = vc_reward_proc_call(*proc, line, &ans);
    free(line);
    st = program_answer(st, ans, NULL, text, tool_reward);
    cJSON_Delete(ans);
    return st;
}

/* the row's extra_info and its extra_info.tools_kwargs.<name>.create_kwargs (NULL where absent) */
static void row_kwargs(const cJSON *row, const char *name, const cJSON **ei, const cJSON **ck) {
    *ei = cJSON_GetObjectItemCaseSensitive(row, "extra_info");
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(*ei, "tools_kwargs"), name);
    *ck = cJSON_GetObjectItemCaseSensitive(tk, "create_kwargs");
}

/* a turn's calls to a CommandTool with num_workers > 1: a thread per copy of the program, each taking the next call
 * until none are left (a copy answers one call at a time, as the protocol has it) */
typedef struct command_job {
    rl_tool *tool;
    rl_tool_call *const *calls;
    const cJSON *const *rows;
    const int *who;
    int m;
    atomic_int next;
} command_job;

typedef struct command_worker {
    command_job *job;
    int slot;
    vc_status st;
    char err[400];
} command_worker;

static void *command_worker_run(void *arg) {
    command_worker *w = arg;
    command_job *j = w->job;
    for (int k; !w->st && (k = atomic_fetch_add(&j->next, 1)) < j->m;) {
        rl_tool_call *c = j->calls[j->who[k]];
        const cJSON *ei, *ck;
        row_kwargs(j->rows ? j->rows[j->who[k]] : NULL, j->tool->name, &ei, &ck);
        w->st = command_tool(j->tool, w->slot, c, ck, ei, &c->text, &c->reward);
        if (w->st) snprintf(w->err, sizeof w->err, "%s", vc_last_error());
    }
    return NULL;
}

static vc_status command_prefetch(rl_tool *tool, rl_tool_call *const *calls, const cJSON *const *rows, int n) {
    int m = 0, *who = vc_calloc((size_t)n + 1, sizeof *who);
    if (!who) return VC_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        if (!calls[i]->text && cJSON_IsObject(calls[i]->args) && !strcmp(calls[i]->name, tool->name)) who[m++] = i;
    int nw = m < tool->concurrency ? m : tool->concurrency;
    command_job job = { tool, calls, rows, who, m, 0 };
    command_worker *ws = nw > 1 ? vc_calloc((size_t)nw, sizeof *ws) : NULL;
    pthread_t *th = ws ? vc_calloc((size_t)nw, sizeof *th) : NULL;
    vc_status st = nw <= 1 || th ? VC_OK : VC_ERR_NOMEM; /* one call (or none): rl_tool_run's */
    int started = 0;
    for (; th && started < nw; started++) {
        ws[started] = (command_worker){ .job = &job, .slot = started };
        if (pthread_create(&th[started], NULL, command_worker_run, &ws[started])) break;
    }
    if (th && started == 0) st = vc_fail(VC_ERR_IO, "tool %s: cannot start a thread", tool->name);
    for (int w = 0; w < started; w++) pthread_join(th[w], NULL);
    for (int w = 0; !st && w < started; w++)
        if (ws[w].st) st = vc_fail(ws[w].st, "%s", ws[w].err);
    free(ws), free(th), free(who);
    return st;
}

/* the calls to Python tools of one interpreter (a tool class's, or a function_tool file's), sent in one request: the
 * interpreter runs them concurrently, as verl's loop runs a turn's calls; a call that is not answered (the program
 * timed out, exited or answered something else: killed, restarted at the next call) gets the failure's text */
static vc_status python_prefetch(rl_tool *tools, int n_tools, const rl_tool *tool, rl_tool_call *const *calls,
                                 const cJSON *const *rows, int n) {
    int m = 0, j = 0, *who = vc_calloc((size_t)n + 1, sizeof *who);
    cJSON *req = cJSON_CreateObject(), *list = NULL, **ans = vc_calloc((size_t)n + 1, sizeof *ans);
    vc_status st = who && ans && req && cJSON_AddStringToObject(req, "op", "many") &&
                   cJSON_AddNumberToObject(req, "timeout", tool->timeout_ms / 1000.0) &&
                   (list = cJSON_AddArrayToObject(req, "calls")) ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        const rl_tool *c = calls[i]->text || !cJSON_IsObject(calls[i]->args) ? NULL : find_tool(tools, n_tools, calls[i]->name);
        if (!c || c->kind != RL_TOOL_PYTHON || c->proc != tool->proc) continue;
        const cJSON *ei, *ck;
        row_kwargs(rows ? rows[i] : NULL, c->name, &ei, &ck);
        cJSON *one = call_request(calls[i], ck, ei);
        if (!one || !cJSON_AddItemToArray(list, one)) st = VC_ERR_NOMEM;
        who[m++] = i;
    }
    char *line = !st && m > 1 ? json_line(req) : NULL, *failed = NULL; /* one call: rl_tool_run's */
    if (!st && m > 1 && !line) st = VC_ERR_NOMEM;
    if (line && (st = vc_reward_proc_call_many(tool->proc, line, m, ans)) && vc_reward_row_failed(st))
        st = (failed = vc_strdup(vc_last_error())) ? VC_OK : VC_ERR_NOMEM; /* the unanswered calls' cause */
    for (j = 0; line && !st && j < m; j++) {
        rl_tool_call *c = calls[who[j]];
        st = program_answer(ans[j] ? VC_OK : VC_ERR_TIMEOUT, ans[j], failed, &c->text, &c->reward);
    }
    for (j = 0; ans && j < m; j++) cJSON_Delete(ans[j]);
    free(failed), free(line), free(who), free(ans);
    cJSON_Delete(req);
    return st;
}

vc_status rl_tool_run(rl_tool *tools, int n_tools, const rl_tool_call *call, const cJSON *row, const char *where,
                      char **text, double *tool_reward, vc_image *image) {
    *text = NULL;
    *tool_reward = 0;
    memset(image, 0, sizeof *image);
    rl_tool *tool = (rl_tool *)find_tool(tools, n_tools, call->name);
    char msg[320];
    if (!tool) { /* verl's message for its KeyError */
        snprintf(msg, sizeof msg, "Error when executing tool: '%s'", call->name);
        return (*text = vc_strdup(msg)) ? VC_OK : VC_ERR_NOMEM;
    }
    if (!cJSON_IsObject(call->args)) {
        snprintf(msg, sizeof msg, "Error when executing tool: the arguments of %s are not an object", call->name);
        return (*text = vc_strdup(msg)) ? VC_OK : VC_ERR_NOMEM;
    }
    if (call->text) { /* fetched ahead */
        *tool_reward = call->reward;
        return (*text = vc_strdup(call->text)) ? VC_OK : VC_ERR_NOMEM;
    }
    const cJSON *ei, *ck;
    row_kwargs(row, tool->name, &ei, &ck);
    if (tool->kind == RL_TOOL_MCP) return rl_mcp_tool_run(tool, call->args, text);
    if (tool->kind == RL_TOOL_ZOOM) return rl_zoom_tool(call->args, ck, where, text, tool_reward, image);
    if (tool->kind == RL_TOOL_SANDBOX) return sandbox_tool(tool, call->args, text);
    if (tool->kind == RL_TOOL_SEARCH) return rl_search_tool_many(tool, (const cJSON *const *)&call->args, 1, text);
    if (tool->kind != RL_TOOL_GSM8K && tool->kind != RL_TOOL_GEO3K)
        return command_tool(tool, 0, call, ck, ei, text, tool_reward);
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(ck, "ground_truth");
    char *gts = !gt ? NULL : cJSON_IsString(gt) ? vc_strdup(gt->valuestring) : vc_json_print(gt, 0);
    vc_status st = tool->kind == RL_TOOL_GEO3K ? geo3k_tool(call->args, gts, text, tool_reward)
                                               : gsm8k_tool(call->args, gts, text, tool_reward);
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
