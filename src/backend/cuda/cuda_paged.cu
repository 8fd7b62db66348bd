/* Attention forward over paged keys/values (vc_attn_desc.page_tokens > 0; the rollout engine's decode
 * and chunked prefill): key j of sequence s sits at k_pages[s][j / P] + (j % P) * k_stride. The host
 * page-pointer arrays become offsets from the lowest key (value) page pointer, flattened into one table
 * with a per-sequence table and a row -> sequence map. The rollout engine's layers differ only in
 * that base (a page holds every layer's rows), so every layer of a step builds the same table: it is
 * uploaded once, and re-uploaded only when its bytes change. A row's output depends only on that row,
 * never on the batch around it (k_attn_paged below). */
#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PW 4

struct pseq {
    int64_t q0, qlen, kvlen, pg; /* pg: first entry of the sequence's pages in the pointer tables */
    /* keys in chunks: the first partials' slot of the sequence's rows, each row cmax = ceil(kvlen / split) of them
     * where kvlen > split (paged_slot) */
    int64_t cpre;
};

struct paged_params {
    const pseq *seq;
    const int32_t *row_seq; /* [rows] */
    const int64_t *kp, *vp; /* page offsets (elements: floats, or bf16 values) from kbase / vbase */
    const void *kbase, *vbase;
    int64_t row0, P, kstride, vstride;
    int nh, nkv, hd, dv, window, causal, alibi, chunk;
    float scale, cap;
    const float *sinks; /* [nh] or NULL */
    float alibi_scale; /* the slopes' factor (vc_attn_desc.alibi_scale, 1 for 0) */
    const uint32_t *sel; /* DeepSeek Sparse Attention's selection (vc_attn_desc.sel) or NULL */
    int64_t sel_words;
    const int32_t *rows; /* the blocks' rows (from row0; NULL: row0 + blockIdx.x): a prefill's decode rows */
    vc_udiv pdiv;        /* key j's page j / P by a multiply (keys below 2^31) */
    int rq;              /* bf16 matmuls: q rounded to bf16 as it is read (the tensor-core kernels' operand) */
    __nv_bfloat16 *o16;  /* or NULL: the output's bf16 rounding (a held operand: vc_attn_desc.hold_out) */
    /* keys in chunks (the tensor-core kernel; NULL part: none): a row over `split` keys takes them in chunks of split
     * over `slots` blocks, chunk c's unnormalised sums of head h in part[(paged_slot(c) * nh + h) * dv] (dv floats)
     * and its m and l in part_ml[2 (paged_slot(c) * nh + h)] */
    float *part, *part_ml;
    int64_t split;
    int slots;
};
/* the chunks the keys [j0, j1) take (1: none) */
__device__ __forceinline__ int paged_chunks(const paged_params &p, int64_t j0, int64_t j1) {
    return p.part && j1 - j0 > p.split ? (int)((j1 - j0 + p.split - 1) / p.split) : 1;
}
/* the partials' slot of chunk c of the row at position r of sequence sq (its chunks: at most ceil(kvlen / split)) */
__device__ __forceinline__ int64_t paged_slot(const paged_params &p, const pseq &sq, int64_t r, int c) {
    return sq.cpre + r * ((sq.kvlen + p.split - 1) / p.split) + c;
}
/* column c (of D) of head h of `row`'s output from its unnormalised sum a at running max M and sum L, the head's sink
 * folded in: o, its bf16 rounding (p.o16) and, at column 0, the log-sum-exp */
__device__ __forceinline__ void paged_store(const paged_params &p, float *o, float *lse, int64_t row, int h, int c,
                                            int D, float a, float M, float L) {
    const float sf = vc_attn_sink_fold(p, h, &M, &L), inv = L > 0 ? sf / L : 0.0f;
    o[(row * p.nh + h) * D + c] = a * inv;
    if (p.o16) p.o16[(row * p.nh + h) * D + c] = __float2bfloat16_rn(a * inv);
    if (lse && c == 0) lse[row * p.nh + h] = L > 0 ? M + logf(L) : -INFINITY;
}
/* key j's page and slot within its sequence's pages */
__device__ __forceinline__ int64_t page_of(const paged_params &p, int64_t j) { return vc_udiv_do(p.pdiv, (uint32_t)j); }

/* One block of PW warps per (query row, group of GC query heads sharing one key/value head): each key
 * and value row is read once for the group (grouped-query attention reads it once, not once per
 * query head). Warp w takes keys j0 + w, j0 + w + PW, ... with an online softmax per head (lanes split
 * the head dimension); the warps' partials are merged in warp order. Per head the arithmetic is the same
 * whatever GC is, so grouping does not change a bit. */
