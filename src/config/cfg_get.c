/* Typed reads by dotted path. */
#include "config/cfg_internal.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

vc_cfg_kind vc_config_kind(const vc_config *cfg, const char *path) {
    const vc_cfg_node *n = vc_cfg_lookup(cfg->root, path);
    return n ? n->kind : VC_CFG_ABSENT;
}

int vc_config_has(const vc_config *cfg, const char *path) { return vc_cfg_lookup(cfg->root, path) != NULL; }

/* The node at path, or an error: absent, null/??? (VC_ERR_MISSING unless allow_null). */
static vc_status get_node(const vc_config *cfg, const char *path, int allow_null, const vc_cfg_node **out) {
    const vc_cfg_node *n = vc_cfg_lookup(cfg->root, path);
    *out = n;
    if (!n) return vc_fail(VC_ERR_MISSING, "config: no key '%s'", path);
    if (n->kind == VC_CFG_MISSING) return vc_fail(VC_ERR_MISSING, "config: '%s' must be set (it is ?\?\?)", path);
    if (n->kind == VC_CFG_NULL && !allow_null) return vc_fail(VC_ERR_MISSING, "config: '%s' is null", path);
    if (vc_cfg_node_is_interp(n))
        return vc_fail(VC_ERR_ARG, "config: '%s' is an unresolved interpolation '%s' (call vc_config_resolve)", path, n->s);
    return VC_OK;
}

static const char *node_text(const vc_cfg_node *n) {
    switch (n->kind) {
    case VC_CFG_LIST: return "a list";
    case VC_CFG_MAP: return "a mapping";
    case VC_CFG_BOOL: return n->b ? "true" : "false";
    default: return n->s ? n->s : "a number";
    }
}

static vc_status node_int(const char *path, const vc_cfg_node *n, int64_t *out) {
    if (n->kind == VC_CFG_INT) { *out = n->i; return VC_OK; }
    if (n->kind == VC_CFG_FLOAT && n->f == floor(n->f) && fabs(n->f) < 9e15) { *out = (int64_t)n->f; return VC_OK; }
    return vc_fail(VC_ERR_ARG, "config: '%s' must be an integer, got '%s'", path, node_text(n));
}

static vc_status node_double(const char *path, const vc_cfg_node *n, double *out) {
    if (n->kind == VC_CFG_INT) { *out = (double)n->i; return VC_OK; }
    if (n->kind == VC_CFG_FLOAT) { *out = n->f; return VC_OK; }
    return vc_fail(VC_ERR_ARG, "config: '%s' must be a number, got '%s'", path, node_text(n));
}

static vc_status node_bool(const char *path, const vc_cfg_node *n, int *out) {
    if (n->kind == VC_CFG_BOOL) { *out = n->b; return VC_OK; }
    if (n->kind == VC_CFG_INT && (n->i == 0 || n->i == 1)) { *out = (int)n->i; return VC_OK; }
    if (n->kind == VC_CFG_STR && (!strcasecmp(n->s, "true") || !strcasecmp(n->s, "false"))) {
        *out = !strcasecmp(n->s, "true");
        return VC_OK;
    }
    return vc_fail(VC_ERR_ARG, "config: '%s' must be true or false, got '%s'", path, node_text(n));
}

/* Scalars keep their text; numbers built without text (int->float conversions) get one. */
static vc_status node_str(const char *path, const vc_cfg_node *n, const char **out) {
    if (n->kind == VC_CFG_NULL) { *out = NULL; return VC_OK; }
    if (n->kind == VC_CFG_LIST || n->kind == VC_CFG_MAP)
        return vc_fail(VC_ERR_ARG, "config: '%s' must be a string, got %s", path, node_text(n));
    if (!n->s) {
        char buf[64];
        if (n->kind == VC_CFG_BOOL) snprintf(buf, sizeof buf, "%s", n->b ? "true" : "false");
        else if (n->kind == VC_CFG_INT) snprintf(buf, sizeof buf, "%lld", (long long)n->i);
        else vc_cfg_format_float(n->f, buf, sizeof buf);
        ((vc_cfg_node *)n)->s = vc_strdup(buf); /* cache: the text is part of the node's value */
        if (!n->s) return VC_ERR_NOMEM;
    }
    *out = n->s;
    return VC_OK;
}

vc_status vc_config_get_int(const vc_config *cfg, const char *path, int64_t *out) {
    const vc_cfg_node *n = NULL;
    vc_status st = get_node(cfg, path, 0, &n);
    return st != VC_OK ? st : node_int(path, n, out);
}

vc_status vc_config_get_double(const vc_config *cfg, const char *path, double *out) {
    const vc_cfg_node *n = NULL;
    vc_status st = get_node(cfg, path, 0, &n);
    return st != VC_OK ? st : node_double(path, n, out);
}

