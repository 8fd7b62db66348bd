/* CPU kernels: GEMM (OpenBLAS), norms, activations, RoPE. Row-parallel kernels split rows into fixed
 * blocks, and parameter-gradient sums add per-block partials in block order, so results do not depend
 * on the number of threads. */
#include "cpu.h"
#include "bf16_round.h"
#include "infer/infer.h"
#include "backend/act_math.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include <cblas.h>
#include <math.h>
#include <string.h>

#define ROW_BLOCK 32

/* GEMM: OpenBLAS runs single-threaded (its idle threads would spin against the pool's); large products
 * are split into fixed blocks of C's rows or columns, one single-threaded sgemm per block on the pool.
 * The blocking depends only on the shapes, so the bits do not depend on the thread count. */
#define GEMM_BLOCK 256
#define GEMM_SPLIT_FLOPS (1 << 22)

typedef struct {
    int ta, tb, by_rows;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_ctx;

static void sgemm1(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M,
                (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

static void gemm_block(void *p, int64_t blk) {
    gemm_ctx *c = p;
    int64_t o = blk * GEMM_BLOCK;
    if (c->by_rows) {
        int64_t m = c->M - o < GEMM_BLOCK ? c->M - o : GEMM_BLOCK;
        const float *A = c->ta ? c->A + o : c->A + o * c->lda;
        sgemm1(c->ta, c->tb, m, c->N, c->K, c->alpha, A, c->lda, c->B, c->ldb, c->beta, c->C + o * c->ldc, c->ldc);
    } else {
        int64_t n = c->N - o < GEMM_BLOCK ? c->N - o : GEMM_BLOCK;
        const float *B = c->tb ? c->B + o * c->ldb : c->B + o;
        sgemm1(c->ta, c->tb, c->M, n, c->K, c->alpha, c->A, c->lda, B, c->ldb, c->beta, c->C + o, c->ldc);
    }
}

void vc_cpu_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
        return;
    }
    if ((double)M * N * K < GEMM_SPLIT_FLOPS || (M <= GEMM_BLOCK && N <= GEMM_BLOCK)) {
        sgemm1(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_ctx c = { ta, tb, M > N, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C };
    int64_t len = c.by_rows ? M : N;
    vc_parallel((len + GEMM_BLOCK - 1) / GEMM_BLOCK, gemm_block, &c);
}

/* op(X)'s rows as a packed [rows, K] copy (vc_cpu_pack_rows): blocks of rows on the pool (the LM head's weights are
 * copied in every bf16 call) */
#define PACK_BLOCK 256
typedef struct {
    const float *X;
    float *T;
    int64_t ld, rows, K;
    int trans, round;
} pack_ctx;

/* T's row r = X's row r rounded to bf16, 16 or 8 lanes at a time by the row-invariant GEMM's instruction set (the
 * same bits as one at a time) */
__attribute__((target("avx512f,avx2,fma"))) VC_NO_ASAN static int64_t round_row_512(const float *x, float *y, int64_t n) {
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) _mm512_storeu_ps(y + k, round16_512(_mm512_loadu_ps(x + k)));
    return k;
}

__attribute__((target("avx2,fma"))) VC_NO_ASAN static int64_t round_row_avx(const float *x, float *y, int64_t n) {
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, round16_avx(_mm256_loadu_ps(x + k)));
    return k;
}

static void round_row(const float *x, float *y, int64_t n) {
    int isa = vc_infer_gemm_isa();
    int64_t k = isa >= VC_GEMM_AVX512 ? round_row_512(x, y, n) : isa == VC_GEMM_AVX2 ? round_row_avx(x, y, n) : 0;
    for (; k < n; k++) y[k] = vc_bf16_to_f32(vc_f32_to_bf16(x[k]));
}

static void pack_task(void *p, int64_t t) {
    const pack_ctx *c = p;
    int64_t r0 = t * PACK_BLOCK, r1 = r0 + PACK_BLOCK < c->rows ? r0 + PACK_BLOCK : c->rows;
    if (c->trans) /* X is [K, rows]: along its rows */
        for (int64_t k = 0; k < c->K; k++)
            for (int64_t r = r0; r < r1; r++) {
                float v = c->X[k * c->ld + r];
                c->T[r * c->K + k] = c->round ? vc_bf16_to_f32(vc_f32_to_bf16(v)) : v;
            }
    else if (c->round)
        for (int64_t r = r0; r < r1; r++) round_row(c->X + r * c->ld, c->T + r * c->K, c->K);
    else
        for (int64_t r = r0; r < r1; r++) memcpy(c->T + r * c->K, c->X + r * c->ld, (size_t)c->K * sizeof(float));
}

float *vc_cpu_pack_rows(int trans, const float *X, int64_t ld, int64_t rows, int64_t K, int round) {
    float *T = vc_cpu_scratch((size_t)(rows * K > 0 ? rows * K : 1), sizeof(float), 0); /* NULL: recorded for sync */
    if (!T) return NULL;
    pack_ctx c = { .X = X, .T = T, .ld = ld, .rows = rows, .K = K, .trans = trans, .round = round };
    vc_parallel((rows + PACK_BLOCK - 1) / PACK_BLOCK, pack_task, &c);
    return T;
}

/* The gemm entry: with VC_PREC_BF16 both inputs are rounded to bf16 first (their products are then
 * exact in f32) and accumulated in f32, emulating a tensor-core bf16 GEMM with f32 accumulation. If the
 * scratch copies cannot be allocated the product runs in f32.
 * The forward products (ta 0, tb 1: activations times weights as stored, the LM head's logits) take the
 * row-invariant GEMM of src/infer/gemm_inv.c: a row's result never depends on the other rows or its place among
 * them. OpenBLAS rounds a row by its place in its kernel's tiles (on AMD Zen rows 12 apart match, neighbours do
 * not), so a packed row's log-probs gave other bits in another batch: the teacher and the student of one model,
 * the trainer and the rollout, one rank and two drifted apart. The backward products stay on OpenBLAS (the weight
 * gradients are sums over the batch's rows anyway; through the row-invariant kernel, which copies B transposed, a
 * 0.5B training step of 512 tokens ran at 35-38 tokens/s against 42 on 2026-12-07), except under bf16 matmuls on a CPU
 * with AVX-512 BF16, whose dot products (through the row-invariant GEMM) run at about twice sgemm's rate. */
void vc_cpu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!ta && tb && M > 0 && N > 0 && K > 0) { /* (bf16 rounding of the operands inside, as below) */
        vc_infer_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (vc_matmul_precision() != VC_PREC_BF16 || M == 0 || N == 0 || K == 0) {
        vc_cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (vc_infer_gemm_isa() == VC_GEMM_AVX512BF16) { /* AVX-512 BF16's dot products: twice sgemm's rate */
        vc_infer_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    float *Ab = vc_cpu_pack_rows(0, A, lda, ar, ac, 1), *Bb = Ab ? vc_cpu_pack_rows(0, B, ldb, br, bc, 1) : NULL;
    if (Ab && Bb) vc_cpu_sgemm(ta, tb, M, N, K, alpha, Ab, ac, Bb, bc, beta, C, ldc);
    else vc_cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    free(Ab);
    free(Bb);
}

/* op(X)'s rows x cols of a gemm operand as packed f32: bf16 values converted (exact), or a view of X */
static float *operand_f32(const void *X, int is16, int64_t rows, int64_t cols, int64_t ld, int64_t *ld_out) {
    *ld_out = ld;
    if (!is16) return (float *)X;
    float *Y = vc_cpu_scratch((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof(float), 1, 0);
    if (!Y) return NULL;
    const uint16_t *h = X;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) Y[r * cols + c] = vc_bf16_to_f32(h[r * ld + c]);
    *ld_out = cols;
    return Y;
}

/* gemm_b16 over any f32 gemm: the bf16 operands as f32 (which bf16 rounding leaves unchanged) */
void vc_gemm_b16_via(vc_gemm_fn gemm, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A,
                     int a16, int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc) {
    int64_t la, lb;
    float *Af = operand_f32(A, a16, ta ? K : M, ta ? M : K, lda, &la);
    float *Bf = Af ? operand_f32(B, b16, tb ? N : K, tb ? K : N, ldb, &lb) : NULL;
    if (Af && Bf) gemm(ta, tb, M, N, K, alpha, Af, la, Bf, lb, beta, C, ldc);
    else vc_fail(VC_ERR_NOMEM, "gemm with bf16 operands: no memory for the f32 copies");
    if (a16) free(Af);
    if (b16 && Bf) free(Bf);
}

static void vc_cpu_gemm_b16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16,
                            int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc) {
    vc_gemm_b16_via(vc_cpu_gemm, ta, tb, M, N, K, alpha, A, a16, lda, B, b16, ldb, beta, C, ldc);
}

/* ---- RMSNorm: y = x / sqrt(mean(x^2) + eps) * (w + w_offset) ---- */
typedef struct {
    float *y, *rstd, *dx, *dw_part;
    const float *x, *w, *dy, *rs;
    int64_t rows, cols;
    float eps, off;
    const float *mean; float *mean_out; const float *b; float *db_part;
} norm_ctx;

static void rms_fwd_task(void *p, int64_t blk) {
    norm_ctx *c = p;
    int64_t r1 = (blk + 1) * ROW_BLOCK < c->rows ? (blk + 1) * ROW_BLOCK : c->rows;
    for (int64_t r = blk * ROW_BLOCK; r < r1; r++) {
        const float *x = c->x + r * c->cols;
        float *y = c->y + r * c->cols;
        float ss = 0;
        for (int64_t i = 0; i < c->cols; i++) ss += x[i] * x[i];
        float rs = 1.0f / sqrtf(ss / (float)c->cols + c->eps);
        if (c->rstd) c->rstd[r] = rs;
        for (int64_t i = 0; i < c->cols; i++) y[i] = x[i] * rs * (c->w ? c->w[i] + c->off : 1.0f);
    }
}

static void vc_cpu_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                               float eps, float w_offset) {
    norm_ctx c = { .y = y, .rstd = rstd, .x = x, .w = w, .rows = rows, .cols = cols, .eps = eps, .off = w_offset };
    vc_parallel((rows + ROW_BLOCK - 1) / ROW_BLOCK, rms_fwd_task, &c);
}

