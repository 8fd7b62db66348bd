/* CUDA kernels of the linear-attention layers (semantics in src/tensor/backend.h, reference in
 * src/backend/cpu/cpu_gdn.c): Gated DeltaNet's recurrence (with d->no_delta, Mamba 2's SSD scan: no delta rule,
 * delta = beta v), its log decay, the depthwise causal conv1d, and the per-channel scale and bias over columns.
 *
 * Recurrence: one block per (sequence, value head). Forward: every step of the recurrence is independent per
 * column j of the state S [dk, dv] (kv_j = S^T k, delta_j, the update, o_j = S^T q), so the thread that owns a
 * column walks it through the sequence alone, with no barrier; the state sits in shared memory (global scratch
 * when too large). Backward: stretches of d->ckpt rows from the last; a stretch's states are recomputed column
 * by column from the state the forward kept, then its tokens are walked back carrying dS, in phases split by
 * barriers: columns (Sp, r, dS += q dy^T, ddelta), rows (dq, dk: sums over j), columns (dg, dS_prev). A q/k
 * head's dq / dk are written per value head into scratch and added into dq / dk by a second kernel, value heads
 * in ascending order. Every sum runs in a fixed order and nothing uses float atomics: the same bits run to run.
 * The small host arrays (cu, the kept-state bases, the state pointers) go up in one upload per call. */
#include "cuda_internal.h"
#include "backend/act_math.h"
#include <stdlib.h>
#include <string.h>

#define GT 256                          /* threads of the elementwise kernels */
#define GDN_SMEM_MAX (200 * 1024)       /* dynamic shared memory past which states live in global scratch */
#define GDN_HIST_BUDGET ((size_t)512 << 20) /* backward: scratch for the recomputed states of the resident blocks */
#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- the per-call host arrays (seq_tabs: cuda_internal.h) ---- */
/* cu, the kept-state bases (ckpt > 0; else zeros) and the state pointers (NULL array: NULLs) in one upload, freed
 * by the caller with vc_cu_scratch_free. NULL on failure, and while a graph captures (an upload cannot be
 * captured: the step then runs eagerly). */
void *vc_cu_upload_tabs(int n, const int64_t *cu, int64_t ckpt, float *const *state, seq_tabs *t, const char *op) {
    static_assert(sizeof(float *) == sizeof(int64_t), "pointers are stored in 64-bit words");
    size_t words = 3 * (size_t)n + 2;
    int64_t *h = (int64_t *)malloc(words * sizeof(int64_t));
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the host sequence tables");
        return NULL;
    }
    vc_seq_tabs_fill(h, n, cu, ckpt, state);
    char *dev = (char *)vc_cu_upload(h, words * sizeof(int64_t), op);
    free(h);
    if (!dev) return NULL;
    t->cu = (const int64_t *)dev;
    t->base = t->cu + n + 1;
    t->state = (float *const *)(t->base + n + 1);
    return dev;
}

int vc_cu_seq_tabs(const int64_t *dev_tabs, int n, const int64_t *cu, int64_t ckpt, float *const *state, seq_tabs *t,
                   void **own, const char *op) {
    *own = NULL;
    if (dev_tabs) { /* the op layer's copy in the graph's memory: a graph can capture the call */
        t->cu = dev_tabs;
        t->base = dev_tabs + n + 1;
        t->state = (float *const *)(t->base + n + 1);
        return 1;
    }
    *own = vc_cu_upload_tabs(n, cu, ckpt, state, t, op);
    return *own != NULL;
}

/* threads of a block whose threads own columns (and rows) of a state: n rounded up to a warp, at most 256 */
static int state_threads(int n) {
    int t = (n + 31) / 32 * 32;
    return t > 256 ? 256 : t;
}

/* the shape checks both recurrence entries share; 0 (sticky error set) when d is unusable */
static int gdn_check(const vc_gdn_desc *d, int need_ckpt, const char *op) {
    if (d->n_k_head <= 0 || d->n_v_head <= 0 || d->n_v_head % d->n_k_head || d->dk <= 0 || d->dv <= 0) {
        vc_cu_fail(VC_ERR_ARG, op, "head counts or sizes out of range (n_v_head must be a multiple of n_k_head)");
        return 0;
    }
    if (need_ckpt && d->ckpt <= 0) {
        vc_cu_fail(VC_ERR_ARG, op, "kept states need ckpt > 0");
        return 0;
    }
    return 1;
}

/* ---- recurrence forward ---- */
struct gdn_fwd_args {
    seq_tabs tab;
    const float *q, *k, *v, *g, *beta;
    float *o, *saved, *work; /* work: the blocks' states in global scratch (NULL: in shared memory) */
    int nk, nv, dk, dv;
    float scale;
    int64_t ckpt;
    int no_delta; /* 1: delta = beta v (no kv = S^T k) */
    int gk;       /* 1: g per key channel [T, nv, dk] (row a of S decays by exp(g[a])) */
    /* shared starts (d->from; vc_cu_share_setup): from and tap_of [n_seq] backend memory, tap [n_tap, nv, dk, dv];
     * pass: the sequences starting from zero (0) or from a tap (1) */
    const int *from, *tap_of;
    float *tap;
    int pass;
};


/* row t's log decay for value head h, key channel a (one per head unless gk) */
__device__ __forceinline__ float gdn_g(const float *g, int gk, int64_t t, int nv, int h, int dk, int a) {
    return gk ? g[(t * nv + h) * dk + a] : g[t * nv + h];
}

/* The state's column sits in shared memory or scratch behind a generic pointer that the compiler cannot tell apart
 * from the state, tap and kept-state arrays it copies to and from, nor from q and k: a loop that loads and stores an
 * element at a time waits out each load's latency before the next (the column's copy in from memory took 128 memory
 * latencies a token at dk 128). The loops below take GDN_B rows at a time (the copies GDN_CB), every load of a batch
 * before its first store, the arithmetic in the same order: the same bits. */
