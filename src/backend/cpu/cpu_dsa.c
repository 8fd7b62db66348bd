/* DeepSeek Sparse Attention's indexer on the CPU (DeepSeek-V3.2, GLM-5): each query row scores every visible key,
 * sum_h w_h relu(scale q_h . k), and keeps its topk best as bits of a selection mask for attention. Scores are dot
 * products in a fixed order (vc_dot_fixed), so a row selects the same keys alone, in a batch, from a cache or from
 * pages. */
#include "cpu.h"
#include "core/vmath.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include <math.h>
#include <string.h>

typedef struct {
    uint32_t *sel;
    int64_t words, topk;
    const float *q, *w;
    const vc_attn_desc *d;
    const int64_t *row_seq; /* the sequence of each query row */
    int64_t rows;
} dsa_ctx;

/* key j of sequence s as f32 (bf16 pages converted into buf) */
static const float *key_row(const vc_attn_desc *d, int s, int64_t j, float *buf) {
    if (d->page_tokens <= 0) return d->k_seq[s] + j * d->k_stride;
    if (!d->kv_bf16) return d->k_pages[s][j / d->page_tokens] + (j % d->page_tokens) * d->k_stride;
    const uint16_t *h = (const uint16_t *)(const void *)d->k_pages[s][j / d->page_tokens] + (j % d->page_tokens) * d->k_stride;
    for (int i = 0; i < d->head_dim; i++) buf[i] = vc_bf16_to_f32(h[i]);
    return buf;
}

/* the k-th largest of v[0..n) (k in [1, n]), v reordered */
static float kth_largest(float *v, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float piv = v[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] > piv) i++;
            while (v[j] < piv) j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return v[want];
    }
    return v[lo];
}

static void select_row(void *p, int64_t r) {
    dsa_ctx *c = p;
    const vc_attn_desc *d = c->d;
    int s = (int)c->row_seq[r];
    int64_t qa = d->q_start[s], ql = d->q_start[s + 1] - qa, kvl = d->kv_len[s];
    int64_t pos = kvl - ql + (r - qa), nvis = d->causal ? pos + 1 : kvl;
    uint32_t *bits = c->sel + r * c->words;
    memset(bits, 0, sizeof(uint32_t) * (size_t)c->words);
    if (nvis <= c->topk) { /* every visible key */
        for (int64_t j = 0; j < nvis; j++) bits[j >> 5] |= 1u << (j & 31);
        return;
    }
    float *score = vc_cpu_scratch(sizeof(float) * (size_t)(2 * nvis + d->head_dim), 1, 0);
    if (!score) return; /* recorded for sync */
    float *tmp = score + nvis, *buf = tmp + nvis;
    const float *qr = c->q + r * (int64_t)d->n_head * d->head_dim, *wr = c->w + r * (int64_t)d->n_head;
    for (int64_t j = 0; j < nvis; j++) {
        const float *k = key_row(d, s, j, buf);
        float acc = 0;
        for (int h = 0; h < d->n_head; h++) {
            float x = d->scale * vc_dot_fixed(qr + (int64_t)h * d->head_dim, k, d->head_dim);
            acc += wr[h] * (x > 0 ? x : 0.0f);
        }
        score[j] = isnan(acc) ? -INFINITY : acc;
        tmp[j] = score[j];
    }
    float kth = kth_largest(tmp, nvis, c->topk);
    int64_t above = 0;
    for (int64_t j = 0; j < nvis; j++) above += score[j] > kth;
    for (int64_t j = 0, ties = c->topk - above; j < nvis; j++)
        if (score[j] > kth || (score[j] == kth && ties-- > 0)) bits[j >> 5] |= 1u << (j & 31);
    free(score);
}

void vc_cpu_dsa_select(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                       const vc_attn_desc *d) {
    int64_t rows = d->n_seq ? d->q_start[d->n_seq] : 0;
    int64_t *row_seq = vc_cpu_scratch(sizeof(int64_t) * (size_t)(rows ? rows : 1), 1, 0);
    if (!row_seq) return;
    for (int s = 0; s < d->n_seq; s++)
        for (int64_t r = d->q_start[s]; r < d->q_start[s + 1]; r++) row_seq[r] = s;
    dsa_ctx c = { .sel = sel, .words = words, .topk = topk, .q = q, .w = w, .d = d, .row_seq = row_seq, .rows = rows };
    vc_parallel(rows, select_row, &c);
    free(row_seq);
}
