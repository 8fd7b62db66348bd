/* Edits of JSON text that keep the rest of it byte for byte (vc_json_text_set): config.json files written back
 * with a changed dtype keep their numbers as transformers' typed config classes want them (7.0, not 7). */
#include "verlc/json.h"
#include "verlc/core.h"
#include <stdlib.h>
#include <string.h>

static size_t skip_ws(const char *t, size_t i) {
    while (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r') i++;
    return i;
}

/* past the string whose opening quote is at i */
static size_t past_string(const char *t, size_t i) {
    for (i++; t[i] && t[i] != '"'; i++)
        if (t[i] == '\\' && t[i + 1]) i++;
    return t[i] ? i + 1 : i;
}

/* past the value starting at i (the first ',', '}' or ']' outside it ends it); trailing blanks excluded */
static size_t past_value(const char *t, size_t i) {
    int depth = 0;
    size_t last = i;
    while (t[i]) {
        char c = t[i];
        if (c == '"') {
            i = past_string(t, i);
            last = i;
            continue;
        }
        if (depth == 0 && (c == ',' || c == '}' || c == ']')) break;
        if (c == '{' || c == '[') depth++;
        if (c == '}' || c == ']') depth--;
        i++;
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') last = i;
    }
    return last;
}

/* the top-level member key: [*ks, *ve) from its key's quote to its value's end; 0 when absent */
static int find_member(const char *t, size_t open, const char *key, size_t *ks, size_t *ve) {
    size_t i = open + 1, kl = strlen(key);
    for (;;) {
        i = skip_ws(t, i);
        if (t[i] != '"') return 0;
        size_t k = i, ke = past_string(t, i), c = skip_ws(t, ke);
        if (t[c] != ':') return 0;
        size_t v = skip_ws(t, c + 1), e = past_value(t, v);
        if (ke - k == kl + 2 && !memcmp(t + k + 1, key, kl)) return *ks = k, *ve = e, 1;
        i = skip_ws(t, e);
        if (t[i] != ',') return 0;
        i++;
    }
}

vc_status vc_json_text_set(char **text, const char *key, const char *value) {
    const char *t = *text;
    size_t open = skip_ws(t, 0), n = strlen(t), ks, ve;
    if (t[open] != '{') return vc_fail(VC_ERR_FORMAT, "JSON text: not an object");
    size_t a, b; /* the bytes [a, b) replaced by the new member text */
    char *mid = NULL;
    if (find_member(t, open, key, &ks, &ve)) {
        a = ks, b = ve;
        if (!value) { /* with one comma: the one after, else the one before */
            size_t j = skip_ws(t, ve);
            if (t[j] == ',') b = skip_ws(t, j + 1);
            else {
                size_t p = ks;
                while (p > open + 1 && t[p - 1] != ',') p--;
                if (p > open + 1) a = p - 1;
            }
        }
    } else {
        if (!value) return VC_OK;
        a = b = open + 1;
    }
    if (value) {
        int first = a == open + 1 && b == a, empty = t[skip_ws(t, open + 1)] == '}';
        size_t m = strlen(key) + strlen(value) + 16;
        if (!(mid = malloc(m))) return VC_ERR_NOMEM;
        snprintf(mid, m, first ? "\n  \"%s\": %s%s" : "\"%s\": %s", key, value, first && !empty ? "," : "");
    }
    size_t ml = mid ? strlen(mid) : 0;
    char *out = malloc(n - (b - a) + ml + 1);
    if (!out) return free(mid), VC_ERR_NOMEM;
    memcpy(out, t, a);
    if (mid) memcpy(out + a, mid, ml);
    memcpy(out + a + ml, t + b, n - b + 1);
    free(mid);
    free(*text);
    *text = out;
    return VC_OK;
}
