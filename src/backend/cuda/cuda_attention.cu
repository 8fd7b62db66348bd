/* Flash attention over packed variable-length sequences (f32, SIMT). Forward: one thread block per
 * (sequence, head, block of BQ queries) walks the visible keys in tiles of BK with an online softmax,
 * so no [T x T] matrix exists; it saves the log-sum-exp. Backward (FA2 layout) recomputes the
 * probabilities from the saved lse: a dK/dV kernel with one block per (sequence, kv head, key block)
 * loops over the query heads of its group and the query blocks that can see its keys, and a dQ kernel
 * with one block per (sequence, head, query block) loops over key blocks. Every output element is
 * summed by one thread in a fixed order: no float atomics, results are the same bits run to run.
 * Head dims are padded to a bucket (64, 128, 256, 512) with zeros. Threads form a 16 x 16 grid; a thread
 * owns rows tr + 16 i and columns tc + 16 j of each tile, so row reductions are half-warp shuffles. */
#include "cuda_internal.h"
#include <stdio.h>
#include <stdlib.h>

typedef vc_cu_attn_seq seq_meta;

struct attn_params {
    const seq_meta *seq;
    const int2 *blk; /* per thread block: sequence, first row (query or key) */
    float *D;        /* backward: rowsum(dO * O) [Tq, nh] */
    int nh, nkv, hd, dv;
    int64_t kstride, vstride;
    float scale, cap;
    int window, causal, alibi, chunk;
    const float *sinks; /* [nh] or NULL */
    float alibi_scale; /* the slopes' factor (vc_attn_desc.alibi_scale, 1 for 0) */
    const uint32_t *sel; /* DeepSeek Sparse Attention's selection (vc_attn_desc.sel) or NULL */
    int64_t sel_words;
};

#define NT 256

/* dst[r][c] (row pitch D + 1) = src[r * stride + c] for r < rows, c < cols; zeros elsewhere */
template <int D>
__device__ __forceinline__ void load_tile(float *dst, const float *src, int64_t stride, int rows, int nrows,
                                          int cols) {
    for (int idx = threadIdx.x; idx < nrows * D; idx += NT) {
        int r = idx / D, c = idx % D;
        dst[r * (D + 1) + c] = (r < rows && c < cols) ? src[r * stride + c] : 0.0f;
    }
}

/* Two register-tiled products over shared tiles of pitch D + 1, the same d order for both:
 * x[i][j] = sum_d A1[r_i][d] B1[c_j][d], y[i][j] = sum_d A2[r_i][d] B2[c_j][d] with r_i = tr + 16 i,
 * c_j = tc + 16 j (backward: scores and dO.V^T, keys or queries as rows). */
template <int D, int R, int C>
__device__ __forceinline__ void dual_dot(float (&x)[R][C], float (&y)[R][C], const float *A1, const float *A2,
                                         const float *B1, const float *B2, int tr, int tc) {
    #pragma unroll
    for (int i = 0; i < R; i++)
        #pragma unroll
        for (int j = 0; j < C; j++) x[i][j] = y[i][j] = 0;
#pragma unroll 4
    for (int d = 0; d < D; d++) {
        float a1[R], a2[R], b1[C], b2[C];
        #pragma unroll
        for (int i = 0; i < R; i++) {
            a1[i] = A1[(tr + 16 * i) * (D + 1) + d];
            a2[i] = A2[(tr + 16 * i) * (D + 1) + d];
        }
        #pragma unroll
        for (int j = 0; j < C; j++) {
            b1[j] = B1[(tc + 16 * j) * (D + 1) + d];
            b2[j] = B2[(tc + 16 * j) * (D + 1) + d];
        }
        #pragma unroll
        for (int i = 0; i < R; i++)
            #pragma unroll
            for (int j = 0; j < C; j++) {
                x[i][j] += a1[i] * b1[j];
                y[i][j] += a2[i] * b2[j];
            }
    }
}

