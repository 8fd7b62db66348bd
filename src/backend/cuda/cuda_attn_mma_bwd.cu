/* bf16 tensor-core flash attention backward with the tiles in registers (mma.sync m16n8k16; the layout of
 * cuda_attn_mma.cu's forward), heads of 64, 80, 96 or 128 (keys and values alike): the numerics of cuda_attn_tc.cu's
 * backward (P recomputed from the saved lse, dS = P (dP - D) times 1 - tanh^2 under soft-cap, P and dS rounded to bf16
 * for their products, f32 sums), the same two kernels and blocks:
 * - dQ: one block of 4 warps per (sequence, head, 64 queries), warp w owning query rows 16w .. (heads of 64: 128
 *   queries a block, each warp two m-tiles of 16 rows, as the forward); per key tile
 *   S = Q K^T and dP = dO V^T in registers, dS formed where they lie and used as the A fragments of dQ += dS K
 *   (K also stored transposed, so its B fragments are 32-bit loads);
 * - dK, dV: one block per (sequence, key/value head, 64 keys), warp w owning keys 16w ..; over the group's heads and
 *   the query tiles that see its keys, S^T = K Q^T and dP^T = V dO^T, then dV += P^T dO and dK += dS^T Q with
 *   dO and Q transposed in shared memory. Its accumulators stay in registers to the end. With few blocks (GQA with
 *   few kv heads) the group's heads are split over several blocks, each storing its sums for a second kernel that
 *   adds them in order (dkdv_split).
 * Every output element is owned by one lane of one block (or one thread of the split sums) and summed in a fixed
 * order: no atomics, the same bits run to run. Llama 4's chunked attention keeps cuda_attn_tc.cu's dK/dV kernel (its
 * chunk test would divide per key); VERLC_CUDA_ATTN_MMA=0: cuda_attn_tc.cu's kernels for both. */
#include "cuda_attn_mma.h"
#include <stdlib.h>

