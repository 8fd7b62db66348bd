/* PhiMoE's sparsemixer routing of one token, shared by the CPU and CUDA backends (the same float operations, so
 * both choose the same experts). As transformers runs it in eval mode: the first expert is the largest logit; its
 * weight is the softmax, at it, of the logits within 2 jitter_eps of it relative to each logit's size,
 * (m - z_e) / max(|z_e|, m) <= 2 eps; the second expert is the largest of the others, its weight the same softmax
 * around it without the first expert. (Training mode in transformers samples the experts (Gumbel) and takes a
 * Heun's-method gradient estimate; verlc trains through this deterministic routing with its exact gradient.) */
#ifndef VC_ROUTE_MATH_H
#define VC_ROUTE_MATH_H
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define VC_RHD __host__ __device__ __forceinline__
#else
#define VC_RHD static inline
#endif

/* the selected weights' denominator: 1, or their sum (a 1e-20 floor under sigmoid scores, DeepSeek's; clamped from
 * below at norm_min > 0, ERNIE 4.5's); *clamped: the clamp holds it (its gradient then flows to no score) */
VC_RHD float vc_route_denom(float sum, int norm_topk, int sigmoid, float norm_min, int *clamped) {
    *clamped = 0;
    if (!norm_topk) return 1.0f;
    if (norm_min > 0 && !(sum >= norm_min)) { *clamped = 1; return norm_min; }
    return sum + (sigmoid ? 1e-20f : 0.0f);
}

/* z_e takes part in the softmax around the chosen logit m (e != excl) */
VC_RHD int vc_smix_kept(const float *z, int e, float m, float eps2, int excl) {
    float f = fabsf(z[e]) > m ? fabsf(z[e]) : m;
    return e != excl && !((m - z[e]) / f > eps2); /* 0 / 0 (m = z_e = 0) is NaN: kept, as in torch */
}

/* the largest z_e over e != excl (the lowest index on ties) */
VC_RHD int vc_smix_argmax(const float *z, int E, int excl) {
    int b = -1;
    for (int e = 0; e < E; e++)
        if (e != excl && (b < 0 || z[e] > z[b])) b = e;
    return b;
}

/* the softmax over the kept logits at `at`; p (E floats, or NULL) receives every kept probability, 0 elsewhere */
VC_RHD float vc_smix_softmax(const float *z, int E, int at, float eps2, int excl, float *p) {
    float m = z[at], M = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++)
        if (vc_smix_kept(z, e, m, eps2, excl) && z[e] > M) M = z[e];
    for (int e = 0; e < E; e++)
        if (vc_smix_kept(z, e, m, eps2, excl)) sum += expf(z[e] - M);
    if (p)
        for (int e = 0; e < E; e++) p[e] = vc_smix_kept(z, e, m, eps2, excl) ? expf(z[e] - M) / sum : 0.0f;
    return expf(z[at] - M) / sum;
}

/* the two experts (unless replay gives them in idx) and their weights */
VC_RHD void vc_sparsemixer_fwd(const float *z, int E, float eps, int replay, int32_t *idx, float *w) {
    float eps2 = (float)(2.0 * (double)eps);
    int i1 = replay ? idx[0] : vc_smix_argmax(z, E, -1);
    int i2 = replay ? idx[1] : vc_smix_argmax(z, E, i1);
    idx[0] = i1;
    idx[1] = i2;
    w[0] = vc_smix_softmax(z, E, i1, eps2, -1, (float *)0);
    w[1] = vc_smix_softmax(z, E, i2, eps2, i1, (float *)0);
}

/* dz += the weights' gradient g through both softmaxes (the masks pass none); p: E floats of scratch */
VC_RHD void vc_sparsemixer_bwd(float *dz, const float *g, const float *z, int E, float eps, const int32_t *idx,
                               float *p) {
    float eps2 = (float)(2.0 * (double)eps);
    for (int k = 0; k < 2; k++) {
        float wk = vc_smix_softmax(z, E, idx[k], eps2, k ? idx[0] : -1, p);
        for (int e = 0; e < E; e++)
            if (p[e] != 0.0f || e == idx[k]) dz[e] += g[k] * wk * ((e == idx[k] ? 1.0f : 0.0f) - p[e]);
    }
}
#endif