#define GDN_B 8
#define GDN_CB 32 /* rows a batch of a column's copy (its loads in flight at once) */

/* dst[a * dv + j] = src ? src[a * dv + j] : 0 for a < dk (a column's copy) */
__device__ __forceinline__ void gdn_col_copy(float *dst, const float *src, int dk, int dv, int j) {
    int a = 0;
    for (; a + GDN_CB <= dk; a += GDN_CB) {
        float r[GDN_CB];
#pragma unroll
        for (int u = 0; u < GDN_CB; u++) r[u] = src ? src[(a + u) * dv + j] : 0.0f;
#pragma unroll
        for (int u = 0; u < GDN_CB; u++) dst[(a + u) * dv + j] = r[u];
    }
    for (; a < dk; a++) dst[a * dv + j] = src ? src[a * dv + j] : 0.0f;
}

/* rows a0 .. a0 + N - 1 of column j, first pass: S = e S (gk: row a by its own e), kv += S[a] k[a] in row order */
template <int N>
__device__ __forceinline__ void gdn_rows_decay(const gdn_fwd_args &p, float *S, const float *k, int64_t t, int h,
                                               int j, int a0, float e, float *kv) {
    float x[N], kk[N], ee[N];
#pragma unroll
    for (int u = 0; u < N; u++) x[u] = S[(a0 + u) * p.dv + j], kk[u] = k[a0 + u];
    if (p.gk) {
#pragma unroll
        for (int u = 0; u < N; u++) ee[u] = expf(gdn_g(p.g, 1, t, p.nv, h, p.dk, a0 + u));
    } else {
#pragma unroll
        for (int u = 0; u < N; u++) ee[u] = e;
    }
#pragma unroll
    for (int u = 0; u < N; u++) {
        x[u] *= ee[u];
        S[(a0 + u) * p.dv + j] = x[u];
        if (!p.no_delta) *kv += x[u] * kk[u];
    }
}

/* second pass: S += k delta^T, y += S[a] (scale q[a]) in row order */
template <int N>
__device__ __forceinline__ void gdn_rows_update(const gdn_fwd_args &p, float *S, const float *k, const float *q, int j,
                                                int a0, float delta, float *y) {
    float x[N], kk[N], qq[N];
#pragma unroll
    for (int u = 0; u < N; u++) x[u] = S[(a0 + u) * p.dv + j], kk[u] = k[a0 + u], qq[u] = q[a0 + u];
#pragma unroll
    for (int u = 0; u < N; u++) {
        x[u] += kk[u] * delta;
        S[(a0 + u) * p.dv + j] = x[u];
        *y += x[u] * (qq[u] * p.scale);
    }
}

/* one token of column j: S = e S, kv = S^T k (no_delta: 0), delta = beta (v_j - kv), S += k delta^T; returns
 * y_j = S^T (scale q) */
__device__ __forceinline__ float gdn_col_token(const gdn_fwd_args &p, float *S, int64_t t, int h, int kh, int j) {
    const int dk = p.dk, dv = p.dv, full = dk / GDN_B * GDN_B;
    const float *q = p.q + (t * p.nk + kh) * dk, *k = p.k + (t * p.nk + kh) * dk;
    float e = expf(gdn_g(p.g, 0, t, p.nv, h, dk, 0)), kv = 0, y = 0;
    for (int a = 0; a < full; a += GDN_B) gdn_rows_decay<GDN_B>(p, S, k, t, h, j, a, e, &kv);
    for (int a = full; a < dk; a++) gdn_rows_decay<1>(p, S, k, t, h, j, a, e, &kv);
    const float delta = p.beta[t * p.nv + h] * (p.v[(t * p.nv + h) * dv + j] - kv);
    for (int a = 0; a < full; a += GDN_B) gdn_rows_update<GDN_B>(p, S, k, q, j, a, delta, &y);
    for (int a = full; a < dk; a++) gdn_rows_update<1>(p, S, k, q, j, a, delta, &y);
    return y;
}

/* column j of value head h's state through sequence s's rows (the CPU's gdn_step, one column) */
__device__ void gdn_fwd_col(const gdn_fwd_args &p, float *S, int s, int h, int j) {
    const int kh = h / (p.nv / p.nk), dk = p.dk, dv = p.dv;
    const int64_t SS = (int64_t)dk * dv, t0 = p.tab.cu[s], t1 = p.tab.cu[s + 1];
    float *st = p.tab.state[s] ? p.tab.state[s] + h * SS : NULL;
    const float *init = p.from && p.from[s] >= 0 ? vc_cu_gdn_tap(p.tap_of, p.tap, p.from[s], p.nv, h, SS)
                                                 : NULL;
    float *tap = vc_cu_gdn_tap(p.tap_of, p.tap, s, p.nv, h, SS);
    int64_t R = tap ? (t1 - t0) / p.ckpt * p.ckpt : -1; /* (its tap row) */
    gdn_col_copy(S, st ? st : init, dk, dv, j);
    for (int64_t t = t0; t < t1; t++) {
        if (tap && t - t0 == R) gdn_col_copy(tap, S, dk, dv, j);
        if (p.saved && (t - t0) % p.ckpt == 0)
            gdn_col_copy(p.saved + ((p.tab.base[s] + (t - t0) / p.ckpt) * p.nv + h) * SS, S, dk, dv, j);
        const float y = gdn_col_token(p, S, t, h, kh, j);
        if (p.o) p.o[(t * p.nv + h) * dv + j] = y;
    }
    if (tap && R == t1 - t0) gdn_col_copy(tap, S, dk, dv, j);
    if (st) gdn_col_copy(st, S, dk, dv, j);
}

