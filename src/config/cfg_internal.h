/* Internals of the config module: the node tree shared by the parser, merger, resolver and emitter. */
#ifndef VC_CFG_INTERNAL_H
#define VC_CFG_INTERNAL_H
#include "verlc/config.h"
#include <stddef.h>
#include <stdint.h>

/* Declared kind of a default value: what a user value at that key may be. */
enum { VC_DECL_ANY = -1 };

typedef struct vc_cfg_node {
    vc_cfg_kind kind;
    int decl;     /* vc_cfg_kind from the defaults, or VC_DECL_ANY */
    int line;     /* 1-based source line, 0 if unknown */
    int open;     /* MAP: accepts keys the defaults do not have */
    int resolving;/* cycle guard during interpolation */
    int lit;      /* STR: resolved text; a "${" in it is literal (came from "\\${") */
    int b;        /* BOOL */
    int64_t i;    /* INT */
    double f;     /* FLOAT */
    char *s;      /* STR: the text; BOOL/INT/FLOAT: the text as written (may be NULL) */
    size_t n, cap;
    char **keys;                 /* MAP keys, in insertion order */
    struct vc_cfg_node **items;  /* MAP values / LIST items */
} vc_cfg_node;

struct vc_config {
    vc_cfg_node *root;
    int schema;       /* 1: keys must exist and values fit declared types (built from defaults) */
    vc_cfg_node *resolved_defaults; /* the defaults with interpolations resolved (NULL without schema) */
    int quiet;
    char **notices;
    size_t n_notices, cap_notices;
    char suggest_buf[512];
    int engine;       /* the defaults it is built on: VC_ENGINE_DP (ppo_trainer), _MEGATRON or _VEOMNI */
    int groups;       /* group options over them: VC_GROUP_MLITE_ACTOR */
    vc_cfg_node *later; /* the keys of verl's later configuration added to the defaults (notices) */
};

/* cfg_defaults.c */
extern const char vc_cfg_megatron_overlay_yaml[];
extern const char vc_cfg_veomni_overlay_yaml[];
extern const char *const vc_cfg_veomni_removed[];
extern const char vc_cfg_mlite_actor_overlay_yaml[];
extern const char *const vc_cfg_mlite_actor_removed[];
extern const char vc_cfg_later_yaml[];
/* cfg_load.c: defaults on ppo_trainer (VC_ENGINE_DP), ppo_megatron_trainer or later verl's veomni engine;
 * switching a config still at ppo_trainer's defaults to another engine's (`where` names the defaults entry or the
 * override in messages) */
vc_status vc_config_defaults_ex(int engine, vc_config **out);
vc_status vc_cfg_use_engine(vc_config *cfg, int engine, const char *where);
/* the same for a group option (VC_GROUP_MLITE_ACTOR) over the engine's defaults */
vc_status vc_cfg_use_group(vc_config *cfg, int group, const char *where);
/* cfg_migrate.c: verl's later `reward` group onto the keys verlc reads (after resolving) */
vc_status vc_cfg_migrate_reward(vc_config *cfg);
/* later verl's feature switches verlc does not have, refused when on (after resolving) */
vc_status vc_cfg_later_check(const vc_config *cfg);

