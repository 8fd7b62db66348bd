/* The grouped expert GEMMs with bf16 matmuls on register-tiled tensor cores (mma.sync m16n8k16, the flash-attention
 * kernels' fragments, cuda_mma.h). Rows mode: C[rows of expert e] = alpha op(A) op(B_e) + beta C; wgrad: C_e = alpha
 * A_e^T B_e + beta C_e over expert e's rows. Each output tile 128 x 128, 8 warps of 64 x 32, k steps of 32 through 3
 * shared-memory stages. A bf16 operand (the experts' gathered inputs and gated activations, a weight's registered bf16
 * copy) comes by cp.async, two steps ahead of the one multiplied; an f32 one (output gradients, weights without a
 * copy) is loaded into registers as the step two ahead is issued, rounded to bf16 and stored after the current step's
 * products. Fragments by ldmatrix ([n][k] tiles as they are, [k][n] and [k][m] ones transposed). Each output adds its
 * products in k order, 16 at a time, from 0, then alpha acc (+ beta C): the WMMA kernel's order and rounding, so the
 * same bits (test_cuda_ops compares the two; VERLC_CUDA_MOE_MMA=0 keeps the WMMA kernel). Taken where whole 16-byte
 * chunks lie along every operand's rows (K, and N for [k][n] weights, multiples of 8 in rows mode; M and N in wgrad)
 * and rows start on 16-byte boundaries, with bf16 matmuls; the caller's kernel otherwise. */
#include "cuda_internal.h"
#include "cuda_mma.h"
#include "cuda_moe_tile.h"
#include <stdint.h>
#include <stdlib.h>
#include <type_traits>

typedef __nv_bfloat16 bf16;

