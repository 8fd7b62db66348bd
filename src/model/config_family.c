/* config.json's family-specific keys and flags: an ordered table of rules, each for some model_types (later rules
 * overwrite what earlier ones set). */
#include "config_priv.h"
#include <math.h>
#include <strings.h>

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

/* Apertus 1.5's output_vocab_size (null or vocab_size: the whole vocabulary): an LM head over the first ids only */
static vc_status parse_out_vocab(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *v = vc_json_member(o, "output_vocab_size");
    int64_t n = 0;
    vc_status st;
    if (!v || cJSON_IsNull(v)) return VC_OK;
    if ((st = vc_json_get_int(o, "output_vocab_size", 0, &n, path)) ||
        (st = vc_mcfg_check_size(path, "output_vocab_size", n, 1, c->vocab)))
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
    if (vc_mcfg_flag(o, "moe_apply_router_weight_on_input", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: moe_apply_router_weight_on_input (the routing weights on the experts' "
                       "inputs; transformers refuses it too) is not built", path);
    if (nh && !cJSON_IsNull(nh) && (!cJSON_IsArray(nh) || cJSON_GetArraySize(nh) != (int)c->n_layer))
        return vc_fail(VC_ERR_FORMAT, "%s: num_attention_heads_per_layer must list %lld layers", path, (long long)c->n_layer);
    for (int64_t l = 0; cJSON_IsArray(nh) && l < c->n_layer; l++) {
        const cJSON *e = cJSON_GetArrayItem(nh, (int)l);
        int v = 0;
        vc_status st = cJSON_IsNumber(e) ? vc_mcfg_json_to_int(e, "num_attention_heads_per_layer", 1, path, &v)
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
    if ((st = vc_mcfg_int_any(ac, "kv_n_heads", 1, &kv, actx)) ||
        (st = vc_mcfg_num_any(ac, "rope_theta", 10000.0, &theta, actx)) ||
        (st = vc_mcfg_int_any(fc, "ffn_hidden_size", 3584, &c->moe_inter, fctx)) ||
        (st = vc_mcfg_check_size(fctx, "ffn_hidden_size", c->moe_inter, 1, DIM_MAX)) ||
        (st = vc_mcfg_int_any(fc, "moe_num_experts", 4, &c->n_expert, fctx)) ||
        (st = vc_mcfg_int_any(fc, "moe_top_k", 1, &c->top_k, fctx)))
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
    int glm = vc_mcfg_is(c, "glm_moe_dsa");
    int64_t freq = 1, off = 2;
    if ((st = vc_mcfg_int_any(o, "index_topk", 2048, &c->dsa_topk, path)) ||
        (st = vc_mcfg_check_size(path, "index_topk", c->dsa_topk, 1, (int64_t)1 << 40)) ||
        (st = vc_mcfg_int_any(o, "index_n_heads", glm ? 32 : 64, &c->dsa_heads, path)) ||
        (st = vc_mcfg_check_size(path, "index_n_heads", c->dsa_heads, 1, 4096)) ||
        (st = vc_mcfg_int_any(o, "index_head_dim", 128, &c->dsa_dim, path)) ||
        (st = vc_mcfg_check_size(path, "index_head_dim", c->dsa_dim, 1, 65536)) ||
        (st = vc_mcfg_int_any(o, "index_topk_freq", 1, &freq, path)) ||
        (st = vc_mcfg_int_any(o, "index_skip_topk_offset", 2, &off, path)))
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

static vc_status parse_mla(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    c->mla = 1;
    if ((st = vc_mcfg_int_any(o, "q_lora_rank", 0, &c->q_lora_rank, path)) ||
        (st = vc_json_req_int(o, "kv_lora_rank", &c->kv_lora_rank, path)) ||
        (st = vc_json_req_int(o, "qk_nope_head_dim", &c->qk_nope_dim, path)) ||
        (st = vc_json_req_int(o, "qk_rope_head_dim", &c->qk_rope_dim, path)) ||
        (st = vc_json_req_int(o, "v_head_dim", &c->v_head_dim, path)))
        return st;
    c->n_kv_head = c->n_head;
    c->head_dim = c->qk_nope_dim + c->qk_rope_dim;
    c->rot_dim = (int)c->qk_rope_dim;
    c->rope_interleaved = vc_mcfg_flag(o, "rope_interleave", !vc_mcfg_is(c, "minicpm3")); /* MiniCPM3: rotate-half pairs */
    double ms = vc_mcfg_is_any(c, "deepseek_v3 mistral4 minicpm3 deepseek_v32 glm_moe_dsa") ? vc_rope_softmax_mscale(&c->rope)
                                                                                          : 1.0;
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

/* gpt-oss: attention sinks, biases on attention, router and experts, its clamped SwiGLU (fixed constants) */
static vc_status parse_gpt_oss(const cJSON *o, const char *path, vc_model_config *c) {
    double alpha, limit;
    vc_status st;
    if ((st = vc_mcfg_num_any(o, "swiglu_alpha", 1.702, &alpha, path)) ||
        (st = vc_mcfg_num_any(o, "swiglu_limit", 7.0, &limit, path)))
        return st;
    if (fabs(alpha - 1.702) > 1e-6 || fabs(limit - 7.0) > 1e-6)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: swiglu_alpha %g / swiglu_limit %g: verlc computes gpt-oss's SwiGLU with "
                       "its released constants 1.702 and 7 only", path, alpha, limit);
    c->act = VC_ACT_OAI_GLU;
    c->attn_sinks = 1;
    c->qkv_bias = c->o_bias = vc_mcfg_flag(o, "attention_bias", 1);
    return VC_OK;
}

/* Llama 4's text model: NoPE layers (no_rope_layers[l] == 0) with temperature-tuned queries, rope layers with
 * chunked attention and weightless q/k norms, GPT-J rope pairs, the dense layers' own width */
static vc_status parse_llama4(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t mlp = 0, chunk = 0, every = 4;
    double scale = 0.1, fl = 8192;
    if ((st = vc_mcfg_int_any(o, "intermediate_size_mlp", 16384, &mlp, path)) ||
        (st = vc_mcfg_int_any(o, "no_rope_layer_interval", 4, &every, path)) ||
        (st = vc_mcfg_num_any(o, "attn_scale", 0.1, &scale, path)) ||
        (st = vc_mcfg_num_any(o, "floor_scale", 8192, &fl, path)))
        return st;
    const cJSON *cs = vc_json_member(o, "attention_chunk_size");
    if (cs && !cJSON_IsNull(cs) && (st = vc_mcfg_int_any(o, "attention_chunk_size", 0, &chunk, path))) return st;
    if (!cs) chunk = 8192;
    if (mlp <= 0 || every <= 0 || chunk < 0 || chunk > 1 << 30 || !(fl >= 1))
        return vc_fail(VC_ERR_FORMAT, "%s: intermediate_size_mlp, no_rope_layer_interval, attention_chunk_size or "
                       "floor_scale out of range", path);
    c->inter = mlp;
    c->rope_interleaved = 1;
    c->qk_l2norm = vc_mcfg_flag(o, "use_qk_norm", 1);
    if (vc_mcfg_flag(o, "attn_temperature_tuning", 1)) c->q_temp_scale = (float)scale, c->q_temp_floor = (float)fl;
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

/* Gemma 4's and LFM3's ropes when a config has no rope_parameters (transformers' defaults): proportional on the full
 * layers (base 1e6, a fraction `part` of the pairs), plain on the sliding ones (base 10000) */
void vc_mcfg_proportional_default(vc_model_config *c, double part) {
    c->rope.type = VC_ROPE_PROPORTIONAL;
    c->rope.partial_rotary_factor = part;
    if (!c->rope.theta_given) c->rope.theta = 1e6;
    c->rope_local = c->rope;
    c->rope_local.type = VC_ROPE_DEFAULT;
    c->rope_local.partial_rotary_factor = 1.0;
    c->rope_local.theta = 10000.0;
    c->local_rope = 1;
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

/* the older rope keys (Qwen1, GPT-NeoX's hub configs): rotary_emb_base, rotary_pct of each head (its default pct_def:
 * GPT-NeoX's 0.25, as transformers' GPTNeoXConfig takes a missing rotary_pct) */
static vc_status rotary_keys(const cJSON *o, const char *path, vc_model_config *c, double pct_def) {
    double base, pct;
    vc_status st;
    if ((st = vc_mcfg_num_any(o, "rotary_emb_base", 10000, &base, path)) ||
        (st = vc_mcfg_num_any(o, "rotary_pct", pct_def, &pct, path)))
        return st;
    c->rope.theta = base;
    return vc_mcfg_rot_fraction(c, pct, "rotary_pct", path);
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
    c->k_eq_v = vc_mcfg_flag(o, "attention_k_eq_v", 0);
    double f;
    if ((st = vc_mcfg_num_any(o, "final_logit_softcapping", 0, &f, path))) return st;
    c->final_softcap = (float)f;
    if (!vc_json_member(o, "rope_parameters")) vc_mcfg_proportional_default(c, 0.25);
    int64_t ple = 0, plev = 0, tk = 0;
    if ((st = vc_mcfg_int_any(o, "hidden_size_per_layer_input", 0, &ple, path)) ||
        (st = vc_mcfg_int_any(o, "vocab_size_per_layer_input", c->vocab, &plev, path)) ||
        (st = vc_mcfg_check_size(path, "hidden_size_per_layer_input", ple, 0, DIM_MAX)) ||
        (st = vc_mcfg_check_size(path, "vocab_size_per_layer_input", plev, ple ? 1 : 0, DIM_MAX)))
        return st;
    if (ple && ple * c->n_layer > DIM_MAX)
        return vc_fail(VC_ERR_FORMAT, "%s: hidden_size_per_layer_input %lld x %lld layers is too wide", path,
                       (long long)ple, (long long)c->n_layer);
    if (ple && plev < c->vocab)
        return vc_fail(VC_ERR_FORMAT, "%s: vocab_size_per_layer_input %lld is below vocab_size %lld", path, (long long)plev,
                       (long long)c->vocab);
    c->ple_dim = ple;
    c->ple_vocab = ple ? plev : 0;
    if (!vc_mcfg_flag(o, "enable_moe_block", 0)) return VC_OK;
    if ((st = vc_mcfg_int_any(o, "num_experts", 0, &c->n_expert, path)) ||
        (st = vc_mcfg_int_any(o, "top_k_experts", 0, &tk, path)) ||
        (st = vc_mcfg_int_any(o, "moe_intermediate_size", 0, &c->moe_inter, path)))
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

/* ---- the rules: one function per block of keys and flags, run for the model_types FAMILIES names ---- */

/* attention biases every family may name; Qwen 1 and 2 always have q/k/v biases */
static vc_status fam_biases(const cJSON *o, const char *path, vc_model_config *c) {
    /* (attention_bias as the family's attention reads it: Mistral's, Mixtral's, Phi-3's ignore it) */
    int attn_bias = vc_mcfg_flag(o, "attention_bias", 0) &&
                    !vc_mcfg_is_any(c, "mistral mixtral ministral ministral3 mistral3 phi3 exaone4 exaone_moe cwm minimax "
                                       "minimax_m2 lfm2 lfm2_moe nemotron_h kolibri1 jamba");
    c->qkv_bias = attn_bias || vc_mcfg_is_any(c, "qwen2 qwen2_moe qwen") ||
                  vc_mcfg_flag(o, "add_qkv_bias", 0) || vc_mcfg_flag(o, "bias", 0);
    c->o_bias = vc_mcfg_flag(o, "add_bias_linear", 0) || (vc_mcfg_is(c, "internlm2") && vc_mcfg_flag(o, "bias", 0)) ||
                vc_mcfg_flag(o, "attention_out_bias", 0) || /* Seed-OSS */
                (vc_mcfg_is(c, "llama") && attn_bias); /* LlamaAttention's o_proj (InternLM3's qkv_bias) */
    /* mlp_bias where the family's MLP reads it (transformers' LlamaMLP and its copies; remote-code families too):
     * OLMo 2's, Mistral's, Qwen's MLPs have none whatever the config says */
    c->mlp_bias = vc_mcfg_flag(o, "mlp_bias", 0) &&
                  vc_mcfg_is_any(c, "llama arcee bamba cwm deepseek_v2 falcon_h1 granite granite_swa helium hy_v3 hyperclovax "
                                    "jais2 minicpm3 nemotron nemotron_h seed_oss smollm3 deepseek yi baichuan chatglm internlm2 qwen");
    return VC_OK;
}

static vc_status fam_qk_norm(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = 1;
    return VC_OK;
}

/* GLM-4.5: per-head RMSNorm of q and k, as Qwen3's */
static vc_status fam_glm4_moe(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = vc_mcfg_flag(o, "use_qk_norm", 0);
    return VC_OK;
}

/* Gemma: (1 + w) RMSNorms, embeddings times sqrt(hidden) */
static vc_status fam_gemma(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_offset = 1.0f;
    c->emb_scale = sqrtf((float)c->hidden);
    return VC_OK;
}

/* rope_parameters per layer type (OLMo 3, ...): sliding layers' own */
static vc_status fam_rope_by_layer_type(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *rp = vc_json_member(o, "rope_parameters");
    if (c->local_rope || !cJSON_IsObject(vc_json_member(rp, "sliding_attention")) ||
        !cJSON_IsObject(vc_json_member(rp, "full_attention")))
        return VC_OK;
    c->local_rope = 1;
    vc_status st = vc_rope_parse_layer(o, path, "sliding_attention", &c->rope_local);
    if (st) return st;
    double part = c->rope_local.partial_rotary_factor, r = (double)c->head_dim * part;
    if (part != c->rope.partial_rotary_factor) { /* its own rotated share (Laguna: all dims; full layers half) */
        if (!(r >= 2 && r <= (double)c->head_dim) || (int)r % 2)
            return vc_fail(VC_ERR_FORMAT, "%s: rope_parameters.sliding_attention.partial_rotary_factor %g gives no even "
                           "rotary dimension within head_dim %lld", path, part, (long long)c->head_dim);
        c->rot_dim_local = (int)r;
    }
    return VC_OK;
}

/* Gemma 2 and 3: sandwich norms, query_pre_attn_scalar, soft-capped attention (Gemma 2's; transformers' Gemma 3 keeps
 * attn_logit_softcapping in its config but never applies it) and logits */
static vc_status fam_gemma2(const cJSON *o, const char *path, vc_model_config *c) {
    double qs, a, f;
    vc_status st;
    c->sandwich_norm = !vc_mcfg_is(c, "vaultgemma"); /* VaultGemma: Gemma 2 without the post-sublayer norms */
    if ((st = vc_mcfg_num_any(o, "query_pre_attn_scalar", (double)c->head_dim, &qs, path)) ||
        (st = vc_mcfg_num_any(o, "attn_logit_softcapping", 0, &a, path)) ||
        (st = vc_mcfg_num_any(o, "final_logit_softcapping", 0, &f, path)))
        return st;
    c->attn_scale = (float)(1.0 / sqrt(qs));
    c->attn_softcap = vc_mcfg_is(c, "gemma3_text") ? 0.0f : (float)a; /* Gemma 3's attention passes no soft-cap on */
    c->final_softcap = (float)f;
    return VC_OK;
}

static vc_status fam_cwm(const cJSON *o, const char *path, vc_model_config *c) {
    if (vc_json_member(o, "rope_parameters") || vc_json_member(o, "rope_scaling")) return VC_OK;
    /* CWM's default rope (transformers' CwmConfig): llama3 with theta 1e6, factor 16, frequency factors 1 and 4,
     * 8192 original positions */
    c->rope.type = VC_ROPE_LLAMA3;
    if (!c->rope.theta_given) c->rope.theta = 1e6;
    c->rope.factor = 16.0;
    c->rope.has_factor = 1;
    c->rope.low_freq_factor = 1.0;
    c->rope.high_freq_factor = 4.0;
    c->rope.original_max_pos = 8192;
    return VC_OK;
}

/* IBM Granite (3.x, 4): four multipliers. HyperCLOVA X: the same, but its attention multiplier defaults to
 * head_dim^-0.5 and its logits_scaling multiplies; norms after both sublayers (use_post_norm) */
static vc_status fam_granite(const cJSON *o, const char *path, vc_model_config *c) {
    int hcx = vc_mcfg_is(c, "hyperclovax");
    double e, r, a, l;
    vc_status st;
    if ((st = vc_mcfg_num_any(o, "embedding_multiplier", 1, &e, path)) ||
        (st = vc_mcfg_num_any(o, "residual_multiplier", 1, &r, path)) ||
        (st = vc_mcfg_num_any(o, "attention_multiplier", hcx ? 1.0 / sqrt((double)c->head_dim) : 1.0, &a, path)) ||
        (st = vc_mcfg_num_any(o, "logits_scaling", 1, &l, path)))
        return st;
    if (!(e > 0 && r > 0 && a > 0 && l > 0))
        return vc_fail(VC_ERR_FORMAT, "%s: %s's multipliers must be positive", path, hcx ? "HyperCLOVA X" : "Granite");
    c->emb_scale = (float)e, c->residual_scale = (float)r, c->attn_scale = (float)a;
    c->logit_divisor = (float)(hcx ? 1.0 / l : l);
    if (hcx) c->sandwich_norm = vc_mcfg_flag(o, "use_post_norm", 1);
    return VC_OK;
}

static vc_status fam_gptj_pairs(const cJSON *o, const char *path, vc_model_config *c) {
    c->rope_interleaved = 1; /* GPT-J pairs */
    return VC_OK;
}

static vc_status fam_ernie(const cJSON *o, const char *path, vc_model_config *c) {
    if (vc_mcfg_flag(o, "use_bias", 0)) c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->head_bias = c->mlp_bias && vc_mcfg_is(c, "ernie4_5_moe"); /* the MoE model's LM head too; the dense one's not */
    return VC_OK;
}

static vc_status fam_glm4(const cJSON *o, const char *path, vc_model_config *c) {
    c->sandwich_norm = 1; /* post_self_attn / post_mlp norms */
    return VC_OK;
}

static vc_status fam_axk1(const cJSON *o, const char *path, vc_model_config *c) {
    c->moe_post_norm = 1; /* A.X K1: the MoE block's output RMS-normed */
    return VC_OK;
}

static vc_status fam_kolibri(const cJSON *o, const char *path, vc_model_config *c) {
    c->sandwich_norm = c->qk_norm = 1; /* GLM-4's four norms, per-head q/k norms */
    return VC_OK;
}

static vc_status fam_flint(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = c->attn_sinks = 1; /* Qwen3-MoE's attention with a sink per head in every layer */
    return VC_OK;
}

/* OLMo 2: norms only after the sublayers; q and k normed over all their heads */
static vc_status fam_olmo2(const cJSON *o, const char *path, vc_model_config *c) {
    c->sandwich_norm = c->no_pre_norm = c->qk_norm = c->qk_norm_full = 1;
    return VC_OK;
}

static vc_status fam_olmoe(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = c->qk_norm_full = 1; /* pre-norms, q and k normed over all their heads */
    return VC_OK;
}

/* OLMo 3 under a hub-style config (rope_theta and rope_scaling, no per-layer-type rope_parameters): transformers'
 * Olmo3Config gives rope_scaling to the full layers alone and the sliding layers a default rope at its default_theta
 * 500000 (rope_theta is taken by the full layers' entry first); the released 7B's yarn so stays off its sliding layers */
static vc_status fam_olmo3_rope(const cJSON *o, const char *path, vc_model_config *c) {
    if (c->local_rope) return VC_OK; /* per-layer-type rope_parameters: read as given */
    cJSON *t = cJSON_CreateObject(), *rp = t ? cJSON_AddObjectToObject(t, "rope_parameters") : NULL;
    const cJSON *mp = vc_json_member(o, "max_position_embeddings");
    vc_status st = rp && cJSON_AddStringToObject(rp, "rope_type", "default") && cJSON_AddNumberToObject(rp, "rope_theta", 500000.0) &&
                           (!cJSON_IsNumber(mp) || cJSON_AddNumberToObject(t, "max_position_embeddings", mp->valuedouble))
                       ? vc_rope_parse_layer(t, path, NULL, &c->rope_local)
                       : VC_ERR_NOMEM;
    cJSON_Delete(t);
    if (st) return st;
    c->local_rope = 1;
    return VC_OK;
}

/* OLMo 1: LayerNorms without weight or bias, eps 1e-5 */
static vc_status fam_olmo(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->norm_no_weight = c->norm_no_bias = 1;
    c->norm_eps = 1e-5f;
    return VC_OK;
}

/* OLMo's and OLMoE's clip_qkv: q, k and v clamped to [-clip, clip] (OLMoE: q and k after their norms); FlexOlmo's
 * attention never reads it, so neither does verlc */
static vc_status fam_clip_qkv(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *cq = vc_json_member(o, "clip_qkv");
    if (!cq || cJSON_IsNull(cq) || vc_mcfg_is(c, "flex_olmo")) return VC_OK;
    if (!cJSON_IsNumber(cq) || !(cq->valuedouble > 0) || !isfinite(cq->valuedouble))
        return vc_fail(VC_ERR_FORMAT, "%s: clip_qkv must be a positive number or null", path);
    c->clip_qkv = (float)cq->valuedouble;
    c->clip_after_norm = vc_mcfg_is(c, "olmoe");
    return VC_OK;
}

static vc_status fam_hunyuan(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = c->qk_norm_after_rope = 1;
    return VC_OK;
}

static vc_status fam_exaone_moe(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = 1; /* per-head q/k RMSNorm; global layers without rope (parse_nope) */
    return VC_OK;
}

/* Apertus: per-head q/k norms, a plain MLP with xIELU */
static vc_status fam_apertus(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = 1;
    c->mlp_kind = VC_MLP_PLAIN;
    return VC_OK;
}

/* learned absolute positions (GPT-2, GPT-Neo, OPT): no rope in any layer */
static void learned_positions(vc_model_config *c) {
    c->learned_pos = 1;
    c->rot_dim = 0;
    for (int64_t l = 0; l < c->n_layer; l++) c->nope[l] = 1;
}

/* GPT-2: LayerNorms and linears with biases, learned positions, no rope, a plain MLP; GPT-BigCode: one kv head with
 * multi_query */
/* a decoder-only MLP width under its family's key (4 x hidden by default); cross-attention refused */
static vc_status decoder_width(const cJSON *o, const char *path, const char *key, const vc_model_config *c, int64_t *w) {
    vc_status st;
    if ((st = vc_mcfg_int_any(o, key, 4 * c->hidden, w, path)) || (st = vc_mcfg_check_size(path, key, *w, 1, DIM_MAX)))
        return st;
    if (vc_mcfg_flag(o, "add_cross_attention", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: add_cross_attention is not built", path);
    return VC_OK;
}

static vc_status fam_gpt2(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t inner = 0;
    vc_status st = decoder_width(o, path, "n_inner", c, &inner);
    if (st) return st;
    /* (reorder_and_upcast_attn: f32 scores, as verlc's always are) */
    c->attn_scale_by_layer = vc_mcfg_is(c, "gpt2") && vc_mcfg_flag(o, "scale_attn_by_inverse_layer_idx", 0);
    c->inter = inner;
    c->n_kv_head = vc_mcfg_is(c, "gpt_bigcode") && vc_mcfg_flag(o, "multi_query", 1)
                       ? 1 : c->n_head; /* (whatever else it says) */
    c->norm_kind = VC_NORM_LAYER;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->mlp_kind = VC_MLP_PLAIN;
    learned_positions(c);
    if (!vc_mcfg_flag(o, "scale_attn_weights", 1)) c->attn_scale = 1.0f;
    return VC_OK;
}

/* OpenAI GPT (GPT-1): GPT-2's layers with their LayerNorms after the residual adds (ln_1, ln_2) and no final norm,
 * an MLP four times as wide, tied embeddings */
static vc_status fam_openai_gpt(const cJSON *o, const char *path, vc_model_config *c) {
    c->inter = 4 * c->hidden;
    c->n_kv_head = c->n_head;
    c->norm_kind = VC_NORM_LAYER;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->mlp_kind = VC_MLP_PLAIN;
    c->post_ln = c->no_final_norm = 1;
    learned_positions(c);
    return VC_OK;
}

/* GPT-Neo: GPT-2's learned positions, no attention scaling, global and local (windowed) layers */
static vc_status fam_gpt_neo(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t w = 256;
    const cJSON *at = vc_json_member(o, "attention_layers"), *e;
    vc_status st;
    if ((st = vc_mcfg_int_any(o, "window_size", 256, &w, path)) ||
        (st = vc_mcfg_check_size(path, "window_size", w, 1, 1 << 30)))
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
    learned_positions(c);
    c->attn_scale = 1.0f;
    return VC_OK;
}

/* BLOOM: the embeddings LayerNorm-ed, ALiBi, query_key_value per head, biases, a GELU MLP */
static vc_status fam_bloom(const cJSON *o, const char *path, vc_model_config *c) {
    if (vc_mcfg_flag(o, "apply_residual_connection_post_layernorm", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: apply_residual_connection_post_layernorm is not built", path);
    int64_t H;
    vc_status st = vc_mcfg_int_any(o, "hidden_size n_embed", c->hidden, &H, path);
    if (st) return st;
    c->n_kv_head = c->n_head;
    c->inter = 4 * c->hidden;
    c->norm_kind = VC_NORM_LAYER;
    c->emb_norm = 1;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->mlp_kind = VC_MLP_PLAIN;
    c->act = VC_ACT_GELU_TANH;
    c->alibi = 1;
    c->rot_dim = 0;
    return VC_OK;
}

/* MPT: ALiBi, no biases, a GELU MLP */
static vc_status fam_mpt(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *ac = vc_json_member(o, "attn_config");
    double ratio = 4, bmax = 8, ss = 0;
    vc_status st;
    if (ac && !cJSON_IsObject(ac)) return vc_fail(VC_ERR_FORMAT, "%s: key 'attn_config': expected an object", path);
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: attn_config", path);
    if ((st = vc_mcfg_num_any(o, "expansion_ratio", 4, &ratio, path)) ||
        (st = vc_mcfg_num_any(ac, "alibi_bias_max", 8, &bmax, ctx)) ||
        (st = vc_mcfg_num_any(ac, "softmax_scale", 0, &ss, ctx)))
        return st;
    const cJSON *cq = vc_json_member(ac, "clip_qkv"); /* Wqkv's output clipped (null: not) */
    if (cq && !cJSON_IsNull(cq) && (!cJSON_IsNumber(cq) || !(cq->valuedouble > 0)))
        return vc_fail(VC_ERR_FORMAT, "%s: clip_qkv must be a positive number or null", ctx);
    c->clip_qkv = cq && cJSON_IsNumber(cq) ? (float)cq->valuedouble : 0.0f;
    /* (no_bias: transformers' MPT has no biases whatever it says) */
    if (!vc_mcfg_flag(ac, "alibi", 1) || vc_mcfg_flag(ac, "qk_ln", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: MPT is built with ALiBi and no qk_ln", path);
    if (bmax != 8) /* transformers builds MPT's slopes with 8 whatever the config says; MosaicML's code does not */
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: alibi_bias_max %g (transformers' MPT uses 8)", ctx, bmax);
    if (ratio != 4) /* transformers' MptMLP is 4 x d_model wide whatever the config says */
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: expansion_ratio %g (transformers' MPT is built with 4)", path, ratio);
    c->inter = 4 * c->hidden;
    c->n_kv_head = c->n_head;
    c->norm_kind = VC_NORM_LAYER;
    c->norm_no_bias = 1;
    double eps = 1e-5; /* transformers' MPT norms take layer_norm_epsilon */
    if ((st = vc_mcfg_num_any(o, "layer_norm_epsilon", 1e-5, &eps, path))) return st;
    c->norm_eps = (float)eps;
    c->mlp_kind = VC_MLP_PLAIN;
    c->act = VC_ACT_GELU_ERF;
    c->alibi = 1; /* MPT's slopes with alibi_bias_max 8 are BLOOM's, for any head count */
    c->rot_dim = 0;
    if (ss > 0) c->attn_scale = (float)ss;
    return VC_OK;
}

/* Falcon: GQA (new_decoder_architecture) or multi-query, parallel attention and MLP */
static vc_status fam_falcon(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t ffn = 0, kv = c->n_head, nln = 2;
    int newa = vc_mcfg_flag(o, "new_decoder_architecture", 0);
    vc_status st;
    if (vc_mcfg_flag(o, "alibi", 0)) { /* Falcon-RW: BLOOM's slopes in transformers' bf16 table, scaled by 1 / sqrt(d)
                                        * as the scores are; no rope */
        c->alibi = 2;
        c->rot_dim = 0;
        c->alibi_scale = (float)(1.0 / sqrt((double)c->head_dim));
    }
    if ((st = vc_mcfg_int_any(o, "ffn_hidden_size", 4 * c->hidden, &ffn, path)) ||
        (st = vc_mcfg_check_size(path, "ffn_hidden_size", ffn, 1, DIM_MAX)) ||
        (st = vc_mcfg_int_any(o, "num_kv_heads", c->n_head, &kv, path)) ||
        (st = vc_mcfg_int_any(o, "num_ln_in_parallel_attn", 2, &nln, path)))
        return st;
    c->n_kv_head = newa ? kv : vc_mcfg_flag(o, "multi_query", 1) ? 1 : c->n_head;
    if (c->n_kv_head < 1 || c->n_head % c->n_kv_head)
        return vc_fail(VC_ERR_FORMAT, "%s: num_kv_heads %lld does not divide %lld heads", path,
                       (long long)c->n_kv_head, (long long)c->n_head);
    c->inter = ffn;
    c->norm_kind = VC_NORM_LAYER;
    c->qkv_bias = c->o_bias = c->mlp_bias = vc_mcfg_flag(o, "bias", 0);
    c->mlp_kind = VC_MLP_PLAIN;
    c->parallel_block = newa || vc_mcfg_flag(o, "parallel_attn", 1);
    c->parallel_norms = newa && nln == 2;
    return VC_OK;
}

/* PhiMoE: LayerNorms with biases, optional attention and LM-head biases */
static vc_status fam_phimoe(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->qkv_bias = c->o_bias = vc_mcfg_flag(o, "attention_bias", 0);
    c->head_bias = vc_mcfg_flag(o, "lm_head_bias", 0);
    return VC_OK;
}

/* OPT: pre-norm LayerNorms and linears with biases, learned positions after 2 rows, relu MLP */
static vc_status fam_opt(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t wp = c->hidden, ffn = 0;
    vc_status st;
    if ((st = vc_mcfg_int_any(o, "word_embed_proj_dim", c->hidden, &wp, path)) ||
        (st = vc_mcfg_int_any(o, "ffn_dim", 4 * c->hidden, &ffn, path)) ||
        (st = vc_mcfg_check_size(path, "ffn_dim", ffn, 1, DIM_MAX)))
        return st;
    if (!vc_mcfg_flag(o, "layer_norm_elementwise_affine", 1))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: OPT with LayerNorms without weights is not built", path);
    if ((st = vc_mcfg_check_size(path, "word_embed_proj_dim", wp, 1, DIM_MAX))) return st;
    /* OPT-350m: norms after the residual adds and none after the last layer; 512-wide embeddings projected in
     * and out */
    c->post_ln = !vc_mcfg_flag(o, "do_layer_norm_before", 1);
    c->no_final_norm = c->post_ln || vc_mcfg_flag(o, "_remove_final_layer_norm", 0);
    c->emb_dim = wp != c->hidden ? wp : 0;
    c->inter = ffn;
    c->n_kv_head = c->n_head;
    c->norm_kind = VC_NORM_LAYER;
    c->norm_eps = 1e-5f; /* nn.LayerNorm's default: OPT's config names none */
    c->qkv_bias = c->o_bias = c->mlp_bias = vc_mcfg_flag(o, "enable_bias", 1);
    c->mlp_kind = VC_MLP_PLAIN;
    learned_positions(c);
    c->pos_offset = 2;
    return VC_OK;
}

/* BioGPT: OPT's pre-norm layers (nn.LayerNorm's default eps: its config's layer_norm_eps is not read), learned
 * positions offset by 2, embeddings times sqrt(hidden) with scale_embedding, a plain MLP, biases everywhere */
static vc_status fam_biogpt(const cJSON *o, const char *path, vc_model_config *c) {
    c->n_kv_head = c->n_head;
    c->norm_kind = VC_NORM_LAYER;
    c->norm_eps = 1e-5f;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->mlp_kind = VC_MLP_PLAIN;
    if (vc_mcfg_flag(o, "scale_embedding", 1)) c->emb_scale = sqrtf((float)c->hidden);
    learned_positions(c);
    c->pos_offset = 2;
    return VC_OK;
}

/* XGLM: BioGPT's layout under model.layers.* (nn.LayerNorm's default eps, scaled embeddings) with fixed sinusoidal
 * positions (offset 2) instead of learned ones; its cross-attention (add_cross_attention) is not built */
static vc_status fam_xglm(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t ffn = 0;
    vc_status st = decoder_width(o, path, "ffn_dim", c, &ffn);
    if (st) return st;
    st = fam_biogpt(o, path, c);
    c->inter = ffn;
    c->learned_pos = 0;
    c->sin_pos = 1;
    return st;
}

/* GPT-J: parallel attention and MLP from one LayerNorm, GPT-J pairs on rotary_dim (null: the whole head), biases on
 * the MLP; CodeGen: q, v and k fused in 4 blocks */
static vc_status fam_gptj(const cJSON *o, const char *path, vc_model_config *c) {
    int64_t inner = 0, rd = 64;
    const cJSON *rdj = vc_json_member(o, "rotary_dim");
    vc_status st;
    if ((st = vc_mcfg_int_any(o, "n_inner", 4 * c->hidden, &inner, path)) ||
        (st = vc_mcfg_check_size(path, "n_inner", inner, 1, DIM_MAX)) ||
        (!cJSON_IsNull(rdj) && (st = vc_mcfg_int_any(o, "rotary_dim", c->head_dim, &rd, path))))
        return st;
    if (cJSON_IsNull(rdj)) rd = c->head_dim;
    if (vc_mcfg_is(c, "codegen") && c->hidden % 4)
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
    return VC_OK;
}

/* Nemotron: LayerNorm1P: LayerNorms of weight + 1 with biases; relu2 without a gate; half rope */
static vc_status fam_nemotron(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->norm_offset = 1.0f;
    c->mlp_kind = VC_MLP_PLAIN;
    c->qkv_bias = c->o_bias = vc_mcfg_flag(o, "attention_bias", 0);
    int given = vc_json_member(o, "partial_rotary_factor") ||
                vc_json_member(vc_json_member(o, "rope_parameters"), "partial_rotary_factor");
    return given ? VC_OK : vc_mcfg_rot_fraction(c, 0.5, "partial_rotary_factor", path);
}

/* StableLM: LayerNorms with biases, partial rope (a quarter by default), parallel residuals */
static vc_status fam_stablelm(const cJSON *o, const char *path, vc_model_config *c) {
    /* StableLM 2 12B: a LayerNorm without bias over each head of q and k, each head its own weight */
    c->qk_norm = c->qk_norm_heads = vc_mcfg_flag(o, "qk_layernorm", 0);
    c->norm_kind = VC_NORM_LAYER;
    c->qkv_bias = vc_mcfg_flag(o, "use_qkv_bias", 0);
    c->parallel_block = vc_mcfg_flag(o, "use_parallel_residual", 0);
    int given = vc_json_member(o, "partial_rotary_factor") ||
                vc_json_member(vc_json_member(o, "rope_parameters"), "partial_rotary_factor");
    return given ? VC_OK : vc_mcfg_rot_fraction(c, 0.25, "partial_rotary_factor", path);
}

/* Jais 2: LayerNorms with biases, a plain relu2 MLP, attention_bias on o_proj too */
static vc_status fam_jais2(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->mlp_kind = VC_MLP_PLAIN;
    c->o_bias = c->qkv_bias;
    return VC_OK;
}

/* EXAONE 4: OLMo 2's norms with per-head q/k norms; with sliding layers, the others have no rope */
static vc_status fam_exaone4(const cJSON *o, const char *path, vc_model_config *c) {
    c->sandwich_norm = c->no_pre_norm = c->qk_norm = 1;
    return VC_OK;
}

/* Command R: one LayerNorm (no bias) feeding attention and MLP in parallel, GPT-J pairs, logits times logit_scale */
static vc_status fam_cohere(const cJSON *o, const char *path, vc_model_config *c) {
    double ls;
    c->qk_norm = c->qk_norm_heads = vc_mcfg_flag(o, "use_qk_norm", 0); /* Command R+: per-head LayerNorm weights */
    vc_status st = vc_mcfg_num_any(o, "logit_scale", 0.0625, &ls, path);
    if (st) return st;
    if (!(ls > 0)) return vc_fail(VC_ERR_FORMAT, "%s: logit_scale must be positive", path);
    c->parallel_block = c->norm_no_bias = c->rope_interleaved = 1;
    c->norm_kind = VC_NORM_LAYER;
    c->logit_divisor = (float)(1.0 / ls);
    /* Cohere2-MoE: RMSNorms when rms_norm_eps is set */
    if (vc_mcfg_is(c, "cohere2_moe") && vc_json_member(o, "rms_norm_eps")) c->norm_kind = VC_NORM_RMS;
    return VC_OK;
}

static vc_status fam_arcee(const cJSON *o, const char *path, vc_model_config *c) {
    c->mlp_kind = VC_MLP_PLAIN; /* down(act(up(x))): no gate (relu2) */
    return VC_OK;
}

/* nanochat: weightless RMSNorms (embeddings too), q/k normed after a reversed rope, relu2 MLP */
static vc_status fam_nanochat(const cJSON *o, const char *path, vc_model_config *c) {
    c->mlp_kind = VC_MLP_PLAIN;
    c->norm_no_weight = c->emb_norm = c->rope_neg = 1;
    c->qk_norm = c->qk_norm_after_rope = 1;
    double cap;
    vc_status st = vc_mcfg_num_any(o, "final_logit_softcapping", 15.0, &cap, path);
    if (st) return st;
    if (vc_json_member(o, "final_logit_softcapping") && cJSON_IsNull(vc_json_member(o, "final_logit_softcapping")))
        cap = 0;
    c->final_softcap = (float)cap;
    return VC_OK;
}

/* AFMoE: sandwich norms, per-head q/k norms, a gated attention output, muP embeddings */
static vc_status fam_afmoe(const cJSON *o, const char *path, vc_model_config *c) {
    c->sandwich_norm = c->qk_norm = c->attn_out_gate = 1;
    if (vc_mcfg_flag(o, "mup_enabled", 0)) c->emb_scale = (float)sqrt((double)c->hidden);
    return VC_OK;
}

/* MiniMax-M2: q and k RMS-normed over all their heads; the hub's rotary_dim */
static vc_status fam_minimax_m2(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = c->qk_norm_full = 1;
    int64_t rd = 0;
    vc_status st = vc_mcfg_int_any(o, "rotary_dim", 0, &rd, path);
    if (st) return st;
    if (rd > 0 && c->rope.partial_rotary_factor == 1.0) c->rot_dim = (int)rd;
    return VC_OK;
}

static vc_status fam_hunyuan_dense(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = c->qk_norm_after_rope = 1; /* always, as transformers builds it */
    return VC_OK;
}

/* StarCoder2: LayerNorm, a plain MLP, biases as use_bias says */
static vc_status fam_starcoder2(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->mlp_kind = VC_MLP_PLAIN;
    c->qkv_bias = c->o_bias = c->mlp_bias = vc_mcfg_flag(o, "use_bias", 1);
    return VC_OK;
}

/* GPT-NeoX: LayerNorms with biases, a plain MLP with biases, parallel residuals with two norms */
static vc_status fam_gpt_neox(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->mlp_kind = VC_MLP_PLAIN;
    c->qkv_bias = c->o_bias = vc_mcfg_flag(o, "attention_bias", 1);
    c->mlp_bias = 1;
    c->parallel_block = c->parallel_norms = vc_mcfg_flag(o, "use_parallel_residual", 1);
    if (!vc_json_member(o, "rope_parameters")) return rotary_keys(o, path, c, 0.25); /* Pythia's hub */
    return VC_OK;
}

/* Persimmon: GPT-NeoX's layout with sequential residuals, q/k LayerNorms over each head (qk_layernorm), half rope by
 * default (transformers' default base, 10000; the released 8B's config says 25000), biases everywhere */
static vc_status fam_persimmon(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_kind = VC_NORM_LAYER;
    c->mlp_kind = VC_MLP_PLAIN;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->qk_norm = vc_mcfg_flag(o, "qk_layernorm", 1);
    int given = vc_json_member(o, "partial_rotary_factor") ||
                vc_json_member(vc_json_member(o, "rope_parameters"), "partial_rotary_factor");
    return given ? VC_OK : vc_mcfg_rot_fraction(c, 0.5, "partial_rotary_factor", path);
}

static vc_status fam_phi(const cJSON *o, const char *path, vc_model_config *c) {
    c->qk_norm = vc_mcfg_flag(o, "qk_layernorm", 0); /* per-head LayerNorm on q and k */
    c->parallel_block = 1;
    c->norm_kind = VC_NORM_LAYER;
    c->mlp_kind = VC_MLP_PLAIN;
    c->qkv_bias = c->o_bias = c->mlp_bias = c->head_bias = 1;
    return VC_OK;
}

static vc_status fam_baichuan(const cJSON *o, const char *path, vc_model_config *c) {
    c->norm_head = 1;
    /* the 13B models use ALiBi: their configs name no max_position_embeddings (model_max_length only)
     * and are not the 7B's width; an explicit "position_embedding" ("alibi" / "rope") wins */
    const char *pe = NULL;
    vc_status st = vc_json_get_str(o, "position_embedding", NULL, &pe, path);
    if (st) return st;
    c->alibi = pe ? !strcasecmp(pe, "alibi")
                  : !vc_json_member(o, "max_position_embeddings") && c->hidden != 4096;
    if (c->alibi) {
        if (c->attn_softcap > 0) return vc_fail(VC_ERR_UNSUPPORTED, "%s: ALiBi with soft-capping", path);
        c->rot_dim = 0;
    }
    return VC_OK;
}

static vc_status fam_qwen(const cJSON *o, const char *path, vc_model_config *c) {
    c->inter /= 2; /* Qwen(1) writes twice the MLP width */
    return rotary_keys(o, path, c, 1.0);
}

static vc_status fam_chatglm(const cJSON *o, const char *path, vc_model_config *c) {
    double ratio;
    vc_status st;
    if (!vc_mcfg_flag(o, "post_layer_norm", 1) || vc_mcfg_flag(o, "apply_residual_connection_post_layernorm", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: this ChatGLM layer-norm arrangement is not supported", path);
    if (!vc_mcfg_flag(o, "rmsnorm", 1)) c->norm_kind = VC_NORM_LAYER;
    if ((st = vc_mcfg_num_any(o, "rope_ratio", 1.0, &ratio, path))) return st;
    if (!c->rope.theta_given) c->rope.theta = 10000.0 * ratio;
    c->rot_dim = (int)(c->head_dim / 2);
    c->rope_interleaved = 1;
    int64_t g = c->n_head;
    if (vc_mcfg_flag(o, "multi_query_attention", 0) && (st = vc_mcfg_int_any(o, "multi_query_group_num", 1, &g, path)))
        return st;
    c->n_kv_head = g;
    return VC_OK;
}

/* MiniCPM3: muP-style: embeddings times scale_emb, sublayers times scale_depth / sqrt(layers), the final hidden over
 * hidden_size / dim_model_base */
static vc_status fam_minicpm3(const cJSON *o, const char *path, vc_model_config *c) {
    double se, sd, base;
    vc_status st;
    if ((st = vc_mcfg_num_any(o, "scale_emb", 12, &se, path)) ||
        (st = vc_mcfg_num_any(o, "scale_depth", sqrt((double)c->n_layer), &sd, path)) ||
        (st = vc_mcfg_num_any(o, "dim_model_base", (double)c->hidden, &base, path)))
        return st;
    if (!isfinite(se) || !isfinite(sd) || !(base > 0) || se == 0 || sd == 0)
        return vc_fail(VC_ERR_FORMAT, "%s: scale_emb, scale_depth and dim_model_base must be finite and non-zero", path);
    c->emb_scale = (float)se;
    c->residual_scale = (float)(sd / sqrt((double)c->n_layer));
    c->logit_divisor = (float)((double)c->hidden / base);
    return VC_OK;
}

/* The rules in order: every rule whose types name the config's model_type runs; later rules overwrite what earlier
 * ones set and read it (the per-layer-type rope reads Gemma 3's local rope, MLA the families' head counts, ...). */
static const struct {
    const char *types; /* vc_mcfg_is_any's list: model_types, "prefix*", "*" for every family */
    vc_status (*fn)(const cJSON *o, const char *path, vc_model_config *c);
    int last; /* the family's keys are all read: no later rule, no MoE keys */
} FAMILIES[] = {
    { "*", fam_biases },
    { "qwen3 qwen3_moe dots1 hy_v3 mellum", fam_qk_norm },
    { "glm4_moe", fam_glm4_moe },
    { "gemma gemma2 gemma3_text vaultgemma", fam_gemma },
    { "gemma3_text", parse_gemma3 },
    { "*", fam_rope_by_layer_type },
    { "gemma2 gemma3_text vaultgemma", fam_gemma2 },
    { "cwm", fam_cwm },
    { "granite granitemoe granitemoeshared granitemoehybrid granite_swa granitemoe_swa hyperclovax", fam_granite },
    { "glm glm4 ernie4_5 ernie4_5_moe helium cohere cohere2", fam_gptj_pairs },
    { "ernie4_5 ernie4_5_moe", fam_ernie },
    { "glm4", fam_glm4 },
    { "axk1", fam_axk1 },
    { "kolibri1", fam_kolibri },
    { "flint", fam_flint },
    { "olmo2 olmo3 flex_olmo", fam_olmo2 },
    { "olmo3", fam_olmo3_rope },
    { "olmoe", fam_olmoe },
    { "olmo", fam_olmo },
    { "olmoe flex_olmo olmo", fam_clip_qkv },
    { "hunyuan_v1_moe", fam_hunyuan },
    { "exaone_moe", fam_exaone_moe },
    { "apertus apertus1p5_text", fam_apertus },
    { "apertus1p5_text", parse_out_vocab },
    { "gpt2 gpt_bigcode", fam_gpt2 },
    { "gpt_neo", fam_gpt_neo },
    { "bloom", fam_bloom },
    { "mpt", fam_mpt },
    { "falcon", fam_falcon },
    { "dbrx", parse_dbrx },
    { "laguna", parse_laguna },
    { "phimoe", fam_phimoe },
    { "opt", fam_opt },
    { "openai-gpt", fam_openai_gpt },
    { "biogpt", fam_biogpt },
    { "xglm", fam_xglm },
    { "gptj codegen", fam_gptj },
    { "nemotron", fam_nemotron },
    { "stablelm", fam_stablelm },
    { "jais2", fam_jais2 },
    { "exaone4", fam_exaone4 },
    { "cohere cohere2 cohere2_moe", fam_cohere },
    { "arcee", fam_arcee },
    { "nanochat", fam_nanochat },
    { "gpt_oss", parse_gpt_oss },
    { "qwen3_next qwen3_5_text qwen3_5_moe_text", vc_mcfg_parse_linear },
    { "olmo_hybrid", vc_mcfg_parse_olmo_hybrid },
    { "lara_mini", vc_mcfg_parse_lara },
    { "kimi_linear", vc_mcfg_parse_kimi_linear },
    { "minimax", vc_mcfg_parse_minimax },
    { "granite_swa granitemoe_swa", parse_granite_swa },
    { "mamba2", vc_mcfg_parse_mamba2_pure },
    { "jamba mamba falcon_mamba", vc_mcfg_parse_mamba1 },
    { "lfm2 lfm2_moe lfm3", vc_mcfg_parse_lfm2 },
    { "granitemoehybrid bamba", vc_mcfg_parse_granite_hybrid },
    { "nemotron_h", vc_mcfg_parse_nemotron_h },
    { "falcon_h1", vc_mcfg_parse_falcon_h1 },
    { "ministral3 mistral4", parse_llama4_scaling },
    { "llama4_text", parse_llama4 },
    { "afmoe", fam_afmoe },
    { "minimax_m2", fam_minimax_m2 },
    { "hunyuan_v1_dense", fam_hunyuan_dense },
    { "starcoder2", fam_starcoder2 },
    { "gpt_neox", fam_gpt_neox },
    { "persimmon", fam_persimmon },
    { "phi", fam_phi },
    { "baichuan", fam_baichuan },
    { "qwen", fam_qwen },
    { "chatglm", fam_chatglm },
    { "deepseek_v* glm4_moe_lite kimi_linear mistral4 minicpm3 glm_moe_dsa youtu axk1", parse_mla },
    { "deepseek_v32 glm_moe_dsa", parse_dsa },
    { "minicpm3", fam_minicpm3 },
    { "gemma4_text", parse_gemma4, 1 },
};

/* family-specific keys and flags */
vc_status vc_mcfg_parse_family(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    note_dropout(o, path);
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++) {
        if (!vc_mcfg_is_any(c, FAMILIES[i].types)) continue;
        if ((st = FAMILIES[i].fn(o, path, c)) || FAMILIES[i].last) return st;
    }
    /* Youtu-LLM: DeepSeek-V3's config and attention, a dense MLP in every layer (its MoE keys are unused) */
    if (!vc_mcfg_is_any(c, "youtu dbrx") && (st = vc_mcfg_parse_moe(o, path, c))) return st; /* DBRX: parse_dbrx */

    if (vc_mcfg_is(c, "gpt_oss") && c->n_expert <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s: gpt-oss without num_local_experts", path);
    return VC_OK;
}
