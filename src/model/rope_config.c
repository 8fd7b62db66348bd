/* Parses rope settings from config.json in the classic (rope_theta + rope_scaling) and transformers-5
 * (rope_parameters, possibly one dict per layer type) styles. */
#include "verlc/json.h"
#include "verlc/rope.h"
#include <stdio.h>
#include <math.h>
#include <string.h>

static const char *const TYPE_NAMES[] = { "default", "linear", "dynamic", "yarn", "longrope", "llama3",
                                                "proportional" };

const char *vc_rope_type_name(int type) {
    return type >= 0 && type < (int)(sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]) ? TYPE_NAMES[type] : "?";
}

/* Reads a list of numbers into dst (n entries). */
static vc_status read_factors(const cJSON *p, const char *key, const char *ctx, double *dst, int *n) {
    const cJSON *a = vc_json_member(p, key);
    if (!a) return vc_fail(VC_ERR_MISSING, "%s: required key '%s' is missing", ctx, key);
    if (!cJSON_IsArray(a)) return vc_fail(VC_ERR_FORMAT, "%s: key '%s': expected a list of numbers", ctx, key);
    int k = 0;
    for (const cJSON *e = a->child; e; e = e->next, k++) {
        if (!cJSON_IsNumber(e))
            return vc_fail(VC_ERR_FORMAT, "%s: key '%s': entry %d is %s, not a number", ctx, key, k,
                           vc_json_type_name(e));
        if (k >= VC_ROPE_MAX_FACTORS)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: key '%s': more than %d factors", ctx, key,
                           VC_ROPE_MAX_FACTORS);
        if (!(e->valuedouble > 0 && e->valuedouble <= 1e6))
            return vc_fail(VC_ERR_ARG, "%s: key '%s': entry %d is %g, outside (0, 1e6]", ctx, key, k, e->valuedouble);
        dst[k] = e->valuedouble;
    }
    *n = k;
    return VC_OK;
}

static vc_status type_from_name(const char *s, const char *ctx, const char *key, int *type) {
    for (int i = 0; i < (int)(sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]); i++)
        if (!strcmp(s, TYPE_NAMES[i])) { *type = i; return VC_OK; }
    if (!strcmp(s, "su")) { *type = VC_ROPE_LONGROPE; return VC_OK; } /* early Phi-3 name of longrope */
    /* Qwen2-VL's multimodal rope: text positions are the same on its three axes, so it is the default rope */
    if (!strcmp(s, "mrope")) { *type = VC_ROPE_DEFAULT; return VC_OK; }
    return vc_fail(VC_ERR_UNSUPPORTED,
                   "%s: key '%s': unknown rope type '%s' (known: default, linear, dynamic, yarn, longrope, llama3, proportional)",
                   ctx, key, s);
}

/* mrope_section [t, h, w] (pairs per axis) and mrope_interleaved */
static vc_status parse_mrope(const cJSON *p, const char *ctx, vc_rope *r) {
    const cJSON *ms = vc_json_member(p, "mrope_section");
    if (!ms || cJSON_IsNull(ms)) return VC_OK;
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) != 3)
        return vc_fail(VC_ERR_FORMAT, "%s: key 'mrope_section': expected a list of 3 integers", ctx);
    for (int k = 0; k < 3; k++) {
        const cJSON *e = cJSON_GetArrayItem(ms, k);
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 4096 || e->valuedouble != (int)e->valuedouble)
            return vc_fail(VC_ERR_FORMAT, "%s: key 'mrope_section': entry %d is not an integer in [0, 4096]", ctx, k);
        r->mrope[k] = (int)e->valuedouble;
    }
    return vc_json_get_bool(p, "mrope_interleaved", 0, &r->mrope_interleaved, ctx);
}

