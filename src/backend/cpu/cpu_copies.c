/* bf16 copies of weight matrices on the CPU (vc_model_weight_copies with bf16 matmuls): each registered weight
 * rounded to bf16 once, kept as 2 bytes an element, and read by the row-invariant GEMM wherever a product's B
 * operand is one of them or a run of its rows from a multiple of 16 at its leading dimension (a linear's weight, an
 * LM head's vocabulary slice, an expert's matrix). Without them every product rounded its f32 weights again (a
 * decode step read 4 bytes an element, wrote a rounded copy and read that: a 0.5B model decoded 8 times slower in
 * bf16 than in f32); with them it reads 2.
 *
 * The copy's layout (VC_B16_LANES = 16): the rows in groups of 16 (zeros past the last), each group [K / 2][16][2]
 * with K rounded up to even (a zero past the last column): the elements (r, 2p) and (r, 2p + 1) in one 32-bit word,
 * (r, 2p) its high half and (r, 2p + 1) its low half (the order in which AVX-512 BF16's dot product adds them), the
 * group's 16 rows' pairs for one p in one 64-byte stretch. The GEMM's lanes run over 16 (8) rows of B, the output's
 * columns: one load gives k's and k + 1's values for 16 columns (the high and low halves of 32-bit lanes), with no
 * transposes, and a panel tile's 8 columns read one stretch a pair of k. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/bf16_round.h"
#include "infer/infer.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include <string.h>
typedef struct {
    const float *w; /* the registered weight (rows x cols floats, row-major) */
    int64_t rows, cols;
    uint16_t *h; /* its bf16 copy */
} bf16_copy;

static bf16_copy *g_copies; /* sorted by w */
static int g_n;
static int64_t g_hits;
/* the copies' memory, one block kept from a drop to the next add of a like size (a model's next call, step or pass:
 * fresh pages cost a fault and a zeroing each, 1 GB of them for a 0.5B model's copies); counted as available
 * memory while no copies live (vc_cpu_bf16_copies_spare), as the GPU's pool counts what it keeps */
static uint16_t *g_block;
static size_t g_block_bytes;

size_t vc_cpu_bf16_copies_spare(void) { return g_n ? 0 : g_block_bytes; }

void vc_cpu_bf16_copies_release(void) {
    if (g_n) return; /* (live: a call is using them) */
    free(g_block);
    g_block = NULL;
    g_block_bytes = 0;
}

void vc_cpu_bf16_copies_drop(void) {
    free(g_copies);
    g_copies = NULL;
    g_n = 0;
    __atomic_store_n(&g_hits, 0, __ATOMIC_RELAXED); /* (served since the last add: none once they are gone) */
}

int64_t vc_cpu_bf16_copies_hits(void) { return __atomic_load_n(&g_hits, __ATOMIC_RELAXED); }

static int by_address(const void *a, const void *b) {
    const float *x = ((const bf16_copy *)a)->w, *y = ((const bf16_copy *)b)->w;
    return x < y ? -1 : x > y;
}

/* the groups of 16 rows, 4 a task (each copy's first task in first[]), rounded by the row-invariant GEMM's
 * instruction set: the bits of vc_f32_to_bf16 */
#define GROUPS_PER_TASK 4
typedef struct {
    const bf16_copy *c;
    const int64_t *first; /* copy i's first task */
    int n;
} round_ctx;

__attribute__((target("avx512f,avx2,fma"))) VC_NO_ASAN static int64_t to_bf16_512(const float *x, uint16_t *y,
                                                                                   int64_t n) {
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m512i u = _mm512_srli_epi32(_mm512_castps_si512(round16_512(_mm512_loadu_ps(x + k))), 16);
        _mm256_storeu_si256((__m256i *)(y + k), _mm512_cvtepi32_epi16(u));
    }
    return k;
}

__attribute__((target("avx2,fma"))) VC_NO_ASAN static int64_t to_bf16_avx(const float *x, uint16_t *y, int64_t n) {
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256i u = _mm256_srli_epi32(_mm256_castps_si256(round16_avx(_mm256_loadu_ps(x + k))), 16);
        _mm_storeu_si128((__m128i *)(y + k), _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)));
    }
    return k;
}

