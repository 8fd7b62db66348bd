/* The chunked Gated DeltaNet's device code and host helpers shared by its forward (cuda_gdn_chunk.cu) and backward
 * (cuda_gdn_chunk_bwd.cu): two files so that the backward's largest kernel compiles beside the rest (it alone took
 * about 57 of the file's 83 s). Each includes this once; everything here is internal to it. */
#ifndef VC_CUDA_GDN_CHUNK_H
#define VC_CUDA_GDN_CHUNK_H
#include "cuda_internal.h"
#include "cuda_mma.h"
#include <stdlib.h>
#include <string.h>
#ifdef __CUDACC__
#pragma nv_diag_suppress 550 /* (CK_SETUP's row pointers a function does not read) */
#endif

namespace {

#define CK_THREADS 256
#define CK_MAX 128                        /* chunks up to this many rows (the C x C workspaces) */
#define CK_SMEM_MAX (200 * 1024)          /* the state passes' shared memory */
#define CK_WS_BUDGET ((size_t)1 << 30)    /* the per-block workspaces of the parallel launches */

enum { TRI_NONE, TRI_LOWER, TRI_UPPER };

/* C[i ldc + j] = (acc ? C : 0) + sum over l (ascending) of sign a(i, l) b(l, j), i < n, j < m, l < K, with
 * a(i, l) = A[i ai + l al], b(l, j) = B[l bl + j bj]; TRI_LOWER: a is zero for l > i, TRI_UPPER: for l < i (the
 * slices of such terms a tile of rows does not need are skipped; others are added as zeros). Called by the whole
 * block (CK_THREADS threads, barriers inside). Tiles of TM x TN elements, each thread 4 x 4 of them in registers,
 * the operands staged through shared memory CK_TK terms at a time (tiles as tall as the columns are few: the state
 * passes' narrow column groups keep every thread busy). Each element's terms are added in l order whatever the
 * tiling. C must not overlap A or B. */
/* terms of the stage: 32 in the parallel launches, 16 in the state passes, whose dynamic shared memory (the state's
 * columns, K~, Qa) leaves no room for the larger stage at two blocks a multiprocessor; as two slices of half as many
 * (the next one copied while the other is multiplied). The same terms in the same order whatever the slices: the same
 * bits. */
#define CK_TK_PAR 32
#define CK_TK_STATE 16
#ifndef CK_LDG
#define CK_LDG 4 /* a thread's loads from shared memory in flight at once */
#endif
/* the tile loops are called, not inlined into each product's call site (inlined, the two files took 58 s to compile
 * and the kernels' own values spilled around them; called, 11 s, and the loops spill nothing) */
#ifdef __CUDACC__
#define CK_NOINLINE __noinline__
#else
#define CK_NOINLINE __attribute__((noinline))
#endif
#define CK_STAGE(TK) ((TK) * (256 + 8) + (TK) * (64 + 8)) /* (two slices of TK / 2 terms: A^T's and B's, widest) */

/* a slice of one operand into dst[l][x] (pitch ld): element (x, l) = src[(x0 + x) xs + (l0 + l) ls], zero for
 * x0 + x >= nx or l >= kk; X rows x, TK terms l, a thread's N elements, consecutive threads along the unit stride.
 * From global memory (async) each element is a 4-byte cp.async (zeros by its src-size outside: nothing read, no
 * register held), so the slice lands while the one before is multiplied; the caller commits. From shared memory (the
 * state passes' K~, Qa and state columns) loads and stores G at a time, a group's loads issued before its first store
 * (src may be where dst is not: a store waiting on each load cost a latency an element); the loops are not unrolled
 * (unrolled, each element's 64-bit address was hoisted out of the slice loop and spilled). */
template <int X, int TK, int N, int G>
__device__ __forceinline__ void bmm_stage(float *dst, int ld, const float *src, int64_t xs, int64_t ls, int x0, int nx,
                                          int l0, int kk, int async) {
    const int t = threadIdx.x;
    if (async) {
#pragma unroll 1
        for (int u = 0; u < N; u++) {
            const int e = t + u * CK_THREADS, x = ls == 1 ? e / TK : e % X, l = ls == 1 ? e % TK : e / X;
            const bool in = x0 + x < nx && l < kk;
            if (X * TK % CK_THREADS == 0 || e < X * TK) /* (a slice of fewer elements than threads) */
                vc_cp4z(dst + l * ld + x, in ? src + (x0 + x) * xs + (l0 + l) * ls : src, in);
        }
        return;
    }
#pragma unroll 1
    for (int u0 = 0; u0 < N; u0 += G) {
        float r[G];
#pragma unroll
        for (int u = 0; u < G; u++) {
            const int e = t + (u0 + u) * CK_THREADS, x = ls == 1 ? e / TK : e % X, l = ls == 1 ? e % TK : e / X;
            r[u] = x0 + x < nx && l < kk ? src[(x0 + x) * xs + (l0 + l) * ls] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < G; u++) {
            const int e = t + (u0 + u) * CK_THREADS, x = ls == 1 ? e / TK : e % X, l = ls == 1 ? e % TK : e / X;
            if (X * TK % CK_THREADS == 0 || e < X * TK) dst[l * ld + x] = r[u];
        }
    }
}

/* the terms [lo, hi) rows i0 .. i1 - 1 of a triangular factor need (TRI_UPPER: none below i0; TRI_LOWER: none from
 * i1 on; the others are zeros) */
__device__ __forceinline__ int tri_lo(int tri, int i0, int K) { return tri == TRI_UPPER && i0 < K ? i0 : 0; }
__device__ __forceinline__ int tri_hi(int tri, int i1, int K) { return tri == TRI_LOWER && i1 < K ? i1 : K; }

/* a tile's terms [lo, hi) in slices of TKS, double-buffered in stage (A^T's slice [TKS][LA], then B's [TKS][LB]):
 * slice s + 1 is issued before slice s is multiplied (mul(As, Bs, kk)), a barrier after each product */
template <int TM, int TN, int TKS, int LA, int LB, class Mul>
__device__ __forceinline__ void bmm_slices(float *stage, const float *A, int64_t ai, int64_t al, const float *B,
                                           int64_t bl, int64_t bj, int i0, int n, int j0, int m, int lo, int hi,
                                           Mul mul) {
    /* a thread's elements of a slice (B's of a narrow tile's short slice: fewer than the threads) */
    constexpr int NA = (TM * TKS + CK_THREADS - 1) / CK_THREADS, NB = (TN * TKS + CK_THREADS - 1) / CK_THREADS;
    constexpr int GA = NA < CK_LDG ? NA : CK_LDG, GB = NB < CK_LDG ? NB : CK_LDG, SB = TKS * (LA + LB);
    static_assert(NA % GA == 0 && NB % GB == 0, "whole groups a thread");
    const int ga = __isGlobal(A), gb = __isGlobal(B), ns = hi > lo ? (hi - lo + TKS - 1) / TKS : 0;
    const auto issue = [&](int s) {
        const int l0 = lo + s * TKS, kk = hi - l0 < TKS ? hi - l0 : TKS;
        float *As = stage + (s & 1) * SB;
        bmm_stage<TM, TKS, NA, GA>(As, LA, A, ai, al, i0, n, l0, kk, ga);
        bmm_stage<TN, TKS, NB, GB>(As + TKS * LA, LB, B, bj, bl, j0, m, l0, kk, gb);
        vc_cp_commit();
    };
    if (ns) issue(0);
    for (int s = 0; s < ns; s++) {
        if (s + 1 < ns) {
            issue(s + 1); /* (into the buffer the last barrier freed) */
            vc_cp_wait<1>();
        } else
            vc_cp_wait<0>();
        __syncthreads();
        const int l0 = lo + s * TKS;
        mul(stage + (s & 1) * SB, stage + (s & 1) * SB + TKS * LA, hi - l0 < TKS ? hi - l0 : TKS);
        __syncthreads();
    }
}

/* C[i ldc + j] (= or +=) a product by CUDA cores: each thread 4 x 4 elements of the tile in registers, fma in l
 * order; CK_TK terms of stage: two slices of CK_TK / 2 */
template <int TN, int CK_TK>
__device__ CK_NOINLINE void bmm_tiles(float *stage, float *C, int64_t ldc, const float *A, int64_t ai, int64_t al, const float *B,
                          int64_t bl, int64_t bj, int n, int K, int m, float sign, int acc, int tri) {
    constexpr int TM = CK_THREADS * 16 / TN, LA = TM + 4, LB = TN + 4; /* (rows padded: 16-byte aligned, fewer conflicts) */
    const int tx = threadIdx.x % (TN / 4), ty = threadIdx.x / (TN / 4);
    for (int i0 = 0; i0 < n; i0 += TM)
        for (int j0 = 0; j0 < m; j0 += TN) {
            const int lo = tri_lo(tri, i0, K), hi = tri_hi(tri, i0 + TM, K);
            float s[4][4];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    int i = i0 + ty * 4 + r, j = j0 + tx * 4 + c;
                    s[r][c] = acc && i < n && j < m ? C[i * ldc + j] : 0.0f;
                }
            bmm_slices<TM, TN, CK_TK / 2, LA, LB>(stage, A, ai, al, B, bl, bj, i0, n, j0, m, lo, hi,
                                                  [&](const float *As, const float *Bs, int kk) {
                for (int l = 0; l < kk; l++) {
                    float4 a = *(const float4 *)&As[l * LA + ty * 4], b = *(const float4 *)&Bs[l * LB + tx * 4];
                    float av[4] = { sign * a.x, sign * a.y, sign * a.z, sign * a.w }, bv[4] = { b.x, b.y, b.z, b.w };
#pragma unroll
                    for (int r = 0; r < 4; r++)
#pragma unroll
                        for (int c = 0; c < 4; c++) s[r][c] = fmaf(av[r], bv[c], s[r][c]);
                }
            });
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    int i = i0 + ty * 4 + r, j = j0 + tx * 4 + c;
                    if (i < n && j < m) C[i * ldc + j] = s[r][c];
                }
        }
    __syncthreads(); /* (the stage free for the next product) */
}

