/* Multi-turn tool rollouts (verl's tool_agent loop) with the Qwen3 tokenizer and chat template and a
 * scripted rollout engine (the trainer's generation hook), so the loop's bookkeeping is checked exactly:
 * the prompt rendered with the tool schemas; a hermes tool call run through verl's Gsm8kTool with the
 * row's tools_kwargs; the tool response rendered as the template renders a tool turn; response mask 0
 * and log-prob 0 on the tool tokens; the next turn continuing the same sequence; rows without a call,
 * single_turn_agent rows, max_assistant_turns, the response budget, num_turns. Also the hermes parser,
 * the tool's reply text (Python repr quoting) and verl's truncation of long tool responses. */
#include "../../src/rl/agent_internal.h"
#include "agent_test_util.h"
#include "../../src/rl/tool_parser.h"
#include "../../src/rl/trainer_internal.h"
#include "verlc/chat_template.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[128];

static void test_parser(void) {
    rl_tool_call c[4];
    int n = rl_parse_tool_calls_as(RL_TF_HERMES, "a<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>b"
                                "<tool_call>{bad json}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"
                                "<tool_call>{\"name\": \"h\", \"arguments\": {}}", NULL, NULL, c, 4, NULL);
    CHECK(n == 2 && !strcmp(c[0].name, "f") && !strcmp(c[1].name, "g"));
    CHECK(n >= 1 && cJSON_GetObjectItem(c[0].args, "x")->valueint == 1);
    for (int i = 0; i < n; i++) cJSON_Delete(c[i].args);
    CHECK(rl_parse_tool_calls_as(RL_TF_HERMES, "no calls here", NULL, NULL, c, 4, NULL) == 0);
    CHECK(rl_parse_tool_calls_as(RL_TF_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>x2", NULL, NULL, c, 1,
                                 NULL) == 1);
    cJSON_Delete(c[0].args);
    /* truncation by characters, verl's markers */
    char *s = rl_truncate_tool_text("h\xc3\xa9llo world", 4, RL_TRUNC_LEFT);
    CHECK_MSG(!strcmp(s, "h\xc3\xa9ll...(truncated)"), "left: %s", s);
    free(s);
    s = rl_truncate_tool_text("hello world", 4, RL_TRUNC_RIGHT);
    CHECK_MSG(!strcmp(s, "(truncated)...orld"), "right: %s", s);
    free(s);
    s = rl_truncate_tool_text("hello world", 4, RL_TRUNC_MIDDLE);
    CHECK_MSG(!strcmp(s, "he...(truncated)...ld"), "middle: %s", s);
    free(s);
    s = rl_truncate_tool_text("short", 256, RL_TRUNC_MIDDLE);
    CHECK(!strcmp(s, "short"));
    free(s);
    /* Gsm8kTool's replies: Python's repr of the answer, the flexible score */
    rl_tool tools[1] = { { "calc_gsm8k_reward", RL_TOOL_GSM8K } };
    cJSON *row = cJSON_Parse("{\"extra_info\": {\"tools_kwargs\": {\"calc_gsm8k_reward\": {\"create_kwargs\": "
                             "{\"ground_truth\": \"72\"}}}}}");
    static const agent_tool_case CASES[] = {
        { "{\"answer\": \"72\"}", "Current parsed answer='72' reward=1.0", 0.0 },
        { "{\"answer\": \"#### 71\"}", "Current parsed answer='#### 71' reward=0.0", -0.05 },
        { "{\"answer\": \"it's 72\"}", "Current parsed answer=\"it's 72\" reward=1.0", 0.0 },
        { "{\"answer\": 72}", "Current parsed answer='72' reward=1.0", 0.0 },
        /* str() of what json.loads made: a float keeps its ".0", a list its repr */
        { "{\"answer\": 72.0}", "Current parsed answer='72.0' reward=0.0", -0.05 },
        { "{\"answer\": [7, 2]}", "Current parsed answer='[7, 2]' reward=0.0", -0.05 },
        { "{\"answer\": true}", "Current parsed answer='True' reward=0", -0.05 },
        /* no number: verl's compute_score returns the int 0 (checked against verl's Gsm8kTool run by vc_tool_py_start) */
        { "{\"answer\": \"seventy\"}", "Current parsed answer='seventy' reward=0", -0.05 },
    };
    agent_test_tool_cases(tools, 1, "calc_gsm8k_reward", row, CASES, sizeof CASES / sizeof CASES[0]);
    /* Geo3kTool's: the answer graded as it is (mathruler), a fresh instance per call */
    rl_tool geo[1] = { { "calc_geo3k_reward", RL_TOOL_GEO3K } };
    cJSON *grow = cJSON_Parse("{\"extra_info\": {\"tools_kwargs\": {\"calc_geo3k_reward\": {\"create_kwargs\": "
                              "{\"ground_truth\": \"2 \\\\sqrt { 221 }\"}}}}}");
    static const agent_tool_case GEO[] = {
        { "{\"answer\": \"2\\\\sqrt{221}\"}", "Current parsed answer='2\\\\sqrt{221}' reward=1.0", 0.0 },
        { "{\"answer\": \"\\\\sqrt{884}\"}", "Current parsed answer='\\\\sqrt{884}' reward=1.0", 0.0 },
        { "{\"answer\": \"29.73\"}", "Current parsed answer='29.73' reward=0.0", -0.05 },
        { "{\"answer\": \"\\\\boxed{2\\\\sqrt{221}}\"}", "Current parsed answer='\\\\boxed{2\\\\sqrt{221}}' reward=1.0", 0.0 }, /* \\boxed: an unknown macro to pylatexenc */
        { "{}", "Current parsed answer='' reward=0.0", -0.05 },
    };
    agent_test_tool_cases(geo, 1, "calc_geo3k_reward", grow, GEO, sizeof GEO / sizeof GEO[0]);
    cJSON_Delete(grow);
    rl_tool_call bad = { "calculator", cJSON_Parse("{}") };
    char *text = NULL;
    double r = 0;
    CHECK_OK(rl_tool_run(tools, 1, &bad, row, "test row", &text, &r, &(vc_image){ 0 }));
    CHECK_MSG(text && !strcmp(text, "Error when executing tool: 'calculator'"), "unknown tool: %s", text);
    free(text);
    cJSON_Delete(bad.args);
    cJSON_Delete(row);
}

/* ---- the scripted engine: per call (turn), per request sample, a text to answer ---- */
typedef struct {
    vc_tokenizer *tok;
    int calls;
    const char *const *script[3]; /* script[turn][state] */
    int state_of[8];              /* request order -> state, for turns > 0 (filled by the test's knowledge) */
} script_ctx;

