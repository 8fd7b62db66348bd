/* The multi-turn tool agent (agent.c, agent_tools.c): verl's tool_agent loop. */
#ifndef VC_AGENT_INTERNAL_H
#define VC_AGENT_INTERNAL_H
#include "verlc/core.h"
#include <stdint.h>

struct cJSON;
enum { RL_TOOL_GSM8K, RL_TOOL_COMMAND, RL_TOOL_PYTHON, RL_TOOL_MCP, RL_TOOL_GEO3K, RL_TOOL_ZOOM, RL_TOOL_SANDBOX,
       RL_TOOL_SEARCH };
struct vc_image;
struct vc_vl_image_config;
struct vc_reward_proc;
struct rl_mcp;
enum { RL_TRUNC_LEFT, RL_TRUNC_RIGHT, RL_TRUNC_MIDDLE };

typedef struct rl_tool {
    char name[64];
    int kind;                    /* RL_TOOL_* */
    char *command;               /* RL_TOOL_COMMAND: config.command, run by /bin/sh */
    int timeout_ms;              /* config.timeout (seconds; default 60) */
    struct vc_reward_proc *proc; /* the running program (CommandTool: started at the first call; a Python
                                  * tool class: at load) */
    struct vc_reward_proc **workers; /* CommandTool with config.num_workers N > 1: N - 1 more copies of the program
                                      * (NULL until started), so a turn's calls run N at a time */
    struct rl_mcp *mcp;          /* RL_TOOL_MCP: its server (freed with the tool that owns_mcp) */
    char *mcp_name;              /* the server's own name of the tool (without fastmcp's server prefix) */
    int owns_mcp, mcp_search;    /* mcp_search: verl's MCPSearchTool result parsing, else MCPBaseTool's */
    int shares_proc;             /* proc is another tool's (function tools of one file share its interpreter) */
    /* services: RL_TOOL_SANDBOX (verl's SandboxFusionTool: config.sandbox_fusion_url in command, default_language,
     * default_timeout (s), memory_limit_mb) and RL_TOOL_SEARCH (verl's SearchTool: retrieval_service_url in command,
     * timeout (s) in default_timeout, topk); concurrency: config.rate_limit with the global rate limit, else
     * num_workers; retry_delay: verl's 1 s (config.verlc_retry_delay) */
    char *language;
    double default_timeout, retry_delay;
    int memory_mb, concurrency, topk;
} rl_tool;

typedef struct rl_tool_call {
    char name[64];
    struct cJSON *args; /* owned */
    char *text;         /* the response when it was fetched ahead (rl_tools_prefetch; owned), NULL: not yet */
    double reward;      /* ... and its tool reward */
} rl_tool_call;

/* the tool config file: tools[n] and their schemas (a JSON array for the chat template's `tools`) */
vc_status rl_tools_load(const char *path, rl_tool **tools, int *n, struct cJSON **schemas);
void rl_tools_free(rl_tool *tools, int n);
/* later verl's multi_turn.function_tool_path: the @function_tool functions of a Python file (one interpreter
 * serves them all), appended to *tools / *n (reallocated) with their schemas as verl infers them */
vc_status rl_function_tools_load(const char *path, rl_tool **tools, int *n, struct cJSON *schemas);
/* verl's tool schema as its agent loop renders it: OpenAIFunctionToolSchema.model_validate, then
 * model_dump(exclude_unset=True, exclude_none=True) (its fields only, in their order); `where` names the
 * tool in messages */
vc_status rl_tool_schema_verl(const struct cJSON *in, const char *where, struct cJSON **out);
/* the MCP tools of tools[idx] (config.type mcp), appended to *tools / *n (capacity *cap) and their schemas */
vc_status rl_mcp_tools_load(const struct cJSON *entry, const char *path, int idx, rl_tool **tools, int *n, int *cap,
                            struct cJSON *schemas);
