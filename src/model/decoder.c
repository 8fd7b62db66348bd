/* The one decoder. Every architecture runs through these functions; the branches read descriptor
 * fields of vc_model_config, never the architecture's name. */
#include "decoder_priv.h"
#include "verlc/vision.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- linear-attention states: per sequence, for each linear layer in order, the conv's last K - 1 inputs [K - 1,
 * 2 nk dk + nv dv] then the recurrent state [nv, dk, dv] ---- */
static int64_t lin_conv_floats(const vc_model_config *c) {
    int64_t ch = c->lin_kind == VC_LIN_SHORTCONV ? c->hidden
               : c->lin_kind == VC_LIN_MAMBA1  ? c->lin_nv /* the conv over x only */
                                                : 2 * c->lin_nk * c->lin_dk + c->lin_nv * c->lin_dv;
    return (int64_t)(c->lin_conv - 1) * ch;
}

/* LFM2's short convolutions carry the conv's inputs only */
static int64_t lin_layer_floats(const vc_model_config *c) {
    return lin_conv_floats(c) + (c->lin_kind != VC_LIN_SHORTCONV ? c->lin_nv * c->lin_dk * c->lin_dv : 0);
}

int64_t vc_lin_state_floats(const vc_model_config *c) { return c->n_linear * lin_layer_floats(c); }

/* each sequence's state block; fresh sequences' (nothing cached) zeroed */
static vc_status lin_seq_states(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    int64_t SF = vc_lin_state_floats(c);
    if (!SF || (!f->cache && !f->paged)) return VC_OK;
    if (f->paged && (!f->paged->state || !f->paged->state_slot))
        return vc_fail(VC_ERR_ARG, "model forward: %s has linear-attention layers: the paged cache needs state slots",
                       c->model_type);
    int n = f->b->n_seq;
    f->seq_state = vc_graph_alloc(f->g, sizeof(float *) * (size_t)n, 0);
    if (!f->seq_state) return vc_graph_status(f->g);
    for (int s = 0; s < n; s++) {
        f->seq_state[s] = f->paged ? f->paged->state + (size_t)f->paged->state_slot[s] * (size_t)SF
                                   : f->cache->state + (size_t)s * (size_t)SF;
        if ((f->paged ? f->paged->len[s] : f->cache->len[s]) == 0) vc_be()->zero(f->seq_state[s], sizeof(float) * (size_t)SF);
    }
    return VC_OK;
}

/* Falcon-H1's muP vector over in_proj's outputs [z (I), x (I), B (G N), C (G N), dt (nh)], uploaded per forward */
static vc_status mup_upload(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    if (!c->mup.on || c->lin_kind != VC_LIN_MAMBA2) return VC_OK;
    int64_t I = c->lin_nv * c->lin_dv, GN = c->lin_nk * c->lin_dk, n = 2 * I + 2 * GN + c->lin_nv;
    int64_t end[5] = { I, 2 * I, 2 * I + GN, 2 * I + 2 * GN, n };
    float *v = vc_graph_alloc(f->g, sizeof(float) * (size_t)n, 0);
    if (!v) return vc_graph_status(f->g);
    for (int64_t i = 0, k = 0; i < n; i++) {
        while (i >= end[k]) k++;
        v[i] = c->mup.zxbcdt[k];
    }
    float *dev = vc_graph_upload(f->g, v, sizeof(float) * (size_t)n);
    f->mup_vec = dev ? vc_tensor_wrap(f->g, dev, 1, &n) : NULL;
    return f->mup_vec ? VC_OK : vc_graph_status(f->g);
}

/* MiniMax-Text-01's lightning layers: [T, nh] ones (with shared prefixes as many rows as the gathered ones, T_ext),
 * uploaded per forward */
static vc_status ones_upload(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    if (c->lin_kind != VC_LIN_LIGHTNING || !c->n_linear) return VC_OK;
    int64_t sh[2] = { f->ext && f->T_ext > f->T ? f->T_ext : f->T, c->lin_nv }, n = sh[0] * sh[1];
    float *v = vc_graph_alloc(f->g, sizeof(float) * (size_t)(n ? n : 1), 0);
    if (!v) return vc_graph_status(f->g);
    for (int64_t i = 0; i < n; i++) v[i] = 1.0f;
    float *dev = vc_graph_upload(f->g, v, sizeof(float) * (size_t)(n ? n : 1));
    f->ones = dev ? vc_tensor_wrap(f->g, dev, 2, sh) : NULL;
    /* each layer's slopes base^(h+1) scaled down with depth, as transformers computes them (in float) */
    int64_t nh = c->lin_nv, ns = c->n_layer * nh;
    float *sl = vc_graph_alloc(f->g, sizeof(float) * (size_t)ns, 0);
    if (!f->ones || !sl) return vc_graph_status(f->g);
    float base = (float)(1.0 / pow(2.0, 8.0 / (double)nh));
    for (int64_t l = 0; l < c->n_layer; l++) {
        float fac = (float)(1.0 - (double)l / ((double)c->n_layer - 1 + 1e-5) + 1e-5);
        for (int64_t i = 0; i < nh; i++) sl[l * nh + i] = -(powf(base, (float)(i + 1)) * fac);
    }
    f->slopes = vc_graph_upload(f->g, sl, sizeof(float) * (size_t)ns);
    return f->slopes ? VC_OK : vc_graph_status(f->g);
}

/* every linear layer's state tables for a backend that takes them in its memory (CUDA): uploaded with the step's
 * other inputs before the layers run, so a decode step's graph captures the layers' calls */
static vc_status lin_tabs_upload(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    if (!f->seq_state || !vc_be()->dev_seq_tabs) return VC_OK;
    int n = f->b->n_seq;
    size_t W = 3 * (size_t)n + 2, bytes = sizeof(int64_t) * W * 2 * (size_t)c->n_linear;
    int64_t *h = vc_graph_alloc(f->g, bytes, 0);
    float **p = vc_graph_alloc(f->g, sizeof(float *) * (size_t)n * 2, 0);
    if (!h || !p) return vc_graph_status(f->g);
    for (int j = 0; j < c->n_linear; j++) {
        for (int s = 0; s < n; s++) {
            p[s] = f->seq_state[s] + j * lin_layer_floats(c);
            p[n + s] = p[s] + lin_conv_floats(c);
        }
        vc_seq_tabs_fill(h + 2 * (size_t)j * W, n, f->b->cu_seqlens, 0, p);
        vc_seq_tabs_fill(h + (2 * (size_t)j + 1) * W, n, f->b->cu_seqlens, 0, p + n);
    }
    f->lin_tabs = vc_graph_upload(f->g, h, bytes);
    return f->lin_tabs ? VC_OK : vc_graph_status(f->g);
}

/* layer l's conv and recurrent state pointers of every sequence (NULL without a cache) and their tables in backend
 * memory (NULL: none uploaded); 1 on failure */
static int lin_states(fwd_ctx *f, int l, float ***conv, float ***rec, const int64_t **ctab, const int64_t **rtab) {
    const vc_model_config *c = &f->m->cfg;
    *ctab = *rtab = NULL;
    if (!f->seq_state) return 0;
    int n = f->b->n_seq, j = 0;
    for (int i = 0; i < l; i++) j += c->linear[i];
    if (f->lin_tabs) { /* this layer's tables, uploaded before the layers ran */
        *ctab = f->lin_tabs + 2 * (size_t)j * (3 * (size_t)n + 2);
        *rtab = *ctab + 3 * (size_t)n + 2;
    }
    float **p = vc_graph_alloc(f->g, sizeof(float *) * (size_t)n * 2, 0);
    if (!p) return 1;
    for (int s = 0; s < n; s++) {
        p[s] = f->seq_state[s] + j * lin_layer_floats(c);
        p[n + s] = p[s] + lin_conv_floats(c);
    }
    *conv = p;
    *rec = p + n;
    return 0;
}

static vc_tensor *norm(fwd_ctx *f, vc_tensor *x, int layer, int w_slot, int b_slot) {
    const vc_model_config *c = &f->m->cfg;
    if (!x) return NULL; /* an earlier op failed (the graph holds its status) */
    vc_tensor *w = vc_w(f->m, layer, w_slot);
    if (c->norm_kind == VC_NORM_LAYER && c->norm_offset && w) { /* Nemotron's LayerNorm1P: xhat (w + 1) + b */
        vc_op_hold(x, 1);
        vc_tensor *y = vc_op_layernorm(f->g, x, w, b_slot ? vc_w(f->m, layer, b_slot) : NULL, c->norm_eps);
        vc_tensor *u = vc_op_layernorm(f->g, x, NULL, NULL, c->norm_eps);
        vc_op_hold(x, 0);
        return vc_op_add(f->g, y, c->norm_offset == 1.0f ? u : vc_op_scale(f->g, u, c->norm_offset));
    }
    if (c->norm_kind == VC_NORM_LAYER) return vc_op_layernorm(f->g, x, w, b_slot ? vc_w(f->m, layer, b_slot) : NULL, c->norm_eps);
    return vc_op_rmsnorm(f->g, x, w, x->shape[x->ndim - 1], c->norm_eps, c->norm_offset);
}

/* a norm whose output several GEMMs read (q, k and v; gate and up): an RMSNorm holds it for them, rounded to bf16 by
 * its own kernel (vc_op_rmsnorm_held); the caller releases it (vc_op_hold(h, 0)) after them */
vc_tensor *vc_dec_norm(fwd_ctx *f, vc_tensor *x, int layer, int w_slot, int b_slot) {
    return norm(f, x, layer, w_slot, b_slot);
}

static vc_tensor *norm_held(fwd_ctx *f, vc_tensor *x, int layer, int w_slot, int b_slot) {
    const vc_model_config *c = &f->m->cfg;
    if (!x || c->norm_kind == VC_NORM_LAYER) return norm(f, x, layer, w_slot, b_slot);
    return vc_op_rmsnorm_held(f->g, x, vc_w(f->m, layer, w_slot), c->norm_eps, c->norm_offset);
}

static vc_tensor *reshape3(vc_graph *g, vc_tensor *x, int64_t a, int64_t b, int64_t c) {
    int64_t s[3] = { a, b, c };
    return vc_reshape(g, x, 3, s);
}

/* inv_freq as the model holds it (rounded to a bf16/f16 checkpoint dtype) for sequences up to maxpos; negated for
 * a rope that turns the other way (nanochat) */
static vc_status inv_freq(const vc_model_config *c, const vc_rope *r, int half, int64_t maxpos, float *inv,
                          float *scale) {
    vc_status st = vc_rope_inv_freq(r, 2 * half, maxpos, (int)c->max_pos, inv, scale);
    if (st) return st;
    if (c->dtype == VC_BF16 || c->dtype == VC_F16)
        for (int i = 0; i < half; i++)
            inv[i] = c->dtype == VC_BF16 ? vc_bf16_to_f32(vc_f32_to_bf16(inv[i])) : vc_f16_to_f32(vc_f32_to_f16(inv[i]));
    if (c->rope_neg)
        for (int i = 0; i < half; i++) inv[i] = -inv[i];
    return VC_OK;
}

/* paged batches: each sequence's tables depend only on that sequence (length-dependent ropes use its
 * own length), so a row does not depend on the rest of the batch */
static vc_status rope_tables_paged(fwd_ctx *f, const vc_rope *r, float *cs, int half) {
    const vc_model_config *c = &f->m->cfg;
    float inv[1024], scale = 1.0f;
    if (half > 1024) return vc_fail(VC_ERR_UNSUPPORTED, "rotary dimension %d is too large", 2 * half);
    /* only dynamic NTK and LongRoPE frequencies depend on the sequence's length: others are computed once */
    int by_len = r->type == VC_ROPE_DYNAMIC || r->type == VC_ROPE_LONGROPE, have = 0;
    for (int s = 0; s < f->b->n_seq; s++) {
        int64_t t0 = f->b->cu_seqlens[s], t1 = f->b->cu_seqlens[s + 1], base = f->paged->len[s];
        for (int64_t t = t0; t < t1; t++) f->pos[t] = base + t - t0;
        if (!half || t1 == t0) continue;
        vc_status st = by_len || !have ? inv_freq(c, r, half, base + t1 - t0, inv, &scale) : VC_OK;
        if (st) return st;
        have = 1;
        for (int64_t t = t0; t < t1; t++)
            for (int i = 0; i < half; i++) {
                float ang = (float)f->pos[t] * inv[i];
                cs[t * half + i] = cosf(ang) * scale;
                cs[f->T * half + t * half + i] = sinf(ang) * scale;
            }
    }
    return VC_OK;
}

static vc_status rope_tables_host(fwd_ctx *f, const vc_rope *r, float *cs, int half);

/* the M-RoPE axis (0 time, 1 height, 2 width) pair i rotates by */
static int mrope_axis(const vc_rope *r, int i) {
    if (r->mrope_interleaved)
        return i % 3 == 1 && i < 3 * r->mrope[1] ? 1 : i % 3 == 2 && i < 3 * r->mrope[2] ? 2 : 0;
    return i < r->mrope[0] ? 0 : i < r->mrope[0] + r->mrope[1] ? 1 : 2;
}

/* the tokens of sequence s cached before this batch's */
static int64_t seq_start(const fwd_ctx *f, int s) {
    return f->paged ? f->paged->len[s] : f->cache ? vc_kv_cache_len(f->cache, s) : 0;
}

/* M-RoPE with images (or decode steps after them): each pair at its axis's position (vc_mrope_positions) */
static vc_status mrope_tables(fwd_ctx *f, const vc_rope *r, float *cs, int half) {
    const vc_batch *b = f->b;
    if (r->mrope[0] + r->mrope[1] + r->mrope[2] != half)
        return vc_fail(VC_ERR_FORMAT, "%s: mrope_section [%d, %d, %d] does not sum to the rotary dimension's %d pairs",
                       f->m->dir, r->mrope[0], r->mrope[1], r->mrope[2], half);
    if (b->prefix) return vc_fail(VC_ERR_UNSUPPORTED, "model forward: shared prefixes with images are not built");
    int64_t *start = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)b->n_seq, 0);
    int64_t *p3 = vc_graph_alloc(f->g, sizeof(int64_t) * 3 * (size_t)(f->T ? f->T : 1), 0);
    float inv[1024], scale = 1.0f;
    if (!start || !p3) return vc_graph_status(f->g);
    int64_t maxpos = 1;
    for (int s = 0; s < b->n_seq; s++) {
        start[s] = seq_start(f, s);
        for (int64_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++) f->pos[t] = start[s] + t - b->cu_seqlens[s];
        if (start[s] + b->cu_seqlens[s + 1] - b->cu_seqlens[s] > maxpos)
            maxpos = start[s] + b->cu_seqlens[s + 1] - b->cu_seqlens[s];
    }
    vc_status st = vc_mrope_positions(f->m, b, start, p3, NULL);
    if (!st) st = inv_freq(&f->m->cfg, r, half, maxpos, inv, &scale);
    if (st) return st;
    for (int64_t t = 0; t < f->T; t++)
        for (int i = 0; i < half; i++) {
            float ang = (float)p3[mrope_axis(r, i) * f->T + t] * inv[i];
            cs[t * half + i] = cosf(ang) * scale;
            cs[f->T * half + t * half + i] = sinf(ang) * scale;
        }
    return VC_OK;
}

/* one rope's tables for this batch, computed on the host and uploaded (the rope op reads backend memory) */
static vc_status rope_upload(fwd_ctx *f, const vc_rope *r, int rot, const float **cos, const float **sin) {
    int half = rot / 2;
    size_t bytes = sizeof(float) * (size_t)(f->T * (half ? half : 1)) * 2;
    float *cs = vc_graph_alloc(f->g, bytes, 1);
    if (!cs) return vc_graph_status(f->g);
    int mrope = half && r->mrope[0] + r->mrope[1] + r->mrope[2] && (f->b->images || f->b->mrope_delta);
    vc_status st = mrope ? mrope_tables(f, r, cs, half)
                         : f->paged ? rope_tables_paged(f, r, cs, half) : rope_tables_host(f, r, cs, half);
    if (st) return st;
    float *dev = vc_graph_upload(f->g, cs, bytes);
    if (!dev) return vc_graph_status(f->g);
    *cos = dev;
    *sin = dev + f->T * half;
    return VC_OK;
}

