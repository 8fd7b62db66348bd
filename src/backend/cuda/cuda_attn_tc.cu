/* bf16 tensor-core flash attention (used when the matmul precision is VC_PREC_BF16 and head_dim =
 * v_head_dim is 64, 80, 96, 128 or 256, or 192 / 128 as in DeepSeek's MLA; shared memory per block stays under sm_90's 227 KiB, checked
 * below). q, k, v, o, dO stay f32 in memory; each tile is rounded to bf16 (nearest
 * even) when it is copied to shared memory, products run on nvcuda::wmma 16x16x16 bf16 fragments with
 * f32 accumulators, and the softmax statistics are f32: the numerics of PyTorch's bf16 SDPA on f32
 * activations under autocast.
 * Forward: one block of 4 warps per (sequence, head, 64 queries); warp w owns query rows 16w..16w+15.
 * Per key tile of 64: S = Q K^T (f32, to shared), the warp's online softmax on its rows (m, l in f32,
 * two lanes per row), P rounded to bf16, O (f32 in shared) rescaled and O += P V on tensor cores.
 * Saves lse = m + log l like the f32 kernel.
 * Backward (FA2): D = rowsum(dO * O) comes from the caller. dK/dV kernel: one block per (sequence,
 * kv head, 64 keys), warp w owns keys 16w..; it loops over the group's heads and the query tiles that
 * can see its keys, recomputes S^T = K Q^T and dP^T = V dO^T, P^T = exp(S^T - lse), dS^T = P^T (dP^T - D)
 * (times 1 - tanh^2 under soft-cap), and accumulates dV += P^T dO and dK += dS^T Q in fragments that
 * stay in registers (at heads of 256, two blocks of half their columns each). dQ kernel: one block per (sequence, head, 64 queries) accumulates dQ += dS K over
 * the key tiles. Every output element is owned by one block and summed in a fixed order: no atomics,
 * the same bits run to run. */
#include "cuda_attn_common.h"
#include "cuda_attn_mma.h"
#include <cuda_bf16.h>
#include <mma.h>
#include <stdio.h>
#include <stdlib.h>

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

