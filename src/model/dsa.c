/* DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): each layer's indexer scores every visible key of a query,
 * sum over its heads of w relu(q . k / sqrt(dim)), and attention keeps the index_topk best keys (all of them while a
 * sequence has no more). The indexer's queries come from the q latent, its keys are a LayerNormed projection of the
 * layer's input, both with rope on their first qk_rope_dim dims (halves in DeepSeek-V3.2, interleaved pairs in GLM-5),
 * its weights a projection of the input times heads^-0.5. It has no gradient: the selection is not differentiable and
 * the language-model loss does not train it (its tensors are buffers). Its keys sit behind the layer's values in KV
 * rows; GLM-5's "shared" layers reuse the previous layer's selection. */
#include "decoder_priv.h"
#include <math.h>
#include <string.h>

/* a layer whose every query sees every visible key (no selection to apply) */
static const uint32_t all_keys[1];

int64_t vc_dsa_key_offset(const vc_model_config *c) {
    return c->n_head * (c->qk_nope_dim + c->qk_rope_dim + c->v_head_dim);
}

vc_status vc_dsa_setup(fwd_ctx *f, int no_tape) {
    const vc_model_config *c = &f->m->cfg;
    int n = f->b->n_seq;
    if (!c->dsa_topk) return VC_OK;
    f->dsa_sel = vc_graph_alloc(f->g, sizeof(uint32_t *) * (size_t)c->n_layer, 1);
    f->dsa_kvl = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
    if (!f->dsa_sel || !f->dsa_kvl) return vc_graph_status(f->g);
    int64_t most = 0;
    for (int s = 0; s < n; s++) {
        int64_t k = f->b->cu_seqlens[s + 1] - f->b->cu_seqlens[s];
        k = f->ext ? f->kv_len[s] : k + (f->cache ? vc_kv_cache_len(f->cache, s) : f->paged ? f->paged->len[s] : 0);
        f->dsa_kvl[s] = k;
        most = k > most ? k : most;
    }
    f->sel_words = (most + 31) / 32;
    if (no_tape && most > c->dsa_topk) {
        f->sel_buf = vc_graph_dalloc(f->g, sizeof(uint32_t) * (size_t)(f->T * f->sel_words), 0);
        if (!f->sel_buf) return vc_graph_status(f->g);
    }
    return VC_OK;
}

/* the indexer's keys [T, dim] */
static vc_tensor *index_keys(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    int64_t shape[3] = { f->T, 1, c->dsa_dim };
    vc_tensor *k = vc_op_linear(g, h, vc_w(f->m, l, VC_W_IDX_WK), NULL);
    k = vc_op_layernorm(g, k, vc_w(f->m, l, VC_W_IDX_KNORM), vc_w(f->m, l, VC_W_IDX_KNORM_B), 1e-6f);
    k = k ? vc_reshape(g, k, 3, shape) : NULL;
    k = k ? vc_op_rope_temp(g, k, f->cos, f->sin, 1, (int)c->dsa_dim, (int)c->qk_rope_dim, c->dsa_rope_interleaved)
          : NULL;
    /* bf16 matmuls: bf16 keys, as PyTorch autocast's, and what a bf16 KV pool holds exactly */
    if (k && vc_matmul_precision() == VC_PREC_BF16) k = vc_op_round_bf16_inplace(g, k);
    return k;
}

/* the indexer's queries [T, heads, dim] and weights [T, heads] */
static vc_status index_queries(fwd_ctx *f, int l, vc_tensor *h, vc_tensor *qlat, vc_tensor **q, vc_tensor **w) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    int64_t shape[3] = { f->T, c->dsa_heads, c->dsa_dim };
    vc_tensor *x = vc_op_linear(g, qlat, vc_w(f->m, l, VC_W_IDX_WQ), NULL);
    x = x ? vc_reshape(g, x, 3, shape) : NULL;
    x = x ? vc_op_rope_temp(g, x, f->cos, f->sin, (int)c->dsa_heads, (int)c->dsa_dim, (int)c->qk_rope_dim,
                            c->dsa_rope_interleaved)
          : NULL;
    if (x && vc_matmul_precision() == VC_PREC_BF16) x = vc_op_round_bf16_inplace(g, x);
    *q = x;
    *w = vc_op_scale(g, vc_op_linear(g, h, vc_w(f->m, l, VC_W_IDX_WPROJ), NULL), 1.0f / sqrtf((float)c->dsa_heads));
    return *q && *w ? VC_OK : vc_graph_status(g);
}

/* where sequence s's indexer keys are for d: the batch's own rows, or (with a cache) the layer's rows after appending
 * the new ones */