/* Llama 4's attention scaling by position (Ministral 3): every forward uploads it, so a decode step's graph is
 * the same whatever the positions */
static vc_status qscale_upload(fwd_ctx *f, int temp, vc_tensor **out) {
    const vc_model_config *c = &f->m->cfg;
    float *s = vc_graph_alloc(f->g, sizeof(float) * (size_t)(f->T ? f->T : 1), 0);
    if (!s) return vc_graph_status(f->g);
    for (int64_t t = 0; t < f->T; t++) /* Llama 4's temperature tuning on NoPE layers, or Ministral 3's scaling */
        s[t] = temp ? logf(1.0f + floorf(((float)f->pos[t] + 1.0f) / c->q_temp_floor)) * c->q_temp_scale + 1.0f
                    : 1.0f + c->q_pos_beta * logf(1.0f + floorf((float)f->pos[t] / (float)c->q_pos_base));
    float *dev = vc_graph_upload(f->g, s, sizeof(float) * (size_t)(f->T ? f->T : 1));
    *out = dev ? vc_tensor_wrap(f->g, dev, 1, &f->T) : NULL;
    return *out ? VC_OK : vc_graph_status(f->g);
}

/* the sliding layers' rotated dims (Gemma 4's heads differ by layer type) */
static int local_rot(const vc_model_config *c) { return c->rot_dim_local ? c->rot_dim_local : c->rot_dim; }

/* positions, the rope tables, and the sliding layers' own ones (Gemma 3) */
static vc_status rope_tables(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    f->pos = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)f->T, 0);
    if (!f->pos) return vc_graph_status(f->g);
    vc_status st = rope_upload(f, &c->rope, c->rot_dim, &f->cos, &f->sin);
    if (!st && c->q_pos_beta > 0) st = qscale_upload(f, 0, &f->qscale);
    if (!st && c->q_temp_scale > 0) st = qscale_upload(f, 1, &f->qtemp);
    if (!st && c->local_rope) return rope_upload(f, &c->rope_local, local_rot(c), &f->cos_l, &f->sin_l);
    f->cos_l = f->cos;
    f->sin_l = f->sin;
    return st;
}

/* positions continue after the cache */
static vc_status rope_tables_host(fwd_ctx *f, const vc_rope *r, float *cs, int half) {
    const vc_model_config *c = &f->m->cfg;
    float inv[1024], scale = 1.0f;
    int64_t maxpos = 0;
    for (int s = 0; s < f->b->n_seq; s++) {
        int64_t base = f->cache ? vc_kv_cache_len(f->cache, s) : 0;
        int32_t p = f->b->prefix ? f->b->prefix[s] : -1;
        if (p >= 0) base = f->b->cu_seqlens[p + 1] - f->b->cu_seqlens[p];
        for (int64_t t = f->b->cu_seqlens[s]; t < f->b->cu_seqlens[s + 1]; t++) {
            f->pos[t] = base + t - f->b->cu_seqlens[s];
            if (f->pos[t] + 1 > maxpos) maxpos = f->pos[t] + 1;
        }
    }
    if (!half) return VC_OK;
    if (half > 1024) return vc_fail(VC_ERR_UNSUPPORTED, "rotary dimension %d is too large", 2 * half);
    vc_status st = inv_freq(c, r, half, maxpos, inv, &scale);
    if (st) return st;
    for (int64_t t = 0; t < f->T; t++)
        for (int i = 0; i < half; i++) {
            float ang = (float)f->pos[t] * inv[i];
            cs[t * half + i] = cosf(ang) * scale;
            cs[f->T * half + t * half + i] = sinf(ang) * scale;
        }
    return VC_OK;
}

/* paged cache: where each new token's keys/values go. Page p holds layer l's rows of its tokens at
 * pool + (p * n_layer + l) * P * row, so one offset per token serves every layer (plus l * P * row),
 * and each layer's append is one scatter for the whole batch. Uploaded once per forward. */
static vc_status paged_offsets(fwd_ctx *f) {
    const vc_kv_pages *kv = f->paged;
    int64_t row = vc_kv_row_floats(f->m), P = kv->page_tokens, nl = kv_page_layers(f);
    int64_t *off = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)(f->T ? f->T : 1), 0);
    if (!off) return vc_graph_status(f->g);
    for (int s = 0; s < f->b->n_seq; s++) {
        int64_t t0 = f->b->cu_seqlens[s], n = f->b->cu_seqlens[s + 1] - t0, at = kv->len[s];
        for (int64_t i = 0; i < n; i++) {
            int64_t page = kv->table[s][(at + i) / P];
            off[t0 + i] = (page * nl * P + (at + i) % P) * row;
        }
    }
    f->kv_off = vc_graph_upload(f->g, off, sizeof(int64_t) * (size_t)f->T);
    return f->kv_off || !f->T ? VC_OK : vc_graph_status(f->g);
}

/* paged cache: write the new keys/values into the sequences' pages, then attend over the pages */
static vc_tensor *attend_paged(fwd_ctx *f, int layer, int append, vc_attn_desc *d, vc_tensor *q, vc_tensor *k,
                               vc_tensor *v) {
    const vc_kv_pages *kv = f->paged;
    int64_t row = vc_kv_row_floats(f->m), P = kv->page_tokens, nl = kv_page_layers(f);
    int64_t kw = (int64_t)d->n_kv_head * d->head_dim, vw = (int64_t)d->n_kv_head * d->v_head_dim;
    size_t lo = kv_layer_at(f, layer, row); /* the layer's rows within a page */
    if (!append || f->kv_stored) {
        f->kv_stored = 0;
    } else if (f->T > 0 && kv->bf16 && vc_be()->scatter_kv_bf16) { /* keys and values in one pass */
        vc_be()->scatter_kv_bf16(pool_at(kv, lo), f->kv_off, k->data, kw, v->data, vw, f->T);
    } else if (f->T > 0 && kv->bf16) {
        vc_be()->scatter_rows_bf16(pool_at(kv, lo), f->kv_off, k->data, kw, f->T, kw);
        vc_be()->scatter_rows_bf16(pool_at(kv, lo + (size_t)kw), f->kv_off, v->data, vw, f->T, vw);
    } else if (f->T > 0) {
        float *base = kv->pool + lo;
        vc_be()->scatter_rows(base, f->kv_off, k->data, kw, f->T, kw);
        vc_be()->scatter_rows(base + kw, f->kv_off, v->data, vw, f->T, vw);
    }
    int64_t shape[3] = { f->T, d->n_head, d->v_head_dim };
    vc_tensor *o = vc_tensor_new(f->g, 3, shape, 0);
    int64_t *kvl = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)d->n_seq, 0);
    const float *const **pp = vc_graph_alloc(f->g, sizeof(void *) * (size_t)d->n_seq * 2, 0);
    if (!o || !kvl || !pp) return NULL;
    for (int s = 0; s < d->n_seq; s++) {
        int64_t t0 = f->b->cu_seqlens[s], n = f->b->cu_seqlens[s + 1] - t0, at = kv->len[s];
        int64_t npg = (at + n + P - 1) / P;
        const float **kp = vc_graph_alloc(f->g, sizeof(float *) * (size_t)(npg ? npg : 1) * 2, 0);
        if (!kp) return NULL;
        for (int64_t i = 0; i < npg; i++) {
            size_t at = (size_t)kv->table[s][i] * (size_t)nl * (size_t)(P * row) + lo;
            kp[i] = pool_at(kv, at);
            kp[npg + i] = pool_at(kv, at + (size_t)kw);
        }
        pp[s] = kp;
        pp[d->n_seq + s] = kp + npg;
        kvl[s] = at + n;
    }
    d->k_pages = pp;
    d->v_pages = pp + d->n_seq;
    d->page_tokens = P;
    d->k_base = pool_at(kv, lo); /* page 0 of this layer: below every page */
    d->v_base = pool_at(kv, lo + (size_t)kw);
    d->kv_bf16 = kv->bf16;
    d->hold_out = f->hold_o;
    d->same_pages = f->pages_sent;
    f->pages_sent = 1;
    d->kv_len = kvl;
    d->k_stride = d->v_stride = row;
    vc_be()->attn_fwd(o->data, NULL, q->data, d);
    return o;
}

/* a layer whose keys and values later layers reuse (KV sharing) keeps them for them: the tensors themselves with a
 * tape, else copies in buffers that outlive the layer (vc_tensor *s from forward) */
static void kv_keep(fwd_ctx *f, int layer, vc_tensor *k, vc_tensor *v) {
    vc_tensor **kp = f->kv_keep + 2 * layer;
    if (!f->kv_need || !f->kv_need[layer]) return;
    if (!kp[0] || !f->kv_copy) {
        kp[0] = k;
        kp[1] = v;
        return;
    }
    vc_be()->d2d(kp[0]->data, k->data, (size_t)k->n * sizeof(float));
    vc_be()->d2d(kp[1]->data, v->data, (size_t)v->n * sizeof(float));
}

/* Gemma 3's image rows' attention: each run of image tokens sees every key of its sequence up to the run's end (the
 * window of a sliding layer still applies), computed apart (a non-causal call over those keys) and written over those
 * rows of o; the text rows keep o's */
static vc_tensor *bidi_images(fwd_ctx *f, vc_tensor *o, vc_tensor *q, vc_tensor *k, vc_tensor *v, const vc_attn_desc *d0) {
    if (!o || !f->n_blk || (f->bidi == 2 && !d0->window)) return o; /* (Gemma 4: its full layers stay causal) */
    if (!k || !v || d0->sinks || d0->sel) {
        vc_graph_fail(f->g, vc_fail(VC_ERR_UNSUPPORTED, "model forward: bidirectional image attention with %s",
                                    !k || !v ? "shared keys and values" : d0->sinks ? "attention sinks" : "a selection"));
        return NULL;
    }
    int64_t nh = d0->n_head, qs[3] = { f->n_img, nh, d0->head_dim }, o2[2] = { f->T, nh * d0->v_head_dim };
    vc_attn_desc d = { .n_seq = (int)f->n_blk, .q_start = f->blk_q, .kv_start = f->blk_kvs, .kv_len = f->blk_kvl,
                       .n_head = (int)nh, .n_kv_head = d0->n_kv_head, .head_dim = d0->head_dim,
                       .v_head_dim = d0->v_head_dim, .scale = d0->scale, .softcap = d0->softcap, .window = d0->window,
                       .chunk = d0->chunk, .causal = 0, .alibi = d0->alibi, .alibi_scale = d0->alibi_scale };
    vc_tensor *qi = vc_op_gather_rows(f->g, q, f->T, f->img_rows, f->n_img);
    qi = qi ? vc_reshape(f->g, qi, 3, qs) : NULL;
    const vc_backend *B = vc_be();
    if (vc_matmul_precision() == VC_PREC_BF16 && !(B->attn_rounds_bf16 && B->attn_rounds_bf16(&d))) {
        /* the same bf16 inputs as the causal call's (rounding again changes nothing) */
        qi = vc_op_round_bf16_inplace(f->g, qi);
        k = vc_op_round_bf16_inplace(f->g, k);
        v = vc_op_round_bf16_inplace(f->g, v);
    }
    vc_tensor *oi = qi && k && v ? vc_op_attention(f->g, qi, k, v, &d) : NULL;
    vc_tensor *flat = vc_reshape(f->g, o, 2, o2);
    int64_t oi2[2] = { f->n_img, o2[1] };
    oi = oi ? vc_reshape(f->g, oi, 2, oi2) : NULL;
    vc_tensor *y = oi ? vc_op_scatter_rows(f->g, oi, f->img_rows, f->n_img, f->T) : NULL;
    if (y && f->n_txt) {
        vc_tensor *txt = vc_op_gather_rows(f->g, flat, f->T, f->txt_rows, f->n_txt);
        y = vc_op_add(f->g, y, vc_op_scatter_rows(f->g, txt, f->txt_rows, f->n_txt, f->T));
    }
    return y ? vc_reshape(f->g, y, o->ndim, o->shape) : NULL;
}

/* attention over the batch, or over the cache after appending the new keys and values; kv_layer: the layer whose keys
 * and values it attends with (another one's under KV sharing: nothing is appended, k and v are that layer's kept ones
 * without a cache) */
static vc_tensor *attend(fwd_ctx *f, int layer, int kv_layer, vc_tensor *q, vc_tensor *k, vc_tensor *v, int nkv, int hd,
                         int hdv) {
    const vc_model_config *c = &f->m->cfg;
    int cached = f->cache || f->paged, append = kv_layer == layer;
    if (!q || (!cached && (!k || !v)) || (append && (!k || !v))) return NULL;
    vc_attn_desc d = { .n_seq = f->b->n_seq, .q_start = f->b->cu_seqlens, .n_head = (int)vc_cfg_heads(c, layer),
                       .n_kv_head = nkv, .head_dim = hd, .v_head_dim = hdv,
                       .scale = c->attn_scale_by_layer ? c->attn_scale / (float)(layer + 1) : c->attn_scale,
                       .softcap = c->attn_softcap, .window = c->window[layer], .causal = 1, .alibi = c->alibi,
                       .alibi_scale = c->alibi_scale,
                       .chunk = c->chunk[layer], .sel = f->sel, .sel_words = f->sel_words };
    vc_tensor *sinks = vc_w(f->m, layer, VC_W_SINKS);
    d.sinks = sinks ? sinks->data : NULL;
    /* bf16 attention inputs, as PyTorch autocast's (bf16 projections, RoPE in bf16): the same values in training,
     * log-prob passes and rollout, so a bf16 KV cache holds them exactly. Without a cache, where the backend's
     * attention rounds q, k and v to bf16 as it reads them (the same rounding), and no other layer keeps k and v,
     * they are not rounded in place first */
    const vc_backend *B = vc_be();
    const char *pre = getenv("VERLC_ROUND_QKV"); /* 1: rounded in place always (A/B; the same bits) */
    int rounds = !(pre && *pre == '1') && !cached && !(f->kv_need && f->kv_need[layer]) && B->attn_rounds_bf16 &&
                 B->attn_rounds_bf16(&d);
    /* a bf16 page pool's attention that rounds q as it reads it (one kernel a decode layer fewer) */
    int rounds_q = rounds || (!(pre && *pre == '1') && f->paged && f->paged->bf16 && B->paged_rounds_q &&
                              B->paged_rounds_q(&d));
    if (vc_matmul_precision() == VC_PREC_BF16 && !rounds) {
        if (!rounds_q) q = vc_op_round_bf16_inplace(f->g, q);
        /* a bf16 page pool rounds k and v as it stores them (the same rounding), and nothing else reads them */
        if (append && !(f->paged && f->paged->bf16)) {
            k = vc_op_round_bf16_inplace(f->g, k);
            v = vc_op_round_bf16_inplace(f->g, v);
        }
        if (!q || (append && (!k || !v))) return NULL;
    }
    if (append && !cached) kv_keep(f, layer, k, v);
    if (f->paged) return bidi_images(f, attend_paged(f, kv_layer, append, &d, q, k, v), q, append ? k : NULL,
                                     append ? v : NULL, &d);
    vc_tensor *k_own = k, *v_own = v; /* (Gemma 3's image runs read their sequences' own rows) */
    if (f->ext) { /* shared prefixes: each sequence's keys and values behind its prefix's */
        k = vc_op_gather_rows(f->g, k, f->T, f->ext, f->T_ext);
        v = vc_op_gather_rows(f->g, v, f->T, f->ext, f->T_ext);
        d.kv_start = f->kv_start;
        d.kv_len = f->kv_len;
        if (!k || !v) return NULL;
    }
    if (!f->cache) return bidi_images(f, vc_op_attention_sinks(f->g, q, k, v, &d, sinks), q, k_own, v_own, &d);
    vc_kv_cache *kc = f->cache;
    const float **ptr = vc_graph_alloc(f->g, sizeof(float *) * (size_t)d.n_seq * 2, 0);
    int64_t *kvl = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)d.n_seq, 0);
    int64_t shape[3] = { f->T, d.n_head, hdv };
    vc_tensor *o = vc_tensor_new(f->g, 3, shape, 0);
    float *lse = vc_graph_dalloc(f->g, sizeof(float) * (size_t)(f->T * d.n_head), 0);
    if (!ptr || !kvl || !o || !lse) return NULL;
    int64_t kw = (int64_t)nkv * hd, vw = (int64_t)nkv * hdv, row = kc->k_width + kc->v_width + kc->x_width;
    for (int s = 0; s < d.n_seq; s++) {
        float *base = kc->mem + ((size_t)kv_layer * kc->n_seq + s) * (size_t)(kc->max_len * row);
        int64_t t0 = f->b->cu_seqlens[s], n = f->b->cu_seqlens[s + 1] - t0, at = kc->len[s];
        if (append) {
            copy_rows(base + at * row, row, k->data + t0 * kw, kw, n, kw);
            copy_rows(base + at * row + kw, row, v->data + t0 * vw, vw, n, vw);
        }
        ptr[s] = base;
        ptr[d.n_seq + s] = base + kw;
        kvl[s] = at + n;
    }
    d.k_seq = ptr;
    d.v_seq = ptr + d.n_seq;
    d.kv_len = kvl;
    d.k_stride = d.v_stride = row;
    vc_be()->attn_fwd(o->data, lse, q->data, &d);
    return bidi_images(f, o, q, append ? k : NULL, append ? v : NULL, &d);
}

