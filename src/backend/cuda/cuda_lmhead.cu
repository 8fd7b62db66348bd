/* Fused LM head on the GPU: the vocabulary is walked in slices; each slice's logits for all tokens are
 * one cuBLAS GEMM into a scratch buffer (f32, or bf16 with VERLC_HEAD_BF16=1), then one block per token folds the slice into running
 * statistics (max, sum of exponentials, sum of exponentials times (logit - max), when asked the sum of
 * squared exponentials; in double as the CPU backend keeps them). Logits are softcap(h W^T + b) * scale.
 * Backward recomputes each slice's logits (or reads them where the forward kept them: vc_head_desc.keep), turns them
 * into dZ, and adds dh += dZ W, dW += dZ^T h with GEMMs and db with a column kernel that walks tokens in order. */
#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <stdlib.h>
#include <string.h>

#define SLICE_BYTES ((int64_t)256 << 20)
#define HT 256

/* VERLC_HEAD_BF16=1 (read per call; bf16 matmuls, no bias): each slice's logits written by its GEMM in bf16, as an
 * autocast lm_head writes them (transformers then takes log_softmax of logits.float()): half the bytes written and
 * read a slice, twice the rows a slice. Off by default: not the bits of f32 logits. */
static int head_bf16(const float *b) {
    const char *e = getenv("VERLC_HEAD_BF16");
    return e && *e == '1' && !b && vc_matmul_precision() == VC_PREC_BF16;
}

/* vocabulary rows per slice (es: a logit's bytes); $VERLC_CUDA_HEAD_SLICE (rows) overrides, for tests of the slice
 * merge */
static int64_t slice_rows(int64_t T, int64_t V, int es = 4) {
    const char *env = getenv("VERLC_CUDA_HEAD_SLICE");
    if (env && atoll(env) > 0) return atoll(env) < V ? atoll(env) : V;
    int64_t nv = SLICE_BYTES / es / (T > 0 ? T : 1);
    if (nv < 256) nv = 256;
    nv = (nv + 15) & ~(int64_t)15;
    return nv < V ? nv : V;
}

/* the bytes of logits the forward keeps for the backward (vc_backend.lm_head_keep): f32 logits up to
 * $VERLC_CUDA_HEAD_KEEP bytes (0: never; K / M / G suffixes), by default a sixteenth of the device's memory (8.8 GB on
 * an H200: 14,000 rows of a 151,936-token vocabulary). The backward then skips the GEMM that formed them again, a
 * quarter of the LM head's work (the same values: the forward's own) */
size_t vc_cu_lm_head_keep(const vc_head_desc *d, const float *b) {
    if (head_bf16(b) || d->T <= 0 || d->V <= 0) return 0;
    size_t bytes = (size_t)(d->T * d->V) * sizeof(float), cap = 0, fr = 0;
    const char *e = getenv("VERLC_CUDA_HEAD_KEEP");
    char *end = NULL;
    double v = e && *e ? strtod(e, &end) : -1;
    if (v >= 0 && end != e) {
        const char *u = "KMG", *k = *end ? strchr(u, *end) : NULL;
        for (int i = k ? (int)(k - u) + 1 : 0; i > 0; i--) v *= 1024;
        cap = (size_t)v;
    } else if (cudaMemGetInfo(&fr, &cap) == cudaSuccess) {
        cap /= 16;
    } else {
        cudaGetLastError();
        return 0;
    }
    return bytes <= cap ? bytes : 0;
}

__device__ __forceinline__ float zval(const float *p) { return *p; }
__device__ __forceinline__ float zval(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

__device__ __forceinline__ float bias_cap(float z, const float *b, int64_t v, float cap) {
    if (b) z += b[v];
    return cap > 0 ? cap * tanhf(z / cap) : z;
}

__global__ void k_head_init(double *st, float *raw, int64_t T) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < T; t += (int64_t)gridDim.x * blockDim.x) {
        st[t] = -INFINITY;
        st[T + t] = 0;
        st[2 * T + t] = 0;
        st[3 * T + t] = 0;
        raw[t] = 0;
    }
}

