/* Paged attention on tensor cores (included by cuda_paged.cu; with bf16 matmuls and bf16 pages, heads of 64, 80, 96,
 * 128 or 256, or MLA's 192 / 128, up to 16 query heads a key/value head; VERLC_CUDA_PAGED_MMA=0: the kernels above).
 * One block of 4 warps per (query row, key/value head): the group's query heads are the 16 rows of mma.sync's A
 * operand (q rounded to bf16, rows past the group zero), so a key tile is read once for the whole group and
 * multiplied, not walked lane by lane.
 * The visible keys go in tiles of 64, copied out of their pages by cp.async into two buffers (the next tile's copy in
 * flight while the current one is multiplied); warp w takes keys 16w .. 16w + 15 of each tile: S = Q K^T in
 * registers, its online softmax (f32), P rounded to bf16 and O += P V with V's fragments by ldmatrix.trans. The warps'
 * partials are merged in warp order. A row's output depends only on its sequence's keys: batch-invariant as the
 * kernels above, the numerics of the flash kernels (q and P in bf16, f32 sums) rather than theirs. */
#include "cuda_mma.h"

typedef __nv_bfloat16 pbf16;
static constexpr int PMT = 64; /* keys a tile */

template <int DK, int DV>
struct paged_mma_smem {
    /* bf16 pitches of Q and K rows, and of V rows: 16-byte rows, 32-bit fragment loads across the banks */
    static constexpr int LDK = DK + 8, LDV = DV + 8;
    /* Q's A fragments kept in registers up to keys of 128 (QN of them); wider ones read them from Qs at each use
     * (the same values: registers for the 4 x 16 x DV sums instead) */
    static constexpr int QN = DK <= 128 ? DK / 16 : 1;
    static constexpr size_t bytes = (size_t)(16 + 2 * PMT) * LDK * 2 + (size_t)2 * PMT * LDV * 2; /* Q, 2 K, 2 V tiles */
    static_assert((size_t)4 * 16 * DV * 4 + 4 * 16 * 2 * 4 <= (size_t)2 * PMT * (LDK + LDV) * 2, "merge area");
};

/* rows t0 .. t0 + PMT - 1 of one side (keys or values: W wide, LDW the pitch) into B (rows past j1 zero) */
template <int W, int LDW>
__device__ __forceinline__ void paged_mma_copy_side(pbf16 *B, const pbf16 *base, const int64_t *off, int64_t stride,
                                                    const paged_params &p, const pseq &sq, int kvh, int64_t t0,
                                                    int64_t j1) {
    constexpr int C = W / 8, N = PMT * C / 128; /* a thread's chunks (two at a time: registers for 3 blocks an SM) */
    static_assert(N * 128 == PMT * C, "tile chunks");
#pragma unroll 2
    for (int i = 0; i < N; i++) {
        const int idx = threadIdx.x + i * 128, r = idx / C, c = (idx % C) * 8;
        const int64_t j = t0 + r;
        if (j < j1) {
            const int64_t pj = page_of(p, j), slot = j - pj * p.P;
            vc_cp16(B + r * LDW + c, base + off[sq.pg + pj] + slot * stride + (int64_t)kvh * W + c);
        } else
            *reinterpret_cast<uint4 *>(B + r * LDW + c) = uint4{ 0, 0, 0, 0 };
    }
}

/* the key tile at t0 (rows below j1) into the buffers Kb / Vb by cp.async (one group); rows past j1 zero */
template <int DK, int DV>
__device__ __forceinline__ void paged_mma_copy(pbf16 *Kb, pbf16 *Vb, const paged_params &p, const pseq &sq, int kvh,
                                               int64_t t0, int64_t j1) {
    typedef paged_mma_smem<DK, DV> L;
    paged_mma_copy_side<DK, L::LDK>(Kb, (const pbf16 *)p.kbase, p.kp, p.kstride, p, sq, kvh, t0, j1);
    paged_mma_copy_side<DV, L::LDV>(Vb, (const pbf16 *)p.vbase, p.vp, p.vstride, p, sq, kvh, t0, j1);
    vc_cp_commit();
}