/* x W^T + b, plus the layer's LoRA adapter on this slot while adapters are on: + (alpha/r) (x A^T) B^T */
static vc_tensor *lin(fwd_ctx *f, vc_tensor *x, int l, int slot, vc_tensor *b) {
    vc_tensor *y = vc_op_linear(f->g, x, vc_w(f->m, l, slot), b);
    return vc_lora_apply(f->m, f->g, vc_lora_index(f->m, l, slot), x, y);
}

/* whether layer l's q and k take their rope last, from the same tables (nothing after it: no NoPE, q scaling, l2 or
 * later norm, KV sharing) */
static int rope_plain(fwd_ctx *f, int l) {
    const vc_model_config *c = &f->m->cfg;
    return l >= 0 && c->kv_src[l] == 0 && !c->nope[l] && !c->qk_l2norm && !f->qscale &&
           !(c->qk_norm && c->qk_norm_after_rope);
}

/* rope_plain and no tape is recorded: attention_std then rotates both in one pass (vc_op_rope2_temp) after qk_heads
 * left it out */
static int rope_last(fwd_ctx *f, int l) { return rope_plain(f, l) && !vc_graph_grad_enabled(f->g) && vc_be()->rope2; }

/* q or k [T, heads * hd] of layer l as attention reads it: the family's norms, the rope (not when rope_last), Llama 4's
 * weightless norm, q's scaling by position */
static vc_tensor *qk_heads(fwd_ctx *f, int l, vc_tensor *x, int64_t heads, int is_k) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_graph *g = f->g;
    int64_t T = f->T, hd = vc_cfg_head_dim(c, l);
    vc_tensor *wn = vc_w(m, l, is_k ? VC_W_K_NORM : VC_W_Q_NORM), *wb = vc_w(m, l, is_k ? VC_W_K_NORM_B : VC_W_Q_NORM_B);
    if (is_k && c->mup.on && c->mup.key != 1.0f) x = vc_op_scale(g, x, c->mup.key); /* Falcon-H1's key multiplier */
    if (c->qk_norm_heads) { /* Command R+: LayerNorm over each head, each head's own weight */
        int64_t s2[2] = { T, heads * hd };
        x = vc_op_layernorm(g, reshape3(g, x, T, heads, hd), NULL, NULL, c->norm_eps);
        x = vc_op_affine_cols(g, x ? vc_reshape(g, x, 2, s2) : NULL, wn, NULL, 1);
    } else if (c->qk_norm && c->norm_kind == VC_NORM_LAYER) /* Phi: LayerNorm over each head */
        x = vc_op_layernorm(g, reshape3(g, x, T, heads, hd), wn, wb, c->norm_eps);
    else if (c->qk_norm && !c->qk_norm_after_rope) /* per head, or (OLMo 2) over all heads at once */
        x = vc_op_rmsnorm(g, x, wn, c->qk_norm_full ? heads * hd : hd, c->norm_eps, c->norm_offset);
    if (c->clip_qkv > 0 && c->clip_after_norm) x = vc_op_clip(g, x, c->clip_qkv); /* OLMoE: normed, then clipped */
    int loc = c->window[l] > 0; /* Gemma 3's sliding layers have their own rope */
    x = reshape3(g, x, T, heads, hd);
    if (rope_last(f, l)) return x;
    if (!c->nope[l]) /* NoPE layers (SmolLM3, EXAONE 4) attend without positions */
        x = vc_op_rope_temp(g, x, loc ? f->cos_l : f->cos, loc ? f->sin_l : f->sin, (int)heads, (int)hd,
                            loc ? local_rot(c) : c->rot_dim, c->rope_interleaved);
    if (c->qk_l2norm && !c->nope[l]) x = vc_op_rmsnorm(g, x, NULL, hd, c->norm_eps, 0); /* Llama 4's rope layers */
    vc_tensor *qs = c->nope[l] && f->qtemp ? f->qtemp : f->qscale;
    if (!is_k && qs) { /* Ministral 3: the rotated q scaled by its position; Llama 4: NoPE layers' temperature tuning */
        int64_t s2[2] = { T, heads * hd }, s3[3] = { T, heads, hd };
        x = vc_reshape(g, vc_op_mul_rows(g, vc_reshape(g, x, 2, s2), qs), 3, s3);
    }
    if (c->qk_norm && c->qk_norm_after_rope) /* Hunyuan: per-head RMSNorm of the rotated q and k */
        x = vc_op_rmsnorm(g, x, wn, hd, c->norm_eps, c->norm_offset);
    return x;
}

/* layer l's keys and values from its normed input h (Gemma 4: values normed without a weight, and on full layers
 * with attention_k_eq_v the key projection before its norm and rope) */
static void attn_kv(fwd_ctx *f, int l, vc_tensor *h, vc_tensor **k, vc_tensor **v) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    int has_v = vc_w(m, l, VC_W_V) != NULL;
    *k = lin(f, h, l, VC_W_K, vc_w(m, l, VC_W_K_B));
    *v = has_v ? lin(f, h, l, VC_W_V, vc_w(m, l, VC_W_V_B)) : *k;
    if (c->clip_qkv > 0) { /* DBRX, OLMo: the projections clipped (OLMoE: k after its norm, in qk_heads) */
        if (!c->clip_after_norm) *k = vc_op_clip(f->g, *k, c->clip_qkv);
        *v = has_v ? vc_op_clip(f->g, *v, c->clip_qkv) : *k;
    }
    if (c->v_norm) *v = vc_op_rmsnorm(f->g, *v, NULL, vc_cfg_v_head_dim(c, l), c->norm_eps, 0); /* a new tensor */
    if (c->v_scale) *v = vc_op_scale(f->g, *v, c->v_scale); /* MiMo-V2-Flash */
    if (*k) *k = qk_heads(f, l, *k, vc_cfg_kv_heads(c, l), 1);
}

/* q, k and v with their biases and rope in one GEMM and one pass (vc_op_qkv_rope), with a tape too (its backward one
 * GEMM for x's gradient and one for the weights'), where nothing else stands between the projections and the rope (no
 * q/k norms, clipping, value norms or scales, LoRA) and the backend can; VERLC_QKV_FUSED=0 (read per call) turns it
 * off. 1 with *q, *k ([T, heads, hd]) and *v made. The same path with and without a tape at any row count: a
 * log-prob pass and the training forward form the same bits */
static int qkv_fused(fwd_ctx *f, int l, vc_tensor *h, vc_tensor **q, vc_tensor **k, vc_tensor **v) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    const char *e = getenv("VERLC_QKV_FUSED");
    if ((e && *e == '0') || !rope_plain(f, l) || !h || c->qk_norm || c->qk_norm_heads || c->clip_qkv > 0 || c->v_norm ||
        c->v_scale || (c->mup.on && c->mup.key != 1.0f))
        return 0;
    vc_tensor *Wq = vc_w(m, l, VC_W_Q), *Wk = vc_w(m, l, VC_W_K), *Wv = vc_w(m, l, VC_W_V);
    if (!Wq || !Wk || !Wv || vc_lora_index(m, l, VC_W_Q) >= 0 || vc_lora_index(m, l, VC_W_K) >= 0 ||
        vc_lora_index(m, l, VC_W_V) >= 0)
        return 0;
    int64_t T = f->T, H = Wq->shape[1], nh = vc_cfg_heads(c, l), nkv = vc_cfg_kv_heads(c, l);
    int64_t hd = vc_cfg_head_dim(c, l), hdv = vc_cfg_v_head_dim(c, l);
    if (h->n != T * H || Wq->shape[0] != nh * hd || Wk->shape[0] != nkv * hd || Wv->shape[0] != nkv * hdv) return 0;
    int loc = c->window[l] > 0;
    vc_qkv_desc d = { (int)nh, (int)nkv, (int)hd, (int)hdv, loc ? local_rot(c) : c->rot_dim, c->rope_interleaved,
                      loc ? f->cos_l : f->cos, loc ? f->sin_l : f->sin, NULL, NULL };
    const vc_kv_pages *kv = f->paged;
    if (kv && kv->bf16 && T > 0 && vc_be()->scatter_kv_bf16) { /* the keys and values straight into their pages */
        d.kv_dst = pool_at(kv, kv_layer_at(f, l, vc_kv_row_floats(m)));
        d.kv_off = f->kv_off;
    }
    if (!vc_op_qkv_rope(f->g, h, Wq, Wk, Wv, vc_w(m, l, VC_W_Q_B), vc_w(m, l, VC_W_K_B), vc_w(m, l, VC_W_V_B), &d, q, k,
                        v))
        return 0;
    f->kv_stored = d.kv_dst != NULL;
    return 1;
}

static vc_tensor *attention_std(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_graph *g = f->g;
    int64_t T = f->T, nh = vc_cfg_heads(c, l), nkv = vc_cfg_kv_heads(c, l), hd = vc_cfg_head_dim(c, l);
    int64_t hdv = vc_cfg_v_head_dim(c, l);
    int src = (l >= 0 ? c->kv_src[l] : 0) - 1; /* Gemma 4's KV sharing: attend with layer src's keys and values */
    vc_tensor *k = NULL, *v = NULL, *q = NULL;
    f->kv_stored = 0;
    if (qkv_fused(f, l, h, &q, &k, &v)) goto attn;
    if (src < 0) vc_op_hold(h, 1); /* q, k and v read the same input */
    q = lin(f, h, l, VC_W_Q, vc_w(m, l, VC_W_Q_B));
    if (c->clip_qkv > 0 && !c->clip_after_norm) q = vc_op_clip(g, q, c->clip_qkv);
    if (src < 0) {
        attn_kv(f, l, h, &k, &v);
        vc_op_hold(h, 0);
    } else if (!f->cache && !f->paged) {
        k = f->kv_keep[2 * src];
        v = f->kv_keep[2 * src + 1];
    }
    q = q ? qk_heads(f, l, q, nh, 0) : NULL;
    if (rope_last(f, l)) { /* q's and k's ropes in one pass */
        int loc = c->window[l] > 0;
        vc_op_rope2_temp(g, &q, (int)nh, &k, (int)nkv, loc ? f->cos_l : f->cos, loc ? f->sin_l : f->sin, (int)hd,
                         loc ? local_rot(c) : c->rot_dim, c->rope_interleaved);
    }
attn:;
    /* paged, bf16 matmuls, o straight into its projection: the attention writes o's bf16 rounding beside it, held for
     * that GEMM (no rounding pass of its own a decode layer) */
    f->hold_o = f->paged && !c->attn_out_gate && vc_matmul_precision() == VC_PREC_BF16;
    vc_tensor *o = attend(f, l, src < 0 ? l : src, q, k, v, (int)nkv, (int)hd, (int)hdv);
    int held_o = f->hold_o;
    f->hold_o = 0;
    if (!o) return NULL;
    o = reshape3(g, o, T, 1, nh * hdv);
    int gact = c->attn_gate_softplus ? VC_ACT_SOFTPLUS : VC_ACT_SIGMOID; /* Laguna's softplus */
    if (c->attn_out_gate == 2) { /* LFM3, Laguna: each head's output times its gate */
        int64_t rows[2] = { T * nh, hdv }, one = T * nh;
        vc_tensor *gt = vc_op_act(g, lin(f, h, l, VC_W_ATTN_GATE, NULL), gact);
        o = vc_op_mul_rows(g, vc_reshape(g, o, 2, rows), gt ? vc_reshape(g, gt, 1, &one) : NULL);
        o = o ? reshape3(g, o, T, 1, nh * hdv) : NULL;
    } else if (c->attn_out_gate) /* AFMoE: each output channel times its gate projection's sigmoid */
        o = vc_op_mul(g, o, vc_op_act(g, lin(f, h, l, VC_W_ATTN_GATE, NULL), gact));
    vc_tensor *y = lin(f, o, l, VC_W_O, vc_w(m, l, VC_W_O_B));
    if (held_o && o) vc_op_hold(o, 0); /* the attention's held rounding of o, read */
    return y;
}

/* the latent q and kv norms' eps: DeepSeek's modules build them without the config's rms_norm_eps (1e-6 in every MLA
 * family transformers has) */
#define VC_MLA_NORM_EPS 1e-6f

/* multi-head latent attention: low-rank q and kv, a decoupled rotary part shared by all heads */
static vc_tensor *attention_mla(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_graph *g = f->g;
    int64_t T = f->T, nh = c->n_head, dn = c->qk_nope_dim, dr = c->qk_rope_dim, dv = c->v_head_dim;
    vc_tensor *q, *qlat = NULL;
    vc_op_hold(h, 1); /* the q and kv projections read the same input */
    if (c->q_lora_rank) {
        qlat = lin(f, h, l, VC_W_Q_A, NULL);
        qlat = vc_op_rmsnorm(g, qlat, vc_w(m, l, VC_W_Q_A_NORM), c->q_lora_rank, VC_MLA_NORM_EPS, 0);
        q = lin(f, qlat, l, VC_W_Q_BPROJ, NULL);
    } else q = lin(f, h, l, VC_W_Q, NULL);
    vc_tensor *ckv = lin(f, h, l, VC_W_KV_A, NULL); /* [T, rank + dr] */
    vc_status st = c->dsa_topk && qlat ? vc_dsa_layer(f, l, h, qlat) : VC_OK; /* DeepSeek Sparse Attention */
    vc_op_hold(h, 0);
    if (st) {
        vc_graph_fail(g, st);
        return NULL;
    }
    vc_tensor *lat = vc_op_slice_cols(g, ckv, c->kv_lora_rank + dr, 0, c->kv_lora_rank);
    vc_tensor *kpe = vc_op_slice_cols(g, ckv, c->kv_lora_rank + dr, c->kv_lora_rank, c->kv_lora_rank + dr);
    lat = vc_op_rmsnorm(g, lat, vc_w(m, l, VC_W_KV_A_NORM), c->kv_lora_rank, VC_MLA_NORM_EPS, 0);
    vc_tensor *kv = lin(f, lat, l, VC_W_KV_B, NULL); /* [T, nh * (dn + dv)] */
    vc_tensor *knope = vc_op_slice_cols(g, kv, dn + dv, 0, dn);          /* [T * nh, dn] */
    vc_tensor *v = vc_op_slice_cols(g, kv, dn + dv, dn, dn + dv);        /* [T * nh, dv] */
    vc_tensor *qnope = vc_op_slice_cols(g, q, dn + dr, 0, dn);
    vc_tensor *qpe = vc_op_slice_cols(g, q, dn + dr, dn, dn + dr);
    if (!c->nope[l]) { /* Kimi-Linear's MLA runs without rope */
        qpe = vc_op_rope_temp(g, qpe, f->cos, f->sin, (int)nh, (int)dr, (int)dr, c->rope_interleaved);
        kpe = vc_op_rope_temp(g, kpe, f->cos, f->sin, 1, (int)dr, (int)dr, c->rope_interleaved);
    }
    vc_tensor *qq = vc_op_concat_cols(g, qnope, dn, qpe, dr, 1);
    if (f->qscale && qq) { /* Mistral 4: q scaled by its position (Llama 4's attention scaling) */
        int64_t s2[2] = { T, nh * (dn + dr) };
        vc_tensor *q2 = vc_op_mul_rows(g, vc_reshape(g, qq, 2, s2), f->qscale);
        qq = q2 ? vc_reshape(g, q2, qq->ndim, qq->shape) : NULL;
    }
    vc_tensor *kk = vc_op_concat_cols(g, knope, dn, kpe, dr, nh);
    vc_tensor *o = attend(f, l, l, qq, kk, v, (int)nh, (int)(dn + dr), (int)dv);
    if (!o) return NULL;
    return lin(f, reshape3(g, o, T, 1, nh * dv), l, VC_W_O, NULL);
}

