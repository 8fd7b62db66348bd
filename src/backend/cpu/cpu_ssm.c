/* Mamba 1's selective scan on the CPU (semantics in src/tensor/backend.h vc_ssm_desc): the forward keeps each
 * channel's state every d->ckpt rows; the backward recomputes each stretch from its kept state and walks it back.
 * Tasks are blocks of channels; dB and dC (sums over the channels) are summed per block, then over the blocks in
 * order, so every sum runs in a fixed order. */
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
    int fail;
} ssm_ctx;

/* one row of one channel: h = exp(A dt) h + dt x B; returns C . h */
static float ssm_step(float *h, const float *A, float dt, float x, const float *B, const float *C, int N) {
    float y = 0;
    for (int n = 0; n < N; n++) {
        h[n] = expf(A[n] * dt) * h[n] + dt * x * B[n];
        y += C[n] * h[n];
    }
    return y;
}

static void ssm_fwd_task(void *p, int64_t task) {
    ssm_ctx *c = p;
    const vc_ssm_desc *d = c->d;
    int64_t nb = (d->I + SSM_BLOCK - 1) / SSM_BLOCK, I = d->I;
    int s = (int)(task / nb), N = d->N;
    int64_t i0 = task % nb * SSM_BLOCK, i1 = i0 + SSM_BLOCK < I ? i0 + SSM_BLOCK : I, t0 = d->cu[s], t1 = d->cu[s + 1];
    float *h = vc_cpu_scratch(sizeof(float) * 2 * (size_t)N, 1, 0), *A = h ? h + N : NULL;
    if (!h) {
        c->fail = 1;
        return;
    }
    float *st = d->state ? d->state[s] : NULL;
    for (int64_t i = i0; i < i1; i++) {
        for (int n = 0; n < N; n++) {
            A[n] = -expf(c->A_log[i * N + n]);
            h[n] = st ? st[i * N + n] : 0.0f;
        }
        for (int64_t t = t0; t < t1; t++) {
            if (c->saved && (t - t0) % d->ckpt == 0)
                memcpy(c->saved + ((c->base[s] + (t - t0) / d->ckpt) * I + i) * N, h, sizeof(float) * (size_t)N);
            c->y[t * I + i] = ssm_step(h, A, c->dt[t * I + i], c->x[t * I + i], c->B + t * N, c->C + t * N, N);
        }
        if (st) memcpy(st + i * N, h, sizeof(float) * (size_t)N);
    }
    free(h);
}

static int64_t *ssm_bases(const vc_ssm_desc *d) { return vc_cpu_ckpt_bases(d->n_seq, d->cu, d->ckpt); }

void vc_cpu_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                    const float *C, const vc_ssm_desc *d) {
    int64_t *base = saved ? ssm_bases(d) : NULL;
    if (saved && !base) return;
    ssm_ctx c = { .d = d, .y = y, .saved = saved, .x = x, .dt = dt, .A_log = A_log, .B = B, .C = C, .base = base };
    vc_parallel((int64_t)d->n_seq * ((d->I + SSM_BLOCK - 1) / SSM_BLOCK), ssm_fwd_task, &c);
    free(base);
}

/* channel i over sequence s, stretch by stretch from the last; buf: hist [ckpt, N], dh, A [N] */
static void ssm_bwd_channel(ssm_ctx *c, int s, int64_t i, float *buf, float *part, float *dA) {
    const vc_ssm_desc *d = c->d;
    int N = d->N;
    int64_t I = d->I, t0 = d->cu[s], L = d->cu[s + 1] - t0, K = d->ckpt, T0 = d->cu[0];
    float *hist = buf, *dh = hist + K * N, *A = dh + N;
    for (int n = 0; n < N; n++) A[n] = -expf(c->A_log[i * N + n]), dh[n] = 0;
    for (int64_t c0 = L ? (L - 1) / K * K : -1; c0 >= 0; c0 -= K) {
        int64_t m = L - c0 < K ? L - c0 : K;
        memcpy(hist, c->csaved + ((c->base[s] + c0 / K) * I + i) * N, sizeof(float) * (size_t)N);
        for (int64_t j = 0; j + 1 < m; j++) { /* hist[j]: the state before row c0 + j */
            int64_t t = t0 + c0 + j;
            memcpy(hist + (j + 1) * N, hist + j * N, sizeof(float) * (size_t)N);
            ssm_step(hist + (j + 1) * N, A, c->dt[t * I + i], c->x[t * I + i], c->B + t * N, c->C + t * N, N);
        }
        for (int64_t j = m - 1; j >= 0; j--) {
            int64_t t = t0 + c0 + j;
            const float *hp = hist + j * N, *B = c->B + t * N, *C = c->C + t * N;
            float dtv = c->dt[t * I + i], xv = c->x[t * I + i], gy = c->dy[t * I + i], gx = 0, gdt = 0;
            float *pb = part + (t - T0) * 2 * N, *pc = pb + N;
            for (int n = 0; n < N; n++) {
                float a = expf(A[n] * dtv), h = a * hp[n] + dtv * xv * B[n];
                pc[n] += gy * h;              /* y = C . h */
                float g = dh[n] + gy * C[n]; /* the gradient of h after row t */
                float da = g * hp[n];        /* h = a h_prev + dt x B */
                gdt += da * a * A[n] + g * xv * B[n];
                dA[n] += da * a * dtv * A[n]; /* a = exp(A dt), A = -exp(A_log) */
                pb[n] += g * dtv * xv;
                gx += g * dtv * B[n];
                dh[n] = a * g;
            }
            if (c->dx) c->dx[t * I + i] += gx;
            if (c->ddt) c->ddt[t * I + i] += gdt;
        }
    }
}

static void ssm_bwd_task(void *p, int64_t blk) {
    ssm_ctx *c = p;
    const vc_ssm_desc *d = c->d;
    int N = d->N;
    int64_t i0 = blk * SSM_BLOCK, i1 = i0 + SSM_BLOCK < d->I ? i0 + SSM_BLOCK : d->I;
    int64_t T = d->cu[d->n_seq] - d->cu[0];
    float *buf = vc_cpu_scratch(sizeof(float) * (size_t)((d->ckpt + 3) * N), 1, 0);
    if (!buf) {
        c->fail = 1;
        return;
    }
    float *part = c->part + blk * T * 2 * N, *dA = buf + (d->ckpt + 2) * N;
    for (int64_t i = i0; i < i1; i++) {
        for (int n = 0; n < N; n++) dA[n] = 0;
        for (int s = 0; s < d->n_seq; s++) ssm_bwd_channel(c, s, i, buf, part, dA);
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
    if (base && part) {
        ssm_ctx c = { .d = d, .dx = dx, .ddt = ddt, .dA = dA_log, .part = part, .x = x, .dt = dt, .A_log = A_log,
                      .B = B, .C = C, .dy = dy, .csaved = saved, .base = base };
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
    free(base);
    free(part);
}
