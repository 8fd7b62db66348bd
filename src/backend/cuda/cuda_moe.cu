/* MoE on the GPU with nothing going back to the host: the routed choices grouped by expert on the device, and each
 * expert projection as one grouped GEMM launch whose row groups (off[E+1]) are read by the kernel, so a decode step
 * with MoE layers is one CUDA graph and a training step does not wait per layer.
 *
 * Grouping: one block. Counts per expert by shared-memory integer atomics (exact, any order), an exclusive scan by
 * warp 0, then, in rounds of 8192 choices staged in shared memory by the whole block, warp 0 places them in order, 32
 * at a time (__match_any_sync finds the lanes with the same expert): tokens ascending within each expert, the CPU
 * backend's order.
 *
 * Grouped GEMM (with bf16 matmuls, where the shapes allow, cuda_moe_mma.cu's mma.sync kernel instead, the same
 * bits): 64 x 64 output tiles, 4 warps, k steps of 32 staged through shared memory. With bf16 matmuls each
 * staged value is rounded to bf16 (a bf16 operand, or a weight's registered bf16 copy, is taken as it is) and the
 * warps multiply on nvcuda::wmma 16x16x16 fragments with f32 accumulators; with f32 matmuls each thread sums 8 x 4
 * outputs in f32, k ascending. rows mode: the grid covers every possible tile (ceil(R / 64) + min(E, R) row tiles) and
 * a block finds its expert and tile from the group sizes (warp 0, 32 experts at a time); blocks past the last tile
 * return. wgrad mode: one block per (expert, 64 x 64 tile of the expert's [M, N] gradient), the expert's rows the
 * summation. Every output element is written by one block in a fixed order: the same bits run to run. */
#include "cuda_internal.h"
#include "cuda_moe_tile.h"
#include <cuda_bf16.h>
#include <limits.h>
#include <mma.h>
#include <stdio.h>

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

namespace {

constexpr unsigned FULL = 0xffffffffu;
constexpr int GT = 1024; /* threads of the grouping block */

__device__ __forceinline__ int clamp_id(int32_t id, int E) { return id < 0 ? 0 : id >= E ? E - 1 : id; }

constexpr int GC = 8192;  /* choices staged in shared memory per round of the placement */

__global__ void __launch_bounds__(GT)
    k_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t n, int K, int E) {
    extern __shared__ unsigned gsh[]; /* cnt[E], run[E], ch[GC] */
    unsigned *cnt = gsh, *run = gsh + E;
    int *ch = (int *)(gsh + 2 * E);
    const int lane = threadIdx.x % 32;
    for (int e = threadIdx.x; e < E; e += GT) cnt[e] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += GT) atomicAdd(&cnt[clamp_id(ids[i], E)], 1u);
    __syncthreads();
    if (threadIdx.x < 32) {
        unsigned carry = 0;
        for (int b = 0; b < E; b += 32) { /* exclusive scan, 32 experts at a time */
            int e = b + lane;
            unsigned c = e < E ? cnt[e] : 0, x = c;
            for (int d = 1; d < 32; d <<= 1) {
                unsigned y = __shfl_up_sync(FULL, x, d);
                if (lane >= d) x += y;
            }
            if (e < E) {
                run[e] = carry + x - c;
                off[e] = (int64_t)(carry + x - c);
            }
            carry += __shfl_sync(FULL, x, 31);
        }
        if (lane == 0) off[E] = (int64_t)carry;
    }
    for (int64_t c0 = 0; c0 < n; c0 += GC) { /* the block stages a round of choices, warp 0 places them in order */
        const int m = (int)(n - c0 < GC ? n - c0 : GC);
        __syncthreads(); /* the scan (first round) or the previous round's placement is done */
        for (int i = threadIdx.x; i < m; i += GT) ch[i] = clamp_id(ids[c0 + i], E);
        __syncthreads();
        if (threadIdx.x >= 32) continue;
        for (int b = 0; b < m; b += 32) {
            const int i = b + lane;
            const int e = i < m ? ch[i] : E; /* E: no choice */
            const unsigned peers = __match_any_sync(FULL, e);
            if (i < m) {
                int64_t r = (int64_t)run[e] + __popc(peers & ((1u << lane) - 1u));
                tok[r] = (c0 + i) / K;
                inv[c0 + i] = r;
            }
            __syncwarp();
            if (i < m && (peers >> lane) == 1u) run[e] += (unsigned)__popc(peers); /* the group's highest lane */
            __syncwarp();
        }
    }
}

