/* Shared by the flash-attention kernels' files, f32 (SIMT: cuda_attention.cu: forward; cuda_attn_bwd.cu: D and
 * dK/dV; cuda_attn_bwd_dq.cu: dQ; split so they compile side by side) and bf16 tensor cores (cuda_attn_tc.cu): the
 * launch parameters and the one launcher, the SIMT tile loaders and products, and the host helpers that check a
 * descriptor and upload its block table. */
#ifndef VC_CUDA_ATTN_COMMON_H
#define VC_CUDA_ATTN_COMMON_H
#include "cuda_internal.h"
#include <stdio.h>
#include <stdlib.h>

typedef vc_cu_attn_seq seq_meta;

struct attn_params {
    const seq_meta *seq;
    const int2 *blk; /* per thread block: sequence, first row (query or key) */
    const float *D;  /* backward: rowsum(dO * O) [Tq, nh] */
    int nh, nkv, hd, dv;
    int64_t kstride, vstride;
    float scale, cap;
    int window, causal, alibi, chunk;
    const float *sinks; /* [nh] or NULL */
    float alibi_scale; /* the slopes' factor (vc_attn_desc.alibi_scale, 1 for 0) */
    const uint32_t *sel; /* DeepSeek Sparse Attention's selection (vc_attn_desc.sel) or NULL */
    int64_t sel_words;
    /* the pipelined mma forward: bf16 mirrors of the keys' and values' f32 ranges from kbase / vbase (element e of
     * kmir is kbase[e] rounded to bf16), or NULL */
    const void *kmir, *vmir;
    const float *kbase, *vbase;
    const void *qmir, *omir; /* the pipelined dK/dV: q and dO rounded to bf16, in their layout (or NULL) */
    /* the mma kernels: scores without soft-cap, ALiBi or selection take no masks on a tile that a warp sees whole
     * (the same bits; 0 when VERLC_CUDA_ATTN_WHOLE=0, read per call: the A/B and the tests' same-bits check) */
    int plain;
    /* the mma dK/dV over a GQA group split across `split` blocks (each its share of the group's heads), each block's
     * unscaled sums stored in dkp / dvp ([block][kv head][split][TQ][head dim]) for a second kernel to add in order;
     * split 1: each block adds its own (dkp, dvp NULL) */
    int split;
    float *dkp, *dvp;
};

constexpr int NT = 256; /* threads of a SIMT block */

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

/* cuda_attention.cu: a descriptor the kernels take (1; else the sticky error is set), the launch metadata and the
 * scalar parameters (free the returned block with vc_cu_scratch_free after the launches), the head-dim bucket */
int vc_cu_attn_check(const vc_attn_desc *d, const char *op);
void *vc_cu_attn_upload_meta(const vc_attn_desc *d, int rows, int by_keys, attn_params *p, int64_t *nblk, const char *op);
int vc_cu_attn_bucket(const vc_attn_desc *d);

/* One launch of the attention kernel kern(args..., p): thread blocks of `rows` queries (keys when by_keys) times
 * `heads`, nthr threads and sh bytes of dynamic shared memory each. Uploads the metadata, fills p (p.D = Dd), then
 * prep(&p, &own) readies what else the kernel reads (a block to free after the launch in *own) and says whether to
 * launch (0: nothing launched, the caller runs another kernel); raises the kernel's shared-memory limit, launches,
 * frees the metadata and *own. 1 when launched (or there is nothing to launch), 0 when prep declined, -1 on an error
 * (sticky). */
template <class K, class Prep, class... A>
int vc_cu_attn_launch_prep(K kern, const vc_attn_desc *d, int rows, int by_keys, int heads, int nthr, size_t sh,
                           const float *Dd, const char *op, Prep prep, A... args) {
    attn_params p;
    int64_t nb;
    void *meta = vc_cu_attn_upload_meta(d, rows, by_keys, &p, &nb, op);
    if (!meta) return -1;
    p.D = Dd;
    void *own = NULL;
    const int go = nb == 0 || prep(&p, &own);
    int ok = 1;
    if (go && nb > 0 && (ok = vc_cu_ok(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh), op))) {
        kern<<<dim3((unsigned)nb, heads), nthr, sh, vc_cu_stream()>>>(args..., p);
        ok = vc_cu_end(op);
    }
    vc_cu_scratch_free(own);
    vc_cu_scratch_free(meta);
    return !ok ? -1 : go;
}

/* vc_cu_attn_launch_prep with nothing else to ready */
template <class K, class... A>
void vc_cu_attn_launch(K kern, const vc_attn_desc *d, int rows, int by_keys, int heads, int nthr, size_t sh,
                       const float *Dd, const char *op, A... args) {
    vc_cu_attn_launch_prep(kern, d, rows, by_keys, heads, nthr, sh, Dd, op, [](attn_params *, void **) { return 1; },
                           args...);
}
/* cuda_attn_bwd_dq.cu: dq += the gradient through the scores (D = rowsum(dO * O) in Dd) */
void vc_cu_attn_bwd_dq(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                       float *Dd, const char *op);
#endif
