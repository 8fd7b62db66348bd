/* Hydra command-line overrides: key=value (the key must exist), +key=value (adds a new key),
 * ++key=value (adds or replaces, no type check), ~key[=value] (deletes). */
#include "config/cfg_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OV_SET, OV_ADD, OV_FORCE, OV_DEL };

#define MAX_SEGS 64

struct ov {
    vc_config *cfg;
    int mode;
    const char *key;  /* without prefix */
    char where[600];  /* "override 'ARG': " */
    char *segs[MAX_SEGS];
    int n;
};

/* A plain key=value through a node that interpolates a mapping (`${X}` or `${oc.select:X,...}`, as
 * b178a3cd's rollout.profiler.tool_config, a mapping of its own in later verl): the node becomes a copy of
 * that mapping, which the override then changes. 0 when the node is not such an interpolation. */
static int copy_interpolated_map(struct ov *o, vc_cfg_node *c) {
    const char *s = c->s, *a = !strncmp(s, "${oc.select:", 12) ? s + 12 : !strncmp(s, "${", 2) ? s + 2 : NULL;
    size_t n = a ? strcspn(a, ",}") : 0;
    char path[256];
    if (!a || !n || n >= sizeof path || a[n] == 0) return 0;
    memcpy(path, a, n), path[n] = 0;
    const vc_cfg_node *m = vc_cfg_lookup(o->cfg->root, path);
    vc_cfg_node *cp = m && m->kind == VC_CFG_MAP ? vc_cfg_node_copy(m) : NULL;
    if (!cp) return 0;
    free(c->s);
    int decl = c->decl, line = c->line;
    *c = *cp; /* the copy's contents move into c */
    free(cp);
    c->decl = decl, c->line = line;
    return 1;
}

/* The container that holds the last segment, creating maps on the way where allowed. */
static vc_status walk_parent(struct ov *o, int may_create, vc_cfg_node **parent) {
    vc_cfg_node *cur = o->cfg->root;
    for (int i = 0; i + 1 < o->n; i++) {
        vc_cfg_node *c = vc_cfg_child(cur, o->segs[i]);
        int create = may_create || !o->cfg->schema || cur->open;
        if (c && c->kind == VC_CFG_NULL && (create || c->decl == VC_DECL_ANY) && o->mode != OV_DEL) {
            c->kind = VC_CFG_MAP; /* a.b=null, then a.b.c=1: b becomes a mapping */
            c->open = 1;
        }
        if (c && vc_cfg_node_is_interp(c) && o->mode == OV_SET) copy_interpolated_map(o, c);
        if (c && (o->mode == OV_ADD || o->mode == OV_FORCE) && c->kind != VC_CFG_MAP && c->kind != VC_CFG_LIST) {
            free(c->s); /* +a.b.c=1 through b: ${...} or any scalar: b becomes a mapping of c alone, as OmegaConf.update
                         * does (a primitive on the path is replaced by an empty map) */
            c->s = NULL;
            c->kind = VC_CFG_MAP;
            c->open = 1;
        }
        if (!c) {
            if (!create || cur->kind != VC_CFG_MAP || o->mode == OV_DEL) return vc_cfg_unknown_key(o->cfg, o->where, o->key);
            c = vc_cfg_node_new(VC_CFG_MAP);
            if (!c) return VC_ERR_NOMEM;
            c->open = 1;
            vc_status st = vc_cfg_map_put(cur, o->segs[i], c);
            if (st != VC_OK) return st;
        } else if (c->kind != VC_CFG_MAP && c->kind != VC_CFG_LIST) {
            return vc_fail(VC_ERR_ARG, "%s'%s' is not a mapping, so it has no key '%s'", o->where, o->segs[i], o->segs[i + 1]);
        }
        cur = c;
    }
    *parent = cur;
    return VC_OK;
}

static vc_status do_delete(struct ov *o, const char *value) {
    vc_cfg_node *parent;
    vc_status st = walk_parent(o, 0, &parent);
    if (st != VC_OK) return st;
    const char *last = o->segs[o->n - 1];
    vc_cfg_node *d = vc_cfg_child(parent, last);
    if (!d) return vc_cfg_unknown_key(o->cfg, o->where, o->key);
    if (value) {
        vc_cfg_node *v = vc_cfg_parse_value(value);
        if (!v) return vc_fail_ctx(VC_ERR_ARG, "%.*s", (int)strlen(o->where) - 2, o->where);
        int same = vc_cfg_node_equal(d, v);
        vc_cfg_node_free(v);
        if (!same) return vc_fail(VC_ERR_ARG, "%s'%s' holds a different value; not deleted", o->where, o->key);
    }
    if (parent->kind == VC_CFG_MAP) {
        vc_cfg_map_remove(parent, last);
    } else {
        size_t idx = strtoul(last, NULL, 10);
        vc_cfg_node_free(parent->items[idx]);
        memmove(parent->items + idx, parent->items + idx + 1, (parent->n - idx - 1) * sizeof *parent->items);
        parent->n--;
    }
    return VC_OK;
}

/* Keys verl later dropped from its defaults (reward_model.overlong_buffer, reward_model.reward_kwargs: the
 * reward group's migration; trainer.use_legacy_worker_impl), so that later command lines add them with `+`: taken
 * while still at the defaults */
static int later_verl_adds(const struct ov *o) {
    if (!vc_cfg_path_match("reward_model.**", o->key) && strcmp(o->key, "trainer.use_legacy_worker_impl")) return 0;
    const vc_cfg_node *cur = vc_cfg_lookup(o->cfg->root, o->key);
    const vc_cfg_node *def = o->cfg->resolved_defaults ? vc_cfg_lookup(o->cfg->resolved_defaults, o->key) : NULL;
    return cur && def && vc_cfg_node_equal(cur, def);
}

