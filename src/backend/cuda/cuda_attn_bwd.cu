/* The f32 (SIMT) flash-attention backward (see cuda_attention.cu): D = rowsum(dO * O) and a dK/dV kernel per
 * (sequence, kv head, key block), each output summed by one thread in a fixed order (the dQ kernel, per (sequence,
 * head, query block), is cuda_attn_bwd_dq.cu: the three files compile side by side); the attention sinks' gradient. */
#include "cuda_attn_common.h"

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
        const int h = kvh * grp + g;
        const float slope = vc_attn_slope(p, h);
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
                        float sc = vc_attn_score(p, st[i][j], slope, off + qb + qr, key);
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

template <int D, int BQ, int BK>
static void launch_dkdv(const float *dout, const float *lse, const float *q, const vc_attn_desc *d, float *Dd,
                        const char *op) {
    size_t sh = (size_t)(2 * BK * (D + 1) + 2 * BQ * (D + 1) + 2 * BK * (BQ + 1) + 2 * BQ) * sizeof(float);
    vc_cu_attn_launch(k_attn_bwd_dkdv<D, BQ, BK>, d, BK, 1, d->n_kv_head, NT, sh, Dd, op, dout, lse, q);
}

void vc_cu_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                    const vc_attn_desc *d) {
    const char *op = "attention backward";
    if (!vc_cu_begin(op) || !vc_cu_attn_check(d, op) || d->n_seq <= 0) return;
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
        if (dq) vc_cu_attn_bwd_dq(dq, dout, lse, q, d, Dfull, op); /* cuda_attn_bwd_dq.cu */
        if (need_kv) switch (vc_cu_attn_bucket(d)) {
            case 64: launch_dkdv<64, 64, 64>(dout, lse, q, d, Dfull, op); break;
            case 128: launch_dkdv<128, 32, 64>(dout, lse, q, d, Dfull, op); break;
            case 256: launch_dkdv<256, 32, 32>(dout, lse, q, d, Dfull, op); break;
            default: launch_dkdv<512, 16, 16>(dout, lse, q, d, Dfull, op); break; /* tiles of 16: under 227 KiB */
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