/* a row's K values rounded into y (K rounded up to even: a zero past the last) */
static void round_row16(const float *x, uint16_t *y, int64_t K) {
    int isa = vc_infer_gemm_isa();
    int64_t k = isa >= VC_GEMM_AVX512 ? to_bf16_512(x, y, K) : isa == VC_GEMM_AVX2 ? to_bf16_avx(x, y, K) : 0;
    for (; k < K; k++) y[k] = vc_f32_to_bf16(x[k]);
    if (K % 2) y[K] = 0;
}

/* the bf16 elements copy c takes: its groups of 16 rows of K rounded up to even */
static size_t copy_elems(int64_t rows, int64_t cols) {
    return (size_t)((rows + VC_B16_LANES - 1) / VC_B16_LANES) * VC_B16_LANES * (size_t)vc_b16_even(cols);
}

/* its bytes in the copies' block: 64-byte aligned, with 64 bytes behind it (a group's pairs of k: 64 bytes) */
static size_t copy_bytes(int64_t rows, int64_t cols) { return (copy_elems(rows, cols) * 2 + 63) / 64 * 64 + 64; }

/* groups g0 .. g1 of w's rows (rows x K at leading dimension ld) into h in the copy's layout; 0: no scratch memory
 * (recorded for the sync) */
static int groups_of_rows(const float *w, int64_t ld, int64_t rows, int64_t K, int64_t g0, int64_t g1, uint16_t *h) {
    int64_t Kp = vc_b16_even(K);
    uint16_t *row = vc_cpu_scratch((size_t)Kp, sizeof *row, 0);
    if (!row) return 0;
    for (int64_t g = g0; g < g1; g++) {
        uint32_t *dst = (uint32_t *)(h + g * Kp * VC_B16_LANES); /* [Kp / 2][16] pairs */
        for (int l = 0; l < VC_B16_LANES; l++) {
            int64_t rr = g * VC_B16_LANES + l;
            if (rr < rows) round_row16(w + rr * ld, row, K);
            else memset(row, 0, (size_t)Kp * sizeof *row);
            for (int64_t q = 0; q < Kp / 2; q++) /* k in the high half, k + 1 in the low (AVX-512 BF16's order) */
                dst[q * VC_B16_LANES + l] = (uint32_t)row[2 * q] << 16 | row[2 * q + 1];
        }
    }
    free(row);
    return 1;
}

static void round_task(void *p, int64_t t) {
    const round_ctx *r = p;
    int i = 0;
    while (i + 1 < r->n && r->first[i + 1] <= t) i++;
    const bf16_copy *c = &r->c[i];
    int64_t groups = (c->rows + VC_B16_LANES - 1) / VC_B16_LANES;
    int64_t g0 = (t - r->first[i]) * GROUPS_PER_TASK, g1 = g0 + GROUPS_PER_TASK < groups ? g0 + GROUPS_PER_TASK : groups;
    groups_of_rows(c->w, c->cols, c->rows, c->cols, g0, g1, c->h);
}

/* ---- a product's operand in the copy's layout, made for one call (vc_cpu_bf16_pairs) ---- */
typedef struct {
    const float *B;
    int64_t ld, n, k;
    int tb;
    uint16_t *h;
} pairs_ctx;

/* group g of B's columns (B [k][n]): the pair q's 16 lanes from rows 2q and 2q + 1, one vector each */
__attribute__((target("avx512f,avx2,fma"))) VC_NO_ASAN static void group_of_columns(const pairs_ctx *c, int64_t g) {
    int64_t j0 = g * VC_B16_LANES, nc = c->n - j0 < VC_B16_LANES ? c->n - j0 : VC_B16_LANES, Kp = vc_b16_even(c->k);
    __mmask16 m = (__mmask16)((1u << nc) - 1);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    uint32_t *dst = (uint32_t *)(c->h + g * Kp * VC_B16_LANES);
    for (int64_t q = 0; q < Kp / 2; q++) {
        __m512 e = round16_512(_mm512_maskz_loadu_ps(m, c->B + 2 * q * c->ld + j0));
        __m512 o = 2 * q + 1 < c->k ? round16_512(_mm512_maskz_loadu_ps(m, c->B + (2 * q + 1) * c->ld + j0))
                                    : _mm512_setzero_ps();
        __m512i w = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(e), hi),
                                    _mm512_srli_epi32(_mm512_castps_si512(o), 16));
        _mm512_storeu_si512(dst + q * VC_B16_LANES, w);
    }
}

