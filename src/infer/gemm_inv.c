/* A row-invariant GEMM for generation and the forward products: every element of C = A B^T comes from one fixed
 * sequence of operations (a chain of fused multiply-adds over k in order, then the scaling), whatever the number of
 * rows, the tile or vector lane an element falls in, the instruction set or the thread count. A token's logits
 * therefore do not depend on what else is in the batch, on whether it was computed in a prefill chunk or a decode
 * step, or on whether the machine has AVX-512. OpenBLAS gives no such promise (its kernels and blocking change with
 * M). */
#include "infer/infer.h"
#include "backend/cpu/cpu.h"
#include "backend/sim/sim.h"
#include "core/sanitize.h"
#include "backend/cpu/bf16_round.h"
#include "verlc/pool.h"
#include "verlc/dtype.h"
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* Every element is one chain of fused multiply-adds over k in order, then the scaling:
 *     s = 0; for k = 0 .. K-1: s = fma(a[i][k], b[j][k], s);   c[i][j] = beta != 0 ? fma(beta, c[i][j], alpha s) : alpha s
 * Each vector lane below runs one element's chain, so the tiles, the vector width (AVX-512, AVX2, scalar), the
 * number of rows and the threads change which lane or call computes an element, never its bits. With bf16 matmuls
 * (operands rounded to bf16) the chain runs under flush-to-zero and denormals-are-zero on every instruction set,
 * because AVX-512 BF16's vdpbf16ps, which adds two k's products a step (k's first, each rounded once), always does.
 *
 * Two kernels, both lanes over that chain:
 * - panels (at least a vector's lanes of rows: 16, or 8 on AVX2): A's rows packed transposed, a panel of P rows as
 *   [K][P] (zeros past M), each k one vector load per 16 (8) rows and one broadcast of b[j][k] per column: MV vectors
 *   of rows x NR columns of accumulators, no horizontal sums, B read in place (its rows, 4 bytes a column a step);
 * - columns (fewer rows than a vector's lanes: decode steps): lanes over 16 (or 8) columns, B's 16 x 16 (8 x 8)
 *   blocks transposed in registers, a broadcast of a[i][k] per row. */
#define NB 48      /* columns per task (panel kernel) */
#define NB_COL 64  /* columns per task (column kernel) */
#define RB 2       /* panels per task */

typedef struct {
    const float *A, *B; /* A: packed panels (panel kernel) or op(A)'s rows (column and scalar kernels) */
    const uint16_t *B16; /* B's rows as a registered bf16 copy (vc_cpu_bf16_copy_find; B unused), or NULL */
    float *C;
    int64_t M, N, K, lda, ldb, ldc;
    int64_t P, W;            /* rows per panel, lanes per vector */
    int64_t npanel, nrb;     /* panels, row blocks of RB panels */
    float alpha, beta;
    int ftz;                 /* bf16 matmuls: the tasks run under flush-to-zero and denormals-are-zero */
    const uint32_t *Ap;      /* the column kernel's A rows as bf16 pairs (AVX-512 BF16 with a copy of B), or NULL */
    int64_t lap;             /* their leading dimension (pairs) */
} gemm_ctx;

/* bf16 matmuls run under flush-to-zero and denormals-are-zero on every instruction set, as AVX-512 BF16's dot
 * products always do (so a denormal operand, partial sum or result gives the same bits on each): a task's MXCSR
 * for its span */
#define FTZ_DAZ 0x8040u
static inline unsigned ftz_enter(const gemm_ctx *c) {
    unsigned old = _mm_getcsr();
    if (c->ftz) _mm_setcsr(old | FTZ_DAZ);
    return old;
}
static inline void ftz_leave(const gemm_ctx *c, unsigned old) {
    if (c->ftz) _mm_setcsr(old);
}

VC_NO_ASAN static inline void finish_store(const gemm_ctx *c, float s, int64_t i, int64_t j) {
    float *out = c->C + i * c->ldc + j, r = c->alpha * s;
    *out = c->beta != 0.0f ? fmaf(c->beta, *out, r) : r;
}

/* the tile's sums out through the scaling: MV vectors of rows x NR columns */
#define PANEL_FINISH(VT, W, STORE, MV, NR)                                                                      \
    float s[NR][W * MV];                                                                                        \
    for (int j = 0; j < NR; j++)                                                                                \
        for (int v = 0; v < MV; v++) STORE(s[j] + W * v, acc[v][j]);                                            \
    for (int64_t i = 0; i < rows; i++)                                                                          \
        for (int j = 0; j < NR; j++) finish_store(c, s[j][i], i0 + i, j0 + j);

/* MV vectors of rows x NR columns from panel At (rows i0.., `rows` of them real), columns j0.., B's rows in f32 */
#define PANEL_TILE(PFX, ATTR, VT, W, LOAD, FMA, ZERO, SET1, STORE, MV, NR)                                       \
    ATTR static void PFX##_p##MV##x##NR(const gemm_ctx *c, const float *At, int64_t i0, int64_t rows,          \
                                        int64_t j0) {                                                           \
        VT acc[MV][NR];                                                                                         \
        _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                                   \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[v][j] = ZERO();                           \
        const float *b[NR];                                                                                     \
        _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) b[j] = c->B + (j0 + j) * c->ldb;                  \
        for (int64_t k = 0; k < c->K; k++) {                                                                    \
            VT a[MV];                                                                                           \
            _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++) a[v] = LOAD(At + k * (W * MV) + W * v);       \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) {                                             \
                VT bb = SET1(b[j][k]);                                                                          \
                _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++) acc[v][j] = FMA(a[v], bb, acc[v][j]);     \
            }                                                                                                   \
        }                                                                                                       \
        PANEL_FINISH(VT, W, STORE, MV, NR)                                                                      \
    }