/* ---------------- forward ---------------- */
template <int D, int BQ, int BK>
__global__ void __launch_bounds__(NT) k_attn_fwd(float *o, float *lse, const float *q, attn_params p) {
    constexpr int RM = BQ / 16, CN = BK / 16, ON = D / 16;
    extern __shared__ float smem[];
    float *Qs = smem, *Ks = Qs + BQ * (D + 1), *Vs = Ks + BK * (D + 1), *Ps = Vs + BK * (D + 1);
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    const int64_t qb = bi.y, nr = sm.qlen - qb < BQ ? sm.qlen - qb : BQ, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t qstride = (int64_t)p.nh * p.hd, ostride = (int64_t)p.nh * p.dv;
    load_tile<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * p.hd, qstride, (int)nr, BQ, p.hd);
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    float m[RM], l[RM], acc[RM][ON];
    #pragma unroll
    for (int i = 0; i < RM; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
        #pragma unroll
        for (int c = 0; c < ON; c++) acc[i][c] = 0;
    }
    for (int64_t kb = j0; kb < j1; kb += BK) {
        int nk = (int)(j1 - kb < BK ? j1 - kb : BK);
        __syncthreads();
        load_tile<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * p.hd, p.kstride, nk, BK, p.hd);
        load_tile<D>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * p.dv, p.vstride, nk, BK, p.dv);
        __syncthreads();
        float s[RM][CN];
        #pragma unroll
        for (int i = 0; i < RM; i++)
            #pragma unroll
            for (int j = 0; j < CN; j++) s[i][j] = 0;
#pragma unroll 4
        for (int d = 0; d < D; d++) {
            float qv[RM], kv[CN];
            #pragma unroll
            for (int i = 0; i < RM; i++) qv[i] = Qs[(tr + 16 * i) * (D + 1) + d];
            #pragma unroll
            for (int j = 0; j < CN; j++) kv[j] = Ks[(tc + 16 * j) * (D + 1) + d];
            #pragma unroll
            for (int i = 0; i < RM; i++)
                #pragma unroll
                for (int j = 0; j < CN; j++) s[i][j] += qv[i] * kv[j];
        }
        #pragma unroll
        for (int i = 0; i < RM; i++) {
            int64_t pos = pos0 + tr + 16 * i;
            float mx = -INFINITY;
            #pragma unroll
            for (int j = 0; j < CN; j++) {
                int64_t key = kb + tc + 16 * j;
                s[i][j] = (key < j1 && vc_attn_visible(p, sm, pos, key)) ? vc_attn_score(p, s[i][j], h, pos, key) : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            float mn = fmaxf(m[i], mx), sum = 0;
            float corr = mn == -INFINITY ? 1.0f : expf(m[i] - mn);
            #pragma unroll
            for (int j = 0; j < CN; j++) {
                float e = mn == -INFINITY ? 0.0f : expf(s[i][j] - mn);
                Ps[(tr + 16 * i) * (BK + 1) + tc + 16 * j] = e;
                sum += e;
            }
            for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            l[i] = l[i] * corr + sum;
            m[i] = mn;
            #pragma unroll
            for (int c = 0; c < ON; c++) acc[i][c] *= corr;
        }
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < BK; k++) {
            float vv[ON];
            #pragma unroll
            for (int c = 0; c < ON; c++) vv[c] = Vs[k * (D + 1) + tc + 16 * c];
            #pragma unroll
            for (int i = 0; i < RM; i++) {
                float pv = Ps[(tr + 16 * i) * (BK + 1) + k];
                #pragma unroll
                for (int c = 0; c < ON; c++) acc[i][c] += pv * vv[c];
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < RM; i++) {
        int r = tr + 16 * i;
        if (r >= nr) continue;
        int64_t row = sm.q0 + qb + r;
        float sf = vc_attn_sink_fold(p, h, &m[i], &l[i]);
        float inv = l[i] > 0 ? sf / l[i] : 0.0f;
        #pragma unroll
        for (int c = 0; c < ON; c++) {
            int col = tc + 16 * c;
            if (col < p.dv) o[row * ostride + (int64_t)h * p.dv + col] = acc[i][c] * inv;
        }
        if (lse && tc == 0) lse[row * p.nh + h] = l[i] > 0 ? m[i] + logf(l[i]) : -INFINITY;
    }
}

