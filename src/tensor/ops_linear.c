/* Linear-attention layers' ops (Gated DeltaNet: Qwen3-Next, Qwen3.5): the depthwise causal conv1d, the log decay
 * and the delta-rule recurrence, with their backward rules. With per-sequence states (the rollout's) they run
 * without gradient; in training each sequence starts from a zero state. */
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"
#include <string.h>

#define GDN_CKPT 64 /* the recurrence keeps its state every GDN_CKPT rows for the backward */
#define SSM_CKPT 256 /* the selective scan's states ([I, N] floats, per channel) kept every SSM_CKPT rows: a
                      * 5120-channel layer of state 16 keeps 1.25 KiB per row for the backward */

static int records(vc_graph *g, int n, vc_tensor *const *in) {
    if (!vc_graph_grad_enabled(g)) return 0;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return 1;
    return 0;
}

/* the sequence layout copied into the graph (the backward reads it after the caller's batch may be gone) */
static int64_t *keep_cu(vc_graph *g, int n_seq, const int64_t *cu) {
    int64_t *c = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n_seq + 1), 0);
    if (c) memcpy(c, cu, sizeof(int64_t) * (size_t)(n_seq + 1));
    return c;
}

/* the call's sequence tables in backend memory for a backend that wants them; NULL: the backend copies them itself.
 * Copied here, inside a layer, they are fine in stream order, not under a graph capture (uploads run at once there,
 * and the arena is rewound between layers): the decoder uploads a step's tables before its layers (tabs) */
static const int64_t *dev_tabs(vc_graph *g, int n_seq, const int64_t *cu, int64_t ckpt, float *const *states) {
    if (!vc_be()->dev_seq_tabs) return NULL;
    size_t bytes = sizeof(int64_t) * (3 * (size_t)n_seq + 2);
    int64_t *h = vc_graph_alloc(g, bytes, 0);
    if (!h) return NULL;
    vc_seq_tabs_fill(h, n_seq, cu, ckpt, states);
    return vc_graph_upload(g, h, bytes);
}

static int stateful_grad(vc_graph *g, int rec, float *const *states, const char *op) {
    if (!rec || !states) return 0;
    vc_fail(VC_ERR_ARG, "%s: carried states are for inference (no gradient through them)", op);
    vc_graph_fail(g, VC_ERR_ARG);
    return 1;
}

/* ---- depthwise causal conv1d ---- */
static void conv_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *w = n->in[1];
    const vc_conv_desc *d = n->saved;
    vc_be()->conv1d_bwd(x->requires_grad ? vc_tensor_grad(g, x) : NULL, w->requires_grad ? vc_tensor_grad(g, w) : NULL,
                        n->out->grad, x->data, w->data, d);
}

vc_tensor *vc_op_conv1d_causal(vc_graph *g, vc_tensor *x, vc_tensor *w, int K, int n_seq, const int64_t *cu,
                               float *const *states, const int64_t *tabs) {
    if (!x || !w) return NULL;
    int64_t C = x->shape[x->ndim - 1];
    if (w->n != C * K || x->n != cu[n_seq] * C) {
        vc_fail(VC_ERR_SHAPE, "conv1d: weight of %lld values for %lld channels of width %d, input of %lld rows",
                (long long)w->n, (long long)C, K, (long long)(x->n / (C ? C : 1)));
        vc_graph_fail(g, VC_ERR_SHAPE);
        return NULL;
    }
    vc_tensor *in[2] = { x, w };
    int rec = records(g, 2, in);
    if (stateful_grad(g, rec, states, "conv1d")) return NULL;
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 0);
    vc_conv_desc *d = vc_graph_alloc(g, sizeof *d, 0);
    int64_t *c = keep_cu(g, n_seq, cu);
    if (!y || !d || !c) return NULL;
    *d = (vc_conv_desc){ .n_seq = n_seq, .cu = c, .C = C, .K = K, .state = states,
                         .dev_tabs = tabs ? tabs : dev_tabs(g, n_seq, c, 0, states) };
    vc_be()->conv1d_fwd(y->data, x->data, w->data, d);
    d->state = NULL, d->dev_tabs = NULL; /* the backward copies its own */
    vc_node *n = rec ? vc_tape_push(g, conv_bw, y, 2, in) : NULL;
    if (n) n->saved = d;
    return y;
}

