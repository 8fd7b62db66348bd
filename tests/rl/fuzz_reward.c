/* libFuzzer harness for verl's rule-based rewards, the tool-call parsers and the sandbox's code extraction over
 * arbitrary model output, and the MCP client's server-sent-event parser over an arbitrary stream (not a CTest
 * program; scripts/fuzz.sh builds and runs it). Input: the first byte picks the target (and a flag, the data source
 * or the parser); the rest is the response, then, after a 0x01 byte, the ground truth ("42" when absent). */
#include "rl/agent_internal.h"
#include "rl/mcp.h"
#include "rl/sandbox.h"
#include "rl/tool_parser.h"
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *const DS[8] = { "openai/gsm8k", "lighteval/MATH", "math_dapo",          "aime2024",
                                   "searchR1_nq",  "countdown",      "hiyouga/geometry3k", "numina_olympiads" };

static void tool_calls(int kind, const char *text) {
    rl_tool_call calls[8];
    char *content = NULL;
    int n = rl_parse_tool_calls_as(kind, text, "<pad>", NULL, calls, 8, &content);
    for (int i = 0; i < n; i++) {
        cJSON_Delete(calls[i].args);
        free(calls[i].text);
    }
    free(content);
}

static void on_event(void *ctx, const char *event, const char *data) {
    *(size_t *)ctx += strlen(event ? event : "") + strlen(data ? data : "");
}

/* the stream fed in pieces of 1 to 16 bytes (the piece lengths from the text itself) */
static void sse(const char *text, size_t n) {
    rl_sse s = { 0 };
    size_t got = 0;
    for (size_t i = 0; i < n;) {
        size_t k = 1 + (unsigned char)text[i] % 16;
        if (k > n - i) k = n - i;
        rl_sse_feed(&s, text + i, k, on_event, &got);
        i += k;
    }
    rl_sse_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const int sel = data[0], flag = sel & 16;
    char *buf = malloc(size), *s = NULL;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *sol = buf, *gt = memchr(buf, 1, size - 1);
    if (gt) *gt++ = 0;
    else gt = "42";
    double sc = 0, nums[3] = { 1, 2, 3 };
    int acc = 0;
    switch (sel % 16) {
    case 0: vc_reward_gsm8k(sol, gt, flag, 0, 1); break;
    case 1: vc_reward_math(sol, gt); break;
    case 2:
        free(vc_math_strip_string(sol));
        free(vc_math_strip_string_prm800k(sol));
        break;
    case 3: vc_math_is_equiv(sol, gt); break;
    case 4: vc_reward_geo3k(sol, gt, &sc); break;
    case 5: vc_mathruler_grade(sol, gt); break;
    case 6: vc_reward_prime_math(sol, gt, &sc); break;
    case 7: vc_prime_math_equal(sol, gt, 3.14); break;
    case 8: vc_arith_eval(sol, &sc); break;
    case 9: vc_reward_countdown(sol, 6, nums, 3, 0.1, 1); break;
    case 10: vc_reward_qa_em(sol, gt, &sc); break;
    case 11:
        vc_reward_math_dapo(sol, gt, flag, &sc, &acc, &s);
        free(s);
        break;
    case 12: vc_reward_default(DS[(sel >> 4) % 8], sol, gt, NULL, &sc); break;
    case 13: free(vc_sandbox_code(sol)); break;
    case 14: sse((const char *)data + 1, size - 1); break;
    default: tool_calls((sel >> 4) % 9, sol);
    }
    free(buf);
    return 0;
}
