/* Linear-attention layers' kernels on the CPU: Gated DeltaNet's recurrence (forward keeping a state every
 * d->ckpt rows, backward recomputing each stretch from its kept state; where no rollout state is carried, both run
 * its chunked form instead: cpu_gdn_chunk.c), its log decay, and the depthwise causal
 * conv1d in front of it. Semantics in src/tensor/backend.h; every sum runs in a fixed order. */
#include "backend/act_math.h"
#include "cpu_gdn.h"
#include "verlc/pool.h"
#include <stdlib.h>
#include <string.h>

/* ---- Gated DeltaNet ---- */
typedef vc_gdn_ctx gdn_ctx;

/* one token: S = e^g S (gk: row i of S times e^g[i]), delta = beta (v - S^T k) (no_delta: beta v), S += k delta^T,
 * o = S^T (scale q) (o may be NULL) */
static void gdn_step(float *S, const float *q, const float *k, const float *v, const float *g, int gk, float beta,
                     float scale, float *o, int dk, int dv, float *tmp, int no_delta) {
    for (int i = 0; i < dk; i++) {
        float e = expf(g[gk ? i : 0]);
        for (int j = 0; j < dv; j++) S[i * dv + j] *= e;
    }
    for (int j = 0; j < dv; j++) tmp[j] = 0;
    for (int i = 0; i < dk && !no_delta; i++)
        for (int j = 0; j < dv; j++) tmp[j] += S[i * dv + j] * k[i];
    for (int j = 0; j < dv; j++) tmp[j] = beta * (v[j] - tmp[j]);
    for (int i = 0; i < dk; i++)
        for (int j = 0; j < dv; j++) S[i * dv + j] += k[i] * tmp[j];
    if (!o) return;
    for (int j = 0; j < dv; j++) o[j] = 0;
    for (int i = 0; i < dk; i++) {
        float qi = q[i] * scale;
        for (int j = 0; j < dv; j++) o[j] += S[i * dv + j] * qi;
    }
}

/* row t's log decay for value head h: one value, or (gk) dk of them */
static const float *gate_at(const gdn_ctx *c, int64_t t, int h) {
    return c->g + (t * c->d->n_v_head + h) * (c->d->gk ? c->d->dk : 1);
}

static void gdn_fwd_task(void *p, int64_t task) {
    gdn_ctx *c = p;
    const vc_gdn_desc *d = c->d;
    int64_t i = task / d->n_v_head;
    int s = c->seqs ? c->seqs[i] : (int)i, h = (int)(task % d->n_v_head), kh = h / (d->n_v_head / d->n_k_head);
    int dk = d->dk, dv = d->dv;
    int64_t SS = (int64_t)dk * dv, t0 = d->cu[s], t1 = d->cu[s + 1];
    float *S = vc_cpu_scratch((size_t)(SS + dv), sizeof(float), 1), *tmp = S ? S + SS : NULL;
    if (!S) {
        c->fail = 1;
        return;
    }
    float *st = d->state && d->state[s] ? d->state[s] + h * SS : NULL;
    /* shared starts (d->from): the tapped state of sequence from[s]; this sequence's own tap at row R */
    const float *init = d->from && d->from[s] >= 0 ? c->tap + ((int64_t)c->tap_of[d->from[s]] * d->n_v_head + h) * SS
                                                   : NULL;
    float *tap = c->tap_of && c->tap_of[s] >= 0 ? c->tap + ((int64_t)c->tap_of[s] * d->n_v_head + h) * SS : NULL;
    int64_t R = tap ? vc_gdn_tap(t1 - t0, d->ckpt) : -1;
    if (st || init) memcpy(S, st ? st : init, sizeof(float) * (size_t)SS);
    for (int64_t t = t0; t < t1; t++) {
        if (tap && t - t0 == R) memcpy(tap, S, sizeof(float) * (size_t)SS);
        if (c->saved && (t - t0) % d->ckpt == 0)
            memcpy(c->saved + ((c->base[s] + (t - t0) / d->ckpt) * d->n_v_head + h) * SS, S, sizeof(float) * (size_t)SS);
        gdn_step(S, c->q + (t * d->n_k_head + kh) * dk, c->k + (t * d->n_k_head + kh) * dk, c->v + (t * d->n_v_head + h) * dv,
                 gate_at(c, t, h), d->gk, c->beta[t * d->n_v_head + h], d->scale, c->o + (t * d->n_v_head + h) * dv,
                 dk, dv, tmp, d->no_delta);
    }
    if (tap && R == t1 - t0) memcpy(tap, S, sizeof(float) * (size_t)SS);
    if (st) memcpy(st, S, sizeof(float) * (size_t)SS);
    free(S);
}

