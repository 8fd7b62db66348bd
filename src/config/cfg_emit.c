/* Config tree -> block-style YAML (what `verlc train --print-config` shows) and JSON. */
#include "config/cfg_internal.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void emit_str(FILE *f, const char *s) {
    if (!vc_cfg_str_needs_quote(s)) { fputs(s, f); return; }
    int printable = 1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) printable = 0;
    if (printable) {
        fputc('\'', f);
        for (const char *p = s; *p; p++) {
            if (*p == '\'') fputc('\'', f);
            fputc(*p, f);
        }
        fputc('\'', f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* A resolved string holding a literal "${" is written as "\\${" so that it reads back literal. */
static void emit_lit(FILE *f, const char *s) {
    size_t cap = strlen(s) * 2 + 1, o = 0;
    char *buf = malloc(cap);
    if (!buf) { emit_str(f, s); return; }
    for (; *s; s++) {
        if (s[0] == '$' && s[1] == '{') buf[o++] = '\\';
        buf[o++] = *s;
    }
    buf[o] = 0;
    emit_str(f, buf);
    free(buf);
}

static void emit_scalar(FILE *f, const vc_cfg_node *n) {
    char buf[64];
    switch (n->kind) {
    case VC_CFG_NULL: fputs("null", f); break;
    case VC_CFG_MISSING: fputs("???", f); break;
    case VC_CFG_BOOL: fputs(n->b ? "true" : "false", f); break;
    case VC_CFG_INT: fprintf(f, "%lld", (long long)n->i); break;
    case VC_CFG_FLOAT: vc_cfg_format_float(n->f, buf, sizeof buf); fputs(buf, f); break;
    case VC_CFG_STR:
        if (n->lit && vc_cfg_is_interp(n->s)) emit_lit(f, n->s);
        else emit_str(f, n->s);
        break;
    case VC_CFG_MAP: fputs("{}", f); break;
    case VC_CFG_LIST: fputs("[]", f); break;
    default: break;
    }
}

static int is_block(const vc_cfg_node *n) {
    return (n->kind == VC_CFG_MAP || n->kind == VC_CFG_LIST) && n->n > 0;
}

static void indent(FILE *f, int k) {
    for (int i = 0; i < k; i++) fputc(' ', f);
}

static void emit_node(FILE *f, const vc_cfg_node *n, int ind);

/* A list item starts after "- " on the current line: maps continue at ind+2, lists nest as "- - x". */
static void emit_list(FILE *f, const vc_cfg_node *n, int ind, int first_inline) {
    for (size_t i = 0; i < n->n; i++) {
        if (i || !first_inline) indent(f, ind);
        fputs("- ", f);
        const vc_cfg_node *c = n->items[i];
        if (c->kind == VC_CFG_LIST && c->n) {
            emit_list(f, c, ind + 2, 1);
        } else if (c->kind == VC_CFG_MAP && c->n) {
            for (size_t k = 0; k < c->n; k++) {
                if (k) indent(f, ind + 2);
                emit_str(f, c->keys[k]);
                fputc(':', f);
                if (is_block(c->items[k])) {
                    fputc('\n', f);
                    emit_node(f, c->items[k], ind + 4);
                } else {
                    fputc(' ', f);
                    emit_scalar(f, c->items[k]);
                    fputc('\n', f);
                }
            }
        } else {
            emit_scalar(f, c);
            fputc('\n', f);
        }
    }
}

static void emit_node(FILE *f, const vc_cfg_node *n, int ind) {
    if (n->kind == VC_CFG_LIST) { emit_list(f, n, ind, 0); return; }
    for (size_t i = 0; i < n->n; i++) {
        indent(f, ind);
        emit_str(f, n->keys[i]);
        fputc(':', f);
        const vc_cfg_node *c = n->items[i];
        if (c->kind == VC_CFG_MAP && c->n) {
            fputc('\n', f);
            emit_node(f, c, ind + 2);
        } else if (c->kind == VC_CFG_LIST && c->n) {
            fputc('\n', f);
            emit_list(f, c, ind, 0); /* PyYAML style: "- x" at the key's indentation */
        } else {
            fputc(' ', f);
            emit_scalar(f, c);
            fputc('\n', f);
        }
    }
}

static const vc_cfg_node *find(const vc_config *cfg, const char *path) {
    const vc_cfg_node *n = vc_cfg_lookup(cfg->root, path);
    if (!n) vc_fail(VC_ERR_MISSING, "config: no key '%s'", path);
    return n;
}

vc_status vc_config_write_yaml(const vc_config *cfg, const char *path, FILE *f) {
    const vc_cfg_node *n = find(cfg, path);
    if (!n) return VC_ERR_MISSING;
    if (is_block(n)) emit_node(f, n, 0);
    else { emit_scalar(f, n); fputc('\n', f); }
    return ferror(f) ? vc_fail(VC_ERR_IO, "config: write failed") : VC_OK;
}

char *vc_config_to_yaml(const vc_config *cfg, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) { vc_fail(VC_ERR_NOMEM, "config: cannot open memory stream"); return NULL; }
    vc_status st = vc_config_write_yaml(cfg, path, f);
    fclose(f);
    if (st != VC_OK) { free(buf); return NULL; }
    return buf;
}

static cJSON *to_json(const vc_cfg_node *n) {
    cJSON *j = NULL;
    switch (n->kind) {
    case VC_CFG_BOOL: return cJSON_CreateBool(n->b);
    case VC_CFG_INT: { /* its digits kept (vc_json_print writes them past 2^53) */
        cJSON *j = cJSON_CreateNumber((double)n->i);
        char t[24];
        snprintf(t, sizeof t, "%lld", (long long)n->i);
        if (j) j->valuestring = vc_strdup(t);
        return j;
    }
    case VC_CFG_FLOAT: { /* a float as json.dumps writes one (1000.0, not 1000); inf and nan have no JSON: null */
        if (!isfinite(n->f)) return cJSON_CreateNull();
        cJSON *j = cJSON_CreateNumber(n->f);
        char t[40];
        vc_py_float_repr(n->f, t, sizeof t);
        if (j) j->valuestring = vc_strdup(t);
        return j;
    }
    case VC_CFG_STR: return cJSON_CreateString(n->s);
    case VC_CFG_MISSING: return cJSON_CreateString("???");
    case VC_CFG_LIST:
    case VC_CFG_MAP:
        j = n->kind == VC_CFG_LIST ? cJSON_CreateArray() : cJSON_CreateObject();
        for (size_t i = 0; j && i < n->n; i++) {
            cJSON *c = to_json(n->items[i]);
            if (!c) { cJSON_Delete(j); return NULL; }
            if (n->kind == VC_CFG_LIST) cJSON_AddItemToArray(j, c);
            else cJSON_AddItemToObject(j, n->keys[i], c);
        }
        return j;
    default: return cJSON_CreateNull();
    }
}

char *vc_config_to_json(const vc_config *cfg, const char *path, int pretty) {
    const vc_cfg_node *n = find(cfg, path);
    if (!n) return NULL;
    cJSON *j = to_json(n);
    char *s = j ? vc_json_print(j, pretty) : NULL;
    cJSON_Delete(j);
    if (!s) vc_fail(VC_ERR_NOMEM, "config: cannot build JSON");
    return s;
}