namespace {

int g_launches;

constexpr int TM = 128, TN = 128, TK = 32, ST = 3, NTH = 256; /* tile, k step, stages, threads */
constexpr int PK = TK + 8;   /* pitch of [rows][k] stages (80 bytes: ldmatrix's 8 rows on distinct banks) */
constexpr int PN = TN + 8;   /* pitch of a [k][n] stage (272 bytes) */
constexpr int A_EL = TM * PK; /* bf16 elements of an A stage */
constexpr int B_EL = TN * PK > TK * PN ? TN * PK : TK * PN;
constexpr int CH = 2;        /* 8-element chunks a thread moves per operand and stage: 512 / NTH */
static_assert(TM * TK / 8 == CH * NTH && TN * TK / 8 == CH * NTH, "chunks");
constexpr size_t SMEM = (size_t)ST * (A_EL + B_EL) * sizeof(bf16);

struct mparams {
    const int64_t *off;
    int E, wgrad;
    int64_t M, N, K; /* rows: N, K; wgrad: M, N (K: the expert's rows) */
    float alpha, beta;
    const void *A, *B;
    int64_t lda, ldb;
    float *C;
    int64_t ldc;
};

/* An operand's tile for the k step at hand in its source (row stride ld): KC, k along the tile's columns ([x][k]:
 * 128 rows of TK), else along its rows ([k][x]: TK rows of 128); x: the rows (KC) or columns valid, a multiple of 8
 * when they are columns; kleft: k left from this step. bf16 sources by cp.async straight into the stage, f32 ones
 * through `held` (8 floats a chunk of 16 bytes), rounded into the stage by store. */
template <bool H16, bool KC>
struct tile_src {
    static constexpr int CPR = KC ? TK / 8 : TN / 8, PITCH = KC ? PK : PN; /* chunks a row, stage pitch */
    const void *p;
    int64_t ld;
    int x, kleft;
    /* chunk u of this thread: its row and column in the tile; *in: along x within the tile's valid rows or columns
     * (a chunk past them is left as it is: only its own output rows or columns, never stored, would see it); *ok:
     * within k too (past the end of k the chunk is zero, so that the valid outputs add nothing for it) */
    __device__ __forceinline__ void chunk(int u, int *r, int *c, bool *in, bool *ok) const {
        const int idx = threadIdx.x + u * NTH;
        *r = idx / CPR;
        *c = (idx % CPR) * 8;
        *in = KC ? *r < x : *c < x;
        *ok = *in && (KC ? *c < kleft : *r < kleft);
    }
    __device__ __forceinline__ void issue(bf16 *stage, float (&held)[CH][8]) const {
#pragma unroll
        for (int u = 0; u < CH; u++) {
            int r, c;
            bool in, ok;
            chunk(u, &r, &c, &in, &ok);
            if (H16) {
                if (ok) vc_cp16(stage + r * PITCH + c, (const bf16 *)p + r * ld + c);
                else if (in) *reinterpret_cast<uint4 *>(stage + r * PITCH + c) = uint4{ 0, 0, 0, 0 };
            } else {
                const float4 *s = reinterpret_cast<const float4 *>((const float *)p + r * ld + c);
                const float4 f = ok ? s[0] : make_float4(0, 0, 0, 0), g = ok ? s[1] : make_float4(0, 0, 0, 0);
                held[u][0] = f.x, held[u][1] = f.y, held[u][2] = f.z, held[u][3] = f.w;
                held[u][4] = g.x, held[u][5] = g.y, held[u][6] = g.z, held[u][7] = g.w;
            }
        }
    }
    __device__ __forceinline__ void store(bf16 *stage, const float (&held)[CH][8]) const {
        if (!H16)
#pragma unroll
            for (int u = 0; u < CH; u++) {
                int r, c;
                bool in, ok;
                chunk(u, &r, &c, &in, &ok);
                if (in)
                    *reinterpret_cast<uint4 *>(stage + r * PITCH + c) =
                        uint4{ vc_pack_bf16x2(held[u][0], held[u][1]), vc_pack_bf16x2(held[u][2], held[u][3]),
                               vc_pack_bf16x2(held[u][4], held[u][5]), vc_pack_bf16x2(held[u][6], held[u][7]) };
            }
    }
    __device__ __forceinline__ void next(void) { /* the following k step */
        const int64_t by = KC ? TK : TK * ld;
        p = H16 ? (const void *)((const bf16 *)p + by) : (const void *)((const float *)p + by);
        kleft -= TK;
    }
};

/* one k step's products of a warp's 64 x 32 piece (rows wm, columns wn of the tile). A's stage [m][k] (AKC) or [k][m],
 * B's [n][k] (BKC) or [k][n]: ldmatrix as they are for [x][k] tiles, transposed for [k][x] ones. Matrix j of an x4
 * load (lanes 8 j .. 8 j + 7 give its rows): A's (rows (j % 2) 8, k (j / 2) 8) for [k][m] stages, as mma_frag_a's for
 * [m][k] ones; B's (n tile 2 np + j / 2, k half j % 2) */
template <bool AKC, bool BKC>
__device__ __forceinline__ void step_products(float (&acc)[4][4][4], const bf16 *As, const bf16 *Bs, int wm, int wn) {
    const int lane = threadIdx.x % 32, j = lane / 8, r = lane % 8;
#pragma unroll
    for (int ks = 0; ks < TK; ks += 16) {
        uint32_t a[4][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; mi++) {
            if (AKC) vc_ldsm_x4(a[mi], As + (wm + mi * 16 + lane % 16) * PK + ks + (lane / 16) * 8);
            else vc_ldsm_x4_t(a[mi], As + (ks + (j / 2) * 8 + r) * PN + wm + mi * 16 + (j % 2) * 8);
        }
#pragma unroll
        for (int np = 0; np < 2; np++) {
            uint32_t t[4];
            const int n = wn + (2 * np + j / 2) * 8, k = ks + (j % 2) * 8;
            if (BKC) vc_ldsm_x4(t, Bs + (n + r) * PK + k);
            else vc_ldsm_x4_t(t, Bs + (k + r) * PN + n);
            b[2 * np][0] = t[0], b[2 * np][1] = t[1], b[2 * np + 1][0] = t[2], b[2 * np + 1][1] = t[3];
        }
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int ni = 0; ni < 4; ni++) vc_mma_16816(acc[mi][ni], a[mi], b[ni]);
    }
}

