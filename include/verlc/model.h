/* Models: Hugging Face causal LMs described as data, one decoder for all of them. */
#ifndef VERLC_MODEL_H
#define VERLC_MODEL_H
#include "verlc/core.h"
#include "verlc/dtype.h"
#include "verlc/rope.h"
#include "verlc/tensor.h"

#define VC_MAX_LAYERS 1024
#define VC_MTP_MAX 8 /* trained multi-token-prediction layers at most */
#define VC_MAX_EOS 8

enum vc_norm_kind { VC_NORM_RMS, VC_NORM_LAYER };
enum vc_mlp_kind { VC_MLP_GATED, VC_MLP_PLAIN };

/* Mamba 2 (Granite 4): lin_nk groups of B and C, lin_dk their state size, lin_nv heads of lin_dv channels */
enum vc_lin_kind { VC_LIN_GDN, VC_LIN_SHORTCONV, VC_LIN_MAMBA2, VC_LIN_KDA /* Kimi Delta Attention */,
                   VC_LIN_LIGHTNING /* MiniMax-Text-01's lightning attention */, VC_LIN_MAMBA1 /* Jamba */ };
/* what a layer holds: attention (or a linear layer) and an MLP, or (Nemotron-H's blocks) only one of them, each
 * behind its own norm (attn_norm's slot) */
enum vc_block_kind { VC_BLOCK_FULL, VC_BLOCK_MIXER, VC_BLOCK_MLP };