/* Q's A fragment for columns 16 kc .. 16 kc + 15 (rows g and g + 8: heads h0 + g, h0 + g + 8) out of Qs */
template <int LDK>
__device__ __forceinline__ void paged_mma_qfrag(uint32_t (&a)[4], const pbf16 *Qs, int kc, int g, int t) {
    const pbf16 *a0 = Qs + g * LDK + kc * 16 + 2 * t, *a1 = a0 + 8 * LDK;
    a[0] = vc_ld32(a0), a[1] = vc_ld32(a1), a[2] = vc_ld32(a0 + 8), a[3] = vc_ld32(a1 + 8);
}

/* the keys [j0, j1) of one (query row, key/value head) (tile j0 already in flight into buffer 0): each warp's online
 * softmax over its 16 keys of every tile, then the warps' partials (m, l and the unnormalised sums of each head) into the
 * tiles' area, Am / Mm / Lm, seen by the whole block on return */
template <int DK, int DV>
__device__ __forceinline__ void paged_mma_keys(pbf16 *Ks, pbf16 *Vs, const paged_params &p, const pseq &sq, int kvh,
                                               int64_t row, int64_t pos, int64_t j0, int64_t j1, int G,
                                               const pbf16 *Qs, const uint32_t (&qa)[paged_mma_smem<DK, DV>::QN][4],
                                               const float (&slope)[2]) {
    typedef paged_mma_smem<DK, DV> L;
    constexpr int LDK = L::LDK, LDV = L::LDV;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    float m[2] = { -INFINITY, -INFINITY }, ml[2] = { 0.0f, 0.0f }, l[2] = { 0.0f, 0.0f }, acc[DV / 8][4];
#pragma unroll
    for (int n = 0; n < DV / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    int buf = 0;
    for (int64_t t0 = j0; t0 < j1; t0 += PMT) {
        if (t0 + PMT < j1) { /* the next tile into the other buffers (last read before the previous barrier) */
            paged_mma_copy<DK, DV>(Ks + (buf ^ 1) * PMT * LDK, Vs + (buf ^ 1) * PMT * LDV, p, sq, kvh, t0 + PMT, j1);
            vc_cp_wait<1>();
        } else
            vc_cp_wait<0>();
        __syncthreads(); /* tile t0 seen by every warp */
        const pbf16 *Kc = Ks + buf * PMT * LDK + warp * 16 * LDK, *Vc = Vs + buf * PMT * LDV + warp * 16 * LDV;
        float s[2][4] = { { 0, 0, 0, 0 }, { 0, 0, 0, 0 } };
        const int j = lane / 8, rr = lane % 8;
#pragma unroll
        for (int kc = 0; kc < DK / 16; kc++) { /* the warp's two key n-tiles' B fragments by one ldmatrix */
            uint32_t b[4];
            vc_ldsm_x4(b, Kc + ((j >> 1) * 8 + rr) * LDK + kc * 16 + (j & 1) * 8);
            const uint32_t b0[2] = { b[0], b[1] }, b1[2] = { b[2], b[3] };
            uint32_t a[4];
            if (L::QN == DK / 16) {
#pragma unroll
                for (int x = 0; x < 4; x++) a[x] = qa[L::QN == DK / 16 ? kc : 0][x];
            } else
                paged_mma_qfrag<LDK>(a, Qs, kc, g, t);
            vc_mma_16816(s[0], a, b0);
            vc_mma_16816(s[1], a, b1);
        }
        float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                const int64_t key = t0 + warp * 16 + n * 8 + 2 * t + (e & 1);
                const bool vis = g + 8 * r < G && key < j1 && vc_attn_selected(p, row, key);
                s[n][e] = vis ? vc_attn_score(p, s[n][e], slope[r], pos, key) : -INFINITY;
                mx[r] = fmaxf(mx[r], s[n][e]);
            }
        /* exponentials as the flash forward takes them: 2^(x log2 e - max log2 e), 0 while a head sees nothing */
        float corr[2], ev[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            corr[r] = vc_softmax_step(mx[r], &m[r], &ml[r]);
            l[r] *= corr[r];
        }
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                ev[n][e] = vc_ex2(fmaf(s[n][e], VC_LOG2E, -ml[r]));
                l[r] += ev[n][e];
            }
        const uint32_t pa[4] = { vc_pack_bf16x2(ev[0][0], ev[0][1]), vc_pack_bf16x2(ev[0][2], ev[0][3]),
                                 vc_pack_bf16x2(ev[1][0], ev[1][1]), vc_pack_bf16x2(ev[1][2], ev[1][3]) };
#pragma unroll
        for (int n = 0; n < DV / 8; n += 2) {
#pragma unroll
            for (int x = 0; x < 4; x++) {
                acc[n][x] *= corr[x >> 1];
                acc[n + 1][x] *= corr[x >> 1];
            }
            uint32_t b[4];
            vc_ldsm_x4_t(b, Vc + ((j & 1) * 8 + rr) * LDV + (n + (j >> 1)) * 8);
            const uint32_t b0[2] = { b[0], b[1] }, b1[2] = { b[2], b[3] };
            vc_mma_16816(acc[n], pa, b0);
            vc_mma_16816(acc[n + 1], pa, b1);
        }
        __syncthreads(); /* the tile is no longer read: the next iteration's copy may overwrite it */
        buf ^= 1;
    }
    /* the warps' partials, merged head by head in warp order (the tiles' area reused) */
    float *Am = reinterpret_cast<float *>(Ks), *Mm = Am + 4 * 16 * DV, *Lm = Mm + 4 * 16;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        if (t == 0) {
            Mm[warp * 16 + g + 8 * r] = m[r];
            Lm[warp * 16 + g + 8 * r] = l[r];
        }
