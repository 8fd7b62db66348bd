/* MoE grouping and the grouped expert GEMMs on the CPU: the grouping is a stable counting sort of the routed choices,
 * and each group's GEMM is the plain gemm (or gemm_b16) call on its rows, so the results are those of a loop over
 * experts. */
#include "cpu.h"
#include <string.h>

static int64_t clamp_id(int32_t id, int64_t E) { return id < 0 ? 0 : id >= E ? E - 1 : id; }

void vc_cpu_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E) {
    int64_t n = T * K;
    int64_t *fill = vc_cpu_scratch((size_t)(E > 0 ? E : 1), sizeof(int64_t), 0); /* (a failure is recorded for sync) */
    if (!fill || E <= 0) {
        free(fill);
        return;
    }
    memset(off, 0, sizeof(int64_t) * (size_t)(E + 1));
    for (int64_t i = 0; i < n; i++) off[clamp_id(ids[i], E) + 1]++;
    for (int64_t e = 0; e < E; e++) off[e + 1] += off[e];
    memcpy(fill, off, sizeof(int64_t) * (size_t)E);
    for (int64_t i = 0; i < n; i++) { /* choices in order: tokens ascending within each expert */
        int64_t r = fill[clamp_id(ids[i], E)]++;
        tok[r] = i / K;
        inv[i] = r;
    }
    free(fill);
}

void vc_gemm_rows_grouped_via(vc_gemm_fn gemm, int tb, int64_t E, const int64_t *off, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc) {
    size_t asz = a16 ? 2 : 4;
    for (int64_t e = 0; e < E; e++) {
        int64_t r0 = off[e], m = off[e + 1] - r0;
        if (m <= 0) continue;
        vc_gemm_b16_via(gemm, 0, tb, m, N, K, alpha, (const char *)A + (size_t)(r0 * lda) * asz, a16, lda,
                        B + e * N * K, 0, tb ? K : N, beta, C + r0 * ldc, ldc);
    }
}

void vc_cpu_gemm_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc) {
    (void)R;
    vc_gemm_rows_grouped_via(vc_cpu_gemm, tb, E, off, N, K, alpha, A, a16, lda, B, beta, C, ldc);
}

void vc_cpu_gemm_wgrad_grouped(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                               int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C) {
    size_t bsz = b16 ? 2 : 4;
    for (int64_t e = 0; e < E; e++) {
        int64_t r0 = off[e], m = off[e + 1] - r0;
        float *Ce = C + e * M * N;
        if (m > 0)
            vc_gemm_b16_via(vc_cpu_gemm, 1, 0, M, N, m, alpha, A + r0 * lda, 0, lda,
                            (const char *)B + (size_t)(r0 * ldb) * bsz, b16, ldb, beta, Ce, N);
        else if (beta != 1.0f)
            for (int64_t i = 0; i < M * N; i++) Ce[i] = beta == 0.0f ? 0.0f : beta * Ce[i];
    }
}

void vc_cpu_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C) {
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = off[e]; r < off[e + 1]; r++)
            for (int64_t c = 0; c < C; c++) Y[r * C + c] += b[e * C + c];
}

void vc_cpu_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C) {
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = off[e]; r < off[e + 1]; r++)
            for (int64_t c = 0; c < C; c++) db[e * C + c] += dY[r * C + c];
}
