/* Building a config: embedded defaults, YAML files merged on top, Hydra overrides, with the key and
 * type checks that OmegaConf's struct mode gives verl (unknown keys fail, with a suggestion). */
#include "config/cfg_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static vc_status config_wrap(vc_cfg_node *root, int schema, vc_config **out) {
    vc_config *cfg = vc_calloc(1, sizeof *cfg);
    if (!cfg) { vc_cfg_node_free(root); return VC_ERR_NOMEM; }
    cfg->root = root;
    cfg->schema = schema;
    *out = cfg;
    return VC_OK;
}

vc_status vc_config_new(vc_config **out) {
    *out = NULL;
    vc_cfg_node *root = vc_cfg_node_new(VC_CFG_MAP);
    if (!root) return VC_ERR_NOMEM;
    root->open = 1;
    return config_wrap(root, 0, out);
}

vc_status vc_config_parse_yaml(const char *text, size_t len, const char *name, vc_config **out) {
    vc_cfg_node *root;
    *out = NULL;
    vc_status st = vc_cfg_yaml_parse(text, len, name, &root);
    if (st != VC_OK) return st;
    root->open = 1;
    return config_wrap(root, 0, out);
}

/* Keys whose default is an interpolation (critic.ppo_micro_batch_size_per_gpu: ${oc.select:...}) get
 * the type of what the default resolves to, so that `key=abc` is still caught. */
static void type_interpolated(vc_cfg_node *decl, const vc_cfg_node *resolved) {
    if (vc_cfg_node_is_interp(decl)) {
        int k = resolved->kind;
        if (k != VC_CFG_NULL && k != VC_CFG_MISSING) decl->decl = k == VC_CFG_MAP && resolved->n == 0 ? VC_DECL_ANY : k;
        return;
    }
    if (decl->kind != resolved->kind || decl->n != resolved->n) return;
    for (size_t i = 0; i < decl->n; i++) type_interpolated(decl->items[i], resolved->items[i]);
}

/* Types of keys whose verl default is null (verl's dataclasses declare them). */
static const struct { const char *pattern; int kind; } NULL_TYPES[] = {
    { "**.ppo_micro_batch_size", VC_CFG_INT },
    { "**.ppo_micro_batch_size_per_gpu", VC_CFG_INT },
    { "**.log_prob_micro_batch_size", VC_CFG_INT },
    { "**.log_prob_micro_batch_size_per_gpu", VC_CFG_INT },
    { "**.forward_micro_batch_size", VC_CFG_INT },
    { "**.forward_micro_batch_size_per_gpu", VC_CFG_INT },
    { "reward_model.micro_batch_size", VC_CFG_INT },
    { "reward_model.micro_batch_size_per_gpu", VC_CFG_INT },
    { "reward_model.max_length", VC_CFG_INT },
    { "data.val_batch_size", VC_CFG_INT },
    { "data.seed", VC_CFG_INT },
    { "trainer.total_training_steps", VC_CFG_INT },
    { "trainer.max_actor_ckpt_to_keep", VC_CFG_INT },
    { "trainer.max_critic_ckpt_to_keep", VC_CFG_INT },
    { "**.max_model_len", VC_CFG_INT },
    { "**.loss_scale_factor", VC_CFG_FLOAT },
    { "critic.enable", VC_CFG_BOOL },
};

static void type_nulls(vc_cfg_node *n, char *path, size_t plen, size_t cap) {
    for (size_t i = 0; n->kind == VC_CFG_MAP && i < n->n; i++) {
        size_t kl = strlen(n->keys[i]);
        if (plen + kl + 2 > cap) continue;
        size_t l = plen;
        if (l) path[l++] = '.';
        memcpy(path + l, n->keys[i], kl + 1);
        vc_cfg_node *c = n->items[i];
        for (size_t r = 0; c->decl == VC_DECL_ANY && r < sizeof NULL_TYPES / sizeof NULL_TYPES[0]; r++)
            if (vc_cfg_path_match(NULL_TYPES[r].pattern, path)) c->decl = NULL_TYPES[r].kind;
        type_nulls(c, path, l + kl, cap);
        path[plen] = 0;
    }
}

