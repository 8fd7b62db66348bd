/* MoE routing on the GPU: one warp per token, the token's scores in shared memory. Top-k takes the
 * largest choice score k times, ties going to the lowest expert index, and returns the experts in
 * descending score order. The CPU backend reproduces torch.topk's CPU tie-breaking and order
 * instead; for scores without ties (random data, trained routers) the chosen set and the weights are
 * the same, only the order of the k slots may differ (it does not change the MoE output). */
#include "backend/route_math.h"
#include "cuda_internal.h"
#include <limits.h>
#include <stdio.h>

#define RW 4 /* warps (tokens) per block */

struct route_params {
    int E, K, sigmoid, norm_topk, n_group, topk_group, top2, replay;
    float scaling;
    float norm_min;
    const float *bias;
    int bias_logits; /* the choice is logits + bias (vc_route_desc.bias_logits) */
    int sparsemixer; /* PhiMoE's (backend/route_math.h), one lane per token */
    float jitter_eps;
};

__device__ void scores_of(float *s, const float *z, int E, int sigmoid, int lane) {
    if (sigmoid) {
        for (int e = lane; e < E; e += 32) s[e] = 1.0f / (1.0f + expf(-z[e]));
        __syncwarp();
        return;
    }
    float m = -INFINITY, sum = 0;
    for (int e = lane; e < E; e += 32) m = fmaxf(m, z[e]);
    m = vc_warp_max(m);
    for (int e = lane; e < E; e += 32) sum += (s[e] = expf(z[e] - m));
    sum = vc_warp_sum(sum);
    for (int e = lane; e < E; e += 32) s[e] /= sum;
    __syncwarp();
}

/* index of the largest untaken value (lowest index on ties; untaken -inf beats nothing) */
__device__ int warp_argmax(const float *c, const unsigned char *taken, int n, int lane) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int e = lane; e < n; e += 32)
        if (!taken[e] && (bi == INT_MAX || c[e] > bv)) {
            bv = c[e];
            bi = e;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi != INT_MAX && (bi == INT_MAX || ov > bv || (ov == bv && oi < bi))) {
            bv = ov;
            bi = oi;
        }
    }
    return bi;
}

__global__ void k_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, route_params p) {
    extern __shared__ float sh[];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, E = p.E;
    int64_t t = blockIdx.x * (int64_t)RW + warp;
    if (t >= T) return;
    if (p.sparsemixer) {
        if (lane == 0) vc_sparsemixer_fwd(logits + t * E, E, p.jitter_eps, p.replay, idx + t * 2, w + t * 2);
        return;
    }
    float *s = sh + warp * 2 * E, *c = s + E;
    unsigned char *taken = (unsigned char *)(sh + RW * 2 * E) + warp * E;
    scores_of(s, logits + t * E, E, p.sigmoid, lane);
    if (p.replay) { /* router replay: the experts are given, the weights come from the current scores */
        float sum = 0;
        for (int k = 0; k < p.K; k++) sum += s[idx[t * p.K + k]];
        int clamped;
        float denom = vc_route_denom(sum, p.norm_topk, p.sigmoid, p.norm_min, &clamped);
        for (int k = lane; k < p.K; k += 32) w[t * p.K + k] = s[idx[t * p.K + k]] / denom * p.scaling;
        return;
    }
    for (int e = lane; e < E; e += 32) {
        c[e] = (p.bias_logits ? logits[t * E + e] : s[e]) + (p.bias ? p.bias[e] : 0.0f);
        taken[e] = 0;
    }
    __syncwarp();
    if (p.n_group > 1 && p.topk_group < p.n_group) {
        __shared__ float gs[RW][32];
        __shared__ unsigned char gt[RW][32];
        int per = E / p.n_group;
        if (lane < p.n_group) {
            float a = -INFINITY, b = -INFINITY;
            for (int i = 0; i < per; i++) {
                float x = c[lane * per + i];
                if (x > a) { b = a; a = x; }
                else if (x > b) b = x;
            }
            gs[warp][lane] = p.top2 ? (per > 1 ? a + b : a) : a;
            gt[warp][lane] = 0;
        }
        __syncwarp();
        for (int k = 0; k < p.topk_group; k++) {
            int g = warp_argmax(gs[warp], gt[warp], p.n_group, lane);
            if (lane == 0) gt[warp][g] = 1;
            __syncwarp();
        }
        for (int e = lane; e < E; e += 32)
            if (!gt[warp][e / per]) c[e] = -INFINITY;
        __syncwarp();
    }
    float sum = 0;
    for (int k = 0; k < p.K; k++) {
        int e = warp_argmax(c, taken, E, lane);
        if (lane == 0) {
            taken[e] = 1;
            idx[t * p.K + k] = e;
        }
        sum += s[e];
        __syncwarp();
    }
    int clamped;
    float denom = vc_route_denom(sum, p.norm_topk, p.sigmoid, p.norm_min, &clamped);
    for (int k = lane; k < p.K; k += 32) w[t * p.K + k] = s[idx[t * p.K + k]] / denom * p.scaling;
}

