/* Norms, RoPE, attention, the fused LM head and mixture-of-experts, with their backward rules. The
 * heavy lifting is in the backend's kernels; saved kernel buffers (rstd, mean, lse) are backend
 * memory, the attention descriptors and their pointer arrays host memory. */
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"
#include <math.h>
#include <string.h>

static vc_tensor *like(vc_graph *g, const vc_tensor *x) { return vc_tensor_new(g, x->ndim, x->shape, 0); }

/* ---- RMSNorm ---- */
static void rmsnorm_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *w = n->in[1];
    int64_t C = n->i[0];
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *dw = w && w->requires_grad ? vc_tensor_grad(g, w) : NULL;
    vc_be()->rmsnorm_bwd(dx, dw, n->out->grad, x->data, w ? w->data : NULL, n->saved, x->n / C, C, (float)n->f[0]);
}

static void push_rms(vc_graph *g, vc_tensor *y, vc_tensor *x, vc_tensor *w, float *rstd, int64_t cols, float w_offset) {
    vc_tensor *in[2] = { x, w };
    vc_node *n = vc_tape_push(g, rmsnorm_bw, y, 2, in);
    if (n) {
        n->saved = rstd;
        n->i[0] = cols;
        n->f[0] = w_offset;
    }
}

static vc_tensor *rmsnorm(vc_graph *g, vc_tensor *x, vc_tensor *w, int64_t cols, float eps, float w_offset, int held) {
    if (!x) return NULL;
    int64_t R = x->n / cols;
    vc_tensor *y = like(g, x);
    float *rstd = vc_graph_dalloc(g, (size_t)R * 4, 0);
    if (!y || !rstd) return NULL;
    const vc_backend *B = vc_be();
    if (held && B->rmsnorm_fwd_held) B->rmsnorm_fwd_held(y->data, rstd, x->data, w ? w->data : NULL, R, cols, eps, w_offset);
    else B->rmsnorm_fwd(y->data, rstd, x->data, w ? w->data : NULL, R, cols, eps, w_offset);
    push_rms(g, y, x, w, rstd, cols, w_offset);
    return y;
}

vc_tensor *vc_op_rmsnorm(vc_graph *g, vc_tensor *x, vc_tensor *w, int64_t cols, float eps, float w_offset) {
    return rmsnorm(g, x, w, cols, eps, w_offset, 0);
}

vc_tensor *vc_op_rmsnorm_held(vc_graph *g, vc_tensor *x, vc_tensor *w, float eps, float w_offset) {
    return rmsnorm(g, x, w, x ? x->shape[x->ndim - 1] : 0, eps, w_offset, 1);
}

vc_tensor *vc_op_add_rmsnorm_held(vc_graph *g, vc_tensor *x, vc_tensor *a, vc_tensor *w, float eps, float w_offset,
                                  vc_tensor **sum) {
    const vc_backend *B = vc_be();
    *sum = NULL;
    if (!x || !a) return NULL;
    if (!B->add_rmsnorm_held || x->n != a->n) {
        *sum = vc_op_add(g, x, a);
        return vc_op_rmsnorm_held(g, *sum, w, eps, w_offset);
    }
    int64_t C = x->shape[x->ndim - 1], R = x->n / C;
    vc_tensor *s = like(g, x), *y = like(g, x);
    float *rstd = vc_graph_dalloc(g, (size_t)R * 4, 0);
    if (!s || !y || !rstd) return NULL;
    B->add_rmsnorm_held(s->data, y->data, rstd, x->data, a->data, w ? w->data : NULL, R, C, eps, w_offset);
    vc_tape_add(g, s, x, a);
    push_rms(g, y, s, w, rstd, C, w_offset);
    *sum = s;
    return y;
}

/* ---- LayerNorm ---- */
static void layernorm_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t C = x->shape[x->ndim - 1], R = x->n / C;
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *dw = w && w->requires_grad ? vc_tensor_grad(g, w) : NULL;
    float *db = b && b->requires_grad ? vc_tensor_grad(g, b) : NULL;
    const float *mean = n->saved, *rstd = mean + R;
    vc_be()->layernorm_bwd(dx, dw, db, n->out->grad, x->data, w ? w->data : NULL, mean, rstd, R, C);
}

