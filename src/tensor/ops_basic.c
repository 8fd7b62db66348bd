/* Elementwise, linear and layout ops with their backward rules. Tensor data and gradients are backend
 * memory: every loop over them is a backend entry (src/tensor/backend.h); host-given arrays the
 * kernels read (embedding ids, dot weights) are uploaded into the graph. */
#include "tensor/backend.h"
#include "core/vmath.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD1(a) if (!(a)) return NULL
#define GUARD2(a, b) if (!(a) || !(b)) return NULL

static vc_tensor *like(vc_graph *g, const vc_tensor *x) { return vc_tensor_new(g, x->ndim, x->shape, 0); }

/* ---- embedding ---- */
static void embedding_bw(vc_graph *g, vc_node *n) {
    vc_tensor *W = n->in[0];
    float *gw = vc_tensor_grad(g, W);
    if (gw) vc_be()->embed_bwd(gw, n->out->grad, n->ptr[0], n->i[0], W->shape[1]);
}

vc_tensor *vc_op_embedding(vc_graph *g, vc_tensor *W, const int32_t *ids, int64_t T) {
    GUARD1(W);
    int64_t H = W->shape[1];
    vc_tensor *y = vc_tensor_2d(g, T, H, 0);
    int32_t *dids = vc_graph_upload(g, ids, (size_t)T * 4);
    if (!y || !dids) return NULL;
    vc_be()->embed_fwd(y->data, W->data, dids, T, H);
    vc_node *n = vc_tape_push(g, embedding_bw, y, 1, &W);
    if (n) {
        n->ptr[0] = dids;
        n->i[0] = T;
    }
    return y;
}

/* ---- row gather: y[r] = x[ids[r]] over x's rows; backward scatter-adds, r ascending ---- */
static void gather_rows_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0];
    float *gx = vc_tensor_grad(g, x);
    if (gx) vc_be()->embed_bwd(gx, n->out->grad, n->ptr[0], n->i[0], n->i[1]);
}

vc_tensor *vc_op_gather_rows(vc_graph *g, vc_tensor *x, int64_t rows, const int32_t *ids, int64_t R) {
    GUARD1(x);
    if (rows <= 0 || x->n % rows) return NULL;
    int64_t C = x->n / rows, shape[2] = { R, C };
    vc_tensor *y = vc_tensor_new(g, x->ndim == 1 ? 1 : 2, shape, 0);
    if (!y) return NULL;
    if (R > 0 && C > 0) vc_be()->embed_fwd(y->data, x->data, ids, R, C);
    vc_node *n = vc_tape_push(g, gather_rows_bw, y, 1, &x);
    if (n) {
        n->ptr[0] = (void *)ids;
        n->i[0] = R;
        n->i[1] = C;
    }
    return y;
}

/* ---- row scatter: y = 0, y[ids[r]] = x[r]; backward dx += dy[ids[r]] ---- */
static void scatter_rows_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0];
    float *gx = vc_tensor_grad(g, x);
    int64_t R = n->i[0], C = n->i[1];
    float *tmp = gx && R * C > 0 ? vc_graph_dalloc(g, sizeof(float) * (size_t)(R * C), 0) : NULL;
    if (!tmp) return;
    vc_be()->embed_fwd(tmp, n->out->grad, n->ptr[0], R, C);
    vc_be()->axpy(gx, 1.0f, tmp, R * C);
}

vc_tensor *vc_op_scatter_rows(vc_graph *g, vc_tensor *x, const int32_t *ids, int64_t R, int64_t rows) {
    GUARD1(x);
    if (R <= 0 || x->n % R) return NULL;
    int64_t C = x->n / R, shape[2] = { rows, C };
    vc_tensor *y = vc_tensor_new(g, x->ndim == 1 ? 1 : 2, shape, 1);
    if (!y) return NULL;
    if (C > 0) vc_be()->embed_bwd(y->data, x->data, ids, R, C); /* into zeros: distinct ids, a plain scatter */
    vc_node *n = vc_tape_push(g, scatter_rows_bw, y, 1, &x);
    if (n) {
        n->ptr[0] = (void *)ids;
        n->i[0] = R;
        n->i[1] = C;
    }
    return y;
}

