/* Shared by the register-tiled (mma.sync) flash-attention kernels, forward (cuda_attn_mma.cu) and backward
 * (cuda_attn_mma_bwd.cu): the tile sizes and the loaders that round f32 rows to bf16 into shared memory, as they are
 * or transposed (a B operand whose k runs along the rows of its source: V in P V, dO in dV += P^T dO, ...). */
#ifndef VC_CUDA_ATTN_MMA_H
#define VC_CUDA_ATTN_MMA_H
#include "cuda_attn_common.h"
#include "cuda_mma.h"
#include <cuda_bf16.h>
#include <stdlib.h>

typedef __nv_bfloat16 bf16;

static constexpr int TQ = 64;  /* query rows and keys per tile */
static constexpr int NWM = 4;  /* warps per block */
static constexpr int PADM = 8; /* bf16 row padding: 16-byte rows, 32-bit fragment loads on 32 banks */

/* m-tiles a warp for heads of D in the forward and dQ: 2 at 64 (FlashAttention-2's 128-query blocks: the forward 250
 * registers, the Q fragments loaded a tile), 1 for wider heads (the forward at 80 and 96 spilled 64 and 136 bytes to
 * the stack; at 128 the accumulators and scores alone would take every register); VERLC_CUDA_ATTN_M2=0 (read per
 * call, the A/B switch): 1 everywhere */
static inline int vc_cu_attn_mtiles(int D) {
    const char *e = getenv("VERLC_CUDA_ATTN_M2");
    return (e && *e == '0') || D > 64 ? 1 : 2;
}
/* dQ's (since 2026-12-05, untimed: 255 registers, 2 blocks a multiprocessor against 3 at one m-tile):
 * VERLC_CUDA_ATTN_DQ_M2=0 keeps one m-tile in dQ alone */
static inline int vc_cu_attn_dq_mtiles(int D) {
    const char *e = getenv("VERLC_CUDA_ATTN_DQ_M2");
    return e && *e == '0' ? 1 : vc_cu_attn_mtiles(D);
}

/* the largest divisor of n up to m (float4s a thread's loads in flight: its registers) */
template <int N, int M>
struct mma_chunk {
    static constexpr int v = M >= N ? N : N % M == 0 ? M : mma_chunk<N, (M > 1 ? M - 1 : 1)>::v;
};
template <int N>
struct mma_chunk<N, 1> {
    static constexpr int v = 1;
};
/* dst[r][c] (pitch ld) = bf16(src[r * stride + c]) for r < rows, zero rows up to R (TQ, or a block's query rows);
 * float4 loads when aligned, all of a thread's loads (in halves past 8; at most CHM at a time when CHM > 0) issued
 * before their first store: one memory latency (a group), not one a load */
template <int D, int R = TQ, int CHM = 0>
__device__ __forceinline__ void mma_load_rows(bf16 *dst, int ld, const float *src, int64_t stride, int rows) {
    if (((reinterpret_cast<uintptr_t>(src) & 15) == 0) && (stride & 3) == 0) {
        constexpr int N = R * (D / 4) / (NWM * 32); /* float4s a thread: R D / 512 */
        constexpr int CH = CHM ? mma_chunk<N, CHM ? CHM : 1>::v : N > 8 ? N / 2 : N;
        static_assert(N * NWM * 32 == R * (D / 4) && N % CH == 0, "tile columns");
#pragma unroll
        for (int c0 = 0; c0 < N; c0 += CH) {
            float4 x[CH];
#pragma unroll
            for (int i = 0; i < CH; i++) {
                const int idx = threadIdx.x + (c0 + i) * NWM * 32, r = idx / (D / 4), c = (idx % (D / 4)) * 4;
                x[i] = r < rows ? *reinterpret_cast<const float4 *>(src + r * stride + c) : make_float4(0, 0, 0, 0);
            }
#pragma unroll
            for (int i = 0; i < CH; i++) {
                const int idx = threadIdx.x + (c0 + i) * NWM * 32, r = idx / (D / 4), c = (idx % (D / 4)) * 4;
                uint32_t *o = reinterpret_cast<uint32_t *>(dst + r * ld + c);
                o[0] = vc_pack_bf16x2(x[i].x, x[i].y);
                o[1] = vc_pack_bf16x2(x[i].z, x[i].w);
            }
        }
        return;
    }
    for (int idx = threadIdx.x; idx < R * D; idx += NWM * 32) {
        const int r = idx / D, c = idx % D;
        dst[r * ld + c] = __float2bfloat16_rn(r < rows ? src[r * stride + c] : 0.0f);
    }
}