typedef struct vc_model_config {
    char model_type[64];
    const struct vc_arch *arch;   /* descriptor (src/model/arch.c) */
    vc_dtype dtype;               /* checkpoint dtype */
    int64_t vocab, hidden, n_layer, n_head, n_kv_head, head_dim, inter;
    int n_mtp;                    /* trained multi-token-prediction layers (vc_model_load_mtp): rows n_layer + 1 .. of
                                   * the model's slots, after the globals' row; 0: none (the checkpoint's are ignored) */
    int64_t max_pos;
    float norm_eps;
    int norm_kind;                /* vc_norm_kind */
    float norm_offset;            /* 1 for Gemma's (1 + w) RMSNorm */
    int act;                      /* enum vc_act */
    int mlp_kind;                 /* vc_mlp_kind */
    int tied;                     /* lm_head shares the embedding */
    int64_t n_labels;             /* > 0: a *ForSequenceClassification / *ForTokenClassification checkpoint
                                   * (reward models, critics): a score head [n_labels, hidden], no LM head */
    int qk_norm;                  /* per-head RMSNorm on q and k (Qwen3) */
    int qk_norm_full;             /* ... over all heads of q and of k at once (OLMo 2) */
    int qk_norm_after_rope;       /* ... applied after the rotary embedding (Hunyuan) */
    int qk_norm_heads;            /* ... a LayerNorm with a weight of its own per head, [heads, head_dim] (Command R+) */
    int no_pre_norm;              /* no norm before attention and MLP, only after them (OLMo 2) */
    int norm_no_bias;             /* LayerNorms without a bias (Cohere) */
    int norm_no_weight;           /* RMSNorms without a weight, q/k norms too (nanochat) */
    int emb_norm;                 /* the embeddings RMS-normed before the first layer (nanochat) */
    int rope_neg;                 /* rope turning the other way (nanochat's rotate_half: cat(x2, -x1)) */
    int attn_out_gate;            /* attention output gated by sigmoid(gate_proj(x)) per channel (AFMoE); 2: per head
                                   * (LFM3's g_proj) */
    int attn_gate_softplus;       /* ... by softplus instead of sigmoid (Laguna) */
    int qk_l2norm;                /* Llama 4: q and k of the rope layers RMS-normed without weights after the rope */
    float q_temp_scale, q_temp_floor; /* Llama 4's NoPE layers: q x (log(floor((pos + 1) / floor) + 1) scale + 1) */
    int route_scale_input;        /* the routing weights scale the experts' inputs (Llama 4) */
    int xielu;                    /* the MLP's activation is xIELU with two learnable scalars per layer (Apertus) */
    int parallel_block;           /* attention and MLP read the same normed input (Phi-2) */
    int parallel_norms;           /* the parallel block's MLP reads its own norm (GPT-NeoX's post_attention_layernorm) */
    int sandwich_norm;            /* extra post-attention / post-MLP norms (Gemma 2) */
    int norm_head;                /* row-normalised LM head (Baichuan 2) */
    int router_bias;              /* the router has a choice-only correction bias (DeepSeek-V3's sigmoid, ERNIE's softmax) */
    int router_bias_logits;       /* ... added to the logits for the choice, not to the scores (Kolibri) */
    int attn_sinks;               /* a learned sink logit per head in every softmax (gpt-oss); 2: on sliding layers only
                                   * (MiMo-V2-Flash) */
    int fp8_quant;                /* quantization_config fp8: every float8 weight has its *_scale_inv */
    int fp8_block[2];             /* its weight_block_size */
    int ct_quant;                 /* quantization_config compressed-tensors (pack-quantized / float-quantized weights,
                                   * symmetric): dequantized on load */
    int ct_group;                 /* ... its weights' group_size (0: none) */
    int ct_bits;                  /* ... their num_bits (packed integers) */
    int ct_sparse24;              /* ... sparsity_config sparse-24-bitmask: 2:4 sparse weights (name.compressed, .bitmask) */
    int ct_nvfp4;                 /* ... 4-bit floats (E2M1 pairs a byte): 1 nvfp4-pack-quantized (fp8 scales per 16
                                   * columns over a global scale), 2 mxfp4-pack-quantized (E8M0 scales per 32) */
    int expert_bias;              /* the router and the experts' projections have biases (gpt-oss) */
    float emb_scale;              /* 0: none; Gemma multiplies embeddings by sqrt(hidden) */
    float attn_scale;             /* softmax scale on q.k */
    int attn_scale_by_layer; /* GPT-2's scale_attn_by_inverse_layer_idx: layer l's scale divided by l + 1 */
    float attn_softcap, final_softcap;
    float residual_scale;         /* 0: none; Granite's residual_multiplier on each sublayer's output */
    float logit_divisor;          /* 0: none; Granite's logits_scaling (logits / it) */
    float q_pos_beta;             /* 0: none; Llama 4 / Ministral 3: q x (1 + beta log(1 + floor(pos / q_pos_base))) */
    int64_t q_pos_base;
    int window[VC_MAX_LAYERS];    /* sliding window per layer, 0 = full */
    int chunk[VC_MAX_LAYERS];     /* chunked attention per layer (Llama 4's rope layers), 0 = none */
    uint8_t nope[VC_MAX_LAYERS];  /* layers without rotary embedding (SmolLM3's no_rope_layers, EXAONE 4's global) */
    /* rope */
    vc_rope rope;
    vc_rope rope_local;           /* sliding-window layers' rope when local_rope (Gemma 3) */
    int local_rope;
    int rot_dim;                  /* rotated dims of each head (partial rotary) */
    int rope_interleaved;         /* GPT-J / GLM pairs (2i, 2i+1) instead of (i, i + rot/2) */
    int alibi;                    /* ALiBi biases instead of rope (Baichuan-13B, Baichuan2-13B) */
    /* attention biases (from config; the loader also accepts them when present) */
    int qkv_bias, o_bias, mlp_bias, head_bias;
    /* mixture of experts */
    int64_t n_expert, top_k, moe_inter, shared_inter;
    int64_t moe_latent;           /* > 0: the routed experts work in a latent space of this width (Nemotron-H) */
    int shared_gate;              /* sigmoid-gated shared expert (Qwen2-MoE) */
    int norm_topk, router_sigmoid, group_top2, n_group, topk_group;
    float norm_topk_min;          /* > 0: the renormalising sum clamped from below (ERNIE 4.5's moe_norm_min) */
    float routed_scaling;
    float router_softcap;         /* > 0: router logits soft-capped, cap tanh(z / cap) (Laguna) */
    int router_sparsemixer;       /* PhiMoE's top-2 sparsemixer with router_jitter as its eps (backend/route_math.h) */
    float router_jitter;
    uint8_t is_moe[VC_MAX_LAYERS];
    /* multi-head latent attention (DeepSeek V2/V3) */
    int mla;
    int64_t q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    /* layers with a recurrent state instead of attention: Gated DeltaNet (Qwen3-Next, Qwen3.5; layer_types
     * "linear_attention") or LFM2's gated short convolutions (layer_types "conv"), one kind per model */
    uint8_t linear[VC_MAX_LAYERS];
    int n_linear;                 /* how many layers are */
    int lin_kind;                 /* vc_lin_kind */
    int64_t lin_nk, lin_nv, lin_dk, lin_dv; /* q/k heads, value heads (a multiple), their widths */
    int lin_conv;                 /* the causal conv's taps */
    int lin_conv_bias;            /* Mamba 2: the conv has a bias */
    int lin_act;                  /* the activation after the conv (Gated DeltaNet, Mamba 2) */
    int lin_norm;                 /* Mamba 2's output: 0 y silu(z) then the grouped norm, 1 the norm then silu(z), 2 no
                                   * norm (Falcon-H1's mamba_rms_norm / mamba_norm_before_gate) */
    int lin_sep_qkv;              /* q, k and v projected apart (OLMo-hybrid's q_proj / k_proj / v_proj) */
    int lin_pre_norm;             /* linear layers normed before their sublayers while attention layers keep the
                                   * model's norm placement (OLMo-hybrid: OLMo 2's post-norms on attention) */
    float lin_beta_scale;         /* the delta rule's beta = scale sigmoid(b) (OLMo-hybrid's allow_neg_eigval: 2) */
    float lin_norm_eps;           /* the gated output norm's eps (0: norm_eps) */
    int lin_gate_act;             /* the output gate's activation (Gated DeltaNet: silu; Kimi Delta Attention: sigmoid) */
    int64_t lin_rank;             /* Mamba 1: dt's rank (lin_nv channels of state lin_dk, lin_dv 1) */
    int lin_bcdt_norm;            /* Mamba 1: dt, B and C RMS-normed (Jamba: with weights; 2: without, FalconMamba) */
    struct {                      /* MiniMax-Text-01: the residual stream carries the normed input, x' = alpha
                                   * norm(x) + beta sublayer(norm(x)) (attention: [0] full, [1] linear; mlp) */
        int on;
        float attn_alpha[2], attn_beta[2], mlp_alpha, mlp_beta;
    } norm_res;
    int parallel_ssm;             /* every layer runs attention and a Mamba 2 mixer side by side (Falcon-H1) */
    struct {                      /* Falcon-H1's muP multipliers (on: any is set; 1 otherwise) */
        int on;
        float ssm_in, ssm_out, attn_in, attn_out, key, mlp_gate, mlp_down, zxbcdt[5];
    } mup;
    uint8_t block[VC_MAX_LAYERS]; /* vc_block_kind */
    /* Gemma 4 */
    int32_t layer_hd[VC_MAX_LAYERS], layer_nkv[VC_MAX_LAYERS]; /* a layer's own head_dim / kv heads (0: the model's;
                                   * per_layer_config, global_head_dim) */
    int32_t layer_nh[VC_MAX_LAYERS]; /* a layer's own query heads (Laguna's num_attention_heads_per_layer; 0: n_head) */
    int rot_dim_local;            /* the sliding layers' rotated dims when local_rope and their heads differ (0: rot_dim) */
    int k_eq_v;                   /* full layers' values are their key projection (attention_k_eq_v) */
    int v_norm;                   /* values RMS-normed per head without a weight */
    int layer_scalar;             /* each layer's output times its layer_scalar (a buffer, not trained) */
    int moe_post_norm;            /* MoE layers' output (experts and shared experts) RMS-normed (A.X K1) */
    int moe_dense;                /* MoE layers keep the dense MLP: its output and the experts' each post-normed and
                                   * summed; the router reads the residual (weightless norm, a scale, hidden^-0.5) and
                                   * each expert's weight is scaled by its per_expert_scale */
    int64_t ple_dim, ple_vocab;   /* per-layer embeddings: ple_dim per layer from a [ple_vocab, n_layer ple_dim] table */
    int16_t kv_src[VC_MAX_LAYERS]; /* > 0: the layer attends with layer kv_src - 1's keys and values (KV sharing) */
    int32_t layer_inter[VC_MAX_LAYERS]; /* a layer's own MLP width (0: intermediate_size): Gemma 4's double-wide MLPs,
                                   * Cohere2-MoE's dense prefix layers */
    float shared_scale;           /* 0: 1; the shared expert's output times this (Cohere2-MoE's "average": 0.5) */
    float v_scale;                /* 0: none; values times this after their projection (MiMo-V2-Flash) */
    int learned_pos;              /* learned absolute position embeddings added to the token's (GPT-2): max_pos rows */
    int sin_pos;                  /* fixed sinusoidal positions (fairseq's: sines then cosines) added to the
                                   * embeddings at position + pos_offset (XGLM) */
    int pos_offset;               /* ... after this many unused rows (OPT: 2) */
    float alibi_scale;            /* 0: 1; ALiBi's slopes times this (Falcon-RW: 1 / sqrt(head_dim)) */
    int64_t emb_dim;              /* > 0: the embeddings' width (OPT-350m's word_embed_proj_dim): projected in to hidden
                                   * after the lookup and out of it before the LM head (project_in / project_out) */
    int post_ln;                  /* each sublayer as x = norm(x + sublayer(x)) (OPT-350m's do_layer_norm_before false) */
    int no_final_norm;            /* no norm after the last layer */
    float clip_qkv;               /* > 0: q, k and v clipped to [-clip_qkv, clip_qkv] after their projection (DBRX, OLMo) */
    int clip_after_norm;          /* clip_qkv: q and k clipped after their (full-width) norms instead (OLMoE) */
    /* DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): each query attends to the dsa_topk (index_topk) keys its
     * layer's indexer scores best, of dsa_heads heads dsa_dim wide (index_n_heads, index_head_dim) */
    int64_t dsa_topk, dsa_heads, dsa_dim;
    int dsa_rope_interleaved;     /* the indexer's rope on interleaved pairs (GLM-5) instead of halves (DeepSeek-V3.2) */
    uint8_t dsa_shared[VC_MAX_LAYERS]; /* 1: the layer has no indexer and reuses the previous layer's selection (GLM-5's
                                   * indexer_types "shared") */
    int64_t out_vocab;            /* > 0: the LM head's rows, a prefix of the vocabulary (Apertus 1.5's output_vocab_size:
                                   * a head pruned to the text tokens); 0: vocab */
    int nested_text;              /* the text model of an image-text config (text_config): its tensors sit under
                                   * model.language_model.* in what `verlc init` writes */
    /* special tokens from config.json / generation_config.json */
    int bos_id, pad_id, n_eos, eos_ids[VC_MAX_EOS];
    /* image-text configs' image_token_id (the tokens an image's features replace), video_token_id and
     * vision_start_token_id; -1: none; Gemma 3's begin / end of image tokens (boi_token_index / eoi_token_index: its
     * processor writes them around each image's tokens) */
    int image_id, video_id, vstart_id, boi_id, eoi_id;
    /* InternVL: the texts InternVLProcessor writes around each image's tokens ("<img>", "</img>"; the template's image
     * token is its marker); NULL: none. image_wrap: the processor writes the texts (these, or the begin / end of image
     * tokens: Gemma 4) around the pads, the pad its own marker (InternVL, Gemma 4; Gemma 3's marker is its begin token) */
    const char *image_open, *image_close;
    int image_wrap; /* 2: Mistral 3's rows of image tokens, each followed by image_open ([IMG_BREAK]), the last by
                     * image_close ([IMG_END]); 3: Llama 4's tiles between image_open and image_close, each a run of
                     * image tokens, the tile separators between, <|image|> before the whole-image tile */
} vc_model_config;

