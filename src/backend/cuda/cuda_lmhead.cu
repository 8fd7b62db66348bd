/* Fused LM head on the GPU: the vocabulary is walked in slices; each slice's logits for all tokens are
 * one cuBLAS GEMM into a scratch buffer (f32, or bf16 with VERLC_HEAD_BF16=1), then one warp per token folds the slice
 * into running statistics in one pass (max, sum of exponentials, sum of exponentials times (logit - max), when asked
 * the sum of squared exponentials; in double, as the CPU backend keeps them, over f32 sums of 16-32 terms). Logits are
 * softcap(h W^T + b) * scale.
 * Backward recomputes each slice's logits (or reads them where the forward kept them: vc_head_desc.keep), turns them
 * into dZ, and adds dh += dZ W, dW += dZ^T h with GEMMs and db with a column kernel that walks tokens in order. */
#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <stdio.h>
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

/* $VERLC_CUDA_HEAD_KEEP as bytes ("0", "4096M", "8G"; K, M, G suffixes) into *cap: 1, or 0 when unset (a malformed
 * value said once on stderr: a tuning switch, the default kept) */
static int keep_cap_env(size_t *cap) {
    static int warned;
    const char *e = getenv("VERLC_CUDA_HEAD_KEEP"), *u = "KMG";
    if (!e || !*e) return 0;
    char *end = NULL;
    double v = strtod(e, &end);
    const char *k = *end ? strchr(u, *end) : NULL;
    if (end == e || !(v >= 0) || (*end && (!k || !*k || end[1]))) {
        if (!warned++)
            fprintf(stderr, "verlc: VERLC_CUDA_HEAD_KEEP=%s is not a byte count (such as 0, 4096M or 8G); using a "
                            "sixteenth of the device's memory\n", e);
        return 0;
    }
    for (int i = k ? (int)(k - u) + 1 : 0; i > 0; i--) v *= 1024;
    *cap = (size_t)v;
    return 1;
}

/* the bytes of logits the forward keeps for the backward (vc_backend.lm_head_keep): f32 logits up to
 * $VERLC_CUDA_HEAD_KEEP bytes (0: never), by default a sixteenth of the device's memory (8.8 GB on
 * an H200: about 14,500 rows of a 151,936-token vocabulary). The backward then skips the GEMM that formed them again, a
 * quarter of the LM head's work (the same values: the forward's own) */
