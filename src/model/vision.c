/* The vision towers of Qwen2-VL and Qwen2.5-VL (transformers' Qwen2VisionTransformerPretrainedModel and
 * Qwen2_5_VisionTransformerPretrainedModel): a linear patch embedding (the Conv3d whose kernel is its stride), blocks
 * of bidirectional attention within each frame (Qwen2.5-VL: within windows of merged patches but in
 * fullatt_block_indexes) with a 2-D rope on the patch's row and column, an MLP (Qwen2-VL: fc1, quick_gelu, fc2;
 * Qwen2.5-VL: SwiGLU with biases), and the merger: a norm, each merge x merge block of patches as one row, two linears
 * with a GELU between. Qwen3-VL's adds learned positions and deepstack mergers; GLM-4V's (Glm4vVisionModel) an RMSNorm
 * after the patch embedding, learned positions resampled bicubically, SwiGLU blocks without biases, an RMSNorm, the
 * Conv2d downsample over each merge x merge block and a merger of a linear, LayerNorm, GELU and a SwiGLU MLP.
 * Kimi-VL's MoonViT (its remote code's MoonVitPretrainedModel and KimiVLMultiModalProjector): a Conv2d patch embedding
 * plus learned positions resampled bicubically (F.interpolate), blocks of LayerNorm, fused wqkv with a 2-D rope on
 * interleaved pairs (column, row), GELU-tanh MLP, a final LayerNorm and Qwen2-VL's merger shape (a LayerNorm per
 * patch, merge x merge patches as one row, two linears with a GELU between); its processor gives the patches row by
 * row, so the tower reorders them into whole merged blocks first. Gemma 3's SigLIP tower (SiglipVisionModel and
 * Gemma3MultiModalProjector): a Conv2d patch embedding plus one learned position per patch of its fixed image size,
 * LayerNorm blocks with q, k and v apart and a GELU-tanh MLP, a post LayerNorm, then average pooling over k x k blocks,
 * Gemma's RMSNorm and a projection matrix [D, text hidden]. Built from the tape's ops, so its backward is theirs. */
#include "verlc/vision.h"
#include "verlc/json.h"
#include "verlc/ops.h"
#include "verlc/safetensors.h"
#include "model_internal.h"
#include "tensor/graph_priv.h"
#include "vision_priv.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

vc_status vis_get_int(const cJSON *o, const char *keys, int64_t def, int64_t lo, int64_t hi, int *out,
                         const char *ctx) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", keys);
    int64_t v = def;
    for (char *k = strtok(buf, " "); k; k = strtok(NULL, " "))
        if (vc_json_member(o, k)) {
            vc_status st = vc_json_get_int(o, k, def, &v, ctx);
            if (st) return st;
            if (v < lo || v > hi)
                return vc_fail(VC_ERR_FORMAT, "%s: key '%s' is %lld, outside [%lld, %lld]", ctx, k, (long long)v,
                               (long long)lo, (long long)hi);
            break;
        }
    *out = (int)v;
    return VC_OK;
}

vc_status vis_parse_vit(const cJSON *o, const char *ctx, vis_cfg *c, int depth, int dim, int heads, int inter) {
    vc_status st = vis_get_int(o, "num_hidden_layers", depth, 1, VIS_MAX_DEPTH, &c->depth, ctx);
    if (!st) st = vis_get_int(o, "hidden_size", dim, 2, 1 << 16, &c->dim, ctx);
    if (!st) st = vis_get_int(o, "num_attention_heads", heads, 1, 1024, &c->heads, ctx);
    return st ? st : vis_get_int(o, "intermediate_size", inter, 1, 1 << 20, &c->inter, ctx);
}

vc_status vis_parse_projector(const cJSON *root, const char *top, vis_cfg *c) {
    int64_t layer = -1;
    c->m_act = VC_ACT_GELU_ERF;
    vc_status st = vis_parse_act(root, "projector_hidden_act", top, &c->m_act);
    if (!st && cJSON_IsArray(vc_json_member(root, "vision_feature_layer")))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'vision_feature_layer' is a list (features of several layers are "
                       "not built; -1 is)", top);
    if (!st) st = vc_json_get_int(root, "vision_feature_layer", -1, &layer, top);
    if (!st && layer != -1)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'vision_feature_layer' is %lld (the last layer's features, -1, are "
                       "built)", top, (long long)layer);
    return st;
}

void vis_top_ctx(const char *ctx, char *top, size_t cap) {
    size_t n = strlen(ctx), k = strlen(": vision_config");
    snprintf(top, cap, "%.*s", (int)(n >= k ? n - k : n), ctx);
}

int vis_rule_name(const vis_name_rule *r, size_t n, int k, const int64_t *dims, int64_t *shape, int *ndim,
                  const char **name) {
    for (size_t i = 0; i < n; i++)
        if (r[i].k == k) {
            shape[0] = dims[r[i].rows];
            if (r[i].cols >= 0) shape[1] = dims[r[i].cols], *ndim = 2;
            *name = r[i].name;
            return 1;
        }
    return 0;
}

vc_status vis_square_key(const cJSON *o, const char *key, int def, const char *ctx, int *out) {
    const cJSON *v = vc_json_member(o, key);
    *out = def;
    if (!v) return VC_OK;
    if (cJSON_IsArray(v)) {
        const cJSON *a = cJSON_GetArrayItem(v, 0), *b = cJSON_GetArrayItem(v, 1);
        if (cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble != b->valuedouble)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: key '%s' must be one integer or two equal ones (a square)", ctx,
                           key);
        v = a;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1 << 16)
        return vc_fail(VC_ERR_FORMAT, "%s: key '%s' is not an integer in [1, 65536]", ctx, key);
    *out = (int)v->valuedouble;
    return VC_OK;
}

vc_status vis_parse_act(const cJSON *o, const char *key, const char *ctx, int *act) {
    const char *a = NULL;
    vc_status st = vc_json_get_str(o, key, NULL, &a, ctx);
    if (st) return st;
    if (!a) return VC_OK;
    if (!strcmp(a, "quick_gelu")) *act = VC_ACT_QUICK_GELU;
    else if (!strcmp(a, "silu") || !strcmp(a, "swish")) *act = VC_ACT_SILU;
    else if (!strcmp(a, "gelu")) *act = VC_ACT_GELU_ERF;
    else if (!strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_new")) *act = VC_ACT_GELU_TANH;
    else return vc_fail(VC_ERR_UNSUPPORTED, "%s: %s '%s' is not supported", ctx, key, a);
    return VC_OK;
}

/* Qwen3-VL: the learned positions (a square count) and the deepstack blocks (ascending, below the depth) */
static vc_status parse_qwen3(const cJSON *o, int deep, const char *ctx, vis_cfg *c) {
    vc_status st = vis_get_int(o, "num_position_embeddings", 2304, 1, 1 << 22, &c->n_pos, ctx);
    if (st) return st;
    c->side = (int)(sqrt((double)c->n_pos) + 0.5);
    if (c->side * c->side != c->n_pos)
        return vc_fail(VC_ERR_FORMAT, "%s: key 'num_position_embeddings' is %d, not a square", ctx, c->n_pos);
    const cJSON *d = deep ? vc_json_member(o, "deepstack_visual_indexes") : NULL, *e; /* (Qwen3.5: none) */
    if (d && !cJSON_IsArray(d)) return vc_fail(VC_ERR_FORMAT, "%s: key 'deepstack_visual_indexes': expected a list", ctx);
    cJSON_ArrayForEach(e, d) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble < c->depth) || e->valuedouble != floor(e->valuedouble) ||
            c->n_deep >= VIS_MAX_DEEP || (c->n_deep && e->valuedouble <= c->deep[c->n_deep - 1]))
            return vc_fail(VC_ERR_FORMAT, "%s: key 'deepstack_visual_indexes': entries must be ascending block indexes "
                           "(at most %d)", ctx, VIS_MAX_DEEP);
        c->deep[c->n_deep++] = (int)e->valuedouble;
    }
    return VC_OK;
}

/* GLM-4V: learned positions of an (image_size / patch_size)^2 square, the norms' epsilon, attn.qkv's bias; its blocks'
 * SwiGLU is out_hidden_size wide (transformers' Glm4VisionMlp), intermediate_size is the merger's */
static vc_status parse_glm(const cJSON *o, const char *ctx, vis_cfg *c) {
    int image = 336;
    double eps = 1e-5;
    vc_status st = vis_get_int(o, "image_size", 336, 1, 1 << 20, &image, ctx);
    if (!st) st = vc_json_get_num(o, "rms_norm_eps", 1e-5, &eps, ctx);
    if (!st) st = vc_json_get_bool(o, "attention_bias", 0, &c->qkv_bias, ctx);
    if (st) return st;
    if (!(eps > 0 && eps < 1)) return vc_fail(VC_ERR_FORMAT, "%s: key 'rms_norm_eps' is %g, outside (0, 1)", ctx, eps);
    c->m_inter = c->inter, c->inter = c->out, c->eps = (float)eps;
    c->side = c->side_w = image / c->patch, c->n_pos = c->side * c->side;
    if (c->side < 1)
        return vc_fail(VC_ERR_FORMAT, "%s: image_size %d is under one patch of %d: no learned positions", ctx, image,
                       c->patch);
    return VC_OK;
}

/* Gemma 3's SigLIP (vision_config siglip_vision_model): images of image_size pixels, one learned position per patch,
 * the projector's average pooling to mm_tokens_per_image tokens (a square dividing the patch grid's side) */
static vc_status parse_siglip(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c) {
    int image = 896, tokens = 256;
    double eps = 1e-6;
    vc_status st = vis_parse_vit(o, ctx, c, 27, 1152, 16, 4304);
    if (!st) st = vis_get_int(o, "patch_size", 14, 1, 1024, &c->patch, ctx);
    if (!st) st = vis_get_int(o, "image_size", 896, 1, 1 << 16, &image, ctx);
    if (!st) st = vis_get_int(o, "num_channels", 3, 3, 3, &c->in_ch, ctx);
    if (!st) st = vc_json_get_num(o, "layer_norm_eps", 1e-6, &eps, ctx);
    char top[640]; /* (a key beside vision_config) */
    vis_top_ctx(ctx, top, sizeof top);
    if (!st) st = vis_get_int(root, "mm_tokens_per_image", 256, 1, 1 << 20, &tokens, top);
    c->act = VC_ACT_GELU_TANH;
    if (!st) st = vis_parse_act(o, "hidden_act", ctx, &c->act);
    if (st) return st;
    int side = image / c->patch, ts = (int)(sqrt((double)tokens) + 0.5);
    if (!(eps > 0 && eps < 1)) return vc_fail(VC_ERR_FORMAT, "%s: key 'layer_norm_eps' is %g, outside (0, 1)", ctx, eps);
    if (side < 1 || ts * ts != tokens || side % ts)
        return vc_fail(VC_ERR_FORMAT, "%s: mm_tokens_per_image %d is not a square whose side divides the %d x %d patches of "
                       "image_size %d", ctx, tokens, side, side, image);
    c->side = c->side_w = side, c->n_pos = side * side, c->merge = side / ts, c->tpatch = 1, c->out = (int)text_hidden;
    c->eps = (float)eps;
    memset(c->full, 1, sizeof c->full);
    return VC_OK;
}

