/* The tool-call parsers (src/rl/tool_parser.c) against later verl's own (tests/fixtures/rl/
 * tool_parser_reference.json, made by tools/fixtures/make_tool_parser_ref.py from verl 1dda039b's
 * tool_parser.py): per case the calls' names and arguments (as JSON values), the content verl keeps and whether
 * the parser adds a stop token. Then bad formats, max_parallel_calls, texts cut at every byte and mutated
 * texts through every parser (under ASan in CI). */
#include "rl/agent_internal.h"
#include "rl/tool_parser.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static int one_case(const cJSON *c, const cJSON *tools, int idx) {
    const char *pname = cJSON_GetObjectItem(c, "parser")->valuestring, *text = cJSON_GetObjectItem(c, "text")->valuestring;
    const cJSON *want = cJSON_GetObjectItem(c, "calls");
    int kind = -1, ok = 1;
    CHECK_OK(rl_tool_format_parse(pname, &kind));
    rl_tool_call calls[16];
    char *content = NULL;
    int n = rl_parse_tool_calls_as(kind, text, "<|pad|>", tools, calls, 16, &content);
    ok &= n == cJSON_GetArraySize(want);
    for (int i = 0; ok && i < n; i++) {
        const cJSON *w = cJSON_GetArrayItem(want, i);
        const char *ws = cJSON_GetObjectItem(w, "arguments")->valuestring; /* gpt-oss: any text, JSON or not */
        cJSON *wa = cJSON_Parse(ws);
        if (!wa) wa = cJSON_CreateString(ws);
        ok &= !strcmp(calls[i].name, cJSON_GetObjectItem(w, "name")->valuestring) && cJSON_Compare(calls[i].args, wa, 1);
        if (!ok) {
            char *got = cJSON_PrintUnformatted(calls[i].args);
            fprintf(stderr, "case %d (%s) call %d: %s %s, verl %s %s\n", idx, pname, i, calls[i].name, got,
                    cJSON_GetObjectItem(w, "name")->valuestring, cJSON_GetObjectItem(w, "arguments")->valuestring);
            free(got);
        }
        cJSON_Delete(wa);
    }
    const char *wc = cJSON_GetObjectItem(c, "content")->valuestring;
    int same = content && !strcmp(content, wc);
    CHECK_MSG(ok, "case %d (%s): %d calls, verl %d", idx, pname, n, cJSON_GetArraySize(want));
    CHECK_MSG(same, "case %d (%s): content '%s', verl '%s'", idx, pname,
              content ? content : "(null)", wc);
    CHECK_MSG((rl_tool_format_stop(kind) != NULL) == (cJSON_GetObjectItem(c, "stop")->valueint > 0),
              "case %d (%s): stop token", idx, pname);
    for (int i = 0; i < n; i++) cJSON_Delete(calls[i].args);
    free(content);
    return ok && same;
}

/* every prefix of every case's text parses without fault (the calls found are freed) */
static void prefixes(const cJSON *cases, const cJSON *tools) {
    const cJSON *c;
    long runs = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        int kind;
        CHECK_OK(rl_tool_format_parse(cJSON_GetObjectItem(c, "parser")->valuestring, &kind));
        size_t n = strlen(text);
        for (size_t k = 0; k <= n; k++, runs++) {
            char *t = malloc(k + 1);
            memcpy(t, text, k);
            t[k] = 0;
            rl_tool_call calls[4];
            char *content = NULL;
            int m = rl_parse_tool_calls_as(kind, t, NULL, tools, calls, 4, &content);
            CHECK(m >= 0 && m <= 4 && content != NULL);
            for (int i = 0; i < m; i++) cJSON_Delete(calls[i].args);
            free(content);
            free(t);
        }
    }
    printf("every prefix of every text: %ld parses\n", runs);
}