#pragma unroll
        for (int n = 0; n < DV / 8; n++) {
            float *a = Am + (warp * 16 + g + 8 * r) * DV + n * 8 + 2 * t;
            a[0] = acc[n][2 * r];
            a[1] = acc[n][2 * r + 1];
        }
    }
    __syncthreads();
}

/* A row whose keys span over p.split keys takes them in chunks of p.split (from its first visible key) when p.part is
 * set: block z takes chunks z, z + gridDim.z, ..., each stored unnormalised with its m and l in p.part, and
 * k_paged_mma_merge adds them in chunk order. A row's bits depend on its keys and p.split alone, never on the batch or
 * the grid; a row within one chunk is written here as without chunks. */
template <int DK, int DV, bool SPLIT>
__global__ void __launch_bounds__(128) k_attn_paged_mma(float *o, float *lse, const float *q, paged_params p) {
    typedef paged_mma_smem<DK, DV> L;
    constexpr int LDK = L::LDK;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    pbf16 *Qs = reinterpret_cast<pbf16 *>(smem_raw), *Ks = Qs + 16 * LDK, *Vs = Ks + 2 * PMT * LDK;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t i = p.rows ? p.rows[blockIdx.x] : blockIdx.x, row = p.row0 + i;
    const pseq sq = p.seq[p.row_seq[i]];
    const int kvh = blockIdx.y, G = p.nh / p.nkv, h0 = kvh * G;
    const int64_t pos = sq.kvlen - sq.qlen + (row - sq.q0);
    int64_t j0, j1;
    paged_range(p, sq, pos, &j0, &j1);
    const int nch = SPLIT ? paged_chunks(p, j0, j1) : 1; /* without: the loop below runs once (registers as before) */
    int ch = (int)blockIdx.z;
    if (ch >= nch) return; /* the whole block: no barrier skipped */
    int64_t ja = j0 + (int64_t)ch * p.split, jb = nch > 1 && ja + p.split < j1 ? ja + p.split : j1;
    for (int idx = threadIdx.x; idx < 16 * DK; idx += 128) {
        const int r = idx / DK, c = idx % DK;
        Qs[r * LDK + c] = __float2bfloat16_rn(r < G ? q[(row * p.nh + h0 + r) * DK + c] : 0.0f);
    }
    if (ja < jb) paged_mma_copy<DK, DV>(Ks, Vs, p, sq, kvh, ja, jb);
    __syncthreads(); /* Q */
    uint32_t qa[L::QN][4]; /* Q's A fragments, rows g and g + 8: heads h0 + g, h0 + g + 8 (up to heads of 128) */
#pragma unroll
    for (int kc = 0; kc < L::QN; kc++) paged_mma_qfrag<LDK>(qa[kc], Qs, kc, g, t);
    float slope[2];
    for (int r = 0; r < 2; r++) slope[r] = g + 8 * r < G ? vc_attn_slope(p, h0 + g + 8 * r) : 0.0f;
    const float *Am = reinterpret_cast<const float *>(Ks), *Mm = Am + 4 * 16 * DV, *Lm = Mm + 4 * 16;
    for (;;) {
        paged_mma_keys<DK, DV>(Ks, Vs, p, sq, kvh, row, pos, ja, jb, G, Qs, qa, slope);
        for (int idx = threadIdx.x; idx < G * DV; idx += 128) {
            const int r = idx / DV, c = idx % DV;
            float M = -INFINITY, Lsum = 0.0f, f[4];
            for (int w = 0; w < 4; w++) M = fmaxf(M, Mm[w * 16 + r]);
            for (int w = 0; w < 4; w++) {
                f[w] = Mm[w * 16 + r] == -INFINITY ? 0.0f : expf(Mm[w * 16 + r] - M);
                Lsum += Lm[w * 16 + r] * f[w];
            }
            float a = 0.0f;
            for (int w = 0; w < 4; w++) a += Am[(w * 16 + r) * DV + c] * f[w];
            if (SPLIT && nch > 1) { /* the chunk's partial: merged by k_paged_mma_merge */
                const int64_t slot = paged_slot(p, sq, row - sq.q0, ch) * p.nh + h0 + r;
                p.part[slot * DV + c] = a;
                if (c == 0) p.part_ml[2 * slot] = M, p.part_ml[2 * slot + 1] = Lsum;
            } else
                paged_store(p, o, lse, row, h0 + r, c, DV, a, M, Lsum);
        }
        if (!SPLIT) return;
        ch += (int)gridDim.z;
        if (ch >= nch) return;
        ja = j0 + (int64_t)ch * p.split;
        jb = ja + p.split < j1 ? ja + p.split : j1;
        __syncthreads(); /* the partials are read: the next chunk's first tile may overwrite them */
        paged_mma_copy<DK, DV>(Ks, Vs, p, sq, kvh, ja, jb);
    }
}

