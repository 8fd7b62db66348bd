/* Flash attention over packed variable-length sequences (f32, SIMT). Forward: one thread block per
 * (sequence, head, block of BQ queries) walks the visible keys in tiles of BK with an online softmax,
 * so no [T x T] matrix exists; it saves the log-sum-exp. Backward (FA2 layout) recomputes the
 * probabilities from the saved lse: a dK/dV kernel with one block per (sequence, kv head, key block)
 * loops over the query heads of its group and the query blocks that can see its keys, and a dQ kernel
 * with one block per (sequence, head, query block) loops over key blocks. Every output element is
 * summed by one thread in a fixed order: no float atomics, results are the same bits run to run.
 * Head dims are padded to a bucket (64, 128, 256, 512) with zeros. Threads form a 16 x 16 grid; a thread
 * owns rows tr + 16 i and columns tc + 16 j of each tile, so row reductions are half-warp shuffles. */
#include "cuda_attn_common.h"

/* ---------------- forward ---------------- */
template <int D, int BQ, int BK>
__global__ void __launch_bounds__(NT) k_attn_fwd(float *o, float *lse, const float *q, attn_params p) {
    constexpr int RM = BQ / 16, CN = BK / 16, ON = D / 16;
    extern __shared__ float smem[];
    float *Qs = smem, *Ks = Qs + BQ * (D + 1), *Vs = Ks + BK * (D + 1), *Ps = Vs + BK * (D + 1);
    const int2 bi = p.blk[blockIdx.x];
    const seq_meta sm = p.seq[bi.x];
    const int h = blockIdx.y, kvh = h / (p.nh / p.nkv), tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    const float slope = vc_attn_slope(p, h);
    const int64_t qb = bi.y, nr = sm.qlen - qb < BQ ? sm.qlen - qb : BQ, pos0 = sm.kvlen - sm.qlen + qb;
    const int64_t qstride = (int64_t)p.nh * p.hd, ostride = (int64_t)p.nh * p.dv;
    load_tile<D>(Qs, q + (sm.q0 + qb) * qstride + (int64_t)h * p.hd, qstride, (int)nr, BQ, p.hd);
    int64_t j0, j1;
    vc_attn_key_range(p, sm.kvlen, pos0, nr, &j0, &j1);
    float m[RM], l[RM], acc[RM][ON];
    #pragma unroll
    for (int i = 0; i < RM; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
        #pragma unroll
        for (int c = 0; c < ON; c++) acc[i][c] = 0;
    }
    for (int64_t kb = j0; kb < j1; kb += BK) {
        int nk = (int)(j1 - kb < BK ? j1 - kb : BK);
        __syncthreads();
        load_tile<D>(Ks, sm.k + kb * p.kstride + (int64_t)kvh * p.hd, p.kstride, nk, BK, p.hd);
        load_tile<D>(Vs, sm.v + kb * p.vstride + (int64_t)kvh * p.dv, p.vstride, nk, BK, p.dv);
        __syncthreads();
        float s[RM][CN];
        #pragma unroll
        for (int i = 0; i < RM; i++)
            #pragma unroll
            for (int j = 0; j < CN; j++) s[i][j] = 0;
#pragma unroll 4
        for (int d = 0; d < D; d++) {
            float qv[RM], kv[CN];
            #pragma unroll
            for (int i = 0; i < RM; i++) qv[i] = Qs[(tr + 16 * i) * (D + 1) + d];
            #pragma unroll
            for (int j = 0; j < CN; j++) kv[j] = Ks[(tc + 16 * j) * (D + 1) + d];
            #pragma unroll
            for (int i = 0; i < RM; i++)
                #pragma unroll
                for (int j = 0; j < CN; j++) s[i][j] += qv[i] * kv[j];
        }
        #pragma unroll
        for (int i = 0; i < RM; i++) {
            int64_t pos = pos0 + tr + 16 * i;
            float mx = -INFINITY;
            #pragma unroll
            for (int j = 0; j < CN; j++) {
                int64_t key = kb + tc + 16 * j;
                s[i][j] = (key < j1 && vc_attn_visible(p, sm, pos, key)) ? vc_attn_score(p, s[i][j], slope, pos, key) : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            float mn = fmaxf(m[i], mx), sum = 0;
            float corr = mn == -INFINITY ? 1.0f : expf(m[i] - mn);
            #pragma unroll
            for (int j = 0; j < CN; j++) {
                float e = mn == -INFINITY ? 0.0f : expf(s[i][j] - mn);
                Ps[(tr + 16 * i) * (BK + 1) + tc + 16 * j] = e;
                sum += e;
            }
            for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            l[i] = l[i] * corr + sum;
            m[i] = mn;
            #pragma unroll
            for (int c = 0; c < ON; c++) acc[i][c] *= corr;
        }
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < BK; k++) {
            float vv[ON];
            #pragma unroll
            for (int c = 0; c < ON; c++) vv[c] = Vs[k * (D + 1) + tc + 16 * c];
            #pragma unroll
            for (int i = 0; i < RM; i++) {
                float pv = Ps[(tr + 16 * i) * (BK + 1) + k];
                #pragma unroll
                for (int c = 0; c < ON; c++) acc[i][c] += pv * vv[c];
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < RM; i++) {
        int r = tr + 16 * i;
        if (r >= nr) continue;
        int64_t row = sm.q0 + qb + r;
        float sf = vc_attn_sink_fold(p, h, &m[i], &l[i]);
        float inv = l[i] > 0 ? sf / l[i] : 0.0f;
        #pragma unroll
        for (int c = 0; c < ON; c++) {
            int col = tc + 16 * c;
            if (col < p.dv) o[row * ostride + (int64_t)h * p.dv + col] = acc[i][c] * inv;
        }
        if (lse && tc == 0) lse[row * p.nh + h] = l[i] > 0 ? m[i] + logf(l[i]) : -INFINITY;
    }
}

/* ---------------- host side ---------------- */
int vc_cu_attn_check(const vc_attn_desc *d, const char *op) {
    const char *why = NULL;
    if (d->n_head <= 0 || d->n_kv_head <= 0 || d->n_head % d->n_kv_head) why = "n_head must be a multiple of n_kv_head";
    else if (d->head_dim > 512 || d->v_head_dim > 512 || d->head_dim <= 0 || d->v_head_dim <= 0)
        why = "head_dim and v_head_dim must be in 1..512";
    if (!why) return 1;
    char what[200];
    snprintf(what, sizeof what, "%s (%d heads, %d kv heads, dims %d/%d)", why, d->n_head, d->n_kv_head, d->head_dim,
             d->v_head_dim);
    vc_cu_fail(VC_ERR_UNSUPPORTED, op, what);
    return 0;
}

/* a block's work, roughly: the keys its queries see (by queries) or the queries that see its keys (by keys) */
struct blk_order {
    int64_t work;
    int s, r;
};
static int64_t blk_work(const vc_attn_desc *d, const vc_cu_attn_seq *sm, int64_t r, int rows, int by_keys) {
    const int64_t off = sm->kvlen - sm->qlen;
    int64_t w;
    if (by_keys) w = d->causal ? sm->qlen - (r - off > 0 ? r - off : 0) : sm->qlen;
    else w = d->causal ? (off + r + rows < sm->kvlen ? off + r + rows : sm->kvlen) : sm->kvlen;
    if (d->window > 0 && w > d->window + rows) w = d->window + rows;
    return w > 0 ? w : 0;
}
static int blk_cmp(const void *a, const void *b) { /* the most work first; ties in (sequence, row) order */
    const blk_order *x = (const blk_order *)a, *y = (const blk_order *)b;
    if (x->work != y->work) return x->work > y->work ? -1 : 1;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}
/* The block list longest first: under a causal mask a sequence's blocks differ up to its tile count times in work
 * (the last query tile sees every key tile, the first one), and in (sequence, row) order each head's run of blocks
 * ended on its last sequence's longest, a tail the other multiprocessors waited out. Longest first, the short ones
 * fill in behind. Each block's work is its own: the same bits in any order (tested). VERLC_CUDA_ATTN_ORDER=0 (read
 * per call): (sequence, row) order. */
static void blk_sort(const vc_attn_desc *d, const vc_cu_attn_seq *sm, int2 *bl, int64_t nb, int rows, int by_keys) {
    const char *e = getenv("VERLC_CUDA_ATTN_ORDER");
    if ((e && *e == '0') || nb < 2) return;
    blk_order *o = (blk_order *)malloc((size_t)nb * sizeof *o);
    if (!o) return; /* (sequence, row) order: the same results */
    for (int64_t i = 0; i < nb; i++) o[i] = blk_order{ blk_work(d, &sm[bl[i].x], bl[i].y, rows, by_keys), bl[i].x, bl[i].y };
    qsort(o, (size_t)nb, sizeof *o, blk_cmp);
    for (int64_t i = 0; i < nb; i++) bl[i] = make_int2(o[i].s, o[i].r);
    free(o);
}

void *vc_cu_attn_meta(const vc_attn_desc *d, int rows, int by_keys, const vc_cu_attn_seq **seq, const int2 **blk,
                      int64_t *nblk, const char *op) {
    int64_t nb = 0;
    for (int s = 0; s < d->n_seq; s++) {
        int64_t n = by_keys ? d->kv_len[s] : d->q_start[s + 1] - d->q_start[s];
        if (!by_keys && n < d->min_q_rows) continue;
        nb += (n + rows - 1) / rows;
    }
    size_t meta_bytes = (size_t)d->n_seq * sizeof(vc_cu_attn_seq), bytes = meta_bytes + (size_t)nb * sizeof(int2);
    char *h = (char *)malloc(bytes ? bytes : 1);
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the host block table");
        return NULL;
    }
    vc_cu_attn_seq *sm = (vc_cu_attn_seq *)h;
    int2 *bl = (int2 *)(h + meta_bytes);
    int64_t b = 0;
    for (int s = 0; s < d->n_seq; s++) {
        sm[s].q0 = d->q_start[s];
        sm[s].qlen = d->q_start[s + 1] - d->q_start[s];
        sm[s].kvlen = d->kv_len[s];
        sm[s].k = d->k_seq[s];
        sm[s].v = d->v_seq[s];
        sm[s].dk = d->dk_seq ? d->dk_seq[s] : NULL;
        sm[s].dv = d->dv_seq ? d->dv_seq[s] : NULL;
        int64_t n = by_keys ? sm[s].kvlen : sm[s].qlen;
        if (!by_keys && n < d->min_q_rows) continue; /* the paged prefill's decode rows: another kernel's */
        for (int64_t r = 0; r < n; r += rows) bl[b++] = make_int2(s, (int)r);
    }
    blk_sort(d, sm, bl, nb, rows, by_keys);
    char *dev = (char *)vc_cu_upload(h, bytes, op);
    free(h);
    if (!dev) return NULL;
    *seq = (const vc_cu_attn_seq *)dev;
    *blk = (const int2 *)(dev + meta_bytes);
    *nblk = nb;
    return dev;
}

/* the launch metadata (vc_cu_attn_meta) and the scalar parameters */
void *vc_cu_attn_upload_meta(const vc_attn_desc *d, int rows, int by_keys, attn_params *p, int64_t *nblk,
                             const char *op) {
    void *dev = vc_cu_attn_meta(d, rows, by_keys, &p->seq, &p->blk, nblk, op);
    if (!dev) return NULL;
    p->nh = d->n_head;
    p->nkv = d->n_kv_head;
    p->hd = d->head_dim;
    p->dv = d->v_head_dim;
    p->kstride = d->k_stride;
    p->vstride = d->v_stride;
    p->scale = d->scale;
    p->cap = d->softcap;
    p->window = d->window;
    p->causal = d->causal;
    p->alibi = d->alibi;
    p->alibi_scale = d->alibi_scale ? d->alibi_scale : 1.0f;
    p->chunk = d->chunk;
    p->sinks = d->sinks;
    p->sel = d->sel;
    p->sel_words = d->sel_words;
    p->D = NULL;
    p->kmir = p->vmir = NULL;
    p->kbase = p->vbase = NULL;
    p->qmir = p->omir = NULL;
    p->split = 1;
    p->dkp = p->dvp = NULL;
    const char *w = getenv("VERLC_CUDA_ATTN_WHOLE");
    p->plain = !(w && *w == '0') && p->cap <= 0 && !p->alibi && !p->sel;
    return dev;
}

int vc_cu_attn_bucket(const vc_attn_desc *d) {
    int m = d->head_dim > d->v_head_dim ? d->head_dim : d->v_head_dim;
    return m <= 64 ? 64 : m <= 128 ? 128 : m <= 256 ? 256 : 512; /* 512: Gemma 4's full layers */
}

template <int D, int BQ, int BK>
static void launch_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    size_t sh = (size_t)(BQ * (D + 1) + 2 * BK * (D + 1) + BQ * (BK + 1)) * sizeof(float);
    vc_cu_attn_launch(k_attn_fwd<D, BQ, BK>, d, BQ, 0, d->n_head, NT, sh, NULL, op, o, lse, q);
}

void vc_cu_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d) {
    const char *op = "attention forward";
    if (d->page_tokens > 0) { /* refills its page table even when a graph replays the kernel */
        if (vc_cu_begin_io(op) && vc_cu_attn_check(d, op) && d->n_seq > 0) vc_cu_attn_fwd_paged(o, lse, q, d, op);
        return;
    }
    if (!vc_cu_begin(op) || !vc_cu_attn_check(d, op) || d->n_seq <= 0) return;
    vc_cu_attn_fwd_flat(o, lse, q, d, op);
}

void vc_cu_attn_fwd_flat(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op) {
    if (vc_cu_attn_tc_eligible(d)) {
        vc_cu_attn_fwd_tc(o, lse, q, d, op);
        return;
    }
    switch (vc_cu_attn_bucket(d)) {
    case 64: launch_fwd<64, 64, 64>(o, lse, q, d, op); break;
    case 128: launch_fwd<128, 64, 64>(o, lse, q, d, op); break;
    case 256: launch_fwd<256, 64, 32>(o, lse, q, d, op); break;
    default: launch_fwd<512, 32, 16>(o, lse, q, d, op); break;
    }
}
