/* Kimi Delta Attention's decay per key channel in the chunked form on the CPU (d->gk; the algebra in cpu_gdn_chunk.c's
 * header): G_i, a_i and b are vectors over the key channels, and the decayed products P_ij = sum_l q_il k_jl
 * e^(G_il - G_jl) and KK_ij (j < i) are taken in blocks of SUB rows: against the earlier rows through the block's first
 * row i0, q_i e^(G_i - G_i0) . k_j e^(G_i0 - G_j) (every factor at most 1: no overflow whatever the decay), within the
 * block likewise while no channel decays past e^-GK_SPAN in it (factors up to e^GK_SPAN), else pair by pair. The
 * backward takes each factor's decay gradient as its value times its gradient. Every sum in a fixed order. */
#include "core/vmath.h"
#include "cpu_gdn_chunk.h"
#include <math.h>
#include <string.h>

static inline const float *gate_row(const ck *x, int i) {
    return x->c->g + ((x->t0 + i) * x->c->d->n_v_head + x->h) * (int64_t)x->dk;
}

/* x->w = e^(G_i - G_j) channel by channel (j <= i: every factor at most 1) */
static void pair_decay(ck *x, int i, int j) {
    const double *gi = x->G + (int64_t)i * x->dk, *gj = x->G + (int64_t)j * x->dk;
    for (int l = 0; l < x->dk; l++) x->w[l] = (float)(gi[l] - gj[l]);
    vc_exp_shift(x->w, x->w, x->dk, 0.0f);
}

/* sum over l of x[l] y[l] w[l], in vc_gdn_dot's lanes */
static inline float dot3(const float *x, const float *y, const float *w, int n) {
    float acc[VC_GDN_LANES] = { 0 };
    int j = 0;
    for (; j + VC_GDN_LANES <= n; j += VC_GDN_LANES)
        for (int l = 0; l < VC_GDN_LANES; l++) acc[l] += x[j + l] * y[j + l] * w[j + l];
    float s = vc_gdn_lanes_sum(acc);
    for (; j < n; j++) s += x[j] * y[j] * w[j];
    return s;
}


/* block [i0, i0 + m) of the chunk: Qh_i = q_i e^(G_i - G_i0), Kh_i = k_i e^(G_i - G_i0) (i in the block); against
 * its rows before i0 Kl_j = k_j e^(G_i0 - G_j) (j < i0) and KlT, so that P_ij = Qh_i . Kl_j, KK_ij = Kh_i . Kl_j
 * (products of factors at most 1); within the block, unless a channel decays past e^-GK_SPAN there (returns 0: its
 * pairs one by one instead), Kd_j = k_j e^(G_i0 - G_j) (j in the block: factors at most e^GK_SPAN) and KdT.
 * Called for i0 = 0, SUB, 2 SUB, ... in order: the rows before the previous block's i0 take its Kl times
 * e^(G_i0 - G_(i0 - SUB)), the others their own. */
static int block_safe(const ck *x, int i0, int m) {
    const double *Gr = x->G + (int64_t)i0 * x->dk, *Ge = x->G + (int64_t)(i0 + m - 1) * x->dk;
    int safe = 1;
    for (int l = 0; l < x->dk; l++) safe &= Gr[l] - Ge[l] <= GK_SPAN;
    return safe;
}

static int gk_block(ck *x, int i0, int m) {
    int dk = x->dk, C = x->C, p0 = i0 - SUB, safe = block_safe(x, i0, m);
    const double *Gr = x->G + (int64_t)i0 * dk;
    for (int i = 0; i < m; i++) {
        const double *Gi = x->G + (int64_t)(i0 + i) * dk;
        const float *q = Qr(x, i0 + i), *k = Kr(x, i0 + i);
        for (int l = 0; l < dk; l++) x->w[l] = (float)(Gi[l] - Gr[l]);
        vc_exp_shift(x->w, x->w, dk, 0.0f);
        for (int l = 0; l < dk; l++) x->Qh[i * dk + l] = q[l] * x->w[l], x->Kh[i * dk + l] = k[l] * x->w[l];
        if (!safe) continue;
        for (int l = 0; l < dk; l++) x->w[l] = (float)(Gr[l] - Gi[l]);
        vc_exp_shift(x->w, x->w, dk, 0.0f);
        for (int l = 0; l < dk; l++) x->KdT[l * SUB + i] = x->Kd[i * dk + l] = k[l] * x->w[l];
    }
    if (p0 > 0) {
        const double *Gp = x->G + (int64_t)p0 * dk;
        for (int l = 0; l < dk; l++) x->w[l] = (float)(Gr[l] - Gp[l]);
        vc_exp_shift(x->w, x->w, dk, 0.0f);
        for (int j = 0; j < p0; j++)
            for (int l = 0; l < dk; l++) x->KlT[l * C + j] = x->Kl[j * dk + l] *= x->w[l];
    }
    for (int j = p0 > 0 ? p0 : 0; j < i0; j++) {
        const double *Gj = x->G + (int64_t)j * dk;
        const float *k = Kr(x, j);
        for (int l = 0; l < dk; l++) x->w[l] = (float)(Gr[l] - Gj[l]);
        vc_exp_shift(x->w, x->w, dk, 0.0f);
        for (int l = 0; l < dk; l++) x->KlT[l * C + j] = x->Kl[j * dk + l] = k[l] * x->w[l];
    }
    return safe;
}

