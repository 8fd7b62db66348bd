/* verlc tokenize / detokenize: JSONL on stdin to JSONL on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "verlc/data.h"
#include "verlc/tokenizer.h"

int vc_cmd_tokenize(int argc, char **argv);
int vc_cmd_detokenize(int argc, char **argv);

static int parse_args(int argc, char **argv, const char *flag, const char **dir, int *flag_on, const char *usage) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) *dir = argv[++i];
        else if (!strcmp(argv[i], flag)) *flag_on = 1;
        else { fprintf(stderr, "verlc: %s: unknown argument '%s'\nusage: %s\n", argv[0], argv[i], usage); return -1; }
    }
    if (!*dir) { fprintf(stderr, "verlc: %s: --tokenizer DIR is required\nusage: %s\n", argv[0], usage); return -1; }
    return 0;
}

static int blank(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
    return !*s;
}

/* Runs fn on every JSONL row of stdin; fn returns NULL with *err set for a malformed row. */
typedef char *(*row_fn)(const vc_tokenizer *t, const cJSON *row, int flag, const char **err);

static int run_rows(int argc, char **argv, const char *flag, const char *usage, row_fn fn) {
    const char *dir = NULL;
    int on = 0, rc = 0;
    if (parse_args(argc, argv, flag, &dir, &on, usage)) return 2;
    vc_tokenizer *t = NULL;
    if (vc_tokenizer_load(dir, &t)) { fprintf(stderr, "verlc: %s\n", vc_last_error()); return 1; }
    char *line = NULL; size_t cap = 0; ssize_t n;
    long lineno = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        if (blank(line)) continue;
        const char *err = NULL;
        char why[160];
        int ok = vc_json_diagnose(line, (size_t)n, 0, why, sizeof why); /* (a \u0000 would be cut: refused) */
        cJSON *row = ok ? cJSON_ParseWithLength(line, (size_t)n) : NULL;
        char *out = row ? fn(t, row, on, &err) : NULL;
        if (!row) err = ok ? "not valid JSON" : why;
        cJSON_Delete(row);
        if (!out) { fprintf(stderr, "verlc: <stdin>:%ld: %s\n", lineno, err ? err : "failed"); rc = 1; break; }
        fputs(out, stdout); fputc('\n', stdout);
        free(out);
    }
    free(line);
    vc_tokenizer_free(t);
    return rc;
}

static char *tokenize_row(const vc_tokenizer *t, const cJSON *row, int add, const char **err) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(row, "text");
    if (!cJSON_IsString(text)) { *err = "row has no string field \"text\""; return NULL; }
    int32_t *ids = NULL; size_t n = 0;
    if (vc_tokenizer_encode(t, text->valuestring, strlen(text->valuestring), add, &ids, &n)) { *err = vc_last_error(); return NULL; }
    size_t cap = 16 + n * 12, k = 0;
    char *out = malloc(cap);
    if (out) {
        k += (size_t)snprintf(out + k, cap - k, "{\"ids\": [");
        for (size_t i = 0; i < n; i++) k += (size_t)snprintf(out + k, cap - k, i ? ", %d" : "%d", ids[i]);
        snprintf(out + k, cap - k, "]}");
    } else *err = "out of memory";
    free(ids);
    return out;
}

/* {"text": "..."} with JSON escaping; embedded NUL bytes survive as \u0000. */
static char *json_text_row(const char *s, size_t n) {
    char *out = malloc(16 + 6 * n), *w = out;
    if (!out) return NULL;
    w += sprintf(w, "{\"text\": \"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { *w++ = '\\'; *w++ = (char)c; }
        else if (c == '\n') { *w++ = '\\'; *w++ = 'n'; }
        else if (c == '\t') { *w++ = '\\'; *w++ = 't'; }
        else if (c == '\r') { *w++ = '\\'; *w++ = 'r'; }
        else if (c < 0x20 || c == 0x7F) w += sprintf(w, "\\u%04x", c);
        else *w++ = (char)c;
    }
    strcpy(w, "\"}");
    return out;
}

static char *detokenize_row(const vc_tokenizer *t, const cJSON *row, int skip, const char **err) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(row, "ids"), *e;
    if (!cJSON_IsArray(arr)) { *err = "row has no array field \"ids\""; return NULL; }
    size_t n = (size_t)cJSON_GetArraySize(arr), k = 0;
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    if (!ids) { *err = "out of memory"; return NULL; }
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int32_t)e->valuedouble) { *err = "\"ids\" holds a value that is not an integer"; free(ids); return NULL; }
        ids[k++] = (int32_t)e->valuedouble;
    }
    char *text = NULL; size_t len = 0;
    if (vc_tokenizer_decode(t, ids, n, skip, &text, &len)) { *err = vc_last_error(); free(ids); return NULL; }
    free(ids);
    char *out = json_text_row(text, len);
    if (!out) *err = "out of memory";
    free(text);
    return out;
}

int vc_cmd_tokenize(int argc, char **argv) {
    return run_rows(argc, argv, "--add-special-tokens", "verlc tokenize --tokenizer DIR [--add-special-tokens] < rows.jsonl",
                    tokenize_row);
}

int vc_cmd_detokenize(int argc, char **argv) {
    return run_rows(argc, argv, "--skip-special-tokens", "verlc detokenize --tokenizer DIR [--skip-special-tokens] < ids.jsonl",
                    detokenize_row);
}
