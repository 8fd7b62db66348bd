/* Gemma 4's vision tower (transformers' Gemma4VisionModel) and its embedder (Gemma4MultimodalEmbedder): each image's
 * patches (the processor's rows, P x P x RGB each, values in [0, 1], taken as 2 (x - 0.5)) through a linear patch
 * embedding plus a learned position per column and per row (one table of both: [2, S, D]); blocks of Gemma's RMSNorms
 * around attention and the MLP (input, post-attention, pre- and post-feedforward; weights applied as they are), q and k
 * normed per head, v per head without a weight, a 2-D rope (the first half of each head rotated by the patch's column,
 * the second by its row, each half's pairs j and j + hd / 4), grouped key / value heads, attention scale 1 within each
 * image, a GELU-tanh SwiGLU; each linear optionally clipped (use_clipped_linears: its input and output clamped to the
 * checkpoint's bounds, buffers never trained); then the mean of each k x k block of patches times sqrt(D), optionally
 * standardized ((x - std_bias) std_scale, buffers), and the embedder: an RMSNorm without weight and a projection to
 * the text width. The blocks take the patches in whole k x k blocks (their order does not change attention within an
 * image: each row keeps its own rope angles), so that the pooled rows are consecutive. */
#include "vision_priv.h"
#include "verlc/json.h"
#include "tensor/graph_priv.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* the 7 clipped linears in B_CLIP's order, their slots, and their bounds' names */
static const char *const LIN[7] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };
static const int LIN_SLOT[7] = { B_QKV, B_K, B_V, B_PROJ, B_M0, B_M1, B_M2 };
static const char *const BOUND[4] = { "input_min", "input_max", "output_min", "output_max" };

