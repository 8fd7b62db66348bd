/* config.json -> vc_model_config, for both config styles and each family's own key names (the families' rules:
 * config_family.c, config_mixer.c). */
#include "arch.h"
#include "config_priv.h"
#include <stdlib.h>
#include "tensor/backend.h"
#include "verlc/json.h"
#include <math.h>
#include <string.h>

/* first present integer among space-separated keys */
vc_status vc_mcfg_int_any(const cJSON *o, const char *keys, int64_t def, int64_t *out, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *k = strtok(buf, " "); k; k = strtok(NULL, " "))
        if (vc_json_member(o, k)) return vc_json_get_int(o, k, def, out, path);
    *out = def;
    return VC_OK;
}

vc_status vc_mcfg_num_any(const cJSON *o, const char *keys, double def, double *out, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *k = strtok(buf, " "); k; k = strtok(NULL, " "))
        if (vc_json_member(o, k)) return vc_json_get_num(o, k, def, out, path);
    *out = def;
    return VC_OK;
}

int vc_mcfg_flag(const cJSON *o, const char *key, int def) {
    const cJSON *v = vc_json_member(o, key);
    if (!v) return def;
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    return def;
}

int vc_mcfg_is_any(const vc_model_config *c, const char *types) {
    for (const char *p = types; *p; p += strspn(p, " ")) {
        size_t n = strcspn(p, " "), m = n && p[n - 1] == '*' ? n - 1 : n;
        if (!strncmp(c->model_type, p, m) && (m < n || !c->model_type[m])) return 1;
        p += n;
    }
    return 0;
}

/* A JSON number that must become an int: integral and in [lo, INT_MAX]; converting anything else to int is
 * undefined (1e300) or wraps. */
vc_status vc_mcfg_json_to_int(const cJSON *v, const char *key, int64_t lo, const char *path, int *out) {
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > 2147483647.0)
        return vc_fail(VC_ERR_FORMAT, "%s: key '%s': %.17g is not an integer in [%lld, 2147483647]", path, key, d,
                       (long long)lo);
    *out = (int)d;
    return VC_OK;
}

/* Rotary dimensions from a fraction of head_dim (partial_rotary_factor, rotary_pct): in [0, head_dim]. */
vc_status vc_mcfg_rot_fraction(vc_model_config *c, double frac, const char *key, const char *path) {
    double r = (double)c->head_dim * frac;
    if (!isfinite(r) || r < 0 || r > (double)c->head_dim)
        return vc_fail(VC_ERR_FORMAT, "%s: %s %g gives no rotary dimension within head_dim %lld", path, key, frac,
                       (long long)c->head_dim);
    c->rot_dim = (int)r;
    return VC_OK;
}

vc_status vc_mcfg_check_size(const char *path, const char *key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        return vc_fail(VC_ERR_FORMAT, "%s: %s is %lld, outside [%lld, %lld]", path, key, (long long)v, (long long)lo,
                       (long long)hi);
    return VC_OK;
}

