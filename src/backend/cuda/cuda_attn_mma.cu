/* bf16 tensor-core flash attention forward with the tiles in registers (FlashAttention-2's layout), for heads of
 * 64, 80, 96 or 128 (keys and values alike): one block of 4 warps per (sequence, head, 64 queries), warp w owning
 * query rows 16w .. 16w + 15 as cuda_attn_tc.cu's forward (heads of 64: 128 queries a block, each warp two m-tiles
 * of 16 rows, rows 32w .. 32w + 31), its numerics (q, k, v rounded to bf16, f32 scores and
 * softmax statistics, the probabilities rounded to bf16 for P V, f32 sums) but for the exponentials, taken as
 * FlashAttention takes them (2^(x log2 e - m log2 e) on the special-function unit). S = Q K^T, P and O never leave
 * the registers: each lane holds the elements mma.sync's fragments give it (rows g and g + 8 of the warp's 16,
 * g = lane / 4; columns 2t, 2t + 1 of every 8, t = lane % 4), a row's max and sum are taken over its 4 lanes by
 * shuffles, and S's accumulators become P V's A fragments as they are (two 8-column tiles of S are one 16-key step
 * of P). The warp's Q fragments stay in registers (heads up to 96), K's and V's come by ldmatrix (the unpipelined
 * form stores V transposed: 32-bit loads). A tile that every row of a warp sees whole skips the masks. Every row
 * sums its key tiles in order from the tile the query tile starts at, the lanes' partial sums of a row added in a
 * fixed butterfly: the same bits run to run, a row's result independent of the batch around its sequence.
 * VERLC_CUDA_ATTN_MMA=0: cuda_attn_tc.cu's WMMA kernel instead (A/B). */
#include "cuda_attn_mma.h"
#include <stdlib.h>

