/* Helpers of the tool-agent tests (test_agent.c, test_agent_vl.c): a scripted engine's sample and the built-in
 * tools' replies. */
#ifndef VC_AGENT_TEST_UTIL_H
#define VC_AGENT_TEST_UTIL_H
#include "../../src/rl/agent_internal.h"
#include "../../src/rl/py_text.h"
#include "vc_test.h"
#include "verlc/image.h"
#include "verlc/rollout.h"
#include "verlc/tokenizer.h"
#include <cjson/cJSON.h>
#include <string.h>

/* a scripted answer: text's tokens (cut to max_new: finish "length"), log-prob lp0 + dlp * position */
static inline vc_rollout_sample agent_test_sample(vc_tokenizer *tok, const char *text, int request, int sample,
                                                  int64_t max_new, float lp0, float dlp) {
    size_t m = 0;
    int32_t *ids = NULL;
    vc_tokenizer_encode(tok, text, strlen(text), 0, &ids, &m);
    int64_t keep = (int64_t)m < max_new ? (int64_t)m : max_new;
    vc_rollout_sample s = { .request = request, .sample = sample, .tokens = ids, .n_tokens = keep,
                            .finish = keep < (int64_t)m ? VC_FINISH_LENGTH : VC_FINISH_EOS };
    s.logp = vc_malloc(sizeof(float) * (size_t)(keep + 1));
    for (int64_t q = 0; s.logp && q < keep; q++) s.logp[q] = lp0 + dlp * (float)q;
    return s;
}

/* room for every sample of the requests (*total of them) */
static inline vc_rollout_sample *agent_test_samples(const vc_rollout_request *r, int n, int *total) {
    *total = 0;
    for (int i = 0; i < n; i++) *total += r[i].n_samples;
    return vc_calloc((size_t)(*total ? *total : 1), sizeof(vc_rollout_sample));
}

typedef struct {
    const char *args, *want; /* the call's arguments (JSON), the reply text */
    double reward;           /* the tool reward */
} agent_tool_case;

/* each case through rl_tool_run of tool `name` (tools[n_tools]) for the data row, its arguments parsed as a tool
 * call's are (json.loads: 3.0 stays a float) */
static inline void agent_test_tool_cases(rl_tool *tools, int n_tools, const char *name, const cJSON *row,
                                         const agent_tool_case *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rl_tool_call call = { "", pt_json_loads((pt_span){ c[i].args, strlen(c[i].args) }) }; /* as the parsers do */
        snprintf(call.name, sizeof call.name, "%s", name);
        char *text = NULL;
        double r = 1;
        CHECK_OK(rl_tool_run(tools, n_tools, &call, row, "test row", &text, &r, &(vc_image){ 0 }));
        CHECK_MSG(text && !strcmp(text, c[i].want) && r == c[i].reward, "%s %s -> %s (%g)", name, c[i].args,
                  text ? text : "(null)", r);
        free(text);
        cJSON_Delete(call.args);
    }
}
#endif