static vc_status check_sizes(const vc_model_config *c, const char *path) {
    vc_status st;
    if ((st = vc_mcfg_check_size(path, "vocab_size", c->vocab, 1, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "hidden_size", c->hidden, 1, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "intermediate_size", c->inter, 0, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "num_attention_heads", c->n_head, 1, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "num_key_value_heads", c->n_kv_head, 1, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "head_dim", c->head_dim, 1, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "max_position_embeddings", c->max_pos, 1, 2147483647)) ||
        (st = vc_mcfg_check_size(path, "moe_intermediate_size", c->moe_inter, 0, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "shared_expert_intermediate_size", c->shared_inter, 0, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "q_lora_rank", c->q_lora_rank, 0, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "kv_lora_rank", c->kv_lora_rank, 0, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "qk_nope_head_dim", c->qk_nope_dim, 0, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "qk_rope_head_dim", c->qk_rope_dim, 0, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "v_head_dim", c->v_head_dim, 0, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "num_labels", c->n_labels, 0, DIM_MAX)))
        return st;
    if (!isfinite(c->norm_eps) || c->norm_eps < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: the norm epsilon must be a non-negative number, got %g", path, c->norm_eps);
    return VC_OK;
}

vc_status vc_mcfg_parse_act(const cJSON *o, const char *path, vc_model_config *c) {
    const char *a = NULL;
    /* transformers' Gemma (1) reads hidden_act alone and takes its "gelu" for the tanh approximation (the released
     * configs' legacy value); Gemma 2 and later read hidden_activation */
    if (vc_mcfg_is(c, "gemma")) {
        vc_status sg = vc_json_get_str(o, "hidden_act", "gelu_pytorch_tanh", &a, path);
        if (sg) return sg;
        if (!strcmp(a, "gelu")) a = "gelu_pytorch_tanh";
    }
    vc_status st = a ? VC_OK : vc_json_get_str(o, "hidden_activation", NULL, &a, path);
    if (st == VC_OK && !a) st = vc_json_get_str(o, "activation_function", NULL, &a, path); /* GPT-2 */
    if (st == VC_OK && !a) st = vc_json_get_str(o, "activation", NULL, &a, path); /* Falcon */
    if (st == VC_OK && !a && vc_mcfg_is(c, "openai-gpt")) { /* OpenAI GPT's ACT_FNS: its "gelu" is the tanh one */
        st = vc_json_get_str(o, "afn", "gelu", &a, path);
        if (st == VC_OK && !strcmp(a, "gelu")) a = "gelu_new";
    }
    if (st == VC_OK && !a) st = vc_json_get_str(o, "hidden_act", "silu", &a, path);
    if (st != VC_OK) return st;
    static const struct { const char *name; int act; } A[] = {
        { "silu", VC_ACT_SILU }, { "swish", VC_ACT_SILU }, { "gelu", VC_ACT_GELU_ERF },
        { "gelu_new", VC_ACT_GELU_TANH }, { "gelu_pytorch_tanh", VC_ACT_GELU_TANH }, { "gelu_fast", VC_ACT_GELU_TANH },
        { "relu", VC_ACT_RELU }, { "relu2", VC_ACT_RELU2 } };
    for (size_t i = 0; i < sizeof A / sizeof A[0]; i++)
        if (!strcmp(a, A[i].name)) {
            c->act = A[i].act;
            return VC_OK;
        }
    if (!strcmp(a, "xielu")) { /* Apertus: an activation with learnable scalars of its own (vc_op_xielu) */
        c->xielu = 1;
        c->act = VC_ACT_NONE;
        return VC_OK;
    }
    return vc_fail(VC_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported", path, a);
}

/* sliding windows: layer_types (transformers 5), Gemma 2's alternation, Qwen2's max_window_layers */
static vc_status parse_windows(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t w = 0;
    if (vc_mcfg_is(c, "gpt_neo")) return VC_OK; /* its attention_layers, read with the family's keys */
    const cJSON *sw = vc_json_member(o, "sliding_window");
    if (sw && cJSON_IsNumber(sw)) {
        if (!(sw->valuedouble < 2147483648.0))
            return vc_fail(VC_ERR_FORMAT, "%s: key 'sliding_window': %.17g is out of range", path, sw->valuedouble);
        w = sw->valuedouble > 0 ? (int64_t)sw->valuedouble : 0;
    }
    const cJSON *types = vc_json_member(o, "layer_types");
    int use = w > 0;
    if (vc_json_member(o, "use_sliding_window")) use = use && vc_mcfg_flag(o, "use_sliding_window", 0);
    int64_t mwl = 0, pattern = 6; /* Gemma 3: every sixth layer is global unless the config says otherwise */
    vc_status st = vc_json_get_int(o, "max_window_layers", 0, &mwl, path);
    if (st == VC_OK) st = vc_json_get_int(o, "sliding_window_pattern", 6, &pattern, path);
    if (st != VC_OK) return st;
    if (pattern < 1) return vc_fail(VC_ERR_FORMAT, "%s: sliding_window_pattern must be >= 1", path);
    for (int64_t l = 0; l < c->n_layer; l++) {
        int slide = 0;
        if (types && cJSON_IsArray(types)) {
            const cJSON *t = cJSON_GetArrayItem(types, (int)l);
            if (!t || !cJSON_IsString(t))
                return vc_fail(VC_ERR_FORMAT, "%s: layer_types has no string for layer %lld", path, (long long)l);
            slide = !strcmp(t->valuestring, "sliding_attention");
        } else if (vc_mcfg_is(c, "cohere2_moe")) { /* the dense prefix's own pattern, then sliding_window_pattern */
            int64_t k = 0, pp = 1, sp = 4;
            if ((st = vc_json_get_int(o, "first_k_dense_replace", 0, &k, path)) ||
                (st = vc_json_get_int(o, "prefix_dense_sliding_window_pattern", 1, &pp, path)) ||
                (st = vc_json_get_int(o, "sliding_window_pattern", 4, &sp, path)))
                return st;
            if (pp < 1 || sp < 1) return vc_fail(VC_ERR_FORMAT, "%s: sliding window patterns must be >= 1", path);
            slide = l < k ? (l + 1) % pp != 0 : (l - k + 1) % sp != 0;
        } else if (vc_mcfg_is(c, "gemma2")) slide = l % 2 == 0;
        else if (vc_mcfg_is(c, "cwm")) slide = l % 4 != 0; /* CWM: every fourth layer full, from the first */
        else if (vc_mcfg_is(c, "kolibri1")) slide = (l + 1) % 5 != 0; /* Kolibri: every fifth layer full */
        else if (vc_mcfg_is(c, "flint")) /* Flint: full on the first two layers, every fourth from the second and the
                                          * last */
            slide = !(l < 2 || l % 4 == 1 || l == c->n_layer - 1);
        else if (vc_mcfg_is(c, "gemma3_text") || vc_mcfg_is(c, "gemma4_text")) slide = (l + 1) % pattern != 0;
        else if (vc_mcfg_is_any(c, "qwen2 qwen2_moe qwen3 qwen3_moe"))
            slide = use && l >= mwl;
        else slide = use;
        c->window[l] = slide && w > 0 ? (int)w : 0;
    }
    return VC_OK;
}

/* Hunyuan MoE: moe_topk (one number, or one per layer: all equal), its shared MLP as wide as the experts */
static vc_status hunyuan_moe_keys(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *k = vc_json_member(o, "moe_topk");
    if (cJSON_IsArray(k)) {
        const cJSON *e;
        c->top_k = 0;
        cJSON_ArrayForEach(e, k) {
            if (!cJSON_IsNumber(e) || (c->top_k && e->valuedouble != (double)c->top_k))
                return vc_fail(VC_ERR_UNSUPPORTED, "%s: moe_topk differs between layers", path);
            c->top_k = (int64_t)e->valuedouble;
        }
        return VC_OK;
    }
    return vc_mcfg_int_any(o, "moe_topk num_experts_per_tok", 1, &c->top_k, path);
}

/* the keys the expert count is read from, the family's own first (transformers reads that one: a stray num_experts
 * beside PhiMoE's num_local_experts sizes nothing) */
static const char *expert_keys(const vc_model_config *c) {
    if (vc_mcfg_is_any(c, "mixtral phimoe granitemoe granitemoeshared granitemoehybrid minimax minimax_m2 gpt_oss "
                          "llama4_text jetmoe"))
        return "num_local_experts num_experts n_routed_experts moe_num_experts";
    if (vc_mcfg_is_any(c, "deepseek_v2 deepseek_v3 glm4_moe glm4_moe_lite dots1 nemotron_h solar_open"))
        return "n_routed_experts num_experts num_local_experts moe_num_experts";
    if (vc_mcfg_is_any(c, "ernie4_5_moe")) return "moe_num_experts num_experts num_local_experts n_routed_experts";
    return "num_experts num_local_experts n_routed_experts moe_num_experts";
}

/* expert counts and top-k (no experts: c->n_expert 0) */
static vc_status moe_counts(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    if ((st = vc_mcfg_int_any(o, expert_keys(c), 0, &c->n_expert, path))) return st;
    st = vc_mcfg_is(c, "hunyuan_v1_moe")
             ? hunyuan_moe_keys(o, path, c)
             : vc_mcfg_int_any(o, "num_experts_per_tok moe_k num_experts_per_token", 0, &c->top_k, path);
    if (st) return st;
    if ((st = vc_mcfg_int_any(o, "moe_intermediate_size", c->inter, &c->moe_inter, path))) return st;
    if (c->n_expert < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: the expert count (%s) must not be negative, got %lld", path, expert_keys(c),
                       (long long)c->n_expert);
    if (vc_mcfg_is(c, "jamba") && c->n_expert <= 1) c->n_expert = 0; /* num_experts 1: dense layers throughout */
    if (c->n_expert <= 0) return VC_OK;
    if (c->n_expert > 1024 || c->top_k < 1 || c->top_k > c->n_expert)
        return vc_fail(VC_ERR_FORMAT, "%s: %lld experts with %lld per token is not a valid routing", path,
                       (long long)c->n_expert, (long long)c->top_k);
    return VC_OK;
}

/* every router's defaults, and a gated shared expert where shared_expert_intermediate_size sizes one */
static vc_status moe_defaults(const cJSON *o, const char *path, vc_model_config *c) {
    c->routed_scaling = 1.0f;
    c->norm_topk = vc_mcfg_flag(o, "norm_topk_prob", vc_mcfg_is(c, "qwen3_next")); /* transformers' defaults */
    if (vc_mcfg_is_any(c, "mixtral qwen3_5_moe_text minimax")) c->norm_topk = 1;
    if (vc_mcfg_is(c, "gpt_oss")) c->norm_topk = c->expert_bias = 1; /* a softmax over the chosen logits */
    if (vc_mcfg_is(c, "minimax_m2")) /* DeepSeek-V3's router without groups: sigmoid, correction bias, renormalised */
        c->norm_topk = c->router_sigmoid = c->router_bias = 1;
    vc_status st = vc_mcfg_int_any(o, "shared_expert_intermediate_size", 0, &c->shared_inter, path);
    if (st) return st;
    c->shared_gate = c->shared_inter > 0;
    return VC_OK;
}

/* Llama 4: sigmoid of the top-k logits scaling the experts' inputs; an ungated shared expert */
static vc_status moe_llama4(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = vc_mcfg_int_any(o, "intermediate_size", 8192, &c->moe_inter, path);
    if (st) return st;
    c->router_sigmoid = c->route_scale_input = 1;
    c->norm_topk = 0;
    c->shared_inter = c->moe_inter;
    c->shared_gate = 0;
    return VC_OK;
}

/* hy_v3: sigmoid scores, a choice-only correction bias, renormalised and scaled; ungated shared */
static vc_status moe_hy_v3(const cJSON *o, const char *path, vc_model_config *c) {
    double rs;
    int64_t v;
    vc_status st;
    if ((st = vc_json_get_num(o, "router_scaling_factor", 1.0, &rs, path)) ||
        (st = vc_mcfg_int_any(o, "num_shared_experts", 1, &v, path)))
        return st;
    c->router_sigmoid = c->router_bias = c->norm_topk = 1;
    c->routed_scaling = (float)rs;
    c->shared_inter = v * c->moe_inter;
    c->shared_gate = 0;
    return VC_OK;
}

/* Flint: the sigmoid of the logits' top-k, renormalised; an ungated shared expert */
static vc_status moe_flint(const cJSON *o, const char *path, vc_model_config *c) {
    c->router_sigmoid = 1;
    c->norm_topk = vc_mcfg_flag(o, "norm_topk_prob", 1);
    c->shared_gate = 0;
    return VC_OK;
}

/* PhiMoE: the top-2 sparsemixer around router_jitter_noise (eval mode's routing) */
static vc_status moe_phimoe(const cJSON *o, const char *path, vc_model_config *c) {
    double j;
    vc_status st = vc_mcfg_num_any(o, "router_jitter_noise", 0.01, &j, path);
    if (st) return st;
    if (!isfinite(j) || j < 0 || j > 1 || c->top_k != 2)
        return vc_fail(VC_ERR_FORMAT, "%s: PhiMoE's sparsemixer routes to 2 experts (num_experts_per_tok %lld) with a "
                       "router_jitter_noise in [0, 1] (%g)", path, (long long)c->top_k, j);
    c->router_sparsemixer = 1;
    c->router_jitter = (float)j;
    return VC_OK;
}

/* Laguna: sigmoid scores of soft-capped logits, a choice-only correction bias, renormalised and scaled; an ungated
 * shared expert */
static vc_status moe_laguna(const cJSON *o, const char *path, vc_model_config *c) {
    double rs, cap;
    vc_status st;
    if ((st = vc_mcfg_num_any(o, "moe_routed_scaling_factor", 1.0, &rs, path)) ||
        (st = vc_mcfg_num_any(o, "moe_router_logit_softcapping", 0.0, &cap, path)))
        return st;
    if (!isfinite(rs) || !isfinite(cap) || cap < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: moe_routed_scaling_factor and moe_router_logit_softcapping (>= 0) must be "
                       "finite", path);
    c->router_sigmoid = c->router_bias = c->norm_topk = 1;
    c->routed_scaling = (float)rs;
    c->router_softcap = (float)cap;
    c->shared_gate = 0;
    return VC_OK;
}

/* Kolibri: experts chosen by logits + correction bias, weighted by the sigmoid of their logits; an ungated shared
 * expert (shared_expert_intermediate_size) */
static vc_status moe_kolibri(const cJSON *o, const char *path, vc_model_config *c) {
    c->router_sigmoid = c->router_bias = c->router_bias_logits = 1;
    c->shared_gate = 0;
    return VC_OK;
}

/* Hunyuan MoE: renormalised top-k; the shared MLP (ungated) as wide as the experts */
static vc_status moe_hunyuan(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_topk = 1;
    c->shared_inter = c->moe_inter;
    c->shared_gate = 0;
    return VC_OK;
}

/* Granite MoE: a softmax over the top-k logits; an ungated shared MLP */
static vc_status moe_granite(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_topk = 1;
    vc_status st = vc_mcfg_int_any(o, "shared_intermediate_size", 0, &c->shared_inter, path);
    if (st) return st;
    c->shared_gate = 0;
    return VC_OK;
}

/* Lara-Mini: Qwen3-MoE's softmax router, renormalised unless the config says otherwise; an ungated shared expert
 * (Flint's block) */
static vc_status moe_lara(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_topk = vc_mcfg_flag(o, "norm_topk_prob", 1);
    c->shared_gate = 0;
    return VC_OK;
}

/* families' routers, in order after moe_defaults (later rules overwrite earlier ones) */
static const struct {
    const char *types; /* vc_mcfg_is_any's list */
    vc_status (*fn)(const cJSON *o, const char *path, vc_model_config *c);
} MOE_ROUTERS[] = {
    { "llama4_text", moe_llama4 }, { "hy_v3", moe_hy_v3 }, { "flint", moe_flint }, { "phimoe", moe_phimoe },
    { "laguna", moe_laguna }, { "kolibri1", moe_kolibri }, { "hunyuan_v1_moe", moe_hunyuan },
    { "granitemoe granitemoeshared granitemoehybrid granitemoe_swa", moe_granite }, { "lara_mini", moe_lara },
};

/* which layers are MoE: every step-th (decoder_sparse_step) from first_dense on and every freq-th; ERNIE 4.5's from
 * ms to me every mi-th */
typedef struct {
    int64_t step, first_dense, freq;
    int64_t ms, me, mi; /* ERNIE 4.5: MoE layers from moe_layer_start_index to _end_index */
} moe_layout;

/* Cohere2-MoE: experts and shared experts as wide as intermediate_size; dense prefix layers */
static vc_status moe_cohere2(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    const char *fn = NULL, *comb = NULL;
    int64_t pre = 0, v;
    vc_status st;
    if ((st = vc_json_get_str(o, "expert_selection_fn", "softmax", &fn, path)) ||
        (st = vc_json_get_str(o, "shared_expert_combination_strategy", "average", &comb, path)) ||
        (st = vc_mcfg_int_any(o, "num_shared_experts", 0, &v, path)) ||
        (st = vc_mcfg_int_any(o, "prefix_dense_intermediate_size", c->inter, &pre, path)) ||
        (st = vc_mcfg_int_any(o, "first_k_dense_replace", 0, &L->first_dense, path)) ||
        (st = vc_mcfg_check_size(path, "prefix_dense_intermediate_size", pre, 1, DIM_MAX)))
        return st;
    if (strcmp(fn, "softmax") && strcmp(fn, "sigmoid"))
        return vc_fail(VC_ERR_FORMAT, "%s: expert_selection_fn '%s' is not softmax or sigmoid", path, fn);
    if (strcmp(comb, "sum") && strcmp(comb, "average"))
        return vc_fail(VC_ERR_FORMAT, "%s: shared_expert_combination_strategy '%s' is not sum or average", path, comb);
    c->moe_inter = c->inter;
    c->router_sigmoid = !strcmp(fn, "sigmoid"); /* a softmax over the top-k logits is the renormalised softmax */
    c->norm_topk = c->router_sigmoid ? vc_mcfg_flag(o, "norm_topk_prob", 1) : 1;
    c->shared_inter = v * c->inter;
    c->shared_gate = 0;
    if (v > 0 && !strcmp(comb, "average")) c->routed_scaling = c->shared_scale = 0.5f;
    for (int64_t l = 0; l < c->n_layer; l++) c->layer_inter[l] = (int32_t)pre; /* (MoE layers have no dense MLP) */
    return VC_OK;
}

/* LFM2-MoE: sigmoid scores, a choice-only expert_bias, renormalised, routed_scaling_factor */
static vc_status moe_lfm2(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    double rs;
    vc_status st;
    c->router_sigmoid = 1;
    c->router_bias = vc_mcfg_flag(o, "use_expert_bias", 1);
    c->norm_topk = vc_mcfg_flag(o, "norm_topk_prob", 1);
    if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &rs, path)) ||
        (st = vc_mcfg_int_any(o, "num_dense_layers", 2, &L->first_dense, path)))
        return st;
    c->routed_scaling = (float)rs;
    return VC_OK;
}