/* Building defaults: maps merge key by key, anything else replaces (src is consumed). */
static vc_status overlay_into(vc_cfg_node *dst, vc_cfg_node *src) {
    vc_status st = VC_OK;
    for (size_t i = 0; i < src->n && !st; i++) {
        vc_cfg_node *d = vc_cfg_map_get(dst, src->keys[i]), *v = src->items[i];
        if (d && d->kind == VC_CFG_MAP && v->kind == VC_CFG_MAP) st = overlay_into(d, v);
        else st = vc_cfg_map_put(dst, src->keys[i], v);
        src->items[i] = NULL;
    }
    vc_cfg_node_free(src);
    return st;
}

/* Adds the keys of src that dst lacks (src is not consumed). */
/* a mapping of later verl's where b178a3cd has an interpolation of another node (the rollout's profiler.tool_config):
 * later verl's replaces it */
static int interp_replaced(const vc_cfg_node *base, const vc_cfg_node *later) {
    return base && base->kind == VC_CFG_STR && base->s && !strncmp(base->s, "${", 2) && later->kind == VC_CFG_MAP;
}

static vc_status add_missing(vc_cfg_node *dst, const vc_cfg_node *src) {
    vc_status st = VC_OK;
    for (size_t i = 0; i < src->n && !st; i++) {
        vc_cfg_node *d = vc_cfg_map_get(dst, src->keys[i]);
        const vc_cfg_node *v = src->items[i];
        if (d && d->kind == VC_CFG_MAP && v->kind == VC_CFG_MAP) st = add_missing(d, v);
        else if (!d || interp_replaced(d, v)) {
            vc_cfg_node *c = vc_cfg_node_copy(v);
            st = c ? vc_cfg_map_put(dst, src->keys[i], c) : VC_ERR_NOMEM;
        }
    }
    return st;
}

/* removes from later the keys base already has: those are base's (e.g. model.lora.* of the megatron
 * defaults, which verlc reads), not later verl's additions */
static void drop_present(vc_cfg_node *later, vc_cfg_node *base) {
    size_t k = 0;
    for (size_t i = 0; i < later->n; i++) {
        vc_cfg_node *b = vc_cfg_map_get(base, later->keys[i]), *v = later->items[i];
        int maps = b && b->kind == VC_CFG_MAP && v->kind == VC_CFG_MAP;
        if (maps) drop_present(v, b);
        if (b && (!maps || !v->n) && !interp_replaced(b, v)) {
            free(later->keys[i]);
            vc_cfg_node_free(v);
            continue;
        }
        later->keys[k] = later->keys[i];
        later->items[k++] = v;
    }
    later->n = k;
}

vc_status vc_config_defaults(vc_config **out) { return vc_config_defaults_ex(0, out); }

/* removes the key at a dotted path, if there */
static void remove_path(vc_cfg_node *root, const char *path) {
    char buf[256], *segs[16];
    snprintf(buf, sizeof buf, "%s", path);
    int n = vc_cfg_path_split(path, buf, segs, 16);
    vc_cfg_node *parent = n > 1 ? vc_cfg_lookup_segs(root, segs, n - 1) : root;
    if (n > 0 && parent && parent->kind == VC_CFG_MAP) vc_cfg_map_remove(parent, segs[n - 1]);
}