/* bmm_tiles on the tensor cores (VERLC_CUDA_GDN_TC, on by default): the same tiles and staged slices, each warp's 16 x 32
 * (or 32 x 16) part of a tile as mma.sync m16n8k8 fragments, every f32 operand split into two TF32 (hi + lo) and
 * each group of 8 terms taken as lo hi' + hi lo' + hi hi' (3xTF32: within about 2^-21 of the product where the CUDA
 * cores' fma rounds at 2^-24; the lo lo' term left out). Groups of 8 terms start at multiples of 8 whatever the tile
 * (slices and triangular bounds are multiples of 8), so an element's bits do not depend on the tiling: the same on
 * any batch (the state passes' column groups narrow with fewer sequences). Slices staged with pitches of 8 modulo 32
 * floats: a fragment's 32 loads hit 32 banks. */
template <int TN, int CK_TK>
__device__ CK_NOINLINE void bmm_tiles_tc(float *stage, float *C, int64_t ldc, const float *A, int64_t ai, int64_t al,
                             const float *B, int64_t bl, int64_t bj, int n, int K, int m, float sign, int acc, int tri) {
    constexpr int TM = CK_THREADS * 16 / TN, LA = TM + 8, LB = TN + 8, TKS = CK_TK / 2;
    constexpr int WN = TN / 8 < 4 ? TN / 8 : 4, WM = 4 / WN, WX = TN / (8 * WN); /* a warp's n- and m-tiles; warps across */
    static_assert(WX * (TM / (16 * WM)) == CK_THREADS / 32 && TKS % 8 == 0, "8 warps cover a tile in k-groups of 8");
    static_assert((size_t)2 * TKS * (LA + LB) <= CK_STAGE(CK_TK), "stage");
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const int wm0 = warp / WX * 16 * WM, wn0 = warp % WX * 8 * WN;
    for (int i0 = 0; i0 < n; i0 += TM)
        for (int j0 = 0; j0 < m; j0 += TN) {
            const int lo = tri_lo(tri, i0, K), hi = tri_hi(tri, i0 + TM, K);
            float s[WM][WN][4];
            const auto each = [&](auto f) { /* f(sum, its row, its column) for each of the warp's sums */
#pragma unroll
                for (int mi = 0; mi < WM; mi++)
#pragma unroll
                    for (int ni = 0; ni < WN; ni++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            f(s[mi][ni][e], i0 + wm0 + mi * 16 + g + (e >> 1) * 8, j0 + wn0 + ni * 8 + 2 * t + (e & 1));
            };
            each([&](float &v, int i, int j) { v = acc && i < n && j < m ? C[i * ldc + j] : 0.0f; });
            bmm_slices<TM, TN, TKS, LA, LB>(stage, A, ai, al, B, bl, bj, i0, n, j0, m, lo, hi,
                                            [&](const float *As, const float *Bs, int kk) {
                for (int k8 = 0; k8 < kk; k8 += 8) { /* (terms past kk staged as zeros) */
                    uint32_t ah[WM][4], al_[WM][4], bh[WN][2], bl_[WN][2];
#pragma unroll
                    for (int mi = 0; mi < WM; mi++) {
                        const float *a = As + (k8 + t) * LA + wm0 + mi * 16 + g;
                        const float v[4] = { a[0], a[8], a[4 * LA], a[4 * LA + 8] };
#pragma unroll
                        for (int r = 0; r < 4; r++) vc_tf32_split(sign * v[r], ah[mi][r], al_[mi][r]);
                    }
#pragma unroll
                    for (int ni = 0; ni < WN; ni++) {
                        const float *b = Bs + (k8 + t) * LB + wn0 + ni * 8 + g;
                        vc_tf32_split(b[0], bh[ni][0], bl_[ni][0]);
                        vc_tf32_split(b[4 * LB], bh[ni][1], bl_[ni][1]);
                    }
                    vc_mma_tf32x3<WM, WN>(s, ah, al_, bh, bl_);
                }
            });
            each([&](float v, int i, int j) {
                if (i < n && j < m) C[i * ldc + j] = v;
            });
        }
    __syncthreads(); /* (the stage free for the next product) */
}

/* the tensor-core switch of the block's products (ck_args.tc, set by ck_begin at a kernel's start) */
__device__ __forceinline__ int &ck_tc_flag() {
    __shared__ int tc;
    return tc;
}

/* the block's staging area of TK-term slices (one a kernel and TK): free between products */
template <int TK>
__device__ __forceinline__ float *ck_stage() {
    __shared__ __align__(16) float stage[CK_STAGE(TK)];
    return stage;
}

template <int TK>
__device__ void bmm_k(float *C, int64_t ldc, const float *A, int64_t ai, int64_t al, const float *B, int64_t bl,
                      int64_t bj, int n, int K, int m, float sign, int acc, int tri) {
    /* the parallel launches' stage is the one their solve shares (ck_stage); the state passes' is declared here, as
     * before (through the accessor their spills grew from 60 to 132 bytes) */
    float *stage;
    if constexpr (TK == CK_TK_PAR) {
        stage = ck_stage<TK>();
    } else {
        __shared__ __align__(16) float own[CK_STAGE(TK)];
        stage = own;
    }
    if (ck_tc_flag()) {
        if (m <= 16) bmm_tiles_tc<16, TK>(stage, C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
        else if (m <= 32) bmm_tiles_tc<32, TK>(stage, C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
        else bmm_tiles_tc<64, TK>(stage, C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
    } else if (m <= 16) bmm_tiles<16, TK>(stage, C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
    else if (m <= 32) bmm_tiles<32, TK>(stage, C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
    else bmm_tiles<64, TK>(stage, C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
}
/* the parallel launches' products (the state passes call bmm_k<CK_TK_STATE>) */
__device__ __forceinline__ void bmm(float *C, int64_t ldc, const float *A, int64_t ai, int64_t al, const float *B,
                                    int64_t bl, int64_t bj, int n, int K, int m, float sign, int acc, int tri) {
    bmm_k<CK_TK_PAR>(C, ldc, A, ai, al, B, bl, bj, n, K, m, sign, acc, tri);
}

/* ---- arguments and chunk geometry ---- */
struct ck_args {
    const int64_t *cu;
    int n_seq, nk, nv, dk, dv, C, no_delta, cw, ncg, gk; /* gk: a decay per key channel (g [T, nv, dk]) */
    int tc; /* products on the tensor cores (bmm_tiles_tc) */
    float scale;
    int64_t nc, ws_floats;
    const float *q, *k, *v, *g, *beta, *dout;
    float *o, *states; /* states [nc, nv, dk, dv]: the state before each chunk (the kept states, or scratch) */
    float *U, *W;      /* [nc, nv, C, dv] (U, then D; backward: dD0, then dD), [nc, nv, C, dk] */
    float *dS;         /* backward: [nc, nv, dk, dv] the gradient of the state after each chunk */
    float *pq, *pk, *gv, *gg, *gb;
    float *ws;         /* ws_floats per block */
    /* shared starts (vc_gdn_desc.from): from and tap_of [n_seq] (each sequence's slot in tap, -1: none), backend
     * memory; tap [n_tap, nv, dk, dv] the tapped states (forward) or the gradients reaching them (backward); dinit
     * [n_seq, nv, dk, dv] the backward's gradients of the shared starts; pass: the state passes' sequences (0: those
     * from zero, 1: the others) */
    const int *from, *tap_of;
    float *tap, *dinit;
    int pass;
};


/* a kernel's first step: the block's product switch from p (then a barrier) */
__device__ __forceinline__ void ck_begin(const ck_args &p) {
    if (threadIdx.x == 0) ck_tc_flag() = p.tc;
    __syncthreads();
}

/* the block's state columns [dk, cn] (shared memory, row stride cw) to or from (add: +=) a [dk, dv] state at column
 * j0 */
__device__ void ck_cols_out(float *dst, const float *S, int dk, int dv, int cw, int j0, int cn) {
    for (int e = threadIdx.x; e < dk * cn; e += blockDim.x) dst[e / cn * dv + j0 + e % cn] = S[e / cn * cw + e % cn];
}
__device__ void ck_cols_in(float *S, const float *src, int dk, int dv, int cw, int j0, int cn, int add) {
    for (int e = threadIdx.x; e < dk * cn; e += blockDim.x) {
        float x = src[e / cn * dv + j0 + e % cn];
        S[e / cn * cw + e % cn] = add ? S[e / cn * cw + e % cn] + x : x;
    }
}

struct ck_pos {
    int s, n;   /* sequence, rows */
    int64_t t0; /* first row */
};

/* chunk gi (sequence after sequence, as the kept states) */
__device__ ck_pos ck_find(const ck_args &p, int64_t gi) {
    int64_t acc = 0;
    for (int s = 0; s < p.n_seq; s++) {
        int64_t L = p.cu[s + 1] - p.cu[s], nc = (L + p.C - 1) / p.C;
        if (gi < acc + nc) {
            int64_t c0 = (gi - acc) * p.C;
            return { s, (int)(L - c0 < p.C ? L - c0 : p.C), p.cu[s] + c0 };
        }
        acc += nc;
    }
    return { -1, 0, 0 };
}

/* the first chunk of sequence s */
__device__ int64_t ck_base(const ck_args &p, int s) {
    int64_t acc = 0;
    for (int i = 0; i < s; i++) acc += (p.cu[i + 1] - p.cu[i] + p.C - 1) / p.C;
    return acc;
}

/* the chunk's cumulative log decays G (double, as the CPU) and a = e^G: the rows' decays read by the block into tmp
 * (shared memory, x.n floats: one memory latency, not one each 16 rows), summed in row order by thread 0, then a
 * barrier */
__device__ void ck_decays(const ck_args &p, ck_pos x, int h, double *G, float *a, float *tmp) {
    for (int i = threadIdx.x; i < x.n; i += blockDim.x) tmp[i] = p.g[(x.t0 + i) * p.nv + h];
    __syncthreads();
    if (threadIdx.x == 0) { /* (the sums in row order, alone on the serial path) */
        double acc = 0;
        for (int i = 0; i < x.n; i++) G[i] = acc += tmp[i];
    }
    __syncthreads();
    if (!a) return;
    for (int i = threadIdx.x; i < x.n; i += blockDim.x) a[i] = expf((float)G[i]); /* (the block's, not thread 0's) */
    __syncthreads();
}

/* ---- one block's workspace of a parallel launch ---- */
#define CK_SUB 16 /* gk: rows of a block of the decayed products */
struct ck_ws {
    double *G, *tp, *dGv;                     /* [C], [C, C] pair terms of dG (backward), [C] (gk: [C, dk], -, [C, dk]) */
    float *a, *E, *P, *KK, *A, *M, *T, *R, *dA; /* [C] (gk: [C, dk]), [C, C] x 8 */
    float *U, *D, *Bv, *dB1;                  /* [C, dv] */
    float *W, *Qa, *Kt, *Bk, *dW, *dB2, *Y, *Z, *dQ, *dK; /* [C, dk] */
    float *Qh, *Kh, *Kd, *dQh, *dKh, *dKd, *Kl, *dKl; /* gk: [CK_SUB, dk] x 6 (a block's rows), [C, dk] x 2 */
};

/* carves f (NULL: counts) into w; returns the floats used */
__host__ __device__ int64_t ck_carve(ck_ws *w, float *f, int C, int dk, int dv, int gk) {
    ck_ws none;
    int64_t o = 0, CC = (int64_t)C * C, gw = gk ? dk : 1;
    if (!w) w = &none;
#define CK_TAKE(field, type, count)                                                    \
    do {                                                                               \
        w->field = f ? (type *)(f + o) : NULL;                                         \
        o += (int64_t)(count) * (int64_t)(sizeof(type) / sizeof(float));               \
    } while (0)
    CK_TAKE(G, double, C * gw);
    CK_TAKE(tp, double, gk ? 0 : CC);
    CK_TAKE(dGv, double, C * gw);
    float **cc[] = { &w->E, &w->P, &w->KK, &w->A, &w->M, &w->T, &w->R, &w->dA };
    float **cv[] = { &w->U, &w->D, &w->Bv, &w->dB1 };
    float **ck[] = { &w->W, &w->Qa, &w->Kt, &w->Bk, &w->dW, &w->dB2, &w->Y, &w->Z, &w->dQ, &w->dK };
    CK_TAKE(a, float, C * gw);
    for (int i = 0; i < 8; i++) *cc[i] = f ? f + o : NULL, o += CC;
    for (int i = 0; i < 4; i++) *cv[i] = f ? f + o : NULL, o += (int64_t)C * dv;
    for (int i = 0; i < 10; i++) *ck[i] = f ? f + o : NULL, o += (int64_t)C * dk;
    float **cg[] = { &w->Qh, &w->Kh, &w->Kd, &w->dQh, &w->dKh, &w->dKd, &w->Kl, &w->dKl };
    for (int i = 0; i < 8 && gk; i++) *cg[i] = f ? f + o : NULL, o += (int64_t)(i < 6 ? CK_SUB : C) * dk;
#undef CK_TAKE
    return (o + 3) / 4 * 4; /* (the next block's doubles aligned) */
}

__device__ ck_ws ck_ws_of(const ck_args &p) {
    ck_ws w;
    ck_carve(&w, p.ws + (int64_t)blockIdx.x * p.ws_floats, p.C, p.dk, p.dv, p.gk);
    return w;
}

/* row pointers of chunk x, value head h */
#define CK_SETUP(p, x, h)                                                                                \
    const int kh = (h) / ((p).nv / (p).nk), dk = (p).dk, dv = (p).dv, C = (p).C, n = (x).n;             \
    const int64_t qs = (int64_t)(p).nk * dk, vs = (int64_t)(p).nv * dv;                                   \
    const float *Q = (p).q + (x).t0 * qs + (int64_t)kh * dk, *K = (p).k + (x).t0 * qs + (int64_t)kh * dk;  \
    const float *V = (p).v + (x).t0 * vs + (int64_t)(h) * dv;                                              \
    (void)Q, (void)K, (void)V, (void)C, (void)n

/* a decay per key channel (cuda_gdn_chunk_gk.h, included after this file's device code) */
__device__ void ck_prods_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h);
__device__ void ck_bwd_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dS,
                          const float *dO, const float *dD);

/* T = (I + A)^-1 for A strictly lower (n x n, row pitch C) into T (row pitch L; X: CK_SB x n floats of scratch), in
 * blocks of CK_SB rows (the critical path a column's forward substitution took, about n^2 / 2 dependent fmas with a
 * quarter of the threads busy, now about CK_SB^2 / 2 + n): the diagonal blocks' inverses by forward substitution, a
 * column per thread (T_ic = [i == c] - sum over c <= j < i of A_ij T_jc within the block), then for each block row
 * r0 .. r1 - 1 below the first in turn, every column c < r0 at once: X_ic = sum over c <= k < r0 of A_ik T_kc, then
 * T_ic = -(X_ic + sum over r0 <= k < i of T_ik X_kc) (T_ii's inverse times X: T_ii unit lower). Ends with a barrier. */
#define CK_SB 16
__device__ void ck_solve_blocks(float *T, int L, float *X, const float *A, int C, int n) {
    const int nb = (n + CK_SB - 1) / CK_SB;
    for (int c = threadIdx.x; c < nb * CK_SB; c += blockDim.x) {
        const int r0 = c / CK_SB * CK_SB, r1 = r0 + CK_SB < n ? r0 + CK_SB : n;
        if (c >= n) continue;
        for (int i = 0; i < r0; i++) T[i * L + c] = 0.0f;
        for (int i = r0; i < r1; i++) {
            float t = i == c ? 1.0f : 0.0f;
            for (int j = c; j < i; j++) t = fmaf(-A[i * C + j], T[j * L + c], t);
            T[i * L + c] = i < c ? 0.0f : t;
        }
    }
    __syncthreads();
    for (int r0 = CK_SB; r0 < n; r0 += CK_SB) {
        const int r1 = r0 + CK_SB < n ? r0 + CK_SB : n, m = (r1 - r0) * r0;
        for (int e = threadIdx.x; e < m; e += blockDim.x) {
            const int i = r0 + e / r0, c = e % r0;
            float x = 0.0f;
            for (int k = c; k < r0; k++) x = fmaf(A[i * C + k], T[k * L + c], x);
            X[(i - r0) * C + c] = x;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < m; e += blockDim.x) {
            const int i = r0 + e / r0, c = e % r0;
            float t = X[(i - r0) * C + c];
            for (int k = r0; k < i; k++) t = fmaf(T[i * L + k], X[(k - r0) * C + c], t);
            T[i * L + c] = -t;
        }
        __syncthreads();
    }
}

/* decays, P = Q K^T, KK = K K^T, E, M = scale E o P, A = beta E o KK (j < i), Qa = scale a Q, Kt = K~, Bv = beta V,
 * Bk = beta a K; then (solve) T = (I + A)^-1 and W = T Bk, and U = T Bv into U when not NULL (no delta: U = Bv) */
__device__ void ck_prep(const ck_args &p, const ck_ws &w, ck_pos x, int h, int solve, float *U, float *W) {
    CK_SETUP(p, x, h);
    const int nd = p.no_delta;
    if (p.gk) {
        ck_prods_gk(p, w, x, h);
        goto rows;
    }
    ck_decays(p, x, h, w.G, w.a, ck_stage<CK_TK_PAR>()); /* (the stage free between products) */
    bmm(w.P, C, Q, qs, 1, K, 1, qs, n, dk, n, 1.0f, 0, TRI_NONE);
    if (!nd) bmm(w.KK, C, K, qs, 1, K, 1, qs, n, dk, n, 1.0f, 0, TRI_NONE);
    __syncthreads();
    for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
        int i = e / n, j = e % n;
        float ee = j <= i ? expf((float)(w.G[i] - w.G[j])) : 0.0f, be = p.beta[(x.t0 + i) * p.nv + h];
        w.E[i * C + j] = ee;
        w.M[i * C + j] = p.scale * ee * w.P[i * C + j];
        w.A[i * C + j] = j < i && !nd ? be * ee * w.KK[i * C + j] : 0.0f;
    }
    { /* each row's factors once (not an exponential an element), in the stage */
        float *rf = ck_stage<CK_TK_PAR>();
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            rf[i] = expf((float)(w.G[n - 1] - w.G[i]));
            rf[C + i] = p.scale * w.a[i];
            rf[2 * C + i] = p.beta[(x.t0 + i) * p.nv + h] * w.a[i];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < n * dk; e += blockDim.x) {
            int i = e / dk, l = e % dk;
            float kv = K[i * qs + l];
            w.Qa[e] = rf[C + i] * Q[i * qs + l];
            w.Kt[e] = rf[i] * kv;
            w.Bk[e] = rf[2 * C + i] * kv;
        }
    }
rows:
    for (int e = threadIdx.x; e < n * dv; e += blockDim.x) {
        int i = e / dv, j = e % dv;
        w.Bv[e] = p.beta[(x.t0 + i) * p.nv + h] * V[i * vs + j];
    }
    __syncthreads();
    if (!solve) return;
    if (nd) {
        for (int e = threadIdx.x; U && e < n * dv; e += blockDim.x) U[e] = w.Bv[e];
        __syncthreads();
        return;
    }
    /* T by forward substitution, a column per thread: T_ic = [i == c] - sum over c <= j < i of A_ij T_jc (the CPU's
     * arithmetic: with the CUDA cores' products the forward's bits are the CPU's), or with the tensor cores' products
     * in blocks (ck_solve_blocks). Each term reads back a value of T written before: in the staging area between
     * products (row pitch C + 1: the columns' threads on distinct banks), then copied out, rather than a round trip
     * to global memory a term */
    if ((int64_t)C * (C + 1) + CK_SB * C <= CK_STAGE(CK_TK_PAR)) {
        float *Ts = ck_stage<CK_TK_PAR>();
        const int L = C + 1;
        if (ck_tc_flag())
            ck_solve_blocks(Ts, L, Ts + C * L, w.A, C, n);
        else {
            for (int c = threadIdx.x; c < n; c += blockDim.x)
                for (int i = 0; i < n; i++) {
                    float t = i == c ? 1.0f : 0.0f;
                    for (int j = c; j < i; j++) t = fmaf(-w.A[i * C + j], Ts[j * L + c], t);
                    Ts[i * L + c] = i < c ? 0.0f : t;
                }
            __syncthreads();
        }
        for (int e = threadIdx.x; e < n * n; e += blockDim.x) w.T[e / n * C + e % n] = Ts[e / n * L + e % n];
    } else /* (chunks past 78 rows, in global memory) */
        for (int c = threadIdx.x; c < n; c += blockDim.x)
            for (int i = 0; i < n; i++) {
                float t = i == c ? 1.0f : 0.0f;
                for (int j = c; j < i; j++) t = fmaf(-w.A[i * C + j], w.T[j * C + c], t);
                w.T[i * C + c] = i < c ? 0.0f : t;
            }
    __syncthreads();
    if (U) bmm(U, dv, w.T, C, 1, w.Bv, dv, 1, n, n, dv, 1.0f, 0, TRI_LOWER);
    bmm(W, dk, w.T, C, 1, w.Bk, dk, 1, n, n, dk, 1.0f, 0, TRI_LOWER);
    __syncthreads();
}
/* the state-pass block's sequence, value head and columns [j0, j0 + cn) */
struct ck_cols {
    int s, h, j0, cn;
};

__device__ ck_cols ck_cols_of(const ck_args &p) {
    int b = blockIdx.x, cg = b % p.ncg, h = (b / p.ncg) % p.nv, s = b / (p.ncg * p.nv), j0 = cg * p.cw;
    return { s, h, j0, p.dv - j0 < p.cw ? p.dv - j0 : p.cw };
}

/* shared memory of the state passes: the state (or its gradient) columns [dk, cw], K~ and Qa [C, dk], G [C], (gk)
 * b per key channel [dk], and the rows' factors [2 C] */
struct ck_sh {
    double *G;
    float *S, *Kt, *Qa, *bv, *rf; /* rf [2 C]: the rows' factors of K~ and Qa */
};

__device__ ck_sh ck_sh_of(const ck_args &p, char *base) {
    ck_sh s;
    s.G = (double *)base;
    s.S = (float *)(s.G + p.C);
    s.Kt = s.S + p.dk * p.cw;
    s.Qa = s.Kt + p.C * p.dk;
    s.bv = s.Qa + p.C * p.dk;
    s.rf = s.bv + p.dk;
    return s;
}

/* K~ (and with qa, Qa) of chunk x into shared memory (G ready), then a barrier */
__device__ void ck_rows_sh(const ck_args &p, const ck_sh &sh, ck_pos x, int h, int qa) {
    CK_SETUP(p, x, h);
    for (int i = threadIdx.x; i < n; i += blockDim.x) { /* (each row's factors once, not an exponential an element) */
        sh.rf[i] = expf((float)(sh.G[n - 1] - sh.G[i]));
        if (qa) sh.rf[C + i] = p.scale * expf((float)sh.G[i]);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * dk; e += blockDim.x) {
        int i = e / dk, l = e % dk;
        sh.Kt[e] = sh.rf[i] * K[i * qs + l];
        if (qa) sh.Qa[e] = sh.rf[C + i] * Q[i * qs + l];
    }
    __syncthreads();
}

__device__ void ck_rows_sh_gk(const ck_args &p, const ck_sh &sh, ck_pos x, int h, int qa);

/* the state passes' rows of chunk x: its decays, K~ (and with qa, Qa), and (gk) b per key channel; a barrier */
__device__ void ck_state_rows(const ck_args &p, const ck_sh &sh, ck_pos x, int h, int qa) {
    if (p.gk) {
        ck_rows_sh_gk(p, sh, x, h, qa);
        return;
    }
    ck_decays(p, x, h, sh.G, NULL, sh.Kt); /* (K~ is written after) */
    ck_rows_sh(p, sh, x, h, qa);
}

/* S = b S (gk: row a by its channel's b) for the state columns in shared memory (rows ready); then a barrier */
__device__ void ck_state_decay(const ck_args &p, const ck_sh &sh, int n) {
    float b = p.gk ? 0.0f : expf((float)sh.G[n - 1]);
    for (int e = threadIdx.x; e < p.dk * p.cw; e += blockDim.x) sh.S[e] *= p.gk ? sh.bv[e / p.cw] : b;
    __syncthreads();
}
/* sum over the block of x (per thread, in its own order), reduced in thread order in double: every thread gets it */
__device__ double ck_block_sum(double x) {
    __shared__ double red[CK_THREADS];
    __shared__ double total;
    red[threadIdx.x] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < (int)blockDim.x; i++) s += red[i];
        total = s;
    }
    __syncthreads();
    return total;
}

__device__ float ck_dot(const float *x, const float *y, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

/* without the delta rule (D = beta V): dv and dbeta from dD; a barrier */
__device__ void ck_bwd_beta_v(const ck_args &p, ck_pos x, int h, const float *dD) {
    CK_SETUP(p, x, h);
    for (int e = threadIdx.x; p.gv && e < n * dv; e += blockDim.x) {
        int i = e / dv, j = e % dv;
        p.gv[(x.t0 + i) * vs + (int64_t)h * dv + j] += p.beta[(x.t0 + i) * p.nv + h] * dD[e];
    }
    for (int i = threadIdx.x; p.gb && i < n; i += blockDim.x)
        p.gb[(x.t0 + i) * p.nv + h] += ck_dot(V + i * vs, dD + i * dv, dv);
    __syncthreads();
}

/* R = dO D^T, Y = D dS^T, Z = dO S0^T (a barrier: bmm's) */
__device__ void ck_out_mats(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dS,
                            const float *dO) {
    CK_SETUP(p, x, h);
    bmm(w.R, C, dO, vs, 1, w.D, 1, dv, n, dv, n, 1.0f, 0, TRI_NONE);
    bmm(w.Y, dk, w.D, dv, 1, dS, 1, dv, n, dv, dk, 1.0f, 0, TRI_NONE);
    bmm(w.Z, dk, dO, vs, 1, S0, 1, dv, n, dv, dk, 1.0f, 0, TRI_NONE);
}

/* the outputs' part: R, Y, Z, the dG terms of O and S_n, dQ and dK (D, dD ready) */
__device__ void ck_bwd_outputs(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dS,
                               const float *dO) {
    CK_SETUP(p, x, h);
    ck_out_mats(p, w, x, h, S0, dS, dO);
    double sd = 0; /* <S0, dS>: the gradient of b */
    for (int64_t e = threadIdx.x; e < (int64_t)dk * dv; e += blockDim.x) sd += (double)S0[e] * dS[e];
    sd = ck_block_sum(sd); /* (a barrier) */
    for (int e = threadIdx.x; e < n * n; e += blockDim.x) { /* pair terms of O; R becomes dP */
        int i = e / n, j = e % n;
        float r = w.R[i * C + j];
        w.tp[i * C + j] = j < i ? (double)p.scale * w.P[i * C + j] * r * w.E[i * C + j] : 0.0;
        w.R[i * C + j] = j <= i ? p.scale * w.E[i * C + j] * r : 0.0f;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float kt = w.E[(n - 1) * C + i];
        w.dGv[i] = (double)p.scale * w.a[i] * ck_dot(Q + i * qs, w.Z + i * dk, dk) + (i == n - 1 ? sd * w.a[n - 1] : 0);
        if (i < n - 1) w.tp[(n - 1) * C + i] += kt * ck_dot(K + i * qs, w.Y + i * dk, dk);
    }
    /* dQ = scale diag(a) Z + dP K; dK = dP^T Q + diag(kt) Y */
    for (int e = threadIdx.x; e < n * dk; e += blockDim.x) w.dQ[e] = p.scale * w.a[e / dk] * w.Z[e];
    __syncthreads();
    bmm(w.dQ, dk, w.R, C, 1, K, qs, 1, n, n, dk, 1.0f, 1, TRI_LOWER);
    bmm(w.dK, dk, w.R, 1, C, Q, qs, 1, n, n, dk, 1.0f, 0, TRI_UPPER);
    __syncthreads();
    for (int e = threadIdx.x; e < n * dk; e += blockDim.x) w.dK[e] += w.E[(n - 1) * C + e / dk] * w.Y[e];
    __syncthreads();
}

/* the delta rule's products, [U | W] = T [beta V | beta a K], D = U - W S0: dW = -dD S0^T, [dB1 | dB2] = T^T [dD | dW],
 * dA = -(dB1 U^T + dB2 W^T), and dv from dB1 (Bv = beta V); a barrier */
__device__ void ck_delta_mats(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dD) {
    CK_SETUP(p, x, h);
    bmm(w.dW, dk, dD, dv, 1, S0, 1, dv, n, dv, dk, -1.0f, 0, TRI_NONE); /* dW = -dD S0^T */
    bmm(w.dB1, dv, w.T, 1, C, dD, dv, 1, n, n, dv, 1.0f, 0, TRI_UPPER); /* T^T dU */
    __syncthreads();
    bmm(w.dB2, dk, w.T, 1, C, w.dW, dk, 1, n, n, dk, 1.0f, 0, TRI_UPPER); /* T^T dW */
    __syncthreads();
    bmm(w.dA, C, w.dB1, dv, 1, w.U, 1, dv, n, dv, n, -1.0f, 0, TRI_NONE); /* dA = -(dB1 U^T + dB2 W^T) */
    bmm(w.dA, C, w.dB2, dk, 1, w.W, 1, dk, n, dk, n, -1.0f, 1, TRI_NONE); /* (the same thread's elements) */
    for (int e = threadIdx.x; p.gv && e < n * dv; e += blockDim.x) {
        int i = e / dv, j = e % dv;
        p.gv[(x.t0 + i) * vs + (int64_t)h * dv + j] += p.beta[(x.t0 + i) * p.nv + h] * w.dB1[e];
    }
    __syncthreads();
}

/* the delta rule's part (one decay per head) */
__device__ void ck_bwd_delta(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dD) {
    CK_SETUP(p, x, h);
    ck_delta_mats(p, w, x, h, S0, dD);
    for (int e = threadIdx.x; e < n * dk; e += blockDim.x) { /* Bk = beta a K */
        int i = e / dk;
        w.dK[e] += p.beta[(x.t0 + i) * p.nv + h] * w.a[i] * w.dB2[e];
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float be = p.beta[(x.t0 + i) * p.nv + h], ai = w.a[i], tt = ck_dot(K + i * qs, w.dB2 + i * dk, dk);
        float db = ck_dot(V + i * vs, w.dB1 + i * dv, dv) + ai * tt;
        w.dGv[i] += (double)be * ai * tt;
        for (int j = 0; j < n; j++) { /* A_ij = beta_i E_ij KK_ij: dA_ij becomes dKK_ij */
            float dA = j < i ? w.dA[i * C + j] : 0.0f, e = w.E[i * C + j], kk = w.KK[i * C + j], dkk = dA * be * e;
            db += dA * e * kk;
            if (j < i) w.tp[i * C + j] += (double)dkk * kk;
            w.dA[i * C + j] = dkk;
        }
        if (p.gb) p.gb[(x.t0 + i) * p.nv + h] += db;
    }
    __syncthreads();
    bmm(w.dK, dk, w.dA, C, 1, K, qs, 1, n, n, dk, 1.0f, 1, TRI_LOWER); /* KK = K K^T: dK += dKK K + dKK^T K */
    bmm(w.dK, dk, w.dA, 1, C, K, qs, 1, n, n, dk, 1.0f, 1, TRI_UPPER);
    __syncthreads();
}
#include "cuda_gdn_chunk_gk.h"

/* the state passes' column group width: 32 columns, fewer while the passes would have under 264 blocks */
static int ck_cw(const vc_gdn_desc *d) {
    int cw = 32;
    while (cw > 8 && (int64_t)d->n_seq * d->n_v_head * ((d->dv + cw - 1) / cw) < 264) cw /= 2;
    return cw < d->dv ? cw : d->dv;
}

static size_t ck_smem(const vc_gdn_desc *d, int cw) {
    return sizeof(double) * (size_t)d->ckpt +
           sizeof(float) * ((size_t)d->dk * cw + 2 * (size_t)d->ckpt * d->dk + d->dk + 2 * (size_t)d->ckpt);
}

static int ck_share_setup(ck_args *p, const vc_gdn_desc *d, const char *op) {
    return vc_cu_share_setup(d->n_seq, d->from, (size_t)d->n_v_head * d->dk * d->dv, &p->from, &p->tap_of, &p->tap, op);
}

static void ck_share_free(ck_args *p) {
    vc_cu_scratch_free((void *)p->from);
    vc_cu_scratch_free(p->tap);
    vc_cu_scratch_free(p->dinit);
}

/* the common arguments, the chunk count and the parallel launches' grid and workspace; 0 on failure */
static int64_t ck_setup(ck_args *p, const vc_gdn_desc *d, const int64_t *cu_dev, const char *op) {
    memset(p, 0, sizeof *p);
    p->cu = cu_dev, p->n_seq = d->n_seq, p->nk = d->n_k_head, p->nv = d->n_v_head, p->dk = d->dk, p->dv = d->dv;
    p->C = (int)d->ckpt, p->no_delta = d->no_delta, p->scale = d->scale, p->cw = ck_cw(d);
    p->ncg = (d->dv + p->cw - 1) / p->cw;
    p->nc = vc_gdn_saved(d);
    p->gk = d->gk;
    const char *tc = getenv("VERLC_CUDA_GDN_TC"); /* (read per call: the A/B switch) */
    p->tc = !(tc && *tc == '0');
    p->ws_floats = ck_carve(NULL, NULL, p->C, p->dk, p->dv, d->gk);
    int64_t tasks = p->nc * p->nv, grid = (int64_t)(CK_WS_BUDGET / ((size_t)p->ws_floats * sizeof(float)));
    grid = grid < 1 ? 1 : grid > tasks ? tasks : grid;
    if (tasks > 0 && !(p->ws = (float *)vc_cu_scratch((size_t)grid * p->ws_floats * sizeof(float), op))) return 0;
    return grid;
}
} // namespace
#endif
