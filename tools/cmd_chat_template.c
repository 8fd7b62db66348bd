/* verlc chat-template --tokenizer DIR [--add-generation-prompt] [--no-thinking|--thinking]
 * [--tools FILE]: reads a JSON array of messages on stdin, prints the rendered text exactly. */
#include "verlc/chat_template.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t k = fread(buf + n, 1, cap - n - 1, stdin);
        n += k;
        if (k == 0) break;
        if (n + 1 == cap) {
            char *p = realloc(buf, cap * 2);
            if (!p) { free(buf); return NULL; }
            buf = p;
            cap *= 2;
        }
    }
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int usage(void) {
    fprintf(stderr, "verlc: usage: verlc chat-template --tokenizer DIR [--add-generation-prompt] "
                    "[--no-thinking|--thinking] [--tools FILE] < messages.json\n");
    return 1;
}

int vc_cmd_chat_template(int argc, char **argv) {
    const char *dir = NULL, *tools_path = NULL;
    vc_chat_opts opts = { .enable_thinking = -1 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--tools") && i + 1 < argc) tools_path = argv[++i];
        else if (!strcmp(argv[i], "--add-generation-prompt")) opts.add_generation_prompt = 1;
        else if (!strcmp(argv[i], "--no-thinking")) opts.enable_thinking = 0;
        else if (!strcmp(argv[i], "--thinking")) opts.enable_thinking = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage();
        else { fprintf(stderr, "verlc: chat-template: unknown argument '%s'\n", argv[i]); return 1; }
    }
    if (!dir) return usage();
    int rc = 1;
    vc_chat_template *t = NULL;
    cJSON *msgs = NULL, *tools = NULL;
    char *text = NULL, *out = NULL;
    size_t len;
    if (vc_chat_template_load(dir, &t)) { fprintf(stderr, "verlc: %s\n", vc_last_error()); goto done; }
    if (tools_path) {
        char *tt;
        size_t tl;
        if (vc_read_file(tools_path, &tt, &tl)) { fprintf(stderr, "verlc: %s\n", vc_last_error()); goto done; }
        tools = cJSON_ParseWithLength(tt, tl);
        free(tt);
        if (!cJSON_IsArray(tools)) { fprintf(stderr, "verlc: %s: tools must be a JSON array\n", tools_path); goto done; }
        opts.tools = tools;
    }
    text = read_stdin(&len);
    msgs = text ? cJSON_ParseWithLength(text, len) : NULL;
    if (!cJSON_IsArray(msgs)) { fprintf(stderr, "verlc: stdin: expected a JSON array of messages\n"); goto done; }
    if (vc_chat_template_render(t, msgs, &opts, &out)) { fprintf(stderr, "verlc: %s\n", vc_last_error()); goto done; }
    fwrite(out, 1, strlen(out), stdout);
    rc = fflush(stdout) ? 1 : 0;
done:
    free(out);
    free(text);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    vc_chat_template_free(t);
    return rc;
}