namespace {

typedef vc_cu_attn_seq tc_seq;

constexpr int TB = 64;       /* query and key tile */
constexpr int NW = 4;        /* warps per block; warp w owns rows 16w .. 16w + 15 of a tile */
constexpr int NTH = NW * 32;
constexpr int PADH = 8;      /* bf16 row padding (ldm must be a multiple of 8 halves) */
constexpr int PADF = 4;      /* f32 row padding (multiple of 4 floats) */

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;


/* dst[r][c] (row pitch D + PADH, bf16) = bf16(src[r * stride + c]) for r < rows; zero rows after: the register-tiled
 * kernels' loader (its tiles and blocks are these: TB = TQ, NW = NWM), up to 8 float4 loads a thread issued before
 * their stores (this one's own loop stored each float4 before loading the next: a memory latency each; all of a
 * thread's loads at once spilled up to 84 bytes in these kernels). Whole block. */
static_assert(TB == TQ && NW == NWM && PADH == PADM, "the tiles of cuda_attn_mma.h");
template <int D>
__device__ __forceinline__ void tc_load(bf16 *dst, const float *src, int64_t stride, int rows) {
    mma_load_rows<D, TQ, 8>(dst, D + PADH, src, stride, rows);
}

/* C[16 x 16 * NT] (f32, row pitch ldc) = A[16 x K] B: A row-major bf16 (pitch lda); B is K x (16 NT)
 * given as rows of the second operand: col_major (B[k][n] = Bm[n][k], pitch ldb) when TRANS_B. */
template <int K, int NT, bool TRANS_B>
__device__ __forceinline__ void tc_mm_store(float *C, int ldc, const bf16 *A, int lda, const bf16 *B, int ldb) {
    #pragma unroll
    for (int n = 0; n < NT; n++) {
        frag_c acc;
        wmma::fill_fragment(acc, 0.0f);
        #pragma unroll
        for (int k = 0; k < K; k += 16) {
            frag_a a;
            wmma::load_matrix_sync(a, A + k, lda);
            if (TRANS_B) {
                frag_b_col b;
                wmma::load_matrix_sync(b, B + (n * 16) * ldb + k, ldb);
                wmma::mma_sync(acc, a, b, acc);
            } else {
                frag_b_row b;
                wmma::load_matrix_sync(b, B + k * ldb + n * 16, ldb);
                wmma::mma_sync(acc, a, b, acc);
            }
        }
        wmma::store_matrix_sync(C + n * 16, acc, ldc, wmma::mem_row_major);
    }
}

/* ---------------- forward ---------------- */
template <int D, int DV>
struct fwd_smem {
    static constexpr int LQ = D + PADH, LV = DV + PADH, LS = TB + PADF, LP = TB + PADH, LO = DV + PADF;
    static constexpr size_t bytes =
        (size_t)TB * LQ * 2 * 2 + (size_t)TB * LV * 2 + (size_t)TB * LS * 4 + (size_t)TB * LP * 2 + (size_t)TB * LO * 4;
};

template <int D, int DV>
__global__ void __launch_bounds__(NTH) k_attn_fwd_tc(float *o, float *lse, const float *q, attn_params p) {
    typedef fwd_smem<D, DV> L;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *Qs = reinterpret_cast<bf16 *>(smem_raw), *Ks = Qs + TB * L::LQ, *Vs = Ks + TB * L::LQ;
    float *Ss = reinterpret_cast<float *>(Vs + TB * L::LV);
    bf16 *Ps = reinterpret_cast<bf16 *>(Ss + TB * L::LS);
    float *Os = reinterpret_cast<float *>(Ps + TB * L::LP);
    const int2 bi = p.blk[blockIdx.x];
    const tc_seq sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float slope = vc_attn_slope(p, h);
    const int64_t qb = bi.y, nr = sm.qlen - qb < TB ? sm.qlen - qb : TB, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t qstride = (int64_t)p.nh * D, ostride = (int64_t)p.nh * DV;
    tc_load<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * D, qstride, (int)nr);
    for (int idx = threadIdx.x; idx < TB * L::LO; idx += NTH) Os[idx] = 0.0f;
    __syncthreads(); /* Q and the zeroed O rows are seen by every warp, even with no key tile */
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    /* lane pair (2 lanes per row): row r = 16 warp + lane / 2; the pair interleaves the columns
     * (lane half takes columns 2 j + half, j rotated by the row) so the 32 lanes hit 32 banks */
    const int r = warp * 16 + lane / 2, half = lane & 1;
    const int64_t pos = pos0 + r;
    float m = -INFINITY, l = 0.0f;
    for (int64_t kb = j0; kb < j1; kb += TB) {
        int nk = (int)(j1 - kb < TB ? j1 - kb : TB);
        __syncthreads(); /* the previous tile's K / V are no longer read */
        tc_load<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, nk);
        tc_load<DV>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * DV, p.vstride, nk);
        __syncthreads();
        tc_mm_store<D, TB / 16, true>(Ss + warp * 16 * L::LS, L::LS, Qs + warp * 16 * L::LQ, L::LQ, Ks, L::LQ);
        __syncwarp();
        float *srow = Ss + r * L::LS;
        float mx = -INFINITY;
        for (int c = 0; c < TB / 2; c++) {
            int col = 2 * ((c + r) & (TB / 2 - 1)) + half;
            int64_t key = kb + col;
            bool vis = r < nr && key < j1 && vc_attn_visible(p, sm, pos, key);
            float s = vis ? vc_attn_score(p, srow[col], slope, pos, key) : -INFINITY;
            srow[col] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx), sum = 0.0f;
        float corr = mn == -INFINITY ? 1.0f : expf(m - mn);
        bf16 *prow = Ps + r * L::LP;
        for (int c = 0; c < TB / 2; c++) {
            int col = 2 * ((c + r) & (TB / 2 - 1)) + half;
            float e = mn == -INFINITY ? 0.0f : expf(srow[col] - mn);
            sum += e;
            prow[col] = __float2bfloat16_rn(e);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * corr + sum;
        m = mn;
        float *orow = Os + r * L::LO;
        for (int c = 0; c < DV / 2; c++) orow[2 * ((c + r) % (DV / 2)) + half] *= corr;
        __syncwarp();
        /* O[16 rows of the warp] += P V */
        #pragma unroll
        for (int n = 0; n < DV / 16; n++) {
            frag_c acc;
            float *ot = Os + warp * 16 * L::LO + n * 16;
            wmma::load_matrix_sync(acc, ot, L::LO, wmma::mem_row_major);
            #pragma unroll
            for (int k = 0; k < TB; k += 16) {
                frag_a a;
                frag_b_row b;
                wmma::load_matrix_sync(a, Ps + warp * 16 * L::LP + k, L::LP);
                wmma::load_matrix_sync(b, Vs + k * L::LV + n * 16, L::LV);
                wmma::mma_sync(acc, a, b, acc);
            }
            wmma::store_matrix_sync(ot, acc, L::LO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    /* 1 / l per row into the (no longer used) S rows of the warp, then coalesced row writes */
    float sf = vc_attn_sink_fold(p, h, &m, &l);
    if (half == 0) {
        Ss[r * L::LS] = l > 0 ? sf / l : 0.0f;
        if (lse && r < nr) lse[(sm.q0 + qb + r) * p.nh + h] = l > 0 ? m + logf(l) : -INFINITY;
    }
    __syncwarp();
    for (int e = lane; e < 16 * DV; e += 32) {
        int rr = warp * 16 + e / DV, c = e % DV;
        if (rr < nr) o[(sm.q0 + qb + rr) * ostride + (int64_t)h * DV + c] = Os[rr * L::LO + c] * Ss[rr * L::LS];
    }
}

/* P and dS of one element from the recomputed score and dP (softmax backward, soft-cap chain rule) */
__device__ __forceinline__ void tc_p_ds(const attn_params &p, float dot, float dp, float L, float Dr, float *P,
                                        float *ds, float slope, int64_t pos, int64_t key) {
    float sc = vc_attn_score(p, dot, slope, pos, key);
    *P = expf(sc - L);
    float g = *P * (dp - Dr);
    if (p.cap > 0) {
        float t = sc / p.cap;
        g *= 1.0f - t * t;
    }
    *ds = g;
}

/* ---------------- backward: dK, dV ---------------- */
template <int D, int DV>
struct dkdv_smem {
    static constexpr int LQ = D + PADH, LV = DV + PADH, LS = TB + PADF, LP = TB + PADH;
    static constexpr size_t tiles = (size_t)TB * LQ * 2 * 2 + (size_t)TB * LV * 2 * 2; /* K, Q, V, dO */
    static constexpr size_t f32 = (size_t)TB * LS * 4 * 2;                            /* S^T, dP^T */
    static constexpr size_t out = (size_t)TB * ((D > DV ? D : DV) + PADF) * 4;         /* staging */
    static constexpr size_t bytes = tiles + (f32 > out ? f32 : out) + (size_t)TB * LP * 2 * 2 + TB * 4 * 2;
    /* blocks a key tile and kv head: at heads of 256 a warp's dK and dV fragments (512 floats a lane) went to local
     * memory (8.6 KB of spill a thread); each of two blocks keeps half their columns (S^T and dP^T formed by both) */
    static constexpr int parts = D + DV > 384 ? 2 : 1;
};

template <int D, int DV>
__global__ void __launch_bounds__(NTH) k_attn_bwd_dkdv_tc(const float *dout, const float *lse, const float *q,
                                                          attn_params p) {
    typedef dkdv_smem<D, DV> L;
    constexpr int LQ = L::LQ, LV = L::LV, LS = L::LS, LP = L::LP;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *Ks = reinterpret_cast<bf16 *>(smem_raw), *Qs = Ks + TB * LQ, *Vs = Qs + TB * LQ, *dOs = Vs + TB * LV;
    float *ST = reinterpret_cast<float *>(dOs + TB * LV), *dPT = ST + TB * LS;
    unsigned char *after = reinterpret_cast<unsigned char *>(ST) + (L::f32 > L::out ? L::f32 : L::out);
    bf16 *PT = reinterpret_cast<bf16 *>(after), *dST = PT + TB * LP;
    float *Ls = reinterpret_cast<float *>(dST + TB * LP), *Dd = Ls + TB;
    const int2 bi = p.blk[blockIdx.x];
    const tc_seq sm = p.seq[bi.x];
    constexpr int DP = D / L::parts, DVP = DV / L::parts; /* the block's columns of dK and dV */
    static_assert(DP % 16 == 0 && DVP % 16 == 0, "whole fragments a part");
    const int kvh = blockIdx.y / L::parts, part = blockIdx.y % L::parts, grp = p.nh / p.nkv, warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int64_t kb = bi.y, nk = sm.kvlen - kb < TB ? sm.kvlen - kb : TB, off = sm.kvlen - sm.qlen;
    const int64_t qstride = (int64_t)p.nh * D, ostride = (int64_t)p.nh * DV;
    /* queries that can see a key of this block (causal, window, chunk) */
    int64_t i0, i1;
    vc_attn_query_range(p, kb, nk, off, sm.qlen, &i0, &i1);
    if (i0 >= i1) return; /* no query sees these keys: their gradients get nothing (+= 0) */
    tc_load<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, (int)nk);
    tc_load<DV>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * DV, p.vstride, (int)nk);
    frag_c dk[DP / 16], dv[DVP / 16];
    #pragma unroll
    for (int c = 0; c < DP / 16; c++) wmma::fill_fragment(dk[c], 0.0f);
    #pragma unroll
    for (int c = 0; c < DVP / 16; c++) wmma::fill_fragment(dv[c], 0.0f);
    const int rw = warp * 16; /* the warp's first key row */
    for (int g = 0; g < grp; g++) {
        const int h = kvh * grp + g;
        const float slope = vc_attn_slope(p, h);
        for (int64_t qb = i0; qb < i1; qb += TB) {
            int nq = (int)(i1 - qb < TB ? i1 - qb : TB);
            __syncthreads(); /* the previous Q / dO / L / D are no longer read */
            tc_load<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * D, qstride, nq);
            tc_load<DV>(dOs, dout + (sm.q0 + qb) * ostride + (int64_t)h * DV, ostride, nq);
            for (int i = threadIdx.x; i < TB; i += NTH) {
                Ls[i] = i < nq ? lse[(sm.q0 + qb + i) * p.nh + h] : 0.0f;
                Dd[i] = i < nq ? p.D[(sm.q0 + qb + i) * p.nh + h] : 0.0f;
            }
            __syncthreads();
            /* S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys */
            tc_mm_store<D, TB / 16, true>(ST + rw * LS, LS, Ks + rw * LQ, LQ, Qs, LQ);
            tc_mm_store<DV, TB / 16, true>(dPT + rw * LS, LS, Vs + rw * LV, LV, dOs, LV);
            __syncwarp();
            for (int e = lane; e < 16 * TB; e += 32) {
                int kr = rw + e / TB, qc = e % TB;
                int64_t key = kb + kr;
                float P = 0.0f, ds = 0.0f;
                if (qc < nq && kr < nk && vc_attn_visible(p, sm, off + qb + qc, key))
                    tc_p_ds(p, ST[kr * LS + qc], dPT[kr * LS + qc], Ls[qc], Dd[qc], &P, &ds, slope, off + qb + qc, key);
                PT[kr * LP + qc] = __float2bfloat16_rn(P);
                dST[kr * LP + qc] = __float2bfloat16_rn(ds);
            }
            __syncwarp();
            /* dV += P^T dO, dK += dS^T Q (k dimension: the 64 queries) */
            #pragma unroll
            for (int k = 0; k < TB; k += 16) {
                frag_a a;
                wmma::load_matrix_sync(a, PT + rw * LP + k, LP);
                #pragma unroll
                for (int c = 0; c < DVP / 16; c++) {
                    frag_b_row b;
                    wmma::load_matrix_sync(b, dOs + k * LV + part * DVP + c * 16, LV);
                    wmma::mma_sync(dv[c], a, b, dv[c]);
                }
                wmma::load_matrix_sync(a, dST + rw * LP + k, LP);
                #pragma unroll
                for (int c = 0; c < DP / 16; c++) {
                    frag_b_row b;
                    wmma::load_matrix_sync(b, Qs + k * LQ + part * DP + c * 16, LQ);
                    wmma::mma_sync(dk[c], a, b, dk[c]);
                }
            }
        }
    }
    /* out: stage each fragment row block in shared memory, then dK += scale dK, dV += dV */
    __syncthreads(); /* every warp is done with S^T / dP^T: the staging area reuses them */
    float *St = ST;
    constexpr int LO = (D > DV ? D : DV) + PADF;
    #pragma unroll
    for (int c = 0; c < DP / 16; c++) wmma::store_matrix_sync(St + rw * LO + c * 16, dk[c], LO, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 16 * DP; e += 32) {
        int kr = rw + e / DP, c = e % DP;
        if (kr < nk) sm.dk[(kb + kr) * p.kstride + (int64_t)kvh * D + part * DP + c] += p.scale * St[kr * LO + c];
    }
    __syncwarp();
    #pragma unroll
    for (int c = 0; c < DVP / 16; c++) wmma::store_matrix_sync(St + rw * LO + c * 16, dv[c], LO, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 16 * DVP; e += 32) {
        int kr = rw + e / DVP, c = e % DVP;
        if (kr < nk) sm.dv[(kb + kr) * p.vstride + (int64_t)kvh * DV + part * DVP + c] += St[kr * LO + c];
    }
}

