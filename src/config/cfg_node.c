/* Config tree nodes: creation, copy, ordered maps, lists, paths. */
#include "config/cfg_internal.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

vc_cfg_node *vc_cfg_node_new(vc_cfg_kind kind) {
    vc_cfg_node *n = vc_calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->decl = VC_DECL_ANY;
    return n;
}

static void node_clear(vc_cfg_node *n) {
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys) free(n->keys[i]);
        vc_cfg_node_free(n->items[i]);
    }
    free(n->keys);
    free(n->items);
    free(n->s);
    n->keys = NULL;
    n->items = NULL;
    n->s = NULL;
    n->n = n->cap = 0;
}

void vc_cfg_node_free(vc_cfg_node *n) {
    if (!n) return;
    node_clear(n);
    free(n);
}

vc_cfg_node *vc_cfg_scalar_str(const char *s, size_t len) {
    vc_cfg_node *n = vc_cfg_node_new(VC_CFG_STR);
    if (!n) return NULL;
    n->s = vc_malloc(len + 1);
    if (!n->s) { free(n); return NULL; }
    memcpy(n->s, s, len);
    n->s[len] = 0;
    return n;
}

static int grow(vc_cfg_node *n, int with_keys) {
    if (n->n < n->cap) return 1;
    size_t cap = n->cap ? n->cap * 2 : 8;
    vc_cfg_node **items = realloc(n->items, cap * sizeof *items);
    if (!items) return 0;
    n->items = items;
    if (with_keys) {
        char **keys = realloc(n->keys, cap * sizeof *keys);
        if (!keys) return 0;
        n->keys = keys;
    }
    n->cap = cap;
    return 1;
}

vc_cfg_node *vc_cfg_map_get(const vc_cfg_node *map, const char *key) {
    if (!map || map->kind != VC_CFG_MAP) return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (!strcmp(map->keys[i], key)) return map->items[i];
    return NULL;
}

vc_status vc_cfg_map_put(vc_cfg_node *map, const char *key, vc_cfg_node *val) {
    for (size_t i = 0; i < map->n; i++) {
        if (strcmp(map->keys[i], key)) continue;
        vc_cfg_node_free(map->items[i]);
        map->items[i] = val;
        return VC_OK;
    }
    return vc_cfg_map_append(map, key, val);
}

size_t vc_cfg_node_count(const vc_cfg_node *n, size_t limit) {
    size_t c = 1;
    if (n->kind == VC_CFG_MAP || n->kind == VC_CFG_LIST)
        for (size_t i = 0; i < n->n && c <= limit; i++) c += vc_cfg_node_count(n->items[i], limit - c);
    return c;
}

vc_status vc_cfg_map_append(vc_cfg_node *map, const char *key, vc_cfg_node *val) {
    char *k = vc_strdup(key);
    if (!k || !grow(map, 1)) {
        free(k);
        vc_cfg_node_free(val);
        return vc_fail(VC_ERR_NOMEM, "config: out of memory");
    }
    map->keys[map->n] = k;
    map->items[map->n++] = val;
    return VC_OK;
}

int vc_cfg_map_remove(vc_cfg_node *map, const char *key) {
    for (size_t i = 0; i < map->n; i++) {
        if (strcmp(map->keys[i], key)) continue;
        free(map->keys[i]);
        vc_cfg_node_free(map->items[i]);
        memmove(map->keys + i, map->keys + i + 1, (map->n - i - 1) * sizeof *map->keys);
        memmove(map->items + i, map->items + i + 1, (map->n - i - 1) * sizeof *map->items);
        map->n--;
        return 1;
    }
    return 0;
}

vc_status vc_cfg_list_push(vc_cfg_node *list, vc_cfg_node *val) {
    if (!grow(list, 0)) {
        vc_cfg_node_free(val);
        return vc_fail(VC_ERR_NOMEM, "config: out of memory");
    }
    list->items[list->n++] = val;
    return VC_OK;
}

