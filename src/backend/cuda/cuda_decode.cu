/* Paged-KV decode attention: one query per sequence, keys and values in fixed-size pages reached through
 * a page table. One block of DW warps per (sequence, head); warp w takes keys w, w + DW, ... with its
 * own online softmax (lanes split the head dimension), and the warps' partial results are merged in
 * warp order at the end, so the output does not depend on scheduling. */
#include "cuda_internal.h"

#define DW 4

__global__ void __launch_bounds__(DW * 32) k_decode(float *o, float *lse, const float *q, vc_paged_desc d) {
    __shared__ float qs[256];
    __shared__ float wm[DW], wl[DW], wacc[DW][256];
    const int s = blockIdx.x, h = blockIdx.y, kvh = h / (d.n_head / d.n_kv_head);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hd = d.head_dim, dv = d.v_head_dim;
    for (int c = threadIdx.x; c < hd; c += blockDim.x) qs[c] = q[((int64_t)s * d.n_head + h) * hd + c];
    __syncthreads();
    const int64_t len = d.seq_len[s], pos = len - 1;
    int64_t j0 = d.window > 0 && pos - d.window + 1 > 0 ? pos - d.window + 1 : 0;
    const int32_t *pt = d.page_table + (int64_t)s * d.max_pages;
    float m = -INFINITY, l = 0, acc[8];
    for (int c = 0; c < 8; c++) acc[c] = 0;
    for (int64_t j = j0 + warp; j < len; j += DW) {
        int64_t slot = (int64_t)pt[j / d.page_size] * d.page_size + j % d.page_size;
        const float *k = d.k_pages + (slot * d.n_kv_head + kvh) * hd;
        const float *v = d.v_pages + (slot * d.n_kv_head + kvh) * dv;
        float dot = 0;
        for (int c = lane; c < hd; c += 32) dot += qs[c] * k[c];
        dot = vc_warp_sum(dot);
        float x = d.scale * dot;
        if (d.softcap > 0) x = d.softcap * tanhf(x / d.softcap);
        float mn = fmaxf(m, x), corr = expf(m - mn), e = expf(x - mn);
        l = l * corr + e;
        for (int c = 0; c < 8; c++) {
            int col = lane + 32 * c;
            acc[c] = acc[c] * corr + (col < dv ? e * v[col] : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    for (int c = 0; c < 8; c++)
        if (lane + 32 * c < 256) wacc[warp][lane + 32 * c] = acc[c];
    __syncthreads();
    float M = -INFINITY, L = 0;
    for (int w = 0; w < DW; w++) M = fmaxf(M, wm[w]);
    float f[DW];
    for (int w = 0; w < DW; w++) {
        f[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M);
        L += wl[w] * f[w];
    }
    float inv = L > 0 ? 1.0f / L : 0.0f;
    for (int c = threadIdx.x; c < dv; c += blockDim.x) {
        float a = 0;
        for (int w = 0; w < DW; w++) a += wacc[w][c] * f[w];
        o[((int64_t)s * d.n_head + h) * dv + c] = a * inv;
    }
    if (lse && threadIdx.x == 0) lse[(int64_t)s * d.n_head + h] = L > 0 ? M + logf(L) : -INFINITY;
}

vc_status vc_cuda_attn_decode_paged(float *o, float *lse, const float *q, const vc_paged_desc *d) {
    const char *op = "paged decode attention";
    if (d->n_head <= 0 || d->n_kv_head <= 0 || d->n_head % d->n_kv_head || d->head_dim <= 0 || d->head_dim > 256 ||
        d->v_head_dim <= 0 || d->v_head_dim > 256 || d->page_size <= 0 || d->max_pages <= 0)
        return vc_fail(VC_ERR_UNSUPPORTED, "cuda: %s: heads %d/%d, dims %d/%d, page size %d, %d pages per sequence", op,
                       d->n_head, d->n_kv_head, d->head_dim, d->v_head_dim, d->page_size, d->max_pages);
    if (!vc_cu_begin(op)) return vc_cuda_error();
    if (d->n_seq <= 0) return VC_OK;
    k_decode<<<dim3((unsigned)d->n_seq, (unsigned)d->n_head), DW * 32, 0, vc_cu_stream()>>>(o, lse, q, *d);
    return vc_cu_end(op) ? VC_OK : vc_cuda_error();
}
