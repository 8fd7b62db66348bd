/* The sample_rows entry against the rollout sampler it replaced (kept below as the reference, renamed ref_*;
 * its log-sum-exp since changed to the LM head's reduction): every knob combination, several draws per row,
 * ties in the logits; bitwise equal tokens and log-probs on the CPU backend and on the sim backend (poisoned
 * pointers); and each draw's log-prob bitwise equal to the training path's fused LM head on the same logits. */
#include "tensor/backend.h"
#include "core/vmath.h"
#include "vc_test.h"
#include "verlc/core.h"
#include "verlc/rollout.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- reference: src/infer/sampler.c before the entry ---------------- */
typedef struct ref_sampler ref_sampler;
static void ref_sampler_free(ref_sampler *s);

struct ref_sampler {
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
};

static ref_sampler *ref_sampler_new(int64_t vocab) {
    ref_sampler *s = vc_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->V = vocab;
    s->x = vc_malloc((size_t)vocab * sizeof *s->x);
    s->w = vc_malloc((size_t)vocab * sizeof *s->w);
    s->idx = vc_malloc((size_t)vocab * sizeof *s->idx);
    if (!s->x || !s->w || !s->idx) {
        ref_sampler_free(s);
        return NULL;
    }
    return s;
}

static void ref_sampler_free(ref_sampler *s) {
    if (!s) return;
    free(s->x);
    free(s->w);
    free(s->idx);
    free(s);
}

/* the training path's LM head reduction (cpu_lmhead.c): float max, exp(z - m) in float, their sum in double,
 * m + log(sum) in double; the argmax is the first largest logit */
static double log_sum_exp(const float *z, int64_t V, int32_t *argmax) {
    float m = -INFINITY;
    int32_t best = 0;
    for (int64_t v = 0; v < V; v++)
        if (z[v] > m) {
            m = z[v];
            best = (int32_t)v;
        }
    float *e = malloc((size_t)V * sizeof *e);
    if (!e) return NAN;
    for (int64_t v = 0; v < V; v++) e[v] = z[v] - m;
    vc_exp_shift(e, e, V, 0.0f);
    double s = vc_sum_f64(e, V);
    free(e);
    *argmax = best;
    return (double)m + log(s);
}

static _Thread_local const float *ref_key; /* qsort has no context argument */