/* column j's first pair in B's bf16 copy: its group of VC_B16_LANES, its lane */
static inline const uint16_t *b16_column(const gemm_ctx *c, int64_t j) {
    return c->B16 + (j / VC_B16_LANES) * vc_b16_even(c->K) * VC_B16_LANES + (j % VC_B16_LANES) * 2;
}

/* the same from B's bf16 copy (the same chains; its layout in backend/cpu/cpu.h): two k at a time, b[j][k] and
 * b[j][k + 1] broadcast as one 32-bit word, k's value its high half masked (SHI), k + 1's its low half shifted up
 * (SLO); an odd K's last k alone (its pair's low half a zero) */
#define PANEL_TILE16(PFX, ATTR, VT, VI, W, LOAD, FMA, ZERO, SET1I, SLO, SHI, STORE, MV, NR)                     \
    ATTR static void PFX##_q##MV##x##NR(const gemm_ctx *c, const float *At, int64_t i0, int64_t rows,          \
                                        int64_t j0) {                                                           \
        VT acc[MV][NR];                                                                                         \
        _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                                   \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[v][j] = ZERO();                           \
        const uint16_t *b[NR]; /* column j's pairs, 2 VC_B16_LANES elements apart */                            \
        _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) b[j] = b16_column(c, j0 + j);                     \
        int64_t k = 0;                                                                                          \
        for (; k + 2 <= c->K; k += 2) {                                                                         \
            VT a[MV];                                                                                           \
            _Pragma("GCC unroll 16") for (int h = 0; h < 2; h++) {                                              \
                _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                           \
                    a[v] = LOAD(At + (k + h) * (W * MV) + W * v);                                               \
                _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) {                                         \
                    uint32_t pair;                                                                              \
                    memcpy(&pair, b[j] + k * VC_B16_LANES, 4);                                                  \
                    VI p = SET1I((int)pair);                                                                    \
                    VT bb = h ? SLO(p) : SHI(p);                                                                \
                    _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++) acc[v][j] = FMA(a[v], bb, acc[v][j]); \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        for (; k < c->K; k++) {                                                                                 \
            VT a[MV];                                                                                           \
            _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++) a[v] = LOAD(At + k * (W * MV) + W * v);       \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) {                                             \
                uint32_t pair;                                                                                  \
                memcpy(&pair, b[j] + k * VC_B16_LANES, 4);                                                      \
                VT bb = SHI(SET1I((int)pair));                                                                  \
                _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++) acc[v][j] = FMA(a[v], bb, acc[v][j]);     \
            }                                                                                                   \
        }                                                                                                       \
        PANEL_FINISH(VT, W, STORE, MV, NR)                                                                      \
    }

typedef void (*panel_fn)(const gemm_ctx *c, const float *At, int64_t i0, int64_t rows, int64_t j0);

/* task t: RB panels from row block t % nrb, columns NB from t / nrb: each NR columns across the panels, then the
 * last columns one at a time (f[0] the f32 kernels, f[1] the bf16 copy's: wide[.][mv - 1] NR columns, one[.][mv - 1]
 * a column, for panels of mv vectors) */
static void panel_task(const gemm_ctx *c, int64_t t, int nr, const panel_fn wide[2][3], const panel_fn one[2][3]) {
    unsigned csr = ftz_enter(c);
    int64_t p0 = (t % c->nrb) * RB, p1 = p0 + RB < c->npanel ? p0 + RB : c->npanel;
    int64_t j0 = (t / c->nrb) * NB, j1 = j0 + NB < c->N ? j0 + NB : c->N;
    int b16 = c->B16 != NULL;
    for (int64_t j = j0; j < j1;) {
        int w = j + nr <= j1;
        for (int64_t p = p0; p < p1; p++) {
            int64_t i0 = p * c->P, rows = c->M - i0 < c->P ? c->M - i0 : c->P;
            int mv = (int)((rows + c->W - 1) / c->W); /* the last panel: as many vectors as its rows need */
            panel_fn f = w ? wide[b16][mv - 1] : one[b16][mv - 1];
            f(c, c->A + i0 * c->K, i0, rows, j);
        }
        j += w ? nr : 1;
    }
    ftz_leave(c, csr);
}

#define AVX __attribute__((target("avx2,fma"))) VC_NO_ASAN
#define AVX512 __attribute__((target("avx512f,avx2,fma"))) VC_NO_ASAN
/* bf16 to f32 (exact: the bf16 bits above 16 zero bits): the low / high halves of 32-bit lanes */
#define LO512(p) _mm512_castsi512_ps(_mm512_slli_epi32(p, 16))
#define HI512(p) _mm512_castsi512_ps(_mm512_and_si512(p, _mm512_set1_epi32((int)0xffff0000u)))
#define LOAVX(p) _mm256_castsi256_ps(_mm256_slli_epi32(p, 16))
#define HIAVX(p) _mm256_castsi256_ps(_mm256_and_si256(p, _mm256_set1_epi32((int)0xffff0000u)))
/* ---- AVX2 + FMA: panels of 16 rows, 2 x 6 tiles ---- */
#define PANEL_AVX(MV, NR)                                                                                       \
    PANEL_TILE(avx, AVX, __m256, 8, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_setzero_ps, _mm256_set1_ps,       \
               _mm256_storeu_ps, MV, NR)                                                                        \
    PANEL_TILE16(avx, AVX, __m256, __m256i, 8, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_setzero_ps,            \
                 _mm256_set1_epi32, LOAVX, HIAVX, _mm256_storeu_ps, MV, NR)
PANEL_AVX(1, 6)
PANEL_AVX(2, 6)
PANEL_AVX(1, 1)
PANEL_AVX(2, 1)

static void task_avx(void *p, int64_t t) {
    static const panel_fn wide[2][3] = { { avx_p1x6, avx_p2x6, NULL }, { avx_q1x6, avx_q2x6, NULL } };
    static const panel_fn one[2][3] = { { avx_p1x1, avx_p2x1, NULL }, { avx_q1x1, avx_q2x1, NULL } };
    panel_task(p, t, 6, wide, one);
}

