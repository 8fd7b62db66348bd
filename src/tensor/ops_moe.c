/* Mixture of experts: routing plus the routed experts' gated MLPs as one op. The routed choices are
 * grouped by expert on the backend (moe_group), each projection runs as one grouped GEMM over every
 * expert's rows (gemm_rows_grouped / gemm_wgrad_grouped), outputs are combined with the routing weights.
 * Nothing comes back to the host, so a decode step with MoE layers is still one CUDA graph. Backward
 * recomputes nothing; it keeps the gathered inputs and per-expert activations. LoRA adapters on the
 * experts (vc_moe_lora) add s (x A_e^T) B_e^T to each routed row's projections: two more grouped GEMMs
 * through rank r, never the [E, out, in] product, and their backward the same way. */
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
    vc_moe_lora lo;    /* adapters (tensors NULL: none) */
    vc_moe_bias bi;    /* biases (tensors NULL: none) */
    float *wr, *Xs, *ones; /* rd.scale_input: each grouped row's weight [R], its scaled input [R, H], ones [R] */
    int64_t r, rdn;    /* their ranks: gate_up's, down's */
    int64_t eg, ed;    /* their expert counts: E, or 1 when shared by the experts (Megatron-Bridge's) */
    int64_t *off1;     /* [2] {0, R} (backend): every routed row as one group, for a shared adapter */
    float *XA, *AA;    /* [R, r]: the gathered inputs through gate_up's A, the activations through down's A */
    float *wpre, *sc;  /* bi.scale: [T, K] the router's weights before the experts' scales, and those scales */
} moe_saved;

/* the gated activations as the grouped GEMMs take them: bf16 (a16 = 1) or f32 */
static const void *acts(const moe_saved *s, int *a16) {
    *a16 = s->A16 != NULL;
    return s->A16 ? (const void *)s->A16 : (const void *)s->A;
}

/* the gathered inputs likewise (scaled by the rows' weights with rd.scale_input: what the GEMMs read) */
static const void *inputs(const moe_saved *s, int *x16) {
    *x16 = s->X16 != NULL;
    return s->X16 ? (const void *)s->X16 : s->Xs ? (const void *)s->Xs : (const void *)s->X;
}

static void moe_bw_rows(vc_graph *g, vc_node *n, float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                        float *dw, float *dY, float *dA, float *dG, float *dU, float *dX, float *dR);

/* backward temporaries from vc_graph_temp, handed back at the end for later gradients */
static void moe_bw(vc_graph *g, vc_node *n) {
    vc_tensor *x = n->in[0], *Wg = n->in[2], *Wu = n->in[3], *Wd = n->in[4];
    moe_saved *s = n->saved;
    int64_t H = s->H, I = s->I, R = s->T * s->K;
    const float *dy = n->out->grad;
    float *dx = x->requires_grad ? vc_tensor_grad(g, x) : NULL;
    float *dWg = Wg && Wg->requires_grad ? vc_tensor_grad(g, Wg) : NULL;
    float *dWu = Wu->requires_grad ? vc_tensor_grad(g, Wu) : NULL;
    float *dWd = Wd->requires_grad ? vc_tensor_grad(g, Wd) : NULL;
    size_t bR = sizeof(float) * (size_t)R, bH = bR * (size_t)H, bI = bR * (size_t)I;
    float *dw = vc_graph_temp(g, bR, 1), *dY = vc_graph_temp(g, bH, 0), *dA = vc_graph_temp(g, bI, 0);
    float *dG = vc_graph_temp(g, bI, 0), *dU = vc_graph_temp(g, bI, 0), *dX = vc_graph_temp(g, bH, 0);
    int64_t rmax = s->r > s->rdn ? s->r : s->rdn;
    size_t br = bR * (size_t)(rmax ? rmax : 1);
    float *dR = rmax ? vc_graph_temp(g, br, 0) : NULL; /* [R, r]: gradients through an adapter's rank */
    if (dw && dY && dA && dG && dU && dX && (dR || !rmax))
        moe_bw_rows(g, n, dx, dWg, dWu, dWd, dy, dw, dY, dA, dG, dU, dX, dR);
    if (dR) vc_graph_release(g, dR, br);
    vc_graph_release(g, dw, bR);
    vc_graph_release(g, dY, bH);
    vc_graph_release(g, dA, bI);
    vc_graph_release(g, dG, bI);
    vc_graph_release(g, dU, bI);
    vc_graph_release(g, dX, bH);
}