namespace {

/* P and dS of a visible element from its raw dot product and dP (softmax backward, the soft-cap chain rule); LL: the
 * row's lse times log2(e) (P = 2^(score log2 e - LL), the forward's exponential) */
template <class P>
__device__ __forceinline__ void mma_p_ds(const P &p, float dot, float dp, float LL, float Dr, float slope, int64_t pos,
                                         int64_t key, float *pr, float *ds) {
    const float sc = vc_attn_score(p, dot, slope, pos, key), e = vc_ex2(fmaf(sc, VC_LOG2E, -LL));
    float gr = e * (dp - Dr);
    if (p.cap > 0) {
        const float t = sc / p.cap;
        gr *= 1.0f - t * t;
    }
    *pr = e;
    *ds = gr;
}
/* mma_p_ds of a score that is the scaled dot product (no soft-cap, ALiBi or selection): the same bits */
template <class P>
__device__ __forceinline__ void mma_p_ds_plain(const P &p, float dot, float dp, float LL, float Dr, float *pr,
                                               float *ds) {
    const float e = vc_ex2(fmaf(p.scale * dot, VC_LOG2E, -LL));
    *pr = e;
    *ds = e * (dp - Dr);
}

/* ---------------- dQ ---------------- */
/* PIPE: K and V tiles double-buffered from the mirrors by cp.async (the forward's pipeline), K^T not stored: dQ's B
 * fragments by ldmatrix.trans from the K tile (the same bits). MT (pipelined form only): each warp owns MT m-tiles of
 * 16 query rows (a block 64 MT queries), each key tile copied serving MT times the queries and each K fragment of
 * dQ += dS K feeding MT mma (S and dP an m-tile at a time); a row's products and tile order are those of MT 1 (the
 * same bits) */
template <int D, bool PIPE, int MT = 1>
struct dq_mma_smem {
    static constexpr int LQ = D + PADM, LT = TQ + PADM, BR = NWM * 16 * MT;
    static constexpr size_t bytes = PIPE ? (size_t)BR * LQ * 2 * 2 + (size_t)TQ * LQ * 2 * 4 /* Q, dO, 2 K, 2 V */
                                         : (size_t)TQ * LQ * 2 * 4 + (size_t)D * LT * 2;     /* Q, dO, K, V; K^T */
};

template <int D, bool PIPE, int MT>
__global__ void __launch_bounds__(NWM * 32) k_attn_bwd_dq_mma(float *dq, const float *dout, const float *lse,
                                                             const float *q, attn_params p) {
    static_assert(PIPE || MT == 1, "m-tiles: the pipelined form");
    typedef dq_mma_smem<D, PIPE, MT> L;
    constexpr int LQ = L::LQ, LT = L::LT, NB = PIPE ? 2 : 1, BR = L::BR, NR = 2 * MT;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *Qs = reinterpret_cast<bf16 *>(smem_raw), *dOs = Qs + BR * LQ, *Ks = dOs + BR * LQ, *Vs = Ks + NB * TQ * LQ;
    bf16 *Kt = Vs + NB * TQ * LQ;
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = lane % 4;
    const float slope = vc_attn_slope(p, h);
    const int64_t qb = bi.y, nr = sm.qlen - qb < BR ? sm.qlen - qb : BR, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t stride = (int64_t)p.nh * D;
    mma_load_rows<D, BR>(Qs, LQ, q + (sm.q0 + qb) * stride + (int64_t)h * D, stride, (int)nr);
    mma_load_rows<D, BR>(dOs, LQ, dout + (sm.q0 + qb) * stride + (int64_t)h * D, stride, (int)nr);
    int rr[NR]; /* the lane's rows of the block: g and g + 8 of each of the warp's m-tiles */
#pragma unroll
    for (int i = 0; i < NR; i++) rr[i] = warp * 16 * MT + (i >> 1) * 16 + lane / 4 + (i & 1) * 8;
    int64_t lo[NR], hi[NR];
    float Lr[NR], Dr[NR];
#pragma unroll
    for (int i = 0; i < NR; i++) {
        mma_row_bounds(p, sm, pos0 + rr[i], rr[i] < nr, &lo[i], &hi[i]);
        const int64_t row = sm.q0 + qb + rr[i];
        Lr[i] = rr[i] < nr ? lse[row * p.nh + h] * VC_LOG2E : 0.0f;
        Dr[i] = rr[i] < nr ? p.D[row * p.nh + h] : 0.0f;
    }
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    float acc[MT][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) mma_zero(acc[mt]);
    const mma_pipe<D, D> pipe(Ks, LQ, Vs, LQ, p, sm, kvh);
    if (PIPE) pipe.start(p, j0, j1);
    int buf = 0;
    for (int64_t kb = j0; kb < j1; kb += TQ) {
        const bf16 *Kc = Ks, *Vc = Vs;
        if (PIPE)
            pipe.next(buf, p, kb, j1, &Kc, &Vc);
        else {
            const int nk = (int)(j1 - kb < TQ ? j1 - kb : TQ);
            __syncthreads(); /* the previous tile is no longer read (and Q, dO are in place) */
            mma_load_rows<D>(Ks, LQ, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, nk);
            mma_load_rows<D>(Vs, LQ, sm.v + kb * p.vstride + (int64_t)kvh * D, p.vstride, nk);
            mma_load_cols<D>(Kt, LT, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, nk);
            __syncthreads();
        }
        uint32_t da[MT][TQ / 16][4];
        /* a tile every row of the warp sees whole: no masks */
        const bool whole = mma_tile_whole(p, lo, hi, kb);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float s[TQ / 8][4], dp[TQ / 8][4]; /* an m-tile's scores and dP at a time (their registers) */
            mma_zero(s);
            mma_zero(dp);
            mma_rows<D>(s, Qs + (warp * MT + mt) * 16 * LQ, LQ, Kc, LQ);
            mma_rows<D>(dp, dOs + (warp * MT + mt) * 16 * LQ, LQ, Vc, LQ);
#pragma unroll
            for (int n = 0; n < TQ / 8; n++) {
                float ds[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = 2 * mt + (e >> 1);
                    if (whole) {
                        float pr;
                        mma_p_ds_plain(p, s[n][e], dp[n][e], Lr[i], Dr[i], &pr, &ds[e]);
                        continue;
                    }
                    const int64_t key = kb + n * 8 + 2 * t + (e & 1), pos = pos0 + rr[i];
                    float pr = 0.0f;
                    ds[e] = 0.0f;
                    if (key >= lo[i] && key <= hi[i] && vc_attn_selected(p, sm.q0 + qb + rr[i], key))
                        mma_p_ds(p, s[n][e], dp[n][e], Lr[i], Dr[i], slope, pos, key, &pr, &ds[e]);
                }
                da[mt][n / 2][(n & 1) * 2] = vc_pack_bf16x2(ds[0], ds[1]);
                da[mt][n / 2][(n & 1) * 2 + 1] = vc_pack_bf16x2(ds[2], ds[3]);
            }
        }
        if (PIPE) {
            mma_acc_tm<D, MT>(acc, da, Kc, LQ); /* dQ += dS K: each K fragment feeds the MT m-tiles */
            __syncthreads(); /* the tile is no longer read: the next iteration's copy may overwrite it */
            buf ^= 1;
        } else
            mma_acc<D>(acc[0], da[0], Kt, LT);
    }
#pragma unroll
    for (int i = 0; i < NR; i++) {
        if (rr[i] >= nr) continue;
        float *out = dq + (sm.q0 + qb + rr[i]) * stride + (int64_t)h * D + 2 * t;
        const float(&a)[D / 8][4] = acc[i >> 1];
        const int c = 2 * (i & 1);
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            out[n * 8] += p.scale * a[n][c];
            out[n * 8 + 1] += p.scale * a[n][c + 1];
        }
    }
}

