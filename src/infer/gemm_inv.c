/* A row-invariant GEMM for generation: every element of C = A B^T is a dot product computed by one
 * fixed sequence of operations (8-wide FMA accumulation over k, a fixed horizontal sum, a scalar tail),
 * whatever the number of rows, the tile an element falls in, or the thread count. A token's logits
 * therefore do not depend on what else is in the batch, or on whether it was computed in a prefill
 * chunk or a decode step. OpenBLAS gives no such promise (its kernels and blocking change with M). */
#include "infer/infer.h"
#include "backend/cpu/cpu.h"
#include "backend/sim/sim.h"
#include "core/sanitize.h"
#include "verlc/pool.h"
#include "verlc/dtype.h"
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* rows and columns per task, per instruction set: multiples of the tiles' (AVX2: 2 x 4, 3 x 3 and 1 x 8; AVX-512:
 * 4 x 6 and 1 x 8) */
#define MB_AVX2 30
#define MB_512 32
#define NB 48

typedef struct {
    const float *A, *B;
    float *C;
    int64_t M, N, K, lda, ldb, ldc, nmb, mb;
    float alpha, beta;
} gemm_ctx;

VC_NO_ASAN static inline float finish(float s, float alpha, float beta, const float *c) {
    float r = alpha * s;
    return beta != 0.0f ? fmaf(beta, *c, r) : r;
}

/* ---- AVX2 + FMA ---- */
#define AVX __attribute__((target("avx2,fma"))) VC_NO_ASAN

AVX static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

/* MR x NR tile of one instruction set (ATTR: its target attribute; VT, W: its vector type and lanes; LOAD, FMA,
 * ZERO, HSUM: its loads, fused multiply-adds, zero and horizontal sum): acc[i][j] over k in steps of W, then the
 * same per-element tail */
#define TILE_ISA(NAME, ATTR, VT, W, LOAD, FMA, ZERO, HSUM, MR, NR)                                               \
    ATTR static void NAME##_##MR##x##NR(const gemm_ctx *c, int64_t i0, int64_t j0) {                            \
        VT acc[MR][NR];                                                                                         \
        for (int i = 0; i < MR; i++)                                                                            \
            for (int j = 0; j < NR; j++) acc[i][j] = ZERO();                                                    \
        const float *a[MR], *b[NR];                                                                             \
        for (int i = 0; i < MR; i++) a[i] = c->A + (i0 + i) * c->lda;                                           \
        for (int j = 0; j < NR; j++) b[j] = c->B + (j0 + j) * c->ldb;                                           \
        int64_t k = 0;                                                                                          \
        for (; k + W <= c->K; k += W) {                                                                         \
            VT av[MR];                                                                                          \
            for (int i = 0; i < MR; i++) av[i] = LOAD(a[i] + k);                                                \
            for (int j = 0; j < NR; j++) {                                                                      \
                VT bv = LOAD(b[j] + k);                                                                         \
                for (int i = 0; i < MR; i++) acc[i][j] = FMA(av[i], bv, acc[i][j]);                             \
            }                                                                                                   \
        }                                                                                                       \
        for (int i = 0; i < MR; i++)                                                                            \
            for (int j = 0; j < NR; j++) {                                                                      \
                float s = HSUM(acc[i][j]);                                                                      \
                for (int64_t kk = k; kk < c->K; kk++) s = fmaf(a[i][kk], b[j][kk], s);                         \
                float *out = c->C + (i0 + i) * c->ldc + j0 + j;                                                 \
                *out = finish(s, c->alpha, c->beta, out);                                                       \
            }                                                                                                   \
    }
#define TILE(MR, NR) TILE_ISA(tile, AVX, __m256, 8, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_setzero_ps, hsum8, MR, NR)
#pragma GCC push_options
#pragma GCC optimize("unroll-loops")
TILE(3, 3)
TILE(3, 1)
TILE(2, 1)
TILE(1, 1)
#pragma GCC pop_options

/* hsum8 of eight vectors at once, lane e of the result holding hsum8(v[e]) bit for bit: the same additions of the
 * same pairs ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), done across the vectors by shuffles instead of one
 * vector at a time */
