/* Mistral 3's vision tower and projector (transformers' PixtralVisionModel and Mistral3MultiModalProjector): a Conv2d
 * patch embedding without bias, an RMSNorm (ln_pre), blocks of RMSNorms (eps 1e-5) around attention (q, k, v and o
 * without biases; a 2-D rope over the whole head: pair j < hd / 4 by the patch's row at theta^(-4 j / hd), the others
 * by its column at theta^(-(4 a + 2) / hd), a = j - hd / 4; attention within each image) and a SwiGLU MLP; then the
 * projector: an RMSNorm, the patch merger (each merge x merge block's values as F.unfold gives them, channel by
 * channel, through a linear), linear, GELU, linear. The blocks take the patches in whole merge blocks (each row keeps
 * its own angles), so that the merger's rows are consecutive. */
#include "vision_priv.h"
#include "verlc/json.h"
#include "tensor/graph_priv.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* the keys beside vision_config: the merge, the projector's bias and activation, the features' layer, the text
 * model's rms_norm_eps (the projector's norm) */
static vc_status parse_top(const cJSON *root, const char *top, vis_cfg *c) {
    double eps = 1e-5;
    const cJSON *tc = vc_json_member(root, "text_config");
    vc_status st = vis_get_int(root, "spatial_merge_size", 2, 1, 16, &c->merge, top);
    if (!st) st = vc_json_get_bool(root, "multimodal_projector_bias", 0, &c->m_bias, top);
    if (!st) st = vis_parse_projector(root, top, c);
    if (!st && cJSON_IsObject(tc)) st = vc_json_get_num(tc, "rms_norm_eps", 1e-5, &eps, top);
    if (st) return st;
    if (!(eps > 0 && eps < 1)) return vc_fail(VC_ERR_FORMAT, "%s: text_config.rms_norm_eps %g is outside (0, 1)", top, eps);
    c->eps = 1e-5f, c->m_eps = (float)eps;
    return VC_OK;
}