/* ---- AVX-512 BF16, B's bf16 copy: panels of 48 rows as bf16 pairs, 3 x 8 tiles, two k a dot-product step ----
 * vdpbf16ps adds a pair's high-half product (k's: A's pairs and the copy put k high) and then its low-half one
 * (k + 1's) into the lane, each rounded once, under DAZ / FTZ: the chain's two fused multiply-adds, bit for bit. An
 * odd K's last k by a fused multiply-add from the f32 row (packed behind the pairs). */
#define BF512 __attribute__((target("avx512f,avx512bf16,avx2,fma"))) VC_NO_ASAN
#define BH(x) ((__m512bh)(x))
#define PANEL_BF(MV, NR)                                                                                        \
    BF512 static void bf_q##MV##x##NR(const gemm_ctx *c, const float *At, int64_t i0, int64_t rows, int64_t j0) { \
        __m512 acc[MV][NR];                                                                                     \
        _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                                   \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[v][j] = _mm512_setzero_ps();              \
        const uint16_t *b[NR];                                                                                  \
        _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) b[j] = b16_column(c, j0 + j);                     \
        const uint32_t *ap = (const uint32_t *)At; /* [K / 2][16 MV] pairs */                                   \
        int64_t nq = c->K / 2;                                                                                  \
        for (int64_t q = 0; q < nq; q++) {                                                                      \
            __m512bh a[MV];                                                                                     \
            _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                               \
                a[v] = BH(_mm512_loadu_si512(ap + q * (16 * MV) + 16 * v));                                     \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) {                                             \
                uint32_t pair;                                                                                  \
                memcpy(&pair, b[j] + q * 2 * VC_B16_LANES, 4);                                                  \
                __m512bh bb = BH(_mm512_set1_epi32((int)pair));                                                 \
                _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                           \
                    acc[v][j] = _mm512_dpbf16_ps(acc[v][j], a[v], bb);                                          \
            }                                                                                                   \
        }                                                                                                       \
        if (c->K % 2) {                                                                                         \
            const float *al = At + (c->K - 1) * (16 * MV);                                                      \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) {                                             \
                uint32_t pair;                                                                                  \
                memcpy(&pair, b[j] + nq * 2 * VC_B16_LANES, 4);                                                 \
                __m512 bb = HI512(_mm512_set1_epi32((int)pair));                                                \
                _Pragma("GCC unroll 16") for (int v = 0; v < MV; v++)                                           \
                    acc[v][j] = _mm512_fmadd_ps(_mm512_loadu_ps(al + 16 * v), bb, acc[v][j]);                   \
            }                                                                                                   \
        }                                                                                                       \
        PANEL_FINISH(__m512, 16, _mm512_storeu_ps, MV, NR)                                                      \
    }

/* ---- AVX-512: panels of 48 rows, 3 x 8 tiles ---- */
#define PANEL_512(MV, NR)                                                                                       \
    PANEL_TILE(t512, AVX512, __m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_setzero_ps, _mm512_set1_ps,  \
               _mm512_storeu_ps, MV, NR)                                                                        \
    PANEL_TILE16(t512, AVX512, __m512, __m512i, 16, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_setzero_ps,       \
                 _mm512_set1_epi32, LO512, HI512, _mm512_storeu_ps, MV, NR)                                     \
    PANEL_BF(MV, NR)
PANEL_512(1, 8)
PANEL_512(2, 8)
PANEL_512(3, 8)
PANEL_512(1, 1)
PANEL_512(2, 1)
PANEL_512(3, 1)

static void task_512(void *p, int64_t t) {
    static const panel_fn wide[2][3] = { { t512_p1x8, t512_p2x8, t512_p3x8 }, { t512_q1x8, t512_q2x8, t512_q3x8 } };
    static const panel_fn one[2][3] = { { t512_p1x1, t512_p2x1, t512_p3x1 }, { t512_q1x1, t512_q2x1, t512_q3x1 } };
    panel_task(p, t, 8, wide, one);
}


static void task_bf(void *p, int64_t t) {
    static const panel_fn wide[2][3] = { { t512_p1x8, t512_p2x8, t512_p3x8 }, { bf_q1x8, bf_q2x8, bf_q3x8 } };
    static const panel_fn one[2][3] = { { t512_p1x1, t512_p2x1, t512_p3x1 }, { bf_q1x1, bf_q2x1, bf_q3x1 } };
    panel_task(p, t, 8, wide, one);
}

/* a packed panel's [K][width] rounded f32 rows into [K / 2][width] pairs in place (k's bf16 high, k + 1's low; the
 * pairs' q-th stretch lies at or before the rows 2q and 2q + 1 it is made of, which are read first); an odd K's last
 * row stays where it is */
BF512 static void panel_pairs(float *At, int64_t width, int64_t K) {
    uint32_t *out = (uint32_t *)At;
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    for (int64_t q = 0; q < K / 2; q++)
        for (int64_t l = 0; l < width; l += 16) {
            __m512i e = _mm512_loadu_si512(At + 2 * q * width + l), o = _mm512_loadu_si512(At + (2 * q + 1) * width + l);
            _mm512_storeu_si512(out + q * width + l, _mm512_or_si512(_mm512_and_si512(e, hi), _mm512_srli_epi32(o, 16)));
        }
}

/* 16 x 16 transpose: r[j] holds row j's 16 values; after, r[q] holds value q of the 16 rows */
AVX512 static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#define PD(x) _mm512_castps_pd(x)
#define PS(x) _mm512_castpd_ps(x)
    for (int i = 0; i < 4; i++) {
        r[4 * i] = PS(_mm512_unpacklo_pd(PD(t[4 * i]), PD(t[4 * i + 2])));
        r[4 * i + 1] = PS(_mm512_unpackhi_pd(PD(t[4 * i]), PD(t[4 * i + 2])));
        r[4 * i + 2] = PS(_mm512_unpacklo_pd(PD(t[4 * i + 1]), PD(t[4 * i + 3])));
        r[4 * i + 3] = PS(_mm512_unpackhi_pd(PD(t[4 * i + 1]), PD(t[4 * i + 3])));
    }