size_t vc_cu_lm_head_keep(const vc_head_desc *d, const float *b) {
    if (head_bf16(b) || d->T <= 0 || d->V <= 0) return 0;
    size_t bytes = (size_t)(d->T * d->V) * sizeof(float), cap = 0, fr = 0;
    if (!keep_cap_env(&cap)) {
        if (cudaMemGetInfo(&fr, &cap) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        cap /= 16;
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

/* running softmax statistics of a run of scaled logits: their max m, s = sum e^(z - m), a = sum e^(z - m) (z - m),
 * q = sum e^(2 (z - m)); merged as the slices are (rescaled to the larger max) */
struct head_stat {
    double m, s, a, q;
};
/* merged with the factors e^(m - max) in double (fexp 0: the slices' merge) or f32 (1: a warp's lanes, whose maxima
 * are f32 logits) */
template <int FEXP> __device__ __forceinline__ head_stat stat_merge(head_stat x, head_stat y) {
    if (y.m == -INFINITY) return x; /* nothing in y (or in both) */
    if (x.m == -INFINITY) return y;
    const double nm = x.m > y.m ? x.m : y.m, dx = x.m - nm, dy = y.m - nm;
    const double fx = FEXP ? (double)expf((float)dx) : exp(dx), fy = FEXP ? (double)expf((float)dy) : exp(dy);
    return head_stat{ nm, fx * x.s + fy * y.s, fx * (x.a + dx * x.s) + fy * (y.a + dy * y.s), fx * fx * x.q + fy * fy * y.q };
}

/* VW logits from p (16 bytes when VW > 1: float4, or 8 bf16) */
template <int VW> __device__ __forceinline__ void zload(const float *p, float *x) {
    if (VW == 4) {
        float4 v = *(const float4 *)p;
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else x[0] = *p;
}
template <int VW> __device__ __forceinline__ void zload(const __nv_bfloat16 *p, float *x) {
    if (VW == 8) {
        uint4 v = *(const uint4 *)p;
        const unsigned w[4] = { v.x, v.y, v.z, v.w };
        for (int k = 0; k < 4; k++) x[2 * k] = __uint_as_float(w[k] << 16), x[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    } else x[0] = __bfloat162float(*p);
}

#define HEAD_WARPS 8 /* rows a block */
#define HEAD_CH 4    /* VW-wide loads a lane takes together: one max and one rescale per HEAD_CH x VW logits */

/* a warp per token: bias, cap, scale, the slice's statistics in one pass (each lane's run in chunks: the chunk's max,
 * the lane's sums rescaled where it rose, the chunk's exponentials summed in f32, added in double; the lanes merged
 * in a fixed tree), merged into the token's (m, s, a) and, with want_q, q. The slice's logits are read once, never
 * written back. VW: logits a load (rows of whole 16-byte runs), else 1 */
template <typename ZT, int VW, int PLAIN /* no bias, no soft-cap */>
__global__ void k_head_fwd_warp(const ZT *Z, int64_t nv, int64_t v0, const float *b, float cap, float scale,
                                const int32_t *target, double *st, float *raw, int64_t T, int want_q) {
    const int lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * HEAD_WARPS + (threadIdx.x >> 5);
    if (t >= T) return; /* a whole warp */
    const ZT *z = Z + t * nv;
    float m = -INFINITY; /* the lane's running max, its sums in double relative to it */
    double rs = 0, ra = 0, rq = 0;
    for (int64_t c0 = (int64_t)lane * VW; c0 < nv; c0 += (int64_t)32 * VW * HEAD_CH) {
        float x[HEAD_CH * VW];
        float cm = -INFINITY;
#pragma unroll
        for (int g = 0; g < HEAD_CH; g++) {
            const int64_t v = c0 + (int64_t)g * 32 * VW;
            if (v < nv) zload<VW>(z + v, x + g * VW);
#pragma unroll
            for (int k = 0; k < VW; k++) { /* past the row (whole VW runs): -inf, nothing read */
                if (v < nv) x[g * VW + k] = (PLAIN ? x[g * VW + k] : bias_cap(x[g * VW + k], b, v0 + v + k, cap)) * scale;
                else x[g * VW + k] = -INFINITY;
                cm = fmaxf(cm, x[g * VW + k]);
            }
        }
        if (cm > m) { /* the max rose: the sums so far rescaled to it (rare after the first chunks) */
            if (m != -INFINITY) {
                const float dm = m - cm;
                const double f = expf(dm);
                ra = f * (ra + (double)dm * rs);
                rs *= f;
                rq *= f * f;
            }
            m = cm;
        }
        float cs = 0, ca = 0, cq = 0;
#pragma unroll
        for (int k = 0; k < HEAD_CH * VW; k++) { /* past the row (or a -inf logit): e = 0, no term */
            const float d = x[k] - m, e = expf(d);
            cs += e;
            ca += e > 0.0f ? e * d : 0.0f;
            cq += e * e;
        }
        rs += cs;
        ra += ca;
        if (want_q) rq += cq;
    }
    head_stat r = { m, rs, ra, rq };
    for (int o = 16; o > 0; o >>= 1) {
        head_stat y = { __shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o),
                        __shfl_xor_sync(0xffffffffu, r.a, o), __shfl_xor_sync(0xffffffffu, r.q, o) };
        r = lane & o ? stat_merge<1>(y, r) : stat_merge<1>(r, y); /* the lower lanes' run first: the same in both */
    }
    if (lane) return;
    int32_t y = target ? target[t] : -1;
    if (y >= v0 && y < v0 + nv) raw[t] = bias_cap(zval(z + (y - v0)), b, y, cap) * scale;
    head_stat acc = { st[t], st[T + t], st[2 * T + t], st[3 * T + t] };
    acc = stat_merge<0>(acc, r);
    st[t] = acc.m;
    st[T + t] = acc.s;
    st[2 * T + t] = acc.a;
    st[3 * T + t] = acc.q;
}

/* the row kernel for slice Z (n logits a row): 16-byte loads where every row starts on a 16-byte boundary */
template <typename ZT>
static void head_fwd_slice(const ZT *Z, int64_t n, int64_t v0, const float *b, const vc_head_desc *hd,
                           const int32_t *target, double *stat, float *raw, int64_t T, int want_q, cudaStream_t st) {
    constexpr int VW = 16 / sizeof(ZT);
    dim3 grid((unsigned)((T + HEAD_WARPS - 1) / HEAD_WARPS)), block(32 * HEAD_WARPS);
    const float cap = hd->softcap, sc = hd->scale;
    const int wide = n % VW == 0 && (uintptr_t)Z % 16 == 0, plain = !b && !(cap > 0);
    if (wide && plain)
        k_head_fwd_warp<ZT, VW, 1><<<grid, block, 0, st>>>(Z, n, v0, b, cap, sc, target, stat, raw, T, want_q);
    else if (wide)
        k_head_fwd_warp<ZT, VW, 0><<<grid, block, 0, st>>>(Z, n, v0, b, cap, sc, target, stat, raw, T, want_q);
    else if (plain)
        k_head_fwd_warp<ZT, 1, 1><<<grid, block, 0, st>>>(Z, n, v0, b, cap, sc, target, stat, raw, T, want_q);
    else
        k_head_fwd_warp<ZT, 1, 0><<<grid, block, 0, st>>>(Z, n, v0, b, cap, sc, target, stat, raw, T, want_q);
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
            head_fwd_slice((const __nv_bfloat16 *)Z, n, v0, b, hd, target, stat, raw, T, sumsq != NULL, st);
        } else {
            float *Zs = keep ? keep + T * v0 : Z;
            if (!vc_cu_gemm(0, 1, T, n, H, 1.0f, h, H, W + v0 * H, H, 0.0f, Zs, n, op)) goto out;
            head_fwd_slice(Zs, n, v0, b, hd, target, stat, raw, T, sumsq != NULL, st);
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

/* VW dZ values to p: float (Z itself) or bf16 (as pack_bf16 rounds), 16 / 8-byte stores where VW > 1 */
template <int VW> __device__ __forceinline__ void zstore(float *p, const float *x) {
    if (VW == 1) *p = x[0];
    for (int k = 0; VW > 1 && k < VW; k += 4) *(float4 *)(p + k) = make_float4(x[k], x[k + 1], x[k + 2], x[k + 3]);
}
__device__ __forceinline__ unsigned bf16_pair(float lo, float hi) {
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
template <int VW> __device__ __forceinline__ void zstore(__nv_bfloat16 *p, const float *x) {
    if (VW == 1) *p = __float2bfloat16_rn(x[0]);
    else if (VW == 4) *(uint2 *)p = make_uint2(bf16_pair(x[0], x[1]), bf16_pair(x[2], x[3]));
    else if (VW == 8)
        *(uint4 *)p = make_uint4(bf16_pair(x[0], x[1]), bf16_pair(x[2], x[3]), bf16_pair(x[4], x[5]), bf16_pair(x[6], x[7]));
}

/* dZ: with z the scaled logits, d logp_y / dz = 1[v=y] - p, d H / dz = -p (z - E[z]); then the scale and the soft-cap
 * chain. OUT: float (Z itself) or __nv_bfloat16 (zo, the held bf16 copy of Z that the GEMMs read: the f32 rows are then
 * never written, nor read back to be rounded). A block per token, VW logits a thread at a time (rows of whole 16-byte
 * runs of Z, else 1); PLAIN: no bias, no soft-cap */
template <typename ZT, typename OUT, int VW, int PLAIN>
__global__ void k_head_bwd_rows(const ZT *Z, OUT *zo, int64_t nv, int64_t v0, const float *b, float cap, float scale,
                                const int32_t *target, const float *dlogp, const float *dent, const float *lse,
                                const float *ent) {
    int64_t t = blockIdx.x;
    const ZT *z = Z + t * nv;
    OUT *zw = zo + t * nv;
    float L = lse[t], gl = dlogp ? dlogp[t] : 0, ge = dent ? dent[t] : 0, Ez = L - ent[t];
    int32_t y = target ? target[t] : -1;
    if (y < 0) gl = 0;
    for (int64_t v = (int64_t)threadIdx.x * VW; v < nv; v += (int64_t)blockDim.x * VW) {
        float x[VW];
        zload<VW>(z + v, x);
#pragma unroll
        for (int k = 0; k < VW; k++) {
            const float zv = PLAIN ? x[k] : bias_cap(x[k], b, v0 + v + k, cap), zs = zv * scale;
            const float pv = expf(zs - L);
            float dz = -gl * pv - ge * pv * (zs - Ez);
            if (v + k + v0 == y) dz += gl;
            dz *= scale;
            if (!PLAIN && cap > 0) {
                float tt = zv / cap;
                dz *= 1.0f - tt * tt;
            }
            x[k] = dz;
        }
        zstore<VW>(zw + v, x);
    }
}

/* dZ of slice Z (n logits a row) into zo, as k_head_bwd_rows */
template <typename ZT, typename OUT>
static void head_bwd_slice(const ZT *Z, OUT *zo, int64_t n, int64_t v0, const float *b, const vc_head_desc *hd,
                           const int32_t *target, const float *dlogp, const float *dent, const float *lse,
                           const float *ent, cudaStream_t st) {
    constexpr int VW = 16 / sizeof(ZT);
    const int64_t T = hd->T;
    const float cap = hd->softcap, sc = hd->scale;
    dim3 grid((unsigned)T), block(HT);
    const int wide = n % VW == 0 && (uintptr_t)Z % 16 == 0 && (uintptr_t)zo % (VW * sizeof(OUT)) == 0;
    const int plain = !b && !(cap > 0);
    if (wide && plain)
        k_head_bwd_rows<ZT, OUT, VW, 1><<<grid, block, 0, st>>>(Z, zo, n, v0, b, cap, sc, target, dlogp, dent, lse, ent);
    else if (wide)
        k_head_bwd_rows<ZT, OUT, VW, 0><<<grid, block, 0, st>>>(Z, zo, n, v0, b, cap, sc, target, dlogp, dent, lse, ent);
    else if (plain)
        k_head_bwd_rows<ZT, OUT, 1, 1><<<grid, block, 0, st>>>(Z, zo, n, v0, b, cap, sc, target, dlogp, dent, lse, ent);
    else
        k_head_bwd_rows<ZT, OUT, 1, 0><<<grid, block, 0, st>>>(Z, zo, n, v0, b, cap, sc, target, dlogp, dent, lse, ent);
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
            if (z16) head_bwd_slice(Z16, zh, n, v0, b, hd, target, dlogp, dent, lse, ent, st);
            else head_bwd_slice(Zs, zh, n, v0, b, hd, target, dlogp, dent, lse, ent, st);
        } else {
            if (z16) head_bwd_slice(Z16, Zs, n, v0, b, hd, target, dlogp, dent, lse, ent, st);
            else head_bwd_slice(Zs, Zs, n, v0, b, hd, target, dlogp, dent, lse, ent, st);
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