/* an adapter's row groups: per expert, or every routed row as one group when it is shared (one expert's) */
static const int64_t *grp(const moe_saved *s, int64_t n_adapters) { return n_adapters == s->E ? s->off : s->off1; }

/* down's adapter: dA += s (dY Bd) Ad; Bd and Ad's gradients (dR: dY Bd) */
static void lora_down_bw(vc_graph *g, const moe_saved *s, const float *dY, float *dA, float *dR, const void *A,
                         int a16) {
    const vc_backend *B = vc_be();
    const vc_moe_lora *lo = &s->lo;
    int64_t H = s->H, I = s->I, R = s->T * s->K, r = s->rdn, Ed = s->ed;
    const int64_t *gd = grp(s, Ed);
    B->gemm_rows_grouped(0, Ed, gd, R, r, H, 1.0f, dY, 0, H, lo->down_b->data, 0.0f, dR, r);
    B->gemm_rows_grouped(0, Ed, gd, R, I, r, lo->scale, dR, 0, r, lo->down_a->data, 1.0f, dA, I);
    float *db = lo->down_b->requires_grad ? vc_tensor_grad(g, lo->down_b) : NULL;
    float *da = lo->down_a->requires_grad ? vc_tensor_grad(g, lo->down_a) : NULL;
    if (db) B->gemm_wgrad_grouped(Ed, gd, H, r, lo->scale, dY, H, s->AA, 0, r, 1.0f, db);
    if (da) B->gemm_wgrad_grouped(Ed, gd, r, I, lo->scale, dR, r, A, a16, I, 1.0f, da);
}

/* gate_up's adapter: dR = dG Bg + dU Bu, dX += s dR A; Bg, Bu and A's gradients */
static void lora_gu_bw(vc_graph *g, const moe_saved *s, const float *dG, const float *dU, float *dX, float *dR,
                       const void *X, int x16) {
    const vc_backend *B = vc_be();
    const vc_moe_lora *lo = &s->lo;
    int64_t H = s->H, I = s->I, R = s->T * s->K, r = s->r, EIr = s->eg * I * r, Eg = s->eg;
    const int64_t *gg = grp(s, Eg);
    B->gemm_rows_grouped(0, Eg, gg, R, r, I, 1.0f, dG, 0, I, lo->gu_b->data, 0.0f, dR, r);
    B->gemm_rows_grouped(0, Eg, gg, R, r, I, 1.0f, dU, 0, I, lo->gu_b->data + EIr, 1.0f, dR, r);
    B->gemm_rows_grouped(0, Eg, gg, R, H, r, lo->scale, dR, 0, r, lo->gu_a->data, 1.0f, dX, H);
    float *db = lo->gu_b->requires_grad ? vc_tensor_grad(g, lo->gu_b) : NULL;
    float *da = lo->gu_a->requires_grad ? vc_tensor_grad(g, lo->gu_a) : NULL;
    if (db) {
        B->gemm_wgrad_grouped(Eg, gg, I, r, lo->scale, dG, I, s->XA, 0, r, 1.0f, db);
        B->gemm_wgrad_grouped(Eg, gg, I, r, lo->scale, dU, I, s->XA, 0, r, 1.0f, db + EIr);
    }
    if (da) B->gemm_wgrad_grouped(Eg, gg, r, H, lo->scale, dR, r, X, x16, H, 1.0f, da);
}

/* an expert bias's gradient: its group's rows of d summed */
static void bias_bwd(vc_graph *g, const moe_saved *s, vc_tensor *b, const float *d, int64_t C) {
    float *db = b && b->requires_grad ? vc_tensor_grad(g, b) : NULL;
    if (db) vc_be()->moe_bias_bwd(db, d, s->off, s->E, C);
}

/* the experts' scales: their gradient (the unscaled weight times the weight's gradient, summed per expert), and the
 * weights' gradient through them (tmp: [R] scratch) */
static void expert_scale_bwd(vc_graph *g, const moe_saved *s, float *dw, float *tmp) {
    const vc_backend *B = vc_be();
    int64_t R = s->T * s->K;
    float *ds = s->bi.scale->requires_grad ? vc_tensor_grad(g, s->bi.scale) : NULL;
    if (ds) {
        B->mul(tmp, s->wpre, dw, R);
        B->embed_bwd(ds, tmp, s->idx, R, 1);
    }
    B->mul(dw, dw, s->sc, R);
}

