/* config.json -> vc_model_config, for both config styles and each family's own key names. */
#include "arch.h"
#include <stdlib.h>
#include "tensor/backend.h"
#include "verlc/json.h"
#include <math.h>
#include <string.h>
#include <strings.h>

/* first present integer among space-separated keys */
static vc_status get_int_any(const cJSON *o, const char *keys, int64_t def, int64_t *out, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *k = strtok(buf, " "); k; k = strtok(NULL, " "))
        if (vc_json_member(o, k)) return vc_json_get_int(o, k, def, out, path);
    *out = def;
    return VC_OK;
}

static vc_status get_num_any(const cJSON *o, const char *keys, double def, double *out, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *k = strtok(buf, " "); k; k = strtok(NULL, " "))
        if (vc_json_member(o, k)) return vc_json_get_num(o, k, def, out, path);
    *out = def;
    return VC_OK;
}

static int flag(const cJSON *o, const char *key, int def) {
    const cJSON *v = vc_json_member(o, key);
    if (!v) return def;
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    return def;
}

static int is(const vc_model_config *c, const char *t) { return !strcmp(c->model_type, t); }

/* A JSON number that must become an int: integral and in [lo, INT_MAX]; converting anything else to int is
 * undefined (1e300) or wraps. */
static vc_status json_to_int(const cJSON *v, const char *key, int64_t lo, const char *path, int *out) {
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > 2147483647.0)
        return vc_fail(VC_ERR_FORMAT, "%s: key '%s': %.17g is not an integer in [%lld, 2147483647]", path, key, d,
                       (long long)lo);
    *out = (int)d;
    return VC_OK;
}

/* Rotary dimensions from a fraction of head_dim (partial_rotary_factor, rotary_pct): in [0, head_dim]. */
static vc_status rot_from_fraction(vc_model_config *c, double frac, const char *key, const char *path) {
    double r = (double)c->head_dim * frac;
    if (!isfinite(r) || r < 0 || r > (double)c->head_dim)
        return vc_fail(VC_ERR_FORMAT, "%s: %s %g gives no rotary dimension within head_dim %lld", path, key, frac,
                       (long long)c->head_dim);
    c->rot_dim = (int)r;
    return VC_OK;
}

/* Sizes the loader multiplies together: within these bounds a tensor's element count (at most three of
 * them, one being a layer or expert count) stays far inside int64, and each fits an int. Larger values in a
 * config.json are a mistake or an attack, never a model. */
#define DIM_MAX ((int64_t)1 << 24)   /* vocab, hidden, intermediate sizes, LoRA ranks */
#define HEAD_MAX ((int64_t)1 << 16)  /* heads, head dims */
static vc_status check_size(const char *path, const char *key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        return vc_fail(VC_ERR_FORMAT, "%s: %s is %lld, outside [%lld, %lld]", path, key, (long long)v, (long long)lo,
                       (long long)hi);
    return VC_OK;
}