static vc_status parse_full(const cJSON *o, const char *ctx, vis_cfg *c) {
    const cJSON *f = vc_json_member(o, "fullatt_block_indexes"), *e;
    if (c->kind != VIS_QWEN25) {
        memset(c->full, 1, sizeof c->full);
        return VC_OK;
    }
    if (!f) { /* transformers' default (7, 15, 23, 31) */
        for (int i = 7; i < VIS_MAX_DEPTH; i += 8) c->full[i] = 1;
        return VC_OK;
    }
    if (!cJSON_IsArray(f)) return vc_fail(VC_ERR_FORMAT, "%s: key 'fullatt_block_indexes': expected a list", ctx);
    cJSON_ArrayForEach(e, f) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble <= 1e6) || e->valuedouble != floor(e->valuedouble))
            return vc_fail(VC_ERR_FORMAT, "%s: key 'fullatt_block_indexes': an entry is not a block index", ctx);
        if (e->valuedouble < c->depth) c->full[(int)e->valuedouble] = 1; /* (those past the depth name no block) */
    }
    return VC_OK;
}

/* the tower of a model type (VIS_*), -1 when verlc builds none for it; *deep 0: it has no deepstack mergers (Qwen3.5's
 * tower is Qwen3-VL's without them) */
static int tower_kind_deep(const char *mt, int *deep) {
    static const struct { const char *type; int kind, deep; } T[] = {
        { "qwen2_vl", VIS_QWEN2, 0 }, { "qwen2_5_vl", VIS_QWEN25, 0 }, { "qwen3_vl", VIS_QWEN3, 1 },
        { "qwen3_vl_moe", VIS_QWEN3, 1 }, { "qwen3_5", VIS_QWEN3, 0 }, { "qwen3_5_moe", VIS_QWEN3, 0 },
        { "glm4v", VIS_GLM4V, 0 }, { "glm4v_moe", VIS_GLM4V, 0 }, { "glm46v", VIS_GLM4V, 0 }, { "kimi_vl", VIS_MOON, 0 },
        { "kimi_k25", VIS_MOON, 0 },
        { "gemma3", VIS_SIGLIP, 0 }, { "internvl", VIS_INTERN, 0 }, { "gemma4", VIS_GEMMA4, 0 },
        { "mistral3", VIS_PIXTRAL, 0 }, { "llama4", VIS_LLAMA4, 0 } };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(mt, T[i].type)) return *deep = T[i].deep, T[i].kind;
    return -1;
}

static int tower_kind(const char *mt) {
    int deep;
    return tower_kind_deep(mt, &deep);
}

int vc_vision_model_type(const char *model_type) { return tower_kind(model_type) >= 0; }

/* the Qwen-VL towers' and GLM-4V's keys (each kind's defaults) */
static vc_status parse_qwen_glm(const cJSON *o, const vc_model *m, const char *ctx, vis_cfg *c) {
    vc_status st = VC_OK;
    const char *mt = m->cfg.model_type;
    int q2 = c->kind == VIS_QWEN2, q3 = c->kind == VIS_QWEN3, glm = c->kind == VIS_GLM4V, ratio = 4;
    c->act = q2 ? VC_ACT_QUICK_GELU : q3 ? VC_ACT_GELU_TANH : VC_ACT_SILU;
    c->eps = 1e-6f;
    if (!st) st = vis_get_int(o, "depth", glm ? 24 : 32, 1, VIS_MAX_DEPTH, &c->depth, ctx);
    if (!st) st = vis_get_int(o, q2 ? "embed_dim" : "hidden_size", glm ? 1536 : 1280, 2, 1 << 16, &c->dim, ctx);
    if (!st) st = vis_get_int(o, "num_heads", glm ? 12 : 16, 1, 1024, &c->heads, ctx);
    if (!st && q2) st = vis_get_int(o, "mlp_ratio", 4, 1, 64, &ratio, ctx);
    int64_t inter = q2 ? (int64_t)c->dim * ratio : glm ? 13696 : 3420;
    if (!st) st = vis_get_int(o, "intermediate_size", inter, 1, 1 << 20, &c->inter, ctx);
    if (!st && q2) c->inter = c->dim * ratio;
    if (!st) st = vis_get_int(o, q2 ? "hidden_size" : "out_hidden_size", m->cfg.hidden, 1, 1 << 20, &c->out, ctx);
    if (!st) st = vis_get_int(o, "patch_size spatial_patch_size", q3 ? 16 : 14, 1, 1024, &c->patch, ctx);
    int deep = 0;
    tower_kind_deep(mt, &deep);
    if (!st && q3) st = parse_qwen3(o, deep, ctx, c);
    if (!st && glm) st = parse_glm(o, ctx, c);
    if (!st) st = vis_get_int(o, "temporal_patch_size", 2, 1, 64, &c->tpatch, ctx);
    if (!st) st = vis_get_int(o, "spatial_merge_size", 2, 1, 64, &c->merge, ctx);
    if (!st) st = vis_get_int(o, "in_channels in_chans", 3, 1, 64, &c->in_ch, ctx);
    if (!st && c->kind == VIS_QWEN25) st = vis_get_int(o, "window_size", 112, 1, 1 << 20, &c->window, ctx);
    if (!st && c->kind == VIS_QWEN25) st = vis_get_int(o, "tokens_per_second", 4, 1, 1 << 20, &c->tps, ctx);
    if (!st) st = vis_parse_act(o, "hidden_act", ctx, &c->act);
    if (!st) st = parse_full(o, ctx, c);
    c->theta = 10000.0;
    const cJSON *rp = vc_json_member(o, "rope_parameters");
    if (!st && rp) st = vc_json_get_num(rp, "rope_theta", 10000.0, &c->theta, ctx);
    return st;
}

static vc_status parse_cfg(const vc_model *m, vis_cfg *c) {
    char ctx[600];
    cJSON *root = NULL;
    snprintf(ctx, sizeof ctx, "%s%sconfig.json: vision_config", m->dir ? m->dir : "", m->dir ? "/" : "");
    if (!m->config_text) return vc_fail(VC_ERR_MISSING, "%s: config.json was not kept", m->dir);
    vc_status st = vc_json_parse(m->config_text, strlen(m->config_text), ctx, &root);
    if (st) return st;
    const cJSON *o = vc_json_member(root, "vision_config");
    const char *mt = m->cfg.model_type;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(o)) st = vc_fail(VC_ERR_MISSING, "%s: key 'vision_config' is missing", ctx);
    else if ((c->kind = tower_kind(mt)) < 0) st = vc_fail(VC_ERR_UNSUPPORTED, "%s: image inputs of model_type '%s' are not built (Qwen2-VL, Qwen2.5-VL, "
                      "Qwen3-VL, Qwen3-VL-MoE, Qwen3.5, Qwen3.5-MoE, GLM-4V, Kimi-VL, Kimi K2.5, Gemma 3, Gemma 4, InternVL, Mistral 3 and Llama 4 are)", m->dir, mt);
    if (!st)
        st = c->kind == VIS_MOON     ? vis_parse_moon(o, root, m->cfg.hidden, ctx, !strcmp(mt, "kimi_k25"), c)
             : c->kind == VIS_SIGLIP ? parse_siglip(o, root, m->cfg.hidden, ctx, c)
             : c->kind == VIS_INTERN ? vis_parse_intern(o, root, m->cfg.hidden, ctx, c)
             : c->kind == VIS_GEMMA4 ? vis_parse_gemma4(o, root, m->cfg.hidden, ctx, c)
             : c->kind == VIS_PIXTRAL ? vis_parse_pixtral(o, root, m->cfg.hidden, ctx, c)
             : c->kind == VIS_LLAMA4 ? vis_parse_llama4(o, root, m->cfg.hidden, ctx, c)
                                     : parse_qwen_glm(o, m, ctx, c);
    /* (the towers without rope take any head width; Gemma 4's heads have their own) */
    if (!st && c->kind != VIS_GEMMA4 && c->kind != VIS_PIXTRAL && c->kind != VIS_LLAMA4 &&
        (c->dim % c->heads || ((c->dim / c->heads) % 4 && c->kind != VIS_SIGLIP && c->kind != VIS_INTERN)))
        st = vc_fail(VC_ERR_FORMAT, "%s: width %d over %d heads is not a multiple of 4 per head", ctx, c->dim, c->heads);
    if (!st && c->out != m->cfg.hidden)
        st = vc_fail(VC_ERR_FORMAT, "%s: the merger's output width %d is not the text model's hidden size %lld", ctx,
                     c->out, (long long)m->cfg.hidden);
    if (!st && c->kind == VIS_QWEN25 && c->window % (c->merge * c->patch))
        st = vc_fail(VC_ERR_FORMAT, "%s: window_size %d is not a multiple of merge x patch (%d)", ctx, c->window,
                     c->merge * c->patch);
    if (c->kind != VIS_GEMMA4) c->hd = c->heads ? c->dim / c->heads : 0;
    if (c->kind == VIS_SIGLIP) c->bidi = 1; /* (Gemma 3's image runs attend both ways in every layer) */
    cJSON_Delete(root);
    return st;
}

/* whether InternVL's tower has slot k of block b (or global k: b -1) under its config */
static int intern_has(const vis_cfg *c, int b, int k) {
    if (b >= 0) return !((k == B_N1B || k == B_N2B) && c->rms) && !((k == B_QKVB || k == B_KB || k == B_VB) && !c->qkv_bias) &&
                       !((k == B_QN || k == B_KN) && !c->qk_norm);
    return !((k == G_POST || k == G_POSTB) && !c->post_ln) && !(k == G_POS && !c->n_pos);
}

/* the checkpoint's name of slot k of block b (b -1: a global; b -2 - j: deepstack merger j), its shape; NULL: the kind
 * has no such tensor */
