/* Fused AdamW and the global gradient norm on the GPU. The AdamW kernel rounds every operation
 * separately (explicit _rn intrinsics, so nvcc cannot fuse them) except the lerp, which uses an fma as
 * torch's vectorised CPU lerp does: the same bits as vc_adamw_step in src/train/optim.c. The norm is
 * summed in double over fixed chunks (one partial per chunk, a fixed tree inside the chunk), then one
 * block adds the partials in a fixed order: same bits run to run.
 * Each is one launch for all tensors (multi-tensor, as PyTorch's fused AdamW): a table of the tensors
 * and their first block is uploaded, and each block finds its tensor by binary search. A model of a few
 * hundred tensors costs three launches per step instead of a few hundred each. */
#include "cuda_internal.h"
extern "C" {
#include "verlc/optim.h"
}
#include <math.h>
#include <stdlib.h>

struct adamw_scalars {
    float decay_mul, lerp_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
    int m_bf16, v_bf16; /* moments stored rounded to bf16 (vc_adamw_config) */
    float gscale;       /* vc_adamw_config.grad_scale: 0, none */
};

/* round to the nearest bf16, ties to even (NaN kept quiet), as vc_f32_to_bf16 */
__device__ __forceinline__ float bf16_round(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u | 0x400000u) & 0xffff0000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

/* one tensor of a multi-tensor launch: blocks [blk0, next tensor's blk0) cover its n elements */
struct mt_entry {
    float *w;
    const float *g;
    float *m, *v;
    size_t n, blk0;
    int decay;
};

#define MT_THREADS 256
#define MT_PER_BLOCK (MT_THREADS * 4) /* elements per block */

/* the entry whose blocks hold block b (entries sorted by blk0, the first at 0) */
__device__ __forceinline__ const mt_entry *mt_find(const mt_entry *e, int n, size_t b) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (e[mid].blk0 <= b) lo = mid;
        else hi = mid - 1;
    }
    return e + lo;
}

/* one element's update: w, m and v in place (m and v stored rounded where the moments are bf16; the update reads them
 * unrounded) */
