/* Mixture of experts: routing plus the routed experts' gated MLPs as one op. Tokens are grouped by
 * expert, each expert runs as dense GEMMs over its tokens, outputs are combined with the routing
 * weights. Backward recomputes nothing but the gathered inputs; it keeps per-expert activations. */
#include "tensor/backend.h"
#include "verlc/ops.h"
#include <string.h>

typedef struct {
    vc_route_desc rd;
    int act;
    int64_t T, H, I, E, K;
    float *w;          /* [T, K] routing weights */
    int32_t *idx;      /* [T, K] expert ids */
    int64_t *off;      /* [E + 1] offsets into the grouped order */
    int64_t *tok;      /* [T * K] token of each grouped row */
    int64_t *slot;     /* [T * K] t * K + k of each grouped row */
    float *G, *U, *Y;  /* [T * K, I], [T * K, I], [T * K, H] per grouped row */
} moe_saved;

static void group_rows(moe_saved *s) {
    int64_t n = s->T * s->K;
    memset(s->off, 0, sizeof(int64_t) * (size_t)(s->E + 1));
    for (int64_t i = 0; i < n; i++) s->off[s->idx[i] + 1]++;
    for (int64_t e = 0; e < s->E; e++) s->off[e + 1] += s->off[e];
    int64_t fill[1024];
    memcpy(fill, s->off, sizeof(int64_t) * (size_t)s->E);
    for (int64_t t = 0; t < s->T; t++) /* ascending tokens within each expert */
        for (int64_t k = 0; k < s->K; k++) {
            int64_t r = fill[s->idx[t * s->K + k]]++;
            s->tok[r] = t;
            s->slot[r] = t * s->K + k;
        }
}

static void moe_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *logits = n->in[1], *Wg = n->in[2], *Wu = n->in[3], *Wd = n->in[4];
    moe_saved *s = n->saved;
    const vc_backend *B = vc_be();
    int64_t H = s->H, I = s->I, R = s->T * s->K;
    const float *dy = n->out->grad;
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *dWg = Wg->requires_grad ? vc_tensor_grad(g, Wg) : NULL;
    float *dWu = Wu->requires_grad ? vc_tensor_grad(g, Wu) : NULL;
    float *dWd = Wd->requires_grad ? vc_tensor_grad(g, Wd) : NULL;
    float *dw = vc_graph_alloc(g, sizeof(float) * (size_t)R, 1);
    float *X = vc_graph_alloc(g, sizeof(float) * (size_t)(R * H), 0);
    float *dY = vc_graph_alloc(g, sizeof(float) * (size_t)(R * H), 0);
    float *A = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 0);
    float *dA = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 0);
    float *dG = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 1);
    float *dU = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 1);
    float *dX = vc_graph_alloc(g, sizeof(float) * (size_t)(R * H), 0);
    if (!dw || !X || !dY || !A || !dA || !dG || !dU || !dX) return;
    for (int64_t r = 0; r < R; r++) {
        const float *dyt = dy + s->tok[r] * H, *yr = s->Y + r * H;
        float wr = s->w[s->slot[r]], acc = 0;
        for (int64_t i = 0; i < H; i++) {
            dY[r * H + i] = wr * dyt[i];
            acc += dyt[i] * yr[i];
        }
        dw[s->slot[r]] = acc;
        memcpy(X + r * H, x->data + s->tok[r] * H, (size_t)H * 4);
    }
    B->act_mul_fwd(A, s->G, s->U, R * I, s->act);
    for (int64_t e = 0; e < s->E; e++) {
        int64_t r0 = s->off[e], m = s->off[e + 1] - r0;
        if (!m) continue;
        const float *wg = Wg->data + e * I * H, *wu = Wu->data + e * I * H, *wd = Wd->data + e * H * I;
        B->gemm(0, 0, m, I, H, 1.0f, dY + r0 * H, H, wd, I, 0.0f, dA + r0 * I, I);
        if (dWd) B->gemm(1, 0, H, I, m, 1.0f, dY + r0 * H, H, A + r0 * I, I, 1.0f, dWd + e * H * I, I);
        B->act_mul_bwd(dG + r0 * I, dU + r0 * I, dA + r0 * I, s->G + r0 * I, s->U + r0 * I, m * I, s->act);
        if (dWg) B->gemm(1, 0, I, H, m, 1.0f, dG + r0 * I, I, X + r0 * H, H, 1.0f, dWg + e * I * H, H);
        if (dWu) B->gemm(1, 0, I, H, m, 1.0f, dU + r0 * I, I, X + r0 * H, H, 1.0f, dWu + e * I * H, H);
        B->gemm(0, 0, m, H, I, 1.0f, dG + r0 * I, I, wg, H, 0.0f, dX + r0 * H, H);
        B->gemm(0, 0, m, H, I, 1.0f, dU + r0 * I, I, wu, H, 1.0f, dX + r0 * H, H);
    }
    if (dx)
        for (int64_t r = 0; r < R; r++) /* grouped order is fixed: deterministic sums */
            for (int64_t i = 0; i < H; i++) dx[s->tok[r] * H + i] += dX[r * H + i];
    if (logits->requires_grad) {
        float *dl = vc_tensor_grad(g, logits);
        if (dl) B->route_bwd(dl, dw, logits->data, s->idx, s->T, &s->rd);
    }
}