/* a layer's attention shape (Gemma 4's full layers have their own) and MLP width */
static inline int64_t vc_cfg_head_dim(const vc_model_config *c, int l) {
    return l >= 0 && c->layer_hd[l] ? c->layer_hd[l] : c->head_dim;
}
static inline int64_t vc_cfg_heads(const vc_model_config *c, int l) {
    return l >= 0 && c->layer_nh[l] ? c->layer_nh[l] : c->n_head;
}
static inline int64_t vc_cfg_kv_heads(const vc_model_config *c, int l) {
    return l >= 0 && c->layer_nkv[l] ? c->layer_nkv[l] : c->n_kv_head;
}
/* values' head width: v_head_dim outside MLA where a config gives one (MiMo-V2-Flash), else the layer's head_dim */
static inline int64_t vc_cfg_v_head_dim(const vc_model_config *c, int l) {
    return !c->mla && c->v_head_dim ? c->v_head_dim : vc_cfg_head_dim(c, l);
}
/* the width of the final hidden states the LM head, score and value heads read */
static inline int64_t vc_cfg_out_hidden(const vc_model_config *c) { return c->emb_dim ? c->emb_dim : c->hidden; }
/* the LM head's rows (logits per token): token ids at or above it can be read but never predicted */
static inline int64_t vc_cfg_out_vocab(const vc_model_config *c) { return c->out_vocab ? c->out_vocab : c->vocab; }
static inline int64_t vc_cfg_inter(const vc_model_config *c, int l) {
    return l >= 0 && c->layer_inter[l] ? c->layer_inter[l] : c->inter;
}

