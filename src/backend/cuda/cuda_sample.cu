/* The CUDA sampling entry (semantics in src/tensor/backend.h, sample_rows): the rollout engine's
 * logits stay on the device; only tokens and log-probs go back. Every row is sampled on the device.
 *
 * One block per row, fixed-order reductions (deterministic run to run):
 *  - argmax (lowest id on ties; float4 loads) and the raw log-sum-exp: float max, double sum of exp(z - max);
 *    the max of x = z / T is max / T exactly (division by T > 0 keeps the order: no pass of its own);
 *  - greedy rows take the argmax (lps 0);
 *  - the plain temperature case, optionally with min-p (top_k off, top_p >= 1: verl's default) samples
 *    by inverse CDF over kept token ids in id order (k_sample): in one pass over the row each warp sums
 *    w = exp((double)(z/T - xmax)) over a contiguous segment of ids (its lanes strided through it, coalesced;
 *    a fixed butterfly) and the log-sum-exp's exp(z - max) beside it (the same numbers when T is 1: one exp),
 *    thread 0 scans the 16 segment sums in double (fixed order); the segment that crosses u * total is cut
 *    into 16 chunks, a warp sums each, thread 0 scans them from the segment's start, and the crossing chunk's
 *    warp walks it 32 ids at a time with a warp scan; none crossing (rounding): the last kept token before.
 *  - rows with top-k or top-p (visiting order: probability descending, id ascending; k_sample_sorted):
 *    the candidates are the top k (the k-th largest key x = z/T found exactly by a 4-pass radix select
 *    on the order-preserving bit pattern of x, -0 folded onto +0; ties at the threshold taken in id
 *    order) or, top-p only, the CPU entry's prefilter (w >= 1e-7 when those hold top_p of the mass,
 *    else all V); they are compacted in id order into per-row global scratch, sorted by a stable block
 *    LSD radix sort on the descending key (so ties stay in id order), and P[i] = running sum of w in
 *    that order is formed in double (chunked: thread 0 scans the chunk sums). The nucleus is the
 *    shortest prefix with P >= top_p * P[n-1], min-p keeps the prefix with w >= min_p (w does not
 *    increase along the order), the draw is the first kept i with P[i] > u * P[m-1] (binary search),
 *    else the last kept token; nothing kept (min_p > 1): the argmax, lps 0, as the CPU entry.
 *    Scratch: 16 bytes per candidate slot (k for top-k rows, V otherwise); rows are launched in groups
 *    that fit SORT_BUDGET bytes.
 * Where the device result can differ from the CPU entry: the device's double exp may differ from
 * glibc's by an ulp, and with more candidates (or ids) than threads the totals and running sums are
 * formed in a different order (chunk sums instead of one sequential sum; with at most NT sorted
 * candidates the order is the CPU's exactly). So a draw whose u * total lies within ~1e-15 (relative)
 * of a CDF boundary may pick the neighbouring kept token, and a nucleus whose top_p * total lies
 * within ~1e-15 of a prefix sum (or a prefilter whose mass test is that close) may keep one token
 * more or less; lp differs only by the log-sum-exp's summation order (~1e-7 rel), lps by ~1e-12 rel.
 * Greedy tokens and the top-k candidate sets are identical (exact comparisons). Not supported (as on
 * the CPU, where the result is arbitrary too): NaN logits and rows whose logits are all -inf. */
#include "cuda_internal.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" void vc_cu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                                  const vc_sample_row *rows, const float *u);

#define NT 512
#define NW (NT / 32)

struct dev_row {
    float temperature, min_p;
    int32_t greedy, row, first, n;
};

/* block reduction of (value, id): larger value wins, lowest id on ties; result in v[0], id[0] */
__device__ static void block_argmax(float *v, int *id) {
    for (int s = NT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float a = v[threadIdx.x], b = v[threadIdx.x + s];
            int ia = id[threadIdx.x], ib = id[threadIdx.x + s];
            if (b > a || (b == a && ib < ia) || (a != a && b == b)) {
                v[threadIdx.x] = b;
                id[threadIdx.x] = ib;
            }
        }
        __syncthreads();
    }
}

__device__ static void block_sum(double *d) {
    for (int s = NT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) d[threadIdx.x] += d[threadIdx.x + s];
        __syncthreads();
    }
}