#undef PD
#undef PS
    for (int i = 0; i < 2; i++)
        for (int q = 0; q < 4; q++) {
            t[8 * i + q] = _mm512_shuffle_f32x4(r[8 * i + q], r[8 * i + 4 + q], 0x88);
            t[8 * i + 4 + q] = _mm512_shuffle_f32x4(r[8 * i + q], r[8 * i + 4 + q], 0xdd);
        }
    for (int q = 0; q < 8; q++) {
        r[q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0x88);
        r[8 + q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0xdd);
    }
}

/* 8 x 8 transpose: r[j] holds row j's 8 values; after, r[q] holds value q of the 8 rows */
AVX static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
    }
}

/* MR rows x W columns j0.. (ncols of them real): B's block of W columns x W k transposed (TR), then each k one
 * vector of W columns times a broadcast a[i][k] per row */
#define COL_TILE(PFX, ATTR, VT, W, LOAD, FMA, ZERO, SET1, STORE, TR, MR)                                         \
    ATTR static void PFX##_c##MR(const gemm_ctx *c, int64_t i0, int64_t j0, int64_t ncols) {                   \
        VT acc[MR];                                                                                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i] = ZERO();                                  \
        const float *a = c->A + i0 * c->lda;                                                                    \
        float bt[W > MR ? W : MR][W];                                                                           \
        int64_t k = 0;                                                                                          \
        for (; k + W <= c->K; k += W) {                                                                         \
            VT r[W];                                                                                            \
            for (int j = 0; j < W; j++) r[j] = j < ncols ? LOAD(c->B + (j0 + j) * c->ldb + k) : ZERO();         \
            TR(r);                                                                                              \
            _Pragma("GCC unroll 16") for (int q = 0; q < W; q++) {                                              \
                VT bq = r[q];                                                                                   \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                           \
                    acc[i] = FMA(SET1(a[i * c->lda + k + q]), bq, acc[i]);                                      \
            }                                                                                                   \
        }                                                                                                       \
        for (; k < c->K; k++) {                                                                                 \
            for (int j = 0; j < W; j++) bt[0][j] = j < ncols ? c->B[(j0 + j) * c->ldb + k] : 0.0f;              \
            VT bq = LOAD(bt[0]);                                                                                \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i] = FMA(SET1(a[i * c->lda + k]), bq, acc[i]); \
        }                                                                                                       \
        for (int i = 0; i < MR; i++) {                                                                          \
            STORE(bt[i], acc[i]);                                                                               \
            for (int64_t j = 0; j < ncols; j++) finish_store(c, bt[i][j], i0 + i, j0 + j);                      \
        }                                                                                                       \
    }

/* the same from B's bf16 copy (j0 a multiple of W): its layout puts k's and k + 1's values of W columns in one
 * vector's lanes (SHI, SLO), so there is nothing to transpose; an odd K's last k alone */
#define COL_TILE16(PFX, ATTR, VT, VI, W, LOADI, FMA, ZERO, SET1, SLO, SHI, STORE, MR)                            \
    ATTR static void PFX##_c##MR##_16(const gemm_ctx *c, int64_t i0, int64_t j0, int64_t ncols) {              \
        VT acc[MR];                                                                                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i] = ZERO();                                  \
        const float *a = c->A + i0 * c->lda;                                                                    \
        const uint16_t *g = b16_column(c, j0);                                                                  \
        int64_t k = 0;                                                                                          \
        for (; k + 2 <= c->K; k += 2) {                                                                         \
            VI x = LOADI((const void *)(g + k * VC_B16_LANES));                                                 \
            VT lo = SHI(x), hi = SLO(x); /* k's values, k + 1's */                                              \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i] = FMA(SET1(a[i * c->lda + k]), lo, acc[i]); \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                               \
                acc[i] = FMA(SET1(a[i * c->lda + k + 1]), hi, acc[i]);                                          \
        }                                                                                                       \
        if (k < c->K) {                                                                                         \
            VT lo = SHI(LOADI((const void *)(g + k * VC_B16_LANES)));                                           \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i] = FMA(SET1(a[i * c->lda + k]), lo, acc[i]); \
        }                                                                                                       \
        float bt[MR][W];                                                                                        \
        for (int i = 0; i < MR; i++) {                                                                          \
            STORE(bt[i], acc[i]);                                                                               \
            for (int64_t j = 0; j < ncols; j++) finish_store(c, bt[i][j], i0 + i, j0 + j);                      \
        }                                                                                                       \
    }
#define COL_512(MR)                                                                                             \
    COL_TILE(t512, AVX512, __m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_setzero_ps, _mm512_set1_ps,    \
             _mm512_storeu_ps, transpose16, MR)                                                                 \
    COL_TILE16(t512, AVX512, __m512, __m512i, 16, _mm512_loadu_si512, _mm512_fmadd_ps, _mm512_setzero_ps,      \
               _mm512_set1_ps, LO512, HI512, _mm512_storeu_ps, MR)
#define COL_AVX(MR)                                                                                             \
    COL_TILE(avx, AVX, __m256, 8, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_setzero_ps, _mm256_set1_ps,         \
             _mm256_storeu_ps, transpose8, MR)                                                                  \
    COL_TILE16(avx, AVX, __m256, __m256i, 8, LOADU256, _mm256_fmadd_ps, _mm256_setzero_ps, _mm256_set1_ps,     \
               LOAVX, HIAVX, _mm256_storeu_ps, MR)