void vc_op_hold(vc_tensor *x, int on) {
    const vc_backend *B = vc_be();
    if (x && x->ndim > 0 && B->operand_hold) B->operand_hold(x->data, x->n / x->shape[x->ndim - 1], x->shape[x->ndim - 1], on);
}

/* ---- linear: y = x W^T + b ---- */
static void linear_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2];
    int64_t N = W->shape[0], K = W->shape[1], M = x->n / K;
    const float *dy = n->out->grad;
    const vc_backend *B = vc_be();
    int hold = B->operand_hold && x->requires_grad && W->requires_grad; /* dy feeds two GEMMs */
    if (hold) B->operand_hold(dy, M, N, 1);
    if (x->requires_grad) { /* a fresh gradient is written (beta 0: nothing zeroed, nothing read) */
        float *dx = vc_grad_fresh(g, x), beta = 0.0f;
        if (!dx) dx = vc_tensor_grad(g, x), beta = 1.0f;
        if (dx) B->gemm(0, 0, M, K, N, 1.0f, dy, N, W->data, K, beta, dx, K);
    }
    if (W->requires_grad) {
        float *dW = vc_tensor_grad(g, W);
        if (dW && n->i[1]) B->gemm_b16(1, 0, N, K, M, 1.0f, dy, 0, N, x->data, 1, K, 1.0f, dW, K); /* x in bf16 */
        else if (dW) B->gemm(1, 0, N, K, M, 1.0f, dy, N, x->data, K, 1.0f, dW, K);
    }
    if (b && b->requires_grad) {
        float *db = vc_tensor_grad(g, b);
        if (db) B->col_sum(db, dy, M, N);
    }
    if (hold) B->operand_hold(dy, M, N, 0);
}

void vc_tape_linear(vc_graph *g, vc_tensor *y, vc_tensor *x, vc_tensor *W, vc_tensor *b, int x16) {
    vc_tensor *in[3] = { x, W, b };
    vc_node *n = vc_tape_push(g, linear_bw, y, 3, in);
    if (n) n->i[1] = x16;
}