/* the linear mixers' conv rows under shared prefixes (lin_share_rows's, else the ext rows): rows among the T, each
 * row's position among them, their count and sequences */
typedef struct {
    const int32_t *rows, *own;
    int64_t T;
    const int64_t *cu;
} lin_rows;

static lin_rows conv_rows(const fwd_ctx *f) {
    if (!f->ext) return (lin_rows){ NULL, NULL, f->T, f->b->cu_seqlens };
    return f->lc_rows ? (lin_rows){ f->lc_rows, f->own_lc, f->T_lc, f->cu_lc }
                      : (lin_rows){ f->ext, f->own, f->T_ext, f->cu_ext };
}

/* ... and the recurrence's: from each prefix's tap row on (ls_rows) where lin_share_rows made them, else the conv's */
static lin_rows scan_rows(const fwd_ctx *f) {
    return f->ls_rows ? (lin_rows){ f->ls_rows, f->own_ls, f->T_ls, f->cu_ls } : conv_rows(f);
}

/* x's rows among the T gathered into r's (none without shared prefixes) */
static vc_tensor *rows_in(fwd_ctx *f, vc_tensor *x, lin_rows r) {
    return f->ext ? vc_op_gather_rows(f->g, x, f->T, r.rows, r.T) : x;
}

/* the conv's output rows taken to the recurrence's, and a sequence's own rows back from r's */
static vc_tensor *conv_to_scan(fwd_ctx *f, vc_tensor *x) {
    return f->ls_rows ? vc_op_gather_rows(f->g, x, f->T_lc, f->ls_of, f->T_ls) : x;
}
static vc_tensor *rows_out(fwd_ctx *f, vc_tensor *x, lin_rows r) {
    return f->ext ? vc_op_gather_rows(f->g, x, r.T, r.own, f->T) : x;
}

/* Gated DeltaNet (Qwen3-Next, Qwen3.5, OLMo-hybrid): q, k, v through a depthwise causal conv and silu, q and k
 * l2-normed (a weightless RMSNorm with eps 1e-6 / dk is sqrt(dk) times FLA's l2norm: k is scaled back, q's
 * 1 / sqrt(dk) becomes 1 / dk), the gated delta rule with beta = sigmoid(b) and decay -exp(A_log) softplus(a +
 * dt_bias), each value head's output RMS-normed and gated by silu(z). Kimi Delta Attention (Kimi-Linear): the decay
 * per key channel from a low-rank a, the gate sigmoid of a low-rank z. With a cache each sequence carries its conv and
 * recurrent states. */
static vc_tensor *linear_attention(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_graph *g = f->g;
    int64_t nk = c->lin_nk, nv = c->lin_nv, dk = c->lin_dk, dv = c->lin_dv, kd = nk * dk, vd = nv * dv, C = 2 * kd + vd;
    int kda = c->lin_kind == VC_LIN_KDA; /* Kimi Delta Attention: the decay and the output gate low-rank, per channel */
    vc_op_hold(h, 1);
    vc_tensor *qkv = lin(f, h, l, VC_W_LIN_QKV, NULL), *b = lin(f, h, l, VC_W_LIN_B, NULL);
    vc_tensor *z = kda ? lin(f, lin(f, h, l, VC_W_LIN_GA, NULL), l, VC_W_LIN_GB, NULL) : lin(f, h, l, VC_W_LIN_Z, NULL);
    vc_tensor *a = kda ? lin(f, lin(f, h, l, VC_W_LIN_FA, NULL), l, VC_W_LIN_FB, NULL) : lin(f, h, l, VC_W_LIN_A, NULL);
    if (c->lin_sep_qkv) { /* OLMo-hybrid: q, k and v projected apart, convolved together */
        vc_tensor *k = lin(f, h, l, VC_W_LIN_K, NULL), *v = lin(f, h, l, VC_W_LIN_V, NULL);
        qkv = vc_op_concat_cols(g, vc_op_concat_cols(g, qkv, kd, k, kd, 1), 2 * kd, v, vd, 1);
    }
    vc_op_hold(h, 0);
    float **cs = NULL, **rs = NULL;
    const int64_t *ct = NULL, *rt = NULL;
    if (lin_states(f, l, &cs, &rs, &ct, &rt)) return NULL;
    int ns = f->b->n_seq;
    /* shared prefixes: projected once; the conv over each sequence's prefix rows gathered in front of its own, the
     * recurrence over them or from the prefix's tap (ls_rows), its own rows taken back */
    lin_rows r = conv_rows(f), sr = scan_rows(f);
    qkv = rows_in(f, qkv, r);
    b = rows_in(f, b, sr), a = rows_in(f, a, sr);
    vc_tensor *cw = vc_w(m, l, VC_W_LIN_CONV);
    if (c->lin_sep_qkv) { /* q's, k's and v's conv weights stacked */
        vc_tensor *ck = vc_w(m, l, VC_W_LIN_CONV_K), *cv = vc_w(m, l, VC_W_LIN_CONV_V);
        int64_t s3[3] = { C, 1, c->lin_conv };
        cw = vc_op_concat_cols(g, vc_op_concat_cols(g, cw, cw->n, ck, ck->n, 1), cw->n + ck->n, cv, cv->n, 1);
        cw = cw ? vc_reshape(g, cw, 3, s3) : NULL;
    }
    qkv = conv_to_scan(f, vc_op_act(g, vc_op_conv1d_causal(g, qkv, cw, c->lin_conv, ns, r.cu, cs, ct), c->lin_act));
    vc_tensor *q = vc_op_slice_cols(g, qkv, C, 0, kd), *k = vc_op_slice_cols(g, qkv, C, kd, 2 * kd);
    vc_tensor *v = vc_op_slice_cols(g, qkv, C, 2 * kd, C);
    q = vc_op_rmsnorm(g, q, NULL, dk, 1e-6f / (float)dk, 0);
    k = vc_op_scale(g, vc_op_rmsnorm(g, k, NULL, dk, 1e-6f / (float)dk, 0), 1.0f / sqrtf((float)dk));
    vc_tensor *beta = vc_op_act(g, b, VC_ACT_SIGMOID);
    if (c->lin_beta_scale > 0 && c->lin_beta_scale != 1.0f) beta = vc_op_scale(g, beta, c->lin_beta_scale);
    vc_tensor *decay = vc_op_gdn_gate(g, a, vc_w(m, l, VC_W_LIN_ALOG), vc_w(m, l, VC_W_LIN_DT));
    vc_tensor *o = f->ls_rows ? vc_op_gdn_shared(g, q, k, v, decay, beta, ns, sr.cu, (int)nk, (int)nv, (int)dk,
                                                 (int)dv, 1.0f / (float)dk, 0, f->lin_from)
                              : vc_op_gdn(g, q, k, v, decay, beta, ns, sr.cu, (int)nk, (int)nv, (int)dk, (int)dv,
                                          1.0f / (float)dk, 0, rs, rt);
    o = rows_out(f, o, sr);
    o = vc_op_rmsnorm(g, o, vc_w(m, l, VC_W_LIN_NORM), dv, c->lin_norm_eps > 0 ? c->lin_norm_eps : c->norm_eps, 0);
    int64_t s2[2] = { f->T, vd };
    o = vc_op_mul(g, o ? vc_reshape(g, o, 2, s2) : NULL, vc_op_act(g, z, c->lin_gate_act));
    return lin(f, o, l, VC_W_LIN_OUT, NULL);
}

/* MiniMax-Text-01's lightning attention: silu(qkv_proj), per head [q, k, v]; linear attention S = exp(-s_h) S + k v^T,
 * o = S^T q (no normalisation, no scale) with each head's fixed decay s_h (slopes base^(h+1), base = 2^(-8 / nh),
 * shrinking with depth as transformers computes them); the output RMS-normed over all heads, gated by
 * sigmoid(output_gate), out_proj */
static vc_tensor *lightning(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    int64_t nh = c->lin_nv, hd = c->lin_dk, vd = nh * hd;
    vc_op_hold(h, 1);
    vc_tensor *qkv = vc_op_act(g, lin(f, h, l, VC_W_LIN_QKV, NULL), c->lin_act), *z = lin(f, h, l, VC_W_LIN_Z, NULL);
    vc_op_hold(h, 0);
    lin_rows r = scan_rows(f); /* shared prefixes: the recurrence from each prefix's tap (no conv) */
    qkv = rows_in(f, qkv, r);
    vc_tensor *q = vc_op_slice_cols(g, qkv, 3 * hd, 0, hd), *k = vc_op_slice_cols(g, qkv, 3 * hd, hd, 2 * hd);
    vc_tensor *v = vc_op_slice_cols(g, qkv, 3 * hd, 2 * hd, 3 * hd);
    float **cs = NULL, **rs = NULL;
    const int64_t *ct = NULL, *rt = NULL;
    if (lin_states(f, l, &cs, &rs, &ct, &rt)) return NULL;
    int64_t s1[2] = { r.T, nh };
    vc_tensor *ones = vc_tensor_wrap(g, f->ones->data, 2, s1); /* (its first r.T rows) */
    vc_tensor *decay = vc_op_affine_cols(g, ones, vc_tensor_wrap(g, f->slopes + l * nh, 1, &nh), NULL, 1);
    int ns = f->b->n_seq;
    vc_tensor *o = f->ls_rows ? vc_op_gdn_shared(g, q, k, v, decay, ones, ns, r.cu, (int)nh, (int)nh, (int)hd,
                                                 (int)hd, 1.0f, 1, f->lin_from)
                              : vc_op_gdn(g, q, k, v, decay, ones, ns, r.cu, (int)nh, (int)nh, (int)hd, (int)hd, 1.0f, 1,
                                          rs, rt);
    o = rows_out(f, o, r);
    int64_t s2[2] = { f->T, vd };
    o = vc_op_rmsnorm(g, o ? vc_reshape(g, o, 2, s2) : NULL, vc_w(f->m, l, VC_W_LIN_NORM), vd, c->lin_norm_eps, 0);
    o = vc_op_mul(g, o, vc_op_act(g, z, c->lin_gate_act));
    return lin(f, o, l, VC_W_LIN_OUT, NULL);
}

/* LFM2's gated short convolution: in_proj into B, C and x; C * conv(B * x) (depthwise, causal, no activation); with
 * shared prefixes computed once but for the conv, which reads each sequence's last K - 1 prefix rows */
static vc_tensor *short_conv(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    int64_t H = c->hidden;
    vc_tensor *bcx = lin(f, h, l, VC_W_LIN_QKV, NULL);
    vc_tensor *B = vc_op_slice_cols(g, bcx, 3 * H, 0, H), *C = vc_op_slice_cols(g, bcx, 3 * H, H, 2 * H);
    vc_tensor *x = vc_op_slice_cols(g, bcx, 3 * H, 2 * H, 3 * H);
    float **cs = NULL, **rs = NULL;
    const int64_t *ct = NULL, *rt = NULL;
    if (lin_states(f, l, &cs, &rs, &ct, &rt)) return NULL;
    lin_rows r = conv_rows(f); /* shared prefixes: each sequence's last K - 1 prefix rows in front of its own */
    vc_tensor *bx = rows_in(f, vc_op_mul(g, B, x), r);
    vc_tensor *y = vc_op_conv1d_causal(g, bx, vc_w(f->m, l, VC_W_LIN_CONV), c->lin_conv, f->b->n_seq, r.cu, cs, ct);
    y = rows_out(f, y, r);
    return lin(f, vc_op_mul(g, C, y), l, VC_W_LIN_OUT, NULL);
}

/* Mamba's conv over the packed rows cu (its states carried with a cache), its bias, then the activation */
static vc_tensor *mamba_conv(fwd_ctx *f, int l, vc_tensor *x, const int64_t *cu, float **cs, const int64_t *ct) {
    const vc_model_config *c = &f->m->cfg;
    x = vc_op_conv1d_causal(f->g, x, vc_w(f->m, l, VC_W_LIN_CONV), c->lin_conv, f->b->n_seq, cu, cs, ct);
    vc_tensor *cb = vc_w(f->m, l, VC_W_LIN_CONV_B);
    if (cb) x = vc_op_affine_cols(f->g, x, NULL, cb, 1);
    return vc_op_act(f->g, x, c->lin_act);
}

/* Mamba 2 (Granite 4): in_proj into z [I], xBC [I + 2 G N] and dt [nh]; xBC through the conv (+ bias) and silu; the
 * SSD scan per head with state [N, P] (the gated delta rule's kernels without the delta rule: k = B, v = x, q = C,
 * beta = dt = softplus(dt + dt_bias), decay -exp(A_log) dt), plus D x; y silu(z) RMS-normed in G groups times the
 * norm's weight; out_proj. With shared prefixes (f->ext) as Gated DeltaNet: projected once, the conv over each
 * sequence's prefix rows gathered in front of its own, the scan from the prefix's tap (f->lin_from) where it has
 * one, the rest on the sequences' own rows. */