/* ---------------- dK, dV ---------------- */
/* PIPE: the query tiles (Q, dO, lse, D) double-buffered, Q and dO by cp.async from p.qmir / p.omir, no transposed
 * copies (dV += P^T dO and dK += dS^T Q take their B fragments by ldmatrix.trans): the same bits */
template <int D, bool PIPE>
struct dkdv_mma_smem {
    static constexpr int LQ = D + PADM, LT = TQ + PADM;
    static constexpr size_t bytes = PIPE ? (size_t)TQ * LQ * 2 * 6 + (size_t)TQ * 4 * 4
                                         : (size_t)TQ * LQ * 2 * 4 + (size_t)D * LT * 2 * 2 + (size_t)TQ * 4 * 2;
};

/* PIPE: query tile (h, qb) of the block's sequence into buffer b: Q and dO by cp.async (one group), lse and D stored */
template <int D>
__device__ __forceinline__ void dkdv_copy(bf16 *Qb, bf16 *dOb, float *Lb, float *Db, const attn_params &p,
                                          const seq_meta &sm, const float *lse, int h, int64_t qb, int64_t i1) {
    constexpr int LQ = D + PADM;
    const int nq = (int)(i1 - qb < TQ ? i1 - qb : TQ);
    const int64_t stride = (int64_t)p.nh * D, at = (sm.q0 + qb) * stride + (int64_t)h * D;
    mma_cp_rows<D>(Qb, LQ, reinterpret_cast<const bf16 *>(p.qmir) + at, stride, nq);
    mma_cp_rows<D>(dOb, LQ, reinterpret_cast<const bf16 *>(p.omir) + at, stride, nq);
    vc_cp_commit();
    for (int i = threadIdx.x; i < TQ; i += NWM * 32) {
        Lb[i] = i < nq ? lse[(sm.q0 + qb + i) * p.nh + h] * VC_LOG2E : 0.0f;
        Db[i] = i < nq ? p.D[(sm.q0 + qb + i) * p.nh + h] : 0.0f;
    }
}