__global__ void k_gdn_fwd(gdn_fwd_args p) {
    extern __shared__ float gdn_sh[];
    int s = blockIdx.x / p.nv, h = blockIdx.x % p.nv;
    if (p.from && (p.from[s] >= 0) != p.pass) return; /* (another pass's sequence) */
    float *S = p.work ? p.work + (int64_t)blockIdx.x * p.dk * p.dv : gdn_sh;
    for (int j = threadIdx.x; j < p.dv; j += blockDim.x) gdn_fwd_col(p, S, s, h, j);
}

void vc_cu_gdn_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                   const float *beta, const vc_gdn_desc *d) {
    const char *op = "gated delta rule forward";
    if (!vc_cu_begin(op) || d->n_seq <= 0 || !gdn_check(d, saved != NULL, op)) return;
    if (vc_cu_gdn_chunk_ok(d)) {
        vc_cu_gdn_chunk_fwd(o, saved, q, k, v, g, beta, d);
        return;
    }
    gdn_fwd_args p = { {}, q, k, v, g, beta, o, saved, NULL, d->n_k_head, d->n_v_head, d->dk, d->dv, d->scale,
                       d->ckpt, d->no_delta, d->gk, NULL, NULL, NULL, 0 };
    void *tabs = NULL;
    if (!vc_cu_seq_tabs(d->dev_tabs, d->n_seq, d->cu, saved ? d->ckpt : 0, d->state, &p.tab, &tabs, op)) return;
    if (vc_cu_share_setup(d->n_seq, d->from, (size_t)d->n_v_head * d->dk * d->dv, &p.from, &p.tap_of, &p.tap, op) < 0) {
        vc_cu_scratch_free((void *)p.from);
        vc_cu_scratch_free(tabs);
        return;
    }
    int64_t blocks = (int64_t)d->n_seq * d->n_v_head;
    size_t sbytes = (size_t)d->dk * d->dv * sizeof(float), sh = sbytes <= GDN_SMEM_MAX ? sbytes : 0;
    if (!sh) p.work = (float *)vc_cu_scratch(sbytes * (size_t)blocks, op);
    if (sh || p.work) {
        cudaFuncSetAttribute(k_gdn_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        k_gdn_fwd<<<(unsigned)blocks, state_threads(d->dv), sh, vc_cu_stream()>>>(p);
        if (p.from) { /* then the sequences starting from the taps the first pass kept */
            p.pass = 1;
            k_gdn_fwd<<<(unsigned)blocks, state_threads(d->dv), sh, vc_cu_stream()>>>(p);
        }
        vc_cu_end(op);
    }
    vc_cu_scratch_free(p.work);
    vc_cu_scratch_free((void *)p.from);
    vc_cu_scratch_free(p.tap);
    vc_cu_scratch_free(tabs);
}

/* ---- recurrence backward ---- */
struct gdn_bwd_args {
    seq_tabs tab;
    const float *q, *k, *v, *g, *beta, *dout, *saved;
    float *pq, *pk;      /* dq, dk of each value head [T, nv, dk] (NULL: not wanted) */
    float *gv, *gg, *gb; /* dv, dg, dbeta (+=; NULL: not wanted) */
    float *hist, *work;  /* per block: hmax - 1 recomputed states; Sp and dS in global scratch (NULL: shared) */
    int n_seq, nk, nv, dk, dv;
    float scale;
    int64_t ckpt, hmax;
    int no_delta; /* 1: delta = beta v, so no kv term: dd = 0 */
    int gk;       /* 1: g per key channel: e and dg per row a of the state */
    /* shared starts: from, tap_of (as the forward's), tap the gradients reaching the taps, dinit [n_seq, nv, dk, dv]
     * the gradients of the starts of the sequences with from >= 0; pass as the forward's */
    const int *from, *tap_of;
    float *tap, *dinit;
    int pass;
};

/* one block's buffers: vectors over the columns (shared memory), Sp and dS [dk, dv + 1], the recomputed states */
struct gdn_blk {
    float *r, *del, *dd, *db, *dg; /* v - Sp^T k (no_delta: v), delta, then -beta ddelta (no_delta: 0), per-column
                                    * dbeta and dg terms */
    float *Sp, *dS, *hist;
};

/* the decay of state row a at token t: the head's e, or (gk) the row's own (p, t, h, dk and e in scope) */
#define GDN_E(a) (p.gk ? expf(gdn_g(p.g, 1, t, p.nv, h, dk, (a))) : e)

/* column j of the states before rows c0 + 1 .. c0 + n - 1 of sequence s (hist[i - 1]), from the kept one */
__device__ void gdn_recompute_col(const gdn_bwd_args &p, const float *kept, float *hist, int s, int h, int64_t c0,
                                  int64_t n, int j) {
    const int kh = h / (p.nv / p.nk), dk = p.dk, dv = p.dv;
    const float *prev = kept;
    for (int64_t i = 0; i + 1 < n; i++) {
        int64_t t = p.tab.cu[s] + c0 + i;
        const float *k = p.k + (t * p.nk + kh) * dk;
        float *nx = hist + i * dk * dv, e = expf(gdn_g(p.g, 0, t, p.nv, h, dk, 0)), kv = 0;
        for (int a = 0; a < dk && !p.no_delta; a++) kv += prev[a * dv + j] * GDN_E(a) * k[a];
        float delta = p.beta[t * p.nv + h] * (p.v[(t * p.nv + h) * dv + j] - kv);
        for (int a = 0; a < dk; a++) nx[a * dv + j] = prev[a * dv + j] * GDN_E(a) + k[a] * delta;
        prev = nx;
    }
}

/* column phase 1 of token t (P: the state before it): Sp = e P, r = v - Sp^T k (no_delta: r = v), dS += (scale q)
 * dy^T, ddelta = dS^T k; dv += beta ddelta, the dbeta term ddelta r, and dd = -beta ddelta, the gradient of kv
 * (no_delta: no kv, dd = 0, so the later phases add nothing of it: dk = dS delta, dS_prev = e dS) */
__device__ void gdn_bwd_cols1(const gdn_bwd_args &p, const gdn_blk &b, const float *P, int64_t t, int h, float e,
                              float be) {
    const int kh = h / (p.nv / p.nk), dk = p.dk, dv = p.dv, ld = dv + 1;
    const float *q = p.q + (t * p.nk + kh) * dk, *k = p.k + (t * p.nk + kh) * dk, *dy = p.dout + (t * p.nv + h) * dv;
    for (int j = threadIdx.x; j < dv; j += blockDim.x) {
        float kv = 0;
        for (int a = 0; a < dk; a++) {
            float sp = GDN_E(a) * P[a * dv + j];
            b.Sp[a * ld + j] = sp;
            if (!p.no_delta) kv += sp * k[a];
        }
        float r = p.v[(t * p.nv + h) * dv + j] - kv, dyj = dy[j], ddj = 0;
        for (int a = 0; a < dk; a++) {
            float x = b.dS[a * ld + j] + (q[a] * p.scale) * dyj;
            b.dS[a * ld + j] = x;
            ddj += x * k[a];
        }
        if (p.gv) p.gv[(t * p.nv + h) * dv + j] += be * ddj;
        b.r[j] = r;
        b.del[j] = be * r;
        b.db[j] = ddj * r;
        b.dd[j] = p.no_delta ? 0.0f : -be * ddj;
    }
}

/* row phase: dq_a = scale sum_j S_t[a, j] dy_j (S_t = Sp + k delta^T), dk_a = sum_j dS[a, j] delta_j + Sp[a, j] dd_j,
 * into this value head's partials; thread 0 adds dbeta */
__device__ void gdn_bwd_rows(const gdn_bwd_args &p, const gdn_blk &b, int64_t t, int h) {
    const int kh = h / (p.nv / p.nk), dk = p.dk, dv = p.dv, ld = dv + 1;
    const float *k = p.k + (t * p.nk + kh) * dk, *dy = p.dout + (t * p.nv + h) * dv;
    for (int a = threadIdx.x; a < dk; a += blockDim.x) {
        float ka = k[a], sq = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int j = 0; j < dv; j++) {
            float sp = b.Sp[a * ld + j];
            sq += (sp + ka * b.del[j]) * dy[j];
            s1 += b.dS[a * ld + j] * b.del[j];
            s2 += sp * b.dd[j];
            if (p.gk) s3 += (b.dS[a * ld + j] + ka * b.dd[j]) * sp; /* dg[a] = sum_j dSp Sp (row a) */
        }
        if (p.pq) p.pq[(t * p.nv + h) * dk + a] = sq * p.scale;
        if (p.pk) p.pk[(t * p.nv + h) * dk + a] = s1 + s2;
        if (p.gk && p.gg) p.gg[(t * p.nv + h) * dk + a] += s3;
    }
    if (threadIdx.x == 0 && p.gb) {
        float sum = 0;
        for (int j = 0; j < dv; j++) sum += b.db[j];
        p.gb[t * p.nv + h] += sum;
    }
}