/* AFMoE: sigmoid scores, choice-only bias, renormalised, route_scale; ungated shared experts */
static vc_status moe_afmoe(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    double rs;
    int64_t v;
    vc_status st;
    c->router_sigmoid = c->router_bias = c->norm_topk = 1;
    if ((st = vc_json_get_num(o, "route_scale", 1.0, &rs, path)) ||
        (st = vc_mcfg_int_any(o, "num_shared_experts", 0, &v, path)) ||
        (st = vc_mcfg_int_any(o, "num_dense_layers", 1, &L->first_dense, path)))
        return st;
    c->routed_scaling = (float)rs;
    c->shared_inter = v * c->moe_inter;
    c->shared_gate = 0;
    return VC_OK;
}

/* DeepSeek's MoE, and GLM-4.5's (glm4_moe: DeepSeek-V3's sigmoid router with a correction bias and groups) */
static vc_status moe_deepseek(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    int dsa = vc_mcfg_is_any(c, "deepseek_v32 glm_moe_dsa"); /* DeepSeek-V3's MoE, sparse attention beside */
    int v3_router = vc_mcfg_is_any(c, "deepseek_v3 glm4_moe dots1 glm4_moe_lite exaone_moe") || dsa ||
                    vc_mcfg_is(c, "solar_open") || /* Solar Open: GLM-4.5's MoE in every layer */
                    vc_mcfg_is_any(c, "mimo_v2_flash axk1");
    /* Mistral 4: DeepSeek-V3's grouped routing (top-2 sums per group) over softmax scores, no correction bias */
    int mistral4 = vc_mcfg_is(c, "mistral4");
    int64_t v, ng = 1, tg = 1;
    double s;
    vc_status st;
    if ((st = vc_mcfg_int_any(o, "n_shared_experts num_shared_experts", 0, &v, path))) return st;
    c->shared_inter = v * c->moe_inter;
    if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &s, path))) return st;
    c->routed_scaling = (float)s;
    if ((st = vc_mcfg_int_any(o, "first_k_dense_replace", dsa ? 3 : vc_mcfg_is(c, "axk1") ? 1 : 0, &L->first_dense,
                              path)) ||
        (st = vc_mcfg_int_any(o, "moe_layer_freq", 1, &L->freq, path)) ||
        (st = vc_mcfg_int_any(o, "n_group", 1, &ng, path)) || (st = vc_mcfg_int_any(o, "topk_group", 1, &tg, path)))
        return st;
    const char *method = NULL, *scoring = NULL;
    if ((st = vc_json_get_str(o, "topk_method", v3_router || mistral4 ? "noaux_tc" : "greedy", &method, path)) ||
        (st = vc_json_get_str(o, "scoring_func", v3_router ? "sigmoid" : "softmax", &scoring, path)))
        return st;
    c->router_sigmoid = !strcmp(scoring, "sigmoid");
    c->router_bias |= c->router_sigmoid; /* DeepSeek-V3's sigmoid router has its correction bias */
    if (vc_mcfg_is(c, "deepseek_v2")) c->norm_topk = 0; /* transformers' V2 router never renormalises */
    if (!strcmp(method, "group_limited_greedy") || !strcmp(method, "noaux_tc")) {
        c->n_group = (int)ng;
        c->topk_group = (int)tg;
        c->group_top2 = !strcmp(method, "noaux_tc");
        if (ng < 1 || c->n_expert % ng || tg > ng)
            return vc_fail(VC_ERR_FORMAT, "%s: n_group %lld / topk_group %lld do not divide %lld experts", path,
                           (long long)ng, (long long)tg, (long long)c->n_expert);
    } else if (strcmp(method, "greedy"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: topk_method '%s' is not supported", path, method);
    return VC_OK;
}

/* Kimi-Linear: DeepSeek-V3's sigmoid router with groups; shared experts; dense first layers */
static vc_status moe_kimi_linear(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    double rs;
    int64_t ng = 1, tg = 1, v;
    vc_status st;
    if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &rs, path)) ||
        (st = vc_mcfg_int_any(o, "num_expert_group n_group", 1, &ng, path)) ||
        (st = vc_mcfg_int_any(o, "topk_group", 1, &tg, path)) ||
        (st = vc_mcfg_int_any(o, "num_shared_experts n_shared_experts", 1, &v, path)) ||
        (st = vc_mcfg_int_any(o, "first_k_dense_replace", 1, &L->first_dense, path)) ||
        (st = vc_mcfg_int_any(o, "moe_layer_freq", 1, &L->freq, path)))
        return st;
    if (ng < 1 || c->n_expert % ng || tg < 1 || tg > ng)
        return vc_fail(VC_ERR_FORMAT, "%s: num_expert_group %lld / topk_group %lld do not divide %lld experts", path,
                       (long long)ng, (long long)tg, (long long)c->n_expert);
    const char *act = NULL;
    if ((st = vc_json_get_str(o, "moe_router_activation_func", "sigmoid", &act, path))) return st;
    if (strcmp(act, "sigmoid"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: moe_router_activation_func '%s': Kimi-Linear's router is built with "
                       "sigmoid", path, act);
    c->router_sigmoid = c->router_bias = c->group_top2 = 1;
    c->norm_topk = vc_mcfg_flag(o, "moe_renormalize", vc_mcfg_flag(o, "norm_topk_prob", 1));
    c->routed_scaling = (float)rs;
    c->n_group = ng > 1 ? (int)ng : 0;
    c->topk_group = (int)tg;
    c->shared_inter = v * c->moe_inter;
    return VC_OK;
}

