/* The vision towers' shared layout (src/model/vision.c and its per-family files): the tower's configuration, its
 * tensors by slot, the forward's plan and the pieces the families share. */
#ifndef VC_MODEL_VISION_PRIV_H
#define VC_MODEL_VISION_PRIV_H
#include "verlc/vision.h"
#include "verlc/ops.h"
#include "model_internal.h"
#include <cjson/cJSON.h>

enum { VIS_QWEN2, VIS_QWEN25, VIS_QWEN3, VIS_GLM4V, VIS_MOON, VIS_SIGLIP, VIS_INTERN, VIS_GEMMA4, VIS_PIXTRAL,
       VIS_LLAMA4 };
#define VIS_MAX_DEPTH 128
#define VIS_MAX_DEEP 16

typedef struct {
    int kind, depth, dim, heads, hd, inter, out, act;
    int patch, tpatch, merge, in_ch, window;
    uint8_t full[VIS_MAX_DEPTH];
    double theta;
    int n_pos, side, side_w;  /* Qwen3-VL: learned positions (side x side), bilinearly resampled to each grid;
                               * MoonViT's are side x side_w */
    int n_deep, deep[VIS_MAX_DEEP]; /* Qwen3-VL: the blocks whose outputs feed the deepstack mergers */
    int m_inter, qkv_bias;    /* GLM-4V: the merger's SwiGLU width (its blocks' is out); attn.qkv's bias */
    float eps;                /* the blocks' norms' epsilon (GLM-4V: rms_norm_eps) */
    int tps;                  /* Qwen2.5-VL: vision_config.tokens_per_second (videos' temporal positions) */
    /* InternVL: q/k RMSNorms, RMSNorm blocks (norm_type rms_norm), a final LayerNorm (use_mean_pooling false), the
     * blocks the features come from (vision_feature_layer: the first `feat` blocks; post_ln only after all of them, as
     * last_hidden_state), the projector's activation */
    int qk_norm, rms, post_ln, feat, m_act;
    /* Gemma 4: key / value heads, clipped linears (use_clipped_linears), standardized features (standardize); the
     * text model's bidirectional image runs: 1 in every layer (Gemma 3), 2 in its sliding layers only (Gemma 4's
     * use_bidirectional_attention "vision"), 0 none */
    int kv_heads, clipped, standardize, bidi;
    int m_bias;   /* Mistral 3: its projector's linears' biases (multimodal_projector_bias) */
    float m_eps;  /* Mistral 3: its projector's RMSNorm epsilon (text_config.rms_norm_eps); MoonViT's LayerNorm's */
    int k25;      /* MoonViT: Kimi K2.5's (its projector's names) */
} vis_cfg;

/* per block: norm1 w/b, norm2 w/b, qkv w/b, proj w/b, then the MLP: fc1 w/b, fc2 w/b (Qwen2-VL) or gate w/b, up w/b,
 * down w/b (Qwen2.5-VL) */
/* (SigLIP: q in B_QKV / B_QKVB, k and v apart in B_K.. B_VB) */
/* (InternVL: the layer scales lambda_1 / lambda_2 and the q / k norms) */
/* (Gemma 4: the norms after attention and after the MLP, and each of its 7 linears' clip bounds: input min / max,
 * output min / max of q, k, v, o, gate, up, down from B_CLIP on) */
enum { B_N1, B_N1B, B_N2, B_N2B, B_QKV, B_QKVB, B_PROJ, B_PROJB, B_M0, B_M0B, B_M1, B_M1B, B_M2, B_M2B, B_K, B_KB, B_V, B_VB,
       B_L1, B_L2, B_QN, B_KN, B_POST1, B_POST2, B_CLIP, B_COUNT = B_CLIP + 28 };
/* globals after the blocks: the patch embedding, the merger's norm w/b and its two linears w/b; Qwen3-VL's patch
 * embedding bias and learned positions; GLM-4V's norms after the patch embedding and after the blocks, the downsample
 * Conv2d w/b, and its merger's proj and SwiGLU linears (its LayerNorm in G_LN / G_LNB); MoonViT's final LayerNorm
 * (G_POST, G_POSTB) */
