/* DeepSeek Sparse Attention's indexer selection on the GPU (vc_backend.dsa_select). One block per query row scores
 * its visible keys into scratch (a thread a key: per head a dot product in eight partial sums, as the CPU's
 * vc_dot_fixed, then relu and the head's weight, heads ascending), finds the topk-th largest score by a radix select
 * over the scores' order-preserving bits (four passes of a byte), and sets the bits of the keys above it and of the
 * lowest-index ties. Rows run in chunks so the scratch stays bounded. A step that selects is never a CUDA graph: its
 * selection grows with the sequences. */
#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <stdlib.h>

#define DSA_NT 256

struct dsa_seq {
    int64_t q0, qlen, kvlen, pg; /* pg: the sequence's first page in the page list */
    const float *k;              /* keys in rows (not paged) */
};

struct dsa_params {
    const dsa_seq *seq;
    const int32_t *row_seq;      /* [rows] each row's sequence */
    const void *const *pages;    /* paged: every sequence's page pointers, in order */
    int64_t P, kstride, topk, words, row0, maxkv;
    int nh, hd, causal;
    float scale;
    float *scratch;              /* [chunk rows, maxkv] */
};

__device__ __forceinline__ float key_at(const float *k, int i) { return k[i]; }
__device__ __forceinline__ float key_at(const __nv_bfloat16 *k, int i) { return __bfloat162float(k[i]); }

/* float bits in an order that sorts as the floats do (NaN scores were made -inf) */
__device__ __forceinline__ unsigned ordered(float x) {
    unsigned u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

template <typename KV>
__device__ float key_score(const dsa_params &p, const dsa_seq &sq, int64_t j, const float *qs, const float *ws) {
    const KV *k = sq.k ? (const KV *)(const void *)(sq.k + j * p.kstride)
                       : (const KV *)p.pages[sq.pg + j / p.P] + (j % p.P) * p.kstride;
    float total = 0;
    for (int h = 0; h < p.nh; h++) {
        const float *q = qs + h * p.hd;
        float a[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
        int i = 0;
        for (; i + 8 <= p.hd; i += 8)
            for (int l = 0; l < 8; l++) a[l] += q[i + l] * key_at(k, i + l);
        float s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        for (; i < p.hd; i++) s += q[i] * key_at(k, i);
        float x = p.scale * s;
        total += ws[h] * (x > 0 ? x : 0.0f);
    }
    return isnan(total) ? -INFINITY : total;
}

template <typename KV>
__global__ void __launch_bounds__(DSA_NT) k_dsa_select(uint32_t *sel, const float *q, const float *w, dsa_params p) {
    extern __shared__ float qs[]; /* [nh hd] the query row, then [nh] its weights */
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix;
    __shared__ long long s_want;
    float *ws = qs + p.nh * p.hd;
    const int64_t row = p.row0 + blockIdx.x;
    const dsa_seq sq = p.seq[p.row_seq[row]];
    const int64_t pos = sq.kvlen - sq.qlen + (row - sq.q0), nvis = p.causal ? pos + 1 : sq.kvlen;
    uint32_t *bits = sel + row * p.words;
    if (nvis <= p.topk) { /* every visible key */
        for (int64_t i = threadIdx.x; i < p.words; i += blockDim.x) {
            int64_t n = nvis - 32 * i;
            bits[i] = n >= 32 ? 0xffffffffu : n > 0 ? (1u << n) - 1u : 0u;
        }
        return;
    }
    for (int i = threadIdx.x; i < p.nh * p.hd; i += blockDim.x) qs[i] = q[row * p.nh * p.hd + i];
    for (int i = threadIdx.x; i < p.nh; i += blockDim.x) ws[i] = w[row * p.nh + i];
    __syncthreads();
    float *sc = p.scratch + (int64_t)blockIdx.x * p.maxkv;
    for (int64_t j = threadIdx.x; j < nvis; j += blockDim.x) sc[j] = key_score<KV>(p, sq, j, qs, ws);
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_want = p.topk;
    }
    unsigned mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) { /* the topk-th largest's bits, a byte at a time */
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        const unsigned prefix = s_prefix;
        for (int64_t j = threadIdx.x; j < nvis; j += blockDim.x) {
            unsigned u = ordered(sc[j]);
            if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            long long cum = 0;
            for (int dgt = 255; dgt >= 0; dgt--) {
                if (cum + hist[dgt] >= s_want) {
                    s_prefix = prefix | ((unsigned)dgt << shift);
                    s_want -= cum;
                    break;
                }
                cum += hist[dgt];
            }
        }
        mask |= 255u << shift;
        __syncthreads();
    }
    if (threadIdx.x >= 32) return;
    const unsigned T = s_prefix;
    long long ties = s_want; /* keys equal to the threshold to take, lowest index first */
    for (int64_t i = 0; i < p.words; i++) {
        int64_t j = 32 * i + threadIdx.x;
        unsigned u = j < nvis ? ordered(sc[j]) : 0u;
        unsigned gt = __ballot_sync(0xffffffffu, j < nvis && u > T), eq = __ballot_sync(0xffffffffu, j < nvis && u == T);
        while (eq && ties > 0) {
            gt |= eq & (~eq + 1u);
            eq &= eq - 1u;
            ties--;
        }
        if (threadIdx.x == 0) bits[i] = gt;
    }
}