static const char *slot_name(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim) {
    static const char *const BQ2[B_COUNT] = { "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "attn.qkv.weight",
        "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
        "mlp.fc2.bias", NULL, NULL };
    static const char *const BQ25[B_COUNT] = { "norm1.weight", NULL, "norm2.weight", NULL, "attn.qkv.weight",
        "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias", "mlp.gate_proj.weight", "mlp.gate_proj.bias",
        "mlp.up_proj.weight", "mlp.up_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias" };
    static const char *const BQ3[B_COUNT] = { "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "attn.qkv.weight",
        "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias", "mlp.linear_fc1.weight", "mlp.linear_fc1.bias",
        "mlp.linear_fc2.weight", "mlp.linear_fc2.bias", NULL, NULL };
    static const char *const G[G_COUNT] = { "patch_embed.proj.weight", "merger.ln_q.weight", "merger.ln_q.bias",
        "merger.mlp.0.weight", "merger.mlp.0.bias", "merger.mlp.2.weight", "merger.mlp.2.bias", NULL, NULL };
    static const char *const G3[G_COUNT] = { "patch_embed.proj.weight", "merger.norm.weight", "merger.norm.bias",
        "merger.linear_fc1.weight", "merger.linear_fc1.bias", "merger.linear_fc2.weight", "merger.linear_fc2.bias",
        "patch_embed.proj.bias", "pos_embed.weight" };
    static const char *const DS[D_COUNT] = { "norm.weight", "norm.bias", "linear_fc1.weight", "linear_fc1.bias",
        "linear_fc2.weight", "linear_fc2.bias" };
    static const char *const BG[B_COUNT] = { "norm1.weight", NULL, "norm2.weight", NULL, "attn.qkv.weight",
        "attn.qkv.bias", "attn.proj.weight", NULL, "mlp.gate_proj.weight", NULL, "mlp.up_proj.weight", NULL,
        "mlp.down_proj.weight", NULL };
    static const char *const GG[G_COUNT] = { "patch_embed.proj.weight", "merger.post_projection_norm.weight",
        "merger.post_projection_norm.bias", NULL, NULL, NULL, NULL, "patch_embed.proj.bias",
        "embeddings.position_embedding.weight", "post_conv_layernorm.weight", "post_layernorm.weight",
        "downsample.weight", "downsample.bias", "merger.proj.weight", "merger.gate_proj.weight",
        "merger.up_proj.weight", "merger.down_proj.weight" };
    /* MoonViT: under vision_tower. (the projector's names are whole) */
    static const char *const BM[B_COUNT] = { "norm0.weight", "norm0.bias", "norm1.weight", "norm1.bias", "wqkv.weight",
        "wqkv.bias", "wo.weight", "wo.bias", "mlp.fc0.weight", "mlp.fc0.bias", "mlp.fc1.weight", "mlp.fc1.bias" };
    static const char *const GM[G_COUNT] = { "patch_embed.proj.weight", "multi_modal_projector.pre_norm.weight",
        "multi_modal_projector.pre_norm.bias", "multi_modal_projector.linear_1.weight",
        "multi_modal_projector.linear_1.bias", "multi_modal_projector.linear_2.weight",
        "multi_modal_projector.linear_2.bias", "patch_embed.proj.bias", "patch_embed.pos_emb.weight", NULL,
        "encoder.final_layernorm.weight", [G_POSTB] = "encoder.final_layernorm.bias" };
    /* Kimi K2.5's MoonViT: Kimi-VL's names beside its mm_projector */
    static const char *const GK[G_COUNT] = { "patch_embed.proj.weight", "mm_projector.pre_norm.weight",
        "mm_projector.pre_norm.bias", "mm_projector.proj.0.weight", "mm_projector.proj.0.bias",
        "mm_projector.proj.2.weight", "mm_projector.proj.2.bias", "patch_embed.proj.bias", "patch_embed.pos_emb.weight",
        NULL, "encoder.final_layernorm.weight", [G_POSTB] = "encoder.final_layernorm.bias" };
    /* SigLIP: under vision_tower. (hub: vision_tower.vision_model.); the projector's names are whole */
    static const char *const BS[B_COUNT] = { "layer_norm1.weight", "layer_norm1.bias", "layer_norm2.weight",
        "layer_norm2.bias", "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias", NULL, NULL,
        "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias" };
    static const char *const GS[G_COUNT] = { "embeddings.patch_embedding.weight",
        "multi_modal_projector.mm_soft_emb_norm.weight", NULL, "multi_modal_projector.mm_input_projection_weight", NULL,
        NULL, NULL, "embeddings.patch_embedding.bias", "embeddings.position_embedding.weight", NULL,
        "post_layernorm.weight", [G_POSTB] = "post_layernorm.bias" };
    /* InternVL: under vision_tower. (transformers 5: model.vision_tower.); the projector's names are whole */
    static const char *const BI[B_COUNT] = { "layernorm_before.weight", "layernorm_before.bias", "layernorm_after.weight",
        "layernorm_after.bias", "attention.q_proj.weight", "attention.q_proj.bias", "attention.projection_layer.weight",
        "attention.projection_layer.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias", NULL, NULL,
        "attention.k_proj.weight", "attention.k_proj.bias", "attention.v_proj.weight", "attention.v_proj.bias",
        "lambda_1", "lambda_2", "attention.q_norm.weight", "attention.k_norm.weight" };
    static const char *const GI[G_COUNT] = { "embeddings.patch_embeddings.projection.weight",
        "multi_modal_projector.layer_norm.weight", "multi_modal_projector.layer_norm.bias",
        "multi_modal_projector.linear_1.weight", "multi_modal_projector.linear_1.bias",
        "multi_modal_projector.linear_2.weight", "multi_modal_projector.linear_2.bias",
        "embeddings.patch_embeddings.projection.bias", "embeddings.position_embeddings", NULL, "layernorm.weight",
        [G_POSTB] = "layernorm.bias", [G_CLS] = "embeddings.cls_token" };
    if (c->kind == VIS_GEMMA4) return vis_gemma4_slot(c, b, k, shape, ndim);
    if (c->kind == VIS_PIXTRAL) return vis_pixtral_slot(c, b, k, shape, ndim);
    if (c->kind == VIS_LLAMA4) return vis_llama4_slot(c, b, k, shape, ndim);
    int q25 = c->kind == VIS_QWEN25, q3 = c->kind == VIS_QWEN3, glm = c->kind == VIS_GLM4V, sw = q25 || glm;
    int moon = c->kind == VIS_MOON, sig = c->kind == VIS_SIGLIP, in = c->kind == VIS_INTERN;
    int64_t D = c->dim, I = c->inter, M = (int64_t)c->dim * c->merge * c->merge, O = c->out, MI = c->m_inter;
    const char *n = b >= 0    ? (in ? BI : sig ? BS : moon ? BM : glm ? BG : q25 ? BQ25 : q3 ? BQ3 : BQ2)[k]
                    : b == -1 ? (in ? GI : sig ? GS : moon ? (c->k25 ? GK : GM) : glm ? GG : q3 ? G3 : G)[k] : DS[k];
    if (!n || (b == -1 && k == G_LNB && q25) || (b >= 0 && k == B_QKVB && glm && !c->qkv_bias)) return NULL;
    if (in && !intern_has(c, b, k)) return NULL;
    *ndim = 1;
    if (b >= 0) {
        /* q2's / q3's MLP: fc1 [I, D], fc2 [D, I]; q25's and GLM-4V's: gate, up [I, D], down [D, I] */
        int64_t Q = sig || in ? D : 3 * D;
        int64_t rows[B_COUNT] = { D, D, D, D, Q, Q, D, D, I, I, sw ? I : D, sw ? I : D, D, D, D, D, D, D, D, D, D, D };
        int64_t cols[B_COUNT] = { 0, 0, 0, 0, D, 0, D, 0, D, 0, sw ? D : I, 0, I, 0, D, 0, D, 0, 0, 0, 0, 0 };
        shape[0] = rows[k];
        if (cols[k]) { shape[1] = cols[k]; *ndim = 2; }
        return n;
    }
    if (b < -1) { /* a deepstack merger: its norm over the merged rows */
        int64_t rows[D_COUNT] = { M, M, M, M, c->out, c->out }, cols[D_COUNT] = { 0, 0, M, 0, M, 0 };
        shape[0] = rows[k];
        if (cols[k]) { shape[1] = cols[k]; *ndim = 2; }
        return n;
    }
    /* GLM-4V's merger norm is over its output width; its downsample's kernels are rows of (channel, row, column) */
    /* (SigLIP's projection matrix in G_FC0 as the linear reads it, [O, D]: the checkpoint's [D, O] transposed) */
    /* (InternVL's projector: its norm over the merged rows, linear_1 [O, M], linear_2 [O, O]; its class token [1, D]) */
    int64_t rows[G_COUNT] = { D, glm ? O : in ? M : D, glm ? O : in ? M : D, sig || in ? O : M, in ? O : M, O, O, D,
                              c->n_pos, D, D, O, O, O, MI, MI, O, D, 1 };
    int64_t cols[G_COUNT] = { (int64_t)c->in_ch * c->tpatch * c->patch * c->patch, 0, 0, sig ? D : M, 0, in ? O : M, 0, 0,
                              D, 0, 0, M, 0, O, O, O, MI, 0, D };
    shape[0] = rows[k];
    if (cols[k]) { shape[1] = cols[k]; *ndim = 2; }
    return n;
}

/* the prefixes a tower tensor's name may have (NULL-terminated; the first is the hub's, the last transformers 5's):
 * MoonViT's under vision_tower.; SigLIP's under vision_tower.vision_model. (hub), vision_tower. or model.vision_tower.;
 * their projectors' names whole (or under model.); the others' under visual. (hub) or model.visual. (transformers 5) */
static const char *const *prefixes(int kind, const char *n) {
    static const char *const MOON[] = { "vision_tower.", NULL }, *const WHOLE[] = { "", "model.", NULL };
    static const char *const SIG[] = { "vision_tower.vision_model.", "vision_tower.", "model.vision_tower.vision_model.",
                                       "model.vision_tower.", NULL };
    static const char *const QWEN[] = { "visual.", "model.visual.", NULL };
    static const char *const INTERN[] = { "vision_tower.", "model.vision_tower.", NULL };
    static const char *const GEMMA4[] = { "model.vision_tower.", NULL }, *const MODEL[] = { "model.", NULL };
    static const char *const PIXTRAL[] = { "vision_tower.", "model.vision_tower.", NULL };
    static const char *const LLAMA4[] = { "vision_model.", NULL }; /* (at the top in transformers 5 too) */
    if (!strncmp(n, "multi_modal_projector.", 22)) return WHOLE;
    if (!strncmp(n, "mm_projector.", 13)) return WHOLE;
    if (!strncmp(n, "embed_vision.", 13)) return MODEL;
    return kind == VIS_MOON ? MOON : kind == VIS_SIGLIP ? SIG : kind == VIS_INTERN ? INTERN : kind == VIS_GEMMA4 ? GEMMA4
           : kind == VIS_PIXTRAL ? PIXTRAL : kind == VIS_LLAMA4 ? LLAMA4 : QWEN;
}

