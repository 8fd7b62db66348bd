/* InternVL's vision tower and projector (transformers' InternVLVisionModel and InternVLMultiModalProjector): each tile
 * of an image (the processor's crops of 448 x 448 pixels and a thumbnail) is a Conv2d patch embedding behind a class
 * token, plus one learned position per row; blocks of LayerNorm (or RMSNorm), q, k and v apart (optionally RMS-normed
 * over the whole width), a GELU MLP, each sublayer's output times its layer scale (lambda_1, lambda_2) before the
 * residual sum; optionally a final LayerNorm; then the class tokens dropped, the pixel shuffle (each merge x merge
 * block of patches as one row, channels by (row, column, channel) in the block: the other towers' merged rows), and
 * the projector: LayerNorm, linear, GELU, linear. Attention runs within each tile. */
#include "vision_priv.h"
#include "verlc/json.h"
#include "tensor/graph_priv.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* the keys beside vision_config: downsample_ratio (1 / merge), the projector's activation, the features' layer and
 * selection */
static vc_status parse_top(const cJSON *root, const char *top, vis_cfg *c) {
    double r = 0.5;
    const char *sel = NULL;
    vc_status st = vc_json_get_num(root, "downsample_ratio", 0.5, &r, top);
    if (!st) st = vis_parse_projector(root, top, c);
    if (!st) st = vc_json_get_str(root, "vision_feature_select_strategy", "default", &sel, top);
    if (st) return st;
    c->merge = r > 0 ? (int)lround(1.0 / r) : 0;
    if (c->merge < 1 || c->merge > 16 || fabs(1.0 / c->merge - r) > 1e-9)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'downsample_ratio' is %g, not 1 / n for an integer n in [1, 16]", top, r);
    if (strcmp(sel, "default"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'vision_feature_select_strategy' is '%s' (transformers' InternVL "
                       "takes 'default': the class token dropped)", top, sel);
    return VC_OK;
}

vc_status vis_parse_intern(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c) {
    int image = 448, mean_pool = 1, abs_pos = 1;
    double eps = 1e-6;
    const char *nt = NULL;
    char top[640]; /* (the keys beside vision_config) */
    vis_top_ctx(ctx, top, sizeof top);
    vc_status st = vis_parse_vit(o, ctx, c, 24, 1024, 16, 4096);
    if (!st) st = vis_get_int(o, "num_channels", 3, 3, 3, &c->in_ch, ctx);
    if (!st) st = vis_square_key(o, "image_size", 448, ctx, &image);
    if (!st) st = vis_square_key(o, "patch_size", 14, ctx, &c->patch);
    if (!st) st = vc_json_get_num(o, "layer_norm_eps", 1e-6, &eps, ctx);
    if (!st) st = vc_json_get_bool(o, "attention_bias", 0, &c->qkv_bias, ctx);
    if (!st) st = vc_json_get_bool(o, "use_qk_norm", 0, &c->qk_norm, ctx);
    if (!st) st = vc_json_get_bool(o, "use_mean_pooling", 1, &mean_pool, ctx);
    if (!st) st = vc_json_get_bool(o, "use_absolute_position_embeddings", 1, &abs_pos, ctx);
    if (!st) st = vc_json_get_str(o, "norm_type", "layer_norm", &nt, ctx);
    c->act = VC_ACT_GELU_ERF;
    if (!st) st = vis_parse_act(o, "hidden_act", ctx, &c->act);
    if (!st) st = parse_top(root, top, c);
    if (st) return st;
    if (strcmp(nt, "layer_norm") && strcmp(nt, "rms_norm"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'norm_type' is '%s' (layer_norm and rms_norm are built)", ctx, nt);
    if (!(eps > 0 && eps < 1)) return vc_fail(VC_ERR_FORMAT, "%s: key 'layer_norm_eps' is %g, outside (0, 1)", ctx, eps);
    c->side = c->side_w = image / c->patch;
    if (c->side < 1 || c->side % c->merge)
        return vc_fail(VC_ERR_FORMAT, "%s: image_size %d over patch_size %d gives %d x %d patches, not whole %d x %d "
                       "blocks (downsample_ratio)", ctx, image, c->patch, c->side, c->side, c->merge, c->merge);
    c->rms = !strcmp(nt, "rms_norm"), c->post_ln = !mean_pool, c->feat = c->depth, c->eps = (float)eps;
    c->n_pos = abs_pos ? c->side * c->side + 1 : 0, c->tpatch = 1, c->out = (int)text_hidden;
    memset(c->full, 1, sizeof c->full);
    return VC_OK;
}

vc_tensor *vis_embed_cls(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p, int last) {
    int64_t tiles = p->R - p->N;
    int32_t *at = vc_graph_alloc(g, sizeof(int32_t) * (size_t)p->R, 0);
    int32_t *pos = vc_graph_alloc(g, sizeof(int32_t) * (size_t)p->R, 0);
    int32_t *zero = vc_graph_alloc(g, sizeof(int32_t) * (size_t)tiles, 0);
    if (!at || !pos || !zero) return NULL;
    /* at: the patches' rows, then the class tokens'; pos: each row's position */
    for (int64_t t = 0, j = 0; t < tiles; t++) {
        int64_t b = v->c.side * (int64_t)v->c.side, row = t * (b + 1);
        at[p->N + t] = (int32_t)row, pos[row] = last ? (int32_t)b : 0, zero[t] = 0;
        for (int64_t k = 0; k < b; k++, j++) at[j] = (int32_t)(row + 1 + k), pos[row + 1 + k] = (int32_t)(k + !last);
    }
    int32_t *dat = vc_graph_upload(g, at, sizeof(int32_t) * (size_t)p->R);
    if (!dat) return NULL;
    vc_tensor *cls = vc_op_embedding(g, slot(v, -1, G_CLS), zero, tiles);
    x = vc_op_add(g, vc_op_scatter_rows(g, x, dat, p->N, p->R), vc_op_scatter_rows(g, cls, dat + p->N, tiles, p->R));
    return v->c.n_pos ? vc_op_add(g, x, vc_op_embedding(g, slot(v, -1, G_POS), pos, p->R)) : x;
}

vc_tensor *vis_intern_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p) {
    int64_t mm = (int64_t)v->c.merge * v->c.merge, us[2] = { p->U, mm * v->c.dim };
    x = x ? vis_embed_cls(v, g, x, p, 0) : NULL;
    for (int b = 0; b < v->c.feat && x; b++) x = vis_block(v, g, b, x, p);
    if (v->c.post_ln && v->c.feat == v->c.depth)
        x = vc_op_layernorm(g, x, slot(v, -1, G_POST), slot(v, -1, G_POSTB), v->c.eps);
    x = x ? vc_op_gather_rows(g, x, p->R, p->order, p->N) : NULL; /* the class tokens dropped; merge blocks */
    x = x ? vc_reshape(g, x, 2, us) : NULL;
    x = vc_op_layernorm(g, x, slot(v, -1, G_LN), slot(v, -1, G_LNB), 1e-5f);
    x = vc_op_act(g, vis_lin(v, g, x, -1, G_FC0, G_FC0B), v->c.m_act);
    return vis_lin(v, g, x, -1, G_FC2, G_FC2B);
}