/* column phase 2: dSp = dS + k dd^T, the dg term sum_a dSp Sp, and dS = e dSp (the gradient of the state before) */
__device__ void gdn_bwd_cols2(const gdn_bwd_args &p, const gdn_blk &b, int64_t t, int h, float e) {
    const int kh = h / (p.nv / p.nk), dk = p.dk, dv = p.dv, ld = dv + 1;
    const float *k = p.k + (t * p.nk + kh) * dk;
    for (int j = threadIdx.x; j < dv; j += blockDim.x) {
        float ddj = b.dd[j], acc = 0;
        for (int a = 0; a < dk; a++) {
            float gsp = b.dS[a * ld + j] + k[a] * ddj;
            acc += gsp * b.Sp[a * ld + j];
            b.dS[a * ld + j] = GDN_E(a) * gsp;
        }
        b.dg[j] = acc;
    }
}

/* one token back (every thread of the block calls it): dS holds the gradient of the state after the token */
__device__ void gdn_bwd_token(const gdn_bwd_args &p, const gdn_blk &b, const float *P, int64_t t, int h) {
    float e = expf(gdn_g(p.g, 0, t, p.nv, h, p.dk, 0)), be = p.beta[t * p.nv + h];
    gdn_bwd_cols1(p, b, P, t, h, e, be);
    __syncthreads();
    gdn_bwd_rows(p, b, t, h);
    __syncthreads();
    gdn_bwd_cols2(p, b, t, h, e);
    __syncthreads();
    if (threadIdx.x == 0 && p.gg && !p.gk) { /* b.dg is next written after two more barriers */
        float sum = 0;
        for (int j = 0; j < p.dv; j++) sum += b.dg[j];
        p.gg[t * p.nv + h] += sum;
    }
}

