/* The chunked form of Gated DeltaNet's scalar-decay recurrence (and of its form without the delta rule: Mamba 2's SSD,
 * lightning attention) on the CPU. In a chunk of n rows that starts from state S0, with G_i the cumulative log decay
 * of its rows 0..i, a_i = e^G_i, E_ij = e^(G_i - G_j) (j <= i) and b = e^G_(n-1):
 *   delta rule: (I + A) [U | W] = [beta V | beta a K] with A_ij = beta_i E_ij (k_i . k_j) (j < i): T = (I + A)^-1 by
 *               forward substitution, [U | W] = T [beta V | beta a K]; the rows' deltas D = U - W S0 (the
 *               recurrence's beta (v - S^T k))
 *   no delta:   D = beta V
 *   O = scale (diag(a) Q S0 + (E o Q K^T) D), the product's lower triangle with its diagonal
 *   S_n = b S0 + K~^T D, K~_j = e^(G_(n-1) - G_j) k_j
 * the recurrence's values in other sums, as matrix products over the chunk instead of a pass over the state per row.
 * The backward walks the chunks from the last one carrying dS (the gradient of the state after the chunk) and
 * recomputes each chunk's quantities from its kept state. Each product sums its terms in a fixed order per element
 * (mm; a triangular operand's zero blocks skipped) and each row dot runs vc_gdn_dot's lanes: the same bits on any
 * thread count and in any batch.
 * A decay per key channel (Kimi Delta Attention, d->gk): G_i, a_i and b are vectors over the key channels; E o (Q K^T)
 * and E o (K K^T) become decayed products (cpu_gdn_chunk_gk.c), diag(a) Q, K~ and beta a K scale channel by channel,
 * and S_n = diag(b) S0 + K~^T D; the rest is this file's. */
#include "cpu_gdn_chunk.h"
#include <math.h>
#include <string.h>

/* ---- products: C[i, j] = (acc ? C[i, j] : 0) + sum over l of (sign a(i, l)) B[l, j] for i < n, j < m, the terms in l
 * order; a(i, l) = A[i lda + l] (mm_nn) or A[l lda + i] (mm_tn: A^T). Blocks of MB rows by NB columns in registers
 * (with AVX-512: 8 x 32 in 512-bit vectors), the edges in smaller blocks of the same code: each element's sum is the
 * same sequence of multiply-adds wherever it falls ---- */
#ifdef __AVX512F__
#define MB 8
#define NB 32
#define WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define MB 8
#define NB 16
#define WIDE
#endif

static inline __attribute__((always_inline)) void mm_block(float *restrict C, int64_t ldc, const float *restrict A,
                                                           int64_t ai, int64_t al, const float *restrict B, int64_t ldb,
                                                           int rows, int cols, int K, float sign, int acc) {
    float t[MB][NB];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) t[r][j] = acc ? C[r * ldc + j] : 0.0f;
    for (int l = 0; l < K; l++, A += al, B += ldb) {
        float av[MB];
        for (int r = 0; r < rows; r++) av[r] = sign * A[r * ai];
        for (int j = 0; j < cols; j++) {
            float bj = B[j];
            for (int r = 0; r < rows; r++) t[r][j] += av[r] * bj;
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) C[r * ldc + j] = t[r][j];
}

/* tri: a(i, l) is zero for l > i (TRI_LOWER: A lower triangular) or for l < i (TRI_UPPER: the transpose of a lower
 * triangular A): a block of rows skips those terms (zeros: the same sums) */
enum { TRI_NONE, TRI_LOWER, TRI_UPPER };

WIDE static void mm(float *restrict C, int64_t ldc, const float *restrict A, int64_t ai, int64_t al,
                    const float *restrict B, int64_t ldb, int n, int K, int m, float sign, int acc, int tri) {
    for (int i0 = 0; i0 < n; i0 += MB) {
        int rows = n - i0 < MB ? n - i0 : MB;
        int l0 = tri == TRI_UPPER && i0 < K ? i0 : 0, l1 = tri == TRI_LOWER && i0 + rows < K ? i0 + rows : K;
        for (int j0 = 0; j0 < m; j0 += NB) {
            float *c = C + i0 * ldc + j0;
            const float *a = A + i0 * ai + l0 * al, *b = B + l0 * ldb + j0;
            if (rows == MB && j0 + NB <= m) {
                if (ai == 1) mm_block(c, ldc, a, 1, al, b, ldb, MB, NB, l1 - l0, sign, acc); /* (A^T: rows side by side) */
                else mm_block(c, ldc, a, ai, 1, b, ldb, MB, NB, l1 - l0, sign, acc);
            } else
                mm_block(c, ldc, a, ai, al, b, ldb, rows, m - j0 < NB ? m - j0 : NB, l1 - l0, sign, acc);
        }
    }
}