AVX static inline __m256 hsum8x8(__m256 v0, __m256 v1, __m256 v2, __m256 v3, __m256 v4, __m256 v5, __m256 v6,
                                  __m256 v7) {
    /* [lo + hi of va | lo + hi of vb]: lanes t0..t3 = l0 + l4, .., l3 + l7 of va, then of vb */
#define LOHI(va, vb) _mm256_add_ps(_mm256_permute2f128_ps(va, vb, 0x20), _mm256_permute2f128_ps(va, vb, 0x31))
    __m256 u0 = LOHI(v0, v1), u1 = LOHI(v2, v3), u2 = LOHI(v4, v5), u3 = LOHI(v6, v7);
#undef LOHI
    /* t0 + t2, t1 + t3 of two vectors per half */
#define PAIRS(a, b, l, h) _mm256_add_ps(_mm256_shuffle_ps(a, b, l), _mm256_shuffle_ps(a, b, h))
    __m256 w0 = PAIRS(u0, u1, _MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2));
    __m256 w1 = PAIRS(u2, u3, _MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2));
    /* (t0 + t2) + (t1 + t3): lanes hold vectors 0 2 4 6 1 3 5 7, put back in order */
    __m256 x = PAIRS(w0, w1, _MM_SHUFFLE(2, 0, 2, 0), _MM_SHUFFLE(3, 1, 3, 1));
#undef PAIRS
    return _mm256_permutevar8x32_ps(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* MR x NR tile (MR NR = 8) whose eight sums are reduced together by hsum8x8: the elements' sequences of operations
 * are those of TILE's (the same FMAs over k, the same horizontal sum, tail and finish) */
#define TILE8(MR, NR)                                                                                           \
    AVX static void tile_##MR##x##NR(const gemm_ctx *c, int64_t i0, int64_t j0) {                               \
        __m256 acc[8];                                                                                          \
        for (int e = 0; e < 8; e++) acc[e] = _mm256_setzero_ps();                                               \
        const float *a[MR], *b[NR];                                                                             \
        for (int i = 0; i < MR; i++) a[i] = c->A + (i0 + i) * c->lda;                                           \
        for (int j = 0; j < NR; j++) b[j] = c->B + (j0 + j) * c->ldb;                                           \
        int64_t k = 0;                                                                                          \
        for (; k + 8 <= c->K; k += 8) {                                                                         \
            __m256 av[MR];                                                                                      \
            for (int i = 0; i < MR; i++) av[i] = _mm256_loadu_ps(a[i] + k);                                     \
            for (int j = 0; j < NR; j++) {                                                                      \
                __m256 bv = _mm256_loadu_ps(b[j] + k);                                                          \
                for (int i = 0; i < MR; i++) acc[i * NR + j] = _mm256_fmadd_ps(av[i], bv, acc[i * NR + j]);     \
            }                                                                                                   \
        }                                                                                                       \
        __m256 sum = hsum8x8(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]);                  \
        if (k == c->K) { /* no tail: finish's operations on the eight at once */                                \
            __m256 r = _mm256_mul_ps(_mm256_set1_ps(c->alpha), sum);                                            \
            float *o[MR];                                                                                       \
            for (int i = 0; i < MR; i++) o[i] = c->C + (i0 + i) * c->ldc + j0;                                  \
            if (c->beta != 0.0f) {                                                                              \
                float old[8];                                                                                   \
                for (int i = 0; i < MR; i++) memcpy(old + i * NR, o[i], NR * sizeof(float));                    \
                r = _mm256_fmadd_ps(_mm256_set1_ps(c->beta), _mm256_loadu_ps(old), r);                          \
            }                                                                                                   \
            if (MR == 1) _mm256_storeu_ps(o[0], r);                                                             \
            else {                                                                                              \
                _mm_storeu_ps(o[0], _mm256_castps256_ps128(r));                                                 \
                _mm_storeu_ps(o[MR - 1], _mm256_extractf128_ps(r, 1));                                          \
            }                                                                                                   \
            return;                                                                                             \
        }                                                                                                       \
        float s[8];                                                                                             \
        _mm256_storeu_ps(s, sum);                                                                               \
        for (int i = 0; i < MR; i++)                                                                            \
            for (int j = 0; j < NR; j++) {                                                                      \
                float t = s[i * NR + j];                                                                        \
                for (int64_t kk = k; kk < c->K; kk++) t = fmaf(a[i][kk], b[j][kk], t);                         \
                float *out = c->C + (i0 + i) * c->ldc + j0 + j;                                                 \
                *out = finish(t, c->alpha, c->beta, out);                                                       \
            }                                                                                                   \
    }
/* (no loop-to-memset rewriting: GCC would otherwise zero the accumulators through a call to memset on every tile, a
 * quarter of the time of a tile at K = 64) */
#pragma GCC push_options
#pragma GCC optimize("unroll-loops", "no-tree-loop-distribute-patterns")
TILE8(2, 4)
TILE8(1, 8)
#pragma GCC pop_options