/* texts mutated at random (bytes replaced, markup spliced in and cut out), each parsed by every parser */
static void mutations(const cJSON *cases, const cJSON *tools) {
    static const char *const BITS[] = { "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=",
                                        "</parameter>", "<arg_key>", "</arg_value>", "<|tool_call_begin|>", "{",
                                        "}<tool_call|>", "<|\"|>", "\">", "[", "'", "\\", "\xe3\x80\x80" };
    uint64_t r = 0x2545F4914F6CDD1Dull;
    long runs = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        size_t n = strlen(text);
        for (int m = 0; m < 40; m++) {
            char *t = malloc(2 * n + 64);
            memcpy(t, text, n + 1);
            size_t len = n;
            for (int e = 0; e < 3; e++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                size_t at = len ? (size_t)(r >> 20) % (len + 1) : 0;
                const char *b = BITS[(r >> 8) % (sizeof BITS / sizeof BITS[0])];
                size_t bl = strlen(b);
                if ((r & 3) == 0 && len + bl < 2 * n + 60) { /* splice markup in */
                    memmove(t + at + bl, t + at, len - at + 1), memcpy(t + at, b, bl), len += bl;
                } else if ((r & 3) == 1 && at < len) { /* cut a piece out */
                    size_t cut = (size_t)(r >> 40) % (len - at) + 1;
                    memmove(t + at, t + at + cut, len - at - cut + 1), len -= cut;
                } else if (at < len) t[at] = (char)(r >> 32 | 1);
            }
            for (int kind = RL_TF_HERMES; kind <= RL_TF_GEMMA4; kind++, runs++) {
                rl_tool_call calls[4];
                char *content = NULL;
                int k = rl_parse_tool_calls_as(kind, t, "<|pad|>", tools, calls, 4, &content);
                CHECK(k >= 0 && k <= 4 && content != NULL);
                for (int i = 0; i < k; i++) cJSON_Delete(calls[i].args);
                free(content);
            }
            free(t);
        }
    }
    printf("mutated texts: %ld parses\n", runs);
}

/* many opening tags that nothing closes, through every parser: each scan stops once no closing tag is left
 * (it was cubic in the text for glm before) */
static void unclosed(const cJSON *tools) {
    static const char *const OPEN[] = { "<tool_call>x<arg_key>k</arg_key>", "<|tool_call_begin|>a", "<|tool_call>call:f{",
                                        "<seed:tool_call><function=f>", "<tool_call><function=f><parameter=x>",
                                        "<|start|>assistant<|channel|>c to=functions.f <|constrain|>json<|message|>{",
                                        "<|channel|>analysis<|message|>" };
    for (size_t o = 0; o < sizeof OPEN / sizeof OPEN[0]; o++) {
        size_t n = strlen(OPEN[o]), reps = 3000;
        char *t = malloc(n * reps + 64);
        for (size_t i = 0; i < reps; i++) memcpy(t + i * n, OPEN[o], n);
        strcpy(t + n * reps, "</tool_call><|tool_calls_section_begin|></seed:tool_call>");
        for (int kind = RL_TF_HERMES; kind <= RL_TF_GPT_OSS; kind++) {
            rl_tool_call calls[4];
            char *content = NULL;
            int k = rl_parse_tool_calls_as(kind, t, NULL, tools, calls, 4, &content);
            CHECK(k >= 0 && content != NULL);
            for (int i = 0; i < k; i++) cJSON_Delete(calls[i].args);
            free(content);
        }
        free(t);
    }
}

int main(void) {
    char *js = slurp("tests/fixtures/rl/tool_parser_reference.json");
    cJSON *ref = js ? cJSON_Parse(js) : NULL;
    CHECK_MSG(ref != NULL, "tests/fixtures/rl/tool_parser_reference.json: missing or not JSON");
    if (!ref) return vc_test_done();
    const cJSON *tools = cJSON_GetObjectItem(ref, "tools"), *cases = cJSON_GetObjectItem(ref, "cases"), *c;
    int idx = 0, good = 0, parsers = 0;
    const char *last = "";
    cJSON_ArrayForEach(c, cases) {
        good += one_case(c, tools, idx++);
        const char *p = cJSON_GetObjectItem(c, "parser")->valuestring;
        parsers += strcmp(p, last) != 0;
        last = p;
    }
    printf("%d of %d cases of %d parsers equal to verl's (calls, arguments, content)\n", good, idx, parsers);
    CHECK(idx >= 40 && parsers == 9);
    /* max_parallel_calls: the first calls are kept */
    const cJSON *two = cJSON_GetArrayItem(cases, 1);
    rl_tool_call calls[1];
    char *content = NULL;
    CHECK(rl_parse_tool_calls_as(RL_TF_HERMES, cJSON_GetObjectItem(two, "text")->valuestring, NULL, tools, calls, 1,
                                 &content) == 1 && !strcmp(calls[0].name, "a"));
    cJSON_Delete(calls[0].args);
    free(content);
    int kind = 0;
    CHECK(rl_tool_format_parse("harmony", &kind) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "harmony"));
    CHECK(rl_tool_format_parse("llama3_json", &kind) == VC_ERR_UNSUPPORTED);
    prefixes(cases, tools);
    mutations(cases, tools);
    unclosed(tools);
    cJSON_Delete(ref);
    free(js);
    return vc_test_done();
}