/* dst[c][r] (pitch ld) = bf16(src[r * stride + c]): the tile transposed, a thread taking two keys of four columns
 * (float4 loads when aligned) and storing each column's key pair as one 32-bit word, the warp's threads along the
 * keys (no bank conflicts); zero past `rows` */
template <int DV>
__device__ __forceinline__ void mma_load_cols(bf16 *dst, int ld, const float *src, int64_t stride, int rows) {
    const bool vec = ((reinterpret_cast<uintptr_t>(src) & 15) == 0) && (stride & 3) == 0;
    for (int idx = threadIdx.x; idx < (TQ / 2) * (DV / 4); idx += NWM * 32) {
        const int rp = 2 * (idx % (TQ / 2)), c = 4 * (idx / (TQ / 2));
        float x0[4] = { 0, 0, 0, 0 }, x1[4] = { 0, 0, 0, 0 };
        if (vec) {
            if (rp < rows) {
                const float4 v = *reinterpret_cast<const float4 *>(src + rp * stride + c);
                x0[0] = v.x, x0[1] = v.y, x0[2] = v.z, x0[3] = v.w;
            }
            if (rp + 1 < rows) {
                const float4 v = *reinterpret_cast<const float4 *>(src + (rp + 1) * stride + c);
                x1[0] = v.x, x1[1] = v.y, x1[2] = v.z, x1[3] = v.w;
            }
        } else
            for (int i = 0; i < 4; i++) {
                x0[i] = rp < rows ? src[rp * stride + c + i] : 0.0f;
                x1[i] = rp + 1 < rows ? src[(rp + 1) * stride + c + i] : 0.0f;
            }
#pragma unroll
        for (int i = 0; i < 4; i++) *reinterpret_cast<uint32_t *>(dst + (c + i) * ld + rp) = vc_pack_bf16x2(x0[i], x1[i]);
    }
}

/* The pipelined kernels' bf16 mirrors of the keys and values (attn_params.kmir / vmir): the f32 ranges they copy.
 * vc_cu_attn_mirror_plan: 0 when there is nothing to mirror, a row starts off a 16-byte boundary of the mirror, or
 * VERLC_CUDA_ATTN_PIPE=0 (read per call). vc_cu_attn_mirror_make (p->seq uploaded): the mirrors allocated, filled on
 * the stream and set on p; the block to free after the launches, or NULL (no room, not sticky). kw: the columns of
 * a key (value) row the kernels read, n_kv_head times the head dim. */
struct vc_kv_mirror {
    const float *k0, *v0;
    size_t kn, vn;
};
int vc_cu_attn_mirror_plan(const vc_attn_desc *d, int64_t kw, vc_kv_mirror *m);
void *vc_cu_attn_mirror_make(const vc_kv_mirror *m, attn_params *p, int n_seq, int64_t kw);

/* vc_cu_attn_launch of a kernel that reads the mirrors (blocks of TQ queries): 1 when launched, -1 on an error
 * (sticky), 0 with nothing launched when there are no mirrors (the caller runs the plain kernel) */
template <class K, class... A>
int vc_cu_attn_launch_pipe_rows(K kern, const vc_attn_desc *d, int rows, int64_t kw, int heads, size_t sh,
                                const float *Dd, const char *op, A... args) {
    vc_kv_mirror m;
    if (!vc_cu_attn_mirror_plan(d, kw, &m)) return 0;
    return vc_cu_attn_launch_prep(kern, d, rows, 0, heads, NWM * 32, sh, Dd, op, [&](attn_params *p, void **own) {
        return (*own = vc_cu_attn_mirror_make(&m, p, d->n_seq, kw)) != NULL;
    }, args...);
}
template <class K, class... A>
int vc_cu_attn_launch_pipe(K kern, const vc_attn_desc *d, int64_t kw, int heads, size_t sh, const float *Dd,
                           const char *op, A... args) {
    return vc_cu_attn_launch_pipe_rows(kern, d, TQ, kw, heads, sh, Dd, op, args...);
}