template <int D, bool PIPE>
__global__ void __launch_bounds__(NWM * 32) k_attn_bwd_dkdv_mma(const float *dout, const float *lse, const float *q,
                                                               attn_params p) {
    typedef dkdv_mma_smem<D, PIPE> L;
    constexpr int LQ = L::LQ, LT = L::LT, NB = PIPE ? 2 : 1;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *Ks = reinterpret_cast<bf16 *>(smem_raw), *Vs = Ks + TQ * LQ, *Qs = Vs + TQ * LQ, *dOs = Qs + NB * TQ * LQ;
    bf16 *Qt = dOs + NB * TQ * LQ, *dOt = Qt + (PIPE ? 0 : D * LT);
    float *Ls = reinterpret_cast<float *>(dOt + (PIPE ? 0 : D * LT)), *Dd = Ls + NB * TQ;
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int kvh = blockIdx.y / p.split, part = blockIdx.y % p.split, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = lane % 4, hn = p.nh / p.nkv / p.split, h0 = kvh * (p.nh / p.nkv) + part * hn, h1 = h0 + hn;
    const int64_t kb = bi.y, nk = sm.kvlen - kb < TQ ? sm.kvlen - kb : TQ, off = sm.kvlen - sm.qlen;
    const int64_t stride = (int64_t)p.nh * D;
    int64_t i0, i1;
    vc_attn_query_range(p, kb, nk, off, sm.qlen, &i0, &i1);
    if (i0 >= i1) return; /* no query sees these keys: their gradients get nothing (+= 0) */
    mma_load_rows<D>(Ks, LQ, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, (int)nk);
    mma_load_rows<D>(Vs, LQ, sm.v + kb * p.vstride + (int64_t)kvh * D, p.vstride, (int)nk);
    const int kr[2] = { warp * 16 + lane / 4, warp * 16 + lane / 4 + 8 }; /* the lane's two keys of the tile */
    float dk[D / 8][4], dv[D / 8][4];
    mma_zero(dk);
    mma_zero(dv);
    if (PIPE) dkdv_copy<D>(Qs, dOs, Ls, Dd, p, sm, lse, h0, i0, i1); /* the first tile's copy in flight */
    int buf = 0;
    for (int h = h0; h < h1; h++) { /* the block's heads of the group: all of them, or its share when split */
        const float slope = vc_attn_slope(p, h);
        for (int64_t qb = i0; qb < i1; qb += TQ) {
            const int nq = (int)(i1 - qb < TQ ? i1 - qb : TQ);
            const bf16 *Qc = Qs, *dOc = dOs;
            const float *Lc = Ls, *Dc = Dd;
            if (PIPE) { /* the next tile (this head's next, or the next head's first) into the other buffers */
                const int nx = qb + TQ < i1 ? h : h + 1;
                if (nx < h1) {
                    const int b2 = buf ^ 1;
                    dkdv_copy<D>(Qs + b2 * TQ * LQ, dOs + b2 * TQ * LQ, Ls + b2 * TQ, Dd + b2 * TQ, p, sm, lse, nx,
                                 nx == h ? qb + TQ : i0, i1);
                    vc_cp_wait<1>();
                } else
                    vc_cp_wait<0>();
                __syncthreads(); /* this tile's copies and stores (and K, V) seen by every warp */
                Qc = Qs + buf * TQ * LQ;
                dOc = dOs + buf * TQ * LQ;
                Lc = Ls + buf * TQ;
                Dc = Dd + buf * TQ;
            } else {
                __syncthreads(); /* the previous query tile is no longer read (and K, V are in place) */
                const float *qsrc = q + (sm.q0 + qb) * stride + (int64_t)h * D;
                const float *osrc = dout + (sm.q0 + qb) * stride + (int64_t)h * D;
                mma_load_rows<D>(Qs, LQ, qsrc, stride, nq);
                mma_load_rows<D>(dOs, LQ, osrc, stride, nq);
                mma_load_cols<D>(Qt, LT, qsrc, stride, nq);
                mma_load_cols<D>(dOt, LT, osrc, stride, nq);
                for (int i = threadIdx.x; i < TQ; i += NWM * 32) {
                    Ls[i] = i < nq ? lse[(sm.q0 + qb + i) * p.nh + h] * VC_LOG2E : 0.0f;
                    Dd[i] = i < nq ? p.D[(sm.q0 + qb + i) * p.nh + h] : 0.0f;
                }
                __syncthreads();
            }
            float s[TQ / 8][4], dp[TQ / 8][4];
            mma_zero(s);
            mma_zero(dp);
            mma_rows<D>(s, Ks + warp * 16 * LQ, LQ, Qc, LQ);   /* S^T: keys x queries */
            mma_rows<D>(dp, Vs + warp * 16 * LQ, LQ, dOc, LQ); /* dP^T */
            uint32_t pa[TQ / 16][4], da[TQ / 16][4];
            /* every query of the tile sees every key of the warp's: no masks */
            const int64_t wk = kb + warp * 16;
            const bool whole = p.plain && nq == TQ && warp * 16 + 15 < nk && (!p.causal || off + qb >= wk + 15) &&
                               (p.window <= 0 || off + qb + TQ - 1 - wk < p.window);
#pragma unroll
            for (int n = 0; n < TQ / 8; n++) {
                float pr[4], ds[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (whole) {
                        const int qc = n * 8 + 2 * t + (e & 1);
                        mma_p_ds_plain(p, s[n][e], dp[n][e], Lc[qc], Dc[qc], &pr[e], &ds[e]);
                        continue;
                    }
                    const int qc = n * 8 + 2 * t + (e & 1);
                    const int64_t key = kb + kr[e >> 1], pos = off + qb + qc;
                    pr[e] = ds[e] = 0.0f;
                    const bool vis = qc < nq && kr[e >> 1] < nk && (!p.causal || key <= pos) &&
                                     (p.window <= 0 || pos - key < p.window) &&
                                     vc_attn_selected(p, sm.q0 + qb + qc, key);
                    if (vis) mma_p_ds(p, s[n][e], dp[n][e], Lc[qc], Dc[qc], slope, pos, key, &pr[e], &ds[e]);
                }
                pa[n / 2][(n & 1) * 2] = vc_pack_bf16x2(pr[0], pr[1]);
                pa[n / 2][(n & 1) * 2 + 1] = vc_pack_bf16x2(pr[2], pr[3]);
                da[n / 2][(n & 1) * 2] = vc_pack_bf16x2(ds[0], ds[1]);
                da[n / 2][(n & 1) * 2 + 1] = vc_pack_bf16x2(ds[2], ds[3]);
            }
            if (PIPE) {
                mma_acc_t<D>(dv, pa, dOc, LQ); /* dV += P^T dO */
                mma_acc_t<D>(dk, da, Qc, LQ);  /* dK += dS^T Q */
                __syncthreads(); /* the tile is no longer read: the next iteration's copy may overwrite it */
                buf ^= 1;
            } else {
                mma_acc<D>(dv, pa, dOt, LT);
                mma_acc<D>(dk, da, Qt, LT);
            }
        }
    }
    if (p.split > 1) { /* the block's sums as they are, for k_dkdv_split_sum */
        const int64_t at = (((int64_t)blockIdx.x * p.nkv + kvh) * p.split + part) * TQ * D + 2 * t;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float2 *pk = reinterpret_cast<float2 *>(p.dkp + at + kr[i] * D);
            float2 *pv = reinterpret_cast<float2 *>(p.dvp + at + kr[i] * D);
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                pk[n * 4] = make_float2(dk[n][2 * i], dk[n][2 * i + 1]);
                pv[n * 4] = make_float2(dv[n][2 * i], dv[n][2 * i + 1]);
            }
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (kr[i] >= nk) continue;
        float *ok = sm.dk + (kb + kr[i]) * p.kstride + (int64_t)kvh * D + 2 * t;
        float *ov = sm.dv + (kb + kr[i]) * p.vstride + (int64_t)kvh * D + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            ok[n * 8] += p.scale * dk[n][2 * i];
            ok[n * 8 + 1] += p.scale * dk[n][2 * i + 1];
            ov[n * 8] += dv[n][2 * i];
            ov[n * 8 + 1] += dv[n][2 * i + 1];
        }
    }
}

