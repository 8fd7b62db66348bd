/* The f32 (SIMT) flash-attention backward's dQ kernel (see cuda_attn_bwd.cu): one block per (sequence, head, query
 * block) loops over the visible key blocks; each dQ element is summed by one thread in a fixed order. */
#include "cuda_attn_common.h"

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
    const float slope = vc_attn_slope(p, h);
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
                    float sc = vc_attn_score(p, s[i][j], slope, pos0 + r, key), P = expf(sc - Ls[r]);
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

template <int D, int BQ, int BK>
static void launch_dq(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                      float *Dd, const char *op) {
    size_t sh = (size_t)(2 * BQ * (D + 1) + 2 * BK * (D + 1) + BQ * (BK + 1) + 2 * BQ) * sizeof(float);
    vc_cu_attn_launch(k_attn_bwd_dq<D, BQ, BK>, d, BQ, 0, d->n_head, NT, sh, Dd, op, dq, dout, lse, q);
}

void vc_cu_attn_bwd_dq(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                       float *Dd, const char *op) {
    switch (vc_cu_attn_bucket(d)) {
    case 64: launch_dq<64, 64, 64>(dq, dout, lse, q, d, Dd, op); break;
    case 128: launch_dq<128, 64, 64>(dq, dout, lse, q, d, Dd, op); break;
    case 256: launch_dq<256, 32, 32>(dq, dout, lse, q, d, Dd, op); break;
    default: launch_dq<512, 16, 16>(dq, dout, lse, q, d, Dd, op); break; /* tiles of 16: under 227 KiB */
    }
}