/* ---- the log decay ---- */
static void gate_bw(vc_graph *g, vc_node *n) {
    vc_tensor *a = n->in[0], *A = n->in[1], *dt = n->in[2];
    int nh = (int)n->i[0], grp = (int)n->i[1];
    vc_be()->gdn_gate_bwd(a->requires_grad ? vc_tensor_grad(g, a) : NULL, A->requires_grad ? vc_tensor_grad(g, A) : NULL,
                          dt->requires_grad ? vc_tensor_grad(g, dt) : NULL, n->out->grad, a->data, A->data, dt->data,
                          a->n / ((int64_t)nh * grp), nh, grp);
}

vc_tensor *vc_op_gdn_gate(vc_graph *g, vc_tensor *a, vc_tensor *A_log, vc_tensor *dt_bias) {
    if (!a || !A_log || !dt_bias) return NULL;
    int nh = (int)A_log->n, grp = nh ? (int)(dt_bias->n / nh) : 0; /* dt_bias per head, or per channel (KDA) */
    if (!nh || grp < 1 || dt_bias->n != (int64_t)nh * grp || a->n % dt_bias->n) {
        vc_fail(VC_ERR_SHAPE, "gated delta decay: %lld values for %d heads (dt_bias %lld)", (long long)a->n, nh,
                (long long)dt_bias->n);
        vc_graph_fail(g, VC_ERR_SHAPE);
        return NULL;
    }
    vc_tensor *y = vc_tensor_new(g, a->ndim, a->shape, 0);
    if (!y) return NULL;
    vc_be()->gdn_gate_fwd(y->data, a->data, A_log->data, dt_bias->data, a->n / dt_bias->n, nh, grp);
    vc_tensor *in[3] = { a, A_log, dt_bias };
    vc_node *n = vc_tape_push(g, gate_bw, y, 3, in);
    if (n) n->i[0] = nh, n->i[1] = grp;
    return y;
}

/* ---- the recurrence ---- */
static void gdn_bw(vc_graph *g, vc_node *n) {
    vc_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *gt = n->in[3], *be = n->in[4];
#define GR(t) ((t)->requires_grad ? vc_tensor_grad(g, t) : NULL)
    vc_be()->gdn_bwd(GR(q), GR(k), GR(v), GR(gt), GR(be), n->out->grad, n->ptr[1], q->data, k->data, v->data, gt->data,
                     be->data, n->saved);
#undef GR
}

int64_t vc_gdn_shared_tap(int64_t L) { return vc_gdn_tap(L, GDN_CKPT); }

/* from (shared starts) checked: an earlier sequence with from -1, or -1; 0 (graph failed) otherwise */
static int from_ok(vc_graph *g, int n_seq, const int32_t *from, const char *op) {
    for (int s = 0; from && s < n_seq; s++) {
        int p = from[s];
        if (p < -1 || p >= s || (p >= 0 && from[p] != -1)) {
            vc_fail(VC_ERR_ARG, "%s: sequence %d cannot start from sequence %d (only from an earlier one starting from "
                    "zero)", op, s, p);
            vc_graph_fail(g, VC_ERR_ARG);
            return 0;
        }
    }
    return 1;
}