__global__ void k_round_rows(bf16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

/* a split block's sums added in order of its share of the group (the first heads' first), once per key: dK += scale
 * sum, dV += sum; a key tile that no query sees has nothing (its blocks returned before storing) */
template <int D>
__global__ void k_dkdv_split_sum(attn_params p) {
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int kvh = blockIdx.y;
    const int64_t kb = bi.y, nk = sm.kvlen - kb < TQ ? sm.kvlen - kb : TQ;
    int64_t i0, i1;
    vc_attn_query_range(p, kb, nk, sm.kvlen - sm.qlen, sm.qlen, &i0, &i1);
    if (i0 >= i1) return;
    const size_t one = (size_t)TQ * D, at = ((size_t)blockIdx.x * p.nkv + kvh) * p.split * one;
    const float *pk = p.dkp + at, *pv = p.dvp + at;
    for (int idx = threadIdx.x; idx < nk * D; idx += blockDim.x) {
        const int r = idx / D, c = idx % D;
        float a = pk[idx], b = pv[idx];
        for (int s = 1; s < p.split; s++) {
            a += pk[s * one + idx];
            b += pv[s * one + idx];
        }
        sm.dk[(kb + r) * p.kstride + (int64_t)kvh * D + c] += p.scale * a;
        sm.dv[(kb + r) * p.vstride + (int64_t)kvh * D + c] += b;
    }
}

/* The blocks a GQA group's heads are split over (attn_params.split): a block per key tile and kv head holds the
 * whole group (Qwen2.5's 7 or 6 heads), and with few kv heads there are few blocks, each as long as the group's heads
 * times the query tiles that see its keys: 256 blocks of up to 56 tiles for 16 x 512 tokens at 14 / 2 heads, the
 * first key tiles' blocks 8 times the last ones'. Split, each block takes a share of the heads; a second kernel adds
 * the shares in order. The least divisor of the group that gives 4 blocks an SM (the group when none does);
 * VERLC_CUDA_ATTN_SPLIT=N (read per call): the largest divisor up to N (1: no split, the A/B). The bits depend on the
 * split (the shares' order of summation), so on the blocks of the call: the same call, the same bits. */
static int dkdv_split(int grp, int64_t blocks) {
    const char *e = getenv("VERLC_CUDA_ATTN_SPLIT");
    if (e && *e) {
        const int want = atoi(e);
        int s = 1;
        for (int x = 1; x <= grp && x <= want; x++)
            if (grp % x == 0) s = x;
        return s;
    }
    for (int s = 1; s <= grp; s++)
        if (grp % s == 0 && blocks * s >= 4 * (int64_t)vc_cu_sm_count()) return s;
    return grp;
}

/* dK/dV: PIPE on bf16 mirrors of q and dO (fresh buffers in their layout: every head's row starts on a 16-byte
 * boundary; VERLC_CUDA_ATTN_PIPE=0: not), heads split per dkdv_split (their sums in scratch; with no room for them,
 * not split). 1 when launched, -1 on an error (sticky), 0 with nothing launched (PIPE with no room for the mirrors:
 * the plain kernel runs) */
template <int D, bool PIPE>
int dkdv_launch(const float *dout, const float *lse, const float *q, const vc_attn_desc *d, const float *Dd,
                const char *op) {
    typedef dkdv_mma_smem<D, PIPE> L;
    const size_t n = (size_t)(d->q_start[d->n_seq] * d->n_head * D);
    const char *e = getenv("VERLC_CUDA_ATTN_PIPE"); /* read per call: a test switches it */
    if (PIPE && ((e && *e == '0') || d->q_start[d->n_seq] <= d->q_start[0])) return 0;
    attn_params p;
    int64_t nb;
    void *meta = vc_cu_attn_upload_meta(d, TQ, 1, &p, &nb, op);
    if (!meta) return -1;
    p.D = Dd;
    bf16 *mir = NULL;
    float *part = NULL;
    int ok = 1;
    if (nb > 0 && PIPE) {
        if (vc_cu_malloc_async((void **)&mir, 2 * n * sizeof(bf16)) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: the plain kernel runs */
            vc_cu_scratch_free(meta);
            return 0;
        }
        const unsigned blocks = vc_cu_blocks((int64_t)n, 256);
        k_round_rows<<<blocks, 256, 0, vc_cu_stream()>>>(mir, q, n);
        k_round_rows<<<blocks, 256, 0, vc_cu_stream()>>>(mir + n, dout, n);
        p.qmir = mir;
        p.omir = mir + n;
    }
    if (nb > 0) {
        int S = dkdv_split(d->n_head / d->n_kv_head, nb * d->n_kv_head);
        const size_t pn = (size_t)nb * d->n_kv_head * S * TQ * D;
        if (S > 1 && vc_cu_malloc_async((void **)&part, 2 * pn * sizeof(float)) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: not split */
            part = NULL;
            S = 1;
        }
        p.split = S;
        p.dkp = part;
        p.dvp = part ? part + pn : NULL;
        ok = vc_cu_ok(cudaFuncSetAttribute(k_attn_bwd_dkdv_mma<D, PIPE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)L::bytes),
                      op);
        if (ok) {
            const dim3 grid((unsigned)nb, (unsigned)(d->n_kv_head * S)), sums((unsigned)nb, (unsigned)d->n_kv_head);
            k_attn_bwd_dkdv_mma<D, PIPE><<<grid, NWM * 32, L::bytes, vc_cu_stream()>>>(dout, lse, q, p);
            if (S > 1) k_dkdv_split_sum<D><<<sums, 256, 0, vc_cu_stream()>>>(p);
            ok = vc_cu_end(op);
        }
    }
    vc_cu_scratch_free(part);
    vc_cu_scratch_free(mir);
    vc_cu_scratch_free(meta);
    return ok ? 1 : -1;
}