/* ---- grouped GEMM ---- */
constexpr int BM = 64, BN = 64, BK = 32, NT = 128;
constexpr int LA = BK + 8; /* shared pitches (multiples of 8 halves / 4 floats for wmma) */
constexpr int LB = BN + 8;
constexpr int LC = BN + 4;

struct gparams {
    int wgrad, tb, E;
    const int64_t *off;
    int64_t M, N, K; /* rows: N, K; wgrad: M, N */
    float alpha, beta;
    const void *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
};

/* one block's piece: C[mt, nt] = alpha op(A) op(B) + beta C over kk; element (i, k) of op(A) at A[k * lda + i] when
 * ta, A[i * lda + k] otherwise; (k, j) of op(B) at B[j * ldb + k] when tb, else B[k * ldb + j] */
struct tile {
    const void *A, *B;
    float *C;
    int64_t lda, ldb, ldc, kk;
    int ta, tb, mt, nt;
};

__device__ __forceinline__ float ldf(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ldf(const bf16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void stv(float *p, float v) { *p = v; }
__device__ __forceinline__ void stv(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Staging op(A)[:, k0 .. k0 + BK) and op(B)[k0 .. k0 + BK, :) (zero outside) as As[BM][LA], Bs[BK][LB], consecutive
 * threads along each operand's contiguous dimension so that global reads coalesce. In two halves: stage_load reads a
 * thread's NA + NB elements into registers, all issued before any is used (one memory latency, not one an element:
 * a load then a store to shared memory each, as before, waited for every load), and stage_store writes them; the
 * tile loops load the next step's while the current one is multiplied. TAT / TBT: the transposes (compile-time, so
 * that a thread keeps one pointer and stride an operand: its element u of A is row tid / BK + u NT / BK at column
 * tid % BK, or row tid % BM at column tid / BM + u NT / BM, the same elements as before). The same values staged:
 * the same bits. */
constexpr int NA = BM * BK / NT, NB = BK * BN / NT;
static_assert(NA * NT == BM * BK && NB * NT == BK * BN && NT % BK == 0 && NT % BM == 0 && NT % BN == 0, "shares");
struct staged {
    float a[NA], b[NB];
};
/* a run of N elements of a thread's share: element u at p[u STEP ld], kept where ok and first + u STEP < lim (zero
 * elsewhere) */
template <int N, int STEP, class T>
__device__ __forceinline__ void load_run(float *v, const T *p, int64_t ld, bool ok, int64_t first, int64_t lim) {
#pragma unroll
    for (int u = 0; u < N; u++) v[u] = ok && first + u * STEP < lim ? ldf(p, (int64_t)u * STEP * ld) : 0.0f;
}
template <class TA, class TB, int TAT, int TBT>
__device__ __forceinline__ void stage_load(staged *v, const tile &t, int64_t k0) {
    const int tid = threadIdx.x;
    const TA *A = (const TA *)t.A;
    const TB *B = (const TB *)t.B;
    if (TAT == 0) /* rows of A along k: a thread's column fixed */
        load_run<NA, NT / BK>(v->a, A + (int64_t)(tid / BK) * t.lda + k0 + tid % BK, t.lda, k0 + tid % BK < t.kk,
                              tid / BK, t.mt);
    else /* A's k down its rows: a thread's row fixed */
        load_run<NA, NT / BM>(v->a, A + (k0 + tid / BM) * t.lda + tid % BM, t.lda, tid % BM < t.mt, k0 + tid / BM,
                              t.kk);
    if (TBT == 1) /* B's rows are its columns j, k along them */
        load_run<NB, NT / BK>(v->b, B + (int64_t)(tid / BK) * t.ldb + k0 + tid % BK, t.ldb, k0 + tid % BK < t.kk,
                              tid / BK, t.nt);
    else
        load_run<NB, NT / BN>(v->b, B + (k0 + tid / BN) * t.ldb + tid % BN, t.ldb, tid % BN < t.nt, k0 + tid / BN,
                              t.kk);
}
template <int TAT, int TBT, class S> __device__ __forceinline__ void stage_store(S *As, S *Bs, const staged &v) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int u = 0; u < NA; u++) {
        if (TAT == 0) stv(As + (tid / BK + u * (NT / BK)) * LA + tid % BK, v.a[u]);
        else stv(As + (tid % BM) * LA + tid / BM + u * (NT / BM), v.a[u]);
    }