/* LAYOUT 0: rows mode, B_e [K][N]; 1: rows mode, B_e [N][K] (op(B) = B^T); 2: wgrad (C_e = A_e^T B_e over the expert's
 * rows) */
template <bool A16, bool B16, int LAYOUT>
__global__ void __launch_bounds__(NTH, A16 &&B16 ? 2 : 1) k_moe_mma(mparams p) {
    extern __shared__ __align__(128) unsigned char moe_mma_sh[];
    constexpr bool AKC = LAYOUT != 2, BKC = LAYOUT == 1;
    typedef typename std::conditional<A16, bf16, float>::type TA;
    typedef typename std::conditional<B16, bf16, float>::type TB;
    int64_t m0, n0;
    int mt, nt, kk;
    float *C;
    tile_src<A16, AKC> a;
    tile_src<B16, BKC> b;
    if (LAYOUT != 2) {
        int e;
        vc_moe_rows_tile<TM, NTH>(p.off, p.E, &m0, &e, &mt);
        if (mt == 0) return;
        n0 = (int64_t)blockIdx.y * TN;
        nt = (int)(p.N - n0 < TN ? p.N - n0 : TN), kk = (int)p.K;
        a = { (const TA *)p.A + m0 * p.lda, p.lda, mt, kk };
        b = { (const TB *)p.B + (int64_t)e * p.N * p.K + (BKC ? n0 * p.K : n0), BKC ? p.K : p.N, nt, kk };
        C = p.C + m0 * p.ldc + n0;
    } else {
        const int e = blockIdx.y;
        const int64_t nn = (p.N + TN - 1) / TN, lo = p.off[e], rows = p.off[e + 1] - lo;
        if (rows <= 0 && p.beta == 1.0f) return;
        m0 = (int64_t)(blockIdx.x / nn) * TM, n0 = (int64_t)(blockIdx.x % nn) * TN;
        mt = (int)(p.M - m0 < TM ? p.M - m0 : TM), nt = (int)(p.N - n0 < TN ? p.N - n0 : TN);
        kk = rows > 0 ? (int)rows : 0;
        a = { (const TA *)p.A + lo * p.lda + m0, p.lda, mt, kk };
        b = { (const TB *)p.B + lo * p.ldb + n0, p.ldb, nt, kk };
        C = p.C + (int64_t)e * p.M * p.N + m0 * p.N + n0;
    }
    const int64_t ldc = LAYOUT != 2 ? p.ldc : p.N;
    bf16 *As = reinterpret_cast<bf16 *>(moe_mma_sh), *Bs = As + ST * A_EL;
    float ha[CH][8], hb[CH][8], acc[4][4][4];
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++) acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;
    const int steps = (kk + TK - 1) / TK, warp = threadIdx.x / 32, wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    /* the first ST - 1 steps in flight (an f32 operand stored at once); k past the end is zero */
    for (int s = 0; s < ST - 1; s++) {
        if (s < steps) {
            a.issue(As + s * A_EL, ha);
            b.issue(Bs + s * B_EL, hb);
            a.store(As + s * A_EL, ha);
            b.store(Bs + s * B_EL, hb);
            a.next();
            b.next();
        }
        vc_cp_commit();
    }
    for (int s = 0; s < steps; s++) {
        vc_cp_wait<ST - 2>();
        __syncthreads(); /* step s's stage complete for every thread; step s - 1's stage read by every warp */
        const int nx = s + ST - 1, xs = nx % ST;
        if (nx < steps) {
            a.issue(As + xs * A_EL, ha);
            b.issue(Bs + xs * B_EL, hb);
        }
        vc_cp_commit();
        if (wm < mt && wn < nt) /* (a warp whose rows or columns all lie past the tile's: nothing to multiply) */
            step_products<AKC, BKC>(acc, As + (s % ST) * A_EL, Bs + (s % ST) * B_EL, wm, wn);
        if (nx < steps) {
            a.store(As + xs * A_EL, ha);
            b.store(Bs + xs * B_EL, hb);
            a.next();
            b.next();
        }
    }
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int h = 0; h < 4; h++) {
                const int i = wm + mi * 16 + g + (h >= 2 ? 8 : 0), jj = wn + ni * 8 + 2 * t + (h & 1);
                if (i >= mt || jj >= nt) continue;
                float *c = C + i * ldc + jj, v = p.alpha * acc[mi][ni][h];
                *c = p.beta == 0.0f ? v : v + p.beta * *c;
            }
}