__device__ __forceinline__ float kv_load(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float kv_load(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }

/* a block's query row, its heads' kv head, its sequence and the visible keys [j0, j1) */
struct paged_blk {
    int64_t row, pos, j0, j1;
    int h0, kvh;
    pseq sq;
};

/* the keys [*j0, *j1) the query at position pos of sequence sq sees (causal, window, chunk) */
__device__ __forceinline__ void paged_range(const paged_params &p, const pseq &sq, int64_t pos, int64_t *j0,
                                            int64_t *j1) {
    *j1 = p.causal ? (pos + 1 < sq.kvlen ? pos + 1 : sq.kvlen) : sq.kvlen;
    *j0 = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
    if (p.chunk > 0 && pos - pos % p.chunk > *j0) *j0 = pos - pos % p.chunk;
}

/* the block's row and key range; its GC query heads copied into qs (row pitch qp floats) and their ALiBi slopes */
template <int GC>
__device__ __forceinline__ paged_blk paged_setup(const paged_params &p, const float *q, float *qs, int qp,
                                                 float (&slope)[GC]) {
    paged_blk b;
    const int64_t i = p.rows ? p.rows[blockIdx.x] : blockIdx.x;
    b.row = p.row0 + i;
    b.h0 = blockIdx.y * GC;
    b.kvh = b.h0 / (p.nh / p.nkv);
    b.sq = p.seq[p.row_seq[i]];
    for (int g = 0; g < GC; g++)
        for (int c = threadIdx.x; c < p.hd; c += blockDim.x) {
            const float x = q[(b.row * p.nh + b.h0 + g) * p.hd + c];
            qs[g * qp + c] = p.rq ? __bfloat162float(__float2bfloat16_rn(x)) : x;
        }
    for (int g = 0; g < GC; g++) slope[g] = vc_attn_slope(p, b.h0 + g);
    __syncthreads();
    b.pos = b.sq.kvlen - b.sq.qlen + (b.row - b.sq.q0);
    paged_range(p, b.sq, b.pos, &b.j0, &b.j1);
    return b;
}

/* the warps' partials (m and l, the same on every lane; put(g, row) writes the warp's value columns of head g into
 * its row of wacc) merged head by head in warp order through shared wm, wl, wacc; the output rows and lse written */
template <int GC, int NC, class Put>
__device__ __forceinline__ void paged_merge(const paged_params &p, const paged_blk &b, float (*wm)[GC],
                                            float (*wl)[GC], float (*wacc)[32 * NC], const float (&m)[GC],
                                            const float (&l)[GC], Put put, float *o, float *lse) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        for (int g = 0; g < GC; g++) {
            wm[warp][g] = m[g];
            wl[warp][g] = l[g];
        }
    for (int g = 0; g < GC; g++) {
        put(g, wacc[warp]);
        __syncthreads();
        float M = -INFINITY, L = 0, f[PW];
        for (int w = 0; w < PW; w++) M = fmaxf(M, wm[w][g]);
        for (int w = 0; w < PW; w++) {
            f[w] = wm[w][g] == -INFINITY ? 0.0f : expf(wm[w][g] - M);
            L += wl[w][g] * f[w];
        }
        const int h = b.h0 + g;
        float sf = vc_attn_sink_fold(p, h, &M, &L);
        float inv = L > 0 ? sf / L : 0.0f;
        for (int c = threadIdx.x; c < p.dv; c += blockDim.x) {
            float a = 0;
            for (int w = 0; w < PW; w++) a += wacc[w][c] * f[w];
            o[(b.row * p.nh + h) * p.dv + c] = a * inv;
            if (p.o16) p.o16[(b.row * p.nh + h) * p.dv + c] = __float2bfloat16_rn(a * inv);
        }
        if (lse && threadIdx.x == 0) lse[b.row * p.nh + h] = L > 0 ? M + logf(L) : -INFINITY;
        __syncthreads();
    }
}