/* Reads DIR/config.json (and generation_config.json when present). Errors name the file and key. */
vc_status vc_config_load_model(const char *dir, vc_model_config *cfg);
vc_status vc_config_parse_model(const cJSON *root, const char *path, vc_model_config *cfg);

typedef struct vc_model vc_model;

/* Loads a Hugging Face model directory; every checkpoint tensor is used, deliberately ignored, or an
 * error naming it. Weights are held as f32 in the memory of the backend active at load time (device
 * memory on a GPU: see include/verlc/device.h); each tensor is converted on the host and uploaded. The
 * model keeps that backend and frees its memory with it. */
vc_status vc_model_load(const char *dir, vc_model **out);
/* vc_model_load with the checkpoint's multi-token-prediction layers as trained parameters (verl's
 * model.mtp.enable_train): each a decoder layer of the last layer's kind behind its own norms and projection, run by
 * the forward where the batch asks for their hidden states (vc_batch.mtp_out). An error naming the model where its
 * config declares none or verlc cannot train its family's (MiMo's are built) */
vc_status vc_model_load_mtp(const char *dir, vc_model **out);
/* A model with random weights for a config.json (std 0.02 normal, norms 1), seeded. */
vc_status vc_model_init_random(const char *config_path, uint64_t seed, vc_model **out);
/* ... with the MTP layers the config declares (mtp -1: where verlc builds their layout, as vc_model_init_random; 0:
 * none; 1: required, an error where it cannot) */
vc_status vc_model_init_random_ex(const char *config_path, uint64_t seed, int mtp, vc_model **out);
void vc_model_free(vc_model *m);
const vc_model_config *vc_model_cfg(const vc_model *m);
int64_t vc_model_param_count(const vc_model *m);
/* the multi-token-prediction layers its config.json declares (verl's count: num_nextn_predict_layers, or
 * mtp_num_hidden_layers, also under text_config; Mellum's num_mtp_layers), 0 for none: loaded by vc_model_load, the
 * forward does not use them and an export copies their tensors through (verl's actor_rollout_ref.model.mtp.enable
 * without enable_train); vc_model_load_mtp trains them */
int vc_model_mtp_layers(const vc_model *m);
/* verl's `key`=true (model.mtp.enable without enable_train) for the model loaded from dir: an error when it declares no
 * MTP layers (as verl's check_mtp_config), else (say: printed) a notice that they are kept, not trained (enable_train:
 * vc_model_load_mtp) */
