/* Trained multi-token-prediction layers (verl's model.mtp.enable_train; Megatron's MultiTokenPredictionBlock): depth k
 * (k = 0 ..) reads the hidden states h of depth k - 1 (the main model's final, normed ones for k = 0) and the token
 * embeddings of the ids k + 1 positions on within each sequence, and computes
 *     x = proj(cat(hnorm(h), enorm(emb)))     (MiMo's and MiMo-V2-Flash's [hidden, embedding]; Megatron's, Qwen's,
 *                                              DeepSeek's and GLM's [embedding, hidden])
 *     x = final_norm(decoder_layer(x))        (one decoder layer at the same positions)
 * whose LM-head log-probs (the head's weights detached) predict the token k + 2 positions on. The layers are rows
 * n_layer + 1 .. of the model's slots, each configured as the model's last decoder layer (MiMo-V2-Flash's: its last
 * sliding-window one, with a dense MLP), so the one decoder runs them. */
#include "decoder_priv.h"
#include "model_internal.h"
#include <string.h>

vc_status vc_config_mtp_rows(vc_model_config *c, int n, const char *dir) {
    int L = (int)c->n_layer - 1; /* the layer kind an MTP layer is: MiMo's like every layer, DeepSeek's a MoE one */
    while (c->arch->mtp_sliding_dense && L >= 0 && !c->window[L]) L--; /* (MiMo-V2-Flash's: a sliding one, dense) */
    if (n <= 0)
        return vc_fail(VC_ERR_ARG, "%s/config.json declares no multi-token-prediction layers "
                       "(num_nextn_predict_layers or mtp_num_hidden_layers)", dir);
    if (!c->arch->mtp_prefix)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: training multi-token-prediction layers (model.mtp.enable_train) is built "
                       "for MiMo's, MiMo-V2-Flash's, Qwen3-Next's / Qwen3.5's and DeepSeek-V3's / GLM-4.5's layouts, "
                       "not yet for %s's", dir, c->model_type);
    if (n > VC_MTP_MAX || (n > 1 && c->arch->mtp_own_prefix && !strstr(c->arch->mtp_own_prefix, "%d")))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: %d MTP layers: verlc trains %s", dir, n,
                       n > VC_MTP_MAX ? "up to 8" : "one of this family's (its projection and norms are shared)");
    if (c->n_layer + 1 + n > VC_MAX_LAYERS)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: %lld layers and %d MTP layers: more than %d rows", dir,
                       (long long)c->n_layer, n, VC_MAX_LAYERS);
    if (L < 0 || c->linear[L] || c->kv_src[L] || c->block[L] != VC_BLOCK_FULL || c->ple_dim || c->dsa_topk ||
        c->norm_res.on || c->emb_dim)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: MTP layers of a %s decoder whose last layer is not plain attention "
                       "and MLP are not built", dir, c->model_type);
    for (int k = 0; k < n; k++) {
        int r = (int)c->n_layer + 1 + k;
        c->window[r] = c->window[L], c->chunk[r] = c->chunk[L], c->nope[r] = c->nope[L];
        c->is_moe[r] = c->is_moe[L], c->linear[r] = 0, c->block[r] = c->block[L];
        c->layer_hd[r] = c->layer_hd[L], c->layer_nkv[r] = c->layer_nkv[L], c->layer_nh[r] = c->layer_nh[L];
        c->kv_src[r] = 0, c->layer_inter[r] = c->layer_inter[L], c->dsa_shared[r] = 0;
        if (c->arch->mtp_sliding_dense) c->is_moe[r] = 0, c->layer_inter[r] = 0;
    }
    c->n_mtp = n;
    return VC_OK;
}

vc_status vc_model_load_mtp(const char *dir, vc_model **out) { return vc_model_load_opt(dir, 1, out); }

/* the ids `shift` positions on within each sequence, 0 past its end (Megatron's roll_tensor of packed sequences) */
static const int32_t *rolled_ids(fwd_ctx *f, int64_t shift) {
    const vc_batch *b = f->b;
    int32_t *ids = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(f->T ? f->T : 1), 0);
    for (int s = 0; ids && s < b->n_seq; s++)
        for (int64_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
            ids[t] = t + shift < b->cu_seqlens[s + 1] ? b->ids[t + shift] : 0;
    return ids;
}

/* MTP row `row` over the hidden states prev [T, H] and the embeddings of ids (one per row): its final normed hidden
 * states; detach: no gradient into the embeddings or prev */