static vc_tensor *mamba2(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_graph *g = f->g;
    int64_t G = c->lin_nk, N = c->lin_dk, nh = c->lin_nv, P = c->lin_dv, I = nh * P, cd = I + 2 * G * N;
    int64_t proj = I + cd + nh;
    if (c->mup.on && c->mup.ssm_in != 1.0f) h = vc_op_scale(g, h, c->mup.ssm_in); /* Falcon-H1's multipliers */
    vc_tensor *zxd = lin(f, h, l, VC_W_LIN_QKV, NULL);
    if (c->mup.on && f->mup_vec) zxd = vc_op_affine_cols(g, zxd, f->mup_vec, NULL, 1);
    vc_tensor *z = vc_op_slice_cols(g, zxd, proj, 0, I), *xbc = vc_op_slice_cols(g, zxd, proj, I, I + cd);
    vc_tensor *dt = vc_op_slice_cols(g, zxd, proj, I + cd, proj);
    float **cs = NULL, **rs = NULL;
    const int64_t *ct = NULL, *rt = NULL;
    if (lin_states(f, l, &cs, &rs, &ct, &rt)) return NULL;
    int ns = f->b->n_seq;
    lin_rows r = conv_rows(f), sr = scan_rows(f); /* shared prefixes: the conv's and the scan's rows */
    xbc = conv_to_scan(f, mamba_conv(f, l, rows_in(f, xbc, r), r.cu, cs, ct));
    dt = rows_in(f, dt, sr);
    const int64_t *cu = sr.cu;
    vc_tensor *x = vc_op_slice_cols(g, xbc, cd, 0, I), *B = vc_op_slice_cols(g, xbc, cd, I, I + G * N);
    vc_tensor *C = vc_op_slice_cols(g, xbc, cd, I + G * N, cd);
    vc_tensor *dtp = vc_op_act(g, vc_op_affine_cols(g, dt, NULL, vc_w(m, l, VC_W_LIN_DT), 1), VC_ACT_SOFTPLUS);
    vc_tensor *decay = vc_op_gdn_gate(g, dt, vc_w(m, l, VC_W_LIN_ALOG), vc_w(m, l, VC_W_LIN_DT));
    vc_tensor *y = f->ls_rows
                       ? vc_op_gdn_shared(g, C, B, x, decay, dtp, ns, cu, (int)G, (int)nh, (int)N, (int)P, 1.0f, 1,
                                          f->lin_from)
                       : vc_op_gdn(g, C, B, x, decay, dtp, ns, cu, (int)G, (int)nh, (int)N, (int)P, 1.0f, 1, rs, rt);
    int64_t s2[2] = { sr.T, I };
    y = vc_op_add(g, y ? vc_reshape(g, y, 2, s2) : NULL, vc_op_affine_cols(g, x, vc_w(m, l, VC_W_LIN_D), NULL, P));
    y = rows_out(f, y, sr);
    vc_tensor *gz = vc_op_act(g, z, VC_ACT_SILU); /* y silu(z), RMS-normed per group before or after, or not */
    if (c->lin_norm != 1) y = vc_op_mul(g, y, gz);
    if (c->lin_norm != 2) {
        y = vc_op_rmsnorm(g, y, NULL, I / G, c->norm_eps, 0);
        y = vc_op_affine_cols(g, y, vc_w(m, l, VC_W_LIN_NORM), NULL, 1);
    }
    if (c->lin_norm == 1) y = vc_op_mul(g, y, gz);
    return lin(f, y, l, VC_W_LIN_OUT, NULL);
}

/* Mamba 1 (Jamba, Mamba, FalconMamba): in_proj into x [I] and z [I]; x through the conv (+ bias) and silu; x_proj into
 * dt [R], B and C [N] (Jamba: each RMS-normed with its weight); delta = softplus(dt_proj(dt) + dt_proj's bias); the
 * selective scan per channel with state [N], plus D x; times silu(z); out_proj. With shared prefixes (f->ext):
 * projected once, the conv over each sequence's last K - 1 prefix rows in front of its own, the scan from the
 * prefix's final state (f->lin_from) on its own rows. */
static vc_tensor *mamba1(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_graph *g = f->g;
    int64_t I = c->lin_nv, N = c->lin_dk, R = c->lin_rank, W = R + 2 * N;
    vc_tensor *xz = lin(f, h, l, VC_W_LIN_QKV, NULL);
    vc_tensor *x = vc_op_slice_cols(g, xz, 2 * I, 0, I), *z = vc_op_slice_cols(g, xz, 2 * I, I, 2 * I);
    float **cs = NULL, **rs = NULL;
    const int64_t *ct = NULL, *rt = NULL;
    if (lin_states(f, l, &cs, &rs, &ct, &rt)) return NULL;
    int ns = f->b->n_seq;
    lin_rows r = conv_rows(f), sr = scan_rows(f); /* shared prefixes: the conv's and the scan's rows */
    x = conv_to_scan(f, mamba_conv(f, l, rows_in(f, x, r), r.cu, cs, ct));
    const int64_t *cu = sr.cu;
    vc_tensor *dbc = lin(f, x, l, VC_W_LIN_XPROJ, NULL);
    vc_tensor *dt = vc_op_slice_cols(g, dbc, W, 0, R), *B = vc_op_slice_cols(g, dbc, W, R, R + N);
    vc_tensor *C = vc_op_slice_cols(g, dbc, W, R + N, W);
    if (c->lin_bcdt_norm) { /* Jamba: weighted RMSNorms; FalconMamba: weightless, mixer_rms_eps */
        float eps = c->lin_norm_eps > 0 ? c->lin_norm_eps : c->norm_eps;
        dt = vc_op_rmsnorm(g, dt, vc_w(m, l, VC_W_LIN_DT_NORM), R, eps, 0);
        B = vc_op_rmsnorm(g, B, vc_w(m, l, VC_W_LIN_B_NORM), N, eps, 0);
        C = vc_op_rmsnorm(g, C, vc_w(m, l, VC_W_LIN_C_NORM), N, eps, 0);
    }
    dt = lin(f, dt, l, VC_W_LIN_DTPROJ, NULL);
    vc_tensor *delta = vc_op_act(g, vc_op_affine_cols(g, dt, NULL, vc_w(m, l, VC_W_LIN_DT), 1), VC_ACT_SOFTPLUS);
    vc_tensor *A = vc_w(m, l, VC_W_LIN_ALOG);
    vc_tensor *y = f->ls_rows ? vc_op_ssm_scan_shared(g, x, delta, A, B, C, ns, cu, f->lin_from)
                              : vc_op_ssm_scan(g, x, delta, A, B, C, ns, cu, rs, rt);
    y = rows_out(f, vc_op_add(g, y, vc_op_affine_cols(g, x, vc_w(m, l, VC_W_LIN_D), NULL, 1)), sr);
    return lin(f, vc_op_mul(g, y, vc_op_act(g, z, VC_ACT_SILU)), l, VC_W_LIN_OUT, NULL);
}

/* gate and up in one GEMM (vc_op_gated_mlp): where they lie together in memory and carry no bias, LoRA adapter or
 * muP multiplier */
static int gate_up_fused(fwd_ctx *f, int l, int gate, int up, int down) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    if (f->split_gu || !gate || (c->mup.on && (c->mup.mlp_gate != 1.0f || c->mup.mlp_down != 1.0f))) return 0;
    if (gate == VC_W_GATE && (vc_w(m, l, VC_W_GATE_B) || vc_w(m, l, VC_W_UP_B))) return 0;
    if (vc_lora_index(m, l, gate) >= 0 || vc_lora_index(m, l, up) >= 0 || vc_lora_index(m, l, down) >= 0) return 0;
    return vc_gate_up_adjacent(vc_w(m, l, gate), vc_w(m, l, up));
}

static vc_tensor *mlp(fwd_ctx *f, int l, vc_tensor *h, int gate, int up, int down) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    if (gate_up_fused(f, l, gate, up, down))
        return vc_op_gated_mlp(f->g, h, vc_w(m, l, gate), vc_w(m, l, up), c->act, vc_w(m, l, down),
                               down == VC_W_DOWN ? vc_w(m, l, VC_W_DOWN_B) : NULL, !f->f32_act);
    int gated = gate && vc_w(m, l, gate);
    if (gated) vc_op_hold(h, 1); /* up and gate read the same input */
    vc_tensor *u = lin(f, h, l, up, up == VC_W_UP ? vc_w(m, l, VC_W_UP_B) : NULL);
    vc_tensor *gt = gated ? lin(f, h, l, gate, gate == VC_W_GATE ? vc_w(m, l, VC_W_GATE_B) : NULL) : NULL;
    if (gated) vc_op_hold(h, 0);
    if (c->mup.on && (c->mup.mlp_gate != 1.0f || c->mup.mlp_down != 1.0f)) { /* Falcon-H1: gate and output scaled */
        vc_tensor *a = vc_op_act_mul(f->g, vc_op_scale(f->g, gt, c->mup.mlp_gate), u, c->act);
        return vc_op_scale(f->g, lin(f, a, l, down, down == VC_W_DOWN ? vc_w(m, l, VC_W_DOWN_B) : NULL), c->mup.mlp_down);
    }
    vc_tensor *Wd = vc_w(m, l, down), *bd = down == VC_W_DOWN ? vc_w(m, l, VC_W_DOWN_B) : NULL;
    if (gated && !f->f32_act && vc_lora_index(m, l, down) < 0) /* bf16 with bf16 matmuls */
        return vc_op_act_mul_linear(f->g, gt, u, c->act, Wd, bd);
    vc_tensor *a = gated ? vc_op_act_mul(f->g, gt, u, c->act)
                 : c->xielu ? vc_op_xielu(f->g, u, vc_w(m, l, VC_W_XIELU_AP), vc_w(m, l, VC_W_XIELU_AN), VC_XIELU_BETA,
                                          VC_XIELU_EPS)
                            : vc_op_act(f->g, u, c->act);
    return lin(f, a, l, down, bd);
}

static vc_tensor *scaled(fwd_ctx *f, vc_tensor *x, float s) { return s == 1.0f ? x : vc_op_scale(f->g, x, s); }

static vc_tensor *moe(fwd_ctx *f, int l, vc_tensor *h) {
    const vc_model_config *c = &f->m->cfg;
    vc_model *m = f->m;
    vc_route_desc rd = { .n_expert = (int)c->n_expert, .top_k = (int)c->top_k, .sigmoid = c->router_sigmoid,
                         .norm_topk = c->norm_topk, .norm_min = c->norm_topk_min, .scaling = c->routed_scaling,
                         .n_group = c->n_group,
                         .topk_group = c->topk_group, .group_top2_sum = c->group_top2,
                         .scale_input = c->route_scale_input, .bias_logits = c->router_bias_logits,
                         .sparsemixer = c->router_sparsemixer, .jitter_eps = c->router_jitter };
    vc_tensor *bias = vc_w(m, l, VC_W_ROUTER_BIAS);
    rd.bias = bias ? bias->data : NULL;
    if (f->b->route && f->b->route_mode) { /* router replay: this layer's experts of every token */
        int32_t *r = f->b->route + (size_t)l * (size_t)f->T * (size_t)c->top_k;
        if (f->b->route_mode == VC_ROUTE_REPLAY) rd.replay_idx = r;
        else rd.record_idx = r;
    }
    vc_tensor *r = h, *xe = h;
    if (c->moe_dense) { /* Gemma 4: h is the residual; the router reads it weightless-normed times a scale and
                         * hidden^-0.5, the experts their own norm of it */
        r = vc_op_scale(f->g, vc_op_rmsnorm(f->g, h, vc_w(m, l, VC_W_ROUTER_SCALE), c->hidden, c->norm_eps, 0),
                        1.0f / sqrtf((float)c->hidden));
        xe = norm(f, h, l, VC_W_PRE_FFN_NORM2, 0);
    }
    vc_tensor *logits = lin(f, r, l, VC_W_ROUTER, vc_w(m, l, VC_W_ROUTER_B));
    if (c->router_softcap > 0) logits = vc_op_softcap(f->g, logits, c->router_softcap); /* Laguna */
    const vc_lora *a = m->lora; /* adapters on the routed experts (PEFT's target_parameters) */
    int gu = vc_lora_index(m, l, VC_W_EXP_GATE), dn = vc_lora_index(m, l, VC_W_EXP_DOWN);
    vc_moe_lora lo = { gu >= 0 ? &a->t[2 * gu] : NULL, gu >= 0 ? &a->t[2 * gu + 1] : NULL,
                       dn >= 0 ? &a->t[2 * dn] : NULL, dn >= 0 ? &a->t[2 * dn + 1] : NULL, a ? a->scale : 0 };
    vc_moe_bias bi = { vc_w(m, l, VC_W_EXP_GATE_B), vc_w(m, l, VC_W_EXP_UP_B), vc_w(m, l, VC_W_EXP_DOWN_B),
                       vc_w(m, l, VC_W_EXP_SCALE) };
    if (c->moe_latent) xe = lin(f, h, l, VC_W_LAT_IN, NULL); /* Nemotron-H: experts in a latent space */
    vc_tensor *y = vc_op_moe_ex(f->g, xe, logits, vc_w(m, l, VC_W_EXP_GATE), vc_w(m, l, VC_W_EXP_UP),
                                vc_w(m, l, VC_W_EXP_DOWN), c->act, &rd, &lo, &bi);
    if (c->moe_latent) y = lin(f, y, l, VC_W_LAT_OUT, NULL);
    if (!c->shared_inter) return y;
    vc_tensor *s = mlp(f, l, h, VC_W_SH_GATE, VC_W_SH_UP, VC_W_SH_DOWN);
    if (c->shared_scale) s = scaled(f, s, c->shared_scale); /* Cohere2-MoE's "average" */
    if (c->shared_gate) {
        vc_tensor *gt = vc_op_act(f->g, lin(f, h, l, VC_W_SH_GATE_PROJ, NULL), VC_ACT_SIGMOID);
        s = vc_op_mul_rows(f->g, s, gt ? vc_reshape(f->g, gt, 1, &f->T) : NULL);
    }
    return vc_op_add(f->g, y, s);
}


/* layer l normalises its input before its mixer */
static int pre_norm(const vc_model_config *c, int l) { return !c->no_pre_norm || (c->linear[l] && c->lin_pre_norm); }

/* layer l's block is the usual one: its norms' outputs are read by the projections only, and held for them */
static int layer_held(const vc_model_config *c, int l) {
    return pre_norm(c, l) && !c->norm_res.on && !c->post_ln && c->block[l] != VC_BLOCK_MLP && !c->parallel_ssm;
}

/* without a tape, the layer's output x + mo straight into forward's buffer f->into; where the next layer starts with
 * an RMSNorm of it that it holds, that norm in the same pass (into f->into_h, read by the next layer as f->pre_h) */
static vc_tensor *layer_out(fwd_ctx *f, int l, vc_tensor *x, vc_tensor *mo) {
    const vc_model_config *c = &f->m->cfg;
    vc_tensor *into = f->into, *hn = f->into_h;
    int64_t C = into->shape[into->ndim - 1], R = into->n / C;
    const vc_backend *B = vc_be();
    if (hn && B->add_rmsnorm_held && l + 1 < c->n_layer && l >= f->n_deep && !f->m->layer_hook &&
        c->norm_kind != VC_NORM_LAYER && layer_held(c, l + 1)) {
        vc_tensor *w = vc_w(f->m, l + 1, VC_W_ATTN_NORM);
        B->add_rmsnorm_held(into->data, hn->data, NULL, x->data, mo->data, w ? w->data : NULL, R, C, c->norm_eps,
                            c->norm_offset);
        f->pre_h = hn;
    } else B->add(into->data, x->data, mo->data, x->n);
    return into;
}

