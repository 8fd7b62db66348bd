/* Hydra defaults lists: a YAML file's `defaults:` composed as Hydra composes it, on top of verl's
 * embedded ppo_trainer defaults.
 *   - `_self_` marks where the file's own keys go (the end when absent, as in Hydra 1.1+);
 *   - `name` merges the config file name.yaml (searched in the primary file's folder, then in
 *     hydra.searchpath's file:// folders); `ppo_trainer` is verl's own, already embedded;
 *   - `group: option` (also `group@package`, `override group`, `optional group`, `/group`) merges
 *     group/option.yaml at the group's package; a group verlc does not find anywhere is one of verl's
 *     built-in groups (actor, rollout, ...), whose default options are embedded: a notice says so;
 *   - a null option skips the entry; included files compose their own defaults lists.
 * Errors name the file and the entry. */
#include "config/cfg_internal.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 16
#define MAX_DIRS 8

typedef struct compose {
    vc_config *cfg;
    char *dirs[MAX_DIRS];
    int n_dirs;
} compose;

static int is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

static void add_dir(compose *c, const char *d, size_t len) {
    if (c->n_dirs >= MAX_DIRS || !len) return;
    char *s = malloc(len + 1);
    if (!s) return;
    memcpy(s, d, len);
    s[len] = 0;
    if (!is_dir(s)) { free(s); return; } /* a search path verlc does not have (verl's own folder) */
    c->dirs[c->n_dirs++] = s;
}

/* hydra.searchpath: its file:// folders, relative to the working directory as Hydra reads them */
static void add_searchpath(compose *c, const vc_cfg_node *src) {
    const vc_cfg_node *h = vc_cfg_map_get(src, "hydra"), *sp = h ? vc_cfg_map_get(h, "searchpath") : NULL;
    for (size_t i = 0; sp && sp->kind == VC_CFG_LIST && i < sp->n; i++) {
        const char *p = sp->items[i]->kind == VC_CFG_STR ? sp->items[i]->s : NULL;
        if (p && !strncmp(p, "file://", 7)) add_dir(c, p + 7, strlen(p + 7));
    }
}

/* rel ("name" or "group/option", ".yaml" added) in the search folders; NULL when absent */
static char *find(const compose *c, const char *rel, int want_dir) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%s", rel, want_dir ? "" : ".yaml");
    for (int i = 0; i < c->n_dirs; i++) {
        char *p = vc_path_join(c->dirs[i], buf);
        if (p && (want_dir ? is_dir(p) : vc_file_exists(p))) return p;
        free(p);
    }
    return NULL;
}

static vc_status merge_file(compose *c, const char *path, const char *pkg, int depth);

/* src's own keys at package pkg ("" is the root) */
static vc_status merge_self(compose *c, vc_cfg_node *src, const char *pkg, const char *file) {
    if (!*pkg) return vc_cfg_merge_at(c->cfg, c->cfg->root, src, "", file);
    char buf[512], *segs[32];
    int n = vc_cfg_path_split(pkg, buf, segs, 32);
    vc_cfg_node *dst = n > 0 ? vc_cfg_lookup_segs(c->cfg->root, segs, n) : NULL;
    if (!dst || dst->kind != VC_CFG_MAP)
        return vc_fail(VC_ERR_ARG, "%s: package '%s' is not a section of the config", file, pkg);
    return vc_cfg_merge_at(c->cfg, dst, src, pkg, file);
}

/* one `group[@package]: option` entry (key as written, with override / optional prefixes) */
static vc_status group_entry(compose *c, const char *key, const vc_cfg_node *opt, const char *pkg, const char *file,
                             int depth) {
    char k[256], group[256], package[512];
    snprintf(k, sizeof k, "%s", key);
    char *g = k;
    int optional = 0;
    for (int again = 1; again;) {
        again = 0;
        if (!strncmp(g, "override ", 9)) g += 9, again = 1;
        if (!strncmp(g, "optional ", 9)) g += 9, optional = 1, again = 1;
    }
    if (*g == '/') g++;
    char *at = strchr(g, '@');
    if (at) *at = 0;
    snprintf(group, sizeof group, "%s", g);
    if (!opt || opt->kind == VC_CFG_NULL) return VC_OK; /* `group: null` leaves the group out */
    if (opt->kind != VC_CFG_STR || !opt->s || !strcmp(opt->s, "???"))
        return vc_fail(VC_ERR_ARG, "%s: defaults entry '%s' needs one option name", file, key);
    if (!strcmp(group, "model_engine")) { /* later verl's engine group: dp, or megatron's or veomni's defaults */
        char where[700];
        snprintf(where, sizeof where, "%s: defaults entry 'model_engine: %s'", file, opt->s);
        if (!strcmp(opt->s, "megatron")) return vc_cfg_use_engine(c->cfg, VC_ENGINE_MEGATRON, where);
        if (!strcmp(opt->s, "veomni")) return vc_cfg_use_engine(c->cfg, VC_ENGINE_VEOMNI, where);
        if (!strcmp(opt->s, "dp") || !strcmp(opt->s, "fsdp")) return VC_OK;
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: verlc reads verl's dp (FSDP), megatron and veomni configurations", where);
    }
    if (!strcmp(group, "actor") && at && !strcmp(at + 1, "actor_rollout_ref.actor") && !*pkg &&
        !strcmp(opt->s, "mlite_actor")) { /* Megatron-lite's actor group: its defaults built in */
        char where[700];
        snprintf(where, sizeof where, "%s: defaults entry '%s: mlite_actor'", file, key);
        return vc_cfg_use_group(c->cfg, VC_GROUP_MLITE_ACTOR, where);
    }
    /* the package: @package as given (_global_: the root), else the group's path under this file's */
    if (at && !strcmp(at + 1, "_global_")) package[0] = 0;
    else if (at) snprintf(package, sizeof package, "%s%s%s", pkg, *pkg ? "." : "", at + 1);
    else {
        snprintf(package, sizeof package, "%s%s%s", pkg, *pkg ? "." : "", group);
        for (char *p = package; *p; p++)
            if (*p == '/') *p = '.';
    }
    char rel[600];
    snprintf(rel, sizeof rel, "%s/%s", group, opt->s);
    char *path = find(c, rel, 0);
    if (path) {
        vc_status st = merge_file(c, path, package, depth + 1);
        free(path);
        return st;
    }
    char *gdir = find(c, group, 1);
    free(gdir);
    if (gdir && !optional)
        return vc_fail(VC_ERR_IO, "%s: defaults entry '%s: %s': no %s.yaml in the group's folder", file, key, opt->s, rel);
    if (!gdir && !optional)
        vc_cfg_add_notice(c->cfg, "%s: defaults entry '%s: %s' is one of verl's built-in config groups: verlc uses "
                          "its embedded ppo_trainer defaults for it", file, key, opt->s);
    return VC_OK;
}

