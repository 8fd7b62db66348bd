/* Paged attention with the lanes over keys (included by cuda_paged.cu; the default, VERLC_CUDA_PAGED=dims: the other): one block of PW
 * warps per (query row, group of GC query heads sharing a key/value head), as k_attn_paged, but a warp takes a tile
 * of 32 keys at once, lane l the key j0 + 32 t + l: the lane forms the GC dot products over the whole head from its
 * own key row (16-byte loads, the terms in dimension order, no shuffles per key) and the warp's online softmax moves
 * once per tile (a max across the lanes). The tile's value rows are then shared out: lk lanes (8 value columns each,
 * one 16-byte load of bf16) per key and 32 / lk keys at once, lane group kq adding keys kq, kq + 32 / lk, ... in key
 * order; the groups' sums are added by a butterfly at the end, and so are the per-lane sums of the weights; the warps'
 * partials are merged in warp order: a fixed order, and a row's output still depends only on that row. Heads up to
 * 256 wide (values up to 32 NCV). */

/* x[0..8) = p[0..n) as floats (the rest 0): one 16-byte load (bf16) or two (float) when 8 are wanted and aligned */
__device__ __forceinline__ void kv_load8(const __nv_bfloat16 *p, float (&x)[8], int n) {
    if (n >= 8 && ((uintptr_t)p & 15) == 0) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const unsigned w[4] = { u.x, u.y, u.z, u.w };
        for (int i = 0; i < 4; i++) {
            x[2 * i] = __uint_as_float(w[i] << 16);
            x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
        return;
    }
    for (int i = 0; i < 8; i++) x[i] = i < n ? __bfloat162float(p[i]) : 0.0f;
}
__device__ __forceinline__ void kv_load8(const float *p, float (&x)[8], int n) {
    if (n >= 8 && ((uintptr_t)p & 15) == 0) {
        const float4 a = reinterpret_cast<const float4 *>(p)[0], c = reinterpret_cast<const float4 *>(p)[1];
        x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = c.x, x[5] = c.y, x[6] = c.z, x[7] = c.w;
        return;
    }
    for (int i = 0; i < 8; i++) x[i] = i < n ? p[i] : 0.0f;
}

template <int GC, typename KV, int NCV>
__global__ void __launch_bounds__(PW * 32) k_attn_paged_keys(float *o, float *lse, const float *q, paged_params p) {
    __shared__ float qs[GC][256];
    __shared__ float ps[PW][GC][32];
    __shared__ int64_t vo[PW][32];
    __shared__ float wm[PW][GC], wl[PW][GC], wacc[PW][32 * NCV];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float slope[GC];
    const paged_blk b = paged_setup<GC>(p, q, &qs[0][0], 256, slope);
    const int64_t row = b.row, pos = b.pos, j0 = b.j0, j1 = b.j1;
    const int kvh = b.kvh;
    const pseq sq = b.sq;
    /* the value phase's split: lk lanes a key (a power of two covering dv / 8), kn = 32 / lk keys at once */
    int lk = 1;
    while (lk < 32 && 8 * lk < p.dv) lk *= 2;
    const int kn = 32 / lk, kq = lane / lk, c0 = 8 * (lane % lk), nc = p.dv - c0 < 8 ? p.dv - c0 : 8;
    float m[GC], l[GC], acc[GC][8];
    for (int g = 0; g < GC; g++) {
        m[g] = -INFINITY;
        l[g] = 0;
        for (int c = 0; c < 8; c++) acc[g][c] = 0;
    }
    for (int64_t t0 = j0 + 32 * warp; t0 < j1; t0 += 32 * PW) {
        const int64_t j = t0 + lane;
        const bool vis = j < j1 && vc_attn_selected(p, row, j);
        float s[GC];
        for (int g = 0; g < GC; g++) s[g] = 0;
        int64_t voff = -1;
        if (vis) {
            const int64_t pj = page_of(p, j), pg = sq.pg + pj, slot = j - pj * p.P;
            const KV *k = (const KV *)p.kbase + p.kp[pg] + slot * p.kstride + (int64_t)kvh * p.hd;
            voff = p.vp[pg] + slot * p.vstride + (int64_t)kvh * p.dv;
#pragma unroll 2
            for (int d = 0; d < p.hd; d += 8) {
                float kd[8];
                const int n = p.hd - d < 8 ? p.hd - d : 8;
                kv_load8(k + d, kd, n);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    if (i < n)
                        for (int g = 0; g < GC; g++) s[g] += qs[g][d + i] * kd[i];
            }
        }
        vo[warp][lane] = voff;
        for (int g = 0; g < GC; g++) {
            const float x = vis ? vc_attn_score(p, s[g], slope[g], pos, j) : -INFINITY;
            const float mn = fmaxf(m[g], vc_warp_max(x));
            const float corr = m[g] == -INFINITY ? 0.0f : expf(m[g] - mn), e = x == -INFINITY ? 0.0f : expf(x - mn);
            l[g] = l[g] * corr + e;
            for (int c = 0; c < 8; c++) acc[g][c] *= corr;
            ps[warp][g][lane] = e;
            m[g] = mn;
        }
        __syncwarp();
        const int nk = j1 - t0 < 32 ? (int)(j1 - t0) : 32;
        if (nc > 0)
#pragma unroll 4
            for (int kk = kq; kk < nk; kk += kn) {
                const int64_t vf = vo[warp][kk];
                if (vf < 0) continue; /* a key the indexer left out (DeepSeek Sparse Attention) */
                float vv[8];
                kv_load8((const KV *)p.vbase + vf + c0, vv, nc);
                for (int g = 0; g < GC; g++) {
                    const float e = ps[warp][g][kk];
                    for (int c = 0; c < 8; c++) acc[g][c] += e * vv[c];
                }
            }
        __syncwarp();
    }
    for (int g = 0; g < GC; g++) {
        l[g] = vc_warp_sum(l[g]);
        for (int o2 = lk; o2 < 32; o2 *= 2)
            for (int c = 0; c < 8; c++) acc[g][c] += __shfl_xor_sync(0xffffffffu, acc[g][c], o2);
    }
    paged_merge<GC, NCV>(p, b, wm, wl, wacc, m, l, [&](int g, float *w) {
        if (lane < lk)
#pragma unroll
            for (int c = 0; c < 8; c++)
                if (c < nc) w[c0 + c] = acc[g][c];
    }, o, lse);
}

template <typename KV, int NCV>
static void launch_paged_keys(int gc, dim3 grid, float *o, float *lse, const float *q, const paged_params &p) {
    switch (gc) {
    case 8: k_attn_paged_keys<8, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 7: k_attn_paged_keys<7, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 6: k_attn_paged_keys<6, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 5: k_attn_paged_keys<5, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 4: k_attn_paged_keys<4, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 3: k_attn_paged_keys<3, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 2: k_attn_paged_keys<2, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    default: k_attn_paged_keys<1, KV, NCV><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    }
}
