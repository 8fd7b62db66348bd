/* Linear-attention and state-space layers of config.json (Gated DeltaNet, Kimi Delta Attention, lightning attention,
 * Mamba 1 and 2, LFM2's short convolutions): which layers they are, their heads, state and conv widths. */
#include "config_priv.h"
#include <math.h>

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

/* layer_types[l] of a linear-attention hybrid: *lin 1 ("linear_attention"), 0 ("full_attention"), -1 (no list) */
static vc_status linear_type(const cJSON *types, int64_t l, const char *path, int sliding, int *lin) {
    const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL;
    *lin = -1;
    if (types && (!cJSON_IsString(t) || (strcmp(t->valuestring, "linear_attention") &&
                                         strcmp(t->valuestring, "full_attention") &&
                                         (!sliding || strcmp(t->valuestring, "sliding_attention")))))
        return vc_fail(VC_ERR_FORMAT, "%s: layer_types[%lld] must be \"linear_attention\"%s or \"full_attention\"", path,
                       (long long)l, sliding ? ", \"sliding_attention\"" : "");
    if (t) *lin = !strcmp(t->valuestring, "linear_attention");
    return VC_OK;
}

/* Gated DeltaNet layers (layer_types, else every full_attention_interval-th layer full attention) with their head
 * counts and conv width */
static vc_status parse_gdn_layers(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t every = 4, conv = 4;
    if ((st = vc_mcfg_int_any(o, "linear_num_key_heads", 16, &c->lin_nk, path)) ||
        (st = vc_mcfg_int_any(o, "linear_num_value_heads", 32, &c->lin_nv, path)) ||
        (st = vc_mcfg_int_any(o, "linear_key_head_dim", 128, &c->lin_dk, path)) ||
        (st = vc_mcfg_int_any(o, "linear_value_head_dim", 128, &c->lin_dv, path)) ||
        (st = vc_mcfg_int_any(o, "linear_conv_kernel_dim", 4, &conv, path)) ||
        (st = vc_mcfg_int_any(o, "full_attention_interval", 4, &every, path)))
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
        if ((st = linear_type(types, l, path, vc_mcfg_is(c, "lara_mini"), &lin))) return st;
        c->linear[l] = (uint8_t)(lin >= 0 ? lin : (l + 1) % every != 0);
        c->n_linear += c->linear[l];
    }
    return VC_OK;
}

/* Qwen3-Next and Qwen3.5: Gated DeltaNet layers; (1 + w) RMSNorms, per-head q/k norms, gated attention output */
vc_status vc_mcfg_parse_linear(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = parse_gdn_layers(o, path, c);
    c->norm_offset = 1.0f;
    c->qk_norm = c->attn_out_gate = 1;
    return st;
}

/* Lara-Mini: Qwen3.5's Gated DeltaNet layers among Qwen3's attention layers (per-head q/k norms, no output gate),
 * sliding ones with rope and full ones without; plain RMSNorms (Helium's) */
vc_status vc_mcfg_parse_lara(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = parse_gdn_layers(o, path, c);
    c->qk_norm = 1;
    return st;
}

/* OLMo-hybrid: Gated DeltaNet layers (q, k, v, a, b and the output gate projected apart; beta doubled with
 * linear_allow_neg_eigval; the gated norm's eps FLA's 1e-5) normed before their sublayers, among OLMo 2's attention
 * layers (norms after the sublayers, q and k normed over all their heads), without rope unless rope_parameters give a
 * rope_theta */