/* the name `verlc init` writes: the last prefix (transformers 5's) of a nested-text config, else the first (MoonViT's
 * and Llama 4's: their names are the same in both) */
static const char *prefix(int kind, const char *n, int nested) {
    const char *const *p = prefixes(kind, n);
    int last = 0;
    while (p[last + 1]) last++;
    return nested && kind != VIS_MOON && kind != VIS_LLAMA4 ? p[last] : p[0];
}

static const vc_st_tensor *find(const vc_checkpoint *ck, int kind, const char *n, char *full, size_t cap) {
    for (const char *const *p = prefixes(kind, n); *p; p++) {
        snprintf(full, cap, "%s%s", *p, n);
        const vc_st_tensor *t = vc_ckpt_find(ck, full);
        if (t) return t;
    }
    snprintf(full, cap, "%s%s", prefix(kind, n, 0), n);
    return NULL;
}

/* whether slot s is kept transposed against the checkpoint (SigLIP's projection matrix [D, O], read as a linear's) */
static int slot_transposed(const vis_cfg *c, int s) { return c->kind == VIS_SIGLIP && s == slot_index(c, -1, G_FC0); }

static vc_status check_shape(const vc_model *m, const vc_st_tensor *t, const char *name, const int64_t *shape, int nd,
                             int tr) {
    int64_t want = shape[0] * (nd > 1 ? shape[1] : 1), have = vc_st_tensor_numel(t);
    if (tr) {
        if (t->ndim == 2 && t->shape[0] == shape[1] && t->shape[1] == shape[0]) return VC_OK;
        return vc_fail(VC_ERR_SHAPE, "%s: tensor '%s' is not [%lld, %lld]", m->dir, name, (long long)shape[1],
                       (long long)shape[0]);
    }
    /* the patch embedding is a Conv3d weight [D, C, T, P, P]: its rows are the flattened kernels */
    if (have == want && t->ndim >= 1 && t->shape[0] == shape[0] && (nd == 2 || t->ndim == 1)) return VC_OK;
    /* MoonViT's learned positions: [height, width, D] (Gemma 4's [2, S, D]) */
    if (have == want && nd == 2 && t->ndim == 3 && t->shape[0] * t->shape[1] == shape[0]) return VC_OK;
    if (have == 1 && want == 1 && t->ndim == 0) return VC_OK; /* a scalar (Gemma 4's clip bounds) */
    if (have == want && nd == 2 && shape[0] == 1 && t->ndim == 1) return VC_OK; /* one row as a vector (Llama 4's class token) */
    return vc_fail(VC_ERR_SHAPE, "%s: tensor '%s' has %lld values in %d dims; vision_config implies [%lld%s%lld]",
                   m->dir, name, (long long)have, t->ndim, (long long)shape[0], nd > 1 ? ", " : "",
                   nd > 1 ? (long long)shape[1] : 0LL);
}

/* the tower's tensors: names as the checkpoint has them (ck; with none, as transformers writes them) and shapes */
static vc_status list_tensors(vc_vision *v, const vc_model *m, const vc_checkpoint *ck) {
    int slots = n_slots(&v->c);
    v->t = vc_calloc((size_t)slots, sizeof *v->t);
    v->shape = vc_calloc((size_t)slots, sizeof *v->shape);
    v->nd = vc_calloc((size_t)slots, sizeof *v->nd);
    v->name = vc_calloc((size_t)slots, sizeof *v->name);
    v->slot_of = vc_calloc((size_t)slots, sizeof *v->slot_of);
    if (!v->t || !v->shape || !v->nd || !v->name || !v->slot_of) return VC_ERR_NOMEM;
    for (int s = 0; s < slots; s++) {
        int b, k, nd;
        slot_bk(&v->c, s, &b, &k);
        int64_t shape[2];
        const char *n = slot_name(&v->c, b, k, shape, &nd);
        if (!n) continue;
        char rel[80], full[96];
        if (b >= 0)
            snprintf(rel, sizeof rel, "%s.%d.%s", v->c.kind == VIS_MOON ? "encoder.blocks" : v->c.kind == VIS_SIGLIP ||
                     v->c.kind == VIS_GEMMA4 ? "encoder.layers" : v->c.kind == VIS_INTERN ? "encoder.layer"
                     : v->c.kind == VIS_PIXTRAL ? "transformer.layers" : v->c.kind == VIS_LLAMA4 ? "model.layers"
                     : "blocks", b, n);
        else if (b == -1) snprintf(rel, sizeof rel, "%s", n);
        else snprintf(rel, sizeof rel, "deepstack_merger_list.%d.%s", -2 - b, n);
        if (ck) {
            const vc_st_tensor *src = find(ck, v->c.kind, rel, full, sizeof full);
            if (!src) return vc_fail(VC_ERR_MISSING, "%s: tensor '%s' of the vision tower is missing", m->dir, full);
            vc_status st = check_shape(m, src, full, shape, nd, slot_transposed(&v->c, s));
            if (st) return st;
        } else snprintf(full, sizeof full, "%s%s", prefix(v->c.kind, rel, m->cfg.nested_text), rel);
        snprintf(v->name[v->n], sizeof v->name[0], "%s", full);
        memcpy(v->shape[v->n], shape, sizeof shape);
        v->nd[v->n] = nd;
        v->slot_of[v->n++] = s;
    }
    return VC_OK;
}

/* the patch embedding's name: whether a checkpoint has the tower */
static const char *probe_name(int kind) {
    return kind == VIS_SIGLIP   ? "embeddings.patch_embedding.weight"
           : kind == VIS_INTERN ? "embeddings.patch_embeddings.projection.weight"
           : kind == VIS_GEMMA4 ? "patch_embedder.input_proj.weight"
           : kind == VIS_PIXTRAL ? "patch_conv.weight"
           : kind == VIS_LLAMA4 ? "patch_embedding.linear.weight"
                                : "patch_embed.proj.weight";
}

vc_status vc_vision_plan(vc_model *m, const vc_checkpoint *ck) {
    char full[96];
    int kind = tower_kind(m->cfg.model_type);
    if (kind < 0 || !m->config_text || !strstr(m->config_text, "\"vision_config\"")) return VC_OK;
    if (ck && !find(ck, kind, probe_name(kind), full,
                    sizeof full))
        return VC_OK; /* a text-only export */
    vc_vision *v = vc_calloc(1, sizeof *v);
    if (!v) return VC_ERR_NOMEM;
    v->be = vc_be();
    vc_status st = parse_cfg(m, &v->c);
    if (!st) st = list_tensors(v, m, ck);
    if (st) {
        vc_vision_free(v);
        return st;
    }
    if (v->c.kind == VIS_GEMMA4 && v->c.clipped) { /* (unbounded until the checkpoint's bounds are read) */
        if (!(v->clip = vc_malloc(sizeof(float) * 28 * (size_t)v->c.depth))) {
            vc_vision_free(v);
            return VC_ERR_NOMEM;
        }
        for (int i = 0; i < 28 * v->c.depth; i++) v->clip[i] = i % 2 ? INFINITY : -INFINITY;
    }
    v->m = m;
    m->vision = v;
    return VC_OK;
}

const char *vc_vision_peft_exclude(const vc_vision *v) {
    return v->c.kind == VIS_GEMMA4 ? ".*vision_tower\\..*\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
                                   : NULL;
}

int vc_vision_buffer(const vc_vision *v, int i, float *init) {
    return v->c.kind == VIS_GEMMA4 && vis_gemma4_buffer(&v->c, v->slot_of[i], init);
}

int vc_vision_shape(const vc_vision *v, int i, int64_t *shape) {
    memcpy(shape, v->shape[i], sizeof v->shape[i]);
    return v->nd[i];
}

void vc_vision_bind(vc_vision *v, int i, vc_tensor *t) { v->t[v->slot_of[i]] = t; }

int vc_vision_transposed(const vc_vision *v, int i, int64_t *rows, int64_t *cols) {
    if (!slot_transposed(&v->c, v->slot_of[i])) return 0;
    *rows = v->shape[i][0], *cols = v->shape[i][1];
    return 1;
}

int vc_vision_hf_shape(const vc_vision *v, int i, int64_t *shape) {
    if (slot_transposed(&v->c, v->slot_of[i])) {
        shape[0] = v->shape[i][1], shape[1] = v->shape[i][0];
        return 2;
    }
    if (v->slot_of[i] == slot_index(&v->c, -1, G_DOWN) && v->c.kind == VIS_GLM4V) { /* GLM-4V's Conv2d [out, D, merge, merge] */
        int64_t s[4] = { v->c.out, v->c.dim, v->c.merge, v->c.merge };
        memcpy(shape, s, sizeof s);
        return 4;
    }
    if (v->c.kind == VIS_MOON && v->slot_of[i] == slot_index(&v->c, -1, G_POS)) { /* [height, width, D] */
        int64_t s[3] = { v->c.side, v->c.side_w, v->c.dim };
        memcpy(shape, s, sizeof s);
        return 3;
    }
    if (v->c.kind == VIS_GEMMA4 && v->slot_of[i] < v->c.depth * B_COUNT && v->slot_of[i] % B_COUNT >= B_CLIP)
        return 0; /* a clip bound: a scalar */
    if (v->c.kind == VIS_GEMMA4 && v->slot_of[i] == slot_index(&v->c, -1, G_PATCH))
        return vc_vision_shape(v, i, shape); /* (an nn.Linear) */
    if (v->c.kind == VIS_GEMMA4 && v->slot_of[i] == slot_index(&v->c, -1, G_POS)) { /* [2, S, D] */
        int64_t s[3] = { 2, v->c.side, v->c.dim };
        memcpy(shape, s, sizeof s);
        return 3;
    }
    if (v->c.kind == VIS_INTERN && (v->slot_of[i] == slot_index(&v->c, -1, G_POS) ||
                                    v->slot_of[i] == slot_index(&v->c, -1, G_CLS))) { /* [1, rows, D] */
        int64_t s[3] = { 1, v->shape[i][0], v->c.dim };
        memcpy(shape, s, sizeof s);
        return 3;
    }
    if (v->c.kind == VIS_LLAMA4 && v->slot_of[i] == slot_index(&v->c, -1, G_CLS)) { /* [D] */
        shape[0] = v->c.dim;
        return 1;
    }
    if (v->c.kind == VIS_LLAMA4) return vc_vision_shape(v, i, shape); /* (its patch embedding an nn.Linear) */
    if ((v->c.kind == VIS_MOON || v->c.kind == VIS_SIGLIP || v->c.kind == VIS_INTERN || v->c.kind == VIS_PIXTRAL) &&
        v->slot_of[i] == slot_index(&v->c, -1, G_PATCH)) {
        /* a Conv2d [D, C, P, P] */
        int64_t s[4] = { v->c.dim, v->c.in_ch, v->c.patch, v->c.patch };
        memcpy(shape, s, sizeof s);
        return 4;
    }
    if (v->slot_of[i] != slot_index(&v->c, -1, G_PATCH)) return vc_vision_shape(v, i, shape);
    int64_t s[5] = { v->c.dim, v->c.in_ch, v->c.tpatch, v->c.patch, v->c.patch };
    memcpy(shape, s, sizeof s);
    return 5;
}