vc_cfg_node *vc_cfg_node_copy(const vc_cfg_node *src) {
    vc_cfg_node *n = vc_cfg_node_new(src->kind);
    if (!n) return NULL;
    n->decl = src->decl;
    n->line = src->line;
    n->open = src->open;
    n->lit = src->lit;
    n->b = src->b;
    n->i = src->i;
    n->f = src->f;
    if (src->s && !(n->s = vc_strdup(src->s))) goto fail;
    for (size_t i = 0; i < src->n; i++) {
        vc_cfg_node *c = vc_cfg_node_copy(src->items[i]);
        if (!c) goto fail;
        /* a map's keys are distinct: append without the linear search (copies of big maps stay linear) */
        vc_status st = src->kind == VC_CFG_MAP ? vc_cfg_map_append(n, src->keys[i], c) : vc_cfg_list_push(n, c);
        if (st != VC_OK) goto fail;
    }
    return n;
fail:
    vc_cfg_node_free(n);
    return NULL;
}

void vc_cfg_node_assign(vc_cfg_node *dst, vc_cfg_node *src) {
    int decl = dst->decl;
    node_clear(dst);
    *dst = *src;
    dst->decl = decl;
    free(src);
}

int vc_cfg_node_equal(const vc_cfg_node *a, const vc_cfg_node *b) {
    if (a->kind != b->kind || a->n != b->n) return 0;
    switch (a->kind) {
    case VC_CFG_BOOL: return a->b == b->b;
    case VC_CFG_INT: return a->i == b->i;
    case VC_CFG_FLOAT: return a->f == b->f || (a->f != a->f && b->f != b->f);
    case VC_CFG_STR: return !strcmp(a->s, b->s);
    case VC_CFG_MAP:
    case VC_CFG_LIST:
        for (size_t i = 0; i < a->n; i++) {
            if (a->kind == VC_CFG_MAP && strcmp(a->keys[i], b->keys[i])) return 0;
            if (!vc_cfg_node_equal(a->items[i], b->items[i])) return 0;
        }
        return 1;
    default: return 1;
    }
}

void vc_cfg_mark_schema(vc_cfg_node *n) {
    n->decl = n->kind;
    if (n->kind == VC_CFG_NULL || n->kind == VC_CFG_MISSING) n->decl = VC_DECL_ANY;
    if (vc_cfg_node_is_interp(n)) n->decl = VC_DECL_ANY;
    if (n->kind == VC_CFG_MAP && n->n == 0) n->open = 1;
    for (size_t i = 0; i < n->n; i++) vc_cfg_mark_schema(n->items[i]);
}

int vc_cfg_path_split(const char *path, char *buf, char **segs, int max_segs) {
    int n = 0;
    size_t o = 0;
    segs[n++] = buf;
    for (const char *p = path; *p; p++) {
        if (*p == '.' || *p == '[') {
            if (*p == '[' && o > 0 && buf[o - 1] == 0) { /* "a.[1]" is not a path */ return -1; }
            buf[o++] = 0;
            if (n >= max_segs) return -1;
            segs[n++] = buf + o;
        } else if (*p == ']') {
            if (p[1] && p[1] != '.' && p[1] != '[') return -1;
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = 0;
    for (int i = 0; i < n; i++)
        if (!segs[i][0]) return -1;
    return n;
}

vc_cfg_node *vc_cfg_child(const vc_cfg_node *n, const char *seg) {
    if (!n) return NULL;
    if (n->kind == VC_CFG_MAP) return vc_cfg_map_get(n, seg);
    if (n->kind != VC_CFG_LIST) return NULL;
    char *end;
    if (!isdigit((unsigned char)seg[0])) return NULL;
    unsigned long idx = strtoul(seg, &end, 10);
    if (*end || idx >= n->n) return NULL;
    return n->items[idx];
}

vc_cfg_node *vc_cfg_lookup_segs(vc_cfg_node *root, char **segs, int n) {
    vc_cfg_node *cur = root;
    for (int i = 0; i < n && cur; i++) cur = vc_cfg_child(cur, segs[i]);
    return cur;
}

const vc_cfg_node *vc_cfg_lookup(const vc_cfg_node *root, const char *path) {
    if (!path || !*path) return root;
    size_t len = strlen(path);
    char stackbuf[256], *buf = len < sizeof stackbuf ? stackbuf : malloc(len + 1);
    char *segs[64];
    const vc_cfg_node *r = NULL;
    if (!buf) return NULL;
    int n = vc_cfg_path_split(path, buf, segs, 64);
    if (n > 0) r = vc_cfg_lookup_segs((vc_cfg_node *)root, segs, n);
    if (buf != stackbuf) free(buf);
    return r;
}
