/* Architecture descriptors: which blocks a family uses and how Hugging Face tensor names map onto the
 * decoder's slots. Internal to src/model. */
#ifndef VC_ARCH_H
#define VC_ARCH_H
#include "verlc/model.h"

/* Parameter slots. Global slots are used with layer -1. */
enum vc_slot {
    VC_W_NONE = 0,
    VC_W_TOK_EMBD, VC_W_OUT_NORM, VC_W_OUT_NORM_B, VC_W_LM_HEAD, VC_W_LM_HEAD_B,
    VC_W_ATTN_NORM, VC_W_ATTN_NORM_B,
    VC_W_Q, VC_W_Q_B, VC_W_K, VC_W_K_B, VC_W_V, VC_W_V_B, VC_W_O, VC_W_O_B,
    VC_W_Q_NORM, VC_W_K_NORM, VC_W_Q_NORM_B, VC_W_K_NORM_B, /* biases: Phi's LayerNorm q/k norms */
    VC_W_Q_A, VC_W_Q_A_NORM, VC_W_Q_BPROJ, VC_W_KV_A, VC_W_KV_A_NORM, VC_W_KV_B, /* MLA */
    VC_W_POST_ATTN_NORM, VC_W_FFN_NORM, VC_W_FFN_NORM_B, VC_W_POST_FFN_NORM,
    VC_W_GATE, VC_W_GATE_B, VC_W_UP, VC_W_UP_B, VC_W_DOWN, VC_W_DOWN_B,
    VC_W_ROUTER, VC_W_ROUTER_BIAS,
    VC_W_EXP_GATE, VC_W_EXP_UP, VC_W_EXP_DOWN, /* stacked [E, ...] */
    VC_W_SH_GATE, VC_W_SH_UP, VC_W_SH_DOWN, VC_W_SH_GATE_PROJ,
    VC_W_SINKS,        /* [n_head] attention sink logits (gpt-oss) */
    VC_W_ROUTER_B,     /* the router's own bias, part of its logits (gpt-oss) */
    VC_W_EXP_GATE_B, VC_W_EXP_UP_B, VC_W_EXP_DOWN_B, /* stacked experts' biases [E, I], [E, I], [E, H] (gpt-oss) */
    VC_W_ATTN_GATE,    /* [n_head * head_dim, H]: the attention output times sigmoid(x W^T) (AFMoE) */
    VC_W_XIELU_AP, VC_W_XIELU_AN, /* [1]: xIELU's learnable scalars (Apertus) */
    /* Gated DeltaNet layers (Qwen3-Next, Qwen3.5): in_proj_qkv [2 nk dk + nv dv, H], in_proj_z [nv dv, H], in_proj_b
     * and in_proj_a [nv, H], the conv [2 nk dk + nv dv, 1, K], dt_bias and A_log [nv], the gated norm [dv], out_proj */
    VC_W_LIN_QKV, VC_W_LIN_Z, VC_W_LIN_B, VC_W_LIN_A, VC_W_LIN_CONV, VC_W_LIN_DT, VC_W_LIN_ALOG, VC_W_LIN_NORM,
    VC_W_LIN_OUT,
    VC_W_LIN_D, VC_W_LIN_CONV_B, /* Mamba 2: the skip D [nh], the conv's bias [conv width] */
    VC_W_LIN_K, VC_W_LIN_V, VC_W_LIN_CONV_K, VC_W_LIN_CONV_V, /* OLMo-hybrid: q, k and v projected and their convs
                                    * stored apart (LIN_QKV and LIN_CONV then hold q's) */
    /* Kimi Delta Attention: the decay's low-rank projection f_a [dk, H], f_b [nv dk, dk]; the output gate's g_a [dk, H],
     * g_b [nv dv, dk] */
    VC_W_LIN_FA, VC_W_LIN_FB, VC_W_LIN_GA, VC_W_LIN_GB,
    /* Mamba 1: x_proj [R + 2 N, I] (dt, B, C), dt_proj [I, R] (its bias: LIN_DT), Jamba's norms of dt, B and C */
    VC_W_LIN_XPROJ, VC_W_LIN_DTPROJ, VC_W_LIN_DT_NORM, VC_W_LIN_B_NORM, VC_W_LIN_C_NORM,
    VC_W_LAT_IN, VC_W_LAT_OUT,   /* latent MoE (Nemotron-H): [latent, H] before the routed experts, [H, latent] after */
    /* Gemma 4: the layer's output scale (a buffer, not trained); the MoE block's norms (pre-norm of the experts' input,
     * post-norms of the dense MLP's and the experts' outputs), the router's input scale [H] and per-expert scale [E];
     * the per-layer embedding's gate [P, H], projection [H, P] and its post-norm [H] */
    VC_W_LAYER_SCALAR, VC_W_PRE_FFN_NORM2, VC_W_POST_FFN_NORM1, VC_W_POST_FFN_NORM2, VC_W_ROUTER_SCALE, VC_W_EXP_SCALE,
    VC_W_PLE_GATE, VC_W_PLE_PROJ, VC_W_PLE_NORM,
    /* global: Gemma 4's per-layer embeddings [ple_vocab, n_layer P], their projection from the embeddings
     * [n_layer P, H] and its norm [P] */
    VC_W_PLE_EMBD, VC_W_PLE_MODEL_PROJ, VC_W_PLE_PROJ_NORM,
    VC_W_POS_EMBD,     /* global: learned absolute position embeddings [max_pos, H] (GPT-2) */
    VC_W_EMB_NORM, VC_W_EMB_NORM_B, /* global: the embeddings' LayerNorm (BLOOM's word_embeddings_layernorm) */
    /* DeepSeek Sparse Attention's indexer (buffers: the language-model loss gives it no gradient): wq_b [heads dim,
     * q_lora_rank], wk [dim, H], k_norm's LayerNorm [dim] and its bias, weights_proj [heads, H] */
    VC_W_IDX_WQ, VC_W_IDX_WK, VC_W_IDX_KNORM, VC_W_IDX_KNORM_B, VC_W_IDX_WPROJ,
    VC_W_SCORE, VC_W_SCORE_B, /* global: the score head of *ForSequenceClassification / *ForTokenClassification */
    VC_W_PROJ_IN, VC_W_PROJ_OUT, /* global: OPT-350m's [hidden, emb_dim] after the embeddings, [emb_dim, hidden] before
                                  * the LM head */
    /* a trained multi-token-prediction row's own (vc_config_mtp_rows): the norms of the token embeddings (enorm) and
     * of the previous depth's hidden states (hnorm) [H], their projection [H, 2H] and the row's final norm [H] */
    VC_W_MTP_ENORM, VC_W_MTP_HNORM, VC_W_MTP_PROJ, VC_W_MTP_NORM,
    VC_W_COUNT
};