static vc_status check_sizes(const vc_model_config *c, const char *path) {
    vc_status st;
    if ((st = check_size(path, "vocab_size", c->vocab, 1, DIM_MAX)) ||
        (st = check_size(path, "hidden_size", c->hidden, 1, DIM_MAX)) ||
        (st = check_size(path, "intermediate_size", c->inter, 0, DIM_MAX)) ||
        (st = check_size(path, "num_attention_heads", c->n_head, 1, HEAD_MAX)) ||
        (st = check_size(path, "num_key_value_heads", c->n_kv_head, 1, HEAD_MAX)) ||
        (st = check_size(path, "head_dim", c->head_dim, 1, HEAD_MAX)) ||
        (st = check_size(path, "max_position_embeddings", c->max_pos, 1, 2147483647)) ||
        (st = check_size(path, "moe_intermediate_size", c->moe_inter, 0, DIM_MAX)) ||
        (st = check_size(path, "shared_expert_intermediate_size", c->shared_inter, 0, DIM_MAX)) ||
        (st = check_size(path, "q_lora_rank", c->q_lora_rank, 0, DIM_MAX)) ||
        (st = check_size(path, "kv_lora_rank", c->kv_lora_rank, 0, DIM_MAX)) ||
        (st = check_size(path, "qk_nope_head_dim", c->qk_nope_dim, 0, HEAD_MAX)) ||
        (st = check_size(path, "qk_rope_head_dim", c->qk_rope_dim, 0, HEAD_MAX)) ||
        (st = check_size(path, "v_head_dim", c->v_head_dim, 0, HEAD_MAX)) ||
        (st = check_size(path, "num_labels", c->n_labels, 0, DIM_MAX)))
        return st;
    if (!isfinite(c->norm_eps) || c->norm_eps < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: the norm epsilon must be a non-negative number, got %g", path, c->norm_eps);
    return VC_OK;
}

static vc_status parse_act(const cJSON *o, const char *path, vc_model_config *c) {
    const char *a = NULL;
    vc_status st = vc_json_get_str(o, "hidden_activation", NULL, &a, path);
    if (st == VC_OK && !a) st = vc_json_get_str(o, "activation_function", NULL, &a, path); /* GPT-2 */
    if (st == VC_OK && !a) st = vc_json_get_str(o, "activation", NULL, &a, path); /* Falcon */
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

/* Apertus 1.5's output_vocab_size (null or vocab_size: the whole vocabulary): an LM head over the first ids only */
static vc_status parse_out_vocab(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *v = vc_json_member(o, "output_vocab_size");
    int64_t n = 0;
    vc_status st;
    if (!v || cJSON_IsNull(v)) return VC_OK;
    if ((st = vc_json_get_int(o, "output_vocab_size", 0, &n, path)) ||
        (st = check_size(path, "output_vocab_size", n, 1, c->vocab)))
        return st;
    c->out_vocab = n < c->vocab ? n : 0;
    if (c->out_vocab && c->tied)
        return vc_fail(VC_ERR_FORMAT, "%s: output_vocab_size %lld with tie_word_embeddings: a pruned LM head cannot be the "
                       "%lld-row embedding matrix", path, (long long)n, (long long)c->vocab);
    return VC_OK;
}

/* Laguna: query heads per layer (num_attention_heads_per_layer, each a multiple of the kv heads), per-head q/k norms,
 * the attention output times the softplus of g_proj: per head (gating true or "per-head"), else per channel */
static vc_status parse_laguna(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *nh = vc_json_member(o, "num_attention_heads_per_layer"), *gt = vc_json_member(o, "gating");
    if (flag(o, "moe_apply_router_weight_on_input", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: moe_apply_router_weight_on_input (the routing weights on the experts' "
                       "inputs; transformers refuses it too) is not built", path);
    if (nh && !cJSON_IsNull(nh) && (!cJSON_IsArray(nh) || cJSON_GetArraySize(nh) != (int)c->n_layer))
        return vc_fail(VC_ERR_FORMAT, "%s: num_attention_heads_per_layer must list %lld layers", path, (long long)c->n_layer);
    for (int64_t l = 0; cJSON_IsArray(nh) && l < c->n_layer; l++) {
        const cJSON *e = cJSON_GetArrayItem(nh, (int)l);
        int v = 0;
        vc_status st = cJSON_IsNumber(e) ? json_to_int(e, "num_attention_heads_per_layer", 1, path, &v)
                                         : vc_fail(VC_ERR_FORMAT, "%s: num_attention_heads_per_layer[%lld] is not a "
                                                   "number", path, (long long)l);
        if (st) return st;
        if (v > 65536 || v % c->n_kv_head)
            return vc_fail(VC_ERR_FORMAT, "%s: num_attention_heads_per_layer[%lld] = %d is not a multiple of "
                           "num_key_value_heads (%lld) up to 65536", path, (long long)l, v, (long long)c->n_kv_head);
        c->layer_nh[l] = v;
    }
    c->qk_norm = 1;
    c->attn_gate_softplus = 1;
    c->attn_out_gate = !gt || cJSON_IsTrue(gt) || (cJSON_IsString(gt) && !strcmp(gt->valuestring, "per-head")) ? 2 : 1;
    return VC_OK;
}

/* DBRX: attn_config (kv_n_heads, rope_theta, clip_qkv) and ffn_config (experts ffn_hidden_size wide, a softmax top-k
 * renormalised as moe_normalize_expert_weights 1 does); LayerNorms without bias, every layer MoE */
static vc_status parse_dbrx(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *ac = vc_json_member(o, "attn_config"), *fc = vc_json_member(o, "ffn_config");
    char actx[512], fctx[512];
    snprintf(actx, sizeof actx, "%s: attn_config", path);
    snprintf(fctx, sizeof fctx, "%s: ffn_config", path);
    if ((ac && !cJSON_IsObject(ac)) || (fc && !cJSON_IsObject(fc)))
        return vc_fail(VC_ERR_FORMAT, "%s: attn_config and ffn_config must be objects", path);
    static const cJSON empty = { 0 };
    if (!ac) ac = &empty;
    if (!fc) fc = &empty;
    vc_status st;
    int64_t kv = 1;
    double theta = 10000.0, clip = 0;
    const cJSON *cq = vc_json_member(ac, "clip_qkv"), *pn = vc_json_member(fc, "moe_normalize_expert_weights");
    const cJSON *act = vc_json_member(fc, "ffn_act_fn"), *an = cJSON_IsObject(act) ? vc_json_member(act, "name") : NULL;
    if ((st = get_int_any(ac, "kv_n_heads", 1, &kv, actx)) || (st = get_num_any(ac, "rope_theta", 10000.0, &theta, actx)) ||
        (st = get_int_any(fc, "ffn_hidden_size", 3584, &c->moe_inter, fctx)) ||
        (st = check_size(fctx, "ffn_hidden_size", c->moe_inter, 1, DIM_MAX)) ||
        (st = get_int_any(fc, "moe_num_experts", 4, &c->n_expert, fctx)) ||
        (st = get_int_any(fc, "moe_top_k", 1, &c->top_k, fctx)))
        return st;
    if (cq && !cJSON_IsNull(cq) && (!cJSON_IsNumber(cq) || !((clip = cq->valuedouble) > 0)))
        return vc_fail(VC_ERR_FORMAT, "%s: clip_qkv must be a positive number or null", actx);
    if (pn && !cJSON_IsNull(pn) && (!cJSON_IsNumber(pn) || pn->valuedouble != 1.0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: moe_normalize_expert_weights other than 1 (the sum) or null is not built",
                       fctx);
    if (an && (!cJSON_IsString(an) || strcmp(an->valuestring, "silu")))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: ffn_act_fn other than silu is not built", fctx);
    if (c->n_expert < 1 || c->n_expert > 1024 || c->top_k < 1 || c->top_k > c->n_expert)
        return vc_fail(VC_ERR_FORMAT, "%s: %lld experts with %lld per token is not a valid routing", fctx,
                       (long long)c->n_expert, (long long)c->top_k);
    if (!vc_json_member(o, "num_key_value_heads")) c->n_kv_head = kv;
    if (c->n_kv_head < 1 || c->n_head % c->n_kv_head)
        return vc_fail(VC_ERR_FORMAT, "%s: kv_n_heads %lld does not divide %lld heads", actx, (long long)c->n_kv_head,
                       (long long)c->n_head);
    if (!c->rope.theta_given) c->rope.theta = theta;
    c->clip_qkv = (float)clip;
    c->norm_topk = !pn || !cJSON_IsNull(pn);
    c->routed_scaling = 1.0f;
    c->norm_kind = VC_NORM_LAYER;
    c->norm_no_bias = 1;
    c->norm_eps = 1e-5f; /* nn.LayerNorm's default: DBRX's config names none */
    for (int64_t l = 0; l < c->n_layer; l++) c->is_moe[l] = 1;
    return VC_OK;
}

/* DeepSeek Sparse Attention's indexer: index_topk, index_n_heads, index_head_dim; GLM-5's indexer_types ("full" /
 * "shared" per layer), else index_topk_pattern ("F" / "S" per layer), else a full layer every index_topk_freq-th
 * from index_skip_topk_offset - 1 on (transformers' defaults: every layer) */
static vc_status parse_dsa(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int glm = is(c, "glm_moe_dsa");
    int64_t freq = 1, off = 2;
    if ((st = get_int_any(o, "index_topk", 2048, &c->dsa_topk, path)) ||
        (st = check_size(path, "index_topk", c->dsa_topk, 1, (int64_t)1 << 40)) ||
        (st = get_int_any(o, "index_n_heads", glm ? 32 : 64, &c->dsa_heads, path)) ||
        (st = check_size(path, "index_n_heads", c->dsa_heads, 1, 4096)) ||
        (st = get_int_any(o, "index_head_dim", 128, &c->dsa_dim, path)) ||
        (st = check_size(path, "index_head_dim", c->dsa_dim, 1, 65536)) ||
        (st = get_int_any(o, "index_topk_freq", 1, &freq, path)) ||
        (st = get_int_any(o, "index_skip_topk_offset", 2, &off, path)))
        return st;
    if (c->dsa_dim < c->qk_rope_dim)
        return vc_fail(VC_ERR_FORMAT, "%s: index_head_dim (%lld) is narrower than qk_rope_head_dim (%lld)", path,
                       (long long)c->dsa_dim, (long long)c->qk_rope_dim);
    if (!c->q_lora_rank)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: DeepSeek Sparse Attention's indexer reads the q latent: q_lora_rank must "
                       "be set", path);
    c->dsa_rope_interleaved = glm;
    const cJSON *types = vc_json_member(o, "indexer_types"), *pat = vc_json_member(o, "index_topk_pattern");
    int str = cJSON_IsString(pat);
    if (!glm) return VC_OK; /* DeepSeek-V3.2: an indexer in every layer */
    if ((types && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != (int)c->n_layer)) ||
        (!types && pat && !(str ? (int64_t)strlen(pat->valuestring) == c->n_layer
                                : cJSON_IsArray(pat) && cJSON_GetArraySize(pat) == (int)c->n_layer)))
        return vc_fail(VC_ERR_FORMAT, "%s: %s must list %lld layers", path, types ? "indexer_types" : "index_topk_pattern",
                       (long long)c->n_layer);
    for (int64_t l = 0; l < c->n_layer; l++) {
        int64_t k = l - off + 1 > 0 ? l - off + 1 : 0;
        int shared = freq > 1 && k % freq != 0;
        const cJSON *t = types ? cJSON_GetArrayItem(types, (int)l) : pat && !str ? cJSON_GetArrayItem(pat, (int)l) : NULL;
        const char *v = t && cJSON_IsString(t) ? t->valuestring : NULL;
        if (str) shared = pat->valuestring[l] == 'S';
        if (str ? !strchr("FS", pat->valuestring[l]) : t && (!v || (strcmp(v, "full") && strcmp(v, "shared"))))
            return vc_fail(VC_ERR_FORMAT, "%s: %s[%lld] must be \"full\" or \"shared\"%s", path,
                           types ? "indexer_types" : "index_topk_pattern", (long long)l, str ? " (F or S)" : "");
        if (v) shared = !strcmp(v, "shared");
        if (shared && l == 0)
            return vc_fail(VC_ERR_FORMAT, "%s: layer 0 cannot reuse a previous layer's DeepSeek Sparse Attention selection",
                           path);
        c->dsa_shared[l] = (uint8_t)shared;
    }
    return VC_OK;
}

/* sliding windows: layer_types (transformers 5), Gemma 2's alternation, Qwen2's max_window_layers */
static vc_status parse_windows(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t w = 0;
    if (is(c, "gpt_neo")) return VC_OK; /* its attention_layers, read with the family's keys */
    const cJSON *sw = vc_json_member(o, "sliding_window");
    if (sw && cJSON_IsNumber(sw)) {
        if (!(sw->valuedouble < 2147483648.0))
            return vc_fail(VC_ERR_FORMAT, "%s: key 'sliding_window': %.17g is out of range", path, sw->valuedouble);
        w = sw->valuedouble > 0 ? (int64_t)sw->valuedouble : 0;
    }
    const cJSON *types = vc_json_member(o, "layer_types");
    int use = w > 0;
    if (vc_json_member(o, "use_sliding_window")) use = use && flag(o, "use_sliding_window", 0);
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
        } else if (is(c, "cohere2_moe")) { /* the dense prefix's own pattern, then sliding_window_pattern */
            int64_t k = 0, pp = 1, sp = 4;
            if ((st = vc_json_get_int(o, "first_k_dense_replace", 0, &k, path)) ||
                (st = vc_json_get_int(o, "prefix_dense_sliding_window_pattern", 1, &pp, path)) ||
                (st = vc_json_get_int(o, "sliding_window_pattern", 4, &sp, path)))
                return st;
            if (pp < 1 || sp < 1) return vc_fail(VC_ERR_FORMAT, "%s: sliding window patterns must be >= 1", path);
            slide = l < k ? (l + 1) % pp != 0 : (l - k + 1) % sp != 0;
        } else if (is(c, "gemma2")) slide = l % 2 == 0;
        else if (is(c, "cwm")) slide = l % 4 != 0; /* CWM: every fourth layer full, from the first */
        else if (is(c, "kolibri1")) slide = (l + 1) % 5 != 0; /* Kolibri: every fifth layer full */
        else if (is(c, "flint")) /* Flint: full on the first two layers, every fourth from the second and the last */
            slide = !(l < 2 || l % 4 == 1 || l == c->n_layer - 1);
        else if (is(c, "gemma3_text") || is(c, "gemma4_text")) slide = (l + 1) % pattern != 0;
        else if (is(c, "qwen2") || is(c, "qwen2_moe") || is(c, "qwen3") || is(c, "qwen3_moe"))
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
    return get_int_any(o, "moe_topk num_experts_per_tok", 1, &c->top_k, path);
}

static vc_status parse_moe(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t v;
    if ((st = get_int_any(o, "num_experts num_local_experts n_routed_experts moe_num_experts", 0, &c->n_expert, path)))
        return st;
    st = is(c, "hunyuan_v1_moe") ? hunyuan_moe_keys(o, path, c)
                                 : get_int_any(o, "num_experts_per_tok moe_k num_experts_per_token", 0, &c->top_k, path);
    if (st) return st;
    if ((st = get_int_any(o, "moe_intermediate_size", c->inter, &c->moe_inter, path))) return st;
    if (is(c, "jamba") && c->n_expert <= 1) c->n_expert = 0; /* num_experts 1: dense layers throughout */
    if (c->n_expert <= 0) return VC_OK;
    if (c->n_expert > 1024 || c->top_k < 1 || c->top_k > c->n_expert)
        return vc_fail(VC_ERR_FORMAT, "%s: %lld experts with %lld per token is not a valid routing", path,
                       (long long)c->n_expert, (long long)c->top_k);
    c->routed_scaling = 1.0f;
    c->norm_topk = flag(o, "norm_topk_prob", is(c, "qwen3_next")); /* transformers' defaults */
    if (is(c, "mixtral") || is(c, "qwen3_5_moe_text") || is(c, "minimax")) c->norm_topk = 1;
    if (is(c, "gpt_oss")) c->norm_topk = c->expert_bias = 1; /* a softmax over the chosen logits */
    if (is(c, "minimax_m2")) /* DeepSeek-V3's router without groups: sigmoid, correction bias, renormalised */
        c->norm_topk = c->router_sigmoid = c->router_bias = 1;
    if ((st = get_int_any(o, "shared_expert_intermediate_size", 0, &c->shared_inter, path))) return st;
    c->shared_gate = c->shared_inter > 0;
    if (is(c, "llama4_text")) { /* sigmoid of the top-k logits scaling the experts' inputs; an ungated shared expert */
        if ((st = get_int_any(o, "intermediate_size", 8192, &c->moe_inter, path))) return st;
        c->router_sigmoid = c->route_scale_input = 1;
        c->norm_topk = 0;
        c->shared_inter = c->moe_inter;
        c->shared_gate = 0;
    }
    if (is(c, "hy_v3")) { /* sigmoid scores, a choice-only correction bias, renormalised and scaled; ungated shared */
        double rs;
        if ((st = vc_json_get_num(o, "router_scaling_factor", 1.0, &rs, path)) ||
            (st = get_int_any(o, "num_shared_experts", 1, &v, path)))
            return st;
        c->router_sigmoid = c->router_bias = c->norm_topk = 1;
        c->routed_scaling = (float)rs;
        c->shared_inter = v * c->moe_inter;
        c->shared_gate = 0;
    }
    if (is(c, "flint")) { /* the sigmoid of the logits' top-k, renormalised; an ungated shared expert */
        c->router_sigmoid = 1;
        c->norm_topk = flag(o, "norm_topk_prob", 1);
        c->shared_gate = 0;
    }
    if (is(c, "phimoe")) { /* the top-2 sparsemixer around router_jitter_noise (eval mode's routing) */
        double j;
        if ((st = get_num_any(o, "router_jitter_noise", 0.01, &j, path))) return st;
        if (!isfinite(j) || j < 0 || j > 1 || c->top_k != 2)
            return vc_fail(VC_ERR_FORMAT, "%s: PhiMoE's sparsemixer routes to 2 experts (num_experts_per_tok %lld) with a "
                           "router_jitter_noise in [0, 1] (%g)", path, (long long)c->top_k, j);
        c->router_sparsemixer = 1;
        c->router_jitter = (float)j;
    }
    if (is(c, "laguna")) { /* sigmoid scores of soft-capped logits, a choice-only correction bias, renormalised and
                            * scaled; an ungated shared expert */
        double rs, cap;
        if ((st = get_num_any(o, "moe_routed_scaling_factor", 1.0, &rs, path)) ||
            (st = get_num_any(o, "moe_router_logit_softcapping", 0.0, &cap, path)))
            return st;
        if (!isfinite(rs) || !isfinite(cap) || cap < 0)
            return vc_fail(VC_ERR_FORMAT, "%s: moe_routed_scaling_factor and moe_router_logit_softcapping (>= 0) must be "
                           "finite", path);
        c->router_sigmoid = c->router_bias = c->norm_topk = 1;
        c->routed_scaling = (float)rs;
        c->router_softcap = (float)cap;
        c->shared_gate = 0;
    }
    if (is(c, "kolibri1")) { /* experts chosen by logits + correction bias, weighted by the sigmoid of their logits;
                              * an ungated shared expert (shared_expert_intermediate_size) */
        c->router_sigmoid = c->router_bias = c->router_bias_logits = 1;
        c->shared_gate = 0;
    }
    if (is(c, "hunyuan_v1_moe")) { /* renormalised top-k; the shared MLP (ungated) as wide as the experts */
        c->norm_topk = 1;
        c->shared_inter = c->moe_inter;
        c->shared_gate = 0;
    }
    if (is(c, "granitemoe") || is(c, "granitemoeshared") || is(c, "granitemoehybrid") || is(c, "granitemoe_swa")) {
        /* a softmax over the top-k logits; an ungated shared MLP */
        c->norm_topk = 1;
        if ((st = get_int_any(o, "shared_intermediate_size", 0, &c->shared_inter, path))) return st;
        c->shared_gate = 0;
    }
    int64_t step = 1, first_dense = 0, freq = 1;
    if ((st = get_int_any(o, "decoder_sparse_step", 1, &step, path))) return st;
    if (is(c, "cohere2_moe")) { /* experts and shared experts as wide as intermediate_size; dense prefix layers */
        const char *fn = NULL, *comb = NULL;
        int64_t pre = 0;
        if ((st = vc_json_get_str(o, "expert_selection_fn", "softmax", &fn, path)) ||
            (st = vc_json_get_str(o, "shared_expert_combination_strategy", "average", &comb, path)) ||
            (st = get_int_any(o, "num_shared_experts", 0, &v, path)) ||
            (st = get_int_any(o, "prefix_dense_intermediate_size", c->inter, &pre, path)) ||
            (st = get_int_any(o, "first_k_dense_replace", 0, &first_dense, path)) ||
            (st = check_size(path, "prefix_dense_intermediate_size", pre, 1, DIM_MAX)))
            return st;
        if (strcmp(fn, "softmax") && strcmp(fn, "sigmoid"))
            return vc_fail(VC_ERR_FORMAT, "%s: expert_selection_fn '%s' is not softmax or sigmoid", path, fn);
        if (strcmp(comb, "sum") && strcmp(comb, "average"))
            return vc_fail(VC_ERR_FORMAT, "%s: shared_expert_combination_strategy '%s' is not sum or average", path, comb);
        c->moe_inter = c->inter;
        c->router_sigmoid = !strcmp(fn, "sigmoid"); /* a softmax over the top-k logits is the renormalised softmax */
        c->norm_topk = c->router_sigmoid ? flag(o, "norm_topk_prob", 1) : 1;
        c->shared_inter = v * c->inter;
        c->shared_gate = 0;
        if (v > 0 && !strcmp(comb, "average")) c->routed_scaling = c->shared_scale = 0.5f;
        for (int64_t l = 0; l < c->n_layer; l++) c->layer_inter[l] = (int32_t)pre; /* (MoE layers have no dense MLP) */
    }
    if (is(c, "lfm2_moe")) { /* sigmoid scores, a choice-only expert_bias, renormalised, routed_scaling_factor */
        double rs;
        c->router_sigmoid = 1;
        c->router_bias = flag(o, "use_expert_bias", 1);
        c->norm_topk = flag(o, "norm_topk_prob", 1);
        if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &rs, path)) ||
            (st = get_int_any(o, "num_dense_layers", 2, &first_dense, path)))
            return st;
        c->routed_scaling = (float)rs;
    }
    if (is(c, "afmoe")) { /* sigmoid scores, choice-only bias, renormalised, route_scale; ungated shared experts */
        double rs;
        c->router_sigmoid = c->router_bias = c->norm_topk = 1;
        if ((st = vc_json_get_num(o, "route_scale", 1.0, &rs, path)) ||
            (st = get_int_any(o, "num_shared_experts", 0, &v, path)) ||
            (st = get_int_any(o, "num_dense_layers", 1, &first_dense, path)))
            return st;
        c->routed_scaling = (float)rs;
        c->shared_inter = v * c->moe_inter;
        c->shared_gate = 0;
    }
    /* DeepSeek's MoE, and GLM-4.5's (glm4_moe: DeepSeek-V3's sigmoid router with a correction bias and groups) */
    int dsa = is(c, "deepseek_v32") || is(c, "glm_moe_dsa"); /* DeepSeek-V3's MoE, sparse attention beside */
    int v3_router = is(c, "deepseek_v3") || dsa || is(c, "glm4_moe") || is(c, "dots1") || is(c, "glm4_moe_lite") ||
                    is(c, "exaone_moe") || is(c, "solar_open") || /* Solar Open: GLM-4.5's MoE in every layer */
                    is(c, "mimo_v2_flash") || is(c, "axk1");
    /* Mistral 4: DeepSeek-V3's grouped routing (top-2 sums per group) over softmax scores, no correction bias */
    int mistral4 = is(c, "mistral4");
    if (!strncmp(c->model_type, "deepseek", 8) || v3_router || mistral4) {
        if ((st = get_int_any(o, "n_shared_experts num_shared_experts", 0, &v, path))) return st;
        c->shared_inter = v * c->moe_inter;
        double s;
        if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &s, path))) return st;
        c->routed_scaling = (float)s;
        if ((st = get_int_any(o, "first_k_dense_replace", dsa ? 3 : is(c, "axk1") ? 1 : 0, &first_dense, path))) return st;
        if ((st = get_int_any(o, "moe_layer_freq", 1, &freq, path))) return st;
        int64_t ng = 1, tg = 1;
        if ((st = get_int_any(o, "n_group", 1, &ng, path)) || (st = get_int_any(o, "topk_group", 1, &tg, path)))
            return st;
        const char *method = NULL, *scoring = NULL;
        if ((st = vc_json_get_str(o, "topk_method", v3_router || mistral4 ? "noaux_tc" : "greedy", &method, path)))
            return st;
        if ((st = vc_json_get_str(o, "scoring_func", v3_router ? "sigmoid" : "softmax", &scoring, path)))
            return st;
        c->router_sigmoid = !strcmp(scoring, "sigmoid");
        c->router_bias |= c->router_sigmoid; /* DeepSeek-V3's sigmoid router has its correction bias */
        if (is(c, "deepseek_v2")) c->norm_topk = 0; /* transformers' V2 router never renormalises */
        if (!strcmp(method, "group_limited_greedy") || !strcmp(method, "noaux_tc")) {
            c->n_group = (int)ng;
            c->topk_group = (int)tg;
            c->group_top2 = !strcmp(method, "noaux_tc");
            if (ng < 1 || c->n_expert % ng || tg > ng)
                return vc_fail(VC_ERR_FORMAT, "%s: n_group %lld / topk_group %lld do not divide %lld experts", path,
                               (long long)ng, (long long)tg, (long long)c->n_expert);
        } else if (strcmp(method, "greedy"))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: topk_method '%s' is not supported", path, method);
    }
    if (is(c, "kimi_linear")) { /* DeepSeek-V3's sigmoid router with groups; shared experts; dense first layers */
        double rs;
        int64_t ng = 1, tg = 1;
        if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &rs, path)) ||
            (st = get_int_any(o, "num_expert_group n_group", 1, &ng, path)) ||
            (st = get_int_any(o, "topk_group", 1, &tg, path)) ||
            (st = get_int_any(o, "num_shared_experts n_shared_experts", 1, &v, path)) ||
            (st = get_int_any(o, "first_k_dense_replace", 1, &first_dense, path)) ||
            (st = get_int_any(o, "moe_layer_freq", 1, &freq, path)))
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
        c->norm_topk = flag(o, "moe_renormalize", flag(o, "norm_topk_prob", 1));
        c->routed_scaling = (float)rs;
        c->n_group = ng > 1 ? (int)ng : 0;
        c->topk_group = (int)tg;
        c->shared_inter = v * c->moe_inter;
    }
    if (is(c, "nemotron_h")) { /* DeepSeek-V3's sigmoid router; ungated shared experts; its "moe" blocks as listed */
        double rs;
        int64_t ng = 1, tg = 1;
        if ((st = vc_json_get_num(o, "routed_scaling_factor", 1.0, &rs, path)) ||
            (st = get_int_any(o, "n_group", 1, &ng, path)) || (st = get_int_any(o, "topk_group", 1, &tg, path)) ||
            (st = get_int_any(o, "moe_shared_expert_intermediate_size", 0, &v, path)) ||
            (st = get_int_any(o, "n_shared_experts", 1, &freq, path)))
            return st;
        if (ng < 1 || c->n_expert % ng || tg > ng)
            return vc_fail(VC_ERR_FORMAT, "%s: n_group %lld / topk_group %lld do not divide %lld experts", path,
                           (long long)ng, (long long)tg, (long long)c->n_expert);
        c->router_sigmoid = c->router_bias = c->group_top2 = 1;
        c->norm_topk = flag(o, "norm_topk_prob", 1);
        c->routed_scaling = (float)rs;
        c->n_group = ng > 1 ? (int)ng : 0;
        c->topk_group = (int)tg;
        c->shared_inter = freq > 0 ? v * freq : 0;
        c->shared_gate = 0;
        int any = 0;
        for (int64_t l = 0; l < c->n_layer; l++) any |= c->is_moe[l];
        if (!any) c->n_expert = 0; /* a dense model's config still names experts */
        return VC_OK;
    }
    int64_t ms = 0, me = c->n_layer - 1, mi = 1; /* ERNIE 4.5: MoE layers from moe_layer_start_index to _end_index */
    if (is(c, "ernie4_5_moe")) {
        c->norm_topk = c->router_bias = 1; /* weights / max(sum, moe_norm_min): the sum for any real router */
        if ((st = get_int_any(o, "n_shared_experts moe_num_shared_experts", 0, &v, path)) ||
            (st = get_int_any(o, "moe_layer_start_index", 0, &ms, path)) ||
            (st = get_int_any(o, "moe_layer_end_index", c->n_layer - 1, &me, path)) ||
            (st = get_int_any(o, "moe_layer_interval", 1, &mi, path)))
            return st;
        c->shared_inter = v * c->moe_inter;
        if (me < 0) me = c->n_layer - 1;
    }
    const cJSON *only = vc_json_member(o, "mlp_only_layers");
    const cJSON *types = vc_json_member(o, "mlp_layer_types"); /* GLM-4.7-Flash: "dense" / "sparse" per layer */
    if (types && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != (int)c->n_layer))
        return vc_fail(VC_ERR_FORMAT, "%s: mlp_layer_types must list %lld layers", path, (long long)c->n_layer);
    for (int64_t l = 0; l < c->n_layer; l++) {
        int moe = (l + 1) % (step > 0 ? step : 1) == 0 && l >= first_dense && l % (freq > 0 ? freq : 1) == 0;
        if (is(c, "ernie4_5_moe")) moe = (l + 1) % (mi > 0 ? mi : 1) == 0 && l >= ms && l <= me;
        if (types) {
            const cJSON *t = cJSON_GetArrayItem(types, (int)l);
            if (!cJSON_IsString(t) || (strcmp(t->valuestring, "dense") && strcmp(t->valuestring, "sparse")))
                return vc_fail(VC_ERR_FORMAT, "%s: mlp_layer_types[%lld] must be \"dense\" or \"sparse\"", path, (long long)l);
            moe = !strcmp(t->valuestring, "sparse");
        } else if (is(c, "glm4_moe_lite") || is(c, "mimo_v2_flash") || is(c, "hy_v3") || is(c, "laguna"))
            moe = l > 0; /* transformers' default: the first layer dense */
        if (is(c, "llama4_text")) { /* moe_layers, else every interleave_moe_layer_step-th layer */
            const cJSON *ml = vc_json_member(o, "moe_layers"), *e;
            int64_t st2 = 1;
            if (!cJSON_IsArray(ml) && (st = get_int_any(o, "interleave_moe_layer_step", 1, &st2, path))) return st;
            moe = 0;
            if (cJSON_IsArray(ml)) { cJSON_ArrayForEach(e, ml) if (cJSON_IsNumber(e) && e->valuedouble == (double)l) moe = 1; }
            else moe = st2 > 0 && l % st2 == st2 - 1;
        }
        if (is(c, "flint") && !only && l < 2) moe = 0; /* Flint: dense first two layers by default */
        if (only && cJSON_IsArray(only)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, only) if (cJSON_IsNumber(e) && e->valuedouble == (double)l) moe = 0;
        }
        if (is(c, "kolibri1")) moe = 1; /* every layer, whatever mlp_only_layers / decoder_sparse_step say */
        c->is_moe[l] = (uint8_t)moe;
    }
    if (is(c, "jamba")) { /* experts on every expert_layer_period-th layer from expert_layer_offset; softmax top-k */
        int64_t ep = 2, eo = 1;
        if ((st = get_int_any(o, "expert_layer_period", 2, &ep, path)) ||
            (st = get_int_any(o, "expert_layer_offset", 1, &eo, path)))
            return st;
        if (ep < 1 || eo < 0 || eo >= ep)
            return vc_fail(VC_ERR_FORMAT, "%s: expert_layer_offset %lld must be below expert_layer_period %lld", path,
                           (long long)eo, (long long)ep);
        for (int64_t l = 0; l < c->n_layer; l++) c->is_moe[l] = (uint8_t)(l % ep == eo);
    }
    return VC_OK;
}