__device__ static bool kept(double w, float min_p) { return !(min_p > 0) || w >= (double)min_p; }

/* argmax of a row's logits (lowest id on ties) and its value, by the block: float4 loads when the row is on a
 * 16-byte boundary, several in flight a thread */
__device__ static void row_argmax(const float *z, int64_t V, float *sv, int *si, float *zmax, int *amax) {
    const int t = threadIdx.x;
    float m = -INFINITY;
    int best = INT_MAX;
    int64_t v0 = 0;
    if ((reinterpret_cast<uintptr_t>(z) & 15) == 0) {
        const float4 *z4 = reinterpret_cast<const float4 *>(z);
        const int64_t V4 = V / 4;
#pragma unroll 4
        for (int64_t i = t; i < V4; i += NT) {
            const float4 x = z4[i];
            const int v = (int)(4 * i);
            if (x.x > m) m = x.x, best = v;
            if (x.y > m) m = x.y, best = v + 1;
            if (x.z > m) m = x.z, best = v + 2;
            if (x.w > m) m = x.w, best = v + 3;
        }
        v0 = 4 * V4; /* the last V % 4 ids: larger than every id above, so a thread's ids still ascend */
    }
    for (int64_t v = v0 + t; v < V; v += NT)
        if (z[v] > m) m = z[v], best = (int)v;
    sv[t] = m;
    si[t] = best;
    __syncthreads();
    block_argmax(sv, si);
    *zmax = sv[0];
    *amax = si[0] == INT_MAX ? 0 : si[0];
    __syncthreads();
}

/* argmax of the raw logits (lowest id on ties), its value and their log-sum-exp, as the CPU entry */
__device__ static void row_stats(const float *z, int64_t V, float *sv, int *si, double *sd, int *amax, float *zmax,
                                 float *lse) {
    const int t = threadIdx.x;
    row_argmax(z, V, sv, si, zmax, amax);
    double s = 0;
    for (int64_t v = t; v < V; v += NT) s += exp((double)(z[v] - *zmax));
    sd[t] = s;
    __syncthreads();
    block_sum(sd);
    *lse = *zmax + (float)log(sd[0]);
    __syncthreads();
}

/* the sums of a warp's ids [s0, s1), its lanes strided through them, reduced by a fixed
 * butterfly (4 loads in flight): e = exp(z - zmax) over all (the log-sum-exp's terms) and, unless greedy, the kept weights
 * w = exp(z / T - xmax) (the same numbers as e when T is 1); *last: the last kept id (-1: none) */
__device__ static void warp_sums(const float *z, int64_t s0, int64_t s1, float zmax, float T, float xmax, float min_p,
                                 bool greedy, double *ce, double *cw, int *last) {
    const int lane = threadIdx.x % 32;
    const bool same = T == 1.0f;
    double se = 0, sw = 0;
    int l = -1;
#pragma unroll 4
    for (int64_t v = s0 + lane; v < s1; v += 32) {
        const float zv = z[v];
        const double e = exp((double)(zv - zmax));
        se += e;
        if (greedy) continue;
        const double wt = same ? e : exp((double)(zv / T - xmax));
        if (kept(wt, min_p)) sw += wt, l = (int)v;
    }
    *ce = __shfl_sync(0xffffffffu, vc_warp_sum_d(se), 0);
    *cw = __shfl_sync(0xffffffffu, vc_warp_sum_d(sw), 0);
    for (int o = 16; o > 0; o >>= 1) l = max(l, __shfl_xor_sync(0xffffffffu, l, o));
    *last = l;
}

/* thread 0: exclusive and inclusive running sums of x[0..NW) from `start`, in order; the last id >= 0 of li */
__device__ static int scan_segments(const double *x, const int *li, double start, double *ex, double *in) {
    double run = start;
    int l = -1;
    for (int i = 0; i < NW; i++) {
        ex[i] = run;
        run += x[i];
        in[i] = run;
        l = li[i] >= 0 ? li[i] : l;
    }
    return l;
}

/* the draw's token in the ids [c0, c1) whose kept weights begin at running sum `run` (the crossing warp: 32 ids
 * at a time in id order, a warp scan of the kept weights): the first id whose running sum passes goal; -1 if
 * rounding leaves none */