namespace {

/* PIPE: K and V tiles double-buffered, V row-major (LV). MT: 16-row m-tiles a warp (a block's query rows BR) */
template <int D, int DV, bool PIPE, int MT = 1>
struct mma_smem {
    static constexpr int LQ = D + PADM, LT = TQ + PADM, LV = DV + PADM, BR = NWM * 16 * MT;
    static constexpr size_t bytes = PIPE ? (size_t)BR * LQ * 2 + (size_t)TQ * LQ * 2 * 2 + (size_t)TQ * LV * 2 * 2
                                         : (size_t)BR * LQ * 2 + (size_t)TQ * LQ * 2 + (size_t)DV * LT * 2;
};

/* PIPE: the key and value tiles come from p.kmir / p.vmir (bf16) by cp.async into two buffers, the next tile's copy
 * in flight while the current one is multiplied; V's B fragments by ldmatrix.trans from its row-major tile. The same
 * roundings and products in the same order as the plain form: the same bits.
 * MT (pipelined form only): each warp owns MT m-tiles of 16 query rows (rows 16 MT w ..), a block 64 MT queries, so
 * that each K and V fragment loaded from shared memory feeds MT mma (FlashAttention-2's 128-row blocks at MT 2) and
 * each key tile copied serves twice the queries. A row's products, sums and tile order are those of MT 1 wherever
 * its tiles start at the same key (always without a window or chunks): the same bits (tested). A tile none of a
 * warp's rows sees is skipped (its sums would stay as they are). */
template <int D, int DV, bool PIPE, int MT>
__global__ void __launch_bounds__(NWM * 32) k_attn_fwd_mma(float *o, float *lse, const float *q, attn_params p) {
    static_assert(PIPE || MT == 1, "m-tiles: the pipelined form");
    typedef mma_smem<D, DV, PIPE, MT> L;
    constexpr int LQ = L::LQ, LT = L::LT, LV = L::LV, BR = L::BR, NR = 2 * MT;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *Qs = reinterpret_cast<bf16 *>(smem_raw), *Ks = Qs + BR * LQ, *Vt = Ks + (PIPE ? 2 : 1) * TQ * LQ;
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const float slope = vc_attn_slope(p, h);
    const int64_t qb = bi.y, nr = sm.qlen - qb < BR ? sm.qlen - qb : BR, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t qstride = (int64_t)p.nh * D, ostride = (int64_t)p.nh * DV;
    mma_load_rows<D, BR>(Qs, LQ, q + (sm.q0 + qb) * qstride + (int64_t)h * D, qstride, (int)nr);
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    int rr[NR]; /* the lane's rows of the block: g and g + 8 of each of the warp's m-tiles */
#pragma unroll
    for (int i = 0; i < NR; i++) rr[i] = warp * 16 * MT + (i >> 1) * 16 + g + (i & 1) * 8;
    /* the keys [lo, hi] each row sees (vc_attn_visible's causal, window and chunk bounds, found once: no 64-bit
     * division in the tile loop); none for rows past the block's last */
    int64_t lo[NR], hi[NR];
#pragma unroll
    for (int i = 0; i < NR; i++) mma_row_bounds(p, sm, pos0 + rr[i], rr[i] < nr, &lo[i], &hi[i]);
    float m[NR], ml[NR], l[NR], acc[MT][DV / 8][4];
#pragma unroll
    for (int i = 0; i < NR; i++) m[i] = -INFINITY, ml[i] = 0.0f, l[i] = 0.0f;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) mma_zero(acc[mt]);
    /* heads up to 96 with one m-tile: the warp's Q fragments stay in registers (for wider ones, or two m-tiles, the
     * registers they would take cost more than loading them again a tile) */
    constexpr bool QR = MT == 1 && D <= 96;
    constexpr int NQA = QR ? D / 16 : 1;
    uint32_t qa[MT][NQA][4];
    if constexpr (QR) {
        __syncthreads(); /* Q in place */
#pragma unroll
        for (int mt = 0; mt < MT; mt++) mma_frag_a<NQA * 16>(qa[mt], Qs + (warp * MT + mt) * 16 * LQ, LQ);
    }
    const mma_pipe<D, DV> pipe(Ks, LQ, Vt, LV, p, sm, kvh);
    if (PIPE) pipe.start(p, j0, j1);
    int buf = 0;
    for (int64_t kb = j0; kb < j1; kb += TQ) {
        const bf16 *Kc = Ks, *Vc = Vt;
        if (PIPE)
            pipe.next(buf, p, kb, j1, &Kc, &Vc);
        else {
            const int nk = (int)(j1 - kb < TQ ? j1 - kb : TQ);
            __syncthreads(); /* the previous tile's K and V are no longer read (and Q is in place) */
            mma_load_rows<D>(Ks, LQ, sm.k + kb * p.kstride + (int64_t)kvh * D, p.kstride, nk);
            mma_load_cols<DV>(Vt, LT, sm.v + kb * p.vstride + (int64_t)kvh * DV, p.vstride, nk);
            __syncthreads();
        }
        if (!mma_tile_none(lo, hi, kb)) {
            float s[MT][TQ / 8][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) mma_zero(s[mt]);
            if constexpr (QR) /* S = Q K^T */
                mma_rows_fm<NQA * 16, MT>(s, qa, Kc, LQ);
            else
                mma_rows_m<D, MT>(s, Qs + warp * MT * 16 * LQ, LQ, Kc, LQ);
            /* scores, masks and the online softmax of the lane's rows; a tile every row of the warp sees whole takes
             * no masks (the same scores: the mask keeps every key) */
            float mx[NR];
#pragma unroll
            for (int i = 0; i < NR; i++) mx[i] = -INFINITY;
            if (mma_tile_whole(p, lo, hi, kb)) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int n = 0; n < TQ / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            s[mt][n][e] *= p.scale;
                            mx[2 * mt + (e >> 1)] = fmaxf(mx[2 * mt + (e >> 1)], s[mt][n][e]);
                        }
            } else
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int n = 0; n < TQ / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int i = 2 * mt + (e >> 1);
                            const int64_t key = kb + n * 8 + 2 * t + (e & 1), pos = pos0 + rr[i];
                            const bool vis =
                                key >= lo[i] && key <= hi[i] && vc_attn_selected(p, sm.q0 + qb + rr[i], key);
                            s[mt][n][e] = vis ? vc_attn_score(p, s[mt][n][e], slope, pos, key) : -INFINITY;
                            mx[i] = fmaxf(mx[i], s[mt][n][e]);
                        }
            /* exponentials as 2^(x log2 e - max log2 e); a row that sees nothing yet (max -inf) gets 2^-inf = 0 */
            float corr[NR], sum[NR];
