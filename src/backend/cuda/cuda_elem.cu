/* CUDA elementwise and layout entries of the op table: fill, axpy, add, mul, scale, row scaling, row
 * copies and sums, column sums, soft-cap, row normalisation, dot, embedding, row gather and the MoE
 * combine / scatter. No float atomics: every output element is written by one thread, and sums that
 * the table specifies in a fixed order ("r ascending", "k ascending", "t ascending per row") are
 * accumulated by that thread into the destination in that order, as the CPU loops do. Reductions
 * inside one row (ds of mul_rows, rownorm, the MoE weight gradient) use a fixed block/warp tree: the
 * same bits run to run, within rounding of the CPU's sequential sums. */
#include "cuda_internal.h"
#include <cuda_bf16.h>

#define ET 256 /* threads per block of the elementwise kernels */
#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
#define LAUNCH(n) vc_cu_blocks((n), ET), ET, 0, vc_cu_stream()
#define LAUNCH_ROWS(R, C) vc_cu_rows_grid((R), (C), ET), ET, 0, vc_cu_stream()

/* ---- plain elementwise ---- */
__global__ void k_fill(float *y, float v, int64_t n) { GRID_LOOP(i, n) y[i] = v; }
__global__ void k_axpy(float *y, float a, const float *x, int64_t n) { GRID_LOOP(i, n) y[i] += a * x[i]; }
__global__ void k_add(float *y, const float *a, const float *b, int64_t n) { GRID_LOOP(i, n) y[i] = a[i] + b[i]; }
__global__ void k_mul(float *y, const float *a, const float *b, int64_t n) { GRID_LOOP(i, n) y[i] = a[i] * b[i]; }
__global__ void k_mul_acc(float *y, const float *a, const float *b, int64_t n) { GRID_LOOP(i, n) y[i] += a[i] * b[i]; }
__global__ void k_scale_x(float *y, const float *x, float s, int64_t n) { GRID_LOOP(i, n) y[i] = s * x[i]; }

/* y = f(y, a, b) an element, four a thread by float4 where y, a and b sit on 16-byte boundaries (the last n % 4 by the
 * first threads): the same arithmetic an element as the scalar kernels */
struct f_add {
    static constexpr bool RY = false; /* reads y */
    __device__ float operator()(float, float a, float b) const { return a + b; }
};
struct f_axpy {
    static constexpr bool RY = true;
    float s;
    __device__ float operator()(float y, float x, float) const { return y + s * x; }
};
template <class F>
__global__ void k_map4(float *y, const float *a, const float *b, int64_t n, F f) {
    const int64_t n4 = n / 4;
    float4 *y4 = reinterpret_cast<float4 *>(y);
    const float4 *a4 = reinterpret_cast<const float4 *>(a), *b4 = reinterpret_cast<const float4 *>(b);
    GRID_LOOP(i, n4) {
        const float4 x = a4[i], z = b ? b4[i] : x;
        float4 o = F::RY ? y4[i] : x;
        o.x = f(o.x, x.x, z.x);
        o.y = f(o.y, x.y, z.y);
        o.z = f(o.z, x.z, z.z);
        o.w = f(o.w, x.w, z.w);
        y4[i] = o;
    }
    const int64_t t = 4 * n4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t < n) y[t] = f(F::RY ? y[t] : 0.0f, a[t], b ? b[t] : 0.0f);
}
#define LAUNCH4(n) vc_cu_blocks((n) / 4 > 0 ? (n) / 4 : 1, ET), ET, 0, vc_cu_stream()

void vc_cu_fill(float *y, float v, int64_t n) {
    if (!vc_cu_begin("fill") || n <= 0) return;
    k_fill<<<LAUNCH(n)>>>(y, v, n);
    vc_cu_end("fill");
}
void vc_cu_axpy(float *y, float a, const float *x, int64_t n) {
    if (!vc_cu_begin("axpy") || n <= 0) return;
    if (vc_cu_aligned16(y, x)) k_map4<f_axpy><<<LAUNCH4(n)>>>(y, x, (const float *)NULL, n, f_axpy{ a });
    else k_axpy<<<LAUNCH(n)>>>(y, a, x, n);
    vc_cu_end("axpy");
}
void vc_cu_add(float *y, const float *a, const float *b, int64_t n) {
    if (!vc_cu_begin("add") || n <= 0) return;
    if (vc_cu_aligned16(y, a, b)) k_map4<f_add><<<LAUNCH4(n)>>>(y, a, b, n, f_add{});
    else k_add<<<LAUNCH(n)>>>(y, a, b, n);
    vc_cu_end("add");
}
void vc_cu_mul(float *y, const float *a, const float *b, int64_t n) {
    if (!vc_cu_begin("mul") || n <= 0) return;
    k_mul<<<LAUNCH(n)>>>(y, a, b, n);
    vc_cu_end("mul");
}
void vc_cu_mul_acc(float *y, const float *a, const float *b, int64_t n) {
    if (!vc_cu_begin("mul_acc") || n <= 0) return;
    k_mul_acc<<<LAUNCH(n)>>>(y, a, b, n);
    vc_cu_end("mul_acc");
}
void vc_cu_scale(float *y, const float *x, float s, int64_t n) {
    if (!vc_cu_begin("scale") || n <= 0) return;
    k_scale_x<<<LAUNCH(n)>>>(y, x, s, n);
    vc_cu_end("scale");
}