/* the chunks of the rows k_attn_paged_mma split (one block a row and query head), added in chunk order as a chunk's
 * warps are; rows within one chunk were written there */
__global__ void k_paged_mma_merge(float *o, float *lse, paged_params p, int D) {
    const int64_t i = p.rows ? p.rows[blockIdx.x] : blockIdx.x, row = p.row0 + i;
    const pseq sq = p.seq[p.row_seq[i]];
    const int64_t pos = sq.kvlen - sq.qlen + (row - sq.q0);
    int64_t j0, j1;
    paged_range(p, sq, pos, &j0, &j1);
    const int nch = paged_chunks(p, j0, j1), h = blockIdx.y;
    if (nch < 2) return;
    const int64_t s0 = paged_slot(p, sq, row - sq.q0, 0) * p.nh + h; /* chunk k: s0 + k nh */
    const float *ml = p.part_ml + 2 * s0;
    const int64_t st = 2 * (int64_t)p.nh;
    float M = -INFINITY, L = 0.0f;
    for (int c = 0; c < nch; c++) M = fmaxf(M, ml[c * st]);
    for (int c = 0; c < nch; c++) L += ml[c * st] == -INFINITY ? 0.0f : ml[c * st + 1] * expf(ml[c * st] - M);
    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float a = 0.0f;
        for (int k = 0; k < nch; k++)
            if (ml[k * st] != -INFINITY) a += p.part[(s0 + k * p.nh) * D + c] * expf(ml[k * st] - M);
        paged_store(p, o, lse, row, h, c, D, a, M, L);
    }
}