vc_status vc_mtp_enable_check(const vc_model *m, const char *dir, const char *key, int say);
/* the weights of its matrices one token multiplies by (projections, routers, shared experts, a token's top-k routed
 * experts; no embeddings, LM head or score head, norms, biases or buffers): verl's FlopsCounter's N less its
 * embedding and LM head */
int64_t vc_model_active_weights(const vc_model *m);

/* LoRA adapters (PEFT's layout) on the decoder layers' dense projections (and a Qwen-VL vision tower's linears, as
 * PEFT reaches them): targets "all-linear" or names among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
 * down_proj (comma-separated; the tower's by PEFT's match of module paths: qkv, attn.proj, mlp.0). A is drawn from
 * seed, B is zero; from then on the base weights are frozen (no gradients) and the adapters are the
 * trainable tensors (vc_model_lora_params: 2 per adapter, for vc_trainer_config.extra_params). */
vc_status vc_model_lora_init(vc_model *m, int rank, double alpha, const char *targets, uint64_t seed);
/* and leaves out the modules whose path (model.layers.N.self_attn.q_proj, model.layers.N.mlp.up_proj)
 * the regular expression `exclude` (Python syntax) matches as a whole (PEFT's exclude_modules); NULL: none */
vc_status vc_model_lora_init_ex(vc_model *m, int rank, double alpha, const char *targets, const char *exclude,
                                uint64_t seed);
/* the whole of PEFT's LoraConfig that verlc reads: targets as above ("[]": none; on MoE layers all-linear
 * and the names gate_proj + up_proj (w1 + w3), down_proj (w2), gate reach the routed experts and the router
 * as PEFT maps them onto transformers 5's fused tensors), params PEFT's target_parameters (NULL: none):
 * mlp.experts.gate_up_proj, mlp.experts.down_proj (one adapter per routed expert) and mlp.gate.weight (the
 * router) of the MoE layers, by full path or a dotted tail */
typedef struct vc_lora_spec {
    int rank;
    double alpha;
    const char *targets, *params, *exclude;
    uint64_t seed;
    int gu_rank; /* the experts' gate_up adapter's rank (PEFT's rank_pattern; alpha scaled alike); 0: 2 rank
                  * when module names reach it, rank when target_parameters does */
} vc_lora_spec;
vc_status vc_model_lora_attach(vc_model *m, const vc_lora_spec *spec);
int vc_model_has_lora(const vc_model *m);
/* the adapters' trained tensors (A, B of each adapter in order; a frozen vision tower's left out: see
 * vc_model_freeze_vision) into *out, an array of m's that each call rewrites; returns how many */
int vc_model_lora_params(vc_model *m, vc_tensor *const **out);
/* switches the adapters in or out of the forward (out: the base model); returns the previous state */
int vc_model_lora_enable(vc_model *m, int on);
/* runs fn with the adapters merged into the base weights (W + alpha/r B A), restored exactly after */
vc_status vc_model_lora_merged(vc_model *m, vc_status (*fn)(vc_model *m, void *ctx), void *ctx);
/* DIR/adapter_model.safetensors + adapter_config.json in PEFT's format, and back */
vc_status vc_model_lora_save(const vc_model *m, const char *dir);
vc_status vc_model_lora_load(vc_model *m, const char *dir);
/* attaches and loads the adapters of a PEFT directory (adapter_config.json's r, lora_alpha, target_modules) */
vc_status vc_model_lora_attach_from(vc_model *m, const char *dir);
/* vc_model_save_hf with any adapters merged, and those adapters in DIR/lora_adapter */
vc_status vc_model_save_hf_merged(vc_model *m, const char *dir, vc_dtype dtype);

/* Parameters, for optimisers and checkpoints: name is the internal slot name. Buffers that are not
 * trained (DeepSeek-V3's e_score_correction_bias) have no grad (t->grad stays NULL). */
int vc_model_n_params(const vc_model *m);
vc_tensor *vc_model_param(vc_model *m, int i, const char **name, int *decay);
/* Muon's view of parameter i (verl's megatron optim.optimizer=muon, as Megatron-core splits the parameters): 1 when
 * Muon updates it, as *mats row-major [*rows, *cols] matrices, with *fuse > 0 shared by the parameters of one fused
 * Megatron module (linear_fc1's gate and up, the Gated DeltaNet's in_proj, linear_qkv unless split_qkv); 0 for
 * AdamW's (embeddings, output layer, norms, biases, convolutions, 1-D tensors) */
int vc_model_param_matrix(vc_model *m, int i, int split_qkv, int64_t *mats, int64_t *rows, int64_t *cols, int *fuse);
/* Host copies of parameter i's weights (grad 0) or gradient (grad 1), t->n floats; and an upload of
 * new weights from the host. Parameter data and grad pointers are backend memory: never dereference
 * them on the host. */