#define LOADU256(p) _mm256_loadu_si256((const __m256i *)(p))
#pragma GCC push_options
#pragma GCC optimize("no-tree-loop-distribute-patterns")
COL_512(1)
COL_512(2)
COL_512(3)
COL_512(4)
COL_512(5)
COL_512(6)
COL_512(7)
COL_512(8)
COL_512(9)
COL_512(10)
COL_512(11)
COL_512(12)
COL_512(13)
COL_512(14)
COL_512(15)
COL_AVX(1)
COL_AVX(2)
COL_AVX(3)
COL_AVX(4)
COL_AVX(5)
COL_AVX(6)
COL_AVX(7)

/* AVX2 with B's bf16 copy, MR (<= 5) rows: a whole group of 16 columns as two vectors (each 64-byte stretch of the
 * copy read at once, not half of it by each of two 8-column tiles) */
#define COL_AVX_PAIR(MR)                                                                                        \
    AVX static void avx_w##MR##_16(const gemm_ctx *c, int64_t i0, int64_t j0, int64_t ncols) {                  \
        __m256 acc[MR][2];                                                                                      \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();      \
        const float *a = c->A + i0 * c->lda;                                                                    \
        const uint16_t *g = b16_column(c, j0);                                                                  \
        int64_t k = 0;                                                                                          \
        for (; k + 2 <= c->K; k += 2) {                                                                         \
            __m256i x0 = LOADU256(g + k * VC_B16_LANES), x1 = LOADU256(g + k * VC_B16_LANES + 16);              \
            __m256 l0 = HIAVX(x0), l1 = HIAVX(x1), h0 = LOAVX(x0), h1 = LOAVX(x1); /* k's, k + 1's */           \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                             \
                __m256 ai = _mm256_set1_ps(a[i * c->lda + k]);                                                  \
                acc[i][0] = _mm256_fmadd_ps(ai, l0, acc[i][0]);                                                 \
                acc[i][1] = _mm256_fmadd_ps(ai, l1, acc[i][1]);                                                 \
            }                                                                                                   \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                             \
                __m256 ai = _mm256_set1_ps(a[i * c->lda + k + 1]);                                              \
                acc[i][0] = _mm256_fmadd_ps(ai, h0, acc[i][0]);                                                 \
                acc[i][1] = _mm256_fmadd_ps(ai, h1, acc[i][1]);                                                 \
            }                                                                                                   \
        }                                                                                                       \
        if (k < c->K) {                                                                                         \
            __m256 l0 = HIAVX(LOADU256(g + k * VC_B16_LANES)), l1 = HIAVX(LOADU256(g + k * VC_B16_LANES + 16)); \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                             \
                __m256 ai = _mm256_set1_ps(a[i * c->lda + k]);                                                  \
                acc[i][0] = _mm256_fmadd_ps(ai, l0, acc[i][0]);                                                 \
                acc[i][1] = _mm256_fmadd_ps(ai, l1, acc[i][1]);                                                 \
            }                                                                                                   \
        }                                                                                                       \
        float bt[MR][16];                                                                                       \
        for (int i = 0; i < MR; i++) {                                                                          \
            _mm256_storeu_ps(bt[i], acc[i][0]);                                                                 \
            _mm256_storeu_ps(bt[i] + 8, acc[i][1]);                                                             \
            for (int64_t j = 0; j < ncols; j++) finish_store(c, bt[i][j], i0 + i, j0 + j);                      \
        }                                                                                                       \
    }
COL_AVX_PAIR(1)
COL_AVX_PAIR(2)
COL_AVX_PAIR(3)
COL_AVX_PAIR(4)
COL_AVX_PAIR(5)

/* AVX-512 BF16 with B's bf16 copy, MR (< 16) rows: A's rows as pairs (c->Ap), one dot-product step a pair of k */
#define COL_BF(MR)                                                                                              \
    BF512 static void bf_c##MR(const gemm_ctx *c, int64_t i0, int64_t j0, int64_t ncols) {                     \
        __m512 acc[MR];                                                                                         \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i] = _mm512_setzero_ps();                     \
        const uint32_t *ap = c->Ap + i0 * c->lap;                                                               \
        const uint16_t *g = b16_column(c, j0);                                                                  \
        int64_t nq = c->K / 2;                                                                                  \
        for (int64_t q = 0; q < nq; q++) {                                                                      \
            __m512bh x = BH(_mm512_loadu_si512(g + q * 2 * VC_B16_LANES));                                      \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                               \
                acc[i] = _mm512_dpbf16_ps(acc[i], x, BH(_mm512_set1_epi32((int)ap[i * c->lap + q])));           \
        }                                                                                                       \
        if (c->K % 2) {                                                                                         \
            __m512 lo = HI512(_mm512_loadu_si512(g + nq * 2 * VC_B16_LANES));                                   \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                               \
                acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(c->A[(i0 + i) * c->lda + c->K - 1]), lo, acc[i]);       \
        }                                                                                                       \
        float bt[MR][16];                                                                                       \
        for (int i = 0; i < MR; i++) {                                                                          \
            _mm512_storeu_ps(bt[i], acc[i]);                                                                    \
            for (int64_t j = 0; j < ncols; j++) finish_store(c, bt[i][j], i0 + i, j0 + j);                      \
        }                                                                                                       \
    }
COL_BF(1)
COL_BF(2)
COL_BF(3)
COL_BF(4)
COL_BF(5)
COL_BF(6)
COL_BF(7)
COL_BF(8)
COL_BF(9)
COL_BF(10)
COL_BF(11)
COL_BF(12)
COL_BF(13)
COL_BF(14)
COL_BF(15)
#pragma GCC pop_options

typedef void (*col_fn)(const gemm_ctx *c, int64_t i0, int64_t j0, int64_t ncols);
static const col_fn COL512[2][15] = {
    { t512_c1, t512_c2, t512_c3, t512_c4, t512_c5, t512_c6, t512_c7, t512_c8, t512_c9, t512_c10, t512_c11, t512_c12,
      t512_c13, t512_c14, t512_c15 },
    { t512_c1_16, t512_c2_16, t512_c3_16, t512_c4_16, t512_c5_16, t512_c6_16, t512_c7_16, t512_c8_16, t512_c9_16,
      t512_c10_16, t512_c11_16, t512_c12_16, t512_c13_16, t512_c14_16, t512_c15_16 }
};
static const col_fn COLAVX[2][7] = { { avx_c1, avx_c2, avx_c3, avx_c4, avx_c5, avx_c6, avx_c7 },
                                     { avx_c1_16, avx_c2_16, avx_c3_16, avx_c4_16, avx_c5_16, avx_c6_16, avx_c7_16 } };