void vc_ck_mm_nn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int K, int m,
                  float sign, int acc) {
    mm(C, ldc, A, lda, 1, B, ldb, n, K, m, sign, acc, TRI_NONE);
}

void vc_ck_mm_tn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int K, int m,
                  float sign, int acc) {
    mm(C, ldc, A, 1, lda, B, ldb, n, K, m, sign, acc, TRI_NONE);
}

/* the same with a lower triangular A [n, n] (mm_nn_lo: A; mm_tn_lo: A^T) */
void vc_ck_mm_nn_lo(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int m,
                     float sign, int acc) {
    mm(C, ldc, A, lda, 1, B, ldb, n, n, m, sign, acc, TRI_LOWER);
}

void vc_ck_mm_tn_lo(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int m,
                     float sign, int acc) {
    mm(C, ldc, A, 1, lda, B, ldb, n, n, m, sign, acc, TRI_UPPER);
}

void vc_ck_transpose(float *dst, int64_t ldt, const float *src, int64_t ld, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[c * ldt + r] = src[r * ld + c];
}

/* one decay per head: G, a, b, E, P, KK, M, A and the scaled rows */
static void prep_scalar(ck *x) {
    const vc_gdn_desc *d = x->c->d;
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv, nv = d->n_v_head, nd = d->no_delta;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += x->c->g[(x->t0 + i) * nv + x->h];
        x->G[i] = acc;
        x->a[i] = expf((float)acc);
    }
    x->b = x->a[n - 1];
    vc_ck_transpose(x->KT, C, Kr(x, 0), x->qs, n, dk);
    vc_ck_mm_nn(x->P, C, Qr(x, 0), x->qs, x->KT, C, n, dk, n, 1.0f, 0);
    if (!nd) vc_ck_mm_nn(x->KK, C, Kr(x, 0), x->qs, x->KT, C, n, dk, n, 1.0f, 0);
    for (int i = 0; i < n; i++) {
        float be = beta_at(x, i);
        for (int j = 0; j < n; j++) {
            float e = j <= i ? expf((float)(x->G[i] - x->G[j])) : 0.0f;
            x->E[i * C + j] = e;
            x->M[i * C + j] = d->scale * e * x->P[i * C + j]; /* (0 above the diagonal) */
            x->A[i * C + j] = j < i && !nd ? be * e * x->KK[i * C + j] : 0.0f;
        }
    }
    for (int i = 0; i < n; i++) {
        const float *q = Qr(x, i), *k = Kr(x, i), *v = Vr(x, i);
        float qa = d->scale * x->a[i], kt = x->E[(n - 1) * C + i], be = beta_at(x, i), ba = be * x->a[i];
        for (int l = 0; l < dk; l++) {
            x->Qa[i * dk + l] = qa * q[l];
            x->Kt[i * dk + l] = kt * k[l];
            x->Bk[i * dk + l] = ba * k[l];
        }
        for (int j = 0; j < dv; j++) x->Bv[i * dv + j] = be * v[j];
    }
}

/* the chunk's decays, products, solve and deltas from its starting state S0 */
static void chunk_prep(ck *x, const float *S0) {
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv;
    if (x->gk) vc_ck_prep_gk(x);
    else prep_scalar(x);
    if (x->c->d->no_delta) { /* D = beta V */
        memcpy(x->D, x->Bv, sizeof(float) * (size_t)n * (size_t)dv);
        return;
    }
    for (int i = 0; i < n; i++) { /* T = (I + A)^-1 by forward substitution: row i from the rows before it */
        float *t = x->T + i * C;
        for (int j = 0; j < n; j++) t[j] = j == i ? 1.0f : 0.0f;
        for (int j = 0; j < i; j++) axpy(t, -x->A[i * C + j], x->T + j * C, j + 1);
    }
    vc_ck_mm_nn_lo(x->U, dv, x->T, C, x->Bv, dv, n, dv, 1.0f, 0);
    vc_ck_mm_nn_lo(x->W, dk, x->T, C, x->Bk, dk, n, dk, 1.0f, 0);
    memcpy(x->D, x->U, sizeof(float) * (size_t)n * (size_t)dv);
    vc_ck_mm_nn(x->D, dv, x->W, dk, S0, dv, n, dk, dv, -1.0f, 1);
}