int vc_cpu_gdn_recurrence_only;

/* VERLC_GDN_RECURRENCE=1: the token-by-token recurrence in training too (comparisons) */
static int chunked(const vc_gdn_desc *d) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("VERLC_GDN_RECURRENCE");
        env = e && *e && strcmp(e, "0");
    }
    return vc_gdn_chunked(d) && !vc_cpu_gdn_recurrence_only && !env;
}

static void chunk_fwd_task(void *p, int64_t task) {
    gdn_ctx *c = p;
    int64_t i = task / c->d->n_v_head;
    vc_cpu_gdn_chunk_fwd(c, c->seqs ? c->seqs[i] : (int)i, (int)(task % c->d->n_v_head));
}

static void chunk_bwd_task(void *p, int64_t task) {
    gdn_ctx *c = p;
    int64_t i = task / c->d->n_k_head;
    vc_cpu_gdn_chunk_bwd(c, c->seqs ? c->seqs[i] : (int)i, (int)(task % c->d->n_k_head));
}

#define SHARE_BAD "gated delta rule: a sequence starts from a later one, or from one that starts from another (from)"

int vc_cpu_share_passes(int n, const int32_t *from, int *tap_of, int *seqs, int *n0) {
    int nt = 0, k = 0;
    for (int s = 0; s < n; s++) tap_of[s] = -1;
    for (int s = 0; s < n; s++) {
        int p = from[s];
        if (p >= 0 && (p >= s || from[p] >= 0)) return -1;
        if (p >= 0 && tap_of[p] < 0) tap_of[p] = nt++;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < n; s++)
            if ((from[s] >= 0) == pass) seqs[k++] = s;
        if (!pass) *n0 = k;
    }
    return nt;
}

int64_t *vc_cpu_ckpt_bases(int n_seq, const int64_t *cu, int64_t ckpt) {
    int64_t *b = vc_cpu_scratch((size_t)n_seq + 1, sizeof(int64_t), 1);
    for (int s = 0; b && s < n_seq; s++) b[s + 1] = b[s] + (cu[s + 1] - cu[s] + ckpt - 1) / ckpt;
    return b;
}
static int64_t *saved_bases(const vc_gdn_desc *d) { return vc_cpu_ckpt_bases(d->n_seq, d->cu, d->ckpt); }

void vc_cpu_gdn_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, const vc_gdn_desc *d) {
    int64_t *base = saved ? saved_bases(d) : NULL;
    if (saved && !base) return;
    gdn_ctx c = { .d = d, .o = o, .saved = saved, .q = q, .k = k, .v = v, .g = g, .beta = beta, .base = base };
    if (d->from) { /* the tapped sequences first, then those starting from their taps */
        void (*task)(void *, int64_t) = chunked(d) ? chunk_fwd_task : gdn_fwd_task;
        int n = d->n_seq, n0 = 0, *tap_of = vc_cpu_scratch(2 * (size_t)n, sizeof(int), 0), *seqs = tap_of + n;
        int nt = tap_of ? vc_cpu_share_passes(d->n_seq, d->from, tap_of, seqs, &n0) : 0;
        if (nt < 0) vc_cpu_fault(SHARE_BAD);
        c.tap = nt > 0 ? vc_cpu_scratch((size_t)nt * d->n_v_head * d->dk * d->dv, sizeof(float), 0) : NULL;
        if (nt >= 0 && (c.tap || !nt)) {
            c.tap_of = tap_of, c.seqs = seqs;
            vc_parallel((int64_t)n0 * d->n_v_head, task, &c);
            c.seqs = seqs + n0;
            vc_parallel((int64_t)(n - n0) * d->n_v_head, task, &c);
        }
        free(c.tap);
        free(tap_of);
    } else
        vc_parallel((int64_t)d->n_seq * d->n_v_head, chunked(d) ? chunk_fwd_task : gdn_fwd_task, &c);
    free(base);
}

