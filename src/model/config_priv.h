/* config.json parsing, shared by its files: config.c (the generic keys, layer patterns, MoE), config_family.c (each
 * family's own keys, in rule order) and config_mixer.c (linear-attention and state-space layers). */
#ifndef VC_CONFIG_PRIV_H
#define VC_CONFIG_PRIV_H
#include "tensor/backend.h" /* enum vc_act */
#include "verlc/json.h"
#include "verlc/model.h"
#include <string.h>

/* Sizes the loader multiplies together: within these bounds a tensor's element count (at most three of
 * them, one being a layer or expert count) stays far inside int64, and each fits an int. Larger values in a
 * config.json are a mistake or an attack, never a model. */
#define DIM_MAX ((int64_t)1 << 24)   /* vocab, hidden, intermediate sizes, LoRA ranks */
#define HEAD_MAX ((int64_t)1 << 16)  /* heads, head dims */

static inline int vc_mcfg_is(const vc_model_config *c, const char *t) { return !strcmp(c->model_type, t); }
/* c's model_type among space-separated names; "name*" matches a prefix ("*": every family) */
int vc_mcfg_is_any(const vc_model_config *c, const char *types);
int vc_mcfg_flag(const cJSON *o, const char *key, int def);
/* the first present key among space-separated keys, else def */
vc_status vc_mcfg_int_any(const cJSON *o, const char *keys, int64_t def, int64_t *out, const char *path);
vc_status vc_mcfg_num_any(const cJSON *o, const char *keys, double def, double *out, const char *path);
vc_status vc_mcfg_json_to_int(const cJSON *v, const char *key, int64_t lo, const char *path, int *out);
vc_status vc_mcfg_check_size(const char *path, const char *key, int64_t v, int64_t lo, int64_t hi);
vc_status vc_mcfg_rot_fraction(vc_model_config *c, double frac, const char *key, const char *path);
vc_status vc_mcfg_parse_act(const cJSON *o, const char *path, vc_model_config *c);
void vc_mcfg_proportional_default(vc_model_config *c, double part); /* config_family.c */
/* config_alias.c: a model_type that is another family's architecture (-1: none), parsed as that family */
int vc_mcfg_alias_kind(const cJSON *o);
vc_status vc_mcfg_parse_lara(const cJSON *o, const char *path, vc_model_config *c); /* config_mixer.c */
vc_status vc_mcfg_parse_alias(const cJSON *o, const char *path, vc_model_config *c, int k);

/* config_family.c: each family's keys and flags, in rule order, then its MoE keys (vc_mcfg_parse_moe, config.c) */
vc_status vc_mcfg_parse_family(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_moe(const cJSON *o, const char *path, vc_model_config *c);

/* config_mixer.c: the layers of linear-attention and state-space families */
vc_status vc_mcfg_parse_linear(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_olmo_hybrid(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_kimi_linear(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_minimax(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_mamba1(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_mamba2_pure(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_lfm2(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_granite_hybrid(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_nemotron_h(const cJSON *o, const char *path, vc_model_config *c);
vc_status vc_mcfg_parse_falcon_h1(const cJSON *o, const char *path, vc_model_config *c);

#endif