/* task t's rows [i0, i1) and columns [j0, j1) */
static void task_span(const gemm_ctx *c, int64_t t, int64_t *i0, int64_t *i1, int64_t *j0, int64_t *j1) {
    *i0 = (t % c->nmb) * c->mb;
    *j0 = (t / c->nmb) * NB;
    *i1 = *i0 + c->mb < c->M ? *i0 + c->mb : c->M;
    *j1 = *j0 + NB < c->N ? *j0 + NB : c->N;
}

typedef void (*tile_fn)(const gemm_ctx *c, int64_t i0, int64_t j0);

/* task t in mr x nr tiles (big), its last columns in mr x 1 tiles, its last rows in 1 x 8 and 1 x 1 tiles: every
 * element by the same sequence of operations whichever tile holds it */
static void run_tiles(const gemm_ctx *c, int64_t t, int mr, int nr, tile_fn big, tile_fn col1, tile_fn row8,
                      tile_fn one) {
    int64_t i0, i1, j0, j1;
    task_span(c, t, &i0, &i1, &j0, &j1);
    int64_t i = i0;
    for (; i + mr <= i1; i += mr) {
        int64_t j = j0;
        for (; j + nr <= j1; j += nr) big(c, i, j);
        for (; j < j1; j++) col1(c, i, j);
    }
    for (; i < i1; i++) {
        int64_t j = j0;
        for (; j + 8 <= j1; j += 8) row8(c, i, j);
        for (; j < j1; j++) one(c, i, j);
    }
}

/* short sums (K < 128: the horizontal sums a large part of the work) in 2 x 4 tiles reduced eight at a time, long
 * ones in 3 x 3 tiles (fewer loads per FMA): either way every element gets the same bits */
static void task_avx(void *p, int64_t t) {
    if (((const gemm_ctx *)p)->K < 128) run_tiles(p, t, 2, 4, tile_2x4, tile_2x1, tile_1x8, tile_1x1);
    else run_tiles(p, t, 3, 3, tile_3x3, tile_3x1, tile_1x8, tile_1x1);
}

/* ---- AVX-512: 16 lanes over k, folded to 8 (low half + high half), then AVX2's horizontal sum and a scalar
 * tail over the last K % 16 ---- */
#define AVX512 __attribute__((target("avx512f,avx2,fma"))) VC_NO_ASAN

AVX512 static inline float hsum16(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v), hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return hsum8(_mm256_add_ps(lo, hi));
}

#define TILE512(MR, NR)                                                                                           \
    TILE_ISA(t512, AVX512, __m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_setzero_ps, hsum16, MR, NR)
#pragma GCC push_options
#pragma GCC optimize("unroll-loops")
TILE512(4, 6)
TILE512(4, 1)
TILE512(1, 8)
TILE512(1, 1)
#pragma GCC pop_options

static void task_512(void *p, int64_t t) { run_tiles(p, t, 4, 6, t512_4x6, t512_4x1, t512_1x8, t512_1x1); }

/* ---- portable fallback (the same invariance, its own rounding) ---- */
VC_NO_ASAN static void task_scalar(void *p, int64_t t) {
    const gemm_ctx *c = p;
    int64_t i0, i1, j0, j1;
    task_span(c, t, &i0, &i1, &j0, &j1);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            const float *a = c->A + i * c->lda, *b = c->B + j * c->ldb;
            float acc[8] = { 0 };
            int64_t k = 0;
            for (; k + 8 <= c->K; k += 8)
                for (int l = 0; l < 8; l++) acc[l] += a[k + l] * b[k + l];
            float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
            for (; k < c->K; k++) s += a[k] * b[k];
            float r = c->alpha * s;
            c->C[i * c->ldc + j] = c->beta != 0.0f ? r + c->beta * c->C[i * c->ldc + j] : r;
        }
}

/* the instruction set every call on this machine uses (one per process: the same bits for every call) */
static int g_isa = -1;

static int best_isa(void) {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return VC_GEMM_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VC_GEMM_AVX2;
    return VC_GEMM_SCALAR;
}

static int gemm_isa(void) {
    int v = __atomic_load_n(&g_isa, __ATOMIC_RELAXED);
    if (v < 0) {
        v = best_isa();
        __atomic_store_n(&g_isa, v, __ATOMIC_RELAXED);
    }
    return v;
}

int vc_infer_gemm_set_isa(int isa) {
    int best = best_isa();
    if (isa < 0) isa = best;
    if (isa > best) return -1;
    __atomic_store_n(&g_isa, isa, __ATOMIC_RELAXED);
    return 0;
}

/* op(X) as a row-major [rows, K] matrix: X itself, or a copy when X is transposed or (round) its values are
 * rounded to bf16, as bf16 matmuls take them (the same rounding as the training GEMMs') */