/* dst[r][c] (pitch ld) = src[r * stride + c] for r < rows by cp.async (bf16 rows, 16-byte aligned; the caller commits
 * and waits), zero rows up to TQ */
template <int W>
__device__ __forceinline__ void mma_cp_rows(bf16 *dst, int ld, const bf16 *src, int64_t stride, int rows) {
    constexpr int CPR = W / 8, N = TQ * CPR / (NWM * 32); /* 16-byte chunks a row; a thread's copies (unrolled) */
    static_assert(N * NWM * 32 == TQ * CPR, "tile chunks");
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int idx = threadIdx.x + i * NWM * 32, r = idx / CPR, c = (idx % CPR) * 8;
        if (r < rows) vc_cp16(dst + r * ld + c, src + r * stride + c);
        else *reinterpret_cast<uint4 *>(dst + r * ld + c) = uint4{ 0, 0, 0, 0 };
    }
}

/* The pipelined kernels' key and value tiles: K tiles of pitch lk at Ks (+ TQ lk for the second buffer), V tiles of
 * pitch lv at Vs; kg / vg the head's columns in the mirrors. start: the first tile's copy in flight.
 * next: the next tile's copy into the other buffers (last read before the previous tile's closing barrier),
 * then the wait for tile kb and a barrier, tile kb's buffers in *Kc / *Vc; the caller ends each tile with a barrier
 * too. */
template <int D, int DV>
struct mma_pipe {
    bf16 *Ks, *Vs;
    int lk, lv;
    const bf16 *kg, *vg;
    __device__ __forceinline__ mma_pipe(bf16 *k, int lk_, bf16 *v, int lv_, const attn_params &p, const seq_meta &sm,
                                        int kvh)
        : Ks(k), Vs(v), lk(lk_), lv(lv_), kg(NULL), vg(NULL) {
        if (!p.kmir) return; /* the plain kernels */
        kg = reinterpret_cast<const bf16 *>(p.kmir) + (sm.k - p.kbase) + (int64_t)kvh * D;
        vg = reinterpret_cast<const bf16 *>(p.vmir) + (sm.v - p.vbase) + (int64_t)kvh * DV;
    }
    __device__ __forceinline__ void copy(int buf, const attn_params &p, int64_t kb, int64_t j1) const {
        const int nk = (int)(j1 - kb < TQ ? j1 - kb : TQ);
        mma_cp_rows<D>(Ks + buf * TQ * lk, lk, kg + kb * p.kstride, p.kstride, nk);
        mma_cp_rows<DV>(Vs + buf * TQ * lv, lv, vg + kb * p.vstride, p.vstride, nk);
        vc_cp_commit();
    }
    __device__ __forceinline__ void start(const attn_params &p, int64_t j0, int64_t j1) const {
        if (j0 < j1) copy(0, p, j0, j1);
    }
    __device__ __forceinline__ void next(int buf, const attn_params &p, int64_t kb, int64_t j1, const bf16 **Kc,
                                         const bf16 **Vc) const {
        if (kb + TQ < j1) {
            copy(buf ^ 1, p, kb + TQ, j1);
            vc_cp_wait<1>();
        } else
            vc_cp_wait<0>();
        __syncthreads(); /* tile kb's copies (and what was stored before the loop) seen by every warp */
        *Kc = Ks + buf * TQ * lk;
        *Vc = Vs + buf * TQ * lv;
    }
};

/* the keys [*lo, *hi] query position pos sees (vc_attn_visible's causal, window and chunk bounds; the division once
 * per row, not per key); hi = -1 for a row past the tile's last (valid 0) */