static vc_tensor *gdn_op(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, vc_tensor *gt, vc_tensor *beta,
                         int n_seq, const int64_t *cu, int nk, int nv, int dk, int dv, float scale, int no_delta,
                         float *const *states, const int64_t *tabs, const int32_t *from) {
    if (!q || !k || !v || !gt || !beta) return NULL;
    int64_t T = cu[n_seq];
    int gk = gt->n == T * nv * dk && dk > 1; /* the decay per key channel (Kimi Delta Attention) */
    if (nk <= 0 || nv % nk || q->n != T * nk * dk || k->n != q->n || v->n != T * nv * dv || (gt->n != T * nv && !gk) ||
        beta->n != T * nv) {
        vc_fail(VC_ERR_SHAPE, "gated delta rule: %lld rows of %d q/k heads of %d and %d value heads of %d do not fit "
                "q %lld, k %lld, v %lld, g %lld, beta %lld values", (long long)T, nk, dk, nv, dv, (long long)q->n,
                (long long)k->n, (long long)v->n, (long long)gt->n, (long long)beta->n);
        vc_graph_fail(g, VC_ERR_SHAPE);
        return NULL;
    }
    vc_tensor *in[5] = { q, k, v, gt, beta };
    int rec = records(g, 5, in);
    if (stateful_grad(g, rec, states, "gated delta rule") || !from_ok(g, n_seq, from, "gated delta rule")) return NULL;
    int64_t shape[3] = { T, nv, dv };
    vc_tensor *o = vc_tensor_new(g, 3, shape, 0);
    vc_gdn_desc *d = vc_graph_alloc(g, sizeof *d, 0);
    int64_t *c = keep_cu(g, n_seq, cu);
    if (!o || !d || !c) return NULL;
    int32_t *fr = from ? vc_graph_alloc(g, sizeof(int32_t) * (size_t)(n_seq ? n_seq : 1), 0) : NULL;
    if (from && !fr) return NULL;
    if (fr) memcpy(fr, from, sizeof(int32_t) * (size_t)n_seq);
    *d = (vc_gdn_desc){ .n_seq = n_seq, .cu = c, .n_k_head = nk, .n_v_head = nv, .dk = dk, .dv = dv, .scale = scale,
                        .state = states, .ckpt = GDN_CKPT, .no_delta = no_delta, .gk = gk, .from = fr };
    float *saved = NULL;
    if (rec) {
        int64_t ns = vc_gdn_saved(d);
        saved = vc_graph_dalloc(g, sizeof(float) * (size_t)(ns ? ns : 1) * (size_t)nv * (size_t)dk * (size_t)dv, 0);
        if (!saved) return NULL;
    }
    d->dev_tabs = tabs && !rec ? tabs : dev_tabs(g, n_seq, c, rec ? GDN_CKPT : 0, states);
    vc_be()->gdn_fwd(o->data, saved, q->data, k->data, v->data, gt->data, beta->data, d);
    d->state = NULL, d->dev_tabs = NULL;
    vc_node *n = rec ? vc_tape_push(g, gdn_bw, o, 5, in) : NULL;
    if (n) {
        n->saved = d;
        n->ptr[1] = saved;
    }
    return o;
}

vc_tensor *vc_op_gdn(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, vc_tensor *gt, vc_tensor *beta, int n_seq,
                     const int64_t *cu, int nk, int nv, int dk, int dv, float scale, int no_delta, float *const *states,
                     const int64_t *tabs) {
    return gdn_op(g, q, k, v, gt, beta, n_seq, cu, nk, nv, dk, dv, scale, no_delta, states, tabs, NULL);
}

vc_tensor *vc_op_gdn_shared(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, vc_tensor *gt, vc_tensor *beta,
                            int n_seq, const int64_t *cu, int nk, int nv, int dk, int dv, float scale, int no_delta,
                            const int32_t *from) {
    return gdn_op(g, q, k, v, gt, beta, n_seq, cu, nk, nv, dk, dv, scale, no_delta, NULL, NULL, from);
}

/* ---- Mamba 1's selective scan ---- */
static void ssm_bw(vc_graph *g, vc_node *n) {
#define GR(t) ((t)->requires_grad ? vc_tensor_grad(g, t) : NULL)
    vc_tensor *x = n->in[0], *dt = n->in[1], *A = n->in[2], *B = n->in[3], *C = n->in[4];
    vc_be()->ssm_bwd(GR(x), GR(dt), GR(A), GR(B), GR(C), n->out->grad, n->ptr[1], x->data, dt->data, A->data, B->data,
                     C->data, n->saved);
#undef GR
}