static void pairs_task(void *p, int64_t t) {
    const pairs_ctx *c = p;
    int64_t groups = (c->n + VC_B16_LANES - 1) / VC_B16_LANES;
    int64_t g0 = t * GROUPS_PER_TASK, g1 = g0 + GROUPS_PER_TASK < groups ? g0 + GROUPS_PER_TASK : groups;
    if (c->tb) groups_of_rows(c->B, c->ld, c->n, c->k, g0, g1, c->h);
    else
        for (int64_t g = g0; g < g1; g++) group_of_columns(c, g);
}

uint16_t *vc_cpu_bf16_pairs(int tb, const float *B, int64_t ld, int64_t n, int64_t k) {
    uint16_t *h = aligned_alloc(64, copy_bytes(n, k));
    if (!h) {
        vc_fail(VC_ERR_NOMEM, "cpu: bf16 pairs of a %lld x %lld operand: no memory", (long long)n, (long long)k);
        return NULL;
    }
    pairs_ctx c = { B, ld, n, k, tb, h };
    int64_t groups = (n + VC_B16_LANES - 1) / VC_B16_LANES;
    vc_parallel((groups + GROUPS_PER_TASK - 1) / GROUPS_PER_TASK, pairs_task, &c);
    if (vc_cpu_sync() != VC_OK) { /* a task without scratch memory left its groups unwritten */
        free(h);
        return NULL;
    }
    return h;
}

vc_status vc_cpu_bf16_copies_add(const float *const *w, const int64_t *rows, const int64_t *cols, int n) {
    vc_cpu_bf16_copies_drop();
    bf16_copy *c = calloc((size_t)(n > 0 ? n : 1), sizeof *c);
    int64_t *first = malloc((size_t)(n + 1) * sizeof *first);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += copy_bytes(rows[i], cols[i]);
    if (g_block && (g_block_bytes < total || g_block_bytes / 2 > total)) { /* (too small, or twice the need) */
        free(g_block);
        g_block = NULL;
        g_block_bytes = 0;
    }
    if (!g_block && total && (g_block = aligned_alloc(64, total))) g_block_bytes = total;
    int ok = c && first && (g_block || !total);
    for (size_t i = 0, off = 0; ok && i < (size_t)n; i++) {
        c[i] = (bf16_copy){ w[i], rows[i], cols[i], (uint16_t *)((char *)g_block + off) };
        off += copy_bytes(rows[i], cols[i]);
    }
    if (!ok) {
        free(c);
        free(first);
        return vc_fail(VC_ERR_NOMEM, "cpu: bf16 weight copies: no memory for %d matrices", n);
    }
    qsort(c, (size_t)n, sizeof *c, by_address);
    first[0] = 0;
    for (int i = 0; i < n; i++) {
        int64_t groups = c[i].cols > 0 ? (c[i].rows + VC_B16_LANES - 1) / VC_B16_LANES : 0;
        first[i + 1] = first[i] + (groups + GROUPS_PER_TASK - 1) / GROUPS_PER_TASK;
    }
    round_ctx r = { c, first, n };
    if (first[n] > 0) vc_parallel(first[n], round_task, &r);
    free(first);
    g_copies = c;
    g_n = n;
    __atomic_store_n(&g_hits, 0, __ATOMIC_RELAXED);
    vc_status st = vc_cpu_sync(); /* a task without scratch memory left its groups unwritten */
    if (st) vc_cpu_bf16_copies_drop();
    return st;
}

const uint16_t *vc_cpu_bf16_copy_find(const float *p, int64_t rows, int64_t cols, int64_t ld) {
    int lo = 0, hi = g_n - 1;
    while (lo < hi) { /* the last copy starting at or before p */
        int mid = (lo + hi + 1) / 2;
        if (g_copies[mid].w <= p) lo = mid;
        else hi = mid - 1;
    }
    if (!g_n || g_copies[lo].w > p) return NULL;
    const bf16_copy *c = &g_copies[lo];
    uintptr_t bytes = (uintptr_t)p - (uintptr_t)c->w; /* (p may lie in another allocation) */
    uintptr_t off = bytes / sizeof(float), row = c->cols > 0 ? off / (uintptr_t)c->cols : 0;
    if (bytes % sizeof(float) || ld != c->cols || cols != c->cols || cols <= 0 || off % (uintptr_t)c->cols ||
        row % VC_B16_LANES || row >= (uintptr_t)c->rows || rows > c->rows - (int64_t)row)
        return NULL;
    __atomic_add_fetch(&g_hits, 1, __ATOMIC_RELAXED);
    return c->h + row * (uintptr_t)vc_b16_even(c->cols);
}