vc_tensor *vc_op_layernorm(vc_graph *g, vc_tensor *x, vc_tensor *w, vc_tensor *b, float eps) {
    if (!x) return NULL;
    int64_t C = x->shape[x->ndim - 1], R = x->n / C;
    vc_tensor *y = like(g, x);
    float *st = vc_graph_dalloc(g, (size_t)R * 8, 0);
    if (!y || !st) return NULL;
    vc_be()->layernorm_fwd(y->data, st, st + R, x->data, w ? w->data : NULL, b ? b->data : NULL, R, C, eps);
    vc_tensor *in[3] = { x, w, b };
    vc_node *n = vc_tape_push(g, layernorm_bw, y, 3, in);
    if (n) n->saved = st;
    return y;
}

/* ---- RoPE: a rotation (times the attention scaling baked into cos/sin); backward applies the
 * transposed rotation. ---- */
static void rope_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0];
    const vc_backend *B = vc_be();
    int nh = (int)n->i[0], hd = (int)n->i[1];
    int64_t rows = x->n / ((int64_t)nh * hd);
    if (vc_grad_take(g, n, x)) { /* dx: dy rotated back in place */
        B->rope(x->grad, n->ptr[0], n->ptr[1], rows, nh, hd, (int)n->i[2], (int)n->i[3], -1);
        return;
    }
    float *dx = vc_tensor_grad(g, x);
    float *tmp = vc_graph_temp(g, (size_t)x->n * 4, 0);
    if (!dx || !tmp) return;
    B->d2d(tmp, n->out->grad, (size_t)x->n * 4);
    B->rope(tmp, n->ptr[0], n->ptr[1], rows, nh, hd, (int)n->i[2], (int)n->i[3], -1);
    B->axpy(dx, 1.0f, tmp, x->n);
    vc_graph_release(g, tmp, (size_t)x->n * 4);
}

vc_tensor *vc_op_rope(vc_graph *g, vc_tensor *x, const float *cos, const float *sin, int nh, int hd, int rot,
                      int interleaved) {
    if (!x) return NULL;
    vc_tensor *y = like(g, x);
    if (!y) return NULL;
    vc_be()->d2d(y->data, x->data, (size_t)x->n * 4);
    vc_be()->rope(y->data, cos, sin, x->n / ((int64_t)nh * hd), nh, hd, rot, interleaved, 1);
    vc_node *n = vc_tape_push(g, rope_bw, y, 1, &x);
    if (n) {
        n->ptr[0] = cos;
        n->ptr[1] = sin;
        n->i[0] = nh;
        n->i[1] = hd;
        n->i[2] = rot;
        n->i[3] = interleaved;
    }
    return y;
}

vc_tensor *vc_op_rope_temp(vc_graph *g, vc_tensor *x, const float *cos, const float *sin, int nh, int hd, int rot,
                           int interleaved) {
    if (!x || vc_graph_grad_enabled(g)) return vc_op_rope(g, x, cos, sin, nh, hd, rot, interleaved);
    vc_be()->rope(x->data, cos, sin, x->n / ((int64_t)nh * hd), nh, hd, rot, interleaved, 1);
    return x;
}

void vc_op_rope2_temp(vc_graph *g, vc_tensor **q, int nhq, vc_tensor **k, int nhk, const float *cos, const float *sin,
                      int hd, int rot, int interleaved) {
    const vc_backend *B = vc_be();
    if (!*q || !*k || vc_graph_grad_enabled(g) || !B->rope2 || (*q)->n % ((int64_t)nhq * hd) ||
        (*k)->n / ((int64_t)nhk * hd) != (*q)->n / ((int64_t)nhq * hd)) {
        *q = vc_op_rope_temp(g, *q, cos, sin, nhq, hd, rot, interleaved);
        *k = vc_op_rope_temp(g, *k, cos, sin, nhk, hd, rot, interleaved);
        return;
    }
    B->rope2((*q)->data, nhq, (*k)->data, nhk, cos, sin, (*q)->n / ((int64_t)nhq * hd), hd, rot, interleaved);
}

/* ---- attention ---- */
typedef struct {
    vc_attn_desc d;
    float *lse;
} attn_saved;

