/* libFuzzer harness for real chat templates over arbitrary messages and tools (not a CTest program; scripts/fuzz.sh
 * builds and runs it; tests/tokenizer/fuzz_tok.c fuzzes the templates themselves). Templates: the shared qwen3,
 * llama3 and deepseek_v3 tokenizers', ChatGLM3's and the vision fixtures' GLM-4V and tool-calling ones. Input: the
 * first byte picks the template, add_generation_prompt and enable_thinking (-1, 0, 1); the rest is JSON: a message
 * list, or {"messages": [...], "tools": [...]}. */
#include "verlc/chat_template.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 6
static vc_chat_template *tmpl[NT];

static int load_jinja(const char *path, vc_chat_template **t) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return vc_chat_template_from_string(buf, "<s>", "</s>", t) != VC_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *sh = getenv("VERLC_SHARED") ? getenv("VERLC_SHARED") : "../shared";
    static const char *const names[3] = { "qwen3", "llama3", "deepseek_v3" };
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/%s", sh, names[i]);
        bad |= vc_chat_template_load(dir, &tmpl[i]) != VC_OK;
    }
    bad |= vc_chat_template_load("tests/fixtures/spm_slow/chatglm3", &tmpl[3]) != VC_OK;
    bad |= load_jinja("tests/fixtures/vision/glm4v/chat_template.jinja", &tmpl[4]);
    bad |= load_jinja("tests/fixtures/vision/dataset/chat_template_tools.jinja", &tmpl[5]);
    if (bad) {
        fprintf(stderr, "fuzz_chat: a template did not load (run from the repository root): %s\n", vc_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *s = malloc(size);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    cJSON *j = cJSON_Parse(s);
    free(s);
    if (!j) return 0;
    const cJSON *msgs = cJSON_IsObject(j) ? cJSON_GetObjectItem(j, "messages") : j;
    vc_chat_opts o = { data[0] & 1, (data[0] >> 1) % 3 - 1, cJSON_IsObject(j) ? cJSON_GetObjectItem(j, "tools") : NULL,
                       NULL };
    char *out = NULL;
    if (msgs && !vc_chat_template_render(tmpl[(data[0] >> 3) % NT], msgs, &o, &out)) free(out);
    cJSON_Delete(j);
    return 0;
}