/* Type-specific keys of one parameter dict p; ctx names the dict in errors, path the file. */
static vc_status parse_params(const cJSON *config, const char *path, const cJSON *p, const char *ctx, vc_rope *r) {
    const char *ts = NULL, *key = "rope_type";
    vc_status st = vc_json_get_str(p, "rope_type", NULL, &ts, ctx);
    if (st == VC_OK && !ts) { key = "type"; st = vc_json_get_str(p, "type", "default", &ts, ctx); }
    if (st == VC_OK && !ts) ts = "default";
    if (st == VC_OK) st = type_from_name(ts, ctx, key, &r->type);
    if (st != VC_OK) return st;
    r->has_factor = vc_json_member(p, "factor") != NULL;
    int need_factor = r->type == VC_ROPE_LINEAR || r->type == VC_ROPE_DYNAMIC || r->type == VC_ROPE_YARN ||
                      r->type == VC_ROPE_LLAMA3;
    if (need_factor) st = vc_json_req_num(p, "factor", &r->factor, ctx);
    else st = vc_json_get_num(p, "factor", 1.0, &r->factor, ctx);
    if (st != VC_OK) return st;
    r->has_attention_factor = vc_json_member(p, "attention_factor") != NULL;
    if ((st = vc_json_get_num(p, "attention_factor", 1.0, &r->attention_factor, ctx)) != VC_OK) return st;
    if ((st = vc_json_get_int(p, "original_max_position_embeddings", 0, &r->original_max_pos, ctx)) != VC_OK)
        return st;
    switch (r->type) {
    case VC_ROPE_LLAMA3:
        if ((st = vc_json_req_num(p, "low_freq_factor", &r->low_freq_factor, ctx)) != VC_OK) return st;
        if ((st = vc_json_req_num(p, "high_freq_factor", &r->high_freq_factor, ctx)) != VC_OK) return st;
        if (!vc_json_member(p, "original_max_position_embeddings"))
            return vc_fail(VC_ERR_MISSING, "%s: required key 'original_max_position_embeddings' is missing", ctx);
        if (r->high_freq_factor == r->low_freq_factor)
            return vc_fail(VC_ERR_ARG, "%s: high_freq_factor equals low_freq_factor", ctx);
        break;
    case VC_ROPE_YARN:
        if ((st = vc_json_get_num(p, "beta_fast", 32, &r->beta_fast, ctx)) != VC_OK) return st;
        if ((st = vc_json_get_num(p, "beta_slow", 1, &r->beta_slow, ctx)) != VC_OK) return st;
        if (r->beta_fast == 0) r->beta_fast = 32; /* transformers: `get("beta_fast") or 32` */
        if (r->beta_slow == 0) r->beta_slow = 1;
        if ((st = vc_json_get_num(p, "mscale", 0, &r->mscale, ctx)) != VC_OK) return st;
        if ((st = vc_json_get_num(p, "mscale_all_dim", 0, &r->mscale_all_dim, ctx)) != VC_OK) return st;
        if ((st = vc_json_get_bool(p, "truncate", 1, &r->truncate, ctx)) != VC_OK) return st;
        break;
    case VC_ROPE_LONGROPE: {
        if ((st = read_factors(p, "short_factor", ctx, r->short_factor, &r->n_short)) != VC_OK) return st;
        if ((st = read_factors(p, "long_factor", ctx, r->long_factor, &r->n_long)) != VC_OK) return st;
        /* transformers reads longrope's original_max_position_embeddings from the config's top level only
         * (Phi-3 keeps it there); a copy inside the rope dict is ignored, as transformers does */
        if ((st = vc_json_get_int(config, "original_max_position_embeddings", 0, &r->original_max_pos, path)) != VC_OK)
            return st;
        break;
    }
    default:
        break;
    }
    if ((st = parse_mrope(p, ctx, r)) != VC_OK) return st;
    if (r->factor <= 0 && need_factor)
        return vc_fail(VC_ERR_ARG, "%s: factor must be positive, got %g", ctx, r->factor);
    if (!(r->factor <= 1e6) || !(fabs(r->attention_factor) <= 1e6))
        return vc_fail(VC_ERR_ARG, "%s: factor %g / attention_factor %g outside [-1e6, 1e6]", ctx, r->factor,
                       r->attention_factor);
    return VC_OK;
}