/* ---------------- backward: dQ ---------------- */
template <int D, int DV>
struct dq_smem {
    static constexpr int LQ = D + PADH, LV = DV + PADH, LS = TB + PADF, LP = TB + PADH;
    static constexpr size_t tiles = (size_t)TB * LQ * 2 * 2 + (size_t)TB * LV * 2 * 2; /* Q, K, dO, V */
    static constexpr size_t f32 = (size_t)TB * LS * 4 * 2;                            /* S, dP */
    static constexpr size_t out = (size_t)TB * (D + PADF) * 4;
    static constexpr size_t bytes = tiles + (f32 > out ? f32 : out) + (size_t)TB * LP * 2 + TB * 4 * 2;
};

template <int D, int DV>
__global__ void __launch_bounds__(NTH) k_attn_bwd_dq_tc(float *dq, const float *dout, const float *lse,
                                                        const float *q, attn_params p) {
    typedef dq_smem<D, DV> L;
    constexpr int LQ = L::LQ, LV = L::LV, LS = L::LS, LP = L::LP;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *Qs = reinterpret_cast<bf16 *>(smem_raw), *Ks = Qs + TB * LQ, *dOs = Ks + TB * LQ, *Vs = dOs + TB * LV;
    float *Ss = reinterpret_cast<float *>(Vs + TB * LV), *dPs = Ss + TB * LS;
    unsigned char *after = reinterpret_cast<unsigned char *>(Ss) + (L::f32 > L::out ? L::f32 : L::out);
    bf16 *dSs = reinterpret_cast<bf16 *>(after);
    float *Ls = reinterpret_cast<float *>(dSs + TB * LP), *Dd = Ls + TB;
    const int2 bi = p.blk[blockIdx.x];
    const tc_seq sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float slope = vc_attn_slope(p, h);
    const int64_t qb = bi.y, nr = sm.qlen - qb < TB ? sm.qlen - qb : TB, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t qstride = (int64_t)p.nh * D, ostride = (int64_t)p.nh * DV;
    tc_load<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * D, qstride, (int)nr);
    tc_load<DV>(dOs, dout + (sm.q0 + qb) * ostride + (int64_t)h * DV, ostride, (int)nr);
    for (int i = threadIdx.x; i < TB; i += NTH) {
        Ls[i] = i < nr ? lse[(sm.q0 + qb + i) * p.nh + h] : 0.0f;
        Dd[i] = i < nr ? p.D[(sm.q0 + qb + i) * p.nh + h] : 0.0f;
    }
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    frag_c acc[D / 16];
    #pragma unroll
    for (int c = 0; c < D / 16; c++) wmma::fill_fragment(acc[c], 0.0f);
    const int rw = warp * 16;
    for (int64_t kb = j0; kb < j1; kb += TB) {
        int nk = (int)(j1 - kb < TB ? j1 - kb : TB);
        __syncthreads();
        tc_load<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, nk);
        tc_load<DV>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * DV, p.vstride, nk);
        __syncthreads();
        tc_mm_store<D, TB / 16, true>(Ss + rw * LS, LS, Qs + rw * LQ, LQ, Ks, LQ);
        tc_mm_store<DV, TB / 16, true>(dPs + rw * LS, LS, dOs + rw * LV, LV, Vs, LV);
        __syncwarp();
        for (int e = lane; e < 16 * TB; e += 32) {
            int r = rw + e / TB, kc = e % TB;
            int64_t key = kb + kc;
            float P = 0.0f, ds = 0.0f;
            if (r < nr && key < j1 && vc_attn_visible(p, sm, pos0 + r, key))
                tc_p_ds(p, Ss[r * LS + kc], dPs[r * LS + kc], Ls[r], Dd[r], &P, &ds, slope, pos0 + r, key);
            dSs[r * LP + kc] = __float2bfloat16_rn(ds);
        }
        __syncwarp();
        #pragma unroll
        for (int k = 0; k < TB; k += 16) {
            frag_a a;
            wmma::load_matrix_sync(a, dSs + rw * LP + k, LP);
            #pragma unroll
            for (int c = 0; c < D / 16; c++) {
                frag_b_row b;
                wmma::load_matrix_sync(b, Ks + k * LQ + c * 16, LQ);
                wmma::mma_sync(acc[c], a, b, acc[c]);
            }
        }
    }
    __syncthreads(); /* S / dP are no longer read by any warp: the staging area reuses them */
    constexpr int LO = D + PADF;
    float *St = Ss;
    #pragma unroll
    for (int c = 0; c < D / 16; c++) wmma::store_matrix_sync(St + rw * LO + c * 16, acc[c], LO, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 16 * D; e += 32) {
        int r = rw + e / D, c = e % D;
        if (r < nr) dq[(sm.q0 + qb + r) * qstride + (int64_t)h * D + c] += p.scale * St[r * LO + c];
    }
}