void vc_cu_dsa_select(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                      const vc_attn_desc *d) {
    const char *op = "DeepSeek Sparse Attention selection";
    vc_cu_graph_taint(); /* before vc_cu_begin, which a replay returns from */
    if (!vc_cu_begin(op)) return;
    int n = d->n_seq, paged = d->page_tokens > 0;
    int64_t rows = n ? d->q_start[n] : 0, maxkv = 0, npg = 0;
    if (rows <= 0) return;
    for (int s = 0; s < n; s++) {
        maxkv = d->kv_len[s] > maxkv ? d->kv_len[s] : maxkv;
        if (paged) npg += (d->kv_len[s] + d->page_tokens - 1) / d->page_tokens;
    }
    size_t seq_b = sizeof(dsa_seq) * (size_t)n, row_b = sizeof(int32_t) * (size_t)rows;
    size_t pg_off = (seq_b + row_b + 15) / 16 * 16, bytes = pg_off + sizeof(void *) * (size_t)(npg ? npg : 1);
    char *h = (char *)calloc(1, bytes);
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the host tables");
        return;
    }
    dsa_seq *sq = (dsa_seq *)h;
    int32_t *rs = (int32_t *)(h + seq_b);
    const void **pg = (const void **)(h + pg_off);
    for (int s = 0, at = 0; s < n; s++) {
        sq[s].q0 = d->q_start[s];
        sq[s].qlen = d->q_start[s + 1] - d->q_start[s];
        sq[s].kvlen = d->kv_len[s];
        sq[s].pg = at;
        sq[s].k = paged ? NULL : d->k_seq[s];
        for (int64_t i = 0; paged && i < (d->kv_len[s] + d->page_tokens - 1) / d->page_tokens; i++) pg[at++] = d->k_pages[s][i];
        for (int64_t r = d->q_start[s]; r < d->q_start[s + 1]; r++) rs[r] = s;
    }
    char *dev = (char *)vc_cu_upload(h, bytes, op);
    free(h);
    if (!dev) return;
    int64_t chunk = ((int64_t)1 << 26) / (maxkv ? maxkv : 1); /* 256 MB of scores at most */
    chunk = chunk < 1 ? 1 : chunk > rows ? rows : chunk;
    float *scratch = (float *)vc_cu_scratch(sizeof(float) * (size_t)(chunk * (maxkv ? maxkv : 1)), op);
    if (scratch) {
        dsa_params p = { (const dsa_seq *)dev, (const int32_t *)(dev + seq_b), (const void *const *)(dev + pg_off),
                         d->page_tokens, d->k_stride, topk, words, 0, maxkv, d->n_head, d->head_dim, d->causal,
                         d->scale, scratch };
        size_t sh = sizeof(float) * (size_t)(d->n_head * d->head_dim + d->n_head);
        if (paged && d->kv_bf16) cudaFuncSetAttribute(k_dsa_select<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        else cudaFuncSetAttribute(k_dsa_select<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            p.row0 = r0;
            unsigned nb = (unsigned)(rows - r0 < chunk ? rows - r0 : chunk);
            if (paged && d->kv_bf16) k_dsa_select<__nv_bfloat16><<<nb, DSA_NT, sh, vc_cu_stream()>>>(sel, q, w, p);
            else k_dsa_select<float><<<nb, DSA_NT, sh, vc_cu_stream()>>>(sel, q, w, p);
        }
        vc_cu_end(op);
        vc_cu_scratch_free(scratch);
    }
    vc_cu_scratch_free(dev);
}
