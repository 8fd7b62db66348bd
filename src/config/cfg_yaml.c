/* YAML text -> config tree, with libyaml's event parser. Every node remembers its source line so that
 * later errors (unknown key, wrong type) can name the file and line. */
#include "config/cfg_internal.h"
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct anchor {
    char *name;
    vc_cfg_node *node; /* own copy: the tree may free or change the original */
};

struct yparser {
    yaml_parser_t p;
    const char *name;
    struct anchor *anchors;
    size_t n_anchors;
    int depth;       /* collections open (parse_node recurses once per level) */
    size_t copied;   /* nodes copied for anchors and aliases ("billion laughs" guard) */
};

/* Deeper YAML would overflow the stack of this recursive reader; no configuration nests near it. */
#define YAML_MAX_DEPTH 256
/* Aliases may not expand the document past this many nodes (verl's whole config has about 1500). */
#define YAML_MAX_COPIED 200000

static vc_status charge_copy(struct yparser *y, const vc_cfg_node *n, size_t line) {
    y->copied += vc_cfg_node_count(n, YAML_MAX_COPIED + 1);
    if (y->copied > YAML_MAX_COPIED)
        return vc_fail(VC_ERR_FORMAT, "%s:%zu: aliases expand the document to more than %d nodes", y->name, line,
                       YAML_MAX_COPIED);
    return VC_OK;
}

static vc_status parse_node(struct yparser *y, yaml_event_t *ev, vc_cfg_node **out);

static vc_status next_event(struct yparser *y, yaml_event_t *ev) {
    if (yaml_parser_parse(&y->p, ev)) return VC_OK;
    const yaml_mark_t *m = &y->p.problem_mark;
    return vc_fail(VC_ERR_FORMAT, "%s:%zu: YAML error: %s%s%s", y->name, m->line + 1,
                   y->p.problem ? y->p.problem : "malformed YAML", y->p.context ? " " : "",
                   y->p.context ? y->p.context : "");
}

static vc_status remember_anchor(struct yparser *y, const yaml_char_t *anchor, vc_cfg_node *n) {
    if (!anchor) return VC_OK;
    vc_status st = charge_copy(y, n, (size_t)(n->line > 0 ? n->line : 0));
    if (st != VC_OK) return st;
    struct anchor *a = realloc(y->anchors, (y->n_anchors + 1) * sizeof *a);
    if (!a) return vc_fail(VC_ERR_NOMEM, "%s: out of memory", y->name);
    y->anchors = a;
    a[y->n_anchors].name = vc_strdup((const char *)anchor);
    a[y->n_anchors].node = vc_cfg_node_copy(n);
    if (!a[y->n_anchors].name || !a[y->n_anchors].node) {
        free(a[y->n_anchors].name);
        vc_cfg_node_free(a[y->n_anchors].node);
        return VC_ERR_NOMEM;
    }
    y->n_anchors++;
    return VC_OK;
}

static vc_status scalar_node(struct yparser *y, yaml_event_t *ev, vc_cfg_node **out) {
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (tag && !strcmp(tag, YAML_STR_TAG)) plain = 0;
    else if (tag && !strcmp(tag, "!")) plain = 0;
    else if (tag && strncmp(tag, "tag:yaml.org,2002:", 18) == 0) plain = 1; /* !!int "3" etc. */
    *out = plain ? vc_cfg_scalar_yaml(v, len) : vc_cfg_scalar_str(v, len);
    return *out ? VC_OK : VC_ERR_NOMEM;
}

/* Applies YAML merge keys (<<: *base or <<: [*a, *b]): entries the mapping does not set itself. */
/* The keys of one mapping being read, hashed, so that a mapping of n keys is read in O(n) and not O(n^2).
 * Entries point at the map's own key strings. */
struct keyset {
    const char **k;
    size_t cap, n;
};