vc_status vc_config_defaults_ex(int engine, vc_config **out) {
    vc_cfg_node *root, *ov = NULL;
    int groups = engine & VC_GROUP_MLITE_ACTOR;
    engine &= 0xff;
    *out = NULL;
    vc_status st = vc_cfg_yaml_parse(vc_cfg_ppo_defaults_yaml, strlen(vc_cfg_ppo_defaults_yaml), "<verl defaults>", &root);
    if (st != VC_OK) return vc_fail_ctx(VC_ERR_INTERNAL, "embedded defaults");
    if (engine == VC_ENGINE_MEGATRON || engine == VC_ENGINE_VEOMNI) {
        const char *y = engine == VC_ENGINE_MEGATRON ? vc_cfg_megatron_overlay_yaml : vc_cfg_veomni_overlay_yaml;
        st = vc_cfg_yaml_parse(y, strlen(y), "<verl engine defaults>", &ov);
        if (!st) st = overlay_into(root, ov);
        if (st) { vc_cfg_node_free(root); return vc_fail_ctx(VC_ERR_INTERNAL, "embedded engine defaults"); }
    }
    if (groups & VC_GROUP_MLITE_ACTOR) { /* Megatron-lite's actor group: its keys in, the FSDP actor's it lacks out */
        vc_cfg_node *ml = NULL, *mg = NULL, *optim = NULL;
        st = vc_cfg_yaml_parse(vc_cfg_mlite_actor_overlay_yaml, strlen(vc_cfg_mlite_actor_overlay_yaml),
                               "<mlite actor defaults>", &ml);
        if (!st) st = overlay_into(root, ml); /* (takes ml) */
        /* its optim group is the megatron one: the megatron overlay's actor optim keys */
        if (!st) st = vc_cfg_yaml_parse(vc_cfg_megatron_overlay_yaml, strlen(vc_cfg_megatron_overlay_yaml),
                                        "<verl engine defaults>", &mg);
        const vc_cfg_node *mo = st ? NULL : vc_cfg_lookup(mg, "actor_rollout_ref.actor.optim");
        vc_cfg_node *ro = (vc_cfg_node *)vc_cfg_lookup(root, "actor_rollout_ref.actor.optim");
        if (!st && (!mo || !ro || !(optim = vc_cfg_node_copy(mo)))) st = VC_ERR_INTERNAL;
        if (!st) st = overlay_into(ro, optim); /* (takes optim) */
        vc_cfg_node_free(mg);
        if (st) { vc_cfg_node_free(root); return vc_fail_ctx(VC_ERR_INTERNAL, "embedded mlite actor defaults"); }
    }
    vc_cfg_node *later = NULL;
    st = vc_cfg_yaml_parse(vc_cfg_later_yaml, strlen(vc_cfg_later_yaml), "<verl later defaults>", &later);
    if (!st) drop_present(later, root);
    if (!st) st = add_missing(root, later);
    /* the FSDP engine's keys the veomni engine's groups do not have (verl refuses them there too) */
    for (int i = 0; !st && engine == VC_ENGINE_VEOMNI && vc_cfg_veomni_removed[i]; i++) {
        remove_path(root, vc_cfg_veomni_removed[i]);
        remove_path(later, vc_cfg_veomni_removed[i]);
    }
    for (int i = 0; !st && (groups & VC_GROUP_MLITE_ACTOR) && vc_cfg_mlite_actor_removed[i]; i++) {
        remove_path(root, vc_cfg_mlite_actor_removed[i]);
        remove_path(later, vc_cfg_mlite_actor_removed[i]);
    }
    if (st) {
        vc_cfg_node_free(root);
        vc_cfg_node_free(later);
        return vc_fail_ctx(VC_ERR_INTERNAL, "embedded later verl defaults");
    }
    vc_cfg_mark_schema(root);
    root->open = 0;
    vc_config tmp = { .root = vc_cfg_node_copy(root) };
    if (!tmp.root) { vc_cfg_node_free(root); return VC_ERR_NOMEM; }
    if (vc_config_resolve(&tmp) == VC_OK) type_interpolated(root, tmp.root);
    char path[1024] = "";
    type_nulls(root, path, 0, sizeof path);
    /* a number, or later verl's "lower_upper" string (IcePop) */
    vc_cfg_node *ist = (vc_cfg_node *)vc_cfg_lookup(root, "algorithm.rollout_correction.rollout_is_threshold");
    if (ist) ist->decl = VC_DECL_ANY;
    vc_status st2 = config_wrap(root, 1, out);
    if (st2 != VC_OK) { vc_cfg_node_free(tmp.root); vc_cfg_node_free(later); return st2; }
    (*out)->resolved_defaults = tmp.root;
    (*out)->engine = engine;
    (*out)->groups = groups;
    (*out)->later = later;
    return VC_OK;
}

