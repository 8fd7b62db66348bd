/* Llama 4's vision model and projector (transformers' Llama4VisionModel and Llama4MultiModalProjector): each tile of
 * image_size pixels (the processor's tiles and, past one tile, the whole image at one tile's size) is an unfolded patch
 * linear without bias, a class token after the patches, one learned position per row (the class token's last), a
 * LayerNorm (layernorm_pre); blocks of LayerNorm, q / k / v / o with biases and a 2-D rope on complex pairs (the first
 * quarter of a head's pairs by the patch's column + 1, the rest by its row + 1, the class token unrotated), a GELU MLP
 * with biases; layernorm_post; the class tokens dropped, the pixel shuffle (each 2 x 2 block of patches as one row of
 * (row, column, channel): the other towers' merged rows), the adapter's fc1, GELU, fc2, GELU (no biases) and the
 * projector's linear_1 (no bias). Attention runs within each tile. */
#include "vision_priv.h"
#include "verlc/json.h"
#include "tensor/graph_priv.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* the keys transformers' Llama4VisionModel reads (its MLPs' GELU is fixed whatever hidden_act says); the adapter's
 * widths must chain: the pixel shuffle's rows (4 D at ratio 0.5) into fc1 (intermediate_size), fc1's output
 * (projector_input_dim) into fc2 (projector_output_dim square), fc2's into linear_1 (vision_output_dim) */