static size_t key_hash(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int keyset_has(const struct keyset *ks, const char *key) {
    if (!ks->cap) return 0;
    for (size_t i = key_hash(key) & (ks->cap - 1);; i = (i + 1) & (ks->cap - 1)) {
        if (!ks->k[i]) return 0;
        if (!strcmp(ks->k[i], key)) return 1;
    }
}

static vc_status keyset_add(struct keyset *ks, const char *key) {
    if (2 * (ks->n + 1) > ks->cap) {
        size_t cap = ks->cap ? 2 * ks->cap : 16;
        const char **k = calloc(cap, sizeof *k);
        if (!k) return vc_fail(VC_ERR_NOMEM, "config: out of memory");
        for (size_t j = 0; j < ks->cap; j++) {
            if (!ks->k[j]) continue;
            size_t i = key_hash(ks->k[j]) & (cap - 1);
            while (k[i]) i = (i + 1) & (cap - 1);
            k[i] = ks->k[j];
        }
        free(ks->k);
        ks->k = k;
        ks->cap = cap;
    }
    size_t i = key_hash(key) & (ks->cap - 1);
    while (ks->k[i]) i = (i + 1) & (ks->cap - 1);
    ks->k[i] = key;
    ks->n++;
    return VC_OK;
}

/* Appends a key known to be absent and records it. */
static vc_status add_key(vc_cfg_node *map, struct keyset *ks, const char *key, vc_cfg_node *val) {
    vc_status st = vc_cfg_map_append(map, key, val);
    return st != VC_OK ? st : keyset_add(ks, map->keys[map->n - 1]);
}

static vc_status apply_merge(vc_cfg_node *map, struct keyset *ks, const vc_cfg_node *src) {
    if (src->kind == VC_CFG_LIST) {
        for (size_t i = 0; i < src->n; i++) {
            vc_status st = apply_merge(map, ks, src->items[i]);
            if (st != VC_OK) return st;
        }
        return VC_OK;
    }
    for (size_t i = 0; src->kind == VC_CFG_MAP && i < src->n; i++) {
        if (keyset_has(ks, src->keys[i])) continue;
        vc_cfg_node *c = vc_cfg_node_copy(src->items[i]);
        vc_status st = c ? add_key(map, ks, src->keys[i], c) : VC_ERR_NOMEM;
        if (st != VC_OK) return st;
    }
    return VC_OK;
}

static vc_status mapping_node(struct yparser *y, vc_cfg_node *map) {
    vc_cfg_node *merges = vc_cfg_node_new(VC_CFG_LIST);
    struct keyset ks = { 0 };
    vc_status st = merges ? VC_OK : VC_ERR_NOMEM;
    while (st == VC_OK) {
        yaml_event_t kev, vev;
        if ((st = next_event(y, &kev)) != VC_OK) break;
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            st = apply_merge(map, &ks, merges);
            break;
        }
        size_t line = kev.start_mark.line + 1;
        if (kev.type != YAML_SCALAR_EVENT) {
            yaml_event_delete(&kev);
            st = vc_fail(VC_ERR_FORMAT, "%s:%zu: mapping keys must be plain strings", y->name, line);
            break;
        }
        char *key = vc_strdup((const char *)kev.data.scalar.value);
        yaml_event_delete(&kev);
        if (!key) { st = VC_ERR_NOMEM; break; }
        if (keyset_has(&ks, key)) {
            st = vc_fail(VC_ERR_FORMAT, "%s:%zu: duplicate key '%s'", y->name, line, key);
            free(key);
            break;
        }
        vc_cfg_node *val = NULL;
        if ((st = next_event(y, &vev)) == VC_OK) st = parse_node(y, &vev, &val);
        if (st == VC_OK && !strcmp(key, "<<")) {
            st = vc_cfg_list_push(merges, val);
        } else if (st == VC_OK) {
            val->line = (int)line;
            st = add_key(map, &ks, key, val);
        }
        free(key);
    }
    free(ks.k);
    vc_cfg_node_free(merges);
    return st;
}

static vc_status sequence_node(struct yparser *y, vc_cfg_node *list) {
    for (;;) {
        yaml_event_t ev;
        vc_status st = next_event(y, &ev);
        if (st != VC_OK) return st;
        if (ev.type == YAML_SEQUENCE_END_EVENT) { yaml_event_delete(&ev); return VC_OK; }
        vc_cfg_node *val = NULL;
        if ((st = parse_node(y, &ev, &val)) != VC_OK) return st;
        if ((st = vc_cfg_list_push(list, val)) != VC_OK) return st;
    }
}