vc_tensor *vc_op_linear(vc_graph *g, vc_tensor *x, vc_tensor *W, vc_tensor *b) {
    GUARD2(x, W);
    int64_t N = W->shape[0], K = W->shape[1], M = x->n / K;
    int64_t shape[VC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = N;
    vc_tensor *y = vc_tensor_new(g, x->ndim, shape, 0);
    GUARD1(y);
    const vc_backend *B = vc_be();
    if (b && B->linear_bias) B->linear_bias(M, N, K, x->data, W->data, b->data, y->data);
    else {
        if (b) B->rows_copy(y->data, N, b->data, 0, M, N, 1, 0);
        B->gemm(0, 1, M, N, K, 1.0f, x->data, K, W->data, K, b ? 1.0f : 0.0f, y->data, N);
    }
    vc_tensor *in[3] = { x, W, b };
    vc_tape_push(g, linear_bw, y, 3, in);
    return y;
}

/* ---- add / mul / scale ---- */
static void add_bw(vc_graph *g, vc_node *n) {
    /* the second input first: the first may then take dy itself (its last use) */
    if (n->in[1]->requires_grad) vc_grad_add(g, n->in[1], n->out->grad);
    if (n->in[0]->requires_grad && !vc_grad_take(g, n, n->in[0])) vc_grad_add(g, n->in[0], n->out->grad);
}

void vc_tape_add(vc_graph *g, vc_tensor *y, vc_tensor *a, vc_tensor *b) {
    vc_tensor *in[2] = { a, b };
    vc_tape_push(g, add_bw, y, 2, in);
}

vc_tensor *vc_op_add(vc_graph *g, vc_tensor *a, vc_tensor *b) {
    GUARD2(a, b);
    vc_tensor *y = like(g, a);
    GUARD1(y);
    vc_be()->add(y->data, a->data, b->data, a->n);
    vc_tensor *in[2] = { a, b };
    vc_tape_push(g, add_bw, y, 2, in);
    return y;
}

static void mul_bw(vc_graph *g, vc_node *n) {
    vc_tensor *a = n->in[0], *b = n->in[1];
    const float *dy = n->out->grad;
    if (a->requires_grad) {
        float *d = vc_tensor_grad(g, a);
        if (d) vc_be()->mul_acc(d, dy, b->data, a->n);
    }
    if (b->requires_grad) {
        float *d = vc_tensor_grad(g, b);
        if (d) vc_be()->mul_acc(d, dy, a->data, b->n);
    }
}

vc_tensor *vc_op_mul(vc_graph *g, vc_tensor *a, vc_tensor *b) {
    GUARD2(a, b);
    vc_tensor *y = like(g, a);
    GUARD1(y);
    vc_be()->mul(y->data, a->data, b->data, a->n);
    vc_tensor *in[2] = { a, b };
    vc_tape_push(g, mul_bw, y, 2, in);
    return y;
}

static void scale_bw(vc_graph *g, vc_node *n) {
    float s = (float)n->f[0];
    if (vc_grad_take(g, n, n->in[0])) { /* dx = s dy in place */
        vc_be()->scale(n->in[0]->grad, n->in[0]->grad, s, n->in[0]->n);
        return;
    }
    float *d = vc_tensor_grad(g, n->in[0]);
    if (d) vc_be()->axpy(d, s, n->out->grad, n->out->n);
}

vc_tensor *vc_op_scale(vc_graph *g, vc_tensor *a, float s) {
    GUARD1(a);
    vc_tensor *y = like(g, a);
    GUARD1(y);
    vc_be()->scale(y->data, a->data, s, a->n);
    vc_node *n = vc_tape_push(g, scale_bw, y, 1, &a);
    if (n) n->f[0] = s;
    return y;
}

static void round_bf16_bw(vc_graph *g, vc_node *n) {
    if (!vc_grad_take(g, n, n->in[0])) vc_grad_add(g, n->in[0], n->out->grad);
}

vc_tensor *vc_op_round_bf16_inplace(vc_graph *g, vc_tensor *a) {
    GUARD1(a);
    vc_tensor *y = vc_tensor_wrap(g, a->data, a->ndim, a->shape);
    GUARD1(y);
    vc_be()->round_bf16(a->data, a->data, a->n);
    vc_tape_push(g, round_bf16_bw, y, 1, &a);
    return y;
}

static void mul_rows_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *s = n->in[1];
    int64_t R = s->n, C = x->n / R;
    const float *dy = n->out->grad;
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *ds = s->requires_grad ? vc_tensor_grad(g, s) : NULL;
    if (dx || ds) vc_be()->mul_rows_bwd(dx, ds, dy, x->data, s->data, R, C);
}

vc_tensor *vc_op_mul_rows(vc_graph *g, vc_tensor *x, vc_tensor *s) {
    GUARD2(x, s);
    int64_t R = s->n, C = x->n / R;
    vc_tensor *y = like(g, x);
    GUARD1(y);
    vc_be()->mul_rows_fwd(y->data, x->data, s->data, R, C);
    vc_tensor *in[2] = { x, s };
    vc_tape_push(g, mul_rows_bw, y, 2, in);
    return y;
}

/* ---- activations ---- */
static void act_bw(vc_graph *g, vc_node *n) {
    float *d = vc_tensor_grad(g, n->in[0]);
    if (d) vc_be()->act_bwd(d, n->out->grad, n->in[0]->data, n->out->n, (int)n->i[0]);
}

vc_tensor *vc_op_act(vc_graph *g, vc_tensor *x, int kind) {
    GUARD1(x);
    vc_tensor *y = like(g, x);
    GUARD1(y);
    vc_be()->act_fwd(y->data, x->data, x->n, kind);
    vc_node *n = vc_tape_push(g, act_bw, y, 1, &x);
    if (n) n->i[0] = kind;
    return y;
}

/* xIELU (Apertus): its two learnable scalars ap, an ([1]); beta, eps constants (n->f) */
static void xielu_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *ap = n->in[1], *an = n->in[2];
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *dap = ap->requires_grad ? vc_tensor_grad(g, ap) : NULL, *dan = an->requires_grad ? vc_tensor_grad(g, an) : NULL;
    vc_be()->xielu_bwd(dx, dap, dan, n->out->grad, x->data, x->n, ap->data, an->data, (float)n->f[0], (float)n->f[1]);
}