vc_tensor *vc_op_moe(vc_graph *g, vc_tensor *x, vc_tensor *logits, vc_tensor *Wg, vc_tensor *Wu, vc_tensor *Wd,
                     int act, const vc_route_desc *rd) {
    if (!x || !logits || !Wg || !Wu || !Wd) return NULL;
    const vc_backend *B = vc_be();
    moe_saved *s = vc_graph_alloc(g, sizeof *s, 1);
    if (!s) return NULL;
    s->rd = *rd;
    s->act = act;
    s->E = Wg->shape[0];
    s->I = Wg->shape[1];
    s->H = Wg->shape[2];
    s->T = x->n / s->H;
    s->K = rd->top_k;
    int64_t R = s->T * s->K, H = s->H, I = s->I;
    s->w = vc_graph_alloc(g, sizeof(float) * (size_t)R, 0);
    s->idx = vc_graph_alloc(g, sizeof(int32_t) * (size_t)R, 0);
    s->off = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(s->E + 1), 0);
    s->tok = vc_graph_alloc(g, sizeof(int64_t) * (size_t)R, 0);
    s->slot = vc_graph_alloc(g, sizeof(int64_t) * (size_t)R, 0);
    s->G = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->U = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->Y = vc_graph_alloc(g, sizeof(float) * (size_t)(R * H), 0);
    float *X = vc_graph_alloc(g, sizeof(float) * (size_t)(R * H), 0);
    float *A = vc_graph_alloc(g, sizeof(float) * (size_t)(R * I), 0);
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 1);
    if (!s->w || !s->idx || !s->off || !s->tok || !s->slot || !s->G || !s->U || !s->Y || !X || !A || !y) return NULL;
    B->route_fwd(s->w, s->idx, logits->data, s->T, rd);
    group_rows(s);
    for (int64_t r = 0; r < R; r++) memcpy(X + r * H, x->data + s->tok[r] * H, (size_t)H * 4);
    for (int64_t e = 0; e < s->E; e++) {
        int64_t r0 = s->off[e], m = s->off[e + 1] - r0;
        if (!m) continue;
        B->gemm(0, 1, m, I, H, 1.0f, X + r0 * H, H, Wg->data + e * I * H, H, 0.0f, s->G + r0 * I, I);
        B->gemm(0, 1, m, I, H, 1.0f, X + r0 * H, H, Wu->data + e * I * H, H, 0.0f, s->U + r0 * I, I);
        B->act_mul_fwd(A + r0 * I, s->G + r0 * I, s->U + r0 * I, m * I, act);
        B->gemm(0, 1, m, H, I, 1.0f, A + r0 * I, I, Wd->data + e * H * I, I, 0.0f, s->Y + r0 * H, H);
    }
    /* combine in token order, experts in slot order (k = 0..K-1), as a fixed summation order */
    for (int64_t r = 0; r < R; r++) {
        float wr = s->w[s->slot[r]];
        for (int64_t i = 0; i < H; i++) y->data[s->tok[r] * H + i] += wr * s->Y[r * H + i];
    }
    vc_tensor *in[5] = { x, logits, Wg, Wu, Wd };
    vc_node *n = vc_tape_push(g, moe_bw, y, 5, in);
    if (n) n->saved = s;
    return y;
}