/* the rows of a model's slots: its layers, the globals' row n_layer, then its trained MTP rows (vc_config_mtp_rows) */
static inline int vc_cfg_rows(const vc_model_config *c) { return (int)c->n_layer + 1 + c->n_mtp; }
/* the layer row after l (-1: the globals), past the globals' own row n_layer; vc_cfg_rows(c) or more after the last */
static inline int vc_row_next(const vc_model_config *c, int l) { return l + 1 == c->n_layer ? (int)c->n_layer + 1 : l + 1; }

/* a bit per slot (LoRA targets, module names) */
__extension__ typedef unsigned __int128 vc_slot_mask;
#define VC_SLOT_BIT(slot) ((vc_slot_mask)1 << (slot))

enum vc_transform {
    VC_TR_NONE = 0,
    VC_TR_SPLIT_ROWS,  /* one tensor = rows of slots[0..n) stacked (qkv, gate_up) */
    VC_TR_GQA_QKV,     /* InternLM2 wqkv: per KV group [q x group, k, v] rows of head_dim */
    VC_TR_EXPERT,      /* per-expert tensor into row block e of a stacked slot; name has two %d */
    VC_TR_EXPERT_GATE_UP, /* transformers-5 fused experts: [E, 2I, H] = per expert [gate; up] */
    VC_TR_IGNORE,      /* known tensor that carries nothing the model needs (e.g. cached inv_freq) */
    /* gpt-oss's experts: [E, H, 2I] with gate and up in alternate columns (input-major) into gate / up [E, I, H];
     * biases [E, 2I] alternating likewise into [E, I] twice */
    VC_TR_OAI_GATE_UP, VC_TR_OAI_GATE_UP_B,
    VC_TR_T_DOWN,      /* input-major experts' down [E, I, H] into [E, H, I] (gpt-oss, Llama 4, Qwen3-VL-MoE's hub) */
    VC_TR_T_GATE_UP,   /* Llama 4's experts: [E, H, 2I] input-major with the gate's columns, then the up's */
    VC_TR_HEAD_SPLIT,  /* per attention head: head_dim rows of slot, then head_dim rows of slot2 (q_proj with the
                        * output gate: Qwen3-Next, Qwen3.5) */
    VC_TR_QKVZ,        /* Qwen3-Next's in_proj_qkvz: per q/k head [q, k, its value heads' v, their z] rows into
                        * in_proj_qkv's [all q; all k; all v] (slot) and z (slot2) */
    VC_TR_BA,          /* Qwen3-Next's in_proj_ba: per q/k head [its value heads' b, their a] into slot, slot2 */
    VC_TR_CONV1D,      /* GPT-2's Conv1D: [in, out] input-major, the transpose of the slots' [out, in] rows of slot (then
                        * slot2, slot3: c_attn's q, k and v) */
    VC_TR_FLAT,        /* DBRX's experts: a stacked slot [E, R, C] stored flat as [E R, C] */
    VC_TR_FLAT_T_DOWN, /* DBRX's w2: VC_TR_T_DOWN's input-major down stored flat as [E I, H] */
    VC_TR_CODEGEN_QKV, /* CodeGen's qkv_proj: 4 blocks (its mp_num) of [q, v, k] rows, hidden / 4 each */
};