vc_tensor *vc_op_xielu(vc_graph *g, vc_tensor *x, vc_tensor *ap, vc_tensor *an, float beta, float eps) {
    GUARD1(x);
    if (!ap || !an) return NULL;
    vc_tensor *y = like(g, x);
    GUARD1(y);
    vc_be()->xielu_fwd(y->data, x->data, x->n, ap->data, an->data, beta, eps);
    vc_tensor *in[3] = { x, ap, an };
    vc_node *n = vc_tape_push(g, xielu_bw, y, 3, in);
    if (n) n->f[0] = beta, n->f[1] = eps;
    return y;
}

/* gate's and up's gradients for act_mul_bwd: written (kind | VC_ACT_WRITE, no zeroing first) when neither has one
 * yet, else added to */
static int gate_grads(vc_graph *g, vc_tensor *gate, vc_tensor *up, float **dg, float **du) {
    int wr = gate != up && !gate->is_param && !up->is_param && !(gate->requires_grad && gate->grad) &&
             !(up->requires_grad && up->grad);
    *dg = !gate->requires_grad ? NULL : wr ? vc_grad_fresh(g, gate) : vc_tensor_grad(g, gate);
    *du = !up->requires_grad ? NULL : wr ? vc_grad_fresh(g, up) : vc_tensor_grad(g, up);
    return wr ? VC_ACT_WRITE : 0;
}

static void act_mul_bw(vc_graph *g, vc_node *n) {
    vc_tensor *a = n->in[0], *b = n->in[1];
    float *da, *db;
    int wr = gate_grads(g, a, b, &da, &db);
    if ((a->requires_grad && !da) || (b->requires_grad && !db)) return; /* the graph holds the status */
    vc_be()->act_mul_bwd(da, db, n->out->grad, a->data, b->data, a->n, a->n, a->n, (int)n->i[0] | wr);
}

vc_tensor *vc_op_act_mul(vc_graph *g, vc_tensor *gate, vc_tensor *up, int kind) {
    GUARD2(gate, up);
    vc_tensor *y = like(g, gate);
    GUARD1(y);
    vc_be()->act_mul_fwd(y->data, gate->data, up->data, gate->n, gate->n, gate->n, kind);
    vc_tensor *in[2] = { gate, up };
    vc_node *n = vc_tape_push(g, act_mul_bw, y, 2, in);
    if (n) n->i[0] = kind;
    return y;
}

/* ---- gated activation into a linear, the activation kept in bf16: y = (act(gate) * up) W^T + b ---- */
static void act_mul_linear_bw(vc_graph *g, vc_node *n) {
    vc_tensor *gate = n->in[0], *up = n->in[1], *W = n->in[2], *b = n->in[3];
    const void *a16 = n->ptr[0];
    int64_t N = W->shape[0], K = W->shape[1], M = gate->n / K;
    const float *dy = n->out->grad;
    const vc_backend *B = vc_be();
    int need_da = gate->requires_grad || up->requires_grad;
    int hold = B->operand_hold && need_da && W->requires_grad; /* dy feeds two GEMMs */
    if (hold) B->operand_hold(dy, M, N, 1);
    if (W->requires_grad) {
        float *dW = vc_tensor_grad(g, W);
        if (dW) B->gemm_b16(1, 0, N, K, M, 1.0f, dy, 0, N, a16, 1, K, 1.0f, dW, K);
    }
    float *da = need_da ? vc_graph_scratch(g, sizeof(float) * (size_t)(M * K)) : NULL;
    if (da) B->gemm(0, 0, M, K, N, 1.0f, dy, N, W->data, K, 0.0f, da, K);
    if (b && b->requires_grad) {
        float *db = vc_tensor_grad(g, b);
        if (db) B->col_sum(db, dy, M, N);
    }
    if (hold) B->operand_hold(dy, M, N, 0);
    if (!da) return;
    float *dg, *du;
    int wr = gate_grads(g, gate, up, &dg, &du);
    if ((!gate->requires_grad || dg) && (!up->requires_grad || du))
        B->act_mul_bwd(dg, du, da, gate->data, up->data, gate->n, gate->n, gate->n, (int)n->i[0] | wr);
    vc_graph_release(g, da, sizeof(float) * (size_t)(M * K));
}