/* the head sizes (keys, values) the tensor-core kernel is built for: equal 64 / 80 / 96 / 128 / 256, and multi-head
 * latent attention's 192 / 128 (DeepSeek-V2 / V3, Kimi K2, Mistral 4); an index, -1 for none */
static const int PAGED_MMA_DIMS[][2] = { { 64, 64 }, { 80, 80 }, { 96, 96 }, { 128, 128 }, { 256, 256 }, { 192, 128 } };
static int paged_mma_dims(int dk, int dv) {
    for (int i = 0; i < (int)(sizeof PAGED_MMA_DIMS / sizeof PAGED_MMA_DIMS[0]); i++)
        if (PAGED_MMA_DIMS[i][0] == dk && PAGED_MMA_DIMS[i][1] == dv) return i;
    return -1;
}

/* the tensor-core kernel applies to d (bf16 matmuls and pages, head sizes of PAGED_MMA_DIMS, at most 16 query heads a
 * key/value head, rows and pages on 16-byte boundaries: `aligned`; keys of 256: 144 KiB of shared memory, a block a
 * multiprocessor) */
static int paged_mma_ok(const vc_attn_desc *d, int aligned) {
    const char *e = getenv("VERLC_CUDA_PAGED_MMA"); /* read per call: a test switches it */
    return !(e && *e == '0') && vc_matmul_precision() == VC_PREC_BF16 && d->kv_bf16 && aligned &&
           d->n_head / d->n_kv_head <= 16 && paged_mma_dims(d->head_dim, d->v_head_dim) >= 0 && d->n_kv_head <= 65535;
}

template <int DK, int DV, bool SPLIT>
static void launch_paged_mma_k(dim3 grid, float *o, float *lse, const float *q, const paged_params &p, const char *op) {
    typedef paged_mma_smem<DK, DV> L;
    if (vc_cu_ok(cudaFuncSetAttribute(k_attn_paged_mma<DK, DV, SPLIT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)L::bytes), op))
        k_attn_paged_mma<DK, DV, SPLIT><<<grid, 128, L::bytes, vc_cu_stream()>>>(o, lse, q, p);
}
template <int DK, int DV>
static void launch_paged_mma_dims(dim3 grid, float *o, float *lse, const float *q, const paged_params &p, const char *op) {
    if (p.part) launch_paged_mma_k<DK, DV, true>(grid, o, lse, q, p, op);
    else launch_paged_mma_k<DK, DV, false>(grid, o, lse, q, p, op);
}

/* the tensor-core kernel for d where it applies (paged_mma_ok), its split rows' chunks merged after it (p.part set by
 * split_setup); 0: not launched */
static int launch_paged_mma(const vc_attn_desc *d, const paged_params &p, int aligned, int64_t rows, float *o,
                            float *lse, const float *q, const char *op) {
    if (!paged_mma_ok(d, aligned)) return 0;
    dim3 grid((unsigned)rows, (unsigned)d->n_kv_head, (unsigned)(p.part ? p.slots : 1));
    switch (paged_mma_dims(d->head_dim, d->v_head_dim)) {
    case 0: launch_paged_mma_dims<64, 64>(grid, o, lse, q, p, op); break;
    case 1: launch_paged_mma_dims<80, 80>(grid, o, lse, q, p, op); break;
    case 2: launch_paged_mma_dims<96, 96>(grid, o, lse, q, p, op); break;
    case 3: launch_paged_mma_dims<128, 128>(grid, o, lse, q, p, op); break;
    case 4: launch_paged_mma_dims<256, 256>(grid, o, lse, q, p, op); break;
    default: launch_paged_mma_dims<192, 128>(grid, o, lse, q, p, op); break;
    }
    if (p.part)
        k_paged_mma_merge<<<dim3((unsigned)rows, (unsigned)d->n_head), 64, 0, vc_cu_stream()>>>(o, lse, p, d->v_head_dim);
    return 1;
}