/* ---- row kernels of the backward: sums over a row of dv in a fixed order (vc_gdn_dot's) ---- */
#define LANES VC_GDN_LANES
#define lanes_sum vc_gdn_lanes_sum
#define row_dot vc_gdn_dot

/* x . y, and z += a w (w: x or y, read in the same pass) */
static inline float row_dot_axpy(const float *x, const float *y, float *z, float a, const float *w, int n) {
    float acc[LANES] = { 0 };
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            acc[l] += x[j + l] * y[j + l];
            z[j + l] += a * w[j + l];
        }
    float s = lanes_sum(acc);
    for (; j < n; j++) {
        s += x[j] * y[j];
        z[j] += a * w[j];
    }
    return s;
}

/* the last step of a token's row a: with dSp = ds + ka dd, *sk = sp . dd and the return value dSp . sp (the decay's
 * gradient), then ds = e dSp (the gradient of the state before the token) */
static inline float row_decay(const float *sp, const float *dd, float *ds, float ka, float e, int n, float *sk) {
    float a1[LANES] = { 0 }, a2[LANES] = { 0 };
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            float gsp = ds[j + l] + ka * dd[j + l];
            a1[l] += sp[j + l] * dd[j + l];
            a2[l] += gsp * sp[j + l];
            ds[j + l] = e * gsp;
        }
    float s1 = lanes_sum(a1), s2 = lanes_sum(a2);
    for (; j < n; j++) {
        float gsp = ds[j] + ka * dd[j];
        s1 += sp[j] * dd[j];
        s2 += gsp * sp[j];
        ds[j] = e * gsp;
    }
    *sk = s1;
    return s2;
}

/* backward of one value head over one sequence, stretch by stretch from the last: the stretch's states are
 * recomputed from its kept one, then its tokens are walked back carrying dS, the gradient of the state after the
 * token */