static vc_status parse_mla(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    c->mla = 1;
    if ((st = get_int_any(o, "q_lora_rank", 0, &c->q_lora_rank, path)) ||
        (st = vc_json_req_int(o, "kv_lora_rank", &c->kv_lora_rank, path)) ||
        (st = vc_json_req_int(o, "qk_nope_head_dim", &c->qk_nope_dim, path)) ||
        (st = vc_json_req_int(o, "qk_rope_head_dim", &c->qk_rope_dim, path)) ||
        (st = vc_json_req_int(o, "v_head_dim", &c->v_head_dim, path)))
        return st;
    c->n_kv_head = c->n_head;
    c->head_dim = c->qk_nope_dim + c->qk_rope_dim;
    c->rot_dim = (int)c->qk_rope_dim;
    c->rope_interleaved = flag(o, "rope_interleave", !is(c, "minicpm3")); /* MiniCPM3: rotate-half pairs */
    double ms = is(c, "deepseek_v3") || is(c, "mistral4") || is(c, "minicpm3") || is(c, "deepseek_v32") ||
                is(c, "glm_moe_dsa") ? vc_rope_softmax_mscale(&c->rope) : 1.0;
    c->attn_scale = (float)(1.0 / sqrt((double)c->head_dim) * ms);
    return VC_OK;
}

/* Gemma 3: q/k norms, and sliding layers with their own rope (local base 10000, never scaled; global
 * base 1e6 when the config names none) */
static vc_status parse_gemma3(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = 1;
    c->local_rope = 1;
    if (!vc_json_member(o, "rope_parameters")) {
        if (!c->rope.theta_given) c->rope.theta = 1e6;
        vc_rope *r = &c->rope_local;
        memset(r, 0, sizeof *r);
        r->factor = r->attention_factor = r->partial_rotary_factor = 1.0;
        r->beta_fast = 32;
        r->beta_slow = 1;
        r->truncate = 1;
        r->max_position_embeddings = c->rope.max_position_embeddings;
        r->theta_given = 1;
        vc_status st = vc_json_get_num(o, "rope_local_base_freq", 10000.0, &r->theta, path);
        if (!st && !(r->theta > 0)) st = vc_fail(VC_ERR_FORMAT, "%s: rope_local_base_freq must be positive", path);
        return st;
    }
    return vc_rope_parse_layer(o, path, "sliding_attention", &c->rope_local);
}

/* layers without rope: SmolLM3's no_rope_layers (1 = rope, 0 = none); EXAONE 4's global layers when the config
 * has a sliding window */
static vc_status parse_nope(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *nr = vc_json_member(o, "no_rope_layers"), *sw = vc_json_member(o, "sliding_window");
    for (int64_t l = 0; l < c->n_layer; l++) {
        if (is(c, "smollm3") && cJSON_IsArray(nr)) {
            const cJSON *e = cJSON_GetArrayItem(nr, (int)l);
            if (!cJSON_IsNumber(e)) return vc_fail(VC_ERR_FORMAT, "%s: no_rope_layers has no number for layer %lld", path,
                                                   (long long)l);
            c->nope[l] = e->valuedouble == 0;
        }
        if (((is(c, "exaone4") || is(c, "exaone_moe") || is(c, "kolibri1")) && cJSON_IsNumber(sw) && sw->valuedouble > 0) ||
            is(c, "cohere2") || is(c, "flint") ||
            is(c, "cohere2_moe"))
            c->nope[l] = c->window[l] == 0; /* only sliding layers use rope */
        if (is(c, "cohere2_moe") && !c->is_moe[l] && c->n_expert > 0 && flag(o, "prefix_dense_sliding_window_pattern", 1) == 1)
            c->nope[l] = 0; /* its dense prefix layers use rope on full attention too (force_rope) */
        if (is(c, "afmoe")) { /* rope on the sliding_attention layers only, whatever the window */
            const cJSON *t = cJSON_GetArrayItem(vc_json_member(o, "layer_types"), (int)l);
            c->nope[l] = t ? !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention")) : c->window[l] == 0;
        }
    }
    return VC_OK;
}

/* dropout rates a config sets (HF applies them in training mode): verlc computes without dropout, as
 * transformers in eval mode; said once per model */
static void note_dropout(const cJSON *o, const char *path) {
    static const char *const KEYS[] = { "attention_dropout", "hidden_dropout", "residual_dropout", "resid_pdrop",
                                        "embd_pdrop", "attn_pdrop", "hidden_dropout_prob", "attention_probs_dropout_prob" };
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) {
        const cJSON *v = vc_json_member(o, KEYS[i]);
        if (cJSON_IsNumber(v) && v->valuedouble > 0) {
            vc_info("%s: %s=%g: verlc trains without dropout (transformers in eval mode)", path, KEYS[i], v->valuedouble);
            return;
        }
    }
}

/* gpt-oss: attention sinks, biases on attention, router and experts, its clamped SwiGLU (fixed constants) */
static vc_status parse_gpt_oss(const cJSON *o, const char *path, vc_model_config *c) {
    double alpha, limit;
    vc_status st;
    if ((st = get_num_any(o, "swiglu_alpha", 1.702, &alpha, path)) || (st = get_num_any(o, "swiglu_limit", 7.0, &limit, path)))
        return st;
    if (fabs(alpha - 1.702) > 1e-6 || fabs(limit - 7.0) > 1e-6)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: swiglu_alpha %g / swiglu_limit %g: verlc computes gpt-oss's SwiGLU with "
                       "its released constants 1.702 and 7 only", path, alpha, limit);
    c->act = VC_ACT_OAI_GLU;
    c->attn_sinks = 1;
    c->qkv_bias = c->o_bias = flag(o, "attention_bias", 1);
    return VC_OK;
}

/* Llama 4's text model: NoPE layers (no_rope_layers[l] == 0) with temperature-tuned queries, rope layers with
 * chunked attention and weightless q/k norms, GPT-J rope pairs, the dense layers' own width */
static vc_status parse_llama4(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t mlp = 0, chunk = 0, every = 4;
    double scale = 0.1, fl = 8192;
    if ((st = get_int_any(o, "intermediate_size_mlp", 16384, &mlp, path)) ||
        (st = get_int_any(o, "no_rope_layer_interval", 4, &every, path)) ||
        (st = get_num_any(o, "attn_scale", 0.1, &scale, path)) || (st = get_num_any(o, "floor_scale", 8192, &fl, path)))
        return st;
    const cJSON *cs = vc_json_member(o, "attention_chunk_size");
    if (cs && !cJSON_IsNull(cs) && (st = get_int_any(o, "attention_chunk_size", 0, &chunk, path))) return st;
    if (!cs) chunk = 8192;
    if (mlp <= 0 || every <= 0 || chunk < 0 || chunk > 1 << 30 || !(fl >= 1))
        return vc_fail(VC_ERR_FORMAT, "%s: intermediate_size_mlp, no_rope_layer_interval, attention_chunk_size or "
                       "floor_scale out of range", path);
    c->inter = mlp;
    c->rope_interleaved = 1;
    c->qk_l2norm = flag(o, "use_qk_norm", 1);
    if (flag(o, "attn_temperature_tuning", 1)) c->q_temp_scale = (float)scale, c->q_temp_floor = (float)fl;
    const cJSON *nr = vc_json_member(o, "no_rope_layers"), *types = vc_json_member(o, "layer_types");
    for (int64_t l = 0; l < c->n_layer; l++) {
        const cJSON *e = cJSON_IsArray(nr) && cJSON_GetArraySize(nr) > 0 ? cJSON_GetArrayItem(nr, (int)l) : NULL;
        if (e && !cJSON_IsNumber(e))
            return vc_fail(VC_ERR_FORMAT, "%s: no_rope_layers has no number for layer %lld", path, (long long)l);
        int rope = e ? e->valuedouble != 0 : (l + 1) % every != 0; /* 1: the layer uses rope */
        c->nope[l] = !rope;
        const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL;
        int chunked = t && cJSON_IsString(t) ? !strcmp(t->valuestring, "chunked_attention") : rope && chunk > 0;
        c->chunk[l] = chunked ? (int)chunk : 0;
    }
    return VC_OK;
}

/* layer_types[l] of a linear-attention hybrid: *lin 1 ("linear_attention"), 0 ("full_attention"), -1 (no list) */
static vc_status linear_type(const cJSON *types, int64_t l, const char *path, int *lin) {
    const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL;
    *lin = -1;
    if (types && (!cJSON_IsString(t) || (strcmp(t->valuestring, "linear_attention") &&
                                         strcmp(t->valuestring, "full_attention"))))
        return vc_fail(VC_ERR_FORMAT, "%s: layer_types[%lld] must be \"linear_attention\" or \"full_attention\"", path,
                       (long long)l);
    if (t) *lin = !strcmp(t->valuestring, "linear_attention");
    return VC_OK;
}

/* Gated DeltaNet layers (layer_types, else every full_attention_interval-th layer full attention) with their head
 * counts and conv width */
static vc_status parse_gdn_layers(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t every = 4, conv = 4;
    if ((st = get_int_any(o, "linear_num_key_heads", 16, &c->lin_nk, path)) ||
        (st = get_int_any(o, "linear_num_value_heads", 32, &c->lin_nv, path)) ||
        (st = get_int_any(o, "linear_key_head_dim", 128, &c->lin_dk, path)) ||
        (st = get_int_any(o, "linear_value_head_dim", 128, &c->lin_dv, path)) ||
        (st = get_int_any(o, "linear_conv_kernel_dim", 4, &conv, path)) ||
        (st = get_int_any(o, "full_attention_interval", 4, &every, path)))
        return st;
    if (c->lin_nk < 1 || c->lin_nk > HEAD_MAX || c->lin_nv < 1 || c->lin_nv > HEAD_MAX || c->lin_nv % c->lin_nk ||
        c->lin_dk < 1 || c->lin_dk > HEAD_MAX || c->lin_dv < 1 || c->lin_dv > HEAD_MAX || conv < 1 || conv > 64 ||
        every < 1)
        return vc_fail(VC_ERR_FORMAT, "%s: linear_num_key_heads %lld, linear_num_value_heads %lld (a multiple), head dims "
                       "%lld / %lld, linear_conv_kernel_dim %lld (1..64) or full_attention_interval out of range", path,
                       (long long)c->lin_nk, (long long)c->lin_nv, (long long)c->lin_dk, (long long)c->lin_dv,
                       (long long)conv);
    if (c->act != VC_ACT_SILU)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: hidden_act: Gated DeltaNet layers are built with silu", path);
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    const cJSON *types = vc_json_member(o, "layer_types");
    for (int64_t l = 0; l < c->n_layer; l++) {
        int lin;
        if ((st = linear_type(types, l, path, &lin))) return st;
        c->linear[l] = (uint8_t)(lin >= 0 ? lin : (l + 1) % every != 0);
        c->n_linear += c->linear[l];
    }
    return VC_OK;
}

/* Qwen3-Next and Qwen3.5: Gated DeltaNet layers; (1 + w) RMSNorms, per-head q/k norms, gated attention output */
static vc_status parse_linear(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = parse_gdn_layers(o, path, c);
    c->norm_offset = 1.0f;
    c->qk_norm = c->attn_out_gate = 1;
    return st;
}

/* OLMo-hybrid: Gated DeltaNet layers (q, k, v, a, b and the output gate projected apart; beta doubled with
 * linear_allow_neg_eigval; the gated norm's eps FLA's 1e-5) normed before their sublayers, among OLMo 2's attention
 * layers (norms after the sublayers, q and k normed over all their heads), without rope unless rope_parameters give a
 * rope_theta */
