/* CPU optimiser entries: one AdamW step (torch.optim.AdamW, float32, bit for bit) and the sum of
 * squares behind the global gradient norm. */
/* torch's CPU kernels round every product and sum separately except where they call fmadd (lerp);
 * keep the compiler from fusing the others so the results match bit for bit. */
#pragma GCC optimize("fp-contract=off")
#include "cpu.h"
#include "verlc/dtype.h"
#include "verlc/optim.h"
#include "verlc/pool.h"
#include "infer/infer.h"
#include <immintrin.h>
#include <math.h>

#define BLK 16384

/* Scalars as torch derives them: Python doubles, converted to float where they meet a tensor. */
typedef struct adamw_scalars {
    float decay_mul, lerp_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
    float gscale; /* vc_adamw_config.grad_scale: 0, none */
} adamw_scalars;

typedef struct {
    float *w, *m, *v;
    const float *g;
    size_t n;
    const adamw_scalars *s;
    int decay, m_bf16, v_bf16;
} adamw_ctx;

static inline float bf16_round(float x) { return vc_bf16_to_f32(vc_f32_to_bf16(x)); }

/* the same step W elements at a time (f32 moments): the same operations in the same order, each correctly rounded
 * (vector sqrt and division are), no contraction but the lerp's fmadd; returns where the scalar loop goes on */
#define ADAMW_VEC(NAME, ATTR, VT, W, SET1, LOAD, STORE, MUL, ADD, SUB, DIV, SQRT, FMA)                          \
    ATTR static size_t NAME(const adamw_ctx *c, size_t i, size_t i1) {                                          \
        const adamw_scalars *s = c->s;                                                                          \
        const int small = s->lerp_w < 0.5f;                                                                     \
        const VT coeff = SET1(small ? s->lerp_w : s->lerp_w - 1.0f), dm = SET1(s->decay_mul);                   \
        const VT b2 = SET1(s->beta2), omb2 = SET1(s->one_minus_beta2), bc = SET1(s->bc2_sqrt);                  \
        const VT eps = SET1(s->eps), nss = SET1(s->neg_step_size), gs = SET1(s->gscale);                        \
        for (; i + W <= i1; i += W) {                                                                           \
            VT wi = LOAD(c->w + i), gi = LOAD(c->g + i), mi = LOAD(c->m + i);                                   \
            if (c->decay) wi = MUL(wi, dm);                                                                     \
            if (s->gscale > 0) gi = MUL(gi, gs);                                                                \
            mi = FMA(coeff, SUB(gi, mi), small ? mi : gi);                                                      \
            VT vi = ADD(MUL(LOAD(c->v + i), b2), MUL(MUL(omb2, gi), gi));                                       \
            VT denom = ADD(DIV(SQRT(vi), bc), eps);                                                             \
            wi = ADD(wi, DIV(MUL(nss, mi), denom));                                                             \
            STORE(c->m + i, mi);                                                                                \
            STORE(c->v + i, vi);                                                                                \
            STORE(c->w + i, wi);                                                                                \
        }                                                                                                       \
        return i;                                                                                               \
    }
ADAMW_VEC(adamw_512, __attribute__((target("avx512f"))), __m512, 16, _mm512_set1_ps, _mm512_loadu_ps,
          _mm512_storeu_ps, _mm512_mul_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_div_ps, _mm512_sqrt_ps, _mm512_fmadd_ps)
ADAMW_VEC(adamw_avx, __attribute__((target("avx2,fma"))), __m256, 8, _mm256_set1_ps, _mm256_loadu_ps,
          _mm256_storeu_ps, _mm256_mul_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_div_ps, _mm256_sqrt_ps, _mm256_fmadd_ps)