/* cfg_node.c */
vc_cfg_node *vc_cfg_node_new(vc_cfg_kind kind);
void vc_cfg_node_free(vc_cfg_node *n);
vc_cfg_node *vc_cfg_node_copy(const vc_cfg_node *n);
vc_cfg_node *vc_cfg_scalar_str(const char *s, size_t len);
vc_status vc_cfg_map_put(vc_cfg_node *map, const char *key, vc_cfg_node *val); /* takes val; replaces */
/* Adds a key the caller knows is not in the map yet (no linear search); takes val. */
vc_status vc_cfg_map_append(vc_cfg_node *map, const char *key, vc_cfg_node *val);
/* Nodes in the tree n, counting no further than `limit`. */
size_t vc_cfg_node_count(const vc_cfg_node *n, size_t limit);
vc_cfg_node *vc_cfg_map_get(const vc_cfg_node *map, const char *key);
int vc_cfg_map_remove(vc_cfg_node *map, const char *key);
vc_status vc_cfg_list_push(vc_cfg_node *list, vc_cfg_node *val);
int vc_cfg_node_equal(const vc_cfg_node *a, const vc_cfg_node *b);
/* Replaces the contents of dst with src's (src is consumed and freed); keeps dst's decl. */
void vc_cfg_node_assign(vc_cfg_node *dst, vc_cfg_node *src);
/* Sets decl = kind (NULL/MISSING/interpolated strings: ANY) on the whole tree; empty maps open. */
void vc_cfg_mark_schema(vc_cfg_node *n);

/* Splits "a.b[2].c" into segments ("a","b","2","c"); returns count or -1 on a malformed path.
 * segs point into buf, which must hold strlen(path)+1 bytes. */
int vc_cfg_path_split(const char *path, char *buf, char **segs, int max_segs);
const vc_cfg_node *vc_cfg_lookup(const vc_cfg_node *root, const char *path);
vc_cfg_node *vc_cfg_lookup_segs(vc_cfg_node *root, char **segs, int n);
/* Child of a map by key or of a list by decimal index; NULL if none. */
vc_cfg_node *vc_cfg_child(const vc_cfg_node *n, const char *seg);

/* cfg_scalar.c */
/* YAML 1.1 plain-scalar resolution with OmegaConf's float rule (1e-6 is a float). */
vc_cfg_node *vc_cfg_scalar_yaml(const char *s, size_t len);
/* Hydra override value grammar. On error returns NULL and sets the message. */
vc_cfg_node *vc_cfg_parse_value(const char *s);
int vc_cfg_is_interp(const char *s);
/* A string node that still holds an interpolation. */
int vc_cfg_node_is_interp(const vc_cfg_node *n);
/* 1 if the string would be read back as something other than this string by the YAML resolver. */
int vc_cfg_str_needs_quote(const char *s);
void vc_cfg_format_float(double f, char *buf, size_t n);

/* cfg_yaml.c */
vc_status vc_cfg_yaml_parse(const char *text, size_t len, const char *name, vc_cfg_node **out);

/* cfg_notice.c */
/* Does `path` name Python-only machinery? *ignore is set when the key should be dropped rather than
 * stored (e.g. _target_). Returns 1 when the key may be accepted even though the defaults lack it.
 * With emit, records (and prints) the notice for the value `val` the user set; `changed` says whether
 * it differs from what was there (re-stating a default needs no notice, except for value-specific
 * rules such as trainer.logger=[console,wandb]). */
int vc_cfg_notice_check(vc_config *cfg, const char *path, const vc_cfg_node *val, int emit, int changed, int *ignore);
/* Dotted-path glob: `*` one segment, `**` any number (also none). */
int vc_cfg_path_match(const char *pat, const char *path);
/* 1 if v differs from both the current value at path and verl's (resolved) default there. */
int vc_cfg_value_changed(const vc_config *cfg, const char *path, const vc_cfg_node *v);
void vc_cfg_add_notice(vc_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cfg_load.c */
vc_status vc_cfg_check_fit(const char *where, const char *key, int decl, vc_cfg_node *v);
vc_status vc_cfg_unknown_key(vc_config *cfg, const char *where, const char *key);
/* Merges map src into map dst (found at `path`) with the same checks as a YAML file. */
vc_status vc_cfg_merge_at(vc_config *cfg, vc_cfg_node *dst, vc_cfg_node *src, const char *path, const char *where);

/* cfg_suggest.c */
const char *vc_cfg_suggest(const vc_cfg_node *root, const char *key, char *buf, size_t n);

/* cfg_defaults.c */
extern const char vc_cfg_ppo_defaults_yaml[];

#endif
