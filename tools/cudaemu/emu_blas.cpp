/* verlc CUDA emulator: cublasSgemm and cublasGemmEx (f32 or bf16 inputs, f32 or bf16 output, f32 compute), queued
 * like kernels and run by OpenBLAS. bf16 operands are widened to f32 exactly, so a GemmEx is the f32
 * product of the bf16 values. Operand ranges are checked against the live device allocations. cuBLASLt's
 * matmul with the bias epilogue (the descriptors verlc sets; its heuristic offers one algorithm) is the same GEMM,
 * then the bias added to each row of D. */
#include "cublasLt.h"
#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "emu_internal.h"
#include <cblas.h>
#include <memory>
#include <stdio.h>
#include <string.h>
#include <vector>

struct vc_emu_blas {
    cudaStream_t stream;
    int math;
};

extern "C" {
cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new vc_emu_blas{ 0, 0 };
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    vc_emu_flush();
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *, size_t) { return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_EXECUTION_FAILED";
    }
}
}

static size_t elem_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

/* a column-major operand of rows x cols with leading dimension ld lies in one allocation */
static int operand_ok(const char *call, const char *name, const void *p, cudaDataType t, int rows, int cols, int ld) {
    if (ld < (rows > 1 ? rows : 1)) {
        fprintf(stderr, "cuda emulator: %s: ld%s=%d < %d rows\n", call, name, ld, rows);
        return 0;
    }
    if (!rows || !cols) return 1;
    size_t bytes = ((size_t)ld * (size_t)(cols - 1) + (size_t)rows) * elem_size(t);
    if (!vc_emu_dev_range(p, bytes)) {
        fprintf(stderr, "cuda emulator: %s: operand %s (%p, %d x %d, ld %d) is not inside one device allocation\n", call, name,
                p, rows, cols, ld);
        return 0;
    }
    return 1;
}

/* f32 copy (packed, ld = rows) of a bf16 or f32 column-major operand */
static std::vector<float> widen(const void *p, cudaDataType t, int rows, int cols, int ld) {
    std::vector<float> out((size_t)rows * cols);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            size_t i = (size_t)c * ld + r;
            out[(size_t)c * rows + r] = t == CUDA_R_32F ? ((const float *)p)[i] : (float)((const __nv_bfloat16 *)p)[i];
        }
    return out;
}

/* column-major C (f32) = alpha op(A) op(B) + beta C (OpenBLAS on f32 copies of A and B) */
static void run_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void *A,
                     cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, float beta, float *C, int ldc) {
    int ar = ta == CUBLAS_OP_N ? m : k, br = tb == CUBLAS_OP_N ? k : n;
    if (beta == 0.0f) /* C is not read when beta is 0 (it may hold NaN) */
        for (int c = 0; c < n; c++) memset(C + (size_t)c * ldc, 0, sizeof(float) * (size_t)m);
    if (!k) {
        for (int c = 0; c < n; c++)
            for (int r = 0; r < m; r++) C[(size_t)c * ldc + r] *= beta;
        return;
    }
    std::vector<float> a = widen(A, at, ar, ta == CUBLAS_OP_N ? k : m, lda), b = widen(B, bt, br, tb == CUBLAS_OP_N ? n : k, ldb);
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                m, n, k, alpha, a.data(), ar, b.data(), br, beta == 0.0f ? 0.0f : beta, C, ldc);
}

/* C (ct: f32, or bf16 rounded once from the f32 result) = alpha op(A) op(B) + beta C */
static cublasStatus_t gemm(const char *call, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           int k, float alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                           int ldb, float beta, void *Cv, int ldc, cudaDataType ct = CUDA_R_32F) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!m || !n) return CUBLAS_STATUS_SUCCESS;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (!operand_ok(call, "A", A, at, ar, ac, lda) || !operand_ok(call, "B", B, bt, br, bc, ldb) ||
        !operand_ok(call, "C", Cv, ct, m, n, ldc))
        return CUBLAS_STATUS_INVALID_VALUE;
    vc_emu_count(VC_EMU_GEMM);
    vc_emu_enqueue_on(h->stream, [=]() {
        if (ct == CUDA_R_32F) {
            run_gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, (float *)Cv, ldc);
            return;
        }
        std::vector<float> c = widen(Cv, ct, m, n, ldc); /* a bf16 C's f32 image (ld m), rounded back at the end */
        run_gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, c.data(), m);
        for (int j = 0; j < n; j++)
            for (int r = 0; r < m; r++) ((__nv_bfloat16 *)Cv)[(size_t)j * ldc + r] = __float2bfloat16_rn(c[(size_t)j * m + r]);
    });
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    return gemm("cublasSgemm", h, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, ldc);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
    if ((ct != CUDA_R_32F && ct != CUDA_R_16BF) || compute != CUBLAS_COMPUTE_32F ||
        (at != CUDA_R_16BF && at != CUDA_R_32F) || at != bt)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm("cublasGemmEx", h, ta, tb, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb, *(const float *)beta,
                C, ldc, ct);
}
}