#pragma unroll
            for (int i = 0; i < NR; i++) corr[i] = vc_softmax_step(mx[i], &m[i], &ml[i]), sum[i] = 0.0f;
            uint32_t pa[MT][TQ / 16][4]; /* P as the A fragments of P V: S tiles 2kc and 2kc + 1 make key step kc */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < TQ / 8; n++) {
                    float e[4];
#pragma unroll
                    for (int x = 0; x < 4; x++) {
                        e[x] = vc_ex2(fmaf(s[mt][n][x], VC_LOG2E, -ml[2 * mt + (x >> 1)]));
                        sum[2 * mt + (x >> 1)] += e[x];
                    }
                    pa[mt][n / 2][(n & 1) * 2] = vc_pack_bf16x2(e[0], e[1]);
                    pa[mt][n / 2][(n & 1) * 2 + 1] = vc_pack_bf16x2(e[2], e[3]);
                }
#pragma unroll
            for (int i = 0; i < NR; i++) l[i] = l[i] * corr[i] + sum[i]; /* the lane's part of the row's sum */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < DV / 8; n++) {
                    acc[mt][n][0] *= corr[2 * mt];
                    acc[mt][n][1] *= corr[2 * mt];
                    acc[mt][n][2] *= corr[2 * mt + 1];
                    acc[mt][n][3] *= corr[2 * mt + 1];
                }
            if constexpr (PIPE)
                mma_acc_tm<DV, MT>(acc, pa, Vc, LV); /* O += P V */
            else
                mma_acc<DV>(acc[0], pa[0], Vt, LT);
        }
        if (PIPE) {
            __syncthreads(); /* the tile is no longer read: the next iteration's copy may overwrite it */
            buf ^= 1;
        }
    }
#pragma unroll
    for (int i = 0; i < NR; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        const float sf = vc_attn_sink_fold(p, h, &m[i], &l[i]), inv = l[i] > 0 ? sf / l[i] : 0.0f;
        if (rr[i] >= nr) continue;
        const int64_t row = sm.q0 + qb + rr[i];
        if (lse && t == 0) lse[row * p.nh + h] = l[i] > 0 ? m[i] + logf(l[i]) : -INFINITY;
        float *orow = o + row * ostride + (int64_t)h * DV + 2 * t;
        const bool pair = (reinterpret_cast<uintptr_t>(orow) & 7) == 0;
        const float(&a)[DV / 8][4] = acc[i >> 1];
        const int c = 2 * (i & 1);
#pragma unroll
        for (int n = 0; n < DV / 8; n++) {
            const float x0 = a[n][c] * inv, x1 = a[n][c + 1] * inv;
            if (pair) *reinterpret_cast<float2 *>(orow + n * 8) = make_float2(x0, x1);
            else orow[n * 8] = x0, orow[n * 8 + 1] = x1;
        }
    }
}

template <int D>
void mma_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    const int64_t kw = (int64_t)d->n_kv_head * D;
    if constexpr (D <= 64)
        if (vc_cu_attn_mtiles(D) == 2) {
            typedef mma_smem<D, D, true, 2> L2;
            if (vc_cu_attn_launch_pipe_rows(k_attn_fwd_mma<D, D, true, 2>, d, L2::BR, kw, d->n_head, L2::bytes, NULL,
                                            op, o, lse, q))
                return; /* done, or failed (sticky) */
        }
    if (vc_cu_attn_launch_pipe(k_attn_fwd_mma<D, D, true, 1>, d, kw, d->n_head, mma_smem<D, D, true>::bytes, NULL, op,
                               o, lse, q))
        return;
    vc_cu_attn_launch(k_attn_fwd_mma<D, D, false, 1>, d, TQ, 0, d->n_head, NWM * 32, mma_smem<D, D, false>::bytes,
                      NULL, op, o, lse, q);
}

} // namespace