/* scratch of one task: the chunk's arrays (doubles first), then extra floats */
static float *chunk_alloc(ck *x, vc_gdn_ctx *c, size_t extra) {
    const vc_gdn_desc *d = c->d;
    size_t C = (size_t)d->ckpt, dk = (size_t)d->dk, dv = (size_t)d->dv, gw = d->gk ? dk : 1; /* (decays a row) */
    size_t gb = (C > SUB ? C : SUB) * dk; /* gk: each of the blocks' 10 arrays */
    size_t nf = C * gw + 6 * C * C + 3 * C * dv + 5 * C * dk + dk + extra + (d->gk ? 10 * gb : 0);
    double *G = vc_cpu_scratch(2 * C * gw + (nf + 1) / 2 + 1, sizeof(double), 0);
    if (!G) {
        c->fail = 1;
        return NULL;
    }
    *x = (ck){ .c = c, .C = (int)C, .dk = d->dk, .dv = d->dv, .gk = d->gk, .qs = (int64_t)d->n_k_head * d->dk,
               .vs = (int64_t)d->n_v_head * d->dv, .G = G, .dG = G + C * gw };
    float *f = (float *)(G + 2 * C * gw);
    x->a = f, f += C * gw;
    x->w = f, f += dk;
    x->E = f, f += C * C;
    x->P = f, f += C * C;
    x->KK = f, f += C * C;
    x->A = f, f += C * C;
    x->M = f, f += C * C;
    x->T = f, f += C * C;
    x->U = f, f += C * dv;
    x->D = f, f += C * dv;
    x->Bv = f, f += C * dv;
    x->W = f, f += C * dk;
    x->Qa = f, f += C * dk;
    x->Kt = f, f += C * dk;
    x->Bk = f, f += C * dk;
    x->KT = f, f += C * dk;
    if (d->gk) {
        float **gp[] = { &x->Qh, &x->Kh, &x->dQh, &x->dKh, &x->Kl, &x->KlT, &x->dKl, &x->Kd, &x->KdT, &x->dKd };
        for (int i = 0; i < 10; i++) *gp[i] = f, f += gb;
    }
    return f;
}

/* ---- forward ---- */
void vc_cpu_gdn_chunk_fwd(vc_gdn_ctx *c, int s, int h) {
    const vc_gdn_desc *d = c->d;
    int dk = d->dk, dv = d->dv, nv = d->n_v_head;
    int64_t SS = (int64_t)dk * dv, t0 = d->cu[s], L = d->cu[s + 1] - t0, C = d->ckpt;
    ck x;
    float *S = chunk_alloc(&x, c, (size_t)SS);
    if (!S) return;
    x.h = h, x.kh = h / (nv / d->n_k_head);
    /* a shared start (d->from): the tapped state of sequence from[s]; this sequence's own tap at row R */
    const float *init = d->from && d->from[s] >= 0 ? c->tap + ((int64_t)c->tap_of[d->from[s]] * nv + h) * SS : NULL;
    float *tap = c->tap_of && c->tap_of[s] >= 0 ? c->tap + ((int64_t)c->tap_of[s] * nv + h) * SS : NULL;
    int64_t R = vc_gdn_tap(L, C);
    if (init) memcpy(S, init, sizeof(float) * (size_t)SS);
    else memset(S, 0, sizeof(float) * (size_t)SS);
    for (int64_t c0 = 0; c0 < L; c0 += C) {
        if (tap && c0 == R) memcpy(tap, S, sizeof(float) * (size_t)SS);
        if (c->saved) memcpy(c->saved + ((c->base[s] + c0 / C) * nv + h) * SS, S, sizeof(float) * (size_t)SS);
        x.t0 = t0 + c0, x.n = (int)(L - c0 < C ? L - c0 : C);
        chunk_prep(&x, S);
        float *o = c->o + x.t0 * x.vs + (int64_t)h * dv;
        vc_ck_mm_nn(o, x.vs, x.Qa, dk, S, dv, x.n, dk, dv, 1.0f, 0); /* scale diag(a) Q S0 */
        vc_ck_mm_nn_lo(o, x.vs, x.M, C, x.D, dv, x.n, dv, 1.0f, 1); /* + (scale E o QK^T) D */
        if (c0 + C >= L && !(tap && R == L)) break; /* (no state leaves the sequence here) */
        if (x.gk)
            for (int a = 0; a < dk; a++) /* (row a of the state: its channel's decay) */
                for (int j = 0; j < dv; j++) S[a * dv + j] *= x.bv[a];
        else
            for (int64_t e = 0; e < SS; e++) S[e] *= x.b;
        vc_ck_mm_tn(S, dv, x.Kt, dk, x.D, dv, dk, x.n, dv, 1.0f, 1); /* S = b S0 + K~^T D */
    }
    if (tap && R == L) memcpy(tap, S, sizeof(float) * (size_t)SS); /* (its end: the state after the last chunk) */
    free(x.G);
}

