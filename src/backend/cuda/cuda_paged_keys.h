/* Paged attention with the lanes over keys (included by cuda_paged.cu; the default, VERLC_CUDA_PAGED=dims: the other): one block of PW
 * warps per (query row, group of GC query heads sharing a key/value head), as k_attn_paged, but a warp takes a tile
 * of 32 keys at once, lane l the key j0 + 32 t + l: the lane forms the GC dot products over the whole head from its
 * own key row (no shuffles per key), the warp's online softmax moves once per tile (a max across the lanes), and the
 * tile's value rows are then added in key order, each lane holding NCV of the value columns. The per-lane sums of
 * the weights are added across the warp at the end, the warps' partials merged in warp order: a fixed order, and a
 * row's output still depends only on that row. Heads up to 256 wide (values up to 32 NCV). */

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
    float m[GC], l[GC], acc[GC][NCV];
    for (int g = 0; g < GC; g++) {
        m[g] = -INFINITY;
        l[g] = 0;
        for (int c = 0; c < NCV; c++) acc[g][c] = 0;
    }
    for (int64_t t0 = j0 + 32 * warp; t0 < j1; t0 += 32 * PW) {
        const int64_t j = t0 + lane;
        const bool vis = j < j1 && vc_attn_selected(p, row, j);
        float s[GC];
        for (int g = 0; g < GC; g++) s[g] = 0;
        int64_t voff = -1;
        if (vis) {
            const int64_t pg = sq.pg + j / p.P, slot = j % p.P;
            const KV *k = (const KV *)p.kbase + p.kp[pg] + slot * p.kstride + (int64_t)kvh * p.hd;
            voff = p.vp[pg] + slot * p.vstride + (int64_t)kvh * p.dv;
#pragma unroll 8
            for (int d = 0; d < p.hd; d++) {
                const float kd = kv_load(k, d);
                for (int g = 0; g < GC; g++) s[g] += qs[g][d] * kd;
            }
        }
        vo[warp][lane] = voff;
        for (int g = 0; g < GC; g++) {
            const float x = vis ? vc_attn_score(p, s[g], slope[g], pos, j) : -INFINITY;
            const float mn = fmaxf(m[g], vc_warp_max(x));
            const float corr = m[g] == -INFINITY ? 0.0f : expf(m[g] - mn), e = x == -INFINITY ? 0.0f : expf(x - mn);
            l[g] = l[g] * corr + e;
            for (int c = 0; c < NCV; c++) acc[g][c] *= corr;
            ps[warp][g][lane] = e;
            m[g] = mn;
        }
        __syncwarp();
        const int nk = j1 - t0 < 32 ? (int)(j1 - t0) : 32;
        for (int kk = 0; kk < nk; kk++) {
            const int64_t vf = vo[warp][kk];
            if (vf < 0) continue; /* a key the indexer left out (DeepSeek Sparse Attention) */
            const KV *v = (const KV *)p.vbase + vf;
            float vv[NCV];
            for (int c = 0; c < NCV; c++) vv[c] = lane + 32 * c < p.dv ? kv_load(v, lane + 32 * c) : 0.0f;
            for (int g = 0; g < GC; g++) {
                const float e = ps[warp][g][kk];
                for (int c = 0; c < NCV; c++) acc[g][c] += e * vv[c];
            }
        }
        __syncwarp();
    }
    for (int g = 0; g < GC; g++) l[g] = vc_warp_sum(l[g]);
    paged_merge<GC, NCV>(p, b, wm, wl, wacc, m, l, acc, o, lse);
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