static vc_status scripted(void *p, const vc_rollout_request *r, int n, const vc_sampling *s, vc_rollout_sample **out,
                          int *n_out) {
    script_ctx *c = p;
    int total = 0, k = 0;
    vc_rollout_sample *smp = agent_test_samples(r, n, &total);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < r[i].n_samples; j++, k++) {
            /* turn 0: state = 2 i + j (2 samples per prompt); later turns: the i-th still active state */
            int state = c->calls == 0 ? 2 * i + j : c->state_of[i];
            const char *text = c->script[c->calls] ? c->script[c->calls][state] : NULL;
            if (!text) { fprintf(stderr, "script: call %d state %d has no text\n", c->calls, state); text = ""; }
            smp[k] = agent_test_sample(c->tok, text, i, j, s->max_new_tokens, -0.25f, -0.01f);
        }
    c->calls++;
    *out = smp;
    *n_out = total;
    return VC_OK;
}

static const char *CALL = "Let me check.<tool_call>\n{\"name\": \"calc_gsm8k_reward\", \"arguments\": {\"answer\": \"72\"}}\n"
                          "</tool_call><|im_end|>";
static const char *TURN0[] = { NULL, "#### 5<|im_end|>", NULL, "#### 9<|im_end|>" };
static const char *TURN1[] = { "So #### 72<|im_end|>", NULL, "So #### 72<|im_end|>", NULL };

static vc_rl_trainer *make_trainer(const char *tok_dir, const char *extra_ov, vc_config **cfg_out) {
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    t->world = 1;
    t->seed = 3;
    CHECK_OK(vc_tokenizer_load(tok_dir, &t->tok));
    CHECK_OK(vc_chat_template_load(tok_dir, &t->tmpl));
    char tools[300], data[300], o1[400];
    snprintf(tools, sizeof tools, "%s/tools.yaml", dir);
    snprintf(data, sizeof data, "%s/data.jsonl", dir);
    snprintf(o1, sizeof o1, "actor_rollout_ref.rollout.multi_turn.tool_config_path=%s", tools);
    char *ov[] = { "actor_rollout_ref.rollout.multi_turn.enable=true", o1, (char *)extra_ov };
    CHECK_OK(vc_config_load(NULL, extra_ov ? 3 : 2, ov, cfg_out));
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1 };
    CHECK_OK(vc_rl_dataset_load(data, t->tok, t->tmpl, &o, &t->train));
    CHECK_OK(rl_agent_open(t, *cfg_out));
    CHECK(t->agent != NULL);
    return t;
}

static void free_trainer(vc_rl_trainer *t, vc_config *cfg) {
    rl_agent_free(t->agent);
    vc_rl_dataset_free(t->train);
    vc_tokenizer_free(t->tok);
    vc_chat_template_free(t->tmpl);
    vc_config_free(cfg);
    free(t);
}

static char *decode(vc_tokenizer *tok, const int32_t *ids, int64_t n) {
    char *s = NULL;
    size_t len = 0;
    CHECK_OK(vc_tokenizer_decode(tok, ids, (size_t)n, 0, &s, &len));
    return s;
}

static void test_loop(const char *tok_dir) {
    vc_config *cfg = NULL;
    vc_rl_trainer *t = make_trainer(tok_dir, NULL, &cfg);
    script_ctx sc = { t->tok, 0, { TURN0, TURN1, NULL }, { 0, 2 } };
    const char *t0[] = { CALL, TURN0[1], CALL, TURN0[3] };
    sc.script[0] = t0;
    t->gen = scripted;
    t->gen_ctx = &sc;
    uint32_t idx[2] = { 0, 1 };
    vc_sampling s = { .temperature = 1, .top_p = 1, .max_new_tokens = 200 };
    rl_batch b;
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 2, 7, &b));
    CHECK(b.B == 4 && sc.calls == 2);
    /* row 0 (tool_agent by default): the prompt holds the tool schema */
    char *prompt = decode(t->tok, b.ids, b.plen[0]);
    CHECK_MSG(strstr(prompt, "calc_gsm8k_reward") && strstr(prompt, "<tools>"), "prompt lacks the tools: %s", prompt);
    CHECK(b.plen[0] > t->train->p[0].len);
    free(prompt);
    /* its response: the call, the tool turn (mask 0, log-prob 0), the final answer */
    char *resp = decode(t->tok, b.ids + b.cu[0] + b.plen[0], b.rlen[0]);
    const char *want_tool = "<|im_start|>user\n<tool_response>\nCurrent parsed answer='72' reward=1.0\n</tool_response>"
                            "<|im_end|>\n<|im_start|>assistant\n";
    char *tool_at = resp ? strstr(resp, "<|im_start|>user") : NULL;
    CHECK_MSG(tool_at && !strncmp(tool_at, want_tool, strlen(want_tool)), "response: %s", resp ? resp : "(null)");
    CHECK_MSG(resp && strstr(resp, "</tool_call><|im_end|>") && strstr(resp, "So #### 72<|im_end|>"), "response: %s", resp);
    int32_t *ids = NULL;
    size_t n_call = 0, n_tool = 0, n_fin = 0;
    CHECK_OK(vc_tokenizer_encode(t->tok, CALL, strlen(CALL), 0, &ids, &n_call));
    free(ids);
    CHECK_OK(vc_tokenizer_encode(t->tok, want_tool, strlen(want_tool), 0, &ids, &n_tool));
    free(ids);
    CHECK_OK(vc_tokenizer_encode(t->tok, TURN1[0], strlen(TURN1[0]), 0, &ids, &n_fin));
    free(ids);
    CHECK_MSG(b.rlen[0] == (int64_t)(n_call + n_tool + n_fin), "response of %lld tokens, want %zu + %zu + %zu",
              (long long)b.rlen[0], n_call, n_tool, n_fin);
    int ok = 1;
    for (int64_t j = 0; j < b.rlen[0]; j++) {
        int tool = j >= (int64_t)n_call && j < (int64_t)(n_call + n_tool);
        ok &= b.mask[j] == (tool ? 0.0f : 1.0f) && (tool ? b.rollout_logp[j] == 0.0f : b.rollout_logp[j] < 0.0f);
    }
    CHECK_MSG(ok, "mask / log-probs of the tool turn");
    free(resp);
    /* row 1 (second sample of prompt 0): no call, one turn */
    CHECK(b.rlen[1] > 0 && b.rlen[1] < 8 && b.mask[1 * b.T + b.rlen[1] - 1] == 1.0f);
    /* rows 2, 3: prompt 1 is a single_turn_agent row: the dataset prompt, the call text is not run */
    CHECK(b.plen[2] == t->train->p[1].len && !memcmp(b.ids + b.cu[2], t->train->p[1].ids, sizeof(int32_t) * (size_t)b.plen[2]));
    CHECK(b.rlen[2] == (int64_t)n_call);
    rl_metrics met = { 0 };
    CHECK_OK(rl_agent_metrics(t, &met));
    double v = 0;
    CHECK(rl_metrics_get(&met, "num_turns/max", &v) && v == 4); /* 2 assistant + 1 tool + 1 */
    CHECK(rl_metrics_get(&met, "num_turns/min", &v) && v == 2);
    CHECK(rl_metrics_get(&met, "num_turns/mean", &v) && fabs(v - 2.5) < 1e-12);
    rl_metrics_free(&met);
    rl_batch_free(&b);
    /* a budget the tool turn does not fit: verl stops without appending it */
    sc.calls = 0;
    s.max_new_tokens = (int)(n_call + 5);
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 2, 7, &b));
    CHECK(sc.calls == 1 && b.rlen[0] == (int64_t)n_call);
    rl_batch_free(&b);
    free_trainer(t, cfg);
    /* max_assistant_turns=1: the call is not run */
    t = make_trainer(tok_dir, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=1", &cfg);
    sc.calls = 0;
    sc.tok = t->tok;
    t->gen = scripted;
    t->gen_ctx = &sc;
    s.max_new_tokens = 200;
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 2, 7, &b));
    CHECK(sc.calls == 1 && b.rlen[0] == (int64_t)n_call);
    rl_batch_free(&b);
    free_trainer(t, cfg);
    /* later verl's qwen3_coder format: the XML call runs the same tool, its string parameter by the schema */
    static const char *XCALL = "Let me check.<tool_call>\n<function=calc_gsm8k_reward>\n<parameter=answer>\n72\n"
                               "</parameter>\n</function>\n</tool_call><|im_end|>";
    t = make_trainer(tok_dir, "actor_rollout_ref.rollout.multi_turn.format=qwen3_coder", &cfg);
    const char *x0[] = { XCALL, TURN0[1], XCALL, TURN0[3] };
    script_ctx xc = { t->tok, 0, { x0, TURN1, NULL }, { 0, 2 } };
    t->gen = scripted;
    t->gen_ctx = &xc;
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &s, 2, 7, &b));
    resp = decode(t->tok, b.ids + b.cu[0] + b.plen[0], b.rlen[0]);
    CHECK_MSG(xc.calls == 2 && resp && strstr(resp, want_tool) && strstr(resp, "So #### 72"), "qwen3_coder: %s", resp);
    free(resp);
    rl_batch_free(&b);
    free_trainer(t, cfg);
    vc_config *bad = NULL;
    char *ov[] = { "actor_rollout_ref.rollout.multi_turn.enable=true", "actor_rollout_ref.rollout.multi_turn.format=harmony",
                   "actor_rollout_ref.rollout.multi_turn.tool_config_path=x.yaml" };
    CHECK_OK(vc_config_load(NULL, 3, ov, &bad));
    vc_rl_trainer bt = { 0 };
    CHECK(rl_agent_open(&bt, bad) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "format=harmony"));
    vc_config_free(bad);
}