static void rms_bwd_task(void *p, int64_t blk) {
    norm_ctx *c = p;
    int64_t r1 = (blk + 1) * ROW_BLOCK < c->rows ? (blk + 1) * ROW_BLOCK : c->rows;
    float *dwp = c->dw_part ? c->dw_part + blk * c->cols : NULL;
    for (int64_t r = blk * ROW_BLOCK; r < r1; r++) {
        const float *x = c->x + r * c->cols, *dy = c->dy + r * c->cols;
        float rs = c->rs[r], dot = 0;
        for (int64_t i = 0; i < c->cols; i++) dot += dy[i] * (c->w ? c->w[i] + c->off : 1.0f) * x[i];
        float k = dot * rs * rs * rs / (float)c->cols;
        if (c->dx) {
            float *dx = c->dx + r * c->cols;
            for (int64_t i = 0; i < c->cols; i++)
                dx[i] += rs * dy[i] * (c->w ? c->w[i] + c->off : 1.0f) - k * x[i];
        }
        if (dwp)
            for (int64_t i = 0; i < c->cols; i++) dwp[i] += dy[i] * x[i] * rs;
    }
}

/* Sums per-block partials into dst in block order. */
static void sum_partials(float *dst, const float *part, int64_t nblk, int64_t cols) {
    for (int64_t b = 0; b < nblk; b++)
        for (int64_t i = 0; i < cols; i++) dst[i] += part[b * cols + i];
}