/* tensor i's host values between the checkpoint's layout and the tower's, where it keeps them transposed (in place) */
static void transpose_if(const vc_vision *v, int i, float *x) {
    int64_t R, C;
    if (!vc_vision_transposed(v, i, &R, &C)) return;
    float *t = vc_malloc(sizeof(float) * (size_t)(R * C));
    if (!t) return;
    for (int64_t r = 0; r < R; r++) /* the checkpoint's [C, R] into [R, C] */
        for (int64_t k = 0; k < C; k++) t[r * C + k] = x[k * R + r];
    memcpy(x, t, sizeof(float) * (size_t)(R * C));
    free(t);
}

vc_status vc_vision_fill(vc_vision *v, const vc_model *m, const vc_checkpoint *ck) {
    for (int i = 0; i < v->n; i++) {
        const vc_st_tensor *src = vc_ckpt_find(ck, v->name[i]);
        vc_tensor *t = v->t[v->slot_of[i]];
        if (src->dtype != VC_F32 && src->dtype != VC_BF16 && src->dtype != VC_F16)
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s", m->dir, v->name[i],
                           vc_dtype_name(src->dtype));
        float *host = vc_malloc(sizeof(float) * (size_t)t->n);
        if (!host) return VC_ERR_NOMEM;
        vc_st_tensor_to_f32(src, host);
        transpose_if(v, i, host);
        int s = v->slot_of[i];
        if (v->clip && s < v->c.depth * B_COUNT && s % B_COUNT >= B_CLIP) /* Gemma 4's clip bounds, kept on the host */
            v->clip[s / B_COUNT * 28 + s % B_COUNT - B_CLIP] = host[0];
        v->be->h2d(t->data, host, sizeof(float) * (size_t)t->n);
        vc_status st = v->be->sync();
        free(host);
        if (st) return st;
    }
    return VC_OK;
}

vc_status vc_model_load_vision(vc_model *m) {
    if (m->vision) return VC_OK;
    vis_cfg c;
    char full[96];
    vc_checkpoint *ck = NULL;
    vc_status st = parse_cfg(m, &c); /* names what is missing or not built */
    if (!st && !vc_ckpt_open(m->dir, &ck) &&
        !find(ck, c.kind, probe_name(c.kind), full, sizeof full))
        st = vc_fail(VC_ERR_MISSING, "%s: the checkpoint has no vision tower ('%s' is missing)", m->dir, full);
    vc_ckpt_close(ck);
    return st ? st : vc_fail(VC_ERR_INTERNAL, "%s: the vision tower was not loaded", m->dir);
}

vc_vision *vc_model_vision(const vc_model *m) { return m->vision; }

void vc_vision_free(vc_vision *v) {
    if (!v) return;
    free(v->t);
    free(v->shape);
    free(v->nd);
    free(v->name);
    free(v->slot_of);
    free(v->clip);
    free(v);
}

int64_t vc_vision_image_tokens(const vc_vision *v, const vc_images *im, int i) {
    const int32_t *g = im->grid + 3 * i;
    return (int64_t)g[0] * g[1] * g[2] / ((int64_t)v->c.merge * v->c.merge);
}
int64_t vc_vision_row(const vc_vision *v) { return (int64_t)v->c.in_ch * v->c.tpatch * v->c.patch * v->c.patch; }
int vc_vision_merge(const vc_vision *v) { return v->c.merge; }
int vc_vision_video_mode(const vc_vision *v, int *tps) {
    if (tps) *tps = v->c.tps;
    return v->c.kind == VIS_QWEN2 ? VC_VIDEO_WHOLE : v->c.kind == VIS_QWEN25 ? VC_VIDEO_TIMED
           : v->c.kind == VIS_QWEN3 ? VC_VIDEO_SPLIT : VC_VIDEO_NONE;
}
int vc_vision_count(const vc_vision *v) { return v->n; }
vc_tensor *vc_vision_tensor(vc_vision *v, int i, const char **name) {
    if (name) *name = v->name[i];
    return v->t[v->slot_of[i]];
}

static vc_status check_images(const vc_vision *v, const vc_images *im, int64_t *N) {
    const vis_cfg *c = &v->c;
    *N = 0;
    if (im->n < 1 || !im->grid || !im->pixels) return vc_fail(VC_ERR_ARG, "vision: no images");
    if (im->row != vc_vision_row(v))
        return vc_fail(VC_ERR_SHAPE, "vision: pixel rows of %lld floats; the patch embedding takes %lld (%d channels x %d "
                       "frames x %d x %d)", (long long)im->row, (long long)vc_vision_row(v), c->in_ch, c->tpatch,
                       c->patch, c->patch);
    for (int i = 0; i < im->n; i++) {
        const int32_t *g = im->grid + 3 * i;
        if (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1] % c->merge || g[2] % c->merge || g[1] > 1 << 14 || g[2] > 1 << 14 ||
            g[0] > 1 << 12)
            return vc_fail(VC_ERR_SHAPE, "vision: image %d's grid (%d, %d, %d) is not whole %d x %d blocks of patches", i,
                           g[0], g[1], g[2], c->merge, c->merge);
        if (c->kind == VIS_SIGLIP && (g[1] != c->side || g[2] != c->side)) /* (several frames: pan and scan's) */
            return vc_fail(VC_ERR_SHAPE, "vision: image %d's grid (%d, %d, %d): Gemma 3's tower takes frames of %d x %d "
                           "patches (its image_size)", i, g[0], g[1], g[2], c->side, c->side);
        if (c->kind == VIS_GEMMA4 && (g[0] != 1 || g[1] > c->side || g[2] > c->side))
            return vc_fail(VC_ERR_SHAPE, "vision: image %d's grid (%d, %d, %d): Gemma 4's tower takes single images of at "
                           "most %d patches a side (position_embedding_size)", i, g[0], g[1], g[2], c->side);
        if ((c->kind == VIS_INTERN || c->kind == VIS_LLAMA4) && (g[1] != c->side || g[2] != c->side))
            return vc_fail(VC_ERR_SHAPE, "vision: image %d's grid (%d, %d, %d): InternVL's tower takes tiles of %d x %d "
                           "patches (its image_size)", i, g[0], g[1], g[2], c->side, c->side);
        *N += (int64_t)g[0] * g[1] * g[2];
    }
    return VC_OK;
}

vc_status vc_vision_check(const vc_vision *v, const vc_images *im) {
    int64_t n;
    return check_images(v, im, &n);
}

/* Qwen2.5-VL's windows: the merged units of each frame in windows of w x w units (w = window / merge / patch), window
 * by window, each row-major; empty windows dropped */
static vc_status plan_windows(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p, int32_t *perm) {
    int m = v->c.merge, w = v->c.window / m / v->c.patch, mm = m * m;
    int64_t u = 0, k = 0;
    p->cu_win[0] = 0;
    p->n_win = 0;
    for (int i = 0; i < im->n; i++) {
        const int32_t *gr = im->grid + 3 * i;
        int H = gr[1] / m, W = gr[2] / m;
        for (int t = 0; t < gr[0]; t++, u += (int64_t)H * W)
            for (int wh = 0; wh < H; wh += w)
                for (int ww = 0; ww < W; ww += w) {
                    for (int y = wh; y < wh + w && y < H; y++)
                        for (int x = ww; x < ww + w && x < W; x++) perm[k++] = (int32_t)(u + (int64_t)y * W + x);
                    p->cu_win[p->n_win + 1] = k * mm;
                    p->n_win++;
                }
    }
    int32_t *inv = vc_graph_alloc(g, sizeof(int32_t) * (size_t)p->U, 0);
    if (!inv) return vc_graph_status(g);
    for (int64_t j = 0; j < p->U; j++) inv[perm[j]] = (int32_t)j;
    p->perm = vc_graph_upload(g, perm, sizeof(int32_t) * (size_t)p->U);
    p->inv = vc_graph_upload(g, inv, sizeof(int32_t) * (size_t)p->U);
    return p->perm && p->inv ? VC_OK : vc_graph_status(g);
}

/* 2-D rope: pair j < hd/4 by the patch's row, the rest by its column, at theta^(-2j / (hd / 2)); MoonViT's pairs are
 * interleaved (x_2a, x_2a+1): pair a by the column where a is even, the row where odd, at theta^(-4 (a / 2) / hd) */
static vc_status plan_rope(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p, const int32_t *perm) {
    int m = v->c.merge, mm = m * m, q = v->c.hd / 4, half = v->c.hd / 2;
    float inv[1024];
    if (half > 1024) return vc_fail(VC_ERR_UNSUPPORTED, "vision: head width %d is too large", v->c.hd);
    for (int j = 0; j < q; j++) /* float32 as torch: arange(0, dim, 2).float() / dim, then base ** that */
        inv[j] = 1.0f / (float)pow((double)(float)v->c.theta, (double)((float)(2 * j) / (float)half));
    int moon = v->c.kind == VIS_MOON;
    int32_t *hw = vc_graph_alloc(g, sizeof(int32_t) * 2 * (size_t)p->N, 0);
    float *cs = vc_graph_alloc(g, sizeof(float) * 2 * (size_t)(p->N * half), 0);
    if (!hw || !cs) return vc_graph_status(g);
    int64_t r = 0;
    for (int i = 0; i < im->n; i++) { /* the processor's order: frame, block row, block column, row, column in block */
        const int32_t *gr = im->grid + 3 * i;
        for (int t = 0; t < gr[0]; t++)
            for (int bh = 0; bh < gr[1] / m; bh++)
                for (int bw = 0; bw < gr[2] / m; bw++)
                    for (int k = 0; k < mm; k++, r++) {
                        hw[2 * r] = bh * m + k / m;
                        hw[2 * r + 1] = bw * m + k % m;
                    }
    }
    for (int64_t j = 0; j < p->N; j++) {
        int64_t src = perm ? (int64_t)perm[j / mm] * mm + j % mm : j;
        for (int a = 0; a < half; a++) {
            float ang = moon ? (float)hw[2 * src + !(a & 1)] * inv[a / 2] : (float)hw[2 * src + (a >= q)] * inv[a % q];
            cs[j * half + a] = cosf(ang);
            cs[p->N * half + j * half + a] = sinf(ang);
        }
    }
    float *dev = vc_graph_upload(g, cs, sizeof(float) * 2 * (size_t)(p->N * half));
    if (!dev) return vc_graph_status(g);
    p->cos = dev;
    p->sin = dev + p->N * half;
    return VC_OK;
}

