/* Mixture of experts: routing plus the routed experts' gated MLPs as one op. The routed choices are
 * grouped by expert on the backend (moe_group), each projection runs as one grouped GEMM over every
 * expert's rows (gemm_rows_grouped / gemm_wgrad_grouped), outputs are combined with the routing weights.
 * Nothing comes back to the host, so a decode step with MoE layers is still one CUDA graph. Backward
 * recomputes nothing; it keeps the gathered inputs and per-expert activations. */
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"
#include <stdlib.h>

typedef struct {
    vc_route_desc rd;
    int act;
    int64_t T, H, I, E, K;
    float *w;          /* [T, K] routing weights (backend) */
    int32_t *idx;      /* [T, K] expert ids (backend) */
    int64_t *off;      /* [E + 1] offsets into the grouped order (backend) */
    int64_t *tok;      /* [T * K] token of each grouped row (backend) */
    int64_t *inv;      /* [T * K] grouped row of choice t * K + k (backend) */
    float *X, *G, *U, *A, *Y; /* [R, H], [R, I], [R, I], [R, I], [R, H] per grouped row (backend) */
    uint16_t *A16;     /* bf16 matmuls: the gated activations in bf16 instead of A (only GEMMs read them) */
    uint16_t *X16;     /* bf16 matmuls: the gathered inputs in bf16 instead of X (only GEMMs read them) */
} moe_saved;

/* the gated activations as the grouped GEMMs take them: bf16 (a16 = 1) or f32 */
static const void *acts(const moe_saved *s, int *a16) {
    *a16 = s->A16 != NULL;
    return s->A16 ? (const void *)s->A16 : (const void *)s->A;
}

/* the gathered inputs likewise */
static const void *inputs(const moe_saved *s, int *x16) {
    *x16 = s->X16 != NULL;
    return s->X16 ? (const void *)s->X16 : (const void *)s->X;
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
    int64_t H = s->H, I = s->I, E = s->E, R = s->T * s->K;
    int a16, x16;
    const void *A = acts(s, &a16), *X = inputs(s, &x16);
    B->moe_combine_bwd(dY, dw, dy, s->Y, s->w, s->inv, s->T, s->K, H);
    B->gemm_rows_grouped(0, E, s->off, R, I, H, 1.0f, dY, 0, H, Wd->data, 0.0f, dA, I);
    if (dWd) B->gemm_wgrad_grouped(E, s->off, H, I, 1.0f, dY, H, A, a16, I, 1.0f, dWd);
    B->act_mul_bwd(dG, dU, dA, s->G, s->U, R * I, s->act);
    if (dWg) B->gemm_wgrad_grouped(E, s->off, I, H, 1.0f, dG, I, X, x16, H, 1.0f, dWg);
    if (dWu) B->gemm_wgrad_grouped(E, s->off, I, H, 1.0f, dU, I, X, x16, H, 1.0f, dWu);
    B->gemm_rows_grouped(0, E, s->off, R, H, I, 1.0f, dG, 0, I, Wg->data, 0.0f, dX, H);
    B->gemm_rows_grouped(0, E, s->off, R, H, I, 1.0f, dU, 0, I, Wu->data, 1.0f, dX, H);
    if (dx) B->moe_scatter_add(dx, dX, s->inv, s->T, s->K, H); /* k ascending per token: deterministic */
    if (logits->requires_grad) {
        float *dl = vc_tensor_grad(g, logits);
        if (dl) B->route_bwd(dl, dw, logits->data, s->idx, s->T, &s->rd);
    }
}

/* routes and groups the rows, all on the backend; saved buffers in s */
static int moe_route(vc_graph *g, moe_saved *s, const vc_tensor *logits) {
    const vc_backend *B = vc_be();
    int64_t R = s->T * s->K;
    s->off = vc_graph_dalloc(g, sizeof(int64_t) * (size_t)(s->E + 1), 0);
    s->tok = vc_graph_dalloc(g, sizeof(int64_t) * (size_t)R, 0);
    s->inv = vc_graph_dalloc(g, sizeof(int64_t) * (size_t)R, 0);
    s->w = vc_graph_dalloc(g, sizeof(float) * (size_t)R, 0);
    s->idx = vc_graph_dalloc(g, sizeof(int32_t) * (size_t)R, 0);
    if (!s->off || !s->tok || !s->inv || !s->w || !s->idx) return -1;
    B->route_fwd(s->w, s->idx, logits->data, s->T, &s->rd);
    B->moe_group(s->off, s->tok, s->inv, s->idx, s->T, s->K, s->E);
    return 0;
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
    /* bf16 matmuls: the inputs and the gated activations, read only by GEMMs that round them to bf16 anyway,
     * are kept in bf16 (half their memory, the same bits; VERLC_BF16_ACT=0 keeps them f32 for comparisons) */
    const char *env = getenv("VERLC_BF16_ACT");
    int a16 = vc_matmul_precision() == VC_PREC_BF16 && B->act_mul_fwd_bf16 && B->gather_rows_bf16 && !(env && *env == '0');
    if (a16) s->X16 = vc_graph_dalloc(g, 2 * (size_t)(R * H), 0);
    else s->X = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * H), 0);
    s->G = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->U = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    if (a16) s->A16 = vc_graph_dalloc(g, 2 * (size_t)(R * I), 0);
    else s->A = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->Y = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * H), 0);
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 0);
    if ((!s->X && !s->X16) || !s->G || !s->U || (!s->A && !s->A16) || !s->Y || !y) return NULL;
    if (a16) B->gather_rows_bf16(s->X16, x->data, s->tok, R, H);
    else B->gather_rows(s->X, x->data, s->tok, R, H);
    int x16;
    const void *X = inputs(s, &x16);
    B->gemm_rows_grouped(1, s->E, s->off, R, I, H, 1.0f, X, x16, H, Wg->data, 0.0f, s->G, I);
    B->gemm_rows_grouped(1, s->E, s->off, R, I, H, 1.0f, X, x16, H, Wu->data, 0.0f, s->U, I);
    if (a16) B->act_mul_fwd_bf16(s->A16, s->G, s->U, R * I, act);
    else B->act_mul_fwd(s->A, s->G, s->U, R * I, act);
    int is16;
    const void *A = acts(s, &is16);
    B->gemm_rows_grouped(1, s->E, s->off, R, H, I, 1.0f, A, is16, I, Wd->data, 0.0f, s->Y, H);
    /* y[t] = sum_k w[t, k] Y[inv[t, k]], k ascending: a fixed summation order */
    B->moe_combine_fwd(y->data, s->Y, s->w, s->inv, s->T, s->K, H);
    vc_tensor *in[5] = { x, logits, Wg, Wu, Wd };
    vc_node *n = vc_tape_push(g, moe_bw, y, 5, in);
    if (n) n->saved = s;
    return y;
}
