/* MoonViT's keys: Kimi-VL's tower (vision_config moonvit) and Kimi K2.5 / K2.6's (kimi_k25_vision, MoonViT3d), which
 * on images is the same tower (a learned position table resampled by F.interpolate's bicubic filter, the temporal
 * sinusoid's row 0 adding nothing to a single frame; the 2-D rope on interleaved pairs; merge x merge blocks) behind
 * its own projector's names (mm_projector.pre_norm, proj.0, proj.2). */
#include "verlc/json.h"
#include "vision_priv.h"
#include <string.h>

/* a string key that verlc builds at one value only (absent: that value) */
static vc_status only(const cJSON *o, const char *key, const char *want, const char *ctx) {
    const char *s = NULL;
    vc_status st = vc_json_get_str(o, key, NULL, &s, ctx);
    if (!st && s && strcmp(s, want))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: key '%s' is '%s' (only '%s' is built)", ctx, key, s, want);
    return st;
}

/* the remote code's constants (LayerNorms of eps 1e-5, GELU-tanh, biases on wqkv and wo, a rope base of 10000, grids
 * of at most 512 x 512 patches); Kimi K2.5's keys as its hub config names them (vt_*, init_pos_emb_*) or as
 * transformers 5 does, its projector's epsilon and activation (vision_config's projector_ln_eps and
 * projector_hidden_act, or the top level's projection_layer_norm_eps) */
vc_status vis_parse_moon(const cJSON *o, const cJSON *root, int64_t text_hidden, const char *ctx, int k25, vis_cfg *c) {
    char top[640];
    double eps = 1e-5;
    int mm = 0;
    vis_top_ctx(ctx, top, sizeof top);
    vc_status st = vis_get_int(o, "vt_num_hidden_layers num_hidden_layers", 27, 1, VIS_MAX_DEPTH, &c->depth, ctx);
    if (!st) st = vis_get_int(o, "vt_hidden_size hidden_size", 1152, 2, 1 << 16, &c->dim, ctx);
    if (!st) st = vis_get_int(o, "vt_num_attention_heads num_attention_heads", 16, 1, 1024, &c->heads, ctx);
    if (!st) st = vis_get_int(o, "vt_intermediate_size intermediate_size", 4304, 1, 1 << 20, &c->inter, ctx);
    if (!st) st = vis_get_int(o, "patch_size", 14, 1, 1024, &c->patch, ctx);
    if (!st) st = vis_get_int(o, "init_pos_emb_height pos_emb_height", 64, 1, 512, &c->side, ctx);
    if (!st) st = vis_get_int(o, "init_pos_emb_width pos_emb_width", 64, 1, 512, &c->side_w, ctx);
    if (!st) st = vis_square_key(o, "merge_kernel_size", 2, ctx, &c->merge);
    if (!st && c->merge > 64) st = vc_fail(VC_ERR_UNSUPPORTED, "%s: key 'merge_kernel_size' is %d, over 64", ctx, c->merge);
    c->act = VC_ACT_GELU_TANH, c->m_act = VC_ACT_GELU_ERF;
    if (!st && k25) st = vis_parse_act(o, "hidden_act", ctx, &c->act);
    if (!st && k25) st = vis_parse_act(o, "projector_hidden_act", ctx, &c->m_act);
    if (!st && k25) st = only(o, "pos_emb_type", "divided_fixed", ctx);
    if (!st && k25) st = only(o, "merge_type", "sd2_tpool", ctx);
    if (!st && k25) st = only(o, "mm_projector_type", "patchmerger", ctx);
    if (!st && k25) st = vc_json_get_num(root, "projection_layer_norm_eps", 1e-5, &eps, top);
    if (!st && k25) st = vc_json_get_num(o, "projector_ln_eps", eps, &eps, ctx);
    if (!st && k25) st = vis_get_int(o, "mm_hidden_size", c->dim, 1, 1 << 20, &mm, ctx);
    if (!st && k25 && mm != c->dim)
        st = vc_fail(VC_ERR_FORMAT, "%s: key 'mm_hidden_size' is %d; the projector's norm reads the tower's width %d", ctx,
                     mm, c->dim);
    if (!st && k25) st = vis_get_int(root, "projection_hidden_size", c->dim, 1, 1 << 20, &mm, top);
    if (!st && k25 && mm != c->dim)
        st = vc_fail(VC_ERR_FORMAT, "%s: key 'projection_hidden_size' is %d; the projector's norm reads the tower's width "
                     "%d", top, mm, c->dim);
    if (!st && !(eps > 0 && eps < 1)) st = vc_fail(VC_ERR_FORMAT, "%s: the projector's epsilon %g is outside (0, 1)", ctx, eps);
    if (st) return st;
    c->k25 = k25, c->m_eps = (float)eps;
    c->n_pos = c->side * c->side_w, c->tpatch = 1, c->in_ch = 3, c->out = (int)text_hidden;
    c->eps = 1e-5f, c->theta = 10000.0;
    memset(c->full, 1, sizeof c->full);
    return VC_OK;
}
