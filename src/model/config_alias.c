/* model_types that are another family's architecture under their own name, as transformers maps each to that
 * family's modeling class: their config keys renamed as the type's attribute_map renames them, the type's own
 * defaults where they differ from the family's, then parsed as the family; the tensor names from the type's own
 * descriptor row in arch.c where its checkpoints name tensors their own way. The exported config.json is the
 * checkpoint's own. */
#include "arch.h"
#include "config_priv.h"
#include <string.h>

/* MiniCPM5-MoE: Qwen3-Next's gated attention output (q_gate_proj holds each head's q, then its gate) */
static void minicpm5(vc_model_config *c) { c->attn_out_gate = 1; }

/* Gemma 4 Unified: text attends causally ("vision": bidirectionally among an image's tokens, which verlc does not
 * build); "all" makes it a bidirectional model, not a causal LM */
static vc_status gemma4_unified(const cJSON *o, const char *path) {
    const cJSON *b = vc_json_member(o, "use_bidirectional_attention");
    if (cJSON_IsString(b) && !strcmp(b->valuestring, "all"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: use_bidirectional_attention \"all\" (every token attending both ways) is "
                       "not a causal language model", path);
    return VC_OK;
}

static const struct {
    const char *type, *as;
    const char *renames;  /* "from=to ...": a key read under the family's name */
    const char *defaults; /* a JSON object: the type's defaults for keys the config leaves out */
    void (*after)(vc_model_config *c); /* what the type computes beyond the family (NULL: nothing) */
    vc_status (*check)(const cJSON *o, const char *path); /* settings of the type verlc refuses (NULL: none) */
} ALIAS[] = {
    /* Kimi K2 (moonshotai/Kimi-K2-*): DeepSeek-V3's architecture, as Moonshot documents it (its remote code is
     * DeepSeek's) */
    { "kimi_k2", "deepseek_v3", "", "{}" },
    /* IQuest-Coder and InternLM3: LLaMA (transformers' LlamaForCausalLM); InternLM3's qkv_bias puts biases on q, k, v
     * and o, its bias on the MLP */
    { "iquestcoder", "llama", "", "{\"head_dim\":128,\"rms_norm_eps\":1e-5}" },
    { "internlm3", "llama", "qkv_bias=attention_bias bias=mlp_bias", "{\"head_dim\":128,\"rms_norm_eps\":1e-5}" },
    /* EXAONE 3 / 3.5 (LGAI-EXAONE): LLaMA under GPT-2-style names (arch.c's EXAONE_HUB) and keys */
    { "exaone", "llama", "num_layers=num_hidden_layers layer_norm_epsilon=rms_norm_eps activation_function=hidden_act",
      "{\"rope_theta\":500000,\"rms_norm_eps\":1e-5}" },
    /* Sarvam-M (sarvam_moe) and Param-2 (param2moe): GLM-4.5's MoE layout with q/k norms and full rope, under the
     * hub's names (arch.c's SARVAM_HUB: a fused query_key_value, ...) */
    { "sarvam_moe", "glm4_moe",
      "num_experts=n_routed_experts num_shared_experts=n_shared_experts use_qkv_bias=attention_bias "
      "num_mtp_layers=num_nextn_predict_layers",
      "{\"rope_theta\":8000000,\"partial_rotary_factor\":1,\"head_dim\":64,\"rms_norm_eps\":1e-6,\"use_qk_norm\":true,"
      "\"routed_scaling_factor\":2.5,\"num_experts_per_tok\":6,\"moe_intermediate_size\":1024}" },
    { "param2moe", "glm4_moe",
      "num_experts=n_routed_experts num_shared_experts=n_shared_experts use_qkv_bias=attention_bias "
      "num_mtp_layers=num_nextn_predict_layers",
      "{\"rope_theta\":500000,\"partial_rotary_factor\":1,\"head_dim\":64,\"rms_norm_eps\":1e-6,\"use_qk_norm\":true,"
      "\"routed_scaling_factor\":2.5,\"num_experts_per_tok\":6,\"moe_intermediate_size\":2048,\"n_routed_experts\":64,"
      "\"n_shared_experts\":2,\"tie_word_embeddings\":true}" },
    /* Sarvam's MLA models: DeepSeek-V3 routing over all experts at once; its older configs' head_dim / q_head_dim
     * dropped and their `deepseek_yarn` rope read as yarn, as transformers converts them */
    { "sarvam_mla", "deepseek_v3",
      "num_experts=n_routed_experts num_shared_experts=n_shared_experts num_mtp_layers=num_nextn_predict_layers",
      "{\"n_group\":1,\"topk_group\":1,\"first_k_dense_replace\":1,\"n_routed_experts\":128,\"q_lora_rank\":null}" },
    /* MiniCPM5-MoE (openbmb): GLM-4.5's MoE layout without q/k norms, per-layer dense or sparse MLPs, attention
     * gated per channel (arch.c's MINICPM5_QGATE) */
    { "minicpm5_moe", "glm4_moe", "",
      "{\"rope_theta\":5000000,\"head_dim\":128,\"rms_norm_eps\":1e-6,\"num_key_value_heads\":2,"
      "\"n_routed_experts\":160,\"routed_scaling_factor\":3.66,\"num_experts_per_tok\":16,"
      "\"moe_intermediate_size\":512,\"n_group\":1,\"topk_group\":1,\"norm_topk_prob\":true}", minicpm5 },
    /* MiMo (XiaomiMiMo/MiMo-7B-*, remote code MiMoForCausalLM): Qwen2 with multi-token-prediction layers its forward
     * does not use (arch.c's row leaves them to the export) */
    { "mimo", "qwen2", "", "{}" },
    /* Gemma 4 Unified's text model: Gemma 4's without per-layer embeddings or an MoE block */
    { "gemma4_unified_text", "gemma4_text", "", "{}", NULL, gemma4_unified },
};

int vc_mcfg_alias_kind(const cJSON *o) {
    const cJSON *mt = vc_json_member(o, "model_type");
    for (int i = 0; cJSON_IsString(mt) && i < (int)(sizeof ALIAS / sizeof ALIAS[0]); i++)
        if (!strcmp(mt->valuestring, ALIAS[i].type)) return i;
    return -1;
}

/* attribute_map: the value under the family's key (one given under both keeps the family's); *said lists the
 * renames made ("a as b, ..."), for messages about those keys */
static void rename_keys(cJSON *o, const char *renames, char *said, size_t cap) {
    char from[64], to[64];
    size_t len = 0;
    said[0] = 0;
    for (const char *p = renames; *p; p += strspn(p, " ")) {
        size_t n = strcspn(p, " "), eq = strcspn(p, "=");
        if (eq < n && eq < sizeof from && n - eq - 1 < sizeof to) {
            snprintf(from, sizeof from, "%.*s", (int)eq, p);
            snprintf(to, sizeof to, "%.*s", (int)(n - eq - 1), p + eq + 1);
            cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(o, from);
            if (v && !vc_json_member(o, to)) {
                cJSON_AddItemToObject(o, to, v);
                if (len < cap) len += (size_t)snprintf(said + len, cap - len, "%s%s as %s", len ? ", " : "", from, to);
            } else cJSON_Delete(v);
        }
        p += n;
    }
}

/* the type's defaults for what the config leaves out (the rope's also read from rope_parameters / rope_scaling) */
static vc_status add_defaults(cJSON *o, const char *json) {
    cJSON *d = cJSON_Parse(json);
    if (!d) return VC_ERR_NOMEM;
    const cJSON *rp = vc_json_member(o, "rope_parameters"), *rs = vc_json_member(o, "rope_scaling");
    for (cJSON *it = d->child; it; it = it->next) {
        int rope_key = !strcmp(it->string, "rope_theta") || !strcmp(it->string, "partial_rotary_factor");
        if (vc_json_member(o, it->string) || (rope_key && (vc_json_member(rp, it->string) || vc_json_member(rs, it->string))))
            continue;
        cJSON *v = cJSON_Duplicate(it, 1);
        if (!v) { cJSON_Delete(d); return VC_ERR_NOMEM; }
        cJSON_AddItemToObject(o, it->string, v);
    }
    cJSON_Delete(d);
    return VC_OK;
}

/* Sarvam's older MLA configs: rope_scaling {"type": "deepseek_yarn"} is yarn; head_dim and q_head_dim derived */
static vc_status legacy_mla(cJSON *o) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, "head_dim");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "q_head_dim");
    cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    static const char *const KEYS[] = { "type", "rope_type" };
    for (int i = 0; i < 2 && cJSON_IsObject(rs); i++) {
        const cJSON *t = vc_json_member(rs, KEYS[i]);
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "deepseek_yarn") &&
            !cJSON_ReplaceItemInObjectCaseSensitive(rs, KEYS[i], cJSON_CreateString("yarn")))
            return VC_ERR_NOMEM;
    }
    return VC_OK;
}