template <class P, class S>
__device__ __forceinline__ void mma_row_bounds(const P &p, const S &sm, int64_t pos, bool valid, int64_t *lo,
                                               int64_t *hi) {
    *hi = !valid ? -1 : p.causal && pos < sm.kvlen - 1 ? pos : sm.kvlen - 1;
    *lo = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
    if (p.chunk > 0 && pos - pos % p.chunk > *lo) *lo = pos - pos % p.chunk;
}
/* whether every row of the warp sees all of keys kb .. kb + TQ - 1 (each lane's N rows' [lo, hi] from
 * mma_row_bounds) and the scores are the scaled dot products (p.plain): the tile then takes no masks */
template <int N>
__device__ __forceinline__ bool mma_tile_whole(const attn_params &p, const int64_t (&lo)[N], const int64_t (&hi)[N],
                                               int64_t kb) {
    bool all = true;
#pragma unroll
    for (int i = 0; i < N; i++) all = all && lo[i] <= kb && kb + TQ - 1 <= hi[i];
    return p.plain && __all_sync(0xffffffffu, all);
}
/* whether no row of the warp sees any of keys kb .. kb + TQ - 1: the tile would leave every sum of the warp's rows as
 * it is (its scores -inf: the online softmax's factor exactly 1, P 0), so the warp skips it */
template <int N>
__device__ __forceinline__ bool mma_tile_none(const int64_t (&lo)[N], const int64_t (&hi)[N], int64_t kb) {
    bool none = true;
#pragma unroll
    for (int i = 0; i < N; i++) none = none && (hi[i] < kb || lo[i] > kb + TQ - 1);
    return __all_sync(0xffffffffu, none);
}
/* every element of a tile's accumulators to 0 */
template <int N>
__device__ __forceinline__ void mma_zero(float (&x)[N][4]) {
#pragma unroll
    for (int n = 0; n < N; n++) x[n][0] = x[n][1] = x[n][2] = x[n][3] = 0.0f;
}

/* a warp's A fragments over K columns of its 16 rows at A (pitch la, 16-byte aligned rows), by ldmatrix: a[kc] for
 * columns 16 kc .. 16 kc + 15 */
template <int K>
__device__ __forceinline__ void mma_frag_a(uint32_t (&a)[K / 16][4], const bf16 *A, int la) {
    const int lane = threadIdx.x % 32;
    const bf16 *at = A + (lane % 16) * la + (lane / 16) * 8;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) vc_ldsm_x4(a[kc], at + kc * 16);
}

/* mma_rows_f for MT m-tiles of 16 rows (a[mt] the fragments of rows 16 mt ..): each B fragment loaded once feeds
 * every m-tile; each s[mt][n] sums its k steps in order, so a row's scores are the same bits as with one m-tile */
template <int K, int MT>
__device__ __forceinline__ void mma_rows_fm(float (&s)[MT][TQ / 8][4], const uint32_t (&a)[MT][K / 16][4], const bf16 *B,
                                            int lb) {
    const int lane = threadIdx.x % 32, j = lane / 8;
    const bf16 *bt = B + ((j >> 1) * 8 + lane % 8) * lb + (j & 1) * 8;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++)
#pragma unroll
        for (int n = 0; n < TQ / 8; n += 2) {
            uint32_t b[4];
            vc_ldsm_x4(b, bt + n * 8 * lb + kc * 16);
            const uint32_t b0[2] = { b[0], b[1] }, b1[2] = { b[2], b[3] };
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                vc_mma_16816(s[mt][n], a[mt][kc], b0);
                vc_mma_16816(s[mt][n + 1], a[mt][kc], b1);
            }
        }
}

/* mma_rows_fm with A's fragments loaded a k step at a time from the warp's MT x 16 rows at A (pitch la) */
template <int K, int MT>
__device__ __forceinline__ void mma_rows_m(float (&s)[MT][TQ / 8][4], const bf16 *A, int la, const bf16 *B, int lb) {
    const int lane = threadIdx.x % 32, j = lane / 8;
    const bf16 *at = A + (lane % 16) * la + (lane / 16) * 8, *bt = B + ((j >> 1) * 8 + lane % 8) * lb + (j & 1) * 8;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) vc_ldsm_x4(a[mt], at + mt * 16 * la + kc * 16);