/* dQ: two m-tiles a warp at heads of 64 (VERLC_CUDA_ATTN_M2=0 or VERLC_CUDA_ATTN_DQ_M2=0: one, as at wider heads),
 * else the pipelined kernel, else the plain one */
template <int D>
void dq_launch(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d, const float *Dd,
               const char *op) {
    const int64_t kw = (int64_t)d->n_kv_head * D;
    if constexpr (D <= 64)
        if (vc_cu_attn_dq_mtiles(D) == 2) {
            typedef dq_mma_smem<D, true, 2> L2;
            if (vc_cu_attn_launch_pipe_rows(k_attn_bwd_dq_mma<D, true, 2>, d, L2::BR, kw, d->n_head, L2::bytes, Dd,
                                            op, dq, dout, lse, q))
                return; /* done, or failed (sticky) */
        }
    if (!vc_cu_attn_launch_pipe(k_attn_bwd_dq_mma<D, true, 1>, d, kw, d->n_head, dq_mma_smem<D, true>::bytes, Dd, op,
                                dq, dout, lse, q))
        vc_cu_attn_launch(k_attn_bwd_dq_mma<D, false, 1>, d, TQ, 0, d->n_head, NWM * 32, dq_mma_smem<D, false>::bytes,
                          Dd, op, dq, dout, lse, q);
}