static vc_status parse_olmo_hybrid(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = parse_gdn_layers(o, path, c);
    if (st) return st;
    int n_full = 0;
    for (int64_t l = 0; l < c->n_layer; l++) n_full += !c->linear[l];
    if (!c->n_linear || !n_full)
        return vc_fail(VC_ERR_FORMAT, "%s: layer_types: OLMo-hybrid needs linear_attention and full_attention layers", path);
    c->sandwich_norm = c->no_pre_norm = c->qk_norm = c->qk_norm_full = 1;
    c->lin_sep_qkv = c->lin_pre_norm = 1;
    c->lin_beta_scale = flag(o, "linear_allow_neg_eigval", 1) ? 2.0f : 1.0f;
    c->lin_norm_eps = 1e-5f;
    const cJSON *rp = vc_json_member(o, "rope_parameters");
    if (!rp) rp = vc_json_member(o, "rope_scaling");
    int rope = cJSON_IsObject(rp) && cJSON_IsNumber(vc_json_member(rp, "rope_theta"));
    for (int64_t l = 0; l < c->n_layer; l++) c->nope[l] = !rope;
    return VC_OK;
}

/* Kimi-Linear: Kimi Delta Attention layers (layer_types, or the hub's linear_attn_config with 1-based kda_layers and
 * full_attn_layers; else every 4th layer from the 5th... as transformers: layers i > 0 with i % 4 == 0 full) of
 * num_heads heads of head_dim (keys and values alike), q / k / v convolved apart, beside MLA layers without rope */
static vc_status parse_kimi_linear(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *la = vc_json_member(o, "linear_attn_config"), *types = vc_json_member(o, "layer_types");
    int64_t nh = 32, hd = 128, conv = 4;
    vc_status st;
    if ((st = get_int_any(o, "linear_num_heads", 32, &nh, path)) || (st = get_int_any(o, "linear_head_dim", 128, &hd, path)) ||
        (st = get_int_any(o, "linear_conv_kernel_dim", 4, &conv, path)))
        return st;
    if (cJSON_IsObject(la) && ((st = get_int_any(la, "num_heads", nh, &nh, path)) ||
                               (st = get_int_any(la, "head_dim", hd, &hd, path)) ||
                               (st = get_int_any(la, "short_conv_kernel_size", conv, &conv, path))))
        return st;
    if (nh < 1 || nh > HEAD_MAX || hd < 1 || hd > HEAD_MAX || conv < 1 || conv > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: linear attention heads %lld of %lld or conv kernel %lld (1..64) out of range",
                       path, (long long)nh, (long long)hd, (long long)conv);
    const cJSON *kda = cJSON_IsObject(la) ? vc_json_member(la, "kda_layers") : NULL, *e;
    for (int64_t l = 0; l < c->n_layer; l++) {
        int lin;
        if ((st = linear_type(types, l, path, &lin))) return st;
        int listed = lin >= 0;
        if (!listed) lin = !(l && l % 4 == 0);
        if (!listed && cJSON_IsArray(kda)) {
            lin = 0;
            cJSON_ArrayForEach(e, kda) if (cJSON_IsNumber(e) && e->valuedouble == (double)(l + 1)) lin = 1;
        }
        c->linear[l] = (uint8_t)lin;
        c->n_linear += lin;
        c->nope[l] = 1; /* MLA without rope (mla_use_nope) */
    }
    if (c->act != VC_ACT_SILU) return vc_fail(VC_ERR_UNSUPPORTED, "%s: hidden_act: Kimi Delta Attention is built with silu", path);
    c->lin_kind = VC_LIN_KDA;
    c->lin_nk = c->lin_nv = nh;
    c->lin_dk = c->lin_dv = hd;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_gate_act = VC_ACT_SIGMOID;
    c->lin_sep_qkv = 1;
    return VC_OK;
}

/* MiniMax-Text-01: lightning attention layers (layer_types, or the hub's attn_type_list: 0 lightning, 1 softmax;
 * else transformers' default of odd layers) of the attention heads' count and width, no conv; residuals of the
 * normed input with alpha / beta factors (transformers' names, or the hub's layernorm_*_alpha / _beta) */
static vc_status parse_minimax(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *types = vc_json_member(o, "layer_types"), *atl = vc_json_member(o, "attn_type_list");
    for (int64_t l = 0; l < c->n_layer; l++) {
        const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL;
        const cJSON *a = !types && cJSON_IsArray(atl) ? cJSON_GetArrayItem(atl, (int)l) : NULL;
        if ((types && (!cJSON_IsString(t) || (strcmp(t->valuestring, "linear_attention") &&
                                              strcmp(t->valuestring, "full_attention")))) ||
            (!types && cJSON_IsArray(atl) && !cJSON_IsNumber(a)))
            return vc_fail(VC_ERR_FORMAT, "%s: layer_types / attn_type_list has no valid entry for layer %lld", path,
                           (long long)l);
        c->linear[l] = t ? !strcmp(t->valuestring, "linear_attention") : a ? a->valuedouble == 0 : (l + 1) % 2 == 0;
        c->n_linear += c->linear[l];
    }
    if (!flag(o, "postnorm", 1))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: postnorm false: verlc builds MiniMax-Text-01's residuals of the normed "
                       "input, as transformers", path);
    static const char *const KEYS[6] = { "full_attn_alpha_factor layernorm_full_attention_alpha",
                                         "full_attn_beta_factor layernorm_full_attention_beta",
                                         "linear_attn_alpha_factor layernorm_linear_attention_alpha",
                                         "linear_attn_beta_factor layernorm_linear_attention_beta",
                                         "mlp_alpha_factor layernorm_mlp_alpha", "mlp_beta_factor layernorm_mlp_beta" };
    double v[6];
    vc_status st;
    for (int i = 0; i < 6; i++)
        if ((st = get_num_any(o, KEYS[i], 1.0, &v[i], path))) return st;
    c->norm_res.on = 1;
    c->norm_res.attn_alpha[0] = (float)v[0], c->norm_res.attn_beta[0] = (float)v[1];
    c->norm_res.attn_alpha[1] = (float)v[2], c->norm_res.attn_beta[1] = (float)v[3];
    c->norm_res.mlp_alpha = (float)v[4], c->norm_res.mlp_beta = (float)v[5];
    c->lin_kind = VC_LIN_LIGHTNING;
    c->lin_nk = c->lin_nv = c->n_head;
    c->lin_dk = c->lin_dv = c->head_dim;
    c->lin_conv = 1; /* no conv, no conv state */
    c->lin_act = c->act;
    c->lin_norm_eps = 1e-6f; /* its norm is built without the config's eps */
    c->lin_gate_act = VC_ACT_SIGMOID;
    return VC_OK;
}

/* Mamba 1 layers (Jamba: every layer but those at attn_layer_offset modulo attn_layer_period): mamba_expand x
 * hidden channels, state mamba_d_state, conv mamba_d_conv (with a bias unless mamba_conv_bias is false), dt of rank
 * mamba_dt_rank ("auto": hidden / 16 rounded up); Jamba's dt, B and C RMS-normed with weights; its attention without
 * rope */
static vc_status parse_mamba1(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t expand = 2, N = 16, K = 4, R = (c->hidden + 15) / 16, ap = 8, ao = 4, I = 0;
    int pure = !is(c, "jamba"); /* Mamba, FalconMamba: every layer one Mamba mixer behind its norm */
    const cJSON *rk = vc_json_member(o, pure ? "time_step_rank" : "mamba_dt_rank");
    if ((st = get_int_any(o, "mamba_expand expand", 2, &expand, path)) ||
        (st = get_int_any(o, "mamba_d_state state_size", 16, &N, path)) ||
        (st = get_int_any(o, "mamba_d_conv conv_kernel", 4, &K, path)) ||
        (!cJSON_IsString(rk) && (st = get_int_any(o, "mamba_dt_rank time_step_rank", R, &R, path))) ||
        (st = get_int_any(o, "attn_layer_period", 8, &ap, path)) || (st = get_int_any(o, "attn_layer_offset", 4, &ao, path)))
        return st;
    if (pure && (st = get_int_any(o, "intermediate_size", expand * c->hidden, &I, path))) return st;
    if (cJSON_IsString(rk) && strcmp(rk->valuestring, "auto"))
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_dt_rank / time_step_rank must be a number or \"auto\"", path);
    if (pure) ap = 1, ao = 0, expand = I > 0 && I % c->hidden == 0 ? I / c->hidden : expand;
    if (expand < 1 || expand > 64 || N < 1 || N > 64 || K < 1 || K > 64 || R < 1 || R > c->hidden || ap < 1 || ao < 0 ||
        ao >= ap)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_expand %lld, mamba_d_state %lld (1..64), mamba_d_conv %lld, mamba_dt_rank "
                       "%lld or attn_layer_offset / _period out of range", path, (long long)expand, (long long)N,
                       (long long)K, (long long)R);
    if (flag(o, "mamba_proj_bias", 0) || flag(o, "use_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: mamba_proj_bias / use_bias (biases on in_proj and out_proj) is not built", path);
    if (pure && I != expand * c->hidden)
        return vc_fail(VC_ERR_FORMAT, "%s: intermediate_size %lld is not a multiple of hidden_size", path, (long long)I);
    if (c->act != VC_ACT_SILU) return vc_fail(VC_ERR_UNSUPPORTED, "%s: hidden_act: Mamba layers are built with silu", path);
    for (int64_t l = 0; l < c->n_layer; l++) {
        c->linear[l] = (uint8_t)(pure || l % ap != ao);
        c->n_linear += c->linear[l];
        c->nope[l] = 1;
        if (pure) c->block[l] = VC_BLOCK_MIXER;
    }
    c->lin_kind = VC_LIN_MAMBA1;
    c->lin_nv = expand * c->hidden, c->lin_dk = N, c->lin_dv = 1, c->lin_nk = 1, c->lin_rank = R;
    c->lin_conv = (int)K;
    c->lin_conv_bias = flag(o, pure ? "use_conv_bias" : "mamba_conv_bias", 1);
    c->lin_act = VC_ACT_SILU;
    c->lin_bcdt_norm = is(c, "jamba") ? 1 : is(c, "falcon_mamba") ? 2 : 0;
    double eps = 1e-6;
    if (is(c, "falcon_mamba") && (st = get_num_any(o, "mixer_rms_eps", 1e-6, &eps, path))) return st;
    c->lin_norm_eps = is(c, "falcon_mamba") ? (float)eps : 0.0f;
    return VC_OK;
}

/* Mamba 2 (Codestral Mamba): every layer one Mamba 2 mixer behind its norm: num_heads heads of head_dim (expand x
 * hidden channels), n_groups groups of B and C of state_size, the gated norm per group */
static vc_status time_step_unclamped(const cJSON *o, const char *path);
static vc_status parse_mamba2_pure(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t conv = 4, expand = 2;
    if ((st = get_int_any(o, "num_heads", 128, &c->lin_nv, path)) || (st = get_int_any(o, "head_dim", 64, &c->lin_dv, path)) ||
        (st = get_int_any(o, "n_groups", 8, &c->lin_nk, path)) || (st = get_int_any(o, "state_size", 128, &c->lin_dk, path)) ||
        (st = get_int_any(o, "conv_kernel", 4, &conv, path)) || (st = get_int_any(o, "expand", 2, &expand, path)))
        return st;
    if (c->lin_nv < 1 || c->lin_nv > 65536 || c->lin_dv < 1 || c->lin_dv > 65536 || c->lin_nk < 1 ||
        c->lin_nv % c->lin_nk || c->lin_dk < 1 || c->lin_dk > 65536 || conv < 1 || conv > 64 ||
        c->lin_nv * c->lin_dv != expand * c->hidden)
        return vc_fail(VC_ERR_FORMAT, "%s: num_heads x head_dim (expand x hidden_size), n_groups (dividing the heads), "
                       "state_size or conv_kernel (1..64) out of range", path);
    if (flag(o, "use_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: use_bias (biases on in_proj and out_proj) is not built", path);
    if ((st = time_step_unclamped(o, path))) return st;
    for (int64_t l = 0; l < c->n_layer; l++) {
        c->linear[l] = 1, c->block[l] = VC_BLOCK_MIXER;
        c->n_linear++;
    }
    c->lin_kind = VC_LIN_MAMBA2;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_conv_bias = flag(o, "use_conv_bias", 1);
    return VC_OK;
}

/* Granite SWA: attention sinks; layer_rope_theta, a rope base per layer (0: no rope), taken where the sliding layers
 * share one base and the full layers another (the sliding layers' as a local rope) */
static vc_status parse_granite_swa(const cJSON *o, const char *path, vc_model_config *c) {
    c->attn_sinks = 1;
    const cJSON *lt = vc_json_member(o, "layer_rope_theta"), *types = vc_json_member(o, "layer_types");
    if (!lt || cJSON_IsNull(lt)) return VC_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != (int)c->n_layer)
        return vc_fail(VC_ERR_FORMAT, "%s: layer_rope_theta must list %lld numbers", path, (long long)c->n_layer);
    double base[2] = { -1, -1 }; /* full layers', sliding layers' */
    for (int64_t l = 0; l < c->n_layer; l++) {
        const cJSON *e = cJSON_GetArrayItem(lt, (int)l), *t = cJSON_GetArrayItem(types, (int)l);
        if (!cJSON_IsNumber(e) || e->valuedouble < 0)
            return vc_fail(VC_ERR_FORMAT, "%s: layer_rope_theta[%lld] must be a non-negative number", path, (long long)l);
        c->nope[l] = e->valuedouble == 0;
        int slide = cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention");
        if (c->nope[l]) continue;
        if (base[slide] > 0 && base[slide] != e->valuedouble)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: layer_rope_theta: different rope bases among the %s layers are not "
                           "built", path, slide ? "sliding" : "full");
        base[slide] = e->valuedouble;
    }
    if (base[0] > 0) c->rope.theta = base[0];
    if (base[1] > 0 && base[1] != c->rope.theta) {
        c->local_rope = 1;
        c->rope_local = c->rope;
        c->rope_local.theta = base[1];
    }
    return VC_OK;
}

/* LFM2: gated short convolutions (layer_types "conv", else the layers not in full_attn_idxs) beside attention with
 * per-head q/k norms; the MLP's width as its block_* keys adjust it */
/* Gemma 4's and LFM3's ropes when a config has no rope_parameters (transformers' defaults): proportional on the full
 * layers (base 1e6, a fraction `part` of the pairs), plain on the sliding ones (base 10000) */
static void proportional_default(vc_model_config *c, double part) {
    c->rope.type = VC_ROPE_PROPORTIONAL;
    c->rope.partial_rotary_factor = part;
    if (!c->rope.theta_given) c->rope.theta = 1e6;
    c->rope_local = c->rope;
    c->rope_local.type = VC_ROPE_DEFAULT;
    c->rope_local.partial_rotary_factor = 1.0;
    c->rope_local.theta = 10000.0;
    c->local_rope = 1;
}