/* the experts' backward over the grouped rows, then the scatter and the router's gradient */
static void moe_bw_rows(vc_graph *g, vc_node *n, float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                        float *dw, float *dY, float *dA, float *dG, float *dU, float *dX, float *dR) {
    vc_tensor *logits = n->in[1], *Wg = n->in[2], *Wu = n->in[3], *Wd = n->in[4];
    moe_saved *s = n->saved;
    const vc_backend *B = vc_be();
    int64_t H = s->H, I = s->I, E = s->E, R = s->T * s->K;
    int a16, x16;
    const void *A = acts(s, &a16), *X = inputs(s, &x16);
    /* dY goes to GEMMs alone unless the down projection's bias or adapter reads it: the backend may write it straight
     * into the bf16 copy they read (the same bits), held until the last of them */
    const float *cw = s->Xs ? s->ones : s->w;
    const int held_dy = !s->bi.down && !s->lo.down_a && B->moe_combine_bwd_held &&
                        B->moe_combine_bwd_held(dY, dw, dy, s->Y, cw, s->inv, s->T, s->K, H);
    if (!held_dy) B->moe_combine_bwd(dY, dw, dy, s->Y, cw, s->inv, s->T, s->K, H);
    if (s->sc) expert_scale_bwd(g, s, dw, dX); /* (dX: scratch until its GEMMs overwrite it) */
    bias_bwd(g, s, s->bi.down, dY, H);
    B->gemm_rows_grouped(0, E, s->off, R, I, H, 1.0f, dY, 0, H, Wd->data, 0.0f, dA, I);
    if (dWd) B->gemm_wgrad_grouped(E, s->off, H, I, 1.0f, dY, H, A, a16, I, 1.0f, dWd);
    if (held_dy) B->operand_hold(dY, R, H, 0);
    if (s->lo.down_a) lora_down_bw(g, s, dY, dA, dR, A, a16);
    /* gate's and up's gradients go to GEMMs alone unless biases or an adapter read them: the backend may write them
     * straight into the bf16 copies those GEMMs read (the same bits), held until the last of them */
    const int held = Wg && !s->bi.gate && !s->bi.up && !s->lo.gu_a && B->act_mul_bwd_held2 &&
                     B->act_mul_bwd_held2(dG, dU, dA, s->G, s->U, R * I, I, s->act | VC_ACT_WRITE);
    if (!held && Wg) B->act_mul_bwd(dG, dU, dA, s->G, s->U, R * I, I, I, s->act | VC_ACT_WRITE);
    else if (!held) { /* experts without a gate (Nemotron-H): A = act(U) */
        B->fill(dU, 0.0f, R * I);
        B->act_bwd(dU, dA, s->U, R * I, s->act);
    }
    bias_bwd(g, s, s->bi.gate, dG, I);
    bias_bwd(g, s, s->bi.up, dU, I);
    if (dWg) B->gemm_wgrad_grouped(E, s->off, I, H, 1.0f, dG, I, X, x16, H, 1.0f, dWg);
    if (dWu) B->gemm_wgrad_grouped(E, s->off, I, H, 1.0f, dU, I, X, x16, H, 1.0f, dWu);
    if (Wg) B->gemm_rows_grouped(0, E, s->off, R, H, I, 1.0f, dG, 0, I, Wg->data, 0.0f, dX, H);
    B->gemm_rows_grouped(0, E, s->off, R, H, I, 1.0f, dU, 0, I, Wu->data, Wg ? 1.0f : 0.0f, dX, H);
    if (held) { /* (before dG serves as scratch below) */
        B->operand_hold(dG, R, I, 0);
        B->operand_hold(dU, R, I, 0);
    }
    if (s->lo.gu_a) lora_gu_bw(g, s, dG, dU, dX, dR, X, x16);
    if (s->Xs) { /* scaled inputs: dX w to the tokens, (dX . x) to the weights (dY and dG are free again) */
        B->fill(dY, 0.0f, R * H);
        B->fill(dw, 0.0f, R);
        B->mul_rows_bwd(dY, dw, dX, s->X, s->wr, R, H);
        B->gather_rows(dG, dw, s->inv, R, 1); /* row order back to the choices' */
        dX = dY;
        dw = dG;
    }
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
    if (s->rd.replay_idx) { /* router replay: the recorded experts, checked, then the current router's weights */
        for (int64_t i = 0; i < R; i++)
            if (s->rd.replay_idx[i] < 0 || s->rd.replay_idx[i] >= s->E) {
                vc_graph_fail(g, vc_fail(VC_ERR_ARG, "moe: replayed expert %d of token %lld is not one of %lld",
                                         s->rd.replay_idx[i], (long long)(i / s->K), (long long)s->E));
                return -1;
            }
        B->h2d(s->idx, s->rd.replay_idx, sizeof(int32_t) * (size_t)R);
        s->rd.replay = 1;
    }
    B->route_fwd(s->w, s->idx, logits->data, s->T, &s->rd);
    if (s->bi.scale) { /* Gemma 4: each choice's weight times its expert's scale */
        s->wpre = vc_graph_dalloc(g, sizeof(float) * (size_t)R, 0);
        s->sc = vc_graph_dalloc(g, sizeof(float) * (size_t)R, 0);
        if (!s->wpre || !s->sc) return -1;
        B->d2d(s->wpre, s->w, sizeof(float) * (size_t)R);
        B->embed_fwd(s->sc, s->bi.scale->data, s->idx, R, 1);
        B->mul(s->w, s->wpre, s->sc, R);
    }
    if (s->rd.record_idx) B->d2h(s->rd.record_idx, s->idx, sizeof(int32_t) * (size_t)R);
    B->moe_group(s->off, s->tok, s->inv, s->idx, s->T, s->K, s->E);
    return 0;
}