/* a plain `name` entry: another config file merged at this file's package */
static vc_status name_entry(compose *c, const char *name, const char *pkg, const char *file, int depth) {
    if (*name == '/') name++;
    char *path = find(c, name, 0);
    if (path) {
        vc_status st = merge_file(c, path, pkg, depth + 1);
        free(path);
        return st;
    }
    if (!strcmp(name, "ppo_trainer")) return VC_OK; /* verl's own: the embedded defaults */
    if (!strcmp(name, "ppo_megatron_trainer")) { /* verl's own too: its embedded megatron defaults */
        char where[700];
        snprintf(where, sizeof where, "%s: defaults entry '%s'", file, name);
        return vc_cfg_use_engine(c->cfg, VC_ENGINE_MEGATRON, where);
    }
    return vc_fail(VC_ERR_IO, "%s: defaults entry '%s': no %s.yaml in %s%s", file, name, name,
                   c->n_dirs ? c->dirs[0] : "the config's folder", c->n_dirs > 1 ? " or hydra.searchpath" : "");
}

static vc_status entry(compose *c, const vc_cfg_node *e, const char *pkg, const char *file, int depth) {
    if (e->kind == VC_CFG_STR) return name_entry(c, e->s, pkg, file, depth);
    if (e->kind == VC_CFG_MAP && e->n == 1) return group_entry(c, e->keys[0], e->items[0], pkg, file, depth);
    return vc_fail(VC_ERR_ARG, "%s:%d: a defaults entry is a name or one 'group: option' pair", file, e->line);
}

static vc_status compose_node(compose *c, vc_cfg_node *src, const char *pkg, const char *file, int depth) {
    if (depth > MAX_DEPTH)
        return vc_fail(VC_ERR_ARG, "%s: defaults lists nest more than %d deep (a cycle?)", file, MAX_DEPTH);
    vc_cfg_node *defs = vc_cfg_map_get(src, "defaults");
    if (!defs) return merge_self(c, src, pkg, file);
    if (defs->kind != VC_CFG_LIST) return vc_fail(VC_ERR_ARG, "%s:%d: defaults must be a list", file, defs->line);
    defs = vc_cfg_node_copy(defs);
    if (!defs) return VC_ERR_NOMEM;
    vc_cfg_map_remove(src, "defaults");
    size_t self = defs->n;
    for (size_t i = 0; i < defs->n; i++)
        if (defs->items[i]->kind == VC_CFG_STR && !strcmp(defs->items[i]->s, "_self_")) self = i;
    vc_status st = VC_OK;
    for (size_t i = 0; i <= defs->n && !st; i++) {
        if (i == self) st = merge_self(c, src, pkg, file);
        else if (i < defs->n) st = entry(c, defs->items[i], pkg, file, depth);
    }
    vc_cfg_node_free(defs);
    return st;
}

static vc_status merge_file(compose *c, const char *path, const char *pkg, int depth) {
    char *text;
    size_t len;
    vc_status st = vc_read_file(path, &text, &len);
    if (st != VC_OK) return st;
    vc_cfg_node *src = NULL;
    st = vc_cfg_yaml_parse(text, len, path, &src);
    free(text);
    if (st) return st;
    if (!*pkg && depth == 0) add_searchpath(c, src);
    st = compose_node(c, src, pkg, path, depth);
    vc_cfg_node_free(src);
    return st;
}

vc_status vc_config_merge_file(vc_config *cfg, const char *path) {
    compose c = { .cfg = cfg };
    const char *slash = strrchr(path, '/');
    if (slash) add_dir(&c, path, (size_t)(slash - path));
    else add_dir(&c, ".", 1);
    vc_status st = merge_file(&c, path, "", 0);
    for (int i = 0; i < c.n_dirs; i++) free(c.dirs[i]);
    return st;
}
