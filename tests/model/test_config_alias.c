/* model_types read as another family's architecture (src/model/config_alias.c): each fixture's config.json as
 * transformers saves it (the family's key names) and rewritten as the hub's checkpoints write it (the type's own
 * names, its defaults left out) parse to the same configuration, and the rewritten fixture still passes its checks
 * against transformers' references */
#include "verlc/check.h"
#include "verlc/model.h"
#include "model_test_util.h"
#include "verlc/json.h"
#include "tensor/backend.h"
#include <cJSON.h>

static void rename_key(cJSON *o, const char *from, const char *to) {
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(o, from);
    CHECK_MSG(v != NULL, "fixture config without '%s'", from);
    if (v) cJSON_AddItemToObject(o, to, v);
}

static void drop_key(cJSON *o, const char *key) {
    CHECK_MSG(cJSON_GetObjectItemCaseSensitive(o, key) != NULL, "fixture config without '%s'", key);
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
}

/* the hub's form of each fixture's config */
static void hub_form(const char *kind, cJSON *o) {
    cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
    if (!strcmp(kind, "exaone")) { /* EXAONE 3.5's keys, rope_theta and rope_scaling beside each other */
        rename_key(o, "num_hidden_layers", "num_layers");
        rename_key(o, "rms_norm_eps", "layer_norm_epsilon");
        rename_key(o, "hidden_act", "activation_function");
        cJSON_AddItemToObject(o, "rope_theta", cJSON_DetachItemFromObjectCaseSensitive(rp, "rope_theta"));
        rename_key(o, "rope_parameters", "rope_scaling");
    } else if (!strcmp(kind, "internlm3")) {
        rename_key(o, "attention_bias", "qkv_bias");
        rename_key(o, "mlp_bias", "bias");
    } else if (!strcmp(kind, "sarvam_moe") || !strcmp(kind, "param2moe")) { /* the rope, q/k norms, scaling: defaults */
        rename_key(o, "n_routed_experts", "num_experts");
        rename_key(o, "n_shared_experts", "num_shared_experts");
        rename_key(o, "attention_bias", "use_qkv_bias");
        rename_key(o, "num_nextn_predict_layers", "num_mtp_layers");
        drop_key(o, "rope_parameters");
        drop_key(o, "use_qk_norm");
        drop_key(o, "routed_scaling_factor");
        drop_key(o, "rms_norm_eps");
        if (!strcmp(kind, "param2moe")) drop_key(o, "tie_word_embeddings");
    } else if (!strcmp(kind, "minicpm5_moe")) { /* its rope base, routed scaling and normalised top-k: defaults */
        drop_key(o, "rope_parameters");
        drop_key(o, "routed_scaling_factor");
        drop_key(o, "norm_topk_prob");
    } else if (!strcmp(kind, "sarvam_mla")) { /* one group (the default), an older config's head_dim */
        rename_key(o, "n_routed_experts", "num_experts");
        drop_key(o, "n_group");
        drop_key(o, "topk_group");
        drop_key(o, "q_lora_rank");
        cJSON_AddNumberToObject(o, "head_dim", 64);
        cJSON_AddNumberToObject(o, "q_head_dim", 24);
    }
}

static int parse_file(const char *path, cJSON **root, vc_model_config *c) {
    CHECK_OK(vc_json_load_file(path, root));
    return *root && vc_config_parse_model(*root, path, c) == VC_OK;
}

static void alias(const char *root, const char *kind) {
    char dir[512], copy[256], path[600], cmd[900];
    snprintf(dir, sizeof dir, "%s/%s", root, kind);
    snprintf(copy, sizeof copy, "/tmp/verlc_alias_%d_%s", (int)getpid(), kind);
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *o = NULL;
    vc_model_config a, b;
    CHECK_MSG(parse_file(path, &o, &a), "%s: the fixture's config does not parse", kind);
    if (!o) return;
    hub_form(kind, o);
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", copy, dir, copy);
    CHECK(system(cmd) == 0);
    char *text = cJSON_Print(o);
    snprintf(path, sizeof path, "%s/config.json", copy);
    CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
    free(text);
    cJSON_Delete(o);
    o = NULL;
    CHECK_MSG(parse_file(path, &o, &b), "%s: the hub's form of its config does not parse", kind);
    CHECK_MSG(!memcmp(&a, &b, sizeof a), "%s: the hub's form of its config reads differently", kind);
    CHECK_MSG(!strcmp(b.model_type, kind), "%s: read as model_type %s", kind, b.model_type);
    vc_check_result r;
    CHECK_OK(vc_check_model(copy, &r));
    CHECK_MSG(r.ok && r.has_reference, "%s: the fixture with the hub's config fails its checks", kind);
    cJSON_Delete(o);
    remove_tree(copy);
}

/* what the renames and defaults mean, where the fixtures leave a value at its default */
static void meanings(void) {
    vc_model_config c;
    cJSON *o = cJSON_Parse("{\"model_type\": \"internlm3\", \"vocab_size\": 32, \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 96, "
                           "\"qkv_bias\": true, \"bias\": false}");
    CHECK_OK(vc_config_parse_model(o, "internlm3", &c));
    CHECK_MSG(c.qkv_bias && c.o_bias && !c.mlp_bias && c.head_dim == 128 && c.norm_eps == 1e-5f,
              "internlm3: qkv_bias %d o_bias %d mlp_bias %d head_dim %lld eps %g", c.qkv_bias, c.o_bias, c.mlp_bias, (long long)c.head_dim,
              (double)c.norm_eps);
    cJSON_Delete(o);
    o = cJSON_Parse("{\"model_type\": \"sarvam_mla\", \"vocab_size\": 32, \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                    "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"moe_intermediate_size\": 32, "
                    "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"kv_lora_rank\": 16, \"qk_rope_head_dim\": 8, "
                    "\"qk_nope_head_dim\": 16, \"v_head_dim\": 16, \"head_dim\": 64, \"rope_theta\": 10000, "
                    "\"max_position_embeddings\": 64, \"rope_scaling\": {\"type\": \"deepseek_yarn\", \"factor\": 4, "
                    "\"original_max_position_embeddings\": 16, \"mscale\": 1, \"mscale_all_dim\": 1}}");
    CHECK_OK(vc_config_parse_model(o, "sarvam_mla", &c));
    CHECK_MSG(c.rope.type == VC_ROPE_YARN && c.n_expert == 8, "sarvam_mla: rope %d experts %lld", c.rope.type,
              (long long)c.n_expert);
    cJSON_Delete(o);
    o = cJSON_Parse("{\"model_type\": \"exaone\", \"vocab_size\": 32, \"hidden_size\": 64, \"num_layers\": 1, "
                    "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"activation_function\": \"gelu\"}");
    CHECK_OK(vc_config_parse_model(o, "exaone", &c));
    CHECK_MSG(c.rope.theta == 500000.0 && c.n_layer == 1 && c.norm_eps == 1e-5f && c.act != VC_ACT_SILU,
              "exaone: theta %g layers %lld eps %g act %d", c.rope.theta, (long long)c.n_layer, (double)c.norm_eps, c.act);
    cJSON_Delete(o);
}

int main(void) {
    char root[512];
    vc_test_model_root(1, root, sizeof root);
    const char *kinds[] = { "exaone", "internlm3", "iquestcoder", "sarvam_moe", "param2moe", "sarvam_mla", "minicpm5_moe" };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) alias(root, kinds[i]);
    meanings();
    return vc_test_done();
}