/* ---------------- backward: D = rowsum(dO * O), one warp per (row, head) ---------------- */
__global__ void k_attn_bwd_dot(float *D, const float *dout, const float *o, int64_t rows, int nh, int dv) {
    int lane = threadIdx.x % 32;
    int64_t nw = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < rows * nh; w += nw) {
        const float *a = dout + w * dv, *b = o + w * dv;
        float s = 0;
        for (int c = lane; c < dv; c += 32) s += a[c] * b[c];
        s = vc_warp_sum(s);
        if (lane == 0) D[w] = s;
    }
}

/* ---------------- backward: dK, dV ---------------- */
template <int D, int BQ, int BK>
__global__ void __launch_bounds__(NT) k_attn_bwd_dkdv(const float *dout, const float *lse, const float *q,
                                                      attn_params p) {
    constexpr int RK = BK / 16, CQ = BQ / 16, ON = D / 16;
    extern __shared__ float smem[];
    float *Ks = smem, *Vs = Ks + BK * (D + 1), *Qs = Vs + BK * (D + 1), *dOs = Qs + BQ * (D + 1);
    float *PT = dOs + BQ * (D + 1), *dST = PT + BK * (BQ + 1), *Ls = dST + BK * (BQ + 1), *Dd = Ls + BQ;
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int kvh = blockIdx.y, grp = p.nh / p.nkv, tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    const int64_t kb = bi.y, nk = sm.kvlen - kb < BK ? sm.kvlen - kb : BK, off = sm.kvlen - sm.qlen;
    const int64_t qstride = (int64_t)p.nh * p.hd, ostride = (int64_t)p.nh * p.dv;
    /* queries that can see a key of this block (causal, window, chunk) */
    int64_t i0, i1;
    vc_attn_query_range(p, kb, nk, off, sm.qlen, &i0, &i1);
    if (i0 >= i1) return;
    load_tile<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * p.hd, p.kstride, (int)nk, BK, p.hd);
    load_tile<D>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * p.dv, p.vstride, (int)nk, BK, p.dv);
    float dk[RK][ON], dvv[RK][ON];
    #pragma unroll
    for (int i = 0; i < RK; i++)
        #pragma unroll
        for (int c = 0; c < ON; c++) dk[i][c] = dvv[i][c] = 0;
    for (int g = 0; g < grp; g++) {
        int h = kvh * grp + g;
        for (int64_t qb = i0; qb < i1; qb += BQ) {
            int nq = (int)(i1 - qb < BQ ? i1 - qb : BQ);
            __syncthreads();
            load_tile<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * p.hd, qstride, nq, BQ, p.hd);
            load_tile<D>(dOs, dout + (sm.q0 + qb) * ostride + (int64_t)h * p.dv, ostride, nq, BQ, p.dv);
            for (int r = threadIdx.x; r < BQ; r += NT) {
                Ls[r] = r < nq ? lse[(sm.q0 + qb + r) * p.nh + h] : 0.0f;
                Dd[r] = r < nq ? p.D[(sm.q0 + qb + r) * p.nh + h] : 0.0f;
            }
            __syncthreads();
            float st[RK][CQ], dp[RK][CQ];
            dual_dot<D, RK, CQ>(st, dp, Ks, Vs, Qs, dOs, tr, tc);
            #pragma unroll
            for (int i = 0; i < RK; i++)
                #pragma unroll
                for (int j = 0; j < CQ; j++) {
                    int64_t key = kb + tr + 16 * i;
                    int qr = tc + 16 * j;
                    float P = 0, ds = 0;
                    if (qr < nq && vc_attn_visible(p, sm, off + qb + qr, key)) {
                        float sc = vc_attn_score(p, st[i][j], h, off + qb + qr, key);
                        P = expf(sc - Ls[qr]);
                        ds = P * (dp[i][j] - Dd[qr]);
                        if (p.cap > 0) {
                            float t = sc / p.cap;
                            ds *= 1.0f - t * t;
                        }
                    }
                    PT[(tr + 16 * i) * (BQ + 1) + qr] = P;
                    dST[(tr + 16 * i) * (BQ + 1) + qr] = ds;
                }
            __syncthreads();
#pragma unroll 4
            for (int j = 0; j < BQ; j++) {
                float ov[ON], qv[ON];
                #pragma unroll
                for (int c = 0; c < ON; c++) {
                    ov[c] = dOs[j * (D + 1) + tc + 16 * c];
                    qv[c] = Qs[j * (D + 1) + tc + 16 * c];
                }
                #pragma unroll
                for (int i = 0; i < RK; i++) {
                    float pt = PT[(tr + 16 * i) * (BQ + 1) + j], dt = dST[(tr + 16 * i) * (BQ + 1) + j];
                    #pragma unroll
                    for (int c = 0; c < ON; c++) {
                        dvv[i][c] += pt * ov[c];
                        dk[i][c] += dt * qv[c];
                    }
                }
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < RK; i++) {
        int r = tr + 16 * i;
        if (r >= nk) continue;
        float *dkr = sm.dk + (kb + r) * p.kstride + (int64_t)kvh * p.hd;
        float *dvr = sm.dv + (kb + r) * p.vstride + (int64_t)kvh * p.dv;
        #pragma unroll
        for (int c = 0; c < ON; c++) {
            int col = tc + 16 * c;
            if (col < p.hd) dkr[col] += p.scale * dk[i][c];
            if (col < p.dv) dvr[col] += dvv[i][c];
        }
    }
}

