/* The gated MLP with its gate and up projections as one matrix: y = (act(x Wg^T) * (x Wu^T)) W^T + b, where Wu's rows
 * follow Wg's in memory ([2I, H] together, as vLLM's and Megatron's merged gate_up_proj). One GEMM gives both halves
 * of each row ([T, 2I]: gate's I columns, then up's), the activation reads them LD = 2I apart; backward writes their
 * gradient the same way and takes x's gradient (K = 2I) and the two weights' gradients in one GEMM each. Fewer and
 * larger GEMMs than vc_op_act_mul_linear's two projections (one kernel a decode step's layer fewer, and no second
 * pass over dx). On the CPU backend the forward GEMM is its row-invariant one, whose every element is computed by the
 * same fixed sequence whatever the matrix's width: the gate and up values have the bits the two projections give. */
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VERLC_GATE_UP_BF16=1 (read per call; bf16 matmuls only): gate and up rounded to bf16 as an autocast linear writes
 * them. Where the backend has gemm_c16 and the act_mul16 entries (cuda) they are stored in bf16 (the GEMM writes half
 * the bytes, the activation and its backward read half); elsewhere the f32 values are rounded in place (the same
 * numbers). Off by default: not the bits of the f32 gate and up. */
static int gu_bf16(void) {
    const char *e = getenv("VERLC_GATE_UP_BF16");
    return e && *e == '1' && vc_matmul_precision() == VC_PREC_BF16;
}

int vc_gate_up_adjacent(const vc_tensor *Wg, const vc_tensor *Wu) {
    return Wg && Wu && Wg->ndim == 2 && Wu->ndim == 2 && Wg->shape[0] == Wu->shape[0] && Wg->shape[1] == Wu->shape[1] &&
           Wg->data && Wu->data == Wg->data + Wg->n;
}

/* the weights' gradients: one GEMM over [2I, H] when their gradient buffers are adjacent as the weights are, else
 * one a half (ZeRO-2's working area may place them apart) */
static void gate_up_wgrad(const vc_tensor *Wg, float *dg, float *du, const float *dgu, const float *x, int64_t M) {
    const vc_backend *B = vc_be();
    int64_t I = Wg->shape[0], H = Wg->shape[1];
    if (dg && du && du == dg + Wg->n) {
        B->gemm(1, 0, 2 * I, H, M, 1.0f, dgu, 2 * I, x, H, 1.0f, dg, H);
        return;
    }
    if (dg) B->gemm(1, 0, I, H, M, 1.0f, dgu, 2 * I, x, H, 1.0f, dg, H);
    if (du) B->gemm(1, 0, I, H, M, 1.0f, dgu + I, 2 * I, x, H, 1.0f, du, H);
}

/* gate and up's node: x -> a = act(x Wg^T) * (x Wu^T) (a's storage bf16 or f32; its gradient f32); gu [M, 2I] kept
 * for backward (bf16 storage when n->i[1]). dgu = [dg | du] goes to GEMMs only: where they all read its whole rows
 * (x's gradient, and the weights' in one GEMM or none) the backend may write its bf16 rounding straight into the copy
 * those GEMMs read (act_mul_bwd_held: the f32 rows neither written nor read back to be rounded, the same bits) */