vc_status vc_cfg_use_engine(vc_config *cfg, int engine, const char *where) {
    if (cfg->engine == engine) return VC_OK;
    vc_config *base = NULL, *m = NULL;
    vc_status st = cfg->engine == VC_ENGINE_DP ? vc_config_defaults_ex(VC_ENGINE_DP | cfg->groups, &base) : VC_OK;
    if (!st && (cfg->engine != VC_ENGINE_DP || !vc_cfg_node_equal(cfg->root, base->root)))
        st = vc_fail(VC_ERR_ARG, "%s: the %s engine's defaults must come first in the defaults list (before the entries "
                     "and keys that change it, and before another engine's)", where,
                     engine == VC_ENGINE_MEGATRON ? "megatron" : "veomni");
    if (!st) st = vc_config_defaults_ex(engine | cfg->groups, &m);
    if (!st) { /* the engine's defaults take the place of ppo_trainer's; notices so far are kept */
        vc_cfg_node *r = cfg->root, *d = cfg->resolved_defaults;
        cfg->root = m->root;
        cfg->resolved_defaults = m->resolved_defaults;
        m->root = r;
        m->resolved_defaults = d;
        vc_cfg_node *l = cfg->later;
        cfg->later = m->later;
        m->later = l;
        cfg->engine = engine;
    }
    vc_config_free(base);
    vc_config_free(m);
    return st;
}

vc_status vc_cfg_use_group(vc_config *cfg, int group, const char *where) {
    if (cfg->groups & group) return VC_OK;
    vc_config *base = NULL, *m = NULL;
    vc_status st = vc_config_defaults_ex(cfg->engine | cfg->groups, &base);
    if (!st && !vc_cfg_node_equal(cfg->root, base->root))
        st = vc_fail(VC_ERR_ARG, "%s: a group option must come before the entries and keys that change the "
                     "configuration", where);
    if (!st) st = vc_config_defaults_ex(cfg->engine | cfg->groups | group, &m);
    if (!st) { /* its defaults take the place of the engine's alone; notices so far are kept */
        vc_cfg_node *r = cfg->root, *d = cfg->resolved_defaults, *l = cfg->later;
        cfg->root = m->root;
        cfg->resolved_defaults = m->resolved_defaults;
        cfg->later = m->later;
        m->root = r;
        m->resolved_defaults = d;
        m->later = l;
        cfg->groups |= group;
    }
    vc_config_free(base);
    vc_config_free(m);
    return st;
}

void vc_config_free(vc_config *cfg) {
    if (!cfg) return;
    vc_cfg_node_free(cfg->root);
    vc_cfg_node_free(cfg->resolved_defaults);
    vc_cfg_node_free(cfg->later);
    for (size_t i = 0; i < cfg->n_notices; i++) free(cfg->notices[i]);
    free(cfg->notices);
    free(cfg);
}

size_t vc_config_notice_count(const vc_config *cfg) { return cfg->n_notices; }
const char *vc_config_notice(const vc_config *cfg, size_t i) { return i < cfg->n_notices ? cfg->notices[i] : NULL; }
void vc_config_set_quiet(vc_config *cfg, int quiet) { cfg->quiet = quiet; }

const char *vc_config_suggest(const vc_config *cfg, const char *key) {
    return vc_cfg_suggest(cfg->root, key, (char *)cfg->suggest_buf, sizeof cfg->suggest_buf);
}

int vc_cfg_value_changed(const vc_config *cfg, const char *path, const vc_cfg_node *v) {
    const vc_cfg_node *cur = vc_cfg_lookup(cfg->root, path);
    const vc_cfg_node *def = cfg->resolved_defaults ? vc_cfg_lookup(cfg->resolved_defaults, path) : NULL;
    return !(cur && vc_cfg_node_equal(cur, v)) && !(def && vc_cfg_node_equal(def, v));
}

/* ---- checks ------------------------------------------------------------------------------------ */

static const char *decl_name(int decl) {
    switch (decl) {
    case VC_CFG_BOOL: return "a boolean (true/false)";
    case VC_CFG_INT: return "an integer";
    case VC_CFG_FLOAT: return "a number";
    case VC_CFG_STR: return "a string (or a list of strings)";
    case VC_CFG_LIST: return "a list";
    case VC_CFG_MAP: return "a mapping";
    default: return "a value";
    }
}

static const char *kind_text(const vc_cfg_node *v) {
    switch (v->kind) {
    case VC_CFG_LIST: return "a list";
    case VC_CFG_MAP: return "a mapping";
    default: return v->s ? v->s : "?";
    }
}

static int is_scalar(const vc_cfg_node *v) {
    return v->kind == VC_CFG_BOOL || v->kind == VC_CFG_INT || v->kind == VC_CFG_FLOAT || v->kind == VC_CFG_STR;
}