/* ---------------- backward: dQ ---------------- */
template <int D, int BQ, int BK>
__global__ void __launch_bounds__(NT) k_attn_bwd_dq(float *dq, const float *dout, const float *lse, const float *q,
                                                    attn_params p) {
    constexpr int RM = BQ / 16, CN = BK / 16, ON = D / 16;
    extern __shared__ float smem[];
    float *Qs = smem, *dOs = Qs + BQ * (D + 1), *Ks = dOs + BQ * (D + 1), *Vs = Ks + BK * (D + 1);
    float *dSs = Vs + BK * (D + 1), *Ls = dSs + BQ * (BK + 1), *Dd = Ls + BQ;
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    const int64_t qb = bi.y, nr = sm.qlen - qb < BQ ? sm.qlen - qb : BQ, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t qstride = (int64_t)p.nh * p.hd, ostride = (int64_t)p.nh * p.dv;
    load_tile<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * p.hd, qstride, (int)nr, BQ, p.hd);
    load_tile<D>(dOs, dout + (sm.q0 + qb) * ostride + (int64_t)h * p.dv, ostride, (int)nr, BQ, p.dv);
    for (int r = threadIdx.x; r < BQ; r += NT) {
        Ls[r] = r < nr ? lse[(sm.q0 + qb + r) * p.nh + h] : 0.0f;
        Dd[r] = r < nr ? p.D[(sm.q0 + qb + r) * p.nh + h] : 0.0f;
    }
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    float acc[RM][ON];
    #pragma unroll
    for (int i = 0; i < RM; i++)
        #pragma unroll
        for (int c = 0; c < ON; c++) acc[i][c] = 0;
    for (int64_t kb = j0; kb < j1; kb += BK) {
        int nk = (int)(j1 - kb < BK ? j1 - kb : BK);
        __syncthreads();
        load_tile<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * p.hd, p.kstride, nk, BK, p.hd);
        load_tile<D>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * p.dv, p.vstride, nk, BK, p.dv);
        __syncthreads();
        float s[RM][CN], dp[RM][CN];
        dual_dot<D, RM, CN>(s, dp, Qs, dOs, Ks, Vs, tr, tc);
        #pragma unroll
        for (int i = 0; i < RM; i++)
            #pragma unroll
            for (int j = 0; j < CN; j++) {
                int r = tr + 16 * i;
                int64_t key = kb + tc + 16 * j;
                float ds = 0;
                if (r < nr && key < j1 && vc_attn_visible(p, sm, pos0 + r, key)) {
                    float sc = vc_attn_score(p, s[i][j], h, pos0 + r, key), P = expf(sc - Ls[r]);
                    ds = P * (dp[i][j] - Dd[r]);
                    if (p.cap > 0) {
                        float t = sc / p.cap;
                        ds *= 1.0f - t * t;
                    }
                }
                dSs[r * (BK + 1) + tc + 16 * j] = ds;
            }
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < BK; k++) {
            float kv[ON];
            #pragma unroll
            for (int c = 0; c < ON; c++) kv[c] = Ks[k * (D + 1) + tc + 16 * c];
            #pragma unroll
            for (int i = 0; i < RM; i++) {
                float ds = dSs[(tr + 16 * i) * (BK + 1) + k];
                #pragma unroll
                for (int c = 0; c < ON; c++) acc[i][c] += ds * kv[c];
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < RM; i++) {
        int r = tr + 16 * i;
        if (r >= nr) continue;
        float *dqr = dq + (sm.q0 + qb + r) * qstride + (int64_t)h * p.hd;
        #pragma unroll
        for (int c = 0; c < ON; c++) {
            int col = tc + 16 * c;
            if (col < p.hd) dqr[col] += p.scale * acc[i][c];
        }
    }
}