template <int GC, typename KV, int NC>
__global__ void __launch_bounds__(PW * 32) k_attn_paged(float *o, float *lse, const float *q, paged_params p) {
    __shared__ float qs[GC][32 * NC];
    __shared__ float wm[PW][GC], wl[PW][GC], wacc[PW][32 * NC];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float slope[GC];
    const paged_blk b = paged_setup<GC>(p, q, &qs[0][0], 32 * NC, slope);
    const int64_t row = b.row, pos = b.pos, j0 = b.j0, j1 = b.j1;
    const int kvh = b.kvh;
    const pseq sq = b.sq;
    float m[GC], l[GC], acc[GC][NC];
    for (int g = 0; g < GC; g++) {
        m[g] = -INFINITY;
        l[g] = 0;
        for (int c = 0; c < NC; c++) acc[g][c] = 0;
    }
    for (int64_t j = j0 + warp; j < j1; j += PW) {
        if (!vc_attn_selected(p, row, j)) continue; /* DeepSeek Sparse Attention: a key the indexer left out */
        const int64_t pj = page_of(p, j), slot = j - pj * p.P;
        const KV *k = (const KV *)p.kbase + p.kp[sq.pg + pj] + slot * p.kstride + (int64_t)kvh * p.hd;
        const KV *v = (const KV *)p.vbase + p.vp[sq.pg + pj] + slot * p.vstride + (int64_t)kvh * p.dv;
        float kk[NC], vv[NC];
        for (int c = 0; c < NC; c++) {
            kk[c] = lane + 32 * c < p.hd ? kv_load(k, lane + 32 * c) : 0.0f;
            vv[c] = lane + 32 * c < p.dv ? kv_load(v, lane + 32 * c) : 0.0f;
        }
        for (int g = 0; g < GC; g++) {
            float dot = 0;
            for (int c = 0; c < NC && lane + 32 * c < p.hd; c++) dot += qs[g][lane + 32 * c] * kk[c];
            dot = vc_warp_sum(dot);
            float x = vc_attn_score(p, dot, slope[g], pos, j);
            float mn = fmaxf(m[g], x), corr = expf(m[g] - mn), e = expf(x - mn);
            l[g] = l[g] * corr + e;
            for (int c = 0; c < NC; c++) acc[g][c] = acc[g][c] * corr + (lane + 32 * c < p.dv ? e * vv[c] : 0.0f);
            m[g] = mn;
        }
    }
    paged_merge<GC, NC>(p, b, wm, wl, wacc, m, l, [&](int g, float *w) {
        for (int c = 0; c < NC; c++) w[lane + 32 * c] = acc[g][c];
    }, o, lse);
}

/* query heads per block: the largest divisor of the group size up to `most` (VERLC_CUDA_PAGED_GROUPS=0: one) */
static int heads_per_block(int group, int most) {
    const char *e = getenv("VERLC_CUDA_PAGED_GROUPS");
    if (e && *e == '0') return 1;
    for (int gc = most; gc > 1; gc--)
        if (group % gc == 0) return gc;
    return 1;
}

/* The page table lives in one persistent device buffer, laid out [pseq x n_seq][row -> sequence, rows]
 * [k offsets, cap][v offsets, cap] with cap the buffer's page capacity, so the kernels' pointers into
 * it stay put from step to step (a captured decode step reads the same addresses when replayed). It is
 * refilled in place, in stream order, only when its bytes change: every layer of a step asks for the
 * same table when the caller passes k_base / v_base. */
static char *g_tab_host, *g_tab_dev;
static size_t g_tab_bytes, g_tab_cap, g_tab_fixed, g_tab_npg; /* the last table; device buffer size */
static int64_t g_tab_slots; /* the last table's partials' slots (keys in chunks; pseq.cpre) */
static int g_tab_aligned; /* the last table's page offsets all on 16-byte boundaries */
static float *g_part;      /* keys in chunks: the chunks' partials (split_setup), grown as needed */
static size_t g_part_bytes;

void vc_cu_paged_release(void) {
    vc_cuda_free(g_part);
    g_part = NULL;
    g_part_bytes = 0;
    vc_cuda_free(g_tab_dev);
    free(g_tab_host);
    g_tab_host = g_tab_dev = NULL;
    g_tab_bytes = g_tab_cap = g_tab_fixed = g_tab_npg = 0;
}

/* the used parts of a table: the fixed part and npg entries of each offset array (the rest is zero) */
static int same_table(const char *h, size_t bytes, size_t fixed, size_t npg) {
    if (!g_tab_host || bytes != g_tab_bytes || fixed != g_tab_fixed || npg != g_tab_npg) return 0;
    size_t cap = (bytes - fixed) / 16;
    return !memcmp(h, g_tab_host, fixed + 8 * npg) && !memcmp(h + fixed + 8 * cap, g_tab_host + fixed + 8 * cap, 8 * npg);
}