/* Puts v (consumed) at the last segment. */
static vc_status do_put(struct ov *o, vc_cfg_node *v, int accept) {
    vc_cfg_node *parent;
    vc_status st = walk_parent(o, o->mode != OV_SET || accept, &parent);
    if (st != VC_OK) { vc_cfg_node_free(v); return st; }
    const char *last = o->segs[o->n - 1];
    vc_cfg_node *d = vc_cfg_child(parent, last);
    if (v->kind == VC_CFG_MAP) v->open = 1;
    if (!d) {
        int allowed = o->mode != OV_SET || accept || !o->cfg->schema || parent->open;
        if (parent->kind != VC_CFG_MAP) {
            st = vc_fail(VC_ERR_ARG, "%sno item '%s' in the list (it has %zu)", o->where, last, parent->n);
        } else if (!allowed) {
            st = vc_cfg_unknown_key(o->cfg, o->where, o->key);
        } else {
            return vc_cfg_map_put(parent, last, v);
        }
        vc_cfg_node_free(v);
        return st;
    }
    /* Hydra adds over a null value, and merges a mapping or list into what is there; fsdp_config.mixed_precision
     * is spelled out by verlc's defaults only (verl has none), so verl's `+` adds its keys */
    if (o->mode == OV_ADD && d->kind != VC_CFG_NULL && v->kind != VC_CFG_MAP && v->kind != VC_CFG_LIST &&
        !vc_cfg_path_match("**.fsdp_config.mixed_precision.**", o->key) && !later_verl_adds(o)) {
        vc_cfg_node_free(v);
        return vc_fail(VC_ERR_ARG, "%s'%s' already exists: write %s=VALUE to change it (or ++%s=VALUE)", o->where,
                       o->key, o->key, o->key);
    }
    if (o->mode == OV_ADD) o->mode = OV_SET;
    if (o->mode == OV_SET && d->kind == VC_CFG_MAP && v->kind == VC_CFG_MAP) { /* Hydra merges mappings */
        st = vc_cfg_merge_at(o->cfg, d, v, o->key, o->where);
        vc_cfg_node_free(v);
        return st;
    }
    if (o->mode == OV_SET && o->cfg->schema && (st = vc_cfg_check_fit(o->where, o->key, d->decl, v)) != VC_OK) {
        vc_cfg_node_free(v);
        return st;
    }
    int open = d->open;
    vc_cfg_node_assign(d, v);
    d->open = open || d->kind == VC_CFG_MAP;
    return VC_OK;
}

static vc_status apply(vc_config *cfg, const char *arg, const char *rawkey, size_t keylen, const char *value) {
    struct ov o = { .cfg = cfg, .mode = OV_SET };
    snprintf(o.where, sizeof o.where, "override '%s': ", arg);
    if (keylen >= 2 && !strncmp(rawkey, "++", 2)) { o.mode = OV_FORCE; rawkey += 2; keylen -= 2; }
    else if (keylen && rawkey[0] == '+') { o.mode = OV_ADD; rawkey++; keylen--; }
    else if (keylen && rawkey[0] == '~') { o.mode = OV_DEL; rawkey++; keylen--; }
    while (keylen && (rawkey[keylen - 1] == ' ' || rawkey[keylen - 1] == '\t')) keylen--;
    char *key = vc_malloc(keylen + 1), *buf = vc_malloc(keylen + 1);
    vc_status st = VC_OK;
    if (!key || !buf) { st = VC_ERR_NOMEM; goto out; }
    memcpy(key, rawkey, keylen);
    key[keylen] = 0;
    o.key = key;
    o.n = vc_cfg_path_split(key, buf, o.segs, MAX_SEGS);
    if (!keylen || o.n < 1) { st = vc_fail(VC_ERR_ARG, "%sbad key '%s'", o.where, key); goto out; }
    if (o.mode == OV_DEL) { st = do_delete(&o, value); goto out; }
    if (!value) { st = vc_fail(VC_ERR_ARG, "%sexpected key=value", o.where); goto out; }
    vc_cfg_node *v = vc_cfg_parse_value(value);
    if (!v) { st = vc_fail_ctx(VC_ERR_ARG, "override '%s'", arg); goto out; }
    vc_cfg_node *shown = vc_cfg_node_copy(v); /* do_put consumes v; the notice names the value */
    int ignore = 0, accept = vc_cfg_notice_check(cfg, key, v, 0, 1, &ignore);
    int changed = vc_cfg_value_changed(cfg, key, v);
    if (!shown) { vc_cfg_node_free(v); st = VC_ERR_NOMEM; goto out; }
    st = ignore ? (vc_cfg_node_free(v), VC_OK) : do_put(&o, v, accept);
    if (st == VC_OK) vc_cfg_notice_check(cfg, key, shown, 1, changed, &ignore);
    vc_cfg_node_free(shown);
out:
    free(key);
    free(buf);
    return st;
}

vc_status vc_config_override(vc_config *cfg, const char *arg) {
    const char *eq = strchr(arg, '=');
    size_t keylen = eq ? (size_t)(eq - arg) : strlen(arg);
    return apply(cfg, arg, arg, keylen, eq ? eq + 1 : NULL);
}

vc_status vc_config_set(vc_config *cfg, const char *key, const char *value) {
    char arg[600];
    snprintf(arg, sizeof arg, "%s%s%s", key, value ? "=" : "", value ? value : "");
    return apply(cfg, arg, key, strlen(key), value);
}