static void vc_cpu_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                               const float *rstd, int64_t rows, int64_t cols, float w_offset) {
    int64_t nblk = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
    float *part = dw ? vc_cpu_scratch((size_t)(nblk * cols), sizeof(float), 1) : NULL;
    norm_ctx c = { .dx = dx, .dw_part = part, .dy = dy, .x = x, .w = w, .rs = rstd, .rows = rows, .cols = cols,
                   .off = w_offset };
    vc_parallel(nblk, rms_bwd_task, &c);
    if (part) {
        sum_partials(dw, part, nblk, cols);
        free(part);
    }
}

/* ---- LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b ---- */
static void ln_fwd_task(void *p, int64_t blk) {
    norm_ctx *c = p;
    int64_t r1 = (blk + 1) * ROW_BLOCK < c->rows ? (blk + 1) * ROW_BLOCK : c->rows;
    for (int64_t r = blk * ROW_BLOCK; r < r1; r++) {
        const float *x = c->x + r * c->cols;
        float *y = c->y + r * c->cols;
        float mu = 0, var = 0;
        for (int64_t i = 0; i < c->cols; i++) mu += x[i];
        mu /= (float)c->cols;
        for (int64_t i = 0; i < c->cols; i++) var += (x[i] - mu) * (x[i] - mu);
        float rs = 1.0f / sqrtf(var / (float)c->cols + c->eps);
        c->mean_out[r] = mu;
        c->rstd[r] = rs;
        for (int64_t i = 0; i < c->cols; i++)
            y[i] = (x[i] - mu) * rs * (c->w ? c->w[i] : 1.0f) + (c->b ? c->b[i] : 0.0f);
    }
}

