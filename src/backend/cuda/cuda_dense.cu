/* CUDA kernels: RMSNorm / LayerNorm forward and backward, RoPE, activations. Norms run one block per
 * row with warp reductions; parameter gradients are summed per fixed block of ROWS rows into partials
 * (one thread per column walks its rows in order), then the partials are added in block order, so the
 * results are the same bits run to run. */
#include "cuda_internal.h"
#include "backend/act_math.h"
#include <cuda_bf16.h>

#define NORM_THREADS 256
#define ROWS 64 /* rows per parameter-gradient partial (doubled past 65535 blocks) */

/* ---- RMSNorm ---- */
/* y16 (when not NULL): y rounded to bf16 as well, the held operand of the GEMMs that read y (rmsnorm_fwd_held) */
__global__ void k_rms_fwd(float *y, float *rstd, const float *x, const float *w, int64_t cols, float eps, float off,
                          __nv_bfloat16 *y16) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    float ss = 0;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
    ss = vc_block_sum(ss, sh);
    float rs = 1.0f / sqrtf(ss / (float)cols + eps);
    if (rstd && threadIdx.x == 0) rstd[r] = rs;
    float *yr = y + r * cols;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = xr[i] * rs * (w ? w[i] + off : 1.0f);
        yr[i] = v;
        if (y16) y16[r * cols + i] = __float2bfloat16_rn(v);
    }
}

/* Rows whose columns are whole float4s (and every pointer on a 16-byte boundary) go a warp a row, NORM_THREADS / 32
 * rows a block: float4 loads, the row's sum by a warp butterfly, no block barrier (short rows, q/k norms' heads
 * above all, left most of a block idle behind its barriers). The same arithmetic an element as the block kernels. */
#define NORM_ROWS (NORM_THREADS / 32)
static bool norm_by_warps(int64_t cols, const void *a, const void *b, const void *c, const void *d) {
    const char *e = getenv("VERLC_CUDA_NORM_WARPS"); /* 0: the block kernels (A/B; read per call) */
    return !(e && *e == '0') && cols % 4 == 0 && vc_cu_aligned16(a, b, c, d);
}
static unsigned norm_blocks(int64_t rows) { return (unsigned)((rows + NORM_ROWS - 1) / NORM_ROWS); }
__device__ __forceinline__ float4 norm_w4(const float *w, int64_t i, float off) {
    if (!w) return make_float4(1.0f, 1.0f, 1.0f, 1.0f);
    const float4 v = reinterpret_cast<const float4 *>(w)[i];
    return make_float4(v.x + off, v.y + off, v.z + off, v.w + off);
}

/* a warp's row of the norm: y = v rs (w + off), and y's bf16 rounding into y2 when held (not NULL) */
__device__ __forceinline__ void rms_row_out(float4 *yr, __nv_bfloat162 *y2, const float4 *vr, const float *w, float off,
                                            float rs, int64_t c4, int lane) {
    for (int64_t i = lane; i < c4; i += 32) {
        const float4 v = vr[i], g = norm_w4(w, i, off);
        const float4 o = make_float4(v.x * rs * g.x, v.y * rs * g.y, v.z * rs * g.z, v.w * rs * g.w);
        yr[i] = o;
        if (y2) {
            y2[2 * i] = __floats2bfloat162_rn(o.x, o.y);
            y2[2 * i + 1] = __floats2bfloat162_rn(o.z, o.w);
        }
    }
}

/* ADD: s = x + a first (the add kernel's sum an element), the norm then of s: a residual sum and the next norm */
template <bool ADD>
__global__ void k_rms_fwd_w(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                            float eps, float off, __nv_bfloat162 *y16, const float *a, float *s) {
    const int lane = threadIdx.x % 32;
    const int64_t r = blockIdx.x * (int64_t)NORM_ROWS + threadIdx.x / 32, c4 = cols / 4;
    if (r >= rows) return;
    const float4 *xr = reinterpret_cast<const float4 *>(x + r * cols);
    const float4 *ar = ADD ? reinterpret_cast<const float4 *>(a + r * cols) : NULL;
    float4 *sr = ADD ? reinterpret_cast<float4 *>(s + r * cols) : NULL;
    float ss = 0;
    for (int64_t i = lane; i < c4; i += 32) {
        float4 v = xr[i];
        if (ADD) {
            const float4 b = ar[i];
            v = make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w);
            sr[i] = v;
        }
        ss += v.x * v.x;
        ss += v.y * v.y;
        ss += v.z * v.z;
        ss += v.w * v.w;
    }
    ss = vc_warp_sum(ss);
    const float rs = 1.0f / sqrtf(ss / (float)cols + eps);
    if (rstd && lane == 0) rstd[r] = rs;
    rms_row_out(reinterpret_cast<float4 *>(y + r * cols), y16 ? y16 + r * (cols / 2) : NULL, ADD ? sr : xr, w, off, rs,
                c4, lane); /* (sr: the lane's own stores, read back) */
}

static void rms_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols, float eps,
                    float w_offset, __nv_bfloat16 *y16) {
    if (norm_by_warps(cols, y, x, w, NULL))
        k_rms_fwd_w<false><<<norm_blocks(rows), NORM_THREADS, 0, vc_cu_stream()>>>(
            y, rstd, x, w, rows, cols, eps, w_offset, (__nv_bfloat162 *)y16, (const float *)NULL, (float *)NULL);
    else k_rms_fwd<<<(unsigned)rows, NORM_THREADS, 0, vc_cu_stream()>>>(y, rstd, x, w, cols, eps, w_offset, y16);
}

void vc_cu_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols, float eps,
                       float w_offset) {
    const char *op = "rmsnorm forward";
    if (!vc_cu_begin(op) || rows == 0) return;
    rms_fwd(y, rstd, x, w, rows, cols, eps, w_offset, NULL);
    vc_cu_end(op);
}