static vc_tensor *ssm_op(vc_graph *g, vc_tensor *x, vc_tensor *dt, vc_tensor *A_log, vc_tensor *B, vc_tensor *C,
                         int n_seq, const int64_t *cu, float *const *states, const int64_t *tabs, const int32_t *from) {
    if (!x || !dt || !A_log || !B || !C) return NULL;
    int64_t T = cu[n_seq], I = x->shape[x->ndim - 1], N = I ? A_log->n / I : 0;
    if (x->n != T * I || dt->n != x->n || N < 1 || A_log->n != I * N || B->n != T * N || C->n != B->n) {
        vc_fail(VC_ERR_SHAPE, "selective scan: %lld rows of %lld channels do not fit dt %lld, A_log %lld, B %lld, C %lld "
                "values", (long long)T, (long long)I, (long long)dt->n, (long long)A_log->n, (long long)B->n,
                (long long)C->n);
        vc_graph_fail(g, VC_ERR_SHAPE);
        return NULL;
    }
    vc_tensor *in[5] = { x, dt, A_log, B, C };
    int rec = records(g, 5, in);
    if (stateful_grad(g, rec, states, "selective scan") || !from_ok(g, n_seq, from, "selective scan")) return NULL;
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 0);
    vc_ssm_desc *d = vc_graph_alloc(g, sizeof *d, 0);
    int64_t *c = keep_cu(g, n_seq, cu);
    int32_t *fr = from ? vc_graph_alloc(g, sizeof(int32_t) * (size_t)(n_seq ? n_seq : 1), 0) : NULL;
    if (!y || !d || !c || (from && !fr)) return NULL;
    if (fr) memcpy(fr, from, sizeof(int32_t) * (size_t)n_seq);
    *d = (vc_ssm_desc){ .n_seq = n_seq, .cu = c, .I = I, .N = (int)N, .state = states, .ckpt = SSM_CKPT, .from = fr };
    float *saved = NULL;
    if (rec) {
        int64_t ns = vc_ssm_saved(d);
        saved = vc_graph_dalloc(g, sizeof(float) * (size_t)(ns ? ns : 1) * (size_t)I * (size_t)N, 0);
        if (!saved) return NULL;
    }
    d->dev_tabs = tabs && !rec ? tabs : dev_tabs(g, n_seq, c, rec ? SSM_CKPT : 0, states);
    vc_be()->ssm_fwd(y->data, saved, x->data, dt->data, A_log->data, B->data, C->data, d);
    d->state = NULL, d->dev_tabs = NULL;
    vc_node *n = rec ? vc_tape_push(g, ssm_bw, y, 5, in) : NULL;
    if (n) {
        n->saved = d;
        n->ptr[1] = saved;
    }
    return y;
}

vc_tensor *vc_op_ssm_scan(vc_graph *g, vc_tensor *x, vc_tensor *dt, vc_tensor *A_log, vc_tensor *B, vc_tensor *C,
                          int n_seq, const int64_t *cu, float *const *states, const int64_t *tabs) {
    return ssm_op(g, x, dt, A_log, B, C, n_seq, cu, states, tabs, NULL);
}

vc_tensor *vc_op_ssm_scan_shared(vc_graph *g, vc_tensor *x, vc_tensor *dt, vc_tensor *A_log, vc_tensor *B,
                                 vc_tensor *C, int n_seq, const int64_t *cu, const int32_t *from) {
    return ssm_op(g, x, dt, A_log, B, C, n_seq, cu, NULL, NULL, from);
}

/* ---- per-channel scale and bias ---- */
static void affine_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t C = n->i[0], grp = n->i[1];
    vc_be()->affine_cols_bwd(x->requires_grad ? vc_tensor_grad(g, x) : NULL,
                             w && w->requires_grad ? vc_tensor_grad(g, w) : NULL,
                             b && b->requires_grad ? vc_tensor_grad(g, b) : NULL, n->out->grad, x->data,
                             w ? w->data : NULL, x->n / C, C, grp);
}

vc_tensor *vc_op_affine_cols(vc_graph *g, vc_tensor *x, vc_tensor *w, vc_tensor *b, int64_t grp) {
    if (!x) return NULL;
    int64_t C = x->shape[x->ndim - 1];
    if (grp < 1 || C % grp || (w && w->n * grp != C) || (b && b->n * grp != C)) {
        vc_fail(VC_ERR_SHAPE, "per-channel affine: %lld columns in groups of %lld, scale of %lld, bias of %lld values",
                (long long)C, (long long)grp, (long long)(w ? w->n : 0), (long long)(b ? b->n : 0));
        vc_graph_fail(g, VC_ERR_SHAPE);
        return NULL;
    }
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 0);
    if (!y) return NULL;
    vc_be()->affine_cols_fwd(y->data, x->data, w ? w->data : NULL, b ? b->data : NULL, x->n / C, C, grp);
    vc_tensor *in[3] = { x, w, b };
    vc_node *n = vc_tape_push(g, affine_bw, y, 3, in);
    if (n) n->i[0] = C, n->i[1] = grp;
    return y;
}
