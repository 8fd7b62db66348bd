/* Mamba 1's selective scan on the CPU (semantics in src/tensor/backend.h vc_ssm_desc): the forward keeps each
 * channel's state every d->ckpt rows; the backward recomputes each stretch from its kept state and walks it back.
 * Tasks are blocks of channels; dB and dC (sums over the channels) are summed per block, then over the blocks in
 * order, so every sum runs in a fixed order. */
#include "core/vmath.h"
#include "cpu.h"
#include "verlc/pool.h"
#include <math.h>
#include <string.h>

#define SSM_BLOCK 64 /* channels per task */

typedef struct {
    const vc_ssm_desc *d;
    float *y, *saved, *dx, *ddt, *dA, *part; /* part: [blocks, T, 2 N] partial dB | dC */
    const float *x, *dt, *A_log, *B, *C, *dy, *csaved;
    int64_t *base; /* [n_seq + 1]: each sequence's first kept state */
    /* shared starts (d->from): tap_of [n_seq] each sequence's tap slot (-1: none), tap [slots, I, N] the tapped
     * sequences' final states; seqs [n_seq] those starting from zero (n0 of them), then the others */
    const int *tap_of, *seqs;
    float *tap;
    int n0, nt, fail;
} ssm_ctx;

/* a = exp(A dt) over the state (vc_exp8's lanes: the scan's exps were most of its time) */
static inline void decays(float *a, const float *A, float dt, int N) {
    for (int n = 0; n < N; n++) a[n] = A[n] * dt;
    vc_exp_shift(a, a, N, 0.0f);
}

/* one row of one channel: h = exp(A dt) h + dt x B; returns C . h (a: [N] scratch) */
static float ssm_step(float *h, const float *A, float dt, float x, const float *B, const float *C, int N, float *a) {
    float y = 0;
    decays(a, A, dt, N);
    for (int n = 0; n < N; n++) {
        h[n] = a[n] * h[n] + dt * x * B[n];
        y += C[n] * h[n];
    }
    return y;
}

static void ssm_fwd_task(void *p, int64_t task) {
    ssm_ctx *c = p;
    const vc_ssm_desc *d = c->d;
    int64_t nb = (d->I + SSM_BLOCK - 1) / SSM_BLOCK, I = d->I;
    int s = c->seqs ? c->seqs[task / nb] : (int)(task / nb), N = d->N;
    int64_t i0 = task % nb * SSM_BLOCK, i1 = i0 + SSM_BLOCK < I ? i0 + SSM_BLOCK : I, t0 = d->cu[s], t1 = d->cu[s + 1];
    float *h = vc_cpu_scratch(sizeof(float) * 3 * (size_t)N, 1, 0), *A = h ? h + N : NULL, *a = h ? h + 2 * N : NULL;
    if (!h) {
        c->fail = 1;
        return;
    }
    float *st = d->state ? d->state[s] : NULL;
    const float *init = d->from && d->from[s] >= 0 ? c->tap + (int64_t)c->tap_of[d->from[s]] * I * N : NULL;
    float *tap = c->tap_of && c->tap_of[s] >= 0 ? c->tap + (int64_t)c->tap_of[s] * I * N : NULL;
    for (int64_t i = i0; i < i1; i++) {
        for (int n = 0; n < N; n++) {
            A[n] = -expf(c->A_log[i * N + n]);
            h[n] = st ? st[i * N + n] : init ? init[i * N + n] : 0.0f;
        }
        for (int64_t t = t0; t < t1; t++) {
            if (c->saved && (t - t0) % d->ckpt == 0)
                memcpy(c->saved + ((c->base[s] + (t - t0) / d->ckpt) * I + i) * N, h, sizeof(float) * (size_t)N);
            c->y[t * I + i] = ssm_step(h, A, c->dt[t * I + i], c->x[t * I + i], c->B + t * N, c->C + t * N, N, a);
        }
        if (st) memcpy(st + i * N, h, sizeof(float) * (size_t)N);
        if (tap) memcpy(tap + i * N, h, sizeof(float) * (size_t)N);
    }
    free(h);
}

static int64_t *ssm_bases(const vc_ssm_desc *d) { return vc_cpu_ckpt_bases(d->n_seq, d->cu, d->ckpt); }