enum { G_PATCH, G_LN, G_LNB, G_FC0, G_FC0B, G_FC2, G_FC2B, G_PATCHB, G_POS, G_PCONV, G_POST, G_DOWN, G_DOWNB, G_MPROJ,
       G_MGATE, G_MUP, G_MDOWN, G_POSTB, G_CLS, G_STDB, G_STDS, G_COUNT }; /* (G_CLS: InternVL's class token; G_STDB,
                                                                          * G_STDS: Gemma 4's standardization) */
/* Qwen3-VL's deepstack mergers after the globals, each: its norm (over merged rows) w/b and two linears w/b */
enum { D_LN, D_LNB, D_FC0, D_FC0B, D_FC2, D_FC2B, D_COUNT };

/* The tower's tensors are parameters of the model (vc_model_param: one storage, one gradient buffer, one optimiser,
 * checkpoints and data parallelism as for the text weights); the tower keeps pointers to them by slot. */
struct vc_vision {
    vis_cfg c;
    const vc_backend *be;
    int n;                   /* tensors (some of the slots below are absent) */
    vc_tensor **t;           /* [depth * B_COUNT + G_COUNT] slots: the model's parameter, NULL where absent */
    int64_t (*shape)[2];     /* [n] the shape of tensor i as the tower reads it (the patch embedding's kernels as rows) */
    int *nd;                 /* [n] */
    char (*name)[80];        /* [n] its checkpoint name */
    int *slot_of;            /* [n] the slot of tensor i */
    vc_tensor *deep_out[VIS_MAX_DEEP]; /* the last forward's deepstack features (Qwen3-VL) */
    const vc_model *m;       /* the model that holds the tower (its LoRA adapters) */
    float *clip;             /* Gemma 4: [depth * 28] the clip bounds (buffers, never trained) as B_CLIP orders them */
};

/* slots: the blocks' (b >= 0), the globals (b -1), deepstack merger j's (b -2 - j) */
static inline int slot_index(const vis_cfg *c, int b, int k) {
    return b >= 0 ? b * B_COUNT + k : b == -1 ? c->depth * B_COUNT + k : c->depth * B_COUNT + G_COUNT + (-2 - b) * D_COUNT + k;
}
static inline int n_slots(const vis_cfg *c) { return c->depth * B_COUNT + G_COUNT + c->n_deep * D_COUNT; }
static inline vc_tensor *slot(vc_vision *v, int b, int k) { return v->t[slot_index(&v->c, b, k)]; }
/* slot s as block b (or -1, -2 - j as above) and index k */
static inline void slot_bk(const vis_cfg *c, int s, int *b, int *k) {
    int nb = c->depth * B_COUNT, ng = nb + G_COUNT;
    *b = s < nb ? s / B_COUNT : s < ng ? -1 : -2 - (s - ng) / D_COUNT;
    *k = s < nb ? s % B_COUNT : s < ng ? s - nb : (s - ng) % D_COUNT;
}

/* ---- the forward's layout: the order rows are processed in, attention segments, rope tables ---- */
typedef struct {
    int64_t N, U;          /* patches, merged units (N / merge^2) */
    int64_t R;             /* the rows the blocks run over: N (InternVL: N and a class token a tile) */
    int32_t *perm, *inv;   /* Qwen2.5-VL: unit order by windows and its inverse (backend memory), else NULL */
    int64_t *cu_full, *cu_win; /* segments: each frame; each window (host) */
    int n_full, n_win;
    float *cos, *sin;      /* [N, hd / 2] in processing order (backend memory) */
    int32_t *down;         /* GLM-4V: [N * D] each unit's values as (channel, patch) (backend memory), else NULL */
    float *qcos, *qsin, *kcos, *ksin; /* Gemma 4: q's and k's rope tables, one row a head's half (backend memory) */
    int32_t *pos_ids;      /* Gemma 4: [2 N] the rows' position table rows: columns, then rows (host) */
    int32_t *order;        /* MoonViT: [N] the processor's row of each patch in processing order (backend memory);
                            * InternVL: [N] the block rows' row of each patch in whole merge blocks (no class tokens) */
} vis_plan;

/* keys[0..] (space-separated; the first present) of o as an int in [lo, hi], def when none is */
vc_status vis_get_int(const cJSON *o, const char *keys, int64_t def, int64_t lo, int64_t hi, int *out, const char *ctx);
/* a ViT's num_hidden_layers, hidden_size, num_attention_heads and intermediate_size (defaults as given) */
vc_status vis_parse_vit(const cJSON *o, const char *ctx, vis_cfg *c, int depth, int dim, int heads, int inter);
/* the LLaVA-style keys beside vision_config (InternVL, Mistral 3): projector_hidden_act (default GELU) into m_act, and
 * vision_feature_layer, which must be -1 (the last layer's features) */