/* the device table holding host table h (bytes; h is taken) */
static char *table_upload(char *h, size_t bytes, size_t fixed, size_t npg, const char *op) {
    if (g_tab_dev && same_table(h, bytes, fixed, npg)) {
        free(h);
        return g_tab_dev;
    }
    if (bytes > g_tab_cap) { /* grows by half again, at least 1 KiB */
        size_t cap = bytes + bytes / 2 > 1024 ? bytes + bytes / 2 : 1024;
        char *dev = (char *)vc_cuda_malloc(cap);
        if (!dev) {
            free(h);
            if (!vc_cu_graph_mode) vc_cu_fail(VC_ERR_NOMEM, op, "no room for the page table");
            return NULL;
        }
        vc_cuda_free(g_tab_dev);
        g_tab_dev = dev;
        g_tab_cap = cap;
        vc_cu_graphs_stale(); /* captured kernels point into the old buffer */
    }
    size_t cap = (bytes - fixed) / 16, n = fixed + 8 * npg;
    int same_layout = g_tab_host && bytes == g_tab_bytes && fixed == g_tab_fixed; /* entries past npg: unread */
    vc_status st = same_layout ? vc_cuda_h2d(g_tab_dev, h, n) : vc_cuda_h2d(g_tab_dev, h, bytes);
    if (!st && same_layout) st = vc_cuda_h2d(g_tab_dev + fixed + 8 * cap, h + fixed + 8 * cap, 8 * npg);
    if (st) {
        free(h);
        return NULL;
    }
    free(g_tab_host);
    g_tab_host = h;
    g_tab_bytes = bytes;
    g_tab_fixed = fixed;
    g_tab_npg = npg;
    return g_tab_dev;
}

/* pages addressed from d->k_base / v_base when given, else from the lowest page pointer */
static void page_bases(const vc_attn_desc *d, int64_t P, const float **kb, const float **vb) {
    *kb = d->k_base;
    *vb = d->v_base;
    for (int s = 0; s < d->n_seq && (!d->k_base || !d->v_base); s++)
        for (int64_t i = 0, n = (d->kv_len[s] + P - 1) / P; i < n; i++) {
            if (!d->k_base && (!*kb || d->k_pages[s][i] < *kb)) *kb = d->k_pages[s][i];
            if (!d->v_base && (!*vb || d->v_pages[s][i] < *vb)) *vb = d->v_pages[s][i];
        }
}

/* the page table for d, uploaded (or found unchanged) on the device; NULL on failure */
static char *build_table(const vc_attn_desc *d, int64_t P, int64_t row0, size_t seq_b, size_t fixed, size_t *cap_out,
                         int64_t split, const float **kbase, const float **vbase, const char *op) {
    int64_t npg = 0;
    for (int s = 0; s < d->n_seq; s++) npg += (d->kv_len[s] + P - 1) / P;
    /* page capacity: what the buffer holds beyond the fixed part (the same layout while it fits) */
    size_t cap = g_tab_cap > fixed ? (g_tab_cap - fixed) / 16 : 0;
    if (cap < (size_t)npg) cap = (size_t)npg + (size_t)npg / 2 + 8;
    size_t bytes = fixed + 16 * cap;
    char *h = (char *)calloc(1, bytes); /* padding bytes too: the table is compared bytewise */
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the host page table");
        return NULL;
    }
    pseq *sq = (pseq *)h;
    int32_t *rs = (int32_t *)(h + seq_b);
    int64_t *kp = (int64_t *)(h + fixed), *vp = kp + cap;
    page_bases(d, P, kbase, vbase);
    int64_t at = 0, slots = 0;
    g_tab_aligned = 1;
    for (int s = 0; s < d->n_seq; s++) {
        int64_t n = (d->kv_len[s] + P - 1) / P, qlen = d->q_start[s + 1] - d->q_start[s];
        sq[s] = pseq{ d->q_start[s], qlen, d->kv_len[s], at, slots };
        if (split > 0 && d->kv_len[s] > split) slots += qlen * ((d->kv_len[s] + split - 1) / split);
        for (int64_t i = 0; i < n; i++) { /* in elements: bf16 pages count 2-byte values */
            int64_t kb = (const char *)d->k_pages[s][i] - (const char *)*kbase;
            int64_t vb = (const char *)d->v_pages[s][i] - (const char *)*vbase;
            kp[at + i] = d->kv_bf16 ? kb / 2 : kb / 4;
            vp[at + i] = d->kv_bf16 ? vb / 2 : vb / 4;
            if (kb % 16 || vb % 16) g_tab_aligned = 0;
        }
        at += n;
        for (int64_t r = d->q_start[s]; r < d->q_start[s + 1]; r++) rs[r - row0] = s;
    }
    *cap_out = cap;
    g_tab_slots = slots;
    return table_upload(h, bytes, fixed, (size_t)npg, op); /* refilled in replays too: the graph reads it */
}

/* NC columns of the head per lane: 8 for heads up to 256 wide, 16 up to 512 (Gemma 4's full layers, at most 4 heads
 * a block) */
template <typename KV, int NC>
static void launch_paged(int gc, dim3 grid, float *o, float *lse, const float *q, const paged_params &p) {
    switch (gc) {
    case 8: k_attn_paged<8, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 7: k_attn_paged<7, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 6: k_attn_paged<6, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 5: k_attn_paged<5, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 4: k_attn_paged<4, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 3: k_attn_paged<3, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    case 2: k_attn_paged<2, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    default: k_attn_paged<1, KV, NC><<<grid, PW * 32, 0, vc_cu_stream()>>>(o, lse, q, p); break;
    }
}

