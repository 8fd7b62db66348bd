/* verlc configuration: verl's configuration keys and defaults (ppo_trainer.yaml), read from a YAML file
 * plus Hydra-style `key=value` overrides, with OmegaConf-style `${...}` interpolation.
 *
 * A configuration is a tree of maps (ordered), lists and scalars (null, bool, int, float, string).
 * Values are addressed by dotted paths: "actor_rollout_ref.actor.optim.lr"; list items by index,
 * "actor_rollout_ref.actor.optim.betas.1" or "...betas[1]".
 *
 * Typical use (what `verlc train` does):
 *     vc_config *cfg;
 *     if (vc_config_load(yaml_path_or_NULL, n, overrides, &cfg) != VC_OK) -> print vc_last_error()
 *     int64_t bs; vc_config_get_int(cfg, "data.train_batch_size", &bs);
 *     vc_config_free(cfg);
 */
#ifndef VERLC_CONFIG_H
#define VERLC_CONFIG_H
#include "verlc/core.h"
#include <stdint.h>
#include <stdio.h>

typedef struct vc_config vc_config;

typedef enum vc_cfg_kind {
    VC_CFG_NULL = 0,
    VC_CFG_BOOL,
    VC_CFG_INT,
    VC_CFG_FLOAT,
    VC_CFG_STR,
    VC_CFG_LIST,
    VC_CFG_MAP,
    VC_CFG_MISSING, /* OmegaConf's `???`: a mandatory value nobody set */
    VC_CFG_ABSENT,  /* returned by vc_config_kind for a path that does not exist */
} vc_cfg_kind;

/* ---- building ---------------------------------------------------------------------------------- */

/* The whole pipeline: verl's embedded defaults, then the YAML file (may be NULL), then the overrides
 * in order, then interpolation. Notices about Python-only keys go to stderr (one line each) and are
 * kept in the config (vc_config_notice). On error *out is NULL and the message names the file and
 * line, or the override and key, at fault. */
vc_status vc_config_load(const char *yaml_path, int n_overrides, char **overrides, vc_config **out);
/* verl's engines whose defaults a config starts from (later verl's `model_engine` group) */
enum { VC_ENGINE_DP = 0, VC_ENGINE_MEGATRON = 1, VC_ENGINE_VEOMNI = 2 };
/* or-ed into an engine: Megatron-lite's actor group (`actor@actor_rollout_ref.actor=mlite_actor`) over its defaults */
enum { VC_GROUP_MLITE_ACTOR = 0x100 };
/* ... on the defaults of an engine: VC_ENGINE_MEGATRON verl's ppo_megatron_trainer (`--config-name
 * ppo_megatron_trainer`, `model_engine=megatron`), VC_ENGINE_VEOMNI later verl's `model_engine=veomni` */
vc_status vc_config_load_ex(const char *yaml_path, int engine, int n_overrides, char **overrides, vc_config **out);

/* A verl command line (the arguments after the subcommand): `--config FILE.yaml` (or Hydra's
 * `--config-path DIR --config-name NAME`), `--print-config` (also `--cfg job`), and overrides.
 * *print_config (may be NULL) tells whether --print-config was given. */
vc_status vc_config_load_argv(int argc, char **argv, int *print_config, vc_config **out);

/* verl's default PPO trainer config, unresolved (interpolations still in place). */
vc_status vc_config_defaults(vc_config **out);
/* An empty config (a root map that accepts any key; no schema checks). */
vc_status vc_config_new(vc_config **out);
/* A config from YAML text; `name` is used in error messages ("name:LINE: ..."). No schema. */
vc_status vc_config_parse_yaml(const char *text, size_t len, const char *name, vc_config **out);
void vc_config_free(vc_config *cfg);

/* Merges a YAML file onto cfg: maps merge key by key, everything else replaces. Keys must exist
 * (unknown keys fail with a "did you mean" suggestion) and values must fit the declared type; errors
 * name the file and line. */