static void vc_cpu_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                                 int64_t rows, int64_t cols, float eps) {
    norm_ctx c = { .y = y, .rstd = rstd, .mean_out = mean, .x = x, .w = w, .b = b, .rows = rows, .cols = cols,
                   .eps = eps };
    vc_parallel((rows + ROW_BLOCK - 1) / ROW_BLOCK, ln_fwd_task, &c);
}

static void ln_bwd_task(void *p, int64_t blk) {
    norm_ctx *c = p;
    int64_t r1 = (blk + 1) * ROW_BLOCK < c->rows ? (blk + 1) * ROW_BLOCK : c->rows;
    float *dwp = c->dw_part ? c->dw_part + blk * c->cols : NULL;
    float *dbp = c->db_part ? c->db_part + blk * c->cols : NULL;
    for (int64_t r = blk * ROW_BLOCK; r < r1; r++) {
        const float *x = c->x + r * c->cols, *dy = c->dy + r * c->cols;
        float mu = c->mean[r], rs = c->rs[r], mg = 0, mgx = 0;
        for (int64_t i = 0; i < c->cols; i++) {
            float g = dy[i] * (c->w ? c->w[i] : 1.0f), xh = (x[i] - mu) * rs;
            mg += g;
            mgx += g * xh;
        }
        mg /= (float)c->cols;
        mgx /= (float)c->cols;
        for (int64_t i = 0; i < c->cols; i++) {
            float g = dy[i] * (c->w ? c->w[i] : 1.0f), xh = (x[i] - mu) * rs;
            if (c->dx) c->dx[r * c->cols + i] += rs * (g - mg - xh * mgx);
            if (dwp) dwp[i] += dy[i] * xh;
            if (dbp) dbp[i] += dy[i];
        }
    }
}

static void vc_cpu_layernorm_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                 const float *mean, const float *rstd, int64_t rows, int64_t cols) {
    int64_t nblk = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
    float *pw = dw ? vc_cpu_scratch((size_t)(nblk * cols), sizeof(float), 1) : NULL;
    float *pb = db ? vc_cpu_scratch((size_t)(nblk * cols), sizeof(float), 1) : NULL;
    norm_ctx c = { .dx = dx, .dw_part = pw, .db_part = pb, .dy = dy, .x = x, .w = w, .mean = mean, .rs = rstd,
                   .rows = rows, .cols = cols };
    vc_parallel(nblk, ln_bwd_task, &c);
    if (pw) { sum_partials(dw, pw, nblk, cols); free(pw); }
    if (pb) { sum_partials(db, pb, nblk, cols); free(pb); }
}

/* ---- activations (formulas in backend/act_math.h) ---- */
typedef struct {
    float *y, *dx, *dg, *du;
    uint16_t *y16; /* act_mul_fwd_bf16 */
    const float *x, *g, *u, *dy;
    int64_t n, cols, ld; /* act_mul with ld != cols: a task a block of rows */
    int kind;
} act_ctx;
#define EW_BLOCK 16384

/* a task's elements: y, dy (packed) from o, the gated inputs and their gradients from i, len of them */
typedef struct { int64_t o, i, len; } act_span;