__device__ static int walk_chunk(const float *z, int64_t c0, int64_t c1, float T, float xmax, float min_p, double run,
                                 double goal) {
    const int lane = threadIdx.x % 32;
    for (int64_t b = c0; b < c1; b += 32) {
        const int64_t v = b + lane;
        double wt = 0;
        if (v < c1) {
            wt = exp((double)(z[v] / T - xmax));
            if (!kept(wt, min_p)) wt = 0;
        }
        double incl = wt;
        for (int o = 1; o < 32; o <<= 1) {
            double y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        const unsigned hit = __ballot_sync(0xffffffffu, v < c1 && wt > 0 && run + incl > goal);
        if (hit) return (int)(b + __ffs(hit) - 1);
        run += __shfl_sync(0xffffffffu, incl, 31);
    }
    return -1;
}

__global__ static void k_sample(int32_t *tok, float *lp, float *lps, const float *logits, int64_t V,
                                const dev_row *rows, const float *u) {
    __shared__ float sv[NT];
    __shared__ int si[NT];
    __shared__ double se[NW], sw[NW], ex[NW], in[NW], cex[NW], cin[NW];
    __shared__ int sl[NW], s_tok, s_last, s_seg, s_chunk;
    const dev_row q = rows[blockIdx.x];
    const float *z = logits + (int64_t)q.row * V;
    const int t = threadIdx.x, w = t / 32, lane = t % 32;
    int amax;
    float zmax;
    row_argmax(z, V, sv, si, &zmax, &amax);
    /* x = z / T and its max (division by T > 0 keeps the order: the max is zmax / T); one pass over NW contiguous
     * segments of ids, a warp each, for the log-sum-exp's sum and the kept weights' */
    const float T = q.temperature > 0 ? q.temperature : 1.0f, xmax = zmax / T;
    const int64_t seg = (V + NW - 1) / NW, s0 = (int64_t)w * seg, s1 = s0 + seg < V ? s0 + seg : V;
    double ce, cw;
    int last;
    warp_sums(z, s0, s1 < s0 ? s0 : s1, zmax, T, xmax, q.min_p, q.greedy, &ce, &cw, &last);
    if (lane == 0) {
        se[w] = ce;
        sw[w] = cw;
        sl[w] = last;
    }
    __syncthreads();
    if (t == 0) {
        double tot = 0;
        for (int i = 0; i < NW; i++) tot += se[i];
        sv[0] = zmax + (float)log(tot);
        s_last = scan_segments(sw, sl, 0.0, ex, in);
    }
    __syncthreads();
    const float lse = sv[0];
    if (q.greedy) {
        for (int d = t; d < q.n; d += NT) {
            tok[q.first + d] = amax;
            lp[q.first + d] = z[amax] - lse;
            lps[q.first + d] = 0.0f;
        }
        return;
    }
    const double total = in[NW - 1];
    for (int d = 0; d < q.n; d++) {
        const double goal = (double)u[q.first + d] * total;
        if (t == 0) {
            int c = -1;
            for (int i = 0; i < NW && c < 0; i++)
                if (in[i] > goal) c = i;
            s_seg = s_last >= 0 ? c : -1;
            s_tok = s_last;
        }
        __syncthreads();
        const int c = s_seg;
        if (c >= 0) { /* the crossing segment, NW chunks of it a warp each, then the crossing chunk walked */
            const int64_t a0 = (int64_t)c * seg, a1 = a0 + seg < V ? a0 + seg : V, ch = (a1 - a0 + NW - 1) / NW;
            const int64_t c0 = a0 + w * ch < a1 ? a0 + w * ch : a1, c1 = c0 + ch < a1 ? c0 + ch : a1;
            warp_sums(z, c0, c1, zmax, T, xmax, q.min_p, false, &ce, &cw, &last);
            if (lane == 0) {
                se[w] = cw;
                sl[w] = last;
            }
            __syncthreads();
            if (t == 0) {
                scan_segments(se, sl, ex[c], cex, cin);
                int k = -1;
                for (int i = 0; i < NW && k < 0; i++)
                    if (cin[i] > goal) k = i;
                s_chunk = k;
                for (int i = NW - 1; i >= 0 && k < 0; i--) /* rounding at the segment's end: its last kept token */
                    if (sl[i] >= 0) {
                        s_tok = sl[i];
                        break;
                    }
            }
            __syncthreads();
            if (w == s_chunk) {
                const int pick = walk_chunk(z, c0, c1, T, xmax, q.min_p, cex[w], goal);
                if (lane == 0) s_tok = pick >= 0 ? pick : sl[w]; /* rounding at the chunk's end: its last kept */
            }
        }
        __syncthreads();
        if (t == 0) {
            int k = s_tok;
            if (k < 0) { /* nothing kept: the argmax, as the CPU entry */
                tok[q.first + d] = amax;
                lps[q.first + d] = 0.0f;
                k = amax;
            } else {
                double wk = exp((double)(z[k] / T - xmax));
                tok[q.first + d] = k;
                lps[q.first + d] = (float)log(wk / total);
            }
            lp[q.first + d] = z[k] - lse;
        }
        __syncthreads();
    }
}

/* ---- rows with top-k / top-p: candidates sorted by (x desc, id asc) ---- */
#define SORT_BUDGET ((size_t)256 << 20) /* scratch bytes per launch group */
#define TAU 1e-7                        /* the CPU entry's top-p prefilter */

struct sort_row {
    float temperature, top_p, min_p;
    int32_t top_k; /* 0: off */
    int32_t row, first, n, cap;
    int64_t off; /* byte offset of the row's scratch: 16 * cap bytes */
};

struct sort_smem {
    float sv[NT];
    int si[NT];
    double sd[NT], ex[NT];
    unsigned cnt[256], base[256];
    unsigned wc[NW][256];
    int wsum[NW];
    unsigned prefix, need;
    int skip, m;
};

/* x -> key whose ascending order is x descending; -0 and +0 share a key (they compare equal) */
__device__ static unsigned desc_key(float x) {
    unsigned b = x == 0.0f ? 0u : __float_as_uint(x);
    unsigned ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ~ord;
}

__device__ static double weight(const float *z, int64_t v, float T, float xmax) {
    return exp((double)(z[v] / T - xmax));
}

/* exclusive block scan of a 0/1 flag in thread order; *total: the block's count. Every thread calls. */
__device__ static int block_scan_flag(int f, int *wsum, int *total) {
    const unsigned b = __ballot_sync(0xffffffffu, f);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) wsum[w] = __popc(b);
    __syncthreads();
    int off = 0, tot = 0;
    for (int i = 0; i < NW; i++) {
        off += i < w ? wsum[i] : 0;
        tot += wsum[i];
    }
    __syncthreads();
    *total = tot;
    return off + __popc(b & ((1u << lane) - 1u));
}