/* GLM-4V's downsample reads each merged unit's merge^2 patches as a Conv2d does, channel by channel: the element order
 * (unit, channel, patch in unit) of the patches' rows [N, D], as indexes of their values */
vc_status vis_plan_downsample(const vc_vision *v, vc_graph *g, vis_plan *p) {
    int64_t D = v->c.dim, mm = (int64_t)v->c.merge * v->c.merge, n = p->N * D;
    if (n > INT32_MAX) return vc_fail(VC_ERR_UNSUPPORTED, "vision: %lld patches of width %lld are too many at once",
                                      (long long)p->N, (long long)D);
    int32_t *idx = vc_graph_alloc(g, sizeof(int32_t) * (size_t)n, 0);
    if (!idx) return vc_graph_status(g);
    for (int64_t u = 0, r = 0; u < p->U; u++)
        for (int64_t d = 0; d < D; d++)
            for (int64_t k = 0; k < mm; k++) idx[r++] = (int32_t)((u * mm + k) * D + d);
    p->down = vc_graph_upload(g, idx, sizeof(int32_t) * (size_t)n);
    return p->down ? VC_OK : vc_graph_status(g);
}

vc_status vis_plan_order(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p, int cls) {
    int m = v->c.merge;
    int32_t *o = vc_graph_alloc(g, sizeof(int32_t) * (size_t)p->N, 0);
    if (!o) return vc_graph_status(g);
    int64_t r = 0, base = 0;
    for (int i = 0; i < im->n; i++) {
        const int32_t *gr = im->grid + 3 * i;
        for (int t = 0; t < gr[0]; t++, base += cls + (int64_t)gr[1] * gr[2])
            for (int bh = 0; bh < gr[1] / m; bh++)
                for (int bw = 0; bw < gr[2] / m; bw++)
                    for (int k = 0; k < m * m; k++)
                        o[r++] = (int32_t)(base + cls + (int64_t)(bh * m + k / m) * gr[2] + bw * m + k % m);
    }
    p->order = vc_graph_upload(g, o, sizeof(int32_t) * (size_t)p->N);
    return p->order ? VC_OK : vc_graph_status(g);
}

static vc_status plan(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p) {
    memset(p, 0, sizeof *p);
    vc_status st = check_images(v, im, &p->N);
    if (st) return st;
    int mm = v->c.merge * v->c.merge, frames = 0;
    p->U = p->N / mm;
    for (int i = 0; i < im->n; i++) frames += im->grid[3 * i];
    p->cu_full = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(frames + 1), 0);
    p->cu_win = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(p->U + 1), 0);
    int32_t *perm = v->c.kind == VIS_QWEN25 ? vc_graph_alloc(g, sizeof(int32_t) * (size_t)p->U, 0) : NULL;
    if (!p->cu_full || !p->cu_win || (v->c.kind == VIS_QWEN25 && !perm)) return vc_graph_status(g);
    p->cu_full[0] = 0;
    int cls = v->c.kind == VIS_INTERN || v->c.kind == VIS_LLAMA4; /* (a class token a tile) */
    for (int i = 0; i < im->n; i++)
        for (int t = 0; t < im->grid[3 * i]; t++, p->n_full++)
            p->cu_full[p->n_full + 1] = p->cu_full[p->n_full] + cls + (int64_t)im->grid[3 * i + 1] * im->grid[3 * i + 2];
    p->R = p->N + (cls ? frames : 0);
    if (cls && (st = vis_plan_order(v, im, g, p, 1))) return st; /* (past each tile's class token) */
    if (cls) return v->c.kind == VIS_LLAMA4 ? vis_plan_llama4(v, im, g, p) : VC_OK;
    if (perm && (st = plan_windows(v, im, g, p, perm))) return st;
    if (v->c.kind == VIS_GLM4V && (st = vis_plan_downsample(v, g, p))) return st;
    if ((v->c.kind == VIS_MOON || v->c.kind == VIS_SIGLIP || v->c.kind == VIS_GEMMA4 || v->c.kind == VIS_PIXTRAL) &&
        (st = vis_plan_order(v, im, g, p, 0)))
        return st;
    if (v->c.kind == VIS_GEMMA4) return vis_plan_gemma4(v, im, g, p);
    if (v->c.kind == VIS_PIXTRAL) return vis_plan_pixtral(v, im, g, p);
    return v->c.kind == VIS_SIGLIP ? VC_OK : plan_rope(v, im, g, p, perm); /* (SigLIP: no rope) */
}

/* x W^T + b of slot k of block b (or of a merger) with bias slot kb, plus the slot's LoRA adapter while adapters are
 * on */
vc_tensor *vis_lin(vc_vision *v, vc_graph *g, vc_tensor *x, int b, int k, int kb) {
    vc_tensor *y = vc_op_linear(g, x, slot(v, b, k), kb >= 0 ? slot(v, b, kb) : NULL);
    return vc_lora_apply(v->m, g, vc_lora_tower_index(v->m, slot_index(&v->c, b, k)), x, y);
}

/* the blocks' norms: LayerNorm (Qwen2-VL, Qwen3-VL) or RMSNorm (Qwen2.5-VL, GLM-4V) */
vc_tensor *vis_norm(vc_vision *v, vc_graph *g, vc_tensor *x, vc_tensor *w, vc_tensor *b) {
    int rms = v->c.kind == VIS_QWEN25 || v->c.kind == VIS_GLM4V || v->c.rms;
    return rms ? vc_op_rmsnorm(g, x, w, v->c.dim, v->c.eps, 0.0f) : vc_op_layernorm(g, x, w, b, v->c.eps);
}

static vc_tensor *heads(vc_vision *v, vc_graph *g, vc_tensor *qkv, int part, const vis_plan *p, int rope) {
    int64_t D = v->c.dim, s3[3] = { p->R, v->c.heads, v->c.hd };
    vc_tensor *x = vc_op_slice_cols(g, qkv, 3 * D, part * D, (part + 1) * D);
    x = x ? vc_reshape(g, x, 3, s3) : NULL;
    return rope ? vc_op_rope(g, x, p->cos, p->sin, v->c.heads, v->c.hd, v->c.hd, v->c.kind == VIS_MOON) : x;
}

vc_tensor *vis_block(vc_vision *v, vc_graph *g, int b, vc_tensor *x, const vis_plan *p) {
    int full = v->c.full[b];
    vc_tensor *h = vis_norm(v, g, x, slot(v, b, B_N1), slot(v, b, B_N1B));
    vc_op_hold(h, 1);
    vc_tensor *q, *k, *val;
    if (v->c.kind == VIS_SIGLIP || v->c.kind == VIS_INTERN || v->c.kind == VIS_LLAMA4) { /* q, k and v apart */
        int64_t s3[3] = { p->R, v->c.heads, v->c.hd };
        q = vis_lin(v, g, h, b, B_QKV, B_QKVB), k = vis_lin(v, g, h, b, B_K, B_KB), val = vis_lin(v, g, h, b, B_V, B_VB);
        vc_op_hold(h, 0);
        if (slot(v, b, B_QN)) { /* InternVL's q / k RMSNorms over the whole width */
            q = vc_op_rmsnorm(g, q, slot(v, b, B_QN), v->c.dim, 1e-6f, 0.0f);
            k = vc_op_rmsnorm(g, k, slot(v, b, B_KN), v->c.dim, 1e-6f, 0.0f);
        }
        q = q ? vc_reshape(g, q, 3, s3) : NULL, k = k ? vc_reshape(g, k, 3, s3) : NULL;
        val = val ? vc_reshape(g, val, 3, s3) : NULL;
        if (v->c.kind == VIS_LLAMA4) { /* (its rope on complex pairs, as MoonViT's) */
            q = vc_op_rope(g, q, p->cos, p->sin, v->c.heads, v->c.hd, v->c.hd, 1);
            k = vc_op_rope(g, k, p->cos, p->sin, v->c.heads, v->c.hd, v->c.hd, 1);
        }
    } else {
        vc_tensor *qkv = vis_lin(v, g, h, b, B_QKV, B_QKVB);
        vc_op_hold(h, 0);
        q = heads(v, g, qkv, 0, p, 1), k = heads(v, g, qkv, 1, p, 1), val = heads(v, g, qkv, 2, p, 0);
    }
    vc_attn_desc d = { .n_seq = full ? p->n_full : p->n_win, .q_start = full ? p->cu_full : p->cu_win,
                       .n_head = v->c.heads, .n_kv_head = v->c.heads, .head_dim = v->c.hd, .v_head_dim = v->c.hd,
                       .scale = 1.0f / sqrtf((float)v->c.hd), .causal = 0 };
    vc_tensor *o = vc_op_attention(g, q, k, val, &d);
    int64_t s2[2] = { p->R, v->c.dim };
    o = o ? vc_reshape(g, o, 2, s2) : NULL;
    o = vis_lin(v, g, o, b, B_PROJ, B_PROJB);
    x = vc_op_add(g, x, slot(v, b, B_L1) ? vc_op_affine_cols(g, o, slot(v, b, B_L1), NULL, 1) : o); /* (InternVL's lambda_1) */
    h = vis_norm(v, g, x, slot(v, b, B_N2), slot(v, b, B_N2B));
    vc_tensor *y;
    if (v->c.kind != VIS_QWEN25 && v->c.kind != VIS_GLM4V) {
        y = vc_op_act(g, vis_lin(v, g, h, b, B_M0, B_M0B), v->c.act);
        y = vis_lin(v, g, y, b, B_M1, B_M1B);
    } else {
        vc_op_hold(h, 1);
        vc_tensor *gt = vis_lin(v, g, h, b, B_M0, B_M0B);
        vc_tensor *up = vis_lin(v, g, h, b, B_M1, B_M1B);
        vc_op_hold(h, 0);
        if (vc_lora_tower_index(v->m, slot_index(&v->c, b, B_M2)) < 0)
            y = vc_op_act_mul_linear(g, gt, up, v->c.act, slot(v, b, B_M2), slot(v, b, B_M2B));
        else y = vis_lin(v, g, vc_op_act_mul(g, gt, up, v->c.act), b, B_M2, B_M2B); /* down's adapter reads the product */
    }
    return vc_op_add(g, x, slot(v, b, B_L2) ? vc_op_affine_cols(g, y, slot(v, b, B_L2), NULL, 1) : y);
}

