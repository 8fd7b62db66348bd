#define _GNU_SOURCE /* memmem */
/* JSON helpers: positioned syntax errors and typed getters that name the key at fault. */
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Python's json writes float infinities as Infinity / -Infinity (transformers' configs: Mamba's time_step_limit);
 * a copy of text with each such token outside strings as 1e999999 (the same length: byte offsets stay), which
 * parses as an infinite number; NULL when there is none (or no memory) */
static char *python_infinities(const char *text, size_t len) {
    if (!memmem(text, len, "Infinity", 8)) return NULL;
    char *c = vc_malloc(len + 1);
    if (!c) return NULL;
    memcpy(c, text, len);
    c[len] = 0;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        if (in_str) {
            if (c[i] == '\\') i++;
            else if (c[i] == '"') in_str = 0;
        } else if (c[i] == '"') in_str = 1;
        else if (i + 8 <= len && !memcmp(c + i, "Infinity", 8)) {
            memcpy(c + i, "1e999999", 8);
            i += 7;
        }
    }
    return c;
}

/* the number items under j in document order, appended to v (NULL: counted only) */
static size_t number_items(cJSON *j, cJSON **v, size_t n) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            if (v) v[n] = j;
            n++;
        }
        n = number_items(j->child, v, n);
    }
    return n;
}

/* The number tokens of text outside strings in order (as cJSON reads one: a value starting with '-' or a digit,
 * extended over [0-9+-.eE] and cut where strtod stops), each copied into v[n]->valuestring (v NULL: counted only). */
static size_t number_tokens(const char *text, size_t len, cJSON **v) {
    size_t n = 0;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') { in_str = 1; continue; }
        if (c != '-' && !(c >= '0' && c <= '9')) continue;
        size_t k = 0;
        while (i + k < len && text[i + k] && strchr("0123456789+-.eE", text[i + k])) k++;
        char small[64], *tok = k < sizeof small ? small : vc_malloc(k + 1); /* (an int of any length: Python's) */
        if (!tok) return (size_t)-1;
        memcpy(tok, text + i, k);
        tok[k] = 0;
        char *end = tok;
        strtod(tok, &end);
        size_t used = end > tok ? (size_t)(end - tok) : 1;
        tok[used] = 0;
        if (v && !v[n]->valuestring) v[n]->valuestring = vc_strdup(tok);
        if (tok != small) free(tok);
        n++;
        i += used - 1;
    }
    return n;
}

void vc_json_keep_numbers(cJSON *root, const char *text, size_t len) {
    size_t ni = number_items(root, NULL, 0);
    if (!ni || ni != number_tokens(text, len, NULL)) return;
    cJSON **v = vc_malloc(ni * sizeof *v);
    if (v) {
        number_items(root, v, 0);
        number_tokens(text, len, v);
    }
    free(v);
}

static int same_key(const cJSON *a, const cJSON *b) { return a->string && b->string && !strcmp(a->string, b->string); }

static int by_key(const void *a, const void *b) {
    return strcmp((*(cJSON *const *)a)->string, (*(cJSON *const *)b)->string);
}

/* whether object j repeats a key: sorted names compared for a large object (its pairs scanned below only then) */
static int repeats_key(const cJSON *j) {
    size_t n = 0, k = 0;
    for (const cJSON *c = j->child; c; c = c->next) n++;
    if (n < 2) return 0;
    if (n <= 64) return 1; /* (small: the scan below is as cheap) */
    cJSON **v = vc_malloc(n * sizeof *v);
    if (!v) return 1;
    for (cJSON *c = j->child; c; c = c->next) {
        if (!c->string) {
            free(v);
            return 1;
        }
        v[k++] = c;
    }
    qsort(v, n, sizeof *v, by_key);
    int rep = 0;
    for (size_t i = 1; i < n && !rep; i++) rep = !strcmp(v[i - 1]->string, v[i]->string);
    free(v);
    return rep;
}