/* task t: columns NB_COL from t, all M (< W) rows at once (B read once) */
static const col_fn COLAVX_PAIR[5] = { avx_w1_16, avx_w2_16, avx_w3_16, avx_w4_16, avx_w5_16 };
static const col_fn COLBF[15] = { bf_c1, bf_c2, bf_c3, bf_c4, bf_c5, bf_c6, bf_c7, bf_c8, bf_c9, bf_c10, bf_c11,
                                  bf_c12, bf_c13, bf_c14, bf_c15 };

static void task_col(void *p, int64_t t) {
    const gemm_ctx *c = p;
    int b16 = c->B16 != NULL, pair = b16 && c->W == 8 && c->M <= 5; /* (AVX2: a group of 16 columns at once) */
    col_fn f = c->Ap ? COLBF[c->M - 1] : pair ? COLAVX_PAIR[c->M - 1] : c->W == 16 ? COL512[b16][c->M - 1]
                                                                               : COLAVX[b16][c->M - 1];
    int64_t j1 = (t + 1) * NB_COL < c->N ? (t + 1) * NB_COL : c->N, step = pair ? 16 : c->W;
    unsigned csr = ftz_enter(c);
    for (int64_t j = t * NB_COL; j < j1; j += step) f(c, 0, j, j1 - j < step ? j1 - j : step);
    ftz_leave(c, csr);
}

/* ---- portable fallback: the same chain per element ---- */
VC_NO_ASAN static void task_scalar(void *p, int64_t t) {
    const gemm_ctx *c = p;
    int64_t j1 = (t + 1) * NB < c->N ? (t + 1) * NB : c->N;
    unsigned csr = ftz_enter(c);
    for (int64_t i = 0; i < c->M; i++)
        for (int64_t j = t * NB; j < j1; j++) {
            const float *a = c->A + i * c->lda, *b = c->B + j * c->ldb;
            float s = 0.0f;
            for (int64_t k = 0; k < c->K; k++) s = fmaf(a[k], b[k], s);
            finish_store(c, s, i, j);
        }
    ftz_leave(c, csr);
}

/* the instruction set every call on this machine uses (one per process: the same bits for every call) */
static int g_isa = -1;

static int best_isa(void) {
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
        return VC_GEMM_AVX512BF16;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return VC_GEMM_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VC_GEMM_AVX2;
    return VC_GEMM_SCALAR;
}

/* VERLC_GEMM_ISA=scalar|avx2|avx512|avx512bf16: a lower instruction set than the machine's best (benchmarks of another
 * machine's kernels; the same bits either way); a higher one than the machine has is ignored */
static int env_isa(int best) {
    const char *e = getenv("VERLC_GEMM_ISA");
    int isa = !e ? best : !strcmp(e, "scalar") ? VC_GEMM_SCALAR : !strcmp(e, "avx2") ? VC_GEMM_AVX2
                        : !strcmp(e, "avx512") ? VC_GEMM_AVX512 : !strcmp(e, "avx512bf16") ? VC_GEMM_AVX512BF16 : best;
    return isa < best ? isa : best;
}

int vc_infer_gemm_isa(void) {
    int v = __atomic_load_n(&g_isa, __ATOMIC_RELAXED);
    if (v < 0) {
        v = env_isa(best_isa());
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

/* B = W [N, K] (tb) a registered weight under bf16 matmuls (between vc_model_weight_copies' on and off): its bf16
 * copy, half the bytes of the f32 weights and not rounded again (the same values); else NULL */
static const uint16_t *b_copy(int r16, int isa, int tb, const float *B, int64_t N, int64_t K, int64_t ldb) {
    return r16 && tb && K > 0 && isa != VC_GEMM_SCALAR ? vc_cpu_bf16_copy_find(B, N, K, ldb) : NULL;
}

/* op(B)^T's N rows for the kernels (*lb their leading dimension): B itself where its bf16 copy B16 is read instead */
static float *b_rows(int tb, const float *B, const uint16_t *B16, int64_t ldb, int64_t N, int64_t K, int r16,
                     int64_t *lb) {
    if (!B16) return as_rows(!tb, B, ldb, N, K, r16, lb);
    *lb = ldb;
    return (float *)B;
}

/* M rows of op(A) from A in panels of P rows, each [K][width] with width = its rows rounded up to W (zeros past M),
 * panel p at At + p P K; rounded to bf16 when bf16 matmuls take it */
typedef struct {
    const float *A;
    float *At;
    int64_t M, K, lda, P, W;
    int ta, round, pairs; /* pairs: then as bf16 pairs (panel_pairs) */
} pack_ctx;

/* rows g.. of the panel (W of them, all real, op(A) = A) by W x W transposes in registers, rounded to bf16 when
 * `round` */
#define PACK_ROWS(PFX, ATTR, VT, W, LOAD, STORE, TR, ROUND)                                                     \
    ATTR static int64_t PFX##_pack(const float *src, int64_t lda, float *dst, int64_t width, int64_t K,         \
                                   int round) {                                                                 \
        int64_t k = 0;                                                                                          \
        for (; k + W <= K; k += W) {                                                                            \
            VT r[W];                                                                                            \
            for (int i = 0; i < W; i++) r[i] = LOAD(src + i * lda + k);                                         \
            TR(r);                                                                                              \
            if (round)                                                                                          \
                for (int q = 0; q < W; q++) r[q] = ROUND(r[q]);                                                 \
            for (int q = 0; q < W; q++) STORE(dst + (k + q) * width, r[q]);                                     \
        }                                                                                                       \
        return k;                                                                                               \
    }
PACK_ROWS(t512, AVX512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, transpose16, round16_512)
PACK_ROWS(avx, AVX, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, transpose8, round16_avx)

/* the same for op(A) = A^T (src: A's column g.., k's W values side by side in A's row k): copies, no transposes */
#define PACK_COLS(PFX, ATTR, VT, W, LOAD, STORE, ROUND)                                                         \
    ATTR static void PFX##_pack_t(const float *src, int64_t lda, float *dst, int64_t width, int64_t K, int round) { \
        for (int64_t k = 0; k < K; k++) {                                                                       \
            VT r = LOAD(src + k * lda);                                                                         \
            STORE(dst + k * width, round ? ROUND(r) : r);                                                       \
        }                                                                                                       \
    }