/* s = x + a and y = RMSNorm(s), y held for the GEMMs as by vc_cu_rmsnorm_fwd_held: one pass where the rows are whole
 * float4s (as the norm's warp kernel: the same bits as add, then the norm), else the two ops */
void vc_cu_add_rmsnorm_held(float *s, float *y, float *rstd, const float *x, const float *a, const float *w, int64_t rows,
                            int64_t cols, float eps, float w_offset) {
    if (!norm_by_warps(cols, y, x, w, s) || !vc_cu_aligned16(a, NULL)) {
        vc_cu_add(s, x, a, rows * cols);
        vc_cu_rmsnorm_fwd_held(y, rstd, s, w, rows, cols, eps, w_offset);
        return;
    }
    const char *op = "add + rmsnorm forward";
    if (!vc_cu_begin(op) || rows == 0) return;
    k_rms_fwd_w<true><<<norm_blocks(rows), NORM_THREADS, 0, vc_cu_stream()>>>(
        y, rstd, x, w, rows, cols, eps, w_offset, (__nv_bfloat162 *)vc_cu_hold_slot(y, rows, cols), a, s);
    vc_cu_end(op);
}

/* the same, y also rounded to bf16 into a held copy (vc_cu_hold_slot: released by operand_hold(y, .., 0)) for the
 * GEMMs that read it, in the norm's own pass: no separate rounding pass (q, k and v's input; gate and up's) */
void vc_cu_rmsnorm_fwd_held(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                            float eps, float w_offset) {
    const char *op = "rmsnorm forward";
    if (!vc_cu_begin(op) || rows == 0) return;
    rms_fwd(y, rstd, x, w, rows, cols, eps, w_offset, (__nv_bfloat16 *)vc_cu_hold_slot(y, rows, cols));
    vc_cu_end(op);
}

__global__ void k_rms_bwd_dx(float *dx, const float *dy, const float *x, const float *w, const float *rstd,
                             int64_t cols, float off) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    float rs = rstd[r], dot = 0;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dot += dyr[i] * (w ? w[i] + off : 1.0f) * xr[i];
    dot = vc_block_sum(dot, sh);
    float k = dot * rs * rs * rs / (float)cols;
    float *dxr = dx + r * cols;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dxr[i] += rs * dyr[i] * (w ? w[i] + off : 1.0f) - k * xr[i];
}

/* k_rms_bwd_dx a warp a row (norm_by_warps) */
__global__ void k_rms_bwd_dx_w(float *dx, const float *dy, const float *x, const float *w, const float *rstd,
                               int64_t rows, int64_t cols, float off) {
    const int lane = threadIdx.x % 32;
    const int64_t r = blockIdx.x * (int64_t)NORM_ROWS + threadIdx.x / 32, c4 = cols / 4;
    if (r >= rows) return;
    const float4 *xr = reinterpret_cast<const float4 *>(x + r * cols);
    const float4 *dyr = reinterpret_cast<const float4 *>(dy + r * cols);
    const float rs = rstd[r];
    float dot = 0;
    for (int64_t i = lane; i < c4; i += 32) {
        const float4 d = dyr[i], v = xr[i], g = norm_w4(w, i, off);
        dot += d.x * g.x * v.x;
        dot += d.y * g.y * v.y;
        dot += d.z * g.z * v.z;
        dot += d.w * g.w * v.w;
    }
    dot = vc_warp_sum(dot);
    const float k = dot * rs * rs * rs / (float)cols;
    float4 *dxr = reinterpret_cast<float4 *>(dx + r * cols);
    for (int64_t i = lane; i < c4; i += 32) {
        const float4 d = dyr[i], v = xr[i], g = norm_w4(w, i, off);
        float4 o = dxr[i];
        o.x += rs * d.x * g.x - k * v.x;
        o.y += rs * d.y * g.y - k * v.y;
        o.z += rs * d.z * g.z - k * v.z;
        o.w += rs * d.w * g.w - k * v.w;
        dxr[i] = o;
    }
}

/* part[blk, c] = sum over rows of block blk of dy * x * rstd (rms) or dy * xhat and dy (layer norm) */
__global__ void k_norm_dparam_part(float *pw, float *pb, const float *dy, const float *x, const float *mean,
                                   const float *rstd, int64_t rows, int64_t cols, int64_t rpb) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int64_t r0 = (int64_t)blockIdx.y * rpb, r1 = r0 + rpb < rows ? r0 + rpb : rows;
    float aw = 0, ab = 0;
    for (int64_t r = r0; r < r1; r++) {
        float g = dy[r * cols + c];
        float xh = mean ? (x[r * cols + c] - mean[r]) * rstd[r] : x[r * cols + c] * rstd[r];
        aw += g * xh;
        ab += g;
    }
    if (pw) pw[blockIdx.y * cols + c] = aw;
    if (pb) pb[blockIdx.y * cols + c] = ab;
}

__global__ void k_sum_parts(float *dst, const float *part, int64_t nblk, int64_t cols) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = dst[c];
    for (int64_t b = 0; b < nblk; b++) s += part[b * cols + c];
    dst[c] = s;
}

/* dw (and db) += column sums in fixed block order */
static void norm_dparams(float *dw, float *db, const float *dy, const float *x, const float *mean, const float *rstd,
                         int64_t rows, int64_t cols, const char *op) {
    int64_t rpb = ROWS; /* grid.y is at most 65535 */
    while ((rows + rpb - 1) / rpb > 65535) rpb *= 2;
    int64_t nblk = (rows + rpb - 1) / rpb;
    float *pw = dw ? (float *)vc_cu_scratch((size_t)(nblk * cols) * sizeof(float), op) : NULL;
    float *pb = db ? (float *)vc_cu_scratch((size_t)(nblk * cols) * sizeof(float), op) : NULL;
    if ((dw && !pw) || (db && !pb)) goto out;
    {
        dim3 grid((unsigned)((cols + 255) / 256), (unsigned)nblk);
        k_norm_dparam_part<<<grid, 256, 0, vc_cu_stream()>>>(pw, pb, dy, x, mean, rstd, rows, cols, rpb);
        unsigned g1 = (unsigned)((cols + 255) / 256);
        if (dw) k_sum_parts<<<g1, 256, 0, vc_cu_stream()>>>(dw, pw, nblk, cols);
        if (db) k_sum_parts<<<g1, 256, 0, vc_cu_stream()>>>(db, pb, nblk, cols);
        vc_cu_end(op);
    }
out:
    vc_cu_scratch_free(pw);
    vc_cu_scratch_free(pb);
}