__global__ void k_round_bf16(float *y, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}
void vc_cu_round_bf16(float *y, const float *x, int64_t n) {
    if (!vc_cu_begin("round_bf16") || n <= 0) return;
    k_round_bf16<<<LAUNCH(n)>>>(y, x, n);
    vc_cu_end("round_bf16");
}

/* ---- row scaling: y[r, c] = x[r, c] s[r] ---- */
__global__ void k_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C) y[r * C + c] = x[r * C + c] * s[r];
}
__global__ void k_mul_rows_dx(float *dx, const float *dy, const float *s, int64_t R, int64_t C) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C) dx[r * C + c] += dy[r * C + c] * s[r];
}
/* one block per row: ds[r] += sum_c dy x (block tree, fixed) */
__global__ void k_mul_rows_ds(float *ds, const float *dy, const float *x, int64_t C) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *a = dy + r * C, *b = x + r * C;
    float acc = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) acc += a[c] * b[c];
    acc = vc_block_sum(acc, sh);
    if (threadIdx.x == 0) ds[r] += acc;
}

void vc_cu_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C) {
    if (!vc_cu_begin("mul_rows forward") || R <= 0 || C <= 0) return;
    k_mul_rows_fwd<<<LAUNCH_ROWS(R, C)>>>(y, x, s, R, C);
    vc_cu_end("mul_rows forward");
}
void vc_cu_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C) {
    const char *op = "mul_rows backward";
    if (!vc_cu_begin(op) || R <= 0 || C <= 0) return;
    if (dx) k_mul_rows_dx<<<LAUNCH_ROWS(R, C)>>>(dx, dy, s, R, C);
    if (ds) k_mul_rows_ds<<<(unsigned)R, ET, 0, vc_cu_stream()>>>(ds, dy, x, C);
    vc_cu_end(op);
}

/* ---- row copies and sums ---- */
/* dst row r (+)= src row r / rep (the quotient by vc_udiv: rows below 2^31) */
__global__ void k_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                            vc_udiv ru, int acc) {
    VC_ROW_LOOP(r, R) {
        const float *s = src + (rep == 1 ? r : rep >= R ? 0 : (int64_t)vc_udiv_do(ru, (uint32_t)r)) * sld;
        float *d = dst + r * dld;
        VC_COL_LOOP(c, C) d[c] = acc ? d[c] + s[c] : s[c];
    }
}
/* dst[i, c] += src[i*rep + j, c] for j ascending, one thread per (i, c) */
__global__ void k_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t n_out, int64_t C,
                           int64_t rep) {
    VC_ROW_LOOP(i, n_out) VC_COL_LOOP(c, C) {
        float a = dst[i * dld + c];
        const float *s = src + i * rep * sld + c;
        for (int64_t j = 0; j < rep; j++) a += s[j * sld];
        dst[i * dld + c] = a;
    }
}
/* db[c] += dy[r, c] for r ascending, one thread per column (coalesced across the warp) */
__global__ void k_col_sum(float *db, const float *dy, int64_t R, int64_t C) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    float a = db[c];
    for (int64_t r = 0; r < R; r++) a += dy[r * C + c];
    db[c] = a;
}