/* Nemotron-H: DeepSeek-V3's sigmoid router; ungated shared experts; its "moe" blocks as listed (the last rule: the
 * blocks are already placed) */
static vc_status moe_nemotron_h(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    double rs;
    int64_t ng = 1, tg = 1, v, n_shared = 1;
    vc_status st;
    if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &rs, path)) ||
        (st = vc_mcfg_int_any(o, "n_group", 1, &ng, path)) || (st = vc_mcfg_int_any(o, "topk_group", 1, &tg, path)) ||
        (st = vc_mcfg_int_any(o, "moe_shared_expert_intermediate_size", 0, &v, path)) ||
        (st = vc_mcfg_int_any(o, "n_shared_experts", 1, &n_shared, path)))
        return st;
    if (ng < 1 || c->n_expert % ng || tg > ng)
        return vc_fail(VC_ERR_FORMAT, "%s: n_group %lld / topk_group %lld do not divide %lld experts", path,
                       (long long)ng, (long long)tg, (long long)c->n_expert);
    c->router_sigmoid = c->router_bias = c->group_top2 = 1;
    c->norm_topk = vc_mcfg_flag(o, "norm_topk_prob", 1);
    c->routed_scaling = (float)rs;
    c->n_group = ng > 1 ? (int)ng : 0;
    c->topk_group = (int)tg;
    c->shared_inter = n_shared > 0 ? v * n_shared : 0;
    c->shared_gate = 0;
    int any = 0;
    for (int64_t l = 0; l < c->n_layer; l++) any |= c->is_moe[l];
    if (!any) c->n_expert = 0; /* a dense model's config still names experts */
    return VC_OK;
}

/* ERNIE 4.5 MoE: MoE layers from moe_layer_start_index to _end_index */
static vc_status moe_ernie(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L) {
    int64_t v;
    vc_status st;
    c->norm_topk = c->router_bias = 1; /* weights / max(sum, moe_norm_min) */
    double nm = 1e-12;
    if ((st = vc_mcfg_num_any(o, "moe_norm_min", 1e-12, &nm, path))) return st;
    if (!(nm >= 0) || !isfinite(nm)) return vc_fail(VC_ERR_FORMAT, "%s: moe_norm_min must be a non-negative number", path);
    c->norm_topk_min = (float)nm;
    if ((st = vc_mcfg_int_any(o, "n_shared_experts moe_num_shared_experts", 0, &v, path)) ||
        (st = vc_mcfg_int_any(o, "moe_layer_start_index", 0, &L->ms, path)) ||
        (st = vc_mcfg_int_any(o, "moe_layer_end_index", c->n_layer - 1, &L->me, path)) ||
        (st = vc_mcfg_int_any(o, "moe_layer_interval", 1, &L->mi, path)))
        return st;
    c->shared_inter = v * c->moe_inter;
    if (v > 0 && vc_mcfg_flag(o, "use_bias", 0)) /* (no released checkpoint has them) */
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: use_bias with shared experts (biases on the shared experts) is not built",
                       path);
    if (L->me < 0) L->me = c->n_layer - 1;
    return VC_OK;
}

/* routers that also place the MoE layers (a dense prefix, an interval), in order after MOE_ROUTERS */
static const struct {
    const char *types; /* vc_mcfg_is_any's list */
    vc_status (*fn)(const cJSON *o, const char *path, vc_model_config *c, moe_layout *L);
    int last; /* the family's layers are placed: nothing follows */
} MOE_PLACING[] = {
    { "cohere2_moe", moe_cohere2 }, { "lfm2_moe", moe_lfm2 }, { "afmoe", moe_afmoe },
    { "deepseek* glm_moe_dsa glm4_moe dots1 glm4_moe_lite exaone_moe solar_open mimo_v2_flash axk1 mistral4",
      moe_deepseek },
    { "kimi_linear", moe_kimi_linear }, { "nemotron_h", moe_nemotron_h, 1 }, { "ernie4_5_moe", moe_ernie },
};

/* each layer MoE or dense: the layout, mlp_layer_types, the families' own patterns, mlp_only_layers */
static vc_status moe_layers(const cJSON *o, const char *path, vc_model_config *c, const moe_layout *L) {
    vc_status st;
    const cJSON *only = vc_json_member(o, "mlp_only_layers");
    const cJSON *types = vc_json_member(o, "mlp_layer_types"); /* GLM-4.7-Flash: "dense" / "sparse" per layer */
    if (types && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != (int)c->n_layer))
        return vc_fail(VC_ERR_FORMAT, "%s: mlp_layer_types must list %lld layers", path, (long long)c->n_layer);
    for (int64_t l = 0; l < c->n_layer; l++) {
        int moe = (l + 1) % (L->step > 0 ? L->step : 1) == 0 && l >= L->first_dense &&
                  l % (L->freq > 0 ? L->freq : 1) == 0;
        if (vc_mcfg_is(c, "ernie4_5_moe")) moe = (l + 1) % (L->mi > 0 ? L->mi : 1) == 0 && l >= L->ms && l <= L->me;
        if (types) {
            const cJSON *t = cJSON_GetArrayItem(types, (int)l);
            if (!cJSON_IsString(t) || (strcmp(t->valuestring, "dense") && strcmp(t->valuestring, "sparse")))
                return vc_fail(VC_ERR_FORMAT, "%s: mlp_layer_types[%lld] must be \"dense\" or \"sparse\"", path, (long long)l);
            moe = !strcmp(t->valuestring, "sparse");
        } else if (vc_mcfg_is_any(c, "glm4_moe_lite mimo_v2_flash hy_v3 laguna"))
            moe = l > 0; /* transformers' default: the first layer dense */
        if (vc_mcfg_is(c, "llama4_text")) { /* moe_layers, else every interleave_moe_layer_step-th layer */
            const cJSON *ml = vc_json_member(o, "moe_layers"), *e;
            int64_t st2 = 1;
            if (!cJSON_IsArray(ml) && (st = vc_mcfg_int_any(o, "interleave_moe_layer_step", 1, &st2, path))) return st;
            moe = 0;
            if (cJSON_IsArray(ml)) { cJSON_ArrayForEach(e, ml) if (cJSON_IsNumber(e) && e->valuedouble == (double)l) moe = 1; }
            else moe = st2 > 0 && l % st2 == st2 - 1;
        }
        if (vc_mcfg_is(c, "flint") && !only && l < 2) moe = 0; /* Flint: dense first two layers by default */
        if (only && cJSON_IsArray(only)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, only) if (cJSON_IsNumber(e) && e->valuedouble == (double)l) moe = 0;
        }
        if (vc_mcfg_is(c, "kolibri1")) moe = 1; /* every layer, whatever mlp_only_layers / decoder_sparse_step say */
        c->is_moe[l] = (uint8_t)moe;
    }
    return VC_OK;
}

/* Jamba: experts on every expert_layer_period-th layer from expert_layer_offset; softmax top-k */
static vc_status moe_jamba(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t ep = 2, eo = 1;
    vc_status st;
    if ((st = vc_mcfg_int_any(o, "expert_layer_period", 2, &ep, path)) ||
        (st = vc_mcfg_int_any(o, "expert_layer_offset", 1, &eo, path)))
        return st;
    if (ep < 1 || eo < 0 || eo >= ep)
        return vc_fail(VC_ERR_FORMAT, "%s: expert_layer_offset %lld must be below expert_layer_period %lld", path,
                       (long long)eo, (long long)ep);
    for (int64_t l = 0; l < c->n_layer; l++) c->is_moe[l] = (uint8_t)(l % ep == eo);
    return VC_OK;
}