/* G, a, b, the decayed products P and KK, M, A and the scaled rows */
void vc_ck_prep_gk(ck *x) {
    const vc_gdn_desc *d = x->c->d;
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv, nd = d->no_delta;
    for (int i = 0; i < n; i++) {
        const float *g = gate_row(x, i);
        for (int l = 0; l < dk; l++) {
            double G = (i ? x->G[(int64_t)(i - 1) * dk + l] : 0.0) + g[l];
            x->G[(int64_t)i * dk + l] = G;
            x->a[(int64_t)i * dk + l] = expf((float)G);
        }
    }
    x->bv = x->a + (int64_t)(n - 1) * dk;
    for (int i0 = 0; i0 < n; i0 += SUB) { /* P and KK by blocks of SUB rows */
        int m = n - i0 < SUB ? n - i0 : SUB, safe = gk_block(x, i0, m);
        if (i0) { /* against the earlier rows */
            vc_ck_mm_nn(x->P + i0 * C, C, x->Qh, dk, x->KlT, C, m, dk, i0, 1.0f, 0);
            if (!nd) vc_ck_mm_nn(x->KK + i0 * C, C, x->Kh, dk, x->KlT, C, m, dk, i0, 1.0f, 0);
        }
        if (safe) { /* within the block (the upper triangle dropped below) */
            vc_ck_mm_nn(x->P + i0 * C + i0, C, x->Qh, dk, x->KdT, SUB, m, dk, m, 1.0f, 0);
            if (!nd) vc_ck_mm_nn(x->KK + i0 * C + i0, C, x->Kh, dk, x->KdT, SUB, m, dk, m, 1.0f, 0);
            continue;
        }
        for (int i = i0; i < i0 + m; i++) /* ... or pair by pair */
            for (int j = i0; j <= i; j++) {
                pair_decay(x, i, j);
                x->P[i * C + j] = dot3(Qr(x, i), Kr(x, j), x->w, dk);
                x->KK[i * C + j] = !nd && j < i ? dot3(Kr(x, i), Kr(x, j), x->w, dk) : 0.0f;
            }
    }
    for (int i = 0; i < n; i++) {
        float be = beta_at(x, i);
        for (int j = 0; j < n; j++) {
            float p = j <= i ? x->P[i * C + j] : 0.0f, kk = j < i && !nd ? x->KK[i * C + j] : 0.0f;
            x->P[i * C + j] = p, x->KK[i * C + j] = kk;
            x->M[i * C + j] = d->scale * p;
            x->A[i * C + j] = be * kk;
        }
    }
    for (int i = 0; i < n; i++) {
        const float *q = Qr(x, i), *k = Kr(x, i), *v = Vr(x, i), *ai = x->a + (int64_t)i * dk;
        float be = beta_at(x, i);
        pair_decay(x, n - 1, i); /* K~_i = e^(G_(n-1) - G_i) k_i */
        for (int l = 0; l < dk; l++) {
            x->Qa[i * dk + l] = d->scale * ai[l] * q[l];
            x->Kt[i * dk + l] = x->w[l] * k[l];
            x->Bk[i * dk + l] = be * ai[l] * k[l];
        }
        for (int j = 0; j < dv; j++) x->Bv[i * dv + j] = be * v[j];
    }
}

