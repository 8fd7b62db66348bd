/* The CPU sampling entry (semantics in src/tensor/backend.h, sample_rows): greedy, or temperature then
 * top-k, top-p (nucleus over the top-k renormalised distribution) and min-p, by inverse CDF with a
 * caller-supplied uniform. The kept tokens are visited in a fixed order (probability descending, id
 * ascending when sorted; id order otherwise), so a draw is a pure function of (logits, knobs, u).
 * Rows run in parallel, one scratch per task; a row's distribution is prepared once for all its draws. */
#include "backend/cpu/cpu.h"
#include "core/vmath.h"
#include "verlc/pool.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t V;
    float *x;       /* z / temperature */
    double *w;      /* exp(x - xmax) of kept tokens, in visiting order */
    int32_t *idx;   /* kept tokens, in visiting order */
    int64_t n_keep;
    double total;   /* sum of w over kept tokens */
    double lse;     /* log-sum-exp of the raw logits */
    const float *z;
    int greedy;
    int32_t argmax;
} sampler;

static int sampler_init(sampler *s, int64_t V) {
    memset(s, 0, sizeof *s);
    s->V = V;
    s->x = vc_cpu_scratch((size_t)V, sizeof *s->x, 0); /* (a failure is recorded for sync: the draws are -1) */
    s->w = vc_cpu_scratch((size_t)V, sizeof *s->w, 0);
    s->idx = vc_cpu_scratch((size_t)V, sizeof *s->idx, 0);
    return s->x && s->w && s->idx;
}

static void sampler_release(sampler *s) {
    free(s->x);
    free(s->w);
    free(s->idx);
}

/* the same reduction as the training path's LM head (cpu_lmhead.c, a vocabulary in one slice): float max, exp(z - m)
 * in float, their sum in double, L = m + log(sum) in double; the first largest logit is the argmax */
static double log_sum_exp(const float *z, int64_t V, int32_t *argmax) {
    float m = vc_max_f32(z, V);
    int64_t best = 0;
    while (best < V && !(z[best] == m)) best++;
    *argmax = best < V ? (int32_t)best : 0;
    double sum, unused;
    vc_softmax_stats(z, V, m, &sum, &unused, NULL);
    return (double)m + log(sum);
}

static _Thread_local const float *t_key; /* qsort has no context argument */

static int by_value_desc(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = t_key[i], y = t_key[j];
    if (x != y) return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

/* min-heap on (value, -id) used to select the k best tokens */
static int worse(const float *x, int32_t a, int32_t b) { return x[a] < x[b] || (x[a] == x[b] && a > b); }

static void sift_down(int32_t *h, int64_t n, int64_t i, const float *x) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && worse(x, h[l], h[m])) m = l;
        if (r < n && worse(x, h[r], h[m])) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int64_t select_top_k(sampler *s, int64_t k) {
    int32_t *h = s->idx;
    for (int64_t v = 0; v < k; v++) h[v] = (int32_t)v;
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i, s->x);
    for (int64_t v = k; v < s->V; v++)
        if (worse(s->x, h[0], (int32_t)v)) {
            h[0] = (int32_t)v;
            sift_down(h, k, 0, s->x);
        }
    return k;
}

/* tokens sorted by value; with top-p only, a prefilter keeps the tokens whose weight is at least tau
 * when they already hold top_p of the mass (the nucleus is then inside them) */
static int64_t sorted_candidates(sampler *s, const vc_sample_row *sp, float xmax) {
    int64_t n = 0;
    if (sp->top_k > 0 && sp->top_k < s->V) n = select_top_k(s, sp->top_k);
    else {
        const double tau = 1e-7;
        double all = 0, above = 0;
        for (int64_t v = 0; v < s->V; v++) {
            double w = exp((double)(s->x[v] - xmax));
            all += w;
            if (w >= tau) {
                above += w;
                s->idx[n++] = (int32_t)v;
            }
        }
        if (above < (double)sp->top_p * all) {
            n = s->V;
            for (int64_t v = 0; v < n; v++) s->idx[v] = (int32_t)v;
        }
    }
    t_key = s->x;
    qsort(s->idx, (size_t)n, sizeof *s->idx, by_value_desc);
    return n;
}