static vc_status parse_lfm2(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t k = 3, mult_of = 256;
    double mult = 1.0;
    if ((st = get_int_any(o, "conv_L_cache", 3, &k, path)) || (st = get_int_any(o, "block_multiple_of", 256, &mult_of, path)) ||
        (st = get_int_any(o, "block_ff_dim intermediate_size", c->inter, &c->inter, path)))
        return st;
    if (k < 1 || k > 64 || mult_of < 1)
        return vc_fail(VC_ERR_FORMAT, "%s: conv_L_cache %lld (1..64) or block_multiple_of out of range", path, (long long)k);
    if (flag(o, "conv_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: conv_bias (biases on the short convolutions) is not built", path);
    /* as Lfm2MLP: 2/3, then the multiplier and rounding if one is set (LFM2-MoE's dense layers: as given) */
    if (is(c, "lfm2") && flag(o, "block_auto_adjust_ff_dim", 1)) {
        c->inter = (int64_t)(2 * c->inter / 3);
        const cJSON *m = vc_json_member(o, "block_ffn_dim_multiplier");
        if (!cJSON_IsNull(m) && (st = get_num_any(o, "block_ffn_dim_multiplier", 1.0, &mult, path))) return st;
        if (!m || !cJSON_IsNull(m)) {
            c->inter = (int64_t)(mult * (double)c->inter);
            c->inter = mult_of * ((c->inter + mult_of - 1) / mult_of);
        }
    }
    const cJSON *types = vc_json_member(o, "layer_types"), *full = vc_json_member(o, "full_attn_idxs");
    for (int64_t l = 0; l < c->n_layer; l++) {
        const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL, *e;
        int lfm3 = is(c, "lfm3"), sw = t && cJSON_IsString(t) && lfm3 && !strcmp(t->valuestring, "sliding_attention");
        if (types && (!cJSON_IsString(t) || (strcmp(t->valuestring, "conv") && strcmp(t->valuestring, "full_attention") && !sw)))
            return vc_fail(VC_ERR_FORMAT, "%s: layer_types[%lld] must be \"conv\"%s or \"full_attention\"", path,
                           (long long)l, lfm3 ? ", \"sliding_attention\"" : "");
        if (!types && lfm3) /* transformers' default: full every 4th from 2, sliding every 4th from 4, conv between */
            sw = l % 4 == 0 && l > 0;
        int attn = t ? !strcmp(t->valuestring, "full_attention") || sw : lfm3 ? l % 4 == 2 || sw : !cJSON_IsArray(full);
        if (!t && cJSON_IsArray(full)) cJSON_ArrayForEach(e, full) if (cJSON_IsNumber(e) && e->valuedouble == (double)l) attn = 1;
        c->linear[l] = !attn;
        c->n_linear += c->linear[l];
    }
    c->lin_kind = VC_LIN_SHORTCONV;
    c->lin_conv = (int)k;
    c->qk_norm = 1;
    if (is(c, "lfm3")) { /* sandwich norms, a sigmoid gate per attention head */
        c->sandwich_norm = flag(o, "use_sandwich_norm", 1);
        c->attn_out_gate = flag(o, "use_attention_gate", 1) ? 2 : 0;
        if (!vc_json_member(o, "rope_parameters")) proportional_default(c, 0.5);
    }
    return VC_OK;
}

/* +infinity as configs write it: a number (Python's json: Infinity) or transformers 5's {"__float__": "Infinity"} */
static int json_pos_inf(const cJSON *v) {
    const cJSON *f = cJSON_IsObject(v) ? vc_json_member(v, "__float__") : NULL;
    return (cJSON_IsNumber(v) && isinf(v->valuedouble) && v->valuedouble > 0) ||
           (cJSON_IsString(f) && (!strcmp(f->valuestring, "Infinity") || !strcmp(f->valuestring, "inf")));
}

/* Mamba 2's time_step_limit (mamba_dt_limit): only (0, inf), where clamping the softplus changes nothing */
static vc_status time_step_unclamped(const cJSON *o, const char *path) {
    const cJSON *lim = vc_json_member(o, "time_step_limit");
    if (!lim) lim = vc_json_member(o, "mamba_dt_limit");
    if (lim && !cJSON_IsNull(lim) &&
        !(cJSON_IsArray(lim) && cJSON_GetArraySize(lim) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(lim, 0)) &&
          cJSON_GetArrayItem(lim, 0)->valuedouble <= 0 && json_pos_inf(cJSON_GetArrayItem(lim, 1))))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: time_step_limit other than (0, inf) (a clamped time step) is not built", path);
    return VC_OK;
}

/* Granite 4 (granitemoehybrid): Mamba 2 layers (layer_types "mamba", else attention) of mamba_n_heads heads of
 * mamba_d_head channels, mamba_n_groups groups of B and C of mamba_d_state; attention without rope unless
 * position_embedding_type is "rope"; a dense model's MLP is its shared MLP */