struct vc_backend;
const struct vc_backend *vc_model_backend(const vc_model *m); /* the backend holding its memory */
vc_status vc_model_param_read(const vc_model *m, int i, int grad, float *dst);
/* floats [offset, offset + n) of parameter i's weights into dst (a checkpoint streamed piece by piece) */
vc_status vc_model_param_read_range(const vc_model *m, int i, size_t offset, size_t n, float *dst);
vc_status vc_model_param_write(vc_model *m, int i, const float *src);
/* Allocates (once, in the model's backend memory) and zeroes persistent gradient buffers. */
vc_status vc_model_enable_grad(vc_model *m);
void vc_model_zero_grad(vc_model *m);
/* ZeRO-2: marks the trained parameters as requiring gradients with every grad pointer at `area` (backend
 * memory owned by the caller, at least the largest parameter's size; the caller repoints each parameter's
 * grad before a backward) and frees the full-size gradient storage if any. area NULL: gradients off. */
vc_status vc_model_enable_grad_at(vc_model *m, float *area);

/* With bf16 matmuls: on 1 rounds every weight matrix to bf16 once and lets the GEMMs read those copies until on 0
 * (instead of rounding a weight in every GEMM that reads it: every micro-batch's forward and backward on a GPU,
 * every forward product and decode step on the CPU, whose row-invariant GEMM reads the 2-byte copies directly).
 * The caller promises the weights do not change in between (around a generate call, the micro-batches before an
 * optimiser step). Same bits either way. Elsewhere (f32, the sim device, no room for the copies,
 * VERLC_WEIGHT_COPIES=0, or VERLC_CUDA_WEIGHT_COPIES=0 on a GPU) it does nothing. One model at a time. Returns
 * the GEMM operands served since on (0 when on). */
int64_t vc_model_weight_copies(vc_model *m, int on);
/* Quantization-aware training (verl's fsdp_config.qat, mode w4a16: NVFP4 weights, 16-bit activations): between
 * vc_model_weight_copies(m, 1) and (m, 0) the model's nn.Linear weights (decoder projections, routers, each routed
 * expert's, an untied LM head) hold their fake-quantized values, the full-precision ones kept on the host and put
 * back at (m, 0); a module whose path an ignore pattern matches, or whose input width is not a multiple of
 * group_size, is left as it is (src/model/qat.c). spec NULL: off. Refused with LoRA adapters, a vision tower, a
 * tied LM head it would quantize, a bad regular expression. */
typedef struct {
    int group_size;            /* 16: NVFP4's */
    const char *const *ignore; /* verl's ignore_patterns: a substring of the module path, or "re:" + a regular
                                * expression matched at the path's start (Python's re.match) */
    int n_ignore;
} vc_qat_spec;
vc_status vc_model_qat(vc_model *m, const vc_qat_spec *spec);
int vc_model_qat_modules(const vc_model *m); /* the modules quantized (0: none, or off) */
size_t vc_model_qat_bytes(const vc_model *m); /* the host memory it holds (the full-precision copy) */
/* the device memory vc_model_weight_copies(m, 1) takes (bf16 copies of the matrices; 0 where it makes none) */
size_t vc_model_weight_copies_bytes(const vc_model *m);

/* Gradient of a Hugging Face tensor name, in the checkpoint's layout (fused tensors re-fused), as f32;
 * *n receives the element count. Caller frees. */
vc_status vc_model_hf_grad(const vc_model *m, const char *hf_name, float **out, int64_t *n);
/* Writes the weights back in the checkpoint's layout and names: DIR/model.safetensors (+ config.json). */
vc_status vc_model_save_hf(const vc_model *m, const char *dir, vc_dtype dtype);
/* Copies the tokenizer, generation and remote-code (*.py) files that exist in `from` into `to` (existing
 * ones kept unless overwrite). */
vc_status vc_model_copy_side_files(const char *from, const char *to, int overwrite);
/* Lists the checkpoint mapping (for `verlc inspect`): one line per tensor. */
vc_status vc_model_describe(const vc_model *m, FILE *f);

/* A packed batch: n_seq sequences concatenated; positions restart at 0 for each (or continue after a
 * cache's current length). */