/* ---------------- host side ---------------- */
static int attn_check(const vc_attn_desc *d, const char *op) {
    const char *why = NULL;
    if (d->n_head <= 0 || d->n_kv_head <= 0 || d->n_head % d->n_kv_head) why = "n_head must be a multiple of n_kv_head";
    else if (d->head_dim > 512 || d->v_head_dim > 512 || d->head_dim <= 0 || d->v_head_dim <= 0)
        why = "head_dim and v_head_dim must be in 1..512";
    if (!why) return 1;
    char what[200];
    snprintf(what, sizeof what, "%s (%d heads, %d kv heads, dims %d/%d)", why, d->n_head, d->n_kv_head, d->head_dim,
             d->v_head_dim);
    vc_cu_fail(VC_ERR_UNSUPPORTED, op, what);
    return 0;
}

void *vc_cu_attn_meta(const vc_attn_desc *d, int rows, int by_keys, const vc_cu_attn_seq **seq, const int2 **blk,
                      int64_t *nblk, const char *op) {
    int64_t nb = 0;
    for (int s = 0; s < d->n_seq; s++) {
        int64_t n = by_keys ? d->kv_len[s] : d->q_start[s + 1] - d->q_start[s];
        nb += (n + rows - 1) / rows;
    }
    size_t meta_bytes = (size_t)d->n_seq * sizeof(vc_cu_attn_seq), bytes = meta_bytes + (size_t)nb * sizeof(int2);
    char *h = (char *)malloc(bytes ? bytes : 1);
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the host block table");
        return NULL;
    }
    vc_cu_attn_seq *sm = (vc_cu_attn_seq *)h;
    int2 *bl = (int2 *)(h + meta_bytes);
    int64_t b = 0;
    for (int s = 0; s < d->n_seq; s++) {
        sm[s].q0 = d->q_start[s];
        sm[s].qlen = d->q_start[s + 1] - d->q_start[s];
        sm[s].kvlen = d->kv_len[s];
        sm[s].k = d->k_seq[s];
        sm[s].v = d->v_seq[s];
        sm[s].dk = d->dk_seq ? d->dk_seq[s] : NULL;
        sm[s].dv = d->dv_seq ? d->dv_seq[s] : NULL;
        int64_t n = by_keys ? sm[s].kvlen : sm[s].qlen;
        for (int64_t r = 0; r < n; r += rows) bl[b++] = make_int2(s, (int)r);
    }
    char *dev = (char *)vc_cu_upload(h, bytes, op);
    free(h);
    if (!dev) return NULL;
    *seq = (const vc_cu_attn_seq *)dev;
    *blk = (const int2 *)(dev + meta_bytes);
    *nblk = nb;
    return dev;
}