static void py_keys(cJSON *j) {
    if (cJSON_IsObject(j) && repeats_key(j))
        for (cJSON *c = j->child; c; c = c->next) {
            cJSON *last = NULL;
            for (cJSON *d = c->next; d; d = d->next)
                if (same_key(c, d)) last = d;
            if (!last) continue;
            for (cJSON *d = c->next, *nx; d != last; d = nx) {
                nx = d->next;
                if (same_key(c, d)) cJSON_Delete(cJSON_DetachItemViaPointer(j, d));
            }
            cJSON_DetachItemViaPointer(j, last);
            cJSON_ReplaceItemViaPointer(j, c, last); /* (c freed; last in its place) */
            c = last;
        }
    for (cJSON *c = j->child; c; c = c->next) py_keys(c);
}

void vc_json_py_keys(cJSON *root) {
    if (root) py_keys(root);
}

int vc_json_number_is_float(const cJSON *j) {
    if (!cJSON_IsNumber(j)) return 0;
    if (j->valuestring) return strpbrk(j->valuestring, ".eE") != NULL;
    double d = j->valuedouble;
    return !(d == floor(d) && fabs(d) < 9007199254740992.0);
}

vc_status vc_json_parse(const char *text, size_t len, const char *what, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    char *py = python_infinities(text, len);
    if (py) text = py;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        const char *err = cJSON_GetErrorPtr();
        if (err && err >= text && err <= text + len) off = (size_t)(err - text);
        size_t line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (text[i] == '\n') { line++; col = 1; } else col++;
        }
        free(py);
        return vc_fail(VC_ERR_FORMAT, "%s: JSON syntax error at byte %zu (line %zu, column %zu)", what, off,
                       line, col);
    }
    /* only whitespace may follow the value */
    size_t off = (size_t)(end - text);
    for (size_t i = off; i < len; i++) {
        char c = text[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != 0) {
            cJSON_Delete(root);
            free(py);
            return vc_fail(VC_ERR_FORMAT, "%s: JSON syntax error at byte %zu: trailing characters after the value",
                           what, i);
        }
    }
    vc_json_keep_numbers(root, text, off);
    free(py);
    *out = root;
    return VC_OK;
}

vc_status vc_json_load_file(const char *path, cJSON **out) {
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    vc_status st = vc_read_file(path, &buf, &len);
    if (st != VC_OK) return st;
    st = vc_json_parse(buf, len, path, out);
    free(buf);
    return st;
}

const char *vc_json_type_name(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsString(v)) return "string";
    if (cJSON_IsNumber(v)) return "number";
    if (cJSON_IsBool(v)) return "boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "array";
    if (cJSON_IsObject(v)) return "object";
    return "invalid";
}

/* the last member of that name, as Python's json (and so transformers) keeps a repeated key's last value */
const cJSON *vc_json_member(const cJSON *obj, const char *key) {
    if (!obj || !cJSON_IsObject(obj)) return NULL;
    const cJSON *v = NULL;
    for (const cJSON *c = obj->child; c; c = c->next)
        if (c->string && !strcmp(c->string, key)) v = c;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static vc_status wrong_type(const char *ctx, const char *key, const char *want, const cJSON *v) {
    return vc_fail(VC_ERR_FORMAT, "%s: key '%s': expected %s, got %s", ctx ? ctx : "JSON", key, want,
                   vc_json_type_name(v));
}

static vc_status absent(const char *ctx, const char *key) {
    return vc_fail(VC_ERR_MISSING, "%s: required key '%s' is missing", ctx ? ctx : "JSON", key);
}

vc_status vc_json_get_int(const cJSON *obj, const char *key, int64_t def, int64_t *out, const char *ctx) {
    const cJSON *v = vc_json_member(obj, key);
    *out = def;
    if (!v) return VC_OK;
    if (!cJSON_IsNumber(v)) return wrong_type(ctx, key, "an integer", v);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0)
        return vc_fail(VC_ERR_FORMAT, "%s: key '%s': expected an integer, got %.17g", ctx ? ctx : "JSON", key, d);
    *out = (int64_t)d;
    return VC_OK;
}