typedef struct vc_batch {
    int n_seq;
    const int64_t *cu_seqlens; /* [n_seq + 1] */
    const int32_t *ids;        /* [cu_seqlens[n_seq]] */
    /* optional [n_seq] (NULL: none), without a cache only: prefix[s] >= 0 names an earlier sequence without
     * a prefix of its own whose tokens come before sequence s's: s's positions continue after it and its
     * queries attend to that sequence's keys first (a shared prompt, computed once; vc_share_plan) */
    const int32_t *prefix;
    /* optional (NULL: none; without a cache), verl's router_replay: [n_layer][T][top_k] host memory, T the
     * batch's tokens (a dense layer's rows unused). route_mode VC_ROUTE_RECORD: each MoE layer writes the
     * experts it chose; VC_ROUTE_REPLAY: each MoE layer routes to the experts there, their weights from the
     * current router (which so gets its gradient) */
    int32_t *route;
    int route_mode;
    /* optional (NULL: none), image-text models (include/verlc/vision.h): the images of the batch's runs of image
     * tokens, whose features replace those tokens' embeddings; with M-RoPE the positions are then get_rope_index's
     * (vc_mrope_positions). Needs the model's vision tower loaded. */
    const struct vc_images *images;
    /* optional [n_seq] (NULL: 0), M-RoPE models with a cache: what each sequence's positions add to the tokens
     * cached before them (the rope delta of a prompt with images: vc_mrope_positions' delta) */
    const int64_t *mrope_delta;
    /* optional [n_seq] (NULL: whole sequences), with images: the leading tokens of each sequence whose image tokens
     * stand for images (its prompt's; an image token after them, one the model generated, is a token like any other) */
    const int64_t *image_span;
    /* optional (NULL: none), a model with trained MTP layers (vc_model_load_mtp), with a tape, without a cache or
     * shared prefixes: the forward writes MTP depth k's final hidden states [T, H] into mtp_out[k], k < n_mtp;
     * position t's of depth k predicts token t + k + 2 of its sequence (vc_model_mtp_logprobs). mtp_detach (verl's
     * detach_encoder): no gradient from them into the token embeddings or the hidden states each depth reads */
    vc_tensor **mtp_out;
    int mtp_detach;
} vc_batch;
enum { VC_ROUTE_NONE, VC_ROUTE_RECORD, VC_ROUTE_REPLAY };

/* Shared prompt prefixes (verl's actor.use_prefix_grouper): sequences of b with the same group id >= 0
 * share their first P tokens, P the longest prefix every member has in common with the group's first
 * member that lies within each member's share_len[s] tokens (those whose next-token targets carry no loss)
 * and leaves each member at least one token of its own. Those P tokens are computed once, as a sequence of
 * their own that the members' remainders attend to; the model's output for any position is the same as in
 * b (to float rounding). Groups sharing fewer than min_len tokens are left whole. Arrays live in g's arena. */
typedef struct vc_share {
    vc_batch b;                /* the shared packing */
    int64_t T;                 /* its positions */
    const int32_t *rep;        /* [T] host: the position of the original batch each shared position computes */
    const int32_t *back_host;  /* [T_orig] host: the shared position computing each original one */
    const int32_t *back;       /* the same in backend memory (vc_op_gather_rows back to b's packing) */
    int64_t saved;             /* positions of b not computed (0: nothing shared, and b is b unchanged) */
} vc_share;
vc_status vc_share_plan(vc_graph *g, const vc_batch *b, const int32_t *group, const int64_t *share_len,
                        int64_t min_len, vc_share *out);

/* Per-sequence contiguous KV cache used by decoding. */
typedef struct vc_kv_cache vc_kv_cache;
vc_status vc_kv_cache_new(const vc_model *m, int n_seq, int64_t max_len, vc_kv_cache **out);
void vc_kv_cache_free(vc_kv_cache *c);
int64_t vc_kv_cache_len(const vc_kv_cache *c, int seq);
void vc_kv_cache_reset(vc_kv_cache *c);

/* Paged KV cache (the rollout engine's): a pool of pages of page_tokens tokens for every layer. Token i
 * of page p in layer l is at pool + ((p * n_layer + l) * page_tokens + i) * vc_kv_row_floats(m) values,
 * keys first, then values; a value is a float, or with bf16 a bf16 (uint16_t, 2 bytes; only with bf16
 * matmul precision, whose attention inputs are bf16 values already, so nothing is lost). */
typedef struct vc_kv_pages {
    float *pool;
    int64_t page_tokens;
    const int32_t *const *table; /* [n_seq]: page ids covering len[s] + the sequence's new tokens */
    const int64_t *len;          /* [n_seq]: tokens already cached (the caller advances it) */
    int bf16;                    /* the pool holds bf16 values */
    /* models with linear-attention layers (vc_lin_state_floats > 0): sequence s's conv and recurrent states are
     * state + state_slot[s] * vc_lin_state_floats (backend memory; state_slot host [n_seq]), carried from call to
     * call and zeroed when len[s] is 0 */
    float *state;
    const int32_t *state_slot;
    /* layers a page holds (0: the model's n_layer). A pool the first MTP layer drafts with (speculative rollout:
     * vc_model_mtp_forward_paged) holds n_layer + 1, that layer's keys and values after the decoder's */
    int64_t n_layers;
} vc_kv_pages;
int64_t vc_kv_row_floats(const vc_model *m);
/* floats of one sequence's linear-attention states, every such layer's (0: the model has none) */
int64_t vc_lin_state_floats(const vc_model_config *c);

/* Decoder forward: final normed hidden states [T, hidden] (with gradient checkpointing b and its arrays must
 * stay valid until backward has run: the layers read them again). With a cache, the batch's sequence i
 * continues cache sequence i (n_seq must match) and its keys/values are appended; no gradients. */
vc_tensor *vc_model_forward(vc_model *m, vc_graph *g, const vc_batch *b, vc_kv_cache *cache);
/* Forward over a paged cache: sequence s continues after kv->len[s] cached tokens; its new keys and
 * values are written into its pages (which must not be shared). No gradients. Every row is computed
 * independently of the other rows of the batch (given a row-invariant GEMM in the active backend). */