/* the launch metadata (vc_cu_attn_meta) and the scalar parameters */
static void *upload_meta(const vc_attn_desc *d, int rows, int by_keys, attn_params *p, int64_t *nblk, const char *op) {
    void *dev = vc_cu_attn_meta(d, rows, by_keys, &p->seq, &p->blk, nblk, op);
    if (!dev) return NULL;
    p->nh = d->n_head;
    p->nkv = d->n_kv_head;
    p->hd = d->head_dim;
    p->dv = d->v_head_dim;
    p->kstride = d->k_stride;
    p->vstride = d->v_stride;
    p->scale = d->scale;
    p->cap = d->softcap;
    p->window = d->window;
    p->causal = d->causal;
    p->alibi = d->alibi;
    p->alibi_scale = d->alibi_scale ? d->alibi_scale : 1.0f;
    p->chunk = d->chunk;
    p->sinks = d->sinks;
    p->sel = d->sel;
    p->sel_words = d->sel_words;
    p->D = NULL;
    return dev;
}

static int bucket(const vc_attn_desc *d) {
    int m = d->head_dim > d->v_head_dim ? d->head_dim : d->v_head_dim;
    return m <= 64 ? 64 : m <= 128 ? 128 : m <= 256 ? 256 : 512; /* 512: Gemma 4's full layers */
}

template <int D, int BQ, int BK>
static void launch_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    attn_params p;
    int64_t nb;
    void *meta = upload_meta(d, BQ, 0, &p, &nb, op);
    if (!meta) return;
    size_t sh = (size_t)(BQ * (D + 1) + 2 * BK * (D + 1) + BQ * (BK + 1)) * sizeof(float);
    cudaFuncSetAttribute(k_attn_fwd<D, BQ, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
    if (nb > 0) k_attn_fwd<D, BQ, BK><<<dim3((unsigned)nb, d->n_head), NT, sh, vc_cu_stream()>>>(o, lse, q, p);
    vc_cu_end(op);
    vc_cu_scratch_free(meta);
}

void vc_cu_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d) {
    const char *op = "attention forward";
    if (d->page_tokens > 0) { /* refills its page table even when a graph replays the kernel */
        if (vc_cu_begin_io(op) && attn_check(d, op) && d->n_seq > 0) vc_cu_attn_fwd_paged(o, lse, q, d, op);
        return;
    }
    if (!vc_cu_begin(op) || !attn_check(d, op) || d->n_seq <= 0) return;
    if (vc_cu_attn_tc_eligible(d)) {
        vc_cu_attn_fwd_tc(o, lse, q, d, op);
        return;
    }
    switch (bucket(d)) {
    case 64: launch_fwd<64, 64, 64>(o, lse, q, d, op); break;
    case 128: launch_fwd<128, 64, 64>(o, lse, q, d, op); break;
    case 256: launch_fwd<256, 64, 32>(o, lse, q, d, op); break;
    default: launch_fwd<512, 32, 16>(o, lse, q, d, op); break;
    }
}