typedef struct vc_tensor_rule {
    const char *name;  /* printf-style: %d = layer (then expert) */
    int slot;          /* destination (first destination for SPLIT_ROWS / GQA_QKV) */
    int transform;
    int slot2, slot3, slot4; /* further destinations of fused tensors */
} vc_tensor_rule;
#define VC_RULE_PARTS 4 /* a rule's destinations at most */
/* a rule's destination slots in order into ids (VC_RULE_PARTS of them, 0 after the last); returns how many */
static inline int vc_rule_slots(const vc_tensor_rule *r, int *ids) {
    int all[VC_RULE_PARTS] = { r->slot, r->slot2, r->slot3, r->slot4 }, n = 0;
    for (int i = 0; i < VC_RULE_PARTS; i++) ids[i] = n == i && all[i] ? all[n++] : 0;
    return n;
}
/* whether slot is one of the rule's destinations */
static inline int vc_rule_has_slot(const vc_tensor_rule *r, int slot) {
    int ids[VC_RULE_PARTS], n = vc_rule_slots(r, ids);
    for (int i = 0; i < n; i++)
        if (ids[i] == slot) return 1;
    return 0;
}

typedef struct vc_arch {
    const char *name;
    const char *model_types;              /* space-separated model_type values */
    const vc_tensor_rule *const *tables;  /* NULL-terminated list of rule tables */
    /* checkpoints that nest the decoder (multimodal ones): pairs of (rule-name prefix, checkpoint-name
     * prefix) tried when a rule's own name is absent, NULL-terminated; NULL: none */
    const char *const *nested;
    const char *ignore_prefixes;          /* space-separated: tensors of other towers, unused */
    /* the MoE block's module under a layer in transformers 5 and its router's under that (PEFT's target_parameters
     * name them); NULL: "mlp", "gate" */
    const char *moe_module, *router_module;
    /* 1: its checkpoints' names are the hub's, which transformers 5 renames (and splits) on load: LoRA adapters name
     * transformers 5's modules (each slot's first rule, vc_arch_module_name), as PEFT on transformers' model does */
    int model_names;
    /* 1: only remote code loads its checkpoints, whose experts are one module each: `verlc init` writes them so
     * (transformers 5's fused expert tensors otherwise) */
    int expert_modules;
    /* multi-token-prediction layers verlc can train (vc_config_mtp_rows): the checkpoint's prefix of depth k's tensors
     * ("model.mtp_layers.%d."; NULL: none trainable) and whether the projection's input is [hidden, embedding]
     * (MiMo's input_proj) rather than Megatron's and DeepSeek's [embedding, hidden] */
    const char *mtp_prefix;
    int mtp_hidden_first;
    /* the prefix of the MTP layers' own tensors (norms, projection, final norm) where they are not under their layer's
     * prefix (Qwen3-Next's and Qwen3.5's mtp.fc beside mtp.layers.0.*: "mtp."; one MTP layer); NULL: under it */
    const char *mtp_own_prefix;
    /* 1: depth k's layer is checkpoint layer n_layer + k (DeepSeek-V3's and GLM-4.5's model.layers.N, N past the
     * decoder, with enorm, hnorm, eh_proj, shared_head.norm and copies of the embedding and LM head, shared_head.head:
     * the copies are loaded from and written from the model's own) */
    int mtp_after_layers;
    /* 1: an MTP layer is a sliding-window attention layer with a dense MLP (MiMo-V2-Flash's), configured as the last
     * sliding layer but for its MLP; 0: as the last decoder layer */
    int mtp_sliding_dense;
    /* space-separated renames "from=to" of an MTP layer's tensor names against its decoder layer's (MiMo-V2-Flash's
     * post_attention_layernorm is its MTP layer's pre_mlp_layernorm), or NULL */
    const char *mtp_renames;
} vc_arch;