static int by_value_desc(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = ref_key[i], y = ref_key[j];
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

static int64_t select_top_k(ref_sampler *s, int64_t k) {
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
static int64_t sorted_candidates(ref_sampler *s, const vc_sampling *sp, float xmax) {
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
    ref_key = s->x;
    qsort(s->idx, (size_t)n, sizeof *s->idx, by_value_desc);
    return n;
}

static void ref_sampler_prepare(ref_sampler *s, const float *z, const vc_sampling *sp) {
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
    if (sp->top_p > 0 && sp->top_p < 1) { /* smallest prefix holding top_p of the mass, at least one */
        double cum = 0, goal = (double)sp->top_p * total;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            cum += s->w[i];
            if (cum >= goal) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = cum;
    }
    if (sp->min_p > 0) { /* weights are relative to the most likely token (weight 1) */
        int64_t k = 0;
        total = 0;
        for (int64_t i = 0; i < n; i++)
            if (s->w[i] >= (double)sp->min_p) {
                s->idx[k] = s->idx[i];
                total += s->w[k] = s->w[i];
                k++;
            }
        n = k;
    }
    s->n_keep = n;
    s->total = total;
}

static int32_t ref_sampler_draw(const ref_sampler *s, float u, float *logp, float *logp_sampled) {
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

/* ---------------- the test ---------------- */
static uint64_t rng = 0x243F6A8885A308D3ull;

static double urand(void) { /* [0, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* row kinds: plain random, ties (quantised), all equal, wide (most weights underflow), one spike */
static void fill_row(float *z, int64_t V, int kind) {
    for (int64_t v = 0; v < V; v++) {
        float x = (float)(urand() * 2 - 1);
        switch (kind) {
        case 0: z[v] = 3.0f * x; break;
        case 1: z[v] = roundf(4.0f * x) * 0.5f; break;
        case 2: z[v] = 0.25f; break;
        case 3: z[v] = 40.0f * x; break;
        default: z[v] = x + (v == V / 3 ? 12.0f : 0.0f); break;
        }
    }
}

static float draw_u(int i) {
    if (i % 7 == 0) return 0.0f;
    if (i % 7 == 1) return 0.99999994f; /* largest float below 1 */
    return (float)urand();
}

typedef struct {
    int32_t *tok;
    float *lp, *lps;
} outs;

static int same_bits(const outs *a, const outs *b, int n) {
    return !memcmp(a->tok, b->tok, (size_t)n * 4) && !memcmp(a->lp, b->lp, (size_t)n * 4) &&
           !memcmp(a->lps, b->lps, (size_t)n * 4);
}

/* runs the entry of backend be on host logits (copied into its memory) */
static void run_entry(const vc_backend *be, outs *o, const float *z, int64_t R, int64_t V, const vc_sample_row *rows,
                      const float *u, int n) {
    float *dz = be->alloc((size_t)(R * V) * 4), *dlp = be->alloc((size_t)n * 4), *dlps = be->alloc((size_t)n * 4);
    int32_t *dt = be->alloc((size_t)n * 4);
    be->h2d(dz, z, (size_t)(R * V) * 4);
    be->sample_rows(dt, dlp, dlps, dz, R, V, rows, u);
    be->d2h(o->tok, dt, (size_t)n * 4);
    be->d2h(o->lp, dlp, (size_t)n * 4);
    be->d2h(o->lps, dlps, (size_t)n * 4);
    CHECK_OK(be->sync());
    be->free(dz);
    be->free(dlp);
    be->free(dlps);
    be->free(dt);
}

#define R_ROWS 5
#define MAX_DRAW (R_ROWS * 3)

/* each draw's log-prob is the CPU LM head's for its token on the same logits (an identity head over the row,
 * eye: V x V; NULL: not checked for this V) */
static int head_agrees(const float *z, int64_t V, const vc_sample_row *rows, const outs *o, const float *eye) {
    if (!eye) return 1;
    float h[MAX_DRAW * 1000], lp[MAX_DRAW], lse[MAX_DRAW];
    int32_t tgt[MAX_DRAW];
    int n = 0;
    for (int r = 0; r < R_ROWS; r++)
        for (int d = rows[r].first; d < rows[r].first + rows[r].n; d++, n++) {
            memcpy(h + (int64_t)n * V, z + r * V, (size_t)V * sizeof *h);
            tgt[n] = o->tok[d];
        }
    vc_head_desc hd = { .T = n, .H = V, .V = V, .softcap = 0, .scale = 1 };
    vc_backend_cpu()->lm_head_fwd(lp, NULL, NULL, lse, h, eye, NULL, tgt, &hd);
    int same = 1; /* equal values (a -0 logit gives the sampler -0 where the head's GEMM gives +0) */
    for (int i = 0; i < n; i++) same &= lp[i] == o->lp[i];
    return same;
}

/* one knob combination on R_ROWS rows (one of each kind), 1-3 draws each; returns 1 when all match */
static int check_combo(int64_t V, const vc_sampling *sp, float *z, ref_sampler *ref, int *n_draws, const float *eye) {
    vc_sample_row rows[R_ROWS];
    float u[MAX_DRAW];
    int32_t t[3][MAX_DRAW];
    float l[3][MAX_DRAW], ls[3][MAX_DRAW];
    outs want = { t[0], l[0], ls[0] }, cpu = { t[1], l[1], ls[1] }, sim = { t[2], l[2], ls[2] };
    int n = 0;
    for (int r = 0; r < R_ROWS; r++) {
        fill_row(z + r * V, V, r);
        int nd = 1 + (int)(urand() * 3);
        rows[r] = (vc_sample_row){ .temperature = sp->temperature, .top_p = sp->top_p, .min_p = sp->min_p,
                                   .top_k = sp->top_k, .greedy = sp->greedy, .first = n, .n = nd };
        ref_sampler_prepare(ref, z + r * V, sp);
        for (int d = 0; d < nd; d++, n++) {
            u[n] = draw_u(n);
            t[0][n] = ref_sampler_draw(ref, u[n], &l[0][n], &ls[0][n]);
        }
    }
    run_entry(vc_backend_cpu(), &cpu, z, R_ROWS, V, rows, u, n);
    run_entry(vc_backend_sim(), &sim, z, R_ROWS, V, rows, u, n);
    *n_draws += n;
    return same_bits(&want, &cpu, n) && same_bits(&want, &sim, n) && head_agrees(z, V, rows, &cpu, eye);
}

static void test_knobs(void) {
    const int64_t Vs[] = { 1, 2, 7, 64, 1000, 4099 };
    const float temps[] = { 0.7f, 1.0f, 1.6f }, top_ps[] = { 1.0f, 0.9f, 0.3f }, min_ps[] = { 0.0f, 0.05f, 0.5f };
    int combos = 0, ok = 0, draws = 0;
    for (size_t iv = 0; iv < sizeof Vs / sizeof *Vs; iv++) {
        int64_t V = Vs[iv];
        const int top_ks[] = { 0, 1, 5, (int)V, (int)V + 3, -1 };
        float *z = malloc((size_t)(R_ROWS * V) * sizeof *z), *eye = V <= 1000 ? calloc((size_t)(V * V), 4) : NULL;
        for (int64_t v = 0; eye && v < V; v++) eye[v * V + v] = 1.0f;
        ref_sampler *ref = ref_sampler_new(V);
        for (int g = 0; g < 2; g++)
            for (int it = 0; it < 3; it++)
                for (int ik = 0; ik < 6; ik++)
                    for (int ip = 0; ip < 3; ip++)
                        for (int im = 0; im < 3; im++) {
                            vc_sampling sp = { .greedy = g, .temperature = temps[it], .top_k = top_ks[ik],
                                               .top_p = top_ps[ip], .min_p = min_ps[im] };
                            int good = check_combo(V, &sp, z, ref, &draws, eye);
                            CHECK_MSG(good, "V %lld greedy %d T %g top_k %d top_p %g min_p %g: entry != sampler",
                                      (long long)V, g, sp.temperature, sp.top_k, sp.top_p, sp.min_p);
                            ok += good;
                            combos++;
                        }
        ref_sampler_free(ref);
        free(z);
        free(eye);
    }
    printf("sample_rows == reference sampler (cpu and sim, bitwise; log-probs == the LM head's for V <= 1000): %d/%d knob combinations, %d draws\n", ok,
           combos, draws);
}

/* the sim entry refuses host logits (the error is sticky, named, reported by sync) */
static void test_sim_refuses_host(void) {
    const vc_backend *be = vc_backend_sim();
    float z[4] = { 0, 1, 2, 3 }, u[1] = { 0.5f };
    vc_sample_row row = { .temperature = 1, .top_p = 1, .first = 0, .n = 1 };
    int32_t *tok = be->alloc(4);
    float *lp = be->alloc(4), *lps = be->alloc(4);
    be->sample_rows(tok, lp, lps, z, 1, 4, &row, u);
    vc_status st = be->sync();
    CHECK(st != VC_OK);
    CHECK_MSG(strstr(vc_last_error(), "sample_rows") != NULL, "%s", vc_last_error());
    be->free(tok);
    be->free(lp);
    be->free(lps);
}

int main(void) {
    test_knobs();
    test_sim_refuses_host(); /* last: the sim error is sticky for the process */
    return vc_test_done();
}