static void gate_up_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *Wg = n->in[1], *Wu = n->in[2];
    const float *da = n->out->grad;
    int64_t I = Wg->shape[0], H = Wg->shape[1], M = x->n / H;
    const vc_backend *B = vc_be();
    float *dgu = vc_graph_scratch(g, sizeof(float) * (size_t)(2 * M * I));
    if (!dgu) return;
    float *dg = Wg->requires_grad ? vc_tensor_grad(g, Wg) : NULL, *du = Wu->requires_grad ? vc_tensor_grad(g, Wu) : NULL;
    const int whole = (!dg && !du) || (dg && du && du == dg + Wg->n), g16 = (int)n->i[1];
    const char *gu = n->ptr[0], *uu = gu + I * (g16 ? 2 : 4);
    const int kind = (int)n->i[0] | VC_ACT_WRITE;
    int held = whole && B->act_mul_bwd_held && B->act_mul_bwd_held(dgu, da, gu, uu, g16, M * I, I, 2 * I, kind);
    int both = !held && x->requires_grad && (dg || du); /* dgu feeds two GEMMs: rounded once */
    if (!held) {
        if (g16) B->act_mul16_bwd(dgu, dgu + I, da, gu, uu, M * I, I, 2 * I, kind);
        else B->act_mul_bwd(dgu, dgu + I, da, (const float *)gu, (const float *)uu, M * I, I, 2 * I, kind);
        if (both && B->operand_hold) B->operand_hold(dgu, M, 2 * I, 1);
    }
    if (x->requires_grad) { /* a fresh gradient is written (beta 0) */
        float *dx = vc_grad_fresh(g, x), beta = 0.0f;
        if (!dx) dx = vc_tensor_grad(g, x), beta = 1.0f;
        if (dx) B->gemm(0, 0, M, H, 2 * I, 1.0f, dgu, 2 * I, Wg->data, H, beta, dx, H);
    }
    gate_up_wgrad(Wg, dg, du, dgu, x->data, M);
    if ((held || both) && B->operand_hold) B->operand_hold(dgu, M, 2 * I, 0);
    vc_graph_release(g, dgu, sizeof(float) * (size_t)(2 * M * I));
}

/* VERLC_MLP_ROWS=R (read per call; off by default): without a tape (log-prob passes, rollout) the MLP runs R rows at a
 * time, gate/up's GEMM, the activation and the down projection of each block before the next, so that a block's
 * [R, 2I] gate and up values (40 MiB at R = 1,024 on Qwen2.5-0.5B's shape) may still sit in the GPU's L2 when the
 * activation reads them, as the activation's rows when the down projection does (at 16 x 1,024 rows the whole [T, 2I]
 * is 637 MiB, written to memory and read back), and the buffers are a block's, not all rows'. On the CPU the same bits
 * as all rows at once (its forward GEMM is row-invariant); on a GPU cuBLAS may pick other kernels for other row counts
 * (other last bits). */
static int64_t mlp_rows(void) {
    static int warned;
    const char *e = getenv("VERLC_MLP_ROWS");
    if (!e || !*e) return 0;
    char *end;
    long long r = strtoll(e, &end, 10);
    if (*end || r < 0) { /* a tuning switch: said once, then off */
        if (!warned++) fprintf(stderr, "verlc: VERLC_MLP_ROWS=%s is not a row count: the MLP runs all rows at once\n", e);
        return 0;
    }
    return (int64_t)r;
}

/* gate and up of m rows of x into gu [m, 2I] (f32; rounded to bf16 in place when r16), then the activation into ad (bf16
 * when a16) */
static void gate_act(const vc_backend *B, const float *x, int64_t m, const vc_tensor *Wg, float *gu, void *ad, int a16,
                     int r16, int kind) {
    int64_t I = Wg->shape[0], H = Wg->shape[1];
    B->gemm(0, 1, m, 2 * I, H, 1.0f, x, H, Wg->data, H, 0.0f, gu, 2 * I);
    if (r16) B->round_bf16(gu, gu, 2 * m * I);
    if (a16) B->act_mul_fwd_bf16(ad, gu, gu + I, m * I, I, 2 * I, kind);
    else B->act_mul_fwd(ad, gu, gu + I, m * I, I, 2 * I, kind);
}

/* the down projection of m activation rows ad (bf16 when a16) into y [m, N] (beta 1: the bias already in y) */
static void down_proj(const vc_backend *B, const void *ad, int a16, int64_t m, const vc_tensor *W, float beta, float *y) {
    int64_t N = W->shape[0], I = W->shape[1];
    if (a16) B->gemm_b16(0, 1, m, N, I, 1.0f, ad, 1, I, W->data, 0, I, beta, y, N);
    else B->gemm(0, 1, m, N, I, 1.0f, (const float *)ad, I, W->data, I, beta, y, N);
}

