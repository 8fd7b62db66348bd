/* verlc's side of tools/fuzz/diff_jinja.py: reads JSON lines {"t": template} and prints each rendering in hex (ERR
 * where it fails), with messages [{"role": "user", "content": "Hello World"}] and m, n, s as the script sets them. */
#include "verlc/chat_template.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    static char line[1 << 16];
    cJSON *vars = cJSON_Parse("{\"m\": {\"a\": 1, \"b\": [1, 2]}, \"n\": 7, \"s\": \"aAb\"}");
    cJSON *msgs = cJSON_Parse("[{\"role\": \"user\", \"content\": \"Hello World\"}]");
    while (fgets(line, sizeof line, stdin)) {
        cJSON *j = cJSON_Parse(line);
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "t"));
        vc_chat_template *tm = NULL;
        char *out = NULL;
        vc_chat_opts o = { 0, -1, NULL, vars };
        if (t && !vc_chat_template_from_string(t, NULL, NULL, &tm) && !vc_chat_template_render(tm, msgs, &o, &out)) {
            for (const unsigned char *p = (const unsigned char *)out; *p; p++) printf("%02x", *p);
            printf("\n");
        } else printf("ERR\n");
        free(out);
        vc_chat_template_free(tm);
        cJSON_Delete(j);
    }
    cJSON_Delete(vars);
    cJSON_Delete(msgs);
    return 0;
}
