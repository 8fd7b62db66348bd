/* CPU attention over packed sequences: per (sequence, head, block of queries) the scores against the
 * visible keys are one GEMM, softmax runs per row, and the output is a second GEMM. Backward recomputes
 * the probabilities from the saved log-sum-exp (no [T x T] matrix is kept). Blocks are processed in a
 * fixed order so the key/value gradient sums are deterministic. */
#include "cpu.h"
#include "core/vmath.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include <float.h>
#include <math.h>
#include <string.h>

#define QBLK 128

/* visible key range [*j0, *j1) for query positions p0..p1 (inclusive) */
static void key_range(const vc_attn_desc *d, int64_t kvl, int64_t p0, int64_t p1, int64_t *j0, int64_t *j1) {
    *j1 = d->causal ? p1 + 1 : kvl;
    if (*j1 > kvl) *j1 = kvl;
    *j0 = (d->window > 0 && d->causal) ? p0 - d->window + 1 : 0;
    if (d->chunk > 0 && p0 - p0 % d->chunk > *j0) *j0 = p0 - p0 % d->chunk;
    if (*j0 < 0) *j0 = 0;
}

static inline int selected(const vc_attn_desc *d, int64_t row, int64_t j) {
    return !d->sel || (d->sel[row * d->sel_words + (j >> 5)] >> (j & 31) & 1u);
}

static inline int visible(const vc_attn_desc *d, int64_t p, int64_t j) {
    if (d->causal && j > p) return 0;
    if (d->window > 0 && p - j >= d->window) return 0;
    if (d->chunk > 0 && j < p - p % d->chunk) return 0;
    return 1;
}

/* Row-wise work between the GEMMs (mask, soft-cap, softmax, dS) runs on the pool in blocks of rows;
 * each row's arithmetic is the same whichever thread runs it. */
#define ROWS 8
typedef struct {
    float *S, *dP, *lse_out, *inv_sum;
    const float *lse, *dO, *O;
    int64_t nj, j0, pos0, nr, ostride, lse_base;
    int h;
    const vc_attn_desc *d;
} rows_ctx;

/* visible keys of row r form one interval [lo, hi] (causal upper bound, window lower bound) */
static void visible_span(const rows_ctx *c, int64_t r, int64_t *lo, int64_t *hi) {
    const vc_attn_desc *d = c->d;
    int64_t p = c->pos0 + r;
    *hi = d->causal ? p - c->j0 : c->nj - 1;
    if (*hi > c->nj - 1) *hi = c->nj - 1;
    *lo = d->window > 0 ? p - d->window + 1 - c->j0 : 0;
    if (d->chunk > 0 && p - p % d->chunk - c->j0 > *lo) *lo = p - p % d->chunk - c->j0;
    if (*lo < 0) *lo = 0;
}

static void mask_rows(void *p, int64_t blk) {
    rows_ctx *c = p;
    int64_t r1 = (blk + 1) * ROWS < c->nr ? (blk + 1) * ROWS : c->nr;
    for (int64_t r = blk * ROWS; r < r1; r++) {
        float *s = c->S + r * c->nj;
        int64_t lo, hi;
        visible_span(c, r, &lo, &hi);
        for (int64_t j = 0; j < lo; j++) s[j] = -INFINITY;
        for (int64_t j = hi + 1; j < c->nj; j++) s[j] = -INFINITY;
        if (c->d->softcap > 0)
            for (int64_t j = lo; j <= hi; j++) s[j] = c->d->softcap * tanhf(s[j] / c->d->softcap);
        for (int64_t j = lo; c->d->alibi && j <= hi; j++) s[j] += vc_alibi_bias(c->d, c->h, c->pos0 + r, c->j0 + j);
        for (int64_t j = lo; c->d->sel && j <= hi; j++) /* DeepSeek Sparse Attention: the indexer's keys only */
            if (!selected(c->d, c->lse_base + r, c->j0 + j)) s[j] = -INFINITY;
    }
}