static void attn_bw(vc_graph *g, vc_node *n) {
    vc_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    attn_saved *s = n->saved;
    vc_attn_desc d = s->d;
    float *dq = vc_tensor_grad(g, q), *dk = vc_tensor_grad(g, k), *dv = vc_tensor_grad(g, v);
    float **dks = vc_graph_alloc(g, sizeof(float *) * (size_t)d.n_seq * 2, 0);
    if (!dq || !dk || !dv || !dks) return;
    float **dvs = dks + d.n_seq;
    const int64_t *ks = d.kv_start ? d.kv_start : d.q_start;
    for (int i = 0; i < d.n_seq; i++) {
        dks[i] = dk + ks[i] * d.k_stride;
        dvs[i] = dv + ks[i] * d.v_stride;
    }
    d.dk_seq = dks;
    d.dv_seq = dvs;
    vc_be()->attn_bwd(dq, n->out->grad, n->out->data, s->lse, q->data, &d);
    vc_tensor *sk = n->in[3];
    float *ds = sk && sk->requires_grad ? vc_tensor_grad(g, sk) : NULL;
    if (ds) vc_be()->attn_sink_bwd(ds, n->out->grad, n->out->data, s->lse, sk->data, n->out->shape[0], d.n_head, d.v_head_dim);
}

vc_tensor *vc_op_attention(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, const vc_attn_desc *desc) {
    return vc_op_attention_sinks(g, q, k, v, desc, NULL);
}

vc_tensor *vc_op_attention_sinks(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, const vc_attn_desc *desc,
                                 vc_tensor *sinks) {
    if (!q || !k || !v) return NULL;
    if (sinks && sinks->n != desc->n_head) {
        vc_graph_fail(g, vc_fail(VC_ERR_SHAPE, "attention: %lld sinks for %d heads", (long long)sinks->n, desc->n_head));
        return NULL;
    }
    int64_t T = q->n / ((int64_t)desc->n_head * desc->head_dim);
    int64_t shape[3] = { T, desc->n_head, desc->v_head_dim };
    vc_tensor *o = vc_tensor_new(g, 3, shape, 0);
    attn_saved *s = vc_graph_alloc(g, sizeof *s, 1);
    const float **ptrs = vc_graph_alloc(g, sizeof(float *) * (size_t)desc->n_seq * 2, 0);
    int64_t *qs = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(3 * desc->n_seq + 1), 0);
    if (!o || !s || !ptrs || !qs) return NULL;
    s->d = *desc;
    memcpy(qs, desc->q_start, sizeof(int64_t) * (size_t)(desc->n_seq + 1));
    s->d.q_start = qs;
    int64_t *kvl = qs + desc->n_seq + 1, *ks = kvl + desc->n_seq;
    s->d.k_stride = (int64_t)desc->n_kv_head * desc->head_dim;
    s->d.v_stride = (int64_t)desc->n_kv_head * desc->v_head_dim;
    int64_t krows = k->n / s->d.k_stride;
    for (int i = 0; i < desc->n_seq; i++) {
        kvl[i] = desc->kv_start ? desc->kv_len[i] : qs[i + 1] - qs[i];
        ks[i] = desc->kv_start ? desc->kv_start[i] : qs[i];
        if (kvl[i] < qs[i + 1] - qs[i] || ks[i] < 0 || ks[i] + kvl[i] > krows) {
            vc_fail(VC_ERR_SHAPE, "attention: sequence %d has %lld queries and keys [%lld, +%lld) of %lld rows", i,
                    (long long)(qs[i + 1] - qs[i]), (long long)ks[i], (long long)kvl[i], (long long)krows);
            vc_graph_fail(g, VC_ERR_SHAPE);
            return NULL;
        }
        ptrs[i] = k->data + ks[i] * s->d.k_stride;
        ptrs[desc->n_seq + i] = v->data + ks[i] * s->d.v_stride;
    }
    s->d.kv_start = desc->kv_start ? ks : NULL;
    s->d.kv_len = kvl;
    s->d.k_seq = ptrs;
    s->d.v_seq = ptrs + desc->n_seq;
    s->d.sinks = sinks ? sinks->data : NULL;
    int need_grad = vc_graph_grad_enabled(g) &&
                    (q->requires_grad || k->requires_grad || v->requires_grad || (sinks && sinks->requires_grad));
    s->lse = vc_graph_dalloc(g, sizeof(float) * (size_t)(T * desc->n_head), 0);
    if (!s->lse) return NULL;
    vc_be()->attn_fwd(o->data, s->lse, q->data, &s->d);
    if (need_grad) {
        vc_tensor *in[4] = { q, k, v, sinks };
        vc_node *n = vc_tape_push(g, attn_bw, o, 4, in);
        if (n) n->saved = s;
    }
    return o;
}