/* the k-th smallest key (1 <= k < V) in s->prefix, and in s->need how many tokens with that key are
 * among the k smallest (the first ones by id) */
__device__ static void select_kth(sort_smem *s, const float *z, int64_t V, float T, unsigned k) {
    const int t = threadIdx.x;
    unsigned prefix = 0, hi = 0, rem = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = t; i < 256; i += NT) s->cnt[i] = 0;
        __syncthreads();
        for (int64_t v = t; v < V; v += NT) {
            unsigned kd = desc_key(z[v] / T);
            if ((kd & hi) == prefix) atomicAdd(&s->cnt[(kd >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (t == 0) {
            unsigned c = 0, b = 0;
            for (; b < 255; b++) {
                if (c + s->cnt[b] >= rem) break;
                c += s->cnt[b];
            }
            s->prefix = prefix | (b << shift);
            s->need = rem - c;
        }
        __syncthreads();
        prefix = s->prefix;
        rem = s->need;
        hi |= 255u << shift;
        __syncthreads();
    }
}

/* compacts the candidates in id order into keys / ids (at most cap); mode 0: the top k (keys below
 * s->prefix, and the first s->need equal to it), 1: w >= TAU, 2: all. Returns the count. */
__device__ static int gather(sort_smem *s, const float *z, int64_t V, float T, float xmax, int mode, unsigned *keys,
                             int *ids, int cap) {
    const int t = threadIdx.x;
    const unsigned kt = s->prefix, need = s->need;
    int n = 0, tot;
    unsigned eq_run = 0;
    for (int64_t b = 0; b < V; b += NT) {
        const int64_t v = b + t;
        const bool in = v < V;
        const float x = in ? z[v] / T : 0.0f;
        const unsigned kd = desc_key(x);
        int take;
        if (mode == 0) {
            const int eq = in && kd == kt;
            const unsigned r = (unsigned)block_scan_flag(eq, s->wsum, &tot);
            take = in && (kd < kt || (eq && eq_run + r < need));
            eq_run += (unsigned)tot;
        } else
            take = in && (mode == 2 || exp((double)(x - xmax)) >= TAU);
        const int pos = n + block_scan_flag(take, s->wsum, &tot);
        if (take && pos < cap) {
            keys[pos] = kd;
            ids[pos] = (int)v;
        }
        n += tot;
    }
    return n < cap ? n : cap;
}

/* one stable counting pass on bits [shift, shift + 8) from (ki, ii) to (ko, io); 0 when skipped (all
 * keys share the digit: the data stay where they are) */
__device__ static int sort_pass(sort_smem *s, const unsigned *ki, const int *ii, unsigned *ko, int *io, int n,
                                int shift) {
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    for (int i = t; i < 256; i += NT) s->cnt[i] = 0;
    __syncthreads();
    for (int i = t; i < n; i += NT) atomicAdd(&s->cnt[(ki[i] >> shift) & 255u], 1u);
    __syncthreads();
    if (t == 0) {
        unsigned run = 0;
        s->skip = 0;
        for (int b = 0; b < 256; b++) {
            s->base[b] = run;
            run += s->cnt[b];
            s->skip |= s->cnt[b] == (unsigned)n;
        }
    }
    __syncthreads();
    if (s->skip) return 0;
    for (int b0 = 0; b0 < n; b0 += NT) {
        const int i = b0 + t;
        const bool in = i < n;
        const unsigned k = in ? ki[i] : 0u;
        const int d = in ? (int)((k >> shift) & 255u) : 256;
        for (int j = t; j < NW * 256; j += NT) (&s->wc[0][0])[j] = 0;
        __syncthreads();
        const unsigned peers = __match_any_sync(0xffffffffu, d), lt = peers & ((1u << lane) - 1u);
        if (in && lt == 0) s->wc[w][d] = (unsigned)__popc(peers);
        __syncthreads();
        if (in) {
            unsigned off = s->base[d] + (unsigned)__popc(lt);
            for (int j = 0; j < w; j++) off += s->wc[j][d];
            ko[off] = k;
            io[off] = ii[i];
        }
        __syncthreads();
        if (t < 256) {
            unsigned add = 0;
            for (int j = 0; j < NW; j++) add += s->wc[j][t];
            s->base[t] += add;
        }
        __syncthreads();
    }
    return 1;
}

/* P[i] = sum of the weights of ids[0..i] in that order (double; chunked by thread, fixed order) */
__device__ static void prefix_sums(sort_smem *s, double *P, const int *ids, int n, const float *z, float T,
                                   float xmax) {
    const int t = threadIdx.x;
    const int64_t chunk = (n + NT - 1) / NT, c0 = t * chunk, c1 = c0 + chunk < n ? c0 + chunk : n;
    double cs = 0;
    for (int64_t i = c0; i < c1; i++) cs += weight(z, ids[i], T, xmax);
    s->sd[t] = cs;
    __syncthreads();
    if (t == 0) {
        double run = 0;
        for (int i = 0; i < NT; i++) {
            s->ex[i] = run;
            run += s->sd[i];
        }
    }
    __syncthreads();
    double c = s->ex[t];
    for (int64_t i = c0; i < c1; i++) {
        c += weight(z, ids[i], T, xmax);
        P[i] = c;
    }
    __syncthreads();
}

/* kept prefix length after the top-p and min-p cuts (thread 0) */
__device__ static int kept_count(const sort_row &q, const double *P, const int *ids, int n, const float *z, float T,
                                 float xmax) {
    int m = n;
    if (q.top_p > 0 && q.top_p < 1) { /* first i with P[i] >= goal, +1 */
        const double goal = (double)q.top_p * P[n - 1];
        int lo = 0, hi = n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (P[mid] >= goal) hi = mid;
            else lo = mid + 1;
        }
        m = lo < n ? lo + 1 : n;
    }
    if (q.min_p > 0) { /* first i with w < min_p */
        int lo = 0, hi = m;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (weight(z, ids[mid], T, xmax) < (double)q.min_p) hi = mid;
            else lo = mid + 1;
        }
        m = lo;
    }
    return m;
}