vc_tensor *vc_op_moe(vc_graph *g, vc_tensor *x, vc_tensor *logits, vc_tensor *Wg, vc_tensor *Wu, vc_tensor *Wd,
                     int act, const vc_route_desc *rd) {
    return vc_op_moe_lora(g, x, logits, Wg, Wu, Wd, act, rd, NULL);
}

/* the adapters' shapes against the experts' [E, I, H] and [E, H, I] (Wg: the up projection's when there is no
 * gate); their ranks in *r (gate_up) and *rd */
static int lora_shapes(vc_graph *g, const vc_moe_lora *lo, const vc_tensor *Wg, int64_t *r, int64_t *rd) {
    int64_t E = Wg->shape[0], I = Wg->shape[1], H = Wg->shape[2];
    *r = lo->gu_a && lo->gu_a->ndim == 3 ? lo->gu_a->shape[1] : 0;
    *rd = lo->down_a && lo->down_a->ndim == 3 ? lo->down_a->shape[1] : 0;
    int ok = !lo->gu_a == !lo->gu_b && !lo->down_a == !lo->down_b && (*r > 0 || !lo->gu_a) && (*rd > 0 || !lo->down_a);
    int64_t eg = lo->gu_a ? lo->gu_a->shape[0] : 0, ed = lo->down_a ? lo->down_a->shape[0] : 0;
    if (ok && lo->gu_a) ok = (eg == E || eg == 1) && lo->gu_a->n == eg * *r * H && lo->gu_b->n == 2 * eg * I * *r;
    if (ok && lo->down_a) ok = (ed == E || ed == 1) && lo->down_a->n == ed * *rd * I && lo->down_b->n == ed * H * *rd;
    if (!ok) vc_graph_fail(g, vc_fail(VC_ERR_SHAPE, "moe: expert adapters do not fit %lld experts [%lld, %lld]",
                                      (long long)E, (long long)I, (long long)H));
    return ok ? 0 : -1;
}

vc_tensor *vc_op_moe_lora(vc_graph *g, vc_tensor *x, vc_tensor *logits, vc_tensor *Wg, vc_tensor *Wu, vc_tensor *Wd,
                          int act, const vc_route_desc *rd, const vc_moe_lora *lora) {
    return vc_op_moe_ex(g, x, logits, Wg, Wu, Wd, act, rd, lora, NULL);
}