/* ---------------- host side ---------------- */
template <int D, int DV>
void tc_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    vc_cu_attn_launch(k_attn_fwd_tc<D, DV>, d, TB, 0, d->n_head, NTH, fwd_smem<D, DV>::bytes, NULL, op, o, lse, q);
}

template <int D, int DV>
void tc_bwd(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d, const float *Dd,
            const char *op) {
    if (dq)
        vc_cu_attn_launch(k_attn_bwd_dq_tc<D, DV>, d, TB, 0, d->n_head, NTH, dq_smem<D, DV>::bytes, Dd, op, dq, dout,
                          lse, q);
    if (d->dk_seq && d->dv_seq)
        vc_cu_attn_launch(k_attn_bwd_dkdv_tc<D, DV>, d, TB, 1, d->n_kv_head * dkdv_smem<D, DV>::parts, NTH,
                          dkdv_smem<D, DV>::bytes, Dd, op, dout, lse, q);
}

} // namespace

static_assert(fwd_smem<256, 256>::bytes <= 232448 && dq_smem<256, 256>::bytes <= 232448 &&
                  dkdv_smem<256, 256>::bytes <= 232448,
              "head dim 256 needs more shared memory than sm_90 has");

int vc_cu_attn_tc_eligible(const vc_attn_desc *d) {
    if (vc_matmul_precision() != VC_PREC_BF16 || d->page_tokens > 0) return 0;
    const char *env = getenv("VERLC_CUDA_ATTN_F32");
    if (env && atoi(env)) return 0;
    if (d->head_dim == 192 && d->v_head_dim == 128) return 1; /* DeepSeek MLA (qk nope + rope, v) */
    if (d->head_dim != d->v_head_dim) return 0;
    switch (d->head_dim) {
    case 64: case 80: case 96: case 128: case 256: return 1; /* Qwen/LLaMA, Phi-2, Phi-3, Gemma */
    default: return 0;
    }
}