vc_tensor *vc_op_act_mul_linear(vc_graph *g, vc_tensor *gate, vc_tensor *up, int kind, vc_tensor *W, vc_tensor *b) {
    GUARD2(gate, up);
    GUARD1(W);
    const vc_backend *B = vc_be();
    if (vc_matmul_precision() != VC_PREC_BF16 || !B->act_mul_fwd_bf16 || !B->gemm_b16)
        return vc_op_linear(g, vc_op_act_mul(g, gate, up, kind), W, b);
    int64_t N = W->shape[0], K = W->shape[1], M = gate->n / K;
    void *a16 = vc_graph_dalloc(g, 2 * (size_t)gate->n, 0);
    int64_t shape[VC_MAX_DIMS];
    memcpy(shape, gate->shape, sizeof shape);
    shape[gate->ndim - 1] = N;
    vc_tensor *y = a16 ? vc_tensor_new(g, gate->ndim, shape, 0) : NULL;
    GUARD1(y);
    B->act_mul_fwd_bf16(a16, gate->data, up->data, gate->n, gate->n, gate->n, kind);
    if (b) B->rows_copy(y->data, N, b->data, 0, M, N, 1, 0);
    B->gemm_b16(0, 1, M, N, K, 1.0f, a16, 1, K, W->data, 0, K, b ? 1.0f : 0.0f, y->data, N);
    vc_tensor *in[4] = { gate, up, W, b };
    vc_node *n = vc_tape_push(g, act_mul_linear_bw, y, 4, in);
    if (n) {
        n->i[0] = kind;
        n->ptr[0] = a16;
    }
    return y;
}

/* ---- layout ---- */
static void slice_bw(vc_graph *g, vc_node *n) {
    float *d = vc_tensor_grad(g, n->in[0]);
    int64_t C = n->i[0], c0 = n->i[1], w = n->i[2], R = n->in[0]->n / C;
    if (d) vc_be()->rows_copy(d + c0, C, n->out->grad, w, R, w, 1, 1);
}

vc_tensor *vc_op_slice_cols(vc_graph *g, vc_tensor *x, int64_t C, int64_t c0, int64_t c1) {
    GUARD1(x);
    int64_t R = x->n / C, w = c1 - c0;
    vc_tensor *y = vc_tensor_2d(g, R, w, 0);
    GUARD1(y);
    vc_be()->rows_copy(y->data, w, x->data + c0, C, R, w, 1, 0);
    vc_node *n = vc_tape_push(g, slice_bw, y, 1, &x);
    if (n) {
        n->i[0] = C;
        n->i[1] = c0;
        n->i[2] = w;
    }
    return y;
}

static void concat_bw(vc_graph *g, vc_node *n) {
    vc_tensor *a = n->in[0], *b = n->in[1];
    int64_t Ca = n->i[0], Cb = n->i[1], rep = n->i[2], R = a->n / Ca, W = Ca + Cb;
    const float *dy = n->out->grad;
    float *da = a->requires_grad ? vc_tensor_grad(g, a) : NULL;
    float *db = b->requires_grad ? vc_tensor_grad(g, b) : NULL;
    if (da) vc_be()->rows_copy(da, Ca, dy, W, R, Ca, 1, 1);
    if (db) vc_be()->rows_sum(db, Cb, dy + Ca, W, R, Cb, rep);
}

vc_tensor *vc_op_concat_cols(vc_graph *g, vc_tensor *a, int64_t Ca, vc_tensor *b, int64_t Cb, int64_t rep) {
    GUARD2(a, b);
    int64_t R = a->n / Ca, W = Ca + Cb;
    vc_tensor *y = vc_tensor_2d(g, R, W, 0);
    GUARD1(y);
    vc_be()->rows_copy(y->data, W, a->data, Ca, R, Ca, 1, 0);
    vc_be()->rows_copy(y->data + Ca, W, b->data, Cb, R, Cb, rep, 0);
    vc_tensor *in[2] = { a, b };
    vc_node *n = vc_tape_push(g, concat_bw, y, 2, in);
    if (n) {
        n->i[0] = Ca;
        n->i[1] = Cb;
        n->i[2] = rep;
    }
    return y;
}

