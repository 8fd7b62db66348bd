/* verl's MCP tools (MCPBaseTool, MCPSearchTool) against tests/rl/mcp_server.py over the three transports:
 * stdio (with the server's log notifications and its ping request on the way), streamable HTTP (JSON and
 * event-stream answers, its session id and protocol version headers required) and HTTP+SSE with a bearer
 * token (verl's auth_token). Checked: tools listed over pages and chosen by tool_selected_list, the schemas as
 * verl's mcp2openai + OpenAIFunctionToolSchema dump make them (title, default and additionalProperties
 * dropped, required added), fastmcp's "<server>_" prefix when several servers share a client, env passed,
 * call results as verl's texts (text parts joined; MCPSearchTool's result lists; an error result's text; a
 * JSON-RPC error and a hung or dead server as verl's error texts, the next call starting a new session),
 * the event-stream parser on split input, and bad configurations named in one line. */
#include "../../src/rl/agent_internal.h"
#include "../../src/rl/mcp.h"
#include "verlc/reward.h"
#include "../cli_util.h"
#include "vc_test.h"
#include "verlc/image.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[128];

static void write_file(const char *name, const char *text) {
    char p[300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK_OK(vc_write_file_atomic(p, text, strlen(text)));
}

/* ---- the event-stream parser ---- */
typedef struct { char log[512]; } ev_log;
static void on_ev(void *ctx, const char *event, const char *data) {
    ev_log *l = ctx;
    size_t n = strlen(l->log);
    snprintf(l->log + n, sizeof l->log - n, "[%s|%s]", event, data);
}

static void test_sse_parser(void) {
    const char *stream = "event: endpoint\r\ndata: /m?s=1\r\n\r\n: a comment\n\ndata: {\"a\":\ndata:  1}\n\n"
                         "event: message\rdata: x\r\rdata:y\n\n";
    const char *want = "[endpoint|/m?s=1][message|{\"a\":\n 1}][message|x][message|y]";
    for (size_t step = 1; step <= strlen(stream); step++) { /* every split of the input */
        rl_sse s = { 0 };
        ev_log l = { { 0 } };
        for (size_t i = 0; i < strlen(stream); i += step) {
            size_t k = strlen(stream) - i < step ? strlen(stream) - i : step;
            rl_sse_feed(&s, stream + i, k, on_ev, &l);
        }
        CHECK_MSG(!strcmp(l.log, want), "split %zu: %s", step, l.log);
        rl_sse_free(&s);
    }
}

/* ---- tools ---- */
static char *run(rl_tool *t, int n, const char *name, const char *args) {
    rl_tool_call c = { .args = cJSON_Parse(args) };
    snprintf(c.name, sizeof c.name, "%s", name);
    char *text = NULL;
    double r = -1;
    CHECK_OK(rl_tool_run(t, n, &c, NULL, "test row", &text, &r, &(vc_image){ 0 }));
    CHECK(r == 0);
    cJSON_Delete(c.args);
    return text ? text : vc_strdup("(none)");
}

#define SAME(got, want) do { char *_g = (got); CHECK_MSG(_g && !strcmp(_g, want), "got [%s] want [%s]", _g, want); free(_g); } while (0)
#define STARTS(got, want) do { char *_g = (got); CHECK_MSG(_g && !strncmp(_g, want, strlen(want)), "got [%s] want [%s...]", _g, want); free(_g); } while (0)

static const char *ADD_SCHEMA =
    "{\"type\":\"function\",\"function\":{\"name\":\"%s\",\"description\":\"Add two integers.\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\"]},\"strict\":false}}";

static void tool_config(const char *cls, const char *servers_json, const char *selected, double timeout) {
    char servers[2048], yaml[2048];
    snprintf(servers, sizeof servers, "%s", servers_json);
    write_file("servers.json", servers);
    snprintf(yaml, sizeof yaml,
             "tools:\n  - class_name: %s\n    config: {rate_limit: 120, timeout: %g, type: mcp}\n"
             "    mcp:\n      mcp_servers_config_path: %s/servers.json\n%s%s\n",
             cls, timeout, dir, selected ? "      tool_selected_list: " : "", selected ? selected : "");
    write_file("tools.yaml", yaml);
}

/* the calls every transport answers alike */
static void common_calls(rl_tool *t, int n, const char *add, const char *greet) {
    char want[64];
    snprintf(want, sizeof want, "%s2+3=5", greet);
    SAME(run(t, n, add, "{\"a\": 2, \"b\": 3}"), want);
    SAME(run(t, n, "fail", "{}"), "boom");
    SAME(run(t, n, "raise", "{}"), "\n An unexpected error occurred: tool exploded");
    SAME(run(t, n, "search", "{\"query\": \"q\"}"),
         "{'query': 'q', 'follow_up_questions': None, 'results': [{'title': 'T1 q', 'url': 'https://a.example', "
         "'content': 'c1'}, {'title': 'T2', 'url': 'https://b.example', 'content': 'c2'}]} {'results': []} done");
    SAME(run(t, n, add, "{\"a\": 7}"), greet[0] ? "hi 7+0=7" : "7+0=7");
}

/* a turn's calls to one server at once (rl_tools_prefetch): calls that wait for each other all answer, beside an
 * error result, a JSON-RPC error and a plain call; a call past the timeout fails as verl's text while the one beside
 * it answers, and the next call opens a new session */
static void gathered_calls(rl_tool *t, int n, const char *key) {
    char meet[96];
    snprintf(meet, sizeof meet, "{\"key\": \"%s\", \"n\": 3}", key);
    const char *name[] = { "meet", "raise", "meet", "fail", "add", "meet" };
    const char *args[] = { meet, "{}", meet, "{}", "{\"a\": 2, \"b\": 3}", meet };
    const char *want[] = { "met 3", "\n An unexpected error occurred: tool exploded", "met 3", "boom", "5", "met 3" };
    rl_tool_call c[6], *ptr[6];
    for (int i = 0; i < 6; i++) {
        c[i] = (rl_tool_call){ .args = cJSON_Parse(args[i]) };
        snprintf(c[i].name, sizeof c[i].name, "%s", name[i]);
        ptr[i] = &c[i];
    }
    CHECK_OK(rl_tools_prefetch(t, n, ptr, NULL, 6));
    for (int i = 0; i < 6; i++) {
        const char *w = want[i], *g = c[i].text;
        int ok = g && (i == 4 ? strlen(g) >= 5 && !strcmp(g + strlen(g) - 5, "2+3=5") : !strcmp(g, w));
        CHECK_MSG(ok, "%s: call %d at once: [%s]", key, i, g ? g : "(not fetched)");
        free(c[i].text);
        cJSON_Delete(c[i].args);
    }
    const char *n2[] = { "slow", "meet" };
    char one[96];
    snprintf(one, sizeof one, "{\"key\": \"%s1\", \"n\": 1}", key);
    const char *a2[] = { "{}", one };
    for (int i = 0; i < 2; i++) {
        c[i] = (rl_tool_call){ .args = cJSON_Parse(a2[i]) };
        snprintf(c[i].name, sizeof c[i].name, "%s", n2[i]);
    }
    CHECK_OK(rl_tools_prefetch(t, n, ptr, NULL, 2));
    CHECK_MSG(c[0].text && !strncmp(c[0].text, "\n Connection failed: ", 21) && strstr(c[0].text, "MCP server") && c[1].text &&
              !strcmp(c[1].text, "met 1"), "%s: a call past the timeout beside one that answers: [%s] [%s]", key,
              c[0].text ? c[0].text : "", c[1].text ? c[1].text : "");
    for (int i = 0; i < 2; i++) free(c[i].text), cJSON_Delete(c[i].args);
}

static void test_stdio(void) {
    char js[1024], yaml[2048];
    snprintf(js, sizeof js, "{\"mcpServers\": {\"local\": {\"command\": \"python3\", \"args\": [\"%s/tests/rl/mcp_server.py\", "
             "\"stdio\"], \"env\": {\"MCP_TEST_GREETING\": \"hi \"}}}}", getcwd(yaml, sizeof yaml));
    tool_config("verl.tools.mcp_base_tool.MCPBaseTool", js, "[add, search, fail, raise, slow, die, garbage, meet]", 1);
    int n = 0;
    cJSON *sch = NULL;
    rl_tool *t = NULL;
    char p[300];
    snprintf(p, sizeof p, "%s/tools.yaml", dir);
    CHECK_OK(rl_tools_load(p, &t, &n, &sch));
    CHECK_MSG(n == 8 && cJSON_GetArraySize(sch) == 8, "%d tools", n);
    char *s0 = cJSON_PrintUnformatted(cJSON_GetArrayItem(sch, 0)), want[600];
    snprintf(want, sizeof want, ADD_SCHEMA, "add");
    CHECK_MSG(s0 && !strcmp(s0, want), "schema: %s", s0);
    free(s0);
    char *s2 = cJSON_PrintUnformatted(cJSON_GetArrayItem(sch, 2)); /* no required in the server's schema: [] */
    CHECK_MSG(s2 && strstr(s2, "\"name\":\"fail\"") && strstr(s2, "\"properties\":{},\"required\":[]"), "%s", s2);
    free(s2);
    char *s1 = cJSON_PrintUnformatted(cJSON_GetArrayItem(sch, 1));
    CHECK_MSG(s1 && strstr(s1, "\"depth\":{\"type\":\"string\",\"enum\":[\"basic\",\"advanced\"]}"), "%s", s1);
    free(s1);
    common_calls(t, n, "add", "hi ");
    double t0 = vc_now();
    STARTS(run(t, n, "slow", "{}"), "\n Connection failed: ");
    CHECK_MSG(vc_now() - t0 < 2.9, "the 1 s timeout took %.1f s", vc_now() - t0);
    SAME(run(t, n, "add", "{\"a\": 1, \"b\": 1}"), "hi 1+1=2"); /* a new session */
    STARTS(run(t, n, "die", "{}"), "\n Connection failed: ");
    SAME(run(t, n, "add", "{\"a\": 1, \"b\": 2}"), "hi 1+2=3");
    /* a stray line and an answer without a result object: an error text, the session kept */
    SAME(run(t, n, "garbage", "{}"), "\n An unexpected error occurred: the answer has no result");
    SAME(run(t, n, "add", "{\"a\": 1, \"b\": 2}"), "hi 1+2=3");
    SAME(run(t, n, "nosuch", "{}"), "Error when executing tool: 'nosuch'");
    gathered_calls(t, n, "stdio");
    SAME(run(t, n, "add", "{\"a\": 1, \"b\": 2}"), "hi 1+2=3");
    rl_tools_free(t, n);
    cJSON_Delete(sch);
}

static void test_search_and_prefix(void) {
    char cwd[512], js[2048];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(js, sizeof js, "{\"mcpServers\": {\"local\": {\"command\": \"python3\", \"args\": [\"%s/tests/rl/mcp_server.py\"]}}}", cwd);
    tool_config("verl.tools.mcp_search_tool.MCPSearchTool", js, "[search]", 30);
    int n = 0;
    cJSON *sch = NULL;
    char p[300];
    snprintf(p, sizeof p, "%s/tools.yaml", dir);
    rl_tool *t = NULL;
    CHECK_OK(rl_tools_load(p, &t, &n, &sch));
    CHECK(n == 1);
    SAME(run(t, n, "search", "{\"query\": \"q\"}"),
         "[{\"title\": \"T1 q\", \"url\": \"https://a.example\", \"content\": \"c1\"}, {\"title\": \"T2\", \"url\": "
         "\"https://b.example\", \"content\": \"c2\"}][]");
    rl_tools_free(t, n);
    cJSON_Delete(sch);
    /* two servers in one fastmcp client: their tools are "<server>_<tool>" */
    snprintf(js, sizeof js, "{\"mcpServers\": {\"a\": {\"command\": \"python3\", \"args\": [\"%s/tests/rl/mcp_server.py\"]}, "
             "\"b\": {\"command\": \"python3\", \"args\": [\"tests/rl/mcp_server.py\"], \"cwd\": \"%s\", "
             "\"env\": {\"MCP_TEST_GREETING\": \"hi \"}}}}", cwd, cwd);
    tool_config("verl.tools.mcp_base_tool.MCPBaseTool", js, "[a_add, b_add]", 30);
    CHECK_OK(rl_tools_load(p, &t, &n, &sch));
    CHECK(n == 2 && t && !strcmp(t[0].name, "a_add") && !strcmp(t[1].name, "b_add"));
    char *s = cJSON_PrintUnformatted(cJSON_GetArrayItem(sch, 1)), want[600];
    snprintf(want, sizeof want, ADD_SCHEMA, "b_add");
    CHECK_MSG(s && !strcmp(s, want), "%s", s);
    free(s);
    SAME(run(t, n, "a_add", "{\"a\": 2, \"b\": 3}"), "2+3=5");
    SAME(run(t, n, "b_add", "{\"a\": 2, \"b\": 3}"), "hi 2+3=5");
    rl_tools_free(t, n);
    cJSON_Delete(sch);
}

/* an HTTP server process; its port from its first line */
static vc_reward_proc *http_server(const char *mode, const char *opt, int *port) {
    char *argv[] = { "python3", "tests/rl/mcp_server.py", (char *)mode, (char *)opt, opt ? "tok" : NULL, NULL };
    if (opt && !strcmp(opt, "--sse-answers")) argv[4] = NULL;
    vc_reward_proc *p = NULL;
    char *line = NULL;
    CHECK_OK(vc_reward_proc_start(argv, 10000, &p));
    if (p) CHECK_OK(vc_reward_proc_read_line(p, vc_now() + 10, &line));
    *port = line ? atoi(line) : 0;
    free(line);
    return p;
}

static void test_http(void) {
    if (!rl_mcp_have_http()) {
        printf("skipping MCP over HTTP: built without libcurl\n");
        return;
    }
    static const struct { const char *mode, *opt, *entry; } CASES[] = {
        { "http", NULL, "{\"url\": \"http://127.0.0.1:%d/mcp\"}" },
        { "http", "--sse-answers", "{\"url\": \"http://127.0.0.1:%d/mcp\", \"headers\": {\"X-Test\": \"1\"}}" },
        { "sse", "--token", "{\"url\": \"http://127.0.0.1:%d/sse\", \"auth_token\": \"tok\"}" },
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        int port = 0;
        vc_reward_proc *srv = http_server(CASES[i].mode, CASES[i].opt, &port);
        if (!port) { vc_reward_proc_close(srv); continue; }
        char entry[300], js[600], p[300];
        snprintf(entry, sizeof entry, CASES[i].entry, port);
        snprintf(js, sizeof js, "{\"mcpServers\": {\"web\": %s}}", entry);
        tool_config("verl.tools.mcp_base_tool.MCPBaseTool", js, NULL, 1);
        snprintf(p, sizeof p, "%s/tools.yaml", dir);
        rl_tool *t = NULL;
        int n = 0;
        cJSON *sch = NULL;
        CHECK_OK(rl_tools_load(p, &t, &n, &sch));
        CHECK_MSG(n == 8, "%s %s: %d tools", CASES[i].mode, CASES[i].opt ? CASES[i].opt : "", n);
        if (n == 8) {
            common_calls(t, n, "add", "");
            STARTS(run(t, n, "slow", "{}"), "\n Connection failed: ");
            SAME(run(t, n, "add", "{\"a\": 4, \"b\": 4}"), "4+4=8");
            char key[32];
            snprintf(key, sizeof key, "http%zu", i);
            gathered_calls(t, n, key);
            SAME(run(t, n, "add", "{\"a\": 4, \"b\": 4}"), "4+4=8");
        }
        rl_tools_free(t, n);
        cJSON_Delete(sch);
        if (CASES[i].opt && !strcmp(CASES[i].opt, "--token")) { /* a wrong token is refused at load, named */
            snprintf(js, sizeof js, "{\"mcpServers\": {\"web\": {\"url\": \"http://127.0.0.1:%d/sse\", \"auth_token\": \"bad\"}}}", port);
            tool_config("verl.tools.mcp_base_tool.MCPBaseTool", js, NULL, 1);
            vc_status st = rl_tools_load(p, &t, &n, &sch);
            CHECK_MSG(st == VC_ERR_IO && strstr(vc_last_error(), "MCP server 'web'") && strstr(vc_last_error(), "401"),
                      "%s", vc_last_error());
        }
        vc_reward_proc_close(srv);
    }
    /* nothing listening */
    tool_config("verl.tools.mcp_base_tool.MCPBaseTool", "{\"mcpServers\": {\"gone\": {\"url\": \"http://127.0.0.1:9/mcp\"}}}", NULL, 1);
    char p[300];
    snprintf(p, sizeof p, "%s/tools.yaml", dir);
    rl_tool *t = NULL;
    int n = 0;
    cJSON *sch = NULL;
    CHECK(rl_tools_load(p, &t, &n, &sch) == VC_ERR_IO && strstr(vc_last_error(), "MCP server 'gone'"));
}

/* `verlc tools`: the schemas a run gives the chat template, and one call's text */
static void test_cli(void) {
    char cwd[512], js[1024], cmd[2048], out[300], *text = NULL;
    size_t len = 0;
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(js, sizeof js, "{\"mcpServers\": {\"local\": {\"command\": \"python3\", \"args\": [\"%s/tests/rl/mcp_server.py\"]}}}", cwd);
    tool_config("verl.tools.mcp_base_tool.MCPBaseTool", js, "[add, fail]", 30);
    snprintf(out, sizeof out, "%s/cli.txt", dir);
    snprintf(cmd, sizeof cmd, "%s tools %s/tools.yaml > %s && %s tools %s/tools.yaml add '{\"a\": 20, \"b\": 22}' >> %s",
             cli_bin(), dir, out, cli_bin(), dir, out);
    CHECK(system(cmd) == 0);
    CHECK_OK(vc_read_file(out, &text, &len));
    char want[700];
    snprintf(want, sizeof want, ADD_SCHEMA, "add");
    CHECK_MSG(text && !strncmp(text, want, strlen(want)) && strstr(text, "\"name\":\"fail\"") && strstr(text, "\n20+22=42\n"),
              "verlc tools: [%s]", text ? text : "");
    free(text);
    snprintf(cmd, sizeof cmd, "%s tools %s/tools.yaml add 'not json' 2>/dev/null", cli_bin(), dir);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
}

static void test_bad(void) {
    static const struct { const char *servers, *cls, *sel, *needle; vc_status st; } BAD[] = {
        { NULL, "verl.tools.mcp_base_tool.MCPBaseTool", NULL, "servers.json", VC_ERR_IO },
        { "{\"servers\": {}}", "verl.tools.mcp_base_tool.MCPBaseTool", NULL, "mcpServers", VC_ERR_FORMAT },
        { "{\"mcpServers\": {\"x\": {\"port\": 1}}}", "verl.tools.mcp_base_tool.MCPBaseTool", NULL, "needs a `url` or a `command`", VC_ERR_FORMAT },
        { "{\"mcpServers\": {\"x\": {\"command\": \"python3\", \"args\": [\"tests/rl/mcp_server.py\"]}}}",
          "verl.tools.mcp_base_tool.MCPBaseTool", "[nothing]", "no tool of mcp.tool_selected_list", VC_ERR_MISSING },
        { "{\"mcpServers\": {\"x\": {\"command\": \"python3\", \"args\": [\"tests/rl/mcp_server.py\"]}}}",
          "my.MCPTool", NULL, "MCPBaseTool and MCPSearchTool", VC_ERR_UNSUPPORTED },
        { "{\"mcpServers\": {\"x\": {\"command\": \"/nonexistent/mcp\"}}}", "verl.tools.mcp_base_tool.MCPBaseTool", NULL,
          "MCP server 'x'", VC_ERR_TIMEOUT },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s/servers.json", dir);
        unlink(p);
        tool_config(BAD[i].cls, BAD[i].servers ? BAD[i].servers : "", BAD[i].sel, 5);
        if (!BAD[i].servers) unlink(p);
        snprintf(p, sizeof p, "%s/tools.yaml", dir);
        rl_tool *t = NULL;
        int n = 0;
        cJSON *sch = NULL;
        vc_status st = rl_tools_load(p, &t, &n, &sch);
        CHECK_MSG(st == BAD[i].st && strstr(vc_last_error(), BAD[i].needle) && strstr(vc_last_error(), "tools[0]") && !t,
                  "bad %zu: %s: %s", i, vc_status_name(st), vc_last_error());
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_mcp_%d", (int)getpid());
    char cmd[200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0);
    test_sse_parser();
    if (system("python3 -c 'import json' > /dev/null 2>&1") == 0) {
        test_stdio();
        test_search_and_prefix();
        test_http();
        test_cli();
        test_bad();
    } else printf("skipping the MCP server tests: no python3\n");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