vc_status vis_parse_projector(const cJSON *root, const char *top, vis_cfg *c);
/* the config's context for the keys beside vision_config (ctx less its ": vision_config") */
void vis_top_ctx(const char *ctx, char *top, size_t cap);
/* a family's slot names: slot k's name, its rows and columns as indexes into the family's dims (cols -1: 1-D) */
typedef struct {
    int k;
    const char *name;
    int rows, cols;
} vis_name_rule;
/* rule k of r[n]: *name and its shape from dims (*ndim 2 when it has columns); 0 when none */
int vis_rule_name(const vis_name_rule *r, size_t n, int k, const int64_t *dims, int64_t *shape, int *ndim,
                  const char **name);
/* key of o as one integer in [1, 65536] or two equal ones ([height, width] of a square), def when absent */
vc_status vis_square_key(const cJSON *o, const char *key, int def, const char *ctx, int *out);
/* o's activation key (hidden_act, ...) as a VC_ACT_* (unchanged when absent) */
vc_status vis_parse_act(const cJSON *o, const char *key, const char *ctx, int *act);
/* x W^T + b of slot k of block b with bias slot kb (-1: none), plus the slot's LoRA adapter while adapters are on */
vc_tensor *vis_lin(vc_vision *v, vc_graph *g, vc_tensor *x, int b, int k, int kb);
/* the blocks' norm (w, b: a block's slots) */
vc_tensor *vis_norm(vc_vision *v, vc_graph *g, vc_tensor *x, vc_tensor *w, vc_tensor *b);
/* block b over x [p->R, D] */
vc_tensor *vis_block(vc_vision *v, vc_graph *g, int b, vc_tensor *x, const vis_plan *p);

/* Gemma 4 (vision_gemma4.c): its keys; slot k of block b (b -1: a global) under its config (NULL: none) and its
 * shape; its rope tables; the forward from the pixel rows x [N, 3 P^2] (values in [0, 1]) on; whether slot s is a
 * buffer (never trained) and, where a random model starts it at a fixed value, that value */
vc_status vis_parse_gemma4(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c);
const char *vis_gemma4_slot(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim);
vc_status vis_plan_gemma4(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p);
vc_tensor *vis_gemma4_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p);
int vis_gemma4_buffer(const vis_cfg *c, int s, float *init);

/* p->order: the processor's patches (row by row in each frame) taken in whole merge x merge blocks, so that merged
 * rows are consecutive (MoonViT, SigLIP, Gemma 4; InternVL's past the class token (cls 1) before each tile's) */
vc_status vis_plan_order(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p, int cls);

/* GLM-4V's and Mistral 3's merge: p->down, each merged unit's values as (channel, patch in the unit) */
vc_status vis_plan_downsample(const vc_vision *v, vc_graph *g, vis_plan *p);

/* Mistral 3 (vision_pixtral.c): its keys; slot names; its rope table and merge; the forward from the pixel rows on */
vc_status vis_parse_pixtral(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c);
const char *vis_pixtral_slot(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim);
vc_status vis_plan_pixtral(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p);
vc_tensor *vis_pixtral_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p);

/* MoonViT (vision_moon.c): Kimi-VL's keys, or Kimi K2.5's (k25 1) */
vc_status vis_parse_moon(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, int k25, vis_cfg *c);

/* the blocks' rows [R, D] of tiles behind class tokens (InternVL, Llama 4): each tile's class token, then its patches
 * (x [N, D], the processor's order), plus their learned positions: the class token's the table's first row (last 0)
 * or its last (last 1, Llama 4's, whose class token follows the patches: its place among the rows does not matter,
 * attention within a tile being unordered) */
vc_tensor *vis_embed_cls(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p, int last);

/* Llama 4 (vision_llama4.c): its keys; slot names; its rope table; the forward from the patch embedding x [N, D] on */
vc_status vis_parse_llama4(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c);
const char *vis_llama4_slot(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim);
vc_status vis_plan_llama4(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p);
vc_tensor *vis_llama4_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p);

/* InternVL (vision_intern.c): its keys; the forward from the patch embedding x [N, D] on */
vc_status vis_parse_intern(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c);
vc_tensor *vis_intern_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p);

#endif
