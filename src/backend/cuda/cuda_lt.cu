/* A linear's bias in its GEMM's epilogue through cuBLASLt (D = alpha op(A) op(B) + bias, the bias per output feature),
 * as PyTorch's addmm does for a bf16 linear: no copy of the bias broadcast into C first and no read of C back (cuBLAS's
 * beta = 1). One plan per shape, alignment and transposes: the matmul descriptor, the layouts and the algorithm
 * cuBLASLt's heuristic ranks first (the same on every call and run, so the same bits; not a timed search), kept for the
 * process. A shape with no algorithm, or no cuBLASLt, gets 0 and its caller adds the bias itself. */
#include "cuda_internal.h"
#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>

namespace {
struct lt_plan {
    int ta, tb, align;
    int64_t M, N, K, lda, ldb, ldc;
    int ok; /* 1: algo usable; 0: no algorithm for it (the caller's path) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
};
} // namespace

#define LT_PLANS 256
static lt_plan g_plans[LT_PLANS];
static int g_nplans, g_lt_state; /* 0: not tried, 1: handle made, -1: no cuBLASLt */
static cublasLtHandle_t g_lt;

/* the largest power of two (up to 256) dividing every address */
static int align_of(const void *a, const void *b, const void *c, const void *d) {
    uintptr_t x = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | 256;
    return (int)(x & (~x + 1));
}

static void plan_free(lt_plan *p) {
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    *p = lt_plan{};
}

void vc_cu_lt_release(void) {
    for (int i = 0; i < g_nplans; i++) plan_free(&g_plans[i]);
    g_nplans = 0;
    if (g_lt_state == 1) cublasLtDestroy(g_lt);
    g_lt_state = 0;
}

/* column-major, as cuBLAS sees the row-major product (C^T = op(B)^T op(A)^T): its A is our B, its m our N, its n our M;
 * bias: the bias epilogue (f32 bias) */
static int plan_layouts(lt_plan *p, int bias) {
    cublasOperation_t opa = p->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = p->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cudaDataType_t bias_t = CUDA_R_32F;
    int32_t ta = opa, tb = opb;
    uint64_t m = (uint64_t)p->N, n = (uint64_t)p->M, k = (uint64_t)p->K;
    if (cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) != CUBLAS_STATUS_SUCCESS ||
        (bias && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, sizeof bias_t) !=
                     CUBLAS_STATUS_SUCCESS))
        return 0;
    return cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, opa == CUBLAS_OP_N ? m : k, opa == CUBLAS_OP_N ? k : m,
                                      p->ldb) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, opb == CUBLAS_OP_N ? k : n, opb == CUBLAS_OP_N ? n : k,
                                      p->lda) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, m, n, p->ldc) == CUBLAS_STATUS_SUCCESS;
}

/* the first `want` algorithms cuBLASLt's heuristic ranks for the plan's layouts (up to ws_bytes of workspace, the
 * plan's alignment); how many, 0 for none */
static int plan_ranked(lt_plan *p, size_t ws_bytes, int want, cublasLtMatmulHeuristicResult_t *r) {
    cublasLtMatmulPreference_t pref = NULL;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return 0;
    uint32_t al = (uint32_t)p->align;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    int got = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_lt, p->desc, p->a, p->b, p->c, p->c, pref, want, r, &got);
    cublasLtMatmulPreferenceDestroy(pref);
    return s == CUBLAS_STATUS_SUCCESS ? got : 0;
}

static int plan_make(lt_plan *p, size_t ws_bytes) {
    cublasLtMatmulHeuristicResult_t r = {};
    if (!plan_layouts(p, 1) || plan_ranked(p, ws_bytes, 1, &r) < 1 || r.state != CUBLAS_STATUS_SUCCESS ||
        r.workspaceSize > ws_bytes)
        return 0;
    p->algo = r.algo;
    p->ws = r.workspaceSize;
    return 1;
}

static int lt_ready(void) {
    if (g_lt_state == 0) g_lt_state = cublasLtCreate(&g_lt) == CUBLAS_STATUS_SUCCESS ? 1 : -1;
    return g_lt_state > 0;
}