#pragma unroll
    for (int u = 0; u < NB; u++) {
        if (TBT == 1) stv(Bs + (tid % BK) * LB + tid / BK + u * (NT / BK), v.b[u]);
        else stv(Bs + (tid / BN + u * (NT / BN)) * LB + tid % BN, v.b[u]);
    }
}

__device__ __forceinline__ void put(const tile &t, float alpha, float beta, int i, int j, float acc) {
    if (i >= t.mt || j >= t.nt) return;
    float *c = t.C + i * t.ldc + j, v = alpha * acc;
    *c = beta == 0.0f ? v : v + beta * *c;
}

/* bf16 tensor cores: warp w owns rows 32 (w / 2) .. +32, columns 32 (w % 2) .. +32 (2 x 2 fragments) */
template <class TA, class TB, int TAT, int TBT> __device__ void tile_tc(const tile &t, float alpha, float beta) {
    __shared__ __align__(128) bf16 As[BM * LA];
    __shared__ __align__(128) bf16 Bs[BK * LB];
    __shared__ __align__(128) float Cs[BM * LC];
    const int warp = threadIdx.x / 32, wr = (warp / 2) * 32, wc = (warp % 2) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 2; y++) wmma::fill_fragment(acc[x][y], 0.0f);
    staged v;
    if (t.kk > 0) stage_load<TA, TB, TAT, TBT>(&v, t, 0);
    for (int64_t k0 = 0; k0 < t.kk; k0 += BK) {
        stage_store<TAT, TBT>(As, Bs, v);
        __syncthreads();
        if (k0 + BK < t.kk) stage_load<TA, TB, TAT, TBT>(&v, t, k0 + BK); /* in flight while this step is multiplied */
        for (int ks = 0; ks < BK; ks += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b[2];
            for (int x = 0; x < 2; x++) wmma::load_matrix_sync(a[x], As + (wr + 16 * x) * LA + ks, LA);
            for (int y = 0; y < 2; y++) wmma::load_matrix_sync(b[y], Bs + ks * LB + wc + 16 * y, LB);
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++) wmma::mma_sync(acc[x][y], a[x], b[y], acc[x][y]);
        }
        __syncthreads(); /* the staged tiles are read before the next stage
                        overwrites them */
    }
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 2; y++)
            wmma::store_matrix_sync(Cs + (wr + 16 * x) * LC + wc + 16 * y, acc[x][y], LC, wmma::mem_row_major);
    __syncthreads();
    for (int idx = threadIdx.x; idx < BM * BN; idx += NT)
        put(t, alpha, beta, idx / BN, idx % BN, Cs[(idx / BN) * LC + idx % BN]);
}