#include "cuda_paged_keys.h"
#include "cuda_paged_mma.h"

/* the kernel with the lanes over keys (cuda_paged_keys.h) where the heads allow: 1.74x the decode tokens/s of
 * k_attn_paged on an H200 (Qwen2.5-0.5B shape, batch 256, 128 + 256 tokens); VERLC_CUDA_PAGED=dims: k_attn_paged */
static int paged_keys(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("VERLC_CUDA_PAGED");
        on = !(e && !strcmp(e, "dims"));
    }
    return on;
}

/* the tensor-core kernel's 16-byte copies: the last table's page offsets, the bases and the strides */
static int paged_aligned(const vc_attn_desc *d, const void *kbase, const void *vbase) {
    const int es = d->kv_bf16 ? 2 : 4;
    return g_tab_aligned && ((uintptr_t)kbase % 16) == 0 && ((uintptr_t)vbase % 16) == 0 && (d->k_stride * es) % 16 == 0 &&
           (d->v_stride * es) % 16 == 0;
}

/* ---- keys in chunks ----
 * A row's keys go through one block per key/value head, tile after tile: a decode batch of a few long rows (a
 * rollout's last sequences, a long context) keeps a few multiprocessors busy for the whole context. With the
 * tensor-core kernel a row over 512 visible keys takes them in chunks of 512 spread over blocks, each chunk's partial
 * sums stored and a second kernel adding them in chunk order (flash-decoding's split). The chunks start at the row's
 * first visible key, so its bits depend on its keys alone: the same in any batch, grid or graph, but not those of the
 * row in one chunk (other sums in another order). VERLC_CUDA_PAGED_SPLIT (read per call): 0 off; K or K,Z: chunks of K
 * keys (a multiple of 64), Z blocks a row and key/value head (0: enough for 4 blocks a multiprocessor, at most 64). */
static void split_conf(int64_t *keys, int *slots) {
    static int warned;
    const char *e = getenv("VERLC_CUDA_PAGED_SPLIT");
    *keys = 512;
    *slots = 0;
    if (!e || !*e) return;
    char *end;
    long long k = strtoll(e, &end, 10), z = 0;
    if (*end == ',') z = strtoll(end + 1, &end, 10);
    if (*end || (k != 0 && (k < 64 || k % 64)) || z < 0 || z > 65535) { /* a tuning switch: said once */
        if (!warned++)
            fprintf(stderr, "verlc: VERLC_CUDA_PAGED_SPLIT=%s is not 0, K or K,Z (K a multiple of 64): chunks of 512 "
                    "keys\n", e);
        return;
    }
    *keys = k;
    *slots = (int)z;
}

/* p's chunks (keys a chunk and blocks a row from split_conf) for the rows of a table of `nslots` partials' slots
 * (g_tab_slots: none unless some sequence holds over `keys` keys): where the tensor-core kernel takes them, the
 * partials' buffer (grown to fit: a move drops the graphs that read the old one, and an allocation is no
 * graph step) and the blocks a row; p->part NULL otherwise (also when there is no room). Done before the op's entry,
 * so that a replay grows the buffer too. */
static void split_setup(const vc_attn_desc *d, paged_params *p, int64_t keys, int slots, int64_t nslots, int64_t rows,
                        int aligned) {
    p->part = p->part_ml = NULL;
    p->split = keys;
    p->slots = 1;
    if (!keys || nslots <= 0 || !paged_mma_ok(d, aligned)) return;
    const int64_t per = (int64_t)d->n_head * (d->v_head_dim + 2); /* floats a slot */
    const size_t need = (size_t)(per * nslots) * sizeof(float);
    if (need > g_part_bytes) {
        size_t bytes = need + need / 2;
        float *buf = (float *)vc_cuda_malloc(bytes);
        if (!buf) {
            cudaGetLastError(); /* not sticky: the rows go unsplit */
            return;
        }
        vc_cuda_free(g_part);
        g_part = buf;
        g_part_bytes = bytes;
        vc_cu_graphs_stale(); /* captured kernels point into the old buffer */
    }
    /* the m and l after the sums of every slot the buffer holds: fixed while the buffer is */
    p->part = g_part;
    p->part_ml = g_part + (int64_t)(g_part_bytes / sizeof(float) / (size_t)per) * d->n_head * d->v_head_dim;
    const int64_t blocks = rows * d->n_kv_head, z = (4 * (int64_t)vc_cu_sm_count() + blocks - 1) / blocks;
    p->slots = slots ? slots : z < 1 ? 1 : z > 64 ? 64 : (int)z;
}