/* task b's spans: a block of EW_BLOCK elements of one contiguous run, or of rows (EW_BLOCK / cols at least one) */
static int64_t act_tasks(const act_ctx *c) {
    if (c->ld == c->cols) return (c->n + EW_BLOCK - 1) / EW_BLOCK;
    int64_t rows = c->n / c->cols, per = EW_BLOCK / c->cols > 0 ? EW_BLOCK / c->cols : 1;
    return (rows + per - 1) / per;
}
static int act_span_of(const act_ctx *c, int64_t b, int64_t k, act_span *s) {
    if (c->ld == c->cols) {
        int64_t i0 = b * EW_BLOCK, i1 = i0 + EW_BLOCK < c->n ? i0 + EW_BLOCK : c->n;
        *s = (act_span){ i0, i0, i1 - i0 };
        return k == 0;
    }
    int64_t per = EW_BLOCK / c->cols > 0 ? EW_BLOCK / c->cols : 1, r = b * per + k;
    if (k >= per || r >= c->n / c->cols) return 0;
    *s = (act_span){ r * c->cols, r * c->ld, c->cols };
    return 1;
}

static void act_fwd_task(void *p, int64_t b) {
    act_ctx *c = p;
    act_span s;
    for (int64_t k = 0; act_span_of(c, b, k, &s); k++)
        for (int64_t j = 0; j < s.len; j++) {
            int64_t o = s.o + j, i = s.i + j;
            if (c->y16) c->y16[o] = vc_f32_to_bf16(vc_gate_f(c->g[i], c->u[i], c->kind));
            else if (c->u) c->y[o] = vc_gate_f(c->g[i], c->u[i], c->kind);
            else c->y[o] = vc_act_f(c->x[i], c->kind);
        }
}

static void act_bwd_task(void *p, int64_t b) {
    act_ctx *c = p;
    const int wr = c->kind & VC_ACT_WRITE, kind = c->kind & ~VC_ACT_WRITE;
    act_span s;
    for (int64_t k = 0; act_span_of(c, b, k, &s); k++)
        for (int64_t j = 0; j < s.len; j++) {
            int64_t o = s.o + j, i = s.i + j;
            if (c->u) {
                if (c->dg) c->dg[i] = (wr ? 0.0f : c->dg[i]) + vc_gate_dg(c->dy[o], c->g[i], c->u[i], kind);
                if (c->du) c->du[i] = (wr ? 0.0f : c->du[i]) + vc_gate_du(c->dy[o], c->g[i], c->u[i], kind);
            } else c->dx[i] += c->dy[o] * vc_act_d(c->x[i], kind);
        }
}

/* ---- xIELU: elementwise forward; backward dx per block, the two scalar sums per block then in block order ---- */
typedef struct {
    float *y, *dx;
    const float *x, *dy;
    double *part; /* [2 nblk] */
    int64_t n;
    float ap, an, beta, eps;
} xielu_ctx;

static void xielu_task(void *p, int64_t b) {
    xielu_ctx *c = p;
    int64_t i1 = (b + 1) * EW_BLOCK < c->n ? (b + 1) * EW_BLOCK : c->n;
    double sp = 0, sn = 0;
    for (int64_t i = b * EW_BLOCK; i < i1; i++) {
        if (!c->dy) {
            c->y[i] = vc_xielu_f(c->x[i], c->ap, c->an, c->beta, c->eps);
            continue;
        }
        float dp, dn, d = vc_xielu_d(c->x[i], c->ap, c->an, c->beta, c->eps, &dp, &dn);
        c->dx[i] += c->dy[i] * d;
        sp += (double)c->dy[i] * dp;
        sn += (double)c->dy[i] * dn;
    }
    if (c->part) c->part[2 * b] = sp, c->part[2 * b + 1] = sn;
}

static void vc_cpu_xielu_fwd(float *y, const float *x, int64_t n, const float *ap, const float *an, float beta, float eps) {
    xielu_ctx c = { .y = y, .x = x, .n = n, .ap = vc_softplus(ap[0]), .an = beta + vc_softplus(an[0]), .beta = beta,
                    .eps = eps };
    vc_parallel((n + EW_BLOCK - 1) / EW_BLOCK, xielu_task, &c);
}