/* the tape-less gated MLP of x [M, H] in blocks of R rows: y [M, N] (shape: x's with N last), or NULL (no memory) */
static vc_tensor *gated_mlp_rows(vc_graph *g, const vc_tensor *x, const vc_tensor *Wg, int kind, const vc_tensor *W,
                                 const vc_tensor *b, int64_t M, int64_t R, int a16) {
    const vc_backend *B = vc_be();
    int64_t I = Wg->shape[0], H = Wg->shape[1], N = W->shape[0], shape[VC_MAX_DIMS];
    float *gu = vc_graph_dalloc(g, sizeof(float) * (size_t)(2 * R * I), 0);
    void *ad = gu ? vc_graph_dalloc(g, (a16 ? 2 : 4) * (size_t)(R * I), 0) : NULL;
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = N;
    vc_tensor *yt = ad ? vc_tensor_new(g, x->ndim, shape, 0) : NULL;
    if (!yt) return NULL;
    float *y = yt->data, beta = b ? 1.0f : 0.0f;
    if (b) B->rows_copy(y, N, b->data, 0, M, N, 1, 0);
    for (int64_t r0 = 0; r0 < M; r0 += R) {
        int64_t m = M - r0 < R ? M - r0 : R;
        gate_act(B, x->data + r0 * H, m, Wg, gu, ad, a16, 0, kind);
        down_proj(B, ad, a16, m, W, beta, y + r0 * N);
    }
    return yt;
}

vc_tensor *vc_op_gated_mlp(vc_graph *g, vc_tensor *x, vc_tensor *Wg, vc_tensor *Wu, int kind, vc_tensor *W, vc_tensor *b,
                           int bf16_act) {
    if (!x || !W || !vc_gate_up_adjacent(Wg, Wu)) return NULL;
    const vc_backend *B = vc_be();
    int64_t I = Wg->shape[0], H = Wg->shape[1], N = W->shape[0], M = x->n / H;
    if (x->shape[x->ndim - 1] != H || W->ndim != 2 || W->shape[1] != I) return NULL;
    int a16 = bf16_act && vc_matmul_precision() == VC_PREC_BF16 && B->act_mul_fwd_bf16 && B->gemm_b16;
    int r16 = gu_bf16(), s16 = r16 && B->gemm_c16 && B->act_mul16_fwd && B->act_mul16_bwd; /* rounded; stored bf16 */
    int64_t R = mlp_rows();
    if (R > 0 && R < M && !r16 && !vc_graph_grad_enabled(g)) /* blocks of rows (no tape node: nothing to keep) */
        return gated_mlp_rows(g, x, Wg, kind, W, b, M, R, a16);
    float *gu = vc_graph_dalloc(g, (s16 ? 2 : 4) * (size_t)(2 * M * I), 0);
    void *ad = gu ? vc_graph_dalloc(g, (a16 ? 2 : 4) * (size_t)(M * I), 0) : NULL;
    int64_t shape[VC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = I;
    vc_tensor *a = ad ? vc_tensor_wrap(g, ad, x->ndim, shape) : NULL; /* bf16 storage when a16: only the down projection's node reads it */
    shape[x->ndim - 1] = N;
    vc_tensor *y = a ? vc_tensor_new(g, x->ndim, shape, 0) : NULL;
    if (!y) return NULL;
    if (s16) {
        const uint16_t *g16 = (const uint16_t *)gu;
        B->gemm_c16(M, 2 * I, H, x->data, Wg->data, gu);
        B->act_mul16_fwd(ad, a16, g16, g16 + I, M * I, I, 2 * I, kind);
    } else
        gate_act(B, x->data, M, Wg, gu, ad, a16, r16, kind);
    vc_tensor *in1[3] = { x, Wg, Wu };
    vc_node *n = vc_tape_push(g, gate_up_bw, a, 3, in1);
    if (n) {
        n->i[0] = kind;
        n->i[1] = s16;
        n->ptr[0] = gu;
    }
    if (b) B->rows_copy(y->data, N, b->data, 0, M, N, 1, 0);
    down_proj(B, ad, a16, M, W, b ? 1.0f : 0.0f, y->data);
    /* the down projection its own node (a linear's, a in bf16 or f32): its weight gradient is written before gate's and
     * up's, as with three linears (ZeRO-2 reduces and frees the layer above's gradients at the first node of a layer's
     * backward: in one node, all three would be live beside them) */
    vc_tape_linear(g, y, a, W, b, a16);
    return y;
}