vc_tensor *vc_model_forward_paged(vc_model *m, vc_graph *g, const vc_batch *b, const vc_kv_pages *kv);
/* The first MTP layer over a paged cache (drafting tokens: speculative rollout), no gradients: row t of sequence s
 * is position kv->len[s] + (t - cu_seqlens[s]) of it, reading h's row t (the decoder's final hidden state at that
 * position: vc_model_forward_paged's) and the embedding of b->ids[t] (the token after that position); its keys and
 * values go into the pages' MTP layer (kv->n_layers must be n_layer + 1). Returns the layer's final normed hidden
 * states [T, hidden], whose logits (vc_model_logits) predict the token after ids[t]: the same values as a
 * training forward's mtp_out[0] at those positions (vc_batch.mtp_out). Needs the MTP layers loaded
 * (vc_model_load_mtp); a model's linear-attention states are left as they are (kv's state may be NULL). */
vc_tensor *vc_model_mtp_forward_paged(vc_model *m, vc_graph *g, const vc_batch *b, const vc_kv_pages *kv, vc_tensor *h);
/* Full logits [T, vocab] (soft-capped as the model does). */
vc_tensor *vc_model_logits(vc_model *m, vc_graph *g, vc_tensor *hidden);
/* [R * K] log-softmax of the logits h W^T (soft-capped as the model does, divided by temperature when > 0) of
 * each row of hidden [R, hidden] at its K tokens ids[r * K ..) (host), with gradient; computed chunk_rows rows
 * at a time (<= 0: as many as 64 Mi logits) so that [R, vocab] logits are never held, forward or backward (the
 * chunk is recomputed there). top (NULL: not wanted) gets each row's own K most likely tokens, as torch.topk. */
vc_tensor *vc_model_head_gather(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *ids, int K,
                                float temperature, int64_t chunk_rows, int32_t *top);
/* the rows of its chunks for chunk_rows (its logits, their gradient and temporaries: a few times rows x vocab
 * floats at once) */
int64_t vc_model_head_gather_rows(const vc_model *m, int64_t chunk_rows);
/* [T, n_labels] scores of a classification checkpoint's head (config n_labels > 0) on hidden states */
vc_tensor *vc_model_score(vc_model *m, vc_graph *g, vc_tensor *hidden);
/* row `label` of the score head (hidden floats) and its bias (0 without one), in host memory */
vc_status vc_model_score_head(vc_model *m, int label, float *w, float *bias);
/* Per-token log p(target) and entropy [T] through the fused chunked head; target < 0 gives 0. */
vc_status vc_model_logprobs(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, vc_tensor **logp,
                            vc_tensor **entropy);
/* ... of the logits divided by `temperature` (verl's actor divides them by rollout.temperature; <= 0: 1),
 * and sum_v p_v^2 per token into *sum_pi_sq when it is not NULL (verl's calculate_sum_pi_squared) */
vc_status vc_model_logprobs_ex(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, float temperature,
                               vc_tensor **logp, vc_tensor **entropy, vc_tensor **sum_pi_sq);
/* ... through the LM head on the rows t with need[t] only (host, NULL: all); the others get log-prob, entropy
 * and sum of squares 0 and no gradient (passes that read response positions skip the prompt's) */
vc_status vc_model_logprobs_rows(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, float temperature,
                                 const uint8_t *need, vc_tensor **logp, vc_tensor **entropy, vc_tensor **sum_pi_sq);
/* Recompute each decoder layer in backward instead of keeping its activations. */
/* the MTP rows' parameters (a model loaded by vc_model_load_mtp, or a random one whose config declares MTP layers of a
 * family verlc builds them for) out of training (frozen 1: no gradient, kept as they are) or back in */
void vc_model_freeze_mtp(vc_model *m, int frozen);
/* log p(target[t]) of MTP hidden states (vc_batch.mtp_out) through the LM head without gradient into its weights (as
 * verl's MTP loss detaches the output layer), rows where need[t] (NULL: all); temperature 1 */
vc_status vc_model_mtp_logprobs(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, const uint8_t *need,
                                vc_tensor **logp);
void vc_model_set_checkpointing(vc_model *m, int on);

/* ---- sharded layer weights (ZeRO-3, src/train/dp_zero3.c) ----
 * fn(ctx, l) runs before every forward of decoder layer l (also a checkpointed layer's recompute); a
 * non-OK status fails that forward. The trainer gathers the layer's weights there. NULL removes it. */
void vc_model_set_layer_hook(vc_model *m, vc_status (*fn)(void *ctx, int layer), void *ctx);
/* The decoder layer of parameter i, or -1 for the embedding, final norm and head. */
int vc_model_param_layer(const vc_model *m, int i);
/* Moves every parameter i with external[i] == 0 into new, smaller storage and frees the old; the others
 * get data NULL: their caller points them at memory it owns (and keeps them there until the model is
 * freed or stops using them). Full gradient storage is unavailable afterwards (ZeRO-2's area only). */
vc_status vc_model_compact(vc_model *m, const uint8_t *external);
#endif