__device__ __forceinline__ void adamw_elem(float &w, float g, float &m, float &v, const adamw_scalars &s, int decay,
                                           int small, float coeff) {
    float wi = w;
    if (s.gscale > 0.0f) g = __fmul_rn(g, s.gscale); /* clipping's factor, as the in-place scale rounds it */
    if (decay) wi = __fmul_rn(wi, s.decay_mul);
    const float mi = __fmaf_rn(coeff, __fsub_rn(g, m), small ? m : g);
    float vi = __fmul_rn(v, s.beta2);
    vi = __fadd_rn(vi, __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
    w = __fadd_rn(wi, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
    m = s.m_bf16 ? bf16_round(mi) : mi;
    v = s.v_bf16 ? bf16_round(vi) : vi;
}

/* a block's MT_PER_BLOCK elements: four a thread by 16-byte loads and stores where the tensor's four arrays allow
 * (MT_PER_BLOCK is 4 MT_THREADS), else one at a time; the same arithmetic an element either way */
__global__ void k_adamw_mt(const mt_entry *tab, int n_tab, adamw_scalars s, int wd) {
    const mt_entry *e = mt_find(tab, n_tab, blockIdx.x);
    const size_t i0 = (blockIdx.x - e->blk0) * (size_t)MT_PER_BLOCK, i1 = i0 + MT_PER_BLOCK < e->n ? i0 + MT_PER_BLOCK : e->n;
    float *w = e->w, *m = e->m, *v = e->v;
    const float *g = e->g;
    const int decay = wd && e->decay;
    const int small = s.lerp_w < 0.5f;
    const float coeff = small ? s.lerp_w : __fsub_rn(s.lerp_w, 1.0f);
    const int vec = (((uintptr_t)w | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) & 15) == 0;
    const size_t i = i0 + 4 * (size_t)threadIdx.x;
    if (vec && i + 4 <= i1) {
        float4 w4 = *(const float4 *)(w + i), g4 = *(const float4 *)(g + i), m4 = *(const float4 *)(m + i);
        float4 v4 = *(const float4 *)(v + i);
        adamw_elem(w4.x, g4.x, m4.x, v4.x, s, decay, small, coeff);
        adamw_elem(w4.y, g4.y, m4.y, v4.y, s, decay, small, coeff);
        adamw_elem(w4.z, g4.z, m4.z, v4.z, s, decay, small, coeff);
        adamw_elem(w4.w, g4.w, m4.w, v4.w, s, decay, small, coeff);
        *(float4 *)(w + i) = w4;
        *(float4 *)(m + i) = m4;
        *(float4 *)(v + i) = v4;
        return;
    }
    /* the block's last partial four (vec), or every element the thread takes one at a time */
    const size_t end = vec ? (i + 4 < i1 ? i + 4 : i1) : i1, step = vec ? 1 : MT_THREADS;
    for (size_t j = vec ? i : i0 + threadIdx.x; j < end; j += step) adamw_elem(w[j], g[j], m[j], v[j], s, decay, small, coeff);
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
        (float)sqrt(bc2), (float)c->eps, (float)(-(lr / bc1)), c->m_bf16, c->v_bf16,
        c->grad_scale > 0 ? c->grad_scale : 0.0f,
    };
    mt_entry *tab = (mt_entry *)malloc((n_params ? n_params : 1) * sizeof *tab);
    if (!tab) return vc_fail(VC_ERR_NOMEM, "cuda: adamw: table of %zu tensors", n_params);
    size_t nt = 0, blocks = 0;
    for (size_t i = 0; i < n_params; i++) {
        const vc_optim_param *p = &params[i];
        if (!p->n) continue;
        if (!p->w || !p->g || !m[i] || !v[i]) {
            free(tab);
            return vc_fail(VC_ERR_ARG, "cuda: adamw: parameter %zu has no weight, gradient or moment buffer", i);
        }
        tab[nt++] = mt_entry{ p->w, p->g, m[i], v[i], p->n, blocks, p->decay };
        blocks += (p->n + MT_PER_BLOCK - 1) / MT_PER_BLOCK;
    }
    if (nt) {
        if (blocks > 0x7fffffffu || nt > 0x7fffffffu) {
            free(tab);
            return vc_fail(VC_ERR_UNSUPPORTED, "cuda: adamw: %zu blocks of %d elements", blocks, MT_PER_BLOCK);
        }
        mt_entry *dev = (mt_entry *)vc_cu_upload(tab, nt * sizeof *tab, op);
        if (dev) k_adamw_mt<<<(unsigned)blocks, MT_THREADS, 0, vc_cu_stream()>>>(dev, (int)nt, s, c->weight_decay != 0);
        vc_cu_scratch_free(dev);
    }
    free(tab);
    return vc_cu_end(op) ? VC_OK : vc_cuda_error();
}

/* ---- gradient norm ---- */
#define CHUNK 16384
#define NT 256

/* block b: chunk (b - blk0) of its tensor (g in the entry's g, n elements), its partial at part[b] */
__global__ void k_sumsq_chunks_mt(double *part, const mt_entry *tab, int n_tab) {
    __shared__ double sh[32];
    const mt_entry *e = mt_find(tab, n_tab, blockIdx.x);
    size_t c0 = (blockIdx.x - e->blk0) * (size_t)CHUNK, c1 = c0 + CHUNK < e->n ? c0 + CHUNK : e->n;
    const float *g = e->g;
    double acc = 0;
    for (size_t i = c0 + threadIdx.x; i < c1; i += NT) acc += (double)g[i] * g[i];
    acc = vc_block_sum_d(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

/* the table of the non-empty tensors with their first chunk (per_block elements a block); NULL when
 * none (*nt = 0) or on failure (sticky error) */
static mt_entry *chunk_table(const float *const *x, const size_t *sizes, size_t n, size_t per_block, size_t *nt,
                             size_t *blocks, const char *op) {
    mt_entry *tab = (mt_entry *)malloc((n ? n : 1) * sizeof *tab);
    *nt = *blocks = 0;
    if (!tab) {
        vc_cu_fail(VC_ERR_NOMEM, op, "no memory for the tensor table");
        return NULL;
    }
    for (size_t t = 0; t < n; t++) {
        if (!sizes[t]) continue;
        tab[(*nt)++] = mt_entry{ (float *)x[t], x[t], NULL, NULL, sizes[t], *blocks, 0 };
        *blocks += (sizes[t] + per_block - 1) / per_block;
    }
    mt_entry *dev = *nt && *blocks <= 0x7fffffffu ? (mt_entry *)vc_cu_upload(tab, *nt * sizeof *tab, op) : NULL;
    if (*nt && *blocks > 0x7fffffffu) vc_cu_fail(VC_ERR_UNSUPPORTED, op, "over 2^31 blocks");
    free(tab);
    return dev;
}

__global__ void k_sum_partials(double *out, const double *part, size_t n) {
    __shared__ double sh[32];
    double acc = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) acc += part[i];
    acc = vc_block_sum_d(acc, sh);
    if (threadIdx.x == 0) *out = acc;
}

__global__ void k_scale_mt(const mt_entry *tab, int n_tab, float c) {
    const mt_entry *e = mt_find(tab, n_tab, blockIdx.x);
    size_t i0 = (blockIdx.x - e->blk0) * (size_t)MT_PER_BLOCK, i1 = i0 + MT_PER_BLOCK < e->n ? i0 + MT_PER_BLOCK : e->n;
    for (size_t i = i0 + threadIdx.x; i < i1; i += MT_THREADS) e->w[i] *= c;
}

/* sum of squares of every tensor: fixed chunk partials in tensor order, then one fixed block tree */
vc_status vc_cu_sumsq(const float *const *x, const size_t *sizes, size_t n_tensors, double *out) {
    const char *op = "sum of squares";
    if (!vc_cu_begin(op)) return vc_cuda_error();
    size_t nt = 0, np = 0;
    mt_entry *tab = chunk_table(x, sizes, n_tensors, CHUNK, &nt, &np, op);
    if (nt && !tab) return vc_cuda_error();
    double *part = (double *)vc_cu_scratch((np + 1) * sizeof(double), op), total = 0;
    if (!part) {
        vc_cu_scratch_free(tab);
        return vc_cuda_error();
    }
    if (np) k_sumsq_chunks_mt<<<(unsigned)np, NT, 0, vc_cu_stream()>>>(part, tab, (int)nt);
    k_sum_partials<<<1, 1024, 0, vc_cu_stream()>>>(part + np, part, np);
    vc_status st = vc_cu_end(op) ? VC_OK : vc_cuda_error();
    if (st == VC_OK) st = vc_cuda_d2h(&total, part + np, sizeof total);
    vc_cu_scratch_free(part);
    vc_cu_scratch_free(tab);
    if (st == VC_OK) *out = total;
    return st;
}

/* x[t] *= c for every tensor: one launch (as x[t] = c x[t] per tensor: the same bits) */
void vc_cu_scale_tensors(float *const *x, const size_t *sizes, size_t n_tensors, float c) {
    const char *op = "scale tensors";
    if (!vc_cu_begin(op)) return;
    size_t nt = 0, nb = 0;
    mt_entry *tab = chunk_table((const float *const *)x, sizes, n_tensors, MT_PER_BLOCK, &nt, &nb, op);
    if (tab) k_scale_mt<<<(unsigned)nb, MT_THREADS, 0, vc_cu_stream()>>>(tab, (int)nt, c);
    vc_cu_scratch_free(tab);
    vc_cu_end(op);
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
    if (coef < 1.0) vc_cu_scale_tensors(grads, sizes, n_tensors, (float)coef);
    return vc_cuda_error();
}