static void softmax_rows(void *p, int64_t blk) {
    rows_ctx *c = p;
    int64_t r1 = (blk + 1) * ROWS < c->nr ? (blk + 1) * ROWS : c->nr;
    for (int64_t r = blk * ROWS; r < r1; r++) {
        float *pr = c->S + r * c->nj, m = -INFINITY, sum = 0;
        int64_t lo, hi;
        visible_span(c, r, &lo, &hi);
        float sink = c->d->sinks ? c->d->sinks[c->h] : -INFINITY; /* a key with a zero value */
        m = vc_max_f32(pr + lo, hi - lo + 1);
        m = sink > m ? sink : m;
        for (int64_t j = 0; j < lo; j++) pr[j] = 0;
        for (int64_t j = hi + 1; j < c->nj; j++) pr[j] = 0;
        vc_exp_shift(pr + lo, pr + lo, hi - lo + 1, m);
        sum = (float)vc_sum_f64(pr + lo, hi - lo + 1);
        if (c->d->sinks) sum += expf(sink - m);
        c->inv_sum[r] = 1.0f / sum; /* applied to the output rows after the PV product */
        if (c->lse_out) c->lse_out[(c->lse_base + r) * c->d->n_head + c->h] = m + logf(sum);
    }
}

static void dscore_rows(void *p, int64_t blk) {
    rows_ctx *c = p;
    const vc_attn_desc *d = c->d;
    int64_t r1 = (blk + 1) * ROWS < c->nr ? (blk + 1) * ROWS : c->nr;
    for (int64_t r = blk * ROWS; r < r1; r++) {
        float L = c->lse[(c->lse_base + r) * d->n_head + c->h], D = 0;
        for (int i = 0; i < d->v_head_dim; i++) D += c->dO[r * c->ostride + i] * c->O[r * c->ostride + i];
        float *pr = c->S + r * c->nj, *dp = c->dP + r * c->nj;
        for (int64_t j = 0; j < c->nj; j++) dp[j] -= D;
        if (d->softcap > 0) /* dS w.r.t. the scaled, uncapped score; a masked key (sc = -inf) keeps dp: p = 0 */
            for (int64_t j = 0; j < c->nj; j++) {
                float t = pr[j] / d->softcap;
                dp[j] *= pr[j] == -INFINITY ? 1.0f : 1.0f - t * t;
            }
        vc_exp_shift(pr, pr, c->nj, L); /* S now holds P; exp(-inf) = 0 for masked keys */
        for (int64_t j = 0; j < c->nj; j++) dp[j] *= pr[j]; /* dP now holds dS */
    }
}

/* scores S[r, j - j0] for queries rows q0..q0+nr of head h; applies scale, soft-cap and the mask */
static void scores(float *S, const float *q, int64_t qs, int64_t nr, int h, const float *K, int64_t j0,
                   int64_t nj, int64_t pos0, const vc_attn_desc *d) {
    int64_t qstride = (int64_t)d->n_head * d->head_dim;
    int kvh = h / (d->n_head / d->n_kv_head);
    vc_cpu_sgemm(0, 1, nr, nj, d->head_dim, d->scale, q + qs * qstride + (int64_t)h * d->head_dim, qstride,
                K + j0 * d->k_stride + (int64_t)kvh * d->head_dim, d->k_stride, 0.0f, S, nj);
    rows_ctx c = { .S = S, .nj = nj, .j0 = j0, .pos0 = pos0, .d = d, .nr = nr, .h = h, .lse_base = qs };
    vc_parallel((nr + ROWS - 1) / ROWS, mask_rows, &c);
}

/* ---- paged forward: one query row at a time, a fixed summation order per (row, head) ----
 * A task is a sequence, a kv head and a run of its query heads (all of them unless the batch is too small to
 * keep the threads busy): each key and value row is read (and converted from bf16) once for the run. */