/* Does v fit a key declared as `decl`? Converts int <-> float where the declaration asks for it.
 * `where` prefixes the message ("file.yaml:3: " or "override 'k=v': "). */
static vc_status check_fit(const char *where, const char *key, int decl, vc_cfg_node *v) {
    int ok = 1;
    if (decl == VC_DECL_ANY || v->kind == VC_CFG_NULL || v->kind == VC_CFG_MISSING) return VC_OK;
    if (vc_cfg_node_is_interp(v)) return VC_OK; /* checked by type when read */
    switch (decl) {
    case VC_CFG_BOOL: ok = v->kind == VC_CFG_BOOL || (v->kind == VC_CFG_INT && (v->i == 0 || v->i == 1)); break;
    case VC_CFG_INT:
        if (v->kind == VC_CFG_FLOAT && v->f == floor(v->f) && fabs(v->f) < 9e15) {
            v->kind = VC_CFG_INT;
            v->i = (int64_t)v->f;
            free(v->s); /* "256.0" would no longer be this value's text */
            v->s = NULL;
        }
        ok = v->kind == VC_CFG_INT;
        break;
    case VC_CFG_FLOAT:
        if (v->kind == VC_CFG_INT) {
            v->kind = VC_CFG_FLOAT;
            v->f = (double)v->i;
            free(v->s);
            v->s = NULL;
        }
        ok = v->kind == VC_CFG_FLOAT;
        break;
    case VC_CFG_STR:
        ok = is_scalar(v);
        if (v->kind == VC_CFG_LIST) {
            ok = 1;
            for (size_t i = 0; i < v->n; i++) ok &= is_scalar(v->items[i]) || v->items[i]->kind == VC_CFG_NULL;
        }
        break;
    case VC_CFG_LIST: ok = v->kind == VC_CFG_LIST || is_scalar(v); break;
    case VC_CFG_MAP: ok = v->kind == VC_CFG_MAP; break;
    default: break;
    }
    if (ok) return VC_OK;
    return vc_fail(VC_ERR_ARG, "%s%s expects %s, got '%s'", where, key, decl_name(decl), kind_text(v));
}

static vc_status unknown_key(vc_config *cfg, const char *where, const char *key) {
    char buf[512];
    const char *s = vc_cfg_suggest(cfg->root, key, buf, sizeof buf);
    if (s) return vc_fail(VC_ERR_ARG, "%sunknown key '%s' (did you mean '%s'?)", where, key, s);
    return vc_fail(VC_ERR_ARG, "%sunknown key '%s' (use +%s=VALUE to add a new key)", where, key, key);
}

/* ---- merging YAML ------------------------------------------------------------------------------ */

struct merge_ctx {
    vc_config *cfg;
    const char *file;
    char path[1024];
};

static vc_status merge_map(struct merge_ctx *m, vc_cfg_node *dst, vc_cfg_node *src, size_t plen);

static vc_status merge_entry(struct merge_ctx *m, vc_cfg_node *dst, const char *key, vc_cfg_node *v, size_t plen) {
    char where[1200];
    int ignore = 0;
    if (v->line > 0) snprintf(where, sizeof where, "%s:%d: ", m->file, v->line);
    else snprintf(where, sizeof where, "%s", m->file); /* an override: the prefix ends in ": " already */
    vc_cfg_node *d = vc_cfg_map_get(dst, key);
    int into = d && d->kind == VC_CFG_MAP && v->kind == VC_CFG_MAP;
    int accept = into ? 0 : vc_cfg_notice_check(m->cfg, m->path, v, 0, 1, &ignore);
    int changed = !d || vc_cfg_value_changed(m->cfg, m->path, v);
    if (ignore) return vc_cfg_notice_check(m->cfg, m->path, v, 1, 1, &ignore), VC_OK;
    if (into) return merge_map(m, d, v, plen);
    vc_cfg_node *c = vc_cfg_node_copy(v);
    if (!c) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (!d) {
        if (m->cfg->schema && !dst->open && !accept) {
            /* Hydra lets a config file add keys (recipes do: verl's DAPO adds reward.reward_kwargs); one that
             * looks like a misspelt key of verl's stays an error */
            char sb[512];
            const char *sug = v->line > 0 ? vc_cfg_suggest(m->cfg->root, m->path, sb, sizeof sb) : NULL;
            const vc_cfg_node *sn = sug ? vc_cfg_lookup(m->cfg->root, sug) : NULL;
            if (sn && (sn->kind == VC_CFG_MAP) != (v->kind == VC_CFG_MAP)) sug = NULL; /* a mapping for a value: no typo */
            if (v->line <= 0 || sug) {
                vc_cfg_node_free(c);
                return unknown_key(m->cfg, where, m->path);
            }
            vc_cfg_add_notice(m->cfg, "%s%s is not one of verl's keys: kept, and not read by verlc", where, m->path);
        }
        if (c->kind == VC_CFG_MAP) c->open = 1;
        st = vc_cfg_map_put(dst, key, c);
    } else {
        if (m->cfg->schema && (st = check_fit(where, m->path, d->decl, c)) != VC_OK) { vc_cfg_node_free(c); return st; }
        int open = d->open;
        vc_cfg_node_assign(d, c);
        d->open = open || d->kind == VC_CFG_MAP;
    }
    if (st == VC_OK) vc_cfg_notice_check(m->cfg, m->path, v, 1, changed, &ignore);
    return st;
}