/* one call of an MCP tool: the text verl's MCPBaseTool (or MCPSearchTool) gives the model */
vc_status rl_mcp_tool_run(rl_tool *tool, const struct cJSON *args, char **text);
/* n calls of MCP tools of one server (tool[i]->mcp the same), sent together: their texts into text[i] (malloc'd) */
vc_status rl_mcp_tools_run_many(rl_tool *const *tool, const struct cJSON *const *args, int n, char **text);
/* runs one call for a data row (its extra_info.tools_kwargs): the tool's response text (malloc'd) and
 * reward, and the image it returns (*image, RGB; width 0: none); an unknown tool or bad arguments give verl's error
 * text, not a failure. where names the row in refusals. */
vc_status rl_tool_run(rl_tool *tools, int n_tools, const rl_tool_call *call, const struct cJSON *row, const char *where,
                      char **text, double *tool_reward, struct vc_image *image);
/* the responses of calls[0..n) (call i for data row rows[i]; rows NULL: none) to tools that run remotely and keep no state
 * (SandboxFusionTool, SearchTool), and to Python tools (a tool class's or a function_tool file's interpreter runs them
 * concurrently), fetched at once into their text and reward (verl's loop runs a turn's calls concurrently);
 * rl_tool_run then gives those */
vc_status rl_tools_prefetch(rl_tool *tools, int n_tools, rl_tool_call *const *calls, const struct cJSON *const *rows,
                            int n);
/* verl's SearchTool (tool_search.c): the texts of n calls (their arguments args[i]), sent together */
vc_status rl_search_tool_many(const rl_tool *tool, const struct cJSON *const *args, int n, char **text);
/* verl's ImageZoomInTool (tool_zoom.c): _maybe_resize_bbox (1 with out[4], 0: None), PIL's crop of a box, and one
 * call (args, the row's create_kwargs) giving the text, the tool reward and the crop (*crop, width 0: none) */
int rl_zoom_resize_bbox(const double bbox[4], int image_w, int image_h, double out[4]);
/* the most patches the processor c can give a crop the tool cuts from a src_w x src_h image (the tool's fetch_image
 * size, the crop within it, the processor's resize rounding a side up by half a step at most or raising the area to
 * its min_pixels); 0 when fetch_image refuses the image */
int64_t rl_zoom_patches_bound(const struct vc_vl_image_config *c, int src_w, int src_h);
vc_status rl_zoom_crop(const struct vc_image *in, const double box[4], struct vc_image *out);
vc_status rl_zoom_tool(const struct cJSON *args, const struct cJSON *create_kwargs, const char *where, char **text,
                       double *tool_reward, struct vc_image *crop);
/* interactions (interaction_config_path: a list `interaction` of {name, class_name, config}): verl's
 * Gsm8kInteraction is built in, any other class runs in Python (vc_interaction_py_start) */
typedef struct rl_interaction {
    char name[64];
    struct vc_reward_proc *proc; /* a Python interaction class; NULL: the built-in Gsm8kInteraction */
} rl_interaction;
vc_status rl_interactions_load(const char *path, rl_interaction **out, int *n);
void rl_interactions_free(rl_interaction *it, int n);
/* verl's start_interaction(id, **kwargs) at a response's start (kwargs: the row's interaction_kwargs) */
vc_status rl_interaction_start(rl_interaction *it, const char *id, const struct cJSON *kwargs);
/* verl's generate_response(id, messages, **kwargs) in the interacting state: the user reply (malloc'd),
 * whether the sequence ends and the turn's score (NAN: None). Gsm8kInteraction scores the last assistant
 * message with GSM8K's strict method against kwargs.ground_truth. */
vc_status rl_interaction_respond(rl_interaction *it, const char *id, const struct cJSON *messages,
                                 const struct cJSON *kwargs, char **reply, int *terminate, double *score);

/* verl's max_tool_response_length cut (in characters) with "...(truncated)" markers */
char *rl_truncate_tool_text(const char *text, int max_len, int side);
#endif