static void write_file(const char *name, const char *text);

/* interaction_config_path with verl's Gsm8kInteraction (py 0) or a Python interaction class doing the same
 * (py 1; it checks its config, start_interaction's kwargs and verl's message list: the prompt, then each
 * assistant text followed by its user turn): a wrong answer gets the user's retry turn (mask 0) and the
 * loop goes on; a right one gets "Your response is correct!" and ends */
static void test_interaction(const char *tok_dir, int py) {
    if (py) {
        write_file("vinter.py",
                   "class Judge:\n"
                   "    def __init__(self, config):\n"
                   "        assert config == {'strict': True, 'name': 'judge'}, config\n"
                   "        self.gt = {}\n"
                   "    async def start_interaction(self, instance_id=None, ground_truth=None, **kwargs):\n"
                   "        assert kwargs['query'] == 'What is 8 * 9?'\n"
                   "        self.gt[instance_id] = ground_truth\n"
                   "    async def generate_response(self, instance_id, messages, **kwargs):\n"
                   "        roles = [m['role'] for m in messages]\n"
                   "        assert roles == ['user', 'assistant'] * (len(roles) // 2), roles\n"
                   "        assert messages[0]['content'] == 'What is 8 * 9?'\n"
                   "        if messages[-1]['content'] == '#### ' + self.gt[instance_id]:\n"
                   "            return True, 'Your response is correct!', 1.0, {}\n"
                   "        return False, 'Your response is incorrect! You need to reflect on your answer and try again.', 0.0, {}\n");
        setenv("PYTHONPATH", dir, 1);
    }
    write_file("inter.yaml", py ? "interaction:\n  - name: judge\n    class_name: vinter.Judge\n    config: {strict: true}\n"
                                : "interaction:\n  - name: gsm8k\n    class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction\n"
                                  "    config: {}\n");
    char row[600];
    snprintf(row, sizeof row,
             "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 8 * 9?\"}], "
             "\"reward_model\": {\"ground_truth\": \"72\"}, \"extra_info\": {\"interaction_kwargs\": "
             "{\"name\": \"%s\", \"query\": \"What is 8 * 9?\", \"ground_truth\": \"72\"}}}\n", py ? "judge" : "gsm8k");
    write_file("data.jsonl", row);
    char o[400];
    snprintf(o, sizeof o, "actor_rollout_ref.rollout.multi_turn.interaction_config_path=%s/inter.yaml", dir);
    vc_config *cfg = NULL;
    vc_rl_trainer *t = make_trainer(tok_dir, o, &cfg);
    static const char *T0[] = { "#### 71<|im_end|>", "#### 72<|im_end|>" }, *T1[] = { "#### 72<|im_end|>" };
    script_ctx sc = { t->tok, 0, { T0, T1, NULL }, { 0 } };
    t->gen = scripted;
    t->gen_ctx = &sc;
    uint32_t idx[1] = { 0 };
    vc_sampling s = { .temperature = 1, .top_p = 1, .max_new_tokens = 200 };
    rl_batch b;
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 1, &s, 2, 7, &b));
    CHECK(b.B == 2 && sc.calls == 2);
    static const char *WRONG = "<|im_start|>user\nYour response is incorrect! You need to reflect on your answer and try "
                               "again.<|im_end|>\n<|im_start|>assistant\n",
                      *RIGHT = "<|im_start|>user\nYour response is correct!<|im_end|>\n<|im_start|>assistant\n";
    char want[600];
    snprintf(want, sizeof want, "#### 71<|im_end|>%s#### 72<|im_end|>%s", WRONG, RIGHT);
    char *r0 = b.rlen[0] > 0 ? decode(t->tok, b.ids + b.cu[0] + b.plen[0], b.rlen[0]) : NULL;
    CHECK_MSG(r0 && !strcmp(r0, want), "response 0: %s", r0 ? r0 : "(null)");
    free(r0);
    snprintf(want, sizeof want, "#### 72<|im_end|>%s", RIGHT);
    char *r1 = b.rlen[1] > 0 ? decode(t->tok, b.ids + b.cu[1] + b.plen[1], b.rlen[1]) : NULL;
    CHECK_MSG(r1 && !strcmp(r1, want), "response 1: %s", r1 ? r1 : "(null)");
    free(r1);
    /* mask: the generated parts only */
    int32_t *ids = NULL;
    size_t na = 0, nw = 0;
    CHECK_OK(vc_tokenizer_encode(t->tok, T0[0], strlen(T0[0]), 0, &ids, &na));
    free(ids);
    CHECK_OK(vc_tokenizer_encode(t->tok, WRONG, strlen(WRONG), 0, &ids, &nw));
    free(ids);
    int ok = b.rlen[0] > (int64_t)(2 * na + nw);
    for (int64_t j = 0; ok && j < b.rlen[0]; j++) {
        int gen = j < (int64_t)na || (j >= (int64_t)(na + nw) && j < (int64_t)(2 * na + nw));
        ok &= b.mask[j] == (gen ? 1.0f : 0.0f);
    }
    CHECK_MSG(ok, "interaction turns must have mask 0, generations 1");
    rl_batch_free(&b);
    free_trainer(t, cfg);
    /* a row without interaction_kwargs.name is refused */
    write_file("data.jsonl", "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"1+1?\"}], "
                             "\"reward_model\": {\"ground_truth\": \"2\"}}\n");
    t = make_trainer(tok_dir, o, &cfg);
    t->gen = scripted;
    t->gen_ctx = &sc;
    vc_status st = rl_agent_rollout(t, t->train, idx, 1, &s, 2, 7, &b);
    CHECK_MSG(st == VC_ERR_MISSING && strstr(vc_last_error(), "interaction_kwargs.name"), "%s", vc_last_error());
    free_trainer(t, cfg);
    if (py) unsetenv("PYTHONPATH");
}