/* dO's part as bwd_outputs's, the pairs' terms left to gk_pairs_bwd (B->R becomes dP) */
void vc_ck_bwd_outputs_gk(ck *x, const float *S0, const float *dO, bwd_buf *B) {
    const vc_gdn_desc *d = x->c->d;
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv;
    double *dGl = x->dG + (int64_t)(n - 1) * dk;
    vc_ck_out_mats(x, S0, dO, B);
    for (int a = 0; a < dk; a++) /* b = a_(n-1): row a of S_n's b S0 term */
        dGl[a] += (double)x->bv[a] * vc_gdn_dot(S0 + (int64_t)a * dv, B->dS + (int64_t)a * dv, dv);
    for (int i = 0; i < n; i++) {
        const float *ai = x->a + (int64_t)i * dk, *Z = B->Z + i * dk, *Y = B->Y + i * dk;
        double *dGi = x->dG + (int64_t)i * dk;
        pair_decay(x, n - 1, i);
        for (int l = 0; l < dk; l++) { /* Qa = scale a q; K~ = e^(G_(n-1) - G_i) k */
            B->dQ[i * dk + l] = d->scale * ai[l] * Z[l];
            dGi[l] += (double)x->Qa[i * dk + l] * Z[l];
            B->dK[i * dk + l] = x->w[l] * Y[l];
            double t = (double)x->Kt[i * dk + l] * Y[l];
            dGl[l] += t;
            dGi[l] -= t;
        }
        for (int j = 0; j < n; j++) B->R[i * C + j] = j <= i ? d->scale * B->R[i * C + j] : 0.0f; /* dP */
    }
    for (int a = 0; a < dk; a++)
        for (int j = 0; j < dv; j++) B->dSn[a * dv + j] = x->bv[a] * B->dS[a * dv + j];
    vc_ck_mm_tn(B->dSn, dv, x->Qa, dk, dO, x->vs, dk, n, dv, 1.0f, 1);
}

/* the delta rule's part: Bv = beta V, Bk = beta a K, A_ij = beta_i KK_ij (B->dA becomes dKK) */
void vc_ck_bwd_delta_gk(ck *x, bwd_buf *B) {
    vc_gdn_ctx *c = x->c;
    int n = x->n, C = x->C, dk = x->dk, dv = x->dv, nv = c->d->n_v_head;
    vc_ck_delta_mats(x, B);
    for (int i = 0; i < n; i++) {
        float be = beta_at(x, i);
        const float *b1 = B->dB1 + i * dv, *b2 = B->dB2 + i * dk, *ai = x->a + (int64_t)i * dk, *k = Kr(x, i);
        double *dGi = x->dG + (int64_t)i * dk;
        if (c->dv) axpy(c->dv + (x->t0 + i) * x->vs + (int64_t)x->h * dv, be, b1, dv);
        float db = vc_gdn_dot(Vr(x, i), b1, dv) + dot3(k, b2, ai, dk);
        for (int l = 0; l < dk; l++) {
            B->dK[i * dk + l] += be * ai[l] * b2[l];
            dGi[l] += (double)be * ai[l] * k[l] * b2[l];
        }
        for (int j = 0; j < n; j++) {
            float dA = j < i ? B->dA[i * C + j] : 0.0f;
            db += dA * x->KK[i * C + j];
            B->dA[i * C + j] = be * dA;
        }
        if (c->dbeta) c->dbeta[(x->t0 + i) * nv + x->h] += db;
    }
}

/* the decayed products' gradients (dP in B->R, dKK in B->dA): P_ij = sum_l q_il k_jl w_l and KK_ij = sum_l k_il k_jl w_l
 * with w = e^(G_i - G_j), a term's decay gradient its value times its gradient, + on G_i, - on G_j. Blocks of SUB
 * rows against the earlier rows through gk_block's factors (their decays' gradients on G_i and G_j through G_i0),
 * pairs within a block one by one. */