/* one block per token: bias, cap, scale, slice statistics, merge into (m, s, a) and, with want_q, q. The slice's
 * logits are read, never written back (the second pass forms each one again, the same bits); each exponential in
 * f32 (expf: the FP64 exp of every logit cost more than the GEMM), the sums in double. */
template <typename ZT>
__global__ void k_head_fwd_rows(const ZT *Z, int64_t nv, int64_t v0, const float *b, float cap, float scale,
                                const int32_t *target, double *st, float *raw, int64_t T, int want_q) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    int64_t t = blockIdx.x;
    const ZT *z = Z + t * nv;
    float mx = -INFINITY;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) mx = fmaxf(mx, bias_cap(zval(z + v), b, v0 + v, cap) * scale);
    mx = vc_block_max(mx, shf);
    double s = 0, a = 0, q = 0;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        const float d = bias_cap(zval(z + v), b, v0 + v, cap) * scale - mx, e = expf(d);
        s += e;
        a += (double)e * d;
        if (want_q) q += (double)e * e; /* uniform over the block */
    }
    s = vc_block_sum_d(s, shd);
    a = vc_block_sum_d(a, shd);
    if (want_q) q = vc_block_sum_d(q, shd);
    if (threadIdx.x) return;
    int32_t y = target ? target[t] : -1;
    if (y >= v0 && y < v0 + nv) raw[t] = bias_cap(zval(z + (y - v0)), b, y, cap) * scale;
    double M = st[t], m2 = mx;
    if (M == -INFINITY) {
        st[t] = m2;
        st[T + t] = s;
        st[2 * T + t] = a;
        st[3 * T + t] = q;
    } else {
        double nm = M > m2 ? M : m2, f1 = exp(M - nm), f2 = exp(m2 - nm);
        st[2 * T + t] = f1 * (st[2 * T + t] + (M - nm) * st[T + t]) + f2 * (a + (m2 - nm) * s);
        st[3 * T + t] = f1 * f1 * st[3 * T + t] + f2 * f2 * q;
        st[T + t] = f1 * st[T + t] + f2 * s;
        st[t] = nm;
    }
}

__global__ void k_head_final(float *logp, float *ent, float *sumsq, float *lse, const double *st, const float *raw,
                             const int32_t *target, int64_t T) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < T; t += (int64_t)gridDim.x * blockDim.x) {
        double L = st[t] + log(st[T + t]);
        lse[t] = (float)L;
        if (ent) ent[t] = (float)(log(st[T + t]) - st[2 * T + t] / st[T + t]);
        if (sumsq) sumsq[t] = (float)(st[3 * T + t] / (st[T + t] * st[T + t]));
        if (logp) logp[t] = target && target[t] >= 0 ? (float)((double)raw[t] - L) : 0.0f;
    }
}