vc_status vc_mcfg_parse_alias(const cJSON *o, const char *path, vc_model_config *c, int k) {
    vc_status st = ALIAS[k].check ? ALIAS[k].check(o, path) : VC_OK;
    if (st) return st;
    cJSON *copy = cJSON_Duplicate(o, 1);
    if (!copy) return VC_ERR_NOMEM;
    char said[384], ctx[1024];
    rename_keys(copy, ALIAS[k].renames, said, sizeof said);
    if (said[0]) snprintf(ctx, sizeof ctx, "%s (%s's keys read as %s's: %s)", path, ALIAS[k].type, ALIAS[k].as, said);
    else snprintf(ctx, sizeof ctx, "%s", path);
    st = add_defaults(copy, ALIAS[k].defaults);
    if (!st && !strcmp(ALIAS[k].type, "sarvam_mla")) st = legacy_mla(copy);
    if (!st && !cJSON_ReplaceItemInObjectCaseSensitive(copy, "model_type", cJSON_CreateString(ALIAS[k].as)))
        st = VC_ERR_NOMEM;
    if (!st) st = vc_config_parse_model(copy, ctx, c);
    cJSON_Delete(copy);
    if (st) return st;
    if (ALIAS[k].after) ALIAS[k].after(c);
    const vc_arch *own = vc_arch_find(ALIAS[k].type);
    if (own) c->arch = own;
    snprintf(c->model_type, sizeof c->model_type, "%s", ALIAS[k].type);
    return VC_OK;
}