/* the experts, their router and which layers hold them (the families' rules in order) */
vc_status vc_mcfg_parse_moe(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    if ((st = moe_counts(o, path, c)) || c->n_expert <= 0 || (st = moe_defaults(o, path, c))) return st;
    for (size_t i = 0; i < sizeof MOE_ROUTERS / sizeof MOE_ROUTERS[0]; i++)
        if (vc_mcfg_is_any(c, MOE_ROUTERS[i].types) && (st = MOE_ROUTERS[i].fn(o, path, c))) return st;
    moe_layout L = { .step = 1, .first_dense = 0, .freq = 1, .ms = 0, .me = c->n_layer - 1, .mi = 1 };
    if ((st = vc_mcfg_int_any(o, "decoder_sparse_step", 1, &L.step, path))) return st;
    for (size_t i = 0; i < sizeof MOE_PLACING / sizeof MOE_PLACING[0]; i++) {
        if (!vc_mcfg_is_any(c, MOE_PLACING[i].types)) continue;
        if ((st = MOE_PLACING[i].fn(o, path, c, &L)) || MOE_PLACING[i].last) return st;
    }
    if ((st = moe_layers(o, path, c, &L))) return st;
    return vc_mcfg_is(c, "jamba") ? moe_jamba(o, path, c) : VC_OK;
}

/* layers without rope: SmolLM3's no_rope_layers (1 = rope, 0 = none); EXAONE 4's global layers when the config
 * has a sliding window */
static vc_status parse_nope(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *nr = vc_json_member(o, "no_rope_layers"), *sw = vc_json_member(o, "sliding_window");
    for (int64_t l = 0; l < c->n_layer; l++) {
        if (vc_mcfg_is(c, "smollm3") && cJSON_IsArray(nr)) {
            const cJSON *e = cJSON_GetArrayItem(nr, (int)l);
            if (!cJSON_IsNumber(e)) return vc_fail(VC_ERR_FORMAT, "%s: no_rope_layers has no number for layer %lld", path,
                                                   (long long)l);
            c->nope[l] = e->valuedouble == 0;
        }
        if ((vc_mcfg_is_any(c, "exaone4 exaone_moe kolibri1") && cJSON_IsNumber(sw) && sw->valuedouble > 0) ||
            vc_mcfg_is_any(c, "cohere2 flint cohere2_moe"))
            c->nope[l] = c->window[l] == 0; /* only sliding layers use rope */
        if (vc_mcfg_is(c, "cohere2_moe") && !c->is_moe[l] && c->n_expert > 0 &&
            vc_mcfg_flag(o, "prefix_dense_sliding_window_pattern", 1) == 1)
            c->nope[l] = 0; /* its dense prefix layers use rope on full attention too (force_rope) */
        if (vc_mcfg_is_any(c, "afmoe lara_mini")) { /* rope on the sliding_attention layers only, whatever the window */
            const cJSON *t = cJSON_GetArrayItem(vc_json_member(o, "layer_types"), (int)l);
            c->nope[l] = t ? !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention")) : c->window[l] == 0;
        }
    }
    return VC_OK;
}

/* MiMo-V2-Flash: q/k heads of head_dim and values of v_head_dim scaled by attention_value_scale; sliding layers with twice
 * the kv heads and a sink per head; partial rope per layer type (each its own factor) */
static vc_status parse_mimo_v2(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    double vs;
    if ((st = vc_mcfg_int_any(o, "v_head_dim", c->head_dim, &c->v_head_dim, path)) ||
        (st = vc_mcfg_check_size(path, "v_head_dim", c->v_head_dim, 1, HEAD_MAX)) ||
        (st = vc_mcfg_num_any(o, "attention_value_scale", 1.0, &vs, path)))
        return st;
    if (!isfinite(vs) || vs == 0)
        return vc_fail(VC_ERR_FORMAT, "%s: attention_value_scale must be a finite non-zero number", path);
    c->v_scale = (float)vs;
    c->attn_sinks = 2;
    if (c->n_kv_head * 2 > HEAD_MAX || c->n_head % (2 * c->n_kv_head))
        return vc_fail(VC_ERR_FORMAT, "%s: sliding layers' 2 x %lld kv heads do not divide %lld heads", path,
                       (long long)c->n_kv_head, (long long)c->n_head);
    for (int64_t l = 0; l < c->n_layer; l++) c->layer_nkv[l] = c->window[l] ? (int32_t)(2 * c->n_kv_head) : 0;
    if (c->local_rope) c->rot_dim_local = (int)((double)c->head_dim * c->rope_local.partial_rotary_factor);
    if (c->rot_dim_local % 2 || c->rot_dim_local > c->head_dim)
        return vc_fail(VC_ERR_FORMAT, "%s: the sliding layers' rotary dimension %d does not fit head_dim %lld", path,
                       c->rot_dim_local, (long long)c->head_dim);
    return VC_OK;
}

/* Gemma 4's layers: full layers' head_dim and kv heads (per_layer_config as transformers 5 writes it, else
 * global_head_dim and, with attention_k_eq_v, num_global_key_value_heads), the last layer always full, the ropes'
 * rotated dims, and KV sharing: the last num_kv_shared_layers layers attend with the keys and values of the last
 * earlier layer of their type, and have double-wide MLPs with use_double_wide_mlp */
static vc_status gemma4_layers(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t ghd, gkv, shared;
    if ((st = vc_mcfg_int_any(o, "global_head_dim", 512, &ghd, path)) ||
        (st = vc_mcfg_int_any(o, "num_global_key_value_heads", 0, &gkv, path)) ||
        (st = vc_mcfg_int_any(o, "num_kv_shared_layers", 0, &shared, path)) ||
        (st = vc_mcfg_check_size(path, "global_head_dim", ghd, 1, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "num_global_key_value_heads", gkv, 0, HEAD_MAX)) ||
        (st = vc_mcfg_check_size(path, "num_kv_shared_layers", shared, 0, c->n_layer)))
        return st;
    int n = (int)c->n_layer;
    c->window[n - 1] = 0; /* transformers forces the last layer to full attention */
    const cJSON *plc = vc_json_member(o, "per_layer_config");
    if (plc && !cJSON_IsObject(plc)) return vc_fail(VC_ERR_FORMAT, "%s: key 'per_layer_config': expected an object", path);
    int32_t full_hd = 0;
    for (int l = 0; l < n; l++) {
        int64_t hd = 0, kv = 0;
        if (plc) {
            char key[24], ctx[600];
            snprintf(key, sizeof key, "%d", l);
            snprintf(ctx, sizeof ctx, "%s: per_layer_config.%d", path, l);
            const cJSON *e = vc_json_member(plc, key);
            if (e && !cJSON_IsObject(e)) return vc_fail(VC_ERR_FORMAT, "%s: expected an object", ctx);
            if ((st = vc_json_get_int(e, "head_dim", 0, &hd, ctx)) ||
                (st = vc_json_get_int(e, "num_key_value_heads", 0, &kv, ctx)) ||
                (st = vc_mcfg_check_size(ctx, "head_dim", hd, 0, HEAD_MAX)) ||
                (st = vc_mcfg_check_size(ctx, "num_key_value_heads", kv, 0, HEAD_MAX)))
                return st;
        } else if (!c->window[l]) {
            hd = ghd;
            kv = c->k_eq_v ? gkv : 0;
        }
        if (kv && c->n_head % kv)
            return vc_fail(VC_ERR_FORMAT, "%s: layer %d's %lld kv heads do not divide %lld heads", path, l, (long long)kv,
                           (long long)c->n_head);
        c->layer_hd[l] = (int32_t)hd;
        c->layer_nkv[l] = (int32_t)kv;
        if (!c->window[l]) full_hd = (int32_t)vc_cfg_head_dim(c, l);
    }
    /* the full layers' rope spans their heads (proportional rope rotates a fraction of the pairs itself) */
    double fr = c->rope.type == VC_ROPE_PROPORTIONAL ? 1.0 : c->rope.partial_rotary_factor;
    c->rot_dim = (int)((double)(full_hd ? full_hd : c->head_dim) * fr);
    c->rot_dim_local = (int)((double)c->head_dim * (c->local_rope ? c->rope_local.partial_rotary_factor : 1.0));
    if (c->rot_dim % 2 || c->rot_dim_local % 2 || c->rot_dim_local > c->head_dim)
        return vc_fail(VC_ERR_FORMAT, "%s: rotary dimensions %d / %d are not even within the heads", path, c->rot_dim,
                       c->rot_dim_local);
    int first = n - (int)shared, dbl = vc_mcfg_flag(o, "use_double_wide_mlp", 0);
    for (int l = first; l < n; l++) {
        int src = -1;
        for (int k = first - 1; k >= 0 && src < 0; k--)
            if (!c->window[k] == !c->window[l]) src = k;
        if (src < 0)
            return vc_fail(VC_ERR_FORMAT, "%s: layer %d shares keys and values (num_kv_shared_layers %lld) but no earlier "
                           "layer of its type computes them", path, l, (long long)shared);
        if (vc_cfg_head_dim(c, src) != vc_cfg_head_dim(c, l) || vc_cfg_kv_heads(c, src) != vc_cfg_kv_heads(c, l))
            return vc_fail(VC_ERR_FORMAT, "%s: layer %d shares layer %d's keys and values but its heads differ", path, l,
                           src);
        c->kv_src[l] = (int16_t)(src + 1);
        c->layer_inter[l] = dbl ? (int32_t)(2 * c->inter) : 0;
    }
    return VC_OK;
}