void vc_cu_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                       int64_t rows, int64_t cols, float w_offset) {
    const char *op = "rmsnorm backward";
    if (!vc_cu_begin(op) || rows == 0) return;
    if (dx && norm_by_warps(cols, dx, dy, x, w))
        k_rms_bwd_dx_w<<<norm_blocks(rows), NORM_THREADS, 0, vc_cu_stream()>>>(dx, dy, x, w, rstd, rows, cols,
                                                                               w_offset);
    else if (dx) k_rms_bwd_dx<<<(unsigned)rows, NORM_THREADS, 0, vc_cu_stream()>>>(dx, dy, x, w, rstd, cols, w_offset);
    if (!vc_cu_end(op)) return;
    if (dw) norm_dparams(dw, NULL, dy, x, NULL, rstd, rows, cols, op);
}

/* ---- LayerNorm ---- */
__global__ void k_ln_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                         int64_t cols, float eps) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    float s = 0;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i];
    float mu = vc_block_sum(s, sh) / (float)cols, v = 0;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) v += (xr[i] - mu) * (xr[i] - mu);
    float rs = 1.0f / sqrtf(vc_block_sum(v, sh) / (float)cols + eps);
    if (threadIdx.x == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
    float *yr = y + r * cols;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] = (xr[i] - mu) * rs * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
}

void vc_cu_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                         int64_t rows, int64_t cols, float eps) {
    const char *op = "layernorm forward";
    if (!vc_cu_begin(op) || rows == 0) return;
    k_ln_fwd<<<(unsigned)rows, NORM_THREADS, 0, vc_cu_stream()>>>(y, mean, rstd, x, w, b, cols, eps);
    vc_cu_end(op);
}

__global__ void k_ln_bwd_dx(float *dx, const float *dy, const float *x, const float *w, const float *mean,
                            const float *rstd, int64_t cols) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    float mu = mean[r], rs = rstd[r], mg = 0, mgx = 0;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        float g = dyr[i] * (w ? w[i] : 1.0f), xh = (xr[i] - mu) * rs;
        mg += g;
        mgx += g * xh;
    }
    mg = vc_block_sum(mg, sh) / (float)cols;
    mgx = vc_block_sum(mgx, sh) / (float)cols;
    float *dxr = dx + r * cols;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        float g = dyr[i] * (w ? w[i] : 1.0f), xh = (xr[i] - mu) * rs;
        dxr[i] += rs * (g - mg - xh * mgx);
    }
}

void vc_cu_layernorm_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                         const float *mean, const float *rstd, int64_t rows, int64_t cols) {
    const char *op = "layernorm backward";
    if (!vc_cu_begin(op) || rows == 0) return;
    if (dx) k_ln_bwd_dx<<<(unsigned)rows, NORM_THREADS, 0, vc_cu_stream()>>>(dx, dy, x, w, mean, rstd, cols);
    if (!vc_cu_end(op)) return;
    if (dw || db) norm_dparams(dw, db, dy, x, mean, rstd, rows, cols, op);
}

/* ---- RoPE: one thread per rotated pair; tokens across the grid's rows, a token's (head, pair) across the threads
 * (the head by vc_udiv: no 64-bit division an element) ---- */
/* the rotation of the pair (x1, x2) by (c, s): its first element, or (second) its second: every RoPE kernel's
 * arithmetic */
__device__ __forceinline__ float rope_rot(float x1, float x2, float c, float s, bool second) {
    return second ? x2 * c + x1 * s : x1 * c - x2 * s;
}
/* pair i of the head at v rotated by (c, s) */
__device__ __forceinline__ void rope_pair(float *v, int i, int half, int inter, float c, float s) {
    const int a = inter ? 2 * i : i, b = inter ? 2 * i + 1 : i + half;
    const float x1 = v[a], x2 = v[b];
    v[a] = rope_rot(x1, x2, c, s, false);
    v[b] = rope_rot(x1, x2, c, s, true);
}
/* x [T, nh, hd] and, with nh2 > 0, x2 [T, nh2, hd] (q and k: one launch, heads nh .. nh + nh2 - 1 those of x2) */
__global__ void k_rope(float *x, int nh, float *x2, int nh2, const float *cs, const float *sn, int64_t T, int hd, int rot,
                       vc_udiv by_half, int inter, float sign) {
    const int half = rot / 2;
    VC_ROW_LOOP(t, T) {
        const float *ct = cs + t * half, *st = sn + t * half;
        VC_COL_LOOP(j, (int64_t)(nh + nh2) * half) {
            const int h = (int)vc_udiv_do(by_half, (uint32_t)j), i = (int)j - h * half;
            float *v = h < nh ? x + (t * nh + h) * hd : x2 + (t * nh2 + h - nh) * hd;
            rope_pair(v, i, half, inter, ct[i], sign * st[i]);
        }
    }
}

void vc_cu_rope(float *x, const float *cos, const float *sin, int64_t T, int nh, int hd, int rot, int interleaved,
                int sign) {
    const char *op = "rope";
    if (!vc_cu_begin(op) || T == 0 || rot < 2) return;
    k_rope<<<vc_cu_rows_grid(T, (int64_t)nh * (rot / 2), 256), 256, 0, vc_cu_stream()>>>(
        x, nh, (float *)NULL, 0, cos, sin, T, hd, rot, vc_udiv_make((uint32_t)(rot / 2)), interleaved, (float)sign);
    vc_cu_end(op);
}