/* value head h over sequence s, stretch by stretch from the last */
__device__ void gdn_bwd_task(const gdn_bwd_args &p, const gdn_blk &b, int s, int h) {
    const int dk = p.dk, dv = p.dv, ld = dv + 1;
    const int64_t SS = (int64_t)dk * dv, t0 = p.tab.cu[s], L = p.tab.cu[s + 1] - t0, C = p.ckpt, R = L / C * C;
    if (L <= 0) return;
    /* shared starts: the gradient reaching its tap row */
    const float *dtap = vc_cu_gdn_tap(p.tap_of, p.tap, s, p.nv, h, SS);
    for (int j = threadIdx.x; j < dv; j += blockDim.x)
        for (int a = 0; a < dk; a++) b.dS[a * ld + j] = dtap && R == L ? dtap[a * dv + j] : 0.0f;
    for (int64_t c0 = (L - 1) / C * C; c0 >= 0; c0 -= C) {
        int64_t n = L - c0 < C ? L - c0 : C;
        const float *kept = p.saved + ((p.tab.base[s] + c0 / C) * p.nv + h) * SS;
        for (int j = threadIdx.x; j < dv; j += blockDim.x) gdn_recompute_col(p, kept, b.hist, s, h, c0, n, j);
        for (int64_t i = n - 1; i >= 0; i--) gdn_bwd_token(p, b, i ? b.hist + (i - 1) * SS : kept, t0 + c0 + i, h);
        if (dtap && c0 == R) /* (columns as their owners wrote them: no barrier) */
            for (int j = threadIdx.x; j < dv; j += blockDim.x)
                for (int a = 0; a < dk; a++) b.dS[a * ld + j] += dtap[a * dv + j];
    }
    if (p.dinit && p.from[s] >= 0) /* the gradient of its starting state */
        for (int j = threadIdx.x; j < dv; j += blockDim.x)
            for (int a = 0; a < dk; a++) p.dinit[((int64_t)s * p.nv + h) * SS + a * dv + j] = b.dS[a * ld + j];
}

#undef GDN_E

/* resident blocks take the (sequence, value head) tasks in turn */
__global__ void k_gdn_bwd(gdn_bwd_args p) {
    extern __shared__ float gdn_sh[];
    const int dk = p.dk, dv = p.dv;
    gdn_blk b;
    b.r = gdn_sh;
    b.del = b.r + dv;
    b.dd = b.del + dv;
    b.db = b.dd + dv;
    b.dg = b.db + dv;
    b.Sp = p.work ? p.work + (int64_t)blockIdx.x * 2 * dk * (dv + 1) : b.dg + dv;
    b.dS = b.Sp + dk * (dv + 1);
    b.hist = p.hist ? p.hist + (int64_t)blockIdx.x * (p.hmax - 1) * dk * dv : NULL;
    for (int64_t task = blockIdx.x; task < (int64_t)p.n_seq * p.nv; task += gridDim.x) {
        int s = (int)(task / p.nv);
        if (!p.from || (p.from[s] >= 0) == p.pass) gdn_bwd_task(p, b, s, (int)(task % p.nv));
    }
}

/* dst[t, kh, a] += part[t, kh * rep + m, a], m ascending (a q/k head's value heads in order), rows [r0, r0 + rows) */
__global__ void k_gdn_head_sum(float *dst, const float *part, int64_t r0, int64_t rows, int nk, int rep, int dk) {
    GRID_LOOP(i, rows * nk * dk) {
        int64_t t = r0 + i / ((int64_t)nk * dk), x = (t * nk) * dk + i % ((int64_t)nk * dk);
        int kh = (int)(i % ((int64_t)nk * dk) / dk), a = (int)(i % dk);
        float acc = dst[x];
        for (int m = 0; m < rep; m++) acc += part[((t * nk + kh) * rep + m) * dk + a];
        dst[x] = acc;
    }
}

void vc_cu_gdn_head_sum(float *dst, const float *part, int64_t r0, int64_t rows, int nk, int rep, int dk) {
    int64_t n = rows * nk * dk;
    if (n > 0) k_gdn_head_sum<<<vc_cu_blocks(n, GT), GT, 0, vc_cu_stream()>>>(dst, part, r0, rows, nk, rep, dk);
}

/* the backward's scratch: the q/k partials, the recomputed states and (when they do not fit in shared memory) Sp and
 * dS; the grid is sized so the recomputed states stay within GDN_HIST_BUDGET. Returns the grid (0 on failure). */
static int64_t gdn_bwd_scratch(gdn_bwd_args *p, const vc_gdn_desc *d, int want_q, int want_k, size_t *sh,
                               const char *op) {
    int64_t T = d->cu[d->n_seq], tasks = (int64_t)d->n_seq * d->n_v_head, lmax = 1;
    for (int s = 0; s < d->n_seq; s++) lmax = d->cu[s + 1] - d->cu[s] > lmax ? d->cu[s + 1] - d->cu[s] : lmax;
    p->hmax = d->ckpt < lmax ? d->ckpt : lmax;
    size_t SS = (size_t)d->dk * d->dv, work = 2 * (size_t)d->dk * (d->dv + 1), vec = 5 * (size_t)d->dv;
    int in_sh = (vec + work) * sizeof(float) <= GDN_SMEM_MAX;
    *sh = (vec + (in_sh ? work : 0)) * sizeof(float);
    size_t per = ((size_t)(p->hmax - 1) * SS + (in_sh ? 0 : work)) * sizeof(float);
    int64_t grid = per ? (int64_t)(GDN_HIST_BUDGET / per) : tasks;
    grid = grid < 1 ? 1 : grid > tasks ? tasks : grid;
    size_t part = (size_t)T * d->n_v_head * d->dk * sizeof(float);
    if (want_q && !(p->pq = (float *)vc_cu_scratch(part, op))) return 0;
    if (want_k && !(p->pk = (float *)vc_cu_scratch(part, op))) return 0;
    if (p->hmax > 1 && !(p->hist = (float *)vc_cu_scratch((size_t)(p->hmax - 1) * SS * sizeof(float) * grid, op)))
        return 0;
    if (!in_sh && !(p->work = (float *)vc_cu_scratch(work * sizeof(float) * grid, op))) return 0;
    return grid;
}