#define SHARE_BAD "selective scan: a sequence starts from a later one, or from one that starts from another (from)"

/* shared starts: c's tap slots and sequence order in buf [2 n_seq], and (taps) the taps' memory; 0 when from is
 * malformed or no memory */
static int ssm_share(ssm_ctx *c, int *buf, int taps) {
    const vc_ssm_desc *d = c->d;
    int nt = vc_cpu_share_passes(d->n_seq, d->from, buf, buf + d->n_seq, &c->n0);
    if (nt < 0) vc_cpu_fault(SHARE_BAD);
    c->tap_of = buf, c->seqs = buf + d->n_seq, c->nt = nt;
    c->tap = taps && nt > 0 ? vc_cpu_scratch((size_t)nt * (size_t)(d->I * d->N), sizeof(float), 0) : NULL;
    return nt == 0 || (nt > 0 && (c->tap || !taps));
}

void vc_cpu_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                    const float *C, const vc_ssm_desc *d) {
    int64_t *base = saved ? ssm_bases(d) : NULL;
    if (saved && !base) return;
    ssm_ctx c = { .d = d, .y = y, .saved = saved, .x = x, .dt = dt, .A_log = A_log, .B = B, .C = C, .base = base };
    int64_t nb = (d->I + SSM_BLOCK - 1) / SSM_BLOCK;
    if (d->from) { /* the tapped sequences first, then those starting from their taps */
        int *buf = vc_cpu_scratch(2 * (size_t)d->n_seq + 1, sizeof(int), 0);
        if (buf && ssm_share(&c, buf, 1)) {
            vc_parallel((int64_t)c.n0 * nb, ssm_fwd_task, &c);
            c.seqs += c.n0;
            vc_parallel((int64_t)(d->n_seq - c.n0) * nb, ssm_fwd_task, &c);
        }
        free(c.tap);
        free(buf);
    } else
        vc_parallel((int64_t)d->n_seq * nb, ssm_fwd_task, &c);
    free(base);
}

/* channel i over sequence s, stretch by stretch from the last; buf: hist [ckpt, N], dh, A, a [N]; the gradient of its
 * final state from dh0 (NULL: zero), that of its start added to dstart (NULL: not wanted) */
static void ssm_bwd_channel(ssm_ctx *c, int s, int64_t i, float *buf, float *part, float *dA, const float *dh0,
                            float *dstart) {
    const vc_ssm_desc *d = c->d;
    int N = d->N;
    int64_t I = d->I, t0 = d->cu[s], L = d->cu[s + 1] - t0, K = d->ckpt, T0 = d->cu[0];
    float *hist = buf, *dh = hist + K * N, *A = dh + N, *a = A + N;
    for (int n = 0; n < N; n++) A[n] = -expf(c->A_log[i * N + n]), dh[n] = dh0 ? dh0[n] : 0.0f;
    for (int64_t c0 = L ? (L - 1) / K * K : -1; c0 >= 0; c0 -= K) {
        int64_t m = L - c0 < K ? L - c0 : K;
        memcpy(hist, c->csaved + ((c->base[s] + c0 / K) * I + i) * N, sizeof(float) * (size_t)N);
        for (int64_t j = 0; j + 1 < m; j++) { /* hist[j]: the state before row c0 + j */
            int64_t t = t0 + c0 + j;
            memcpy(hist + (j + 1) * N, hist + j * N, sizeof(float) * (size_t)N);
            ssm_step(hist + (j + 1) * N, A, c->dt[t * I + i], c->x[t * I + i], c->B + t * N, c->C + t * N, N, a);
        }
        for (int64_t j = m - 1; j >= 0; j--) {
            int64_t t = t0 + c0 + j;
            const float *hp = hist + j * N, *B = c->B + t * N, *C = c->C + t * N;
            float dtv = c->dt[t * I + i], xv = c->x[t * I + i], gy = c->dy[t * I + i], gx = 0, gdt = 0;
            float *pb = part + (t - T0) * 2 * N, *pc = pb + N;
            decays(a, A, dtv, N);
            for (int n = 0; n < N; n++) {
                float h = a[n] * hp[n] + dtv * xv * B[n];
                pc[n] += gy * h;              /* y = C . h */
                float g = dh[n] + gy * C[n]; /* the gradient of h after row t */
                float da = g * hp[n];        /* h = a h_prev + dt x B */
                gdt += da * a[n] * A[n] + g * xv * B[n];
                dA[n] += da * a[n] * dtv * A[n]; /* a = exp(A dt), A = -exp(A_log) */
                pb[n] += g * dtv * xv;
                gx += g * dtv * B[n];
                dh[n] = a[n] * g;
            }
            if (c->dx) c->dx[t * I + i] += gx;
            if (c->ddt) c->ddt[t * I + i] += gdt;
        }
    }
    for (int n = 0; dstart && n < N; n++) dstart[n] += dh[n];
}

