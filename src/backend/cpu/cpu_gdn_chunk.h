/* The chunked form's private parts shared by cpu_gdn_chunk.c (one decay per head, the products, the forward and
 * backward passes) and cpu_gdn_chunk_gk.c (a decay per key channel, Kimi Delta Attention): one chunk's arrays, the
 * backward's buffers, the products. */
#ifndef VC_CPU_GDN_CHUNK_H
#define VC_CPU_GDN_CHUNK_H
#include "cpu_gdn.h"

/* ---- one chunk ---- */
#define SUB 16       /* gk: rows of a block of the decayed products */
#define GK_SPAN 60.0 /* gk: a block's pairs factored through its first row while no channel decays past e^-60 in it */

typedef struct ck {
    vc_gdn_ctx *c;
    int h, kh, n, C, dk, dv, gk;
    int64_t t0, qs, vs; /* the chunk's first row; the row strides of q / k and of v / o */
    double *G, *dG;     /* [C] (gk: [C, dk]) */
    float *a, b;        /* [C] e^G_i (gk: [C, dk]); e^G_(n-1) */
    float *bv, *w;      /* gk: [dk] e^G_(n-1) (a's last row); [dk] a pair's decays */
    /* gk, a block of SUB rows I0.. against the rows before it (gk_block): [SUB, dk] its q and k rows times
     * e^(G_i - G_I0) and their gradients; [C, dk] the earlier k rows times e^(G_I0 - G_j), that transposed [dk, C],
     * its gradient */
    float *Qh, *Kh, *dQh, *dKh, *Kl, *KlT, *dKl;
    float *Kd, *KdT, *dKd; /* [SUB, dk] the block's own k rows times e^(G_i0 - G_j) (at least 1), transposed [dk, SUB] */
    /* [C, C]: E_ij (j <= i), P = Q K^T, KK = K K^T (j < i), A_ij = beta_i E_ij KK_ij (j < i), M = scale E o P
     * (j <= i), T = (I + A)^-1 */
    float *E, *P, *KK, *A, *M, *T;
    float *U, *W, *D, *Qa, *Kt; /* [C, dv], [C, dk], [C, dv], [C, dk] (scale a_i q_i), [C, dk] (K~) */
    float *KT, *Bv, *Bk;        /* [dk, C] K^T; [C, dv] beta V; [C, dk] beta a K */
} ck;

static inline const float *Qr(const ck *x, int i) { return x->c->q + (x->t0 + i) * x->qs + (int64_t)x->kh * x->dk; }
static inline const float *Kr(const ck *x, int i) { return x->c->k + (x->t0 + i) * x->qs + (int64_t)x->kh * x->dk; }
static inline const float *Vr(const ck *x, int i) { return x->c->v + (x->t0 + i) * x->vs + (int64_t)x->h * x->dv; }
static inline float beta_at(const ck *x, int i) { return x->c->beta[(x->t0 + i) * x->c->d->n_v_head + x->h]; }

static inline void axpy(float *y, float a, const float *x, int n) {
    for (int j = 0; j < n; j++) y[j] += a * x[j];
}

/* ---- the backward's buffers ---- */
typedef struct bwd_buf {
    float *dS, *dSn, *S0T, *dST; /* [dk, dv], [dk, dv], [dv, dk], [dv, dk] */
    float *dD, *dB1, *DT, *UT;   /* [C, dv], [C, dv], [dv, C], [dv, C] */
    float *dW, *dB2, *WT, *Y, *Z, *dQ, *dK; /* [C, dk] x 2, [dk, C], [C, dk] x 4 */
    float *R, *dA;               /* [C, C]: dP, then dA / dKK */
} bwd_buf;


/* ---- products (cpu_gdn_chunk.c): C = (acc ? C : 0) + sign A B, each element's terms in a fixed order; _tn: A^T;
 * _lo: A [n, n] lower triangular ---- */
void vc_ck_mm_nn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int K, int m,
                 float sign, int acc);
void vc_ck_mm_tn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int K, int m,
                 float sign, int acc);
void vc_ck_mm_nn_lo(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int m,
                    float sign, int acc);
void vc_ck_mm_tn_lo(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int n, int m,
                    float sign, int acc);
/* rows x cols at row stride ld into dst [cols, ldt] (columns beyond rows left as they are) */
void vc_ck_transpose(float *dst, int64_t ldt, const float *src, int64_t ld, int rows, int cols);
/* the backward's products of dO (cpu_gdn_chunk.c): dD = M^T dO + K~ dS, R = dO D^T, Y = D dS^T, Z = dO S0^T */
void vc_ck_out_mats(ck *x, const float *S0, const float *dO, bwd_buf *B);
/* ... and of the delta rule: dS_prev -= W^T dD, dW, dB1, dB2, dA */
void vc_ck_delta_mats(ck *x, bwd_buf *B);

/* ---- a decay per key channel (cpu_gdn_chunk_gk.c) ---- */
/* the chunk's decays, decayed products P and KK, M, A and scaled rows (Qa, K~, Bk, Bv) */
void vc_ck_prep_gk(ck *x);
/* the backward's parts: dO's (R becomes dP), the delta rule's (dA becomes dKK), the decayed products' (after both);
 * then dg from x->dG (each channel's reverse cumulative sum) */
void vc_ck_bwd_outputs_gk(ck *x, const float *S0, const float *dO, bwd_buf *B);
void vc_ck_bwd_delta_gk(ck *x, bwd_buf *B);
void vc_ck_pairs_bwd_gk(ck *x, bwd_buf *B);
#endif