void vc_cu_lm_head_fwd(float *logp, float *ent, float *sumsq, float *lse, const float *h, const float *W,
                       const float *b, const int32_t *target, const vc_head_desc *hd) {
    const char *op = "lm head forward";
    int64_t T = hd->T, H = hd->H, V = hd->V;
    if (!vc_cu_begin(op) || T == 0) return;
    vc_cu_prof_nest(1); /* the held operands are this op's time in the profile */
    cudaStream_t st = vc_cu_stream();
    const int z16 = head_bf16(b);
    float *keep = z16 ? NULL : (float *)hd->keep; /* slice v0's logits at keep + T v0, for the backward */
    int64_t nv = slice_rows(T, V, z16 ? 2 : 4);
    float *Z = keep ? NULL : (float *)vc_cu_scratch((size_t)(T * nv) * (z16 ? 2 : 4), op);
    double *stat = (double *)vc_cu_scratch((size_t)T * 4 * sizeof(double), op);
    float *raw = (float *)vc_cu_scratch((size_t)T * sizeof(float), op);
    if ((!Z && !keep) || !stat || !raw) goto out;
    vc_cu_operand_hold(h, T, H, 1); /* every slice's GEMM reads h: rounded to bf16 once */
    k_head_init<<<vc_cu_blocks(T, 256), 256, 0, st>>>(stat, raw, T);
    for (int64_t v0 = 0; v0 < V; v0 += nv) {
        int64_t n = V - v0 < nv ? V - v0 : nv;
        if (z16) {
            vc_cu_gemm_c16(T, n, H, h, W + v0 * H, Z);
            k_head_fwd_rows<__nv_bfloat16><<<(unsigned)T, HT, 0, st>>>((const __nv_bfloat16 *)Z, n, v0, b, hd->softcap,
                                                                       hd->scale, target, stat, raw, T, sumsq != NULL);
        } else {
            float *Zs = keep ? keep + T * v0 : Z;
            if (!vc_cu_gemm(0, 1, T, n, H, 1.0f, h, H, W + v0 * H, H, 0.0f, Zs, n, op)) goto out;
            k_head_fwd_rows<float><<<(unsigned)T, HT, 0, st>>>(Zs, n, v0, b, hd->softcap, hd->scale, target, stat, raw,
                                                               T, sumsq != NULL);
        }
        if (!vc_cu_end(op)) goto out;
    }
    k_head_final<<<vc_cu_blocks(T, 256), 256, 0, st>>>(logp, ent, sumsq, lse, stat, raw, target, T);
    vc_cu_end(op);
out:
    vc_cu_operand_hold(h, T, H, 0);
    vc_cu_scratch_free(Z);
    vc_cu_scratch_free(stat);
    vc_cu_scratch_free(raw);
    vc_cu_prof_nest(-1);
}

/* dZ in place: with z the scaled logits, d logp_y / dz = 1[v=y] - p, d H / dz = -p (z - E[z]); then the scale
 * and the soft-cap chain. OUT: float (Z itself) or __nv_bfloat16 (zo, the held bf16 copy of Z that the GEMMs read:
 * the f32 rows are then never written, nor read back to be rounded) */
__device__ __forceinline__ void put(float *p, float x) { *p = x; }
__device__ __forceinline__ void put(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); } /* as pack_bf16 */

template <typename ZT, typename OUT>
__global__ void k_head_bwd_rows(const ZT *Z, OUT *zo, int64_t nv, int64_t v0, const float *b, float cap, float scale,
                                const int32_t *target, const float *dlogp, const float *dent, const float *lse,
                                const float *ent) {
    int64_t t = blockIdx.x;
    const ZT *z = Z + t * nv;
    OUT *zw = zo + t * nv;
    float L = lse[t], gl = dlogp ? dlogp[t] : 0, ge = dent ? dent[t] : 0, Ez = L - ent[t];
    int32_t y = target ? target[t] : -1;
    if (y < 0) gl = 0;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        float zv = bias_cap(zval(z + v), b, v0 + v, cap), zs = zv * scale;
        float pv = expf(zs - L);
        float dz = -gl * pv - ge * pv * (zs - Ez);
        if (v + v0 == y) dz += gl;
        dz *= scale;
        if (cap > 0) {
            float tt = zv / cap;
            dz *= 1.0f - tt * tt;
        }
        put(zw + v, dz);
    }
}

__global__ void k_colsum(float *db, const float *Z, int64_t T, int64_t nv) {
    int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (v >= nv) return;
    float s = db[v];
    for (int64_t t = 0; t < T; t++) s += Z[t * nv + v];
    db[v] = s;
}