__global__ void k_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                            route_params p) {
    extern __shared__ float sh[];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, E = p.E, K = p.K;
    int64_t t = blockIdx.x * (int64_t)RW + warp;
    if (t >= T) return;
    float *s = sh + warp * 2 * E, *ds = s + E;
    const int32_t *id = idx + t * K;
    const float *g = dw + t * K;
    if (p.sparsemixer) {
        if (lane == 0) vc_sparsemixer_bwd(dlogits + t * E, g, logits + t * E, E, p.jitter_eps, id, s);
        return;
    }
    scores_of(s, logits + t * E, E, p.sigmoid, lane);
    for (int e = lane; e < E; e += 32) ds[e] = 0;
    __syncwarp();
    if (lane == 0) {
        if (p.norm_topk) {
            float sum = 0, gsum = 0;
            for (int k = 0; k < K; k++) sum += s[id[k]];
            int clamped;
            float D = vc_route_denom(sum, 1, p.sigmoid, p.norm_min, &clamped);
            for (int k = 0; k < K; k++) gsum += g[k] * s[id[k]];
            for (int k = 0; k < K; k++) ds[id[k]] += p.scaling * (g[k] / D - (clamped ? 0.0f : gsum / (D * D)));
        } else {
            for (int k = 0; k < K; k++) ds[id[k]] += p.scaling * g[k];
        }
    }
    __syncwarp();
    float *dz = dlogits + t * E;
    if (p.sigmoid) {
        for (int e = lane; e < E; e += 32) dz[e] += ds[e] * s[e] * (1.0f - s[e]);
        return;
    }
    float dot = 0;
    for (int e = lane; e < E; e += 32) dot += s[e] * ds[e];
    dot = vc_warp_sum(dot);
    for (int e = lane; e < E; e += 32) dz[e] += s[e] * (ds[e] - dot);
}

static int route_setup(const vc_route_desc *d, route_params *p, size_t *sh, const char *op) {
    if (d->n_expert <= 0 || d->n_expert > 1024 || d->top_k <= 0 || d->top_k > d->n_expert ||
        (d->n_group > 1 && (d->n_group > 32 || d->n_expert % d->n_group || d->topk_group <= 0)) ||
        (d->sparsemixer && d->top_k != 2)) {
        char what[160];
        snprintf(what, sizeof what, "%d experts, top %d, %d groups (top %d) not supported", d->n_expert, d->top_k,
                 d->n_group, d->topk_group);
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, what);
        return 0;
    }
    *p = route_params{ d->n_expert, d->top_k, d->sigmoid, d->norm_topk, d->n_group, d->topk_group, d->group_top2_sum,
                       d->replay, d->scaling, d->norm_min, d->bias, d->bias_logits, d->sparsemixer, d->jitter_eps };
    *sh = (size_t)RW * 2 * d->n_expert * sizeof(float) + (size_t)RW * d->n_expert;
    return 1;
}

void vc_cu_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d) {
    const char *op = "moe routing forward";
    route_params p;
    size_t sh;
    if (!vc_cu_begin(op) || !route_setup(d, &p, &sh, op) || T == 0) return;
    k_route_fwd<<<(unsigned)((T + RW - 1) / RW), RW * 32, sh, vc_cu_stream()>>>(w, idx, logits, T, p);
    vc_cu_end(op);
}

void vc_cu_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                     const vc_route_desc *d) {
    const char *op = "moe routing backward";
    route_params p;
    size_t sh;
    if (!vc_cu_begin(op) || !route_setup(d, &p, &sh, op) || T == 0) return;
    k_route_bwd<<<(unsigned)((T + RW - 1) / RW), RW * 32, sh, vc_cu_stream()>>>(dlogits, dw, logits, idx, T, p);
    vc_cu_end(op);
}
