/* Architecture descriptors and their tensor tables. Adding an architecture: a descriptor row, its
 * rule tables (sharing the common ones), config keys in config.c when the family names them its own way. */
#include "arch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define L "model.layers.%d."

static const vc_tensor_rule HF_GLOBAL[] = {
    { "model.embed_tokens.weight", VC_W_TOK_EMBD },
    { "model.norm.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { 0 } };

static const vc_tensor_rule HF_NORMS[] = {
    { L "input_layernorm.weight", VC_W_ATTN_NORM },
    { L "post_attention_layernorm.weight", VC_W_FFN_NORM },
    { 0 } };

static const vc_tensor_rule HF_ATTN[] = {
    { L "self_attn.q_proj.weight", VC_W_Q }, { L "self_attn.q_proj.bias", VC_W_Q_B },
    { L "self_attn.k_proj.weight", VC_W_K }, { L "self_attn.k_proj.bias", VC_W_K_B },
    { L "self_attn.v_proj.weight", VC_W_V }, { L "self_attn.v_proj.bias", VC_W_V_B },
    { L "self_attn.o_proj.weight", VC_W_O }, { L "self_attn.o_proj.bias", VC_W_O_B },
    { L "self_attn.q_norm.weight", VC_W_Q_NORM }, { L "self_attn.k_norm.weight", VC_W_K_NORM },
    { L "self_attn.rotary_emb.inv_freq", 0, VC_TR_IGNORE },
    { 0 } };

/* MiMo's multi-token-prediction layer's own tensors (its decoder layer's are Qwen2's), on a trained MTP row: the
 * layer names are the rows', turned into model.mtp_layers.K.* by vc_arch_row_name */
static const vc_tensor_rule MIMO_MTP[] = {
    { L "token_layernorm.weight", VC_W_MTP_ENORM }, { L "hidden_layernorm.weight", VC_W_MTP_HNORM },
    { L "input_proj.weight", VC_W_MTP_PROJ }, { L "final_layernorm.weight", VC_W_MTP_NORM },
    { 0 } };

/* Qwen3-Next's and Qwen3.5's MTP tensors of their own: mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.fc
 * ([embedding, hidden]) and mtp.norm (vc_arch_row_name puts them under mtp_own_prefix) */
static const vc_tensor_rule QWEN3_NEXT_MTP[] = {
    { L "pre_fc_norm_embedding.weight", VC_W_MTP_ENORM }, { L "pre_fc_norm_hidden.weight", VC_W_MTP_HNORM },
    { L "fc.weight", VC_W_MTP_PROJ }, { L "norm.weight", VC_W_MTP_NORM },
    { 0 } };

/* MiMo-V2-Flash's MTP layers' own tensors (model.mtp.layers.K.*: enorm, hnorm, eh_proj of [hidden, embedding],
 * final_layernorm; the layer's MLP norm named pre_mlp_layernorm: vc_arch's mtp_renames) */
static const vc_tensor_rule MIMO_V2_MTP[] = {
    { L "enorm.weight", VC_W_MTP_ENORM }, { L "hnorm.weight", VC_W_MTP_HNORM }, { L "eh_proj.weight", VC_W_MTP_PROJ },
    { L "final_layernorm.weight", VC_W_MTP_NORM },
    { 0 } };

/* DeepSeek-V3's and GLM-4.5's MTP layer's own tensors (model.layers.N, N past the decoder), and its copies of the
 * embedding and the LM head (the model's own: an MTP row's global slots alias them) */
static const vc_tensor_rule DEEPSEEK_MTP[] = {
    { L "enorm.weight", VC_W_MTP_ENORM }, { L "hnorm.weight", VC_W_MTP_HNORM }, { L "eh_proj.weight", VC_W_MTP_PROJ },
    { L "shared_head.norm.weight", VC_W_MTP_NORM }, { L "embed_tokens.weight", VC_W_TOK_EMBD },
    { L "shared_head.head.weight", VC_W_LM_HEAD },
    { 0 } };

static const vc_tensor_rule HF_MLP[] = {
    { L "mlp.gate_proj.weight", VC_W_GATE }, { L "mlp.up_proj.weight", VC_W_UP },
    { L "mlp.down_proj.weight", VC_W_DOWN },
    { L "mlp.gate_proj.bias", VC_W_GATE_B }, { L "mlp.up_proj.bias", VC_W_UP_B },
    { L "mlp.down_proj.bias", VC_W_DOWN_B },
    { 0 } };

/* Qwen2/3-MoE and DeepSeek experts, shared experts and router */
static const vc_tensor_rule HF_MOE[] = {
    { L "mlp.gate.weight", VC_W_ROUTER },
    { L "mlp.gate.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { L "mlp.experts.%d.gate_proj.weight", VC_W_EXP_GATE, VC_TR_EXPERT },
    { L "mlp.experts.%d.up_proj.weight", VC_W_EXP_UP, VC_TR_EXPERT },
    { L "mlp.experts.%d.down_proj.weight", VC_W_EXP_DOWN, VC_TR_EXPERT },
    { L "mlp.shared_expert.gate_proj.weight", VC_W_SH_GATE }, { L "mlp.shared_expert.up_proj.weight", VC_W_SH_UP },
    { L "mlp.shared_expert.down_proj.weight", VC_W_SH_DOWN },
    { L "mlp.shared_expert_gate.weight", VC_W_SH_GATE_PROJ },
    { L "mlp.shared_experts.gate_proj.weight", VC_W_SH_GATE },
    { L "mlp.shared_experts.up_proj.weight", VC_W_SH_UP },
    { L "mlp.shared_experts.down_proj.weight", VC_W_SH_DOWN },
    { L "mlp.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "mlp.experts.down_proj", VC_W_EXP_DOWN },
    { 0 } };

static const vc_tensor_rule MIXTRAL_MOE[] = {
    { L "block_sparse_moe.gate.weight", VC_W_ROUTER },
    { L "block_sparse_moe.experts.%d.w1.weight", VC_W_EXP_GATE, VC_TR_EXPERT },
    { L "block_sparse_moe.experts.%d.w3.weight", VC_W_EXP_UP, VC_TR_EXPERT },
    { L "block_sparse_moe.experts.%d.w2.weight", VC_W_EXP_DOWN, VC_TR_EXPERT },
    { L "mlp.gate.weight", VC_W_ROUTER },
    { L "mlp.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "mlp.experts.down_proj", VC_W_EXP_DOWN },
    { 0 } };

/* gpt-oss: attention sinks, a router with a bias, experts with biases in its own layout */
static const vc_tensor_rule GPT_OSS[] = {
    { L "self_attn.sinks", VC_W_SINKS },
    { L "mlp.router.weight", VC_W_ROUTER }, { L "mlp.router.bias", VC_W_ROUTER_B },
    { L "mlp.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_OAI_GATE_UP, VC_W_EXP_UP },
    { L "mlp.experts.gate_up_proj_bias", VC_W_EXP_GATE_B, VC_TR_OAI_GATE_UP_B, VC_W_EXP_UP_B },
    { L "mlp.experts.down_proj", VC_W_EXP_DOWN, VC_TR_T_DOWN },
    { L "mlp.experts.down_proj_bias", VC_W_EXP_DOWN_B },
    { 0 } };

static const vc_tensor_rule MLA_ATTN[] = {
    { L "self_attn.q_proj.weight", VC_W_Q },
    { L "self_attn.q_a_proj.weight", VC_W_Q_A }, { L "self_attn.q_a_layernorm.weight", VC_W_Q_A_NORM },
    { L "self_attn.q_b_proj.weight", VC_W_Q_BPROJ },
    { L "self_attn.kv_a_proj_with_mqa.weight", VC_W_KV_A }, { L "self_attn.kv_a_layernorm.weight", VC_W_KV_A_NORM },
    { L "self_attn.kv_b_proj.weight", VC_W_KV_B },
    { L "self_attn.o_proj.weight", VC_W_O },
    { 0 } };

static const vc_tensor_rule DSA_INDEXER[] = {
    { L "self_attn.indexer.wq_b.weight", VC_W_IDX_WQ }, { L "self_attn.indexer.wk.weight", VC_W_IDX_WK },
    { L "self_attn.indexer.k_norm.weight", VC_W_IDX_KNORM }, { L "self_attn.indexer.k_norm.bias", VC_W_IDX_KNORM_B },
    { L "self_attn.indexer.weights_proj.weight", VC_W_IDX_WPROJ },
    { 0 } };

static const vc_tensor_rule GEMMA2_NORMS[] = {
    { L "input_layernorm.weight", VC_W_ATTN_NORM },
    { L "post_attention_layernorm.weight", VC_W_POST_ATTN_NORM },
    { L "pre_feedforward_layernorm.weight", VC_W_FFN_NORM },
    { L "post_feedforward_layernorm.weight", VC_W_POST_FFN_NORM },
    { 0 } };

/* VaultGemma: Gemma 2's norms before the sublayers only */
static const vc_tensor_rule VAULTGEMMA_NORMS[] = {
    { L "input_layernorm.weight", VC_W_ATTN_NORM }, { L "pre_feedforward_layernorm.weight", VC_W_FFN_NORM },
    { 0 } };

/* Jais 2: LayerNorms with biases */
static const vc_tensor_rule JAIS2_NORMS[] = {
    { "model.norm.bias", VC_W_OUT_NORM_B },
    { L "input_layernorm.bias", VC_W_ATTN_NORM_B }, { L "post_attention_layernorm.bias", VC_W_FFN_NORM_B },
    { 0 } };

/* Hunyuan MoE (Hunyuan-A13B): the router's wg, an ungated shared MLP beside the experts */
static const vc_tensor_rule HUNYUAN_MOE[] = {
    { L "mlp.gate.wg.weight", VC_W_ROUTER },
    { L "mlp.shared_mlp.gate_proj.weight", VC_W_SH_GATE }, { L "mlp.shared_mlp.up_proj.weight", VC_W_SH_UP },
    { L "mlp.shared_mlp.down_proj.weight", VC_W_SH_DOWN },
    { 0 } };

/* Granite 3 MoE: fused experts [E, 2I, H] (gate rows, then up) and [E, H, I], a router module, a shared MLP
 * (granitemoeshared); the hub's names and transformers 5's */
static const vc_tensor_rule GRANITE_MOE[] = { /* (transformers 5's names first: what `verlc init` writes) */
    { L "block_sparse_moe.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "block_sparse_moe.input_linear.weight", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "block_sparse_moe.experts.down_proj", VC_W_EXP_DOWN }, { L "block_sparse_moe.output_linear.weight", VC_W_EXP_DOWN },
    { L "block_sparse_moe.router.weight", VC_W_ROUTER }, { L "block_sparse_moe.router.layer.weight", VC_W_ROUTER },
    { L "shared_mlp.input_linear.weight", VC_W_SH_GATE, VC_TR_SPLIT_ROWS, VC_W_SH_UP },
    { L "shared_mlp.output_linear.weight", VC_W_SH_DOWN },
    { 0 } };

/* MiniMax-M2: the routing correction bias beside the router (hub: block_sparse_moe.*, transformers 5: mlp.*) */
static const vc_tensor_rule MINIMAX_BIAS[] = {
    { L "block_sparse_moe.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { L "mlp.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { 0 } };

/* ERNIE 4.5 MoE: the routing correction bias ([1, E]) under its own name */
static const vc_tensor_rule ERNIE_MOE[] = {
    { L "mlp.moe_statics.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { "lm_head.bias", VC_W_LM_HEAD_B }, /* (with use_bias) */
    { 0 } };

/* Llama 4: feed_forward.* for the dense MLP, the router, the input-major experts and the shared expert */
static const vc_tensor_rule LLAMA4[] = {
    { L "feed_forward.gate_proj.weight", VC_W_GATE }, { L "feed_forward.up_proj.weight", VC_W_UP },
    { L "feed_forward.down_proj.weight", VC_W_DOWN },
    { L "feed_forward.router.weight", VC_W_ROUTER },
    { L "feed_forward.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_T_GATE_UP, VC_W_EXP_UP },
    { L "feed_forward.experts.down_proj", VC_W_EXP_DOWN, VC_TR_T_DOWN },
    { L "feed_forward.shared_expert.gate_proj.weight", VC_W_SH_GATE },
    { L "feed_forward.shared_expert.up_proj.weight", VC_W_SH_UP },
    { L "feed_forward.shared_expert.down_proj.weight", VC_W_SH_DOWN },
    { 0 } };

/* AFMoE (Arcee Trinity): four norms per layer, a gated attention output, the router and its bias by their names */
static const vc_tensor_rule AFMOE[] = {
    { L "input_layernorm.weight", VC_W_ATTN_NORM }, { L "post_attention_layernorm.weight", VC_W_POST_ATTN_NORM },
    { L "pre_mlp_layernorm.weight", VC_W_FFN_NORM }, { L "post_mlp_layernorm.weight", VC_W_POST_FFN_NORM },
    { L "self_attn.gate_proj.weight", VC_W_ATTN_GATE },
    { L "mlp.router.gate.weight", VC_W_ROUTER }, { L "mlp.expert_bias", VC_W_ROUTER_BIAS },
    { 0 } };

/* Apertus: its norms' names, xIELU's learnable scalars (its beta and eps buffers: see check_unclaimed) */
static const vc_tensor_rule APERTUS[] = {
    { L "attention_layernorm.weight", VC_W_ATTN_NORM }, { L "feedforward_layernorm.weight", VC_W_FFN_NORM },
    { L "mlp.act_fn.alpha_p", VC_W_XIELU_AP }, { L "mlp.act_fn.alpha_n", VC_W_XIELU_AN },
    { 0 } };

/* nanochat: a plain MLP under fc1 / fc2 (norms have no weights) */
static const vc_tensor_rule NANOCHAT_MLP[] = {
    { L "mlp.fc1.weight", VC_W_UP }, { L "mlp.fc2.weight", VC_W_DOWN },
    { 0 } };

/* Hunyuan dense: per-head q / k norms (after the rope) under their own names */
static const vc_tensor_rule HUNYUAN_QK[] = {
    { L "self_attn.query_layernorm.weight", VC_W_Q_NORM }, { L "self_attn.key_layernorm.weight", VC_W_K_NORM },
    { 0 } };

/* GPT-NeoX's layer under layer prefix P with its attention module under A: LayerNorms with biases, query_key_value per
 * head [q, k, v] (InternLM2's grouping with a group per head), dense, a plain MLP with biases (GPT-NeoX's and
 * Persimmon's) */
#define NEOX_LAYER(P, A) \
    { P "input_layernorm.weight", VC_W_ATTN_NORM }, { P "input_layernorm.bias", VC_W_ATTN_NORM_B }, \
    { P "post_attention_layernorm.weight", VC_W_FFN_NORM }, { P "post_attention_layernorm.bias", VC_W_FFN_NORM_B }, \
    { P A "query_key_value.weight", VC_W_Q, VC_TR_GQA_QKV, VC_W_K, VC_W_V }, \
    { P A "query_key_value.bias", VC_W_Q_B, VC_TR_GQA_QKV, VC_W_K_B, VC_W_V_B }, \
    { P A "dense.weight", VC_W_O }, { P A "dense.bias", VC_W_O_B }, \
    { P "mlp.dense_h_to_4h.weight", VC_W_UP }, { P "mlp.dense_h_to_4h.bias", VC_W_UP_B }, \
    { P "mlp.dense_4h_to_h.weight", VC_W_DOWN }, { P "mlp.dense_4h_to_h.bias", VC_W_DOWN_B }

/* GPT-NeoX (Pythia): NEOX_LAYER; the hub's causal-mask buffers and rotary cache ignored */
#define GN "gpt_neox.layers.%d."
static const vc_tensor_rule GPT_NEOX[] = {
    { "gpt_neox.embed_in.weight", VC_W_TOK_EMBD }, { "gpt_neox.final_layer_norm.weight", VC_W_OUT_NORM },
    { "gpt_neox.final_layer_norm.bias", VC_W_OUT_NORM_B }, { "embed_out.weight", VC_W_LM_HEAD },
    { "lm_head.weight", VC_W_LM_HEAD }, /* transformers 5's name inside the model (embed_out on disk) */
    NEOX_LAYER(GN, "attention."),
    { GN "attention.rotary_emb.inv_freq", 0, VC_TR_IGNORE }, { GN "attention.bias", 0, VC_TR_IGNORE },
    { GN "attention.masked_bias", 0, VC_TR_IGNORE },
    { 0 } };
#undef GN

/* Persimmon (Adept; Fuyu's text decoder): GPT-NeoX's per-head query_key_value and plain MLP under Llama's prefix,
 * a LayerNorm with bias over each head of q and k (shared by the heads, as Phi's), LayerNorms with biases */
static const vc_tensor_rule PERSIMMON[] = {
    { "model.embed_tokens.weight", VC_W_TOK_EMBD }, { "lm_head.weight", VC_W_LM_HEAD },
    { "model.final_layernorm.weight", VC_W_OUT_NORM }, { "model.final_layernorm.bias", VC_W_OUT_NORM_B },
    NEOX_LAYER(L, "self_attn."),
    { L "self_attn.q_layernorm.weight", VC_W_Q_NORM }, { L "self_attn.q_layernorm.bias", VC_W_Q_NORM_B },
    { L "self_attn.k_layernorm.weight", VC_W_K_NORM }, { L "self_attn.k_layernorm.bias", VC_W_K_NORM_B },
    { L "self_attn.rotary_emb.inv_freq", 0, VC_TR_IGNORE },
    { 0 } };
#undef NEOX_LAYER

/* Granite SWA: a learnable sink per head, as gpt-oss's */
static const vc_tensor_rule SINKS[] = { { L "self_attn.sinks", VC_W_SINKS }, { 0 } };

/* OLMo 2: norms after attention and after the MLP only */
static const vc_tensor_rule OLMO2_NORMS[] = {
    { L "post_attention_layernorm.weight", VC_W_POST_ATTN_NORM },
    { L "post_feedforward_layernorm.weight", VC_W_POST_FFN_NORM },
    { 0 } };

/* GLM-4-0414 (glm4): a norm after attention and one after the MLP, besides the usual two */
static const vc_tensor_rule GLM4_NORMS[] = {
    { L "input_layernorm.weight", VC_W_ATTN_NORM },
    { L "post_self_attn_layernorm.weight", VC_W_POST_ATTN_NORM },
    { L "post_attention_layernorm.weight", VC_W_FFN_NORM },
    { L "post_mlp_layernorm.weight", VC_W_POST_FFN_NORM },
    { 0 } };

static const vc_tensor_rule AXK1_NORM[] = {
    { L "post_mlp_layernorm.weight", VC_W_POST_FFN_NORM }, { L "mlp.post_mlp_layernorm.weight", VC_W_POST_FFN_NORM },
    { 0 } };

/* StableLM 2: Llama's projections; the 12B's LayerNorm per head of q and k, a tensor per head */
static const vc_tensor_rule STABLELM_ATTN[] = {
    { L "self_attn.q_proj.weight", VC_W_Q }, { L "self_attn.q_proj.bias", VC_W_Q_B },
    { L "self_attn.k_proj.weight", VC_W_K }, { L "self_attn.k_proj.bias", VC_W_K_B },
    { L "self_attn.v_proj.weight", VC_W_V }, { L "self_attn.v_proj.bias", VC_W_V_B },
    { L "self_attn.o_proj.weight", VC_W_O }, { L "self_attn.o_proj.bias", VC_W_O_B },
    { L "self_attn.q_layernorm.norms.%d.weight", VC_W_Q_NORM, VC_TR_EXPERT },
    { L "self_attn.k_layernorm.norms.%d.weight", VC_W_K_NORM, VC_TR_EXPERT },
    { L "self_attn.rotary_emb.inv_freq", 0, VC_TR_IGNORE },
    { 0 } };

static const vc_tensor_rule FLINT_SINKS[] = {
    { L "self_attn.sinks", VC_W_SINKS }, { L "self_attn.softmax_offset", VC_W_SINKS },
    { 0 } };

static const vc_tensor_rule PHIMOE[] = {
    { L "mlp.router.weight", VC_W_ROUTER }, { "lm_head.bias", VC_W_LM_HEAD_B },
    { 0 } };

static const vc_tensor_rule LAGUNA[] = {
    { L "self_attn.g_proj.weight", VC_W_ATTN_GATE }, { L "mlp.experts.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { 0 } };

/* Kolibri's hub names (transformers 5 renames them on load and back on save) */
static const vc_tensor_rule KOLIBRI_HUB[] = {
    { L "moe.router.expert_bias", VC_W_ROUTER_BIAS },
    { L "post_attn_norm.weight", VC_W_POST_ATTN_NORM }, { L "post_ffn_norm.weight", VC_W_POST_FFN_NORM },
    { 0 } };

/* HyperCLOVA X: its post-sublayer norms (Peri-LN) */
static const vc_tensor_rule HCX_NORMS[] = {
    { L "post_norm1.weight", VC_W_POST_ATTN_NORM }, { L "post_norm2.weight", VC_W_POST_FFN_NORM },
    { 0 } };

/* EXAONE 3 / 3.5's hub names (GPT-2-style; transformers 5 renames them to LLaMA's on load and back on save) */
#define EX "transformer.h.%d."
static const vc_tensor_rule EXAONE_HUB[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.ln_f.weight", VC_W_OUT_NORM },
    { EX "ln_1.weight", VC_W_ATTN_NORM }, { EX "ln_2.weight", VC_W_FFN_NORM },
    { EX "attn.attention.q_proj.weight", VC_W_Q }, { EX "attn.attention.k_proj.weight", VC_W_K },
    { EX "attn.attention.v_proj.weight", VC_W_V }, { EX "attn.attention.out_proj.weight", VC_W_O },
    { EX "mlp.c_fc_0.weight", VC_W_GATE }, { EX "mlp.c_fc_1.weight", VC_W_UP }, { EX "mlp.c_proj.weight", VC_W_DOWN },
    { 0 } };
#undef EX

/* Sarvam-M's and Param-2's hub names (q, k and v fused row-wise; transformers 5 splits and renames them on load and
 * back on save) */
static const vc_tensor_rule SARVAM_HUB[] = {
    { "model.word_embeddings.weight", VC_W_TOK_EMBD },
    { L "attention.query_key_value.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V },
    { L "attention.query_key_value.bias", VC_W_Q_B, VC_TR_SPLIT_ROWS, VC_W_K_B, VC_W_V_B },
    { L "attention.dense.weight", VC_W_O },
    { L "attention.query_layernorm.weight", VC_W_Q_NORM }, { L "attention.key_layernorm.weight", VC_W_K_NORM },
    { L "mlp.gate.expert_bias", VC_W_ROUTER_BIAS },
    { 0 } };

/* MiniCPM5-MoE: each head's q, then its output gate, in one projection, Qwen3-Next's layout (the hub's q_proj;
 * transformers' module is q_gate_proj) */
static const vc_tensor_rule MINICPM5_QGATE[] = {
    { L "self_attn.q_gate_proj.weight", VC_W_Q, VC_TR_HEAD_SPLIT, VC_W_ATTN_GATE },
    { L "self_attn.q_proj.weight", VC_W_Q, VC_TR_HEAD_SPLIT, VC_W_ATTN_GATE },
    { 0 } };

static const vc_tensor_rule PHI3_FUSED[] = {
    { L "self_attn.qkv_proj.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V },
    { L "self_attn.o_proj.weight", VC_W_O },
    { L "mlp.gate_up_proj.weight", VC_W_GATE, VC_TR_SPLIT_ROWS, VC_W_UP },
    { L "mlp.down_proj.weight", VC_W_DOWN },
    { 0 } };

static const vc_tensor_rule GLM_MLP[] = {
    { L "mlp.gate_up_proj.weight", VC_W_GATE, VC_TR_SPLIT_ROWS, VC_W_UP },
    { L "mlp.down_proj.weight", VC_W_DOWN },
    { 0 } };

static const vc_tensor_rule PHI2[] = {
    { "model.embed_tokens.weight", VC_W_TOK_EMBD },
    { "model.final_layernorm.weight", VC_W_OUT_NORM }, { "model.final_layernorm.bias", VC_W_OUT_NORM_B },
    { "lm_head.weight", VC_W_LM_HEAD }, { "lm_head.bias", VC_W_LM_HEAD_B },
    { L "input_layernorm.weight", VC_W_ATTN_NORM }, { L "input_layernorm.bias", VC_W_ATTN_NORM_B },
    { L "self_attn.dense.weight", VC_W_O }, { L "self_attn.dense.bias", VC_W_O_B },
    { L "mlp.fc1.weight", VC_W_UP }, { L "mlp.fc1.bias", VC_W_UP_B },
    { L "mlp.fc2.weight", VC_W_DOWN }, { L "mlp.fc2.bias", VC_W_DOWN_B },
    { L "self_attn.q_layernorm.weight", VC_W_Q_NORM }, { L "self_attn.q_layernorm.bias", VC_W_Q_NORM_B },
    { L "self_attn.k_layernorm.weight", VC_W_K_NORM }, { L "self_attn.k_layernorm.bias", VC_W_K_NORM_B },
    { 0 } };

/* StarCoder 2: LayerNorms with biases, a plain GELU MLP (c_fc, c_proj), biases everywhere */
static const vc_tensor_rule STARCODER2[] = {
    { "model.norm.bias", VC_W_OUT_NORM_B },
    { L "input_layernorm.bias", VC_W_ATTN_NORM_B }, { L "post_attention_layernorm.bias", VC_W_FFN_NORM_B },
    { L "mlp.c_fc.weight", VC_W_UP }, { L "mlp.c_fc.bias", VC_W_UP_B },
    { L "mlp.c_proj.weight", VC_W_DOWN }, { L "mlp.c_proj.bias", VC_W_DOWN_B },
    { 0 } };

static const vc_tensor_rule BAICHUAN[] = {
    { L "self_attn.W_pack.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V },
    { L "self_attn.o_proj.weight", VC_W_O },
    { 0 } };

#define QW "transformer.h.%d."
static const vc_tensor_rule QWEN1[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.ln_f.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { QW "ln_1.weight", VC_W_ATTN_NORM }, { QW "ln_2.weight", VC_W_FFN_NORM },
    { QW "attn.c_attn.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V },
    { QW "attn.c_attn.bias", VC_W_Q_B, VC_TR_SPLIT_ROWS, VC_W_K_B, VC_W_V_B },
    { QW "attn.c_proj.weight", VC_W_O },
    { QW "mlp.w2.weight", VC_W_GATE }, { QW "mlp.w1.weight", VC_W_UP }, { QW "mlp.c_proj.weight", VC_W_DOWN },
    { "transformer.rotary_emb.inv_freq", 0, VC_TR_IGNORE },
    { 0 } };

#define CG "transformer.encoder.layers.%d."
static const vc_tensor_rule CHATGLM[] = {
    { "transformer.embedding.word_embeddings.weight", VC_W_TOK_EMBD },
    { "transformer.encoder.final_layernorm.weight", VC_W_OUT_NORM },
    { "transformer.output_layer.weight", VC_W_LM_HEAD },
    { "transformer.rotary_pos_emb.inv_freq", 0, VC_TR_IGNORE },
    { CG "input_layernorm.weight", VC_W_ATTN_NORM }, { CG "post_attention_layernorm.weight", VC_W_FFN_NORM },
    { CG "self_attention.query_key_value.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V },
    { CG "self_attention.query_key_value.bias", VC_W_Q_B, VC_TR_SPLIT_ROWS, VC_W_K_B, VC_W_V_B },
    { CG "self_attention.dense.weight", VC_W_O },
    { CG "mlp.dense_h_to_4h.weight", VC_W_GATE, VC_TR_SPLIT_ROWS, VC_W_UP },
    { CG "mlp.dense_4h_to_h.weight", VC_W_DOWN },
    { 0 } };

static const vc_tensor_rule INTERNLM2[] = {
    { "model.tok_embeddings.weight", VC_W_TOK_EMBD }, { "model.norm.weight", VC_W_OUT_NORM },
    { "output.weight", VC_W_LM_HEAD },
    { L "attention_norm.weight", VC_W_ATTN_NORM }, { L "ffn_norm.weight", VC_W_FFN_NORM },
    { L "attention.wqkv.weight", VC_W_Q, VC_TR_GQA_QKV, VC_W_K, VC_W_V },
    { L "attention.wo.weight", VC_W_O },
    { L "feed_forward.w1.weight", VC_W_GATE }, { L "feed_forward.w3.weight", VC_W_UP },
    { L "feed_forward.w2.weight", VC_W_DOWN },
    { 0 } };

/* Gated DeltaNet layers (Qwen3.5: in_proj_qkv, _z, _b, _a apart; Qwen3-Next: fused by q/k head) beside attention
 * layers whose q_proj holds each head's q then its output gate */
#define GDN_COMMON \
    { L "linear_attn.conv1d.weight", VC_W_LIN_CONV }, { L "linear_attn.dt_bias", VC_W_LIN_DT }, \
    { L "linear_attn.A_log", VC_W_LIN_ALOG }, { L "linear_attn.norm.weight", VC_W_LIN_NORM }, \
    { L "linear_attn.out_proj.weight", VC_W_LIN_OUT }, \
    { L "self_attn.q_proj.weight", VC_W_Q, VC_TR_HEAD_SPLIT, VC_W_ATTN_GATE }
/* Lara-Mini: Qwen3.5's Gated DeltaNet with its input projections fused row-wise ([q | k | v | z | b | a]) and its
 * gated norm named out_norm on the hub (transformers 5 splits and renames them on load, and back on save) */
static const vc_tensor_rule LARA_GDN[] = { /* (transformers 5's names first: LoRA's modules, `verlc init`'s names) */
    { L "linear_attn.in_proj_qkv.weight", VC_W_LIN_QKV }, { L "linear_attn.in_proj_z.weight", VC_W_LIN_Z },
    { L "linear_attn.in_proj_b.weight", VC_W_LIN_B }, { L "linear_attn.in_proj_a.weight", VC_W_LIN_A },
    { L "linear_attn.norm.weight", VC_W_LIN_NORM },
    { L "linear_attn.conv1d.weight", VC_W_LIN_CONV }, { L "linear_attn.dt_bias", VC_W_LIN_DT },
    { L "linear_attn.A_log", VC_W_LIN_ALOG }, { L "linear_attn.out_proj.weight", VC_W_LIN_OUT },
    { L "linear_attn.in_proj.weight", VC_W_LIN_QKV, VC_TR_SPLIT_ROWS, VC_W_LIN_Z, VC_W_LIN_B, VC_W_LIN_A },
    { L "linear_attn.out_norm.weight", VC_W_LIN_NORM },
    { 0 } };

static const vc_tensor_rule QWEN3_5_GDN[] = {
    GDN_COMMON,
    { L "linear_attn.in_proj_qkv.weight", VC_W_LIN_QKV }, { L "linear_attn.in_proj_z.weight", VC_W_LIN_Z },
    { L "linear_attn.in_proj_b.weight", VC_W_LIN_B }, { L "linear_attn.in_proj_a.weight", VC_W_LIN_A },
    { 0 } };
static const vc_tensor_rule QWEN3_NEXT_GDN[] = {
    GDN_COMMON,
    { L "linear_attn.in_proj_qkvz.weight", VC_W_LIN_QKV, VC_TR_QKVZ, VC_W_LIN_Z },
    { L "linear_attn.in_proj_ba.weight", VC_W_LIN_B, VC_TR_BA, VC_W_LIN_A },
    { 0 } };
#undef GDN_COMMON
/* OLMo-hybrid: Gated DeltaNet layers with q, k, v, a, b and the output gate (g_proj) projected apart, q, k and v
 * convolved apart (transformers 5 concatenates them as conv1d), o_norm, o_proj; the hub's norm names first */
static const vc_tensor_rule OLMO_HYBRID[] = {
    { L "attention_layer_norm.weight", VC_W_ATTN_NORM }, { L "feedforward_layer_norm.weight", VC_W_FFN_NORM },
    { L "feedforward_layer_norm.weight", VC_W_POST_ATTN_NORM },
    { L "linear_attn.q_conv1d.weight", VC_W_LIN_CONV }, { L "linear_attn.k_conv1d.weight", VC_W_LIN_CONV_K },
    { L "linear_attn.v_conv1d.weight", VC_W_LIN_CONV_V },
    { L "linear_attn.conv1d.weight", VC_W_LIN_CONV, VC_TR_SPLIT_ROWS, VC_W_LIN_CONV_K, VC_W_LIN_CONV_V },
    { L "linear_attn.q_proj.weight", VC_W_LIN_QKV }, { L "linear_attn.k_proj.weight", VC_W_LIN_K },
    { L "linear_attn.v_proj.weight", VC_W_LIN_V }, { L "linear_attn.g_proj.weight", VC_W_LIN_Z },
    { L "linear_attn.a_proj.weight", VC_W_LIN_A }, { L "linear_attn.b_proj.weight", VC_W_LIN_B },
    { L "linear_attn.dt_bias", VC_W_LIN_DT },
    { L "linear_attn.A_log", VC_W_LIN_ALOG }, { L "linear_attn.o_norm.weight", VC_W_LIN_NORM },
    { L "linear_attn.o_proj.weight", VC_W_LIN_OUT },
    { 0 } };
/* Kimi-Linear: Kimi Delta Attention layers under self_attn (q, k, v projected and convolved apart, the decay's and
 * the output gate's low-rank projections; transformers 5 names the decay's under forget_gate and stacks the convs)
 * beside MLA layers without rope (MLA_ATTN), each rule taking the layers that have its slot; the hub's
 * block_sparse_moe.* experts (MIXTRAL_MOE's w1 / w3 / w2) and transformers 5's mlp.* (HF_MOE) */
static const vc_tensor_rule KIMI_LINEAR[] = {
    { L "self_attn.q_proj.weight", VC_W_LIN_QKV }, { L "self_attn.k_proj.weight", VC_W_LIN_K },
    { L "self_attn.v_proj.weight", VC_W_LIN_V }, { L "self_attn.o_proj.weight", VC_W_LIN_OUT },
    { L "self_attn.q_conv1d.weight", VC_W_LIN_CONV }, { L "self_attn.k_conv1d.weight", VC_W_LIN_CONV_K },
    { L "self_attn.v_conv1d.weight", VC_W_LIN_CONV_V },
    { L "self_attn.conv1d.weight", VC_W_LIN_CONV, VC_TR_SPLIT_ROWS, VC_W_LIN_CONV_K, VC_W_LIN_CONV_V },
    { L "self_attn.forget_gate.f_a_proj.weight", VC_W_LIN_FA }, { L "self_attn.forget_gate.f_b_proj.weight", VC_W_LIN_FB },
    { L "self_attn.forget_gate.dt_bias", VC_W_LIN_DT }, { L "self_attn.forget_gate.A_log", VC_W_LIN_ALOG },
    { L "self_attn.f_a_proj.weight", VC_W_LIN_FA }, { L "self_attn.f_b_proj.weight", VC_W_LIN_FB },
    { L "self_attn.dt_bias", VC_W_LIN_DT }, { L "self_attn.A_log", VC_W_LIN_ALOG },
    { L "self_attn.b_proj.weight", VC_W_LIN_B }, { L "self_attn.g_a_proj.weight", VC_W_LIN_GA },
    { L "self_attn.g_b_proj.weight", VC_W_LIN_GB }, { L "self_attn.o_norm.weight", VC_W_LIN_NORM },
    { L "block_sparse_moe.gate.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { L "block_sparse_moe.gate_proj.weight", VC_W_GATE }, { L "block_sparse_moe.up_proj.weight", VC_W_UP },
    { L "block_sparse_moe.down_proj.weight", VC_W_DOWN }, /* dense layers as transformers 5 writes them back */
    { L "block_sparse_moe.shared_experts.gate_proj.weight", VC_W_SH_GATE },
    { L "block_sparse_moe.shared_experts.up_proj.weight", VC_W_SH_UP },
    { L "block_sparse_moe.shared_experts.down_proj.weight", VC_W_SH_DOWN },
    { 0 } };
/* MiniMax-Text-01: lightning attention layers (qkv_proj, output_gate, norm, out_proj) beside attention; Mixtral's
 * experts (block_sparse_moe.*) */
static const vc_tensor_rule MINIMAX[] = {
    { L "self_attn.qkv_proj.weight", VC_W_LIN_QKV }, { L "self_attn.output_gate.weight", VC_W_LIN_Z },
    { L "self_attn.norm.weight", VC_W_LIN_NORM }, { L "self_attn.out_proj.weight", VC_W_LIN_OUT },
    /* the decays transformers keeps as buffers (recomputed from the layer and head counts) */
    { L "self_attn.slope_rate", 0, VC_TR_IGNORE }, { L "self_attn.query_decay", 0, VC_TR_IGNORE },
    { L "self_attn.key_decay", 0, VC_TR_IGNORE }, { L "self_attn.diagonal_decay", 0, VC_TR_IGNORE },
    { 0 } };
/* Jamba: Mamba 1 layers (mamba.*, with norms of dt, B and C) beside attention without rope; a gated MLP or experts
 * under feed_forward (the hub's per-expert names, transformers 5's fused ones); pre_ff_layernorm, final_layernorm */
static const vc_tensor_rule JAMBA[] = {
    { "model.embed_tokens.weight", VC_W_TOK_EMBD }, { "model.final_layernorm.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { L "input_layernorm.weight", VC_W_ATTN_NORM }, { L "pre_ff_layernorm.weight", VC_W_FFN_NORM },
    { L "mamba.in_proj.weight", VC_W_LIN_QKV }, { L "mamba.conv1d.weight", VC_W_LIN_CONV },
    { L "mamba.conv1d.bias", VC_W_LIN_CONV_B }, { L "mamba.x_proj.weight", VC_W_LIN_XPROJ },
    { L "mamba.dt_proj.weight", VC_W_LIN_DTPROJ }, { L "mamba.dt_proj.bias", VC_W_LIN_DT },
    { L "mamba.A_log", VC_W_LIN_ALOG }, { L "mamba.D", VC_W_LIN_D }, { L "mamba.out_proj.weight", VC_W_LIN_OUT },
    { L "mamba.dt_layernorm.weight", VC_W_LIN_DT_NORM }, { L "mamba.b_layernorm.weight", VC_W_LIN_B_NORM },
    { L "mamba.c_layernorm.weight", VC_W_LIN_C_NORM },
    { L "feed_forward.gate_proj.weight", VC_W_GATE }, { L "feed_forward.up_proj.weight", VC_W_UP },
    { L "feed_forward.down_proj.weight", VC_W_DOWN }, { L "feed_forward.router.weight", VC_W_ROUTER },
    { L "feed_forward.experts.%d.gate_proj.weight", VC_W_EXP_GATE, VC_TR_EXPERT },
    { L "feed_forward.experts.%d.up_proj.weight", VC_W_EXP_UP, VC_TR_EXPERT },
    { L "feed_forward.experts.%d.down_proj.weight", VC_W_EXP_DOWN, VC_TR_EXPERT },
    { L "feed_forward.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "feed_forward.experts.down_proj", VC_W_EXP_DOWN },
    { 0 } };
/* LFM2: gated short convolutions (conv.in_proj: B, C, x), attention's out_proj and per-head q/k layernorms, the final
 * norm named embedding_norm, the MLP's w1 / w3 / w2 */
static const vc_tensor_rule LFM2[] = {
    { "model.embed_tokens.weight", VC_W_TOK_EMBD }, { "model.embedding_norm.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { L "operator_norm.weight", VC_W_ATTN_NORM }, { L "ffn_norm.weight", VC_W_FFN_NORM },
    { L "self_attn.q_proj.weight", VC_W_Q }, { L "self_attn.k_proj.weight", VC_W_K },
    { L "self_attn.v_proj.weight", VC_W_V }, { L "self_attn.out_proj.weight", VC_W_O },
    { L "self_attn.q_layernorm.weight", VC_W_Q_NORM }, { L "self_attn.k_layernorm.weight", VC_W_K_NORM },
    { L "conv.in_proj.weight", VC_W_LIN_QKV }, { L "conv.conv.weight", VC_W_LIN_CONV },
    { L "conv.out_proj.weight", VC_W_LIN_OUT },
    { L "feed_forward.w1.weight", VC_W_GATE }, { L "feed_forward.w3.weight", VC_W_UP },
    { L "feed_forward.w2.weight", VC_W_DOWN },
    { 0 } };
/* LFM3: sandwich norms after each operator and MLP, a sigmoid gate per attention head (the module g_proj, which
 * transformers 5.24 saves as gate_proj) */
static const vc_tensor_rule LFM3[] = {
    { L "post_operator_norm.weight", VC_W_POST_ATTN_NORM }, { L "post_ffn_norm.weight", VC_W_POST_FFN_NORM },
    { L "self_attn.o_proj.weight", VC_W_O }, { L "self_attn.q_norm.weight", VC_W_Q_NORM },
    { L "self_attn.k_norm.weight", VC_W_K_NORM }, { L "self_attn.g_proj.weight", VC_W_ATTN_GATE },
    { L "self_attn.gate_proj.weight", VC_W_ATTN_GATE },
    { 0 } };
/* LFM2-MoE: experts, router and its choice-only bias under feed_forward (transformers 5's fused experts too) */
static const vc_tensor_rule LFM2_MOE[] = {
    { L "feed_forward.gate.weight", VC_W_ROUTER }, { L "feed_forward.expert_bias", VC_W_ROUTER_BIAS },
    { L "feed_forward.experts.%d.w1.weight", VC_W_EXP_GATE, VC_TR_EXPERT },
    { L "feed_forward.experts.%d.w3.weight", VC_W_EXP_UP, VC_TR_EXPERT },
    { L "feed_forward.experts.%d.w2.weight", VC_W_EXP_DOWN, VC_TR_EXPERT },
    { L "feed_forward.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "feed_forward.experts.down_proj", VC_W_EXP_DOWN },
    { 0 } };
/* Granite 4 (granitemoehybrid): Mamba 2 layers (mamba.*) beside attention, Granite 3's MoE with a shared MLP; a
 * dense model's MLP is its shared_mlp */
#define MAMBA2_RULES \
    { L "mamba.in_proj.weight", VC_W_LIN_QKV }, { L "mamba.conv1d.weight", VC_W_LIN_CONV }, \
    { L "mamba.conv1d.bias", VC_W_LIN_CONV_B }, { L "mamba.dt_bias", VC_W_LIN_DT }, { L "mamba.A_log", VC_W_LIN_ALOG }, \
    { L "mamba.D", VC_W_LIN_D }, { L "mamba.norm.weight", VC_W_LIN_NORM }, { L "mamba.out_proj.weight", VC_W_LIN_OUT }
static const vc_tensor_rule GRANITE_HYBRID[] = {
    MAMBA2_RULES,
    { L "shared_mlp.input_linear.weight", VC_W_GATE, VC_TR_SPLIT_ROWS, VC_W_UP },
    { L "shared_mlp.output_linear.weight", VC_W_DOWN },
    { 0 } };
/* Bamba: Mamba 2 layers (mamba.*) beside attention, a gated MLP under feed_forward, pre_ff_layernorm, final_layernorm */
static const vc_tensor_rule BAMBA[] = {
    MAMBA2_RULES,
    { "model.embed_tokens.weight", VC_W_TOK_EMBD }, { "model.final_layernorm.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { L "input_layernorm.weight", VC_W_ATTN_NORM }, { L "pre_ff_layernorm.weight", VC_W_FFN_NORM },
    { L "feed_forward.gate_proj.weight", VC_W_GATE }, { L "feed_forward.up_proj.weight", VC_W_UP },
    { L "feed_forward.down_proj.weight", VC_W_DOWN },
    { 0 } };
#undef MAMBA2_RULES
/* Nemotron-H: blocks of one mixer (mixer.*: Mamba 2, attention or a plain MLP) behind norm; the hub's backbone.*
 * names (transformers 5: model.*) */
static const vc_tensor_rule NEMOTRON_H[] = {
    { "model.embeddings.weight", VC_W_TOK_EMBD }, { "model.norm_f.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD }, { L "norm.weight", VC_W_ATTN_NORM },
    { L "mixer.in_proj.weight", VC_W_LIN_QKV }, { L "mixer.conv1d.weight", VC_W_LIN_CONV },
    { L "mixer.conv1d.bias", VC_W_LIN_CONV_B }, { L "mixer.dt_bias", VC_W_LIN_DT }, { L "mixer.A_log", VC_W_LIN_ALOG },
    { L "mixer.D", VC_W_LIN_D }, { L "mixer.norm.weight", VC_W_LIN_NORM }, { L "mixer.out_proj.weight", VC_W_LIN_OUT },
    { L "mixer.q_proj.weight", VC_W_Q }, { L "mixer.k_proj.weight", VC_W_K }, { L "mixer.v_proj.weight", VC_W_V },
    { L "mixer.o_proj.weight", VC_W_O },
    { L "mixer.up_proj.weight", VC_W_UP }, { L "mixer.down_proj.weight", VC_W_DOWN },
    /* MoE blocks: a sigmoid router with a correction bias, experts without a gate, shared experts */
    { L "mixer.gate.weight", VC_W_ROUTER }, { L "mixer.gate.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { L "mixer.experts.%d.up_proj.weight", VC_W_EXP_UP, VC_TR_EXPERT },
    { L "mixer.experts.%d.down_proj.weight", VC_W_EXP_DOWN, VC_TR_EXPERT },
    { L "mixer.experts.up_proj", VC_W_EXP_UP }, { L "mixer.experts.down_proj", VC_W_EXP_DOWN },
    { L "mixer.shared_experts.up_proj.weight", VC_W_SH_UP }, { L "mixer.shared_experts.down_proj.weight", VC_W_SH_DOWN },
    { L "mixer.fc1_latent_proj.weight", VC_W_LAT_IN }, { L "mixer.fc2_latent_proj.weight", VC_W_LAT_OUT },
    { 0 } };
static const char *const NEMOTRON_H_NESTED[] = { "model.", "backbone.", NULL };
/* Mamba and FalconMamba: blocks of one mixer behind its norm under backbone.* (transformers keeps the hub's names) */
#define BL "backbone.layers.%d."
static const vc_tensor_rule MAMBA1[] = {
    { "backbone.embeddings.weight", VC_W_TOK_EMBD }, { "backbone.norm_f.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD }, { BL "norm.weight", VC_W_ATTN_NORM },
    { BL "mixer.in_proj.weight", VC_W_LIN_QKV }, { BL "mixer.conv1d.weight", VC_W_LIN_CONV },
    { BL "mixer.conv1d.bias", VC_W_LIN_CONV_B }, { BL "mixer.x_proj.weight", VC_W_LIN_XPROJ },
    { BL "mixer.dt_proj.weight", VC_W_LIN_DTPROJ }, { BL "mixer.dt_proj.bias", VC_W_LIN_DT },
    { BL "mixer.A_log", VC_W_LIN_ALOG }, { BL "mixer.D", VC_W_LIN_D }, { BL "mixer.out_proj.weight", VC_W_LIN_OUT },
    { 0 } };
/* Mamba 2 (Codestral Mamba): blocks of one Mamba 2 mixer behind its norm under backbone.* */
static const vc_tensor_rule MAMBA2_PURE[] = {
    { "backbone.embeddings.weight", VC_W_TOK_EMBD }, { "backbone.norm_f.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD }, { BL "norm.weight", VC_W_ATTN_NORM },
    { BL "mixer.in_proj.weight", VC_W_LIN_QKV }, { BL "mixer.conv1d.weight", VC_W_LIN_CONV },
    { BL "mixer.conv1d.bias", VC_W_LIN_CONV_B }, { BL "mixer.dt_bias", VC_W_LIN_DT }, { BL "mixer.A_log", VC_W_LIN_ALOG },
    { BL "mixer.D", VC_W_LIN_D }, { BL "mixer.norm.weight", VC_W_LIN_NORM }, { BL "mixer.out_proj.weight", VC_W_LIN_OUT },
    { 0 } };
#undef BL
/* the hub layout (language_model.model.*) and the one transformers 4.52-4.5x saved (model.language_model.*) */
static const char *const GEMMA3_NESTED[] = { "model.", "language_model.model.", "lm_head.", "language_model.lm_head.",
                                             "model.", "model.language_model.", "lm_head.", "lm_head.", NULL };
/* Kimi-VL's: only its remote code loads it, from the hub's language_model.model.* and language_model.lm_head (the
 * names `verlc init` writes) */
static const char *const KIMI_VL_NESTED[] = { "model.", "model.language_model.", "lm_head.", "lm_head.", "model.",
                                              "language_model.model.", "lm_head.", "language_model.lm_head.", NULL };
/* Llama 4's: transformers 5 keeps language_model.model.* and language_model.lm_head (the last pair of a prefix is
 * what `verlc init` writes) */
static const char *const LLAMA4_NESTED[] = { "model.", "model.language_model.", "model.", "language_model.model.",
                                             "lm_head.", "language_model.lm_head.", NULL };

/* GPT-2-era checkpoints under transformer.*: the final LayerNorm and the LM head; ln_1 / ln_2 LayerNorms; Falcon's and
 * BLOOM's self_attention / mlp (query_key_value grouped per kv head, the old multi-query layout one group) */
#define TH "transformer.h.%d."
static const vc_tensor_rule TF_FINAL[] = {
    { "transformer.ln_f.weight", VC_W_OUT_NORM }, { "transformer.ln_f.bias", VC_W_OUT_NORM_B },
    { "lm_head.weight", VC_W_LM_HEAD },
    { 0 } };
static const vc_tensor_rule TF_LN12[] = {
    { TH "ln_1.weight", VC_W_ATTN_NORM }, { TH "ln_1.bias", VC_W_ATTN_NORM_B },
    { TH "ln_2.weight", VC_W_FFN_NORM }, { TH "ln_2.bias", VC_W_FFN_NORM_B },
    { 0 } };
static const vc_tensor_rule TF_SELF_ATTENTION[] = {
    { TH "input_layernorm.weight", VC_W_ATTN_NORM }, { TH "input_layernorm.bias", VC_W_ATTN_NORM_B },
    { TH "post_attention_layernorm.weight", VC_W_FFN_NORM }, { TH "post_attention_layernorm.bias", VC_W_FFN_NORM_B },
    { TH "self_attention.query_key_value.weight", VC_W_Q, VC_TR_GQA_QKV, VC_W_K, VC_W_V },
    { TH "self_attention.query_key_value.bias", VC_W_Q_B, VC_TR_GQA_QKV, VC_W_K_B, VC_W_V_B },
    { TH "self_attention.dense.weight", VC_W_O }, { TH "self_attention.dense.bias", VC_W_O_B },
    { TH "mlp.dense_h_to_4h.weight", VC_W_UP }, { TH "mlp.dense_h_to_4h.bias", VC_W_UP_B },
    { TH "mlp.dense_4h_to_h.weight", VC_W_DOWN }, { TH "mlp.dense_4h_to_h.bias", VC_W_DOWN_B },
    { 0 } };

/* GPT-2: transformer.* (the hub's first checkpoints: without the prefix), Conv1D weights input-major, c_attn's q / k /
 * v side by side in its columns, learned position embeddings, LayerNorms and linears with biases */
static const vc_tensor_rule GPT2[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.wpe.weight", VC_W_POS_EMBD },
    { TH "attn.c_attn.weight", VC_W_Q, VC_TR_CONV1D, VC_W_K, VC_W_V },
    { TH "attn.c_attn.bias", VC_W_Q_B, VC_TR_SPLIT_ROWS, VC_W_K_B, VC_W_V_B },
    { TH "attn.c_proj.weight", VC_W_O, VC_TR_CONV1D }, { TH "attn.c_proj.bias", VC_W_O_B },
    { TH "mlp.c_fc.weight", VC_W_UP, VC_TR_CONV1D }, { TH "mlp.c_fc.bias", VC_W_UP_B },
    { TH "mlp.c_proj.weight", VC_W_DOWN, VC_TR_CONV1D }, { TH "mlp.c_proj.bias", VC_W_DOWN_B },
    { TH "attn.bias", 0, VC_TR_IGNORE }, { TH "attn.masked_bias", 0, VC_TR_IGNORE },
    { "h.%d.attn.bias", 0, VC_TR_IGNORE }, { "h.%d.attn.masked_bias", 0, VC_TR_IGNORE }, /* the causal-mask buffers */
    { 0 } };
static const char *const GPT2_NESTED[] = { "transformer.", "", NULL };
/* OpenAI GPT (GPT-1): GPT-2's layers under other embedding names, no final norm */
static const vc_tensor_rule OPENAI_GPT[] = {
    { "transformer.tokens_embed.weight", VC_W_TOK_EMBD }, { "transformer.positions_embed.weight", VC_W_POS_EMBD },
    { "lm_head.weight", VC_W_LM_HEAD },
    { 0 } };
/* GPT-BigCode (StarCoder 1, SantaCoder): GPT-2's layout with nn.Linear weights and c_attn grouped per kv head
 * ([q, k, v] per head; multi_query: all q, then the one k and v) */
static const vc_tensor_rule GPT_BIGCODE[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.wpe.weight", VC_W_POS_EMBD },
    { TH "attn.c_attn.weight", VC_W_Q, VC_TR_GQA_QKV, VC_W_K, VC_W_V },
    { TH "attn.c_attn.bias", VC_W_Q_B, VC_TR_GQA_QKV, VC_W_K_B, VC_W_V_B },
    { TH "attn.c_proj.weight", VC_W_O }, { TH "attn.c_proj.bias", VC_W_O_B },
    { TH "mlp.c_fc.weight", VC_W_UP }, { TH "mlp.c_fc.bias", VC_W_UP_B },
    { TH "mlp.c_proj.weight", VC_W_DOWN }, { TH "mlp.c_proj.bias", VC_W_DOWN_B },
    { TH "attn.bias", 0, VC_TR_IGNORE }, { TH "attn.masked_bias", 0, VC_TR_IGNORE },
    { 0 } };

/* OPT's decoder layer (pre-norm LayerNorms and linears with biases, a relu MLP fc1 / fc2) under layer prefix P: OPT's,
 * XGLM's and BioGPT's */
#define OPT_LAYER(P) \
    { P "self_attn_layer_norm.weight", VC_W_ATTN_NORM }, { P "self_attn_layer_norm.bias", VC_W_ATTN_NORM_B }, \
    { P "final_layer_norm.weight", VC_W_FFN_NORM }, { P "final_layer_norm.bias", VC_W_FFN_NORM_B }, \
    { P "self_attn.q_proj.weight", VC_W_Q }, { P "self_attn.q_proj.bias", VC_W_Q_B }, \
    { P "self_attn.k_proj.weight", VC_W_K }, { P "self_attn.k_proj.bias", VC_W_K_B }, \
    { P "self_attn.v_proj.weight", VC_W_V }, { P "self_attn.v_proj.bias", VC_W_V_B }, \
    { P "self_attn.out_proj.weight", VC_W_O }, { P "self_attn.out_proj.bias", VC_W_O_B }, \
    { P "fc1.weight", VC_W_UP }, { P "fc1.bias", VC_W_UP_B }, \
    { P "fc2.weight", VC_W_DOWN }, { P "fc2.bias", VC_W_DOWN_B }

/* OPT: model.decoder.* (the hub's OPTModel checkpoints: decoder.*), learned positions offset by 2, LayerNorms and
 * linears with biases, a relu MLP (fc1, fc2) */
#define OD "model.decoder.layers.%d."
static const vc_tensor_rule OPT[] = {
    { "model.decoder.embed_tokens.weight", VC_W_TOK_EMBD }, { "model.decoder.embed_positions.weight", VC_W_POS_EMBD },
    { "model.decoder.final_layer_norm.weight", VC_W_OUT_NORM }, { "model.decoder.final_layer_norm.bias", VC_W_OUT_NORM_B },
    { "lm_head.weight", VC_W_LM_HEAD },
    { "model.decoder.project_in.weight", VC_W_PROJ_IN }, { "model.decoder.project_out.weight", VC_W_PROJ_OUT },
    OPT_LAYER(OD),
    { 0 } };
#undef OD
static const char *const OPT_NESTED[] = { "model.", "", NULL };

/* XGLM: OPT's decoder layer under model.layers.* (its positions sinusoidal, not stored) */
static const vc_tensor_rule XGLM[] = {
    { "model.embed_tokens.weight", VC_W_TOK_EMBD }, { "lm_head.weight", VC_W_LM_HEAD },
    { "model.layer_norm.weight", VC_W_OUT_NORM }, { "model.layer_norm.bias", VC_W_OUT_NORM_B },
    OPT_LAYER(L),
    { "model.embed_positions.weights", 0, VC_TR_IGNORE }, /* (a buffer some checkpoints carry: recomputed) */
    { 0 } };

/* BioGPT: OPT's decoder layer under biogpt.*, its LM head output_projection */
#define BG "biogpt.layers.%d."
static const vc_tensor_rule BIOGPT[] = {
    { "biogpt.embed_tokens.weight", VC_W_TOK_EMBD }, { "biogpt.embed_positions.weight", VC_W_POS_EMBD },
    { "biogpt.layer_norm.weight", VC_W_OUT_NORM }, { "biogpt.layer_norm.bias", VC_W_OUT_NORM_B },
    { "output_projection.weight", VC_W_LM_HEAD },
    OPT_LAYER(BG),
    { 0 } };
#undef BG
#undef OPT_LAYER

/* DBRX: fused Wqkv (q, k, v rows), LayerNorms without bias, the experts stored flat ([E I, H]; w2 input-major) */
#define DB "transformer.blocks.%d."
static const vc_tensor_rule DBRX[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.norm_f.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { DB "norm_attn_norm.norm_1.weight", VC_W_ATTN_NORM }, { DB "norm_attn_norm.norm_2.weight", VC_W_FFN_NORM },
    { DB "norm_attn_norm.attn.Wqkv.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V },
    { DB "norm_attn_norm.attn.out_proj.weight", VC_W_O },
    { DB "ffn.router.layer.weight", VC_W_ROUTER },
    { DB "ffn.experts.mlp.w1", VC_W_EXP_GATE, VC_TR_FLAT }, { DB "ffn.experts.mlp.v1", VC_W_EXP_UP, VC_TR_FLAT },
    { DB "ffn.experts.mlp.w2", VC_W_EXP_DOWN, VC_TR_FLAT_T_DOWN },
    { 0 } };
#undef DB

/* Falcon: ln_attn / ln_mlp feeding attention and a plain GELU MLP in parallel (the new decoder architecture), or one
 * input_layernorm (parallel) or two (sequential); TF_SELF_ATTENTION's projections */
static const vc_tensor_rule FALCON[] = {
    { "transformer.word_embeddings.weight", VC_W_TOK_EMBD },
    { TH "ln_attn.weight", VC_W_ATTN_NORM }, { TH "ln_attn.bias", VC_W_ATTN_NORM_B },
    { TH "ln_mlp.weight", VC_W_FFN_NORM }, { TH "ln_mlp.bias", VC_W_FFN_NORM_B },
    { 0 } };

/* GPT-Neo: GPT-2's layout with nn.Linear projections under attn.attention, local (windowed) and global layers */
static const vc_tensor_rule GPT_NEO[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.wpe.weight", VC_W_POS_EMBD },
    { TH "attn.attention.q_proj.weight", VC_W_Q }, { TH "attn.attention.k_proj.weight", VC_W_K },
    { TH "attn.attention.v_proj.weight", VC_W_V }, { TH "attn.attention.out_proj.weight", VC_W_O },
    { TH "attn.attention.out_proj.bias", VC_W_O_B },
    { TH "mlp.c_fc.weight", VC_W_UP }, { TH "mlp.c_fc.bias", VC_W_UP_B },
    { TH "mlp.c_proj.weight", VC_W_DOWN }, { TH "mlp.c_proj.bias", VC_W_DOWN_B },
    { TH "attn.attention.bias", 0, VC_TR_IGNORE }, { TH "attn.attention.masked_bias", 0, VC_TR_IGNORE },
    { 0 } };

/* BLOOM: a LayerNorm on the embeddings, TF_SELF_ATTENTION's projections (query_key_value per head), ALiBi; the hub's
 * checkpoints without transformer. */
static const vc_tensor_rule BLOOM[] = {
    { "transformer.word_embeddings.weight", VC_W_TOK_EMBD },
    { "transformer.word_embeddings_layernorm.weight", VC_W_EMB_NORM },
    { "transformer.word_embeddings_layernorm.bias", VC_W_EMB_NORM_B },
    { 0 } };

/* MPT: transformer.blocks.*, Wqkv [q; k; v], LayerNorms without biases, a GELU MLP, ALiBi */
#define MB "transformer.blocks.%d."
static const vc_tensor_rule MPT[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "transformer.norm_f.weight", VC_W_OUT_NORM },
    { "lm_head.weight", VC_W_LM_HEAD },
    { MB "norm_1.weight", VC_W_ATTN_NORM }, { MB "norm_2.weight", VC_W_FFN_NORM },
    { MB "attn.Wqkv.weight", VC_W_Q, VC_TR_SPLIT_ROWS, VC_W_K, VC_W_V }, { MB "attn.out_proj.weight", VC_W_O },
    { MB "ffn.up_proj.weight", VC_W_UP }, { MB "ffn.down_proj.weight", VC_W_DOWN },
    { 0 } };
#undef MB

/* GPT-J: one LayerNorm feeding attention and the MLP in parallel, GPT-J rope pairs, an LM head with a bias */
/* CodeGen: GPT-J's layout with q, v and k fused in four blocks */
static const vc_tensor_rule CODEGEN_QKV[] = {
    { TH "attn.qkv_proj.weight", VC_W_Q, VC_TR_CODEGEN_QKV, VC_W_K, VC_W_V }, { TH "attn.causal_mask", 0, VC_TR_IGNORE },
    { 0 } };

static const vc_tensor_rule GPTJ[] = {
    { "transformer.wte.weight", VC_W_TOK_EMBD }, { "lm_head.bias", VC_W_LM_HEAD_B },
    { TH "ln_1.weight", VC_W_ATTN_NORM }, { TH "ln_1.bias", VC_W_ATTN_NORM_B },
    { TH "attn.q_proj.weight", VC_W_Q }, { TH "attn.k_proj.weight", VC_W_K }, { TH "attn.v_proj.weight", VC_W_V },
    { TH "attn.out_proj.weight", VC_W_O },
    { TH "mlp.fc_in.weight", VC_W_UP }, { TH "mlp.fc_in.bias", VC_W_UP_B },
    { TH "mlp.fc_out.weight", VC_W_DOWN }, { TH "mlp.fc_out.bias", VC_W_DOWN_B },
    { TH "attn.bias", 0, VC_TR_IGNORE }, { TH "attn.masked_bias", 0, VC_TR_IGNORE },
    { 0 } };
#undef TH

/* Hunyuan 3 (Hy3): the hub's router, correction bias and shared MLP names, transformers 5's after them */
static const vc_tensor_rule HY_V3[] = {
    { L "mlp.router.gate.weight", VC_W_ROUTER }, { L "mlp.expert_bias", VC_W_ROUTER_BIAS },
    { L "mlp.shared_mlp.gate_proj.weight", VC_W_SH_GATE }, { L "mlp.shared_mlp.up_proj.weight", VC_W_SH_UP },
    { L "mlp.shared_mlp.down_proj.weight", VC_W_SH_DOWN },
    { L "mlp.e_score_correction_bias", VC_W_ROUTER_BIAS },
    { 0 } };

/* MiMo-V2-Flash: the sliding layers' sinks (transformers 5 names them attention_sink_bias in the checkpoint) */
static const vc_tensor_rule MIMO_SINKS[] = {
    { L "self_attn.attention_sink_bias", VC_W_SINKS }, { L "self_attn.sinks", VC_W_SINKS },
    { 0 } };

/* Gemma 4: Gemma 2's norms, its own pieces (k_proj may hold the values too: attention_k_eq_v; KV-sharing layers
 * have no k_proj / v_proj / k_norm), the MoE block beside the dense MLP, per-layer embeddings */
static const vc_tensor_rule GEMMA4[] = {
    { L "layer_scalar", VC_W_LAYER_SCALAR },
    { L "pre_feedforward_layernorm_2.weight", VC_W_PRE_FFN_NORM2 },
    { L "post_feedforward_layernorm_1.weight", VC_W_POST_FFN_NORM1 },
    { L "post_feedforward_layernorm_2.weight", VC_W_POST_FFN_NORM2 },
    { L "router.proj.weight", VC_W_ROUTER }, { L "router.scale", VC_W_ROUTER_SCALE },
    { L "router.per_expert_scale", VC_W_EXP_SCALE },
    { L "experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_EXPERT_GATE_UP, VC_W_EXP_UP },
    { L "experts.down_proj", VC_W_EXP_DOWN },
    { L "per_layer_input_gate.weight", VC_W_PLE_GATE }, { L "per_layer_projection.weight", VC_W_PLE_PROJ },
    { L "post_per_layer_input_norm.weight", VC_W_PLE_NORM },
    { "model.embed_tokens_per_layer.weight", VC_W_PLE_EMBD },
    { "model.per_layer_model_projection.weight", VC_W_PLE_MODEL_PROJ },
    { "model.per_layer_projection_norm.weight", VC_W_PLE_PROJ_NORM },
    { 0 } };
/* Gemma 4's image-audio-text checkpoints: model.language_model.* */
static const char *const GEMMA4_NESTED[] = { "model.", "model.language_model.", NULL };

/* Qwen3-VL-MoE: the hub stores the experts input-major ([E, H, 2I] gate | up, [E, I, H]); checkpoints transformers
 * 5 writes have HF_MOE's layout (the loader tells them apart by shape) */
static const vc_tensor_rule QWEN3VL_MOE[] = {
    { L "mlp.gate.weight", VC_W_ROUTER },
    { L "mlp.experts.gate_up_proj", VC_W_EXP_GATE, VC_TR_T_GATE_UP, VC_W_EXP_UP },
    { L "mlp.experts.down_proj", VC_W_EXP_DOWN, VC_TR_T_DOWN },
    { 0 } };

/* Qwen2-VL / Qwen2.5-VL (hub: model.* and visual.*; later: model.language_model.*, model.visual.*) and Qwen3-VL */
static const char *const QWEN_VL_NESTED[] = { "model.", "model.language_model.", NULL };

/* every family's classification checkpoints (transformers' Generic*Classification) name their head score */
static const vc_tensor_rule SCORE_HEAD[] = { { "score.weight", VC_W_SCORE }, { "score.bias", VC_W_SCORE_B }, { 0 } };
#define T(...) (const vc_tensor_rule *const[]) { __VA_ARGS__, SCORE_HEAD, NULL }
static const vc_arch ARCHS[] = {
    { "llama", "llama mistral qwen2 qwen3 gemma yi deepseek seed_oss ernie4_5 granite smollm3 arcee ministral ministral3 helium cohere cohere2 olmo cwm", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP) },
    /* HyperCLOVA X: Granite with a norm after each sublayer */
    { "hyperclovax", "hyperclovax", T(HF_GLOBAL, HF_NORMS, HCX_NORMS, HF_ATTN, HF_MLP) },
    { "qwen2_moe", "qwen2_moe qwen3_moe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE) },
    /* Laguna: query heads per layer, a softplus gate on the attention output (g_proj), a sigmoid router with a
     * correction bias (the hub's mlp.experts.e_score_correction_bias), an ungated shared expert */
    { "laguna", "laguna", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, LAGUNA, HF_MOE) },
    /* PhiMoE (Phi-3.5-MoE): LayerNorms, Mixtral's experts behind the sparsemixer router (transformers 5's
     * mlp.router, the hub's block_sparse_moe.gate) */
    { "phimoe", "phimoe", T(HF_GLOBAL, HF_NORMS, JAIS2_NORMS, HF_ATTN, PHIMOE, MIXTRAL_MOE), NULL, NULL, "mlp", "router" },
    /* Mellum 2: Qwen3-MoE on sliding and full layers (each kind its own rope), its MTP layer left alone */
    { "mellum", "mellum", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE), NULL, "mtp." },
    { "mixtral", "mixtral", T(HF_GLOBAL, HF_NORMS, HF_ATTN, MIXTRAL_MOE) },
    { "minimax_m2", "minimax_m2", T(HF_GLOBAL, HF_NORMS, HF_ATTN, MIXTRAL_MOE, MINIMAX_BIAS) },
    /* (Granite MoE's experts and router sit under block_sparse_moe in transformers 5: PEFT's target_parameters) */
    { "granitemoe", "granitemoe granitemoeshared", T(HF_GLOBAL, HF_NORMS, HF_ATTN, GRANITE_MOE), NULL, NULL,
      "block_sparse_moe", "router" },
    /* Granite SWA: Granite (or its MoE) with sliding layers, attention sinks and a rope base per layer */
    { "granite_swa", "granite_swa", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, SINKS) },
    { "granitemoe_swa", "granitemoe_swa", T(HF_GLOBAL, HF_NORMS, HF_ATTN, GRANITE_MOE, SINKS), NULL, NULL,
      "block_sparse_moe", "router" },
    { "deepseek_v2", "deepseek_v2 deepseek_v3 glm4_moe_lite mistral4 youtu",
      T(HF_GLOBAL, HF_NORMS, MLA_ATTN, HF_MLP, HF_MOE, DEEPSEEK_MTP), NULL, NULL, NULL, NULL, 0, 0, "model.layers.%d.", 0,
      NULL, 1 },
    /* Kimi K2.5 / K2.6 (KimiK25ForConditionalGeneration): Kimi K2's text model under language_model.*, its MoonViT
     * tower and projector left alone (copied through on export) */
    { "kimi_k25", "kimi_k25", T(HF_GLOBAL, HF_NORMS, MLA_ATTN, HF_MLP, HF_MOE), GEMMA3_NESTED, "vision_tower. mm_projector." },
    /* Kimi-VL (KimiVLForConditionalGeneration, remote code): the same layout, its MoonViT tower and projector read when
     * images are given (src/model/vision.c) */
    { "kimi_vl", "kimi_vl", T(HF_GLOBAL, HF_NORMS, MLA_ATTN, HF_MLP, HF_MOE), KIMI_VL_NESTED,
      "vision_tower. multi_modal_projector.", NULL, NULL, 0, 1 },
    /* A.X K1: DeepSeek-V3 with a norm on the MoE block's output (post_mlp_layernorm at the layer, or under mlp.) */
    { "axk1", "axk1", T(HF_GLOBAL, HF_NORMS, MLA_ATTN, HF_MLP, HF_MOE, AXK1_NORM) },
    /* DeepSeek-V3.2 and GLM-MoE-DSA (GLM-5): MLA behind DeepSeek Sparse Attention's indexer */
    { "deepseek_v32", "deepseek_v32 glm_moe_dsa", T(HF_GLOBAL, HF_NORMS, MLA_ATTN, DSA_INDEXER, HF_MLP, HF_MOE), NULL,
      "mtp." },
    { "gpt2", "gpt2", T(GPT2, TF_FINAL, TF_LN12), GPT2_NESTED },
    { "openai-gpt", "openai-gpt", T(OPENAI_GPT, GPT2, TF_LN12), GPT2_NESTED },
    { "gpt_bigcode", "gpt_bigcode", T(GPT_BIGCODE, TF_FINAL, TF_LN12) },
    { "gptj", "gptj", T(GPTJ, TF_FINAL) },
    { "codegen", "codegen", T(CODEGEN_QKV, GPTJ, TF_FINAL) },
    { "falcon", "falcon", T(FALCON, TF_FINAL, TF_SELF_ATTENTION) },
    { "mpt", "mpt", T(MPT) },
    { "bloom", "bloom", T(BLOOM, TF_FINAL, TF_SELF_ATTENTION), GPT2_NESTED },
    { "gpt_neo", "gpt_neo", T(GPT_NEO, TF_FINAL, TF_LN12) },
    { "opt", "opt", T(OPT), OPT_NESTED },
    { "biogpt", "biogpt", T(BIOGPT) },
    { "xglm", "xglm", T(XGLM) },
    { "dbrx", "dbrx", T(DBRX) },
    { "hy_v3", "hy_v3", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HY_V3, HF_MOE) },
    /* MiMo (MiMo-7B): Qwen2's layout; its multi-token-prediction layers (model.mtp_layers.*) are not used */
    { "mimo", "mimo", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, MIMO_MTP), NULL, "model.mtp_layers.", NULL, NULL, 0, 0,
      "model.mtp_layers.%d.", 1 },
    /* MiMo-V2-Flash: its multi-token-prediction layers (mtp.*) are not used */
    { "mimo_v2_flash", "mimo_v2_flash", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE, MIMO_SINKS, MIMO_V2_MTP), NULL,
      "model.mtp. mtp.", NULL, NULL, 0, 0, "model.mtp.layers.%d.", 1, NULL, 0, 1,
      "post_attention_layernorm.=pre_mlp_layernorm." },
    { "minicpm3", "minicpm3", T(HF_GLOBAL, HF_NORMS, MLA_ATTN, HF_MLP) },
    { "cohere2_moe", "cohere2_moe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE) },
    { "glm4_moe", "glm4_moe dots1 exaone_moe solar_open",
      T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE, MINIMAX_BIAS, DEEPSEEK_MTP), NULL, NULL, NULL, NULL, 0, 0,
      "model.layers.%d.", 0, NULL, 1 },
    /* (transformers 5's names first, the hub's after: see model_names) */
    { "sarvam_moe", "sarvam_moe param2moe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE, SARVAM_HUB), NULL, NULL, NULL,
      NULL, 1 },
    { "exaone", "exaone", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, EXAONE_HUB), NULL, NULL, NULL, NULL, 1 },
    { "minicpm5_moe", "minicpm5_moe", T(MINICPM5_QGATE, HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE), NULL, NULL, NULL,
      NULL, 1 },
    { "ernie4_5_moe", "ernie4_5_moe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, ERNIE_MOE, HF_MOE) },
    { "gpt_oss", "gpt_oss", T(HF_GLOBAL, HF_NORMS, HF_ATTN, GPT_OSS), NULL, NULL, "mlp", "router" },
    { "gemma2", "gemma2", T(HF_GLOBAL, GEMMA2_NORMS, HF_ATTN, HF_MLP) },
    { "vaultgemma", "vaultgemma", T(HF_GLOBAL, VAULTGEMMA_NORMS, HF_ATTN, HF_MLP) },
    { "jais2", "jais2", T(HF_GLOBAL, HF_NORMS, JAIS2_NORMS, HF_ATTN, HF_MLP) },
    /* Nemotron (Nemotron-4, Minitron): LayerNorm1P with biases, a relu2 MLP without gate */
    { "nemotron", "nemotron", T(HF_GLOBAL, HF_NORMS, JAIS2_NORMS, HF_ATTN, HF_MLP) },
    /* StableLM (2): LayerNorms with biases, Llama's projections (q/k/v biases with use_qkv_bias) */
    { "stablelm", "stablelm", T(HF_GLOBAL, HF_NORMS, JAIS2_NORMS, STABLELM_ATTN, HF_MLP) },
    { "gemma3_text", "gemma3_text", T(HF_GLOBAL, GEMMA2_NORMS, HF_ATTN, HF_MLP) },
    /* Gemma 3 4B and up (Gemma3ForConditionalGeneration): the text decoder of an image-text model */
    { "gemma3", "gemma3", T(HF_GLOBAL, GEMMA2_NORMS, HF_ATTN, HF_MLP), GEMMA3_NESTED,
      "vision_tower. multi_modal_projector. model.vision_tower. model.multi_modal_projector." },
    /* Gemma 4 (Gemma4ForCausalLM, and Gemma4ForConditionalGeneration's text decoder beside its vision and audio
     * towers); its router and experts sit directly under the layer */
    { "gemma4_text", "gemma4_text", T(HF_GLOBAL, GEMMA2_NORMS, HF_ATTN, HF_MLP, GEMMA4), NULL, NULL, "", "router.proj" },
    { "gemma4", "gemma4", T(HF_GLOBAL, GEMMA2_NORMS, HF_ATTN, HF_MLP, GEMMA4), GEMMA4_NESTED,
      "model.vision_tower. model.audio_tower. model.embed_vision. model.embed_audio.", "", "router.proj" },
    /* Gemma 4 Unified (Gemma4UnifiedForConditionalGeneration): its text decoder beside a patch embedder for images
     * and an audio tower */
    { "gemma4_unified", "gemma4_unified", T(HF_GLOBAL, GEMMA2_NORMS, HF_ATTN, HF_MLP, GEMMA4), GEMMA4_NESTED,
      "model.vision_embedder. model.embed_vision. model.audio_tower. model.embed_audio." },
    /* the text decoders of Qwen's image-text models (vision towers left alone, copied through on export) */
    { "qwen_vl", "qwen2_vl qwen2_5_vl qwen3_vl", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP), QWEN_VL_NESTED,
      "visual. model.visual." },
    { "qwen3_vl_moe", "qwen3_vl_moe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE, QWEN3VL_MOE), QWEN_VL_NESTED,
      "visual. model.visual." },
    /* InternVL (transformers' layout): a Qwen2 / Qwen3 / Llama text decoder beside its vision tower */
    { "internvl", "internvl", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP), GEMMA3_NESTED,
      "vision_tower. multi_modal_projector. model.vision_tower. model.multi_modal_projector." },
    /* GLM-4.1V / 4.6V and GLM-4.5V: GLM-4's and GLM-4.5's text decoders beside the vision tower (vision.c; M-RoPE by
     * mrope_section with images, the plain rope on text positions without) */
    { "glm4v", "glm4v", T(HF_GLOBAL, GLM4_NORMS, HF_ATTN, GLM_MLP), QWEN_VL_NESTED, "visual. model.visual." },
    { "glm4v_moe", "glm4v_moe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE), QWEN_VL_NESTED, "visual. model.visual." },
    /* Mistral 3 (Ministral 3, Mistral Small 3.x): a Pixtral vision tower beside the text decoder */
    { "mistral3", "mistral3", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP), GEMMA3_NESTED,
      "vision_tower. multi_modal_projector. model.vision_tower. model.multi_modal_projector." },
    { "phi3", "phi3", T(HF_GLOBAL, HF_NORMS, PHI3_FUSED) },
    { "glm", "glm", T(HF_GLOBAL, HF_NORMS, HF_ATTN, GLM_MLP) },
    { "glm4", "glm4", T(HF_GLOBAL, GLM4_NORMS, HF_ATTN, GLM_MLP) },
    /* Kolibri: GLM-4's sandwich norms, EXAONE 4's attention, a sigmoid router with a correction bias on its logits */
    { "kolibri1", "kolibri1", T(HF_GLOBAL, KOLIBRI_HUB, GLM4_NORMS, HF_ATTN, HF_MOE) },
    /* Flint: Qwen3-MoE with sinks (the hub's softmax_offset), a sigmoid router and an ungated shared expert */
    { "flint", "flint", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MLP, HF_MOE, FLINT_SINKS) },
    { "olmo2", "olmo2 olmo3 exaone4", T(HF_GLOBAL, OLMO2_NORMS, HF_ATTN, HF_MLP) },
    { "flex_olmo", "flex_olmo", T(HF_GLOBAL, OLMO2_NORMS, HF_ATTN, HF_MOE) },
    { "olmoe", "olmoe", T(HF_GLOBAL, HF_NORMS, HF_ATTN, HF_MOE) },
    /* (its router is the Linear gate.wg: PEFT's module and target_parameters name it so) */
    { "hunyuan_v1_moe", "hunyuan_v1_moe", T(HF_GLOBAL, HF_NORMS, HUNYUAN_QK, HF_ATTN, HUNYUAN_MOE, HF_MOE), NULL, NULL,
      "mlp", "gate.wg" },
    { "starcoder2", "starcoder2", T(HF_GLOBAL, HF_NORMS, HF_ATTN, STARCODER2) },
    { "hunyuan_v1_dense", "hunyuan_v1_dense", T(HF_GLOBAL, HF_NORMS, HUNYUAN_QK, HF_ATTN, HF_MLP) },
    { "phi", "phi", T(PHI2, HF_ATTN) },
    { "nanochat", "nanochat", T(HF_GLOBAL, HF_ATTN, NANOCHAT_MLP) },
    { "apertus", "apertus", T(HF_GLOBAL, APERTUS, HF_ATTN, HF_MLP) },
    /* Apertus 1.5: Apertus with an LM head pruned to the text tokens (output_vocab_size), and its image-audio-text
     * checkpoints (model.language_model.*; the image and audio tokenizers are left alone) */
    { "apertus1p5", "apertus1p5_text apertus1p5", T(HF_GLOBAL, APERTUS, HF_ATTN, HF_MLP), QWEN_VL_NESTED,
      "model.vision_tokenizer. model.audio_tokenizer." },
    { "afmoe", "afmoe", T(HF_GLOBAL, AFMOE, HF_ATTN, HF_MLP, HF_MOE), NULL, NULL, "mlp", "router.gate" },
    { "llama4_text", "llama4_text", T(HF_GLOBAL, HF_NORMS, HF_ATTN, LLAMA4), NULL, NULL, "feed_forward", "router" },
    /* Llama 4 (Llama4ForConditionalGeneration): its text model beside a vision model */
    { "llama4", "llama4", T(HF_GLOBAL, HF_NORMS, HF_ATTN, LLAMA4), LLAMA4_NESTED,
      "vision_model. multi_modal_projector. model.vision_model. model.multi_modal_projector.", "feed_forward", "router" },
    /* Qwen3.5 and Qwen3-Next: Gated DeltaNet layers among gated attention layers (their multi-token prediction
     * heads, mtp.*, are not used); Qwen3.5's image-text checkpoints nest the text model */
    { "qwen3_5", "qwen3_5_text qwen3_5", T(HF_GLOBAL, HF_NORMS, QWEN3_5_GDN, HF_ATTN, HF_MLP, QWEN3_NEXT_MTP),
      QWEN_VL_NESTED, "mtp. visual. model.visual.", NULL, NULL, 0, 0, "mtp.layers.%d.", 0, "mtp." },
    { "qwen3_5_moe", "qwen3_5_moe_text qwen3_5_moe",
      T(HF_GLOBAL, HF_NORMS, QWEN3_5_GDN, HF_ATTN, HF_MLP, HF_MOE, QWEN3_NEXT_MTP), QWEN_VL_NESTED,
      "mtp. visual. model.visual.", NULL, NULL, 0, 0, "mtp.layers.%d.", 0, "mtp." },
    { "qwen3_next", "qwen3_next", T(HF_GLOBAL, HF_NORMS, QWEN3_NEXT_GDN, HF_ATTN, HF_MLP, HF_MOE, QWEN3_NEXT_MTP), NULL,
      "mtp.", NULL, NULL, 0, 0, "mtp.layers.%d.", 0, "mtp." },
    { "lara_mini", "lara_mini", T(HF_GLOBAL, HF_NORMS, LARA_GDN, HF_ATTN, HF_MOE), NULL, NULL, NULL, NULL, 1 },
    /* OLMo-hybrid: its linear layers' pre-norms and its attention layers' post-norms share names (the hub's
     * feedforward_layer_norm, transformers' post_attention_layernorm), each rule taking the layers that have its slot */
    { "olmo_hybrid", "olmo_hybrid", T(HF_GLOBAL, OLMO_HYBRID, HF_NORMS, OLMO2_NORMS, HF_ATTN, HF_MLP) },
    { "kimi_linear", "kimi_linear", T(HF_GLOBAL, HF_NORMS, HF_MLP, KIMI_LINEAR, MLA_ATTN, MIXTRAL_MOE, HF_MOE) },
    { "minimax", "minimax", T(HF_GLOBAL, HF_NORMS, MINIMAX, HF_ATTN, MIXTRAL_MOE) },
    { "jamba", "jamba", T(JAMBA, HF_ATTN), NULL, NULL, "feed_forward", "router" },
    { "mamba", "mamba falcon_mamba", T(MAMBA1) },
    { "mamba2", "mamba2", T(MAMBA2_PURE) },
    { "gpt_neox", "gpt_neox", T(GPT_NEOX) },
    { "persimmon", "persimmon", T(PERSIMMON) },
    { "lfm2", "lfm2", T(LFM2) },
    { "lfm3", "lfm3", T(LFM3, LFM2) },
    { "nemotron_h", "nemotron_h", T(NEMOTRON_H), NEMOTRON_H_NESTED, "mtp." },
    { "bamba", "bamba", T(BAMBA, HF_ATTN) },
    { "falcon_h1", "falcon_h1", T(BAMBA, HF_ATTN) }, /* Bamba's names, every layer with both mixers */
    { "granitemoehybrid", "granitemoehybrid", T(HF_GLOBAL, HF_NORMS, HF_ATTN, GRANITE_HYBRID, GRANITE_MOE), NULL, NULL,
      "block_sparse_moe", "router" },
    { "lfm2_moe", "lfm2_moe", T(LFM2, LFM2_MOE), NULL, NULL, "feed_forward", "gate" },
    { "baichuan", "baichuan", T(HF_GLOBAL, HF_NORMS, BAICHUAN, HF_MLP) },
    { "qwen", "qwen", T(QWEN1) },
    { "chatglm", "chatglm", T(CHATGLM) },
    { "internlm2", "internlm2", T(INTERNLM2) },
};

/* a per-layer weight rule's module path, formatted for the layer; 0 unless the name ends in ".weight" */
static int rule_module(const vc_tensor_rule *r, int layer, char *buf, size_t cap) {
    if (!strstr(r->name, "%d")) return 0;
    char full[256];
    snprintf(full, sizeof full, r->name, layer, 0);
    size_t n = strlen(full);
    if (n < 8 || strcmp(full + n - 7, ".weight")) return 0;
    snprintf(buf, cap, "%.*s", (int)(n - 7), full);
    return 1;
}

int vc_arch_module_name(const vc_arch *a, int layer, int slot, char *buf, size_t cap) {
    for (const vc_tensor_rule *const *t = a->tables; *t; t++)
        for (const vc_tensor_rule *r = *t; r->name; r++)
            if (((r->slot == slot && (r->transform == VC_TR_NONE || (r->transform == VC_TR_CONV1D && !r->slot2))) ||
                 (r->transform == VC_TR_HEAD_SPLIT && (r->slot == slot || r->slot2 == slot))) &&
                rule_module(r, layer, buf, cap))
                return 1;
    return 0;
}

vc_slot_mask vc_arch_module_slots(const vc_arch *a, const char *short_name) {
    vc_slot_mask mask = 0;
    for (const vc_tensor_rule *const *t = a->tables; *t; t++)
        for (const vc_tensor_rule *r = *t; r->name; r++) {
            char mod[256];
            if (r->transform == VC_TR_IGNORE || r->transform == VC_TR_EXPERT || !rule_module(r, 0, mod, sizeof mod)) continue;
            const char *last = strrchr(mod, '.');
            if (strcmp(last ? last + 1 : mod, short_name)) continue;
            int ids[VC_RULE_PARTS], n = vc_rule_slots(r, ids);
            for (int i = 0; i < n; i++) mask |= VC_SLOT_BIT(ids[i]);
        }
    return mask;
}

const vc_arch *vc_arch_find(const char *model_type) {
    size_t n = strlen(model_type);
    if (!n || strchr(model_type, ' ')) return NULL; /* (an empty name matched everywhere without advancing) */
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++) {
        const char *p = ARCHS[i].model_types;
        while ((p = strstr(p, model_type))) {
            int start = p == ARCHS[i].model_types || p[-1] == ' ';
            if (start && (p[n] == 0 || p[n] == ' ')) return &ARCHS[i];
            p += n;
        }
    }
    return NULL;
}

void vc_arch_param_path(const vc_arch *a, int slot, char *buf, size_t cap) {
    const char *moe = a && a->moe_module ? a->moe_module : "mlp", *router = a && a->router_module ? a->router_module : "gate";
    const char *dot = *moe ? "." : ""; /* "": directly under the layer (Gemma 4) */
    if (slot == VC_W_EXP_GATE || slot == VC_W_EXP_DOWN)
        snprintf(buf, cap, "%s%sexperts.%s", moe, dot, slot == VC_W_EXP_GATE ? "gate_up_proj" : "down_proj");
    else if (slot == VC_W_ROUTER) snprintf(buf, cap, "%s%s%s.weight", moe, dot, router);
    else if (cap) buf[0] = 0;
}

int vc_arch_mtp_tensor(const vc_model_config *c, const char *name) {
    if (c->n_mtp) return 0; /* trained: the model's own parameters */
    if (!strncmp(name, "model.layers.", 13) && atoi(name + 13) >= c->n_layer) return 1;
    for (const char *p = c->arch->ignore_prefixes; p && *p;) {
        size_t k = strcspn(p, " ");
        char pre[64];
        snprintf(pre, sizeof pre, "%.*s", (int)k, p);
        if (k && !strncmp(name, p, k) && strstr(pre, "mtp")) return 1;
        p += k;
        while (*p == ' ') p++;
    }
    return 0;
}

const char *vc_arch_row_name(const vc_model_config *c, int row, int slot, const char *name, char *buf, size_t cap) {
    char at[32];
    snprintf(at, sizeof at, "layers.%d.", row);
    const char *p = row > c->n_layer && c->arch->mtp_prefix ? strstr(name, at) : NULL;
    if (!p) return name;
    const char *start = p - name >= 6 && !strncmp(p - 6, "model.", 6) ? p - 6 : p; /* the prefix names model. itself */
    const char *own = vc_slot_is_mtp(slot) ? c->arch->mtp_own_prefix : NULL;
    char pre[96];
    snprintf(pre, sizeof pre, own ? own : c->arch->mtp_prefix,
             row - (int)c->n_layer - 1 + (c->arch->mtp_after_layers ? (int)c->n_layer : 0));
    snprintf(buf, cap, "%.*s%s%s", (int)(start - name), name, pre, p + strlen(at));
    for (const char *r = c->arch->mtp_renames; r && *r;) { /* "from=to from=to" */
        size_t k = strcspn(r, " "), e = strcspn(r, "=");
        char from[96], tmp[512], *q = NULL;
        snprintf(from, sizeof from, "%.*s", (int)(e < k ? e : 0), r);
        if (*from && (q = strstr(buf, from))) {
            snprintf(tmp, sizeof tmp, "%.*s%.*s%s", (int)(q - buf), buf, (int)(k - e - 1), r + e + 1, q + e);
            snprintf(buf, cap, "%s", tmp);
        }
        r += k;
        while (*r == ' ') r++;
    }
    return buf;
}

int vc_arch_other_tower(const vc_arch *a, const char *name) {
    for (const char *p = a->ignore_prefixes; p && *p;) {
        size_t k = strcspn(p, " ");
        if (k && !strncmp(name, p, k)) return 1;
        p += k;
        while (*p == ' ') p++;
    }
    return 0;
}

static const char *const SLOT_NAMES[VC_W_COUNT] = {
    [VC_W_TOK_EMBD] = "tok_embd", [VC_W_OUT_NORM] = "out_norm", [VC_W_OUT_NORM_B] = "out_norm.bias",
    [VC_W_LM_HEAD] = "lm_head", [VC_W_LM_HEAD_B] = "lm_head.bias", [VC_W_ATTN_NORM] = "attn_norm",
    [VC_W_ATTN_NORM_B] = "attn_norm.bias", [VC_W_Q] = "q", [VC_W_Q_B] = "q.bias", [VC_W_K] = "k",
    [VC_W_K_B] = "k.bias", [VC_W_V] = "v", [VC_W_V_B] = "v.bias", [VC_W_O] = "o", [VC_W_O_B] = "o.bias",
    [VC_W_Q_NORM] = "q_norm", [VC_W_K_NORM] = "k_norm", [VC_W_Q_NORM_B] = "q_norm.bias",
    [VC_W_K_NORM_B] = "k_norm.bias", [VC_W_Q_A] = "q_a", [VC_W_Q_A_NORM] = "q_a_norm",
    [VC_W_Q_BPROJ] = "q_b", [VC_W_KV_A] = "kv_a", [VC_W_KV_A_NORM] = "kv_a_norm", [VC_W_KV_B] = "kv_b",
    [VC_W_POST_ATTN_NORM] = "post_attn_norm", [VC_W_FFN_NORM] = "ffn_norm", [VC_W_FFN_NORM_B] = "ffn_norm.bias",
    [VC_W_POST_FFN_NORM] = "post_ffn_norm", [VC_W_GATE] = "gate", [VC_W_GATE_B] = "gate.bias", [VC_W_UP] = "up",
    [VC_W_UP_B] = "up.bias", [VC_W_DOWN] = "down", [VC_W_DOWN_B] = "down.bias", [VC_W_ROUTER] = "router",
    [VC_W_ROUTER_BIAS] = "router.score_bias", [VC_W_EXP_GATE] = "experts.gate", [VC_W_EXP_UP] = "experts.up",
    [VC_W_EXP_DOWN] = "experts.down", [VC_W_SH_GATE] = "shared.gate", [VC_W_SH_UP] = "shared.up",
    [VC_W_SH_DOWN] = "shared.down", [VC_W_SH_GATE_PROJ] = "shared.gate_proj", [VC_W_SCORE] = "score",
    [VC_W_SCORE_B] = "score.bias", [VC_W_SINKS] = "sinks", [VC_W_ROUTER_B] = "router.bias",
    [VC_W_EXP_GATE_B] = "experts.gate.bias", [VC_W_EXP_UP_B] = "experts.up.bias",
    [VC_W_EXP_DOWN_B] = "experts.down.bias", [VC_W_ATTN_GATE] = "attn_gate", [VC_W_XIELU_AP] = "xielu.alpha_p",
    [VC_W_XIELU_AN] = "xielu.alpha_n", [VC_W_LIN_QKV] = "linear.qkv", [VC_W_LIN_Z] = "linear.z",
    [VC_W_LIN_B] = "linear.b", [VC_W_LIN_A] = "linear.a", [VC_W_LIN_CONV] = "linear.conv", [VC_W_LIN_DT] = "linear.dt_bias",
    [VC_W_LIN_ALOG] = "linear.A_log", [VC_W_LIN_NORM] = "linear.norm", [VC_W_LIN_OUT] = "linear.out", [VC_W_LIN_D] = "linear.D",
    [VC_W_LIN_CONV_B] = "linear.conv.bias", [VC_W_LIN_K] = "linear.k", [VC_W_LIN_V] = "linear.v",
    [VC_W_LIN_CONV_K] = "linear.conv_k", [VC_W_LIN_CONV_V] = "linear.conv_v", [VC_W_LIN_FA] = "linear.f_a",
    [VC_W_LIN_FB] = "linear.f_b", [VC_W_LIN_GA] = "linear.g_a", [VC_W_LIN_GB] = "linear.g_b",
    [VC_W_LIN_XPROJ] = "linear.x_proj", [VC_W_LIN_DTPROJ] = "linear.dt_proj", [VC_W_LIN_DT_NORM] = "linear.dt_norm",
    [VC_W_LIN_B_NORM] = "linear.b_norm", [VC_W_LIN_C_NORM] = "linear.c_norm", [VC_W_LAT_IN] = "experts.latent_in", [VC_W_LAT_OUT] = "experts.latent_out",
    [VC_W_LAYER_SCALAR] = "layer_scalar", [VC_W_PRE_FFN_NORM2] = "pre_ffn_norm_2", [VC_W_POST_FFN_NORM1] = "post_ffn_norm_1",
    [VC_W_POST_FFN_NORM2] = "post_ffn_norm_2", [VC_W_ROUTER_SCALE] = "router.scale", [VC_W_EXP_SCALE] = "experts.scale",
    [VC_W_PLE_GATE] = "ple.gate", [VC_W_PLE_PROJ] = "ple.proj", [VC_W_PLE_NORM] = "ple.norm", [VC_W_PLE_EMBD] = "ple_embd",
    [VC_W_PLE_MODEL_PROJ] = "ple_model_proj", [VC_W_PLE_PROJ_NORM] = "ple_proj_norm", [VC_W_POS_EMBD] = "pos_embd", [VC_W_EMB_NORM] = "emb_norm", [VC_W_EMB_NORM_B] = "emb_norm.bias",
    [VC_W_IDX_WQ] = "indexer.wq_b", [VC_W_IDX_WK] = "indexer.wk", [VC_W_IDX_KNORM] = "indexer.k_norm",
    [VC_W_IDX_KNORM_B] = "indexer.k_norm.bias", [VC_W_IDX_WPROJ] = "indexer.weights_proj", [VC_W_PROJ_IN] = "project_in",
    [VC_W_PROJ_OUT] = "project_out", [VC_W_MTP_ENORM] = "mtp.enorm", [VC_W_MTP_HNORM] = "mtp.hnorm",
    [VC_W_MTP_PROJ] = "mtp.proj", [VC_W_MTP_NORM] = "mtp.final_norm",
};

const char *vc_slot_name(int slot) { return slot > 0 && slot < VC_W_COUNT ? SLOT_NAMES[slot] : "?"; }

int vc_slot_is_bias(int slot) {
    return slot == VC_W_OUT_NORM_B || slot == VC_W_LM_HEAD_B || slot == VC_W_ATTN_NORM_B || slot == VC_W_Q_B ||
           slot == VC_W_K_B || slot == VC_W_V_B || slot == VC_W_O_B || slot == VC_W_FFN_NORM_B ||
           slot == VC_W_GATE_B || slot == VC_W_UP_B || slot == VC_W_DOWN_B || slot == VC_W_ROUTER_BIAS ||
           slot == VC_W_Q_NORM_B || slot == VC_W_K_NORM_B || slot == VC_W_ROUTER_B || slot == VC_W_EXP_GATE_B ||
           slot == VC_W_EXP_UP_B || slot == VC_W_EXP_DOWN_B || slot == VC_W_LIN_CONV_B || slot == VC_W_EMB_NORM_B ||
           slot == VC_W_IDX_KNORM_B;
}

int vc_slot_is_global(int slot) {
    return (slot >= VC_W_TOK_EMBD && slot <= VC_W_LM_HEAD_B) || slot == VC_W_SCORE || slot == VC_W_SCORE_B ||
           (slot >= VC_W_PLE_EMBD && slot <= VC_W_EMB_NORM_B) || slot == VC_W_PROJ_IN || slot == VC_W_PROJ_OUT;
}

static int set(int64_t *s, int64_t a, int64_t b, int64_t c) {
    s[0] = a;
    s[1] = b;
    s[2] = c;
    return c ? 3 : b ? 2 : 1;
}

/* what decides the shapes of a layer's slots (layer -1: the model's own), worked out once per vc_slot_shape call */
typedef struct {
    const vc_model_config *c;
    int layer;
    int64_t H, hd, nh, nq, nkv, nv, no, inter, P;
    int kv_shared; /* Gemma 4: attends with an earlier layer's keys and values */
    int v_from_k;  /* ... or its values are its keys' projection */
    int dense_moe; /* an MoE block beside the dense MLP */
    int idx;       /* DeepSeek Sparse Attention: the layer's own indexer */
    int ln, moe;
    int64_t qk, XH; /* MLA's q/k head width; the experts' width */
    int lin;       /* a Gated DeltaNet layer: its own slots instead of attention's */
    int64_t kd, vd;
    int sc;        /* LFM2: in_proj [3 H, H] (B, C, x), the conv over H, out_proj */
    int blk;
    int lpn;       /* OLMo-hybrid's linear layers: pre-norms where attention layers have post-norms */
} slot_ctx;

static slot_ctx slot_ctx_of(const vc_model_config *c, int layer) {
    slot_ctx x = { .c = c, .layer = layer, .H = c->hidden };
    x.hd = vc_cfg_head_dim(c, layer);
    x.nh = vc_cfg_heads(c, layer);
    x.nq = x.nh * x.hd;
    x.nkv = vc_cfg_kv_heads(c, layer) * x.hd;
    x.nv = vc_cfg_kv_heads(c, layer) * vc_cfg_v_head_dim(c, layer);
    x.no = x.nh * vc_cfg_v_head_dim(c, layer);
    x.inter = vc_cfg_inter(c, layer);
    x.P = c->ple_dim;
    x.kv_shared = layer >= 0 && c->kv_src[layer];
    x.v_from_k = layer >= 0 && c->k_eq_v && !c->window[layer];
    x.dense_moe = layer >= 0 && c->is_moe[layer] && c->moe_dense;
    x.idx = layer >= 0 && c->dsa_topk && !c->dsa_shared[layer];
    x.ln = c->norm_kind == VC_NORM_LAYER && !c->norm_no_bias;
    x.moe = layer >= 0 && c->is_moe[layer];
    x.qk = c->qk_nope_dim + c->qk_rope_dim;
    x.XH = c->moe_latent ? c->moe_latent : x.H;
    x.lin = layer >= 0 && c->linear[layer];
    x.kd = c->lin_nk * c->lin_dk;
    x.vd = c->lin_nv * c->lin_dv;
    x.sc = c->lin_kind == VC_LIN_SHORTCONV;
    x.blk = layer >= 0 ? c->block[layer] : VC_BLOCK_FULL;
    x.lpn = x.lin && c->lin_pre_norm;
    return x;
}

/* slots the layer's make-up rules out, whatever the sizes */
static int slot_absent(const slot_ctx *x, int slot) {
    int mixer = (slot >= VC_W_Q && slot <= VC_W_KV_B) || slot == VC_W_SINKS || slot == VC_W_ATTN_GATE ||
                (slot >= VC_W_LIN_QKV && slot <= VC_W_LIN_C_NORM) || slot == VC_W_POST_ATTN_NORM;
    int mlp = (slot >= VC_W_FFN_NORM && slot <= VC_W_SH_GATE_PROJ) ||
              (slot >= VC_W_ROUTER_B && slot <= VC_W_EXP_DOWN_B) || slot == VC_W_XIELU_AP || slot == VC_W_XIELU_AN ||
              slot == VC_W_LAT_IN || slot == VC_W_LAT_OUT;
    int ffn_norm = slot == VC_W_FFN_NORM || slot == VC_W_FFN_NORM_B || slot == VC_W_POST_FFN_NORM;
    if ((x->blk == VC_BLOCK_MLP && (mixer || ffn_norm)) || (x->blk == VC_BLOCK_MIXER && mlp))
        return 1; /* Nemotron-H's blocks: one mixer or one MLP behind attn_norm's slot */
    int lin_slot = slot >= VC_W_LIN_QKV && slot <= VC_W_LIN_C_NORM;
    if (x->lin != lin_slot && (lin_slot || (!x->c->parallel_ssm && ((slot >= VC_W_Q && slot <= VC_W_KV_B) ||
                                                                     slot == VC_W_SINKS || slot == VC_W_ATTN_GATE))))
        return 1; /* a linear layer has its slots instead of attention's (Falcon-H1's: beside them) */
    return 0;
}

/* a shape helper's answer when the slot is not its concern: the next helper decides */
#define SLOT_NEXT (-1)

/* Mamba 2: in_proj [z, xBC, dt], the conv over xBC, the scan's A, D, dt_bias */
static int mamba2_slot(const slot_ctx *x, int slot, int64_t *s) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, I = x->vd, cd = I + 2 * x->kd;
    switch (slot) {
    case VC_W_LIN_QKV: return set(s, I + cd + c->lin_nv, H, 0);
    case VC_W_LIN_CONV: return set(s, cd, 1, c->lin_conv);
    case VC_W_LIN_CONV_B: return c->lin_conv_bias ? set(s, cd, 0, 0) : 0;
    case VC_W_LIN_DT: case VC_W_LIN_ALOG: case VC_W_LIN_D: return set(s, c->lin_nv, 0, 0);
    case VC_W_LIN_NORM: return c->lin_norm == 2 ? 0 : set(s, I, 0, 0);
    case VC_W_LIN_OUT: return set(s, H, I, 0);
    default: if (slot >= VC_W_LIN_QKV && slot <= VC_W_LIN_C_NORM) return 0;
    }
    return SLOT_NEXT;
}

/* Mamba 1: in_proj [x; z], the conv over x, x_proj, dt_proj, A_log [I, N], D */
static int mamba1_slot(const slot_ctx *x, int slot, int64_t *s) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, I = c->lin_nv, N = c->lin_dk, R = c->lin_rank, nrm = c->lin_bcdt_norm == 1;
    switch (slot) {
    case VC_W_LIN_QKV: return set(s, 2 * I, H, 0);
    case VC_W_LIN_CONV: return set(s, I, 1, c->lin_conv);
    case VC_W_LIN_CONV_B: return c->lin_conv_bias ? set(s, I, 0, 0) : 0;
    case VC_W_LIN_XPROJ: return set(s, R + 2 * N, I, 0);
    case VC_W_LIN_DTPROJ: return set(s, I, R, 0);
    case VC_W_LIN_DT: case VC_W_LIN_D: return set(s, I, 0, 0);
    case VC_W_LIN_ALOG: return set(s, I, N, 0);
    case VC_W_LIN_OUT: return set(s, H, I, 0);
    case VC_W_LIN_DT_NORM: return nrm ? set(s, R, 0, 0) : 0;
    case VC_W_LIN_B_NORM: case VC_W_LIN_C_NORM: return nrm ? set(s, N, 0, 0) : 0;
    default: if (slot >= VC_W_LIN_QKV && slot <= VC_W_LIN_C_NORM) return 0;
    }
    return SLOT_NEXT;
}

/* lightning attention: qkv_proj per head [q, k, v], output_gate, a norm over all heads */
static int lightning_slot(const slot_ctx *x, int slot, int64_t *s) {
    int64_t H = x->H, vd = x->vd;
    switch (slot) {
    case VC_W_LIN_QKV: return set(s, 3 * vd, H, 0);
    case VC_W_LIN_Z: return set(s, vd, H, 0);
    case VC_W_LIN_NORM: return set(s, vd, 0, 0);
    case VC_W_LIN_OUT: return set(s, H, vd, 0);
    default: if (slot >= VC_W_LIN_QKV && slot <= VC_W_LIN_C_NORM) return 0;
    }
    return SLOT_NEXT;
}

/* Kimi Delta Attention: per-channel decay and output gate, low-rank; its other slots are Gated DeltaNet's */
static int kda_slot(const slot_ctx *x, int slot, int64_t *s) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, vd = x->vd;
    switch (slot) {
    case VC_W_LIN_Z: case VC_W_LIN_A: return 0;
    case VC_W_LIN_FA: case VC_W_LIN_GA: return set(s, c->lin_dk, H, 0);
    case VC_W_LIN_FB: return set(s, c->lin_nv * c->lin_dk, c->lin_dk, 0);
    case VC_W_LIN_GB: return set(s, vd, c->lin_dk, 0);
    case VC_W_LIN_DT: return set(s, c->lin_nv * c->lin_dk, 0, 0);
    case VC_W_LIN_ALOG: set(s, 1, 1, c->lin_nv), s[3] = 1; return 4; /* [1, 1, nv, 1], as the hub's */
    }
    return SLOT_NEXT;
}

/* a linear layer's kind with slots of its own; Gated DeltaNet's and the short conv's are linear_slot's */
static int lin_kind_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    if (!x->lin) return SLOT_NEXT;
    switch (x->c->lin_kind) {
    case VC_LIN_MAMBA2: return mamba2_slot(x, slot, s);
    case VC_LIN_MAMBA1: return mamba1_slot(x, slot, s);
    case VC_LIN_LIGHTNING: return lightning_slot(x, slot, s);
    case VC_LIN_KDA: return kda_slot(x, slot, s);
    }
    return SLOT_NEXT;
}

/* Gated DeltaNet (OLMo-hybrid's with q, k and v apart) and LFM2's short conv */
static int linear_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, kd = x->kd, vd = x->vd;
    int sc = x->sc;
    switch (slot) {
    case VC_W_LIN_QKV: return set(s, sc ? 3 * H : c->lin_sep_qkv ? kd : 2 * kd + vd, H, 0);
    case VC_W_LIN_K: return c->lin_sep_qkv ? set(s, kd, H, 0) : 0;
    case VC_W_LIN_V: return c->lin_sep_qkv ? set(s, vd, H, 0) : 0;
    case VC_W_LIN_Z: return sc ? 0 : set(s, vd, H, 0);
    case VC_W_LIN_B: case VC_W_LIN_A: return sc ? 0 : set(s, c->lin_nv, H, 0);
    case VC_W_LIN_CONV: return set(s, sc ? H : c->lin_sep_qkv ? kd : 2 * kd + vd, 1, c->lin_conv);
    case VC_W_LIN_CONV_K: return c->lin_sep_qkv ? set(s, kd, 1, c->lin_conv) : 0;
    case VC_W_LIN_CONV_V: return c->lin_sep_qkv ? set(s, vd, 1, c->lin_conv) : 0;
    case VC_W_LIN_DT: case VC_W_LIN_ALOG: return sc ? 0 : set(s, c->lin_nv, 0, 0);
    case VC_W_LIN_NORM: return sc ? 0 : set(s, c->lin_dv, 0, 0);
    case VC_W_LIN_OUT: return set(s, H, sc ? H : vd, 0);
    case VC_W_LIN_D: case VC_W_LIN_CONV_B: case VC_W_LIN_FA: case VC_W_LIN_FB: case VC_W_LIN_GA: case VC_W_LIN_GB:
    case VC_W_LIN_XPROJ: case VC_W_LIN_DTPROJ: case VC_W_LIN_DT_NORM: case VC_W_LIN_B_NORM: case VC_W_LIN_C_NORM:
        return 0;
    }
    return SLOT_NEXT;
}

/* the model's slots outside its layers: embeddings, the final norm, the heads */
static int global_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H;
    int ln = x->ln, layer = x->layer;
    switch (slot) {
    case VC_W_TOK_EMBD: return set(s, c->vocab, c->emb_dim ? c->emb_dim : H, 0);
    case VC_W_OUT_NORM: return c->norm_no_weight || c->no_final_norm ? 0 : set(s, H, 0, 0);
    case VC_W_OUT_NORM_B: return ln && !c->no_final_norm ? set(s, H, 0, 0) : 0;
    case VC_W_LM_HEAD: return c->tied || c->n_labels ? 0 : set(s, vc_cfg_out_vocab(c), vc_cfg_out_hidden(c), 0);
    case VC_W_LM_HEAD_B: /* (tying shares the head's weight, not its bias: Phi with tied embeddings keeps lm_head.bias) */
        *optional = !c->head_bias;
        return c->n_labels ? 0 : set(s, vc_cfg_out_vocab(c), 0, 0);
    case VC_W_SCORE: return c->n_labels ? set(s, c->n_labels, vc_cfg_out_hidden(c), 0) : 0;
    case VC_W_PROJ_IN: return c->emb_dim ? set(s, H, c->emb_dim, 0) : 0;
    case VC_W_PROJ_OUT: return c->emb_dim ? set(s, c->emb_dim, H, 0) : 0;
    case VC_W_SCORE_B: *optional = 1; return c->n_labels ? set(s, c->n_labels, 0, 0) : 0;
    case VC_W_POS_EMBD: return c->learned_pos && layer < 0 ? set(s, c->max_pos + c->pos_offset, H, 0) : 0;
    case VC_W_EMB_NORM: case VC_W_EMB_NORM_B: /* (nanochat's embedding norm has no weight) */
        return c->emb_norm && !c->norm_no_weight && layer < 0 && (slot == VC_W_EMB_NORM || ln) ? set(s, H, 0, 0) : 0;
    }
    return SLOT_NEXT;
}

/* a layer's norms around its sublayers, and its output scalar */
static int norm_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H;
    int ln = x->ln, lpn = x->lpn, moe = x->moe;
    switch (slot) {
    case VC_W_ATTN_NORM: return (c->no_pre_norm && !lpn) || c->norm_no_weight ? 0 : set(s, H, 0, 0);
    case VC_W_ATTN_NORM_B: return ln ? set(s, H, 0, 0) : 0;
    case VC_W_POST_ATTN_NORM: case VC_W_POST_FFN_NORM:
        return (c->sandwich_norm && !lpn) || (slot == VC_W_POST_FFN_NORM && c->moe_post_norm && moe) ? set(s, H, 0, 0)
                                                                                                      : 0;
    case VC_W_FFN_NORM:
        return (c->parallel_block && !c->parallel_norms) || (c->no_pre_norm && !lpn) || c->norm_no_weight ? 0
                                                                                                  : set(s, H, 0, 0);
    case VC_W_FFN_NORM_B: return ln && (!c->parallel_block || c->parallel_norms) ? set(s, H, 0, 0) : 0;
    case VC_W_LAYER_SCALAR: return c->layer_scalar && x->layer >= 0 ? set(s, 1, 0, 0) : 0;
    }
    return SLOT_NEXT;
}

/* attention's projections, biases and q/k norms (MLA's are mla_slot's), sinks and output gate */
static int attention_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, hd = x->hd, nh = x->nh, nq = x->nq, nkv = x->nkv, nv = x->nv, no = x->no;
    int kv_shared = x->kv_shared, v_from_k = x->v_from_k, layer = x->layer;
    switch (slot) {
    case VC_W_Q: return c->mla ? (c->q_lora_rank ? 0 : set(s, c->n_head * x->qk, H, 0)) : set(s, nq, H, 0);
    case VC_W_K: return c->mla || kv_shared ? 0 : set(s, nkv, H, 0);
    case VC_W_V: return c->mla || kv_shared || v_from_k ? 0 : set(s, nv, H, 0);
    case VC_W_Q_B: *optional = !c->qkv_bias; return c->mla ? 0 : set(s, nq, 0, 0);
    case VC_W_K_B: case VC_W_V_B:
        *optional = !c->qkv_bias;
        return c->mla || kv_shared || (slot == VC_W_V_B && v_from_k) ? 0 : set(s, slot == VC_W_V_B ? nv : nkv, 0, 0);
    case VC_W_O: return set(s, H, c->mla ? c->n_head * c->v_head_dim : no, 0);
    case VC_W_O_B: *optional = !c->o_bias; return set(s, H, 0, 0);
    case VC_W_Q_NORM:
        if (c->qk_norm_heads) return set(s, nh, hd, 0);
        return c->qk_norm && !c->norm_no_weight ? set(s, c->qk_norm_full ? nq : hd, 0, 0) : 0;
    case VC_W_K_NORM:
        if (c->qk_norm_heads) return set(s, c->n_kv_head, hd, 0);
        return c->qk_norm && !c->norm_no_weight && !kv_shared ? set(s, c->qk_norm_full ? nkv : hd, 0, 0) : 0;
    case VC_W_Q_NORM_B: case VC_W_K_NORM_B: return c->qk_norm && x->ln && !c->qk_norm_heads ? set(s, hd, 0, 0) : 0;
    case VC_W_SINKS:
        return c->attn_sinks && (c->attn_sinks == 1 || (layer >= 0 && c->window[layer])) ? set(s, nh, 0, 0) : 0;
    case VC_W_ATTN_GATE: return c->attn_out_gate ? set(s, c->attn_out_gate == 2 ? nh : nq, H, 0) : 0;
    }
    return SLOT_NEXT;
}

/* multi-head latent attention's low-rank projections, and DeepSeek Sparse Attention's indexer */
static int mla_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, qk = x->qk;
    int idx = x->idx;
    switch (slot) {
    case VC_W_Q_A: return c->mla && c->q_lora_rank ? set(s, c->q_lora_rank, H, 0) : 0;
    case VC_W_Q_A_NORM: return c->mla && c->q_lora_rank ? set(s, c->q_lora_rank, 0, 0) : 0;
    case VC_W_Q_BPROJ: return c->mla && c->q_lora_rank ? set(s, c->n_head * qk, c->q_lora_rank, 0) : 0;
    case VC_W_KV_A: return c->mla ? set(s, c->kv_lora_rank + c->qk_rope_dim, H, 0) : 0;
    case VC_W_KV_A_NORM: return c->mla ? set(s, c->kv_lora_rank, 0, 0) : 0;
    case VC_W_KV_B: return c->mla ? set(s, c->n_head * (c->qk_nope_dim + c->v_head_dim), c->kv_lora_rank, 0) : 0;
    case VC_W_IDX_WQ: return idx ? set(s, c->dsa_heads * c->dsa_dim, c->q_lora_rank, 0) : 0;
    case VC_W_IDX_WK: return idx ? set(s, c->dsa_dim, H, 0) : 0;
    case VC_W_IDX_KNORM: case VC_W_IDX_KNORM_B: return idx ? set(s, c->dsa_dim, 0, 0) : 0;
    case VC_W_IDX_WPROJ: return idx ? set(s, c->dsa_heads, H, 0) : 0;
    }
    return SLOT_NEXT;
}

/* the dense MLP (an MoE layer's only where it keeps one beside the experts) */
static int mlp_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, inter = x->inter;
    int moe = x->moe, dense_moe = x->dense_moe;
    switch (slot) {
    case VC_W_GATE: return (moe && !dense_moe) || c->mlp_kind == VC_MLP_PLAIN ? 0 : set(s, inter, H, 0);
    case VC_W_UP: return moe && !dense_moe ? 0 : set(s, inter, H, 0);
    case VC_W_DOWN: return moe && !dense_moe ? 0 : set(s, H, inter, 0);
    case VC_W_GATE_B:
        *optional = !c->mlp_bias;
        return (moe && !dense_moe) || c->mlp_kind == VC_MLP_PLAIN ? 0 : set(s, inter, 0, 0);
    case VC_W_UP_B: *optional = !c->mlp_bias; return moe && !dense_moe ? 0 : set(s, inter, 0, 0);
    case VC_W_DOWN_B: *optional = !c->mlp_bias; return moe && !dense_moe ? 0 : set(s, H, 0, 0);
    case VC_W_XIELU_AP: case VC_W_XIELU_AN: return c->xielu && x->layer >= 0 ? set(s, 1, 0, 0) : 0;
    }
    return SLOT_NEXT;
}

/* the router, the routed and shared experts, and the norms and scales of an MoE block beside a dense MLP */
static int moe_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, XH = x->XH;
    int moe = x->moe;
    switch (slot) {
    case VC_W_ROUTER: return moe ? set(s, c->n_expert, H, 0) : 0;
    case VC_W_ROUTER_BIAS: /* DeepSeek-V3's sigmoid router has one, Llama 4's none */
        return moe && c->router_bias ? set(s, c->n_expert, 0, 0) : 0;
    case VC_W_EXP_GATE: return moe && c->mlp_kind != VC_MLP_PLAIN ? set(s, c->n_expert, c->moe_inter, XH) : 0;
    case VC_W_EXP_UP: return moe ? set(s, c->n_expert, c->moe_inter, XH) : 0;
    case VC_W_EXP_DOWN: return moe ? set(s, c->n_expert, XH, c->moe_inter) : 0;
    case VC_W_LAT_IN: return moe && c->moe_latent ? set(s, c->moe_latent, H, 0) : 0;
    case VC_W_LAT_OUT: return moe && c->moe_latent ? set(s, H, c->moe_latent, 0) : 0;
    case VC_W_SH_GATE: return moe && c->shared_inter && c->mlp_kind != VC_MLP_PLAIN ? set(s, c->shared_inter, H, 0) : 0;
    case VC_W_SH_UP: return moe && c->shared_inter ? set(s, c->shared_inter, H, 0) : 0;
    case VC_W_SH_DOWN: return moe && c->shared_inter ? set(s, H, c->shared_inter, 0) : 0;
    case VC_W_SH_GATE_PROJ: return moe && c->shared_gate ? set(s, 1, H, 0) : 0;
    case VC_W_ROUTER_B: return moe && c->expert_bias ? set(s, c->n_expert, 0, 0) : 0;
    case VC_W_EXP_GATE_B: case VC_W_EXP_UP_B: return moe && c->expert_bias ? set(s, c->n_expert, c->moe_inter, 0) : 0;
    case VC_W_EXP_DOWN_B: return moe && c->expert_bias ? set(s, c->n_expert, H, 0) : 0;
    case VC_W_PRE_FFN_NORM2: case VC_W_POST_FFN_NORM1: case VC_W_POST_FFN_NORM2: case VC_W_ROUTER_SCALE:
        return x->dense_moe ? set(s, H, 0, 0) : 0;
    case VC_W_EXP_SCALE: return x->dense_moe ? set(s, c->n_expert, 0, 0) : 0;
    }
    return SLOT_NEXT;
}

/* per-layer embeddings (Gemma 4): each layer's gate, projection and norm, and the model's table */
static int ple_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    const vc_model_config *c = x->c;
    int64_t H = x->H, P = x->P;
    int layer = x->layer;
    switch (slot) {
    case VC_W_PLE_GATE: return P && layer >= 0 ? set(s, P, H, 0) : 0;
    case VC_W_PLE_PROJ: return P && layer >= 0 ? set(s, H, P, 0) : 0;
    case VC_W_PLE_NORM: return P && layer >= 0 ? set(s, H, 0, 0) : 0;
    case VC_W_PLE_EMBD: return P && layer < 0 ? set(s, c->ple_vocab, c->n_layer * P, 0) : 0;
    case VC_W_PLE_MODEL_PROJ: return P && layer < 0 ? set(s, c->n_layer * P, H, 0) : 0;
    case VC_W_PLE_PROJ_NORM: return P && layer < 0 ? set(s, P, 0, 0) : 0;
    }
    return SLOT_NEXT;
}

/* a trained multi-token-prediction row's own slots (rows past the globals' row n_layer) */
static int mtp_slot(const slot_ctx *x, int slot, int64_t *s, int *optional) {
    int mtp = x->layer > x->c->n_layer;
    switch (slot) {
    case VC_W_MTP_ENORM: case VC_W_MTP_HNORM: case VC_W_MTP_NORM: return mtp ? set(s, x->H, 0, 0) : 0;
    case VC_W_MTP_PROJ: return mtp ? set(s, x->H, 2 * x->H, 0) : 0;
    }
    return SLOT_NEXT;
}

typedef int slot_fn(const slot_ctx *x, int slot, int64_t *s, int *optional);

int vc_slot_shape(const vc_model_config *c, int layer, int slot, int64_t *s, int *optional) {
    /* a linear layer's own kind first: Mamba's and lightning attention's slots are theirs alone, Kimi Delta
     * Attention's partly Gated DeltaNet's; the others each own a disjoint set of slots */
    static slot_fn *const BY_CONCERN[] = { lin_kind_slot, linear_slot, global_slot, norm_slot, attention_slot,
                                           mla_slot, mlp_slot, moe_slot, ple_slot, mtp_slot };
    slot_ctx x = slot_ctx_of(c, layer);
    *optional = 0;
    if (slot_absent(&x, slot)) return 0;
    for (size_t i = 0; i < sizeof BY_CONCERN / sizeof *BY_CONCERN; i++) {
        int r = BY_CONCERN[i](&x, slot, s, optional);
        if (r != SLOT_NEXT) return r;
    }
    return 0;
}