__global__ static void k_sample_sorted(int32_t *tok, float *lp, float *lps, const float *logits, int64_t V,
                                       const sort_row *rows, const float *u, char *scratch) {
    __shared__ sort_smem s;
    const sort_row q = rows[blockIdx.x];
    const float *z = logits + (int64_t)q.row * V;
    const int t = threadIdx.x;
    char *base = scratch + q.off;
    unsigned *ka = (unsigned *)base, *kb = ka + q.cap;
    double *P = (double *)base; /* reuses the key buffers once sorted */
    int *ia = (int *)(base + (size_t)8 * q.cap), *ib = ia + q.cap;
    int amax;
    float zmax, lse;
    row_stats(z, V, s.sv, s.si, s.sd, &amax, &zmax, &lse);
    const float T = q.temperature > 0 ? q.temperature : 1.0f;
    const float xmax = zmax / T; /* the max of z / T: division by T > 0 keeps the order */
    int mode = 0;
    if (q.top_k > 0) select_kth(&s, z, V, T, (unsigned)q.top_k);
    else { /* top-p only: the prefilter holds the nucleus when it holds top_p of the mass */
        double all = 0, above = 0;
        for (int64_t v = t; v < V; v += NT) {
            double w = weight(z, v, T, xmax);
            all += w;
            above += w >= TAU ? w : 0.0;
        }
        s.sd[t] = all;
        s.ex[t] = above;
        __syncthreads();
        block_sum(s.sd);
        block_sum(s.ex);
        mode = s.ex[0] < (double)q.top_p * s.sd[0] ? 2 : 1;
        __syncthreads();
    }
    const int n = gather(&s, z, V, T, xmax, mode, ka, ia, q.cap);
    __syncthreads();
    for (int shift = 0; shift < 32; shift += 8)
        if (sort_pass(&s, ka, ia, kb, ib, n, shift)) {
            unsigned *tk = ka;
            int *ti = ia;
            ka = kb, ia = ib, kb = tk, ib = ti;
        }
    const int *ids = ia;
    if (n > 0) prefix_sums(&s, P, ids, n, z, T, xmax);
    if (t != 0) return;
    const int m = n > 0 ? kept_count(q, P, ids, n, z, T, xmax) : 0;
    const double total = m > 0 ? P[m - 1] : 0.0;
    for (int d = q.first; d < q.first + q.n; d++) {
        int k = amax;
        float ls = 0.0f;
        if (m > 0) { /* first i < m - 1 with P[i] > goal, else m - 1 */
            const double goal = (double)u[d] * total;
            int lo = 0, hi = m - 1;
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                if (P[mid] > goal) hi = mid;
                else lo = mid + 1;
            }
            k = ids[lo];
            ls = (float)log(weight(z, k, T, xmax) / total);
        }
        tok[d] = k;
        lp[d] = z[k] - lse;
        lps[d] = ls;
    }
}

