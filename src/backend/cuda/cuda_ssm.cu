/* CUDA kernels of Mamba 1's selective scan (semantics in src/tensor/backend.h vc_ssm_desc, reference in
 * src/backend/cpu/cpu_ssm.c). Forward: a thread per (sequence, channel) walks its rows with the channel's state
 * [N] in shared memory; with shared starts (d->from) the sequences others start from run first, keeping their final
 * states, then the others from those. Backward: a thread per channel walks every sequence from its last row, recomputing each
 * stretch of d->ckpt rows from the kept state into global scratch; dA_log is the thread's own sum; dB and dC, sums
 * over the channels, are reduced per row within the block (warp shuffles, then the block's warps in order) into
 * per-block partials that a second kernel adds in block order. Every sum runs in a fixed order and nothing uses
 * float atomics: the same bits run to run. */
#include "cuda_internal.h"
#include <stdlib.h>

#define ST 128       /* threads (channels) per block */
#define SSM_NMAX 64  /* the largest state the kernels take */
#define GT 256

struct ssm_args {
    seq_tabs tab;
    const float *x, *dt, *A_log, *B, *C, *dy, *saved;
    float *y, *keep;                   /* forward: outputs, kept states (NULL: none) */
    float *dx, *ddt, *dA, *part, *hist; /* backward: += outputs, [blocks, T, 2 N] partials, [I, ckpt, N] recomputed */
    int n_seq, N;
    int64_t I, ckpt, T0, T;
    /* shared starts (d->from; vc_cu_share_setup): from and tap_of [n_seq], tap [n_tap, I, N] the tapped sequences'
     * final states (forward) or their gradients (backward, zeroed first); pass: the forward's sequences starting from
     * zero (0) or from a tap (1) */
    const int *from, *tap_of;
    float *tap;
    int pass;
};

/* sequence s's tapped state (or its gradient) of channel i, or NULL when it has none */
__device__ __forceinline__ float *ssm_tap(const ssm_args &p, int s, int64_t i) {
    return p.tap_of && s >= 0 && p.tap_of[s] >= 0 ? p.tap + ((int64_t)p.tap_of[s] * p.I + i) * p.N : NULL;
}

__global__ void k_ssm_fwd(ssm_args p) {
    extern __shared__ float ssm_sh[];
    const int N = p.N, s = blockIdx.y;
    const int64_t i = (int64_t)blockIdx.x * ST + threadIdx.x, I = p.I;
    if (i >= I || (p.from && (p.from[s] >= 0) != p.pass)) return; /* (past I, or another pass's sequence) */
    float *h = ssm_sh + threadIdx.x * (N + 1);
    float *st = p.tab.state[s] ? p.tab.state[s] + i * N : NULL;
    const float *init = p.from && p.from[s] >= 0 ? ssm_tap(p, p.from[s], i) : NULL;
    float *tap = ssm_tap(p, s, i);
    for (int n = 0; n < N; n++) h[n] = st ? st[n] : init ? init[n] : 0.0f;
    const int64_t t0 = p.tab.cu[s], t1 = p.tab.cu[s + 1];
    for (int64_t t = t0; t < t1; t++) {
        if (p.keep && (t - t0) % p.ckpt == 0) {
            float *kp = p.keep + ((p.tab.base[s] + (t - t0) / p.ckpt) * I + i) * N;
            for (int n = 0; n < N; n++) kp[n] = h[n];
        }
        const float dtv = p.dt[t * I + i], xv = p.x[t * I + i], *B = p.B + t * N, *C = p.C + t * N;
        float y = 0;
        for (int n = 0; n < N; n++) { /* the CPU's ssm_step */
            float hn = expf(-expf(p.A_log[i * N + n]) * dtv) * h[n] + dtv * xv * B[n];
            h[n] = hn;
            y += C[n] * hn;
        }
        p.y[t * I + i] = y;
    }
    if (st)
        for (int n = 0; n < N; n++) st[n] = h[n];
    if (tap)
        for (int n = 0; n < N; n++) tap[n] = h[n];
}

static int ssm_check(const vc_ssm_desc *d, const char *op) {
    if (d->I <= 0 || d->N <= 0 || d->N > SSM_NMAX || d->ckpt <= 0) {
        vc_cu_fail(VC_ERR_ARG, op, "channel count, state size (1..64) or ckpt out of range");
        return 0;
    }
    return 1;
}