static int is_per_layer(const cJSON *rp) {
    if (!rp->child) return 0;
    for (const cJSON *e = rp->child; e; e = e->next)
        if (!cJSON_IsObject(e)) return 0;
    return 1;
}

vc_status vc_rope_parse_layer(const cJSON *config, const char *config_path, const char *layer_type,
                              vc_rope *r) {
    const char *path = config_path ? config_path : "config.json";
    char ctx[512];
    memset(r, 0, sizeof *r);
    r->factor = 1.0;
    r->attention_factor = 1.0;
    r->beta_fast = 32;
    r->beta_slow = 1;
    r->truncate = 1;
    if (!cJSON_IsObject(config)) return vc_fail(VC_ERR_FORMAT, "%s: config is not a JSON object", path);
    vc_status st = vc_json_get_int(config, "max_position_embeddings", 0, &r->max_position_embeddings, path);
    if (st == VC_OK) st = vc_json_get_num(config, "rope_theta", 10000.0, &r->theta, path);
    if (st != VC_OK) return st;
    r->theta_given = vc_json_member(config, "rope_theta") != NULL;
    const cJSON *p = NULL, *rp = vc_json_member(config, "rope_parameters");
    if (rp) {
        if (!cJSON_IsObject(rp)) return vc_fail(VC_ERR_FORMAT, "%s: key 'rope_parameters': expected an object", path);
        snprintf(ctx, sizeof ctx, "%s: rope_parameters", path);
        p = rp;
        const char *lt0 = layer_type ? layer_type : "full_attention";
        if (cJSON_IsObject(vc_json_member(rp, lt0))) { /* the layer type's own entry, beside flat keys too (a config that
                                                        * transformers completed so: its rope reads the entry) */
            p = vc_json_member(rp, lt0);
            snprintf(ctx, sizeof ctx, "%s: rope_parameters.%s", path, lt0);
        } else if (is_per_layer(rp)) {
            const char *lt = lt0;
            p = vc_json_member(rp, lt);
            if (!p && !layer_type && !rp->child->next) { p = rp->child; lt = p->string; }
            if (!p) return vc_fail(VC_ERR_MISSING, "%s: rope_parameters has no entry for layer type '%s'", path, lt);
            snprintf(ctx, sizeof ctx, "%s: rope_parameters.%s", path, lt);
        }
        if (vc_json_member(p, "rope_theta")) {
            if ((st = vc_json_req_num(p, "rope_theta", &r->theta, ctx)) != VC_OK) return st;
            r->theta_given = 1;
        }
    } else {
        snprintf(ctx, sizeof ctx, "%s: rope_scaling", path);
        p = vc_json_member(config, "rope_scaling");
        if (p && !cJSON_IsObject(p)) return vc_fail(VC_ERR_FORMAT, "%s: key 'rope_scaling': expected an object", path);
        if (layer_type && !strcmp(layer_type, "sliding_attention") && vc_json_member(config, "rope_local_base_freq")) {
            r->theta_given = 1;
            return vc_json_req_num(config, "rope_local_base_freq", &r->theta, path);
        }
    }
    if ((st = vc_json_get_num(config, "partial_rotary_factor", 1.0, &r->partial_rotary_factor, path)) != VC_OK)
        return st;
    if (!vc_json_member(config, "partial_rotary_factor") && p &&
        (st = vc_json_get_num(p, "partial_rotary_factor", 1.0, &r->partial_rotary_factor, ctx)) != VC_OK)
        return st;
    if (r->theta <= 0) return vc_fail(VC_ERR_ARG, "%s: rope_theta must be positive, got %g", path, r->theta);
    return p ? parse_params(config, path, p, ctx, r) : VC_OK;
}

vc_status vc_rope_parse(const cJSON *config, const char *config_path, vc_rope *out) {
    return vc_rope_parse_layer(config, config_path, NULL, out);
}