void vc_cpu_xielu_bwd(float *dx, float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                      const float *an, float beta, float eps) {
    int64_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
    double *part = vc_cpu_scratch((size_t)(2 * (nb ? nb : 1)), sizeof(double), 1);
    if (!part) return;
    xielu_ctx c = { .dx = dx, .x = x, .dy = dy, .part = part, .n = n, .ap = vc_softplus(ap[0]),
                    .an = beta + vc_softplus(an[0]), .beta = beta, .eps = eps };
    vc_parallel(nb, xielu_task, &c);
    double sp = 0, sn = 0;
    for (int64_t b = 0; b < nb; b++) sp += part[2 * b], sn += part[2 * b + 1];
    float sgp = 1.0f / (1.0f + expf(-ap[0])), sgn = 1.0f / (1.0f + expf(-an[0])); /* softplus' */
    if (dap) dap[0] += (float)(sp * sgp);
    if (dan) dan[0] += (float)(sn * sgn);
    free(part);
}

static void vc_cpu_act_fwd(float *y, const float *x, int64_t n, int kind) {
    act_ctx c = { .y = y, .x = x, .n = n, .cols = n, .ld = n, .kind = kind };
    vc_parallel(act_tasks(&c), act_fwd_task, &c);
}
static void vc_cpu_act_bwd(float *dx, const float *dy, const float *x, int64_t n, int kind) {
    act_ctx c = { .dx = dx, .dy = dy, .x = x, .n = n, .cols = n, .ld = n, .kind = kind };
    vc_parallel(act_tasks(&c), act_bwd_task, &c);
}
static void vc_cpu_act_mul_fwd(float *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind) {
    act_ctx c = { .y = y, .g = g, .u = u, .n = n, .cols = cols, .ld = ld, .kind = kind };
    if (n > 0) vc_parallel(act_tasks(&c), act_fwd_task, &c);
}
void vc_cpu_act_mul_fwd_bf16(void *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind) {
    act_ctx c = { .y16 = y, .g = g, .u = u, .n = n, .cols = cols, .ld = ld, .kind = kind };
    if (n > 0) vc_parallel(act_tasks(&c), act_fwd_task, &c);
}
static void vc_cpu_act_mul_bwd(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
                               int64_t cols, int64_t ld, int kind) {
    act_ctx c = { .dg = dg, .du = du, .dy = dy, .g = g, .u = u, .n = n, .cols = cols, .ld = ld, .kind = kind };
    if (n > 0) vc_parallel(act_tasks(&c), act_bwd_task, &c);
}

/* ---- RoPE on x[T, nh, hd]: the first `rot` dims of each head rotate; pairs are (i, i + rot/2)
 * (GPT-NeoX style) or (2i, 2i + 1) (GPT-J / GLM style). */
static void vc_cpu_rope(float *x, const float *cs, const float *sn, int64_t T, int nh, int hd, int rot,
                        int interleaved, int sign) {
    int half = rot / 2;
    for (int64_t t = 0; t < T; t++) {
        const float *c = cs + t * half, *s = sn + t * half;
        for (int h = 0; h < nh; h++) {
            float *v = x + (t * nh + h) * hd;
            for (int i = 0; i < half; i++) {
                int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
                float x1 = v[a], x2 = v[b], si = sign * s[i];
                v[a] = x1 * c[i] - x2 * si;
                v[b] = x2 * c[i] + x1 * si;
            }
        }
    }
}