void vc_cu_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                     int acc) {
    const char *op = "rows_copy";
    if (!vc_cu_begin(op) || R <= 0 || C <= 0) return;
    if (rep < 1) rep = 1; /* as the CPU entry */
    if (R > INT32_MAX) {
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, "2^31 rows or more");
        return;
    }
    k_rows_copy<<<LAUNCH_ROWS(R, C)>>>(dst, dld, src, sld, R, C, rep, vc_udiv_make((uint32_t)(rep < R ? rep : 1)), acc);
    vc_cu_end(op);
}
void vc_cu_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep) {
    const char *op = "rows_sum";
    if (!vc_cu_begin(op) || R <= 0 || C <= 0 || rep < 1) return;
    int64_t n_out = R / rep;
    if (n_out <= 0) return;
    k_rows_sum<<<LAUNCH_ROWS(n_out, C)>>>(dst, dld, src, sld, n_out, C, rep);
    vc_cu_end(op);
}
/* part[p, c] = the sum of dy[r, c] over rows r of block p (COLS_ROWS rows, r ascending) */
#define COLS_ROWS 128
__global__ void k_col_sum_part(float *part, const float *dy, int64_t R, int64_t C) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, r0 = (int64_t)blockIdx.y * COLS_ROWS;
    if (c >= C) return;
    int64_t r1 = r0 + COLS_ROWS < R ? r0 + COLS_ROWS : R;
    float a = 0;
    for (int64_t r = r0; r < r1; r++) a += dy[r * C + c];
    part[blockIdx.y * C + c] = a;
}
/* db[c] += the blocks' sums in block order */
__global__ void k_col_sum_fin(float *db, const float *part, int64_t np, int64_t C) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    float a = db[c];
    for (int64_t p = 0; p < np; p++) a += part[p * C + c];
    db[c] = a;
}
/* Up to COLS_ROWS rows: one pass, r ascending. More (a bias gradient over a whole micro-batch of tokens): blocks of
 * COLS_ROWS rows summed side by side, then the blocks' sums in order: a fixed order whatever the GPU, and the whole
 * GPU busy instead of one thread per column walking every row */
void vc_cu_col_sum(float *db, const float *dy, int64_t R, int64_t C) {
    const char *op = "col_sum";
    if (!vc_cu_begin(op) || R <= 0 || C <= 0) return;
    unsigned cb = (unsigned)((C + ET - 1) / ET);
    int64_t np = (R + COLS_ROWS - 1) / COLS_ROWS;
    if (np <= 1 || np > 65535) {
        k_col_sum<<<cb, ET, 0, vc_cu_stream()>>>(db, dy, R, C);
    } else {
        float *part = (float *)vc_cu_scratch((size_t)(np * C) * sizeof(float), op);
        if (!part) return; /* out of device memory: the sticky error says so */
        k_col_sum_part<<<dim3(cb, (unsigned)np), ET, 0, vc_cu_stream()>>>(part, dy, R, C);
        k_col_sum_fin<<<cb, ET, 0, vc_cu_stream()>>>(db, part, np, C);
        vc_cu_scratch_free(part);
    }
    vc_cu_end(op);
}

/* ---- soft-cap: y = cap tanh(x / cap);  dx += dy (1 - (y / cap)^2) ---- */
__global__ void k_softcap_fwd(float *y, const float *x, float cap, int64_t n) {
    GRID_LOOP(i, n) y[i] = cap * tanhf(x[i] / cap);
}
__global__ void k_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n) {
    GRID_LOOP(i, n) {
        float t = y[i] / cap;
        dx[i] += dy[i] * (1.0f - t * t);
    }
}
void vc_cu_softcap_fwd(float *y, const float *x, float cap, int64_t n) {
    if (!vc_cu_begin("softcap forward") || n <= 0) return;
    k_softcap_fwd<<<LAUNCH(n)>>>(y, x, cap, n);
    vc_cu_end("softcap forward");
}
void vc_cu_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n) {
    if (!vc_cu_begin("softcap backward") || n <= 0) return;
    k_softcap_bwd<<<LAUNCH(n)>>>(dx, dy, y, cap, n);
    vc_cu_end("softcap backward");
}

/* ---- clip (DBRX's and MPT's clip_qkv, Gemma 4's clipped linears): y = min(max(x, lo), hi);  dx += dy where
 * lo <= x <= hi ---- */
__global__ void k_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n) {
    GRID_LOOP(i, n) y[i] = fminf(fmaxf(x[i], lo), hi);
}
__global__ void k_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n) {
    GRID_LOOP(i, n) if (x[i] >= lo && x[i] <= hi) dx[i] += dy[i];
}
void vc_cu_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n) {
    if (!vc_cu_begin("clip forward") || n <= 0) return;
    k_clip_fwd<<<LAUNCH(n)>>>(y, x, lo, hi, n);
    vc_cu_end("clip forward");
}
void vc_cu_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n) {
    if (!vc_cu_begin("clip backward") || n <= 0) return;
    k_clip_bwd<<<LAUNCH(n)>>>(dx, dy, x, lo, hi, n);
    vc_cu_end("clip backward");
}