/* ---- backward ---- */
/* the decay gradients of E-shaped terms: t on E_ij (j < i) adds t to dG_i and takes it from dG_j */
static inline void dG_pair(ck *x, int i, int j, double t) {
    x->dG[i] += t;
    x->dG[j] -= t;
}

/* dD = M^T dO + K~ dS; R = dO D^T; Y = D dS^T (dK~); Z = dO S0^T (dQa) */
void vc_ck_out_mats(ck *x, const float *S0, const float *dO, bwd_buf *B) {
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv;
    vc_ck_transpose(B->S0T, dk, S0, dv, dk, dv);
    vc_ck_transpose(B->dST, dk, B->dS, dv, dk, dv);
    vc_ck_transpose(B->DT, C, x->D, dv, n, dv);
    vc_ck_mm_nn(B->dD, dv, x->Kt, dk, B->dS, dv, n, dk, dv, 1.0f, 0);
    vc_ck_mm_tn_lo(B->dD, dv, x->M, C, dO, x->vs, n, dv, 1.0f, 1);
    vc_ck_mm_nn(B->R, C, dO, x->vs, B->DT, C, n, dv, n, 1.0f, 0);
    vc_ck_mm_nn(B->Y, dk, x->D, dv, B->dST, dk, n, dv, dk, 1.0f, 0);
    vc_ck_mm_nn(B->Z, dk, dO, x->vs, B->S0T, dk, n, dv, dk, 1.0f, 0);
}

/* dO's part: dD (from O and S_n), dP, dQ, dK and the decays of O's and S_n's terms; dS becomes the state's gradient
 * before the chunk but for the delta rule's -W^T dD */
static void bwd_outputs(ck *x, const float *S0, const float *dO, bwd_buf *B) {
    const vc_gdn_desc *d = x->c->d;
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv;
    int64_t SS = (int64_t)dk * dv;
    vc_ck_out_mats(x, S0, dO, B);
    double sd = 0; /* <S0, dS>: the gradient of b */
    for (int64_t e = 0; e < SS; e++) sd += (double)S0[e] * B->dS[e];
    x->dG[n - 1] += sd * x->b;
    for (int i = 0; i < n; i++) {
        float kt = x->E[(n - 1) * C + i];
        x->dG[i] += (double)d->scale * x->a[i] * vc_gdn_dot(Qr(x, i), B->Z + i * dk, dk);
        dG_pair(x, n - 1, i, kt * vc_gdn_dot(Kr(x, i), B->Y + i * dk, dk));
        for (int j = 0; j < n; j++) {
            float r = B->R[i * C + j];
            if (j < i) dG_pair(x, i, j, (double)d->scale * x->P[i * C + j] * r * x->E[i * C + j]);
            B->R[i * C + j] = j <= i ? d->scale * x->E[i * C + j] * r : 0.0f; /* dP */
        }
    }
    /* dQ = scale diag(a) Z + dP K; dK = dP^T Q + diag(kt) Y */
    for (int i = 0; i < n; i++)
        for (int l = 0; l < dk; l++) B->dQ[i * dk + l] = d->scale * x->a[i] * B->Z[i * dk + l];
    vc_ck_mm_nn_lo(B->dQ, dk, B->R, C, Kr(x, 0), x->qs, n, dk, 1.0f, 1);
    vc_ck_mm_tn_lo(B->dK, dk, B->R, C, Qr(x, 0), x->qs, n, dk, 1.0f, 0);
    for (int i = 0; i < n; i++) axpy(B->dK + i * dk, x->E[(n - 1) * C + i], B->Y + i * dk, dk);
    /* the state's gradient before the chunk: b dS + Qa^T dO (- W^T dD: the delta rule's) */
    for (int64_t e = 0; e < SS; e++) B->dSn[e] = x->b * B->dS[e];
    vc_ck_mm_tn(B->dSn, dv, x->Qa, dk, dO, x->vs, dk, n, dv, 1.0f, 1);
}