static void adamw_task(void *p, int64_t blk) {
    const adamw_ctx *c = p;
    const adamw_scalars *s = c->s;
    const int small = s->lerp_w < 0.5f;
    const float coeff = small ? s->lerp_w : s->lerp_w - 1.0f;
    size_t i1 = (size_t)(blk + 1) * BLK < c->n ? (size_t)(blk + 1) * BLK : c->n, i = (size_t)blk * BLK;
    float *w = c->w, *m = c->m, *v = c->v;
    const float *g = c->g;
    int isa = vc_infer_gemm_isa(); /* (the row-invariant GEMM's: VERLC_GEMM_ISA lowers it, the same bits) */
    if (!c->m_bf16 && !c->v_bf16) i = isa >= VC_GEMM_AVX512 ? adamw_512(c, i, i1) : isa == VC_GEMM_AVX2 ? adamw_avx(c, i, i1) : i;
    for (; i < i1; i++) {
        float wi = w[i];
        if (c->decay) wi = wi * s->decay_mul;        /* param.mul_(1 - lr * wd) */
        float gi = s->gscale > 0 ? g[i] * s->gscale : g[i], mi = m[i]; /* (clipping's factor: as a scale in place) */
        mi = fmaf(coeff, gi - mi, small ? mi : gi);  /* exp_avg.lerp_(grad, 1 - beta1): vectorised lerp uses fmadd */
        float vi = v[i] * s->beta2;                  /* exp_avg_sq.mul_(beta2) */
        vi = vi + s->one_minus_beta2 * gi * gi;      /* .addcmul_(grad, grad, value=1 - beta2) */
        float denom = sqrtf(vi) / s->bc2_sqrt + s->eps;
        wi = wi + s->neg_step_size * mi / denom;     /* param.addcdiv_(exp_avg, denom, value=-step_size) */
        m[i] = c->m_bf16 ? bf16_round(mi) : mi;
        v[i] = c->v_bf16 ? bf16_round(vi) : vi;
        w[i] = wi;
    }
}

vc_status vc_cpu_adamw(const vc_optim_param *params, float *const *m, float *const *v, size_t n_params,
                       const vc_adamw_config *c, int64_t step, double lr) {
    if (!(lr >= 0) || !isfinite(lr)) return vc_fail(VC_ERR_ARG, "cpu: adamw: learning rate %g", lr);
    if (step < 1) return vc_fail(VC_ERR_ARG, "cpu: adamw: step %lld (the first step is 1)", (long long)step);
    double t = (double)step;
    double bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    adamw_scalars s = {
        .decay_mul = (float)(1.0 - lr * c->weight_decay),
        .lerp_w = (float)(1.0 - c->beta1),
        .beta2 = (float)c->beta2,
        .one_minus_beta2 = (float)(1.0 - c->beta2),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = (float)c->eps,
        .neg_step_size = (float)(-(lr / bc1)),
        .gscale = c->grad_scale > 0 ? c->grad_scale : 0.0f,
    };
    for (size_t i = 0; i < n_params; i++) {
        const vc_optim_param *p = &params[i];
        if (!p->n) continue;
        if (!p->w || !p->g || !m[i] || !v[i])
            return vc_fail(VC_ERR_ARG, "cpu: adamw: parameter %zu has no weight, gradient or moment buffer", i);
        adamw_ctx x = { p->w, m[i], v[i], p->g, p->n, &s, p->decay && c->weight_decay != 0, c->m_bf16, c->v_bf16 };
        int64_t nblk = (int64_t)((p->n + BLK - 1) / BLK);
        if (nblk == 1) adamw_task(&x, 0);
        else vc_parallel(nblk, adamw_task, &x);
    }
    return VC_OK;
}

/* per tensor four interleaved double accumulators, combined (0 + 1) + (2 + 3); tensors in order */
vc_status vc_cpu_sumsq(const float *const *x, const size_t *sizes, size_t n_tensors, double *out) {
    double total = 0.0;
    for (size_t t = 0; t < n_tensors; t++) {
        const float *g = x[t];
        double acc[4] = { 0, 0, 0, 0 };
        size_t n = sizes[t], i = 0;
        for (; i + 4 <= n; i += 4)
            for (int k = 0; k < 4; k++) acc[k] += (double)g[i + k] * g[i + k];
        for (; i < n; i++) acc[0] += (double)g[i] * g[i];
        total += (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    *out = total;
    return VC_OK;
}
