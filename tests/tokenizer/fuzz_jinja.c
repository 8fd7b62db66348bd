/* libFuzzer harness for the chat-template interpreter itself (not a CTest program; scripts/fuzz.sh jinja builds and runs
 * it with tests/tokenizer/fuzz_jinja.dict): the input is a template, compiled and rendered over a fixed conversation
 * with a system prompt, tool calls and a tool list, with and without the generation prompt. Crashes, leaks, hangs and
 * unbounded memory are the findings; errors are expected. */
#include "verlc/chat_template.h"
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static cJSON *msgs, *tools, *extra;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    msgs = cJSON_Parse("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"What is 2+2? "
                       "\\u00e9\\u4e2d\"}, {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\", "
                       "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"calc\", "
                       "\"arguments\": {\"x\": \"2+2\", \"n\": [1, 2.5, null, true]}}}]}, {\"role\": \"tool\", \"content\": "
                       "\"4\", \"tool_call_id\": \"call_1\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", "
                       "\"text\": \"and 3+3?\"}, {\"type\": \"image\"}]}]");
    tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"description\": \"evaluate\", "
                        "\"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"string\"}}, "
                        "\"required\": [\"x\"]}}}]");
    extra = cJSON_Parse("{\"date_string\": \"26 Jul 2024\", \"documents\": [{\"title\": \"t\", \"text\": \"d\"}]}");
    return msgs && tools && extra ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0;
    vc_chat_template *t = NULL;
    if (!vc_chat_template_from_string(src, "<s>", "</s>", &t)) {
        for (int gen = 0; gen < 2; gen++) {
            vc_chat_opts o = { gen, gen - 1, gen ? tools : NULL, extra };
            char *out = NULL;
            if (!vc_chat_template_render(t, msgs, &o, &out)) free(out);
        }
        vc_chat_template_free(t);
    }
    free(src);
    return 0;
}