static void write_file(const char *name, const char *text) {
    char p[300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK_OK(vc_write_file_atomic(p, text, strlen(text)));
}

/* verlc.tools.CommandTool: a program answering one JSON line per call; hangs and bad answers become
 * verl's error text for the model, and the program is restarted */
static void test_command_tool(void) {
    write_file("cmd_tools.yaml",
               "tools:\n"
               "  - class_name: verlc.tools.CommandTool\n    config:\n"
               "      command: \"sed -u 's/.*\\\"answer\\\":\\\"\\\\([^\\\"]*\\\\)\\\".*/{\\\"text\\\": \\\"got \\\\1\\\", \\\"reward\\\": 0.5}/'\"\n"
               "    tool_schema: {type: function, function: {name: echo, description: d}}\n"
               "  - class_name: verlc.tools.CommandTool\n    config: {command: 'sleep 5', timeout: 0.3}\n"
               "    tool_schema: {type: function, function: {name: slow, description: d}}\n"
               "  - class_name: verlc.tools.CommandTool\n    config: {command: \"sed -u 's/.*/{\\\"x\\\": 1}/'\"}\n"
               "    tool_schema: {type: function, function: {name: mute, description: d}}\n");
    char p[300];
    snprintf(p, sizeof p, "%s/cmd_tools.yaml", dir);
    rl_tool *tools = NULL;
    int n = 0;
    cJSON *sch = NULL;
    CHECK_OK(rl_tools_load(p, &tools, &n, &sch));
    CHECK(n == 3 && cJSON_GetArraySize(sch) == 3);
    static const struct { const char *name, *want; double reward; } CASES[] = {
        { "echo", "got 72", 0.5 },
        { "slow", "Error when executing tool: ", 0.0 },
        { "mute", "Error when executing tool: the program's answer has no \"text\"", 0.0 },
        { "echo", "got 72", 0.5 }, /* still running */
    };
    for (size_t i = 0; n == 3 && i < sizeof CASES / sizeof CASES[0]; i++) {
        rl_tool_call call = { 0 };
        snprintf(call.name, sizeof call.name, "%s", CASES[i].name);
        call.args = cJSON_Parse("{\"answer\": \"72\"}");
        char *text = NULL;
        double r = -1, t0 = vc_now();
        CHECK_OK(rl_tool_run(tools, n, &call, NULL, "test row", &text, &r, &(vc_image){ 0 }));
        CHECK_MSG(text && !strncmp(text, CASES[i].want, strlen(CASES[i].want)) && r == CASES[i].reward,
                  "%s: %s (%g)", CASES[i].name, text ? text : "(null)", r);
        CHECK_MSG(vc_now() - t0 < 3, "%s took %.1f s", CASES[i].name, vc_now() - t0);
        free(text);
        cJSON_Delete(call.args);
    }
    rl_tools_free(tools, n);
    cJSON_Delete(sch);
    write_file("cmd_tools.yaml", "tools:\n  - class_name: verlc.tools.CommandTool\n    tool_schema: {type: function, function: {name: x, description: d}}\n");
    CHECK(rl_tools_load(p, &tools, &n, &sch) == VC_ERR_FORMAT && strstr(vc_last_error(), "config.command"));
}

/* calls[n] with these arguments to tool `name`, fetched ahead together: texts and rewards into text[] / reward[] */
static void prefetch_calls(rl_tool *tools, int n_tools, const char *name, const char *const *args, int n, char **text,
                           double *reward) {
    rl_tool_call c[8], *ptr[8];
    for (int i = 0; i < n && i < 8; i++) {
        c[i] = (rl_tool_call){ .args = cJSON_Parse(args[i]) };
        snprintf(c[i].name, sizeof c[i].name, "%s", name);
        ptr[i] = &c[i];
    }
    CHECK_OK(rl_tools_prefetch(tools, n_tools, ptr, NULL, n));
    for (int i = 0; i < n && i < 8; i++) {
        text[i] = c[i].text, reward[i] = c[i].reward;
        cJSON_Delete(c[i].args);
    }
}

/* config.num_workers: a turn's calls to a CommandTool go to that many copies of the program at once. Each call
 * leaves a file and waits (5 s at most) until it sees another call's: one copy taking calls one after another would
 * answer its first call with 1; every answer is its own call's */
static void test_command_pool(void) {
    char marks[300], prog[2048], yaml[2600];
    snprintf(marks, sizeof marks, "%s/marks", dir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", marks, marks);
    CHECK(system(cmd) == 0);
    snprintf(prog, sizeof prog,
             "while read -r line; do\n"
             "  a=$(printf '%%s' \"$line\" | sed 's/.*\"answer\":\"\\([^\"]*\\)\".*/\\1/')\n"
             "  touch %s/$$.$a; i=0\n"
             "  while [ $(ls %s | wc -l) -lt 2 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done\n"
             "  echo \"{\\\"text\\\": \\\"$a $(ls %s | wc -l) $$\\\"}\"\n"
             "done\n", marks, marks, marks);
    write_file("pool.sh", prog);
    snprintf(yaml, sizeof yaml, "tools:\n  - class_name: verlc.tools.CommandTool\n"
             "    config: {command: 'sh %s/pool.sh', num_workers: 4, timeout: 20}\n"
             "    tool_schema: {type: function, function: {name: pool, description: d}}\n", dir);
    write_file("pool_tools.yaml", yaml);
    char p[300];
    snprintf(p, sizeof p, "%s/pool_tools.yaml", dir);
    rl_tool *tools = NULL;
    int n = 0;
    cJSON *sch = NULL;
    CHECK_OK(rl_tools_load(p, &tools, &n, &sch));
    const char *args[6] = { "{\"answer\": \"a0\"}", "{\"answer\": \"a1\"}", "{\"answer\": \"a2\"}",
                            "{\"answer\": \"a3\"}", "{\"answer\": \"a4\"}", "{\"answer\": \"a5\"}" };
    char *text[6] = { 0 };
    double reward[6];
    if (n == 1) prefetch_calls(tools, n, "pool", args, 6, text, reward);
    int pids[6] = { 0 }, distinct = 0;
    for (int i = 0; i < 6; i++) {
        char want[8];
        int seen = 0;
        snprintf(want, sizeof want, "a%d ", i);
        CHECK_MSG(text[i] && !strncmp(text[i], want, 3) && sscanf(text[i] + 3, "%d %d", &seen, &pids[i]) == 2 &&
                  seen >= 2, "call %d: %s", i, text[i] ? text[i] : "(null)");
        int again = 0;
        for (int j = 0; j < i; j++) again |= pids[j] == pids[i];
        distinct += !again;
        free(text[i]);
    }
    CHECK_MSG(distinct >= 2 && distinct <= 4, "%d copies of the program answered", distinct);
    rl_tools_free(tools, n);
    cJSON_Delete(sch);
    write_file("pool_tools.yaml", "tools:\n  - class_name: verlc.tools.CommandTool\n    config: {command: cat, num_workers: 0}\n"
                                  "    tool_schema: {type: function, function: {name: x, description: d}}\n");
    CHECK(rl_tools_load(p, &tools, &n, &sch) == VC_ERR_FORMAT && strstr(vc_last_error(), "num_workers"));
}

/* a turn's calls to a Python tool run concurrently in its interpreter (asyncio.gather, as verl's loop): calls that
 * wait for each other all finish, one raising among them gets its error text; a call past config.verlc_timeout
 * gets verl's error text while the others answer; a call that blocks the interpreter gets it killed (its batch's
 * calls the failure's text) and restarted for the next call */
static void python_gather(const char *yaml) {
    write_file("py_tools.yaml", "tools:\n  - class_name: vtools.GatherTool\n    config: {type: native, verlc_timeout: 0.5}\n"
                                "    tool_schema: {type: function, function: {name: meet, description: d}}\n");
    rl_tool *tools = NULL;
    int n = 0;
    cJSON *sch = NULL;
    CHECK_OK(rl_tools_load(yaml, &tools, &n, &sch));
    if (n != 1) return;
    char *text[8] = { 0 };
    double rw[8];
    static const char *const A[] = { "{\"q\": \"a0\", \"key\": \"a\", \"n\": 4}", "{\"mode\": \"boom\"}",
                                     "{\"q\": \"a1\", \"key\": \"a\", \"n\": 4}", "{\"q\": \"a2\", \"key\": \"a\", \"n\": 4}",
                                     "{\"q\": \"a3\", \"key\": \"a\", \"n\": 4}" };
    prefetch_calls(tools, n, "meet", A, 5, text, rw);
    static const char *const WANT[] = { "a0 with 4", "Error when executing tool: boom", "a1 with 4", "a2 with 4", "a3 with 4" };
    for (int i = 0; i < 5; i++) {
        CHECK_MSG(text[i] && !strcmp(text[i], WANT[i]) && rw[i] == (i == 1 ? 0.0 : 0.25), "gathered call %d: %s (%g)", i,
                  text[i] ? text[i] : "(null)", rw[i]);
        free(text[i]);
    }
    static const char *const B[] = { "{\"mode\": \"slow\"}", "{\"q\": \"b0\", \"key\": \"b\", \"n\": 2}",
                                     "{\"q\": \"b1\", \"key\": \"b\", \"n\": 2}" };
    prefetch_calls(tools, n, "meet", B, 3, text, rw);
    CHECK_MSG(text[0] && !strcmp(text[0], "Error when executing tool: timed out after 0.5 s") && text[1] &&
              !strcmp(text[1], "b0 with 2") && text[2] && !strcmp(text[2], "b1 with 2"), "timed out among others: %s | %s | %s",
              text[0] ? text[0] : "", text[1] ? text[1] : "", text[2] ? text[2] : "");
    for (int i = 0; i < 3; i++) free(text[i]);
    static const char *const C[] = { "{\"mode\": \"hang\"}", "{\"q\": \"c0\", \"key\": \"c\", \"n\": 1}" };
    prefetch_calls(tools, n, "meet", C, 2, text, rw);
    CHECK_MSG(text[0] && strstr(text[0], "Error when executing tool: ") && strstr(text[0], "timed out") && text[1] &&
              !strcmp(text[0], text[1]), "a blocked interpreter: %s | %s", text[0] ? text[0] : "", text[1] ? text[1] : "");
    for (int i = 0; i < 2; i++) free(text[i]);
    static const char *const D[] = { "{\"q\": \"d0\", \"key\": \"d\", \"n\": 2}", "{\"q\": \"d1\", \"key\": \"d\", \"n\": 2}" };
    prefetch_calls(tools, n, "meet", D, 2, text, rw);
    CHECK_MSG(text[0] && !strcmp(text[0], "d0 with 2") && text[1] && !strcmp(text[1], "d1 with 2"), "after the restart: %s",
              text[0] ? text[0] : "(null)");
    for (int i = 0; i < 2; i++) free(text[i]);
    rl_tools_free(tools, n);
    cJSON_Delete(sch);
}

/* any other tool class runs in Python as verl's loop calls it (create, execute, release per call); an exception
 * is verl's error text; a class that cannot be built stops the load naming it */
static void test_python_tool(void) {
    if (system("python3 -c 'import json' > /dev/null 2>&1") != 0) {
        printf("skipping Python tool test: no python3\n");
        return;
    }
    write_file("vtools.py",
               "class EchoTool:\n"
               "    def __init__(self, config, tool_schema):\n"
               "        self.prefix, self.live = config.get('prefix', ''), {}\n"
               "        print('built', tool_schema)\n"
               "    async def create(self, instance_id=None, **kwargs):\n"
               "        iid = 'i%d' % len(self.live)\n"
               "        self.live[iid] = kwargs.get('create_kwargs', {})\n"
               "        return iid, None\n"
               "    async def execute(self, instance_id, parameters, **kwargs):\n"
               "        gt = self.live[instance_id].get('ground_truth')\n"
               "        if parameters.get('answer') == 'boom': raise ValueError('boom')\n"
               "        r = type('R', (), {})(); r.text = f\"{self.prefix}{parameters['answer']} vs {gt} live={len(self.live)}\"\n"
               "        return r, 1.0 if parameters['answer'] == gt else 0.0, {}\n"
               "    async def release(self, instance_id, **kwargs):\n"
               "        del self.live[instance_id]\n"
               "class GatherTool:\n"
               "    groups = {}\n"
               "    def __init__(self, config, tool_schema): pass\n"
               "    async def create(self, create_kwargs=None, **kwargs): return 'x', None\n"
               "    async def execute(self, instance_id, p, **kwargs):\n"
               "        import asyncio, time\n"
               "        if p.get('mode') == 'hang': time.sleep(30)\n"
               "        if p.get('mode') == 'slow': await asyncio.sleep(30)\n"
               "        if p.get('mode') == 'boom': raise ValueError('boom')\n"
               "        g = GatherTool.groups.setdefault(p['key'], [0, asyncio.Event()])\n"
               "        g[0] += 1\n"
               "        if g[0] == p['n']: g[1].set()\n"
               "        await asyncio.wait_for(g[1].wait(), 5)\n"
               "        return f\"{p['q']} with {g[0]}\", 0.25, {}\n"
               "    async def release(self, instance_id, **kwargs): pass\n"
               "class Broken:\n"
               "    def __init__(self, config, tool_schema): raise RuntimeError('no service')\n");
    setenv("PYTHONPATH", dir, 1);
    write_file("py_tools.yaml", "tools:\n  - class_name: vtools.EchoTool\n    config: {type: native, prefix: 'got '}\n"
                                "    tool_schema: {type: function, function: {name: echo, description: d}}\n");
    char p[300];
    snprintf(p, sizeof p, "%s/py_tools.yaml", dir);
    rl_tool *tools = NULL;
    int n = 0;
    cJSON *sch = NULL;
    CHECK_OK(rl_tools_load(p, &tools, &n, &sch));
    cJSON *row = cJSON_Parse("{\"extra_info\": {\"tools_kwargs\": {\"echo\": {\"create_kwargs\": {\"ground_truth\": \"72\"}}}}}");
    static const struct { const char *answer, *want; double reward; } CASES[] = {
        { "72", "got 72 vs 72 live=1", 1.0 },
        { "boom", "Error when executing tool: boom", 0.0 },
        { "5", "got 5 vs 72 live=1", 0.0 }, /* the raising call's instance was released too */
    };
    for (size_t i = 0; n == 1 && i < sizeof CASES / sizeof CASES[0]; i++) {
        rl_tool_call call = { 0 };
        snprintf(call.name, sizeof call.name, "echo");
        char args[64];
        snprintf(args, sizeof args, "{\"answer\": \"%s\"}", CASES[i].answer);
        call.args = cJSON_Parse(args);
        char *text = NULL;
        double r = -1;
        CHECK_OK(rl_tool_run(tools, n, &call, row, "test row", &text, &r, &(vc_image){ 0 }));
        CHECK_MSG(text && !strcmp(text, CASES[i].want) && r == CASES[i].reward, "python tool %s: %s (%g)",
                  CASES[i].answer, text ? text : "(null)", r);
        free(text);
        cJSON_Delete(call.args);
    }
    cJSON_Delete(row);
    rl_tools_free(tools, n);
    cJSON_Delete(sch);
    python_gather(p);
    static const struct { const char *yaml, *needle; vc_status st; } BAD[] = {
        { "tools:\n  - class_name: vtools.Broken\n    tool_schema: {type: function, function: {name: b, description: d}}\n", "no service", VC_ERR_ARG },
        { "tools:\n  - class_name: nomodule_verlc.T\n    tool_schema: {type: function, function: {name: b, description: d}}\n", "nomodule_verlc", VC_ERR_ARG },
        { "tools:\n  - class_name: vtools.EchoTool\n    config: {type: mcp}\n    tool_schema: {type: function, function: {name: b, description: d}}\n",
          "MCPBaseTool", VC_ERR_UNSUPPORTED },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        write_file("py_tools.yaml", BAD[i].yaml);
        vc_status st = rl_tools_load(p, &tools, &n, &sch);
        CHECK_MSG(st == BAD[i].st && strstr(vc_last_error(), BAD[i].needle) && strstr(vc_last_error(), "tools[0]"),
                  "bad tool %zu: %s %s", i, vc_status_name(st), vc_last_error());
    }
    unsetenv("PYTHONPATH");
}

/* later verl's function_tool_path: @function_tool functions (schema= given, so transformers is not needed) beside
 * the tool config's tools, their return values read as verl reads them, exceptions as verl's text; a name
 * that collides with the tool config's, a missing file and a file without tools are refused */
static void test_function_tools(const char *tok_dir) {
    if (system("python3 -c 'import json' > /dev/null 2>&1") != 0) {
        printf("skipping the function tool test: no python3\n");
        return;
    }
    write_file("ftools.py",
               "from verl.tools.function_tool import function_tool\n"
               "S = lambda n: {'type': 'function', 'function': {'name': n, 'description': 'd', 'parameters': {'type': "
               "'object', 'properties': {'q': {'type': 'string', 'description': 'x', 'title': 'Q'}}, 'required': ['q']}}}\n"
               "@function_tool(schema=S('lookup'))\n"
               "def lookup(q):\n"
               "    if q == 'boom': raise ValueError('no such page')\n"
               "    return (f'found {q}', 0.5)\n"
               "@function_tool('info', schema=S('info'))\n"
               "async def info_fn(q):\n"
               "    return {'q': q, 'n': 1}\n"
               "@function_tool(schema=S('plain'))\n"
               "def plain(q):\n"
               "    return 42\n"
               "import threading\n"
               "B = threading.Barrier(3, timeout=5)\n"
               "@function_tool(schema=S('meet'))\n"
               "def meet(q):\n"
               "    B.wait(); return f'met {q}'\n"
               "P = threading.Barrier(2, timeout=5)\n"
               "@function_tool(schema=S('pair'))\n"
               "def pair(q):\n"
               "    P.wait(); return f'paired {q}'\n");
    write_file("empty_tools.py", "x = 1\n");
    write_file("clash_tools.py", "from verl.tools.function_tool import function_tool\n"
               "@function_tool('calc_gsm8k_reward', schema={'type': 'function', 'function': {'name': 'calc_gsm8k_reward', "
               "'description': 'd'}})\n"
               "def f(): return 'x'\n");
    char o[400];
    snprintf(o, sizeof o, "actor_rollout_ref.rollout.multi_turn.function_tool_path=%s/ftools.py", dir);
    vc_config *cfg = NULL;
    vc_rl_trainer *t = make_trainer(tok_dir, o, &cfg); /* the agent takes the key */
    /* the two samples' calls of one turn reach the interpreter together (they wait for each other) */
    static const char *PAIR[] = { "<tool_call>\n{\"name\": \"pair\", \"arguments\": {\"q\": \"a\"}}\n</tool_call><|im_end|>",
                                  "<tool_call>\n{\"name\": \"pair\", \"arguments\": {\"q\": \"b\"}}\n</tool_call><|im_end|>",
                                  "#### 5<|im_end|>", "#### 9<|im_end|>" };
    static const char *DONE[] = { "ok<|im_end|>", "ok<|im_end|>" };
    script_ctx pc = { t->tok, 0, { PAIR, DONE, NULL }, { 0, 1 } };
    t->gen = scripted;
    t->gen_ctx = &pc;
    uint32_t idx[2] = { 0, 1 };
    vc_sampling smp = { .temperature = 1, .top_p = 1, .max_new_tokens = 200 };
    rl_batch b;
    CHECK_OK(rl_agent_rollout(t, t->train, idx, 2, &smp, 2, 7, &b));
    for (int i = 0; i < 2 && b.B == 4; i++) {
        char *resp = decode(t->tok, b.ids + b.cu[i] + b.plen[i], b.rlen[i]), want[64];
        snprintf(want, sizeof want, "<tool_response>\npaired %c\n</tool_response>", 'a' + i);
        CHECK_MSG(resp && strstr(resp, want), "sample %d's tool turn: %s", i, resp ? resp : "(null)");
        free(resp);
    }
    rl_batch_free(&b);
    free_trainer(t, cfg);
    char p[400], tools_yaml[300];
    snprintf(tools_yaml, sizeof tools_yaml, "%s/tools.yaml", dir);
    snprintf(p, sizeof p, "%s/ftools.py", dir);
    rl_tool *tl = NULL;
    int n = 0;
    cJSON *sc = NULL;
    CHECK_OK(rl_tools_load(tools_yaml, &tl, &n, &sc));
    CHECK_OK(rl_function_tools_load(p, &tl, &n, sc));
    CHECK(n == 6);
    /* a turn's calls of a plain function run in threads at once (asyncio.to_thread, as verl's FunctionTool.call):
     * three that wait for each other all return */
    static const char *const M[] = { "{\"q\": \"x\"}", "{\"q\": \"y\"}", "{\"q\": \"z\"}" };
    char *mt[8] = { 0 };
    double mr[8];
    prefetch_calls(tl, n, "meet", M, 3, mt, mr);
    CHECK_MSG(mt[0] && !strcmp(mt[0], "met x") && mt[1] && !strcmp(mt[1], "met y") && mt[2] && !strcmp(mt[2], "met z"),
              "function calls at once: %s | %s | %s", mt[0] ? mt[0] : "", mt[1] ? mt[1] : "", mt[2] ? mt[2] : "");
    for (int i = 0; i < 3; i++) free(mt[i]);
    rl_tool_call call = { .args = NULL };
    static const struct { const char *name, *q, *want; double reward; } CASES[] = {
        { "lookup", "cat", "found cat", 0.5 },
        { "lookup", "boom", "Error executing tool 'lookup': no such page", 0.0 },
        { "info", "z", "{\"q\": \"z\", \"n\": 1}", 0.0 },
        { "plain", "z", "42", 0.0 },
        { "calc_gsm8k_reward", "72", "Current parsed answer='72' reward=0.0", -0.05 }, /* the config's tool, no truth */
    };
    cJSON *row = cJSON_Parse("{}");
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        snprintf(call.name, sizeof call.name, "%s", CASES[i].name);
        char args[64];
        snprintf(args, sizeof args, i == 4 ? "{\"answer\": \"%s\"}" : "{\"q\": \"%s\"}", CASES[i].q);
        call.args = cJSON_Parse(args);
        char *text = NULL;
        double r = -1;
        CHECK_OK(rl_tool_run(tl, n, &call, row, "test row", &text, &r, &(vc_image){ 0 }));
        CHECK_MSG(text && !strcmp(text, CASES[i].want) && r == CASES[i].reward, "function tool %s: %s (%g)",
                  CASES[i].name, text ? text : "(null)", r);
        free(text);
        cJSON_Delete(call.args);
    }
    cJSON_Delete(row);
    /* their schemas reach the prompt as verl dumps them (the property's title dropped) */
    char *sch = cJSON_PrintUnformatted(sc);
    CHECK_MSG(sch && strstr(sch, "\"name\":\"lookup\"") && strstr(sch, "\"name\":\"calc_gsm8k_reward\"") &&
              !strstr(sch, "title"), "schemas: %s", sch ? sch : "(null)");
    free(sch);
    rl_tools_free(tl, n);
    cJSON_Delete(sc);
    static const char *BAD[][2] = { { "clash_tools.py", "collide" }, { "empty_tools.py", "no @function_tool" },
                                    { "missing.py", "does not exist" } };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, BAD[i][0]);
        tl = NULL, n = 0, sc = NULL;
        CHECK_OK(rl_tools_load(tools_yaml, &tl, &n, &sc));
        vc_status st = rl_function_tools_load(p, &tl, &n, sc);
        CHECK_MSG(st != VC_OK && strstr(vc_last_error(), BAD[i][1]) && n == 1, "%s: %s", BAD[i][0], vc_last_error());
        rl_tools_free(tl, n);
        cJSON_Delete(sc);
    }
}

