/* Helpers of the model tests (test_fixtures.c, test_device.c, test_consistency.c, test_lora.c): comparing an
 * exported checkpoint with its source and removing the export; a packed two-sequence loss. Static functions: each test program includes this header once. */
#ifndef VC_MODEL_TEST_UTIL_H
#define VC_MODEL_TEST_UTIL_H
#include "verlc/model.h"
#include "verlc/ops.h"
#include "verlc/safetensors.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 when every tensor of checkpoint src that the export out also holds has the same dtype and bytes there
 * (tensors the loader ignores, such as rotary caches, are not written back); *used: tensors compared,
 * *n_out: tensors in out. Two checks: the checkpoints open. */
static inline int export_matches(const char *src, const char *out, const char *name, int *used, int *n_out) {
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(src, &a));
    CHECK_OK(vc_ckpt_open(out, &b));
    int same = a && b;
    *used = 0;
    for (int i = 0; same && i < vc_ckpt_count(a); i++) {
        const vc_st_tensor *x = vc_ckpt_at(a, i), *y = vc_ckpt_find(b, x->name);
        if (!y) continue;
        (*used)++;
        char sn[300]; /* block-scaled fp8 comes back dequantized (the reload below checks its values) */
        snprintf(sn, sizeof sn, "%s_scale_inv", x->name);
        if (x->dtype == VC_F8E4M3 && vc_ckpt_find(a, sn)) continue;
        same = x->nbytes == y->nbytes && x->dtype == y->dtype && !memcmp(x->data, y->data, x->nbytes);
        if (!same) fprintf(stderr, "%s: tensor %s differs after export\n", name, x->name);
    }
    *n_out = b ? vc_ckpt_count(b) : 0;
    for (int i = 0; same && i < *n_out; i++) { /* MXFP4 experts (name_blocks / name_scales) come back dequantized */
        char nb[300];
        snprintf(nb, sizeof nb, "%s_blocks", vc_ckpt_at(b, i)->name);
        if (!vc_ckpt_find(a, vc_ckpt_at(b, i)->name) && vc_ckpt_find(a, nb)) (*used)++;
    }
    vc_ckpt_close(a);
    vc_ckpt_close(b);
    return same;
}

/* rm -rf dir (one check) */
static inline void remove_tree(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}
/* Two packed sequences (11 and 7 tokens) and their mean next-token NLL (test_consistency.c, test_lora.c) */
__attribute__((unused)) static const int32_t IDS[] = { 5, 17, 3, 44, 9, 28, 11, 2, 39, 7, 21, 30, 6, 13, 50, 8, 1, 19 };
__attribute__((unused)) static const int64_t CU[] = { 0, 11, 18 };

/* loss over the 2-sequence packed batch with router replay routes r (mode VC_ROUTE_*; NULL: none); fills
 * logp (18) */
static inline float loss_of_routed(vc_model *m, vc_graph *g, int32_t *r, int mode, float *logp, int backward) {
    int32_t tgt[18];
    float w[18];
    for (int s = 0; s < 2; s++)
        for (int64_t t = CU[s]; t < CU[s + 1]; t++) tgt[t] = t + 1 < CU[s + 1] ? IDS[t + 1] : -1;
    for (int t = 0; t < 18; t++) w[t] = tgt[t] >= 0 ? -1.0f / 16 : 0;
    vc_graph_reset(g);
    vc_graph_set_grad(g, backward);
    vc_batch b = { 2, CU, IDS, NULL, r, mode };
    vc_tensor *h = vc_model_forward(m, g, &b, NULL), *lp = NULL;
    if (!h || vc_model_logprobs(m, g, h, tgt, &lp, NULL)) return NAN;
    if (logp) CHECK_OK(vc_tensor_read(lp, logp));
    vc_tensor *L = vc_op_dot_const(g, lp, w);
    float v = NAN;
    if (backward) CHECK_OK(vc_graph_backward(g, L, 1.0f));
    if (!L || vc_tensor_read(L, &v)) return NAN;
    return v;
}

/* loss over the 2-sequence packed batch; fills logp (18) */
static inline float loss_of(vc_model *m, vc_graph *g, float *logp, int backward) {
    return loss_of_routed(m, g, NULL, 0, logp, backward);
}

/* host read of element j of a backend tensor (grad: of its gradient), written with *set when set non-NULL */
__attribute__((unused)) static float tensor_elem(vc_tensor *t, int64_t j, int grad, const float *set) {
    float *w = malloc((size_t)t->n * 4), v = NAN;
    vc_tensor tmp = *t;
    if (grad) tmp.data = t->grad;
    if (w && !vc_tensor_read(&tmp, w)) {
        v = w[j];
        if (set) {
            w[j] = *set;
            CHECK_OK(vc_tensor_write(t, w));
        }
    }
    free(w);
    return v;
}