static bool on_device_plain(const vc_sample_row *r, int64_t V) {
    return r->greedy || (!(r->top_k > 0 && r->top_k < V) && !(r->top_p > 0 && r->top_p < 1));
}

static void launch_plain(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                         const vc_sample_row *rows, const float *du, int64_t nd, const char *op) {
    dev_row *h = (dev_row *)malloc((size_t)nd * sizeof *h);
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "host row descriptors");
        return;
    }
    int64_t k = 0;
    for (int64_t r = 0; r < R; r++)
        if (on_device_plain(&rows[r], V))
            h[k++] = dev_row{ rows[r].temperature, rows[r].min_p, rows[r].greedy, (int32_t)r, rows[r].first,
                              rows[r].n };
    dev_row *dr = (dev_row *)vc_cu_upload(h, (size_t)nd * sizeof *h, op);
    free(h);
    if (dr) {
        k_sample<<<(unsigned)nd, NT, 0, vc_cu_stream()>>>(tok, lp, lps, logits, V, dr, du);
        vc_cu_end(op);
    }
    vc_cu_scratch_free(dr);
}

/* one group of sorted rows h[0..n) whose scratch (h[n-1].off - h[0].off + 16 * h[n-1].cap bytes) fits the
 * budget; their offsets are rebased onto the launch's scratch.
 * Out of device memory for the scratch is not a device error: the group is split in halves and retried,
 * and a single row that still gets no scratch is marked unsampled (token -1, the table's contract). */