vc_tensor *vc_dec_layer_forward(fwd_ctx *f, int l, vc_tensor *x) {
    const vc_model_config *c = &f->m->cfg;
    vc_status hs = f->m->layer_hook ? f->m->layer_hook(f->m->layer_hook_ctx, l) : VC_OK; /* ZeRO-3: gather */
    if (hs) {
        vc_graph_fail(f->g, hs);
        return NULL;
    }
    int pre = pre_norm(c, l), post = c->sandwich_norm && !(c->linear[l] && c->lin_pre_norm);
    /* the usual block (its norms' outputs read by the projections only): the norms hold them for those GEMMs */
    int held = layer_held(c, l);
    vc_tensor *h = held && f->pre_h ? f->pre_h /* (the layer before normed x in its last pass) */
                   : held ? norm_held(f, x, l, VC_W_ATTN_NORM, VC_W_ATTN_NORM_B)
                   : pre ? norm(f, x, l, VC_W_ATTN_NORM, VC_W_ATTN_NORM_B) : x;
    f->pre_h = NULL;
    if (c->norm_res.on) { /* MiniMax-Text-01: x' = alpha norm(x) + beta sublayer(norm(x)), twice */
        int li = c->linear[l];
        vc_tensor *a = li ? lightning(f, l, h) : attention_std(f, l, h);
        x = vc_op_add(f->g, scaled(f, h, c->norm_res.attn_alpha[li]), scaled(f, a, c->norm_res.attn_beta[li]));
        h = norm(f, x, l, VC_W_FFN_NORM, VC_W_FFN_NORM_B);
        vc_tensor *mo = c->is_moe[l] ? moe(f, l, h) : mlp(f, l, h, VC_W_GATE, VC_W_UP, VC_W_DOWN);
        return vc_op_add(f->g, scaled(f, h, c->norm_res.mlp_alpha), scaled(f, mo, c->norm_res.mlp_beta));
    }
    if (c->post_ln) { /* OPT-350m: x = norm(x + attention(x)), then x = norm(x + mlp(x)) */
        x = norm(f, vc_op_add(f->g, x, attention_std(f, l, x)), l, VC_W_ATTN_NORM, VC_W_ATTN_NORM_B);
        return norm(f, vc_op_add(f->g, x, mlp(f, l, x, VC_W_GATE, VC_W_UP, VC_W_DOWN)), l, VC_W_FFN_NORM, VC_W_FFN_NORM_B);
    }
    if (c->block[l] == VC_BLOCK_MLP) /* Nemotron-H: a block of an MLP (or MoE) only */
        return vc_op_add(f->g, x, c->is_moe[l] ? moe(f, l, h) : mlp(f, l, h, VC_W_GATE, VC_W_UP, VC_W_DOWN));
    if (c->parallel_ssm) { /* Falcon-H1: attention and the Mamba 2 mixer read the same input, their outputs summed */
        vc_tensor *ms = vc_op_scale(f->g, mamba2(f, l, h), c->mup.ssm_out);
        vc_tensor *at = vc_op_scale(f->g, attention_std(f, l, vc_op_scale(f->g, h, c->mup.attn_in)), c->mup.attn_out);
        x = vc_op_add(f->g, x, vc_op_add(f->g, ms, at));
        h = norm(f, x, l, VC_W_FFN_NORM, VC_W_FFN_NORM_B);
        return vc_op_add(f->g, x, mlp(f, l, h, VC_W_GATE, VC_W_UP, VC_W_DOWN));
    }
    vc_tensor *a = !c->linear[l] ? (c->mla ? attention_mla(f, l, h) : attention_std(f, l, h))
                   : c->lin_kind == VC_LIN_GDN || c->lin_kind == VC_LIN_KDA ? linear_attention(f, l, h) /* (its own) */
                   : c->lin_kind == VC_LIN_MAMBA2 ? mamba2(f, l, h) /* (likewise) */
                   : c->lin_kind == VC_LIN_SHORTCONV ? short_conv(f, l, h)
                   : mamba1(f, l, h);
    if (held && !c->parallel_block) vc_op_hold(h, 0);
    if (c->block[l] == VC_BLOCK_MIXER) return vc_op_add(f->g, x, a); /* ... or of a mixer only */
    if (post) a = norm(f, a, l, VC_W_POST_ATTN_NORM, 0);
    if (c->residual_scale) a = vc_op_scale(f->g, a, c->residual_scale);
    if (c->parallel_block) { /* GPT-NeoX: the MLP reads its own norm of x; Cohere2-MoE: MoE layers' experts */
        vc_tensor *hm = c->parallel_norms ? norm(f, x, l, VC_W_FFN_NORM, VC_W_FFN_NORM_B) : h;
        vc_tensor *mo = c->is_moe[l] ? moe(f, l, hm) : mlp(f, l, hm, VC_W_GATE, VC_W_UP, VC_W_DOWN);
        if (held) vc_op_hold(h, 0); /* (the MLP may have read it too) */
        return vc_op_add(f->g, vc_op_add(f->g, x, a), mo);
    }
    if (held && c->norm_kind != VC_NORM_LAYER) /* the residual sum and the MLP's norm in one pass */
        h = vc_op_add_rmsnorm_held(f->g, x, a, vc_w(f->m, l, VC_W_FFN_NORM), c->norm_eps, c->norm_offset, &x);
    else {
        x = vc_op_add(f->g, x, a);
        h = held ? norm_held(f, x, l, VC_W_FFN_NORM, VC_W_FFN_NORM_B) : pre ? norm(f, x, l, VC_W_FFN_NORM, VC_W_FFN_NORM_B) : x;
    }
    vc_tensor *mo;
    if (c->is_moe[l] && c->moe_dense) { /* Gemma 4: the dense MLP and the experts (reading x) each post-normed */
        vc_op_hold(x, 1);
        mo = norm(f, mlp(f, l, h, VC_W_GATE, VC_W_UP, VC_W_DOWN), l, VC_W_POST_FFN_NORM1, 0);
        mo = vc_op_add(f->g, mo, norm(f, moe(f, l, x), l, VC_W_POST_FFN_NORM2, 0));
        vc_op_hold(x, 0);
    } else mo = c->is_moe[l] ? moe(f, l, h) : mlp(f, l, h, VC_W_GATE, VC_W_UP, VC_W_DOWN);
    if (held) vc_op_hold(h, 0);
    if (post || (c->moe_post_norm && c->is_moe[l])) mo = norm(f, mo, l, VC_W_POST_FFN_NORM, 0);
    if (c->residual_scale) mo = vc_op_scale(f->g, mo, c->residual_scale);
    if (f->into && x && mo && !c->ple_dim && !c->layer_scalar && x->n == f->into->n && mo->n == f->into->n)
        return layer_out(f, l, x, mo);
    x = vc_op_add(f->g, x, mo);
    if (c->ple_dim) { /* Gemma 4's per-layer input: x + norm(proj(act(gate(x)) * ple_l)) */
        vc_tensor *pl = f->ple[l];
        vc_op_hold(x, 1);
        vc_tensor *gt = vc_op_mul(f->g, vc_op_act(f->g, lin(f, x, l, VC_W_PLE_GATE, NULL), c->act), pl);
        vc_op_hold(x, 0);
        x = vc_op_add(f->g, x, norm(f, lin(f, gt, l, VC_W_PLE_PROJ, NULL), l, VC_W_PLE_NORM, 0));
    }
    if (c->layer_scalar) x = vc_op_affine_cols(f->g, x, vc_w(f->m, l, VC_W_LAYER_SCALAR), NULL, c->hidden);
    return x;
}

/* Gradient checkpointing: the layer runs without a tape; its node re-runs it on a scratch graph in
 * backward and back-propagates the incoming gradient through that recomputation, which writes the
 * layer's weight gradients. The node declares those weights (every tensor of the layer's slots,
 * vc_node_writes), so data-parallel training knows which node writes them. */
typedef struct {
    fwd_ctx f;
    int layer;
    vc_graph *sub; /* during its backward: the recomputation's graph */
} ckpt_saved;

/* Tensors of the forward's graph a layer reads besides x (KV sharing's kept keys and values, Gemma 4's per-layer
 * input) are inputs 1, 2 and 3 of its checkpoint node; the recomputation reads them as leaves of its own graph and
 * adds their gradients to theirs. A layer whose keys and values later layers reuse, and whose node runs after theirs
 * in backward, seeds its recomputed keys and values with the gradients they gathered. keep: the recomputation's kept
 * tensors (a copy, so the forward's stay for other layers); ple: its per-layer inputs likewise */
static vc_status ckpt_in(vc_graph *sub, vc_node *n, const ckpt_saved *s, fwd_ctx *f, vc_tensor **keep, vc_tensor **ple) {
    const vc_model_config *c = &f->m->cfg;
    int l = s->layer, src = c->kv_src[l] - 1;
    if (f->kv_keep) {
        memcpy(keep, f->kv_keep, sizeof(vc_tensor *) * 2 * (size_t)c->n_layer);
        f->kv_keep = keep;
    }
    if (f->ple) {
        memcpy(ple, f->ple, sizeof(vc_tensor *) * (size_t)c->n_layer);
        f->ple = ple;
    }
    vc_tensor **dst[3] = { src >= 0 ? &keep[2 * src] : NULL, src >= 0 ? &keep[2 * src + 1] : NULL, f->ple ? &ple[l] : NULL };
    for (int i = 0; i < 3; i++) {
        vc_tensor *t = n->in[1 + i], *w = t && dst[i] ? vc_tensor_wrap(sub, t->data, t->ndim, t->shape) : NULL;
        if (!t || !dst[i]) continue;
        if (!w) return vc_graph_status(sub) ? vc_graph_status(sub) : VC_ERR_INTERNAL;
        w->requires_grad = 1;
        *dst[i] = w;
    }
    return VC_OK;
}

static void ckpt_grads(vc_graph *g, vc_node *n, const ckpt_saved *s, vc_tensor **keep, vc_tensor **ple, int after) {
    const vc_model_config *c = &s->f.m->cfg;
    int l = s->layer, src = c->kv_src[l] - 1;
    vc_tensor *leaf[3] = { src >= 0 ? keep[2 * src] : NULL, src >= 0 ? keep[2 * src + 1] : NULL, ple ? ple[l] : NULL };
    for (int i = 0; after && i < 3; i++) { /* the leaves' gradients to the forward's tensors */
        float *d = leaf[i] && leaf[i]->grad && n->in[1 + i] ? vc_tensor_grad(g, n->in[1 + i]) : NULL;
        if (d) vc_be()->axpy(d, 1.0f, leaf[i]->grad, leaf[i]->n);
    }
    for (int i = 0; !after && s->f.kv_need && s->f.kv_need[l] && i < 2; i++) { /* the maker: seed its recomputed ones */
        vc_tensor *kept = s->f.kv_keep[2 * l + i], *re = keep[2 * l + i];
        float *d = kept && kept->grad && re ? vc_tensor_grad(s->sub, re) : NULL;
        if (d) vc_be()->axpy(d, 1.0f, kept->grad, kept->n);
    }
}

static void ckpt_bw(vc_graph *g, vc_node *n) {
    ckpt_saved *s = n->saved;
    vc_graph *sub = vc_graph_child(g);
    float *gx = vc_tensor_grad(g, n->in[0]);
    size_t nl = (size_t)s->f.m->cfg.n_layer;
    vc_tensor **keep = s->f.kv_keep ? calloc(2 * nl, sizeof *keep) : NULL, **ple = s->f.ple ? calloc(nl, sizeof *ple) : NULL;
    if (!sub || !gx || (s->f.kv_keep && !keep) || (s->f.ple && !ple)) {
        vc_graph_child_release(sub);
        free(keep);
        free(ple);
        return;
    }
    vc_tensor *x = vc_tensor_wrap(sub, n->in[0]->data, n->in[0]->ndim, n->in[0]->shape);
    x->requires_grad = 1;
    fwd_ctx f = s->f;
    f.g = sub;
    s->sub = sub;
    vc_tensor *y = ckpt_in(sub, n, s, &f, keep, ple) ? NULL : vc_dec_layer_forward(&f, s->layer, x);
    float *gy = y ? vc_tensor_grad(sub, y) : NULL;
    if (gy) {
        vc_be()->d2d(gy, n->out->grad, (size_t)y->n * sizeof(float));
        ckpt_grads(g, n, s, keep, ple, 0);
        vc_graph_backward_from(sub);
        if (x->grad) vc_be()->axpy(gx, 1.0f, x->grad, x->n);
        ckpt_grads(g, n, s, keep, ple, 1);
    }
    vc_graph_child_release(sub);
    free(keep);
    free(ple);
}

static vc_tensor *layer_checkpointed(fwd_ctx *f, int l, vc_tensor *x) {
    vc_graph_set_grad(f->g, 0);
    vc_tensor *y = vc_dec_layer_forward(f, l, x);
    vc_graph_set_grad(f->g, 1);
    if (!y) return NULL;
    /* with LoRA the frozen base leaves the residual stream without gradient, yet the layer's adapters
     * need this node: it is recorded as if x required a gradient */
    const vc_lora *a = f->m->lora;
    uint8_t had = x->requires_grad;
    if (a) x->requires_grad = 1;
    int src = f->m->cfg.kv_src[l] - 1; /* KV sharing's kept keys and values, the per-layer input (ckpt_in) */
    vc_tensor *in[4] = { x, src >= 0 ? f->kv_keep[2 * src] : NULL, src >= 0 ? f->kv_keep[2 * src + 1] : NULL,
                         f->ple ? f->ple[l] : NULL };
    vc_node *n = vc_tape_push(f->g, ckpt_bw, y, 4, in);
    x->requires_grad = had;
    if (n) {
        ckpt_saved *s = vc_graph_alloc(f->g, sizeof *s, 0);
        if (!s) return NULL;
        s->f = *f;
        s->layer = l;
        n->saved = s;
        y->requires_grad = 1;
        /* the gradients it writes: the layer's weights and adapters */
        vc_tensor *w[VC_W_COUNT * 3];
        int k = 0;
        for (int i = 0; i < VC_W_COUNT; i++) {
            w[k++] = f->m->slots[(size_t)l * VC_W_COUNT + i];
            int ai = a && a->on ? a->index[(size_t)l * VC_W_COUNT + i] : -1;
            if (ai >= 0) w[k++] = &a->t[2 * ai], w[k++] = &a->t[2 * ai + 1];
        }
        if (vc_node_writes(f->g, n, k, w)) return NULL;
    }
    return y;
}

static vc_tensor *forward(vc_model *m, vc_graph *g, const vc_batch *b, vc_kv_cache *cache, const vc_kv_pages *paged);

vc_tensor *vc_model_forward(vc_model *m, vc_graph *g, const vc_batch *b, vc_kv_cache *cache) {
    return forward(m, g, b, cache, NULL);
}

vc_tensor *vc_model_forward_paged(vc_model *m, vc_graph *g, const vc_batch *b, const vc_kv_pages *kv) {
    int grad = vc_graph_grad_enabled(g);
    vc_graph_set_grad(g, 0);
    vc_tensor *x = forward(m, g, b, NULL, kv);
    vc_graph_set_grad(g, grad);
    return x;
}

/* GPT-2, OPT: the embeddings plus each position's learned embedding (positions past max_position_embeddings refused) */
/* fairseq's sinusoidal positions, as transformers builds XGLM's table in float32: sin(p w_i) for the first half of the
 * columns, cos(p w_i) for the second, w_i = exp(-i log(10000) / (half - 1)); an odd width's last column 0 */
static vc_tensor *sin_positions(fwd_ctx *f, vc_tensor *x) {
    const vc_model_config *c = &f->m->cfg;
    int64_t H = c->hidden, half = H / 2, sh[2] = { f->T, H };
    float *tab = vc_graph_alloc(f->g, sizeof(float) * (size_t)(f->T * H + 1), 1);
    float *w = vc_graph_alloc(f->g, sizeof(float) * (size_t)(half + 1), 0);
    if (!tab || !w) return NULL;
    float step = (float)(log(10000.0) / (double)(half > 1 ? half - 1 : 1));
    for (int64_t i = 0; i < half; i++) w[i] = expf((float)i * -step);
    for (int64_t t = 0; t < f->T; t++) {
        float p = (float)(f->pos[t] + c->pos_offset);
        for (int64_t i = 0; i < half; i++) {
            tab[t * H + i] = sinf(p * w[i]);
            tab[t * H + half + i] = cosf(p * w[i]);
        }
    }
    float *dev = vc_graph_upload(f->g, tab, sizeof(float) * (size_t)(f->T * H + 1));
    return dev ? vc_op_add(f->g, x, vc_tensor_wrap(f->g, dev, 2, sh)) : NULL;
}

static vc_tensor *add_positions(fwd_ctx *f, vc_tensor *x) {
    const vc_model_config *c = &f->m->cfg;
    if (c->sin_pos) return sin_positions(f, x);
    int32_t *pid = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(f->T ? f->T : 1), 0);
    if (!pid) return NULL;
    for (int64_t t = 0; t < f->T; t++) {
        if (f->pos[t] >= c->max_pos) {
            vc_graph_fail(f->g, vc_fail(VC_ERR_ARG, "model forward: position %lld is beyond %s's %lld learned positions "
                                        "(n_positions)", (long long)f->pos[t], c->model_type, (long long)c->max_pos));
            return NULL;
        }
        pid[t] = (int32_t)(f->pos[t] + c->pos_offset);
    }
    return vc_op_add(f->g, x, vc_op_embedding(f->g, vc_w(f->m, -1, VC_W_POS_EMBD), pid, f->T));
}