/* ---- prefill rows through the flash kernels ----
 * A prefill chunk has many query rows a sequence; the kernels above take a block per row, which reads each of its keys
 * for that row alone (3.8 ms a layer for 256 x 128 rows of the Qwen2.5-0.5B shape on an H200). The sequences with
 * several query rows instead have their keys and values gathered out of the pages into rows (f32: a bf16 page's value
 * exactly) and go through the flash forward over keys in rows, which shares each key tile among a tile of queries (on
 * tensor cores with bf16 matmuls: the training forward's kernels and numerics). A sequence's rows still depend only
 * on that sequence. Sequences of fewer rows keep the paged kernel: the decode rows (one a sequence) of the same call,
 * and a speculative step's rows (a token and its K <= 8 drafts: each row then has the bits a plain decode step would
 * give it, and no sequence's keys are gathered and copied for a few rows), short prompts too; below 16 rows by default
 * (gathering a sequence's keys writes and reads them again as f32: about what the paged kernel's own reads of them cost
 * for a few rows). VERLC_CUDA_PAGED_FLASH_ROWS=N (read per call, N >= 2): the least rows a sequence takes the flash
 * kernels with; VERLC_CUDA_PAGED_PREFILL=paged: every row on the paged kernel. */
struct gseq {
    int64_t s, koff; /* the sequence and its first key's row in the gathered keys */
};

template <typename KV>
__global__ void k_paged_gather(float *K, float *V, paged_params p, const gseq *list) {
    const gseq g = list[blockIdx.y];
    const pseq sq = p.seq[g.s];
    const int kw = p.nkv * p.hd, vw = p.nkv * p.dv;
    for (int64_t j = blockIdx.x; j < sq.kvlen; j += gridDim.x) {
        const int64_t pj = page_of(p, j), pg = sq.pg + pj, slot = j - pj * p.P;
        const KV *k = (const KV *)p.kbase + p.kp[pg] + slot * p.kstride;
        const KV *v = (const KV *)p.vbase + p.vp[pg] + slot * p.vstride;
        float *kd = K + (g.koff + j) * kw, *vd = V + (g.koff + j) * vw;
        for (int c = threadIdx.x; c < kw; c += blockDim.x) kd[c] = kv_load(k, c);
        for (int c = threadIdx.x; c < vw; c += blockDim.x) vd[c] = kv_load(v, c);
    }
}

static int prefill_flash_on(void) {
    const char *e = getenv("VERLC_CUDA_PAGED_PREFILL");
    return !(e && !strcmp(e, "paged"));
}

/* the least query rows of a sequence that go through the flash kernels */
static int flash_rows(void) {
    const char *e = getenv("VERLC_CUDA_PAGED_FLASH_ROWS");
    long v = e ? strtol(e, NULL, 10) : 16;
    return v < 2 ? 2 : v > (1 << 30) ? 1 << 30 : (int)v;
}

/* some sequence of d has at least fm query rows */
static int has_flash_rows(const vc_attn_desc *d, int fm) {
    for (int s = 0; s < d->n_seq; s++)
        if (d->q_start[s + 1] - d->q_start[s] >= fm) return 1;
    return 0;
}

/* the sequences of d with fm or more query rows through the flash forward on their gathered keys (after
 * vc_cu_begin(op)); 0 with nothing launched when there is no room for the gathered rows (the caller runs them on the
 * paged kernel), -1 on an error (sticky) */