static void gdn_bwd_head(gdn_ctx *c, int s, int h, float *buf) {
    const vc_gdn_desc *d = c->d;
    int dk = d->dk, dv = d->dv, nv = d->n_v_head, kh = h / (nv / d->n_k_head);
    int64_t SS = (int64_t)dk * dv, t0 = d->cu[s], L = d->cu[s + 1] - t0, C = d->ckpt;
    float *dS = buf, *Sp = dS + SS, *tmp = Sp + SS, *dd = tmp + dv, *gq = dd + dv, *gk = gq + dk, *hist = gk + dk;
    if (L == 0) return; /* no kept state either */
    /* shared starts: the gradient reaching this sequence's tap row R from the sequences starting there */
    const float *dtap = c->tap_of && c->tap_of[s] >= 0 ? c->tap + ((int64_t)c->tap_of[s] * nv + h) * SS : NULL;
    int64_t R = vc_gdn_tap(L, C);
    if (dtap && R == L) memcpy(dS, dtap, sizeof(float) * (size_t)SS);
    else memset(dS, 0, sizeof(float) * (size_t)SS);
    for (int64_t c0 = (L - 1) / C * C; c0 >= 0; c0 -= C) {
        int64_t n = L - c0 < C ? L - c0 : C;
        memcpy(hist, c->csaved + ((c->base[s] + c0 / C) * nv + h) * SS, sizeof(float) * (size_t)SS);
        for (int64_t i = 0; i + 1 < n; i++) { /* hist[i]: the state before token c0 + i */
            int64_t t = t0 + c0 + i;
            memcpy(hist + (i + 1) * SS, hist + i * SS, sizeof(float) * (size_t)SS);
            gdn_step(hist + (i + 1) * SS, NULL, c->k + (t * d->n_k_head + kh) * dk, c->v + (t * nv + h) * dv,
                     gate_at(c, t, h), d->gk, c->beta[t * nv + h], d->scale, NULL, dk, dv, tmp, d->no_delta);
        }
        for (int64_t i = n - 1; i >= 0; i--) {
            int64_t t = t0 + c0 + i;
            const float *q = c->q + (t * d->n_k_head + kh) * dk, *k = c->k + (t * d->n_k_head + kh) * dk;
            const float *v = c->v + (t * nv + h) * dv, *dy = c->dout + (t * nv + h) * dv;
            const float *gt = gate_at(c, t, h);
            float be = c->beta[t * nv + h], dgs = 0;
            for (int a = 0; a < dk; a++) { /* Sp = e P (gk: row a times e^g[a]) */
                float e = expf(gt[d->gk ? a : 0]);
                for (int j = 0; j < dv; j++) Sp[a * dv + j] = e * hist[i * SS + a * dv + j];
            }
            for (int j = 0; j < dv; j++) tmp[j] = 0; /* kv = Sp^T k, then r = v - kv (delta = beta r; no_delta: r = v) */
            for (int a = 0; a < dk && !d->no_delta; a++)
                for (int j = 0; j < dv; j++) tmp[j] += Sp[a * dv + j] * k[a];
            for (int j = 0; j < dv; j++) tmp[j] = v[j] - tmp[j];
            /* o = S_t^T (scale q) with S_t = Sp + k delta^T: dq = scale (Sp dy + k (delta . dy)), dS += (scale q) dy^T */
            float rdy = be * row_dot(tmp, dy, dv);
            for (int a = 0; a < dk; a++)
                gq[a] = (row_dot_axpy(Sp + a * dv, dy, dS + a * dv, q[a] * d->scale, dy, dv) + k[a] * rdy) * d->scale;
            for (int j = 0; j < dv; j++) dd[j] = 0; /* S_t = Sp + k delta^T: dk = dS delta, ddelta = dS^T k */
            for (int a = 0; a < dk; a++) gk[a] = be * row_dot_axpy(dS + a * dv, tmp, dd, k[a], dS + a * dv, dv);
            float dbeta = row_dot(dd, tmp, dv); /* delta = beta r: dv = beta ddelta, dbeta = ddelta . r, dkv = -beta ddelta */
            for (int j = 0; c->dv && j < dv; j++) c->dv[(t * nv + h) * dv + j] += be * dd[j];
            for (int j = 0; j < dv; j++) dd[j] = d->no_delta ? 0.0f : -be * dd[j];
            for (int a = 0; a < dk; a++) { /* kv = Sp^T k: dk += Sp dkv, dSp = dS + k dkv^T; dg; dS_prev = e dSp */
                float sk, e = expf(gt[d->gk ? a : 0]);
                float dga = row_decay(Sp + a * dv, dd, dS + a * dv, k[a], e, dv, &sk);
                gk[a] += sk;
                if (d->gk && c->dg) c->dg[(t * nv + h) * dk + a] += dga;
                else dgs += dga;
            }
            if (c->dq)
                for (int a = 0; a < dk; a++) c->dq[(t * d->n_k_head + kh) * dk + a] += gq[a];
            if (c->dk)
                for (int a = 0; a < dk; a++) c->dk[(t * d->n_k_head + kh) * dk + a] += gk[a];
            if (c->dg && !d->gk) c->dg[t * nv + h] += dgs;
            if (c->dbeta) c->dbeta[t * nv + h] += dbeta;
        }
        for (int64_t e = 0; dtap && c0 == R && e < SS; e++) dS[e] += dtap[e];
    }
    if (c->dinit && d->from[s] >= 0) /* the gradient of its starting state */
        memcpy(c->dinit + ((int64_t)s * nv + h) * SS, dS, sizeof(float) * (size_t)SS);
}