/* ---- q, k and v in one GEMM ---- */
typedef struct {
    vc_qkv_desc d;
    vc_tensor *k, *v;
} qkv_saved;

static void qkv_bw(vc_graph *g, vc_node *n) {
    qkv_saved *s = n->saved;
    vc_tensor *x = n->in[0], *W[3] = { n->in[1], n->in[2], n->in[3] }, *b[3] = { n->in[4], n->in[5], n->in[6] };
    float *dW[3], *db[3];
    for (int i = 0; i < 3; i++) {
        dW[i] = W[i]->requires_grad ? vc_tensor_grad(g, W[i]) : NULL;
        db[i] = b[i] && b[i]->requires_grad ? vc_tensor_grad(g, b[i]) : NULL;
    }
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    int64_t K = W[0]->shape[1], M = x->n / K;
    if (vc_graph_status(g)) return;
    if (!vc_be()->qkv_rope_bwd(M, K, x->data, W[0]->data, W[1]->data, W[2]->data, n->out->grad, s->k->grad, s->v->grad, dx,
                               dW[0], dW[1], dW[2], db[0], db[1], db[2], &s->d))
        vc_graph_fail(g, vc_fail(VC_ERR_INTERNAL, "q, k and v backward: the weights' bf16 copies are gone"));
    vc_grad_release(g, s->k); /* k's and v's gradients are dead now (their readers ran before) */
    vc_grad_release(g, s->v);
}

int vc_op_qkv_rope(vc_graph *g, vc_tensor *x, vc_tensor *Wq, vc_tensor *Wk, vc_tensor *Wv, vc_tensor *bq, vc_tensor *bk,
                   vc_tensor *bv, const vc_qkv_desc *d, vc_tensor **q, vc_tensor **k, vc_tensor **v) {
    const vc_backend *B = vc_be();
    vc_tensor *in[7] = { x, Wq, Wk, Wv, bq, bk, bv };
    int need = 0;
    for (int i = 0; i < 7; i++) need |= in[i] && in[i]->requires_grad;
    const int tape = need && vc_graph_grad_enabled(g);
    if (!B->qkv_rope || (tape && !B->qkv_rope_bwd) || !x || !Wq || !Wk || !Wv) return 0;
    int64_t K = Wq->shape[1], M = x->n / K;
    int64_t sq[3] = { M, d->n_head, d->head_dim }, sk[3] = { M, d->n_kv_head, d->head_dim };
    int64_t sv[2] = { M, (int64_t)d->n_kv_head * d->v_head_dim };
    vc_tensor *tq = vc_tensor_new(g, 3, sq, 0), *tk = vc_tensor_new(g, 3, sk, 0), *tv = vc_tensor_new(g, 2, sv, 0);
    qkv_saved *s = tape ? vc_graph_alloc(g, sizeof *s, 1) : NULL;
    if (!tq || !tk || !tv || (tape && !s)) return 0;
    if (!B->qkv_rope(M, K, x->data, Wq->data, Wk->data, Wv->data, bq ? bq->data : NULL, bk ? bk->data : NULL,
                     bv ? bv->data : NULL, tq->data, tk->data, tv->data, d))
        return 0;
    if (tape) {
        vc_node *n = vc_tape_push(g, qkv_bw, tq, 7, in);
        if (n) {
            s->d = *d;
            s->d.kv_dst = NULL; /* (the pages are the forward's business) */
            s->d.kv_off = NULL;
            s->k = tk;
            s->v = tv;
            n->saved = s;
            tk->requires_grad = tv->requires_grad = 1;
        }
    }
    *q = tq;
    *k = tk;
    *v = tv;
    return 1;
}