/* q, k and v out of the fused projection's rows Y [M, Nq + Nk + Nv] (vc_cu_qkv_rope): a thread an output element, the
 * bias added as the GEMM's epilogue would (one f32 add), q's and k's pairs rotated by rope_rot as rope_pair rotates
 * them (each thread forms the element of its pair it owns); with d.kv_dst, each key and value also
 * into its page as k_scatter_kv_bf16 writes it */
__global__ void k_qkv_split(float *q, float *k, float *v, const float *Y, int64_t M, vc_qkv_desc d, const float *bq,
                            const float *bk, const float *bv) {
    const int hd = d.head_dim, Nq = d.n_head * hd, Nk = d.n_kv_head * hd, Nv = d.n_kv_head * d.v_head_dim;
    const int Nt = Nq + Nk + Nv, half = d.rot / 2;
    VC_ROW_LOOP(r, M) {
        const float *y = Y + r * Nt;
        VC_COL_LOOP(j, (int64_t)Nt) {
            const int c = (int)j;
            if (c >= Nq + Nk) {
                const int e = c - Nq - Nk;
                const float x = y[c] + (bv ? bv[e] : 0.0f);
                v[r * Nv + e] = x;
                if (d.kv_dst) ((__nv_bfloat16 *)d.kv_dst)[d.kv_off[r] + Nk + e] = __float2bfloat16_rn(x);
                continue;
            }
            const bool isq = c < Nq;
            const int col = isq ? c : c - Nq, e = col % hd, hb = col - e; /* the head's first column */
            const float *b = isq ? bq : bk, *yh = y + (isq ? 0 : Nq) + hb;
            float *out = isq ? q + r * Nq + col : k + r * Nk + col;
            float val;
            if (e >= d.rot) val = yh[e] + (b ? b[hb + e] : 0.0f);
            else {
                const int i = d.interleaved ? e / 2 : (e < half ? e : e - half);
                const int a = d.interleaved ? 2 * i : i, bb = d.interleaved ? 2 * i + 1 : i + half;
                const float x1 = yh[a] + (b ? b[hb + a] : 0.0f), x2 = yh[bb] + (b ? b[hb + bb] : 0.0f);
                const float cs = d.cos[r * half + i], sn = d.sin[r * half + i];
                val = rope_rot(x1, x2, cs, sn, e != a);
            }
            *out = val;
            if (!isq && d.kv_dst) ((__nv_bfloat16 *)d.kv_dst)[d.kv_off[r] + col] = __float2bfloat16_rn(val);
        }
    }
}

void vc_cu_qkv_split(float *q, float *k, float *v, const float *Y, int64_t M, const vc_qkv_desc *d, const float *bq,
                     const float *bk, const float *bv) {
    const int64_t Nt = (int64_t)d->n_head * d->head_dim + (int64_t)d->n_kv_head * (d->head_dim + d->v_head_dim);
    k_qkv_split<<<vc_cu_rows_grid(M, Nt, 256), 256, 0, vc_cu_stream()>>>(q, k, v, Y, M, *d, bq, bk, bv);
}

/* the gradient of the fused projection's rows, Y [M, Nq + Nk + Nv], out of its outputs' gradients dq, dk, dv (NULL:
 * zeros): q's and k's pairs rotated back (rope_rot by -sin, as rope with sign -1), v's as they are */
__global__ void k_qkv_unsplit(float *Y, const float *dq, const float *dk, const float *dv, int64_t M, vc_qkv_desc d) {
    const int hd = d.head_dim, Nq = d.n_head * hd, Nk = d.n_kv_head * hd, Nv = d.n_kv_head * d.v_head_dim;
    const int Nt = Nq + Nk + Nv, half = d.rot / 2;
    VC_ROW_LOOP(r, M) {
        float *y = Y + r * Nt;
        VC_COL_LOOP(j, (int64_t)Nt) {
            const int c = (int)j;
            if (c >= Nq + Nk) {
                y[c] = dv ? dv[r * Nv + c - Nq - Nk] : 0.0f;
                continue;
            }
            const bool isq = c < Nq;
            const float *g = isq ? dq : dk;
            const int col = isq ? c : c - Nq, e = col % hd, hb = col - e;
            if (!g) {
                y[c] = 0.0f;
                continue;
            }
            const float *gh = g + r * (isq ? Nq : Nk) + hb;
            if (e >= d.rot) y[c] = gh[e];
            else {
                const int i = d.interleaved ? e / 2 : (e < half ? e : e - half);
                const int a = d.interleaved ? 2 * i : i, bb = d.interleaved ? 2 * i + 1 : i + half;
                y[c] = rope_rot(gh[a], gh[bb], d.cos[r * half + i], -d.sin[r * half + i], e != a);
            }
        }
    }
}

void vc_cu_qkv_unsplit(float *Y, const float *dq, const float *dk, const float *dv, int64_t M, const vc_qkv_desc *d) {
    const int64_t Nt = (int64_t)d->n_head * d->head_dim + (int64_t)d->n_kv_head * (d->head_dim + d->v_head_dim);
    k_qkv_unsplit<<<vc_cu_rows_grid(M, Nt, 256), 256, 0, vc_cu_stream()>>>(Y, dq, dk, dv, M, *d);
}

void vc_cu_rope2(float *q, int nhq, float *k, int nhk, const float *cos, const float *sin, int64_t T, int hd, int rot,
                 int interleaved) {
    const char *op = "rope (q and k)";
    if (!vc_cu_begin(op) || T == 0 || rot < 2) return;
    k_rope<<<vc_cu_rows_grid(T, (int64_t)(nhq + nhk) * (rot / 2), 256), 256, 0, vc_cu_stream()>>>(
        q, nhq, k, nhk, cos, sin, T, hd, rot, vc_udiv_make((uint32_t)(rot / 2)), interleaved, 1.0f);
    vc_cu_end(op);
}

