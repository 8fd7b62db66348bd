/* Fused AdamW and the global gradient norm on the GPU. The AdamW kernel rounds every operation
 * separately (explicit _rn intrinsics, so nvcc cannot fuse them) except the lerp, which uses an fma as
 * torch's vectorised CPU lerp does: the same bits as vc_adamw_step in src/train/optim.c. The norm is
 * summed in double over fixed chunks (one partial per chunk, a fixed tree inside the chunk), then one
 * block adds the partials in a fixed order: same bits run to run. */
#include "cuda_internal.h"
extern "C" {
#include "verlc/optim.h"
}
#include <math.h>
#include <stdlib.h>

struct adamw_scalars {
    float decay_mul, lerp_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};

__global__ void k_adamw(float *w, const float *g, float *m, float *v, size_t n, adamw_scalars s, int decay) {
    const int small = s.lerp_w < 0.5f;
    const float coeff = small ? s.lerp_w : __fsub_rn(s.lerp_w, 1.0f);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float wi = w[i];
        if (decay) wi = __fmul_rn(wi, s.decay_mul);
        float gi = g[i], mi = m[i];
        mi = __fmaf_rn(coeff, __fsub_rn(gi, mi), small ? mi : gi);
        float vi = __fmul_rn(v[i], s.beta2);
        vi = __fadd_rn(vi, __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
        wi = __fadd_rn(wi, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
        m[i] = mi;
        v[i] = vi;
        w[i] = wi;
    }
}

vc_status vc_cuda_adamw_step(const vc_optim_param *params, float *const *m, float *const *v, size_t n_params,
                             const vc_adamw_config *c, int64_t step, double lr) {
    const char *op = "adamw";
    if (!(lr >= 0) || !isfinite(lr)) return vc_fail(VC_ERR_ARG, "cuda: adamw: learning rate %g", lr);
    if (step < 1) return vc_fail(VC_ERR_ARG, "cuda: adamw: step %lld (the first step is 1)", (long long)step);
    if (!vc_cu_begin(op)) return vc_cuda_error();
    double t = (double)step, bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    adamw_scalars s = {
        (float)(1.0 - lr * c->weight_decay), (float)(1.0 - c->beta1), (float)c->beta2, (float)(1.0 - c->beta2),
        (float)sqrt(bc2), (float)c->eps, (float)(-(lr / bc1)),
    };
    for (size_t i = 0; i < n_params; i++) {
        const vc_optim_param *p = &params[i];
        if (!p->n) continue;
        if (!p->w || !p->g || !m[i] || !v[i])
            return vc_fail(VC_ERR_ARG, "cuda: adamw: parameter %zu has no weight, gradient or moment buffer", i);
        k_adamw<<<vc_cu_blocks((int64_t)p->n, 256), 256, 0, vc_cu_stream()>>>(p->w, p->g, m[i], v[i], p->n, s,
                                                                             p->decay && c->weight_decay != 0);
        if (!vc_cu_end(op)) return vc_cuda_error();
    }
    return VC_OK;
}

/* ---- gradient norm ---- */
#define CHUNK 16384
#define NT 256

__global__ void k_sumsq_chunks(double *part, const float *g, size_t n) {
    __shared__ double sh[32];
    size_t c0 = (size_t)blockIdx.x * CHUNK, c1 = c0 + CHUNK < n ? c0 + CHUNK : n;
    double acc = 0;
    for (size_t i = c0 + threadIdx.x; i < c1; i += NT) acc += (double)g[i] * g[i];
    acc = vc_block_sum_d(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

__global__ void k_sum_partials(double *out, const double *part, size_t n) {
    __shared__ double sh[32];
    double acc = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) acc += part[i];
    acc = vc_block_sum_d(acc, sh);
    if (threadIdx.x == 0) *out = acc;
}

__global__ void k_scale(float *g, size_t n, float c) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] *= c;
}

/* sum of squares of every tensor: fixed chunk partials in tensor order, then one fixed block tree */
vc_status vc_cu_sumsq(const float *const *x, const size_t *sizes, size_t n_tensors, double *out) {
    const char *op = "sum of squares";
    if (!vc_cu_begin(op)) return vc_cuda_error();
    size_t np = 0;
    for (size_t t = 0; t < n_tensors; t++) np += (sizes[t] + CHUNK - 1) / CHUNK;
    double *part = (double *)vc_cu_scratch((np + 1) * sizeof(double), op), total = 0;
    if (!part) return vc_cuda_error();
    size_t at = 0;
    for (size_t t = 0; t < n_tensors; t++) {
        size_t nb = (sizes[t] + CHUNK - 1) / CHUNK;
        if (nb) k_sumsq_chunks<<<(unsigned)nb, NT, 0, vc_cu_stream()>>>(part + at, x[t], sizes[t]);
        at += nb;
    }
    k_sum_partials<<<1, 1024, 0, vc_cu_stream()>>>(part + np, part, np);
    vc_status st = vc_cu_end(op) ? VC_OK : vc_cuda_error();
    if (st == VC_OK) st = vc_cuda_d2h(&total, part + np, sizeof total);
    vc_cu_scratch_free(part);
    if (st == VC_OK) *out = total;
    return st;
}

vc_status vc_cuda_grad_norm(const float *const *grads, const size_t *sizes, size_t n_tensors, double *norm) {
    double ss = 0;
    vc_status st = vc_cu_sumsq(grads, sizes, n_tensors, &ss);
    if (st == VC_OK) *norm = sqrt(ss);
    return st;
}

vc_status vc_cuda_clip_grad_norm(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm,
                                 double *norm, int *finite) {
    double nrm = 0;
    vc_status st = vc_cuda_grad_norm((const float *const *)grads, sizes, n_tensors, &nrm);
    if (st != VC_OK) return st;
    if (norm) *norm = nrm;
    *finite = isfinite(nrm) ? 1 : 0;
    if (!*finite || max_norm <= 0) return VC_OK;
    double coef = max_norm / (nrm + 1e-6);
    if (coef < 1.0) {
        for (size_t t = 0; t < n_tensors; t++)
            if (sizes[t]) k_scale<<<vc_cu_blocks((int64_t)sizes[t], 256), 256, 0, vc_cu_stream()>>>(grads[t], sizes[t],
                                                                                                     (float)coef);
        if (!vc_cu_end("grad clip")) return vc_cuda_error();
    }
    return VC_OK;
}