/* tok [T, n_layer P] with no gradient from the image rows (their pad token's row is the embedding's padding_idx,
 * which transformers never trains): tok m + (tok (1 - m) computed without a tape), m 0 at those rows (the same
 * values: x 1 + 0 and x 0 + x) */
static vc_tensor *ple_pad_rows(fwd_ctx *f, vc_tensor *tok, const int32_t *ids) {
    vc_graph *g = f->g;
    float *m = vc_graph_alloc(g, sizeof(float) * 2 * (size_t)f->T, 0);
    if (!m) return NULL;
    for (int64_t t = 0; t < f->T; t++) m[t] = 1.0f, m[f->T + t] = 0.0f;
    for (int64_t i = 0; i < f->n_img; i++) m[f->img_rows_host[i]] = 0.0f, m[f->T + f->img_rows_host[i]] = 1.0f;
    float *dm = vc_graph_upload(g, m, sizeof(float) * 2 * (size_t)f->T);
    vc_tensor *keep = dm ? vc_tensor_wrap(g, dm, 1, (int64_t[]){ f->T }) : NULL;
    vc_tensor *pad = dm ? vc_tensor_wrap(g, dm + f->T, 1, (int64_t[]){ f->T }) : NULL;
    vc_graph_set_grad(g, 0);
    vc_tensor *fixed = vc_op_mul_rows(g, vc_op_embedding(g, vc_w(f->m, -1, VC_W_PLE_EMBD), ids, f->T), pad);
    vc_graph_set_grad(g, 1);
    return keep && fixed ? vc_op_add(g, vc_op_mul_rows(g, tok, keep), fixed) : NULL;
}

/* Gemma 4's per-layer inputs [T, n_layer P]: (norm(proj(x) / sqrt(hidden)) per layer + the token's own per-layer
 * embedding times sqrt(P)) / sqrt(2), x the scaled embeddings of ids */
static vc_tensor **per_layer_inputs(fwd_ctx *f, vc_tensor *x, const int32_t *ids) {
    const vc_model_config *c = &f->m->cfg;
    vc_graph *g = f->g;
    vc_tensor **out = vc_graph_alloc(g, sizeof(vc_tensor *) * (size_t)c->n_layer, 1);
    vc_tensor *tok = vc_op_embedding(g, vc_w(f->m, -1, VC_W_PLE_EMBD), ids, f->T);
    if (ids != f->b->ids && tok && vc_graph_grad_enabled(g)) tok = ple_pad_rows(f, tok, ids);
    tok = tok ? vc_op_scale(g, tok, sqrtf((float)c->ple_dim)) : NULL;
    vc_tensor *pr = vc_op_scale(g, vc_op_linear(g, x, vc_w(f->m, -1, VC_W_PLE_MODEL_PROJ), NULL),
                                1.0f / sqrtf((float)c->hidden));
    pr = vc_op_rmsnorm(g, pr, vc_w(f->m, -1, VC_W_PLE_PROJ_NORM), c->ple_dim, c->norm_eps, 0);
    vc_tensor *all = vc_op_scale(g, vc_op_add(g, pr, tok), 1.0f / sqrtf(2.0f));
    for (int l = 0; l < c->n_layer && all && out; l++) /* sliced before the layers run: they outlive their temporaries */
        if (!(out[l] = vc_op_slice_cols(g, all, c->n_layer * c->ple_dim, l * c->ple_dim, (l + 1) * c->ple_dim)))
            return NULL;
    return all ? out : NULL;
}

/* with images, Gemma 4's per-layer token embeddings take the pad token at the image rows (transformers'
 * llm_input_ids; its projection reads the embeddings with the images' features): the ids with those rows replaced */
static const int32_t *ple_image_ids(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    int32_t *id = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)f->T, 0);
    if (!id) return NULL;
    memcpy(id, f->b->ids, sizeof(int32_t) * (size_t)f->T);
    for (int64_t i = 0; i < f->n_img; i++) id[f->img_rows_host[i]] = c->pad_id >= 0 ? c->pad_id : 0;
    return id;
}

/* KV sharing: which layers' keys and values later layers reuse; without a tape or a cache, buffers for them made
 * before the layers run (each layer's temporaries die with it) */
static vc_status kv_share_setup(fwd_ctx *f, int no_tape) {
    const vc_model_config *c = &f->m->cfg;
    int any = 0;
    for (int l = 0; l < c->n_layer; l++) any |= c->kv_src[l] != 0;
    if (!any) return VC_OK;
    f->kv_need = vc_graph_alloc(f->g, (size_t)c->n_layer, 1);
    f->kv_keep = vc_graph_alloc(f->g, sizeof(vc_tensor *) * 2 * (size_t)c->n_layer, 1);
    if (!f->kv_need || !f->kv_keep) return vc_graph_status(f->g);
    for (int l = 0; l < c->n_layer; l++)
        if (c->kv_src[l]) f->kv_need[c->kv_src[l] - 1] = 1;
    f->kv_copy = no_tape && !f->cache && !f->paged;
    for (int l = 0; l < c->n_layer && f->kv_copy; l++) {
        int64_t shape[3] = { f->T, vc_cfg_kv_heads(c, l), vc_cfg_head_dim(c, l) };
        for (int i = 0; i < 2 && f->kv_need[l]; i++)
            if (!(f->kv_keep[2 * l + i] = vc_tensor_new(f->g, 3, shape, 0))) return vc_graph_status(f->g);
    }
    return VC_OK;
}

/* the linear mixers' rows with shared prefixes (f->lc_rows ...): a short convolution reads only the last K - 1 rows
 * of a sequence's prefix; Gated DeltaNet, KDA, Mamba 2 and lightning attention start their recurrence from the
 * prefix's state at its tap row (the prefix's run keeps it), Mamba 1 its scan from the prefix's final state, and their
 * conv reads the K - 1 rows before it. Left NULL (the ext rows) when no prefix reaches past those rows. */
static vc_status lin_share_rows(fwd_ctx *f) {
    const vc_model_config *c = &f->m->cfg;
    const vc_batch *b = f->b;
    const int64_t *cu = b->cu_seqlens;
    int m1 = c->lin_kind == VC_LIN_MAMBA1;
    int scan = m1 || c->lin_kind == VC_LIN_GDN || c->lin_kind == VC_LIN_KDA || c->lin_kind == VC_LIN_MAMBA2 ||
               c->lin_kind == VC_LIN_LIGHTNING;
    int n = b->n_seq, any = 0;
    if (!scan && c->lin_kind != VC_LIN_SHORTCONV) return VC_OK;
    int64_t K1 = c->lin_conv > 1 ? c->lin_conv - 1 : 0, Tc = 0, Ts = 0;
    int64_t *R = vc_graph_alloc(f->g, sizeof(int64_t) * 2 * (size_t)n, 0), *st = R ? R + n : NULL;
    int32_t *from = scan ? vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)n, 0) : NULL;
    if (!R || (scan && !from)) return vc_graph_status(f->g);
    for (int s = 0; s < n; s++) { /* the recurrence from row R of the prefix, the conv from row st */
        int32_t p = b->prefix[s];
        int64_t Lp = p >= 0 ? cu[p + 1] - cu[p] : 0, L = cu[s + 1] - cu[s];
        R[s] = p < 0 ? 0 : scan && !m1 ? vc_gdn_shared_tap(Lp) : Lp;
        st[s] = R[s] > K1 ? R[s] - K1 : 0;
        if (from) from[s] = R[s] > 0 ? p : -1;
        any |= st[s] > 0;
        Tc += Lp - st[s] + L;
        Ts += Lp - R[s] + L;
    }
    if (!any) return VC_OK;
    int32_t *lc = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(Tc ? Tc : 1), 0);
    int32_t *olc = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(f->T ? f->T : 1), 0);
    int32_t *ls = scan ? vc_graph_alloc(f->g, sizeof(int32_t) * 2 * (size_t)(Ts ? Ts : 1), 0) : NULL, *lso = NULL;
    int32_t *ols = scan ? vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(f->T ? f->T : 1), 0) : NULL;
    f->cu_lc = vc_graph_alloc(f->g, sizeof(int64_t) * 2 * (size_t)(n + 1), 0);
    if (!lc || !olc || !f->cu_lc || (scan && (!ls || !ols))) return vc_graph_status(f->g);
    f->cu_ls = f->cu_lc + n + 1;
    if (ls) lso = ls + Ts;
    int64_t rc = 0, rs = 0;
    for (int s = 0; s < n; s++) {
        int32_t p = b->prefix[s];
        int64_t Lp = p >= 0 ? cu[p + 1] - cu[p] : 0, L = cu[s + 1] - cu[s];
        f->cu_lc[s] = rc, f->cu_ls[s] = rs;
        for (int64_t t = st[s]; t < Lp; t++) lc[rc++] = (int32_t)(cu[p] + t);
        for (int64_t t = 0; t < L; t++) olc[cu[s] + t] = (int32_t)rc, lc[rc++] = (int32_t)(cu[s] + t);
        for (int64_t i = f->cu_lc[s] + (R[s] - st[s]); ls && i < rc; i++) ls[rs] = lc[i], lso[rs++] = (int32_t)i;
        for (int64_t t = 0; ols && t < L; t++) ols[cu[s] + t] = (int32_t)(rs - L + t);
    }
    f->cu_lc[n] = rc, f->cu_ls[n] = rs;
    f->T_lc = Tc, f->T_ls = Ts, f->lin_from = from;
    f->lc_rows = vc_graph_upload(f->g, lc, sizeof(int32_t) * (size_t)(Tc ? Tc : 1));
    f->own_lc = vc_graph_upload(f->g, olc, sizeof(int32_t) * (size_t)(f->T ? f->T : 1));
    if (!f->lc_rows || !f->own_lc) return vc_graph_status(f->g);
    if (!scan) return VC_OK;
    f->ls_rows = vc_graph_upload(f->g, ls, sizeof(int32_t) * (size_t)(Ts ? Ts : 1));
    f->ls_of = vc_graph_upload(f->g, lso, sizeof(int32_t) * (size_t)(Ts ? Ts : 1));
    f->own_ls = vc_graph_upload(f->g, ols, sizeof(int32_t) * (size_t)(f->T ? f->T : 1));
    return f->ls_rows && f->ls_of && f->own_ls ? VC_OK : vc_graph_status(f->g);
}

/* b->prefix checked, and the gather rows and key ranges of every layer's shared-prefix attention */
static vc_status prefix_rows(fwd_ctx *f) {
    const vc_batch *b = f->b;
    if (!b->prefix) return VC_OK;
    if (f->cache || f->paged) return vc_fail(VC_ERR_ARG, "model forward: shared prefixes with a kv cache");
    int n = b->n_seq;
    int64_t T_ext = f->T;
    for (int s = 0; s < n; s++) {
        int32_t p = b->prefix[s];
        if (p >= s || p < -1 || (p >= 0 && b->prefix[p] != -1))
            return vc_fail(VC_ERR_ARG, "model forward: sequence %d's prefix %d is not an earlier sequence without one",
                           s, p);
        if (p >= 0) T_ext += b->cu_seqlens[p + 1] - b->cu_seqlens[p];
    }
    int32_t *ext = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(T_ext ? T_ext : 1), 0);
    f->kv_start = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)n * 2, 0);
    if (!ext || !f->kv_start) return vc_graph_status(f->g);
    f->kv_len = f->kv_start + n;
    int64_t r = 0;
    for (int s = 0; s < n; s++) {
        int32_t p = b->prefix[s];
        f->kv_start[s] = r;
        if (p >= 0)
            for (int64_t t = b->cu_seqlens[p]; t < b->cu_seqlens[p + 1]; t++) ext[r++] = (int32_t)t;
        for (int64_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++) ext[r++] = (int32_t)t;
        f->kv_len[s] = r - f->kv_start[s];
    }
    f->T_ext = T_ext;
    f->ext = vc_graph_upload(f->g, ext, sizeof(int32_t) * (size_t)(T_ext ? T_ext : 1));
    if (!f->ext) return vc_graph_status(f->g);
    if (!f->m->cfg.n_linear) return VC_OK;
    int32_t *own = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)(f->T ? f->T : 1), 0);
    f->cu_ext = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)(n + 1), 0);
    if (!own || !f->cu_ext) return vc_graph_status(f->g);
    for (int s = 0; s < n; s++) { /* a sequence's own rows end its ext rows */
        int64_t L = b->cu_seqlens[s + 1] - b->cu_seqlens[s], first = f->kv_start[s] + f->kv_len[s] - L;
        f->cu_ext[s] = f->kv_start[s];
        for (int64_t t = 0; t < L; t++) own[b->cu_seqlens[s] + t] = (int32_t)(first + t);
    }
    f->cu_ext[n] = T_ext;
    f->own = vc_graph_upload(f->g, own, sizeof(int32_t) * (size_t)(f->T ? f->T : 1));
    if (!f->own) return vc_graph_status(f->g);
    return lin_share_rows(f);
}

/* Gemma 3's image runs (the token_type_ids mask): each run of consecutive image rows of a sequence, its keys from the
 * sequence's first row on; the whole prompt must be in this step (its keys are this step's rows) */
static int image_blocks(fwd_ctx *f, const int32_t *rows, int64_t n_img, const int32_t *txt, int64_t nt) {
    const vc_batch *b = f->b;
    int64_t n = 0;
    for (int64_t i = 0; i < n_img; i++) n += i == 0 || rows[i] != rows[i - 1] + 1;
    f->blk_q = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)(n + 1), 0);
    f->blk_kvs = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
    f->blk_kvl = vc_graph_alloc(f->g, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
    if (!f->blk_q || !f->blk_kvs || !f->blk_kvl) return 1;
    int64_t k = 0;
    f->blk_q[0] = 0;
    for (int64_t i = 0, s = 0; i < n_img; i++) {
        while (rows[i] >= b->cu_seqlens[s + 1]) s++;
        if (i == 0 || rows[i] != rows[i - 1] + 1 || rows[i] == b->cu_seqlens[s]) {
            if (b->prefix && b->prefix[s] >= 0) { /* (the prefix grouper leaves rows with images unshared) */
                vc_graph_fail(f->g, vc_fail(VC_ERR_UNSUPPORTED, "model forward: sequence %lld has images whose tokens "
                                            "attend bidirectionally (Gemma 3) behind a shared prompt prefix",
                                            (long long)s));
                return 1;
            }
            if (seq_start(f, (int)s)) {
                vc_graph_fail(f->g, vc_fail(VC_ERR_ARG, "model forward: sequence %lld's image tokens attend "
                                            "bidirectionally (Gemma 3): its prompt must be computed from its first "
                                            "token in one step (%lld tokens are cached)", (long long)s,
                                            (long long)seq_start(f, (int)s)));
                return 1;
            }
            f->blk_kvs[k] = b->cu_seqlens[s];
            k++;
        }
        f->blk_q[k] = i + 1;
        f->blk_kvl[k - 1] = rows[i] + 1 - f->blk_kvs[k - 1];
    }
    f->n_blk = k;
    f->txt_rows = txt;
    f->n_txt = nt;
    return 0;
}

/* the image tokens' embeddings replaced by the images' features (transformers' masked_scatter: the placeholder's
 * embedding gets no gradient from them) */