template <int D, int BQ, int BK>
static void launch_dq(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                      float *Dd, const char *op) {
    attn_params p;
    int64_t nb;
    void *meta = upload_meta(d, BQ, 0, &p, &nb, op);
    if (!meta) return;
    p.D = Dd;
    size_t sh = (size_t)(2 * BQ * (D + 1) + 2 * BK * (D + 1) + BQ * (BK + 1) + 2 * BQ) * sizeof(float);
    cudaFuncSetAttribute(k_attn_bwd_dq<D, BQ, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
    if (nb > 0)
        k_attn_bwd_dq<D, BQ, BK><<<dim3((unsigned)nb, d->n_head), NT, sh, vc_cu_stream()>>>(dq, dout, lse, q, p);
    vc_cu_end(op);
    vc_cu_scratch_free(meta);
}

template <int D, int BQ, int BK>
static void launch_dkdv(const float *dout, const float *lse, const float *q, const vc_attn_desc *d, float *Dd,
                        const char *op) {
    attn_params p;
    int64_t nb;
    void *meta = upload_meta(d, BK, 1, &p, &nb, op);
    if (!meta) return;
    p.D = Dd;
    size_t sh = (size_t)(2 * BK * (D + 1) + 2 * BQ * (D + 1) + 2 * BK * (BQ + 1) + 2 * BQ) * sizeof(float);
    cudaFuncSetAttribute(k_attn_bwd_dkdv<D, BQ, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
    if (nb > 0)
        k_attn_bwd_dkdv<D, BQ, BK><<<dim3((unsigned)nb, d->n_kv_head), NT, sh, vc_cu_stream()>>>(dout, lse, q, p);
    vc_cu_end(op);
    vc_cu_scratch_free(meta);
}

void vc_cu_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                    const vc_attn_desc *d) {
    const char *op = "attention backward";
    if (!vc_cu_begin(op) || !attn_check(d, op) || d->n_seq <= 0) return;
    if (d->page_tokens > 0) {
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, "paged keys/values are forward only");
        return;
    }
    int64_t rows = d->q_start[d->n_seq] - d->q_start[0], base = d->q_start[0];
    float *Dfull = (float *)vc_cu_scratch((size_t)(d->q_start[d->n_seq] * d->n_head) * sizeof(float), op);
    if (!Dfull) return;
    (void)base;
    if (rows > 0) {
        int64_t warps = rows * d->n_head;
        k_attn_bwd_dot<<<vc_cu_blocks(warps * 32, 256), 256, 0, vc_cu_stream()>>>(
            Dfull + base * d->n_head, dout + base * d->n_head * d->v_head_dim, o + base * d->n_head * d->v_head_dim,
            rows, d->n_head, d->v_head_dim);
        if (!vc_cu_end(op)) goto out;
        int need_kv = d->dk_seq && d->dv_seq;
        if (vc_cu_attn_tc_eligible(d)) {
            vc_cu_attn_bwd_tc(dq, dout, lse, q, d, Dfull, op);
            goto out;
        }
        switch (bucket(d)) {
        case 64:
            if (dq) launch_dq<64, 64, 64>(dq, dout, lse, q, d, Dfull, op);
            if (need_kv) launch_dkdv<64, 64, 64>(dout, lse, q, d, Dfull, op);
            break;
        case 128:
            if (dq) launch_dq<128, 64, 64>(dq, dout, lse, q, d, Dfull, op);
            if (need_kv) launch_dkdv<128, 32, 64>(dout, lse, q, d, Dfull, op);
            break;
        case 256:
            if (dq) launch_dq<256, 32, 32>(dq, dout, lse, q, d, Dfull, op);
            if (need_kv) launch_dkdv<256, 32, 32>(dout, lse, q, d, Dfull, op);
            break;
        default: /* 512: tiles of 16 keep shared memory under 227 KiB */
            if (dq) launch_dq<512, 16, 16>(dq, dout, lse, q, d, Dfull, op);
            if (need_kv) launch_dkdv<512, 16, 16>(dout, lse, q, d, Dfull, op);
            break;
        }
    }
out:
    vc_cu_scratch_free(Dfull);
}

/* ---------------- attention sinks' gradient: one block per head, rows in a fixed order ---------------- */
__global__ void k_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                                int64_t T, int nh, int dv) {
    __shared__ float part[256 / 32];
    const int h = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float acc = 0;
    for (int64_t t = warp; t < T; t += blockDim.x / 32) {
        const float *a = dout + (t * nh + h) * dv, *b = o + (t * nh + h) * dv;
        float dot = 0;
        for (int c = lane; c < dv; c += 32) dot += a[c] * b[c];
        dot = vc_warp_sum(dot);
        acc += expf(sinks[h] - lse[t * nh + h]) * dot;
    }
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int w = 0; w < (int)(blockDim.x / 32); w++) s += part[w];
        dsink[h] -= s;
    }
}

void vc_cu_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                         int64_t T, int nh, int dv) {
    if (!vc_cu_begin("attention sinks backward") || T == 0) return;
    k_attn_sink_bwd<<<nh, 256, 0, vc_cu_stream()>>>(dsink, dout, o, lse, sinks, T, nh, dv);
    vc_cu_end("attention sinks backward");
}