const vc_arch *vc_arch_find(const char *model_type);
/* target_parameters' path of slot (VC_W_EXP_GATE, VC_W_EXP_DOWN or VC_W_ROUTER) under a layer: mlp.experts.gate_up_proj,
 * mlp.experts.down_proj, mlp.gate.weight, or the architecture's module names; "" for any other slot */
void vc_arch_param_path(const vc_arch *a, int slot, char *buf, size_t cap);
/* The checkpoint module path of a per-layer slot ("model.layers.3.mlp.fc1"): the name of the first tensor
 * rule that loads it as a whole ".weight" (or with another slot as one module: q and its gate per head); 0 when the
 * slot comes from a fused tensor or no rule. */
int vc_arch_module_name(const vc_arch *a, int layer, int slot, char *buf, size_t cap);
/* The slots a module's short name ("fc1", "W_pack", "c_proj") loads in this architecture, as bits. */
vc_slot_mask vc_arch_module_slots(const vc_arch *a, const char *short_name);
/* whether a checkpoint tensor belongs to another tower the text model does not use (ignore_prefixes) */
int vc_arch_other_tower(const vc_arch *a, const char *name);
/* whether a checkpoint tensor is a multi-token-prediction layer's (DeepSeek-V3's and GLM-4.5's model.layers.N.* past
 * the decoder's n_layer, or under an ignored prefix naming mtp: MiMo's model.mtp_layers.*, Qwen3-Next's mtp.*): the
 * forward does not use them, the export copies them through */
int vc_arch_mtp_tensor(const vc_model_config *c, const char *name);
/* a rule's name formatted for row `row` of a model with trained MTP rows: where row is one of them (past the globals'
 * row n_layer), the checkpoint's name of it in buf ("model.layers.3.x" -> "model.mtp_layers.0.x"; an own tensor's,
 * slot vc_slot_is_mtp, under mtp_own_prefix where the family has one), else name itself */
const char *vc_arch_row_name(const vc_model_config *c, int row, int slot, const char *name, char *buf, size_t cap);
/* 1 for the slots of an MTP row's own tensors (enorm, hnorm, the projection, the final norm) */
static inline int vc_slot_is_mtp(int slot) { return slot >= VC_W_MTP_ENORM && slot <= VC_W_MTP_NORM; }
const char *vc_slot_name(int slot);
int vc_slot_is_global(int slot);
/* a bias or a norm's bias: zero at random init; no weight decay even when it is stacked per expert (2-D) */
int vc_slot_is_bias(int slot);
/* a buffer the checkpoint carries that training leaves alone (the routing correction bias, Gemma 4's layer_scalar) */
static inline int vc_slot_is_buffer(int slot) {
    return slot == VC_W_ROUTER_BIAS || slot == VC_W_LAYER_SCALAR || (slot >= VC_W_IDX_WQ && slot <= VC_W_IDX_WPROJ);
}
/* The slot's shape for this config and layer; returns the number of dims, 0 if the slot does not
 * exist there. *optional is set for biases that only exist when the checkpoint carries them. */
int vc_slot_shape(const vc_model_config *c, int layer, int slot, int64_t *shape, int *optional);
#endif