/* ---- cuBLASLt ---- */
struct vc_emu_blaslt {
    int unused;
};
struct vc_emu_lt_desc {
    cublasComputeType_t compute;
    int32_t ta, tb;
    uint32_t epilogue;
    const float *bias;
    int32_t bias_type;
};
struct vc_emu_lt_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};
struct vc_emu_lt_pref {
    int unused;
};

template <typename T> static cublasStatus_t put_attr(T *dst, const void *buf, size_t n) {
    if (!buf || n != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(dst, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

/* the descriptors verlc's plan uses: bf16 or f32 A and B of one type, f32 C = D, f32 compute, bias epilogue or none */
static int lt_supported(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                        cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd) {
    if (!d || !a || !b || !c || !dd || c != dd || d->compute != CUBLAS_COMPUTE_32F) return 0;
    if (a->type != b->type || (a->type != CUDA_R_16BF && a->type != CUDA_R_32F) || c->type != CUDA_R_32F) return 0;
    if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_BIAS) return 0;
    uint64_t m = c->rows, n = c->cols, k = d->ta == CUBLAS_OP_N ? a->cols : a->rows;
    return (d->ta == CUBLAS_OP_N ? a->rows : a->cols) == m && (d->tb == CUBLAS_OP_N ? b->rows : b->cols) == k &&
           (d->tb == CUBLAS_OP_N ? b->cols : b->rows) == n;
}

extern "C" {
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = new vc_emu_blaslt{ 0 };
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    vc_emu_flush();
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t) {
    *d = new vc_emu_lt_desc{ compute, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, NULL, -1 };
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t n) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return put_attr(&d->ta, buf, n);
    case CUBLASLT_MATMUL_DESC_TRANSB: return put_attr(&d->tb, buf, n);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return put_attr(&d->epilogue, buf, n);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return put_attr(&d->bias, buf, n);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return put_attr(&d->bias_type, buf, n);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (ld < (int64_t)(rows > 1 ? rows : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new vc_emu_lt_layout{ type, rows, cols, ld };
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new vc_emu_lt_pref{ 0 };
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t,
                                                    const void *buf, size_t) {
    return p && buf ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int n,
                                              cublasLtMatmulHeuristicResult_t r[], int *got) {
    if (!h || !p || n <= 0 || !r || !got) return CUBLAS_STATUS_INVALID_VALUE;
    *got = 0;
    if (!lt_supported(d, a, b, c, dd)) return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(&r[0], 0, sizeof r[0]);
    r[0].algo.data[0] = 1; /* the one algorithm: OpenBLAS */
    r[0].state = CUBLAS_STATUS_SUCCESS;
    r[0].wavesCount = 1.0f;
    *got = 1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t, cudaStream_t s) {
    if (!h || !algo || algo->data[0] != 1 || C != D || !lt_supported(d, a, b, c, dd)) return CUBLAS_STATUS_INVALID_VALUE;
    int m = (int)c->rows, n = (int)c->cols, k = (int)(d->ta == CUBLAS_OP_N ? a->cols : a->rows);
    const float *bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS ? d->bias : NULL;
    if (d->epilogue == CUBLASLT_EPILOGUE_BIAS &&
        (!bias || (d->bias_type != -1 && d->bias_type != CUDA_R_32F) || !vc_emu_dev_range(bias, sizeof(float) * (size_t)m))) {
        fprintf(stderr, "cuda emulator: cublasLtMatmul: the bias (%p, %d floats) is not f32 device memory\n",
                (const void *)bias, m);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vc_emu_blas blas{ s, 0 };
    cublasStatus_t st = gemm("cublasLtMatmul", &blas, (cublasOperation_t)d->ta, (cublasOperation_t)d->tb, m, n, k,
                             *(const float *)alpha, A, a->type, (int)a->ld, B, b->type, (int)b->ld, *(const float *)beta,
                             (float *)D, (int)c->ld);
    if (st != CUBLAS_STATUS_SUCCESS || !bias || !m || !n) return st;
    float *out = (float *)D;
    int64_t ld = c->ld;
    vc_emu_enqueue_on(s, [=]() { /* D = (alpha A B + beta C) + bias per row */
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) out[(size_t)j * ld + i] += bias[i];
    });
    return CUBLAS_STATUS_SUCCESS;
}
}
