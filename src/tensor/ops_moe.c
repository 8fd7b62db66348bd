/* Mixture of experts: routing plus the routed experts' gated MLPs as one op. Tokens are grouped by
 * expert, each expert runs as dense GEMMs over its tokens, outputs are combined with the routing
 * weights. Routing weights, expert ids and every activation live in backend memory; only the expert
 * ids come back to the host (small: T * K ints) to group rows, and the grouping (token of each
 * grouped row, grouped row of each choice) goes back up as int64 arrays for gather/combine kernels.
 * Backward recomputes nothing; it keeps the gathered inputs and per-expert activations. */
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    vc_route_desc rd;
    int act;
    int64_t T, H, I, E, K;
    float *w;          /* [T, K] routing weights (backend) */
    int32_t *idx;      /* [T, K] expert ids (backend) */
    int64_t *off;      /* [E + 1] offsets into the grouped order (host) */
    int64_t *tok;      /* [T * K] token of each grouped row (backend) */
    int64_t *inv;      /* [T * K] grouped row of choice t * K + k (backend) */
    float *X, *G, *U, *A, *Y; /* [R, H], [R, I], [R, I], [R, I], [R, H] per grouped row (backend) */
    uint16_t *A16;     /* bf16 matmuls: the gated activations in bf16 instead of A (only GEMMs read them) */
} moe_saved;

/* row r0's activations: the bf16 ones (as the opaque pointer gemm_b16 takes) or the f32 ones */
static const void *act_rows(const moe_saved *s, int64_t r0) {
    return s->A16 ? (const void *)(s->A16 + r0 * s->I) : (const void *)(s->A + r0 * s->I);
}

/* Groups the choices by expert, tokens ascending within each expert: host ids -> off, tok, inv. */
static vc_status group_rows(const moe_saved *s, const int32_t *ids, int64_t *tok, int64_t *inv, int64_t *fill) {
    int64_t n = s->T * s->K;
    memset(s->off, 0, sizeof(int64_t) * (size_t)(s->E + 1));
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->E)
            return vc_fail(VC_ERR_INTERNAL, "moe: routing chose expert %d of %lld", ids[i], (long long)s->E);
        s->off[ids[i] + 1]++;
    }
    for (int64_t e = 0; e < s->E; e++) s->off[e + 1] += s->off[e];
    memcpy(fill, s->off, sizeof(int64_t) * (size_t)s->E);
    for (int64_t t = 0; t < s->T; t++)
        for (int64_t k = 0; k < s->K; k++) {
            int64_t r = fill[ids[t * s->K + k]]++;
            tok[r] = t;
            inv[t * s->K + k] = r;
        }
    return VC_OK;
}

static void moe_bw_rows(vc_graph *g, vc_node *n, float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                        float *dw, float *dY, float *dA, float *dG, float *dU, float *dX);

/* backward temporaries from vc_graph_temp, handed back at the end for later gradients */
static void moe_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *Wg = n->in[2], *Wu = n->in[3], *Wd = n->in[4];
    moe_saved *s = n->saved;
    int64_t H = s->H, I = s->I, R = s->T * s->K;
    const float *dy = n->out->grad;
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *dWg = Wg->requires_grad ? vc_tensor_grad(g, Wg) : NULL;
    float *dWu = Wu->requires_grad ? vc_tensor_grad(g, Wu) : NULL;
    float *dWd = Wd->requires_grad ? vc_tensor_grad(g, Wd) : NULL;
    size_t bR = sizeof(float) * (size_t)R, bH = bR * (size_t)H, bI = bR * (size_t)I;
    float *dw = vc_graph_temp(g, bR, 1), *dY = vc_graph_temp(g, bH, 0), *dA = vc_graph_temp(g, bI, 0);
    float *dG = vc_graph_temp(g, bI, 1), *dU = vc_graph_temp(g, bI, 1), *dX = vc_graph_temp(g, bH, 0);
    if (dw && dY && dA && dG && dU && dX) moe_bw_rows(g, n, dx, dWg, dWu, dWd, dy, dw, dY, dA, dG, dU, dX);
    vc_graph_release(g, dw, bR);
    vc_graph_release(g, dY, bH);
    vc_graph_release(g, dA, bI);
    vc_graph_release(g, dG, bI);
    vc_graph_release(g, dU, bI);
    vc_graph_release(g, dX, bH);
}