static void gdn_bwd_task(void *p, int64_t task) {
    gdn_ctx *c = p;
    const vc_gdn_desc *d = c->d;
    int64_t i = task / d->n_k_head;
    int s = c->seqs ? c->seqs[i] : (int)i, kh = (int)(task % d->n_k_head), r = d->n_v_head / d->n_k_head;
    int64_t SS = (int64_t)d->dk * d->dv;
    float *buf = vc_cpu_scratch(sizeof(float) * (size_t)(SS * (2 + d->ckpt) + 2 * d->dv + 2 * d->dk), 1, 0);
    if (!buf) {
        c->fail = 1;
        return;
    }
    for (int h = kh * r; h < (kh + 1) * r; h++) gdn_bwd_head(c, s, h, buf); /* a q/k head's value heads in order */
    free(buf);
}

/* the backward with shared starts: the sequences starting from others' taps first (the gradients of their starts into
 * dinit), those gradients summed per tap in sequence order, then the tapped sequences and the rest */
static void share_bwd(gdn_ctx *c) {
    const vc_gdn_desc *d = c->d;
    int n = d->n_seq, n0 = 0, *tap_of = vc_cpu_scratch(2 * (size_t)n, sizeof(int), 0), *seqs = tap_of + n;
    int nt = tap_of ? vc_cpu_share_passes(d->n_seq, d->from, tap_of, seqs, &n0) : 0;
    if (nt < 0) vc_cpu_fault(SHARE_BAD);
    size_t SH = (size_t)d->n_v_head * d->dk * d->dv; /* one sequence's states */
    float *dinit = nt > 0 ? vc_cpu_scratch((size_t)n * SH, sizeof(float), 1) : NULL;
    c->dinit = dinit;
    c->tap = nt > 0 ? vc_cpu_scratch((size_t)nt * SH, sizeof(float), 1) : NULL;
    void (*task)(void *, int64_t) = chunked(d) ? chunk_bwd_task : gdn_bwd_task;
    if (nt >= 0 && ((dinit && c->tap) || !nt)) {
        c->seqs = seqs + n0;
        vc_parallel((int64_t)(n - n0) * d->n_k_head, task, c);
        for (int s = 0; s < n; s++) /* (sequence order: the same sums on any thread count) */
            if (d->from[s] >= 0) {
                float *t = c->tap + (size_t)tap_of[d->from[s]] * SH, *x = dinit + (size_t)s * SH;
                for (size_t e = 0; e < SH; e++) t[e] += x[e];
            }
        c->tap_of = tap_of, c->seqs = seqs, c->dinit = NULL;
        vc_parallel((int64_t)n0 * d->n_k_head, task, c);
    }
    free(c->tap);
    free(dinit);
    free(tap_of);
}

void vc_cpu_gdn_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout,
                           const float *saved, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, const vc_gdn_desc *d) {
    int64_t *base = saved_bases(d);
    if (!base) return;
    gdn_ctx c = { .d = d, .dq = dq, .dk = dk, .dv = dv, .dg = dg, .dbeta = dbeta, .dout = dout, .csaved = saved,
                  .q = q, .k = k, .v = v, .g = g, .beta = beta, .base = base };
    if (d->from)
        share_bwd(&c);
    else
        vc_parallel((int64_t)d->n_seq * d->n_k_head, chunked(d) ? chunk_bwd_task : gdn_bwd_task, &c);
    free(base);
}

/* ---- the log decay ---- */
void vc_cpu_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp) {
    int64_t C = (int64_t)nh * grp;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) g[t * C + c] = vc_gdn_gate_f(a[t * C + c], A_log[c / grp], dt_bias[c]);
}

void vc_cpu_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a,
                                const float *A_log, const float *dt_bias, int64_t T, int nh, int grp) {
    int64_t C = (int64_t)nh * grp;
    for (int h = 0; h < nh; h++) {
        float sA = 0;
        for (int64_t c = (int64_t)h * grp; c < (int64_t)(h + 1) * grp; c++) {
            float cA = 0, sdt = 0;
            for (int64_t t = 0; t < T; t++) {
                float gA, gdt = vc_gdn_gate_d(a[t * C + c], A_log[h], dt_bias[c], &gA) * dg[t * C + c];
                if (da) da[t * C + c] += gdt;
                cA += gA * dg[t * C + c];
                sdt += gdt;
            }
            sA += cA;
            if (ddt_bias) ddt_bias[c] += sdt;
        }
        if (dA_log) dA_log[h] += sA;
    }
}