void vc_ck_pairs_bwd_gk(ck *x, bwd_buf *B) {
    int n = x->n, C = x->C, dk = x->dk, nd = x->c->d->no_delta;
    for (int i0 = 0; i0 < n; i0 += SUB) {
        int m = n - i0 < SUB ? n - i0 : SUB, safe = gk_block(x, i0, m);
        double *dGr = x->dG + (int64_t)i0 * dk;
        const double *Gr = x->G + (int64_t)i0 * dk;
        const float *dP = B->R + i0 * C, *dKK = B->dA + i0 * C;
        /* dQh = dP [Kl; Kd], dKh = dKK [Kl; Kd]; dKl = dP^T Qh + dKK^T Kh over the rows before i0, dKd within */
        if (!i0 && !safe) continue; /* (the first block, pair by pair below) */
        for (int r = 0; r < (nd ? 1 : 2); r++) { /* P's terms (Qh), then KK's (Kh) */
            const float *dX = r ? dKK : dP, *H = r ? x->Kh : x->Qh;
            float *dH = r ? x->dKh : x->dQh;
            if (i0) {
                vc_ck_mm_nn(dH, dk, dX, C, x->Kl, dk, m, i0, dk, 1.0f, 0);
                vc_ck_mm_tn(x->dKl, dk, dX, C, H, dk, i0, m, dk, 1.0f, r);
            }
            if (safe) {
                vc_ck_mm_nn(dH, dk, dX + i0, C, x->Kd, dk, m, m, dk, 1.0f, i0 > 0);
                vc_ck_mm_tn(x->dKd, dk, dX + i0, C, H, dk, m, m, dk, 1.0f, r);
            }
        }
        for (int i = 0; i < m; i++) { /* Qh, Kh: e^(G_i - G_i0) */
            const double *Gi = x->G + (int64_t)(i0 + i) * dk;
            double *dGi = x->dG + (int64_t)(i0 + i) * dk;
            float *dq = B->dQ + (i0 + i) * dk, *dki = B->dK + (i0 + i) * dk;
            for (int l = 0; l < dk; l++) x->w[l] = (float)(Gi[l] - Gr[l]);
            vc_exp_shift(x->w, x->w, dk, 0.0f);
            for (int l = 0; l < dk; l++) {
                float gq = x->dQh[i * dk + l], gk = nd ? 0.0f : x->dKh[i * dk + l];
                dq[l] += gq * x->w[l];
                dki[l] += gk * x->w[l];
                double t = (double)gq * x->Qh[i * dk + l] + (double)gk * x->Kh[i * dk + l];
                dGi[l] += t;
                dGr[l] -= t;
            }
        }
        for (int j = 0; j < i0 + (safe ? m : 0); j++) { /* Kl, Kd: e^(G_i0 - G_j) */
            const double *Gj = x->G + (int64_t)j * dk;
            double *dGj = x->dG + (int64_t)j * dk;
            float *dkj = B->dK + j * dk;
            const float *g = j < i0 ? x->dKl + j * dk : x->dKd + (j - i0) * dk;
            const float *kv = j < i0 ? x->Kl + j * dk : x->Kd + (j - i0) * dk;
            for (int l = 0; l < dk; l++) x->w[l] = (float)(Gr[l] - Gj[l]);
            vc_exp_shift(x->w, x->w, dk, 0.0f);
            for (int l = 0; l < dk; l++) {
                dkj[l] += g[l] * x->w[l];
                double t = (double)g[l] * kv[l];
                dGr[l] += t;
                dGj[l] -= t;
            }
        }
    }
    for (int i0 = 0; i0 < n; i0 += SUB) { /* the blocks whose pairs go one by one */
        int m = n - i0 < SUB ? n - i0 : SUB, safe = block_safe(x, i0, m);
        for (int i = i0; i < i0 + m && !safe; i++) {
            const float *q = Qr(x, i), *k = Kr(x, i);
            float *dq = B->dQ + i * dk, *dki = B->dK + i * dk;
            double *dGi = x->dG + (int64_t)i * dk;
            for (int j = i0; j <= i; j++) {
                float rp = B->R[i * C + j], rk = !nd && j < i ? B->dA[i * C + j] : 0.0f;
                if (rp == 0.0f && rk == 0.0f) continue;
                pair_decay(x, i, j);
                const float *kj = Kr(x, j);
                float *dkj = B->dK + j * dk;
                double *dGj = x->dG + (int64_t)j * dk;
                for (int l = 0; l < dk; l++) {
                    float wk = x->w[l] * kj[l], u = rp * q[l] + rk * k[l];
                    dq[l] += rp * wk;
                    dki[l] += rk * wk;
                    dkj[l] += x->w[l] * u;
                    if (j < i) {
                        double t = (double)wk * u;
                        dGi[l] += t;
                        dGj[l] -= t;
                    }
                }
            }
        }
    }
}