static float *as_rows(int trans, const float *X, int64_t ld, int64_t rows, int64_t K, int round, int64_t *ld_out) {
    if (!trans && !round) {
        *ld_out = ld;
        return (float *)X;
    }
    *ld_out = K;
    return vc_cpu_pack_rows(trans, X, ld, rows, K, round);
}

void vc_infer_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (VC_ASAN) { /* the tiles' loads and stores are not checked one by one */
        vc_asan_check_read(A, ta ? vc_matrix_bytes(K, M, lda) : vc_matrix_bytes(M, K, lda));
        vc_asan_check_read(B, tb ? vc_matrix_bytes(N, K, ldb) : vc_matrix_bytes(K, N, ldb));
        vc_asan_check_write(C, vc_matrix_bytes(M, N, ldc));
    }
    int64_t la = 0, lb = 0;
    /* C = op(A) op(B): rows of op(A) are A's rows unless transposed; B is used as B^T rows */
    int r16 = vc_matmul_precision() == VC_PREC_BF16;
    float *Ar = as_rows(ta, A, lda, M, K, r16, &la), *Br = as_rows(!tb, B, ldb, N, K, r16, &lb);
    if (Ar && Br) {
        int isa = gemm_isa();
        int64_t mb = isa == VC_GEMM_AVX512 ? MB_512 : MB_AVX2;
        gemm_ctx c = { .A = Ar, .B = Br, .C = C, .M = M, .N = N, .K = K, .lda = la, .ldb = lb, .ldc = ldc,
                       .nmb = (M + mb - 1) / mb, .mb = mb, .alpha = alpha, .beta = beta };
        vc_task_fn fn = isa == VC_GEMM_AVX512 ? task_512 : isa == VC_GEMM_AVX2 ? task_avx : task_scalar;
        vc_parallel(c.nmb * ((N + NB - 1) / NB), fn, &c);
    }
    if (Ar != A) free(Ar);
    if (Br != B) free(Br);
}

/* the sim device's generation table: the sim entries with the same row-invariant GEMM behind the
 * pointer translation, so that generation on the sim device computes exactly what the cpu device does */
static void sim_inv_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    SIM_BEGIN("gemm");
    const float *a = D(A), *b = D(B);
    float *c = D(C);
    SIM_END;
    vc_infer_gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* gemm_b16 with the row-invariant GEMM (bf16 operands converted to f32: the same bits as their f32 values) */
static void inv_gemm_b16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16,
                         int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc) {
    vc_gemm_b16_via(vc_infer_gemm, ta, tb, M, N, K, alpha, A, a16, lda, B, b16, ldb, beta, C, ldc);
}

static void sim_inv_gemm_b16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16,
                             int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc) {
    SIM_BEGIN("gemm_b16");
    const void *a = D(A), *b = D(B);
    float *c = D(C);
    SIM_END;
    inv_gemm_b16(ta, tb, M, N, K, alpha, a, a16, lda, b, b16, ldb, beta, c, ldc);
}

/* the experts' grouped GEMMs with the row-invariant GEMM (MoE layers in generation) */
static void inv_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                             const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc) {
    (void)R;
    vc_gemm_rows_grouped_via(vc_infer_gemm, tb, E, off, N, K, alpha, A, a16, lda, B, beta, C, ldc);
}

static void sim_inv_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                                 const void *A, int a16, int64_t lda, const float *B, float beta, float *C,
                                 int64_t ldc) {
    (void)R;
    vc_sim_gemm_rows_grouped_via(vc_infer_gemm, tb, E, off, N, K, alpha, A, a16, lda, B, beta, C, ldc);
}

static vc_backend INV, SIM_INV;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_backend(void) {
    INV = *vc_backend_cpu();
    INV.name = "cpu-rowinvariant";
    INV.gemm = vc_infer_gemm;
    INV.gemm_b16 = inv_gemm_b16;
    INV.gemm_rows_grouped = inv_rows_grouped;
    SIM_INV = *vc_backend_sim();
    SIM_INV.name = "sim-rowinvariant";
    SIM_INV.gemm = sim_inv_gemm;
    SIM_INV.gemm_b16 = sim_inv_gemm_b16;
    SIM_INV.gemm_rows_grouped = sim_inv_rows_grouped;
}

const vc_backend *vc_infer_backend(void) {
    pthread_once(&once, init_backend);
    return &INV;
}

const vc_backend *vc_infer_backend_for(const vc_backend *active) {
    if (active == vc_backend_cpu()) return vc_infer_backend();
    if (active == vc_backend_sim()) {
        pthread_once(&once, init_backend);
        return &SIM_INV;
    }
    return active;
}