static const vc_backend CPU = {
    .name = "cpu",
    .host_visible = 1,
    .alloc = vc_cpu_alloc,
    .free = vc_cpu_free,
    .h2d = vc_cpu_copy,
    .d2h = vc_cpu_copy,
    .d2d = vc_cpu_copy,
    .zero = vc_cpu_zero,
    .sync = vc_cpu_sync,
    .gemm = vc_cpu_gemm,
    .rmsnorm_fwd = vc_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = vc_cpu_rmsnorm_bwd,
    .layernorm_fwd = vc_cpu_layernorm_fwd,
    .layernorm_bwd = vc_cpu_layernorm_bwd,
    .rope = vc_cpu_rope,
    .attn_fwd = vc_cpu_attn_fwd,
    .attn_bwd = vc_cpu_attn_bwd,
    .dsa_select = vc_cpu_dsa_select,
    .attn_sink_bwd = vc_cpu_attn_sink_bwd,
    .act_fwd = vc_cpu_act_fwd,
    .act_bwd = vc_cpu_act_bwd,
    .act_mul_fwd = vc_cpu_act_mul_fwd,
    .xielu_fwd = vc_cpu_xielu_fwd,
    .xielu_bwd = vc_cpu_xielu_bwd,
    .gdn_fwd = vc_cpu_gdn_fwd,
    .gdn_bwd = vc_cpu_gdn_bwd,
    .gdn_gate_fwd = vc_cpu_gdn_gate_fwd,
    .gdn_gate_bwd = vc_cpu_gdn_gate_bwd,
    .affine_cols_fwd = vc_cpu_affine_cols_fwd,
    .affine_cols_bwd = vc_cpu_affine_cols_bwd,
    .ssm_fwd = vc_cpu_ssm_fwd,
    .ssm_bwd = vc_cpu_ssm_bwd,
    .conv1d_fwd = vc_cpu_conv1d_fwd,
    .conv1d_bwd = vc_cpu_conv1d_bwd,
    .act_mul_bwd = vc_cpu_act_mul_bwd,
    .act_mul_fwd_bf16 = vc_cpu_act_mul_fwd_bf16,
    .gemm_b16 = vc_cpu_gemm_b16,
    .lm_head_fwd = vc_cpu_lm_head_fwd,
    .lm_head_bwd = vc_cpu_lm_head_bwd,
    .route_fwd = vc_cpu_route_fwd,
    .route_bwd = vc_cpu_route_bwd,
    .fill = vc_cpu_fill,
    .axpy = vc_cpu_axpy,
    .add = vc_cpu_add,
    .mul = vc_cpu_mul,
    .mul_acc = vc_cpu_mul_acc,
    .scale = vc_cpu_scale,
    .round_bf16 = vc_cpu_round_bf16,
    .mul_rows_fwd = vc_cpu_mul_rows_fwd,
    .mul_rows_bwd = vc_cpu_mul_rows_bwd,
    .rows_copy = vc_cpu_rows_copy,
    .rows_sum = vc_cpu_rows_sum,
    .col_sum = vc_cpu_col_sum,
    .softcap_fwd = vc_cpu_softcap_fwd,
    .clip_fwd = vc_cpu_clip_fwd,
    .clip_bwd = vc_cpu_clip_bwd,
    .softcap_bwd = vc_cpu_softcap_bwd,
    .rownorm_fwd = vc_cpu_rownorm_fwd,
    .rownorm_bwd = vc_cpu_rownorm_bwd,
    .dot_fwd = vc_cpu_dot_fwd,
    .dot_bwd = vc_cpu_dot_bwd,
    .embed_fwd = vc_cpu_embed_fwd,
    .embed_bwd = vc_cpu_embed_bwd,
    .gather_rows = vc_cpu_gather_rows,
    .gather_rows_bf16 = vc_cpu_gather_rows_bf16,
    .scatter_rows = vc_cpu_scatter_rows,
    .scatter_rows_bf16 = vc_cpu_scatter_rows_bf16,
    .moe_combine_fwd = vc_cpu_moe_combine_fwd,
    .moe_combine_bwd = vc_cpu_moe_combine_bwd,
    .moe_scatter_add = vc_cpu_moe_scatter_add,
    .moe_group = vc_cpu_moe_group,
    .moe_bias_fwd = vc_cpu_moe_bias_fwd,
    .moe_bias_bwd = vc_cpu_moe_bias_bwd,
    .gemm_rows_grouped = vc_cpu_gemm_rows_grouped,
    .gemm_wgrad_grouped = vc_cpu_gemm_wgrad_grouped,
    .adamw = vc_cpu_adamw,
    .sumsq = vc_cpu_sumsq,
    .sample_rows = vc_cpu_sample_rows,
};

const vc_backend *vc_backend_cpu(void) { return &CPU; }
static const vc_backend *active = &CPU;
const vc_backend *vc_be(void) { return active; }
void vc_set_backend(const vc_backend *b) { active = b ? b : &CPU; }
static int matmul_prec = VC_PREC_F32;
void vc_set_matmul_precision(int prec) { matmul_prec = prec; }
int vc_matmul_precision(void) { return matmul_prec; }