static vc_status parse_special_tokens(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t v;
    vc_status st;
    /* (Kimi-VL names its image token media_placeholder_token_id, Gemma 3 image_token_index) */
    const char *mm[5] = { "image_token_id media_placeholder_token_id image_token_index", "video_token_id",
                          "vision_start_token_id", "boi_token_index boi_token_id", "eoi_token_index eoi_token_id" };
    int *mm_id[5] = { &c->image_id, &c->video_id, &c->vstart_id, &c->boi_id, &c->eoi_id };
    for (int k = 0; k < 5; k++) {
        if ((st = vc_mcfg_int_any(o, mm[k], -1, &v, path))) return st;
        *mm_id[k] = v < 0 || v >= c->vocab ? -1 : (int)v; /* outside the vocabulary: no such tokens (text use) */
    }
    if ((st = vc_mcfg_int_any(o, "bos_token_id", -1, &v, path))) return st;
    if (v > 2147483647) return vc_fail(VC_ERR_FORMAT, "%s: bos_token_id %lld is out of range", path, (long long)v);
    if (v >= 0) c->bos_id = (int)v;
    if ((st = vc_mcfg_int_any(o, "pad_token_id", -1, &v, path))) return st;
    if (v > 2147483647) return vc_fail(VC_ERR_FORMAT, "%s: pad_token_id %lld is out of range", path, (long long)v);
    if (v >= 0) c->pad_id = (int)v;
    const cJSON *e = vc_json_member(o, "eos_token_id");
    if (e && cJSON_IsNumber(e)) {
        c->n_eos = 1;
        if ((st = vc_mcfg_json_to_int(e, "eos_token_id", 0, path, &c->eos_ids[0]))) return st;
    } else if (e && cJSON_IsArray(e)) {
        const cJSON *x;
        c->n_eos = 0;
        cJSON_ArrayForEach(x, e) if (cJSON_IsNumber(x) && c->n_eos < VC_MAX_EOS) {
            if ((st = vc_mcfg_json_to_int(x, "eos_token_id", 0, path, &c->eos_ids[c->n_eos]))) return st;
            c->n_eos++;
        }
    }
    return VC_OK;
}

/* compressed-tensors (llm-compressor's checkpoints; Kimi K2-Thinking's INT4): weights packed into int32s
 * (pack-quantized) or stored as int8 (int-quantized) or float8 (float-quantized), with a scale per tensor, row or
 * group, and zero points with asymmetric schemes; activation-ordered groups by their group index */
static vc_status parse_compressed_tensors(const cJSON *q, const char *path, vc_model_config *c) {
    const char *fmt = NULL;
    vc_status st = vc_json_get_str(q, "format", "", &fmt, path);
    if (st) return st;
    const cJSON *groups = vc_json_member(q, "config_groups"), *g;
    cJSON_ArrayForEach(g, groups) {
        const cJSON *w = vc_json_member(g, "weights"), *ao = vc_json_member(w, "actorder");
        const cJSON *gf = vc_json_member(g, "format");
        const char *f = cJSON_IsString(gf) ? gf->valuestring : fmt;
        if (!w || cJSON_IsNull(w)) continue;
        if (strcmp(f, "pack-quantized") && strcmp(f, "float-quantized") && strcmp(f, "int-quantized") &&
            strcmp(f, "nvfp4-pack-quantized") && strcmp(f, "mxfp4-pack-quantized"))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config (compressed-tensors) format '%s': verlc reads "
                           "pack-quantized, int-quantized, float-quantized, nvfp4-pack-quantized and mxfp4-pack-quantized "
                           "weights", path, f);
        int fp4 = !strcmp(f, "nvfp4-pack-quantized") ? 1 : !strcmp(f, "mxfp4-pack-quantized") ? 2 : 0;
        if (fp4) { /* 4-bit floats in groups of 16 (nvfp4) or 32 (mxfp4) */
            const cJSON *gs = vc_json_member(w, "group_size"), *nb = vc_json_member(w, "num_bits");
            const cJSON *ty = vc_json_member(w, "type");
            double want = fp4 == 1 ? 16 : 32;
            if ((nb && !(cJSON_IsNumber(nb) && nb->valuedouble == 4)) ||
                (gs && !(cJSON_IsNumber(gs) && gs->valuedouble == want)) ||
                (ty && !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "float"))) || (c->ct_nvfp4 && c->ct_nvfp4 != fp4))
                return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%s: %s is read as 4-bit floats "
                               "in groups of %g", path, g->string ? g->string : "?", f, want);
            c->ct_nvfp4 = fp4;
            continue;
        }
        /* GPTQ's activation ordering: "group" saves each column's group (name_g_idx, vc_ct_scale), "weight" and
         * "static" keep the groups in column order */
        if (ao && !cJSON_IsNull(ao) && !cJSON_IsFalse(ao) &&
            !(cJSON_IsString(ao) && (!strcmp(ao->valuestring, "static") || !strcmp(ao->valuestring, "group") ||
                                     !strcmp(ao->valuestring, "weight"))))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%s.weights.actorder: verlc reads "
                           "\"group\", \"weight\" and \"static\"", path, g->string ? g->string : "?");
        const cJSON *gs = vc_json_member(w, "group_size"), *nb = vc_json_member(w, "num_bits");
        if (cJSON_IsNumber(gs) && gs->valuedouble >= 1 && !c->ct_group) c->ct_group = (int)gs->valuedouble;
        int bits = cJSON_IsNumber(nb) ? (int)nb->valuedouble : 0;
        if (!strcmp(f, "pack-quantized") && (bits < 1 || bits > 8 || (c->ct_bits && c->ct_bits != bits)))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%s.weights.num_bits must be one "
                           "number in 1..8 for every packed group", path, g->string ? g->string : "?");
        if (!strcmp(f, "pack-quantized")) c->ct_bits = bits;
    }
    const cJSON *sp = vc_json_member(q, "sparsity_config"), *sf = vc_json_member(sp, "format");
    if (sp && !cJSON_IsNull(sp)) { /* 2:4 sparse weights stored as their values and a bitmask */
        const char *spf = cJSON_IsString(sf) ? sf->valuestring : "?";
        if (!strcmp(spf, "sparse-24-bitmask")) c->ct_sparse24 = 1;
        else if (strcmp(spf, "dense"))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config.sparsity_config.format '%s': verlc reads "
                           "sparse-24-bitmask and dense", path, spf);
        if (c->ct_sparse24 && (c->ct_bits || c->ct_nvfp4 || vc_json_member(groups, "group_0")))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config: sparse-24-bitmask over quantized weights is not "
                           "read (sparse bf16 / f32 weights are)", path);
    }
    if (c->ct_nvfp4 && c->ct_bits)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config (compressed-tensors) mixes 4-bit float groups with "
                       "pack-quantized ones, which verlc does not read together", path);
    c->ct_quant = 1;
    return VC_OK;
}

/* quantization_config: block-scaled FP8 (DeepSeek-V3, MiniMax-M2, Qwen3-FP8: weights in float8_e4m3 with a
 * weight_scale_inv per block) and MXFP4 (gpt-oss's experts) are dequantized on load; other methods refused */
