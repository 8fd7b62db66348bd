/* Built without the CUDA backend (no nvcc / cuBLAS, or -DVC_CUDA=OFF): every entry point fails with
 * one line saying so, so callers need no #ifdef. */
#include "verlc/cuda.h"

static vc_status off(void) {
    return vc_fail(VC_ERR_UNSUPPORTED, "cuda: verlc was built without the CUDA backend (rebuild with nvcc and "
                                       "cuBLAS, -DVC_CUDA=ON); use --device cpu");
}

int vc_cuda_device_count(void) { return 0; }
vc_status vc_cuda_init(int device) { (void)device; return off(); }
int vc_cuda_ready(void) { return 0; }
void vc_cuda_shutdown(void) {}
vc_status vc_cuda_device_name(char *buf, size_t len) { if (len) buf[0] = 0; return off(); }
void *vc_cuda_malloc(size_t bytes) { (void)bytes; off(); return NULL; }
void vc_cuda_free(void *p) { (void)p; }
void vc_cuda_fault_scratch_over(size_t bytes) { (void)bytes; }
vc_status vc_cuda_memset0(void *dst, size_t bytes) { (void)dst; (void)bytes; return off(); }
vc_status vc_cuda_h2d(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return off(); }
vc_status vc_cuda_d2h(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return off(); }
vc_status vc_cuda_d2d(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return off(); }
void *vc_cuda_stream(void) { return NULL; }
vc_status vc_cuda_sync(void) { return off(); }
void vc_cuda_profile_reset(void) {}
vc_status vc_cuda_error(void) { return VC_OK; }
void vc_cuda_clear_error(void) {}
vc_status vc_cuda_mem_info(size_t *used, size_t *free_bytes, size_t *total) {
    (void)used; (void)free_bytes; (void)total;
    return off();
}
vc_status vc_cuda_mem_peak(size_t *used_high, size_t *reserved_high) {
    (void)used_high; (void)reserved_high;
    return off();
}
const struct vc_backend *vc_backend_cuda(void) { return NULL; }
vc_status vc_cuda_gemm_algos(int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C, int want,
                             int iters, double *ms, int *n) {
    (void)M; (void)N; (void)K; (void)A; (void)B; (void)C; (void)want; (void)iters; (void)ms;
    *n = 0;
    return off();
}
vc_status vc_cuda_gemm_bf16_out(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                                int64_t lda, const uint16_t *B, int64_t ldb, float beta, void *C, int c_bf16,
                                int64_t ldc) {
    (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)alpha; (void)A; (void)lda; (void)B; (void)ldb; (void)beta;
    (void)C; (void)c_bf16; (void)ldc;
    return off();
}
vc_status vc_cuda_gemm_bf16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                            int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)alpha; (void)A; (void)lda; (void)B; (void)ldb; (void)beta;
    (void)C; (void)ldc;
    return off();
}
vc_status vc_cuda_bf16_shadow_add(const float *const *w, const int64_t *rows, const int64_t *cols, int n) {
    (void)w; (void)rows; (void)cols; (void)n;
    return off();
}
void vc_cuda_bf16_shadow_drop(void) {}
int vc_cuda_bf16_shadow_hits(void) { return 0; }
int vc_cuda_moe_mma_launches(void) { return 0; }
const void *vc_cuda_bf16_copy_at(const float *w, int64_t rows, int64_t cols) {
    (void)w, (void)rows, (void)cols;
    return NULL;
}
vc_status vc_cuda_peak_flops(int bf16, double *flops) { (void)bf16; *flops = 0; return off(); }
int vc_cuda_graphs_enabled(void) { return 0; }
vc_status vc_cuda_graph_begin(int replay) { (void)replay; return off(); }
vc_status vc_cuda_graph_end(int key, int *done) { (void)key; *done = 0; return off(); }
int vc_cuda_graph_ready(int key) { (void)key; return 0; }
void vc_cuda_graph_drop(void) {}
vc_status vc_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n) { (void)dst; (void)src; (void)n; return off(); }
vc_status vc_cuda_attn_decode_paged(float *o, float *lse, const float *q, const vc_paged_desc *d) {
    (void)o; (void)lse; (void)q; (void)d;
    return off();
}
vc_status vc_cuda_adamw_step(const struct vc_optim_param *params, float *const *m, float *const *v, size_t n_params,
                             const struct vc_adamw_config *cfg, int64_t step, double lr) {
    (void)params; (void)m; (void)v; (void)n_params; (void)cfg; (void)step; (void)lr;
    return off();
}
vc_status vc_cuda_grad_norm(const float *const *grads, const size_t *sizes, size_t n_tensors, double *norm) {
    (void)grads; (void)sizes; (void)n_tensors; (void)norm;
    return off();
}
vc_status vc_cuda_clip_grad_norm(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm,
                                 double *norm, int *finite) {
    (void)grads; (void)sizes; (void)n_tensors; (void)max_norm; (void)norm; (void)finite;
    return off();
}