typedef struct {
    float *o, *lse;
    const float *q;
    const vc_attn_desc *d;
    int hg, chunks; /* query heads per task, tasks per kv head */
} paged_ctx;

static inline const float *page_row(const float *const *pages, int64_t P, int64_t stride, int64_t j) {
    return pages[j / P] + (j % P) * stride;
}

/* n values of key (value) row j from column c0, as f32: the row itself, or (bf16 pages) converted into buf */
static inline const float *kv_row(const vc_attn_desc *d, const float *const *pages, int64_t stride, int64_t j,
                                  int64_t c0, int n, float *buf) {
    if (!d->kv_bf16) return page_row(pages, d->page_tokens, stride, j) + c0;
    const uint16_t *h = (const uint16_t *)pages[j / d->page_tokens] + (j % d->page_tokens) * stride + c0;
    for (int i = 0; i < n; i++) buf[i] = vc_bf16_to_f32(h[i]);
    return buf;
}

/* softmax of one head's scores S[0..n) in place (unnormalised weights), its log-sum-exp returned in *lse;
 * returns 1 / the sum */
static float paged_softmax(float *S, int64_t n, const vc_attn_desc *d, int h, float *lse) {
    float m = vc_max_f32(S, n);
    if (d->sinks && d->sinks[h] > m) m = d->sinks[h];
    vc_exp_shift(S, S, n, m);
    float sum = (float)vc_sum_f64(S, n);
    if (d->sinks) sum += vc_expf(d->sinks[h] - m);
    *lse = m + logf(sum);
    return 1.0f / sum;
}

/* the dot products of 8 keys' accumulators (8 lanes each, vc_dot_fixed's lane sums) into one vector of the 8 keys'
 * sums, each ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)) as vc_dot_fixed pairs them: the same bits */