void vc_cu_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                   const float *C, const vc_ssm_desc *d) {
    const char *op = "selective scan forward";
    if (!vc_cu_begin(op) || d->n_seq <= 0 || !ssm_check(d, op)) return;
    ssm_args p = {};
    p.x = x, p.dt = dt, p.A_log = A_log, p.B = B, p.C = C, p.y = y, p.keep = saved;
    p.n_seq = d->n_seq, p.N = d->N, p.I = d->I, p.ckpt = d->ckpt;
    void *tabs = NULL;
    if (!vc_cu_seq_tabs(d->dev_tabs, d->n_seq, d->cu, saved ? d->ckpt : 0, d->state, &p.tab, &tabs, op)) return;
    if (vc_cu_share_setup(d->n_seq, d->from, (size_t)(d->I * d->N), &p.from, &p.tap_of, &p.tap, op) >= 0) {
        dim3 grid((unsigned)((d->I + ST - 1) / ST), (unsigned)d->n_seq);
        size_t sh = (size_t)ST * (d->N + 1) * sizeof(float);
        cudaFuncSetAttribute(k_ssm_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        k_ssm_fwd<<<grid, ST, sh, vc_cu_stream()>>>(p);
        if (p.from) { /* then the sequences starting from the taps the first pass kept */
            p.pass = 1;
            k_ssm_fwd<<<grid, ST, sh, vc_cu_stream()>>>(p);
        }
        vc_cu_end(op);
    }
    vc_cu_scratch_free((void *)p.from);
    vc_cu_scratch_free(p.tap);
    vc_cu_scratch_free(tabs);
}

/* the block's sum of v (each thread's) into out (thread 0 of warp w writes red[w]; the caller syncs and sums) */
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* row t's contributions of every channel of the block to dB and dC: each warp's sum, then the warps in order */
__device__ void ssm_row_partial(const ssm_args &p, float *red, const float *cb, const float *cc, int64_t t) {
    const int N = p.N, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int n = 0; n < N; n++) {
        float sb = warp_sum(cb[n]), sc = warp_sum(cc[n]);
        if (lane == 0) red[w * 2 * N + n] = sb, red[w * 2 * N + N + n] = sc;
    }
    __syncthreads();
    if ((int)threadIdx.x < 2 * N) {
        float acc = 0;
        for (int k = 0; k < ST / 32; k++) acc += red[k * 2 * N + threadIdx.x];
        p.part[((int64_t)blockIdx.x * p.T + (t - p.T0)) * 2 * N + threadIdx.x] = acc;
    }
    __syncthreads(); /* red is written again for the next row */
}

/* a thread per channel (those past I take part in the reductions with zeros), sequences in order; with shared starts
 * those starting from a tap first, the gradients of their starts summed into the taps' (sequence order), then the
 * rest, a tapped one's final state's gradient from its tap */
__global__ void k_ssm_bwd(ssm_args p) {
    extern __shared__ float ssm_sh[];
    const int N = p.N, ld = N + 1;
    const int64_t i = (int64_t)blockIdx.x * ST + threadIdx.x, I = p.I, K = p.ckpt;
    const bool on = i < I;
    float *dh = ssm_sh + threadIdx.x * ld, *dA = ssm_sh + ST * ld + threadIdx.x * ld;
    float *cb = ssm_sh + 2 * ST * ld + threadIdx.x * ld, *cc = ssm_sh + 3 * ST * ld + threadIdx.x * ld;
    float *red = ssm_sh + 4 * ST * ld;
    float *hist = on ? p.hist + i * K * N : NULL;
    for (int n = 0; n < N; n++) dA[n] = 0;
    for (int k = 0; k < (p.from ? 2 : 1) * p.n_seq; k++) {
        const int s = k % p.n_seq;
        if (p.from && (p.from[s] >= 0) != (k < p.n_seq)) continue; /* (another pass's sequence) */
        const int64_t t0 = p.tab.cu[s], L = p.tab.cu[s + 1] - t0;
        const float *dh0 = on ? ssm_tap(p, s, i) : NULL;
        for (int n = 0; n < N; n++) dh[n] = dh0 ? dh0[n] : 0.0f;
        for (int64_t c0 = L ? (L - 1) / K * K : -1; c0 >= 0; c0 -= K) {
            const int64_t m = L - c0 < K ? L - c0 : K;
            if (on) { /* hist[j]: the state before row c0 + j */
                const float *kept = p.saved + ((p.tab.base[s] + c0 / K) * I + i) * N;
                for (int n = 0; n < N; n++) hist[n] = kept[n];
                for (int64_t j = 0; j + 1 < m; j++) {
                    const int64_t t = t0 + c0 + j;
                    const float dtv = p.dt[t * I + i], xv = p.x[t * I + i], *B = p.B + t * N;
                    for (int n = 0; n < N; n++)
                        hist[(j + 1) * N + n] = expf(-expf(p.A_log[i * N + n]) * dtv) * hist[j * N + n] + dtv * xv * B[n];
                }
            }
            for (int64_t j = m - 1; j >= 0; j--) {
                const int64_t t = t0 + c0 + j;
                if (on) {
                    const float *hp = hist + j * N, *B = p.B + t * N, *C = p.C + t * N;
                    const float dtv = p.dt[t * I + i], xv = p.x[t * I + i], gy = p.dy[t * I + i];
                    float gx = 0, gdt = 0;
                    for (int n = 0; n < N; n++) { /* as the CPU's ssm_bwd_channel */
                        float A = -expf(p.A_log[i * N + n]), a = expf(A * dtv), h = a * hp[n] + dtv * xv * B[n];
                        float g = dh[n] + gy * C[n], da = g * hp[n];
                        cc[n] = gy * h;
                        gdt += da * a * A + g * xv * B[n];
                        dA[n] += da * a * dtv * A;
                        cb[n] = g * dtv * xv;
                        gx += g * dtv * B[n];
                        dh[n] = a * g;
                    }
                    if (p.dx) p.dx[t * I + i] += gx;
                    if (p.ddt) p.ddt[t * I + i] += gdt;
                } else
                    for (int n = 0; n < N; n++) cb[n] = cc[n] = 0;
                ssm_row_partial(p, red, cb, cc, t);
            }
        }
        float *dstart = on && p.from && p.from[s] >= 0 ? ssm_tap(p, p.from[s], i) : NULL;
        for (int n = 0; dstart && n < N; n++) dstart[n] += dh[n];
    }
    if (on && p.dA)
        for (int n = 0; n < N; n++) p.dA[i * N + n] += dA[n];
}