static void ssm_bwd_task(void *p, int64_t blk) {
    ssm_ctx *c = p;
    const vc_ssm_desc *d = c->d;
    int N = d->N;
    int64_t i0 = blk * SSM_BLOCK, i1 = i0 + SSM_BLOCK < d->I ? i0 + SSM_BLOCK : d->I;
    int64_t T = d->cu[d->n_seq] - d->cu[0];
    int nt = c->nt;
    float *buf = vc_cpu_scratch(sizeof(float) * (size_t)((d->ckpt + 4 + nt) * N), 1, 0);
    if (!buf) {
        c->fail = 1;
        return;
    }
    float *part = c->part + blk * T * 2 * N, *dA = buf + (d->ckpt + 3) * N, *dtap = dA + N;
    for (int64_t i = i0; i < i1; i++) {
        for (int n = 0; n < N; n++) dA[n] = 0;
        if (!c->seqs) {
            for (int s = 0; s < d->n_seq; s++) ssm_bwd_channel(c, s, i, buf, part, dA, NULL, NULL);
        } else { /* shared starts: the sequences starting from taps first, their starts' gradients summed per tap in
                  * sequence order, then the rest from those */
            memset(dtap, 0, sizeof(float) * (size_t)(nt * N));
            for (int k = c->n0; k < d->n_seq; k++) {
                int s = c->seqs[k];
                ssm_bwd_channel(c, s, i, buf, part, dA, NULL, dtap + c->tap_of[d->from[s]] * N);
            }
            for (int k = 0; k < c->n0; k++) {
                int s = c->seqs[k];
                ssm_bwd_channel(c, s, i, buf, part, dA, c->tap_of[s] >= 0 ? dtap + c->tap_of[s] * N : NULL, NULL);
            }
        }
        if (c->dA)
            for (int n = 0; n < N; n++) c->dA[i * N + n] += dA[n];
    }
    free(buf);
}

void vc_cpu_ssm_bwd(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                    const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                    const vc_ssm_desc *d) {
    int64_t nb = (d->I + SSM_BLOCK - 1) / SSM_BLOCK, T = d->cu[d->n_seq] - d->cu[0], N = d->N, T0 = d->cu[0];
    int64_t *base = ssm_bases(d);
    float *part = vc_cpu_scratch((size_t)(nb * T * 2 * N) + 1, sizeof(float), 1);
    ssm_ctx c = { .d = d, .dx = dx, .ddt = ddt, .dA = dA_log, .part = part, .x = x, .dt = dt, .A_log = A_log,
                  .B = B, .C = C, .dy = dy, .csaved = saved, .base = base };
    int *sbuf = d->from ? vc_cpu_scratch(2 * (size_t)d->n_seq + 1, sizeof(int), 0) : NULL;
    int ok = !d->from || (sbuf && ssm_share(&c, sbuf, 0)); /* (the backward needs only the slots) */
    if (base && part && ok) {
        vc_parallel(nb, ssm_bwd_task, &c);
        for (int64_t t = 0; t < T; t++) /* the channel blocks' partial dB, dC in order */
            for (int64_t n = 0; n < N; n++) {
                float sb = 0, sc = 0;
                for (int64_t b = 0; b < nb; b++) {
                    sb += part[(b * T + t) * 2 * N + n];
                    sc += part[(b * T + t) * 2 * N + N + n];
                }
                if (dB) dB[(T0 + t) * N + n] += sb;
                if (dC) dC[(T0 + t) * N + n] += sc;
            }
    }
    free(sbuf);
    free(base);
    free(part);
}