static vc_status key_source(fwd_ctx *f, int l, vc_tensor *k, vc_attn_desc *d) {
    const vc_model_config *c = &f->m->cfg;
    int n = f->b->n_seq;
    int64_t D = c->dsa_dim, xo = vc_dsa_key_offset(c), row = vc_kv_row_floats(f->m);
    if (f->paged) {
        const vc_kv_pages *kv = f->paged;
        int64_t P = kv->page_tokens, nl = kv_page_layers(f);
        size_t base = kv_layer_at(f, l, row) + (size_t)xo;
        if (f->T > 0 && kv->bf16) vc_be()->scatter_rows_bf16(pool_at(kv, base), f->kv_off, k->data, D, f->T, D);
        else if (f->T > 0) vc_be()->scatter_rows(pool_at(kv, base), f->kv_off, k->data, D, f->T, D);
        const float *const **pp = vc_graph_alloc(f->g, sizeof(void *) * (size_t)(n ? n : 1), 0);
        if (!pp) return vc_graph_status(f->g);
        for (int s = 0; s < n; s++) {
            int64_t npg = (f->dsa_kvl[s] + P - 1) / P;
            const float **kp = vc_graph_alloc(f->g, sizeof(float *) * (size_t)(npg ? npg : 1), 0);
            if (!kp) return vc_graph_status(f->g);
            for (int64_t i = 0; i < npg; i++)
                kp[i] = pool_at(kv, (size_t)kv->table[s][i] * (size_t)nl * (size_t)(P * row) + base);
            pp[s] = kp;
        }
        d->k_pages = pp;
        d->page_tokens = P;
        d->kv_bf16 = kv->bf16;
        d->k_stride = row;
        return VC_OK;
    }
    const float **ks = vc_graph_alloc(f->g, sizeof(float *) * (size_t)(n ? n : 1), 0);
    if (!ks) return vc_graph_status(f->g);
    if (f->cache) {
        vc_kv_cache *kc = f->cache;
        int64_t crow = kc->k_width + kc->v_width + kc->x_width;
        for (int s = 0; s < n; s++) {
            float *base = kc->mem + ((size_t)l * kc->n_seq + s) * (size_t)(kc->max_len * crow) + kc->k_width + kc->v_width;
            int64_t t0 = f->b->cu_seqlens[s], m = f->b->cu_seqlens[s + 1] - t0, at = kc->len[s];
            copy_rows(base + at * crow, crow, k->data + t0 * D, D, m, D);
            ks[s] = base;
        }
        d->k_stride = crow;
    } else {
        if (f->ext && !(k = vc_op_gather_rows(f->g, k, f->T, f->ext, f->T_ext))) return vc_graph_status(f->g);
        for (int s = 0; s < n; s++) ks[s] = k->data + (f->ext ? f->kv_start[s] : f->b->cu_seqlens[s]) * D;
        d->k_stride = D;
    }
    d->k_seq = ks;
    return VC_OK;
}

static vc_status layer_select(fwd_ctx *f, int l, vc_tensor *h, vc_tensor *qlat) {
    const vc_model_config *c = &f->m->cfg;
    int cached = f->cache || f->paged, need = 0;
    for (int s = 0; s < f->b->n_seq; s++) need |= f->dsa_kvl[s] > c->dsa_topk;
    f->dsa_sel[l] = all_keys;
    if (!need && !cached) return VC_OK; /* every key of every sequence is selected: the indexer changes nothing */
    vc_attn_desc d = { .n_seq = f->b->n_seq, .q_start = f->b->cu_seqlens, .kv_len = f->dsa_kvl,
                       .n_head = (int)c->dsa_heads, .n_kv_head = 1, .head_dim = (int)c->dsa_dim,
                       .v_head_dim = (int)c->dsa_dim, .scale = 1.0f / sqrtf((float)c->dsa_dim), .causal = 1 };
    vc_tensor *k = index_keys(f, l, h), *q = NULL, *w = NULL;
    vc_status st = k ? key_source(f, l, k, &d) : vc_graph_status(f->g);
    if (st || !need || (st = index_queries(f, l, h, qlat, &q, &w))) return st;
    uint32_t *sel = f->sel_buf ? f->sel_buf : vc_graph_dalloc(f->g, sizeof(uint32_t) * (size_t)(f->T * f->sel_words), 0);
    if (!sel) return vc_graph_status(f->g);
    if (!vc_be()->dsa_select)
        return vc_fail(VC_ERR_UNSUPPORTED, "model forward: DeepSeek Sparse Attention's selection is not built for the %s "
                       "device", vc_be()->name);
    vc_be()->dsa_select(sel, f->sel_words, q->data, w->data, c->dsa_topk, &d);
    f->dsa_sel[l] = sel;
    return VC_OK;
}

vc_status vc_dsa_layer(fwd_ctx *f, int l, vc_tensor *h, vc_tensor *qlat) {
    vc_status st = VC_OK;
    if (!f->dsa_sel[l] && f->m->cfg.dsa_shared[l]) f->dsa_sel[l] = f->dsa_sel[l - 1]; /* GLM-5's "shared" layers */
    if (!f->dsa_sel[l]) { /* else: the layer's recomputation under checkpointing keeps the forward's */
        int grad = vc_graph_grad_enabled(f->g);
        vc_graph_set_grad(f->g, 0);
        st = layer_select(f, l, h, qlat);
        vc_graph_set_grad(f->g, grad);
    }
    f->sel = f->dsa_sel[l] == all_keys ? NULL : f->dsa_sel[l];
    return st;
}