void vc_cu_attn_fwd_tc(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    if (vc_cu_attn_fwd_mma(o, lse, q, d, op)) return; /* the register-tiled kernel (cuda_attn_mma.cu) */
    switch (d->head_dim) {
    case 64: tc_fwd<64, 64>(o, lse, q, d, op); break;
    case 80: tc_fwd<80, 80>(o, lse, q, d, op); break;
    case 96: tc_fwd<96, 96>(o, lse, q, d, op); break;
    case 128: tc_fwd<128, 128>(o, lse, q, d, op); break;
    case 192: tc_fwd<192, 128>(o, lse, q, d, op); break;
    default: tc_fwd<256, 256>(o, lse, q, d, op); break;
    }
}

void vc_cu_attn_bwd_tc(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                       const float *D, const char *op) {
    const int done = vc_cu_attn_bwd_mma(dq, dout, lse, q, d, D, op); /* the register-tiled kernels */
    if (done & 2) return;
    if (done) dq = NULL; /* dQ done; dK, dV (Llama 4's chunks) here */
    switch (d->head_dim) {
    case 64: tc_bwd<64, 64>(dq, dout, lse, q, d, D, op); break;
    case 80: tc_bwd<80, 80>(dq, dout, lse, q, d, D, op); break;
    case 96: tc_bwd<96, 96>(dq, dout, lse, q, d, D, op); break;
    case 128: tc_bwd<128, 128>(dq, dout, lse, q, d, D, op); break;
    case 192: tc_bwd<192, 128>(dq, dout, lse, q, d, D, op); break;
    default: tc_bwd<256, 256>(dq, dout, lse, q, d, D, op); break;
    }
}