static int launch_sorted_group(int32_t *tok, float *lp, float *lps, const float *logits, int64_t V, sort_row *h,
                               int64_t n, const float *du, const char *op) {
    int64_t base = h[0].off;
    size_t bytes = (size_t)(h[n - 1].off - base) + (size_t)16 * (size_t)h[n - 1].cap;
    char *scr = NULL;
    if (vc_cu_malloc_async((void **)&scr, bytes) != cudaSuccess) {
        cudaGetLastError();
        if (n > 1)
            return launch_sorted_group(tok, lp, lps, logits, V, h, n / 2, du, op) &&
                   launch_sorted_group(tok, lp, lps, logits, V, h + n / 2, n - n / 2, du, op);
        return vc_cu_ok(cudaMemsetAsync(tok + h[0].first, 0xff, (size_t)h[0].n * sizeof *tok, vc_cu_stream()), op);
    }
    for (int64_t i = 0; i < n; i++) h[i].off -= base; /* offsets within this launch's scratch */
    sort_row *dr = (sort_row *)vc_cu_upload(h, (size_t)n * sizeof *h, op);
    int ok = 0;
    if (dr) {
        k_sample_sorted<<<(unsigned)n, NT, 0, vc_cu_stream()>>>(tok, lp, lps, logits, V, dr, du, scr);
        ok = vc_cu_end(op);
    }
    cudaFreeAsync(scr, vc_cu_stream());
    vc_cu_scratch_free(dr);
    return ok;
}

static void launch_sorted(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                          const vc_sample_row *rows, const float *du, int64_t ns, const char *op) {
    sort_row *h = (sort_row *)malloc((size_t)ns * sizeof *h);
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "host row descriptors");
        return;
    }
    int64_t g0 = 0, k = 0, off = 0;
    for (int64_t r = 0; r < R; r++) {
        const vc_sample_row *q = &rows[r];
        if (on_device_plain(q, V)) continue;
        const int32_t top_k = q->top_k > 0 && q->top_k < V ? q->top_k : 0;
        const int32_t cap = top_k > 0 ? top_k : (int32_t)V;
        if (k > g0 && (size_t)off + (size_t)16 * (size_t)cap > SORT_BUDGET) { /* flush the group */
            if (!launch_sorted_group(tok, lp, lps, logits, V, h + g0, k - g0, du, op)) goto out;
            g0 = k;
            off = 0;
        }
        h[k++] = sort_row{ q->temperature, q->top_p, q->min_p, top_k, (int32_t)r, q->first, q->n, cap, off };
        off += (int64_t)16 * cap;
    }
    if (k > g0) launch_sorted_group(tok, lp, lps, logits, V, h + g0, k - g0, du, op);
out:
    free(h);
}

extern "C" void vc_cu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                                  const vc_sample_row *rows, const float *u) {
    const char *op = "sample_rows";
    if (!vc_cu_begin(op) || R <= 0) return;
    if (V <= 0 || V > INT_MAX) {
        vc_cu_fail(VC_ERR_ARG, op, "vocabulary size outside [1, 2^31)");
        return;
    }
    int64_t nd = 0, ns = 0, ndraw = 0;
    for (int64_t r = 0; r < R; r++) {
        ndraw = rows[r].first + rows[r].n > ndraw ? rows[r].first + rows[r].n : ndraw;
        if (on_device_plain(&rows[r], V)) nd++;
        else ns++;
    }
    float *du = (float *)vc_cu_upload(u, (size_t)(ndraw ? ndraw : 1) * sizeof(float), op);
    if (!du) return;
    if (nd > 0) launch_plain(tok, lp, lps, logits, R, V, rows, du, nd, op);
    if (ns > 0) launch_sorted(tok, lp, lps, logits, R, V, rows, du, ns, op);
    vc_cu_scratch_free(du);
}