/* ---- fused LM head ---- */
typedef struct {
    float *lse;
    const int32_t *target;
    vc_tensor *ent;
    vc_head_desc d;
    size_t keep_bytes; /* d.keep's */
} head_saved;

static void head_bw(vc_graph *g, vc_node *n);

vc_status vc_op_lm_head(vc_graph *g, vc_tensor *h, vc_tensor *W, vc_tensor *b, const int32_t *target, float softcap,
                        float temperature, vc_tensor **logp, vc_tensor **entropy, vc_tensor **sum_pi_sq) {
    *logp = NULL;
    if (entropy) *entropy = NULL;
    if (sum_pi_sq) *sum_pi_sq = NULL;
    if (!h || !W) return vc_graph_status(g);
    int64_t H = W->shape[1], V = W->shape[0], T = h->n / H;
    for (int64_t t = 0; target && t < T; t++)
        if (target[t] >= V) { /* a token the head cannot predict (Apertus 1.5's pruned head: image or audio codes) */
            vc_fail(VC_ERR_ARG, "LM head: target token %d at row %lld is outside the head's %lld rows", target[t],
                    (long long)t, (long long)V);
            vc_graph_fail(g, VC_ERR_ARG);
            return VC_ERR_ARG;
        }
    vc_tensor *lp = vc_tensor_new(g, 1, &T, 0), *en = vc_tensor_new(g, 1, &T, 0);
    vc_tensor *sq = sum_pi_sq ? vc_tensor_new(g, 1, &T, 0) : NULL;
    head_saved *s = vc_graph_alloc(g, sizeof *s, 1);
    int32_t *tg = target ? vc_graph_upload(g, target, (size_t)T * 4) : NULL;
    if (!lp || !en || !s || (target && !tg) || (sum_pi_sq && !sq)) return vc_graph_status(g);
    s->lse = vc_graph_dalloc(g, (size_t)T * 4, 0);
    if (!s->lse) return vc_graph_status(g);
    s->target = tg;
    s->d = (vc_head_desc){ .T = T, .H = H, .V = V, .softcap = softcap,
                           .scale = temperature > 0 ? 1.0f / temperature : 1.0f };
    s->ent = en;
    /* where the backend keeps the logits for the backward (a GEMM fewer) and memory allows: arena memory, handed back
     * to the backward's pool once read */
    if (vc_be()->lm_head_keep && vc_graph_grad_enabled(g) &&
        (h->requires_grad || W->requires_grad || (b && b->requires_grad)) &&
        (s->keep_bytes = vc_be()->lm_head_keep(&s->d, b ? b->data : NULL)))
        s->d.keep = vc_graph_dalloc_try(g, s->keep_bytes);
    vc_be()->lm_head_fwd(lp->data, en->data, sq ? sq->data : NULL, s->lse, h->data, W->data, b ? b->data : NULL, tg,
                         &s->d);
    vc_tensor *in[3] = { h, W, b };
    /* one node serves both outputs: its gradient buffer for logp is allocated now so the node runs
     * even when only the entropy receives a gradient */
    vc_node *n = vc_tape_push(g, head_bw, lp, 3, in);
    if (n) {
        n->saved = s;
        en->requires_grad = 1;
        if (!vc_tensor_grad(g, lp)) return vc_graph_status(g);
    }
    *logp = lp;
    if (entropy) *entropy = en;
    if (sum_pi_sq) *sum_pi_sq = sq;
    return VC_OK;
}

static void head_bw(vc_graph *g, vc_node *n) {
    vc_tensor *h = n->in[0], *W = n->in[1], *b = n->in[2];
    head_saved *s = n->saved;
    float *dh = h->requires_grad ? vc_tensor_grad(g, h) : NULL;
    float *dW = W->requires_grad ? vc_tensor_grad(g, W) : NULL;
    float *db = b && b->requires_grad ? vc_tensor_grad(g, b) : NULL;
    vc_be()->lm_head_bwd(dh, dW, db, n->out->grad, s->ent->grad, s->lse, s->ent->data, h->data, W->data,
                         b ? b->data : NULL, s->target, &s->d);
    vc_graph_release(g, s->d.keep, s->keep_bytes);
    s->d.keep = NULL;
}
