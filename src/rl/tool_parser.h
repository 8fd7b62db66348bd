/* Tool-call parsers of verl's tool agent loop (`actor_rollout_ref.rollout.multi_turn.format`), tool_parser.c */
#ifndef VC_TOOL_PARSER_H
#define VC_TOOL_PARSER_H
#include "verlc/core.h"

struct cJSON;
struct rl_tool_call;
enum { RL_TF_HERMES, RL_TF_QWEN3_CODER, RL_TF_GLM, RL_TF_SEED, RL_TF_MINIMAX, RL_TF_KIMI, RL_TF_DSV4, RL_TF_GEMMA4,
       RL_TF_GPT_OSS };
/* a format's name (hermes, qwen3_coder, glm, seed, minimax, kimi, deepseek_v4, gemma4, gpt-oss) to RL_TF_* */
vc_status rl_tool_format_parse(const char *name, int *kind);
/* the special token that ends a generation for the parser besides EOS (glm <|observation|>, kimi <|im_end|>,
 * gemma4 <tool_call|>), NULL: none */
const char *rl_tool_format_stop(int kind);
/* The tool calls in a decoded response (special tokens kept), at most max (each call's args owned by
 * calls[i]), as verl's extract_tool_calls finds them; *content (NULL: not wanted; malloc'd) the text it keeps
 * as the assistant's content. tools: the tool schemas (qwen3_coder converts values by their parameters'
 * types, kimi matches names); pad: the tokenizer's pad token (gemma4, deepseek_v4 and gpt-oss remove it; NULL:
 * none). gpt-oss's arguments are not checked (verl leaves them to the call): text that is not JSON comes as a
 * JSON string.
 * The number of calls, or -1 when out of memory. */
int rl_parse_tool_calls_as(int kind, const char *text, const char *pad, const struct cJSON *tools,
                           struct rl_tool_call *calls, int max, char **content);
#endif