/* ---- activations (formulas shared with the CPU backend: backend/act_math.h) ---- */
#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void k_act_fwd(float *y, const float *x, int64_t n, int kind) {
    GRID_LOOP(i, n) y[i] = vc_act_f(x[i], kind);
}
__global__ void k_act_bwd(float *dx, const float *dy, const float *x, int64_t n, int kind) {
    GRID_LOOP(i, n) dx[i] += dy[i] * vc_act_d(x[i], kind);
}
__global__ void k_act_mul_fwd(float *y, const float *g, const float *u, int64_t n, int kind) {
    GRID_LOOP(i, n) y[i] = vc_gate_f(g[i], u[i], kind);
}
__global__ void k_act_mul_bwd(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
                              int kind) {
    const bool wr = kind & VC_ACT_WRITE; /* (0 + the term: the bits of adding to zeros) */
    kind &= ~VC_ACT_WRITE;
    GRID_LOOP(i, n) {
        if (dg) dg[i] = (wr ? 0.0f : dg[i]) + vc_gate_dg(dy[i], g[i], u[i], kind);
        if (du) du[i] = (wr ? 0.0f : du[i]) + vc_gate_du(dy[i], g[i], u[i], kind);
    }
}

/* ---- xIELU (Apertus): the scalar parameters' sums by one block of 1024 threads in a fixed order ---- */
__global__ void k_xielu_fwd(float *y, const float *x, int64_t n, const float *ap, const float *an, float beta, float eps) {
    float a_p = vc_softplus(ap[0]), a_n = beta + vc_softplus(an[0]);
    GRID_LOOP(i, n) y[i] = vc_xielu_f(x[i], a_p, a_n, beta, eps);
}
__global__ void k_xielu_bwd_dx(float *dx, const float *dy, const float *x, int64_t n, const float *ap, const float *an,
                               float beta, float eps) {
    float a_p = vc_softplus(ap[0]), a_n = beta + vc_softplus(an[0]), dp, dn;
    GRID_LOOP(i, n) dx[i] += dy[i] * vc_xielu_d(x[i], a_p, a_n, beta, eps, &dp, &dn);
}
__global__ void k_xielu_bwd_sum(float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                                const float *an, float beta, float eps) {
    __shared__ double sp[1024], sn[1024];
    float a_p = vc_softplus(ap[0]), a_n = beta + vc_softplus(an[0]), dp, dn;
    double p = 0, q = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        vc_xielu_d(x[i], a_p, a_n, beta, eps, &dp, &dn);
        p += (double)dy[i] * dp;
        q += (double)dy[i] * dn;
    }
    sp[threadIdx.x] = p, sn[threadIdx.x] = q;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sp[threadIdx.x] += sp[threadIdx.x + s], sn[threadIdx.x] += sn[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (dap) dap[0] += (float)(sp[0] / (1.0 + exp(-(double)ap[0])));
        if (dan) dan[0] += (float)(sn[0] / (1.0 + exp(-(double)an[0])));
    }
}

void vc_cu_xielu_fwd(float *y, const float *x, int64_t n, const float *ap, const float *an, float beta, float eps) {
    if (!vc_cu_begin("xielu forward") || n == 0) return;
    k_xielu_fwd<<<vc_cu_blocks(n, 256), 256, 0, vc_cu_stream()>>>(y, x, n, ap, an, beta, eps);
    vc_cu_end("xielu forward");
}
void vc_cu_xielu_bwd(float *dx, float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                     const float *an, float beta, float eps) {
    if (!vc_cu_begin("xielu backward") || n == 0) return;
    if (dx) k_xielu_bwd_dx<<<vc_cu_blocks(n, 256), 256, 0, vc_cu_stream()>>>(dx, dy, x, n, ap, an, beta, eps);
    if (dap || dan) k_xielu_bwd_sum<<<1, 1024, 0, vc_cu_stream()>>>(dap, dan, dy, x, n, ap, an, beta, eps);
    vc_cu_end("xielu backward");
}

void vc_cu_act_fwd(float *y, const float *x, int64_t n, int kind) {
    if (!vc_cu_begin("activation forward") || n == 0) return;
    k_act_fwd<<<vc_cu_blocks(n, 256), 256, 0, vc_cu_stream()>>>(y, x, n, kind);
    vc_cu_end("activation forward");
}
void vc_cu_act_bwd(float *dx, const float *dy, const float *x, int64_t n, int kind) {
    if (!vc_cu_begin("activation backward") || n == 0) return;
    k_act_bwd<<<vc_cu_blocks(n, 256), 256, 0, vc_cu_stream()>>>(dx, dy, x, n, kind);
    vc_cu_end("activation backward");
}
/* gate and up as rows of C elements LD apart (a fused gate/up projection's halves), y and dy packed [R, C]: rows across
 * the grid, columns across the threads, four a thread (float4) where C, LD and the pointers allow */