PACK_COLS(t512, AVX512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, round16_512)
PACK_COLS(avx, AVX, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, round16_avx)

VC_NO_ASAN static void pack_task(void *p, int64_t t) {
    const pack_ctx *c = p;
    int64_t i0 = t * c->P, rows = c->M - i0 < c->P ? c->M - i0 : c->P, width = (rows + c->W - 1) / c->W * c->W;
    float *dst = c->At + i0 * c->K;
    for (int64_t g = 0; g < width; g += c->W) { /* W rows at a time: each k's W values one whole stretch of dst */
        int64_t k = 0;
        if (!c->ta && g + c->W <= rows) {
            const float *src = c->A + (i0 + g) * c->lda;
            k = c->W == 16 ? t512_pack(src, c->lda, dst + g, width, c->K, c->round)
                           : avx_pack(src, c->lda, dst + g, width, c->K, c->round);
        } else if (c->ta && g + c->W <= rows) {
            if (c->W == 16) t512_pack_t(c->A + i0 + g, c->lda, dst + g, width, c->K, c->round);
            else avx_pack_t(c->A + i0 + g, c->lda, dst + g, width, c->K, c->round);
            k = c->K;
        }
        for (; k < c->K; k++)
            for (int64_t i = g; i < g + c->W; i++) {
                float v = i >= rows ? 0.0f : c->ta ? c->A[k * c->lda + i0 + i] : c->A[(i0 + i) * c->lda + k];
                dst[k * width + i] = c->round ? vc_bf16_to_f32(vc_f32_to_bf16(v)) : v;
            }
    }
    if (c->pairs) panel_pairs(dst, width, c->K);
}

/* the panel kernel over `rows` packed rows At (their C rows at C), B's rows in f32 (Br, leading dimension lb) or its
 * bf16 copy (B16) */
static void panels_run(int isa, const float *At, int64_t rows, int64_t N, int64_t K, float alpha, const float *Br,
                       const uint16_t *B16, int64_t lb, float beta, float *C, int64_t ldc, int64_t P, int64_t W,
                       int r16, int pairs) {
    gemm_ctx c = { .A = At, .B = Br, .B16 = B16, .C = C, .M = rows, .N = N, .K = K, .ldb = lb, .ldc = ldc, .P = P,
                   .W = W, .npanel = (rows + P - 1) / P, .alpha = alpha, .beta = beta, .ftz = r16 };
    c.nrb = (c.npanel + RB - 1) / RB;
    vc_parallel(c.nrb * ((N + NB - 1) / NB), pairs ? task_bf : isa >= VC_GEMM_AVX512 ? task_512 : task_avx, &c);
}

/* the panels as bf16 pairs for AVX-512 BF16's dot products: with a bf16 copy of B */
static int use_pairs(int isa, const uint16_t *B16) { return isa == VC_GEMM_AVX512BF16 && B16; }

/* op(A)'s rows i0.. (`rows` of them) packed into At as panels */
static void pack_panels(int ta, const float *A, int64_t lda, int64_t i0, int64_t rows, int64_t K, float *At, int64_t P,
                        int64_t W, int r16, int pairs) {
    pack_ctx pc = { .A = ta ? A + i0 : A + i0 * lda, .At = At, .M = rows, .K = K, .lda = lda, .P = P, .W = W,
                    .ta = ta, .round = r16, .pairs = pairs };
    vc_parallel((rows + P - 1) / P, pack_task, &pc);
}

/* the panel kernel over op(A)'s rows CHUNK_PANELS panels at a time (the packed copy of a chunk, not of all of A: a
 * long micro-batch's rows at K 4,864 would otherwise take as much again as A itself), B's rows read in place */
#define CHUNK_PANELS 16
static void gemm_panels(int isa, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, const uint16_t *B16, int64_t ldb, float beta, float *C,
                        int64_t ldc, int64_t P, int64_t W, int r16) {
    int64_t lb = ldb, mc = M < CHUNK_PANELS * P ? M : CHUNK_PANELS * P, cap = (mc + P - 1) / P * P * K;
    float *Br = b_rows(tb, B, B16, ldb, N, K, r16, &lb);
    float *At = Br ? vc_cpu_scratch((size_t)(cap > 0 ? cap : 1), sizeof(float), 0) : NULL; /* (whole panels) */
    for (int64_t i0 = 0; At && i0 < M; i0 += mc) {
        int64_t rows = M - i0 < mc ? M - i0 : mc;
        pack_panels(ta, A, lda, i0, rows, K, At, P, W, r16, use_pairs(isa, B16));
        panels_run(isa, At, rows, N, K, alpha, Br, B16, lb, beta, C + i0 * ldc, ldc, P, W, r16, use_pairs(isa, B16));
    }
    free(At);
    if (Br && Br != B) free(Br);
}

/* vc_infer_apack_new's packing: all of A's rows as panels, with the instruction set, panel size and bf16 rounding
 * they were packed for */
struct vc_infer_apack {
    int isa, r16, pairs; /* pairs: packed as bf16 pairs (AVX-512 BF16 under bf16 matmuls) */
    int64_t M, K, P, W;
    float *At;
    const float *A; /* (read again by a product whose B has no bf16 copy, where the panels hold pairs) */
    int64_t lda;
};