/* models of other shapes than the fixtures: GQA with llama3 rope, Qwen3-MoE, DeepSeek-V3 (MLA, grouped routing,
 * yarn), Gemma 2 (soft-caps, sliding window), Phi (partial rotary), ChatGLM, InternLM2, Qwen3 with layer types
 * and bf16, Gemma 4 (per-layer embeddings, KV sharing, an MoE block beside the MLP, values from keys, heads of two
 * sizes, proportional rope: the hub's config keys), MiMo-V2-Flash (values narrower than keys, sinks and twice the kv
 * heads on sliding layers, a rope fraction per layer type), Mistral (sliding window) */
__attribute__((unused)) static const char *RANDOM_CONFIGS[] = {
    "{\"model_type\":\"llama\",\"vocab_size\":97,\"hidden_size\":48,\"num_hidden_layers\":3,\"num_attention_heads\":6,"
    "\"num_key_value_heads\":3,\"intermediate_size\":80,\"rms_norm_eps\":1e-5,\"rope_theta\":500000,"
    "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
    "\"original_max_position_embeddings\":8},\"tie_word_embeddings\":true}",
    "{\"model_type\":\"qwen3_moe\",\"vocab_size\":131,\"hidden_size\":32,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":1,\"head_dim\":12,\"intermediate_size\":40,\"moe_intermediate_size\":24,\"num_experts\":8,"
    "\"num_experts_per_tok\":3,\"norm_topk_prob\":true,\"mlp_only_layers\":[1],\"rms_norm_eps\":1e-6,\"rope_theta\":1e6}",
    "{\"model_type\":\"deepseek_v3\",\"vocab_size\":77,\"hidden_size\":40,\"num_hidden_layers\":3,\"num_attention_heads\":3,"
    "\"num_key_value_heads\":3,\"q_lora_rank\":24,\"kv_lora_rank\":12,\"qk_nope_head_dim\":6,\"qk_rope_head_dim\":4,"
    "\"v_head_dim\":10,\"intermediate_size\":56,\"moe_intermediate_size\":20,\"n_routed_experts\":8,\"n_shared_experts\":2,"
    "\"num_experts_per_tok\":3,\"n_group\":4,\"topk_group\":2,\"norm_topk_prob\":true,\"routed_scaling_factor\":1.5,"
    "\"first_k_dense_replace\":1,\"rms_norm_eps\":1e-6,\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2.0,"
    "\"original_max_position_embeddings\":8,\"mscale\":0.707,\"mscale_all_dim\":0.707,\"beta_fast\":32,\"beta_slow\":1}}",
    "{\"model_type\":\"gemma2\",\"vocab_size\":90,\"hidden_size\":32,\"num_hidden_layers\":4,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":1,\"head_dim\":20,\"intermediate_size\":48,\"hidden_activation\":\"gelu_pytorch_tanh\","
    "\"query_pre_attn_scalar\":24,\"attn_logit_softcapping\":20.0,\"final_logit_softcapping\":10.0,\"sliding_window\":3,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000}",
    "{\"model_type\":\"phi\",\"vocab_size\":71,\"hidden_size\":36,\"num_hidden_layers\":2,\"num_attention_heads\":3,"
    "\"intermediate_size\":50,\"hidden_act\":\"gelu_new\",\"partial_rotary_factor\":0.34,\"layer_norm_eps\":1e-5,\"rope_theta\":10000}",
    "{\"model_type\":\"chatglm\",\"padded_vocab_size\":66,\"hidden_size\":48,\"num_layers\":2,\"num_attention_heads\":6,"
    "\"kv_channels\":8,\"multi_query_attention\":true,\"multi_query_group_num\":3,\"ffn_hidden_size\":40,\"add_qkv_bias\":true,"
    "\"layernorm_epsilon\":1e-5,\"rmsnorm\":true,\"seq_length\":64}",
    "{\"model_type\":\"internlm2\",\"vocab_size\":88,\"hidden_size\":48,\"num_hidden_layers\":2,\"num_attention_heads\":6,"
    "\"num_key_value_heads\":2,\"intermediate_size\":36,\"rms_norm_eps\":1e-6,\"rope_theta\":10000}",
    "{\"model_type\":\"qwen3\",\"vocab_size\":83,\"hidden_size\":40,\"num_hidden_layers\":3,\"num_attention_heads\":5,"
    "\"num_key_value_heads\":1,\"head_dim\":16,\"intermediate_size\":52,\"dtype\":\"bfloat16\",\"rms_norm_eps\":1e-6,"
    "\"layer_types\":[\"full_attention\",\"sliding_attention\",\"full_attention\"],\"sliding_window\":4,"
    "\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":1000000.0,\"factor\":4.0,"
    "\"original_max_position_embeddings\":8}}",
    "{\"model_type\":\"gemma4_text\",\"vocab_size\":79,\"hidden_size\":40,\"num_hidden_layers\":5,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"head_dim\":12,\"global_head_dim\":24,\"num_global_key_value_heads\":1,"
    "\"attention_k_eq_v\":true,\"intermediate_size\":36,\"hidden_activation\":\"gelu_pytorch_tanh\",\"sliding_window\":3,"
    "\"layer_types\":[\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"full_attention\"],"
    "\"hidden_size_per_layer_input\":6,\"num_kv_shared_layers\":2,\"use_double_wide_mlp\":true,\"enable_moe_block\":true,"
    "\"num_experts\":4,\"top_k_experts\":2,\"moe_intermediate_size\":16,\"final_logit_softcapping\":15.0,\"rms_norm_eps\":1e-6}",
    "{\"model_type\":\"mimo_v2_flash\",\"vocab_size\":73,\"hidden_size\":32,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":1,\"head_dim\":20,\"v_head_dim\":12,\"intermediate_size\":40,\"moe_intermediate_size\":16,"
    "\"n_routed_experts\":6,\"num_experts_per_tok\":2,\"sliding_window\":3,\"attention_value_scale\":0.8,"
    "\"layer_types\":[\"full_attention\",\"sliding_attention\",\"full_attention\"],\"rms_norm_eps\":1e-5,"
    "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":5000000.0,\"partial_rotary_factor\":0.5},"
    "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0,\"partial_rotary_factor\":0.2}}}",
    "{\"model_type\":\"glm_moe_dsa\",\"vocab_size\":71,\"hidden_size\":32,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":2,\"q_lora_rank\":16,\"kv_lora_rank\":12,\"qk_nope_head_dim\":6,\"qk_rope_head_dim\":4,"
    "\"v_head_dim\":8,\"intermediate_size\":40,\"moe_intermediate_size\":16,\"n_routed_experts\":4,\"n_shared_experts\":1,"
    "\"num_experts_per_tok\":2,\"n_group\":1,\"topk_group\":1,\"first_k_dense_replace\":1,\"index_topk\":3,"
    "\"index_n_heads\":8,\"index_head_dim\":8,\"indexer_types\":[\"full\",\"shared\",\"full\"],\"rms_norm_eps\":1e-6,"
    "\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2.0,\"original_max_position_embeddings\":8,"
    "\"mscale\":1.0,\"mscale_all_dim\":1.0,\"beta_fast\":32,\"beta_slow\":1}}",
    "{\"model_type\":\"opt\",\"vocab_size\":67,\"hidden_size\":32,\"word_embed_proj_dim\":24,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":4,\"ffn_dim\":48,\"do_layer_norm_before\":false,\"max_position_embeddings\":64,"
    "\"activation_function\":\"relu\"}",
    "{\"model_type\":\"laguna\",\"vocab_size\":69,\"hidden_size\":32,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"head_dim\":8,\"num_attention_heads_per_layer\":[2,6,4],\"intermediate_size\":40,"
    "\"moe_intermediate_size\":16,\"shared_expert_intermediate_size\":24,\"num_experts\":6,\"num_experts_per_tok\":2,"
    "\"moe_routed_scaling_factor\":1.5,\"moe_router_logit_softcapping\":3.0,\"sliding_window\":3,"
    "\"layer_types\":[\"sliding_attention\",\"full_attention\",\"sliding_attention\"],\"rms_norm_eps\":1e-6,"
    "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":500000.0,\"partial_rotary_factor\":0.5},"
    "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}}",
    "{\"model_type\":\"apertus1p5_text\",\"vocab_size\":71,\"output_vocab_size\":51,\"hidden_size\":32,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":40,"
    "\"hidden_act\":\"xielu\",\"rms_norm_eps\":1e-5,\"rope_theta\":10000}",
    "{\"model_type\":\"mistral\",\"vocab_size\":61,\"hidden_size\":32,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"intermediate_size\":44,\"sliding_window\":3,\"rms_norm_eps\":1e-5,\"rope_theta\":10000}",
};

#define N_RANDOM_CONFIGS ((int)(sizeof RANDOM_CONFIGS / sizeof RANDOM_CONFIGS[0]))

/* random weights for config k (scaled to fixture-like magnitudes) */
__attribute__((unused)) static vc_model *random_model(const char *json, int k) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/verlc_cons_%d_%d.json", (int)getpid(), k);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(path, 1234 + k, &m));
    unlink(path);
    if (!m) return NULL;
    /* fixture-like magnitudes so that gradients and greedy margins are well above float noise */
    for (int i = 0; i < vc_model_n_params(m); i++) {
        int decay;
        vc_tensor *t = vc_model_param(m, i, NULL, &decay);
        float *w = malloc((size_t)t->n * 4);
        if (decay && w && !vc_model_param_read(m, i, 0, w)) {
            for (int64_t j = 0; j < t->n; j++) w[j] *= 6.0f;
            CHECK_OK(vc_model_param_write(m, i, w));
        }
        free(w);
    }
    return m;
}

#endif