/* the delta rule's products, D = U - W S0 with [U | W] = T [beta V | beta a K]: the state's gradient before the chunk
 * less W^T dD; dU = dD, dW = -dD S0^T; [dB1 | dB2] = T^T [dU | dW]; dA = -(dB1 U^T + dB2 W^T) (j < i) */
void vc_ck_delta_mats(ck *x, bwd_buf *B) {
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv;
    vc_ck_mm_tn(B->dSn, dv, x->W, dk, B->dD, dv, dk, n, dv, -1.0f, 1);
    vc_ck_mm_nn(B->dW, dk, B->dD, dv, B->S0T, dk, n, dv, dk, -1.0f, 0);
    vc_ck_mm_tn_lo(B->dB1, dv, x->T, C, B->dD, dv, n, dv, 1.0f, 0);
    vc_ck_mm_tn_lo(B->dB2, dk, x->T, C, B->dW, dk, n, dk, 1.0f, 0);
    vc_ck_transpose(B->UT, C, x->U, dv, n, dv);
    vc_ck_transpose(B->WT, C, x->W, dk, n, dk);
    vc_ck_mm_nn(B->dA, C, B->dB1, dv, B->UT, C, n, dv, n, -1.0f, 0);
    vc_ck_mm_nn(B->dA, C, B->dB2, dk, B->WT, C, n, dk, n, -1.0f, 1);
}

/* the delta rule's part (one decay per head) */
static void bwd_delta(ck *x, bwd_buf *B) {
    vc_gdn_ctx *c = x->c;
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv, nv = c->d->n_v_head;
    vc_ck_delta_mats(x, B);
    for (int i = 0; i < n; i++) {
        float be = beta_at(x, i), ai = x->a[i];
        const float *b1 = B->dB1 + i * dv, *b2 = B->dB2 + i * dk;
        if (c->dv) axpy(c->dv + (x->t0 + i) * x->vs + (int64_t)x->h * dv, be, b1, dv); /* Bv = beta V */
        float tt = vc_gdn_dot(Kr(x, i), b2, dk), db = vc_gdn_dot(Vr(x, i), b1, dv) + ai * tt; /* Bk = beta a K */
        axpy(B->dK + i * dk, be * ai, b2, dk);
        x->dG[i] += (double)be * ai * tt;
        for (int j = 0; j < n; j++) { /* A_ij = beta_i E_ij KK_ij: dA_ij becomes dKK_ij */
            float dA = j < i ? B->dA[i * C + j] : 0.0f, e = x->E[i * C + j], kk = x->KK[i * C + j];
            float dkk = dA * be * e;
            db += dA * e * kk;
            if (j < i) dG_pair(x, i, j, (double)dkk * kk);
            B->dA[i * C + j] = dkk;
        }
        if (c->dbeta) c->dbeta[(x->t0 + i) * nv + x->h] += db;
    }
    /* KK = K K^T: dK += dKK K + dKK^T K */
    vc_ck_mm_nn_lo(B->dK, dk, B->dA, C, Kr(x, 0), x->qs, n, dk, 1.0f, 1);
    vc_ck_mm_tn_lo(B->dK, dk, B->dA, C, Kr(x, 0), x->qs, n, dk, 1.0f, 1);
}

/* the gradients of the chunk's inputs from dO (rows of dout) and dS (the state after it, replaced by the state's
 * before it); S0 the kept state */