void vc_cu_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                       const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                       const vc_head_desc *hd) {
    const char *op = "lm head backward";
    int64_t T = hd->T, H = hd->H, V = hd->V;
    if (!vc_cu_begin(op) || T == 0) return;
    cudaStream_t st = vc_cu_stream();
    const int z16 = head_bf16(b);
    float *keep = z16 ? NULL : (float *)hd->keep; /* the forward's logits: its slices, no GEMM to form them again */
    int64_t nv = slice_rows(T, V);
    float *Z = keep ? NULL : (float *)vc_cu_scratch((size_t)(T * nv) * sizeof(float), op);
    __nv_bfloat16 *Z16 = z16 && Z ? (__nv_bfloat16 *)vc_cu_scratch((size_t)(T * nv) * 2, op) : NULL;
    if ((!Z && !keep) || (z16 && !Z16)) {
        vc_cu_scratch_free(Z);
        return;
    }
    vc_cu_prof_nest(1); /* the held operands are this op's time in the profile */
    /* with bf16 matmuls each operand read by two GEMMs is rounded once: h (every slice), the slice of W
     * (logits and dh), the slice's dZ (dh and dW) */
    vc_cu_operand_hold(h, T, H, 1);
    for (int64_t v0 = 0; v0 < V; v0 += nv) {
        int64_t n = V - v0 < nv ? V - v0 : nv;
        int ok = 0;
        float *Zs = keep ? keep + T * v0 : Z;
        vc_cu_operand_hold(W + v0 * H, n, H, 1);
        /* the logits again (VERLC_HEAD_BF16: in bf16, as the forward had them; Zs then only the key of dZ's hold) */
        if (z16) vc_cu_gemm_c16(T, n, H, h, W + v0 * H, Z16);
        else if (!keep && !vc_cu_gemm(0, 1, T, n, H, 1.0f, h, H, W + v0 * H, H, 0.0f, Zs, n, op)) goto slice;
        /* bf16 matmuls without a bias: dZ straight into a held bf16 copy (db's column sums read the f32 rows) */
        if (__nv_bfloat16 *zh = db ? NULL : (__nv_bfloat16 *)vc_cu_hold_slot(Zs, T, n)) {
            if (z16)
                k_head_bwd_rows<__nv_bfloat16, __nv_bfloat16><<<(unsigned)T, HT, 0, st>>>(
                    Z16, zh, n, v0, b, hd->softcap, hd->scale, target, dlogp, dent, lse, ent);
            else
                k_head_bwd_rows<float, __nv_bfloat16><<<(unsigned)T, HT, 0, st>>>(Zs, zh, n, v0, b, hd->softcap, hd->scale,
                                                                                  target, dlogp, dent, lse, ent);
        } else {
            if (z16)
                k_head_bwd_rows<__nv_bfloat16, float><<<(unsigned)T, HT, 0, st>>>(Z16, Zs, n, v0, b, hd->softcap,
                                                                                  hd->scale, target, dlogp, dent, lse,
                                                                                  ent);
            else
                k_head_bwd_rows<float, float><<<(unsigned)T, HT, 0, st>>>(Zs, Zs, n, v0, b, hd->softcap, hd->scale, target,
                                                                          dlogp, dent, lse, ent);
            vc_cu_operand_hold(Zs, T, n, 1);
        }
        if (!vc_cu_end(op)) {
            vc_cu_operand_hold(Zs, T, n, 0);
            goto slice;
        }
        ok = (!dh || vc_cu_gemm(0, 0, T, H, n, 1.0f, Zs, n, W + v0 * H, H, 1.0f, dh, H, op)) &&
             (!dW || vc_cu_gemm(1, 0, n, H, T, 1.0f, Zs, n, h, H, 1.0f, dW + v0 * H, H, op));
        vc_cu_operand_hold(Zs, T, n, 0);
        if (ok && db) {
            k_colsum<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(db + v0, Zs, T, n);
            ok = vc_cu_end(op);
        }
    slice:
        vc_cu_operand_hold(W + v0 * H, n, H, 0);
        if (!ok) break;
    }
    vc_cu_operand_hold(h, T, H, 0);
    vc_cu_scratch_free(Z);
    vc_cu_scratch_free(Z16);
    vc_cu_prof_nest(-1);
}