/* ---- row normalisation (F.normalize): y = W / max(||W||, 1e-12), one block per row ----
 * backward: dW += (dy - y (y . dy)) / ||W|| where the norm exceeds the clamp, else dy / 1e-12 */
#define RN_EPS 1e-12f
__global__ void k_rownorm_fwd(float *y, float *nrm, const float *W, int64_t C) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *w = W + r * C;
    float ss = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ss += w[c] * w[c];
    float n = sqrtf(vc_block_sum(ss, sh));
    if (nrm && threadIdx.x == 0) nrm[r] = n;
    float d = fmaxf(n, RN_EPS);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) y[r * C + c] = w[c] / d;
}
__global__ void k_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t C) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *g = dy + r * C, *yr = y + r * C;
    float n = nrm[r];
    if (n > RN_EPS) {
        float dot = 0;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += yr[c] * g[c];
        dot = vc_block_sum(dot, sh);
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dW[r * C + c] += (g[c] - yr[c] * dot) / n;
    } else {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dW[r * C + c] += g[c] / RN_EPS;
    }
}
void vc_cu_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t C) {
    if (!vc_cu_begin("rownorm forward") || R <= 0 || C <= 0) return;
    k_rownorm_fwd<<<(unsigned)R, ET, 0, vc_cu_stream()>>>(y, nrm, W, C);
    vc_cu_end("rownorm forward");
}
void vc_cu_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C) {
    if (!vc_cu_begin("rownorm backward") || R <= 0 || C <= 0) return;
    k_rownorm_bwd<<<(unsigned)R, ET, 0, vc_cu_stream()>>>(dW, dy, y, nrm, C);
    vc_cu_end("rownorm backward");
}

/* ---- dot: out[0] = sum x w in double over fixed chunks, then the partials in one fixed tree ---- */
#define DOT_CHUNK 16384
__global__ void k_dot_chunks(double *part, const float *x, const float *w, int64_t n) {
    __shared__ double sh[32];
    int64_t c0 = (int64_t)blockIdx.x * DOT_CHUNK, c1 = c0 + DOT_CHUNK < n ? c0 + DOT_CHUNK : n;
    double acc = 0;
    for (int64_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) acc += (double)x[i] * (double)w[i];
    acc = vc_block_sum_d(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}
__global__ void k_dot_final(float *out, const double *part, int64_t np) {
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < np; i += blockDim.x) acc += part[i];
    acc = vc_block_sum_d(acc, sh);
    if (threadIdx.x == 0) out[0] = (float)acc;
}
__global__ void k_dot_bwd(float *dx, const float *dout, const float *w, int64_t n) {
    float g = dout[0];
    GRID_LOOP(i, n) dx[i] += g * w[i];
}
void vc_cu_dot_fwd(float *out, const float *x, const float *w, int64_t n) {
    const char *op = "dot forward";
    if (!vc_cu_begin(op)) return;
    if (n <= 0) {
        k_fill<<<1, 32, 0, vc_cu_stream()>>>(out, 0.0f, 1);
        vc_cu_end(op);
        return;
    }
    int64_t np = (n + DOT_CHUNK - 1) / DOT_CHUNK;
    double *part = (double *)vc_cu_scratch((size_t)np * sizeof(double), op);
    if (!part) return;
    k_dot_chunks<<<(unsigned)np, ET, 0, vc_cu_stream()>>>(part, x, w, n);
    k_dot_final<<<1, 1024, 0, vc_cu_stream()>>>(out, part, np);
    vc_cu_end(op);
    vc_cu_scratch_free(part);
}
void vc_cu_dot_bwd(float *dx, const float *dout, const float *w, int64_t n) {
    if (!vc_cu_begin("dot backward") || n <= 0) return;
    k_dot_bwd<<<LAUNCH(n)>>>(dx, dout, w, n);
    vc_cu_end("dot backward");
}

/* ---- embedding ---- */
__global__ void k_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H) {
    VC_ROW_LOOP(t, T) {
        const float *w = W + (int64_t)ids[t] * H;
        VC_COL_LOOP(c, H) y[t * H + c] = w[c];
    }
}
/* Backward without atomics: block (x, g) owns columns x*ET .. x*ET + ET - 1 of the rows whose id % EG == g
 * and walks the tokens in ascending order (ids staged in shared memory), so every dW element is
 * accumulated by one thread, t ascending, as the CPU loop does. */