__device__ __forceinline__ void act_put(float *p, float v) { *p = v; }
__device__ __forceinline__ void act_put(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
template <int V, typename OUT>
__global__ void k_act_mul_fwd_ld(OUT *y, const float *g, const float *u, int64_t R, int64_t C, int64_t ld, int kind) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C / V) {
        const float *gr = g + r * ld + c * V, *ur = u + r * ld + c * V;
        OUT *yr = y + r * C + c * V;
        if (V == 4) {
            const float4 a = *(const float4 *)gr, b = *(const float4 *)ur;
            const float o[4] = { vc_gate_f(a.x, b.x, kind), vc_gate_f(a.y, b.y, kind), vc_gate_f(a.z, b.z, kind),
                                 vc_gate_f(a.w, b.w, kind) };
            for (int k = 0; k < 4; k++) act_put(yr + k, o[k]);
        } else act_put(yr, vc_gate_f(gr[0], ur[0], kind));
    }
}
template <typename OUT>
static void act_mul_fwd_ld(OUT *y, const float *g, const float *u, int64_t n, int64_t C, int64_t ld, int kind) {
    const int64_t R = n / C;
    if (C % 4 == 0 && ld % 4 == 0 && vc_cu_aligned16(g, u))
        k_act_mul_fwd_ld<4, OUT><<<vc_cu_rows_grid(R, C / 4, 256), 256, 0, vc_cu_stream()>>>(y, g, u, R, C, ld, kind);
    else k_act_mul_fwd_ld<1, OUT><<<vc_cu_rows_grid(R, C, 256), 256, 0, vc_cu_stream()>>>(y, g, u, R, C, ld, kind);
}
void vc_cu_act_mul_fwd(float *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind) {
    if (!vc_cu_begin("gated activation forward") || n == 0) return;
    if (ld != cols) act_mul_fwd_ld<float>(y, g, u, n, cols, ld, kind);
    else k_act_mul_fwd<<<vc_cu_blocks(n, 256), 256, 0, vc_cu_stream()>>>(y, g, u, n, kind);
    vc_cu_end("gated activation forward");
}
__global__ void k_act_mul_fwd_bf16(__nv_bfloat16 *y, const float *g, const float *u, int64_t n, int kind) {
    GRID_LOOP(i, n) y[i] = __float2bfloat16_rn(vc_gate_f(g[i], u[i], kind));
}
/* four elements a thread (float4 loads): the same arithmetic an element */
__global__ void k_act_mul_fwd_bf16_x4(__nv_bfloat162 *y, const float4 *g, const float4 *u, int64_t n4, int kind) {
    GRID_LOOP(i, n4) {
        const float4 a = g[i], b = u[i];
        y[2 * i] = __floats2bfloat162_rn(vc_gate_f(a.x, b.x, kind), vc_gate_f(a.y, b.y, kind));
        y[2 * i + 1] = __floats2bfloat162_rn(vc_gate_f(a.z, b.z, kind), vc_gate_f(a.w, b.w, kind));
    }
}
void vc_cu_act_mul_fwd_bf16(void *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind) {
    if (!vc_cu_begin("gated activation forward (bf16 out)") || n == 0) return;
    if (ld != cols) {
        act_mul_fwd_ld<__nv_bfloat16>((__nv_bfloat16 *)y, g, u, n, cols, ld, kind);
        vc_cu_end("gated activation forward (bf16 out)");
        return;
    }
    const int64_t n4 = vc_cu_aligned16(y, g, u) ? n / 4 : 0;
    if (n4)
        k_act_mul_fwd_bf16_x4<<<vc_cu_blocks(n4, 256), 256, 0, vc_cu_stream()>>>((__nv_bfloat162 *)y, (const float4 *)g,
                                                                                (const float4 *)u, n4, kind);
    if (n > 4 * n4)
        k_act_mul_fwd_bf16<<<vc_cu_blocks(n - 4 * n4, 256), 256, 0, vc_cu_stream()>>>((__nv_bfloat16 *)y + 4 * n4,
                                                                                       g + 4 * n4, u + 4 * n4,
                                                                                       n - 4 * n4, kind);
    vc_cu_end("gated activation forward (bf16 out)");
}
/* ---- gate and up in bf16 storage (gemm_c16's rows, the halves LD apart), y packed [R, C] in bf16 or f32: rows across
 * the grid, columns across the threads, V elements a thread (16-byte loads of 8 at V 8, 8-byte loads of 4 at V 4
 * where C, LD and the pointers allow); each element the formula of the f32 kernels on the bf16 values ---- */
template <int V>
__device__ __forceinline__ void ld_b16(float (&x)[V], const __nv_bfloat16 *p) {
    if (V == 8) {
        const uint4 w = *reinterpret_cast<const uint4 *>(p);
        const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&w);
        for (int k = 0; k < V; k++) x[k] = __bfloat162float(h[k]);
    } else if (V == 4) {
        const uint2 w = *reinterpret_cast<const uint2 *>(p);
        const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&w);
        for (int k = 0; k < V; k++) x[k] = __bfloat162float(h[k]);
    } else
        for (int k = 0; k < V; k++) x[k] = __bfloat162float(p[k]);
}
template <int V, typename OUT>
__global__ void k_act_mul16_fwd(OUT *y, const __nv_bfloat16 *g, const __nv_bfloat16 *u, int64_t R, int64_t C,
                                int64_t ld, int kind) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C / V) {
        float a[V], b[V];
        ld_b16<V>(a, g + r * ld + c * V);
        ld_b16<V>(b, u + r * ld + c * V);
        OUT *yr = y + r * C + c * V;
        for (int k = 0; k < V; k++) act_put(yr + k, vc_gate_f(a[k], b[k], kind));
    }
}
template <typename OUT>
static void act_mul16_fwd(OUT *y, const __nv_bfloat16 *g, const __nv_bfloat16 *u, int64_t R, int64_t C, int64_t ld,
                          int kind) {
    if (C % 8 == 0 && ld % 8 == 0 && vc_cu_aligned16(g, u))
        k_act_mul16_fwd<8, OUT><<<vc_cu_rows_grid(R, C / 8, 256), 256, 0, vc_cu_stream()>>>(y, g, u, R, C, ld, kind);
    else k_act_mul16_fwd<1, OUT><<<vc_cu_rows_grid(R, C, 256), 256, 0, vc_cu_stream()>>>(y, g, u, R, C, ld, kind);
}
void vc_cu_act_mul16_fwd(void *y, int y16, const void *g, const void *u, int64_t n, int64_t cols, int64_t ld,
                         int kind) {
    const char *op = y16 ? "gated activation forward (bf16 in and out)" : "gated activation forward (bf16 in)";
    if (!vc_cu_begin(op) || n == 0) return;
    const __nv_bfloat16 *gb = (const __nv_bfloat16 *)g, *ub = (const __nv_bfloat16 *)u;
    if (y16) act_mul16_fwd<__nv_bfloat16>((__nv_bfloat16 *)y, gb, ub, n / cols, cols, ld, kind);
    else act_mul16_fwd<float>((float *)y, gb, ub, n / cols, cols, ld, kind);
    vc_cu_end(op);
}
template <int V>
__global__ void k_act_mul16_bwd(float *dg, float *du, const float *dy, const __nv_bfloat16 *g, const __nv_bfloat16 *u,
                                int64_t R, int64_t C, int64_t ld, int kind) {
    const bool wr = kind & VC_ACT_WRITE;
    kind &= ~VC_ACT_WRITE;
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C / V) {
        const int64_t i = r * ld + c * V, o = r * C + c * V;
        float a[V], b[V];
        ld_b16<V>(a, g + i);
        ld_b16<V>(b, u + i);
        for (int k = 0; k < V; k++) {
            if (dg) dg[i + k] = (wr ? 0.0f : dg[i + k]) + vc_gate_dg(dy[o + k], a[k], b[k], kind);
            if (du) du[i + k] = (wr ? 0.0f : du[i + k]) + vc_gate_du(dy[o + k], a[k], b[k], kind);
        }
    }
}
void vc_cu_act_mul16_bwd(float *dg, float *du, const float *dy, const void *g, const void *u, int64_t n, int64_t cols,
                         int64_t ld, int kind) {
    const char *op = "gated activation backward (bf16 in)";
    if (!vc_cu_begin(op) || n == 0) return;
    const int64_t R = n / cols;
    const __nv_bfloat16 *gb = (const __nv_bfloat16 *)g, *ub = (const __nv_bfloat16 *)u;
    if (cols % 4 == 0 && ld % 4 == 0 && vc_cu_aligned16(dg, du, dy) && ((uintptr_t)gb | (uintptr_t)ub) % 8 == 0)
        k_act_mul16_bwd<4><<<vc_cu_rows_grid(R, cols / 4, 256), 256, 0, vc_cu_stream()>>>(dg, du, dy, gb, ub, R, cols,
                                                                                          ld, kind);
    else
        k_act_mul16_bwd<1><<<vc_cu_rows_grid(R, cols, 256), 256, 0, vc_cu_stream()>>>(dg, du, dy, gb, ub, R, cols, ld,
                                                                                      kind);
    vc_cu_end(op);
}