vc_status vc_mcfg_parse_olmo_hybrid(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st = parse_gdn_layers(o, path, c);
    if (st) return st;
    int n_full = 0;
    for (int64_t l = 0; l < c->n_layer; l++) n_full += !c->linear[l];
    if (!c->n_linear || !n_full)
        return vc_fail(VC_ERR_FORMAT, "%s: layer_types: OLMo-hybrid needs linear_attention and full_attention layers", path);
    c->sandwich_norm = c->no_pre_norm = c->qk_norm = c->qk_norm_full = 1;
    c->lin_sep_qkv = c->lin_pre_norm = 1;
    c->lin_beta_scale = vc_mcfg_flag(o, "linear_allow_neg_eigval", 1) ? 2.0f : 1.0f;
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
vc_status vc_mcfg_parse_kimi_linear(const cJSON *o, const char *path, vc_model_config *c) {
    const cJSON *la = vc_json_member(o, "linear_attn_config"), *types = vc_json_member(o, "layer_types");
    int64_t nh = 32, hd = 128, conv = 4;
    vc_status st;
    if ((st = vc_mcfg_int_any(o, "linear_num_heads", 32, &nh, path)) ||
        (st = vc_mcfg_int_any(o, "linear_head_dim", 128, &hd, path)) ||
        (st = vc_mcfg_int_any(o, "linear_conv_kernel_dim", 4, &conv, path)))
        return st;
    if (cJSON_IsObject(la) && ((st = vc_mcfg_int_any(la, "num_heads", nh, &nh, path)) ||
                               (st = vc_mcfg_int_any(la, "head_dim", hd, &hd, path)) ||
                               (st = vc_mcfg_int_any(la, "short_conv_kernel_size", conv, &conv, path))))
        return st;
    if (nh < 1 || nh > HEAD_MAX || hd < 1 || hd > HEAD_MAX || conv < 1 || conv > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: linear attention heads %lld of %lld or conv kernel %lld (1..64) out of range",
                       path, (long long)nh, (long long)hd, (long long)conv);
    const cJSON *kda = cJSON_IsObject(la) ? vc_json_member(la, "kda_layers") : NULL, *e;
    for (int64_t l = 0; l < c->n_layer; l++) {
        int lin;
        if ((st = linear_type(types, l, path, 0, &lin))) return st;
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
vc_status vc_mcfg_parse_minimax(const cJSON *o, const char *path, vc_model_config *c) {
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
    if (!vc_mcfg_flag(o, "postnorm", 1))
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
        if ((st = vc_mcfg_num_any(o, KEYS[i], 1.0, &v[i], path))) return st;
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
vc_status vc_mcfg_parse_mamba1(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t expand = 2, N = 16, K = 4, R = (c->hidden + 15) / 16, ap = 8, ao = 4, I = 0;
    int pure = !vc_mcfg_is(c, "jamba"); /* Mamba, FalconMamba: every layer one Mamba mixer behind its norm */
    const cJSON *rk = vc_json_member(o, pure ? "time_step_rank" : "mamba_dt_rank");
    if ((st = vc_mcfg_int_any(o, "mamba_expand expand", 2, &expand, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_d_state state_size", 16, &N, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_d_conv conv_kernel", 4, &K, path)) ||
        (!cJSON_IsString(rk) && (st = vc_mcfg_int_any(o, "mamba_dt_rank time_step_rank", R, &R, path))) ||
        (st = vc_mcfg_int_any(o, "attn_layer_period", 8, &ap, path)) ||
        (st = vc_mcfg_int_any(o, "attn_layer_offset", 4, &ao, path)))
        return st;
    if (pure && (st = vc_mcfg_int_any(o, "intermediate_size", expand * c->hidden, &I, path))) return st;
    if (cJSON_IsString(rk) && strcmp(rk->valuestring, "auto"))
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_dt_rank / time_step_rank must be a number or \"auto\"", path);
    if (pure) ap = 1, ao = 0, expand = I > 0 && I % c->hidden == 0 ? I / c->hidden : expand;
    if (expand < 1 || expand > 64 || N < 1 || N > 64 || K < 1 || K > 64 || R < 1 || R > c->hidden || ap < 1 || ao < 0 ||
        ao >= ap)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_expand %lld, mamba_d_state %lld (1..64), mamba_d_conv %lld, mamba_dt_rank "
                       "%lld or attn_layer_offset / _period out of range", path, (long long)expand, (long long)N,
                       (long long)K, (long long)R);
    if (vc_mcfg_flag(o, "mamba_proj_bias", 0) || vc_mcfg_flag(o, "use_bias", 0))
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
    c->lin_conv_bias = vc_mcfg_flag(o, pure ? "use_conv_bias" : "mamba_conv_bias", 1);
    c->lin_act = VC_ACT_SILU;
    c->lin_bcdt_norm = vc_mcfg_is(c, "jamba") ? 1 : vc_mcfg_is(c, "falcon_mamba") ? 2 : 0;
    double eps = 1e-6;
    if (vc_mcfg_is(c, "falcon_mamba") && (st = vc_mcfg_num_any(o, "mixer_rms_eps", 1e-6, &eps, path))) return st;
    c->lin_norm_eps = vc_mcfg_is(c, "falcon_mamba") ? (float)eps : 0.0f;
    return VC_OK;
}

/* Mamba 2 (Codestral Mamba): every layer one Mamba 2 mixer behind its norm: num_heads heads of head_dim (expand x
 * hidden channels), n_groups groups of B and C of state_size, the gated norm per group */
vc_status vc_mcfg_parse_mamba2_pure(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t conv = 4, expand = 2;
    if ((st = vc_mcfg_int_any(o, "num_heads", 128, &c->lin_nv, path)) ||
        (st = vc_mcfg_int_any(o, "head_dim", 64, &c->lin_dv, path)) ||
        (st = vc_mcfg_int_any(o, "n_groups", 8, &c->lin_nk, path)) ||
        (st = vc_mcfg_int_any(o, "state_size", 128, &c->lin_dk, path)) ||
        (st = vc_mcfg_int_any(o, "conv_kernel", 4, &conv, path)) || (st = vc_mcfg_int_any(o, "expand", 2, &expand, path)))
        return st;
    if (c->lin_nv < 1 || c->lin_nv > 65536 || c->lin_dv < 1 || c->lin_dv > 65536 || c->lin_nk < 1 ||
        c->lin_nv % c->lin_nk || c->lin_dk < 1 || c->lin_dk > 65536 || conv < 1 || conv > 64 ||
        c->lin_nv * c->lin_dv != expand * c->hidden)
        return vc_fail(VC_ERR_FORMAT, "%s: num_heads x head_dim (expand x hidden_size), n_groups (dividing the heads), "
                       "state_size or conv_kernel (1..64) out of range", path);
    if (vc_mcfg_flag(o, "use_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: use_bias (biases on in_proj and out_proj) is not built", path);
    if ((st = time_step_unclamped(o, path))) return st;
    for (int64_t l = 0; l < c->n_layer; l++) {
        c->linear[l] = 1, c->block[l] = VC_BLOCK_MIXER;
        c->n_linear++;
    }
    c->lin_kind = VC_LIN_MAMBA2;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_conv_bias = vc_mcfg_flag(o, "use_conv_bias", 1);
    return VC_OK;
}

/* LFM2: gated short convolutions (layer_types "conv", else the layers not in full_attn_idxs) beside attention with
 * per-head q/k norms; the MLP's width as its block_* keys adjust it */
vc_status vc_mcfg_parse_lfm2(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t k = 3, mult_of = 256;
    double mult = 1.0;
    if ((st = vc_mcfg_int_any(o, "conv_L_cache", 3, &k, path)) ||
        (st = vc_mcfg_int_any(o, "block_multiple_of", 256, &mult_of, path)) ||
        (st = vc_mcfg_int_any(o, "block_ff_dim intermediate_size", c->inter, &c->inter, path)))
        return st;
    if (k < 1 || k > 64 || mult_of < 1)
        return vc_fail(VC_ERR_FORMAT, "%s: conv_L_cache %lld (1..64) or block_multiple_of out of range", path, (long long)k);
    if (vc_mcfg_flag(o, "conv_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: conv_bias (biases on the short convolutions) is not built", path);
    /* as Lfm2MLP: 2/3, then the multiplier and rounding if one is set (LFM2-MoE's dense layers: as given) */
    if (vc_mcfg_is(c, "lfm2") && vc_mcfg_flag(o, "block_auto_adjust_ff_dim", 1)) {
        c->inter = (int64_t)(2 * c->inter / 3);
        const cJSON *m = vc_json_member(o, "block_ffn_dim_multiplier");
        if (!cJSON_IsNull(m) && (st = vc_mcfg_num_any(o, "block_ffn_dim_multiplier", 1.0, &mult, path))) return st;
        if (!m || !cJSON_IsNull(m)) {
            c->inter = (int64_t)(mult * (double)c->inter);
            c->inter = mult_of * ((c->inter + mult_of - 1) / mult_of);
        }
    }
    const cJSON *types = vc_json_member(o, "layer_types"), *full = vc_json_member(o, "full_attn_idxs");
    for (int64_t l = 0; l < c->n_layer; l++) {
        const cJSON *t = cJSON_IsArray(types) ? cJSON_GetArrayItem(types, (int)l) : NULL, *e;
        int lfm3 = vc_mcfg_is(c, "lfm3");
        int sw = t && cJSON_IsString(t) && lfm3 && !strcmp(t->valuestring, "sliding_attention");
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
    if (vc_mcfg_is(c, "lfm3")) { /* sandwich norms, a sigmoid gate per attention head */
        c->sandwich_norm = vc_mcfg_flag(o, "use_sandwich_norm", 1);
        c->attn_out_gate = vc_mcfg_flag(o, "use_attention_gate", 1) ? 2 : 0;
        if (!vc_json_member(o, "rope_parameters")) vc_mcfg_proportional_default(c, 0.5);
    }
    return VC_OK;
}

/* Granite 4 (granitemoehybrid): Mamba 2 layers (layer_types "mamba", else attention) of mamba_n_heads heads of
 * mamba_d_head channels, mamba_n_groups groups of B and C of mamba_d_state; attention without rope unless
 * position_embedding_type is "rope"; a dense model's MLP is its shared MLP */
vc_status vc_mcfg_parse_granite_hybrid(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t expand = 2, conv = 4, dh = 0;
    if ((st = vc_mcfg_int_any(o, "mamba_n_heads", 128, &c->lin_nv, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_n_groups", 1, &c->lin_nk, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_d_state", 256, &c->lin_dk, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_expand", 2, &expand, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_d_conv", 4, &conv, path)))
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
    if (vc_mcfg_flag(o, "mamba_proj_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: mamba_proj_bias (biases on in_proj / out_proj) is not built", path);
    if ((st = time_step_unclamped(o, path))) return st;
    if (c->act != VC_ACT_SILU) return vc_fail(VC_ERR_UNSUPPORTED, "%s: hidden_act: Mamba layers are built with silu", path);
    int64_t ne = 8, si = 1024;
    int granite = vc_mcfg_is(c, "granitemoehybrid"); /* else Bamba: a gated MLP per layer, rope on its attention layers */
    if (granite && ((st = vc_mcfg_int_any(o, "num_local_experts", 8, &ne, path)) ||
                    (st = vc_mcfg_int_any(o, "shared_intermediate_size", 1024, &si, path))))
        return st;
    if (granite && ne <= 0) c->inter = si; /* no experts: every layer's MLP is the shared one */
    c->lin_kind = VC_LIN_MAMBA2;
    c->lin_conv = (int)conv;
    c->lin_act = VC_ACT_SILU;
    c->lin_conv_bias = vc_mcfg_flag(o, "mamba_conv_bias", 1);
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
vc_status vc_mcfg_parse_nemotron_h(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t conv = 4;
    if ((st = vc_mcfg_int_any(o, "mamba_num_heads", 128, &c->lin_nv, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_head_dim", 64, &c->lin_dv, path)) ||
        (st = vc_mcfg_int_any(o, "n_groups mamba_n_groups", 8, &c->lin_nk, path)) ||
        (st = vc_mcfg_int_any(o, "ssm_state_size", 128, &c->lin_dk, path)) ||
        (st = vc_mcfg_int_any(o, "conv_kernel mamba_d_conv", 4, &conv, path)))
        return st;
    if (c->lin_nv < 1 || c->lin_nv > 65536 || c->lin_dv < 1 || c->lin_dv > 65536 || c->lin_nk < 1 ||
        c->lin_nv % c->lin_nk || c->lin_dk < 1 || c->lin_dk > 65536 || conv < 1 || conv > 64)
        return vc_fail(VC_ERR_FORMAT, "%s: mamba_num_heads, mamba_head_dim, n_groups (dividing the heads), ssm_state_size "
                       "or conv_kernel (1..64) out of range", path);
    if (vc_mcfg_flag(o, "mamba_proj_bias", 0) || vc_mcfg_flag(o, "use_bias", 0) || vc_mcfg_flag(o, "mlp_bias", 0) ||
        vc_mcfg_flag(o, "attention_bias", 0))
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
    c->lin_conv_bias = vc_mcfg_flag(o, "use_conv_bias", vc_mcfg_flag(o, "mamba_conv_bias", 1));
    c->mlp_kind = VC_MLP_PLAIN;
    const cJSON *lat = vc_json_member(o, "moe_latent_size");
    if (lat && !cJSON_IsNull(lat) && (st = vc_mcfg_int_any(o, "moe_latent_size", 0, &c->moe_latent, path))) return st;
    if (c->moe_latent < 0 || c->moe_latent > DIM_MAX)
        return vc_fail(VC_ERR_FORMAT, "%s: moe_latent_size %lld out of range", path, (long long)c->moe_latent);
    const char *act = NULL;
    if ((st = vc_json_get_str(o, "mlp_hidden_act", "relu2", &act, path))) return st;
    cJSON *tmp = cJSON_CreateObject();
    if (!tmp || !cJSON_AddStringToObject(tmp, "hidden_act", act)) {
        cJSON_Delete(tmp);
        return VC_ERR_NOMEM;
    }
    st = vc_mcfg_parse_act(tmp, path, c);
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
vc_status vc_mcfg_parse_falcon_h1(const cJSON *o, const char *path, vc_model_config *c) {
    vc_status st;
    int64_t expand = 2, conv = 4, dh = 0, dssm = 0;
    double v[8];
    static const char *const K[8] = { "ssm_in_multiplier", "ssm_out_multiplier", "attention_in_multiplier",
                                      "attention_out_multiplier", "key_multiplier", "embedding_multiplier",
                                      "lm_head_multiplier", NULL };
    if ((st = vc_mcfg_int_any(o, "mamba_n_heads", 128, &c->lin_nv, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_n_groups", 1, &c->lin_nk, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_d_state", 256, &c->lin_dk, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_expand", 2, &expand, path)) ||
        (st = vc_mcfg_int_any(o, "mamba_d_conv", 4, &conv, path)))
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
    if (vc_mcfg_flag(o, "mamba_proj_bias", 0) || vc_mcfg_flag(o, "projectors_bias", 0) ||
        vc_mcfg_flag(o, "attention_bias", 0) ||
        vc_mcfg_flag(o, "mlp_bias", 0))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: biases on Falcon-H1's projections are not built", path);
    if (!vc_mcfg_flag(o, "mamba_use_mlp", 1))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: mamba_use_mlp false (layers without an MLP) is not built", path);
    if ((st = time_step_unclamped(o, path))) return st;
    for (int i = 0; K[i]; i++)
        if ((st = vc_mcfg_num_any(o, K[i], 1.0, &v[i], path))) return st;
    float mm[2];
    if ((st = get_floats(o, "mlp_multipliers", 2, mm, path)) ||
        (st = get_floats(o, "ssm_multipliers", 5, c->mup.zxbcdt, path)))
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
    c->lin_conv_bias = vc_mcfg_flag(o, "mamba_conv_bias", 1);
    c->lin_norm = !vc_mcfg_flag(o, "mamba_rms_norm", 0) ? 2 : vc_mcfg_flag(o, "mamba_norm_before_gate", 1) ? 1 : 0;
    c->parallel_ssm = 1;
    for (int64_t l = 0; l < c->n_layer; l++) c->linear[l] = 1;
    c->n_linear = (int)c->n_layer;
    return VC_OK;
}