vc_status vis_parse_llama4(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c) {
    int image = 448, pin = 4096, pout = 4096, vout = 4096;
    double eps = 1e-5, ratio = 0.5;
    const char *sel = NULL;
    (void)root;
    vc_status st = vis_parse_vit(o, ctx, c, 34, 768, 12, 5632);
    if (!st) st = vis_get_int(o, "num_channels", 3, 3, 3, &c->in_ch, ctx);
    if (!st) st = vis_get_int(o, "image_size", 448, 1, 1 << 16, &image, ctx);
    if (!st) st = vis_get_int(o, "patch_size", 14, 1, 1024, &c->patch, ctx);
    if (!st) st = vis_get_int(o, "projector_input_dim", 4096, 1, 1 << 20, &pin, ctx);
    if (!st) st = vis_get_int(o, "projector_output_dim", 4096, 1, 1 << 20, &pout, ctx);
    if (!st) st = vis_get_int(o, "vision_output_dim", 7680, 1, 1 << 20, &vout, ctx);
    if (!st) st = vc_json_get_num(o, "norm_eps", 1e-5, &eps, ctx);
    if (!st) st = vc_json_get_num(o, "pixel_shuffle_ratio", 0.5, &ratio, ctx);
    if (!st) st = vc_json_get_str(o, "vision_feature_select_strategy", "default", &sel, ctx);
    c->theta = 10000.0;
    const cJSON *rp = vc_json_member(o, "rope_parameters");
    if (!st && rp) st = vc_json_get_num(rp, "rope_theta", 10000.0, &c->theta, ctx);
    if (!st && vc_json_member(o, "rope_theta")) st = vc_json_get_num(o, "rope_theta", 10000.0, &c->theta, ctx);
    if (st) return st;
    c->merge = ratio > 0 ? (int)lround(1.0 / ratio) : 0;
    if (c->merge < 1 || c->merge > 16 || fabs(1.0 / c->merge - ratio) > 1e-9)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'pixel_shuffle_ratio' is %g, not 1 / n for an integer n in [1, 16]",
                       ctx, ratio);
    if (strcmp(sel, "default"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'vision_feature_select_strategy' is '%s' (transformers' Llama 4 "
                       "takes 'default')", ctx, sel);
    if (!(eps > 0 && eps < 1)) return vc_fail(VC_ERR_FORMAT, "%s: key 'norm_eps' is %g, outside (0, 1)", ctx, eps);
    c->side = c->side_w = image / c->patch;
    if (c->side < 1 || c->side % c->merge)
        return vc_fail(VC_ERR_FORMAT, "%s: image_size %d over patch_size %d gives %d x %d patches, not whole %d x %d "
                       "blocks (pixel_shuffle_ratio)", ctx, image, c->patch, c->side, c->side, c->merge, c->merge);
    if ((int64_t)c->dim * c->merge * c->merge != c->inter)
        return vc_fail(VC_ERR_FORMAT, "%s: the pixel shuffle's rows are %d wide (hidden_size x %d); the adapter's fc1 "
                       "reads intermediate_size %d", ctx, c->dim * c->merge * c->merge, c->merge * c->merge, c->inter);
    if (pin != pout || vout != pout)
        return vc_fail(VC_ERR_FORMAT, "%s: projector_input_dim %d, projector_output_dim %d and vision_output_dim %d must "
                       "be equal (fc1's output is fc2's input; fc2's output linear_1's)", ctx, pin, pout, vout);
    if (c->dim % c->heads || (c->dim / c->heads) % 4)
        return vc_fail(VC_ERR_FORMAT, "%s: width %d over %d heads is not a multiple of 4 per head", ctx, c->dim, c->heads);
    c->m_inter = pout, c->act = VC_ACT_GELU_ERF, c->eps = (float)eps, c->hd = c->dim / c->heads;
    c->n_pos = c->side * c->side + 1, c->tpatch = 1, c->out = (int)text_hidden;
    memset(c->full, 1, sizeof c->full);
    return VC_OK;
}

const char *vis_llama4_slot(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim) {
    int64_t D = c->dim, I = c->inter, P = c->m_inter, O = c->out;
    static const vis_name_rule B[] = { /* 0 D, 1 I */
        { B_N1, "input_layernorm.weight", 0, -1 }, { B_N1B, "input_layernorm.bias", 0, -1 },
        { B_N2, "post_attention_layernorm.weight", 0, -1 }, { B_N2B, "post_attention_layernorm.bias", 0, -1 },
        { B_QKV, "self_attn.q_proj.weight", 0, 0 }, { B_QKVB, "self_attn.q_proj.bias", 0, -1 },
        { B_K, "self_attn.k_proj.weight", 0, 0 }, { B_KB, "self_attn.k_proj.bias", 0, -1 },
        { B_V, "self_attn.v_proj.weight", 0, 0 }, { B_VB, "self_attn.v_proj.bias", 0, -1 },
        { B_PROJ, "self_attn.o_proj.weight", 0, 0 }, { B_PROJB, "self_attn.o_proj.bias", 0, -1 },
        { B_M0, "mlp.fc1.weight", 1, 0 }, { B_M0B, "mlp.fc1.bias", 1, -1 },
        { B_M1, "mlp.fc2.weight", 0, 1 }, { B_M1B, "mlp.fc2.bias", 0, -1 } };
    static const vis_name_rule G[] = { /* 0 D, 1 I, 2 P, 3 O, 4 C P^2, 5 positions, 6 one */
        { G_PATCH, "patch_embedding.linear.weight", 0, 4 }, { G_CLS, "class_embedding", 6, 0 },
        { G_POS, "positional_embedding_vlm", 5, 0 }, { G_LN, "layernorm_pre.weight", 0, -1 },
        { G_LNB, "layernorm_pre.bias", 0, -1 }, { G_POST, "layernorm_post.weight", 0, -1 },
        { G_POSTB, "layernorm_post.bias", 0, -1 }, { G_FC0, "vision_adapter.mlp.fc1.weight", 2, 1 },
        { G_FC2, "vision_adapter.mlp.fc2.weight", 2, 2 }, { G_MPROJ, "multi_modal_projector.linear_1.weight", 3, 2 } };
    int64_t dim[7] = { D, I, P, O, (int64_t)c->in_ch * c->patch * c->patch, c->n_pos, 1 };
    const char *name = NULL;
    *ndim = 1;
    if (b >= 0) return vis_rule_name(B, sizeof B / sizeof B[0], k, dim, shape, ndim, &name) ? name : NULL;
    return vis_rule_name(G, sizeof G / sizeof G[0], k, dim, shape, ndim, &name) ? name : NULL;
}

/* the rope table [R, hd / 2] over the blocks' rows (each tile's class token, then its patches row by row), as
 * Llama4VisionRotaryEmbedding computes it in float32: pair a < hd / 4 at (column + 1) f[a], the rest at (row + 1)
 * f[a - hd / 4], f[j] = 1 / theta^(2 j / (hd / 2)); the class token's angles 0 */
vc_status vis_plan_llama4(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p) {
    int hd = v->c.hd, half = hd / 2, q = hd / 4, side = v->c.side;
    float f[512];
    if (q > 512) return vc_fail(VC_ERR_UNSUPPORTED, "vision: head width %d is too large", hd);
    for (int j = 0; j < q; j++)
        f[j] = 1.0f / (float)pow((double)(float)v->c.theta, (double)((float)(2 * j) / (float)half));
    float *cs = vc_graph_alloc(g, sizeof(float) * 2 * (size_t)(p->R * half), 0);
    if (!cs) return vc_graph_status(g);
    int64_t r = 0;
    for (int i = 0; i < im->n; i++)
        for (int t = 0; t < im->grid[3 * i]; t++)
            for (int64_t k = -1; k < (int64_t)side * side; k++, r++)
                for (int a = 0; a < half; a++) {
                    int64_t at = k < 0 ? 0 : a < q ? k % side + 1 : k / side + 1;
                    float ang = (float)at * f[a < q ? a : a - q];
                    cs[r * half + a] = cosf(ang);
                    cs[p->R * half + r * half + a] = sinf(ang);
                }
    float *dev = vc_graph_upload(g, cs, sizeof(float) * 2 * (size_t)(p->R * half));
    if (!dev) return vc_graph_status(g);
    p->cos = dev, p->sin = dev + p->R * half;
    return VC_OK;
}

vc_tensor *vis_llama4_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p) {
    int64_t mm = (int64_t)v->c.merge * v->c.merge, us[2] = { p->U, mm * v->c.dim };
    x = x ? vis_embed_cls(v, g, x, p, 1) : NULL;
    x = vc_op_layernorm(g, x, slot(v, -1, G_LN), slot(v, -1, G_LNB), v->c.eps);
    for (int b = 0; b < v->c.depth && x; b++) x = vis_block(v, g, b, x, p);
    x = vc_op_layernorm(g, x, slot(v, -1, G_POST), slot(v, -1, G_POSTB), v->c.eps);
    x = x ? vc_op_gather_rows(g, x, p->R, p->order, p->N) : NULL; /* the class tokens dropped; merge blocks */
    x = x ? vc_reshape(g, x, 2, us) : NULL;
    x = vc_op_act(g, vis_lin(v, g, x, -1, G_FC0, -1), VC_ACT_GELU_ERF);
    x = vc_op_act(g, vis_lin(v, g, x, -1, G_FC2, -1), VC_ACT_GELU_ERF);
    return vis_lin(v, g, x, -1, G_MPROJ, -1);
}