/* ---- depthwise causal conv1d: tasks over blocks of channels ---- */
#define CONV_BLOCK 64
#define CONV_MAX_K 64
typedef struct {
    const vc_conv_desc *d;
    float *y, *dx, *dw;
    const float *x, *w, *dy;
} conv_ctx;

static const float conv_zero[CONV_BLOCK];

/* row i of sequence s from channel c0 on (i < 0: the state's row, or zeros) */
static inline const float *conv_row(const conv_ctx *c, int s, int64_t i, int64_t c0) {
    const vc_conv_desc *d = c->d;
    if (i >= 0) return c->x + (d->cu[s] + i) * d->C + c0;
    const float *st = d->state ? d->state[s] : NULL;
    return st ? st + (d->K - 1 + i) * d->C + c0 : conv_zero;
}

/* w's taps of channels [c0, c0 + nb) by tap: wt[j][ch] */
static void conv_taps(const conv_ctx *c, int64_t c0, int nb, float wt[][CONV_BLOCK]) {
    for (int j = 0; j < c->d->K; j++)
        for (int ch = 0; ch < nb; ch++) wt[j][ch] = c->w[(c0 + ch) * c->d->K + j];
}

/* tasks over blocks of 64 channels, each row's channels side by side (each output still sums its taps in order) */
static void conv_fwd_task(void *p, int64_t b) {
    conv_ctx *c = p;
    const vc_conv_desc *d = c->d;
    int K = d->K;
    int64_t c0 = b * CONV_BLOCK, c1 = c0 + CONV_BLOCK < d->C ? c0 + CONV_BLOCK : d->C;
    int nb = (int)(c1 - c0);
    float wt[CONV_MAX_K][CONV_BLOCK], keep[CONV_MAX_K][CONV_BLOCK];
    conv_taps(c, c0, nb, wt);
    for (int s = 0; s < d->n_seq; s++) {
        int64_t L = d->cu[s + 1] - d->cu[s];
        for (int64_t t = 0; t < L; t++) {
            float acc[CONV_BLOCK] = { 0 };
            for (int j = 0; j < K; j++) {
                const float *xr = conv_row(c, s, t - K + 1 + j, c0);
                for (int ch = 0; ch < nb; ch++) acc[ch] += wt[j][ch] * xr[ch];
            }
            memcpy(c->y + (d->cu[s] + t) * d->C + c0, acc, sizeof(float) * (size_t)nb);
        }
        float *st = d->state ? d->state[s] : NULL;
        if (!st) continue;
        for (int r = 0; r < K - 1; r++) memcpy(keep[r], conv_row(c, s, L - (K - 1) + r, c0), sizeof(float) * (size_t)nb);
        for (int r = 0; r < K - 1; r++) memcpy(st + r * d->C + c0, keep[r], sizeof(float) * (size_t)nb);
    }
}