vc_status vc_json_get_num(const cJSON *obj, const char *key, double def, double *out, const char *ctx) {
    const cJSON *v = vc_json_member(obj, key);
    *out = def;
    if (!v) return VC_OK;
    if (!cJSON_IsNumber(v)) return wrong_type(ctx, key, "a number", v);
    *out = v->valuedouble;
    return VC_OK;
}

vc_status vc_json_get_bool(const cJSON *obj, const char *key, int def, int *out, const char *ctx) {
    const cJSON *v = vc_json_member(obj, key);
    *out = def;
    if (!v) return VC_OK;
    if (!cJSON_IsBool(v)) return wrong_type(ctx, key, "a boolean", v);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return VC_OK;
}

vc_status vc_json_get_str(const cJSON *obj, const char *key, const char *def, const char **out, const char *ctx) {
    const cJSON *v = vc_json_member(obj, key);
    *out = def;
    if (!v) return VC_OK;
    if (!cJSON_IsString(v)) return wrong_type(ctx, key, "a string", v);
    *out = v->valuestring;
    return VC_OK;
}

vc_status vc_json_req_int(const cJSON *obj, const char *key, int64_t *out, const char *ctx) {
    if (!vc_json_member(obj, key)) return absent(ctx, key);
    return vc_json_get_int(obj, key, 0, out, ctx);
}

vc_status vc_json_req_num(const cJSON *obj, const char *key, double *out, const char *ctx) {
    if (!vc_json_member(obj, key)) return absent(ctx, key);
    return vc_json_get_num(obj, key, 0, out, ctx);
}

vc_status vc_json_req_str(const cJSON *obj, const char *key, const char **out, const char *ctx) {
    if (!vc_json_member(obj, key)) return absent(ctx, key);
    return vc_json_get_str(obj, key, NULL, out, ctx);
}

void vc_json_fput_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* the text of number item n as vc_json_print writes it: json.dumps(json.loads(token)) where a token is kept (an int's
 * digits, a float's repr), else the value's digits or repr */
static void number_text(const cJSON *n, char *out, size_t cap) {
    double d = n->valuedouble;
    const char *tok = n->valuestring;
    if (tok && tok[0] && !strpbrk(tok, ".eE")) snprintf(out, cap, "%s", tok);
    else if (!isfinite(d)) snprintf(out, cap, "null");
    else if (tok && tok[0]) vc_py_float_repr(d, out, cap);
    else if (d == floor(d) && fabs(d) < 9.2e18) snprintf(out, cap, "%lld", (long long)d);
    else vc_py_float_repr(d, out, cap);
}

/* a copy of j whose numbers are raw items holding their exact text (cJSON prints a raw item verbatim) */
static cJSON *exact_copy(const cJSON *j) {
    if (cJSON_IsNumber(j)) {
        char t[64];
        number_text(j, t, sizeof t);
        return cJSON_CreateRaw(t);
    }
    if (!cJSON_IsArray(j) && !cJSON_IsObject(j)) return cJSON_Duplicate(j, 1);
    cJSON *c = cJSON_IsArray(j) ? cJSON_CreateArray() : cJSON_CreateObject();
    for (const cJSON *k = j->child; c && k; k = k->next) {
        cJSON *d = exact_copy(k);
        if (!d) { cJSON_Delete(c); return NULL; }
        if (cJSON_IsObject(j)) cJSON_AddItemToObject(c, k->string ? k->string : "", d);
        else cJSON_AddItemToArray(c, d);
    }
    return c;
}

char *vc_json_print(const cJSON *j, int pretty) {
    if (!j) return NULL;
    cJSON *c = exact_copy(j);
    char *s = c ? (pretty ? cJSON_Print(c) : cJSON_PrintUnformatted(c)) : NULL;
    cJSON_Delete(c);
    return s;
}