template <bool A16, bool B16, int LAYOUT>
int launch(const mparams &p, dim3 grid, const char *op) {
    if (!vc_cu_ok(cudaFuncSetAttribute(k_moe_mma<A16, B16, LAYOUT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)SMEM),
                  op))
        return -1;
    k_moe_mma<A16, B16, LAYOUT><<<grid, NTH, SMEM, vc_cu_stream()>>>(p);
    g_launches++;
    return 1;
}

template <int LAYOUT>
int launch_as(int a16, int b16, const mparams &p, dim3 grid, const char *op) {
    if (a16 && b16) return launch<true, true, LAYOUT>(p, grid, op);
    if (a16) return launch<true, false, LAYOUT>(p, grid, op);
    if (b16) return launch<false, true, LAYOUT>(p, grid, op);
    return launch<false, false, LAYOUT>(p, grid, op);
}

bool taken(void) {
    const char *env = getenv("VERLC_CUDA_MOE_MMA");
    return !(env && *env == '0') && vc_matmul_precision() == VC_PREC_BF16;
}

} // namespace

int vc_cuda_moe_mma_launches(void) { return g_launches; }

int vc_cu_moe_mma_rows(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                       const void *A, int a16, int64_t lda, const void *B, int b16, float beta, float *C, int64_t ldc,
                       const char *op) {
    /* whole 16-byte chunks along every operand's rows: K (and N for [k][n] weights) multiples of 8, rows on 16-byte
     * boundaries (a bf16 row of lda elements: lda a multiple of 8; f32: of 4; an expert's weights e N K apart) */
    if (!taken() || K % 8 || K > INT32_MAX || (!tb && N % 8) || !vc_cu_aligned16(A, B) || lda % (a16 ? 8 : 4) ||
        (!b16 && (N * K) % 4))
        return 0;
    const int64_t tiles = (R + TM - 1) / TM + (E < R ? E : R), nb = (N + TN - 1) / TN;
    if (tiles > INT32_MAX || nb > 65535 || E > INT32_MAX) return 0;
    mparams p = { off, (int)E, 0, 0, N, K, alpha, beta, A, B, lda, 0, C, ldc };
    const dim3 grid((unsigned)tiles, (unsigned)nb);
    return tb ? launch_as<1>(a16, b16, p, grid, op) : launch_as<0>(a16, b16, p, grid, op);
}

int vc_cu_moe_mma_wgrad(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const void *A, int a16,
                        int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, const char *op) {
    /* the expert's rows are the sums: M and N multiples of 8 (whole chunks along A's and B's rows), rows on 16-byte
     * boundaries */
    if (!taken() || M % 8 || N % 8 || !vc_cu_aligned16(A, B) || lda % (a16 ? 8 : 4) || ldb % (b16 ? 8 : 4)) return 0;
    const int64_t tiles = ((M + TM - 1) / TM) * ((N + TN - 1) / TN);
    if (tiles > INT32_MAX || E > 65535) return 0;
    mparams p = { off, (int)E, 1, M, N, 0, alpha, beta, A, B, lda, ldb, C, 0 };
    const dim3 grid((unsigned)tiles, (unsigned)E);
    return launch_as<2>(a16, b16, p, grid, op);
}