/* the biases' shapes against the experts' [E, I, H] */
static int bias_shapes(vc_graph *g, const vc_moe_bias *b, const vc_tensor *Wg) {
    int64_t E = Wg->shape[0], I = Wg->shape[1], H = Wg->shape[2];
    int ok = (!b->gate || b->gate->n == E * I) && (!b->up || b->up->n == E * I) && (!b->down || b->down->n == E * H) &&
             (!b->scale || b->scale->n == E);
    if (!ok) vc_graph_fail(g, vc_fail(VC_ERR_SHAPE, "moe: expert biases do not fit %lld experts [%lld, %lld]",
                                      (long long)E, (long long)I, (long long)H));
    return ok ? 0 : -1;
}

/* rd.scale_input: each grouped row's weight (the choices' weights put in row order), the rows scaled by them */
static int scale_rows(vc_graph *g, moe_saved *s) {
    const vc_backend *B = vc_be();
    int64_t R = s->T * s->K;
    s->wr = vc_graph_dalloc(g, sizeof(float) * (size_t)R, 0);
    s->ones = vc_graph_dalloc(g, sizeof(float) * (size_t)R, 0);
    s->Xs = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * s->H), 0);
    if (!s->wr || !s->ones || !s->Xs) return -1;
    B->scatter_rows(s->wr, s->inv, s->w, 1, R, 1);
    B->fill(s->ones, 1.0f, R);
    B->mul_rows_fwd(s->Xs, s->X, s->wr, R, s->H);
    return 0;
}

