/* verlc's side of tools/fuzz/diff_yaml.py: reads YAML documents separated by a line "\x1e" from stdin, parses each as a
 * config file (vc_config_parse_yaml) and prints it as one line of JSON (vc_config_to_json), or ERR. */
#include "verlc/config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void one(const char *doc, size_t n) {
    vc_config *c = NULL;
    if (vc_config_parse_yaml(doc, n, "doc.yaml", &c)) {
        printf("ERR\n");
        return;
    }
    char *j = vc_config_to_json(c, NULL, 0);
    printf("%s\n", j ? j : "ERR");
    free(j);
    vc_config_free(c);
}

int main(void) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap), line[1 << 16];
    while (buf && fgets(line, sizeof line, stdin)) {
        if (!strcmp(line, "\x1e\n")) { one(buf, n); n = 0; continue; }
        size_t l = strlen(line);
        if (n + l + 1 > cap) { char *b = realloc(buf, cap = 2 * (n + l + 1)); if (!b) break; buf = b; }
        memcpy(buf + n, line, l + 1);
        n += l;
    }
    free(buf);
    return 0;
}