/* the gated activation's gradients written (VC_ACT_WRITE) straight into held bf16 copies: og and ou (rows of ld: the
 * dense MLP's dgu = [dg | du], og = dgu's copy, ou = og + C, ld 2 C; the experts' apart, ld C), g and u likewise,
 * dy [R, C]: each the rounding (nearest even) of 0 + the term, what the f32 gradients then their hold gave. IN: g and
 * u's storage (f32, or bf16 from gemm_c16), V elements a thread */
__device__ __forceinline__ void ld_in(float (&x)[4], const float *p) {
    const float4 w = *reinterpret_cast<const float4 *>(p);
    x[0] = w.x, x[1] = w.y, x[2] = w.z, x[3] = w.w;
}
__device__ __forceinline__ void ld_in(float (&x)[4], const __nv_bfloat16 *p) { ld_b16<4>(x, p); }
__device__ __forceinline__ void ld_in(float (&x)[1], const float *p) { x[0] = *p; }
__device__ __forceinline__ void ld_in(float (&x)[1], const __nv_bfloat16 *p) { x[0] = __bfloat162float(*p); }
template <typename IN, int V>
__global__ void k_act_mul_bwd_held(__nv_bfloat16 *og, __nv_bfloat16 *ou, const float *dy, const IN *g, const IN *u,
                                   int64_t R, int64_t C, int64_t ld, int kind) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C / V) {
        const int64_t i = r * ld + c * V, d = r * C + c * V;
        float a[V], b[V];
        ld_in(a, g + i);
        ld_in(b, u + i);
#pragma unroll
        for (int k = 0; k < V; k++) {
            og[i + k] = __float2bfloat16_rn(0.0f + vc_gate_dg(dy[d + k], a[k], b[k], kind));
            ou[i + k] = __float2bfloat16_rn(0.0f + vc_gate_du(dy[d + k], a[k], b[k], kind));
        }
    }
}
template <typename IN>
static void act_mul_bwd_held(__nv_bfloat16 *og, __nv_bfloat16 *ou, const float *dy, const IN *g, const IN *u,
                             int64_t R, int64_t C, int64_t ld, int kind) {
    if (C % 4 == 0 && ld % 4 == 0 && vc_cu_aligned16(dy, g, u))
        k_act_mul_bwd_held<IN, 4><<<vc_cu_rows_grid(R, C / 4, 256), 256, 0, vc_cu_stream()>>>(og, ou, dy, g, u, R, C, ld,
                                                                                               kind);
    else
        k_act_mul_bwd_held<IN, 1><<<vc_cu_rows_grid(R, C, 256), 256, 0, vc_cu_stream()>>>(og, ou, dy, g, u, R, C, ld,
                                                                                           kind);
}
/* vc_backend.act_mul_bwd_held: dgu's bf16 copy held (vc_cu_hold_slot) and written, dgu itself never; 0 when operands
 * are not held (f32 matmuls, VERLC_CUDA_HOLD=0, no slot or memory), ld is not 2 cols, the gradients add (no
 * VC_ACT_WRITE), or VERLC_CUDA_ACT_HELD=0 (read per call: the A/B, the same bits) */
int vc_cu_act_mul_bwd_held(float *dgu, const float *dy, const void *g, const void *u, int g16, int64_t n, int64_t cols,
                           int64_t ld, int kind) {
    const char *op = "gated activation backward (held bf16 out)", *e = getenv("VERLC_CUDA_ACT_HELD");
    if ((e && *e == '0') || ld != 2 * cols || n <= 0 || !(kind & VC_ACT_WRITE) || u != (const char *)g + cols * (g16 ? 2 : 4))
        return 0;
    const int64_t R = n / cols;
    if (!vc_cu_begin(op)) return 0;
    __nv_bfloat16 *h = (__nv_bfloat16 *)vc_cu_hold_slot(dgu, R, ld);
    if (!h) return 0;
    kind &= ~VC_ACT_WRITE;
    if (g16) act_mul_bwd_held(h, h + cols, dy, (const __nv_bfloat16 *)g, (const __nv_bfloat16 *)u, R, cols, ld, kind);
    else act_mul_bwd_held(h, h + cols, dy, (const float *)g, (const float *)u, R, cols, ld, kind);
    vc_cu_end(op);
    return 1;
}