/* Qwen3-VL: the learned positions resampled to each image's grid (transformers' bilinear interpolation with aligned
 * corners, in float32 as torch computes it): each patch's 4 taps into the side x side table and their weights,
 * summed as weighted embedding rows */
static vc_tensor *positions(vc_vision *v, vc_graph *g, const vc_images *im, int64_t N) {
    int m = v->c.merge, side = v->c.side;
    int32_t *idx = vc_graph_alloc(g, sizeof(int32_t) * 4 * (size_t)N, 0);
    float *w = vc_graph_alloc(g, sizeof(float) * 4 * (size_t)N, 0);
    if (!idx || !w) return NULL;
    int64_t r = 0;
    for (int i = 0; i < im->n; i++) {
        const int32_t *gr = im->grid + 3 * i;
        for (int t = 0; t < gr[0]; t++)
            for (int bh = 0; bh < gr[1] / m; bh++)
                for (int bw = 0; bw < gr[2] / m; bw++)
                    for (int k = 0; k < m * m; k++, r++) {
                        int at[2] = { bh * m + k / m, bw * m + k % m }, size[2] = { gr[1], gr[2] }, tap[2][2];
                        float wt[2][2];
                        for (int a = 0; a < 2; a++) {
                            float src = (float)at[a] * (float)(side - 1) / (float)(size[a] > 1 ? size[a] - 1 : 1);
                            float fl = floorf(src);
                            for (int o = 0; o < 2; o++) {
                                int q = (int)fl + o;
                                tap[a][o] = q < 0 ? 0 : q > side - 1 ? side - 1 : q;
                                float d = fabsf(src - fl - (float)o);
                                wt[a][o] = 1.0f - d > 0.0f ? 1.0f - d : 0.0f;
                            }
                        }
                        for (int q = 0; q < 4; q++) {
                            idx[q * N + r] = tap[0][q / 2] * side + tap[1][q % 2];
                            w[q * N + r] = wt[0][q / 2] * wt[1][q % 2];
                        }
                    }
    }
    float *dw = vc_graph_upload(g, w, sizeof(float) * 4 * (size_t)N);
    vc_tensor *sum = NULL;
    for (int q = 0; q < 4 && dw; q++) {
        vc_tensor *e = vc_op_embedding(g, slot(v, -1, G_POS), idx + q * N, N);
        vc_tensor *wq = vc_tensor_wrap(g, dw + q * N, 1, (int64_t[]){ N });
        e = e && wq ? vc_op_mul_rows(g, e, wq) : NULL;
        sum = q ? vc_op_add(g, sum, e) : e;
    }
    return sum;
}

/* the merger (Qwen2-VL's and Qwen3-VL's main one: a norm per patch, then merge x merge patches as one row; Qwen3-VL's
 * deepstack mergers, b -2 - j: the norm over the merged row) and its two linears with a GELU between */
static vc_tensor *merger(vc_vision *v, vc_graph *g, vc_tensor *x, int b, const vis_plan *p) {
    int64_t us[2] = { p->U, (int64_t)v->c.merge * v->c.merge * v->c.dim };
    int pre = b == -1, moon = v->c.kind == VIS_MOON; /* (MoonViT's projector: its own epsilon and activation) */
    if (pre && moon) x = vc_op_layernorm(g, x, slot(v, b, G_LN), slot(v, b, G_LNB), v->c.m_eps);
    else if (pre) x = vis_norm(v, g, x, slot(v, b, G_LN), slot(v, b, G_LNB));
    x = x ? vc_reshape(g, x, 2, us) : NULL;
    if (!pre) x = vc_op_layernorm(g, x, slot(v, b, D_LN), slot(v, b, D_LNB), 1e-6f);
    x = vc_op_act(g, vis_lin(v, g, x, b, pre ? G_FC0 : D_FC0, pre ? G_FC0B : D_FC0B), moon ? v->c.m_act : VC_ACT_GELU_ERF);
    return vis_lin(v, g, x, b, pre ? G_FC2 : D_FC2, pre ? G_FC2B : D_FC2B);
}

/* PyTorch's cubic convolution weights (A = -0.75) of the 4 taps around a point at fraction t past the second, in float
 * as grid_sample computes them */
static void cubic_weights(float t, float w[4]) {
    const float A = -0.75f;
    float x1 = t, x2 = 1.0f - t, a = x1 + 1.0f, d = x2 + 1.0f;
    w[0] = ((A * a - 5.0f * A) * a + 8.0f * A) * a - 4.0f * A;
    w[1] = ((A + 2.0f) * x1 - (A + 3.0f)) * x1 * x1 + 1.0f;
    w[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    w[3] = ((A * d - 5.0f * A) * d + 8.0f * A) * d - 4.0f * A;
}

/* the taps of patch coordinate at (of size patches) into a table side wide: grid_sample's bicubic sampling at the
 * patch's centre ((at + 0.5) / size * 2 - 1, unnormalised without aligned corners), taps clamped to the border;
 * interp: F.interpolate's source index instead (side / size * (at + 0.5) - 0.5, in float as torch computes it) */
static void cubic_taps(int at, int size, int side, int interp, int tap[4], float w[4]) {
    float norm = ((float)at + 0.5f) / (float)size * 2.0f - 1.0f;
    float x = interp ? (float)side / (float)size * ((float)at + 0.5f) - 0.5f : (norm + 1.0f) * ((float)side / 2.0f) - 0.5f;
    float fl = floorf(x);
    cubic_weights(x - fl, w);
    for (int o = 0; o < 4; o++) {
        int q = (int)fl - 1 + o;
        tap[o] = q < 0 ? 0 : q > side - 1 ? side - 1 : q;
    }
}

/* the sum over k < 4 of w[k] [R] times x[k] [R, C] (NULL if any is), added in that order as grid_sample's
 * cubic_interp1d does */
static vc_tensor *weighted_sum4(vc_graph *g, vc_tensor *const x[4], float *w, int64_t R) {
    vc_tensor *sum = NULL;
    for (int k = 0; k < 4; k++) {
        vc_tensor *wk = vc_tensor_wrap(g, w + k * R, 1, (int64_t[]){ R });
        vc_tensor *e = x[k] && wk ? vc_op_mul_rows(g, x[k], wk) : NULL;
        sum = k ? vc_op_add(g, sum, e) : e;
    }
    return sum;
}

/* GLM-4V: the learned positions resampled to each image's grid (transformers' Glm4vVisionEmbeddings: F.grid_sample,
 * bicubic, align_corners False, border padding), separably as grid_sample computes it: each image's table rows
 * interpolated at its columns (4 weighted embedding rows each: [side x W] rows per image), then each patch from 4 of
 * those at its row. MoonViT's table is side x side_w, resampled by F.interpolate (bicubic, align_corners False: the
 * same separable form, width first) */
static vc_tensor *positions_bicubic(vc_vision *v, vc_graph *g, const vc_images *im, int64_t N) {
    int m = v->c.merge, side = v->c.side, sw = v->c.side_w, interp = v->c.kind == VIS_MOON;
    int64_t S = 0, r = 0, off = 0;
    for (int i = 0; i < im->n; i++) S += (int64_t)side * im->grid[3 * i + 2];
    int32_t *cid = vc_graph_alloc(g, sizeof(int32_t) * 4 * (size_t)S, 0);
    int32_t *rid = vc_graph_alloc(g, sizeof(int32_t) * 4 * (size_t)N, 0);
    float *w = vc_graph_alloc(g, sizeof(float) * 4 * (size_t)(S + N), 0);
    if (!cid || !rid || !w) return NULL;
    float *cw = w, *rw = w + 4 * S;
    for (int i = 0; i < im->n; i++) {
        const int32_t *gr = im->grid + 3 * i;
        int W = gr[2], tap[4];
        float wt[4];
        for (int x = 0; x < W; x++) { /* the columns: rows (y, x) of this image's block, from table row y */
            cubic_taps(x, W, sw, interp, tap, wt);
            for (int y = 0; y < side; y++)
                for (int k = 0; k < 4; k++) {
                    cid[k * S + off + (int64_t)y * W + x] = y * sw + tap[k];
                    cw[k * S + off + (int64_t)y * W + x] = wt[k];
                }
        }
        for (int t = 0; t < gr[0]; t++) /* the patches, in the processor's order, from their row's 4 taps */
            for (int bh = 0; bh < gr[1] / m; bh++)
                for (int bw = 0; bw < gr[2] / m; bw++)
                    for (int k = 0; k < m * m; k++, r++) {
                        cubic_taps(bh * m + k / m, gr[1], side, interp, tap, wt);
                        for (int q = 0; q < 4; q++) {
                            rid[q * N + r] = (int32_t)(off + (int64_t)tap[q] * W + bw * m + k % m);
                            rw[q * N + r] = wt[q];
                        }
                    }
        off += (int64_t)side * W;
    }
    float *dw = vc_graph_upload(g, w, sizeof(float) * 4 * (size_t)(S + N));
    int32_t *drid = vc_graph_upload(g, rid, sizeof(int32_t) * 4 * (size_t)N);
    if (!dw || !drid) return NULL;
    vc_tensor *e[4], *cols, *rows[4];
    for (int k = 0; k < 4; k++) e[k] = vc_op_embedding(g, slot(v, -1, G_POS), cid + k * S, S);
    cols = weighted_sum4(g, e, dw, S);
    for (int k = 0; k < 4; k++) rows[k] = cols ? vc_op_gather_rows(g, cols, S, drid + k * N, N) : NULL;
    return weighted_sum4(g, rows, dw + 4 * S, N);
}

/* GLM-4V after the blocks: post_layernorm, the Conv2d downsample over each merge x merge block of patches (one linear
 * over the block's values as (channel, row, column)), then its merger: proj, LayerNorm, GELU and a SwiGLU MLP */
static vc_tensor *glm_merger(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p) {
    int64_t n = p->N * v->c.dim, us[2] = { p->U, (int64_t)v->c.merge * v->c.merge * v->c.dim };
    x = vc_op_rmsnorm(g, x, slot(v, -1, G_POST), v->c.dim, v->c.eps, 0.0f);
    x = x ? vc_op_gather_rows(g, x, n, p->down, n) : NULL;
    x = x ? vc_reshape(g, x, 2, us) : NULL;
    x = vc_op_linear(g, x, slot(v, -1, G_DOWN), slot(v, -1, G_DOWNB));
    x = vis_lin(v, g, x, -1, G_MPROJ, -1);
    x = vc_op_act(g, vc_op_layernorm(g, x, slot(v, -1, G_LN), slot(v, -1, G_LNB), 1e-5f), VC_ACT_GELU_ERF);
    vc_op_hold(x, 1);
    vc_tensor *gt = vis_lin(v, g, x, -1, G_MGATE, -1), *up = vis_lin(v, g, x, -1, G_MUP, -1);
    vc_op_hold(x, 0);
    if (vc_lora_tower_index(v->m, slot_index(&v->c, -1, G_MDOWN)) < 0)
        return vc_op_act_mul_linear(g, gt, up, v->c.act, slot(v, -1, G_MDOWN), NULL);
    return vis_lin(v, g, vc_op_act_mul(g, gt, up, v->c.act), -1, G_MDOWN, -1);
}

/* SigLIP: each patch's learned position, by its row-major index in its image (the processor's order) */
static vc_tensor *siglip_positions(vc_vision *v, vc_graph *g, int64_t N) {
    int32_t *idx = vc_graph_alloc(g, sizeof(int32_t) * (size_t)N, 0);
    if (!idx) return NULL;
    for (int64_t r = 0, per = (int64_t)v->c.side * v->c.side; r < N; r++) idx[r] = (int32_t)(r % per);
    return vc_op_embedding(g, slot(v, -1, G_POS), idx, N);
}

/* Gemma 3's projector: the mean of each k x k block of patches (AvgPool2d: the block's k^2 rows summed in order, then
 * divided), Gemma's RMSNorm (times 1 + w) and the projection matrix */
static vc_tensor *siglip_projector(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p) {
    int64_t mm = (int64_t)v->c.merge * v->c.merge, D = v->c.dim, us[2] = { p->U, mm * D };
    x = vc_reshape(g, x, 2, us);
    vc_tensor *sum = NULL;
    for (int64_t k = 0; k < mm && x; k++) {
        vc_tensor *part = vc_op_slice_cols(g, x, mm * D, k * D, (k + 1) * D);
        sum = k ? vc_op_add(g, sum, part) : part;
    }
    sum = sum ? vc_op_scale(g, sum, 1.0f / (float)mm) : NULL;
    sum = vc_op_rmsnorm(g, sum, slot(v, -1, G_LN), D, v->c.eps, 1.0f);
    return vc_op_linear(g, sum, slot(v, -1, G_FC0), NULL);
}

int vc_vision_bidirectional(const vc_vision *v) { return v->c.bidi; }

int vc_vision_owns(const vc_vision *v, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->name[i], name)) return 1;
    return 0;
}