static void softcap_bw(vc_graph *g, vc_node *n) {
    float *d = vc_tensor_grad(g, n->in[0]);
    float cap = (float)n->f[0];
    if (d) vc_be()->softcap_bwd(d, n->out->grad, n->out->data, cap, n->out->n);
}

vc_tensor *vc_op_softcap(vc_graph *g, vc_tensor *x, float cap) {
    GUARD1(x);
    vc_tensor *y = like(g, x);
    GUARD1(y);
    vc_be()->softcap_fwd(y->data, x->data, cap, x->n);
    vc_node *n = vc_tape_push(g, softcap_bw, y, 1, &x);
    if (n) n->f[0] = cap;
    return y;
}

/* y = min(max(x, lo), hi) (torch.clamp); the gradient passes where lo <= x <= hi, as torch.clamp's */
static void clip_bw(vc_graph *g, vc_node *n) {
    float *d = vc_tensor_grad(g, n->in[0]);
    if (d) vc_be()->clip_bwd(d, n->out->grad, n->in[0]->data, (float)n->f[0], (float)n->f[1], n->out->n);
}

vc_tensor *vc_op_clamp(vc_graph *g, vc_tensor *x, float lo, float hi) {
    GUARD1(x);
    vc_tensor *y = like(g, x);
    GUARD1(y);
    vc_be()->clip_fwd(y->data, x->data, lo, hi, x->n);
    vc_node *n = vc_tape_push(g, clip_bw, y, 1, &x);
    if (n) n->f[0] = lo, n->f[1] = hi;
    return y;
}

vc_tensor *vc_op_clip(vc_graph *g, vc_tensor *x, float c) { return vc_op_clamp(g, x, -c, c); }

/* y = w / max(||w||, 1e-12); dy/dw = (dy - y (y . dy)) / norm when norm > eps */
static void rownorm_bw(vc_graph *g, vc_node *n) {
    vc_tensor *W = n->in[0];
    int64_t R = W->shape[0], C = W->n / R;
    float *d = vc_tensor_grad(g, W);
    if (d) vc_be()->rownorm_bwd(d, n->out->grad, n->out->data, n->saved, R, C);
}

vc_tensor *vc_op_row_normalize(vc_graph *g, vc_tensor *W) {
    GUARD1(W);
    int64_t R = W->shape[0], C = W->n / R;
    vc_tensor *y = like(g, W);
    float *nrm = vc_graph_dalloc(g, (size_t)R * 4, 0);
    if (!y || !nrm) return NULL;
    vc_be()->rownorm_fwd(y->data, nrm, W->data, R, C);
    vc_node *n = vc_tape_push(g, rownorm_bw, y, 1, &W);
    if (n) n->saved = nrm;
    return y;
}

static void dot_const_bw(vc_graph *g, vc_node *n) {
    float *d = vc_tensor_grad(g, n->in[0]);
    if (d) vc_be()->dot_bwd(d, n->out->grad, n->ptr[0], n->in[0]->n);
}

vc_tensor *vc_op_dot_const(vc_graph *g, vc_tensor *x, const float *w) {
    GUARD1(x);
    int64_t one = 1;
    vc_tensor *y = vc_tensor_new(g, 1, &one, 0);
    float *dw = vc_graph_upload(g, w, (size_t)x->n * 4);
    if (!y || !dw) return NULL;
    vc_be()->dot_fwd(y->data, x->data, dw, x->n);
    vc_node *n = vc_tape_push(g, dot_const_bw, y, 1, &x);
    if (n) n->ptr[0] = dw;
    return y;
}

/* log-softmax of each row of x [R, V] gathered at K given columns per row: on the host (the rows read back),
 * for losses over a few columns of a large vocabulary (distillation's top-k). Backward: d x[r, j] =
 * [j = ids[r, k]] g[r, k] - p[r, j] sum_k g[r, k]. */
typedef struct {
    int64_t R, V;
    int K;
    const int32_t *ids; /* [R * K] host, arena */
    double *lse;        /* [R] host, arena */
} lsg_saved;