/* dB[t, n] += sum over blocks b (ascending) of part[b, t, n]; dC from the second half */
__global__ void k_ssm_part_sum(float *dB, float *dC, const float *part, int64_t T0, int64_t T, int N, int64_t nb) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < T * 2 * N; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = k / (2 * N);
        int n = (int)(k % (2 * N));
        float acc = 0;
        for (int64_t b = 0; b < nb; b++) acc += part[(b * T + t) * 2 * N + n];
        float *dst = n < N ? dB : dC;
        if (dst) dst[(T0 + t) * N + n % N] += acc;
    }
}

void vc_cu_ssm_bwd(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                   const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                   const vc_ssm_desc *d) {
    const char *op = "selective scan backward";
    if (!vc_cu_begin(op) || d->n_seq <= 0 || !ssm_check(d, op)) return;
    if (!saved) {
        vc_cu_fail(VC_ERR_ARG, op, "the backward needs the states the forward kept");
        return;
    }
    ssm_args p = {};
    p.x = x, p.dt = dt, p.A_log = A_log, p.B = B, p.C = C, p.dy = dy, p.saved = saved;
    p.dx = dx, p.ddt = ddt, p.dA = dA_log;
    p.n_seq = d->n_seq, p.N = d->N, p.I = d->I, p.ckpt = d->ckpt, p.T0 = d->cu[0], p.T = d->cu[d->n_seq] - d->cu[0];
    int64_t nb = (d->I + ST - 1) / ST;
    void *tabs = vc_cu_upload_tabs(d->n_seq, d->cu, d->ckpt, NULL, &p.tab, op);
    if (!tabs) return;
    p.part = (float *)vc_cu_scratch((size_t)(nb * (p.T ? p.T : 1) * 2 * d->N) * sizeof(float), op);
    p.hist = p.part ? (float *)vc_cu_scratch((size_t)(d->I * d->ckpt * d->N) * sizeof(float), op) : NULL;
    int nt = p.hist ? vc_cu_share_setup(d->n_seq, d->from, (size_t)(d->I * d->N), &p.from, &p.tap_of, &p.tap, op) : -1;
    if (nt > 0) cudaMemsetAsync(p.tap, 0, sizeof(float) * (size_t)(nt * d->I * d->N), vc_cu_stream());
    if (nt >= 0) {
        size_t sh = ((size_t)4 * ST * (d->N + 1) + (size_t)(ST / 32) * 2 * d->N) * sizeof(float);
        cudaFuncSetAttribute(k_ssm_bwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        k_ssm_bwd<<<(unsigned)nb, ST, sh, vc_cu_stream()>>>(p);
        int64_t n = p.T * 2 * d->N;
        if ((dB || dC) && n > 0)
            k_ssm_part_sum<<<vc_cu_blocks(n, GT), GT, 0, vc_cu_stream()>>>(dB, dC, p.part, p.T0, p.T, d->N, nb);
        vc_cu_end(op);
    }
    vc_cu_scratch_free((void *)p.from);
    vc_cu_scratch_free(p.tap);
    vc_cu_scratch_free(p.part);
    vc_cu_scratch_free(p.hist);
    vc_cu_scratch_free(tabs);
}