void vc_cu_gdn_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                   const float *q, const float *k, const float *v, const float *g, const float *beta,
                   const vc_gdn_desc *d) {
    const char *op = "gated delta rule backward";
    if (!vc_cu_begin(op) || d->n_seq <= 0 || !gdn_check(d, 1, op)) return;
    if (!saved) {
        vc_cu_fail(VC_ERR_ARG, op, "the backward needs the states the forward kept");
        return;
    }
    if (!dq && !dk && !dv && !dg && !dbeta) return;
    if (vc_cu_gdn_chunk_ok(d)) {
        vc_cu_gdn_chunk_bwd(dq, dk, dv, dg, dbeta, dout, saved, q, k, v, g, beta, d);
        return;
    }
    gdn_bwd_args p = { {}, q, k, v, g, beta, dout, saved, NULL, NULL, dv, dg, dbeta, NULL, NULL, d->n_seq,
                       d->n_k_head, d->n_v_head, d->dk, d->dv, d->scale, d->ckpt, 1, d->no_delta, d->gk,
                       NULL, NULL, NULL, NULL, 0 };
    void *tabs = vc_cu_upload_tabs(d->n_seq, d->cu, d->ckpt, NULL, &p.tab, op);
    if (!tabs) return;
    size_t sh = 0, SH = (size_t)d->n_v_head * d->dk * d->dv;
    int64_t grid = gdn_bwd_scratch(&p, d, dq != NULL, dk != NULL, &sh, op);
    int nt = grid > 0 ? vc_cu_share_setup(d->n_seq, d->from, (size_t)d->n_v_head * d->dk * d->dv, &p.from, &p.tap_of, &p.tap, op) : -1;
    float *dinit = nt > 0 ? (float *)vc_cu_scratch(sizeof(float) * SH * (size_t)d->n_seq, op) : NULL;
    if (nt > 0 && (!dinit || !vc_cu_ok(cudaMemsetAsync(dinit, 0, sizeof(float) * SH * (size_t)d->n_seq,
                                                       vc_cu_stream()), op)))
        nt = -1;
    p.dinit = dinit;
    if (nt >= 0) {
        int64_t r0 = d->cu[0], rows = d->cu[d->n_seq] - r0;
        int rep = d->n_v_head / d->n_k_head;
        unsigned th = state_threads(d->dk > d->dv ? d->dk : d->dv);
        cudaFuncSetAttribute(k_gdn_bwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        if (p.from) { /* the sequences starting from taps first, their starts' gradients summed per tap */
            p.pass = 1;
            k_gdn_bwd<<<(unsigned)grid, th, sh, vc_cu_stream()>>>(p);
            vc_cu_gdn_tap_sum(p.tap, p.dinit, p.from, p.tap_of, d->n_seq, nt, (int64_t)SH);
            p.pass = 0, p.dinit = NULL;
        }
        k_gdn_bwd<<<(unsigned)grid, th, sh, vc_cu_stream()>>>(p);
        if (dq) vc_cu_gdn_head_sum(dq, p.pq, r0, rows, d->n_k_head, rep, d->dk);
        if (dk) vc_cu_gdn_head_sum(dk, p.pk, r0, rows, d->n_k_head, rep, d->dk);
        vc_cu_end(op);
    }
    vc_cu_scratch_free(p.pq);
    vc_cu_scratch_free(p.pk);
    vc_cu_scratch_free(p.hist);
    vc_cu_scratch_free(p.work);
    vc_cu_scratch_free((void *)p.from);
    vc_cu_scratch_free(p.tap);
    vc_cu_scratch_free(dinit);
    vc_cu_scratch_free(tabs);
}

/* ---- the log decay: elementwise forward; backward da elementwise, ddt_bias and dA_log by one block per head, its
 * channels in turn (each thread's rows t = tid, tid + GT, ... ascending, then a fixed tree in double; the head's
 * channels summed in order) ---- */
__global__ void k_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh,
                               int grp) {
    const int64_t C = (int64_t)nh * grp;
    GRID_LOOP(i, T * C) g[i] = vc_gdn_gate_f(a[i], A_log[i % C / grp], dt_bias[i % C]);
}

__global__ void k_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a,
                               const float *A_log, const float *dt_bias, int64_t T, int nh, int grp) {
    __shared__ double sA[GT], sdt[GT];
    const int h = blockIdx.x;
    const int64_t C = (int64_t)nh * grp;
    float totA = 0;
    for (int64_t c = (int64_t)h * grp; c < (int64_t)(h + 1) * grp; c++) {
        double accA = 0, accdt = 0;
        for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
            int64_t i = t * C + c;
            float gA, gdt = vc_gdn_gate_d(a[i], A_log[h], dt_bias[c], &gA) * dg[i];
            if (da) da[i] += gdt;
            accA += (double)(gA * dg[i]);
            accdt += (double)gdt;
        }
        sA[threadIdx.x] = accA, sdt[threadIdx.x] = accdt;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) sA[threadIdx.x] += sA[threadIdx.x + w], sdt[threadIdx.x] += sdt[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            totA += (float)sA[0];
            if (ddt_bias) ddt_bias[c] += (float)sdt[0];
        }
        __syncthreads(); /* sA and sdt are written again by the next channel */
    }
    if (threadIdx.x == 0 && dA_log) dA_log[h] += totA;
}

void vc_cu_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp) {
    const char *op = "gated delta decay forward";
    if (!vc_cu_begin(op) || T <= 0 || nh <= 0 || grp <= 0) return;
    k_gdn_gate_fwd<<<vc_cu_blocks(T * nh * grp, GT), GT, 0, vc_cu_stream()>>>(g, a, A_log, dt_bias, T, nh, grp);
    vc_cu_end(op);
}