static vc_tensor *with_images(fwd_ctx *f, vc_tensor *x) {
    const vc_batch *b = f->b;
    if (!f->m->vision) {
        vc_graph_fail(f->g, vc_fail(VC_ERR_ARG, "model forward: images without the vision tower loaded"));
        return NULL;
    }
    int32_t *ids = vc_graph_alloc(f->g, sizeof(int32_t) * (size_t)f->T, 0);
    if (!ids) return NULL;
    int64_t ni = 0, nt = 0, n_img = 0;
    for (int s = 0; s < b->n_seq; s++)
        for (int64_t t = b->cu_seqlens[s], st = seq_start(f, s); t < b->cu_seqlens[s + 1]; t++)
            n_img += vc_image_row(&f->m->cfg, b, s, t, st);
    for (int s = 0; s < b->n_seq; s++)
        for (int64_t t = b->cu_seqlens[s], st = seq_start(f, s); t < b->cu_seqlens[s + 1]; t++) {
            if (vc_image_row(&f->m->cfg, b, s, t, st)) ids[ni++] = (int32_t)t;
            else ids[n_img + nt++] = (int32_t)t;
        }
    vc_tensor *feat = vc_vision_forward(f->m->vision, f->g, b->images);
    if (!feat) return NULL;
    if (feat->shape[0] != n_img) {
        vc_graph_fail(f->g, vc_fail(VC_ERR_ARG, "model forward: %lld image tokens for images of %lld features",
                                    (long long)n_img, (long long)feat->shape[0]));
        return NULL;
    }
    int32_t *dev = vc_graph_upload(f->g, ids, sizeof(int32_t) * (size_t)f->T);
    if (!dev) return NULL;
    vc_tensor *y = vc_op_scatter_rows(f->g, feat, dev, n_img, f->T);
    f->n_deep = vc_vision_deepstack(f->m->vision, f->deep); /* (Qwen3-VL: added after the first layers) */
    f->img_rows = dev;
    f->img_rows_host = ids;
    f->n_img = n_img;
    f->bidi = vc_vision_bidirectional(f->m->vision);
    if (f->bidi && image_blocks(f, ids, n_img, dev + n_img, nt)) return NULL;
    if (nt == 0) return y;
    vc_tensor *txt = vc_op_gather_rows(f->g, x, f->T, dev + n_img, nt);
    return vc_op_add(f->g, y, vc_op_scatter_rows(f->g, txt, dev + n_img, nt, f->T));
}

/* Qwen3-VL's deepstack: after layer l < n_deep, the image tokens' rows plus the features of deepstack merger l */
static vc_tensor *deepstack(fwd_ctx *f, int l, vc_tensor *x) {
    if (l >= f->n_deep || !x) return x;
    return vc_op_add(f->g, x, vc_op_scatter_rows(f->g, f->deep[l], f->img_rows, f->n_img, f->T));
}

vc_status vc_dec_setup(fwd_ctx *f) {
    vc_status st = prefix_rows(f);
    if (!st) st = rope_tables(f);
    if (!st && f->paged) st = paged_offsets(f);
    if (!st && !f->mtp_only) st = lin_seq_states(f);
    if (!st) st = lin_tabs_upload(f);
    if (!st) st = mup_upload(f);
    if (!st) st = ones_upload(f);
    return st ? st : vc_dsa_setup(f, !vc_graph_grad_enabled(f->g));
}

static vc_tensor *forward(vc_model *m, vc_graph *g, const vc_batch *b, vc_kv_cache *cache, const vc_kv_pages *paged) {
    const vc_model_config *c = &m->cfg;
    const char *env = getenv("VERLC_BF16_ACT"), *gu = getenv("VERLC_FUSED_GATE_UP"); /* once per forward */
    fwd_ctx f = { .m = m, .g = g, .b = b, .cache = cache, .paged = paged, .T = b->cu_seqlens[b->n_seq],
                  .f32_act = env && *env == '0', .split_gu = gu && *gu == '0' };
    if (m->be->alloc != vc_be()->alloc || (cache && cache->be->alloc != vc_be()->alloc)) {
        vc_fail(VC_ERR_ARG, "model forward: the weights%s are in %s memory but the active backend is %s (select the "
                "device before loading the model)", cache ? " or kv cache" : "", m->be->name, vc_be()->name);
        return NULL;
    }
    if (b->route && b->route_mode && (cache || paged)) {
        vc_fail(VC_ERR_ARG, "model forward: router replay with a kv cache");
        return NULL;
    }
    for (int64_t t = 0; t < f.T; t++)
        if (b->ids[t] < 0 || b->ids[t] >= c->vocab) {
            vc_fail(VC_ERR_ARG, "token id %d at position %lld is outside the vocabulary (%lld)", b->ids[t], (long long)t,
                    (long long)c->vocab);
            return NULL;
        }
    if (paged && paged->bf16 && (vc_matmul_precision() != VC_PREC_BF16 || vc_kv_row_floats(m) % 2)) {
        vc_fail(VC_ERR_ARG, "model forward: a bf16 KV pool needs bf16 matmul precision (whose attention inputs are "
                "bf16 values) and an even row width (%lld)", (long long)vc_kv_row_floats(m));
        return NULL;
    }
    if (cache && (cache->n_seq != b->n_seq)) {
        vc_fail(VC_ERR_ARG, "kv cache holds %d sequences, batch has %d", cache->n_seq, b->n_seq);
        return NULL;
    }
    if (cache)
        for (int s = 0; s < b->n_seq; s++)
            if (cache->len[s] + b->cu_seqlens[s + 1] - b->cu_seqlens[s] > cache->max_len) {
                vc_fail(VC_ERR_ARG, "sequence %d would exceed the kv cache length %lld", s, (long long)cache->max_len);
                return NULL;
            }
    int grad = vc_graph_grad_enabled(g);
    if (cache) vc_graph_set_grad(g, 0);
    vc_tensor *x = NULL;
    if (vc_dec_setup(&f) == VC_OK) {
        x = vc_op_embedding(g, vc_w(m, -1, VC_W_TOK_EMBD), b->ids, f.T);
        if (c->emb_scale) x = vc_op_scale(g, x, c->emb_scale); /* (the token embeddings only: Gemma's scaled embedding) */
        if (b->images && x) x = with_images(&f, x);
        if (c->emb_norm) x = norm(&f, x, -1, VC_W_EMB_NORM, VC_W_EMB_NORM_B); /* nanochat (no weight), BLOOM */
        if (c->emb_dim && x) x = vc_op_linear(g, x, vc_w(m, -1, VC_W_PROJ_IN), NULL); /* OPT-350m's project_in */
        if (c->ple_dim && x) {
            const int32_t *pid = f.n_img ? ple_image_ids(&f) : b->ids;
            if (!pid || !(f.ple = per_layer_inputs(&f, x, pid))) x = NULL;
        }
        if ((c->learned_pos || c->sin_pos) && x) x = add_positions(&f, x);
        int ckpt = m->checkpointing && !cache && !paged && vc_graph_grad_enabled(g);
        int no_tape = !vc_graph_grad_enabled(g);
        if (x && kv_share_setup(&f, no_tape)) x = NULL;
        /* without a tape a layer's temporaries die with it: keep the residual stream in two buffers
         * and rewind the arena after every layer */
        vc_tensor *buf[3] = { NULL, NULL, NULL };
        if (no_tape && x) {
            buf[0] = vc_tensor_new(g, x->ndim, x->shape, 0);
            buf[1] = vc_tensor_new(g, x->ndim, x->shape, 0);
            if (vc_be()->add_rmsnorm_held) /* the next layer's norm, written by the one before (layer_out) */
                buf[2] = vc_tensor_new(g, x->ndim, x->shape, 0);
            if (!buf[0] || !buf[1] || (vc_be()->add_rmsnorm_held && !buf[2])) x = NULL;
            else {
                vc_be()->d2d(buf[0]->data, x->data, (size_t)x->n * sizeof(float));
                x = buf[0];
            }
        }
        for (int l = 0; l < c->n_layer && x; l++) {
            if (no_tape) {
                vc_graph_mark mk = vc_graph_get_mark(g);
                vc_tensor *dst = buf[(l + 1) & 1];
                f.into = dst; /* the layer's last sum written there (no copy) where it can */
                f.into_h = buf[2];
                vc_tensor *y = deepstack(&f, l, vc_dec_layer_forward(&f, l, x));
                f.into = f.into_h = NULL;
                if (y && y->data != dst->data) vc_be()->d2d(dst->data, y->data, (size_t)y->n * sizeof(float));
                vc_graph_rewind(g, mk);
                x = y ? dst : NULL;
            } else x = deepstack(&f, l, ckpt ? layer_checkpointed(&f, l, x) : vc_dec_layer_forward(&f, l, x));
        }
        if (f.pre_h) vc_op_hold(f.pre_h, 0); /* a layer's norm the next one never read (it failed) */
        f.pre_h = NULL;
        if (!c->no_final_norm) x = norm(&f, x, -1, VC_W_OUT_NORM, VC_W_OUT_NORM_B);
        if (c->emb_dim && x) x = vc_op_linear(g, x, vc_w(m, -1, VC_W_PROJ_OUT), NULL); /* OPT-350m's project_out */
        if (x && b->mtp_out && vc_mtp_forward(&f, x)) x = NULL; /* (training the MTP layers: their hidden states) */
    }
    if (cache) {
        vc_graph_set_grad(g, grad);
        if (x)
            for (int s = 0; s < b->n_seq; s++) cache->len[s] += b->cu_seqlens[s + 1] - b->cu_seqlens[s];
    }
    if (!x && vc_graph_status(g)) vc_fail(vc_graph_status(g), "%s", vc_last_error());
    return x;
}

/* a tensor's values without a gradient into it (the LM head of an MTP loss) */
static vc_tensor *detached(vc_graph *g, vc_tensor *w) { return w ? vc_tensor_wrap(g, w->data, w->ndim, w->shape) : NULL; }

static vc_tensor *head_weight(vc_model *m, vc_graph *g) {
    vc_tensor *W = m->cfg.tied ? vc_w(m, -1, VC_W_TOK_EMBD) : vc_w(m, -1, VC_W_LM_HEAD);
    if (m->head_detach) W = detached(g, W);
    return m->cfg.norm_head ? vc_op_row_normalize(g, W) : W;
}

/* a classification checkpoint has a score head and no LM head */
static int no_lm_head(vc_model *m, vc_graph *g) {
    if (!m->cfg.n_labels) return 0;
    vc_fail(VC_ERR_UNSUPPORTED, "%s is a classification model (score head, %lld labels): it has no LM head", m->dir,
            (long long)m->cfg.n_labels);
    vc_graph_fail(g, VC_ERR_UNSUPPORTED);
    return 1;
}

vc_tensor *vc_model_score(vc_model *m, vc_graph *g, vc_tensor *hidden) {
    if (!m->cfg.n_labels) {
        vc_fail(VC_ERR_UNSUPPORTED, "%s has no score head (not a *ForSequenceClassification checkpoint)", m->dir);
        vc_graph_fail(g, VC_ERR_UNSUPPORTED);
        return NULL;
    }
    return vc_op_linear(g, hidden, vc_w(m, -1, VC_W_SCORE), vc_w(m, -1, VC_W_SCORE_B));
}

vc_status vc_model_score_head(vc_model *m, int label, float *w, float *bias) {
    int64_t L = m->cfg.n_labels, H = m->cfg.hidden;
    if (label < 0 || label >= L)
        return vc_fail(VC_ERR_ARG, "%s: score head label %d of %lld", m->dir, label, (long long)L);
    float *all = vc_malloc(sizeof(float) * (size_t)(L * H + L));
    if (!all) return VC_ERR_NOMEM;
    vc_tensor *W = vc_w(m, -1, VC_W_SCORE), *B = vc_w(m, -1, VC_W_SCORE_B);
    vc_status st = vc_tensor_read(W, all);
    if (!st) memcpy(w, all + label * H, sizeof(float) * (size_t)H);
    *bias = 0;
    if (!st && B && !(st = vc_tensor_read(B, all + L * H))) *bias = all[L * H + label];
    free(all);
    return st;
}

vc_tensor *vc_model_logits(vc_model *m, vc_graph *g, vc_tensor *hidden) {
    if (no_lm_head(m, g)) return NULL;
    vc_tensor *z = vc_op_linear(g, hidden, head_weight(m, g), vc_w(m, -1, VC_W_LM_HEAD_B));
    if (z && m->cfg.final_softcap > 0) z = vc_op_softcap(g, z, m->cfg.final_softcap);
    return z && m->cfg.logit_divisor > 0 ? vc_op_scale(g, z, 1.0f / m->cfg.logit_divisor) : z;
}

vc_status vc_model_logprobs_ex(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, float temperature,
                               vc_tensor **logp, vc_tensor **entropy, vc_tensor **sum_pi_sq) {
    if (no_lm_head(m, g)) return VC_ERR_UNSUPPORTED;
    float ld = m->cfg.logit_divisor; /* Granite's logits_scaling divides as the temperature does */
    if (ld > 0) temperature = (temperature > 0 ? temperature : 1.0f) * ld;
    vc_tensor *hb = vc_w(m, -1, VC_W_LM_HEAD_B);
    return vc_op_lm_head(g, hidden, head_weight(m, g), m->head_detach ? detached(g, hb) : hb, target,
                         m->cfg.final_softcap, temperature, logp, entropy, sum_pi_sq);
}

vc_status vc_model_logprobs(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, vc_tensor **logp,
                            vc_tensor **entropy) {
    return vc_model_logprobs_ex(m, g, hidden, target, 1.0f, logp, entropy, NULL);
}

/* ---- KV cache ---- */
/* the widest layer's keys (v 0) or values (v 1): each layer's rows hold its keys, then its values, in rows of both
 * widths (Gemma 4's full layers and MiMo-V2-Flash's sliding ones have heads of their own) */
static int64_t kv_width(const vc_model_config *c, int v) {
    int64_t w = 0;
    for (int l = 0; l < c->n_layer; l++) {
        int64_t x = vc_cfg_kv_heads(c, l) * (v ? vc_cfg_v_head_dim(c, l) : vc_cfg_head_dim(c, l));
        if (x > w) w = x;
    }
    return w;
}

vc_status vc_kv_cache_new(const vc_model *m, int n_seq, int64_t max_len, vc_kv_cache **out) {
    const vc_model_config *c = &m->cfg;
    vc_kv_cache *k = vc_calloc(1, sizeof *k);
    if (!k) return VC_ERR_NOMEM;
    k->n_seq = n_seq;
    k->n_layer = (int)c->n_layer;
    k->max_len = max_len;
    k->k_width = c->mla ? c->n_head * (c->qk_nope_dim + c->qk_rope_dim) : kv_width(c, 0);
    k->v_width = c->mla ? c->n_head * c->v_head_dim : kv_width(c, 1);
    k->x_width = c->dsa_topk ? c->dsa_dim : 0;
    size_t bytes = (size_t)c->n_layer * (size_t)n_seq * (size_t)max_len * (size_t)(k->k_width + k->v_width + k->x_width) * 4;
    k->len = vc_calloc((size_t)n_seq, sizeof *k->len);
    k->be = vc_be();
    k->mem = k->be->alloc(bytes ? bytes : 64);
    size_t sb = (size_t)n_seq * (size_t)vc_lin_state_floats(c) * sizeof(float);
    if (sb) k->state = k->be->alloc(sb);
    if (!k->len || !k->mem || (sb && !k->state)) {
        vc_kv_cache_free(k);
        return vc_fail(VC_ERR_NOMEM, "kv cache: cannot allocate %.1f MB", bytes / 1e6);
    }
    *out = k;
    return VC_OK;
}

void vc_kv_cache_free(vc_kv_cache *c) {
    if (!c) return;
    free(c->len);
    if (c->mem) c->be->free(c->mem);
    if (c->state) c->be->free(c->state);
    free(c);
}

int64_t vc_kv_cache_len(const vc_kv_cache *c, int seq) { return c->len[seq]; }

int64_t vc_kv_row_floats(const vc_model *m) {
    const vc_model_config *c = &m->cfg;
    if (c->mla) return vc_dsa_key_offset(c) + (c->dsa_topk ? c->dsa_dim : 0); /* DSA: its indexer's keys behind */
    return kv_width(c, 0) + kv_width(c, 1);
}
void vc_kv_cache_reset(vc_kv_cache *c) { memset(c->len, 0, sizeof(int64_t) * (size_t)c->n_seq); }