/* f32: thread (ty, tx) = (tid / 16, tid % 16) owns rows 8 ty .. +8, columns tx + 16 c (c < 4) */
template <int TAT, int TBT> __device__ void tile_f32(const tile &t, float alpha, float beta) {
    __shared__ float As[BM * LA];
    __shared__ float Bs[BK * LB];
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    float acc[8][4];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;
    staged v;
    if (t.kk > 0) stage_load<float, float, TAT, TBT>(&v, t, 0);
    for (int64_t k0 = 0; k0 < t.kk; k0 += BK) {
        stage_store<TAT, TBT>(As, Bs, v);
        __syncthreads();
        if (k0 + BK < t.kk) stage_load<float, float, TAT, TBT>(&v, t, k0 + BK);
        for (int k = 0; k < BK; k++) {
            float a[8], b[4];
            for (int r = 0; r < 8; r++) a[r] = As[(ty * 8 + r) * LA + k];
            for (int c = 0; c < 4; c++) b[c] = Bs[k * LB + tx + 16 * c];
            for (int r = 0; r < 8; r++)
                for (int c = 0; c < 4; c++) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++) put(t, alpha, beta, ty * 8 + r, tx + 16 * c, acc[r][c]);
}

/* the tile kernel of a precision (only the chosen one's shared arrays are in a launch) */
template <class TA, class TB, bool TC, int TAT, int TBT> struct tile_run {
    static __device__ void go(const tile &t, float alpha, float beta) { tile_tc<TA, TB, TAT, TBT>(t, alpha, beta); }
};
template <int TAT, int TBT> struct tile_run<float, float, false, TAT, TBT> {
    static __device__ void go(const tile &t, float alpha, float beta) { tile_f32<TAT, TBT>(t, alpha, beta); }
};

/* TAT, TBT: the layout's transposes (wgrad: 1, 0; rows: 0, p.tb) */
template <class TA, class TB, bool TC, int TAT, int TBT> __global__ void __launch_bounds__(NT) k_grouped(gparams p) {
    tile t;
    if (!p.wgrad) {
        int64_t r0;
        int e, mt;
        vc_moe_rows_tile<BM, NT>(p.off, p.E, &r0, &e, &mt);
        if (mt == 0) return;
        int64_t n0 = (int64_t)blockIdx.y * BN;
        t.A = (const TA *)p.A + r0 * p.lda;
        t.B = (const TB *)p.B + (int64_t)e * p.N * p.K + (p.tb ? n0 * p.K : n0);
        t.C = p.C + r0 * p.ldc + n0;
        t.lda = p.lda, t.ldb = p.tb ? p.K : p.N, t.ldc = p.ldc, t.kk = p.K;
        t.ta = 0, t.tb = p.tb, t.mt = mt, t.nt = (int)(p.N - n0 < BN ? p.N - n0 : BN);
    } else {
        const int e = blockIdx.y;
        const int64_t nn = (p.N + BN - 1) / BN, m0 = (int64_t)(blockIdx.x / nn) * BM,
                      n0 = (int64_t)(blockIdx.x % nn) * BN;
        const int64_t lo = p.off[e], rows = p.off[e + 1] - lo;
        if (rows <= 0 && p.beta == 1.0f) return;
        t.A = (const TA *)p.A + lo * p.lda + m0;
        t.B = (const TB *)p.B + lo * p.ldb + n0;
        t.C = p.C + (int64_t)e * p.M * p.N + m0 * p.N + n0;
        t.lda = p.lda, t.ldb = p.ldb, t.ldc = p.N, t.kk = rows > 0 ? rows : 0;
        t.ta = 1, t.tb = 0, t.mt = (int)(p.M - m0 < BM ? p.M - m0 : BM), t.nt = (int)(p.N - n0 < BN ? p.N - n0 : BN);
    }
    tile_run<TA, TB, TC, TAT, TBT>::go(t, p.alpha, p.beta);
}

template <int TAT, int TBT> void launch_as(const gparams &p, int a16, int b16, dim3 grid) {
    if (vc_matmul_precision() != VC_PREC_BF16)
        k_grouped<float, float, false, TAT, TBT><<<grid, NT, 0, vc_cu_stream()>>>(p);
    else if (a16 && b16)
        k_grouped<bf16, bf16, true, TAT, TBT><<<grid, NT, 0, vc_cu_stream()>>>(p);
    else if (a16)
        k_grouped<bf16, float, true, TAT, TBT><<<grid, NT, 0, vc_cu_stream()>>>(p);
    else if (b16)
        k_grouped<float, bf16, true, TAT, TBT><<<grid, NT, 0, vc_cu_stream()>>>(p);
    else
        k_grouped<float, float, true, TAT, TBT><<<grid, NT, 0, vc_cu_stream()>>>(p);
}

void launch(const gparams &p, int a16, int b16, dim3 grid, const char *op) {
    if (vc_matmul_precision() != VC_PREC_BF16 && (a16 || b16)) {
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, "bf16 operands need bf16 matmul precision");
        return;
    }
    if (p.wgrad) launch_as<1, 0>(p, a16, b16, grid);
    else if (p.tb) launch_as<0, 1>(p, a16, b16, grid);
    else launch_as<0, 0>(p, a16, b16, grid);
    vc_cu_end(op);
}

int sizes_ok(int64_t E, int64_t a, int64_t b, const char *op) {
    if (E <= 0 || E > 65535 || a > INT_MAX || b > (int64_t)BN * 65535) {
        char what[128];
        snprintf(what, sizeof what, "%lld experts with %lld x %lld blocks not supported", (long long)E, (long long)a,
                 (long long)b);
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, what);
        return 0;
    }
    return 1;
}

} // namespace