/* smallest prefix holding top_p of the mass (at least one token); returns the kept count */
static int64_t nucleus(sampler *s, int64_t n, float top_p, double *total) {
    double cum = 0, goal = (double)top_p * *total;
    int64_t keep = n;
    for (int64_t i = 0; i < n; i++) {
        cum += s->w[i];
        if (cum >= goal) {
            keep = i + 1;
            break;
        }
    }
    *total = cum;
    return keep;
}

/* drops the tokens whose weight (relative to the most likely token, weight 1) is below min_p */
static int64_t min_p_filter(sampler *s, int64_t n, float min_p, double *total) {
    int64_t k = 0;
    *total = 0;
    for (int64_t i = 0; i < n; i++)
        if (s->w[i] >= (double)min_p) {
            s->idx[k] = s->idx[i];
            *total += s->w[k] = s->w[i];
            k++;
        }
    return k;
}

static void sampler_prepare(sampler *s, const float *z, const vc_sample_row *sp) {
    s->z = z;
    s->lse = log_sum_exp(z, s->V, &s->argmax);
    s->greedy = sp->greedy;
    if (sp->greedy) return;
    float T = sp->temperature > 0 ? sp->temperature : 1.0f, xmax = -INFINITY;
    for (int64_t v = 0; v < s->V; v++) {
        s->x[v] = z[v] / T;
        xmax = s->x[v] > xmax ? s->x[v] : xmax;
    }
    int sorted = (sp->top_k > 0 && sp->top_k < s->V) || (sp->top_p > 0 && sp->top_p < 1);
    int64_t n = s->V;
    if (sorted) n = sorted_candidates(s, sp, xmax);
    else
        for (int64_t v = 0; v < n; v++) s->idx[v] = (int32_t)v;
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += s->w[i] = exp((double)(s->x[s->idx[i]] - xmax));
    if (sp->top_p > 0 && sp->top_p < 1) n = nucleus(s, n, sp->top_p, &total);
    if (sp->min_p > 0) n = min_p_filter(s, n, sp->min_p, &total);
    s->n_keep = n;
    s->total = total;
}

static int32_t sampler_draw(const sampler *s, float u, float *logp, float *logp_sampled) {
    int32_t tok;
    if (s->greedy || s->n_keep == 0) {
        tok = s->argmax;
        *logp_sampled = 0.0f;
    } else {
        double goal = (double)u * s->total, cum = 0;
        int64_t i = 0;
        for (; i < s->n_keep - 1; i++) {
            cum += s->w[i];
            if (cum > goal) break;
        }
        tok = s->idx[i];
        *logp_sampled = (float)log(s->w[i] / s->total);
    }
    *logp = (float)((double)s->z[tok] - s->lse);
    return tok;
}

typedef struct {
    int32_t *tok;
    float *lp, *lps;
    const float *logits;
    int64_t R, V, n_task;
    const vc_sample_row *rows;
    const float *u;
} sample_ctx;

static void sample_task(void *p, int64_t t) {
    sample_ctx *c = p;
    sampler s;
    int ok = sampler_init(&s, c->V);
    for (int64_t r = t; r < c->R; r += c->n_task) {
        const vc_sample_row *q = &c->rows[r];
        if (ok) sampler_prepare(&s, c->logits + r * c->V, q);
        for (int32_t d = q->first; d < q->first + q->n; d++) {
            if (ok) c->tok[d] = sampler_draw(&s, c->u[d], &c->lp[d], &c->lps[d]);
            else c->tok[d] = -1, c->lp[d] = c->lps[d] = 0.0f;
        }
    }
    sampler_release(&s);
}

void vc_cpu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                        const vc_sample_row *rows, const float *u) {
    if (R <= 0) return;
    int64_t n = vc_get_threads() > 0 ? vc_get_threads() : 1;
    if (n > R) n = R;
    sample_ctx c = { tok, lp, lps, logits, R, V, n, rows, u };
    vc_parallel(n, sample_task, &c);
}