/* vc_backend.act_mul_bwd_held2: dg's and du's bf16 copies held and written, dg and du never; 0 as act_mul_bwd_held */
int vc_cu_act_mul_bwd_held2(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
                            int64_t cols, int kind) {
    const char *op = "gated activation backward (held bf16 out)", *e = getenv("VERLC_CUDA_ACT_HELD");
    if ((e && *e == '0') || n <= 0 || cols <= 0 || n % cols || !(kind & VC_ACT_WRITE)) return 0;
    const int64_t R = n / cols;
    if (!vc_cu_begin(op)) return 0;
    __nv_bfloat16 *hg = (__nv_bfloat16 *)vc_cu_hold_slot(dg, R, cols), *hu = NULL;
    if (hg && !(hu = (__nv_bfloat16 *)vc_cu_hold_slot(du, R, cols))) vc_cu_operand_hold(dg, R, cols, 0);
    if (!hu) return 0;
    act_mul_bwd_held(hg, hu, dy, g, u, R, cols, cols, kind & ~VC_ACT_WRITE);
    vc_cu_end(op);
    return 1;
}

/* k_act_mul_bwd four elements a thread: one gradient (DU: up's, else gate's) added to out[i], or written (wr) */
template <bool DU>
__device__ __forceinline__ void gate_grad4(float4 *out, int64_t i, bool wr, float4 d, float4 a, float4 b, int kind) {
    float4 o = wr ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : out[i];
    o.x += DU ? vc_gate_du(d.x, a.x, b.x, kind) : vc_gate_dg(d.x, a.x, b.x, kind);
    o.y += DU ? vc_gate_du(d.y, a.y, b.y, kind) : vc_gate_dg(d.y, a.y, b.y, kind);
    o.z += DU ? vc_gate_du(d.z, a.z, b.z, kind) : vc_gate_dg(d.z, a.z, b.z, kind);
    o.w += DU ? vc_gate_du(d.w, a.w, b.w, kind) : vc_gate_dg(d.w, a.w, b.w, kind);
    out[i] = o;
}
__global__ void k_act_mul_bwd_x4(float4 *dg, float4 *du, const float4 *dy, const float4 *g, const float4 *u, int64_t n4,
                                 int kind) {
    const bool wr = kind & VC_ACT_WRITE;
    kind &= ~VC_ACT_WRITE;
    GRID_LOOP(i, n4) {
        const float4 d = dy[i], a = g[i], b = u[i];
        if (dg) gate_grad4<false>(dg, i, wr, d, a, b, kind);
        if (du) gate_grad4<true>(du, i, wr, d, a, b, kind);
    }
}
/* k_act_mul_bwd over rows LD apart (dy packed [R, C]), four a thread where it can */
template <int V>
__global__ void k_act_mul_bwd_ld(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t R,
                                 int64_t C, int64_t ld, int kind) {
    const bool wr = kind & VC_ACT_WRITE;
    kind &= ~VC_ACT_WRITE;
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C / V) {
        const int64_t i = r * ld + c * V, o = r * C + c * V;
        if (V == 4) {
            const int64_t i4 = i / 4;
            const float4 d = *(const float4 *)(dy + o), a = ((const float4 *)g)[i4], b = ((const float4 *)u)[i4];
            if (dg) gate_grad4<false>((float4 *)dg, i4, wr, d, a, b, kind);
            if (du) gate_grad4<true>((float4 *)du, i4, wr, d, a, b, kind);
        } else {
            if (dg) dg[i] = (wr ? 0.0f : dg[i]) + vc_gate_dg(dy[o], g[i], u[i], kind);
            if (du) du[i] = (wr ? 0.0f : du[i]) + vc_gate_du(dy[o], g[i], u[i], kind);
        }
    }
}
void vc_cu_act_mul_bwd(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n, int64_t cols,
                       int64_t ld, int kind) {
    if (!vc_cu_begin("gated activation backward") || n == 0) return;
    if (ld != cols) {
        const int64_t R = n / cols;
        if (cols % 4 == 0 && ld % 4 == 0 && vc_cu_aligned16(dg, du, dy, g, u))
            k_act_mul_bwd_ld<4><<<vc_cu_rows_grid(R, cols / 4, 256), 256, 0, vc_cu_stream()>>>(dg, du, dy, g, u, R, cols,
                                                                                              ld, kind);
        else
            k_act_mul_bwd_ld<1><<<vc_cu_rows_grid(R, cols, 256), 256, 0, vc_cu_stream()>>>(dg, du, dy, g, u, R, cols, ld,
                                                                                          kind);
        vc_cu_end("gated activation backward");
        return;
    }
    const int64_t n4 = vc_cu_aligned16(dg, du, dy, g, u) ? n / 4 : 0;
    if (n4)
        k_act_mul_bwd_x4<<<vc_cu_blocks(n4, 256), 256, 0, vc_cu_stream()>>>(
            (float4 *)dg, (float4 *)du, (const float4 *)dy, (const float4 *)g, (const float4 *)u, n4, kind);
    const int64_t t = 4 * n4;
    if (n > t)
        k_act_mul_bwd<<<vc_cu_blocks(n - t, 256), 256, 0, vc_cu_stream()>>>(dg ? dg + t : NULL, du ? du + t : NULL,
                                                                             dy + t, g + t, u + t, n - t, kind);
    vc_cu_end("gated activation backward");
}