void vc_cu_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E) {
    const char *op = "moe grouping";
    if (!vc_cu_begin(op)) return;
    int64_t n = T * K;
    size_t sh = sizeof(unsigned) * 2 * (size_t)E + sizeof(int) * GC;
    if (E <= 0 || E > 16384 || K <= 0 || n > INT_MAX) {
        char what[128];
        snprintf(what, sizeof what, "%lld experts, %lld choices not supported", (long long)E, (long long)n);
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, what);
        return;
    }
    if (!vc_cu_ok(cudaFuncSetAttribute(k_moe_group, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh), op)) return;
    k_moe_group<<<1, GT, sh, vc_cu_stream()>>>(off, tok, inv, ids, n, (int)K, (int)E);
    vc_cu_end(op);
}

void vc_cu_gemm_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                             const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc) {
    const char *op = "moe grouped gemm";
    if (!vc_cu_begin(op) || R <= 0 || N <= 0) return;
    int64_t tiles = (R + BM - 1) / BM + (E < R ? E : R);
    if (!sizes_ok(E, tiles, N, op)) return;
    const void *b = B;
    int b16 = 0;
    if (vc_matmul_precision() == VC_PREC_BF16) { /* a weight's registered bf16 copy, when there is one */
        const void *h = vc_cu_bf16_copy(B, E * (tb ? N : K), tb ? K : N, tb ? K : N);
        if (h) b = h, b16 = 1;
        /* an f32 A held in bf16 (the experts' gate / up gradients written straight into their held copies) */
        const void *ha = a16 ? NULL : vc_cu_bf16_copy((const float *)A, R, K, lda);
        if (ha) A = ha, a16 = 1;
    }
    const int mma = vc_cu_moe_mma_rows(tb, E, off, R, N, K, alpha, A, a16, lda, b, b16, beta, C, ldc, op);
    if (mma) {
        if (mma > 0) vc_cu_end(op);
        return;
    }
    gparams p = {0, tb, (int)E, off, 0, N, K, alpha, beta, A, b, lda, 0, ldc, C};
    launch(p, a16, b16, dim3((unsigned)tiles, (unsigned)((N + BN - 1) / BN)), op);
}

void vc_cu_gemm_wgrad_grouped(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                              int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C) {
    const char *op = "moe grouped weight gradient";
    if (!vc_cu_begin(op) || M <= 0 || N <= 0) return;
    int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    if (!sizes_ok(E, tiles, 0, op)) return;
    /* A held in bf16 (the experts' gate / up gradients): its rows are all the groups' (off[E] of them, on the device);
     * the lookup checks the first and the held copy holds them all */
    const void *h = vc_matmul_precision() == VC_PREC_BF16 ? vc_cu_bf16_copy(A, 1, M, lda) : NULL, *a = h ? h : A;
    const int a16 = h != NULL;
    const int mma = vc_cu_moe_mma_wgrad(E, off, M, N, alpha, a, a16, lda, B, b16, ldb, beta, C, op);
    if (mma) {
        if (mma > 0) vc_cu_end(op);
        return;
    }
    gparams p = {1, 0, (int)E, off, M, N, 0, alpha, beta, a, B, lda, ldb, 0, C};
    launch(p, a16, b16, dim3((unsigned)tiles, (unsigned)E), op);
}

/* ---------------- experts' biases over the grouped rows ---------------- */
/* block (e, y): rows off[e] + y, + gridDim.y, ... of group e; threads over the columns */
__global__ void k_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t C) {
    const int64_t e = blockIdx.x;
    for (int64_t r = off[e] + blockIdx.y; r < off[e + 1]; r += gridDim.y)
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) Y[r * C + c] += b[e * C + c];
}

/* block (e, x): columns 256 x + thread of group e, its rows summed in ascending order */
__global__ void k_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t C) {
    const int64_t e = blockIdx.x, c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0;
    for (int64_t r = off[e]; r < off[e + 1]; r++) acc += dY[r * C + c];
    db[e * C + c] += acc;
}

void vc_cu_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C) {
    if (!vc_cu_begin("moe expert bias") || E <= 0 || C <= 0) return;
    k_moe_bias_fwd<<<dim3((unsigned)E, 16), 256, 0, vc_cu_stream()>>>(Y, b, off, C);
    vc_cu_end("moe expert bias");
}

void vc_cu_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C) {
    if (!vc_cu_begin("moe expert bias backward") || E <= 0 || C <= 0) return;
    k_moe_bias_bwd<<<dim3((unsigned)E, (unsigned)((C + 255) / 256)), 256, 0, vc_cu_stream()>>>(db, dY, off, C);
    vc_cu_end("moe expert bias backward");
}