static void conv_bwd_task(void *p, int64_t b) {
    conv_ctx *c = p;
    const vc_conv_desc *d = c->d;
    int K = d->K;
    int64_t C = d->C, c0 = b * CONV_BLOCK, c1 = c0 + CONV_BLOCK < C ? c0 + CONV_BLOCK : C;
    int nb = (int)(c1 - c0);
    float wt[CONV_MAX_K][CONV_BLOCK], dw[CONV_MAX_K][CONV_BLOCK];
    conv_taps(c, c0, nb, wt);
    memset(dw, 0, sizeof dw);
    for (int s = 0; s < d->n_seq; s++) {
        int64_t t0 = d->cu[s], L = d->cu[s + 1] - t0;
        for (int64_t i = 0; c->dx && i < L; i++) {
            float acc[CONV_BLOCK] = { 0 };
            for (int j = 0; j < K; j++) {
                int64_t t = i + K - 1 - j;
                if (t >= L) continue;
                const float *g = c->dy + (t0 + t) * C + c0;
                for (int ch = 0; ch < nb; ch++) acc[ch] += wt[j][ch] * g[ch];
            }
            float *dx = c->dx + (t0 + i) * C + c0;
            for (int ch = 0; ch < nb; ch++) dx[ch] += acc[ch];
        }
        for (int64_t t = 0; c->dw && t < L; t++) {
            const float *g = c->dy + (t0 + t) * C + c0;
            for (int j = 0; j < K; j++) {
                int64_t i = t - K + 1 + j;
                if (i < 0) continue;
                const float *x = c->x + (t0 + i) * C + c0;
                for (int ch = 0; ch < nb; ch++) dw[j][ch] += g[ch] * x[ch];
            }
        }
    }
    for (int ch = 0; c->dw && ch < nb; ch++)
        for (int j = 0; j < K; j++) c->dw[(c0 + ch) * K + j] += dw[j][ch];
}

void vc_cpu_conv1d_fwd(float *y, const float *x, const float *w, const vc_conv_desc *d) {
    conv_ctx c = { .d = d, .y = y, .x = x, .w = w };
    if (d->K > CONV_MAX_K) return; /* refused where the model is read */
    vc_parallel((d->C + CONV_BLOCK - 1) / CONV_BLOCK, conv_fwd_task, &c);
}

void vc_cpu_conv1d_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                              const vc_conv_desc *d) {
    conv_ctx c = { .d = d, .dx = dx, .dw = dw, .dy = dy, .x = x, .w = w };
    if (d->K > CONV_MAX_K) return;
    vc_parallel((d->C + CONV_BLOCK - 1) / CONV_BLOCK, conv_bwd_task, &c);
}

/* ---- per-channel scale and bias broadcast over rows ---- */
typedef struct {
    float *y, *dx, *dw, *db;
    const float *x, *w, *b, *dy;
    int64_t R, C, grp;
} affine_ctx;

#define AFFINE_ROWS 64
static void affine_rows_task(void *p, int64_t blk) {
    const affine_ctx *c = p;
    int64_t r1 = (blk + 1) * AFFINE_ROWS < c->R ? (blk + 1) * AFFINE_ROWS : c->R;
    for (int64_t r = blk * AFFINE_ROWS; r < r1; r++)
        for (int64_t j = 0; j < c->C; j++) {
            float w = c->w ? c->w[j / c->grp] : 1.0f;
            if (c->dy) c->dx[r * c->C + j] += c->dy[r * c->C + j] * w;
            else c->y[r * c->C + j] = c->x[r * c->C + j] * w + (c->b ? c->b[j / c->grp] : 0.0f);
        }
}

static void affine_sums_task(void *p, int64_t k) { /* channel k: rows ascending, its columns ascending within a row */
    const affine_ctx *c = p;
    float sw = 0, sb = 0;
    for (int64_t r = 0; r < c->R; r++)
        for (int64_t j = k * c->grp; j < (k + 1) * c->grp; j++) {
            sw += c->dy[r * c->C + j] * c->x[r * c->C + j];
            sb += c->dy[r * c->C + j];
        }
    if (c->dw) c->dw[k] += sw;
    if (c->db) c->db[k] += sb;
}

void vc_cpu_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C, int64_t grp) {
    affine_ctx c = { .y = y, .x = x, .w = w, .b = b, .R = R, .C = C, .grp = grp };
    vc_parallel((R + AFFINE_ROWS - 1) / AFFINE_ROWS, affine_rows_task, &c);
}

void vc_cpu_affine_cols_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                            int64_t C, int64_t grp) {
    affine_ctx c = { .dx = dx, .dw = dw, .db = db, .dy = dy, .x = x, .w = w, .R = R, .C = C, .grp = grp };
    if (dx) vc_parallel((R + AFFINE_ROWS - 1) / AFFINE_ROWS, affine_rows_task, &c);
    if (dw || db) vc_parallel(C / grp, affine_sums_task, &c);
}