vc_status vis_parse_pixtral(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c) {
    char top[640]; /* (the keys beside vision_config) */
    vis_top_ctx(ctx, top, sizeof top);
    vc_status st = vis_parse_vit(o, ctx, c, 24, 1024, 16, 4096);
    if (!st) st = vis_get_int(o, "patch_size", 16, 1, 1024, &c->patch, ctx);
    if (!st) st = vis_get_int(o, "num_channels", 3, 3, 3, &c->in_ch, ctx);
    c->act = VC_ACT_GELU_ERF;
    if (!st) st = vis_parse_act(o, "hidden_act", ctx, &c->act);
    const cJSON *rp = vc_json_member(o, "rope_parameters");
    const char *type = "axial";
    c->theta = 10000.0;
    if (!st && rp) st = vc_json_get_str(rp, "rope_type", "axial", &type, ctx);
    if (!st && rp) st = vc_json_get_num(rp, "rope_theta", 10000.0, &c->theta, ctx);
    if (!st && vc_json_member(o, "rope_theta")) st = vc_json_get_num(o, "rope_theta", 10000.0, &c->theta, ctx);
    if (!st) st = parse_top(root, top, c);
    if (st) return st;
    if (strcmp(type, "axial"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: rope_parameters.rope_type '%s' (Pixtral's tower takes 'axial')", ctx, type);
    if (c->dim % c->heads || (c->dim / c->heads) % 4)
        return vc_fail(VC_ERR_FORMAT, "%s: width %d over %d heads is not a multiple of 4 per head", ctx, c->dim, c->heads);
    c->hd = c->dim / c->heads, c->tpatch = 1, c->out = (int)text_hidden;
    memset(c->full, 1, sizeof c->full);
    return VC_OK;
}

const char *vis_pixtral_slot(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim) {
    int64_t D = c->dim, I = c->inter, O = c->out, M = D * c->merge * c->merge;
    static const vis_name_rule B[] = { /* 0 D, 1 I */
        { B_N1, "attention_norm.weight", 0, -1 }, { B_N2, "ffn_norm.weight", 0, -1 },
        { B_QKV, "attention.q_proj.weight", 0, 0 }, { B_K, "attention.k_proj.weight", 0, 0 },
        { B_V, "attention.v_proj.weight", 0, 0 }, { B_PROJ, "attention.o_proj.weight", 0, 0 },
        { B_M0, "feed_forward.gate_proj.weight", 1, 0 }, { B_M1, "feed_forward.up_proj.weight", 1, 0 },
        { B_M2, "feed_forward.down_proj.weight", 0, 1 } };
    int64_t dim[2] = { D, I };
    const char *name = NULL;
    *ndim = 1;
    if (b >= 0) return vis_rule_name(B, sizeof B / sizeof B[0], k, dim, shape, ndim, &name) ? name : NULL;
    int bias = c->m_bias;
    switch (k) {
    case G_PATCH: shape[0] = D, shape[1] = 3 * (int64_t)c->patch * c->patch, *ndim = 2; return "patch_conv.weight";
    case G_PCONV: shape[0] = D; return "ln_pre.weight";
    case G_LN: shape[0] = D; return "multi_modal_projector.norm.weight";
    case G_DOWN: shape[0] = D, shape[1] = M, *ndim = 2; return "multi_modal_projector.patch_merger.merging_layer.weight";
    case G_FC0: shape[0] = O, shape[1] = D, *ndim = 2; return "multi_modal_projector.linear_1.weight";
    case G_FC0B: shape[0] = O; return bias ? "multi_modal_projector.linear_1.bias" : NULL;
    case G_FC2: shape[0] = O, shape[1] = O, *ndim = 2; return "multi_modal_projector.linear_2.weight";
    case G_FC2B: shape[0] = O; return bias ? "multi_modal_projector.linear_2.bias" : NULL;
    default: return NULL;
    }
}

/* the rope table [N, hd / 2] in processing order (whole merge blocks), as PixtralVisionRotaryEmbedding computes it */
vc_status vis_plan_pixtral(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p) {
    int m = v->c.merge, hd = v->c.hd, half = hd / 2, q = hd / 4;
    float inv[1024], inv2[512];
    if (half > 512) return vc_fail(VC_ERR_UNSUPPORTED, "vision: head width %d is too large", hd);
    for (int i = 0; i < half; i++) /* base ** (arange(0, hd, 2) / hd), then its even and odd entries */
        inv[i] = 1.0f / (float)pow((double)(float)v->c.theta, (double)((float)(2 * i) / (float)hd));
    for (int j = 0; j < q; j++) inv2[j] = inv[2 * j], inv2[q + j] = inv[2 * j + 1];
    float *cs = vc_graph_alloc(g, sizeof(float) * 2 * (size_t)(p->N * half), 0);
    if (!cs) return vc_graph_status(g);
    int64_t r = 0;
    for (int i = 0; i < im->n; i++) {
        const int32_t *gr = im->grid + 3 * i;
        if (gr[0] != 1)
            return vc_fail(VC_ERR_SHAPE, "vision: image %d's grid (%d, %d, %d): Mistral 3's tower takes single images", i,
                           gr[0], gr[1], gr[2]);
        for (int bh = 0; bh < gr[1] / m; bh++)
            for (int bw = 0; bw < gr[2] / m; bw++)
                for (int k = 0; k < m * m; k++, r++) {
                    int y = bh * m + k / m, x = bw * m + k % m;
                    for (int a = 0; a < half; a++) {
                        float ang = (float)(a < q ? y : x) * inv2[a];
                        cs[r * half + a] = cosf(ang), cs[p->N * half + r * half + a] = sinf(ang);
                    }
                }
    }
    float *dev = vc_graph_upload(g, cs, sizeof(float) * 2 * (size_t)(p->N * half));
    if (!dev) return vc_graph_status(g);
    p->cos = dev, p->sin = dev + p->N * half;
    return vis_plan_downsample(v, g, p);
}

static vc_tensor *block(vc_vision *v, vc_graph *g, int b, vc_tensor *x, const vis_plan *p) {
    const vis_cfg *c = &v->c;
    int64_t s3[3] = { p->N, c->heads, c->hd }, s2[2] = { p->N, c->dim };
    vc_tensor *h = vc_op_rmsnorm(g, x, slot(v, b, B_N1), c->dim, 1e-5f, 0.0f);
    vc_op_hold(h, 1);
    vc_tensor *q = vis_lin(v, g, h, b, B_QKV, -1), *k = vis_lin(v, g, h, b, B_K, -1), *val = vis_lin(v, g, h, b, B_V, -1);
    vc_op_hold(h, 0);
    q = q ? vc_op_rope(g, vc_reshape(g, q, 3, s3), p->cos, p->sin, c->heads, c->hd, c->hd, 0) : NULL;
    k = k ? vc_op_rope(g, vc_reshape(g, k, 3, s3), p->cos, p->sin, c->heads, c->hd, c->hd, 0) : NULL;
    val = val ? vc_reshape(g, val, 3, s3) : NULL;
    vc_attn_desc d = { .n_seq = p->n_full, .q_start = p->cu_full, .n_head = c->heads, .n_kv_head = c->heads,
                       .head_dim = c->hd, .v_head_dim = c->hd, .scale = 1.0f / sqrtf((float)c->hd), .causal = 0 };
    vc_tensor *o = vc_op_attention(g, q, k, val, &d);
    o = o ? vc_reshape(g, o, 2, s2) : NULL;
    x = vc_op_add(g, x, vis_lin(v, g, o, b, B_PROJ, -1));
    h = vc_op_rmsnorm(g, x, slot(v, b, B_N2), c->dim, 1e-5f, 0.0f);
    vc_op_hold(h, 1);
    vc_tensor *gt = vis_lin(v, g, h, b, B_M0, -1), *up = vis_lin(v, g, h, b, B_M1, -1);
    vc_op_hold(h, 0);
    return vc_op_add(g, x, vis_lin(v, g, vc_op_act_mul(g, gt, up, c->act), b, B_M2, -1));
}

vc_tensor *vis_pixtral_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p) {
    const vis_cfg *c = &v->c;
    int64_t n = p->N * c->dim, us[2] = { p->U, (int64_t)c->merge * c->merge * c->dim };
    x = x ? vc_op_gather_rows(g, x, p->N, p->order, p->N) : NULL; /* whole merge blocks */
    x = vc_op_rmsnorm(g, vc_op_linear(g, x, slot(v, -1, G_PATCH), NULL), slot(v, -1, G_PCONV), c->dim, 1e-5f, 0.0f);
    for (int b = 0; b < c->depth && x; b++) x = block(v, g, b, x, p);
    x = vc_op_rmsnorm(g, x, slot(v, -1, G_LN), c->dim, c->m_eps, 0.0f);
    x = x ? vc_op_gather_rows(g, x, n, p->down, n) : NULL; /* each block's values channel by channel (F.unfold) */
    x = x ? vc_reshape(g, x, 2, us) : NULL;
    x = vis_lin(v, g, x, -1, G_DOWN, -1);
    x = vc_op_act(g, vis_lin(v, g, x, -1, G_FC0, c->m_bias ? G_FC0B : -1), c->m_act);
    return vis_lin(v, g, x, -1, G_FC2, c->m_bias ? G_FC2B : -1);
}