/* the experts' backward over the grouped rows, then the scatter and the router's gradient */
static void moe_bw_rows(vc_graph *g, vc_node *n, float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                        float *dw, float *dY, float *dA, float *dG, float *dU, float *dX) {
    vc_tensor *logits = n->in[1], *Wg = n->in[2], *Wu = n->in[3], *Wd = n->in[4];
    moe_saved *s = n->saved;
    const vc_backend *B = vc_be();
    int64_t H = s->H, I = s->I;
    B->moe_combine_bwd(dY, dw, dy, s->Y, s->w, s->inv, s->T, s->K, H);
    for (int64_t e = 0; e < s->E; e++) {
        int64_t r0 = s->off[e], m = s->off[e + 1] - r0;
        if (!m) continue;
        const float *wg = Wg->data + e * I * H, *wu = Wu->data + e * I * H, *wd = Wd->data + e * H * I;
        B->gemm(0, 0, m, I, H, 1.0f, dY + r0 * H, H, wd, I, 0.0f, dA + r0 * I, I);
        if (dWd && s->A16)
            B->gemm_b16(1, 0, H, I, m, 1.0f, dY + r0 * H, 0, H, act_rows(s, r0), 1, I, 1.0f, dWd + e * H * I, I);
        else if (dWd) B->gemm(1, 0, H, I, m, 1.0f, dY + r0 * H, H, s->A + r0 * I, I, 1.0f, dWd + e * H * I, I);
        B->act_mul_bwd(dG + r0 * I, dU + r0 * I, dA + r0 * I, s->G + r0 * I, s->U + r0 * I, m * I, s->act);
        if (dWg) B->gemm(1, 0, I, H, m, 1.0f, dG + r0 * I, I, s->X + r0 * H, H, 1.0f, dWg + e * I * H, H);
        if (dWu) B->gemm(1, 0, I, H, m, 1.0f, dU + r0 * I, I, s->X + r0 * H, H, 1.0f, dWu + e * I * H, H);
        B->gemm(0, 0, m, H, I, 1.0f, dG + r0 * I, I, wg, H, 0.0f, dX + r0 * H, H);
        B->gemm(0, 0, m, H, I, 1.0f, dU + r0 * I, I, wu, H, 1.0f, dX + r0 * H, H);
    }
    if (dx) B->moe_scatter_add(dx, dX, s->inv, s->T, s->K, H); /* k ascending per token: deterministic */
    if (logits->requires_grad) {
        float *dl = vc_tensor_grad(g, logits);
        if (dl) B->route_bwd(dl, dw, logits->data, s->idx, s->T, &s->rd);
    }
}

/* routes, groups the rows on the host and uploads the grouping; saved buffers in s */
static int moe_route(vc_graph *g, moe_saved *s, const vc_tensor *logits) {
    const vc_backend *B = vc_be();
    int64_t R = s->T * s->K;
    int32_t *ids = vc_graph_alloc(g, sizeof(int32_t) * (size_t)R, 0);
    int64_t *tok = vc_graph_alloc(g, sizeof(int64_t) * (size_t)R, 0);
    int64_t *inv = vc_graph_alloc(g, sizeof(int64_t) * (size_t)R, 0);
    int64_t *fill = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(s->E + 1), 0);
    s->off = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(s->E + 1), 0);
    s->w = vc_graph_dalloc(g, sizeof(float) * (size_t)R, 0);
    s->idx = vc_graph_dalloc(g, sizeof(int32_t) * (size_t)R, 0);
    if (!ids || !tok || !inv || !fill || !s->off || !s->w || !s->idx) return -1;
    B->route_fwd(s->w, s->idx, logits->data, s->T, &s->rd);
    B->d2h(ids, s->idx, sizeof(int32_t) * (size_t)R);
    vc_status st = B->sync();
    if (!st) st = group_rows(s, ids, tok, inv, fill);
    if (st) {
        vc_graph_fail(g, st);
        return -1;
    }
    s->tok = vc_graph_upload(g, tok, sizeof(int64_t) * (size_t)R);
    s->inv = vc_graph_upload(g, inv, sizeof(int64_t) * (size_t)R);
    return s->tok && s->inv ? 0 : -1;
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
    if (moe_route(g, s, logits)) return NULL;
    s->X = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * H), 0);
    s->G = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->U = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    const char *env = getenv("VERLC_BF16_ACT"); /* 0: the activations in f32 (same bits; comparisons) */
    int a16 = vc_matmul_precision() == VC_PREC_BF16 && B->act_mul_fwd_bf16 && B->gemm_b16 && !(env && *env == '0');
    if (a16) s->A16 = vc_graph_dalloc(g, 2 * (size_t)(R * I), 0);
    else s->A = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->Y = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * H), 0);
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 0);
    if (!s->X || !s->G || !s->U || (!s->A && !s->A16) || !s->Y || !y) return NULL;
    B->gather_rows(s->X, x->data, s->tok, R, H);
    for (int64_t e = 0; e < s->E; e++) {
        int64_t r0 = s->off[e], m = s->off[e + 1] - r0;
        if (!m) continue;
        B->gemm(0, 1, m, I, H, 1.0f, s->X + r0 * H, H, Wg->data + e * I * H, H, 0.0f, s->G + r0 * I, I);
        B->gemm(0, 1, m, I, H, 1.0f, s->X + r0 * H, H, Wu->data + e * I * H, H, 0.0f, s->U + r0 * I, I);
        if (a16) {
            B->act_mul_fwd_bf16(s->A16 + r0 * I, s->G + r0 * I, s->U + r0 * I, m * I, act);
            B->gemm_b16(0, 1, m, H, I, 1.0f, act_rows(s, r0), 1, I, Wd->data + e * H * I, 0, I, 0.0f, s->Y + r0 * H, H);
        } else {
            B->act_mul_fwd(s->A + r0 * I, s->G + r0 * I, s->U + r0 * I, m * I, act);
            B->gemm(0, 1, m, H, I, 1.0f, s->A + r0 * I, I, Wd->data + e * H * I, I, 0.0f, s->Y + r0 * H, H);
        }
    }
    /* y[t] = sum_k w[t, k] Y[inv[t, k]], k ascending: a fixed summation order */
    B->moe_combine_fwd(y->data, s->Y, s->w, s->inv, s->T, s->K, H);
    vc_tensor *in[5] = { x, logits, Wg, Wu, Wd };
    vc_node *n = vc_tape_push(g, moe_bw, y, 5, in);
    if (n) n->saved = s;
    return y;
}