static inline vc_f8 hsum8x8(const vc_f8 *a) {
    vc_f8 b[4], c[2];
    for (int m = 0; m < 4; m++) /* [u0..u3 of key 2m, u0..u3 of key 2m + 1], u_l = a_l + a_(l+4) */
        b[m] = __builtin_shufflevector(a[2 * m], a[2 * m + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(a[2 * m], a[2 * m + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    for (int m = 0; m < 2; m++) /* [u0 + u1, u2 + u3] of keys 4m .. 4m + 3 */
        c[m] = __builtin_shufflevector(b[2 * m], b[2 * m + 1], 0, 2, 4, 6, 8, 10, 12, 14) +
               __builtin_shufflevector(b[2 * m], b[2 * m + 1], 1, 3, 5, 7, 9, 11, 13, 15);
    return __builtin_shufflevector(c[0], c[1], 0, 2, 4, 6, 8, 10, 12, 14) +
           __builtin_shufflevector(c[0], c[1], 1, 3, 5, 7, 9, 11, 13, 15);
}

/* scores of query heads [h0, h0 + nh) against keys [j, j + nb) (nb <= 8) into S (row g at S + g n, column j - j0):
 * each vc_dot_fixed's chain, 8 keys at a time (a key's row read once for all heads) */
static void paged_scores(const vc_attn_desc *d, int s, int64_t qrow, const float *q0, int kvh, int h0, int nh,
                         int64_t pos, int64_t j, int nb, int64_t j0, int64_t n, float *S, float *buf,
                         const float *zero) {
    const float *kr[8];
    int hd = d->head_dim, full = hd & ~7, plain = !d->sel && d->softcap <= 0 && !d->alibi;
    for (int kk = 0; kk < 8; kk++)
        kr[kk] = kk < nb && selected(d, qrow, j + kk)
                     ? kv_row(d, d->k_pages[s], d->k_stride, j + kk, (int64_t)kvh * hd, hd, buf + kk * hd)
                     : zero;
    for (int g = 0; g < nh; g++) {
        const float *qh = q0 + (int64_t)(h0 + g) * hd;
        vc_f8 acc[8];
        for (int kk = 0; kk < 8; kk++) acc[kk] = vc_f8_splat(0.0f);
        for (int i = 0; i < full; i += 8) {
            vc_f8 qv = vc_f8_load(qh + i);
            for (int kk = 0; kk < 8; kk++) acc[kk] += qv * vc_f8_load(kr[kk] + i);
        }
        vc_f8 sum = hsum8x8(acc);
        if (plain && nb == 8 && full == hd) { /* (the usual case: the same arithmetic, 8 keys at once) */
            vc_f8_store(S + g * n + j - j0, sum * d->scale);
            continue;
        }
        for (int kk = 0; kk < nb; kk++) {
            float sc = sum[kk];
            for (int i = full; i < hd; i++) sc = fmaf(qh[i], kr[kk][i], sc); /* (vc_dot_fixed's tail, fused) */
            if (kr[kk] == zero) {
                S[g * n + j + kk - j0] = -INFINITY;
                continue;
            }
            sc = d->scale * sc;
            if (d->softcap > 0) sc = d->softcap * tanhf(sc / d->softcap);
            if (d->alibi) sc += vc_alibi_bias(d, h0 + g, pos, j + kk);
            S[g * n + j + kk - j0] = sc;
        }
    }
}

/* out rows (heads g0 .. g0 + HC of the run, columns c0 .. c0 + 8 DV) += p v over the keys: the accumulators in registers,
 * each element the chain vc_axpy gives it, key by key in order, a zero weight skipped */
#define PAGED_PV(HC, DV)                                                                                        \
    static void paged_pv_##HC##_##DV(const vc_attn_desc *d, int s, int kvh, const float *S, int64_t n, int64_t j0, \
                                     const float *inv, int g0, int c0, float *const *orow, float *buf) {        \
        vc_f8 acc[HC][DV];                                                                                      \
        for (int g = 0; g < HC; g++)                                                                            \
            for (int v = 0; v < DV; v++) acc[g][v] = vc_f8_splat(0.0f);                                         \
        for (int64_t j = 0; j < n; j++) {                                                                       \
            int any = 0;                                                                                        \
            for (int g = 0; g < HC; g++) any |= S[(g0 + g) * n + j] != 0.0f;                                    \
            if (!any) continue;                                                                                 \
            const float *vr = kv_row(d, d->v_pages[s], d->v_stride, j0 + j, (int64_t)kvh * d->v_head_dim + c0,  \
                                     8 * DV, buf);                                                              \
            vc_f8 vv[DV];                                                                                       \
            for (int v = 0; v < DV; v++) vv[v] = vc_f8_load(vr + 8 * v);                                        \
            for (int g = 0; g < HC; g++) {                                                                      \
                float w = S[(g0 + g) * n + j];                                                                  \
                if (w == 0.0f) continue;                                                                        \
                float pj = w * inv[g0 + g];                                                                     \
                for (int v = 0; v < DV; v++) acc[g][v] = acc[g][v] + pj * vv[v];                                \
            }                                                                                                   \
        }                                                                                                       \
        for (int g = 0; g < HC; g++)                                                                            \
            for (int v = 0; v < DV; v++) vc_f8_store(orow[g0 + g] + c0 + 8 * v, acc[g][v]);                    \
    }
PAGED_PV(1, 4)
PAGED_PV(2, 4)
PAGED_PV(3, 4)
PAGED_PV(4, 4)
PAGED_PV(5, 4)
PAGED_PV(6, 4)
PAGED_PV(1, 1)
typedef void (*paged_pv_fn)(const vc_attn_desc *, int, int, const float *, int64_t, int64_t, const float *, int, int,
                            float *const *, float *);
static const paged_pv_fn PAGED_PV4[6] = { paged_pv_1_4, paged_pv_2_4, paged_pv_3_4, paged_pv_4_4, paged_pv_5_4,
                                          paged_pv_6_4 };
/* heads a pass: their 4 accumulators each and the 4 value vectors in registers (32 with AVX-512, 16 with AVX2) */
#ifdef __AVX512F__
#define PV_HEADS 6
#else
#define PV_HEADS 2
#endif

/* the weighted values into the run's output rows: 32 columns by up to PV_HEADS heads a pass (the run's heads spread
 * evenly over the fewest passes), then 8 columns a head, then the columns past the last multiple of 8 one at a time
 * (vc_axpy's tail) */
static void paged_values(const vc_attn_desc *d, int s, int kvh, const float *S, int64_t n, int64_t j0,
                         const float *inv, int nh, float *const *orow, float *buf) {
    int dv = d->v_head_dim, c = 0, passes = (nh + PV_HEADS - 1) / PV_HEADS;
    for (; c + 32 <= dv; c += 32)
        for (int p = 0, g = 0; p < passes; p++) {
            int hc = (nh - g) / (passes - p); /* (the passes' sizes differ by at most one) */
            PAGED_PV4[hc - 1](d, s, kvh, S, n, j0, inv, g, c, orow, buf);
            g += hc;
        }
    for (; c + 8 <= dv; c += 8)
        for (int g = 0; g < nh; g++) paged_pv_1_1(d, s, kvh, S, n, j0, inv, g, c, orow, buf);
    if (c == dv) return;
    for (int64_t j = 0; j < n; j++)
        for (int g = 0; g < nh; g++) {
            float w = S[g * n + j];
            if (w == 0.0f) continue;
            const float *vr = kv_row(d, d->v_pages[s], d->v_stride, j0 + j, (int64_t)kvh * dv + c, dv - c, buf);
            float pj = w * inv[g];
            for (int i = 0; i < dv - c; i++) orow[g][c + i] += pj * vr[i];
        }
}

/* the scratch of a task: 8 rows of head_dim floats (keys converted from bf16; a value row later), then a row of
 * head_dim zeros (an unselected key's) */
static size_t paged_buf_floats(const vc_attn_desc *d) {
    size_t k8 = (size_t)8 * (size_t)d->head_dim;
    return (k8 > (size_t)d->v_head_dim ? k8 : (size_t)d->v_head_dim) + (size_t)d->head_dim;
}

/* query row r of sequence s for heads [h0, h0 + nh) of kv head kvh; S: nh rows of the visible keys; buf: the task's
 * scratch (paged_buf_floats) */
static void paged_row(const paged_ctx *c, int s, int64_t r, int kvh, int h0, int nh, float *S, float *buf) {
    const vc_attn_desc *d = c->d;
    int64_t qa = d->q_start[s], ql = d->q_start[s + 1] - qa, kvl = d->kv_len[s];
    int64_t qstride = (int64_t)d->n_head * d->head_dim, ostride = (int64_t)d->n_head * d->v_head_dim;
    int64_t pos = kvl - ql + r, j0, j1;
    key_range(d, kvl, pos, pos, &j0, &j1);
    int64_t n = j1 - j0;
    const float *q0 = c->q + (qa + r) * qstride;
    for (int64_t j = j0; j < j1; j += 8)
        paged_scores(d, s, qa + r, q0, kvh, h0, nh, pos, j, j1 - j < 8 ? (int)(j1 - j) : 8, j0, n, S, buf,
                     buf + paged_buf_floats(d) - d->head_dim);
    float inv[nh > 0 ? nh : 1], *orow[nh > 0 ? nh : 1];
    for (int g = 0; g < nh; g++) {
        float L;
        inv[g] = paged_softmax(S + g * n, n, d, h0 + g, &L);
        if (c->lse) c->lse[(qa + r) * d->n_head + h0 + g] = L;
        orow[g] = c->o + (qa + r) * ostride + (int64_t)(h0 + g) * d->v_head_dim;
        for (int i = 0; i < d->v_head_dim; i++) orow[g][i] = 0;
    }
    paged_values(d, s, kvh, S, n, j0, inv, nh, orow, buf);
}

/* task = (sequence, kv head, run of query heads) */
static void paged_task(void *p, int64_t task) {
    paged_ctx *c = p;
    const vc_attn_desc *d = c->d;
    int G = d->n_head / d->n_kv_head;
    int s = (int)(task / ((int64_t)d->n_kv_head * c->chunks)), rest = (int)(task % ((int64_t)d->n_kv_head * c->chunks));
    int kvh = rest / c->chunks, h0 = kvh * G + (rest % c->chunks) * c->hg;
    int nh = G - (h0 - kvh * G) < c->hg ? G - (h0 - kvh * G) : c->hg;
    int64_t ql = d->q_start[s + 1] - d->q_start[s], kvl = d->kv_len[s];
    float *S = vc_cpu_scratch((size_t)(kvl ? kvl : 1) * (size_t)nh * sizeof(float), 1, 0);
    float *buf = vc_cpu_scratch(paged_buf_floats(d) * sizeof(float), 1, 1); /* (zeroed: its last row) */
    if (S && buf)
        for (int64_t r = 0; r < ql; r++) paged_row(c, s, r, kvh, h0, nh, S, buf);
    free(S);
    free(buf);
}

static void paged_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d) {
    int G = d->n_head / d->n_kv_head, hg = G, want = 2 * vc_get_threads();
    while (hg > 1 && (int64_t)d->n_seq * d->n_kv_head * ((G + hg - 1) / hg) < want) hg = (hg + 1) / 2;
    paged_ctx c = { o, lse, q, d, hg, (G + hg - 1) / hg };
    vc_parallel((int64_t)d->n_seq * d->n_kv_head * c.chunks, paged_task, &c);
}

void vc_cpu_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d) {
    if (d->page_tokens > 0) {
        paged_fwd(o, lse, q, d);
        return;
    }
    int64_t ostride = (int64_t)d->n_head * d->v_head_dim;
    int64_t maxkv = 0;
    for (int s = 0; s < d->n_seq; s++) maxkv = d->kv_len[s] > maxkv ? d->kv_len[s] : maxkv;
    float *S = vc_cpu_scratch((size_t)QBLK * (size_t)(maxkv ? maxkv : 1) * sizeof(float), 1, 0), inv_sum[QBLK];
    if (!S) return;
    for (int s = 0; s < d->n_seq; s++) {
        int64_t qa = d->q_start[s], ql = d->q_start[s + 1] - qa, kvl = d->kv_len[s];
        for (int h = 0; h < d->n_head; h++) {
            int kvh = h / (d->n_head / d->n_kv_head);
            for (int64_t b = 0; b < ql; b += QBLK) {
                int64_t nr = ql - b < QBLK ? ql - b : QBLK, pos0 = kvl - ql + b, j0, j1;
                key_range(d, kvl, pos0, pos0 + nr - 1, &j0, &j1);
                int64_t nj = j1 - j0;
                scores(S, q, qa + b, nr, h, d->k_seq[s], j0, nj, pos0, d);
                rows_ctx rc = { .S = S, .lse_out = lse, .inv_sum = inv_sum, .nj = nj, .j0 = j0, .pos0 = pos0, .nr = nr,
                                .lse_base = qa + b, .h = h, .d = d };
                vc_parallel((nr + ROWS - 1) / ROWS, softmax_rows, &rc);
                float *orow = o + (qa + b) * ostride + (int64_t)h * d->v_head_dim;
                vc_cpu_sgemm(0, 0, nr, d->v_head_dim, nj, 1.0f, S, nj,
                            d->v_seq[s] + j0 * d->v_stride + (int64_t)kvh * d->v_head_dim, d->v_stride, 0.0f, orow,
                            ostride);
                for (int64_t r = 0; r < nr; r++)
                    for (int i = 0; i < d->v_head_dim; i++) orow[r * ostride + i] *= inv_sum[r];
            }
        }
    }
    free(S);
}

void vc_cpu_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d) {
    int64_t ostride = (int64_t)d->n_head * d->v_head_dim, qstride = (int64_t)d->n_head * d->head_dim;
    int64_t maxkv = 0;
    for (int s = 0; s < d->n_seq; s++) maxkv = d->kv_len[s] > maxkv ? d->kv_len[s] : maxkv;
    size_t blk = (size_t)QBLK * (size_t)(maxkv ? maxkv : 1);
    float *S = vc_cpu_scratch(blk * sizeof(float), 1, 0), *dP = vc_cpu_scratch(blk * sizeof(float), 1, 0);
    if (!S || !dP) goto out;
    for (int s = 0; s < d->n_seq; s++) {
        int64_t qa = d->q_start[s], ql = d->q_start[s + 1] - qa, kvl = d->kv_len[s];
        for (int h = 0; h < d->n_head; h++) {
            int kvh = h / (d->n_head / d->n_kv_head);
            const float *V = d->v_seq[s] + (int64_t)kvh * d->v_head_dim;
            const float *K = d->k_seq[s] + (int64_t)kvh * d->head_dim;
            for (int64_t b = 0; b < ql; b += QBLK) {
                int64_t nr = ql - b < QBLK ? ql - b : QBLK, pos0 = kvl - ql + b, j0, j1;
                key_range(d, kvl, pos0, pos0 + nr - 1, &j0, &j1);
                int64_t nj = j1 - j0;
                const float *dO = dout + (qa + b) * ostride + (int64_t)h * d->v_head_dim;
                const float *O = o + (qa + b) * ostride + (int64_t)h * d->v_head_dim;
                scores(S, q, qa + b, nr, h, d->k_seq[s], j0, nj, pos0, d); /* capped scores */
                /* dP = dO V^T */
                vc_cpu_sgemm(0, 1, nr, nj, d->v_head_dim, 1.0f, dO, ostride, V + j0 * d->v_stride, d->v_stride,
                            0.0f, dP, nj);
                rows_ctx rc = { .S = S, .dP = dP, .lse = lse, .dO = dO, .O = O, .nj = nj, .j0 = j0, .pos0 = pos0, .nr = nr,
                                .ostride = ostride,
                                .lse_base = qa + b, .h = h, .d = d };
                vc_parallel((nr + ROWS - 1) / ROWS, dscore_rows, &rc);
                /* dV += P^T dO ; dK += scale dS^T Q ; dQ += scale dS K */
                vc_cpu_sgemm(1, 0, nj, d->v_head_dim, nr, 1.0f, S, nj, dO, ostride, 1.0f,
                            d->dv_seq[s] + j0 * d->v_stride + (int64_t)kvh * d->v_head_dim, d->v_stride);
                vc_cpu_sgemm(1, 0, nj, d->head_dim, nr, d->scale, dP, nj,
                            q + (qa + b) * qstride + (int64_t)h * d->head_dim, qstride, 1.0f,
                            d->dk_seq[s] + j0 * d->k_stride + (int64_t)kvh * d->head_dim, d->k_stride);
                vc_cpu_sgemm(0, 0, nr, d->head_dim, nj, d->scale, dP, nj, K + j0 * d->k_stride, d->k_stride, 1.0f,
                            dq + (qa + b) * qstride + (int64_t)h * d->head_dim, qstride);
            }
        }
    }
out:
    free(S);
    free(dP);
}

void vc_cpu_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                          int64_t T, int nh, int dv) {
    for (int h = 0; h < nh; h++) {
        double acc = 0;
        for (int64_t t = 0; t < T; t++) {
            const float *a = dout + (t * nh + h) * dv, *b = o + (t * nh + h) * dv;
            float D = 0;
            for (int i = 0; i < dv; i++) D += a[i] * b[i];
            acc += (double)(expf(sinks[h] - lse[t * nh + h]) * D);
        }
        dsink[h] -= (float)acc;
    }
}