int main(void) {
    test_parser();
    if (!vc_test_have_shared()) return vc_test_done();
    char tok_dir[512];
    snprintf(tok_dir, sizeof tok_dir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    snprintf(dir, sizeof dir, "/tmp/verlc_agent_%d", (int)getpid());
    mkdir(dir, 0755);
    write_file("tools.yaml",
               "tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    config:\n      type: native\n"
               "    tool_schema:\n      type: function\n      function:\n        name: calc_gsm8k_reward\n"
               "        description: A tool for calculating the reward of gsm8k\n        parameters:\n"
               "          type: object\n          properties:\n            answer:\n              type: string\n"
               "              description: The answer\n          required: [answer]\n");
    write_file("data.jsonl",
               "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"system\", \"content\": \"Use the tool.\"}, "
               "{\"role\": \"user\", \"content\": \"What is 8 * 9?\"}], \"reward_model\": {\"ground_truth\": \"72\"}, "
               "\"extra_info\": {\"tools_kwargs\": {\"calc_gsm8k_reward\": {\"create_kwargs\": {\"ground_truth\": \"72\"}}}}}\n"
               "{\"data_source\": \"openai/gsm8k\", \"agent_name\": \"single_turn_agent\", \"prompt\": [{\"role\": \"user\", "
               "\"content\": \"What is 2 + 3?\"}], \"reward_model\": {\"ground_truth\": \"5\"}}\n");
    /* data.apply_chat_template_kwargs reach the prompt rendering (Qwen3 without thinking) */
    {
        vc_tokenizer *tok = NULL;
        vc_chat_template *tmpl = NULL;
        CHECK_OK(vc_tokenizer_load(tok_dir, &tok));
        CHECK_OK(vc_chat_template_load(tok_dir, &tmpl));
        cJSON *kw = cJSON_Parse("{\"enable_thinking\": false}");
        char data[300];
        snprintf(data, sizeof data, "%s/data.jsonl", dir);
        for (int k = 0; k < 2; k++) {
            vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1,
                                  .chat_kwargs = k ? kw : NULL };
            vc_rl_dataset *ds = NULL;
            CHECK_OK(vc_rl_dataset_load(data, tok, tmpl, &o, &ds));
            char *text = ds ? decode(tok, ds->p[0].ids, ds->p[0].len) : NULL;
            const char *tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
            size_t n = text ? strlen(text) : 0, tl = strlen(tail);
            CHECK_MSG(text && (k ? n >= tl && !strcmp(text + n - tl, tail) : !strstr(text, "<think>")),
                      "enable_thinking %s: %s", k ? "false" : "unset", text ? text : "(null)");
            free(text);
            vc_rl_dataset_free(ds);
        }
        cJSON_Delete(kw);
        vc_tokenizer_free(tok);
        vc_chat_template_free(tmpl);
    }
    test_loop(tok_dir);
    test_command_tool();
    test_command_pool();
    test_python_tool();
    test_function_tools(tok_dir);
    test_interaction(tok_dir, 0);
    if (system("python3 -c 'import json' > /dev/null 2>&1") == 0) test_interaction(tok_dir, 1);
    else printf("skipping the Python interaction test: no python3\n");
    /* malformed configs: one line naming the file and what is wrong */
    static const struct { const char *file, *text, *needle; vc_status want; } BAD[] = {
        { "bad1.yaml", "tools: 5\n", "expected a list under `tools`", VC_ERR_FORMAT },
        { "bad2.yaml", "tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    tool_schema: {type: function}\n",
          "tools[0] needs class_name and tool_schema.function.name", VC_ERR_FORMAT },
        { "bad3.yaml", "tools: [\n", "bad3.yaml", VC_ERR_FORMAT },
        { "bad4.yaml", "interaction:\n  - class_name: my.Judge\n", "my.Judge", VC_ERR_ARG },
        { "bad5.yaml", "tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    tool_schema: {type: function, function: "
          "{name: a, description: d, parameters: {type: object, properties: {x: {description: no type}}, required: []}}}\n",
          "tool_schema.function.parameters.properties.x.type", VC_ERR_FORMAT },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        write_file(BAD[i].file, BAD[i].text);
        char p[300];
        snprintf(p, sizeof p, "%s/%s", dir, BAD[i].file);
        rl_tool *tl = NULL;
        rl_interaction *in = NULL;
        int n = 0;
        cJSON *sch = NULL;
        vc_status st = i != 3 ? rl_tools_load(p, &tl, &n, &sch) : rl_interactions_load(p, &in, &n);
        CHECK_MSG((i == 2 ? st != VC_OK : st == BAD[i].want) && strstr(vc_last_error(), BAD[i].needle) && !tl && !in,
                  "%s: %s: %s", BAD[i].file, vc_status_name(st), vc_last_error());
    }
    /* an unknown Python tool class is refused by name */
    write_file("tools.yaml", "tools:\n  - class_name: my.pkg.SearchTool\n    tool_schema:\n      type: function\n      function:\n        name: search\n        description: d\n");
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    vc_config *cfg = NULL;
    char o1[400];
    snprintf(o1, sizeof o1, "actor_rollout_ref.rollout.multi_turn.tool_config_path=%s/tools.yaml", dir);
    char *ov[] = { o1 };
    CHECK_OK(vc_config_load(NULL, 1, ov, &cfg));
    CHECK_OK(vc_tokenizer_load(tok_dir, &t->tok));
    CHECK_OK(vc_chat_template_load(tok_dir, &t->tmpl));
    vc_status st = rl_agent_open(t, cfg);
    /* an unknown class is loaded in Python: a missing module stops the load naming the class */
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "my.pkg.SearchTool") && strstr(vc_last_error(), "tools[0]"),
              "unknown tool class: %s", vc_last_error());
    vc_tokenizer_free(t->tok);
    vc_chat_template_free(t->tmpl);
    vc_config_free(cfg);
    free(t);
    if (!vc_t_fail) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    }
    return vc_test_done();
}
