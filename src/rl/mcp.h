/* MCP (Model Context Protocol) client for verl's MCP tools (verl.tools.mcp_base_tool.MCPBaseTool and
 * MCPSearchTool over verl's MCPClientManager and fastmcp): JSON-RPC 2.0 sessions over a server's stdio
 * (`command`, `args`, `env`, `cwd`), streamable HTTP (`url`) or the older HTTP+SSE transport (`url` ending in
 * /sse, `"transport": "sse"`, or an `auth_token`, which verl always sends over SSE as a bearer token). */
#ifndef VC_RL_MCP_H
#define VC_RL_MCP_H
#include "verlc/core.h"

struct cJSON;
typedef struct rl_mcp rl_mcp;

/* A server entry of the mcpServers file; nothing connects until the first request. */
vc_status rl_mcp_new(const char *name, const struct cJSON *server, int timeout_ms, rl_mcp **out);
void rl_mcp_free(rl_mcp *m);
const char *rl_mcp_name(const rl_mcp *m);
/* verl's rate limit (config.rate_limit, calls per second; <= 0: none): a call waits for its token */
void rl_mcp_set_rate(rl_mcp *m, double per_second);
/* tools/list (all pages): *tools, a JSON array of MCP Tool objects, the caller's */
vc_status rl_mcp_list_tools(rl_mcp *m, struct cJSON **tools);
/* tools/call: *result, the CallToolResult object, the caller's. VC_ERR_IO: the transport failed (no answer,
 * the server exited, HTTP error), VC_ERR_FORMAT: a JSON-RPC error answer, VC_ERR_TIMEOUT: no answer in time;
 * each leaves the message in vc_last_error, and the next request starts a new session. */
vc_status rl_mcp_call_tool(rl_mcp *m, const char *tool, const struct cJSON *args, struct cJSON **result);
/* n tools/call requests sent together (verl's loop makes a turn's calls concurrently) and answered in any order:
 * result[i], or status[i] (as rl_mcp_call_tool's) with err[i] its message (malloc'd); each answer within the timeout
 * of the one before. Fails itself only for want of memory. */
vc_status rl_mcp_call_tools(rl_mcp *m, int n, const char *const *tool, const struct cJSON *const *args,
                            struct cJSON **result, vc_status *status, char **err);

/* ---- HTTP transports (mcp_http.c, libcurl; without it rl_mcp_http_open says so) ---- */
typedef struct rl_mcp_http rl_mcp_http;
int rl_mcp_have_http(void); /* 0 when built without libcurl */
/* sse: the GET stream is opened and its endpoint event awaited; headers: a JSON object of extra headers */
vc_status rl_mcp_http_open(const char *url, const struct cJSON *headers, int sse, rl_mcp_http **out);
/* POSTs one JSON-RPC message; want_id >= 0: waits for the answer with that id (*answer, the caller's) until
 * the deadline (vc_now() seconds); want_id < 0: a notification, no answer awaited */
vc_status rl_mcp_http_post(rl_mcp_http *h, const char *body, long want_id, double deadline, struct cJSON **answer);
/* n messages POSTed at once (id[i] < 0: a notification): answer[i] (the caller's), or status[i] with err[i] (malloc'd),
 * each call given `wait` seconds since the last one settled; a failure of its own (no memory) leaves no outcome */
vc_status rl_mcp_http_post_many(rl_mcp_http *h, int n, const char *const *body, const long *id, double wait,
                                struct cJSON **answer, vc_status *status, char **err);
void rl_mcp_http_set_protocol(rl_mcp_http *h, const char *version);
void rl_mcp_http_close(rl_mcp_http *h);

/* Server-sent events, fed in pieces: each complete event's type and data (lines joined by '\n') to on_event */
typedef struct rl_sse {
    char *buf, *data, *event;
    size_t n, cap, dn, dcap;
    int oom;
} rl_sse;
typedef void (*rl_sse_fn)(void *ctx, const char *event, const char *data);
void rl_sse_feed(rl_sse *s, const char *bytes, size_t n, rl_sse_fn fn, void *ctx);
void rl_sse_free(rl_sse *s);
#endif
