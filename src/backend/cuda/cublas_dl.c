/* cuBLAS loaded on first use (dlopen), not at program start: libcublas and libcublasLt are about 700 MB, and
 * mapping and relocating them cost every verlc process about 80 ms (most of a short command's run, and of the
 * tests' many launches) whether or not it ever touches a GPU. These are the cuBLAS entry points the backend
 * calls (cuda_runtime.cu); each resolves its symbol once. A missing library is the error of the first call:
 * cublasCreate fails, and cublasGetStatusString says which file could not be loaded, and why. */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static void *g_lib;
static char g_why[400];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load(void) {
    g_lib = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef VC_CUBLAS_DIR
    if (!g_lib) g_lib = dlopen(VC_CUBLAS_DIR "/" SONAME, RTLD_NOW | RTLD_LOCAL); /* the toolkit verlc was built with */
#endif
    if (!g_lib) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "%s could not be loaded (%s): install the CUDA toolkit's cuBLAS or use --device cpu",
                 SONAME, e ? e : "not found");
    }
}

static void *sym(const char *name) {
    pthread_once(&g_once, load);
    return g_lib ? dlsym(g_lib, name) : NULL;
}

/* one entry point: its pointer, resolved on the first call (a race only stores the same value twice) */
#define CUBLAS_ENTRY(name, params, args)                                                                      \
    cublasStatus_t CUBLASWINAPI name params {                                                                 \
        typedef cublasStatus_t (*fn_t) params;                                                                \
        static fn_t fn;                                                                                       \
        fn_t f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);                                                      \
        if (!f) {                                                                                             \
            f = (fn_t)sym(#name);                                                                             \
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

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    typedef const char *(*fn_t)(cublasStatus_t);
    fn_t f = (fn_t)sym("cublasGetStatusString");
    if (f) return f(status);
    return g_why[0] ? g_why : "cuBLAS status string unavailable";
}