static vc_status parse_quant(const cJSON *o, const char *path, vc_model_config *c) {
    c->fp8_block[0] = c->fp8_block[1] = 128;
    const cJSON *q = vc_json_member(o, "quantization_config");
    if (!q) return VC_OK;
    const char *m = NULL;
    vc_status st = vc_json_get_str(q, "quant_method", "", &m, path);
    if (st) return st;
    if (!strcmp(m, "mxfp4")) return VC_OK;
    if (!strcmp(m, "compressed-tensors")) return parse_compressed_tensors(q, path, c);
    if (strcmp(m, "fp8"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config.quant_method '%s': verlc loads plain, block-scaled "
                       "fp8, mxfp4 and compressed-tensors checkpoints (dequantized)", path, m);
    c->fp8_quant = 1;
    const cJSON *b = vc_json_member(q, "weight_block_size");
    if (!b) return VC_OK;
    if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(b, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(b, 1)))
        return vc_fail(VC_ERR_FORMAT, "%s: quantization_config.weight_block_size must be two numbers", path);
    for (int i = 0; i < 2; i++) {
        double v = cJSON_GetArrayItem(b, i)->valuedouble;
        if (!(v >= 1 && v <= 1 << 20) || v != (int)v)
            return vc_fail(VC_ERR_FORMAT, "%s: quantization_config.weight_block_size[%d] = %g", path, i, v);
        c->fp8_block[i] = (int)v;
    }
    return VC_OK;
}

/* architectures[0] *ForSequenceClassification / *ForTokenClassification: a score head instead of the LM
 * head, with len(id2label) or num_labels outputs (transformers' default: 2) */
static vc_status parse_labels(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *a = vc_json_member(o, "architectures");
    const cJSON *a0 = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    const char *name = cJSON_IsString(a0) ? a0->valuestring : "";
    if (!strstr(name, "ForSequenceClassification") && !strstr(name, "ForTokenClassification")) return VC_OK;
    const cJSON *ids = vc_json_member(o, "id2label");
    int64_t n = 2;
    if (cJSON_IsObject(ids)) n = cJSON_GetArraySize(ids);
    else {
        vc_status st = vc_mcfg_int_any(o, "num_labels", 2, &n, path);
        if (st) return st;
    }
    if (n <= 0) return vc_fail(VC_ERR_FORMAT, "%s: %s with %lld labels", path, name, (long long)n);
    c->n_labels = n;
    c->tied = 0;
    return VC_OK;
}

/* Image-text checkpoints whose text decoder verlc runs (Gemma 3 4B and up, Mistral 3, Llama 4, InternVL on text; GLM-4V
 * and the Qwen VL models also with images: multimodal ropes are the plain rope on text positions). The text model is
 * text_config
 * (Qwen2-VL's older configs: the top level), parsed as the text architecture it is; tied embeddings and special
 * tokens may sit at the top level. */
static const struct {
    const char *outer, *inner, *as; /* model_type, text_config's, the text architecture it is parsed as */
    int flat;                       /* the text keys may sit at the top level instead (transformers 4's Qwen2-VL) */
    int interleave;                 /* its M-RoPE always interleaves the axes (Qwen3-VL's rotary embedding) */
    const char *arch;               /* the tensor layout's architecture (NULL: outer's) */
} NESTED_TEXT[] = {
    { "gemma3", "gemma3_text", "gemma3_text", 0 }, { "gemma4", "gemma4_text", "gemma4_text", 0 },
    { "gemma4_unified", "gemma4_unified_text", "gemma4_unified_text", 0 },
    { "mistral3", "ministral3", "ministral3", 0 }, { "mistral3", "mistral", "mistral", 0 }, /* Ministral 3, Mistral Small 3 */
    { "llama4", "llama4_text", "llama4_text", 0 },
    { "internvl", "qwen2", "qwen2", 0 }, { "internvl", "qwen3", "qwen3", 0 }, { "internvl", "llama", "llama", 0 },
    { "glm4v", "glm4v_text", "glm4", 0 }, { "glm4v_moe", "glm4v_moe_text", "glm4_moe", 0 },
    /* GLM-4.6V (transformers' Glm46VConfig): GLM-4.1V's or GLM-4.5V's text model, by its text_config */
    { "glm46v", "glm4v_text", "glm4", 0, 0, "glm4v" }, { "glm46v", "glm4v_moe_text", "glm4_moe", 0, 0, "glm4v_moe" },
    { "qwen2_vl", "qwen2_vl_text", "qwen2", 1 }, { "qwen2_5_vl", "qwen2_5_vl_text", "qwen2", 1 },
    { "qwen3_vl", "qwen3_vl_text", "qwen3", 0, 1 }, { "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_moe", 0, 1 },
    { "qwen3_5", "qwen3_5_text", "qwen3_5_text", 0, 1 }, { "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_moe_text", 0, 1 },
    { "apertus1p5", "apertus1p5_text", "apertus1p5_text", 0 },
    { "kimi_k25", "kimi_k2", "deepseek_v3", 0 }, /* Kimi K2.5 / K2.6: Kimi K2's text model beside MoonViT (not read) */
    { "kimi_vl", "deepseek_v3", "deepseek_v3", 0 }, /* Kimi-VL: Moonlight's DeepSeek-V3 text model beside MoonViT */
};

/* the NESTED_TEXT entry of this config: its model_type, and its text_config's model_type where several fit */
static int nested_kind(const cJSON *o) {
    const cJSON *mt = vc_json_member(o, "model_type"), *imt = vc_json_member(vc_json_member(o, "text_config"), "model_type");
    int first = -1;
    for (int i = 0; mt && cJSON_IsString(mt) && i < (int)(sizeof NESTED_TEXT / sizeof NESTED_TEXT[0]); i++) {
        if (strcmp(mt->valuestring, NESTED_TEXT[i].outer)) continue;
        if (first < 0) first = i;
        if (cJSON_IsString(imt) && !strcmp(imt->valuestring, NESTED_TEXT[i].inner)) return i;
    }
    return first;
}

static vc_status parse_nested_text(const cJSON *o, const char *path, vc_model_config *c, int k) {
    const cJSON *tc = vc_json_member(o, "text_config");
    if ((!tc && !NESTED_TEXT[k].flat) || (tc && !cJSON_IsObject(tc)))
        return vc_fail(VC_ERR_MISSING, "%s: key 'text_config' is missing", path);
    char ctx[512];
    snprintf(ctx, sizeof ctx, tc ? "%s: text_config" : "%s", path);
    cJSON *copy = cJSON_Duplicate(tc ? tc : o, 1);
    if (!copy) return VC_ERR_NOMEM;
    const cJSON *imt = vc_json_member(copy, "model_type");
    const char *inner = imt && cJSON_IsString(imt) ? imt->valuestring : NESTED_TEXT[k].inner;
    if (tc && strcmp(inner, NESTED_TEXT[k].inner)) {
        vc_status e = vc_fail(VC_ERR_UNSUPPORTED, "%s: text_config.model_type '%s' is not %s's text model", path,
                              inner, NESTED_TEXT[k].outer);
        cJSON_Delete(copy);
        return e;
    }
    cJSON_DeleteItemFromObject(copy, "model_type");
    cJSON_AddStringToObject(copy, "model_type", NESTED_TEXT[k].as);
    if (!tc) cJSON_DeleteItemFromObject(copy, "vision_config");
    vc_status st = vc_config_parse_model(copy, ctx, c);
    cJSON_Delete(copy);
    if (st) return st;
    /* a quantization_config at the top (transformers reads it there) rather than in text_config */
    if (tc && vc_json_member(o, "quantization_config") && !vc_json_member(tc, "quantization_config") &&
        (st = parse_quant(o, path, c)))
        return st;
    c->arch = vc_arch_find(NESTED_TEXT[k].arch ? NESTED_TEXT[k].arch : NESTED_TEXT[k].outer);
    c->nested_text = 1;
    if (NESTED_TEXT[k].interleave) c->rope.mrope_interleaved = 1;
    snprintf(c->model_type, sizeof c->model_type, "%s", NESTED_TEXT[k].outer);
    if (!strcmp(c->model_type, "internvl")) c->image_open = "<img>", c->image_close = "</img>"; /* (the tokenizer's
                                                                    * start_image_token / end_image_token) */
    c->image_wrap = !strcmp(c->model_type, "internvl") || !strcmp(c->model_type, "gemma4");
    if (!strcmp(c->model_type, "mistral3")) c->image_open = "[IMG_BREAK]", c->image_close = "[IMG_END]", c->image_wrap = 2;
    if (!strcmp(c->model_type, "llama4")) /* (Llama4Processor's texts around each image's tiles) */
        c->image_open = "<|image_start|>", c->image_close = "<|image_end|>", c->image_wrap = 3;
    c->tied = vc_mcfg_flag(o, "tie_word_embeddings", c->tied);
    if (c->tied && c->out_vocab)
        return vc_fail(VC_ERR_FORMAT, "%s: tie_word_embeddings with text_config.output_vocab_size %lld: a pruned LM head "
                       "cannot be the embedding matrix", path, (long long)c->out_vocab);
    return parse_special_tokens(o, path, c);
}

/* the keys the norm epsilon is read from, the family's own first (transformers reads that one alone: a config that
 * also carries a stray rms_norm_eps, as one saved from a PhiConfig given one does, keeps Phi's layer_norm_eps) */