static vc_status parse_granite_hybrid(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t expand = 2, conv = 4, dh = 0;
    if ((st = get_int_any(o, "mamba_n_heads", 128, &c->lin_nv, path)) ||
        (st = get_int_any(o, "mamba_n_groups", 1, &c->lin_nk, path)) ||
        (st = get_int_any(o, "mamba_d_state", 256, &c->lin_dk, path)) ||
        (st = get_int_any(o, "mamba_expand", 2, &expand, path)) || (st = get_int_any(o, "mamba_d_conv", 4, &conv, path)))
        return st;
    const cJSON *h = vc_json_member(o, "mamba_d_head");
    if (cJSON_IsNumber(h)) dh = (int64_t)h->valuedouble;
    else if (h && !cJSON_IsNull(h) && !(cJSON_IsString(h) && !strcmp(h->valuestring, "auto")))
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_d_head must be a number or \"auto\"", path);
    if (c->lin_nv < 1 || c->lin_nv > 65536 || expand < 1 || expand > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_n_heads or mamba_expand out of range", path);
    if (!dh) dh = expand * c->hidden / c->lin_nv;
    c->lin_dv = dh;
    if (dh * c->lin_nv != expand * c->hidden || c->lin_nk < 1 || c->lin_nv % c->lin_nk || c->lin_dk < 1 ||
        c->lin_dk > 65536 || conv < 1 || conv > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_n_heads %lld x mamba_d_head %lld is not mamba_expand x hidden_size, or "
                       "mamba_n_groups / mamba_d_state / mamba_d_conv (1..64) out of range", path,
                       (long long)c->lin_nv, (long long)dh);
    if (flag(o, "mamba_proj_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: mamba_proj_bias (biases on in_proj / out_proj) is not built", path);
    if ((st = time_step_unclamped(o, path))) return st;
    if (c->act != VC_ACT_SILU) return vc_fail(VC_ERR_UNSUPPORTED, "%s: hidden_act: Mamba layers are built with silu", path);
    int64_t ne = 8, si = 1024;
    int granite = is(c, "granitemoehybrid"); /* else Bamba: a gated MLP per layer, rope on its attention layers */
    if (granite && ((st = get_int_any(o, "num_local_experts", 8, &ne, path)) ||
                    (st = get_int_any(o, "shared_intermediate_size", 1024, &si, path))))
        return st;
    if (granite && ne <= 0) c->inter = si; /* no experts: every layer's MLP is the shared one */
    c->lin_kind = VC_LIN_MAMBA2;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_conv_bias = flag(o, "mamba_conv_bias", 1);
    const cJSON *types = vc_json_member(o, "layer_types"), *attn = vc_json_member(o, "attn_layer_indices"), *e;
    const char *pe = NULL;
    if ((st = vc_json_get_str(o, "position_embedding_type", granite ? "nope" : "rope", &pe, path))) return st;
    for (int64_t l = 0; l < c->n_layer; l++) {
        const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL;
        int mamba = !t || (cJSON_IsString(t) && (!strcmp(t->valuestring, "mamba") ||
                                                  !strcmp(t->valuestring, "linear_attention")));
        if (!t && cJSON_IsArray(attn)) /* Bamba's hub configs: the attention layers' indices */
            cJSON_ArrayForEach(e, attn) if (cJSON_IsNumber(e) && e->valuedouble == (double)l) mamba = 0;
        if (t && !mamba && !(cJSON_IsString(t) && (!strcmp(t->valuestring, "attention") ||
                                                     !strcmp(t->valuestring, "full_attention"))))
            return vc_fail(VC_ERR_FORMAT, "%s: layer_types[%lld] must be \"mamba\" or \"attention\"", path, (long long)l);
        c->linear[l] = (uint8_t)mamba;
        c->n_linear += mamba;
        c->nope[l] = strcmp(pe, "rope") != 0;
    }
    return VC_OK;
}

/* Nemotron-H: blocks of one mixer each (layer_types / layers_block_type "linear_attention" Mamba 2, "full_attention"
 * attention without rope, "mlp" a relu2 MLP; or hybrid_override_pattern's M, *, -), each behind its own norm */
static vc_status parse_nemotron_h(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t conv = 4;
    if ((st = get_int_any(o, "mamba_num_heads", 128, &c->lin_nv, path)) ||
        (st = get_int_any(o, "mamba_head_dim", 64, &c->lin_dv, path)) ||
        (st = get_int_any(o, "n_groups mamba_n_groups", 8, &c->lin_nk, path)) ||
        (st = get_int_any(o, "ssm_state_size", 128, &c->lin_dk, path)) ||
        (st = get_int_any(o, "conv_kernel mamba_d_conv", 4, &conv, path)))
        return st;
    if (c->lin_nv < 1 || c->lin_nv > 65536 || c->lin_dv < 1 || c->lin_dv > 65536 || c->lin_nk < 1 ||
        c->lin_nv % c->lin_nk || c->lin_dk < 1 || c->lin_dk > 65536 || conv < 1 || conv > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_num_heads, mamba_head_dim, n_groups (dividing the heads), ssm_state_size "
                       "or conv_kernel (1..64) out of range", path);
    if (flag(o, "mamba_proj_bias", 0) || flag(o, "use_bias", 0) || flag(o, "mlp_bias", 0) || flag(o, "attention_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: biases on Nemotron-H's projections are not built", path);
    const char *ma = NULL, *pat = NULL;
    if ((st = vc_json_get_str(o, "mamba_hidden_act", "silu", &ma, path)) ||
        (st = vc_json_get_str(o, "hybrid_override_pattern", NULL, &pat, path)))
        return st;
    if (strcmp(ma, "silu"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: mamba_hidden_act '%s': Mamba layers are built with silu", path, ma);
    if ((st = time_step_unclamped(o, path))) return st;
    const cJSON *types = vc_json_member(o, "layers_block_type");
    if (!types) types = vc_json_member(o, "layer_types");
    int64_t n = cJSON_IsArray(types) ? cJSON_GetArraySize(types) : pat ? (int64_t)strlen(pat) : 0;
    if (n < 1 || n > VC_MAX_LAYERS)
        return vc_fail(VC_ERR_FORMAT, "%s: layers_block_type or hybrid_override_pattern must name 1..%d blocks", path,
                       VC_MAX_LAYERS);
    c->n_layer = n;
    for (int64_t l = 0; l < n; l++) {
        const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL;
        const char *k = t && cJSON_IsString(t) ? t->valuestring : "";
        char p = pat && !t ? pat[l] : 0;
        int mamba = !strcmp(k, "linear_attention") || !strcmp(k, "mamba") || p == 'M';
        int attn = !strcmp(k, "full_attention") || !strcmp(k, "attention") || p == '*';
        int mlp = !strcmp(k, "mlp") || p == '-';
        int moe = !strcmp(k, "moe") || p == 'E';
        if (!mamba && !attn && !mlp && !moe)
            return vc_fail(VC_ERR_FORMAT, "%s: block %lld's type is not linear_attention, full_attention or mlp", path,
                           (long long)l);
        c->linear[l] = (uint8_t)mamba;
        c->n_linear += mamba;
        c->block[l] = mlp || moe ? VC_BLOCK_MLP : VC_BLOCK_MIXER;
        c->is_moe[l] = (uint8_t)moe; /* (parse_moe's counts, the layers kept) */
        c->nope[l] = 1; /* its attention has no rope */
    }
    c->lin_kind = VC_LIN_MAMBA2;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_conv_bias = flag(o, "use_conv_bias", flag(o, "mamba_conv_bias", 1));
    c->mlp_kind = VC_MLP_PLAIN;
    const cJSON *lat = vc_json_member(o, "moe_latent_size");
    if (lat && !cJSON_IsNull(lat) && (st = get_int_any(o, "moe_latent_size", 0, &c->moe_latent, path))) return st;
    if (c->moe_latent < 0 || c->moe_latent > DIM_MAX)
        return vc_fail(VC_ERR_FORMAT, "%s: moe_latent_size %lld out of range", path, (long long)c->moe_latent);
    const char *act = NULL;
    if ((st = vc_json_get_str(o, "mlp_hidden_act", "relu2", &act, path))) return st;
    cJSON *tmp = cJSON_CreateObject();
    if (!tmp || !cJSON_AddStringToObject(tmp, "hidden_act", act)) {
        cJSON_Delete(tmp);
        return VC_ERR_NOMEM;
    }
    st = parse_act(tmp, path, c);
    cJSON_Delete(tmp);
    return st;
}

/* a list of n numbers (NULL or null: all 1) */
static vc_status get_floats(const cJSON *o, const char *key, int n, float *out, const char *path) {
    const cJSON *a = vc_json_member(o, key);
    for (int i = 0; i < n; i++) out[i] = 1.0f;
    if (!a || cJSON_IsNull(a)) return VC_OK;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return vc_fail(VC_ERR_FORMAT, "%s: key '%s' must list %d numbers", path, key, n);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(e)) return vc_fail(VC_ERR_FORMAT, "%s: key '%s'[%d] is not a number", path, key, i);
        out[i] = (float)e->valuedouble;
    }
    return VC_OK;
}

/* Falcon-H1: every layer runs attention and a Mamba 2 mixer side by side (their outputs summed), muP multipliers
 * on the mixer's input and projections, attention's input, keys and output, the MLP's gate and output, the
 * embeddings and the LM head */
static vc_status parse_falcon_h1(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t expand = 2, conv = 4, dh = 0, dssm = 0;
    double v[8];
    static const char *const K[8] = { "ssm_in_multiplier", "ssm_out_multiplier", "attention_in_multiplier",
                                      "attention_out_multiplier", "key_multiplier", "embedding_multiplier",
                                      "lm_head_multiplier", NULL };
    if ((st = get_int_any(o, "mamba_n_heads", 128, &c->lin_nv, path)) ||
        (st = get_int_any(o, "mamba_n_groups", 1, &c->lin_nk, path)) ||
        (st = get_int_any(o, "mamba_d_state", 256, &c->lin_dk, path)) ||
        (st = get_int_any(o, "mamba_expand", 2, &expand, path)) || (st = get_int_any(o, "mamba_d_conv", 4, &conv, path)))
        return st;
    const cJSON *ds = vc_json_member(o, "mamba_d_ssm"), *h = vc_json_member(o, "mamba_d_head");
    dssm = cJSON_IsNumber(ds) ? (int64_t)ds->valuedouble : expand * c->hidden;
    if (cJSON_IsNumber(h)) dh = (int64_t)h->valuedouble;
    if (c->lin_nv < 1 || c->lin_nv > 65536 || dssm < 1) return vc_fail(VC_ERR_FORMAT, "%s: mamba_n_heads or mamba_d_ssm out of range", path);
    if (!dh) dh = dssm / c->lin_nv;
    c->lin_dv = dh;
    if (dh * c->lin_nv != dssm || c->lin_nk < 1 || c->lin_nv % c->lin_nk || c->lin_dk < 1 || c->lin_dk > 65536 ||
        conv < 1 || conv > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_n_heads x mamba_d_head is not mamba_d_ssm, or mamba_n_groups / "
                       "mamba_d_state / mamba_d_conv out of range", path);
    if (flag(o, "mamba_proj_bias", 0) || flag(o, "projectors_bias", 0) || flag(o, "attention_bias", 0) ||
        flag(o, "mlp_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: biases on Falcon-H1's projections are not built", path);
    if (!flag(o, "mamba_use_mlp", 1))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: mamba_use_mlp false (layers without an MLP) is not built", path);
    if ((st = time_step_unclamped(o, path))) return st;
    for (int i = 0; K[i]; i++)
        if ((st = get_num_any(o, K[i], 1.0, &v[i], path))) return st;
    float mm[2];
    if ((st = get_floats(o, "mlp_multipliers", 2, mm, path)) || (st = get_floats(o, "ssm_multipliers", 5, c->mup.zxbcdt, path)))
        return st;
    c->mup.on = 1;
    c->mup.ssm_in = (float)v[0], c->mup.ssm_out = (float)v[1], c->mup.attn_in = (float)v[2];
    c->mup.attn_out = (float)v[3], c->mup.key = (float)v[4], c->mup.mlp_gate = mm[0], c->mup.mlp_down = mm[1];
    c->emb_scale = (float)v[5];
    if (!(v[6] > 0)) return vc_fail(VC_ERR_FORMAT, "%s: lm_head_multiplier must be positive", path);
    c->logit_divisor = (float)(1.0 / v[6]);
    c->lin_kind = VC_LIN_MAMBA2;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_conv_bias = flag(o, "mamba_conv_bias", 1);
    c->lin_norm = !flag(o, "mamba_rms_norm", 0) ? 2 : flag(o, "mamba_norm_before_gate", 1) ? 1 : 0;
    c->parallel_ssm = 1;
    for (int64_t l = 0; l < c->n_layer; l++) c->linear[l] = 1;
    c->n_linear = (int)c->n_layer;
    return VC_OK;
}

/* Ministral 3's rope_parameters.llama_4_scaling_beta: q times 1 + beta log(1 + floor(pos / original max)) */
static vc_status parse_llama4_scaling(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *p = vc_json_member(o, "rope_parameters");
    if (!p) p = vc_json_member(o, "rope_scaling");
    double beta = 0;
    int64_t base = 0;
    vc_status st = p ? vc_json_get_num(p, "llama_4_scaling_beta", 0, &beta, path) : VC_OK;
    if (!st && p) st = vc_json_get_int(p, "original_max_position_embeddings", 0, &base, path);
    if (st || !(beta > 0)) return st;
    if (base <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s: llama_4_scaling_beta needs original_max_position_embeddings", path);
    c->q_pos_beta = (float)beta;
    c->q_pos_base = base;
    return VC_OK;
}

/* the older rope keys (Qwen1, GPT-NeoX's hub configs): rotary_emb_base, rotary_pct of each head */
static vc_status rotary_keys(const cJSON *o, const char *path, vc_model_config *c) {
    double base, pct;
    vc_status st;
    if ((st = get_num_any(o, "rotary_emb_base", 10000, &base, path)) || (st = get_num_any(o, "rotary_pct", 1.0, &pct, path)))
        return st;
    c->rope.theta = base;
    return rot_from_fraction(c, pct, "rotary_pct", path);
}

/* family-specific keys and flags */
/* MiMo-V2-Flash: q/k heads of head_dim and values of v_head_dim scaled by attention_value_scale; sliding layers with twice
 * the kv heads and a sink per head; partial rope per layer type (each its own factor) */
static vc_status parse_mimo_v2(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    double vs;
    if ((st = get_int_any(o, "v_head_dim", c->head_dim, &c->v_head_dim, path)) ||
        (st = check_size(path, "v_head_dim", c->v_head_dim, 1, HEAD_MAX)) ||
        (st = get_num_any(o, "attention_value_scale", 1.0, &vs, path)))
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

/* Gemma 4 (gemma4_text): the keys its layers do not depend on. Plain-weight RMSNorms, q / k norms, values normed
 * without a weight, attention scale 1, a layer_scalar per layer, sandwich norms; MoE layers (enable_moe_block) keep
 * their dense MLP beside softmax top-k experts; per-layer embeddings (hidden_size_per_layer_input) */
static vc_status parse_gemma4(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    const char *bi = NULL;
    if ((st = vc_json_get_str(o, "use_bidirectional_attention", NULL, &bi, path))) return st;
    if (bi && !strcmp(bi, "all"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: use_bidirectional_attention 'all' (attention without a causal mask) is "
                       "not built", path);
    c->qk_norm = c->v_norm = c->layer_scalar = c->sandwich_norm = 1;
    c->attn_scale = 1.0f;
    c->emb_scale = sqrtf((float)c->hidden);
    c->k_eq_v = flag(o, "attention_k_eq_v", 0);
    double f;
    if ((st = get_num_any(o, "final_logit_softcapping", 0, &f, path))) return st;
    c->final_softcap = (float)f;
    if (!vc_json_member(o, "rope_parameters")) proportional_default(c, 0.25);
    int64_t ple = 0, plev = 0, tk = 0;
    if ((st = get_int_any(o, "hidden_size_per_layer_input", 0, &ple, path)) ||
        (st = get_int_any(o, "vocab_size_per_layer_input", c->vocab, &plev, path)) ||
        (st = check_size(path, "hidden_size_per_layer_input", ple, 0, DIM_MAX)) ||
        (st = check_size(path, "vocab_size_per_layer_input", plev, ple ? 1 : 0, DIM_MAX)))
        return st;
    if (ple && ple * c->n_layer > DIM_MAX)
        return vc_fail(VC_ERR_FORMAT, "%s: hidden_size_per_layer_input %lld x %lld layers is too wide", path,
                       (long long)ple, (long long)c->n_layer);
    if (ple && plev < c->vocab)
        return vc_fail(VC_ERR_FORMAT, "%s: vocab_size_per_layer_input %lld is below vocab_size %lld", path, (long long)plev,
                       (long long)c->vocab);
    c->ple_dim = ple;
    c->ple_vocab = ple ? plev : 0;
    if (!flag(o, "enable_moe_block", 0)) return VC_OK;
    if ((st = get_int_any(o, "num_experts", 0, &c->n_expert, path)) ||
        (st = get_int_any(o, "top_k_experts", 0, &tk, path)) ||
        (st = get_int_any(o, "moe_intermediate_size", 0, &c->moe_inter, path)))
        return st;
    if (c->n_expert < 1 || c->n_expert > 1024 || tk < 1 || tk > c->n_expert || c->moe_inter < 1)
        return vc_fail(VC_ERR_FORMAT, "%s: enable_moe_block with %lld experts, %lld per token (top_k_experts) and "
                       "moe_intermediate_size %lld is not a valid MoE block", path, (long long)c->n_expert,
                       (long long)tk, (long long)c->moe_inter);
    c->top_k = tk;
    c->norm_topk = c->moe_dense = 1;
    c->routed_scaling = 1.0f;
    for (int64_t l = 0; l < c->n_layer; l++) c->is_moe[l] = 1;
    return VC_OK;
}

/* Gemma 4's layers: full layers' head_dim and kv heads (per_layer_config as transformers 5 writes it, else
 * global_head_dim and, with attention_k_eq_v, num_global_key_value_heads), the last layer always full, the ropes'
 * rotated dims, and KV sharing: the last num_kv_shared_layers layers attend with the keys and values of the last
 * earlier layer of their type, and have double-wide MLPs with use_double_wide_mlp */
static vc_status gemma4_layers(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t ghd, gkv, shared;
    if ((st = get_int_any(o, "global_head_dim", 512, &ghd, path)) ||
        (st = get_int_any(o, "num_global_key_value_heads", 0, &gkv, path)) ||
        (st = get_int_any(o, "num_kv_shared_layers", 0, &shared, path)) ||
        (st = check_size(path, "global_head_dim", ghd, 1, HEAD_MAX)) ||
        (st = check_size(path, "num_global_key_value_heads", gkv, 0, HEAD_MAX)) ||
        (st = check_size(path, "num_kv_shared_layers", shared, 0, c->n_layer)))
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
                (st = check_size(ctx, "head_dim", hd, 0, HEAD_MAX)) || (st = check_size(ctx, "num_key_value_heads", kv, 0, HEAD_MAX)))
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
    int first = n - (int)shared, dbl = flag(o, "use_double_wide_mlp", 0);
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

static vc_status parse_family(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = VC_OK;
    note_dropout(o, path);
    c->qkv_bias = flag(o, "attention_bias", 0) || is(c, "qwen2") || is(c, "qwen2_moe") || is(c, "qwen") ||
                  flag(o, "add_qkv_bias", 0) || flag(o, "bias", 0);
    c->o_bias = flag(o, "add_bias_linear", 0) || (is(c, "internlm2") && flag(o, "bias", 0)) ||
                flag(o, "attention_out_bias", 0); /* Seed-OSS */
    c->mlp_bias = flag(o, "mlp_bias", 0);
    if (is(c, "qwen3") || is(c, "qwen3_moe") || is(c, "dots1") || is(c, "hy_v3") || is(c, "mellum")) c->qk_norm = 1;
    if (is(c, "glm4_moe")) c->qk_norm = flag(o, "use_qk_norm", 0); /* per-head RMSNorm of q and k, as Qwen3's */
    if (is(c, "gemma") || is(c, "gemma2") || is(c, "gemma3_text") || is(c, "vaultgemma")) {
        c->norm_offset = 1.0f;
        c->emb_scale = sqrtf((float)c->hidden);
    }
    if (is(c, "gemma3_text") && (st = parse_gemma3(o, path, c))) return st;
    const cJSON *rp = vc_json_member(o, "rope_parameters"); /* per layer type (OLMo 3, ...): sliding layers' own */
    if (!c->local_rope && cJSON_IsObject(vc_json_member(rp, "sliding_attention")) &&
        cJSON_IsObject(vc_json_member(rp, "full_attention"))) {
        c->local_rope = 1;
        if ((st = vc_rope_parse_layer(o, path, "sliding_attention", &c->rope_local))) return st;
        double part = c->rope_local.partial_rotary_factor, r = (double)c->head_dim * part;
        if (part != c->rope.partial_rotary_factor) { /* its own rotated share (Laguna: all dims; full layers half) */
            if (!(r >= 2 && r <= (double)c->head_dim) || (int)r % 2)
                return vc_fail(VC_ERR_FORMAT, "%s: rope_parameters.sliding_attention.partial_rotary_factor %g gives no even "
                               "rotary dimension within head_dim %lld", path, part, (long long)c->head_dim);
            c->rot_dim_local = (int)r;
        }
    }
    if (is(c, "gemma2") || is(c, "gemma3_text") || is(c, "vaultgemma")) {
        double qs, a, f;
        c->sandwich_norm = !is(c, "vaultgemma"); /* VaultGemma: Gemma 2 without the post-sublayer norms */
        if ((st = get_num_any(o, "query_pre_attn_scalar", (double)c->head_dim, &qs, path)) ||
            (st = get_num_any(o, "attn_logit_softcapping", 0, &a, path)) ||
            (st = get_num_any(o, "final_logit_softcapping", 0, &f, path)))
            return st;
        c->attn_scale = (float)(1.0 / sqrt(qs));
        c->attn_softcap = (float)a;
        c->final_softcap = (float)f;
    }
    if (is(c, "cwm") && !vc_json_member(o, "rope_parameters") && !vc_json_member(o, "rope_scaling")) {
        /* CWM's default rope (transformers' CwmConfig): llama3 with theta 1e6, factor 16, frequency factors 1 and 4,
         * 8192 original positions */
        c->rope.type = VC_ROPE_LLAMA3;
        if (!c->rope.theta_given) c->rope.theta = 1e6;
        c->rope.factor = 16.0;
        c->rope.has_factor = 1;
        c->rope.low_freq_factor = 1.0;
        c->rope.high_freq_factor = 4.0;
        c->rope.original_max_pos = 8192;
    }
    int hcx = is(c, "hyperclovax");
    if (is(c, "granite") || is(c, "granitemoe") || is(c, "granitemoeshared") || is(c, "granitemoehybrid") ||
        is(c, "granite_swa") || is(c, "granitemoe_swa") || hcx) {
        /* IBM Granite (3.x, 4): four multipliers. HyperCLOVA X: the same, but its attention multiplier defaults to
         * head_dim^-0.5 and its logits_scaling multiplies; norms after both sublayers (use_post_norm) */
        double e, r, a, l;
        if ((st = get_num_any(o, "embedding_multiplier", 1, &e, path)) ||
            (st = get_num_any(o, "residual_multiplier", 1, &r, path)) ||
            (st = get_num_any(o, "attention_multiplier", hcx ? 1.0 / sqrt((double)c->head_dim) : 1.0, &a, path)) ||
            (st = get_num_any(o, "logits_scaling", 1, &l, path)))
            return st;
        if (!(e > 0 && r > 0 && a > 0 && l > 0))
            return vc_fail(VC_ERR_FORMAT, "%s: %s's multipliers must be positive", path, hcx ? "HyperCLOVA X" : "Granite");
        c->emb_scale = (float)e, c->residual_scale = (float)r, c->attn_scale = (float)a;
        c->logit_divisor = (float)(hcx ? 1.0 / l : l);
        if (hcx) c->sandwich_norm = flag(o, "use_post_norm", 1);
    }
    if (is(c, "glm") || is(c, "glm4") || is(c, "ernie4_5") || is(c, "ernie4_5_moe") || is(c, "helium") ||
        is(c, "cohere") || is(c, "cohere2"))
        c->rope_interleaved = 1; /* GPT-J pairs */
    if ((is(c, "ernie4_5") || is(c, "ernie4_5_moe")) && flag(o, "use_bias", 0)) c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    if (is(c, "glm4")) c->sandwich_norm = 1;                     /* post_self_attn / post_mlp norms */
    if (is(c, "axk1")) c->moe_post_norm = 1; /* A.X K1: the MoE block's output RMS-normed */
    if (is(c, "kolibri1")) c->sandwich_norm = c->qk_norm = 1; /* GLM-4's four norms, per-head q/k norms */
    if (is(c, "flint")) c->qk_norm = c->attn_sinks = 1; /* Qwen3-MoE's attention with a sink per head in every layer */
    if (is(c, "olmo2") || is(c, "olmo3") || is(c, "flex_olmo")) /* norms only after the sublayers; q and k normed
                                                                  * over all their heads */
        c->sandwich_norm = c->no_pre_norm = c->qk_norm = c->qk_norm_full = 1;
    if (is(c, "olmoe")) c->qk_norm = c->qk_norm_full = 1; /* pre-norms, q and k normed over all their heads */
    if (is(c, "olmo")) { /* OLMo 1: LayerNorms without weight or bias, eps 1e-5 */
        c->norm_kind = VC_NORM_LAYER;
        c->norm_no_weight = c->norm_no_bias = 1;
        c->norm_eps = 1e-5f;
    }
    if ((is(c, "olmoe") || is(c, "flex_olmo") || is(c, "olmo")) && vc_json_member(o, "clip_qkv") &&
        !cJSON_IsNull(vc_json_member(o, "clip_qkv")))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: clip_qkv (q, k and v clamped) is not built", path);
    if (is(c, "hunyuan_v1_moe")) c->qk_norm = c->qk_norm_after_rope = 1;
    if (is(c, "exaone_moe")) c->qk_norm = 1; /* per-head q/k RMSNorm; global layers without rope (parse_nope) */
    if (is(c, "apertus") || is(c, "apertus1p5_text")) { /* per-head q/k norms, a plain MLP with xIELU */
        c->qk_norm = 1;
        c->mlp_kind = VC_MLP_PLAIN;
    }
    if (is(c, "apertus1p5_text") && (st = parse_out_vocab(o, path, c))) return st;
    if (is(c, "gpt2") || is(c, "gpt_bigcode")) { /* LayerNorms and linears with biases, learned positions, no rope, a
                                                 * plain MLP; GPT-BigCode: one kv head with multi_query */
        int64_t inner = 0;
        if ((st = get_int_any(o, "n_inner", 4 * c->hidden, &inner, path)) ||
            (st = check_size(path, "n_inner", inner, 1, DIM_MAX)))
            return st;
        if (flag(o, "scale_attn_by_inverse_layer_idx", 0) || flag(o, "add_cross_attention", 0))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: scale_attn_by_inverse_layer_idx / add_cross_attention are not built",
                           path);
        c->inter = inner;
        c->n_kv_head = is(c, "gpt_bigcode") && flag(o, "multi_query", 1) ? 1 : c->n_head; /* (whatever else it says) */
        c->norm_kind = VC_NORM_LAYER;
        c->qkv_bias = c->o_bias = c->mlp_bias = 1;
        c->mlp_kind = VC_MLP_PLAIN;
        c->learned_pos = 1;
        c->rot_dim = 0;
        for (int64_t l = 0; l < c->n_layer; l++) c->nope[l] = 1;
        if (!flag(o, "scale_attn_weights", 1)) c->attn_scale = 1.0f;
    }
    if (is(c, "gpt_neo")) { /* GPT-2's learned positions, no attention scaling, global and local (windowed) layers */
        int64_t w = 256;
        const cJSON *at = vc_json_member(o, "attention_layers"), *e;
        if ((st = get_int_any(o, "window_size", 256, &w, path)) || (st = check_size(path, "window_size", w, 1, 1 << 30)))
            return st;
        int64_t l = 0;
        if (!cJSON_IsArray(at)) { /* attention_types: [[["global", "local"], 12]] */
            const cJSON *ty = vc_json_member(o, "attention_types"), *item;
            cJSON_ArrayForEach(item, ty) {
                const cJSON *kinds = cJSON_GetArrayItem(item, 0), *rep = cJSON_GetArrayItem(item, 1);
                for (int r = 0; cJSON_IsArray(kinds) && cJSON_IsNumber(rep) && r < rep->valuedouble; r++)
                    cJSON_ArrayForEach(e, kinds) if (l < c->n_layer && cJSON_IsString(e))
                        c->window[l++] = strcmp(e->valuestring, "local") ? 0 : (int)w;
            }
        } else
            cJSON_ArrayForEach(e, at) if (l < c->n_layer && cJSON_IsString(e))
                c->window[l++] = strcmp(e->valuestring, "local") ? 0 : (int)w;
        if (l != c->n_layer)
            return vc_fail(VC_ERR_FORMAT, "%s: attention_layers / attention_types name %lld layers, not %lld", path,
                           (long long)l, (long long)c->n_layer);
        c->inter = c->inter > 0 ? c->inter : 4 * c->hidden;
        c->n_kv_head = c->n_head;
        c->norm_kind = VC_NORM_LAYER;
        c->o_bias = c->mlp_bias = 1;
        c->mlp_kind = VC_MLP_PLAIN;
        c->learned_pos = 1;
        c->rot_dim = 0;
        c->attn_scale = 1.0f;
        for (int64_t k = 0; k < c->n_layer; k++) c->nope[k] = 1;
    }
    if (is(c, "bloom")) { /* the embeddings LayerNorm-ed, ALiBi, query_key_value per head, biases, a GELU MLP */
        if (flag(o, "apply_residual_connection_post_layernorm", 0))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: apply_residual_connection_post_layernorm is not built", path);
        int64_t H;
        if ((st = get_int_any(o, "hidden_size n_embed", c->hidden, &H, path))) return st;
        c->n_kv_head = c->n_head;
        c->inter = 4 * c->hidden;
        c->norm_kind = VC_NORM_LAYER;
        c->emb_norm = 1;
        c->qkv_bias = c->o_bias = c->mlp_bias = 1;
        c->mlp_kind = VC_MLP_PLAIN;
        c->act = VC_ACT_GELU_TANH;
        c->alibi = 1;
        c->rot_dim = 0;
    }
    if (is(c, "mpt")) { /* ALiBi, no biases, a GELU MLP */
        const cJSON *ac = vc_json_member(o, "attn_config");
        double ratio = 4, bmax = 8, ss = 0;
        if (ac && !cJSON_IsObject(ac)) return vc_fail(VC_ERR_FORMAT, "%s: key 'attn_config': expected an object", path);
        char ctx[600];
        snprintf(ctx, sizeof ctx, "%s: attn_config", path);
        if ((st = get_num_any(o, "expansion_ratio", 4, &ratio, path)) ||
            (st = get_num_any(ac, "alibi_bias_max", 8, &bmax, ctx)) || (st = get_num_any(ac, "softmax_scale", 0, &ss, ctx)))
            return st;
        const cJSON *cq = vc_json_member(ac, "clip_qkv"); /* Wqkv's output clipped (null: not) */
        if (cq && !cJSON_IsNull(cq) && (!cJSON_IsNumber(cq) || !(cq->valuedouble > 0)))
            return vc_fail(VC_ERR_FORMAT, "%s: clip_qkv must be a positive number or null", ctx);
        c->clip_qkv = cq && cJSON_IsNumber(cq) ? (float)cq->valuedouble : 0.0f;
        if (!flag(ac, "alibi", 1) || flag(ac, "qk_ln", 0) || !flag(o, "no_bias", 1))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: MPT is built with ALiBi, no qk_ln and no_bias", path);
        if (bmax != 8) /* transformers builds MPT's slopes with 8 whatever the config says; MosaicML's code does not */
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: alibi_bias_max %g (transformers' MPT uses 8)", ctx, bmax);
        if (ratio != 4) /* transformers' MptMLP is 4 x d_model wide whatever the config says */
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: expansion_ratio %g (transformers' MPT is built with 4)", path, ratio);
        c->inter = 4 * c->hidden;
        c->n_kv_head = c->n_head;
        c->norm_kind = VC_NORM_LAYER;
        c->norm_no_bias = 1;
        c->norm_eps = 1e-5f;
        c->mlp_kind = VC_MLP_PLAIN;
        c->act = VC_ACT_GELU_ERF;
        c->alibi = 1; /* MPT's slopes with alibi_bias_max 8 are BLOOM's, for any head count */
        c->rot_dim = 0;
        if (ss > 0) c->attn_scale = (float)ss;
    }
    if (is(c, "falcon")) { /* Falcon: GQA (new_decoder_architecture) or multi-query, parallel attention and MLP */
        int64_t ffn = 0, kv = c->n_head, nln = 2;
        int newa = flag(o, "new_decoder_architecture", 0);
        if (flag(o, "alibi", 0)) { /* Falcon-RW: BLOOM's slopes in transformers' bf16 table, scaled by 1 / sqrt(d) as
                                    * the scores are; no rope */
            c->alibi = 2;
            c->rot_dim = 0;
            c->alibi_scale = (float)(1.0 / sqrt((double)c->head_dim));
        }
        if ((st = get_int_any(o, "ffn_hidden_size", 4 * c->hidden, &ffn, path)) ||
            (st = check_size(path, "ffn_hidden_size", ffn, 1, DIM_MAX)) ||
            (st = get_int_any(o, "num_kv_heads", c->n_head, &kv, path)) ||
            (st = get_int_any(o, "num_ln_in_parallel_attn", 2, &nln, path)))
            return st;
        c->n_kv_head = newa ? kv : flag(o, "multi_query", 1) ? 1 : c->n_head;
        if (c->n_kv_head < 1 || c->n_head % c->n_kv_head)
            return vc_fail(VC_ERR_FORMAT, "%s: num_kv_heads %lld does not divide %lld heads", path,
                           (long long)c->n_kv_head, (long long)c->n_head);
        c->inter = ffn;
        c->norm_kind = VC_NORM_LAYER;
        c->qkv_bias = c->o_bias = c->mlp_bias = flag(o, "bias", 0);
        c->mlp_kind = VC_MLP_PLAIN;
        c->parallel_block = newa || flag(o, "parallel_attn", 1);
        c->parallel_norms = newa && nln == 2;
    }
    if (is(c, "dbrx") && (st = parse_dbrx(o, path, c))) return st;
    if (is(c, "laguna") && (st = parse_laguna(o, path, c))) return st;
    if (is(c, "phimoe")) { /* LayerNorms with biases, optional attention and LM-head biases */
        c->norm_kind = VC_NORM_LAYER;
        c->qkv_bias = c->o_bias = flag(o, "attention_bias", 0);
        c->head_bias = flag(o, "lm_head_bias", 0);
    }
    if (is(c, "opt")) { /* pre-norm LayerNorms and linears with biases, learned positions after 2 rows, relu MLP */
        int64_t wp = c->hidden, ffn = 0;
        if ((st = get_int_any(o, "word_embed_proj_dim", c->hidden, &wp, path)) ||
            (st = get_int_any(o, "ffn_dim", 4 * c->hidden, &ffn, path)) || (st = check_size(path, "ffn_dim", ffn, 1, DIM_MAX)))
            return st;
        if (!flag(o, "layer_norm_elementwise_affine", 1))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: OPT with LayerNorms without weights is not built", path);
        if ((st = check_size(path, "word_embed_proj_dim", wp, 1, DIM_MAX))) return st;
        /* OPT-350m: norms after the residual adds and none after the last layer; 512-wide embeddings projected in
         * and out */
        c->post_ln = !flag(o, "do_layer_norm_before", 1);
        c->no_final_norm = c->post_ln || flag(o, "_remove_final_layer_norm", 0);
        c->emb_dim = wp != c->hidden ? wp : 0;
        c->inter = ffn;
        c->n_kv_head = c->n_head;
        c->norm_kind = VC_NORM_LAYER;
        c->norm_eps = 1e-5f; /* nn.LayerNorm's default: OPT's config names none */
        c->qkv_bias = c->o_bias = c->mlp_bias = flag(o, "enable_bias", 1);
        c->mlp_kind = VC_MLP_PLAIN;
        c->learned_pos = 1;
        c->pos_offset = 2;
        c->rot_dim = 0;
        for (int64_t l = 0; l < c->n_layer; l++) c->nope[l] = 1;
    }
    if (is(c, "gptj") || is(c, "codegen")) { /* parallel attention and MLP from one LayerNorm, GPT-J pairs on
                                               * rotary_dim (null: the whole head), biases on the MLP; CodeGen: q, v
                                               * and k fused in 4 blocks */
        int64_t inner = 0, rd = 64;
        const cJSON *rdj = vc_json_member(o, "rotary_dim");
        if ((st = get_int_any(o, "n_inner", 4 * c->hidden, &inner, path)) ||
            (st = check_size(path, "n_inner", inner, 1, DIM_MAX)) ||
            (!cJSON_IsNull(rdj) && (st = get_int_any(o, "rotary_dim", c->head_dim, &rd, path))))
            return st;
        if (cJSON_IsNull(rdj)) rd = c->head_dim;
        if (is(c, "codegen") && c->hidden % 4)
            return vc_fail(VC_ERR_FORMAT, "%s: CodeGen's hidden size %lld is not a multiple of its 4 qkv blocks", path,
                           (long long)c->hidden);
        if (rd < 2 || rd % 2 || rd > c->head_dim)
            return vc_fail(VC_ERR_FORMAT, "%s: rotary_dim %lld does not fit head_dim %lld", path, (long long)rd,
                           (long long)c->head_dim);
        c->inter = inner;
        c->n_kv_head = c->n_head;
        c->norm_kind = VC_NORM_LAYER;
        c->mlp_bias = c->parallel_block = c->rope_interleaved = c->head_bias = 1;
        c->mlp_kind = VC_MLP_PLAIN;
        c->rot_dim = (int)rd;
    }
    if (is(c, "nemotron")) { /* LayerNorm1P: LayerNorms of weight + 1 with biases; relu2 without a gate; half rope */
        c->norm_kind = VC_NORM_LAYER;
        c->norm_offset = 1.0f;
        c->mlp_kind = VC_MLP_PLAIN;
        c->qkv_bias = c->o_bias = flag(o, "attention_bias", 0);
        int given = vc_json_member(o, "partial_rotary_factor") ||
                    vc_json_member(vc_json_member(o, "rope_parameters"), "partial_rotary_factor");
        if (!given && (st = rot_from_fraction(c, 0.5, "partial_rotary_factor", path))) return st;
    }
    if (is(c, "stablelm")) { /* LayerNorms with biases, partial rope (a quarter by default), parallel residuals */
        /* StableLM 2 12B: a LayerNorm without bias over each head of q and k, each head its own weight */
        c->qk_norm = c->qk_norm_heads = flag(o, "qk_layernorm", 0);
        c->norm_kind = VC_NORM_LAYER;
        c->qkv_bias = flag(o, "use_qkv_bias", 0);
        c->parallel_block = flag(o, "use_parallel_residual", 0);
        int given = vc_json_member(o, "partial_rotary_factor") ||
                    vc_json_member(vc_json_member(o, "rope_parameters"), "partial_rotary_factor");
        if (!given && (st = rot_from_fraction(c, 0.25, "partial_rotary_factor", path))) return st;
    }
    if (is(c, "jais2")) { /* LayerNorms with biases, a plain relu2 MLP, attention_bias on o_proj too */
        c->norm_kind = VC_NORM_LAYER;
        c->mlp_kind = VC_MLP_PLAIN;
        c->o_bias = c->qkv_bias;
    }
    if (is(c, "exaone4")) /* OLMo 2's norms with per-head q/k norms; with sliding layers, the others have no rope */
        c->sandwich_norm = c->no_pre_norm = c->qk_norm = 1;
    if (is(c, "cohere") || is(c, "cohere2") || is(c, "cohere2_moe")) { /* Command R: one LayerNorm (no bias) feeding
                            * attention and MLP in parallel, GPT-J pairs, logits times logit_scale */
        double ls;
        c->qk_norm = c->qk_norm_heads = flag(o, "use_qk_norm", 0); /* Command R+: per-head LayerNorm weights */
        if ((st = get_num_any(o, "logit_scale", 0.0625, &ls, path))) return st;
        if (!(ls > 0)) return vc_fail(VC_ERR_FORMAT, "%s: logit_scale must be positive", path);
        c->parallel_block = c->norm_no_bias = c->rope_interleaved = 1;
        c->norm_kind = VC_NORM_LAYER;
        c->logit_divisor = (float)(1.0 / ls);
        /* Cohere2-MoE: RMSNorms when rms_norm_eps is set */
        if (is(c, "cohere2_moe") && vc_json_member(o, "rms_norm_eps")) c->norm_kind = VC_NORM_RMS;
    }
    if (is(c, "arcee")) c->mlp_kind = VC_MLP_PLAIN; /* down(act(up(x))): no gate (relu2) */
    if (is(c, "nanochat")) { /* weightless RMSNorms (embeddings too), q/k normed after a reversed rope, relu2 MLP */
        c->mlp_kind = VC_MLP_PLAIN;
        c->norm_no_weight = c->emb_norm = c->rope_neg = 1;
        c->qk_norm = c->qk_norm_after_rope = 1;
        double cap;
        if ((st = get_num_any(o, "final_logit_softcapping", 15.0, &cap, path))) return st;
        if (vc_json_member(o, "final_logit_softcapping") && cJSON_IsNull(vc_json_member(o, "final_logit_softcapping")))
            cap = 0;
        c->final_softcap = (float)cap;
    }
    if (is(c, "gpt_oss") && (st = parse_gpt_oss(o, path, c))) return st;
    if ((is(c, "qwen3_next") || is(c, "qwen3_5_text") || is(c, "qwen3_5_moe_text")) && (st = parse_linear(o, path, c)))
        return st;
    if (is(c, "olmo_hybrid") && (st = parse_olmo_hybrid(o, path, c))) return st;
    if (is(c, "kimi_linear") && (st = parse_kimi_linear(o, path, c))) return st;
    if (is(c, "minimax") && (st = parse_minimax(o, path, c))) return st;
    if ((is(c, "granite_swa") || is(c, "granitemoe_swa")) && (st = parse_granite_swa(o, path, c))) return st;
    if (is(c, "mamba2") && (st = parse_mamba2_pure(o, path, c))) return st;
    if ((is(c, "jamba") || is(c, "mamba") || is(c, "falcon_mamba")) && (st = parse_mamba1(o, path, c))) return st;
    if ((is(c, "lfm2") || is(c, "lfm2_moe") || is(c, "lfm3")) && (st = parse_lfm2(o, path, c))) return st;
    if ((is(c, "granitemoehybrid") || is(c, "bamba")) && (st = parse_granite_hybrid(o, path, c))) return st;
    if (is(c, "nemotron_h") && (st = parse_nemotron_h(o, path, c))) return st;
    if (is(c, "falcon_h1") && (st = parse_falcon_h1(o, path, c))) return st;
    if ((is(c, "ministral3") || is(c, "mistral4")) && (st = parse_llama4_scaling(o, path, c))) return st;
    if (is(c, "llama4_text") && (st = parse_llama4(o, path, c))) return st;
    if (is(c, "afmoe")) { /* sandwich norms, per-head q/k norms, a gated attention output, muP embeddings */
        c->sandwich_norm = c->qk_norm = c->attn_out_gate = 1;
        if (flag(o, "mup_enabled", 0)) c->emb_scale = (float)sqrt((double)c->hidden);
    }
    if (is(c, "minimax_m2")) { /* q and k RMS-normed over all their heads; the hub's rotary_dim */
        c->qk_norm = c->qk_norm_full = 1;
        int64_t rd = 0;
        if ((st = get_int_any(o, "rotary_dim", 0, &rd, path))) return st;
        if (rd > 0 && c->rope.partial_rotary_factor == 1.0) c->rot_dim = (int)rd;
    }
    if (is(c, "hunyuan_v1_dense")) c->qk_norm = c->qk_norm_after_rope = 1; /* always, as transformers builds it */
    if (is(c, "starcoder2")) { /* LayerNorm, a plain MLP, biases as use_bias says */
        c->norm_kind = VC_NORM_LAYER;
        c->mlp_kind = VC_MLP_PLAIN;
        c->qkv_bias = c->o_bias = c->mlp_bias = flag(o, "use_bias", 1);
    }
    if (is(c, "gpt_neox")) { /* LayerNorms with biases, a plain MLP with biases, parallel residuals with two norms */
        c->norm_kind = VC_NORM_LAYER;
        c->mlp_kind = VC_MLP_PLAIN;
        c->qkv_bias = c->o_bias = flag(o, "attention_bias", 1);
        c->mlp_bias = 1;
        c->parallel_block = c->parallel_norms = flag(o, "use_parallel_residual", 1);
        if (!vc_json_member(o, "rope_parameters") && (st = rotary_keys(o, path, c))) return st; /* Pythia's hub */
    }
    if (is(c, "phi")) {
        c->qk_norm = flag(o, "qk_layernorm", 0); /* per-head LayerNorm on q and k */
        c->parallel_block = 1;
        c->norm_kind = VC_NORM_LAYER;
        c->mlp_kind = VC_MLP_PLAIN;
        c->qkv_bias = c->o_bias = c->mlp_bias = c->head_bias = 1;
    }
    if (is(c, "baichuan")) {
        c->norm_head = 1;
        /* the 13B models use ALiBi: their configs name no max_position_embeddings (model_max_length only)
         * and are not the 7B's width; an explicit "position_embedding" ("alibi" / "rope") wins */
        const char *pe = NULL;
        if ((st = vc_json_get_str(o, "position_embedding", NULL, &pe, path))) return st;
        c->alibi = pe ? !strcasecmp(pe, "alibi")
                      : !vc_json_member(o, "max_position_embeddings") && c->hidden != 4096;
        if (c->alibi) {
            if (c->attn_softcap > 0) return vc_fail(VC_ERR_UNSUPPORTED, "%s: ALiBi with soft-capping", path);
            c->rot_dim = 0;
        }
    }
    if (is(c, "qwen")) {
        c->inter /= 2; /* Qwen(1) writes twice the MLP width */
        if ((st = rotary_keys(o, path, c))) return st;
    }
    if (is(c, "chatglm")) {
        double ratio;
        if (!flag(o, "post_layer_norm", 1) || flag(o, "apply_residual_connection_post_layernorm", 0))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: this ChatGLM layer-norm arrangement is not supported", path);
        if (!flag(o, "rmsnorm", 1)) c->norm_kind = VC_NORM_LAYER;
        if ((st = get_num_any(o, "rope_ratio", 1.0, &ratio, path))) return st;
        if (!c->rope.theta_given) c->rope.theta = 10000.0 * ratio;
        c->rot_dim = (int)(c->head_dim / 2);
        c->rope_interleaved = 1;
        int64_t g = c->n_head;
        if (flag(o, "multi_query_attention", 0) && (st = get_int_any(o, "multi_query_group_num", 1, &g, path))) return st;
        c->n_kv_head = g;
    }
    if ((!strncmp(c->model_type, "deepseek_v", 10) || is(c, "glm4_moe_lite") || is(c, "kimi_linear") ||
         is(c, "mistral4") || is(c, "minicpm3") || is(c, "glm_moe_dsa") || is(c, "youtu") || is(c, "axk1")) &&
        (st = parse_mla(o, path, c)))
        return st;
    if ((is(c, "deepseek_v32") || is(c, "glm_moe_dsa")) && (st = parse_dsa(o, path, c))) return st;
    if (is(c, "minicpm3")) { /* muP-style: embeddings times scale_emb, sublayers times scale_depth / sqrt(layers), the
                              * final hidden over hidden_size / dim_model_base */
        double se, sd, base;
        if ((st = get_num_any(o, "scale_emb", 12, &se, path)) ||
            (st = get_num_any(o, "scale_depth", sqrt((double)c->n_layer), &sd, path)) ||
            (st = get_num_any(o, "dim_model_base", (double)c->hidden, &base, path)))
            return st;
        if (!isfinite(se) || !isfinite(sd) || !(base > 0) || se == 0 || sd == 0)
            return vc_fail(VC_ERR_FORMAT, "%s: scale_emb, scale_depth and dim_model_base must be finite and non-zero", path);
        c->emb_scale = (float)se;
        c->residual_scale = (float)(sd / sqrt((double)c->n_layer));
        c->logit_divisor = (float)((double)c->hidden / base);
    }
    if (is(c, "gemma4_text")) return parse_gemma4(o, path, c);
    /* Youtu-LLM: DeepSeek-V3's config and attention, a dense MLP in every layer (its MoE keys are unused) */
    if (!is(c, "youtu") && !is(c, "dbrx") && (st = parse_moe(o, path, c))) return st; /* DBRX: parse_dbrx */

    if (is(c, "gpt_oss") && c->n_expert <= 0) return vc_fail(VC_ERR_FORMAT, "%s: gpt-oss without num_local_experts", path);
    return VC_OK;
}

static vc_status parse_special_tokens(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t v;
    vc_status st;
    if ((st = get_int_any(o, "bos_token_id", -1, &v, path))) return st;
    if (v > 2147483647) return vc_fail(VC_ERR_FORMAT, "%s: bos_token_id %lld is out of range", path, (long long)v);
    if (v >= 0) c->bos_id = (int)v;
    if ((st = get_int_any(o, "pad_token_id", -1, &v, path))) return st;
    if (v > 2147483647) return vc_fail(VC_ERR_FORMAT, "%s: pad_token_id %lld is out of range", path, (long long)v);
    if (v >= 0) c->pad_id = (int)v;
    const cJSON *e = vc_json_member(o, "eos_token_id");
    if (e && cJSON_IsNumber(e)) {
        c->n_eos = 1;
        if ((st = json_to_int(e, "eos_token_id", 0, path, &c->eos_ids[0]))) return st;
    } else if (e && cJSON_IsArray(e)) {
        const cJSON *x;
        c->n_eos = 0;
        cJSON_ArrayForEach(x, e) if (cJSON_IsNumber(x) && c->n_eos < VC_MAX_EOS) {
            if ((st = json_to_int(x, "eos_token_id", 0, path, &c->eos_ids[c->n_eos]))) return st;
            c->n_eos++;
        }
    }
    return VC_OK;
}

/* architectures[0] *ForSequenceClassification / *ForTokenClassification: a score head instead of the LM
 * head, with len(id2label) or num_labels outputs (transformers' default: 2) */
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
    if (strcmp(m, "fp8"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: quantization_config.quant_method '%s': verlc loads plain, block-scaled "
                       "fp8 and mxfp4 checkpoints (dequantized)", path, m);
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

static vc_status parse_labels(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *a = vc_json_member(o, "architectures");
    const cJSON *a0 = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    const char *name = cJSON_IsString(a0) ? a0->valuestring : "";
    if (!strstr(name, "ForSequenceClassification") && !strstr(name, "ForTokenClassification")) return VC_OK;
    const cJSON *ids = vc_json_member(o, "id2label");
    int64_t n = 2;
    if (cJSON_IsObject(ids)) n = cJSON_GetArraySize(ids);
    else {
        vc_status st = get_int_any(o, "num_labels", 2, &n, path);
        if (st) return st;
    }
    if (n <= 0) return vc_fail(VC_ERR_FORMAT, "%s: %s with %lld labels", path, name, (long long)n);
    c->n_labels = n;
    c->tied = 0;
    return VC_OK;
}

/* Image-text checkpoints whose text decoder verlc runs on text (Gemma 3 4B and up, Mistral 3, Llama 4, InternVL,
 * GLM-4V, the Qwen VL models: multimodal ropes are the plain rope on text positions). The text model is text_config
 * (Qwen2-VL's older configs: the top level), parsed as the text architecture it is; tied embeddings and special
 * tokens may sit at the top level. */
static const struct {
    const char *outer, *inner, *as; /* model_type, text_config's, the text architecture it is parsed as */
    int flat;                       /* the text keys may sit at the top level instead (transformers 4's Qwen2-VL) */
} NESTED_TEXT[] = {
    { "gemma3", "gemma3_text", "gemma3_text", 0 }, { "gemma4", "gemma4_text", "gemma4_text", 0 },
    { "mistral3", "ministral3", "ministral3", 0 }, { "mistral3", "mistral", "mistral", 0 }, /* Ministral 3, Mistral Small 3 */
    { "llama4", "llama4_text", "llama4_text", 0 },
    { "internvl", "qwen2", "qwen2", 0 }, { "internvl", "qwen3", "qwen3", 0 }, { "internvl", "llama", "llama", 0 },
    { "glm4v", "glm4v_text", "glm4", 0 }, { "glm4v_moe", "glm4v_moe_text", "glm4_moe", 0 },
    { "qwen2_vl", "qwen2_vl_text", "qwen2", 1 }, { "qwen2_5_vl", "qwen2_5_vl_text", "qwen2", 1 },
    { "qwen3_vl", "qwen3_vl_text", "qwen3", 0 }, { "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_moe", 0 },
    { "qwen3_5", "qwen3_5_text", "qwen3_5_text", 0 }, { "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_moe_text", 0 },
    { "apertus1p5", "apertus1p5_text", "apertus1p5_text", 0 },
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
    c->arch = vc_arch_find(NESTED_TEXT[k].outer);
    c->nested_text = 1;
    snprintf(c->model_type, sizeof c->model_type, "%s", NESTED_TEXT[k].outer);
    c->tied = flag(o, "tie_word_embeddings", c->tied);
    if (c->tied && c->out_vocab)
        return vc_fail(VC_ERR_FORMAT, "%s: tie_word_embeddings with text_config.output_vocab_size %lld: a pruned LM head "
                       "cannot be the embedding matrix", path, (long long)c->out_vocab);
    return parse_special_tokens(o, path, c);
}

vc_status vc_config_parse_model(const cJSON *o, const char *path, vc_model_config *c) {
    int nk = nested_kind(o);
    if (nk >= 0) return parse_nested_text(o, path, c, nk);
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
    if ((st = get_int_any(o, "vocab_size padded_vocab_size", 0, &c->vocab, path)) ||
        (st = get_int_any(o, "hidden_size n_embd d_model n_embed", 0, &c->hidden, path)) ||
        (st = get_int_any(o, "num_hidden_layers num_layers n_layer n_layers", 0, &c->n_layer, path)) ||
        (st = get_int_any(o, "num_attention_heads n_head n_heads num_heads", 0, &c->n_head, path)) ||
        (st = get_int_any(o, "intermediate_size ffn_hidden_size", 0, &c->inter, path)) ||
        (st = get_int_any(o, "max_position_embeddings seq_length n_positions max_seq_len", 4096, &c->max_pos, path)) ||
        (st = get_num_any(o, "rms_norm_eps layer_norm_epsilon layernorm_epsilon layer_norm_eps norm_epsilon norm_eps", 1e-6, &eps, path)))
        return st;
    if (c->n_layer <= 0 && is(c, "nemotron_h")) { /* transformers 5 writes its blocks' list without the count */
        const cJSON *t = vc_json_member(o, "layers_block_type"), *p = vc_json_member(o, "hybrid_override_pattern");
        c->n_layer = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : cJSON_IsString(p) ? (int64_t)strlen(p->valuestring) : 0;
    }
    if (c->n_head <= 0 && (is(c, "mamba") || is(c, "falcon_mamba") || is(c, "mamba2"))) c->n_head = 1; /* no attention */
    if (c->vocab <= 0 || c->hidden <= 0 || c->n_layer <= 0 || c->n_head <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s: vocab_size, hidden_size, num_hidden_layers and num_attention_heads must be positive", path);
    if (c->n_layer > VC_MAX_LAYERS) return vc_fail(VC_ERR_UNSUPPORTED, "%s: more than %d layers", path, VC_MAX_LAYERS);
    if ((st = check_size(path, "vocab_size", c->vocab, 1, DIM_MAX)) ||
        (st = check_size(path, "hidden_size", c->hidden, 1, DIM_MAX)) ||
        (st = check_size(path, "num_attention_heads", c->n_head, 1, HEAD_MAX)))
        return st;
    if ((st = get_int_any(o, "num_key_value_heads", c->n_head, &c->n_kv_head, path)) ||
        (st = get_int_any(o, "head_dim kv_channels", c->hidden / c->n_head, &c->head_dim, path)))
        return st;
    if (c->n_kv_head <= 0 || c->n_head % c->n_kv_head)
        return vc_fail(VC_ERR_FORMAT, "%s: num_key_value_heads %lld does not divide num_attention_heads %lld", path,
                       (long long)c->n_kv_head, (long long)c->n_head);
    if (!(eps >= 0 && eps < 1e30))
        return vc_fail(VC_ERR_FORMAT, "%s: the norm epsilon must be a non-negative number, got %g", path, eps);
    c->norm_eps = (float)eps;
    if ((st = check_size(path, "head_dim", c->head_dim, 1, HEAD_MAX))) return st;
    c->tied = flag(o, "tie_word_embeddings", is(c, "gemma") || is(c, "gemma2") || is(c, "gemma3_text") || is(c, "gemma4_text") ||
                                             is(c, "gpt2") || is(c, "gpt_bigcode") || is(c, "opt") || is(c, "falcon") ||
                                             is(c, "mpt") || is(c, "bloom") || is(c, "gpt_neo") ||
                                             is(c, "vaultgemma") || is(c, "lfm2") || is(c, "lfm3") ||
                                             is(c, "lfm2_moe"));
    if ((st = parse_act(o, path, c)) || (st = vc_rope_parse(o, path, &c->rope))) return st;
    if ((st = rot_from_fraction(c, c->rope.partial_rotary_factor, "partial_rotary_factor", path))) return st;
    if (c->rope.type == VC_ROPE_PROPORTIONAL) c->rot_dim = (int)c->head_dim; /* it rotates its fraction itself */
    c->attn_scale = (float)(1.0 / sqrt((double)c->head_dim));
    if ((st = parse_family(o, path, c)) || (st = parse_windows(o, path, c)) || (st = parse_nope(o, path, c)) ||
        (st = parse_special_tokens(o, path, c)))
        return st;
    if (is(c, "gemma4_text") && (st = gemma4_layers(o, path, c))) return st;
    if (is(c, "mimo_v2_flash") && (st = parse_mimo_v2(o, path, c))) return st;
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