static vc_status merge_map(struct merge_ctx *m, vc_cfg_node *dst, vc_cfg_node *src, size_t plen) {
    vc_status st = VC_OK;
    for (size_t i = 0; i < src->n && st == VC_OK; i++) {
        size_t kl = strlen(src->keys[i]);
        if (plen + kl + 2 > sizeof m->path) return vc_fail(VC_ERR_ARG, "%s: key path too long", m->file);
        size_t l = plen;
        if (l) m->path[l++] = '.';
        memcpy(m->path + l, src->keys[i], kl + 1);
        st = merge_entry(m, dst, src->keys[i], src->items[i], l + kl);
        m->path[plen] = 0;
    }
    return st;
}

vc_status vc_config_merge_yaml(vc_config *cfg, const char *text, size_t len, const char *name) {
    vc_cfg_node *src;
    vc_status st = vc_cfg_yaml_parse(text, len, name, &src);
    if (st != VC_OK) return st;
    struct merge_ctx m = { .cfg = cfg, .file = name ? name : "<yaml>" };
    st = merge_map(&m, cfg->root, src, 0);
    vc_cfg_node_free(src);
    return st;
}

/* vc_config_merge_file: cfg_compose.c (a file with its Hydra defaults list) */

/* ---- the whole pipeline ------------------------------------------------------------------------ */

vc_status vc_config_load(const char *yaml_path, int n_overrides, char **overrides, vc_config **out) {
    return vc_config_load_ex(yaml_path, 0, n_overrides, overrides, out);
}

vc_status vc_config_load_ex(const char *yaml_path, int engine, int n_overrides, char **overrides, vc_config **out) {
    vc_config *cfg = NULL;
    *out = NULL;
    vc_status st = vc_config_defaults_ex(engine, &cfg);
    if (st == VC_OK && yaml_path) st = vc_config_merge_file(cfg, yaml_path);
    for (int i = 0; i < n_overrides && st == VC_OK; i++) st = vc_config_override(cfg, overrides[i]);
    if (st == VC_OK) st = vc_config_resolve(cfg);
    if (st == VC_OK) st = vc_cfg_migrate_reward(cfg);
    if (st == VC_OK) st = vc_cfg_later_check(cfg);
    if (st != VC_OK) { vc_config_free(cfg); return st; }
    *out = cfg;
    return VC_OK;
}

/* Exposed for cfg_override.c */
vc_status vc_cfg_check_fit(const char *where, const char *key, int decl, vc_cfg_node *v) {
    return check_fit(where, key, decl, v);
}
vc_status vc_cfg_unknown_key(vc_config *cfg, const char *where, const char *key) { return unknown_key(cfg, where, key); }
vc_status vc_cfg_merge_at(vc_config *cfg, vc_cfg_node *dst, vc_cfg_node *src, const char *path, const char *where) {
    struct merge_ctx m = { .cfg = cfg, .file = where };
    snprintf(m.path, sizeof m.path, "%s", path);
    return merge_map(&m, dst, src, strlen(m.path));
}