static lt_plan *plan_for(const lt_plan *key, size_t ws_bytes) {
    for (int i = 0; i < g_nplans; i++) {
        const lt_plan *p = &g_plans[i];
        if (p->ta == key->ta && p->tb == key->tb && p->align == key->align && p->M == key->M && p->N == key->N &&
            p->K == key->K && p->lda == key->lda && p->ldb == key->ldb && p->ldc == key->ldc)
            return &g_plans[i];
    }
    if (g_nplans == LT_PLANS) return NULL; /* shapes beyond the table: the caller's path */
    lt_plan *p = &g_plans[g_nplans++];
    *p = *key;
    if (!plan_make(p, ws_bytes)) {
        cudaGetLastError(); /* not sticky */
        plan_free(p);
        *p = *key; /* remembered as unusable */
        p->ok = 0;
        return p;
    }
    p->ok = 1;
    return p;
}

int vc_cu_lt_gemm_bias(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda,
                       const void *B, int64_t ldb, const float *bias, float *C, int64_t ldc, void *ws, size_t ws_bytes) {
    const char *env = getenv("VERLC_CUDA_LT"); /* 0: the bias copied into C, then beta = 1 (comparisons) */
    if ((env && *env == '0') || !lt_ready()) return 0;
    lt_plan key = {};
    key.ta = ta, key.tb = tb, key.M = M, key.N = N, key.K = K, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.align = align_of(A, B, C, bias);
    lt_plan *p = plan_for(&key, ws ? ws_bytes : 0);
    if (!p || !p->ok) return 0;
    const float beta = 0.0f;
    cublasStatus_t st = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(g_lt, p->desc, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &p->algo, ws, p->ws,
                            vc_cu_stream());
    if (st != CUBLAS_STATUS_SUCCESS) { /* refused when called (nothing queued): this shape takes the caller's path */
        cudaGetLastError();
        p->ok = 0;
        return 0;
    }
    return 1;
}

/* bench gemm: C (f32, M x N) = A (M x K) B^T (B: N x K), bf16, row-major and packed, with each of the first `want`
 * (up to 16) algorithms cuBLASLt's heuristic ranks for it: ms[i] the best of `iters` calls of algorithm i (-1: refused
 * when called). How many it ranked (0: none, or no cuBLASLt); -1 with the sticky error set on a CUDA error. */
int vc_cu_lt_algo_times(int64_t M, int64_t N, int64_t K, const void *A, const void *B, float *C, void *ws,
                        size_t ws_bytes, int want, int iters, double *ms) {
    const char *op = "gemm algorithms";
    cublasLtMatmulHeuristicResult_t r[16];
    if (want > 16) want = 16;
    if (!lt_ready() || want < 1) return 0;
    lt_plan p = {};
    p.ta = 0, p.tb = 1, p.M = M, p.N = N, p.K = K, p.lda = K, p.ldb = K, p.ldc = N;
    p.align = align_of(A, B, C, C);
    const int got = plan_layouts(&p, 0) ? plan_ranked(&p, ws ? ws_bytes : 0, want, r) : 0;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int ok = got > 0 && vc_cu_ok(cudaEventCreate(&e0), op) && vc_cu_ok(cudaEventCreate(&e1), op);
    const float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; ok && i < got; i++) {
        ms[i] = -1;
        if (r[i].state != CUBLAS_STATUS_SUCCESS || r[i].workspaceSize > (ws ? ws_bytes : 0)) continue;
        for (int it = 0; ok && it <= iters; it++) { /* the first call warms up */
            ok = vc_cu_ok(cudaEventRecord(e0, vc_cu_stream()), op);
            cublasStatus_t st = cublasLtMatmul(g_lt, p.desc, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &r[i].algo,
                                               ws, r[i].workspaceSize, vc_cu_stream());
            if (st != CUBLAS_STATUS_SUCCESS) {
                cudaGetLastError();
                ms[i] = -1;
                break;
            }
            float t = 0;
            ok = ok && vc_cu_ok(cudaEventRecord(e1, vc_cu_stream()), op) && vc_cu_ok(cudaEventSynchronize(e1), op) &&
                 vc_cu_ok(cudaEventElapsedTime(&t, e0, e1), op);
            if (ok && it > 0 && (ms[i] < 0 || t < ms[i])) ms[i] = t;
        }
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    plan_free(&p);
    return ok ? got : (got > 0 ? -1 : 0);
}
