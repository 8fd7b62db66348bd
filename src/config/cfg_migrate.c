/* verl's later reward layout (the `reward` group: reward.reward_manager, reward.custom_reward_function,
 * reward.reward_model, reward.reward_kwargs, reward.sandbox_fusion) taken onto the keys verlc reads (verl's
 * earlier layout, which later verl migrates the other way in migrate_legacy_reward_impl). A key set in the new
 * layout is copied to its old place unless that one is set too: then, as in verl's migration, the old key wins. */
#include "config/cfg_internal.h"
#include <stdlib.h>
#include <string.h>

static const struct { const char *from, *to; } MIGRATE[] = {
    { "reward.reward_manager.name", "reward_manager.name" },
    { "reward.reward_manager.source", "reward_manager.source" },
    { "reward.reward_manager.module.path", "reward_manager.module.path" },
    { "reward.reward_manager.module.name", "reward_manager.module.name" },
    { "reward.custom_reward_function.path", "custom_reward_function.path" },
    { "reward.custom_reward_function.name", "custom_reward_function.name" },
    { "reward.custom_reward_function.reward_kwargs", "custom_reward_function.reward_kwargs" },
    { "reward.custom_reward_function.timeout_s", "custom_reward_function.timeout_s" },
    { "reward.reward_model.enable", "reward_model.enable" },
    { "reward.reward_model.model_path", "reward_model.model.path" },
    { "reward.reward_kwargs", "reward_model.reward_kwargs" },
    { "reward.sandbox_fusion.url", "reward_model.sandbox_fusion.url" },
    { "reward.sandbox_fusion.max_concurrent", "reward_model.sandbox_fusion.max_concurrent" },
    { "reward.sandbox_fusion.memory_limit_mb", "reward_model.sandbox_fusion.memory_limit_mb" },
};

/* the value at path, or NULL when it is absent or as the defaults have it */
static const vc_cfg_node *set_value(const vc_config *cfg, const char *path) {
    const vc_cfg_node *v = vc_cfg_lookup(cfg->root, path);
    const vc_cfg_node *d = cfg->resolved_defaults ? vc_cfg_lookup(cfg->resolved_defaults, path) : NULL;
    if (!v || v->kind == VC_CFG_MISSING || (d && vc_cfg_node_equal(v, d))) return NULL;
    if (!d && (v->kind == VC_CFG_NULL || (v->kind == VC_CFG_MAP && !v->n))) return NULL;
    return v;
}

/* puts a copy of v at path, creating mappings on the way */
static vc_status put_path(vc_cfg_node *root, const char *path, const vc_cfg_node *v) {
    char buf[256], *segs[16];
    snprintf(buf, sizeof buf, "%s", path);
    int n = vc_cfg_path_split(path, buf, segs, 16);
    vc_cfg_node *cur = root;
    for (int i = 0; i < n - 1; i++) {
        vc_cfg_node *c = vc_cfg_map_get(cur, segs[i]);
        if (!c || c->kind != VC_CFG_MAP) {
            vc_cfg_node *m = vc_cfg_node_new(VC_CFG_MAP);
            if (!m) return VC_ERR_NOMEM;
            m->open = 1;
            if (vc_cfg_map_put(cur, segs[i], m)) return VC_ERR_NOMEM;
            c = m;
        }
        cur = c;
    }
    vc_cfg_node *copy = vc_cfg_node_copy(v);
    if (!copy) return VC_ERR_NOMEM;
    vc_cfg_node *d = vc_cfg_map_get(cur, segs[n - 1]);
    if (d) {
        vc_cfg_node_assign(d, copy);
        return VC_OK;
    }
    return vc_cfg_map_put(cur, segs[n - 1], copy);
}

vc_status vc_cfg_migrate_reward(vc_config *cfg) {
    for (size_t i = 0; i < sizeof MIGRATE / sizeof MIGRATE[0]; i++) {
        const vc_cfg_node *nv = set_value(cfg, MIGRATE[i].from);
        if (!nv) continue;
        const vc_cfg_node *ov = set_value(cfg, MIGRATE[i].to);
        if (ov) { /* verl's migration lets the earlier key win */
            if (!vc_cfg_node_equal(ov, nv))
                vc_cfg_add_notice(cfg, "%s and %s (verl's earlier name of it) are both set: the latter wins, as in verl",
                                  MIGRATE[i].from, MIGRATE[i].to);
            continue;
        }
        vc_status st = put_path(cfg->root, MIGRATE[i].to, nv);
        if (st) return st;
    }
    return VC_OK;
}