int vc_vision_deepstack(const vc_vision *v, vc_tensor **out) {
    for (int j = 0; j < v->c.n_deep; j++) out[j] = v->deep_out[j];
    return v->c.n_deep;
}

vc_tensor *vc_vision_forward(vc_vision *v, vc_graph *g, const vc_images *im) {
    vis_plan p;
    vc_status st = plan(v, im, g, &p);
    if (st) {
        vc_graph_fail(g, st);
        return NULL;
    }
    int64_t ps[2] = { p.N, im->row };
    float *pix = vc_graph_upload(g, im->pixels, sizeof(float) * (size_t)(p.N * im->row));
    vc_tensor *x = pix ? vc_tensor_wrap(g, pix, 2, ps) : NULL;
    if (v->c.kind == VIS_GEMMA4) return vis_gemma4_forward(v, g, x, &p);
    if (v->c.kind == VIS_PIXTRAL) return vis_pixtral_forward(v, g, x, &p);
    x = vc_op_linear(g, x, slot(v, -1, G_PATCH), slot(v, -1, G_PATCHB));
    if (v->c.kind == VIS_INTERN) return vis_intern_forward(v, g, x, &p);
    if (v->c.kind == VIS_LLAMA4) return vis_llama4_forward(v, g, x, &p);
    if (v->c.kind == VIS_SIGLIP && x) x = vc_op_add(g, x, siglip_positions(v, g, p.N));
    if (p.perm && x) x = vc_op_gather_rows(g, x, p.U, p.perm, p.U); /* rows of whole merged units, in window order */
    if (p.order && x) x = vc_op_gather_rows(g, x, p.N, p.order, p.N); /* MoonViT: whole merge blocks */
    int64_t s2[2] = { p.N, v->c.dim };
    x = x ? vc_reshape(g, x, 2, s2) : NULL;
    if (v->c.kind == VIS_QWEN3 && x) x = vc_op_add(g, x, positions(v, g, im, p.N));
    if (v->c.kind == VIS_GLM4V && x) x = vc_op_rmsnorm(g, x, slot(v, -1, G_PCONV), v->c.dim, v->c.eps, 0.0f);
    if ((v->c.kind == VIS_GLM4V || v->c.kind == VIS_MOON) && x) x = vc_op_add(g, x, positions_bicubic(v, g, im, p.N));
    for (int j = 0; j < v->c.n_deep; j++) v->deep_out[j] = NULL;
    for (int b = 0, j = 0; b < v->c.depth && x; b++) {
        x = vis_block(v, g, b, x, &p);
        if (j < v->c.n_deep && v->c.deep[j] == b && x && !(v->deep_out[j] = merger(v, g, x, -2 - j, &p))) x = NULL;
        if (j < v->c.n_deep && v->c.deep[j] == b) j++;
    }
    if ((v->c.kind == VIS_MOON || v->c.kind == VIS_SIGLIP) && x)
        x = vc_op_layernorm(g, x, slot(v, -1, G_POST), slot(v, -1, G_POSTB), v->c.eps);
    if (v->c.kind == VIS_SIGLIP) return x ? siglip_projector(v, g, x, &p) : NULL;
    x = x ? (v->c.kind == VIS_GLM4V ? glm_merger(v, g, x, &p) : merger(v, g, x, -1, &p)) : NULL;
    if (p.inv && x) x = vc_op_gather_rows(g, x, p.U, p.inv, p.U);
    return x;
}

/* "visual.blocks.0.attn.qkv.weight" and "model.visual.blocks.0.attn.qkv.weight" name the same tensor */
static const char *after_visual(const char *n) {
    const char *p = strstr(n, "visual.");
    return p ? p + 7 : n;
}

vc_status vc_vision_hf_grad(const vc_vision *v, const char *hf_name, float **out, int64_t *n) {
    *out = NULL;
    for (int i = 0; i < v->n; i++) {
        const vc_tensor *t = v->t[v->slot_of[i]];
        if (strcmp(after_visual(v->name[i]), after_visual(hf_name))) continue;
        if (!t->grad) return vc_fail(VC_ERR_ARG, "the vision tower has no gradients (frozen, or gradients not enabled)");
        float *buf = vc_malloc(sizeof(float) * (size_t)t->n);
        if (!buf) return VC_ERR_NOMEM;
        v->be->d2h(buf, t->grad, sizeof(float) * (size_t)t->n);
        vc_status st = v->be->sync();
        if (st) {
            free(buf);
            return st;
        }
        int64_t R, C;
        if (vc_vision_transposed(v, i, &R, &C)) { /* back to the checkpoint's [C, R] */
            float *tr = vc_malloc(sizeof(float) * (size_t)t->n);
            if (!tr) {
                free(buf);
                return VC_ERR_NOMEM;
            }
            for (int64_t r = 0; r < R; r++)
                for (int64_t k = 0; k < C; k++) tr[k * R + r] = buf[r * C + k];
            free(buf);
            buf = tr;
        }
        *out = buf;
        *n = t->n;
        return VC_OK;
    }
    return vc_fail(VC_ERR_MISSING, "no vision tower tensor is named '%s'", hf_name);
}

/* ---- LoRA: the tower's nn.Linear modules (not the Conv3d patch embedding, not the position table) ---- */
static int is_linear(const vis_cfg *c, int b, int k) {
    if (b >= 0) return k == B_QKV || k == B_PROJ || k == B_M0 || k == B_M1 || k == B_M2 || k == B_K || k == B_V;
    if (b == -1 && k == G_FC0 && c->kind == VIS_SIGLIP) return 0; /* (an nn.Parameter: PEFT's all-linear skips it) */
    if (b == -1 && k == G_PATCH && c->kind == VIS_GEMMA4) return 1; /* (Gemma 4's patch embedding is an nn.Linear) */
    if (b == -1 && k == G_DOWN && c->kind == VIS_PIXTRAL) return 1; /* (Mistral 3's patch merger is an nn.Linear) */
    if (b == -1 && k == G_PATCH && c->kind == VIS_LLAMA4) return 1; /* (Llama 4's unfolded patches: an nn.Linear) */
    if (b == -1) return k == G_FC0 || k == G_FC2 || k == G_MPROJ || k == G_MGATE || k == G_MUP || k == G_MDOWN;
    return k == D_FC0 || k == D_FC2;
}

int vc_vision_n_slots(const vc_vision *v) { return n_slots(&v->c); }

vc_tensor *vc_vision_linear(const vc_vision *v, int s, char *path, size_t cap) {
    int b, k;
    if (s < 0 || s >= n_slots(&v->c) || !v->t[s]) return NULL;
    slot_bk(&v->c, s, &b, &k);
    if (!is_linear(&v->c, b, k)) return NULL;
    for (int i = 0; i < v->n; i++) {
        if (v->slot_of[i] != s) continue;
        /* the module as transformers 5 names it (MoonViT: its remote code's, the checkpoint's names): the name past
         * the checkpoint's prefix under the last of the kind's prefixes */
        const char *rel = v->name[i];
        const char *const *p = prefixes(v->c.kind, strstr(rel, "multi_modal_projector.") ? "multi_modal_projector."
                                                   : strstr(rel, "mm_projector.")        ? "mm_projector."
                                                   : strstr(rel, "embed_vision.")        ? "embed_vision."
                                                                                         : "");
        for (const char *const *q = p; *q; q++)
            if (**q && !strncmp(rel, *q, strlen(*q))) {
                rel += strlen(*q);
                break;
            }
        const char *last = p[0];
        for (const char *const *q = p; *q; q++) last = *q;
        const char *w = strstr(rel, ".weight");
        snprintf(path, cap, "%s%.*s", v->c.kind == VIS_MOON || v->c.kind == VIS_LLAMA4 ? p[0] : last, (int)(w ? w - rel : (ptrdiff_t)strlen(rel)),
                 rel);
        return v->t[s];
    }
    return NULL;
}