vc_status vc_config_merge_file(vc_config *cfg, const char *path);
vc_status vc_config_merge_yaml(vc_config *cfg, const char *text, size_t len, const char *name);

/* One Hydra override: "key=value", "+key=value" (add a new key), "++key=value" (add or replace),
 * "~key" or "~key=value" (delete). The value is parsed as Hydra does: null, true/false, ints, floats
 * (1e-6), quoted strings, [lists], {maps}, ${interpolations}; anything else is a string. */
vc_status vc_config_override(vc_config *cfg, const char *arg);
/* Same as the override "key=value"; key may carry the +, ++ or ~ prefix. */
vc_status vc_config_set(vc_config *cfg, const char *key, const char *value);

/* Replaces every ${path}, ${.relative}, ${oc.select:path,default} and ${oc.env:VAR,default}
 * with its value. Whole-string interpolations keep the referenced type; embedded ones become text. */
vc_status vc_config_resolve(vc_config *cfg);

/* Notices collected for keys that verlc accepts but ignores (Python-only machinery). */
size_t vc_config_notice_count(const vc_config *cfg);
const char *vc_config_notice(const vc_config *cfg, size_t i);
/* When quiet, notices are only collected, not printed (default: printed to stderr). */
void vc_config_set_quiet(vc_config *cfg, int quiet);

/* ---- reading ----------------------------------------------------------------------------------- */

vc_cfg_kind vc_config_kind(const vc_config *cfg, const char *path);
int vc_config_has(const vc_config *cfg, const char *path);
/* VC_ERR_MISSING when the path is absent, null or `???`; VC_ERR_ARG when the type does not fit.
 * get_int accepts integral floats; get_double accepts ints; get_bool accepts true/false and 0/1. */
vc_status vc_config_get_int(const vc_config *cfg, const char *path, int64_t *out);
vc_status vc_config_get_double(const vc_config *cfg, const char *path, double *out);
vc_status vc_config_get_bool(const vc_config *cfg, const char *path, int *out);
/* Scalars as text (numbers and bools as written); a null value gives *out = NULL and VC_OK.
 * The string lives as long as the config and is not changed by later reads. */
vc_status vc_config_get_str(const vc_config *cfg, const char *path, const char **out);
/* Defaults when the value is absent or null (type errors still fail). */
vc_status vc_config_get_int_or(const vc_config *cfg, const char *path, int64_t def, int64_t *out);
vc_status vc_config_get_double_or(const vc_config *cfg, const char *path, double def, double *out);
vc_status vc_config_get_bool_or(const vc_config *cfg, const char *path, int def, int *out);
vc_status vc_config_get_str_or(const vc_config *cfg, const char *path, const char *def, const char **out);

/* Lists: a scalar counts as a one-item list (data.train_files may be "a.parquet" or [a, b]);
 * null counts as empty. */
vc_status vc_config_list_len(const vc_config *cfg, const char *path, size_t *n);
vc_status vc_config_list_str(const vc_config *cfg, const char *path, size_t i, const char **out);
vc_status vc_config_list_double(const vc_config *cfg, const char *path, size_t i, double *out);
/* Keys of a map, in order. */
vc_status vc_config_map_len(const vc_config *cfg, const char *path, size_t *n);
vc_status vc_config_map_key(const vc_config *cfg, const char *path, size_t i, const char **out);

/* ---- writing ----------------------------------------------------------------------------------- */

/* Block-style YAML that vc_config_parse_yaml reads back to the same tree. path NULL = whole config. */
vc_status vc_config_write_yaml(const vc_config *cfg, const char *path, FILE *f);
/* Newly allocated text (free() it); NULL with VC_ERR_NOMEM text on failure. */
char *vc_config_to_yaml(const vc_config *cfg, const char *path);
char *vc_config_to_json(const vc_config *cfg, const char *path, int pretty);

/* Closest valid key to `key` by edit distance among the config's keys, or NULL (static buffer
 * owned by cfg; valid until the next call). */
const char *vc_config_suggest(const vc_config *cfg, const char *key);

#endif