#define APACK_MAX_BYTES ((int64_t)256 << 20)
vc_infer_apack *vc_infer_apack_new(int64_t M, int64_t K, const float *A, int64_t lda) {
    int isa = vc_infer_gemm_isa();
    int64_t W = isa >= VC_GEMM_AVX512 ? 16 : 8, P = isa >= VC_GEMM_AVX512 ? 48 : 16;
    int64_t bytes = (M + P - 1) / P * P * K * (int64_t)sizeof(float);
    if (isa == VC_GEMM_SCALAR || M < W || K <= 0 || bytes > APACK_MAX_BYTES) return NULL;
    if (VC_ASAN) vc_asan_check_read(A, vc_matrix_bytes(M, K, lda));
    vc_infer_apack *a = malloc(sizeof *a);
    float *At = a ? malloc((size_t)bytes) : NULL;
    if (!At) {
        free(a);
        return NULL;
    }
    int r16 = vc_matmul_precision() == VC_PREC_BF16;
    *a = (vc_infer_apack){ isa, r16, r16 && isa == VC_GEMM_AVX512BF16, M, K, P, W, At, A, lda };
    pack_panels(0, A, lda, 0, M, K, At, P, W, a->r16, a->pairs);
    return a;
}

void vc_infer_gemm_apack(const vc_infer_apack *a, int64_t N, float alpha, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc) {
    if (N == 0) return;
    if (VC_ASAN) {
        vc_asan_check_read(B, vc_matrix_bytes(N, a->K, ldb));
        vc_asan_check_write(C, vc_matrix_bytes(a->M, N, ldc));
    }
    const uint16_t *B16 = b_copy(a->r16, a->isa, 1, B, N, a->K, ldb);
    if (a->pairs && !B16) { /* (pairs are for a copy's dot products) */
        vc_infer_gemm(0, 1, a->M, N, a->K, alpha, a->A, a->lda, B, ldb, beta, C, ldc);
        return;
    }
    int64_t lb = ldb;
    float *Br = b_rows(1, B, B16, ldb, N, a->K, a->r16, &lb);
    if (Br) panels_run(a->isa, a->At, a->M, N, a->K, alpha, Br, B16, lb, beta, C, ldc, a->P, a->W, a->r16, a->pairs);
    if (Br && Br != B) free(Br);
}

void vc_infer_apack_free(vc_infer_apack *a) {
    if (a) free(a->At);
    free(a);
}

/* the column kernel's M rows (rounded to bf16, leading dimension lda) as [M][K / 2] pairs, k's bf16 high (NULL: no
 * memory, recorded for the sync) */
static uint32_t *row_pairs(const float *A, int64_t lda, int64_t M, int64_t K) {
    uint32_t *p = vc_cpu_scratch((size_t)(M * (K / 2) > 0 ? M * (K / 2) : 1), sizeof *p, 0);
    for (int64_t i = 0; p && i < M; i++)
        for (int64_t q = 0; q < K / 2; q++) {
            uint32_t e, o;
            memcpy(&e, A + i * lda + 2 * q, 4);
            memcpy(&o, A + i * lda + 2 * q + 1, 4);
            p[i * (K / 2) + q] = (e & 0xffff0000u) | o >> 16;
        }
    return p;
}

void vc_infer_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (VC_ASAN) { /* the tiles' loads and stores are not checked one by one */
        vc_asan_check_read(A, ta ? vc_matrix_bytes(K, M, lda) : vc_matrix_bytes(M, K, lda));
        vc_asan_check_read(B, tb ? vc_matrix_bytes(N, K, ldb) : vc_matrix_bytes(K, N, ldb));
        vc_asan_check_write(C, vc_matrix_bytes(M, N, ldc));
    }
    /* C = op(A) op(B): B is read as the rows of op(B)^T */
    int r16 = vc_matmul_precision() == VC_PREC_BF16, isa = vc_infer_gemm_isa();
    int64_t W = isa >= VC_GEMM_AVX512 ? 16 : 8, P = isa >= VC_GEMM_AVX512 ? 48 : 16, la = 0, lb = 0;
    const uint16_t *B16 = b_copy(r16, isa, tb, B, N, K, ldb);
    uint16_t *Bp = NULL; /* AVX-512 BF16 without a registered copy: one for this product (else the same bits by fma) */
    if (!B16 && r16 && isa == VC_GEMM_AVX512BF16 && K > 0 && (Bp = vc_cpu_bf16_pairs(tb, B, ldb, N, K)) == NULL)
        vc_clear_error();
    if (Bp) B16 = Bp;
    if (isa != VC_GEMM_SCALAR && M >= W) { /* (fewer rows: the column kernel) */
        gemm_panels(isa, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, C, ldc, P, W, r16);
        free(Bp);
        return;
    }
    float *Ar = as_rows(ta, A, lda, M, K, r16, &la), *Br = Ar ? b_rows(tb, B, B16, ldb, N, K, r16, &lb) : NULL;
    uint32_t *Ap = Ar && Br && use_pairs(isa, B16) ? row_pairs(Ar, la, M, K) : NULL;
    if (Ar && Br && (Ap || !use_pairs(isa, B16))) {
        gemm_ctx c = { .A = Ar, .B = Br, .B16 = B16, .C = C, .M = M, .N = N, .K = K, .lda = la, .ldb = lb, .ldc = ldc, .W = W,
                       .alpha = alpha, .beta = beta, .ftz = r16, .Ap = Ap, .lap = K / 2 };
        if (isa != VC_GEMM_SCALAR) vc_parallel((N + NB_COL - 1) / NB_COL, task_col, &c);
        else vc_parallel((N + NB - 1) / NB, task_scalar, &c);
    }
    free(Ap);
    free(Bp);
    if (Ar && Ar != A) free(Ar);
    if (Br && Br != B) free(Br);
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