template <int D>
void mma_bwd(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d, const float *Dd,
             int dkdv, const char *op) {
    if (dq) dq_launch<D>(dq, dout, lse, q, d, Dd, op);
    if (dkdv && !dkdv_launch<D, true>(dout, lse, q, d, Dd, op)) dkdv_launch<D, false>(dout, lse, q, d, Dd, op);
}

} // namespace

/* 0: the heads do not suit (nothing done); else bit 1: dq done, bit 2: dK/dV done (the caller does the rest) */
int vc_cu_attn_bwd_mma(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                       const float *D, const char *op) {
    const char *e = getenv("VERLC_CUDA_ATTN_MMA"); /* read per call: a test switches it */
    if ((e && *e == '0') || d->head_dim != d->v_head_dim) return 0;
    const int kv = d->dk_seq && d->dv_seq && d->chunk <= 0;
    switch (d->head_dim) {
    case 64: mma_bwd<64>(dq, dout, lse, q, d, D, kv, op); break;
    case 80: mma_bwd<80>(dq, dout, lse, q, d, D, kv, op); break;
    case 96: mma_bwd<96>(dq, dout, lse, q, d, D, kv, op); break;
    case 128: mma_bwd<128>(dq, dout, lse, q, d, D, kv, op); break;
    default: return 0;
    }
    return 1 | (kv ? 2 : 0);
}
