/* Golden test: every row of fixtures/tokenizers/<name>/chat_reference.jsonl rendered by
 * transformers' apply_chat_template must come out byte-identical; llama2 (no template) must fail. */
#include "verlc/chat_template.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void run_dir(const char *name) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/%s", vc_test_shared(), name);
    snprintf(path, sizeof path, "%s/chat_reference.jsonl", dir);
    char *text;
    size_t len;
    if (vc_read_file(path, &text, &len)) { CHECK_MSG(0, "%s", vc_last_error()); return; }
    vc_chat_template *t = NULL;
    vc_status lst = vc_chat_template_load(dir, &t);
    int rows = 0, ok = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *row = cJSON_Parse(line);
        if (!row) continue;
        rows++;
        const char *want = cJSON_GetObjectItem(row, "text")->valuestring;
        vc_chat_opts o = { .enable_thinking = -1 };
        o.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(row, "add_generation_prompt"));
        cJSON *et = cJSON_GetObjectItem(row, "enable_thinking");
        if (cJSON_IsBool(et)) o.enable_thinking = cJSON_IsTrue(et);
        cJSON *tools = cJSON_GetObjectItem(row, "tools");
        if (tools && !cJSON_IsNull(tools)) o.tools = tools;
        char *got = NULL;
        vc_status st = lst ? lst : vc_chat_template_render(t, cJSON_GetObjectItem(row, "messages"), &o, &got);
        if (!strncmp(want, "ERROR:", 6)) {
            /* transformers raised: we must fail too, with the same meaning */
            int good = st != VC_OK && strstr(vc_last_error(), "no chat template") != NULL;
            ok += good;
            CHECK_MSG(good, "%s row %d: expected an error, got %s", name, rows, st ? vc_last_error() : got);
        } else {
            int good = st == VC_OK && got && !strcmp(got, want);
            ok += good;
            CHECK_MSG(good, "%s row %d:\n got: [%s]\nwant: [%s]", name, rows, st ? vc_last_error() : got, want);
        }
        free(got);
        cJSON_Delete(row);
    }
    printf("%s: %d/%d rows\n", name, ok, rows);
    CHECK(rows > 0);
    vc_chat_template_free(t);
    free(text);
}

int main(void) {
    run_dir("qwen3");
    run_dir("llama3");
    run_dir("deepseek_v3");
    run_dir("llama2");
    return vc_test_done();
}
