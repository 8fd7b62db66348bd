/* cuBLAS loaded on first use (dlopen), not at program start: libcublas and libcublasLt are about 700 MB, and
 * mapping and relocating them cost every verlc process about 80 ms (most of a short command's run, and of the
 * tests' many launches) whether or not it ever touches a GPU. These are the cuBLAS entry points the backend
 * calls (cuda_runtime.cu); each resolves its symbol once. A missing library is the error of the first call:
 * cublasCreate fails, and cublasGetStatusString says which file could not be loaded, and why. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)
#define LT_SONAME "libcublasLt.so." STR(CUBLAS_VER_MAJOR)

static void *g_lib, *g_lt_lib;
static char g_why[400];
static pthread_once_t g_once = PTHREAD_ONCE_INIT, g_lt_once = PTHREAD_ONCE_INIT;

static void *open_lib(const char *soname, const char *dir_path) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h && dir_path) h = dlopen(dir_path, RTLD_NOW | RTLD_LOCAL); /* the toolkit verlc was built with */
    return h;
}
#ifdef VC_CUBLAS_DIR
#define IN_DIR(so) VC_CUBLAS_DIR "/" so
#else
#define IN_DIR(so) NULL
#endif

static void load(void) {
    g_lib = open_lib(SONAME, IN_DIR(SONAME));
    if (!g_lib) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "%s could not be loaded (%s): install the CUDA toolkit's cuBLAS or use --device cpu",
                 SONAME, e ? e : "not found");
    }
}
/* cuBLASLt (the bias epilogue of cuda_lt.cu): a missing library makes its entries fail, and the GEMMs add the bias
 * themselves */
static void load_lt(void) { g_lt_lib = open_lib(LT_SONAME, IN_DIR(LT_SONAME)); }

static void *sym(const char *name) {
    pthread_once(&g_once, load);
    return g_lib ? dlsym(g_lib, name) : NULL;
}
static void *lt_sym(const char *name) {
    pthread_once(&g_lt_once, load_lt);
    return g_lt_lib ? dlsym(g_lt_lib, name) : NULL;
}

/* one entry point: its pointer, resolved on the first call (a race only stores the same value twice) */
#define CUBLAS_ENTRY(name, params, args) DL_ENTRY(sym, name, params, args)
#define LT_ENTRY(name, params, args) DL_ENTRY(lt_sym, name, params, args)
#define DL_ENTRY(find, name, params, args)                                                                    \
    cublasStatus_t CUBLASWINAPI name params {                                                                 \
        typedef cublasStatus_t (*fn_t) params;                                                                \
        static fn_t fn;                                                                                       \
        fn_t f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);                                                      \
        if (!f) {                                                                                             \
            f = (fn_t)find(#name);                                                                            \
            __atomic_store_n(&fn, f, __ATOMIC_RELEASE);                                                       \
        }                                                                                                     \
        return f ? f args : CUBLAS_STATUS_NOT_INITIALIZED;                                                    \
    }

CUBLAS_ENTRY(cublasCreate_v2, (cublasHandle_t * h), (h))
CUBLAS_ENTRY(cublasDestroy_v2, (cublasHandle_t h), (h))
CUBLAS_ENTRY(cublasSetStream_v2, (cublasHandle_t h, cudaStream_t s), (h, s))
CUBLAS_ENTRY(cublasSetMathMode, (cublasHandle_t h, cublasMath_t m), (h, m))
CUBLAS_ENTRY(cublasSetWorkspace_v2, (cublasHandle_t h, void *w, size_t n), (h, w, n))
CUBLAS_ENTRY(cublasSgemm_v2,
             (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
              const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc),
             (h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
CUBLAS_ENTRY(cublasGemmEx,
             (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
              const void *A, cudaDataType At, int lda, const void *B, cudaDataType Bt, int ldb, const void *beta,
              void *C, cudaDataType Ct, int ldc, cublasComputeType_t ct, cublasGemmAlgo_t algo),
             (h, ta, tb, m, n, k, alpha, A, At, lda, B, Bt, ldb, beta, C, Ct, ldc, ct, algo))

LT_ENTRY(cublasLtCreate, (cublasLtHandle_t * h), (h))
LT_ENTRY(cublasLtDestroy, (cublasLtHandle_t h), (h))
LT_ENTRY(cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t * d, cublasComputeType_t ct, cudaDataType_t st), (d, ct, st))
LT_ENTRY(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))
LT_ENTRY(cublasLtMatmulDescSetAttribute, (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *b, size_t n),
         (d, a, b, n))
LT_ENTRY(cublasLtMatrixLayoutCreate, (cublasLtMatrixLayout_t * l, cudaDataType t, uint64_t r, uint64_t c, int64_t ld),
         (l, t, r, c, ld))
LT_ENTRY(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))
LT_ENTRY(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * p), (p))
LT_ENTRY(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t p), (p))
LT_ENTRY(cublasLtMatmulPreferenceSetAttribute,
         (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void *b, size_t n), (p, a, b, n))
LT_ENTRY(cublasLtMatmulAlgoGetHeuristic,
         (cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
          cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int n,
          cublasLtMatmulHeuristicResult_t r[], int *got),
         (h, d, a, b, c, dd, p, n, r, got))
LT_ENTRY(cublasLtMatmul,
         (cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A, cublasLtMatrixLayout_t a,
          const void *B, cublasLtMatrixLayout_t b, const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
          cublasLtMatrixLayout_t dd, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn, cudaStream_t s),
         (h, d, alpha, A, a, B, b, beta, C, c, D, dd, algo, ws, wsn, s))

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    typedef const char *(*fn_t)(cublasStatus_t);
    fn_t f = (fn_t)sym("cublasGetStatusString");
    if (f) return f(status);
    return g_why[0] ? g_why : "cuBLAS status string unavailable";
}