static const char *norm_eps_keys(const vc_model_config *c) {
    static const struct { const char *types, *keys; } OWN[] = {
        { "bloom codegen falcon falcon_mamba gpt2 gpt_bigcode gpt_neo gptj mamba mamba2 mpt nemotron_h",
          "layer_norm_epsilon rms_norm_eps layernorm_epsilon layer_norm_eps norm_epsilon norm_eps" },
        { "cohere cohere2 gpt_neox jais2 persimmon phi stablelm",
          "layer_norm_eps rms_norm_eps layer_norm_epsilon layernorm_epsilon norm_epsilon norm_eps" },
        { "lfm2 lfm2_moe lfm3 nemotron", "norm_eps rms_norm_eps layer_norm_epsilon layernorm_epsilon layer_norm_eps norm_epsilon" },
        { "starcoder2", "norm_epsilon rms_norm_eps layer_norm_epsilon layernorm_epsilon layer_norm_eps norm_eps" } };
    for (size_t i = 0; i < sizeof OWN / sizeof OWN[0]; i++)
        if (vc_mcfg_is_any(c, OWN[i].types)) return OWN[i].keys;
    return "rms_norm_eps layer_norm_epsilon layernorm_epsilon layer_norm_eps norm_epsilon norm_eps";
}

vc_status vc_config_parse_model(const cJSON *o, const char *path, vc_model_config *c) {
    int nk = nested_kind(o), ak = vc_mcfg_alias_kind(o);
    if (nk >= 0) return parse_nested_text(o, path, c, nk);
    if (ak >= 0) return vc_mcfg_parse_alias(o, path, c, ak);
    memset(c, 0, sizeof *c);
    c->bos_id = c->pad_id = -1;
    const char *mt = NULL;
    vc_status st = vc_json_req_str(o, "model_type", &mt, path);
    if (st) return st;
    snprintf(c->model_type, sizeof c->model_type, "%s", mt);
    c->arch = vc_arch_find(mt);
    if (!c->arch) return vc_fail(VC_ERR_UNSUPPORTED, "%s: model_type '%s' is not a supported architecture", path, mt);
    const char *dt = NULL;
    if ((st = vc_json_get_str(o, "torch_dtype", NULL, &dt, path))) return st;
    if (!dt && (st = vc_json_get_str(o, "dtype", "float32", &dt, path))) return st;
    if (vc_dtype_from_name(dt, &c->dtype) || (c->dtype != VC_F32 && c->dtype != VC_BF16 && c->dtype != VC_F16))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: dtype '%s' is not supported", path, dt);
    double eps;
    if ((st = vc_mcfg_int_any(o, "vocab_size padded_vocab_size", 0, &c->vocab, path)) ||
        (st = vc_mcfg_int_any(o, "hidden_size n_embd d_model n_embed", 0, &c->hidden, path)) ||
        (st = vc_mcfg_int_any(o, "num_hidden_layers num_layers n_layer n_layers", 0, &c->n_layer, path)) ||
        (st = vc_mcfg_int_any(o, "num_attention_heads n_head n_heads num_heads attention_heads", 0, &c->n_head, path)) ||
        (st = vc_mcfg_int_any(o, "intermediate_size ffn_hidden_size", 0, &c->inter, path)) ||
        (st = vc_mcfg_int_any(o, "max_position_embeddings seq_length n_positions max_seq_len", 4096, &c->max_pos, path)) ||
        (st = vc_mcfg_num_any(o, norm_eps_keys(c), 1e-6, &eps, path)))
        return st;
    if (c->n_layer <= 0 && vc_mcfg_is(c, "nemotron_h")) { /* transformers 5 writes its blocks' list without the count */
        const cJSON *t = vc_json_member(o, "layers_block_type"), *p = vc_json_member(o, "hybrid_override_pattern");
        c->n_layer = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : cJSON_IsString(p) ? (int64_t)strlen(p->valuestring) : 0;
    }
    if (c->n_head <= 0 && vc_mcfg_is_any(c, "mamba falcon_mamba mamba2")) c->n_head = 1; /* no attention */
    if (c->vocab <= 0 || c->hidden <= 0 || c->n_layer <= 0 || c->n_head <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s: vocab_size, hidden_size, num_hidden_layers and num_attention_heads must be positive", path);
    if (c->n_layer > VC_MAX_LAYERS) return vc_fail(VC_ERR_UNSUPPORTED, "%s: more than %d layers", path, VC_MAX_LAYERS);
    if ((st = vc_mcfg_check_size(path, "vocab_size", c->vocab, 1, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "hidden_size", c->hidden, 1, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "num_attention_heads", c->n_head, 1, HEAD_MAX)))
        return st;
    /* (families whose configs have no such keys ignore stray ones, as transformers does: GPT-NeoX is multi-head
     * whatever num_key_value_heads says) */
    int mha_only = vc_mcfg_is_any(c, "bloom codegen gpt2 gpt_neo gpt_neox gptj mpt opt");
    int plain_hd = vc_mcfg_is_any(c, "bloom codegen gpt2 gpt_bigcode gpt_neo gptj mpt opt");
    if ((st = vc_mcfg_int_any(o, mha_only ? "" : "num_key_value_heads", c->n_head, &c->n_kv_head, path)) ||
        (st = vc_mcfg_int_any(o, plain_hd ? "" : "head_dim kv_channels", c->hidden / c->n_head, &c->head_dim, path)))
        return st;
    if (c->n_kv_head <= 0 || c->n_head % c->n_kv_head)
        return vc_fail(VC_ERR_FORMAT, "%s: num_key_value_heads %lld does not divide num_attention_heads %lld", path,
                       (long long)c->n_kv_head, (long long)c->n_head);
    if (!(eps >= 0 && eps < 1e30))
        return vc_fail(VC_ERR_FORMAT, "%s: the norm epsilon must be a non-negative number, got %g", path, eps);
    c->norm_eps = (float)eps;
    if ((st = vc_mcfg_check_size(path, "head_dim", c->head_dim, 1, HEAD_MAX))) return st;
    c->tied = vc_mcfg_flag(o, "tie_word_embeddings",
                           vc_mcfg_is_any(c, "gemma gemma2 gemma3_text gemma4_text gpt2 gpt_bigcode opt falcon mpt bloom biogpt openai-gpt xglm "
                                             "gpt_neo vaultgemma lfm2 lfm3 lfm2_moe"));
    if ((st = vc_mcfg_parse_act(o, path, c)) || (st = vc_rope_parse(o, path, &c->rope))) return st;
    if ((st = vc_mcfg_rot_fraction(c, c->rope.partial_rotary_factor, "partial_rotary_factor", path))) return st;
    if (c->rope.type == VC_ROPE_PROPORTIONAL) c->rot_dim = (int)c->head_dim; /* it rotates its fraction itself */
    c->attn_scale = (float)(1.0 / sqrt((double)c->head_dim));
    if ((st = vc_mcfg_parse_family(o, path, c)) || (st = parse_windows(o, path, c)) || (st = parse_nope(o, path, c)) ||
        (st = parse_special_tokens(o, path, c)))
        return st;
    if (vc_mcfg_is(c, "gemma4_text") && (st = gemma4_layers(o, path, c))) return st;
    if (vc_mcfg_is(c, "mimo_v2_flash") && (st = parse_mimo_v2(o, path, c))) return st;
    if ((st = parse_labels(o, path, c)) || (st = parse_quant(o, path, c)) || (st = check_sizes(c, path))) return st;
    int64_t hd_max = c->head_dim;
    for (int l = 0; l < c->n_layer; l++) if (vc_cfg_head_dim(c, l) > hd_max) hd_max = vc_cfg_head_dim(c, l);
    if (c->rot_dim < 0 || c->rot_dim % 2 || c->rot_dim > hd_max)
        return vc_fail(VC_ERR_FORMAT, "%s: rotary dimension %d does not fit head_dim %lld", path, c->rot_dim,
                       (long long)hd_max);
    return VC_OK;
}

vc_status vc_config_load_model(const char *dir, vc_model_config *cfg) {
    char *path = vc_path_join(dir, "config.json");
    cJSON *root = NULL, *gen = NULL;
    vc_status st = path ? vc_json_load_file(path, &root) : VC_ERR_NOMEM;
    if (st == VC_OK) st = vc_config_parse_model(root, path, cfg);
    free(path);
    path = st == VC_OK ? vc_path_join(dir, "generation_config.json") : NULL;
    if (path && vc_file_exists(path)) {
        st = vc_json_load_file(path, &gen);
        if (st == VC_OK) st = parse_special_tokens(gen, path, cfg);
    }
    free(path);
    cJSON_Delete(root);
    cJSON_Delete(gen);
    return st;
}