#define EG 64
#define ETILE 2048
__global__ void k_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H) {
    __shared__ int32_t sid[ETILE];
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int g = blockIdx.y;
    for (int64_t t0 = 0; t0 < T; t0 += ETILE) {
        int n = (int)(T - t0 < ETILE ? T - t0 : ETILE);
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += blockDim.x) sid[i] = ids[t0 + i];
        __syncthreads();
        if (c >= H) continue;
        for (int i = 0; i < n; i++) {
            int32_t id = sid[i];
            if (id < 0 || id % EG != g) continue;
            float *d = dW + (int64_t)id * H + c;
            *d += dy[(t0 + i) * H + c];
        }
    }
}
void vc_cu_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H) {
    if (!vc_cu_begin("embedding forward") || T <= 0 || H <= 0) return;
    k_embed_fwd<<<LAUNCH_ROWS(T, H)>>>(y, W, ids, T, H);
    vc_cu_end("embedding forward");
}
void vc_cu_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H) {
    if (!vc_cu_begin("embedding backward") || T <= 0 || H <= 0) return;
    dim3 grid((unsigned)((H + ET - 1) / ET), EG);
    k_embed_bwd<<<grid, ET, 0, vc_cu_stream()>>>(dW, dy, ids, T, H);
    vc_cu_end("embedding backward");
}

/* ---- row gather ---- */
__global__ void k_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, H) dst[r * H + c] = src[idx[r] * H + c];
}
void vc_cu_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    if (!vc_cu_begin("gather_rows") || R <= 0 || H <= 0) return;
    k_gather_rows<<<LAUNCH_ROWS(R, H)>>>(dst, src, idx, R, H);
    vc_cu_end("gather_rows");
}

__global__ void k_gather_rows_bf16(__nv_bfloat16 *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, H) dst[r * H + c] = __float2bfloat16_rn(src[idx[r] * H + c]);
}
void vc_cu_gather_rows_bf16(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    if (!vc_cu_begin("gather_rows_bf16") || R <= 0 || H <= 0) return;
    k_gather_rows_bf16<<<LAUNCH_ROWS(R, H)>>>((__nv_bfloat16 *)dst, src, idx, R, H);
    vc_cu_end("gather_rows_bf16");
}

/* ---- row scatter (the paged KV append) ---- */
__global__ void k_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C) dst[off[r] + c] = src[r * sld + c];
}
void vc_cu_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    if (!vc_cu_begin("scatter_rows") || R <= 0 || C <= 0) return;
    k_scatter_rows<<<LAUNCH_ROWS(R, C)>>>(dst, off, src, sld, R, C);
    vc_cu_end("scatter_rows");
}

__global__ void k_scatter_rows_bf16(__nv_bfloat16 *dst, const int64_t *off, const float *src, int64_t sld, int64_t R,
                                    int64_t C) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, C) dst[off[r] + c] = __float2bfloat16_rn(src[r * sld + c]);
}
void vc_cu_scatter_rows_bf16(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    if (!vc_cu_begin("scatter_rows_bf16") || R <= 0 || C <= 0) return;
    k_scatter_rows_bf16<<<LAUNCH_ROWS(R, C)>>>((__nv_bfloat16 *)dst, off, src, sld, R, C);
    vc_cu_end("scatter_rows_bf16");
}

__global__ void k_scatter_kv_bf16(__nv_bfloat16 *dst, const int64_t *off, const float *k, int64_t kw, const float *v,
                                  int64_t vw, int64_t R) {
    VC_ROW_LOOP(r, R) VC_COL_LOOP(c, kw + vw)
        dst[off[r] + c] = __float2bfloat16_rn(c < kw ? k[r * kw + c] : v[r * vw + (c - kw)]);
}
void vc_cu_scatter_kv_bf16(void *dst, const int64_t *off, const float *k, int64_t kw, const float *v, int64_t vw,
                           int64_t R) {
    if (!vc_cu_begin("scatter_rows_bf16") || R <= 0 || kw + vw <= 0) return;
    k_scatter_kv_bf16<<<LAUNCH_ROWS(R, kw + vw)>>>((__nv_bfloat16 *)dst, off, k, kw, v, vw, R);
    vc_cu_end("scatter_rows_bf16");
}