/* Consumes ev (and the events of its children). */
static vc_status parse_node(struct yparser *y, yaml_event_t *ev, vc_cfg_node **out) {
    vc_status st = VC_OK;
    size_t line = ev->start_mark.line + 1;
    const yaml_char_t *anchor = NULL;
    *out = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        anchor = ev->data.scalar.anchor;
        st = scalar_node(y, ev, out);
        break;
    case YAML_ALIAS_EVENT:
        for (size_t i = y->n_anchors; i-- > 0;) {
            if (strcmp(y->anchors[i].name, (const char *)ev->data.alias.anchor)) continue;
            if ((st = charge_copy(y, y->anchors[i].node, line)) != VC_OK) break;
            *out = vc_cfg_node_copy(y->anchors[i].node);
            st = *out ? VC_OK : VC_ERR_NOMEM;
            break;
        }
        if (!*out && st == VC_OK)
            st = vc_fail(VC_ERR_FORMAT, "%s:%zu: unknown alias '*%s'", y->name, line, ev->data.alias.anchor);
        break;
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT: {
        int is_map = ev->type == YAML_MAPPING_START_EVENT;
        anchor = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
        if (y->depth >= YAML_MAX_DEPTH) {
            yaml_event_delete(ev);
            return vc_fail(VC_ERR_FORMAT, "%s:%zu: YAML nested deeper than %d levels", y->name, line, YAML_MAX_DEPTH);
        }
        yaml_char_t *a = anchor ? (yaml_char_t *)vc_strdup((const char *)anchor) : NULL;
        yaml_event_delete(ev);
        *out = vc_cfg_node_new(is_map ? VC_CFG_MAP : VC_CFG_LIST);
        if (!*out) { free(a); return VC_ERR_NOMEM; }
        (*out)->line = (int)line;
        y->depth++;
        st = is_map ? mapping_node(y, *out) : sequence_node(y, *out);
        y->depth--;
        if (st == VC_OK) st = remember_anchor(y, a, *out);
        free(a);
        if (st != VC_OK) { vc_cfg_node_free(*out); *out = NULL; }
        return st;
    }
    default:
        st = vc_fail(VC_ERR_FORMAT, "%s:%zu: unexpected YAML event", y->name, line);
    }
    if (st == VC_OK && *out) {
        (*out)->line = (int)line;
        st = remember_anchor(y, anchor, *out);
    }
    yaml_event_delete(ev);
    if (st != VC_OK) { vc_cfg_node_free(*out); *out = NULL; }
    return st;
}

/* Reads events up to the root node of the first document; an empty stream gives an empty map. */
static vc_status parse_stream(struct yparser *y, vc_cfg_node **out) {
    yaml_event_t ev;
    vc_status st;
    for (;;) {
        if ((st = next_event(y, &ev)) != VC_OK) return st;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            *out = vc_cfg_node_new(VC_CFG_MAP);
            return *out ? VC_OK : VC_ERR_NOMEM;
        }
        if (ev.type == YAML_STREAM_START_EVENT || ev.type == YAML_DOCUMENT_START_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        break;
    }
    if ((st = parse_node(y, &ev, out)) != VC_OK) return st;
    if ((st = next_event(y, &ev)) != VC_OK) goto fail; /* document end */
    yaml_event_delete(&ev);
    if ((st = next_event(y, &ev)) != VC_OK) goto fail;
    int more = ev.type == YAML_DOCUMENT_START_EVENT;
    size_t line = ev.start_mark.line + 1;
    yaml_event_delete(&ev);
    if (more) { st = vc_fail(VC_ERR_FORMAT, "%s:%zu: more than one YAML document", y->name, line); goto fail; }
    if ((*out)->kind == VC_CFG_NULL) { /* a file holding only comments */
        vc_cfg_node_free(*out);
        *out = vc_cfg_node_new(VC_CFG_MAP);
        return *out ? VC_OK : VC_ERR_NOMEM;
    }
    if ((*out)->kind != VC_CFG_MAP) {
        st = vc_fail(VC_ERR_FORMAT, "%s:%d: the top level must be a mapping of keys", y->name, (*out)->line);
        goto fail;
    }
    return VC_OK;
fail:
    vc_cfg_node_free(*out);
    *out = NULL;
    return st;
}

vc_status vc_cfg_yaml_parse(const char *text, size_t len, const char *name, vc_cfg_node **out) {
    struct yparser y = { .name = name ? name : "<yaml>" };
    *out = NULL;
    if (!yaml_parser_initialize(&y.p)) return vc_fail(VC_ERR_NOMEM, "%s: cannot start YAML parser", y.name);
    yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
    vc_status st = parse_stream(&y, out);
    for (size_t i = 0; i < y.n_anchors; i++) {
        free(y.anchors[i].name);
        vc_cfg_node_free(y.anchors[i].node);
    }
    free(y.anchors);
    yaml_parser_delete(&y.p);
    return st;
}