static int prefill_flash(float *o, float *lse, const float *q, const vc_attn_desc *d, const paged_params &p, int kv16,
                         int fm, const char *op) {
    const int n = d->n_seq;
    const int64_t kw = (int64_t)d->n_kv_head * d->head_dim, vw = (int64_t)d->n_kv_head * d->v_head_dim;
    int64_t keys = 0, most = 0, np = 0;
    for (int s = 0; s < n; s++)
        if (d->q_start[s + 1] - d->q_start[s] >= fm) {
            keys += d->kv_len[s];
            most = d->kv_len[s] > most ? d->kv_len[s] : most;
            np++;
        }
    float *buf = NULL;
    if (np > 65535 || vc_cu_malloc_async((void **)&buf, (size_t)(keys * (kw + vw)) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError(); /* not sticky */
        return 0;
    }
    gseq *list = (gseq *)malloc((size_t)np * sizeof(gseq));
    const float **ptr = (const float **)malloc(2 * (size_t)n * sizeof(float *));
    int64_t *kvl = (int64_t *)malloc((size_t)n * sizeof(int64_t));
    void *dlist = NULL;
    int ok = list && ptr && kvl;
    if (!ok) vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the prefill's sequence list");
    float *K = buf, *V = buf + keys * kw;
    for (int64_t s = 0, at = 0, i = 0; ok && s < n; s++) {
        ptr[s] = K + at * kw;
        ptr[n + s] = V + at * vw;
        /* the paged kernel's sequences: no keys here (nothing of theirs is gathered, nor read) */
        kvl[s] = d->q_start[s + 1] - d->q_start[s] < fm ? 0 : d->kv_len[s];
        if (!kvl[s]) continue;
        list[i++] = gseq{ s, at };
        at += d->kv_len[s];
    }
    if (ok && (ok = (dlist = vc_cu_upload(list, (size_t)np * sizeof(gseq), op)) != NULL)) {
        dim3 grid((unsigned)(most < 4096 ? (most > 0 ? most : 1) : 4096), (unsigned)np);
        if (kv16) k_paged_gather<__nv_bfloat16><<<grid, 128, 0, vc_cu_stream()>>>(K, V, p, (const gseq *)dlist);
        else k_paged_gather<float><<<grid, 128, 0, vc_cu_stream()>>>(K, V, p, (const gseq *)dlist);
        vc_attn_desc f = *d;
        f.page_tokens = 0;
        f.k_pages = f.v_pages = NULL;
        f.k_base = f.v_base = NULL;
        f.same_pages = f.kv_bf16 = 0;
        f.k_seq = ptr;
        f.v_seq = ptr + n;
        f.kv_len = kvl;
        f.k_stride = kw;
        f.v_stride = vw;
        f.min_q_rows = fm;
        vc_cu_attn_fwd_flat(o, lse, q, &f, op);
    }
    vc_cu_scratch_free(dlist);
    vc_cu_scratch_free(buf);
    free(list);
    free(ptr);
    free(kvl);
    return ok ? 1 : -1;
}

/* the paged kernel for the rows p.rows lists (all rows from p.row0 when NULL) */
static void launch_rows(const vc_attn_desc *d, const paged_params &p, int64_t rows, float *o, float *lse,
                        const float *q, const char *op) {
    if (launch_paged_mma(d, p, paged_aligned(d, p.kbase, p.vbase), rows, o, lse, q, op)) return;
    int wide = d->head_dim > 256 || d->v_head_dim > 256, gc = heads_per_block(d->n_head / d->n_kv_head, wide ? 4 : 8);
    dim3 grid((unsigned)rows, (unsigned)(d->n_head / gc));
    if (paged_keys() && !wide) {
        if (d->kv_bf16 && d->v_head_dim <= 128) launch_paged_keys<__nv_bfloat16, 4>(gc, grid, o, lse, q, p);
        else if (d->kv_bf16) launch_paged_keys<__nv_bfloat16, 8>(gc, grid, o, lse, q, p);
        else if (d->v_head_dim <= 128) launch_paged_keys<float, 4>(gc, grid, o, lse, q, p);
        else launch_paged_keys<float, 8>(gc, grid, o, lse, q, p);
    } else if (d->kv_bf16 && wide) launch_paged<__nv_bfloat16, 16>(gc, grid, o, lse, q, p);
    else if (d->kv_bf16) launch_paged<__nv_bfloat16, 8>(gc, grid, o, lse, q, p);
    else if (wide) launch_paged<float, 16>(gc, grid, o, lse, q, p);
    else launch_paged<float, 8>(gc, grid, o, lse, q, p);
}

/* the rows of the sequences with fewer than fm query rows (a prefill call's decode rows, a speculative step's rows) on
 * the paged kernel */
static void decode_rows(const vc_attn_desc *d, paged_params p, float *o, float *lse, const float *q, int fm) {
    const char *op = "attention forward, paged decode";
    int64_t n = 0;
    for (int s = 0; s < d->n_seq; s++)
        if (d->q_start[s + 1] - d->q_start[s] < fm) n += d->q_start[s + 1] - d->q_start[s];
    if (!n || !vc_cu_begin(op)) return;
    int32_t *h = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the decode rows' list");
        return;
    }
    for (int s = 0, i = 0; s < d->n_seq; s++)
        for (int64_t r = d->q_start[s]; d->q_start[s + 1] - d->q_start[s] < fm && r < d->q_start[s + 1]; r++)
            h[i++] = (int32_t)(r - p.row0);
    void *dev = vc_cu_upload(h, (size_t)n * sizeof(int32_t), op);
    free(h);
    if (!dev) return;
    p.rows = (const int32_t *)dev;
    launch_rows(d, p, n, o, lse, q, op);
    vc_cu_end(op);
    vc_cu_scratch_free(dev);
}

/* dst = bf16(src), n values (the held output after the flash kernels) */
__global__ void k_round_out(__nv_bfloat16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}
static void vc_cu_round_rows(__nv_bfloat16 *dst, const float *src, size_t n) {
    if (n) k_round_out<<<vc_cu_blocks((int64_t)n, 256), 256, 0, vc_cu_stream()>>>(dst, src, n);
}