/* ---- MoE combine / scatter (inv[t*K + k]: grouped row of token t's k-th choice) ---- */
__global__ void k_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                                  int64_t H) {
    VC_ROW_LOOP(t, T) VC_COL_LOOP(c, H) {
        float a = 0;
        for (int64_t k = 0; k < K; k++) a += w[t * K + k] * Y[inv[t * K + k] * H + c];
        y[t * H + c] = a;
    }
}
/* dY[inv[t*K+k]] = w[t*K+k] dy[t] */
__device__ __forceinline__ void put_out(float *p, float v) { *p = v; }
__device__ __forceinline__ void put_out(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
/* OUT: f32 dY, or its held bf16 copy */
template <typename OUT>
__global__ void k_moe_combine_dY(OUT *dY, const float *dy, const float *w, const int64_t *inv, int64_t T, int64_t K,
                                 int64_t H) {
    VC_ROW_LOOP(t, T) for (int64_t k = 0; k < K; k++) {
        const int64_t tk = t * K + k;
        VC_COL_LOOP(c, H) put_out(dY + inv[tk] * H + c, w[tk] * dy[t * H + c]);
    }
}
/* dw[t*K+k] = dy[t] . Y[inv[t*K+k]], one warp per (t, k) */
__global__ void k_moe_combine_dw(float *dw, const float *dy, const float *Y, const int64_t *inv, int64_t T, int64_t K,
                                 int64_t H) {
    int lane = threadIdx.x & 31;
    int64_t nw = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t tk = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; tk < T * K; tk += nw) {
        const float *a = dy + (tk / K) * H, *b = Y + inv[tk] * H;
        float s = 0;
        for (int64_t c = lane; c < H; c += 32) s += a[c] * b[c];
        s = vc_warp_sum(s);
        if (lane == 0) dw[tk] = s;
    }
}
/* dx[t] += dX[inv[t*K+k]] for k ascending */
__global__ void k_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    VC_ROW_LOOP(t, T) VC_COL_LOOP(c, H) {
        float a = dx[t * H + c];
        for (int64_t k = 0; k < K; k++) a += dX[inv[t * K + k] * H + c];
        dx[t * H + c] = a;
    }
}
void vc_cu_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                           int64_t H) {
    if (!vc_cu_begin("moe combine forward") || T <= 0 || H <= 0) return;
    k_moe_combine_fwd<<<LAUNCH_ROWS(T, H)>>>(y, Y, w, inv, T, K, H);
    vc_cu_end("moe combine forward");
}
void vc_cu_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                           int64_t T, int64_t K, int64_t H) {
    const char *op = "moe combine backward";
    if (!vc_cu_begin(op) || T <= 0 || K <= 0 || H <= 0) return;
    if (dY) k_moe_combine_dY<float><<<LAUNCH_ROWS(T, H)>>>(dY, dy, w, inv, T, K, H);
    if (dw) k_moe_combine_dw<<<vc_cu_blocks(T * K * 32, ET), ET, 0, vc_cu_stream()>>>(dw, dy, Y, inv, T, K, H);
    vc_cu_end(op);
}
/* vc_backend.moe_combine_bwd_held: 0 when operands are not held (f32 matmuls, VERLC_CUDA_HOLD=0, no slot or memory)
 * or VERLC_CUDA_ACT_HELD=0 (read per call: the A/B, the same bits) */
int vc_cu_moe_combine_bwd_held(float *dY, float *dw, const float *dy, const float *Y, const float *w,
                               const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    const char *op = "moe combine backward (held bf16 out)", *e = getenv("VERLC_CUDA_ACT_HELD");
    if ((e && *e == '0') || T <= 0 || K <= 0 || H <= 0 || !vc_cu_begin(op)) return 0;
    __nv_bfloat16 *h = (__nv_bfloat16 *)vc_cu_hold_slot(dY, T * K, H);
    if (!h) return 0;
    k_moe_combine_dY<__nv_bfloat16><<<LAUNCH_ROWS(T, H)>>>(h, dy, w, inv, T, K, H);
    if (dw) k_moe_combine_dw<<<vc_cu_blocks(T * K * 32, ET), ET, 0, vc_cu_stream()>>>(dw, dy, Y, inv, T, K, H);
    vc_cu_end(op);
    return 1;
}
void vc_cu_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    if (!vc_cu_begin("moe scatter add") || T <= 0 || K <= 0 || H <= 0) return;
    k_moe_scatter_add<<<LAUNCH_ROWS(T, H)>>>(dx, dX, inv, T, K, H);
    vc_cu_end("moe scatter add");
}