void vc_cu_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a, const float *A_log,
                        const float *dt_bias, int64_t T, int nh, int grp) {
    const char *op = "gated delta decay backward";
    if (!vc_cu_begin(op) || T <= 0 || nh <= 0 || grp <= 0 || (!da && !dA_log && !ddt_bias)) return;
    k_gdn_gate_bwd<<<(unsigned)nh, GT, 0, vc_cu_stream()>>>(da, dA_log, ddt_bias, dg, a, A_log, dt_bias, T, nh, grp);
    vc_cu_end(op);
}

/* ---- depthwise causal conv1d: a thread per (row, channel) for y and dx (the row's sequence by binary search),
 * per (sequence, channel) for the new state, per (channel, tap) for dw (sequences and rows ascending) ---- */
struct conv_args {
    seq_tabs tab;
    int n_seq, K;
    int64_t C;
};

/* the sequence holding row t: the last s with cu[s] <= t */
__device__ int conv_seq(const int64_t *cu, int n, int64_t t) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void k_conv_fwd(float *y, const float *x, const float *w, conv_args p, int64_t r0, int64_t rows) {
    GRID_LOOP(i, rows * p.C) {
        int64_t t = r0 + i / p.C, c = i % p.C;
        int s = conv_seq(p.tab.cu, p.n_seq, t);
        int64_t t0 = p.tab.cu[s], pos = t - t0;
        const float *st = p.tab.state[s];
        float acc = 0;
        for (int j = 0; j < p.K; j++) {
            int64_t src = pos - p.K + 1 + j;
            float xv = src >= 0 ? x[(t0 + src) * p.C + c] : st ? st[(p.K - 1 + src) * p.C + c] : 0.0f;
            acc += w[c * p.K + j] * xv;
        }
        y[t * p.C + c] = acc;
    }
}

/* the state becomes the last K - 1 rows of (state, x): row r takes x's row L - (K - 1) + r, or the old state's row
 * r + L; ascending r reads each old row before it is overwritten */
__global__ void k_conv_state(const float *x, conv_args p) {
    GRID_LOOP(i, (int64_t)p.n_seq * p.C) {
        int s = (int)(i / p.C);
        int64_t c = i % p.C, t0 = p.tab.cu[s], L = p.tab.cu[s + 1] - t0;
        float *st = p.tab.state[s];
        if (!st) continue;
        for (int r = 0; r < p.K - 1; r++) {
            int64_t src = L - (p.K - 1) + r;
            st[r * p.C + c] = src >= 0 ? x[(t0 + src) * p.C + c] : st[(r + L) * p.C + c];
        }
    }
}

__global__ void k_conv_bwd_dx(float *dx, const float *dy, const float *w, conv_args p, int64_t r0, int64_t rows) {
    GRID_LOOP(i, rows * p.C) {
        int64_t t = r0 + i / p.C, c = i % p.C;
        int s = conv_seq(p.tab.cu, p.n_seq, t);
        int64_t t0 = p.tab.cu[s], L = p.tab.cu[s + 1] - t0, pos = t - t0;
        float acc = 0;
        for (int j = 0; j < p.K; j++) {
            int64_t o = pos + p.K - 1 - j;
            if (o < L) acc += w[c * p.K + j] * dy[(t0 + o) * p.C + c];
        }
        dx[t * p.C + c] += acc;
    }
}

__global__ void k_conv_bwd_dw(float *dw, const float *dy, const float *x, conv_args p) {
    GRID_LOOP(i, p.C * p.K) {
        int64_t c = i % p.C;
        int j = (int)(i / p.C);
        float acc = 0;
        for (int s = 0; s < p.n_seq; s++) {
            int64_t t0 = p.tab.cu[s], L = p.tab.cu[s + 1] - t0;
            for (int64_t t = p.K - 1 - j; t < L; t++)
                acc += dy[(t0 + t) * p.C + c] * x[(t0 + t - p.K + 1 + j) * p.C + c];
        }
        dw[c * p.K + j] += acc;
    }
}

void vc_cu_conv1d_fwd(float *y, const float *x, const float *w, const vc_conv_desc *d) {
    const char *op = "conv1d forward";
    if (!vc_cu_begin(op) || d->n_seq <= 0 || d->C <= 0 || d->K <= 0) return;
    conv_args p = { {}, d->n_seq, d->K, d->C };
    void *tabs = NULL;
    if (!vc_cu_seq_tabs(d->dev_tabs, d->n_seq, d->cu, 0, d->state, &p.tab, &tabs, op)) return;
    int64_t r0 = d->cu[0], rows = d->cu[d->n_seq] - r0;
    if (rows > 0) k_conv_fwd<<<vc_cu_blocks(rows * d->C, GT), GT, 0, vc_cu_stream()>>>(y, x, w, p, r0, rows);
    if (d->state && d->K > 1)
        k_conv_state<<<vc_cu_blocks((int64_t)d->n_seq * d->C, GT), GT, 0, vc_cu_stream()>>>(x, p);
    vc_cu_end(op);
    vc_cu_scratch_free(tabs);
}

void vc_cu_conv1d_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const vc_conv_desc *d) {
    const char *op = "conv1d backward";
    if (!vc_cu_begin(op) || d->n_seq <= 0 || d->C <= 0 || d->K <= 0 || (!dx && !dw)) return;
    conv_args p = { {}, d->n_seq, d->K, d->C };
    void *tabs = vc_cu_upload_tabs(d->n_seq, d->cu, 0, NULL, &p.tab, op);
    if (!tabs) return;
    int64_t r0 = d->cu[0], rows = d->cu[d->n_seq] - r0;
    if (dx && rows > 0) k_conv_bwd_dx<<<vc_cu_blocks(rows * d->C, GT), GT, 0, vc_cu_stream()>>>(dx, dy, w, p, r0, rows);
    if (dw) k_conv_bwd_dw<<<vc_cu_blocks(d->C * d->K, GT), GT, 0, vc_cu_stream()>>>(dw, dy, x, p);
    vc_cu_end(op);
    vc_cu_scratch_free(tabs);
}