static vc_tensor *mtp_depth(fwd_ctx *f, int row, const int32_t *ids, vc_tensor *prev, int detach) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    int64_t H = c->hidden;
    int grad = vc_graph_grad_enabled(g);
    if (detach) vc_graph_set_grad(g, 0); /* (detach_encoder: the embeddings and h as constants) */
    vc_tensor *e = vc_op_embedding(g, vc_w(f->m, -1, VC_W_TOK_EMBD), ids, f->T);
    if (e && c->emb_scale) e = vc_op_scale(g, e, c->emb_scale);
    vc_graph_set_grad(g, grad);
    if (detach) prev = vc_tensor_wrap(g, prev->data, prev->ndim, prev->shape);
    vc_tensor *en = e ? vc_dec_norm(f, e, row, VC_W_MTP_ENORM, 0) : NULL;
    vc_tensor *hn = prev ? vc_dec_norm(f, prev, row, VC_W_MTP_HNORM, 0) : NULL;
    vc_tensor *x = c->arch->mtp_hidden_first ? vc_op_concat_cols(g, hn, H, en, H, 1)
                                             : vc_op_concat_cols(g, en, H, hn, H, 1);
    x = vc_op_linear(g, x, vc_w(f->m, row, VC_W_MTP_PROJ), NULL);
    x = x ? vc_dec_layer_forward(f, row, x) : NULL;
    return x ? vc_dec_norm(f, x, row, VC_W_MTP_NORM, 0) : NULL;
}

vc_status vc_mtp_forward(fwd_ctx *f, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    const vc_batch *b = f->b;
    vc_status st = VC_OK;
    if (!c->n_mtp)
        st = vc_fail(VC_ERR_ARG, "model forward: MTP hidden states asked of %s, loaded without trained MTP layers",
                     c->model_type);
    else if (f->cache || f->paged || b->prefix || !vc_graph_grad_enabled(g))
        st = vc_fail(VC_ERR_ARG, "model forward: MTP hidden states are computed by a training forward (a tape, no kv "
                     "cache, no shared prefixes)");
    if (st) {
        vc_graph_fail(g, st);
        return st;
    }
    vc_tensor *prev = h;
    /* the batch without router replay, which records and replays the decoder's layers only (in the arena: the
     * layers' nodes may keep it until backward) */
    vc_batch *nb = vc_graph_alloc(g, sizeof *nb, 0);
    if (!nb) return vc_graph_status(g);
    *nb = *b;
    nb->route = NULL, nb->route_mode = VC_ROUTE_NONE;
    f->b = nb;
    for (int k = 0; k < c->n_mtp && prev; k++) {
        const int32_t *ids = rolled_ids(f, k + 1);
        prev = ids ? b->mtp_out[k] = mtp_depth(f, (int)c->n_layer + 1 + k, ids, prev, b->mtp_detach) : NULL;
    }
    f->b = b;
    return prev ? VC_OK : vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
}

vc_status vc_model_mtp_logprobs(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, const uint8_t *need,
                                vc_tensor **logp) {
    m->head_detach = 1;
    vc_status st = vc_model_logprobs_rows(m, g, hidden, target, 1.0f, need, logp, NULL, NULL);
    m->head_detach = 0;
    return st;
}

vc_tensor *vc_model_mtp_forward_paged(vc_model *m, vc_graph *g, const vc_batch *b, const vc_kv_pages *kv, vc_tensor *h) {
    const vc_model_config *c = &m->cfg;
    fwd_ctx f = { .m = m, .g = g, .b = b, .paged = kv, .T = b->cu_seqlens[b->n_seq], .mtp_only = 1 };
    vc_status st = VC_OK;
    if (!c->n_mtp)
        st = vc_fail(VC_ERR_ARG, "MTP forward: %s was loaded without its MTP layers", c->model_type);
    else if (b->images || b->prefix || b->route)
        st = vc_fail(VC_ERR_UNSUPPORTED, "MTP forward over a paged cache: not built for images, shared prefixes or "
                     "router replay");
    else if (kv->n_layers != c->n_layer + 1)
        st = vc_fail(VC_ERR_ARG, "MTP forward: the KV pages hold %lld layers, not the %lld decoder layers and the MTP "
                     "layer's", (long long)(kv->n_layers ? kv->n_layers : c->n_layer), (long long)c->n_layer + 1);
    else if (!h || h->ndim != 2 || h->shape[0] != f.T || h->shape[1] != c->hidden)
        st = vc_fail(VC_ERR_ARG, "MTP forward: hidden states are not [%lld, %lld]", (long long)f.T, (long long)c->hidden);
    else if (m->be->alloc != vc_be()->alloc)
        st = vc_fail(VC_ERR_ARG, "MTP forward: the weights are in %s memory but the active backend is %s", m->be->name,
                     vc_be()->name);
    for (int64_t t = 0; !st && t < f.T; t++)
        if (b->ids[t] < 0 || b->ids[t] >= c->vocab)
            st = vc_fail(VC_ERR_ARG, "MTP forward: token id %d at row %lld is outside the vocabulary (%lld)", b->ids[t],
                         (long long)t, (long long)c->vocab);
    if (st) {
        vc_graph_fail(g, st);
        return NULL;
    }
    int grad = vc_graph_grad_enabled(g);
    vc_graph_set_grad(g, 0);
    vc_tensor *y = vc_dec_setup(&f) ? NULL : mtp_depth(&f, (int)c->n_layer + 1, b->ids, h, 0);
    vc_graph_set_grad(g, grad);
    if (!y && vc_graph_status(g)) vc_fail(vc_graph_status(g), "%s", vc_last_error());
    return y;
}