/* the mirrors: each sequence's key and value rows rounded to bf16 at their offsets from p.kbase / p.vbase */
__global__ void k_mirror_kv(attn_params p, int n_seq, int kw, int vw) {
    bf16 *km = (bf16 *)p.kmir, *vm = (bf16 *)p.vmir;
    for (int s = blockIdx.y; s < n_seq; s += gridDim.y) {
        const seq_meta sm = p.seq[s];
        for (int64_t j = blockIdx.x; j < sm.kvlen; j += gridDim.x) {
            const float *kr = sm.k + j * p.kstride, *vr = sm.v + j * p.vstride;
            bf16 *kd = km + (kr - p.kbase), *vd = vm + (vr - p.vbase);
            for (int c = threadIdx.x; c < kw; c += blockDim.x) kd[c] = __float2bfloat16_rn(kr[c]);
            for (int c = threadIdx.x; c < vw; c += blockDim.x) vd[c] = __float2bfloat16_rn(vr[c]);
        }
    }
}

/* [*lo, *hi): the elements the sequences' rows of w columns span from their pointers x (stride st); 0 when there are
 * none or a row starts off a 16-byte bf16 boundary from *lo (cp.async copies 16 bytes) */
static int kv_span(const vc_attn_desc *d, const float *const *x, int64_t st, int64_t w, const float **lo,
                   const float **hi) {
    *lo = *hi = NULL;
    for (int s = 0; s < d->n_seq; s++) {
        if (d->kv_len[s] <= 0) continue;
        const float *a = x[s], *b = x[s] + (d->kv_len[s] - 1) * st + w;
        if (!*lo || a < *lo) *lo = a;
        if (!*hi || b > *hi) *hi = b;
    }
    for (int s = 0; *lo && s < d->n_seq; s++)
        if (d->kv_len[s] > 0 && (x[s] - *lo) % 8) return 0;
    return *lo != NULL && st % 8 == 0;
}

int vc_cu_attn_mirror_plan(const vc_attn_desc *d, int64_t kw, vc_kv_mirror *m) {
    const char *e = getenv("VERLC_CUDA_ATTN_PIPE"); /* read per call: a test switches it */
    const float *k1, *v1;
    if ((e && *e == '0') || !kv_span(d, d->k_seq, d->k_stride, kw, &m->k0, &k1) ||
        !kv_span(d, d->v_seq, d->v_stride, kw, &m->v0, &v1))
        return 0;
    m->kn = ((size_t)(k1 - m->k0) + 7) & ~(size_t)7;
    m->vn = (size_t)(v1 - m->v0);
    return 1;
}

void *vc_cu_attn_mirror_make(const vc_kv_mirror *m, attn_params *p, int n_seq, int64_t kw) {
    bf16 *mir = NULL;
    if (vc_cu_malloc_async((void **)&mir, (m->kn + m->vn) * sizeof(bf16)) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: the plain kernel runs */
        return NULL;
    }
    p->kmir = mir;
    p->vmir = mir + m->kn;
    p->kbase = m->k0;
    p->vbase = m->v0;
    const unsigned ys = n_seq < 65535 ? (unsigned)n_seq : 65535u;
    k_mirror_kv<<<dim3(256, ys), 128, 0, vc_cu_stream()>>>(*p, n_seq, (int)kw, (int)kw);
    return mir;
}

int vc_cu_attn_fwd_mma(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    const char *e = getenv("VERLC_CUDA_ATTN_MMA"); /* read per call: a test switches it */
    if ((e && *e == '0') || d->head_dim != d->v_head_dim) return 0;
    switch (d->head_dim) {
    case 64: mma_fwd<64>(o, lse, q, d, op); return 1;
    case 80: mma_fwd<80>(o, lse, q, d, op); return 1;
    case 96: mma_fwd<96>(o, lse, q, d, op); return 1;
    case 128: mma_fwd<128>(o, lse, q, d, op); return 1;
    default: return 0;
    }
}