vc_status vc_config_get_bool(const vc_config *cfg, const char *path, int *out) {
    const vc_cfg_node *n = NULL;
    vc_status st = get_node(cfg, path, 0, &n);
    return st != VC_OK ? st : node_bool(path, n, out);
}

vc_status vc_config_get_str(const vc_config *cfg, const char *path, const char **out) {
    const vc_cfg_node *n = NULL;
    vc_status st = get_node(cfg, path, 1, &n);
    return st != VC_OK ? st : node_str(path, n, out);
}

/* Absent or null -> use the default. */
static int use_default(const vc_config *cfg, const char *path) {
    const vc_cfg_node *n = vc_cfg_lookup(cfg->root, path);
    return !n || n->kind == VC_CFG_NULL || n->kind == VC_CFG_MISSING;
}

vc_status vc_config_get_int_or(const vc_config *cfg, const char *path, int64_t def, int64_t *out) {
    if (use_default(cfg, path)) { *out = def; return VC_OK; }
    return vc_config_get_int(cfg, path, out);
}

vc_status vc_config_get_double_or(const vc_config *cfg, const char *path, double def, double *out) {
    if (use_default(cfg, path)) { *out = def; return VC_OK; }
    return vc_config_get_double(cfg, path, out);
}

vc_status vc_config_get_bool_or(const vc_config *cfg, const char *path, int def, int *out) {
    if (use_default(cfg, path)) { *out = def; return VC_OK; }
    return vc_config_get_bool(cfg, path, out);
}

vc_status vc_config_get_str_or(const vc_config *cfg, const char *path, const char *def, const char **out) {
    if (use_default(cfg, path)) { *out = def; return VC_OK; }
    return vc_config_get_str(cfg, path, out);
}

vc_status vc_config_list_len(const vc_config *cfg, const char *path, size_t *n) {
    const vc_cfg_node *node;
    vc_status st = get_node(cfg, path, 1, &node);
    if (st != VC_OK) return st;
    if (node->kind == VC_CFG_MAP) return vc_fail(VC_ERR_ARG, "config: '%s' must be a list, got a mapping", path);
    *n = node->kind == VC_CFG_LIST ? node->n : node->kind == VC_CFG_NULL ? 0 : 1;
    return VC_OK;
}

static vc_status list_item(const vc_config *cfg, const char *path, size_t i, const vc_cfg_node **out) {
    const vc_cfg_node *node;
    vc_status st = get_node(cfg, path, 1, &node);
    if (st != VC_OK) return st;
    size_t len = node->kind == VC_CFG_LIST ? node->n : node->kind == VC_CFG_NULL || node->kind == VC_CFG_MAP ? 0 : 1;
    if (i >= len) return vc_fail(VC_ERR_ARG, "config: '%s' has %zu items, no item %zu", path, len, i);
    *out = node->kind == VC_CFG_LIST ? node->items[i] : node;
    if ((*out)->kind == VC_CFG_NULL || (*out)->kind == VC_CFG_MISSING)
        return vc_fail(VC_ERR_MISSING, "config: '%s' item %zu is null", path, i);
    return VC_OK;
}

vc_status vc_config_list_str(const vc_config *cfg, const char *path, size_t i, const char **out) {
    const vc_cfg_node *n = NULL;
    vc_status st = list_item(cfg, path, i, &n);
    return st != VC_OK ? st : node_str(path, n, out);
}

vc_status vc_config_list_double(const vc_config *cfg, const char *path, size_t i, double *out) {
    const vc_cfg_node *n = NULL;
    vc_status st = list_item(cfg, path, i, &n);
    return st != VC_OK ? st : node_double(path, n, out);
}

vc_status vc_config_map_len(const vc_config *cfg, const char *path, size_t *n) {
    const vc_cfg_node *node;
    vc_status st = get_node(cfg, path, 1, &node);
    if (st != VC_OK) return st;
    if (node->kind != VC_CFG_MAP && node->kind != VC_CFG_NULL)
        return vc_fail(VC_ERR_ARG, "config: '%s' must be a mapping, got '%s'", path, node_text(node));
    *n = node->kind == VC_CFG_MAP ? node->n : 0;
    return VC_OK;
}

vc_status vc_config_map_key(const vc_config *cfg, const char *path, size_t i, const char **out) {
    size_t n = 0;
    vc_status st = vc_config_map_len(cfg, path, &n);
    if (st != VC_OK) return st;
    if (i >= n) return vc_fail(VC_ERR_ARG, "config: '%s' has %zu keys, no key %zu", path, n, i);
    *out = vc_cfg_lookup(cfg->root, path)->keys[i];
    return VC_OK;
}