static vc_status parse_rope(const cJSON *o, const char *ctx, vis_cfg *c) {
    const cJSON *rp = vc_json_member(o, "rope_parameters");
    const char *type = "axial";
    c->theta = 100.0;
    if (!rp) return VC_OK;
    vc_status st = vc_json_get_str(rp, "rope_type", "axial", &type, ctx);
    if (!st) st = vc_json_get_num(rp, "rope_theta", 100.0, &c->theta, ctx);
    if (st) return st;
    if (strcmp(type, "axial"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: rope_parameters.rope_type '%s' (Gemma 4's tower takes 'axial')", ctx, type);
    if (!(c->theta > 0)) return vc_fail(VC_ERR_FORMAT, "%s: rope_parameters.rope_theta %g is not positive", ctx, c->theta);
    return VC_OK;
}

/* text_config.use_bidirectional_attention: "vision" makes each image's tokens attend both ways in the sliding layers */
static vc_status parse_bidi(const cJSON *root, const char *top, vis_cfg *c) {
    const char *bi = NULL;
    const cJSON *tc = vc_json_member(root, "text_config");
    vc_status st = cJSON_IsObject(tc) ? vc_json_get_str(tc, "use_bidirectional_attention", NULL, &bi, top) : VC_OK;
    c->bidi = !st && bi && !strcmp(bi, "vision") ? 2 : 0;
    return st;
}

vc_status vis_parse_gemma4(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, vis_cfg *c) {
    double eps = 1e-6;
    int bias = 0;
    char top[640]; /* (the keys beside vision_config) */
    vis_top_ctx(ctx, top, sizeof top);
    vc_status st = vis_parse_vit(o, ctx, c, 16, 768, 12, 3072);
    if (!st) st = vis_get_int(o, "num_key_value_heads", c->heads, 1, 1024, &c->kv_heads, ctx);
    if (!st) st = vis_get_int(o, "head_dim", 64, 4, 1024, &c->hd, ctx);
    if (!st) st = vis_get_int(o, "patch_size", 16, 1, 1024, &c->patch, ctx);
    if (!st) st = vis_get_int(o, "pooling_kernel_size", 3, 1, 64, &c->merge, ctx);
    if (!st) st = vis_get_int(o, "position_embedding_size", 10240, 1, 1 << 20, &c->side, ctx);
    if (!st) st = vc_json_get_num(o, "rms_norm_eps", 1e-6, &eps, ctx);
    if (!st) st = vc_json_get_bool(o, "use_clipped_linears", 0, &c->clipped, ctx);
    if (!st) st = vc_json_get_bool(o, "standardize", 0, &c->standardize, ctx);
    if (!st && cJSON_IsBool(vc_json_member(o, "attention_bias"))) st = vc_json_get_bool(o, "attention_bias", 0, &bias, ctx);
    c->act = VC_ACT_GELU_TANH;
    if (!st) st = vis_parse_act(o, "hidden_activation", ctx, &c->act);
    if (!st) st = parse_rope(o, ctx, c);
    if (!st) st = parse_bidi(root, top, c);
    if (st) return st;
    if (!(eps > 0 && eps < 1)) return vc_fail(VC_ERR_FORMAT, "%s: key 'rms_norm_eps' is %g, outside (0, 1)", ctx, eps);
    if (c->hd % 4 || c->heads % c->kv_heads)
        return vc_fail(VC_ERR_FORMAT, "%s: head_dim %d (a multiple of 4 for the 2-D rope) or %d heads over %d key / value "
                       "heads do not fit", ctx, c->hd, c->heads, c->kv_heads);
    /* (transformers' Gemma4ClippableLinear has no bias whatever attention_bias says) */
    c->eps = (float)eps, c->tpatch = 1, c->in_ch = 3, c->out = (int)text_hidden, c->n_pos = 2 * c->side;
    c->side_w = c->side;
    memset(c->full, 1, sizeof c->full);
    return VC_OK;
}

const char *vis_gemma4_slot(const vis_cfg *c, int b, int k, int64_t *shape, int *ndim) {
    static char bound[64];
    int64_t D = c->dim, I = c->inter, Q = (int64_t)c->heads * c->hd, KV = (int64_t)c->kv_heads * c->hd;
    *ndim = 1;
    if (b >= 0 && k >= B_CLIP && k < B_CLIP + 28) { /* a clipped linear's bound: a scalar */
        if (!c->clipped) return NULL;
        snprintf(bound, sizeof bound, "%s.%s", LIN[(k - B_CLIP) / 4], BOUND[(k - B_CLIP) % 4]);
        shape[0] = 1;
        return bound;
    }
    static const vis_name_rule B[] = { /* rows, cols: 0 D, 1 Q, 2 KV, 3 I, 4 hd */
        { B_N1, "input_layernorm.weight", 0, -1 }, { B_POST1, "post_attention_layernorm.weight", 0, -1 },
        { B_N2, "pre_feedforward_layernorm.weight", 0, -1 }, { B_POST2, "post_feedforward_layernorm.weight", 0, -1 },
        { B_QKV, "self_attn.q_proj.linear.weight", 1, 0 }, { B_K, "self_attn.k_proj.linear.weight", 2, 0 },
        { B_V, "self_attn.v_proj.linear.weight", 2, 0 }, { B_PROJ, "self_attn.o_proj.linear.weight", 0, 1 },
        { B_QN, "self_attn.q_norm.weight", 4, -1 }, { B_KN, "self_attn.k_norm.weight", 4, -1 },
        { B_M0, "mlp.gate_proj.linear.weight", 3, 0 }, { B_M1, "mlp.up_proj.linear.weight", 3, 0 },
        { B_M2, "mlp.down_proj.linear.weight", 0, 3 } };
    int64_t dim[5] = { D, Q, KV, I, c->hd };
    const char *name = NULL;
    if (b >= 0) return vis_rule_name(B, sizeof B / sizeof B[0], k, dim, shape, ndim, &name) ? name : NULL;
    switch (k) {
    case G_PATCH: shape[0] = D, shape[1] = 3 * (int64_t)c->patch * c->patch, *ndim = 2; return "patch_embedder.input_proj.weight";
    case G_POS: shape[0] = c->n_pos, shape[1] = D, *ndim = 2; return "patch_embedder.position_embedding_table";
    case G_FC0: shape[0] = c->out, shape[1] = D, *ndim = 2; return "embed_vision.embedding_projection.weight";
    case G_STDB: shape[0] = D; return c->standardize ? "std_bias" : NULL;
    case G_STDS: shape[0] = D; return c->standardize ? "std_scale" : NULL;
    default: return NULL;
    }
}

int vis_gemma4_buffer(const vis_cfg *c, int s, float *init) {
    int b, k;
    slot_bk(c, s, &b, &k);
    if (b >= 0 && k >= B_CLIP && k < B_CLIP + 28) return *init = (k - B_CLIP) % 2 ? INFINITY : -INFINITY, 1;
    if (b == -1 && (k == G_STDB || k == G_STDS)) return *init = k == G_STDS ? 1.0f : 0.0f, 1;
    return 0;
}

/* one head's half-rope table for `heads` heads: row (j heads + h) 2 + part, the processing row j's column (part 0) or
 * row (part 1) times theta^(-4 a / hd), a < hd / 4 (in float as torch computes them) */
static vc_status rope_table(const vc_vision *v, vc_graph *g, const int32_t *xy, int64_t N, int heads, float **cs, float **sn) {
    int q = v->c.hd / 4, half = v->c.hd / 2;
    float inv[256];
    if (q > 256) return vc_fail(VC_ERR_UNSUPPORTED, "vision: head width %d is too large", v->c.hd);
    for (int a = 0; a < q; a++)
        inv[a] = 1.0f / (float)pow((double)(float)v->c.theta, (double)((float)(2 * a) / (float)half));
    int64_t R = N * heads * 2;
    float *t = vc_graph_alloc(g, sizeof(float) * 2 * (size_t)(R * q), 0);
    if (!t) return vc_graph_status(g);
    for (int64_t j = 0; j < N; j++)
        for (int h = 0; h < heads; h++)
            for (int part = 0; part < 2; part++) {
                int64_t r = (j * heads + h) * 2 + part;
                for (int a = 0; a < q; a++) {
                    float ang = (float)xy[2 * j + part] * inv[a];
                    t[r * q + a] = cosf(ang), t[R * q + r * q + a] = sinf(ang);
                }
            }
    float *dev = vc_graph_upload(g, t, sizeof(float) * 2 * (size_t)(R * q));
    if (!dev) return vc_graph_status(g);
    *cs = dev, *sn = dev + R * q;
    return VC_OK;
}

/* each processing row's (column, row): the patches in whole k x k blocks, image by image (plan_order's order) */
vc_status vis_plan_gemma4(const vc_vision *v, const vc_images *im, vc_graph *g, vis_plan *p) {
    int m = v->c.merge;
    int32_t *xy = vc_graph_alloc(g, sizeof(int32_t) * 2 * (size_t)p->N, 0);
    if (!xy) return vc_graph_status(g);
    int64_t r = 0;
    for (int i = 0; i < im->n; i++) {
        const int32_t *gr = im->grid + 3 * i;
        if (gr[0] != 1 || gr[1] > v->c.side || gr[2] > v->c.side)
            return vc_fail(VC_ERR_SHAPE, "vision: image %d's grid (%d, %d, %d): Gemma 4's tower takes single images of at "
                           "most %d patches a side (position_embedding_size)", i, gr[0], gr[1], gr[2], v->c.side);
        for (int bh = 0; bh < gr[1] / m; bh++)
            for (int bw = 0; bw < gr[2] / m; bw++)
                for (int k = 0; k < m * m; k++, r++) xy[2 * r] = bw * m + k % m, xy[2 * r + 1] = bh * m + k / m;
    }
    vc_status st = rope_table(v, g, xy, p->N, v->c.heads, &p->qcos, &p->qsin);
    if (!st) st = rope_table(v, g, xy, p->N, v->c.kv_heads, &p->kcos, &p->ksin);
    if (st) return st;
    /* the positions' table rows: columns in the first S, rows in the second */
    int32_t *ids = vc_graph_alloc(g, sizeof(int32_t) * 2 * (size_t)p->N, 0);
    if (!ids) return vc_graph_status(g);
    for (int64_t j = 0; j < p->N; j++) ids[j] = xy[2 * j], ids[p->N + j] = v->c.side + xy[2 * j + 1];
    p->pos_ids = ids; /* (host: vc_op_embedding uploads its ids) */
    return VC_OK;
}

/* linear j of block b (slot k) with its clip bounds, where the config clips and the checkpoint bounds it */
static vc_tensor *clin(vc_vision *v, vc_graph *g, vc_tensor *x, int b, int j) {
    const float *cl = v->c.clipped ? v->clip + ((int64_t)b * 7 + j) * 4 : NULL;
    if (cl && (isfinite(cl[0]) || isfinite(cl[1]))) x = vc_op_clamp(g, x, cl[0], cl[1]);
    vc_tensor *y = vis_lin(v, g, x, b, LIN_SLOT[j], -1);
    if (cl && (isfinite(cl[2]) || isfinite(cl[3]))) y = vc_op_clamp(g, y, cl[2], cl[3]);
    return y;
}

/* x [N, heads hd]: each head's halves rotated by the tables' angles (one row a half) */
static vc_tensor *rope2(vc_graph *g, vc_tensor *x, int64_t N, int heads, int hd, const float *cs, const float *sn) {
    int64_t s3[3] = { N * heads * 2, 1, hd / 2 }, back[3] = { N, heads, hd };
    x = x ? vc_reshape(g, x, 3, s3) : NULL;
    x = vc_op_rope(g, x, cs, sn, 1, hd / 2, hd / 2, 0);
    return x ? vc_reshape(g, x, 3, back) : NULL;
}

static vc_tensor *block(vc_vision *v, vc_graph *g, int b, vc_tensor *x, const vis_plan *p) {
    const vis_cfg *c = &v->c;
    int64_t N = p->N, hd = c->hd, s3[3] = { N, c->kv_heads, hd }, s2[2] = { N, (int64_t)c->heads * hd };
    vc_tensor *h = vc_op_rmsnorm(g, x, slot(v, b, B_N1), c->dim, c->eps, 0.0f);
    vc_op_hold(h, 1);
    vc_tensor *q = clin(v, g, h, b, 0), *k = clin(v, g, h, b, 1), *val = clin(v, g, h, b, 2);
    vc_op_hold(h, 0);
    q = rope2(g, vc_op_rmsnorm(g, q, slot(v, b, B_QN), hd, c->eps, 0.0f), N, c->heads, (int)hd, p->qcos, p->qsin);
    k = rope2(g, vc_op_rmsnorm(g, k, slot(v, b, B_KN), hd, c->eps, 0.0f), N, c->kv_heads, (int)hd, p->kcos, p->ksin);
    val = vc_op_rmsnorm(g, val, NULL, hd, c->eps, 0.0f);
    val = val ? vc_reshape(g, val, 3, s3) : NULL;
    vc_attn_desc d = { .n_seq = p->n_full, .q_start = p->cu_full, .n_head = c->heads, .n_kv_head = c->kv_heads,
                       .head_dim = (int)hd, .v_head_dim = (int)hd, .scale = 1.0f, .causal = 0 };
    vc_tensor *o = vc_op_attention(g, q, k, val, &d);
    o = o ? vc_reshape(g, o, 2, s2) : NULL;
    o = vc_op_rmsnorm(g, clin(v, g, o, b, 3), slot(v, b, B_POST1), c->dim, c->eps, 0.0f);
    x = vc_op_add(g, x, o);
    h = vc_op_rmsnorm(g, x, slot(v, b, B_N2), c->dim, c->eps, 0.0f);
    vc_op_hold(h, 1);
    vc_tensor *gt = clin(v, g, h, b, 4), *up = clin(v, g, h, b, 5);
    vc_op_hold(h, 0);
    vc_tensor *y = clin(v, g, vc_op_act_mul(g, gt, up, c->act), b, 6);
    return vc_op_add(g, x, vc_op_rmsnorm(g, y, slot(v, b, B_POST2), c->dim, c->eps, 0.0f));
}

/* a constant [n] of value c (no gradient) */
static vc_tensor *constant(vc_graph *g, int64_t n, float c) {
    float *h = vc_graph_alloc(g, sizeof(float) * (size_t)n, 0);
    if (!h) return NULL;
    for (int64_t i = 0; i < n; i++) h[i] = c;
    float *d = vc_graph_upload(g, h, sizeof(float) * (size_t)n);
    return d ? vc_tensor_wrap(g, d, 1, (int64_t[]){ n }) : NULL;
}

vc_tensor *vis_gemma4_forward(vc_vision *v, vc_graph *g, vc_tensor *x, const vis_plan *p) {
    const vis_cfg *c = &v->c;
    int64_t N = p->N, D = c->dim, mm = (int64_t)c->merge * c->merge, us[2] = { p->U, mm * D };
    int64_t C = x ? x->shape[1] : 0;
    x = vc_op_scale(g, vc_op_affine_cols(g, x, NULL, constant(g, C, -0.5f), 1), 2.0f); /* 2 (x - 0.5) */
    x = x ? vc_op_gather_rows(g, x, N, p->order, N) : NULL;                          /* whole k x k blocks */
    x = vis_lin(v, g, x, -1, G_PATCH, -1);
    vc_tensor *pe = vc_op_add(g, vc_op_embedding(g, slot(v, -1, G_POS), p->pos_ids, N),
                              vc_op_embedding(g, slot(v, -1, G_POS), p->pos_ids + N, N));
    x = vc_op_add(g, x, pe);
    for (int b = 0; b < c->depth && x; b++) x = block(v, g, b, x, p);
    x = x ? vc_reshape(g, x, 2, us) : NULL; /* the mean of each block, times sqrt(D) */
    vc_tensor *sum = NULL;
    for (int64_t k = 0; k < mm && x; k++) {
        vc_tensor *part = vc_op_slice_cols(g, x, mm * D, k * D, (k + 1) * D);
        sum = k ? vc_op_add(g, sum, part) : part;
    }
    x = vc_op_scale(g, vc_op_scale(g, sum, 1.0f / (float)mm), (float)sqrt((double)D));
    if (c->standardize)
        x = vc_op_affine_cols(g, vc_op_affine_cols(g, x, NULL, vc_op_scale(g, slot(v, -1, G_STDB), -1.0f), 1),
                              slot(v, -1, G_STDS), NULL, 1);
    x = vc_op_rmsnorm(g, x, NULL, D, c->eps, 0.0f);
    return vis_lin(v, g, x, -1, G_FC0, -1);
}