static void lsg_bw(vc_graph *g, vc_node *n) {
    lsg_saved *s = n->saved;
    vc_tensor *x = n->in[0];
    const vc_backend *B = vc_be();
    size_t RV = (size_t)(s->R * s->V), RK = (size_t)s->R * (size_t)s->K;
    float *h = vc_malloc(sizeof(float) * (RV ? RV : 1)), *gy = vc_malloc(sizeof(float) * (RK ? RK : 1));
    float *gx = vc_tensor_grad(g, x), *tmp = vc_graph_temp(g, sizeof(float) * (RV ? RV : 1), 0);
    if (h && gy && gx && tmp) {
        B->d2h(h, x->data, sizeof(float) * RV);
        B->d2h(gy, n->out->grad, sizeof(float) * RK);
        for (int64_t r = 0; r < s->R; r++) {
            float *row = h + r * s->V;
            double gs = 0;
            for (int k = 0; k < s->K; k++) gs += gy[r * s->K + k];
            for (int64_t j = 0; j < s->V; j++) row[j] = (float)(-exp((double)row[j] - s->lse[r]) * gs);
            for (int k = 0; k < s->K; k++) row[s->ids[r * s->K + k]] += gy[r * s->K + k];
        }
        B->h2d(tmp, h, sizeof(float) * RV);
        B->axpy(gx, 1.0f, tmp, (int64_t)RV);
    } else vc_graph_fail(g, VC_ERR_NOMEM);
    if (tmp) vc_graph_release(g, tmp, sizeof(float) * (RV ? RV : 1));
    free(h);
    free(gy);
}

vc_tensor *vc_op_logsoftmax_gather(vc_graph *g, vc_tensor *x, const int32_t *ids, int K, int32_t *top) {
    GUARD1(x);
    if (x->ndim != 2 || K < 1) {
        vc_graph_fail(g, vc_fail(VC_ERR_SHAPE, "logsoftmax_gather: a [rows, columns] input and K >= 1"));
        return NULL;
    }
    int64_t R = x->shape[0], V = x->shape[1], RK = R * K, one = RK;
    for (int64_t i = 0; i < RK; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            vc_graph_fail(g, vc_fail(VC_ERR_ARG, "logsoftmax_gather: column %d of row %lld is not one of %lld",
                                     ids[i], (long long)(i / K), (long long)V));
            return NULL;
        }
    lsg_saved *s = vc_graph_alloc(g, sizeof *s, 1);
    int32_t *id = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(RK ? RK : 1), 0);
    double *lse = vc_graph_alloc(g, sizeof(double) * (size_t)(R ? R : 1), 0);
    size_t rv = R * V > 0 ? (size_t)(R * V) : 1;
    float *h = vc_malloc(sizeof(float) * rv), *out = vc_malloc(sizeof(float) * (size_t)(RK ? RK : 1));
    vc_tensor *y = vc_tensor_new(g, 1, &one, 0);
    if (!s || !id || !lse || !h || !out || !y) {
        free(h);
        free(out);
        vc_graph_fail(g, VC_ERR_NOMEM);
        return NULL;
    }
    memcpy(id, ids, sizeof(int32_t) * (size_t)RK);
    vc_be()->d2h(h, x->data, sizeof(float) * (size_t)(R * V));
    for (int64_t r = 0; r < R; r++) {
        const float *row = h + r * V;
        lse[r] = vc_logsumexp_row(row, V);
        for (int k = 0; k < K; k++) out[r * K + k] = (float)((double)row[id[r * K + k]] - lse[r]);
        if (top) { /* beyond a vocabulary smaller than K: -1 */
            vc_topk_row(row, V, (int)(K < V ? K : V), top + r * K);
            for (int64_t k = V; k < K; k++) top[r * K + k] = -1;
        }
    }
    vc_be()->h2d(y->data, out, sizeof(float) * (size_t)RK);
    free(h);
    free(out);
    *s = (lsg_saved){ R, V, K, id, lse };
    vc_node *n = vc_tape_push(g, lsg_bw, y, 1, &x);
    if (n) n->saved = s;
    return y;
}