/* the paged kernels round q as they read it (p.rq); a prefill's rows through the flash forward do where the
 * tensor-core kernels take the heads (they round each tile as they load it) */
int vc_cu_paged_rounds_q(const vc_attn_desc *d) {
    if (vc_matmul_precision() != VC_PREC_BF16) return 0;
    vc_attn_desc f = *d;
    f.page_tokens = 0;
    return !prefill_flash_on() || vc_cu_attn_tc_eligible(&f);
}

void vc_cu_attn_fwd_paged(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    const int64_t P = d->page_tokens, row0 = d->q_start[0], rows = d->q_start[d->n_seq] - row0;
    if (rows <= 0) return;
    int64_t kmax = P;
    for (int s = 0; s < d->n_seq; s++) kmax = d->kv_len[s] > kmax ? d->kv_len[s] : kmax;
    if (rows > 0x7fffffff || kmax > 0x7fffffff) {
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, "over 2^31 query rows, keys or page tokens");
        return;
    }
    size_t seq_b = (size_t)d->n_seq * sizeof(pseq), rs_b = ((size_t)rows * sizeof(int32_t) + 7) & ~(size_t)7;
    size_t fixed = seq_b + rs_b, cap = 0;
    const float *kbase = NULL, *vbase = NULL;
    char *dev;
    int64_t keys; /* keys in chunks: keys a chunk (0: none) and blocks a row (0: by the grid) */
    int slots;
    split_conf(&keys, &slots);
    if (d->same_pages && d->k_base && d->v_base && g_tab_host && g_tab_fixed == fixed) {
        /* the next layer of the same forward: the table on the device already holds these pages */
        dev = g_tab_dev;
        cap = (g_tab_bytes - fixed) / 16;
        kbase = d->k_base;
        vbase = d->v_base;
    } else if (!(dev = build_table(d, P, row0, seq_b, fixed, &cap, keys, &kbase, &vbase, op)))
        return;
    const int prefill = rows > d->n_seq;
    paged_params sp = {}; /* its chunk fields: before the entry, which a replay does not pass */
    split_setup(d, &sp, keys, slots, g_tab_slots, rows, paged_aligned(d, kbase ? kbase : q, vbase ? vbase : q));
    /* the profile tells decode steps (a row per sequence) from prefill chunks apart; a graph, steps with keys in chunks
     * (another launch) from steps without */
    if (sp.part) op = prefill ? "attention forward, paged prefill, keys in chunks" : "attention forward, paged decode, keys in chunks";
    else if (vc_cu_prof_enabled()) op = prefill ? "attention forward, paged prefill" : "attention forward, paged decode";
    if (!vc_cu_begin(op)) return;
    paged_params p = sp;
    p.seq = (const pseq *)dev;
    p.row_seq = (const int32_t *)(dev + seq_b);
    p.kp = (const int64_t *)(dev + fixed);
    p.vp = p.kp + cap;
    p.kbase = kbase ? kbase : q; /* no pages: no key is read */
    p.vbase = vbase ? vbase : q;
    p.row0 = row0;
    p.P = P;
    p.pdiv = vc_udiv_make((uint32_t)P);
    p.kstride = d->k_stride;
    p.vstride = d->v_stride;
    p.nh = d->n_head;
    p.nkv = d->n_kv_head;
    p.hd = d->head_dim;
    p.dv = d->v_head_dim;
    p.window = d->window;
    p.causal = d->causal;
    p.alibi = d->alibi;
    p.alibi_scale = d->alibi_scale ? d->alibi_scale : 1.0f;
    p.chunk = d->chunk;
    p.scale = d->scale;
    p.cap = d->softcap;
    p.sinks = d->sinks;
    p.sel = d->sel;
    p.sel_words = d->sel_words;
    p.rows = NULL;
    p.rq = vc_matmul_precision() == VC_PREC_BF16;
    p.o16 = d->hold_out && p.rq ? (__nv_bfloat16 *)vc_cu_hold_slot(o, rows, (int64_t)d->n_head * d->v_head_dim) : NULL;
    const int fm = flash_rows();
    if (prefill && !vc_cu_graph_mode && prefill_flash_on() && has_flash_rows(d, fm)) {
        const int done = prefill_flash(o, lse, q, d, p, d->kv_bf16, fm, op);
        if (done < 0) return;
        if (done) {
            decode_rows(d, p, o, lse, q, fm);
            /* the flash kernels write f32 only: the held rounding of every row after them */
            if (p.o16) vc_cu_round_rows(p.o16, o, (size_t)(rows * d->n_head * d->v_head_dim));
            vc_cu_end(op);
            return;
        }
    }
    launch_rows(d, p, rows, o, lse, q, op);
    vc_cu_end(op);
}