static void chunk_bwd(ck *x, const float *S0, bwd_buf *B) {
    vc_gdn_ctx *c = x->c;
    const vc_gdn_desc *d = c->d;
    int n = x->n, dk = x->dk, dv = x->dv, nv = d->n_v_head;
    const float *dO = c->dout + x->t0 * x->vs + (int64_t)x->h * dv;
    chunk_prep(x, S0);
    for (int64_t i = 0; i < (int64_t)n * (x->gk ? dk : 1); i++) x->dG[i] = 0;
    if (x->gk) vc_ck_bwd_outputs_gk(x, S0, dO, B);
    else bwd_outputs(x, S0, dO, B);
    if (d->no_delta) /* D = beta V */
        for (int i = 0; i < n; i++) {
            if (c->dv) axpy(c->dv + (x->t0 + i) * x->vs + (int64_t)x->h * dv, beta_at(x, i), B->dD + i * dv, dv);
            if (c->dbeta) c->dbeta[(x->t0 + i) * nv + x->h] += vc_gdn_dot(Vr(x, i), B->dD + i * dv, dv);
        }
    else if (x->gk)
        vc_ck_bwd_delta_gk(x, B);
    else
        bwd_delta(x, B);
    if (x->gk) vc_ck_pairs_bwd_gk(x, B); /* (after the delta rule's: its dKK) */
    if (c->dg && x->gk) /* G_i = sum of g over rows 0..i, channel by channel */
        for (int l = 0; l < dk; l++) {
            double acc = 0;
            for (int i = n - 1; i >= 0; i--) {
                acc += x->dG[(int64_t)i * dk + l];
                c->dg[((x->t0 + i) * nv + x->h) * dk + l] += (float)acc;
            }
        }
    else if (c->dg) { /* G_i = sum of g over rows 0..i */
        double acc = 0;
        for (int i = n - 1; i >= 0; i--) {
            acc += x->dG[i];
            c->dg[(x->t0 + i) * nv + x->h] += (float)acc;
        }
    }
    for (int i = 0; c->dq && i < n; i++) axpy(c->dq + (x->t0 + i) * x->qs + (int64_t)x->kh * dk, 1.0f, B->dQ + i * dk, dk);
    for (int i = 0; c->dk && i < n; i++) axpy(c->dk + (x->t0 + i) * x->qs + (int64_t)x->kh * dk, 1.0f, B->dK + i * dk, dk);
    memcpy(B->dS, B->dSn, sizeof(float) * (size_t)dk * (size_t)dv);
}

void vc_cpu_gdn_chunk_bwd(vc_gdn_ctx *c, int s, int kh) {
    const vc_gdn_desc *d = c->d;
    int dk = d->dk, dv = d->dv, nv = d->n_v_head, r = nv / d->n_k_head;
    int64_t SS = (int64_t)dk * dv, t0 = d->cu[s], L = d->cu[s + 1] - t0, C = d->ckpt;
    size_t Cz = (size_t)C, extra = 4 * (size_t)SS + 4 * Cz * dv + 8 * Cz * dk + 2 * Cz * Cz;
    ck x;
    float *f = L ? chunk_alloc(&x, c, extra) : NULL;
    if (!f) return;
    bwd_buf B;
    float **slot[] = { &B.dS, &B.dSn, &B.S0T, &B.dST, &B.dD, &B.dB1, &B.DT, &B.UT, &B.dW, &B.dB2, &B.WT, &B.Y, &B.Z,
                       &B.dQ, &B.dK, &B.R, &B.dA };
    size_t len[] = { SS, SS, SS, SS, Cz * dv, Cz * dv, Cz * dv, Cz * dv, Cz * dk, Cz * dk, Cz * dk, Cz * dk, Cz * dk,
                     Cz * dk, Cz * dk, Cz * Cz, Cz * Cz };
    for (size_t i = 0; i < sizeof len / sizeof *len; f += len[i], i++) *slot[i] = f;
    x.kh = kh;
    int64_t R = vc_gdn_tap(L, C);
    for (int h = kh * r; h < (kh + 1) * r; h++) { /* a q/k head's value heads in order */
        x.h = h;
        /* the gradient reaching this sequence's tap from the sequences that start from it (c->tap: their sum) */
        const float *dtap = c->tap_of && c->tap_of[s] >= 0 ? c->tap + ((int64_t)c->tap_of[s] * nv + h) * SS : NULL;
        if (dtap && R == L) memcpy(B.dS, dtap, sizeof(float) * (size_t)SS);
        else memset(B.dS, 0, sizeof(float) * (size_t)SS);
        for (int64_t c0 = (L - 1) / C * C; c0 >= 0; c0 -= C) {
            x.t0 = t0 + c0, x.n = (int)(L - c0 < C ? L - c0 : C);
            chunk_bwd(&x, c->csaved + ((c->base[s] + c0 / C) * nv + h) * SS, &B);
            if (dtap && c0 == R) axpy(B.dS, 1.0f, dtap, (int)SS);
        }
        if (c->dinit && d->from[s] >= 0) /* the gradient of its starting state */
            memcpy(c->dinit + ((int64_t)s * nv + h) * SS, B.dS, sizeof(float) * (size_t)SS);
    }
    free(x.G);
}