vc_tensor *vc_op_moe_ex(vc_graph *g, vc_tensor *x, vc_tensor *logits, vc_tensor *Wg, vc_tensor *Wu, vc_tensor *Wd,
                        int act, const vc_route_desc *rd, const vc_moe_lora *lora, const vc_moe_bias *bias) {
    if (!x || !logits || !Wu || !Wd) return NULL; /* Wg NULL: experts without a gate, act(x Wu^T) Wd^T */
    const vc_backend *B = vc_be();
    moe_saved *s = vc_graph_alloc(g, sizeof *s, 1);
    if (!s) return NULL;
    if (!Wg && ((bias && bias->gate) || (lora && lora->gu_a))) {
        vc_graph_fail(g, vc_fail(VC_ERR_UNSUPPORTED, "moe: a gate's bias or gate_up adapter on experts without a gate"));
        return NULL;
    }
    if (bias) {
        if (bias_shapes(g, bias, Wu)) return NULL;
        if (bias->scale && rd->scale_input) {
            vc_graph_fail(g, vc_fail(VC_ERR_UNSUPPORTED, "moe: experts' scales with inputs the routing scales"));
            return NULL;
        }
        s->bi = *bias;
    }
    if (lora && (lora->gu_a || lora->down_a)) {
        if (rd->scale_input) {
            vc_graph_fail(g, vc_fail(VC_ERR_UNSUPPORTED, "moe: adapters on experts whose inputs the routing scales"));
            return NULL;
        }
        if (lora_shapes(g, lora, Wu, &s->r, &s->rdn)) return NULL;
        s->lo = *lora;
        s->eg = lora->gu_a ? lora->gu_a->shape[0] : 0;
        s->ed = lora->down_a ? lora->down_a->shape[0] : 0;
    }
    s->rd = *rd;
    s->act = act;
    s->E = Wu->shape[0];
    s->I = Wu->shape[1];
    s->H = Wu->shape[2];
    s->T = x->n / s->H;
    s->K = rd->top_k;
    int64_t R = s->T * s->K, H = s->H, I = s->I;
    if (moe_route(g, s, logits)) return NULL;
    if ((s->eg == 1 || s->ed == 1) && s->E > 1) { /* a shared adapter: all routed rows, one group */
        int64_t o1[2] = { 0, s->T * s->K };
        if (!(s->off1 = vc_graph_upload(g, o1, sizeof o1))) return NULL;
    }
    /* bf16 matmuls: the inputs and the gated activations, read only by GEMMs that round them to bf16 anyway,
     * are kept in bf16 (half their memory, the same bits; VERLC_BF16_ACT=0 keeps them f32 for comparisons) */
    const char *env = getenv("VERLC_BF16_ACT");
    int a16 = vc_matmul_precision() == VC_PREC_BF16 && B->act_mul_fwd_bf16 && B->gather_rows_bf16 && !(env && *env == '0') &&
              Wg; /* (ungated experts keep their activations in f32) */
    int x16 = a16 && !rd->scale_input; /* scaled inputs are made in f32 from the gathered f32 rows */
    if (x16) s->X16 = vc_graph_dalloc(g, 2 * (size_t)(R * H), 0);
    else s->X = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * H), 0);
    s->G = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0); /* (ungated: the backward's dG scratch) */
    s->U = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    if (a16) s->A16 = vc_graph_dalloc(g, 2 * (size_t)(R * I), 0);
    else s->A = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * I), 0);
    s->Y = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * H), 0);
    vc_tensor *y = vc_tensor_new(g, x->ndim, x->shape, 0);
    if ((!s->X && !s->X16) || !s->G || !s->U || (!s->A && !s->A16) || !s->Y || !y) return NULL;
    if (x16) B->gather_rows_bf16(s->X16, x->data, s->tok, R, H);
    else B->gather_rows(s->X, x->data, s->tok, R, H);
    if (rd->scale_input && scale_rows(g, s)) return NULL;
    const void *X = inputs(s, &x16);
    if (Wg) B->gemm_rows_grouped(1, s->E, s->off, R, I, H, 1.0f, X, x16, H, Wg->data, 0.0f, s->G, I);
    B->gemm_rows_grouped(1, s->E, s->off, R, I, H, 1.0f, X, x16, H, Wu->data, 0.0f, s->U, I);
    const vc_moe_lora *lo = &s->lo;
    int64_t r = s->r, rdn = s->rdn, EIr = s->eg * I * r;
    if (lo->gu_a) { /* G += s (X A^T) Bg^T, U likewise with Bu */
        if (!(s->XA = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * r), 0))) return NULL;
        B->gemm_rows_grouped(1, s->eg, grp(s, s->eg), R, r, H, 1.0f, X, x16, H, lo->gu_a->data, 0.0f, s->XA, r);
        B->gemm_rows_grouped(1, s->eg, grp(s, s->eg), R, I, r, lo->scale, s->XA, 0, r, lo->gu_b->data, 1.0f, s->G, I);
        B->gemm_rows_grouped(1, s->eg, grp(s, s->eg), R, I, r, lo->scale, s->XA, 0, r, lo->gu_b->data + EIr, 1.0f, s->U, I);
    }
    if (s->bi.gate) B->moe_bias_fwd(s->G, s->bi.gate->data, s->off, s->E, I);
    if (s->bi.up) B->moe_bias_fwd(s->U, s->bi.up->data, s->off, s->E, I);
    if (!Wg) B->act_fwd(s->A, s->U, R * I, act);
    else if (a16) B->act_mul_fwd_bf16(s->A16, s->G, s->U, R * I, I, I, act);
    else B->act_mul_fwd(s->A, s->G, s->U, R * I, I, I, act);
    int is16;
    const void *A = acts(s, &is16);
    B->gemm_rows_grouped(1, s->E, s->off, R, H, I, 1.0f, A, is16, I, Wd->data, 0.0f, s->Y, H);
    if (lo->down_a) { /* Y += s (A Ad^T) Bd^T */
        if (!(s->AA = vc_graph_dalloc(g, sizeof(float) * (size_t)(R * rdn), 0))) return NULL;
        B->gemm_rows_grouped(1, s->ed, grp(s, s->ed), R, rdn, I, 1.0f, A, is16, I, lo->down_a->data, 0.0f, s->AA, rdn);
        B->gemm_rows_grouped(1, s->ed, grp(s, s->ed), R, H, rdn, lo->scale, s->AA, 0, rdn, lo->down_b->data, 1.0f, s->Y, H);
    }
    if (s->bi.down) B->moe_bias_fwd(s->Y, s->bi.down->data, s->off, s->E, H);
    /* y[t] = sum_k w[t, k] Y[inv[t, k]] (w = 1 with scaled inputs), k ascending: a fixed summation order */
    B->moe_combine_fwd(y->data, s->Y, s->Xs ? s->ones : s->w, s->inv, s->T, s->K, H);
    vc_tensor *in[13] = { x, logits, Wg, Wu, Wd, lo->gu_a, lo->gu_b, lo->down_a, lo->down_b,
                          s->bi.gate, s->bi.up, s->bi.down, s->bi.scale };
    vc_node *n = vc_tape_push(g, moe_bw, y, 13, in);
    if (n) n->saved = s;
    return y;
}