#pragma unroll
        for (int n = 0; n < TQ / 8; n += 2) {
            uint32_t b[4];
            vc_ldsm_x4(b, bt + n * 8 * lb + kc * 16);
            const uint32_t b0[2] = { b[0], b[1] }, b1[2] = { b[2], b[3] };
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                vc_mma_16816(s[mt][n], a[mt], b0);
                vc_mma_16816(s[mt][n + 1], a[mt], b1);
            }
        }
    }
}

/* s[n] (+)= A B over K for the 8 n-tiles of a tile, A in fragments (mma_frag_a), B^T given by rows (pitch lb,
 * 16-byte aligned rows) and its fragments by ldmatrix, two n-tiles a load; each s[n] sums its k steps in order:
 * mma_rows_fm of one m-tile */
template <int K>
__device__ __forceinline__ void mma_rows_f(float (&s)[TQ / 8][4], const uint32_t (&a)[K / 16][4], const bf16 *B, int lb) {
    mma_rows_fm<K, 1>(reinterpret_cast<float(&)[1][TQ / 8][4]>(s), reinterpret_cast<const uint32_t(&)[1][K / 16][4]>(a),
                      B, lb);
}

/* mma_rows_f with A's fragments loaded a k step at a time from the warp's 16 rows at A (pitch la): mma_rows_m of one
 * m-tile */
template <int K>
__device__ __forceinline__ void mma_rows(float (&s)[TQ / 8][4], const bf16 *A, int la, const bf16 *B, int lb) {
    mma_rows_m<K, 1>(reinterpret_cast<float(&)[1][TQ / 8][4]>(s), A, la, B, lb);
}

/* acc[n] += X Y over the 64 tile rows, X in A fragments (xa: 4 key/query steps), Y^T given by rows (pitch ly) */
template <int D>
__device__ __forceinline__ void mma_acc(float (&acc)[D / 8][4], const uint32_t (&xa)[TQ / 16][4], const bf16 *Yt, int ly) {
    const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int kc = 0; kc < TQ / 16; kc++)
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            const bf16 *bp = Yt + (n * 8 + g) * ly + kc * 16 + 2 * t;
            const uint32_t b[2] = { vc_ld32(bp), vc_ld32(bp + 8) };
            vc_mma_16816(acc[n], xa[kc], b);
        }
}

/* mma_acc_t for MT m-tiles (xa[mt], acc[mt]): each B fragment loaded once feeds every m-tile, each acc[mt][n] takes
 * its products in mma_acc_t's order */
template <int D, int MT>
__device__ __forceinline__ void mma_acc_tm(float (&acc)[MT][D / 8][4], const uint32_t (&xa)[MT][TQ / 16][4],
                                           const bf16 *Y, int ly) {
    const int lane = threadIdx.x % 32, j = lane / 8, r = lane % 8;
#pragma unroll
    for (int kc = 0; kc < TQ / 16; kc++)
#pragma unroll
        for (int n = 0; n < D / 8; n += 2) {
            uint32_t b[4];
            vc_ldsm_x4_t(b, Y + (kc * 16 + (j & 1) * 8 + r) * ly + (n + (j >> 1)) * 8);
            const uint32_t b0[2] = { b[0], b[1] }, b1[2] = { b[2], b[3] };
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                vc_mma_16816(acc[mt][n], xa[mt][kc], b0);
                vc_mma_16816(acc[mt][n + 1], xa[mt][kc], b1);
            }
        }
}

/* mma_acc with Y given row-major (pitch ly, 16-byte aligned rows): its B fragments by ldmatrix.trans, two n-tiles a
 * load; the same products in the same order, so the same bits (mma_acc_tm of one m-tile) */
template <int D>
__device__ __forceinline__ void mma_acc_t(float (&acc)[D / 8][4], const uint32_t (&xa)[TQ / 16][4], const bf16 *Y, int ly) {
    mma_acc_tm<D, 1>(reinterpret_cast<float(&)[1][D / 8][4]>(acc), reinterpret_cast<const uint32_t(&)[1][TQ / 16][4]>(xa),
                     Y, ly);
}

#endif