/* ---- per-channel scale and bias over columns: y[r, c] = x[r, c] w[c / grp] + b[c / grp]. Forward and dx are
 * elementwise; dw and db ([C / grp]) in two passes with no atomics: column sums of dy x and dy over slices of
 * rows (a block of AC_COLS columns by AC_LANES row lanes per (column tile, slice): each lane's rows ascending in
 * double, the lanes added in order), then one thread per channel adds its columns' slices (slices ascending, then
 * columns ascending) and rounds once. The slicing depends only on R and C: the same bits run to run. ---- */
#define AC_COLS 32
#define AC_LANES 8
#define AC_BLOCKS 1024 /* the blocks the column pass aims at, by slicing the rows */
#define AC_MIN_ROWS 64 /* the fewest rows a slice takes */

__global__ void k_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C,
                                  int64_t grp) {
    GRID_LOOP(i, R * C) {
        int64_t ch = i % C / grp;
        y[i] = x[i] * (w ? w[ch] : 1.0f) + (b ? b[ch] : 0.0f);
    }
}

/* dx += dy w */
__global__ void k_affine_cols_dx(float *dx, const float *dy, const float *w, int64_t R, int64_t C, int64_t grp) {
    GRID_LOOP(i, R * C) dx[i] += dy[i] * (w ? w[i % C / grp] : 1.0f);
}

/* the column sums of slice blockIdx.y (rows [s rps, (s + 1) rps)): pw[s, c] = sum dy x (when want_w), pb[s, c] =
 * sum dy, each [n_slices, C] doubles */
__global__ void k_affine_cols_part(double *pw, double *pb, const float *dy, const float *x, int64_t R, int64_t C,
                                   int64_t rps, int want_w) {
    __shared__ double sw[AC_LANES][AC_COLS], sb[AC_LANES][AC_COLS];
    const int tx = threadIdx.x % AC_COLS, ty = threadIdx.x / AC_COLS;
    const int64_t c = blockIdx.x * (int64_t)AC_COLS + tx, s = blockIdx.y, r0 = s * rps;
    const int64_t r1 = r0 + rps < R ? r0 + rps : R;
    double aw = 0, ab = 0;
    if (c < C)
        for (int64_t r = r0 + ty; r < r1; r += AC_LANES) {
            float g = dy[r * C + c];
            if (want_w) aw += (double)(g * x[r * C + c]);
            ab += (double)g;
        }
    sw[ty][tx] = aw, sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int l = 1; l < AC_LANES; l++) aw += sw[l][tx], ab += sb[l][tx];
        if (want_w) pw[s * C + c] = aw;
        pb[s * C + c] = ab;
    }
}

/* channel k: dw[k] += the sum of pw over the slices and its grp columns, db[k] likewise from pb */
__global__ void k_affine_cols_chan(float *dw, float *db, const double *pw, const double *pb, int64_t ns, int64_t C,
                                   int64_t grp) {
    GRID_LOOP(k, C / grp) {
        double aw = 0, ab = 0;
        for (int64_t s = 0; s < ns; s++)
            for (int64_t c = k * grp; c < (k + 1) * grp; c++) {
                if (dw) aw += pw[s * C + c];
                ab += pb[s * C + c];
            }
        if (dw) dw[k] += (float)aw;
        if (db) db[k] += (float)ab;
    }
}

/* the shape checks both entries share; 0 when there is nothing to do or (sticky error set) grp does not divide C */
static int affine_check(int64_t R, int64_t C, int64_t grp, const char *op) {
    if (R <= 0 || C <= 0) return 0;
    if (grp <= 0 || C % grp) {
        vc_cu_fail(VC_ERR_ARG, op, "the group size must divide the columns");
        return 0;
    }
    return 1;
}

void vc_cu_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C,
                           int64_t grp) {
    const char *op = "affine columns forward";
    if (!vc_cu_begin(op) || !affine_check(R, C, grp, op)) return;
    k_affine_cols_fwd<<<vc_cu_blocks(R * C, GT), GT, 0, vc_cu_stream()>>>(y, x, w, b, R, C, grp);
    vc_cu_end(op);
}

void vc_cu_affine_cols_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                           int64_t C, int64_t grp) {
    const char *op = "affine columns backward";
    if (!vc_cu_begin(op) || !affine_check(R, C, grp, op) || (!dx && !dw && !db)) return;
    if (dx) k_affine_cols_dx<<<vc_cu_blocks(R * C, GT), GT, 0, vc_cu_stream()>>>(dx, dy, w, R, C, grp);
    if (dw || db) {
        int64_t tiles = (C + AC_COLS - 1) / AC_COLS, ns = (AC_BLOCKS + tiles - 1) / tiles;
        int64_t most = (R + AC_MIN_ROWS - 1) / AC_MIN_ROWS;
        ns = ns < most ? ns : most;
        int64_t rps = (R + ns - 1) / ns;
        ns = (R + rps - 1) / rps; /* no empty slice */
        double *part = (double *)vc_cu_scratch((size_t)(dw ? 2 : 1) * ns * C * sizeof(double), op);
        if (!part) return;
        double *pb = part, *pw = dw ? part + ns * C : NULL;
        k_affine_cols_part<<<dim3((unsigned)tiles, (unsigned)ns), AC_COLS * AC_LANES, 0, vc_cu_stream()>>>(
            pw, pb, dy, x, R, C, rps, dw != NULL);
        k_affine_cols_chan<<<vc_cu_blocks(C / grp, GT), GT, 0, vc_cu_stream()>>>(dw, db, pw, pb, ns, C, grp);
        vc_cu_scratch_free(part);
    }
    vc_cu_end(op);
}
