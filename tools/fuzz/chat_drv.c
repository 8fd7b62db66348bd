/* verlc's side of tools/fuzz/diff_chat.py: loads the chat templates named on the command line (a tokenizer folder, or
 * a .jinja file rendered with bos <s> and eos </s>; up to 1,024; one that fails to load renders ERR), then reads lines "template index<TAB>add_generation_prompt<TAB>
 * enable_thinking (-1: not passed)<TAB>JSON hex ({"messages": [...], "tools": [...]})" and prints the rendering in hex,
 * or ERR. */
#include "drv_util.h"
#include "verlc/chat_template.h"
#include "verlc/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vc_chat_template *load(const char *path) {
    vc_chat_template *t = NULL;
    size_t n = strlen(path);
    if (n > 6 && !strcmp(path + n - 6, ".jinja")) {
        FILE *f = fopen(path, "rb");
        static char buf[1 << 20];
        size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[k] = 0;
        if (vc_chat_template_from_string(buf, "<s>", "</s>", &t)) t = NULL;
    } else if (vc_chat_template_load(path, &t)) t = NULL;
    if (!t) fprintf(stderr, "chat_drv: %s: %s\n", path, vc_last_error());
    return t;
}

int main(int argc, char **argv) {
    static vc_chat_template *tm[1024];
    if (argc - 1 > 1024) return 2;
    for (int i = 1; i < argc; i++) tm[i - 1] = load(argv[i]);
    static char line[1 << 20];
    for (long lineno = 0; fgets(line, sizeof line, stdin); lineno++) {
        line[strcspn(line, "\n")] = 0;
        char *rest = line;
        int ti = atoi(drv_field(&rest)), gen = atoi(drv_field(&rest)), think = atoi(drv_field(&rest));
        char *js = drv_unhex(drv_field(&rest)), *out = NULL;
        cJSON *j = NULL;
        if (vc_json_parse(js, strlen(js), "line", &j)) j = NULL; /* (numbers written as floats stay floats) */
        vc_chat_opts o = { gen, think, cJSON_GetObjectItem(j, "tools"), NULL };
        if (j && ti >= 0 && ti < argc - 1 && tm[ti] && !vc_chat_template_render(tm[ti], cJSON_GetObjectItem(j, "messages"), &o, &out)) {
            for (const unsigned char *p = (const unsigned char *)out; *p; p++) printf("%02x", *p);
            printf("\n");
        } else {
            printf("ERR\n");
            if (getenv("VC_DRV_VERBOSE"))
                fprintf(stderr, "line %ld template %d: %s\n", lineno, ti, ti >= 0 && ti < argc - 1 && tm[ti] ? vc_last_error() : "(not loaded)");
        }
        free(out);
        free(js);
        cJSON_Delete(j);
    }
    for (int i = 0; i < argc - 1; i++) vc_chat_template_free(tm[i]);
    return 0;
}
